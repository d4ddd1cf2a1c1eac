/* pgissuer.h -- the PostgreSQL issuer: issuer.h's operations as calls of
 * fence.sql's lease functions (sql/postgres/75-leases.sql) over libpq.  Not
 * installed.
 *
 * One statement per operation and no session state (no prepared statement,
 * no SET, no advisory lock), so it works through pgbouncer in transaction
 * mode.  Its files, from the bottom:
 *
 *   pconn.c    the URL (libpq's URI form, plus fence_wait=notify|poll, which
 *              is fence's and never reaches libpq), its display without
 *              credentials, connections (a pool: each call takes an idle one
 *              or makes one, so no caller waits behind another's I/O and the
 *              heartbeat is never queued behind callers), running statements
 *              in one round trip (libpq's pipeline mode) within a deadline,
 *              the server's errors as fence_status
 *   pwait.c    waiting for a release: LISTEN fence_lease_released on a
 *              connection of its own (fence_wait=notify, the default); none
 *              with fence_wait=poll (the core polls)
 *   pissuer.c  the options and the ops table (fence__pg_issuer)
 */
#ifndef FENCE_PGISSUER_H
#define FENCE_PGISSUER_H

#include "issuer.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>

#define FENCE__PG_IDLE_MAX 8 /* idle connections kept */

enum { FENCE__PG_WAIT_NOTIFY = 0, FENCE__PG_WAIT_POLL = 1 };

struct fence__issuer {
    fence__iss_env env;
    char *url;          /* for libpq: the URL without fence's parameters (may hold a password) */
    char *user;         /* fence_client_options.username, or NULL */
    char *password;     /* fence_client_options.password, or NULL */
    char display[400];  /* postgresql://[user@]host[:port]/dbname: no password */
    int wait_mode;      /* FENCE__PG_WAIT_* */
    int64_t connect_timeout_ms, io_timeout_ms;
    pthread_mutex_t lock; /* the idle pool */
    PGconn *idle[FENCE__PG_IDLE_MAX];
    int nidle;
    atomic_int broken;   /* a connection failed: the next one made is a reconnect */
    atomic_ulong reconnects;
    atomic_int down;     /* the last call found no server */
};

/* ==== pconn.c ============================================================== */
/* A message into the core's slot; returns st. */
fence_status fence__pq_fail(const fence__issuer *is, fence_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Parse url into is (url, display, wait_mode).  FENCE_EINVAL / FENCE_ENOMEM
 * with the message written. */
fence_status fence__pq_url(fence__issuer *is, const char *url);
/* A new connection in pipeline mode, non-blocking, before deadline_us (and
 * connect_timeout_ms from now), or NULL with *st and the message set. */
PGconn *fence__pq_connect(fence__issuer *is, int64_t deadline_us, fence_status *st);
void fence__pq_idle_close(fence__issuer *is);

/* One statement of a round trip: sql with n text parameters (NULL: SQL NULL). */
typedef struct fence__pq_stmt {
    const char *sql;
    int n;
    const char *const *values;
} fence__pq_stmt;

/* Run s[0..n) in one round trip (each its own transaction), on an idle
 * connection or a new one; each call held to deadline_us, to
 * connect_timeout_ms for a connection it makes and then io_timeout_ms.
 * res[i]: the result of statement i (PQclear it), NULL when it failed.  A
 * pooled connection found dead before any answer is replaced once; then
 * *twice (optional) says the statements may have reached the server twice.
 * *sent_us (optional): when they went out.  FENCE_OK when all succeeded,
 * else the last failure (code and message; "what" names the operation). */
fence_status fence__pq_run(fence__issuer *is, const char *what, const fence__pq_stmt *s,
                           size_t n, int64_t deadline_us, PGresult **res, int *twice,
                           int64_t *sent_us);
/* The deadline of one call that starts now (issuer.h, "Deadlines"). */
int64_t fence__pq_deadline(const fence__issuer *is, int64_t deadline_us);

/* ==== pwait.c ============================================================== */
fence__waiter *fence__pq_wait_open(fence__issuer *is, const char *name, int64_t deadline_us);
int fence__pq_wait(fence__waiter *w, int64_t deadline_us);
void fence__pq_wait_close(fence__waiter *w);

#endif
