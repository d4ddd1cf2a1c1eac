/* client.c -- opening and closing a client (the top of the layering in
 * lease_internal.h: nothing in the library calls it): the engine's handle
 * it embeds, the scripts it gives the engine (lib/lease/ .lua files, embedded at
 * build time), and the lease layer's check of a server before the first
 * token on a connection. */
#include "lease_internal.h"
#include "lease_async.h"

#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_TIMEOUT_MS 2000
#define DEFAULT_RENEW_BATCH 500
#define MAX_RENEW_BATCH 5000
#define MAX_TIMEOUT_MS 600000
#define MAX_PREFIX 64

void fence_client_options_init(fence_client_options *o)
{
    if (o != NULL) {
        memset(o, 0, sizeof *o);
    }
}

extern const char fence__lua_acquire[], fence__lua_renew[], fence__lua_renew_batch[],
    fence__lua_release[], fence__lua_token_raise[], fence__lua_inspect[];
extern const size_t fence__lua_acquire_len, fence__lua_renew_len, fence__lua_renew_batch_len,
    fence__lua_release_len, fence__lua_token_raise_len, fence__lua_inspect_len;

/* The engine knows the scripts by index (enum fence__script). */
static void set_scripts(fence__redis *rd)
{
    const char *body[FENCE__NSCRIPTS] = {
        [FENCE__ACQUIRE] = fence__lua_acquire,
        [FENCE__RENEW] = fence__lua_renew,
        [FENCE__RENEW_BATCH] = fence__lua_renew_batch,
        [FENCE__RELEASE] = fence__lua_release,
        [FENCE__TOKEN_RAISE] = fence__lua_token_raise,
        [FENCE__INSPECT] = fence__lua_inspect,
    };
    size_t len[FENCE__NSCRIPTS] = {
        [FENCE__ACQUIRE] = fence__lua_acquire_len,
        [FENCE__RENEW] = fence__lua_renew_len,
        [FENCE__RENEW_BATCH] = fence__lua_renew_batch_len,
        [FENCE__RELEASE] = fence__lua_release_len,
        [FENCE__TOKEN_RAISE] = fence__lua_token_raise_len,
        [FENCE__INSPECT] = fence__lua_inspect_len,
    };
    rd->nscripts = FENCE__NSCRIPTS;
    for (int s = 0; s < FENCE__NSCRIPTS; s++) {
        rd->script[s] = body[s];
        rd->script_len[s] = len[s];
    }
}

/* The engine's first_use hook: before the first token on a connection,
 * record the persistence gauge and refuse a server that can evict the
 * counters (FENCE_ECONFIG, a message naming the policy) unless the client
 * allows eviction. */
static fence_status check_server(void *arg, const fence_server_info *si)
{
    fence_client *c = arg;
    atomic_store(&c->m.persistence, fence__persistence_gauge(si->persistence));
    if (c->allow_eviction) {
        return FENCE_OK;
    }
    if (si->maxmemory_policy[0] == '\0') {
        return fence__fail(c, FENCE_ECONFIG, "%s: cannot read maxmemory_policy (INFO memory "
                           "refused?): an allkeys-* policy could evict token counters; set "
                           "allow_eviction to issue tokens anyway", c->rd.url.display);
    }
    if (strncmp(si->maxmemory_policy, "allkeys-", 8) == 0) {
        return fence__fail(c, FENCE_ECONFIG, "%s: maxmemory-policy is %s: Redis may evict a held "
                           "lease or token counter (two holders, tokens repeated); use noeviction or a "
                           "volatile-* policy, or set allow_eviction", c->rd.url.display,
                           si->maxmemory_policy);
    }
    return FENCE_OK;
}

static char *dup_secret(const char *s, int *nomem)
{
    char *d = strdup(s);
    *nomem |= d == NULL;
    return d;
}

/* The options of issue 8: token mode, jump, eviction, the WAIT gate. */
static fence_status check_token_opts(fence_client *c, const fence_client_options *o)
{
    if (o->token_mode != FENCE_TOKENS_CLOCK && o->token_mode != FENCE_TOKENS_DENSE) {
        return fence__fail(c, FENCE_EINVAL, "token_mode must be FENCE_TOKENS_CLOCK (0) or "
                           "FENCE_TOKENS_DENSE (1)");
    }
    if (o->token_jump_ms < 0 || o->token_jump_ms > FENCE_TOKEN_JUMP_MAX_MS) {
        return fence__fail(c, FENCE_EINVAL, "token_jump_ms must be 0 (default %d) to %lld ms",
                           FENCE_TOKEN_JUMP_DEFAULT_MS, (long long)FENCE_TOKEN_JUMP_MAX_MS);
    }
    if (o->token_jump_ms != 0 && o->token_mode == FENCE_TOKENS_DENSE) {
        return fence__fail(c, FENCE_EINVAL, "token_jump_ms applies to clock tokens only "
                           "(token_mode is FENCE_TOKENS_DENSE)");
    }
    if (o->clock_behind_limit_ms < 0 || o->clock_behind_limit_ms > FENCE_TOKEN_JUMP_MAX_MS) {
        return fence__fail(c, FENCE_EINVAL, "clock_behind_limit_ms must be 0 (none) to %lld ms",
                           (long long)FENCE_TOKEN_JUMP_MAX_MS);
    }
    if (o->clock_behind_limit_ms != 0 && o->token_mode == FENCE_TOKENS_DENSE) {
        return fence__fail(c, FENCE_EINVAL, "clock_behind_limit_ms applies to clock tokens only "
                           "(token_mode is FENCE_TOKENS_DENSE)");
    }
    if (o->counter_idle_ms < -1 || o->counter_idle_ms > FENCE_COUNTER_IDLE_MAX_MS) {
        return fence__fail(c, FENCE_EINVAL, "counter_idle_ms must be -1 (never), 0 (default "
                           "%lld) or 1 to %lld ms", (long long)FENCE_COUNTER_IDLE_DEFAULT_MS,
                           (long long)FENCE_COUNTER_IDLE_MAX_MS);
    }
    if (o->counter_idle_ms != 0 && o->token_mode == FENCE_TOKENS_DENSE) {
        return fence__fail(c, FENCE_EINVAL, "counter_idle_ms applies to clock tokens only "
                           "(dense counters never expire)");
    }
    if (o->allow_eviction != 0 && o->allow_eviction != 1) {
        return fence__fail(c, FENCE_EINVAL, "allow_eviction must be 0 or 1");
    }
    if (o->min_replicas < 0 || o->min_replicas > FENCE_MIN_REPLICAS_MAX) {
        return fence__fail(c, FENCE_EINVAL, "min_replicas must be 0 (off) to %d",
                           FENCE_MIN_REPLICAS_MAX);
    }
    if (o->replica_timeout_ms < 0 || o->replica_timeout_ms > FENCE_REPLICA_TIMEOUT_MAX_MS) {
        return fence__fail(c, FENCE_EINVAL, "replica_timeout_ms must be 0 (default %d) to %d ms",
                           FENCE_REPLICA_TIMEOUT_DEFAULT_MS, FENCE_REPLICA_TIMEOUT_MAX_MS);
    }
    if (o->replica_timeout_ms != 0 && o->min_replicas == 0) {
        return fence__fail(c, FENCE_EINVAL, "replica_timeout_ms needs min_replicas > 0");
    }
    c->token_mode = o->token_mode;
    c->token_jump_ms = o->token_jump_ms ? o->token_jump_ms : FENCE_TOKEN_JUMP_DEFAULT_MS;
    c->clock_behind_limit_ms = o->clock_behind_limit_ms;
    c->counter_idle_ms = o->counter_idle_ms ? o->counter_idle_ms : FENCE_COUNTER_IDLE_DEFAULT_MS;
    c->allow_eviction = o->allow_eviction;
    c->min_replicas = o->min_replicas;
    c->replica_timeout_ms = o->replica_timeout_ms ? o->replica_timeout_ms
                                                  : FENCE_REPLICA_TIMEOUT_DEFAULT_MS;
    return FENCE_OK;
}

static fence_status setup(fence_client *c, const fence_client_options *o)
{
    char err[256];
    fence_status tst = check_token_opts(c, o);
    if (tst != FENCE_OK) {
        return tst;
    }
    if (o->connect_timeout_ms < 0 || o->connect_timeout_ms > MAX_TIMEOUT_MS ||
        o->io_timeout_ms < 0 || o->io_timeout_ms > MAX_TIMEOUT_MS) {
        return fence__fail(c, FENCE_EINVAL, "timeouts must be 0 (default) to %d ms",
                           MAX_TIMEOUT_MS);
    }
    if (o->heartbeat_mode != FENCE_HEARTBEAT_THREAD && o->heartbeat_mode != FENCE_HEARTBEAT_MANUAL) {
        return fence__fail(c, FENCE_EINVAL, "heartbeat_mode must be FENCE_HEARTBEAT_THREAD or "
                           "FENCE_HEARTBEAT_MANUAL");
    }
    if (o->renew_batch < 0 || o->renew_batch > MAX_RENEW_BATCH) {
        return fence__fail(c, FENCE_EINVAL, "renew_batch must be 0 (default %d) to %d",
                           DEFAULT_RENEW_BATCH, MAX_RENEW_BATCH);
    }
    const char *prefix = o->prefix != NULL ? o->prefix : "fence:";
    if (strlen(prefix) > MAX_PREFIX) {
        return fence__fail(c, FENCE_EINVAL, "prefix longer than %d bytes", MAX_PREFIX);
    }
    if (strchr(prefix, '{') != NULL || strchr(prefix, '}') != NULL) {
        return fence__fail(c, FENCE_EINVAL, "prefix must not contain '{' or '}' (the lease "
                           "name is the hash tag)");
    }
    int st = fence__url_parse(&c->rd.url, o->url, err, sizeof err);
    if (st != FENCE_OK) {
        return fence__fail(c, st == FENCE_ENOMEM ? FENCE_ENOMEM : FENCE_EINVAL, "%s",
                           st == FENCE_ENOMEM ? "out of memory" : err);
    }
    st = fence__conn_config(&c->rd, o); /* TLS, the Sentinels' credentials */
    if (st != FENCE_OK) {
        return st;
    }
    int nomem = 0;
    if (o->username != NULL) {
        fence__wipe_free(c->rd.url.user);
        c->rd.url.user = dup_secret(o->username, &nomem);
    }
    if (o->password != NULL) {
        fence__wipe_free(c->rd.url.password);
        c->rd.url.password = dup_secret(o->password, &nomem);
    }
    c->prefix = strdup(prefix);
    if (nomem || c->prefix == NULL) {
        return fence__fail(c, FENCE_ENOMEM, "out of memory");
    }
    if (c->rd.url.user != NULL && c->rd.url.password == NULL) {
        return fence__fail(c, FENCE_EINVAL, "a user name needs a password");
    }
    c->rd.connect_timeout_ms = o->connect_timeout_ms ? o->connect_timeout_ms : DEFAULT_TIMEOUT_MS;
    c->rd.io_timeout_ms = o->io_timeout_ms ? o->io_timeout_ms : DEFAULT_TIMEOUT_MS;
    c->heartbeat_mode = o->heartbeat_mode;
    c->renew_batch = o->renew_batch ? o->renew_batch : DEFAULT_RENEW_BATCH;
    c->ready = 1;
    return FENCE_OK;
}

/* Connect the command connection and load the scripts. */
static fence_status connect_cmd(fence_client *c)
{
    pthread_mutex_lock(&c->rd.cmd_lock);
    /* Nobody else uses the line yet: the setup goes directly. */
    fence__conn **cn = &c->rd.cmd.p.cn;
    fence_status st = fence__conn_open(&c->rd, cn, 0);
    c->rd.cmd.ever = st == FENCE_OK;
    c->rd.cmd.gen += st == FENCE_OK;
    if (st == FENCE_OK) {
        /* CLUSTER SLOTS rides along: a cluster is detected at no cost
         * (a Sentinel-managed master is never one). */
        void *slots = NULL;
        fence__scripts_load(&c->rd, *cn, c->rd.url.sentinel ? NULL : &slots);
        if ((*cn)->err) {
            st = fence__fail(c, FENCE_ECONN, "%s: connection failed: %s", c->rd.url.display,
                             (*cn)->errstr);
            fence__conn_drop(cn);
        } else {
            st = fence__cluster_init(&c->rd, slots,
                                     c->rd.url.is_unix ? "127.0.0.1" : c->rd.url.host);
        }
        if (slots != NULL) {
            freeReplyObject(slots);
        }
    }
    pthread_mutex_unlock(&c->rd.cmd_lock);
    return st;
}

/* A server that wants a password we did not give answers NOAUTH only
 * now: ask it something harmless to find out. */
static fence_status probe(fence_client *c)
{
    char *k1 = fence__key(c, "probe", "");
    char *k2 = fence__key(c, "probe", ":token");
    const char *args[2] = {k1, k2};
    void *r = NULL;
    fence_status st = k1 && k2
                          ? fence__eval_cmd(&c->rd, FENCE__INSPECT, 2, 2, args, 0, NULL, NULL, &r)
                               : fence__fail(c, FENCE_ENOMEM, "out of memory");
    if (r != NULL) {
        freeReplyObject(r);
    }
    free(k1);
    free(k2);
    return st;
}

/* A new handle with its locks and engine set up, options not yet read
 * (*out is set even when o is NULL, so its message can be read). */
static fence_status client_new(fence_client **out, const fence_client_options *o,
                               const char *fn)
{
    fence_client *c = calloc(1, sizeof *c);
    if (c == NULL) {
        return fence__fail(NULL, FENCE_ENOMEM, "out of memory");
    }
    fence__cond_init_monotonic(&c->cond);
    pthread_mutex_init(&c->lock, NULL);
    if (fence__rd_init(&c->rd) != 0) {
        pthread_mutex_destroy(&c->rd.cmd_lock);
        pthread_mutex_destroy(&c->lock);
        pthread_cond_destroy(&c->cond);
        free(c);
        return fence__fail(NULL, FENCE_ENOMEM, "out of memory (a condition variable)");
    }
    c->rd.errkey = c;
    set_scripts(&c->rd);
    c->rd.first_use = check_server;
    c->rd.first_use_arg = c;
    pthread_mutex_init(&c->hb_lock, NULL);
    c->hb_wake_us = INT64_MAX;
    atomic_init(&c->m.persistence, -1);
    *out = c;
    if (o == NULL) {
        return fence__fail(c, FENCE_EINVAL, "%s: options are NULL", fn);
    }
    return setup(c, o);
}

fence_status fence_client_open(fence_client **out, const fence_client_options *o)
{
    if (out == NULL) {
        return fence__fail(NULL, FENCE_EINVAL, "fence_client_open: out is NULL");
    }
    *out = NULL;
    fence_status st = client_new(out, o, "fence_client_open");
    if (st != FENCE_OK) {
        return st;
    }
    fence_client *c = *out;
    st = connect_cmd(c);
    if (st == FENCE_OK) {
        st = probe(c);
    }
    if (st == FENCE_OK) {
        fence__clear(c);
    }
    return st;
}

fence_status fence_client_open_url(fence_client **out, const char *url)
{
    fence_client_options o;
    fence_client_options_init(&o);
    if (url == NULL) {
        const char *env = getenv("FENCE_REDIS_URL");
        url = env != NULL && env[0] != '\0' ? env : "redis://127.0.0.1:6379";
    }
    o.url = url;
    return fence_client_open(out, &o);
}

void fence_client_close(fence_client *c)
{
    if (c == NULL) {
        return;
    }
    fence__heartbeat_stop(c);
    for (;;) {
        pthread_mutex_lock(&c->lock);
        fence_lease *l = c->leases;
        pthread_mutex_unlock(&c->lock);
        if (l == NULL) {
            break;
        }
        fence_status st = fence_release(l); /* best effort; it unlinks and frees */
        if (st == FENCE_ECONN || st == FENCE_EAUTH) {
            /* Unreachable (the connection is down, not merely an
             * ambiguous answer): do not pay a timeout per lease; the rest
             * expire by their TTL. */
            pthread_mutex_lock(&c->rd.cmd_lock);
            /* In a cluster, the call's own bound already gave up.  A
             * request still queued is one the server has not answered. */
            const fence__pipe *p = &c->rd.cmd.p;
            int down = c->rd.cl != NULL || p->cn == NULL || p->cn->err != 0 || p->head != NULL;
            pthread_mutex_unlock(&c->rd.cmd_lock);
            pthread_mutex_lock(&c->lock);
            c->offline = down || st == FENCE_EAUTH;
            pthread_mutex_unlock(&c->lock);
        }
    }
    fence__conn_drop(&c->hb);
    fence__rd_close(&c->rd);
    free(c->prefix);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->hb_lock);
    pthread_cond_destroy(&c->cond);
    fence__clear(c);
    free(c);
}

const char *fence_client_url(const fence_client *c)
{
    return c != NULL ? c->rd.url.display : "";
}

/* ---- for the asynchronous API ---------------------------------------------- */

fence_status fence__client_prepare(fence_client **out, const fence_client_options *o)
{
    *out = NULL;
    fence_status st = client_new(out, o, "fence_client_open");
    if (st == FENCE_OK) {
        fence__clear(*out);
    }
    return st;
}

void fence__client_close_offline(fence_client *c)
{
    if (c != NULL) {
        pthread_mutex_lock(&c->lock);
        c->offline = 1;
        pthread_mutex_unlock(&c->lock);
        fence_client_close(c);
    }
}
