/* api.c -- the C API of fence_sqlite.h: attach, protect, the connection's
 * token and holder, per-resource marks.  Every call clears the connection's message
 * on success and writes one on failure (errmsg.c). */
#include "sqlite_internal.h"

#include <stdatomic.h>
#include <string.h>

/* db must be attached: its state into *out. */
static int need_state(sqlite3 *db, const char *what, fs_state **out)
{
    if (db == NULL) {
        return fs_fail(NULL, FENCE_EINVAL, "%s: db is NULL", what);
    }
    *out = fence_sqlite__state_get(db);
    if (*out == NULL) {
        return fs_fail(db, FENCE_ESTATE,
                       "%s: call fence_sqlite_attach(db) on this connection first", what);
    }
    return FENCE_OK;
}

/* need_state, then a valid name. */
static int need_state_name(sqlite3 *db, const char *what, const char *name_what,
                           const char *name, fs_state **out)
{
    int rc = need_state(db, what, out);
    if (rc == FENCE_OK) {
        rc = fence_sqlite__check_name(db, name_what, name);
    }
    return rc;
}

fence_status fence_sqlite_attach(sqlite3 *db)
{
    if (db == NULL) {
        return (fence_status)fs_fail(NULL, FENCE_EINVAL, "fence_sqlite_attach: db is NULL");
    }
    int rc = fence_sqlite__register(db, NULL);
    if (rc == FENCE_OK) {
        rc = fence_sqlite__install_schema(db);
    }
    return rc == FENCE_OK ? fence_sqlite__ok(db) : (fence_status)rc;
}

void fence_sqlite_protect_options_init(fence_sqlite_protect_options *opts)
{
    if (opts != NULL) {
        memset(opts, 0, sizeof *opts);
    }
}

fence_status fence_sqlite_protect(sqlite3 *db, const char *table,
                                  const fence_sqlite_protect_options *opts)
{
    fs_state *s;
    int rc = need_state_name(db, "fence_sqlite_protect", "fence_sqlite_protect: table", table,
                             &s);
    if (rc != FENCE_OK) {
        return (fence_status)rc;
    }
    fs_protect p = {table, NULL, 0};
    if (opts != NULL) {
        if (opts->column != NULL &&
            (rc = fence_sqlite__check_name(db, "fence_sqlite_protect: column", opts->column)) !=
                FENCE_OK) {
            return (fence_status)rc;
        }
        if (opts->permissive != 0 && opts->permissive != 1) {
            return (fence_status)fs_fail(db, FENCE_EINVAL,
                                         "fence_sqlite_protect: permissive must be 0 or 1");
        }
        p.column = opts->column;
        p.permissive = opts->permissive;
    }
    rc = fence_sqlite__in_savepoint(db, fence_sqlite__protect_body, &p);
    return rc == FENCE_OK ? fence_sqlite__ok(db) : (fence_status)rc;
}

fence_status fence_sqlite_unprotect(sqlite3 *db, const char *table)
{
    fs_state *s;
    int rc = need_state_name(db, "fence_sqlite_unprotect", "fence_sqlite_unprotect: table",
                             table, &s);
    if (rc == FENCE_OK) {
        rc = fence_sqlite__in_savepoint(db, fence_sqlite__unprotect_body, table);
    }
    return rc == FENCE_OK ? fence_sqlite__ok(db) : (fence_status)rc;
}

fence_status fence_sqlite_migrate_version_column(sqlite3 *db, const char *table,
                                                 const char *column)
{
    fs_state *s;
    int rc = need_state_name(db, "fence_sqlite_migrate_version_column",
                             "fence_sqlite_migrate_version_column: table", table, &s);
    if (rc == FENCE_OK && column != NULL) {
        rc = fence_sqlite__check_name(db, "fence_sqlite_migrate_version_column: column", column);
    }
    if (rc == FENCE_OK) {
        const fs_migrate m = {table, column};
        rc = fence_sqlite__in_savepoint(db, fence_sqlite__migrate_body, &m);
    }
    return rc == FENCE_OK ? fence_sqlite__ok(db) : (fence_status)rc;
}

fence_status fence_sqlite_set_token(sqlite3 *db, uint64_t token, const char *holder)
{
    fs_state *s;
    int rc = need_state(db, "fence_sqlite_set_token", &s);
    if (rc != FENCE_OK) {
        return (fence_status)rc;
    }
    if (token > FENCE_TOKEN_MAX) {
        fence_sqlite__state_set(s, 0, NULL);
        return (fence_status)fs_fail(db, FENCE_EINVAL,
                                     "fence_sqlite_set_token: token %llu is above 2^63-1 "
                                     "(FENCE_TOKEN_MAX); the token and holder are now cleared",
                                     (unsigned long long)token);
    }
    size_t hlen = holder != NULL ? strnlen(holder, FENCE_HOLDER_LEN + 1) : 0;
    const char *why = holder != NULL ? fence__holder_problem(holder, hlen, NULL) : NULL;
    if (why != NULL) {
        fence_sqlite__state_set(s, 0, NULL);
        return (fence_status)fs_fail(db, FENCE_EINVAL,
                                     "fence_sqlite_set_token: the holder %s (a holder id is %d "
                                     "lowercase hex digits; NULL for none); the token and "
                                     "holder are now cleared",
                                     why, FENCE_HOLDER_LEN);
    }
    fence_sqlite__state_set(s, (int64_t)token, holder);
    return fence_sqlite__ok(db);
}

fence_status fence_sqlite_holder(sqlite3 *db, char holder[FENCE_HOLDER_LEN + 1])
{
    if (holder != NULL) {
        holder[0] = '\0';
    }
    fs_state *s;
    int rc = need_state(db, "fence_sqlite_holder", &s);
    if (rc != FENCE_OK) {
        return (fence_status)rc;
    }
    if (holder == NULL) {
        return (fence_status)fs_fail(db, FENCE_EINVAL, "fence_sqlite_holder: holder is NULL");
    }
    fence_sqlite__state_holder(s, holder);
    return fence_sqlite__ok(db);
}

fence_status fence_sqlite_token(sqlite3 *db, uint64_t *token)
{
    fs_state *s;
    int rc = need_state(db, "fence_sqlite_token", &s);
    if (rc != FENCE_OK) {
        return (fence_status)rc;
    }
    if (token == NULL) {
        return (fence_status)fs_fail(db, FENCE_EINVAL, "fence_sqlite_token: token is NULL");
    }
    int64_t t = atomic_load(&s->token);
    *token = t > 0 ? (uint64_t)t : 0;
    return fence_sqlite__ok(db);
}

fence_status fence_sqlite_advance(sqlite3 *db, const char *resource, fence_stale *stale)
{
    if (stale != NULL) {
        memset(stale, 0, sizeof *stale);
    }
    fs_state *s;
    int rc = need_state_name(db, "fence_sqlite_advance", "fence_sqlite_advance: resource",
                             resource, &s);
    if (rc != FENCE_OK) {
        return (fence_status)rc;
    }
    /* Without a token the trigger refuses it, as it refuses any write
     * without one: one rule, one message. */
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "INSERT INTO main.fence_advance(resource) VALUES (?1)", -1, &st,
                           NULL) != SQLITE_OK) {
        return (fence_status)fs_fail_db(db, "fence_sqlite_advance");
    }
    sqlite3_bind_text(st, 1, resource, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_DONE) {
        sqlite3_finalize(st);
        return fence_sqlite__ok(db);
    }
    /* Classify before finalize: the error belongs to the statement. */
    rc = fence_sqlite_classify(db, stale);
    rc = rc == FENCE_OK ? FENCE_EDB : rc;
    fs_fail(db, rc, "fence_sqlite_advance: %s", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return (fence_status)rc;
}

fence_status fence_sqlite_mark(sqlite3 *db, const char *resource, uint64_t *mark)
{
    if (mark != NULL) {
        *mark = 0;
    }
    fs_state *s;
    int rc = need_state_name(db, "fence_sqlite_mark", "fence_sqlite_mark: resource", resource,
                             &s);
    if (rc != FENCE_OK) {
        return (fence_status)rc;
    }
    if (mark == NULL) {
        return (fence_status)fs_fail(db, FENCE_EINVAL, "fence_sqlite_mark: mark is NULL");
    }
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "SELECT high_water FROM main.fence_resource WHERE name = ?1", -1,
                           &st, NULL) != SQLITE_OK) {
        return (fence_status)fs_fail_db(db, "fence_sqlite_mark");
    }
    sqlite3_bind_text(st, 1, resource, -1, SQLITE_STATIC);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        /* The guard triggers only ever store a token; anything else was
         * written around them. */
        int64_t v = sqlite3_column_int64(st, 0);
        if (sqlite3_column_type(st, 0) != SQLITE_INTEGER || v < 0) {
            rc = fs_fail(db, FENCE_EDB, "fence_sqlite_mark: the mark of \"%s\" is not a token",
                         resource);
        } else {
            *mark = (uint64_t)v;
        }
    } else if (step != SQLITE_DONE) {
        rc = fs_fail_db(db, "fence_sqlite_mark");
    }
    sqlite3_finalize(st);
    return rc == FENCE_OK ? fence_sqlite__ok(db) : (fence_status)rc;
}
