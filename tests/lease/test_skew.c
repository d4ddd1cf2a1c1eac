/*
 * test_skew.c -- issue 19: skewed clocks, provoked on one machine with the
 * tests' own clock shim (tests/common/clockshim.h: LD_PRELOAD into a server
 * of a set of the test's own, scripts/redis-set with DIR/<server>/start.env,
 * or into a client process, tests/lease/skewclient).
 *
 * Failovers as test_failover's (tokens replicated, the replica frozen and
 * cut off while the master issues more, the master killed, the replica
 * promoted by a real Sentinel), the replica's wall clock offset:
 *   - behind by less than the jump, behind by more, ahead; each for a name
 *     whose counter the replica has (above every old token; the lag
 *     reported, or refused with clock_behind_limit_ms) and for one issued
 *     only while it was cut off (the old token plus the offset plus the
 *     time between: below when behind by more than the failover took,
 *     and then a store admits the older holder after the newer);
 * a live master's wall clock stepped (tokens go on n + 1; key TTLs move
 * with the clock); a client whose CLOCK_MONOTONIC runs fast or slow (the
 * 1% the lease validity allows for, and far beyond it).
 *
 * Each run prints its figures on stderr ("skew: ...").
 */
#include "clockshim.h"
#include "fence_gate.h"
#include "setutil.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define S (1000000LL) /* a second in µs */

/* ---- sets with a skewed server ------------------------------------- */

/* A file of the build (FENCE_BUILD, set by run-suites; else "build"). */
static const char *built(const char *rel)
{
    static _Thread_local char path[2][1024];
    static _Thread_local int i;
    const char *b = getenv("FENCE_BUILD");
    char *p = path[i++ % 2];
    snprintf(p, sizeof path[0], "%s/%s", b != NULL && b[0] != '\0' ? b : "build", rel);
    ck_assert_msg(access(p, R_OK) == 0, "%s is missing: make tests-build", p);
    return p;
}

/* The real wall clock in µs (this process is not under the shim). */
static int64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * S + ts.tv_nsec / 1000;
}

typedef struct skew_set {
    lu_set s;
    char clock[1200]; /* the skewed server's control file */
    char who[16];     /* which server runs under the shim */
} skew_set;

/* scripts/redis-set start KIND with the server WHO ("master", "replica")
 * under the shim, its wall clock offset by OFFSET_US. */
static void skew_start(skew_set *k, const char *kind, const char *who, int64_t offset_us)
{
    memset(k, 0, sizeof *k);
    lu_set *s = &k->s;
    snprintf(s->dir, sizeof s->dir, "%s/%s", tu_env("FENCE_TEST_SPAWN_DIR"), tu_name("skew"));
    snprintf(k->who, sizeof k->who, "%s", who);
    char sub[1100];
    snprintf(sub, sizeof sub, "%s/%s", s->dir, who);
    ck_assert_int_eq(mkdir(s->dir, 0755), 0);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    snprintf(k->clock, sizeof k->clock, "%s/clock", sub);
    ck_assert_msg(clockshim_create(k->clock, offset_us, 1.0, 1.0) == 0, "%s: %s", k->clock,
                  strerror(errno));
    char envf[1300];
    snprintf(envf, sizeof envf, "%s/start.env", sub);
    FILE *f = fopen(envf, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "LD_PRELOAD='%s'\nFENCE_CLOCKSHIM='%s'\n", built("tests/common/clockshim.so"),
            k->clock);
    ck_assert_int_eq(fclose(f), 0);
    char cmd[2400];
    snprintf(cmd, sizeof cmd, "'%s' start '%s' %s", tu_env("FENCE_TEST_REDIS_SET"), s->dir, kind);
    int rc = system(cmd);
    ck_assert_msg(rc == 0, "%s: exit %d", cmd, rc);
    char env[1100], line[128];
    snprintf(env, sizeof env, "%s/env", s->dir);
    f = fopen(env, "r");
    ck_assert_msg(f != NULL, "no %s", env);
    while (fgets(line, sizeof line, f) != NULL) {
        sscanf(line, "MASTER_PORT=%d", &s->master);
        sscanf(line, "REPLICA_PORT=%d", &s->replica);
        sscanf(line, "SENTINEL_PORT=%d", &s->sentinel);
    }
    fclose(f);
    ck_assert_int_gt(s->master, 0);
    snprintf(s->master_url, sizeof s->master_url, "redis://127.0.0.1:%d", s->master);
    snprintf(s->replica_url, sizeof s->replica_url, "redis://127.0.0.1:%d", s->replica);
}

/* The server's TIME minus the real wall clock, in µs. */
static int64_t time_offset_us(int port)
{
    redisContext *r = lu_connect(port);
    int64_t before = wall_us();
    int64_t t = (int64_t)lu_server_time_us(r);
    int64_t after = wall_us();
    redisFree(r);
    return t - (before + after) / 2;
}

/* The server on PORT says TIME = real + WANT_US, within 0.5 s. */
static void expect_offset(int port, int64_t want_us)
{
    int64_t got = time_offset_us(port);
    ck_assert_msg(llabs(got - want_us) < S / 2, "TIME on :%d is %+" PRId64 " µs off, wanted %+" PRId64,
                  port, got, want_us);
}

/* ---- tokens --------------------------------------------------------- */

static fence_client *open_jump(const char *url, int64_t jump_ms)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url;
    o.token_jump_ms = jump_ms;
    return lu_open_opts(&o);
}

/* A token of NAME (acquired and released); *behind_us (optional): how far
 * the server's clock was behind the counter's last issuer then. */
static uint64_t take_behind(fence_client *c, const char *name, int64_t *behind_us)
{
    fence_lease *l = lu_acquire_ok(c, name, 5000, 0);
    uint64_t t = fence_lease_token(l);
    if (behind_us != NULL) {
        *behind_us = fence_lease_clock_behind_us(l);
    }
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    return t;
}

static uint64_t take(fence_client *c, const char *name)
{
    return take_behind(c, name, NULL);
}

/* HGET KEY FIELD of NAME's counter as a number, 0 when missing. */
static uint64_t counter_field(redisContext *r, const char *name, const char *field)
{
    char key[600];
    lu_token_key(key, sizeof key, name);
    redisReply *rep = redisCommand(r, "HGET %s %s", key, field);
    ck_assert_msg(rep != NULL && (rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_NIL),
                  "HGET %s %s", key, field);
    uint64_t v = rep->type == REDIS_REPLY_STRING ? strtoull(rep->str, NULL, 10) : 0;
    freeReplyObject(rep);
    return v;
}

/* What a failover leaves (test_failover's lose_tokens, with a second name). */
typedef struct lost {
    uint64_t t3;        /* NAME's third token: the last one the replica has */
    int64_t t3_from, t3_to; /* the real wall clock (µs) before and after it */
    uint64_t last;      /* NAME's last token, issued while the replica was cut off */
    uint64_t only;      /* ONLY's token, issued only while the replica was cut off */
    int64_t only_from, only_to; /* the real wall clock (µs) before and after it */
    char only_holder[FENCE_HOLDER_LEN + 1]; /* its holder (the lease is left to die) */
} lost;

/* 3 tokens of NAME, replicated; the replica frozen and cut off; 5 more of
 * NAME and (ONLY not NULL) a lease of ONLY, kept; the master killed, the
 * replica continued; returns once the Sentinel has promoted it. */
static void lose_tokens(skew_set *k, fence_client *c, const char *name, const char *only, lost *out)
{
    lu_set *s = &k->s;
    memset(out, 0, sizeof *out);
    for (int i = 0; i < 3; i++) {
        out->t3_from = wall_us();
        out->t3 = take(c, name);
        out->t3_to = wall_us();
    }
    redisContext *m = lu_connect(s->master);
    lu_cmd_ok(m, "SET fence-test-sync 1");
    redisReply *w = redisCommand(m, "WAIT 1 2000");
    ck_assert_msg(w != NULL && w->type == REDIS_REPLY_INTEGER && w->integer == 1,
                  "tokens 1..3 were not replicated");
    freeReplyObject(w);
    lu_set_ctl(s, "replica", "pause");
    lu_cmd_ok(m, "CLIENT KILL TYPE replica");
    redisFree(m);
    for (int i = 0; i < 5; i++) {
        out->last = take(c, name);
    }
    if (only != NULL) {
        out->only_from = wall_us();
        fence_lease *l = lu_acquire_ok(c, only, 5000, 0); /* never released: lost with the master */
        out->only_to = wall_us();
        out->only = fence_lease_token(l);
        snprintf(out->only_holder, sizeof out->only_holder, "%s", fence_lease_holder(l));
    }
    lu_set_ctl(s, "master", "kill");
    lu_set_ctl(s, "replica", "resume");
    ck_assert_msg(lu_wait_master(s->replica, 20000), "the Sentinel did not promote the replica");
    redisContext *r = lu_connect(s->replica);
    char key[600];
    lu_token_key(key, sizeof key, name);
    char *n = lu_counter(r, key);
    ck_assert_msg(n != NULL && strtoull(n, NULL, 10) == out->t3,
                  "the promoted replica should have lost tokens 4..8 (n = %s)", n ? n : "-");
    free(n);
    if (only != NULL) {
        lu_token_key(key, sizeof key, only);
        n = lu_counter(r, key);
        ck_assert_msg(n == NULL, "the promoted replica has %s's counter (n = %s, issued %" PRIu64 ")", only, n, out->only);
    }
    redisFree(r);
}

/* ONLY had no counter on either server: the old master issued
 * now_old + J, the new one issues now_new + J = real + OFFSET + J, so the
 * new token minus the old is exactly OFFSET plus the real time between the
 * two issuances, whatever J: bounded here by the clock readings around
 * both (+-1 ms of slack for the µs roundings).  Returns the new token. */
static uint64_t only_token(fence_client *c, const char *only, const lost *t, int64_t offset_us,
                           fence_lease **out)
{
    int64_t from = wall_us();
    fence_lease *b = lu_acquire_ok(c, only, 5000, 0);
    int64_t to = wall_us();
    uint64_t ob = fence_lease_token(b);
    int64_t diff = (int64_t)(ob - t->only);
    int64_t lo = offset_us + (from - t->only_to) - 1000, hi = offset_us + (to - t->only_from) + 1000;
    fprintf(stderr, "skew: new master %+.1f s: a name issued only while cut off: old %" PRIu64
            ", new %" PRIu64 " (%+" PRId64 " µs; the issuances %.2f s apart)\n",
            (double)offset_us / S, t->only, ob, diff, (double)(to - t->only_to) / S);
    ck_assert_msg(diff >= lo && diff <= hi, "new - old = %" PRId64 " µs, expected %" PRId64 "..%" PRId64,
                  diff, lo, hi);
    ck_assert_int_eq(fence_lease_clock_behind_us(b), 0); /* no counter: nothing to compare */
    *out = b;
    return ob;
}

/* A gate that has seen NEW from the new holder then admits OLD from the
 * old holder when OLD > NEW: the older holder's write after the newer's. */
static void gate_admits_older(const char *res, uint64_t newer, const char *newer_holder,
                              uint64_t older, const char *older_holder)
{
    fence_gate *g = NULL;
    ck_assert_int_eq(fence_gate_open(&g, NULL), FENCE_OK);
    fence_gate_txn *tx = NULL;
    ck_assert_int_eq(fence_gate_begin(g, res, newer, newer_holder, &tx, NULL), FENCE_OK);
    ck_assert_int_eq(fence_gate_commit(tx), FENCE_OK); /* the new holder writes */
    int rc = fence_gate_begin(g, res, older, older_holder, &tx, NULL);
    ck_assert_msg(rc == FENCE_OK, "the old holder's write: %s", fence_status_name(rc));
    ck_assert_int_eq(fence_gate_commit(tx), FENCE_OK); /* and the old one after it: admitted */
    uint64_t mark = 0;
    ck_assert_int_eq(fence_gate_mark(g, res, &mark), FENCE_OK);
    ck_assert_uint_eq(mark, older);
    fence_gate_close(g);
}

/* One failover with the replica's clock OFFSET_US off: the next token of
 * a name the replica has must be above every token issued before; a name
 * issued only while it was cut off gets exactly OFFSET + the time between
 * (below the old token when the clock is behind by more than that, and
 * then a store admits the older holder after the newer). */
static void failover_next_above(int64_t offset_us)
{
    skew_set k;
    skew_start(&k, "sentinel", "replica", offset_us);
    expect_offset(k.s.replica, offset_us);
    expect_offset(k.s.master, 0);
    fence_client *c = lu_open_url(k.s.master_url);
    char name[256], only[256]; /* copies: tu_name() reuses its buffer */
    snprintf(name, sizeof name, "%s", tu_name("job"));
    snprintf(only, sizeof only, "%s", tu_name("only"));
    lost t;
    lose_tokens(&k, c, name, only, &t);
    fence_client_close(c);
    c = lu_open_url(k.s.replica_url);
    int64_t behind = -1, from = wall_us();
    uint64_t next = take_behind(c, name, &behind);
    int64_t to = wall_us();
    fprintf(stderr,
            "skew: new master %+.1f s: t3 %" PRIu64 ", last before %" PRIu64 " (t3 + %" PRIu64
            "), next %" PRIu64 " (last %+" PRId64 " µs), reported behind by %" PRId64
            " µs, %.2f s after t3\n",
            (double)offset_us / S, t.t3, t.last, t.last - t.t3, next, (int64_t)(next - t.last),
            behind, (double)(to - t.t3_to) / S);
    ck_assert_msg(next > t.last, "after the failover: %" PRIu64 " <= %" PRIu64 " (%" PRId64 " below)",
                  next, t.last, (int64_t)(t.last - next));
    /* The counter's t is the old master's TIME at t3 (the real clock); the
     * new master read real - |offset| when it issued: behind by
     * |offset| - (the time between), bounded by the clock readings around
     * both issuances (+-1 ms for the offset check's rounding). */
    int64_t lo = offset_us < 0 ? -offset_us - (to - t.t3_from) - 1000 : 0;
    int64_t hi = offset_us < 0 ? -offset_us - (from - t.t3_to) + 1000 : 0;
    if (lo < 0) {
        lo = 0;
    }
    if (hi < 0) {
        hi = 0;
    }
    ck_assert_msg(behind >= lo && behind <= hi, "behind by %" PRId64 " µs, expected %" PRId64
                  "..%" PRId64, behind, lo, hi);
    fence_metrics mt = lu_metrics(c);
    ck_assert_uint_eq(mt.clock_behind, behind > 0 ? 1 : 0);
    ck_assert_int_eq(mt.clock_behind_max_us, behind);
    fence_lease *b = NULL;
    uint64_t ob = only_token(c, only, &t, offset_us, &b);
    if (ob < t.only) {
        gate_admits_older(only, ob, fence_lease_holder(b), t.only, t.only_holder);
    }
    EXPECT_RC(fence_release(b), FENCE_OK, c);
    fence_client_close(c);
    lu_set_stop(&k.s);
}

/* New master 3 s behind, under the default jump of 10 s: NAME above and
 * the lag reported; ONLY (issued only while cut off) still below, since
 * the failover takes less than 3 s. */
START_TEST(behind_less_than_jump)
{
    failover_next_above(-3 * S);
}
END_TEST

/* New master 30 s ahead: tokens jump further, still above. */
START_TEST(ahead)
{
    failover_next_above(30 * S);
}
END_TEST

/* New master 30 s behind, three times the jump.  NAME, whose counter the
 * replica has: max(n + 1, now) + J is above every old token (J > the 5
 * lost), and the lag is reported, or refused with clock_behind_limit_ms.
 * ONLY, issued only while the replica was cut off: the promoted server
 * has no counter, so it issues from its own clock plus J, as the old
 * master had: ~29.6 s below the old token, and a store admits the older
 * holder's write after the newer holder's (nothing reports it: no
 * counter, no t).  For such a name the margin is not the jump but the
 * time between the two issuances (behind_less_than_jump shows it at 3 s). */
START_TEST(behind_more_than_jump)
{
    skew_set k;
    skew_start(&k, "sentinel", "replica", -30 * S);
    expect_offset(k.s.replica, -30 * S);
    fence_client *c = lu_open_url(k.s.master_url);
    char name[256], only[256]; /* copies: tu_name() reuses its buffer */
    snprintf(name, sizeof name, "%s", tu_name("job"));
    snprintf(only, sizeof only, "%s", tu_name("only"));
    lost t;
    lose_tokens(&k, c, name, only, &t);

    /* A client with clock_behind_limit_ms 1000 is refused, and nothing is
     * written: the counter keeps n = t3 and the old master's t, no owner key. */
    redisContext *r = lu_connect(k.s.replica);
    uint64_t t_before = counter_field(r, name, "t");
    ck_assert_msg(t_before >= (uint64_t)t.t3_from && t_before <= (uint64_t)t.t3_to,
                  "the counter's t %" PRIu64 " is not the old master's TIME at t3", t_before);
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = k.s.replica_url;
    o.clock_behind_limit_ms = 1000;
    fence_client *cl = lu_open_opts(&o);
    fence_lease *l = NULL;
    EXPECT_RC(fence_try_acquire(cl, name, 5000, &l), FENCE_ECLOCK, cl);
    ck_assert_ptr_null(l);
    fprintf(stderr, "skew: new master -30 s, clock_behind_limit_ms 1000: %s\n",
            fence_client_errmsg(cl));
    ck_assert_uint_eq(counter_field(r, name, "n"), t.t3);
    ck_assert_uint_eq(counter_field(r, name, "t"), t_before);
    char okey[600];
    lu_owner_key(okey, sizeof okey, name);
    ck_assert_int_eq(lu_rexists(r, okey), 0);
    fence_metrics ml = lu_metrics(cl);
    ck_assert_uint_eq(ml.clock_behind, 1); /* the refusal counts */
    ck_assert_int_gt(ml.clock_behind_max_us, 25 * S);
    fence_client_close(cl);
    redisFree(r);

    /* The default (no limit) issues above every old token and reports it. */
    fence_client *c2 = lu_open_url(k.s.replica_url);
    int64_t behind = -1;
    uint64_t next = take_behind(c2, name, &behind);
    ck_assert_msg(next > t.last, "the replica's own counter: %" PRIu64 " <= %" PRIu64 " (%" PRId64
                  " below)", next, t.last, (int64_t)(t.last - next));
    ck_assert_msg(behind > 25 * S && behind < 30 * S, "reported behind by %" PRId64 " µs", behind);
    fence_metrics m2 = lu_metrics(c2);
    fprintf(stderr, "skew: new master -30 s: %s reported behind by %" PRId64 " µs; metrics "
            "clock_behind %" PRIu64 ", max %" PRId64 " µs\n", "job", behind, m2.clock_behind,
            m2.clock_behind_max_us);
    ck_assert_uint_eq(m2.clock_behind, 1);
    ck_assert_int_eq(m2.clock_behind_max_us, behind);
    fprintf(stderr, "skew: new master -30 s: %s t3 %" PRIu64 ", last %" PRIu64 ", next %" PRIu64
            " (last %+" PRId64 " µs)\n", "job", t.t3, t.last, next, (int64_t)(next - t.last));
    /* The name the replica had no counter of: below the old token (the
     * failover took far less than 30 s), and the gate admits the older
     * holder after the newer. */
    fence_lease *b = NULL;
    uint64_t ob = only_token(c2, only, &t, -30 * S, &b);
    ck_assert_msg(ob < t.only, "only-cut-off name: %" PRIu64 " is not below %" PRIu64, ob, t.only);
    gate_admits_older(only, ob, fence_lease_holder(b), t.only, t.only_holder);
    EXPECT_RC(fence_release(b), FENCE_OK, c2);
    fence_client_close(c2);
    fence_client_close(c);
    lu_set_stop(&k.s);
}
END_TEST

/* ---- a live master's clock stepped ------------------------------------- */

/* The shim itself: redis-server starts and listens under it (redis-set
 * waits for that), TIME shows the offset, a step shows at once, also
 * across a restart by scripts/redis-ctl (start.env read again). */
START_TEST(shim_moves_server_time)
{
    skew_set k;
    skew_start(&k, "solo", "master", 7 * S);
    expect_offset(k.s.master, 7 * S);
    ck_assert_int_eq(clockshim_step(k.clock, -10 * S), 0);
    ck_assert_int_eq(clockshim_wall_offset_us(k.clock), -3 * S);
    expect_offset(k.s.master, -3 * S);
    lu_set_ctl(&k.s, "master", "restart");
    expect_offset(k.s.master, -3 * S);
    lu_set_stop(&k.s);
}
END_TEST

/* Stepped back 30 s: the counter goes on at n + 1 (the same server
 * incarnation: no jump); with a 1 ms jump the tokens had been following
 * the clock, so the step is exactly what would have made them go down. */
START_TEST(live_step_back)
{
    skew_set k;
    skew_start(&k, "solo", "master", 0);
    expect_offset(k.s.master, 0);
    fence_client *c = open_jump(k.s.master_url, 1);
    const char *name = tu_name("step");
    take(c, name);
    tu_sleep_ms(5);
    uint64_t a = take(c, name);
    uint64_t now = (uint64_t)wall_us();
    ck_assert_msg(a + S / 2 > now && a < now + S / 2, "token %" PRIu64 " should follow the clock (%" PRIu64
                  ")", a, now);
    ck_assert_int_eq(clockshim_step(k.clock, -30 * S), 0);
    expect_offset(k.s.master, -30 * S);
    int64_t behind = -1, behind2 = -1;
    uint64_t b = take_behind(c, name, &behind), b2 = take_behind(c, name, &behind2);
    fprintf(stderr, "skew: live master stepped -30 s: before %" PRIu64 ", after %" PRIu64 ", %" PRIu64
            "; reported behind by %" PRId64 " µs, then %" PRId64 " µs\n", a, b, b2, behind,
            behind2);
    ck_assert_uint_eq(b, a + 1);
    ck_assert_uint_eq(b2, a + 2);
    /* The first token after the step sees the counter's t ahead; it writes
     * its own (stepped) TIME as t, so the next one no longer does. */
    ck_assert_msg(behind > 29 * S && behind <= 30 * S, "behind by %" PRId64 " µs", behind);
    ck_assert_int_eq(behind2, 0);
    fence_metrics mt = lu_metrics(c);
    ck_assert_uint_eq(mt.clock_behind, 1);
    ck_assert_int_eq(mt.clock_behind_max_us, behind);
    fence_client_close(c);
    lu_set_stop(&k.s);
}
END_TEST

/* Redis expires keys by its wall clock: stepping a live master moves every
 * lease's end.  Back 30 s: a held lease's key lives 30 s longer (the
 * holder's own validity is unchanged: it is lost locally first, as
 * always).  Forward past the TTL: the key is gone at once while the
 * holder still counts its lease valid; the next holder's token is n + 1,
 * above the first holder's, so a store refuses the first holder from then
 * on. */
START_TEST(live_step_moves_expiry)
{
    skew_set k;
    skew_start(&k, "solo", "master", 0);
    fence_client *c = lu_open_url(k.s.master_url);
    redisContext *r = lu_connect(k.s.master);
    const char *name = tu_name("ttl");
    char okey[600];
    lu_owner_key(okey, sizeof okey, name);
    fence_lease *l = lu_acquire_cb(c, name, 2000, 0, 1, NULL);
    ck_assert_int_eq(clockshim_step(k.clock, -30 * S), 0);
    long long pttl = lu_rpttl(r, okey);
    fprintf(stderr, "skew: live master stepped -30 s: a 2 s lease's PTTL is now %lld ms\n", pttl);
    ck_assert_msg(pttl > 30000 && pttl <= 32000, "PTTL %lld", pttl);
    EXPECT_RC(fence_release(l), FENCE_OK, c);

    l = lu_acquire_cb(c, name, 2000, 0, 1, NULL);
    uint64_t a = fence_lease_token(l);
    ck_assert_int_eq(clockshim_step(k.clock, 5 * S), 0);
    ck_assert_int_eq(lu_rexists(r, okey), 0); /* expired by the step */
    int64_t valid = fence_lease_valid_ms(l);
    ck_assert_int_gt(valid, 1000); /* the holder cannot know */
    fence_client *c2 = lu_open_url(k.s.master_url);
    fence_lease *l2 = lu_acquire_ok(c2, name, 2000, 0);
    uint64_t b = fence_lease_token(l2);
    fprintf(stderr, "skew: live master stepped +5 s: lease of 2 s gone at once (holder: %" PRId64
            " ms valid); first token %" PRIu64 ", second %" PRIu64 "\n", valid, a, b);
    ck_assert_uint_eq(b, a + 1);
    fence_gate *g = NULL;
    ck_assert_int_eq(fence_gate_open(&g, NULL), FENCE_OK);
    fence_gate_txn *tx = NULL;
    ck_assert_int_eq(fence_gate_begin(g, name, b, fence_lease_holder(l2), &tx, NULL), FENCE_OK);
    ck_assert_int_eq(fence_gate_commit(tx), FENCE_OK);
    fence_stale st;
    ck_assert_int_eq(fence_gate_begin(g, name, a, fence_lease_holder(l), &tx, &st), FENCE_STALE);
    ck_assert_int_eq(st.reason, FENCE_STALE_OLDER);
    fence_gate_close(g);
    EXPECT_RC(fence_release(l), FENCE_LOST, c);
    EXPECT_RC(fence_release(l2), FENCE_OK, c2);
    redisFree(r);
    fence_client_close(c2);
    fence_client_close(c);
    lu_set_stop(&k.s);
}
END_TEST

/* ---- a client whose clock runs fast or slow ---------------------------- */

typedef struct child {
    pid_t pid;
    int fd; /* its stdout */
} child;

/* skewclient on the test Redis, its CLOCK_MONOTONIC at RATE (the control
 * file in DIR). */
static child skewclient_spawn(const char *name, int64_t ttl, double rate, const char *clock)
{
    ck_assert_int_eq(clockshim_create(clock, 0, 1.0, rate), 0);
    const char *path = built("tests/lease/skewclient");
    char ttl_s[32], pre[1200], shim[1200], asan[1200];
    snprintf(ttl_s, sizeof ttl_s, "%" PRId64, ttl);
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s", built("tests/common/clockshim.so"));
    snprintf(shim, sizeof shim, CLOCKSHIM_ENV "=%s", clock);
    char *argv[] = {(char *)(uintptr_t)path, (char *)(uintptr_t)tu_env("FENCE_TEST_REDIS_PORT"),
                    (char *)(uintptr_t)name, ttl_s, NULL};
    /* The environment plus the shim (and, in an ASan build, let the
     * preloaded shim come before ASan's runtime). */
    size_t n = 0;
    while (environ[n] != NULL) {
        n++;
    }
    char **env = calloc(n + 4, sizeof *env);
    ck_assert_ptr_nonnull(env);
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0 && strncmp(environ[i], "ASAN_OPTIONS=", 13) != 0) {
            env[j++] = environ[i];
        }
    }
    env[j++] = pre;
    env[j++] = shim;
    const char *ao = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof asan, "ASAN_OPTIONS=%s%sverify_asan_link_order=0", ao != NULL ? ao : "",
             ao != NULL && ao[0] != '\0' ? ":" : "");
    env[j++] = asan;
    env[j] = NULL;
    int p[2];
    ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
    child h = {0, p[0]};
    int err = posix_spawn(&h.pid, path, &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    free(env);
    ck_assert_msg(err == 0, "posix_spawn %s: %s", path, strerror(err));
    return h;
}

/* One line of the child's stdout, waiting up to TIMEOUT_MS; "" on timeout
 * or end of file. */
static void child_line(child *h, char *buf, size_t n, int64_t timeout_ms)
{
    size_t len = 0;
    int64_t deadline = tu_now_ms() + timeout_ms;
    buf[0] = '\0';
    while (len + 1 < n) {
        int64_t left = deadline - tu_now_ms();
        struct pollfd pfd = {h->fd, POLLIN, 0};
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0) {
            break;
        }
        char ch;
        if (read(h->fd, &ch, 1) != 1 || ch == '\n') {
            break;
        }
        buf[len++] = ch;
        buf[len] = '\0';
    }
}

static int child_wait(child *h)
{
    int st = 0;
    ck_assert_int_eq(waitpid(h->pid, &st, 0), h->pid);
    close(h->fd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

typedef struct verdict {
    uint64_t token;
    long overlaps;
    int64_t overlap_ms, after_ms;
} verdict;

/* Run skewclient to its end (no other holder meanwhile). */
static verdict run_skewed(double rate, int64_t ttl)
{
    char clock[1100];
    snprintf(clock, sizeof clock, "%s/%s.clock", tu_env("FENCE_TEST_SPAWN_DIR"), tu_name("client"));
    const char *name = tu_name("rate");
    child h = skewclient_spawn(name, ttl, rate, clock);
    verdict v = {0, 0, 0, 0};
    char line[256];
    child_line(&h, line, sizeof line, 10000);
    ck_assert_msg(sscanf(line, "token %" SCNu64, &v.token) == 1, "skewclient said \"%s\"", line);
    child_line(&h, line, sizeof line, 30000);
    ck_assert_msg(sscanf(line, "lost overlaps=%ld overlap_ms=%" SCNd64 " after_ms=%" SCNd64,
                         &v.overlaps, &v.overlap_ms, &v.after_ms) == 3,
                  "skewclient said \"%s\"", line);
    ck_assert_int_eq(child_wait(&h), 0);
    unlink(clock);
    fprintf(stderr, "skew: client clock at %.3fx, TTL %" PRId64 " ms: lost after %" PRId64
            " ms real, %ld samples valid with the key gone\n", rate, ttl, v.after_ms, v.overlaps);
    return v;
}

/* Within the 1% the validity allows for (1% of the TTL + 2 ms): at 0.99x
 * and 1.01x the library reports the lease lost with the key still there
 * (no sample saw the key gone while the lease was valid). */
START_TEST(client_rate_within_one_percent)
{
    const int64_t ttl = 600;
    verdict slow = run_skewed(0.99, ttl), fast = run_skewed(1.01, ttl);
    ck_assert_int_eq(slow.overlaps, 0);
    ck_assert_int_eq(fast.overlaps, 0);
    ck_assert_int_le(slow.after_ms, ttl + 500); /* it did end, about on time */
    ck_assert_int_le(fast.after_ms, ttl + 500);
}
END_TEST

/* Far beyond it, a clock at half speed: the library keeps the lease valid
 * for about twice the TTL; once Redis has expired the key another client
 * takes it (a higher token) while the first still counts its lease
 * valid: two holders.  The store keeps them apart by the tokens: the
 * first holder's write is refused after the second's. */
START_TEST(client_rate_half)
{
    const int64_t ttl = 600;
    char clock[1100];
    snprintf(clock, sizeof clock, "%s/%s.clock", tu_env("FENCE_TEST_SPAWN_DIR"), tu_name("client"));
    const char *name = tu_name("rate");
    child h = skewclient_spawn(name, ttl, 0.5, clock);
    char line[256];
    uint64_t a = 0;
    child_line(&h, line, sizeof line, 10000);
    ck_assert_msg(sscanf(line, "token %" SCNu64, &a) == 1, "skewclient said \"%s\"", line);
    int64_t v0 = 0;
    child_line(&h, line, sizeof line, 10000);
    ck_assert_msg(sscanf(line, "overlap %" SCNd64, &v0) == 1, "skewclient said \"%s\"", line);
    fence_client *c = lu_open_client();
    fence_lease *l = lu_acquire_ok(c, name, 5000, 0); /* the key is gone: ours now */
    uint64_t b = fence_lease_token(l);
    ck_assert_uint_gt(b, a);
    fence_gate *g = NULL;
    ck_assert_int_eq(fence_gate_open(&g, NULL), FENCE_OK);
    fence_gate_txn *tx = NULL;
    ck_assert_int_eq(fence_gate_begin(g, name, b, fence_lease_holder(l), &tx, NULL), FENCE_OK);
    ck_assert_int_eq(fence_gate_commit(tx), FENCE_OK);
    ck_assert_int_eq(fence_gate_begin(g, name, a, NULL, &tx, NULL), FENCE_STALE);
    fence_gate_close(g);
    verdict v;
    child_line(&h, line, sizeof line, 30000);
    ck_assert_msg(sscanf(line, "lost overlaps=%ld overlap_ms=%" SCNd64 " after_ms=%" SCNd64,
                         &v.overlaps, &v.overlap_ms, &v.after_ms) == 3,
                  "skewclient said \"%s\"", line);
    ck_assert_int_eq(child_wait(&h), 0);
    unlink(clock);
    fprintf(stderr, "skew: client clock at 0.5x, TTL %" PRId64 " ms: key gone with %" PRId64
            " ms still valid to the client; lost after %" PRId64 " ms real, valid with the key "
            "gone or taken for %" PRId64 " ms; tokens %" PRIu64 " then %" PRIu64 "\n",
            ttl, v0, v.after_ms, v.overlap_ms, a, b);
    ck_assert_int_gt(v.overlap_ms, ttl / 3); /* ~ttl: 2 x 0.99 ttl - ttl */
    ck_assert_int_gt(v.after_ms, ttl * 3 / 2);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    fence_client_close(c);
}
END_TEST

static Suite *skew_suite(void)
{
    Suite *s = suite_create("skew");
    TCase *tc = tcase_create("failover");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, behind_less_than_jump);
    tcase_add_test(tc, behind_more_than_jump);
    tcase_add_test(tc, ahead);
    suite_add_tcase(s, tc);
    tc = tcase_create("live");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, shim_moves_server_time);
    tcase_add_test(tc, live_step_back);
    tcase_add_test(tc, live_step_moves_expiry);
    suite_add_tcase(s, tc);
    tc = tcase_create("client");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, client_rate_within_one_percent);
    tcase_add_test(tc, client_rate_half);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(skew_suite());
}
