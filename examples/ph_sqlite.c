/*
 * ph_sqlite.c -- paused_holder's account in a SQLite file, fenced per row
 * with libfence_sqlite (fence_sqlite_protect + fence_sqlite_set_token).
 */
#include "ph_store_impl.h"

#include "fence_sqlite.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ph_sqlite {
    sqlite3 *db;
    int fenced;
};

static void db_path(const ph_config *cfg, char *buf, size_t len, const char *suffix)
{
    snprintf(buf, len, "%s/account.db%s", cfg->dir, suffix);
}

static int db_fail(sqlite3 *db, const char *what, char *err, size_t errlen)
{
    snprintf(err, errlen, "sqlite: %s: %s", what, db != NULL ? sqlite3_errmsg(db) : "out of memory");
    return FENCE_EDB;
}

static int db_open(const ph_config *cfg, int fenced, sqlite3 **out, char *err, size_t errlen)
{
    char path[600];
    db_path(cfg, path, sizeof path, "");
    sqlite3 *db = NULL;
    *out = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        int rc = db_fail(db, path, err, errlen);
        sqlite3_close(db);
        return rc;
    }
    sqlite3_busy_timeout(db, 5000);
    if (fenced) {
        int rc = fence_sqlite_attach(db);
        if (rc != FENCE_OK) {
            snprintf(err, errlen, "fence_sqlite_attach: %s: %s", fence_strerror(rc),
                     fence_sqlite_errmsg(db));
            sqlite3_close(db);
            return rc;
        }
    }
    *out = db;
    return FENCE_OK;
}

static int sq_setup(const ph_config *cfg, int fenced, char *err, size_t errlen)
{
    static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
    char path[600];
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        db_path(cfg, path, sizeof path, suffixes[i]);
        unlink(path);
    }
    sqlite3 *db = NULL;
    int rc = db_open(cfg, fenced, &db, err, errlen);
    if (rc != FENCE_OK)
        return rc;
    static const char schema[] =
        "PRAGMA journal_mode=WAL;"
        "CREATE TABLE account(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL,"
        "                     written_by TEXT NOT NULL,"
        "                     fence_token INTEGER NOT NULL DEFAULT 0);"
        "INSERT INTO account VALUES (1, 100, 'setup', 0);";
    if (sqlite3_exec(db, schema, NULL, NULL, NULL) != SQLITE_OK) {
        rc = db_fail(db, "create the account", err, errlen);
    } else if (fenced) {
        /* The one call that puts the table under fencing: triggers check
         * and stamp fence_token on every INSERT, UPDATE and DELETE. */
        rc = fence_sqlite_protect(db, "account", NULL);
        if (rc != FENCE_OK)
            snprintf(err, errlen, "fence_sqlite_protect: %s: %s", fence_strerror(rc),
                     fence_sqlite_errmsg(db));
    }
    sqlite3_close(db);
    return rc;
}

static int sq_open(const ph_config *cfg, int fenced, void **out, char *err, size_t errlen)
{
    struct ph_sqlite *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return FENCE_ENOMEM;
    }
    s->fenced = fenced;
    int rc = db_open(cfg, fenced, &s->db, err, errlen);
    if (rc != FENCE_OK) {
        free(s);
        return rc;
    }
    *out = s;
    return FENCE_OK;
}

static int sq_read(void *impl, ph_row *row, char *err, size_t errlen)
{
    struct ph_sqlite *s = impl;
    sqlite3_stmt *st = NULL;
    int rc = FENCE_EDB;
    if (sqlite3_prepare_v2(s->db, "SELECT balance, written_by, fence_token FROM account WHERE id = 1",
                           -1, &st, NULL) != SQLITE_OK)
        return db_fail(s->db, "prepare the read", err, errlen);
    if (sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *w = sqlite3_column_text(st, 1);
        row->balance = sqlite3_column_int64(st, 0);
        snprintf(row->writer, sizeof row->writer, "%s", w != NULL ? (const char *)w : "");
        row->token = (uint64_t)sqlite3_column_int64(st, 2);
        rc = FENCE_OK;
    } else {
        rc = db_fail(s->db, "read the account", err, errlen);
    }
    sqlite3_finalize(st);
    return rc;
}

/* Classify the error on the connection into out (first, before any other
 * call on the connection), finalize st, roll back, return the status. */
static int sq_refused(struct ph_sqlite *s, sqlite3_stmt *st, const char *what, ph_outcome *out)
{
    fence_stale e;
    int rc = fence_sqlite_classify(s->db, &e);
    if (rc == FENCE_OK)
        rc = FENCE_EDB;
    out->status = rc;
    if (rc == FENCE_STALE) {
        out->offered = e.offered;
        out->highest = e.highest;
    }
    /* SQLite's own message: classify only read it. */
    snprintf(out->message, sizeof out->message, "%s: %.450s", what, sqlite3_errmsg(s->db));
    sqlite3_finalize(st);
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

static int sq_write(void *impl, long long balance, const char *writer, uint64_t token,
                    const char *holder, ph_outcome *out)
{
    struct ph_sqlite *s = impl;
    /* Fenced: the write carries the token and the triggers stamp it into
     * fence_token.  Not fenced: the token is just data we store. */
    const char *sql = s->fenced
        ? "UPDATE account SET balance = ?1, written_by = ?2 WHERE id = 1"
        : "UPDATE account SET balance = ?1, written_by = ?2, fence_token = ?3 WHERE id = 1";
    if (s->fenced) {
        int rc = fence_sqlite_set_token(s->db, token, holder);
        if (rc != FENCE_OK) {
            out->status = rc;
            snprintf(out->message, sizeof out->message, "fence_sqlite_set_token: %s",
                     fence_sqlite_errmsg(s->db));
            return rc;
        }
    }
    if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return sq_refused(s, NULL, "BEGIN IMMEDIATE", out);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return sq_refused(s, NULL, "prepare the write", out);
    sqlite3_bind_int64(st, 1, balance);
    sqlite3_bind_text(st, 2, writer, -1, SQLITE_TRANSIENT);
    if (!s->fenced)
        sqlite3_bind_int64(st, 3, (sqlite3_int64)token);
    int src = sqlite3_step(st);
    if (src != SQLITE_DONE)
        return sq_refused(s, st, "UPDATE account", out);
    sqlite3_finalize(st);
    if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        return sq_refused(s, NULL, "COMMIT", out);
    out->status = FENCE_OK;
    return FENCE_OK;
}

static void sq_close(void *impl)
{
    struct ph_sqlite *s = impl;
    if (s == NULL)
        return;
    sqlite3_close(s->db);
    free(s);
}

static void sq_teardown(const ph_config *cfg)
{
    (void)cfg; /* the files go with the temp dir */
}

const ph_ops ph__sqlite_ops = {sq_setup, sq_open, sq_read, sq_write, sq_close, sq_teardown};
