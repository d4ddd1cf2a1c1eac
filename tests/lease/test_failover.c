/*
 * test_failover.c -- issue 8 with replication: a master, a replica and a
 * Sentinel of the test's own (scripts/redis-set, loopback, always
 * stopped).  The failover of the issue (tokens 1..3 replicated, the
 * replica frozen and cut off, more tokens, the master killed, the replica
 * promoted by the Sentinel): the next clock token is greater than every
 * token issued before, and dense tokens repeat (the mechanism, shown).
 * Also the WAIT gate with a frozen replica, and fence_lease_reissue (the
 * self-heal) with its metric, under a running heartbeat.
 */
#include "setutil.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t take(fence_client *c, const char *name)
{
    fence_lease *l = lu_acquire_ok(c, name, 5000, 0);
    uint64_t t = fence_lease_token(l);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    return t;
}

/* Issue 3 tokens, replicated; freeze the replica and cut it off; issue 5
 * more; kill the master and continue the replica.  *last gets the highest
 * token issued; returns the third (the last one the replica has). */
static uint64_t lose_tokens(lu_set *s, fence_client *c, const char *name, uint64_t *last)
{
    uint64_t t3 = 0;
    for (int i = 0; i < 3; i++) {
        t3 = take(c, name);
    }
    redisContext *m = lu_connect(s->master);
    /* WAIT covers this connection's own writes (and so all before them). */
    lu_cmd_ok(m, "SET fence-test-sync 1");
    redisReply *w = redisCommand(m, "WAIT 1 2000");
    ck_assert_msg(w != NULL && w->type == REDIS_REPLY_INTEGER && w->integer == 1,
                  "tokens 1..3 were not replicated");
    freeReplyObject(w);
    lu_set_ctl(s, "replica", "pause");
    lu_cmd_ok(m, "CLIENT KILL TYPE replica");
    redisFree(m);
    for (int i = 0; i < 5; i++) {
        *last = take(c, name);
    }
    lu_set_ctl(s, "master", "kill");
    lu_set_ctl(s, "replica", "resume");
    return t3;
}

/* The failover through a real Sentinel promotion, clock tokens. */
START_TEST(sentinel_failover_clock)
{
    lu_set s;
    lu_set_start(&s, "sentinel", NULL);
    fence_client *c = lu_open_url(s.master_url);
    uint64_t last = 0;
    uint64_t t3 = lose_tokens(&s, c, "job", &last);
    fence_client_close(c);
    ck_assert_msg(lu_wait_master(s.replica, 20000), "the Sentinel did not promote the replica");
    redisContext *r = lu_connect(s.replica);
    char *n = lu_counter(r, "fence:{job}:token");
    ck_assert_msg(n != NULL && strtoull(n, NULL, 10) == t3,
                  "the promoted replica should have lost tokens 4..8 (n = %s)", n ? n : "-");
    free(n);
    redisFree(r);
    c = lu_open_url(s.replica_url);
    uint64_t next = take(c, "job");
    ck_assert_msg(next > last, "after the failover: %" PRIu64 " <= %" PRIu64 " (repeated)", next,
                  last);
    fence_client_close(c);
    lu_set_stop(&s);
}
END_TEST

/* The same failover with dense tokens repeats a token already issued
 * (promotion by REPLICAOF NO ONE: the Sentinel is not the point here). */
START_TEST(failover_dense_repeats)
{
    lu_set s;
    lu_set_start(&s, "replica", NULL);
    fence_client *c = lu_open_dense_url(s.master_url);
    uint64_t last = 0;
    uint64_t t3 = lose_tokens(&s, c, "job", &last);
    ck_assert_uint_eq(t3, 3);
    ck_assert_uint_eq(last, 8);
    fence_client_close(c);
    redisContext *r = lu_connect(s.replica);
    lu_cmd_ok(r, "REPLICAOF NO ONE");
    lu_expect_counter(r, "fence:{job}:token", "3"); /* 4..8 were lost */
    redisFree(r);
    c = lu_open_dense_url(s.replica_url);
    ck_assert_uint_eq(take(c, "job"), 4); /* issued before: the repeat */
    fence_client_close(c);
    c = lu_open_url(s.replica_url);
    fence_lease *l = NULL; /* a clock client never continues a dense counter */
    EXPECT_RC(fence_try_acquire(c, "job", 5000, &l), FENCE_ECONFIG, c);
    fence_client_close(c);
    lu_set_stop(&s);
}
END_TEST

/* A master cut off, resynced as a replica of the server promoted in its
 * place, and promoted again keeps its run_id (Redis does not change it on
 * REPLICAOF); only its master_replid is new.  Its copy of the counter came
 * from the other server, which lacked the last tokens, and carries the
 * incarnation of this very process: with run_id alone as the incarnation
 * there was no jump, and the counter, ahead of the clock (its first token
 * was a jump), issued last + 1: tokens it had already issued (the model's
 * configurations 11 and 12, docs/model.md).  The incarnation includes
 * master_replid: the next token is above every one issued. */
START_TEST(repromoted_master_jumps)
{
    lu_set s;
    lu_set_start(&s, "replica", NULL);
    fence_client *c = lu_open_url(s.master_url);
    uint64_t t1 = take(c, "job"); /* a new counter: clock + jump, ahead of the clock */
    redisContext *a = lu_connect(s.master);
    lu_cmd_ok(a, "SET fence-test-sync 1");
    redisReply *w = redisCommand(a, "WAIT 1 2000");
    ck_assert_msg(w != NULL && w->type == REDIS_REPLY_INTEGER && w->integer == 1,
                  "token %" PRIu64 " was not replicated", t1);
    freeReplyObject(w);
    lu_set_ctl(&s, "replica", "pause");
    lu_cmd_ok(a, "CLIENT KILL TYPE replica");
    uint64_t last = 0;
    for (int i = 0; i < 3; i++) {
        last = take(c, "job"); /* t1 + 1 .. t1 + 3: the replica never gets them */
    }
    ck_assert_uint_eq(last, t1 + 3);
    char run_before[41];
    lu_run_id(a, run_before);
    /* The old master frozen while the replica comes back and is promoted,
     * so the replica cannot fetch the last tokens first. */
    lu_set_ctl(&s, "master", "pause");
    lu_set_ctl(&s, "replica", "resume");
    redisContext *b = lu_connect(s.replica);
    lu_cmd_ok(b, "REPLICAOF NO ONE");
    lu_set_ctl(&s, "master", "resume");
    char buf[64];
    snprintf(buf, sizeof buf, "REPLICAOF 127.0.0.1 %d", s.replica);
    lu_cmd_ok(a, buf);
    /* Wait until the old master has loaded the other server's data (up
     * to 15 s: a full sync under a sanitizer on a loaded machine is slow;
     * once seen 5 s was not enough). */
    char *n = NULL;
    for (int i = 0; i < 600; i++) {
        free(n);
        n = lu_counter(a, "fence:{job}:token");
        if (n != NULL && strtoull(n, NULL, 10) == t1) {
            break;
        }
        tu_sleep_ms(25);
    }
    ck_assert_msg(n != NULL && strtoull(n, NULL, 10) == t1,
                  "the resynced old master should hold the copy without the last 3 tokens "
                  "(n = %s)", n ? n : "-");
    free(n);
    lu_cmd_ok(a, "REPLICAOF NO ONE");
    char run_after[41];
    lu_run_id(a, run_after);
    ck_assert_str_eq(run_after, run_before); /* the same process, promoted again */
    uint64_t next = take(c, "job");
    ck_assert_msg(next > last, "promoted again: %" PRIu64 " <= %" PRIu64 " (issued before)",
                  next, last);
    redisFree(a);
    redisFree(b);
    fence_client_close(c);
    lu_set_stop(&s);
}
END_TEST

/* min_replicas: acknowledged while the replica runs; with the replica
 * frozen, FENCE_EREPLICAS "0 of 1" and the lease is left free. */
START_TEST(wait_gate_frozen_replica)
{
    lu_set s;
    lu_set_start(&s, "replica", NULL);
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = s.master_url;
    o.min_replicas = 1;
    o.replica_timeout_ms = 150;
    fence_client *c = lu_open_opts(&o);
    take(c, "gated");
    lu_set_ctl(&s, "replica", "pause");
    fence_lease *l = NULL;
    int64_t t0 = now_ms();
    EXPECT_RC(fence_try_acquire(c, "gated", 5000, &l), FENCE_EREPLICAS, c);
    int64_t waited = now_ms() - t0;
    ck_assert_ptr_null(l);
    ck_assert_msg(strstr(fence_client_errmsg(c), "0 of 1 replicas acknowledged") != NULL, "%s",
                  fence_client_errmsg(c));
    ck_assert_msg(waited >= 140, "gave up after %" PRId64 " ms", waited);
    redisContext *m = lu_connect(s.master);
    ck_assert_int_eq(lu_rexists(m, "fence:{gated}"), 0); /* left free */
    lu_set_ctl(&s, "replica", "resume");
    take(c, "gated");
    ck_assert_int_eq(lu_rexists(m, "fence:{gated}"), 0);
    redisFree(m);
    fence_client_close(c);
    lu_set_stop(&s);
}
END_TEST

/* A store has seen store_highest > the lease's token: reissue raises the
 * counter past it, gives the lease a fresh token (owner value in Redis,
 * TTL kept), counts it; the heartbeat renews with the new value; once the
 * key is gone reissue says FENCE_LOST and the lease is lost. */
START_TEST(reissue_self_heal)
{
    redisContext *r = tu_redis();
    fence_client *c = lu_open_client();
    const char *nm = tu_name("heal");
    char ok[600];
    lu_owner_key(ok, sizeof ok, nm);
    lu_lost lr;
    lu_lost_init(&lr);
    fence_lease *l = lu_acquire_cb(c, nm, 300, 0, 0, &lr);
    uint64_t t = fence_lease_token(l), nt = 0;
    const char *holder = fence_lease_holder(l);
    uint64_t highest = t + 5000000000ULL;
    EXPECT_RC(fence_lease_reissue(l, highest, &nt), FENCE_OK, c);
    ck_assert_uint_gt(nt, highest);
    ck_assert_uint_eq(fence_lease_token(l), nt);
    char want[80];
    snprintf(want, sizeof want, "%s:%" PRIu64, holder, nt);
    ck_assert_str_eq(fence_lease_owner(l), want);
    lu_expect_get(r, ok, want);
    long long pttl = lu_rpttl(r, ok);
    ck_assert_msg(pttl > 0 && pttl <= 300, "TTL not kept: %lld", pttl);
    for (int i = 0; i < 20; i++) { /* under the heartbeat (renews every 100 ms) */
        uint64_t before = nt;
        EXPECT_RC(fence_lease_reissue(l, 0, &nt), FENCE_OK, c);
        ck_assert_uint_gt(nt, before);
        usleep(30000);
    }
    ck_assert_int_eq(fence_lease_lost(l), 0); /* renewed with the new values */
    lu_expect_get(r, ok, fence_lease_owner(l));
    fence_metrics m = lu_metrics(c);
    ck_assert_uint_eq(m.token_regressions, 21);
    char buf[8192];
    fence_metrics_prometheus(&m, buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "\nfence_token_regressions_total 21\n"));
    ck_assert_int_eq(lu_rdel(r, ok), 1);
    EXPECT_RC(fence_lease_reissue(l, 0, &nt), FENCE_LOST, c);
    ck_assert_int_eq(fence_lease_lost(l), 1);
    lu_wait_lost(&lr, 1000);
    ck_assert_int_eq(atomic_load(&lr.calls), 1);
    EXPECT_RC(fence_lease_reissue(l, 0, &nt), FENCE_LOST, c);
    EXPECT_RC(fence_release(l), FENCE_LOST, c);
    ck_assert_uint_eq(lu_metrics(c).token_regressions, 21);
    redisFree(r);
    fence_client_close(c);
}
END_TEST

static Suite *failover_suite(void)
{
    Suite *s = suite_create("failover");
    TCase *tc = tcase_create("replication");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, sentinel_failover_clock);
    tcase_add_test(tc, failover_dense_repeats);
    tcase_add_test(tc, repromoted_master_jumps);
    tcase_add_test(tc, wait_gate_frozen_replica);
    suite_add_tcase(s, tc);
    tc = tcase_create("self-heal");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, reissue_self_heal);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(failover_suite());
}
