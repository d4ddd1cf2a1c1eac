/*
 * bench_pg.c -- what fencing costs a PostgreSQL write, on a direct
 * connection and through pgbouncer in transaction mode.
 *
 * pgbench-style single-row UPDATE (accounts, 10,000 rows, random id, one
 * statement per transaction), one client.  The database has fence.sql and
 * the extension (CREATE EXTENSION fence); each per-row mode runs on a
 * table of its own protected with fence.protect(tbl, col, false, 'c' |
 * 'plpgsql').  The token is the same for the whole run (one holder writing
 * many times) except in the restamp modes, so after the warm-up every row
 * already carries it: the guard's fast path.
 *
 * Two databases: "ext" has the extension (CREATE EXTENSION fence: the C
 * guard, fence.c_use_token), "portable" has fence.sql alone (the generated
 * PL/pgSQL guard, fence.sql's PL/pgSQL fence.use_token).  Six client
 * connections, each with its own baseline: every ratio is over the plain
 * UPDATE of the same connection, so that what differs between two
 * backends -- which core, which caches -- cancels out:
 *   direct            ext, libfence_pg after fence_pg_prepare() (which finds
 *                     fence.c_use_token), unnamed token statements (safe
 *                     behind a pooler); its UPDATEs prepared by name.
 *   unpooled          ext, a connection the application declared unpooled
 *                     (fence_pg_prepare_unpooled: the token statements
 *                     prepared by name); its UPDATEs prepared by name.
 *   portable, portable_unpooled  the same two on the portable database.
 *   bouncer, bouncer_portable  through pgbouncer, pool_mode transaction
 *                     (FENCE_TEST_PGBOUNCER_PORT and _TX_USER of
 *                     scripts/with-servers --pgbouncer), after
 *                     fence_pg_prepare(): every statement unnamed (a name
 *                     would not survive the pooler), the UPDATE too.
 * Modes (a fenced transaction is the token statement + the UPDATE + one
 * Sync, pipelined: one round trip, one implicit transaction):
 *   plain*         the UPDATE alone in autocommit (PQexecPrepared, or
 *                  PQexecParams through pgbouncer): each connection's
 *                  baseline.
 *   plain_pipe     the UPDATE alone in a pipeline.
 *   floor_set      the floor of a direct connection: a prepared set_config
 *                  of fence.token alone, then the UPDATE.
 *   floor_set3     the floor of a pooled connection: one unnamed statement
 *                  that sets the same three settings use_token sets
 *                  (fence.token, fence.holder, fence.xact), then the
 *                  UPDATE; on the direct connection and through pgbouncer.
 *   plain_token    fence_pg_send_token() + the UPDATE on the plain table.
 *   trivial_trigger, plpgsql_floor  the same on a table whose only trigger
 *                  is PostgreSQL's own C row trigger
 *                  suppress_redundant_updates_trigger(), or a PL/pgSQL
 *                  RETURN NEW: the floor of any C / PL/pgSQL row trigger.
 *   row_fenced*    fence_pg_send_token() + the UPDATE of a protected
 *                  table (c on ext, plpgsql on portable).
 *   row_restamp*   the same with a new, higher token every transaction:
 *                  the guard stamps every row.
 *   resource_fenced*  fence_pg_send_token() with a resource (fence.advance)
 *                  + the UPDATE on the plain table; _holder with a holder.
 *   use_token_*    candidates for the token statement, each + the UPDATE
 *                  of the plain table: fence.sql's PL/pgSQL use_token and
 *                  the extension's C fence.c_use_token, each sent unnamed
 *                  or prepared by name.
 * Each cycle runs every mode for a batch of 20 transactions (ABC..CBA..);
 * a mode's sample of a cycle is its batch's time over the same cycle's
 * batch of its connection's plain, in wall time and in the server's CPU
 * (the backends' /proc/PID/schedstat: through pgbouncer the backends of
 * the pool's server connections); a figure is the median of its samples
 * over every cycle (ROUNDS x 40 cycles).  pg_X_vs_plain_ratio is wall
 * time, pg_X_vs_plain_cpu_ratio server CPU (far steadier on a shared
 * machine: the client and other programs are left out).
 * FENCE_BENCH_MODES=row_fenced,plain_token (diagnostic, e.g. under perf)
 * runs only the modes named (and their plains), and prints only their
 * figures; the diag_* modes (where fence.advance's time goes) run only
 * so; FENCE_BENCH_ROUNDS sets the rounds; FENCE_BENCH_VERBOSE=1
 * prints each mode's median wall and CPU time per transaction.
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
#define BATCH 20   /* transactions in a row of one mode */
#define CYCLES 40  /* cycles per round */
#define ROUNDS 9
#define MAX_ROUNDS 64
#define MAX_SAMPLES (MAX_ROUNDS * CYCLES)
#define MAX_PIDS 8

enum conn_id { DIRECT, UNPOOLED, PORTABLE, PORTABLE_UNPOOLED, BOUNCER, BOUNCER_PORTABLE, NCONNS };
/* Which database each connection is on (1: portable), and how it came. */
static const int conn_portable[NCONNS] = {0, 0, 1, 1, 0, 1};
static const int conn_bouncer[NCONNS] = {0, 0, 0, 0, 1, 1};
static const int conn_unpooled[NCONNS] = {0, 1, 0, 1, 0, 0};
static PGconn *g_conn[NCONNS];

/* How a mode sends its token. */
enum how {
    H_NONE,   /* the UPDATE alone, autocommit, no pipeline */
    H_PIPE,   /* the UPDATE alone in a pipeline */
    H_LIB,    /* fence_pg_send_token() */
    H_NAMED,  /* the bench's own statement, prepared by name */
    H_UNNAMED /* the bench's own statement, unnamed */
};

/* The bench's own token statements ($1 the token, $2 the holder). */
static const char SQL_FLOOR_SET[] = "SELECT pg_catalog.set_config('fence.token', $1, true)";
static const char SQL_FLOOR_SET3[] =
    "SELECT pg_catalog.set_config('fence.token', $1, true), "
    "pg_catalog.set_config('fence.holder', $2, true), "
    "pg_catalog.set_config('fence.xact', pg_catalog.pg_current_xact_id()::pg_catalog.text, true)";
static const char SQL_USE_PL[] =
    "SELECT WHERE fence.use_token($1::pg_catalog.int8, $2) IS NOT NULL";
static const char SQL_USE_C[] =
    "SELECT WHERE fence.c_use_token($1::pg_catalog.int8, $2) IS NOT NULL";
/* Diagnostics of fence.advance (FENCE_BENCH_MODES only): the same token
 * statement as plain_token with, beside it, fence.advance itself; its row
 * lock alone (the SELECT ... FOR UPDATE of its hot path, in SQL); the same
 * read without the lock; an empty PL/pgSQL function, as invoker and as
 * SECURITY DEFINER (fence.advance is one); the lock inside such a
 * function; and fence.advance's hot path folded into its locking query
 * (diag_folded: the rule computed by the SELECT ... FOR UPDATE itself).
 * And of the portable token statement: fence.use_token by name
 * (diag_use_plpgsql) and a leaner PL/pgSQL one (diag_use_lean: one IF
 * for every refusal, then fence.use_token for its exact error;
 * diag_use_simple: its three set_config as assignments, PL/pgSQL's simple
 * expressions, instead of one PERFORM).  Resource 'bench', whose mark is the steady token. */
#define DIAG_TOK "SELECT fence.c_use_token($1::pg_catalog.int8, $2), "
static const char SQL_DIAG_ADVANCE[] = DIAG_TOK "fence.advance('bench', $1::pg_catalog.int8)";
static const char SQL_DIAG_LOCK[] =
    DIAG_TOK "(SELECT m.token FROM fence.marks m WHERE m.resource = 'bench' FOR UPDATE)";
static const char SQL_DIAG_READ[] =
    DIAG_TOK "(SELECT m.token FROM fence.marks m WHERE m.resource = 'bench')";
static const char SQL_DIAG_INVOKER[] = DIAG_TOK "public.diag_invoker('bench', $1::pg_catalog.int8)";
static const char SQL_DIAG_DEFINER[] = DIAG_TOK "public.diag_definer('bench', $1::pg_catalog.int8)";
static const char SQL_DIAG_LOCK_PL[] = DIAG_TOK "public.diag_lock('bench', $1::pg_catalog.int8)";
static const char SQL_DIAG_FOLDED[] = DIAG_TOK "public.diag_folded('bench', $1::pg_catalog.int8)";
/* A leaner portable use_token: one IF for every refusal (which then
 * calls fence.use_token for its exact error), one PERFORM. */
static const char SQL_DIAG_USE_PL[] = "SELECT fence.use_token($1::pg_catalog.int8, $2)";
static const char SQL_DIAG_USE_LEAN[] = "SELECT public.diag_use_lean($1::pg_catalog.int8, $2)";
/* The same with three assignments (PL/pgSQL's simple expressions) for the
 * PERFORM. */
static const char SQL_DIAG_USE_SIMPLE[] = "SELECT public.diag_use_simple($1::pg_catalog.int8, $2)";
static const char SQL_DIAG_LOCK_PL_DEF[] =
    DIAG_TOK "public.diag_lock_definer('bench', $1::pg_catalog.int8)";
/* The PL/pgSQL functions they call (created in each database). */
static const char SQL_DIAG_FUNCS[] =
    "CREATE FUNCTION public.diag_invoker(text, bigint) RETURNS bigint LANGUAGE plpgsql"
    " AS $$BEGIN RETURN $2; END$$;"
    "CREATE FUNCTION public.diag_definer(text, bigint) RETURNS bigint LANGUAGE plpgsql"
    " SECURITY DEFINER AS $$BEGIN RETURN $2; END$$;"
    "CREATE FUNCTION public.diag_lock(text, bigint) RETURNS bigint LANGUAGE plpgsql AS"
    " $$DECLARE s bigint; BEGIN SELECT m.token INTO s FROM fence.marks m"
    " WHERE m.resource = $1 FOR UPDATE; RETURN s; END$$;"
    "CREATE FUNCTION public.diag_lock_definer(text, bigint) RETURNS bigint LANGUAGE plpgsql"
    " SECURITY DEFINER AS $$DECLARE s bigint; BEGIN SELECT m.token INTO s FROM fence.marks m"
    " WHERE m.resource = $1 FOR UPDATE; RETURN s; END$$;"
    /* fence.advance's hot path folded into its one locking query */
    "CREATE FUNCTION public.diag_folded(resource text, token bigint) RETURNS bigint"
    " LANGUAGE plpgsql SECURITY DEFINER AS $$DECLARE s bigint; ok boolean; BEGIN"
    " SELECT m.token, fence.mark_rule(m.token, m.holder, diag_folded.token,"
    " pg_catalog.current_setting('fence.holder', true)) OPERATOR(pg_catalog.=) 'admit'"
    " AND (COALESCE(pg_catalog.current_setting('fence.holder', true), '') OPERATOR(pg_catalog.=) ''"
    " OR pg_catalog.current_setting('fence.xact', true) OPERATOR(pg_catalog.=)"
    " pg_catalog.pg_current_xact_id()::pg_catalog.text) INTO s, ok FROM fence.marks m"
    " WHERE m.resource OPERATOR(pg_catalog.=) diag_folded.resource FOR UPDATE;"
    " IF ok THEN RETURN s; END IF; RETURN fence.advance(resource, token); END$$;"
    "CREATE FUNCTION public.diag_use_lean(token bigint, holder text DEFAULT NULL) RETURNS bigint"
    " LANGUAGE plpgsql AS $$BEGIN"
    " IF token IS NULL OR token OPERATOR(pg_catalog.<=) 0 OR (holder IS NOT NULL AND holder"
    " OPERATOR(pg_catalog.<>) '' AND holder OPERATOR(pg_catalog.!~) '^[0-9a-f]{32}$') THEN"
    " RETURN fence.use_token(token, holder); END IF;"
    " PERFORM pg_catalog.set_config('fence.token', token::pg_catalog.text, true),"
    " pg_catalog.set_config('fence.holder', COALESCE(holder, ''), true),"
    " pg_catalog.set_config('fence.xact', pg_catalog.pg_current_xact_id()::pg_catalog.text, true);"
    " RETURN token; END$$;"
    "CREATE FUNCTION public.diag_use_simple(token bigint, holder text DEFAULT NULL) RETURNS bigint"
    " LANGUAGE plpgsql AS $$DECLARE v text; BEGIN"
    " IF token IS NULL OR token OPERATOR(pg_catalog.<=) 0 OR (holder IS NOT NULL AND holder"
    " OPERATOR(pg_catalog.<>) '' AND holder OPERATOR(pg_catalog.!~) '^[0-9a-f]{32}$') THEN"
    " RETURN fence.use_token(token, holder); END IF;"
    " v := pg_catalog.set_config('fence.token', token::pg_catalog.text, true);"
    " v := pg_catalog.set_config('fence.holder', COALESCE(holder, ''), true);"
    " v := pg_catalog.set_config('fence.xact', pg_catalog.pg_current_xact_id()::pg_catalog.text, true);"
    " RETURN token; END$$";

typedef struct mode_def {
    const char *name;
    enum conn_id conn;
    enum how how;
    const char *table;    /* the UPDATE's table */
    const char *sql;      /* H_NAMED / H_UNNAMED: the token statement */
    int nparams;          /* its parameters: 1 (token) or 2 (token, holder) */
    int restamp;          /* a new token every transaction */
    const char *resource; /* H_LIB: advance this resource */
    int holder;           /* H_LIB: with a holder id */
} mode_def;

static const mode_def modes[] = {
    /* direct: unnamed token statements (what a pooled connection sends) */
    {"plain", DIRECT, H_NONE, "plain_accounts", NULL, 0, 0, NULL, 0},
    {"plain_pipe", DIRECT, H_PIPE, "plain_accounts", NULL, 0, 0, NULL, 0},
    {"floor_set3", DIRECT, H_UNNAMED, "plain_accounts", SQL_FLOOR_SET3, 2, 0, NULL, 0},
    {"plain_token_unnamed", DIRECT, H_LIB, "plain_accounts", NULL, 0, 0, NULL, 0},
    {"row_fenced_unnamed", DIRECT, H_LIB, "fenced_accounts", NULL, 0, 0, NULL, 0},
    {"resource_fenced_unnamed", DIRECT, H_LIB, "plain_accounts", NULL, 0, 0, "bench-d", 0},
    {"use_token_plpgsql_unnamed", DIRECT, H_UNNAMED, "plain_accounts", SQL_USE_PL, 2, 0, NULL, 0},
    {"use_token_plpgsql_named", DIRECT, H_NAMED, "plain_accounts", SQL_USE_PL, 2, 0, NULL, 0},
    {"use_token_c_unnamed", DIRECT, H_UNNAMED, "plain_accounts", SQL_USE_C, 2, 0, NULL, 0},
    {"use_token_c_named", DIRECT, H_NAMED, "plain_accounts", SQL_USE_C, 2, 0, NULL, 0},
    /* unpooled: the library's best on a direct connection, the C guard */
    {"plain_unpooled", UNPOOLED, H_NONE, "plain_accounts", NULL, 0, 0, NULL, 0},
    {"floor_set", UNPOOLED, H_NAMED, "plain_accounts", SQL_FLOOR_SET, 1, 0, NULL, 0},
    {"plain_token", UNPOOLED, H_LIB, "plain_accounts", NULL, 0, 0, NULL, 0},
    {"trivial_trigger", UNPOOLED, H_LIB, "trivial_accounts", NULL, 0, 0, NULL, 0},
    {"row_fenced", UNPOOLED, H_LIB, "fenced_accounts", NULL, 0, 0, NULL, 0},
    {"row_restamp", UNPOOLED, H_LIB, "restamp_accounts", NULL, 0, 1, NULL, 0},
    {"resource_fenced", UNPOOLED, H_LIB, "plain_accounts", NULL, 0, 0, "bench", 0},
    {"resource_fenced_holder", UNPOOLED, H_LIB, "plain_accounts", NULL, 0, 0, "bench-h", 1},
    /* portable (fence.sql alone), unnamed */
    {"plain_portable", PORTABLE, H_NONE, "plain_accounts", NULL, 0, 0, NULL, 0},
    {"row_fenced_plpgsql_unnamed", PORTABLE, H_LIB, "fenced_pl_accounts", NULL, 0, 0, NULL, 0},
    {"resource_fenced_portable_unnamed", PORTABLE, H_LIB, "plain_accounts", NULL, 0, 0, "bench-d",
     0},
    /* portable, unpooled */
    {"plain_portable_unpooled", PORTABLE_UNPOOLED, H_NONE, "plain_accounts", NULL, 0, 0, NULL, 0},
    {"plain_token_portable", PORTABLE_UNPOOLED, H_LIB, "plain_accounts", NULL, 0, 0, NULL, 0},
    {"plpgsql_floor", PORTABLE_UNPOOLED, H_LIB, "floor_pl_accounts", NULL, 0, 0, NULL, 0},
    {"row_fenced_plpgsql", PORTABLE_UNPOOLED, H_LIB, "fenced_pl_accounts", NULL, 0, 0, NULL, 0},
    {"row_restamp_plpgsql", PORTABLE_UNPOOLED, H_LIB, "restamp_pl_accounts", NULL, 0, 1, NULL, 0},
    {"resource_fenced_portable", PORTABLE_UNPOOLED, H_LIB, "plain_accounts", NULL, 0, 0, "bench",
     0},
    /* through pgbouncer, transaction mode: everything unnamed */
    {"bouncer_plain", BOUNCER, H_NONE, "plain_accounts", NULL, 0, 0, NULL, 0},
    {"bouncer_floor_set3", BOUNCER, H_UNNAMED, "plain_accounts", SQL_FLOOR_SET3, 2, 0, NULL, 0},
    {"bouncer_row_fenced", BOUNCER, H_LIB, "fenced_accounts", NULL, 0, 0, NULL, 0},
    {"bouncer_resource_fenced", BOUNCER, H_LIB, "plain_accounts", NULL, 0, 0, "bench-b", 0},
    {"bouncer_portable_plain", BOUNCER_PORTABLE, H_NONE, "plain_accounts", NULL, 0, 0, NULL, 0},
    {"bouncer_portable_floor_set3", BOUNCER_PORTABLE, H_UNNAMED, "plain_accounts", SQL_FLOOR_SET3,
     2, 0, NULL, 0},
    {"bouncer_row_fenced_plpgsql", BOUNCER_PORTABLE, H_LIB, "fenced_pl_accounts", NULL, 0, 0,
     NULL, 0},
    /* diagnostics, run only when FENCE_BENCH_MODES names them */
    {"diag_advance", UNPOOLED, H_NAMED, "plain_accounts", SQL_DIAG_ADVANCE, 2, 0, NULL, 0},
    {"diag_lock_sql", UNPOOLED, H_NAMED, "plain_accounts", SQL_DIAG_LOCK, 2, 0, NULL, 0},
    {"diag_read_sql", UNPOOLED, H_NAMED, "plain_accounts", SQL_DIAG_READ, 2, 0, NULL, 0},
    {"diag_invoker", UNPOOLED, H_NAMED, "plain_accounts", SQL_DIAG_INVOKER, 2, 0, NULL, 0},
    {"diag_definer", UNPOOLED, H_NAMED, "plain_accounts", SQL_DIAG_DEFINER, 2, 0, NULL, 0},
    {"diag_lock_plpgsql", UNPOOLED, H_NAMED, "plain_accounts", SQL_DIAG_LOCK_PL, 2, 0, NULL, 0},
    {"diag_use_plpgsql", UNPOOLED, H_NAMED, "plain_accounts", SQL_DIAG_USE_PL, 2, 0, NULL, 0},
    {"diag_use_lean", UNPOOLED, H_NAMED, "plain_accounts", SQL_DIAG_USE_LEAN, 2, 0, NULL, 0},
    {"diag_use_simple", UNPOOLED, H_NAMED, "plain_accounts", SQL_DIAG_USE_SIMPLE, 2, 0, NULL, 0},
    {"diag_folded", UNPOOLED, H_NAMED, "plain_accounts", SQL_DIAG_FOLDED, 2, 0, NULL, 0},
    {"diag_lock_plpgsql_definer", UNPOOLED, H_NAMED, "plain_accounts", SQL_DIAG_LOCK_PL_DEF, 2, 0,
     NULL, 0},
};
#define NMODES ((int)(sizeof modes / sizeof modes[0]))

static const char BENCH_HOLDER[] = "0123456789abcdef0123456789abcdef";
static uint64_t g_token = 1000;            /* the steady holder's token */
static uint64_t g_restamp_token = 2000000; /* rises every restamp transaction */
static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;
static int g_on[NMODES];       /* the modes this run measures */
static int g_conn_on[NCONNS];  /* the connections they need */
static int g_plain_of[NCONNS]; /* the plain mode of each connection */
/* The backends a connection's transactions run on (through pgbouncer:
 * the pool's server connections, asked before each round). */
static int g_pids[NCONNS][MAX_PIDS];
static int g_npids[NCONNS];

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
static void drain_pipeline(PGconn *c, int n, const char *mode)
{
    for (int i = 0; i < n; i++) {
        PGresult *r = PQgetResult(c);
        if (fence_pg_classify(c, r, NULL) != FENCE_OK) {
            die(mode, fence_pg_errmsg(c));
        }
        PQclear(r);
        if ((r = PQgetResult(c)) != NULL) {
            die(mode, "unexpected extra result");
        }
    }
    PGresult *r = PQgetResult(c);
    if (PQresultStatus(r) != PGRES_PIPELINE_SYNC) {
        die(mode, "no sync");
    }
    PQclear(r);
}

/* The UPDATE of table t ($1 the id). */
static void update_sql(char *buf, size_t n, const char *t)
{
    snprintf(buf, n, "UPDATE %s SET balance = balance + 1 WHERE id = $1", t);
}

/* The statement name of mode m's own token statement (H_NAMED). */
static void stmt_name(char *buf, size_t n, int m)
{
    snprintf(buf, n, "bench_tok_%d", m);
}

/* Queue (pipeline) or send (H_NONE) mode m's UPDATE: by name on a direct
 * connection (the statement is named after its table), unnamed through
 * pgbouncer. */
static int send_update(const mode_def *d, PGconn *c, const char *const *p1)
{
    if (conn_bouncer[d->conn]) {
        char sql[128];
        update_sql(sql, sizeof sql, d->table);
        return PQsendQueryParams(c, sql, 1, NULL, p1, NULL, NULL, 0);
    }
    return PQsendQueryPrepared(c, d->table, 1, p1, NULL, NULL, 0);
}

/* One transaction of mode m. */
static void one_tx(int m)
{
    const mode_def *d = &modes[m];
    PGconn *c = g_conn[d->conn];
    char id[16];
    snprintf(id, sizeof id, "%d", next_id());
    const char *p1[1] = {id};

    if (d->how == H_NONE) {
        if (!send_update(d, c, p1)) {
            die(d->name, PQerrorMessage(c));
        }
        PGresult *r = PQgetResult(c);
        if (fence_pg_classify(c, r, NULL) != FENCE_OK) {
            die(d->name, fence_pg_errmsg(c));
        }
        PQclear(r);
        if ((r = PQgetResult(c)) != NULL) {
            die(d->name, "unexpected extra result");
        }
        return;
    }
    int n = 1;
    if (d->how != H_PIPE) {
        uint64_t tok = d->restamp ? ++g_restamp_token : g_token;
        char t[24];
        snprintf(t, sizeof t, "%" PRIu64, tok);
        const char *pt[2] = {t, ""};
        int ok = 1;
        if (d->how == H_LIB) {
            if (fence_pg_send_token(c, tok, d->holder ? BENCH_HOLDER : NULL, d->resource) !=
                FENCE_OK) {
                die(d->name, fence_pg_errmsg(c));
            }
        } else if (d->how == H_NAMED) {
            char name[32];
            stmt_name(name, sizeof name, m);
            ok = PQsendQueryPrepared(c, name, d->nparams, pt, NULL, NULL, 0);
        } else {
            ok = PQsendQueryParams(c, d->sql, d->nparams, NULL, pt, NULL, NULL, 0);
        }
        if (!ok) {
            die(d->name, PQerrorMessage(c));
        }
        n = 2;
    }
    if (!send_update(d, c, p1) || !PQpipelineSync(c)) {
        die(d->name, PQerrorMessage(c));
    }
    drain_pipeline(c, n, d->name);
}

/* The CPU time (ns) of the backends of connection k, from
 * /proc/PID/schedstat (the test servers run on this machine; a backend
 * that went away counts 0). */
static double backends_cpu_ns(int k)
{
    double sum = 0;
    for (int i = 0; i < g_npids[k]; i++) {
        char path[64];
        unsigned long long v = 0;
        snprintf(path, sizeof path, "/proc/%d/schedstat", g_pids[k][i]);
        FILE *f = fopen(path, "r");
        if (f != NULL) {
            if (fscanf(f, "%llu", &v) == 1) {
                sum += (double)v;
            }
            fclose(f);
        }
    }
    return sum;
}

/* The backends of each connection: its own, or through pgbouncer every
 * backend of the pool's role on its database (asked on admin). */
static void find_backends(PGconn *admin, const char *const *dbnames, const char *pool_user)
{
    for (int k = 0; k < NCONNS; k++) {
        g_npids[k] = 0;
        if (!g_conn_on[k]) {
            continue;
        }
        if (!conn_bouncer[k]) {
            g_pids[k][0] = PQbackendPID(g_conn[k]);
            g_npids[k] = 1;
            continue;
        }
        const char *pv[2] = {dbnames[conn_portable[k]], pool_user};
        PGresult *r = PQexecParams(admin,
                                   "SELECT pid FROM pg_catalog.pg_stat_activity "
                                   "WHERE datname = $1 AND usename = $2",
                                   2, NULL, pv, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            die("pg_stat_activity", PQresultErrorMessage(r));
        }
        for (int i = 0; i < PQntuples(r) && i < MAX_PIDS; i++) {
            g_pids[k][g_npids[k]++] = atoi(PQgetvalue(r, i, 0));
        }
        PQclear(r);
    }
}

/* Run n transactions of mode m; its wall seconds into *sec and its
 * backends' CPU ns into *cpu. */
static void run(int m, int n, double *sec, double *cpu)
{
    const mode_def *d = &modes[m];
    PGconn *c = g_conn[d->conn];
    int pipe = d->how != H_NONE;
    if (pipe && !PQenterPipelineMode(c)) {
        die("PQenterPipelineMode", PQerrorMessage(c));
    }
    double cpu0 = backends_cpu_ns(d->conn);
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        one_tx(m);
    }
    *sec = now_s() - t0;
    *cpu = backends_cpu_ns(d->conn) - cpu0;
    if (pipe && !PQexitPipelineMode(c)) {
        die("PQexitPipelineMode", PQerrorMessage(c));
    }
}

/* FENCE_BENCH_MODES: a comma-separated list of mode names (each
 * connection's plain is measured whenever one of its modes is: every
 * ratio is over it); unset or empty: every mode. */
static void select_modes(void)
{
    const char *env = getenv("FENCE_BENCH_MODES");
    int all = env == NULL || env[0] == '\0';
    for (int m = 0; m < NMODES; m++) {
        g_on[m] = all && strncmp(modes[m].name, "diag_", 5) != 0;
        if (modes[m].how == H_NONE) {
            g_plain_of[modes[m].conn] = m;
        }
    }
    while (!all && *env != '\0') {
        size_t n = strcspn(env, ",");
        int found = 0;
        for (int m = 0; m < NMODES; m++) {
            if (strlen(modes[m].name) == n && strncmp(env, modes[m].name, n) == 0) {
                g_on[m] = found = 1;
            }
        }
        if (!found) {
            die("FENCE_BENCH_MODES: no such mode", env);
        }
        env += n + (env[n] == ',');
    }
    for (int m = 0; m < NMODES; m++) {
        if (g_on[m]) {
            g_conn_on[modes[m].conn] = 1;
        }
    }
    for (int k = 0; k < NCONNS; k++) {
        if (g_conn_on[k]) {
            g_on[g_plain_of[k]] = 1;
        }
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (v is sorted in place). */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int mode_index(const char *name)
{
    for (int m = 0; m < NMODES; m++) {
        if (strcmp(modes[m].name, name) == 0) {
            return m;
        }
    }
    die("no such mode", name);
    return -1;
}

static PGconn *connect_db(const char *conninfo, const char *dbname)
{
    const char *keys[3] = {"dbname", "dbname", NULL};
    const char *vals[3] = {conninfo, dbname, NULL};
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    if (PQstatus(c) != CONNECTION_OK) {
        die("connect", PQerrorMessage(c));
    }
    return c;
}

static const char *const TABLES[] = {
    "plain_accounts",      "fenced_accounts",  "fenced_pl_accounts", "restamp_accounts",
    "restamp_pl_accounts", "trivial_accounts", "floor_pl_accounts",
};
#define NTABLES ((int)(sizeof TABLES / sizeof TABLES[0]))

/* Per mode and cycle: its batch's wall seconds and backend CPU ns. */
static double g_sec[NMODES][MAX_SAMPLES];
static double g_cpu[NMODES][MAX_SAMPLES];
static int g_samples;

/* The median over the cycles of a's batch over b's, in wall time
 * (cpu 0) or server CPU (cpu 1).  Modes of two connections are compared
 * through their plains: (a / a's plain) / (b / b's plain), cycle by cycle. */
static double ratio_of(int a, int b, int cpu)
{
    static double rr[MAX_SAMPLES];
    int pa = g_plain_of[modes[a].conn], pb = g_plain_of[modes[b].conn];
    int n = 0;
    for (int i = 0; i < g_samples; i++) {
        double x = cpu ? g_cpu[a][i] : g_sec[a][i], y = cpu ? g_cpu[b][i] : g_sec[b][i];
        if (pa != pb) {
            double xp = cpu ? g_cpu[pa][i] : g_sec[pa][i], yp = cpu ? g_cpu[pb][i] : g_sec[pb][i];
            x = xp > 0 ? x / xp : 0;
            y = yp > 0 ? y / yp : 0;
        }
        if (y > 0) {
            rr[n++] = x / y;
        }
    }
    return n > 0 ? median(rr, n) : 0;
}

/* A mode's median per transaction, in us (wall or server CPU). */
static double us_of(int m, int cpu)
{
    static double v[MAX_SAMPLES];
    for (int i = 0; i < g_samples; i++) {
        v[i] = (cpu ? g_cpu[m][i] / 1e3 : g_sec[m][i] * 1e6) / BATCH;
    }
    return median(v, g_samples);
}

/* Print the figures of modes a over b, when both ran: wall and CPU. */
static void print_over(const char *name, const char *a, const char *b)
{
    int ma = mode_index(a), mb = mode_index(b);
    if (g_on[ma] && g_on[mb]) {
        printf("%s %.3f x\n", name, ratio_of(ma, mb, 0));
        printf("%s_cpu %.3f x\n", name, ratio_of(ma, mb, 1));
    }
}

/* A database of fence.sql (ext: and the extension), its tables filled,
 * the fenced ones stamped with the steady token. */
static void setup_db(const char *conninfo, const char *dbname, int ext, const char *pool_user)
{
    char sql[1024];
    PGconn *setup = connect_db(conninfo, dbname);
    if (fence_pg_install(setup) != FENCE_OK) {
        die("install", fence_pg_errmsg(setup));
    }
    if (ext) {
        PGresult *r = PQexec(setup, "CREATE EXTENSION fence");
        if (fence_pg_classify(setup, r, NULL) != FENCE_OK) {
            die("CREATE EXTENSION fence (run under scripts/with-servers with "
                "FENCE_PGEXT_DIR=BUILD/lib/pgext, as make bench does)",
                fence_pg_errmsg(setup));
        }
        PQclear(r);
        r = PQexec(setup, "SELECT pg_catalog.to_regprocedure("
                          "'fence.c_use_token(bigint, text)') IS NOT NULL");
        if (PQresultStatus(r) != PGRES_TUPLES_OK || PQgetvalue(r, 0, 0)[0] != 't') {
            die("the extension has no fence.c_use_token", "build lib/pgext (1.5)");
        }
        PQclear(r);
    }
    snprintf(sql, sizeof sql,
             "CREATE TABLE plain_accounts (id int PRIMARY KEY, balance bigint NOT NULL, "
             "filler char(84) NOT NULL DEFAULT '');"
             "INSERT INTO plain_accounts (id, balance) SELECT g, 0 FROM generate_series(1, %d) g",
             ROWS);
    exec_ok(setup, sql);
    for (int t = 1; t < NTABLES; t++) {
        snprintf(sql, sizeof sql,
                 "CREATE TABLE %s (LIKE plain_accounts INCLUDING ALL);"
                 "INSERT INTO %s SELECT * FROM plain_accounts",
                 TABLES[t], TABLES[t]);
        exec_ok(setup, sql);
    }
    exec_ok(setup, SQL_DIAG_FUNCS);
    exec_ok(setup, "CREATE TRIGGER trivial BEFORE UPDATE ON trivial_accounts FOR EACH ROW "
                   "EXECUTE FUNCTION suppress_redundant_updates_trigger();"
                   "CREATE FUNCTION floor_pl() RETURNS trigger LANGUAGE plpgsql AS "
                   "$$BEGIN RETURN NEW; END$$;"
                   "CREATE TRIGGER floor_pl BEFORE UPDATE ON floor_pl_accounts FOR EACH ROW "
                   "EXECUTE FUNCTION floor_pl();"
                   "SELECT fence.protect('fenced_pl_accounts', 'fence_token', false, 'plpgsql'),"
                   " fence.protect('restamp_pl_accounts', 'fence_token', false, 'plpgsql')");
    if (ext) {
        exec_ok(setup, "SELECT fence.protect('fenced_accounts', 'fence_token', false, 'c'),"
                       " fence.protect('restamp_accounts', 'fence_token', false, 'c')");
    }
    if (pool_user != NULL) {
        snprintf(sql, sizeof sql, "GRANT SELECT, UPDATE ON ALL TABLES IN SCHEMA public TO %s",
                 pool_user);
        exec_ok(setup, sql);
    }
    snprintf(sql, sizeof sql,
             "BEGIN; SELECT fence.use_token(%" PRIu64 "), fence.advance('bench', %" PRIu64 ");"
             " UPDATE fenced_pl_accounts SET balance = balance;%s COMMIT",
             g_token, g_token, ext ? " UPDATE fenced_accounts SET balance = balance;" : "");
    exec_ok(setup, sql);
    exec_ok(setup, "VACUUM ANALYZE");
    PQfinish(setup);
}

/* Sanity: every fenced row carries a token; each resource that was
 * advanced has the steady token as its mark (and bench-h its holder). */
static void sanity(const char *conninfo, const char *dbname, int portable)
{
    PGconn *chk = connect_db(conninfo, dbname);
    PGresult *res = PQexec(chk, "SELECT (SELECT count(*) FROM fenced_pl_accounts WHERE "
                                "fence_token = 0), fence.mark('bench'), fence.mark('bench-h'), "
                                "fence.mark_holder('bench-h'), fence.mark('bench-d'), "
                                "fence.mark('bench-b')");
    if (PQresultStatus(res) != PGRES_TUPLES_OK || strcmp(PQgetvalue(res, 0, 0), "0") != 0) {
        die("sanity check", PQresultErrorMessage(res));
    }
    static const struct {
        const char *mode;
        int col, portable;
    } marks[] = {{"resource_fenced", 1, 0},
                 {"resource_fenced_holder", 2, 0},
                 {"resource_fenced_unnamed", 4, 0},
                 {"bouncer_resource_fenced", 5, 0},
                 {"resource_fenced_portable", 1, 1},
                 {"resource_fenced_portable_unnamed", 4, 1}};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++) {
        if (marks[i].portable == portable && g_on[mode_index(marks[i].mode)] &&
            strcmp(PQgetvalue(res, 0, marks[i].col), "1000") != 0) {
            die("sanity check: a resource's mark", marks[i].mode);
        }
    }
    if (!portable && g_on[mode_index("resource_fenced_holder")] &&
        strcmp(PQgetvalue(res, 0, 3), BENCH_HOLDER) != 0) {
        die("sanity check", "the holder of bench-h");
    }
    PQclear(res);
    PQfinish(chk);
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
    select_modes();
    const char *bouncer_port = getenv("FENCE_TEST_PGBOUNCER_PORT");
    const char *pool_user = getenv("FENCE_TEST_PGBOUNCER_TX_USER");
    int bouncer = g_conn_on[BOUNCER] || g_conn_on[BOUNCER_PORTABLE];
    if (bouncer && (bouncer_port == NULL || pool_user == NULL)) {
        die("FENCE_TEST_PGBOUNCER_PORT / _TX_USER are not set",
            "run it under scripts/with-servers --pgbouncer (as make bench does), or name "
            "direct modes only in FENCE_BENCH_MODES");
    }

    /* Databases of our own. */
    char db_ext[64], db_port[64], sql[256];
    snprintf(db_ext, sizeof db_ext, "fence_bench_%d", (int)getpid());
    snprintf(db_port, sizeof db_port, "fence_bench_portable_%d", (int)getpid());
    const char *dbnames[2] = {db_ext, db_port};
    PGconn *admin = PQconnectdb(conninfo);
    if (PQstatus(admin) != CONNECTION_OK) {
        die("connect", PQerrorMessage(admin));
    }
    for (int i = 0; i < 2; i++) {
        snprintf(sql, sizeof sql, "CREATE DATABASE %s", dbnames[i]);
        exec_ok(admin, sql);
        setup_db(conninfo, dbnames[i], i == 0, bouncer ? pool_user : NULL);
    }

    /* Time on connections of their own, as an application's are: not the
     * ones that ran the install and the DDL. */
    for (int k = 0; k < NCONNS; k++) {
        if (!g_conn_on[k]) {
            continue;
        }
        const char *db = dbnames[conn_portable[k]];
        if (conn_bouncer[k]) {
            const char *bk[5] = {"dbname", "host", "port", "user", NULL};
            const char *bv[5] = {db, "127.0.0.1", bouncer_port, pool_user, NULL};
            g_conn[k] = PQconnectdbParams(bk, bv, 0);
            if (PQstatus(g_conn[k]) != CONNECTION_OK) {
                die("connect through pgbouncer", PQerrorMessage(g_conn[k]));
            }
        } else {
            g_conn[k] = connect_db(conninfo, db);
            for (int t = 0; t < NTABLES; t++) {
                char upd[128];
                update_sql(upd, sizeof upd, TABLES[t]);
                prepare(g_conn[k], TABLES[t], upd, 1);
            }
        }
        fence_status st = conn_unpooled[k] ? fence_pg_prepare_unpooled(g_conn[k])
                                           : fence_pg_prepare(g_conn[k]);
        if (st != FENCE_OK) {
            die("fence_pg_prepare / fence_pg_prepare_unpooled", fence_pg_errmsg(g_conn[k]));
        }
    }
    for (int m = 0; m < NMODES; m++) {
        if (g_on[m] && modes[m].how == H_NAMED) {
            char name[32];
            stmt_name(name, sizeof name, m);
            prepare(g_conn[modes[m].conn], name, modes[m].sql, modes[m].nparams);
        }
    }

    /* Warm-up: caches, plans, PL/pgSQL functions, the pool's server
     * connections. */
    for (int m = 0; m < NMODES; m++) {
        if (g_on[m]) {
            double sec, cpu;
            run(m, 200, &sec, &cpu);
        }
    }

    /* Each cycle runs every mode for one batch: whatever the noise of the
     * shared machine, the batches of a cycle share it. */
    g_samples = 0;
    for (int r = 0; r < rounds; r++) {
        find_backends(admin, dbnames, pool_user);
        for (int b = 0; b < CYCLES; b++, g_samples++) {
            for (int k = 0; k < NMODES; k++) {
                int m = (b % 2 == 0) ? k : NMODES - 1 - k; /* ABC..CBA.. */
                if (g_on[m]) {
                    run(m, BATCH, &g_sec[m][g_samples], &g_cpu[m][g_samples]);
                }
            }
        }
    }

    /* Every mode against the plain UPDATE of its own connection. */
    for (int m = 0; m < NMODES; m++) {
        int p = g_plain_of[modes[m].conn];
        if (g_on[m] && m != p) {
            printf("pg_%s_vs_plain_ratio %.3f x\n", modes[m].name, ratio_of(m, p, 0));
            printf("pg_%s_vs_plain_cpu_ratio %.3f x\n", modes[m].name, ratio_of(m, p, 1));
        }
    }
    /* The goals' names: on a direct connection the library's best (the
     * unpooled connections: row_fenced is the C guard, as
     * row_fenced_c), each guard over the floor of its kind, and through
     * pgbouncer each over its floor. */
    print_over("pg_row_fenced_c_vs_plain_ratio", "row_fenced", "plain_unpooled");
    print_over("pg_row_fenced_vs_trigger_floor_c_ratio", "row_fenced", "trivial_trigger");
    print_over("pg_row_fenced_plpgsql_vs_trigger_floor_plpgsql_ratio", "row_fenced_plpgsql",
               "plpgsql_floor");
    print_over("pg_plain_token_vs_floor_set_ratio", "plain_token", "floor_set");
    print_over("pg_plain_token_unnamed_vs_floor_set3_ratio", "plain_token_unnamed",
               "floor_set3");
    print_over("pg_bouncer_row_fenced_vs_floor_ratio", "bouncer_row_fenced",
               "bouncer_floor_set3");
    print_over("pg_bouncer_row_fenced_plpgsql_vs_floor_ratio", "bouncer_row_fenced_plpgsql",
               "bouncer_portable_floor_set3");
    for (int m = 0; m < NMODES; m++) {
        if (g_on[m]) {
            printf("pg_%s_tps %.0f tx/s\n", modes[m].name, 1e6 / us_of(m, 0));
        }
    }
    printf("pg_bench_samples %d cycles\n", g_samples);
    if (getenv("FENCE_BENCH_VERBOSE") != NULL) {
        fprintf(stderr, "# per transaction, median wall us / server cpu us:\n");
        for (int m = 0; m < NMODES; m++) {
            if (g_on[m]) {
                fprintf(stderr, "#   %-34s %7.1f %7.1f\n", modes[m].name, us_of(m, 0),
                        us_of(m, 1));
            }
        }
    }

    sanity(conninfo, db_ext, 0);
    sanity(conninfo, db_port, 1);
    for (int k = 0; k < NCONNS; k++) {
        if (g_conn[k] != NULL) {
            PQfinish(g_conn[k]);
        }
    }
    for (int i = 0; i < 2; i++) {
        snprintf(sql, sizeof sql, "DROP DATABASE %s WITH (FORCE)", dbnames[i]);
        exec_ok(admin, sql);
    }
    PQfinish(admin);
    return 0;
}
