/* test_async.c -- the asynchronous API (fence_async.h) on the test Redis,
 * driven by a poll(2) loop with a deadline (asyncutil.c): acquire, busy,
 * release; renewals that keep a 300 ms lease over four TTLs; a lease lost
 * once when its key is deleted behind its back; bad input answered with
 * the blocking API's statuses and messages (no callback); AUTH and
 * SELECT; NOSCRIPT after SCRIPT FLUSH; close with requests in flight and
 * from inside a callback; the watch hook. */
#include "asyncutil.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *url(void)
{
    return tu_env("FENCE_TEST_REDIS_URL");
}

/* ---- acquire, busy, release ------------------------------------------------- */

typedef struct watch_rec {
    int calls, fd, events;
    int64_t timeout_ms;
} watch_rec;

static void record_watch(fence_async *a, int fd, int events, int64_t timeout_ms, void *user)
{
    (void)a;
    watch_rec *w = user;
    w->calls++;
    w->fd = fd;
    w->events = events;
    w->timeout_ms = timeout_ms;
}

START_TEST(acquire_busy_release)
{
    fence_async *a = au_open(url(), 0), *b = au_open(url(), 0);
    watch_rec w = {0, -1, 0, 0};
    fence_async_set_watch(a, record_watch, &w);
    ck_assert_int_eq(w.calls, 1); /* told at once: nothing to watch yet */
    ck_assert_int_eq(w.fd, -1);
    ck_assert_int_eq(fence_async_fd(a), -1);
    const char *name = tu_name("async-abr");
    au_acq ra = au_acquire(a, name, 5000, NULL);
    ck_assert_msg(ra.st == FENCE_OK, "acquire: %s: %s", fence_status_name(ra.st), ra.msg);
    ck_assert_ptr_nonnull(ra.lease);
    ck_assert_str_eq(ra.msg, "");
    ck_assert_str_eq(fence_lease_name(ra.lease), name);
    ck_assert_uint_ge(fence_lease_token(ra.lease), 1);
    ck_assert_int_gt(fence_lease_valid_ms(ra.lease), 4000);
    ck_assert_int_eq(fence_lease_lost(ra.lease), 0);
    ck_assert_ptr_eq(fence_lease_client(ra.lease), fence_async_client(a));
    ck_assert_int_gt(w.calls, 1);
    ck_assert_int_eq(w.fd, fence_async_fd(a)); /* the hook follows the connection */
    ck_assert_int_ge(w.fd, 0);

    redisContext *r = tu_redis();
    char key[600];
    lu_owner_key(key, sizeof key, name);
    char *v = lu_rget(r, key);
    ck_assert_ptr_nonnull(v);
    ck_assert_str_eq(v, fence_lease_owner(ra.lease)); /* the blocking API's key contract */
    free(v);

    au_acq rb = au_acquire(b, name, 5000, NULL);
    ck_assert_int_eq(rb.st, FENCE_BUSY);
    ck_assert_ptr_null(rb.lease);
    ck_assert_msg(rb.pttl_ms > 3000 && rb.pttl_ms <= 5000, "pttl %lld", (long long)rb.pttl_ms);
    char want[700];
    snprintf(want, sizeof want, "lease '%s' is held by another owner", name);
    ck_assert_str_eq(rb.msg, want);

    uint64_t first = fence_lease_token(ra.lease);
    au_rel rel = au_release(a, ra.lease);
    ck_assert_msg(rel.st == FENCE_OK, "release: %s: %s", fence_status_name(rel.st), rel.msg);
    ck_assert_int_eq(lu_rexists(r, key), 0);
    rb = au_acquire(b, name, 5000, NULL);
    ck_assert_int_eq(rb.st, FENCE_OK);
    ck_assert_uint_gt(fence_lease_token(rb.lease), first);
    fence_metrics m;
    ck_assert_int_eq(fence_client_metrics(fence_async_client(b), &m), FENCE_OK);
    ck_assert_uint_eq(m.lease_acquired, 1);
    ck_assert_uint_eq(m.acquire_contended, 1);
    ck_assert_uint_eq(m.leases_held, 1);
    ck_assert_int_eq(au_release(b, rb.lease).st, FENCE_OK);
    redisFree(r);
    fence_async_close(a);
    fence_async_close(b);
}
END_TEST

/* ---- renewals ----------------------------------------------------------------- */

START_TEST(renewals_keep_the_lease)
{
    fence_async *a = au_open(url(), 0);
    lu_lost lr;
    lu_lost_init(&lr);
    const char *name = tu_name("async-renew");
    au_acq ra = au_acquire(a, name, 300, &lr);
    ck_assert_int_eq(ra.st, FENCE_OK);
    int64_t ran = au_run(a, NULL, 1300); /* over four TTLs */
    ck_assert_int_ge(ran, 1300);
    ck_assert_int_eq(atomic_load(&lr.calls), 0);
    ck_assert_int_eq(fence_lease_lost(ra.lease), 0);
    ck_assert_int_gt(fence_lease_valid_ms(ra.lease), 0);
    redisContext *r = tu_redis();
    char key[600];
    lu_owner_key(key, sizeof key, name);
    ck_assert_int_gt(lu_rpttl(r, key), 0);
    fence_metrics m;
    fence_client_metrics(fence_async_client(a), &m);
    ck_assert_msg(m.renew_ok >= 6, "renew_ok %llu in 1.3 s with renew_every 100 ms",
                  (unsigned long long)m.renew_ok);
    ck_assert_uint_eq(m.renew_failed, 0);
    ck_assert_int_eq(au_release(a, ra.lease).st, FENCE_OK);
    ck_assert_int_eq(lu_rexists(r, key), 0);
    redisFree(r);
    fence_async_close(a);
}
END_TEST

/* ---- lost ------------------------------------------------------------------------ */

START_TEST(lost_once_when_the_key_goes)
{
    fence_async *a = au_open(url(), 0);
    lu_lost lr;
    lu_lost_init(&lr);
    const char *name = tu_name("async-lost");
    au_acq ra = au_acquire(a, name, 400, &lr);
    ck_assert_int_eq(ra.st, FENCE_OK);
    redisContext *r = tu_redis();
    char key[600];
    lu_owner_key(key, sizeof key, name);
    ck_assert_int_eq(lu_rdel(r, key), 1);
    int64_t t0 = tu_now_ms();
    while (atomic_load(&lr.calls) == 0 && tu_now_ms() - t0 < 3000) {
        au_run(a, NULL, 20);
    }
    ck_assert_int_eq(atomic_load(&lr.calls), 1);
    ck_assert_int_eq(atomic_load(&lr.reason), FENCE_LOST);
    ck_assert_int_eq(atomic_load(&lr.bad_lease), 0);
    ck_assert_int_le(tu_now_ms() - t0, 400); /* the next renewal (every 133 ms) says so */
    ck_assert_int_eq(fence_lease_lost(ra.lease), 1);
    au_run(a, NULL, 500);
    ck_assert_int_eq(atomic_load(&lr.calls), 1); /* once */
    au_rel rel = au_release(a, ra.lease);
    ck_assert_int_eq(rel.st, FENCE_LOST);
    char want[700];
    snprintf(want, sizeof want, "lease '%s' had already been lost", name);
    ck_assert_str_eq(rel.msg, want);
    redisFree(r);
    fence_async_close(a);
}
END_TEST

/* A lost callback that releases its own lease from inside. */
typedef struct inside {
    int calls;
    fence_async *a;
    int rel_rc;
} inside;

static void release_from_lost(fence_lease *l, int reason, void *user)
{
    inside *in = user;
    (void)reason;
    in->calls++;
    in->rel_rc = fence_async_release(in->a, l, NULL, NULL);
}

START_TEST(release_from_inside_the_lost_callback)
{
    fence_async *a = au_open(url(), 0);
    inside in = {0, a, -1};
    fence_lease_options lo;
    fence_lease_options_init(&lo, 400);
    lo.on_lost = release_from_lost;
    lo.user = &in;
    au_acq ra;
    memset(&ra, 0, sizeof ra);
    const char *name = tu_name("async-lost-inside");
    ck_assert_int_eq(fence_async_acquire(a, name, &lo, au_on_acquired, &ra), FENCE_OK);
    au_run(a, &ra.calls, 5000);
    ck_assert_int_eq(ra.st, FENCE_OK);
    redisContext *r = tu_redis();
    char key[600];
    lu_owner_key(key, sizeof key, name);
    lu_rdel(r, key);
    au_run(a, &in.calls, 3000);
    ck_assert_int_eq(in.calls, 1);
    ck_assert_int_eq(in.rel_rc, FENCE_OK);
    au_run(a, NULL, 300); /* the lease is freed after its callback (ASan, valgrind) */
    fence_metrics m;
    fence_client_metrics(fence_async_client(a), &m);
    ck_assert_uint_eq(m.lease_lost, 1);
    ck_assert_uint_eq(m.leases_held, 0);
    redisFree(r);
    fence_async_close(a);
}
END_TEST

/* ---- bad input: the blocking API's answers ------------------------------------------ */

/* fence_acquire and fence_async_acquire on the same input: the same
 * status and message, and no callback. */
static void same_as_blocking(fence_client *c, fence_async *a, const char *name,
                             const fence_lease_options *lo)
{
    fence_lease *l = NULL;
    fence_status want = fence_acquire(c, name, lo, &l);
    char msg[700];
    snprintf(msg, sizeof msg, "%s", fence_client_errmsg(c));
    ck_assert_int_ne(want, FENCE_OK);
    au_acq r;
    memset(&r, 0, sizeof r);
    fence_status got = fence_async_acquire(a, name, lo, au_on_acquired, &r);
    ck_assert_msg(got == want, "async %s, blocking %s (%s)", fence_status_name(got),
                  fence_status_name(want), msg);
    ck_assert_str_eq(fence_async_errmsg(a), msg);
    au_run(a, NULL, 20);
    ck_assert_int_eq(r.calls, 0);
}

START_TEST(bad_acquire_input)
{
    fence_client *c = lu_open_client();
    fence_async *a = au_open(url(), 0);
    fence_lease_options lo;
    fence_lease_options_init(&lo, 1000);
    char long_name[FENCE_NAME_MAX + 2];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    same_as_blocking(c, a, NULL, &lo);
    same_as_blocking(c, a, "", &lo);
    same_as_blocking(c, a, long_name, &lo);
    same_as_blocking(c, a, "bad\nname", &lo);
    const int64_t ttls[] = {0, FENCE_TTL_MIN_MS - 1, FENCE_TTL_MAX_MS + 1, -5};
    for (size_t i = 0; i < sizeof ttls / sizeof ttls[0]; i++) {
        fence_lease_options_init(&lo, ttls[i]);
        same_as_blocking(c, a, "ok-name", &lo);
    }
    fence_lease_options_init(&lo, 1000);
    lo.renew_every_ms = 1000;
    same_as_blocking(c, a, "ok-name", &lo);
    fence_lease_options_init(&lo, 1000);
    lo.no_heartbeat = 2;
    same_as_blocking(c, a, "ok-name", &lo);
    fence_lease_options_init(&lo, 1000);
    lo.holder_info = "tab\there";
    same_as_blocking(c, a, "ok-name", &lo);
    fence_lease_options_init(&lo, 1000);
    lo.wait_ms = -1;
    same_as_blocking(c, a, "ok-name", &lo);

    /* What only the asynchronous API refuses, and NULLs. */
    au_acq r;
    memset(&r, 0, sizeof r);
    fence_lease_options_init(&lo, 1000);
    lo.wait_ms = 100;
    ck_assert_int_eq(fence_async_acquire(a, "n", &lo, au_on_acquired, &r), FENCE_EINVAL);
    ck_assert_ptr_nonnull(strstr(fence_async_errmsg(a), "wait_ms must be 0"));
    lo.wait_ms = 0;
    lo.no_heartbeat = 1;
    ck_assert_int_eq(fence_async_acquire(a, "n", &lo, au_on_acquired, &r), FENCE_EINVAL);
    ck_assert_ptr_nonnull(strstr(fence_async_errmsg(a), "no_heartbeat must be 0"));
    ck_assert_int_eq(fence_async_acquire(a, "n", NULL, au_on_acquired, &r), FENCE_EINVAL);
    ck_assert_str_eq(fence_async_errmsg(a), "fence_async_acquire: opts is NULL");
    lo.no_heartbeat = 0;
    ck_assert_int_eq(fence_async_acquire(a, "n", &lo, NULL, &r), FENCE_EINVAL);
    ck_assert_str_eq(fence_async_errmsg(a), "fence_async_acquire: callback is NULL");
    ck_assert_int_eq(fence_async_acquire(NULL, "n", &lo, au_on_acquired, &r), FENCE_EINVAL);
    ck_assert_str_eq(fence_async_errmsg(NULL), "fence_async_acquire: handle is NULL");
    ck_assert_int_eq(fence_async_release(a, NULL, NULL, NULL), FENCE_EINVAL);
    ck_assert_str_eq(fence_async_errmsg(a), "fence_async_release: lease is NULL");
    ck_assert_int_eq(fence_async_release(NULL, NULL, NULL, NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_async_handle(NULL, 0), FENCE_EINVAL);
    ck_assert_int_eq(fence_async_fd(NULL), -1);
    ck_assert_int_eq(fence_async_events(NULL), 0);
    ck_assert_int_eq(fence_async_timeout_ms(NULL), -1);
    ck_assert_ptr_null(fence_async_client(NULL));
    fence_async_set_watch(NULL, NULL, NULL);
    fence_async_close(NULL);
    au_run(a, NULL, 20);
    ck_assert_int_eq(r.calls, 0);

    /* A lease of another handle. */
    fence_async *b = au_open(url(), 0);
    au_acq rb = au_acquire(b, tu_name("async-other"), 2000, NULL);
    ck_assert_int_eq(rb.st, FENCE_OK);
    ck_assert_int_eq(fence_async_release(a, rb.lease, NULL, NULL), FENCE_EINVAL);
    ck_assert_str_eq(fence_async_errmsg(a), "fence_async_release: the lease belongs to "
                     "another handle");
    ck_assert_int_eq(au_release(b, rb.lease).st, FENCE_OK);
    fence_async_close(b);
    fence_async_close(a);
    fence_client_close(c);
}
END_TEST

/* fence_client_open and fence_async_open on the same options. */
static void open_same_as_blocking(const fence_client_options *o)
{
    fence_client *c = NULL;
    fence_status want = fence_client_open(&c, o);
    char msg[700];
    snprintf(msg, sizeof msg, "%s", fence_client_errmsg(c));
    fence_client_close(c);
    ck_assert_int_ne(want, FENCE_OK);
    fence_async *a = NULL;
    fence_status got = fence_async_open(&a, o);
    ck_assert_msg(got == want, "async %s, blocking %s (%s)", fence_status_name(got),
                  fence_status_name(want), msg);
    ck_assert_ptr_nonnull(a);
    ck_assert_str_eq(fence_async_errmsg(a), msg);
    /* A handle whose options were bad answers every call with ESTATE. */
    fence_lease_options lo;
    fence_lease_options_init(&lo, 1000);
    au_acq r;
    memset(&r, 0, sizeof r);
    ck_assert_int_eq(fence_async_acquire(a, "n", &lo, au_on_acquired, &r), FENCE_ESTATE);
    fence_async_close(a);
}

START_TEST(bad_open_input)
{
    fence_client_options o;
    fence_client_options_init(&o);
    open_same_as_blocking(&o); /* no URL */
    o.url = "http://127.0.0.1:1";
    open_same_as_blocking(&o);
    o.url = url();
    o.prefix = "a{b";
    open_same_as_blocking(&o);
    o.prefix = NULL;
    o.io_timeout_ms = -1;
    open_same_as_blocking(&o);
    o.io_timeout_ms = 0;
    o.tls_ca_file = "/nonexistent/ca.crt";
    open_same_as_blocking(&o); /* TLS options without TLS */
    o.tls_ca_file = NULL;
    o.token_mode = 7;
    open_same_as_blocking(&o);
    o.token_mode = 0;
    o.heartbeat_mode = 9;
    open_same_as_blocking(&o);
    o.heartbeat_mode = 0;
    o.username = "u";
    open_same_as_blocking(&o); /* a user name needs a password */
    o.username = NULL;

    fence_async *a = (fence_async *)&o;
    ck_assert_int_eq(fence_async_open(NULL, &o), FENCE_EINVAL);
    ck_assert_str_eq(fence_async_errmsg(NULL), "fence_async_open: out is NULL");
    ck_assert_int_eq(fence_async_open(&a, NULL), FENCE_EINVAL);
    ck_assert_ptr_null(a);
    ck_assert_str_eq(fence_async_errmsg(NULL), "fence_async_open: options are NULL");

    /* Refused here, valid for the blocking API. */
    o.url = "redis-sentinel://127.0.0.1:26379#m";
    ck_assert_int_eq(fence_async_open(&a, &o), FENCE_EINVAL);
    ck_assert_ptr_nonnull(strstr(fence_async_errmsg(a), "use the blocking API"));
    fence_async_close(a);
}
END_TEST

/* ---- AUTH, SELECT, NOSCRIPT ------------------------------------------------------------ */

START_TEST(auth_and_select)
{
    const char *auth = tu_env("FENCE_TEST_REDIS_AUTH_URL");
    fence_async *a = au_open(auth, 0); /* no password: NOAUTH at the first request */
    au_acq r = au_acquire(a, tu_name("async-noauth"), 1000, NULL);
    ck_assert_int_eq(r.st, FENCE_EAUTH);
    ck_assert_ptr_nonnull(strstr(r.msg, "NOAUTH"));
    fence_async_close(a);

    char u[300];
    snprintf(u, sizeof u, "redis://:wrong-secret-pw@%s", lu_hostport("FENCE_TEST_REDIS_AUTH_URL"));
    a = au_open(u, 0);
    r = au_acquire(a, tu_name("async-wrongpw"), 1000, NULL);
    ck_assert_int_eq(r.st, FENCE_EAUTH);
    ck_assert_ptr_null(strstr(r.msg, "wrong-secret-pw"));
    fence_async_close(a);

    snprintf(u, sizeof u, "redis://:fence-auth-pw@%s/3", lu_hostport("FENCE_TEST_REDIS_AUTH_URL"));
    a = au_open(u, 0);
    const char *name = tu_name("async-db3");
    r = au_acquire(a, name, 2000, NULL);
    ck_assert_msg(r.st == FENCE_OK, "%s: %s", fence_status_name(r.st), r.msg);
    ck_assert_ptr_null(strstr(fence_client_url(fence_async_client(a)), "fence-auth-pw"));
    redisContext *rc = redisConnect("127.0.0.1", atoi(strchr(lu_hostport(
                                        "FENCE_TEST_REDIS_AUTH_URL"), ':') + 1));
    ck_assert_ptr_nonnull(rc);
    freeReplyObject(redisCommand(rc, "AUTH fence-auth-pw"));
    freeReplyObject(redisCommand(rc, "SELECT 3"));
    char key[600];
    lu_owner_key(key, sizeof key, name);
    ck_assert_int_eq(lu_rexists(rc, key), 1);
    ck_assert_int_eq(au_release(a, r.lease).st, FENCE_OK);
    ck_assert_int_eq(lu_rexists(rc, key), 0);
    redisFree(rc);
    fence_async_close(a);
}
END_TEST

START_TEST(noscript_falls_back_to_eval)
{
    fence_async *a = au_open(url(), 0);
    au_acq r = au_acquire(a, tu_name("async-ns1"), 2000, NULL);
    ck_assert_int_eq(r.st, FENCE_OK);
    redisContext *rc = tu_redis();
    lu_cmd_ok(rc, "SCRIPT FLUSH");
    au_acq r2 = au_acquire(a, tu_name("async-ns2"), 2000, NULL);
    ck_assert_msg(r2.st == FENCE_OK, "%s: %s", fence_status_name(r2.st), r2.msg);
    lu_cmd_ok(rc, "SCRIPT FLUSH");
    ck_assert_int_eq(au_release(a, r.lease).st, FENCE_OK);
    ck_assert_int_eq(au_release(a, r2.lease).st, FENCE_OK);
    redisFree(rc);
    fence_async_close(a);
}
END_TEST

/* ---- close ----------------------------------------------------------------------------- */

START_TEST(close_with_requests_in_flight)
{
    fence_async *a = au_open(url(), 0);
    fence_lease_options lo;
    fence_lease_options_init(&lo, 2000);
    au_acq r[6];
    memset(r, 0, sizeof r);
    /* Three before any I/O (waiting for the connection), three sent. */
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(fence_async_acquire(a, tu_name("async-close"), &lo, au_on_acquired,
                                             &r[i]), FENCE_OK);
    }
    au_acq held = au_acquire(a, tu_name("async-close-held"), 2000, NULL);
    ck_assert_int_eq(held.st, FENCE_OK);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(r[i].calls, 1); /* they came with it */
        ck_assert_int_eq(r[i].st, FENCE_OK);
        ck_assert_int_eq(fence_async_acquire(a, tu_name("async-close"), &lo, au_on_acquired,
                                             &r[3 + i]), FENCE_OK);
    }
    au_rel rel;
    memset(&rel, 0, sizeof rel);
    ck_assert_int_eq(fence_async_release(a, held.lease, au_on_released, &rel), FENCE_OK);
    fence_async_close(a); /* leases r[0..2] still open: freed, left to their TTL */
    for (int i = 3; i < 6; i++) {
        ck_assert_int_eq(r[i].calls, 1);
        ck_assert_int_eq(r[i].st, FENCE_ESTATE);
        ck_assert_ptr_nonnull(strstr(r[i].msg, "closed"));
        ck_assert_ptr_null(r[i].lease);
    }
    ck_assert_int_eq(rel.calls, 1);
    ck_assert_int_eq(rel.st, FENCE_ESTATE);
}
END_TEST

typedef struct closer {
    int calls;
    fence_async *a;
} closer;

static void close_inside(fence_async *a, fence_status st, fence_lease *l, int64_t pttl,
                         const char *msg, void *user)
{
    (void)st;
    (void)l;
    (void)pttl;
    (void)msg;
    closer *k = user;
    k->calls++;
    ck_assert_ptr_eq(a, k->a);
    fence_async_close(a); /* freed when fence_async_handle returns */
}

START_TEST(close_from_inside_a_callback)
{
    fence_async *a = au_open(url(), 0);
    fence_lease_options lo;
    fence_lease_options_init(&lo, 2000);
    closer k = {0, a};
    au_acq other;
    memset(&other, 0, sizeof other);
    ck_assert_int_eq(fence_async_acquire(a, tu_name("async-ci"), &lo, close_inside, &k),
                     FENCE_OK);
    ck_assert_int_eq(fence_async_acquire(a, tu_name("async-ci2"), &lo, au_on_acquired, &other),
                     FENCE_OK);
    /* Drive by hand: the handle is gone after the call that fired it. */
    int64_t end = tu_now_ms() + 5000;
    while (k.calls == 0 && tu_now_ms() < end) {
        struct pollfd p = {fence_async_fd(a), POLLIN | POLLOUT, 0};
        poll(&p, p.fd >= 0 ? 1 : 0, 10);
        fence_async_handle(a, FENCE_ASYNC_READ | FENCE_ASYNC_WRITE);
    }
    ck_assert_int_eq(k.calls, 1);
    ck_assert_int_eq(other.calls, 1); /* came in the same pass, or failed by the close */
    ck_assert(other.st == FENCE_OK || other.st == FENCE_ESTATE);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("async");
    TCase *t = tcase_create("async");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, acquire_busy_release);
    tcase_add_test(t, renewals_keep_the_lease);
    tcase_add_test(t, lost_once_when_the_key_goes);
    tcase_add_test(t, release_from_inside_the_lost_callback);
    tcase_add_test(t, bad_acquire_input);
    tcase_add_test(t, bad_open_input);
    tcase_add_test(t, auth_and_select);
    tcase_add_test(t, noscript_falls_back_to_eval);
    tcase_add_test(t, close_with_requests_in_flight);
    tcase_add_test(t, close_from_inside_a_callback);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
