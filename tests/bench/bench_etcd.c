/*
 * bench_etcd.c -- the etcd issuer against baselines on the same etcd (the
 * one-member etcd of scripts/with-servers --etcd: FENCE_TEST_ETCD_URL).
 * One figure per line: "name value unit".
 *
 *  1. acquire+release through the library (one client, try-acquire and
 *     release of one name, heartbeat thread on, 10 s TTL) vs a floor: the
 *     same four gateway calls with the same bodies (lease grant; the
 *     acquire txn; the release txn; lease revoke) sent by a minimal C loop
 *     on one libcurl easy handle (one kept-alive connection), reading only
 *     the lease ID.  Rounds interleaved, medians of per-round times.
 *     Target etcd_acquire_release_vs_floor_ratio <= 1.2.
 *  2. Side by side on the same etcd: `etcdctl lock NAME true` per cycle (a
 *     process each: etcdctl's way to use a lock from a shell, as `fence
 *     run` is fence's), and python3-etcd3gw's Lock (acquire + release in
 *     one Python process: grant, txn, txn; it revokes nothing).
 *  3. Renewing 10,000 leases of one client (acquired through the issuer's
 *     ops, linked from the static libfence, with a 60 s TTL so that none
 *     expires meanwhile): one renewal call over all of them, as the
 *     heartbeat's pass makes it (issuer.h's renew on the heartbeat
 *     channel): its time, and the calls etcd counted per pass (its
 *     /metrics: one keepalive per etcd lease -- 100 names share one -- and
 *     one key-check txn per 128 names).
 */
#include "fence.h"
#include "issuer.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
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

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t median(int64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp64);
    return v[n / 2];
}

static const char *member;

/* ---- the floor: the same calls by a bare libcurl loop ---------------------------- */

/* A reply's bytes (the first cap - 1 of them), NUL-terminated. */
typedef struct buf {
    char *d;
    size_t n, cap;
} buf;

static size_t on_write(char *p, size_t size, size_t nmemb, void *arg)
{
    buf *b = arg;
    size_t n = size * nmemb;
    if (b->n + n < b->cap) {
        memcpy(b->d + b->n, p, n);
        b->n += n;
        b->d[b->n] = '\0';
    }
    return n;
}

static CURL *floor_h;
static char floor_bytes[8192];
static buf floor_buf = {floor_bytes, 0, sizeof floor_bytes};
static struct curl_slist *floor_hdr;

static void floor_post(const char *path, const char *body)
{
    char url[256];
    snprintf(url, sizeof url, "http://%s%s", member, path);
    curl_easy_setopt(floor_h, CURLOPT_URL, url);
    curl_easy_setopt(floor_h, CURLOPT_POSTFIELDS, body);
    floor_buf.n = 0;
    CURLcode cc = curl_easy_perform(floor_h);
    if (cc != CURLE_OK) {
        fprintf(stderr, "floor: %s: %s\n", path, curl_easy_strerror(cc));
        exit(1);
    }
}

/* The keys of the library's layout for name, base64 (fence/o/NAME,
 * fence/f/NAME): "bench-floor" gives these. */
#define FLOOR_OWNER "ZmVuY2Uvby9iZW5jaC1mbG9vcg=="
#define FLOOR_FLOOR "ZmVuY2UvZi9iZW5jaC1mbG9vcg=="
/* "<32 hex>:0" */
#define FLOOR_VALUE "MDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDA6MA=="

static void floor_cycle(void)
{
    char body[1024];
    floor_post("/v3/lease/grant", "{\"TTL\":10}");
    json_error_t je;
    json_t *r = json_loadb(floor_buf.d, floor_buf.n, 0, &je);
    const char *id = json_string_value(json_object_get(r, "ID"));
    if (id == NULL) {
        fprintf(stderr, "floor: grant: %s\n", floor_buf.d);
        exit(1);
    }
    char lease[24];
    snprintf(lease, sizeof lease, "%s", id);
    json_decref(r);
    snprintf(body, sizeof body,
             "{\"compare\":[{\"target\":\"CREATE\",\"key\":\"" FLOOR_OWNER
             "\",\"create_revision\":\"0\"},{\"target\":\"VERSION\",\"key\":\"" FLOOR_FLOOR
             "\",\"version\":\"0\"}],\"success\":[{\"request_put\":{\"key\":\"" FLOOR_OWNER
             "\",\"value\":\"" FLOOR_VALUE "\",\"lease\":\"%s\"}}],\"failure\":[{"
             "\"request_range\":{\"key\":\"" FLOOR_OWNER "\",\"keys_only\":false}},{"
             "\"request_range\":{\"key\":\"" FLOOR_FLOOR "\",\"keys_only\":false}}]}",
             lease);
    floor_post("/v3/kv/txn", body);
    const char *rev = strstr(floor_buf.d, "\"revision\":\"");
    if (strstr(floor_buf.d, "\"succeeded\":true") == NULL || rev == NULL) {
        fprintf(stderr, "floor: acquire: %s\n", floor_buf.d);
        exit(1);
    }
    long long revision = atoll(rev + 12);
    snprintf(body, sizeof body,
             "{\"compare\":[{\"target\":\"LEASE\",\"key\":\"" FLOOR_OWNER "\",\"lease\":\"%s\"},"
             "{\"target\":\"MOD\",\"key\":\"" FLOOR_OWNER "\",\"mod_revision\":\"%lld\"}],"
             "\"success\":[{\"request_delete_range\":{\"key\":\"" FLOOR_OWNER "\"}}]}",
             lease, revision);
    floor_post("/v3/kv/txn", body);
    snprintf(body, sizeof body, "{\"ID\":\"%s\"}", lease);
    floor_post("/v3/lease/revoke", body);
}

/* ---- 1: library vs floor ------------------------------------------------------------ */

static void vs_floor(void)
{
    enum { ROUNDS = 15, PER = 40 };
    fence_client *c = NULL;
    char url[200];
    snprintf(url, sizeof url, "etcd://%s", member);
    if (fence_client_open_url(&c, url) != FENCE_OK) {
        fprintf(stderr, "bench_etcd: open %s: %s\n", url, fence_client_errmsg(c));
        exit(1);
    }
    floor_h = curl_easy_init();
    floor_hdr = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(floor_h, CURLOPT_HTTPHEADER, floor_hdr);
    curl_easy_setopt(floor_h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(floor_h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(floor_h, CURLOPT_WRITEDATA, &floor_buf);
    curl_easy_setopt(floor_h, CURLOPT_NOSIGNAL, 1L);
    int64_t lib[ROUNDS], flo[ROUNDS];
    for (int r = -1; r < ROUNDS; r++) { /* round -1 warms both up */
        int64_t t0 = now_ns();
        for (int i = 0; i < PER; i++) {
            fence_lease *l = NULL;
            if (fence_try_acquire(c, "bench-lib", 10000, &l) != FENCE_OK ||
                fence_release(l) != FENCE_OK) {
                fprintf(stderr, "bench_etcd: cycle: %s\n", fence_client_errmsg(c));
                exit(1);
            }
        }
        int64_t t1 = now_ns();
        for (int i = 0; i < PER; i++) {
            floor_cycle();
        }
        int64_t t2 = now_ns();
        if (r >= 0) {
            lib[r] = (t1 - t0) / PER;
            flo[r] = (t2 - t1) / PER;
        }
    }
    double l = (double)median(lib, ROUNDS), f = (double)median(flo, ROUNDS);
    printf("etcd_acquire_release_us %.1f us\n", l / 1e3);
    printf("etcd_floor_acquire_release_us %.1f us\n", f / 1e3);
    printf("etcd_acquire_release_vs_floor_ratio %.2f x\n", l / f);
    curl_easy_cleanup(floor_h);
    curl_slist_free_all(floor_hdr);
    fence_client_close(c);
}

/* ---- 2: etcdctl lock and python3-etcd3gw -------------------------------------------------- */

static void side_by_side(void)
{
    enum { N = 20 };
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ETCDCTL_API=3 etcdctl --endpoints=http://%s lock bench-etcdctl "
             "true >/dev/null 2>&1", member);
    int64_t t0 = now_ns();
    for (int i = 0; i < N; i++) {
        if (system(cmd) != 0) {
            fprintf(stderr, "bench_etcd: %s failed\n", cmd);
            exit(1);
        }
    }
    printf("etcdctl_lock_cycle_ms %.2f ms\n", (double)(now_ns() - t0) / N / 1e6);
    snprintf(cmd, sizeof cmd, "FENCE_BENCH_ETCD=%s /usr/bin/python3 tests/bench/bench_etcd3gw.py",
             member);
    FILE *p = popen(cmd, "r");
    char line[256];
    int got = 0;
    while (p != NULL && fgets(line, sizeof line, p) != NULL) {
        fputs(line, stdout);
        got++;
    }
    if (p == NULL || pclose(p) != 0 || got == 0) {
        fprintf(stderr, "bench_etcd: %s failed\n", cmd);
        exit(1);
    }
}

/* etcd's own count of gRPC calls of method (its /metrics: the gateway's
 * HTTP requests reach it as gRPC calls), or -1. */
static double grpc_started(const char *method)
{
    CURL *h = curl_easy_init();
    static char bytes[1 << 20];
    buf b = {bytes, 0, sizeof bytes};
    char url[200], pat[128];
    snprintf(url, sizeof url, "http://%s/metrics", member);
    b.n = 0;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    CURLcode cc = curl_easy_perform(h);
    curl_easy_cleanup(h);
    snprintf(pat, sizeof pat, "grpc_server_started_total{grpc_method=\"%s\"", method);
    const char *at = cc == CURLE_OK ? strstr(b.d, pat) : NULL;
    const char *sp = at != NULL ? strchr(at, ' ') : NULL;
    return sp != NULL ? atof(sp + 1) : -1;
}

/* ---- 3: renewing 10,000 leases --------------------------------------------------------------- */

static size_t NLEASES = 10000; /* bench_etcd N: another count */
static fence__errslot slot;
static fence__errslot *my_slot(void)
{
    return &slot;
}

typedef struct acq_job {
    fence__ilease *ls;
    size_t from, to;
    int failed;
} acq_job;

static fence__issuer *open_issuer(const void *key)
{
    char url[200];
    snprintf(url, sizeof url, "etcd://%s", member);
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url;
    fence__iss_env env = {key, my_slot, 500};
    fence__issuer *is = NULL;
    if (fence__etcd_issuer.open(&is, &o, &env) != FENCE_OK) {
        fprintf(stderr, "bench_etcd: issuer open failed\n");
        exit(1);
    }
    return is;
}

static void acquire_with(fence__issuer *is, acq_job *j)
{
    for (size_t i = j->from; i < j->to; i++) {
        fence__grant g;
        if (fence__etcd_issuer.acquire(is, &j->ls[i], NULL, INT64_MAX, &g) != FENCE_OK ||
            !g.granted) {
            j->failed = 1;
            break;
        }
    }
}

static void renew_10k(void)
{
    fence__issuer *is = open_issuer(&slot);
    fence__ilease *ls = calloc(NLEASES, sizeof *ls);
    fence__ilease **lp = calloc(NLEASES, sizeof *lp);
    char(*names)[40] = calloc(NLEASES, sizeof *names);
    int *res = calloc(NLEASES, sizeof *res);
    for (size_t i = 0; i < NLEASES; i++) {
        snprintf(names[i], sizeof names[i], "bench-renew-%d-%zu", (int)getpid(), i);
        ls[i].name = names[i];
        ls[i].namelen = strlen(names[i]);
        ls[i].ttl_ms = 60000;
        snprintf(ls[i].holder, sizeof ls[i].holder, "%032zx", i);
        ls[i].room = calloc(1, fence__etcd_issuer.lease_room(is, ls[i].namelen));
        fence__etcd_issuer.lease_init(is, &ls[i]);
        lp[i] = &ls[i];
    }
    acq_job job = {ls, 0, NLEASES, 0};
    int64_t a0 = now_ns();
    acquire_with(is, &job);
    if (job.failed) {
        fprintf(stderr, "bench_etcd: acquiring the leases failed: %s\n", fence__err_get(&slot, &slot));
        exit(1);
    }
    printf("etcd_acquire_10k_s %.1f s\n", (double)(now_ns() - a0) / 1e9);
    enum { PASSES = 5 };
    int64_t pass[PASSES];
    double ka0 = grpc_started("LeaseKeepAlive"), tx0 = grpc_started("Txn");
    for (int p = 0; p < PASSES; p++) {
        int64_t sent, t0 = now_ns();
        for (size_t i = 0; i < NLEASES; i++) {
            res[i] = -1;
        }
        if (fence__etcd_issuer.renew(is, lp, NLEASES, FENCE__CHAN_HEARTBEAT, INT64_MAX, res,
                                     &sent) != FENCE_OK) {
            fprintf(stderr, "bench_etcd: renew pass failed: %s\n", fence__err_get(&slot, &slot));
            exit(1);
        }
        pass[p] = now_ns() - t0;
        for (size_t i = 0; i < NLEASES; i++) {
            if (res[i] != 1) {
                fprintf(stderr, "bench_etcd: lease %zu not renewed (%d)\n", i, res[i]);
                exit(1);
            }
        }
    }
    double ka = (grpc_started("LeaseKeepAlive") - ka0) / PASSES;
    double tx = (grpc_started("Txn") - tx0) / PASSES;
    printf("renew_10k_etcd_pass_ms %.1f ms\n", (double)median(pass, PASSES) / 1e6);
    printf("renew_10k_etcd_keepalives_per_pass %.0f calls\n", ka);
    printf("renew_10k_etcd_key_check_txns_per_pass %.0f calls\n", tx);
    for (size_t i = 0; i < NLEASES; i++) {
        int deleted, retried;
        fence__etcd_issuer.release(is, &ls[i], INT64_MAX, &deleted, &retried);
        free(ls[i].room);
    }
    fence__etcd_issuer.close(is);
    free(ls);
    free(lp);
    free(names);
    free(res);
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        NLEASES = (size_t)atol(argv[1]);
    }
    const char *url = getenv("FENCE_TEST_ETCD_URL");
    if (url == NULL || strncmp(url, "etcd://", 7) != 0) {
        fprintf(stderr, "bench_etcd: FENCE_TEST_ETCD_URL is not set (scripts/with-servers "
                "--etcd)\n");
        return 1;
    }
    member = url + 7;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (argc <= 1) {
        vs_floor();
        side_by_side();
    }
    renew_10k();
    return 0;
}
