/* async_lease.c -- the leases of the asynchronous API: what an acquire's,
 * a renewal's and a release's replies do (the Redis issuer says what a reply
 * means, the core's state machine what that does to the lease), and the
 * timers the caller's loop drives -- renewals when the core says they are
 * due, the core's lost sweep (its callbacks fired in the fire phase). */
#include "async_internal.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The give-back release of an acquisition too few replicas acknowledged
 * came back (or failed): the acquire fails with the blocking API's message. */
static void given_back(fence__aop *rel, void *reply)
{
    fence__aop *op = rel->parent;
    fence_client *c = op->a->c;
    fence__issuer *ri = op->a->ri;
    fence_lease *l = rel->free_l;
    rel->free_l = NULL;
    if (reply != NULL) {
        freeReplyObject(reply);
    }
    op->st = fence__fail(c, FENCE_EREPLICAS, "%lld of %d replicas acknowledged lease '%s' "
                         "within %" PRId64 " ms; %s", op->acked < 0 ? 0 : op->acked,
                         ri->min_replicas, l->il.name, ri->replica_timeout_ms,
                         reply != NULL ? "it was released" : "it could not be released "
                         "(it expires by its TTL)");
    snprintf(op->msg, sizeof op->msg, "%s", fence_client_errmsg(c));
    fence__lease_free(l);
    op->keep = 0;
    fence__async_finish(op->a, op);
}

/* Fewer replicas than asked acknowledged l (granted token): give it back
 * (compare-and-delete) before the acquire fails, as the blocking one does. */
static void give_back(fence__aop *op, fence_lease *l, uint64_t token)
{
    fence__aop *rel = fence__aop_new(op->a, FENCE__RELEASE);
    if (rel == NULL) {
        op->st = fence__fail(op->a->c, FENCE_ENOMEM, "out of memory");
        snprintf(op->msg, sizeof op->msg, "%s", fence_client_errmsg(op->a->c));
        fence__lease_free(l);
        return;
    }
    l->il.token = token;
    snprintf(l->il.value, sizeof l->il.value, "%s:%" PRIu64, l->il.holder, token);
    rel->nargs = fence__ri_release_args(op->a->ri, &l->il, rel->args, &rel->nkeys);
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
    fence__grant g = {0, 0, 0, -1};
    fence_status st = fence__ri_grant_reply(op->a->ri, reply, "acquire", l->il.name, &g);
    freeReplyObject(reply);
    op->pttl_ms = g.pttl_ms;
    if (st == FENCE_OK && g.granted && op->a->ri->min_replicas > 0 &&
        op->acked < op->a->ri->min_replicas) {
        give_back(op, l, g.token);
        return;
    }
    op->st = fence__acquired(l, st, &g, op->sent_us); /* frees l unless granted */
    if (op->st == FENCE_OK) {
        op->out = l;
        op->msg[0] = '\0';
    } else {
        snprintf(op->msg, sizeof op->msg, "%s", fence_client_errmsg(c));
    }
}

void fence__async_free_lease(fence_async *a, fence_lease *l)
{
    fence__async_forget(a, l);
    fence__release_end(l); /* now, or at its running callback's end */
}

void fence__async_released(fence__aop *op, void *reply)
{
    fence_client *c = op->a->c;
    fence_lease *l = op->l;
    op->l = NULL;
    op->free_l = l;
    if (reply == NULL || l == NULL) {
        if (reply != NULL) {
            freeReplyObject(reply);
        }
        return; /* failed; st and msg say why (the key expires by its TTL) */
    }
    int deleted = 0;
    fence_status st = fence__ri_release_reply(op->a->ri, reply, &deleted);
    freeReplyObject(reply);
    op->st = fence__released(l, op->was_held, 1, st, deleted, 0);
    snprintf(op->msg, sizeof op->msg, "%s", op->st == FENCE_OK ? "" : fence_client_errmsg(c));
}

/* ---- renewals ---------------------------------------------------------------- */

/* renew.lua's reply for op's lease (NULL: unanswered): the core's rule. */
static void renewed(fence__aop *op, void *reply)
{
    fence_async *a = op->a;
    fence_lease *l = op->l;
    int res = reply != NULL ? fence__ri_renew_reply(a->ri, reply) : -1;
    if (reply != NULL) {
        freeReplyObject(reply);
    }
    if (l == NULL) { /* released meanwhile */
        return;
    }
    fence_client *c = a->c;
    pthread_mutex_lock(&c->lock);
    fence__renewed_locked(l, res, op->sent_us, fence__now_us(), &a->lost);
    pthread_mutex_unlock(&c->lock);
}

/* A renewal of l onto the connection (l->in_pass set: one at a time). */
static void renew(fence_async *a, fence_lease *l)
{
    fence__aop *op = fence__aop_new(a, FENCE__RENEW);
    fence_client *c = a->c;
    pthread_mutex_lock(&c->lock);
    if (op == NULL) {
        l->in_pass = 0; /* out of memory: the next timer tries again */
        pthread_mutex_unlock(&c->lock);
        return;
    }
    memcpy(op->value, l->il.value, sizeof op->value);
    pthread_mutex_unlock(&c->lock);
    op->l = l;
    op->nargs = fence__ri_renew_args(&l->il, op->value, op->args, &op->nkeys);
    op->on_reply = renewed;
    fence__async_submit(a, op);
}

void fence__async_timers(fence_async *a, int64_t now)
{
    fence_client *c = a->c;
    enum { MAX_PER_STEP = 64 };
    for (;;) {
        fence_lease *due[MAX_PER_STEP];
        size_t n = 0;
        pthread_mutex_lock(&c->lock);
        fence__sweep_locked(c, now, 0, &a->lost); /* its renewals are in flight: in_pass */
        for (fence_lease *l = c->leases; l != NULL && n < MAX_PER_STEP; l = l->next) {
            if (fence__due_locked(l, now)) {
                l->in_pass = 1;
                due[n++] = l;
            }
        }
        pthread_mutex_unlock(&c->lock);
        for (size_t i = 0; i < n; i++) {
            renew(a, due[i]);
        }
        if (n < MAX_PER_STEP) {
            return;
        }
    }
}

int64_t fence__async_lease_due(const fence_async *a)
{
    fence_client *c = a->c;
    int64_t due = INT64_MAX;
    pthread_mutex_lock(&c->lock);
    for (const fence_lease *l = c->leases; l != NULL; l = l->next) {
        int64_t t = fence__look_at_locked(l);
        due = t < due ? t : due;
    }
    pthread_mutex_unlock(&c->lock);
    return due;
}
