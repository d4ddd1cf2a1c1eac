/* gate_internal.h -- what the gate's front (gate.c) and its two backings
 * (gate_mem.c, gate_sqlite.c) share.  Not installed. */
#ifndef FENCE_GATE_INTERNAL_H
#define FENCE_GATE_INTERNAL_H

#include "fence_gate.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;

/* One resource of an in-memory gate: its mark and its hold. */
typedef struct fence_gate__entry {
    struct fence_gate__entry *next; /* hash chain */
    uint64_t hash;
    uint64_t mark;     /* highest committed token, 0 = none */
    int held;          /* 1 while a txn holds it */
    pthread_t holder;  /* the holding thread, when held */
    pthread_cond_t cond; /* signalled when released */
    size_t len;
    char name[];       /* NUL-terminated */
} fence_gate__entry;

/* In memory, the table is split into stripes, each with its own mutex and
 * hash table, so that writers of different resources do not even contend
 * for the bookkeeping lock (unless their names hash to the same stripe).
 * A stripe's mutex guards its table and every entry in it. */
#define FENCE_GATE__STRIPES 16
typedef struct fence_gate__stripe {
    pthread_mutex_t mu;
    fence_gate__entry **buckets;
    size_t nbuckets;
    size_t nentries;
    char pad_[64]; /* keep stripes on separate cache lines */
} fence_gate__stripe;

struct fence_gate {
    uint64_t id;       /* unique per open, keys the per-thread messages */
    int persistent;
    int64_t wait_ms;
    int synchronous;
    char *path;        /* persistent only */
    /* Persistent: txns begun and not yet ended (atomic).  In memory the
     * held entries are counted instead, so that writers of different
     * resources share no counter. */
    unsigned open_txns;

    /* In memory. */
    fence_gate__stripe *stripes; /* FENCE_GATE__STRIPES of them */
    int nstripes_ok;             /* stripes whose mutex is initialised */

    /* Persistent: mu guards the slot fields. */
    pthread_mutex_t mu;
    int mu_ok;          /* mu and slot_cond were initialised */

    /* Persistent: one write connection, used only by the thread that holds
     * the slot (slot_busy), so threads of this gate queue on slot_cond
     * instead of polling the file lock.  Other processes are waited for by
     * the busy handler, up to deadline_ns. */
    pthread_cond_t slot_cond;
    int slot_busy;
    pthread_t slot_holder;
    sqlite3 *wdb;
    sqlite3_stmt *st_begin, *st_commit, *st_rollback, *st_select, *st_upsert;
    int64_t deadline_ns; /* owned by the slot holder */

    /* Persistent: a read connection for fence_gate_high_water(), guarded by
     * rmu (in WAL mode it never waits for the writer). */
    pthread_mutex_t rmu;
    int rmu_ok;
    sqlite3 *rdb;
    sqlite3_stmt *st_rselect;
};

struct fence_gate_txn {
    fence_gate *gate;
    fence_gate__entry *entry; /* in memory: the held entry */
    uint64_t token;
    uint64_t mark_seen;
    char resource[]; /* NUL-terminated copy */
};

/* Set the calling thread's message for gate g (printf-style). */
void fence_gate__set_err(const fence_gate *g, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Clear the calling thread's message for gate g. */
void fence_gate__clear_err(const fence_gate *g);
/* A resource name shortened for messages (per-thread buffer). */
const char *fence_gate__show(const char *resource);

/* CLOCK_MONOTONIC in nanoseconds, and the same as a struct timespec. */
int64_t fence_gate__now_ns(void);

/* In memory (gate_mem.c). */
int fence_gate__mem_open(fence_gate *g);
void fence_gate__mem_close(fence_gate *g);
int fence_gate__mem_begin(fence_gate *g, fence_gate_txn *t);
int fence_gate__mem_end(fence_gate_txn *t, int commit);
int fence_gate__mem_high_water(fence_gate *g, const char *resource, uint64_t *mark);
/* The number of resources held right now. */
unsigned fence_gate__mem_held(fence_gate *g);

/* Persistent (gate_sqlite.c). */
int fence_gate__db_open(fence_gate *g);
void fence_gate__db_close(fence_gate *g);
int fence_gate__db_begin(fence_gate *g, fence_gate_txn *t);
int fence_gate__db_end(fence_gate_txn *t, int commit);
int fence_gate__db_high_water(fence_gate *g, const char *resource, uint64_t *mark);

/* Wait on cond (with mu held) until *busy is 0 or the deadline (absolute
 * CLOCK_MONOTONIC ns, -1 = try once) passes.  FENCE_OK when free,
 * FENCE_TIMEOUT otherwise. */
int fence_gate__wait_free(pthread_mutex_t *mu, pthread_cond_t *cond, const int *busy,
                          int64_t deadline_ns);
/* Initialise a condition variable that waits on CLOCK_MONOTONIC. */
int fence_gate__cond_init(pthread_cond_t *cond);

#endif
