/* pconn.c -- the PostgreSQL issuer's URL, connections and round trips
 * (pgissuer.h).  Every wait is a poll() on the connection's socket against
 * the call's deadline: libpq's non-blocking connect and its pipeline mode,
 * never a blocking libpq call. */
#include "pgissuer.h"

#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

fence_status fence__pq_fail(const fence__issuer *is, fence_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fence__err_vset(is->env.errslot(), is->env.errkey, (int)st, fmt, ap);
    va_end(ap);
    return st;
}

/* ---- the URL ------------------------------------------------------------------ */

/* Whether the userinfo of url (before the last '@' of the authority) holds
 * a password: libpq's messages about such a URL are not shown. */
static int has_password(const char *url)
{
    const char *p = strstr(url, "://");
    if (p == NULL) {
        return 0;
    }
    p += 3;
    size_t end = strcspn(p, "/?");
    const char *at = NULL;
    for (size_t i = 0; i < end; i++) {
        if (p[i] == '@') {
            at = p + i;
        }
    }
    return at != NULL && memchr(p, ':', (size_t)(at - p)) != NULL;
}

/* fence's own parameters out of the query of url: fence_wait=notify|poll.
 * The rest goes to libpq as it is. */
static fence_status strip_params(fence__issuer *is, const char *url)
{
    size_t len = strlen(url);
    is->url = malloc(len + 1);
    if (is->url == NULL) {
        return fence__pq_fail(is, FENCE_ENOMEM, "out of memory");
    }
    const char *q = strchr(url, '?');
    size_t base = q != NULL ? (size_t)(q - url) : len;
    memcpy(is->url, url, base);
    size_t o = base;
    int first = 1;
    for (const char *p = q != NULL ? q + 1 : NULL; p != NULL && *p != '\0';) {
        const char *amp = strchr(p, '&');
        size_t n = amp != NULL ? (size_t)(amp - p) : strlen(p);
        if (n >= 6 && strncmp(p, "fence_", 6) == 0) {
            if (n == 17 && strncmp(p, "fence_wait=notify", 17) == 0) {
                is->wait_mode = FENCE__PG_WAIT_NOTIFY;
            } else if (n == 15 && strncmp(p, "fence_wait=poll", 15) == 0) {
                is->wait_mode = FENCE__PG_WAIT_POLL;
            } else {
                return fence__pq_fail(is, FENCE_EINVAL, "unknown fence parameter '%.*s' in the "
                                      "PostgreSQL URL: fence_wait=notify (LISTEN/NOTIFY, a "
                                      "direct connection) or fence_wait=poll (through a "
                                      "pooler) is the only one", (int)(n > 40 ? 40 : n), p);
            }
        } else if (n > 0) {
            is->url[o++] = first ? '?' : '&';
            memcpy(is->url + o, p, n);
            o += n;
            first = 0;
        }
        p = amp != NULL ? amp + 1 : NULL;
    }
    is->url[o] = '\0';
    return FENCE_OK;
}

fence_status fence__pq_url(fence__issuer *is, const char *url)
{
    if (url == NULL || (strncmp(url, "postgresql://", 13) != 0 && strncmp(url, "postgres://", 11) != 0)) {
        return fence__pq_fail(is, FENCE_EINVAL, "a PostgreSQL URL starts with postgresql:// or "
                              "postgres://");
    }
    if (strlen(url) > 4096) {
        return fence__pq_fail(is, FENCE_EINVAL, "PostgreSQL URL longer than 4096 bytes");
    }
    fence_status st = strip_params(is, url);
    if (st != FENCE_OK) {
        return st;
    }
    char *err = NULL;
    PQconninfoOption *opts = PQconninfoParse(is->url, &err);
    if (opts == NULL) {
        if (err == NULL) {
            return fence__pq_fail(is, FENCE_ENOMEM, "out of memory");
        }
        size_t n = strcspn(err, "\n");
        st = has_password(url)
                 ? fence__pq_fail(is, FENCE_EINVAL, "invalid PostgreSQL URL (libpq's message is "
                                  "not shown: the URL holds a password)")
                 : fence__pq_fail(is, FENCE_EINVAL, "invalid PostgreSQL URL: %.*s",
                                  (int)(n > 300 ? 300 : n), err);
        PQfreemem(err);
        return st;
    }
    const char *user = NULL, *host = NULL, *port = NULL, *db = NULL;
    for (PQconninfoOption *p = opts; p->keyword != NULL; p++) {
        if (p->val == NULL || p->val[0] == '\0') {
            continue;
        }
        if (strcmp(p->keyword, "user") == 0) {
            user = p->val;
        } else if (strcmp(p->keyword, "host") == 0) {
            host = p->val;
        } else if (strcmp(p->keyword, "hostaddr") == 0 && host == NULL) {
            host = p->val;
        } else if (strcmp(p->keyword, "port") == 0) {
            port = p->val;
        } else if (strcmp(p->keyword, "dbname") == 0) {
            db = p->val;
        }
    }
    if (is->user != NULL) {
        user = is->user;
    }
    snprintf(is->display, sizeof is->display, "postgresql://%.64s%s%.200s%s%.40s/%.64s",
             user != NULL ? user : "", user != NULL ? "@" : "", host != NULL ? host : "",
             port != NULL ? ":" : "", port != NULL ? port : "", db != NULL ? db : "");
    PQconninfoFree(opts);
    return FENCE_OK;
}

int64_t fence__pq_deadline(const fence__issuer *is, int64_t deadline_us)
{
    int64_t own = fence__now_us() + (is->connect_timeout_ms + is->io_timeout_ms) * 1000;
    return own < deadline_us ? own : deadline_us;
}

/* ---- connections ---------------------------------------------------------------- */

/* A library does not print: the server's notices and warnings are dropped
 * (libpq's default prints them on stderr). */
static void no_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

/* libpq's message, its first line, without the trailing newline. */
static int first_line(const char *m)
{
    size_t n = strcspn(m != NULL ? m : "", "\n");
    return (int)(n > 400 ? 400 : n);
}

static fence_status connect_failed(fence__issuer *is, PGconn *c, const char *why)
{
    const char *m = c != NULL ? PQerrorMessage(c) : "";
    /* The server's and libpq's texts name users and hosts, never a
     * password. */
    int auth = strstr(m, "authentication") != NULL || strstr(m, "password") != NULL ||
               strstr(m, "no pg_hba.conf entry") != NULL ||
               (strstr(m, "role \"") != NULL && strstr(m, "does not exist") != NULL);
    atomic_store(&is->down, 1);
    if (why != NULL) {
        return fence__pq_fail(is, FENCE_ECONN, "%s: %s", is->display, why);
    }
    return fence__pq_fail(is, auth ? FENCE_EAUTH : FENCE_ECONN, "%s: %s: %.*s", is->display,
                          auth ? "authentication refused" : "connection failed", first_line(m),
                          m);
}

PGconn *fence__pq_connect(fence__issuer *is, int64_t deadline_us, fence_status *st)
{
    int64_t own = fence__now_us() + is->connect_timeout_ms * 1000;
    int64_t deadline = own < deadline_us ? own : deadline_us;
    const char *kw[5], *val[5];
    int k = 0;
    kw[k] = "dbname", val[k++] = is->url;
    kw[k] = "fallback_application_name", val[k++] = "fence";
    if (is->user != NULL) {
        kw[k] = "user", val[k++] = is->user;
    }
    if (is->password != NULL) {
        kw[k] = "password", val[k++] = is->password;
    }
    kw[k] = NULL, val[k] = NULL;
    PGconn *c = PQconnectStartParams(kw, val, 1);
    if (c == NULL) {
        *st = fence__pq_fail(is, FENCE_ENOMEM, "out of memory (a PostgreSQL connection)");
        return NULL;
    }
    PQsetNoticeProcessor(c, no_notice, NULL);
    PostgresPollingStatusType ps = PQstatus(c) == CONNECTION_BAD ? PGRES_POLLING_FAILED
                                                                 : PGRES_POLLING_WRITING;
    while (ps != PGRES_POLLING_OK && ps != PGRES_POLLING_FAILED) {
        int w = fence__wait_fd(PQsocket(c), ps == PGRES_POLLING_READING ? POLLIN : POLLOUT,
                               deadline);
        if (w <= 0) {
            char why[96];
            snprintf(why, sizeof why, "%s", w == 0 ? "no connection within the connect timeout"
                                                   : "poll() failed while connecting");
            *st = connect_failed(is, c, why);
            PQfinish(c);
            return NULL;
        }
        ps = PQconnectPoll(c);
    }
    if (ps == PGRES_POLLING_FAILED || PQsetnonblocking(c, 1) != 0 || PQenterPipelineMode(c) != 1) {
        *st = connect_failed(is, c, NULL);
        PQfinish(c);
        return NULL;
    }
    *st = FENCE_OK;
    return c;
}

static PGconn *take_idle(fence__issuer *is)
{
    pthread_mutex_lock(&is->lock);
    PGconn *c = is->nidle > 0 ? is->idle[--is->nidle] : NULL;
    pthread_mutex_unlock(&is->lock);
    return c;
}

static void give_back(fence__issuer *is, PGconn *c)
{
    if (PQstatus(c) == CONNECTION_OK && PQtransactionStatus(c) == PQTRANS_IDLE) {
        pthread_mutex_lock(&is->lock);
        if (is->nidle < FENCE__PG_IDLE_MAX) {
            is->idle[is->nidle++] = c;
            c = NULL;
        }
        pthread_mutex_unlock(&is->lock);
    }
    if (c != NULL) {
        PQfinish(c);
    }
}

void fence__pq_idle_close(fence__issuer *is)
{
    while (is->nidle > 0) {
        PQfinish(is->idle[--is->nidle]);
    }
}

/* ---- round trips ------------------------------------------------------------------ */

/* Send what libpq has buffered: 0, or -1 the connection failed, -2 the
 * deadline passed. */
static int flush(PGconn *c, int64_t deadline)
{
    int f;
    while ((f = PQflush(c)) == 1) {
        int w = fence__wait_fd(PQsocket(c), POLLOUT | POLLIN, deadline);
        if (w <= 0) {
            return w == 0 ? -2 : -1;
        }
        if (!PQconsumeInput(c)) {
            return -1;
        }
    }
    return f == 0 ? 0 : -1;
}

/* The next result: *out (NULL between statements), 0; -1 failed; -2 the
 * deadline passed. */
static int next_result(PGconn *c, int64_t deadline, PGresult **out)
{
    while (PQisBusy(c)) {
        int w = fence__wait_fd(PQsocket(c), POLLIN, deadline);
        if (w <= 0) {
            return w == 0 ? -2 : -1;
        }
        if (!PQconsumeInput(c)) {
            return -1;
        }
    }
    *out = PQgetResult(c);
    return 0;
}

/* A statement's error as a status, with its message. */
static fence_status stmt_failed(fence__issuer *is, const char *what, const PGresult *r)
{
    const char *code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    const char *msg = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
    code = code != NULL ? code : "";
    msg = msg != NULL ? msg : PQresultErrorMessage(r);
    if (strcmp(code, "42883") == 0 || strcmp(code, "3F000") == 0 || strcmp(code, "42P01") == 0) {
        return fence__pq_fail(is, FENCE_ECONFIG, "%s: %s: fence.sql version 7 or later (its lease "
                              "functions) is not installed in this database: install it "
                              "(psql -f fence.sql, fence_pg_install(); docs/postgres.md) "
                              "[SQLSTATE %s: %.200s]", is->display, what, code, msg);
    }
    fence_status st = FENCE_EDB;
    if (strncmp(code, "22", 2) == 0) {
        st = FENCE_EINVAL;
    } else if (strcmp(code, "42501") == 0 || strncmp(code, "28", 2) == 0) {
        st = FENCE_EAUTH;
    } else if (strncmp(code, "08", 2) == 0 || strncmp(code, "57", 2) == 0 ||
               strcmp(code, "25006") == 0 || strcmp(code, "40001") == 0 ||
               strcmp(code, "40P01") == 0 || strcmp(code, "55P03") == 0) {
        /* Gone, shutting down, a standby (read-only), or a transaction the
         * server gave up: nothing was done; the answer is "not now". */
        st = FENCE_ECONN;
    }
    return fence__pq_fail(is, st, "%s: %s refused: SQLSTATE %s: %.400s%s", is->display, what,
                          code, msg, strcmp(code, "25006") == 0 ? " (a standby: no token is "
                                                                 "issued there)" : "");
}

/* Send s[0..n), each followed by a sync, and read their results into res.
 * 0: every statement answered (each res[i] or its failure in *st); -1 the
 * connection failed or the server ended it, -2 the deadline passed (res as
 * far as read). */
static int round_trip(fence__issuer *is, PGconn *c, const char *what, const fence__pq_stmt *s,
                      size_t n, int64_t deadline, PGresult **res, fence_status *st,
                      int64_t *sent_us)
{
    for (size_t i = 0; i < n; i++) {
        if (!PQsendQueryParams(c, s[i].sql, s[i].n, NULL, s[i].values, NULL, NULL, 0) ||
            !PQpipelineSync(c)) {
            return -1;
        }
    }
    if (sent_us != NULL) {
        *sent_us = fence__now_us();
    }
    int f = flush(c, deadline);
    if (f != 0) {
        return f;
    }
    size_t syncs = 0, i = 0;
    int got = 0;
    while (syncs < n) {
        PGresult *r = NULL;
        int rc = next_result(c, deadline, &r);
        if (rc != 0) {
            return rc;
        }
        if (r == NULL) {
            continue; /* the end of statement i's results */
        }
        ExecStatusType t = PQresultStatus(r);
        if (t == PGRES_PIPELINE_SYNC) {
            if (!got) {
                *st = fence__pq_fail(is, FENCE_EPROTO, "%s: %s: no result", is->display, what);
            }
            syncs++;
            i++;
            got = 0;
        } else if (t == PGRES_TUPLES_OK && i < n && res[i] == NULL) {
            res[i] = r;
            r = NULL;
            got = 1;
        } else if (t == PGRES_FATAL_ERROR || t == PGRES_PIPELINE_ABORTED) {
            *st = t == PGRES_FATAL_ERROR ? stmt_failed(is, what, r)
                                         : fence__pq_fail(is, FENCE_EDB, "%s: %s aborted",
                                                          is->display, what);
            got = 1;
            const char *code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
            if (code != NULL && (strncmp(code, "57", 2) == 0 || strncmp(code, "08", 2) == 0)) {
                /* The server ended this connection (a shutdown, a
                 * restart, pg_terminate_backend: often said before we
                 * asked, read as the answer to our statement): it is done,
                 * as if the socket had closed. */
                PQclear(r);
                return -1;
            }
        } else if (t != PGRES_TUPLES_OK && t != PGRES_COMMAND_OK) {
            *st = fence__pq_fail(is, FENCE_EPROTO, "%s: %s: unexpected result (%s)", is->display,
                                 what, PQresStatus(t));
            got = 1;
        }
        PQclear(r);
    }
    return 0;
}

fence_status fence__pq_run(fence__issuer *is, const char *what, const fence__pq_stmt *s,
                           size_t n, int64_t deadline_us, PGresult **res, int *twice,
                           int64_t *sent_us)
{
    int64_t deadline = fence__pq_deadline(is, deadline_us);
    for (size_t i = 0; i < n; i++) {
        res[i] = NULL;
    }
    if (twice != NULL) {
        *twice = 0;
    }
    fence_status st = FENCE_OK;
    for (int attempt = 0; attempt < 2; attempt++) {
        PGconn *c = take_idle(is);
        int pooled = c != NULL;
        if (c == NULL) {
            c = fence__pq_connect(is, deadline, &st);
            if (c == NULL) {
                return st;
            }
            if (atomic_exchange(&is->broken, 0)) {
                atomic_fetch_add(&is->reconnects, 1); /* one that failed, replaced */
            }
        }
        int64_t io = fence__now_us() + is->io_timeout_ms * 1000;
        st = FENCE_OK;
        int rc = round_trip(is, c, what, s, n, io < deadline ? io : deadline, res, &st, sent_us);
        if (rc == 0) {
            atomic_store(&is->down, 0);
            give_back(is, c);
            return st;
        }
        int answered = 0;
        for (size_t i = 0; i < n; i++) {
            answered |= res[i] != NULL;
        }
        char m[512];
        snprintf(m, sizeof m, "%.*s", first_line(PQerrorMessage(c)), PQerrorMessage(c));
        PQfinish(c);
        atomic_store(&is->broken, 1);
        if (rc == -2) {
            atomic_store(&is->down, 1);
            return fence__pq_fail(is, FENCE_ECONN, "%s: %s: no answer within the I/O timeout "
                                  "(%lld ms) or the call's deadline", is->display, what,
                                  (long long)is->io_timeout_ms);
        }
        if (!pooled || answered || fence__now_us() >= deadline) {
            atomic_store(&is->down, 1);
            return fence__pq_fail(is, FENCE_ECONN, "%s: %s: connection failed: %s", is->display,
                                  what, m[0] != '\0' ? m : "closed by the server");
        }
        /* An idle connection the server closed meanwhile (a restart):
         * once more on a new one. */
        if (twice != NULL) {
            *twice = 1;
        }
        for (size_t i = 0; i < n; i++) {
            PQclear(res[i]);
            res[i] = NULL;
        }
    }
    return st;
}
