/*
 * fence_sqlite.h -- storage-side fencing for SQLite.
 *
 * A write carries the fencing token and holder id of its transaction
 * (fence_sqlite_set_token: a token serves one write transaction).  The
 * database keeps the highest token it has
 * accepted -- per row of a protected table, or per named resource, where
 * it also records the holder -- and refuses a write with a lower one
 * (FENCE_STALE) or with none (FENCE_ENOTOKEN, except on permissive
 * tables).  An equal token is admitted; on a resource only from the holder
 * recorded with it (else FENCE_STALE, reason FENCE_STALE_REPEAT).  How it
 * works (the triggers, BEGIN IMMEDIATE, the loadable extension, keys,
 * names, limits): docs/sqlite.md.
 *
 * Ownership and threads (stated once): the library never owns the sqlite3
 * handle; fence_sqlite_attach() hangs a small state (token, holder) on the
 * connection, freed by SQLite when the connection closes, and makes the
 * connection's commit and rollback hooks its own (SQLite keeps one of each
 * per connection: an application's is replaced; docs/sqlite.md).  The
 * token and holder belong to the connection and may be set from any
 * thread.  Whatever a call returns through an out-pointer belongs to the
 * caller.
 *
 * Errors: every call that can fail returns a fence_status; the detail is
 * fence_sqlite_errmsg(db), kept per connection and per calling thread.
 * A refused write itself fails in SQLite (SQLITE_CONSTRAINT_TRIGGER);
 * fence_sqlite_classify() reads it back.  The refused statement is undone
 * whole, nothing more: a transaction open around it stays open, with its
 * write lock, for its owner to roll back (in autocommit SQLite rolls the
 * statement's own transaction back).  Names (tables, columns,
 * resources) are 1..FENCE_NAME_MAX bytes of the main schema; any byte but
 * NUL, quoted by the library.  Tokens are 1..FENCE_TOKEN_MAX.
 */
#ifndef FENCE_SQLITE_H
#define FENCE_SQLITE_H

#include <stdint.h>
#include <sqlite3.h>

#include "fence_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The token column fence adds to a table it protects, and the declared
 * type it gives every column it adds: the way it knows its own column
 * again (a column with this name, or of this type, is fence's; any other
 * is the application's and is never stamped).  SQLite and the ORMs read
 * the type as INTEGER. */
#define FENCE_SQLITE_DEFAULT_COLUMN "fence_token"
#define FENCE_SQLITE_COLUMN_TYPE "INTEGER FENCE_TOKEN"

/*
 * Register the SQL functions (fence_token(), fence_set_token(), ...) on db,
 * install the commit and rollback hooks that end a token with its
 * transaction, and create the fence schema (fence_resource, fence_advance)
 * if missing; a schema from before holders is upgraded in place (the
 * holder column is added, its marks count as recorded without a holder),
 * and guard triggers of an older version are replaced.  Idempotent;
 * attaching again keeps the token and holder (unless an upgrade writes:
 * a write transaction of its own ends them).
 * FENCE_EINVAL (NULL db), FENCE_EDB (SQLite refused), FENCE_ENOMEM.
 */
FENCE_API fence_status fence_sqlite_attach(sqlite3 *db);

typedef struct fence_sqlite_protect_options {
    /* The token column, fence's own: NULL (default) is "fence_token".
     * When missing it is added (FENCE_SQLITE_COLUMN_TYPE NOT NULL DEFAULT
     * 0); an existing one must be fence's own (named "fence_token" or
     * declared FENCE_SQLITE_COLUMN_TYPE; its NULLs become 0).  An
     * application's column (e.g. Rails' "lock_version") is refused
     * (FENCE_EINVAL): fence stamps its own column beside it, and the
     * version keeps its meaning (fence_sqlite_migrate_version_column moves
     * a table an older fence protected on one). */
    const char *column;
    /* 0 (default): writes without a token are refused.  1: migration
     * mode, they are admitted (an UPDATE keeps the row's stamp, an INSERT
     * is stamped 0); writes with a token are still checked and stamped. */
    int permissive;
} fence_sqlite_protect_options;

/* Defaults: column NULL, permissive 0.  opts NULL: no-op. */
FENCE_API void fence_sqlite_protect_options_init(fence_sqlite_protect_options *opts);

/*
 * Protect TABLE (of the main schema): triggers check and stamp every
 * INSERT, UPDATE and DELETE.  opts NULL: defaults.  Atomic (a savepoint)
 * and idempotent: protecting again replaces the triggers (to change the
 * mode, or after adding a UNIQUE index or renaming the table).
 * FENCE_ESTATE before fence_sqlite_attach(db).  FENCE_EINVAL: bad name or
 * option, no such table, a column that is not fence's own, or without INTEGER affinity, a
 * unique index on an expression, a TEMP table or view of that name on
 * this connection, a reserved trigger name held by another table.
 * FENCE_EDB when SQLite refuses.
 */
FENCE_API fence_status fence_sqlite_protect(sqlite3 *db, const char *table,
                                            const fence_sqlite_protect_options *opts);

/*
 * Move TABLE's fencing from an application's column to fence's own, for
 * a table that an older fence protected on its version column (e.g.
 * Rails' "lock_version", which then held tokens, so that one holder's
 * writes all left the same version): in one savepoint, fence's column
 * (FENCE_SQLITE_DEFAULT_COLUMN) is added if missing and given exactly the
 * stamps COLUMN holds, and the table is protected on it in the same mode
 * (strict or permissive); COLUMN is the application's again, with the
 * values it has.  COLUMN NULL: the one the table's fencing triggers stamp
 * (the table must be protected then).  A table already fenced on fence's
 * own column: FENCE_OK, nothing changes.  FENCE_EINVAL (bad name, no such
 * table or column, the triggers stamp another column, an unprotected
 * table without COLUMN, COLUMN already fence's own), FENCE_ESTATE before
 * attach, FENCE_EDB.  From SQL: fence_migrate_version_column(table [,
 * column]).
 */
FENCE_API fence_status fence_sqlite_migrate_version_column(sqlite3 *db, const char *table,
                                                           const char *column);

/* Drop TABLE's fencing triggers, whatever their names (the token column
 * stays).  FENCE_OK also when it was not protected; FENCE_EINVAL for a bad
 * name or no such table; FENCE_ESTATE before attach. */
FENCE_API fence_status fence_sqlite_unprotect(sqlite3 *db, const char *table);

/*
 * Set the token and the holder id of one write transaction, together: the
 * one open on the connection when it is a write transaction, else the next
 * one that writes (however many reads come first).  They are gone at that
 * transaction's COMMIT (as it starts) or ROLLBACK, and at any ROLLBACK
 * before it: every write transaction sets its own (docs/sqlite.md, "A token
 * per transaction").  token 0 clears the token (writes are then refused,
 * FENCE_ENOTOKEN, except to permissive tables).  holder: the lease's
 * holder id, FENCE_HOLDER_LEN (32) lowercase hex digits (copied), or NULL
 * for none.  A token above FENCE_TOKEN_MAX or a malformed holder (wrong
 * length, "" included, uppercase, not hex): FENCE_EINVAL, and the token and
 * holder are cleared too, so a caller that ignores the error cannot go on
 * writing with an older token or identity.  FENCE_ESTATE before attach.
 */
FENCE_API fence_status fence_sqlite_set_token(sqlite3 *db, uint64_t token, const char *holder);

/* The token set for the connection's current or next write transaction
 * into *token (0 when none: unset, or its transaction ended).
 * FENCE_EINVAL (NULL db or token), FENCE_ESTATE before attach. */
FENCE_API fence_status fence_sqlite_token(sqlite3 *db, uint64_t *token);

/* The holder id that goes with it into holder ("" when none); holder
 * is "" on any failure.  FENCE_EINVAL (NULL db or holder), FENCE_ESTATE
 * before attach. */
FENCE_API fence_status fence_sqlite_holder(sqlite3 *db, char holder[FENCE_HOLDER_LEN + 1]);

/*
 * Advance RESOURCE's mark to the transaction's token and holder, inside the
 * caller's transaction if one is open (it commits or rolls back with the
 * writes it guards); the same as INSERT INTO fence_advance(resource)
 * VALUES (?).  FENCE_OK for a higher token (the mark becomes the token and
 * holder) or an equal one from the same holder ("none" equals only
 * "none"); FENCE_STALE for a lower one (reason FENCE_STALE_OLDER) or an
 * equal one from another holder (FENCE_STALE_REPEAT); FENCE_ENOTOKEN
 * without a token -- either way the statement is undone and the
 * caller's transaction stays open (see Errors above);
 * FENCE_EDB for other database errors (e.g. SQLITE_BUSY); FENCE_EINVAL,
 * FENCE_ESTATE.  stale (optional) is zeroed, and filled on FENCE_STALE
 * (kind FENCE_OBJECT_RESOURCE, holder = the mark's holder or "").
 */
FENCE_API fence_status fence_sqlite_advance(sqlite3 *db, const char *resource,
                                            fence_stale *stale);

/* RESOURCE's high-water mark into *mark: the highest token that advanced
 * it, 0 if none has (its holder: SELECT holder FROM fence_resource).  A read, in the caller's transaction if one is open.
 * FENCE_EINVAL (bad name, NULL mark), FENCE_ESTATE before attach,
 * FENCE_EDB. */
FENCE_API fence_status fence_sqlite_mark(sqlite3 *db, const char *resource, uint64_t *mark);

/*
 * Classify the error now on the connection: call it right after the
 * failed sqlite3_step()/sqlite3_exec(), before any other call on db.
 * FENCE_STALE (refused: older token, or a resource's equal token from
 * another holder), FENCE_ENOTOKEN (refused: no valid
 * token), FENCE_EDB (any other SQLite error; its code stays available from
 * sqlite3_extended_errcode()), FENCE_OK (no error on db), FENCE_EINVAL
 * (NULL db).  stale (optional) is zeroed, and filled on FENCE_STALE: both
 * tokens (highest 0 when the stamp is not an integer), kind TABLE or
 * RESOURCE, object = the table or resource name as stored, unquoted,
 * reason OLDER or REPEAT, holder = a resource mark's holder ("" for none
 * and for tables, which record no holder).
 * fence_sqlite_errmsg(db) then holds SQLite's message.
 */
FENCE_API fence_status fence_sqlite_classify(sqlite3 *db, fence_stale *stale);

/* The message of the calling thread's last failed fence_sqlite_* call on
 * db ("" if none, or if a later call on db succeeded); db NULL: of a call
 * that was given no db.  Never NULL; valid until this thread's next
 * fence_sqlite_* call on db. */
FENCE_API const char *fence_sqlite_errmsg(const sqlite3 *db);

#ifdef __cplusplus
}
#endif
#endif /* FENCE_SQLITE_H */
