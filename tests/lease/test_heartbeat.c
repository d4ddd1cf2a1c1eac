/*
 * test_heartbeat.c -- keeping leases alive and noticing when they are not:
 * the heartbeat thread, manual renewal, FENCE_HEARTBEAT_MANUAL, the lost
 * callback (key deleted, key taken, Redis stopped, release from inside the
 * callback; exactly once per lease also when memory has run out) and
 * fence_lease_valid_ms().  Real redis-server from
 * scripts/with-servers; the Redis-stopping test always restarts it.
 * FENCE_TEST_ISSUER=pg runs every case against the PostgreSQL issuer on the
 * test PostgreSQL instead (issuerutil.h: what a case does to the server,
 * said once for both; run-suites runs it as test_heartbeat:pg).
 */
#include "casetable.h"
#include "failalloc.h"
#include "fence.h"
#include "issuerutil.h"
#include "leaseutil.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ */
/* Heartbeat thread                                                     */
/* ------------------------------------------------------------------ */

START_TEST(heartbeat_keeps_lease_alive)
{
    fence_client *c = lu_iss_open();
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("alive"));
    lu_lost lr;
    lu_lost_init(&lr);
    fence_metrics m0 = lu_metrics(c);
    fence_lease *l = lu_acquire_cb(c, nm, 200, 0, 0, &lr); /* renews every ~66 ms */

    int64_t t0 = tu_now_ms();
    int64_t min_valid = 1000;
    while (tu_now_ms() - t0 < 1500) { /* 7.5 TTLs */
        tu_sleep_ms(40);
        ck_assert_msg(!fence_lease_lost(l), "lease lost after %" PRId64 " ms",
                      tu_now_ms() - t0);
        int64_t v = fence_lease_valid_ms(l);
        if (v < min_valid) {
            min_valid = v;
        }
        char *val = lu_iss_owner(nm);
        ck_assert_msg(val != NULL, "lease gone from the server after %" PRId64 " ms", tu_now_ms() - t0);
        ck_assert_str_eq(val, fence_lease_owner(l));
        free(val);
    }
    ck_assert_msg(min_valid > 0, "valid_ms dropped to %" PRId64 " while held", min_valid);
    fence_metrics m1 = lu_metrics(c);
    ck_assert_msg(m1.renew_ok - m0.renew_ok >= 10,
                  "only %" PRIu64 " renewals in 1.5 s at a 66 ms period",
                  m1.renew_ok - m0.renew_ok);
    ck_assert_uint_eq(m1.renew_failed, m0.renew_failed);
    ck_assert_uint_eq(m1.lease_lost, m0.lease_lost);
    ck_assert_uint_ge(m1.heartbeat_latency_count - m0.heartbeat_latency_count, 10);
    ck_assert_uint_eq(lu_latency_total(&m1), m1.heartbeat_latency_count);
    ck_assert(m1.heartbeat_latency_sum_s > 0.0);
    ck_assert_uint_eq(m1.leases_held, 1);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    ck_assert_int_eq(atomic_load(&lr.calls), 0);
    ck_assert_uint_eq(lu_metrics(c).leases_held, 0);
    fence_client_close(c);
}
END_TEST

/* Many leases on one client, several renew batches per pass. */
START_TEST(heartbeat_many_leases)
{
    enum { N = 300 };
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = lu_iss_url();
    o.renew_batch = 64;
    fence_client *c = NULL;
    EXPECT_RC(fence_client_open(&c, &o), FENCE_OK, c);
    char base[200];
    snprintf(base, sizeof base, "%s", tu_name("many"));
    fence_lease **ls = calloc(N, sizeof *ls);
    ck_assert_ptr_nonnull(ls);
    for (int i = 0; i < N; i++) {
        char nm[256];
        snprintf(nm, sizeof nm, "%s-%d", base, i);
        ls[i] = lu_acquire_cb(c, nm, 400, 0, 0, NULL);
    }
    tu_sleep_ms(1200); /* 3 TTLs */
    for (int i = 0; i < N; i += lu_iss_pg() ? 10 : 1) { /* (a connection per look on PostgreSQL) */
        char nm[256];
        snprintf(nm, sizeof nm, "%s-%d", base, i);
        ck_assert_msg(!fence_lease_lost(ls[i]), "lease %d lost", i);
        ck_assert_msg(lu_iss_held(nm), "lease %d: gone from the server", i);
    }
    ck_assert_uint_eq(lu_metrics(c).leases_held, N);
    for (int i = 0; i < N; i++) {
        EXPECT_RC(fence_release(ls[i]), FENCE_OK, c);
    }
    free(ls);
    fence_client_close(c);
}
END_TEST

START_TEST(no_heartbeat_expires)
{
    fence_client *c = lu_iss_open();
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("nohb"));
    lu_lost lr;
    lu_lost_init(&lr);
    fence_lease *l = lu_acquire_cb(c, nm, 150, 0, 1, &lr);
    tu_sleep_ms(300);
    ck_assert_int_eq(lu_iss_held(nm), 0);
    ck_assert_int_eq(fence_lease_valid_ms(l), 0);
    /* Nobody renewed: the callback fires only when a renewal is refused. */
    EXPECT_RC(fence_renew(l), FENCE_LOST, c);
    ck_assert_int_ne(fence_lease_lost(l), 0);
    ck_assert_int_eq(atomic_load(&lr.calls), 1);
    ck_assert_int_eq(atomic_load(&lr.reason), FENCE_LOST);
    EXPECT_RC(fence_renew(l), FENCE_LOST, c);
    ck_assert_int_eq(atomic_load(&lr.calls), 1);
    EXPECT_RC(fence_release(l), FENCE_LOST, c);
    ck_assert_int_eq(atomic_load(&lr.calls), 1);
    fence_client_close(c);
}
END_TEST

START_TEST(renew_manual)
{
    fence_client *c = lu_iss_open();
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("renew"));
    fence_lease *l = lu_acquire_cb(c, nm, 300, 0, 1, NULL);
    fence_metrics m0 = lu_metrics(c);
    for (int i = 0; i < 4; i++) { /* 600 ms: twice the TTL */
        tu_sleep_ms(150);
        int64_t before = fence_lease_valid_ms(l);
        EXPECT_RC(fence_renew(l), FENCE_OK, c);
        int64_t after = fence_lease_valid_ms(l);
        ck_assert_msg(after > before + 100, "valid_ms %" PRId64 " -> %" PRId64 " on renew",
                      before, after);
        long long pttl = lu_iss_pttl(nm);
        ck_assert_msg(pttl > 200 && pttl <= 300, "PTTL %lld after renew", pttl);
    }
    fence_metrics m1 = lu_metrics(c);
    ck_assert_uint_eq(m1.renew_ok - m0.renew_ok, 4);
    ck_assert_int_eq(fence_lease_lost(l), 0);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    fence_client_close(c);
}
END_TEST

START_TEST(valid_ms_semantics)
{
    fence_client *c = lu_iss_open();
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("valid"));
    const int64_t ttl = 1000, margin = ttl / 100 + 2; /* 12 */
    fence_lease *l = lu_acquire_cb(c, nm, ttl, 0, 1, NULL);
    int64_t v0 = fence_lease_valid_ms(l);
    ck_assert_msg(v0 > 0 && v0 <= ttl - margin, "valid_ms %" PRId64 " right after acquire "
                  "(TTL %" PRId64 ", margin %" PRId64 ")", v0, ttl, margin);
    ck_assert_msg(v0 >= ttl - margin - 200, "valid_ms %" PRId64 " right after acquire", v0);
    tu_sleep_ms(200);
    int64_t v1 = fence_lease_valid_ms(l);
    ck_assert_msg(v1 <= v0 - 190 && v1 > 0, "valid_ms %" PRId64 " -> %" PRId64 " after 200 ms",
                  v0, v1);
    EXPECT_RC(fence_renew(l), FENCE_OK, c);
    int64_t v2 = fence_lease_valid_ms(l);
    ck_assert_msg(v2 > v1 + 150 && v2 <= ttl - margin,
                  "valid_ms %" PRId64 " -> %" PRId64 " after renew", v1, v2);
    EXPECT_RC(fence_release(l), FENCE_OK, c);

    /* Short TTL: runs out to exactly 0, never negative. */
    l = lu_acquire_cb(c, nm, 50, 0, 1, NULL);
    tu_sleep_ms(80);
    ck_assert_int_eq(fence_lease_valid_ms(l), 0);
    EXPECT_RC(fence_release(l), FENCE_LOST, c);
    fence_client_close(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Manual heartbeat mode                                                */
/* ------------------------------------------------------------------ */

START_TEST(manual_mode_run)
{
    fence_client *c = lu_iss_open_mode(FENCE_HEARTBEAT_MANUAL);
    int64_t next = 12345;
    EXPECT_RC(fence_heartbeat_run(c, &next), FENCE_OK, c);
    ck_assert_int_eq(next, -1); /* nothing held */
    EXPECT_RC(fence_heartbeat_run(c, NULL), FENCE_OK, c);

    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("manual"));
    lu_lost lr;
    lu_lost_init(&lr);
    fence_lease *l = lu_acquire_cb(c, nm, 300, 100, 0, &lr);
    fence_metrics m0 = lu_metrics(c);
    EXPECT_RC(fence_heartbeat_run(c, &next), FENCE_OK, c);
    ck_assert_msg(next >= 0 && next <= 100, "next_ms %" PRId64 " with renew_every_ms 100", next);

    int64_t t0 = tu_now_ms();
    while (tu_now_ms() - t0 < 1000) { /* 3+ TTLs, kept alive only by us */
        tu_sleep_ms(next > 0 && next < 50 ? next : 50);
        EXPECT_RC(fence_heartbeat_run(c, &next), FENCE_OK, c);
        ck_assert_msg(next >= 0 && next <= 100, "next_ms %" PRId64, next);
        ck_assert_int_eq(fence_lease_lost(l), 0);
    }
    char *own = lu_iss_owner(nm);
    ck_assert_msg(own != NULL && strcmp(own, fence_lease_owner(l)) == 0, "the server has %s",
                  own != NULL ? own : "nothing");
    free(own);
    fence_metrics m1 = lu_metrics(c);
    ck_assert_msg(m1.renew_ok - m0.renew_ok >= 7, "%" PRIu64 " renewals in 1 s at 100 ms",
                  m1.renew_ok - m0.renew_ok);
    ck_assert_msg(m1.renew_ok - m0.renew_ok <= 15,
                  "%" PRIu64 " renewals in 1 s at 100 ms: renewing leases not yet due",
                  m1.renew_ok - m0.renew_ok);
    ck_assert_uint_gt(m1.heartbeat_latency_count, m0.heartbeat_latency_count);
    ck_assert_int_eq(atomic_load(&lr.calls), 0);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    EXPECT_RC(fence_heartbeat_run(c, &next), FENCE_OK, c);
    ck_assert_int_eq(next, -1);
    fence_client_close(c);
}
END_TEST

START_TEST(manual_mode_without_run_expires)
{
    fence_client *c = lu_iss_open_mode(FENCE_HEARTBEAT_MANUAL);
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("manexp"));
    lu_lost lr;
    lu_lost_init(&lr);
    fence_lease *l = lu_acquire_cb(c, nm, 150, 0, 0, &lr);
    tu_sleep_ms(300); /* no thread renews it */
    ck_assert_int_eq(lu_iss_held(nm), 0);
    ck_assert_int_eq(atomic_load(&lr.calls), 0);
    int64_t next = 0;
    EXPECT_RC(fence_heartbeat_run(c, &next), FENCE_OK, c);
    ck_assert_int_eq(atomic_load(&lr.calls), 1);
    ck_assert_int_eq(atomic_load(&lr.reason), FENCE_LOST);
    ck_assert_int_ne(fence_lease_lost(l), 0);
    ck_assert_uint_eq(lu_metrics(c).lease_lost, 1);
    EXPECT_RC(fence_heartbeat_run(c, &next), FENCE_OK, c);
    ck_assert_int_eq(atomic_load(&lr.calls), 1);
    EXPECT_RC(fence_release(l), FENCE_LOST, c);
    fence_client_close(c);
}
END_TEST

START_TEST(heartbeat_run_in_thread_mode)
{
    fence_client *c = lu_iss_open();
    int64_t next = 7;
    EXPECT_RC(fence_heartbeat_run(c, &next), FENCE_ESTATE, c);
    ck_assert_str_ne(fence_client_errmsg(c), "");
    fence_client_close(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The lost callback                                                    */
/* ------------------------------------------------------------------ */

/* The lease's key changed behind the heartbeat's back; on_lost is called
 * once, soon, and the lease is lost (or, released inside the callback,
 * gone). */
static const struct {
    const char *name;
    int overwrite;      /* the key taken by another owner (else deleted) */
    int release_inside; /* the callback releases its lease */
} tampering[] = {
    {"key_deleted", 0, 0},
    {"key_taken", 1, 0},
    {"releases_its_lease", 0, 1},
};

START_TEST(lost_cb)
{
    const int overwrite = tampering[_i].overwrite;
    const int release_inside = tampering[_i].release_inside;
    fence_client *c = lu_iss_open();
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name(overwrite ? "taken" : "deleted"));
    lu_lost lr;
    lu_lost_init(&lr);
    atomic_store(&lr.release_inside, release_inside);
    fence_lease *l = lu_acquire_cb(c, nm, 300, 50, 0, &lr);
    tu_sleep_ms(100);
    ck_assert_int_eq(atomic_load(&lr.calls), 0);
    if (overwrite) {
        lu_iss_take(nm, "0123456789abcdef0123456789abcdef:999999");
    } else {
        ck_assert_int_eq(lu_iss_drop(nm), 1);
    }
    int64_t waited = lu_wait_lost(&lr, 2000);
    tu_sleep_ms(200); /* four more renew periods: no second call */
    ck_assert_msg(atomic_load(&lr.calls) == 1, "on_lost called %d times (waited %" PRId64 " ms)",
                  atomic_load(&lr.calls), waited);
    ck_assert_int_eq(atomic_load(&lr.reason), FENCE_LOST);
    ck_assert_int_eq(atomic_load(&lr.bad_lease), 0);
    ck_assert_msg(waited <= 300, "loss noticed only after %" PRId64 " ms at a 50 ms period",
                  waited);
    fence_metrics m = lu_metrics(c);
    ck_assert_uint_eq(m.lease_lost, 1);
    ck_assert_uint_eq(m.leases_held, 0);
    if (release_inside) {
        /* The callback released (and freed) the lease. */
        ck_assert_int_eq(atomic_load(&lr.release_rc), FENCE_LOST);
    } else {
        ck_assert_int_ne(fence_lease_lost(l), 0);
        ck_assert_int_eq(fence_lease_valid_ms(l), 0);
        EXPECT_RC(fence_renew(l), FENCE_LOST, c);
        EXPECT_RC(fence_release(l), FENCE_LOST, c);
        ck_assert_int_eq(atomic_load(&lr.calls), 1);
    }
    if (overwrite) { /* the other owner's value is left alone */
        char *own = lu_iss_owner(nm);
        ck_assert_msg(own != NULL && strcmp(own, "0123456789abcdef0123456789abcdef:999999") == 0,
                      "the server has %s", own != NULL ? own : "nothing");
        free(own);
    }
    fence_client_close(c);
}
END_TEST

START_TEST(lost_cb_via_renew)
{
    fence_client *c = lu_iss_open();
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("viarenew"));
    lu_lost lr;
    lu_lost_init(&lr);
    fence_lease *l = lu_acquire_cb(c, nm, 5000, 0, 1, &lr);
    ck_assert_int_eq(lu_iss_drop(nm), 1);
    EXPECT_RC(fence_renew(l), FENCE_LOST, c); /* fires on_lost inside */
    ck_assert_int_eq(atomic_load(&lr.calls), 1);
    ck_assert_int_eq(atomic_load(&lr.reason), FENCE_LOST);
    EXPECT_RC(fence_renew(l), FENCE_LOST, c);
    EXPECT_RC(fence_release(l), FENCE_LOST, c);
    ck_assert_int_eq(atomic_load(&lr.calls), 1);
    fence_client_close(c);
}
END_TEST

START_TEST(lost_cb_never_on_release)
{
    fence_client *c = lu_iss_open();
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("norel"));
    lu_lost lr1, lr2;
    lu_lost_init(&lr1);
    lu_lost_init(&lr2);
    fence_lease *l = lu_acquire_cb(c, nm, 150, 30, 0, &lr1);
    tu_sleep_ms(200);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    /* Released by closing the client. */
    char nm2[256];
    snprintf(nm2, sizeof nm2, "%s", tu_name("noclose"));
    lu_acquire_cb(c, nm2, 150, 30, 0, &lr2);
    tu_sleep_ms(60);
    fence_client_close(c);
    tu_sleep_ms(400);
    ck_assert_int_eq(atomic_load(&lr1.calls), 0);
    ck_assert_int_eq(atomic_load(&lr2.calls), 0);
    ck_assert_int_eq(lu_iss_held(nm2), 0);
}
END_TEST

/* A lease without a callback, lost while its holder releases it: the
 * heartbeat must not touch it once the lock is dropped (run under ASan and
 * valgrind by make check / make valgrind). */
START_TEST(lost_without_cb_races_release)
{
    fence_client *c = lu_iss_open();
    for (int i = 0; i < 150; i++) {
        char nm[256];
        snprintf(nm, sizeof nm, "%s", tu_name("racerel"));
        /* (PostgreSQL: a connection per drop; a TTL that outlives it.) */
        fence_lease *l = lu_acquire_cb(c, nm, lu_iss_pg() ? 300 : 60, 10, 0, NULL);
        ck_assert_int_eq(lu_iss_drop(nm), 1);
        tu_sleep_ms(i % 15); /* release before, during or after the pass */
        int rc = fence_release(l);
        ck_assert_msg(rc == FENCE_LOST, "release after the key was deleted: %s",
                      fence_status_name(rc));
    }
    fence_client_close(c);
}
END_TEST

/* While Redis is down the heartbeat backs off (10..250 ms between tries),
 * it does not spin: a lease renewed every 100 ms is retried about every
 * 25 ms, not thousands of times. */
START_TEST(heartbeat_backs_off_while_down)
{
    fence_client *c = lu_iss_open();
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("backoff"));
    fence_lease *l = lu_acquire_cb(c, nm, 5000, 100, 0, NULL);
    fence_metrics m0 = lu_metrics(c);
    lu_iss_ctl("stop");
    int64_t t0 = tu_now_ms();
    tu_sleep_ms(600);
    fence_metrics m1 = lu_metrics(c);
    int64_t took = tu_now_ms() - t0;
    int lost_down = fence_lease_lost(l);
    lu_iss_ctl("start");
    uint64_t tries = m1.renew_failed - m0.renew_failed;
    fprintf(stderr, "heartbeat_backs_off_while_down: %" PRIu64 " failed renewals in %" PRId64
            " ms\n", tries, took);
    ck_assert_msg(tries >= 3 && tries <= 60, "%" PRIu64 " failed renewals in %" PRId64 " ms",
                  tries, took);
    ck_assert_int_eq(lost_down, 0); /* still valid while down: 5 s TTL */
    fence_release(l);
    fence_client_close(c);
}
END_TEST

/* Two leases lost in one pass; the first callback releases the other lease:
 * the other's callback must then never run (it was released by the user). */
typedef struct pair_rec {
    fence_lease *other[2];
    atomic_int calls[2];
    atomic_int release_rc;
} pair_rec;

static pair_rec g_pair;

static void pair_lost(fence_lease *lease, int reason, void *user)
{
    (void)reason;
    int i = (int)(intptr_t)user;
    atomic_fetch_add(&g_pair.calls[i], 1);
    fence_lease *o = g_pair.other[i];
    if (o != NULL) {
        g_pair.other[0] = g_pair.other[1] = NULL;
        atomic_store(&g_pair.release_rc, fence_release(o));
    }
    (void)lease;
}

START_TEST(lost_cb_skipped_after_release_in_other_cb)
{
    fence_client *c = lu_iss_open_mode(FENCE_HEARTBEAT_MANUAL);
    char a[256], b[256];
    snprintf(a, sizeof a, "%s", tu_name("pairA"));
    snprintf(b, sizeof b, "%s", tu_name("pairB"));
    fence_lease *la = NULL, *lb = NULL;
    fence_lease_options o;
    fence_lease_options_init(&o, 2000);
    o.renew_every_ms = 50;
    o.on_lost = pair_lost;
    o.user = (void *)(intptr_t)0;
    EXPECT_RC(fence_acquire(c, a, &o, &la), FENCE_OK, c);
    o.user = (void *)(intptr_t)1;
    EXPECT_RC(fence_acquire(c, b, &o, &lb), FENCE_OK, c);
    g_pair.other[0] = lb;
    g_pair.other[1] = la;
    atomic_init(&g_pair.calls[0], 0);
    atomic_init(&g_pair.calls[1], 0);
    atomic_init(&g_pair.release_rc, -1);
    ck_assert_int_eq(lu_iss_drop(a), 1);
    ck_assert_int_eq(lu_iss_drop(b), 1);
    tu_sleep_ms(60); /* both due */
    int64_t next = 0;
    fence_heartbeat_run(c, &next);
    int ca = atomic_load(&g_pair.calls[0]), cb = atomic_load(&g_pair.calls[1]);
    ck_assert_msg(ca + cb == 1, "callbacks: A %d, B %d (the released one must not run)", ca, cb);
    ck_assert_int_eq(atomic_load(&g_pair.release_rc), FENCE_LOST);
    EXPECT_RC(fence_release(ca == 1 ? la : lb), FENCE_LOST, c);
    fence_client_close(c);
}
END_TEST

/* Memory runs out on the heartbeat's thread (every allocation there
 * fails: failalloc.h) while 20 leases are held: their renewals cannot even
 * be sent, and each lease's on_lost still comes exactly once when its
 * validity ends, reason FENCE_ECONN -- losing a lease allocates nothing
 * (its callback used to be queued in an array that grew beyond 8 entries:
 * the others were dropped). */
enum { NOMEM_LEASES = 20 };
START_TEST(lost_once_without_memory)
{
    fence_client *c = lu_iss_open();
    lu_lost lr[NOMEM_LEASES];
    fence_lease *l[NOMEM_LEASES];
    for (int i = 0; i < NOMEM_LEASES; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "nomem-%d", i);
        lu_lost_init(&lr[i]);
        l[i] = lu_acquire_cb(c, tu_name(nm), 400, 0, 0, &lr[i]);
    }
    fa_start();
    int64_t t0 = tu_now_ms();
    int all = 0;
    while (!all && tu_now_ms() - t0 < 2000) {
        tu_sleep_ms(20);
        all = 1;
        for (int i = 0; i < NOMEM_LEASES; i++) {
            all &= atomic_load(&lr[i].calls) > 0;
        }
    }
    tu_sleep_ms(200); /* a second call would come by now */
    fa_stop();
    long failures = fa_failed();
    ck_assert_msg(failures > 0, "no allocation failed: the injection did not work");
    for (int i = 0; i < NOMEM_LEASES; i++) {
        ck_assert_msg(atomic_load(&lr[i].calls) == 1, "lease %d: %d callbacks (%ld allocations "
                      "failed)", i, atomic_load(&lr[i].calls), failures);
        ck_assert_int_eq(atomic_load(&lr[i].reason), FENCE_ECONN);
        ck_assert_int_ne(fence_lease_lost(l[i]), 0);
    }
    for (int i = 0; i < NOMEM_LEASES; i++) {
        fence_release(l[i]);
    }
    fence_client_close(c);
}
END_TEST

/* Redis frozen (SIGSTOP): a short lease that is not due when a pass starts
 * is still reported lost on time, not after the pass's I/O timeout. */
START_TEST(lost_on_time_while_redis_frozen)
{
    fence_client *c = lu_iss_open();
    char a[256], b[256];
    snprintf(a, sizeof a, "%s", tu_name("frozenA"));
    snprintf(b, sizeof b, "%s", tu_name("frozenB"));
    lu_lost lr;
    lu_lost_init(&lr);
    fence_lease *la = lu_acquire_cb(c, a, 60000, 100, 0, NULL);
    fence_lease *lb = lu_acquire_cb(c, b, 600, 0, 0, &lr);
    int64_t t0 = tu_now_ms();
    lu_iss_signal(SIGSTOP);
    int64_t waited = lu_wait_lost(&lr, 1800);
    int64_t valid_left = fence_lease_valid_ms(lb);
    lu_iss_signal(SIGCONT);
    fprintf(stderr, "lost_on_time_while_redis_frozen: lost after %" PRId64 " ms (TTL 600)\n",
            tu_now_ms() - t0);
    ck_assert_msg(atomic_load(&lr.calls) == 1, "not reported lost within %" PRId64 " ms",
                  waited);
    ck_assert_int_eq(atomic_load(&lr.reason), FENCE_ECONN);
    ck_assert_msg(waited < 900, "reported lost %" PRId64 " ms after the freeze (TTL 600)", waited);
    ck_assert_int_eq(valid_left, 0);
    ck_assert_int_ne(fence_lease_lost(lb), 0);
    fence_release(lb);
    fence_release(la);
    fence_client_close(c);
}
END_TEST

/* Redis goes away: the lease is reported lost with FENCE_ECONN once its
 * local validity runs out, not before, and exactly once. */
/* Two leases lost at once on two threads (A by the heartbeat thread, B by
 * fence_renew() here), each callback releasing the other lease: no
 * deadlock (the test's timeout would catch one). */
static fence_lease *g_xa, *g_xb;
static atomic_int g_xdone;

static void cross_cb(fence_lease *lease, int reason, void *user)
{
    (void)reason;
    (void)user;
    tu_sleep_ms(150); /* so both callbacks overlap */
    fence_lease *other = lease == g_xa ? g_xb : g_xa;
    fence_release(other);
    atomic_fetch_add(&g_xdone, 1);
}

START_TEST(callbacks_releasing_each_other_do_not_deadlock)
{
    fence_client *c = lu_iss_open();
    char a[256], b[256];
    snprintf(a, sizeof a, "%s", tu_name("xA"));
    snprintf(b, sizeof b, "%s", tu_name("xB"));
    atomic_init(&g_xdone, 0);
    fence_lease_options o;
    fence_lease_options_init(&o, 3000);
    o.renew_every_ms = 50;
    o.on_lost = cross_cb;
    EXPECT_RC(fence_acquire(c, a, &o, &g_xa), FENCE_OK, c);
    fence_lease_options_init(&o, 3000);
    o.no_heartbeat = 1;
    o.on_lost = cross_cb;
    EXPECT_RC(fence_acquire(c, b, &o, &g_xb), FENCE_OK, c);
    ck_assert_int_eq(lu_iss_drop(a), 1);
    ck_assert_int_eq(lu_iss_drop(b), 1);
    tu_sleep_ms(30); /* A's loss is found by the next pass, while B's renew runs */
    EXPECT_RC(fence_renew(g_xb), FENCE_LOST, c);
    int64_t t0 = tu_now_ms();
    while (atomic_load(&g_xdone) < 1 && tu_now_ms() - t0 < 2000) {
        tu_sleep_ms(5);
    }
    ck_assert_int_ge(atomic_load(&g_xdone), 1);
    tu_sleep_ms(300); /* let the other callback finish before closing */
    fence_client_close(c); /* frees whichever lease no callback released */
}
END_TEST

/* Manual mode, Redis frozen, the lease's validity already gone: the pass
 * reports it lost at once instead of first trying to renew it (which would
 * block for the I/O timeout). */
START_TEST(expired_lease_not_renewed_by_a_pass)
{
    fence_client_options co;
    fence_client_options_init(&co);
    co.url = lu_iss_url();
    co.heartbeat_mode = FENCE_HEARTBEAT_MANUAL;
    co.io_timeout_ms = 1500;
    fence_client *c = NULL;
    EXPECT_RC(fence_client_open(&c, &co), FENCE_OK, c);
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("expired"));
    lu_lost lr;
    lu_lost_init(&lr);
    fence_lease *l = lu_acquire_cb(c, nm, 200, 0, 0, &lr);
    lu_iss_signal(SIGSTOP);
    tu_sleep_ms(250); /* validity gone, no pass run */
    int64_t t0 = tu_now_ms();
    int64_t next = 0;
    fence_heartbeat_run(c, &next);
    int64_t took = tu_now_ms() - t0;
    lu_iss_signal(SIGCONT);
    ck_assert_msg(took < 500, "the pass took %" PRId64 " ms for an expired lease", took);
    ck_assert_int_eq(atomic_load(&lr.calls), 1);
    fence_release(l);
    fence_client_close(c);
}
END_TEST

/* A call that times out against a frozen Redis is not retried: it returns
 * after about one I/O timeout, not two. */
START_TEST(timeout_not_retried)
{
    fence_client_options co;
    fence_client_options_init(&co);
    co.url = lu_iss_url();
    co.io_timeout_ms = 300;
    fence_client *c = NULL;
    EXPECT_RC(fence_client_open(&c, &co), FENCE_OK, c);
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("tmo"));
    fence_lease *l = lu_acquire_cb(c, nm, 10000, 0, 1, NULL);
    lu_iss_signal(SIGSTOP);
    int64_t t0 = tu_now_ms();
    int rc = fence_renew(l);
    int64_t took = tu_now_ms() - t0;
    lu_iss_signal(SIGCONT);
    fprintf(stderr, "timeout_not_retried: %s after %" PRId64 " ms (io_timeout 300)\n",
            fence_status_name(rc), took);
    ck_assert_int_eq(rc, FENCE_ECONN);
    ck_assert_msg(took < 550, "fence_renew took %" PRId64 " ms with a 300 ms I/O timeout", took);
    ck_assert_int_eq(fence_lease_lost(l), 0); /* still valid: 10 s TTL */
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    fence_client_close(c);
}
END_TEST

/* fence_client_close() keeps releasing after an ambiguous release (the
 * connection broke mid-release but Redis answered the retry): only a
 * really unreachable Redis makes it leave the rest to their TTL. */
START_TEST(close_releases_after_an_ambiguous_release)
{
    fence_client *c = lu_iss_open();
    char n[3][256];
    for (int i = 0; i < 3; i++) {
        snprintf(n[i], sizeof n[i], "%s", tu_name("amb"));
        lu_acquire_cb(c, n[i], 30000, 0, 1, NULL);
    }
    /* close releases the newest first: make its release ambiguous. */
    ck_assert_int_eq(lu_iss_drop(n[2]), 1);
    lu_iss_kill_connections();
    fence_client_close(c);
    ck_assert_int_eq(lu_iss_held(n[0]), 0);
    ck_assert_int_eq(lu_iss_held(n[1]), 0);
}
END_TEST

START_TEST(lost_cb_econn_when_redis_stops)
{
    fence_client *c = lu_iss_open();
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("econn"));
    lu_lost lr;
    lu_lost_init(&lr);
    /* Stopping takes ~0.2 s to close the port (and up to ~2 s for
     * redis-ctl to return); the 1 s TTL makes the library hold out for
     * most of a second against refused connections. */
    const int64_t ttl = 1000;
    fence_lease *l = lu_acquire_cb(c, nm, ttl, 100, 0, &lr);
    int64_t valid_before = fence_lease_valid_ms(l);
    fence_metrics m0 = lu_metrics(c);

    /* From here until Redis is back: record, do not assert. */
    int64_t t0 = tu_now_ms();
    lu_iss_ctl("stop");
    int64_t stopped_after = tu_now_ms() - t0;
    int64_t waited = lu_wait_lost(&lr, 4000);
    int64_t noticed = tu_now_ms() - t0;
    tu_sleep_ms(300);
    int calls = atomic_load(&lr.calls), reason = atomic_load(&lr.reason);
    int lost = fence_lease_lost(l);
    int64_t valid_after = fence_lease_valid_ms(l);
    fence_metrics m1;
    int mrc = fence_client_metrics(c, &m1);
    lu_iss_ctl("start");

    fprintf(stderr, "lost_cb_econn_when_redis_stops: on_lost %d ms after stop began "
            "(stop took %d ms, valid_ms before %d)\n", (int)noticed, (int)stopped_after,
            (int)valid_before);
    ck_assert_msg(calls == 1, "on_lost called %d times (waited %" PRId64 " ms)", calls, waited);
    ck_assert_msg(reason == FENCE_ECONN, "reason %s, expected FENCE_ECONN",
                  fence_status_name(reason));
    ck_assert_int_ne(lost, 0);
    ck_assert_int_eq(valid_after, 0);
    ck_assert_msg(noticed >= valid_before - 50,
                  "reported lost %" PRId64 " ms after stop, but it was valid for %" PRId64
                  " more ms",
                  noticed, valid_before);
    ck_assert_msg(noticed <= stopped_after + ttl + 500,
                  "reported lost only %" PRId64 " ms after stop began", noticed);
    ck_assert_int_eq(mrc, FENCE_OK);
    ck_assert_uint_ge(m1.renew_failed, m0.renew_failed + 1);
    ck_assert_uint_eq(m1.lease_lost, m0.lease_lost + 1);

    /* Redis is back: the lease stays lost, and the client works again. */
    tu_sleep_ms(300);
    ck_assert_int_eq(atomic_load(&lr.calls), 1);
    int rc = fence_release(l);
    ck_assert_msg(rc == FENCE_LOST, "release after loss: %s", fence_status_name(rc));
    fence_lease *l2 = lu_acquire_after_restart(c, nm, ttl);
    EXPECT_RC(fence_release(l2), FENCE_OK, c);
    fence_client_close(c);
}
END_TEST

/* Manual mode with Redis down: fence_heartbeat_run() returns the
 * connection error and the lease stays held while it is still valid; once
 * Redis is back (empty: no persistence), the next pass finds it lost. */
START_TEST(manual_mode_redis_down)
{
    fence_client *c = lu_iss_open_mode(FENCE_HEARTBEAT_MANUAL);
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("mandown"));
    lu_lost lr;
    lu_lost_init(&lr);
    fence_lease *l = lu_acquire_cb(c, nm, 5000, 10, 0, &lr);
    tu_sleep_ms(15);
    int64_t next = 0;
    EXPECT_RC(fence_heartbeat_run(c, &next), FENCE_OK, c);

    lu_iss_ctl("stop");
    tu_sleep_ms(15);
    int rc_down = fence_heartbeat_run(c, &next);
    char msg_down[512];
    snprintf(msg_down, sizeof msg_down, "%s", fence_client_errmsg(c));
    int64_t next_down = next;
    int calls_down = atomic_load(&lr.calls), reason_down = atomic_load(&lr.reason);
    int lost_down = fence_lease_lost(l);
    int64_t valid_down = fence_lease_valid_ms(l);
    tu_sleep_ms(15);
    int rc_down2 = fence_heartbeat_run(c, &next);
    int calls_down2 = atomic_load(&lr.calls);
    lu_iss_ctl("start");

    ck_assert_msg(rc_down == FENCE_ECONN, "heartbeat_run with Redis down: %s (%s)",
                  fence_status_name(rc_down), msg_down);
    ck_assert_str_ne(msg_down, "");
    ck_assert_msg(calls_down == 0 && !lost_down,
                  "lease reported lost (reason %s) with Redis down and %" PRId64
                  " ms of validity left",
                  fence_status_name(reason_down), valid_down);
    /* (redis-ctl stop itself takes up to ~2 s here.) */
    ck_assert_msg(valid_down > 0, "valid_ms %" PRId64 " with TTL 5 s", valid_down);
    ck_assert_msg(next_down >= 0 && next_down <= valid_down,
                  "next_ms %" PRId64 " after a failed pass", next_down);
    ck_assert_int_eq(rc_down2, FENCE_ECONN);
    ck_assert_int_eq(calls_down2, 0);

    if (lu_iss_pg()) {
        /* PostgreSQL kept the row (docs/issuers.md): the next pass
         * reconnects and renews it; the lease was never lost. */
        tu_sleep_ms(15);
        int rc = fence_heartbeat_run(c, &next);
        ck_assert_msg(rc == FENCE_OK, "heartbeat_run after restart: %s (%s)",
                      fence_status_name(rc), fence_client_errmsg(c));
        ck_assert_int_eq(atomic_load(&lr.calls), 0);
        ck_assert_int_eq(fence_lease_lost(l), 0);
        EXPECT_RC(fence_release(l), FENCE_OK, c);
        fence_client_close(c);
        return;
    }
    /* Back and empty: one of the next passes reconnects and is refused. */
    int rc = -1;
    for (int i = 0; i < 2 && atomic_load(&lr.calls) == 0; i++) {
        tu_sleep_ms(15);
        rc = fence_heartbeat_run(c, &next);
    }
    ck_assert_msg(rc == FENCE_OK, "heartbeat_run after restart: %s (%s)", fence_status_name(rc),
                  fence_client_errmsg(c));
    ck_assert_int_eq(atomic_load(&lr.calls), 1);
    ck_assert_int_eq(atomic_load(&lr.reason), FENCE_LOST);
    ck_assert_int_ne(fence_lease_lost(l), 0);
    ck_assert_int_eq(next, -1); /* nothing held any more */
    EXPECT_RC(fence_release(l), FENCE_LOST, c);
    fence_client_close(c);
}
END_TEST

static Suite *heartbeat_suite(void)
{
    Suite *s = suite_create("heartbeat");
    TCase *tc = tcase_create("thread");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, heartbeat_keeps_lease_alive);
    tcase_add_test(tc, heartbeat_many_leases);
    tcase_add_test(tc, no_heartbeat_expires);
    tcase_add_test(tc, renew_manual);
    tcase_add_test(tc, valid_ms_semantics);
    suite_add_tcase(s, tc);

    tc = tcase_create("manual");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, manual_mode_run);
    tcase_add_test(tc, manual_mode_without_run_expires);
    tcase_add_test(tc, heartbeat_run_in_thread_mode);
    suite_add_tcase(s, tc);

    tc = tcase_create("lost");
    tcase_set_timeout(tc, 30);
    tcase_add_unchecked_fixture(tc, NULL, lu_iss_ensure_up);
    CT_ADD_CASES(tc, lost_cb, tampering);
    tcase_add_test(tc, lost_cb_via_renew);
    tcase_add_test(tc, lost_cb_never_on_release);
    tcase_add_test(tc, lost_without_cb_races_release);
    tcase_add_test(tc, lost_cb_econn_when_redis_stops);
    tcase_add_test(tc, manual_mode_redis_down);
    tcase_add_test(tc, heartbeat_backs_off_while_down);
    tcase_add_test(tc, lost_cb_skipped_after_release_in_other_cb);
    tcase_add_test(tc, lost_on_time_while_redis_frozen);
    tcase_add_test(tc, lost_once_without_memory);
    tcase_add_test(tc, callbacks_releasing_each_other_do_not_deadlock);
    tcase_add_test(tc, expired_lease_not_renewed_by_a_pass);
    tcase_add_test(tc, timeout_not_retried);
    tcase_add_test(tc, close_releases_after_an_ambiguous_release);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    lu_iss_setup();
    return tu_run(heartbeat_suite());
}
