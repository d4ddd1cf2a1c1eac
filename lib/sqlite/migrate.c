/* migrate.c -- moving a table's fencing from an application's column (an
 * ORM's version column that an older fence stamped with tokens: the
 * retrofit that let one holder's writes leave the same version) to fence's
 * own column, in the savepoint the caller opens
 * (fence_sqlite__in_savepoint): the old triggers dropped, fence's column
 * added if missing and given exactly the old column's stamps, the table
 * protected again on it in the same mode.  The old column is the
 * application's again; its values stay as they are. */
#include "sqlite_internal.h"

#define keep fence_sqlite__keep
#define quote_ident fence_sqlite__quote_ident

/* Fence's own column on TABLE (canonical): added when missing, then given
 * OLD's stamps. */
static int copy_stamps(sqlite3 *db, const char *table, const char *old, int have_own,
                       fs_arena *a)
{
    fs_var vars[] = {
        {"TABLE", keep(a, quote_ident(table))},
        {"COL", keep(a, quote_ident(FENCE_SQLITE_DEFAULT_COLUMN))},
        {"COL_TYPE", FENCE_SQLITE_COLUMN_TYPE},
        {"OLD_COL", keep(a, quote_ident(old))},
    };
    if (a->oom) {
        return fs_fail(db, FENCE_ENOMEM, "out of memory");
    }
    int rc = FENCE_OK;
    if (!have_own) {
        rc = fence_sqlite__exec(db, "adding the token column", fence_sqlite__sql_add_column, vars,
                                3);
    }
    if (rc == FENCE_OK) {
        rc = fence_sqlite__exec(db, "copying the stamps", fence_sqlite__sql_migrate_copy, vars, 4);
    }
    return rc;
}

int fence_sqlite__migrate_body(sqlite3 *db, const void *arg)
{
    const fs_migrate *m = arg;
    fs_arena a = {0};
    fs_shape old, own;
    const char *table = NULL, *stamped = NULL;
    int permissive = 0;
    int rc = fence_sqlite__ensure_schema(db);
    if (rc == FENCE_OK) {
        rc = fence_sqlite__find_table(db, m->table, 1, &a, &table, NULL);
    }
    if (rc == FENCE_OK) {
        rc = fence_sqlite__stamped_column(db, table, &a, &stamped, &permissive);
    }
    const char *col = m->column;
    if (rc == FENCE_OK && stamped != NULL) {
        if (col != NULL && sqlite3_stricmp(col, stamped) != 0) {
            rc = fs_fail(db, FENCE_EINVAL, "the fencing triggers of \"%s\" stamp column \"%s\", "
                         "not \"%s\": name that one, or none", table, stamped, col);
        }
        col = stamped;
    } else if (rc == FENCE_OK && col == NULL) {
        rc = fs_fail(db, FENCE_EINVAL, "\"%s\" is not protected: name the column that holds "
                     "its tokens", table);
    }
    if (rc == FENCE_OK) {
        rc = fence_sqlite__shape_read(db, table, col, &a, &old);
    }
    if (rc == FENCE_OK && old.col == NULL) {
        rc = fs_fail(db, FENCE_EINVAL, "table \"%s\" has no column \"%s\"", table, col);
    }
    if (rc == FENCE_OK && old.col_own) {
        /* Fencing is on fence's own column already (a second call, or a
         * table protected by this version): nothing to move. */
        if (stamped == NULL) {
            rc = fs_fail(db, FENCE_EINVAL, "\"%s\" of \"%s\" is fence's own column already: "
                         "protect the table (fence_protect)", old.col, table);
        }
        fence_sqlite__arena_free(&a);
        return rc;
    }
    if (rc == FENCE_OK) {
        rc = fence_sqlite__unprotect_body(db, table);
    }
    if (rc == FENCE_OK) {
        rc = fence_sqlite__shape_read(db, table, FENCE_SQLITE_DEFAULT_COLUMN, &a, &own);
    }
    if (rc == FENCE_OK) {
        rc = copy_stamps(db, table, old.col, own.col != NULL, &a);
    }
    if (rc == FENCE_OK) {
        const fs_protect p = {table, NULL, permissive};
        rc = fence_sqlite__protect_body(db, &p);
    }
    fence_sqlite__arena_free(&a);
    return rc;
}
