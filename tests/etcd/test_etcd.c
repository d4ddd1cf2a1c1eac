/* test_etcd.c -- the etcd issuer on a real etcd (one member, started by
 * scripts/with-servers --etcd): acquire / busy / release, tokens rising
 * (also across a raise), many leases renewed, the three losses (the etcd
 * lease revoked: keepalive TTL 0; the owner key deleted; replaced), a
 * waiter woken by a release, the TTL rounded up on the server and kept on
 * the client, and every bad input the Redis issuer refuses. */
#include "etcdutil.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(acquire_busy_release)
{
    fence_client *a = eu_open(NULL), *b = eu_open(NULL);
    ck_assert_str_eq(fence_client_issuer(a), "etcd");
    const char *name = tu_name("etcd-abr");
    fence_lease *la = NULL, *lb = NULL;
    EXPECT_RC(fence_try_acquire(a, name, 2000, &la), FENCE_OK, a);
    ck_assert_uint_gt(fence_lease_token(la), 0);
    EXPECT_RC(fence_try_acquire(b, name, 2000, &lb), FENCE_BUSY, b);
    /* Held in etcd: the owner key on an etcd lease, holder and token
     * shown to another client. */
    ck_assert_int_ne(eu_owner_lease(NULL, name), 0);
    fence_lease_info info;
    EXPECT_RC(fence_lease_inspect_info(b, name, &info), FENCE_OK, b);
    ck_assert_int_eq(info.held, 1);
    ck_assert_str_eq(info.holder, fence_lease_holder(la));
    ck_assert_uint_eq(info.holder_token, fence_lease_token(la));
    ck_assert_int_gt(info.pttl_ms, 0);
    EXPECT_RC(fence_release(la), FENCE_OK, a);
    ck_assert_int_eq(eu_owner_lease(NULL, name), 0);
    EXPECT_RC(fence_try_acquire(b, name, 2000, &lb), FENCE_OK, b);
    EXPECT_RC(fence_release(lb), FENCE_OK, b);
    fence_client_close(a);
    fence_client_close(b);
}
END_TEST

START_TEST(tokens_rise)
{
    fence_client *a = eu_open(NULL), *b = eu_open(NULL);
    const char *name = tu_name("etcd-rise");
    uint64_t last = 0;
    for (int i = 0; i < 10; i++) {
        fence_client *c = i % 2 ? a : b;
        fence_lease *l = NULL;
        EXPECT_RC(fence_try_acquire(c, name, 2000, &l), FENCE_OK, c);
        ck_assert_msg(fence_lease_token(l) > last, "token %" PRIu64 " after %" PRIu64,
                      fence_lease_token(l), last);
        last = fence_lease_token(l);
        EXPECT_RC(fence_release(l), FENCE_OK, c);
    }
    /* A name moving from another issuer: raised, and it keeps rising. */
    uint64_t floor = last + 1000000000ull, after = 0;
    EXPECT_RC(fence_token_raise(a, name, floor, &after), FENCE_OK, a);
    ck_assert_uint_ge(after, floor);
    fence_lease *l = NULL;
    EXPECT_RC(fence_try_acquire(a, name, 2000, &l), FENCE_OK, a);
    ck_assert_uint_gt(fence_lease_token(l), floor);
    last = fence_lease_token(l);
    /* A lower raise changes nothing. */
    EXPECT_RC(fence_token_raise(b, name, 5, &after), FENCE_OK, b);
    ck_assert_uint_ge(after, last);
    /* A reissue while held: a new token above the store's highest. */
    EXPECT_RC(fence_lease_reissue(l, last + 500, 0), FENCE_OK, a);
    ck_assert_uint_gt(fence_lease_token(l), last + 500);
    last = fence_lease_token(l);
    EXPECT_RC(fence_release(l), FENCE_OK, a);
    EXPECT_RC(fence_try_acquire(b, name, 2000, &l), FENCE_OK, b);
    ck_assert_uint_gt(fence_lease_token(l), last);
    EXPECT_RC(fence_release(l), FENCE_OK, b);
    fence_client_close(a);
    fence_client_close(b);
}
END_TEST

/* 300 leases of one client with a 1 s TTL (etcd's shortest here) stay
 * held across three TTLs: the heartbeat's keepalives reach etcd. */
START_TEST(renew_many)
{
    enum { N = 300 };
    fence_client *c = eu_open(NULL), *other = eu_open(NULL);
    fence_lease *ls[N];
    char names[N][64];
    atomic_int lost = 0;
    const char *base = tu_name("etcd-many");
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "%s-%d", base, i);
        fence_lease_options o;
        fence_lease_options_init(&o, 1000);
        o.on_lost = eu_count_lost;
        o.user = &lost;
        EXPECT_RC(fence_acquire(c, names[i], &o, &ls[i]), FENCE_OK, c);
    }
    tu_sleep_ms(3000);
    ck_assert_int_eq(atomic_load(&lost), 0);
    for (int i = 0; i < N; i += 15) {
        ck_assert_int_eq(fence_lease_lost(ls[i]), 0);
        fence_lease_info info;
        EXPECT_RC(fence_lease_inspect_info(other, names[i], &info), FENCE_OK, other);
        ck_assert_msg(info.held && info.holder_token == fence_lease_token(ls[i]),
                      "%s: held %d token %" PRIu64, names[i], info.held, info.holder_token);
    }
    for (int i = 0; i < N; i++) {
        EXPECT_RC(fence_release(ls[i]), FENCE_OK, c);
    }
    fence_client_close(c);
    fence_client_close(other);
}
END_TEST

/* The three ways a held lease is lost behind the holder's back. */
enum { LOSE_REVOKE, LOSE_DELETE, LOSE_REPLACE };
static const struct {
    const char *name;
    int how;
} losses[] = {{"revoked (keepalive TTL 0)", LOSE_REVOKE},
              {"owner key deleted", LOSE_DELETE},
              {"owner key replaced", LOSE_REPLACE}};

START_TEST(lost)
{
    fence_client *c = eu_open(NULL);
    const char *name = tu_name("etcd-lost");
    atomic_int nlost = 0;
    fence_lease_options o;
    fence_lease_options_init(&o, 1000);
    o.on_lost = eu_count_lost;
    o.user = &nlost;
    fence_lease *l = NULL;
    EXPECT_RC(fence_acquire(c, name, &o, &l), FENCE_OK, c);
    char body[2400];
    int64_t id = eu_owner_lease(NULL, name);
    ck_assert_int_ne(id, 0);
    switch (losses[_i].how) {
    case LOSE_REVOKE:
        snprintf(body, sizeof body, "{\"ID\":\"%" PRId64 "\"}", id);
        json_decref(eu_post(NULL, "/v3/lease/revoke", body));
        break;
    case LOSE_DELETE:
        snprintf(body, sizeof body, "{\"key\":\"%s\"}", eu_owner_b64(name));
        json_decref(eu_post(NULL, "/v3/kv/deleterange", body));
        break;
    default:
        snprintf(body, sizeof body, "{\"key\":\"%s\",\"value\":\"b3RoZXI=\"}",
                 eu_owner_b64(name));
        json_decref(eu_post(NULL, "/v3/kv/put", body));
        break;
    }
    int64_t t0 = tu_now_ms();
    while (atomic_load(&nlost) == 0 && tu_now_ms() - t0 < 3000) {
        tu_sleep_ms(20);
    }
    ck_assert_msg(atomic_load(&nlost) == 1, "%s: on_lost not called within 3 s", losses[_i].name);
    ck_assert_int_eq(fence_lease_lost(l), 1);
    /* The heartbeat noticed at its next pass: within one TTL. */
    ck_assert_int_lt(tu_now_ms() - t0, 1000);
    fence_release(l);
    fence_client_close(c);
}
END_TEST

typedef struct waiter_arg {
    fence_client *c;
    const char *name;
    fence_status st;
    int64_t got_ms;
    fence_lease *l;
} waiter_arg;

static void *waiter(void *arg)
{
    waiter_arg *w = arg;
    fence_lease_options o;
    fence_lease_options_init(&o, 2000);
    o.wait_ms = 5000;
    w->st = fence_acquire(w->c, w->name, &o, &w->l);
    w->got_ms = tu_now_ms();
    return NULL;
}

START_TEST(wait_woken_by_release)
{
    fence_client *a = eu_open(NULL), *b = eu_open(NULL);
    const char *name = tu_name("etcd-wait");
    fence_lease *l = NULL;
    EXPECT_RC(fence_try_acquire(a, name, 10000, &l), FENCE_OK, a);
    waiter_arg w = {b, name, FENCE_EPROTO, 0, NULL};
    pthread_t t;
    pthread_create(&t, NULL, waiter, &w);
    tu_sleep_ms(400);
    int64_t released = tu_now_ms();
    EXPECT_RC(fence_release(l), FENCE_OK, a);
    pthread_join(t, NULL);
    EXPECT_RC(w.st, FENCE_OK, b);
    /* Woken by the watch, not by a poll nor the 10 s TTL. */
    ck_assert_int_lt(w.got_ms - released, 300);
    EXPECT_RC(fence_release(w.l), FENCE_OK, b);
    fence_client_close(a);
    fence_client_close(b);
}
END_TEST

/* fence's TTLs are milliseconds, etcd's whole seconds with a minimum:
 * the server's is rounded up (so it ends after the client's validity),
 * the client's validity stays the one asked for. */
START_TEST(ttl_rounding)
{
    fence_client *c = eu_open(NULL);
    const char *name = tu_name("etcd-ttl");
    fence_lease_options o;
    fence_lease_options_init(&o, 300);
    o.no_heartbeat = 1;
    fence_lease *l = NULL;
    EXPECT_RC(fence_acquire(c, name, &o, &l), FENCE_OK, c);
    ck_assert_int_le(fence_lease_valid_ms(l), 300);
    char body[64];
    snprintf(body, sizeof body, "{\"ID\":\"%" PRId64 "\"}", eu_owner_lease(NULL, name));
    json_t *r = eu_post(NULL, "/v3/lease/timetolive", body);
    const char *g = json_string_value(json_object_get(r, "grantedTTL"));
    ck_assert_msg(g != NULL && atoll(g) >= 1, "grantedTTL %s", g ? g : "-");
    json_decref(r);
    /* Past the client's validity the lease is lost to the holder, while
     * etcd still holds the name: the server's TTL ends later. */
    tu_sleep_ms(350);
    ck_assert_int_eq(fence_lease_valid_ms(l), 0);
    EXPECT_RC(fence_renew(l), FENCE_LOST, c);
    fence_client *other = eu_open(NULL);
    fence_lease *lo = NULL;
    fence_status st = fence_try_acquire(other, name, 1000, &lo);
    ck_assert_msg(st == FENCE_BUSY, "held on the server past the client's 300 ms: %s",
                  fence_status_name(st));
    fence_release(l);
    fence_client_close(other);
    fence_client_close(c);
}
END_TEST

/* Bad input: a clear FENCE_EINVAL and message at open, the handle
 * unusable. */
static const struct {
    const char *name;
    const char *url;
    int opt; /* 0 none, else which option below */
    const char *says;
} bad[] = {
    {"no host", "etcd://", 0, "no host"},
    {"port 0", "etcd://127.0.0.1:0", 0, "bad port"},
    {"port too big", "etcd://127.0.0.1:70000", 0, "bad port"},
    {"port not a number", "etcd://127.0.0.1:x", 0, "bad port"},
    {"empty member", "etcd://127.0.0.1:1,,127.0.0.1:2", 0, "empty member"},
    {"user without password", "etcd://u@127.0.0.1:1", 0, "needs a password"},
    {"bad escape", "etcd://u:%zz@127.0.0.1:1", 0, "percent-escape"},
    {"a path", "etcd://127.0.0.1:1/db", 0, "nothing may follow"},
    {"a query", "etcd://127.0.0.1:1?x=1", 0, "no query"},
    {"ipv6", "etcd://[::1]:2379", 0, "IPv6"},
    {"bad host", "etcd://ho st:1", 0, "bad character"},
    {"token_mode", "etcd://127.0.0.1:1", 1, "token_mode is an option of the Redis issuer only"},
    {"min_replicas", "etcd://127.0.0.1:1", 2, "min_replicas"},
    {"sentinel", "etcd://127.0.0.1:1", 3, "sentinel_username"},
    {"tls off", "etcd://127.0.0.1:1", 4, "TLS is off"},
    {"cert without key", "etcds://127.0.0.1:1", 5, "go together"},
    {"insecure with ca", "etcds://127.0.0.1:1", 6, "cannot be combined"},
    {"ca missing", "etcds://127.0.0.1:1", 7, "cannot be read"},
    {"prefix too long", "etcd://127.0.0.1:1", 8, "prefix longer"},
    {"password without user", "etcd://127.0.0.1:1", 9, "user name"},
    {"tls not 0/1", "etcd://127.0.0.1:1", 10, "tls must be 0 or 1"},
    {"clock limit", "etcd://127.0.0.1:1", 11, "clock_behind_limit_ms"},
};

START_TEST(bad_input)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = bad[_i].url;
    switch (bad[_i].opt) {
    case 1: o.token_mode = FENCE_TOKENS_DENSE; break;
    case 2: o.min_replicas = 1; break;
    case 3: o.sentinel_username = "s"; break;
    case 4: o.tls_ca_file = "/etc/hostname"; break;
    case 5: o.tls_cert_file = "/etc/hostname"; break;
    case 6: o.tls_insecure = 1; o.tls_ca_file = "/etc/hostname"; break;
    case 7: o.tls_ca_file = "/nonexistent/ca.crt"; break;
    case 8: o.prefix = "0123456789012345678901234567890123456789012345678901234567890123456789"; break;
    case 9: o.password = "pw"; break;
    case 10: o.tls = 2; break;
    case 11: o.clock_behind_limit_ms = 5; break;
    default: break;
    }
    fence_client *c = NULL;
    ck_assert_int_eq(fence_client_open(&c, &o), FENCE_EINVAL);
    ck_assert_ptr_nonnull(c);
    ck_assert_msg(strstr(fence_client_errmsg(c), bad[_i].says) != NULL, "%s: %s", bad[_i].name,
                  fence_client_errmsg(c));
    fence_lease *l = NULL;
    ck_assert_int_eq(fence_try_acquire(c, "x", 1000, &l), FENCE_ESTATE);
    fence_client_close(c);
}
END_TEST

/* No member reachable: FENCE_ECONN with the members named, no crash, and
 * a member down is skipped for the next. */
START_TEST(unreachable_and_failover)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = "etcd://127.0.0.1:1";
    o.connect_timeout_ms = 200;
    o.io_timeout_ms = 200;
    fence_client *c = NULL;
    ck_assert_int_eq(fence_client_open(&c, &o), FENCE_ECONN);
    ck_assert_msg(strstr(fence_client_errmsg(c), "127.0.0.1:1") != NULL, "%s",
                  fence_client_errmsg(c));
    fence_client_close(c);
    char url[256];
    snprintf(url, sizeof url, "etcd://127.0.0.1:1,%s", eu_member());
    c = eu_open(url);
    fence_lease *l = NULL;
    EXPECT_RC(fence_try_acquire(c, tu_name("etcd-fo"), 1000, &l), FENCE_OK, c);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    fence_client_close(c);
}
END_TEST

START_TEST(describe)
{
    fence_client *c = eu_open(NULL);
    fence_issuer_info info;
    EXPECT_RC(fence_client_describe(c, &info), FENCE_OK, c);
    ck_assert_str_eq(info.issuer, "etcd");
    int version = 0;
    for (int i = 0; i < info.nfields; i++) {
        version |= strcmp(info.field[i].key, "version") == 0 &&
                   strncmp(info.field[i].value, "3.", 2) == 0;
    }
    ck_assert_int_eq(version, 1);
    ck_assert_msg(strstr(fence_client_url(c), "etcd://127.0.0.1:") == fence_client_url(c), "%s",
                  fence_client_url(c));
    fence_client_close(c);
}
END_TEST

static Suite *etcd_suite(void)
{
    Suite *s = suite_create("etcd");
    TCase *tc = tcase_create("one member");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, acquire_busy_release);
    tcase_add_test(tc, tokens_rise);
    tcase_add_test(tc, renew_many);
    tcase_add_loop_test(tc, lost, 0, sizeof losses / sizeof losses[0]);
    tcase_add_test(tc, wait_woken_by_release);
    tcase_add_test(tc, ttl_rounding);
    tcase_add_loop_test(tc, bad_input, 0, sizeof bad / sizeof bad[0]);
    tcase_add_test(tc, unreachable_and_failover);
    tcase_add_test(tc, describe);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(etcd_suite());
}
