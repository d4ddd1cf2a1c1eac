/* sqlite_internal.h -- what the files of libfence_sqlite share (not
 * installed).
 *
 * Every .c file of lib/sqlite is compiled twice: once for libfence_sqlite (linked
 * against libsqlite3), once with FENCE_SQLITE_EXTENSION defined for
 * fence_sqlite_ext.so, where every sqlite3_* call goes through the
 * sqlite3_api table SQLite hands to the extension's entry point (ext.c).
 *
 * The files, lowest first; a file calls only those above it in this list:
 *   errmsg.c    the per-thread, per-connection message; name checks
 *   state.c     the per-connection state (token, holder), its registry, and
 *               the hooks that end a token with its transaction
 *   template.c  the embedded SQL: placeholders, savepoints, the schema
 *               (created, or upgraded from before holders), and the arena
 *               that owns the strings built for it
 *   shape.c     reading a table: canonical name, token column, keys
 *   protect.c   creating and dropping a table's fencing triggers
 *   migrate.c   moving a table's fencing from an application's column to
 *               fence's own
 *   classify.c  reading a refusal back (message -> fence_stale)
 *   sqlfuncs.c  the SQL functions and their registration
 *   api.c       the C API of fence_sqlite.h
 *   ext.c       the extension's entry points (extension build only)
 */
#ifndef FENCE_SQLITE_INTERNAL_H
#define FENCE_SQLITE_INTERNAL_H

#ifdef FENCE_SQLITE_EXTENSION
#include <sqlite3ext.h>
/* The routine table; defined in ext.c (SQLITE_EXTENSION_INIT1). */
extern const sqlite3_api_routines *sqlite3_api;
#else
#include <sqlite3.h>
#endif

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "fence_sqlite.h"

/* ---- errmsg.c ------------------------------------------------------------
 * Messages go to this library's per-thread slot, keyed by the connection
 * (fence_sqlite_errmsg).  fail* return their status. */
int fence_sqlite__fail(const sqlite3 *db, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* FENCE_EDB with "WHAT: <sqlite3_errmsg(db)>" (read it before anything else
 * runs on db). */
int fence_sqlite__fail_db(sqlite3 *db, const char *what);
/* A call on db succeeded: clear its message.  Returns FENCE_OK. */
fence_status fence_sqlite__ok(const sqlite3 *db);
/* A table, column or resource name (fence__name_problem, any byte but
 * NUL): FENCE_OK, or FENCE_EINVAL with "WHAT: name ...". */
int fence_sqlite__check_name(const sqlite3 *db, const char *what, const char *name);

#define fs_fail fence_sqlite__fail
#define fs_fail_db fence_sqlite__fail_db

/* ---- state.c -------------------------------------------------------------
 * One state per connection, handed to SQLite as the user data of every
 * function registered on it; each registration holds a reference, which
 * SQLite drops (fence_sqlite__state_unref) when the function is replaced or
 * the connection closes.  A registry maps a sqlite3* to its state for the
 * C API and the hooks.  The token is read lock-free (fence_token(), the
 * row triggers' hot path); the holder, read only by the resource triggers,
 * under hlock; both are written together under hlock
 * (fence_sqlite__state_set).
 *
 * A token serves one write transaction: the connection's commit and
 * rollback hooks (fence_sqlite__hooks_install) clear the token and holder
 * at every COMMIT of a write transaction (when it starts: the hook runs
 * first) and at every ROLLBACK.  SQLite reports nothing when a transaction
 * that only read ends, so a token set outside a write transaction waits
 * for the next one (docs/sqlite.md, "A token per transaction"). */
typedef struct fs_state {
    sqlite3 *db;
    _Atomic int64_t token; /* 0: unset; else 1..FENCE_TOKEN_MAX */
    pthread_mutex_t hlock;
    char holder[FENCE_HOLDER_LEN + 1]; /* "" = none; else 32 lowercase hex */
    int refs;                          /* guarded by the registry's lock */
    struct fs_state *next;
} fs_state;

/* db's state, or NULL when nothing was registered on db. */
fs_state *fence_sqlite__state_get(const sqlite3 *db);
/* db's state, created if missing, with one reference for the caller;
 * NULL when out of memory. */
fs_state *fence_sqlite__state_acquire(sqlite3 *db);
void fence_sqlite__state_ref(fs_state *s);
void fence_sqlite__state_unref(void *s); /* an xDestroy for SQLite */
/* Set the token (0 clears) and the holder (NULL or "": none; must have
 * passed fence__holder_problem) together.  Setting a token (re)installs
 * the hooks, so that the transaction it serves ends it, whoever replaced
 * them meanwhile. */
void fence_sqlite__state_set(fs_state *s, int64_t token, const char *holder);
/* Make db's commit and rollback hooks fence's (SQLite keeps one of each
 * per connection: an application's own is replaced). */
void fence_sqlite__hooks_install(sqlite3 *db);
/* The holder into out ("" for none). */
void fence_sqlite__state_holder(fs_state *s, char out[FENCE_HOLDER_LEN + 1]);
/* Holder ids are checked with fence__holder_problem (lib/common). */

/* ---- template.c ----------------------------------------------------------
 * An arena: the strings one operation builds (sqlite3_malloc'd), owned in
 * one place and freed together. */
typedef struct fs_arena {
    char **p;
    size_t n, cap;
    int oom; /* a keep failed: fail with FENCE_ENOMEM */
} fs_arena;
/* Take ownership of s (NULL counts as out of memory) and return it; NULL
 * (s freed) when out of memory. */
char *fence_sqlite__keep(fs_arena *a, char *s);
/* Finish the builder into the arena; if_empty (static) when it holds
 * nothing; NULL (and a->oom) when out of memory. */
const char *fence_sqlite__keep_str(fs_arena *a, sqlite3_str *s, const char *if_empty);
void fence_sqlite__arena_free(fs_arena *a);

/* A {{KEY}} placeholder and the text it becomes (see sql/sqlite/README.md). */
typedef struct fs_var {
    const char *key;
    const char *val;
} fs_var;
/* Fill the placeholders of TPL into *out (sqlite3_malloc'd).  An unknown
 * placeholder is a bug in the SQL files: FENCE_EINVAL. */
int fence_sqlite__fill(sqlite3 *db, const char *tpl, const fs_var *vars, size_t nvars,
                       char **out);
/* Fill and run TPL; FENCE_EDB "WHAT: ..." when SQLite refuses. */
int fence_sqlite__exec(sqlite3 *db, const char *what, const char *tpl, const fs_var *vars,
                       size_t nvars);
/* "name" with internal double quotes doubled (sqlite3_malloc'd). */
char *fence_sqlite__quote_ident(const char *name);
/* Append FMT (an sqlite3_mprintf format: %w, %q) to S, after SEP unless S
 * is still empty. */
void fence_sqlite__list_add(sqlite3_str *s, const char *sep, const char *fmt, ...);
/* Run body inside SAVEPOINT fence: all or nothing, inside or outside the
 * caller's transaction.  Returns body's status (its message stays). */
int fence_sqlite__in_savepoint(sqlite3 *db, int (*body)(sqlite3 *, const void *),
                               const void *arg);
/* Create the fence schema (fence_resource, fence_advance) if missing, or
 * upgrade one from before holders (fence_resource without its holder
 * column: the column is added, the guard triggers replaced), atomically:
 * in a savepoint, and when called outside a transaction after taking the
 * write lock (BEGIN IMMEDIATE) when an upgrade is due, so that two
 * connections upgrading at once wait for each other (busy_timeout) rather
 * than fail.  For fence_sqlite_attach() and fence_init(). */
int fence_sqlite__install_schema(sqlite3 *db);
/* The same inside the caller's savepoint (fence_sqlite_protect): the
 * upgrade when due (upgrade_holder.sql or upgrade_triggers.sql), then
 * schema.sql, which creates whatever is missing. */
int fence_sqlite__ensure_schema(sqlite3 *db);

/* The SQL, embedded by scripts/embed. */
extern const char fence_sqlite__sql_schema[];
extern const char fence_sqlite__sql_upgrade_holder[];
extern const char fence_sqlite__sql_upgrade_triggers[];
extern const char fence_sqlite__sql_row_before_insert[];
extern const char fence_sqlite__sql_row_after_insert[];
extern const char fence_sqlite__sql_row_before_update[];
extern const char fence_sqlite__sql_row_after_update[];
extern const char fence_sqlite__sql_row_before_delete[];
extern const char fence_sqlite__sql_retrofit[];
extern const char fence_sqlite__sql_add_column[];
extern const char fence_sqlite__sql_drop_row[];
extern const char fence_sqlite__sql_find_row_triggers[];
extern const char fence_sqlite__sql_find_stamped_column[];
extern const char fence_sqlite__sql_migrate_copy[];

/* ---- shape.c -------------------------------------------------------------
 * What the triggers need to know about a table.  Every string is owned by
 * the arena passed in. */
typedef struct fs_shape {
    const char *table;    /* the name as stored (canonical case) */
    int without_rowid;
    const char *col;      /* the token column as stored; NULL when missing */
    int col_own;          /* col is fence's own (fence_sqlite__column_is_own) */
    const char *rowkey;   /* "<k> IS NEW.<k> AND ...": finds the written row */
    const char *conflict; /* "(...) OR (...)": rows a new key collides with; "0" */
    const char *changed;  /* "NEW.k IS NOT OLD.k OR ...": a key changes; "0" */
    const char *keycols;  /* "k1", "k2", ...: names that change a key; "" */
} fs_shape;
/* The rule by which fence knows its own token column (docs/sqlite.md,
 * "The token column"): the column is named FENCE_SQLITE_DEFAULT_COLUMN, or
 * declared FENCE_SQLITE_COLUMN_TYPE (the type fence gives every column it
 * adds), both compared without case.  Any other column is the
 * application's, which fence never stamps. */
int fence_sqlite__column_is_own(const char *name, const char *type);
/* TABLE's canonical name (a table of main) into *canon.  With
 * refuse_shadow, a TEMP table or view of the same name is refused (on this
 * connection unqualified SQL would reach it, not the main table). */
int fence_sqlite__find_table(sqlite3 *db, const char *table, int refuse_shadow, fs_arena *a,
                             const char **canon, int *without_rowid);
/* find_table (refusing shadows), then the columns and keys; WANT is the
 * token column's name (it may be missing: out->col NULL). */
int fence_sqlite__shape_read(sqlite3 *db, const char *table, const char *want, fs_arena *a,
                             fs_shape *out);

/* ---- protect.c -----------------------------------------------------------
 * Bodies for fence_sqlite__in_savepoint. */
typedef struct fs_protect {
    const char *table;  /* as given */
    const char *column; /* NULL: FENCE_SQLITE_DEFAULT_COLUMN */
    int permissive;
} fs_protect;
int fence_sqlite__protect_body(sqlite3 *db, const void *fs_protect_arg);
/* The column TABLE's (canonical) fencing triggers stamp into *col (owned
 * by the arena; NULL: not protected) and their mode into *permissive
 * (find_stamped_column.sql). */
int fence_sqlite__stamped_column(sqlite3 *db, const char *table, fs_arena *a, const char **col,
                                 int *permissive);
int fence_sqlite__unprotect_body(sqlite3 *db, const void *table);

/* ---- migrate.c -------------------------------------------------------------
 * A body for fence_sqlite__in_savepoint: fence_sqlite_migrate_version_column. */
typedef struct fs_migrate {
    const char *table;  /* as given */
    const char *column; /* NULL: the one the table's fencing triggers stamp */
} fs_migrate;
int fence_sqlite__migrate_body(sqlite3 *db, const void *fs_migrate_arg);

/* ---- classify.c ----------------------------------------------------------
 * A refusal's message (sqlite3_errmsg text) read back: FENCE_STALE for
 * "fence:stale ...", with *out (optional) filled from it (the reason from
 * "is older than" / "is not newer than", the holder from " holder=<32
 * lowercase hex>" after "(write rejected)"); FENCE_ENOTOKEN
 * for "fence:notoken ..."; FENCE_EDB for anything else, NULL included.
 * *out is zeroed whenever it is non-NULL.  Reads msg only up to its NUL;
 * never fails on any text (the fuzzer's entry point). */
fence_status fence_sqlite__parse_message(const char *msg, fence_stale *out);

/* ---- sqlfuncs.c ----------------------------------------------------------
 * Register the SQL functions on db (no schema changes).  Returns a
 * fence_status; on failure *errmsg (optional) gets a sqlite3_malloc'd
 * message. */
int fence_sqlite__register(sqlite3 *db, char **errmsg);

#endif
