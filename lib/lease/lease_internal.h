/* lease_internal.h -- what libfence's lease core shares; not installed.
 * Internal non-static names start with fence__.
 *
 * Three rooms (docs/architecture.md): the core here, which owns a lease's
 * life and talks to its server only through an issuer (issuer.h); each
 * issuer in a room of its own beneath it (Redis: lib/lease/redis/, with its
 * private Redis client); the asynchronous API above it (lib/lease/async/).
 * The core never calls the asynchronous API, an issuer never calls the core
 * (scripts/check-layering).
 *
 * Layering: a file calls only files on its own level's left or on a lower
 * level (or an issuer), never a higher one (no call cycles between files):
 *
 *   0  errmsg.c      libfence's error slot, fence__fail, fence_client_errmsg
 *   1  metrics.c     counters, the latency histogram, Prometheus text
 *   2  state.c       the one state machine: a lease granted, a renewal's
 *                    outcome, the lost sweep and transition, the lost queue
 *                    and its callbacks, release, reissue; checks, validity
 *   3  heartbeat.c   the renewal passes, the thread, fence_heartbeat_run
 *   4  lease.c       owner ids, one acquire attempt, renew, release, accessors
 *      counter.c     token_raise, token_last, inspect, describe, server info
 *      reissue.c     fence_lease_reissue (self-healing)
 *   5  wait.c        acquiring with a deadline (a waiter, polling, jitter)
 *   6  acquire.c     fence_acquire: check, start the heartbeat, once or wait
 *   7  issuers.c     the issuers this build has: a URL's scheme picks one,
 *                    options it lacks are refused
 *   8  client.c      open and close
 *
 * The thread rules and how the pieces work: docs/redis.md ("Inside the
 * library") and docs/api.md. */
#ifndef FENCE_INTERNAL_H
#define FENCE_INTERNAL_H

#include "issuer.h"

#include <pthread.h>
#include <stdatomic.h>

/* ==== level 0: errmsg.c ==================================================== */
/* libfence's one error slot, this thread's: the core and every issuer write
 * into it keyed by the client (issuers through fence__iss_env.errslot). */
fence__errslot *fence__errslot_get(void);
/* Record a failure on c (may be NULL) for this thread; returns status. */
fence_status fence__fail(const fence_client *c, fence_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A call on c succeeded: clear this thread's message about c. */
void fence__clear(const fence_client *c);

/* ---- the handles ---------------------------------------------------------- */
typedef struct fence__metrics {
    atomic_uint_fast64_t lease_acquired, lease_lost, lease_released;
    atomic_uint_fast64_t acquire_attempts, acquire_contended, acquire_timeouts;
    atomic_uint_fast64_t renew_ok, renew_failed;
    atomic_int_fast64_t leases_held;
    atomic_uint_fast64_t token_regressions;
    atomic_uint_fast64_t hb_bucket[FENCE_LATENCY_NBUCKETS];
    atomic_uint_fast64_t hb_count, hb_sum_ns;
    atomic_uint_fast64_t clock_behind;
    atomic_int_fast64_t clock_behind_max_us;
} fence__metrics;

enum { FENCE__HELD = 0, FENCE__LOST = 1 };

struct fence_lease {
    fence_client *c;
    fence__ilease il; /* name, holder, owner value, token, ttl: what the issuer sees */
    int64_t clock_behind_us; /* when the token was issued (fence_lease_clock_behind_us) */
    int64_t renew_every_ms;
    int no_heartbeat;
    fence_lost_cb on_lost;
    void *user;
    /* The fields below are guarded by c->lock. */
    int state;              /* FENCE__HELD or FENCE__LOST */
    int64_t valid_until_us; /* monotonic deadline of sure validity */
    int64_t next_renew_us;  /* when the heartbeat renews it next */
    int in_pass;            /* a renewal (or reissue) of it is in flight */
    int cb_running;         /* its lost callback is claimed or running */
    pthread_t cb_thread;    /* ... on this thread */
    int free_after_cb;      /* released while its callback runs: it frees l */
    int released;           /* fence_release() has begun */
    int lost_reason;        /* FENCE_LOST or FENCE_ECONN, once lost */
    int retrying;           /* a renewal of it went unanswered */
    fence_lease *prev, *next; /* the client's open leases */
    fence_lease *lost_next;   /* the lost queue (fence__lostq): no allocation */
    /* The name, then the issuer's room (one allocation per lease). */
};

struct fence_client {
    const fence__issuer_ops *ops; /* the issuer its URL named */
    fence__issuer *iss;
    int heartbeat_mode;
    int ready;   /* options were valid: the handle may be used */
    int offline; /* closing with the issuer unreachable: stop contacting it */

    /* Leases and heartbeat state. */
    pthread_mutex_t lock;
    pthread_cond_t cond; /* heartbeat wake-ups; in_pass / cb_running done */
    fence_lease *leases; /* every open (not yet released) lease */
    int stopping;
    int hb_started;
    pthread_t hb_thread;
    int64_t hb_wake_us; /* when the thread plans to wake; INT64_MAX: idle */
    pthread_mutex_t hb_lock; /* one heartbeat pass at a time */

    fence__metrics m;
};

/* ==== level 1: metrics.c =================================================== */
void fence__metrics_latency(fence__metrics *m, int64_t us);
/* A token was issued (or refused) by a server whose clock was behind_us
 * behind the one that issued the counter's last token. */
void fence__metrics_behind(fence__metrics *m, int64_t behind_us);

/* ==== level 2: state.c: the one state machine =============================== */
/* FENCE_EINVAL for NULL, FENCE_ESTATE for a handle whose open failed on
 * its options; fn names the caller in the message. */
fence_status fence__check_client(const fence_client *c, const char *fn);
/* The name rule (common.h's), then the issuer's own. */
fence_status fence__check_name(const fence_client *c, const char *name);
/* fence_acquire()'s checks of lease options (FENCE_EINVAL). */
fence_status fence__check_lease_opts(fence_client *c, const fence_lease_options *o);
/* The safety margin taken off a TTL (clock drift). */
int64_t fence__margin_us(int64_t ttl_ms);
/* The end of sure validity of l for a request sent at sent_us. */
int64_t fence__valid_until(const fence_lease *l, int64_t sent_us);
/* When the heartbeat renews l next (c->lock held, or l not yet shared). */
int64_t fence__renew_at(const fence_lease *l);
/* Whether l is due for a renewal by the heartbeat (or the event loop) now
 * (c->lock held). */
int fence__due_locked(const fence_lease *l, int64_t now);
/* When the renewer must look at l next: its renewal, or the end of its
 * validity (c->lock held; INT64_MAX for a lease it does not renew). */
int64_t fence__look_at_locked(const fence_lease *l);

/* A new lease for name with its options and a fresh owner id, not yet
 * granted nor shared: one allocation with the issuer's room.  FENCE_OK,
 * FENCE_ENOMEM, FENCE_ESYS (no randomness). */
fence_status fence__lease_new(fence_client *c, const char *name, const fence_lease_options *o,
                              fence_lease **out);
/* Free a lease that is on no list (nothing else). */
void fence__lease_free(fence_lease *l);

/* The answer to an acquire of l sent at sent_us (st, *g): FENCE_OK when
 * granted (l held, on its client's list, the heartbeat told; the caller
 * owns it now), else the status with its message, l freed.  Counts the
 * acquire metrics. */
fence_status fence__acquired(fence_lease *l, fence_status st, const fence__grant *g,
                             int64_t sent_us);

/* The lost queue: leases lost under c->lock whose callbacks run once the
 * lock is dropped.  Intrusive (fence_lease.lost_next): queueing never
 * allocates, so no callback is ever dropped. */
typedef struct fence__lostq {
    fence_lease *head, *tail;
} fence__lostq;
#define FENCE__LOSTQ_INIT {NULL, NULL}
/* Mark l HELD -> LOST with its reason (FENCE_LOST or FENCE_ECONN), under
 * c->lock; returns 1 if this call made the transition.  A lease with a
 * callback is then claimed (cb_running: fence_release() waits for it) and
 * queued on q.  Only a lease with a callback may be touched after the lock
 * is dropped: one without may be freed at any moment. */
int fence__lose_locked(fence_lease *l, int reason, fence__lostq *q);
/* Run the callbacks queued on q (no lock held); each may free its lease. */
void fence__fire_lost(fence__lostq *q);
/* Whether the calling thread is inside a lost callback. */
int fence__in_callback(void);

/* A renewal of l sent at sent_us came back (c->lock held): res 1 renewed,
 * 0 refused, -1 no answer.  The one rule every renewer applies: refused ->
 * lost (FENCE_LOST); validity already over (answered too late, or not at
 * all) -> lost (FENCE_ECONN); renewed -> valid from sent_us, next renewal
 * scheduled; unanswered -> retried after fence__retry_us, never past the
 * validity.  Clears in_pass.  Returns 1 when renewed. */
int fence__renewed_locked(fence_lease *l, int res, int64_t sent_us, int64_t now,
                          fence__lostq *q);
/* The lost sweep (c->lock held): a held lease whose validity ran out by
 * now is lost -- FENCE_ECONN when the issuer did not answer (a renewal of
 * it went unanswered or is still in flight, or unreachable: the renewer's
 * last round trip failed, so that a lease not yet due when a stuck pass
 * began counts too), else FENCE_LOST (nothing was tried: a loop that did
 * not run in time).  Returns 1 when l became lost.  sweep: every lease the
 * renewer keeps (not no_heartbeat); the heartbeat and the event loop call
 * it after each pass, fence_renew() the single check for its lease. */
int fence__lose_expired_locked(fence_lease *l, int64_t now, int unreachable, fence__lostq *q);
void fence__sweep_locked(fence_client *c, int64_t now, int unreachable, fence__lostq *q);

/* Release, in two halves around the issuer's compare-and-delete.  begin
 * (takes c->lock): marks l released (a callback not yet run never runs),
 * waits for a renewal in flight and for its callback on another thread
 * (never from inside a callback), unlinks it, and says whether it was held
 * and whether the issuer must be asked (held, or lost because the issuer
 * did not answer: its key may still be there).  end: the outcome as
 * fence_release() returns it (st, deleted, retried from the issuer; asked 0:
 * not asked), then l is freed (now, or at its callback's end). */
void fence__release_begin(fence_lease *l, int wait_pass, int *was_held, int *ask);
fence_status fence__released(fence_lease *l, int was_held, int asked, fence_status st,
                             int deleted, int retried);
void fence__release_end(fence_lease *l);

/* Reissue, in two halves around the issuer: claim l for the round trip
 * (waits out a renewal in flight; FENCE_LOST when no longer held), then
 * apply the answer (new token and owner value, or lost). */
fence_status fence__reissue_claim(fence_lease *l);
fence_status fence__reissued(fence_lease *l, fence_status st, const fence__grant *g);

/* ==== level 3: heartbeat.c ================================================= */
/* Start the thread if the mode asks for it and it is not running. */
fence_status fence__heartbeat_start(fence_client *c);
void fence__heartbeat_stop(fence_client *c);

/* ==== level 4: lease.c ===================================================== */
/* One acquire attempt, within deadline_us.  FENCE_OK (*out set), FENCE_BUSY
 * (*pttl_ms set), or an error. */
fence_status fence__try_once(fence_client *c, const char *name, const fence_lease_options *o,
                             int64_t deadline_us, fence_lease **out, int64_t *pttl_ms);

/* ==== level 5: wait.c ====================================================== */
fence_status fence__acquire_wait(fence_client *c, const char *name,
                                 const fence_lease_options *o, fence_lease **out);

/* ==== level 7: issuers.c =================================================== */
/* The issuer o->url names, after refusing the options it lacks:
 * FENCE_OK and *ops, or FENCE_EINVAL with a message (an unknown scheme, an
 * option of another issuer, an issuer this build lacks). */
fence_status fence__issuer_pick(fence_client *c, const fence_client_options *o,
                                const fence__issuer_ops **ops);

/* ==== level 8: client.c ==================================================== */
/* A client set up from o (every check of fence_client_open) that does not
 * connect; *out as fence_client_open's (the asynchronous API's handle). */
fence_status fence__client_prepare(fence_client **out, const fence_client_options *o);
/* fence_client_close without contacting the issuer (leases expire by TTL). */
void fence__client_close_offline(fence_client *c);

#endif
