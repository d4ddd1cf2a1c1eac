/* test_sqlite.c -- storage-side fencing for SQLite: what is refused and
 * what is admitted, tokens, permissive mode, version columns, resources,
 * names, and connections that never attached.  Real database files in a
 * mkdtemp() folder (removed after each test).  Other suites:
 * test_sqlite_tables (keys, odd tables, TEMP shadows, renames),
 * test_sqlite_race (two connections, threads), test_sqlite_api (the C
 * API's arguments, messages, marks and the stale description). */
#include <check.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sqliteutil.h"

START_TEST(stale_update_delete_insert)
{
    sqlite3 *db = su_table_at_34();
    ck_assert_int_eq(su_q_int(db, "SELECT fence_token FROM t WHERE id = 1"), 34);
    su_set_tok(db, 33);
    su_expect_stale(db, "UPDATE t SET v = 'by33' WHERE id = 1", 33, 34, FENCE_OBJECT_TABLE, "t");
    su_expect_stale(db, "DELETE FROM t WHERE id = 1", 33, 34, FENCE_OBJECT_TABLE, "t");
    su_expect_stale(db, "INSERT OR REPLACE INTO t(id, v) VALUES (1, 'by33')", 33, 34,
                    FENCE_OBJECT_TABLE, "t");
    su_expect_stale(db, "REPLACE INTO t(id, v, email) VALUES (7, 'by33', 'a@x')", 33, 34,
                    FENCE_OBJECT_TABLE, "t");
    su_expect_stale(db,
                    "INSERT INTO t(id, v) VALUES (1, 'by33') "
                    "ON CONFLICT(id) DO UPDATE SET v = excluded.v",
                    33, 34, FENCE_OBJECT_TABLE, "t");
    /* Moving another row onto row 1's key with UPDATE OR REPLACE. */
    su_expect_stale(db, "UPDATE OR REPLACE t SET id = 1 WHERE id = 2", 33, 34, FENCE_OBJECT_TABLE,
                    "t");
    ck_assert_str_eq(su_q_text(db, "SELECT v FROM t WHERE id = 1"), "by34");
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM t"), 2);

    /* Through a prepared statement: classify right after the failed step. */
    sqlite3_stmt *st = NULL;
    ck_assert_int_eq(sqlite3_prepare_v2(db, "UPDATE t SET v = ?1 WHERE id = 1", -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(st, 1, "again", -1, SQLITE_STATIC);
    su_set_tok(db, 33);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_CONSTRAINT);
    fence_stale e;
    ck_assert_int_eq(fence_sqlite_classify(db, &e), FENCE_STALE);
    ck_assert_uint_eq(e.offered, 33);
    ck_assert_uint_eq(e.highest, 34);
    ck_assert_msg(strstr(fence_sqlite_errmsg(db), "token 33 is older than 34") != NULL, "%s",
                  fence_sqlite_errmsg(db));
    sqlite3_finalize(st);
    sqlite3_close(db);
}
END_TEST

START_TEST(equal_and_higher_admitted_and_stamped)
{
    sqlite3 *db = su_table_at_34();
    su_tok_exec_ok(db, 34, "UPDATE t SET v = 'again34' WHERE id = 1"); /* equal */
    ck_assert_int_eq(su_q_int(db, "SELECT fence_token FROM t WHERE id = 1"), 34);
    su_tok_exec_ok(db, 40, "UPDATE t SET v = 'by40' WHERE id = 1");
    ck_assert_int_eq(su_q_int(db, "SELECT fence_token FROM t WHERE id = 1"), 40);
    su_tok_exec_ok(db, 40, "INSERT INTO t(id, v) VALUES (3, 'new40')");
    ck_assert_int_eq(su_q_int(db, "SELECT fence_token FROM t WHERE id = 3"), 40);
    /* An older token may still write rows no newer holder touched. */
    su_tok_exec_ok(db, 20, "UPDATE t SET v = 'by20' WHERE id = 2");
    ck_assert_int_eq(su_q_int(db, "SELECT fence_token FROM t WHERE id = 2"), 20);
    su_tok_exec_ok(db, 20, "INSERT INTO t(v) VALUES ('auto-id')");
    ck_assert_int_eq(su_q_int(db, "SELECT fence_token FROM t WHERE v = 'auto-id'"), 20);
    /* Several writes of one transaction, one token. */
    su_tok_exec_ok(db, 41, "BEGIN; INSERT OR REPLACE INTO t(id, v) VALUES (1, 'replaced41');"
                           "INSERT INTO t(id, v) VALUES (1, 'upsert41') "
                           "ON CONFLICT(id) DO UPDATE SET v = excluded.v; COMMIT");
    ck_assert_str_eq(su_q_text(db, "SELECT v || fence_token FROM t WHERE id = 1"), "upsert4141");
    su_tok_exec_ok(db, 41, "DELETE FROM t WHERE id = 1");
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM t WHERE id = 1"), 0);
    sqlite3_close(db);
}
END_TEST

START_TEST(client_column_writes_cannot_bypass)
{
    sqlite3 *db = su_table_at_34();
    su_set_tok(db, 33);
    /* Claiming a high token in the write does not help... */
    su_expect_stale(db, "UPDATE t SET v = 'x', fence_token = 999 WHERE id = 1", 33, 34,
                    FENCE_OBJECT_TABLE, "t");
    /* ...nor does lowering the column first. */
    su_expect_stale(db, "UPDATE t SET fence_token = 0 WHERE id = 1", 33, 34, FENCE_OBJECT_TABLE,
                    "t");
    su_tok_exec_ok(db, 35, "UPDATE t SET v = 'by35', fence_token = 1 WHERE id = 1");
    ck_assert_int_eq(su_q_int(db, "SELECT fence_token FROM t WHERE id = 1"), 35);
    su_tok_exec_ok(db, 35, "UPDATE t SET fence_token = 9999 WHERE id = 1");
    ck_assert_int_eq(su_q_int(db, "SELECT fence_token FROM t WHERE id = 1"), 35);
    su_set_tok(db, 34);
    su_expect_stale(db, "UPDATE t SET v = 'by34' WHERE id = 1", 34, 35, FENCE_OBJECT_TABLE, "t");
    /* An INSERT may not plant a token above its own. */
    su_set_tok(db, 35);
    ck_assert_int_eq(su_exec_rc(db, "INSERT INTO t(id, v, fence_token) VALUES (9, 'x', 500)"),
                     SQLITE_CONSTRAINT);
    ck_assert_msg(strncmp(sqlite3_errmsg(db), "fence:forbidden ", 16) == 0, "%s",
                  sqlite3_errmsg(db));
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM t WHERE id = 9"), 0);
    su_tok_exec_ok(db, 35, "INSERT INTO t(id, v, fence_token) VALUES (9, 'x', 2)");
    ck_assert_int_eq(su_q_int(db, "SELECT fence_token FROM t WHERE id = 9"), 35);

    /* With recursive triggers on, still no bypass (a column written above
     * the token is refused rather than overwritten). */
    su_exec_ok(db, "PRAGMA recursive_triggers = ON");
    su_tok_exec_ok(db, 35, "UPDATE t SET v = 'rec', fence_token = 3 WHERE id = 1");
    ck_assert_int_eq(su_q_int(db, "SELECT fence_token FROM t WHERE id = 1"), 35);
    su_set_tok(db, 35);
    ck_assert_int_ne(su_exec_rc(db, "UPDATE t SET fence_token = 9999 WHERE id = 1"), SQLITE_OK);
    ck_assert_int_eq(su_q_int(db, "SELECT fence_token FROM t WHERE id = 1"), 35);
    su_set_tok(db, 34);
    su_expect_stale(db, "UPDATE t SET v = 'by34' WHERE id = 1", 34, 35, FENCE_OBJECT_TABLE, "t");
    sqlite3_close(db);
}
END_TEST

START_TEST(missing_and_malformed_tokens)
{
    sqlite3 *db = su_table_at_34();
    /* No token at all. */
    su_set_tok(db, 0);
    su_expect_notoken(db, "UPDATE t SET v = 'x' WHERE id = 1");
    su_expect_notoken(db, "DELETE FROM t WHERE id = 1");
    su_expect_notoken(db, "INSERT INTO t(v) VALUES ('x')");
    ck_assert_int_eq(su_q_int(db, "SELECT fence_token() IS NULL"), 1);

    /* From SQL: each bad value is refused, and clears the token. */
    static const char *const bad[] = {
        "SELECT fence_set_token(-1)",
        "SELECT fence_set_token('abc')",
        "SELECT fence_set_token('')",
        "SELECT fence_set_token('12abc')",
        "SELECT fence_set_token(' 12')",
        "SELECT fence_set_token(1.5)",
        "SELECT fence_set_token(9223372036854775808)",
        "SELECT fence_set_token('9223372036854775808')",
        "SELECT fence_set_token(x'01')",
        "SELECT fence_set_token(CAST(x'313200' AS TEXT))",
        /* One grammar everywhere (as PostgreSQL's): no leading zero, sign
         * or space in token text. */
        "SELECT fence_set_token('007')",
        "SELECT fence_set_token('07')",
        "SELECT fence_set_token('00')",
        "SELECT fence_set_token('+7')",
        "SELECT fence_set_token(' 7')",
        "SELECT fence_set_token('7 ')",
        "SELECT fence_set_token('-0')",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        su_set_tok(db, 50);
        int rc = su_exec_rc(db, bad[i]);
        ck_assert_msg(rc == SQLITE_ERROR, "%s: rc %d", bad[i], rc);
        ck_assert_msg(strncmp(sqlite3_errmsg(db), "fence:notoken fence_set_token: ", 31) == 0,
                      "%s: %s", bad[i], sqlite3_errmsg(db));
        ck_assert_int_eq(fence_sqlite_classify(db, NULL), FENCE_ENOTOKEN);
        uint64_t t = 99;
        ck_assert_int_eq(fence_sqlite_token(db, &t), FENCE_OK);
        ck_assert_msg(t == 0, "%s left the token at %llu", bad[i], (unsigned long long)t);
        su_expect_notoken(db, "UPDATE t SET v = 'x' WHERE id = 1");
    }
    /* Zero and NULL clear; a decimal string and the largest value work. */
    su_exec_ok(db, "SELECT fence_set_token(0)");
    su_expect_notoken(db, "UPDATE t SET v = 'x' WHERE id = 1");
    ck_assert_int_eq(su_q_int(db, "SELECT fence_set_token('35')"), 35);
    su_exec_ok(db, "UPDATE t SET v = 'by35' WHERE id = 1");
    ck_assert_int_eq(su_q_int(db, "SELECT fence_set_token(NULL) IS NULL"), 1);
    su_expect_notoken(db, "UPDATE t SET v = 'x' WHERE id = 1");
    ck_assert_int_eq(su_q_int(db, "SELECT fence_set_token(9223372036854775807)"), INT64_MAX);
    su_exec_ok(db, "UPDATE t SET v = 'max' WHERE id = 1");
    ck_assert_int_eq(su_q_int(db, "SELECT fence_token FROM t WHERE id = 1"), INT64_MAX);

    /* From C: above 2^63-1 is refused and clears the token. */
    ck_assert_int_eq(fence_sqlite_set_token(db, (uint64_t)INT64_MAX + 1, NULL), FENCE_EINVAL);
    ck_assert_msg(strstr(fence_sqlite_errmsg(db), "2^63-1") != NULL, "%s", fence_sqlite_errmsg(db));
    su_expect_notoken(db, "UPDATE t SET v = 'x' WHERE id = 1");
    ck_assert_int_eq(fence_sqlite_set_token(db, UINT64_MAX, NULL), FENCE_EINVAL);
    ck_assert_int_eq(su_q_int(db, "SELECT fence_token() IS NULL"), 1);
    ck_assert_str_eq(su_q_text(db, "SELECT v FROM t WHERE id = 1"), "max");
    sqlite3_close(db);
}
END_TEST

START_TEST(permissive_mode)
{
    sqlite3 *db = su_open_fenced("p.db");
    su_exec_ok(db, "CREATE TABLE p(id INTEGER PRIMARY KEY, v TEXT)");
    su_exec_ok(db, "INSERT INTO p VALUES (1, 'a')");
    fence_sqlite_protect_options o;
    fence_sqlite_protect_options_init(&o);
    o.permissive = 1;
    ck_assert_int_eq(fence_sqlite_protect(db, "p", &o), FENCE_OK);
    /* No token: admitted, not stamped. */
    su_exec_ok(db, "UPDATE p SET v = 'untokened' WHERE id = 1");
    su_exec_ok(db, "INSERT INTO p(id, v) VALUES (2, 'b')");
    ck_assert_int_eq(su_q_int(db, "SELECT max(fence_token) FROM p"), 0);
    /* With a token: checked and stamped as usual. */
    su_tok_exec_ok(db, 10, "UPDATE p SET v = 'by10' WHERE id = 1");
    ck_assert_int_eq(su_q_int(db, "SELECT fence_token FROM p WHERE id = 1"), 10);
    su_set_tok(db, 9);
    su_expect_stale(db, "UPDATE p SET v = 'by9' WHERE id = 1", 9, 10, FENCE_OBJECT_TABLE, "p");
    /* Strict again: protecting anew replaces the triggers. */
    ck_assert_int_eq(fence_sqlite_protect(db, "p", NULL), FENCE_OK);
    su_set_tok(db, 0);
    su_expect_notoken(db, "UPDATE p SET v = 'x' WHERE id = 2");
    /* From SQL, the third argument. */
    su_exec_ok(db, "SELECT fence_protect('p', NULL, 1)");
    su_exec_ok(db, "UPDATE p SET v = 'x' WHERE id = 2");
    ck_assert_int_ne(su_exec_rc(db, "SELECT fence_protect('p', NULL, 2)"), SQLITE_OK);
    sqlite3_close(db);
}
END_TEST

/* An application's version column keeps its meaning: fence_protect on it
 * is refused, and fence's own column goes beside it (the rest of the rule
 * and the migration of a table an older fence protected on one:
 * test_sqlite_column). */
START_TEST(version_column_refused)
{
    sqlite3 *db = su_open_fenced("rails.db");
    su_exec_ok(db, "CREATE TABLE posts(id INTEGER PRIMARY KEY, title TEXT, lock_version INTEGER)");
    su_exec_ok(db, "INSERT INTO posts VALUES (1, 'null', NULL), (2, 'three', 3), (3, 'seven', 7)");
    fence_sqlite_protect_options o;
    fence_sqlite_protect_options_init(&o);
    o.column = "lock_version";
    ck_assert_int_eq(fence_sqlite_protect(db, "posts", &o), FENCE_EINVAL);
    ck_assert_msg(strstr(fence_sqlite_errmsg(db), "fence_protect('posts')") != NULL &&
                      strstr(fence_sqlite_errmsg(db), "fence_migrate_version_column('posts')"),
                  "%s", fence_sqlite_errmsg(db));
    ck_assert_int_ne(su_exec_rc(db, "SELECT fence_protect('posts', 'lock_version')"), SQLITE_OK);
    ck_assert_msg(strstr(sqlite3_errmsg(db), "is the application's") != NULL, "%s",
                  sqlite3_errmsg(db));
    /* Nothing changed: no triggers, no column, the versions as they were. */
    ck_assert_int_eq(su_count_fence_triggers(db, "main", "posts"), 0);
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM pragma_table_info('posts')"), 3);
    ck_assert_int_eq(su_q_int(db, "SELECT lock_version IS NULL FROM posts WHERE id = 1"), 1);
    /* Protected with its own column: the optimistic lock works as alone. */
    ck_assert_int_eq(fence_sqlite_protect(db, "posts", NULL), FENCE_OK);
    ck_assert_str_eq(su_q_text(db, "SELECT type || ' ' || \"notnull\" || ' ' || dflt_value FROM "
                                   "pragma_table_info('posts') WHERE name = 'fence_token'"),
                     FENCE_SQLITE_COLUMN_TYPE " 1 0");
    const char *bump = "UPDATE posts SET title = 't5', lock_version = lock_version + 1 "
                       "WHERE id = 2 AND lock_version = 3";
    su_tok_exec_ok(db, 5, bump);
    ck_assert_int_eq(sqlite3_changes(db), 1);
    su_tok_exec_ok(db, 5, bump); /* a second copy of version 3: the ORM's conflict */
    ck_assert_int_eq(sqlite3_changes(db), 0);
    ck_assert_str_eq(su_q_text(db, "SELECT lock_version || ':' || fence_token FROM posts "
                                   "WHERE id = 2"),
                     "4:5");
    su_expect_stale(db, "UPDATE posts SET title = 's4' WHERE id = 2", 4, 5, FENCE_OBJECT_TABLE,
                    "posts");
    /* A named column that is missing is fence's own, added so. */
    su_exec_ok(db, "CREATE TABLE people(id INTEGER PRIMARY KEY, name TEXT)");
    su_exec_ok(db, "SELECT fence_protect('people', 'stamp')");
    ck_assert_str_eq(su_q_text(db, "SELECT type FROM pragma_table_info('people') "
                                   "WHERE name = 'stamp'"),
                     FENCE_SQLITE_COLUMN_TYPE);
    /* An existing fence_token must have INTEGER affinity. */
    su_exec_ok(db, "CREATE TABLE bad(id INTEGER PRIMARY KEY, fence_token TEXT)");
    ck_assert_int_eq(fence_sqlite_protect(db, "bad", NULL), FENCE_EINVAL);
    ck_assert_msg(strstr(fence_sqlite_errmsg(db), "INTEGER") != NULL, "%s",
                  fence_sqlite_errmsg(db));
    sqlite3_close(db);
}
END_TEST

START_TEST(per_resource_advance)
{
    sqlite3 *db = su_open_fenced("r.db");
    su_exec_ok(db, "CREATE TABLE orders(id INTEGER PRIMARY KEY, v TEXT)");
    su_set_tok(db, 34);
    ck_assert_int_eq(fence_sqlite_advance(db, "orders", NULL), FENCE_OK);
    ck_assert_int_eq(su_q_int(db, "SELECT high_water FROM fence_resource WHERE name = 'orders'"),
                     34);
    su_set_tok(db, 34);
    ck_assert_int_eq(fence_sqlite_advance(db, "orders", NULL), FENCE_OK); /* equal */
    su_set_tok(db, 33);
    fence_stale s;
    ck_assert_int_eq(fence_sqlite_advance(db, "orders", &s), FENCE_STALE);
    ck_assert_uint_eq(s.offered, 33);
    ck_assert_uint_eq(s.highest, 34);
    ck_assert_int_eq(s.kind, FENCE_OBJECT_RESOURCE);
    ck_assert_str_eq(s.object, "orders");
    ck_assert_str_eq(s.holder, "");
    su_set_tok(db, 33);
    ck_assert_int_eq(fence_sqlite_advance(db, "orders", NULL), FENCE_STALE);
    ck_assert_msg(strstr(fence_sqlite_errmsg(db), "token 33 is older than 34") != NULL, "%s",
                  fence_sqlite_errmsg(db));
    fence_stale e;
    ck_assert_int_eq(fence_sqlite_classify(db, &e), FENCE_STALE);
    ck_assert_int_eq(e.kind, FENCE_OBJECT_RESOURCE);
    ck_assert_str_eq(e.object, "orders");
    ck_assert_uint_eq(e.offered, 33);
    ck_assert_uint_eq(e.highest, 34);
    su_expect_stale(db, "INSERT INTO fence_advance(resource) VALUES ('orders')", 33, 34,
                    FENCE_OBJECT_RESOURCE, "orders");

    /* Inside the caller's transaction: the stale advance aborts the work. */
    su_set_tok(db, 33);
    su_exec_ok(db, "BEGIN IMMEDIATE");
    su_exec_ok(db, "INSERT INTO orders(v) VALUES ('by33')"); /* unprotected table */
    ck_assert_int_eq(fence_sqlite_advance(db, "orders", NULL), FENCE_STALE);
    su_exec_ok(db, "ROLLBACK");
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM orders"), 0);

    su_set_tok(db, 40);
    su_exec_ok(db, "BEGIN IMMEDIATE");
    su_exec_ok(db, "INSERT INTO fence_advance(resource) VALUES ('orders')");
    su_exec_ok(db, "INSERT INTO orders(v) VALUES ('by40')");
    su_exec_ok(db, "COMMIT");
    ck_assert_int_eq(su_q_int(db, "SELECT high_water FROM fence_resource WHERE name = 'orders'"),
                     40);
    /* Rolled back with the transaction too. */
    su_set_tok(db, 50);
    su_exec_ok(db, "BEGIN IMMEDIATE");
    ck_assert_int_eq(fence_sqlite_advance(db, "orders", NULL), FENCE_OK);
    su_exec_ok(db, "ROLLBACK");
    ck_assert_int_eq(su_q_int(db, "SELECT high_water FROM fence_resource WHERE name = 'orders'"),
                     40);

    /* Marks are never lowered, renamed, deleted, or planted above one's
     * token (each refusal in a transaction of its own, with token 45). */
    static const char *const forbidden[] = {
        "UPDATE fence_resource SET high_water = 1",
        "UPDATE fence_resource SET name = 'other'",
        "DELETE FROM fence_resource",
        "INSERT OR REPLACE INTO fence_resource VALUES ('orders', 1)",
        "INSERT INTO fence_resource VALUES ('new', 1000)",
    };
    for (size_t i = 0; i < sizeof forbidden / sizeof forbidden[0]; i++) {
        su_set_tok(db, 45);
        ck_assert_msg(su_exec_rc(db, forbidden[i]) != SQLITE_OK, "%s was admitted", forbidden[i]);
    }
    su_set_tok(db, 45);
    ck_assert_int_ne(su_exec_rc(db, "DELETE FROM fence_resource"), SQLITE_OK);
    ck_assert_msg(strncmp(sqlite3_errmsg(db), "fence:forbidden ", 16) == 0, "%s",
                  sqlite3_errmsg(db));
    su_expect_stale(db, "INSERT OR REPLACE INTO fence_resource(name, high_water) VALUES ('orders', 39)", 39, 40,
                    FENCE_OBJECT_RESOURCE, "orders");
    ck_assert_int_eq(su_q_int(db, "SELECT high_water FROM fence_resource WHERE name = 'orders'"),
                     40);
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM fence_resource"), 1);
    /* No token. */
    su_set_tok(db, 0);
    ck_assert_int_eq(fence_sqlite_advance(db, "orders", NULL), FENCE_ENOTOKEN);
    su_expect_notoken(db, "INSERT INTO fence_advance VALUES ('orders')");
    sqlite3_close(db);
}
END_TEST

/* One name rule in every store (the C API, the gate, PostgreSQL): a
 * resource name is 1..512 bytes of text with no NUL byte.  Found by
 * trying bad input: fence_advance stored names of 513 and 600 bytes and
 * names with a NUL inside.  Refused with fence:einval (FENCE_EINVAL),
 * through fence_advance and through a direct insert into fence_resource,
 * and nothing is stored. */
static int insert_name(sqlite3 *db, const char *sql, const char *name, int len)
{
    sqlite3_stmt *st = NULL;
    ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_bind_text(st, 1, name, len, SQLITE_TRANSIENT), SQLITE_OK);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc;
}

START_TEST(resource_names_one_rule)
{
    sqlite3 *db = su_open_fenced("names.db");
    su_set_tok(db, 5);
    static char big[601];
    memset(big, 'n', 600);
    static const char nul[] = "ab\0cd";
    static const char *const sqls[] = {
        "INSERT INTO fence_advance(resource) VALUES (?1)",
        "INSERT INTO fence_resource(name, high_water) VALUES (?1, fence_token())",
    };
    struct bad_name {
        const char *name;
        int len;
    } bad[] = {{big, 513}, {big, 600}, {nul, 5}, {"", 0}};
    for (int i = 0; i < 2; i++) {
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            su_set_tok(db, 5);
            ck_assert_int_ne(insert_name(db, sqls[i], bad[k].name, bad[k].len), SQLITE_DONE);
            ck_assert_msg(strstr(sqlite3_errmsg(db), "fence:einval") != NULL, "%s: %s", sqls[i],
                          sqlite3_errmsg(db));
            ck_assert_int_eq(fence_sqlite_classify(db, NULL), FENCE_EINVAL);
        }
    }
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM fence_resource"), 0);
    /* 512 bytes is a name; so is any other byte. */
    su_set_tok(db, 5);
    ck_assert_int_eq(insert_name(db, sqls[0], big, 512), SQLITE_DONE);
    su_set_tok(db, 5);
    ck_assert_int_eq(insert_name(db, sqls[0], "\x01 odd\xff", -1), SQLITE_DONE);
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM fence_resource"), 2);
    /* The C API says the same before anything is sent. */
    char name513[514];
    memset(name513, 'n', 513);
    name513[513] = '\0';
    ck_assert_int_eq(fence_sqlite_advance(db, name513, NULL), FENCE_EINVAL);
    sqlite3_close(db);
}
END_TEST

START_TEST(injection_in_names)
{
    sqlite3 *db = su_open_fenced("inj.db");
    su_exec_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v)");
    su_exec_ok(db, "INSERT INTO t VALUES (1, 'survivor')");
    const char *evil = "x\"; DROP TABLE t; --";
    su_exec_ok(db, "CREATE TABLE \"x\"\"; DROP TABLE t; --\"(id INTEGER PRIMARY KEY, v)");
    su_exec_ok(db, "INSERT INTO \"x\"\"; DROP TABLE t; --\"(id, v) VALUES (1, 'a')");
    ck_assert_int_eq(fence_sqlite_protect(db, evil, NULL), FENCE_OK);
    su_tok_exec_ok(db, 34, "UPDATE \"x\"\"; DROP TABLE t; --\" SET v = 'b'");
    su_expect_stale(db, "UPDATE \"x\"\"; DROP TABLE t; --\" SET v = 'c'", 33, 34,
                    FENCE_OBJECT_TABLE, evil);
    /* A weird name for fence's own column (added so), and a quote in the
     * table name. */
    su_exec_ok(db, "CREATE TABLE odd(id INTEGER PRIMARY KEY, v)");
    su_exec_ok(db, "INSERT INTO odd VALUES (1, 'a')");
    fence_sqlite_protect_options o;
    fence_sqlite_protect_options_init(&o);
    o.column = "c'); DROP TABLE t; --";
    ck_assert_int_eq(fence_sqlite_protect(db, "odd", &o), FENCE_OK);
    su_tok_exec_ok(db, 34, "UPDATE odd SET v = 'b'");
    ck_assert_int_eq(su_q_int(db, "SELECT \"c'); DROP TABLE t; --\" FROM odd"), 34);
    su_expect_stale(db, "UPDATE odd SET v = 'c'", 33, 34, FENCE_OBJECT_TABLE, "odd");
    su_exec_ok(db, "CREATE TABLE \"it's\"(id INTEGER PRIMARY KEY, v)");
    su_exec_ok(db, "INSERT INTO \"it's\" VALUES (1, 'a')");
    su_exec_ok(db, "SELECT fence_protect('it''s')");
    su_tok_exec_ok(db, 40, "UPDATE \"it's\" SET v = 'b'");
    su_expect_stale(db, "UPDATE \"it's\" SET v = 'c'", 39, 40, FENCE_OBJECT_TABLE, "it's");
    /* Resource names are bound, never spliced. */
    const char *evil_res = "r'); DELETE FROM fence_resource; DROP TABLE t; --";
    su_set_tok(db, 40);
    ck_assert_int_eq(fence_sqlite_advance(db, evil_res, NULL), FENCE_OK);
    su_set_tok(db, 38);
    ck_assert_int_eq(fence_sqlite_advance(db, evil_res, NULL), FENCE_STALE);
    fence_stale e;
    ck_assert_int_eq(fence_sqlite_classify(db, &e), FENCE_STALE);
    ck_assert_str_eq(e.object, evil_res);
    /* NUL inside a name given from SQL is refused. */
    ck_assert_int_ne(su_exec_rc(db, "SELECT fence_protect(CAST(x'7400' AS TEXT))"), SQLITE_OK);
    ck_assert_msg(strstr(sqlite3_errmsg(db), "NUL") != NULL, "%s", sqlite3_errmsg(db));
    ck_assert_int_ne(su_exec_rc(db, "SELECT fence_protect('t', CAST(x'7600' AS TEXT))"), SQLITE_OK);
    /* Everything is still there. */
    ck_assert_str_eq(su_q_text(db, "SELECT v FROM t"), "survivor");
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM fence_resource"), 1);
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM sqlite_schema WHERE type = 'table'"), 5);
    sqlite3_close(db);
}
END_TEST

START_TEST(trusted_schema_off_and_directonly)
{
    sqlite3 *db = su_table_at_34();
    su_exec_ok(db, "PRAGMA trusted_schema = OFF");
    su_tok_exec_ok(db, 35, "BEGIN; UPDATE t SET v = 'by35' WHERE id = 1;"
                           "INSERT INTO fence_advance VALUES ('r'); COMMIT");
    su_expect_stale(db, "UPDATE t SET v = 'by33' WHERE id = 1", 33, 35, FENCE_OBJECT_TABLE, "t");
    su_expect_stale(db, "INSERT INTO fence_advance VALUES ('r')", 33, 35, FENCE_OBJECT_RESOURCE,
                    "r");
    /* fence_set_token and fence_protect may not run from schema objects,
     * whatever trusted_schema says. */
    su_exec_ok(db, "PRAGMA trusted_schema = ON");
    su_exec_ok(db, "CREATE TABLE side(x)");
    su_exec_ok(db, "CREATE TRIGGER sneaky AFTER INSERT ON side BEGIN "
                   "SELECT fence_set_token(1000000); END");
    /* In a transaction whose token is 33, so that the refusals (statement
     * errors) leave it to be read back. */
    su_exec_ok(db, "BEGIN");
    su_set_tok(db, 33);
    ck_assert_int_ne(su_exec_rc(db, "INSERT INTO side VALUES (1)"), SQLITE_OK);
    ck_assert_msg(strstr(sqlite3_errmsg(db), "unsafe use of fence_set_token") != NULL, "%s",
                  sqlite3_errmsg(db));
    su_exec_ok(db, "CREATE VIEW sneaky_view AS SELECT fence_protect('side') AS x");
    ck_assert_int_ne(su_exec_rc(db, "SELECT * FROM sneaky_view"), SQLITE_OK);
    uint64_t t = 0;
    ck_assert_int_eq(fence_sqlite_token(db, &t), FENCE_OK);
    ck_assert_int_eq(t, 33);
    su_exec_ok(db, "ROLLBACK");
    sqlite3_close(db);
}
END_TEST

START_TEST(connection_without_fence_fails_closed)
{
    sqlite3 *db = su_table_at_34();
    sqlite3 *plain = su_open_plain("t.db");
    ck_assert_int_eq(su_exec_rc(plain, "UPDATE t SET v = 'plain' WHERE id = 1"), SQLITE_ERROR);
    ck_assert_msg(strstr(sqlite3_errmsg(plain), "fence_token") != NULL, "%s",
                  sqlite3_errmsg(plain));
    ck_assert_int_eq(fence_sqlite_classify(plain, NULL), FENCE_EDB);
    ck_assert_int_ne(su_exec_rc(plain, "DELETE FROM t"), SQLITE_OK);
    ck_assert_int_ne(su_exec_rc(plain, "INSERT INTO t(v) VALUES ('plain')"), SQLITE_OK);
    ck_assert_int_ne(su_exec_rc(plain, "INSERT INTO fence_advance VALUES ('r')"), SQLITE_OK);
    ck_assert_int_eq(su_q_int(plain, "SELECT count(*) FROM t"), 2);
    ck_assert_str_eq(su_q_text(plain, "SELECT v FROM t WHERE id = 1"), "by34");
    /* The C API refuses a connection that never attached. */
    ck_assert_int_eq(fence_sqlite_set_token(plain, 5, NULL), FENCE_ESTATE);
    ck_assert_int_eq(fence_sqlite_protect(plain, "t", NULL), FENCE_ESTATE);
    /* Unprotected, anyone writes again; the column stays. */
    ck_assert_int_eq(fence_sqlite_unprotect(db, "t"), FENCE_OK);
    ck_assert_int_eq(fence_sqlite_unprotect(db, "t"), FENCE_OK);
    /* (A connection reloads a changed schema when a statement runs, but a
     * prepare that fails on its cached schema -- "no such function" -- is
     * not retried: read once so plain sees the triggers are gone.  The
     * other direction is safe: a write prepared before protect is
     * re-prepared with the triggers when it runs.) */
    ck_assert_int_eq(su_q_int(plain, "SELECT count(*) FROM t"), 2);
    su_exec_ok(plain, "UPDATE t SET v = 'plain' WHERE id = 1");
    ck_assert_int_eq(su_q_int(plain, "SELECT fence_token FROM t WHERE id = 1"), 34);
    ck_assert_int_eq(su_q_int(db,
                              "SELECT count(*) FROM sqlite_schema WHERE name LIKE 'fence\\_%\\_t' "
                              "ESCAPE '\\'"),
                     0);
    /* And protected again from SQL. */
    su_exec_ok(db, "SELECT fence_protect('t')");
    ck_assert_int_ne(su_exec_rc(plain, "UPDATE t SET v = 'plain2' WHERE id = 1"), SQLITE_OK);
    su_exec_ok(db, "SELECT fence_unprotect('t')");
    ck_assert_int_eq(su_q_int(plain, "SELECT count(*) FROM t"), 2);
    su_exec_ok(plain, "UPDATE t SET v = 'plain2' WHERE id = 1");
    /* A statement prepared before protect is re-prepared, with the
     * triggers, when it runs. */
    sqlite3_stmt *st = NULL;
    ck_assert_int_eq(sqlite3_prepare_v2(plain, "UPDATE t SET v = 'early' WHERE id = 1", -1, &st,
                                        NULL),
                     SQLITE_OK);
    su_exec_ok(db, "SELECT fence_protect('t')");
    ck_assert_int_ne(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    ck_assert_str_eq(su_q_text(db, "SELECT v FROM t WHERE id = 1"), "plain2");
    sqlite3_close(plain);
    sqlite3_close(db);
}
END_TEST

/* Token text has one grammar: '7' sets, '0' clears like 0 does; a sign, a
 * space or a leading zero is refused (see also missing_and_malformed_tokens). */
START_TEST(text_tokens_one_grammar)
{
    sqlite3 *db = su_table_at_34();
    ck_assert_int_eq(su_q_int(db, "SELECT fence_set_token('35')"), 35);
    ck_assert_int_eq(su_q_int(db, "SELECT fence_set_token('0') IS NULL"), 1);
    uint64_t t = 1;
    ck_assert_int_eq(fence_sqlite_token(db, &t), FENCE_OK);
    ck_assert_uint_eq(t, 0);
    ck_assert_int_eq(su_q_int(db, "SELECT fence_set_token('9223372036854775807')"), INT64_MAX);
    static const char *const refused[] = {"'007'", "'+7'", "' 7'", "'0035'", "'035'"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char sql[64];
        snprintf(sql, sizeof sql, "SELECT fence_set_token(%s)", refused[i]);
        ck_assert_int_eq(su_exec_rc(db, sql), SQLITE_ERROR);
        ck_assert_msg(strstr(sqlite3_errmsg(db), "leading zero") != NULL, "%s: %s", sql,
                      sqlite3_errmsg(db));
        ck_assert_int_eq(fence_sqlite_classify(db, NULL), FENCE_ENOTOKEN);
        ck_assert_int_eq(fence_sqlite_token(db, &t), FENCE_OK);
        ck_assert_uint_eq(t, 0);
    }
    /* The row keeps what token 34 wrote. */
    ck_assert_str_eq(su_q_text(db, "SELECT v || fence_token FROM t WHERE id = 1"), "by3434");
    sqlite3_close(db);
}
END_TEST

static Suite *sqlite_suite(void)
{
    Suite *s = suite_create("sqlite");
    TCase *tc = tcase_create("fencing");
    tcase_add_checked_fixture(tc, su_setup, su_teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, stale_update_delete_insert);
    tcase_add_test(tc, equal_and_higher_admitted_and_stamped);
    tcase_add_test(tc, client_column_writes_cannot_bypass);
    tcase_add_test(tc, missing_and_malformed_tokens);
    tcase_add_test(tc, text_tokens_one_grammar);
    tcase_add_test(tc, permissive_mode);
    tcase_add_test(tc, version_column_refused);
    tcase_add_test(tc, per_resource_advance);
    tcase_add_test(tc, resource_names_one_rule);
    tcase_add_test(tc, injection_in_names);
    tcase_add_test(tc, trusted_schema_off_and_directonly);
    tcase_add_test(tc, connection_without_fence_fails_closed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(sqlite_suite());
}
