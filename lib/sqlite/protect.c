/* protect.c -- putting a table under fencing: its five triggers, created
 * from the templates in sql/sqlite/ (and dropped again), inside the
 * savepoint the caller opens (fence_sqlite__in_savepoint). */
#include "sqlite_internal.h"

#include <string.h>

#define keep fence_sqlite__keep
#define quote_ident fence_sqlite__quote_ident

/* The five kinds of fencing trigger, in the order they are created, and
 * the name prefix each reserves: fence_<kind>_<table> (the same list as in
 * find_row_triggers.sql). */
enum { TRIG_BI, TRIG_AI, TRIG_BU, TRIG_AU, TRIG_BD, TRIG_N };
static const char *const trig_prefix[TRIG_N] = {
    "fence_bi_", "fence_ai_", "fence_bu_", "fence_au_", "fence_bd_",
};

/* The template values (sql/sqlite/README.md), in this order; TRIGGER last,
 * so that the column templates can be given all but it. */
enum {
    V_TABLE, V_TABLE_STR, V_TABLE_MSG, V_COL, V_COL_TYPE, V_STRICT, V_ROWKEY,
    V_CONFLICT, V_KEYS_CHANGED, V_KEY_COLUMNS, V_TRIGGER, V_N
};
static const char *const var_keys[V_N] = {
    "TABLE", "TABLE_STR", "TABLE_MSG", "COL", "COL_TYPE", "STRICT", "ROWKEY",
    "CONFLICT", "KEYS_CHANGED", "KEY_COLUMNS", "TRIGGER",
};

/* Everything protect_body builds; the strings belong to the arena. */
typedef struct fs_plan {
    fs_arena arena;
    fs_shape shape;
    fs_var vars[V_N];
    const char *trig[TRIG_N];   /* trigger names, unquoted */
    const char *q_trig[TRIG_N]; /* ... quoted */
} fs_plan;

/* The DROP statements for TABLE's fencing triggers, found by what they are
 * (find_row_triggers.sql) rather than by the names its current name would
 * give them: after ALTER TABLE RENAME they keep the old ones.  Collected
 * first: the schema cannot change under a running SELECT. */
static int collect_drops(sqlite3 *db, const char *table, sqlite3_str *drops)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, fence_sqlite__sql_find_row_triggers, -1, &st, NULL) !=
        SQLITE_OK) {
        return fs_fail_db(db, "looking up the fence triggers");
    }
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    int rc = FENCE_OK, step;
    while (rc == FENCE_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        char *q_name = quote_ident(name ? name : "");
        char *sql = NULL;
        if (q_name == NULL) {
            rc = fs_fail(db, FENCE_ENOMEM, "out of memory");
        } else {
            const fs_var vars[] = {{"TRIGGER", q_name}};
            rc = fence_sqlite__fill(db, fence_sqlite__sql_drop_row, vars, 1, &sql);
        }
        if (rc == FENCE_OK) {
            sqlite3_str_appendall(drops, sql);
        }
        sqlite3_free(sql);
        sqlite3_free(q_name);
    }
    if (rc == FENCE_OK && step != SQLITE_DONE) {
        rc = fs_fail_db(db, "looking up the fence triggers");
    }
    sqlite3_finalize(st);
    return rc;
}

/* Drop the fencing triggers of TABLE (its canonical name). */
static int drop_triggers(sqlite3 *db, const char *table)
{
    sqlite3_str *drops = sqlite3_str_new(NULL);
    int rc = collect_drops(db, table, drops);
    if (rc == FENCE_OK && sqlite3_str_errcode(drops) != SQLITE_OK) {
        rc = fs_fail(db, FENCE_ENOMEM, "out of memory");
    }
    char *all = sqlite3_str_finish(drops); /* NULL when there is nothing to drop */
    if (rc == FENCE_OK && all != NULL && sqlite3_exec(db, all, NULL, NULL, NULL) != SQLITE_OK) {
        rc = fs_fail_db(db, "dropping the fence triggers");
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
        return fs_fail_db(db, "looking up a trigger");
    }
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    int rc = FENCE_OK, step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        const char *other = (const char *)sqlite3_column_text(st, 0);
        other = other ? other : "?";
        rc = fs_fail(db, FENCE_EINVAL,
                     "a trigger named \"%s\" already exists on table \"%s\" (trigger names "
                     "fence_bi_/ai_/bu_/au_/bd_<table> are reserved for fencing); if \"%s\" is "
                     "a protected table renamed from \"%s\", protect \"%s\" again first: its "
                     "triggers then take its new name",
                     name, other, other, table, other);
    } else if (step != SQLITE_DONE) {
        rc = fs_fail_db(db, "looking up a trigger");
    }
    sqlite3_finalize(st);
    return rc;
}

/* Fill in the template values and the trigger names from the shape. */
static int plan_names(sqlite3 *db, const fs_protect *p, fs_plan *pl)
{
    fs_arena *a = &pl->arena;
    const fs_shape *sh = &pl->shape;
    const char *col = sh->col ? sh->col : p->column ? p->column : FENCE_SQLITE_DEFAULT_COLUMN;
    const char *q_table = keep(a, quote_ident(sh->table));
    const char *vals[V_N] = {
        [V_TABLE] = q_table,
        [V_TABLE_STR] = keep(a, sqlite3_mprintf("%Q", sh->table)),
        [V_TABLE_MSG] = q_table ? keep(a, sqlite3_mprintf("%q", q_table)) : NULL,
        [V_COL] = keep(a, quote_ident(col)),
        [V_COL_TYPE] = FENCE_SQLITE_COLUMN_TYPE,
        [V_STRICT] = p->permissive ? "0" : "1",
        [V_ROWKEY] = sh->rowkey,
        [V_CONFLICT] = sh->conflict,
        [V_KEYS_CHANGED] = sh->changed,
        [V_KEY_COLUMNS] = sh->keycols,
        [V_TRIGGER] = NULL, /* one per trigger, see create_triggers */
    };
    for (int i = 0; i < V_N; i++) {
        pl->vars[i] = (fs_var){var_keys[i], vals[i]};
    }
    for (int i = 0; i < TRIG_N; i++) {
        pl->trig[i] = keep(a, sqlite3_mprintf("%s%s", trig_prefix[i], sh->table));
        pl->q_trig[i] = pl->trig[i] ? keep(a, quote_ident(pl->trig[i])) : NULL;
    }
    if (a->oom || q_table == NULL) {
        return fs_fail(db, FENCE_ENOMEM, "out of memory");
    }
    return FENCE_OK;
}

/* The token column: added when missing (fence's own), else its NULLs
 * become 0; then the five triggers (BEFORE UPDATE only when some key can
 * change). */
static int create_triggers(sqlite3 *db, fs_plan *pl)
{
    static const char *const tpl[TRIG_N] = {
        [TRIG_BI] = fence_sqlite__sql_row_before_insert,
        [TRIG_AI] = fence_sqlite__sql_row_after_insert,
        [TRIG_BU] = fence_sqlite__sql_row_before_update,
        [TRIG_AU] = fence_sqlite__sql_row_after_update,
        [TRIG_BD] = fence_sqlite__sql_row_before_delete,
    };
    int rc;
    if (pl->shape.col == NULL) {
        rc = fence_sqlite__exec(db, "adding the token column", fence_sqlite__sql_add_column,
                                pl->vars, V_TRIGGER);
    } else {
        rc = fence_sqlite__exec(db, "setting NULL tokens to 0", fence_sqlite__sql_retrofit,
                                pl->vars, V_TRIGGER);
    }
    for (int i = 0; rc == FENCE_OK && i < TRIG_N; i++) {
        if (i == TRIG_BU && strcmp(pl->shape.changed, "0") == 0) {
            continue; /* no key can change */
        }
        pl->vars[V_TRIGGER].val = pl->q_trig[i];
        rc = fence_sqlite__exec(db, "creating a fence trigger", tpl[i], pl->vars, V_N);
    }
    return rc;
}

int fence_sqlite__stamped_column(sqlite3 *db, const char *table, fs_arena *a, const char **col,
                                 int *permissive)
{
    *col = NULL;
    *permissive = 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, fence_sqlite__sql_find_stamped_column, -1, &st, NULL) !=
        SQLITE_OK) {
        return fs_fail_db(db, "looking up the fence triggers");
    }
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    int rc = FENCE_OK, step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        *col = keep(a, sqlite3_mprintf("%s", name ? name : ""));
        *permissive = sqlite3_column_int(st, 1);
        rc = *col != NULL ? FENCE_OK : fs_fail(db, FENCE_ENOMEM, "out of memory");
    } else if (step != SQLITE_DONE) {
        rc = fs_fail_db(db, "looking up the fence triggers");
    }
    sqlite3_finalize(st);
    return rc;
}

/* An existing column that is not fence's own is the application's (an
 * ORM's version column: its meaning is its own), and fence never stamps
 * it: the writes of one holder would all leave the same value there. */
static int refuse_app_column(sqlite3 *db, const char *table, const char *col)
{
    return fs_fail(db, FENCE_EINVAL,
                   "column \"%s\" of \"%s\" is the application's, not fence's own token column "
                   "(one named %s or declared %s): fence stamps a column of its own beside it, "
                   "so that a version column keeps its meaning; protect \"%s\" without a "
                   "column (fence_protect('%s'); C: options.column NULL) to add \"%s\", or, if "
                   "\"%s\" holds fence's tokens (protected so by an older version of fence), "
                   "move them there with fence_migrate_version_column('%s') "
                   "(C: fence_sqlite_migrate_version_column)",
                   col, table, FENCE_SQLITE_DEFAULT_COLUMN, FENCE_SQLITE_COLUMN_TYPE, table,
                   table, FENCE_SQLITE_DEFAULT_COLUMN, col, table);
}

/* Protecting TABLE on column WANT while its triggers stamp another column
 * would start every row's stamp over at 0 and admit writes that the old
 * stamps refuse: refused, with the way on (an older fence's retrofit of a
 * version column: migrate it; fence's own: unprotect first). */
static int refuse_other_stamped(sqlite3 *db, const char *table, const char *want, fs_arena *a)
{
    const char *stamped = NULL;
    int permissive = 0;
    int rc = fence_sqlite__stamped_column(db, table, a, &stamped, &permissive);
    if (rc != FENCE_OK || stamped == NULL || sqlite3_stricmp(stamped, want) == 0) {
        return rc;
    }
    fs_shape sh;
    if ((rc = fence_sqlite__shape_read(db, table, stamped, a, &sh)) != FENCE_OK) {
        return rc;
    }
    if (!sh.col_own) {
        return fs_fail(db, FENCE_EINVAL,
                       "the fencing triggers of \"%s\" stamp its column \"%s\" (an older "
                       "fence's retrofit of a version column); protecting it on \"%s\" would "
                       "drop those stamps: move them with fence_migrate_version_column('%s') "
                       "(C: fence_sqlite_migrate_version_column), which protects it on \"%s\"",
                       table, stamped, want, table, FENCE_SQLITE_DEFAULT_COLUMN);
    }
    return fs_fail(db, FENCE_EINVAL,
                   "\"%s\" is fenced on its column \"%s\"; protecting it on \"%s\" would "
                   "start every row's stamp over: unprotect it first if that is what you want",
                   table, stamped, want);
}

int fence_sqlite__protect_body(sqlite3 *db, const void *arg)
{
    const fs_protect *p = arg;
    const char *want = p->column ? p->column : FENCE_SQLITE_DEFAULT_COLUMN;
    fs_plan pl = {0};
    int rc = fence_sqlite__ensure_schema(db);
    if (rc == FENCE_OK) {
        rc = fence_sqlite__shape_read(db, p->table, want, &pl.arena, &pl.shape);
    }
    if (rc == FENCE_OK && pl.shape.col != NULL && !pl.shape.col_own) {
        rc = refuse_app_column(db, pl.shape.table, pl.shape.col);
    }
    if (rc == FENCE_OK) {
        rc = refuse_other_stamped(db, pl.shape.table, want, &pl.arena);
    }
    if (rc == FENCE_OK) {
        rc = plan_names(db, p, &pl);
    }
    if (rc == FENCE_OK) {
        /* Old triggers first, so the retrofit UPDATE does not trip them. */
        rc = drop_triggers(db, pl.shape.table);
    }
    for (int i = 0; rc == FENCE_OK && i < TRIG_N; i++) {
        rc = check_trigger_free(db, pl.trig[i], pl.shape.table);
    }
    if (rc == FENCE_OK) {
        rc = create_triggers(db, &pl);
    }
    fence_sqlite__arena_free(&pl.arena);
    return rc;
}

int fence_sqlite__unprotect_body(sqlite3 *db, const void *table)
{
    fs_arena a = {0};
    const char *canon = NULL;
    int rc = fence_sqlite__find_table(db, table, 0, &a, &canon, NULL);
    if (rc == FENCE_OK) {
        rc = drop_triggers(db, canon);
    }
    fence_sqlite__arena_free(&a);
    return rc;
}
