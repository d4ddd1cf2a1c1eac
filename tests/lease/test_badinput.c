/*
 * test_badinput.c -- every public function against bad arguments: NULL
 * handles and out-pointers, empty and oversized names, out-of-range
 * numbers, malformed URLs, unreachable servers, wrong passwords.  Each
 * must return the documented status with a message a human can act on,
 * leave nothing behind in Redis, and not leak (the suites run under
 * valgrind and ASan).
 */
#include "fence.h"
#include "leaseutil.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A status and a non-empty message on the client. */
#define EXPECT_FAIL(expr, want, c)                                                      \
    do {                                                                                \
        EXPECT_RC(expr, want, c);                                                       \
        ck_assert_msg(fence_client_errmsg(c)[0] != '\0', "%s: empty errmsg", #expr);    \
    } while (0)

/* Nothing in Redis for NAME: no owner key and no counter (a refused call
 * must not even consume a token). */
static void expect_no_keys(const char *name)
{
    redisContext *r = tu_redis();
    char k[FENCE_NAME_MAX + 64];
    lu_owner_key(k, sizeof k, name);
    ck_assert_msg(lu_rexists(r, k) == 0, "key %s left behind", k);
    lu_token_key(k, sizeof k, name);
    ck_assert_msg(lu_rexists(r, k) == 0, "counter %s created by a refused call", k);
    redisFree(r);
}

/* Open with these options and expect `want` and a handle with a message. */
static void expect_open_fails(const fence_client_options *o, int want, const char *what)
{
    fence_client *c = NULL;
    int rc = fence_client_open(&c, o);
    ck_assert_msg(rc == want, "%s: got %s, expected %s (%s)", what, fence_status_name(rc),
                  fence_status_name(want), c != NULL ? fence_client_errmsg(c) : "no handle");
    ck_assert_msg(c != NULL, "%s: no handle to read the error from", what);
    ck_assert_msg(fence_client_errmsg(c)[0] != '\0', "%s: empty errmsg", what);
    fence_client_close(c);
}

static void expect_url_fails(const char *url, int want)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url;
    char what[300];
    snprintf(what, sizeof what, "url \"%s\"", url != NULL ? url : "(null)");
    expect_open_fails(&o, want, what);
    /* The convenience constructor agrees. */
    fence_client *c = NULL;
    int rc = fence_client_open_url(&c, url);
    ck_assert_msg(rc == want, "fence_client_open_url(%s): %s", what, fence_status_name(rc));
    ck_assert_ptr_nonnull(c);
    fence_client_close(c);
}

/* A loopback port nobody listens on. */
static int closed_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(s, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &len), 0);
    close(s); /* bound, never listened: connections are refused */
    return ntohs(a.sin_port);
}

/* ------------------------------------------------------------------ */
/* Client open                                                          */
/* ------------------------------------------------------------------ */

START_TEST(open_null_args)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = tu_env("FENCE_TEST_REDIS_URL");
    EXPECT_RC(fence_client_open(NULL, &o), FENCE_EINVAL, NULL);
    EXPECT_RC(fence_client_open_url(NULL, o.url), FENCE_EINVAL, NULL);
    expect_open_fails(NULL, FENCE_EINVAL, "NULL options");
    o.url = NULL;
    expect_open_fails(&o, FENCE_EINVAL, "NULL url");
    /* fence_client_open_url(&c, NULL) reads FENCE_REDIS_URL (test_holderinfo
     * covers the default): a malformed one is refused like any bad URL. */
    fence_client *c = NULL;
    setenv("FENCE_REDIS_URL", "http://not-redis.invalid", 1);
    EXPECT_RC(fence_client_open_url(&c, NULL), FENCE_EINVAL, c);
    unsetenv("FENCE_REDIS_URL");
    ck_assert_ptr_nonnull(c);
    ck_assert_str_ne(fence_client_errmsg(c), "");
    fence_client_close(c);
    fence_client_close(NULL); /* harmless */
    fence_client_options_init(NULL);
    fence_lease_options_init(NULL, 100);
}
END_TEST

START_TEST(open_bad_urls)
{
    const char *urls[] = {
        "",
        "http://x",
        "redis://",
        "redis://:@",
        "redis://host:99999",
        "redis://host:65536",
        "redis://host:0",
        "redis://host:-1",
        "redis://host:abc",
        "redis://host:12ab",
        "redis://host:",
        "redis://host/notanumber",
        "redis://host/-1",
        "redis://host/1x",
        "redis://[::1",
        "redis://host:6379 trailing",
        "redis://us%zzer:pw@host",
        "unix://",
        "unix://relative/path",
        "unix:///tmp/x.sock?db=abc",
        "redis:/host",
        "127.0.0.1:6379",
    };
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        expect_url_fails(urls[i], FENCE_EINVAL);
    }
    /* A URL longer than any sane one. */
    char huge[9000];
    memset(huge, 'h', sizeof huge - 1);
    memcpy(huge, "redis://", 8);
    huge[sizeof huge - 1] = '\0';
    expect_url_fails(huge, FENCE_EINVAL);
}
END_TEST

START_TEST(open_tls_url_refused)
{
    /* rediss:// is supported since issue 9: what is refused now is a TLS
     * setup that cannot work (bad-input cases of every TLS option are in
     * test_tls).  The message says so and never quotes the password. */
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = "rediss://:secret-tls-pw@127.0.0.1:6380";
    o.tls_cert_file = "/nonexistent/client.crt"; /* without its key */
    fence_client *c = NULL;
    EXPECT_RC(fence_client_open(&c, &o), FENCE_EINVAL, c);
    ck_assert_ptr_nonnull(c);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", fence_client_errmsg(c));
    for (char *p = msg; *p != '\0'; p++) {
        *p = (char)tolower((unsigned char)*p);
    }
    ck_assert_msg(strstr(msg, "tls") != NULL || strstr(msg, "rediss") != NULL,
                  "the message does not say what is wrong with TLS: \"%s\"", fence_client_errmsg(c));
    ck_assert_ptr_null(strstr(fence_client_errmsg(c), "secret-tls-pw"));
    fence_client_close(c);
}
END_TEST

/* Opening the test Redis with options O that are the defaults but for
 * FIELD = VALUE fails with FENCE_EINVAL; WHAT names the case in a failure.
 * O is left holding those options. */
#define EXPECT_BAD_OPTION(o, field, value, what)                                        \
    do {                                                                                \
        fence_client_options_init(&(o));                                                \
        (o).url = tu_env("FENCE_TEST_REDIS_URL");                                       \
        (o).field = (value);                                                            \
        expect_open_fails(&(o), FENCE_EINVAL, what);                                    \
    } while (0)

START_TEST(open_bad_options)
{
    fence_client_options o;
    EXPECT_BAD_OPTION(o, connect_timeout_ms, -1, "connect_timeout_ms -1");
    EXPECT_BAD_OPTION(o, io_timeout_ms, -5, "io_timeout_ms -5");
    EXPECT_BAD_OPTION(o, heartbeat_mode, 7, "heartbeat_mode 7");
    EXPECT_BAD_OPTION(o, heartbeat_mode, -1, "heartbeat_mode -1");
    EXPECT_BAD_OPTION(o, renew_batch, -1, "renew_batch -1");

    char prefix[66];
    memset(prefix, 'p', 65);
    prefix[65] = '\0';
    EXPECT_BAD_OPTION(o, prefix, prefix, "65-byte prefix"); /* one byte too many */

    /* 64 bytes is fine. */
    prefix[64] = '\0';
    fence_client *c = NULL;
    EXPECT_RC(fence_client_open(&c, &o), FENCE_OK, c);
    fence_client_close(c);
}
END_TEST

/* The handle a failed open returns (bad options) can be read and closed,
 * and every other call on it says FENCE_ESTATE instead of crashing. */
START_TEST(failed_open_handle_is_inert)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = tu_env("FENCE_TEST_REDIS_URL");
    o.io_timeout_ms = -5;
    fence_client *c = NULL;
    ck_assert_int_eq(fence_client_open(&c, &o), FENCE_EINVAL);
    ck_assert_ptr_nonnull(c);
    fence_lease *l = NULL;
    ck_assert_int_eq(fence_try_acquire(c, "x", 1000, &l), FENCE_ESTATE);
    ck_assert_ptr_null(l);
    ck_assert_msg(strstr(fence_client_errmsg(c), "failed to open") != NULL, "errmsg: %s",
                  fence_client_errmsg(c));
    uint64_t t = 0;
    ck_assert_int_eq(fence_token_raise(c, "x", 5, &t), FENCE_ESTATE);
    ck_assert_int_eq(fence_token_last(c, "x", &t), FENCE_ESTATE);
    ck_assert_int_eq(fence_lease_inspect(c, "x", NULL, NULL, NULL, NULL), FENCE_ESTATE);
    int64_t next = 0;
    ck_assert_int_eq(fence_heartbeat_run(c, &next), FENCE_ESTATE);
    fence_metrics m;
    ck_assert_int_eq(fence_client_metrics(c, &m), FENCE_OK);
    fence_client_close(c);

    /* A bad URL too. */
    c = NULL;
    ck_assert_int_eq(fence_client_open_url(&c, "http://nope"), FENCE_EINVAL);
    ck_assert_int_eq(fence_try_acquire(c, "x", 1000, &l), FENCE_ESTATE);
    fence_client_close(c);
}
END_TEST

START_TEST(open_unreachable_is_econn)
{
    int port = closed_port();
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url;
    o.connect_timeout_ms = 500;
    int64_t t0 = tu_now_ms();
    expect_open_fails(&o, FENCE_ECONN, url);
    int64_t took = tu_now_ms() - t0;
    ck_assert_msg(took < 1000, "refused connection took %" PRId64 " ms", took);

    /* Default timeout, and a unix socket that does not exist. */
    fence_client_options_init(&o);
    o.url = url;
    expect_open_fails(&o, FENCE_ECONN, url);
    fence_client_options_init(&o);
    o.url = "unix:///nonexistent/fence-test.sock";
    expect_open_fails(&o, FENCE_ECONN, o.url);
}
END_TEST

START_TEST(open_wrong_password_is_eauth)
{
    char url[256];
    snprintf(url, sizeof url, "redis://:bad-pw-4711@%s", lu_hostport("FENCE_TEST_REDIS_AUTH_URL"));
    lu_expect_eauth(url, "bad-pw-4711");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Acquire                                                              */
/* ------------------------------------------------------------------ */

START_TEST(acquire_null_args)
{
    fence_client *c = lu_open_client();
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("nullarg"));
    fence_lease_options lo;
    fence_lease_options_init(&lo, 1000);
    fence_lease *l = (fence_lease *)(uintptr_t)0x1;

    EXPECT_RC(fence_acquire(NULL, nm, &lo, &l), FENCE_EINVAL, NULL);
    ck_assert_ptr_null(l);
    l = (fence_lease *)(uintptr_t)0x1;
    EXPECT_FAIL(fence_acquire(c, NULL, &lo, &l), FENCE_EINVAL, c);
    ck_assert_ptr_null(l);
    l = (fence_lease *)(uintptr_t)0x1;
    EXPECT_FAIL(fence_acquire(c, nm, NULL, &l), FENCE_EINVAL, c);
    ck_assert_ptr_null(l);
    /* No out-pointer: refused before anything is taken. */
    EXPECT_FAIL(fence_acquire(c, nm, &lo, NULL), FENCE_EINVAL, c);
    EXPECT_RC(fence_try_acquire(NULL, nm, 1000, &l), FENCE_EINVAL, NULL);
    EXPECT_FAIL(fence_try_acquire(c, NULL, 1000, &l), FENCE_EINVAL, c);
    EXPECT_FAIL(fence_try_acquire(c, nm, 1000, NULL), FENCE_EINVAL, c);
    expect_no_keys(nm);
    fence_metrics m = lu_metrics(c);
    ck_assert_uint_eq(m.acquire_attempts, 0);
    ck_assert_uint_eq(m.leases_held, 0);
    fence_client_close(c);
}
END_TEST

START_TEST(acquire_bad_names)
{
    fence_client *c = lu_open_client();
    fence_lease *l = (fence_lease *)(uintptr_t)0x1;
    EXPECT_FAIL(fence_try_acquire(c, "", 1000, &l), FENCE_EINVAL, c);
    ck_assert_ptr_null(l);

    char big[FENCE_NAME_MAX + 2];
    memset(big, 'b', sizeof big - 1);
    big[sizeof big - 1] = '\0'; /* FENCE_NAME_MAX + 1 bytes */
    snprintf(big, 30, "%s", tu_name("big"));
    big[strlen(big)] = 'b';
    ck_assert_uint_eq(strlen(big), FENCE_NAME_MAX + 1);
    l = (fence_lease *)(uintptr_t)0x1;
    EXPECT_FAIL(fence_try_acquire(c, big, 1000, &l), FENCE_EINVAL, c);
    ck_assert_ptr_null(l);
    expect_no_keys(big);
    /* Exactly FENCE_NAME_MAX is allowed. */
    big[FENCE_NAME_MAX] = '\0';
    EXPECT_RC(fence_try_acquire(c, big, 1000, &l), FENCE_OK, c);
    EXPECT_RC(fence_release(l), FENCE_OK, c);

    /* The other functions that take a name check it the same way. */
    char big2[FENCE_NAME_MAX + 2];
    memset(big2, 'q', sizeof big2 - 1);
    big2[sizeof big2 - 1] = '\0';
    uint64_t t = 0;
    EXPECT_FAIL(fence_token_raise(c, "", 5, &t), FENCE_EINVAL, c);
    EXPECT_FAIL(fence_token_raise(c, NULL, 5, &t), FENCE_EINVAL, c);
    EXPECT_FAIL(fence_token_raise(c, big2, 5, &t), FENCE_EINVAL, c);
    EXPECT_FAIL(fence_token_last(c, "", &t), FENCE_EINVAL, c);
    EXPECT_FAIL(fence_token_last(c, NULL, &t), FENCE_EINVAL, c);
    EXPECT_FAIL(fence_token_last(c, big2, &t), FENCE_EINVAL, c);
    int held;
    EXPECT_FAIL(fence_lease_inspect(c, "", &held, NULL, NULL, NULL), FENCE_EINVAL, c);
    EXPECT_FAIL(fence_lease_inspect(c, NULL, &held, NULL, NULL, NULL), FENCE_EINVAL, c);
    EXPECT_FAIL(fence_lease_inspect(c, big2, &held, NULL, NULL, NULL), FENCE_EINVAL, c);
    expect_no_keys(big2);
    fence_client_close(c);
}
END_TEST

static void expect_bad_lease_opts(fence_client *c, const char *name,
                                  const fence_lease_options *lo, const char *what)
{
    fence_lease *l = (fence_lease *)(uintptr_t)0x1;
    int rc = fence_acquire(c, name, lo, &l);
    ck_assert_msg(rc == FENCE_EINVAL, "%s: got %s (%s)", what, fence_status_name(rc),
                  fence_client_errmsg(c));
    ck_assert_msg(l == NULL, "%s: *out not reset to NULL", what);
    ck_assert_msg(fence_client_errmsg(c)[0] != '\0', "%s: empty errmsg", what);
}

START_TEST(acquire_bad_numbers)
{
    fence_client *c = lu_open_client();
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("badnum"));
    fence_lease_options lo;
    const int64_t ttls[] = {0, -1, -1000, FENCE_TTL_MIN_MS - 1, FENCE_TTL_MAX_MS + 1,
                            INT64_MIN, INT64_MAX};
    for (size_t i = 0; i < sizeof ttls / sizeof ttls[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "ttl_ms %" PRId64, ttls[i]);
        fence_lease_options_init(&lo, ttls[i]);
        expect_bad_lease_opts(c, nm, &lo, what);
        fence_lease *l = (fence_lease *)(uintptr_t)0x1;
        EXPECT_FAIL(fence_try_acquire(c, nm, ttls[i], &l), FENCE_EINVAL, c);
        ck_assert_ptr_null(l);
    }
    fence_lease_options_init(&lo, 1000);
    lo.wait_ms = -1;
    expect_bad_lease_opts(c, nm, &lo, "wait_ms -1");
    lo.wait_ms = FENCE_WAIT_MAX_MS + 1;
    expect_bad_lease_opts(c, nm, &lo, "wait_ms > max");
    lo.wait_ms = INT64_MIN;
    expect_bad_lease_opts(c, nm, &lo, "wait_ms INT64_MIN");

    fence_lease_options_init(&lo, 1000);
    lo.renew_every_ms = 1000;
    expect_bad_lease_opts(c, nm, &lo, "renew_every_ms == ttl");
    lo.renew_every_ms = 5000;
    expect_bad_lease_opts(c, nm, &lo, "renew_every_ms > ttl");
    lo.renew_every_ms = -1;
    expect_bad_lease_opts(c, nm, &lo, "renew_every_ms -1");
    expect_no_keys(nm);

    /* The boundaries themselves are accepted. */
    fence_lease *l = NULL;
    EXPECT_RC(fence_try_acquire(c, nm, FENCE_TTL_MIN_MS, &l), FENCE_OK, c);
    fence_release(l); /* may already have expired: OK or LOST */
    fence_lease_options_init(&lo, FENCE_TTL_MAX_MS);
    lo.renew_every_ms = FENCE_TTL_MAX_MS - 1;
    lo.wait_ms = FENCE_WAIT_MAX_MS;
    EXPECT_RC(fence_acquire(c, nm, &lo, &l), FENCE_OK, c);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    fence_client_close(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Everything else with NULL handles / out-pointers                     */
/* ------------------------------------------------------------------ */

START_TEST(lease_functions_null)
{
    EXPECT_RC(fence_release(NULL), FENCE_EINVAL, NULL);
    EXPECT_RC(fence_renew(NULL), FENCE_EINVAL, NULL);
    ck_assert_uint_eq(fence_lease_token(NULL), 0); /* no token is a valid one */
    ck_assert_int_eq(fence_lease_valid_ms(NULL), 0);
    ck_assert_ptr_null(fence_lease_client(NULL));
    /* Fail closed: no lease is not a held lease. */
    ck_assert_int_ne(fence_lease_lost(NULL), 0);
    (void)fence_lease_name(NULL);  /* must not crash */
    (void)fence_lease_owner(NULL); /* must not crash */
}
END_TEST

START_TEST(client_functions_null)
{
    ck_assert_ptr_nonnull(fence_client_errmsg(NULL));
    (void)fence_client_url(NULL); /* must not crash */
    fence_metrics m;
    EXPECT_RC(fence_client_metrics(NULL, &m), FENCE_EINVAL, NULL);
    int64_t next = 0;
    EXPECT_RC(fence_heartbeat_run(NULL, &next), FENCE_EINVAL, NULL);
    uint64_t t = 0;
    EXPECT_RC(fence_token_raise(NULL, "x", 1, &t), FENCE_EINVAL, NULL);
    EXPECT_RC(fence_token_last(NULL, "x", &t), FENCE_EINVAL, NULL);
    int held = 0;
    EXPECT_RC(fence_lease_inspect(NULL, "x", &held, NULL, NULL, NULL), FENCE_EINVAL, NULL);

    fence_client *c = lu_open_client();
    EXPECT_FAIL(fence_client_metrics(c, NULL), FENCE_EINVAL, c);
    EXPECT_FAIL(fence_token_last(c, "x", NULL), FENCE_EINVAL, c);
    fence_client_close(c);

    char buf[64];
    ck_assert_int_eq(fence_metrics_prometheus(NULL, buf, sizeof buf), -1);
    memset(&m, 0, sizeof m);
    ck_assert_int_eq(fence_metrics_prometheus(&m, NULL, 10), -1);
}
END_TEST

START_TEST(token_raise_out_of_range)
{
    fence_client *c = lu_open_dense(); /* token 1 proves the counter untouched */
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("range"));
    uint64_t t = 0;
    /* Redis counters are signed 64-bit: these cannot be stored. */
    int rc = fence_token_raise(c, nm, UINT64_MAX, &t);
    ck_assert_msg(rc != FENCE_OK, "raising to UINT64_MAX succeeded (token %" PRIu64 ")", t);
    ck_assert_str_ne(fence_client_errmsg(c), "");
    rc = fence_token_raise(c, nm, (uint64_t)INT64_MAX + 1, &t);
    ck_assert_msg(rc != FENCE_OK, "raising to 2^63 succeeded");
    /* The counter is untouched and the lease still works. */
    EXPECT_RC(fence_token_last(c, nm, &t), FENCE_OK, c);
    ck_assert_uint_eq(t, 0);
    fence_lease *l = NULL;
    EXPECT_RC(fence_try_acquire(c, nm, 1000, &l), FENCE_OK, c);
    ck_assert_uint_eq(fence_lease_token(l), 1);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    fence_client_close(c);
}
END_TEST

START_TEST(status_strings)
{
    for (int s = FENCE_OK; s <= FENCE_ECLOCK; s++) {
        ck_assert_str_ne(fence_strerror(s), "unknown status");
        ck_assert_ptr_nonnull(fence_status_name(s));
    }
    ck_assert_str_eq(fence_strerror(-1), "unknown status");
    ck_assert_str_eq(fence_strerror(9999), "unknown status");
    ck_assert_ptr_nonnull(fence_status_name(-1));
    ck_assert_ptr_nonnull(fence_status_name(9999));
    ck_assert_str_eq(fence_status_name(FENCE_LOST), "FENCE_LOST");
}
END_TEST

/* A db index the server refuses (beyond its 'databases 16'): an error
 * with a message, not a client that fails later. */
START_TEST(open_db_out_of_range)
{
    char url[256];
    snprintf(url, sizeof url, "%s/9999", tu_env("FENCE_TEST_REDIS_URL"));
    fence_client *c = NULL;
    int rc = fence_client_open_url(&c, url);
    ck_assert_msg(rc != FENCE_OK, "db 9999 (beyond 'databases 16') was accepted");
    ck_assert_ptr_nonnull(c);
    ck_assert_str_ne(fence_client_errmsg(c), "");
    fence_client_close(c);
}
END_TEST

static Suite *badinput_suite(void)
{
    Suite *s = suite_create("badinput");
    TCase *tc = tcase_create("client");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, open_null_args);
    tcase_add_test(tc, open_bad_urls);
    tcase_add_test(tc, open_tls_url_refused);
    tcase_add_test(tc, open_bad_options);
    tcase_add_test(tc, failed_open_handle_is_inert);
    tcase_add_test(tc, open_unreachable_is_econn);
    tcase_add_test(tc, open_wrong_password_is_eauth);
    tcase_add_test(tc, open_db_out_of_range);
    tcase_add_test(tc, client_functions_null);
    tcase_add_test(tc, status_strings);
    suite_add_tcase(s, tc);

    tc = tcase_create("lease");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, acquire_null_args);
    tcase_add_test(tc, acquire_bad_names);
    tcase_add_test(tc, acquire_bad_numbers);
    tcase_add_test(tc, lease_functions_null);
    tcase_add_test(tc, token_raise_out_of_range);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(badinput_suite());
}
