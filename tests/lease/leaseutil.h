/* leaseutil.h -- helpers shared by the core suites (test_lease, test_client,
 * test_heartbeat, test_badinput), on top of testutil.h.  Each one (but
 * lu_ensure_redis_up and the lost callback) fails the running test with a
 * message naming what went wrong, so callers need no error paths; call them
 * from the test's own thread.  Strings returned are malloc'd only where said. */
#ifndef FENCE_LEASEUTIL_H
#define FENCE_LEASEUTIL_H
#include "fence.h"
#include "testutil.h"

#include <hiredis/hiredis.h>

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Assert that EXPR returns the status WANT; shows both names and the errmsg
 * of client C (which may be NULL). */
#define EXPECT_RC(expr, want, c)                                                        \
    do {                                                                                \
        int rc_ = (expr);                                                               \
        ck_assert_msg(rc_ == (want), "%s returned %s, expected %s (errmsg: \"%s\")",    \
                      #expr, fence_status_name(rc_), fence_status_name(want),           \
                      (c) != NULL ? fence_client_errmsg(c) : "-");                      \
    } while (0)

/* A client on URL with default options; fails the test unless it opens. */
fence_client *lu_open_url(const char *url);

/* A client on the test Redis (FENCE_TEST_REDIS_URL), default options. */
fence_client *lu_open_client(void);

/* A client on the test Redis with heartbeat_mode MODE. */
fence_client *lu_open_client_mode(int mode);

/* A client with these options; fails the test unless it opens. */
fence_client *lu_open_opts(const fence_client_options *o);

/* A client with token_mode FENCE_TOKENS_DENSE (1, 2, 3 ...) on URL, or on
 * the test Redis: for the tests where the exact token is the point. */
fence_client *lu_open_dense_url(const char *url);
fence_client *lu_open_dense(void);

/* The counter's field n (HGET KEY n) as a malloc'd string, NULL when
 * missing; anything but a string or nil fails the test. */
char *lu_counter(redisContext *r, const char *key);

/* Assert that the counter KEY's field n is exactly WANT. */
void lu_expect_counter(redisContext *r, const char *key, const char *want);

/* What follows "://" in the URL held by the environment variable ENV
 * ("host:port" for the test servers); points into the environment. */
const char *lu_hostport(const char *env);

/* fence_acquire() of NAME with this TTL and wait_ms that must succeed;
 * returns the lease, whose token is at least 1. */
fence_lease *lu_acquire_ok(fence_client *c, const char *name, int64_t ttl_ms, int64_t wait_ms);

/* fence_try_acquire() of NAME right after a Redis restart: the first call
 * may fail with FENCE_ECONN (reconnecting); then it must succeed. */
fence_lease *lu_acquire_after_restart(fence_client *c, const char *name, int64_t ttl_ms);

/* A snapshot of C's metrics (fence_client_metrics() must succeed). */
fence_metrics lu_metrics(fence_client *c);

/* The heartbeat latencies counted over all of M's histogram buckets. */
uint64_t lu_latency_total(const fence_metrics *m);

/* The owner key "fence:{NAME}" under the default prefix, into BUF. */
void lu_owner_key(char *buf, size_t n, const char *name);

/* The token counter key "fence:{NAME}:token" under the default prefix. */
void lu_token_key(char *buf, size_t n, const char *name);

/* GET KEY as a malloc'd string (free() it), NULL when missing; any reply
 * other than a string or nil fails the test. */
char *lu_rget(redisContext *r, const char *key);

/* Assert that GET KEY returns exactly WANT (not missing, not different). */
void lu_expect_get(redisContext *r, const char *key, const char *want);

/* "CMD KEY" whose reply must be an integer; returns it. */
long long lu_rint(redisContext *r, const char *cmd, const char *key);

/* PTTL KEY: milliseconds left, -1 without a TTL, -2 when missing. */
long long lu_rpttl(redisContext *r, const char *key);

/* EXISTS KEY: 1 or 0. */
long long lu_rexists(redisContext *r, const char *key);
/* The counter at key is kept: no expiry (dense tokens) or one about a day
 * (FENCE_COUNTER_IDLE_DEFAULT_MS) past its last clock token. */
void lu_expect_counter_kept(redisContext *r, const char *key);

/* DEL KEY behind the library's back; returns how many keys went (0 or 1). */
long long lu_rdel(redisContext *r, const char *key);

/* Opening URL must fail with FENCE_EAUTH, at open or (lazy connect) at the
 * first acquire, and neither the errmsg nor the client's URL may show
 * SECRET. */
void lu_expect_eauth(const char *url, const char *secret);

/* Unchecked teardown for the tests that stop Redis (it runs in the runner,
 * even after a test died with Redis stopped): start the test Redis again
 * when it is down.  Never fails; says so on stderr when it cannot. */
void lu_ensure_redis_up(void);

/* A recorder for the on_lost callback: point lo.on_lost at lu_on_lost and
 * lo.user at an lu_lost set up by lu_lost_init(). */
typedef struct lu_lost {
    atomic_int calls;          /* how many times on_lost ran */
    atomic_int reason;         /* the last reason, -1 before any call */
    atomic_int bad_lease;      /* calls with NULL; with release_inside, with a
                                  lease that does not report itself lost */
    atomic_int release_inside; /* set to 1: call fence_release() from the callback */
    atomic_int release_rc;     /* what that fence_release() returned, -1 before */
} lu_lost;

/* fence_acquire() of NAME that must succeed, without waiting, with this TTL,
 * renew_every_ms EVERY (0: the default) and no_heartbeat NO_HEARTBEAT; with
 * LR not NULL, its losses are recorded in LR (lu_on_lost). */
fence_lease *lu_acquire_cb(fence_client *c, const char *name, int64_t ttl_ms, int64_t every,
                           int no_heartbeat, lu_lost *lr);

/* Reset LR: no calls, reason -1, no release from inside. */
void lu_lost_init(lu_lost *lr);

/* The callback itself; USER is an lu_lost. */
void lu_on_lost(fence_lease *lease, int reason, void *user);

/* Wait until LR has seen a call, at most TIMEOUT_MS; returns the ms waited. */
int64_t lu_wait_lost(lu_lost *lr, int64_t timeout_ms);

/* A raw hiredis connection to the test Redis (FENCE_TEST_REDIS_PORT), for
 * poking at keys behind the library's back.  Fails the test if it cannot
 * connect.  Free with redisFree(). */
redisContext *tu_redis(void);

/* Run "$FENCE_TEST_REDIS_CTL <cmd>" (stop, start, restart); fails the test
 * on a non-zero exit. */
void tu_redis_ctl(const char *cmd);

#endif
