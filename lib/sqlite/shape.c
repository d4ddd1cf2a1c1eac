/* shape.c -- reading a table before protecting it: its canonical name,
 * its token column, and every key through which a write could replace a
 * row (UNIQUE keys, a WITHOUT ROWID table's primary key, the rowid). */
#include "sqlite_internal.h"

#include <string.h>

#define keep fence_sqlite__keep
#define list_add fence_sqlite__list_add

/* The names SQLite gives the rowid when no column takes them. */
static const char *const rowid_names[3] = {"rowid", "_rowid_", "oid"};

/* What reading the columns and keys collects on the way to an fs_shape. */
typedef struct fs_reader {
    fs_arena *a;
    const char *table;    /* canonical */
    int without_rowid;
    const char *col;      /* the token column as stored, NULL when missing */
    int col_own;          /* ... and it is fence's own (fence_sqlite__column_is_own) */
    const char *rowkey;
    sqlite3_str *conflict, *changed, *keycols;
    /* For rowid tables: */
    int npk;              /* columns in the PRIMARY KEY */
    const char *pk_col;   /* the PRIMARY KEY column when it is the only one, quoted */
    int pk_integer;       /* ... declared exactly INTEGER */
    int pk_index;         /* the PRIMARY KEY has an index of its own (not the rowid) */
    int shadow[3];        /* rowid, _rowid_, oid taken by a column */
} fs_reader;

/* One row of pragma_table_list for find_table: a TEMP object is noted in
 * *shadow (its type), the main one checked and kept in *canon. */
static int table_row(sqlite3 *db, sqlite3_stmt *st, const char *table, fs_arena *a,
                     const char **shadow, const char **canon, int *without_rowid)
{
    const char *name = (const char *)sqlite3_column_text(st, 0);
    const char *type = (const char *)sqlite3_column_text(st, 1);
    const char *schema = (const char *)sqlite3_column_text(st, 3);
    if (schema != NULL && strcmp(schema, "temp") == 0) {
        if (*shadow == NULL) {
            *shadow = keep(a, sqlite3_mprintf("%s", type ? type : "table"));
        }
        return *shadow != NULL ? FENCE_OK : fs_fail(db, FENCE_ENOMEM, "out of memory");
    }
    if (type == NULL || strcmp(type, "table") != 0) {
        return fs_fail(db, FENCE_EINVAL, "\"%s\" is a %s, not an ordinary table", table,
                       type ? type : "?");
    }
    if (without_rowid != NULL) {
        *without_rowid = sqlite3_column_int(st, 2);
    }
    *canon = keep(a, sqlite3_mprintf("%s", name ? name : ""));
    return *canon != NULL ? FENCE_OK : fs_fail(db, FENCE_ENOMEM, "out of memory");
}

int fence_sqlite__find_table(sqlite3 *db, const char *table, int refuse_shadow, fs_arena *a,
                             const char **canon, int *without_rowid)
{
    *canon = NULL;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT name, type, wr, schema FROM pragma_table_list(?1) "
                           "WHERE schema IN ('main', 'temp') ORDER BY schema = 'main'",
                           -1, &st, NULL) != SQLITE_OK) {
        return fs_fail_db(db, "looking up the table");
    }
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    int rc = FENCE_OK, step;
    const char *shadow = NULL;
    while (rc == FENCE_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
        rc = table_row(db, st, table, a, &shadow, canon, without_rowid);
    }
    if (rc == FENCE_OK && step != SQLITE_DONE) {
        rc = fs_fail_db(db, "looking up the table");
    }
    sqlite3_finalize(st);
    if (rc == FENCE_OK && *canon == NULL) {
        rc = fs_fail(db, FENCE_EINVAL, "no table \"%s\" in the main schema", table);
    }
    if (rc == FENCE_OK && refuse_shadow && shadow != NULL) {
        rc = fs_fail(db, FENCE_EINVAL,
                     "a TEMP %s named \"%s\" shadows the main table on this connection "
                     "(unqualified SQL here reaches the TEMP one, which fencing cannot "
                     "cover); drop or rename it, then protect again",
                     shadow, table);
    }
    if (rc == FENCE_OK && (sqlite3_strnicmp(*canon, "sqlite_", 7) == 0 ||
                           sqlite3_stricmp(*canon, "fence_resource") == 0)) {
        rc = fs_fail(db, FENCE_EINVAL, "\"%s\" is an internal table and cannot be protected",
                     *canon);
    }
    if (rc != FENCE_OK) {
        *canon = NULL;
    }
    return rc;
}

int fence_sqlite__column_is_own(const char *name, const char *type)
{
    return sqlite3_stricmp(name, FENCE_SQLITE_DEFAULT_COLUMN) == 0 ||
           (type != NULL && sqlite3_stricmp(type, FENCE_SQLITE_COLUMN_TYPE) == 0);
}

static int has_word_int(const char *type)
{
    for (const char *p = type; p && *p; p++) {
        if (sqlite3_strnicmp(p, "INT", 3) == 0) {
            return 1;
        }
    }
    return 0;
}

/* One column: note the rowid names it takes and the PRIMARY KEY; if it is
 * the token column WANT, check and keep it. */
static int column_row(sqlite3 *db, sqlite3_stmt *st, const char *want, fs_reader *r)
{
    const char *name = (const char *)sqlite3_column_text(st, 0);
    const char *type = (const char *)sqlite3_column_text(st, 1);
    int pk = sqlite3_column_int(st, 2);
    int hidden = sqlite3_column_int(st, 3);
    if (name == NULL) {
        return FENCE_OK;
    }
    for (int i = 0; i < 3; i++) {
        if (sqlite3_stricmp(name, rowid_names[i]) == 0) {
            r->shadow[i] = 1;
        }
    }
    if (pk > 0 && ++r->npk == 1) {
        /* Only a lone PRIMARY KEY column can be the rowid's alias. */
        r->pk_col = keep(r->a, fence_sqlite__quote_ident(name));
        r->pk_integer = type != NULL && sqlite3_stricmp(type, "INTEGER") == 0;
        if (r->pk_col == NULL) {
            return fs_fail(db, FENCE_ENOMEM, "out of memory");
        }
    }
    if (sqlite3_stricmp(name, want) != 0) {
        return FENCE_OK;
    }
    if (hidden != 0) {
        return fs_fail(db, FENCE_EINVAL, "column \"%s\" is generated or hidden; the token "
                       "column must be an ordinary column", name);
    }
    if (pk > 0) {
        return fs_fail(db, FENCE_EINVAL, "column \"%s\" is part of the primary key and "
                       "cannot hold the token", name);
    }
    if (!has_word_int(type)) {
        return fs_fail(db, FENCE_EINVAL, "column \"%s\" is declared \"%s\"; the token column "
                       "needs INTEGER affinity", name, type ? type : "");
    }
    r->col = keep(r->a, sqlite3_mprintf("%s", name));
    r->col_own = fence_sqlite__column_is_own(name, type);
    return r->col != NULL ? FENCE_OK : fs_fail(db, FENCE_ENOMEM, "out of memory");
}

/* Columns: find and check the token column; note the PRIMARY KEY and which
 * of rowid/_rowid_/oid are column names. */
static int read_columns(sqlite3 *db, const char *want, fs_reader *r)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT name, type, pk, hidden FROM pragma_table_xinfo(?1, 'main')",
                           -1, &st, NULL) != SQLITE_OK) {
        return fs_fail_db(db, "reading the table's columns");
    }
    sqlite3_bind_text(st, 1, r->table, -1, SQLITE_STATIC);
    int rc = FENCE_OK, step;
    while (rc == FENCE_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
        rc = column_row(db, st, want, r);
    }
    if (rc == FENCE_OK && step != SQLITE_DONE) {
        rc = fs_fail_db(db, "reading the table's columns");
    }
    sqlite3_finalize(st);
    return rc;
}

/* The columns of one UNIQUE index (ix is prepared on pragma_index_xinfo):
 * they join the conflict check, the key-change test and the key columns;
 * for a WITHOUT ROWID table's primary key they are also the row key. */
static int read_index(sqlite3 *db, sqlite3_stmt *ix, const char *index, int is_pk,
                      fs_reader *r)
{
    sqlite3_str *rowkey = sqlite3_str_new(NULL);
    sqlite3_str *group = sqlite3_str_new(NULL);
    sqlite3_reset(ix);
    sqlite3_bind_text(ix, 1, index, -1, SQLITE_TRANSIENT);
    int rc = FENCE_OK, step;
    while (rc == FENCE_OK && (step = sqlite3_step(ix)) == SQLITE_ROW) {
        int cid = sqlite3_column_int(ix, 0);
        const char *col = (const char *)sqlite3_column_text(ix, 1);
        const char *coll = (const char *)sqlite3_column_text(ix, 2);
        if (cid < 0 || col == NULL) {
            rc = fs_fail(db, FENCE_EINVAL, "unique index \"%s\" on \"%s\" is on an expression "
                         "or the rowid; fencing cannot check INSERT OR REPLACE through it",
                         index ? index : "?", r->table);
            break;
        }
        list_add(group, " AND ", "\"%w\" = NEW.\"%w\" COLLATE \"%w\"", col, col,
                 coll ? coll : "BINARY");
        list_add(r->changed, " OR ", "NEW.\"%w\" IS NOT OLD.\"%w\"", col, col);
        list_add(rowkey, " AND ", "\"%w\" IS NEW.\"%w\"", col, col);
        list_add(r->keycols, ", ", "\"%w\"", col);
    }
    if (rc == FENCE_OK && step != SQLITE_DONE) {
        rc = fs_fail_db(db, "reading an index");
    }
    const char *g = fence_sqlite__keep_str(r->a, group, "0");
    const char *rk = fence_sqlite__keep_str(r->a, rowkey, NULL);
    list_add(r->conflict, " OR ", "(%s)", g ? g : "0");
    if (rc == FENCE_OK && is_pk && r->without_rowid) {
        r->rowkey = rk;
    }
    if (rc == FENCE_OK && r->a->oom) {
        rc = fs_fail(db, FENCE_ENOMEM, "out of memory");
    }
    return rc;
}

/* UNIQUE keys (including a WITHOUT ROWID table's primary key, which also
 * gives the row key). */
static int read_keys(sqlite3 *db, fs_reader *r)
{
    sqlite3_stmt *il = NULL, *ix = NULL;
    int rc = FENCE_OK, step;
    if (sqlite3_prepare_v2(db,
                           "SELECT name, origin FROM pragma_index_list(?1, 'main') "
                           "WHERE \"unique\" ORDER BY seq",
                           -1, &il, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db,
                           "SELECT cid, name, coll FROM pragma_index_xinfo(?1, 'main') "
                           "WHERE key ORDER BY seqno",
                           -1, &ix, NULL) != SQLITE_OK) {
        rc = fs_fail_db(db, "reading the table's indexes");
        sqlite3_finalize(il);
        return rc;
    }
    sqlite3_bind_text(il, 1, r->table, -1, SQLITE_STATIC);
    while (rc == FENCE_OK && (step = sqlite3_step(il)) == SQLITE_ROW) {
        const char *index = (const char *)sqlite3_column_text(il, 0);
        const char *origin = (const char *)sqlite3_column_text(il, 1);
        int is_pk = origin != NULL && strcmp(origin, "pk") == 0;
        if (is_pk) {
            r->pk_index = 1;
        }
        rc = read_index(db, ix, index, is_pk, r);
    }
    if (rc == FENCE_OK && step != SQLITE_DONE) {
        rc = fs_fail_db(db, "reading the table's indexes");
    }
    sqlite3_finalize(il);
    sqlite3_finalize(ix);
    if (rc == FENCE_OK && r->without_rowid && r->rowkey == NULL) {
        rc = fs_fail(db, FENCE_EINVAL, "cannot find a key for the rows of \"%s\"", r->table);
    }
    return rc;
}

/*
 * The rowid of a rowid table is a key too: INSERT OR REPLACE with an
 * explicit rowid, or UPDATE OR REPLACE SET rowid = ..., replaces the row
 * that holds it, and the deleted row fires no DELETE trigger.  It joins
 * the conflict check, the key-change test and the UPDATE OF list (under
 * every name a SET list can give it), and it is the row key.  An INTEGER
 * PRIMARY KEY column is the rowid itself -- unless the primary key has an
 * index of its own (e.g. INTEGER PRIMARY KEY DESC), which read_keys
 * already took as a UNIQUE key.
 */
static int rowid_keys(sqlite3 *db, fs_reader *r)
{
    int alias = r->npk == 1 && r->pk_integer && !r->pk_index;
    const char *name = NULL;
    for (int i = 0; i < 3; i++) {
        if (!r->shadow[i]) {
            name = name ? name : rowid_names[i];
            list_add(r->keycols, ", ", "%s", rowid_names[i]);
        }
    }
    if (alias) {
        list_add(r->keycols, ", ", "%s", r->pk_col);
        name = name ? name : r->pk_col;
    }
    if (name == NULL) {
        return fs_fail(db, FENCE_EINVAL, "table \"%s\" has columns named rowid, _rowid_ and "
                       "oid and no INTEGER PRIMARY KEY: its rows cannot be addressed",
                       r->table);
    }
    r->rowkey = keep(r->a, sqlite3_mprintf("%s IS NEW.%s", name, name));
    list_add(r->conflict, " OR ", "(%s = NEW.%s)", name, name);
    list_add(r->changed, " OR ", "NEW.%s IS NOT OLD.%s", name, name);
    if (r->rowkey == NULL) {
        return fs_fail(db, FENCE_ENOMEM, "out of memory");
    }
    return FENCE_OK;
}

int fence_sqlite__shape_read(sqlite3 *db, const char *table, const char *want, fs_arena *a,
                             fs_shape *out)
{
    memset(out, 0, sizeof *out);
    fs_reader r = {.a = a};
    r.conflict = sqlite3_str_new(NULL);
    r.changed = sqlite3_str_new(NULL);
    r.keycols = sqlite3_str_new(NULL);
    int rc = fence_sqlite__find_table(db, table, 1, a, &r.table, &r.without_rowid);
    if (rc == FENCE_OK) {
        rc = read_columns(db, want, &r);
    }
    if (rc == FENCE_OK) {
        rc = read_keys(db, &r);
    }
    if (rc == FENCE_OK && !r.without_rowid) {
        rc = rowid_keys(db, &r);
    }
    /* No key at all: nothing an INSERT could replace, no key to change. */
    out->conflict = fence_sqlite__keep_str(a, r.conflict, "0");
    out->changed = fence_sqlite__keep_str(a, r.changed, "0");
    out->keycols = fence_sqlite__keep_str(a, r.keycols, "");
    if (rc == FENCE_OK && a->oom) {
        rc = fs_fail(db, FENCE_ENOMEM, "out of memory");
    }
    out->table = r.table;
    out->without_rowid = r.without_rowid;
    out->col = r.col;
    out->col_own = r.col_own;
    out->rowkey = r.rowkey;
    return rc;
}
