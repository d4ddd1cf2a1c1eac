/*
 * test_pg_security.c -- the security review of fence.sql (sql/postgres/)
 * against a real PostgreSQL: what a non-superuser application role cannot
 * do, install ownership, later triggers, inheritance, a hostile
 * search_path, a non-superuser admin, upgrades, odd names.  Own database
 * and roles per run (pgutil.c).
 */
#include "pgutil.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Security: a non-superuser application role                           */
/* ------------------------------------------------------------------ */

START_TEST(app_role_cannot_bypass)
{
    PGconn *c = db();
    outcome e;
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
    ck_assert_int_eq(set_tok(app, 49, "sec-res", &e), FENCE_STALE);
    ok(app, "ROLLBACK");
    ck_assert_int_eq(num(c, "SELECT fence.mark('sec-res')"), 50);

    /* With a valid token it works normally. */
    ck_assert_int_eq(write_tok(app, 60, "UPDATE sec SET v = 6 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(write_tok(app, 60, "INSERT INTO sec (id, v) VALUES (4, 4)", &e), FENCE_OK);
    ck_assert_int_eq(write_tok(app, 60, "DELETE FROM sec WHERE id = 2", &e), FENCE_OK);
    ck_assert_int_eq(write_tok(app, 59, "UPDATE sec SET v = 7 WHERE id = 1", &e), FENCE_STALE);
    ok(app, "BEGIN");
    ck_assert_int_eq(set_tok(app, 51, "sec-res", &e), FENCE_OK);
    ok(app, "COMMIT");
    uint64_t m = 0;
    ck_assert_int_eq(fence_pg_mark(app, "sec-res", &m), FENCE_OK);
    ck_assert_uint_eq(m, 51);
    /* Holders: readable through fence.mark_holder only; a repeat of 51 by
     * another holder is refused for the application role too. */
    char h[FENCE_HOLDER_LEN + 1];
    ck_assert_uint_eq(mark_of(app, "sec-res", h), 51);
    ck_assert_str_eq(h, "");
    fails(app, "SELECT holder FROM fence.marks", "42501");
    fails(app, "UPDATE fence.marks SET holder = NULL", "42501");
    ck_assert_int_eq(advance_h(app, 51, "0123456789abcdef0123456789abcdef", "sec-res", &e),
                     FENCE_STALE);
    ck_assert_int_eq(e.stale.reason, FENCE_STALE_REPEAT);
    ck_assert_int_eq(num(app, "SELECT fence.version()"), PG_SQL_VERSION);
    /* The four guards, enabled; no AFTER check (nothing fires after them). */
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'sec'::regclass"
                            " AND tgenabled = 'O'"),
                     4);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'sec'::regclass"),
                     4);
    /* The generated functions, like the generic ones, cannot be called. */
    if (strcmp(pg_impl(), "plpgsql") == 0) {
        char fn[128];
        snprintf(fn, sizeof fn, "SELECT fence.guard_%lld()",
                 num(c, "SELECT 'sec'::regclass::oid::bigint"));
        fails(app, fn, "0A000");
    }
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
    outcome e;
    fence_status st = note(c, fence_pg_install(c), &e);
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

    /* The application created schema "fence" before the install. */
    ok(app, "CREATE SCHEMA fence");
    install_refused(su, "owned by role");
    ck_assert_int_eq(num(su, "SELECT count(*) FROM pg_class WHERE relnamespace = 'fence'::regnamespace"),
                     0);
    ck_assert_int_eq(num(su, "SELECT count(*) FROM pg_proc WHERE pronamespace = 'fence'::regnamespace"),
                     0);
    ok(app, "DROP SCHEMA fence");
    ck_assert_int_eq(fence_pg_install(su), FENCE_OK);

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
    ck_assert_int_eq(fence_pg_install(su), FENCE_OK);

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
    ck_assert_int_eq(fence_pg_install(su), FENCE_OK);

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
    ck_assert_int_eq(fence_pg_install(su), FENCE_OK);
    PQfinish(app);
    PQfinish(su);
    drop_side_db(d);
}
END_TEST

START_TEST(row_later_trigger_cannot_rewrite_the_stamp)
{
    PGconn *c = db();
    outcome e;
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
    outcome e;
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
            "CREATE OPERATOR public.<= (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.no);"
            "CREATE FUNCTION public.no(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT true';"
            "CREATE OPERATOR public.~ (LEFTARG = text, RIGHTARG = text, FUNCTION = public.no);"
            "CREATE OPERATOR public.<> (LEFTARG = text, RIGHTARG = text, FUNCTION = public.no)");
    PQfinish(app);

    ok(su, "SET search_path = public, pg_catalog");
    ck_assert_int_eq(fence_pg_install(su), FENCE_OK);
    ck_assert_str_eq(text1(su, "SELECT current_setting('search_path')"), "public, pg_catalog");
    /* Version 4's marks guard has no WHEN clause: its function compares,
     * with operators spelled OPERATOR(pg_catalog.x), and still refuses a
     * lowering under this search_path (public.< is always false). */
    ck_assert_int_eq(num(su, "SELECT count(*) FROM pg_trigger WHERE tgname = 'marks_no_lowering'"
                             " AND tgqual IS NULL"),
                     1);
    const char *def = text1(su, "SELECT prosrc FROM pg_proc WHERE oid = 'fence.marks_guard()'::regprocedure");
    ck_assert_msg(strstr(def, "fence.mark_rule(OLD.token, OLD.holder, NEW.token, NEW.holder)") != NULL,
                  "the marks guard does not ask fence.mark_rule: %s", def);
    /* The rules are inlined into their callers under the caller's
     * search_path: every operator in them is pg_catalog's. */
    def = text1(su, "SELECT prosrc FROM pg_proc"
                    " WHERE oid = 'fence.mark_rule(bigint, text, bigint, text)'::regprocedure");
    ck_assert_msg(strstr(def, "$3 OPERATOR(pg_catalog.>) $1") != NULL &&
                      strstr(def, "$3 OPERATOR(pg_catalog.<) $1") != NULL,
                  "not pinned to pg_catalog.>: %s", def);
    def = text1(su, "SELECT prosrc FROM pg_proc WHERE oid = 'fence.stamp_rule(bigint, bigint)'::regprocedure");
    ck_assert_msg(strstr(def, "$2 OPERATOR(pg_catalog.>=) $1") != NULL, "not pinned: %s", def);
    def = text1(su, "SELECT prosrc FROM pg_proc WHERE oid = 'fence.valid_token(text)'::regprocedure");
    ck_assert_msg(strstr(def, "$1 OPERATOR(pg_catalog.~) '^[1-9][0-9]{0,18}$'") != NULL &&
                      strstr(def, "COLLATE pg_catalog.\"C\" OPERATOR(pg_catalog.<=)") != NULL,
                  "not pinned: %s", def);
    ck_assert_int_eq(deps_on_public_operators(su), 0);
    /* fence.advance no longer pins search_path (it costs a configuration
     * save/restore per call): everything in it is qualified instead. */
    ck_assert_int_eq(num(su, "SELECT count(*) FROM pg_proc WHERE oid = 'fence.advance(text, bigint)'::regprocedure"
                             " AND proconfig IS NULL AND prosecdef"),
                     1);
    /* protect() pins its own. */
    ok(su, "CREATE TABLE sp (id int PRIMARY KEY); SELECT fence.protect('sp')");
    ck_assert_int_eq(deps_on_public_operators(su), 0);
    ok(su, "BEGIN; SELECT fence.use_token(3); INSERT INTO sp VALUES (1); COMMIT");
    ok(su, "BEGIN; SELECT fence.advance('sp', 3); COMMIT");
    ck_assert_int_eq(num(su, "SELECT fence.mark('sp')"), 3);
    /* public.< (always false) and public.<> would let a stale or repeated
     * token through advance(), public.<= a lowering through the guard. */
    fails(su, "SELECT fence.advance('sp', 2)", "23Q01");
    fails(su, "BEGIN; SELECT fence.use_token(3, '0123456789abcdef0123456789abcdef');"
              " SELECT fence.advance('sp', 3)", "23Q01");
    ok(su, "ROLLBACK");
    ok(su, "BEGIN; SELECT fence.advance('sp', 4); COMMIT");
    fails(su, "UPDATE fence.marks SET token = 1 WHERE resource = 'sp'", "23Q03");
    ck_assert_int_eq(num(su, "SELECT fence.mark('sp')"), 4);
    fails(su, "BEGIN; SELECT fence.use_token(2); UPDATE sp SET id = 1", "23Q01");
    ok(su, "ROLLBACK");
    ok(su, "BEGIN; SELECT fence.use_token(3); UPDATE sp SET id = 1; COMMIT");
    /* The holder check is pinned too: public.~ (always true) would admit a
     * malformed holder, and the marks' CHECK would admit one. */
    fails(su, "BEGIN; SET LOCAL fence.holder = 'NOT-HEX'; SELECT fence.advance('sp', 4)", "23Q02");
    ok(su, "ROLLBACK");
    fails(su, "INSERT INTO fence.marks (resource, token, holder) VALUES ('sp2', 1, 'NOT-HEX')",
          "23514");

    /* A CHECK bound to public's operator (as version 1 installed under
     * such a search_path would have) is re-created by the next install. */
    ok(su, "ALTER TABLE fence.marks DROP CONSTRAINT marks_token_check,"
           " ADD CONSTRAINT marks_token_check CHECK (token > 0) NOT VALID");
    ck_assert_int_eq(deps_on_public_operators(su), 1);
    ck_assert_int_eq(fence_pg_install(su), FENCE_OK);
    ck_assert_int_eq(deps_on_public_operators(su), 0);
    /* The same for version 3's holder CHECK. */
    ok(su, "ALTER TABLE fence.marks DROP CONSTRAINT marks_holder_check,"
           " ADD CONSTRAINT marks_holder_check CHECK (holder ~ 'x') NOT VALID");
    ck_assert_int_eq(deps_on_public_operators(su), 1);
    ck_assert_int_eq(fence_pg_install(su), FENCE_OK);
    ck_assert_int_eq(deps_on_public_operators(su), 0);
    fails(su, "INSERT INTO fence.marks (resource, token, holder) VALUES ('sp2', 1, 'x')", "23514");
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
    outcome e;
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(fence_pg_install(fa) == FENCE_OK, "install as %s: %s", fadmin, fence_pg_errmsg(fa));
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
    ck_assert_int_eq(fence_pg_install(fa), FENCE_OK);
    fails(o, "SELECT fence.advance('o3', 1)", "42501");
    snprintf(sql, sizeof sql, "GRANT EXECUTE ON FUNCTION fence.advance(text, bigint) TO %s", owner);
    ok(fa, sql);
    ck_assert_int_eq(fence_pg_install(fa), FENCE_OK);
    ck_assert_int_eq(num(o, "SELECT fence.advance('o3', 1)"), 1);
    PQfinish(o);
    PQfinish(fa);
    PQfinish(su);
    drop_side_db(d);
}
END_TEST

/* Upgrade from version 1: tables protected by it get the version-2
 * triggers when the installer may re-protect them, and a WARNING naming
 * the command otherwise; its marks are kept and gain the holder column of
 * version 3.  (Version 1 is simulated from the released version 2: its
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
    PQsetNoticeProcessor(fa, quiet_notice, NULL);
    install_v2(fa);
    snprintf(sql, sizeof sql, "GRANT EXECUTE ON FUNCTION fence.protect(regclass, name, boolean) TO %s",
             owner);
    ok(fa, sql);
    ok(fa, "BEGIN; SELECT fence.advance('v1-res', 41); COMMIT");
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

    /* Version 5 drops the generic triggers, so a table it cannot protect
     * again (parent has a child; theirs is another role's) fails the whole
     * install, which changes nothing. */
    static const char trigs[] = "SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'zz_fence_%'"
                                " AND tgrelid IN ('mine'::regclass, 'parent'::regclass, 'theirs'::regclass)";
    long long before = num(fa, trigs);
    ck_assert_int_gt(before, 0);
    ck_assert_int_eq(fence_pg_install(fa), FENCE_EDB);
    ck_assert_str_eq(fence_pg_sqlstate(fa), "55000");
    ck_assert_msg(strstr(fence_pg_errmsg(fa), "public.parent is protected by version 3's generic") != NULL,
                  "%s", fence_pg_errmsg(fa));
    ck_assert_int_eq(num(fa, "SELECT version FROM fence.meta"), 1);
    ck_assert_int_eq(num(fa, trigs), before);
    /* The documented way out: unprotect them (their columns and stamps
     * stay), install, protect them (the child instead of the parent). */
    snprintf(sql, sizeof sql, "GRANT EXECUTE ON FUNCTION fence.unprotect(regclass) TO %s", owner);
    ok(fa, sql);
    ok(fa, "SELECT fence.unprotect('parent')");
    ok(o, "SELECT fence.unprotect('theirs')");
    ck_assert_msg(fence_pg_install(fa) == FENCE_OK, "upgrade: %s", fence_pg_errmsg(fa));
    ck_assert_int_eq(num(fa, "SELECT version FROM fence.meta"), PG_SQL_VERSION);
    char h[FENCE_HOLDER_LEN + 1];
    ck_assert_uint_eq(mark_of(fa, "v1-res", h), 41); /* the mark is kept, no holder */
    ck_assert_str_eq(h, "");
    /* mine: the generated guards (no AFTER check needed). */
    ck_assert_int_eq(num(fa, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'mine'::regclass"
                             " AND tgname LIKE 'zz_fence_guard_%'"),
                     4);
    ck_assert_str_eq(text1(fa, "SELECT implementation || ' ' || check_present || ' ' || mode"
                               " FROM fence.protected WHERE tbl = 'mine'::regclass"),
                     "plpgsql true permissive");
    ok(fa, "SELECT fence.protect('parent_child')");
    ok(o, "SELECT fence.protect('theirs')");
    ck_assert_str_eq(text1(fa, "SELECT string_agg(tbl::text || ' ' || implementation, ',' ORDER BY tbl::text)"
                               " FROM fence.protected"),
                     "mine plpgsql,parent_child plpgsql,theirs plpgsql");
    ck_assert_int_eq(fence_pg_install(fa), FENCE_OK);
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
        /* Not reserved in SQL (format's %I leaves them bare) but keywords
         * of PL/pgSQL, which then does not read OLD.by as the column. */
        "by", "alias", "loop", "open", "constant",
    };
    PGconn *c = db();
    outcome e;
    ok(c, "CREATE TABLE victim (id int)");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *tid = PQescapeIdentifier(c, names[i], strlen(names[i]));
        char *tlit = PQescapeLiteral(c, tid, strlen(tid)); /* regclass text */
        char *clit = PQescapeLiteral(c, names[i], strlen(names[i]));
        char sql[1024];
        snprintf(sql, sizeof sql, "CREATE TABLE %s (id int PRIMARY KEY)", tid);
        ok(c, sql);
        snprintf(sql, sizeof sql, "INSERT INTO %s VALUES (1)", tid);
        ok(c, sql);
        snprintf(sql, sizeof sql, "SELECT fence.protect(%s, %s)", tlit, clit);
        ok(c, sql);
        snprintf(sql, sizeof sql, "UPDATE %s SET id = 1", tid);
        ck_assert_int_eq(write_tok(c, 8, sql, &e), FENCE_OK);
        ck_assert_int_eq(write_tok(c, 7, sql, &e), FENCE_STALE);
        char obj[512];
        snprintf(sql, sizeof sql, "SELECT 'public.' || quote_ident(%s)", clit);
        snprintf(obj, sizeof obj, "%s", text1(c, sql));
        ck_assert_str_eq(e.stale.object, obj);
        snprintf(sql, sizeof sql, "SELECT %s FROM %s", tid, tid);
        ck_assert_int_eq(num(c, sql), 8);
        snprintf(sql, sizeof sql, "SELECT fence.set_mode(%s, 'permissive')", tlit);
        ok(c, sql);
        snprintf(sql, sizeof sql, "SELECT fence.unprotect(%s)", tlit);
        ok(c, sql);

        /* The same name as a resource. */
        ok(c, "BEGIN");
        ck_assert_int_eq(set_tok(c, 8, names[i], &e), FENCE_OK);
        ok(c, "COMMIT");
        ok(c, "BEGIN");
        ck_assert_int_eq(set_tok(c, 7, names[i], &e), FENCE_STALE);
        ck_assert_int_eq(e.stale.kind, FENCE_OBJECT_RESOURCE);
        ck_assert_str_eq(e.stale.object, names[i]);
        ok(c, "ROLLBACK");
        PQfreemem(tid);
        PQfreemem(tlit);
        PQfreemem(clit);
    }
    /* Token columns named like PL/pgSQL's own keywords, which format's %I
     * leaves bare (not reserved in SQL): the generated guard must still
     * read OLD.<column> as the column (it quotes it always). */
    static const char *const kw[] = {"by", "alias", "loop", "open", "constant"};
    for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++) {
        char sql[512];
        snprintf(sql, sizeof sql,
                 "CREATE TABLE kw_%s (id int PRIMARY KEY, v int);"
                 "INSERT INTO kw_%s VALUES (1, 0); SELECT fence.protect('kw_%s', '%s')",
                 kw[i], kw[i], kw[i], kw[i]);
        ok(c, sql);
        snprintf(sql, sizeof sql, "UPDATE kw_%s SET v = v + 1", kw[i]);
        ck_assert_int_eq(write_tok(c, 8, sql, &e), FENCE_OK);
        ck_assert_int_eq(write_tok(c, 7, sql, &e), FENCE_STALE);
        snprintf(sql, sizeof sql, "INSERT INTO kw_%s (id, v) VALUES (2, 0)", kw[i]);
        ck_assert_int_eq(write_tok(c, 9, sql, &e), FENCE_OK);
        snprintf(sql, sizeof sql, "SELECT sum(\"%s\") FROM kw_%s", kw[i], kw[i]);
        ck_assert_int_eq(num(c, sql), 17);
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
/* Generated functions: what is in use never changes (findings 2, 3)    */
/* ------------------------------------------------------------------ */

/* A table NAME(id, v, balance) owned by the superuser, protected with the
 * generated functions ('plpgsql', both runs), strict, column fence_token.
 * Returns its oid. */
static long long gen_victim(PGconn *c, const char *name)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "CREATE TABLE %s (id int PRIMARY KEY, v int, balance bigint NOT NULL DEFAULT 0);"
             "INSERT INTO %s SELECT g, 0, 0 FROM generate_series(1, 3) g;"
             "SELECT fence.protect('%s', 'fence_token', false, 'plpgsql')",
             name, name, name);
    ok(c, sql);
    snprintf(sql, sizeof sql, "SELECT '%s'::regclass::oid::bigint", name);
    return num(c, sql);
}

/* The comment of NAME's generated guard (static buffer of text1). */
static const char *gen_comment(PGconn *c, long long oid)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT coalesce(obj_description('fence.guard_%lld()'::regprocedure, 'pg_proc'), '')",
             oid);
    return text1(c, sql);
}

/* NAME is still protected as gen_victim left it: a write with token tok
 * stamps fence_token (not balance), one without a token is refused
 * (strict), and fence.protected says so. */
static void gen_intact(PGconn *c, const char *name, uint64_t tok)
{
    char sql[256];
    outcome e;
    snprintf(sql, sizeof sql, "UPDATE %s SET v = v + 1 WHERE id = 1", name);
    ck_assert_int_eq(write_tok(c, tok, sql, &e), FENCE_OK);
    snprintf(sql, sizeof sql, "SELECT fence_token FROM %s WHERE id = 1", name);
    ck_assert_int_eq(num(c, sql), (long long)tok);
    snprintf(sql, sizeof sql, "SELECT balance FROM %s WHERE id = 1", name);
    ck_assert_int_eq(num(c, sql), 0);
    snprintf(sql, sizeof sql, "UPDATE %s SET v = 9 WHERE id = 2", name);
    ck_assert_int_eq(write_raw(c, NULL, sql, &e), FENCE_ENOTOKEN);
    snprintf(sql, sizeof sql,
             "SELECT col || '/' || mode || '/' || implementation FROM fence.protected"
             " WHERE tbl = '%s'::regclass",
             name);
    ck_assert_str_eq(text1(c, sql), "fence_token/strict/plpgsql");
}

/* Finding 2: an index expression of another role's table, run as that
 * role by a superuser's ANALYZE (session_user the superuser), or that
 * role's SECURITY DEFINER function called by the superuser, cannot
 * re-generate a protected table's guard with another column or mode. */
START_TEST(generate_cannot_change_a_guard_in_use)
{
    char evil[NAME_BUF], sql[2048];
    PGconn *c = db();
    side_role("evil", evil);
    long long v = gen_victim(c, "gv_orders");
    char before[1024];
    snprintf(before, sizeof before, "%s", gen_comment(c, v));
    snprintf(sql, sizeof sql, "CREATE SCHEMA gv_es AUTHORIZATION %s", evil);
    ok(c, sql);

    PGconn *ev = connect_as(g_db, evil);
    PQsetNoticeProcessor(ev, quiet_notice, NULL);
    /* Directly: refused. */
    fails(ev, "SELECT fence.generate('gv_orders', 'balance', false)", "42501");
    ok(ev, "CREATE FUNCTION gv_es.idx(i int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$"
           " BEGIN"
           "   IF session_user <> current_user THEN"
           "     PERFORM fence.generate((SELECT c.oid FROM pg_catalog.pg_class c"
           "                             WHERE c.relname = 'gv_orders')::pg_catalog.regclass,"
           "                            'balance', false);"
           "   END IF;"
           "   RETURN i;"
           " END $$");
    ok(ev, "CREATE TABLE gv_es.t (i int); INSERT INTO gv_es.t VALUES (1);"
           "CREATE INDEX ON gv_es.t (gv_es.idx(i))");
    ok(ev, "CREATE FUNCTION gv_es.f() RETURNS int LANGUAGE plpgsql SECURITY DEFINER AS $$"
           " BEGIN"
           "   PERFORM fence.generate('public.gv_orders'::pg_catalog.regclass, 'fence_token', true);"
           "   RETURN 1;"
           " END $$");

    /* The superuser's maintenance run: the expression runs as evil. */
    (void)run(c, "ANALYZE gv_es.t", NULL);
    ok(c, "ROLLBACK"); /* harmless when idle */
    gen_intact(c, "gv_orders", 10);
    ck_assert_str_eq(gen_comment(c, v), before);
    (void)run(c, "CREATE INDEX ON gv_es.t (gv_es.idx(i + 0))", NULL);
    gen_intact(c, "gv_orders", 11);

    /* evil's SECURITY DEFINER function, called by the superuser: strict
     * must stay strict. */
    fails(c, "SELECT gv_es.f()", "42501");
    gen_intact(c, "gv_orders", 12);
    ck_assert_str_eq(gen_comment(c, v), before);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.generated WHERE tbl = 'gv_orders'::regclass"
                            " AND col = 'fence_token' AND mode = 'strict'"),
                     1);

    /* An identical request is a refresh; the owner's protect() still
     * switches mode and column. */
    snprintf(sql, sizeof sql, "SELECT fence.generate('gv_orders', 'fence_token', false)");
    ok(c, sql);
    gen_intact(c, "gv_orders", 13);
    PQfinish(ev);
    ok(c, "DROP SCHEMA gv_es CASCADE");
    PQfinish(c);
}
END_TEST

/* Finding 3: triggers on another role's tables that call a protected
 * table's generated guard (EXECUTE is PUBLIC) with other arguments, or
 * none: a re-install neither rewrites the guard with them nor fails, and
 * fence.protected does not list them. */
START_TEST(decoy_triggers_change_nothing)
{
    char evil[NAME_BUF], sql[2048];
    outcome e;
    PGconn *c = db();
    side_role("decoy", evil);
    long long v = gen_victim(c, "dv_orders");
    char before[1024];
    snprintf(before, sizeof before, "%s", gen_comment(c, v));
    snprintf(sql, sizeof sql, "CREATE SCHEMA dv_es AUTHORIZATION %s", evil);
    ok(c, sql);

    PGconn *ev = connect_as(g_db, evil);
    PQsetNoticeProcessor(ev, quiet_notice, NULL);
    snprintf(sql, sizeof sql,
             "CREATE TABLE dv_es.d1 (id int, balance bigint, fence_token bigint);"
             "CREATE TRIGGER zz_fence_guard_upd BEFORE UPDATE ON dv_es.d1 FOR EACH ROW"
             " EXECUTE FUNCTION fence.guard_%lld('balance', 'permissive');"
             "CREATE TABLE dv_es.d2 (id int, balance bigint, fence_token bigint);"
             "CREATE TRIGGER zz_fence_guard_upd BEFORE UPDATE ON dv_es.d2 FOR EACH ROW"
             " EXECUTE FUNCTION fence.guard_%lld('balance', 'permissive')",
             v, v);
    ok(ev, sql);
    ck_assert_msg(fence_pg_install(c) == FENCE_OK, "install: %s", fence_pg_errmsg(c));
    gen_intact(c, "dv_orders", 20);
    ck_assert_str_eq(gen_comment(c, v), before);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.protected WHERE tbl::text LIKE 'dv_es.%'"), 0);

    /* A decoy without arguments, to the generated guard and to the
     * generic one: the install and the view still work. */
    snprintf(sql, sizeof sql,
             "CREATE TABLE dv_es.d3 (id int);"
             "CREATE TRIGGER zz_fence_guard_upd BEFORE UPDATE ON dv_es.d3 FOR EACH ROW"
             " EXECUTE FUNCTION fence.guard_%lld();"
             "CREATE TABLE dv_es.d4 (id int);"
             "CREATE TRIGGER zz_fence_guard_upd BEFORE UPDATE ON dv_es.d4 FOR EACH ROW"
             " EXECUTE FUNCTION fence.refuse_truncate()",
             v);
    ok(ev, sql);
    ck_assert_msg(fence_pg_install(c) == FENCE_OK, "install: %s", fence_pg_errmsg(c));
    ck_assert_msg(fence_pg_install(c) == FENCE_OK, "install: %s", fence_pg_errmsg(c));
    ck_assert_int_eq(num(ev, "SELECT count(*) FROM fence.protected WHERE tbl = 'dv_orders'::regclass"), 1);
    gen_intact(c, "dv_orders", 21);
    ck_assert_str_eq(gen_comment(c, v), before);

    /* The owner still changes the mode (the decoys keep the old function
     * in use: protect() generates another). */
    ok(c, "SELECT fence.set_mode('dv_orders', 'permissive')");
    ck_assert_int_eq(write_raw(c, NULL, "UPDATE dv_orders SET v = 5 WHERE id = 2", &e), FENCE_OK);
    ck_assert_str_eq(text1(c, "SELECT col || '/' || mode FROM fence.protected WHERE tbl = 'dv_orders'::regclass"),
                     "fence_token/permissive");
    ck_assert_msg(fence_pg_install(c) == FENCE_OK, "install: %s", fence_pg_errmsg(c));
    ck_assert_int_eq(write_raw(c, NULL, "UPDATE dv_orders SET v = 6 WHERE id = 2", &e), FENCE_OK);
    PQfinish(ev);
    ok(c, "DROP SCHEMA dv_es CASCADE");
    ok(c, "SELECT fence.unprotect('dv_orders')");
    PQfinish(c);
}
END_TEST

/* A table's owner (not the installer) switches its generated guard from
 * strict to permissive and back, and to another column, with protect(). */
START_TEST(owner_changes_mode_and_column)
{
    char owner[NAME_BUF], sql[1024];
    outcome e;
    PGconn *c = db();
    side_role("lo", owner);
    snprintf(sql, sizeof sql,
             "GRANT CREATE ON SCHEMA public TO %s;"
             "GRANT EXECUTE ON FUNCTION fence.protect(regclass, name, boolean) TO %s;"
             "GRANT EXECUTE ON FUNCTION fence.protect(regclass, name, boolean, text) TO %s;"
             "GRANT EXECUTE ON FUNCTION fence.set_mode(regclass, text) TO %s;"
             "GRANT EXECUTE ON FUNCTION fence.move_guard(regclass, name) TO %s",
             owner, owner, owner, owner, owner);
    ok(c, sql);
    PGconn *o = connect_as(g_db, owner);
    PQsetNoticeProcessor(o, quiet_notice, NULL);
    ok(o, "CREATE TABLE lo_t (id int PRIMARY KEY, v int, lock_version int);"
          "INSERT INTO lo_t VALUES (1, 0, 0), (2, 0, 0);"
          "SELECT fence.protect('lo_t', 'fence_token', false, 'plpgsql')");
    ck_assert_int_eq(write_raw(o, NULL, "UPDATE lo_t SET v = 1", &e), FENCE_ENOTOKEN);
    ok(o, "SELECT fence.set_mode('lo_t', 'permissive')");
    ck_assert_int_eq(write_raw(o, NULL, "UPDATE lo_t SET v = 1", &e), FENCE_OK);
    ok(o, "SELECT fence.protect('lo_t', 'fence_token', false, 'plpgsql')");
    ck_assert_int_eq(write_raw(o, NULL, "UPDATE lo_t SET v = 2", &e), FENCE_ENOTOKEN);
    /* Another column only on purpose (the stamps move with it), and
     * never an application's (lock_version). */
    fails(o, "SELECT fence.protect('lo_t', 'stamp', true, 'plpgsql')", "22023");
    fails(o, "SELECT fence.move_guard('lo_t', 'lock_version')", "22023");
    ok(o, "SELECT fence.move_guard('lo_t', 'stamp')");
    ok(o, "SELECT fence.set_mode('lo_t', 'permissive')");
    ck_assert_int_eq(write_tok(o, 8, "UPDATE lo_t SET v = 3 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(o, "SELECT stamp FROM lo_t WHERE id = 1"), 8);
    ck_assert_int_eq(num(o, "SELECT fence_token FROM lo_t WHERE id = 1"), 0);
    ck_assert_int_eq(num(o, "SELECT lock_version FROM lo_t WHERE id = 1"), 0);
    ck_assert_int_eq(write_raw(o, NULL, "UPDATE lo_t SET v = 4 WHERE id = 2", &e), FENCE_OK);
    ck_assert_str_eq(text1(o, "SELECT col || '/' || mode || '/' || implementation FROM fence.protected"
                              " WHERE tbl = 'lo_t'::regclass"),
                     "stamp/permissive/plpgsql");
    ck_assert_msg(fence_pg_install(c) == FENCE_OK, "install: %s", fence_pg_errmsg(c));
    ck_assert_int_eq(write_tok(o, 7, "UPDATE lo_t SET v = 5 WHERE id = 1", &e), FENCE_STALE);
    ck_assert_int_eq(write_raw(o, NULL, "UPDATE lo_t SET v = 5 WHERE id = 2", &e), FENCE_OK);
    PQfinish(o);
    ok(c, "DROP TABLE lo_t");
    PQfinish(c);
}
END_TEST


/* Found by trying bad input as the table's owner: protect() on a table
 * already protected, with another column name (an injection attempt, or a
 * name over 63 bytes that PostgreSQL truncates), used to add a fresh
 * column and guard by it, admitting tokens older than the stamps.  It is
 * refused and changes nothing; move_guard() moves on purpose and carries
 * every stamp over. */
START_TEST(protect_never_moves_the_guard_silently)
{
    PGconn *c = db();
    outcome e;
    ok(c, "CREATE TABLE orders (id int PRIMARY KEY, v int); INSERT INTO orders VALUES (1, 0), (2, 0);"
          "SELECT fence.protect('orders')");
    ck_assert_int_eq(write_tok(c, 100, "UPDATE orders SET v = 1", &e), FENCE_OK);
    const char *cols[] = {"x; drop table orders",
                          "a_column_name_that_is_seventy_bytes_long_and_so_gets_truncated_xx"};
    for (int i = 0; i < 2; i++) {
        char sql[256];
        snprintf(sql, sizeof sql, "SELECT fence.protect('orders', '%s')", cols[i]);
        fails(c, sql, "22023");
    }
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_attribute WHERE attrelid = 'orders'::regclass"
                            " AND attnum > 0 AND NOT attisdropped"),
                     3);
    ck_assert_str_eq(text1(c, "SELECT col FROM fence.protected WHERE tbl = 'orders'::regclass"),
                     "fence_token");
    ck_assert_int_eq(write_tok(c, 50, "UPDATE orders SET v = 2", &e), FENCE_STALE);
    /* Bad arguments to move_guard: refused, nothing changes. */
    fails(c, "SELECT fence.move_guard('orders', 'fence_token')", "22023");
    fails(c, "SELECT fence.move_guard('orders', NULL)", "22023");
    fails(c, "SELECT fence.move_guard(NULL, 'x')", "22023");
    ok(c, "CREATE TABLE loose (id int)");
    fails(c, "SELECT fence.move_guard('loose', 'x')", "22023");
    /* On purpose: the stamps come along, the stale token stays stale. */
    ok(c, "SELECT fence.move_guard('orders', 'lock_version')");
    ck_assert_str_eq(text1(c, "SELECT col || '/' || mode FROM fence.protected WHERE tbl = 'orders'::regclass"),
                     "lock_version/strict");
    ck_assert_int_eq(num(c, "SELECT min(lock_version) FROM orders"), 100);
    ck_assert_int_eq(write_tok(c, 50, "UPDATE orders SET v = 3", &e), FENCE_STALE);
    ck_assert_int_eq(write_tok(c, 101, "UPDATE orders SET v = 3", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT min(lock_version) FROM orders"), 101);
    PQfinish(c);
}
END_TEST

static Suite *pg_security_suite(void)
{
    Suite *s = suite_create("pg_security");
    TCase *t = pg_tcase("pg_security");
    tcase_add_test(t, app_role_cannot_bypass);
    tcase_add_test(t, install_refuses_what_another_role_owns);
    tcase_add_test(t, row_later_trigger_cannot_rewrite_the_stamp);
    tcase_add_test(t, protect_refuses_inheritance_parent);
    tcase_add_test(t, protect_never_moves_the_guard_silently);
    tcase_add_test(t, install_ignores_hostile_search_path);
    tcase_add_test(t, install_as_non_superuser_protect_as_owner);
    tcase_add_test(t, upgrade_from_version_1);
    tcase_add_test(t, names_are_quoted);
    tcase_add_test(t, generate_cannot_change_a_guard_in_use);
    tcase_add_test(t, decoy_triggers_change_nothing);
    tcase_add_test(t, owner_changes_mode_and_column);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(pg_security_suite());
}
