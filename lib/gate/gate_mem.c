/* gate_mem.c -- the in-memory gate: a hash table of resources, each with
 * its mark, a held flag and a condition variable.  g->mu guards the table
 * and every entry, but is held only for bookkeeping, never while a caller
 * writes; a held resource is a flag, so resources never block each other
 * beyond those few instructions. */
#include "gate_internal.h"

#include <stdlib.h>
#include <string.h>

#define INITIAL_BUCKETS 64

static uint64_t hash_name(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

int fence_gate__mem_open(fence_gate *g)
{
    g->buckets = calloc(INITIAL_BUCKETS, sizeof *g->buckets);
    if (g->buckets == NULL) {
        fence_gate__set_err(g, "out of memory");
        return FENCE_ENOMEM;
    }
    g->nbuckets = INITIAL_BUCKETS;
    return FENCE_OK;
}

void fence_gate__mem_close(fence_gate *g)
{
    for (size_t i = 0; i < g->nbuckets; i++) {
        fence_gate__entry *e = g->buckets[i];
        while (e != NULL) {
            fence_gate__entry *next = e->next;
            pthread_cond_destroy(&e->cond);
            free(e);
            e = next;
        }
    }
    free(g->buckets);
    g->buckets = NULL;
    g->nbuckets = 0;
}

/* Called with g->mu held. */
static fence_gate__entry *lookup(fence_gate *g, const char *name, size_t n, uint64_t h)
{
    for (fence_gate__entry *e = g->buckets[h % g->nbuckets]; e != NULL; e = e->next) {
        if (e->hash == h && e->len == n && memcmp(e->name, name, n) == 0) {
            return e;
        }
    }
    return NULL;
}

/* Double the table when it gets full; a failed resize is harmless (the
 * chains just get longer).  Called with g->mu held. */
static void maybe_grow(fence_gate *g)
{
    if (g->nentries < g->nbuckets) {
        return;
    }
    size_t nb = g->nbuckets * 2;
    fence_gate__entry **b = calloc(nb, sizeof *b);
    if (b == NULL) {
        return;
    }
    for (size_t i = 0; i < g->nbuckets; i++) {
        fence_gate__entry *e = g->buckets[i];
        while (e != NULL) {
            fence_gate__entry *next = e->next;
            e->next = b[e->hash % nb];
            b[e->hash % nb] = e;
            e = next;
        }
    }
    free(g->buckets);
    g->buckets = b;
    g->nbuckets = nb;
}

/* Called with g->mu held. */
static fence_gate__entry *lookup_or_add(fence_gate *g, const char *name)
{
    size_t n = strlen(name);
    uint64_t h = hash_name(name, n);
    fence_gate__entry *e = lookup(g, name, n, h);
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
    maybe_grow(g);
    e->next = g->buckets[h % g->nbuckets];
    g->buckets[h % g->nbuckets] = e;
    g->nentries++;
    return e;
}

int fence_gate__mem_begin(fence_gate *g, fence_gate_txn *t)
{
    int64_t deadline = g->wait_ms > 0 ? fence_gate__now_ns() + g->wait_ms * 1000000LL : -1;
    pthread_t self = pthread_self();
    int rc = FENCE_OK;

    pthread_mutex_lock(&g->mu);
    fence_gate__entry *e = lookup_or_add(g, t->resource);
    if (e == NULL) {
        pthread_mutex_unlock(&g->mu);
        fence_gate__set_err(g, "out of memory adding resource \"%s\"",
                            fence_gate__show(t->resource));
        return FENCE_ENOMEM;
    }
    if (e->held && pthread_equal(e->holder, self)) {
        pthread_mutex_unlock(&g->mu);
        fence_gate__set_err(g, "this thread already holds \"%s\": commit or abort that txn "
                               "first", fence_gate__show(t->resource));
        return FENCE_ESTATE;
    }
    rc = fence_gate__wait_free(g, &e->cond, &e->held, deadline);
    if (rc != FENCE_OK) {
        pthread_mutex_unlock(&g->mu);
        fence_gate__set_err(g, "\"%s\" is still held by another writer after %lld ms",
                            fence_gate__show(t->resource), (long long)g->wait_ms);
        return rc;
    }
    t->mark_seen = e->mark;
    if (t->token < e->mark) {
        pthread_mutex_unlock(&g->mu);
        fence_gate__set_err(g, "stale token %llu for \"%s\": a write with token %llu was "
                               "already accepted",
                            (unsigned long long)t->token, fence_gate__show(t->resource),
                            (unsigned long long)t->mark_seen);
        return FENCE_STALE;
    }
    e->held = 1;
    e->holder = self;
    g->open_txns++;
    t->entry = e;
    pthread_mutex_unlock(&g->mu);
    return FENCE_OK;
}

int fence_gate__mem_end(fence_gate_txn *t, int commit)
{
    fence_gate *g = t->gate;
    fence_gate__entry *e = t->entry;
    pthread_mutex_lock(&g->mu);
    if (commit && t->token > e->mark) {
        e->mark = t->token;
    }
    e->held = 0;
    g->open_txns--;
    /* Broadcast: a waiter that wakes and finds its token stale leaves
     * without taking the resource, so every waiter must get a look. */
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&g->mu);
    return FENCE_OK;
}

int fence_gate__mem_high_water(fence_gate *g, const char *resource, uint64_t *mark)
{
    size_t n = strlen(resource);
    uint64_t h = hash_name(resource, n);
    pthread_mutex_lock(&g->mu);
    fence_gate__entry *e = lookup(g, resource, n, h);
    *mark = e != NULL ? e->mark : 0;
    pthread_mutex_unlock(&g->mu);
    return FENCE_OK;
}
