/* internal.h -- shared between fence_sqlite.c and ext.c (not installed).
 *
 * fence_sqlite.c is compiled twice: once for libfence_sqlite (linked
 * against libsqlite3), once with FENCE_SQLITE_EXTENSION defined for
 * fence_sqlite_ext.so, where every sqlite3_* call goes through the
 * sqlite3_api table SQLite hands to the extension's entry point. */
#ifndef FENCE_SQLITE_INTERNAL_H
#define FENCE_SQLITE_INTERNAL_H

#ifdef FENCE_SQLITE_EXTENSION
#include <sqlite3ext.h>
#else
#include <sqlite3.h>
#endif

/* Register the SQL functions on db (no schema changes).  Returns a
 * fence_status; on failure *errmsg (optional) gets a sqlite3_malloc'd
 * message. */
int fence_sqlite__register(sqlite3 *db, char **errmsg);

#endif
