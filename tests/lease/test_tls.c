/*
 * test_tls.c -- issue 9, TLS: a Redis with a TLS listener of the test's
 * own (scripts/redis-set tls, loopback, always stopped) and a CA, server
 * and client certificates made here with openssl req / x509 in the spawn
 * folder.  Verification succeeds with the CA (file or directory), fails
 * clearly with the wrong CA, the system default and a wrong server name;
 * insecure works; mutual TLS (tls-auth-clients yes) with and without a
 * client certificate; acquire / renew / release / wait / heartbeat /
 * NOSCRIPT / SELECT / reconnect over TLS; bad input for every TLS option.
 */
#include "setutil.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char certs[1024]; /* the folder with ca.crt, server.*, client.*, other-ca.crt */

/* The CA, a server certificate for localhost / 127.0.0.1, a client
 * certificate, and a second CA that signed neither. */
static void make_certs(void)
{
    const char *spawn = getenv("FENCE_TEST_SPAWN_DIR");
    snprintf(certs, sizeof certs, "%s/tls-certs-%d", spawn != NULL ? spawn : "/tmp",
             (int)getpid());
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/cadir' && cd '%s' && "
       "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > server.ext && "
       "printf 'extendedKeyUsage=clientAuth\\n' > client.ext && "
       "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
       "-keyout ca.key -out ca.crt -days 2 -subj /CN=fence-test-ca 2>/dev/null && "
       "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
       "-keyout other-ca.key -out other-ca.crt -days 2 -subj /CN=fence-other-ca 2>/dev/null && "
       "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
       "-keyout server.key -out server.csr -subj /CN=localhost 2>/dev/null && "
       "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
       "-out server.crt -days 2 -extfile server.ext 2>/dev/null && "
       "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
       "-keyout client.key -out client.csr -subj /CN=fence-client 2>/dev/null && "
       "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
       "-out client.crt -days 2 -extfile client.ext 2>/dev/null && "
       "cp ca.crt cadir/ && openssl rehash cadir 2>/dev/null",
       certs, certs);
    if (system(cmd) != 0) {
        fprintf(stderr, "test_tls: failed: %s\n", cmd);
        exit(1);
    }
    setenv("FENCE_TLS_DIR", certs, 1);
}

static const char *cert(const char *file)
{
    static char buf[8][1200];
    static int i;
    char *b = buf[i++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", certs, file);
    return b;
}

/* The set's TLS port (DIR/env TLS_PORT=). */
static int tls_port(const lu_set *s)
{
    char env[1100], line[128];
    int port = 0;
    snprintf(env, sizeof env, "%s/env", s->dir);
    FILE *f = fopen(env, "r");
    ck_assert_msg(f != NULL, "no %s", env);
    while (fgets(line, sizeof line, f) != NULL) {
        sscanf(line, "TLS_PORT=%d", &port);
    }
    fclose(f);
    ck_assert_int_gt(port, 0);
    return port;
}

static char url_buf[256];
static const char *tls_url(const lu_set *s, const char *suffix)
{
    snprintf(url_buf, sizeof url_buf, "rediss://127.0.0.1:%d%s", tls_port(s), suffix);
    return url_buf;
}

/* Open with o; the status it returned, the client in *out. */
static fence_status try_open(const fence_client_options *o, fence_client **out)
{
    *out = NULL;
    return fence_client_open(out, o);
}

static void lower(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src);
    for (char *p = dst; *p != '\0'; p++) {
        *p = (char)tolower((unsigned char)*p);
    }
}

/* Opening with o fails with want and a message holding needle. */
static void expect_open_fails(const fence_client_options *o, fence_status want,
                              const char *needle)
{
    fence_client *c = NULL;
    fence_status st = try_open(o, &c);
    char msg[600];
    lower(msg, sizeof msg, fence_client_errmsg(c));
    ck_assert_msg(st == want, "open returned %s, expected %s (\"%s\")", fence_status_name(st),
                  fence_status_name(want), msg);
    ck_assert_msg(strstr(msg, needle) != NULL, "message \"%s\" does not say \"%s\"", msg,
                  needle);
    ck_assert_ptr_null(strstr(msg, "tls-pw"));
    fence_client_close(c);
}

static void acquire_release(fence_client *c, const char *name)
{
    fence_lease *l = lu_acquire_ok(c, name, 5000, 0);
    ck_assert_uint_ge(fence_lease_token(l), 1);
    EXPECT_RC(fence_renew(l), FENCE_OK, c);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
}

START_TEST(verify_with_ca_file_and_dir)
{
    lu_set s;
    lu_set_start(&s, "tls", NULL);
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = tls_url(&s, "");
    o.tls_ca_file = cert("ca.crt");
    fence_client *c = lu_open_opts(&o);
    acquire_release(c, tu_name("tls-ca"));
    char shown[300];
    snprintf(shown, sizeof shown, "%s/0", url_buf);
    ck_assert_str_eq(fence_client_url(c), shown);
    fence_client_close(c);

    o.tls_ca_file = NULL;
    o.tls_ca_dir = cert("cadir");
    c = lu_open_opts(&o);
    acquire_release(c, tu_name("tls-cadir"));
    fence_client_close(c);

    /* redis:// with tls = 1 is the same; the name checked may be given. */
    char plain[128];
    snprintf(plain, sizeof plain, "redis://127.0.0.1:%d", tls_port(&s));
    o.url = plain;
    o.tls = 1;
    o.tls_server_name = "localhost";
    c = lu_open_opts(&o);
    acquire_release(c, tu_name("tls-sni"));
    fence_client_close(c);
    lu_set_stop(&s);
}
END_TEST

START_TEST(verify_fails_clearly)
{
    lu_set s;
    lu_set_start(&s, "tls", NULL);
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = tls_url(&s, "");
    o.password = "secret-tls-pw-never-shown";
    o.tls_ca_file = cert("other-ca.crt");
    expect_open_fails(&o, FENCE_ECONN, "certificate verification failed");
    o.tls_ca_file = NULL; /* the system's CAs know no test CA */
    expect_open_fails(&o, FENCE_ECONN, "certificate verification failed");
    o.tls_ca_file = cert("ca.crt");
    o.tls_server_name = "wrong.example.org";
    expect_open_fails(&o, FENCE_ECONN, "hostname mismatch");
    /* A plain client on the TLS port, and TLS on the plain port. */
    fence_client_options_init(&o);
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", tls_port(&s));
    o.url = url;
    o.connect_timeout_ms = 500;
    o.io_timeout_ms = 500;
    fence_client *c = NULL;
    ck_assert_int_ne(try_open(&o, &c), FENCE_OK);
    fence_client_close(c);
    snprintf(url, sizeof url, "rediss://127.0.0.1:%d", s.master);
    o.tls_ca_file = cert("ca.crt");
    expect_open_fails(&o, FENCE_ECONN, "tls");
    lu_set_stop(&s);
}
END_TEST

START_TEST(insecure_works)
{
    lu_set s;
    lu_set_start(&s, "tls", NULL);
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = tls_url(&s, "");
    o.tls_insecure = 1;
    fence_client *c = lu_open_opts(&o);
    acquire_release(c, tu_name("tls-insecure"));
    fence_client_close(c);
    lu_set_stop(&s);
}
END_TEST

START_TEST(mutual_tls)
{
    lu_set s;
    lu_set_start(&s, "tls", "tls-auth-clients yes");
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = tls_url(&s, "");
    o.tls_ca_file = cert("ca.crt");
    o.tls_cert_file = cert("client.crt");
    o.tls_key_file = cert("client.key");
    fence_client *c = lu_open_opts(&o);
    acquire_release(c, tu_name("mtls"));
    fence_client_close(c);
    /* Without a client certificate the server ends the connection. */
    o.tls_cert_file = NULL;
    o.tls_key_file = NULL;
    c = NULL;
    fence_status st = try_open(&o, &c);
    ck_assert_msg(st == FENCE_ECONN, "open without a client certificate: %s (%s)",
                  fence_status_name(st), fence_client_errmsg(c));
    ck_assert_str_ne(fence_client_errmsg(c), "");
    fence_client_close(c);
    /* A key that is not the certificate's. */
    o.tls_cert_file = cert("client.crt");
    o.tls_key_file = cert("server.key");
    expect_open_fails(&o, FENCE_EINVAL, "does not match");
    lu_set_stop(&s);
}
END_TEST

static fence_client *open_tls(const lu_set *s, const char *suffix, int mode)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = tls_url(s, suffix);
    o.tls_ca_file = cert("ca.crt");
    o.heartbeat_mode = mode;
    return lu_open_opts(&o);
}

/* The whole path: SELECT, acquire, heartbeat, wait woken by a release,
 * NOSCRIPT fallback, a restart (reconnect). */
START_TEST(whole_path_over_tls)
{
    lu_set s;
    lu_set_start(&s, "tls", NULL);
    fence_client *a = open_tls(&s, "/3", FENCE_HEARTBEAT_THREAD);
    fence_client *b = open_tls(&s, "/3", FENCE_HEARTBEAT_THREAD);
    const char *name = tu_name("tls-path");
    fence_lease *l = lu_acquire_ok(a, name, 300, 0);
    uint64_t t1 = fence_lease_token(l);
    tu_sleep_ms(1000); /* > 3 TTLs: only the heartbeat keeps it */
    ck_assert(!fence_lease_lost(l));
    ck_assert_int_gt(fence_lease_valid_ms(l), 0);
    fence_metrics m = lu_metrics(a);
    ck_assert_uint_ge(m.renew_ok, 3);
    /* The key is in database 3. */
    redisContext *r = lu_connect(s.master);
    lu_cmd_ok(r, "SELECT 3");
    char key[300];
    lu_owner_key(key, sizeof key, name);
    ck_assert_int_eq(lu_rexists(r, key), 1);
    /* Released, it is b's at once (the waiter itself: wait_woken_over_tls). */
    EXPECT_RC(fence_release(l), FENCE_OK, a);
    fence_lease *l2 = lu_acquire_ok(b, name, 5000, 1000);
    ck_assert_uint_gt(fence_lease_token(l2), t1);
    EXPECT_RC(fence_release(l2), FENCE_OK, b);
    /* NOSCRIPT: the scripts are flushed; EVALSHA falls back to EVAL. */
    lu_cmd_ok(r, "SCRIPT FLUSH");
    l = lu_acquire_ok(a, name, 5000, 0);
    EXPECT_RC(fence_release(l), FENCE_OK, a);
    redisFree(r);
    /* A restart: the next call reconnects over TLS. */
    lu_set_ctl(&s, "master", "restart");
    l = lu_acquire_after_restart(a, name, 5000);
    EXPECT_RC(fence_release(l), FENCE_OK, a);
    m = lu_metrics(a);
    ck_assert_uint_ge(m.reconnects, 1);
    fence_client_close(a);
    fence_client_close(b);
    lu_set_stop(&s);
}
END_TEST

struct releaser {
    fence_lease *l;
    int64_t delay_ms;
};

static void *release_later(void *arg)
{
    struct releaser *rl = arg;
    tu_sleep_ms(rl->delay_ms);
    fence_release(rl->l);
    return NULL;
}

START_TEST(wait_woken_over_tls)
{
    lu_set s;
    lu_set_start(&s, "tls", NULL);
    fence_client *a = open_tls(&s, "", FENCE_HEARTBEAT_THREAD);
    fence_client *b = open_tls(&s, "", FENCE_HEARTBEAT_THREAD);
    const char *name = tu_name("tls-wait");
    struct releaser rl = {lu_acquire_ok(a, name, 10000, 0), 400};
    pthread_t th;
    pthread_create(&th, NULL, release_later, &rl);
    fence_lease_options lo;
    fence_lease_options_init(&lo, 5000);
    lo.wait_ms = 5000;
    fence_lease *l2 = NULL;
    int64_t t0 = tu_now_ms();
    EXPECT_RC(fence_acquire(b, name, &lo, &l2), FENCE_OK, b);
    int64_t took = tu_now_ms() - t0;
    pthread_join(th, NULL);
    /* Woken by the message, not by polling or the safety timer (1 s). */
    ck_assert_msg(took < 900, "the waiter took %lld ms", (long long)took);
    printf("wait_woken_over_tls: acquired %lld ms after waiting began (release at 400)\n",
           (long long)took);
    EXPECT_RC(fence_release(l2), FENCE_OK, b);
    fence_client_close(a);
    fence_client_close(b);
    lu_set_stop(&s);
}
END_TEST

START_TEST(bad_tls_options)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = "redis://:secret-tls-pw@127.0.0.1:6379";
    o.tls_ca_file = "/etc/ssl/certs/ca-certificates.crt";
    expect_open_fails(&o, FENCE_EINVAL, "tls is off");
    o.url = "rediss://:secret-tls-pw@127.0.0.1:6379";
    o.tls_ca_file = "/nonexistent/ca.crt";
    expect_open_fails(&o, FENCE_EINVAL, "cannot load the ca");
    o.tls_ca_file = "";
    expect_open_fails(&o, FENCE_EINVAL, "tls_ca_file");
    o.tls_ca_file = "a\nb";
    expect_open_fails(&o, FENCE_EINVAL, "control character");
    o.tls_ca_file = NULL;
    o.tls_ca_dir = "";
    expect_open_fails(&o, FENCE_EINVAL, "tls_ca_dir");
    o.tls_ca_dir = NULL;
    o.tls_cert_file = "/nonexistent/c.crt";
    expect_open_fails(&o, FENCE_EINVAL, "go together");
    o.tls_key_file = "/nonexistent/c.key";
    expect_open_fails(&o, FENCE_EINVAL, "client certificate");
    o.tls_cert_file = NULL;
    o.tls_key_file = NULL;
    o.tls = 2;
    expect_open_fails(&o, FENCE_EINVAL, "tls must be 0 or 1");
    o.tls = 0;
    o.tls_insecure = -1;
    expect_open_fails(&o, FENCE_EINVAL, "tls_insecure must be 0 or 1");
    o.tls_insecure = 1;
    o.tls_ca_file = cert("ca.crt");
    expect_open_fails(&o, FENCE_EINVAL, "cannot be combined");
    o.tls_insecure = 0;
    o.tls_ca_file = NULL;
    o.tls_server_name = "";
    expect_open_fails(&o, FENCE_EINVAL, "tls_server_name");
    o.tls_server_name = "bad name/with space";
    expect_open_fails(&o, FENCE_EINVAL, "tls_server_name");
    o.tls_server_name = NULL;
    o.url = "unix:///tmp/redis.sock";
    o.tls = 1;
    expect_open_fails(&o, FENCE_EINVAL, "unix socket");
    o.tls = 0;
    static const char *bad_urls[] = {
        "rediss://",      "rediss://:@h",        "rediss://h:0",  "rediss://h:65536",
        "rediss://h?x=1", "rediss://h/db",       "rediss://h#f",  "rediss://[::1",
        "rediss://u:secret-tls-pw@",              "rediss:/h",     "REDISS://h",
    };
    for (size_t i = 0; i < sizeof bad_urls / sizeof bad_urls[0]; i++) {
        o.url = bad_urls[i];
        fence_client *c = NULL;
        fence_status st = try_open(&o, &c);
        ck_assert_msg(st == FENCE_EINVAL, "%s: %s", bad_urls[i], fence_status_name(st));
        ck_assert_str_ne(fence_client_errmsg(c), "");
        ck_assert_ptr_null(strstr(fence_client_errmsg(c), "secret-tls-pw"));
        fence_client_close(c);
    }
}
END_TEST

static Suite *tls_suite(void)
{
    Suite *s = suite_create("tls");
    TCase *tc = tcase_create("tls");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, verify_with_ca_file_and_dir);
    tcase_add_test(tc, verify_fails_clearly);
    tcase_add_test(tc, insecure_works);
    tcase_add_test(tc, mutual_tls);
    tcase_add_test(tc, whole_path_over_tls);
    tcase_add_test(tc, wait_woken_over_tls);
    tcase_add_test(tc, bad_tls_options);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    make_certs();
    return tu_run(tls_suite());
}
