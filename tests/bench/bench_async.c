/* bench_async.c -- issue 20: async_64_inflight_vs_blocking_ratio (goal
 * >= 5).  One thread either way: 64 acquire+release cycles in flight at
 * once through the asynchronous API (each slot acquires, releases when
 * that came, acquires again), against the blocking API doing the same
 * one cycle at a time.  Cycles per second over rounds of ROUND_MS, ABAB,
 * medians (the machine is shared and noisy: the ratio is what counts).
 * Needs FENCE_TEST_REDIS_URL (scripts/with-servers, scripts/run-bench). */
#include "fence_async.h"

#include <hiredis/hiredis.h>

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 64
#define ROUNDS 5
#define ROUND_MS 1000

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void die(const char *what, fence_status st, const char *msg)
{
    fprintf(stderr, "bench_async: %s: %s: %s\n", what, fence_status_name(st), msg);
    exit(1);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

/* The server's time in script calls so far (INFO commandstats, EVALSHA and
 * EVAL), in microseconds: what bounds the cycles any client can do. */
static double script_usec(redisContext *r)
{
    redisReply *rep = redisCommand(r, "INFO commandstats");
    if (rep == NULL || rep->type != REDIS_REPLY_STRING) {
        die("INFO commandstats", FENCE_ECONN, r->errstr);
    }
    double total = 0;
    const char *names[2] = {"cmdstat_evalsha:", "cmdstat_eval:"};
    for (int i = 0; i < 2; i++) {
        const char *p = strstr(rep->str, names[i]);
        const char *u = p != NULL ? strstr(p, "usec=") : NULL;
        if (u != NULL) {
            total += strtod(u + 5, NULL);
        }
    }
    freeReplyObject(rep);
    return total;
}

/* ---- the asynchronous side ---------------------------------------------------- */

typedef struct bench bench;
typedef struct slot {
    bench *b;
    char name[64];
} slot;
struct bench {
    fence_async *a;
    slot s[SLOTS];
    long cycles;
    int stop, running;
    fence_lease_options lo;
};

static void start(slot *s);

static void released(fence_async *a, fence_status st, const char *msg, void *user)
{
    slot *s = user;
    (void)a;
    if (st != FENCE_OK) {
        die("release", st, msg);
    }
    s->b->cycles++;
    if (s->b->stop) {
        s->b->running--;
    } else {
        start(s);
    }
}

static void acquired(fence_async *a, fence_status st, fence_lease *l, int64_t pttl,
                     const char *msg, void *user)
{
    (void)pttl;
    if (st != FENCE_OK) {
        die("acquire", st, msg);
    }
    fence_status rs = fence_async_release(a, l, released, user);
    if (rs != FENCE_OK) {
        die("release", rs, fence_async_errmsg(a));
    }
}

static void start(slot *s)
{
    fence_status st = fence_async_acquire(s->b->a, s->name, &s->b->lo, acquired, s);
    if (st != FENCE_OK) {
        die("acquire", st, fence_async_errmsg(s->b->a));
    }
}

/* Drive the handle until the slots are all idle again (or 10 s). */
static void drive(bench *b, int64_t until_ms)
{
    int64_t hard = now_ms() + 10000;
    while (b->running > 0 && now_ms() < hard) {
        if (!b->stop && now_ms() >= until_ms) {
            b->stop = 1;
        }
        int ev = fence_async_events(b->a);
        struct pollfd p = {fence_async_fd(b->a), (short)((ev & FENCE_ASYNC_READ ? POLLIN : 0) |
                                                         (ev & FENCE_ASYNC_WRITE ? POLLOUT : 0)), 0};
        int64_t to = fence_async_timeout_ms(b->a);
        poll(&p, p.fd >= 0 ? 1 : 0, to < 0 || to > 10 ? 10 : (int)to);
        fence_async_handle(b->a, (p.revents & (POLLIN | POLLERR | POLLHUP) ? FENCE_ASYNC_READ : 0) |
                                     (p.revents & POLLOUT ? FENCE_ASYNC_WRITE : 0));
    }
    if (b->running > 0) {
        die("drive", FENCE_TIMEOUT, "the slots did not finish within 10 s");
    }
}

static double async_round(bench *b, int round)
{
    for (int i = 0; i < SLOTS; i++) {
        b->s[i].b = b;
        snprintf(b->s[i].name, sizeof b->s[i].name, "bench-async-%ld-%d-%d", (long)getpid(),
                 round, i);
    }
    b->cycles = 0;
    b->stop = 0;
    b->running = SLOTS;
    int64_t t0 = now_ms();
    for (int i = 0; i < SLOTS; i++) {
        start(&b->s[i]);
    }
    drive(b, t0 + ROUND_MS);
    return (double)b->cycles * 1000.0 / (double)(now_ms() - t0);
}

/* ---- the blocking side --------------------------------------------------------- */

static double blocking_round(fence_client *c, int round)
{
    char name[64];
    snprintf(name, sizeof name, "bench-block-%ld-%d", (long)getpid(), round);
    long n = 0;
    int64_t t0 = now_ms(), end = t0 + ROUND_MS;
    while (now_ms() < end) {
        fence_lease *l = NULL;
        fence_status st = fence_try_acquire(c, name, 10000, &l);
        if (st != FENCE_OK) {
            die("blocking acquire", st, fence_client_errmsg(c));
        }
        st = fence_release(l);
        if (st != FENCE_OK) {
            die("blocking release", st, fence_client_errmsg(c));
        }
        n++;
    }
    return (double)n * 1000.0 / (double)(now_ms() - t0);
}

int main(void)
{
    const char *url = getenv("FENCE_TEST_REDIS_URL");
    if (url == NULL || url[0] == '\0') {
        fprintf(stderr, "bench_async: FENCE_TEST_REDIS_URL is not set (run it under "
                "scripts/with-servers)\n");
        return 1;
    }
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url;
    o.heartbeat_mode = FENCE_HEARTBEAT_MANUAL; /* one thread either way */
    fence_client *c = NULL;
    fence_status st = fence_client_open(&c, &o);
    if (st != FENCE_OK) {
        die("fence_client_open", st, fence_client_errmsg(c));
    }
    bench b;
    memset(&b, 0, sizeof b);
    fence_lease_options_init(&b.lo, 10000);
    st = fence_async_open(&b.a, &o);
    if (st != FENCE_OK) {
        die("fence_async_open", st, fence_async_errmsg(b.a));
    }
    async_round(&b, -1); /* warm-up: connect, load, check */
    blocking_round(c, -1);
    char host[256];
    int port = 0;
    if (sscanf(url, "redis://%255[^:]:%d", host, &port) != 2) {
        die("FENCE_TEST_REDIS_URL", FENCE_EINVAL, "not redis://host:port");
    }
    redisContext *r = redisConnect(host, port);
    if (r == NULL || r->err) {
        die("connect", FENCE_ECONN, r != NULL ? r->errstr : "out of memory");
    }
    double as[ROUNDS], bl[ROUNDS], us[ROUNDS];
    for (int i = 0; i < ROUNDS; i++) { /* ABAB */
        bl[i] = blocking_round(c, i);
        double before = script_usec(r);
        long cycles0 = b.cycles = 0;
        as[i] = async_round(&b, i);
        us[i] = (script_usec(r) - before) / (double)(b.cycles > cycles0 ? b.cycles : 1);
    }
    redisFree(r);
    double x = median(as, ROUNDS), y = median(bl, ROUNDS), u = median(us, ROUNDS);
    printf("# one thread: %d acquire+release cycles in flight (async) vs one at a time "
           "(blocking), %d rounds of %d ms, ABAB, medians\n", SLOTS, ROUNDS, ROUND_MS);
    printf("async_64_inflight_per_s %.0f cycles/s\n", x);
    printf("blocking_1thread_per_s %.0f cycles/s\n", y);
    printf("async_64_inflight_vs_blocking_ratio %.2f x\n", x / y);
    /* The ceiling: one Redis runs scripts one at a time, so no client
     * cycles faster than 1 s / the server's script time per cycle. */
    printf("# the server's script time per async cycle (commandstats) and the rate it allows\n");
    printf("async_server_usec_per_cycle %.2f us\n", u);
    printf("async_64_inflight_vs_server_ceiling_ratio %.2f x\n", x / (1e6 / u));
    fence_async_close(b.a);
    fence_client_close(c);
    return 0;
}
