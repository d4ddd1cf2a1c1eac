/* async_internal.h -- what the files of the asynchronous API share (not
 * installed).  A room of its own above the core (docs/architecture.md):
 * it drives the core's one state machine (state.c: a lease granted, a
 * renewal's outcome, the lost sweep and callbacks, release) from the
 * caller's loop, and talks to Redis itself -- the Redis issuer's scripts,
 * arguments and replies (redis/rissuer.h) on a connection of its own,
 * through the engine's request queue (redis/pipe.c).  Redis only: the
 * other issuers are blocking (docs/async.md, "Limits").  Nothing below
 * calls it.
 *
 *   0  async_conn.c   the one connection: connecting in steps, the setup
 *                     request (AUTH, SELECT, SCRIPT LOAD, INFO cluster),
 *                     the server check, requests on the pipe (EVALSHA,
 *                     EVAL on NOSCRIPT), each call's own deadline, failures
 *   1  async_lease.c  what acquire's, renew's and release's replies do (the
 *                     core's transitions), the timers: renewals due,
 *                     validity run out
 *   2  async.c        the public calls (fence_async.h): open, close,
 *                     acquire, release, handle, the watch hook
 *
 * Everything runs on the loop's thread; user code (callbacks) runs only in
 * the "fire" phase of fence_async_handle() and in fence_async_close(). */
#ifndef FENCE_ASYNC_INTERNAL_H
#define FENCE_ASYNC_INTERNAL_H

#include "fence_async.h"
#include "lease_internal.h"
#include "redis/rissuer.h"

enum { FENCE__A_IDLE, FENCE__A_CONNECTING, FENCE__A_SETUP, FENCE__A_READY };

/* One script call and what becomes of it. */
typedef struct fence__aop fence__aop;
struct fence__aop {
    fence_async *a;
    int script; /* FENCE__ACQUIRE, FENCE__RENEW, FENCE__RELEASE */
    int nkeys, nargs;
    const char *args[11];
    int needs_check; /* issues a token: the server check passes first */
    int eval_body;   /* NOSCRIPT came back: send the body */
    int64_t sent_us;
    int64_t deadline_us;   /* the call's own: it fails then, whatever the server does */
    fence__req *q;         /* its request on the pipe, while in flight */
    fence_lease *l;        /* NULL once freed by a release */
    char *info;            /* acquire: the holder description (malloc'd), or NULL */
    char value[FENCE_HOLDER_LEN + 1 + 21]; /* renew: the owner value sent */
    int was_held;          /* release */
    int wait;              /* acquire: WAIT min_replicas pipelined behind it */
    long long acked;       /* ... its answer (-1 unknown) */
    fence__aop *parent;    /* the acquire a give-back release finishes */
    int keep;              /* on_reply chained a request that finishes op */
    /* The reply (owned by on_reply), or NULL when the request failed (st
     * and msg say why).  Called in the I/O phase: no user code. */
    void (*on_reply)(fence__aop *op, void *reply);
    fence_status st;
    char msg[600];
    int64_t pttl_ms;
    fence_lease *out;      /* the acquired lease */
    fence_lease *free_l;   /* released: free it after the callback */
    fence_async_acquire_cb acb;
    fence_async_release_cb rcb;
    void *user;
    fence__aop *next;  /* the waiting or the done list */
    fence__aop *fnext; /* in flight */
};

struct fence_async {
    fence_client *c; /* options, leases, metrics, messages: never connects */
    fence__issuer *ri; /* c's Redis issuer: the engine's handle, the scripts */
    fence__pipe p;
    int state;
    fence__tr_opening *opening;
    short opening_ev; /* what the connecting step waits for (poll events) */
    int64_t connect_end_us; /* connecting and the setup request end by then */
    int checked, checking; /* the server check on this connection */
    fence__aop *waiting, *waiting_tail; /* for the connection or the check */
    fence__aop *done, *done_tail;       /* finished: callbacks due */
    fence__aop *flight;                 /* on the pipe */
    fence__lostq lost;                  /* lost callbacks due */
    fence_async_watch_cb watch;
    void *watch_user;
    int w_fd, w_events; /* what the hook was last told */
    int64_t w_due;
    int depth;   /* inside fence_async_handle / a callback */
    int closing; /* fence_async_close() from inside: free at the end */
};

/* ---- async_conn.c ---------------------------------------------------------- */
void fence__async_conn_init(fence_async *a);
/* Send op (connecting first, and the server check for a token), or queue
 * it until then; its deadline is set here (the call's budget: connect when
 * it must wait for a connection, then the I/O timeout).  A failure
 * finishes it (done list). */
void fence__async_submit(fence_async *a, fence__aop *op);
/* op is over: onto the done list (its callback fires in the fire phase). */
void fence__async_finish(fence_async *a, fence__aop *op);
/* Connect, read, write, time out (the connection, and each call past its
 * deadline): every step that can be taken now. */
void fence__async_io(fence_async *a);
/* The descriptor (-1), FENCE_ASYNC_* events, the next deadline (INT64_MAX). */
int fence__async_conn_fd(const fence_async *a);
int fence__async_conn_events(const fence_async *a);
int64_t fence__async_conn_due(const fence_async *a);
/* Fail everything waiting or in flight with st and msg; close the
 * connection (the watch hook is told first). */
void fence__async_conn_shutdown(fence_async *a, fence_status st, const char *msg);
/* Forget l in every queued or in-flight request (it is being freed). */
void fence__async_forget(fence_async *a, const fence_lease *l);
/* A new request for script with the arguments in op->args. */
fence__aop *fence__aop_new(fence_async *a, int script);
void fence__aop_free(fence__aop *op);

/* ---- async_lease.c ------------------------------------------------------- */
/* Send the renewals that are due, lose leases whose validity ran out. */
void fence__async_timers(fence_async *a, int64_t now);
/* When the next renewal or expiry is due (INT64_MAX: none). */
int64_t fence__async_lease_due(const fence_async *a);
/* The acquire script's reply for op (NULL: failed). */
void fence__async_acquired(fence__aop *op, void *reply);
/* The release script's reply for op (NULL: failed); frees the lease later. */
void fence__async_released(fence__aop *op, void *reply);
/* Free l now, or after its running lost callback. */
void fence__async_free_lease(fence_async *a, fence_lease *l);

#endif
