/* lease_internal.h -- what libfence's lease layer shares; not installed.
 * Internal non-static names start with fence__.
 *
 * Two rooms: the Redis engine in lib/lease/redis/ (redis/redis.h: URLs,
 * transport, TLS, connections, Sentinel, Cluster, server info, running
 * scripts by index; it knows nothing of leases and never calls a file
 * here), and the lease layer here, above it.  The lease layer gives the
 * engine its script bodies and its check before a connection's first
 * token (refusing an allkeys-* server, client.c), and owns the metrics.
 *
 * Layering: a file calls only files on its own level's left or on a lower
 * level (or the engine), never a higher one (no call cycles between files):
 *
 *   0  errmsg.c      fence__fail, fence_client_errmsg (on the engine's
 *                    error slot)
 *   1  metrics.c     counters, the latency histogram, Prometheus text
 *   2  state.c       what a lease knows: keys, checks, validity, the
 *                    lost transition and its callback, a renewal's effect
 *   3  hbcluster.c heartbeat.c
 *                    a cluster pass (leases grouped by node and slot, one
 *                    round trip per node); the renewal passes, its
 *                    thread, fence_heartbeat_run
 *   4  lease.c       owner ids, one acquire attempt, renew, release,
 *                    accessors
 *      counter.c     token_raise, token_last, lease_inspect, server info
 *      reissue.c     fence_lease_reissue (self-healing)
 *   5  wait.c        acquiring with a deadline (pub/sub, polling, jitter)
 *   6  acquire.c     fence_acquire: check, start the heartbeat, once or wait
 *   7  client.c      open (the engine's handle, the scripts, the server
 *                    check) and close
 *   8-10 async_conn.c async_lease.c async.c   the asynchronous API
 *                    (fence_async.h; its own levels: async_internal.h)
 *
 * The Redis key contract, the thread rules and how the pieces work are in
 * docs/redis.md. */
#ifndef FENCE_INTERNAL_H
#define FENCE_INTERNAL_H

#include "redis/redis.h"

/* ==== level 0 ============================================================ */

/* ---- errmsg.c: fence_client_errmsg(), on the engine's error slot ------- */
/* Record a failure on c (may be NULL) for this thread; returns status. */
fence_status fence__fail(const fence_client *c, fence_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A call on c succeeded: clear this thread's message about c. */
void fence__clear(const fence_client *c);

/* ---- the scripts (lib/lease/ .lua files, registered with the engine by
 * client.c), by index -------------------------------------------------------- */
enum fence__script {
    FENCE__ACQUIRE,
    FENCE__RENEW,
    FENCE__RENEW_BATCH,
    FENCE__RELEASE,
    FENCE__TOKEN_RAISE,
    FENCE__INSPECT,
    FENCE__NSCRIPTS
};
_Static_assert(FENCE__NSCRIPTS <= FENCE__RD_MAX_SCRIPTS, "the engine's script table is too small");

/* ---- the handles ---------------------------------------------------------- */
typedef struct fence__metrics {
    atomic_uint_fast64_t lease_acquired, lease_lost, lease_released;
    atomic_uint_fast64_t acquire_attempts, acquire_contended, acquire_timeouts;
    atomic_uint_fast64_t renew_ok, renew_failed; /* reconnects: rd.reconnects */
    atomic_int_fast64_t leases_held;
    atomic_uint_fast64_t token_regressions;
    atomic_int persistence; /* gauge: 1 on, 0 off, -1 unknown */
    atomic_uint_fast64_t hb_bucket[FENCE_LATENCY_NBUCKETS];
    atomic_uint_fast64_t hb_count, hb_sum_ns;
    atomic_uint_fast64_t clock_behind;
    atomic_int_fast64_t clock_behind_max_us;
} fence__metrics;

enum { FENCE__HELD = 0, FENCE__LOST = 1 };

struct fence_lease {
    fence_client *c;
    char *name;
    char *owner_key; /* "<prefix>{NAME}" */
    char *channel;   /* "<prefix>{NAME}:released" */
    char *info_key;  /* "<prefix>{NAME}:info" when has_info, else NULL */
    char holder[FENCE_HOLDER_LEN + 1]; /* the owner id, "<hex>" */
    /* value and token change only under c->lock with in_pass set
     * (fence_lease_reissue), so the heartbeat never reads them then. */
    char value[2 * FENCE_OWNER_BYTES + 1 + 21]; /* "<hex>:<token>" */
    uint64_t token;
    int64_t clock_behind_us; /* when token was issued (fence_lease_clock_behind_us) */
    int64_t ttl_ms;
    int has_info; /* a holder description was stored: renewals extend it too */
    int64_t renew_every_ms;
    int no_heartbeat;
    fence_lost_cb on_lost;
    void *user;
    /* The fields below are guarded by c->lock. */
    int state;              /* FENCE__HELD or FENCE__LOST */
    int64_t valid_until_us; /* monotonic deadline of sure validity */
    int64_t next_renew_us;  /* when the heartbeat renews it next */
    int in_pass;            /* a heartbeat round trip for it is in flight */
    int cb_running;         /* its lost callback is running */
    pthread_t cb_thread;    /* ... on this thread */
    int free_after_cb;      /* released while its callback runs: it frees l */
    int released;           /* fence_release() has begun */
    int lost_reason;        /* FENCE_LOST or FENCE_ECONN, once lost */
    int retrying;           /* the last renewal went unanswered */
    fence_lease *prev, *next; /* the client's open leases */
};

struct fence_client {
    /* The Redis engine: URL, timeouts, scripts, the command connection
     * (rd.cmd under rd.cmd_lock), the cluster table (rd.cl, NULL: one
     * server), the reconnects counter.  rd.errkey is c. */
    fence__redis rd;
    char *prefix;
    int heartbeat_mode;
    int renew_batch;
    int token_mode;       /* enum fence_token_mode */
    int64_t token_jump_ms;
    int64_t clock_behind_limit_ms; /* 0: none */
    int64_t counter_idle_ms;       /* -1: never expires */
    int allow_eviction;
    int min_replicas;     /* 0: no WAIT */
    int64_t replica_timeout_ms;
    int ready;   /* options were valid: the handle may be used */
    int offline; /* closing with Redis unreachable: stop contacting it */

    /* Leases and heartbeat state. */
    pthread_mutex_t lock;
    pthread_cond_t cond; /* heartbeat wake-ups; in_pass / cb_running done */
    fence_lease *leases; /* every open (not yet released) lease */
    int stopping;
    int hb_started;
    pthread_t hb_thread;
    int64_t hb_wake_us; /* when the thread plans to wake; INT64_MAX: idle */

    /* The heartbeat connection; one pass at a time (in a cluster, the
     * nodes' hb slots in rd.cl, under the same lock). */
    pthread_mutex_t hb_lock;
    fence__conn *hb;
    int hb_ever;

    fence__metrics m;
};

/* ==== level 1 ============================================================ */

/* ---- metrics.c ---------------------------------------------------------- */
void fence__metrics_latency(fence__metrics *m, int64_t us);
/* The metrics gauge for a fence_persistence value: 1, 0 or -1. */
int fence__persistence_gauge(int p);

/* ==== level 2: state.c =================================================== */
/* FENCE_EINVAL for NULL, FENCE_ESTATE for a handle whose open failed on
 * its options; fn names the caller in the message. */
fence_status fence__check_client(const fence_client *c, const char *fn);
fence_status fence__check_name(const fence_client *c, const char *name);
/* Build "<prefix>{NAME}<suffix>"; NULL when out of memory. */
char *fence__key(const fence_client *c, const char *name, const char *suffix);
/* The safety margin taken off a TTL (clock drift). */
int64_t fence__margin_us(int64_t ttl_ms);
/* The end of sure validity of l for a request sent at sent_us. */
int64_t fence__valid_until(const fence_lease *l, int64_t sent_us);
/* When the heartbeat renews l next (c->lock held, or l not yet shared). */
int64_t fence__renew_at(const fence_lease *l);
/* How soon to retry a renewal that could not reach Redis: a quarter of
 * the renewal period, 10 ms to 250 ms (the heartbeat's and the event loop's). */
int64_t fence__retry_us(const fence_lease *l);
/* The TTL argument of renew.lua / renew_batch.lua for l: "<ttl_ms>", or
 * "-<ttl_ms>" when l has a holder description whose key must be extended
 * too (so leases without one cost no extra command). */
void fence__renew_ttl_arg(const fence_lease *l, char *buf, size_t size);
/* Free a lease's memory (nothing else). */
void fence__lease_free(fence_lease *l);
/* Take l off its client's list (c->lock held). */
void fence__unlink_locked(fence_lease *l);
/* Whether the calling thread is inside a lost callback. */
int fence__in_callback(void);

/* A renewal of l sent at sent_us was accepted in time (c->lock held; l is
 * held and still valid): extend its validity, schedule its next renewal,
 * clear retrying, count renew_ok. */
void fence__renewed_locked(fence_lease *l, int64_t sent_us);

/* A growable list of leases; the first few need no allocation.  Not to be
 * copied once initialised. */
typedef struct fence__leasev {
    fence_lease **v;
    size_t n, cap;
    fence_lease *small[8];
} fence__leasev;
void fence__leasev_init(fence__leasev *a);
/* 0, or -1 when out of memory (a is unchanged). */
int fence__leasev_push(fence__leasev *a, fence_lease *l);
void fence__leasev_free(fence__leasev *a);

/* Mark l HELD -> LOST with its reason (FENCE_LOST or FENCE_ECONN), under
 * c->lock; returns 1 if this call made the transition.  A lease with a
 * callback is then claimed (cb_running: fence_release() waits for it) and
 * queued on q, for fence__fire_lost() once the lock is dropped; if q
 * cannot grow, no callback (out of memory).  Only a lease with a callback
 * may be touched after the lock is dropped: one without may be freed at
 * any moment. */
int fence__lose_locked(fence_lease *l, int reason, fence__leasev *q);
/* Run the callbacks queued by fence__lose_locked() (no lock held), then
 * empty q.  Each may free its lease. */
void fence__fire_lost(fence__leasev *q);

/* ==== level 3: hbcluster.c, heartbeat.c ================================== */
/* Renew ls[0..n) in a cluster: grouped by node, and within a node by slot
 * (one renew_batch.lua call per slot: a script touches one slot); each
 * node's batches sent before its replies are read: one round trip per
 * node, the replies of all nodes read with one poll().  bound_ms is the
 * whole pass's limit: each step gets only the time left; a failed node is
 * failed for the whole pass.  Redirected batches are sent again once to
 * their new node.  results[i]:
 * 1 renewed, 0 refused, -1 no answer (kept at -1 on any failure).  *sent:
 * when the first batch went out.  FENCE_OK, or the last failure. */
fence_status fence__hb_cluster(fence_client *c, fence_lease **ls, size_t n, int *results,
                               int64_t bound_ms, int64_t *sent);

/* Start the thread if the mode asks for it and it is not running. */
fence_status fence__heartbeat_start(fence_client *c);
void fence__heartbeat_stop(fence_client *c);
/* A lease was added whose first renewal is due at due_us: wake the thread
 * if it plans to sleep past that. */
void fence__heartbeat_kick(fence_client *c, int64_t due_us);
/* One pass: renew the due leases in one round trip. */
fence_status fence__heartbeat_pass(fence_client *c, int64_t *next_ms);

/* ==== level 4: lease.c =================================================== */
/* One acquire attempt.  FENCE_OK (*out set), FENCE_BUSY (*pttl_ms set). */
fence_status fence__try_once(fence_client *c, const char *name, const fence_lease_options *o,
                             int64_t bound_ms, fence_lease **out, int64_t *pttl_ms);

/* Fill the token-issuing extras of a script call from c's options. */
void fence__issue_init(const fence_client *c, fence__eval_opts *io);
/* The token mode, jump, clock-behind limit and counter idle time as script
 * arguments: mode "clock"/"dense", jump_us, limit_us and idle_ms (room for
 * 24 bytes each). */
const char *fence__mode_args(const fence_client *c, char *jump_us, char *limit_us,
                             char *idle_ms);
/* acquire.lua's answer when it issued ({1, token[, behind]}) or refused
 * under the clock-behind limit ({2, behind}): FENCE_OK with *token and
 * *behind_us, FENCE_ECLOCK, or FENCE_EPROTO; counts the clock_behind
 * metrics.  what ("acquire", "reissue") and name go into messages. */
struct redisReply;
fence_status fence__issued(fence_client *c, const struct redisReply *r, const char *what,
                           const char *name, uint64_t *token, int64_t *behind_us);

/* ==== level 5: wait.c ==================================================== */
fence_status fence__acquire_wait(fence_client *c, const char *name,
                                 const fence_lease_options *o, fence_lease **out);

#endif
