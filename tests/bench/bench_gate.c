/* bench_gate.c -- begin/commit per second through the write gate.
 *
 *   gate_memory_per_s            in-memory gate, one thread, one resource
 *   gate_memory_2threads_per_s   in-memory gate, two threads, own resources
 *   gate_persistent_per_s        SQLite file, WAL, synchronous=NORMAL
 *   bare_sqlite_upsert_per_s     the baseline: the same file settings and
 *                                table (mark and holder, no holder given),
 *                                BEGIN IMMEDIATE + one UPSERT +
 *                                COMMIT with no gate around it
 *   gate_persistent_vs_bare_sqlite_ratio   the first over the second
 *                                (median of back-to-back round pairs)
 *   ..._full_...                 the same two with synchronous=FULL
 *
 * Every txn uses a higher token than the last, so every commit writes.
 * Each figure is the median of several timed rounds; the gate and its
 * baseline rounds alternate so that machine noise hits both alike.  Files
 * go to a temp folder ($TMPDIR or /tmp), removed at the end. */
#include "fence_gate.h"

#include <dirent.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ROUND_NS 300000000LL /* one timed round: 0.3 s */
#define ROUNDS 6
#define ROUNDS_FULL 6

static char dir[256];

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "bench_gate: %s: %s\n", what, detail);
    exit(1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static fence_gate *open_gate(const char *path, int sync)
{
    fence_gate_options o;
    fence_gate_options_init(&o);
    o.path = path;
    o.synchronous = sync;
    fence_gate *g = NULL;
    if (fence_gate_open(&g, &o) != FENCE_OK) {
        die("fence_gate_open", fence_gate_errmsg(g));
    }
    return g;
}

/* begin/commit on RES with climbing tokens for ROUND_NS; txns per second. */
static double gate_round(fence_gate *g, const char *res, uint64_t *token)
{
    int64_t start = now_ns(), end = start + ROUND_NS, t;
    long n = 0;
    do {
        for (int k = 0; k < 16; k++) {
            fence_gate_txn *txn = NULL;
            ++*token;
            if (fence_gate_begin(g, res, *token, NULL, &txn, NULL) != FENCE_OK ||
                fence_gate_commit(txn) != FENCE_OK) {
                die("begin/commit", fence_gate_errmsg(g));
            }
            n++;
        }
        t = now_ns();
    } while (t < end);
    return (double)n * 1e9 / (double)(t - start);
}

typedef struct thr_arg {
    fence_gate *g;
    char res[32];
    uint64_t token;
    double rate;
} thr_arg;

static void *thr_main(void *p)
{
    thr_arg *a = p;
    a->rate = gate_round(a->g, a->res, &a->token);
    return NULL;
}

/* The baseline: a bare SQLite upsert transaction, same table and settings. */
typedef struct bare {
    sqlite3 *db;
    sqlite3_stmt *begin, *upsert, *commit;
} bare;

static void bare_exec(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        die(sql, err != NULL ? err : "?");
    }
}

static void bare_open(bare *b, const char *path, int sync)
{
    if (sqlite3_open(path, &b->db) != SQLITE_OK) {
        die("sqlite3_open", sqlite3_errmsg(b->db));
    }
    sqlite3_busy_timeout(b->db, 5000);
    bare_exec(b->db, "PRAGMA journal_mode=WAL");
    bare_exec(b->db, sync == FENCE_GATE_SYNC_FULL ? "PRAGMA synchronous=FULL"
                                                  : "PRAGMA synchronous=NORMAL");
    bare_exec(b->db, "CREATE TABLE IF NOT EXISTS fence_gate_marks (resource TEXT PRIMARY KEY "
                     "NOT NULL, mark INTEGER NOT NULL, holder TEXT NULL) WITHOUT ROWID");
    if (sqlite3_prepare_v2(b->db, "BEGIN IMMEDIATE", -1, &b->begin, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(b->db,
                           "INSERT INTO fence_gate_marks (resource, mark, holder) VALUES "
                           "(?1, ?2, NULL) ON CONFLICT (resource) DO UPDATE SET mark = "
                           "excluded.mark, holder = excluded.holder WHERE excluded.mark > mark",
                           -1, &b->upsert, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(b->db, "COMMIT", -1, &b->commit, NULL) != SQLITE_OK) {
        die("prepare", sqlite3_errmsg(b->db));
    }
}

static void bare_close(bare *b)
{
    sqlite3_finalize(b->begin);
    sqlite3_finalize(b->upsert);
    sqlite3_finalize(b->commit);
    sqlite3_close(b->db);
}

static void step_done(sqlite3_stmt *st)
{
    if (sqlite3_step(st) != SQLITE_DONE) {
        die("step", sqlite3_errmsg(sqlite3_db_handle(st)));
    }
    sqlite3_reset(st);
}

static double bare_round(bare *b, uint64_t *token)
{
    int64_t start = now_ns(), end = start + ROUND_NS, t;
    long n = 0;
    do {
        for (int k = 0; k < 16; k++) {
            ++*token;
            step_done(b->begin);
            sqlite3_bind_text(b->upsert, 1, "res", -1, SQLITE_STATIC);
            sqlite3_bind_int64(b->upsert, 2, (sqlite3_int64)*token);
            step_done(b->upsert);
            step_done(b->commit);
            n++;
        }
        t = now_ns();
    } while (t < end);
    return (double)n * 1e9 / (double)(t - start);
}

/* Gate vs bare SQLite, alternating rounds, for one synchronous mode. */
static void persistent(int sync, int rounds, const char *suffix)
{
    char gpath[300], bpath[300];
    snprintf(gpath, sizeof gpath, "%s/gate%s.db", dir, suffix);
    snprintf(bpath, sizeof bpath, "%s/bare%s.db", dir, suffix);
    fence_gate *g = open_gate(gpath, sync);
    bare b;
    bare_open(&b, bpath, sync);
    uint64_t gt = 0, bt = 0;
    double gv[ROUNDS], bv[ROUNDS];
    gate_round(g, "res", &gt); /* warm up */
    bare_round(&b, &bt);
    for (int r = 0; r < rounds; r++) {
        if (r % 2 == 0) { /* alternate which goes first */
            gv[r] = gate_round(g, "res", &gt);
            bv[r] = bare_round(&b, &bt);
        } else {
            bv[r] = bare_round(&b, &bt);
            gv[r] = gate_round(g, "res", &gt);
        }
    }
    /* The ratio is the median of each round pair's ratio: the two halves
     * of a pair ran back to back, so slow drifts of the machine cancel. */
    double ratios[ROUNDS];
    for (int r = 0; r < rounds; r++) {
        ratios[r] = gv[r] / bv[r];
    }
    double ratio = median(ratios, rounds);
    double gm = median(gv, rounds), bm = median(bv, rounds);
    printf("gate_persistent%s_per_s %.0f txn/s\n", suffix, gm);
    printf("bare_sqlite_upsert%s_per_s %.0f txn/s\n", suffix, bm);
    printf("gate_persistent%s_vs_bare_sqlite_ratio %.2f x\n", suffix, ratio);
    fflush(stdout);
    bare_close(&b);
    fence_gate_close(g);
}

static void cleanup(void)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        return;
    }
    struct dirent *de;
    char p[600];
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            unlink(p);
        }
    }
    closedir(d);
    rmdir(dir);
}

int main(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/fence-bench-gate-XXXXXX",
             base != NULL && base[0] != '\0' ? base : "/tmp");
    if (mkdtemp(dir) == NULL) {
        die("mkdtemp", dir);
    }
    atexit(cleanup);

    /* In memory, one thread. */
    fence_gate *g = open_gate(NULL, FENCE_GATE_SYNC_FULL);
    uint64_t token = 0;
    double v[ROUNDS];
    gate_round(g, "res", &token);
    for (int r = 0; r < ROUNDS; r++) {
        v[r] = gate_round(g, "res", &token);
    }
    printf("gate_memory_per_s %.0f txn/s\n", median(v, ROUNDS));
    fflush(stdout);

    /* In memory, two threads on their own resources (in total). */
    for (int r = 0; r < ROUNDS; r++) {
        thr_arg a[2];
        pthread_t th[2];
        for (int k = 0; k < 2; k++) {
            memset(&a[k], 0, sizeof a[k]);
            a[k].g = g;
            a[k].token = (uint64_t)r * 100000000ULL;
            snprintf(a[k].res, sizeof a[k].res, "thread-%d", k);
            pthread_create(&th[k], NULL, thr_main, &a[k]);
        }
        pthread_join(th[0], NULL);
        pthread_join(th[1], NULL);
        v[r] = a[0].rate + a[1].rate;
    }
    printf("gate_memory_2threads_per_s %.0f txn/s\n", median(v, ROUNDS));
    fence_gate_close(g);

    printf("# persistent: WAL, synchronous=NORMAL\n");
    persistent(FENCE_GATE_SYNC_NORMAL, ROUNDS, "");
    printf("# persistent: WAL, synchronous=FULL (fsync per commit)\n");
    persistent(FENCE_GATE_SYNC_FULL, ROUNDS_FULL, "_full");
    return 0;
}
