/*
 * bench_pg.c -- what fencing costs a PostgreSQL write.
 *
 * pgbench-style single-row UPDATE (accounts, 10,000 rows, random id,
 * prepared statement, one statement per transaction), one client.  The
 * database has fence.sql and the extension (CREATE EXTENSION fence), and
 * each per-row mode runs once per implementation, on a table of its own
 * protected with fence.protect(tbl, col, false, 'c' | 'plpgsql'):
 *   plain          UPDATE in autocommit (PQexecPrepared): 1 round trip.
 *   row_fenced, row_fenced_plpgsql  the same UPDATE on a protected
 *                  table, with the token set in the same round trip: libpq
 *                  pipeline mode, fence_pg_send_token() + the UPDATE +
 *                  Sync, which run in one implicit transaction, on a
 *                  connection that called fence_pg_prepare().  The token is
 *                  the same for the whole run (one holder writing many
 *                  times), so after the warm-up every row already carries
 *                  it: the guard's fast path.  row_fenced is 'c', the best
 *                  shipped implementation: pg_row_fenced_vs_plain_ratio and
 *                  pg_row_fenced_c_vs_plain_ratio are the same figure:
 *                  the C row trigger for every row.
 *   row_fenced_unprepared  as row_fenced on a connection without
 *                  fence_pg_prepare() (which only checks the connection:
 *                  the same unnamed statements either way).
 *   row_restamp, row_restamp_plpgsql  as row_fenced (on tables of their
 *                  own) but a new, higher token every transaction (a new
 *                  holder each time): the guard stamps every row.  The
 *                  worst case, shown for honesty; row_restamp is 'c'.
 *   resource_fenced  fence_pg_send_token() with resource 'bench' -- one
 *                  statement: fence.use_token + fence.advance('bench',
 *                  token), fence.sql's PL/pgSQL (extension 1.4 has no C
 *                  fence.c_advance) -- + the UPDATE on the plain table,
 *                  pipelined, one transaction; no holder (fence.holder '').
 *   resource_fenced_holder  the same with a holder id (fence.holder set to
 *                  32 hex digits and checked by fence.advance, resource
 *                  'bench-h'): what the holder rule adds.
 *   plain_pipe, plain_set, plain_token, trivial_trigger  diagnostics: the
 *                  plain UPDATE alone in a pipeline; after a prepared
 *                  set_config of fence.token alone (no trigger); after
 *                  fence_pg_send_token() (token and holder, as row_fenced
 *                  sends them; no trigger); and as plain_token on a table
 *                  whose only trigger is PostgreSQL's own C BEFORE UPDATE
 *                  row trigger suppress_redundant_updates_trigger() (the
 *                  floor of any BEFORE row trigger: the old row is locked
 *                  first, then a C function called).  Differences of their
 *                  times split a fenced write into protocol, token,
 *                  trigger floor and guard (FENCE_BENCH_VERBOSE=1 prints
 *                  them in us, and the same differences in the backend's
 *                  CPU time, read from /proc/PID/schedstat: far less noisy
 *                  than wall time on a shared machine).
 *   plpgsql_floor  diagnostic: as trivial_trigger, but the trigger is a
 *                  PL/pgSQL function whose whole body is RETURN NEW: the
 *                  floor of any PL/pgSQL row trigger (function call, SPI
 *                  connection, OLD/NEW records), below which no portable
 *                  guard can go.
 * Modes are interleaved in batches of 25 transactions (ABC..CBA..), their
 * times summed per round; figures are medians over the rounds.
 * FENCE_BENCH_MODES=row_fenced,plain_token (diagnostic, e.g. under perf)
 * runs only the modes named and plain, and prints only their figures.
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
    ROW_FENCED,    /* implementation 'c' */
    ROW_FENCED_PL, /* implementation 'plpgsql' */
    ROW_FENCED_UNPREP,
    ROW_RESTAMP,
    ROW_RESTAMP_PL,
    RESOURCE_FENCED,
    RESOURCE_FENCED_HOLDER,
    PLAIN_PIPE,
    PLAIN_SET,
    PLAIN_TOKEN,
    TRIVIAL_TRIGGER,
    PLPGSQL_FLOOR,
    NMODES
};
static const char *const mode_name[NMODES] = {
    "plain",         "row_fenced",          "row_fenced_plpgsql", "row_fenced_unprepared",
    "row_restamp",   "row_restamp_plpgsql", "resource_fenced",    "resource_fenced_holder",
    "plain_pipe",    "plain_set",           "plain_token",        "trivial_trigger",
    "plpgsql_floor",
};
/* The prepared UPDATE of each mode. */
static const char *stmt_of(enum mode m)
{
    switch (m) {
    case ROW_FENCED:
    case ROW_FENCED_UNPREP:
        return "upd_fenced";
    case ROW_FENCED_PL:
        return "upd_fenced_pl";
    case ROW_RESTAMP:
        return "upd_restamp";
    case ROW_RESTAMP_PL:
        return "upd_restamp_pl";
    case TRIVIAL_TRIGGER:
        return "upd_trivial";
    case PLPGSQL_FLOOR:
        return "upd_floor_pl";
    default:
        return "upd_plain";
    }
}
static const char BENCH_HOLDER[] = "0123456789abcdef0123456789abcdef";

static uint64_t g_token = 1000;       /* the steady holder's token */
static uint64_t g_restamp_token = 2000000; /* rises every restamp transaction */

/* The connection mode m runs on. */
static PGconn *conn_of(enum mode m)
{
    return m == ROW_FENCED_UNPREP ? g_unprep : g_conn;
}

/* One transaction of the given mode. */
static void one_tx(enum mode m)
{
    PGconn *c = conn_of(m);
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
    uint64_t tok = m == ROW_RESTAMP || m == ROW_RESTAMP_PL ? ++g_restamp_token : g_token;
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
        /* row modes, plain_token, trivial_trigger and plpgsql_floor:
         * token and holder (none), no resource */
        if (fence_pg_send_token(c, tok, holder ? BENCH_HOLDER : NULL, res) != FENCE_OK) {
            die("fence_pg_send_token", fence_pg_errmsg(c));
        }
    }
    if (!PQsendQueryPrepared(c, stmt_of(m), 1, p1, NULL, NULL, 0) ||
        !PQpipelineSync(c)) {
        die("send update", PQerrorMessage(c));
    }
    drain_pipeline(c, 2);
}

/* The server's CPU time (ns) of a connection's backend, from
 * /proc/PID/schedstat (the test servers run on this machine); 0 when it
 * cannot be read.  Diagnostic only (FENCE_BENCH_VERBOSE): CPU time is far
 * less noisy than wall time on a shared machine, and shows whether a
 * mode's wall time is the server working or waiting. */
static unsigned long long backend_cpu_ns(const PGconn *c)
{
    char path[64];
    unsigned long long v = 0;
    snprintf(path, sizeof path, "/proc/%d/schedstat", PQbackendPID(c));
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        if (fscanf(f, "%llu", &v) != 1) {
            v = 0;
        }
        fclose(f);
    }
    return v;
}
static double g_cpu_ns[NMODES]; /* summed per round, per mode */
static int g_on[NMODES];        /* the modes this run measures */

/* FENCE_BENCH_MODES: a comma-separated list of mode names (plain is always
 * measured: every ratio is over it); unset or empty: every mode. */
static void select_modes(void)
{
    const char *env = getenv("FENCE_BENCH_MODES");
    for (int m = 0; m < NMODES; m++) {
        g_on[m] = env == NULL || env[0] == '\0' || m == PLAIN;
    }
    while (env != NULL && *env != '\0') {
        size_t n = strcspn(env, ",");
        int found = 0;
        for (int m = 0; m < NMODES; m++) {
            if (strlen(mode_name[m]) == n && strncmp(env, mode_name[m], n) == 0) {
                g_on[m] = found = 1;
            }
        }
        if (!found) {
            die("FENCE_BENCH_MODES: no such mode", env);
        }
        env += n + (env[n] == ',');
    }
}

static void print_ratio(const char *name, enum mode m, const double *med_ratio)
{
    if (g_on[m]) {
        printf("pg_%s_vs_plain_ratio %.3f x\n", name, med_ratio[m]);
    }
}

/* Transactions per second of n transactions of mode m. */
static double run(enum mode m, int n)
{
    int pipe = m != PLAIN;
    PGconn *c = conn_of(m);
    if (pipe && !PQenterPipelineMode(c)) {
        die("PQenterPipelineMode", PQerrorMessage(c));
    }
    unsigned long long cpu0 = backend_cpu_ns(c);
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        one_tx(m);
    }
    double dt = now_s() - t0;
    g_cpu_ns[m] += (double)(backend_cpu_ns(c) - cpu0);
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
    select_modes();
    int rounds = ROUNDS;
    const char *env_rounds = getenv("FENCE_BENCH_ROUNDS");
    if (env_rounds != NULL && atoi(env_rounds) > 0) {
        rounds = atoi(env_rounds) < MAX_ROUNDS ? atoi(env_rounds) : MAX_ROUNDS;
    }

    /* A database of our own. */
    char dbname[64], sql[4096];
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
    {
        PGresult *r = PQexec(g_conn, "CREATE EXTENSION fence");
        if (fence_pg_classify(g_conn, r, NULL) != FENCE_OK) {
            die("CREATE EXTENSION fence (run under scripts/with-servers with "
                "FENCE_PGEXT_DIR=BUILD/lib/pgext, as make bench does)",
                fence_pg_errmsg(g_conn));
        }
        PQclear(r);
    }
    snprintf(sql, sizeof sql,
             "CREATE TABLE plain_accounts (id int PRIMARY KEY, balance bigint NOT NULL, "
             "filler char(84) NOT NULL DEFAULT '');"
             "INSERT INTO plain_accounts (id, balance) SELECT g, 0 FROM generate_series(1, %d) g;"
             "CREATE TABLE fenced_accounts (LIKE plain_accounts INCLUDING ALL);"
             "CREATE TABLE fenced_pl_accounts (LIKE plain_accounts INCLUDING ALL);"
             "CREATE TABLE restamp_accounts (LIKE plain_accounts INCLUDING ALL);"
             "CREATE TABLE restamp_pl_accounts (LIKE plain_accounts INCLUDING ALL);"
             "CREATE TABLE trivial_accounts (LIKE plain_accounts INCLUDING ALL);"
             "CREATE TABLE floor_pl_accounts (LIKE plain_accounts INCLUDING ALL);"
             "INSERT INTO fenced_accounts SELECT * FROM plain_accounts;"
             "INSERT INTO fenced_pl_accounts SELECT * FROM plain_accounts;"
             "INSERT INTO restamp_accounts SELECT * FROM plain_accounts;"
             "INSERT INTO restamp_pl_accounts SELECT * FROM plain_accounts;"
             "INSERT INTO trivial_accounts SELECT * FROM plain_accounts;"
             "INSERT INTO floor_pl_accounts SELECT * FROM plain_accounts;"
             "CREATE TRIGGER trivial BEFORE UPDATE ON trivial_accounts FOR EACH ROW "
             "EXECUTE FUNCTION suppress_redundant_updates_trigger();"
             "CREATE FUNCTION floor_pl() RETURNS trigger LANGUAGE plpgsql AS "
             "$$BEGIN RETURN NEW; END$$;"
             "CREATE TRIGGER floor_pl BEFORE UPDATE ON floor_pl_accounts FOR EACH ROW "
             "EXECUTE FUNCTION floor_pl();"
             "SELECT fence.protect('fenced_accounts', 'fence_token', false, 'c'),"
             " fence.protect('fenced_pl_accounts', 'fence_token', false, 'plpgsql'),"
             " fence.protect('restamp_accounts', 'fence_token', false, 'c'),"
             " fence.protect('restamp_pl_accounts', 'fence_token', false, 'plpgsql')",
             ROWS);
    exec_ok(g_conn, sql);
    exec_ok(g_conn, "VACUUM ANALYZE");
    /* Time on a connection of its own, as an application's is: not the
     * one that ran the install (fence.sql's DO blocks, the catalogs it
     * wrote) and the tables' DDL. */
    PQfinish(g_conn);
    g_conn = PQconnectdbParams(keys, vals, 1);
    if (PQstatus(g_conn) != CONNECTION_OK) {
        die("connect", PQerrorMessage(g_conn));
    }
    prepare(g_conn, "upd_plain", "UPDATE plain_accounts SET balance = balance + 1 WHERE id = $1",
            1);
    prepare(g_conn, "upd_fenced",
            "UPDATE fenced_accounts SET balance = balance + 1 WHERE id = $1", 1);
    prepare(g_conn, "upd_fenced_pl",
            "UPDATE fenced_pl_accounts SET balance = balance + 1 WHERE id = $1", 1);
    prepare(g_conn, "upd_restamp",
            "UPDATE restamp_accounts SET balance = balance + 1 WHERE id = $1", 1);
    prepare(g_conn, "upd_restamp_pl",
            "UPDATE restamp_pl_accounts SET balance = balance + 1 WHERE id = $1", 1);
    prepare(g_conn, "upd_trivial",
            "UPDATE trivial_accounts SET balance = balance + 1 WHERE id = $1", 1);
    prepare(g_conn, "upd_floor_pl",
            "UPDATE floor_pl_accounts SET balance = balance + 1 WHERE id = $1", 1);
    prepare(g_conn, "set_tok", "SELECT fence.use_token($1::pg_catalog.int8)", 1);
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
        char stamp[256];
        snprintf(stamp, sizeof stamp,
                 "BEGIN; SELECT fence.use_token(%" PRIu64 "); UPDATE fenced_accounts SET "
                 "balance = balance; UPDATE fenced_pl_accounts SET balance = balance; COMMIT",
                 g_token);
        exec_ok(g_conn, stamp);
        exec_ok(g_conn, "VACUUM fenced_accounts");
        exec_ok(g_conn, "VACUUM fenced_pl_accounts");
        for (int m = 0; m < NMODES; m++) {
            if (g_on[m]) {
                run((enum mode)m, 300);
            }
        }
    }

    /* Each round cycles through the modes in small batches, many times,
     * and adds up each mode's time: whatever the noise of the shared
     * machine, every mode gets its share of it. */
    double tps[NMODES][MAX_ROUNDS];
    double ratio[NMODES][MAX_ROUNDS];
    double cpu_us[NMODES][MAX_ROUNDS]; /* the backend's CPU per transaction */
    for (int r = 0; r < rounds; r++) {
        double spent[NMODES] = {0};
        memset(g_cpu_ns, 0, sizeof g_cpu_ns);
        for (int b = 0; b < OPS / BATCH; b++) {
            for (int k = 0; k < NMODES; k++) {
                int m = (b % 2 == 0) ? k : NMODES - 1 - k; /* ABC..CBA.. */
                if (g_on[m]) {
                    spent[m] += BATCH / run((enum mode)m, BATCH);
                }
            }
        }
        for (int m = 0; m < NMODES; m++) {
            tps[m][r] = g_on[m] ? (OPS / BATCH) * BATCH / spent[m] : 0;
            cpu_us[m][r] = g_cpu_ns[m] / 1000.0 / ((OPS / BATCH) * BATCH);
        }
        for (int m = 0; m < NMODES; m++) {
            /* time per tx, fenced / plain */
            ratio[m][r] = g_on[m] ? tps[PLAIN][r] / tps[m][r] : 0;
        }
        if (getenv("FENCE_BENCH_VERBOSE") != NULL) {
            fprintf(stderr, "# round %d:", r);
            for (int m = 0; m < NMODES; m++) {
                if (g_on[m]) {
                    fprintf(stderr, " %s %.0f", mode_name[m], tps[m][r]);
                }
            }
            fprintf(stderr, "\n");
        }
    }

    double med_tps[NMODES], med_ratio[NMODES];
    for (int m = 0; m < NMODES; m++) {
        med_tps[m] = median(tps[m], rounds);
        med_ratio[m] = median(ratio[m], rounds);
    }
    static const struct {
        const char *name;
        enum mode m;
    } shown[] = {
        {"row_fenced", ROW_FENCED},
        {"row_fenced_c", ROW_FENCED},
        {"row_fenced_plpgsql", ROW_FENCED_PL},
        {"resource_fenced", RESOURCE_FENCED},
        {"resource_fenced_holder", RESOURCE_FENCED_HOLDER},
        {"row_fenced_unprepared", ROW_FENCED_UNPREP},
        {"plain_set_token_only", PLAIN_SET},
        {"row_restamp", ROW_RESTAMP},
        {"row_restamp_c", ROW_RESTAMP},
        {"row_restamp_plpgsql", ROW_RESTAMP_PL},
        {"plain_token", PLAIN_TOKEN},
        {"trivial_trigger", TRIVIAL_TRIGGER},
        {"plpgsql_floor", PLPGSQL_FLOOR},
        /* The floors of the two guards, by the names the goals use. */
        {"trigger_floor_c", TRIVIAL_TRIGGER},
        {"trigger_floor_plpgsql", PLPGSQL_FLOOR},
    };
    for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++) {
        print_ratio(shown[i].name, shown[i].m, med_ratio);
    }
    /* Each guard against the floor of its kind, round by round (the same
     * round's floor), median: what the guard adds to any trigger of its
     * language.  The C floor is PostgreSQL's own
     * suppress_redundant_updates_trigger (a C row trigger that compares
     * OLD and NEW and returns NEW), the PL/pgSQL floor RETURN NEW. */
    static const struct {
        const char *name;
        enum mode guard, floor;
    } over_floor[] = {
        {"pg_row_fenced_vs_trigger_floor_c_ratio", ROW_FENCED, TRIVIAL_TRIGGER},
        {"pg_row_fenced_plpgsql_vs_trigger_floor_plpgsql_ratio", ROW_FENCED_PL, PLPGSQL_FLOOR},
    };
    for (size_t i = 0; i < sizeof over_floor / sizeof over_floor[0]; i++) {
        enum mode g = over_floor[i].guard, f = over_floor[i].floor;
        if (g_on[g] && g_on[f]) {
            double rr[MAX_ROUNDS];
            for (int r = 0; r < rounds; r++) {
                rr[r] = tps[f][r] / tps[g][r];
            }
            printf("%s %.3f x\n", over_floor[i].name, median(rr, rounds));
        }
    }
    for (int m = 0; m < NMODES; m++) {
        if (g_on[m]) {
            printf("pg_%s_tps %.0f tx/s\n", mode_name[m], med_tps[m]);
        }
    }
    printf("pg_bench_rounds %d rounds\n", rounds);
    if (getenv("FENCE_BENCH_VERBOSE") != NULL && getenv("FENCE_BENCH_MODES") != NULL) {
        fprintf(stderr, "# server cpu us/tx:");
        for (int m = 0; m < NMODES; m++) {
            if (g_on[m]) {
                fprintf(stderr, " %s %.2f", mode_name[m], median(cpu_us[m], rounds));
            }
        }
        fprintf(stderr, "\n");
    } else if (getenv("FENCE_BENCH_VERBOSE") != NULL) {
        /* Where the time of a fenced write goes: differences of the
         * medians' times per transaction. */
        double us[NMODES];
        for (int m = 0; m < NMODES; m++) {
            us[m] = 1e6 / med_tps[m];
        }
        fprintf(stderr,
                "# us/tx: plain %.1f | pipeline +%.1f | token (set_config of fence.token "
                "+%.1f) fence_pg_send_token +%.1f | trigger floor +%.1f | c guard +%.1f over "
                "the floor (row_fenced %.1f) | plpgsql floor (RETURN NEW) +%.1f, plpgsql guard +%.1f "
                "over it (row_fenced_plpgsql %.1f) | resource +%.1f over the token (%.1f) | "
                "restamp c +%.1f, plpgsql +%.1f over row_fenced\n",
                us[PLAIN], us[PLAIN_PIPE] - us[PLAIN], us[PLAIN_SET] - us[PLAIN_PIPE],
                us[PLAIN_TOKEN] - us[PLAIN_PIPE], us[TRIVIAL_TRIGGER] - us[PLAIN_TOKEN],
                us[ROW_FENCED] - us[TRIVIAL_TRIGGER], us[ROW_FENCED],
                us[PLPGSQL_FLOOR] - us[TRIVIAL_TRIGGER],
                us[ROW_FENCED_PL] - us[PLPGSQL_FLOOR], us[ROW_FENCED_PL],
                us[RESOURCE_FENCED] - us[PLAIN_TOKEN], us[RESOURCE_FENCED],
                us[ROW_RESTAMP] - us[ROW_FENCED], us[ROW_RESTAMP_PL] - us[ROW_FENCED_PL]);
        /* The same differences in the backend's CPU time (medians). */
        double cpu[NMODES];
        for (int m = 0; m < NMODES; m++) {
            cpu[m] = median(cpu_us[m], rounds);
        }
        if (cpu[PLAIN] > 0) {
            fprintf(stderr, "# server cpu us/tx:");
            for (int m = 0; m < NMODES; m++) {
                fprintf(stderr, " %s %.2f", mode_name[m], cpu[m]);
            }
            fprintf(stderr,
                    "\n# server cpu: token +%.2f | trigger floor +%.2f | c guard +%.2f over the "
                    "floor | "
                    "plpgsql floor +%.2f, plpgsql guard +%.2f over it | resource +%.2f over "
                    "the token\n",
                    cpu[PLAIN_TOKEN] - cpu[PLAIN_PIPE], cpu[TRIVIAL_TRIGGER] - cpu[PLAIN_TOKEN],
                    cpu[ROW_FENCED] - cpu[TRIVIAL_TRIGGER],
                    cpu[PLPGSQL_FLOOR] - cpu[TRIVIAL_TRIGGER],
                    cpu[ROW_FENCED_PL] - cpu[PLPGSQL_FLOOR],
                    cpu[RESOURCE_FENCED] - cpu[PLAIN_TOKEN]);
        }
    }

    /* Sanity: every fenced row carries a token; no transaction was lost
     * (the marks only when the resource modes ran). */
    PGresult *res = PQexec(g_conn, "SELECT (SELECT count(*) FROM fenced_accounts WHERE "
                                   "fence_token = 0) + (SELECT count(*) FROM fenced_pl_accounts "
                                   "WHERE fence_token = 0), fence.mark('bench'), "
                                   "fence.mark('bench-h'), fence.mark_holder('bench-h')");
    if (PQresultStatus(res) != PGRES_TUPLES_OK || strcmp(PQgetvalue(res, 0, 0), "0") != 0 ||
        (g_on[RESOURCE_FENCED] && strcmp(PQgetvalue(res, 0, 1), "1000") != 0) ||
        (g_on[RESOURCE_FENCED_HOLDER] && (strcmp(PQgetvalue(res, 0, 2), "1000") != 0 ||
                                          strcmp(PQgetvalue(res, 0, 3), BENCH_HOLDER) != 0))) {
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
