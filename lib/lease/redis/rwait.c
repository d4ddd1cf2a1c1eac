/* rwait.c -- waiting for a release: a subscription to the lease's release
 * channel ("<prefix>{NAME}:released", published by release.lua) on a
 * connection of its own, made before the waiter's first attempt. */
#include "rissuer.h"

#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

struct fence__waiter {
    fence__conn *sub;
};

/* "<prefix>{NAME}:released" (malloc'd), or NULL. */
static char *channel_of(const fence__issuer *ri, const char *name)
{
    size_t n = strlen(name);
    char *k = malloc(ri->prefix_len + n + 12);
    if (k != NULL) {
        memcpy(k, ri->prefix, ri->prefix_len);
        k[ri->prefix_len] = '{';
        memcpy(k + ri->prefix_len + 1, name, n);
        memcpy(k + ri->prefix_len + 1 + n, "}:released", 11);
    }
    return k;
}

fence__waiter *fence__ri_wait_open(fence__issuer *ri, const char *name, int64_t deadline_us)
{
    fence__redis *rd = &ri->rd;
    int64_t timeout_ms = (deadline_us - fence__now_us()) / 1000;
    char *channel = channel_of(ri, name);
    fence__waiter *w = calloc(1, sizeof *w);
    if (channel == NULL || w == NULL || timeout_ms < 1) {
        free(channel);
        free(w);
        return NULL;
    }
    if (rd->cl != NULL) {
        /* Cluster: PUBLISH reaches every node; subscribe on the node of
         * the channel's slot (the lease's). */
        int node = fence__cluster_node_of(rd, fence__key_slot(channel, strlen(channel)),
                                          timeout_ms);
        if (node >= 0) {
            fence__cluster_open(rd, node, &w->sub, timeout_ms);
        }
    } else {
        fence__conn_open(rd, &w->sub, timeout_ms);
    }
    const char *argv[2] = {"SUBSCRIBE", channel};
    redisReply *r = w->sub != NULL ? fence__tr_command(w->sub, 2, argv, NULL) : NULL;
    free(channel);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        if (r != NULL) {
            freeReplyObject(r);
        }
        fence__ri_wait_close(w);
        return NULL;
    }
    freeReplyObject(r);
    return w;
}

int fence__ri_wait(fence__waiter *w, int64_t deadline_us)
{
    /* A message, and whatever else is already there. */
    void *reply = NULL;
    int64_t us = deadline_us - fence__now_us();
    int rc = fence__tr_wait(w->sub, us > 0 ? us : 0, &reply);
    while (rc == 1) {
        freeReplyObject(reply);
        if (fence__tr_wait(w->sub, 0, &reply) != 1) {
            return 1;
        }
    }
    return rc;
}

void fence__ri_wait_close(fence__waiter *w)
{
    if (w != NULL) {
        fence__conn_drop(&w->sub);
        free(w);
    }
}
