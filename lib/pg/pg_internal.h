/* pg_internal.h -- private to libfence_pg.
 *
 * Files, lowest first (a file calls only those above it):
 *   errmsg.c  the per-thread error slot (message + SQLSTATE)
 *   result.c  fence_pg_classify and the DETAIL parser
 *   pg.c      the calls that talk to the server */
#ifndef FENCE_PG_INTERNAL_H
#define FENCE_PG_INTERNAL_H
#include <stddef.h>

#include "common.h"
#include "fence_pg.h"

/* fence.sql (sql/postgres/), embedded at build time by scripts/embed. */
extern const char fence_pg__sql_fence[];
extern const size_t fence_pg__sql_fence_len;

/* ---- errmsg.c -------------------------------------------------------- */
/* Record a failure about conn (printf-style message, no SQLSTATE).
 * Returns status. */
fence_status fence_pg__fail(const PGconn *conn, fence_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same with the server's SQLSTATE (NULL: none). */
fence_status fence_pg__fail_db(const PGconn *conn, fence_status status, const char *sqlstate,
                               const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Put "prefix: " in front of the message about conn, if there is one. */
void fence_pg__prefix(const PGconn *conn, const char *prefix);
/* A call on conn succeeded: clear its message.  Returns FENCE_OK. */
fence_status fence_pg__ok(const PGconn *conn);

/* ---- result.c -------------------------------------------------------- */
/* Parse the DETAIL fence.sql gives a stale rejection (SQLSTATE 23Q01):
 *     offered=33 highest=34 kind=table object=public.orders reason=older
 *     offered=34 highest=34 kind=resource object=jobs/42 reason=repeat holder=<32 hex>
 * Both numbers in the one token grammar (common.h) up to FENCE_TOKEN_MAX.
 * The tail " reason=older|repeat" (then optionally " holder=" and 32
 * lowercase hex digits) fills reason and holder and is cut off the end;
 * object is what lies between " object=" and it (truncated to fit).
 * Without that tail (fence.sql version 2) object is the rest of the text,
 * reason OLDER, holder "".  out (optional) is zeroed, then filled on
 * success.  0 parsed, -1 not; detail may be NULL or any NUL-terminated
 * text. */
int fence_pg__parse_stale(const char *detail, fence_stale *out);

#endif
