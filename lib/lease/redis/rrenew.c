/* rrenew.c -- renewing many leases on the heartbeat's own connection, in one
 * pipelined round trip per pass: one server here (renew_batch.lua calls of
 * renew_batch leases each, all appended before any reply is read), a
 * cluster in hbcluster.c.  Never past the pass's deadline (the earliest
 * validity the heartbeat keeps: a lease whose validity runs out while we
 * wait must be reported lost on time). */
#include "rissuer.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The leases of batch b, in ls[lo .. lo + *k). */
static size_t batch_range(size_t per, size_t n, size_t b, size_t *k)
{
    size_t lo = b * per;
    *k = n - lo < per ? n - lo : per;
    return lo;
}

/* Append one EVALSHA (or EVAL) renew_batch per batch, none read yet.
 * argv and lens have room for one batch. */
static fence_status send_batches(fence__issuer *ri, fence__ilease *const *ls, size_t n,
                                 int use_sha, const char **argv, size_t *lens)
{
    fence__redis *rd = &ri->rd;
    size_t per = (size_t)ri->env.renew_batch;
    for (size_t b = 0; b < (n + per - 1) / per; b++) {
        size_t k, lo = batch_range(per, n, b, &k);
        char nk[16];
        snprintf(nk, sizeof nk, "%zu", k);
        argv[0] = use_sha ? "EVALSHA" : "EVAL";
        argv[1] = use_sha ? rd->sha[FENCE__RENEW_BATCH] : rd->script[FENCE__RENEW_BATCH];
        lens[1] = use_sha ? 40 : rd->script_len[FENCE__RENEW_BATCH];
        argv[2] = nk;
        for (size_t i = 0; i < k; i++) {
            const fence__ilease *l = ls[lo + i];
            argv[3 + i] = FENCE__RKEYS(l)->owner;
            argv[3 + k + 2 * i] = l->value;
            argv[3 + k + 2 * i + 1] = FENCE__RKEYS(l)->ttl;
        }
        size_t argc = 3 + 3 * k;
        for (size_t i = 0; i < argc; i++) {
            if (i != 1) {
                lens[i] = strlen(argv[i]);
            }
        }
        if (fence__tr_append(ri->hb, (int)argc, argv, lens) != 0) {
            /* The batches already appended must never be sent: their
             * replies would be taken for later ones. */
            fence__conn_drop(&ri->hb);
            return fence__rd_fail(rd, FENCE_ENOMEM, "out of memory");
        }
    }
    return FENCE_OK;
}

/* Read one reply per batch into results; *noscript when a batch was
 * answered NOSCRIPT. */
static fence_status read_replies(fence__issuer *ri, size_t n, int *results, int *noscript)
{
    fence__redis *rd = &ri->rd;
    size_t per = (size_t)ri->env.renew_batch;
    fence_status st = FENCE_OK;
    for (size_t b = 0; b < (n + per - 1) / per; b++) {
        size_t k, lo = batch_range(per, n, b, &k);
        redisReply *r = NULL;
        if (fence__tr_reply(ri->hb, (void **)&r) != 0) {
            st = fence__rd_fail(rd, FENCE_ECONN, "%s: heartbeat connection failed: %s",
                                rd->url.display, ri->hb->errstr);
            fence__conn_drop(&ri->hb);
            return st;
        }
        if (r->type == REDIS_REPLY_ARRAY && r->elements == k) {
            for (size_t i = 0; i < k; i++) {
                redisReply *e = r->element[i];
                results[lo + i] = e->type == REDIS_REPLY_INTEGER && e->integer == 1;
            }
        } else if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
            *noscript = 1;
        } else {
            st = fence__rd_fail(rd, FENCE_EPROTO, "%s: heartbeat: unexpected reply: %.200s",
                                rd->url.display, r->type == REDIS_REPLY_ERROR ? r->str : "");
        }
        freeReplyObject(r);
    }
    return st;
}

/* Send every batch, all appended before any reply is read: one round
 * trip.  Returns FENCE_OK or the connection error; *noscript when the
 * caller must resend with EVAL. */
static fence_status round_trip(fence__issuer *ri, fence__ilease *const *ls, size_t n,
                               int *results, int use_sha, int *noscript)
{
    size_t per = (size_t)ri->env.renew_batch;
    const char **argv = malloc((3 + 3 * per) * sizeof *argv);
    size_t *lens = malloc((3 + 3 * per) * sizeof *lens);
    fence_status st = FENCE_OK;
    *noscript = 0;
    if (argv == NULL || lens == NULL) {
        st = fence__rd_fail(&ri->rd, FENCE_ENOMEM, "out of memory");
    } else {
        for (size_t i = 0; i < n; i++) {
            results[i] = -1;
        }
        st = send_batches(ri, ls, n, use_sha, argv, lens);
    }
    if (st == FENCE_OK) {
        st = read_replies(ri, n, results, noscript);
    }
    if (st != FENCE_OK) {
        *noscript = 0;
    }
    free(argv);
    free(lens);
    return st;
}

fence_status fence__ri_renew_hb(fence__issuer *ri, fence__ilease *const *ls, size_t n,
                                int64_t deadline_us, int *results, int64_t *sent_us)
{
    fence__redis *rd = &ri->rd;
    if (rd->cl != NULL) {
        return fence__hb_cluster(ri, ls, n, results, deadline_us, sent_us);
    }
    int64_t bound_ms = (deadline_us - fence__now_us()) / 1000;
    if (bound_ms < 1) {
        bound_ms = 1;
    }
    fence_status st = fence__conn_ensure(rd, &ri->hb, &ri->hb_ever, bound_ms);
    if (st != FENCE_OK) {
        return st;
    }
    bound_ms = (deadline_us - fence__now_us()) / 1000;
    fence__conn_timeout(ri->hb, bound_ms < 1 ? 1 : bound_ms < rd->io_timeout_ms ? bound_ms
                                                                                : rd->io_timeout_ms);
    *sent_us = fence__now_us();
    int use_sha = rd->sha[FENCE__RENEW_BATCH][0] != '\0';
    int noscript = 0;
    st = round_trip(ri, ls, n, results, use_sha, &noscript);
    if (noscript) {
        st = round_trip(ri, ls, n, results, 0, &noscript);
    }
    return st;
}
