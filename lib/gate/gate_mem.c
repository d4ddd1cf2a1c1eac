/* gate_mem.c -- the in-memory gate: a hash table of resources, each with
 * its mark, a held flag and a condition variable.  The table is split into
 * stripes (by the name's hash), each with its own mutex, held only for
 * bookkeeping and never while a caller writes: a held resource is a flag,
 * so writers of different resources never wait for each other, and mostly
 * do not even touch the same lock. */
#include "gate_internal.h"

#include <stdlib.h>
#include <string.h>

#define INITIAL_BUCKETS 16

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
static fence_gate__stripe *stripe_of(fence_gate *g, uint64_t h)
{
    return &g->stripes[(h >> 56) % FENCE_GATE__STRIPES];
}

int fence_gate__mem_open(fence_gate *g)
{
    g->stripes = calloc(FENCE_GATE__STRIPES, sizeof *g->stripes);
    if (g->stripes == NULL) {
        fence_gate__set_err(g, "out of memory");
        return FENCE_ENOMEM;
    }
    for (int i = 0; i < FENCE_GATE__STRIPES; i++) {
        fence_gate__stripe *st = &g->stripes[i];
        st->buckets = calloc(INITIAL_BUCKETS, sizeof *st->buckets);
        if (st->buckets == NULL) {
            fence_gate__set_err(g, "out of memory");
            return FENCE_ENOMEM;
        }
        st->nbuckets = INITIAL_BUCKETS;
        if (pthread_mutex_init(&st->mu, NULL) != 0) {
            fence_gate__set_err(g, "cannot initialise a mutex");
            return FENCE_ESYS;
        }
        g->nstripes_ok++;
    }
    return FENCE_OK;
}

void fence_gate__mem_close(fence_gate *g)
{
    if (g->stripes == NULL) {
        return;
    }
    for (int i = 0; i < FENCE_GATE__STRIPES; i++) {
        fence_gate__stripe *st = &g->stripes[i];
        for (size_t b = 0; b < st->nbuckets; b++) {
            fence_gate__entry *e = st->buckets[b];
            while (e != NULL) {
                fence_gate__entry *next = e->next;
                pthread_cond_destroy(&e->cond);
                free(e);
                e = next;
            }
        }
        free(st->buckets);
        if (i < g->nstripes_ok) {
            pthread_mutex_destroy(&st->mu);
        }
    }
    free(g->stripes);
    g->stripes = NULL;
    g->nstripes_ok = 0;
}

/* Called with st->mu held. */
static fence_gate__entry *lookup(fence_gate__stripe *st, const char *name, size_t n, uint64_t h)
{
    for (fence_gate__entry *e = st->buckets[h % st->nbuckets]; e != NULL; e = e->next) {
        if (e->hash == h && e->len == n && memcmp(e->name, name, n) == 0) {
            return e;
        }
    }
    return NULL;
}

/* Double the stripe's table when it gets full; a failed resize is harmless
 * (the chains just get longer).  Called with st->mu held. */
static void maybe_grow(fence_gate__stripe *st)
{
    if (st->nentries < st->nbuckets) {
        return;
    }
    size_t nb = st->nbuckets * 2;
    fence_gate__entry **b = calloc(nb, sizeof *b);
    if (b == NULL) {
        return;
    }
    for (size_t i = 0; i < st->nbuckets; i++) {
        fence_gate__entry *e = st->buckets[i];
        while (e != NULL) {
            fence_gate__entry *next = e->next;
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
static fence_gate__entry *lookup_or_add(fence_gate__stripe *st, const char *name, size_t n,
                                        uint64_t h)
{
    fence_gate__entry *e = lookup(st, name, n, h);
    if (e != NULL) {
        return e;
    }
    e = calloc(1, sizeof *e + n + 1);
    if (e == NULL) {
        return NULL;
    }
    if (fence_gate__cond_init(&e->cond) != 0) {
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

int fence_gate__mem_begin(fence_gate *g, fence_gate_txn *t)
{
    int64_t deadline = g->wait_ms > 0 ? fence_gate__now_ns() + g->wait_ms * 1000000LL : -1;
    pthread_t self = pthread_self();
    size_t n = strlen(t->resource);
    uint64_t h = hash_name(t->resource, n);
    fence_gate__stripe *st = stripe_of(g, h);

    pthread_mutex_lock(&st->mu);
    fence_gate__entry *e = lookup_or_add(st, t->resource, n, h);
    if (e == NULL) {
        pthread_mutex_unlock(&st->mu);
        fence_gate__set_err(g, "out of memory adding resource \"%s\"",
                            fence_gate__show(t->resource));
        return FENCE_ENOMEM;
    }
    if (e->held && pthread_equal(e->holder, self)) {
        pthread_mutex_unlock(&st->mu);
        fence_gate__set_err(g, "this thread already holds \"%s\": commit or abort that txn "
                               "first", fence_gate__show(t->resource));
        return FENCE_ESTATE;
    }
    int rc = fence_gate__wait_free(&st->mu, &e->cond, &e->held, deadline);
    if (rc != FENCE_OK) {
        pthread_mutex_unlock(&st->mu);
        fence_gate__set_err(g, "\"%s\" is still held by another writer after %lld ms",
                            fence_gate__show(t->resource), (long long)g->wait_ms);
        return rc;
    }
    t->mark_seen = e->mark;
    if (t->token < e->mark) {
        pthread_mutex_unlock(&st->mu);
        fence_gate__set_err(g, "stale token %llu for \"%s\": a write with token %llu was "
                               "already accepted",
                            (unsigned long long)t->token, fence_gate__show(t->resource),
                            (unsigned long long)t->mark_seen);
        return FENCE_STALE;
    }
    e->held = 1;
    e->holder = self;
    t->entry = e;
    pthread_mutex_unlock(&st->mu);
    return FENCE_OK;
}

int fence_gate__mem_end(fence_gate_txn *t, int commit)
{
    fence_gate *g = t->gate;
    fence_gate__entry *e = t->entry;
    fence_gate__stripe *st = stripe_of(g, e->hash);
    pthread_mutex_lock(&st->mu);
    if (commit && t->token > e->mark) {
        e->mark = t->token;
    }
    e->held = 0;
    /* Broadcast: a waiter that wakes and finds its token stale leaves
     * without taking the resource, so every waiter must get a look. */
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&st->mu);
    return FENCE_OK;
}

unsigned fence_gate__mem_held(fence_gate *g)
{
    unsigned held = 0;
    for (int i = 0; i < g->nstripes_ok; i++) {
        fence_gate__stripe *st = &g->stripes[i];
        pthread_mutex_lock(&st->mu);
        for (size_t b = 0; b < st->nbuckets; b++) {
            for (fence_gate__entry *e = st->buckets[b]; e != NULL; e = e->next) {
                held += e->held != 0;
            }
        }
        pthread_mutex_unlock(&st->mu);
    }
    return held;
}

int fence_gate__mem_high_water(fence_gate *g, const char *resource, uint64_t *mark)
{
    size_t n = strlen(resource);
    uint64_t h = hash_name(resource, n);
    fence_gate__stripe *st = stripe_of(g, h);
    pthread_mutex_lock(&st->mu);
    fence_gate__entry *e = lookup(st, resource, n, h);
    *mark = e != NULL ? e->mark : 0;
    pthread_mutex_unlock(&st->mu);
    return FENCE_OK;
}
