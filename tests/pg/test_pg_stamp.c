/*
 * test_pg_stamp.c -- version 1.2 of the extension: an UPDATE of a table
 * guarded by fence.c_guard() carries the guard's rule in its plan
 * (fence.c_stamp(), lib/pgext/stamp.c) and skips the trigger
 * (lib/pgext/plan.c), against a real PostgreSQL.  Runs once (the fixture's
 * database gets CREATE EXTENSION fence here).  It proves:
 *   - once the module is loaded in a backend, the plan of such an UPDATE
 *     assigns the token column fence.c_stamp(col, <the statement's value>,
 *     table, column, mode, tgenabled), and c_stamp runs once per row while
 *     c_guard does not run at all; fence.plan_stamp = off brings the
 *     trigger back;
 *   - the two ways give the same outcome for every rule of the guard: the
 *     SQLSTATE, message, DETAIL and HINT of an error, the rows RETURNING
 *     shows and the rows left in the table (hot path, restamp, stale,
 *     missing, malformed and session-level tokens, a session-level holder,
 *     permissive mode and NULL stamps, UPDATEs that write the column);
 *   - the trigger stays wherever the plan cannot stand for it (another
 *     BEFORE UPDATE row trigger, inheritance children, stored generated
 *     columns, joins, a role without EXECUTE on c_stamp, extension version
 *     1.1) and nothing is enforced where the guard is disabled;
 *   - cached plans follow the table's triggers, and a statement planned
 *     before the module was loaded still enforces the rule;
 *   - READ COMMITTED re-checks a concurrently updated row (the waiting
 *     writer is judged against what the other one committed, or rolled
 *     back to); REPEATABLE READ fails with 40001;
 *   - session_replication_role: the stamp does what the trigger would (not
 *     fire, fire ALWAYS, fire on REPLICA only);
 *   - c_stamp called directly is a computation that raises the guard's
 *     errors, and a statement that calls it itself cannot weaken the check.
 * The ways compared, each on a connection of its own:
 *   stamp    the module loaded before planning (SELECT fence.c_version()),
 *            fence.plan_stamp on (the default): the plan carries c_stamp;
 *   trigger  the module loaded, SET fence.plan_stamp = off;
 *   fresh    a new connection whose statement is planned before anything
 *            loads the module: the trigger.
 * Which way a statement took is read from EXPLAIN (VERBOSE) and from the
 * calls of fence.c_stamp / fence.c_guard that pg_stat_xact_user_functions
 * counts inside one transaction (track_functions = 'all').
 * The last tests hold what the first version of 1.2 got wrong and the
 * one difference docs/postgres-extension.md documents: the stamp computed
 * in column order, before the statement's later assignments (now after
 * all of them, as the trigger); a writer without USAGE on schema fence
 * (42501 at planning); a cached plan run after SET ROLE by a role without
 * EXECUTE on c_stamp (the stamp now only goes into plans while PUBLIC may
 * EXECUTE it); and a stale writer judged on the row version its scan
 * read, at once, where the trigger locked the row first and judged its
 * newest version (each way against its own expectation; the stamp is
 * never the more permissive one).
 * A statement shown blocked is still busy after BLOCK_MS and its backend
 * waits on a heavyweight lock (pg_stat_activity.wait_event_type = 'Lock').
 */
#include "pgutil.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long a blocked statement must stay blocked; how long a released one
 * may take to answer. */
#define BLOCK_MS 300
#define ANSWER_MS 5000

#define STAMP_FN "fence.c_stamp(bigint, bigint, oid, smallint, boolean, \"char\")"
#define HOLDER "0123456789abcdef0123456789abcdef"

/* Calls in this transaction: c_stamp * 1000 + c_guard. */
static const char CALLS[] =
    "SELECT coalesce(sum(calls) FILTER (WHERE funcname = 'c_stamp'), 0) * 1000"
    " + coalesce(sum(calls) FILTER (WHERE funcname = 'c_guard'), 0)"
    " FROM pg_stat_xact_user_functions WHERE schemaname = 'fence'";

typedef enum way { STAMP, TRIGGER, FRESH } way;
static const char *const WAY[] = {"stamp", "trigger", "fresh"};

/* fence.token for the open transaction (NULL: none). */
static void set_raw(PGconn *c, const char *raw)
{
    if (raw == NULL) {
        return;
    }
    char sql[256];
    char *lit = PQescapeLiteral(c, raw, strlen(raw));
    ck_assert_ptr_nonnull(lit);
    snprintf(sql, sizeof sql, "SELECT pg_catalog.set_config('fence.token', %s, true)", lit);
    PQfreemem(lit);
    ok(c, sql);
}

/* One transaction with token raw (NULL: none) running sql: committed when
 * sql succeeds, rolled back otherwise. */
static stmt_res write_as(PGconn *c, const char *raw, const char *sql)
{
    ok(c, "BEGIN");
    set_raw(c, raw);
    stmt_res o = stmt_exec(c, sql);
    ok(c, o.ok ? "COMMIT" : "ROLLBACK");
    return o;
}

/* The calls of c_stamp (* 1000) and c_guard that sql made, run in a
 * transaction with token raw that it commits (sql must succeed). */
static long long calls_in(PGconn *c, const char *raw, const char *sql)
{
    ok(c, "BEGIN");
    set_raw(c, raw);
    long long base = num(c, CALLS);
    ok(c, sql);
    long long n = num(c, CALLS) - base;
    ok(c, "COMMIT");
    return n;
}

/* A superuser connection to dbname (NULL: the fixture's) for way w,
 * counting the calls of C functions. */
static PGconn *connect_way(const char *dbname, way w)
{
    PGconn *c = connect_as(dbname != NULL ? dbname : g_db, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    ok(c, "SET track_functions = 'all'");
    if (w != FRESH) {
        ck_assert_int_eq(num(c, "SELECT fence.c_version()"), 1);
    }
    if (w == TRIGGER) {
        ok(c, "SET fence.plan_stamp = off");
    }
    return c;
}

/* The fixture's database as the superuser, with the extension. */
static PGconn *admin(void)
{
    PGconn *c = db();
    ok(c, "CREATE EXTENSION IF NOT EXISTS fence");
    return c;
}

/* EXPLAIN (VERBOSE, COSTS OFF) sql (static buffer). */
static const char *plan_of(PGconn *c, const char *sql)
{
    static char buf[4096];
    char q[2048];
    snprintf(q, sizeof q, "EXPLAIN (VERBOSE, COSTS OFF) %s", sql);
    PGresult *r = PQexec(c, q);
    ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", q, PQresultErrorMessage(r));
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < PQntuples(r) && len < sizeof buf; i++) {
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s\n", PQgetvalue(r, i, 0));
    }
    PQclear(r);
    return buf;
}

static bool stamped_plan(PGconn *c, const char *sql)
{
    return strstr(plan_of(c, sql), "fence.c_stamp(") != NULL;
}

static void expect_plan(PGconn *c, const char *sql, bool stamped, const char *what)
{
    const char *p = plan_of(c, sql);
    ck_assert_msg((strstr(p, "fence.c_stamp(") != NULL) == stamped,
                  "%s: the plan of '%s' %s fence.c_stamp:\n%s", what, sql,
                  stamped ? "lacks" : "has", p);
}

/* A table NAME(id int primary key, v int, by bigint) with rows 1..3
 * stamped 0, protected by the C guard on column by. */
static void table3(PGconn *c, const char *name, bool permissive)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "CREATE TABLE %s (id int PRIMARY KEY, v int, by bigint);"
             "INSERT INTO %s SELECT g, 0, 0 FROM generate_series(1, 3) g;"
             "SELECT fence.protect('%s', 'by', %s, 'c')",
             name, name, name, permissive ? "true" : "false");
    ok(c, sql);
}

/* Run sql with no trigger firing (superuser). */
static void force(PGconn *adm, const char *sql)
{
    ok(adm, "SET session_replication_role = replica");
    ok(adm, sql);
    ok(adm, "RESET session_replication_role");
}

/* The rows of tbl as "id:v:by ..." (into out). */
static void rows_of(PGconn *c, const char *tbl, char *out, size_t n)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT coalesce(string_agg(format('%%s:%%s:%%s', id, coalesce(v::text, 'null'),"
             " coalesce(by::text, 'null')), ' ' ORDER BY id), '') FROM %s",
             tbl);
    snprintf(out, n, "%s", text1(c, sql));
}

static void expect_rows(PGconn *c, const char *tbl, const char *want)
{
    char got[512];
    rows_of(c, tbl, got, sizeof got);
    ck_assert_msg(strcmp(got, want) == 0, "%s holds '%s', expected '%s'", tbl, got, want);
}

static long long oid_of(PGconn *c, const char *tbl)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT '%s'::regclass::oid", tbl);
    return num(c, sql);
}

/* ------------------------------------------------------------------ */
/* One statement run each way, compared                                 */
/* ------------------------------------------------------------------ */

/* Where cases run: SQL restoring the tables (run by the superuser before
 * each way) and a query of their content (one text value). */
typedef struct scene {
    const char *reset;
    const char *state;
} scene;

typedef struct scase {
    const char *name;
    const char *pre;    /* on the connection, before the transaction (NULL) */
    const char *raw;    /* fence.token for the transaction (NULL: none) */
    const char *sql;    /* the statement */
    const char *state;  /* expected: "" success, or the SQLSTATE */
    const char *msg;    /* the exact message (NULL: not checked) */
    const char *detail; /* the exact DETAIL (NULL: not checked) */
    const char *rows;   /* on success, exactly (NULL: not checked) */
    const char *after;  /* the tables afterwards (NULL: unchanged) */
} scase;

typedef struct took {
    stmt_res r;
    bool stamped; /* the statement's plan has fence.c_stamp */
    char before[512];
    char after[512];
} took;

/* The connections of the stamp and trigger ways, kept from case to case
 * (DISCARD ALL between two) until close_ways(); the fresh way's is new
 * for each case. */
static PGconn *g_kept[2];

static PGconn *way_conn(way w)
{
    if (w == FRESH) {
        return connect_way(NULL, FRESH);
    }
    if (g_kept[w] == NULL) {
        g_kept[w] = connect_way(NULL, w);
        return g_kept[w];
    }
    if (PQtransactionStatus(g_kept[w]) != PQTRANS_IDLE) { /* a failed test left it */
        PQclear(PQexec(g_kept[w], "ROLLBACK"));
    }
    ok(g_kept[w], "DISCARD ALL");
    ok(g_kept[w], "SET track_functions = 'all'");
    if (w == TRIGGER) {
        ok(g_kept[w], "SET fence.plan_stamp = off");
    }
    return g_kept[w];
}

static void close_ways(void)
{
    for (int w = STAMP; w <= TRIGGER; w++) {
        PQfinish(g_kept[w]);
        g_kept[w] = NULL;
    }
}

static void run_case(PGconn *adm, const scene *sc, const scase *k, way w, took *o)
{
    ok(adm, sc->reset);
    snprintf(o->before, sizeof o->before, "%s", text1(adm, sc->state));
    PGconn *c = way_conn(w);
    if (k->pre != NULL) {
        ok(c, k->pre);
    }
    o->stamped = stamped_plan(c, k->sql);
    o->r = write_as(c, k->raw, k->sql);
    snprintf(o->after, sizeof o->after, "%s", text1(adm, sc->state));
    if (w == FRESH) {
        PQfinish(c);
    }
}

static void expect_case(const scase *k, const took *o, way w)
{
    char what[256];
    snprintf(what, sizeof what, "%s (%s way)", k->name, WAY[w]);
    if (k->state[0] == '\0') {
        expect_stmt_ok(&o->r, k->rows, what);
    } else {
        expect_stmt_err(&o->r, k->state, k->msg, k->detail, what);
    }
    const char *after = k->after != NULL ? k->after : o->before;
    ck_assert_msg(strcmp(o->after, after) == 0, "%s: the tables hold '%s', expected '%s'", what,
                  o->after, after);
}

/* A difference between two ways where none is expected: fail. */
static void disagreement(const char *text)
{
    ck_assert_msg(0, "%s", text);
}

static void expect_same(const scase *k, const took *a, way wa, const took *b, way wb)
{
    char da[2048];
    char db_[2048];
    char text[6144];
    stmt_describe(&a->r, da, sizeof da);
    stmt_describe(&b->r, db_, sizeof db_);
    if (stmt_eq(&a->r, &b->r) && strcmp(a->after, b->after) == 0) {
        return;
    }
    snprintf(text, sizeof text,
             "%s: the %s way and the %s way disagree:\n  %s: %s; tables '%s'\n  %s: %s; "
             "tables '%s'",
             k->name, WAY[wa], WAY[wb], WAY[wa], da, a->after, WAY[wb], db_, b->after);
    disagreement(text);
}

/* Each case three ways: each way is the one it claims to be (the plan),
 * the trigger gives what the case expects, and the others give exactly
 * what the trigger gives. */
static void run_cases(PGconn *adm, const scene *sc, const scase *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const scase *k = &cases[i];
        took t[3];
        for (int w = STAMP; w <= FRESH; w++) {
            run_case(adm, sc, k, (way)w, &t[w]);
            ck_assert_msg(t[w].stamped == (w == STAMP), "%s (%s way): the plan %s fence.c_stamp",
                          k->name, WAY[w], t[w].stamped ? "has" : "lacks");
        }
        expect_case(k, &t[TRIGGER], TRIGGER);
        expect_same(k, &t[STAMP], STAMP, &t[TRIGGER], TRIGGER);
        expect_same(k, &t[FRESH], FRESH, &t[TRIGGER], TRIGGER);
    }
    close_ways();
}

/* ------------------------------------------------------------------ */
/* 1. The plan carries the stamp                                        */
/* ------------------------------------------------------------------ */

START_TEST(plan_carries_the_stamp)
{
    PGconn *adm = admin();
    table3(adm, "p1", false);
    table3(adm, "p1p", true);
    PGconn *c = connect_way(NULL, STAMP);
    char want[256];

    snprintf(want, sizeof want,
             "Output: (v + 1), fence.c_stamp(by, by, '%lld'::oid, '3'::smallint, false, "
             "'O'::\"char\"), ctid",
             oid_of(adm, "p1"));
    const char *p = plan_of(c, "UPDATE p1 SET v = v + 1 WHERE id = 1");
    ck_assert_msg(strstr(p, want) != NULL, "plan:\n%s\nexpected '%s'", p, want);
    /* The statement's own value for the column is the second argument. */
    snprintf(want, sizeof want,
             "Output: 1, fence.c_stamp(by, '42'::bigint, '%lld'::oid, '3'::smallint, false, "
             "'O'::\"char\"), ctid",
             oid_of(adm, "p1"));
    p = plan_of(c, "UPDATE p1 SET by = 42, v = 1 WHERE id = 1");
    ck_assert_msg(strstr(p, want) != NULL, "plan:\n%s\nexpected '%s'", p, want);
    snprintf(want, sizeof want, "fence.c_stamp(by, by, '%lld'::oid, '3'::smallint, true, ",
             oid_of(adm, "p1p"));
    p = plan_of(c, "UPDATE p1p SET v = 1");
    ck_assert_msg(strstr(p, want) != NULL, "plan:\n%s\nexpected '%s'", p, want);

    /* Restamp (rows stamped 0, token 21), then the hot path (rows stamped
     * 21, token 21), then a higher token: one c_stamp per row, no c_guard. */
    ck_assert_int_eq(calls_in(c, "21", "UPDATE p1 SET v = v + 1"), 3000);
    expect_rows(adm, "p1", "1:1:21 2:1:21 3:1:21");
    ck_assert_int_eq(calls_in(c, "21", "UPDATE p1 SET v = v + 1"), 3000);
    ck_assert_int_eq(calls_in(c, "22", "UPDATE p1 SET v = v + 1 WHERE id <= 2"), 2000);
    expect_rows(adm, "p1", "1:3:22 2:3:22 3:2:21");
    stmt_res r = write_as(c, "21", "UPDATE p1 SET v = 0 WHERE id = 1");
    expect_stmt_err(&r, "23Q01", "fence: stale token 21 for public.p1 (highest seen 22)",
               "offered=21 highest=22 kind=table object=public.p1 reason=older",
               "stale, stamp way");
    expect_rows(adm, "p1", "1:3:22 2:3:22 3:2:21");

    /* fence.plan_stamp off: the trigger for new statements. */
    ok(c, "SET fence.plan_stamp = off");
    expect_plan(c, "UPDATE p1 SET v = v + 1 WHERE id = 1", false, "plan_stamp off");
    ck_assert_int_eq(calls_in(c, "23", "UPDATE p1 SET v = v + 1"), 3);
    expect_rows(adm, "p1", "1:4:23 2:4:23 3:3:23");
    ck_assert_int_eq(calls_in(c, "23", "UPDATE p1 SET v = v + 1"), 3);
    r = write_as(c, "22", "UPDATE p1 SET v = 0 WHERE id = 1");
    expect_stmt_err(&r, "23Q01", "fence: stale token 22 for public.p1 (highest seen 23)",
               "offered=22 highest=23 kind=table object=public.p1 reason=older",
               "stale, trigger way");
    ok(c, "SET fence.plan_stamp = on");
    expect_plan(c, "UPDATE p1 SET v = v + 1 WHERE id = 1", true, "plan_stamp on again");
    ck_assert_int_eq(calls_in(c, "23", "UPDATE p1 SET v = v + 1"), 3000);
    PQfinish(c);

    /* session_preload_libraries: the stamp from the first statement. */
    ck_assert_int_eq(setenv("PGOPTIONS", "-c session_preload_libraries=fence", 1), 0);
    c = db();
    ck_assert_int_eq(unsetenv("PGOPTIONS"), 0);
    ok(c, "SET track_functions = 'all'");
    expect_plan(c, "UPDATE p1 SET v = v + 1", true, "session_preload_libraries");
    ck_assert_int_eq(calls_in(c, "24", "UPDATE p1 SET v = v + 1"), 3000);
    expect_rows(adm, "p1", "1:7:24 2:7:24 3:6:24");
    PQfinish(c);

    /* A fresh connection plans before anything loads the module: the
     * trigger (whose call loads it: the next statement is stamped). */
    c = connect_way(NULL, FRESH);
    expect_plan(c, "UPDATE p1 SET v = v + 1", false, "fresh connection");
    ck_assert_int_eq(calls_in(c, "24", "UPDATE p1 SET v = v + 1"), 3);
    expect_plan(c, "UPDATE p1 SET v = v + 1", true, "after the trigger loaded the module");
    PQfinish(c);
    PQfinish(adm);
}
END_TEST

/* ------------------------------------------------------------------ */
/* 2. The same outcomes both ways                                       */
/* ------------------------------------------------------------------ */

#define SC0 "1:0:5 2:0:5 3:0:7"
#define SP0 "1:0:5 2:0:null 3:0:7"

static const scene SAME = {
    "SET session_replication_role = replica;"
    "DELETE FROM sc; DELETE FROM sp;"
    "INSERT INTO sc VALUES (1, 0, 5), (2, 0, 5), (3, 0, 7);"
    "INSERT INTO sp VALUES (1, 0, 5), (2, 0, NULL), (3, 0, 7);"
    "RESET session_replication_role",
    "SELECT (SELECT string_agg(format('%s:%s:%s', id, v, coalesce(by::text, 'null')), ' '"
    " ORDER BY id) FROM sc) || ' | ' || (SELECT string_agg(format('%s:%s:%s', id, v,"
    " coalesce(by::text, 'null')), ' ' ORDER BY id) FROM sp)"};

#define MALFORMED(tbl, raw, shown)                                                              \
    {"malformed token " raw " (" tbl ")", NULL, raw, "UPDATE " tbl " SET v = 1 WHERE id = 1",  \
     "23Q02", "fence: malformed fencing token '" shown "' for UPDATE on public." tbl,          \
     "reason=malformed", NULL, NULL}

static const scase SAME_CASES[] = {
    {"hot path", NULL, "5", "UPDATE sc SET v = v + 1 WHERE id <= 2 RETURNING id, v, by", "",
     NULL, NULL, "UPDATE 2 [1,1,5] [2,1,5]", "1:1:5 2:1:5 3:0:7 | " SP0},
    {"restamp some rows", NULL, "6", "UPDATE sc SET v = v + 1 WHERE id <= 2 RETURNING id, by",
     "", NULL, NULL, "UPDATE 2 [1,6] [2,6]", "1:1:6 2:1:6 3:0:7 | " SP0},
    {"restamp every row", NULL, "7", "UPDATE sc SET v = v + 1 RETURNING by", "", NULL, NULL,
     "UPDATE 3 [7] [7] [7]", "1:1:7 2:1:7 3:1:7 | " SP0},
    {"RETURNING *", NULL, "5", "UPDATE sc SET v = 3 WHERE id = 2 RETURNING *", "", NULL, NULL,
     "UPDATE 1 [2,3,5]", "1:0:5 2:3:5 3:0:7 | " SP0},
    {"stale for one row of three", NULL, "6", "UPDATE sc SET v = v + 1", "23Q01",
     "fence: stale token 6 for public.sc (highest seen 7)",
     "offered=6 highest=7 kind=table object=public.sc reason=older", NULL, NULL},
    {"stale", NULL, "4", "UPDATE sc SET v = 1 WHERE id = 1 RETURNING by", "23Q01",
     "fence: stale token 4 for public.sc (highest seen 5)",
     "offered=4 highest=5 kind=table object=public.sc reason=older", NULL, NULL},
    {"stale, no row matched", NULL, "4", "UPDATE sc SET v = 1 WHERE id = 99", "", NULL, NULL,
     "UPDATE 0", NULL},
    {"no token", NULL, NULL, "UPDATE sc SET v = 1 WHERE id = 1", "23Q02",
     "fence: no fencing token for UPDATE on public.sc", "reason=missing", NULL, NULL},
    {"empty token", NULL, "", "UPDATE sc SET v = 1 WHERE id = 1", "23Q02",
     "fence: no fencing token for UPDATE on public.sc", "reason=missing", NULL, NULL},
    {"no token, writes the column", NULL, NULL, "UPDATE sc SET by = 0", "23Q02",
     "fence: no fencing token for UPDATE on public.sc", "reason=missing", NULL, NULL},
    MALFORMED("sc", "07", "07"),
    MALFORMED("sc", "-1", "-1"),
    MALFORMED("sc", "0", "0"),
    MALFORMED("sc", "9223372036854775808", "9223372036854775808"),
    MALFORMED("sc", "abc", "abc"),
    MALFORMED("sc", " 5", " 5"),
    MALFORMED("sc", "5 ", "5 "),
    MALFORMED("sc", "1e3", "1e3"),
    {"the largest token", NULL, "9223372036854775807",
     "UPDATE sc SET v = 1 WHERE id = 3 RETURNING by", "", NULL, NULL,
     "UPDATE 1 [9223372036854775807]", "1:0:5 2:0:5 3:1:9223372036854775807 | " SP0},
    {"token set for the session", "SET fence.token = 5", NULL,
     "UPDATE sc SET v = 1 WHERE id = 1", "23Q02",
     "fence: fence.token is set for the session, not for the transaction, for UPDATE on "
     "public.sc",
     "reason=session setting=fence.token", NULL, NULL},
    {"token set for the session, another for the transaction", "SET fence.token = 5", "6",
     "UPDATE sc SET v = 1 WHERE id = 1 RETURNING by", "", NULL, NULL, "UPDATE 1 [6]",
     "1:1:6 2:0:5 3:0:7 | " SP0},
    {"holder set for the session", "SET fence.holder = '" HOLDER "'", "5",
     "UPDATE sc SET v = 1 WHERE id = 1", "23Q02",
     "fence: fence.holder is set for the session, not for the transaction, for UPDATE on "
     "public.sc",
     "reason=session setting=fence.holder", NULL, NULL},
    {"holder set for the transaction", NULL, "5",
     "UPDATE sc SET v = length(set_config('fence.holder', '" HOLDER "', true))"
     " WHERE id = 1 RETURNING by",
     "", NULL, NULL, "UPDATE 1 [5]", "1:32:5 2:0:5 3:0:7 | " SP0},
    {"writes the column", NULL, "6", "UPDATE sc SET by = 99 WHERE id = 1 RETURNING by", "", NULL,
     NULL, "UPDATE 1 [6]", "1:0:6 2:0:5 3:0:7 | " SP0},
    {"writes NULL into the column", NULL, "6",
     "UPDATE sc SET by = NULL, v = 2 WHERE id = 1 RETURNING v, by", "", NULL, NULL,
     "UPDATE 1 [2,6]", "1:2:6 2:0:5 3:0:7 | " SP0},
    {"writes a lower value on the hot path", NULL, "5",
     "UPDATE sc SET by = 0 WHERE id = 1 RETURNING by", "", NULL, NULL, "UPDATE 1 [5]",
     "1:0:5 2:0:5 3:0:7 | " SP0},
    {"writes an expression of the column", NULL, "8", "UPDATE sc SET by = by + 100 RETURNING by",
     "", NULL, NULL, "UPDATE 3 [8] [8] [8]", "1:0:8 2:0:8 3:0:8 | " SP0},
    {"stale, writes the column", NULL, "6", "UPDATE sc SET by = 99 WHERE id = 3", "23Q01",
     "fence: stale token 6 for public.sc (highest seen 7)",
     "offered=6 highest=7 kind=table object=public.sc reason=older", NULL, NULL},
    {"SET (v, by) = (SELECT ...)", NULL, "6",
     "UPDATE sc SET (v, by) = (SELECT 1, 2) WHERE id = 1 RETURNING by", "", NULL, NULL,
     "UPDATE 1 [6]", "1:1:6 2:0:5 3:0:7 | " SP0},
    {"stale, SET (by, v) = (SELECT ...)", NULL, "4",
     "UPDATE sc SET (by, v) = (SELECT 2, 1) WHERE id = 1", "23Q01",
     "fence: stale token 4 for public.sc (highest seen 5)", NULL, NULL, NULL},
    {"SET by = DEFAULT", NULL, "6", "UPDATE sc SET by = DEFAULT WHERE id = 2 RETURNING by", "",
     NULL, NULL, "UPDATE 1 [6]", "1:0:5 2:0:6 3:0:7 | " SP0},
    {"through a view", NULL, "6", "UPDATE scv SET v = 3 RETURNING id, by", "", NULL, NULL,
     "UPDATE 2 [1,6] [2,6]", "1:3:6 2:3:6 3:0:7 | " SP0},
    {"stale, through a view", NULL, "4", "UPDATE scv SET v = 3", "23Q01",
     "fence: stale token 4 for public.sc (highest seen 5)", NULL, NULL, NULL},
    {"an UPDATE in WITH and the statement", NULL, "6",
     "WITH x AS (UPDATE sc SET v = 7 WHERE id = 1 RETURNING by)"
     " UPDATE sc SET v = 8 WHERE id = 2 RETURNING by, (SELECT by FROM x)",
     "", NULL, NULL, "UPDATE 1 [6,6]", "1:7:6 2:8:6 3:0:7 | " SP0},
    {"stale in the UPDATE in WITH", NULL, "6",
     "WITH x AS (UPDATE sc SET v = 7 WHERE id = 3 RETURNING by)"
     " UPDATE sc SET v = 8 WHERE id = 2 RETURNING (SELECT by FROM x)",
     "23Q01", "fence: stale token 6 for public.sc (highest seen 7)", NULL, NULL, NULL},
    {"permissive, no token: the stamp kept, NULL becomes 0", NULL, NULL,
     "UPDATE sp SET v = 1 RETURNING id, by", "", NULL, NULL, "UPDATE 3 [1,5] [2,0] [3,7]",
     SC0 " | 1:1:5 2:1:0 3:1:7"},
    {"permissive, no token, writes the column", NULL, NULL,
     "UPDATE sp SET by = 99 WHERE id <= 2 RETURNING id, by", "", NULL, NULL,
     "UPDATE 2 [1,5] [2,0]", SC0 " | 1:0:5 2:0:0 3:0:7"},
    {"permissive, no token, writes NULL", NULL, NULL, "UPDATE sp SET by = NULL RETURNING id, by",
     "", NULL, NULL, "UPDATE 3 [1,5] [2,0] [3,7]", SC0 " | 1:0:5 2:0:0 3:0:7"},
    {"permissive, empty token", NULL, "", "UPDATE sp SET v = 2 WHERE id = 2 RETURNING by", "",
     NULL, NULL, "UPDATE 1 [0]", SC0 " | 1:0:5 2:2:0 3:0:7"},
    {"permissive, token", NULL, "7", "UPDATE sp SET v = 1 RETURNING by", "", NULL, NULL,
     "UPDATE 3 [7] [7] [7]", SC0 " | 1:1:7 2:1:7 3:1:7"},
    {"permissive, token over a NULL stamp", NULL, "1",
     "UPDATE sp SET v = 1 WHERE id = 2 RETURNING by", "", NULL, NULL, "UPDATE 1 [1]",
     SC0 " | 1:0:5 2:1:1 3:0:7"},
    {"permissive, stale", NULL, "6", "UPDATE sp SET v = 1", "23Q01",
     "fence: stale token 6 for public.sp (highest seen 7)",
     "offered=6 highest=7 kind=table object=public.sp reason=older", NULL, NULL},
    MALFORMED("sp", "abc", "abc"),
    MALFORMED("sp", "07", "07"),
    {"permissive, token set for the session", "SET fence.token = 9", NULL,
     "UPDATE sp SET v = 1", "23Q02",
     "fence: fence.token is set for the session, not for the transaction, for UPDATE on "
     "public.sp",
     "reason=session setting=fence.token", NULL, NULL},
};

START_TEST(same_outcomes_both_ways)
{
    PGconn *adm = admin();
    ok(adm, "CREATE TABLE sc (id int PRIMARY KEY, v int, by bigint);"
            "SELECT fence.protect('sc', 'by', false, 'c');"
            "CREATE TABLE sp (id int PRIMARY KEY, v int, by bigint);"
            "SELECT fence.protect('sp', 'by', true, 'c');"
            "ALTER TABLE sp ALTER COLUMN by DROP NOT NULL;"
            "CREATE VIEW scv AS SELECT * FROM sc WHERE id < 3");
    run_cases(adm, &SAME, SAME_CASES, sizeof SAME_CASES / sizeof SAME_CASES[0]);

    /* The HINTs are compared above; check two of them outright. */
    took t;
    static const scase missing = {"no token", NULL, NULL, "UPDATE sc SET v = 1", "23Q02",
                                  NULL, NULL, NULL, NULL};
    run_case(adm, &SAME, &missing, STAMP, &t);
    ck_assert_str_eq(t.r.hint, "Set it in the writing transaction: SET LOCAL fence.token = "
                               "<token>.");
    static const scase bad = {"malformed", NULL, "x", "UPDATE sc SET v = 1", "23Q02",
                              NULL, NULL, NULL, NULL};
    run_case(adm, &SAME, &bad, STAMP, &t);
    ck_assert_str_eq(t.r.hint, "fence.token must be a decimal integer 1..9223372036854775807, "
                               "no sign, spaces or leading zeros.");
    close_ways();
    PQfinish(adm);
}
END_TEST

/* ------------------------------------------------------------------ */
/* 3. Where the trigger stays                                           */
/* ------------------------------------------------------------------ */

/* On a stamp-way connection: sql's plan has no c_stamp, a token-5
 * transaction running it calls c_guard `rows` times and c_stamp never,
 * and token 4 is refused on tbl (rows stamped 5). */
static void expect_trigger(const char *tbl, const char *sql, long long rows)
{
    char msg[256];
    char what[256];
    PGconn *c = connect_way(NULL, STAMP);
    snprintf(what, sizeof what, "%s: %s", tbl, sql);
    expect_plan(c, sql, false, what);
    ck_assert_msg(calls_in(c, "5", sql) == rows, "%s: expected %lld calls of c_guard", what,
                  rows);
    stmt_res r = write_as(c, "4", sql);
    snprintf(msg, sizeof msg, "fence: stale token 4 for public.%s (highest seen 5)", tbl);
    expect_stmt_err(&r, "23Q01", msg, NULL, what);
    PQfinish(c);
}

/* A side database with the extension and a protected table tbl (rows
 * 1..3 stamped 5) g_app may read and update.  Returns a superuser
 * connection. */
static PGconn *ext_db(const char *suffix, char *name, const char *tbl)
{
    char sql[512];
    side_db(suffix, NULL, name);
    PGconn *c = connect_as(name, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    ck_assert_int_eq(fence_pg_install(c), FENCE_OK);
    ok(c, "CREATE EXTENSION fence");
    table3(c, tbl, false);
    snprintf(sql, sizeof sql, "UPDATE %s SET by = 5", tbl);
    force(c, sql);
    snprintf(sql, sizeof sql, "GRANT SELECT, UPDATE ON %s TO %s", tbl, g_app);
    ok(c, sql);
    return c;
}

/* ext_db() with table nx and fence.c_stamp not executable by PUBLIC;
 * counts function calls. */
static PGconn *noexec_db(const char *suffix, char *name)
{
    char sql[512];
    PGconn *c = ext_db(suffix, name, "nx");
    ok(c, "REVOKE EXECUTE ON FUNCTION " STAMP_FN " FROM PUBLIC");
    snprintf(sql, sizeof sql, "ALTER DATABASE %s SET track_functions = 'all'", name);
    ok(c, sql);
    return c;
}

START_TEST(falls_back_to_the_trigger)
{
    PGconn *adm = admin();
    PGconn *c;
    stmt_res r;

    /* Another BEFORE UPDATE row trigger (firing before the guard). */
    table3(adm, "fb1", false);
    force(adm, "UPDATE fb1 SET by = 5");
    ok(adm, "CREATE FUNCTION fb_keep() RETURNS trigger LANGUAGE plpgsql AS"
            " 'BEGIN RETURN NEW; END'");
    ok(adm, "CREATE TRIGGER aa_keep BEFORE UPDATE ON fb1 FOR EACH ROW EXECUTE FUNCTION fb_keep()");
    expect_trigger("fb1", "UPDATE fb1 SET v = v + 1", 3);
    /* Disabled, it does not count. */
    ok(adm, "ALTER TABLE fb1 DISABLE TRIGGER aa_keep");
    c = connect_way(NULL, STAMP);
    expect_plan(c, "UPDATE fb1 SET v = v + 1", true, "fb1, other trigger disabled");
    ck_assert_int_eq(calls_in(c, "5", "UPDATE fb1 SET v = v + 1"), 3000);
    PQfinish(c);

    /* An inheritance child: the parent's UPDATE keeps the trigger (the
     * child has none), UPDATE ONLY needs none. */
    table3(adm, "fb2", false);
    force(adm, "UPDATE fb2 SET by = 5");
    ok(adm, "CREATE TABLE fb2_kid () INHERITS (fb2); INSERT INTO fb2_kid VALUES (10, 0, 0)");
    expect_trigger("fb2", "UPDATE fb2 SET v = v + 1", 3);
    expect_rows(adm, "fb2_kid", "10:1:0");
    c = connect_way(NULL, STAMP);
    expect_plan(c, "UPDATE ONLY fb2 SET v = v + 1", true, "UPDATE ONLY fb2");
    ck_assert_int_eq(calls_in(c, "5", "UPDATE ONLY fb2 SET v = v + 1"), 3000);
    r = write_as(c, "4", "UPDATE ONLY fb2 SET v = v + 1");
    expect_stmt_err(&r, "23Q01", "fence: stale token 4 for public.fb2 (highest seen 5)", NULL,
               "UPDATE ONLY fb2");
    PQfinish(c);

    /* A stored generated column. */
    ok(adm, "CREATE TABLE fb3 (id int PRIMARY KEY, v int, by bigint,"
            " g int GENERATED ALWAYS AS (v * 2) STORED);"
            "INSERT INTO fb3 (id, v, by) SELECT g, 0, 5 FROM generate_series(1, 3) g;"
            "SELECT fence.protect('fb3', 'by', false, 'c')");
    expect_trigger("fb3", "UPDATE fb3 SET v = v + 1", 3);
    ck_assert_int_eq(num(adm, "SELECT sum(g) FROM fb3"), 6);

    /* UPDATE ... FROM: the stamp is in the join's plan, and the trigger
     * fires too. */
    table3(adm, "fb5", false);
    force(adm, "UPDATE fb5 SET by = 5");
    static const char join[] = "UPDATE fb5 SET v = fb5.v + x.d FROM (VALUES (1, 1), (2, 1))"
                               " AS x(id, d) WHERE fb5.id = x.id";
    c = connect_way(NULL, STAMP);
    expect_plan(c, join, true, "UPDATE ... FROM");
    ck_assert_int_eq(calls_in(c, "5", join), 2002);
    r = write_as(c, "4", join);
    expect_stmt_err(&r, "23Q01", "fence: stale token 4 for public.fb5 (highest seen 5)",
               "offered=4 highest=5 kind=table object=public.fb5 reason=older", "UPDATE ... FROM");
    ck_assert_int_eq(calls_in(c, "6", join), 2002);
    expect_rows(adm, "fb5", "1:2:6 2:2:6 3:0:5");
    PQfinish(c);

    /* The guard disabled: nothing is enforced, either way. */
    table3(adm, "fb4", false);
    force(adm, "UPDATE fb4 SET by = 5");
    ok(adm, "ALTER TABLE fb4 DISABLE TRIGGER zz_fence_guard_upd");
    stmt_res seen[2];
    for (int w = STAMP; w <= TRIGGER; w++) {
        force(adm, "UPDATE fb4 SET v = 0, by = 5");
        c = connect_way(NULL, (way)w);
        expect_plan(c, "UPDATE fb4 SET v = v + 1", false, "guard disabled");
        seen[w] = write_as(c, NULL, "UPDATE fb4 SET v = v + 1, by = 1 WHERE id = 1 RETURNING by");
        expect_stmt_ok(&seen[w], "UPDATE 1 [1]", WAY[w]);
        r = write_as(c, "4", "UPDATE fb4 SET v = v + 1 WHERE id = 2 RETURNING by");
        expect_stmt_ok(&r, "UPDATE 1 [5]", WAY[w]);
        ck_assert_int_eq(calls_in(c, NULL, "UPDATE fb4 SET v = v + 1"), 0);
        expect_rows(adm, "fb4", "1:2:1 2:2:5 3:1:5");
        PQfinish(c);
    }
    ck_assert(stmt_eq(&seen[STAMP], &seen[TRIGGER]));
    ok(adm, "ALTER TABLE fb4 ENABLE TRIGGER zz_fence_guard_upd");
    c = connect_way(NULL, STAMP);
    expect_plan(c, "UPDATE fb4 SET v = v + 1", true, "guard enabled again");
    r = write_as(c, NULL, "UPDATE fb4 SET v = v + 1");
    expect_stmt_err(&r, "23Q02", "fence: no fencing token for UPDATE on public.fb4", "reason=missing",
               "guard enabled again");
    PQfinish(c);
    PQfinish(adm);

    /* c_stamp not EXECUTE to PUBLIC (a side database: the grant is
     * PUBLIC's in the fixture's). */
    char name[NAME_BUF];
    PGconn *su = noexec_db("nox", name);
    PGconn *app = connect_as(name, g_app);
    PQsetNoticeProcessor(app, quiet_notice, NULL);
    ck_assert_int_eq(num(app, "SELECT fence.c_version()"), 1);
    expect_plan(app, "UPDATE nx SET v = v + 1", false, "no EXECUTE on c_stamp");
    ck_assert_int_eq(calls_in(app, "5", "UPDATE nx SET v = v + 1"), 3);
    r = write_as(app, "4", "UPDATE nx SET v = v + 1 WHERE id = 1");
    expect_stmt_err(&r, "23Q01", "fence: stale token 4 for public.nx (highest seen 5)",
               "offered=4 highest=5 kind=table object=public.nx reason=older",
               "no EXECUTE on c_stamp");
    r = write_as(app, NULL, "UPDATE nx SET v = v + 1 WHERE id = 1");
    expect_stmt_err(&r, "23Q02", "fence: no fencing token for UPDATE on public.nx", "reason=missing",
               "no EXECUTE on c_stamp, no token");
    /* PUBLIC's right decides, not the planning role's (a cached plan may
     * run under another role): the superuser gets no stamp either, nor a
     * role granted EXECUTE by name. */
    PGconn *s2 = connect_way(name, STAMP);
    expect_plan(s2, "UPDATE nx SET v = v + 1", false, "superuser, PUBLIC without EXECUTE");
    PQfinish(s2);
    char sql[256];
    snprintf(sql, sizeof sql, "GRANT EXECUTE ON FUNCTION " STAMP_FN " TO %s", g_app);
    ok(su, sql);
    expect_plan(app, "UPDATE nx SET v = v + 1", false, "EXECUTE granted to the role only");
    /* Granted to PUBLIC again: the role's next statement is stamped. */
    ok(su, "GRANT EXECUTE ON FUNCTION " STAMP_FN " TO PUBLIC");
    expect_plan(app, "UPDATE nx SET v = v + 1", true, "EXECUTE granted to PUBLIC");
    ck_assert_int_eq(calls_in(app, "5", "UPDATE nx SET v = v + 1"), 3000);
    PQfinish(app);
    PQfinish(su);
    drop_side_db(name);
}
END_TEST

/* ------------------------------------------------------------------ */
/* 4. Cached plans follow the table's triggers                          */
/* ------------------------------------------------------------------ */

START_TEST(replanned_when_triggers_change)
{
    PGconn *adm = admin();
    table3(adm, "rp", false);
    force(adm, "UPDATE rp SET by = 5");
    PGconn *c = connect_way(NULL, STAMP);
    ok(c, "PREPARE u AS UPDATE rp SET v = v + 1 WHERE id = $1 RETURNING by");
    for (int i = 0; i < 6; i++) {
        stmt_res r = write_as(c, "5", "EXECUTE u(1)");
        expect_stmt_ok(&r, "UPDATE 1 [5]", "EXECUTE u");
    }
    ck_assert_int_ge(num(c, "SELECT generic_plans FROM pg_prepared_statements WHERE name = 'u'"),
                     1);
    expect_plan(c, "EXECUTE u(1)", true, "prepared");
    ck_assert_int_eq(calls_in(c, "5", "EXECUTE u(1)"), 1000);

    ok(adm, "CREATE FUNCTION rp_keep() RETURNS trigger LANGUAGE plpgsql AS"
            " 'BEGIN RETURN NEW; END'");
    ok(adm, "CREATE TRIGGER aa_keep BEFORE UPDATE ON rp FOR EACH ROW EXECUTE FUNCTION rp_keep()");
    expect_plan(c, "EXECUTE u(1)", false, "another trigger created");
    ck_assert_int_eq(calls_in(c, "5", "EXECUTE u(1)"), 1);
    stmt_res r = write_as(c, "4", "EXECUTE u(1)");
    expect_stmt_err(&r, "23Q01", "fence: stale token 4 for public.rp (highest seen 5)", NULL,
               "another trigger created");

    ok(adm, "DROP TRIGGER aa_keep ON rp");
    expect_plan(c, "EXECUTE u(1)", true, "the other trigger dropped");
    ck_assert_int_eq(calls_in(c, "5", "EXECUTE u(1)"), 1000);
    r = write_as(c, "4", "EXECUTE u(1)");
    expect_stmt_err(&r, "23Q01", "fence: stale token 4 for public.rp (highest seen 5)", NULL,
               "the other trigger dropped");

    /* The guard disabled, then enabled again. */
    ok(adm, "ALTER TABLE rp DISABLE TRIGGER zz_fence_guard_upd");
    expect_plan(c, "EXECUTE u(1)", false, "guard disabled");
    r = write_as(c, NULL, "EXECUTE u(1)");
    expect_stmt_ok(&r, "UPDATE 1 [5]", "guard disabled, no token");
    ok(adm, "ALTER TABLE rp ENABLE TRIGGER zz_fence_guard_upd");
    expect_plan(c, "EXECUTE u(1)", true, "guard enabled");
    r = write_as(c, NULL, "EXECUTE u(1)");
    expect_stmt_err(&r, "23Q02", NULL, "reason=missing", "guard enabled, no token");
    /* Made permissive by protect() again: replanned with the new mode. */
    ok(adm, "SELECT fence.protect('rp', 'by', true, 'c')");
    expect_plan(c, "EXECUTE u(1)", true, "permissive");
    ck_assert_msg(strstr(plan_of(c, "EXECUTE u(1)"), "'3'::smallint, true, ") != NULL, "%s",
                  plan_of(c, "EXECUTE u(1)"));
    r = write_as(c, NULL, "EXECUTE u(1)");
    expect_stmt_ok(&r, "UPDATE 1 [5]", "permissive, no token");
    ok(adm, "SELECT fence.protect('rp', 'by', false, 'c')");
    r = write_as(c, NULL, "EXECUTE u(1)");
    expect_stmt_err(&r, "23Q02", NULL, "reason=missing", "strict again, no token");
    PQfinish(c);

    /* Statements prepared before the module was loaded: a generic plan
     * made then (force_generic_plan), and custom plans then a generic one
     * (auto).  Whichever way they take, one check per row, and the rule. */
    for (int mode = 0; mode < 2; mode++) {
        c = connect_way(NULL, FRESH);
        ok(c, mode == 0 ? "SET plan_cache_mode = force_generic_plan"
                        : "SET plan_cache_mode = auto");
        ok(c, "PREPARE w AS UPDATE rp SET v = v + 1 WHERE id = $1 RETURNING by");
        expect_plan(c, "EXECUTE w(2)", false, "prepared before the module was loaded");
        ck_assert_int_eq(num(c, "SELECT fence.c_version()"), 1);
        for (int i = 0; i < 8; i++) {
            char tok[32];
            char rows[64];
            snprintf(tok, sizeof tok, "%d", 10 + mode * 10 + i);
            long long n = calls_in(c, tok, "EXECUTE w(2)");
            ck_assert_msg(n == 1 || n == 1000, "execution %d: calls %lld", i, n);
            r = write_as(c, tok, "EXECUTE w(2)");
            snprintf(rows, sizeof rows, "UPDATE 1 [%s]", tok);
            expect_stmt_ok(&r, rows, "EXECUTE w, a higher token");
        }
        r = write_as(c, "9", "EXECUTE w(2)");
        char want[128];
        snprintf(want, sizeof want, "fence: stale token 9 for public.rp (highest seen %d)",
                 17 + mode * 10);
        expect_stmt_err(&r, "23Q01", want, NULL, "EXECUTE w, stale");
        r = write_as(c, NULL, "EXECUTE w(2)");
        expect_stmt_err(&r, "23Q02", NULL, "reason=missing", "EXECUTE w, no token");
        PQfinish(c);
    }
    PQfinish(adm);
}
END_TEST

/* ------------------------------------------------------------------ */
/* 5. Concurrent writers                                                */
/* ------------------------------------------------------------------ */

/* The answer to the statement sent on c, within ANSWER_MS. */
static stmt_res collect(PGconn *c, const char *what)
{
    stmt_res o;
    PGresult *r = pg_answer(c, what, ANSWER_MS);
    stmt_take(r, &o);
    PQclear(r);
    return o;
}

/* A writes row 1 of rc with token 10 and keeps its transaction open; B
 * sends its UPDATE; A commits or rolls back; B's answer. */
typedef struct rcase {
    const char *name;
    int init;          /* the committed stamp of rows 1 and 2 before */
    const char *a_sql; /* A's statement (token 10) */
    bool a_commit;
    bool b_rr; /* B in REPEATABLE READ (snapshot taken before A ends) */
    const char *b_tok;
    const char *b_sql;
    /* expected */
    bool blocked;
    const char *state; /* "" success */
    const char *msg;   /* NULL: not checked */
    const char *rows;  /* B's rows on success */
    const char *after; /* rc afterwards */
} rcase;

typedef struct raced {
    bool blocked;
    stmt_res b;
    char after[256];
} raced;

/* A and B of one way, kept from case to case. */
static void run_race(PGconn *adm, PGconn *watch, const rcase *k, PGconn *a, PGconn *b, raced *o)
{
    char sql[512];
    snprintf(sql, sizeof sql, "DELETE FROM rc; INSERT INTO rc VALUES (1, 0, %d), (2, 0, %d)",
             k->init, k->init);
    force(adm, sql);
    ok(a, "BEGIN");
    set_raw(a, "10");
    ok(a, k->a_sql);
    ok(b, k->b_rr ? "BEGIN ISOLATION LEVEL REPEATABLE READ" : "BEGIN");
    set_raw(b, k->b_tok); /* a SELECT: takes the snapshot */
    ck_assert_msg(PQsendQuery(b, k->b_sql) == 1, "PQsendQuery: %s", PQerrorMessage(b));
    o->blocked = pg_held(watch, b, BLOCK_MS);
    ok(a, k->a_commit ? "COMMIT" : "ROLLBACK");
    o->b = collect(b, k->name);
    ok(b, o->b.ok ? "COMMIT" : "ROLLBACK");
    rows_of(adm, "rc", o->after, sizeof o->after);
}

static void expect_race(const rcase *k, const raced *o, way w)
{
    char what[256];
    snprintf(what, sizeof what, "%s (%s way)", k->name, WAY[w]);
    ck_assert_msg(o->blocked == k->blocked, "%s: B %s; expected it %s", what,
                  o->blocked ? "was blocked" : "answered at once",
                  k->blocked ? "to wait for A" : "to answer at once");
    if (k->state[0] == '\0') {
        expect_stmt_ok(&o->b, k->rows, what);
    } else {
        expect_stmt_err(&o->b, k->state, k->msg, NULL, what);
    }
    ck_assert_msg(strcmp(o->after, k->after) == 0, "%s: rc holds '%s', expected '%s'", what,
                  o->after, k->after);
}

/* Each case the trigger way then the stamp way: the trigger gives what
 * the case expects, the stamp exactly the same -- or, when stamp_cases is
 * not NULL, what stamp_cases[i] expects (a documented difference). */
static void run_races(const rcase *cases, const rcase *stamp_cases, size_t n)
{
    PGconn *adm = admin();
    PGconn *watch = db();
    ok(adm, "CREATE TABLE IF NOT EXISTS rc (id int PRIMARY KEY, v int, by bigint);"
            "SELECT fence.protect('rc', 'by', false, 'c')");
    PGconn *a[2];
    PGconn *b[2];
    for (int w = STAMP; w <= TRIGGER; w++) {
        a[w] = connect_way(NULL, (way)w);
        b[w] = connect_way(NULL, (way)w);
    }
    for (size_t i = 0; i < n; i++) {
        const rcase *k = &cases[i];
        raced t;
        raced s;
        run_race(adm, watch, k, a[TRIGGER], b[TRIGGER], &t);
        expect_race(k, &t, TRIGGER);
        run_race(adm, watch, k, a[STAMP], b[STAMP], &s);
        if (stamp_cases != NULL) {
            expect_race(&stamp_cases[i], &s, STAMP);
            continue;
        }
        char dt[2048];
        char ds[2048];
        char text[6144];
        stmt_describe(&t.b, dt, sizeof dt);
        stmt_describe(&s.b, ds, sizeof ds);
        if (s.blocked == t.blocked && stmt_eq(&s.b, &t.b) && strcmp(s.after, t.after) == 0) {
            expect_race(k, &s, STAMP);
            continue;
        }
        snprintf(text, sizeof text,
                 "%s: the stamp way and the trigger way disagree:\n"
                 "  stamp:   B %s, %s; rc '%s'\n  trigger: B %s, %s; rc '%s'",
                 k->name, s.blocked ? "blocked" : "not blocked", ds, s.after,
                 t.blocked ? "blocked" : "not blocked", dt, t.after);
        disagreement(text);
    }
    for (int w = STAMP; w <= TRIGGER; w++) {
        PQfinish(a[w]);
        PQfinish(b[w]);
    }
    PQfinish(watch);
    PQfinish(adm);
}

#define UPD1 "UPDATE rc SET v = v + 1 WHERE id = 1"

static const rcase RACES[] = {
    {"stale after A's commit", 3, UPD1, true, false, "5", UPD1 " RETURNING by", true, "23Q01",
     "fence: stale token 5 for public.rc (highest seen 10)", NULL, "1:1:10 2:0:3"},
    {"equal after A's commit", 3, UPD1, true, false, "10", UPD1 " RETURNING by", true, "", NULL,
     "UPDATE 1 [10]", "1:2:10 2:0:3"},
    {"higher after A's commit", 3, UPD1, true, false, "12", UPD1 " RETURNING by", true, "", NULL,
     "UPDATE 1 [12]", "1:2:12 2:0:3"},
    {"lower after A's rollback", 3, UPD1, false, false, "5", UPD1 " RETURNING by", true, "",
     NULL, "UPDATE 1 [5]", "1:1:5 2:0:3"},
    {"the row left B's WHERE", 3, "UPDATE rc SET v = 100 WHERE id = 1", true, false, "5",
     "UPDATE rc SET v = v + 1 WHERE id = 1 AND v = 0 RETURNING by", true, "", NULL, "UPDATE 0",
     "1:100:10 2:0:3"},
    {"both rows, one taken by A", 3, UPD1, true, false, "5", "UPDATE rc SET v = v + 1", true,
     "23Q01", "fence: stale token 5 for public.rc (highest seen 10)", NULL, "1:1:10 2:0:3"},
    {"REPEATABLE READ after A's commit", 3, UPD1, true, true, "10", UPD1 " RETURNING by", true,
     "40001", NULL, NULL, "1:1:10 2:0:3"},
    {"REPEATABLE READ after A's rollback", 3, UPD1, false, true, "5", UPD1 " RETURNING by",
     true, "", NULL, "UPDATE 1 [5]", "1:1:5 2:0:3"},
};

START_TEST(concurrent_update_rechecked)
{
    run_races(RACES, NULL, sizeof RACES / sizeof RACES[0]);
}
END_TEST

/* ------------------------------------------------------------------ */
/* 6. session_replication_role                                          */
/* ------------------------------------------------------------------ */

static const scene REPLICA = {
    "SET session_replication_role = replica;"
    "DELETE FROM rl; INSERT INTO rl VALUES (1, 0, 5), (2, 0, 5), (3, 0, 5);"
    "RESET session_replication_role",
    "SELECT string_agg(format('%s:%s:%s', id, v, by), ' ' ORDER BY id) FROM rl"};

#define REPL "SET session_replication_role = replica"

static const scase REPLICA_ORIGIN[] = {
    {"replica, guard ENABLEd: no token, writes the column", REPL, NULL,
     "UPDATE rl SET v = 1, by = 1 WHERE id = 1 RETURNING by", "", NULL, NULL, "UPDATE 1 [1]",
     "1:1:1 2:0:5 3:0:5"},
    {"replica, guard ENABLEd: stale token", REPL, "3",
     "UPDATE rl SET v = 1 WHERE id = 1 RETURNING by", "", NULL, NULL, "UPDATE 1 [5]",
     "1:1:5 2:0:5 3:0:5"},
    {"replica, guard ENABLEd: no token, writes the column again", REPL, NULL,
     "UPDATE rl SET by = 7 WHERE id = 1 RETURNING by", "", NULL, NULL, "UPDATE 1 [7]",
     "1:0:7 2:0:5 3:0:5"},
    {"origin, guard ENABLEd: stale token", NULL, "3", "UPDATE rl SET v = 1 WHERE id = 1", "23Q01",
     "fence: stale token 3 for public.rl (highest seen 5)", NULL, NULL, NULL},
};

static const scase REPLICA_ALWAYS[] = {
    {"replica, guard ENABLE ALWAYS: stale token", REPL, "3", "UPDATE rl SET v = 1 WHERE id = 1",
     "23Q01", "fence: stale token 3 for public.rl (highest seen 5)",
     "offered=3 highest=5 kind=table object=public.rl reason=older", NULL, NULL},
    {"replica, guard ENABLE ALWAYS: no token", REPL, NULL, "UPDATE rl SET v = 1 WHERE id = 1",
     "23Q02", "fence: no fencing token for UPDATE on public.rl", "reason=missing", NULL, NULL},
    {"replica, guard ENABLE ALWAYS: token, writes the column", REPL, "6",
     "UPDATE rl SET by = 1 WHERE id = 1 RETURNING by", "", NULL, NULL, "UPDATE 1 [6]",
     "1:0:6 2:0:5 3:0:5"},
    {"origin, guard ENABLE ALWAYS: stale token", NULL, "3", "UPDATE rl SET v = 1", "23Q01", NULL,
     NULL, NULL, NULL},
};

static const scase REPLICA_ONLY[] = {
    {"origin, guard ENABLE REPLICA: no token, writes the column", NULL, NULL,
     "UPDATE rl SET by = 1 WHERE id = 1 RETURNING by", "", NULL, NULL, "UPDATE 1 [1]",
     "1:0:1 2:0:5 3:0:5"},
    {"replica, guard ENABLE REPLICA: stale token", REPL, "3", "UPDATE rl SET v = 1", "23Q01",
     NULL, NULL, NULL, NULL},
    {"replica, guard ENABLE REPLICA: token", REPL, "6", "UPDATE rl SET by = 1 RETURNING by", "",
     NULL, NULL, "UPDATE 3 [6] [6] [6]", "1:0:6 2:0:6 3:0:6"},
};

START_TEST(replica_role)
{
    PGconn *adm = admin();
    table3(adm, "rl", false);
    run_cases(adm, &REPLICA, REPLICA_ORIGIN, sizeof REPLICA_ORIGIN / sizeof REPLICA_ORIGIN[0]);

    ok(adm, "ALTER TABLE rl ENABLE ALWAYS TRIGGER zz_fence_guard_upd");
    PGconn *c = connect_way(NULL, STAMP);
    ck_assert_msg(strstr(plan_of(c, "UPDATE rl SET v = 1"), "false, 'A'::\"char\")") != NULL,
                  "%s", plan_of(c, "UPDATE rl SET v = 1"));
    PQfinish(c);
    run_cases(adm, &REPLICA, REPLICA_ALWAYS, sizeof REPLICA_ALWAYS / sizeof REPLICA_ALWAYS[0]);

    ok(adm, "ALTER TABLE rl ENABLE REPLICA TRIGGER zz_fence_guard_upd");
    run_cases(adm, &REPLICA, REPLICA_ONLY, sizeof REPLICA_ONLY / sizeof REPLICA_ONLY[0]);
    ok(adm, "ALTER TABLE rl ENABLE TRIGGER zz_fence_guard_upd");
    PQfinish(adm);
}
END_TEST

/* ------------------------------------------------------------------ */
/* 7. Extension versions                                                */
/* ------------------------------------------------------------------ */

static const char DECL[] =
    "SELECT proacl::text || ' ' || provolatile::text || ' ' || prosecdef::text || ' ' ||"
    " proisstrict::text || ' ' || proparallel::text || ' ' || proowner::regrole::text"
    " FROM pg_proc WHERE oid = '" STAMP_FN "'::regprocedure";

START_TEST(extension_versions)
{
    char name[NAME_BUF];
    side_db("v11", NULL, name);
    PGconn *c = connect_as(name, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    ck_assert_int_eq(fence_pg_install(c), FENCE_OK);
    ok(c, "CREATE EXTENSION fence VERSION '1.1'");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_proc WHERE proname = 'c_stamp'"), 0);
    table3(c, "ev", false);
    force(c, "UPDATE ev SET by = 5");

    PGconn *old = connect_way(name, STAMP);
    expect_plan(old, "UPDATE ev SET v = v + 1", false, "version 1.1");
    ck_assert_int_eq(calls_in(old, "5", "UPDATE ev SET v = v + 1"), 3);
    stmt_res r = write_as(old, "4", "UPDATE ev SET v = v + 1");
    expect_stmt_err(&r, "23Q01", "fence: stale token 4 for public.ev (highest seen 5)", NULL,
               "version 1.1");

    ok(c, "ALTER EXTENSION fence UPDATE TO '1.2'");
    ck_assert_str_eq(text1(c, "SELECT extversion FROM pg_extension WHERE extname = 'fence'"),
                     "1.2");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_depend WHERE objid = '" STAMP_FN
                            "'::regprocedure AND refobjid = (SELECT oid FROM pg_extension"
                            " WHERE extname = 'fence') AND deptype = 'e'"),
                     1);
    PGconn *nw = connect_way(name, STAMP);
    expect_plan(nw, "UPDATE ev SET v = v + 1", true, "updated to 1.2, new connection");
    ck_assert_int_eq(calls_in(nw, "5", "UPDATE ev SET v = v + 1"), 3000);
    r = write_as(nw, "4", "UPDATE ev SET v = v + 1");
    expect_stmt_err(&r, "23Q01", "fence: stale token 4 for public.ev (highest seen 5)",
               "offered=4 highest=5 kind=table object=public.ev reason=older",
               "updated to 1.2, new connection");
    /* The connection that loaded the module under 1.1 too. */
    expect_plan(old, "UPDATE ev SET v = v + 1", true, "updated to 1.2, older connection");
    ck_assert_int_eq(calls_in(old, "5", "UPDATE ev SET v = v + 1"), 3000);

    char decl[512];
    snprintf(decl, sizeof decl, "%s", text1(c, DECL));
    /* The fixture's database: a fresh install of the newest version (1.3
     * adds fence.c_send and leaves c_stamp as 1.2 made it). */
    PGconn *f = admin();
    ck_assert_str_eq(text1(f, "SELECT extversion FROM pg_extension WHERE extname = 'fence'"),
                     "1.3");
    ck_assert_str_eq(text1(f, DECL), decl);
    PQfinish(f);
    PQfinish(nw);
    PQfinish(old);
    PQfinish(c);
    drop_side_db(name);
}
END_TEST

/* ------------------------------------------------------------------ */
/* 8. c_stamp called directly                                           */
/* ------------------------------------------------------------------ */

START_TEST(direct_calls)
{
    PGconn *adm = admin();
    table3(adm, "dc", false);
    force(adm, "UPDATE dc SET by = 5");
    long long oid = oid_of(adm, "dc");
    PGconn *c = connect_way(NULL, STAMP);
    char sql[512];
    stmt_res r;

    /* NULL table, column, mode or state. */
    fails(c, "SELECT fence.c_stamp(1, 1, NULL, 3::smallint, false, 'O')", "22004");
    snprintf(sql, sizeof sql, "SELECT fence.c_stamp(1, 1, %lld, NULL, false, 'O')", oid);
    fails(c, sql, "22004");
    snprintf(sql, sizeof sql, "SELECT fence.c_stamp(1, 1, %lld, 3::smallint, NULL, 'O')", oid);
    fails(c, sql, "22004");
    snprintf(sql, sizeof sql, "SELECT fence.c_stamp(1, 1, %lld, 3::smallint, false, NULL)", oid);
    fails(c, sql, "22004");

    /* No token: strict refuses, permissive keeps the old value (0 for
     * NULL). */
    snprintf(sql, sizeof sql, "SELECT fence.c_stamp(5, 1, %lld, 3::smallint, false, 'O')", oid);
    r = write_as(c, NULL, sql);
    expect_stmt_err(&r, "23Q02", "fence: no fencing token for UPDATE on public.dc", "reason=missing",
               "direct, no token");
    snprintf(sql, sizeof sql, "SELECT fence.c_stamp(5, 1, %lld, 3::smallint, true, 'O')", oid);
    r = write_as(c, NULL, sql);
    expect_stmt_ok(&r, "SELECT 1 [5]", "direct, permissive, no token");
    snprintf(sql, sizeof sql, "SELECT fence.c_stamp(NULL, 1, %lld, 3::smallint, true, 'O')",
             oid);
    r = write_as(c, NULL, sql);
    expect_stmt_ok(&r, "SELECT 1 [0]", "direct, permissive, no token, NULL");

    /* Token 7: the arguments before and after the table's OID. */
    static const struct {
        const char *before;
        const char *after;
        const char *rows;
    } seven[] = {
        {"5, 1", "3::smallint, false, 'O'", "SELECT 1 [7]"},
        {"7, 1", "3::smallint, false, 'O'", "SELECT 1 [7]"},
        {"NULL, 1", "3::smallint, false, 'O'", "SELECT 1 [7]"},
        {"5, 1", "3::smallint, true, 'A'", "SELECT 1 [7]"},
        {"9, 1", "3::smallint, false, 'D'", "SELECT 1 [1]"}, /* disabled: the value */
        {"9, NULL", "3::smallint, false, 'D'", "SELECT 1 [null]"},
        {"9, 2", "3::smallint, false, 'R'", "SELECT 1 [2]"}, /* replica only */
    };
    for (size_t i = 0; i < sizeof seven / sizeof seven[0]; i++) {
        snprintf(sql, sizeof sql, "SELECT fence.c_stamp(%s, %lld, %s)", seven[i].before, oid,
                 seven[i].after);
        r = write_as(c, "7", sql);
        expect_stmt_ok(&r, seven[i].rows, sql);
    }
    snprintf(sql, sizeof sql, "SELECT fence.c_stamp(9, 1, %lld, 3::smallint, false, 'O')", oid);
    r = write_as(c, "7", sql);
    expect_stmt_err(&r, "23Q01", "fence: stale token 7 for public.dc (highest seen 9)",
               "offered=7 highest=9 kind=table object=public.dc reason=older", "direct, stale");
    r = write_as(c, "07", sql);
    expect_stmt_err(&r, "23Q02", "fence: malformed fencing token '07' for UPDATE on public.dc",
               "reason=malformed", "direct, malformed");
    ok(c, "SET fence.token = 7");
    r = stmt_exec(c, sql);
    expect_stmt_err(&r, "23Q02", NULL, "reason=session setting=fence.token", "direct, session token");
    ok(c, "RESET fence.token");

    /* An unknown table: looked up only to report an error. */
    r = write_as(c, "7", "SELECT fence.c_stamp(5, 1, 0, 3::smallint, false, 'O')");
    expect_stmt_ok(&r, "SELECT 1 [7]", "direct, unknown table, no error");
    r = write_as(c, "7", "SELECT fence.c_stamp(9, 1, 0, 3::smallint, false, 'O')");
    expect_stmt_err(&r, "42P01", "fence: no table with OID 0", NULL, "direct, unknown table, stale");
    r = write_as(c, NULL, "SELECT fence.c_stamp(9, 1, 0, 3::smallint, false, 'O')");
    expect_stmt_err(&r, "42P01", NULL, NULL, "direct, unknown table, no token");
    /* A column the table does not have, on an error path: an error, and
     * the backend lives on. */
    snprintf(sql, sizeof sql, "SELECT fence.c_stamp(9, 1, %lld, 999::smallint, false, 'O')", oid);
    r = write_as(c, "7", sql);
    ck_assert_msg(!r.ok && r.state[0] != '\0', "unknown column: %s", r.rows);
    ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
    ck_assert_int_eq(num(c, "SELECT 1"), 1);

    /* Any role may call it: a computation that writes nothing. */
    PGconn *app = db_app();
    snprintf(sql, sizeof sql, "SELECT fence.c_stamp(5, 1, %lld, 3::smallint, false, 'O')", oid);
    r = write_as(app, "7", sql);
    expect_stmt_ok(&r, "SELECT 1 [7]", "direct, application role");
    PQfinish(app);

    /* Writing the column with c_stamp oneself weakens nothing, either way. */
    char weak[3][512];
    snprintf(weak[0], sizeof weak[0],
             "UPDATE dc SET v = 1, by = fence.c_stamp(0, 0, %lld, 3::smallint, false, 'O')"
             " WHERE id = 1 RETURNING by",
             oid);
    snprintf(weak[1], sizeof weak[1],
             "UPDATE dc SET v = 1, by = fence.c_stamp(0, 0, %lld, 3::smallint, true, 'D')"
             " WHERE id = 1 RETURNING by",
             oid);
    snprintf(weak[2], sizeof weak[2],
             "UPDATE dc SET v = 1, by = fence.c_stamp(by, 0, %lld, 3::smallint, true, 'D')"
             " WHERE id = 1 RETURNING by",
             oid);
    PQfinish(c);
    for (int w = STAMP; w <= TRIGGER; w++) {
        c = connect_way(NULL, (way)w);
        for (int i = 0; i < 3; i++) {
            char what[64];
            snprintf(what, sizeof what, "user-written c_stamp %d (%s way)", i, WAY[w]);
            force(adm, "UPDATE dc SET by = 5");
            if (w == STAMP) {
                const char *p = plan_of(c, weak[i]);
                ck_assert_msg(strstr(p, "fence.c_stamp(by, fence.c_stamp(") != NULL, "%s: %s",
                              what, p);
            }
            r = write_as(c, "4", weak[i]);
            expect_stmt_err(&r, "23Q01", "fence: stale token 4 for public.dc (highest seen 5)", NULL,
                       what);
            r = write_as(c, NULL, weak[i]);
            expect_stmt_err(&r, "23Q02", NULL, "reason=missing", what);
            r = write_as(c, "6", weak[i]);
            expect_stmt_ok(&r, "UPDATE 1 [6]", what);
        }
        PQfinish(c);
    }

    /* Planned with fence.plan_stamp off, run with it on: the executor
     * skips the trigger only for a plan whose stamp is exactly the guard's
     * (m1); the others keep it (m2: another state, m3: not the row's own
     * column).  The rule holds for all three. */
    c = connect_way(NULL, STAMP);
    ok(c, "SET plan_cache_mode = force_generic_plan");
    ok(c, "SET fence.plan_stamp = off");
    static const char *const first[3] = {"by", "by", "0"};
    static const char *const state[3] = {"O", "A", "O"};
    for (int i = 0; i < 3; i++) {
        snprintf(sql, sizeof sql,
                 "PREPARE m%d AS UPDATE dc SET v = v + 1, by = fence.c_stamp(%s, 0, '%lld'::oid,"
                 " 3::smallint, false, '%s') WHERE id = $1 RETURNING by",
                 i, first[i], oid, state[i]);
        ok(c, sql);
        snprintf(sql, sizeof sql, "EXECUTE m%d(1)", i);
        const char *p = plan_of(c, sql); /* the generic plan, made now */
        ck_assert_msg(strstr(p, "fence.c_stamp(by, fence.c_stamp(") == NULL, "%s", p);
    }
    ok(c, "SET fence.plan_stamp = on");
    for (int i = 0; i < 3; i++) {
        char what[64];
        snprintf(what, sizeof what, "EXECUTE m%d", i);
        snprintf(sql, sizeof sql, "EXECUTE m%d(1)", i);
        force(adm, "UPDATE dc SET by = 5");
        ck_assert_msg(strstr(plan_of(c, sql), "fence.c_stamp(by, fence.c_stamp(") == NULL,
                      "%s: replanned", what);
        long long n = calls_in(c, "5", sql);
        ck_assert_msg(n == (i == 0 ? 1000 : 1001), "%s: calls %lld", what, n);
        r = write_as(c, "4", sql);
        expect_stmt_err(&r, "23Q01", "fence: stale token 4 for public.dc (highest seen 5)", NULL,
                   what);
        r = write_as(c, NULL, sql);
        expect_stmt_err(&r, "23Q02", NULL, "reason=missing", what);
        r = write_as(c, "6", sql);
        expect_stmt_ok(&r, "UPDATE 1 [6]", what);
    }
    PQfinish(c);
    PQfinish(adm);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The documented differences (docs/postgres-extension.md)              */
/* ------------------------------------------------------------------ */

/* The stamp is the last of the statement's assignments (the planner hook
 * puts it after every other one), so the ways agree on which error a
 * failing statement reports and on the token of a statement that changes
 * fence.token in its own SET list.  The token column comes before the
 * other one here, so a stamp computed in column order would fail all
 * three (as extension 1.2 first did: 23Q01 / 23Q02 instead of 22012, and
 * the third statement admitted with token 9). */
static const scene ORDER = {
    "SET session_replication_role = replica;"
    "DELETE FROM eo; INSERT INTO eo VALUES (1, 5, 0), (2, 5, 0);"
    "RESET session_replication_role",
    "SELECT string_agg(format('%s:%s:%s', id, by, v), ' ' ORDER BY id) FROM eo"};

static const scase ORDER_CASES[] = {
    {"stale token, a later column fails", NULL, "3",
     "UPDATE eo SET v = 1 / (v - v) WHERE id = 1", "22012", "division by zero", NULL, NULL,
     NULL},
    {"no token, a later column fails", NULL, NULL, "UPDATE eo SET v = 1 / (v - v) WHERE id = 1",
     "22012", "division by zero", NULL, NULL, NULL},
    {"a later column sets a stale token", NULL, "9",
     "UPDATE eo SET v = length(set_config('fence.token', '3', true)) WHERE id = 1 RETURNING by",
     "23Q01", "fence: stale token 3 for public.eo (highest seen 5)", NULL, NULL, NULL},
    {"a later column sets a higher token", NULL, "4",
     "UPDATE eo SET v = length(set_config('fence.token', '6', true)) WHERE id = 1 RETURNING by",
     "", NULL, NULL, "UPDATE 1 [6]", "1:6:1 2:5:0"},
};

START_TEST(stamp_after_the_other_columns)
{
    PGconn *adm = admin();
    ok(adm, "CREATE TABLE eo (id int PRIMARY KEY, by bigint, v int);"
            "SELECT fence.protect('eo', 'by', false, 'c')");
    run_cases(adm, &ORDER, ORDER_CASES, sizeof ORDER_CASES / sizeof ORDER_CASES[0]);
    PQfinish(adm);
}
END_TEST

/* The statement's own assignment of the token column runs where it ran
 * before the trigger, relative to the other assignments: inside the stamp
 * at the end when it is inert (a constant, a column, a parameter), at its
 * own place when everything after it is inert, else the plan keeps the
 * trigger (the second version of 1.2 ran it last in every case: in the
 * first statement below, v then read token 6 instead of 10). */
static const struct {
    const char *sql;
    bool stamped;
    const char *rows;
    const char *after;
} OWN_CASES[] = {
    {"UPDATE eo SET by = length(set_config('fence.token', '10', true)),"
     " v = length(current_setting('fence.token')) WHERE id = 1 RETURNING by",
     false, "UPDATE 1 [10]", "1:10:2 2:5:0"},
    {"UPDATE eo SET by = length(set_config('fence.token', '10', true)), v = 7"
     " WHERE id = 1 RETURNING by",
     true, "UPDATE 1 [10]", "1:10:7 2:5:0"},
    {"UPDATE eo SET by = 3, v = length(current_setting('fence.token')) WHERE id = 1 RETURNING by",
     true, "UPDATE 1 [6]", "1:6:1 2:5:0"},
};

START_TEST(own_assignment_in_place)
{
    PGconn *adm = admin();
    ok(adm, "CREATE TABLE IF NOT EXISTS eo (id int PRIMARY KEY, by bigint, v int);"
            "SELECT fence.protect('eo', 'by', false, 'c')");
    for (size_t i = 0; i < sizeof OWN_CASES / sizeof OWN_CASES[0]; i++) {
        for (int w = STAMP; w <= TRIGGER; w++) {
            char what[128];
            snprintf(what, sizeof what, "own assignment case %zu (%s way)", i + 1, WAY[w]);
            ok(adm, ORDER.reset);
            PGconn *c = connect_way(NULL, (way)w);
            expect_plan(c, OWN_CASES[i].sql, w == STAMP && OWN_CASES[i].stamped, what);
            stmt_res r = write_as(c, "6", OWN_CASES[i].sql);
            expect_stmt_ok(&r, OWN_CASES[i].rows, what);
            ck_assert_msg(strcmp(text1(adm, ORDER.state), OWN_CASES[i].after) == 0,
                          "%s: eo holds '%s', expected '%s'", what, text1(adm, ORDER.state),
                          OWN_CASES[i].after);
            PQfinish(c);
        }
    }
    PQfinish(adm);
}
END_TEST

/* A writer with no USAGE on schema fence (fence.grant() gives none) and
 * the module preloaded: its UPDATEs are stamped (c_stamp is looked up in
 * the catalog, not by name through the schema) and keep the rule.  The
 * first version failed every such UPDATE with 42501 "permission denied
 * for schema fence" whenever the function's OID was not cached. */
START_TEST(writer_without_schema_usage)
{
    char name[NAME_BUF];
    char sql[512];
    PGconn *su = ext_db("nousage", name, "nu");
    snprintf(sql, sizeof sql,
             "REVOKE USAGE ON SCHEMA fence FROM PUBLIC;"
             "ALTER DATABASE %s SET session_preload_libraries = 'fence'",
             name);
    ok(su, sql);
    for (int round = 0; round < 2; round++) {
        PGconn *app = connect_as(name, g_app);
        PQsetNoticeProcessor(app, quiet_notice, NULL);
        if (round == 1) { /* any pg_proc change forgets the cached OIDs */
            ok(su, "CREATE OR REPLACE FUNCTION public.nu_touch() RETURNS int LANGUAGE sql"
                   " AS 'SELECT 1'");
        }
        expect_plan(app, "UPDATE nu SET v = v + 1 WHERE id = 1", true, "no USAGE on fence");
        stmt_res r = write_as(app, "5", "UPDATE nu SET v = v + 1 WHERE id = 1 RETURNING by");
        expect_stmt_ok(&r, "UPDATE 1 [5]", "no USAGE on fence, token 5");
        r = write_as(app, "4", "UPDATE nu SET v = v + 1 WHERE id = 1");
        expect_stmt_err(&r, "23Q01", "fence: stale token 4 for public.nu (highest seen 5)", NULL,
                   "no USAGE on fence, token 4");
        PQfinish(app);
    }
    PQfinish(su);
    drop_side_db(name);
}
END_TEST

/* A stale writer (its token lower than the stamp of the row version its
 * statement read) is refused by the stamp at once, without waiting for a
 * concurrent writer of that row; the trigger locked the row first, waited,
 * and judged the newest version: refused too when that writer raised the
 * stamp (with the newer stamp in the message), but nothing updated and
 * nothing refused when it deleted the row or moved it out of the WHERE,
 * and 40001 in REPEATABLE READ.  The stamp way is never the more
 * permissive one. */
static const rcase STALE_TRIGGER[] = {
    {"stale, stamp between the tokens", 7, UPD1, true, false, "5", UPD1 " RETURNING by", true,
     "23Q01", "fence: stale token 5 for public.rc (highest seen 10)", NULL, "1:1:10 2:0:7"},
    {"stale, the row deleted by A", 7, "DELETE FROM rc WHERE id = 1", true, false, "5",
     UPD1 " RETURNING by", true, "", NULL, "UPDATE 0", "2:0:7"},
    {"stale, the row left B's WHERE", 7, "UPDATE rc SET v = 100 WHERE id = 1", true, false, "5",
     "UPDATE rc SET v = v + 1 WHERE id = 1 AND v = 0 RETURNING by", true, "", NULL, "UPDATE 0",
     "1:100:10 2:0:7"},
    {"stale, REPEATABLE READ", 7, UPD1, true, true, "5", UPD1 " RETURNING by", true, "40001",
     NULL, NULL, "1:1:10 2:0:7"},
};
static const rcase STALE_STAMP[] = {
    {"stale, stamp between the tokens", 7, UPD1, true, false, "5", UPD1 " RETURNING by", false,
     "23Q01", "fence: stale token 5 for public.rc (highest seen 7)", NULL, "1:1:10 2:0:7"},
    {"stale, the row deleted by A", 7, "DELETE FROM rc WHERE id = 1", true, false, "5",
     UPD1 " RETURNING by", false, "23Q01", "fence: stale token 5 for public.rc (highest seen 7)",
     NULL, "2:0:7"},
    {"stale, the row left B's WHERE", 7, "UPDATE rc SET v = 100 WHERE id = 1", true, false, "5",
     "UPDATE rc SET v = v + 1 WHERE id = 1 AND v = 0 RETURNING by", false, "23Q01",
     "fence: stale token 5 for public.rc (highest seen 7)", NULL, "1:100:10 2:0:7"},
    {"stale, REPEATABLE READ", 7, UPD1, true, true, "5", UPD1 " RETURNING by", false, "23Q01",
     "fence: stale token 5 for public.rc (highest seen 7)", NULL, "1:1:10 2:0:7"},
};

START_TEST(stale_writer_refused_before_waiting)
{
    run_races(STALE_TRIGGER, STALE_STAMP, sizeof STALE_TRIGGER / sizeof STALE_TRIGGER[0]);
}
END_TEST

/* A cached plan may run under another role of the session (SET ROLE):
 * the stamp goes into a plan only while PUBLIC may EXECUTE fence.c_stamp,
 * so a role without the right never meets it.  (A statement without
 * parameters: its generic plan is used from the first EXECUTE.) */
START_TEST(cached_plan_other_role)
{
    char name[NAME_BUF];
    PGconn *su = noexec_db("nox2", name);
    stmt_res seen[2];
    char set_role[128];
    snprintf(set_role, sizeof set_role, "SET ROLE %s", g_app);
    for (int w = STAMP; w <= TRIGGER; w++) {
        force(su, "UPDATE nx SET v = 0, by = 5");
        PGconn *c = connect_way(name, (way)w);
        ok(c, "PREPARE u AS UPDATE nx SET v = v + 1 WHERE id = 1 RETURNING by");
        stmt_res r = write_as(c, "5", "EXECUTE u");
        expect_stmt_ok(&r, "UPDATE 1 [5]", WAY[w]);
        ok(c, set_role);
        seen[w] = write_as(c, "6", "EXECUTE u");
        ok(c, "RESET ROLE");
        PQfinish(c);
    }
    char ds[2048];
    char dt[2048];
    stmt_describe(&seen[STAMP], ds, sizeof ds);
    stmt_describe(&seen[TRIGGER], dt, sizeof dt);
    expect_stmt_ok(&seen[TRIGGER], "UPDATE 1 [6]", "trigger way, after SET ROLE");
    ck_assert_msg(stmt_eq(&seen[STAMP], &seen[TRIGGER]),
                  "a plan cached by the superuser, run after SET ROLE %s:\n  stamp:   %s\n"
                  "  trigger: %s",
                  g_app, ds, dt);
    PQfinish(su);
    drop_side_db(name);
}
END_TEST

static Suite *pg_stamp_suite(void)
{
    Suite *s = suite_create("pg_stamp");
    TCase *t = pg_tcase("pg_stamp");
    tcase_add_test(t, plan_carries_the_stamp);
    tcase_add_test(t, same_outcomes_both_ways);
    tcase_add_test(t, falls_back_to_the_trigger);
    tcase_add_test(t, replanned_when_triggers_change);
    tcase_add_test(t, concurrent_update_rechecked);
    tcase_add_test(t, replica_role);
    tcase_add_test(t, extension_versions);
    tcase_add_test(t, direct_calls);
    tcase_add_test(t, stamp_after_the_other_columns);
    tcase_add_test(t, own_assignment_in_place);
    tcase_add_test(t, writer_without_schema_usage);
    tcase_add_test(t, stale_writer_refused_before_waiting);
    tcase_add_test(t, cached_plan_other_role);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(pg_stamp_suite());
}
