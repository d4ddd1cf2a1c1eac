/* leaseutil.c -- helpers shared by the core suites; see leaseutil.h. */
#include "leaseutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

fence_client *lu_open_url(const char *url)
{
    fence_client *c = NULL;
    int rc = fence_client_open_url(&c, url);
    ck_assert_msg(rc == FENCE_OK, "fence_client_open_url: %s (%s)", fence_status_name(rc),
                  c != NULL ? fence_client_errmsg(c) : "no handle");
    ck_assert_ptr_nonnull(c);
    return c;
}

fence_client *lu_open_client(void)
{
    return lu_open_url(tu_env("FENCE_TEST_REDIS_URL"));
}

fence_client *lu_open_client_mode(int mode)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = tu_env("FENCE_TEST_REDIS_URL");
    o.heartbeat_mode = mode;
    fence_client *c = NULL;
    int rc = fence_client_open(&c, &o);
    ck_assert_msg(rc == FENCE_OK, "fence_client_open: %s (%s)", fence_status_name(rc),
                  c != NULL ? fence_client_errmsg(c) : "no handle");
    ck_assert_ptr_nonnull(c);
    return c;
}

fence_client *lu_open_opts(const fence_client_options *o)
{
    fence_client *c = NULL;
    int rc = fence_client_open(&c, o);
    ck_assert_msg(rc == FENCE_OK, "fence_client_open: %s (%s)", fence_status_name(rc),
                  c != NULL ? fence_client_errmsg(c) : "no handle");
    ck_assert_ptr_nonnull(c);
    return c;
}

fence_client *lu_open_dense_url(const char *url)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url;
    o.token_mode = FENCE_TOKENS_DENSE;
    return lu_open_opts(&o);
}

fence_client *lu_open_dense(void)
{
    return lu_open_dense_url(tu_env("FENCE_TEST_REDIS_URL"));
}

char *lu_counter(redisContext *r, const char *key)
{
    redisReply *rep = redisCommand(r, "HGET %s n", key);
    ck_assert_msg(rep != NULL, "HGET %s n: %s", key, r->errstr);
    ck_assert_msg(rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_NIL,
                  "HGET %s n: unexpected reply type %d (%s)", key, rep->type,
                  rep->type == REDIS_REPLY_ERROR ? rep->str : "");
    char *v = rep->type == REDIS_REPLY_STRING ? strdup(rep->str) : NULL;
    freeReplyObject(rep);
    return v;
}

void lu_expect_counter(redisContext *r, const char *key, const char *want)
{
    char *v = lu_counter(r, key);
    ck_assert_msg(v != NULL, "counter %s is missing (wanted n = %s)", key, want);
    ck_assert_msg(strcmp(v, want) == 0, "counter %s: n = %s, wanted %s", key, v, want);
    free(v);
}

const char *lu_hostport(const char *env)
{
    const char *url = tu_env(env);
    const char *p = strstr(url, "://");
    ck_assert_msg(p != NULL, "%s=\"%s\" is not a URL", env, url);
    return p + 3;
}

/* fence_acquire() with LO that must succeed, with a token of at least 1. */
static fence_lease *acquire_with(fence_client *c, const char *name, const fence_lease_options *lo)
{
    fence_lease *l = NULL;
    int rc = fence_acquire(c, name, lo, &l);
    ck_assert_msg(rc == FENCE_OK, "fence_acquire(%s): %s (%s)", name, fence_status_name(rc),
                  fence_client_errmsg(c));
    ck_assert_ptr_nonnull(l);
    ck_assert_uint_ge(fence_lease_token(l), 1);
    return l;
}

fence_lease *lu_acquire_ok(fence_client *c, const char *name, int64_t ttl_ms, int64_t wait_ms)
{
    fence_lease_options lo;
    fence_lease_options_init(&lo, ttl_ms);
    lo.wait_ms = wait_ms;
    return acquire_with(c, name, &lo);
}

fence_lease *lu_acquire_cb(fence_client *c, const char *name, int64_t ttl_ms, int64_t every,
                           int no_heartbeat, lu_lost *lr)
{
    fence_lease_options lo;
    fence_lease_options_init(&lo, ttl_ms);
    lo.renew_every_ms = every;
    lo.no_heartbeat = no_heartbeat;
    if (lr != NULL) {
        lo.on_lost = lu_on_lost;
        lo.user = lr;
    }
    return acquire_with(c, name, &lo);
}

fence_lease *lu_acquire_after_restart(fence_client *c, const char *name, int64_t ttl_ms)
{
    fence_lease *l = NULL;
    int first = fence_try_acquire(c, name, ttl_ms, &l);
    int rc = first;
    if (rc == FENCE_ECONN) { /* one failed call while reconnecting is allowed */
        rc = fence_try_acquire(c, name, ttl_ms, &l);
    }
    ck_assert_msg(rc == FENCE_OK, "acquire after restart: %s, then %s (%s)",
                  fence_status_name(first), fence_status_name(rc), fence_client_errmsg(c));
    ck_assert_ptr_nonnull(l);
    return l;
}

fence_metrics lu_metrics(fence_client *c)
{
    fence_metrics m;
    memset(&m, 0, sizeof m);
    EXPECT_RC(fence_client_metrics(c, &m), FENCE_OK, c);
    return m;
}

uint64_t lu_latency_total(const fence_metrics *m)
{
    uint64_t sum = 0;
    for (int i = 0; i < FENCE_LATENCY_NBUCKETS; i++) {
        sum += m->heartbeat_latency_bucket[i];
    }
    return sum;
}

/* A truncated key would make a test probe the wrong key and pass. */
static void key_into(char *buf, size_t n, const char *name, const char *suffix)
{
    int len = snprintf(buf, n, "fence:{%s}%s", name, suffix);
    ck_assert_msg(len >= 0 && (size_t)len < n, "key for \"%s\" does not fit in %zu bytes", name,
                  n);
}

void lu_owner_key(char *buf, size_t n, const char *name)
{
    key_into(buf, n, name, "");
}

void lu_token_key(char *buf, size_t n, const char *name)
{
    key_into(buf, n, name, ":token");
}

char *lu_rget(redisContext *r, const char *key)
{
    redisReply *rep = redisCommand(r, "GET %s", key);
    ck_assert_msg(rep != NULL, "GET %s: %s", key, r->errstr);
    char *v = NULL;
    if (rep->type == REDIS_REPLY_STRING) {
        v = strdup(rep->str);
        ck_assert_ptr_nonnull(v);
    } else {
        ck_assert_msg(rep->type == REDIS_REPLY_NIL, "GET %s: unexpected reply type %d", key,
                      rep->type);
    }
    freeReplyObject(rep);
    return v;
}

void lu_expect_get(redisContext *r, const char *key, const char *want)
{
    char *v = lu_rget(r, key);
    ck_assert_msg(v != NULL, "key %s is missing; expected \"%s\"", key, want);
    int same = strcmp(v, want) == 0;
    char got[256];
    snprintf(got, sizeof got, "%s", v);
    free(v);
    ck_assert_msg(same, "key %s holds \"%s\"; expected \"%s\"", key, got, want);
}

long long lu_rint(redisContext *r, const char *cmd, const char *key)
{
    redisReply *rep = redisCommand(r, "%s %s", cmd, key);
    ck_assert_msg(rep != NULL, "%s %s: %s", cmd, key, r->errstr);
    ck_assert_msg(rep->type == REDIS_REPLY_INTEGER, "%s %s: reply type %d", cmd, key, rep->type);
    long long v = rep->integer;
    freeReplyObject(rep);
    return v;
}

long long lu_rpttl(redisContext *r, const char *key)
{
    return lu_rint(r, "PTTL", key);
}

void lu_expect_counter_kept(redisContext *r, const char *key)
{
    long long pttl = lu_rpttl(r, key);
    ck_assert_msg(pttl == -1 || pttl > FENCE_COUNTER_IDLE_DEFAULT_MS - 60000,
                  "counter %s: PTTL %lld, want none (dense) or about a day (clock)", key, pttl);
}

long long lu_rexists(redisContext *r, const char *key)
{
    return lu_rint(r, "EXISTS", key);
}

long long lu_rdel(redisContext *r, const char *key)
{
    return lu_rint(r, "DEL", key);
}

void lu_expect_eauth(const char *url, const char *secret)
{
    fence_client *c = NULL;
    int rc = fence_client_open_url(&c, url);
    if (rc == FENCE_OK) { /* a lazy connection must refuse at the first call */
        fence_lease *l = NULL;
        rc = fence_try_acquire(c, tu_name("eauth"), 1000, &l);
        ck_assert_ptr_null(l);
    }
    ck_assert_msg(rc == FENCE_EAUTH, "%s: got %s, expected FENCE_EAUTH (%s)", "wrong credentials",
                  fence_status_name(rc), c != NULL ? fence_client_errmsg(c) : "no handle");
    ck_assert_ptr_nonnull(c);
    const char *msg = fence_client_errmsg(c);
    ck_assert_str_ne(msg, "");
    ck_assert_msg(strstr(msg, secret) == NULL, "errmsg shows the password: \"%s\"", msg);
    ck_assert_msg(strstr(fence_client_url(c), secret) == NULL, "url shows the password: \"%s\"",
                  fence_client_url(c));
    fence_client_close(c);
}

void lu_ensure_redis_up(void)
{
    const char *port = getenv("FENCE_TEST_REDIS_PORT");
    const char *ctl = getenv("FENCE_TEST_REDIS_CTL");
    if (port == NULL || ctl == NULL) {
        return;
    }
    struct timeval tv = {1, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", atoi(port), tv);
    int up = r != NULL && r->err == 0;
    redisFree(r);
    if (!up) {
        char line[1024];
        snprintf(line, sizeof line, "%s start", ctl);
        if (system(line) != 0) {
            fprintf(stderr, "%s: could not restart the test Redis\n",
                    program_invocation_short_name);
        }
    }
}

void lu_lost_init(lu_lost *lr)
{
    atomic_init(&lr->calls, 0);
    atomic_init(&lr->reason, -1);
    atomic_init(&lr->bad_lease, 0);
    atomic_init(&lr->release_inside, 0);
    atomic_init(&lr->release_rc, -1);
}

void lu_on_lost(fence_lease *lease, int reason, void *user)
{
    lu_lost *lr = user;
    atomic_store(&lr->reason, reason);
    if (lease == NULL) {
        atomic_fetch_add(&lr->bad_lease, 1);
    }
    if (atomic_load(&lr->release_inside)) {
        /* The lease is lost: everything reports so from inside, too. */
        if (!fence_lease_lost(lease) || fence_lease_valid_ms(lease) != 0) {
            atomic_fetch_add(&lr->bad_lease, 1);
        }
        atomic_store(&lr->release_rc, fence_release(lease));
    }
    atomic_fetch_add(&lr->calls, 1);
}

int64_t lu_wait_lost(lu_lost *lr, int64_t timeout_ms)
{
    int64_t t0 = tu_now_ms();
    while (atomic_load(&lr->calls) == 0 && tu_now_ms() - t0 < timeout_ms) {
        tu_sleep_ms(5);
    }
    return tu_now_ms() - t0;
}

redisContext *tu_redis(void)
{
    int port = atoi(tu_env("FENCE_TEST_REDIS_PORT"));
    struct timeval tv = {2, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", port, tv);
    ck_assert_msg(r != NULL && r->err == 0, "cannot connect to the test Redis on port %d: %s",
                  port, r ? r->errstr : "out of memory");
    redisSetTimeout(r, tv);
    return r;
}

void tu_redis_ctl(const char *cmd)
{
    char line[1024];
    snprintf(line, sizeof line, "%s %s", tu_env("FENCE_TEST_REDIS_CTL"), cmd);
    int rc = system(line);
    ck_assert_msg(rc == 0, "'%s' failed (status %d)", line, rc);
}
