/* client.c -- opening and closing a client (the top of the core's layering:
 * nothing in the core calls it): the checks of the options every issuer
 * shares, the issuer the URL names (issuers.c), and closing with the leases
 * still open. */
#include "lease_internal.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_RENEW_BATCH 500
#define MAX_RENEW_BATCH 5000
#define MAX_TIMEOUT_MS 600000

void fence_client_options_init(fence_client_options *o)
{
    if (o != NULL) {
        memset(o, 0, sizeof *o);
    }
}

/* The options every issuer has. */
static fence_status check_common(fence_client *c, const fence_client_options *o)
{
    if (o->connect_timeout_ms < 0 || o->connect_timeout_ms > MAX_TIMEOUT_MS ||
        o->io_timeout_ms < 0 || o->io_timeout_ms > MAX_TIMEOUT_MS) {
        return fence__fail(c, FENCE_EINVAL, "timeouts must be 0 (default) to %d ms",
                           MAX_TIMEOUT_MS);
    }
    if (o->heartbeat_mode != FENCE_HEARTBEAT_THREAD && o->heartbeat_mode != FENCE_HEARTBEAT_MANUAL) {
        return fence__fail(c, FENCE_EINVAL, "heartbeat_mode must be FENCE_HEARTBEAT_THREAD or "
                           "FENCE_HEARTBEAT_MANUAL");
    }
    if (o->renew_batch < 0 || o->renew_batch > MAX_RENEW_BATCH) {
        return fence__fail(c, FENCE_EINVAL, "renew_batch must be 0 (default %d) to %d",
                           DEFAULT_RENEW_BATCH, MAX_RENEW_BATCH);
    }
    return FENCE_OK;
}

/* A new handle with its locks, options not yet read (*out is set even when o
 * is NULL, so that its message can be read), then its issuer opened. */
static fence_status client_new(fence_client **out, const fence_client_options *o,
                               const char *fn)
{
    fence_client *c = calloc(1, sizeof *c);
    if (c == NULL) {
        return fence__fail(NULL, FENCE_ENOMEM, "out of memory");
    }
    if (fence__cond_init_monotonic(&c->cond) != 0) {
        free(c);
        return fence__fail(NULL, FENCE_ENOMEM, "out of memory (a condition variable)");
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->hb_lock, NULL);
    c->hb_wake_us = INT64_MAX;
    c->ops = &fence__redis_issuer; /* until the URL names one: its url() for messages */
    *out = c;
    if (o == NULL) {
        return fence__fail(c, FENCE_EINVAL, "%s: options are NULL", fn);
    }
    const fence__issuer_ops *ops = NULL;
    fence_status st = fence__issuer_pick(c, o, &ops);
    if (st == FENCE_OK) {
        st = check_common(c, o);
    }
    if (st != FENCE_OK) {
        return st;
    }
    c->ops = ops;
    c->heartbeat_mode = o->heartbeat_mode;
    fence__iss_env env = {c, fence__errslot_get,
                          o->renew_batch ? o->renew_batch : DEFAULT_RENEW_BATCH};
    st = ops->open(&c->iss, o, &env);
    if (st == FENCE_OK) {
        c->ready = 1;
    }
    return st;
}

fence_status fence_client_open(fence_client **out, const fence_client_options *o)
{
    if (out == NULL) {
        return fence__fail(NULL, FENCE_EINVAL, "fence_client_open: out is NULL");
    }
    *out = NULL;
    fence_status st = client_new(out, o, "fence_client_open");
    if (st != FENCE_OK) {
        return st;
    }
    fence_client *c = *out;
    st = c->ops->start(c->iss, INT64_MAX);
    if (st == FENCE_OK) {
        fence__clear(c);
    }
    return st;
}

fence_status fence_client_open_url(fence_client **out, const char *url)
{
    fence_client_options o;
    fence_client_options_init(&o);
    if (url == NULL) {
        const char *env = getenv("FENCE_URL");
        if (env == NULL || env[0] == '\0') {
            env = getenv("FENCE_REDIS_URL");
        }
        url = env != NULL && env[0] != '\0' ? env : "redis://127.0.0.1:6379";
    }
    o.url = url;
    return fence_client_open(out, &o);
}

void fence_client_close(fence_client *c)
{
    if (c == NULL) {
        return;
    }
    fence__heartbeat_stop(c);
    for (;;) {
        pthread_mutex_lock(&c->lock);
        fence_lease *l = c->leases;
        pthread_mutex_unlock(&c->lock);
        if (l == NULL) {
            break;
        }
        fence_status st = fence_release(l); /* best effort; it unlinks and frees */
        if (st == FENCE_ECONN || st == FENCE_EAUTH) {
            /* Unreachable (the connection is down, not merely an ambiguous
             * answer): do not pay a timeout per lease; the rest expire by
             * their TTL. */
            int down = c->ops->down(c->iss);
            pthread_mutex_lock(&c->lock);
            c->offline = down || st == FENCE_EAUTH;
            pthread_mutex_unlock(&c->lock);
        }
    }
    if (c->iss != NULL) {
        c->ops->close(c->iss);
    }
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->hb_lock);
    pthread_cond_destroy(&c->cond);
    fence__clear(c);
    free(c);
}

const char *fence_client_url(const fence_client *c)
{
    return c != NULL && c->iss != NULL ? c->ops->url(c->iss) : "";
}

/* ---- for the asynchronous API ---------------------------------------------- */

fence_status fence__client_prepare(fence_client **out, const fence_client_options *o)
{
    *out = NULL;
    fence_status st = client_new(out, o, "fence_client_open");
    if (st == FENCE_OK) {
        fence__clear(*out);
    }
    return st;
}

void fence__client_close_offline(fence_client *c)
{
    if (c != NULL) {
        pthread_mutex_lock(&c->lock);
        c->offline = 1;
        pthread_mutex_unlock(&c->lock);
        fence_client_close(c);
    }
}
