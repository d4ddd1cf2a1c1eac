/*
 * test_client.c -- the client: URLs, AUTH (password, ACL user, wrong
 * password, percent-escapes, option overrides), database selection, unix
 * sockets, reconnecting after a Redis restart, per-thread error messages,
 * the metrics (struct and Prometheus text), and the issuer a URL names
 * (issue 28: a scheme this build lacks, an option of another issuer, each
 * refused by name; what fence_client_describe says).  Real redis-server from
 * scripts/with-servers (plus one this suite starts on a unix socket); the
 * tests that restart Redis always bring it back.
 */
#include "casetable.h"
#include "fence.h"
#include "leaseutil.h"

#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* One acquire/release round trip works on this client. */
static void round_trip(fence_client *c, const char *base)
{
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name(base));
    fence_lease *l = lu_acquire_ok(c, nm, 1000, 0);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
}

/* ------------------------------------------------------------------ */
/* Open, URL, AUTH                                                      */
/* ------------------------------------------------------------------ */

START_TEST(open_plain_url)
{
    const char *url = tu_env("FENCE_TEST_REDIS_URL");
    fence_client *c = lu_open_url(url);
    ck_assert_str_eq(fence_client_errmsg(c), "");
    /* The URL as given, or normalised (e.g. "/0" appended). */
    ck_assert_msg(strncmp(fence_client_url(c), url, strlen(url)) == 0,
                  "fence_client_url \"%s\" for \"%s\"", fence_client_url(c), url);
    round_trip(c, "plain");
    ck_assert_str_eq(fence_client_errmsg(c), "");
    fence_client_close(c);

    /* With an explicit db 0. */
    char u[256];
    snprintf(u, sizeof u, "%s/0", url);
    c = lu_open_url(u);
    round_trip(c, "plain0");
    fence_client_close(c);
}
END_TEST

/* Open "redis://CREDS@<host:port of ENV>", do a round trip, and check that
 * fence_client_url() does not show SECRET.  The caller closes the client. */
static fence_client *open_with_creds(const char *creds, const char *env, const char *secret)
{
    char url[256];
    snprintf(url, sizeof url, "redis://%s@%s", creds, lu_hostport(env));
    fence_client *c = lu_open_url(url);
    round_trip(c, "auth");
    ck_assert_ptr_null(strstr(fence_client_url(c), secret));
    return c;
}

START_TEST(auth_password_url)
{
    fence_client *c =
        open_with_creds(":fence-auth-pw", "FENCE_TEST_REDIS_AUTH_URL", "fence-auth-pw");
    ck_assert_ptr_nonnull(strstr(fence_client_url(c), lu_hostport("FENCE_TEST_REDIS_AUTH_URL")));
    fence_client_close(c);
}
END_TEST

START_TEST(auth_acl_user)
{
    /* The connection really is user "fence". */
    fence_client *c =
        open_with_creds("fence:fence-test-pw", "FENCE_TEST_REDIS_URL", "fence-test-pw");
    fence_client_close(c);
}
END_TEST

START_TEST(auth_wrong_password)
{
    char url[256];
    snprintf(url, sizeof url, "redis://:wrong-pw-0xdead@%s",
             lu_hostport("FENCE_TEST_REDIS_AUTH_URL"));
    lu_expect_eauth(url, "wrong-pw-0xdead");
    snprintf(url, sizeof url, "redis://fence:wrong-pw-0xbeef@%s",
             lu_hostport("FENCE_TEST_REDIS_URL"));
    lu_expect_eauth(url, "wrong-pw-0xbeef");
    snprintf(url, sizeof url, "redis://nosuchuser:fence-test-pw@%s",
             lu_hostport("FENCE_TEST_REDIS_URL"));
    lu_expect_eauth(url, "fence-test-pw");
}
END_TEST

START_TEST(auth_missing_password)
{
    /* A password-protected Redis and no password. */
    lu_expect_eauth(tu_env("FENCE_TEST_REDIS_AUTH_URL"), "fence-auth-pw");
}
END_TEST

START_TEST(auth_percent_encoded)
{
    /* A user whose name and password need escaping in a URL. */
    redisContext *r = tu_redis();
    char user[64];
    snprintf(user, sizeof user, "u@%ld", (long)getpid());
    const char *pw = "p@ss:w/rd%x y?#";
    redisReply *rep = redisCommand(r, "ACL SETUSER %s on >%s ~* &* +@all", user, pw);
    ck_assert_ptr_nonnull(rep);
    ck_assert_msg(rep->type == REDIS_REPLY_STATUS, "ACL SETUSER: %s",
                  rep->type == REDIS_REPLY_ERROR ? rep->str : "?");
    freeReplyObject(rep);

    char url[256];
    snprintf(url, sizeof url, "redis://u%%40%ld:p%%40ss%%3Aw%%2Frd%%25x%%20y%%3F%%23@%s",
             (long)getpid(), lu_hostport("FENCE_TEST_REDIS_URL"));
    fence_client *c = NULL;
    int rc = fence_client_open_url(&c, url);
    if (rc == FENCE_OK) {
        round_trip(c, "pct");
        ck_assert_ptr_null(strstr(fence_client_url(c), "p%40ss"));
    }
    const char *u = c != NULL ? fence_client_url(c) : "";
    int leaked = strstr(u, "p%40ss") != NULL || strstr(u, "p@ss") != NULL;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", c != NULL ? fence_client_errmsg(c) : "no handle");
    fence_client_close(c);

    /* The same password on the password-protected Redis, by escape: the
     * escaped password URL for "fence-auth-pw" with every byte escaped. */
    char url2[256];
    snprintf(url2, sizeof url2,
             "redis://:%%66%%65%%6e%%63%%65%%2d%%61%%75%%74%%68%%2D%%70%%77@%s",
             lu_hostport("FENCE_TEST_REDIS_AUTH_URL"));
    fence_client *c2 = NULL;
    int rc2 = fence_client_open_url(&c2, url2);
    char msg2[512];
    snprintf(msg2, sizeof msg2, "%s", c2 != NULL ? fence_client_errmsg(c2) : "no handle");
    if (rc2 == FENCE_OK) {
        round_trip(c2, "pct2");
    }
    fence_client_close(c2);

    rep = redisCommand(r, "ACL DELUSER %s", user);
    freeReplyObject(rep);
    redisFree(r);
    ck_assert_msg(rc == FENCE_OK, "user \"%s\" password \"%s\" from escapes: %s (%s)", user, pw,
                  fence_status_name(rc), msg);
    ck_assert_msg(!leaked, "fence_client_url shows the password");
    ck_assert_msg(rc2 == FENCE_OK, "fully escaped password: %s (%s)", fence_status_name(rc2),
                  msg2);
}
END_TEST

/* fence_client_open() of "redis://CREDS@<host:port of ENV>" (CREDS NULL:
 * "redis://<host:port>") with the username and password options USER and
 * PASSWORD (NULL: unset). */
static int open_overriding(fence_client **c, const char *creds, const char *env,
                           const char *user, const char *password)
{
    char url[256];
    snprintf(url, sizeof url, "redis://%s%s%s", creds != NULL ? creds : "",
             creds != NULL ? "@" : "", lu_hostport(env));
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url;
    o.username = user;
    o.password = password;
    *c = NULL;
    return fence_client_open(c, &o);
}

START_TEST(auth_option_overrides)
{
    fence_client *c = NULL;
    EXPECT_RC(open_overriding(&c, NULL, "FENCE_TEST_REDIS_URL", "fence", "fence-test-pw"),
              FENCE_OK, c);
    round_trip(c, "ovr");
    fence_client_close(c);

    /* The override wins over the URL's credentials. */
    EXPECT_RC(open_overriding(&c, ":not-it", "FENCE_TEST_REDIS_AUTH_URL", NULL, "fence-auth-pw"),
              FENCE_OK, c);
    round_trip(c, "ovr2");
    fence_client_close(c);

    /* A wrong override is refused and not shown. */
    int rc = open_overriding(&c, NULL, "FENCE_TEST_REDIS_AUTH_URL", NULL, "override-wrong-1234");
    if (rc == FENCE_OK) {
        fence_lease *l = NULL;
        rc = fence_try_acquire(c, tu_name("ovr3"), 1000, &l);
    }
    ck_assert_msg(rc == FENCE_EAUTH, "got %s", fence_status_name(rc));
    ck_assert_ptr_null(strstr(fence_client_errmsg(c), "override-wrong-1234"));
    fence_client_close(c);
}
END_TEST

START_TEST(db_from_url)
{
    char url[256];
    snprintf(url, sizeof url, "%s/3", tu_env("FENCE_TEST_REDIS_URL"));
    fence_client *c = lu_open_url(url);
    char nm[256], k[600];
    snprintf(nm, sizeof nm, "%s", tu_name("db3"));
    lu_owner_key(k, sizeof k, nm);
    fence_lease *l = lu_acquire_ok(c, nm, 2000, 0);
    redisContext *r = tu_redis();
    ck_assert_int_eq(lu_rexists(r, k), 0); /* not in db 0 */
    freeReplyObject(redisCommand(r, "SELECT 3"));
    lu_expect_get(r, k, fence_lease_owner(l));
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    redisFree(r);
    fence_client_close(c);
}
END_TEST

/* A redis-server of our own on a unix socket (the shared test Redis has
 * none).  Fails, never skips, when it cannot be started. */
START_TEST(unix_socket_url)
{
    char dir[] = "/tmp/fence-unix.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char sock[256], dirarg[300];
    snprintf(sock, sizeof sock, "%s/redis.sock", dir);
    snprintf(dirarg, sizeof dirarg, "%s", dir);
    char *argv[] = {"redis-server", "--port", "0", "--unixsocket", sock, "--unixsocketperm",
                    "700", "--dir", dirarg, "--save", "", "--appendonly", "no",
                    "--daemonize", "no", "--loglevel", "warning", NULL};
    pid_t pid = 0;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    int err = posix_spawnp(&pid, "redis-server", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    ck_assert_msg(err == 0, "cannot start redis-server for the unix socket test: %s",
                  strerror(err));
    int up = 0;
    for (int i = 0; i < 200 && !up; i++) {
        redisContext *r = redisConnectUnix(sock);
        up = r != NULL && r->err == 0;
        redisFree(r);
        if (!up) {
            tu_sleep_ms(10);
        }
    }
    char url[400], url_db[420];
    snprintf(url, sizeof url, "unix://%s", sock);
    snprintf(url_db, sizeof url_db, "unix://%s?db=2", sock);
    fence_client *c = NULL, *c2 = NULL;
    int rc = -1, rc2 = -1, rt_ok = 0, db_ok = 0;
    char msg[512] = "", msg2[512] = "";
    if (up) {
        fence_client_options o; /* dense: token 1 is a fresh counter's first */
        fence_client_options_init(&o);
        o.url = url;
        o.token_mode = FENCE_TOKENS_DENSE;
        rc = fence_client_open(&c, &o);
        snprintf(msg, sizeof msg, "%s", c != NULL ? fence_client_errmsg(c) : "no handle");
        if (rc == FENCE_OK) {
            fence_lease *l = NULL;
            rt_ok = fence_try_acquire(c, "unix-lease", 1000, &l) == FENCE_OK &&
                    fence_lease_token(l) == 1 && fence_release(l) == FENCE_OK;
        }
        rc2 = fence_client_open_url(&c2, url_db);
        snprintf(msg2, sizeof msg2, "%s", c2 != NULL ? fence_client_errmsg(c2) : "no handle");
        if (rc2 == FENCE_OK) {
            fence_lease *l = NULL;
            if (fence_try_acquire(c2, "unix-db", 5000, &l) == FENCE_OK) {
                redisContext *r = redisConnectUnix(sock);
                redisReply *a = redisCommand(r, "EXISTS fence:{unix-db}");
                freeReplyObject(redisCommand(r, "SELECT 2"));
                redisReply *b = redisCommand(r, "EXISTS fence:{unix-db}");
                db_ok = a != NULL && b != NULL && a->integer == 0 && b->integer == 1;
                freeReplyObject(a);
                freeReplyObject(b);
                redisFree(r);
                fence_release(l);
            }
        }
    }
    fence_client_close(c);
    fence_client_close(c2);
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    unlink(sock);
    rmdir(dir);
    ck_assert_msg(up, "our redis-server on %s did not come up", sock);
    ck_assert_msg(rc == FENCE_OK, "%s: %s (%s)", url, fence_status_name(rc), msg);
    ck_assert_msg(rt_ok, "acquire/release over %s failed", url);
    ck_assert_msg(rc2 == FENCE_OK, "%s: %s (%s)", url_db, fence_status_name(rc2), msg2);
    ck_assert_msg(db_ok, "%s did not put the lease in db 2", url_db);
}
END_TEST

/* fence_client_errmsg() belongs to the calling thread. */
typedef struct errmsg_arg {
    fence_client *c;
    char seen[256];
} errmsg_arg;

static void *errmsg_thread(void *arg)
{
    errmsg_arg *a = arg;
    snprintf(a->seen, sizeof a->seen, "%s", fence_client_errmsg(a->c));
    return NULL;
}

START_TEST(errmsg_per_thread)
{
    fence_client *c = lu_open_client();
    fence_lease *l = NULL;
    EXPECT_RC(fence_try_acquire(c, "", 1000, &l), FENCE_EINVAL, c);
    ck_assert_str_ne(fence_client_errmsg(c), "");
    errmsg_arg a = {c, "unset"};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, errmsg_thread, &a), 0);
    pthread_join(th, NULL);
    ck_assert_msg(a.seen[0] == '\0', "another thread sees this thread's error: \"%s\"", a.seen);
    ck_assert_str_ne(fence_client_errmsg(c), "");
    fence_client_close(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Redis restarts                                                       */
/* ------------------------------------------------------------------ */

START_TEST(reconnect_after_restart)
{
    fence_client *c = lu_open_client();
    round_trip(c, "before");
    fence_metrics m0 = lu_metrics(c);
    tu_redis_ctl("restart");
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("after"));
    fence_lease *l = lu_acquire_after_restart(c, nm, 1000);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    fence_metrics m1 = lu_metrics(c);
    ck_assert_uint_gt(m1.reconnects, m0.reconnects);
    fence_client_close(c);
}
END_TEST

/* Restart wipes the data (no persistence): the held lease's next renewal
 * is refused, so it is reported lost -- no crash, no hang. */
START_TEST(restart_loses_held_lease)
{
    fence_client *c = lu_open_client();
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("restart"));
    lu_lost lc;
    lu_lost_init(&lc);
    fence_lease *l = lu_acquire_cb(c, nm, 5000, 100, 0, &lc);
    uint64_t tok = fence_lease_token(l);
    /* Let the heartbeat connect and renew once, so that its connection
     * after the restart is a reconnect. */
    int64_t w0 = tu_now_ms();
    while (lu_metrics(c).renew_ok == 0 && tu_now_ms() - w0 < 2000) {
        tu_sleep_ms(5);
    }
    fence_metrics m0 = lu_metrics(c);
    ck_assert_uint_gt(m0.renew_ok, 0);

    /* Down: the lease is still valid for seconds, so it is not lost yet
     * (renewals fail with FENCE_ECONN and are retried). */
    tu_redis_ctl("stop");
    tu_sleep_ms(300); /* a few failed renewals */
    int calls_down = atomic_load(&lc.calls);
    int lost_down = fence_lease_lost(l);
    int64_t valid_down = fence_lease_valid_ms(l);
    tu_redis_ctl("start");
    ck_assert_msg(calls_down == 0 && !lost_down,
                  "lease reported lost (reason %s) while Redis was down and it was still "
                  "valid (valid_ms %" PRId64 ")",
                  fence_status_name(atomic_load(&lc.reason)), valid_down);
    ck_assert_msg(valid_down > 0, "valid_ms 0 while Redis was down, TTL 5 s");

    /* Back, but empty: the next renewal is refused. */
    int64_t waited = lu_wait_lost(&lc, 3000);
    tu_sleep_ms(300);
    fprintf(stderr, "restart_loses_held_lease: lost %d ms after Redis was back\n", (int)waited);
    ck_assert_msg(atomic_load(&lc.calls) == 1, "on_lost called %d times in %" PRId64 " ms",
                  atomic_load(&lc.calls), waited);
    ck_assert_msg(atomic_load(&lc.reason) == FENCE_LOST, "reason %s",
                  fence_status_name(atomic_load(&lc.reason)));
    ck_assert_int_ne(fence_lease_lost(l), 0);
    ck_assert_int_eq(fence_lease_valid_ms(l), 0);
    fence_metrics m1 = lu_metrics(c);
    ck_assert_uint_gt(m1.reconnects, m0.reconnects);
    ck_assert_uint_eq(m1.lease_lost, m0.lease_lost + 1);
    EXPECT_RC(fence_release(l), FENCE_LOST, c);

    /* The counter went with the data: a fresh lease starts over.  That is
     * the documented price of running Redis without persistence. */
    fence_lease *l2 = lu_acquire_ok(c, nm, 1000, 0);
    fprintf(stderr, "restart_loses_held_lease: token before restart %" PRIu64
            ", after %" PRIu64 "\n", tok, fence_lease_token(l2));
    EXPECT_RC(fence_release(l2), FENCE_OK, c);
    fence_client_close(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Metrics                                                              */
/* ------------------------------------------------------------------ */

START_TEST(metrics_counters)
{
    fence_client *c = lu_open_client_mode(FENCE_HEARTBEAT_MANUAL); /* no background passes */
    fence_client *c2 = lu_open_client();
    fence_metrics m = lu_metrics(c);
    ck_assert_uint_eq(m.lease_acquired, 0);
    ck_assert_uint_eq(m.acquire_attempts, 0);
    ck_assert_uint_eq(m.leases_held, 0);
    ck_assert_uint_eq(m.heartbeat_latency_count, 0);

    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("metrics"));
    fence_lease *l = lu_acquire_cb(c, nm, 2000, 10, 0, NULL);
    m = lu_metrics(c);
    ck_assert_uint_eq(m.lease_acquired, 1);
    ck_assert_uint_eq(m.acquire_attempts, 1);
    ck_assert_uint_eq(m.acquire_contended, 0);
    ck_assert_uint_eq(m.leases_held, 1);

    /* Contention seen from the other client. */
    fence_metrics n0 = lu_metrics(c2);
    fence_lease *busy = NULL;
    EXPECT_RC(fence_try_acquire(c2, nm, 2000, &busy), FENCE_BUSY, c2);
    fence_metrics n1 = lu_metrics(c2);
    ck_assert_uint_eq(n1.acquire_attempts, n0.acquire_attempts + 1);
    ck_assert_uint_eq(n1.acquire_contended, n0.acquire_contended + 1);
    ck_assert_uint_eq(n1.lease_acquired, n0.lease_acquired);

    /* Renewals: manual and by heartbeat passes. */
    EXPECT_RC(fence_renew(l), FENCE_OK, c);
    ck_assert_uint_eq(lu_metrics(c).renew_ok, 1);
    for (int i = 0; i < 3; i++) {
        tu_sleep_ms(15);
        EXPECT_RC(fence_heartbeat_run(c, NULL), FENCE_OK, c);
    }
    m = lu_metrics(c);
    ck_assert_uint_eq(m.renew_ok, 4);
    ck_assert_uint_eq(m.heartbeat_latency_count, 3);
    ck_assert_uint_eq(lu_latency_total(&m), 3);
    ck_assert(m.heartbeat_latency_sum_s > 0.0 && m.heartbeat_latency_sum_s < 3.0);

    EXPECT_RC(fence_release(l), FENCE_OK, c);
    m = lu_metrics(c);
    ck_assert_uint_eq(m.lease_released, 1);
    ck_assert_uint_eq(m.leases_held, 0);
    ck_assert_uint_eq(m.lease_lost, 0);

    /* A lost lease counts once. */
    l = lu_acquire_cb(c, nm, 2000, 10, 0, NULL);
    redisContext *r = tu_redis();
    char k[600];
    lu_owner_key(k, sizeof k, nm);
    lu_rdel(r, k);
    tu_sleep_ms(15);
    EXPECT_RC(fence_heartbeat_run(c, NULL), FENCE_OK, c);
    EXPECT_RC(fence_renew(l), FENCE_LOST, c);
    m = lu_metrics(c);
    ck_assert_uint_eq(m.lease_lost, 1);
    ck_assert_uint_eq(m.lease_acquired, 2);
    ck_assert_uint_ge(m.renew_failed, 1);
    ck_assert_uint_eq(m.leases_held, 0);
    EXPECT_RC(fence_release(l), FENCE_LOST, c);
    m = lu_metrics(c);
    ck_assert_uint_eq(m.lease_released, 1);
    ck_assert_uint_eq(m.lease_lost, 1);
    redisFree(r);
    fence_client_close(c);
    fence_client_close(c2);
}
END_TEST

/* The value on the line that starts with `prefix` (followed by a space). */
static double prom_value(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *p = text; p != NULL && *p != '\0';) {
        if (strncmp(p, prefix, n) == 0 && p[n] == ' ') {
            return strtod(p + n + 1, NULL);
        }
        p = strchr(p, '\n');
        if (p != NULL) {
            p++;
        }
    }
    ck_abort_msg("no line \"%s <value>\" in:\n%s", prefix, text);
    return -1;
}

START_TEST(metrics_prometheus)
{
    fence_metrics m;
    memset(&m, 0, sizeof m);
    m.lease_acquired = 7;
    m.lease_lost = 2;
    m.renew_ok = 40;
    m.leases_held = 3;
    m.heartbeat_latency_bucket[0] = 5;  /* <= 0.5 ms */
    m.heartbeat_latency_bucket[2] = 3;  /* <= 2 ms */
    m.heartbeat_latency_bucket[12] = 1; /* > 2.5 s */
    m.heartbeat_latency_count = 9;
    m.heartbeat_latency_sum_s = 3.25;

    int need = fence_metrics_prometheus(&m, NULL, 0);
    ck_assert_int_gt(need, 200);
    char *buf = malloc((size_t)need + 1);
    ck_assert_ptr_nonnull(buf);
    int n = fence_metrics_prometheus(&m, buf, (size_t)need + 1);
    ck_assert_int_eq(n, need);
    ck_assert_uint_eq(strlen(buf), (size_t)need);
    ck_assert_ptr_nonnull(strstr(buf, "# TYPE fence_lease_acquired_total counter\n"));
    ck_assert_ptr_nonnull(strstr(buf, "# TYPE fence_lease_lost_total counter\n"));
    ck_assert_ptr_nonnull(strstr(buf, "# TYPE fence_heartbeat_latency_seconds histogram\n"));
    ck_assert_int_eq((int)prom_value(buf, "fence_lease_acquired_total"), 7);
    ck_assert_int_eq((int)prom_value(buf, "fence_lease_lost_total"), 2);
    /* Buckets are cumulative in the exposition format. */
    ck_assert_int_eq((int)prom_value(buf, "fence_heartbeat_latency_seconds_bucket{le=\"0.0005\"}"),
                     5);
    ck_assert_int_eq((int)prom_value(buf, "fence_heartbeat_latency_seconds_bucket{le=\"0.001\"}"),
                     5);
    ck_assert_int_eq((int)prom_value(buf, "fence_heartbeat_latency_seconds_bucket{le=\"0.002\"}"),
                     8);
    ck_assert_int_eq((int)prom_value(buf, "fence_heartbeat_latency_seconds_bucket{le=\"2.5\"}"),
                     8);
    ck_assert_int_eq((int)prom_value(buf, "fence_heartbeat_latency_seconds_bucket{le=\"+Inf\"}"),
                     9);
    ck_assert_int_eq((int)prom_value(buf, "fence_heartbeat_latency_seconds_count"), 9);
    ck_assert(prom_value(buf, "fence_heartbeat_latency_seconds_sum") == 3.25);
    /* Every line ends with a newline, including the last. */
    ck_assert_int_eq(buf[need - 1], '\n');

    /* Too small: truncated, NUL-terminated, and the full length returned. */
    char small[32];
    memset(small, 'x', sizeof small);
    n = fence_metrics_prometheus(&m, small, sizeof small);
    ck_assert_int_eq(n, need);
    ck_assert_int_eq(small[sizeof small - 1], '\0');
    ck_assert_int_eq(strncmp(small, buf, sizeof small - 1), 0);
    char one[1] = {'x'};
    ck_assert_int_eq(fence_metrics_prometheus(&m, one, 1), need);
    ck_assert_int_eq(one[0], '\0');
    /* Exactly the text without room for the NUL: truncated by one. */
    char *tight = malloc((size_t)need);
    ck_assert_int_eq(fence_metrics_prometheus(&m, tight, (size_t)need), need);
    ck_assert_uint_eq(strlen(tight), (size_t)need - 1);
    free(tight);

    /* From a live client too. */
    fence_client *c = lu_open_client();
    round_trip(c, "prom");
    fence_metrics live = lu_metrics(c);
    char big[16384];
    n = fence_metrics_prometheus(&live, big, sizeof big);
    ck_assert_int_gt(n, 0);
    ck_assert_int_lt(n, (int)sizeof big);
    ck_assert_int_eq((int)prom_value(big, "fence_lease_acquired_total"), 1);
    ck_assert_ptr_nonnull(strstr(big, "fence_heartbeat_latency_seconds_bucket{le=\"+Inf\"}"));
    ck_assert_ptr_nonnull(strstr(big, "fence_heartbeat_latency_seconds_sum "));
    ck_assert_ptr_nonnull(strstr(big, "fence_heartbeat_latency_seconds_count "));
    fence_client_close(c);
    free(buf);
}
END_TEST

/* The URL's scheme picks the issuer.  Those this build lacks are refused
 * as such (never stood in for), an option of another issuer by name, and
 * the Redis issuer describes its server. */
static const struct {
    const char *name;
    const char *url;
    const char *issuer; /* fence_url_issuer() */
    const char *option; /* set this Redis option, or NULL */
    const char *says;   /* in the message */
} issuer_cases[] = {
    {"pg_param", "postgresql://127.0.0.1:1/db?fence_wait=sometimes", "postgresql", NULL,
     "unknown fence parameter 'fence_wait=sometimes'"},
    {"pg_libpq_param", "postgres://u@127.0.0.1:1/db?nope=1", "postgresql", NULL,
     "invalid PostgreSQL URL: invalid URI query parameter"},
    {"etcd", "etcd://127.0.0.1:1", "etcd", NULL, "the etcd issuer (etcd:// URLs)"},
    {"etcds", "etcds://127.0.0.1:1,127.0.0.1:2", "etcd", NULL, "not available in this build"},
    {"pg_token_mode", "postgresql://127.0.0.1:1/db", "postgresql", "token_mode",
     "token_mode is an option of the Redis issuer only; this URL names the PostgreSQL issuer"},
    {"pg_prefix", "postgresql://127.0.0.1:1/db", "postgresql", "prefix", "prefix is an option"},
    {"etcd_tls", "etcd://127.0.0.1:1", "etcd", "tls", "TLS options"},
    {"etcd_eviction", "etcd://127.0.0.1:1", "etcd", "allow_eviction", "allow_eviction"},
    {"unknown", "memcached://127.0.0.1:1", NULL, NULL, "unsupported URL scheme"},
};

START_TEST(issuer_by_scheme)
{
    const char *want = issuer_cases[_i].issuer;
    const char *got = fence_url_issuer(issuer_cases[_i].url);
    ck_assert_msg(want == NULL ? got == NULL : got != NULL && strcmp(got, want) == 0,
                  "fence_url_issuer(%s): %s", issuer_cases[_i].url, got ? got : "NULL");
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = issuer_cases[_i].url;
    const char *opt = issuer_cases[_i].option;
    if (opt != NULL && strcmp(opt, "token_mode") == 0) {
        o.token_mode = FENCE_TOKENS_DENSE;
    } else if (opt != NULL && strcmp(opt, "prefix") == 0) {
        o.prefix = "x:";
    } else if (opt != NULL && strcmp(opt, "tls") == 0) {
        o.tls_ca_file = "/etc/ssl/certs/ca-certificates.crt";
    } else if (opt != NULL) {
        o.allow_eviction = 1;
    }
    fence_client *c = NULL;
    ck_assert_int_eq(fence_client_open(&c, &o), FENCE_EINVAL);
    ck_assert_ptr_nonnull(c);
    ck_assert_msg(strstr(fence_client_errmsg(c), issuer_cases[_i].says) != NULL, "%s: %s",
                  issuer_cases[_i].url, fence_client_errmsg(c));
    fence_lease *l = NULL;
    ck_assert_int_eq(fence_try_acquire(c, "x", 1000, &l), FENCE_ESTATE); /* unusable */
    fence_client_close(c);
}
END_TEST

START_TEST(describe_and_issuer)
{
    ck_assert_str_eq(fence_url_issuer("redis://h"), "redis");
    ck_assert_str_eq(fence_url_issuer("rediss://h"), "redis");
    ck_assert_str_eq(fence_url_issuer("unix:///s"), "redis");
    ck_assert_str_eq(fence_url_issuer("redis-sentinel://h#m"), "redis");
    ck_assert_ptr_null(fence_url_issuer(NULL));
    ck_assert_ptr_null(fence_url_issuer("redi"));
    ck_assert_str_eq(fence_client_issuer(NULL), "");
    fence_client *c = lu_open_client();
    ck_assert_str_eq(fence_client_issuer(c), "redis");
    fence_issuer_info ii;
    EXPECT_RC(fence_client_describe(c, &ii), FENCE_OK, c);
    ck_assert_str_eq(ii.issuer, "redis");
    ck_assert_str_eq(ii.url, fence_client_url(c));
    ck_assert_int_eq(ii.nfields, 2);
    ck_assert_str_eq(ii.field[0].key, "persistence");
    ck_assert_str_eq(ii.field[1].key, "maxmemory_policy");
    ck_assert_str_eq(ii.field[1].value, "noeviction");
    ck_assert_int_eq(fence_client_describe(c, NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_client_describe(NULL, &ii), FENCE_EINVAL);
    fence_client_close(c);
    /* fence_client_open_url(NULL): FENCE_URL, then FENCE_REDIS_URL. */
    const char *redis_url = getenv("FENCE_REDIS_URL");
    char *saved = redis_url != NULL ? strdup(redis_url) : NULL;
    setenv("FENCE_URL", "postgresql://127.0.0.1:1/db", 1);
    setenv("FENCE_REDIS_URL", tu_env("FENCE_TEST_REDIS_URL"), 1);
    ck_assert_int_eq(fence_client_open_url(&c, NULL), FENCE_ECONN); /* port 1: closed */
    ck_assert_ptr_nonnull(strstr(fence_client_errmsg(c), "postgresql://127.0.0.1:1/db"));
    ck_assert_str_eq(fence_client_issuer(c), "postgresql");
    fence_client_close(c);
    unsetenv("FENCE_URL");
    EXPECT_RC(fence_client_open_url(&c, NULL), FENCE_OK, c);
    fence_client_close(c);
    if (saved != NULL) {
        setenv("FENCE_REDIS_URL", saved, 1);
    } else {
        unsetenv("FENCE_REDIS_URL");
    }
    free(saved);
}
END_TEST

static Suite *client_suite(void)
{
    Suite *s = suite_create("client");
    TCase *tc = tcase_create("open");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, open_plain_url);
    CT_ADD_CASES(tc, issuer_by_scheme, issuer_cases);
    tcase_add_test(tc, describe_and_issuer);
    tcase_add_test(tc, auth_password_url);
    tcase_add_test(tc, auth_acl_user);
    tcase_add_test(tc, auth_wrong_password);
    tcase_add_test(tc, auth_missing_password);
    tcase_add_test(tc, auth_percent_encoded);
    tcase_add_test(tc, auth_option_overrides);
    tcase_add_test(tc, db_from_url);
    tcase_add_test(tc, unix_socket_url);
    tcase_add_test(tc, errmsg_per_thread);
    suite_add_tcase(s, tc);

    tc = tcase_create("metrics");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, metrics_counters);
    tcase_add_test(tc, metrics_prometheus);
    suite_add_tcase(s, tc);

    tc = tcase_create("restart");
    tcase_set_timeout(tc, 30);
    tcase_add_unchecked_fixture(tc, NULL, lu_ensure_redis_up);
    tcase_add_test(tc, reconnect_after_restart);
    tcase_add_test(tc, restart_loses_held_lease);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(client_suite());
}
