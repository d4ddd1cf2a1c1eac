/*
 * fence_sqlite.c -- storage-side fencing for SQLite: the SQL functions,
 * the per-connection token, protecting tables from the templates in
 * sql/sqlite/, and reading a refusal back.  The same file is the body of
 * the loadable extension (see internal.h).
 */
#include "internal.h"

#ifdef FENCE_SQLITE_EXTENSION
SQLITE_EXTENSION_INIT3
#endif

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fence_sqlite.h"

/* The SQL, embedded by scripts/embed. */
extern const char fence_sqlite__sql_schema[];
extern const char fence_sqlite__sql_row_before_insert[];
extern const char fence_sqlite__sql_row_after_insert[];
extern const char fence_sqlite__sql_row_before_update[];
extern const char fence_sqlite__sql_row_after_update[];
extern const char fence_sqlite__sql_row_before_delete[];
extern const char fence_sqlite__sql_retrofit[];
extern const char fence_sqlite__sql_add_column[];
extern const char fence_sqlite__sql_drop_row[];
extern const char fence_sqlite__sql_find_row_triggers[];

/* ------------------------------------------------------------------ */
/* Messages                                                             */
/* ------------------------------------------------------------------ */

static _Thread_local char tl_msg[1024];

__attribute__((format(printf, 2, 3))) static int fail(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tl_msg, sizeof tl_msg, fmt, ap);
    va_end(ap);
    return status;
}

static int ok(void)
{
    tl_msg[0] = '\0';
    return FENCE_OK;
}

/* A database error: keep SQLite's message (read it before anything else
 * runs on db). */
static int fail_db(sqlite3 *db, const char *what)
{
    return fail(FENCE_EDB, "%s: %s", what, sqlite3_errmsg(db));
}

const char *fence_sqlite_errmsg(void)
{
    return tl_msg;
}

/* ------------------------------------------------------------------ */
/* Per-connection state                                                 */
/* ------------------------------------------------------------------ */

/*
 * One state per connection, handed to SQLite as the user data of every
 * function we register; each registration holds a reference and SQLite
 * drops it (state_unref) when the function is replaced or the connection
 * closes.  The registry maps a sqlite3* to its state for the C API.
 */
typedef struct fs_state {
    sqlite3 *db;
    _Atomic int64_t token; /* 0: unset; else 1..INT64_MAX */
    int refs;              /* guarded by reg_lock */
    struct fs_state *next;
} fs_state;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static fs_state *reg_head;

static fs_state *reg_find_locked(const sqlite3 *db)
{
    for (fs_state *s = reg_head; s != NULL; s = s->next) {
        if (s->db == db) {
            return s;
        }
    }
    return NULL;
}

static fs_state *state_get(const sqlite3 *db)
{
    pthread_mutex_lock(&reg_lock);
    fs_state *s = reg_find_locked(db);
    pthread_mutex_unlock(&reg_lock);
    return s;
}

static void state_ref(fs_state *s)
{
    pthread_mutex_lock(&reg_lock);
    s->refs++;
    pthread_mutex_unlock(&reg_lock);
}

static void state_unref(void *p)
{
    fs_state *s = p;
    pthread_mutex_lock(&reg_lock);
    if (--s->refs == 0) {
        for (fs_state **pp = &reg_head; *pp != NULL; pp = &(*pp)->next) {
            if (*pp == s) {
                *pp = s->next;
                break;
            }
        }
        free(s);
    }
    pthread_mutex_unlock(&reg_lock);
}

/* The state of db, created if missing, with one reference for the caller. */
static fs_state *state_acquire(sqlite3 *db)
{
    pthread_mutex_lock(&reg_lock);
    fs_state *s = reg_find_locked(db);
    if (s == NULL) {
        s = calloc(1, sizeof *s);
        if (s != NULL) {
            s->db = db;
            atomic_init(&s->token, 0);
            s->next = reg_head;
            reg_head = s;
        }
    }
    if (s != NULL) {
        s->refs++;
    }
    pthread_mutex_unlock(&reg_lock);
    return s;
}

/* ------------------------------------------------------------------ */
/* Names                                                                */
/* ------------------------------------------------------------------ */

static int check_name(const char *what, const char *name)
{
    if (name == NULL || name[0] == '\0') {
        return fail(FENCE_EINVAL, "%s: name is NULL or empty", what);
    }
    if (strlen(name) > FENCE_NAME_MAX) {
        return fail(FENCE_EINVAL, "%s: name longer than %d bytes", what, FENCE_NAME_MAX);
    }
    return FENCE_OK;
}

/* A text argument of an SQL function as a C string: NULL for SQL NULL;
 * fails for non-text, embedded NUL, empty or oversized text. */
static int value_name(sqlite3_value *v, const char *what, const char **out)
{
    *out = NULL;
    int type = sqlite3_value_type(v);
    if (type == SQLITE_NULL) {
        return FENCE_OK;
    }
    if (type != SQLITE_TEXT) {
        return fail(FENCE_EINVAL, "%s must be text", what);
    }
    const char *s = (const char *)sqlite3_value_text(v);
    int n = sqlite3_value_bytes(v);
    if (s == NULL) {
        return fail(FENCE_ENOMEM, "%s: out of memory", what);
    }
    if ((size_t)n != strlen(s)) {
        return fail(FENCE_EINVAL, "%s contains a NUL byte", what);
    }
    int rc = check_name(what, s);
    if (rc != FENCE_OK) {
        return rc;
    }
    *out = s;
    return FENCE_OK;
}

/* ------------------------------------------------------------------ */
/* Templates                                                            */
/* ------------------------------------------------------------------ */

typedef struct fs_var {
    const char *key;
    const char *val;
} fs_var;

/* Fill {{KEY}} placeholders into *out (sqlite3_malloc'd).  An unknown
 * placeholder is a bug in the SQL files: refuse. */
static int fill_template(const char *tpl, const fs_var *vars, size_t nvars, char **out_sql)
{
    *out_sql = NULL;
    sqlite3_str *out = sqlite3_str_new(NULL);
    const char *p = tpl;
    for (;;) {
        const char *open = strstr(p, "{{");
        if (open == NULL) {
            sqlite3_str_appendall(out, p);
            break;
        }
        const char *close = strstr(open + 2, "}}");
        if (close == NULL) {
            sqlite3_free(sqlite3_str_finish(out));
            return fail(FENCE_EINVAL, "internal: unterminated placeholder in embedded SQL");
        }
        sqlite3_str_append(out, p, (int)(open - p));
        size_t klen = (size_t)(close - open - 2);
        const char *val = NULL;
        for (size_t i = 0; i < nvars; i++) {
            if (strlen(vars[i].key) == klen && memcmp(vars[i].key, open + 2, klen) == 0) {
                val = vars[i].val;
                break;
            }
        }
        if (val == NULL) {
            sqlite3_free(sqlite3_str_finish(out));
            return fail(FENCE_EINVAL, "internal: unknown placeholder {{%.*s}} in embedded SQL",
                        (int)klen, open + 2);
        }
        sqlite3_str_appendall(out, val);
        p = close + 2;
    }
    if (sqlite3_str_errcode(out) != SQLITE_OK) {
        sqlite3_free(sqlite3_str_finish(out));
        return fail(FENCE_ENOMEM, "out of memory");
    }
    *out_sql = sqlite3_str_finish(out);
    return FENCE_OK;
}

static int exec_template(sqlite3 *db, const char *what, const char *tpl, const fs_var *vars,
                         size_t nvars)
{
    char *sql = NULL;
    int rc = fill_template(tpl, vars, nvars, &sql);
    if (rc != FENCE_OK) {
        return rc;
    }
    rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_free(sql);
    if (rc != SQLITE_OK) {
        return fail_db(db, what);
    }
    return FENCE_OK;
}

/* "name" with internal double quotes doubled. */
static char *quote_ident(const char *name)
{
    return sqlite3_mprintf("\"%w\"", name);
}

/* ------------------------------------------------------------------ */
/* Schema                                                               */
/* ------------------------------------------------------------------ */

static int ensure_schema(sqlite3 *db)
{
    if (sqlite3_exec(db, fence_sqlite__sql_schema, NULL, NULL, NULL) != SQLITE_OK) {
        return fail_db(db, "creating the fence schema (fence_resource, fence_advance)");
    }
    return FENCE_OK;
}

/* Run body inside SAVEPOINT fence: all or nothing, inside or outside the
 * caller's transaction. */
static int in_savepoint(sqlite3 *db, int (*body)(sqlite3 *, const void *), const void *arg)
{
    if (sqlite3_exec(db, "SAVEPOINT fence", NULL, NULL, NULL) != SQLITE_OK) {
        return fail_db(db, "SAVEPOINT");
    }
    int rc = body(db, arg);
    if (rc != FENCE_OK) {
        sqlite3_exec(db, "ROLLBACK TO fence; RELEASE fence", NULL, NULL, NULL);
        return rc; /* body's message stays */
    }
    if (sqlite3_exec(db, "RELEASE fence", NULL, NULL, NULL) != SQLITE_OK) {
        rc = fail_db(db, "RELEASE");
        sqlite3_exec(db, "ROLLBACK TO fence; RELEASE fence", NULL, NULL, NULL);
    }
    return rc;
}

/* ------------------------------------------------------------------ */
/* Protect                                                              */
/* ------------------------------------------------------------------ */

typedef struct fs_protect {
    const char *table;  /* as given */
    const char *column; /* NULL: the default */
    int permissive;
} fs_protect;

/* The five kinds of fencing trigger, in the order they are created, and
 * the name prefix each reserves: fence_<kind>_<table> (the same list as in
 * find_row_triggers.sql). */
enum { TRIG_BI, TRIG_AI, TRIG_BU, TRIG_AU, TRIG_BD, TRIG_N };
static const char *const trig_prefix[TRIG_N] = {
    "fence_bi_", "fence_ai_", "fence_bu_", "fence_au_", "fence_bd_",
};

/* The names SQLite gives the rowid when no column takes them. */
static const char *const rowid_names[3] = {"rowid", "_rowid_", "oid"};

/* Append FMT (an sqlite3_mprintf format: %w, %q) to S, after SEP unless S
 * is still empty. */
static void list_add(sqlite3_str *s, const char *sep, const char *fmt, ...)
{
    if (sqlite3_str_length(s) > 0) {
        sqlite3_str_appendall(s, sep);
    }
    va_list ap;
    va_start(ap, fmt);
    sqlite3_str_vappendf(s, fmt, ap);
    va_end(ap);
}

/* Drop the fencing triggers of TABLE (its canonical name), found by what
 * they are (find_row_triggers.sql) rather than by the names its current
 * name would give them: after ALTER TABLE RENAME they keep the old ones. */
static int drop_triggers(sqlite3 *db, const char *table)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, fence_sqlite__sql_find_row_triggers, -1, &st, NULL) !=
        SQLITE_OK) {
        return fail_db(db, "looking up the fence triggers");
    }
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    /* Collect first: the schema cannot change under a running SELECT. */
    sqlite3_str *drops = sqlite3_str_new(NULL);
    int rc = FENCE_OK, step;
    while (rc == FENCE_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        char *q_name = quote_ident(name ? name : "");
        char *sql = NULL;
        if (q_name == NULL) {
            rc = fail(FENCE_ENOMEM, "out of memory");
        } else {
            const fs_var vars[] = {{"TRIGGER", q_name}};
            rc = fill_template(fence_sqlite__sql_drop_row, vars, 1, &sql);
        }
        if (rc == FENCE_OK) {
            sqlite3_str_appendall(drops, sql);
        }
        sqlite3_free(sql);
        sqlite3_free(q_name);
    }
    if (rc == FENCE_OK && step != SQLITE_DONE) {
        rc = fail_db(db, "looking up the fence triggers");
    }
    sqlite3_finalize(st);
    if (rc == FENCE_OK && sqlite3_str_errcode(drops) != SQLITE_OK) {
        rc = fail(FENCE_ENOMEM, "out of memory");
    }
    char *all = sqlite3_str_finish(drops); /* NULL when there is nothing to drop */
    if (rc == FENCE_OK && all != NULL &&
        sqlite3_exec(db, all, NULL, NULL, NULL) != SQLITE_OK) {
        rc = fail_db(db, "dropping the fence triggers");
    }
    sqlite3_free(all);
    return rc;
}

/* The fencing trigger NAME (unquoted) about to be created for TABLE must
 * not exist yet (TABLE's own ones were just dropped): another table holds
 * it, typically one renamed from TABLE's name while protected. */
static int check_trigger_free(sqlite3 *db, const char *name, const char *table)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT tbl_name FROM main.sqlite_master "
                           "WHERE type = 'trigger' AND name = ?1 COLLATE NOCASE",
                           -1, &st, NULL) != SQLITE_OK) {
        return fail_db(db, "looking up a trigger");
    }
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    int rc = FENCE_OK, step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        const char *other = (const char *)sqlite3_column_text(st, 0);
        rc = fail(FENCE_EINVAL, "a trigger named \"%s\" already exists on table \"%s\" "
                  "(trigger names fence_bi_/ai_/bu_/au_/bd_<table> are reserved for fencing); "
                  "if \"%s\" is a protected table renamed from \"%s\", protect \"%s\" again "
                  "first: its triggers then take its new name",
                  name, other ? other : "?", other ? other : "?", table, other ? other : "?");
    } else if (step != SQLITE_DONE) {
        rc = fail_db(db, "looking up a trigger");
    }
    sqlite3_finalize(st);
    return rc;
}

/* The table's canonical name (as stored) and whether it is WITHOUT ROWID.
 * With refuse_shadow, a TEMP table or view of the same name is refused:
 * on this connection unqualified SQL would reach it, not the main table
 * the caller meant to fence.  *canon is sqlite3_malloc'd. */
static int find_table(sqlite3 *db, const char *table, int refuse_shadow, char **canon,
                      int *without_rowid)
{
    *canon = NULL;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT name, type, wr, schema FROM pragma_table_list(?1) "
                           "WHERE schema IN ('main', 'temp') ORDER BY schema = 'main'",
                           -1, &st, NULL) != SQLITE_OK) {
        return fail_db(db, "looking up the table");
    }
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    int rc = FENCE_OK, step, found = 0;
    char *shadow = NULL;
    while (rc == FENCE_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        const char *type = (const char *)sqlite3_column_text(st, 1);
        const char *schema = (const char *)sqlite3_column_text(st, 3);
        if (schema != NULL && strcmp(schema, "temp") == 0) {
            if (shadow == NULL) {
                shadow = sqlite3_mprintf("%s", type ? type : "table");
                rc = shadow ? FENCE_OK : fail(FENCE_ENOMEM, "out of memory");
            }
            continue;
        }
        found = 1;
        if (type == NULL || strcmp(type, "table") != 0) {
            rc = fail(FENCE_EINVAL, "\"%s\" is a %s, not an ordinary table", table,
                      type ? type : "?");
        } else {
            *without_rowid = sqlite3_column_int(st, 2);
            *canon = sqlite3_mprintf("%s", name ? name : "");
            rc = *canon ? FENCE_OK : fail(FENCE_ENOMEM, "out of memory");
        }
    }
    if (rc == FENCE_OK && step != SQLITE_DONE) {
        rc = fail_db(db, "looking up the table");
    }
    sqlite3_finalize(st);
    if (rc == FENCE_OK && !found) {
        rc = fail(FENCE_EINVAL, "no table \"%s\" in the main schema", table);
    }
    if (rc == FENCE_OK && refuse_shadow && shadow != NULL) {
        rc = fail(FENCE_EINVAL, "a TEMP %s named \"%s\" shadows the main table on this "
                  "connection (unqualified SQL here reaches the TEMP one, which fencing "
                  "cannot cover); drop or rename it, then protect again", shadow, table);
    }
    sqlite3_free(shadow);
    if (rc == FENCE_OK && (sqlite3_strnicmp(*canon, "sqlite_", 7) == 0 ||
                           sqlite3_stricmp(*canon, "fence_resource") == 0)) {
        rc = fail(FENCE_EINVAL, "\"%s\" is an internal table and cannot be protected", *canon);
    }
    if (rc != FENCE_OK) {
        sqlite3_free(*canon);
        *canon = NULL;
    }
    return rc;
}

/* What the triggers need to know about the table's columns and keys.
 * All strings sqlite3_malloc'd. */
typedef struct fs_shape {
    char *col_canon;   /* token column as stored, or NULL when missing */
    int col_missing;
    char *rowkey;      /* "<k> IS NEW.<k> AND ...": finds the written row */
    sqlite3_str *conflict;    /* "(...) OR (...)": rows a new key collides with */
    sqlite3_str *changed;     /* "NEW.k IS NOT OLD.k OR ..." */
    sqlite3_str *keycols;     /* "k1", "k2", ...: names that change a key */
    int nkeys;
    /* For rowid tables: */
    int npk;           /* columns in the PRIMARY KEY */
    char *pk_col;      /* the (last) PRIMARY KEY column, quoted */
    int pk_integer;    /* ... declared exactly INTEGER */
    int pk_index;      /* the PRIMARY KEY has an index of its own (not the rowid) */
    int shadow[3];     /* rowid, _rowid_, oid taken by a column */
} fs_shape;

static int has_word_int(const char *type)
{
    for (const char *p = type; p && *p; p++) {
        if (sqlite3_strnicmp(p, "INT", 3) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Columns: find and check the token column; note the PRIMARY KEY and which
 * of rowid/_rowid_/oid are column names. */
static int read_columns(sqlite3 *db, const char *table, const char *want, fs_shape *sh)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT name, type, pk, hidden FROM pragma_table_xinfo(?1, 'main')",
                           -1, &st, NULL) != SQLITE_OK) {
        return fail_db(db, "reading the table's columns");
    }
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    int rc = FENCE_OK, step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        const char *type = (const char *)sqlite3_column_text(st, 1);
        int pk = sqlite3_column_int(st, 2);
        int hidden = sqlite3_column_int(st, 3);
        if (name == NULL) {
            continue;
        }
        for (int i = 0; i < 3; i++) {
            if (sqlite3_stricmp(name, rowid_names[i]) == 0) {
                sh->shadow[i] = 1;
            }
        }
        if (pk > 0) {
            sh->npk++;
            sqlite3_free(sh->pk_col);
            sh->pk_col = quote_ident(name);
            sh->pk_integer = type != NULL && sqlite3_stricmp(type, "INTEGER") == 0;
            if (sh->pk_col == NULL && rc == FENCE_OK) {
                rc = fail(FENCE_ENOMEM, "out of memory");
            }
        }
        if (sqlite3_stricmp(name, want) == 0) {
            if (hidden != 0) {
                rc = fail(FENCE_EINVAL, "column \"%s\" is generated or hidden; the token "
                          "column must be an ordinary column", name);
            } else if (pk > 0) {
                rc = fail(FENCE_EINVAL, "column \"%s\" is part of the primary key and "
                          "cannot hold the token", name);
            } else if (!has_word_int(type)) {
                rc = fail(FENCE_EINVAL, "column \"%s\" is declared \"%s\"; the token column "
                          "needs INTEGER affinity", name, type ? type : "");
            }
            sqlite3_free(sh->col_canon);
            sh->col_canon = sqlite3_mprintf("%s", name);
            if (sh->col_canon == NULL && rc == FENCE_OK) {
                rc = fail(FENCE_ENOMEM, "out of memory");
            }
        }
    }
    if (step != SQLITE_DONE && rc == FENCE_OK) {
        rc = fail_db(db, "reading the table's columns");
    }
    sqlite3_finalize(st);
    sh->col_missing = sh->col_canon == NULL;
    return rc;
}

/* UNIQUE keys (including a WITHOUT ROWID table's primary key, which also
 * gives the row key). */
static int read_keys(sqlite3 *db, const char *table, int without_rowid, fs_shape *sh)
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
        rc = fail_db(db, "reading the table's indexes");
        sqlite3_finalize(il);
        return rc;
    }
    sqlite3_bind_text(il, 1, table, -1, SQLITE_STATIC);
    while (rc == FENCE_OK && (step = sqlite3_step(il)) == SQLITE_ROW) {
        const char *index = (const char *)sqlite3_column_text(il, 0);
        const char *origin = (const char *)sqlite3_column_text(il, 1);
        int is_pk = origin != NULL && strcmp(origin, "pk") == 0;
        if (is_pk) {
            sh->pk_index = 1;
        }
        sqlite3_str *rowkey = sqlite3_str_new(NULL);
        sqlite3_str *group = sqlite3_str_new(NULL);
        sqlite3_reset(ix);
        sqlite3_bind_text(ix, 1, index, -1, SQLITE_TRANSIENT);
        while (rc == FENCE_OK && (step = sqlite3_step(ix)) == SQLITE_ROW) {
            int cid = sqlite3_column_int(ix, 0);
            const char *col = (const char *)sqlite3_column_text(ix, 1);
            const char *coll = (const char *)sqlite3_column_text(ix, 2);
            if (cid < 0 || col == NULL) {
                rc = fail(FENCE_EINVAL, "unique index \"%s\" on \"%s\" is on an expression or "
                          "the rowid; fencing cannot check INSERT OR REPLACE through it",
                          index ? index : "?", table);
                break;
            }
            list_add(group, " AND ", "\"%w\" = NEW.\"%w\" COLLATE \"%w\"", col, col,
                     coll ? coll : "BINARY");
            list_add(sh->changed, " OR ", "NEW.\"%w\" IS NOT OLD.\"%w\"", col, col);
            list_add(rowkey, " AND ", "\"%w\" IS NEW.\"%w\"", col, col);
            list_add(sh->keycols, ", ", "\"%w\"", col);
        }
        if (rc == FENCE_OK && step != SQLITE_DONE) {
            rc = fail_db(db, "reading an index");
        }
        char *g = sqlite3_str_finish(group);
        list_add(sh->conflict, " OR ", "(%s)", g ? g : "0");
        sqlite3_free(g);
        sh->nkeys++;
        char *rk = sqlite3_str_finish(rowkey);
        if (rc == FENCE_OK && is_pk && without_rowid) {
            sqlite3_free(sh->rowkey);
            sh->rowkey = rk;
            rk = NULL;
            if (sh->rowkey == NULL) {
                rc = fail(FENCE_ENOMEM, "out of memory");
            }
        }
        sqlite3_free(rk);
    }
    if (rc == FENCE_OK && step != SQLITE_DONE) {
        rc = fail_db(db, "reading the table's indexes");
    }
    sqlite3_finalize(il);
    sqlite3_finalize(ix);
    if (rc == FENCE_OK && without_rowid && sh->rowkey == NULL) {
        rc = fail(FENCE_EINVAL, "cannot find a key for the rows of \"%s\"", table);
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
static int rowid_keys(const char *table, fs_shape *sh)
{
    int alias = sh->npk == 1 && sh->pk_integer && !sh->pk_index;
    const char *name = NULL;
    for (int i = 0; i < 3; i++) {
        if (!sh->shadow[i]) {
            name = name ? name : rowid_names[i];
            list_add(sh->keycols, ", ", "%s", rowid_names[i]);
        }
    }
    if (alias) {
        list_add(sh->keycols, ", ", "%s", sh->pk_col);
        name = name ? name : sh->pk_col;
    }
    if (name == NULL) {
        return fail(FENCE_EINVAL, "table \"%s\" has columns named rowid, _rowid_ and oid "
                    "and no INTEGER PRIMARY KEY: its rows cannot be addressed", table);
    }
    sh->rowkey = sqlite3_mprintf("%s IS NEW.%s", name, name);
    list_add(sh->conflict, " OR ", "(%s = NEW.%s)", name, name);
    list_add(sh->changed, " OR ", "NEW.%s IS NOT OLD.%s", name, name);
    sh->nkeys++;
    if (sh->rowkey == NULL) {
        return fail(FENCE_ENOMEM, "out of memory");
    }
    return FENCE_OK;
}

static int protect_body(sqlite3 *db, const void *arg)
{
    const fs_protect *p = arg;
    const char *want = p->column ? p->column : FENCE_SQLITE_DEFAULT_COLUMN;
    char *table = NULL, *q_table = NULL, *q_table_str = NULL, *q_table_msg = NULL;
    char *q_col = NULL, *conflict = NULL, *changed = NULL, *keycols = NULL;
    char *trig[TRIG_N] = {NULL};
    fs_shape sh = {0};
    int without_rowid = 0;
    sh.conflict = sqlite3_str_new(NULL);
    sh.changed = sqlite3_str_new(NULL);
    sh.keycols = sqlite3_str_new(NULL);

    int rc = ensure_schema(db);
    if (rc == FENCE_OK) {
        rc = find_table(db, p->table, 1, &table, &without_rowid);
    }
    if (rc == FENCE_OK) {
        rc = read_columns(db, table, want, &sh);
    }
    if (rc == FENCE_OK) {
        rc = read_keys(db, table, without_rowid, &sh);
    }
    if (rc == FENCE_OK && !without_rowid) {
        rc = rowid_keys(table, &sh);
    }
    if (rc == FENCE_OK && sh.col_missing && p->column != NULL) {
        rc = fail(FENCE_EINVAL, "table \"%s\" has no column \"%s\"", table, p->column);
    }
    if (rc == FENCE_OK) {
        q_table = quote_ident(table);
        q_table_str = sqlite3_mprintf("%Q", table);
        q_table_msg = q_table ? sqlite3_mprintf("%q", q_table) : NULL;
        q_col = quote_ident(sh.col_missing ? want : sh.col_canon);
        int nkeys = sh.nkeys;
        int str_ok = sqlite3_str_errcode(sh.conflict) == SQLITE_OK &&
                     sqlite3_str_errcode(sh.changed) == SQLITE_OK &&
                     sqlite3_str_errcode(sh.keycols) == SQLITE_OK;
        conflict = sqlite3_str_finish(sh.conflict);
        changed = sqlite3_str_finish(sh.changed);
        keycols = sqlite3_str_finish(sh.keycols);
        sh.conflict = sh.changed = sh.keycols = NULL;
        if (nkeys == 0 && str_ok) {
            /* No key at all: nothing an INSERT could replace. */
            sqlite3_free(conflict);
            sqlite3_free(changed);
            sqlite3_free(keycols);
            conflict = sqlite3_mprintf("0");
            changed = sqlite3_mprintf("0");
            keycols = sqlite3_mprintf("%s", "");
        }
        for (int i = 0; i < TRIG_N; i++) {
            trig[i] = sqlite3_mprintf("%s%s", trig_prefix[i], table);
            str_ok = str_ok && trig[i] != NULL;
        }
        if (!str_ok || !q_table || !q_table_str || !q_table_msg || !q_col || !conflict ||
            !changed || !keycols) {
            rc = fail(FENCE_ENOMEM, "out of memory");
        }
    }
    if (rc == FENCE_OK) {
        /* Old triggers first, so the retrofit UPDATE does not trip them. */
        rc = drop_triggers(db, table);
    }
    for (int i = 0; rc == FENCE_OK && i < TRIG_N; i++) {
        rc = check_trigger_free(db, trig[i], table);
    }
    fs_var vars[] = {
        {"TABLE", q_table},       {"TABLE_STR", q_table_str}, {"TABLE_MSG", q_table_msg},
        {"COL", q_col},           {"STRICT", p->permissive ? "0" : "1"},
        {"ROWKEY", sh.rowkey},    {"CONFLICT", conflict},     {"KEYS_CHANGED", changed},
        {"KEY_COLUMNS", keycols}, {"TRIGGER", NULL},
    };
    const size_t nvars = sizeof vars / sizeof vars[0];
    if (rc == FENCE_OK) {
        if (sh.col_missing) {
            rc = exec_template(db, "adding the token column", fence_sqlite__sql_add_column,
                               vars, nvars - 1);
        } else {
            rc = exec_template(db, "setting NULL tokens to 0", fence_sqlite__sql_retrofit,
                               vars, nvars - 1);
        }
    }
    const char *const tpl[TRIG_N] = {
        [TRIG_BI] = fence_sqlite__sql_row_before_insert,
        [TRIG_AI] = fence_sqlite__sql_row_after_insert,
        [TRIG_BU] = fence_sqlite__sql_row_before_update,
        [TRIG_AU] = fence_sqlite__sql_row_after_update,
        [TRIG_BD] = fence_sqlite__sql_row_before_delete,
    };
    for (int i = 0; rc == FENCE_OK && i < TRIG_N; i++) {
        if (i == TRIG_BU && strcmp(changed, "0") == 0) {
            continue; /* no key can change */
        }
        char *q_trig = quote_ident(trig[i]);
        if (q_trig == NULL) {
            rc = fail(FENCE_ENOMEM, "out of memory");
            break;
        }
        vars[nvars - 1].val = q_trig;
        rc = exec_template(db, "creating a fence trigger", tpl[i], vars, nvars);
        sqlite3_free(q_trig);
    }

    sqlite3_free(sqlite3_str_finish(sh.conflict));
    sqlite3_free(sqlite3_str_finish(sh.changed));
    sqlite3_free(sqlite3_str_finish(sh.keycols));
    for (int i = 0; i < TRIG_N; i++) {
        sqlite3_free(trig[i]);
    }
    sqlite3_free(keycols);
    sqlite3_free(sh.col_canon);
    sqlite3_free(sh.rowkey);
    sqlite3_free(sh.pk_col);
    sqlite3_free(conflict);
    sqlite3_free(changed);
    sqlite3_free(q_col);
    sqlite3_free(q_table_msg);
    sqlite3_free(q_table_str);
    sqlite3_free(q_table);
    sqlite3_free(table);
    return rc;
}

static int unprotect_body(sqlite3 *db, const void *arg)
{
    char *table = NULL;
    int without_rowid = 0;
    int rc = find_table(db, arg, 0, &table, &without_rowid);
    if (rc == FENCE_OK) {
        rc = drop_triggers(db, table);
    }
    sqlite3_free(table);
    return rc;
}

static int schema_body(sqlite3 *db, const void *arg)
{
    (void)arg;
    return ensure_schema(db);
}

/* ------------------------------------------------------------------ */
/* SQL functions                                                        */
/* ------------------------------------------------------------------ */

/* fence_token(): the connection's token, NULL when unset.  INNOCUOUS. */
static void fn_token(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    (void)argv;
    fs_state *s = sqlite3_user_data(ctx);
    int64_t t = atomic_load(&s->token);
    if (t > 0) {
        sqlite3_result_int64(ctx, t);
    } else {
        sqlite3_result_null(ctx);
    }
}

/* Parse a token given as text: decimal digits only, 1..INT64_MAX, or 0. */
static int parse_token_text(const char *s, int64_t *out)
{
    if (s == NULL || *s == '\0') {
        return 0;
    }
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') {
            return 0;
        }
        unsigned d = (unsigned)(*p - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10) {
            return 0;
        }
        v = v * 10 + d;
    }
    *out = (int64_t)v;
    return 1;
}

/* fence_set_token(N): set (N >= 1) or clear (NULL, 0) the token; anything
 * else clears it and fails.  Returns the token or NULL.  DIRECTONLY. */
static void fn_set_token(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    fs_state *s = sqlite3_user_data(ctx);
    sqlite3_value *v = argv[0];
    int64_t t = -1;
    const char *why = NULL;
    switch (sqlite3_value_type(v)) {
    case SQLITE_NULL:
        t = 0;
        break;
    case SQLITE_INTEGER:
        t = sqlite3_value_int64(v);
        if (t < 0) {
            why = "is negative";
        }
        break;
    case SQLITE_TEXT: {
        const char *txt = (const char *)sqlite3_value_text(v);
        if (txt == NULL || (size_t)sqlite3_value_bytes(v) != strlen(txt) ||
            !parse_token_text(txt, &t)) {
            why = txt && txt[0] == '\0' ? "is empty text"
                                        : "is not a decimal integer between 1 and 2^63-1";
        }
        break;
    }
    case SQLITE_FLOAT:
        why = "is a real number (above 2^63-1, or not an integer)";
        break;
    default:
        why = "is a blob";
        break;
    }
    if (why != NULL) {
        atomic_store(&s->token, 0);
        char *msg = sqlite3_mprintf("fence:notoken fence_set_token: the token %s; the "
                                    "connection's token is now cleared",
                                    why);
        sqlite3_result_error(ctx, msg ? msg : "fence:notoken fence_set_token: bad token", -1);
        sqlite3_free(msg);
        return;
    }
    atomic_store(&s->token, t);
    if (t > 0) {
        sqlite3_result_int64(ctx, t);
    } else {
        sqlite3_result_null(ctx);
    }
}

/* fence_stale(kind, name, offered, highest): always fails with
 * SQLITE_CONSTRAINT_TRIGGER and the "fence:stale ..." message.  RAISE()
 * in SQLite 3.40 takes only a literal message, which cannot carry the
 * tokens; the triggers call this first and keep a literal RAISE right
 * behind it.  INNOCUOUS: it reads nothing and writes nothing. */
static void fn_stale(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    const char *kind = (const char *)sqlite3_value_text(argv[0]);
    const char *name = (const char *)sqlite3_value_text(argv[1]);
    const char *offered = (const char *)sqlite3_value_text(argv[2]);
    const char *highest = (const char *)sqlite3_value_text(argv[3]);
    char *msg = sqlite3_mprintf("fence:stale %s \"%w\": token %s is older than %s "
                                "(write rejected)",
                                kind ? kind : "table", name ? name : "",
                                offered ? offered : "NULL", highest ? highest : "NULL");
    sqlite3_result_error(ctx, msg ? msg : "fence:stale (write rejected)", -1);
    sqlite3_result_error_code(ctx, SQLITE_CONSTRAINT_TRIGGER);
    sqlite3_free(msg);
}

static void result_fail(sqlite3_context *ctx, int status)
{
    if (status == FENCE_ENOMEM) {
        sqlite3_result_error_nomem(ctx);
    } else {
        sqlite3_result_error(ctx, fence_sqlite_errmsg(), -1);
    }
}

/* fence_protect(table [, column [, permissive]]).  DIRECTONLY. */
static void fn_protect(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    fs_protect p = {NULL, NULL, 0};
    int rc = value_name(argv[0], "fence_protect: table", &p.table);
    if (rc == FENCE_OK && p.table == NULL) {
        rc = fail(FENCE_EINVAL, "fence_protect: table is NULL");
    }
    if (rc == FENCE_OK && argc > 1) {
        rc = value_name(argv[1], "fence_protect: column", &p.column);
    }
    if (rc == FENCE_OK && argc > 2) {
        if (sqlite3_value_type(argv[2]) != SQLITE_INTEGER ||
            (sqlite3_value_int64(argv[2]) != 0 && sqlite3_value_int64(argv[2]) != 1)) {
            rc = fail(FENCE_EINVAL, "fence_protect: permissive must be 0 or 1");
        } else {
            p.permissive = sqlite3_value_int(argv[2]);
        }
    }
    if (rc == FENCE_OK) {
        rc = in_savepoint(sqlite3_context_db_handle(ctx), protect_body, &p);
    }
    if (rc != FENCE_OK) {
        result_fail(ctx, rc);
        return;
    }
    sqlite3_result_int(ctx, 1);
}

/* fence_unprotect(table).  DIRECTONLY. */
static void fn_unprotect(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    const char *table = NULL;
    int rc = value_name(argv[0], "fence_unprotect: table", &table);
    if (rc == FENCE_OK && table == NULL) {
        rc = fail(FENCE_EINVAL, "fence_unprotect: table is NULL");
    }
    if (rc == FENCE_OK) {
        rc = in_savepoint(sqlite3_context_db_handle(ctx), unprotect_body, table);
    }
    if (rc != FENCE_OK) {
        result_fail(ctx, rc);
        return;
    }
    sqlite3_result_int(ctx, 1);
}

/* fence_init(): create the fence schema.  DIRECTONLY. */
static void fn_init(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    (void)argv;
    int rc = in_savepoint(sqlite3_context_db_handle(ctx), schema_body, NULL);
    if (rc != FENCE_OK) {
        result_fail(ctx, rc);
        return;
    }
    sqlite3_result_int(ctx, 1);
}

int fence_sqlite__register(sqlite3 *db, char **errmsg)
{
    static const struct {
        const char *name;
        int nargs;
        int flags;
        void (*fn)(sqlite3_context *, int, sqlite3_value **);
    } fns[] = {
        {"fence_token", 0, SQLITE_UTF8 | SQLITE_INNOCUOUS, fn_token},
        {"fence_stale", 4, SQLITE_UTF8 | SQLITE_INNOCUOUS, fn_stale},
        {"fence_set_token", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY, fn_set_token},
        {"fence_protect", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY, fn_protect},
        {"fence_protect", 2, SQLITE_UTF8 | SQLITE_DIRECTONLY, fn_protect},
        {"fence_protect", 3, SQLITE_UTF8 | SQLITE_DIRECTONLY, fn_protect},
        {"fence_unprotect", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY, fn_unprotect},
        {"fence_init", 0, SQLITE_UTF8 | SQLITE_DIRECTONLY, fn_init},
    };
    if (sqlite3_libversion_number() < 3031000) {
        /* SQLITE_INNOCUOUS and SQLITE_DIRECTONLY arrived in 3.31. */
        if (errmsg) {
            *errmsg = sqlite3_mprintf("fence: SQLite 3.31 or newer is required; this is %s",
                                      sqlite3_libversion());
        }
        return fail(FENCE_EDB, "SQLite 3.31 or newer is required; this is %s",
                    sqlite3_libversion());
    }
    fs_state *s = state_acquire(db);
    if (s == NULL) {
        if (errmsg) {
            *errmsg = sqlite3_mprintf("fence: out of memory");
        }
        return fail(FENCE_ENOMEM, "out of memory");
    }
    int rc = FENCE_OK;
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        state_ref(s); /* dropped by SQLite, also when the call fails */
        if (sqlite3_create_function_v2(db, fns[i].name, fns[i].nargs, fns[i].flags, s,
                                       fns[i].fn, NULL, NULL, state_unref) != SQLITE_OK) {
            rc = fail(FENCE_EDB, "registering %s(): %s", fns[i].name, sqlite3_errmsg(db));
            if (errmsg) {
                *errmsg = sqlite3_mprintf("fence: %s", fence_sqlite_errmsg());
            }
            break;
        }
    }
    state_unref(s); /* the reference state_acquire gave us */
    return rc;
}

/* ------------------------------------------------------------------ */
/* C API                                                                */
/* ------------------------------------------------------------------ */

static int need_state(sqlite3 *db, const char *what, fs_state **out)
{
    if (db == NULL) {
        return fail(FENCE_EINVAL, "%s: db is NULL", what);
    }
    *out = state_get(db);
    if (*out == NULL) {
        return fail(FENCE_ESTATE, "%s: call fence_sqlite_attach(db) on this connection first",
                    what);
    }
    return FENCE_OK;
}

int fence_sqlite_attach(sqlite3 *db)
{
    if (db == NULL) {
        return fail(FENCE_EINVAL, "fence_sqlite_attach: db is NULL");
    }
    int rc = fence_sqlite__register(db, NULL);
    if (rc == FENCE_OK) {
        rc = in_savepoint(db, schema_body, NULL);
    }
    return rc == FENCE_OK ? ok() : rc;
}

void fence_sqlite_protect_options_init(fence_sqlite_protect_options *opts)
{
    if (opts != NULL) {
        memset(opts, 0, sizeof *opts);
    }
}

int fence_sqlite_protect(sqlite3 *db, const char *table, const fence_sqlite_protect_options *opts)
{
    fs_state *s;
    int rc = need_state(db, "fence_sqlite_protect", &s);
    if (rc != FENCE_OK) {
        return rc;
    }
    rc = check_name("fence_sqlite_protect: table", table);
    if (rc != FENCE_OK) {
        return rc;
    }
    fs_protect p = {table, NULL, 0};
    if (opts != NULL) {
        if (opts->column != NULL &&
            (rc = check_name("fence_sqlite_protect: column", opts->column)) != FENCE_OK) {
            return rc;
        }
        if (opts->permissive != 0 && opts->permissive != 1) {
            return fail(FENCE_EINVAL, "fence_sqlite_protect: permissive must be 0 or 1");
        }
        p.column = opts->column;
        p.permissive = opts->permissive;
    }
    rc = in_savepoint(db, protect_body, &p);
    return rc == FENCE_OK ? ok() : rc;
}

int fence_sqlite_unprotect(sqlite3 *db, const char *table)
{
    fs_state *s;
    int rc = need_state(db, "fence_sqlite_unprotect", &s);
    if (rc != FENCE_OK) {
        return rc;
    }
    rc = check_name("fence_sqlite_unprotect: table", table);
    if (rc != FENCE_OK) {
        return rc;
    }
    rc = in_savepoint(db, unprotect_body, table);
    return rc == FENCE_OK ? ok() : rc;
}

int fence_sqlite_set_token(sqlite3 *db, uint64_t token)
{
    fs_state *s;
    int rc = need_state(db, "fence_sqlite_set_token", &s);
    if (rc != FENCE_OK) {
        return rc;
    }
    if (token > (uint64_t)INT64_MAX) {
        atomic_store(&s->token, 0);
        return fail(FENCE_EINVAL, "fence_sqlite_set_token: token %llu is above 2^63-1 "
                    "(SQLite integers are signed 64-bit); the token is now cleared",
                    (unsigned long long)token);
    }
    atomic_store(&s->token, (int64_t)token);
    return ok();
}

int fence_sqlite_token(sqlite3 *db, uint64_t *token_out)
{
    fs_state *s;
    int rc = need_state(db, "fence_sqlite_token", &s);
    if (rc != FENCE_OK) {
        return rc;
    }
    if (token_out == NULL) {
        return fail(FENCE_EINVAL, "fence_sqlite_token: token_out is NULL");
    }
    int64_t t = atomic_load(&s->token);
    *token_out = t > 0 ? (uint64_t)t : 0;
    return ok();
}

int fence_sqlite_advance(sqlite3 *db, const char *resource)
{
    fs_state *s;
    int rc = need_state(db, "fence_sqlite_advance", &s);
    if (rc != FENCE_OK) {
        return rc;
    }
    rc = check_name("fence_sqlite_advance: resource", resource);
    if (rc != FENCE_OK) {
        return rc;
    }
    if (atomic_load(&s->token) <= 0) {
        return fail(FENCE_ENOTOKEN, "fence_sqlite_advance: no token set on this connection; "
                    "call fence_sqlite_set_token() first");
    }
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "INSERT INTO main.fence_advance(resource) VALUES (?1)", -1, &st,
                           NULL) != SQLITE_OK) {
        return fail_db(db, "fence_sqlite_advance");
    }
    sqlite3_bind_text(st, 1, resource, -1, SQLITE_STATIC);
    int step = sqlite3_step(st);
    if (step == SQLITE_DONE) {
        sqlite3_finalize(st);
        return ok();
    }
    rc = fence_sqlite_classify(db, NULL);
    fail(rc == FENCE_OK ? FENCE_EDB : rc, "fence_sqlite_advance: %s", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return rc == FENCE_OK ? FENCE_EDB : rc;
}

/* A token as fn_stale printed it: decimal digits only (no sign, no
 * space), 0..INT64_MAX, followed by exactly SUFFIX.  Sets *after (when
 * not NULL) past the suffix.  0 if it is not that. */
static int parse_tok(const char *p, const char *suffix, int64_t *out, const char **after)
{
    if (p[0] < '0' || p[0] > '9') {
        return 0;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno != 0 || end == p || v > (unsigned long long)INT64_MAX) {
        return 0;
    }
    size_t n = strlen(suffix);
    if (strncmp(end, suffix, n) != 0) {
        return 0;
    }
    *out = (int64_t)v;
    if (after != NULL) {
        *after = end + n;
    }
    return 1;
}

/* Parse ["table"|"resource"] ["quoted name"] [": token N is older than M"]
 * after the prefix. */
static void parse_detail(const char *p, fence_sqlite_error *out)
{
    static const char *const kinds[] = {"table", "resource"};
    for (size_t i = 0; i < 2; i++) {
        size_t n = strlen(kinds[i]);
        if (strncmp(p, kinds[i], n) == 0 && (p[n] == ' ' || p[n] == ':')) {
            snprintf(out->kind, sizeof out->kind, "%s", kinds[i]);
            p += n;
            break;
        }
    }
    if (out->kind[0] != '\0' && p[0] == ' ' && p[1] == '"') {
        size_t o = 0;
        p += 2;
        while (*p != '\0') {
            if (p[0] == '"' && p[1] == '"') {
                p++;
            } else if (p[0] == '"') {
                break;
            }
            if (o + 1 < sizeof out->name) {
                out->name[o++] = *p;
            }
            p++;
        }
        out->name[o] = '\0';
    }
    const char *t = strstr(p, ": token ");
    if (t != NULL) {
        /* Each number on its own: a stamp that is not a plain integer
         * (a REAL such as 1.0e+30, text) is unknown (0), never misread. */
        const char *rest = NULL;
        int64_t a = 0, b = 0;
        if (parse_tok(t + 8, " is older than ", &a, &rest)) {
            out->offered = a;
        }
        if (rest != NULL && parse_tok(rest, " (write rejected)", &b, NULL)) {
            out->highest = b;
        }
    }
}

int fence_sqlite_classify(sqlite3 *db, fence_sqlite_error *out)
{
    fence_sqlite_error local;
    if (out == NULL) {
        out = &local;
    }
    memset(out, 0, sizeof *out);
    if (db == NULL) {
        out->status = FENCE_EINVAL;
        return fail(FENCE_EINVAL, "fence_sqlite_classify: db is NULL");
    }
    int code = sqlite3_extended_errcode(db);
    out->sqlite_code = code;
    if (code == SQLITE_OK || code == SQLITE_ROW || code == SQLITE_DONE) {
        out->status = FENCE_OK;
        return ok();
    }
    const char *msg = sqlite3_errmsg(db);
    snprintf(out->message, sizeof out->message, "%s", msg ? msg : "");
    int primary = code & 0xff;
    if (primary == SQLITE_CONSTRAINT && strncmp(out->message, "fence:stale ", 12) == 0) {
        out->status = FENCE_STALE;
        parse_detail(out->message + 12, out);
    } else if ((primary == SQLITE_CONSTRAINT || primary == SQLITE_ERROR) &&
               strncmp(out->message, "fence:notoken ", 14) == 0) {
        out->status = FENCE_ENOTOKEN;
        parse_detail(out->message + 14, out);
    } else {
        out->status = FENCE_EDB;
    }
    return fail(out->status, "%s", out->message);
}
