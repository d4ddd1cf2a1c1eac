/*
 * bench_pg.c -- what fencing costs a PostgreSQL write.
 *
 * pgbench-style single-row UPDATE (accounts, 10,000 rows, random id,
 * prepared statement, one statement per transaction), one client:
 *   plain          UPDATE in autocommit (PQexecPrepared): 1 round trip.
 *   row_fenced     the same UPDATE on a fence.protect()ed table, with the
 *                  token set in the same round trip: libpq pipeline mode,
 *                  fence_pg_send_token() + the UPDATE + Sync, which run in
 *                  one implicit transaction, on a connection that called
 *                  fence_pg_prepare().  The token is the same for the whole
 *                  run (one holder writing many times), so after the
 *                  warm-up every row already carries it and the WHEN clause
 *                  skips the trigger function.
 *   row_fenced_unprepared  as row_fenced on a connection without
 *                  fence_pg_prepare(): set_config is parsed and planned
 *                  every time.
 *   row_restamp    as row_fenced (on a table of its own) but a new, higher
 *                  token every transaction (a new holder each time): the
 *                  trigger function runs for every row.  The worst case,
 *                  shown for honesty.
 *   resource_fenced  set_config + fence.advance('bench', token) + the
 *                  UPDATE on the plain table, pipelined, one transaction;
 *                  no holder (fence.holder '').
 *   resource_fenced_holder  the same with a holder id (fence.holder set to
 *                  32 hex digits and checked by fence.advance, resource
 *                  'bench-h'): what the holder rule adds.
 *   plain_pipe, plain_set  diagnostics: the plain UPDATE alone in a
 *                  pipeline, and after a prepared set_config (no trigger):
 *                  they split the cost into protocol, setting, trigger.
 * Modes are interleaved in batches of 25 transactions (ABC..CBA..), their
 * times summed per round; figures are medians over the rounds.
 * Prints "name value unit" lines.
 */
#include "fence_pg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ROWS 10000
#define OPS 1500      /* transactions per mode and round */
#define BATCH 25      /* transactions in a row of one mode */
#define ROUNDS 11
#define MAX_ROUNDS 64

static PGconn *g_conn;     /* fence_pg_prepare()d */
static PGconn *g_unprep;   /* not prepared: the API sends unnamed statements */
static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "bench_pg: %s: %s\n", what, detail ? detail : "");
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int next_id(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (int)(g_rng % ROWS) + 1;
}

static void exec_ok(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    if (fence_pg_classify(c, r, NULL) != FENCE_OK) {
        die(sql, fence_pg_errmsg(c));
    }
    PQclear(r);
}

static void prepare(PGconn *c, const char *name, const char *sql, int nparams)
{
    PGresult *r = PQprepare(c, name, sql, nparams, NULL);
    if (fence_pg_classify(c, r, NULL) != FENCE_OK) {
        die(sql, fence_pg_errmsg(c));
    }
    PQclear(r);
}

/* Read n results (each followed by NULL) and the sync; die unless all OK. */
static void drain_pipeline(PGconn *c, int n)
{
    for (int i = 0; i < n; i++) {
        PGresult *r = PQgetResult(c);
        if (fence_pg_classify(c, r, NULL) != FENCE_OK) {
            die("pipelined statement", fence_pg_errmsg(c));
        }
        PQclear(r);
        if ((r = PQgetResult(c)) != NULL) {
            die("pipeline", "unexpected extra result");
        }
    }
    PGresult *r = PQgetResult(c);
    if (PQresultStatus(r) != PGRES_PIPELINE_SYNC) {
        die("pipeline", "no sync");
    }
    PQclear(r);
}

enum mode {
    PLAIN,
    ROW_FENCED,
    ROW_FENCED_UNPREP,
    ROW_RESTAMP,
    RESOURCE_FENCED,
    RESOURCE_FENCED_HOLDER,
    PLAIN_PIPE,
    PLAIN_SET,
    NMODES
};
static const char *const mode_name[NMODES] = {
    "plain",           "row_fenced", "row_fenced_unprepared", "row_restamp",
    "resource_fenced", "resource_fenced_holder", "plain_pipe", "plain_set",
};
static const char BENCH_HOLDER[] = "0123456789abcdef0123456789abcdef";

static uint64_t g_token = 1000;       /* the steady holder's token */
static uint64_t g_restamp_token = 2000000; /* rises every restamp transaction */

/* One transaction of the given mode. */
static void one_tx(enum mode m)
{
    PGconn *c = m == ROW_FENCED_UNPREP ? g_unprep : g_conn;
    char id[16];
    snprintf(id, sizeof id, "%d", next_id());
    const char *p1[1] = {id};

    if (m == PLAIN) {
        PGresult *r = PQexecPrepared(c, "upd_plain", 1, p1, NULL, NULL, 0);
        if (fence_pg_classify(c, r, NULL) != FENCE_OK) {
            die("plain update", fence_pg_errmsg(c));
        }
        PQclear(r);
        return;
    }
    uint64_t tok = m == ROW_RESTAMP ? ++g_restamp_token : g_token;
    if (m == PLAIN_PIPE) {
        if (!PQsendQueryPrepared(c, "upd_plain", 1, p1, NULL, NULL, 0) || !PQpipelineSync(c)) {
            die("send update", PQerrorMessage(c));
        }
        drain_pipeline(c, 1);
        return;
    }
    if (m == PLAIN_SET) {
        char t[24];
        snprintf(t, sizeof t, "%" PRIu64, tok);
        const char *pt[1] = {t};
        if (!PQsendQueryPrepared(c, "set_tok", 1, pt, NULL, NULL, 0)) {
            die("send set_tok", PQerrorMessage(c));
        }
    } else {
        int holder = m == RESOURCE_FENCED_HOLDER;
        const char *res = m == RESOURCE_FENCED ? "bench" : holder ? "bench-h" : NULL;
        if (fence_pg_send_token(c, tok, holder ? BENCH_HOLDER : NULL, res) != FENCE_OK) {
            die("fence_pg_send_token", fence_pg_errmsg(c));
        }
    }
    const char *stmt = m == ROW_RESTAMP                              ? "upd_restamp"
                       : m == ROW_FENCED || m == ROW_FENCED_UNPREP ? "upd_fenced"
                                                                   : "upd_plain";
    if (!PQsendQueryPrepared(c, stmt, 1, p1, NULL, NULL, 0) ||
        !PQpipelineSync(c)) {
        die("send update", PQerrorMessage(c));
    }
    drain_pipeline(c, 2);
}

/* Transactions per second of n transactions of mode m. */
static double run(enum mode m, int n)
{
    int pipe = m != PLAIN;
    PGconn *c = m == ROW_FENCED_UNPREP ? g_unprep : g_conn;
    if (pipe && !PQenterPipelineMode(c)) {
        die("PQenterPipelineMode", PQerrorMessage(c));
    }
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        one_tx(m);
    }
    double dt = now_s() - t0;
    if (pipe && !PQexitPipelineMode(c)) {
        die("PQexitPipelineMode", PQerrorMessage(c));
    }
    return n / dt;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(void)
{
    const char *conninfo = getenv("FENCE_TEST_PG_CONNINFO");
    if (conninfo == NULL || conninfo[0] == '\0') {
        die("FENCE_TEST_PG_CONNINFO is not set", "run it under scripts/with-servers --pg");
    }
    int rounds = ROUNDS;
    const char *env_rounds = getenv("FENCE_BENCH_ROUNDS");
    if (env_rounds != NULL && atoi(env_rounds) > 0) {
        rounds = atoi(env_rounds) < MAX_ROUNDS ? atoi(env_rounds) : MAX_ROUNDS;
    }

    /* A database of our own. */
    char dbname[64], sql[1024];
    snprintf(dbname, sizeof dbname, "fence_bench_%d", (int)getpid());
    PGconn *admin = PQconnectdb(conninfo);
    if (PQstatus(admin) != CONNECTION_OK) {
        die("connect", PQerrorMessage(admin));
    }
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", dbname);
    exec_ok(admin, sql);

    const char *keys[3] = {"dbname", "dbname", NULL};
    const char *vals[3] = {conninfo, dbname, NULL};
    g_conn = PQconnectdbParams(keys, vals, 1);
    if (PQstatus(g_conn) != CONNECTION_OK) {
        die("connect", PQerrorMessage(g_conn));
    }
    if (fence_pg_install(g_conn) != FENCE_OK) {
        die("install", fence_pg_errmsg(g_conn));
    }
    snprintf(sql, sizeof sql,
             "CREATE TABLE plain_accounts (id int PRIMARY KEY, balance bigint NOT NULL, "
             "filler char(84) NOT NULL DEFAULT '');"
             "CREATE TABLE fenced_accounts (LIKE plain_accounts INCLUDING ALL);"
             "CREATE TABLE restamp_accounts (LIKE plain_accounts INCLUDING ALL);"
             "INSERT INTO plain_accounts (id, balance) SELECT g, 0 FROM generate_series(1, %d) g;"
             "INSERT INTO fenced_accounts SELECT * FROM plain_accounts;"
             "INSERT INTO restamp_accounts SELECT * FROM plain_accounts;"
             "SELECT fence.protect('fenced_accounts'), fence.protect('restamp_accounts')",
             ROWS);
    exec_ok(g_conn, sql);
    exec_ok(g_conn, "VACUUM ANALYZE plain_accounts");
    exec_ok(g_conn, "VACUUM ANALYZE fenced_accounts");
    exec_ok(g_conn, "VACUUM ANALYZE restamp_accounts");
    prepare(g_conn, "upd_plain", "UPDATE plain_accounts SET balance = balance + 1 WHERE id = $1",
            1);
    prepare(g_conn, "upd_fenced",
            "UPDATE fenced_accounts SET balance = balance + 1 WHERE id = $1", 1);
    prepare(g_conn, "upd_restamp",
            "UPDATE restamp_accounts SET balance = balance + 1 WHERE id = $1", 1);
    prepare(g_conn, "set_tok", "SELECT pg_catalog.set_config('fence.token', $1, true)", 1);
    if (fence_pg_prepare(g_conn) != FENCE_OK) {
        die("fence_pg_prepare", fence_pg_errmsg(g_conn));
    }
    g_unprep = PQconnectdbParams(keys, vals, 1);
    if (PQstatus(g_unprep) != CONNECTION_OK) {
        die("connect", PQerrorMessage(g_unprep));
    }
    prepare(g_unprep, "upd_fenced",
            "UPDATE fenced_accounts SET balance = balance + 1 WHERE id = $1", 1);

    /* Warm-up: stamp every fenced row with the steady token, warm caches. */
    {
        char stamp[160];
        snprintf(stamp, sizeof stamp,
                 "BEGIN; SET LOCAL fence.token = %" PRIu64 "; UPDATE fenced_accounts SET "
                 "balance = balance; COMMIT",
                 g_token);
        exec_ok(g_conn, stamp);
        exec_ok(g_conn, "VACUUM fenced_accounts");
        for (int m = 0; m < NMODES; m++) {
            run((enum mode)m, 300);
        }
    }

    /* Each round cycles through the modes in small batches, many times,
     * and adds up each mode's time: whatever the noise of the shared
     * machine, every mode gets its share of it. */
    double tps[NMODES][MAX_ROUNDS];
    double ratio[NMODES][MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        double spent[NMODES] = {0};
        for (int b = 0; b < OPS / BATCH; b++) {
            for (int k = 0; k < NMODES; k++) {
                int m = (b % 2 == 0) ? k : NMODES - 1 - k; /* ABC..CBA.. */
                spent[m] += BATCH / run((enum mode)m, BATCH);
            }
        }
        for (int m = 0; m < NMODES; m++) {
            tps[m][r] = (OPS / BATCH) * BATCH / spent[m];
        }
        for (int m = 0; m < NMODES; m++) {
            ratio[m][r] = tps[PLAIN][r] / tps[m][r]; /* time per tx, fenced / plain */
        }
        if (getenv("FENCE_BENCH_VERBOSE") != NULL) {
            fprintf(stderr, "# round %d:", r);
            for (int m = 0; m < NMODES; m++) {
                fprintf(stderr, " %s %.0f", mode_name[m], tps[m][r]);
            }
            fprintf(stderr, "\n");
        }
    }

    double med_tps[NMODES], med_ratio[NMODES];
    for (int m = 0; m < NMODES; m++) {
        med_tps[m] = median(tps[m], rounds);
        med_ratio[m] = median(ratio[m], rounds);
    }
    printf("pg_row_fenced_vs_plain_ratio %.3f x\n", med_ratio[ROW_FENCED]);
    printf("pg_resource_fenced_vs_plain_ratio %.3f x\n", med_ratio[RESOURCE_FENCED]);
    printf("pg_resource_fenced_holder_vs_plain_ratio %.3f x\n", med_ratio[RESOURCE_FENCED_HOLDER]);
    printf("pg_row_fenced_unprepared_vs_plain_ratio %.3f x\n", med_ratio[ROW_FENCED_UNPREP]);
    printf("pg_plain_set_token_only_vs_plain_ratio %.3f x\n", med_ratio[PLAIN_SET]);
    printf("pg_row_restamp_vs_plain_ratio %.3f x\n", med_ratio[ROW_RESTAMP]);
    for (int m = 0; m < NMODES; m++) {
        printf("pg_%s_tps %.0f tx/s\n", mode_name[m], med_tps[m]);
    }
    printf("pg_bench_rounds %d rounds\n", rounds);

    /* Sanity: every fenced row carries a token; no transaction was lost. */
    PGresult *res = PQexec(g_conn, "SELECT (SELECT count(*) FROM fenced_accounts WHERE "
                                   "fence_token = 0), fence.mark('bench'), fence.mark('bench-h'), "
                                   "fence.mark_holder('bench-h')");
    if (PQresultStatus(res) != PGRES_TUPLES_OK || strcmp(PQgetvalue(res, 0, 0), "0") != 0 ||
        strcmp(PQgetvalue(res, 0, 1), "1000") != 0 ||
        strcmp(PQgetvalue(res, 0, 2), "1000") != 0 ||
        strcmp(PQgetvalue(res, 0, 3), BENCH_HOLDER) != 0) {
        die("sanity check", PQresultErrorMessage(res));
    }
    PQclear(res);
    PQfinish(g_conn);
    PQfinish(g_unprep);
    snprintf(sql, sizeof sql, "DROP DATABASE %s WITH (FORCE)", dbname);
    exec_ok(admin, sql);
    PQfinish(admin);
    return 0;
}
