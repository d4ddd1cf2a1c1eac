/* internal.h -- what the core's files share; not installed.
 * Internal non-static names start with fence__. */
#ifndef FENCE_INTERNAL_H
#define FENCE_INTERNAL_H

#include "fence.h"
#include "common.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>

typedef struct redisContext redisContext;

/* ---- jitter.c (the clock itself is lib/common/clock.c) ----------- */
/* A uniformly random value in [lo, hi] (not for secrets). */
int64_t fence__jitter(int64_t lo, int64_t hi);

/* ---- owner.c: owner ids from the OS CSPRNG ------------------------ */
/* Writes FENCE_OWNER_BYTES random bytes as lower-case hex plus NUL into
 * hex (2 * FENCE_OWNER_BYTES + 1 bytes).  FENCE_ESYS if getrandom fails. */
int fence__owner_id(char *hex);

/* ---- url.c ---------------------------------------------------------- */
typedef struct fence__url {
    int is_unix;
    char host[256];
    int port;
    char path[108]; /* unix socket path */
    int db;
    char *user;     /* NULL or heap, wiped on free */
    char *password; /* NULL or heap, wiped on free */
    char display[400];
} fence__url;

/* Parse a URL; on error returns FENCE_EINVAL and writes why (never with
 * credentials) into err. */
int fence__url_parse(fence__url *u, const char *url, char *err, size_t errlen);
void fence__url_free(fence__url *u);
/* Overwrite a secret string with zeros, then free it (NULL: no-op). */
void fence__wipe_free(char *s);

/* ---- errmsg.c: per-thread message for the last failure ---------------- */
/* Record a failure on c (may be NULL) for this thread; returns status. */
int fence__fail(const fence_client *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void fence__clear(const fence_client *c);

/* ---- scripts.c ---------------------------------------------------------- */
enum fence__script {
    FENCE__ACQUIRE,
    FENCE__RENEW,
    FENCE__RENEW_BATCH,
    FENCE__RELEASE,
    FENCE__TOKEN_RAISE,
    FENCE__INSPECT,
    FENCE__NSCRIPTS
};
const char *fence__script_body(int s);
size_t fence__script_len(int s);

/* ---- metrics.c ---------------------------------------------------------- */
typedef struct fence__metrics {
    atomic_uint_fast64_t lease_acquired, lease_lost, lease_released;
    atomic_uint_fast64_t acquire_attempts, acquire_contended, acquire_timeouts;
    atomic_uint_fast64_t renew_ok, renew_failed, reconnects;
    atomic_int_fast64_t leases_held;
    atomic_uint_fast64_t hb_bucket[FENCE_LATENCY_NBUCKETS];
    atomic_uint_fast64_t hb_count, hb_sum_ns;
} fence__metrics;
void fence__metrics_latency(fence__metrics *m, int64_t us);

/* ---- the handles ---------------------------------------------------------- */
enum { FENCE__HELD = 0, FENCE__LOST = 1 };

struct fence_lease {
    fence_client *c;
    char *name;
    char *owner_key; /* "<prefix>{NAME}" */
    char *channel;   /* "<prefix>{NAME}:released" */
    char value[2 * FENCE_OWNER_BYTES + 1 + 21]; /* "<hex>:<token>" */
    uint64_t token;
    int64_t ttl_ms;
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
    fence__url url;
    char *prefix;
    int connect_timeout_ms;
    int io_timeout_ms;
    int heartbeat_mode;
    int renew_batch;
    int ready;   /* options were valid: the handle may be used */
    int offline; /* closing with Redis unreachable: stop contacting it */
    char sha[FENCE__NSCRIPTS][41]; /* "" until SCRIPT LOAD told us */

    /* The command connection, used by calling threads. */
    pthread_mutex_t cmd_lock;
    redisContext *cmd;
    int cmd_ever; /* it had connected before: a new connection is a reconnect */

    /* Leases and heartbeat state. */
    pthread_mutex_t lock;
    pthread_cond_t cond; /* heartbeat wake-ups; in_pass / cb_running done */
    fence_lease *leases; /* every open (not yet released) lease */
    int stopping;
    int hb_started;
    pthread_t hb_thread;
    int64_t hb_wake_us; /* when the thread plans to wake; INT64_MAX: idle */

    /* The heartbeat connection; one pass at a time. */
    pthread_mutex_t hb_lock;
    redisContext *hb;
    int hb_ever;

    fence__metrics m;
};

/* ---- conn.c ---------------------------------------------------------- */
/* Open a connection: connect (within timeout_ms), set I/O timeouts, AUTH,
 * SELECT.  FENCE_ECONN / FENCE_EAUTH / FENCE_EPROTO with a message. */
int fence__conn_open(fence_client *c, redisContext **out, int64_t timeout_ms);
/* Make sure *rc is open, reconnecting if needed.  *ever says whether this
 * slot was ever connected: a new connection then counts as a reconnect. */
int fence__conn_ensure(fence_client *c, redisContext **rc, int *ever, int64_t timeout_ms);
/* Close and NULL *rc. */
void fence__conn_drop(redisContext **rc);
/* Set both I/O timeouts on an open connection. */
void fence__conn_timeout(redisContext *rc, int64_t ms);
/* Load every script, pipelined, and remember the SHAs (best effort). */
void fence__scripts_load(fence_client *c, redisContext *rc);
/* Run a script on *rc: EVALSHA, falling back to EVAL on NOSCRIPT.  On an
 * I/O error the connection is dropped.  *reply is the reply (owned by the
 * caller: freeReplyObject) on FENCE_OK; an error reply is FENCE_EPROTO. */
int fence__eval(fence_client *c, redisContext **rc, int script, int nkeys, int nargs,
                const char **args, const size_t *lens, int *timed_out, void **reply);
/* Run a script on the command connection with one retry after a
 * reconnect when a connection that had been idle failed.  Takes cmd_lock.
 * bound_ms > 0 caps each attempt's connect and I/O time below the client's
 * timeouts.  *retried (optional) tells whether the retry happened. */
int fence__eval_cmd(fence_client *c, int script, int nkeys, int nargs, const char **args,
                    int64_t bound_ms, int *retried, void **reply);

/* ---- client.c --------------------------------------------------------- */
/* FENCE_EINVAL for NULL, FENCE_ESTATE for a handle whose open failed on
 * its options; fn names the caller in the message. */
int fence__check_client(const fence_client *c, const char *fn);

/* ---- lease.c ---------------------------------------------------------- */
int fence__check_name(const fence_client *c, const char *name);
/* Build "<prefix>{NAME}<suffix>"; NULL when out of memory. */
char *fence__key(const fence_client *c, const char *name, const char *suffix);
/* One acquire attempt.  FENCE_OK (*out set), FENCE_BUSY (*pttl_ms set). */
int fence__try_once(fence_client *c, const char *name, const fence_lease_options *o,
                    int64_t bound_ms, fence_lease **out, int64_t *pttl_ms);
/* Mark HELD -> LOST (with its reason, FENCE_LOST or FENCE_ECONN) under
 * c->lock; returns 1 if this call made the transition.  A lease with a
 * callback is then claimed (cb_running): its caller must fire it. */
int fence__mark_lost_locked(fence_lease *l, int reason);
/* Fire l's callback (caller holds no lock; l was just marked lost by the
 * caller).  Frees l afterwards if it was released from inside. */
void fence__fire_lost(fence_lease *l, int reason);
int64_t fence__margin_us(int64_t ttl_ms);

/* ---- wait.c ---------------------------------------------------------- */
int fence__acquire_wait(fence_client *c, const char *name, const fence_lease_options *o,
                        fence_lease **out);

/* ---- heartbeat.c ---------------------------------------------------- */
/* When the heartbeat renews l next (c->lock held, or l not yet shared). */
int64_t fence__renew_at(const fence_lease *l);
/* Start the thread if the mode asks for it and it is not running. */
int fence__heartbeat_start(fence_client *c);
void fence__heartbeat_stop(fence_client *c);
/* A lease was added whose first renewal is due at due_us: wake the thread
 * if it plans to sleep past that. */
void fence__heartbeat_kick(fence_client *c, int64_t due_us);
/* One pass: renew the due leases in one round trip. */
int fence__heartbeat_pass(fence_client *c, int64_t *next_ms);

#endif
