/* template.c -- running the embedded SQL (the files of sql/sqlite): filling its
 * {{KEY}} placeholders, savepoints, the fence schema, and the arena that
 * owns the strings built for it. */
#include "sqlite_internal.h"

#include <stdarg.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Arena                                                                */
/* ------------------------------------------------------------------ */

char *fence_sqlite__keep(fs_arena *a, char *s)
{
    if (s == NULL) {
        a->oom = 1;
        return NULL;
    }
    if (a->n == a->cap) {
        size_t cap = a->cap != 0 ? 2 * a->cap : 16;
        char **p = sqlite3_realloc64(a->p, cap * sizeof *p);
        if (p == NULL) {
            sqlite3_free(s);
            a->oom = 1;
            return NULL;
        }
        a->p = p;
        a->cap = cap;
    }
    a->p[a->n++] = s;
    return s;
}

const char *fence_sqlite__keep_str(fs_arena *a, sqlite3_str *s, const char *if_empty)
{
    int err = sqlite3_str_errcode(s);
    char *text = sqlite3_str_finish(s); /* NULL when empty or on error */
    if (err != SQLITE_OK) {
        sqlite3_free(text);
        a->oom = 1;
        return NULL;
    }
    if (text == NULL) {
        return if_empty;
    }
    return fence_sqlite__keep(a, text);
}

void fence_sqlite__arena_free(fs_arena *a)
{
    for (size_t i = 0; i < a->n; i++) {
        sqlite3_free(a->p[i]);
    }
    sqlite3_free(a->p);
    a->p = NULL;
    a->n = a->cap = 0;
}

/* ------------------------------------------------------------------ */
/* Templates                                                            */
/* ------------------------------------------------------------------ */

static const char *lookup(const fs_var *vars, size_t nvars, const char *key, size_t klen)
{
    for (size_t i = 0; i < nvars; i++) {
        if (strlen(vars[i].key) == klen && memcmp(vars[i].key, key, klen) == 0) {
            return vars[i].val;
        }
    }
    return NULL;
}

int fence_sqlite__fill(sqlite3 *db, const char *tpl, const fs_var *vars, size_t nvars,
                       char **out_sql)
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
            return fs_fail(db, FENCE_EINVAL,
                           "internal: unterminated placeholder in embedded SQL");
        }
        sqlite3_str_append(out, p, (int)(open - p));
        size_t klen = (size_t)(close - open - 2);
        const char *val = lookup(vars, nvars, open + 2, klen);
        if (val == NULL) {
            sqlite3_free(sqlite3_str_finish(out));
            return fs_fail(db, FENCE_EINVAL,
                           "internal: unknown placeholder {{%.*s}} in embedded SQL", (int)klen,
                           open + 2);
        }
        sqlite3_str_appendall(out, val);
        p = close + 2;
    }
    if (sqlite3_str_errcode(out) != SQLITE_OK) {
        sqlite3_free(sqlite3_str_finish(out));
        return fs_fail(db, FENCE_ENOMEM, "out of memory");
    }
    *out_sql = sqlite3_str_finish(out);
    return FENCE_OK;
}

int fence_sqlite__exec(sqlite3 *db, const char *what, const char *tpl, const fs_var *vars,
                       size_t nvars)
{
    char *sql = NULL;
    int rc = fence_sqlite__fill(db, tpl, vars, nvars, &sql);
    if (rc != FENCE_OK) {
        return rc;
    }
    rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_free(sql);
    if (rc != SQLITE_OK) {
        return fs_fail_db(db, what);
    }
    return FENCE_OK;
}

char *fence_sqlite__quote_ident(const char *name)
{
    return sqlite3_mprintf("\"%w\"", name);
}

void fence_sqlite__list_add(sqlite3_str *s, const char *sep, const char *fmt, ...)
{
    if (sqlite3_str_length(s) > 0) {
        sqlite3_str_appendall(s, sep);
    }
    va_list ap;
    va_start(ap, fmt);
    sqlite3_str_vappendf(s, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------ */
/* Savepoints and the schema                                            */
/* ------------------------------------------------------------------ */

int fence_sqlite__in_savepoint(sqlite3 *db, int (*body)(sqlite3 *, const void *),
                               const void *arg)
{
    if (sqlite3_exec(db, "SAVEPOINT fence", NULL, NULL, NULL) != SQLITE_OK) {
        return fs_fail_db(db, "SAVEPOINT");
    }
    int rc = body(db, arg);
    if (rc != FENCE_OK) {
        sqlite3_exec(db, "ROLLBACK TO fence; RELEASE fence", NULL, NULL, NULL);
        return rc; /* body's message stays */
    }
    if (sqlite3_exec(db, "RELEASE fence", NULL, NULL, NULL) != SQLITE_OK) {
        rc = fs_fail_db(db, "RELEASE");
        sqlite3_exec(db, "ROLLBACK TO fence; RELEASE fence", NULL, NULL, NULL);
    }
    return rc;
}

/* One number from a query that returns one: *out; -1 on error. */
static int query_int(sqlite3 *db, const char *sql, int *out)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        return fs_fail_db(db, "reading the fence schema"), -1;
    }
    int rc = -1;
    if (sqlite3_step(st) == SQLITE_ROW) {
        *out = sqlite3_column_int(st, 0);
        rc = 0;
    } else {
        fs_fail_db(db, "reading the fence schema");
    }
    sqlite3_finalize(st);
    return rc;
}

/* The upgrade a schema needs: UP_HOLDER when main.fence_resource lacks its
 * holder column (a schema from before holders; upgrade_holder.sql drops
 * every guard trigger), else UP_TRIGGERS when a guard trigger is from an
 * older version: it does not ask fence_mark_rule() (those also predate the
 * name rule), and upgrade_triggers.sql drops them; 0 for none (or no such table yet); -1
 * on error.  schema.sql then creates what is missing. */
enum { UP_HOLDER = 1, UP_TRIGGERS = 2 };
static int needs_upgrade(sqlite3 *db)
{
    int cols = 0, holder = 0, old_triggers = 0;
    if (query_int(db, "SELECT count(*) FROM pragma_table_info('fence_resource', 'main')",
                  &cols) < 0 ||
        query_int(db, "SELECT count(*) FROM pragma_table_info('fence_resource', 'main') "
                      "WHERE name = 'holder'",
                  &holder) < 0 ||
        query_int(db, "SELECT count(*) FROM main.sqlite_master WHERE type = 'trigger' "
                      "AND name IN ('fence_advance_insert', 'fence_resource_insert', "
                      "'fence_resource_update') AND instr(sql, 'fence_mark_rule(') = 0",
                  &old_triggers) < 0) {
        return -1;
    }
    if (cols > 0 && holder == 0) {
        return UP_HOLDER;
    }
    return old_triggers > 0 ? UP_TRIGGERS : 0;
}

int fence_sqlite__ensure_schema(sqlite3 *db)
{
    int up = needs_upgrade(db);
    if (up < 0) {
        return FENCE_EDB;
    }
    if (up == UP_HOLDER &&
        sqlite3_exec(db, fence_sqlite__sql_upgrade_holder, NULL, NULL, NULL) != SQLITE_OK) {
        return fs_fail_db(db, "upgrading the fence schema (adding fence_resource.holder)");
    }
    if (up == UP_TRIGGERS &&
        sqlite3_exec(db, fence_sqlite__sql_upgrade_triggers, NULL, NULL, NULL) != SQLITE_OK) {
        return fs_fail_db(db, "upgrading the fence schema (its guard triggers)");
    }
    if (sqlite3_exec(db, fence_sqlite__sql_schema, NULL, NULL, NULL) != SQLITE_OK) {
        return fs_fail_db(db, "creating the fence schema (fence_resource, fence_advance)");
    }
    return FENCE_OK;
}

static int schema_body(sqlite3 *db, const void *unused)
{
    (void)unused;
    return fence_sqlite__ensure_schema(db);
}

int fence_sqlite__install_schema(sqlite3 *db)
{
    int up = 0;
    if (sqlite3_get_autocommit(db) && (up = needs_upgrade(db)) < 0) {
        return FENCE_EDB;
    }
    if (up == 0) {
        /* Nothing to upgrade, or inside the caller's transaction (whose
         * lock is the caller's business). */
        return fence_sqlite__in_savepoint(db, schema_body, NULL);
    }
    /* An upgrade reads, then writes: take the write lock first, or a
     * connection upgrading at the same time would make this one fail
     * (SQLITE_BUSY) instead of wait.  schema_body looks again under it. */
    if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        return fs_fail_db(db, "upgrading the fence schema: BEGIN IMMEDIATE");
    }
    int rc = fence_sqlite__in_savepoint(db, schema_body, NULL);
    if (rc == FENCE_OK && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        rc = fs_fail_db(db, "upgrading the fence schema: COMMIT");
    }
    if (rc != FENCE_OK && !sqlite3_get_autocommit(db)) {
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    }
    return rc;
}
