/* test_sqlite_column.c -- the token column is fence's own: how fence knows
 * it (named fence_token, or declared FENCE_SQLITE_COLUMN_TYPE, the type of
 * every column fence adds), across protect again, unprotect, renames; an
 * application's column (an ORM's lock_version) refused, and a switch of
 * the token column of a fenced table refused; and the migration of a table
 * an older fence protected on its version column
 * (tests/sqlite/db_before_own_column.sql, made by that version): one call
 * moves fencing to fence's own column with exactly the stamps it had -- no
 * stale write gets in at any point -- keeps the table's mode, leaves the
 * version column to the ORM, and changes nothing when it fails. */
#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "sqliteutil.h"

#define ROWS(db, tbl, cols) \
    su_q_text(db, "SELECT group_concat(" cols ", ' ') FROM (SELECT * FROM " tbl " ORDER BY id)")

static void expect_einval(sqlite3 *db, fence_status rc, const char *words)
{
    ck_assert_msg(rc == FENCE_EINVAL, "want FENCE_EINVAL, got %s (%s)", fence_status_name(rc),
                  fence_sqlite_errmsg(db));
    ck_assert_msg(strstr(fence_sqlite_errmsg(db), words) != NULL, "want \"%s\" in: %s", words,
                  fence_sqlite_errmsg(db));
}

static fence_status protect_on(sqlite3 *db, const char *table, const char *column)
{
    fence_sqlite_protect_options o;
    fence_sqlite_protect_options_init(&o);
    o.column = column;
    return fence_sqlite_protect(db, table, &o);
}

START_TEST(own_column_rule)
{
    sqlite3 *db = su_open_fenced("own.db");
    su_exec_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);"
                   "INSERT INTO t VALUES (1, 'a')");
    /* Added by fence, with its type; protect again, unprotect and protect
     * again, permissive and back: the same column every time. */
    ck_assert_int_eq(fence_sqlite_protect(db, "t", NULL), FENCE_OK);
    ck_assert_str_eq(su_q_text(db, "SELECT type FROM pragma_table_info('t') "
                                   "WHERE name = 'fence_token'"),
                     FENCE_SQLITE_COLUMN_TYPE);
    su_tok_exec_ok(db, 7, "UPDATE t SET v = 'b'");
    ck_assert_int_eq(fence_sqlite_protect(db, "t", NULL), FENCE_OK);
    ck_assert_int_eq(protect_on(db, "t", "FENCE_TOKEN"), FENCE_OK); /* no case */
    ck_assert_int_eq(fence_sqlite_unprotect(db, "t"), FENCE_OK);
    ck_assert_int_eq(protect_on(db, "t", "fence_token"), FENCE_OK);
    su_exec_ok(db, "SELECT fence_protect('t', NULL, 1)");
    su_exec_ok(db, "SELECT fence_protect('t')");
    su_expect_stale(db, "UPDATE t SET v = 'c'", 6, 7, FENCE_OBJECT_TABLE, "t");
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM pragma_table_info('t')"), 3);

    /* Under a name of one's choice: added with fence's type, known by it
     * after unprotect and after the column is renamed. */
    su_exec_ok(db, "CREATE TABLE s(id INTEGER PRIMARY KEY, v TEXT);"
                   "INSERT INTO s VALUES (1, 'a')");
    ck_assert_int_eq(protect_on(db, "s", "stamp"), FENCE_OK);
    su_tok_exec_ok(db, 9, "UPDATE s SET v = 'b'");
    ck_assert_int_eq(fence_sqlite_unprotect(db, "s"), FENCE_OK);
    ck_assert_int_eq(protect_on(db, "s", "stamp"), FENCE_OK);
    su_exec_ok(db, "ALTER TABLE s RENAME COLUMN stamp TO stamp2");
    ck_assert_int_eq(protect_on(db, "s", "stamp2"), FENCE_OK);
    su_expect_stale(db, "UPDATE s SET v = 'c'", 8, 9, FENCE_OBJECT_TABLE, "s");

    /* Declared with fence's type by the application itself; a fence_token
     * an older fence added (plain INTEGER): fence's own too. */
    su_exec_ok(db, "CREATE TABLE d(id INTEGER PRIMARY KEY, v TEXT, "
                   "fenced integer fence_token NOT NULL DEFAULT 0);"
                   "CREATE TABLE o(id INTEGER PRIMARY KEY, v TEXT, "
                   "fence_token INTEGER NOT NULL DEFAULT 0)");
    ck_assert_int_eq(protect_on(db, "d", "fenced"), FENCE_OK);
    ck_assert_int_eq(fence_sqlite_protect(db, "o", NULL), FENCE_OK);

    /* An application's column: refused, nothing done.  Its own checks
     * (INTEGER affinity, not the key) still come first. */
    su_exec_ok(db, "CREATE TABLE posts(id INTEGER PRIMARY KEY, title TEXT, "
                   "lock_version INTEGER NOT NULL DEFAULT 0, n INTEGER, label TEXT)");
    expect_einval(db, protect_on(db, "posts", "lock_version"), "is the application's");
    expect_einval(db, protect_on(db, "posts", "n"), "fence_protect('posts')");
    expect_einval(db, protect_on(db, "posts", "label"), "INTEGER affinity");
    expect_einval(db, protect_on(db, "posts", "id"), "primary key");
    ck_assert_int_eq(su_count_fence_triggers(db, "main", "posts"), 0);
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM pragma_table_info('posts')"), 5);

    /* A fenced table's token column is not switched: the stamps would
     * start over (unprotect first to mean it). */
    expect_einval(db, protect_on(db, "t", "other"), "start every row's stamp over");
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM pragma_table_info('t')"), 3);
    su_expect_stale(db, "UPDATE t SET v = 'c'", 6, 7, FENCE_OBJECT_TABLE, "t");
    ck_assert_int_eq(fence_sqlite_unprotect(db, "t"), FENCE_OK);
    ck_assert_int_eq(protect_on(db, "t", "other"), FENCE_OK);
    sqlite3_close(db);
}
END_TEST

/* The fixture: posts (strict) and drafts (permissive), fenced on
 * lock_version by the old retrofit. */
static sqlite3 *old_retrofit(void)
{
    sqlite3 *plain = su_open_plain("old.db");
    su_exec_file(plain, SU_BEFORE_OWN_COLUMN);
    sqlite3_close(plain);
    sqlite3 *db = su_open_fenced("old.db");
    ck_assert_str_eq(ROWS(db, "posts", "lock_version"), "30 34 0");
    return db;
}

START_TEST(migrate_old_retrofit)
{
    sqlite3 *db = old_retrofit();
    /* Attaching upgraded the guard triggers of fence_resource (they ask
     * fence_mark_rule now); the tables' triggers are the old ones. */
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' "
                                  "AND name IN ('fence_advance_insert', 'fence_resource_insert', "
                                  "'fence_resource_update') AND instr(sql, 'fence_mark_rule(')"),
                     3);
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' "
                                  "AND tbl_name = 'posts' AND instr(sql, 'fence_stamp_rule(')"),
                     0);
    /* Until migrated, the old triggers fence as they did. */
    su_expect_stale(db, "UPDATE posts SET title = 'x' WHERE id = 1", 29, 30, FENCE_OBJECT_TABLE,
                    "posts");
    /* Protecting it again either way is refused, naming the migration:
     * on fence_token it would drop the stamps, on lock_version it would
     * go on losing updates. */
    expect_einval(db, fence_sqlite_protect(db, "posts", NULL),
                  "fence_migrate_version_column('posts')");
    expect_einval(db, protect_on(db, "posts", "lock_version"),
                  "fence_migrate_version_column('posts')");
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM pragma_table_info('posts')"), 3);

    /* One call. */
    ck_assert_int_eq(fence_sqlite_migrate_version_column(db, "posts", NULL), FENCE_OK);
    ck_assert_str_eq(ROWS(db, "posts", "fence_token"), "30 34 0");
    ck_assert_str_eq(ROWS(db, "posts", "lock_version"), "30 34 0");
    ck_assert_str_eq(su_q_text(db, "SELECT type FROM pragma_table_info('posts') "
                                   "WHERE name = 'fence_token'"),
                     FENCE_SQLITE_COLUMN_TYPE);
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' "
                                  "AND tbl_name = 'posts' AND instr(sql, 'fence_stamp_rule(')"),
                     4);
    /* No fencing lost: what the old stamps refused is refused. */
    su_expect_stale(db, "UPDATE posts SET title = 'x' WHERE id = 1", 29, 30, FENCE_OBJECT_TABLE,
                    "posts");
    su_expect_stale(db, "DELETE FROM posts WHERE id = 2", 33, 34, FENCE_OBJECT_TABLE, "posts");
    su_set_tok(db, 0);
    su_expect_notoken(db, "UPDATE posts SET title = 'x' WHERE id = 3");
    /* The version column is the ORM's again: one holder's two saves of one
     * row each bump it, a second copy of an old version is the ORM's
     * conflict (0 rows), and fence stamps its own column. */
#define SAVE "UPDATE posts SET title = 'saved', lock_version = lock_version + 1 " \
             "WHERE id = 2 AND lock_version = %d"
    char sql[200];
    for (int v = 34; v <= 35; v++) {
        snprintf(sql, sizeof sql, SAVE, v);
        su_tok_exec_ok(db, 40, sql);
        ck_assert_int_eq(sqlite3_changes(db), 1);
    }
    snprintf(sql, sizeof sql, SAVE, 35);
    su_tok_exec_ok(db, 40, sql);
    ck_assert_int_eq(sqlite3_changes(db), 0);
    ck_assert_str_eq(su_q_text(db, "SELECT lock_version || ':' || fence_token FROM posts "
                                   "WHERE id = 2"),
                     "36:40");
    su_tok_exec_ok(db, 41, "INSERT INTO posts(id, title) VALUES (4, 'new')");
    ck_assert_str_eq(su_q_text(db, "SELECT lock_version || ':' || fence_token FROM posts "
                                   "WHERE id = 4"),
                     "0:41");
    /* Again: nothing left to move, nothing changes. */
    ck_assert_int_eq(fence_sqlite_migrate_version_column(db, "posts", NULL), FENCE_OK);
    ck_assert_int_eq(fence_sqlite_migrate_version_column(db, "posts", "fence_token"), FENCE_OK);
    ck_assert_str_eq(ROWS(db, "posts", "fence_token"), "30 40 0 41");
    ck_assert_int_eq(fence_sqlite_protect(db, "posts", NULL), FENCE_OK);

    /* From SQL, naming the column; the permissive table stays permissive. */
    su_exec_ok(db, "SELECT fence_migrate_version_column('drafts', 'lock_version')");
    ck_assert_str_eq(ROWS(db, "drafts", "fence_token"), "0 20");
    su_set_tok(db, 0);
    su_exec_ok(db, "UPDATE drafts SET body = 'legacy' WHERE id = 2");
    ck_assert_str_eq(ROWS(db, "drafts", "body || ':' || fence_token"), "a:0 legacy:20");
    su_expect_stale(db, "UPDATE drafts SET body = 'x' WHERE id = 2", 19, 20, FENCE_OBJECT_TABLE,
                    "drafts");
    sqlite3_close(db);
}
END_TEST

START_TEST(migrate_refusals_change_nothing)
{
    sqlite3 *db = old_retrofit();
    const char *triggers = "SELECT group_concat(name || length(sql), ',') FROM "
                           "(SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
                           "AND tbl_name = 'posts' ORDER BY name)";
    char before[512];
    snprintf(before, sizeof before, "%s", su_q_text(db, triggers));

    expect_einval(db, fence_sqlite_migrate_version_column(db, "posts", "title"),
                  "stamp column \"lock_version\", not \"title\"");
    expect_einval(db, fence_sqlite_migrate_version_column(db, "nope", NULL), "no table");
    ck_assert_int_eq(fence_sqlite_migrate_version_column(db, NULL, NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_migrate_version_column(db, "posts", ""), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_migrate_version_column(NULL, "posts", NULL), FENCE_EINVAL);
    ck_assert_int_ne(su_exec_rc(db, "SELECT fence_migrate_version_column(NULL)"), SQLITE_OK);
    ck_assert_int_ne(su_exec_rc(db, "SELECT fence_migrate_version_column('posts', 42)"),
                     SQLITE_OK);

    /* A failure half-way (fence_token there, but TEXT) rolls it all back:
     * the old triggers and stamps are still in place and enforcing. */
    su_exec_ok(db, "ALTER TABLE posts ADD COLUMN fence_token TEXT");
    expect_einval(db, fence_sqlite_migrate_version_column(db, "posts", NULL), "INTEGER affinity");
    ck_assert_str_eq(su_q_text(db, triggers), before);
    su_expect_stale(db, "UPDATE posts SET title = 'x' WHERE id = 1", 29, 30, FENCE_OBJECT_TABLE,
                    "posts");
    su_exec_ok(db, "ALTER TABLE posts DROP COLUMN fence_token");

    /* Inside the caller's transaction: rolled back with it. */
    su_exec_ok(db, "BEGIN");
    ck_assert_int_eq(fence_sqlite_migrate_version_column(db, "posts", NULL), FENCE_OK);
    su_exec_ok(db, "ROLLBACK");
    ck_assert_str_eq(su_q_text(db, triggers), before);
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM pragma_table_info('posts')"), 3);

    /* An unprotected table: only with the column named. */
    ck_assert_int_eq(fence_sqlite_unprotect(db, "posts"), FENCE_OK);
    expect_einval(db, fence_sqlite_migrate_version_column(db, "posts", NULL), "is not protected");
    ck_assert_int_eq(fence_sqlite_migrate_version_column(db, "posts", "lock_version"), FENCE_OK);
    ck_assert_str_eq(ROWS(db, "posts", "fence_token"), "30 34 0");
    su_expect_stale(db, "UPDATE posts SET title = 'x' WHERE id = 2", 33, 34, FENCE_OBJECT_TABLE,
                    "posts");
    expect_einval(db, fence_sqlite_migrate_version_column(db, "drafts", "fence_token"),
                  "stamp column \"lock_version\", not \"fence_token\"");
    su_exec_ok(db, "CREATE TABLE bare(id INTEGER PRIMARY KEY)");
    expect_einval(db, fence_sqlite_migrate_version_column(db, "bare", "lock_version"),
                  "has no column");
    sqlite3_close(db);
}
END_TEST

static Suite *column_suite(void)
{
    Suite *s = suite_create("sqlite_column");
    TCase *tc = tcase_create("column");
    tcase_add_checked_fixture(tc, su_setup, su_teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, own_column_rule);
    tcase_add_test(tc, migrate_old_retrofit);
    tcase_add_test(tc, migrate_refusals_change_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(column_suite());
}
