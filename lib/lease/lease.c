/* lease.c -- one acquire attempt, renew, release, and what a lease tells
 * about itself: the blocking calls, each the issuer's answer put through
 * state.c's state machine. */
#include "lease_internal.h"

#include <stdio.h>

fence_status fence__try_once(fence_client *c, const char *name, const fence_lease_options *o,
                             int64_t deadline_us, fence_lease **out, int64_t *pttl_ms)
{
    *out = NULL;
    fence_lease *l = NULL;
    fence_status st = fence__lease_new(c, name, o, &l);
    if (st != FENCE_OK) {
        return st;
    }
    fence__grant g = {0, 0, 0, -1};
    atomic_fetch_add(&c->m.acquire_attempts, 1);
    int64_t sent = fence__now_us();
    st = c->ops->acquire(c->iss, &l->il, l->il.has_info ? o->holder_info : NULL, deadline_us, &g);
    *pttl_ms = g.pttl_ms;
    st = fence__acquired(l, st, &g, sent); /* frees l unless granted */
    if (st == FENCE_OK) {
        *out = l;
    }
    return st;
}

/* ---- renew ---------------------------------------------------------------- */

fence_status fence_renew(fence_lease *l)
{
    if (l == NULL) {
        return fence__fail(NULL, FENCE_EINVAL, "fence_renew: lease is NULL");
    }
    fence_client *c = l->c;
    char msg[FENCE_NAME_MAX + 128];
    snprintf(msg, sizeof msg, "lease '%s' was lost", l->il.name);

    /* Before: held and valid, or lost now (its validity ran out). */
    fence__lostq lost = FENCE__LOSTQ_INIT;
    pthread_mutex_lock(&c->lock);
    while (l->in_pass) {
        pthread_cond_wait(&c->cond, &c->lock); /* one renewal of a lease at a time */
    }
    int was_lost = l->state != FENCE__HELD;
    int lost_now = !was_lost && fence__lose_expired_locked(l, fence__now_us(), 0, &lost);
    if (!was_lost && !lost_now) {
        l->in_pass = 1;
    }
    pthread_mutex_unlock(&c->lock);
    if (lost_now) {
        atomic_fetch_add(&c->m.renew_failed, 1);
        snprintf(msg, sizeof msg, "lease '%s' was lost: its validity ran out before this "
                 "renewal", l->il.name);
        fence__fire_lost(&lost); /* may free l */
        return fence__fail(c, FENCE_LOST, "%s", msg);
    }
    if (was_lost) {
        return fence__fail(c, FENCE_LOST, "%s", msg);
    }

    fence__ilease *il = &l->il;
    int res = -1;
    int64_t sent = fence__now_us();
    fence_status st = c->ops->renew(c->iss, &il, 1, FENCE__CHAN_CALLER, INT64_MAX, &res, &sent);

    pthread_mutex_lock(&c->lock);
    int reason = l->state != FENCE__HELD ? -1 : 0; /* lost meanwhile (the sweep said so) */
    int ok = fence__renewed_locked(l, st == FENCE_OK ? res : -1, sent, fence__now_us(), &lost);
    if (reason == 0 && l->state != FENCE__HELD) {
        reason = l->lost_reason;
    }
    pthread_cond_broadcast(&c->cond); /* in_pass cleared */
    pthread_mutex_unlock(&c->lock);

    if (ok) {
        return FENCE_OK;
    }
    if (reason == 0) {
        /* not answered; still held until its validity runs out */
        return st != FENCE_OK ? st : fence__fail(c, FENCE_ECONN, "lease '%s': no answer to its "
                                                 "renewal", l->il.name);
    }
    if (reason == FENCE_LOST) {
        snprintf(msg, sizeof msg, "lease '%s' was lost: the owner key expired or holds "
                 "another owner", l->il.name);
    } else if (reason == FENCE_ECONN) {
        snprintf(msg, sizeof msg, "lease '%s' was lost: %s did not answer before its "
                 "validity ran out", l->il.name, c->ops->url(c->iss));
    }
    fence__fire_lost(&lost); /* may free l */
    return fence__fail(c, FENCE_LOST, "%s", msg);
}

/* ---- release -------------------------------------------------------------- */

fence_status fence_release(fence_lease *l)
{
    if (l == NULL) {
        return fence__fail(NULL, FENCE_EINVAL, "fence_release: lease is NULL");
    }
    fence_client *c = l->c;
    int was_held = 0, ask = 0, deleted = 0, retried = 0;
    fence__release_begin(l, 1, &was_held, &ask);
    fence_status st = FENCE_OK;
    if (ask) {
        st = c->ops->release(c->iss, &l->il, INT64_MAX, &deleted, &retried);
    }
    st = fence__released(l, was_held, ask, st, deleted, retried);
    fence__release_end(l);
    return st;
}

/* ---- what a lease tells ------------------------------------------------------ */

uint64_t fence_lease_token(const fence_lease *l)
{
    if (l == NULL) {
        return 0;
    }
    pthread_mutex_lock(&l->c->lock);
    uint64_t t = l->il.token;
    pthread_mutex_unlock(&l->c->lock);
    return t;
}

int64_t fence_lease_clock_behind_us(const fence_lease *l)
{
    if (l == NULL) {
        return 0;
    }
    pthread_mutex_lock(&l->c->lock);
    int64_t b = l->clock_behind_us;
    pthread_mutex_unlock(&l->c->lock);
    return b;
}

const char *fence_lease_holder(const fence_lease *l)
{
    return l != NULL ? l->il.holder : "";
}

const char *fence_lease_name(const fence_lease *l)
{
    return l != NULL ? l->il.name : "";
}

const char *fence_lease_owner(const fence_lease *l)
{
    return l != NULL ? l->il.value : "";
}

fence_client *fence_lease_client(const fence_lease *l)
{
    return l != NULL ? l->c : NULL;
}

int fence_lease_lost(const fence_lease *l)
{
    if (l == NULL) {
        return 1;
    }
    pthread_mutex_lock(&l->c->lock);
    int lost = l->state != FENCE__HELD || l->valid_until_us <= fence__now_us();
    pthread_mutex_unlock(&l->c->lock);
    return lost;
}

int64_t fence_lease_valid_ms(const fence_lease *l)
{
    if (l == NULL) {
        return 0;
    }
    pthread_mutex_lock(&l->c->lock);
    int64_t left = l->state == FENCE__HELD ? l->valid_until_us - fence__now_us() : 0;
    pthread_mutex_unlock(&l->c->lock);
    return left > 0 ? left / 1000 : 0;
}
