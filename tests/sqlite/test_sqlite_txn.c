/* test_sqlite_txn.c -- a token serves one write transaction, through the
 * C API on one connection reused as a pool reuses it: after a fenced
 * transaction every write without a token of its own is refused (UPDATE,
 * DELETE, INSERT, an advance; autocommit, BEGIN DEFERRED, BEGIN
 * IMMEDIATE).  The refusal undoes the statement, as any refused statement
 * is undone: in autocommit SQLite rolls its transaction back, leaving no
 * transaction open and no write lock held (a second connection with no
 * busy timeout writes right after); in the caller's transaction it leaves
 * that transaction open, holding the write lock (the second connection
 * gets SQLITE_BUSY), until the caller's ROLLBACK, which leaves none.  A
 * token set outside a transaction serves the next one that writes, set
 * inside one it is that one's; gone at COMMIT or ROLLBACK.  The edges:
 * savepoints, a transaction that only read before the writing one, a
 * COMMIT that fails with SQLITE_BUSY, a stale refusal, fence's own
 * administrative transactions, and an application's commit hook.  The
 * extension from Python's sqlite3, SQLAlchemy's pool and the shell:
 * test_sqlite_reuse.sh. */
#include <check.h>
#include <sqlite3.h>
#include <string.h>

#include "casetable.h"
#include "sqliteutil.h"

static uint64_t token_of(sqlite3 *db)
{
    uint64_t t = 99;
    ck_assert_int_eq(fence_sqlite_token(db, &t), FENCE_OK);
    return t;
}

/* No transaction open on db, and another connection (busy timeout 0:
 * any lock left would fail it at once) writes the file. */
static void nothing_held(sqlite3 *db)
{
    ck_assert_int_eq(sqlite3_get_autocommit(db), 1);
    ck_assert_int_eq(sqlite3_txn_state(db, NULL), SQLITE_TXN_NONE);
    sqlite3 *other = su_open_fenced("t.db");
    sqlite3_busy_timeout(other, 0);
    su_tok_exec_ok(other, 1000, "INSERT INTO side VALUES ('other wrote')");
    sqlite3_close(other);
}

/* A transaction is open on db, holding the write lock: another connection
 * (busy timeout 0) cannot write the file. */
static void held_by_owner(sqlite3 *db)
{
    ck_assert_int_eq(sqlite3_get_autocommit(db), 0);
    ck_assert_int_eq(sqlite3_txn_state(db, "main"), SQLITE_TXN_WRITE);
    sqlite3 *other = su_open_fenced("t.db");
    sqlite3_busy_timeout(other, 0);
    su_set_tok(other, 1000);
    ck_assert_int_eq(su_exec_rc(other, "INSERT INTO side VALUES ('too early')") & 0xff,
                     SQLITE_BUSY);
    sqlite3_close(other);
}

/* t.db: t protected, row 1 stamped 34; side unprotected. */
static sqlite3 *setup(void)
{
    sqlite3 *db = su_table_at_34();
    su_exec_ok(db, "CREATE TABLE side(v TEXT)");
    return db;
}

static void fenced_txn(sqlite3 *db, uint64_t t)
{
    su_exec_ok(db, "BEGIN IMMEDIATE");
    su_set_tok(db, t);
    su_exec_ok(db, "UPDATE t SET v = 'fenced' WHERE id = 1");
    su_exec_ok(db, "INSERT INTO fence_advance VALUES ('r')");
    su_exec_ok(db, "COMMIT");
}

static const struct {
    const char *name;
    const char *begin; /* NULL: autocommit */
    const char *write;
} after_cases[] = {
    {"update_autocommit", NULL, "UPDATE t SET v = 'leak' WHERE id = 1"},
    {"delete_autocommit", NULL, "DELETE FROM t WHERE id = 1"},
    {"insert_autocommit", NULL, "INSERT INTO t(v) VALUES ('leak')"},
    {"advance_autocommit", NULL, "INSERT INTO fence_advance VALUES ('r')"},
    {"update_deferred", "BEGIN DEFERRED", "UPDATE t SET v = 'leak' WHERE id = 1"},
    {"update_immediate", "BEGIN IMMEDIATE", "UPDATE t SET v = 'leak' WHERE id = 1"},
    {"insert_immediate", "BEGIN IMMEDIATE", "INSERT INTO t(v) VALUES ('leak')"},
    {"advance_deferred", "BEGIN", "INSERT INTO fence_advance VALUES ('r')"},
    /* A transaction that wrote elsewhere first: rolled back by its owner. */
    {"after_other_write", "BEGIN; INSERT INTO side VALUES ('mine')",
     "UPDATE t SET v = 'leak' WHERE id = 1"},
};

START_TEST(tokenless_write_after_fenced_txn)
{
    sqlite3 *db = setup();
    fenced_txn(db, 9000);
    ck_assert_uint_eq(token_of(db), 0);
    if (after_cases[_i].begin != NULL) {
        su_exec_ok(db, after_cases[_i].begin);
    }
    su_expect_notoken(db, after_cases[_i].write);
    ck_assert_msg(strstr(sqlite3_errmsg(db), "a token serves one write transaction") != NULL,
                  "%s", sqlite3_errmsg(db));
    if (after_cases[_i].begin != NULL) {
        /* The statement is undone; its transaction is the caller's, and
         * holds the write lock until the caller rolls it back. */
        held_by_owner(db);
        su_exec_ok(db, "ROLLBACK");
    }
    /* In autocommit SQLite has rolled the statement's own transaction
     * back already: nothing to do. */
    nothing_held(db);
    /* Nothing of it was written. */
    ck_assert_str_eq(su_q_text(db, "SELECT v || fence_token FROM t WHERE id = 1"), "fenced9000");
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM t"), 2);
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM side WHERE v = 'mine'"), 0);
    ck_assert_uint_eq(su_mark(db, "r"), 9000);
    sqlite3_close(db);
}
END_TEST

START_TEST(set_outside_serves_the_next_write_txn)
{
    sqlite3 *db = setup();
    /* The shell's way: set, then one autocommit write. */
    su_set_tok(db, 40);
    ck_assert_uint_eq(token_of(db), 40);
    su_exec_ok(db, "SELECT v FROM t"); /* reads leave it */
    su_exec_ok(db, "UPDATE t SET v = 'by40' WHERE id = 1");
    ck_assert_uint_eq(token_of(db), 0);
    su_expect_notoken(db, "UPDATE t SET v = 'again' WHERE id = 1");
    nothing_held(db);
    /* Several writes in one transaction, begun after the token was set:
     * DEFERRED and IMMEDIATE alike. */
    static const char *const begins[] = {"BEGIN DEFERRED", "BEGIN IMMEDIATE"};
    for (int i = 0; i < 2; i++) {
        su_set_tok(db, 41 + (uint64_t)i);
        su_exec_ok(db, begins[i]);
        su_exec_ok(db, "UPDATE t SET v = 'one' WHERE id = 1");
        su_exec_ok(db, "UPDATE t SET v = 'two' WHERE id = 2");
        ck_assert_uint_eq(token_of(db), 41 + (uint64_t)i);
        su_exec_ok(db, "COMMIT");
        ck_assert_uint_eq(token_of(db), 0);
        ck_assert_str_eq(su_q_text(db, "SELECT group_concat(fence_token, ',') FROM t"),
                         i == 0 ? "41,41" : "42,42");
    }
    /* The next transaction that writes takes it, even when it writes only
     * an unprotected table. */
    su_set_tok(db, 50);
    su_exec_ok(db, "INSERT INTO side VALUES ('x')");
    ck_assert_uint_eq(token_of(db), 0);
    sqlite3_close(db);
}
END_TEST

START_TEST(set_inside_is_that_txns)
{
    sqlite3 *db = setup();
    su_exec_ok(db, "BEGIN");
    su_set_tok(db, 40);
    su_exec_ok(db, "UPDATE t SET v = 'by40' WHERE id = 1");
    su_exec_ok(db, "COMMIT");
    ck_assert_uint_eq(token_of(db), 0);
    /* ROLLBACK ends it too, and the write is gone with it. */
    su_exec_ok(db, "BEGIN IMMEDIATE");
    su_set_tok(db, 41);
    su_exec_ok(db, "UPDATE t SET v = 'by41' WHERE id = 1");
    su_exec_ok(db, "ROLLBACK");
    ck_assert_uint_eq(token_of(db), 0);
    su_expect_notoken(db, "UPDATE t SET v = 'x' WHERE id = 1");
    ck_assert_str_eq(su_q_text(db, "SELECT v || fence_token FROM t WHERE id = 1"), "by4040");
    /* A stale refusal undoes its statement: in a transaction the token
     * stays for the rest of it; in autocommit the statement's own
     * transaction rolls back and takes the token with it. */
    su_exec_ok(db, "BEGIN IMMEDIATE");
    su_expect_stale(db, "UPDATE t SET v = 'by39' WHERE id = 1", 39, 40, FENCE_OBJECT_TABLE, "t");
    ck_assert_int_eq(sqlite3_get_autocommit(db), 0);
    ck_assert_uint_eq(token_of(db), 39);
    su_exec_ok(db, "UPDATE t SET v = 'by39' WHERE id = 2");
    su_exec_ok(db, "COMMIT");
    su_expect_stale(db, "UPDATE t SET v = 'by39' WHERE id = 1", 39, 40, FENCE_OBJECT_TABLE, "t");
    ck_assert_uint_eq(token_of(db), 0);
    nothing_held(db);
    sqlite3_close(db);
}
END_TEST

START_TEST(savepoints)
{
    sqlite3 *db = setup();
    /* The token is the transaction's, not a savepoint's: ROLLBACK TO and
     * RELEASE of an inner savepoint keep it. */
    su_exec_ok(db, "BEGIN");
    su_exec_ok(db, "SAVEPOINT a");
    su_set_tok(db, 40);
    su_exec_ok(db, "UPDATE t SET v = 'undone' WHERE id = 1");
    su_exec_ok(db, "ROLLBACK TO a");
    su_exec_ok(db, "RELEASE a");
    ck_assert_uint_eq(token_of(db), 40);
    su_exec_ok(db, "SAVEPOINT b; UPDATE t SET v = 'kept' WHERE id = 1; RELEASE b");
    su_exec_ok(db, "COMMIT");
    ck_assert_uint_eq(token_of(db), 0);
    ck_assert_str_eq(su_q_text(db, "SELECT v || fence_token FROM t WHERE id = 1"), "kept40");
    /* A savepoint that begins the transaction: its RELEASE is the COMMIT. */
    su_set_tok(db, 41);
    su_exec_ok(db, "SAVEPOINT outer; UPDATE t SET v = 'sp' WHERE id = 1; RELEASE outer");
    ck_assert_uint_eq(token_of(db), 0);
    su_expect_notoken(db, "UPDATE t SET v = 'x' WHERE id = 1");
    nothing_held(db);
    sqlite3_close(db);
}
END_TEST

/* SQLite reports nothing when a transaction that only read ends: a token
 * set before it waits for the next transaction that writes (docs/sqlite.md
 * says so); a ROLLBACK, even of one that only read, ends it. */
START_TEST(read_only_txn_before_the_writing_one)
{
    sqlite3 *db = setup();
    su_set_tok(db, 40);
    su_exec_ok(db, "BEGIN; SELECT count(*) FROM t; COMMIT");
    ck_assert_uint_eq(token_of(db), 40);
    su_exec_ok(db, "BEGIN IMMEDIATE; UPDATE t SET v = 'by40' WHERE id = 1; COMMIT");
    ck_assert_uint_eq(token_of(db), 0);
    /* Set inside a transaction that then only reads: the same. */
    su_exec_ok(db, "BEGIN");
    su_set_tok(db, 41);
    su_exec_ok(db, "SELECT count(*) FROM t; COMMIT");
    ck_assert_uint_eq(token_of(db), 41);
    /* A read-only transaction rolled back: the token is gone. */
    su_exec_ok(db, "BEGIN; SELECT count(*) FROM t; ROLLBACK");
    ck_assert_uint_eq(token_of(db), 0);
    su_expect_notoken(db, "UPDATE t SET v = 'x' WHERE id = 1");
    /* BEGIN IMMEDIATE is a write transaction from its start: its COMMIT
     * ends the token even when nothing was written. */
    su_exec_ok(db, "BEGIN IMMEDIATE");
    su_set_tok(db, 42);
    su_exec_ok(db, "SELECT count(*) FROM t; COMMIT");
    ck_assert_uint_eq(token_of(db), 0);
    /* Clearing it is the way to end a request that wrote nothing. */
    su_set_tok(db, 43);
    su_set_tok(db, 0);
    su_expect_notoken(db, "UPDATE t SET v = 'x' WHERE id = 1");
    sqlite3_close(db);
}
END_TEST

/* COMMIT in rollback-journal mode needs every reader gone; with one
 * holding its snapshot and no busy timeout it fails with SQLITE_BUSY and
 * the transaction stays open.  SQLite runs the commit hook only once the
 * COMMIT gets past that, so the token is still the open transaction's:
 * it may write more, and the COMMIT that goes through ends it.  (A COMMIT
 * that fails after the hook ran -- an I/O error -- would leave the
 * transaction without its token: its further writes are refused.) */
START_TEST(commit_fails_busy)
{
    sqlite3 *db = su_open_fenced("j.db");
    su_exec_ok(db, "PRAGMA journal_mode=DELETE");
    su_exec_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);"
                   "INSERT INTO t VALUES (1, 'a'), (2, 'b')");
    ck_assert_int_eq(fence_sqlite_protect(db, "t", NULL), FENCE_OK);
    sqlite3 *reader = su_open_plain("j.db");
    su_exec_ok(reader, "PRAGMA journal_mode=DELETE");
    sqlite3_busy_timeout(db, 0);
    su_exec_ok(db, "BEGIN IMMEDIATE");
    su_set_tok(db, 40);
    su_exec_ok(db, "UPDATE t SET v = 'by40' WHERE id = 1");
    su_exec_ok(reader, "BEGIN; SELECT count(*) FROM t"); /* a shared lock, kept */
    ck_assert_int_eq(su_exec_rc(db, "COMMIT") & 0xff, SQLITE_BUSY);
    ck_assert_int_eq(sqlite3_get_autocommit(db), 0);
    ck_assert_uint_eq(token_of(db), 40);
    su_exec_ok(db, "UPDATE t SET v = 'by40' WHERE id = 2");
    su_exec_ok(reader, "COMMIT");
    su_exec_ok(db, "COMMIT");
    ck_assert_uint_eq(token_of(db), 0);
    ck_assert_str_eq(su_q_text(db, "SELECT group_concat(v || fence_token, ',') FROM t"),
                     "by4040,by4040");
    su_expect_notoken(db, "UPDATE t SET v = 'x' WHERE id = 1");
    sqlite3_close(reader);
    sqlite3_close(db);
}
END_TEST

/* Attaching again keeps the token (nothing is written); fence's own
 * administrative calls outside a transaction are write transactions, and
 * end it like any other. */
START_TEST(administration)
{
    sqlite3 *db = setup();
    su_set_tok(db, 40);
    ck_assert_int_eq(fence_sqlite_attach(db), FENCE_OK);
    su_exec_ok(db, "SELECT fence_init()");
    ck_assert_uint_eq(token_of(db), 40);
    ck_assert_int_eq(fence_sqlite_protect(db, "t", NULL), FENCE_OK);
    ck_assert_uint_eq(token_of(db), 0);
    /* Inside the caller's transaction they are part of it. */
    su_exec_ok(db, "BEGIN IMMEDIATE");
    su_set_tok(db, 41);
    ck_assert_int_eq(fence_sqlite_protect(db, "t", NULL), FENCE_OK);
    su_exec_ok(db, "UPDATE t SET v = 'by41' WHERE id = 1");
    su_exec_ok(db, "COMMIT");
    ck_assert_str_eq(su_q_text(db, "SELECT v || fence_token FROM t WHERE id = 1"), "by4141");
    sqlite3_close(db);
}
END_TEST

static int app_commits;
static int app_commit_hook(void *arg)
{
    (void)arg;
    app_commits++;
    return 0;
}

/* SQLite keeps one commit hook per connection, and hands back only the
 * previous one's argument, never its function, so fence cannot call an
 * application's hook after its own.  fence_sqlite_set_token installs
 * fence's again: the transaction a token serves always ends it, and an
 * application hook installed before is replaced (docs/sqlite.md). */
START_TEST(application_commit_hook)
{
    sqlite3 *db = setup();
    sqlite3_commit_hook(db, app_commit_hook, NULL);
    su_exec_ok(db, "INSERT INTO side VALUES ('a')");
    ck_assert_int_eq(app_commits, 1);
    su_set_tok(db, 40);
    su_exec_ok(db, "UPDATE t SET v = 'by40' WHERE id = 1");
    ck_assert_int_eq(app_commits, 1);
    ck_assert_uint_eq(token_of(db), 0);
    su_expect_notoken(db, "UPDATE t SET v = 'x' WHERE id = 1");
    sqlite3_close(db);
}
END_TEST

static Suite *txn_suite(void)
{
    Suite *s = suite_create("sqlite_txn");
    TCase *tc = tcase_create("txn");
    tcase_add_checked_fixture(tc, su_setup, su_teardown);
    tcase_set_timeout(tc, 30);
    CT_ADD_CASES(tc, tokenless_write_after_fenced_txn, after_cases);
    tcase_add_test(tc, set_outside_serves_the_next_write_txn);
    tcase_add_test(tc, set_inside_is_that_txns);
    tcase_add_test(tc, savepoints);
    tcase_add_test(tc, read_only_txn_before_the_writing_one);
    tcase_add_test(tc, commit_fails_busy);
    tcase_add_test(tc, administration);
    tcase_add_test(tc, application_commit_hook);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(txn_suite());
}
