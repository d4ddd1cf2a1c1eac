/*
 * bench_tls.c -- acquire_release_tls_vs_plain_ratio (issue 9, goal <= 1.3):
 * try-acquire + release of one name through the library, on one Redis
 * that listens both plain and TLS (scripts/redis-set tls, with a CA and a
 * server certificate made here by openssl in a temporary folder under
 * $FENCE_TEST_SPAWN_DIR).  Rounds interleaved plain/TLS; medians of
 * per-round times; connections are made once (TLS handshakes are not in
 * the figure: the steady state is).  One figure per line: "name value unit".
 *
 * Run:  make B=build/h-T build/h-T/tests/bench/bench_tls
 *       scripts/with-servers -- build/h-T/tests/bench/bench_tls
 * (with-servers provides FENCE_TEST_REDIS_SET and FENCE_TEST_SPAWN_DIR and
 * stops whatever is left in the spawn folder).
 */
#include "fence.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 15
#define PER_ROUND 300

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

static void die(const char *what, fence_client *c)
{
    fprintf(stderr, "bench_tls: %s%s%s\n", what, c ? ": " : "", c ? fence_client_errmsg(c) : "");
    exit(1);
}

/* Make the certificates and start the set; fills the ports. */
static void start(const char *dir, const char *certs, int *plain, int *tls)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s' && cd '%s' && "
             "printf 'subjectAltName=IP:127.0.0.1\\n' > server.ext && "
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout ca.key -out ca.crt -days 2 -subj /CN=bench-ca 2>/dev/null && "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout server.key -out server.csr -subj /CN=127.0.0.1 2>/dev/null && "
             "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
             "-out server.crt -days 2 -extfile server.ext 2>/dev/null",
             certs, certs);
    if (system(cmd) != 0) {
        die("openssl failed", NULL);
    }
    setenv("FENCE_TLS_DIR", certs, 1);
    snprintf(cmd, sizeof cmd, "'%s' start '%s' tls", getenv("FENCE_TEST_REDIS_SET"), dir);
    if (system(cmd) != 0) {
        die("redis-set start failed", NULL);
    }
    char env[1200], line[128];
    snprintf(env, sizeof env, "%s/env", dir);
    FILE *f = fopen(env, "r");
    if (f == NULL) {
        die("no env file", NULL);
    }
    while (fgets(line, sizeof line, f) != NULL) {
        sscanf(line, "MASTER_PORT=%d", plain);
        sscanf(line, "TLS_PORT=%d", tls);
    }
    fclose(f);
}

static fence_client *open_client(const char *url, const char *ca)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url;
    o.tls_ca_file = ca;
    fence_client *c = NULL;
    if (fence_client_open(&c, &o) != FENCE_OK) {
        die("open", c);
    }
    return c;
}

static int64_t round_ns(fence_client *c, const char *name)
{
    int64_t t0 = now_ns();
    for (int i = 0; i < PER_ROUND; i++) {
        fence_lease *l = NULL;
        if (fence_try_acquire(c, name, 30000, &l) != FENCE_OK || fence_release(l) != FENCE_OK) {
            die("acquire/release", c);
        }
    }
    return now_ns() - t0;
}

int main(void)
{
    const char *spawn = getenv("FENCE_TEST_SPAWN_DIR");
    if (spawn == NULL || getenv("FENCE_TEST_REDIS_SET") == NULL) {
        die("run under scripts/with-servers", NULL);
    }
    char dir[1024], certs[1100], plain_url[64], tls_url[64], ca[1200];
    snprintf(dir, sizeof dir, "%s/bench-tls", spawn);
    snprintf(certs, sizeof certs, "%s/bench-tls-certs", spawn);
    int plain = 0, tls = 0;
    start(dir, certs, &plain, &tls);
    snprintf(plain_url, sizeof plain_url, "redis://127.0.0.1:%d", plain);
    snprintf(tls_url, sizeof tls_url, "rediss://127.0.0.1:%d", tls);
    snprintf(ca, sizeof ca, "%s/ca.crt", certs);
    fence_client *p = open_client(plain_url, NULL);
    fence_client *t = open_client(tls_url, ca);
    int64_t a[ROUNDS], b[ROUNDS];
    round_ns(p, "bench-tls-warm");
    round_ns(t, "bench-tls-warm");
    for (int r = 0; r < ROUNDS; r++) {
        a[r] = round_ns(p, "bench-tls-plain");
        b[r] = round_ns(t, "bench-tls-tls");
    }
    fence_client_close(p);
    fence_client_close(t);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' stop '%s'", getenv("FENCE_TEST_REDIS_SET"), dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_tls: %s failed\n", cmd);
    }
    qsort(a, ROUNDS, sizeof a[0], cmp64);
    qsort(b, ROUNDS, sizeof b[0], cmp64);
    double pa = (double)a[ROUNDS / 2] / PER_ROUND / 1000.0;
    double pb = (double)b[ROUNDS / 2] / PER_ROUND / 1000.0;
    printf("acquire_release_plain_us %.1f us\n", pa);
    printf("acquire_release_tls_us %.1f us\n", pb);
    printf("acquire_release_tls_vs_plain_ratio %.2f x\n", pb / pa);
    return 0;
}
