/*
 * fence_sqlite.h -- storage-side fencing for SQLite.
 *
 * The rule: a write carries a fencing token (the connection's current
 * token, see fence_sqlite_set_token()).  The database remembers the highest
 * token it has accepted -- per row of a protected table, or per named
 * resource -- and refuses any write whose token is lower.  An equal token
 * is admitted (one holder writes many times).  A write without a valid
 * token (none set, or <= 0) is refused too, unless the table was protected
 * in permissive (migration) mode.  A token column holding 0 means "never
 * fenced".
 *
 * How it works: triggers on each protected table (SQL in sql/sqlite/)
 * compare the row's token column with fence_token(), an application
 * function this library registers on the connection, and stamp written
 * rows with it.  A refused write fails with SQLITE_CONSTRAINT_TRIGGER (its
 * extended code; the primary code is SQLITE_CONSTRAINT) and a message that
 * starts with "fence:stale " (older token) or "fence:notoken " (no valid
 * token); fence_sqlite_classify() turns that into FENCE_STALE or
 * FENCE_ENOTOKEN plus both tokens.  A refused statement is undone whole
 * (RAISE(ABORT)); the enclosing transaction stays open for the caller to
 * roll back.  A connection that has not attached (or loaded the
 * extension) has no fence_token() and cannot write a protected table at
 * all: it fails closed with "no such function: fence_token".
 *
 * Transactions: SQLite runs one writer at a time, so a check and the write
 * it guards are atomic inside a write transaction.  Writers should use
 * BEGIN IMMEDIATE: it takes the write lock up front, so busy_timeout
 * applies and the transaction never has to be retried because it began
 * reading before a newer holder committed (with BEGIN DEFERRED in WAL mode
 * that case fails with SQLITE_BUSY_SNAPSHOT -- still safe, never a stale
 * write, but the work is lost).
 *
 * Same code as a loadable extension: build/fence_sqlite_ext.so gives any
 * SQLite client (the sqlite3 shell, Python's sqlite3, ...) the SQL side:
 *   .load build/fence_sqlite_ext        -- entry sqlite3_fencesqliteext_init
 *                                          (also sqlite3_fencesqlite_init)
 *   SELECT fence_init();                -- fence_resource + fence_advance
 *   SELECT fence_protect('t');          -- or ('t', 'lock_version'), or
 *                                          ('t', NULL or column, 1) permissive
 *   SELECT fence_unprotect('t');
 *   SELECT fence_set_token(42);         -- NULL or 0 clears; returns it
 *   SELECT fence_token();               -- NULL when unset
 *   INSERT INTO fence_advance(resource) VALUES ('r');
 * fence_set_token, fence_protect, fence_unprotect and fence_init are
 * SQLITE_DIRECTONLY (top-level SQL only, never from a trigger or view);
 * fence_token and fence_stale (which only raises the stale error) are
 * SQLITE_INNOCUOUS, so the triggers work under PRAGMA trusted_schema=OFF.
 *
 * Ownership and threads (stated once): the library never owns the sqlite3
 * handle.  fence_sqlite_attach() hangs a small state (the token) on the
 * connection through its registered functions; SQLite frees it when the
 * connection closes, so there is nothing to detach.  The token belongs to
 * the connection and may be set from any thread.  Everything a call
 * returns through an out-pointer is owned by the caller.  The text of
 * fence_sqlite_errmsg() belongs to the library and the calling thread: it
 * stays valid until that thread's next fence_sqlite_* call.
 *
 * Names: tables and resources are names in the "main" schema, at most
 * FENCE_NAME_MAX bytes; the library quotes them itself, so any name works
 * (quotes, spaces, semicolons included).  Everything it creates lives in
 * main, qualified as such.  Trigger names fence_bi_<table>,
 * fence_ai_<table>, fence_bu_<table>, fence_au_<table>, fence_bd_<table>
 * are reserved.  A table's fencing triggers are found by what they are
 * (on that table, a reserved prefix, calling fence_token()), so after
 * ALTER TABLE RENAME -- which keeps the old trigger names -- protecting or
 * unprotecting the table under its new name still finds them.
 *
 * Keys: a write that replaces another row (INSERT OR REPLACE, REPLACE,
 * UPSERT, UPDATE OR REPLACE) is checked against the token of the row it
 * would replace, found through every UNIQUE key, a WITHOUT ROWID table's
 * primary key, and a rowid table's rowid (under any of its names: rowid,
 * _rowid_, oid, its INTEGER PRIMARY KEY).
 *
 * Limits -- what this does not protect against:
 *   - Hostile code.  SQLite has no access control: any connection to the
 *     file can DROP TRIGGER (or fence_unprotect(), or edit the file) and
 *     then write freely or lower the stamps and marks.  The gate stops
 *     stale-but-honest writers that use this library or the extension;
 *     it is no defence against code that means harm and can open the
 *     database file.
 *   - A TEMP table or view with a protected table's name shadows it for
 *     unqualified SQL on the connection that made it: fence_protect()
 *     refuses while one exists; one made later takes that connection's
 *     unqualified writes (to itself, unfenced), while the triggers keep
 *     fencing the main table for every writer that reaches it.
 *   - An INSERT into a rowid table without an explicit rowid is also
 *     checked against the row with rowid -1, if there is one (SQLite shows
 *     -1 as the new rowid to BEFORE INSERT triggers): an insert may then
 *     be refused as stale although it replaces nothing; never the reverse.
 *   - Permissive tables with PRAGMA recursive_triggers=ON: a write without
 *     a token that changes the token column is refused ("too many levels
 *     of trigger recursion"), since restoring the old stamp re-runs the
 *     trigger, which cannot tell the restore from the client's write.
 *   - A token column value that is not an integer (a REAL such as 1e30,
 *     text) is compared as SQLite compares values; fence_sqlite_classify()
 *     reports such a stamp as highest = 0 (unknown).
 */
#ifndef FENCE_SQLITE_H
#define FENCE_SQLITE_H

#include <stdint.h>
#include <sqlite3.h>

#include "fence_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The token column added when a table has none. */
#define FENCE_SQLITE_DEFAULT_COLUMN "fence_token"

/*
 * Register fence_token(), fence_set_token() and the other SQL functions on
 * the connection and create the fence schema (fence_resource,
 * fence_advance) if missing.  Idempotent; attaching again keeps the
 * connection's token.  FENCE_EINVAL (NULL db), FENCE_EDB (SQLite refused;
 * see fence_sqlite_errmsg()), FENCE_ENOMEM.
 */
FENCE_API int fence_sqlite_attach(sqlite3 *db);

typedef struct fence_sqlite_protect_options {
    /* The token column.  NULL (default): "fence_token", added as
     * INTEGER NOT NULL DEFAULT 0 when missing.  Otherwise an existing
     * column with INTEGER affinity, e.g. Rails' "lock_version": its NULLs
     * become 0 and it is stamped with tokens from then on (so it no longer
     * works as an optimistic-lock counter; raise the lease's counter above
     * the column's largest value with fence_token_raise() first). */
    const char *column;
    /* 0 (default): writes without a token are refused.  1: migration
     * mode, writes without a token are admitted: an UPDATE keeps the
     * row's stamp whatever it writes to the column (as the PostgreSQL
     * module does), an INSERT is stamped 0 and may not write the column
     * above 0 (fence:forbidden).  Writes with a token are still checked
     * and stamped. */
    int permissive;
} fence_sqlite_protect_options;

/* Defaults: column NULL, permissive 0. */
FENCE_API void fence_sqlite_protect_options_init(fence_sqlite_protect_options *opts);

/*
 * Protect TABLE (a table of the main schema): per-row fencing of INSERT,
 * UPDATE and DELETE, checked by triggers.  opts may be NULL (defaults).
 * Atomic (one savepoint) and idempotent: protecting again replaces the
 * triggers, e.g. to change the mode -- do so after adding a UNIQUE index
 * or renaming the table.  Unique indexes on expressions are refused
 * (FENCE_EINVAL): the INSERT OR REPLACE check could not see through them.
 * Requires fence_sqlite_attach() (FENCE_ESTATE).  FENCE_EINVAL for a
 * missing table or column, a column without INTEGER affinity, a bad name,
 * a TEMP table or view of the same name on this connection, or a trigger
 * name this table needs that another table holds (one renamed from this
 * name while protected: protect it again first); FENCE_EDB when SQLite
 * refuses.
 */
FENCE_API int fence_sqlite_protect(sqlite3 *db, const char *table,
                                   const fence_sqlite_protect_options *opts);

/* Drop TABLE's fencing triggers, whatever their names (its token column
 * stays).  FENCE_OK also when it was not protected. */
FENCE_API int fence_sqlite_unprotect(sqlite3 *db, const char *table);

/*
 * Set the token this connection's next writes carry (1..INT64_MAX).
 * 0 clears it: writes are then refused (FENCE_ENOTOKEN) except to
 * permissive tables.  A token above INT64_MAX returns FENCE_EINVAL and
 * also clears it, so a caller ignoring the error cannot keep writing with
 * an older token.  FENCE_ESTATE before fence_sqlite_attach().
 */
FENCE_API int fence_sqlite_set_token(sqlite3 *db, uint64_t token);

/* The connection's current token into *token_out (0 when unset). */
FENCE_API int fence_sqlite_token(sqlite3 *db, uint64_t *token_out);

/*
 * Advance RESOURCE's high-water mark to the connection's token, inside the
 * caller's transaction if one is open (commit or roll back together with
 * the writes it guards).  FENCE_OK for an equal or higher token,
 * FENCE_STALE for a lower one, FENCE_ENOTOKEN without a token, FENCE_EDB
 * for other database errors (e.g. SQLITE_BUSY); use
 * fence_sqlite_classify() for the tokens.  The same as
 * INSERT INTO fence_advance(resource) VALUES (?).
 */
FENCE_API int fence_sqlite_advance(sqlite3 *db, const char *resource);

/* What a refused write was.  Caller-owned; the strings are copies. */
typedef struct fence_sqlite_error {
    int status;        /* FENCE_STALE, FENCE_ENOTOKEN or FENCE_EDB */
    int sqlite_code;   /* sqlite3_extended_errcode() */
    int64_t offered;   /* the writer's token (0 when not known) */
    int64_t highest;   /* the token the row/resource holds (0 when not known) */
    char kind[16];     /* "table", "resource", or "" */
    char name[FENCE_NAME_MAX + 1]; /* the table or resource, or "" */
    char message[1024];            /* sqlite3_errmsg(), maybe truncated */
} fence_sqlite_error;

/*
 * Classify the error now on the connection (call it right after the
 * failed sqlite3_step()/sqlite3_exec(), before any other call on db).
 * Returns FENCE_STALE (refused: older token; offered, highest and the
 * table/resource are parsed from the message), FENCE_ENOTOKEN (refused:
 * no valid token), FENCE_EDB (any other SQLite error), or FENCE_OK if the
 * connection holds no error.  out may be NULL.
 */
FENCE_API int fence_sqlite_classify(sqlite3 *db, fence_sqlite_error *out);

/* Detail of the last failure of a fence_sqlite_* call on this thread ("" if
 * none).  Never NULL. */
FENCE_API const char *fence_sqlite_errmsg(void);

#ifdef __cplusplus
}
#endif
#endif /* FENCE_SQLITE_H */
