/* sqlfuncs.c -- the SQL functions (fence_token, fence_set_token,
 * fence_holder, fence_stale, fence_mark_rule, fence_stamp_rule,
 * fence_protect, fence_unprotect, fence_migrate_version_column,
 * fence_init)
 * and their registration on a connection; the whole of what the loadable extension
 * offers (see docs/sqlite.md). */
#include "sqlite_internal.h"

#include <stdatomic.h>
#include <string.h>

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

/* Why V is not a token for fence_set_token, or NULL with *t set (0 clears). */
static const char *token_value(sqlite3_value *v, int64_t *t)
{
    switch (sqlite3_value_type(v)) {
    case SQLITE_NULL:
        *t = 0;
        return NULL;
    case SQLITE_INTEGER:
        *t = sqlite3_value_int64(v);
        return *t < 0 ? "is negative" : NULL;
    case SQLITE_TEXT: {
        /* The one grammar: digits only, no sign, space or leading zero;
         * "0" clears, as the integer 0 does. */
        const char *txt = (const char *)sqlite3_value_text(v);
        size_t n = (size_t)sqlite3_value_bytes(v);
        uint64_t u = 0;
        if (txt == NULL || n != strlen(txt) || fence__u64_parse(txt, n, FENCE_TOKEN_MAX, &u) != 0) {
            return txt && txt[0] == '\0' ? "is empty text"
                                         : "is not a decimal integer between 1 and 2^63-1 "
                                           "(digits only: no sign, space or leading zero)";
        }
        *t = (int64_t)u;
        return NULL;
    }
    case SQLITE_FLOAT:
        return "is a real number (above 2^63-1, or not an integer)";
    default:
        return "is a blob";
    }
}

/* Why V is not a holder for fence_set_token, or NULL with *h set (NULL:
 * none -- SQL NULL or ''). */
static const char *holder_value(sqlite3_value *v, const char **h)
{
    *h = NULL;
    int type = sqlite3_value_type(v);
    if (type == SQLITE_NULL) {
        return NULL;
    }
    if (type != SQLITE_TEXT) {
        return "is not text";
    }
    const char *txt = (const char *)sqlite3_value_text(v);
    size_t n = (size_t)sqlite3_value_bytes(v);
    if (txt == NULL && n > 0) {
        return "could not be read (out of memory)";
    }
    if (n == 0) {
        return NULL; /* '': none */
    }
    if (n != strlen(txt)) {
        return "contains a NUL byte";
    }
    const char *why = fence__holder_problem(txt, n, NULL);
    if (why == NULL) {
        *h = txt;
    }
    return why;
}

/* fence_set_token(N [, holder]): set (N >= 1) or clear (NULL, 0) the
 * token, and set the holder (32 lowercase hex digits; NULL, '' or no
 * argument: none); anything else clears both and fails.  Returns the token
 * or NULL.  DIRECTONLY. */
static void fn_set_token(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    fs_state *s = sqlite3_user_data(ctx);
    int64_t t = 0;
    const char *h = NULL;
    int bad_holder = 0;
    const char *why = token_value(argv[0], &t);
    if (why == NULL && argc > 1) {
        why = holder_value(argv[1], &h);
        bad_holder = why != NULL;
    }
    if (why != NULL) {
        fence_sqlite__state_set(s, 0, NULL);
        char *msg = sqlite3_mprintf("fence:notoken fence_set_token: the %s %s%s; the "
                                    "connection's token and holder are now cleared",
                                    bad_holder ? "holder" : "token", why,
                                    bad_holder ? " (a holder id is 32 lowercase hex digits)"
                                               : "");
        sqlite3_result_error(ctx, msg ? msg : "fence:notoken fence_set_token: bad token", -1);
        sqlite3_free(msg);
        return;
    }
    fence_sqlite__state_set(s, t, h);
    if (t > 0) {
        sqlite3_result_int64(ctx, t);
    } else {
        sqlite3_result_null(ctx);
    }
}

/* fence_holder(): the connection's holder, NULL when none.  INNOCUOUS. */
static void fn_holder(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    (void)argv;
    char h[FENCE_HOLDER_LEN + 1];
    fence_sqlite__state_holder(sqlite3_user_data(ctx), h);
    if (h[0] != '\0') {
        sqlite3_result_text(ctx, h, FENCE_HOLDER_LEN, SQLITE_TRANSIENT);
    } else {
        sqlite3_result_null(ctx);
    }
}

/* fence_stale(kind, name, offered, highest [, reason, holder]): always
 * fails with SQLITE_CONSTRAINT_TRIGGER and the message classify.c reads
 * back (one line):
 *   fence:stale <kind> "<name>": token <offered> is older than <highest>
 *     (write rejected) reason=older[ holder=<h>|none]
 *   fence:stale <kind> "<name>": token <offered> is not newer than
 *     <highest> (write rejected) reason=repeat holder=<h>|none
 * The holder part comes only with the 6-argument form, which the resource
 * triggers use: <h> is the mark's holder, "none" when it has none.  RAISE()
 * in SQLite 3.40 takes only a literal message, which cannot carry the
 * tokens; the triggers call this first and keep a literal RAISE right
 * behind it.  INNOCUOUS: it reads nothing and writes nothing. */
static void fn_stale(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    const char *kind = (const char *)sqlite3_value_text(argv[0]);
    const char *name = (const char *)sqlite3_value_text(argv[1]);
    const char *offered = (const char *)sqlite3_value_text(argv[2]);
    const char *highest = (const char *)sqlite3_value_text(argv[3]);
    int repeat = 0;
    const char *holder = NULL;
    if (argc >= 6) {
        const char *reason = (const char *)sqlite3_value_text(argv[4]);
        repeat = reason != NULL && strcmp(reason, "repeat") == 0;
        const char *h = (const char *)sqlite3_value_text(argv[5]);
        size_t n = (size_t)sqlite3_value_bytes(argv[5]);
        /* Only ever a well-formed id goes into the message. */
        holder = h != NULL && fence__holder_problem(h, n, NULL) == NULL ? h : "none";
    }
    char *msg = sqlite3_mprintf("fence:stale %s \"%w\": token %s is %s than %s "
                                "(write rejected) reason=%s%s%s",
                                kind ? kind : "table", name ? name : "",
                                offered ? offered : "NULL", repeat ? "not newer" : "older",
                                highest ? highest : "NULL", repeat ? "repeat" : "older",
                                holder ? " holder=" : "", holder ? holder : "");
    sqlite3_result_error(ctx, msg ? msg : "fence:stale (write rejected)", -1);
    sqlite3_result_error_code(ctx, SQLITE_CONSTRAINT_TRIGGER);
    sqlite3_free(msg);
}

/* ---- the store rule, for the triggers (lib/common/rule.c) ----------------
 * Every trigger that compares tokens calls one of these two, so the rule
 * is written once, in C, for this store.  A connection without them (no
 * fence_sqlite_attach, no extension) cannot run the triggers at all: it
 * fails closed with "no such function".  Arguments come from the
 * triggers: a stored mark or stamp, fence_token(), holder ids. */

/* A stored mark or stamp as the rule sees it: NULL and integers <= 0 are
 * 0 (none yet: the triggers have always counted them so); any other value
 * that is not an integer (a REAL, text, a blob: written around the
 * triggers) is -1, which the caller refuses rather than guess. */
static int64_t stored_value(sqlite3_value *v)
{
    switch (sqlite3_value_type(v)) {
    case SQLITE_NULL:
        return 0;
    case SQLITE_INTEGER: {
        int64_t x = sqlite3_value_int64(v);
        return x > 0 ? x : 0;
    }
    default:
        return -1;
    }
}

/* The offered token: 0 for NULL (no token: the rule does not apply, the
 * trigger's own notoken check decides), else 1..FENCE_TOKEN_MAX; -1 for
 * anything else (fence_token() never returns it). */
static int64_t offered_token(sqlite3_value *v)
{
    if (sqlite3_value_type(v) == SQLITE_NULL) {
        return 0;
    }
    if (sqlite3_value_type(v) != SQLITE_INTEGER || sqlite3_value_int64(v) < 1) {
        return -1;
    }
    return sqlite3_value_int64(v);
}

/* A holder argument: NULL or '' is none (""); other text is compared
 * whole; anything else (a blob, a number, text with a NUL) is -1. */
static int holder_arg(sqlite3_value *v, const char **out)
{
    *out = "";
    if (sqlite3_value_type(v) == SQLITE_NULL) {
        return 0;
    }
    const char *t = (const char *)sqlite3_value_text(v);
    if (sqlite3_value_type(v) != SQLITE_TEXT || t == NULL ||
        (size_t)sqlite3_value_bytes(v) != strlen(t)) {
        return -1;
    }
    *out = t;
    return 0;
}

static void rule_result(sqlite3_context *ctx, int outcome)
{
    sqlite3_result_text(ctx, fence__rule_name(outcome), -1, SQLITE_STATIC);
}

/* fence_mark_rule(mark, mark_holder, token, holder): fence__mark_rule --
 * 'raise', 'admit', 'older' or 'repeat'; NULL for a NULL token.  A mark
 * that is not an integer is 'older' (refused).  A token or holder that
 * fence_token() / fence_holder() could not have given is an error, which
 * fails the statement.  INNOCUOUS, DETERMINISTIC. */
static void fn_mark_rule(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    int64_t mark = stored_value(argv[0]);
    int64_t token = offered_token(argv[2]);
    const char *mark_holder, *holder;
    if (token < 0 || holder_arg(argv[1], &mark_holder) < 0 || holder_arg(argv[3], &holder) < 0) {
        sqlite3_result_error(ctx, "fence_mark_rule: the token must be an integer 1..2^63-1 "
                             "or NULL and the holders text or NULL", -1);
        return;
    }
    if (token == 0) {
        sqlite3_result_null(ctx);
    } else if (mark < 0) {
        rule_result(ctx, FENCE__RULE_OLDER);
    } else {
        rule_result(ctx, fence__mark_rule((uint64_t)mark, mark_holder, (uint64_t)token, holder));
    }
}

/* fence_stamp_rule(stamp, token): fence__stamp_rule -- 'admit' or
 * 'older'; NULL for a NULL token.  A stamp that is not an integer is
 * 'older' (refused).  INNOCUOUS, DETERMINISTIC. */
static void fn_stamp_rule(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    int64_t stamp = stored_value(argv[0]);
    int64_t token = offered_token(argv[1]);
    if (token < 0) {
        sqlite3_result_error(ctx, "fence_stamp_rule: the token must be an integer 1..2^63-1 "
                             "or NULL", -1);
    } else if (token == 0) {
        sqlite3_result_null(ctx);
    } else if (stamp < 0) {
        rule_result(ctx, FENCE__RULE_OLDER);
    } else {
        rule_result(ctx, fence__stamp_rule((uint64_t)stamp, (uint64_t)token));
    }
}

static void result_fail(sqlite3_context *ctx, int status)
{
    if (status == FENCE_ENOMEM) {
        sqlite3_result_error_nomem(ctx);
    } else {
        sqlite3_result_error(ctx, fence_sqlite_errmsg(sqlite3_context_db_handle(ctx)), -1);
    }
}

/* A text argument of an SQL function as a C string: NULL for SQL NULL;
 * fails for non-text, embedded NUL, empty or oversized text. */
static int value_name(sqlite3 *db, sqlite3_value *v, const char *what, const char **out)
{
    *out = NULL;
    int type = sqlite3_value_type(v);
    if (type == SQLITE_NULL) {
        return FENCE_OK;
    }
    if (type != SQLITE_TEXT) {
        return fs_fail(db, FENCE_EINVAL, "%s must be text", what);
    }
    const char *s = (const char *)sqlite3_value_text(v);
    int n = sqlite3_value_bytes(v);
    if (s == NULL) {
        return fs_fail(db, FENCE_ENOMEM, "%s: out of memory", what);
    }
    if ((size_t)n != strlen(s)) {
        return fs_fail(db, FENCE_EINVAL, "%s contains a NUL byte", what);
    }
    int rc = fence_sqlite__check_name(db, what, s);
    if (rc != FENCE_OK) {
        return rc;
    }
    *out = s;
    return FENCE_OK;
}

/* fence_protect(table [, column [, permissive]]).  DIRECTONLY. */
static void fn_protect(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    sqlite3 *db = sqlite3_context_db_handle(ctx);
    fs_protect p = {NULL, NULL, 0};
    int rc = value_name(db, argv[0], "fence_protect: table", &p.table);
    if (rc == FENCE_OK && p.table == NULL) {
        rc = fs_fail(db, FENCE_EINVAL, "fence_protect: table is NULL");
    }
    if (rc == FENCE_OK && argc > 1) {
        rc = value_name(db, argv[1], "fence_protect: column", &p.column);
    }
    if (rc == FENCE_OK && argc > 2) {
        if (sqlite3_value_type(argv[2]) != SQLITE_INTEGER ||
            (sqlite3_value_int64(argv[2]) != 0 && sqlite3_value_int64(argv[2]) != 1)) {
            rc = fs_fail(db, FENCE_EINVAL, "fence_protect: permissive must be 0 or 1");
        } else {
            p.permissive = sqlite3_value_int(argv[2]);
        }
    }
    if (rc == FENCE_OK) {
        rc = fence_sqlite__in_savepoint(db, fence_sqlite__protect_body, &p);
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
    sqlite3 *db = sqlite3_context_db_handle(ctx);
    const char *table = NULL;
    int rc = value_name(db, argv[0], "fence_unprotect: table", &table);
    if (rc == FENCE_OK && table == NULL) {
        rc = fs_fail(db, FENCE_EINVAL, "fence_unprotect: table is NULL");
    }
    if (rc == FENCE_OK) {
        rc = fence_sqlite__in_savepoint(db, fence_sqlite__unprotect_body, table);
    }
    if (rc != FENCE_OK) {
        result_fail(ctx, rc);
        return;
    }
    sqlite3_result_int(ctx, 1);
}

/* fence_migrate_version_column(table [, column]).  DIRECTONLY. */
static void fn_migrate(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    sqlite3 *db = sqlite3_context_db_handle(ctx);
    fs_migrate m = {NULL, NULL};
    int rc = value_name(db, argv[0], "fence_migrate_version_column: table", &m.table);
    if (rc == FENCE_OK && m.table == NULL) {
        rc = fs_fail(db, FENCE_EINVAL, "fence_migrate_version_column: table is NULL");
    }
    if (rc == FENCE_OK && argc > 1) {
        rc = value_name(db, argv[1], "fence_migrate_version_column: column", &m.column);
    }
    if (rc == FENCE_OK) {
        rc = fence_sqlite__in_savepoint(db, fence_sqlite__migrate_body, &m);
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
    int rc = fence_sqlite__install_schema(sqlite3_context_db_handle(ctx));
    if (rc != FENCE_OK) {
        result_fail(ctx, rc);
        return;
    }
    sqlite3_result_int(ctx, 1);
}

static const struct {
    const char *name;
    int nargs;
    int flags;
    void (*fn)(sqlite3_context *, int, sqlite3_value **);
} fns[] = {
    {"fence_token", 0, SQLITE_UTF8 | SQLITE_INNOCUOUS, fn_token},
    {"fence_holder", 0, SQLITE_UTF8 | SQLITE_INNOCUOUS, fn_holder},
    {"fence_stale", 4, SQLITE_UTF8 | SQLITE_INNOCUOUS, fn_stale},
    {"fence_stale", 6, SQLITE_UTF8 | SQLITE_INNOCUOUS, fn_stale},
    {"fence_mark_rule", 4, SQLITE_UTF8 | SQLITE_INNOCUOUS | SQLITE_DETERMINISTIC, fn_mark_rule},
    {"fence_stamp_rule", 2, SQLITE_UTF8 | SQLITE_INNOCUOUS | SQLITE_DETERMINISTIC, fn_stamp_rule},
    {"fence_set_token", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY, fn_set_token},
    {"fence_set_token", 2, SQLITE_UTF8 | SQLITE_DIRECTONLY, fn_set_token},
    {"fence_protect", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY, fn_protect},
    {"fence_protect", 2, SQLITE_UTF8 | SQLITE_DIRECTONLY, fn_protect},
    {"fence_protect", 3, SQLITE_UTF8 | SQLITE_DIRECTONLY, fn_protect},
    {"fence_unprotect", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY, fn_unprotect},
    {"fence_migrate_version_column", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY, fn_migrate},
    {"fence_migrate_version_column", 2, SQLITE_UTF8 | SQLITE_DIRECTONLY, fn_migrate},
    {"fence_init", 0, SQLITE_UTF8 | SQLITE_DIRECTONLY, fn_init},
};

int fence_sqlite__register(sqlite3 *db, char **errmsg)
{
    if (sqlite3_libversion_number() < 3031000) {
        /* SQLITE_INNOCUOUS and SQLITE_DIRECTONLY arrived in 3.31. */
        if (errmsg) {
            *errmsg = sqlite3_mprintf("fence: SQLite 3.31 or newer is required; this is %s",
                                      sqlite3_libversion());
        }
        return fs_fail(db, FENCE_EDB, "SQLite 3.31 or newer is required; this is %s",
                       sqlite3_libversion());
    }
    fs_state *s = fence_sqlite__state_acquire(db);
    if (s == NULL) {
        if (errmsg) {
            *errmsg = sqlite3_mprintf("fence: out of memory");
        }
        return fs_fail(db, FENCE_ENOMEM, "out of memory");
    }
    int rc = FENCE_OK;
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        fence_sqlite__state_ref(s); /* dropped by SQLite, also when the call fails */
        if (sqlite3_create_function_v2(db, fns[i].name, fns[i].nargs, fns[i].flags, s,
                                       fns[i].fn, NULL, NULL,
                                       fence_sqlite__state_unref) != SQLITE_OK) {
            rc = fs_fail(db, FENCE_EDB, "registering %s(): %s", fns[i].name,
                         sqlite3_errmsg(db));
            if (errmsg) {
                *errmsg = sqlite3_mprintf("fence: %s", fence_sqlite_errmsg(db));
            }
            break;
        }
    }
    if (rc == FENCE_OK) {
        fence_sqlite__hooks_install(db);
    }
    fence_sqlite__state_unref(s); /* the reference state_acquire gave us */
    return rc;
}
