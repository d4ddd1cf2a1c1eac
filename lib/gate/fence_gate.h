/*
 * fence_gate.h -- a fencing write gate for stores that are not SQL: files,
 * blobs, in-process services.
 *
 * The rule.  Every write carries a fencing token (from a fence lease, see
 * fence.h): a number >= 1.  The gate remembers, per named resource, the
 * highest token it has accepted (the resource's "high-water mark") and
 * rejects any write whose token is lower.  An equal token is admitted (one
 * holder writes many times).  Token 0 ("never fenced") is rejected: the
 * gate fails closed.
 *
 * Why begin/commit and not a bare check.  A check alone races: A (token 33)
 * passes the check, B (token 34) passes and writes, and then A's late write
 * still lands.  So the check, the caller's write and the recording of the
 * token form one atomic step per resource:
 *
 *     fence_gate_txn *t;
 *     int rc = fence_gate_begin(g, "orders/42", token, &t, NULL);
 *     if (rc == FENCE_OK) {          // the resource is now held by us
 *         rc = write_the_thing();    // the caller's own write
 *         if (rc == 0) rc = fence_gate_commit(t);  // records the token
 *         else fence_gate_abort(t);                // records nothing
 *     }                              // FENCE_STALE: someone newer wrote
 *
 * While one writer holds a resource, another writer's begin on it waits (up
 * to the gate's wait_ms, then FENCE_TIMEOUT).
 *
 * Two backings:
 *   - In memory (path NULL or ":memory:"): a process-local table of marks
 *     where each resource is held on its own.  Thread-safe, not shared
 *     between processes, forgotten at close (and at a crash: after a
 *     restart every token passes again).  Granularity: per resource;
 *     writers of different resources never wait for each other.  Memory
 *     grows with the number of distinct names until the gate is closed.
 *   - Persistent (path of a SQLite file, created if missing): marks survive
 *     restarts and every process that opens the same file shares them.  A
 *     begin is a SQLite write transaction (BEGIN IMMEDIATE) kept open while
 *     the caller writes; commit records the mark and COMMITs.  The file is
 *     in WAL mode.  Granularity: the whole FILE.  SQLite allows one writer
 *     per database, so while any resource is held, a begin on any other
 *     resource of the same file (from any thread or process) waits too.
 *     Shard across several files if that matters.
 *
 * When a holder dies.  Persistent gate: the lock is the SQLite file lock of
 * the holder's process; if the process dies (even by SIGKILL) the operating
 * system drops the lock, SQLite discards the unfinished transaction (its
 * token is not recorded) and the next begin proceeds.  Mind the one window
 * this leaves: a holder killed after its own write landed but before
 * commit leaves that write in place with its token unrecorded, so a writer
 * with a token between the old mark and the dead holder's could still be
 * admitted.  Where that matters, store the token with the data and check
 * it after begin (examples/filestore.c does).  In-memory gate: the
 * table dies with its process; a *thread* that exits while holding leaves
 * the resource held until the gate is closed, and other writers get
 * FENCE_TIMEOUT after wait_ms, never an endless wait.
 *
 * Threads and ownership (the one rule, stated once):
 *   - A fence_gate may be shared by any number of threads.  Close it only
 *     when no other thread uses it any more and every txn has ended.
 *   - A fence_gate_txn belongs to the thread that began it; only that
 *     thread calls fence_gate_commit() or fence_gate_abort(), and both
 *     always free it.  A thread that begins again while its own txn would
 *     block it (same resource in memory, same gate when persistent) gets
 *     FENCE_ESTATE at once instead of waiting on itself.
 *   - A gate handle does not survive fork(): open a new one in the child.
 *   - Strings a gate returns (fence_gate_errmsg, fence_gate_txn_resource)
 *     belong to the gate or the txn and stay valid until the calling
 *     thread's next call on that gate, or until the txn ends.
 *
 * Status codes are those of fence.h.  Expected outcomes: FENCE_STALE,
 * FENCE_TIMEOUT.  Misuse: FENCE_EINVAL (bad argument), FENCE_ENOTOKEN
 * (token 0 or above FENCE_GATE_TOKEN_MAX), FENCE_ESTATE.  Failures:
 * FENCE_EDB (SQLite said no; the message says why), FENCE_ENOMEM,
 * FENCE_ESYS.  A call that fails changes no mark.
 */
#ifndef FENCE_GATE_H
#define FENCE_GATE_H

#include "fence_common.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Resource names: 1..FENCE_GATE_NAME_MAX bytes, any bytes but NUL.  They
 * are only ever names (bound as SQL parameters, never spliced into SQL). */
#define FENCE_GATE_NAME_MAX FENCE_NAME_MAX
/* The largest token accepted: Redis counters (and SQLite integers) are
 * signed 64-bit, so no lease can carry a larger one. */
#define FENCE_GATE_TOKEN_MAX FENCE_TOKEN_MAX
/* The longest begin() wait: 7 days. */
#define FENCE_GATE_WAIT_MAX_MS (7LL * 86400000)

typedef struct fence_gate fence_gate;
typedef struct fence_gate_txn fence_gate_txn;

enum fence_gate_sync {
    /* PRAGMA synchronous=FULL: a commit is on disk when it returns. */
    FENCE_GATE_SYNC_FULL = 0,
    /* PRAGMA synchronous=NORMAL (WAL): faster; a power loss (not a crash
     * of the process) may forget the last commits, so an older token
     * could be admitted again afterwards.  Choose it only when the store
     * behind the gate is not durable either. */
    FENCE_GATE_SYNC_NORMAL = 1
};

/*
 * Options for fence_gate_open().  Initialise with fence_gate_options_init()
 * (which sets the defaults below), then set what you need.
 */
typedef struct fence_gate_options {
    /* NULL or ":memory:" (the default): an in-memory gate.  Otherwise the
     * path of the SQLite file holding the marks (created if missing; a
     * plain path, URIs are not interpreted).  The string is copied. */
    const char *path;
    /* How long fence_gate_begin() waits for a held resource: 0 tries once,
     * >0 waits up to that many milliseconds (at most FENCE_GATE_WAIT_MAX_MS).
     * Default 5000.  When it runs out, begin returns FENCE_TIMEOUT. */
    int64_t wait_ms;
    /* Persistent gates: enum fence_gate_sync.  Default FULL. */
    int synchronous;
} fence_gate_options;

/* Fill *opts with the defaults (in memory, wait 5000 ms, sync FULL).
 * NULL is a no-op. */
FENCE_API void fence_gate_options_init(fence_gate_options *opts);

/*
 * Open a gate (opts NULL: the defaults, an in-memory gate).  On success
 * returns FENCE_OK and *out is the gate.  On failure returns the status and,
 * where memory allowed, still sets *out to a handle whose
 * fence_gate_errmsg() says why; close it with fence_gate_close() either
 * way.  *out is NULL only when out was NULL or memory ran out.  Opening a
 * persistent gate creates the file and its table if needed, switches it to
 * WAL mode and may wait (up to max(wait_ms, 1000) ms) for another process
 * that holds the file.
 */
FENCE_API int fence_gate_open(fence_gate **out, const fence_gate_options *opts);

/*
 * Close the gate and free it.  FENCE_OK, or FENCE_ESTATE when a txn of the
 * gate is still open (nothing is freed then; end the txns and close again).
 * NULL is a no-op returning FENCE_OK.
 */
FENCE_API int fence_gate_close(fence_gate *g);

/*
 * Detail of the last failure of a call on this gate made by the calling
 * thread, or "" if that call succeeded.  Never NULL.  Valid until the
 * thread's next call on the gate.
 */
FENCE_API const char *fence_gate_errmsg(const fence_gate *g);

/* Nonzero when the gate is backed by a file. */
FENCE_API int fence_gate_is_persistent(const fence_gate *g);

/*
 * Begin a fenced write of RESOURCE with TOKEN.  Waits (up to wait_ms) while
 * another writer holds the resource, then compares TOKEN with the
 * resource's high-water mark (0 for a resource never written):
 *   - TOKEN >= mark: FENCE_OK, *out is a txn that holds the resource.  Do
 *     the write, then fence_gate_commit() or fence_gate_abort() it.
 *   - TOKEN <  mark: FENCE_STALE, nothing is held, *out is NULL.  Do not
 *     write: a newer holder already has.
 * Other outcomes (nothing held, *out NULL): FENCE_ENOTOKEN (token 0 or >
 * FENCE_GATE_TOKEN_MAX), FENCE_EINVAL (NULL gate or out, resource NULL,
 * empty or longer than FENCE_GATE_NAME_MAX), FENCE_TIMEOUT (still held by
 * another writer when wait_ms ran out), FENCE_ESTATE (the calling thread's
 * own txn holds it), FENCE_EDB, FENCE_ENOMEM, FENCE_ESYS.
 * mark_out (optional) receives the mark seen: on FENCE_OK and FENCE_STALE
 * the resource's high-water mark at the time of the check, otherwise 0.
 */
FENCE_API int fence_gate_begin(fence_gate *g, const char *resource, uint64_t token,
                               fence_gate_txn **out, uint64_t *mark_out);

/*
 * Commit: record the txn's token as the resource's high-water mark (it
 * never goes down) and release the resource.  Always frees the txn.
 * FENCE_OK, or FENCE_EDB (persistent gate: the disk refused the commit;
 * the old mark stays, the reason is in fence_gate_errmsg() of the gate).
 * After a failed commit your write is in place but unprotected: a writer
 * with a token between the old mark and yours could still be admitted, so
 * undo the write if you can.  NULL: FENCE_EINVAL.
 */
FENCE_API int fence_gate_commit(fence_gate_txn *txn);

/*
 * Abort: record nothing and release the resource.  Always frees the txn.
 * FENCE_OK, or FENCE_EDB if SQLite failed to roll back (nothing is
 * recorded either way).  NULL: FENCE_EINVAL.
 */
FENCE_API int fence_gate_abort(fence_gate_txn *txn);

/*
 * *mark = the resource's committed high-water mark (0 if none yet).  Never
 * waits for a holder: a txn in progress is not seen until it commits.
 */
FENCE_API int fence_gate_high_water(fence_gate *g, const char *resource, uint64_t *mark);

/* The txn's token, and its resource name (owned by the txn).  NULL txn: 0
 * and "". */
FENCE_API uint64_t fence_gate_txn_token(const fence_gate_txn *txn);
FENCE_API const char *fence_gate_txn_resource(const fence_gate_txn *txn);

#ifdef __cplusplus
}
#endif
#endif /* FENCE_GATE_H */
