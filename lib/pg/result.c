/* result.c -- map a PGresult to a fence status: 23Q01 -> FENCE_STALE (with
 * both tokens and the object, parsed from the error's DETAIL), 23Q02 ->
 * FENCE_ENOTOKEN, any other error -> FENCE_EDB. */
#include "pg_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int fence_pg__reset(fence_pg_error *err, int status)
{
    if (err != NULL) {
        memset(err, 0, sizeof *err);
        err->status = status;
    }
    return status;
}

int fence_pg__fail(fence_pg_error *err, int status, const char *fmt, ...)
{
    if (err == NULL) {
        return status;
    }
    fence_pg__reset(err, status);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return status;
}

/* Copy src into a buffer of size n, NUL-terminated, turning line breaks
 * into spaces and dropping trailing ones. */
static void copy_line(char *dst, size_t n, const char *src)
{
    size_t i = 0;
    if (src != NULL) {
        for (; src[i] != '\0' && i + 1 < n; i++) {
            dst[i] = (src[i] == '\n' || src[i] == '\r') ? ' ' : src[i];
        }
    }
    while (i > 0 && dst[i - 1] == ' ') {
        i--;
    }
    dst[i] = '\0';
}

/* Parse "<digits>" at *p into *out (1..INT64_MAX-range digits, no sign),
 * advancing *p.  0 on success, -1 otherwise. */
static int parse_u64(const char **p, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    if (*s < '0' || *s > '9') {
        return -1;
    }
    for (; *s >= '0' && *s <= '9'; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) {
            return -1;
        }
        v = v * 10 + d;
    }
    *out = v;
    *p = s;
    return 0;
}

static int expect(const char **p, const char *word)
{
    size_t n = strlen(word);
    if (strncmp(*p, word, n) != 0) {
        return -1;
    }
    *p += n;
    return 0;
}

/* "offered=33 highest=34 kind=table object=public.orders" (fence.sql). */
static int parse_stale_detail(const char *d, fence_pg_error *err)
{
    uint64_t offered, highest;
    int is_resource;
    if (d == NULL || expect(&d, "offered=") != 0 || parse_u64(&d, &offered) != 0 ||
        expect(&d, " highest=") != 0 || parse_u64(&d, &highest) != 0 ||
        expect(&d, " kind=") != 0) {
        return -1;
    }
    if (expect(&d, "table") == 0) {
        is_resource = 0;
    } else if (expect(&d, "resource") == 0) {
        is_resource = 1;
    } else {
        return -1;
    }
    if (expect(&d, " object=") != 0) {
        return -1;
    }
    err->offered = offered;
    err->highest = highest;
    err->is_resource = is_resource;
    snprintf(err->object, sizeof err->object, "%s", d);
    return 0;
}

int fence_pg_result(const PGresult *res, fence_pg_error *err)
{
    if (res == NULL) {
        return fence_pg__fail(err, FENCE_EINVAL,
                              "fence_pg_result: result is NULL (libpq returns NULL when out of "
                              "memory or when the query could not be sent: see PQerrorMessage)");
    }
    switch (PQresultStatus(res)) {
    case PGRES_EMPTY_QUERY:
    case PGRES_COMMAND_OK:
    case PGRES_TUPLES_OK:
    case PGRES_COPY_OUT:
    case PGRES_COPY_IN:
    case PGRES_COPY_BOTH:
    case PGRES_SINGLE_TUPLE:
    case PGRES_PIPELINE_SYNC:
        return fence_pg__reset(err, FENCE_OK);
    case PGRES_PIPELINE_ABORTED:
        return fence_pg__fail(err, FENCE_EDB,
                              "not executed: an earlier query in the pipeline failed");
    case PGRES_BAD_RESPONSE:
    case PGRES_NONFATAL_ERROR:
    case PGRES_FATAL_ERROR:
    default:
        break;
    }

    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    int status = FENCE_EDB;
    if (state != NULL && strcmp(state, "23Q01") == 0) {
        status = FENCE_STALE;
    } else if (state != NULL && strcmp(state, "23Q02") == 0) {
        status = FENCE_ENOTOKEN;
    }
    fence_pg__reset(err, status);
    if (err == NULL) {
        return status;
    }
    if (state != NULL) {
        snprintf(err->sqlstate, sizeof err->sqlstate, "%s", state);
    }
    copy_line(err->message, sizeof err->message,
              primary != NULL ? primary : PQresultErrorMessage(res));
    if (err->message[0] == '\0') {
        snprintf(err->message, sizeof err->message, "database error (%s)",
                 PQresStatus(PQresultStatus(res)));
    }
    if (status == FENCE_STALE &&
        parse_stale_detail(PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL), err) != 0) {
        /* Raised by something other than fence.sql: keep what we know. */
        const char *table = PQresultErrorField(res, PG_DIAG_TABLE_NAME);
        err->offered = err->highest = 0;
        err->is_resource = 0;
        snprintf(err->object, sizeof err->object, "%s", table != NULL ? table : "");
    }
    return status;
}
