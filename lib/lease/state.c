/* state.c -- what a lease knows about itself, and the transitions the
 * heartbeat and the calling threads share: the checks every call makes,
 * a renewal's effect, and a lease becoming lost (with its callback). */
#include "lease_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

fence_status fence__check_client(const fence_client *c, const char *fn)
{
    if (c == NULL) {
        return fence__fail(NULL, FENCE_EINVAL, "%s: client is NULL", fn);
    }
    if (!c->ready) {
        return fence__fail(c, FENCE_ESTATE, "%s: this client failed to open (bad options); "
                           "close it", fn);
    }
    return FENCE_OK;
}

fence_status fence__check_name(const fence_client *c, const char *name)
{
    size_t bad = SIZE_MAX;
    const char *why = fence__name_problem(name, FENCE__NAME_PRINTABLE, &bad);
    if (why == NULL && c != NULL && c->rd.cl != NULL && name[0] == '}') {
        /* "<prefix>{}..." has an empty hash tag: each key of the lease
         * would hash whole, to a slot of its own (CROSSSLOT). */
        return fence__fail(c, FENCE_EINVAL, "lease name may not start with '}' in a Redis "
                           "Cluster (its keys would have an empty hash tag and land in "
                           "different slots)");
    }
    if (why == NULL) {
        return FENCE_OK;
    }
    if (bad != SIZE_MAX) {
        return fence__fail(c, FENCE_EINVAL, "lease name %s (byte %zu)", why, bad);
    }
    return fence__fail(c, FENCE_EINVAL, "lease name %s", why);
}

char *fence__key(const fence_client *c, const char *name, const char *suffix)
{
    size_t n = strlen(c->prefix) + strlen(name) + strlen(suffix) + 3;
    char *k = malloc(n);
    if (k != NULL) {
        snprintf(k, n, "%s{%s}%s", c->prefix, name, suffix);
    }
    return k;
}

int64_t fence__margin_us(int64_t ttl_ms)
{
    /* 1% of the TTL for clock drift between us and Redis, plus 2 ms. */
    return ttl_ms * 10 + 2000;
}

int64_t fence__valid_until(const fence_lease *l, int64_t sent_us)
{
    return sent_us + l->ttl_ms * 1000 - fence__margin_us(l->ttl_ms);
}

void fence__renew_ttl_arg(const fence_lease *l, char *buf, size_t size)
{
    snprintf(buf, size, "%s%" PRId64, l->has_info ? "-" : "", l->ttl_ms);
}

int64_t fence__retry_us(const fence_lease *l)
{
    int64_t r = l->renew_every_ms * 1000 / 4;
    return r < 10000 ? 10000 : r > 250000 ? 250000 : r;
}

int64_t fence__renew_at(const fence_lease *l)
{
    /* Within a quarter period of its renewal a lease rides along with a
     * pass: renewing a little early costs nothing and keeps passes few.
     * A retry after an unanswered renewal waits its whole delay. */
    return l->retrying ? l->next_renew_us : l->next_renew_us - l->renew_every_ms * 250;
}

void fence__lease_free(fence_lease *l)
{
    if (l != NULL) {
        free(l->name);
        free(l->owner_key);
        free(l->channel);
        free(l->info_key);
        free(l);
    }
}

void fence__unlink_locked(fence_lease *l)
{
    fence_client *c = l->c;
    if (l->prev != NULL) {
        l->prev->next = l->next;
    } else if (c->leases == l) {
        c->leases = l->next;
    }
    if (l->next != NULL) {
        l->next->prev = l->prev;
    }
    l->prev = l->next = NULL;
}

void fence__renewed_locked(fence_lease *l, int64_t sent_us)
{
    int64_t until = fence__valid_until(l, sent_us);
    if (until > l->valid_until_us) {
        l->valid_until_us = until;
    }
    l->next_renew_us = sent_us + l->renew_every_ms * 1000;
    l->retrying = 0;
    atomic_fetch_add(&l->c->m.renew_ok, 1);
}

/* ---- lists of leases ------------------------------------------------------ */

void fence__leasev_init(fence__leasev *a)
{
    a->v = a->small;
    a->n = 0;
    a->cap = sizeof a->small / sizeof a->small[0];
}

int fence__leasev_push(fence__leasev *a, fence_lease *l)
{
    if (a->n == a->cap) {
        size_t cap = a->cap < 64 ? 64 : a->cap * 2;
        fence_lease **v = a->v == a->small ? malloc(cap * sizeof *v)
                                           : realloc(a->v, cap * sizeof *v);
        if (v == NULL) {
            return -1;
        }
        if (a->v == a->small) {
            memcpy(v, a->small, a->n * sizeof *v);
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = l;
    return 0;
}

void fence__leasev_free(fence__leasev *a)
{
    if (a->v != a->small) {
        free(a->v);
    }
    fence__leasev_init(a);
}

/* ---- the lost transition ---------------------------------------------------- */

/* How many lost callbacks this thread is inside (fence_release() must not
 * wait for another thread's callback from inside one: two callbacks
 * releasing each other's leases would wait for each other forever). */
static _Thread_local int tl_in_callback;

int fence__in_callback(void)
{
    return tl_in_callback;
}

int fence__lose_locked(fence_lease *l, int reason, fence__leasev *q)
{
    if (l->state != FENCE__HELD) {
        return 0;
    }
    l->state = FENCE__LOST;
    l->lost_reason = reason; /* written once, here, under the lock */
    l->valid_until_us = 0;
    atomic_fetch_add(&l->c->m.lease_lost, 1);
    atomic_fetch_sub(&l->c->m.leases_held, 1);
    if (l->on_lost != NULL && fence__leasev_push(q, l) == 0) {
        /* Claimed now, under the lock, so a concurrent fence_release()
         * waits for the callback instead of freeing the lease under it. */
        l->cb_running = 1;
        l->cb_thread = pthread_self();
    }
    return 1;
}

/* Fire l's claimed callback (no lock held).  Frees l afterwards if it was
 * released from inside. */
static void fire_one(fence_lease *l)
{
    fence_client *c = l->c;
    int reason = l->lost_reason; /* written once, before l was queued */
    pthread_mutex_lock(&c->lock);
    /* Released between being marked lost and now (from another callback):
     * then its callback must not run. */
    int skip = l->on_lost == NULL || l->released;
    pthread_mutex_unlock(&c->lock);
    if (!skip) {
        tl_in_callback++;
        l->on_lost(l, reason, l->user);
        tl_in_callback--;
    }
    pthread_mutex_lock(&c->lock);
    l->cb_running = 0;
    int free_it = l->free_after_cb;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    if (free_it) {
        fence__lease_free(l);
    }
}

void fence__fire_lost(fence__leasev *q)
{
    for (size_t i = 0; i < q->n; i++) {
        fire_one(q->v[i]); /* may free it */
    }
    fence__leasev_free(q);
}
