/* result.c -- map a PGresult to a fence status: 23Q01 -> FENCE_STALE (with
 * both tokens, the object, the reason and the recorded holder, parsed from
 * the error's DETAIL), 23Q02 -> FENCE_ENOTOKEN, any other error ->
 * FENCE_EDB; from a PGresult (fence_pg_classify) or from the error's
 * fields (fence_pg_classify_error).  Calls only errmsg.c. */
#include "pg_internal.h"

#include <string.h>

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

/* Skip the literal word at *p (0), or leave *p alone (-1).  Never reads
 * past the NUL of *p. */
static int expect(const char **p, const char *word)
{
    size_t n = strlen(word);
    if (strncmp(*p, word, n) != 0) {
        return -1;
    }
    *p += n;
    return 0;
}

/* A number in the one grammar (common.h) at *p, advancing *p. */
static int scan_u64(const char **p, uint64_t *out)
{
    const char *end = NULL;
    if (fence__u64_scan(*p, FENCE_TOKEN_MAX, out, &end) != 0) {
        return -1;
    }
    *p = end;
    return 0;
}

/* Does text[0..len) end with suffix?  Then len less the suffix into
 * *cut. */
static int ends_with(const char *text, size_t len, const char *suffix, size_t *cut)
{
    size_t n = strlen(suffix);
    if (len < n || memcmp(text + len - n, suffix, n) != 0) {
        return 0;
    }
    *cut = len - n;
    return 1;
}

/* The tail fence.sql version 3 puts after the object:
 *     " reason=older" | " reason=repeat", then optionally " holder=<32 hex>"
 * Strip it from text[0..*len) (shortening *len), filling reason and holder;
 * without a reason (version 2's DETAIL) leave everything alone. */
static void parse_tail(const char *text, size_t *len, fence_stale *s)
{
    static const char hkey[] = " holder=";
    size_t end = *len;
    size_t hlen = sizeof hkey - 1 + FENCE_HOLDER_LEN;
    const char *holder = NULL;
    if (end >= hlen && memcmp(text + end - hlen, hkey, sizeof hkey - 1) == 0) {
        const char *h = text + end - FENCE_HOLDER_LEN;
        size_t i = 0;
        while (i < FENCE_HOLDER_LEN &&
               ((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f'))) {
            i++;
        }
        if (i == FENCE_HOLDER_LEN) {
            holder = h;
            end -= hlen;
        }
    }
    size_t cut = 0;
    if (ends_with(text, end, " reason=older", &cut)) {
        s->reason = FENCE_STALE_OLDER;
    } else if (ends_with(text, end, " reason=repeat", &cut)) {
        s->reason = FENCE_STALE_REPEAT;
    } else {
        return; /* no reason: the object is all of it */
    }
    if (holder != NULL) {
        memcpy(s->holder, holder, FENCE_HOLDER_LEN);
        s->holder[FENCE_HOLDER_LEN] = '\0';
    }
    *len = cut;
}

int fence_pg__parse_stale(const char *detail, fence_stale *out)
{
    fence_stale s;
    memset(&s, 0, sizeof s);
    if (out != NULL) {
        memset(out, 0, sizeof *out);
    }
    const char *d = detail;
    if (d == NULL || expect(&d, "offered=") != 0 || scan_u64(&d, &s.offered) != 0 ||
        expect(&d, " highest=") != 0 || scan_u64(&d, &s.highest) != 0 ||
        expect(&d, " kind=") != 0) {
        return -1;
    }
    if (expect(&d, "table") == 0) {
        s.kind = FENCE_OBJECT_TABLE;
    } else if (expect(&d, "resource") == 0) {
        s.kind = FENCE_OBJECT_RESOURCE;
    } else {
        return -1;
    }
    if (expect(&d, " object=") != 0) {
        return -1;
    }
    size_t len = strlen(d);
    parse_tail(d, &len, &s);
    size_t i = 0;
    for (; i < len && i + 1 < sizeof s.object; i++) {
        s.object[i] = d[i];
    }
    s.object[i] = '\0';
    if (out != NULL) {
        *out = s;
    }
    return 0;
}

/* What a server error is, by its fields (the rule fence_pg_classify and
 * fence_pg_classify_error share): 23Q01 FENCE_STALE, with *stale (when
 * not NULL) parsed from the DETAIL fence.sql writes or, raised by
 * something else, the table alone; 23Q02 FENCE_ENOTOKEN; any other
 * FENCE_EDB. */
static fence_status classify_fields(const char *state, const char *detail, const char *table,
                                    fence_stale *stale)
{
    fence_status status = FENCE_EDB;
    if (state != NULL && strcmp(state, "23Q01") == 0) {
        status = FENCE_STALE;
    } else if (state != NULL && strcmp(state, "23Q02") == 0) {
        status = FENCE_ENOTOKEN;
    }
    if (status == FENCE_STALE && stale != NULL && fence_pg__parse_stale(detail, stale) != 0 &&
        table != NULL) {
        stale->kind = FENCE_OBJECT_TABLE;
        copy_line(stale->object, sizeof stale->object, table);
    }
    return status;
}

/* res is an error (or an unexpected status): record it and say which. */
static fence_status classify_error(PGconn *conn, const PGresult *res, fence_stale *stale)
{
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    fence_status status = classify_fields(state, PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL),
                                          PQresultErrorField(res, PG_DIAG_TABLE_NAME), stale);
    char line[sizeof ((fence__errslot *)0)->msg];
    copy_line(line, sizeof line, primary != NULL ? primary : PQresultErrorMessage(res));
    if (line[0] == '\0') {
        fence_pg__fail_db(conn, status, state, "database error (%s)",
                          PQresStatus(PQresultStatus(res)));
    } else {
        fence_pg__fail_db(conn, status, state, "%s", line);
    }
    return status;
}

fence_status fence_pg_classify_error(const char *sqlstate, const char *detail, const char *table,
                                     fence_stale *stale)
{
    if (stale != NULL) {
        memset(stale, 0, sizeof *stale);
    }
    if (sqlstate == NULL) {
        return fence_pg__fail(NULL, FENCE_EINVAL, "fence_pg_classify_error: sqlstate is NULL");
    }
    return classify_fields(sqlstate, detail, table, stale);
}

fence_status fence_pg_classify(PGconn *conn, const PGresult *res, fence_stale *stale)
{
    if (stale != NULL) {
        memset(stale, 0, sizeof *stale);
    }
    if (res == NULL) {
        char why[256];
        copy_line(why, sizeof why, conn != NULL ? PQerrorMessage(conn) : NULL);
        return fence_pg__fail(conn, FENCE_EINVAL,
                              "fence_pg_classify: result is NULL (libpq returns NULL when out of "
                              "memory or when the query could not be sent)%s%s",
                              why[0] != '\0' ? ": " : "", why);
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
        return fence_pg__ok(conn);
    case PGRES_PIPELINE_ABORTED:
        return fence_pg__fail(conn, FENCE_EDB,
                              "not executed: an earlier query in the pipeline failed");
    case PGRES_BAD_RESPONSE:
    case PGRES_NONFATAL_ERROR:
    case PGRES_FATAL_ERROR:
    default:
        break;
    }
    return classify_error(conn, res, stale);
}
