/* pgutil.c -- the fixture and helpers the libfence_pg suites share (see
 * pgutil.h). */
#include "pgutil.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

char g_db[64];
char g_app[64];

/* ------------------------------------------------------------------ */
/* Helpers                                                              */
/* ------------------------------------------------------------------ */

/* Connect to dbname (NULL: the server's default database) as user (NULL:
 * the superuser of FENCE_TEST_PG_CONNINFO). */
PGconn *connect_as(const char *dbname, const char *user)
{
    const char *keys[4] = {"dbname", NULL, NULL, NULL};
    const char *vals[4] = {tu_env("FENCE_TEST_PG_CONNINFO"), NULL, NULL, NULL};
    int n = 1;
    if (dbname != NULL) {
        keys[n] = "dbname";
        vals[n++] = dbname;
    }
    if (user != NULL) {
        keys[n] = "user";
        vals[n++] = user;
    }
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    ck_assert_msg(c != NULL && PQstatus(c) == CONNECTION_OK, "cannot connect to PostgreSQL: %s",
                  c ? PQerrorMessage(c) : "out of memory");
    PQsetNoticeProcessor(c, NULL, NULL);
    return c;
}

void quiet_notice(void *arg, const char *msg)
{
    (void)arg;
    (void)msg;
}

PGconn *db(void)
{
    PGconn *c = connect_as(g_db, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    return c;
}

PGconn *db_app(void)
{
    PGconn *c = connect_as(g_db, g_app);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    return c;
}

fence_status note(const PGconn *c, fence_status st, outcome *o)
{
    if (o != NULL) {
        o->status = st;
        snprintf(o->sqlstate, sizeof o->sqlstate, "%s", fence_pg_sqlstate(c));
        snprintf(o->message, sizeof o->message, "%s", fence_pg_errmsg(c));
    }
    return st;
}

fence_status run(PGconn *c, const char *sql, outcome *o)
{
    PGresult *r = PQexec(c, sql);
    fence_status st = fence_pg_classify(c, r, o != NULL ? &o->stale : NULL);
    note(c, st, o);
    PQclear(r);
    return st;
}

fence_status set_tok(PGconn *c, uint64_t tok, const char *resource, outcome *o)
{
    return set_tok_h(c, tok, NULL, resource, o);
}

fence_status set_tok_h(PGconn *c, uint64_t tok, const char *holder, const char *resource,
                       outcome *o)
{
    return note(c, fence_pg_set_token(c, tok, holder, resource, o != NULL ? &o->stale : NULL),
                o);
}

fence_status advance_h(PGconn *c, uint64_t tok, const char *holder, const char *resource,
                       outcome *o)
{
    outcome mine;
    outcome *e = o != NULL ? o : &mine;
    ok(c, "BEGIN");
    fence_status st = set_tok_h(c, tok, holder, resource, e);
    ok(c, st == FENCE_OK ? "COMMIT" : "ROLLBACK");
    return st;
}

uint64_t mark_of(PGconn *c, const char *resource, char *holder)
{
    uint64_t m = 0;
    fence_status st = fence_pg_mark_holder(c, resource, &m, holder);
    ck_assert_msg(st == FENCE_OK, "fence_pg_mark_holder(%s): %s %s", resource,
                  fence_status_name(st), fence_pg_errmsg(c));
    return m;
}

void install_release(PGconn *c, const char *script, size_t len, int version)
{
    char tag[32];
    snprintf(tag, sizeof tag, "version %d.", version);
    ck_assert_uint_eq(strlen(script), len);
    ck_assert_ptr_nonnull(strstr(script, tag));
    PGresult *r = PQexec(c, script);
    ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "installing version %d: %s", version,
                  PQresultErrorMessage(r));
    PQclear(r);
    ck_assert_int_eq(PQtransactionStatus(c), PQTRANS_IDLE);
    ck_assert_int_eq(num(c, "SELECT fence.version()"), version);
}

void install_v2(PGconn *c)
{
    install_release(c, pgtest__sql_fence_v2, pgtest__sql_fence_v2_len, 2);
}

fence_status pipelined_h(PGconn *c, uint64_t tok, const char *holder, const char *resource,
                         const char *sql, outcome *e)
{
    ck_assert_int_eq(PQenterPipelineMode(c), 1);
    ck_assert_int_eq(fence_pg_send_token(c, tok, holder, resource), FENCE_OK);
    ck_assert_int_eq(PQsendQueryParams(c, sql, 0, NULL, NULL, NULL, NULL, 0), 1);
    ck_assert_int_eq(PQpipelineSync(c), 1);
    PGresult *r = PQgetResult(c);
    fence_status st_set = note(c, fence_pg_classify(c, r, &e->stale), e);
    PQclear(r);
    ck_assert_ptr_null(PQgetResult(c));
    r = PQgetResult(c);
    fence_status st = st_set == FENCE_OK ? note(c, fence_pg_classify(c, r, &e->stale), e) : st_set;
    PQclear(r);
    ck_assert_ptr_null(PQgetResult(c));
    r = PQgetResult(c);
    ck_assert_int_eq(PQresultStatus(r), PGRES_PIPELINE_SYNC);
    PQclear(r);
    ck_assert_int_eq(PQexitPipelineMode(c), 1);
    return st;
}

void ok(PGconn *c, const char *sql)
{
    outcome e;
    fence_status st = run(c, sql, &e);
    ck_assert_msg(st == FENCE_OK, "'%s' failed: %s (%s)", sql, e.message, e.sqlstate);
}

void fails(PGconn *c, const char *sql, const char *state)
{
    outcome e;
    fence_status st = run(c, sql, &e);
    ck_assert_msg(st != FENCE_OK, "'%s' succeeded; expected SQLSTATE %s", sql, state);
    ck_assert_msg(strcmp(e.sqlstate, state) == 0, "'%s': SQLSTATE %s (%s), expected %s", sql,
                  e.sqlstate, e.message, state);
}

/* The single value sql returns, as a number. */
long long num(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1,
                  "'%s': %s", sql, PQresultErrorMessage(r));
    ck_assert_msg(!PQgetisnull(r, 0, 0), "'%s' returned NULL", sql);
    long long v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return v;
}

/* The single value sql returns, as text (static buffer). */
const char *text1(PGconn *c, const char *sql)
{
    static char buf[512];
    PGresult *r = PQexec(c, sql);
    ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1,
                  "'%s': %s", sql, PQresultErrorMessage(r));
    snprintf(buf, sizeof buf, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return buf;
}

/* BEGIN, set the token with the C API (optionally advancing resource). */
void begin_tok(PGconn *c, uint64_t tok, const char *resource)
{
    outcome e;
    ok(c, "BEGIN");
    fence_status st = set_tok(c, tok, resource, &e);
    ck_assert_msg(st == FENCE_OK, "set_token %" PRIu64 ": %s %s", tok, fence_status_name(st),
                  e.message);
}

/* One transaction with token tok running sql; returns its status (the
 * transaction is committed on success, rolled back otherwise). */
fence_status write_tok(PGconn *c, uint64_t tok, const char *sql, outcome *e)
{
    begin_tok(c, tok, NULL);
    fence_status st = run(c, sql, e);
    ok(c, st == FENCE_OK ? "COMMIT" : "ROLLBACK");
    return st;
}

/* Like write_tok but the token is the raw setting value (NULL: none). */
fence_status write_raw(PGconn *c, const char *raw, const char *sql, outcome *e)
{
    ok(c, "BEGIN");
    if (raw != NULL) {
        char set[256];
        char *lit = PQescapeLiteral(c, raw, strlen(raw));
        snprintf(set, sizeof set,
                 "SELECT pg_catalog.set_config('fence.token', %s, true),"
                 " pg_catalog.set_config('fence.xact', pg_catalog.pg_current_xact_id()::text, true)",
                 lit);
        PQfreemem(lit);
        ok(c, set);
    }
    fence_status st = run(c, sql, e);
    ok(c, st == FENCE_OK ? "COMMIT" : "ROLLBACK");
    return st;
}

/* A protected table NAME(id int primary key, v int, by bigint) with rows
 * 1..3, unstamped. */
void make_table(PGconn *c, const char *name)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "CREATE TABLE %s (id int PRIMARY KEY, v int, by bigint);"
             "INSERT INTO %s SELECT g, 0, 0 FROM generate_series(1, 3) g;"
             "SELECT fence.protect('%s')",
             name, name, name);
    ok(c, sql);
}

/* ------------------------------------------------------------------ */
/* Fixture: one database and one application role per run               */
/* ------------------------------------------------------------------ */

const char *pg_impl(void)
{
    const char *v = getenv("FENCE_TEST_PG_IMPL");
    return v != NULL && strcmp(v, "c") == 0 ? "c" : "plpgsql";
}

bool pg_impl_wanted(const char *impl)
{
    const char *v = getenv("FENCE_TEST_PG_IMPLS");
    if (v == NULL || v[0] == '\0') {
        return true;
    }
    size_t n = strlen(impl);
    for (const char *p = v; (p = strstr(p, impl)) != NULL; p += n) {
        bool starts = p == v || p[-1] == ',' || p[-1] == ' ';
        bool ends = p[n] == '\0' || p[n] == ',' || p[n] == ' ';
        if (starts && ends) {
            return true;
        }
    }
    return false;
}

bool pg_impl_note(const char *suite, const char *what)
{
    if (pg_impl_wanted("c")) {
        return true;
    }
    fprintf(stderr, "# %s: the C guard is left out (FENCE_TEST_PG_IMPLS=%s): %s\n", suite,
            getenv("FENCE_TEST_PG_IMPLS"), what);
    return false;
}

void create_extension(PGconn *c)
{
    outcome e;
    fence_status st = run(c, "CREATE EXTENSION fence", &e);
    ck_assert_msg(st == FENCE_OK,
                  "CREATE EXTENSION fence: %s (%s); is the test PostgreSQL offering it "
                  "(scripts/with-servers with FENCE_PGEXT_DIR=BUILD/lib/pgext)?",
                  e.message, e.sqlstate);
    ck_assert_int_eq(num(c, "SELECT fence.c_version()"), 2);
}

void setup_db(void)
{
    unsigned r = (unsigned)time(NULL) ^ ((unsigned)getpid() << 16);
    snprintf(g_db, sizeof g_db, "fence_test_%d_%08x", (int)getpid(), r);
    snprintf(g_app, sizeof g_app, "fence_app_%d_%08x", (int)getpid(), r);
    PGconn *c = connect_as(NULL, NULL);
    char sql[256];
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", g_db);
    ok(c, sql);
    snprintf(sql, sizeof sql, "CREATE ROLE %s LOGIN", g_app);
    ok(c, sql);
    PQfinish(c);

    c = db();
    for (int i = 0; i < 2; i++) { /* idempotent: twice */
        fence_status st = fence_pg_install(c);
        ck_assert_msg(st == FENCE_OK, "install #%d: %s", i + 1, fence_pg_errmsg(c));
    }
    if (strcmp(pg_impl(), "c") == 0) {
        create_extension(c);
    }
    snprintf(sql, sizeof sql, "GRANT USAGE, CREATE ON SCHEMA public TO %s", g_app);
    ok(c, sql);
    PQfinish(c);
}

/* Drop every database or role whose name is prefix or starts with
 * prefix + "_" (what= "DATABASE" or "ROLE"). */
static void drop_all(PGconn *c, const char *what, const char *prefix)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT n FROM (SELECT datname::text AS n FROM pg_database WHERE '%s' = 'DATABASE'"
             " UNION ALL SELECT rolname::text FROM pg_roles WHERE '%s' = 'ROLE') x"
             " WHERE n = '%s' OR starts_with(n, '%s_') ORDER BY length(n) DESC",
             what, what, prefix, prefix);
    PGresult *r = PQexec(c, sql);
    ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
    for (int i = 0; i < PQntuples(r); i++) {
        snprintf(sql, sizeof sql, "DROP %s IF EXISTS %s%s", what, PQgetvalue(r, i, 0),
                 strcmp(what, "DATABASE") == 0 ? " WITH (FORCE)" : "");
        ok(c, sql);
    }
    PQclear(r);
}

void teardown_db(void)
{
    PGconn *c = connect_as(NULL, NULL);
    drop_all(c, "DATABASE", g_db); /* first: they hold the roles' objects */
    drop_all(c, "ROLE", g_app);
    PQfinish(c);
}

/* A database of this run named <g_db>_<suffix>, owned by owner (NULL: the
 * superuser); its name goes to out (NAME_BUF bytes). */
void side_db(const char *suffix, const char *owner, char *out)
{
    int w = snprintf(out, NAME_BUF, "%s_%s", g_db, suffix);
    ck_assert(w > 0 && w < 64);
    PGconn *c = connect_as(NULL, NULL);
    char sql[512];
    snprintf(sql, sizeof sql, "CREATE DATABASE %s%s%s", out, owner ? " OWNER " : "",
             owner ? owner : "");
    ok(c, sql);
    PQfinish(c);
}

void drop_side_db(const char *name)
{
    PGconn *c = connect_as(NULL, NULL);
    char sql[256];
    snprintf(sql, sizeof sql, "DROP DATABASE %s WITH (FORCE)", name);
    ok(c, sql);
    PQfinish(c);
}

/* A login role of this run named <g_app>_<suffix>; its name goes to out. */
void side_role(const char *suffix, char *out)
{
    int w = snprintf(out, NAME_BUF, "%s_%s", g_app, suffix);
    ck_assert(w > 0 && w < 64);
    PGconn *c = connect_as(NULL, NULL);
    char sql[256];
    snprintf(sql, sizeof sql, "CREATE ROLE %s LOGIN", out);
    ok(c, sql);
    PQfinish(c);
}

void collect_notice(void *arg, const PGresult *r)
{
    notes *n = arg;
    size_t len = strlen(n->text);
    snprintf(n->text + len, sizeof n->text - len, "%s", PQresultErrorMessage(r));
}

TCase *pg_tcase(const char *name)
{
    TCase *t = tcase_create(name);
    tcase_add_unchecked_fixture(t, setup_db, teardown_db);
    tcase_set_timeout(t, 30);
    return t;
}

/* ------------------------------------------------------------------ */
/* A statement in flight                                                 */
/* ------------------------------------------------------------------ */

bool pg_busy(PGconn *c)
{
    ck_assert_msg(PQconsumeInput(c) == 1, "PQconsumeInput: %s", PQerrorMessage(c));
    return PQisBusy(c) != 0;
}

const char *pg_wait_event(PGconn *watch, PGconn *c)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT COALESCE((SELECT COALESCE(wait_event_type, '') || '/' ||"
             " COALESCE(wait_event, '') FROM pg_stat_activity WHERE pid = %d), 'gone/')",
             PQbackendPID(c));
    return text1(watch, sql);
}

bool pg_held(PGconn *watch, PGconn *c, int block_ms)
{
    int64_t start = tu_now_ms();
    for (;;) {
        if (!pg_busy(c)) {
            return false;
        }
        if (strncmp(pg_wait_event(watch, c), "Lock/", 5) == 0) {
            break;
        }
        if (tu_now_ms() > start + 3000) {
            return false;
        }
        tu_sleep_ms(5);
    }
    while (tu_now_ms() < start + block_ms) {
        if (!pg_busy(c)) {
            return false;
        }
        tu_sleep_ms(10);
    }
    return pg_busy(c) && strncmp(pg_wait_event(watch, c), "Lock/", 5) == 0;
}

PGresult *pg_answer(PGconn *c, const char *what, int answer_ms)
{
    int64_t deadline = tu_now_ms() + answer_ms;
    while (pg_busy(c)) {
        ck_assert_msg(tu_now_ms() < deadline, "%s: no answer within %d ms once released", what,
                      answer_ms);
        tu_sleep_ms(2);
    }
    PGresult *first = PQgetResult(c);
    ck_assert_ptr_nonnull(first);
    PGresult *r;
    while ((r = PQgetResult(c)) != NULL) {
        PQclear(r);
    }
    return first;
}

static int cmp_tuple(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

#define MAX_TUPLES 64

void stmt_take(PGresult *r, stmt_res *o)
{
    memset(o, 0, sizeof *o);
    ExecStatusType s = PQresultStatus(r);
    if (s == PGRES_TUPLES_OK || s == PGRES_COMMAND_OK) {
        char tup[MAX_TUPLES][128];
        int n = PQntuples(r) < MAX_TUPLES ? PQntuples(r) : MAX_TUPLES;
        o->ok = true;
        for (int i = 0; i < n; i++) {
            size_t len = 0;
            tup[i][0] = '\0';
            for (int j = 0; j < PQnfields(r) && len < sizeof tup[i]; j++) {
                len += (size_t)snprintf(tup[i] + len, sizeof tup[i] - len, "%s%s",
                                        j > 0 ? "," : "",
                                        PQgetisnull(r, i, j) ? "null" : PQgetvalue(r, i, j));
            }
        }
        qsort(tup, (size_t)n, sizeof tup[0], cmp_tuple);
        size_t len = (size_t)snprintf(o->rows, sizeof o->rows, "%s", PQcmdStatus(r));
        for (int i = 0; i < n && len < sizeof o->rows; i++) {
            len += (size_t)snprintf(o->rows + len, sizeof o->rows - len, " [%s]", tup[i]);
        }
        return;
    }
    const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    const char *m = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
    const char *d = PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL);
    const char *h = PQresultErrorField(r, PG_DIAG_MESSAGE_HINT);
    const char *x = PQresultErrorField(r, PG_DIAG_CONTEXT);
    snprintf(o->state, sizeof o->state, "%s", st != NULL ? st : "?????");
    snprintf(o->msg, sizeof o->msg, "%s", m != NULL ? m : PQresultErrorMessage(r));
    snprintf(o->detail, sizeof o->detail, "%s", d != NULL ? d : "");
    snprintf(o->hint, sizeof o->hint, "%s", h != NULL ? h : "");
    snprintf(o->context, sizeof o->context, "%s", x != NULL ? x : "");
}

stmt_res stmt_exec(PGconn *c, const char *sql)
{
    stmt_res o;
    PGresult *r = PQexec(c, sql);
    stmt_take(r, &o);
    PQclear(r);
    return o;
}

bool stmt_eq(const stmt_res *a, const stmt_res *b)
{
    return a->ok == b->ok && strcmp(a->state, b->state) == 0 && strcmp(a->msg, b->msg) == 0 &&
           strcmp(a->detail, b->detail) == 0 && strcmp(a->hint, b->hint) == 0 &&
           strcmp(a->rows, b->rows) == 0;
}

void stmt_describe(const stmt_res *r, char *out, size_t n)
{
    if (r->ok) {
        snprintf(out, n, "ok: %s", r->rows);
    } else {
        snprintf(out, n, "%s \"%s\" DETAIL \"%s\" HINT \"%s\"", r->state, r->msg, r->detail,
                 r->hint);
    }
}

void expect_stmt_err(const stmt_res *o, const char *state, const char *msg, const char *detail,
                     const char *what)
{
    char d[2048];
    stmt_describe(o, d, sizeof d);
    ck_assert_msg(!o->ok && strcmp(o->state, state) == 0, "%s: %s; expected SQLSTATE %s", what, d,
                  state);
    ck_assert_msg(msg == NULL || strcmp(o->msg, msg) == 0, "%s: %s; expected the message \"%s\"",
                  what, d, msg);
    ck_assert_msg(detail == NULL || strcmp(o->detail, detail) == 0,
                  "%s: %s; expected the DETAIL \"%s\"", what, d, detail);
}

void expect_stmt_ok(const stmt_res *o, const char *rows, const char *what)
{
    char d[2048];
    stmt_describe(o, d, sizeof d);
    ck_assert_msg(o->ok, "%s: %s; expected success", what, d);
    ck_assert_msg(rows == NULL || strcmp(o->rows, rows) == 0, "%s: %s; expected \"%s\"", what, d,
                  rows);
}
