/* reissue.c -- fence_lease_reissue(): self-healing after a regression.  A
 * store has seen a higher token than the lease's although the lease is
 * still held (the counter fell behind: a failover, a restart); one call of
 * acquire.lua's 'r' operation raises the counter past the store's highest
 * token and gives the lease a fresh token, only while it is still held. */
#include "lease_internal.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Claim l for the round trip (c->lock): wait out a heartbeat pass that
 * includes it, then mark it in_pass so the heartbeat leaves its value
 * alone.  FENCE_LOST when it is no longer held. */
static fence_status claim(fence_lease *l)
{
    fence_client *c = l->c;
    pthread_mutex_lock(&c->lock);
    while (l->in_pass) {
        pthread_cond_wait(&c->cond, &c->lock);
    }
    int held = l->state == FENCE__HELD && l->valid_until_us > fence__now_us();
    if (held) {
        l->in_pass = 1;
    }
    pthread_mutex_unlock(&c->lock);
    return held ? FENCE_OK : fence__fail(c, FENCE_LOST, "lease '%s' was lost", l->name);
}

/* The script's answer: FENCE_OK with *token and *behind_us, FENCE_LOST
 * ({0}), FENCE_ECLOCK, or FENCE_EPROTO. */
static fence_status reissue_reply(fence_lease *l, const redisReply *r, uint64_t *token,
                                  int64_t *behind_us)
{
    fence_client *c = l->c;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        return fence__fail(c, FENCE_EPROTO, "%s: unexpected reply to reissue", c->rd.url.display);
    }
    if (r->element[0]->integer == 0) {
        return FENCE_LOST;
    }
    return fence__issued(c, r, "reissue", l->name, token, behind_us);
}

/* Send the 'r' operation for l (claimed) with this floor. */
static fence_status reissue_send(fence_lease *l, uint64_t floor, uint64_t *token,
                                 int64_t *behind_us)
{
    fence_client *c = l->c;
    char *counter = fence__key(c, l->name, ":token");
    if (counter == NULL) {
        return fence__fail(c, FENCE_ENOMEM, "out of memory");
    }
    char f[24], jump[24], limit[24], idle[24];
    snprintf(f, sizeof f, "%" PRIu64, floor);
    const char *mode = fence__mode_args(c, jump, limit, idle);
    const char *args[10] = {l->owner_key, counter, "r",  l->holder, l->value,
                            mode,         jump,    limit, idle,      f};
    fence__eval_opts io;
    fence__issue_init(c, &io);
    io.min_replicas = 0; /* the gate is acquire's */
    redisReply *r = NULL;
    fence_status st = fence__eval_cmd(&c->rd, FENCE__ACQUIRE, 2, 10, args, 0, NULL, &io,
                                      (void **)&r);
    free(counter);
    if (st == FENCE_OK) {
        st = reissue_reply(l, r, token, behind_us);
        freeReplyObject(r);
    }
    return st;
}

fence_status fence_lease_reissue(fence_lease *l, uint64_t store_highest, uint64_t *new_token)
{
    if (l == NULL) {
        return fence__fail(NULL, FENCE_EINVAL, "fence_lease_reissue: lease is NULL");
    }
    fence_client *c = l->c;
    if (store_highest >= FENCE_TOKEN_MAX) {
        return fence__fail(c, FENCE_EINVAL, "fence_lease_reissue: store_highest %" PRIu64
                           " leaves no higher token (at most 2^63-2)", store_highest);
    }
    fence_status st = claim(l);
    if (st != FENCE_OK) {
        return st;
    }
    uint64_t token = 0;
    int64_t behind_us = 0;
    st = reissue_send(l, store_highest, &token, &behind_us);
    fence__leasev lost;
    fence__leasev_init(&lost);
    pthread_mutex_lock(&c->lock);
    l->in_pass = 0;
    if (st == FENCE_OK) {
        l->token = token;
        l->clock_behind_us = behind_us;
        snprintf(l->value, sizeof l->value, "%s:%" PRIu64, l->holder, token);
    } else if (st == FENCE_LOST) {
        fence__lose_locked(l, FENCE_LOST, &lost);
    }
    pthread_cond_broadcast(&c->cond); /* in_pass cleared */
    pthread_mutex_unlock(&c->lock);
    if (st == FENCE_LOST) {
        char msg[FENCE_NAME_MAX + 96];
        snprintf(msg, sizeof msg, "lease '%s' was lost: the owner key expired or holds "
                 "another owner", l->name);
        fence__fire_lost(&lost); /* may free l */
        return fence__fail(c, FENCE_LOST, "%s", msg);
    }
    if (st != FENCE_OK) {
        return st;
    }
    atomic_fetch_add(&c->m.token_regressions, 1);
    if (new_token != NULL) {
        *new_token = token;
    }
    fence__clear(c);
    return FENCE_OK;
}
