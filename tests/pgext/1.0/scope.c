/* scope.c -- whether a setting (fence.token, fence.holder) holds for the
 * current transaction only, or for the whole session.
 *
 * A session-level `SET fence.token = 6` (or set_config(.., false), or ALTER
 * ROLE/DATABASE ... SET) silently applies to every later transaction of the
 * connection, which a connection pool hands to other code: the guard
 * refuses such a token.  PostgreSQL keeps, per setting, a stack of the
 * values to restore (utils/guc_tables.h): each SET LOCAL, SET or
 * function SET clause of an open transaction level pushes an entry saying
 * which of them made the current value.  So the current value is the
 * transaction's when the top entry is GUC_LOCAL or GUC_SET_LOCAL (SET
 * LOCAL, restored at the end of the transaction) or GUC_SAVE (a function's
 * SET clause, restored when it returns); it is the session's when the top
 * entry is GUC_SET (a SET in this transaction, kept at commit) or there is
 * no entry at all (a value set before this transaction began).
 *
 * The settings are placeholders (no module defines them), which
 * PostgreSQL 15 keeps in the array get_guc_variables() returns, sorted by
 * guc.c's guc_name_compare(); the array may move and grow as placeholders
 * are added, so it is searched at each call (a binary search over a few
 * hundred names). */
#include "fence_ext.h"

#include "utils/guc.h"
#include "utils/guc_tables.h"

/* guc.c's guc_name_compare(): ASCII-only case folding, the order of the
 * array. */
static int name_compare(const char *a, const char *b)
{
    while (*a && *b) {
        char ca = *a++;
        char cb = *b++;
        if (ca >= 'A' && ca <= 'Z') {
            ca += 'a' - 'A';
        }
        if (cb >= 'A' && cb <= 'Z') {
            cb += 'a' - 'A';
        }
        if (ca != cb) {
            return ca - cb;
        }
    }
    if (*a) {
        return 1;
    }
    if (*b) {
        return -1;
    }
    return 0;
}

static struct config_generic *find_setting(const char *name)
{
    struct config_generic **vars = get_guc_variables();
    int lo = 0;
    int hi = GetNumConfigOptions() - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = name_compare(name, vars[mid]->name);
        if (c == 0) {
            return vars[mid];
        }
        if (c < 0) {
            hi = mid - 1;
        } else {
            lo = mid + 1;
        }
    }
    return NULL;
}

fence_ext_scope fence_ext_setting(const char *name, const char **value)
{
    struct config_generic *g = find_setting(name);
    const char *v = NULL;
    *value = NULL;
    if (g == NULL) {
        return FENCE_SCOPE_UNSET;
    }
    if (g->vartype == PGC_STRING) {
        v = *((struct config_string *)g)->variable;
    } else {
        /* Someone defined it as a typed variable: read it the slow way. */
        v = GetConfigOption(name, true, false);
    }
    if (v == NULL || v[0] == '\0') {
        return FENCE_SCOPE_UNSET;
    }
    *value = v;
    if (g->stack == NULL) {
        return FENCE_SCOPE_SESSION;
    }
    switch (g->stack->state) {
    case GUC_SAVE:
    case GUC_LOCAL:
    case GUC_SET_LOCAL:
        return FENCE_SCOPE_TRANSACTION;
    case GUC_SET:
        return FENCE_SCOPE_SESSION;
    }
    return FENCE_SCOPE_SESSION; /* an unknown state: fail closed */
}

PG_FUNCTION_INFO_V1(fence_c_restoring);

/* fence.c_restoring(): whether the session turned check_function_bodies
 * off, as pg_dump's scripts do before they create the extension and then
 * the fence.sql objects they hold.  CREATE EXTENSION itself turns it off
 * while the extension's script runs (a GUC_SAVE entry on top of the
 * setting's stack, whose prior value is the session's), so the script's
 * own current_setting() cannot tell; this looks under that entry.
 * fence--*.sql skips its "fence.sql first" check when true. */
Datum fence_c_restoring(PG_FUNCTION_ARGS)
{
    struct config_generic *g = find_setting("check_function_bodies");
    bool outer;
    (void)fcinfo;
    if (g == NULL || g->vartype != PGC_BOOL) {
        PG_RETURN_BOOL(false);
    }
    outer = *((struct config_bool *)g)->variable;
    if (g->stack != NULL && g->stack->state == GUC_SAVE) {
        outer = g->stack->prior.val.boolval;
    }
    PG_RETURN_BOOL(!outer);
}
