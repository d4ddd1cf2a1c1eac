/*
 * test_pg.c -- sql/postgres/fence.sql and libfence_pg against a real
 * PostgreSQL (scripts/with-servers --pg).  Each run creates its own
 * database (installs fence.sql into it twice) and its own application role,
 * and drops both at the end.
 */
#include "fence_pg.h"
#include "testutil.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char g_db[64];   /* this run's database */
static char g_app[64];  /* this run's non-superuser role */

/* ------------------------------------------------------------------ */
/* Helpers                                                              */
/* ------------------------------------------------------------------ */

/* Connect to dbname (NULL: the server's default database) as user (NULL:
 * the superuser of FENCE_TEST_PG_CONNINFO). */
static PGconn *connect_as(const char *dbname, const char *user)
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

static void quiet_notice(void *arg, const char *msg)
{
    (void)arg;
    (void)msg;
}

static PGconn *db(void)
{
    PGconn *c = connect_as(g_db, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    return c;
}

static PGconn *db_app(void)
{
    PGconn *c = connect_as(g_db, g_app);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    return c;
}

/* Run sql; return the fence status of its result, filling *e. */
static int run(PGconn *c, const char *sql, fence_pg_error *e)
{
    PGresult *r = PQexec(c, sql);
    int st = fence_pg_result(r, e);
    PQclear(r);
    return st;
}

/* Run sql and require success. */
static void ok(PGconn *c, const char *sql)
{
    fence_pg_error e;
    int st = run(c, sql, &e);
    ck_assert_msg(st == FENCE_OK, "'%s' failed: %s (%s)", sql, e.message, e.sqlstate);
}

/* Run sql and require it to fail with SQLSTATE state. */
static void fails(PGconn *c, const char *sql, const char *state)
{
    fence_pg_error e;
    int st = run(c, sql, &e);
    ck_assert_msg(st != FENCE_OK, "'%s' succeeded; expected SQLSTATE %s", sql, state);
    ck_assert_msg(strcmp(e.sqlstate, state) == 0, "'%s': SQLSTATE %s (%s), expected %s", sql,
                  e.sqlstate, e.message, state);
}

/* The single value sql returns, as a number. */
static long long num(PGconn *c, const char *sql)
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
static const char *text1(PGconn *c, const char *sql)
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
static void begin_tok(PGconn *c, uint64_t tok, const char *resource)
{
    fence_pg_error e;
    ok(c, "BEGIN");
    int st = fence_pg_set_token(c, tok, resource, &e);
    ck_assert_msg(st == FENCE_OK, "set_token %" PRIu64 ": %s %s", tok, fence_status_name(st),
                  e.message);
}

/* One transaction with token tok running sql; returns its status (the
 * transaction is committed on success, rolled back otherwise). */
static int write_tok(PGconn *c, uint64_t tok, const char *sql, fence_pg_error *e)
{
    begin_tok(c, tok, NULL);
    int st = run(c, sql, e);
    ok(c, st == FENCE_OK ? "COMMIT" : "ROLLBACK");
    return st;
}

/* Like write_tok but the token is the raw setting value (NULL: none). */
static int write_raw(PGconn *c, const char *raw, const char *sql, fence_pg_error *e)
{
    ok(c, "BEGIN");
    if (raw != NULL) {
        char set[256];
        char *lit = PQescapeLiteral(c, raw, strlen(raw));
        snprintf(set, sizeof set, "SELECT pg_catalog.set_config('fence.token', %s, true)", lit);
        PQfreemem(lit);
        ok(c, set);
    }
    int st = run(c, sql, e);
    ok(c, st == FENCE_OK ? "COMMIT" : "ROLLBACK");
    return st;
}

/* A protected table NAME(id int primary key, v int, by bigint) with rows
 * 1..3, unstamped. */
static void make_table(PGconn *c, const char *name)
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

static void setup_db(void)
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
        fence_pg_error e;
        int st = fence_pg_install(c, &e);
        ck_assert_msg(st == FENCE_OK, "install #%d: %s", i + 1, e.message);
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

static void teardown_db(void)
{
    PGconn *c = connect_as(NULL, NULL);
    drop_all(c, "DATABASE", g_db); /* first: they hold the roles' objects */
    drop_all(c, "ROLE", g_app);
    PQfinish(c);
}

/* Names of side databases and roles: under 64 bytes, PostgreSQL's limit. */
#define NAME_BUF 128

/* A database of this run named <g_db>_<suffix>, owned by owner (NULL: the
 * superuser); its name goes to out (NAME_BUF bytes). */
static void side_db(const char *suffix, const char *owner, char *out)
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

static void drop_side_db(const char *name)
{
    PGconn *c = connect_as(NULL, NULL);
    char sql[256];
    snprintf(sql, sizeof sql, "DROP DATABASE %s WITH (FORCE)", name);
    ok(c, sql);
    PQfinish(c);
}

/* A login role of this run named <g_app>_<suffix>; its name goes to out. */
static void side_role(const char *suffix, char *out)
{
    int w = snprintf(out, NAME_BUF, "%s_%s", g_app, suffix);
    ck_assert(w > 0 && w < 64);
    PGconn *c = connect_as(NULL, NULL);
    char sql[256];
    snprintf(sql, sizeof sql, "CREATE ROLE %s LOGIN", out);
    ok(c, sql);
    PQfinish(c);
}

/* Notices (WARNINGs) a connection received, concatenated. */
typedef struct notes {
    char text[8192];
} notes;

static void collect_notice(void *arg, const PGresult *r)
{
    notes *n = arg;
    size_t len = strlen(n->text);
    snprintf(n->text + len, sizeof n->text - len, "%s", PQresultErrorMessage(r));
}

/* ------------------------------------------------------------------ */
/* Install                                                              */
/* ------------------------------------------------------------------ */

START_TEST(install_idempotent_and_versioned)
{
    PGconn *c = db();
    ck_assert_int_eq(num(c, "SELECT fence.version()"), 2);
    ck_assert_int_eq(num(c, "SELECT version FROM fence.meta"), 2);
    fence_pg_error e;
    ck_assert_int_eq(fence_pg_install(c, &e), FENCE_OK); /* third time */
    ck_assert_int_eq(fence_pg_install(c, NULL), FENCE_OK);

    size_t len = 0;
    const char *sql = fence_pg_install_sql(&len);
    ck_assert_ptr_nonnull(sql);
    ck_assert_uint_eq(strlen(sql), len);
    ck_assert_ptr_nonnull(strstr(sql, "CREATE SCHEMA fence"));
    ck_assert_ptr_nonnull(strstr(sql, "23Q01"));
    ck_assert_ptr_eq(fence_pg_install_sql(NULL), sql);

    /* Refused inside a transaction block (the script commits its own). */
    ok(c, "BEGIN");
    ck_assert_int_eq(fence_pg_install(c, &e), FENCE_ESTATE);
    ck_assert_int_eq(e.status, FENCE_ESTATE);
    ck_assert(strlen(e.message) > 0);
    ok(c, "ROLLBACK");

    /* A newer installed version is never downgraded; the failed install
     * leaves the connection idle and the schema as it was. */
    ok(c, "UPDATE fence.meta SET version = 99");
    ck_assert_int_eq(fence_pg_install(c, &e), FENCE_EDB);
    ck_assert_ptr_nonnull(strstr(e.message, "downgrade"));
    ck_assert_int_eq(PQtransactionStatus(c), PQTRANS_IDLE);
    ck_assert_int_eq(num(c, "SELECT version FROM fence.meta"), 99);
    ok(c, "UPDATE fence.meta SET version = 2");
    PQfinish(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Per-row                                                              */
/* ------------------------------------------------------------------ */

START_TEST(row_stale_update_delete_insert)
{
    PGconn *c = db();
    fence_pg_error e;
    make_table(c, "rs");
    ck_assert_int_eq(write_tok(c, 34, "UPDATE rs SET v = 1, by = 34 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM rs WHERE id = 1"), 34);

    /* Stale UPDATE: 23Q01, mapped to FENCE_STALE with both tokens. */
    ck_assert_int_eq(write_tok(c, 33, "UPDATE rs SET v = 2, by = 33 WHERE id = 1", &e),
                     FENCE_STALE);
    ck_assert_str_eq(e.sqlstate, "23Q01");
    ck_assert_uint_eq(e.offered, 33);
    ck_assert_uint_eq(e.highest, 34);
    ck_assert_int_eq(e.is_resource, 0);
    ck_assert_str_eq(e.object, "public.rs");
    ck_assert_str_eq(e.message, "fence: stale token 33 for public.rs (highest seen 34)");

    /* Stale DELETE. */
    ck_assert_int_eq(write_tok(c, 33, "DELETE FROM rs WHERE id = 1", &e), FENCE_STALE);
    ck_assert_uint_eq(e.offered, 33);
    ck_assert_uint_eq(e.highest, 34);

    /* Stale INSERT: an upsert onto the existing row. */
    ck_assert_int_eq(write_tok(c, 33,
                               "INSERT INTO rs (id, v, by) VALUES (1, 3, 33) "
                               "ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, by = EXCLUDED.by",
                               &e),
                     FENCE_STALE);
    ck_assert_uint_eq(e.offered, 33);
    ck_assert_uint_eq(e.highest, 34);
    ck_assert_int_eq(num(c, "SELECT by FROM rs WHERE id = 1"), 34);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM rs"), 3);

    /* Equal admitted (many writes by one holder), higher admitted. */
    ck_assert_int_eq(write_tok(c, 34, "UPDATE rs SET v = v + 1 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(write_tok(c, 34, "UPDATE rs SET v = v + 1 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT v FROM rs WHERE id = 1"), 3);
    ck_assert_int_eq(write_tok(c, 35,
                               "INSERT INTO rs (id, v, by) VALUES (1, 9, 35) "
                               "ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, by = EXCLUDED.by",
                               &e),
                     FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM rs WHERE id = 1"), 35);
    ck_assert_int_eq(write_tok(c, 36, "INSERT INTO rs (id, v, by) VALUES (7, 7, 36)", &e),
                     FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM rs WHERE id = 7"), 36);
    ck_assert_int_eq(write_tok(c, 36, "DELETE FROM rs WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM rs WHERE id = 1"), 0);
    /* A multi-row statement stamps every row and fails as a whole. */
    ck_assert_int_eq(write_tok(c, 40, "UPDATE rs SET v = 0 WHERE id IN (2, 3)", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM rs WHERE fence_token = 40"), 2);
    ck_assert_int_eq(write_tok(c, 39, "UPDATE rs SET v = 5", &e), FENCE_STALE);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM rs WHERE v = 5"), 0);
    PQfinish(c);
}
END_TEST

START_TEST(row_client_cannot_write_the_column)
{
    PGconn *c = db();
    fence_pg_error e;
    make_table(c, "cw");
    ck_assert_int_eq(write_tok(c, 10, "UPDATE cw SET v = 1 WHERE id = 1", &e), FENCE_OK);
    /* Written values are overwritten with the writer's token. */
    ck_assert_int_eq(write_tok(c, 10, "UPDATE cw SET fence_token = 1000 WHERE id = 1", &e),
                     FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM cw WHERE id = 1"), 10);
    ck_assert_int_eq(write_tok(c, 11, "UPDATE cw SET fence_token = 0 WHERE id = 1", &e),
                     FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM cw WHERE id = 1"), 11);
    ck_assert_int_eq(write_tok(c, 12, "INSERT INTO cw (id, fence_token) VALUES (9, 999)", &e),
                     FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM cw WHERE id = 9"), 12);
    /* A stale writer that writes the column itself is still stale. */
    ck_assert_int_eq(write_tok(c, 5, "UPDATE cw SET fence_token = 99999, v = 5 WHERE id = 1", &e),
                     FENCE_STALE);
    ck_assert_int_eq(write_tok(c, 5, "UPDATE cw SET fence_token = 11, v = 5 WHERE id = 1", &e),
                     FENCE_STALE);
    /* Without a token, writing the column does not help either. */
    ck_assert_int_eq(write_raw(c, NULL, "UPDATE cw SET fence_token = 11 WHERE id = 1", &e),
                     FENCE_ENOTOKEN);
    ck_assert_int_eq(write_raw(c, NULL, "INSERT INTO cw (id, fence_token) VALUES (20, 50)", &e),
                     FENCE_ENOTOKEN);
    ck_assert_int_eq(num(c, "SELECT v FROM cw WHERE id = 1"), 1);
    PQfinish(c);
}
END_TEST

START_TEST(row_bad_tokens_rejected)
{
    static const char *const bad[] = {
        NULL, "", "abc", "-1", "0", "1.5", " 7", "7 ", "007", "+7", "1e3", "0x10",
        "9223372036854775808", "99999999999999999999", "18446744073709551616",
    };
    PGconn *c = db();
    fence_pg_error e;
    make_table(c, "bt");
    static const char *const writes[] = {
        "UPDATE bt SET v = 1 WHERE id = 1",
        "DELETE FROM bt WHERE id = 2",
        "INSERT INTO bt (id) VALUES (50)",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (size_t w = 0; w < 3; w++) {
            int st = write_raw(c, bad[i], writes[w], &e);
            ck_assert_msg(st == FENCE_ENOTOKEN, "token '%s' with '%s': %s %s",
                          bad[i] ? bad[i] : "(none)", writes[w], fence_status_name(st),
                          e.message);
            ck_assert_str_eq(e.sqlstate, "23Q02");
            ck_assert_msg(strncmp(e.message, "fence: ", 7) == 0 &&
                              strstr(e.message, "public.bt") != NULL,
                          "unclear message: %s", e.message);
            ck_assert_msg(strstr(e.message, "invalid input") == NULL, "cast error leaked: %s",
                          e.message);
        }
    }
    ck_assert_int_eq(num(c, "SELECT count(*) FROM bt WHERE v = 0"), 3);
    /* The largest valid token is accepted. */
    ck_assert_int_eq(write_raw(c, "9223372036854775807", "UPDATE bt SET v = 1 WHERE id = 1", &e),
                     FENCE_OK);
    /* current_token() parses the same way. */
    ck_assert_int_eq(write_raw(c, "1.5", "SELECT fence.current_token()", &e), FENCE_ENOTOKEN);
    ck_assert_int_eq(write_raw(c, "77", "SELECT fence.current_token()", &e), FENCE_OK);
    /* advance refuses tokens <= 0. */
    ck_assert_int_eq(run(c, "SELECT fence.advance('bt', 0)", &e), FENCE_ENOTOKEN);
    ck_assert_int_eq(run(c, "SELECT fence.advance('bt', -5)", &e), FENCE_ENOTOKEN);
    ck_assert_int_eq(run(c, "SELECT fence.advance('bt', NULL)", &e), FENCE_ENOTOKEN);
    ck_assert_int_eq(run(c, "SELECT fence.advance('', 5)", &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "22023");
    PQfinish(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Two sessions, tokens 33 and 34, every interleaving                   */
/* ------------------------------------------------------------------ */

/* A statement (or a set_token) run on its own thread, for the cases where
 * one session blocks on the other's lock. */
typedef struct job {
    PGconn *c;
    const char *sql;      /* NULL: fence_pg_set_token(c, tok, resource) */
    uint64_t tok;
    const char *resource;
    int status;
    fence_pg_error err;
    pthread_t th;
} job;

static void *job_main(void *arg)
{
    job *j = arg;
    if (j->sql == NULL) {
        j->status = fence_pg_set_token(j->c, j->tok, j->resource, &j->err);
    } else {
        PGresult *r = PQexec(j->c, j->sql);
        j->status = fence_pg_result(r, &j->err);
        PQclear(r);
    }
    return NULL;
}

static void job_start(job *j)
{
    ck_assert_int_eq(pthread_create(&j->th, NULL, job_main, j), 0);
}

/* Join within timeout_ms; fails the test if the job is still running. */
static void job_join(job *j, int timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    int rc = pthread_timedjoin_np(j->th, NULL, &ts);
    ck_assert_msg(rc == 0, "the blocked statement did not finish within %d ms", timeout_ms);
}

/* Wait (bounded) until the backend of c is waiting on a lock. */
static void wait_blocked(PGconn *watch, PGconn *c)
{
    char sql[160];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_stat_activity WHERE pid = %d AND wait_event_type = 'Lock'",
             PQbackendPID(c));
    int64_t end = tu_now_ms() + 5000;
    while (num(watch, sql) != 1) {
        ck_assert_msg(tu_now_ms() < end, "session never blocked on the row lock");
        tu_sleep_ms(2);
    }
}

/* The interleavings.  mode 0: per-row (protected table, token via
 * set_token); mode 1: per-resource (plain table, fence.advance on a
 * resource).  Each returns after checking that the row ends up written by
 * 34 and stamped 34 (or the resource's mark is 34). */
enum { ROW = 0, RES = 1 };

typedef struct pair {
    PGconn *a, *b, *watch; /* a: token 33, b: token 34 */
    char table[64];
    char resource[64];
    int mode;
} pair;

static void pair_open(pair *p, int mode, const char *name)
{
    p->mode = mode;
    p->a = db();
    p->b = db();
    p->watch = db();
    snprintf(p->table, sizeof p->table, "%s", name);
    snprintf(p->resource, sizeof p->resource, "res/%s", name);
    char sql[256];
    snprintf(sql, sizeof sql, "CREATE TABLE %s (id int PRIMARY KEY, by bigint)", name);
    ok(p->watch, sql);
    snprintf(sql, sizeof sql, "INSERT INTO %s VALUES (1, 0)", name);
    ok(p->watch, sql);
    if (mode == ROW) {
        snprintf(sql, sizeof sql, "SELECT fence.protect('%s')", name);
        ok(p->watch, sql);
    }
}

static void pair_close(pair *p)
{
    PQfinish(p->a);
    PQfinish(p->b);
    PQfinish(p->watch);
}

static void pair_begin(pair *p, PGconn *c, uint64_t tok)
{
    ok(c, "BEGIN");
    fence_pg_error e;
    /* Per-resource: token set here, fence.advance at the write. */
    int st = fence_pg_set_token(c, tok, NULL, &e);
    ck_assert_msg(st == FENCE_OK, "%s", e.message);
    (void)p;
}

/* The write of the token holder: advance (per-resource) + update. */
static int pair_write(pair *p, PGconn *c, uint64_t tok, fence_pg_error *e)
{
    char sql[256];
    if (p->mode == RES) {
        int st = fence_pg_set_token(c, tok, p->resource, e);
        if (st != FENCE_OK) {
            return st;
        }
    }
    snprintf(sql, sizeof sql, "UPDATE %s SET by = %" PRIu64 " WHERE id = 1", p->table, tok);
    return run(c, sql, e);
}

static void pair_end(PGconn *c, int st)
{
    ok(c, st == FENCE_OK ? "COMMIT" : "ROLLBACK");
}

static void pair_check(pair *p)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT by FROM %s WHERE id = 1", p->table);
    ck_assert_int_eq(num(p->watch, sql), 34);
    if (p->mode == ROW) {
        snprintf(sql, sizeof sql, "SELECT fence_token FROM %s WHERE id = 1", p->table);
        ck_assert_int_eq(num(p->watch, sql), 34);
    } else {
        uint64_t mark = 0;
        fence_pg_error e;
        ck_assert_int_eq(fence_pg_mark(p->watch, p->resource, &mark, &e), FENCE_OK);
        ck_assert_uint_eq(mark, 34);
    }
}

static void expect_stale(int st, const fence_pg_error *e, const pair *p)
{
    ck_assert_msg(st == FENCE_STALE, "33 was not rejected: %s %s", fence_status_name(st),
                  e->message);
    ck_assert_uint_eq(e->offered, 33);
    ck_assert_uint_eq(e->highest, 34);
    ck_assert_int_eq(e->is_resource, p->mode == RES);
    if (p->mode == RES) {
        ck_assert_str_eq(e->object, p->resource);
    }
}

/* 33 first (begin, write, commit), then 34. */
static void interleave_sequential(int mode, const char *name)
{
    pair p;
    fence_pg_error e;
    pair_open(&p, mode, name);
    pair_begin(&p, p.a, 33);
    int st = pair_write(&p, p.a, 33, &e);
    ck_assert_msg(st == FENCE_OK, "%s", e.message);
    pair_end(p.a, st);
    pair_begin(&p, p.b, 34);
    st = pair_write(&p, p.b, 34, &e);
    ck_assert_msg(st == FENCE_OK, "%s", e.message);
    pair_end(p.b, st);
    pair_check(&p);
    pair_close(&p);
}

/* 34 first, then 33: rejected. */
static void interleave_reversed(int mode, const char *name)
{
    pair p;
    fence_pg_error e;
    pair_open(&p, mode, name);
    pair_begin(&p, p.b, 34);
    int st = pair_write(&p, p.b, 34, &e);
    ck_assert_msg(st == FENCE_OK, "%s", e.message);
    pair_end(p.b, st);
    pair_begin(&p, p.a, 33);
    st = pair_write(&p, p.a, 33, &e);
    expect_stale(st, &e, &p);
    pair_end(p.a, st);
    pair_check(&p);
    pair_close(&p);
}

/* 33 begins, 34 begins, 34 writes and commits, 33 writes: rejected. */
static void interleave_overlapping(int mode, const char *name)
{
    pair p;
    fence_pg_error e;
    pair_open(&p, mode, name);
    pair_begin(&p, p.a, 33);
    pair_begin(&p, p.b, 34);
    int st = pair_write(&p, p.b, 34, &e);
    ck_assert_msg(st == FENCE_OK, "%s", e.message);
    pair_end(p.b, st);
    st = pair_write(&p, p.a, 33, &e);
    expect_stale(st, &e, &p);
    pair_end(p.a, st);
    pair_check(&p);
    pair_close(&p);
}

/* 33 writes; 34 writes and blocks on the lock; 33 commits; 34 goes on and
 * commits. */
static void interleave_blocking(int mode, const char *name)
{
    pair p;
    fence_pg_error e;
    pair_open(&p, mode, name);
    pair_begin(&p, p.a, 33);
    int st = pair_write(&p, p.a, 33, &e);
    ck_assert_msg(st == FENCE_OK, "%s", e.message);

    pair_begin(&p, p.b, 34);
    char sql[256];
    snprintf(sql, sizeof sql, "UPDATE %s SET by = 34 WHERE id = 1", p.table);
    job j = {.c = p.b, .sql = mode == ROW ? sql : NULL, .tok = 34, .resource = p.resource};
    job_start(&j);
    wait_blocked(p.watch, p.b);
    pair_end(p.a, FENCE_OK);
    job_join(&j, 5000);
    ck_assert_msg(j.status == FENCE_OK, "%s", j.err.message);
    if (mode == RES) {
        ck_assert_int_eq(run(p.b, sql, &e), FENCE_OK);
    }
    pair_end(p.b, FENCE_OK);
    pair_check(&p);
    pair_close(&p);
}

/* 34 writes; 33 writes and blocks; 34 commits; 33 is rejected. */
static void interleave_blocking_stale(int mode, const char *name)
{
    pair p;
    fence_pg_error e;
    pair_open(&p, mode, name);
    pair_begin(&p, p.b, 34);
    int st = pair_write(&p, p.b, 34, &e);
    ck_assert_msg(st == FENCE_OK, "%s", e.message);

    pair_begin(&p, p.a, 33);
    char sql[256];
    snprintf(sql, sizeof sql, "UPDATE %s SET by = 33 WHERE id = 1", p.table);
    job j = {.c = p.a, .sql = mode == ROW ? sql : NULL, .tok = 33, .resource = p.resource};
    job_start(&j);
    wait_blocked(p.watch, p.a);
    pair_end(p.b, FENCE_OK);
    job_join(&j, 5000);
    expect_stale(j.status, &j.err, &p);
    pair_end(p.a, j.status);
    pair_check(&p);
    pair_close(&p);
}

START_TEST(row_interleavings)
{
    interleave_sequential(ROW, "il_row_seq");
    interleave_reversed(ROW, "il_row_rev");
    interleave_overlapping(ROW, "il_row_ovl");
    interleave_blocking(ROW, "il_row_blk");
    interleave_blocking_stale(ROW, "il_row_blks");
}
END_TEST

START_TEST(resource_interleavings)
{
    interleave_sequential(RES, "il_res_seq");
    interleave_reversed(RES, "il_res_rev");
    interleave_overlapping(RES, "il_res_ovl");
    interleave_blocking(RES, "il_res_blk");
    interleave_blocking_stale(RES, "il_res_blks");
}
END_TEST

/* A new resource created concurrently by 33 and 34 (both INSERT paths). */
START_TEST(resource_concurrent_create)
{
    PGconn *a = db(), *b = db(), *w = db();
    fence_pg_error e;
    ok(a, "BEGIN");
    ck_assert_int_eq(fence_pg_set_token(a, 34, "fresh", &e), FENCE_OK);
    ok(b, "BEGIN");
    job j = {.c = b, .sql = NULL, .tok = 33, .resource = "fresh"};
    job_start(&j);
    wait_blocked(w, b);
    ok(a, "COMMIT");
    job_join(&j, 5000);
    ck_assert_int_eq(j.status, FENCE_STALE);
    ck_assert_uint_eq(j.err.highest, 34);
    ok(b, "ROLLBACK");

    /* Equal admitted, mark readable, never lowered even by its owner. */
    ok(a, "BEGIN");
    ck_assert_int_eq(fence_pg_set_token(a, 34, "fresh", &e), FENCE_OK);
    ck_assert_int_eq(fence_pg_set_token(a, 34, "fresh", &e), FENCE_OK);
    ok(a, "COMMIT");
    uint64_t m = 0;
    ck_assert_int_eq(fence_pg_mark(w, "fresh", &m, &e), FENCE_OK);
    ck_assert_uint_eq(m, 34);
    ck_assert_int_eq(fence_pg_mark(w, "never-seen", &m, &e), FENCE_OK);
    ck_assert_uint_eq(m, 0);
    fails(w, "UPDATE fence.marks SET token = 1 WHERE resource = 'fresh'", "23Q03");
    fails(w, "UPDATE fence.marks SET resource = 'other' WHERE resource = 'fresh'", "23Q03");
    fails(w, "DELETE FROM fence.marks WHERE resource = 'fresh'", "23Q03");
    fails(w, "TRUNCATE fence.marks", "23Q03");
    ck_assert_int_eq(num(w, "SELECT fence.mark('fresh')"), 34);
    PQfinish(a);
    PQfinish(b);
    PQfinish(w);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Retrofit, modes, COPY, TRUNCATE, unprotect                           */
/* ------------------------------------------------------------------ */

START_TEST(retrofit_rails_lock_version)
{
    PGconn *c = db();
    fence_pg_error e;
    ok(c, "CREATE TABLE posts (id serial PRIMARY KEY, title text, lock_version integer DEFAULT 0);"
          "INSERT INTO posts (title, lock_version) VALUES ('a', NULL), ('b', 3), ('c', 0), "
          "('d', NULL)");
    ok(c, "SELECT fence.protect('posts', 'lock_version')");
    ck_assert_str_eq(text1(c, "SELECT format_type(atttypid, atttypmod) || ' ' || attnotnull || ' '"
                              " || pg_get_expr(adbin, adrelid) FROM pg_attribute"
                              " JOIN pg_attrdef ON adrelid = attrelid AND adnum = attnum"
                              " WHERE attrelid = 'posts'::regclass AND attname = 'lock_version'"),
                     "bigint true 0");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM posts WHERE lock_version = 0"), 3);
    ck_assert_int_eq(num(c, "SELECT lock_version FROM posts WHERE title = 'b'"), 3);
    ck_assert_str_eq(text1(c, "SELECT col || ' ' || mode FROM fence.protected"
                              " WHERE tbl = 'posts'::regclass"),
                     "lock_version strict");
    /* Existing versions are marks: 2 < 3 is stale, 3 and up admitted. */
    ck_assert_int_eq(write_tok(c, 2, "UPDATE posts SET title = 'x' WHERE title = 'b'", &e),
                     FENCE_STALE);
    ck_assert_uint_eq(e.highest, 3);
    ck_assert_int_eq(write_tok(c, 3, "UPDATE posts SET title = 'b2' WHERE title = 'b'", &e),
                     FENCE_OK);
    ck_assert_int_eq(write_tok(c, 5, "UPDATE posts SET title = 'a2' WHERE title = 'a'", &e),
                     FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT lock_version FROM posts WHERE title = 'a2'"), 5);
    /* Protect again: idempotent, nothing changes. */
    ok(c, "SELECT fence.protect('posts', 'lock_version')");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'posts'::regclass"
                            " AND tgname LIKE 'zz_fence_%'"),
                     6);
    ck_assert_int_eq(num(c, "SELECT lock_version FROM posts WHERE title = 'a2'"), 5);

    /* A bigint column with NULLs, and a column of the wrong type. */
    ok(c, "CREATE TABLE v8 (id int, ver bigint); INSERT INTO v8 VALUES (1, NULL), (2, 7)");
    ok(c, "SELECT fence.protect('v8', 'ver')");
    ck_assert_int_eq(num(c, "SELECT sum(ver) FROM v8"), 7);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM v8 WHERE ver IS NULL"), 0);
    ok(c, "CREATE TABLE vt (id int, ver text)");
    fails(c, "SELECT fence.protect('vt', 'ver')", "22023");
    ok(c, "CREATE VIEW vv AS SELECT 1 AS x");
    fails(c, "SELECT fence.protect('vv')", "22023");
    fails(c, "SELECT fence.protect('no_such_table')", "42P01");
    PQfinish(c);
}
END_TEST

START_TEST(permissive_mode)
{
    PGconn *c = db();
    fence_pg_error e;
    make_table(c, "pm");
    ck_assert_int_eq(write_tok(c, 20, "UPDATE pm SET v = 1 WHERE id = 1", &e), FENCE_OK);
    ok(c, "SELECT fence.set_mode('pm', 'permissive')");
    ck_assert_str_eq(text1(c, "SELECT mode FROM fence.protected WHERE tbl = 'pm'::regclass"),
                     "permissive");
    /* No token: admitted, the stamp stays (UPDATE) or is 0 (INSERT). */
    ck_assert_int_eq(write_raw(c, NULL, "UPDATE pm SET v = 2 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(write_raw(c, "", "UPDATE pm SET v = 3, fence_token = 99 WHERE id = 1", &e),
                     FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM pm WHERE id = 1"), 20);
    ck_assert_int_eq(write_raw(c, NULL, "INSERT INTO pm (id, fence_token) VALUES (8, 50)", &e),
                     FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM pm WHERE id = 8"), 0);
    ck_assert_int_eq(write_raw(c, NULL, "DELETE FROM pm WHERE id = 8", &e), FENCE_OK);
    /* Stale and malformed tokens are still rejected. */
    ck_assert_int_eq(write_tok(c, 19, "UPDATE pm SET v = 4 WHERE id = 1", &e), FENCE_STALE);
    ck_assert_int_eq(write_raw(c, "abc", "UPDATE pm SET v = 4 WHERE id = 1", &e), FENCE_ENOTOKEN);
    ck_assert_int_eq(write_raw(c, "0", "UPDATE pm SET v = 4 WHERE id = 1", &e), FENCE_ENOTOKEN);
    ck_assert_int_eq(write_tok(c, 21, "UPDATE pm SET v = 5 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM pm WHERE id = 1"), 21);
    /* And back. */
    ok(c, "SELECT fence.set_mode('pm', 'strict')");
    ck_assert_int_eq(write_raw(c, NULL, "UPDATE pm SET v = 6 WHERE id = 1", &e), FENCE_ENOTOKEN);
    fails(c, "SELECT fence.set_mode('pm', 'lenient')", "22023");
    ok(c, "CREATE TABLE pm_unprotected (id int)");
    fails(c, "SELECT fence.set_mode('pm_unprotected', 'strict')", "22023");
    /* protect(..., permissive => true) does the same. */
    ok(c, "SELECT fence.protect('pm', permissive => true)");
    ck_assert_int_eq(write_raw(c, NULL, "UPDATE pm SET v = 7 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT v FROM pm WHERE id = 1"), 7);
    PQfinish(c);
}
END_TEST

/* COPY FROM STDIN of rows, in a transaction with raw token (NULL: none);
 * returns the status of the COPY. */
static int copy_rows(PGconn *c, const char *raw, const char *copy, const char *data,
                     fence_pg_error *e)
{
    ok(c, "BEGIN");
    if (raw != NULL) {
        char set[128];
        snprintf(set, sizeof set, "SET LOCAL fence.token = '%s'", raw);
        ok(c, set);
    }
    PGresult *r = PQexec(c, copy);
    ck_assert_int_eq(PQresultStatus(r), PGRES_COPY_IN);
    PQclear(r);
    ck_assert_int_eq(PQputCopyData(c, data, (int)strlen(data)), 1);
    ck_assert_int_eq(PQputCopyEnd(c, NULL), 1);
    r = PQgetResult(c);
    int st = fence_pg_result(r, e);
    PQclear(r);
    while ((r = PQgetResult(c)) != NULL) {
        PQclear(r);
    }
    ok(c, st == FENCE_OK ? "COMMIT" : "ROLLBACK");
    return st;
}

START_TEST(copy_is_fenced)
{
    PGconn *c = db();
    fence_pg_error e;
    make_table(c, "cp");
    ck_assert_int_eq(copy_rows(c, NULL, "COPY cp (id, v) FROM STDIN", "10\t1\n11\t1\n", &e),
                     FENCE_ENOTOKEN);
    ck_assert_int_eq(copy_rows(c, "abc", "COPY cp (id, v) FROM STDIN", "10\t1\n", &e),
                     FENCE_ENOTOKEN);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM cp"), 3);
    ck_assert_int_eq(copy_rows(c, "42", "COPY cp (id, v, fence_token) FROM STDIN",
                               "10\t1\t999\n11\t1\t1\n", &e),
                     FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM cp WHERE fence_token = 42"), 2);
    PQfinish(c);
}
END_TEST

START_TEST(truncate_refused_and_unprotect)
{
    PGconn *c = db();
    fence_pg_error e;
    make_table(c, "tr");
    int st = run(c, "TRUNCATE tr", &e);
    ck_assert_int_eq(st, FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "23Q03");
    ck_assert_ptr_nonnull(strstr(e.message, "public.tr"));
    ck_assert_int_eq(num(c, "SELECT count(*) FROM tr"), 3);

    ok(c, "SELECT fence.unprotect('tr')");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'tr'::regclass"), 0);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.protected WHERE tbl = 'tr'::regclass"), 0);
    ok(c, "UPDATE tr SET v = 9"); /* no token needed any more */
    ok(c, "SELECT fence.unprotect('tr')"); /* again: no error */
    ok(c, "TRUNCATE tr");
    ok(c, "SELECT fence.protect('tr')"); /* and back */
    ck_assert_int_eq(write_raw(c, NULL, "INSERT INTO tr (id) VALUES (1)", &e), FENCE_ENOTOKEN);
    PQfinish(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Security: a non-superuser application role                           */
/* ------------------------------------------------------------------ */

START_TEST(app_role_cannot_bypass)
{
    PGconn *c = db();
    fence_pg_error e;
    char sql[256];
    make_table(c, "sec");
    snprintf(sql, sizeof sql, "GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON sec TO %s", g_app);
    ok(c, sql);
    ck_assert_int_eq(write_tok(c, 50, "SELECT fence.advance('sec-res', 50)", &e), FENCE_OK);

    PGconn *app = db_app();
    ck_assert_int_eq(num(app, "SELECT usesuper::int FROM pg_user WHERE usename = current_user"),
                     0);
    /* The high-water table: no direct access at all. */
    fails(app, "UPDATE fence.marks SET token = 1", "42501");
    fails(app, "DELETE FROM fence.marks", "42501");
    fails(app, "INSERT INTO fence.marks VALUES ('sec-res', 1)", "42501");
    fails(app, "TRUNCATE fence.marks", "42501");
    fails(app, "SELECT * FROM fence.marks", "42501");
    fails(app, "ALTER TABLE fence.marks DISABLE TRIGGER ALL", "42501");
    /* Internal and admin functions. */
    fails(app, "SELECT fence.protect('sec')", "42501");
    fails(app, "SELECT fence.unprotect('sec')", "42501");
    fails(app, "SELECT fence.set_mode('sec', 'permissive')", "42501");
    fails(app, "SELECT fence.marks_guard()", "42501");
    /* The row trigger functions are EXECUTE to PUBLIC (any table owner may
     * attach them), but cannot be called directly. */
    fails(app, "SELECT fence.row_guard()", "0A000");
    fails(app, "SELECT fence.row_check()", "0A000");
    fails(app, "SELECT fence.refuse_truncate()", "0A000");
    fails(app, "CREATE FUNCTION fence.evil() RETURNS int LANGUAGE sql AS 'SELECT 1'", "42501");
    /* The triggers of a table it does not own. */
    fails(app, "ALTER TABLE sec DISABLE TRIGGER zz_fence_guard_upd", "42501");
    fails(app, "ALTER TABLE sec DISABLE TRIGGER ALL", "42501");
    fails(app, "DROP TRIGGER zz_fence_guard_upd ON sec", "42501");
    fails(app, "ALTER TABLE sec DROP COLUMN fence_token", "42501");
    fails(app, "SET session_replication_role = replica", "42501");
    ck_assert_int_eq(write_raw(app, NULL, "UPDATE sec SET v = 1", &e), FENCE_ENOTOKEN);
    ck_assert_int_eq(write_raw(app, NULL, "TRUNCATE sec", &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "23Q03");
    /* Lowering a mark through advance is just a stale write. */
    ok(app, "BEGIN");
    ck_assert_int_eq(fence_pg_set_token(app, 49, "sec-res", &e), FENCE_STALE);
    ok(app, "ROLLBACK");
    ck_assert_int_eq(num(c, "SELECT fence.mark('sec-res')"), 50);

    /* With a valid token it works normally. */
    ck_assert_int_eq(write_tok(app, 60, "UPDATE sec SET v = 6 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(write_tok(app, 60, "INSERT INTO sec (id, v) VALUES (4, 4)", &e), FENCE_OK);
    ck_assert_int_eq(write_tok(app, 60, "DELETE FROM sec WHERE id = 2", &e), FENCE_OK);
    ck_assert_int_eq(write_tok(app, 59, "UPDATE sec SET v = 7 WHERE id = 1", &e), FENCE_STALE);
    ok(app, "BEGIN");
    ck_assert_int_eq(fence_pg_set_token(app, 51, "sec-res", &e), FENCE_OK);
    ok(app, "COMMIT");
    uint64_t m = 0;
    ck_assert_int_eq(fence_pg_mark(app, "sec-res", &m, &e), FENCE_OK);
    ck_assert_uint_eq(m, 51);
    ck_assert_int_eq(num(app, "SELECT fence.version()"), 2);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'sec'::regclass"
                            " AND tgenabled = 'O'"),
                     6);
    PQfinish(app);
    PQfinish(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Security review: install ownership, late triggers, inheritance,      */
/* search_path, non-superuser install                                   */
/* ------------------------------------------------------------------ */

/* Install into the database of c; require it to be refused with 42501
 * and a message containing want, leaving the connection idle. */
static void install_refused(PGconn *c, const char *want)
{
    fence_pg_error e;
    int st = fence_pg_install(c, &e);
    ck_assert_msg(st == FENCE_EDB, "install was not refused (%s): expected '%s'",
                  fence_status_name(st), want);
    ck_assert_str_eq(e.sqlstate, "42501");
    ck_assert_msg(strstr(e.message, want) != NULL, "message lacks '%s': %s", want, e.message);
    ck_assert_int_eq(PQtransactionStatus(c), PQTRANS_IDLE);
}

/* Finding 1: a schema "fence" (or anything in it) that another role owns
 * or may change is never adopted. */
START_TEST(install_refuses_what_another_role_owns)
{
    char d[NAME_BUF], sql[512];
    side_db("own", g_app, d); /* the application owns the database */
    PGconn *app = connect_as(d, g_app);
    PGconn *su = connect_as(d, NULL);
    PQsetNoticeProcessor(su, quiet_notice, NULL);
    fence_pg_error e;

    /* The application created schema "fence" before the install. */
    ok(app, "CREATE SCHEMA fence");
    install_refused(su, "owned by role");
    ck_assert_int_eq(num(su, "SELECT count(*) FROM pg_class WHERE relnamespace = 'fence'::regnamespace"),
                     0);
    ck_assert_int_eq(num(su, "SELECT count(*) FROM pg_proc WHERE pronamespace = 'fence'::regnamespace"),
                     0);
    ok(app, "DROP SCHEMA fence");
    ck_assert_int_eq(fence_pg_install(su, &e), FENCE_OK);

    /* CREATE on the schema granted to the application, and an object it
     * made there: an overload that would capture fence.advance('r', 5). */
    snprintf(sql, sizeof sql, "GRANT CREATE ON SCHEMA fence TO %s", g_app);
    ok(su, sql);
    install_refused(su, "CREATE on schema fence granted to");
    ok(app, "CREATE FUNCTION fence.advance(text, integer) RETURNS bigint LANGUAGE sql"
            " AS 'SELECT 0::bigint'");
    snprintf(sql, sizeof sql, "REVOKE CREATE ON SCHEMA fence FROM %s", g_app);
    ok(su, sql);
    install_refused(su, "function fence.advance(text,integer) owned by");
    ok(su, "DROP FUNCTION fence.advance(text, integer)");
    ck_assert_int_eq(fence_pg_install(su, &e), FENCE_OK);

    /* TRIGGER on fence.marks granted to the application, and a trigger of
     * its own there (it would run inside SECURITY DEFINER advance()). */
    snprintf(sql, sizeof sql, "GRANT TRIGGER ON fence.marks TO %s", g_app);
    ok(su, sql);
    install_refused(su, "TRIGGER on fence.marks granted to");
    ok(app, "CREATE FUNCTION public.on_marks() RETURNS trigger LANGUAGE plpgsql"
            " AS 'BEGIN RETURN NEW; END'");
    ok(app, "CREATE TRIGGER a_on_marks BEFORE INSERT OR UPDATE ON fence.marks"
            " FOR EACH ROW EXECUTE FUNCTION public.on_marks()");
    snprintf(sql, sizeof sql, "REVOKE TRIGGER ON fence.marks FROM %s", g_app);
    ok(su, sql);
    install_refused(su, "trigger a_on_marks on fence.marks calls public.on_marks()");
    ok(su, "DROP TRIGGER a_on_marks ON fence.marks");
    ck_assert_int_eq(fence_pg_install(su, &e), FENCE_OK);

    /* Column grants count too. */
    snprintf(sql, sizeof sql, "GRANT UPDATE (token) ON fence.marks TO %s", g_app);
    ok(su, sql);
    install_refused(su, "UPDATE (token) on fence.marks granted to");
    snprintf(sql, sizeof sql, "REVOKE UPDATE (token) ON fence.marks FROM %s", g_app);
    ok(su, sql);

    /* A schema owned by another superuser is refused too: install as the
     * role that owns it. */
    char other[NAME_BUF];
    side_role("su", other);
    snprintf(sql, sizeof sql, "ALTER ROLE %s SUPERUSER", other);
    ok(su, sql);
    snprintf(sql, sizeof sql, "SET ROLE %s", other);
    ok(su, sql);
    snprintf(sql, sizeof sql, "not by %s", other);
    install_refused(su, sql);
    ok(su, "RESET ROLE");
    ck_assert_int_eq(fence_pg_install(su, &e), FENCE_OK);
    PQfinish(app);
    PQfinish(su);
    drop_side_db(d);
}
END_TEST

/* The holder's hot path runs no trigger function at all: the BEFORE
 * guard's and the AFTER check's WHEN clauses are both false (so the AFTER
 * trigger queues no event either).  A new token runs row_guard only. */
START_TEST(row_hot_path_runs_no_trigger_function)
{
    PGconn *c = db();
    fence_pg_error e;
    make_table(c, "hp");
    ck_assert_int_eq(write_tok(c, 21, "UPDATE hp SET v = 1", &e), FENCE_OK);
    /* Calls counted since the last flush of the session's statistics,
     * which never happens inside a transaction: compare within one. */
    static const char calls[] =
        "SELECT coalesce(sum(calls) FILTER (WHERE funcname = 'row_guard'), 0) * 1000"
        " + coalesce(sum(calls) FILTER (WHERE funcname = 'row_check'), 0)"
        " FROM pg_stat_xact_user_functions WHERE schemaname = 'fence'";
    ok(c, "SET track_functions = 'pl'");
    begin_tok(c, 21, NULL);
    long long base = num(c, calls);
    ok(c, "UPDATE hp SET v = v + 1"); /* 3 rows stamped 21 */
    ck_assert_int_eq(num(c, calls) - base, 0);
    ok(c, "INSERT INTO hp (id, v) VALUES (10, 0)"); /* no stamp yet: guard */
    ck_assert_int_eq(num(c, calls) - base, 1000);
    ok(c, "UPDATE hp SET v = v + 1"); /* 4 rows stamped 21 */
    ck_assert_int_eq(num(c, calls) - base, 1000);
    ok(c, "COMMIT");
    begin_tok(c, 22, NULL);
    base = num(c, calls);
    ok(c, "UPDATE hp SET v = v + 1"); /* a new token: the guard per row */
    ck_assert_int_eq(num(c, calls) - base, 4000);
    ok(c, "COMMIT");
    PQfinish(c);
}
END_TEST

/* Finding 2: a BEFORE trigger that fires after zz_fence_guard_* cannot
 * rewrite the stamp (which would switch fencing off for everyone). */
START_TEST(row_later_trigger_cannot_rewrite_the_stamp)
{
    PGconn *c = db();
    fence_pg_error e;
    char sql[256];
    make_table(c, "lt");
    snprintf(sql, sizeof sql, "GRANT ALL ON lt TO %s", g_app);
    ok(c, sql);
    ck_assert_int_eq(write_tok(c, 34, "UPDATE lt SET v = 1", &e), FENCE_OK);

    /* GRANT ALL includes TRIGGER: the application stamps every row 0. */
    PGconn *app = db_app();
    ok(app, "CREATE FUNCTION lt_zero() RETURNS trigger LANGUAGE plpgsql"
            " AS 'BEGIN NEW.fence_token := 0; RETURN NEW; END'");
    ok(app, "CREATE TRIGGER zzz_zero BEFORE INSERT OR UPDATE ON lt"
            " FOR EACH ROW EXECUTE FUNCTION lt_zero()");
    /* The holder's next write (its hot path: the guard is skipped). */
    ck_assert_int_eq(write_tok(c, 34, "UPDATE lt SET v = 2 WHERE id = 1", &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "23Q03");
    ck_assert_msg(strstr(e.message, "rewritten") != NULL, "%s", e.message);
    /* A newer token (the guard runs, then the rewrite), and an INSERT. */
    ck_assert_int_eq(write_tok(c, 35, "UPDATE lt SET v = 3 WHERE id = 2", &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "23Q03");
    ck_assert_int_eq(write_tok(c, 35, "INSERT INTO lt (id, v) VALUES (10, 3)", &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "23Q03");
    /* So no stamp was lowered, and a stale writer is still stale. */
    ck_assert_int_eq(num(c, "SELECT count(*) FROM lt WHERE fence_token <> 34"), 0);
    ck_assert_int_eq(write_tok(c, 33, "UPDATE lt SET v = 9 WHERE id = 3", &e), FENCE_STALE);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM lt WHERE v <> 1"), 0);
    /* Permissive mode, no token: the kept stamp is checked the same way. */
    ok(c, "SELECT fence.set_mode('lt', 'permissive')");
    ck_assert_int_eq(write_raw(c, NULL, "UPDATE lt SET v = 4 WHERE id = 1", &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "23Q03");
    ck_assert_int_eq(num(c, "SELECT fence_token FROM lt WHERE id = 1"), 34);
    ok(c, "SELECT fence.set_mode('lt', 'strict')");
    /* A trigger writing NULL is refused too (by NOT NULL at the latest). */
    ok(app, "CREATE OR REPLACE FUNCTION lt_zero() RETURNS trigger LANGUAGE plpgsql"
            " AS 'BEGIN NEW.fence_token := NULL; RETURN NEW; END'");
    ck_assert_int_ne(write_tok(c, 34, "UPDATE lt SET v = 5 WHERE id = 1", &e), FENCE_OK);
    PQfinish(app);
    ok(c, "DROP TRIGGER zzz_zero ON lt"); /* (dropping it needs the owner) */

    /* The owner's own late trigger that bumps the column: protect() warns,
     * and its writes are refused rather than silently unfenced. */
    ok(c, "CREATE FUNCTION lt_touch() RETURNS trigger LANGUAGE plpgsql"
          " AS 'BEGIN NEW.fence_token := NEW.fence_token + 1; RETURN NEW; END'");
    ok(c, "CREATE TRIGGER zz_touch BEFORE UPDATE ON lt FOR EACH ROW EXECUTE FUNCTION lt_touch()");
    notes n = {{0}};
    PQsetNoticeReceiver(c, collect_notice, &n);
    ok(c, "SELECT fence.protect('lt')");
    ck_assert_msg(strstr(n.text, "zz_touch") != NULL && strstr(n.text, "fires after") != NULL,
                  "no warning about zz_touch: %s", n.text);
    ck_assert_msg(strstr(n.text, g_app) != NULL && strstr(n.text, "TRIGGER") != NULL,
                  "no warning about the TRIGGER grant: %s", n.text);
    ck_assert_int_eq(write_tok(c, 36, "UPDATE lt SET v = 6 WHERE id = 1", &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "23Q03");
    ck_assert_int_eq(num(c, "SELECT fence_token FROM lt WHERE id = 1"), 34);
    ok(c, "DROP TRIGGER zz_touch ON lt");
    ck_assert_int_eq(write_tok(c, 36, "UPDATE lt SET v = 6 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM lt WHERE id = 1"), 36);
    PQfinish(c);
}
END_TEST

/* Finding 3: a table with inheritance children cannot be protected (its
 * children's rows would be written through it unchecked); a child can. */
START_TEST(protect_refuses_inheritance_parent)
{
    PGconn *c = db();
    fence_pg_error e;
    ok(c, "CREATE TABLE ip (id int PRIMARY KEY, v int);"
          "CREATE TABLE ip_child () INHERITS (ip);"
          "INSERT INTO ip_child VALUES (1, 0)");
    ck_assert_int_eq(run(c, "SELECT fence.protect('ip')", &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "22023");
    ck_assert_msg(strstr(e.message, "inheritance children (public.ip_child)") != NULL, "%s", e.message);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'ip'::regclass"), 0);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_attribute WHERE attrelid = 'ip'::regclass"
                            " AND attname = 'fence_token'"),
                     0);
    /* The child itself: writes through the parent reach its triggers. */
    ok(c, "SELECT fence.protect('ip_child')");
    ck_assert_int_eq(write_raw(c, NULL, "UPDATE ip SET v = 1", &e), FENCE_ENOTOKEN);
    ck_assert_int_eq(write_tok(c, 5, "UPDATE ip SET v = 1", &e), FENCE_OK);
    ck_assert_int_eq(write_tok(c, 4, "UPDATE ip SET v = 2", &e), FENCE_STALE);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM ip_child WHERE id = 1"), 5);
    PQfinish(c);
}
END_TEST

/* How many dependencies of anything on an operator in schema public. */
static long long deps_on_public_operators(PGconn *c)
{
    return num(c, "SELECT count(*) FROM pg_catalog.pg_depend d"
                  " WHERE d.refclassid = 'pg_catalog.pg_operator'::pg_catalog.regclass"
                  " AND d.refobjid IN (SELECT o.oid FROM pg_catalog.pg_operator o"
                  " WHERE o.oprnamespace = 'public'::pg_catalog.regnamespace)");
}

/* Finding 4: the caller's search_path binds nothing the install (or
 * protect) creates to the application's operators. */
START_TEST(install_ignores_hostile_search_path)
{
    char d[NAME_BUF], sql[256];
    side_db("sp", NULL, d);
    PGconn *su = connect_as(d, NULL);
    PQsetNoticeProcessor(su, quiet_notice, NULL);
    snprintf(sql, sizeof sql, "GRANT CREATE ON SCHEMA public TO %s", g_app);
    ok(su, sql);
    /* The application's operators, for the argument types of fence's
     * WHEN clause and CHECKs. */
    PGconn *app = connect_as(d, g_app);
    ok(app, "CREATE FUNCTION public.no(bigint, bigint) RETURNS boolean LANGUAGE sql AS 'SELECT false';"
            "CREATE FUNCTION public.no(bigint, integer) RETURNS boolean LANGUAGE sql AS 'SELECT false';"
            "CREATE FUNCTION public.no(integer, integer) RETURNS boolean LANGUAGE sql AS 'SELECT false';"
            "CREATE OPERATOR public.< (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.no);"
            "CREATE OPERATOR public.> (LEFTARG = bigint, RIGHTARG = integer, FUNCTION = public.no);"
            "CREATE OPERATOR public.<= (LEFTARG = bigint, RIGHTARG = integer, FUNCTION = public.no);"
            "CREATE OPERATOR public.<= (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.no)");
    PQfinish(app);

    ok(su, "SET search_path = public, pg_catalog");
    fence_pg_error e;
    ck_assert_int_eq(fence_pg_install(su, &e), FENCE_OK);
    ck_assert_str_eq(text1(su, "SELECT current_setting('search_path')"), "public, pg_catalog");
    const char *def = text1(su, "SELECT pg_get_triggerdef(oid) FROM pg_trigger"
                                " WHERE tgname = 'marks_no_lowering'");
    ck_assert_msg(strstr(def, "OPERATOR(pg_catalog.<)") != NULL, "bound to public.<: %s", def);
    ck_assert_int_eq(deps_on_public_operators(su), 0);
    /* protect() pins its own. */
    ok(su, "CREATE TABLE sp (id int PRIMARY KEY); SELECT fence.protect('sp')");
    ck_assert_int_eq(deps_on_public_operators(su), 0);
    ok(su, "BEGIN; SET LOCAL fence.token = 3; INSERT INTO sp VALUES (1); COMMIT");
    ok(su, "BEGIN; SELECT fence.advance('sp', 3); COMMIT");
    ck_assert_int_eq(num(su, "SELECT fence.mark('sp')"), 3);

    /* A CHECK bound to public's operator (as version 1 installed under
     * such a search_path would have) is re-created by the next install. */
    ok(su, "ALTER TABLE fence.marks DROP CONSTRAINT marks_token_check,"
           " ADD CONSTRAINT marks_token_check CHECK (token > 0) NOT VALID");
    ck_assert_int_eq(deps_on_public_operators(su), 1);
    ck_assert_int_eq(fence_pg_install(su, &e), FENCE_OK);
    ck_assert_int_eq(deps_on_public_operators(su), 0);
    PQfinish(su);
    drop_side_db(d);
}
END_TEST

/* Finding 5: a non-superuser "fence admin" installs; a third role that
 * owns its table protects it with only EXECUTE on fence.protect.  Also:
 * an operator's REVOKE of fence.advance survives re-installs. */
START_TEST(install_as_non_superuser_protect_as_owner)
{
    char d[NAME_BUF], fadmin[NAME_BUF], owner[NAME_BUF], sql[1024];
    side_role("fadmin", fadmin);
    side_role("owner", owner);
    side_db("fa", NULL, d);
    PGconn *su = connect_as(d, NULL);
    snprintf(sql, sizeof sql, "GRANT CREATE ON DATABASE %s TO %s; GRANT CREATE ON SCHEMA public TO %s",
             d, fadmin, owner);
    ok(su, sql);

    PGconn *fa = connect_as(d, fadmin);
    PQsetNoticeProcessor(fa, quiet_notice, NULL);
    fence_pg_error e;
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(fence_pg_install(fa, &e) == FENCE_OK, "install as %s: %s", fadmin, e.message);
    }
    snprintf(sql, sizeof sql, "GRANT EXECUTE ON FUNCTION fence.protect(regclass, name, boolean) TO %s",
             owner);
    ok(fa, sql);

    PGconn *o = connect_as(d, owner);
    PQsetNoticeProcessor(o, quiet_notice, NULL);
    ok(o, "CREATE TABLE o3 (id int PRIMARY KEY, v int); INSERT INTO o3 VALUES (1, 0)");
    ok(o, "SELECT fence.protect('o3')");
    ck_assert_int_eq(write_tok(o, 7, "UPDATE o3 SET v = 1", &e), FENCE_OK);
    ck_assert_int_eq(write_tok(o, 6, "UPDATE o3 SET v = 2", &e), FENCE_STALE);
    ck_assert_int_eq(write_raw(o, NULL, "TRUNCATE o3", &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "23Q03");
    fails(o, "SELECT fence.unprotect('o3')", "42501");
    fails(fa, "SELECT fence.protect('o3')", "42501"); /* not its table */

    /* Restricting fence.advance to chosen roles, kept by a re-install. */
    ok(fa, "REVOKE EXECUTE ON FUNCTION fence.advance(text, bigint) FROM PUBLIC");
    ck_assert_int_eq(fence_pg_install(fa, &e), FENCE_OK);
    fails(o, "SELECT fence.advance('o3', 1)", "42501");
    snprintf(sql, sizeof sql, "GRANT EXECUTE ON FUNCTION fence.advance(text, bigint) TO %s", owner);
    ok(fa, sql);
    ck_assert_int_eq(fence_pg_install(fa, &e), FENCE_OK);
    ck_assert_int_eq(num(o, "SELECT fence.advance('o3', 1)"), 1);
    PQfinish(o);
    PQfinish(fa);
    PQfinish(su);
    drop_side_db(d);
}
END_TEST

/* Upgrade from version 1: tables protected by it get the version-2
 * triggers when the installer may re-protect them, and a WARNING naming
 * the command otherwise.  (Version 1 is simulated from version 2: its
 * tables had the same triggers without zz_fence_check_*.) */
static void make_v1(PGconn *c, const char *tbl)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "DROP TRIGGER zz_fence_check_ins ON %s; DROP TRIGGER zz_fence_check_upd ON %s", tbl,
             tbl);
    ok(c, sql);
}

START_TEST(upgrade_from_version_1)
{
    char d[NAME_BUF], fadmin[NAME_BUF], owner[NAME_BUF], sql[1024];
    side_role("upadmin", fadmin);
    side_role("upowner", owner);
    side_db("up", NULL, d);
    PGconn *su = connect_as(d, NULL);
    PQsetNoticeProcessor(su, quiet_notice, NULL);
    snprintf(sql, sizeof sql,
             "GRANT CREATE ON DATABASE %s TO %s; GRANT CREATE ON SCHEMA public TO %s, %s", d, fadmin,
             owner, fadmin);
    ok(su, sql);
    PGconn *fa = connect_as(d, fadmin);
    fence_pg_error e;
    ck_assert_int_eq(fence_pg_install(fa, &e), FENCE_OK);
    snprintf(sql, sizeof sql, "GRANT EXECUTE ON FUNCTION fence.protect(regclass, name, boolean) TO %s",
             owner);
    ok(fa, sql);
    /* mine: the installer's; theirs: another role's; parent: with a child. */
    ok(fa, "CREATE TABLE mine (id int PRIMARY KEY, v int); INSERT INTO mine VALUES (1, 0);"
           "SELECT fence.protect('mine', permissive => true);"
           "CREATE TABLE parent (id int); SELECT fence.protect('parent')");
    PGconn *o = connect_as(d, owner);
    ok(o, "CREATE TABLE theirs (id int PRIMARY KEY); SELECT fence.protect('theirs')");
    make_v1(fa, "mine");
    make_v1(fa, "parent");
    make_v1(o, "theirs");
    ok(fa, "CREATE TABLE parent_child () INHERITS (parent); UPDATE fence.meta SET version = 1");

    notes n = {{0}};
    PQsetNoticeReceiver(fa, collect_notice, &n);
    ck_assert_msg(fence_pg_install(fa, &e) == FENCE_OK, "upgrade: %s", e.message);
    ck_assert_int_eq(num(fa, "SELECT version FROM fence.meta"), 2);
    ck_assert_int_eq(num(fa, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'mine'::regclass"
                             " AND tgname LIKE 'zz_fence_check_%'"),
                     2);
    ck_assert_str_eq(text1(fa, "SELECT mode FROM fence.protected WHERE tbl = 'mine'::regclass"),
                     "permissive");
    ck_assert_msg(strstr(n.text, "theirs keeps the triggers of an older version") != NULL &&
                      strstr(n.text, "SELECT fence.protect('public.theirs', 'fence_token', "
                                     "permissive => false)") != NULL,
                  "no warning for theirs: %s", n.text);
    ck_assert_msg(strstr(n.text, "parent keeps the triggers") != NULL, "no warning for parent: %s",
                  n.text);
    /* Both still protected the old way; their owner re-protects. */
    ck_assert_int_eq(num(fa, "SELECT count(*) FROM fence.protected"), 3);
    ok(o, "SELECT fence.protect('theirs', 'fence_token', permissive => false)");
    n.text[0] = '\0';
    ck_assert_int_eq(fence_pg_install(fa, &e), FENCE_OK);
    ck_assert_msg(strstr(n.text, "theirs") == NULL, "warned again: %s", n.text);
    PQfinish(o);
    PQfinish(fa);
    PQfinish(su);
    drop_side_db(d);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Injection: odd table, column and resource names                      */
/* ------------------------------------------------------------------ */

START_TEST(names_are_quoted)
{
    static const char *const names[] = {
        "x\"; DROP TABLE victim; --", "Mixed Case", "with space", "quote'single", "ünï",
    };
    PGconn *c = db();
    fence_pg_error e;
    ok(c, "CREATE TABLE victim (id int)");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *tid = PQescapeIdentifier(c, names[i], strlen(names[i]));
        char *tlit = PQescapeLiteral(c, tid, strlen(tid)); /* regclass text */
        char *clit = PQescapeLiteral(c, names[i], strlen(names[i]));
        char sql[1024];
        snprintf(sql, sizeof sql, "CREATE TABLE %s (id int PRIMARY KEY, %s integer)", tid, tid);
        ok(c, sql);
        snprintf(sql, sizeof sql, "INSERT INTO %s VALUES (1, NULL)", tid);
        ok(c, sql);
        snprintf(sql, sizeof sql, "SELECT fence.protect(%s, %s)", tlit, clit);
        ok(c, sql);
        snprintf(sql, sizeof sql, "UPDATE %s SET id = 1", tid);
        ck_assert_int_eq(write_tok(c, 8, sql, &e), FENCE_OK);
        ck_assert_int_eq(write_tok(c, 7, sql, &e), FENCE_STALE);
        char obj[512];
        snprintf(obj, sizeof obj, "public.%s", tid);
        ck_assert_str_eq(e.object, obj);
        snprintf(sql, sizeof sql, "SELECT %s FROM %s", tid, tid);
        ck_assert_int_eq(num(c, sql), 8);
        snprintf(sql, sizeof sql, "SELECT fence.set_mode(%s, 'permissive')", tlit);
        ok(c, sql);
        snprintf(sql, sizeof sql, "SELECT fence.unprotect(%s)", tlit);
        ok(c, sql);

        /* The same name as a resource. */
        ok(c, "BEGIN");
        ck_assert_int_eq(fence_pg_set_token(c, 8, names[i], &e), FENCE_OK);
        ok(c, "COMMIT");
        ok(c, "BEGIN");
        ck_assert_int_eq(fence_pg_set_token(c, 7, names[i], &e), FENCE_STALE);
        ck_assert_int_eq(e.is_resource, 1);
        ck_assert_str_eq(e.object, names[i]);
        ok(c, "ROLLBACK");
        PQfreemem(tid);
        PQfreemem(tlit);
        PQfreemem(clit);
    }
    /* Names that are not tables are errors, not code. */
    fails(c, "SELECT fence.protect('victim; DROP TABLE victim')", "42602");
    ok(c, "SELECT fence.protect('victim', 'c\"; DROP TABLE victim; --')");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_attribute WHERE attrelid = 'victim'::regclass"
                            " AND attname = 'c\"; DROP TABLE victim; --'"),
                     1);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_class WHERE relname = 'victim'"), 1);
    PQfinish(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Pipeline mode: one round trip in autocommit                          */
/* ------------------------------------------------------------------ */

/* Send token + sql + sync; return the status of sql's result. */
static int pipelined(PGconn *c, uint64_t tok, const char *resource, const char *sql,
                     fence_pg_error *e)
{
    ck_assert_int_eq(PQenterPipelineMode(c), 1);
    ck_assert_int_eq(fence_pg_send_token(c, tok, resource, e), FENCE_OK);
    ck_assert_int_eq(PQsendQueryParams(c, sql, 0, NULL, NULL, NULL, NULL, 0), 1);
    ck_assert_int_eq(PQpipelineSync(c), 1);
    PGresult *r = PQgetResult(c);
    int st_set = fence_pg_result(r, e);
    PQclear(r);
    ck_assert_ptr_null(PQgetResult(c));
    r = PQgetResult(c);
    int st = st_set == FENCE_OK ? fence_pg_result(r, e) : st_set;
    PQclear(r);
    ck_assert_ptr_null(PQgetResult(c));
    r = PQgetResult(c);
    ck_assert_int_eq(PQresultStatus(r), PGRES_PIPELINE_SYNC);
    PQclear(r);
    ck_assert_int_eq(PQexitPipelineMode(c), 1);
    return st;
}

START_TEST(pipeline_send_token)
{
    PGconn *c = db();
    fence_pg_error e;
    make_table(c, "pl");
    ck_assert_int_eq(pipelined(c, 30, NULL, "UPDATE pl SET v = 1 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM pl WHERE id = 1"), 30);
    ck_assert_int_eq(pipelined(c, 29, NULL, "UPDATE pl SET v = 2 WHERE id = 1", &e), FENCE_STALE);
    ck_assert_uint_eq(e.highest, 30);
    ck_assert_int_eq(pipelined(c, 31, "pl-res", "UPDATE pl SET v = 3 WHERE id = 1", &e),
                     FENCE_OK);
    ck_assert_int_eq(pipelined(c, 30, "pl-res", "UPDATE pl SET v = 4 WHERE id = 2", &e),
                     FENCE_STALE);
    ck_assert_int_eq(e.is_resource, 1);
    ck_assert_int_eq(num(c, "SELECT sum(v) FROM pl"), 3);
    /* After the sync the token is gone: fail closed. */
    ck_assert_int_eq(run(c, "UPDATE pl SET v = 5 WHERE id = 1", &e), FENCE_ENOTOKEN);
    PQfinish(c);
}
END_TEST

START_TEST(prepared_statements)
{
    PGconn *c = db();
    fence_pg_error e;
    make_table(c, "pp");
    ck_assert_int_eq(fence_pg_prepare(NULL, &e), FENCE_EINVAL);
    ok(c, "BEGIN");
    ck_assert_int_eq(fence_pg_prepare(c, &e), FENCE_ESTATE);
    ok(c, "ROLLBACK");
    ck_assert_int_eq(fence_pg_prepare(c, &e), FENCE_OK);
    ck_assert_int_eq(fence_pg_prepare(c, NULL), FENCE_OK); /* again: harmless */
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_prepared_statements"
                            " WHERE name LIKE 'fence_pg_set_token%'"),
                     2);
    /* Same behaviour through the prepared statements, in both modes. */
    ck_assert_int_eq(write_tok(c, 9, "UPDATE pp SET v = 1 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(write_tok(c, 8, "UPDATE pp SET v = 2 WHERE id = 1", &e), FENCE_STALE);
    ok(c, "BEGIN");
    ck_assert_int_eq(fence_pg_set_token(c, 9, "pp-res", &e), FENCE_OK);
    ok(c, "COMMIT");
    ok(c, "BEGIN");
    ck_assert_int_eq(fence_pg_set_token(c, 8, "pp-res", &e), FENCE_STALE);
    ck_assert_uint_eq(e.highest, 9);
    ok(c, "ROLLBACK");
    ck_assert_int_eq(pipelined(c, 10, "pp-res", "UPDATE pp SET v = 3 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM pp WHERE id = 1"), 10);
    ck_assert_int_eq(pipelined(c, 9, NULL, "UPDATE pp SET v = 4 WHERE id = 1", &e), FENCE_STALE);

    /* Dropped behind the library's back: one clear failure, then it
     * falls back to unprepared statements; prepare again works. */
    ok(c, "DEALLOCATE ALL");
    ok(c, "BEGIN");
    ck_assert_int_eq(fence_pg_set_token(c, 11, NULL, &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "26000");
    ok(c, "ROLLBACK");
    ck_assert_int_eq(write_tok(c, 11, "UPDATE pp SET v = 5 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(fence_pg_prepare(c, &e), FENCE_OK);
    ck_assert_int_eq(write_tok(c, 12, "UPDATE pp SET v = 6 WHERE id = 1", &e), FENCE_OK);
    /* PQreset forgets them (the new session has none). */
    PQreset(c);
    ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
    ck_assert_int_eq(write_tok(c, 13, "UPDATE pp SET v = 7 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM pp WHERE id = 1"), 13);
    PQfinish(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* C API: bad arguments and states                                      */
/* ------------------------------------------------------------------ */

START_TEST(api_bad_arguments)
{
    fence_pg_error e;
    uint64_t m = 7;
    char big[FENCE_PG_RESOURCE_MAX + 2];
    memset(big, 'r', sizeof big - 1);
    big[sizeof big - 1] = '\0';

    /* NULL handles. */
    ck_assert_int_eq(fence_pg_set_token(NULL, 1, NULL, &e), FENCE_EINVAL);
    ck_assert_int_eq(e.status, FENCE_EINVAL);
    ck_assert(strlen(e.message) > 0);
    ck_assert_int_eq(fence_pg_set_token(NULL, 1, NULL, NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_pg_send_token(NULL, 1, NULL, &e), FENCE_EINVAL);
    ck_assert_int_eq(fence_pg_result(NULL, &e), FENCE_EINVAL);
    ck_assert(strlen(e.message) > 0);
    ck_assert_int_eq(fence_pg_result(NULL, NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_pg_mark(NULL, "r", &m, &e), FENCE_EINVAL);
    ck_assert_uint_eq(m, 0);
    ck_assert_int_eq(fence_pg_install(NULL, &e), FENCE_EINVAL);

    PGconn *c = db();
    /* Tokens. */
    ok(c, "BEGIN");
    ck_assert_int_eq(fence_pg_set_token(c, 0, NULL, &e), FENCE_ENOTOKEN);
    ck_assert_int_eq(fence_pg_set_token(c, (uint64_t)INT64_MAX + 1, NULL, &e), FENCE_ENOTOKEN);
    ck_assert_int_eq(fence_pg_set_token(c, UINT64_MAX, "r", &e), FENCE_ENOTOKEN);
    ck_assert_int_eq(fence_pg_set_token(c, FENCE_PG_TOKEN_MAX, NULL, &e), FENCE_OK);
    ck_assert_str_eq(text1(c, "SELECT current_setting('fence.token')"), "9223372036854775807");
    /* Resource names. */
    ck_assert_int_eq(fence_pg_set_token(c, 5, "", &e), FENCE_EINVAL);
    ck_assert_int_eq(fence_pg_set_token(c, 5, big, &e), FENCE_EINVAL);
    big[FENCE_PG_RESOURCE_MAX] = '\0'; /* exactly the maximum */
    ck_assert_int_eq(fence_pg_set_token(c, 5, big, &e), FENCE_OK);
    ck_assert_int_eq(fence_pg_mark(c, "", &m, &e), FENCE_EINVAL);
    ck_assert_int_eq(fence_pg_mark(c, NULL, &m, &e), FENCE_EINVAL);
    ck_assert_int_eq(fence_pg_mark(c, "r", NULL, &e), FENCE_EINVAL);
    ok(c, "COMMIT");

    /* States: not in a transaction block (would not fence), failed
     * transaction, pipeline mode. */
    ck_assert_int_eq(fence_pg_set_token(c, 5, NULL, &e), FENCE_ESTATE);
    ck_assert_ptr_nonnull(strstr(e.message, "BEGIN"));
    ck_assert_int_eq(fence_pg_set_token(c, 5, "r", NULL), FENCE_ESTATE);
    ck_assert_int_eq(num(c, "SELECT fence.mark('r')"), 0); /* nothing advanced */
    ok(c, "BEGIN");
    run(c, "SELECT 1/0", &e);
    ck_assert_str_eq(e.sqlstate, "22012");
    ck_assert_int_eq(fence_pg_set_token(c, 5, NULL, &e), FENCE_ESTATE);
    ck_assert_int_eq(fence_pg_mark(c, "r", &m, &e), FENCE_ESTATE);
    ok(c, "ROLLBACK");
    ck_assert_int_eq(fence_pg_send_token(c, 5, NULL, &e), FENCE_ESTATE);
    ck_assert_int_eq(PQenterPipelineMode(c), 1);
    ck_assert_int_eq(fence_pg_set_token(c, 5, NULL, &e), FENCE_ESTATE);
    ck_assert_int_eq(fence_pg_mark(c, "r", &m, &e), FENCE_ESTATE);
    ck_assert_int_eq(fence_pg_install(c, &e), FENCE_ESTATE);
    ck_assert_int_eq(fence_pg_send_token(c, 0, NULL, &e), FENCE_ENOTOKEN);
    ck_assert_int_eq(fence_pg_send_token(c, 5, "", &e), FENCE_EINVAL);
    ck_assert_int_eq(PQexitPipelineMode(c), 1);

    /* Results: success, and errors that are not fence's. */
    PGresult *r = PQexec(c, "SELECT 1");
    ck_assert_int_eq(fence_pg_result(r, &e), FENCE_OK);
    ck_assert_str_eq(e.sqlstate, "");
    PQclear(r);
    r = PQexec(c, "SELEKT 1");
    ck_assert_int_eq(fence_pg_result(r, &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "42601");
    ck_assert(strlen(e.message) > 0);
    ck_assert_uint_eq(e.offered, 0);
    PQclear(r);
    /* A 23Q01 raised by someone else (no machine-readable DETAIL). */
    r = PQexec(c, "DO $$ BEGIN RAISE EXCEPTION 'custom stale' USING ERRCODE = '23Q01'; END $$");
    ck_assert_int_eq(fence_pg_result(r, &e), FENCE_STALE);
    ck_assert_uint_eq(e.offered, 0);
    ck_assert_str_eq(e.message, "custom stale");
    PQclear(r);
    r = PQexec(c, "DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = '23Q01', "
                  "DETAIL = 'offered=99999999999999999999 highest=1 kind=table object=t'; END $$");
    ck_assert_int_eq(fence_pg_result(r, &e), FENCE_STALE);
    ck_assert_uint_eq(e.offered, 0); /* overflow: not parsed */
    PQclear(r);
    PQfinish(c);

    /* A database without fence.sql: a clear FENCE_EDB. */
    PGconn *plain = connect_as(NULL, NULL);
    ok(plain, "BEGIN");
    ck_assert_int_eq(fence_pg_set_token(plain, 5, "r", &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "3F000"); /* schema "fence" does not exist */
    ok(plain, "ROLLBACK");
    PQfinish(plain);

    /* A connection that failed. */
    PGconn *bad = PQconnectdb("host=127.0.0.1 port=1 connect_timeout=2");
    ck_assert_int_eq(fence_pg_set_token(bad, 5, NULL, &e), FENCE_ECONN);
    ck_assert(strlen(e.message) > 0);
    ck_assert_int_eq(fence_pg_send_token(bad, 5, NULL, &e), FENCE_ECONN);
    ck_assert_int_eq(fence_pg_mark(bad, "r", &m, &e), FENCE_ECONN);
    ck_assert_int_eq(fence_pg_install(bad, &e), FENCE_ECONN);
    PQfinish(bad);
}
END_TEST

static Suite *pg_suite(void)
{
    Suite *s = suite_create("pg");
    TCase *t = tcase_create("pg");
    tcase_add_unchecked_fixture(t, setup_db, teardown_db);
    tcase_set_timeout(t, 30);
    tcase_add_test(t, install_idempotent_and_versioned);
    tcase_add_test(t, row_stale_update_delete_insert);
    tcase_add_test(t, row_client_cannot_write_the_column);
    tcase_add_test(t, row_bad_tokens_rejected);
    tcase_add_test(t, row_interleavings);
    tcase_add_test(t, resource_interleavings);
    tcase_add_test(t, resource_concurrent_create);
    tcase_add_test(t, retrofit_rails_lock_version);
    tcase_add_test(t, permissive_mode);
    tcase_add_test(t, copy_is_fenced);
    tcase_add_test(t, truncate_refused_and_unprotect);
    tcase_add_test(t, app_role_cannot_bypass);
    tcase_add_test(t, install_refuses_what_another_role_owns);
    tcase_add_test(t, row_hot_path_runs_no_trigger_function);
    tcase_add_test(t, row_later_trigger_cannot_rewrite_the_stamp);
    tcase_add_test(t, protect_refuses_inheritance_parent);
    tcase_add_test(t, install_ignores_hostile_search_path);
    tcase_add_test(t, install_as_non_superuser_protect_as_owner);
    tcase_add_test(t, upgrade_from_version_1);
    tcase_add_test(t, names_are_quoted);
    tcase_add_test(t, pipeline_send_token);
    tcase_add_test(t, prepared_statements);
    tcase_add_test(t, api_bad_arguments);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(pg_suite());
}
