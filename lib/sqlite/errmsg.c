/* errmsg.c -- the message of a failed call, per thread and per connection
 * (fence_sqlite_errmsg), and the name check that produces most of them.
 * The lowest file of the library: it calls nothing else of it. */
#include "sqlite_internal.h"

#include <stdarg.h>

/* This library's slot (common.h): the calling thread's last failure and
 * the connection it was about. */
static _Thread_local fence__errslot tl_err;

int fence_sqlite__fail(const sqlite3 *db, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fence__err_vset(&tl_err, db, status, fmt, ap);
    va_end(ap);
    return status;
}

int fence_sqlite__fail_db(sqlite3 *db, const char *what)
{
    return fs_fail(db, FENCE_EDB, "%s: %s", what, sqlite3_errmsg(db));
}

fence_status fence_sqlite__ok(const sqlite3 *db)
{
    fence__err_clear(&tl_err, db);
    return FENCE_OK;
}

int fence_sqlite__check_name(const sqlite3 *db, const char *what, const char *name)
{
    const char *why = fence__name_problem(name, FENCE__NAME_ANY_BYTE, NULL);
    if (why != NULL) {
        return fs_fail(db, FENCE_EINVAL, "%s: name %s", what, why);
    }
    return FENCE_OK;
}

const char *fence_sqlite_errmsg(const sqlite3 *db)
{
    return fence__err_get(&tl_err, db);
}
