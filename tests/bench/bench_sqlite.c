/*
 * bench_sqlite.c -- the cost of fencing an SQLite UPDATE.
 *
 * One database file (WAL, synchronous=NORMAL: the usual setting for WAL,
 * commits are not fsync'ed, checkpoints are), two identical tables of
 * 10,000 rows: "plain", "plain2" and "fenced" (protected with
 * fence_sqlite_protect); each way writes a table of its own (two ways
 * writing one table in turn measure which goes first).
 * A token serves one write transaction, so a fenced run sets it
 * (fence_sqlite_set_token) for every transaction, as a writer must.  Each
 * run does single-row UPDATEs by primary key on pseudo-random rows through
 * one prepared statement, three ways: plain; plain with the token set for
 * every transaction (what the per-transaction token itself costs: the set
 * and the commit hook that ends it); fenced (the triggers too):
 *   - autocommit: one UPDATE per transaction (what a typical app does;
 *     this is the headline ratio);
 *   - batched: BATCH_N UPDATEs inside one transaction (shows the raw
 *     trigger cost with no commit to hide it).
 * Runs take turns (the order rotated every round) and each ratio is the
 * median of the per-round ratios of elapsed times (the ratio of the
 * median times is printed too: when the two disagree, the machine was
 * noisy).  The token is the same in every transaction, so this measures
 * the steady state: a row already stamped with the writer's token is
 * checked but not re-stamped.
 *
 * Output: "name value unit" lines.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "fence_sqlite.h"

#define ROWS 10000
#define AUTO_N 2000    /* updates per autocommit run */
#define BATCH_N 20000  /* updates per batched run */
#define ROUNDS 15

static void die(sqlite3 *db, const char *what)
{
    fprintf(stderr, "bench_sqlite: %s: %s\n", what, db ? sqlite3_errmsg(db) : "");
    exit(1);
}

static void exec(sqlite3 *db, const char *sql)
{
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
        die(db, sql);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
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

#define HOLDER "0123456789abcdef0123456789abcdef"

static void set_token(sqlite3 *db)
{
    if (fence_sqlite_set_token(db, 1000, HOLDER) != FENCE_OK) {
        fprintf(stderr, "bench_sqlite: set_token: %s\n", fence_sqlite_errmsg(db));
        exit(1);
    }
}

/* n UPDATEs of random rows; in one transaction when batched; the token set
 * for every transaction when tok.  Seconds. */
static double run(sqlite3 *db, sqlite3_stmt *st, int tok, int n, int batched, unsigned *seed)
{
    double t0 = now_s();
    if (batched) {
        if (tok) {
            set_token(db);
        }
        exec(db, "BEGIN IMMEDIATE");
    }
    for (int i = 0; i < n; i++) {
        if (tok && !batched) {
            set_token(db);
        }
        *seed = *seed * 1103515245u + 12345u;
        sqlite3_bind_int64(st, 1, (sqlite3_int64)i);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)((*seed >> 8) % ROWS) + 1);
        if (sqlite3_step(st) != SQLITE_DONE) {
            die(db, "UPDATE");
        }
        sqlite3_reset(st);
    }
    if (batched) {
        exec(db, "COMMIT");
    }
    return now_s() - t0;
}

enum { PLAIN, TOKEN, FENCED, KINDS };

static double measure(sqlite3 *db, sqlite3_stmt *const st[KINDS], int n, int batched,
                      const char *label)
{
    const int tok[KINDS] = {0, 1, 1};
    double t[KINDS][ROUNDS], rt[ROUNDS], rf[ROUNDS];
    /* warm-up, not counted */
    for (int k = 0; k < KINDS; k++) {
        unsigned seed = 7;
        run(db, st[k], tok[k], n / 4, batched, &seed);
    }
    for (int r = 0; r < ROUNDS; r++) {
        for (int j = 0; j < KINDS; j++) {
            int k = (r + j) % KINDS; /* the order rotates */
            unsigned seed = 1000u + (unsigned)r;
            t[k][r] = run(db, st[k], tok[k], n, batched, &seed);
        }
        rt[r] = t[TOKEN][r] / t[PLAIN][r];
        rf[r] = t[FENCED][r] / t[PLAIN][r];
    }
    double mrt = median(rt, ROUNDS), mrf = median(rf, ROUNDS);
    double mp = median(t[PLAIN], ROUNDS), mt = median(t[TOKEN], ROUNDS);
    double mf = median(t[FENCED], ROUNDS);
    printf("sqlite_plain_update_%s_per_s %.0f ops/s\n", label, n / mp);
    printf("sqlite_fenced_update_%s_per_s %.0f ops/s\n", label, n / mf);
    printf("sqlite_fenced_update_%s_overhead_us %.2f us\n", label, (mf - mp) / n * 1e6);
    printf("sqlite_fenced_vs_plain_ratio_%s %.3f x\n", label, mrf);
    printf("sqlite_fenced_vs_plain_ratio_%s_of_medians %.3f x\n", label, mf / mp);
    printf("sqlite_token_per_txn_%s_overhead_us %.2f us\n", label, (mt - mp) / n * 1e6);
    printf("sqlite_token_per_txn_vs_plain_ratio_%s %.3f x\n", label, mrt);
    fflush(stdout);
    return mrf;
}

int main(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/fence-bench-sqlite-XXXXXX", base && *base ? base : "/tmp");
    if (mkdtemp(dir) == NULL) {
        fprintf(stderr, "bench_sqlite: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    snprintf(path, sizeof path, "%s/bench.db", dir);

    sqlite3 *db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK) {
        die(db, "open");
    }
    exec(db, "PRAGMA journal_mode=WAL");
    exec(db, "PRAGMA synchronous=NORMAL");
    if (fence_sqlite_attach(db) != FENCE_OK) {
        fprintf(stderr, "bench_sqlite: attach: %s\n", fence_sqlite_errmsg(db));
        return 1;
    }
    exec(db, "CREATE TABLE plain(id INTEGER PRIMARY KEY, n INTEGER, s TEXT);"
             "CREATE TABLE plain2(id INTEGER PRIMARY KEY, n INTEGER, s TEXT);"
             "CREATE TABLE fenced(id INTEGER PRIMARY KEY, n INTEGER, s TEXT);"
             "BEGIN;"
             "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 10000)"
             " INSERT INTO plain SELECT i, 0, printf('row %d', i) FROM c;"
             "INSERT INTO plain2 SELECT * FROM plain;"
             "INSERT INTO fenced SELECT * FROM plain;"
             "COMMIT");
    if (fence_sqlite_protect(db, "fenced", NULL) != FENCE_OK) {
        fprintf(stderr, "bench_sqlite: protect: %s\n", fence_sqlite_errmsg(db));
        return 1;
    }
    set_token(db);
    exec(db, "UPDATE fenced SET n = 0"); /* stamp every row once */

    sqlite3_stmt *st[KINDS] = {NULL, NULL, NULL};
    if (sqlite3_prepare_v2(db, "UPDATE plain SET n = ?1 WHERE id = ?2", -1, &st[PLAIN], NULL) ||
        sqlite3_prepare_v2(db, "UPDATE plain2 SET n = ?1 WHERE id = ?2", -1, &st[TOKEN], NULL) ||
        sqlite3_prepare_v2(db, "UPDATE fenced SET n = ?1 WHERE id = ?2", -1, &st[FENCED], NULL)) {
        die(db, "prepare");
    }

    printf("# sqlite %s, WAL, synchronous=NORMAL, %d rows, %d rounds (3 ways, rotated), medians\n",
           sqlite3_libversion(), ROWS, ROUNDS);
    double auto_ratio = measure(db, st, AUTO_N, 0, "autocommit");
    measure(db, st, BATCH_N, 1, "batched");

    /* The headline: one UPDATE per transaction, as an app usually writes. */
    printf("sqlite_fenced_vs_plain_ratio %.3f x\n", auto_ratio);

    for (int k = 0; k < KINDS; k++) {
        sqlite3_finalize(st[k]);
    }
    sqlite3_close(db);
    const char *sfx[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char f[PATH_MAX + 40];
        snprintf(f, sizeof f, "%s%s", path, sfx[i]);
        unlink(f);
    }
    rmdir(dir);
    return 0;
}
