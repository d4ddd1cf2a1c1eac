/*
 * test_pg_pooler.c -- fencing behind a real connection pooler: PgBouncer
 * 1.18 (scripts/with-servers --pgbouncer) in front of the test PostgreSQL,
 * its pools in pool_mode transaction, statement and session (one role
 * each), default_pool_size 2, default reset settings (server_reset_query
 * DISCARD ALL, run in session mode only).  Runs once (scripts/run-suites);
 * every case runs in two databases, one per guard: the fixture's (the
 * generated PL/pgSQL guard by default, pg_impl()) and one with CREATE
 * EXTENSION fence (the C guard).  Every client goes through pgbouncer;
 * only the setup and the checks of what was written use a direct
 * connection.  It proves:
 *   a. a token never reaches another client: two clients A poison both
 *      server connections of a pool (a session-level SET fence.token = 7,
 *      the two at once, so each lands on its own server connection), then
 *      stay idle or go away; client B, on one of those two server
 *      connections (its pg_backend_pid() says so, and it sees
 *      current_setting('fence.token') = 7 there in transaction and
 *      statement mode), writes without a token: refused, 23Q02
 *      reason=unbound, the row unchanged (session mode: DISCARD ALL ran,
 *      reason=missing).  A's SELECT fence.use_token(7) in its own
 *      transaction leaves nothing: B is refused with reason=missing.  B's
 *      own fence.use_token(8) on the same poisoned connection is admitted
 *      and stamps 8.  (Fails on the guard before fence.use_token: the
 *      PL/pgSQL guard admitted B's write with A's token 7.)
 *   b. 8 threads x 150 fenced transactions over the transaction-mode pool
 *      of 2, each thread on its own client connection, through
 *      libfence_pg (fence_pg_prepare, then fence_pg_set_token in
 *      BEGIN/COMMIT or fence_pg_send_token in a pipeline, with and without
 *      a resource): no error of any kind (no 26000), every UPDATE stamped
 *      with its own transaction's token (RETURNING), both server
 *      connections used and no third, every row's stamp and every
 *      resource's mark the last token written.
 *   c. fence_pg_prepare() then fence_pg_set_token over 6 client
 *      connections sharing the 2 server connections, two transactions
 *      open at a time (so on different server connections, checked):
 *      never 26000 (fails on the named prepared statements of
 *      fence_pg_prepare() before: 26000 prepared statement
 *      "fence_pg_set_token_h" does not exist).
 *   d. statement mode refuses a transaction block (BEGIN: pgbouncer closes
 *      the client), and a token set by one statement is gone at the next
 *      (23Q02 reason=missing); what works is one message that is one
 *      transaction: a simple query "SELECT fence.use_token(42); UPDATE
 *      ...", libfence_pg's pipeline (fence_pg_send_token + the UPDATE +
 *      one PQpipelineSync), and a single UPDATE ... WHERE ... AND
 *      fence.use_token(42) IS NOT NULL: each stamps 42, refuses a stale
 *      41 (23Q01, row unchanged) and leaves no token behind.  The same
 *      forms work in transaction and session mode, and so does BEGIN;
 *      SELECT fence.use_token(42); UPDATE; COMMIT there, while a plain SET
 *      LOCAL fence.token without fence.use_token is refused (reason=unbound).
 *   e. fence_pg_prepare_unpooled() on a transaction-mode client (a wrong
 *      declaration) fails closed: on a server connection that has not its
 *      statements, fence_pg_set_token and fence_pg_send_token fail 26000
 *      and nothing is written; on the one that has them they work.
 * Alone (the C database needs the built extension offered):
 *   FENCE_PGEXT_DIR=build/lib/pgext FENCE_SUITES=test_pg_pooler \
 *     scripts/with-servers --pgbouncer -- scripts/run-suites build
 */
#include "pgutil.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* The pools and the databases                                          */
/* ------------------------------------------------------------------ */

typedef enum pool_mode { TX, STMT, SESS, N_MODES } pool_mode;

static const char *const MODE_NAME[N_MODES] = {"transaction", "statement", "session"};
static const char *const MODE_ENV[N_MODES] = {"FENCE_TEST_PGBOUNCER_TX_USER",
                                              "FENCE_TEST_PGBOUNCER_STMT_USER",
                                              "FENCE_TEST_PGBOUNCER_SESS_USER"};

static const char *pool_user(pool_mode m)
{
    return tu_env(MODE_ENV[m]);
}

/* A client of the pool of mode m for database dbname, through pgbouncer. */
static PGconn *pool_conn(const char *dbname, pool_mode m)
{
    const char *keys[] = {"host", "port", "dbname", "user", "sslmode", "gssencmode", NULL};
    const char *vals[] = {"127.0.0.1", tu_env("FENCE_TEST_PGBOUNCER_PORT"), dbname, pool_user(m),
                          "disable", "disable", NULL};
    PGconn *c = PQconnectdbParams(keys, vals, 0);
    ck_assert_msg(c != NULL && PQstatus(c) == CONNECTION_OK,
                  "cannot connect through pgbouncer (127.0.0.1:%s, %s mode, db %s): %s",
                  vals[1], MODE_NAME[m], dbname, c ? PQerrorMessage(c) : "out of memory");
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    return c;
}

/* The two databases, one per guard. */
typedef struct impl_db {
    char name[NAME_BUF];
    const char *impl;
} impl_db;
#define MAX_DBS 2
static impl_db g_dbs[MAX_DBS];
static int g_ndbs = MAX_DBS; /* 1 when the C guard is left out */

static void setup_pooler(void)
{
    setup_db();
    snprintf(g_dbs[0].name, sizeof g_dbs[0].name, "%s", g_db);
    g_dbs[0].impl = pg_impl();
    if (!pg_impl_note("test_pg_pooler", "every case runs in the fixture's database only")) {
        g_ndbs = 1;
        return;
    }
    side_db("c", NULL, g_dbs[1].name);
    PGconn *c = connect_as(g_dbs[1].name, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    fence_status st = fence_pg_install(c);
    ck_assert_msg(st == FENCE_OK, "install in %s: %s", g_dbs[1].name, fence_pg_errmsg(c));
    create_extension(c);
    PQfinish(c);
    g_dbs[1].impl = "c";
}

/* A direct (superuser) connection to d. */
static PGconn *su(const impl_db *d)
{
    PGconn *c = connect_as(d->name, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    return c;
}

/* A protected table NAME(id int primary key, v int, by bigint) with rows
 * 1..n, unstamped, writable by the three pool roles. */
static void pool_table(const impl_db *d, const char *name, int n)
{
    PGconn *c = su(d);
    char sql[1024];
    snprintf(sql, sizeof sql,
             "CREATE TABLE %s (id int PRIMARY KEY, v int, by bigint);"
             "INSERT INTO %s SELECT g, 0, 0 FROM generate_series(1, %d) g;"
             "SELECT fence.protect('%s');"
             "GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %s, %s, %s",
             name, name, n, name, name, pool_user(TX), pool_user(STMT), pool_user(SESS));
    ok(c, sql);
    PQfinish(c);
}

/* Row id of table: "v,stamp". */
static const char *row_of(const impl_db *d, const char *table, int id)
{
    static char buf[128];
    PGconn *c = su(d);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT v || ',' || fence_token FROM %s WHERE id = %d", table, id);
    snprintf(buf, sizeof buf, "%s", text1(c, sql));
    PQfinish(c);
    return buf;
}

/* Terminate the server connections of the pools of d (the ones a case
 * poisoned on purpose) and wait until they are gone: pgbouncer opens
 * fresh ones for the next client. */
static void pool_flush(const impl_db *d)
{
    PGconn *c = connect_as(NULL, NULL);
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '%s'"
             " AND usename IN ('%s', '%s', '%s')",
             d->name, pool_user(TX), pool_user(STMT), pool_user(SESS));
    (void)num(c, sql);
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_stat_activity WHERE datname = '%s'"
             " AND usename IN ('%s', '%s', '%s')",
             d->name, pool_user(TX), pool_user(STMT), pool_user(SESS));
    int64_t deadline = tu_now_ms() + 5000;
    while (num(c, sql) != 0) {
        ck_assert_msg(tu_now_ms() < deadline, "the pool's server connections to %s did not go",
                      d->name);
        tu_sleep_ms(10);
    }
    PQfinish(c);
    tu_sleep_ms(50); /* pgbouncer reads the servers' goodbye and drops them */
}

/* The number of server connections the pool of mode m has to d, those
 * with a pid other than p1 and p2 (0: none). */
static long long servers_besides(const impl_db *d, pool_mode m, int p1, int p2)
{
    PGconn *c = connect_as(NULL, NULL);
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_stat_activity WHERE datname = '%s' AND usename = '%s'"
             " AND pid NOT IN (%d, %d)",
             d->name, pool_user(m), p1, p2);
    long long n = num(c, sql);
    PQfinish(c);
    return n;
}

/* Send sql (a simple query, any number of statements) and read every
 * result: the first error, else the last result. */
static stmt_res multi_exec(PGconn *c, const char *sql)
{
    stmt_res o, cur;
    bool have_err = false;
    memset(&o, 0, sizeof o);
    ck_assert_msg(PQsendQuery(c, sql) == 1, "PQsendQuery: %s", PQerrorMessage(c));
    PGresult *r;
    while ((r = PQgetResult(c)) != NULL) {
        stmt_take(r, &cur);
        if (!have_err) {
            o = cur;
            have_err = !cur.ok;
        }
        PQclear(r);
    }
    return o;
}

/* The DETAIL of o names reason (as "reason=<reason>", a whole word). */
static void expect_reason(const stmt_res *o, const char *state, const char *reason,
                          const char *what)
{
    char d[2048], want[64];
    stmt_describe(o, d, sizeof d);
    ck_assert_msg(!o->ok && strcmp(o->state, state) == 0, "%s: %s; expected SQLSTATE %s", what,
                  d, state);
    snprintf(want, sizeof want, "reason=%s", reason);
    const char *p = strstr(o->detail, want);
    bool word = p != NULL && (p == o->detail || p[-1] == ' ') &&
                (p[strlen(want)] == '\0' || p[strlen(want)] == ' ');
    ck_assert_msg(word, "%s: %s; expected a DETAIL with %s", what, d, want);
}

/* ------------------------------------------------------------------ */
/* a. A token never reaches another client                              */
/* ------------------------------------------------------------------ */

/* Two clients A run `set_sql` at the same time, each with a sleep so that
 * each holds a server connection of its own; their pids go to pids.  On a
 * loaded machine pgbouncer may not have opened the pool's second server
 * connection before the first client's sleep ends, and both then run on one:
 * the pair is sent again with a longer sleep (both connections must be
 * poisoned for the case to test anything; set_sql is safe to repeat). */
static void poison_both(PGconn *a[2], const char *set_sql, int pids[2], const char *what)
{
    static const char *const naps[] = {"0.1", "0.4", "1.0"};
    char sql[256];
    for (size_t t = 0; t < sizeof naps / sizeof naps[0]; t++) {
        snprintf(sql, sizeof sql, "%s; SELECT pg_backend_pid(), pg_sleep(%s)", set_sql, naps[t]);
        for (int i = 0; i < 2; i++) {
            ck_assert_msg(PQsendQuery(a[i], sql) == 1, "%s: PQsendQuery: %s", what,
                          PQerrorMessage(a[i]));
        }
        for (int i = 0; i < 2; i++) {
            pids[i] = 0;
            PGresult *r;
            while ((r = PQgetResult(a[i])) != NULL) {
                ExecStatusType s = PQresultStatus(r);
                ck_assert_msg(s == PGRES_TUPLES_OK || s == PGRES_COMMAND_OK, "%s: A%d '%s': %s",
                              what, i + 1, sql, PQresultErrorMessage(r));
                if (s == PGRES_TUPLES_OK && PQnfields(r) == 2) {
                    pids[i] = atoi(PQgetvalue(r, 0, 0));
                }
                PQclear(r);
            }
            ck_assert_msg(pids[i] > 0, "%s: A%d read no pid", what, i + 1);
        }
        if (pids[0] != pids[1]) {
            return;
        }
    }
    ck_abort_msg("%s: both clients A ran on server connection %d three times (sleeps up to "
                 "1 s): the pool does not hold two at once (is default_pool_size 2?)",
                 what, pids[0]);
}

/* One case of a: mode m, database d, clients A run set_sql and then stay
 * (stay) or disconnect; B then writes without a token on one of their
 * server connections, refused with `reason`; leak_visible: B sees A's
 * fence.token = 7 there. */
static void leak_case(const impl_db *d, pool_mode m, const char *set_sql, bool stay,
                      const char *reason, bool leak_visible)
{
    char what[256], table[64], sql[512];
    static int n;
    snprintf(table, sizeof table, "leak_%d", ++n);
    snprintf(what, sizeof what, "%s, %s mode, A: '%s' and %s", d->impl, MODE_NAME[m], set_sql,
             stay ? "stays idle" : "goes away");
    pool_table(d, table, 3);

    PGconn *a[2] = {pool_conn(d->name, m), pool_conn(d->name, m)};
    int pids[2];
    poison_both(a, set_sql, pids, what);
    if (!stay) {
        PQfinish(a[0]);
        PQfinish(a[1]);
        a[0] = a[1] = NULL;
    }

    PGconn *b = pool_conn(d->name, m);
    bool block = m != STMT; /* statement mode refuses BEGIN */
    if (block) {
        ok(b, "BEGIN");
    }
    /* Where B runs, and what the server connection carries. */
    stmt_res seen = stmt_exec(
        b, "SELECT pg_backend_pid() || ',' || COALESCE(current_setting('fence.token', true), '')");
    expect_stmt_ok(&seen, NULL, what);
    int bpid = atoi(seen.rows + strlen("SELECT 1 ["));
    ck_assert_msg(bpid == pids[0] || bpid == pids[1],
                  "%s: B runs on server connection %d, not one of A's (%d, %d)", what, bpid,
                  pids[0], pids[1]);
    const char *val = strchr(seen.rows, ',') + 1;
    if (leak_visible) {
        ck_assert_msg(strcmp(val, "7]") == 0,
                      "%s: B's server connection carries fence.token '%s', not A's 7: the case "
                      "does not test a leak",
                      what, seen.rows);
    } else {
        ck_assert_msg(strcmp(val, "7]") != 0, "%s: B's server connection carries A's token: %s",
                      what, seen.rows);
    }
    snprintf(sql, sizeof sql, "UPDATE %s SET v = v + 1 WHERE id = 1", table);
    stmt_res w = stmt_exec(b, sql);
    expect_reason(&w, "23Q02", reason, what);
    if (block) {
        ok(b, "ROLLBACK");
    }
    ck_assert_str_eq(row_of(d, table, 1), "0,0");

    /* Every server connection of the pool is one A poisoned. */
    ck_assert_msg(servers_besides(d, m, pids[0], pids[1]) == 0,
                  "%s: the pool has a server connection A did not use", what);

    /* B's own token, on the same connections, is admitted. */
    snprintf(sql, sizeof sql, "SELECT fence.use_token(8); UPDATE %s SET v = v + 1 WHERE id = 2",
             table);
    w = multi_exec(b, sql);
    expect_stmt_ok(&w, NULL, what);
    ck_assert_str_eq(row_of(d, table, 2), "1,8");

    PQfinish(b);
    if (stay) {
        PQfinish(a[0]);
        PQfinish(a[1]);
    }
    pool_flush(d);
}

START_TEST(token_never_reaches_another_client)
{
    for (int i = 0; i < g_ndbs; i++) {
        const impl_db *d = &g_dbs[i];
        /* A session-level SET survives on the server connection in
         * transaction and statement mode: refused as unbound. */
        leak_case(d, TX, "SET fence.token = 7", true, "unbound", true);
        leak_case(d, TX, "SET fence.token = 7", false, "unbound", true);
        leak_case(d, STMT, "SET fence.token = 7", true, "unbound", true);
        leak_case(d, STMT, "SET fence.token = 7", false, "unbound", true);
        leak_case(d, TX, "SELECT set_config('fence.token', '7', false)", false, "unbound", true);
        /* Session mode: the server connection is B's only after A goes,
         * and DISCARD ALL cleared it. */
        leak_case(d, SESS, "SET fence.token = 7", false, "missing", false);
        /* fence.use_token() holds for A's own transaction only. */
        leak_case(d, TX, "SELECT fence.use_token(7)", true, "missing", false);
        leak_case(d, STMT, "SELECT fence.use_token(7)", true, "missing", false);
        leak_case(d, SESS, "SELECT fence.use_token(7)", false, "missing", false);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* b. 8 threads x 150 fenced transactions over a pool of 2              */
/* ------------------------------------------------------------------ */

#define N_THREADS 8
#define N_TX 150

typedef struct worker {
    PGconn *c;
    int id;              /* its row, 1..N_THREADS */
    const char *table;
    char resource[64];   /* advanced too when the way says so */
    int way;             /* 0 set_token, 1 send_token, 2 set + resource, 3 send + resource */
    int errors;          /* of any kind */
    int e26000;
    int wrong_stamp;     /* RETURNING showed another token */
    char first_error[512];
    int pids[8];
    int npids;
} worker;

static uint64_t token_of(int id, int k)
{
    return (uint64_t)id * 1000u + (uint64_t)k;
}

static void w_error(worker *w, const char *what, const char *state, const char *msg)
{
    w->errors++;
    if (state != NULL && strcmp(state, "26000") == 0) {
        w->e26000++;
    }
    if (w->first_error[0] == '\0') {
        snprintf(w->first_error, sizeof w->first_error, "%s: %s %s", what,
                 state != NULL ? state : "", msg);
    }
}

static void w_pid(worker *w, int pid)
{
    for (int i = 0; i < w->npids; i++) {
        if (w->pids[i] == pid) {
            return;
        }
    }
    if (w->npids < 8) {
        w->pids[w->npids++] = pid;
    }
}

/* The UPDATE's RETURNING row: stamp and backend. */
static void w_returned(worker *w, PGresult *r, uint64_t tok)
{
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        w_error(w, "UPDATE", PQresultErrorField(r, PG_DIAG_SQLSTATE), PQresultErrorMessage(r));
        return;
    }
    if (strtoull(PQgetvalue(r, 0, 0), NULL, 10) != tok) {
        w->wrong_stamp++;
    }
    w_pid(w, atoi(PQgetvalue(r, 0, 1)));
}

static bool w_exec(worker *w, const char *sql)
{
    PGresult *r = PQexec(w->c, sql);
    bool good = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!good) {
        w_error(w, sql, PQresultErrorField(r, PG_DIAG_SQLSTATE), PQresultErrorMessage(r));
    }
    PQclear(r);
    return good;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    char upd[256];
    snprintf(upd, sizeof upd,
             "UPDATE %s SET v = v + 1 WHERE id = %d RETURNING fence_token, pg_backend_pid()",
             w->table, w->id);
    const char *res = w->way >= 2 ? w->resource : NULL;
    if (fence_pg_prepare(w->c) != FENCE_OK) {
        w_error(w, "fence_pg_prepare", fence_pg_sqlstate(w->c), fence_pg_errmsg(w->c));
    }
    for (int k = 1; k <= N_TX; k++) {
        uint64_t tok = token_of(w->id, k);
        if (w->way % 2 == 0) {
            if (!w_exec(w, "BEGIN")) {
                continue;
            }
            fence_status st = fence_pg_set_token(w->c, tok, NULL, res, NULL);
            if (st != FENCE_OK) {
                w_error(w, "fence_pg_set_token", fence_pg_sqlstate(w->c), fence_pg_errmsg(w->c));
                w_exec(w, "ROLLBACK");
                continue;
            }
            PGresult *r = PQexec(w->c, upd);
            w_returned(w, r, tok);
            PQclear(r);
            w_exec(w, "COMMIT");
        } else {
            /* One pipeline up to one sync: one implicit transaction. */
            if (PQenterPipelineMode(w->c) != 1 ||
                fence_pg_send_token(w->c, tok, NULL, res) != FENCE_OK ||
                PQsendQueryParams(w->c, upd, 0, NULL, NULL, NULL, NULL, 0) != 1 ||
                PQpipelineSync(w->c) != 1) {
                w_error(w, "pipeline", fence_pg_sqlstate(w->c), PQerrorMessage(w->c));
                return NULL;
            }
            /* The token's result, NULL, the UPDATE's (PIPELINE_ABORTED
             * when the token failed), NULL, the sync. */
            PGresult *r = PQgetResult(w->c);
            if (fence_pg_classify(w->c, r, NULL) != FENCE_OK) {
                w_error(w, "fence_pg_send_token's result", fence_pg_sqlstate(w->c),
                        fence_pg_errmsg(w->c));
            }
            PQclear(r);
            PQclear(PQgetResult(w->c));
            r = PQgetResult(w->c);
            if (PQresultStatus(r) != PGRES_PIPELINE_ABORTED) {
                w_returned(w, r, tok);
            }
            PQclear(r);
            PQclear(PQgetResult(w->c));
            r = PQgetResult(w->c);
            if (PQresultStatus(r) != PGRES_PIPELINE_SYNC) {
                w_error(w, "pipeline sync", NULL, PQresStatus(PQresultStatus(r)));
                PQclear(r);
                return NULL;
            }
            PQclear(r);
            if (PQexitPipelineMode(w->c) != 1) {
                w_error(w, "PQexitPipelineMode", NULL, PQerrorMessage(w->c));
                return NULL;
            }
        }
    }
    return NULL;
}

START_TEST(many_threads_over_two_server_connections)
{
    for (int i = 0; i < g_ndbs; i++) {
        const impl_db *d = &g_dbs[i];
        const char *table = "many";
        pool_table(d, table, N_THREADS);
        pool_flush(d); /* new server connections: no statement of earlier cases */
        worker ws[N_THREADS];
        pthread_t th[N_THREADS];
        memset(ws, 0, sizeof ws);
        for (int t = 0; t < N_THREADS; t++) {
            ws[t].c = pool_conn(d->name, TX);
            ws[t].id = t + 1;
            ws[t].table = table;
            ws[t].way = t % 4;
            snprintf(ws[t].resource, sizeof ws[t].resource, "pooler/%d", t + 1);
        }
        int64_t start = tu_now_ms();
        for (int t = 0; t < N_THREADS; t++) {
            ck_assert_int_eq(pthread_create(&th[t], NULL, worker_main, &ws[t]), 0);
        }
        for (int t = 0; t < N_THREADS; t++) {
            ck_assert_int_eq(pthread_join(th[t], NULL), 0);
        }
        int64_t ms = tu_now_ms() - start;
        int errors = 0, e26000 = 0, wrong = 0, pids[16], npids = 0;
        const char *first = "";
        for (int t = 0; t < N_THREADS; t++) {
            errors += ws[t].errors;
            e26000 += ws[t].e26000;
            wrong += ws[t].wrong_stamp;
            if (first[0] == '\0') {
                first = ws[t].first_error;
            }
            for (int p = 0; p < ws[t].npids; p++) {
                bool have = false;
                for (int q = 0; q < npids; q++) {
                    have = have || pids[q] == ws[t].pids[p];
                }
                if (!have && npids < 16) {
                    pids[npids++] = ws[t].pids[p];
                }
            }
        }
        fprintf(stderr, "# %s: %d x %d transactions through pgbouncer in %" PRId64 " ms\n",
                d->impl, N_THREADS, N_TX, ms);
        ck_assert_msg(errors == 0, "%s: %d errors (%d of them 26000); the first: %s", d->impl,
                      errors, e26000, first);
        ck_assert_int_eq(e26000, 0);
        ck_assert_msg(wrong == 0, "%s: %d UPDATEs stamped with another token", d->impl, wrong);
        ck_assert_msg(npids == 2, "%s: the transactions ran on %d server connections, not 2",
                      d->impl, npids);
        PGconn *c = su(d);
        for (int t = 0; t < N_THREADS; t++) {
            char want[64], sql[128];
            uint64_t last = token_of(t + 1, N_TX);
            snprintf(want, sizeof want, "%d,%" PRIu64, N_TX, last);
            ck_assert_str_eq(row_of(d, table, t + 1), want);
            if (ws[t].way >= 2) {
                snprintf(sql, sizeof sql, "SELECT fence.mark('%s')", ws[t].resource);
                ck_assert_int_eq(num(c, sql), (long long)last);
            }
            PQfinish(ws[t].c);
        }
        PQfinish(c);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* c. fence_pg_prepare() under transaction pooling                      */
/* ------------------------------------------------------------------ */

#define N_CLIENTS 6
#define N_ROUNDS 40

/* The two clients of round r (distinct; every pair comes round). */
static int pair_of(int r, int j)
{
    int a = r % N_CLIENTS, b = (r + 1 + r / N_CLIENTS) % N_CLIENTS;
    if (b == a) {
        b = (a + 1) % N_CLIENTS;
    }
    return j == 0 ? a : b;
}

START_TEST(prepare_then_set_token_never_26000)
{
    for (int i = 0; i < g_ndbs; i++) {
        const impl_db *d = &g_dbs[i];
        pool_table(d, "prep", N_CLIENTS);
        pool_flush(d); /* new server connections: no statement of earlier cases */
        PGconn *cl[N_CLIENTS];
        uint64_t last[N_CLIENTS] = {0}, last_res[N_CLIENTS] = {0};
        for (int k = 0; k < N_CLIENTS; k++) {
            cl[k] = pool_conn(d->name, TX);
            ck_assert_msg(fence_pg_prepare(cl[k]) == FENCE_OK, "%s: fence_pg_prepare: %s",
                          d->impl, fence_pg_errmsg(cl[k]));
        }
        uint64_t tok = 100;
        int pid_seen[2] = {0, 0};
        for (int r = 0; r < N_ROUNDS; r++) {
            /* Two transactions open at once: two server connections. */
            int pair[2] = {pair_of(r, 0), pair_of(r, 1)};
            int pids[2];
            for (int j = 0; j < 2; j++) {
                PGconn *c = cl[pair[j]];
                ok(c, "BEGIN");
                pids[j] = (int)num(c, "SELECT pg_backend_pid()");
                outcome e;
                /* Odd rounds advance the client's own resource too (one
                 * shared by both would make the second wait for the
                 * first's COMMIT, which waits for the second). */
                char res[32];
                snprintf(res, sizeof res, "pooler/prep/%d", pair[j]);
                fence_status st = set_tok(c, ++tok, r % 2 == 0 ? NULL : res, &e);
                ck_assert_msg(strcmp(e.sqlstate, "26000") != 0,
                              "%s: round %d client %d: 26000 %s", d->impl, r, pair[j], e.message);
                ck_assert_msg(st == FENCE_OK, "%s: round %d client %d: %s %s (%s)", d->impl, r,
                              pair[j], fence_status_name(st), e.message, e.sqlstate);
                char sql[128];
                snprintf(sql, sizeof sql, "UPDATE prep SET v = v + 1 WHERE id = %d",
                         pair[j] + 1);
                ok(c, sql);
                last[pair[j]] = tok;
                if (r % 2 != 0) {
                    last_res[pair[j]] = tok;
                }
            }
            ck_assert_msg(pids[0] != pids[1], "%s: two open transactions on one server "
                          "connection (%d)", d->impl, pids[0]);
            for (int j = 0; j < 2; j++) {
                ok(cl[pair[j]], "COMMIT");
                if (pid_seen[0] == 0 || pid_seen[0] == pids[j]) {
                    pid_seen[0] = pids[j];
                } else if (pid_seen[1] == 0 || pid_seen[1] == pids[j]) {
                    pid_seen[1] = pids[j];
                } else {
                    ck_abort_msg("%s: a third server connection %d", d->impl, pids[j]);
                }
            }
            if (r % 7 == 3) { /* prepare again mid-way: idle, idempotent */
                ck_assert_int_eq(fence_pg_prepare(cl[pair[0]]), FENCE_OK);
            }
        }
        for (int k = 0; k < N_CLIENTS; k++) {
            char want[64];
            int writes = 0;
            for (int r = 0; r < N_ROUNDS; r++) {
                writes += (pair_of(r, 0) == k) + (pair_of(r, 1) == k);
            }
            snprintf(want, sizeof want, "%d,%" PRIu64, writes, last[k]);
            ck_assert_str_eq(row_of(d, "prep", k + 1), want);
            PQfinish(cl[k]);
            PGconn *c = su(d);
            char sql[128];
            snprintf(sql, sizeof sql, "SELECT COALESCE(fence.mark('pooler/prep/%d'), 0)", k);
            ck_assert_int_eq(num(c, sql), (long long)last_res[k]);
            ck_assert_uint_ne(last_res[k], 0);
            PQfinish(c);
        }
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* d. The one-message forms (statement mode)                            */
/* ------------------------------------------------------------------ */

/* The three forms, each one message that is one transaction, run with
 * token tok against row id of table. */
typedef enum form { SIMPLE, PIPELINE, WHERE, N_FORMS } form;
static const char *const FORM_NAME[N_FORMS] = {
    "simple query 'SELECT fence.use_token(N); UPDATE ...'",
    "pipeline: fence_pg_send_token + UPDATE + one sync",
    "UPDATE ... WHERE ... AND fence.use_token(N) IS NOT NULL"};

static stmt_res run_form(PGconn *c, form f, const char *table, int id, uint64_t tok)
{
    char sql[512];
    stmt_res o;
    switch (f) {
    case SIMPLE:
        snprintf(sql, sizeof sql,
                 "SELECT fence.use_token(%" PRIu64 "); UPDATE %s SET v = v + 1 WHERE id = %d",
                 tok, table, id);
        return multi_exec(c, sql);
    case WHERE:
        snprintf(sql, sizeof sql,
                 "UPDATE %s SET v = v + 1 WHERE id = %d AND fence.use_token(%" PRIu64
                 ") IS NOT NULL",
                 table, id, tok);
        return stmt_exec(c, sql);
    case PIPELINE:
    default: {
        snprintf(sql, sizeof sql, "UPDATE %s SET v = v + 1 WHERE id = %d", table, id);
        outcome e;
        fence_status st = pipelined_h(c, tok, NULL, NULL, sql, &e);
        memset(&o, 0, sizeof o);
        o.ok = st == FENCE_OK;
        snprintf(o.state, sizeof o.state, "%s", e.sqlstate);
        snprintf(o.msg, sizeof o.msg, "%.500s", e.message);
        snprintf(o.rows, sizeof o.rows, "%s", fence_status_name(st));
        return o;
    }
    }
}

static void forms_in(const impl_db *d, pool_mode m)
{
    char table[64], what[256], sql[256];
    snprintf(table, sizeof table, "forms_%s", MODE_NAME[m]);
    pool_table(d, table, N_FORMS);
    PGconn *c = pool_conn(d->name, m);
    for (int f = 0; f < N_FORMS; f++) {
        int id = f + 1;
        char want[32];
        snprintf(what, sizeof what, "%s, %s mode, %s", d->impl, MODE_NAME[m], FORM_NAME[f]);
        stmt_res o = run_form(c, (form)f, table, id, 42);
        expect_stmt_ok(&o, NULL, what);
        ck_assert_msg(strcmp(row_of(d, table, id), "1,42") == 0, "%s: row %s, expected 1,42",
                      what, row_of(d, table, id));
        /* Stale: refused, nothing written. */
        o = run_form(c, (form)f, table, id, 41);
        if (f == PIPELINE) {
            ck_assert_msg(!o.ok && strcmp(o.state, "23Q01") == 0, "%s, stale: %s %s (%s)", what,
                          o.rows, o.msg, o.state);
        } else {
            expect_reason(&o, "23Q01", "older", what);
        }
        snprintf(want, sizeof want, "1,42");
        ck_assert_str_eq(row_of(d, table, id), want);
        /* Nothing is left for the next statement: refused as missing. */
        snprintf(sql, sizeof sql, "UPDATE %s SET v = v + 1 WHERE id = %d", table, id);
        o = stmt_exec(c, sql);
        expect_reason(&o, "23Q02", "missing", what);
        ck_assert_str_eq(row_of(d, table, id), "1,42");
    }
    PQfinish(c);
}

START_TEST(statement_mode_one_message_forms)
{
    for (int i = 0; i < g_ndbs; i++) {
        const impl_db *d = &g_dbs[i];
        char what[128];
        snprintf(what, sizeof what, "%s, statement mode", d->impl);
        pool_table(d, "stmt_t", 1);
        pool_flush(d);

        /* A transaction block is refused: pgbouncer closes the client. */
        PGconn *c = pool_conn(d->name, STMT);
        stmt_res o = stmt_exec(c, "BEGIN");
        ck_assert_msg(!o.ok, "%s: BEGIN was accepted", what);
        /* pgbouncer's FATAL, then the closed socket: libpq keeps both. */
        ck_assert_msg(strstr(PQerrorMessage(c), "transaction blocks not allowed in statement "
                                                "pooling mode") != NULL,
                      "%s: BEGIN: %s", what, PQerrorMessage(c));
        ck_assert_msg(PQstatus(c) == CONNECTION_BAD, "%s: the client is still connected", what);
        PQfinish(c);

        /* A token set by one statement is gone at the next. */
        c = pool_conn(d->name, STMT);
        o = stmt_exec(c, "SELECT fence.use_token(42)");
        expect_stmt_ok(&o, "SELECT 1 [42]", what);
        o = stmt_exec(c, "UPDATE stmt_t SET v = v + 1 WHERE id = 1");
        expect_reason(&o, "23Q02", "missing", what);
        ck_assert_str_eq(row_of(d, "stmt_t", 1), "0,0");
        PQfinish(c);

        for (int m = 0; m < N_MODES; m++) {
            forms_in(d, (pool_mode)m);
        }
    }
}
END_TEST

/* In transaction and session mode: a transaction block with
 * fence.use_token works; SET LOCAL fence.token alone does not. */
START_TEST(transaction_block_with_use_token)
{
    for (int i = 0; i < g_ndbs; i++) {
        const impl_db *d = &g_dbs[i];
        pool_mode modes[2] = {TX, SESS};
        pool_flush(d);
        for (int j = 0; j < 2; j++) {
            pool_mode m = modes[j];
            char table[64], what[128], sql[256];
            snprintf(table, sizeof table, "block_%s", MODE_NAME[m]);
            snprintf(what, sizeof what, "%s, %s mode", d->impl, MODE_NAME[m]);
            pool_table(d, table, 2);
            PGconn *c = pool_conn(d->name, m);
            ok(c, "BEGIN");
            ok(c, "SELECT fence.use_token(42)");
            snprintf(sql, sizeof sql, "UPDATE %s SET v = v + 1 WHERE id = 1", table);
            ok(c, sql);
            ok(c, "COMMIT");
            ck_assert_str_eq(row_of(d, table, 1), "1,42");

            ok(c, "BEGIN");
            ok(c, "SET LOCAL fence.token = 43");
            snprintf(sql, sizeof sql, "UPDATE %s SET v = v + 1 WHERE id = 2", table);
            stmt_res o = stmt_exec(c, sql);
            expect_reason(&o, "23Q02", "unbound", what);
            ok(c, "ROLLBACK");
            ck_assert_str_eq(row_of(d, table, 2), "0,0");
            PQfinish(c);
        }
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* e. fence_pg_prepare_unpooled() behind a transaction pooler           */
/* ------------------------------------------------------------------ */

/* A connection wrongly declared unpooled behind the transaction pool
 * fails closed: A prepares its statements while B's open transaction
 * holds the other server connection (so they land on the first); C then
 * holds the first while B commits, so A's next transactions run on the
 * second, which has no such statement: fence_pg_set_token and
 * fence_pg_send_token fail 26000 and nothing is written.  On the first
 * server connection (C gone, B holding the second again) they work. */
START_TEST(unpooled_declared_in_transaction_mode_fails_closed)
{
    for (int i = 0; i < g_ndbs; i++) {
        const impl_db *d = &g_dbs[i];
        pool_table(d, "unp", 1);
        pool_flush(d);
        PGconn *a = pool_conn(d->name, TX), *b = pool_conn(d->name, TX),
               *c = pool_conn(d->name, TX);
        outcome e;
        ok(b, "BEGIN");
        int pid_b = (int)num(b, "SELECT pg_backend_pid()");
        ck_assert_msg(fence_pg_prepare_unpooled(a) == FENCE_OK, "%s: %s", d->impl,
                      fence_pg_errmsg(a));
        ok(c, "BEGIN");
        int pid_c = (int)num(c, "SELECT pg_backend_pid()");
        ck_assert_int_ne(pid_b, pid_c);
        ok(b, "COMMIT");
        /* A on B's server connection: no statement there. */
        ok(a, "BEGIN");
        ck_assert_int_eq((int)num(a, "SELECT pg_backend_pid()"), pid_b);
        ck_assert_int_eq(set_tok(a, 7, NULL, &e), FENCE_EDB);
        ck_assert_str_eq(e.sqlstate, "26000");
        ok(a, "ROLLBACK");
        ck_assert_int_eq(pipelined_h(a, 7, NULL, NULL, "UPDATE unp SET v = v + 1 WHERE id = 1", &e),
                         FENCE_EDB);
        ck_assert_str_eq(row_of(d, "unp", 1), "0,0");
        /* A on C's (where it prepared them), B holding the other: they
         * work. */
        ok(b, "BEGIN");
        ck_assert_int_eq((int)num(b, "SELECT pg_backend_pid()"), pid_b);
        ok(c, "COMMIT");
        ck_assert_int_eq(pipelined_h(a, 8, NULL, NULL, "UPDATE unp SET v = v + 1 WHERE id = 1", &e),
                         FENCE_OK);
        ok(b, "COMMIT");
        ck_assert_str_eq(row_of(d, "unp", 1), "1,8");
        PQfinish(a);
        PQfinish(b);
        PQfinish(c);
    }
}
END_TEST

static Suite *pg_pooler_suite(void)
{
    Suite *s = suite_create("pg_pooler");
    TCase *t = tcase_create("pg_pooler");
    tcase_add_unchecked_fixture(t, setup_pooler, teardown_db);
    tcase_set_timeout(t, 60);
    tcase_add_test(t, token_never_reaches_another_client);
    tcase_add_test(t, many_threads_over_two_server_connections);
    tcase_add_test(t, prepare_then_set_token_never_26000);
    tcase_add_test(t, statement_mode_one_message_forms);
    tcase_add_test(t, transaction_block_with_use_token);
    tcase_add_test(t, unpooled_declared_in_transaction_mode_fails_closed);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(pg_pooler_suite());
}
