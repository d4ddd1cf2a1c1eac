/*
 * test_sentinel.c -- issue 9, Sentinel: one master, two replicas and three
 * Sentinels of the test's own (scripts/redis-set sentinel3, loopback,
 * always stopped; down-after-milliseconds 200).  Acquire through the
 * redis-sentinel:// URL; kill the master: the running heartbeat either
 * renews the lease on the promoted replica or reports it lost on time, and
 * the next acquire goes to the new master.  Also the errors of a master
 * no Sentinel knows, of no Sentinel at all, and bad input for every new
 * URL form and option.
 */
#include "setutil.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void sentinel_url(const lu_set *s, char *buf, size_t n, const char *master)
{
    char env[1100], line[128];
    int p[3] = {0, 0, 0};
    snprintf(env, sizeof env, "%s/env", s->dir);
    FILE *f = fopen(env, "r");
    ck_assert_msg(f != NULL, "no %s", env);
    while (fgets(line, sizeof line, f) != NULL) {
        sscanf(line, "SENTINEL_PORT=%d", &p[0]);
        sscanf(line, "SENTINEL2_PORT=%d", &p[1]);
        sscanf(line, "SENTINEL3_PORT=%d", &p[2]);
    }
    fclose(f);
    ck_assert(p[0] > 0 && p[1] > 0 && p[2] > 0);
    snprintf(buf, n, "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d#%s", p[0], p[1],
             p[2], master);
}

static int replica2_port(const lu_set *s)
{
    char env[1100], line[128];
    int p = 0;
    snprintf(env, sizeof env, "%s/env", s->dir);
    FILE *f = fopen(env, "r");
    ck_assert_msg(f != NULL, "no %s", env);
    while (fgets(line, sizeof line, f) != NULL) {
        sscanf(line, "REPLICA2_PORT=%d", &p);
    }
    fclose(f);
    ck_assert_int_gt(p, 0);
    return p;
}

/* Which of the two replicas the Sentinels promoted (its port), within
 * timeout_ms; 0 if none. */
static int wait_promoted(int r1, int r2, int64_t timeout_ms)
{
    int64_t end = tu_now_ms() + timeout_ms;
    while (tu_now_ms() < end) {
        if (lu_wait_master(r1, 0)) {
            return r1;
        }
        if (lu_wait_master(r2, 0)) {
            return r2;
        }
        tu_sleep_ms(50);
    }
    return 0;
}

/* EXISTS key on 127.0.0.1:port, on a new connection (the Sentinels kill
 * the clients of a node they reconfigure). */
static long long exists_on(int port, const char *key)
{
    redisContext *r = lu_connect(port);
    long long n = lu_rexists(r, key);
    redisFree(r);
    return n;
}

START_TEST(acquire_and_follow_failover)
{
    lu_set s;
    lu_set_start(&s, "sentinel3", NULL);
    char url[256];
    sentinel_url(&s, url, sizeof url, "fence-m");
    fence_client *c = lu_open_url(url);
    ck_assert_ptr_nonnull(strstr(fence_client_url(c), "redis-sentinel://127.0.0.1:"));
    ck_assert_ptr_nonnull(strstr(fence_client_url(c), "#fence-m"));

    lu_lost lr;
    lu_lost_init(&lr);
    char name[200], after[200];
    snprintf(name, sizeof name, "%s", tu_name("sent"));
    snprintf(after, sizeof after, "%s", tu_name("sent-after"));
    fence_lease *l = lu_acquire_cb(c, name, 4000, 0, 0, &lr);
    uint64_t t1 = fence_lease_token(l);
    fence_lease *l0 = lu_acquire_ok(c, tu_name("sent-before"), 4000, 0);
    uint64_t t0 = fence_lease_token(l0);
    EXPECT_RC(fence_release(l0), FENCE_OK, c);
    /* It went to the master, and the replicas have it. */
    redisContext *m = lu_connect(s.master);
    char key[300];
    lu_owner_key(key, sizeof key, name);
    ck_assert_int_eq(lu_rexists(m, key), 1);
    redisReply *w = redisCommand(m, "WAIT 2 2000");
    ck_assert(w != NULL && w->type == REDIS_REPLY_INTEGER && w->integer == 2);
    freeReplyObject(w);
    redisFree(m);

    int64_t valid_before = fence_lease_valid_ms(l);
    int64_t killed = tu_now_ms();
    lu_set_ctl(&s, "master", "kill");
    int promoted = wait_promoted(s.replica, replica2_port(&s), 20000);
    ck_assert_msg(promoted != 0, "the Sentinels promoted no replica");
    int64_t failover_ms = tu_now_ms() - killed;

    /* The next acquire (a new name) goes to the new master. */
    fence_lease *l2 = NULL;
    fence_lease_options lo;
    fence_lease_options_init(&lo, 4000);
    lo.wait_ms = 3000;
    EXPECT_RC(fence_acquire(c, after, &lo, &l2), FENCE_OK, c);
    ck_assert_uint_gt(fence_lease_token(l2), t0);
    char key2[300];
    lu_owner_key(key2, sizeof key2, after);
    ck_assert_int_eq(exists_on(promoted, key2), 1);
    EXPECT_RC(fence_release(l2), FENCE_OK, c);

    /* The running heartbeat: renewed on the new master, or lost on time. */
    tu_sleep_ms(1500);
    if (fence_lease_lost(l)) {
        int64_t at = lu_wait_lost(&lr, 1000);
        ck_assert_int_eq(atomic_load(&lr.calls), 1);
        printf("acquire_and_follow_failover: failover %lld ms; the lease was reported lost "
               "(valid for %lld ms at the kill)\n", (long long)failover_ms,
               (long long)valid_before);
        (void)at;
    } else {
        /* Still held: the new master must hold it and renew it. */
        ck_assert_int_eq(exists_on(promoted, key), 1);
        EXPECT_RC(fence_renew(l), FENCE_OK, c);
        fence_metrics mt = lu_metrics(c);
        ck_assert_uint_ge(mt.reconnects, 1);
        printf("acquire_and_follow_failover: failover %lld ms; the heartbeat renews on the "
               "new master (127.0.0.1:%d)\n", (long long)failover_ms, promoted);
        tu_sleep_ms(4000 + 500); /* past a whole TTL: only renewals there keep it */
        ck_assert_msg(!fence_lease_lost(l) || atomic_load(&lr.calls) == 1,
                      "lost without a callback");
        if (!fence_lease_lost(l)) {
            ck_assert_int_eq(exists_on(promoted, key), 1);
        }
    }
    ck_assert_uint_gt(t1, 0);
    fence_release(l);
    fence_client_close(c);

    /* A new client finds the new master through the Sentinels. */
    c = lu_open_url(url);
    fence_lease *l3 = lu_acquire_ok(c, tu_name("sent-new"), 4000, 0);
    ck_assert_uint_gt(fence_lease_token(l3), t1);
    EXPECT_RC(fence_release(l3), FENCE_OK, c);
    fence_client_close(c);
    lu_set_stop(&s);
}
END_TEST

static void lower(char *dst, size_t n, const char *src);

/* The master turned replica behind the Sentinel's back: the next call gets
 * READONLY on its connection, which is dropped; the new connection asks
 * the Sentinel, and ROLE refuses a node that is no master.  Never a script
 * error, never a token from a replica. */
START_TEST(readonly_means_ask_again)
{
    lu_set s;
    lu_set_start(&s, "sentinel", NULL);
    char url[256];
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d#fence-m", s.sentinel);
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url;
    o.connect_timeout_ms = 600;
    fence_client *c = lu_open_opts(&o);
    fence_lease *l = lu_acquire_ok(c, tu_name("ro"), 3000, 0);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    /* Swap the roles by hand; the Sentinel still names the old master. */
    redisContext *r = lu_connect(s.replica);
    lu_cmd_ok(r, "REPLICAOF NO ONE");
    redisFree(r);
    r = lu_connect(s.master);
    lu_cmd_ok(r, "REPLICAOF 127.0.0.1 %d", s.replica);
    redisFree(r);
    char name[200];
    snprintf(name, sizeof name, "%s", tu_name("ro2"));
    fence_lease *l2 = NULL;
    fence_status st = fence_try_acquire(c, name, 3000, &l2);
    char msg[600];
    lower(msg, sizeof msg, fence_client_errmsg(c));
    printf("readonly_means_ask_again: %s (%s)\n", fence_status_name(st), msg);
    ck_assert_msg(st == FENCE_OK || (st == FENCE_ECONN && strstr(msg, "no master") != NULL),
                  "after READONLY: %s (%s)", fence_status_name(st), msg);
    if (st == FENCE_OK) {
        /* Only if the Sentinel already names the new master. */
        char key[300];
        lu_owner_key(key, sizeof key, name);
        redisContext *nm = lu_connect(s.replica);
        ck_assert_int_eq(lu_rexists(nm, key), 1);
        redisFree(nm);
        fence_release(l2);
    }
    fence_client_close(c);
    lu_set_stop(&s);
}
END_TEST

static void lower(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src);
    for (char *p = dst; *p != '\0'; p++) {
        *p = (char)tolower((unsigned char)*p);
    }
}

static void expect_open(const fence_client_options *o, fence_status want, const char *needle)
{
    fence_client *c = NULL;
    fence_status st = fence_client_open(&c, o);
    char msg[800];
    lower(msg, sizeof msg, fence_client_errmsg(c));
    ck_assert_msg(st == want, "%s: open returned %s, expected %s (\"%s\")", o->url,
                  fence_status_name(st), fence_status_name(want), msg);
    ck_assert_msg(strstr(msg, needle) != NULL, "%s: message \"%s\" does not say \"%s\"",
                  o->url, msg, needle);
    ck_assert_ptr_null(strstr(msg, "sent-pw"));
    fence_client_close(c);
}

START_TEST(unknown_master_and_no_sentinel)
{
    lu_set s;
    lu_set_start(&s, "sentinel", NULL);
    char url[256];
    snprintf(url, sizeof url, "redis-sentinel://:sent-pw@127.0.0.1:%d#no-such-master",
             s.sentinel);
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url;
    o.connect_timeout_ms = 500;
    expect_open(&o, FENCE_ECONN, "knows no master named 'no-such-master'");
    /* The one-Sentinel set of the other suites, by its name. */
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d/2#fence-m", s.sentinel);
    fence_client *c = lu_open_url(url);
    fence_lease *l = lu_acquire_ok(c, tu_name("one-sentinel"), 3000, 0);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    fence_client_close(c);
    /* A Sentinel that wants no password is told one: refused, clearly. */
    o.url = url;
    o.sentinel_password = "sent-pw-wrong";
    expect_open(&o, FENCE_EAUTH, "authentication refused");
    o.sentinel_password = NULL;
    lu_set_stop(&s);
    /* Nobody there. */
    o.url = url;
    expect_open(&o, FENCE_ECONN, "no sentinel named master 'fence-m'");
}
END_TEST

START_TEST(bad_sentinel_input)
{
    static const char *bad[] = {
        "redis-sentinel://h",              "redis-sentinel://h#",
        "redis-sentinel://#m",             "redis-sentinel://h,,h2#m",
        "redis-sentinel://,h#m",           "redis-sentinel://h,#m",
        "redis-sentinel://h:0#m",          "redis-sentinel://h:99999#m",
        "redis-sentinel://h:x#m",          "redis-sentinel://h/x#m",
        "redis-sentinel://h?db=1#m",       "redis-sentinel://h#m a",
        "redis-sentinel://:@h#m",          "redis-sentinel://u:sent-pw@#m",
        "redis-sentinel://sent-pw@#m",     "redis-sentinel://[::1#m",
        "redis-sentinel://h h#m",          "redis+sentinel://h#m",
        "redis-sentinel://h#m\x01",        "redis-sentinel://h/1000001#m",
    };
    fence_client_options o;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fence_client_options_init(&o);
        o.url = bad[i];
        fence_client *c = NULL;
        fence_status st = fence_client_open(&c, &o);
        ck_assert_msg(st == FENCE_EINVAL, "%s: %s", bad[i], fence_status_name(st));
        ck_assert_str_ne(fence_client_errmsg(c), "");
        ck_assert_ptr_null(strstr(fence_client_errmsg(c), "sent-pw"));
        fence_client_close(c);
    }
    /* The documented lone "password@" form is accepted (the data nodes'
     * password); with no Sentinel listening (a closed loopback port) the
     * open fails as unreachable, and the message holds no password. */
    fence_client_options_init(&o);
    o.url = "redis-sentinel://sent-pw@127.0.0.1:1#m";
    o.connect_timeout_ms = 200;
    fence_client *bare = NULL;
    fence_status bst = fence_client_open(&bare, &o);
    ck_assert_msg(bst == FENCE_ECONN, "bare password form: %s", fence_status_name(bst));
    ck_assert_ptr_null(strstr(fence_client_errmsg(bare), "sent-pw"));
    fence_client_close(bare);
    /* 17 Sentinels */
    char many[512] = "redis-sentinel://";
    for (int i = 0; i < 17; i++) {
        strcat(many, i ? ",h" : "h");
    }
    strcat(many, "#m");
    fence_client_options_init(&o);
    o.url = many;
    expect_open(&o, FENCE_EINVAL, "more than 16 sentinels");
    /* Options */
    fence_client_options_init(&o);
    o.url = "redis://127.0.0.1:1";
    o.sentinel_password = "sent-pw";
    expect_open(&o, FENCE_EINVAL, "need a redis-sentinel:// url");
    o.url = "redis-sentinel://127.0.0.1:1#m";
    o.sentinel_password = NULL;
    o.sentinel_username = "u";
    expect_open(&o, FENCE_EINVAL, "sentinel_username needs sentinel_password");
    o.sentinel_username = "";
    o.sentinel_password = "sent-pw";
    expect_open(&o, FENCE_EINVAL, "must not be empty");
    o.sentinel_username = NULL;
    o.sentinel_password = "";
    expect_open(&o, FENCE_EINVAL, "must not be empty");
    /* The URL as shown: no credentials, default port. */
    fence_client_options_init(&o);
    o.url = "redis-sentinel://user:sent-pw@127.0.0.1,127.0.0.2:26380/4#mymaster";
    o.connect_timeout_ms = 200;
    fence_client *c = NULL;
    fence_status st = fence_client_open(&c, &o);
    ck_assert_int_eq(st, FENCE_ECONN);
    ck_assert_str_eq(fence_client_url(c), "redis-sentinel://***@127.0.0.1:26379,.../4#mymaster");
    ck_assert_ptr_null(strstr(fence_client_errmsg(c), "sent-pw"));
    fence_client_close(c);
}
END_TEST

static Suite *sentinel_suite(void)
{
    Suite *s = suite_create("sentinel");
    TCase *tc = tcase_create("sentinel");
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, acquire_and_follow_failover);
    tcase_add_test(tc, readonly_means_ask_again);
    tcase_add_test(tc, unknown_master_and_no_sentinel);
    tcase_add_test(tc, bad_sentinel_input);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(sentinel_suite());
}
