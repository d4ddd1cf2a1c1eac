/*
 * test_pg_token.c -- binding a token to its transaction, every way
 * libfence_pg does it (issue 27), on the real PostgreSQL.  Runs once
 * (scripts/run-suites): each case makes the databases it needs, with the
 * extension (fence.c_use_token, 1.5) or without.  It proves:
 *   a. fence.c_use_token is fence.use_token in C: for a table of inputs
 *      (NULL, 0, negative and the largest tokens; no, empty, valid,
 *      upper-case, short, long, multibyte and 40+ character holders) the
 *      two give the same outcome -- the same SQLSTATE, message, DETAIL and
 *      HINT when refused, the same value and the same three settings
 *      (fence.token, fence.holder, fence.xact = pg_current_xact_id())
 *      when admitted; and a refused call leaves nothing set.
 *   b. every guard takes c_use_token's token exactly as use_token's: on a
 *      table protected 'c' and one protected 'plpgsql', and at a resource
 *      (fence.advance with a holder), the bound token admitted and
 *      stamped, a stale one refused 23Q01, nothing left for the next
 *      transaction (23Q02 reason=missing), a session-level token with an
 *      earlier transaction's fence.xact refused reason=unbound.
 *   c. fence_pg_prepare() makes the library call fence.c_use_token where
 *      the extension offers it and fence.use_token where not: with
 *      EXECUTE on fence.use_token revoked from the role, a prepared
 *      connection still fences and an unprepared one gets 42501; without
 *      the extension, fence_pg_prepare() keeps fence.use_token; after
 *      DROP EXTENSION the prepared connection's calls fail (42883),
 *      nothing written unfenced.
 *   d. fence_pg_prepare_unpooled() prepares the three token statements by
 *      name and the library executes them (set, send, with a resource):
 *      fenced the same, stale refused; calling it again is harmless;
 *      DEALLOCATE ALL makes the calls fail 26000, never unfenced; PQreset
 *      forgets the declaration (unnamed statements again, which work); a
 *      name already taken fails it (42P05) and the connection keeps
 *      sending unnamed statements; bad arguments and states are refused.
 */
#include "pgutil.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char H1[] = "0123456789abcdef0123456789abcdef";

/* A side database with fence.sql, and the extension when ext; a table
 * "tc" protected 'c' (ext only) and "tp" protected 'plpgsql', rows 1..3.
 * Returns a superuser connection to it; its name goes to name. */
static PGconn *token_db(const char *suffix, bool ext, char *name)
{
    side_db(suffix, NULL, name);
    PGconn *c = connect_as(name, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    ck_assert_int_eq(fence_pg_install(c), FENCE_OK);
    if (ext) {
        create_extension(c);
        ok(c, "CREATE TABLE tc (id int PRIMARY KEY, v int);"
              "INSERT INTO tc SELECT g, 0 FROM generate_series(1, 3) g;"
              "SELECT fence.protect('tc', 'fence_token', false, 'c')");
    }
    ok(c, "CREATE TABLE tp (id int PRIMARY KEY, v int);"
          "INSERT INTO tp SELECT g, 0 FROM generate_series(1, 3) g;"
          "SELECT fence.protect('tp', 'fence_token', false, 'plpgsql')");
    return c;
}

/* ------------------------------------------------------------------ */
/* a. fence.c_use_token is fence.use_token                               */
/* ------------------------------------------------------------------ */

START_TEST(c_use_token_same_outcomes)
{
    char name[NAME_BUF];
    PGconn *c = token_db("tok_same", true, name);
    static const char *const args[] = {
        "NULL",
        "NULL, NULL",
        "0",
        "-1",
        "-9223372036854775808",
        "1",
        "7",
        "9223372036854775807",
        "7, NULL",
        "7, ''",
        "7, '0123456789abcdef0123456789abcdef'",
        "7, '0123456789ABCDEF0123456789ABCDEF'",
        "7, '0123456789abcdef0123456789abcde'",
        "7, '0123456789abcdef0123456789abcdef0'",
        "7, ' 0123456789abcdef0123456789abcde'",
        "7, 'g123456789abcdef0123456789abcdef'",
        "7, repeat('x', 100)",
        "7, repeat('\u00e9', 50)",
        "7, 'it''s'",
        "0, 'not hex'",
        "NULL, 'not hex'",
        "7::smallint",
        "'12'",
    };
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
        stmt_res r[2];
        char settings[2][512];
        for (int k = 0; k < 2; k++) {
            char sql[256];
            snprintf(sql, sizeof sql, "SELECT fence.%suse_token(%s)", k ? "c_" : "", args[i]);
            ok(c, "BEGIN");
            r[k] = stmt_exec(c, sql);
            ok(c, "ROLLBACK");
            /* What it set, read in the same transaction (and nothing for a
             * refused call: read after a savepoint rolled back to). */
            ok(c, "BEGIN; SAVEPOINT s");
            PGresult *x = PQexec(c, sql);
            bool set_ok = PQresultStatus(x) == PGRES_TUPLES_OK;
            PQclear(x);
            if (!set_ok) {
                ok(c, "ROLLBACK TO s");
            }
            snprintf(settings[k], sizeof settings[k], "%s",
                     text1(c, "SELECT coalesce(current_setting('fence.token', true), '-') || '|' ||"
                              " coalesce(current_setting('fence.holder', true), '-') || '|' ||"
                              " (coalesce(current_setting('fence.xact', true), '') ="
                              "  pg_current_xact_id()::text)::text"));
            ok(c, "ROLLBACK");
        }
        char d0[2048], d1[2048];
        stmt_describe(&r[0], d0, sizeof d0);
        stmt_describe(&r[1], d1, sizeof d1);
        ck_assert_msg(stmt_eq(&r[0], &r[1]), "use_token(%s): %s\nc_use_token(%s): %s", args[i],
                      d0, args[i], d1);
        ck_assert_msg(strcmp(settings[0], settings[1]) == 0,
                      "use_token(%s) set %s, c_use_token %s", args[i], settings[0], settings[1]);
        if (!r[0].ok) {
            /* A refused call sets nothing of its own (a session may have
             * the placeholder '' from an earlier call's transaction). */
            ck_assert_msg(strstr(settings[1], "|false") != NULL, "c_use_token(%s) set %s",
                          args[i], settings[1]);
        }
    }
    /* The admitted values, once spelled out. */
    ok(c, "BEGIN");
    ck_assert_str_eq(text1(c, "SELECT fence.c_use_token(42, '0123456789abcdef0123456789abcdef')"
                              "::text || current_setting('fence.token') ||"
                              " current_setting('fence.holder') ||"
                              " (current_setting('fence.xact') = pg_current_xact_id()::text)"),
                     "4242" "0123456789abcdef0123456789abcdef" "true");
    ok(c, "ROLLBACK");
    PQfinish(c);
    drop_side_db(name);
}
END_TEST

/* ------------------------------------------------------------------ */
/* b. every guard takes its token as use_token's                          */
/* ------------------------------------------------------------------ */

START_TEST(c_use_token_every_guard)
{
    char name[NAME_BUF];
    PGconn *c = token_db("tok_guard", true, name);
    static const char *const tables[] = {"tc", "tp"};
    char sql[512];
    for (size_t i = 0; i < 2; i++) {
        const char *t = tables[i];
        snprintf(sql, sizeof sql, "BEGIN; SELECT fence.c_use_token(5); UPDATE %s SET v = 1 WHERE id = 1; COMMIT", t);
        ok(c, sql);
        snprintf(sql, sizeof sql, "SELECT fence_token FROM %s WHERE id = 1", t);
        ck_assert_int_eq(num(c, sql), 5);
        snprintf(sql, sizeof sql, "BEGIN; SELECT fence.c_use_token(4); UPDATE %s SET v = 2 WHERE id = 1", t);
        fails(c, sql, "23Q01");
        ok(c, "ROLLBACK");
        /* Nothing left for the next transaction. */
        ok(c, "BEGIN; SELECT fence.c_use_token(6); COMMIT");
        snprintf(sql, sizeof sql, "UPDATE %s SET v = 3 WHERE id = 1", t);
        outcome e;
        ck_assert_int_eq(run(c, sql, &e), FENCE_ENOTOKEN);
        ck_assert_msg(strstr(e.message, "no fencing token") != NULL, "%s: %s", t, e.message);
        /* A session-level token with an earlier transaction's fence.xact. */
        ok(c, "BEGIN");
        char xact[32];
        ok(c, "SELECT fence.c_use_token(7)");
        snprintf(xact, sizeof xact, "%s", text1(c, "SELECT current_setting('fence.xact')"));
        ok(c, "COMMIT");
        snprintf(sql, sizeof sql,
                 "SET fence.token = '7'; SET fence.xact = '%s'; UPDATE %s SET v = 4 WHERE id = 1",
                 xact, t);
        ck_assert_int_eq(run(c, sql, &e), FENCE_ENOTOKEN);
        ck_assert_msg(strstr(e.message, "was not set by fence.use_token() in this transaction") !=
                          NULL,
                      "%s: %s", t, e.message);
        ok(c, "RESET fence.token; RESET fence.xact");
        snprintf(sql, sizeof sql, "SELECT fence_token FROM %s WHERE id = 1", t);
        ck_assert_int_eq(num(c, sql), 5);
    }
    /* A resource, with a holder: the holder c_use_token bound counts. */
    snprintf(sql, sizeof sql, "BEGIN; SELECT fence.c_use_token(9, '%s'), fence.advance('r', 9); COMMIT", H1);
    ok(c, sql);
    ck_assert_str_eq(text1(c, "SELECT fence.mark('r')::text || ' ' || fence.mark_holder('r')"),
                     "9 0123456789abcdef0123456789abcdef");
    ok(c, "BEGIN; SELECT fence.c_use_token(9)");
    fails(c, "SELECT fence.advance('r', 9)", "23Q01"); /* the same token, another holder */
    ok(c, "ROLLBACK");
    ok(c, "BEGIN; SELECT fence.c_use_token(8)");
    fails(c, "SELECT fence.advance('r', 8)", "23Q01");
    ok(c, "ROLLBACK");
    PQfinish(c);
    drop_side_db(name);
}
END_TEST

/* ------------------------------------------------------------------ */
/* c. fence_pg_prepare picks c_use_token where it exists                 */
/* ------------------------------------------------------------------ */

START_TEST(prepare_picks_c_use_token)
{
    char name[NAME_BUF], role[NAME_BUF];
    outcome e;
    PGconn *su = token_db("tok_pick", true, name);
    side_role("tok_pick", role);
    char sql[512];
    snprintf(sql, sizeof sql,
             "GRANT SELECT, UPDATE ON tc, tp TO %s;"
             "REVOKE EXECUTE ON FUNCTION fence.use_token(bigint, text) FROM PUBLIC",
             role);
    ok(su, sql);
    /* Unprepared: fence.use_token, which the role may no longer call. */
    PGconn *a = connect_as(name, role);
    ok(a, "BEGIN");
    ck_assert_int_eq(set_tok(a, 5, NULL, &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "42501");
    ok(a, "ROLLBACK");
    /* Prepared: fence.c_use_token. */
    ck_assert_int_eq(fence_pg_prepare(a), FENCE_OK);
    ck_assert_int_eq(num(a, "SELECT count(*) FROM pg_prepared_statements"), 0);
    ck_assert_int_eq(write_tok(a, 5, "UPDATE tc SET v = 1 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(write_tok(a, 5, "UPDATE tp SET v = 1 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(write_tok(a, 4, "UPDATE tp SET v = 2 WHERE id = 1", &e), FENCE_STALE);
    ck_assert_int_eq(pipelined_h(a, 6, H1, "pick", "UPDATE tc SET v = 3 WHERE id = 1", &e),
                     FENCE_OK);
    ck_assert_int_eq(num(su, "SELECT fence_token FROM tc WHERE id = 1"), 6);
    ck_assert_int_eq(num(su, "SELECT fence.mark('pick')"), 6);
    /* The extension dropped (no table protected 'c' left): the prepared
     * connection's calls fail, nothing unfenced. */
    ok(su, "SELECT fence.protect('tc', 'fence_token', false, 'plpgsql'); DROP EXTENSION fence");
    ok(a, "BEGIN");
    ck_assert_int_eq(set_tok(a, 7, NULL, &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "42883");
    ok(a, "ROLLBACK");
    ck_assert_int_eq(num(su, "SELECT fence_token FROM tp WHERE id = 1"), 5);
    /* Prepared again: fence.use_token (granted back). */
    ok(su, "GRANT EXECUTE ON FUNCTION fence.use_token(bigint, text) TO PUBLIC");
    ck_assert_int_eq(fence_pg_prepare(a), FENCE_OK);
    ck_assert_int_eq(write_tok(a, 7, "UPDATE tp SET v = 4 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(su, "SELECT fence_token FROM tp WHERE id = 1"), 7);
    PQfinish(a);
    PQfinish(su);

    /* Without the extension: fence_pg_prepare keeps fence.use_token. */
    char plain[NAME_BUF];
    PGconn *p = token_db("tok_noext", false, plain);
    ck_assert_int_eq(fence_pg_prepare(p), FENCE_OK);
    ck_assert_int_eq(write_tok(p, 3, "UPDATE tp SET v = 1 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(write_tok(p, 2, "UPDATE tp SET v = 1 WHERE id = 1", &e), FENCE_STALE);
    PQfinish(p);
    drop_side_db(plain);
    drop_side_db(name);
}
END_TEST

/* ------------------------------------------------------------------ */
/* d. fence_pg_prepare_unpooled                                          */
/* ------------------------------------------------------------------ */

static const char COUNT_STMTS[] =
    "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'fence\\_pg\\_token\\_%'";

static void unpooled_on(bool ext)
{
    char name[NAME_BUF];
    outcome e;
    PGconn *c = token_db(ext ? "tok_unp_c" : "tok_unp_p", ext, name);
    const char *t = ext ? "tc" : "tp";
    char upd[128];
    snprintf(upd, sizeof upd, "UPDATE %s SET v = v + 1 WHERE id = 1", t);

    ck_assert_int_eq(fence_pg_prepare_unpooled(NULL), FENCE_EINVAL);
    ok(c, "BEGIN");
    ck_assert_int_eq(fence_pg_prepare_unpooled(c), FENCE_ESTATE);
    ok(c, "ROLLBACK");
    ck_assert_int_eq(fence_pg_prepare_unpooled(c), FENCE_OK);
    ck_assert_int_eq(num(c, COUNT_STMTS), 3);
    ck_assert_str_eq(text1(c, "SELECT string_agg(name || ':' || (statement LIKE '%c_use_token%')::text,"
                              " ' ' ORDER BY name) FROM pg_prepared_statements"),
                     ext ? "fence_pg_token_advance:true fence_pg_token_send:true "
                           "fence_pg_token_set:true"
                         : "fence_pg_token_advance:false fence_pg_token_send:false "
                           "fence_pg_token_set:false");
    ck_assert_int_eq(fence_pg_prepare_unpooled(c), FENCE_OK); /* again: harmless */
    ck_assert_int_eq(num(c, COUNT_STMTS), 3);
    /* The three statements, executed by name: fenced the same. */
    ck_assert_int_eq(write_tok(c, 5, upd, &e), FENCE_OK);
    ck_assert_int_eq(write_tok(c, 4, upd, &e), FENCE_STALE);
    ok(c, "BEGIN");
    ck_assert_int_eq(set_tok_h(c, 5, H1, "unp", &e), FENCE_OK);
    ok(c, "COMMIT");
    ok(c, "BEGIN");
    ck_assert_int_eq(set_tok(c, 4, "unp", &e), FENCE_STALE);
    ck_assert_uint_eq(e.stale.highest, 5);
    ok(c, "ROLLBACK");
    ck_assert_int_eq(pipelined_h(c, 6, NULL, NULL, upd, &e), FENCE_OK);
    ck_assert_int_eq(pipelined_h(c, 5, NULL, NULL, upd, &e), FENCE_STALE);
    ck_assert_int_eq(pipelined_h(c, 7, H1, "unp", upd, &e), FENCE_OK);
    char hb[FENCE_HOLDER_LEN + 1];
    ck_assert_int_eq(mark_of(c, "unp", hb), 7);
    ck_assert_str_eq(hb, H1);
    char sel[128];
    snprintf(sel, sizeof sel, "SELECT fence_token FROM %s WHERE id = 1", t);
    ck_assert_int_eq(num(c, sel), 7);
    /* Their executions are counted: the library used them. */
    ck_assert_int_ge(num(c, "SELECT sum(generic_plans + custom_plans) FROM pg_prepared_statements"
                            " WHERE name LIKE 'fence\\_pg\\_token\\_%'"),
                     7);

    /* DEALLOCATE ALL: the calls fail (26000), nothing is written. */
    ok(c, "DEALLOCATE ALL");
    ok(c, "BEGIN");
    ck_assert_int_eq(set_tok(c, 8, NULL, &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "26000");
    ok(c, "ROLLBACK");
    ck_assert_int_eq(pipelined_h(c, 8, NULL, NULL, upd, &e), FENCE_EDB);
    ck_assert_int_eq(num(c, sel), 7);
    /* PQreset forgets the declaration: unnamed statements, which work. */
    PQreset(c);
    ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
    ck_assert_int_eq(write_tok(c, 8, upd, &e), FENCE_OK);
    ck_assert_int_eq(num(c, COUNT_STMTS), 0);
    /* A name the application took: refused (42P05), unnamed still. */
    ok(c, "PREPARE fence_pg_token_send AS SELECT 1");
    ck_assert_int_eq(fence_pg_prepare_unpooled(c), FENCE_EDB);
    ck_assert_str_eq(fence_pg_sqlstate(c), "42P05");
    ck_assert_msg(strstr(fence_pg_errmsg(c), "fence_pg_prepare_unpooled") != NULL, "%s",
                  fence_pg_errmsg(c));
    ck_assert_int_eq(pipelined_h(c, 9, NULL, NULL, upd, &e), FENCE_OK);
    ck_assert_int_eq(write_tok(c, 9, upd, &e), FENCE_OK);
    ck_assert_int_eq(num(c, sel), 9);
    ok(c, "DEALLOCATE ALL");
    ck_assert_int_eq(fence_pg_prepare_unpooled(c), FENCE_OK);
    ck_assert_int_eq(write_tok(c, 10, upd, &e), FENCE_OK);
    ck_assert_int_eq(num(c, sel), 10);
    PQfinish(c);
    drop_side_db(name);
}

START_TEST(unpooled_named_statements_c)
{
    unpooled_on(true);
}
END_TEST

START_TEST(unpooled_named_statements_portable)
{
    unpooled_on(false);
}
END_TEST

static Suite *pg_token_suite(void)
{
    Suite *s = suite_create("pg_token");
    TCase *t = pg_tcase("pg_token");
    tcase_add_test(t, c_use_token_same_outcomes);
    tcase_add_test(t, c_use_token_every_guard);
    tcase_add_test(t, prepare_picks_c_use_token);
    tcase_add_test(t, unpooled_named_statements_c);
    tcase_add_test(t, unpooled_named_statements_portable);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(pg_token_suite());
}
