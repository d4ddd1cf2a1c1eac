/* issuers.c -- the issuers a URL can name, and which of them this build
 * has.  A URL's scheme picks one; an option that only another issuer has is
 * refused with a message naming both (so a Redis option is never silently
 * ignored by another issuer); an issuer this build lacks is refused as such,
 * never stood in for. */
#include "lease_internal.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* The options of fence_client_options that not every issuer has. */
enum {
    OPT_PREFIX = 1u << 0,
    OPT_TOKEN_MODE = 1u << 1,
    OPT_TOKEN_JUMP = 1u << 2,
    OPT_ALLOW_EVICTION = 1u << 3,
    OPT_MIN_REPLICAS = 1u << 4,
    OPT_REPLICA_TIMEOUT = 1u << 5,
    OPT_TLS = 1u << 6,
    OPT_SENTINEL = 1u << 7,
    OPT_CLOCK_LIMIT = 1u << 8,
    OPT_COUNTER_IDLE = 1u << 9
};

typedef struct issuer_entry {
    const char *name;  /* fence_url_issuer(), fence_client_issuer() */
    const char *label; /* for messages */
    const char *schemes[5];
    unsigned options;  /* which of OPT_* it takes */
    const fence__issuer_ops *ops; /* NULL: not in this build */
} issuer_entry;

static const issuer_entry issuers[] = {
    {"redis", "Redis", {"redis://", "rediss://", "unix://", "redis-sentinel://", NULL},
     OPT_PREFIX | OPT_TOKEN_MODE | OPT_TOKEN_JUMP | OPT_ALLOW_EVICTION | OPT_MIN_REPLICAS |
         OPT_REPLICA_TIMEOUT | OPT_TLS | OPT_SENTINEL | OPT_CLOCK_LIMIT | OPT_COUNTER_IDLE,
     &fence__redis_issuer},
    /* PostgreSQL takes none of the Redis options: its own (fence_wait) is a
     * parameter of its URL (lib/lease/pg/pconn.c). */
    {"postgresql", "PostgreSQL", {"postgresql://", "postgres://", NULL}, 0, &fence__pg_issuer},
    /* Issue 29: its options are added with it. */
    {"etcd", "etcd", {"etcd://", "etcds://", NULL}, 0, NULL},
};
#define NISSUERS (sizeof issuers / sizeof issuers[0])

/* Which options o sets, and the name of each bit. */
static const struct {
    unsigned bit;
    const char *name;
} opt_names[] = {
    {OPT_PREFIX, "prefix"},
    {OPT_TOKEN_MODE, "token_mode"},
    {OPT_TOKEN_JUMP, "token_jump_ms"},
    {OPT_ALLOW_EVICTION, "allow_eviction"},
    {OPT_MIN_REPLICAS, "min_replicas"},
    {OPT_REPLICA_TIMEOUT, "replica_timeout_ms"},
    {OPT_TLS, "tls / tls_* (TLS options)"},
    {OPT_SENTINEL, "sentinel_username / sentinel_password"},
    {OPT_CLOCK_LIMIT, "clock_behind_limit_ms"},
    {OPT_COUNTER_IDLE, "counter_idle_ms"},
};

static unsigned options_set(const fence_client_options *o)
{
    unsigned m = 0;
    m |= o->prefix != NULL ? OPT_PREFIX : 0;
    m |= o->token_mode != 0 ? OPT_TOKEN_MODE : 0;
    m |= o->token_jump_ms != 0 ? OPT_TOKEN_JUMP : 0;
    m |= o->allow_eviction != 0 ? OPT_ALLOW_EVICTION : 0;
    m |= o->min_replicas != 0 ? OPT_MIN_REPLICAS : 0;
    m |= o->replica_timeout_ms != 0 ? OPT_REPLICA_TIMEOUT : 0;
    m |= o->tls != 0 || o->tls_ca_file != NULL || o->tls_ca_dir != NULL ||
                 o->tls_cert_file != NULL || o->tls_key_file != NULL ||
                 o->tls_server_name != NULL || o->tls_insecure != 0
             ? OPT_TLS : 0;
    m |= o->sentinel_password != NULL || o->sentinel_username != NULL ? OPT_SENTINEL : 0;
    m |= o->clock_behind_limit_ms != 0 ? OPT_CLOCK_LIMIT : 0;
    m |= o->counter_idle_ms != 0 ? OPT_COUNTER_IDLE : 0;
    return m;
}

/* The entry whose scheme url starts with, or NULL. */
static const issuer_entry *entry_of(const char *url)
{
    for (size_t i = 0; url != NULL && i < NISSUERS; i++) {
        for (const char *const *s = issuers[i].schemes; *s != NULL; s++) {
            if (strncmp(url, *s, strlen(*s)) == 0) {
                return &issuers[i];
            }
        }
    }
    return NULL;
}

const char *fence_url_issuer(const char *url)
{
    const issuer_entry *e = entry_of(url);
    return e != NULL ? e->name : NULL;
}

/* The issuers that take option bit, as "Redis" or "Redis and etcd". */
static void who_has(unsigned bit, char *buf, size_t size)
{
    buf[0] = '\0';
    for (size_t i = 0; i < NISSUERS; i++) {
        if (issuers[i].options & bit) {
            size_t n = strlen(buf);
            snprintf(buf + n, size - n, "%s%s", n > 0 ? " and " : "", issuers[i].label);
        }
    }
}

fence_status fence__issuer_pick(fence_client *c, const fence_client_options *o,
                                const fence__issuer_ops **ops)
{
    const char *url = o->url;
    const issuer_entry *e = entry_of(url);
    if (url == NULL || url[0] == '\0') {
        e = &issuers[0]; /* its URL parser says what is missing */
    }
    if (e == NULL) {
        return fence__fail(c, FENCE_EINVAL, "unsupported URL scheme: expected redis://, "
                           "rediss:// (TLS), redis-sentinel://host[:port][,...]#master or "
                           "unix:///path (Redis), postgresql:// or etcd:// (where built in)");
    }
    unsigned extra = options_set(o) & ~e->options;
    for (size_t i = 0; extra != 0 && i < sizeof opt_names / sizeof opt_names[0]; i++) {
        if (extra & opt_names[i].bit) {
            char has[64];
            who_has(opt_names[i].bit, has, sizeof has);
            return fence__fail(c, FENCE_EINVAL, "%s is an option of the %s issuer only; this "
                               "URL names the %s issuer", opt_names[i].name, has, e->label);
        }
    }
    if (e->ops == NULL) {
        return fence__fail(c, FENCE_EINVAL, "the %s issuer (%s URLs) is not available in this "
                           "build of libfence", e->label, e->schemes[0]);
    }
    *ops = e->ops;
    return FENCE_OK;
}

const char *fence_client_issuer(const fence_client *c)
{
    return c != NULL && c->ops != NULL ? c->ops->name : "";
}
