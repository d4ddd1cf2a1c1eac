/*
 * bench_python_c.c -- the C side of tests/bench/bench_python.py: the same
 * acquire+release cycle as the Python package's (fence_acquire with try
 * once and the heartbeat thread on, then fence_release, one name, one
 * client), timed here in C.  Usage: bench_python_c URL NAME TTL_MS; then
 * for each line "N" on stdin it runs N cycles and prints one line, the
 * nanoseconds per cycle; EOF ends it.  A failed call prints its status and
 * message on stderr and exits 1.  Not a benchmark of its own (make bench
 * runs bench_python, which drives it).
 */
#include "fence.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what, fence_status st, fence_client *c)
{
    fprintf(stderr, "bench_python_c: %s: %s: %s\n", what, fence_status_name(st),
            fence_client_errmsg(c));
    exit(1);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: bench_python_c URL NAME TTL_MS\n");
        return 64;
    }
    fence_client *c = NULL;
    fence_status st = fence_client_open_url(&c, argv[1]);
    if (st != FENCE_OK) {
        die("open", st, c);
    }
    long long ttl = atoll(argv[3]);
    long n;
    while (scanf("%ld", &n) == 1) {
        long long t0 = now_ns();
        for (long i = 0; i < n; i++) {
            fence_lease_options o;
            fence_lease *l = NULL;
            fence_lease_options_init(&o, ttl);
            st = fence_acquire(c, argv[2], &o, &l);
            if (st != FENCE_OK) {
                die("fence_acquire", st, c);
            }
            st = fence_release(l);
            if (st != FENCE_OK) {
                die("fence_release", st, c);
            }
        }
        printf("%.1f\n", n > 0 ? (double)(now_ns() - t0) / (double)n : 0.0);
        fflush(stdout);
    }
    fence_client_close(c);
    return 0;
}
