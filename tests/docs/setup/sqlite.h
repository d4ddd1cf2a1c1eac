/* setup "sqlite": `db`, a new SQLite file in the current folder with
 * busy_timeout set, the library not yet attached, tables accounts (id 1,
 * balance 100) and orders (id 7, status 'new').  Check: one of them was
 * written (balance 200 or status 'paid') and no transaction is open. */
#include "common.h"
#include <sqlite3.h>
#include <fence_sqlite.h>
#include <unistd.h>

static sqlite3 *db;

static int doc_setup_sqlite(void)
{
    unlink("docs.db");
    if (sqlite3_open("docs.db", &db) != SQLITE_OK)
        return doc_fail("sqlite: open: %s", sqlite3_errmsg(db));
    sqlite3_busy_timeout(db, 5000);
    if (sqlite3_exec(db,
                     "PRAGMA journal_mode=WAL;"
                     "CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER);"
                     "INSERT INTO accounts VALUES (1, 100);"
                     "CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT);"
                     "INSERT INTO orders VALUES (7, 'new');",
                     NULL, NULL, NULL) != SQLITE_OK)
        return doc_fail("sqlite: schema: %s", sqlite3_errmsg(db));
    return 0;
}

static long long doc_sqlite_int(const char *sql)
{
    sqlite3_stmt *s = NULL;
    long long v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

static int doc_check_sqlite(void)
{
    if (!sqlite3_get_autocommit(db))
        return doc_fail("sqlite: the snippet left a transaction open");
    long long wrote = doc_sqlite_int("SELECT (SELECT balance FROM accounts WHERE id = 1) = 200"
                                     " OR (SELECT status FROM orders WHERE id = 7) = 'paid'");
    if (wrote != 1)
        return doc_fail("sqlite: neither accounts row 1 nor orders row 7 was written");
    /* the row written carries the token (only the protected table has the column) */
    long long stamped = doc_sqlite_int("SELECT fence_token FROM accounts WHERE id = 1 AND balance = 200");
    if (stamped == -1)
        stamped = doc_sqlite_int("SELECT fence_token FROM orders WHERE id = 7 AND status = 'paid'");
    if (stamped != (long long)token)
        return doc_fail("sqlite: the written row carries token %lld, expected %" PRIu64, stamped,
                        token);
    return 0;
}

static void doc_teardown_sqlite(void)
{
    sqlite3_close(db);
}
