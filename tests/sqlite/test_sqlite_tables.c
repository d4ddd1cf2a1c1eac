/* test_sqlite_tables.c -- the tables fencing must see through: WITHOUT
 * ROWID tables, unique indexes, the rowid as a key, permissive tables
 * without a token, TEMP shadows and renamed tables (the security review). */
#include <check.h>
#include <sqlite3.h>
#include <stdint.h>
#include <string.h>

#include "sqliteutil.h"

START_TEST(without_rowid_and_odd_tables)
{
    sqlite3 *db = su_open_fenced("w.db");
    su_exec_ok(db, "CREATE TABLE w(a TEXT, b INTEGER, v TEXT, PRIMARY KEY (a, b)) WITHOUT ROWID");
    su_write_ok(db, "INSERT INTO w VALUES ('k', 1, 'x')");
    ck_assert_int_eq(fence_sqlite_protect(db, "W", NULL), FENCE_OK); /* any case */
    su_set_tok(db, 34);
    su_write_ok(db, "UPDATE w SET v = 'by34'");
    su_write_ok(db, "INSERT INTO w(a, b, v) VALUES ('k', 2, 'new')");
    ck_assert_int_eq(su_q_int(db, "SELECT sum(fence_token) FROM w"), 68);
    su_set_tok(db, 33);
    su_expect_stale(db, "UPDATE w SET v = 'by33' WHERE b = 1", 33, 34, FENCE_OBJECT_TABLE, "w");
    su_expect_stale(db, "REPLACE INTO w VALUES ('k', 1, 'r33', 0)", 33, 34, FENCE_OBJECT_TABLE,
                    "w");
    /* A case-insensitive unique index is honoured. */
    su_exec_ok(db, "CREATE TABLE u(id INTEGER PRIMARY KEY, email TEXT)");
    su_exec_ok(db, "CREATE UNIQUE INDEX u_email ON u(email COLLATE NOCASE)");
    su_exec_ok(db, "SELECT fence_protect('u')");
    su_set_tok(db, 34);
    su_write_ok(db, "INSERT INTO u(email) VALUES ('A@X')");
    su_set_tok(db, 33);
    su_expect_stale(db, "INSERT OR REPLACE INTO u(email) VALUES ('a@x')", 33, 34,
                    FENCE_OBJECT_TABLE, "u");
    /* Refused: expression unique index, views, internal and missing tables. */
    su_exec_ok(db, "CREATE TABLE e(id INTEGER PRIMARY KEY, s TEXT)");
    su_exec_ok(db, "CREATE UNIQUE INDEX e_lower ON e(lower(s))");
    ck_assert_int_eq(fence_sqlite_protect(db, "e", NULL), FENCE_EINVAL);
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM pragma_table_info('e')"), 2);
    su_exec_ok(db, "CREATE VIEW vw AS SELECT 1");
    ck_assert_int_eq(fence_sqlite_protect(db, "vw", NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_protect(db, "fence_resource", NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_protect(db, "sqlite_schema", NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_protect(db, "missing", NULL), FENCE_EINVAL);
    ck_assert_msg(strstr(fence_sqlite_errmsg(db), "missing") != NULL, "%s",
                  fence_sqlite_errmsg(db));
    sqlite3_close(db);
}
END_TEST

START_TEST(rowid_is_a_key)
{
    sqlite3 *db = su_open_fenced("rowid.db");
    su_exec_ok(db, "CREATE TABLE t(v TEXT, name TEXT UNIQUE)");
    ck_assert_int_eq(fence_sqlite_protect(db, "t", NULL), FENCE_OK);
    su_set_tok(db, 10);
    su_write_ok(db, "INSERT INTO t(v, name) VALUES ('by10', 'a')"); /* rowid 1 */
    su_set_tok(db, 5);
    su_write_ok(db, "INSERT INTO t(v, name) VALUES ('by5', 'c')"); /* rowid 2 */
    su_expect_stale(db, "INSERT OR REPLACE INTO t(rowid, v, name) VALUES (1, 'stale-replace', 'b')",
                    5, 10, FENCE_OBJECT_TABLE, "t");
    su_expect_stale(db, "REPLACE INTO t(oid, v, name) VALUES (1, 'stale-replace', 'b')", 5, 10,
                    FENCE_OBJECT_TABLE, "t");
    su_expect_stale(db, "UPDATE OR REPLACE t SET rowid = 1 WHERE rowid = 2", 5, 10,
                    FENCE_OBJECT_TABLE, "t");
    su_expect_stale(db, "UPDATE OR REPLACE t SET _rowid_ = 1 WHERE rowid = 2", 5, 10,
                    FENCE_OBJECT_TABLE, "t");
    su_expect_stale(db, "UPDATE OR REPLACE t SET (\"OID\", v) = (1, 'x') WHERE rowid = 2", 5, 10,
                    FENCE_OBJECT_TABLE, "t");
    su_expect_stale(db,
                    "INSERT INTO t(rowid, v, name) VALUES (1, 'x', 'z') "
                    "ON CONFLICT DO UPDATE SET v = excluded.v",
                    5, 10, FENCE_OBJECT_TABLE, "t");
    ck_assert_str_eq(su_q_text(db,
                               "SELECT group_concat(rowid || '|' || v || '|' || name || '|' || "
                               "fence_token, ',') FROM (SELECT rowid, * FROM t ORDER BY rowid)"),
                     "1|by10|a|10,2|by5|c|5");
    /* Rows no newer holder wrote stay writable, with or without a rowid. */
    su_write_ok(db, "INSERT INTO t(v, name) VALUES ('auto5', 'd')");
    su_write_ok(db, "INSERT OR REPLACE INTO t(rowid, v, name) VALUES (2, 'again5', 'c')");
    su_write_ok(db, "UPDATE OR REPLACE t SET rowid = 20 WHERE name = 'd'");
    su_set_tok(db, 10);
    su_write_ok(db, "UPDATE OR REPLACE t SET rowid = 1 WHERE rowid = 2");
    ck_assert_str_eq(su_q_text(db, "SELECT v || '|' || fence_token FROM t WHERE rowid = 1"),
                     "again5|10");
    sqlite3_close(db);

    /* An INTEGER PRIMARY KEY table: SET rowid (or oid) moves the key too,
     * and UPDATE OF <the key column> alone does not see it. */
    db = su_table_at_34();
    su_set_tok(db, 33);
    su_expect_stale(db, "UPDATE OR REPLACE t SET rowid = 1 WHERE id = 2", 33, 34,
                    FENCE_OBJECT_TABLE, "t");
    su_expect_stale(db, "UPDATE OR REPLACE t SET oid = 1 WHERE id = 2", 33, 34, FENCE_OBJECT_TABLE,
                    "t");
    ck_assert_str_eq(su_q_text(db, "SELECT v FROM t WHERE id = 1"), "by34");
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM t"), 2);
    sqlite3_close(db);

    /* INTEGER PRIMARY KEY DESC is not the rowid: both are keys. */
    db = su_open_fenced("desc.db");
    su_exec_ok(db, "CREATE TABLE k(id INTEGER PRIMARY KEY DESC, v TEXT)");
    ck_assert_int_eq(fence_sqlite_protect(db, "k", NULL), FENCE_OK);
    su_set_tok(db, 10);
    su_write_ok(db, "INSERT INTO k(rowid, id, v) VALUES (1, 100, 'by10')");
    su_set_tok(db, 5);
    su_write_ok(db, "INSERT INTO k(rowid, id, v) VALUES (2, 200, 'by5')");
    su_expect_stale(db, "INSERT OR REPLACE INTO k(rowid, id, v) VALUES (1, 300, 'x')", 5, 10,
                    FENCE_OBJECT_TABLE, "k");
    su_expect_stale(db, "INSERT OR REPLACE INTO k(rowid, id, v) VALUES (3, 100, 'x')", 5, 10,
                    FENCE_OBJECT_TABLE, "k");
    su_expect_stale(db, "UPDATE OR REPLACE k SET rowid = 1 WHERE id = 200", 5, 10,
                    FENCE_OBJECT_TABLE, "k");
    su_expect_stale(db, "UPDATE OR REPLACE k SET id = 100 WHERE id = 200", 5, 10,
                    FENCE_OBJECT_TABLE, "k");
    ck_assert_str_eq(su_q_text(db, "SELECT v FROM k WHERE rowid = 1"), "by10");

    /* WITHOUT ROWID: the primary key is the only row identity; moving a
     * row onto a newer one's key is refused too. */
    su_exec_ok(db, "CREATE TABLE w(a TEXT, b INTEGER, v TEXT, PRIMARY KEY (a, b)) WITHOUT ROWID");
    ck_assert_int_eq(fence_sqlite_protect(db, "w", NULL), FENCE_OK);
    su_set_tok(db, 10);
    su_write_ok(db, "INSERT INTO w(a, b, v) VALUES ('k', 1, 'by10')");
    su_set_tok(db, 5);
    su_write_ok(db, "INSERT INTO w(a, b, v) VALUES ('k', 2, 'by5')");
    su_expect_stale(db, "UPDATE OR REPLACE w SET b = 1 WHERE b = 2", 5, 10, FENCE_OBJECT_TABLE,
                    "w");
    su_expect_stale(db, "INSERT OR REPLACE INTO w(a, b, v) VALUES ('k', 1, 'x')", 5, 10,
                    FENCE_OBJECT_TABLE, "w");
    ck_assert_str_eq(su_q_text(db, "SELECT v FROM w WHERE b = 1"), "by10");
    sqlite3_close(db);
}
END_TEST

START_TEST(permissive_tokenless_keeps_stamp)
{
    sqlite3 *db = su_open_fenced("perm.db");
    su_exec_ok(db, "CREATE TABLE p(id INTEGER PRIMARY KEY, v TEXT, stamp INTEGER FENCE_TOKEN)");
    su_write_ok(db, "INSERT INTO p VALUES (1, 'a', 0), (2, 'b', NULL)");
    /* The token column under a name of the table's own, declared with
     * fence's type (so fence knows it for its own). */
    fence_sqlite_protect_options o;
    fence_sqlite_protect_options_init(&o);
    o.column = "stamp";
    o.permissive = 1;
    ck_assert_int_eq(fence_sqlite_protect(db, "p", &o), FENCE_OK);
    su_set_tok(db, 10);
    su_write_ok(db, "UPDATE p SET v = 'by10' WHERE id = 1");
    su_set_tok(db, 0);
    /* Lowering the stamp would let a stale token in. */
    su_write_ok(db, "UPDATE p SET v = 'legacy', stamp = 0 WHERE id = 1");
    ck_assert_str_eq(su_q_text(db, "SELECT v || '|' || stamp FROM p WHERE id = 1"),
                     "legacy|10");
    su_set_tok(db, 3);
    su_expect_stale(db, "UPDATE p SET v = 'stale3' WHERE id = 1", 3, 10, FENCE_OBJECT_TABLE, "p");
    su_set_tok(db, 0);
    /* Raising it would lock the row against every later holder. */
    su_write_ok(db, "UPDATE p SET stamp = 9223372036854775807 WHERE id = 1");
    su_write_ok(db, "UPDATE p SET stamp = NULL WHERE id = 1");
    /* A legacy writer that bumps the column itself. */
    su_write_ok(db, "UPDATE p SET v = 'rails', stamp = stamp + 1 "
                   "WHERE id = 1 AND stamp = 10");
    su_write_ok(db, "INSERT INTO p(id, v) VALUES (1, 'upsert') "
                   "ON CONFLICT(id) DO UPDATE SET v = excluded.v, stamp = 0");
    ck_assert_str_eq(su_q_text(db, "SELECT v || '|' || stamp FROM p WHERE id = 1"),
                     "upsert|10");
    su_set_tok(db, 11);
    su_write_ok(db, "UPDATE p SET v = 'by11' WHERE id = 1");
    ck_assert_int_eq(su_q_int(db, "SELECT stamp FROM p WHERE id = 1"), 11);
    su_set_tok(db, 0);
    /* A row nobody fenced stays at 0; NULL and 0 count the same. */
    su_write_ok(db, "UPDATE p SET v = 'b2', stamp = NULL WHERE id = 2");
    ck_assert_int_eq(su_q_int(db, "SELECT coalesce(stamp, 0) FROM p WHERE id = 2"), 0);
    su_write_ok(db, "UPDATE p SET stamp = 4 WHERE id = 2");
    ck_assert_int_eq(su_q_int(db, "SELECT coalesce(stamp, 0) FROM p WHERE id = 2"), 0);

    /* INSERT without a token: stamped 0; planting a stamp is refused. */
    su_write_ok(db, "INSERT INTO p(id, v) VALUES (3, 'c')");
    su_write_ok(db, "INSERT INTO p(id, v, stamp) VALUES (4, 'd', NULL)");
    su_write_ok(db, "INSERT INTO p(id, v, stamp) VALUES (5, 'e', -7)");
    su_write_ok(db, "INSERT INTO p(id, v, stamp) VALUES (6, 'f', 0)");
    ck_assert_str_eq(su_q_text(db, "SELECT group_concat(stamp, ',') FROM "
                                   "(SELECT stamp FROM p WHERE id >= 3 ORDER BY id)"),
                     "0,0,0,0");
    ck_assert_int_eq(su_exec_rc(db, "INSERT INTO p(id, v, stamp) VALUES (7, 'g', 9)"),
                     SQLITE_CONSTRAINT);
    ck_assert_msg(strncmp(sqlite3_errmsg(db), "fence:forbidden ", 16) == 0, "%s",
                  sqlite3_errmsg(db));
    ck_assert_int_eq(su_exec_rc(db, "INSERT INTO p(id, v, stamp) "
                                    "VALUES (8, 'h', 9223372036854775807)"),
                     SQLITE_CONSTRAINT);
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM p WHERE id >= 7"), 0);

    /* With recursive triggers on, restoring the stamp re-runs the trigger,
     * which cannot tell the restore from a client write: such a write is
     * refused whole; other tokenless writes go through. */
    su_exec_ok(db, "PRAGMA recursive_triggers = ON");
    ck_assert_int_ne(su_exec_rc(db, "UPDATE p SET v = 'rec', stamp = 0 WHERE id = 1"),
                     SQLITE_OK);
    su_write_ok(db, "UPDATE p SET v = 'rec' WHERE id = 1");
    su_write_ok(db, "INSERT INTO p(id, v, stamp) VALUES (9, 'i', NULL)");
    ck_assert_str_eq(su_q_text(db, "SELECT v || '|' || stamp FROM p WHERE id = 1"),
                     "rec|11");
    ck_assert_int_eq(su_q_int(db, "SELECT stamp FROM p WHERE id = 9"), 0);
    su_set_tok(db, 3);
    su_expect_stale(db, "UPDATE p SET v = 'stale3' WHERE id = 1", 3, 11, FENCE_OBJECT_TABLE, "p");

    /* The same with the default column. */
    su_exec_ok(db, "PRAGMA recursive_triggers = OFF");
    su_exec_ok(db, "CREATE TABLE q(id INTEGER PRIMARY KEY, v TEXT)");
    su_exec_ok(db, "SELECT fence_protect('q', NULL, 1)");
    su_set_tok(db, 10);
    su_write_ok(db, "INSERT INTO q VALUES (1, 'by10', 10)");
    su_set_tok(db, 0);
    su_write_ok(db, "UPDATE q SET v = 'legacy', fence_token = 0");
    ck_assert_int_eq(su_q_int(db, "SELECT fence_token FROM q"), 10);
    sqlite3_close(db);
}
END_TEST

START_TEST(temp_table_shadow)
{
    sqlite3 *db = su_open_fenced("shadow.db");
    su_exec_ok(db, "CREATE TABLE m(id INTEGER PRIMARY KEY, v TEXT)");
    su_write_ok(db, "INSERT INTO main.m VALUES (1, 'main')");
    su_exec_ok(db, "CREATE TEMP TABLE m(id INTEGER PRIMARY KEY, v TEXT)");
    ck_assert_int_eq(fence_sqlite_protect(db, "m", NULL), FENCE_EINVAL);
    ck_assert_msg(strstr(fence_sqlite_errmsg(db), "TEMP") != NULL, "%s", fence_sqlite_errmsg(db));
    ck_assert_int_ne(su_exec_rc(db, "SELECT fence_protect('m')"), SQLITE_OK);
    ck_assert_msg(strstr(sqlite3_errmsg(db), "TEMP") != NULL, "%s", sqlite3_errmsg(db));
    /* Nothing was changed, in either schema. */
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM pragma_table_info('m', 'main')"), 2);
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM pragma_table_info('m', 'temp')"), 2);
    ck_assert_int_eq(su_count_fence_triggers(db, "main", "m"), 0);
    ck_assert_int_eq(su_count_fence_triggers(db, "temp", "m"), 0);

    /* Without the shadow it works, and everything lands in main. */
    su_exec_ok(db, "DROP TABLE temp.m");
    ck_assert_int_eq(fence_sqlite_protect(db, "m", NULL), FENCE_OK);
    ck_assert_int_eq(su_count_fence_triggers(db, "main", "m"), 5);
    ck_assert_int_eq(su_count_fence_triggers(db, "temp", "m"), 0);
    su_set_tok(db, 10);
    su_write_ok(db, "UPDATE m SET v = 'by10'");

    /* A shadow created afterwards does not blind main's triggers. */
    su_exec_ok(db, "CREATE TEMP TABLE m(id INTEGER PRIMARY KEY, v TEXT, fence_token INTEGER)");
    su_write_ok(db, "INSERT INTO temp.m VALUES (1, 'temp', 0)");
    su_set_tok(db, 5);
    su_expect_stale(db, "UPDATE main.m SET v = 'by5'", 5, 10, FENCE_OBJECT_TABLE, "m");
    su_expect_stale(db, "INSERT OR REPLACE INTO main.m(id, v) VALUES (1, 'by5')", 5, 10,
                    FENCE_OBJECT_TABLE, "m");
    su_expect_stale(db, "DELETE FROM main.m", 5, 10, FENCE_OBJECT_TABLE, "m");
    su_write_ok(db, "UPDATE m SET v = 'temp5'"); /* the TEMP table: not fenced */
    ck_assert_str_eq(su_q_text(db, "SELECT v || '|' || fence_token FROM main.m"), "by10|10");
    /* Unprotect finds main's triggers, not the shadow. */
    ck_assert_int_eq(fence_sqlite_unprotect(db, "m"), FENCE_OK);
    ck_assert_int_eq(su_count_fence_triggers(db, "main", "m"), 0);

    /* A TEMP fence_advance must not swallow a C-API advance. */
    su_set_tok(db, 34);
    su_advance_ok(db, "r");
    su_exec_ok(db, "CREATE TEMP TABLE fence_advance(resource)");
    su_set_tok(db, 33);
    ck_assert_int_eq(fence_sqlite_advance(db, "r", NULL), FENCE_STALE);
    ck_assert_int_eq(su_q_int(db, "SELECT high_water FROM main.fence_resource"), 34);
    sqlite3_close(db);
}
END_TEST

START_TEST(renamed_table_triggers)
{
    sqlite3 *db = su_open_fenced("rename.db");
    su_exec_ok(db, "CREATE TABLE a(id INTEGER PRIMARY KEY, v TEXT, email TEXT UNIQUE)");
    su_write_ok(db, "INSERT INTO a VALUES (1, 'x', 'e1')");
    ck_assert_int_eq(fence_sqlite_protect(db, "a", NULL), FENCE_OK);
    su_set_tok(db, 10);
    su_write_ok(db, "UPDATE a SET v = 'by10'");
    su_exec_ok(db, "ALTER TABLE a RENAME TO b");
    ck_assert_int_eq(su_count_fence_triggers(db, "main", "b"), 5);
    /* Protecting again replaces the old set instead of adding a second. */
    ck_assert_int_eq(fence_sqlite_protect(db, "b", NULL), FENCE_OK);
    ck_assert_int_eq(su_count_fence_triggers(db, "main", "b"), 5);
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' "
                                  "AND name LIKE 'fence\\_%\\_a' ESCAPE '\\'"),
                     0);
    su_set_tok(db, 5);
    su_expect_stale(db, "UPDATE b SET v = 'by5'", 5, 10, FENCE_OBJECT_TABLE, "b");
    /* Unprotect right after a rename finds them too. */
    su_exec_ok(db, "ALTER TABLE b RENAME TO c");
    ck_assert_int_eq(fence_sqlite_unprotect(db, "c"), FENCE_OK);
    ck_assert_int_eq(su_count_fence_triggers(db, "main", "c"), 0);
    su_write_ok(db, "UPDATE c SET v = 'unfenced'");
    /* A user's trigger that merely looks like ours is left alone. */
    su_exec_ok(db, "CREATE TABLE audit(x)");
    su_exec_ok(db, "CREATE TRIGGER fence_bi_audit BEFORE INSERT ON c BEGIN "
                   "INSERT INTO audit VALUES (NEW.v); END");
    ck_assert_int_eq(fence_sqlite_protect(db, "c", NULL), FENCE_OK);
    ck_assert_int_eq(fence_sqlite_unprotect(db, "c"), FENCE_OK);
    ck_assert_int_eq(
        su_q_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'fence_bi_audit'"), 1);
    su_exec_ok(db, "DROP TRIGGER fence_bi_audit");

    /* A new table under a renamed protected table's old name: its trigger
     * names are taken; refused with a way out, not a bare SQLite error. */
    ck_assert_int_eq(fence_sqlite_protect(db, "c", NULL), FENCE_OK);
    su_exec_ok(db, "ALTER TABLE c RENAME TO d");
    su_exec_ok(db, "CREATE TABLE c(id INTEGER PRIMARY KEY, v TEXT)");
    ck_assert_int_eq(fence_sqlite_protect(db, "c", NULL), FENCE_EINVAL);
    ck_assert_msg(strstr(fence_sqlite_errmsg(db), "\"d\"") != NULL, "%s", fence_sqlite_errmsg(db));
    ck_assert_int_eq(su_count_fence_triggers(db, "main", "d"), 5); /* untouched */
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM pragma_table_info('c')"), 2);
    ck_assert_int_eq(fence_sqlite_unprotect(db, "c"), FENCE_OK); /* not d's */
    ck_assert_int_eq(su_count_fence_triggers(db, "main", "d"), 5);
    ck_assert_int_eq(fence_sqlite_protect(db, "d", NULL), FENCE_OK);
    ck_assert_int_eq(fence_sqlite_protect(db, "c", NULL), FENCE_OK);
    ck_assert_int_eq(su_count_fence_triggers(db, "main", "c"), 5);
    ck_assert_int_eq(su_count_fence_triggers(db, "main", "d"), 5);
    sqlite3_close(db);
}
END_TEST

static Suite *tables_suite(void)
{
    Suite *s = suite_create("sqlite_tables");
    TCase *tc = tcase_create("tables");
    tcase_add_checked_fixture(tc, su_setup, su_teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, without_rowid_and_odd_tables);
    tcase_add_test(tc, rowid_is_a_key);
    tcase_add_test(tc, permissive_tokenless_keeps_stamp);
    tcase_add_test(tc, temp_table_shadow);
    tcase_add_test(tc, renamed_table_triggers);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(tables_suite());
}
