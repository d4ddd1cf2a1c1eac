/* test_pg_interop.c -- the two per-row implementations side by side, and
 * the PostgreSQL extension's own behaviour (lib/pgext).
 *
 * One database holds fence.sql and the extension (CREATE EXTENSION fence):
 * a table protected 'plpgsql' and one protected 'c' share the resource
 * marks, and every rejection (stale, missing, malformed, rewritten after
 * the check) must be the same through both -- SQLSTATE, message, DETAIL,
 * HINT, SCHEMA/TABLE/COLUMN fields, and what fence_pg_classify makes of
 * it.  Then: switching a table's implementation by re-running protect(),
 * DROP EXTENSION (refused while a table uses it; afterwards the portable
 * install keeps working), CREATE EXTENSION before fence.sql version 4,
 * ALTER EXTENSION UPDATE, and what only the C guard does: refusing a token
 * set for the session, and a write when a later BEFORE trigger has no
 * check to catch it.  Runs once (scripts/run-suites), whatever
 * FENCE_TEST_PG_IMPL says. */
#include "pgutil.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Everything an error carries that the two implementations must agree on. */
typedef struct err {
    fence_status status;
    fence_stale stale;
    char state[6];
    char msg[600];
    char detail[600];
    char hint[600];
    char schema[64];
    char table[64];
    char column[64];
} err;

static void field(const PGresult *r, int code, char *out, size_t n)
{
    const char *v = PQresultErrorField(r, code);
    snprintf(out, n, "%s", v != NULL ? v : "");
}

/* Replace every `from` in s (of size n) by `to` (same length or shorter). */
static void subst(char *s, const char *from, const char *to)
{
    size_t lf = strlen(from), lt = strlen(to);
    ck_assert(lt <= lf);
    char *p = s;
    while ((p = strstr(p, from)) != NULL) {
        memcpy(p, to, lt);
        memmove(p + lt, p + lf, strlen(p + lf) + 1);
        p += lt;
    }
}

/* One transaction: the token as the raw setting (NULL: none, set LOCAL
 * with set_config), then sql; rolled back.  The error goes into *e, with
 * the table name `name` replaced by "T" everywhere, so that the
 * implementations' errors compare equal. */
static void attempt(PGconn *c, const char *raw, const char *sql, const char *name, err *e)
{
    memset(e, 0, sizeof *e);
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
    PGresult *r = PQexec(c, sql);
    e->status = fence_pg_classify(c, r, &e->stale);
    field(r, PG_DIAG_SQLSTATE, e->state, sizeof e->state);
    field(r, PG_DIAG_MESSAGE_PRIMARY, e->msg, sizeof e->msg);
    field(r, PG_DIAG_MESSAGE_DETAIL, e->detail, sizeof e->detail);
    field(r, PG_DIAG_MESSAGE_HINT, e->hint, sizeof e->hint);
    field(r, PG_DIAG_SCHEMA_NAME, e->schema, sizeof e->schema);
    field(r, PG_DIAG_TABLE_NAME, e->table, sizeof e->table);
    field(r, PG_DIAG_COLUMN_NAME, e->column, sizeof e->column);
    PQclear(r);
    ok(c, "ROLLBACK");
    subst(e->msg, name, "T");
    subst(e->detail, name, "T");
    subst(e->table, name, "T");
    subst(e->stale.object, name, "T");
}

/* tmpl with each "TBL" replaced by tbl, into out (512 bytes). */
static void fill(char *out, const char *tmpl, const char *tbl)
{
    size_t n = 0;
    for (const char *p = tmpl; *p != '\0';) {
        const char *add = strncmp(p, "TBL", 3) == 0 ? tbl : NULL;
        size_t len = add != NULL ? strlen(add) : 1;
        ck_assert(n + len < 512);
        memcpy(out + n, add != NULL ? add : p, len);
        n += len;
        p += add != NULL ? 3 : 1;
    }
    out[n] = '\0';
}

/* The same write on both tables (TBL in sql is the table) must fail the
 * same way, with SQLSTATE state. */
static void same_error(PGconn *c, const char *raw, const char *sql_tmpl, const char *state)
{
    char sql_p[512], sql_c[512];
    err ep, ec;
    fill(sql_p, sql_tmpl, "acct_p");
    fill(sql_c, sql_tmpl, "acct_c");
    attempt(c, raw, sql_p, "acct_p", &ep);
    attempt(c, raw, sql_c, "acct_c", &ec);
    ck_assert_msg(strcmp(ep.state, state) == 0, "plpgsql: '%s' gave %s (%s), expected %s", sql_p,
                  ep.state, ep.msg, state);
    ck_assert_str_eq(ec.state, ep.state);
    ck_assert_int_eq(ec.status, ep.status);
    ck_assert_str_eq(ec.msg, ep.msg);
    ck_assert_str_eq(ec.detail, ep.detail);
    ck_assert_str_eq(ec.hint, ep.hint);
    ck_assert_str_eq(ec.schema, ep.schema);
    ck_assert_str_eq(ec.table, ep.table);
    ck_assert_str_eq(ec.column, ep.column);
    ck_assert_uint_eq(ec.stale.offered, ep.stale.offered);
    ck_assert_uint_eq(ec.stale.highest, ep.stale.highest);
    ck_assert_int_eq(ec.stale.kind, ep.stale.kind);
    ck_assert_int_eq(ec.stale.reason, ep.stale.reason);
    ck_assert_str_eq(ec.stale.object, ep.stale.object);
}

/* The implementation fence.protected reports for tbl. */
static const char *impl_of(PGconn *c, const char *tbl)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT implementation FROM fence.protected WHERE tbl = '%s'::regclass",
             tbl);
    return text1(c, sql);
}

/* How many of tbl's triggers call a function of the extension. */
static long long c_triggers(PGconn *c, const char *tbl)
{
    char sql[320];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_trigger WHERE tgrelid = '%s'::regclass"
             " AND tgfoid IN ('fence.c_guard()'::regprocedure, 'fence.c_check()'::regprocedure)",
             tbl);
    return num(c, sql);
}

/* acct_p protected 'plpgsql', acct_c protected 'c', rows 1..3 unstamped;
 * the extension in the fixture's database. */
static PGconn *two_tables(void)
{
    PGconn *c = db();
    ok(c, "CREATE EXTENSION IF NOT EXISTS fence");
    ok(c, "DROP TABLE IF EXISTS acct_p, acct_c");
    ok(c, "CREATE TABLE acct_p (id int PRIMARY KEY, v int, by bigint);"
          "CREATE TABLE acct_c (LIKE acct_p INCLUDING ALL);"
          "INSERT INTO acct_p SELECT g, 0, 0 FROM generate_series(1, 3) g;"
          "INSERT INTO acct_c SELECT * FROM acct_p;"
          "SELECT fence.protect('acct_p', 'fence_token', false, 'plpgsql');"
          "SELECT fence.protect('acct_c', 'fence_token', false, 'c')");
    ck_assert_str_eq(impl_of(c, "acct_p"), "plpgsql");
    ck_assert_str_eq(impl_of(c, "acct_c"), "c");
    ck_assert_int_eq(c_triggers(c, "acct_p"), 0);
    ck_assert_int_ge(c_triggers(c, "acct_c"), 3);
    return c;
}

/* ------------------------------------------------------------------ */
/* Both implementations, one database                                   */
/* ------------------------------------------------------------------ */

START_TEST(same_rules_same_errors)
{
    PGconn *c = two_tables();
    const char *both[2] = {"acct_p", "acct_c"};
    char sql[256];
    for (int i = 0; i < 2; i++) {
        snprintf(sql, sizeof sql, "UPDATE %s SET v = 1, fence_token = 99999 WHERE id = 1", both[i]);
        ck_assert_int_eq(write_tok(c, 10, sql, NULL), FENCE_OK);
        snprintf(sql, sizeof sql, "SELECT fence_token FROM %s WHERE id = 1", both[i]);
        ck_assert_int_eq(num(c, sql), 10); /* stamped, the client's value overwritten */
        snprintf(sql, sizeof sql, "INSERT INTO %s VALUES (4, 0, 0, 5)", both[i]);
        ck_assert_int_eq(write_tok(c, 7, sql, NULL), FENCE_OK);
        snprintf(sql, sizeof sql, "SELECT fence_token FROM %s WHERE id = 4", both[i]);
        ck_assert_int_eq(num(c, sql), 7);
        snprintf(sql, sizeof sql, "DELETE FROM %s WHERE id = 4", both[i]);
        ck_assert_int_eq(write_tok(c, 7, sql, NULL), FENCE_OK);
        /* The hot path: the same token again, and a higher one. */
        snprintf(sql, sizeof sql, "UPDATE %s SET v = v + 1 WHERE id = 1", both[i]);
        ck_assert_int_eq(write_tok(c, 10, sql, NULL), FENCE_OK);
        ck_assert_int_eq(write_tok(c, 11, sql, NULL), FENCE_OK);
    }

    same_error(c, "10", "UPDATE TBL SET v = 2 WHERE id = 1", "23Q01");      /* older */
    same_error(c, "3", "DELETE FROM TBL WHERE id = 1", "23Q01");
    same_error(c, NULL, "UPDATE TBL SET v = 2 WHERE id = 1", "23Q02");      /* missing */
    same_error(c, "", "INSERT INTO TBL VALUES (9, 0, 0)", "23Q02");
    same_error(c, "007", "UPDATE TBL SET v = 2 WHERE id = 1", "23Q02");     /* malformed */
    same_error(c, "9223372036854775808", "DELETE FROM TBL WHERE id = 2", "23Q02");
    same_error(c, "-1", "INSERT INTO TBL VALUES (9, 0, 0)", "23Q02");
    same_error(c,
               "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
               "'\\ 0123456789012345678901234567890123456789",
               "UPDATE TBL SET v = 2 WHERE id = 1", "23Q02");
    same_error(c, "12", "TRUNCATE TBL", "23Q03");

    /* The stale rejection as the C client reads it. */
    err e;
    attempt(c, "10", "UPDATE acct_c SET v = 2 WHERE id = 1", "acct_c", &e);
    ck_assert_int_eq(e.status, FENCE_STALE);
    ck_assert_uint_eq(e.stale.offered, 10);
    ck_assert_uint_eq(e.stale.highest, 11);
    ck_assert_int_eq(e.stale.kind, FENCE_OBJECT_TABLE);
    ck_assert_int_eq(e.stale.reason, FENCE_STALE_OLDER);
    ck_assert_str_eq(e.stale.object, "public.T");
    ck_assert_str_eq(e.column, "fence_token");
    PQfinish(c);
}
END_TEST

START_TEST(same_permissive_mode)
{
    PGconn *c = two_tables();
    ok(c, "SELECT fence.set_mode('acct_p', 'permissive'), fence.set_mode('acct_c', 'permissive')");
    ck_assert_str_eq(impl_of(c, "acct_c"), "c");
    ck_assert_str_eq(impl_of(c, "acct_p"), "plpgsql");
    const char *both[2] = {"acct_p", "acct_c"};
    char sql[256];
    for (int i = 0; i < 2; i++) {
        snprintf(sql, sizeof sql, "UPDATE %s SET v = 1 WHERE id = 1", both[i]);
        ck_assert_int_eq(write_tok(c, 5, sql, NULL), FENCE_OK);
        /* No token: admitted, the stamp kept (whatever is written). */
        snprintf(sql, sizeof sql, "UPDATE %s SET v = 2, fence_token = 1 WHERE id = 1", both[i]);
        ck_assert_int_eq(write_raw(c, NULL, sql, NULL), FENCE_OK);
        snprintf(sql, sizeof sql, "SELECT fence_token FROM %s WHERE id = 1", both[i]);
        ck_assert_int_eq(num(c, sql), 5);
        snprintf(sql, sizeof sql, "INSERT INTO %s VALUES (5, 0, 0, 77)", both[i]);
        ck_assert_int_eq(write_raw(c, "", sql, NULL), FENCE_OK);
        snprintf(sql, sizeof sql, "SELECT fence_token FROM %s WHERE id = 5", both[i]);
        ck_assert_int_eq(num(c, sql), 0);
    }
    same_error(c, "4", "UPDATE TBL SET v = 3 WHERE id = 1", "23Q01");
    same_error(c, "x", "UPDATE TBL SET v = 3 WHERE id = 1", "23Q02");
    PQfinish(c);
}
END_TEST

/* A BEFORE trigger firing after the guard that rewrites the column: the
 * check (added by protect()) refuses it the same way through both. */
START_TEST(same_check_of_a_later_trigger)
{
    PGconn *c = two_tables();
    ok(c, "CREATE OR REPLACE FUNCTION zero_token() RETURNS trigger LANGUAGE plpgsql AS"
          " $$BEGIN NEW.fence_token := 0; RETURN NEW; END$$");
    ok(c, "CREATE TRIGGER zzz_zero BEFORE INSERT OR UPDATE ON acct_p FOR EACH ROW"
          " EXECUTE FUNCTION zero_token();"
          "CREATE TRIGGER zzz_zero BEFORE INSERT OR UPDATE ON acct_c FOR EACH ROW"
          " EXECUTE FUNCTION zero_token();"
          "SELECT fence.protect('acct_p', 'fence_token', false, 'plpgsql');"
          "SELECT fence.protect('acct_c', 'fence_token', false, 'c')");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'zz_fence_check_%'"
                            " AND tgrelid IN ('acct_p'::regclass, 'acct_c'::regclass)"),
                     4);
    same_error(c, "8", "UPDATE TBL SET v = 1 WHERE id = 1", "23Q03");
    same_error(c, "8", "INSERT INTO TBL VALUES (6, 0, 0)", "23Q03");
    PQfinish(c);
}
END_TEST

/* Resource marks are one table whatever protects the rows: a writer made
 * stale at the resource through one table is stale for the other. */
START_TEST(same_marks)
{
    PGconn *c = two_tables();
    PGconn *c2 = db();
    outcome e;
    const char *res = tu_name("interop");
    ok(c, "BEGIN");
    ck_assert_int_eq(set_tok(c, 20, res, &e), FENCE_OK);
    ok(c, "UPDATE acct_p SET v = 20 WHERE id = 1");
    ok(c, "UPDATE acct_c SET v = 20 WHERE id = 1");
    ok(c, "COMMIT");
    char holder[FENCE_HOLDER_LEN + 1];
    ck_assert_uint_eq(mark_of(c, res, holder), 20);

    const char *both[2] = {"acct_p", "acct_c"};
    for (int i = 0; i < 2; i++) {
        char sql[256];
        snprintf(sql, sizeof sql, "UPDATE %s SET v = 15 WHERE id = 2", both[i]);
        ok(c2, "BEGIN");
        ck_assert_int_eq(set_tok(c2, 15, res, &e), FENCE_STALE);
        ck_assert_uint_eq(e.stale.highest, 20 + (uint64_t)i);
        ck_assert_int_eq(e.stale.kind, FENCE_OBJECT_RESOURCE);
        ok(c2, "ROLLBACK");
        /* Through the pipeline as the library sends it. */
        ck_assert_int_eq(pipelined_h(c2, 15, NULL, res, sql, &e), FENCE_STALE);
        ck_assert_str_eq(e.sqlstate, "23Q01");
        ck_assert_str_eq(e.stale.object, res);
        ck_assert_int_eq(pipelined_h(c2, 21 + (uint64_t)i, NULL, res, sql, &e), FENCE_OK);
    }
    ck_assert_uint_eq(mark_of(c, res, holder), 22);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM acct_p WHERE id = 2"), 21);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM acct_c WHERE id = 2"), 22);
    PQfinish(c2);
    PQfinish(c);
}
END_TEST

/* protect() again with the other implementation switches a table, keeping
 * its stamps; protect() without one picks 'c' while the extension is
 * there. */
START_TEST(switch_implementation)
{
    PGconn *c = two_tables();
    ck_assert_int_eq(write_tok(c, 30, "UPDATE acct_p SET v = 1", NULL), FENCE_OK);
    ok(c, "SELECT fence.protect('acct_p', 'fence_token', false, 'c')");
    ck_assert_str_eq(impl_of(c, "acct_p"), "c");
    ck_assert_int_ge(c_triggers(c, "acct_p"), 3);
    ck_assert_int_eq(write_tok(c, 29, "UPDATE acct_p SET v = 2 WHERE id = 1", NULL), FENCE_STALE);
    ck_assert_int_eq(write_tok(c, 30, "UPDATE acct_p SET v = 2 WHERE id = 1", NULL), FENCE_OK);

    ok(c, "SELECT fence.protect('acct_p', 'fence_token', false, 'plpgsql')");
    ck_assert_str_eq(impl_of(c, "acct_p"), "plpgsql");
    ck_assert_int_eq(c_triggers(c, "acct_p"), 0);
    ck_assert_int_eq(write_tok(c, 29, "UPDATE acct_p SET v = 3 WHERE id = 1", NULL), FENCE_STALE);
    ck_assert_int_eq(write_tok(c, 31, "UPDATE acct_p SET v = 3 WHERE id = 1", NULL), FENCE_OK);

    ok(c, "CREATE TABLE acct_d (id int PRIMARY KEY); SELECT fence.protect('acct_d')");
    ck_assert_str_eq(impl_of(c, "acct_d"), "c");
    fails(c, "SELECT fence.protect('acct_d', 'fence_token', false, 'cobol')", "22023");
    ok(c, "DROP TABLE acct_d");
    PQfinish(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The extension's life: CREATE, ALTER ... UPDATE, DROP                  */
/* ------------------------------------------------------------------ */

START_TEST(extension_needs_fence_schema)
{
    char name[NAME_BUF];
    side_db("noext", NULL, name);
    PGconn *c = connect_as(name, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    outcome e;
    /* No fence.sql at all: the script reads nothing of fence.sql (so that
     * a restore may create the extension before the schema's objects), and
     * PostgreSQL makes the control file's schema.  Nothing is fenced
     * through it alone: no writer can bind a token (fence.use_token() is
     * fence.sql's), so its guard refuses every write; fence.sql then
     * installs into the schema. */
    ck_assert_int_eq(run(c, "CREATE EXTENSION fence", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_proc WHERE proname = 'use_token'"), 0);
    ok(c, "CREATE TABLE lone (id int PRIMARY KEY, fence_token bigint NOT NULL DEFAULT 0);"
          "CREATE TRIGGER g BEFORE INSERT OR UPDATE OR DELETE ON lone FOR EACH ROW"
          " EXECUTE FUNCTION fence.c_guard('fence_token', 'strict')");
    fails(c, "BEGIN; SET LOCAL fence.token = 5; INSERT INTO lone VALUES (1)", "23Q02");
    ok(c, "ROLLBACK; DROP TABLE lone");
    ck_assert_int_eq(fence_pg_install(c), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence.version()"), PG_SQL_VERSION);
    ck_assert_str_eq(text1(c, "SELECT extversion FROM pg_extension WHERE extname = 'fence'"), "1.5");
    ck_assert_str_eq(text1(c, "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n"
                              " ON n.oid = e.extnamespace WHERE e.extname = 'fence'"),
                     "fence");
    /* Re-running fence.sql with the extension there keeps both. */
    ck_assert_int_eq(fence_pg_install(c), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence.c_version()"), 2);
    PQfinish(c);
    drop_side_db(name);
}
END_TEST

/* The usual split of roles: a non-superuser "fence admin" installs
 * fence.sql (and owns schema fence), a superuser adds the extension (its
 * functions are the superuser's), and the admin's later installs and
 * protect() calls keep working with it. */
START_TEST(extension_with_admin_installer)
{
    char admin[NAME_BUF], name[NAME_BUF];
    side_role("fadmin", admin);
    side_db("adm", admin, name);
    PGconn *a = connect_as(name, admin);
    PQsetNoticeProcessor(a, quiet_notice, NULL);
    ck_assert_int_eq(fence_pg_install(a), FENCE_OK);
    PGconn *su = connect_as(name, NULL);
    PQsetNoticeProcessor(su, quiet_notice, NULL);
    create_extension(su);
    ck_assert_int_eq(fence_pg_install(a), FENCE_OK);
    ok(a, "CREATE TABLE t (id int PRIMARY KEY, v int); INSERT INTO t VALUES (1, 0);"
          "SELECT fence.protect('t')");
    ck_assert_str_eq(impl_of(a, "t"), "c");
    ck_assert_int_eq(write_tok(a, 5, "UPDATE t SET v = 1", NULL), FENCE_OK);
    ck_assert_int_eq(write_tok(a, 4, "UPDATE t SET v = 2", NULL), FENCE_STALE);
    ck_assert_int_eq(fence_pg_install(a), FENCE_OK);
    PQfinish(su);
    PQfinish(a);
    drop_side_db(name);
}
END_TEST

/* The superuser who runs CREATE EXTENSION never runs code of the schema's
 * (non-superuser) owner: a fence.version() replaced by the admin with one
 * that makes it superuser when a superuser calls it is read, not run --
 * its body is not "SELECT <version>", so the extension is refused -- and
 * the admin stays what it was. */
START_TEST(extension_runs_no_admin_code)
{
    char admin[NAME_BUF], name[NAME_BUF], sql[512];
    side_role("fadmin2", admin);
    side_db("adm2", admin, name);
    PGconn *a = connect_as(name, admin);
    PQsetNoticeProcessor(a, quiet_notice, NULL);
    ck_assert_int_eq(fence_pg_install(a), FENCE_OK);
    snprintf(sql, sizeof sql,
             "CREATE OR REPLACE FUNCTION fence.version() RETURNS integer LANGUAGE plpgsql AS $f$"
             " BEGIN IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN"
             " EXECUTE 'ALTER ROLE %s SUPERUSER'; END IF; RETURN 4; END $f$",
             admin);
    ok(a, sql);
    PGconn *su = connect_as(name, NULL);
    PQsetNoticeProcessor(su, quiet_notice, NULL);
    outcome e;
    /* The extension's script calls nothing of the schema's. */
    ck_assert_int_eq(run(su, "CREATE EXTENSION fence", &e), FENCE_OK);
    snprintf(sql, sizeof sql, "SELECT rolsuper::int FROM pg_roles WHERE rolname = '%s'", admin);
    ck_assert_int_eq(num(su, sql), 0);
    ok(su, "DROP EXTENSION fence");
    /* The real fence.sql again: accepted. */
    ck_assert_int_eq(fence_pg_install(a), FENCE_OK);
    create_extension(su);
    ck_assert_int_eq(num(su, sql), 0);
    PQfinish(su);
    PQfinish(a);
    drop_side_db(name);
}
END_TEST

/* pg_dump | psql: the dump creates the extension before the fence.sql
 * objects it holds (with check_function_bodies off, which lets CREATE
 * EXTENSION skip its fence.sql check), and the copy is fenced like the
 * original, with the same implementations. */
START_TEST(extension_dump_and_restore)
{
    char src[NAME_BUF], dst[NAME_BUF], cmd[1024];
    side_db("dsrc", NULL, src);
    side_db("ddst", NULL, dst);
    PGconn *c = connect_as(src, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    ck_assert_int_eq(fence_pg_install(c), FENCE_OK);
    create_extension(c);
    ok(c, "CREATE TABLE tc (id int PRIMARY KEY, v int); INSERT INTO tc VALUES (1, 0);"
          "CREATE TABLE tp (LIKE tc INCLUDING ALL); INSERT INTO tp VALUES (1, 0);"
          "SELECT fence.protect('tc'), fence.protect('tp', 'fence_token', false, 'plpgsql')");
    ck_assert_int_eq(write_tok(c, 5, "UPDATE tc SET v = 1", NULL), FENCE_OK);
    ck_assert_int_eq(write_tok(c, 5, "UPDATE tp SET v = 1", NULL), FENCE_OK);
    ck_assert_int_eq(advance_h(c, 9, NULL, "dumped", NULL), FENCE_OK);
    PQfinish(c);

    const char *bin = tu_env("FENCE_TEST_PG_BINDIR");
    snprintf(cmd, sizeof cmd,
             "'%s/pg_dump' -d %s | '%s/psql' -X -q -v ON_ERROR_STOP=1 -d %s >/dev/null 2>&1", bin,
             src, bin, dst);
    ck_assert_msg(system(cmd) == 0, "%s failed", cmd);

    c = connect_as(dst, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    ck_assert_str_eq(impl_of(c, "tc"), "c");
    ck_assert_str_eq(impl_of(c, "tp"), "plpgsql");
    ck_assert_int_eq(write_tok(c, 4, "UPDATE tc SET v = 2", NULL), FENCE_STALE);
    ck_assert_int_eq(write_tok(c, 4, "UPDATE tp SET v = 2", NULL), FENCE_STALE);
    ck_assert_int_eq(write_tok(c, 5, "UPDATE tc SET v = 2", NULL), FENCE_OK);
    ck_assert_int_eq(advance_h(c, 8, NULL, "dumped", NULL), FENCE_STALE);
    ck_assert_int_eq(fence_pg_install(c), FENCE_OK);
    PQfinish(c);
    drop_side_db(src);
    drop_side_db(dst);
}
END_TEST

/* 1.5 is installed directly (fence--1.5.sql); every version before 1.4
 * has a direct update script to 1.4 and 1.4 one to 1.5: the old
 * versions' scripts, which create functions this module no longer has,
 * are never run. */
START_TEST(extension_update_path)
{
    char name[NAME_BUF];
    side_db("upd", NULL, name);
    PGconn *c = connect_as(name, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    ck_assert_int_eq(fence_pg_install(c), FENCE_OK);
    create_extension(c);
    ok(c, "ALTER EXTENSION fence UPDATE");
    ck_assert_str_eq(text1(c, "SELECT extversion FROM pg_extension WHERE extname = 'fence'"), "1.5");
    ck_assert_str_eq(text1(c, "SELECT string_agg(source || '>' || path, ' ' ORDER BY source)"
                              " FROM pg_extension_update_paths('fence') WHERE target = '1.5'"),
                     "1.0>1.0--1.4--1.5 1.1>1.1--1.4--1.5 1.2>1.2--1.4--1.5 1.3>1.3--1.4--1.5 "
                     "1.4>1.4--1.5");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_extension_update_paths('fence')"
                            " WHERE target NOT IN ('1.4', '1.5') AND path IS NOT NULL"),
                     0);
    ck_assert_str_eq(text1(c, "SELECT string_agg(proname, ' ' ORDER BY proname) FROM pg_proc"
                              " WHERE pronamespace = 'fence'::regnamespace AND proname LIKE 'c\\_%'"),
                     "c_check c_guard c_use_token c_version");
    PQfinish(c);
    drop_side_db(name);
}
END_TEST

/* DROP EXTENSION without CASCADE is refused while a table is protected
 * 'c' (its triggers depend on the functions); after re-protecting it
 * 'plpgsql' it goes, and the portable install keeps working (protect()
 * refuses 'c' and picks 'plpgsql'). */
START_TEST(drop_extension)
{
    char name[NAME_BUF];
    side_db("drop", NULL, name);
    PGconn *c = connect_as(name, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    ck_assert_int_eq(fence_pg_install(c), FENCE_OK);
    create_extension(c);
    ok(c, "CREATE TABLE t (id int PRIMARY KEY, v int);"
          "INSERT INTO t SELECT g, 0 FROM generate_series(1, 3) g;"
          "SELECT fence.protect('t')");
    ck_assert_str_eq(impl_of(c, "t"), "c");
    ck_assert_int_eq(write_tok(c, 5, "UPDATE t SET v = 1", NULL), FENCE_OK);
    fails(c, "DROP EXTENSION fence", "2BP01");
    ck_assert_int_eq(write_tok(c, 4, "UPDATE t SET v = 2", NULL), FENCE_STALE);

    ok(c, "SELECT fence.protect('t', 'fence_token', false, 'plpgsql')");
    ok(c, "DROP EXTENSION fence");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_proc WHERE proname LIKE 'c\\_%'"
                            " AND pronamespace = 'fence'::regnamespace"),
                     0);
    ck_assert_int_eq(write_tok(c, 4, "UPDATE t SET v = 2", NULL), FENCE_STALE);
    ck_assert_int_eq(write_tok(c, 6, "UPDATE t SET v = 2", NULL), FENCE_OK);
    outcome e;
    ck_assert_int_ne(run(c, "SELECT fence.protect('t', 'fence_token', false, 'c')", &e), FENCE_OK);
    ck_assert_str_ne(e.sqlstate, "");
    ck_assert_str_eq(impl_of(c, "t"), "plpgsql");
    ok(c, "CREATE TABLE u (id int PRIMARY KEY); SELECT fence.protect('u')");
    ck_assert_str_eq(impl_of(c, "u"), "plpgsql");
    ck_assert_int_eq(fence_pg_install(c), FENCE_OK);

    /* And back: CREATE EXTENSION again, protect() picks 'c' again. */
    create_extension(c);
    ok(c, "SELECT fence.protect('u')");
    ck_assert_str_eq(impl_of(c, "u"), "c");
    PQfinish(c);
    drop_side_db(name);
}
END_TEST

/* ------------------------------------------------------------------ */
/* What only the C guard does                                           */
/* ------------------------------------------------------------------ */

/* A token left at session level (SET without LOCAL, set_config(.., false),
 * ALTER ROLE ... SET) would apply to every later transaction of a pooled
 * connection, and plain SET LOCAL does not say which transaction set it:
 * both guards refuse them alike (23Q02 reason=unbound); only
 * fence.use_token() in the writing transaction is admitted. */
START_TEST(session_token_refused_by_both)
{
    PGconn *c = two_tables();
    outcome e;
    ok(c, "SET fence.token = 6");
    same_error(c, NULL, "UPDATE TBL SET v = 1 WHERE id = 1", "23Q02");
    err x;
    attempt(c, NULL, "UPDATE acct_c SET v = 1 WHERE id = 1", "acct_c", &x);
    ck_assert_str_eq(x.detail, "reason=unbound setting=fence.token");
    ck_assert_ptr_nonnull(strstr(x.hint, "fence.use_token"));
    ck_assert_str_eq(x.table, "T");
    ck_assert_str_eq(x.column, "fence_token");
    ck_assert_int_eq(write_tok(c, 6, "UPDATE acct_c SET v = 1 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(write_tok(c, 6, "UPDATE acct_p SET v = 1 WHERE id = 1", &e), FENCE_OK);
    ok(c, "RESET fence.token");
    static const char *const tables[] = {"acct_c", "acct_p"};
    for (int i = 0; i < 2; i++) {
        char sql[256];
        snprintf(sql, sizeof sql, "BEGIN; SET LOCAL fence.token = 6; UPDATE %s SET v = 3 WHERE id = 1",
                 tables[i]);
        fails(c, sql, "23Q02");
        ok(c, "ROLLBACK");
        snprintf(sql, sizeof sql, "SELECT set_config('fence.token', '6', false); UPDATE %s SET v = 3 WHERE id = 1",
                 tables[i]);
        fails(c, sql, "23Q02");
        ok(c, "RESET fence.token");
        /* A savepoint's use_token() holds once released, not once rolled back. */
        snprintf(sql, sizeof sql, "BEGIN; SAVEPOINT a; SELECT fence.use_token(6); RELEASE a;"
                 " UPDATE %s SET v = 4 WHERE id = 1; COMMIT", tables[i]);
        ok(c, sql);
        snprintf(sql, sizeof sql, "BEGIN; SAVEPOINT a; SELECT fence.use_token(6); ROLLBACK TO a;"
                 " UPDATE %s SET v = 4 WHERE id = 1", tables[i]);
        fails(c, sql, "23Q02");
        ok(c, "ROLLBACK");
    }
    ck_assert_str_eq(text1(c, "SELECT coalesce(current_setting('fence.token', true), '')"), "");

    /* ALTER ROLE ... SET: a session value of every new connection. */
    char role[NAME_BUF], sql[512];
    side_role("sess", role);
    snprintf(sql, sizeof sql, "ALTER ROLE %s SET fence.token = '6';"
             "GRANT SELECT, UPDATE ON acct_c, acct_p TO %s", role, role);
    ok(c, sql);
    PGconn *r = connect_as(g_db, role);
    PQsetNoticeProcessor(r, quiet_notice, NULL);
    ck_assert_int_eq(run(r, "UPDATE acct_c SET v = 6 WHERE id = 1", &e), FENCE_ENOTOKEN);
    ck_assert_int_eq(run(r, "UPDATE acct_p SET v = 6 WHERE id = 1", &e), FENCE_ENOTOKEN);
    ck_assert_int_eq(write_tok(r, 6, "UPDATE acct_c SET v = 6 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(write_tok(r, 6, "UPDATE acct_p SET v = 6 WHERE id = 1", &e), FENCE_OK);
    PQfinish(r);
    PQfinish(c);
}
END_TEST

/* A BEFORE trigger added after protect() that fires after the guard: with
 * no zz_fence_check_* on the table, the C guard refuses the write until
 * protect() runs again. */
START_TEST(c_refuses_unchecked_later_trigger)
{
    PGconn *c = two_tables();
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'acct_c'::regclass"
                            " AND tgname LIKE 'zz_fence_check_%'"),
                     0); /* no later trigger at protect(): no check */
    ok(c, "CREATE TRIGGER zzz_later BEFORE UPDATE ON acct_c FOR EACH ROW"
          " EXECUTE FUNCTION suppress_redundant_updates_trigger()");
    /* Whatever else added a check meanwhile (the install's event trigger),
     * take it away: the guard must not rely on it. */
    ok(c, "DROP TRIGGER IF EXISTS zz_fence_check_upd ON acct_c;"
          "DROP TRIGGER IF EXISTS zz_fence_check_ins ON acct_c");
    err x;
    attempt(c, "5", "UPDATE acct_c SET v = 1 WHERE id = 1", "acct_c", &x);
    ck_assert_str_eq(x.state, "23Q03");
    ck_assert_ptr_nonnull(strstr(x.msg, "zzz_later"));
    ck_assert_ptr_nonnull(strstr(x.msg, "fence.protect()"));
    ck_assert_str_eq(x.detail, "trigger=zzz_later kind=table object=public.T reason=unchecked");
    /* INSERT has no later trigger: fine.  A disabled one does not fire. */
    ck_assert_int_eq(write_tok(c, 5, "INSERT INTO acct_c VALUES (7, 0, 0)", NULL), FENCE_OK);
    ok(c, "ALTER TABLE acct_c DISABLE TRIGGER zzz_later");
    ck_assert_int_eq(write_tok(c, 5, "UPDATE acct_c SET v = 1 WHERE id = 1", NULL), FENCE_OK);
    ok(c, "ALTER TABLE acct_c ENABLE TRIGGER zzz_later;"
          "DROP TRIGGER IF EXISTS zz_fence_check_upd ON acct_c");
    ck_assert_int_eq(write_tok(c, 5, "UPDATE acct_c SET v = 1 WHERE id = 1", NULL), FENCE_EDB);
    /* protect() again: the check is there, the write goes through. */
    ok(c, "SELECT fence.protect('acct_c', 'fence_token', false, 'c')");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'acct_c'::regclass"
                            " AND tgname = 'zz_fence_check_upd'"),
                     1);
    ck_assert_int_eq(write_tok(c, 5, "UPDATE acct_c SET v = 2 WHERE id = 1", NULL), FENCE_OK);
    PQfinish(c);
}
END_TEST

/* The C functions refuse to run misdeclared. */
START_TEST(c_misuse)
{
    PGconn *c = two_tables();
    fails(c, "SELECT fence.c_guard()", "39P01");
    ok(c, "CREATE TABLE odd (id int PRIMARY KEY, tok bigint NOT NULL DEFAULT 0, txt text);"
          "INSERT INTO odd VALUES (1, 0, '')");
    ok(c, "CREATE TRIGGER g BEFORE UPDATE ON odd FOR EACH ROW"
          " EXECUTE FUNCTION fence.c_guard('nope', 'strict')");
    ck_assert_int_eq(write_tok(c, 5, "UPDATE odd SET txt = 'a'", NULL), FENCE_EDB);
    ok(c, "DROP TRIGGER g ON odd; CREATE TRIGGER g BEFORE UPDATE ON odd FOR EACH ROW"
          " EXECUTE FUNCTION fence.c_guard('tok', 'loose')");
    outcome e;
    ck_assert_int_eq(write_tok(c, 5, "UPDATE odd SET txt = 'a'", &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "22023");
    ok(c, "DROP TRIGGER g ON odd; CREATE TRIGGER g BEFORE UPDATE ON odd FOR EACH ROW"
          " EXECUTE FUNCTION fence.c_guard('txt', 'strict')");
    ck_assert_int_eq(write_tok(c, 5, "UPDATE odd SET txt = 'a'", &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "22023");
    ok(c, "DROP TRIGGER g ON odd; CREATE TRIGGER g AFTER UPDATE ON odd FOR EACH ROW"
          " EXECUTE FUNCTION fence.c_guard('tok', 'strict')");
    ck_assert_int_eq(write_tok(c, 5, "UPDATE odd SET txt = 'a'", &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "39P01");
    ok(c, "DROP TRIGGER g ON odd; CREATE TRIGGER g BEFORE UPDATE ON odd FOR EACH STATEMENT"
          " EXECUTE FUNCTION fence.c_check('tok', 'strict')");
    ck_assert_int_eq(write_tok(c, 5, "UPDATE odd SET txt = 'a'", &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "39P01");
    ok(c, "DROP TABLE odd");

    /* A renamed token column fails closed until protect() runs again. */
    ok(c, "ALTER TABLE acct_c RENAME COLUMN fence_token TO ft");
    ck_assert_int_eq(write_tok(c, 5, "UPDATE acct_c SET v = 1 WHERE id = 1", &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "42703");
    ok(c, "ALTER TABLE acct_c RENAME COLUMN ft TO fence_token");
    ck_assert_int_eq(write_tok(c, 5, "UPDATE acct_c SET v = 1 WHERE id = 1", &e), FENCE_OK);
    PQfinish(c);
}
END_TEST

static Suite *pg_interop_suite(void)
{
    Suite *s = suite_create("pg_interop");
    TCase *t = pg_tcase("pg_interop");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, same_rules_same_errors);
    tcase_add_test(t, same_permissive_mode);
    tcase_add_test(t, same_check_of_a_later_trigger);
    tcase_add_test(t, same_marks);
    tcase_add_test(t, switch_implementation);
    tcase_add_test(t, extension_needs_fence_schema);
    tcase_add_test(t, extension_with_admin_installer);
    tcase_add_test(t, extension_runs_no_admin_code);
    tcase_add_test(t, extension_dump_and_restore);
    tcase_add_test(t, extension_update_path);
    tcase_add_test(t, drop_extension);
    tcase_add_test(t, session_token_refused_by_both);
    tcase_add_test(t, c_refuses_unchecked_later_trigger);
    tcase_add_test(t, c_misuse);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(pg_interop_suite());
}
