/*
 * bench_redis_cost.c -- what one fenced acquire+release costs the Redis
 * server, against the floor of the mechanism, and where that time goes
 * (issue 20).  Same local Redis as bench_lease (FENCE_TEST_REDIS_URL/PORT,
 * scripts/with-servers via `make bench`).  One figure per line:
 * "name value unit"; "#" lines are comments.
 *
 * Server time comes from INFO commandstats deltas, read on a raw hiredis
 * connection of its own.  Redis 7.0 counts the commands a script calls in
 * commandstats too (checked at run time below: on 7.0.15 a script calling
 * TIME adds one cmdstat_time call per script call), and a script's
 * EVALSHA usec already includes them.  So the server time of a cycle is
 * the sum over the commands sent at top level (EVALSHA here), not over
 * every cmdstat line (that would count the inner calls twice); the inner
 * calls' own lines give the breakdown.  Which commands are inner is read
 * from MONITOR ("lua" source) over a few probe cycles, printed as the
 * command sequence per cycle; the measured rounds run without MONITOR.
 *
 *  1. redis_usec_per_cycle: server microseconds per fence_try_acquire +
 *     fence_release through the library (one client, default options:
 *     clock tokens, heartbeat thread; the same name every cycle, so its
 *     counter exists), vs redis_floor_usec_per_cycle: a raw hiredis
 *     connection running by EVALSHA one script doing SET k v NX PX ttl +
 *     INCR counter (returns the token) and a compare-and-delete script
 *     (GET == v, then DEL).  Rounds interleaved ABCABC, medians.  Goal:
 *     redis_usec_per_cycle_vs_floor_ratio <= 1.5.  C is the skeleton
 *     (redis_skeleton_usec_per_cycle): the library's steady-state commands
 *     with constant arguments and no Lua logic, the floor of that command
 *     set.
 *  2. Where it goes: redis_usec_per_cycle_<cmd> for each command the
 *     scripts call, redis_usec_per_cycle_lua (EVALSHA time not spent in
 *     an inner command: the script machinery), and in isolation
 *     redis_usec_script_<what>: the server time of one EVALSHA of a tiny
 *     script doing just that (return1: the script floor), and
 *     redis_usec_script_acquire_lua / _release_lua: the library's two
 *     scripts apart, by raw EVALSHA with the library's arguments.
 *  3. acquire_release_1thread_per_s vs acquire_release_8threads_per_s:
 *     threads sharing one fence_client, distinct names, try_acquire +
 *     release for a fixed time; the ratio (the issue's goal: >= 5).
 *  4. ioredis_8callers_per_s (and ioredis_1caller_per_s): the same fenced
 *     cycle (the library's own issue.lua + acquire.lua / release.lua, same arguments)
 *     from 8 concurrent callers on one ioredis connection, run by node
 *     (tests/bench/ioredis_callers.js; ioredis installed by npm into
 *     build/bench/ioredis, never committed).  Skipped with one comment line
 *     when node or npm is missing.
 *  5. redis_bytes_per_idle_name: what an idle name still costs Redis once
 *     its counter expired (below).
 */
#include "fence.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double s[64];
    memcpy(s, v, (size_t)n * sizeof *v);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench_redis_cost: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static const char *env_or_die(const char *name)
{
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0') {
        fail("%s is not set: run it with 'make bench' (scripts/with-servers starts Redis)",
             name);
    }
    return v;
}

static void die_fence(const char *what, int rc, const fence_client *c)
{
    fprintf(stderr, "bench_redis_cost: %s: %s (%s)\n", what, fence_status_name(rc),
            c != NULL ? fence_client_errmsg(c) : "no handle");
    exit(1);
}

static const char *g_url;
static int g_port;

static fence_client *open_client(void)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = g_url;
    fence_client *c = NULL;
    int rc = fence_client_open(&c, &o);
    if (rc != FENCE_OK) {
        die_fence("fence_client_open", rc, c);
    }
    return c;
}

static redisContext *raw_redis(void)
{
    struct timeval tv = {5, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", g_port, tv);
    if (r == NULL || r->err) {
        fail("cannot connect to Redis: %s", r ? r->errstr : "out of memory");
    }
    redisSetTimeout(r, tv);
    return r;
}

/* A reply of the given type or exit. */
static redisReply *cmd_ok(redisReply *rep, int type, const char *what)
{
    if (rep == NULL || rep->type != type) {
        fail("%s failed", what);
    }
    return rep;
}

static void script_load(redisContext *r, const char *body, char sha[41])
{
    redisReply *rep = cmd_ok(redisCommand(r, "SCRIPT LOAD %s", body), REDIS_REPLY_STRING,
                             "SCRIPT LOAD");
    snprintf(sha, 41, "%s", rep->str);
    freeReplyObject(rep);
}

/* ------------------------------------------------------------------ */
/* INFO commandstats snapshots                                          */
/* ------------------------------------------------------------------ */

enum { MAXCMDS = 256 };

typedef struct cstat {
    char name[64]; /* "get", "client|setname" */
    long long calls, usec;
} cstat;

typedef struct cstats {
    int n;
    cstat s[MAXCMDS];
} cstats;

static void snapshot(redisContext *r, cstats *out)
{
    redisReply *rep = cmd_ok(redisCommand(r, "INFO commandstats"), REDIS_REPLY_STRING,
                             "INFO commandstats");
    out->n = 0;
    for (const char *p = rep->str; (p = strstr(p, "cmdstat_")) != NULL; p++) {
        cstat s;
        if (out->n < MAXCMDS &&
            sscanf(p, "cmdstat_%63[^:]:calls=%lld,usec=%lld", s.name, &s.calls, &s.usec) == 3) {
            out->s[out->n++] = s;
        }
    }
    freeReplyObject(rep);
}

static const cstat *find(const cstats *t, const char *name)
{
    for (int i = 0; i < t->n; i++) {
        if (strcmp(t->s[i].name, name) == 0) {
            return &t->s[i];
        }
    }
    return NULL;
}

/* d = b - a, per command (commands absent from a count from zero). */
static void delta(const cstats *a, const cstats *b, cstats *d)
{
    d->n = 0;
    for (int i = 0; i < b->n; i++) {
        const cstat *x = find(a, b->s[i].name);
        cstat s = b->s[i];
        if (x != NULL) {
            s.calls -= x->calls;
            s.usec -= x->usec;
        }
        if (s.calls != 0) {
            d->s[d->n++] = s;
        }
    }
}

/* The commandstats delta over fn(arg), without the snapshots' own INFO
 * call: a snapshot's stats never include itself, so the delta from S1 to
 * S2 holds S1's INFO call; its cost is taken from S0's, measured back to
 * back just before (S0 -> S1: nothing else ran). */
static void measure(redisContext *r, void (*fn)(void *), void *arg, cstats *d)
{
    static cstats s0, s1, s2, own;
    snapshot(r, &s0);
    snapshot(r, &s1);
    fn(arg);
    snapshot(r, &s2);
    delta(&s0, &s1, &own);
    const cstat *oi = find(&own, "info");
    if (own.n != 1 || oi == NULL || oi->calls != 1) {
        fail("%s", "another client ran commands between two INFO snapshots: the bench needs "
                   "a Redis of its own");
    }
    delta(&s1, &s2, d);
    for (int i = 0; i < d->n; i++) {
        if (strcmp(d->s[i].name, "info") == 0) {
            d->s[i].calls -= 1;
            d->s[i].usec -= oi->usec;
        }
    }
}

/* ------------------------------------------------------------------ */
/* MONITOR: the command sequence of a cycle, and which are inner        */
/* ------------------------------------------------------------------ */

enum { MAXINNER = 32 };

/* What a probe found in its last cycle: the commands called inside
 * scripts (MONITOR source "lua") with their calls per cycle, and the
 * top-level ones. */
typedef struct cycle_shape {
    int ninner;
    char inner[MAXINNER][32];
    int inner_calls[MAXINNER];
    int ntop;
    char top[MAXINNER][32];
} cycle_shape;

static void lower(char *s)
{
    for (; *s; s++) {
        if (*s >= 'A' && *s <= 'Z') {
            *s = (char)(*s - 'A' + 'a');
        }
    }
}

/* One MONITOR line: its source ("lua" or an address) and its command
 * (the first quoted word; EVALSHA gets its sha's first 8 digits). */
static int parse_monitor(const char *line, char *src, size_t srcsize, char *cmd, size_t cmdsize)
{
    const char *b = strchr(line, '['), *e = b ? strchr(b, ']') : NULL;
    const char *q = e ? strchr(e, '"') : NULL;
    if (q == NULL) {
        return -1;
    }
    const char *sp = memchr(b, ' ', (size_t)(e - b));
    snprintf(src, srcsize, "%.*s", sp ? (int)(e - sp - 1) : 0, sp ? sp + 1 : "");
    const char *q2 = strchr(q + 1, '"');
    if (q2 == NULL) {
        return -1;
    }
    snprintf(cmd, cmdsize, "%.*s", (int)(q2 - q - 1), q + 1);
    if (strcmp(cmd, "EVALSHA") == 0 && q2[1] == ' ' && q2[2] == '"') {
        snprintf(cmd, cmdsize, "EVALSHA(%.8s)", q2 + 3);
    }
    return 0;
}

/* Runs fn(arg) `cycles` times under MONITOR (each cycle marked by an ECHO
 * from another connection), prints the command sequence of the first and
 * the last cycle as comments, and returns the last cycle's shape. */
static void probe(const char *label, int cycles, void (*fn)(void *), void *arg,
                  cycle_shape *shape)
{
    redisContext *mon = raw_redis(), *mark = raw_redis();
    freeReplyObject(cmd_ok(redisCommand(mon, "MONITOR"), REDIS_REPLY_STATUS, "MONITOR"));
    for (int i = 0; i < cycles; i++) {
        freeReplyObject(redisCommand(mark, "ECHO bench-cycle-%d", i));
        fn(arg);
    }
    freeReplyObject(redisCommand(mark, "ECHO bench-cycle-end"));
    memset(shape, 0, sizeof *shape);
    int cycle = -1, done = 0;
    char seq[4096] = "";
    while (!done) {
        redisReply *rep = NULL;
        if (redisGetReply(mon, (void **)&rep) != REDIS_OK || rep == NULL ||
            rep->type != REDIS_REPLY_STATUS) {
            fail("%s", "reading MONITOR failed");
        }
        char src[64], cmd[64];
        if (parse_monitor(rep->str, src, sizeof src, cmd, sizeof cmd) == 0) {
            if (strcmp(cmd, "ECHO") == 0 && strstr(rep->str, "\"bench-cycle-") != NULL) {
                if (cycle == 0 || (cycle == cycles - 1 && cycle > 0)) {
                    printf("# %s, MONITOR, cycle %d of %d: %s\n", label, cycle + 1, cycles, seq);
                }
                cycle++;
                seq[0] = '\0';
                done = strstr(rep->str, "bench-cycle-end") != NULL;
            } else if (cycle >= 0) {
                int is_lua = strcmp(src, "lua") == 0;
                size_t used = strlen(seq);
                snprintf(seq + used, sizeof seq - used, "%s%s%s", seq[0] ? " " : "",
                         is_lua ? "  > " : "", cmd);
                if (cycle == cycles - 1) {
                    char lc[64];
                    snprintf(lc, sizeof lc, "%s", cmd);
                    lower(lc);
                    char *paren = strchr(lc, '(');
                    if (paren) {
                        *paren = '\0';
                    }
                    if (is_lua) {
                        int k = 0;
                        while (k < shape->ninner && strcmp(shape->inner[k], lc) != 0) {
                            k++;
                        }
                        if (k == shape->ninner && k < MAXINNER) {
                            snprintf(shape->inner[shape->ninner++], 32, "%.31s", lc);
                        }
                        shape->inner_calls[k]++;
                    } else if (shape->ntop < MAXINNER) {
                        snprintf(shape->top[shape->ntop++], 32, "%.31s", lc);
                    }
                }
            }
        }
        freeReplyObject(rep);
    }
    redisFree(mon); /* MONITOR costs every command: never on while measuring */
    redisFree(mark);
}

static int inner_index(const cycle_shape *sh, const char *cmd)
{
    for (int k = 0; k < sh->ninner; k++) {
        if (strcmp(sh->inner[k], cmd) == 0) {
            return k;
        }
    }
    return -1;
}

/* A measured delta over n cycles of the probed shape: the server usec per
 * cycle (top-level commands), with per[k] the usec per cycle of inner
 * command k and *lua the script time not spent in an inner command.
 * Every inner command must have run exactly its probed count per cycle
 * (else something else ran it at top level, and the split is wrong). */
static double cycle_usec(const cstats *d, const cycle_shape *sh, int n, double *per, double *lua)
{
    double top = 0, inner = 0, scripts = 0;
    for (int k = 0; k < sh->ninner; k++) {
        per[k] = 0;
    }
    for (int i = 0; i < d->n; i++) {
        const cstat *s = &d->s[i];
        int k = inner_index(sh, s->name);
        if (k >= 0) {
            if (s->calls != (long long)sh->inner_calls[k] * n) {
                fprintf(stderr, "bench_redis_cost: %s ran %lld times in %d cycles, the probe saw "
                        "%d per cycle inside scripts\n", s->name, s->calls, n,
                        sh->inner_calls[k]);
                exit(1);
            }
            per[k] = (double)s->usec / n;
            inner += (double)s->usec;
        } else {
            top += (double)s->usec;
            if (strcmp(s->name, "evalsha") == 0 || strcmp(s->name, "eval") == 0) {
                scripts += (double)s->usec;
            }
        }
    }
    *lua = (scripts - inner) / n;
    return top / n;
}

/* ------------------------------------------------------------------ */
/* Runtime check: are commands inside scripts counted in commandstats?  */
/* ------------------------------------------------------------------ */

static redisContext *g_r;
static char g_sha_check[41];

enum { CHECK_CALLS = 200 };

static void run_check(void *arg)
{
    (void)arg;
    for (int i = 0; i < CHECK_CALLS; i++) {
        freeReplyObject(cmd_ok(redisCommand(g_r, "EVALSHA %s 0", g_sha_check),
                               REDIS_REPLY_INTEGER, "EVALSHA (check)"));
    }
}

static void check_inner_counted(void)
{
    script_load(g_r, "redis.call('TIME') return 1", g_sha_check);
    cstats d;
    measure(g_r, run_check, NULL, &d);
    const cstat *t = find(&d, "time"), *e = find(&d, "evalsha");
    long long tc = t ? t->calls : 0;
    printf("# inner script calls in INFO commandstats: %lld cmdstat_time calls from %d "
           "EVALSHA of a script calling TIME (%s)\n", tc, CHECK_CALLS,
           tc == CHECK_CALLS ? "counted, and inside the EVALSHA usec too" : "NOT counted");
    if (tc != CHECK_CALLS || e == NULL || e->calls != CHECK_CALLS || e->usec < t->usec) {
        fail("%s", "this Redis does not count the commands inside scripts in commandstats: "
                   "the breakdown needs Redis 7");
    }
}

/* ------------------------------------------------------------------ */
/* 1+2. server time per cycle: library vs floor                         */
/* ------------------------------------------------------------------ */

enum { ROUNDS = 9, CYCLES = 2500 }; /* 22,500 cycles of each */

static const char *FLOOR_ACQUIRE =
    "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
    "return redis.call('INCR', KEYS[2]) end return 0";
static const char *FLOOR_RELEASE =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end "
    "return 0";

typedef struct lib_arg {
    fence_client *c;
    const char *name;
    int n;
} lib_arg;

static void lib_cycles(void *arg)
{
    lib_arg *a = arg;
    if (a->c == NULL) { /* the probe's client: opened under MONITOR */
        a->c = open_client();
    }
    for (int i = 0; i < a->n; i++) {
        fence_lease *l = NULL;
        int rc = fence_try_acquire(a->c, a->name, 60000, &l);
        if (rc != FENCE_OK) {
            die_fence("fence_try_acquire", rc, a->c);
        }
        rc = fence_release(l);
        if (rc != FENCE_OK) {
            die_fence("fence_release", rc, a->c);
        }
    }
}

typedef struct floor_arg {
    char acq[41], rel[41];
    char key[96], counter[96], value[64];
    int n;
} floor_arg;

static void floor_cycles(void *arg)
{
    floor_arg *a = arg;
    for (int i = 0; i < a->n; i++) {
        redisReply *t = cmd_ok(redisCommand(g_r, "EVALSHA %s 2 %s %s %s 60000", a->acq, a->key,
                                             a->counter, a->value),
                               REDIS_REPLY_INTEGER, "EVALSHA floor acquire");
        if (t->integer < 1) {
            fail("%s", "the floor acquire found its key held");
        }
        freeReplyObject(t);
        redisReply *d = cmd_ok(redisCommand(g_r, "EVALSHA %s 1 %s %s", a->rel, a->key, a->value),
                               REDIS_REPLY_INTEGER, "EVALSHA floor release");
        if (d->integer != 1) {
            fail("%s", "the floor release did not delete its key");
        }
        freeReplyObject(d);
    }
}

/* The skeleton: the library's commands in a steady-state cycle (one name,
 * its counter there, the same server incarnation), with constant
 * arguments and no Lua logic, returning what the library's scripts return.
 * What a cycle of these commands costs however cheap the scripts' own code
 * were: the floor of this command set, against the mechanism's floor. */
static const char *SKELETON_ACQUIRE =
    "redis.call('GET', KEYS[1]) redis.call('HMGET', KEYS[2], 'n', 'run', 't', 'm') "
    "redis.call('INFO', 'replication') redis.call('TIME') "
    "redis.call('HSET', KEYS[2], 'n', '1796165367735919', 't', '1796165367735919') "
    "redis.call('PEXPIREAT', KEYS[2], '1796251767736') "
    "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return {1, '1796165367735919'}";
static const char *SKELETON_RELEASE =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "redis.call('DEL', KEYS[1], KEYS[1] .. ':info') redis.call('PUBLISH', KEYS[1] .. "
    "':released', '1') return 1 end return 0";

static void skeleton_cycles(void *arg)
{
    floor_arg *a = arg;
    for (int i = 0; i < a->n; i++) {
        freeReplyObject(cmd_ok(redisCommand(g_r, "EVALSHA %s 2 %s %s %s 60000", a->acq, a->key,
                                            a->counter, a->value),
                               REDIS_REPLY_ARRAY, "EVALSHA skeleton acquire"));
        redisReply *d = cmd_ok(redisCommand(g_r, "EVALSHA %s 1 %s %s", a->rel, a->key, a->value),
                               REDIS_REPLY_INTEGER, "EVALSHA skeleton release");
        if (d->integer != 1) {
            fail("%s", "the skeleton release did not delete its key");
        }
        freeReplyObject(d);
    }
}

static double evalsha_usec(const cstats *d, int n)
{
    const cstat *e = find(d, "evalsha");
    if (e == NULL || e->calls != 2LL * n) {
        fail("%s", "unexpected EVALSHA count (skeleton)");
    }
    return (double)e->usec / n;
}

static void print_breakdown(const char *prefix, const cycle_shape *sh, double per[][MAXINNER],
                            const double *lua)
{
    for (int k = 0; k < sh->ninner; k++) {
        double v[ROUNDS];
        for (int i = 0; i < ROUNDS; i++) {
            v[i] = per[i][k];
        }
        printf("%s_%s %.3f us\n", prefix, sh->inner[k], median(v, ROUNDS));
    }
    printf("%s_lua %.3f us\n", prefix, median(lua, ROUNDS));
}

static void bench_cost(void)
{
    fence_client *c = open_client();
    char name[64];
    snprintf(name, sizeof name, "bench-cost-%ld", (long)getpid());
    lib_arg la = {c, name, 1};
    floor_arg fa;
    script_load(g_r, FLOOR_ACQUIRE, fa.acq);
    script_load(g_r, FLOOR_RELEASE, fa.rel);
    snprintf(fa.key, sizeof fa.key, "bench-floor:{%s}", name);
    snprintf(fa.counter, sizeof fa.counter, "bench-floor:{%s}:token", name);
    snprintf(fa.value, sizeof fa.value, "0123456789abcdef0123456789abcdef");
    fa.n = 1;
    floor_arg sa = fa;
    script_load(g_r, SKELETON_ACQUIRE, sa.acq);
    script_load(g_r, SKELETON_RELEASE, sa.rel);
    snprintf(sa.key, sizeof sa.key, "bench-skeleton:{%s}", name);
    snprintf(sa.counter, sizeof sa.counter, "bench-skeleton:{%s}:token", name);
    snprintf(sa.value, sizeof sa.value, "0123456789abcdef0123456789abcdef:1796165367735919");

    /* The probes: a fresh client, so that its first cycle shows what a new
     * connection sends (MONITOR hides admin commands such as CONFIG). */
    lib_arg pa = {NULL, name, 1};
    cycle_shape lib_sh, floor_sh;
    probe("library cycle", 3, lib_cycles, &pa, &lib_sh);
    fence_client_close(pa.c);
    probe("floor cycle", 2, floor_cycles, &fa, &floor_sh);

    la.n = CYCLES;
    fa.n = CYCLES;
    sa.n = CYCLES;
    lib_cycles(&la); /* warm-up */
    floor_cycles(&fa);
    skeleton_cycles(&sa);
    static double lib_per[ROUNDS][MAXINNER], floor_per[ROUNDS][MAXINNER];
    double lib_us[ROUNDS], floor_us[ROUNDS], lib_lua[ROUNDS], floor_lua[ROUNDS];
    double skel_us[ROUNDS];
    for (int i = 0; i < ROUNDS; i++) { /* ABCABC */
        cstats d;
        measure(g_r, lib_cycles, &la, &d);
        lib_us[i] = cycle_usec(&d, &lib_sh, CYCLES, lib_per[i], &lib_lua[i]);
        measure(g_r, floor_cycles, &fa, &d);
        floor_us[i] = cycle_usec(&d, &floor_sh, CYCLES, floor_per[i], &floor_lua[i]);
        measure(g_r, skeleton_cycles, &sa, &d);
        skel_us[i] = evalsha_usec(&d, CYCLES);
    }
    double lib_m = median(lib_us, ROUNDS), floor_m = median(floor_us, ROUNDS);
    double skel_m = median(skel_us, ROUNDS);
    printf("# server time per cycle: %d rounds of %d cycles each, ABCABC, one name, medians\n",
           ROUNDS, CYCLES);
    printf("redis_usec_per_cycle %.3f us\n", lib_m);
    printf("redis_floor_usec_per_cycle %.3f us\n", floor_m);
    printf("redis_usec_per_cycle_vs_floor_ratio %.2f x\n", lib_m / floor_m);
    printf("# the skeleton: the library's commands with constant arguments and no Lua logic\n");
    printf("redis_skeleton_usec_per_cycle %.3f us\n", skel_m);
    printf("redis_skeleton_usec_per_cycle_vs_floor_ratio %.2f x\n", skel_m / floor_m);
    print_breakdown("redis_usec_per_cycle", &lib_sh, lib_per, lib_lua);
    print_breakdown("redis_floor_usec_per_cycle", &floor_sh, floor_per, floor_lua);
    fflush(stdout);
    fence_client_close(c);
}

/* ------------------------------------------------------------------ */
/* 2b. tiny scripts in isolation                                        */
/* ------------------------------------------------------------------ */

enum { SCRIPT_ROUNDS = 5, SCRIPT_CALLS = 2000 };

typedef struct tiny {
    const char *what, *body;
    int distinct_keys; /* KEYS[1] new at each call (SET NX must set) */
    char sha[41];
    double us[SCRIPT_ROUNDS];
} tiny;

static tiny g_tiny[] = {
    {"return1", "return 1", 0, "", {0}},
    {"info_server_replication", "redis.call('INFO', 'server', 'replication') return 1", 0, "",
     {0}},
    /* acquire.lua's incarnation(): the same INFO and its two string.match
     * scans of the reply. */
    {"info_and_match", "local s = redis.pcall('INFO', 'server', 'replication') "
                       "local id = (string.match(s, 'run_id:(%x+)') or '') .. ':' .. "
                       "(string.match(s, 'master_replid:(%x+)') or '') return #id", 0, "", {0}},
    /* The same two fields found by plain string.find (each is 40 hex
     * digits): what the patterns' scan costs. */
    {"info_and_plain_find", "local s = redis.pcall('INFO', 'server', 'replication') "
                            "local a = string.find(s, 'run_id:', 1, true) "
                            "local b = string.find(s, 'master_replid:', 1, true) "
                            "local id = (a and string.sub(s, a + 7, a + 46) or '') .. ':' .. "
                            "(b and string.sub(s, b + 14, b + 53) or '') return #id", 0, "", {0}},
    /* acquire.lua's incarnation now (a counter of this master's): INFO
     * replication alone, master_replid found, role:master checked. */
    {"info_replication", "redis.call('INFO', 'replication') return 1", 0, "", {0}},
    {"info_replication_and_find", "local s = redis.call('INFO', 'replication') "
                                  "local i = string.find(s, '\\nmaster_replid:', 1, true) "
                                  "local r = i and string.match(s, '^%x+', i + 15) or '' "
                                  "local m = string.find(s, '\\nrole:master\\r', 1, true) "
                                  "return #r", 0, "", {0}},
    /* Three numbers below 2^53 to text, as an issue does: %.0f (before)
     * and %d (now; Lua 5.1 formats it as a C long: exact). */
    {"format3_pct_0f", "local x = 1796165367735919 local a = string.format('%.0f', x) "
                       "local b = string.format('%.0f', x + 1) "
                       "local c = string.format('%.0f', x / 1000) return #a + #b + #c", 0, "",
     {0}},
    {"format3_pct_d", "local x = 1796165367735919 local a = string.format('%d', x) "
                      "local b = string.format('%d', x + 1) "
                      "local c = string.format('%d', math.floor(x / 1000)) return #a + #b + #c",
     0, "", {0}},
    {"time", "redis.call('TIME') return 1", 0, "", {0}},
    {"publish_no_subscriber", "redis.call('PUBLISH', KEYS[1], '1') return 1", 0, "", {0}},
    {"hmget3", "redis.call('HMGET', KEYS[1], 'n', 'run', 't') return 1", 0, "", {0}},
    {"hset3", "redis.call('HSET', KEYS[1], 'n', ARGV[1], 'run', ARGV[2], 't', ARGV[3]) "
              "return 1", 0, "", {0}},
    {"set_nx_px", "redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', '60000') return 1", 1, "",
     {0}},
};
enum { NTINY = sizeof g_tiny / sizeof g_tiny[0] };

/* Values shaped like the counter's: a 16-digit token, the incarnation
 * "<run_id>:<master_replid>" (81 characters), a 16-digit time. */
#define TINY_N "1796165367735919"
#define TINY_RUN "5d0f8b36b9d526c94810964976a913a069116c92:ba68d419957cc2b968be33f81ec49210acb0f412"

typedef struct tiny_arg {
    tiny *t;
    int round;
} tiny_arg;

static void tiny_calls(void *arg)
{
    tiny_arg *a = arg;
    for (int i = 0; i < SCRIPT_CALLS; i++) {
        char key[96];
        if (a->t->distinct_keys) {
            snprintf(key, sizeof key, "bench-tiny:%d:%d", a->round, i);
        } else {
            snprintf(key, sizeof key, "bench-tiny:{%s}", a->t->what);
        }
        freeReplyObject(cmd_ok(redisCommand(g_r, "EVALSHA %s 1 %s %s %s %s", a->t->sha, key,
                                            TINY_N, TINY_RUN, TINY_N),
                               REDIS_REPLY_INTEGER, a->t->what));
    }
}

static void bench_tiny(void)
{
    freeReplyObject(redisCommand(g_r, "HSET bench-tiny:{hmget3} n %s run %s t %s", TINY_N,
                                 TINY_RUN, TINY_N));
    for (int k = 0; k < NTINY; k++) {
        script_load(g_r, g_tiny[k].body, g_tiny[k].sha);
    }
    for (int round = 0; round < SCRIPT_ROUNDS; round++) { /* round-robin over the scripts */
        for (int k = 0; k < NTINY; k++) {
            tiny_arg a = {&g_tiny[k], round};
            cstats d;
            measure(g_r, tiny_calls, &a, &d);
            const cstat *e = find(&d, "evalsha");
            if (e == NULL || e->calls != SCRIPT_CALLS) {
                fail("%s: unexpected EVALSHA count", g_tiny[k].what);
            }
            g_tiny[k].us[round] = (double)e->usec / SCRIPT_CALLS;
        }
        /* The SET NX keys, out of the way of the next round (not timed). */
        for (int i = 0; i < SCRIPT_CALLS; i++) {
            redisAppendCommand(g_r, "UNLINK bench-tiny:%d:%d", round, i);
        }
        for (int i = 0; i < SCRIPT_CALLS; i++) {
            redisReply *rep = NULL;
            if (redisGetReply(g_r, (void **)&rep) != REDIS_OK) {
                fail("%s", "UNLINK failed");
            }
            freeReplyObject(rep);
        }
    }
    printf("# one EVALSHA of a tiny script, server time (commandstats): %d rounds of %d calls, "
           "medians; return1 is the script floor\n", SCRIPT_ROUNDS, SCRIPT_CALLS);
    for (int k = 0; k < NTINY; k++) {
        printf("redis_usec_script_%s %.3f us\n", g_tiny[k].what,
               median(g_tiny[k].us, SCRIPT_ROUNDS));
    }
    fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* 2c. the library's two scripts apart                                  */
/* ------------------------------------------------------------------ */

/* acquire.lua and release.lua (read from the source tree: make bench runs
 * there) by EVALSHA on the raw connection with the arguments the library
 * sends (MONITOR: clock tokens, the default 10 s jump, no clock limit),
 * on one name whose counter exists, as in part 1.  acquire.lua's owner key
 * is deleted by a top-level DEL, release.lua's is set by a top-level SET:
 * the EVALSHA usec is one script's alone. */
enum { SPLIT_ROUNDS = 5, SPLIT_CALLS = 2000 };

/* The files at paths joined by newlines, as the issuer joins issue.lua
 * and acquire.lua (rscripts.c); one buffer, valid until the next call. */
static char *slurp(const char *path, const char *path2)
{
    static char buf[131072];
    size_t n = 0;
    for (int i = 0; i < 2; i++) {
        const char *p = i == 0 ? path : path2;
        if (p == NULL) {
            break;
        }
        FILE *f = fopen(p, "rb");
        if (f == NULL) {
            fail("cannot read %s (run from the source tree, as make bench does)", p);
        }
        if (i > 0) {
            buf[n++] = '\n';
        }
        n += fread(buf + n, 1, sizeof buf - 2 - n, f);
        fclose(f);
    }
    buf[n] = '\0';
    return buf;
}

typedef struct split_arg {
    char acq[41], rel[41];
    int release; /* 0: time acquire.lua, 1: release.lua */
} split_arg;

static void split_calls(void *arg)
{
    split_arg *a = arg;
    const char *k = "fence:{bench-split}", *tk = "fence:{bench-split}:token";
    const char *owner = "0123456789abcdef0123456789abcdef";
    for (int i = 0; i < SPLIT_CALLS; i++) {
        if (!a->release) {
            freeReplyObject(cmd_ok(redisCommand(g_r, "EVALSHA %s 2 %s %s %s 60000 clock "
                                                "10000000 0 86400000", a->acq, k, tk, owner),
                                   REDIS_REPLY_ARRAY, "EVALSHA acquire.lua"));
            freeReplyObject(cmd_ok(redisCommand(g_r, "DEL %s", k), REDIS_REPLY_INTEGER, "DEL"));
        } else {
            freeReplyObject(cmd_ok(redisCommand(g_r, "SET %s %s:1 PX 60000", k, owner),
                                   REDIS_REPLY_STATUS, "SET"));
            redisReply *d = cmd_ok(redisCommand(g_r, "EVALSHA %s 1 %s %s:1 %s:released", a->rel,
                                                k, owner, k),
                                   REDIS_REPLY_INTEGER, "EVALSHA release.lua");
            if (d->integer != 1) {
                fail("%s", "release.lua did not delete its key");
            }
            freeReplyObject(d);
        }
    }
}

static void bench_split(void)
{
    split_arg a;
    script_load(g_r, slurp("lib/lease/redis/issue.lua", "lib/lease/redis/acquire.lua"), a.acq);
    script_load(g_r, slurp("lib/lease/redis/release.lua", NULL), a.rel);
    double us[2][SPLIT_ROUNDS];
    for (int round = 0; round < SPLIT_ROUNDS; round++) {
        for (a.release = 0; a.release < 2; a.release++) {
            cstats d;
            measure(g_r, split_calls, &a, &d);
            const cstat *e = find(&d, "evalsha");
            if (e == NULL || e->calls != SPLIT_CALLS) {
                fail("%s", "unexpected EVALSHA count (library scripts)");
            }
            us[a.release][round] = (double)e->usec / SPLIT_CALLS;
        }
    }
    printf("# the library's scripts apart, raw EVALSHA with its arguments, one name: %d rounds "
           "of %d calls, medians\n", SPLIT_ROUNDS, SPLIT_CALLS);
    printf("redis_usec_script_acquire_lua %.3f us\n", median(us[0], SPLIT_ROUNDS));
    printf("redis_usec_script_release_lua %.3f us\n", median(us[1], SPLIT_ROUNDS));
    fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* 3. threads sharing one client                                        */
/* ------------------------------------------------------------------ */

enum { MT_ROUNDS = 3, MT_MS = 1500, MT_MAX = 8 };

typedef struct mt {
    fence_client *c;
    atomic_int go, stop;
    atomic_long cycles;
    atomic_int failed;
} mt;

typedef struct mt_worker {
    mt *m;
    char name[64];
} mt_worker;

static void *mt_run(void *arg)
{
    mt_worker *w = arg;
    mt *m = w->m;
    while (!atomic_load(&m->go)) {
        sched_yield();
    }
    long n = 0;
    while (!atomic_load(&m->stop)) {
        fence_lease *l = NULL;
        if (fence_try_acquire(m->c, w->name, 60000, &l) != FENCE_OK ||
            fence_release(l) != FENCE_OK) {
            atomic_store(&m->failed, 1);
            break;
        }
        n++;
    }
    atomic_fetch_add(&m->cycles, n);
    return NULL;
}

/* Cycles per second of nthreads threads on one client for MT_MS. */
static double mt_round(fence_client *c, int nthreads, int round)
{
    mt m;
    m.c = c;
    atomic_init(&m.go, 0);
    atomic_init(&m.stop, 0);
    atomic_init(&m.cycles, 0);
    atomic_init(&m.failed, 0);
    pthread_t th[MT_MAX];
    mt_worker w[MT_MAX];
    for (int i = 0; i < nthreads; i++) {
        w[i].m = &m;
        snprintf(w[i].name, sizeof w[i].name, "bench-mt-%ld-%d-%d-%d", (long)getpid(), nthreads,
                 round, i);
        pthread_create(&th[i], NULL, mt_run, &w[i]);
    }
    int64_t t0 = now_ns();
    atomic_store(&m.go, 1);
    struct timespec ts = {MT_MS / 1000, (long)(MT_MS % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    atomic_store(&m.stop, 1);
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
    }
    double s = (double)(now_ns() - t0) / 1e9;
    if (atomic_load(&m.failed)) {
        die_fence("try_acquire/release (threads)", FENCE_EPROTO, c);
    }
    return (double)atomic_load(&m.cycles) / s;
}

static void bench_threads(void)
{
    fence_client *c = open_client();
    mt_round(c, MT_MAX, -1); /* warm-up */
    double one[MT_ROUNDS], eight[MT_ROUNDS];
    for (int i = 0; i < MT_ROUNDS; i++) { /* ABAB */
        one[i] = mt_round(c, 1, i);
        eight[i] = mt_round(c, MT_MAX, i);
    }
    double a = median(one, MT_ROUNDS), b = median(eight, MT_ROUNDS);
    printf("# threads sharing one fence_client, distinct names, %d rounds of %d ms, ABAB, "
           "medians\n", MT_ROUNDS, MT_MS);
    printf("acquire_release_1thread_per_s %.0f cycles/s\n", a);
    printf("acquire_release_8threads_per_s %.0f cycles/s\n", b);
    printf("acquire_release_8threads_vs_1thread_ratio %.2f x\n", b / a);
    fflush(stdout);
    fence_client_close(c);
}

/* ------------------------------------------------------------------ */
/* 4. ioredis, 8 concurrent callers on one connection                   */
/* ------------------------------------------------------------------ */

/* 5. redis_bytes_per_idle_name: 20,000 distinct names acquired and
 * released by a client whose counters expire 8 s after their token's
 * instant (jump 1 ms: long enough for all to be there when the loop ends),
 * then left idle: what each still costs Redis once
 * they expired (INFO memory used_memory and DBSIZE, before and after);
 * redis_bytes_per_name_held: the same right after the loop (the counters
 * still there).  Goal: 0 bytes. */
enum { IDLE_NAMES = 20000 };

static long long used_memory(void)
{
    redisReply *rep = cmd_ok(redisCommand(g_r, "INFO memory"), REDIS_REPLY_STRING, "INFO memory");
    const char *p = strstr(rep->str, "used_memory:");
    long long v = p != NULL ? atoll(p + strlen("used_memory:")) : -1;
    freeReplyObject(rep);
    if (v < 0) {
        fail("%s", "no used_memory in INFO memory");
    }
    return v;
}

static long long dbsize(void)
{
    redisReply *rep = cmd_ok(redisCommand(g_r, "DBSIZE"), REDIS_REPLY_INTEGER, "DBSIZE");
    long long v = rep->integer;
    freeReplyObject(rep);
    return v;
}

static void bench_idle_names(void)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = g_url;
    o.token_jump_ms = 1;
    o.counter_idle_ms = 8000;
    o.heartbeat_mode = FENCE_HEARTBEAT_MANUAL;
    fence_client *c = NULL;
    int rc = fence_client_open(&c, &o);
    if (rc != FENCE_OK) {
        die_fence("fence_client_open", rc, c);
    }
    long long keys0 = dbsize(), mem0 = used_memory();
    char name[64];
    for (int i = 0; i < IDLE_NAMES; i++) {
        snprintf(name, sizeof name, "bench-idle-%d", i);
        fence_lease *l = NULL;
        if ((rc = fence_try_acquire(c, name, 60000, &l)) != FENCE_OK) {
            die_fence("fence_try_acquire", rc, c);
        }
        if ((rc = fence_release(l)) != FENCE_OK) {
            die_fence("fence_release", rc, c);
        }
    }
    long long keys1 = dbsize(), mem1 = used_memory();
    if (keys1 - keys0 < IDLE_NAMES) {
        fail("%lld keys for %d names: the counters are not there", keys1 - keys0, IDLE_NAMES);
    }
    /* Redis's active expiry removes them within a few of its cycles. */
    int64_t t0 = now_ns();
    while (dbsize() > keys0 && now_ns() - t0 < 30000000000LL) {
        usleep(100000);
    }
    long long keys2 = dbsize(), mem2 = used_memory();
    printf("# %d names: %lld keys and %lld bytes after the loop; %lld keys and %lld bytes "
           "%.1f s later\n", IDLE_NAMES, keys1 - keys0, mem1 - mem0, keys2 - keys0, mem2 - mem0,
           (double)(now_ns() - t0) / 1e9);
    printf("redis_bytes_per_name_held %.1f bytes\n", (double)(mem1 - mem0) / IDLE_NAMES);
    printf("redis_keys_per_idle_name %.4f keys\n", (double)(keys2 - keys0) / IDLE_NAMES);
    printf("redis_bytes_per_idle_name %.1f bytes\n", (double)(mem2 - mem0) / IDLE_NAMES);
    fflush(stdout);
    fence_client_close(c);
}

static int have(const char *prog)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
    return system(cmd) == 0;
}

static void bench_ioredis(void)
{
    if (!have("node") || !have("npm")) {
        printf("# ioredis_8callers_per_s: skipped, node or npm is missing\n");
        return;
    }
    /* Run from the source tree (make bench / scripts/run-bench cd there). */
    const char *dir = getenv("FENCE_BENCH_IOREDIS_DIR");
    if (dir == NULL || dir[0] == '\0') {
        dir = "build/bench/ioredis";
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "test -d '%s/node_modules/ioredis' || "
             "(mkdir -p '%s' && npm install --silent --no-audit --no-fund --prefix '%s' "
             "ioredis >&2)", dir, dir, dir);
    if (system(cmd) != 0) {
        printf("# ioredis_8callers_per_s: skipped, npm install ioredis failed\n");
        return;
    }
    snprintf(cmd, sizeof cmd, "NODE_PATH='%s/node_modules' node tests/bench/ioredis_callers.js "
             "%d %d", dir, g_port, MT_MS);
    fflush(stdout);
    if (system(cmd) != 0) {
        fail("%s", "tests/bench/ioredis_callers.js failed");
    }
}

int main(void)
{
    g_url = env_or_die("FENCE_TEST_REDIS_URL");
    g_port = atoi(env_or_die("FENCE_TEST_REDIS_PORT"));
    g_r = raw_redis();
    int64_t t0 = now_ns();
    check_inner_counted();
    bench_cost();
    bench_tiny();
    bench_split();
    bench_threads();
    bench_idle_names();
    bench_ioredis();
    printf("bench_redis_cost_total_s %.1f s\n", (double)(now_ns() - t0) / 1e9);
    redisFree(g_r);
    return 0;
}
