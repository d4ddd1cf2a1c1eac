/* issuer.h -- the one interface between libfence's lease core (the C files
 * of lib/lease) and an issuer: the server that keeps the leases and issues
 * the tokens (Redis, lib/lease/redis/; PostgreSQL and etcd plug in the same
 * way).  Not installed.
 *
 * The core owns a lease's life (the state machine of state.c: held, renewed,
 * lost, released, reissued; validity; the heartbeat; waiting; callbacks; the
 * metrics).  An issuer only answers what the server says: whether a lease was
 * granted and with which token, whether renewals were accepted, whether a
 * release deleted it, what a name looks like now, when a release may have
 * happened.  It knows nothing of callbacks, validity or threads of the core,
 * and never calls a file of the core (scripts/check-layering); it writes its
 * messages into the slot the core gives it (fence__iss_env.errslot), keyed by
 * the client, so fence_client_errmsg() shows them.
 *
 * Deadlines.  Every operation takes deadline_us, an absolute CLOCK_MONOTONIC
 * time it must return by (INT64_MAX: the issuer's own budget for one call).
 * An issuer holds each call to one budget of its own as well: at most
 * connect_timeout_ms to get a usable connection (when it has to make one) and
 * then at most io_timeout_ms for everything it asks the server in that call
 * (docs/api.md, "Timeouts").  Nothing may wait past either.
 *
 * Threads.  Any number of threads may call the operations at once, except
 * renew on FENCE__CHAN_HEARTBEAT (one at a time: the core's heartbeat lock) and
 * the operations on one lease (the core serialises them: in_pass).
 *
 * Writing another issuer (PostgreSQL, etcd): a room of its own
 * (lib/lease/<name>/, added to PARTS and NEVER_CALLS in
 * scripts/check-layering), an ops table with every member below set, and its
 * row in issuers.c (its name, URL schemes and the fence_client_options bits
 * it takes: the core refuses every other option by name before open).  What
 * each operation must keep, whatever the server:
 *   - tokens: per name, strictly above every token it ever issued for the
 *     name, across restarts and failovers of the server, and above a raise;
 *     issued in the same atomic step that grants the lease (never a token
 *     without the lease, never a lease without a new token);
 *   - acquire: safe to repeat -- an acquire whose answer was lost and that is
 *     sent again with the same l->holder gets the lease and token it already
 *     has, nothing issued; another holder's lease is never touched;
 *   - renew and release: compare-and-act on the exact holder and token
 *     (l->value); a refusal says "not yours any more", an error says "no
 *     answer" (the core tells these apart: refused leases are lost at once,
 *     unanswered ones when their validity ends);
 *   - expiry by the server's own clock (a TTL, clock_timestamp(), a lease
 *     in etcd), never the client's: the core's validity (TTL less a margin,
 *     from when the request went out) must end before the server's;
 *   - waiting: a waiter opened before the attempt it follows, so no release
 *     slips between them; NULL when none can be made (the core polls);
 *   - messages: every failure with a code and a message written into the
 *     core's slot (env->errslot(), keyed by env->errkey), no secrets in them;
 *   - deadlines and threads as above; no callback, no sleep with a lock
 *     other callers need, no call into the core.
 * Tests: the new issuer's guarantees on its real server (restart, failover,
 * a paused holder or server), and the behaviour suites (tests/lease:
 * heartbeat, lost, wait, hand-off, metrics; tests/cli), which today reach
 * into Redis to break things, given the same cases on its server. */
#ifndef FENCE_ISSUER_H
#define FENCE_ISSUER_H

#include <stdio.h>

#include "common.h"
#include "fence.h"

typedef struct fence__issuer fence__issuer; /* an issuer's handle, opaque to the core */
typedef struct fence__waiter fence__waiter; /* a wait for a name's release */

/* What the core and an issuer share about one lease.  The core writes every
 * field before the first operation on it; value and token change only by a
 * reissue, which the core never runs while another operation on the lease is
 * in flight. */
typedef struct fence__ilease {
    const char *name;
    size_t namelen;
    int64_t ttl_ms;
    char holder[FENCE_HOLDER_LEN + 1];          /* the owner id: 32 hex */
    char value[FENCE_HOLDER_LEN + 1 + 21];      /* "<holder>:<token>", once granted */
    uint64_t token;                             /* 0 until granted */
    int has_info;                               /* acquired with a holder description */
    void *room;                                 /* lease_room() bytes of the issuer's */
} fence__ilease;

/* An acquire's or a reissue's answer (with FENCE_OK).  behind_us is also set
 * with FENCE_ECLOCK (the clock lag that refused it). */
typedef struct fence__grant {
    int granted;       /* 1: the lease is ours, with token; 0: another owner holds it */
    uint64_t token;
    int64_t behind_us; /* clock tokens: the server's clock was this far behind (0: not) */
    int64_t pttl_ms;   /* not granted: the holder's remaining TTL (-1 unknown) */
} fence__grant;

/* Which connection a renewal goes on. */
enum {
    FENCE__CHAN_CALLER = 0,    /* a caller's own call (fence_renew): the command path */
    FENCE__CHAN_HEARTBEAT = 1  /* the heartbeat's pass: its own connection, never queued
                                * behind callers; one pass at a time */
};

/* What the core gives an issuer at open. */
typedef struct fence__iss_env {
    const void *errkey;                /* the client: messages are keyed by it */
    fence__errslot *(*errslot)(void);  /* this thread's slot of libfence */
    int renew_batch;                   /* leases per renewal call (fence_client_options) */
} fence__iss_env;

/* Appends one key/value/note to a describe answer (fence_client_describe),
 * quietly dropping what does not fit: every issuer's describe uses it. */
static inline void fence__iss_field(fence_issuer_info *out, const char *key, const char *value,
                                    const char *note)
{
    if (out->nfields < FENCE_DESCRIBE_FIELDS) {
        struct fence_issuer_field *f = &out->field[out->nfields++];
        snprintf(f->key, sizeof f->key, "%s", key);
        snprintf(f->value, sizeof f->value, "%s", value);
        snprintf(f->note, sizeof f->note, "%s", note);
    }
}

typedef struct fence__issuer_ops {
    const char *name; /* "redis": fence_client_issuer(), `fence status` */

    /* Parse o->url, check and take the options this issuer has (the core has
     * refused the others: issuers.c), connect nothing.  *out is set whenever
     * memory allowed, also on failure (closed with close). */
    fence_status (*open)(fence__issuer **out, const fence_client_options *o,
                         const fence__iss_env *env);
    /* fence_client_open()'s first contact: connect, and find out what a call
     * would (a password the server wants, a Redis Cluster). */
    fence_status (*start)(fence__issuer *is, int64_t deadline_us);
    void (*close)(fence__issuer *is);
    /* The URL, without credentials. */
    const char *(*url)(const fence__issuer *is);
    /* Whether the command path's connection is known to be down now (closing
     * a client skips the other leases' releases then). */
    int (*down)(fence__issuer *is);

    /* Names: what the issuer refuses beyond the core's rule (NULL: nothing). */
    fence_status (*check_name)(fence__issuer *is, const char *name);
    /* A lease's room: bytes the core allocates with the lease for the issuer
     * (keys, ids), and filling it once the core has set name, ttl and has_info. */
    size_t (*lease_room)(const fence__issuer *is, size_t namelen);
    void (*lease_init)(fence__issuer *is, fence__ilease *l);

    /* Acquire l (holder set; holder_info NULL or the description): FENCE_OK
     * with *g (granted with its token, or held by another), or an error
     * (FENCE_ECLOCK, FENCE_EREPLICAS, FENCE_ECONFIG, FENCE_ECONN, ...).  A
     * granted lease that cannot be kept (too few replicas) is given back
     * first. */
    fence_status (*acquire)(fence__issuer *is, fence__ilease *l, const char *holder_info,
                            int64_t deadline_us, fence__grant *g);
    /* Renew ls[0..n) in one round trip where the server allows:
     * results[i] 1 renewed, 0 refused (expired or another owner's), -1 no
     * answer (the caller sets them all to -1 first).  *sent_us: when the
     * requests went out (the caller sets it to its start; move it only
     * later).  FENCE_OK, or the (last) failure. */
    fence_status (*renew)(fence__issuer *is, fence__ilease *const *ls, size_t n, int chan,
                          int64_t deadline_us, int *results, int64_t *sent_us);
    /* Compare-and-delete l, waking waiters.  FENCE_OK with *deleted (1, or 0:
     * gone or another owner's) and *retried (the request went out twice: a 0
     * is then ambiguous), or an error. */
    fence_status (*release)(fence__issuer *is, fence__ilease *l, int64_t deadline_us,
                            int *deleted, int *retried);
    /* While l is still held: raise its name's counter to at least floor and
     * give l a new token (g->granted 1), or g->granted 0 when l is no longer
     * held.  The core then updates l->token and l->value. */
    fence_status (*reissue)(fence__issuer *is, fence__ilease *l, uint64_t floor,
                            int64_t deadline_us, fence__grant *g);
    /* Raise name's counter to at least floor; *after: its value then. */
    fence_status (*raise)(fence__issuer *is, const char *name, uint64_t floor,
                          int64_t deadline_us, uint64_t *after);
    /* Fill *out (zeroed by the caller) for name; holder_info only with want_info. */
    fence_status (*inspect)(fence__issuer *is, const char *name, int want_info,
                            int64_t deadline_us, fence_lease_info *out);

    /* Waiting for a release of name: a waiter made before each attempt (so no
     * release slips between a failed attempt and the wait), or NULL when none
     * can be made (the core then polls).  wait: 1 a release may have happened,
     * 0 deadline_us passed, -1 the waiter failed (closed by the caller). */
    fence__waiter *(*wait_open)(fence__issuer *is, const char *name, int64_t deadline_us);
    int (*wait)(fence__waiter *w, int64_t deadline_us);
    void (*wait_close)(fence__waiter *w);

    /* What the server says of itself (`fence status`); fields it would not
     * tell are "". */
    fence_status (*describe)(fence__issuer *is, int64_t deadline_us, fence_issuer_info *out);
    /* Its part of the metrics: reconnects, redis_persistence. */
    void (*metrics)(const fence__issuer *is, fence_metrics *m);
} fence__issuer_ops;

/* The issuers built into this library (their ops; issuers.c lists them). */
extern const fence__issuer_ops fence__redis_issuer;
extern const fence__issuer_ops fence__pg_issuer;   /* lib/lease/pg/ */
extern const fence__issuer_ops fence__etcd_issuer;

#endif
