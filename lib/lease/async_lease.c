/* async_lease.c -- the leases of the asynchronous API: what an acquire's
 * and a release's replies do (lease.c's pieces: fence__acquire_reply,
 * fence__lease_publish), and the timers the caller's loop drives --
 * renewals when fence__renew_at() says, a lease lost when its validity
 * ran out (state.c's transition and callback, fired in the fire phase). */
#include "async_internal.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The give-back release of an acquisition too few replicas acknowledged
 * came back (or failed): the acquire fails with lease.c's message. */
static void given_back(fence__aop *rel, void *reply)
{
    fence__aop *op = rel->parent;
    fence_client *c = op->a->c;
    fence_lease *l = rel->free_l;
    rel->free_l = NULL;
    if (reply != NULL) {
        freeReplyObject(reply);
    }
    op->st = fence__fail(c, FENCE_EREPLICAS, "%lld of %d replicas acknowledged lease '%s' "
                         "within %" PRId64 " ms; %s", op->acked < 0 ? 0 : op->acked,
                         c->min_replicas, l->name, c->replica_timeout_ms,
                         reply != NULL ? "it was released" : "it could not be released "
                         "(it expires by its TTL)");
    snprintf(op->msg, sizeof op->msg, "%s", fence_client_errmsg(c));
    fence__lease_free(l);
    op->keep = 0;
    fence__async_finish(op->a, op);
}

/* Fewer replicas than asked acknowledged l (granted token): give it back
 * (compare-and-delete) before the acquire fails, as fence__try_once does. */
static void give_back(fence__aop *op, fence_lease *l, uint64_t token)
{
    fence__aop *rel = fence__aop_new(op->a, FENCE__RELEASE);
    if (rel == NULL) {
        op->st = fence__fail(op->a->c, FENCE_ENOMEM, "out of memory");
        snprintf(op->msg, sizeof op->msg, "%s", fence_client_errmsg(op->a->c));
        fence__lease_free(l);
        return;
    }
    l->token = token;
    snprintf(l->value, sizeof l->value, "%s:%" PRIu64, op->acq.owner, token);
    rel->nargs = fence__release_args(l, rel->args, &rel->nkeys);
    rel->free_l = l; /* the arguments point into it: freed when it is done */
    rel->parent = op;
    rel->on_reply = given_back;
    op->keep = 1;
    fence__async_submit(op->a, rel);
}

void fence__async_acquired(fence__aop *op, void *reply)
{
    fence_client *c = op->a->c;
    fence_lease *l = op->l;
    op->l = NULL;
    if (reply == NULL) { /* failed; st and msg say why */
        fence__lease_free(l);
        return;
    }
    uint64_t token = 0;
    int64_t behind = 0;
    op->st = fence__acquire_reply(c, l->name, reply, &token, &behind, &op->pttl_ms);
    if (op->st != FENCE_OK) {
        snprintf(op->msg, sizeof op->msg, "%s", fence_client_errmsg(c));
        fence__lease_free(l);
        return;
    }
    l->clock_behind_us = behind;
    if (c->min_replicas > 0 && op->acked < c->min_replicas) {
        give_back(op, l, token);
        return;
    }
    fence__lease_publish(l, op->acq.owner, token, op->sent_us);
    op->out = l;
    op->msg[0] = '\0';
}

void fence__async_unlink(fence_lease *l, int *was_held, int *contact)
{
    fence_client *c = l->c;
    pthread_mutex_lock(&c->lock);
    l->released = 1; /* a lost callback not yet started will not run */
    fence__unlink_locked(l);
    *was_held = l->state == FENCE__HELD;
    int lost_reason = *was_held ? 0 : l->lost_reason;
    if (*was_held) {
        /* No callback for a lease its user releases; stop renewing it. */
        l->state = FENCE__LOST;
        atomic_fetch_sub(&c->m.leases_held, 1);
    }
    pthread_mutex_unlock(&c->lock);
    /* A lease lost because Redis went unanswered may still own its key:
     * compare-and-delete is always safe (fence_release's rule). */
    *contact = *was_held || lost_reason == FENCE_ECONN;
}

void fence__async_free_lease(fence_async *a, fence_lease *l)
{
    fence__async_forget(a, l);
    pthread_mutex_lock(&l->c->lock);
    int now = !l->cb_running; /* else its callback's end frees it (state.c) */
    if (!now) {
        l->free_after_cb = 1;
    }
    pthread_mutex_unlock(&l->c->lock);
    if (now) {
        fence__lease_free(l);
    }
}

void fence__async_released(fence__aop *op, void *reply)
{
    fence_client *c = op->a->c;
    fence_lease *l = op->l;
    op->l = NULL;
    op->free_l = l;
    redisReply *r = reply;
    if (r == NULL) {
        return; /* failed; st and msg say why (the key expires by its TTL) */
    }
    const char *name = l != NULL ? l->name : "?";
    if (r->type != REDIS_REPLY_INTEGER) {
        op->st = fence__fail(c, FENCE_EPROTO, "%s: unexpected reply to release", c->rd.url.display);
    } else if (!op->was_held) {
        op->st = fence__fail(c, FENCE_LOST, "lease '%s' had already been lost", name);
    } else if (r->integer == 1) {
        op->st = FENCE_OK;
        atomic_fetch_add(&c->m.lease_released, 1);
    } else {
        op->st = fence__fail(c, FENCE_LOST, "lease '%s' was lost before release; the "
                             "current owner's key was left alone", name);
        atomic_fetch_add(&c->m.lease_lost, 1);
    }
    snprintf(op->msg, sizeof op->msg, "%s", op->st == FENCE_OK ? "" : fence_client_errmsg(c));
    freeReplyObject(r);
}

/* ---- renewals ---------------------------------------------------------------- */

/* renew.lua's reply for op's lease (fence_renew's rules, under c->lock). */
static void renewed(fence__aop *op, void *reply)
{
    fence_async *a = op->a;
    fence_lease *l = op->l;
    redisReply *r = reply;
    if (l == NULL) { /* released meanwhile */
        if (r != NULL) {
            freeReplyObject(r);
        }
        return;
    }
    fence_client *c = a->c;
    int ok = r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    int refused = r != NULL && !ok;
    int64_t now = fence__now_us();
    pthread_mutex_lock(&c->lock);
    l->in_pass = 0;
    if (l->state == FENCE__HELD) {
        if (refused) {
            fence__lose_locked(l, FENCE_LOST, &a->lost); /* expired or taken */
        } else if (l->valid_until_us <= now) {
            fence__lose_locked(l, FENCE_ECONN, &a->lost); /* answered too late, or not */
        } else if (ok) {
            fence__renewed_locked(l, op->sent_us);
        } else {
            l->retrying = 1;
            l->next_renew_us = now + fence__retry_us(l);
            if (l->next_renew_us > l->valid_until_us) {
                l->next_renew_us = l->valid_until_us;
            }
        }
    }
    pthread_mutex_unlock(&c->lock);
    if (!ok) {
        atomic_fetch_add(&c->m.renew_failed, 1);
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
}

/* A renewal of l onto the connection (l->in_pass set: one at a time). */
static void renew(fence_async *a, fence_lease *l)
{
    fence__aop *op = fence__aop_new(a, FENCE__RENEW);
    if (op == NULL) {
        return; /* out of memory: tried again at the next timer */
    }
    fence_client *c = a->c;
    pthread_mutex_lock(&c->lock);
    memcpy(op->value, l->value, sizeof op->value);
    l->in_pass = 1;
    pthread_mutex_unlock(&c->lock);
    fence__renew_ttl_arg(l, op->ttl, sizeof op->ttl);
    op->l = l;
    op->nkeys = fence__renew_args(l, op->value, op->ttl, op->args);
    op->nargs = op->nkeys + 2;
    op->on_reply = renewed;
    fence__async_submit(a, op);
}

void fence__async_timers(fence_async *a, int64_t now)
{
    fence_client *c = a->c;
    fence__leasev due;
    fence__leasev_init(&due);
    pthread_mutex_lock(&c->lock);
    for (fence_lease *l = c->leases; l != NULL; l = l->next) {
        if (l->state != FENCE__HELD) {
            continue;
        }
        if (l->valid_until_us <= now) {
            /* heartbeat.c's sweep: unanswered means Redis was unreachable. */
            fence__lose_locked(l, l->retrying || l->in_pass ? FENCE_ECONN : FENCE_LOST,
                               &a->lost);
        } else if (!l->in_pass && fence__renew_at(l) <= now) {
            fence__leasev_push(&due, l); /* out of memory: the next timer */
        }
    }
    pthread_mutex_unlock(&c->lock);
    for (size_t i = 0; i < due.n; i++) {
        renew(a, due.v[i]);
    }
    fence__leasev_free(&due);
}

int64_t fence__async_lease_due(const fence_async *a)
{
    fence_client *c = a->c;
    int64_t due = INT64_MAX;
    pthread_mutex_lock(&c->lock);
    for (const fence_lease *l = c->leases; l != NULL; l = l->next) {
        if (l->state != FENCE__HELD) {
            continue;
        }
        int64_t t = l->in_pass ? l->valid_until_us : fence__renew_at(l);
        if (l->valid_until_us < t) {
            t = l->valid_until_us;
        }
        due = t < due ? t : due;
    }
    pthread_mutex_unlock(&c->lock);
    return due;
}
