/* test_sqlite.c -- storage-side fencing for SQLite, against real database
 * files in a mkdtemp() folder (removed after each test). */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fence_sqlite.h"
#include "fence_sqlite.h"
#include "testutil.h"

static char g_dir[PATH_MAX];

static void setup(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/fence-sqlite-XXXXXX", base && *base ? base : "/tmp");
    ck_assert_msg(mkdtemp(g_dir) != NULL, "mkdtemp: %s", strerror(errno));
}

static void teardown(void)
{
    DIR *d = opendir(g_dir);
    if (d == NULL) {
        return;
    }
    struct dirent *e;
    char path[PATH_MAX + 256];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            snprintf(path, sizeof path, "%s/%s", g_dir, e->d_name);
            unlink(path);
        }
    }
    closedir(d);
    rmdir(g_dir);
}

static sqlite3 *open_plain(const char *file)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", g_dir, file);
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    ck_assert_msg(rc == SQLITE_OK, "open %s: %s", path, db ? sqlite3_errmsg(db) : "nomem");
    sqlite3_busy_timeout(db, 5000);
    ck_assert_int_eq(sqlite3_exec(db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL), SQLITE_OK);
    return db;
}

static sqlite3 *open_fenced(const char *file)
{
    sqlite3 *db = open_plain(file);
    int rc = fence_sqlite_attach(db);
    ck_assert_msg(rc == FENCE_OK, "attach: %s", fence_sqlite_errmsg());
    return db;
}

static void exec_ok(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
    ck_assert_msg(rc == SQLITE_OK, "'%s' failed: %s", sql, err ? err : "?");
}

static int exec_rc(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

static int64_t q_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "prepare '%s': %s",
                  sql, sqlite3_errmsg(db));
    ck_assert_msg(sqlite3_step(st) == SQLITE_ROW, "'%s' gave no row: %s", sql,
                  sqlite3_errmsg(db));
    int64_t v = sqlite3_column_type(st, 0) == SQLITE_NULL ? INT64_MIN
                                                           : sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static const char *q_text(sqlite3 *db, const char *sql)
{
    static char buf[512];
    sqlite3_stmt *st = NULL;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "prepare '%s': %s",
                  sql, sqlite3_errmsg(db));
    ck_assert_msg(sqlite3_step(st) == SQLITE_ROW, "'%s' gave no row", sql);
    const unsigned char *t = sqlite3_column_text(st, 0);
    snprintf(buf, sizeof buf, "%s", t ? (const char *)t : "(null)");
    sqlite3_finalize(st);
    return buf;
}

static void set_tok(sqlite3 *db, uint64_t t)
{
    ck_assert_int_eq(fence_sqlite_set_token(db, t), FENCE_OK);
}

/* The statement must be refused as stale, with both tokens. */
static void expect_stale(sqlite3 *db, const char *sql, int64_t offered, int64_t highest,
                         const char *kind, const char *name)
{
    int rc = exec_rc(db, sql);
    ck_assert_msg(rc == SQLITE_CONSTRAINT, "'%s' should be refused as stale, got %d (%s)", sql,
                  rc, sqlite3_errmsg(db));
    ck_assert_int_eq(sqlite3_extended_errcode(db), SQLITE_CONSTRAINT_TRIGGER);
    ck_assert_msg(strncmp(sqlite3_errmsg(db), "fence:stale ", 12) == 0, "message: %s",
                  sqlite3_errmsg(db));
    fence_sqlite_error e;
    ck_assert_int_eq(fence_sqlite_classify(db, &e), FENCE_STALE);
    ck_assert_int_eq(e.status, FENCE_STALE);
    ck_assert_int_eq(e.sqlite_code, SQLITE_CONSTRAINT_TRIGGER);
    ck_assert_int_eq(e.offered, offered);
    ck_assert_int_eq(e.highest, highest);
    ck_assert_str_eq(e.kind, kind);
    ck_assert_str_eq(e.name, name);
}

static void expect_notoken(sqlite3 *db, const char *sql)
{
    int rc = exec_rc(db, sql);
    ck_assert_msg(rc != SQLITE_OK, "'%s' should be refused without a token", sql);
    ck_assert_msg(strncmp(sqlite3_errmsg(db), "fence:notoken ", 14) == 0, "message: %s",
                  sqlite3_errmsg(db));
    ck_assert_int_eq(fence_sqlite_classify(db, NULL), FENCE_ENOTOKEN);
}

/* A table t(id, v, email UNIQUE) protected with the default column, with
 * row 1 written by token 34. */
static sqlite3 *table_at_34(void)
{
    sqlite3 *db = open_fenced("t.db");
    exec_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, email TEXT UNIQUE)");
    exec_ok(db, "INSERT INTO t(id, v, email) VALUES (1, 'old', 'a@x'), (2, 'old', 'b@x')");
    ck_assert_int_eq(fence_sqlite_protect(db, "t", NULL), FENCE_OK);
    set_tok(db, 34);
    exec_ok(db, "UPDATE t SET v = 'by34' WHERE id = 1");
    return db;
}

/* ------------------------------------------------------------------ */

START_TEST(stale_update_delete_insert)
{
    sqlite3 *db = table_at_34();
    ck_assert_int_eq(q_int(db, "SELECT fence_token FROM t WHERE id = 1"), 34);
    set_tok(db, 33);
    expect_stale(db, "UPDATE t SET v = 'by33' WHERE id = 1", 33, 34, "table", "t");
    expect_stale(db, "DELETE FROM t WHERE id = 1", 33, 34, "table", "t");
    expect_stale(db, "INSERT OR REPLACE INTO t(id, v) VALUES (1, 'by33')", 33, 34, "table", "t");
    expect_stale(db, "REPLACE INTO t(id, v, email) VALUES (7, 'by33', 'a@x')", 33, 34, "table",
                 "t");
    expect_stale(db, "INSERT INTO t(id, v) VALUES (1, 'by33') "
                     "ON CONFLICT(id) DO UPDATE SET v = excluded.v",
                 33, 34, "table", "t");
    /* Moving another row onto row 1's key with UPDATE OR REPLACE. */
    expect_stale(db, "UPDATE OR REPLACE t SET id = 1 WHERE id = 2", 33, 34, "table", "t");
    ck_assert_str_eq(q_text(db, "SELECT v FROM t WHERE id = 1"), "by34");
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 2);

    /* Through a prepared statement: classify right after the failed step. */
    sqlite3_stmt *st = NULL;
    ck_assert_int_eq(sqlite3_prepare_v2(db, "UPDATE t SET v = ?1 WHERE id = 1", -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(st, 1, "again", -1, SQLITE_STATIC);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_CONSTRAINT);
    fence_sqlite_error e;
    ck_assert_int_eq(fence_sqlite_classify(db, &e), FENCE_STALE);
    ck_assert_int_eq(e.offered, 33);
    ck_assert_int_eq(e.highest, 34);
    ck_assert_msg(strstr(e.message, "token 33 is older than 34") != NULL, "%s", e.message);
    sqlite3_finalize(st);
    sqlite3_close(db);
}
END_TEST

START_TEST(equal_and_higher_admitted_and_stamped)
{
    sqlite3 *db = table_at_34();
    exec_ok(db, "UPDATE t SET v = 'again34' WHERE id = 1"); /* equal */
    ck_assert_int_eq(q_int(db, "SELECT fence_token FROM t WHERE id = 1"), 34);
    set_tok(db, 40);
    exec_ok(db, "UPDATE t SET v = 'by40' WHERE id = 1");
    ck_assert_int_eq(q_int(db, "SELECT fence_token FROM t WHERE id = 1"), 40);
    exec_ok(db, "INSERT INTO t(id, v) VALUES (3, 'new40')");
    ck_assert_int_eq(q_int(db, "SELECT fence_token FROM t WHERE id = 3"), 40);
    /* An older token may still write rows no newer holder touched. */
    set_tok(db, 20);
    exec_ok(db, "UPDATE t SET v = 'by20' WHERE id = 2");
    ck_assert_int_eq(q_int(db, "SELECT fence_token FROM t WHERE id = 2"), 20);
    exec_ok(db, "INSERT INTO t(v) VALUES ('auto-id')");
    ck_assert_int_eq(q_int(db, "SELECT fence_token FROM t WHERE v = 'auto-id'"), 20);
    set_tok(db, 41);
    exec_ok(db, "INSERT OR REPLACE INTO t(id, v) VALUES (1, 'replaced41')");
    exec_ok(db, "INSERT INTO t(id, v) VALUES (1, 'upsert41') "
                "ON CONFLICT(id) DO UPDATE SET v = excluded.v");
    ck_assert_str_eq(q_text(db, "SELECT v || fence_token FROM t WHERE id = 1"), "upsert4141");
    exec_ok(db, "DELETE FROM t WHERE id = 1");
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t WHERE id = 1"), 0);
    sqlite3_close(db);
}
END_TEST

START_TEST(client_column_writes_cannot_bypass)
{
    sqlite3 *db = table_at_34();
    set_tok(db, 33);
    /* Claiming a high token in the write does not help... */
    expect_stale(db, "UPDATE t SET v = 'x', fence_token = 999 WHERE id = 1", 33, 34, "table",
                 "t");
    /* ...nor does lowering the column first. */
    expect_stale(db, "UPDATE t SET fence_token = 0 WHERE id = 1", 33, 34, "table", "t");
    set_tok(db, 35);
    exec_ok(db, "UPDATE t SET v = 'by35', fence_token = 1 WHERE id = 1");
    ck_assert_int_eq(q_int(db, "SELECT fence_token FROM t WHERE id = 1"), 35);
    exec_ok(db, "UPDATE t SET fence_token = 9999 WHERE id = 1");
    ck_assert_int_eq(q_int(db, "SELECT fence_token FROM t WHERE id = 1"), 35);
    set_tok(db, 34);
    expect_stale(db, "UPDATE t SET v = 'by34' WHERE id = 1", 34, 35, "table", "t");
    /* An INSERT may not plant a token above its own. */
    set_tok(db, 35);
    ck_assert_int_eq(exec_rc(db, "INSERT INTO t(id, v, fence_token) VALUES (9, 'x', 500)"),
                     SQLITE_CONSTRAINT);
    ck_assert_msg(strncmp(sqlite3_errmsg(db), "fence:forbidden ", 16) == 0, "%s",
                  sqlite3_errmsg(db));
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t WHERE id = 9"), 0);
    exec_ok(db, "INSERT INTO t(id, v, fence_token) VALUES (9, 'x', 2)");
    ck_assert_int_eq(q_int(db, "SELECT fence_token FROM t WHERE id = 9"), 35);

    /* With recursive triggers on, still no bypass (a column written above
     * the token is refused rather than overwritten). */
    exec_ok(db, "PRAGMA recursive_triggers = ON");
    exec_ok(db, "UPDATE t SET v = 'rec', fence_token = 3 WHERE id = 1");
    ck_assert_int_eq(q_int(db, "SELECT fence_token FROM t WHERE id = 1"), 35);
    ck_assert_int_ne(exec_rc(db, "UPDATE t SET fence_token = 9999 WHERE id = 1"), SQLITE_OK);
    ck_assert_int_eq(q_int(db, "SELECT fence_token FROM t WHERE id = 1"), 35);
    set_tok(db, 34);
    expect_stale(db, "UPDATE t SET v = 'by34' WHERE id = 1", 34, 35, "table", "t");
    sqlite3_close(db);
}
END_TEST

START_TEST(missing_and_malformed_tokens)
{
    sqlite3 *db = table_at_34();
    /* No token at all. */
    set_tok(db, 0);
    expect_notoken(db, "UPDATE t SET v = 'x' WHERE id = 1");
    expect_notoken(db, "DELETE FROM t WHERE id = 1");
    expect_notoken(db, "INSERT INTO t(v) VALUES ('x')");
    ck_assert_int_eq(q_int(db, "SELECT fence_token() IS NULL"), 1);

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
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        set_tok(db, 50);
        int rc = exec_rc(db, bad[i]);
        ck_assert_msg(rc == SQLITE_ERROR, "%s: rc %d", bad[i], rc);
        ck_assert_msg(strncmp(sqlite3_errmsg(db), "fence:notoken fence_set_token: ", 31) == 0,
                      "%s: %s", bad[i], sqlite3_errmsg(db));
        ck_assert_int_eq(fence_sqlite_classify(db, NULL), FENCE_ENOTOKEN);
        uint64_t t = 99;
        ck_assert_int_eq(fence_sqlite_token(db, &t), FENCE_OK);
        ck_assert_msg(t == 0, "%s left the token at %llu", bad[i], (unsigned long long)t);
        expect_notoken(db, "UPDATE t SET v = 'x' WHERE id = 1");
    }
    /* Zero and NULL clear; a decimal string and the largest value work. */
    exec_ok(db, "SELECT fence_set_token(0)");
    expect_notoken(db, "UPDATE t SET v = 'x' WHERE id = 1");
    ck_assert_int_eq(q_int(db, "SELECT fence_set_token('35')"), 35);
    exec_ok(db, "UPDATE t SET v = 'by35' WHERE id = 1");
    ck_assert_int_eq(q_int(db, "SELECT fence_set_token(NULL) IS NULL"), 1);
    expect_notoken(db, "UPDATE t SET v = 'x' WHERE id = 1");
    ck_assert_int_eq(q_int(db, "SELECT fence_set_token(9223372036854775807)"), INT64_MAX);
    exec_ok(db, "UPDATE t SET v = 'max' WHERE id = 1");
    ck_assert_int_eq(q_int(db, "SELECT fence_token FROM t WHERE id = 1"), INT64_MAX);

    /* From C: above 2^63-1 is refused and clears the token. */
    ck_assert_int_eq(fence_sqlite_set_token(db, (uint64_t)INT64_MAX + 1), FENCE_EINVAL);
    ck_assert_msg(strstr(fence_sqlite_errmsg(), "2^63-1") != NULL, "%s", fence_sqlite_errmsg());
    expect_notoken(db, "UPDATE t SET v = 'x' WHERE id = 1");
    ck_assert_int_eq(fence_sqlite_set_token(db, UINT64_MAX), FENCE_EINVAL);
    ck_assert_int_eq(q_int(db, "SELECT fence_token() IS NULL"), 1);
    ck_assert_str_eq(q_text(db, "SELECT v FROM t WHERE id = 1"), "max");
    sqlite3_close(db);
}
END_TEST

START_TEST(permissive_mode)
{
    sqlite3 *db = open_fenced("p.db");
    exec_ok(db, "CREATE TABLE p(id INTEGER PRIMARY KEY, v TEXT)");
    exec_ok(db, "INSERT INTO p VALUES (1, 'a')");
    fence_sqlite_protect_options o;
    fence_sqlite_protect_options_init(&o);
    o.permissive = 1;
    ck_assert_int_eq(fence_sqlite_protect(db, "p", &o), FENCE_OK);
    /* No token: admitted, not stamped. */
    exec_ok(db, "UPDATE p SET v = 'untokened' WHERE id = 1");
    exec_ok(db, "INSERT INTO p(id, v) VALUES (2, 'b')");
    ck_assert_int_eq(q_int(db, "SELECT max(fence_token) FROM p"), 0);
    /* With a token: checked and stamped as usual. */
    set_tok(db, 10);
    exec_ok(db, "UPDATE p SET v = 'by10' WHERE id = 1");
    ck_assert_int_eq(q_int(db, "SELECT fence_token FROM p WHERE id = 1"), 10);
    set_tok(db, 9);
    expect_stale(db, "UPDATE p SET v = 'by9' WHERE id = 1", 9, 10, "table", "p");
    /* Strict again: protecting anew replaces the triggers. */
    ck_assert_int_eq(fence_sqlite_protect(db, "p", NULL), FENCE_OK);
    set_tok(db, 0);
    expect_notoken(db, "UPDATE p SET v = 'x' WHERE id = 2");
    /* From SQL, the third argument. */
    exec_ok(db, "SELECT fence_protect('p', NULL, 1)");
    exec_ok(db, "UPDATE p SET v = 'x' WHERE id = 2");
    ck_assert_int_ne(exec_rc(db, "SELECT fence_protect('p', NULL, 2)"), SQLITE_OK);
    sqlite3_close(db);
}
END_TEST

START_TEST(retrofit_rails_lock_version)
{
    sqlite3 *db = open_fenced("rails.db");
    exec_ok(db, "CREATE TABLE posts(id INTEGER PRIMARY KEY, title TEXT, lock_version INTEGER)");
    exec_ok(db, "INSERT INTO posts VALUES (1, 'null', NULL), (2, 'three', 3), (3, 'seven', 7)");
    fence_sqlite_protect_options o;
    fence_sqlite_protect_options_init(&o);
    o.column = "lock_version";
    ck_assert_int_eq(fence_sqlite_protect(db, "posts", &o), FENCE_OK);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM pragma_table_info('posts')"), 3);
    ck_assert_int_eq(q_int(db, "SELECT lock_version FROM posts WHERE id = 1"), 0);
    set_tok(db, 5);
    exec_ok(db, "UPDATE posts SET title = 'n5' WHERE id = 1");
    /* Rails writes lock_version = lock_version + 1 itself: stamped over. */
    exec_ok(db, "UPDATE posts SET title = 't5', lock_version = lock_version + 1 "
                "WHERE id = 2 AND lock_version = 3");
    expect_stale(db, "UPDATE posts SET title = 's5' WHERE id = 3", 5, 7, "table", "posts");
    ck_assert_str_eq(q_text(db, "SELECT group_concat(lock_version, ',') FROM "
                                "(SELECT lock_version FROM posts ORDER BY id)"),
                     "5,5,7");
    /* Retrofitting the default column on a table that lacks it adds it. */
    exec_ok(db, "CREATE TABLE legacy(id INTEGER PRIMARY KEY, v)");
    exec_ok(db, "INSERT INTO legacy VALUES (1, 'x')");
    ck_assert_int_eq(fence_sqlite_protect(db, "legacy", NULL), FENCE_OK);
    ck_assert_str_eq(q_text(db, "SELECT type || ' ' || \"notnull\" || ' ' || dflt_value FROM "
                                "pragma_table_info('legacy') WHERE name = 'fence_token'"),
                     "INTEGER 1 0");
    ck_assert_int_eq(q_int(db, "SELECT fence_token FROM legacy"), 0);
    /* A named column must exist and be an integer column. */
    o.column = "nope";
    ck_assert_int_eq(fence_sqlite_protect(db, "posts", &o), FENCE_EINVAL);
    o.column = "title";
    ck_assert_int_eq(fence_sqlite_protect(db, "posts", &o), FENCE_EINVAL);
    ck_assert_msg(strstr(fence_sqlite_errmsg(), "INTEGER") != NULL, "%s",
                  fence_sqlite_errmsg());
    /* The failed calls changed nothing: posts is still fenced on lock_version. */
    set_tok(db, 6);
    expect_stale(db, "UPDATE posts SET title = 's6' WHERE id = 3", 6, 7, "table", "posts");
    /* From SQL with a named column. */
    exec_ok(db, "CREATE TABLE people(id INTEGER PRIMARY KEY, name TEXT, lock_version INTEGER)");
    exec_ok(db, "INSERT INTO people VALUES (1, 'a', NULL)");
    exec_ok(db, "SELECT fence_protect('people', 'lock_version')");
    exec_ok(db, "UPDATE people SET name = 'b'");
    ck_assert_int_eq(q_int(db, "SELECT lock_version FROM people"), 6);
    sqlite3_close(db);
}
END_TEST

START_TEST(per_resource_advance)
{
    sqlite3 *db = open_fenced("r.db");
    exec_ok(db, "CREATE TABLE orders(id INTEGER PRIMARY KEY, v TEXT)");
    set_tok(db, 34);
    ck_assert_int_eq(fence_sqlite_advance(db, "orders"), FENCE_OK);
    ck_assert_int_eq(q_int(db, "SELECT high_water FROM fence_resource WHERE name = 'orders'"),
                     34);
    ck_assert_int_eq(fence_sqlite_advance(db, "orders"), FENCE_OK); /* equal */
    set_tok(db, 33);
    ck_assert_int_eq(fence_sqlite_advance(db, "orders"), FENCE_STALE);
    ck_assert_msg(strstr(fence_sqlite_errmsg(), "token 33 is older than 34") != NULL, "%s",
                  fence_sqlite_errmsg());
    fence_sqlite_error e;
    ck_assert_int_eq(fence_sqlite_classify(db, &e), FENCE_STALE);
    ck_assert_str_eq(e.kind, "resource");
    ck_assert_str_eq(e.name, "orders");
    ck_assert_int_eq(e.offered, 33);
    ck_assert_int_eq(e.highest, 34);
    expect_stale(db, "INSERT INTO fence_advance(resource) VALUES ('orders')", 33, 34, "resource",
                 "orders");

    /* Inside the caller's transaction: the stale advance aborts the work. */
    exec_ok(db, "BEGIN IMMEDIATE");
    exec_ok(db, "INSERT INTO orders(v) VALUES ('by33')"); /* unprotected table */
    ck_assert_int_eq(fence_sqlite_advance(db, "orders"), FENCE_STALE);
    exec_ok(db, "ROLLBACK");
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM orders"), 0);

    set_tok(db, 40);
    exec_ok(db, "BEGIN IMMEDIATE");
    exec_ok(db, "INSERT INTO fence_advance(resource) VALUES ('orders')");
    exec_ok(db, "INSERT INTO orders(v) VALUES ('by40')");
    exec_ok(db, "COMMIT");
    ck_assert_int_eq(q_int(db, "SELECT high_water FROM fence_resource WHERE name = 'orders'"),
                     40);
    /* Rolled back with the transaction too. */
    set_tok(db, 50);
    exec_ok(db, "BEGIN IMMEDIATE");
    ck_assert_int_eq(fence_sqlite_advance(db, "orders"), FENCE_OK);
    exec_ok(db, "ROLLBACK");
    ck_assert_int_eq(q_int(db, "SELECT high_water FROM fence_resource WHERE name = 'orders'"),
                     40);

    /* Marks are never lowered, renamed, deleted, or planted above one's token. */
    set_tok(db, 45);
    ck_assert_int_ne(exec_rc(db, "UPDATE fence_resource SET high_water = 1"), SQLITE_OK);
    ck_assert_int_ne(exec_rc(db, "UPDATE fence_resource SET name = 'other'"), SQLITE_OK);
    ck_assert_int_ne(exec_rc(db, "DELETE FROM fence_resource"), SQLITE_OK);
    ck_assert_msg(strncmp(sqlite3_errmsg(db), "fence:forbidden ", 16) == 0, "%s",
                  sqlite3_errmsg(db));
    ck_assert_int_ne(exec_rc(db, "INSERT OR REPLACE INTO fence_resource VALUES ('orders', 1)"),
                     SQLITE_OK);
    ck_assert_int_ne(exec_rc(db, "INSERT INTO fence_resource VALUES ('new', 1000)"), SQLITE_OK);
    set_tok(db, 39);
    expect_stale(db, "INSERT OR REPLACE INTO fence_resource VALUES ('orders', 39)", 39, 40,
                 "resource", "orders");
    ck_assert_int_eq(q_int(db, "SELECT high_water FROM fence_resource WHERE name = 'orders'"),
                     40);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM fence_resource"), 1);
    /* No token. */
    set_tok(db, 0);
    ck_assert_int_eq(fence_sqlite_advance(db, "orders"), FENCE_ENOTOKEN);
    expect_notoken(db, "INSERT INTO fence_advance VALUES ('orders')");
    sqlite3_close(db);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Two connections on one file                                           */
/* ------------------------------------------------------------------ */

typedef struct writer {
    uint64_t token;
    int hold_ms;          /* keep the write transaction open this long */
    int busy_timeout_ms;
    int begin_rc, update_rc, end_rc;
    int64_t begin_waited_ms;
    int fence_status;
} writer;

/* BEGIN IMMEDIATE; UPDATE row 1; (hold); COMMIT or, if refused, ROLLBACK. */
static void writer_run(writer *w)
{
    sqlite3 *db = open_fenced("race.db");
    sqlite3_busy_timeout(db, w->busy_timeout_ms);
    set_tok(db, w->token);
    char sql[128];
    snprintf(sql, sizeof sql, "UPDATE t SET v = 'by%llu' WHERE id = 1",
             (unsigned long long)w->token);
    int64_t t0 = tu_now_ms();
    w->begin_rc = exec_rc(db, "BEGIN IMMEDIATE");
    w->begin_waited_ms = tu_now_ms() - t0;
    if (w->begin_rc != SQLITE_OK) {
        sqlite3_close(db);
        return;
    }
    w->update_rc = exec_rc(db, sql);
    w->fence_status = fence_sqlite_classify(db, NULL);
    if (w->hold_ms > 0) {
        tu_sleep_ms(w->hold_ms);
    }
    w->end_rc = exec_rc(db, w->update_rc == SQLITE_OK ? "COMMIT" : "ROLLBACK");
    sqlite3_close(db);
}

static void *writer_thread(void *arg)
{
    writer_run(arg);
    return NULL;
}

static sqlite3 *race_setup(void)
{
    sqlite3 *db = open_fenced("race.db");
    exec_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)");
    exec_ok(db, "INSERT INTO t VALUES (1, 'initial')");
    ck_assert_int_eq(fence_sqlite_protect(db, "t", NULL), FENCE_OK);
    return db;
}

static void race_assert_34(sqlite3 *db)
{
    ck_assert_str_eq(q_text(db, "SELECT v || ' ' || fence_token FROM t WHERE id = 1"),
                     "by34 34");
}

/* Holder A (a_tok) takes the write lock and keeps it; B (b_tok) starts
 * while A holds it and waits on busy_timeout. */
static void race_hold(uint64_t a_tok, uint64_t b_tok, writer *a, writer *b)
{
    *a = (writer){.token = a_tok, .hold_ms = 300, .busy_timeout_ms = 5000};
    *b = (writer){.token = b_tok, .busy_timeout_ms = 5000};
    pthread_t ta, tb;
    ck_assert_int_eq(pthread_create(&ta, NULL, writer_thread, a), 0);
    tu_sleep_ms(100); /* A is inside its transaction now */
    ck_assert_int_eq(pthread_create(&tb, NULL, writer_thread, b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    ck_assert_int_eq(a->begin_rc, SQLITE_OK);
    ck_assert_int_eq(b->begin_rc, SQLITE_OK);
    ck_assert_msg(b->begin_waited_ms >= 50, "B did not wait for A (%lld ms)",
                  (long long)b->begin_waited_ms);
}

START_TEST(two_connections_every_order)
{
    sqlite3 *db = race_setup();
    writer a, b;

    /* 33 first, then 34 (sequential autocommit). */
    a = (writer){.token = 33, .busy_timeout_ms = 5000};
    writer_run(&a);
    ck_assert_int_eq(a.update_rc, SQLITE_OK);
    b = (writer){.token = 34, .busy_timeout_ms = 5000};
    writer_run(&b);
    ck_assert_int_eq(b.update_rc, SQLITE_OK);
    race_assert_34(db);
    /* 33 again after 34: refused. */
    a = (writer){.token = 33, .busy_timeout_ms = 5000};
    writer_run(&a);
    ck_assert_int_eq(a.update_rc, SQLITE_CONSTRAINT);
    ck_assert_int_eq(a.fence_status, FENCE_STALE);
    race_assert_34(db);

    /* 33 begins and holds; 34 waits on busy_timeout, then wins. */
    sqlite3_close(db);
    teardown();
    setup();
    db = race_setup();
    race_hold(33, 34, &a, &b);
    ck_assert_int_eq(a.update_rc, SQLITE_OK);
    ck_assert_int_eq(b.update_rc, SQLITE_OK);
    race_assert_34(db);

    /* 34 begins and holds; 33 waits, then is refused. */
    sqlite3_close(db);
    teardown();
    setup();
    db = race_setup();
    race_hold(34, 33, &a, &b);
    ck_assert_int_eq(a.update_rc, SQLITE_OK);
    ck_assert_int_eq(b.update_rc, SQLITE_CONSTRAINT);
    ck_assert_int_eq(b.fence_status, FENCE_STALE);
    race_assert_34(db);

    /* 33 begins a DEFERRED transaction and reads; 34 commits meanwhile;
     * 33's write then cannot commit a stale row (BUSY_SNAPSHOT in WAL). */
    sqlite3_close(db);
    teardown();
    setup();
    db = race_setup();
    sqlite3 *c33 = open_fenced("race.db");
    set_tok(c33, 33);
    exec_ok(c33, "BEGIN DEFERRED");
    ck_assert_str_eq(q_text(c33, "SELECT v FROM t WHERE id = 1"), "initial");
    b = (writer){.token = 34, .busy_timeout_ms = 5000};
    writer_run(&b);
    ck_assert_int_eq(b.update_rc, SQLITE_OK);
    int rc = exec_rc(c33, "UPDATE t SET v = 'by33' WHERE id = 1");
    ck_assert_msg(rc != SQLITE_OK, "stale deferred write went through");
    exec_ok(c33, "ROLLBACK");
    /* Retrying in a fresh transaction sees 34's row and is refused as stale. */
    exec_ok(c33, "BEGIN IMMEDIATE");
    expect_stale(c33, "UPDATE t SET v = 'by33' WHERE id = 1", 33, 34, "table", "t");
    exec_ok(c33, "ROLLBACK");
    race_assert_34(db);

    /* 34 holds; 33 has no patience (busy_timeout 0): SQLITE_BUSY, then
     * after 34 commits, 33 retries and is refused. */
    sqlite3_close(c33);
    sqlite3_close(db);
    teardown();
    setup();
    db = race_setup();
    sqlite3 *c34 = open_fenced("race.db");
    set_tok(c34, 34);
    exec_ok(c34, "BEGIN IMMEDIATE");
    exec_ok(c34, "UPDATE t SET v = 'by34' WHERE id = 1");
    a = (writer){.token = 33, .busy_timeout_ms = 0};
    writer_run(&a);
    ck_assert_int_eq(a.begin_rc, SQLITE_BUSY);
    exec_ok(c34, "COMMIT");
    writer_run(&a);
    ck_assert_int_eq(a.update_rc, SQLITE_CONSTRAINT);
    race_assert_34(db);

    /* 33 holds and rolls back its own work; 34 then writes. */
    exec_ok(c34, "UPDATE t SET v = 'by34' WHERE id = 1");
    race_assert_34(db);
    sqlite3_close(c34);
    sqlite3_close(db);
}
END_TEST

START_TEST(two_connections_resource)
{
    sqlite3 *db = open_fenced("res.db");
    exec_ok(db, "CREATE TABLE log(v TEXT)");
    sqlite3 *c33 = open_fenced("res.db"), *c34 = open_fenced("res.db");
    set_tok(c33, 33);
    set_tok(c34, 34);
    /* 33 advances and writes; 34 advances and writes; 33 comes back. */
    exec_ok(c33, "BEGIN IMMEDIATE; INSERT INTO fence_advance VALUES ('job');"
                 "INSERT INTO log VALUES ('33a'); COMMIT");
    exec_ok(c34, "BEGIN IMMEDIATE; INSERT INTO fence_advance VALUES ('job');"
                 "INSERT INTO log VALUES ('34a'); COMMIT");
    exec_ok(c33, "BEGIN IMMEDIATE");
    ck_assert_int_eq(fence_sqlite_advance(c33, "job"), FENCE_STALE);
    exec_ok(c33, "ROLLBACK");
    ck_assert_str_eq(q_text(db, "SELECT group_concat(v, ',') FROM log"), "33a,34a");
    ck_assert_int_eq(q_int(db, "SELECT high_water FROM fence_resource"), 34);
    sqlite3_close(c33);
    sqlite3_close(c34);
    sqlite3_close(db);
}
END_TEST

/* ------------------------------------------------------------------ */

START_TEST(injection_in_names)
{
    sqlite3 *db = open_fenced("inj.db");
    exec_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v)");
    exec_ok(db, "INSERT INTO t VALUES (1, 'survivor')");
    const char *evil = "x\"; DROP TABLE t; --";
    exec_ok(db, "CREATE TABLE \"x\"\"; DROP TABLE t; --\"(id INTEGER PRIMARY KEY, v, "
                "\"c'); DROP TABLE t; --\" INTEGER)");
    exec_ok(db, "INSERT INTO \"x\"\"; DROP TABLE t; --\"(id, v) VALUES (1, 'a')");
    ck_assert_int_eq(fence_sqlite_protect(db, evil, NULL), FENCE_OK);
    set_tok(db, 34);
    exec_ok(db, "UPDATE \"x\"\"; DROP TABLE t; --\" SET v = 'b'");
    set_tok(db, 33);
    expect_stale(db, "UPDATE \"x\"\"; DROP TABLE t; --\" SET v = 'c'", 33, 34, "table", evil);
    /* A weird column name as the token column, and a quote in the table name. */
    fence_sqlite_protect_options o;
    fence_sqlite_protect_options_init(&o);
    o.column = "c'); DROP TABLE t; --";
    ck_assert_int_eq(fence_sqlite_protect(db, evil, &o), FENCE_OK);
    exec_ok(db, "CREATE TABLE \"it's\"(id INTEGER PRIMARY KEY, v)");
    exec_ok(db, "INSERT INTO \"it's\" VALUES (1, 'a')");
    exec_ok(db, "SELECT fence_protect('it''s')");
    set_tok(db, 40);
    exec_ok(db, "UPDATE \"it's\" SET v = 'b'");
    set_tok(db, 39);
    expect_stale(db, "UPDATE \"it's\" SET v = 'c'", 39, 40, "table", "it's");
    /* Resource names are bound, never spliced. */
    const char *evil_res = "r'); DELETE FROM fence_resource; DROP TABLE t; --";
    ck_assert_int_eq(fence_sqlite_advance(db, evil_res), FENCE_OK);
    set_tok(db, 38);
    ck_assert_int_eq(fence_sqlite_advance(db, evil_res), FENCE_STALE);
    fence_sqlite_error e;
    ck_assert_int_eq(fence_sqlite_classify(db, &e), FENCE_STALE);
    ck_assert_str_eq(e.name, evil_res);
    /* NUL inside a name given from SQL is refused. */
    ck_assert_int_ne(exec_rc(db, "SELECT fence_protect(CAST(x'7400' AS TEXT))"), SQLITE_OK);
    ck_assert_msg(strstr(sqlite3_errmsg(db), "NUL") != NULL, "%s", sqlite3_errmsg(db));
    ck_assert_int_ne(exec_rc(db, "SELECT fence_protect('t', CAST(x'7600' AS TEXT))"),
                     SQLITE_OK);
    /* Everything is still there. */
    ck_assert_str_eq(q_text(db, "SELECT v FROM t"), "survivor");
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM fence_resource"), 1);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM sqlite_schema WHERE type = 'table'"), 4);
    sqlite3_close(db);
}
END_TEST

START_TEST(trusted_schema_off_and_directonly)
{
    sqlite3 *db = table_at_34();
    exec_ok(db, "PRAGMA trusted_schema = OFF");
    set_tok(db, 35);
    exec_ok(db, "UPDATE t SET v = 'by35' WHERE id = 1");
    exec_ok(db, "INSERT INTO fence_advance VALUES ('r')");
    set_tok(db, 33);
    expect_stale(db, "UPDATE t SET v = 'by33' WHERE id = 1", 33, 35, "table", "t");
    expect_stale(db, "INSERT INTO fence_advance VALUES ('r')", 33, 35, "resource", "r");
    /* fence_set_token and fence_protect may not run from schema objects,
     * whatever trusted_schema says. */
    exec_ok(db, "PRAGMA trusted_schema = ON");
    exec_ok(db, "CREATE TABLE side(x)");
    exec_ok(db, "CREATE TRIGGER sneaky AFTER INSERT ON side BEGIN "
                "SELECT fence_set_token(1000000); END");
    ck_assert_int_ne(exec_rc(db, "INSERT INTO side VALUES (1)"), SQLITE_OK);
    ck_assert_msg(strstr(sqlite3_errmsg(db), "unsafe use of fence_set_token") != NULL, "%s",
                  sqlite3_errmsg(db));
    exec_ok(db, "CREATE VIEW sneaky_view AS SELECT fence_protect('side') AS x");
    ck_assert_int_ne(exec_rc(db, "SELECT * FROM sneaky_view"), SQLITE_OK);
    uint64_t t = 0;
    ck_assert_int_eq(fence_sqlite_token(db, &t), FENCE_OK);
    ck_assert_int_eq(t, 33);
    sqlite3_close(db);
}
END_TEST

START_TEST(connection_without_fence_fails_closed)
{
    sqlite3 *db = table_at_34();
    sqlite3 *plain = open_plain("t.db");
    ck_assert_int_eq(exec_rc(plain, "UPDATE t SET v = 'plain' WHERE id = 1"), SQLITE_ERROR);
    ck_assert_msg(strstr(sqlite3_errmsg(plain), "fence_token") != NULL, "%s",
                  sqlite3_errmsg(plain));
    ck_assert_int_eq(fence_sqlite_classify(plain, NULL), FENCE_EDB);
    ck_assert_int_ne(exec_rc(plain, "DELETE FROM t"), SQLITE_OK);
    ck_assert_int_ne(exec_rc(plain, "INSERT INTO t(v) VALUES ('plain')"), SQLITE_OK);
    ck_assert_int_ne(exec_rc(plain, "INSERT INTO fence_advance VALUES ('r')"), SQLITE_OK);
    ck_assert_int_eq(q_int(plain, "SELECT count(*) FROM t"), 2);
    ck_assert_str_eq(q_text(plain, "SELECT v FROM t WHERE id = 1"), "by34");
    /* The C API refuses a connection that never attached. */
    ck_assert_int_eq(fence_sqlite_set_token(plain, 5), FENCE_ESTATE);
    ck_assert_int_eq(fence_sqlite_protect(plain, "t", NULL), FENCE_ESTATE);
    /* Unprotected, anyone writes again; the column stays. */
    ck_assert_int_eq(fence_sqlite_unprotect(db, "t"), FENCE_OK);
    ck_assert_int_eq(fence_sqlite_unprotect(db, "t"), FENCE_OK);
    /* (A connection reloads a changed schema when a statement runs, but a
     * prepare that fails on its cached schema -- "no such function" -- is
     * not retried: read once so plain sees the triggers are gone.  The
     * other direction is safe: a write prepared before protect is
     * re-prepared with the triggers when it runs.) */
    ck_assert_int_eq(q_int(plain, "SELECT count(*) FROM t"), 2);
    exec_ok(plain, "UPDATE t SET v = 'plain' WHERE id = 1");
    ck_assert_int_eq(q_int(plain, "SELECT fence_token FROM t WHERE id = 1"), 34);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM sqlite_schema WHERE name LIKE 'fence\\_%\\_t' "
                               "ESCAPE '\\'"),
                     0);
    /* And protected again from SQL. */
    exec_ok(db, "SELECT fence_protect('t')");
    ck_assert_int_ne(exec_rc(plain, "UPDATE t SET v = 'plain2' WHERE id = 1"), SQLITE_OK);
    exec_ok(db, "SELECT fence_unprotect('t')");
    ck_assert_int_eq(q_int(plain, "SELECT count(*) FROM t"), 2);
    exec_ok(plain, "UPDATE t SET v = 'plain2' WHERE id = 1");
    /* A statement prepared before protect is re-prepared, with the
     * triggers, when it runs. */
    sqlite3_stmt *st = NULL;
    ck_assert_int_eq(sqlite3_prepare_v2(plain, "UPDATE t SET v = 'early' WHERE id = 1", -1, &st,
                                        NULL),
                     SQLITE_OK);
    exec_ok(db, "SELECT fence_protect('t')");
    ck_assert_int_ne(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    ck_assert_str_eq(q_text(db, "SELECT v FROM t WHERE id = 1"), "plain2");
    sqlite3_close(plain);
    sqlite3_close(db);
}
END_TEST

START_TEST(without_rowid_and_odd_tables)
{
    sqlite3 *db = open_fenced("w.db");
    exec_ok(db, "CREATE TABLE w(a TEXT, b INTEGER, v TEXT, PRIMARY KEY (a, b)) WITHOUT ROWID");
    exec_ok(db, "INSERT INTO w VALUES ('k', 1, 'x')");
    ck_assert_int_eq(fence_sqlite_protect(db, "W", NULL), FENCE_OK); /* any case */
    set_tok(db, 34);
    exec_ok(db, "UPDATE w SET v = 'by34'");
    exec_ok(db, "INSERT INTO w(a, b, v) VALUES ('k', 2, 'new')");
    ck_assert_int_eq(q_int(db, "SELECT sum(fence_token) FROM w"), 68);
    set_tok(db, 33);
    expect_stale(db, "UPDATE w SET v = 'by33' WHERE b = 1", 33, 34, "table", "w");
    expect_stale(db, "REPLACE INTO w VALUES ('k', 1, 'r33', 0)", 33, 34, "table", "w");
    /* A case-insensitive unique index is honoured. */
    exec_ok(db, "CREATE TABLE u(id INTEGER PRIMARY KEY, email TEXT)");
    exec_ok(db, "CREATE UNIQUE INDEX u_email ON u(email COLLATE NOCASE)");
    exec_ok(db, "SELECT fence_protect('u')");
    set_tok(db, 34);
    exec_ok(db, "INSERT INTO u(email) VALUES ('A@X')");
    set_tok(db, 33);
    expect_stale(db, "INSERT OR REPLACE INTO u(email) VALUES ('a@x')", 33, 34, "table", "u");
    /* Refused: expression unique index, views, internal and missing tables. */
    exec_ok(db, "CREATE TABLE e(id INTEGER PRIMARY KEY, s TEXT)");
    exec_ok(db, "CREATE UNIQUE INDEX e_lower ON e(lower(s))");
    ck_assert_int_eq(fence_sqlite_protect(db, "e", NULL), FENCE_EINVAL);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM pragma_table_info('e')"), 2);
    exec_ok(db, "CREATE VIEW vw AS SELECT 1");
    ck_assert_int_eq(fence_sqlite_protect(db, "vw", NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_protect(db, "fence_resource", NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_protect(db, "sqlite_schema", NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_protect(db, "missing", NULL), FENCE_EINVAL);
    ck_assert_msg(strstr(fence_sqlite_errmsg(), "missing") != NULL, "%s", fence_sqlite_errmsg());
    sqlite3_close(db);
}
END_TEST

START_TEST(bad_arguments)
{
    sqlite3 *db = open_fenced("bad.db");
    exec_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v)");
    char longname[FENCE_NAME_MAX + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    fence_sqlite_protect_options o;
    fence_sqlite_protect_options_init(NULL);

    ck_assert_int_eq(fence_sqlite_attach(NULL), FENCE_EINVAL);
    ck_assert_msg(fence_sqlite_errmsg()[0] != '\0', "no message");

    ck_assert_int_eq(fence_sqlite_protect(NULL, "t", NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_protect(db, NULL, NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_protect(db, "", NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_protect(db, longname, NULL), FENCE_EINVAL);
    fence_sqlite_protect_options_init(&o);
    o.column = "";
    ck_assert_int_eq(fence_sqlite_protect(db, "t", &o), FENCE_EINVAL);
    o.column = longname;
    ck_assert_int_eq(fence_sqlite_protect(db, "t", &o), FENCE_EINVAL);
    o.column = NULL;
    o.permissive = 2;
    ck_assert_int_eq(fence_sqlite_protect(db, "t", &o), FENCE_EINVAL);
    o.permissive = -1;
    ck_assert_int_eq(fence_sqlite_protect(db, "t", &o), FENCE_EINVAL);
    /* None of that touched t. */
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM pragma_table_info('t')"), 2);

    ck_assert_int_eq(fence_sqlite_unprotect(NULL, "t"), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_unprotect(db, NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_unprotect(db, ""), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_unprotect(db, longname), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_unprotect(db, "missing"), FENCE_EINVAL);

    ck_assert_int_eq(fence_sqlite_set_token(NULL, 1), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_set_token(db, (uint64_t)INT64_MAX + 1), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_set_token(db, UINT64_MAX), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_set_token(db, 0), FENCE_OK); /* clears */
    uint64_t t = 1;
    ck_assert_int_eq(fence_sqlite_token(NULL, &t), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_token(db, NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_token(db, &t), FENCE_OK);
    ck_assert_int_eq(t, 0);

    ck_assert_int_eq(fence_sqlite_advance(NULL, "r"), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_advance(db, NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_advance(db, ""), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_advance(db, longname), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_advance(db, "r"), FENCE_ENOTOKEN); /* token 0 */
    set_tok(db, 5);
    ck_assert_int_eq(fence_sqlite_advance(db, "r"), FENCE_OK);
    ck_assert_int_ne(exec_rc(db, "INSERT INTO fence_advance VALUES ('')"), SQLITE_OK);
    ck_assert_int_ne(exec_rc(db, "INSERT INTO fence_advance VALUES (NULL)"), SQLITE_OK);
    ck_assert_int_ne(exec_rc(db, "INSERT INTO fence_advance VALUES (42)"), SQLITE_OK);

    fence_sqlite_error e;
    ck_assert_int_eq(fence_sqlite_classify(NULL, &e), FENCE_EINVAL);
    exec_ok(db, "SELECT 1");
    ck_assert_int_eq(fence_sqlite_classify(db, &e), FENCE_OK);
    ck_assert_int_eq(fence_sqlite_classify(db, NULL), FENCE_OK);
    ck_assert_int_ne(exec_rc(db, "SELECT * FROM no_such_table"), SQLITE_OK);
    ck_assert_int_eq(fence_sqlite_classify(db, &e), FENCE_EDB);
    ck_assert_msg(strstr(e.message, "no_such_table") != NULL, "%s", e.message);

    /* From SQL. */
    ck_assert_int_ne(exec_rc(db, "SELECT fence_protect(NULL)"), SQLITE_OK);
    ck_assert_int_ne(exec_rc(db, "SELECT fence_protect('')"), SQLITE_OK);
    ck_assert_int_ne(exec_rc(db, "SELECT fence_protect(42)"), SQLITE_OK);
    ck_assert_int_ne(exec_rc(db, "SELECT fence_protect('t', 42)"), SQLITE_OK);
    ck_assert_int_ne(exec_rc(db, "SELECT fence_protect('t', NULL, 'yes')"), SQLITE_OK);
    ck_assert_int_ne(exec_rc(db, "SELECT fence_unprotect(NULL)"), SQLITE_OK);
    ck_assert_int_ne(exec_rc(db, "SELECT fence_protect(printf('%.600c', 'a'))"), SQLITE_OK);

    /* Attaching again keeps the token. */
    ck_assert_int_eq(fence_sqlite_attach(db), FENCE_OK);
    ck_assert_int_eq(fence_sqlite_token(db, &t), FENCE_OK);
    ck_assert_int_eq(t, 5);
    sqlite3_close(db);
    sqlite3_close(NULL);
}
END_TEST

/* The state dies with the connection: a new connection (maybe at the same
 * address) starts unattached, with no token. */
START_TEST(state_follows_connection)
{
    for (int i = 0; i < 20; i++) {
        sqlite3 *db = open_fenced("s.db");
        set_tok(db, 7);
        sqlite3_close(db);
        db = open_plain("s.db");
        ck_assert_int_eq(fence_sqlite_set_token(db, 7), FENCE_ESTATE);
        ck_assert_int_eq(fence_sqlite_attach(db), FENCE_OK);
        uint64_t t = 1;
        ck_assert_int_eq(fence_sqlite_token(db, &t), FENCE_OK);
        ck_assert_int_eq(t, 0);
        sqlite3_close(db);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Security review: replacing through the rowid, tokenless stamps, TEMP  */
/* shadows, renamed tables, stamps that are not integers                 */
/* ------------------------------------------------------------------ */

static int64_t count_fence_triggers(sqlite3 *db, const char *schema, const char *table)
{
    char *sql = sqlite3_mprintf("SELECT count(*) FROM %s.sqlite_master WHERE type = 'trigger' "
                                "AND tbl_name = %Q AND name LIKE 'fence\\_%%' ESCAPE '\\'",
                                schema, table);
    ck_assert_ptr_nonnull(sql);
    int64_t n = q_int(db, sql);
    sqlite3_free(sql);
    return n;
}

/* A rowid table without an INTEGER PRIMARY KEY: its rowid is a key that
 * pragma index_list does not show, and rows REPLACE deletes through it
 * fire no DELETE trigger. */
START_TEST(rowid_is_a_key)
{
    sqlite3 *db = open_fenced("rowid.db");
    exec_ok(db, "CREATE TABLE t(v TEXT, name TEXT UNIQUE)");
    ck_assert_int_eq(fence_sqlite_protect(db, "t", NULL), FENCE_OK);
    set_tok(db, 10);
    exec_ok(db, "INSERT INTO t(v, name) VALUES ('by10', 'a')"); /* rowid 1 */
    set_tok(db, 5);
    exec_ok(db, "INSERT INTO t(v, name) VALUES ('by5', 'c')"); /* rowid 2 */
    expect_stale(db, "INSERT OR REPLACE INTO t(rowid, v, name) VALUES (1, 'stale-replace', 'b')",
                 5, 10, "table", "t");
    expect_stale(db, "REPLACE INTO t(oid, v, name) VALUES (1, 'stale-replace', 'b')", 5, 10,
                 "table", "t");
    expect_stale(db, "UPDATE OR REPLACE t SET rowid = 1 WHERE rowid = 2", 5, 10, "table", "t");
    expect_stale(db, "UPDATE OR REPLACE t SET _rowid_ = 1 WHERE rowid = 2", 5, 10, "table", "t");
    expect_stale(db, "UPDATE OR REPLACE t SET (\"OID\", v) = (1, 'x') WHERE rowid = 2", 5, 10,
                 "table", "t");
    expect_stale(db, "INSERT INTO t(rowid, v, name) VALUES (1, 'x', 'z') "
                     "ON CONFLICT DO UPDATE SET v = excluded.v",
                 5, 10, "table", "t");
    ck_assert_str_eq(q_text(db, "SELECT group_concat(rowid || '|' || v || '|' || name || '|' || "
                                "fence_token, ',') FROM (SELECT rowid, * FROM t ORDER BY rowid)"),
                     "1|by10|a|10,2|by5|c|5");
    /* Rows no newer holder wrote stay writable, with or without a rowid. */
    exec_ok(db, "INSERT INTO t(v, name) VALUES ('auto5', 'd')");
    exec_ok(db, "INSERT OR REPLACE INTO t(rowid, v, name) VALUES (2, 'again5', 'c')");
    exec_ok(db, "UPDATE OR REPLACE t SET rowid = 20 WHERE name = 'd'");
    set_tok(db, 10);
    exec_ok(db, "UPDATE OR REPLACE t SET rowid = 1 WHERE rowid = 2");
    ck_assert_str_eq(q_text(db, "SELECT v || '|' || fence_token FROM t WHERE rowid = 1"),
                     "again5|10");
    sqlite3_close(db);

    /* An INTEGER PRIMARY KEY table: SET rowid (or oid) moves the key too,
     * and UPDATE OF <the key column> alone does not see it. */
    db = table_at_34();
    set_tok(db, 33);
    expect_stale(db, "UPDATE OR REPLACE t SET rowid = 1 WHERE id = 2", 33, 34, "table", "t");
    expect_stale(db, "UPDATE OR REPLACE t SET oid = 1 WHERE id = 2", 33, 34, "table", "t");
    ck_assert_str_eq(q_text(db, "SELECT v FROM t WHERE id = 1"), "by34");
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 2);
    sqlite3_close(db);

    /* INTEGER PRIMARY KEY DESC is not the rowid: both are keys. */
    db = open_fenced("desc.db");
    exec_ok(db, "CREATE TABLE k(id INTEGER PRIMARY KEY DESC, v TEXT)");
    ck_assert_int_eq(fence_sqlite_protect(db, "k", NULL), FENCE_OK);
    set_tok(db, 10);
    exec_ok(db, "INSERT INTO k(rowid, id, v) VALUES (1, 100, 'by10')");
    set_tok(db, 5);
    exec_ok(db, "INSERT INTO k(rowid, id, v) VALUES (2, 200, 'by5')");
    expect_stale(db, "INSERT OR REPLACE INTO k(rowid, id, v) VALUES (1, 300, 'x')", 5, 10,
                 "table", "k");
    expect_stale(db, "INSERT OR REPLACE INTO k(rowid, id, v) VALUES (3, 100, 'x')", 5, 10,
                 "table", "k");
    expect_stale(db, "UPDATE OR REPLACE k SET rowid = 1 WHERE id = 200", 5, 10, "table", "k");
    expect_stale(db, "UPDATE OR REPLACE k SET id = 100 WHERE id = 200", 5, 10, "table", "k");
    ck_assert_str_eq(q_text(db, "SELECT v FROM k WHERE rowid = 1"), "by10");

    /* WITHOUT ROWID: the primary key is the only row identity; moving a
     * row onto a newer one's key is refused too. */
    exec_ok(db, "CREATE TABLE w(a TEXT, b INTEGER, v TEXT, PRIMARY KEY (a, b)) WITHOUT ROWID");
    ck_assert_int_eq(fence_sqlite_protect(db, "w", NULL), FENCE_OK);
    set_tok(db, 10);
    exec_ok(db, "INSERT INTO w(a, b, v) VALUES ('k', 1, 'by10')");
    set_tok(db, 5);
    exec_ok(db, "INSERT INTO w(a, b, v) VALUES ('k', 2, 'by5')");
    expect_stale(db, "UPDATE OR REPLACE w SET b = 1 WHERE b = 2", 5, 10, "table", "w");
    expect_stale(db, "INSERT OR REPLACE INTO w(a, b, v) VALUES ('k', 1, 'x')", 5, 10, "table",
                 "w");
    ck_assert_str_eq(q_text(db, "SELECT v FROM w WHERE b = 1"), "by10");
    sqlite3_close(db);
}
END_TEST

/* Permissive mode, no token: an UPDATE keeps the row's stamp whatever it
 * writes to the column; an INSERT is stamped 0 (never fenced). */
START_TEST(permissive_tokenless_keeps_stamp)
{
    sqlite3 *db = open_fenced("perm.db");
    exec_ok(db, "CREATE TABLE p(id INTEGER PRIMARY KEY, v TEXT, lock_version INTEGER)");
    exec_ok(db, "INSERT INTO p VALUES (1, 'a', 0), (2, 'b', NULL)");
    fence_sqlite_protect_options o;
    fence_sqlite_protect_options_init(&o);
    o.column = "lock_version";
    o.permissive = 1;
    ck_assert_int_eq(fence_sqlite_protect(db, "p", &o), FENCE_OK);
    set_tok(db, 10);
    exec_ok(db, "UPDATE p SET v = 'by10' WHERE id = 1");
    set_tok(db, 0);
    /* Lowering the stamp would let a stale token in. */
    exec_ok(db, "UPDATE p SET v = 'legacy', lock_version = 0 WHERE id = 1");
    ck_assert_str_eq(q_text(db, "SELECT v || '|' || lock_version FROM p WHERE id = 1"),
                     "legacy|10");
    set_tok(db, 3);
    expect_stale(db, "UPDATE p SET v = 'stale3' WHERE id = 1", 3, 10, "table", "p");
    set_tok(db, 0);
    /* Raising it would lock the row against every later holder. */
    exec_ok(db, "UPDATE p SET lock_version = 9223372036854775807 WHERE id = 1");
    exec_ok(db, "UPDATE p SET lock_version = NULL WHERE id = 1");
    /* A legacy optimistic-lock writer (Rails) bumps the column itself. */
    exec_ok(db, "UPDATE p SET v = 'rails', lock_version = lock_version + 1 "
                "WHERE id = 1 AND lock_version = 10");
    exec_ok(db, "INSERT INTO p(id, v) VALUES (1, 'upsert') "
                "ON CONFLICT(id) DO UPDATE SET v = excluded.v, lock_version = 0");
    ck_assert_str_eq(q_text(db, "SELECT v || '|' || lock_version FROM p WHERE id = 1"),
                     "upsert|10");
    set_tok(db, 11);
    exec_ok(db, "UPDATE p SET v = 'by11' WHERE id = 1");
    ck_assert_int_eq(q_int(db, "SELECT lock_version FROM p WHERE id = 1"), 11);
    set_tok(db, 0);
    /* A row nobody fenced stays at 0; NULL and 0 count the same. */
    exec_ok(db, "UPDATE p SET v = 'b2', lock_version = NULL WHERE id = 2");
    ck_assert_int_eq(q_int(db, "SELECT coalesce(lock_version, 0) FROM p WHERE id = 2"), 0);
    exec_ok(db, "UPDATE p SET lock_version = 4 WHERE id = 2");
    ck_assert_int_eq(q_int(db, "SELECT coalesce(lock_version, 0) FROM p WHERE id = 2"), 0);

    /* INSERT without a token: stamped 0; planting a stamp is refused. */
    exec_ok(db, "INSERT INTO p(id, v) VALUES (3, 'c')");
    exec_ok(db, "INSERT INTO p(id, v, lock_version) VALUES (4, 'd', NULL)");
    exec_ok(db, "INSERT INTO p(id, v, lock_version) VALUES (5, 'e', -7)");
    exec_ok(db, "INSERT INTO p(id, v, lock_version) VALUES (6, 'f', 0)");
    ck_assert_str_eq(q_text(db, "SELECT group_concat(lock_version, ',') FROM "
                                "(SELECT lock_version FROM p WHERE id >= 3 ORDER BY id)"),
                     "0,0,0,0");
    ck_assert_int_eq(exec_rc(db, "INSERT INTO p(id, v, lock_version) VALUES (7, 'g', 9)"),
                     SQLITE_CONSTRAINT);
    ck_assert_msg(strncmp(sqlite3_errmsg(db), "fence:forbidden ", 16) == 0, "%s",
                  sqlite3_errmsg(db));
    ck_assert_int_eq(exec_rc(db, "INSERT INTO p(id, v, lock_version) "
                                 "VALUES (8, 'h', 9223372036854775807)"),
                     SQLITE_CONSTRAINT);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM p WHERE id >= 7"), 0);

    /* With recursive triggers on, restoring the stamp re-runs the trigger,
     * which cannot tell the restore from a client write: such a write is
     * refused whole; other tokenless writes go through. */
    exec_ok(db, "PRAGMA recursive_triggers = ON");
    ck_assert_int_ne(exec_rc(db, "UPDATE p SET v = 'rec', lock_version = 0 WHERE id = 1"),
                     SQLITE_OK);
    exec_ok(db, "UPDATE p SET v = 'rec' WHERE id = 1");
    exec_ok(db, "INSERT INTO p(id, v, lock_version) VALUES (9, 'i', NULL)");
    ck_assert_str_eq(q_text(db, "SELECT v || '|' || lock_version FROM p WHERE id = 1"),
                     "rec|11");
    ck_assert_int_eq(q_int(db, "SELECT lock_version FROM p WHERE id = 9"), 0);
    set_tok(db, 3);
    expect_stale(db, "UPDATE p SET v = 'stale3' WHERE id = 1", 3, 11, "table", "p");

    /* The same with the default column. */
    exec_ok(db, "PRAGMA recursive_triggers = OFF");
    exec_ok(db, "CREATE TABLE q(id INTEGER PRIMARY KEY, v TEXT)");
    exec_ok(db, "SELECT fence_protect('q', NULL, 1)");
    set_tok(db, 10);
    exec_ok(db, "INSERT INTO q VALUES (1, 'by10', 10)");
    set_tok(db, 0);
    exec_ok(db, "UPDATE q SET v = 'legacy', fence_token = 0");
    ck_assert_int_eq(q_int(db, "SELECT fence_token FROM q"), 10);
    sqlite3_close(db);
}
END_TEST

/* A TEMP table of the same name: unqualified SQL on this connection
 * reaches it, not main's table. */
START_TEST(temp_table_shadow)
{
    sqlite3 *db = open_fenced("shadow.db");
    exec_ok(db, "CREATE TABLE m(id INTEGER PRIMARY KEY, v TEXT)");
    exec_ok(db, "INSERT INTO main.m VALUES (1, 'main')");
    exec_ok(db, "CREATE TEMP TABLE m(id INTEGER PRIMARY KEY, v TEXT)");
    ck_assert_int_eq(fence_sqlite_protect(db, "m", NULL), FENCE_EINVAL);
    ck_assert_msg(strstr(fence_sqlite_errmsg(), "TEMP") != NULL, "%s", fence_sqlite_errmsg());
    ck_assert_int_ne(exec_rc(db, "SELECT fence_protect('m')"), SQLITE_OK);
    ck_assert_msg(strstr(sqlite3_errmsg(db), "TEMP") != NULL, "%s", sqlite3_errmsg(db));
    /* Nothing was changed, in either schema. */
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM pragma_table_info('m', 'main')"), 2);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM pragma_table_info('m', 'temp')"), 2);
    ck_assert_int_eq(count_fence_triggers(db, "main", "m"), 0);
    ck_assert_int_eq(count_fence_triggers(db, "temp", "m"), 0);

    /* Without the shadow it works, and everything lands in main. */
    exec_ok(db, "DROP TABLE temp.m");
    ck_assert_int_eq(fence_sqlite_protect(db, "m", NULL), FENCE_OK);
    ck_assert_int_eq(count_fence_triggers(db, "main", "m"), 5);
    ck_assert_int_eq(count_fence_triggers(db, "temp", "m"), 0);
    set_tok(db, 10);
    exec_ok(db, "UPDATE m SET v = 'by10'");

    /* A shadow created afterwards does not blind main's triggers. */
    exec_ok(db, "CREATE TEMP TABLE m(id INTEGER PRIMARY KEY, v TEXT, fence_token INTEGER)");
    exec_ok(db, "INSERT INTO temp.m VALUES (1, 'temp', 0)");
    set_tok(db, 5);
    expect_stale(db, "UPDATE main.m SET v = 'by5'", 5, 10, "table", "m");
    expect_stale(db, "INSERT OR REPLACE INTO main.m(id, v) VALUES (1, 'by5')", 5, 10, "table",
                 "m");
    expect_stale(db, "DELETE FROM main.m", 5, 10, "table", "m");
    exec_ok(db, "UPDATE m SET v = 'temp5'"); /* the TEMP table: not fenced */
    ck_assert_str_eq(q_text(db, "SELECT v || '|' || fence_token FROM main.m"), "by10|10");
    /* Unprotect finds main's triggers, not the shadow. */
    ck_assert_int_eq(fence_sqlite_unprotect(db, "m"), FENCE_OK);
    ck_assert_int_eq(count_fence_triggers(db, "main", "m"), 0);

    /* A TEMP fence_advance must not swallow a C-API advance. */
    set_tok(db, 34);
    ck_assert_int_eq(fence_sqlite_advance(db, "r"), FENCE_OK);
    exec_ok(db, "CREATE TEMP TABLE fence_advance(resource)");
    set_tok(db, 33);
    ck_assert_int_eq(fence_sqlite_advance(db, "r"), FENCE_STALE);
    ck_assert_int_eq(q_int(db, "SELECT high_water FROM main.fence_resource"), 34);
    sqlite3_close(db);
}
END_TEST

/* ALTER TABLE RENAME keeps the triggers' old names. */
START_TEST(renamed_table_triggers)
{
    sqlite3 *db = open_fenced("rename.db");
    exec_ok(db, "CREATE TABLE a(id INTEGER PRIMARY KEY, v TEXT, email TEXT UNIQUE)");
    exec_ok(db, "INSERT INTO a VALUES (1, 'x', 'e1')");
    ck_assert_int_eq(fence_sqlite_protect(db, "a", NULL), FENCE_OK);
    set_tok(db, 10);
    exec_ok(db, "UPDATE a SET v = 'by10'");
    exec_ok(db, "ALTER TABLE a RENAME TO b");
    ck_assert_int_eq(count_fence_triggers(db, "main", "b"), 5);
    /* Protecting again replaces the old set instead of adding a second. */
    ck_assert_int_eq(fence_sqlite_protect(db, "b", NULL), FENCE_OK);
    ck_assert_int_eq(count_fence_triggers(db, "main", "b"), 5);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' "
                               "AND name LIKE 'fence\\_%\\_a' ESCAPE '\\'"),
                     0);
    set_tok(db, 5);
    expect_stale(db, "UPDATE b SET v = 'by5'", 5, 10, "table", "b");
    /* Unprotect right after a rename finds them too. */
    exec_ok(db, "ALTER TABLE b RENAME TO c");
    ck_assert_int_eq(fence_sqlite_unprotect(db, "c"), FENCE_OK);
    ck_assert_int_eq(count_fence_triggers(db, "main", "c"), 0);
    exec_ok(db, "UPDATE c SET v = 'unfenced'");
    /* A user's trigger that merely looks like ours is left alone. */
    exec_ok(db, "CREATE TABLE audit(x)");
    exec_ok(db, "CREATE TRIGGER fence_bi_audit BEFORE INSERT ON c BEGIN "
                "INSERT INTO audit VALUES (NEW.v); END");
    ck_assert_int_eq(fence_sqlite_protect(db, "c", NULL), FENCE_OK);
    ck_assert_int_eq(fence_sqlite_unprotect(db, "c"), FENCE_OK);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'fence_bi_audit'"),
                     1);
    exec_ok(db, "DROP TRIGGER fence_bi_audit");

    /* A new table under a renamed protected table's old name: its trigger
     * names are taken; refused with a way out, not a bare SQLite error. */
    ck_assert_int_eq(fence_sqlite_protect(db, "c", NULL), FENCE_OK);
    exec_ok(db, "ALTER TABLE c RENAME TO d");
    exec_ok(db, "CREATE TABLE c(id INTEGER PRIMARY KEY, v TEXT)");
    ck_assert_int_eq(fence_sqlite_protect(db, "c", NULL), FENCE_EINVAL);
    ck_assert_msg(strstr(fence_sqlite_errmsg(), "\"d\"") != NULL, "%s", fence_sqlite_errmsg());
    ck_assert_int_eq(count_fence_triggers(db, "main", "d"), 5); /* untouched */
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM pragma_table_info('c')"), 2);
    ck_assert_int_eq(fence_sqlite_unprotect(db, "c"), FENCE_OK); /* not d's */
    ck_assert_int_eq(count_fence_triggers(db, "main", "d"), 5);
    ck_assert_int_eq(fence_sqlite_protect(db, "d", NULL), FENCE_OK);
    ck_assert_int_eq(fence_sqlite_protect(db, "c", NULL), FENCE_OK);
    ck_assert_int_eq(count_fence_triggers(db, "main", "c"), 5);
    ck_assert_int_eq(count_fence_triggers(db, "main", "d"), 5);
    sqlite3_close(db);
}
END_TEST

/* Raise MSG from a trigger and classify it. */
static void classify_raised(sqlite3 *db, const char *msg, int64_t offered, int64_t highest)
{
    char *sql = sqlite3_mprintf("DROP TRIGGER IF EXISTS temp.raiser;"
                                "CREATE TEMP TRIGGER raiser BEFORE INSERT ON temp.scratch "
                                "BEGIN SELECT RAISE(ABORT, %Q); END",
                                msg);
    ck_assert_ptr_nonnull(sql);
    exec_ok(db, sql);
    sqlite3_free(sql);
    ck_assert_int_eq(exec_rc(db, "INSERT INTO temp.scratch VALUES (1)"), SQLITE_CONSTRAINT);
    fence_sqlite_error e;
    ck_assert_int_eq(fence_sqlite_classify(db, &e), FENCE_STALE);
    ck_assert_msg(e.offered == offered && e.highest == highest,
                  "'%s': offered %lld highest %lld, want %lld %lld", msg, (long long)e.offered,
                  (long long)e.highest, (long long)offered, (long long)highest);
}

/* A stamp that is not a plain integer is unknown (0), never misread. */
START_TEST(classify_reads_tokens_strictly)
{
    sqlite3 *db = open_fenced("real.db");
    exec_ok(db, "CREATE TABLE r(id INTEGER PRIMARY KEY, v TEXT)");
    exec_ok(db, "INSERT INTO r VALUES (1, 'a')");
    ck_assert_int_eq(fence_sqlite_protect(db, "r", NULL), FENCE_OK);
    ck_assert_int_eq(fence_sqlite_unprotect(db, "r"), FENCE_OK);
    exec_ok(db, "UPDATE r SET fence_token = 1e30");
    ck_assert_int_eq(fence_sqlite_protect(db, "r", NULL), FENCE_OK);
    ck_assert_str_eq(q_text(db, "SELECT typeof(fence_token) FROM r"), "real");
    set_tok(db, 5);
    ck_assert_int_eq(exec_rc(db, "UPDATE r SET v = 'b'"), SQLITE_CONSTRAINT);
    fence_sqlite_error e;
    ck_assert_int_eq(fence_sqlite_classify(db, &e), FENCE_STALE);
    ck_assert_msg(strstr(e.message, "older than 1.0e+30") != NULL, "%s", e.message);
    ck_assert_int_eq(e.offered, 5);
    ck_assert_int_eq(e.highest, 0);
    ck_assert_str_eq(e.name, "r");

    exec_ok(db, "CREATE TEMP TABLE scratch(x)");
    static const char pre[] = "fence:stale table \"x\": token ";
    static const struct {
        const char *tail;
        int64_t offered, highest;
    } cases[] = {
        {"5 is older than 7 (write rejected)", 5, 7},
        {"5 is older than 9223372036854775807 (write rejected)", 5, INT64_MAX},
        {"5 is older than 1.0e+30 (write rejected)", 5, 0},
        {"5 is older than 12abc (write rejected)", 5, 0},
        {"5 is older than 9223372036854775808 (write rejected)", 5, 0},
        {"5 is older than 99999999999999999999 (write rejected)", 5, 0},
        {"5 is older than -7 (write rejected)", 5, 0},
        {"5 is older than  7 (write rejected)", 5, 0},
        {"5 is older than +7 (write rejected)", 5, 0},
        {"5 is older than 'abc' (write rejected)", 5, 0},
        {"5 is older than 7", 5, 0},
        {"5.5 is older than 7 (write rejected)", 0, 0},
        {"-5 is older than 7 (write rejected)", 0, 0},
        {"99999999999999999999 is older than 7 (write rejected)", 0, 0},
        {"NULL is older than 7 (write rejected)", 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s%s", pre, cases[i].tail);
        classify_raised(db, msg, cases[i].offered, cases[i].highest);
    }
    sqlite3_close(db);
}
END_TEST

static Suite *sqlite_suite(void)
{
    Suite *s = suite_create("sqlite");
    TCase *tc = tcase_create("fencing");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, stale_update_delete_insert);
    tcase_add_test(tc, equal_and_higher_admitted_and_stamped);
    tcase_add_test(tc, client_column_writes_cannot_bypass);
    tcase_add_test(tc, missing_and_malformed_tokens);
    tcase_add_test(tc, permissive_mode);
    tcase_add_test(tc, retrofit_rails_lock_version);
    tcase_add_test(tc, per_resource_advance);
    tcase_add_test(tc, two_connections_every_order);
    tcase_add_test(tc, two_connections_resource);
    tcase_add_test(tc, injection_in_names);
    tcase_add_test(tc, trusted_schema_off_and_directonly);
    tcase_add_test(tc, connection_without_fence_fails_closed);
    tcase_add_test(tc, without_rowid_and_odd_tables);
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, state_follows_connection);
    tcase_add_test(tc, rowid_is_a_key);
    tcase_add_test(tc, permissive_tokenless_keeps_stamp);
    tcase_add_test(tc, temp_table_shadow);
    tcase_add_test(tc, renamed_table_triggers);
    tcase_add_test(tc, classify_reads_tokens_strictly);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(sqlite_suite());
}
