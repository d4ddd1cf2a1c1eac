/*
 * fence_async.h -- libfence's asynchronous API, for event loops (libuv,
 * libevent, epoll, ...), in the manner of hiredis's adapters.
 *
 * A fence_async never blocks on the network (DNS aside: docs/async.md,
 * "Limits") and runs no thread.  It owns at most one connection; the
 * caller's loop watches its file descriptor for the events it wants and
 * calls fence_async_handle() when they come or when its timer is due.
 * Renewals of the leases it acquired are driven by those calls.  Every
 * callback runs inside fence_async_handle() (or fence_async_close()),
 * never inside the call that queued it.
 *
 * Threads and ownership: one thread at a time, the loop's.  A lease
 * acquired here is an ordinary fence_lease *: fence_lease_token(),
 * fence_lease_valid_ms(), fence_lease_lost() and the other accessors of
 * fence.h work; release it with fence_async_release() (never
 * fence_release(), fence_renew() or fence_lease_reissue(), which would
 * block).  fence_async_close() frees the handle and every lease still
 * open on it.  The model in full: docs/async.md.
 */
#ifndef FENCE_ASYNC_H
#define FENCE_ASYNC_H

#include "fence.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fence_async fence_async;

/* The events fence_async_events() asks for and fence_async_handle() takes. */
#define FENCE_ASYNC_READ 1
#define FENCE_ASYNC_WRITE 2

/*
 * Open a handle from the options of fence_client_open() (the same checks,
 * the same statuses and messages), without connecting: the connection is
 * made when the first request needs it, and again after a failure.
 * heartbeat_mode is ignored (the caller's loop renews).  Redis only:
 * refused with FENCE_EINVAL are URLs of another issuer and redis-sentinel://
 * URLs (use the blocking API); a Redis Cluster is refused at the first
 * request.  Each call is held to its own time, as the blocking API's:
 * connect_timeout_ms when it has to wait for a connection, then
 * io_timeout_ms (FENCE_ECONN "timed out" after that).  On
 * failure *out is still a handle whose fence_async_errmsg() says why
 * (unless out was NULL or memory ran out); close it either way.
 */
FENCE_API fence_status fence_async_open(fence_async **out, const fence_client_options *opts);

/*
 * Fail every pending request (its callback gets FENCE_ESTATE, "closed"),
 * free every lease still open without telling Redis (they expire by their
 * TTL: release them first), close the connection and free the handle.
 * Safe from inside a callback (the handle is freed when it returns).  NULL
 * is a no-op.
 */
FENCE_API void fence_async_close(fence_async *a);

/* The detail of the last failed call on a (or of a failed call that had
 * no handle, with NULL); "" if none.  Never NULL, never with credentials. */
FENCE_API const char *fence_async_errmsg(const fence_async *a);

/* ---- the loop's side ------------------------------------------------------ */

/* The descriptor to watch, or -1 (no connection now). */
FENCE_API int fence_async_fd(const fence_async *a);
/* FENCE_ASYNC_READ / FENCE_ASYNC_WRITE, or 0. */
FENCE_API int fence_async_events(const fence_async *a);
/* Milliseconds until fence_async_handle() must be called even without an
 * event (a renewal, a timeout, a callback waiting), 0 for now, or -1 when
 * no timer is needed. */
FENCE_API int64_t fence_async_timeout_ms(const fence_async *a);

/*
 * Do the work: events (FENCE_ASYNC_READ / _WRITE that came, or 0 for the
 * timer) are only a hint -- the handle reads, writes, times out and
 * renews whatever is due, then runs the callbacks.  Afterwards fd, events
 * and timer may have changed (the watch hook says so).  NULL: FENCE_EINVAL.
 */
FENCE_API fence_status fence_async_handle(fence_async *a, int events);

/*
 * The hook adapters use (like hiredis's ev.addRead / delRead /
 * scheduleTimer): called whenever the descriptor, the events or the timer
 * changed -- after every fence_async_* call that changed them, before a
 * descriptor is closed (with fd -1), and once at once when set.  fd -1:
 * stop watching the old one.  timeout_ms as fence_async_timeout_ms().
 * May not call fence_async_close() (the other calls are fine).
 */
typedef void (*fence_async_watch_cb)(fence_async *a, int fd, int events, int64_t timeout_ms,
                                     void *user);
FENCE_API void fence_async_set_watch(fence_async *a, fence_async_watch_cb cb, void *user);

/* ---- leases ----------------------------------------------------------------- */

/*
 * The outcome of fence_async_acquire(): FENCE_OK with the lease (the
 * caller's now: fence_async_release() it), FENCE_BUSY with the holder's
 * remaining TTL in pttl_ms (lease NULL), or an error (lease NULL) with msg
 * saying why (FENCE_ECONN, FENCE_EAUTH, FENCE_ECONFIG, FENCE_ECLOCK,
 * FENCE_EREPLICAS (min_replicas: given back first, as fence_acquire does),
 * FENCE_ESTATE when the handle was closed first: the acquisition may then
 * have happened in Redis and expires by its TTL).  msg is "" on FENCE_OK
 * and valid during the call only.
 */
typedef void (*fence_async_acquire_cb)(fence_async *a, fence_status st, fence_lease *lease,
                                       int64_t pttl_ms, const char *msg, void *user);

/*
 * Try to acquire NAME once (opts as fence_acquire()'s: the same checks and
 * messages; wait_ms must be 0 and no_heartbeat 0 here -- retry from the
 * loop on FENCE_BUSY; opts->on_lost is called from fence_async_handle()
 * when the lease is lost).  Bad input returns its status at once and no
 * callback comes; FENCE_OK means cb will be called exactly once.
 */
FENCE_API fence_status fence_async_acquire(fence_async *a, const char *name,
                                           const fence_lease_options *opts,
                                           fence_async_acquire_cb cb, void *user);

/* The outcome of fence_async_release(): the statuses of fence_release(). */
typedef void (*fence_async_release_cb)(fence_async *a, fence_status st, const char *msg,
                                       void *user);

/*
 * Release the lease (compare-and-delete, as fence_release()).  The lease
 * handle is the library's from this call on (do not use it again); it is
 * freed once the outcome is known.  cb may be NULL.  FENCE_OK means cb
 * (if any) will be called exactly once; FENCE_EINVAL for a NULL handle or
 * lease, or a lease of another handle.
 */
FENCE_API fence_status fence_async_release(fence_async *a, fence_lease *lease,
                                           fence_async_release_cb cb, void *user);

/* The client behind a's leases (fence_lease_client() of each): for
 * fence_client_metrics() and fence_client_url() only -- its blocking
 * calls must not be used. */
FENCE_API fence_client *fence_async_client(const fence_async *a);

#ifdef __cplusplus
}
#endif
#endif /* FENCE_ASYNC_H */
