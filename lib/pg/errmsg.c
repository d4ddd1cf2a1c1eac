/* errmsg.c -- libfence_pg's slot in lib/common's error-message scheme: the
 * per-thread error slot behind fence_pg_errmsg() and
 * fence_pg_sqlstate(): the common scheme (common.h: per thread, keyed by
 * the PGconn) plus the SQLSTATE of the same failure, kept next to it so the
 * two can never describe different failures. */
#include "pg_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct pg_errslot {
    fence__errslot err; /* handle + message */
    char sqlstate[6];   /* of the same failure, or "" */
} pg_errslot;

static _Thread_local pg_errslot tl_err;

static void set_state(const char *sqlstate)
{
    size_t i = 0;
    if (sqlstate != NULL) {
        for (; i + 1 < sizeof tl_err.sqlstate && sqlstate[i] != '\0'; i++) {
            tl_err.sqlstate[i] = sqlstate[i];
        }
    }
    tl_err.sqlstate[i] = '\0';
}

fence_status fence_pg__fail(const PGconn *conn, fence_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fence__err_vset(&tl_err.err, conn, status, fmt, ap);
    va_end(ap);
    set_state(NULL);
    return status;
}

fence_status fence_pg__fail_db(const PGconn *conn, fence_status status, const char *sqlstate,
                               const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fence__err_vset(&tl_err.err, conn, status, fmt, ap);
    va_end(ap);
    set_state(sqlstate);
    return status;
}

void fence_pg__prefix(const PGconn *conn, const char *prefix)
{
    if (tl_err.err.handle != conn || tl_err.err.msg[0] == '\0') {
        return;
    }
    char *msg = tl_err.err.msg;
    size_t cap = sizeof tl_err.err.msg;
    size_t pre = strlen(prefix) + 2; /* "prefix: " */
    if (pre >= cap) {
        return;
    }
    size_t len = strnlen(msg, cap - 1);
    if (len + pre >= cap) {
        len = cap - 1 - pre;
    }
    memmove(msg + pre, msg, len);
    memcpy(msg, prefix, pre - 2);
    msg[pre - 2] = ':';
    msg[pre - 1] = ' ';
    msg[pre + len] = '\0';
}

fence_status fence_pg__ok(const PGconn *conn)
{
    if (tl_err.err.handle == conn) {
        fence__err_clear(&tl_err.err, conn);
        tl_err.sqlstate[0] = '\0';
    }
    return FENCE_OK;
}

const char *fence_pg_errmsg(const PGconn *conn)
{
    return fence__err_get(&tl_err.err, conn);
}

const char *fence_pg_sqlstate(const PGconn *conn)
{
    return tl_err.err.handle == conn ? tl_err.sqlstate : "";
}
