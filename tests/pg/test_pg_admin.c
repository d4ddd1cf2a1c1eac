/*
 * test_pg_admin.c -- the administration of fence.sql (sql/postgres/)
 * against a real PostgreSQL: protect() refuses fence's own and
 * the system's tables, the install repairs a database where an older
 * version protected fence.marks, fence.grant(), session-level tokens, the
 * life of the generated trigger functions (unprotect, orphans, renames,
 * oid reuse), when the AFTER check is attached (at protect time and by the
 * event trigger), real upgrades from version 3 (tests/pg/fence_v3.sql,
 * embedded), and from version 5 (fence_v5.sql) with the migration of a
 * version column it took over (fence.migrate_version_column()), and
 * fence.verify() on what a table owner or an operator can
 * change by hand: a table of tamperings of the guard's triggers (WHEN,
 * UPDATE OF, timing, function, arguments, enabled state, the AFTER
 * checks), each reported, the table gone from fence.protected where its
 * guard is not whole, the hole shown and closed by the install; and a
 * table of changes of the privilege policy (fence.advance_grants against
 * fence.advance's ACL); and a table of ways a column gets, keeps or loses
 * fence's token column marker (fence.mark_token_column(), by hand,
 * look-alikes, renames, inheritance, refusals) with what
 * fence.is_token_column() says of each.  Runs once per per-row
 * implementation (FENCE_TEST_PG_IMPL); what only the 'plpgsql' one has is
 * tested with protect(..., 'plpgsql').
 */
#include "casetable.h"
#include "pgutil.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* fence.sql versions 3 and 5 as released (tests/pg/fence_v3.sql and
 * fence_v5.sql, embedded). */
extern const char pgtest__sql_fence_v3[];
extern const size_t pgtest__sql_fence_v3_len;
extern const char pgtest__sql_fence_v5[];
extern const size_t pgtest__sql_fence_v5_len;

#define HA "0123456789abcdef0123456789abcdef"

/* Install version 3 / 5 into the database of c (which must hold none
 * newer). */
static void install_v3(PGconn *c)
{
    install_release(c, pgtest__sql_fence_v3, pgtest__sql_fence_v3_len, 3);
}

static void install_v5(PGconn *c)
{
    install_release(c, pgtest__sql_fence_v5, pgtest__sql_fence_v5_len, 5);
}

static int is_c(void)
{
    return strcmp(pg_impl(), "c") == 0;
}

/* The oid of table tbl, as text (static buffer). */
static const char *oid_of(PGconn *c, const char *tbl)
{
    static char buf[32];
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT '%s'::regclass::oid", tbl);
    snprintf(buf, sizeof buf, "%s", text1(c, sql));
    return buf;
}

/* How many functions of schema fence are named like pattern (a regex). */
static long long fence_functions(PGconn *c, const char *pattern)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_proc WHERE pronamespace = 'fence'::regnamespace"
             " AND proname ~ '%s'",
             pattern);
    return num(c, sql);
}

/* ------------------------------------------------------------------ */
/* protect() refuses schema fence and the system's schemas              */
/* ------------------------------------------------------------------ */

START_TEST(protect_refuses_fence_and_system_tables)
{
    PGconn *c = db();
    outcome e;
    static const char *const refused[] = {
        "SELECT fence.protect('fence.marks')",
        "SELECT fence.protect('fence.meta', 'version')",
        "SELECT fence.protect('fence.marks', 'token', false, 'plpgsql')",
        "SELECT fence.protect('pg_catalog.pg_class')",
        "SELECT fence.protect('information_schema.sql_features')",
        "SELECT fence.generate('fence.marks', 'fence_token', false)",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        ck_assert_int_eq(run(c, refused[i], &e), FENCE_EDB);
        ck_assert_msg(strcmp(e.sqlstate, "22023") == 0, "%s: %s %s", refused[i], e.sqlstate,
                      e.message);
    }
    ck_assert_ptr_nonnull(strstr(e.message, "fence never protects"));
    /* A TOAST table too. */
    char sql[256];
    ok(c, "CREATE TABLE toasted (id int, t text)");
    snprintf(sql, sizeof sql, "SELECT fence.protect('%s')",
             text1(c, "SELECT reltoastrelid::regclass FROM pg_class WHERE oid = 'toasted'::regclass"));
    fails(c, sql, "22023");
    /* Nothing was changed: fence.advance works without any fence.token. */
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_trigger WHERE tgrelid IN"
                            " ('fence.marks'::regclass, 'fence.meta'::regclass)"
                            " AND tgname LIKE 'zz_fence_%'"),
                     0);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_attribute WHERE attrelid = 'fence.marks'::regclass"
                            " AND attname = 'fence_token'"),
                     0);
    ck_assert_int_eq(num(c, "SELECT fence.advance('adm-refuse', 5)"), 5);
    ck_assert_int_eq(num(c, "SELECT fence.mark('adm-refuse')"), 5);
    PQfinish(c);
}
END_TEST

/* Version 3 let fence.protect('fence.marks') through: from then on every
 * fence.advance() without a token failed, and reinstalling did not help.
 * Version 4's install drops the triggers (NOTICE) and the column. */
START_TEST(install_repairs_protected_marks)
{
    char d[NAME_BUF];
    side_db("repair", NULL, d);
    PGconn *c = connect_as(d, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    install_v3(c);
    outcome e;
    ok(c, "BEGIN; SELECT fence.advance('rp', 3); COMMIT");
    ok(c, "SELECT fence.protect('fence.marks'); SELECT fence.protect('fence.meta', 'version')");
    fails(c, "SELECT fence.advance('rp', 4)", "23Q02"); /* broken: no fence.token */

    notes n = {{0}};
    PQsetNoticeReceiver(c, collect_notice, &n);
    ck_assert_msg(fence_pg_install(c) == FENCE_OK, "install: %s", fence_pg_errmsg(c));
    ck_assert_msg(strstr(n.text, "dropped trigger zz_fence_guard_upd from fence.marks") != NULL,
                  "no notice: %s", n.text);
    ck_assert_msg(strstr(n.text, "dropped column fence_token that fence.protect() added to fence.marks") != NULL,
                  "no notice: %s", n.text);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_trigger t JOIN pg_class r ON r.oid = t.tgrelid"
                            " WHERE r.relnamespace = 'fence'::regnamespace AND t.tgname LIKE 'zz_fence_%'"),
                     0);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_attribute WHERE attrelid = 'fence.marks'::regclass"
                            " AND attname = 'fence_token' AND NOT attisdropped"),
                     0);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_attrdef d JOIN pg_attribute a"
                            " ON a.attrelid = d.adrelid AND a.attnum = d.adnum"
                            " WHERE d.adrelid = 'fence.meta'::regclass AND a.attname = 'version'"),
                     0); /* protect() gave it DEFAULT 0 */
    ck_assert_int_eq(num(c, "SELECT version FROM fence.meta"), PG_SQL_VERSION);
    ck_assert_int_eq(num(c, "SELECT fence.advance('rp', 4)"), 4);
    ck_assert_int_eq(advance_h(c, 3, NULL, "rp", &e), FENCE_STALE);
    ck_assert_int_eq(num(c, "SELECT fence.mark('rp')"), 4);
    /* And again: nothing left to repair. */
    n.text[0] = '\0';
    ck_assert_int_eq(fence_pg_install(c), FENCE_OK);
    ck_assert_msg(strstr(n.text, "dropped") == NULL, "%s", n.text);
    PQfinish(c);
    drop_side_db(d);
}
END_TEST

/* ------------------------------------------------------------------ */
/* fence.grant                                                          */
/* ------------------------------------------------------------------ */

START_TEST(grant_restricts_advance_to_a_role)
{
    char d[NAME_BUF], fadmin[NAME_BUF], app[NAME_BUF], other[NAME_BUF], sql[1024];
    side_role("gadmin", fadmin);
    side_role("gapp", app);
    side_role("gother", other);
    side_db("grant", NULL, d);
    PGconn *su = connect_as(d, NULL);
    PQsetNoticeProcessor(su, quiet_notice, NULL);
    snprintf(sql, sizeof sql, "GRANT CREATE ON DATABASE %s TO %s", d, fadmin);
    ok(su, sql);
    PGconn *fa = connect_as(d, fadmin);
    PQsetNoticeProcessor(fa, quiet_notice, NULL);
    ck_assert_int_eq(fence_pg_install(fa), FENCE_OK);
    PGconn *ap = connect_as(d, app);
    PGconn *ot = connect_as(d, other);
    ck_assert_int_eq(num(ot, "SELECT fence.advance('g', 1)"), 1); /* PUBLIC by default */

    /* Only the schema's owner may run it (EXECUTE is not PUBLIC; a role
     * granted EXECUTE is still refused). */
    snprintf(sql, sizeof sql, "SELECT fence.grant('%s')", app);
    fails(ot, sql, "42501");
    snprintf(sql, sizeof sql, "GRANT EXECUTE ON FUNCTION fence.grant(regrole, boolean) TO %s", other);
    ok(fa, sql);
    snprintf(sql, sizeof sql, "SELECT fence.grant('%s')", other);
    outcome e;
    ck_assert_int_eq(run(ot, sql, &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "42501");
    ck_assert_ptr_nonnull(strstr(e.message, "only the owner of schema fence"));
    fails(fa, "SELECT fence.grant(NULL)", "22023");
    fails(fa, "SELECT fence.grant('no_such_role_at_all')", "42704");

    /* One call: PUBLIC loses advance, the role has it.  Twice: the same. */
    ok(fa, "REVOKE EXECUTE ON FUNCTION fence.mark(text) FROM PUBLIC");
    for (int i = 0; i < 2; i++) {
        snprintf(sql, sizeof sql, "SELECT fence.grant('%s')", app);
        ok(fa, sql);
        ck_assert_int_eq(num(ap, "SELECT fence.advance('g', 2)"), 2);
        fails(ot, "SELECT fence.advance('g', 3)", "42501");
        ck_assert_int_eq(num(ap, "SELECT fence.mark('g')"), 2); /* re-granted to the role */
        ck_assert_str_eq(text1(ap, "SELECT coalesce(fence.mark_holder('g'), 'none')"), "none");
    }
    /* A re-install keeps it (advance goes to PUBLIC only when fresh). */
    ck_assert_int_eq(fence_pg_install(fa), FENCE_OK);
    fails(ot, "SELECT fence.advance('g', 3)", "42501");
    ck_assert_int_eq(num(ap, "SELECT fence.advance('g', 3)"), 3);
    /* revoke_public => false: grant without taking it from PUBLIC. */
    ok(fa, "GRANT EXECUTE ON FUNCTION fence.advance(text, bigint) TO PUBLIC");
    snprintf(sql, sizeof sql, "SELECT fence.grant('%s', revoke_public => false)", app);
    ok(fa, sql);
    ck_assert_int_eq(num(ot, "SELECT fence.advance('g', 4)"), 4);
    PQfinish(ot);
    PQfinish(ap);
    PQfinish(fa);
    PQfinish(su);
    drop_side_db(d);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Session-level tokens                                                  */
/* ------------------------------------------------------------------ */

/* SET fence.token without LOCAL holds for every later transaction of the
 * session.  Both guards refuse it (23Q02, reason=unbound): only a token
 * that fence.use_token() gave to the writing transaction is admitted.  The
 * install also warns where SQL can see one: ALTER ROLE / ALTER DATABASE
 * ... SET, and the installing session. */
START_TEST(session_level_token)
{
    PGconn *c = db();
    outcome e;
    make_table(c, "sess");
    ok(c, "SET fence.token = 6");
    fence_status st = write_raw(c, NULL, "UPDATE sess SET v = 1 WHERE id = 1", &e);
    ck_assert_int_eq(st, FENCE_ENOTOKEN);
    ck_assert_str_eq(e.sqlstate, "23Q02");
    ck_assert_ptr_nonnull(strstr(e.message, "was not set by fence.use_token() in this transaction"));
    ck_assert_int_eq(num(c, "SELECT fence_token FROM sess WHERE id = 1"), 0);
    /* Even a session value left by a transaction that used use_token(). */
    ok(c, "BEGIN; SELECT fence.use_token(6); SET fence.token = 6; SET fence.xact = '1'; COMMIT");
    ck_assert_int_eq(write_raw(c, NULL, "UPDATE sess SET v = 1 WHERE id = 1", &e), FENCE_ENOTOKEN);
    ck_assert_str_eq(e.sqlstate, "23Q02");
    ok(c, "RESET fence.xact");
    /* use_token() on top of it works. */
    ck_assert_int_eq(write_tok(c, 7, "UPDATE sess SET v = 2 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM sess WHERE id = 1"), 7);
    ok(c, "RESET fence.token");
    ck_assert_int_eq(write_raw(c, NULL, "UPDATE sess SET v = 3 WHERE id = 1", &e), FENCE_ENOTOKEN);
    /* The library sets both LOCAL: nothing is left after the transaction. */
    ck_assert_int_eq(write_tok(c, 8, "UPDATE sess SET v = 4 WHERE id = 1", &e), FENCE_OK);
    ck_assert_str_eq(text1(c, "SELECT coalesce(current_setting('fence.token', true), '')"), "");
    ck_assert_str_eq(text1(c, "SELECT coalesce(current_setting('fence.holder', true), '')"), "");
    ck_assert_int_eq(write_raw(c, NULL, "UPDATE sess SET v = 5 WHERE id = 1", &e), FENCE_ENOTOKEN);
    PQfinish(c);

    /* The install warns about settings made for whole sessions. */
    char d[NAME_BUF], r[NAME_BUF], sql[512];
    side_role("sessrole", r);
    side_db("sess", NULL, d);
    PGconn *su = connect_as(d, NULL);
    snprintf(sql, sizeof sql, "ALTER ROLE %s IN DATABASE %s SET fence.token = '9'", r, d);
    ok(su, sql);
    notes n = {{0}};
    PQsetNoticeReceiver(su, collect_notice, &n);
    ck_assert_int_eq(fence_pg_install(su), FENCE_OK);
    snprintf(sql, sizeof sql, "fence.token is set for role %s in database %s", r, d);
    ck_assert_msg(strstr(n.text, sql) != NULL, "no warning: %s", n.text);
    n.text[0] = '\0';
    ok(su, "SET fence.token = 5");
    ck_assert_int_eq(fence_pg_install(su), FENCE_OK);
    ck_assert_msg(strstr(n.text, "fence.token is set for this whole session ('5')") != NULL,
                  "no warning: %s", n.text);
    snprintf(sql, sizeof sql, "ALTER ROLE %s IN DATABASE %s RESET fence.token", r, d);
    ok(su, sql);
    PQfinish(su);
    drop_side_db(d);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The generated trigger functions ('plpgsql')                          */
/* ------------------------------------------------------------------ */

START_TEST(generated_functions_lifecycle)
{
    PGconn *c = db();
    outcome e;
    char sql[1024], pat[64];
    ok(c, "CREATE TABLE gl (id int PRIMARY KEY, v int); INSERT INTO gl VALUES (1, 0), (2, 0);"
          "SELECT fence.protect('gl', 'fence_token', false, 'plpgsql')");
    const char *oid = oid_of(c, "gl");
    snprintf(pat, sizeof pat, "^(guard|check)_%s$", oid);
    ck_assert_int_eq(fence_functions(c, pat), 2);
    /* Owned by the installer, EXECUTE to PUBLIC, no WHEN clause, the
     * column accessed directly (no jsonb), the mode baked in. */
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_proc WHERE proname = 'guard_%s'"
             " AND proowner = (SELECT nspowner FROM pg_namespace WHERE nspname = 'fence')"
             " AND has_function_privilege('public', oid, 'EXECUTE')"
             " AND prosrc LIKE '%%OLD.\"fence_token\"::pg_catalog.text%%'"
             " AND prosrc NOT LIKE '%%jsonb%%' AND prosrc LIKE '%%IF NOT false THEN%%'",
             oid);
    ck_assert_int_eq(num(c, sql), 1);
    ck_assert_str_eq(text1(c, "SELECT implementation || ' ' || col || ' ' || mode FROM fence.protected"
                              " WHERE tbl = 'gl'::regclass"),
                     "plpgsql fence_token strict");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'gl'::regclass"
                            " AND tgqual IS NOT NULL"),
                     0);
    ck_assert_int_eq(write_tok(c, 5, "UPDATE gl SET v = 1", &e), FENCE_OK);
    /* The install writes them again from its templates (a newer version's
     * reach tables protected before it; here: undoes a tampering). */
    snprintf(sql, sizeof sql, "CREATE OR REPLACE FUNCTION fence.guard_%s() RETURNS trigger"
                              " LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END'", oid);
    ok(c, sql);
    ck_assert_int_eq(write_tok(c, 1, "UPDATE gl SET v = 1", &e), FENCE_OK);
    ck_assert_int_eq(fence_pg_install(c), FENCE_OK);
    ck_assert_int_eq(write_tok(c, 1, "UPDATE gl SET v = 1", &e), FENCE_STALE);
    ck_assert_int_eq(write_tok(c, 5, "UPDATE gl SET v = 1", &e), FENCE_OK);

    /* set_mode re-generates it in place, keeping the implementation. */
    ok(c, "SELECT fence.set_mode('gl', 'permissive')");
    snprintf(sql, sizeof sql, "SELECT count(*) FROM pg_proc WHERE proname = 'guard_%s'"
                              " AND prosrc LIKE '%%IF NOT true THEN%%'", oid);
    ck_assert_int_eq(num(c, sql), 1);
    ck_assert_str_eq(text1(c, "SELECT implementation || ' ' || mode FROM fence.protected"
                              " WHERE tbl = 'gl'::regclass"),
                     "plpgsql permissive");
    ck_assert_int_eq(write_raw(c, NULL, "UPDATE gl SET v = 2", &e), FENCE_OK);
    ok(c, "SELECT fence.set_mode('gl', 'strict')");

    /* Renamed table: the messages name it as it is now. */
    ok(c, "ALTER TABLE gl RENAME TO gl_renamed");
    ck_assert_int_eq(write_tok(c, 4, "UPDATE gl_renamed SET v = 3", &e), FENCE_STALE);
    ck_assert_str_eq(e.stale.object, "public.gl_renamed");
    /* Renamed column: writes fail closed until protect() is run again. */
    ok(c, "ALTER TABLE gl_renamed RENAME COLUMN fence_token TO stamp");
    ck_assert_int_ne(write_tok(c, 6, "UPDATE gl_renamed SET v = 4", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM gl_renamed WHERE v = 4"), 0);
    ok(c, "SELECT fence.protect('gl_renamed', 'stamp', false, 'plpgsql')");
    ck_assert_int_eq(write_tok(c, 4, "UPDATE gl_renamed SET v = 4", &e), FENCE_STALE);
    ck_assert_int_eq(write_tok(c, 6, "UPDATE gl_renamed SET v = 4", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT min(stamp) FROM gl_renamed"), 6);
    ck_assert_int_eq(fence_functions(c, pat), 2); /* same oid, same names */

    /* unprotect drops them; protect brings them back.  (unprotect() takes
     * the token column's marker off too, so stamp is no longer known as
     * fence's: protect() refuses it until it is marked again.) */
    ok(c, "SELECT fence.unprotect('gl_renamed')");
    ck_assert_int_eq(fence_functions(c, pat), 0);
    fails(c, "SELECT fence.protect('gl_renamed', 'stamp', false, 'plpgsql')", "22023");
    ok(c, "SELECT fence.mark_token_column('gl_renamed', 'stamp')");
    ok(c, "SELECT fence.protect('gl_renamed', 'stamp', false, 'plpgsql')");
    ck_assert_int_eq(fence_functions(c, pat), 2);
    /* Switching to the other implementation leaves no orphan either. */
    if (is_c()) {
        ok(c, "SELECT fence.protect('gl_renamed', 'stamp', false, 'c')");
        ck_assert_int_eq(fence_functions(c, pat), 0);
        ok(c, "SELECT fence.protect('gl_renamed', 'stamp', false, 'plpgsql')");
    } else {
        fails(c, "SELECT fence.protect('gl_renamed', 'stamp', false, 'c')", "22023");
        ck_assert_int_eq(fence_functions(c, pat), 2);
    }
    fails(c, "SELECT fence.protect('gl_renamed', 'stamp', false, 'sql')", "22023");
    fails(c, "SELECT fence.protect('gl_renamed', 'stamp', false, NULL)", "22023");

    /* A dropped table leaves orphans, which the next protect, unprotect
     * or install removes. */
    ok(c, "DROP TABLE gl_renamed");
    ck_assert_int_eq(fence_functions(c, pat), 2);
    ck_assert_int_eq(fence_pg_install(c), FENCE_OK);
    ck_assert_int_eq(fence_functions(c, pat), 0);
    ok(c, "CREATE TABLE gl2 (id int); SELECT fence.protect('gl2', 'fence_token', false, 'plpgsql')");
    snprintf(pat, sizeof pat, "^(guard|check)_%s$", oid_of(c, "gl2"));
    ok(c, "DROP TABLE gl2");
    ck_assert_int_eq(fence_functions(c, pat), 2);
    ok(c, "CREATE TABLE gl3 (id int); SELECT fence.protect('gl3', 'fence_token', false, 'plpgsql')");
    ck_assert_int_eq(fence_functions(c, pat), 0); /* gl2's are gone */
    snprintf(pat, sizeof pat, "^(guard|check)_%s$", oid_of(c, "gl3"));
    ck_assert_int_eq(fence_functions(c, pat), 2);
    ok(c, "SELECT fence.unprotect('gl3'); DROP TABLE gl3");
    ck_assert_int_eq(fence_functions(c, pat), 0);
    PQfinish(c);
}
END_TEST

/* After a restore, a table's new oid may be the one in the name of
 * another table's functions: protect() must not overwrite those. */
START_TEST(generated_names_never_taken_from_another_table)
{
    PGconn *c = db();
    outcome e;
    char sql[1024];
    ok(c, "CREATE TABLE na (id int PRIMARY KEY, v int); INSERT INTO na VALUES (1, 0);"
          "CREATE TABLE nb (id int PRIMARY KEY, v int); INSERT INTO nb VALUES (1, 0);"
          "SELECT fence.protect('na', 'fence_token', false, 'plpgsql')");
    /* Make na's guard carry nb's oid, as a restore could have. */
    char nb_oid[32];
    snprintf(nb_oid, sizeof nb_oid, "%s", oid_of(c, "nb"));
    snprintf(sql, sizeof sql,
             "ALTER FUNCTION fence.guard_%s() RENAME TO guard_%s;"
             "ALTER FUNCTION fence.check_%s() RENAME TO check_%s",
             oid_of(c, "na"), nb_oid, oid_of(c, "na"), nb_oid);
    ok(c, sql);
    ok(c, "SELECT fence.protect('nb', 'fence_token', true, 'plpgsql')");
    snprintf(sql, sizeof sql,
             "SELECT string_agg(t.tgrelid::regclass || ' ' || t.tgfoid::regproc, ',' ORDER BY 1)"
             " FROM pg_trigger t WHERE t.tgname = 'zz_fence_guard_upd'"
             " AND t.tgrelid IN ('na'::regclass, 'nb'::regclass)");
    char want[256];
    snprintf(want, sizeof want, "na fence.guard_%s,nb fence.guard_%s_1", nb_oid, nb_oid);
    ck_assert_str_eq(text1(c, sql), want);
    /* na is still strict, nb permissive. */
    ck_assert_int_eq(write_raw(c, NULL, "UPDATE na SET v = 1", &e), FENCE_ENOTOKEN);
    ck_assert_int_eq(write_raw(c, NULL, "UPDATE nb SET v = 1", &e), FENCE_OK);
    /* Only the owner's session may generate functions for a table. */
    PGconn *app = db_app();
    fails(app, "SELECT fence.generate('na', 'fence_token', true)", "42501");
    ok(app, "CREATE TABLE app_own (id int)");
    ok(app, "SELECT fence.generate('app_own', 'fence_token', true)");
    ok(app, "DROP TABLE app_own");
    ck_assert_int_eq(num(app, "SELECT fence.drop_orphans()"), 2);
    PQfinish(app);
    PQfinish(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The AFTER check: only where a later BEFORE trigger needs it          */
/* ------------------------------------------------------------------ */

static const char *checks_of(PGconn *c, const char *tbl)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT coalesce(string_agg(tgname, ',' ORDER BY tgname), '') FROM pg_trigger"
             " WHERE tgrelid = '%s'::regclass AND tgname LIKE 'zz_fence_check_%%'",
             tbl);
    return text1(c, sql);
}

START_TEST(after_check_only_when_needed)
{
    PGconn *c = db();
    outcome e;
    make_table(c, "ac");
    ok(c, "CREATE FUNCTION ac_zero() RETURNS trigger LANGUAGE plpgsql"
          " AS 'BEGIN NEW.fence_token := 0; RETURN NEW; END'");
    ck_assert_str_eq(checks_of(c, "ac"), "");
    ck_assert_int_eq(write_tok(c, 10, "UPDATE ac SET v = 1", &e), FENCE_OK);
    /* A BEFORE trigger that fires before the guard (name order) or an
     * AFTER one needs no check. */
    ok(c, "CREATE TRIGGER a_first BEFORE INSERT OR UPDATE ON ac FOR EACH ROW EXECUTE FUNCTION ac_zero();"
          "CREATE TRIGGER zzz_after AFTER UPDATE ON ac FOR EACH ROW EXECUTE FUNCTION ac_zero()");
    ck_assert_str_eq(checks_of(c, "ac"), "");
    ck_assert_int_eq(write_tok(c, 11, "UPDATE ac SET v = 2", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT min(fence_token) FROM ac"), 11);
    ok(c, "DROP TRIGGER a_first ON ac; DROP TRIGGER zzz_after ON ac");

    /* Created after protect(): the event trigger adds the check for its
     * event only, and the rewrite is refused. */
    ok(c, "CREATE TRIGGER zzz_upd BEFORE UPDATE ON ac FOR EACH ROW EXECUTE FUNCTION ac_zero()");
    ck_assert_str_eq(checks_of(c, "ac"), "zz_fence_check_upd");
    ck_assert_str_eq(text1(c, "SELECT check_needed || ' ' || check_present FROM fence.protected"
                              " WHERE tbl = 'ac'::regclass"),
                     "true true");
    ck_assert_int_eq(write_tok(c, 11, "UPDATE ac SET v = 3", &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "23Q03");
    ck_assert_int_eq(write_tok(c, 12, "INSERT INTO ac (id, v) VALUES (7, 0)", &e), FENCE_OK);
    /* Renamed into place (ALTER TRIGGER), for INSERT. */
    ok(c, "CREATE TRIGGER a_ins BEFORE INSERT ON ac FOR EACH ROW EXECUTE FUNCTION ac_zero()");
    ck_assert_str_eq(checks_of(c, "ac"), "zz_fence_check_upd");
    ok(c, "ALTER TRIGGER a_ins ON ac RENAME TO zzz_ins");
    ck_assert_str_eq(checks_of(c, "ac"), "zz_fence_check_ins,zz_fence_check_upd");
    ck_assert_int_eq(write_tok(c, 12, "INSERT INTO ac (id, v) VALUES (8, 0)", &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "23Q03");
    ck_assert_int_eq(num(c, "SELECT min(fence_token) FROM ac"), 11);

    /* protect() starts afresh: the checks the triggers need, no more. */
    ok(c, "DROP TRIGGER zzz_ins ON ac; SELECT fence.protect('ac')");
    ck_assert_str_eq(checks_of(c, "ac"), "zz_fence_check_upd");
    ok(c, "DROP TRIGGER zzz_upd ON ac; SELECT fence.protect('ac')");
    ck_assert_str_eq(checks_of(c, "ac"), "");
    ck_assert_str_eq(text1(c, "SELECT check_needed || ' ' || check_present FROM fence.protected"
                              " WHERE tbl = 'ac'::regclass"),
                     "false true");

    /* A disabled later trigger counts (it can be enabled). */
    ok(c, "CREATE TRIGGER zzz_off BEFORE UPDATE ON ac FOR EACH ROW EXECUTE FUNCTION ac_zero();"
          "ALTER TABLE ac DISABLE TRIGGER zzz_off; SELECT fence.protect('ac')");
    ck_assert_str_eq(checks_of(c, "ac"), "zz_fence_check_upd");
    ok(c, "DROP TRIGGER zzz_off ON ac; SELECT fence.protect('ac')");

    /* Without the event trigger (a non-superuser install has none),
     * fence.protected shows what is missing; the C guard refuses such a
     * write by itself, the generated one cannot see it: protect() again. */
    ok(c, "ALTER EVENT TRIGGER fence_later_triggers DISABLE");
    ok(c, "CREATE TRIGGER zzz_late BEFORE UPDATE ON ac FOR EACH ROW EXECUTE FUNCTION ac_zero()");
    ck_assert_str_eq(checks_of(c, "ac"), "");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.protected WHERE check_needed AND NOT check_present"),
                     1);
    fence_status st = write_tok(c, 13, "UPDATE ac SET v = 4 WHERE id = 1", &e);
    if (is_c()) {
        ck_assert_int_eq(st, FENCE_EDB);
        ck_assert_str_eq(e.sqlstate, "23Q03");
        ck_assert_ptr_nonnull(strstr(e.message, "zzz_late"));
    } else {
        ck_assert_int_eq(st, FENCE_OK); /* the documented limit */
        ck_assert_int_eq(num(c, "SELECT fence_token FROM ac WHERE id = 1"), 0);
    }
    ok(c, "SELECT fence.protect('ac')");
    ck_assert_str_eq(checks_of(c, "ac"), "zz_fence_check_upd");
    ck_assert_int_eq(write_tok(c, 13, "UPDATE ac SET v = 5 WHERE id = 2", &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "23Q03");
    ok(c, "ALTER EVENT TRIGGER fence_later_triggers ENABLE");
    PQfinish(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Upgrade from version 3                                               */
/* ------------------------------------------------------------------ */

/* The released version 3 with marks (with and without holders), a table
 * of the installer's, one of another role's, installed by a superuser:
 * the upgrade re-protects both with generated functions (no WHEN clause),
 * keeps stamps and marks; twice is the same. */
START_TEST(upgrade_from_version_3)
{
    char d[NAME_BUF], owner[NAME_BUF], sql[1024];
    side_role("v3owner", owner);
    side_db("v3", NULL, d);
    PGconn *su = connect_as(d, NULL);
    PQsetNoticeProcessor(su, quiet_notice, NULL);
    install_v3(su);
    snprintf(sql, sizeof sql,
             "GRANT CREATE ON SCHEMA public TO %s;"
             "GRANT EXECUTE ON FUNCTION fence.protect(regclass, name, boolean) TO %s",
             owner, owner);
    ok(su, sql);
    outcome e;
    /* Written the way version 3 was written (it has no use_token). */
    ok(su, "BEGIN; SET LOCAL fence.holder = '" HA "'; SELECT fence.advance('v3-h', 30); COMMIT");
    ok(su, "SELECT fence.advance('v3-n', 31)");
    ok(su, "CREATE TABLE t3 (id int PRIMARY KEY, v int); INSERT INTO t3 VALUES (1, 0), (2, 0);"
           "SELECT fence.protect('t3');"
           "BEGIN; SET LOCAL fence.token = 40; UPDATE t3 SET v = 1; COMMIT");
    PGconn *o = connect_as(d, owner);
    PQsetNoticeProcessor(o, quiet_notice, NULL);
    ok(o, "CREATE TABLE o3 (id int PRIMARY KEY, lock_version integer); INSERT INTO o3 VALUES (1, 2);"
          "SELECT fence.protect('o3', 'lock_version', permissive => true)");
    ck_assert_int_eq(num(su, "SELECT count(*) FROM pg_trigger WHERE tgqual IS NOT NULL"
                             " AND tgname LIKE 'zz_fence_%'"),
                     10);

    for (int i = 0; i < 2; i++) {
        notes n = {{0}};
        PQsetNoticeReceiver(su, collect_notice, &n);
        ck_assert_msg(fence_pg_install(su) == FENCE_OK, "upgrade: %s", fence_pg_errmsg(su));
        ck_assert_msg(strstr(n.text, "WARNING") == NULL, "warnings: %s", n.text);
        ck_assert_int_eq(num(su, "SELECT fence.version()"), PG_SQL_VERSION);
        ck_assert_int_eq(num(su, "SELECT count(*) FROM pg_proc WHERE proname IN ('row_guard', 'row_check')"
                                 " AND pronamespace = 'fence'::regnamespace"),
                         0);
        ck_assert_str_eq(text1(su, "SELECT string_agg(tbl || ' ' || col || ' ' || mode || ' '"
                                   " || implementation || ' ' || check_present, ',' ORDER BY tbl::text)"
                                   " FROM fence.protected"),
                         "o3 lock_version permissive plpgsql true,t3 fence_token strict plpgsql true");
        ck_assert_int_eq(num(su, "SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'zz_fence_%'"), 8);
        ck_assert_int_eq(num(su, "SELECT count(*) FROM pg_trigger WHERE tgqual IS NOT NULL"
                                 " AND tgname LIKE 'zz_fence_%'"),
                         0);
        ck_assert_int_eq(num(su, "SELECT count(*) FROM pg_event_trigger"
                                 " WHERE evtname = 'fence_later_triggers'"),
                         1);
    }
    /* Marks and stamps kept; the rules apply as before. */
    char h[FENCE_HOLDER_LEN + 1];
    ck_assert_uint_eq(mark_of(su, "v3-h", h), 30);
    ck_assert_str_eq(h, HA);
    ck_assert_uint_eq(mark_of(su, "v3-n", h), 31);
    ck_assert_str_eq(h, "");
    ck_assert_int_eq(advance_h(su, 30, NULL, "v3-h", &e), FENCE_STALE);
    ck_assert_int_eq(e.stale.reason, FENCE_STALE_REPEAT);
    ck_assert_int_eq(advance_h(su, 30, HA, "v3-h", &e), FENCE_OK);
    ck_assert_int_eq(write_tok(su, 39, "UPDATE t3 SET v = 2", &e), FENCE_STALE);
    ck_assert_str_eq(e.stale.object, "public.t3");
    ck_assert_uint_eq(e.stale.highest, 40);
    ck_assert_int_eq(write_tok(su, 40, "UPDATE t3 SET v = 2", &e), FENCE_OK);
    ck_assert_int_eq(write_raw(o, NULL, "UPDATE o3 SET id = 1", &e), FENCE_OK); /* permissive */
    ck_assert_int_eq(write_tok(o, 1, "UPDATE o3 SET id = 1", &e), FENCE_STALE);
    ck_assert_int_eq(num(o, "SELECT lock_version FROM o3"), 2);
    /* The owner's GRANT on protect() still works alone. */
    ok(o, "SELECT fence.protect('o3', 'lock_version')");
    ck_assert_int_eq(write_raw(o, NULL, "UPDATE o3 SET id = 1", &e), FENCE_ENOTOKEN);
    PQfinish(o);
    PQfinish(su);
    drop_side_db(d);
}
END_TEST

/* The same installed by a non-superuser admin: another role's table cannot
 * be protected again by the install, so the install fails as a whole
 * (55000, naming the table and what to do) and changes nothing: the table
 * stays fenced by version 3's triggers.  Its owner unprotects it (keeping
 * the column and its stamps), the install then succeeds, and the owner
 * protects it again: the stamps still refuse a stale token. */
START_TEST(upgrade_from_version_3_not_owner)
{
    char d[NAME_BUF], fadmin[NAME_BUF], owner[NAME_BUF], sql[1024];
    side_role("v3admin", fadmin);
    side_role("v3own", owner);
    side_db("v3b", NULL, d);
    PGconn *su = connect_as(d, NULL);
    snprintf(sql, sizeof sql,
             "GRANT CREATE ON DATABASE %s TO %s; GRANT CREATE ON SCHEMA public TO %s, %s", d,
             fadmin, owner, fadmin);
    ok(su, sql);
    PGconn *fa = connect_as(d, fadmin);
    PQsetNoticeProcessor(fa, quiet_notice, NULL);
    install_v3(fa);
    snprintf(sql, sizeof sql, "GRANT EXECUTE ON FUNCTION fence.protect(regclass, name, boolean) TO %s",
             owner);
    ok(fa, sql);
    PGconn *o = connect_as(d, owner);
    PQsetNoticeProcessor(o, quiet_notice, NULL);
    ok(o, "CREATE TABLE theirs3 (id int PRIMARY KEY, v int); INSERT INTO theirs3 VALUES (1, 0);"
          "SELECT fence.protect('theirs3');"
          "BEGIN; SET LOCAL fence.token = 9; UPDATE theirs3 SET v = 1; COMMIT");

    static const char trigs[] = "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'theirs3'::regclass"
                                " AND tgqual IS NOT NULL AND tgname LIKE 'zz_fence_%'";
    long long before = num(fa, trigs); /* version 3's, with their WHEN clauses */
    ck_assert_int_gt(before, 0);
    notes n = {{0}};
    PQsetNoticeReceiver(fa, collect_notice, &n);
    ck_assert_int_eq(fence_pg_install(fa), FENCE_EDB);
    ck_assert_str_eq(fence_pg_sqlstate(fa), "55000");
    ck_assert_msg(strstr(fence_pg_errmsg(fa), "theirs3 is protected by version 3's generic triggers") != NULL,
                  "%s", fence_pg_errmsg(fa));
    ck_assert_int_eq(num(fa, "SELECT fence.version()"), 3);
    ck_assert_int_eq(num(fa, trigs), before);
    fails(o, "BEGIN; SET LOCAL fence.token = 8; UPDATE theirs3 SET v = 2", "23Q01");
    ok(o, "ROLLBACK");
    /* The documented way out. */
    snprintf(sql, sizeof sql, "GRANT EXECUTE ON FUNCTION fence.unprotect(regclass) TO %s", owner);
    ok(fa, sql);
    ok(o, "SELECT fence.unprotect('theirs3')");
    ck_assert_msg(fence_pg_install(fa) == FENCE_OK, "upgrade: %s", fence_pg_errmsg(fa));
    ck_assert_int_eq(num(fa, "SELECT fence.version()"), PG_SQL_VERSION);
    ok(o, "SELECT fence.protect('theirs3')");
    ck_assert_str_eq(text1(fa, "SELECT implementation FROM fence.protected"), "plpgsql");
    outcome e;
    ck_assert_int_eq(write_tok(o, 8, "UPDATE theirs3 SET v = 3", &e), FENCE_STALE);
    ck_assert_str_eq(e.stale.object, "public.theirs3");
    ck_assert_int_eq(write_tok(o, 9, "UPDATE theirs3 SET v = 3", &e), FENCE_OK);
    PQfinish(o);
    PQfinish(fa);
    PQfinish(su);
    drop_side_db(d);
}
END_TEST

/* A table retrofitted the way version 5 offered, fence.protect('posts',
 * 'lock_version'): its ORM's counter holds tokens.  After the upgrade it
 * is still guarded so (nothing changes by itself); protect() with fence's
 * own column is refused, naming the migration; fence.migrate_version_column()
 * moves fencing to fence_token in one statement carrying exactly the
 * current stamps, so no fencing is lost: right after it a stale token is
 * refused and an equal or higher one admitted; lock_version is left to the
 * application (its values kept, never written by fence again). */
START_TEST(upgrade_from_version_5_migrates_lock_version)
{
    char d[NAME_BUF];
    outcome e;
    side_db("v5m", NULL, d);
    PGconn *c = connect_as(d, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    install_v5(c);
    if (is_c()) {
        create_extension(c);
    }
    ok(c, "CREATE TABLE posts (id int PRIMARY KEY, title text NOT NULL, lock_version integer DEFAULT 0);"
          "INSERT INTO posts VALUES (1, 'a', 0), (2, 'b', 3), (3, 'c', NULL);"
          "SELECT fence.protect('posts', 'lock_version')");
    ck_assert_int_eq(write_tok(c, 10, "UPDATE posts SET title = 'a1' WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(write_tok(c, 12, "UPDATE posts SET title = 'b1', lock_version = lock_version + 1"
                                      " WHERE id = 2 AND lock_version = 3", &e),
                     FENCE_OK);
    /* The flaw: the token overwrote the ORM's +1. */
    ck_assert_str_eq(text1(c, "SELECT string_agg(lock_version::text, ' ' ORDER BY id) FROM posts"), "10 12 0");

    ck_assert_msg(fence_pg_install(c) == FENCE_OK, "upgrade: %s", fence_pg_errmsg(c));
    ck_assert_int_eq(num(c, "SELECT fence.version()"), PG_SQL_VERSION);
    char want[64];
    snprintf(want, sizeof want, "lock_version %s", pg_impl());
    ck_assert_str_eq(text1(c, "SELECT col || ' ' || implementation FROM fence.protected"), want);
    ck_assert_int_eq(write_tok(c, 11, "UPDATE posts SET title = 'x' WHERE id = 2", &e), FENCE_STALE);
    /* Re-protecting it as it is keeps working (set_mode too). */
    ok(c, "SELECT fence.protect('posts', 'lock_version')");
    stmt_res r = stmt_exec(c, "SELECT fence.protect('posts')");
    expect_stmt_err(&r, "22023", NULL, NULL, "protect('posts') on the old retrofit");
    ck_assert_msg(strstr(r.hint, "SELECT fence.migrate_version_column('public.posts')") != NULL, "%s", r.hint);

    /* In a transaction that rolls back, nothing happens. */
    ok(c, "BEGIN; SELECT fence.migrate_version_column('posts'); ROLLBACK");
    ck_assert_str_eq(text1(c, "SELECT col FROM fence.protected"), "lock_version");

    ok(c, "SELECT fence.migrate_version_column('posts')");
    ck_assert_str_eq(text1(c, "SELECT col || ' ' || mode || ' ' || implementation FROM fence.protected"),
                     is_c() ? "fence_token strict c" : "fence_token strict plpgsql");
    ck_assert_str_eq(text1(c, "SELECT string_agg(fence_token || '/' || lock_version, ' ' ORDER BY id) FROM posts"),
                     "10/10 12/12 0/0");
    ck_assert_str_eq(text1(c, "SELECT string_agg(col, ',') FROM fence.token_columns WHERE tbl = 'posts'::regclass"),
                     "fence_token");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.verify()"), 0);
    /* No fencing lost: stale refused, equal and higher admitted. */
    ck_assert_int_eq(write_tok(c, 11, "UPDATE posts SET title = 'x' WHERE id = 2", &e), FENCE_STALE);
    ck_assert_uint_eq(e.stale.highest, 12);
    ck_assert_int_eq(write_tok(c, 9, "DELETE FROM posts WHERE id = 1", &e), FENCE_STALE);
    ck_assert_int_eq(write_tok(c, 12, "UPDATE posts SET title = 'b2', lock_version = lock_version + 1"
                                      " WHERE id = 2 AND lock_version = 12", &e),
                     FENCE_OK);
    ck_assert_int_eq(write_tok(c, 13, "UPDATE posts SET title = 'b3', lock_version = lock_version + 1"
                                      " WHERE id = 2 AND lock_version = 13", &e),
                     FENCE_OK);
    ck_assert_int_eq(write_tok(c, 10, "UPDATE posts SET title = 'a2' WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(write_raw(c, NULL, "UPDATE posts SET title = 'c2' WHERE id = 3", &e), FENCE_ENOTOKEN);
    /* lock_version is the application's counter again. */
    ck_assert_str_eq(text1(c, "SELECT string_agg(title || ':' || lock_version || '/' || fence_token, ' ' ORDER BY id)"
                              " FROM posts"),
                     "a2:10/10 b3:14/13 c:0/0");
    fails(c, "SELECT fence.migrate_version_column('posts')", "22023");
    ok(c, "CREATE TABLE plain (id int)");
    fails(c, "SELECT fence.migrate_version_column('plain')", "22023");
    fails(c, "SELECT fence.migrate_version_column(NULL)", "22023");
    ck_assert_msg(fence_pg_install(c) == FENCE_OK, "install again: %s", fence_pg_errmsg(c));
    ck_assert_str_eq(text1(c, "SELECT col FROM fence.protected"), "fence_token");
    PQfinish(c);
    drop_side_db(d);
}
END_TEST

/* ------------------------------------------------------------------ */
/* fence.verify(): the guard's triggers are what protect() made         */
/* ------------------------------------------------------------------ */

/* tmpl with every "@<letter>" whose letter is letters[i] replaced by
 * with[i], into out (n bytes). */
static void subst(char *out, size_t n, const char *tmpl, const char *letters,
                  const char *const *with)
{
    size_t o = 0;
    for (const char *p = tmpl; *p != '\0'; p++) {
        const char *at = p[0] == '@' && p[1] != '\0' ? strchr(letters, p[1]) : NULL;
        const char *w = at != NULL ? with[at - letters] : p;
        size_t len = at != NULL ? strlen(w) : 1;
        ck_assert(o + len < n);
        memcpy(out + o, w, len);
        o += len;
        p += at != NULL ? 1 : 0;
    }
    out[o] = '\0';
}

/* The SQLSTATE of sql, run in a transaction rolled back after it ("" when
 * it succeeded; static buffer). */
static const char *probe(PGconn *c, const char *sql)
{
    static char state[6];
    outcome e;
    ok(c, "BEGIN");
    fence_status st = run(c, sql, &e);
    ok(c, "ROLLBACK");
    snprintf(state, sizeof state, "%s", st == FENCE_OK ? "" : e.sqlstate);
    return state;
}

/* fence.verify()'s reasons for table tt, one a line in byte order
 * (static buffer). */
static const char *tt_reasons(PGconn *c)
{
    return text1(c, "SELECT COALESCE(string_agg(reason, E'\\n' ORDER BY reason COLLATE \"C\"), '')"
                    " FROM fence.verify() WHERE tbl = 'tt'::regclass");
}

/* One row per tampering of a protected table tt (id, v, status; rows 1
 * and 2): done by its owner after fence.protect(), with @G the guard
 * function zz_fence_guard_upd calls and @C its AFTER check.  why: what
 * fence.verify() says about tt, for [plpgsql, c] (NULL: as plpgsql);
 * listed: whether fence.protected still lists tt [plpgsql, c]; the probe,
 * a write without a token: its SQLSTATE before the install [plpgsql, c]
 * ("" admitted -- the hole --, NULL not looked at) and after it (refused). */
static const struct tamper_case {
    const char *name;
    const char *setup; /* before fence.protect() */
    const char *tamper;
    const char *why[2];
    bool listed[2];
    const char *probe;
    const char *before[2];
    const char *after;
} tamper_cases[] = {
    {"upd_when_false", "",
     "DROP TRIGGER zz_fence_guard_upd ON tt; CREATE TRIGGER zz_fence_guard_upd BEFORE UPDATE ON tt"
     " FOR EACH ROW WHEN (false) EXECUTE FUNCTION @G('fence_token', 'strict')",
     {"trigger zz_fence_guard_upd fires only WHEN (false)", NULL}, {false, false},
     "UPDATE tt SET v = v + 1 WHERE id = 1", {"", ""}, "23Q02"},
    {"upd_of_status", "",
     "DROP TRIGGER zz_fence_guard_upd ON tt; CREATE TRIGGER zz_fence_guard_upd BEFORE UPDATE OF status"
     " ON tt FOR EACH ROW EXECUTE FUNCTION @G('fence_token', 'strict')",
     {"trigger zz_fence_guard_upd fires only on UPDATE OF status", NULL}, {false, false},
     "UPDATE tt SET v = v + 1 WHERE id = 1", {"", ""}, "23Q02"},
    {"upd_when_status", "",
     "DROP TRIGGER zz_fence_guard_upd ON tt; CREATE TRIGGER zz_fence_guard_upd BEFORE UPDATE ON tt"
     " FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)"
     " EXECUTE FUNCTION @G('fence_token', 'strict')",
     {"trigger zz_fence_guard_upd fires only WHEN ((old.status IS DISTINCT FROM new.status))", NULL},
     {false, false}, "UPDATE tt SET v = v + 1 WHERE id = 1", {"", ""}, "23Q02"},
    {"ins_when", "",
     "DROP TRIGGER zz_fence_guard_ins ON tt; CREATE TRIGGER zz_fence_guard_ins BEFORE INSERT ON tt"
     " FOR EACH ROW WHEN (NEW.v < 0) EXECUTE FUNCTION @G('fence_token', 'strict')",
     {"trigger zz_fence_guard_ins fires only WHEN ((new.v < 0))", NULL}, {false, false},
     "INSERT INTO tt (id, v) VALUES (9, 0)", {"", ""}, "23Q02"},
    {"del_when", "",
     "DROP TRIGGER zz_fence_guard_del ON tt; CREATE TRIGGER zz_fence_guard_del BEFORE DELETE ON tt"
     " FOR EACH ROW WHEN (OLD.v < 0) EXECUTE FUNCTION @G('fence_token', 'strict')",
     {"trigger zz_fence_guard_del fires only WHEN ((old.v < 0))", NULL}, {false, false},
     "DELETE FROM tt WHERE id = 1", {"", ""}, "23Q02"},
    {"upd_statement", "",
     "DROP TRIGGER zz_fence_guard_upd ON tt; CREATE TRIGGER zz_fence_guard_upd BEFORE UPDATE ON tt"
     " FOR EACH STATEMENT EXECUTE FUNCTION @G('fence_token', 'strict')",
     {"trigger zz_fence_guard_upd is not a BEFORE UPDATE row trigger", NULL}, {false, false},
     "UPDATE tt SET v = v + 1 WHERE id = 1", {NULL, NULL}, "23Q02"},
    {"upd_insert_too", "",
     "DROP TRIGGER zz_fence_guard_upd ON tt; CREATE TRIGGER zz_fence_guard_upd BEFORE INSERT OR UPDATE"
     " ON tt FOR EACH ROW EXECUTE FUNCTION @G('fence_token', 'strict')",
     {"trigger zz_fence_guard_upd is not a BEFORE UPDATE row trigger", NULL}, {false, false},
     "UPDATE tt SET v = v + 1 WHERE id = 1", {"23Q02", "23Q02"}, "23Q02"},
    {"upd_disabled", "", "ALTER TABLE tt DISABLE TRIGGER zz_fence_guard_upd",
     {"trigger zz_fence_guard_upd is disabled", NULL}, {false, false},
     "UPDATE tt SET v = v + 1 WHERE id = 1", {"", ""}, "23Q02"},
    {"upd_replica", "", "ALTER TABLE tt ENABLE REPLICA TRIGGER zz_fence_guard_upd",
     {"trigger zz_fence_guard_upd is disabled (ENABLE REPLICA: it fires only in replica mode)", NULL},
     {false, false}, "UPDATE tt SET v = v + 1 WHERE id = 1", {"", ""}, "23Q02"},
    {"upd_always", "", "ALTER TABLE tt ENABLE ALWAYS TRIGGER zz_fence_guard_upd", {"", NULL},
     {true, true}, "UPDATE tt SET v = v + 1 WHERE id = 1", {"23Q02", "23Q02"}, "23Q02"},
    {"upd_renamed", "", "ALTER TRIGGER zz_fence_guard_upd ON tt RENAME TO guard_upd_old",
     {"no guard: zz_fence_guard_upd is missing or does not call fence's guard", NULL}, {false, false},
     "UPDATE tt SET v = v + 1 WHERE id = 1", {"23Q02", "23Q02"}, "23Q02"},
    {"upd_other_function", "",
     "DROP TRIGGER zz_fence_guard_upd ON tt; CREATE TRIGGER zz_fence_guard_upd BEFORE UPDATE ON tt"
     " FOR EACH ROW EXECUTE FUNCTION tt_noop()",
     {"no guard: zz_fence_guard_upd is missing or does not call fence's guard", NULL}, {false, false},
     "UPDATE tt SET v = v + 1 WHERE id = 1", {"", ""}, "23Q02"},
    {"ins_other_function", "",
     "DROP TRIGGER zz_fence_guard_ins ON tt; CREATE TRIGGER zz_fence_guard_ins BEFORE INSERT ON tt"
     " FOR EACH ROW EXECUTE FUNCTION tt_noop('fence_token', 'strict')",
     {"trigger zz_fence_guard_ins calls public.tt_noop(), not @G()", NULL}, {false, false},
     "INSERT INTO tt (id, v) VALUES (9, 0)", {"", ""}, "23Q02"},
    /* Only zz_fence_guard_upd's mode changed: the generated function has
     * its mode baked in (the arguments are what fence.protected shows),
     * the C guard reads them -- a permissive guard of UPDATE. */
    {"upd_args", "",
     "DROP TRIGGER zz_fence_guard_upd ON tt; CREATE TRIGGER zz_fence_guard_upd BEFORE UPDATE ON tt"
     " FOR EACH ROW EXECUTE FUNCTION @G('fence_token', 'permissive')",
     {"trigger zz_fence_guard_upd is not called with ('fence_token', 'strict')",
      "guarded by column fence_token, permissive, c, not as fence.tables records it (column"
      " fence_token, strict, c)\n"
      "trigger zz_fence_guard_del is not called with ('fence_token', 'permissive')\n"
      "trigger zz_fence_guard_ins is not called with ('fence_token', 'permissive')"},
     {false, false}, "UPDATE tt SET v = v + 1 WHERE id = 1", {"23Q02", ""}, "23Q02"},
    /* All three: the C guard is whole again, but permissive -- not what
     * fence.tables records. */
    {"all_args", "",
     "DROP TRIGGER zz_fence_guard_upd ON tt; DROP TRIGGER zz_fence_guard_ins ON tt;"
     " DROP TRIGGER zz_fence_guard_del ON tt;"
     " CREATE TRIGGER zz_fence_guard_upd BEFORE UPDATE ON tt FOR EACH ROW"
     " EXECUTE FUNCTION @G('fence_token', 'permissive');"
     " CREATE TRIGGER zz_fence_guard_ins BEFORE INSERT ON tt FOR EACH ROW"
     " EXECUTE FUNCTION @G('fence_token', 'permissive');"
     " CREATE TRIGGER zz_fence_guard_del BEFORE DELETE ON tt FOR EACH ROW"
     " EXECUTE FUNCTION @G('fence_token', 'permissive')",
     {"trigger zz_fence_guard_del is not called with ('fence_token', 'strict')\n"
      "trigger zz_fence_guard_ins is not called with ('fence_token', 'strict')\n"
      "trigger zz_fence_guard_upd is not called with ('fence_token', 'strict')",
      "guarded by column fence_token, permissive, c, not as fence.tables records it (column"
      " fence_token, strict, c)"},
     {false, true}, "UPDATE tt SET v = v + 1 WHERE id = 1", {"23Q02", ""}, "23Q02"},
    {"trunc_when", "",
     "DROP TRIGGER zz_fence_guard_truncate ON tt; CREATE TRIGGER zz_fence_guard_truncate BEFORE"
     " TRUNCATE ON tt FOR EACH STATEMENT WHEN (false) EXECUTE FUNCTION fence.refuse_truncate()",
     {"trigger zz_fence_guard_truncate fires only WHEN (false)", NULL}, {false, false},
     "TRUNCATE tt", {"", ""}, "23Q03"},
    {"trunc_other_function", "",
     "DROP TRIGGER zz_fence_guard_truncate ON tt; CREATE TRIGGER zz_fence_guard_truncate BEFORE"
     " TRUNCATE ON tt FOR EACH STATEMENT EXECUTE FUNCTION tt_noop()",
     {"trigger zz_fence_guard_truncate calls public.tt_noop(), not fence.refuse_truncate()", NULL},
     {false, false}, "TRUNCATE tt", {"", ""}, "23Q03"},
    /* The AFTER check (a later BEFORE trigger needs it): the guard is
     * whole, fence.protected lists tt with check_present false. */
    {"check_when_false",
     "CREATE TRIGGER zzz_later BEFORE UPDATE ON tt FOR EACH ROW EXECUTE FUNCTION tt_noop()",
     "DROP TRIGGER zz_fence_check_upd ON tt; CREATE TRIGGER zz_fence_check_upd AFTER UPDATE ON tt"
     " FOR EACH ROW WHEN (false) EXECUTE FUNCTION @C('fence_token', 'strict')",
     {"trigger zz_fence_check_upd fires only WHEN (false)", NULL}, {true, true},
     "UPDATE tt SET v = v + 1 WHERE id = 1", {"23Q02", "23Q02"}, "23Q02"},
    {"check_deferred",
     "CREATE TRIGGER zzz_later BEFORE UPDATE ON tt FOR EACH ROW EXECUTE FUNCTION tt_noop()",
     "DROP TRIGGER zz_fence_check_upd ON tt; CREATE CONSTRAINT TRIGGER zz_fence_check_upd AFTER UPDATE"
     " ON tt DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION @C('fence_token', 'strict')",
     {"trigger zz_fence_check_upd is a constraint trigger or has transition tables", NULL},
     {true, true}, "UPDATE tt SET v = v + 1 WHERE id = 1", {"23Q02", "23Q02"}, "23Q02"},
};

/* Each tampering is reported, tt leaves fence.protected where its guard
 * is not whole, the probe shows the hole it opens; the install protects tt
 * again (a WARNING naming it), after which the probe is refused. */
START_TEST(verify_checks_what_the_triggers_are)
{
    const struct tamper_case *tc = &tamper_cases[_i];
    int k = is_c() ? 1 : 0;
    char d[NAME_BUF], g[128], ck[128], sql[2048], want[2048];
    char suffix[48];
    snprintf(suffix, sizeof suffix, "tamper%d", _i);
    side_db(suffix, NULL, d);
    PGconn *c = connect_as(d, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    ck_assert_int_eq(fence_pg_install(c), FENCE_OK);
    if (is_c()) {
        create_extension(c);
    }
    ok(c, "CREATE FUNCTION tt_noop() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';"
          "CREATE TABLE tt (id int PRIMARY KEY, v int, status text);"
          "INSERT INTO tt VALUES (1, 0, 'a'), (2, 0, 'a')");
    ok(c, tc->setup[0] != '\0' ? tc->setup : "SELECT 1");
    ok(c, "SELECT fence.protect('tt')");
    ck_assert_str_eq(tt_reasons(c), "");
    snprintf(g, sizeof g, "%s",
             text1(c, "SELECT tgfoid::regproc::text FROM pg_trigger"
                      " WHERE tgrelid = 'tt'::regclass AND tgname = 'zz_fence_guard_upd'"));
    snprintf(ck, sizeof ck, "%s", is_c() ? "fence.c_check" : g);
    if (!is_c()) {
        memcpy(strstr(ck, "guard_"), "check_", 6);
    }
    const char *const fns[] = {g, ck};
    subst(sql, sizeof sql, tc->tamper, "GC", fns);
    ok(c, sql);

    const char *why = tc->why[k] != NULL ? tc->why[k] : tc->why[0];
    subst(want, sizeof want, why, "GC", fns);
    ck_assert_str_eq(tt_reasons(c), want);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.protected WHERE tbl = 'tt'::regclass"),
                     tc->listed[k] ? 1 : 0);
    if (tc->before[k] != NULL) {
        ck_assert_str_eq(probe(c, tc->probe), tc->before[k]);
    }

    notes n;
    memset(&n, 0, sizeof n);
    PQsetNoticeReceiver(c, collect_notice, &n);
    ck_assert_int_eq(fence_pg_install(c), FENCE_OK);
    PQsetNoticeReceiver(c, NULL, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    if (want[0] != '\0') {
        ck_assert_msg(strstr(n.text, "public.tt was not guarded as fence.protect() left it") != NULL,
                      "the install's warnings: %s", n.text);
    } else {
        ck_assert_msg(strstr(n.text, "public.tt") == NULL, "the install's warnings: %s", n.text);
    }
    ck_assert_str_eq(tt_reasons(c), "");
    ck_assert_str_eq(text1(c, "SELECT col || ' ' || mode || ' ' || implementation || ' '"
                              " || check_present FROM fence.protected WHERE tbl = 'tt'::regclass"),
                     is_c() ? "fence_token strict c true" : "fence_token strict plpgsql true");
    ck_assert_str_eq(probe(c, tc->probe), tc->after);
    PQfinish(c);
    drop_side_db(d);
}
END_TEST

/* ------------------------------------------------------------------ */
/* fence.verify() and the install: the privilege policy                 */
/* ------------------------------------------------------------------ */

/* fence.verify()'s rows about the privilege policy, one reason a line
 * (static buffer). */
static const char *policy_reasons(PGconn *c)
{
    return text1(c, "SELECT COALESCE(string_agg(reason, E'\\n' ORDER BY reason COLLATE \"C\"), '')"
                    " FROM fence.verify() WHERE tbl = 'fence.advance_grants'::regclass"
                    " AND col IS NULL AND mode IS NULL AND implementation IS NULL");
}

/* One row per change of the policy, on a database where fence.grant(@A)
 * ran (role @A may advance, PUBLIC may not; @O is another role, @X a
 * role that is dropped after the change): change, as the installer;
 * what fence.verify() says (@A/@O/@X replaced); whether @A and @O may
 * advance before the install; the install's WARNING (a part of it, "" for
 * none); what verify() says after it; whether @A and @O may advance then. */
static const struct policy_case {
    const char *name;
    const char *change;
    const char *why;
    bool app_before, other_before;
    const char *warning;
    const char *why_after;
    bool app_after, other_after;
} policy_cases[] = {
    {"as_granted", "SELECT 1", "", true, false, "", "", true, false},
    /* What a failed restore leaves -- PUBLIC executing it, a recorded
     * role without it -- is put back, also when done by hand. */
    {"public_granted_by_hand", "GRANT EXECUTE ON FUNCTION fence.advance(text, bigint) TO PUBLIC",
     "PUBLIC may execute fence.advance(), which fence.advance_grants does not allow", true, true,
     "revoked EXECUTE on fence.advance() from PUBLIC", "", true, false},
    /* By hand, the function's owner: recorded by the install (a restore
     * never grants a role what its source did not). */
    {"role_granted_by_hand", "GRANT EXECUTE ON FUNCTION fence.advance(text, bigint) TO @O",
     "role @O may execute fence.advance(), which fence.advance_grants does not allow", true, true,
     "role @O may execute fence.advance() (granted by hand): recorded", "", true, true},
    /* Nor takes it from PUBLIC: recorded too. */
    {"public_revoked_by_hand",
     "SELECT fence.grant_public(); REVOKE EXECUTE ON FUNCTION fence.advance(text, bigint) FROM PUBLIC",
     "PUBLIC may not execute fence.advance(), which fence.advance_grants allows", true, false,
     "PUBLIC may no longer execute fence.advance() (revoked by hand): recorded", "", true, false},
    {"role_revoked_by_hand", "REVOKE EXECUTE ON FUNCTION fence.advance(text, bigint) FROM @A",
     "role @A may not execute fence.advance(), which fence.advance_grants allows", false, false,
     "granted EXECUTE on fence.advance() to role @A", "", true, false},
    {"revoke", "SELECT fence.revoke('@A')", "", false, false, "", "", false, false},
    {"grant_other", "SELECT fence.grant('@O', revoke_public => false)", "", true, true, "", "", true,
     true},
    {"grant_public", "SELECT fence.grant_public()", "", true, true, "", "", true, true},
    {"recorded_role_dropped",
     "SELECT fence.grant('@X'); REVOKE EXECUTE ON FUNCTION fence.advance(text, bigint) FROM @X;"
     "DROP ROLE @X",
     "role @X is in fence.advance_grants but does not exist in this cluster", true, false,
     "lets role @X execute fence.advance(), and no role of that name exists in this cluster",
     "role @X is in fence.advance_grants but does not exist in this cluster", true, false},
};

/* Whether role r may call fence.advance (as r, in database d). */
static bool may_advance(const char *d, const char *r)
{
    PGconn *c = connect_as(d, r);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    outcome e;
    fence_status st = run(c, "SELECT fence.advance('p', 1)", &e);
    ck_assert_msg(st == FENCE_OK || strcmp(e.sqlstate, "42501") == 0, "advance as %s: %s", r,
                  e.message);
    PQfinish(c);
    return st == FENCE_OK;
}

START_TEST(verify_reports_the_privilege_policy)
{
    const struct policy_case *pc = &policy_cases[_i];
    char d[NAME_BUF], a[NAME_BUF], o[NAME_BUF], x[NAME_BUF], sql[1024], want[1024];
    char suffix[48];
    snprintf(suffix, sizeof suffix, "policy%d", _i);
    side_db(suffix, NULL, d);
    snprintf(suffix, sizeof suffix, "pa%d", _i);
    side_role(suffix, a);
    snprintf(suffix, sizeof suffix, "po%d", _i);
    side_role(suffix, o);
    snprintf(suffix, sizeof suffix, "px%d", _i);
    side_role(suffix, x);
    PGconn *c = connect_as(d, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    ck_assert_int_eq(fence_pg_install(c), FENCE_OK);
    ck_assert_str_eq(policy_reasons(c), "");
    ck_assert_str_eq(text1(c, "SELECT string_agg(grantee, ',') FROM fence.advance_grants"), "public");
    snprintf(sql, sizeof sql, "SELECT fence.grant('%s')", a);
    ok(c, sql);
    ck_assert_str_eq(policy_reasons(c), "");
    const char *const roles[] = {a, o, x};
    subst(sql, sizeof sql, pc->change, "AOX", roles);
    ok(c, sql);
    subst(want, sizeof want, pc->why, "AOX", roles);
    ck_assert_str_eq(policy_reasons(c), want);
    ck_assert_int_eq(may_advance(d, a), pc->app_before);
    ck_assert_int_eq(may_advance(d, o), pc->other_before);

    notes n;
    memset(&n, 0, sizeof n);
    PQsetNoticeReceiver(c, collect_notice, &n);
    ck_assert_int_eq(fence_pg_install(c), FENCE_OK);
    PQsetNoticeReceiver(c, NULL, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    subst(want, sizeof want, pc->warning, "AOX", roles);
    if (want[0] != '\0') {
        ck_assert_msg(strstr(n.text, want) != NULL, "no \"%s\" in the install's warnings: %s", want,
                      n.text);
    } else {
        ck_assert_msg(strstr(n.text, "advance") == NULL, "the install's warnings: %s", n.text);
    }
    subst(want, sizeof want, pc->why_after, "AOX", roles);
    ck_assert_str_eq(policy_reasons(c), want);
    ck_assert_int_eq(may_advance(d, a), pc->app_after);
    ck_assert_int_eq(may_advance(d, o), pc->other_after);
    PQfinish(c);
    drop_side_db(d);
}
END_TEST

/* ------------------------------------------------------------------ */
/* fence's token column marker: fence.is_token_column() and               */
/* fence.mark_token_column()                                             */
/* ------------------------------------------------------------------ */

/* One row per way a table mk (id, tok bigint NOT NULL, other, "Odd ""col",
 * "order") gets, keeps or loses a marker: setup (must succeed), then call,
 * whose SQLSTATE is state ("" succeeded; @R is a role that owns nothing);
 * marked: every column of the tables named mk... for which
 * fence.is_token_column() is true after it, "table.column" in byte order
 * (fence.token_columns must list the same). */
static const struct marker_case {
    const char *name;
    const char *setup;
    const char *call;
    const char *state;
    const char *marked;
} marker_cases[] = {
    {"unmarked", "", "SELECT 1", "", ""},
    {"marked", "", "SELECT fence.mark_token_column('mk', 'tok')", "", "mk.tok"},
    {"marked_twice", "SELECT fence.mark_token_column('mk', 'tok')",
     "SELECT fence.mark_token_column('mk', 'tok')", "", "mk.tok"},
    {"moved", "SELECT fence.mark_token_column('mk', 'tok')",
     "SELECT fence.mark_token_column('mk', 'other')", "", "mk.other"},
    {"unmarked_again", "SELECT fence.mark_token_column('mk', 'tok')",
     "SELECT fence.mark_token_column('mk', NULL)", "", ""},
    {"unmark_unmarked", "", "SELECT fence.mark_token_column('mk', NULL)", "", ""},
    {"odd_name", "", "SELECT fence.mark_token_column('mk', 'Odd \"col')", "", "mk.Odd \"col"},
    {"keyword_name", "", "SELECT fence.mark_token_column('mk', 'order')", "", "mk.order"},
    /* It follows its column. */
    {"column_renamed", "SELECT fence.mark_token_column('mk', 'tok')",
     "ALTER TABLE mk RENAME tok TO tok2", "", "mk.tok2"},
    {"column_dropped", "SELECT fence.mark_token_column('mk', 'tok')", "ALTER TABLE mk DROP COLUMN tok",
     "", ""},
    /* It is recognised by what it is, not by who made it. */
    {"by_hand", "", "ALTER TABLE mk ADD CONSTRAINT fence_token_column CHECK (tok IS NOT NULL)", "",
     "mk.tok"},
    {"not_valid", "",
     "ALTER TABLE mk ADD CONSTRAINT fence_token_column CHECK (tok IS NOT NULL) NOT VALID", "", ""},
    {"not_valid_then_marked",
     "ALTER TABLE mk ADD CONSTRAINT fence_token_column CHECK (tok IS NOT NULL) NOT VALID",
     "SELECT fence.mark_token_column('mk', 'tok')", "", "mk.tok"},
    {"other_expression", "",
     "ALTER TABLE mk ADD CONSTRAINT fence_token_column CHECK (tok IS NOT NULL AND tok >= 0)", "", ""},
    {"other_expression_then_marked",
     "ALTER TABLE mk ADD CONSTRAINT fence_token_column CHECK (tok IS NOT NULL AND tok >= 0)",
     "SELECT fence.mark_token_column('mk', 'tok')", "", "mk.tok"},
    {"no_inherit", "",
     "ALTER TABLE mk ADD CONSTRAINT fence_token_column CHECK (tok IS NOT NULL) NO INHERIT", "", ""},
    {"other_name", "", "ALTER TABLE mk ADD CONSTRAINT tok_nn CHECK (tok IS NOT NULL)", "", ""},
    /* A child inherits it (CHECK constraints pass to children); only the
     * parent can drop it. */
    {"inherited", "SELECT fence.mark_token_column('mk', 'tok')", "CREATE TABLE mk_child () INHERITS (mk)",
     "", "mk.tok,mk_child.tok"},
    {"inherited_unmarked_on_child",
     "SELECT fence.mark_token_column('mk', 'tok'); CREATE TABLE mk_child () INHERITS (mk)",
     "SELECT fence.mark_token_column('mk_child', NULL)", "42P16", "mk.tok,mk_child.tok"},
    {"copied_with_like", "SELECT fence.mark_token_column('mk', 'tok')",
     "CREATE TABLE mk_copy (LIKE mk INCLUDING CONSTRAINTS)", "", "mk.tok,mk_copy.tok"},
    /* Refused: 22023 (fence protects none of these), 42501 (not the
     * owner), nothing changed. */
    {"partitioned", "CREATE TABLE mk_p (id int, tok bigint) PARTITION BY RANGE (id)",
     "SELECT fence.mark_token_column('mk_p', 'tok')", "22023", ""},
    {"view", "CREATE VIEW mk_v AS SELECT 1::bigint AS tok",
     "SELECT fence.mark_token_column('mk_v', 'tok')", "22023", ""},
    {"null_table", "", "SELECT fence.mark_token_column(NULL, 'tok')", "22023", ""},
    {"no_such_column", "", "SELECT fence.mark_token_column('mk', 'nosuch')", "22023", ""},
    {"fence_schema", "", "SELECT fence.mark_token_column('fence.marks', 'token')", "22023", ""},
    {"not_owner", "", "SET LOCAL ROLE @R; SELECT fence.mark_token_column('mk', 'tok')", "42501", ""},
    {"not_owner_unmark", "SELECT fence.mark_token_column('mk', 'tok')",
     "SET LOCAL ROLE @R; SELECT fence.mark_token_column('mk', NULL)", "42501", "mk.tok"},
};

/* Each case in one transaction of g_db, rolled back. */
START_TEST(token_column_marker)
{
    const struct marker_case *mc = &marker_cases[_i];
    PGconn *c = db();
    char sql[1024];
    const char *const roles[] = {g_app};
    ok(c, "BEGIN");
    ok(c, "CREATE TABLE mk (id int PRIMARY KEY, tok bigint NOT NULL DEFAULT 0, other bigint,"
          " \"Odd \"\"col\" bigint, \"order\" bigint)");
    ok(c, mc->setup[0] != '\0' ? mc->setup : "SELECT 1");
    ok(c, "SAVEPOINT call");
    subst(sql, sizeof sql, mc->call, "R", roles);
    outcome e;
    fence_status st = run(c, sql, &e);
    ck_assert_msg(st == FENCE_OK ? mc->state[0] == '\0' : strcmp(e.sqlstate, mc->state) == 0,
                  "%s: want %s, got %s %s", sql, mc->state[0] != '\0' ? mc->state : "success",
                  st == FENCE_OK ? "success" : e.sqlstate, st == FENCE_OK ? "" : e.message);
    ck_assert_msg(strcmp(mc->state, "42501") != 0 || strstr(e.message, "must be owner") != NULL,
                  "%s: %s", sql, e.message);
    ok(c, st == FENCE_OK ? "RESET ROLE" : "ROLLBACK TO SAVEPOINT call");
    ck_assert_str_eq(text1(c, "SELECT COALESCE(string_agg(a.attrelid::regclass::text || '.' || a.attname, ','"
                              " ORDER BY a.attrelid::regclass::text COLLATE \"C\", a.attname COLLATE \"C\"), '')"
                              " FROM pg_attribute a JOIN pg_class r ON r.oid = a.attrelid"
                              " WHERE r.relname LIKE 'mk%' AND a.attnum > 0 AND NOT a.attisdropped"
                              " AND fence.is_token_column(a.attrelid, a.attname)"),
                     mc->marked);
    ck_assert_str_eq(text1(c, "SELECT COALESCE(string_agg(tbl::text || '.' || col, ','"
                              " ORDER BY tbl::text COLLATE \"C\", col COLLATE \"C\"), '')"
                              " FROM fence.token_columns WHERE tbl::text LIKE 'mk%'"),
                     mc->marked);
    /* NULLs, and a column or table that is gone. */
    ck_assert_str_eq(text1(c, "SELECT fence.is_token_column(NULL, 'tok')::text"
                              " || fence.is_token_column('mk', NULL)::text"
                              " || fence.is_token_column('mk', 'nosuch')::text"
                              " || fence.is_token_column(NULL, NULL)::text"),
                     "falsefalsefalsefalse");
    ok(c, "ROLLBACK");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_class WHERE relname LIKE 'mk%'"), 0);
    PQfinish(c);
}
END_TEST

static Suite *pg_admin_suite(void)
{
    Suite *s = suite_create("pg_admin");
    TCase *t = pg_tcase("pg_admin");
    tcase_add_test(t, protect_refuses_fence_and_system_tables);
    tcase_add_test(t, install_repairs_protected_marks);
    tcase_add_test(t, grant_restricts_advance_to_a_role);
    tcase_add_test(t, session_level_token);
    tcase_add_test(t, generated_functions_lifecycle);
    tcase_add_test(t, generated_names_never_taken_from_another_table);
    tcase_add_test(t, after_check_only_when_needed);
    tcase_add_test(t, upgrade_from_version_3);
    tcase_add_test(t, upgrade_from_version_3_not_owner);
    tcase_add_test(t, upgrade_from_version_5_migrates_lock_version);
    CT_ADD_CASES(t, verify_checks_what_the_triggers_are, tamper_cases);
    CT_ADD_CASES(t, verify_reports_the_privilege_policy, policy_cases);
    CT_ADD_CASES(t, token_column_marker, marker_cases);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(pg_admin_suite());
}
