/* gate_internal.h -- what the files of the write gate share.  Not installed.
 *
 * The files form layers; a file calls only the layers below it, never one
 * above (no call cycles):
 *
 *   gate.c                      the public API: argument checks, handles,
 *                               txns; calls down through g->ops
 *   gate_mem.c  gate_sqlite.c   the two backings, each one ops table
 *   errmsg.c    gate_wait.c     per-thread messages, and waiting
 *   lib/common                  clock, name check, error slots
 */
#ifndef FENCE_GATE_INTERNAL_H
#define FENCE_GATE_INTERNAL_H

#include "common.h"
#include "fence_gate.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/*
 * A backing: what gate.c calls once it has checked the arguments (the
 * gate is open, the resource a valid name, the token in range).  Every
 * function reports a failure with fence_gate__fail() (the message) and
 * returns its status.
 */
typedef struct fence_gate__ops {
    /* Set up g->impl; path is the file (NULL in memory).  On failure it
     * may leave a partial g->impl, which close() must take apart. */
    fence_status (*open)(fence_gate *g, const char *path);
    /* Free g->impl, whatever state open() left it in (NULL too). */
    void (*close)(fence_gate *g);
    /* The txns begun and not yet ended, right now. */
    unsigned (*open_txns)(fence_gate *g);
    /* Wait for t->resource, check t->token and t->holder against its mark
     * with the store rule (fence__mark_rule, lib/common/rule.c) and hold
     * it.  Sets t->mark_seen and t->rule on FENCE_OK and FENCE_STALE, and
     * t->mark_holder on FENCE_STALE; holds nothing unless FENCE_OK. */
    fence_status (*begin)(fence_gate *g, fence_gate_txn *t);
    /* Commit: raise the mark to (t->token, t->holder) when begin's rule
     * said so (FENCE__RULE_RAISE; an admitted equal token changes
     * nothing); abort: record nothing.  Then release.  The caller frees t
     * afterwards, whatever they return. */
    fence_status (*commit)(fence_gate_txn *t);
    fence_status (*abort)(fence_gate_txn *t);
    /* *mark = resource's committed mark, 0 if none; never waits. */
    fence_status (*mark)(fence_gate *g, const char *resource, uint64_t *mark);
} fence_gate__ops;

extern const fence_gate__ops fence_gate__mem_ops;    /* gate_mem.c */
extern const fence_gate__ops fence_gate__sqlite_ops; /* gate_sqlite.c */

struct fence_gate {
    const fence_gate__ops *ops; /* NULL when the options were refused */
    uint64_t id;     /* unique per open: keys the per-thread messages */
    int ok;          /* the backing opened: begin and mark are allowed */
    int persistent;
    int64_t wait_ms;
    int synchronous; /* enum fence_gate_sync */
    void *impl;      /* the backing's own state */
};

/* A holder id as the gate keeps it: FENCE_HOLDER_LEN hex digits and a NUL,
 * or "" (only h[0] is set) for none. */
typedef char fence_gate__holder[FENCE_HOLDER_LEN + 1];

struct fence_gate_txn {
    fence_gate *gate;
    void *hold;         /* the backing's note of what it holds */
    uint64_t token;
    uint64_t mark_seen; /* the resource's mark when begin checked it */
    int rule;           /* begin's FENCE__RULE_* (raise, admit, older, repeat) */
    fence_gate__holder holder;      /* the writer's holder, "" for none */
    fence_gate__holder mark_holder; /* FENCE_STALE: the mark's holder */
    char resource[];    /* NUL-terminated copy */
};

/* Holder ids: equal ("" equals only ""), and copied (from a valid id or
 * "": the bytes after a "" are never read). */
static inline int fence_gate__holder_eq(const char *a, const char *b)
{
    return a[0] == b[0] && (a[0] == '\0' || memcmp(a, b, FENCE_HOLDER_LEN) == 0);
}

static inline void fence_gate__holder_copy(char *dst, const char *src)
{
    if (src[0] != '\0') {
        memcpy(dst, src, FENCE_HOLDER_LEN + 1);
    } else {
        dst[0] = '\0';
    }
}

/* ---- errmsg.c: the calling thread's message per gate --------------------- */
/* Set the calling thread's message for g (printf-style); returns status. */
fence_status fence_gate__fail(const fence_gate *g, fence_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Clear it (a call on g is starting, or succeeded). */
void fence_gate__err_clear(const fence_gate *g);
/* The calling thread's message for g, "" if none; never NULL. */
const char *fence_gate__err_get(const fence_gate *g);
/* The message of a FENCE_STALE begin (t->mark_seen, t->mark_holder, t->rule set):
 * an older token, or a repeated one from another holder.  Returns
 * FENCE_STALE. */
fence_status fence_gate__fail_stale(const fence_gate *g, const fence_gate_txn *t);
/* A resource name shortened for messages (per-thread buffer, valid until
 * the thread's next call). */
const char *fence_gate__show(const char *resource);

/* ---- gate_wait.c: waiting for a holder ---------------------------------- */
/* The absolute CLOCK_MONOTONIC deadline wait_ms from now, or -1 for
 * wait_ms 0 (try once). */
int64_t fence_gate__deadline(int64_t wait_ms);
/* Wait on cond (created by fence__cond_init_monotonic, with mu held) until
 * *busy is 0 or the deadline passes.  FENCE_OK when free, FENCE_TIMEOUT
 * otherwise. */
fence_status fence_gate__wait_free(pthread_mutex_t *mu, pthread_cond_t *cond, const int *busy,
                                   int64_t deadline_ns);

#endif
