/*
 * test_tokens.c -- issuance (issue 8): clock tokens that never repeat or
 * go back when the counter is lost (DEL, FLUSHALL, a restart without
 * persistence, eviction), dense tokens that do (the mechanism, shown), the
 * migration of a fence 0.1 string counter, the eviction-policy check (every
 * evicting policy refused; why volatile-* too: it evicts a held lease), the
 * token mode a counter records (the other mode refused), the holder id, and
 * every new option's bad values.  Real redis-server: the
 * shared one, or one of the test's own (setutil.h) where the test
 * reconfigures, flushes or restarts it.
 */
#include "casetable.h"
#include "setutil.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define TWO53 9007199254740992ULL

static fence_client *open_on(const char *url, int mode, int64_t jump_ms, int allow_eviction)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url;
    o.token_mode = mode;
    o.token_jump_ms = jump_ms;
    o.allow_eviction = allow_eviction;
    return lu_open_opts(&o);
}

static uint64_t take(fence_client *c, const char *name)
{
    fence_lease *l = lu_acquire_ok(c, name, 5000, 0);
    uint64_t t = fence_lease_token(l);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    return t;
}

/* Clock tokens: microseconds of Redis's clock; the first on a new counter
 * is at least the clock plus the jump; the counter records the server's
 * run_id; the next one (same server, within the jump) is last + 1. */
START_TEST(clock_tokens_from_server_clock)
{
    redisContext *r = tu_redis();
    fence_client *c = open_on(tu_env("FENCE_TEST_REDIS_URL"), FENCE_TOKENS_CLOCK, 3000, 0);
    const char *nm = tu_name("clock");
    char tk[600], run[LU_INCARNATION_LEN + 1];
    lu_token_key(tk, sizeof tk, nm);
    lu_incarnation(r, run);
    uint64_t before = lu_server_time_us(r);
    uint64_t t1 = take(c, nm);
    uint64_t after = lu_server_time_us(r);
    ck_assert_msg(t1 >= before + 3000000 && t1 <= after + 3000000,
                  "first token %" PRIu64 " not clock+jump (%" PRIu64 "..%" PRIu64 ")", t1,
                  before + 3000000, after + 3000000);
    ck_assert_uint_lt(t1, TWO53);
    redisReply *h = redisCommand(r, "HGET %s run", tk);
    ck_assert_msg(h != NULL && h->type == REDIS_REPLY_STRING && strcmp(h->str, run) == 0,
                  "counter's run is not the server's run_id:master_replid %s", run);
    freeReplyObject(h);
    ck_assert_uint_eq(take(c, nm), t1 + 1); /* ahead of the clock: last + 1, no jump */
    redisFree(r);
    fence_client_close(c);
}
END_TEST

START_TEST(dense_tokens_are_consecutive)
{
    redisContext *r = tu_redis();
    fence_client *c = lu_open_dense();
    const char *nm = tu_name("dense");
    char tk[600];
    lu_token_key(tk, sizeof tk, nm);
    for (uint64_t i = 1; i <= 3; i++) {
        ck_assert_uint_eq(take(c, nm), i);
    }
    lu_expect_counter(r, tk, "3");
    redisFree(r);
    fence_client_close(c);
}
END_TEST

/* The counter deleted behind our back: clock tokens jump past the clock;
 * dense tokens start again at 1 (the repeat this issue is about). */
START_TEST(counter_deleted)
{
    redisContext *r = tu_redis();
    fence_client *c = open_on(tu_env("FENCE_TEST_REDIS_URL"), FENCE_TOKENS_CLOCK, 2000, 0);
    fence_client *d = lu_open_dense();
    char nm[256], dn[256], tk[600], dk[600];
    snprintf(nm, sizeof nm, "%s", tu_name("del"));
    snprintf(dn, sizeof dn, "%s", tu_name("deld"));
    lu_token_key(tk, sizeof tk, nm);
    lu_token_key(dk, sizeof dk, dn);
    uint64_t t1 = take(c, nm);
    ck_assert_int_eq(lu_rdel(r, tk), 1);
    uint64_t now = lu_server_time_us(r);
    uint64_t t2 = take(c, nm);
    ck_assert_msg(t2 > t1 && t2 >= now + 2000000, "after DEL: %" PRIu64 " (before %" PRIu64
                  ", clock %" PRIu64 ")", t2, t1, now);
    ck_assert_uint_eq(take(d, dn), 1);
    ck_assert_uint_eq(take(d, dn), 2);
    ck_assert_int_eq(lu_rdel(r, dk), 1);
    ck_assert_uint_eq(take(d, dn), 1); /* dense: the repeat */
    redisFree(r);
    fence_client_close(c);
    fence_client_close(d);
}
END_TEST

/* FLUSHALL and a restart without persistence, on a Redis of our own. */
START_TEST(flushall_and_restart)
{
    lu_set s;
    lu_set_start(&s, "solo", NULL);
    fence_client *c = open_on(s.master_url, FENCE_TOKENS_CLOCK, 0, 0);
    fence_client *d = lu_open_dense_url(s.master_url);
    redisContext *r = lu_connect(s.master);
    uint64_t t1 = take(c, "n");
    ck_assert_uint_eq(take(d, "dn"), 1);
    lu_cmd_ok(r, "FLUSHALL");
    uint64_t t2 = take(c, "n");
    ck_assert_msg(t2 > t1, "after FLUSHALL %" PRIu64 " <= %" PRIu64, t2, t1);
    ck_assert_uint_eq(take(d, "dn"), 1); /* dense: repeated */
    redisFree(r);
    lu_set_ctl(&s, "master", "restart"); /* save "", appendonly no: all lost */
    fence_lease *l = lu_acquire_after_restart(c, "n", 5000);
    uint64_t t3 = fence_lease_token(l);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    ck_assert_msg(t3 > t2, "after a restart %" PRIu64 " <= %" PRIu64, t3, t2);
    l = lu_acquire_after_restart(d, "dn", 5000);
    ck_assert_uint_eq(fence_lease_token(l), 1); /* dense: repeated */
    EXPECT_RC(fence_release(l), FENCE_OK, d);
    fence_client_close(c);
    fence_client_close(d);
    lu_set_stop(&s);
}
END_TEST

/* Fill r's Redis (a small maxmemory) until KEY is evicted, with fillers
 * that have a TTL (volatile keys) or not. */
static void evict(redisContext *r, const char *key, int volatile_fillers)
{
    lu_cmd_ok(r, "CONFIG SET maxmemory 3mb");
    char val[1024];
    memset(val, 'x', sizeof val - 1);
    val[sizeof val - 1] = '\0';
    for (int batch = 0; batch < 200 && lu_rexists(r, key); batch++) {
        for (int i = 0; i < 500; i++) {
            redisAppendCommand(r, volatile_fillers ? "SET filler:%d:%d %s PX 600000"
                                                   : "SET filler:%d:%d %s", batch, i, val);
        }
        for (int i = 0; i < 500; i++) {
            redisReply *rep = NULL;
            ck_assert_int_eq(redisGetReply(r, (void **)&rep), REDIS_OK);
            freeReplyObject(rep);
        }
    }
    ck_assert_msg(!lu_rexists(r, key), "%s was never evicted", key);
    lu_cmd_ok(r, "CONFIG SET maxmemory 0");
}

/* Every evicting maxmemory-policy is refused before the first token
 * (FENCE_ECONFIG naming the policy, nothing written); noeviction issues.
 * One row per policy, on a server of the test's own. */
static const struct {
    const char *name;
    const char *policy;
    int refused;
} policies[] = {
    {"allkeys-lru", "allkeys-lru", 1},         {"allkeys-lfu", "allkeys-lfu", 1},
    {"allkeys-random", "allkeys-random", 1},   {"volatile-lru", "volatile-lru", 1},
    {"volatile-lfu", "volatile-lfu", 1},       {"volatile-random", "volatile-random", 1},
    {"volatile-ttl", "volatile-ttl", 1},       {"noeviction", "noeviction", 0},
};

START_TEST(eviction_policy)
{
    lu_set s;
    char conf[64];
    snprintf(conf, sizeof conf, "maxmemory-policy %s", policies[_i].policy);
    lu_set_start(&s, "solo", conf);
    redisContext *r = lu_connect(s.master);
    fence_client *c = open_on(s.master_url, FENCE_TOKENS_CLOCK, 0, 0);
    fence_lease *l = NULL;
    if (policies[_i].refused) {
        EXPECT_RC(fence_try_acquire(c, "e", 5000, &l), FENCE_ECONFIG, c);
        ck_assert_ptr_null(l);
        ck_assert_ptr_nonnull(strstr(fence_client_errmsg(c), policies[_i].policy));
        ck_assert_ptr_nonnull(strstr(fence_client_errmsg(c), "allow_eviction"));
        ck_assert_int_eq(lu_rexists(r, "fence:{e}"), 0);
        ck_assert_int_eq(lu_rexists(r, "fence:{e}:token"), 0);
        /* Checked again on the next call: fine once the policy is. */
        lu_cmd_ok(r, "CONFIG SET maxmemory-policy noeviction");
    }
    take(c, "e");
    fence_metrics m = lu_metrics(c);
    ck_assert_int_eq(m.redis_persistence, 0); /* save "", no AOF */
    redisFree(r);
    fence_client_close(c);
    lu_set_stop(&s);
}
END_TEST

/* Why volatile-* is refused: a held lease's owner key always has a TTL, so
 * such a policy evicts exactly it -- with allow_eviction a second client
 * takes the lease while the first still holds it (fencing still holds: its
 * token is higher).  And a counter evicted under allkeys-lru is survived:
 * clock tokens still go up. */
START_TEST(eviction_takes_a_held_lease)
{
    lu_set s;
    lu_set_start(&s, "solo", "maxmemory-policy volatile-lru");
    redisContext *r = lu_connect(s.master);
    fence_client *a = open_on(s.master_url, FENCE_TOKENS_CLOCK, 0, 1);
    fence_client *b = open_on(s.master_url, FENCE_TOKENS_CLOCK, 0, 1);
    fence_lease *la = lu_acquire_ok(a, "v", 60000, 0);
    evict(r, "fence:{v}", 1); /* volatile fillers: the held lease's owner key goes */
    lu_cmd_ok(r, "FLUSHDB"); /* the fillers; the counter is gone too, or not */
    ck_assert_int_eq(fence_lease_lost(la), 0); /* a still counts itself the holder */
    fence_lease *lb = lu_acquire_ok(b, "v", 60000, 0); /* ... and b holds it as well */
    ck_assert_uint_gt(fence_lease_token(lb), fence_lease_token(la));
    EXPECT_RC(fence_release(lb), FENCE_OK, b);
    fence_release(la);

    lu_cmd_ok(r, "CONFIG SET maxmemory-policy allkeys-lru");
    uint64_t t1 = take(a, "e");
    evict(r, "fence:{e}:token", 0);
    uint64_t t2 = take(a, "e");
    ck_assert_msg(t2 > t1, "after eviction %" PRIu64 " <= %" PRIu64, t2, t1);
    redisFree(r);
    fence_client_close(a);
    fence_client_close(b);
    lu_set_stop(&s);
}
END_TEST

/* A counter records its token mode (field m); a client of the other mode
 * is refused (FENCE_ECONFIG, nothing written), never continues it.  A
 * counter written by the previous scripts (no m) is a clock counter when it
 * has t or a non-empty run, else it takes the mode of its next issue. */
START_TEST(token_mode_recorded)
{
    redisContext *r = tu_redis();
    fence_client *clk = lu_open_client();
    fence_client *den = lu_open_dense();
    char tk[600];
    const char *nm = tu_name("modes-c");
    lu_token_key(tk, sizeof tk, nm);
    uint64_t t1 = take(clk, nm);
    redisReply *m = redisCommand(r, "HGET %s m", tk);
    ck_assert_str_eq(m->str, "clock");
    freeReplyObject(m);
    fence_lease *l = NULL;
    EXPECT_RC(fence_try_acquire(den, nm, 5000, &l), FENCE_ECONFIG, den);
    ck_assert_ptr_null(l);
    ck_assert_ptr_nonnull(strstr(fence_client_errmsg(den), "clock (FENCE_TOKENS_CLOCK)"));
    uint64_t last = 0;
    EXPECT_RC(fence_token_last(clk, nm, &last), FENCE_OK, clk);
    ck_assert_uint_eq(last, t1); /* nothing written */
    ck_assert_int_gt(lu_rpttl(r, tk), 0); /* its expiry kept too */

    nm = tu_name("modes-d");
    lu_token_key(tk, sizeof tk, nm);
    ck_assert_uint_eq(take(den, nm), 1);
    EXPECT_RC(fence_try_acquire(clk, nm, 5000, &l), FENCE_ECONFIG, clk);
    ck_assert_ptr_nonnull(strstr(fence_client_errmsg(clk), "dense (FENCE_TOKENS_DENSE)"));
    ck_assert_uint_eq(take(den, nm), 2);

    /* The previous scripts' counters: with t (clock), with n only (none). */
    nm = tu_name("modes-old-c");
    lu_token_key(tk, sizeof tk, nm);
    lu_cmd_ok(r, "HSET %s n 1000 run x:y t 1000", tk);
    EXPECT_RC(fence_try_acquire(den, nm, 5000, &l), FENCE_ECONFIG, den);
    ck_assert_uint_gt(take(clk, nm), 1000);
    m = redisCommand(r, "HGET %s m", tk);
    ck_assert_str_eq(m->str, "clock");
    freeReplyObject(m);
    nm = tu_name("modes-old-d");
    lu_token_key(tk, sizeof tk, nm);
    lu_cmd_ok(r, "HSET %s n 7", tk);
    ck_assert_uint_eq(take(den, nm), 8);
    m = redisCommand(r, "HGET %s m", tk);
    ck_assert_str_eq(m->str, "dense");
    freeReplyObject(m);
    EXPECT_RC(fence_try_acquire(clk, nm, 5000, &l), FENCE_ECONFIG, clk);
    fence_client_close(clk);
    fence_client_close(den);
    redisFree(r);
}
END_TEST

/* What fence 0.1's acquire.lua did: INCR the counter. */
static const char old_acquire[] =
    "local v = redis.call('GET', KEYS[1]) if v then return {0, 0} end "
    "local n = redis.call('INCR', KEYS[2]) "
    "redis.call('SET', KEYS[1], ARGV[1] .. ':' .. n, 'PX', ARGV[2]) return {1, n}";

/* A fence 0.1 string counter is migrated to the hash, atomically, by the
 * first acquire or raise; inspect reads it as it is; a 0.1 client then
 * fails on the hash (WRONGTYPE) instead of issuing a token. */
START_TEST(migrate_string_counter)
{
    redisContext *r = tu_redis();
    fence_client *c = lu_open_client();
    fence_client *d = lu_open_dense();
    char nm[256], dn[256], rn[256], tk[600], dk[600], rk[600], ok[600];
    snprintf(nm, sizeof nm, "%s", tu_name("mig"));
    snprintf(dn, sizeof dn, "%s", tu_name("migd"));
    snprintf(rn, sizeof rn, "%s", tu_name("migr"));
    lu_token_key(tk, sizeof tk, nm);
    lu_token_key(dk, sizeof dk, dn);
    lu_token_key(rk, sizeof rk, rn);
    lu_owner_key(ok, sizeof ok, nm);
    lu_cmd_ok(r, "SET %s 41", tk);
    lu_cmd_ok(r, "SET %s 41", dk);
    lu_cmd_ok(r, "SET %s 41", rk);
    uint64_t last = 0;
    EXPECT_RC(fence_token_last(c, nm, &last), FENCE_OK, c);
    ck_assert_uint_eq(last, 41);
    uint64_t now = lu_server_time_us(r);
    uint64_t t = take(c, nm);
    ck_assert_msg(t >= now + FENCE_TOKEN_JUMP_DEFAULT_MS * 1000ULL, "migrated: %" PRIu64, t);
    ck_assert_uint_eq(take(d, dn), 42);
    EXPECT_RC(fence_token_raise(c, rn, 7, &last), FENCE_OK, c);
    ck_assert_uint_eq(last, 41);
    ck_assert_int_eq(lu_rint(r, "HLEN", rk), 2); /* n and run: a hash now */
    redisReply *rep = redisCommand(r, "EVAL %s 2 %s %s %s %s", old_acquire, ok, tk,
                                   "0123456789abcdef0123456789abcdef", "5000");
    ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_ERROR &&
                  strstr(rep->str, "WRONGTYPE") != NULL, "a 0.1 client was not refused");
    freeReplyObject(rep);
    ck_assert_int_eq(lu_rexists(r, ok), 0);
    lu_cmd_ok(r, "SET %s junk", dk);
    fence_lease *l = NULL;
    EXPECT_RC(fence_try_acquire(d, dn, 1000, &l), FENCE_EPROTO, d);
    ck_assert_ptr_nonnull(strstr(fence_client_errmsg(d), "not a fence token counter"));
    redisFree(r);
    fence_client_close(c);
    fence_client_close(d);
}
END_TEST

/* fence_token_raise with clock tokens: below the clock it changes nothing
 * that matters (the next token is from the clock); past the clock tokens
 * are dense from there. */
START_TEST(raise_with_clock_tokens)
{
    redisContext *r = tu_redis();
    fence_client *c = lu_open_client();
    const char *nm = tu_name("raise");
    uint64_t got = 0;
    EXPECT_RC(fence_token_raise(c, nm, 1000, &got), FENCE_OK, c);
    ck_assert_uint_eq(got, 1000);
    uint64_t now = lu_server_time_us(r);
    ck_assert_uint_ge(take(c, nm), now);
    uint64_t far = now + 1000000000000ULL; /* ~11 days ahead */
    EXPECT_RC(fence_token_raise(c, nm, far, &got), FENCE_OK, c);
    ck_assert_uint_eq(take(c, nm), far + 1);
    ck_assert_uint_eq(take(c, nm), far + 2);
    redisFree(r);
    fence_client_close(c);
}
END_TEST

/* Issue 19: on a new server incarnation the jump goes on top of
 * max(last + 1, clock), not on the clock alone.  A counter written by
 * another incarnation whose last token leads this server's clock by more
 * than the jump (a promoted replica whose clock is behind, or a counter
 * raised by earlier jumps) gets last + 1 + jump; the old rule gave last + 1,
 * below tokens the old server may have issued after the replica's copy. */
START_TEST(jump_on_top_of_the_counter)
{
    redisContext *r = tu_redis();
    fence_client *c = open_on(tu_env("FENCE_TEST_REDIS_URL"), FENCE_TOKENS_CLOCK, 2000, 0);
    const char *nm = tu_name("ontop");
    char tk[600];
    lu_token_key(tk, sizeof tk, nm);
    uint64_t lead = lu_server_time_us(r) + 30000000; /* 30 s ahead of this clock */
    lu_cmd_ok(r, "HSET %s n %" PRIu64 " run %s", tk, lead,
              "0000000000000000000000000000000000000000");
    ck_assert_uint_eq(take(c, nm), lead + 1 + 2000000);
    ck_assert_uint_eq(take(c, nm), lead + 2 + 2000000); /* this server's now: + 1 */
    redisFree(r);
    fence_client_close(c);
}
END_TEST

/* A counter whose last token was issued by a clock that read later than
 * this server's (t ahead of TIME): the token is issued (above n) and the
 * lag is reported, on the lease, in the metrics and in Prometheus. */
START_TEST(clock_behind_reported)
{
    redisContext *r = tu_redis();
    fence_client *c = lu_open_client();
    const char *nm = tu_name("behind");
    char tk[600], run[LU_INCARNATION_LEN + 1];
    lu_token_key(tk, sizeof tk, nm);
    lu_incarnation(r, run);
    uint64_t now = lu_server_time_us(r);
    lu_cmd_ok(r, "HSET %s n %" PRIu64 " run %s t %" PRIu64, tk, now + 5000000, run,
              now + 5000000);
    fence_lease *l = lu_acquire_ok(c, nm, 5000, 0);
    ck_assert_uint_eq(fence_lease_token(l), now + 5000001);
    int64_t b = fence_lease_clock_behind_us(l);
    ck_assert_msg(b > 4000000 && b <= 5000000, "behind %" PRId64 " us, want about 5 s", b);
    fence_metrics m = lu_metrics(c);
    ck_assert_uint_eq(m.clock_behind, 1);
    ck_assert_int_eq(m.clock_behind_max_us, b);
    char text[8192];
    ck_assert_int_lt(fence_metrics_prometheus(&m, text, sizeof text), (int)sizeof text);
    ck_assert_ptr_nonnull(strstr(text, "\nfence_clock_behind_total 1\n"));
    ck_assert(strstr(text, "\nfence_clock_behind_max_seconds 4.") != NULL ||
              strstr(text, "\nfence_clock_behind_max_seconds 5.") != NULL);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    /* The counter now records this server's clock: the next is not behind. */
    l = lu_acquire_ok(c, nm, 5000, 0);
    ck_assert_int_eq(fence_lease_clock_behind_us(l), 0);
    ck_assert_int_eq(fence_lease_clock_behind_us(NULL), 0);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    ck_assert_uint_eq(lu_metrics(c).clock_behind, 1);
    redisFree(r);
    fence_client_close(c);
}
END_TEST

/* clock_behind_limit_ms: behind by more than the limit, acquire refuses
 * with FENCE_ECLOCK and writes nothing (no owner key, counter untouched);
 * within it, the token is issued. */
START_TEST(clock_behind_limit_refuses)
{
    redisContext *r = tu_redis();
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = tu_env("FENCE_TEST_REDIS_URL");
    o.clock_behind_limit_ms = 1000;
    fence_client *c = lu_open_opts(&o);
    const char *nm = tu_name("limit");
    char tk[600], ok[600], run[LU_INCARNATION_LEN + 1];
    lu_token_key(tk, sizeof tk, nm);
    lu_owner_key(ok, sizeof ok, nm);
    lu_incarnation(r, run);
    uint64_t now = lu_server_time_us(r);
    lu_cmd_ok(r, "HSET %s n 77 run %s t %" PRIu64, tk, run, now + 5000000);
    fence_lease *l = NULL;
    EXPECT_RC(fence_try_acquire(c, nm, 5000, &l), FENCE_ECLOCK, c);
    ck_assert_ptr_null(l);
    ck_assert_msg(strstr(fence_client_errmsg(c), "behind") != NULL &&
                  strstr(fence_client_errmsg(c), "nothing was written") != NULL,
                  "message: %s", fence_client_errmsg(c));
    ck_assert_int_eq(lu_rexists(r, ok), 0);
    lu_expect_counter(r, tk, "77");
    char *t = NULL;
    redisReply *h = redisCommand(r, "HGET %s t", tk);
    ck_assert(h != NULL && h->type == REDIS_REPLY_STRING);
    t = strdup(h->str);
    freeReplyObject(h);
    char want[32];
    snprintf(want, sizeof want, "%" PRIu64, now + 5000000);
    ck_assert_str_eq(t, want);
    free(t);
    ck_assert_uint_eq(lu_metrics(c).clock_behind, 1);
    /* Within the limit: issued, and reported. */
    lu_cmd_ok(r, "HSET %s t %" PRIu64, tk, lu_server_time_us(r) + 500000);
    l = lu_acquire_ok(c, nm, 5000, 0);
    ck_assert_int_gt(fence_lease_clock_behind_us(l), 0);
    ck_assert_int_le(fence_lease_clock_behind_us(l), 500000);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    redisFree(r);
    fence_client_close(c);
}
END_TEST

/* Issue 20: a counter expires at the instant its last clock token names
 * plus counter_idle_ms; once it has gone the next token (clock + jump) is
 * still above it.  Default: a day past the token; -1, dense tokens, a raise:
 * kept (no expiry). */
START_TEST(counter_expires_when_idle)
{
    redisContext *r = tu_redis();
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = tu_env("FENCE_TEST_REDIS_URL");
    o.token_jump_ms = 1;
    o.counter_idle_ms = 200;
    fence_client *c = lu_open_opts(&o);
    const char *nm = tu_name("idle");
    char tk[600];
    lu_token_key(tk, sizeof tk, nm);
    uint64_t t1 = take(c, nm);
    long long pttl = lu_rpttl(r, tk);
    /* t1 is about now + 1 ms: the counter lives about 202 ms. */
    ck_assert_msg(pttl > 100 && pttl <= 202, "counter PTTL %lld, want about 202 ms", pttl);
    int64_t t0 = tu_now_ms();
    while (lu_rexists(r, tk) && tu_now_ms() - t0 < 3000) {
        tu_sleep_ms(20);
    }
    ck_assert_msg(lu_rexists(r, tk) == 0, "the idle counter is still there after 3 s");
    uint64_t now = lu_server_time_us(r);
    uint64_t t2 = take(c, nm);
    ck_assert_uint_gt(t2, t1);
    ck_assert_uint_ge(t2, now + 1000); /* a new counter: clock + jump */
    fence_client_close(c);

    /* The default: a day after the token's instant. */
    c = lu_open_client();
    take(c, nm);
    pttl = lu_rpttl(r, tk);
    /* (The counter exists: no jump, the token is about now.) */
    ck_assert_msg(pttl > FENCE_COUNTER_IDLE_DEFAULT_MS - 1000 &&
                      pttl <= FENCE_COUNTER_IDLE_DEFAULT_MS + 1000,
                  "default counter PTTL %lld", pttl);
    /* A raise keeps it (an expiry from the lower n would come too early),
     * and so does a token leading the clock by more than the jump: were it
     * evicted (volatile-*) before the clock caught up, clock + jump would be
     * below it. */
    EXPECT_RC(fence_token_raise(c, nm, lu_server_time_us(r) + 3600000000ULL, NULL), FENCE_OK, c);
    ck_assert_int_eq(lu_rpttl(r, tk), -1);
    take(c, nm);
    ck_assert_int_eq(lu_rpttl(r, tk), -1);
    fence_client_close(c);

    /* -1: never. */
    nm = tu_name("idle2");
    lu_token_key(tk, sizeof tk, nm);
    o.token_jump_ms = 0;
    o.counter_idle_ms = -1;
    c = lu_open_opts(&o);
    take(c, nm);
    ck_assert_int_eq(lu_rpttl(r, tk), -1);
    fence_client_close(c);
    c = lu_open_client();
    take(c, nm);
    ck_assert_int_gt(lu_rpttl(r, tk), 0);
    fence_client_close(c);
    redisFree(r);
}
END_TEST

START_TEST(holder_id)
{
    fence_client *c = lu_open_client();
    fence_lease *a = lu_acquire_ok(c, tu_name("ha"), 5000, 0);
    fence_lease *b = lu_acquire_ok(c, tu_name("hb"), 5000, 0); /* a new name: tu_name's buffer */
    const char *h = fence_lease_holder(a);
    ck_assert_uint_eq(strlen(h), FENCE_HOLDER_LEN);
    ck_assert_uint_eq(strspn(h, "0123456789abcdef"), FENCE_HOLDER_LEN);
    ck_assert_int_eq(strncmp(fence_lease_owner(a), h, FENCE_HOLDER_LEN), 0);
    ck_assert_int_eq(fence_lease_owner(a)[FENCE_HOLDER_LEN], ':');
    ck_assert_str_ne(h, fence_lease_holder(b));
    ck_assert_str_eq(fence_lease_holder(NULL), "");
    EXPECT_RC(fence_release(a), FENCE_OK, c);
    EXPECT_RC(fence_release(b), FENCE_OK, c);
    fence_client_close(c);
}
END_TEST

/* Every new client option's bad values: FENCE_EINVAL naming it, and the
 * handle then answers FENCE_ESTATE. */
START_TEST(bad_options)
{
    static const struct {
        int mode;
        int64_t jump;
        int evict, minr;
        int64_t rto;
        const char *says;
        int64_t limit;
        int64_t idle;
    } bad[] = {
        {0, 0, 0, 0, 0, "counter_idle_ms", 0, -2},
        {0, 0, 0, 0, 0, "counter_idle_ms", 0, FENCE_COUNTER_IDLE_MAX_MS + 1},
        {1, 0, 0, 0, 0, "counter_idle_ms", 0, 200},
        {0, 0, 0, 0, 0, "clock_behind_limit_ms", -1, 0},
        {0, 0, 0, 0, 0, "clock_behind_limit_ms", FENCE_TOKEN_JUMP_MAX_MS + 1, 0},
        {1, 0, 0, 0, 0, "clock_behind_limit_ms", 1000, 0},
        {2, 0, 0, 0, 0, "token_mode", 0, 0},        {-1, 0, 0, 0, 0, "token_mode", 0, 0},
        {0, -1, 0, 0, 0, "token_jump_ms", 0, 0},    {0, FENCE_TOKEN_JUMP_MAX_MS + 1, 0, 0, 0, "token_jump_ms", 0, 0},
        {1, 5000, 0, 0, 0, "token_jump_ms", 0, 0},  {0, 0, 2, 0, 0, "allow_eviction", 0, 0},
        {0, 0, -1, 0, 0, "allow_eviction", 0, 0},   {0, 0, 0, -1, 0, "min_replicas", 0, 0},
        {0, 0, 0, FENCE_MIN_REPLICAS_MAX + 1, 0, "min_replicas", 0, 0},
        {0, 0, 0, 1, -1, "replica_timeout_ms", 0, 0},
        {0, 0, 0, 1, FENCE_REPLICA_TIMEOUT_MAX_MS + 1, "replica_timeout_ms", 0, 0},
        {0, 0, 0, 0, 100, "replica_timeout_ms", 0, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fence_client_options o;
        fence_client_options_init(&o);
        o.url = tu_env("FENCE_TEST_REDIS_URL");
        o.token_mode = bad[i].mode;
        o.token_jump_ms = bad[i].jump;
        o.allow_eviction = bad[i].evict;
        o.min_replicas = bad[i].minr;
        o.replica_timeout_ms = bad[i].rto;
        o.clock_behind_limit_ms = bad[i].limit;
        o.counter_idle_ms = bad[i].idle;
        fence_client *c = NULL;
        EXPECT_RC(fence_client_open(&c, &o), FENCE_EINVAL, c);
        ck_assert_msg(strstr(fence_client_errmsg(c), bad[i].says) != NULL, "case %zu: \"%s\"",
                      i, fence_client_errmsg(c));
        fence_lease *l = NULL;
        EXPECT_RC(fence_try_acquire(c, "x", 1000, &l), FENCE_ESTATE, c);
        fence_client_close(c);
    }
    fence_client *c = lu_open_client();
    uint64_t t = 0;
    EXPECT_RC(fence_lease_reissue(NULL, 1, &t), FENCE_EINVAL, (fence_client *)NULL);
    fence_lease *l = lu_acquire_ok(c, tu_name("reiss"), 5000, 0);
    EXPECT_RC(fence_lease_reissue(l, FENCE_TOKEN_MAX, &t), FENCE_EINVAL, c);
    EXPECT_RC(fence_lease_reissue(l, UINT64_MAX, &t), FENCE_EINVAL, c);
    EXPECT_RC(fence_client_server_info(c, NULL), FENCE_EINVAL, c);
    EXPECT_RC(fence_client_server_info(NULL, NULL), FENCE_EINVAL, (fence_client *)NULL);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    fence_client_close(c);
}
END_TEST

/* What the server says of itself, and the metrics that show it. */
START_TEST(server_info_and_metrics)
{
    fence_client *c = lu_open_client();
    ck_assert_int_eq(lu_metrics(c).redis_persistence, -1); /* not asked yet */
    fence_server_info si;
    EXPECT_RC(fence_client_server_info(c, &si), FENCE_OK, c);
    ck_assert_str_eq(si.maxmemory_policy, "noeviction");
    ck_assert_int_eq(si.persistence, FENCE_PERSIST_OFF);
    ck_assert_str_eq(fence_persistence_name(si.persistence), "off");
    ck_assert_str_eq(fence_persistence_name(FENCE_PERSIST_AOF_RDB), "aof+rdb");
    ck_assert_str_eq(fence_persistence_name(42), "unknown");
    take(c, tu_name("m"));
    fence_metrics m = lu_metrics(c);
    ck_assert_int_eq(m.redis_persistence, 0);
    char buf[8192];
    ck_assert_int_gt(fence_metrics_prometheus(&m, buf, sizeof buf), 0);
    ck_assert_ptr_nonnull(strstr(buf, "\nfence_redis_persistence 0\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\nfence_token_regressions_total 0\n"));
    fence_client_close(c);
}
END_TEST

static Suite *tokens_suite(void)
{
    Suite *s = suite_create("tokens");
    TCase *tc = tcase_create("issuance");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, clock_tokens_from_server_clock);
    tcase_add_test(tc, dense_tokens_are_consecutive);
    tcase_add_test(tc, counter_deleted);
    tcase_add_test(tc, flushall_and_restart);
    CT_ADD_CASES(tc, eviction_policy, policies);
    tcase_add_test(tc, eviction_takes_a_held_lease);
    tcase_add_test(tc, token_mode_recorded);
    tcase_add_test(tc, migrate_string_counter);
    tcase_add_test(tc, raise_with_clock_tokens);
    tcase_add_test(tc, jump_on_top_of_the_counter);
    tcase_add_test(tc, clock_behind_reported);
    tcase_add_test(tc, clock_behind_limit_refuses);
    tcase_add_test(tc, counter_expires_when_idle);
    tcase_add_test(tc, holder_id);
    tcase_add_test(tc, bad_options);
    tcase_add_test(tc, server_info_and_metrics);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(tokens_suite());
}
