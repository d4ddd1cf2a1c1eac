/* pg_internal.h -- private to libfence_pg. */
#ifndef FENCE_PG_INTERNAL_H
#define FENCE_PG_INTERNAL_H
#include <stddef.h>

#include "fence_pg.h"

/* sql/postgres/fence.sql, embedded at build time by scripts/embed. */
extern const char fence_pg__sql_fence[];
extern const size_t fence_pg__sql_fence_len;

/* Reset every field of err (when not NULL) and set status.  Returns status. */
int fence_pg__reset(fence_pg_error *err, int status);

/* Fill err (when not NULL): reset every field, set status and a printf-style
 * message.  Returns status. */
int fence_pg__fail(fence_pg_error *err, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
