/*
 * ext.c -- entry point of fence_sqlite_ext.so, the loadable-extension build
 * of the lib/sqlite sources.  Loading it registers the SQL functions on the
 * connection (see docs/sqlite.md); it changes nothing in the database
 * until fence_init() or fence_protect() is called.
 *
 * SQLite derives the entry point from the file name: fence_sqlite_ext.so
 * -> sqlite3_fencesqliteext_init, so `.load fence_sqlite_ext` needs no
 * second argument.  sqlite3_fencesqlite_init is the same function under a
 * shorter name.  Only these two symbols are exported (ext.map).
 */
#include "sqlite_internal.h"
SQLITE_EXTENSION_INIT1

FENCE_API int sqlite3_fencesqliteext_init(sqlite3 *db, char **pzErrMsg,
                                          const sqlite3_api_routines *pApi);
FENCE_API int sqlite3_fencesqlite_init(sqlite3 *db, char **pzErrMsg,
                                       const sqlite3_api_routines *pApi);

int sqlite3_fencesqliteext_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi)
{
    SQLITE_EXTENSION_INIT2(pApi);
    return fence_sqlite__register(db, pzErrMsg) == FENCE_OK ? SQLITE_OK : SQLITE_ERROR;
}

int sqlite3_fencesqlite_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi)
{
    return sqlite3_fencesqliteext_init(db, pzErrMsg, pApi);
}
