/*
 * bench_cluster.c -- issue 9, Redis Cluster: renew_10k_cluster_round_trips_per_node
 * (goal 1) and renew_10k_cluster_pass_ms.  10,000 leases spread over the
 * three masters of a cluster of its own (scripts/redis-set cluster, on
 * loopback, stopped on every exit, also on failure), all due at once; one
 * manual heartbeat pass renews them all.  A round trip is one flush of the
 * commands queued for a node followed by reading their replies: the
 * library's internal counters (lease_internal.h) count them per pass.
 * Median of PASSES passes.  One figure per line: "name value unit".
 *
 * Run:  make B=build/h-C build/h-C/tests/bench/bench_cluster
 *       scripts/with-servers -- build/h-C/tests/bench/bench_cluster
 */
#include "lease_internal.h"
#include "redis/rissuer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LEASES 10000
#define PASSES 7

static char set_dir[1024];

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void stop_set(void)
{
    if (set_dir[0] == '\0') {
        return;
    }
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' stop '%s'", getenv("FENCE_TEST_REDIS_SET"), set_dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_cluster: %s failed\n", cmd);
    }
    set_dir[0] = '\0';
}

static void die(const char *what, fence_client *c)
{
    fprintf(stderr, "bench_cluster: %s%s%s\n", what, c ? ": " : "", c ? fence_client_errmsg(c) : "");
    exit(1); /* atexit: the cluster is stopped */
}

static int start(void)
{
    const char *spawn = getenv("FENCE_TEST_SPAWN_DIR");
    if (spawn == NULL || getenv("FENCE_TEST_REDIS_SET") == NULL) {
        die("run under scripts/with-servers", NULL);
    }
    snprintf(set_dir, sizeof set_dir, "%s/bench-cluster", spawn);
    atexit(stop_set);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' start '%s' cluster", getenv("FENCE_TEST_REDIS_SET"), set_dir);
    if (system(cmd) != 0) {
        die("redis-set start cluster failed", NULL);
    }
    char env[1200], line[256];
    int port = 0;
    snprintf(env, sizeof env, "%s/env", set_dir);
    FILE *f = fopen(env, "r");
    if (f == NULL) {
        die("no env file", NULL);
    }
    while (fgets(line, sizeof line, f) != NULL) {
        sscanf(line, "MASTER_PORT=%d", &port);
    }
    fclose(f);
    return port;
}

int main(void)
{
    int port = start();
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url;
    o.heartbeat_mode = FENCE_HEARTBEAT_MANUAL;
    o.renew_batch = 5000;
    fence_client *c = NULL;
    if (fence_client_open(&c, &o) != FENCE_OK || c->iss->rd.cl == NULL) {
        die("open (a cluster)", c);
    }
    static fence_lease *ls[LEASES];
    for (int i = 0; i < LEASES; i++) {
        char name[32];
        snprintf(name, sizeof name, "bench-cl-%d", i);
        fence_lease_options lo;
        fence_lease_options_init(&lo, 60000);
        lo.renew_every_ms = 1; /* due at every pass */
        if (fence_acquire(c, name, &lo, &ls[i]) != FENCE_OK) {
            die("acquire", c);
        }
    }
    int64_t ms[PASSES], rt[PASSES], nodes = 0;
    for (int p = 0; p < PASSES; p++) {
        fence__sleep_us(2000);
        int64_t t0 = now_ns(), next = 0;
        if (fence_heartbeat_run(c, &next) != FENCE_OK) {
            die("heartbeat pass", c);
        }
        ms[p] = now_ns() - t0;
        nodes = (int64_t)atomic_load(&c->iss->rd.cl->hb_last_nodes);
        rt[p] = (int64_t)atomic_load(&c->iss->rd.cl->hb_last_round_trips);
        if (nodes != 3) {
            die("a pass did not reach all three masters", c);
        }
    }
    for (int i = 0; i < LEASES; i++) {
        fence_release(ls[i]);
    }
    fence_client_close(c);
    stop_set();
    qsort(ms, PASSES, sizeof ms[0], cmp64);
    qsort(rt, PASSES, sizeof rt[0], cmp64);
    printf("renew_10k_cluster_round_trips_per_node %.2f rt\n", (double)rt[PASSES - 1] / (double)nodes);
    printf("renew_10k_cluster_pass_ms %.2f ms\n", (double)ms[PASSES / 2] / 1e6);
    return 0;
}
