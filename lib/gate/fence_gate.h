/*
 * fence_gate.h -- libfence_gate: a fencing write gate for stores that are
 * not SQL (files, blobs, in-process services).
 *
 * Per named resource the gate keeps the highest token it has accepted
 * (its "mark") and the holder that wrote with it, and admits a write only
 * with a higher token, or an equal one from the same holder:
 *
 *     fence_gate_txn *t;
 *     fence_status rc = fence_gate_begin(g, "orders/42", token, holder, &t, NULL);
 *     if (rc == FENCE_OK) {               // the resource is held by us
 *         if (write_the_thing() == 0) rc = fence_gate_commit(t); // records token
 *         else fence_gate_abort(t);                              // records nothing
 *     }                                   // FENCE_STALE: someone newer wrote
 *
 * How it works, the in-memory and SQLite-file backings and their
 * granularity, what happens when a holder dies, and threads in depth:
 * docs/gate.md.
 *
 * Threads and ownership, in one place:
 *   - A fence_gate may be shared by any number of threads; close it only
 *     when no other thread uses it and every txn has ended.  It does not
 *     survive fork(): open a new one in the child.
 *   - A fence_gate_txn belongs to the thread that began it; only that
 *     thread commits or aborts it, and both always free it.
 *   - Strings the gate returns (fence_gate_errmsg, fence_gate_txn_resource,
 *     fence_gate_txn_holder) belong to the gate or the txn: valid until the calling thread's next
 *     call on that gate, or until the txn ends.
 *
 * Status codes are those of fence_common.h.  Expected outcomes:
 * FENCE_STALE, FENCE_TIMEOUT.  Misuse: FENCE_EINVAL, FENCE_ENOTOKEN (token
 * 0 or above FENCE_TOKEN_MAX), FENCE_ESTATE.  Failures: FENCE_EDB (SQLite
 * said no), FENCE_ENOMEM, FENCE_ESYS.  A call that fails changes no mark.
 */
#ifndef FENCE_GATE_H
#define FENCE_GATE_H

#include "fence_common.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Resource names: 1..FENCE_NAME_MAX bytes, any bytes but NUL (only ever
 * bound as SQL parameters).  Tokens: 1..FENCE_TOKEN_MAX.  Holder ids:
 * exactly FENCE_HOLDER_LEN lowercase hex digits (a lease's owner id:
 * fence_lease_holder(), or FENCE_HOLDER under `fence run`), or NULL for
 * none. */

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

/* Options for fence_gate_open(): fence_gate_options_init() sets the
 * defaults, then set what you need. */
typedef struct fence_gate_options {
    /* NULL or ":memory:" (the default): an in-memory gate.  Otherwise the
     * path of the SQLite file holding the marks (created if missing; a
     * plain path, URIs are not interpreted).  The string is copied. */
    const char *path;
    /* How long fence_gate_begin() waits for a held resource: 0 tries once,
     * >0 waits up to that many ms (at most FENCE_GATE_WAIT_MAX_MS), then
     * FENCE_TIMEOUT.  Default 5000. */
    int64_t wait_ms;
    /* Persistent gates: enum fence_gate_sync.  Default FULL. */
    int synchronous;
} fence_gate_options;

/* Fill *opts with the defaults (in memory, wait 5000 ms, sync FULL).
 * NULL is a no-op. */
FENCE_API void fence_gate_options_init(fence_gate_options *opts);

/*
 * Open a gate (opts NULL: the defaults).  FENCE_OK and *out is the gate.
 * On failure, where memory allowed, *out is still a handle whose
 * fence_gate_errmsg() says why; close it either way (*out is NULL only
 * when out was NULL or memory ran out).  A persistent gate creates its
 * file and table if needed (and adds the holder column to a file of an
 * older version: its marks count as recorded without a holder), switches
 * it to WAL mode and may wait up to max(wait_ms, 1000) ms for another
 * process holding the file.
 */
FENCE_API fence_status fence_gate_open(fence_gate **out, const fence_gate_options *opts);

/* Close the gate and free it.  FENCE_OK, or FENCE_ESTATE when a txn of it
 * is still open (nothing is freed; end the txns and close again).  NULL:
 * a no-op returning FENCE_OK. */
FENCE_API fence_status fence_gate_close(fence_gate *g);

/* The calling thread's message of its last failed call on this gate, ""
 * after a success (other threads' failures never show).  Never NULL; valid
 * until the thread's next call on the gate. */
FENCE_API const char *fence_gate_errmsg(const fence_gate *g);

/* Nonzero when the gate is backed by a file. */
FENCE_API int fence_gate_is_persistent(const fence_gate *g);

/*
 * Begin a fenced write of RESOURCE with TOKEN by HOLDER (NULL: none; the
 * string is copied).  Waits (up to wait_ms) while another writer holds the
 * resource, then compares with the resource's mark (0 if never written)
 * and the holder recorded with it:
 *   - TOKEN > mark, or TOKEN == mark and HOLDER is the recorded holder
 *     (none equals only none): FENCE_OK, *out holds the resource until
 *     fence_gate_commit() or fence_gate_abort().
 *   - TOKEN == mark from another holder (a token issued twice):
 *     FENCE_STALE, reason FENCE_STALE_REPEAT, nothing held.  Do not write.
 *   - TOKEN < mark: FENCE_STALE, reason FENCE_STALE_OLDER, nothing held.
 * Otherwise, nothing held: FENCE_ENOTOKEN (token 0 or > FENCE_TOKEN_MAX),
 * FENCE_EINVAL (NULL g or out, bad resource name, HOLDER not NULL and not
 * FENCE_HOLDER_LEN lowercase hex digits), FENCE_TIMEOUT (still
 * held when wait_ms ran out), FENCE_ESTATE (the calling thread's own txn
 * holds it -- the same resource in memory, any of the gate's file when
 * persistent -- or the gate failed to open), FENCE_EDB, FENCE_ENOMEM,
 * FENCE_ESYS.  *out is NULL unless FENCE_OK.
 * stale (optional) is zeroed, and on FENCE_STALE describes the rejection:
 * offered = TOKEN, highest = the mark, kind = FENCE_OBJECT_RESOURCE,
 * reason, object = RESOURCE, holder = the mark's holder ("" for none).
 */
FENCE_API fence_status fence_gate_begin(fence_gate *g, const char *resource, uint64_t token,
                                        const char *holder, fence_gate_txn **out,
                                        fence_stale *stale);

/*
 * Record the txn's token and holder as the resource's mark (it never goes
 * down; an equal token leaves it as it is) and release the resource.
 * Always frees the txn.  FENCE_OK, or FENCE_EDB (persistent: the disk
 * refused; the old mark stays, the gate's errmsg says why).  After a
 * failed commit your write is in place but not protected: undo it if you
 * can.  NULL: FENCE_EINVAL.
 */
FENCE_API fence_status fence_gate_commit(fence_gate_txn *txn);

/* Record nothing and release the resource.  Always frees the txn.
 * FENCE_OK, or FENCE_EDB if SQLite failed to roll back (nothing is
 * recorded either way).  NULL: FENCE_EINVAL. */
FENCE_API fence_status fence_gate_abort(fence_gate_txn *txn);

/* *mark = the resource's committed mark (0 if none yet).  Never waits for
 * a holder: a txn in progress is not seen until it commits.  FENCE_EINVAL
 * (NULL g or mark, bad name), FENCE_ESTATE (failed open), FENCE_EDB,
 * FENCE_TIMEOUT (the file is locked beyond wait). */
FENCE_API fence_status fence_gate_mark(fence_gate *g, const char *resource, uint64_t *mark);

/* The txn's token; the resource's mark when begin checked it (<= the
 * token; 0 if never written); its resource name and its holder id ("" for
 * none), both owned by the txn.  NULL txn: 0, 0, "" and "". */
FENCE_API uint64_t fence_gate_txn_token(const fence_gate_txn *txn);
FENCE_API uint64_t fence_gate_txn_mark(const fence_gate_txn *txn);
FENCE_API const char *fence_gate_txn_resource(const fence_gate_txn *txn);
FENCE_API const char *fence_gate_txn_holder(const fence_gate_txn *txn);

#ifdef __cplusplus
}
#endif
#endif /* FENCE_GATE_H */
