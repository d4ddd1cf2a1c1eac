/* gate_mem.c -- the in-memory backing: a hash table of resources, each
 * with its mark, a held flag and a condition variable.  The table is split
 * into stripes (by the name's hash), each with its own mutex, held only
 * for bookkeeping and never while a caller writes: a held resource is a
 * flag, so writers of different resources never wait for each other, and
 * mostly do not even touch the same lock. */
#include "gate_internal.h"

#include <stdlib.h>
#include <string.h>

#define INITIAL_BUCKETS 16

/* One resource: its mark and its hold. */
typedef struct entry {
    struct entry *next;  /* hash chain */
    uint64_t hash;
    uint64_t mark;       /* highest committed token, 0 = none */
    fence_gate__holder mark_holder; /* who committed it, "" = none */
    int held;            /* 1 while a txn holds it */
    pthread_t thread;    /* the holding thread, when held */
    pthread_cond_t cond; /* signalled when released */
    size_t len;
    char name[];         /* NUL-terminated */
} entry;

/* A stripe's mutex guards its table and every entry in it. */
#define STRIPES 16
typedef struct stripe {
    pthread_mutex_t mu;
    entry **buckets;
    size_t nbuckets;
    size_t nentries;
    char pad_[64]; /* keep stripes on separate cache lines */
} stripe;

typedef struct mem_gate {
    stripe stripes[STRIPES];
    int nstripes_ok; /* stripes whose mutex is initialised */
} mem_gate;

static uint64_t hash_name(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    /* FNV's top bits barely change with the last byte ("res-1", "res-2"),
     * and the top bits pick the stripe: mix them (murmur3's finaliser). */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

/* The stripe of a hash: its top bits (the low bits pick the bucket). */
static stripe *stripe_of(fence_gate *g, uint64_t h)
{
    mem_gate *m = g->impl;
    return &m->stripes[(h >> 56) % STRIPES];
}

static fence_status mem_open(fence_gate *g, const char *path)
{
    (void)path;
    mem_gate *m = calloc(1, sizeof *m);
    if (m == NULL) {
        return fence_gate__fail(g, FENCE_ENOMEM, "out of memory");
    }
    g->impl = m;
    for (int i = 0; i < STRIPES; i++) {
        stripe *st = &m->stripes[i];
        st->buckets = calloc(INITIAL_BUCKETS, sizeof *st->buckets);
        if (st->buckets == NULL) {
            return fence_gate__fail(g, FENCE_ENOMEM, "out of memory");
        }
        st->nbuckets = INITIAL_BUCKETS;
        if (pthread_mutex_init(&st->mu, NULL) != 0) {
            return fence_gate__fail(g, FENCE_ESYS, "cannot initialise a mutex");
        }
        m->nstripes_ok++;
    }
    return FENCE_OK;
}

static void mem_close(fence_gate *g)
{
    mem_gate *m = g->impl;
    if (m == NULL) {
        return;
    }
    for (int i = 0; i < STRIPES; i++) {
        stripe *st = &m->stripes[i];
        for (size_t b = 0; b < st->nbuckets; b++) {
            entry *e = st->buckets[b];
            while (e != NULL) {
                entry *next = e->next;
                pthread_cond_destroy(&e->cond);
                free(e);
                e = next;
            }
        }
        free(st->buckets);
        if (i < m->nstripes_ok) {
            pthread_mutex_destroy(&st->mu);
        }
    }
    free(m);
    g->impl = NULL;
}

/* Called with st->mu held. */
static entry *lookup(stripe *st, const char *name, size_t n, uint64_t h)
{
    for (entry *e = st->buckets[h % st->nbuckets]; e != NULL; e = e->next) {
        if (e->hash == h && e->len == n && memcmp(e->name, name, n) == 0) {
            return e;
        }
    }
    return NULL;
}

/* Double the stripe's table when it gets full; a failed resize is harmless
 * (the chains just get longer).  Called with st->mu held. */
static void maybe_grow(stripe *st)
{
    if (st->nentries < st->nbuckets) {
        return;
    }
    size_t nb = st->nbuckets * 2;
    entry **b = calloc(nb, sizeof *b);
    if (b == NULL) {
        return;
    }
    for (size_t i = 0; i < st->nbuckets; i++) {
        entry *e = st->buckets[i];
        while (e != NULL) {
            entry *next = e->next;
            e->next = b[e->hash % nb];
            b[e->hash % nb] = e;
            e = next;
        }
    }
    free(st->buckets);
    st->buckets = b;
    st->nbuckets = nb;
}

/* Called with st->mu held. */
static entry *lookup_or_add(stripe *st, const char *name, size_t n, uint64_t h)
{
    entry *e = lookup(st, name, n, h);
    if (e != NULL) {
        return e;
    }
    e = calloc(1, sizeof *e + n + 1);
    if (e == NULL) {
        return NULL;
    }
    if (fence__cond_init_monotonic(&e->cond) != 0) {
        free(e);
        return NULL;
    }
    e->hash = h;
    e->len = n;
    memcpy(e->name, name, n + 1);
    maybe_grow(st);
    e->next = st->buckets[h % st->nbuckets];
    st->buckets[h % st->nbuckets] = e;
    st->nentries++;
    return e;
}

/* Wait until e is free, then check the token and holder id (the store
 * rule, fence__mark_rule) and hold it.  Called with st->mu held; returns with it
 * held.  The caller writes the message, after unlocking. */
static fence_status take(stripe *st, entry *e, fence_gate_txn *t, int64_t deadline)
{
    pthread_t self = pthread_self();
    if (e->held && pthread_equal(e->thread, self)) {
        return FENCE_ESTATE;
    }
    if (fence_gate__wait_free(&st->mu, &e->cond, &e->held, deadline) != FENCE_OK) {
        return FENCE_TIMEOUT;
    }
    t->mark_seen = e->mark;
    t->rule = fence__mark_rule(e->mark, e->mark_holder, t->token, t->holder);
    if (t->rule == FENCE__RULE_OLDER || t->rule == FENCE__RULE_REPEAT) {
        fence_gate__holder_copy(t->mark_holder, e->mark_holder);
        return FENCE_STALE;
    }
    e->held = 1;
    e->thread = self;
    t->hold = e;
    return FENCE_OK;
}

static fence_status mem_begin(fence_gate *g, fence_gate_txn *t)
{
    int64_t deadline = fence_gate__deadline(g->wait_ms);
    size_t n = strlen(t->resource);
    uint64_t h = hash_name(t->resource, n);
    stripe *st = stripe_of(g, h);

    pthread_mutex_lock(&st->mu);
    entry *e = lookup_or_add(st, t->resource, n, h);
    fence_status rc = e != NULL ? take(st, e, t, deadline) : FENCE_ENOMEM;
    pthread_mutex_unlock(&st->mu);

    const char *res = rc != FENCE_OK ? fence_gate__show(t->resource) : "";
    switch (rc) {
    case FENCE_OK:
        return FENCE_OK;
    case FENCE_ENOMEM:
        return fence_gate__fail(g, rc, "out of memory adding resource \"%s\"", res);
    case FENCE_ESTATE:
        return fence_gate__fail(g, rc, "this thread already holds \"%s\": commit or abort "
                                "that txn first", res);
    case FENCE_TIMEOUT:
        return fence_gate__fail(g, rc, "\"%s\" is still held by another writer after %lld ms",
                                res, (long long)g->wait_ms);
    default: /* FENCE_STALE */
        return fence_gate__fail_stale(g, t);
    }
}

static void release(fence_gate_txn *t, int commit)
{
    entry *e = t->hold;
    stripe *st = stripe_of(t->gate, e->hash);
    pthread_mutex_lock(&st->mu);
    if (commit && t->rule == FENCE__RULE_RAISE) { /* held since begin: the mark is as it saw it */
        e->mark = t->token;
        fence_gate__holder_copy(e->mark_holder, t->holder);
    }
    e->held = 0;
    /* Broadcast: a waiter that wakes and finds its token stale leaves
     * without taking the resource, so every waiter must get a look. */
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&st->mu);
}

static fence_status mem_commit(fence_gate_txn *t)
{
    release(t, 1);
    return FENCE_OK;
}

static fence_status mem_abort(fence_gate_txn *t)
{
    release(t, 0);
    return FENCE_OK;
}

/* The number of resources held right now.  Held resources are counted,
 * not kept in a counter, so writers of different resources share none. */
static unsigned mem_open_txns(fence_gate *g)
{
    mem_gate *m = g->impl;
    unsigned held = 0;
    for (int i = 0; m != NULL && i < m->nstripes_ok; i++) {
        stripe *st = &m->stripes[i];
        pthread_mutex_lock(&st->mu);
        for (size_t b = 0; b < st->nbuckets; b++) {
            for (entry *e = st->buckets[b]; e != NULL; e = e->next) {
                held += e->held != 0;
            }
        }
        pthread_mutex_unlock(&st->mu);
    }
    return held;
}

static fence_status mem_mark(fence_gate *g, const char *resource, uint64_t *mark)
{
    size_t n = strlen(resource);
    uint64_t h = hash_name(resource, n);
    stripe *st = stripe_of(g, h);
    pthread_mutex_lock(&st->mu);
    entry *e = lookup(st, resource, n, h);
    *mark = e != NULL ? e->mark : 0;
    pthread_mutex_unlock(&st->mu);
    return FENCE_OK;
}

const fence_gate__ops fence_gate__mem_ops = {
    .open = mem_open,
    .close = mem_close,
    .open_txns = mem_open_txns,
    .begin = mem_begin,
    .commit = mem_commit,
    .abort = mem_abort,
    .mark = mem_mark,
};
