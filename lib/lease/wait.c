/* wait.c -- acquiring with a deadline.  The waiter subscribes to the
 * lease's release channel *before* each attempt (so no release can slip
 * between a failed attempt and the wait), and sleeps until a release
 * message, the holder's TTL running out, or the deadline.  Where pub/sub is
 * not available it polls with jittered exponential backoff. */
#include "lease_internal.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <string.h>

#define POLL_MIN_US 2000
#define POLL_MAX_US 200000
/* With pub/sub, still look again at least this often in case a message
 * was lost (a reconnect, a release by another tool). */
#define SUB_SAFETY_US 1000000

/* Subscribe on a new connection; NULL when that is not possible. */
static redisContext *subscribe(fence_client *c, const char *channel, int64_t timeout_ms)
{
    redisContext *sub = NULL;
    if (fence__conn_open(c, &sub, timeout_ms) != FENCE_OK) {
        return NULL;
    }
    const char *argv[2] = {"SUBSCRIBE", channel};
    redisReply *r = redisCommandArgv(sub, 2, argv, NULL);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        if (r != NULL) {
            freeReplyObject(r);
        }
        redisFree(sub);
        return NULL;
    }
    freeReplyObject(r);
    return sub;
}

/* Wait up to us for a message on sub.  1 message(s) arrived, 0 timeout,
 * -1 the connection failed. */
static int wait_message(redisContext *sub, int64_t us)
{
    void *reply = NULL;
    int got = 0;
    /* Drain what is already buffered. */
    while (redisGetReplyFromReader(sub, &reply) == REDIS_OK && reply != NULL) {
        freeReplyObject(reply);
        reply = NULL;
        got = 1;
    }
    if (got) {
        return 1;
    }
    int64_t end = fence__now_us() + us;
    for (;;) {
        int64_t left = end - fence__now_us();
        if (left <= 0) {
            return 0;
        }
        struct pollfd pfd = {.fd = sub->fd, .events = POLLIN};
        int n = poll(&pfd, 1, (int)((left + 999) / 1000));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return -1;
        }
        if (n == 0) {
            return 0;
        }
        if (redisBufferRead(sub) != REDIS_OK) {
            return -1;
        }
        while (redisGetReplyFromReader(sub, &reply) == REDIS_OK && reply != NULL) {
            freeReplyObject(reply);
            reply = NULL;
            got = 1;
        }
        if (sub->err) {
            return -1;
        }
        if (got) {
            return 1;
        }
    }
}

fence_status fence__acquire_wait(fence_client *c, const char *name,
                                 const fence_lease_options *o, fence_lease **out)
{
    int64_t deadline = fence__now_us() + o->wait_ms * 1000;
    char *channel = fence__key(c, name, ":released");
    if (channel == NULL) {
        return fence__fail(c, FENCE_ENOMEM, "out of memory");
    }
    redisContext *sub = subscribe(c, channel, o->wait_ms);
    int64_t backoff = POLL_MIN_US;
    fence_status st;
    for (;;) {
        int64_t pttl = -1;
        int64_t left_ms = (deadline - fence__now_us()) / 1000;
        st = fence__try_once(c, name, o, left_ms > 1 ? left_ms : 1, out, &pttl);
        if (st != FENCE_BUSY) {
            break;
        }
        int64_t now = fence__now_us();
        if (now >= deadline) {
            break;
        }
        int64_t sleep_us = deadline - now;
        if (pttl > 0 && pttl * 1000 + 1000 < sleep_us) {
            /* The holder's key expires then unless renewed; spread the
             * waiters a little so they do not arrive at once. */
            sleep_us = pttl * 1000 + fence__jitter(500, 3000);
        }
        if (sub != NULL) {
            if (sleep_us > SUB_SAFETY_US) {
                sleep_us = SUB_SAFETY_US;
            }
            if (wait_message(sub, sleep_us) < 0) {
                redisFree(sub); /* fall back to polling from now on */
                sub = NULL;
            }
        } else {
            int64_t j = fence__jitter(backoff / 2, backoff);
            fence__sleep_us(j < sleep_us ? j : sleep_us);
            backoff = backoff * 2 > POLL_MAX_US ? POLL_MAX_US : backoff * 2;
        }
    }
    if (sub != NULL) {
        redisFree(sub);
    }
    free(channel);
    if (st == FENCE_BUSY) {
        atomic_fetch_add(&c->m.acquire_timeouts, 1);
        st = fence__fail(c, FENCE_TIMEOUT, "lease '%s' still held by another owner after %lld ms",
                         name, (long long)o->wait_ms);
    }
    return st;
}
