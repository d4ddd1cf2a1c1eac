/*
 * bench_lease.c -- the Redis lease core against baselines measured in the
 * same run, on the same local Redis (FENCE_TEST_REDIS_URL/PORT, set by
 * scripts/with-servers via `make bench`).  One figure per line:
 * "name value unit".
 *
 *  1. acquire+release through the library (one client, try-acquire and
 *     release of one name, heartbeat thread on, long TTL) vs a bare hiredis
 *     loop doing SET k v NX PX ttl + DEL k on one connection.  Rounds are
 *     interleaved; medians of per-round times.  Target ratio <= 1.3.
 *     Between the two, the split of the difference: the library's own two
 *     scripts (issue.lua + acquire.lua, release.lua, read from the source
 *     tree as the issuer joins them) sent by the same bare hiredis loop
 *     with the library's arguments (clock tokens, the default jump, no
 *     clock limit, the default counter idle time).  That loop does the
 *     library's server work with hiredis's client work, so
 *     scripts_by_hiredis_vs_setnx_ratio is what the command set costs, and
 *     library_client_us_per_cycle (library less that loop) what the
 *     library's own client side adds.
 *  2. One renewal pass over 10,000 leases held by one client in
 *     FENCE_HEARTBEAT_MANUAL mode, all due: time of fence_heartbeat_run();
 *     round trips as the library counts them (heartbeat passes: each pass
 *     is documented as one pipelined round trip -- the library exposes no
 *     other count); script calls and their server time (INFO commandstats,
 *     EVAL+EVALSHA); every command the server ran, including the GET and
 *     PEXPIRE inside the scripts (INFO total_commands_processed).  Target
 *     <= 50 ms.
 *  3. Hand-off: 4 threads (own clients) wait in fence_acquire() while a
 *     fifth holds; time from just before the holder's fence_release() to
 *     the return of a waiter's fence_acquire().  The winner becomes the
 *     next holder, the old holder waits again.  Median and p99 over ~200
 *     hand-offs.  Target median <= 2 ms.
 */
#include "fence.h"
#include "scriptload.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <pthread.h>
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

/* This process's CPU time (user + system, all threads). */
static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile (nearest rank) of v[0..n), sorting v. */
static double quantile(double *v, size_t n, double q)
{
    qsort(v, n, sizeof *v, cmp_double);
    size_t i = (size_t)(q * (double)n + 0.999999);
    if (i < 1) {
        i = 1;
    }
    if (i > n) {
        i = n;
    }
    return v[i - 1];
}

static void die(const char *what, int rc, const fence_client *c)
{
    fprintf(stderr, "bench_lease: %s: %s (%s)\n", what, fence_status_name(rc),
            c != NULL ? fence_client_errmsg(c) : "no handle");
    exit(1);
}

static const char *env_or_die(const char *name)
{
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0') {
        fprintf(stderr, "bench_lease: %s is not set: run it with 'make bench' "
                        "(scripts/with-servers starts Redis)\n", name);
        exit(1);
    }
    return v;
}

static fence_client *open_client(const char *url, int mode)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url;
    o.heartbeat_mode = mode;
    fence_client *c = NULL;
    int rc = fence_client_open(&c, &o);
    if (rc != FENCE_OK) {
        die("fence_client_open", rc, c);
    }
    return c;
}

static redisContext *raw_redis(int port)
{
    struct timeval tv = {5, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (r == NULL || r->err) {
        fprintf(stderr, "bench_lease: cannot connect to Redis on port %d: %s\n", port,
                r ? r->errstr : "out of memory");
        exit(1);
    }
    redisSetTimeout(r, tv);
    return r;
}

static long long info_commands(redisContext *r)
{
    redisReply *rep = redisCommand(r, "INFO stats");
    if (rep == NULL || rep->type != REDIS_REPLY_STRING) {
        fprintf(stderr, "bench_lease: INFO stats failed\n");
        exit(1);
    }
    const char *p = strstr(rep->str, "total_commands_processed:");
    long long v = p != NULL ? atoll(p + strlen("total_commands_processed:")) : -1;
    freeReplyObject(rep);
    return v;
}

/* Script calls (EVAL + EVALSHA) and the server time they took, from INFO
 * commandstats: the top-level commands, not the calls inside scripts. */
static void info_scripts(redisContext *r, long long *calls, long long *usec)
{
    redisReply *rep = redisCommand(r, "INFO commandstats");
    if (rep == NULL || rep->type != REDIS_REPLY_STRING) {
        fprintf(stderr, "bench_lease: INFO commandstats failed\n");
        exit(1);
    }
    *calls = 0;
    *usec = 0;
    const char *names[] = {"cmdstat_evalsha:", "cmdstat_eval:"};
    for (int i = 0; i < 2; i++) {
        const char *p = strstr(rep->str, names[i]);
        long long c = 0, u = 0;
        if (p != NULL && sscanf(p + strlen(names[i]), "calls=%lld,usec=%lld", &c, &u) == 2) {
            *calls += c;
            *usec += u;
        }
    }
    freeReplyObject(rep);
}

/* ------------------------------------------------------------------ */
/* 1. acquire+release vs SET NX PX + DEL                                */
/* ------------------------------------------------------------------ */

enum { CYCLE_ROUNDS = 9, CYCLES_PER_ROUND = 2000 };

/* Nanoseconds per library cycle in one round. */
static double lib_round(fence_client *c, const char *name)
{
    int64_t t0 = now_ns();
    for (int i = 0; i < CYCLES_PER_ROUND; i++) {
        fence_lease *l = NULL;
        int rc = fence_try_acquire(c, name, 60000, &l);
        if (rc != FENCE_OK) {
            die("fence_try_acquire", rc, c);
        }
        rc = fence_release(l);
        if (rc != FENCE_OK) {
            die("fence_release", rc, c);
        }
    }
    return (double)(now_ns() - t0) / CYCLES_PER_ROUND;
}

static double bare_round(redisContext *r, const char *key)
{
    int64_t t0 = now_ns();
    for (int i = 0; i < CYCLES_PER_ROUND; i++) {
        redisReply *a = redisCommand(r, "SET %s %s NX PX %d", key,
                                     "0123456789abcdef0123456789abcdef:1", 60000);
        if (a == NULL || a->type != REDIS_REPLY_STATUS) {
            fprintf(stderr, "bench_lease: SET NX failed\n");
            exit(1);
        }
        freeReplyObject(a);
        redisReply *d = redisCommand(r, "DEL %s", key);
        if (d == NULL || d->type != REDIS_REPLY_INTEGER || d->integer != 1) {
            fprintf(stderr, "bench_lease: DEL failed\n");
            exit(1);
        }
        freeReplyObject(d);
    }
    return (double)(now_ns() - t0) / CYCLES_PER_ROUND;
}

/* The library's two scripts by bare hiredis, with the arguments the
 * library sends (MONITOR of lib_round): the library's server work, no
 * library client code.  Nanoseconds per cycle. */
static double scripts_round(redisContext *r, const char *acq, const char *rel, const char *name)
{
    const char *holder = "0123456789abcdef0123456789abcdef";
    char key[96], counter[112], channel[112], value[96];
    snprintf(key, sizeof key, "fence:{%s}", name);
    snprintf(counter, sizeof counter, "%s:token", key);
    snprintf(channel, sizeof channel, "%s:released", key);
    int64_t t0 = now_ns();
    for (int i = 0; i < CYCLES_PER_ROUND; i++) {
        redisReply *a = redisCommand(r, "EVALSHA %s 2 %s %s %s 60000 clock 10000000 0 86400000",
                                     acq, key, counter, holder);
        if (a == NULL || a->type != REDIS_REPLY_ARRAY || a->elements < 2 ||
            a->element[0]->type != REDIS_REPLY_INTEGER || a->element[0]->integer != 1 ||
            a->element[1]->type != REDIS_REPLY_STRING) {
            fprintf(stderr, "bench_lease: EVALSHA acquire.lua: no token\n");
            exit(1);
        }
        snprintf(value, sizeof value, "%s:%s", holder, a->element[1]->str);
        freeReplyObject(a);
        redisReply *d = redisCommand(r, "EVALSHA %s 1 %s %s %s", rel, key, value, channel);
        if (d == NULL || d->type != REDIS_REPLY_INTEGER || d->integer != 1) {
            fprintf(stderr, "bench_lease: EVALSHA release.lua did not delete the lease\n");
            exit(1);
        }
        freeReplyObject(d);
    }
    return (double)(now_ns() - t0) / CYCLES_PER_ROUND;
}

static void bench_cycles(const char *url, int port)
{
    fence_client *c = open_client(url, FENCE_HEARTBEAT_THREAD);
    redisContext *r = raw_redis(port);
    char name[64], key[96], sname[80], acq[41], rel[41];
    snprintf(name, sizeof name, "bench-cycle-%ld", (long)getpid());
    snprintf(key, sizeof key, "bench-bare:{%s}", name);
    snprintf(sname, sizeof sname, "%s-hiredis", name);
    bench_load_script(r, "lib/lease/redis/issue.lua", "lib/lease/redis/acquire.lua", acq);
    bench_load_script(r, "lib/lease/redis/release.lua", NULL, rel);
    lib_round(c, name); /* warm-up: connections, script cache, counters */
    scripts_round(r, acq, rel, sname);
    bare_round(r, key);
    double lib[CYCLE_ROUNDS], scr[CYCLE_ROUNDS], bare[CYCLE_ROUNDS];
    double cpu[3][CYCLE_ROUNDS]; /* this process's CPU per cycle: library, scripts, bare */
    for (int i = 0; i < CYCLE_ROUNDS; i++) { /* ABCABC */
        int64_t c0 = cpu_ns();
        lib[i] = lib_round(c, name);
        int64_t c1 = cpu_ns();
        scr[i] = scripts_round(r, acq, rel, sname);
        int64_t c2 = cpu_ns();
        bare[i] = bare_round(r, key);
        int64_t c3 = cpu_ns();
        cpu[0][i] = (double)(c1 - c0) / CYCLES_PER_ROUND;
        cpu[1][i] = (double)(c2 - c1) / CYCLES_PER_ROUND;
        cpu[2][i] = (double)(c3 - c2) / CYCLES_PER_ROUND;
    }
    double lib_ns = quantile(lib, CYCLE_ROUNDS, 0.5);
    double scr_ns = quantile(scr, CYCLE_ROUNDS, 0.5);
    double bare_ns = quantile(bare, CYCLE_ROUNDS, 0.5);
    printf("acquire_release_us %.2f us\n", lib_ns / 1e3);
    printf("setnx_del_us %.2f us\n", bare_ns / 1e3);
    printf("acquire_release_per_s %.0f cycles/s\n", 1e9 / lib_ns);
    printf("setnx_del_per_s %.0f cycles/s\n", 1e9 / bare_ns);
    printf("acquire_release_vs_setnx_ratio %.2f x\n", lib_ns / bare_ns);
    printf("# the difference split: the library's scripts by bare hiredis (its server work, "
           "no library client code)\n");
    printf("scripts_by_hiredis_us %.2f us\n", scr_ns / 1e3);
    printf("scripts_by_hiredis_vs_setnx_ratio %.2f x\n", scr_ns / bare_ns);
    printf("library_client_us_per_cycle %.2f us\n", (lib_ns - scr_ns) / 1e3);
    printf("# client CPU per cycle (user + system, this process: the library's heartbeat "
           "thread included)\n");
    printf("acquire_release_client_cpu_us %.2f us\n", quantile(cpu[0], CYCLE_ROUNDS, 0.5) / 1e3);
    printf("scripts_by_hiredis_client_cpu_us %.2f us\n", quantile(cpu[1], CYCLE_ROUNDS, 0.5) / 1e3);
    printf("setnx_del_client_cpu_us %.2f us\n", quantile(cpu[2], CYCLE_ROUNDS, 0.5) / 1e3);
    fflush(stdout);
    redisFree(r);
    fence_client_close(c);
}

/* ------------------------------------------------------------------ */
/* 2. one renewal pass over 10,000 leases                               */
/* ------------------------------------------------------------------ */

enum { NLEASES = 10000, RENEW_PASSES = 5 };

static void bench_renew(const char *url, int port)
{
    fence_client *c = open_client(url, FENCE_HEARTBEAT_MANUAL);
    redisContext *r = raw_redis(port);
    char base[64];
    snprintf(base, sizeof base, "bench-renew-%ld", (long)getpid());
    fence_lease **ls = calloc(NLEASES, sizeof *ls);
    if (ls == NULL) {
        fprintf(stderr, "bench_lease: out of memory\n");
        exit(1);
    }
    int64_t a0 = now_ns();
    for (int i = 0; i < NLEASES; i++) {
        char nm[96];
        snprintf(nm, sizeof nm, "%s-%d", base, i);
        fence_lease_options lo;
        fence_lease_options_init(&lo, 60000);
        lo.renew_every_ms = 1; /* every lease is due at every pass */
        int rc = fence_acquire(c, nm, &lo, &ls[i]);
        if (rc != FENCE_OK) {
            die("fence_acquire (10k)", rc, c);
        }
    }
    printf("acquire_10k_s %.2f s\n", (double)(now_ns() - a0) / 1e9);

    double pass_ms[RENEW_PASSES], server_ms[RENEW_PASSES];
    long long commands[RENEW_PASSES], scripts[RENEW_PASSES];
    uint64_t trips[RENEW_PASSES];
    for (int p = 0; p < RENEW_PASSES; p++) {
        sleep_ms(3);
        fence_metrics m0, m1;
        fence_client_metrics(c, &m0);
        long long sc0, us0, sc1, us1;
        info_scripts(r, &sc0, &us0);
        long long cmd0 = info_commands(r);
        int64_t t0 = now_ns();
        int64_t next = 0;
        int rc = fence_heartbeat_run(c, &next);
        int64_t t1 = now_ns();
        long long cmd1 = info_commands(r);
        info_scripts(r, &sc1, &us1);
        fence_client_metrics(c, &m1);
        if (rc != FENCE_OK) {
            die("fence_heartbeat_run", rc, c);
        }
        if (m1.renew_ok - m0.renew_ok != NLEASES || m1.leases_held != NLEASES) {
            fprintf(stderr, "bench_lease: the pass renewed %" PRIu64 " of %d leases (%" PRIu64
                            " held)\n", m1.renew_ok - m0.renew_ok, NLEASES, m1.leases_held);
            exit(1);
        }
        pass_ms[p] = (double)(t1 - t0) / 1e6;
        commands[p] = cmd1 - cmd0 - 1; /* minus the first INFO itself */
        scripts[p] = sc1 - sc0;
        server_ms[p] = (double)(us1 - us0) / 1e3;
        trips[p] = m1.heartbeat_latency_count - m0.heartbeat_latency_count;
    }
    double first = pass_ms[0];
    printf("renew_10k_pass_ms %.2f ms\n", quantile(pass_ms, RENEW_PASSES, 0.5));
    printf("renew_10k_first_pass_ms %.2f ms\n", first);
    printf("renew_10k_round_trips %" PRIu64 " round_trips\n", trips[RENEW_PASSES - 1]);
    printf("renew_10k_script_calls %lld calls\n", scripts[RENEW_PASSES - 1]);
    printf("renew_10k_redis_commands %lld commands\n", commands[RENEW_PASSES - 1]);
    printf("renew_10k_server_ms %.2f ms\n", quantile(server_ms, RENEW_PASSES, 0.5));
    fflush(stdout);
    int64_t r0 = now_ns();
    for (int i = 0; i < NLEASES; i++) {
        int rc = fence_release(ls[i]);
        if (rc != FENCE_OK) {
            die("fence_release (10k)", rc, c);
        }
    }
    printf("release_10k_s %.2f s\n", (double)(now_ns() - r0) / 1e9);
    free(ls);
    redisFree(r);
    fence_client_close(c);
}

/* ------------------------------------------------------------------ */
/* 3. hand-off latency, 4 waiters                                       */
/* ------------------------------------------------------------------ */

enum { NWAITERS = 4, NWORKERS = NWAITERS + 1, HANDOFFS = 200 };

typedef struct handoff {
    const char *url;
    char name[64];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int won_round;  /* the last round someone won (-1: none yet) */
    int go_round;   /* the holder of this round may release */
    int stop;
    atomic_int_least64_t t_release; /* ns, just before fence_release */
    int64_t t_acquired;             /* ns, when the winner's acquire returned */
    int failed;
} handoff;

static void *handoff_worker(void *arg)
{
    handoff *h = arg;
    fence_client *c = open_client(h->url, FENCE_HEARTBEAT_THREAD);
    for (;;) {
        fence_lease_options lo;
        fence_lease_options_init(&lo, 30000);
        lo.wait_ms = 20000;
        fence_lease *l = NULL;
        int rc = fence_acquire(c, h->name, &lo, &l);
        int64_t t = now_ns();
        pthread_mutex_lock(&h->mu);
        if (rc != FENCE_OK) {
            fprintf(stderr, "bench_lease: waiter: %s (%s)\n", fence_status_name(rc),
                    fence_client_errmsg(c));
            h->failed = 1;
            h->stop = 1;
            pthread_cond_broadcast(&h->cv);
            pthread_mutex_unlock(&h->mu);
            break;
        }
        if (h->stop) {
            pthread_mutex_unlock(&h->mu);
            fence_release(l); /* wakes the next one, which stops too */
            break;
        }
        int round = ++h->won_round;
        h->t_acquired = t;
        pthread_cond_broadcast(&h->cv);
        while (h->go_round < round && !h->stop) {
            pthread_cond_wait(&h->cv, &h->mu);
        }
        pthread_mutex_unlock(&h->mu);
        atomic_store(&h->t_release, now_ns());
        fence_release(l);
        /* Rejoin only once another waiter has won: the hand-off goes to a
         * thread that was waiting, never back to the releaser. */
        pthread_mutex_lock(&h->mu);
        while (h->won_round <= round && !h->stop) {
            pthread_cond_wait(&h->cv, &h->mu);
        }
        pthread_mutex_unlock(&h->mu);
    }
    fence_client_close(c);
    return NULL;
}

static void bench_handoff(const char *url)
{
    handoff *h = calloc(1, sizeof *h);
    if (h == NULL) {
        exit(1);
    }
    h->url = url;
    snprintf(h->name, sizeof h->name, "bench-handoff-%ld", (long)getpid());
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    h->won_round = -1;
    h->go_round = -1;
    pthread_t th[NWORKERS];
    for (int i = 0; i < NWORKERS; i++) {
        pthread_create(&th[i], NULL, handoff_worker, h);
    }
    double lat[HANDOFFS];
    int n = 0;
    pthread_mutex_lock(&h->mu);
    for (int round = 0; round <= HANDOFFS && !h->stop; round++) {
        while (h->won_round < round && !h->stop) {
            pthread_cond_wait(&h->cv, &h->mu);
        }
        if (h->stop) {
            break;
        }
        if (round > 0) {
            lat[n++] = (double)(h->t_acquired - atomic_load(&h->t_release)) / 1e6;
        }
        if (round == HANDOFFS) {
            break;
        }
        /* Let the last holder get back into its wait: 4 waiters each time.
         * Round 0 also waits for every client to connect. */
        pthread_mutex_unlock(&h->mu);
        sleep_ms(round == 0 ? 300 : 3);
        pthread_mutex_lock(&h->mu);
        h->go_round = round;
        pthread_cond_broadcast(&h->cv);
    }
    h->stop = 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    for (int i = 0; i < NWORKERS; i++) {
        pthread_join(th[i], NULL);
    }
    int failed = h->failed;
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h);
    if (failed || n == 0) {
        fprintf(stderr, "bench_lease: hand-off run failed after %d hand-offs\n", n);
        exit(1);
    }
    double med = quantile(lat, (size_t)n, 0.5);
    double p99 = quantile(lat, (size_t)n, 0.99);
    printf("handoff_median_ms %.3f ms\n", med);
    printf("handoff_p99_ms %.3f ms\n", p99);
    printf("handoff_max_ms %.3f ms\n", lat[n - 1]);
    printf("handoff_count %d handoffs\n", n);
    fflush(stdout);
}

int main(void)
{
    const char *url = env_or_die("FENCE_TEST_REDIS_URL");
    int port = atoi(env_or_die("FENCE_TEST_REDIS_PORT"));
    int64_t t0 = now_ns();
    bench_cycles(url, port);
    bench_renew(url, port);
    bench_handoff(url);
    printf("bench_lease_total_s %.1f s\n", (double)(now_ns() - t0) / 1e9);
    return 0;
}
