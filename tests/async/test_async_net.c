/* test_async_net.c -- the asynchronous API's transports and failures:
 * a unix socket (a redis-server of the test's own), TLS (a Redis with a
 * TLS listener of its own, certificates made here), and servers that fail
 * it -- refused, silent, sending garbage, a TLS handshake that never
 * ends, killed while a lease is held, paused, connections killed -- each
 * answered within a deadline (nothing hangs); the server check
 * (allkeys-* eviction: the blocking API's status and message); WAIT for
 * min_replicas (given back and FENCE_EREPLICAS as fence_acquire); Redis
 * Cluster refused with a clear error; a server that answers every round
 * trip 250 ms late: each call held to its own budget (connect, then I/O),
 * asynchronous and blocking alike, not to quiet time per command. */
#include "asyncutil.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *url(void)
{
    return tu_env("FENCE_TEST_REDIS_URL");
}

/* Acquire and release one lease on a handle, asserting both worked. */
static void acquire_release(fence_async *a, const char *base)
{
    au_acq r = au_acquire(a, tu_name(base), 2000, NULL);
    ck_assert_msg(r.st == FENCE_OK, "acquire: %s: %s", fence_status_name(r.st), r.msg);
    ck_assert_uint_ge(fence_lease_token(r.lease), 1);
    au_rel rel = au_release(a, r.lease);
    ck_assert_msg(rel.st == FENCE_OK, "release: %s: %s", fence_status_name(rel.st), rel.msg);
}

/* ---- transports ------------------------------------------------------------------- */

START_TEST(unix_socket)
{
    char sock[300], u[400];
    int pid = au_unix_start(sock, sizeof sock);
    snprintf(u, sizeof u, "unix://%s?db=2", sock);
    fence_async *a = au_open(u, 1);
    au_acq r = au_acquire(a, "async-unix", 1000, NULL);
    int ok = r.st == FENCE_OK && fence_lease_token(r.lease) == 1; /* dense: a fresh counter */
    int64_t ran = ok ? au_run(a, NULL, 1200) : 0; /* renewed over the socket */
    int held = ok && !fence_lease_lost(r.lease);
    au_rel rel = {0, -1, ""};
    if (ok) {
        rel = au_release(a, r.lease);
    }
    fence_async_close(a);
    au_unix_stop(pid, sock);
    ck_assert_msg(ok, "acquire over %s: %s: %s", u, fence_status_name(r.st), r.msg);
    ck_assert_int_ge(ran, 1200);
    ck_assert(held);
    ck_assert_int_eq(rel.st, FENCE_OK);
}
END_TEST

static char certs[1024];

/* A CA and a server certificate for 127.0.0.1 (test_tls.c's recipe). */
static void make_certs(void)
{
    snprintf(certs, sizeof certs, "%s/async-tls-%d", tu_env("FENCE_TEST_SPAWN_DIR"),
             (int)getpid());
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cd '%s' && "
       "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > server.ext && "
       "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
       "-keyout ca.key -out ca.crt -days 2 -subj /CN=fence-async-ca 2>/dev/null && "
       "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
       "-keyout server.key -out server.csr -subj /CN=localhost 2>/dev/null && "
       "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
       "-out server.crt -days 2 -extfile server.ext 2>/dev/null", certs, certs);
    ck_assert_msg(system(cmd) == 0, "making certificates failed: %s", cmd);
    setenv("FENCE_TLS_DIR", certs, 1);
}

static int tls_port(const lu_set *s)
{
    char env[1100], line[128];
    snprintf(env, sizeof env, "%s/env", s->dir);
    FILE *f = fopen(env, "r");
    ck_assert_ptr_nonnull(f);
    int port = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        sscanf(line, "TLS_PORT=%d", &port);
    }
    fclose(f);
    ck_assert_int_gt(port, 0);
    return port;
}

START_TEST(tls_transport)
{
    make_certs();
    lu_set s;
    lu_set_start(&s, "tls", NULL);
    char u[128], ca[1100];
    snprintf(u, sizeof u, "rediss://127.0.0.1:%d", tls_port(&s));
    snprintf(ca, sizeof ca, "%s/ca.crt", certs);
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = u;
    o.tls_ca_file = ca;
    fence_async *a = NULL;
    ck_assert_int_eq(fence_async_open(&a, &o), FENCE_OK);
    au_acq r = au_acquire(a, tu_name("async-tls"), 400, NULL);
    ck_assert_msg(r.st == FENCE_OK, "%s: %s", fence_status_name(r.st), r.msg);
    au_run(a, NULL, 1300); /* renewed over TLS, three TTLs */
    ck_assert_int_eq(fence_lease_lost(r.lease), 0);
    ck_assert_int_eq(au_release(a, r.lease).st, FENCE_OK);
    fence_async_close(a);

    /* A certificate that does not verify: the blocking API's reason. */
    o.tls_server_name = "wrong.example.org";
    ck_assert_int_eq(fence_async_open(&a, &o), FENCE_OK);
    r = au_acquire(a, tu_name("async-tls-bad"), 1000, NULL);
    ck_assert_int_eq(r.st, FENCE_ECONN);
    ck_assert_msg(strstr(r.msg, "certificate verification failed") != NULL, "%s", r.msg);
    fence_async_close(a);
    lu_set_stop(&s);
}
END_TEST

/* ---- servers that fail ------------------------------------------------------------- */

/* A listening socket on a free loopback port (never accepted from). */
static int listener(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(fd, 16), 0);
    getsockname(fd, (struct sockaddr *)&sa, &len);
    *port = ntohs(sa.sin_port);
    return fd;
}

/* A server that answers whatever it is sent with bytes that are no RESP. */
static void *garbage_server(void *arg)
{
    int lfd = *(int *)arg;
    int fd = accept(lfd, NULL, NULL);
    if (fd >= 0) {
        char buf[4096];
        if (read(fd, buf, sizeof buf) > 0) {
            ssize_t w = write(fd, "\x01\x02garbage\r\n", 11);
            (void)w;
        }
        tu_sleep_ms(500);
        close(fd);
    }
    return NULL;
}

/* An acquire on url (io and connect timeouts 300 ms) fails with ECONN
 * saying why within max_ms. */
static void fails_fast(const char *u, int tls, const char *why, int64_t max_ms)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = u;
    o.tls = tls;
    o.tls_insecure = tls;
    o.io_timeout_ms = 300;
    o.connect_timeout_ms = 300;
    fence_async *a = NULL;
    ck_assert_int_eq(fence_async_open(&a, &o), FENCE_OK);
    int64_t t0 = tu_now_ms();
    au_acq r = au_acquire(a, tu_name("async-fail"), 1000, NULL);
    int64_t took = tu_now_ms() - t0;
    ck_assert_msg(r.st == FENCE_ECONN, "%s: %s: %s", u, fence_status_name(r.st), r.msg);
    ck_assert_msg(strstr(r.msg, why) != NULL, "%s: '%s' lacks '%s'", u, r.msg, why);
    ck_assert_msg(took <= max_ms, "%s: took %lld ms", u, (long long)took);
    fence_async_close(a);
}

START_TEST(failing_servers_answer_in_time)
{
    char u[64];
    int port = 0, lfd = listener(&port);
    snprintf(u, sizeof u, "redis://127.0.0.1:%d", port);
    fails_fast(u, 0, "timed out", 2000);             /* accepted, never answered */
    fails_fast(u, 1, "Connection timed out", 2000);  /* a TLS handshake never finished */
    close(lfd);
    fails_fast(u, 0, "Connection refused", 1000);    /* nobody listens */

    lfd = listener(&port);
    snprintf(u, sizeof u, "redis://127.0.0.1:%d", port);
    pthread_t th;
    pthread_create(&th, NULL, garbage_server, &lfd);
    fails_fast(u, 0, "protocol error", 1000);
    pthread_join(th, NULL);
    close(lfd);
}
END_TEST

START_TEST(killed_server_loses_the_lease_once)
{
    lu_set s;
    lu_set_start(&s, "solo", NULL);
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = s.master_url;
    o.io_timeout_ms = 200;
    o.connect_timeout_ms = 200;
    fence_async *a = NULL;
    ck_assert_int_eq(fence_async_open(&a, &o), FENCE_OK);
    lu_lost lr;
    lu_lost_init(&lr);
    au_acq r = au_acquire(a, tu_name("async-kill"), 400, &lr);
    ck_assert_int_eq(r.st, FENCE_OK);
    lu_set_ctl(&s, "master", "kill");
    int64_t t0 = tu_now_ms();
    while (atomic_load(&lr.calls) == 0 && tu_now_ms() - t0 < 3000) {
        au_run(a, NULL, 20);
    }
    int64_t took = tu_now_ms() - t0;
    ck_assert_int_eq(atomic_load(&lr.calls), 1);
    ck_assert_int_eq(atomic_load(&lr.reason), FENCE_ECONN);
    ck_assert_msg(took <= 1000, "lost %lld ms after the kill (TTL 400)", (long long)took);
    au_run(a, NULL, 300);
    ck_assert_int_eq(atomic_load(&lr.calls), 1);
    au_rel rel = au_release(a, r.lease); /* lost while unreachable: Redis is asked */
    ck_assert_int_eq(rel.st, FENCE_ECONN);
    fence_async_close(a);
    lu_set_stop(&s);
}
END_TEST

START_TEST(paused_server_times_out)
{
    lu_set s;
    lu_set_start(&s, "solo", NULL);
    lu_set_ctl(&s, "master", "pause");
    fails_fast(s.master_url, 0, "timed out", 2000);
    lu_set_ctl(&s, "master", "resume");
    lu_set_stop(&s);
}
END_TEST

/* A server (a delaying relay in front of the shared Redis) that answers
 * every round trip 250 ms late, io_timeout_ms and connect_timeout_ms 300:
 * each command comes back within the I/O timeout, but a call that needs
 * several round trips must not take several timeouts -- an asynchronous
 * acquire on a fresh connection (setup, server check, script: 750 ms of
 * round trips) fails by its budget, connect + I/O = 600 ms (it took
 * 2,008 ms when each request counted only the quiet time before its own
 * reply); a blocking acquire on an open connection (check + script: 500
 * ms) by its I/O timeout, 300 ms.  With 10 ms of delay both succeed. */
START_TEST(slow_server_bounded_by_the_call)
{
    au_relay rl;
    au_relay_start(&rl, atoi(tu_env("FENCE_TEST_REDIS_PORT")), 125);
    char u[64];
    snprintf(u, sizeof u, "redis://127.0.0.1:%d", rl.port);
    fails_fast(u, 0, "timed out", 800); /* budget 600 ms */
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = u;
    o.io_timeout_ms = 300;

    /* The blocking API: fence_client_open connects (and probes) within its
     * budget; then an acquire's check + script must fit in one I/O timeout. */
    o.connect_timeout_ms = 2000;
    fence_client *c = NULL;
    EXPECT_RC(fence_client_open(&c, &o), FENCE_OK, c);
    fence_lease *l = NULL;
    int64_t t0 = tu_now_ms();
    fence_status st = fence_try_acquire(c, tu_name("blocking-slow"), 5000, &l);
    int64_t took = tu_now_ms() - t0;
    fprintf(stderr, "slow_server_bounded_by_the_call: blocking acquire %s after %lld ms\n",
            fence_status_name(st), (long long)took);
    ck_assert_msg(st == FENCE_ECONN, "%s: %s", fence_status_name(st), fence_client_errmsg(c));
    ck_assert_msg(took >= 250 && took <= 500, "the acquire took %lld ms (I/O budget 300)",
                  (long long)took);
    fence_client_close(c);
    au_relay_stop(&rl);

    au_relay_start(&rl, atoi(tu_env("FENCE_TEST_REDIS_PORT")), 10);
    snprintf(u, sizeof u, "redis://127.0.0.1:%d", rl.port);
    o.connect_timeout_ms = 300;
    fence_async *a = NULL;
    ck_assert_int_eq(fence_async_open(&a, &o), FENCE_OK);
    acquire_release(a, "async-slow-ok");
    fence_async_close(a);
    au_relay_stop(&rl);
}
END_TEST

START_TEST(killed_connection_reconnects)
{
    fence_async *a = au_open(url(), 0);
    lu_lost lr;
    lu_lost_init(&lr);
    au_acq r = au_acquire(a, tu_name("async-ckill"), 600, &lr);
    ck_assert_int_eq(r.st, FENCE_OK);
    redisContext *rc = tu_redis();
    lu_cmd_ok(rc, "CLIENT KILL TYPE normal SKIPME yes");
    au_run(a, NULL, 1500); /* the next renewal reconnects */
    ck_assert_int_eq(atomic_load(&lr.calls), 0);
    ck_assert_int_eq(fence_lease_lost(r.lease), 0);
    fence_metrics m;
    fence_client_metrics(fence_async_client(a), &m);
    ck_assert_uint_ge(m.reconnects, 1);
    ck_assert_int_eq(au_release(a, r.lease).st, FENCE_OK);
    redisFree(rc);
    fence_async_close(a);
}
END_TEST

/* ---- the server check, Redis Cluster ------------------------------------------------ */

START_TEST(eviction_policy_refused_as_blocking)
{
    lu_set s;
    lu_set_start(&s, "solo", "maxmemory-policy allkeys-lru");
    fence_client *c = lu_open_url(s.master_url);
    fence_lease *l = NULL;
    fence_status want = fence_try_acquire(c, "async-evict", 1000, &l);
    ck_assert_int_eq(want, FENCE_ECONFIG);
    char msg[700];
    snprintf(msg, sizeof msg, "%s", fence_client_errmsg(c));
    fence_client_close(c);
    fence_async *a = au_open(s.master_url, 0);
    au_acq r = au_acquire(a, "async-evict", 1000, NULL);
    ck_assert_int_eq(r.st, FENCE_ECONFIG);
    ck_assert_str_eq(r.msg, msg);
    fence_async_close(a);

    fence_client_options o;
    fence_client_options_init(&o);
    o.url = s.master_url;
    o.allow_eviction = 1;
    ck_assert_int_eq(fence_async_open(&a, &o), FENCE_OK);
    acquire_release(a, "async-evict-ok");
    fence_async_close(a);
    lu_set_stop(&s);
}
END_TEST

START_TEST(min_replicas_as_blocking)
{
    lu_set s;
    lu_set_start(&s, "replica", NULL);
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = s.master_url;
    o.min_replicas = 1;
    fence_async *a = NULL;
    ck_assert_int_eq(fence_async_open(&a, &o), FENCE_OK);
    acquire_release(a, "async-wait-1"); /* the one replica acknowledges */
    fence_async_close(a);

    /* Two asked, one there: given back, FENCE_EREPLICAS with fence_acquire's message. */
    o.min_replicas = 2;
    fence_client *c = NULL;
    ck_assert_int_eq(fence_client_open(&c, &o), FENCE_OK);
    fence_lease *l = NULL;
    ck_assert_int_eq(fence_try_acquire(c, "async-wait-2", 2000, &l), FENCE_EREPLICAS);
    char msg[700];
    snprintf(msg, sizeof msg, "%s", fence_client_errmsg(c));
    fence_client_close(c);
    ck_assert_int_eq(fence_async_open(&a, &o), FENCE_OK);
    au_acq r = au_acquire(a, "async-wait-2", 2000, NULL);
    ck_assert_int_eq(r.st, FENCE_EREPLICAS);
    ck_assert_str_eq(r.msg, msg);
    ck_assert_ptr_null(r.lease);
    redisContext *rc = lu_connect(s.master);
    ck_assert_int_eq(lu_rexists(rc, "fence:{async-wait-2}"), 0); /* given back */
    redisFree(rc);
    fence_async_close(a);
    lu_set_stop(&s);
}
END_TEST

START_TEST(cluster_refused)
{
    lu_set s;
    lu_set_start(&s, "cluster", NULL);
    fence_async *a = au_open(s.master_url, 0);
    au_acq r = au_acquire(a, "async-cluster", 1000, NULL);
    ck_assert_int_eq(r.st, FENCE_EINVAL);
    ck_assert_msg(strstr(r.msg, "Redis Cluster") && strstr(r.msg, "blocking API"), "%s", r.msg);
    fence_async_close(a);
    lu_set_stop(&s);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("async_net");
    TCase *t = tcase_create("async_net");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, unix_socket);
    tcase_add_test(t, tls_transport);
    tcase_add_test(t, failing_servers_answer_in_time);
    tcase_add_test(t, killed_server_loses_the_lease_once);
    tcase_add_test(t, paused_server_times_out);
    tcase_add_test(t, slow_server_bounded_by_the_call);
    tcase_add_test(t, killed_connection_reconnects);
    tcase_add_test(t, eviction_policy_refused_as_blocking);
    tcase_add_test(t, min_replicas_as_blocking);
    tcase_add_test(t, cluster_refused);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
