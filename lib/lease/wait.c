/* wait.c -- acquiring with a deadline.  The waiter subscribes to the
 * lease's release channel *before* each attempt (so no release can slip
 * between a failed attempt and the wait), and sleeps until a release
 * message, the holder's TTL running out, or the deadline.  Where pub/sub is
 * not available it polls with jittered exponential backoff. */
#include "lease_internal.h"

#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* A uniformly random value in [lo, hi] for retry and wake-up times (not
 * for secrets). */
static int64_t jitter(int64_t lo, int64_t hi)
{
    static _Thread_local unsigned int seed;
    if (seed == 0) {
        if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed || seed == 0) {
            seed = (unsigned int)fence__now_us() | 1u;
        }
    }
    if (hi <= lo) {
        return lo;
    }
    uint64_t r = ((uint64_t)rand_r(&seed) << 31) ^ (uint64_t)rand_r(&seed);
    return lo + (int64_t)(r % (uint64_t)(hi - lo + 1));
}

#define POLL_MIN_US 2000
#define POLL_MAX_US 200000
/* With pub/sub, still look again at least this often in case a message
 * was lost (a reconnect, a release by another tool). */
#define SUB_SAFETY_US 1000000

/* Subscribe on a new connection; NULL when that is not possible. */
static fence__conn *subscribe(fence_client *c, const char *channel, int64_t timeout_ms)
{
    fence__conn *sub = NULL;
    if (c->rd.cl != NULL) {
        /* Cluster: PUBLISH reaches every node; subscribe on the node of
         * the channel's slot (the lease's). */
        int node = fence__cluster_node_of(&c->rd, fence__key_slot(channel, strlen(channel)),
                                          timeout_ms);
        if (node < 0 || fence__cluster_open(&c->rd, node, &sub, timeout_ms) != FENCE_OK) {
            return NULL;
        }
    } else if (fence__conn_open(&c->rd, &sub, timeout_ms) != FENCE_OK) {
        return NULL;
    }
    const char *argv[2] = {"SUBSCRIBE", channel};
    redisReply *r = fence__tr_command(sub, 2, argv, NULL);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        if (r != NULL) {
            freeReplyObject(r);
        }
        fence__conn_drop(&sub);
        return NULL;
    }
    freeReplyObject(r);
    return sub;
}

/* Wait up to us for a message on sub (and take whatever else is already
 * there).  1 message(s) arrived, 0 timeout, -1 the connection failed. */
static int wait_message(fence__conn *sub, int64_t us)
{
    void *reply = NULL;
    int rc = fence__tr_wait(sub, us, &reply);
    while (rc == 1) {
        freeReplyObject(reply);
        if (fence__tr_wait(sub, 0, &reply) != 1) {
            return 1;
        }
    }
    return rc;
}

enum { ATTEMPT_MIN_MS = 50 };

fence_status fence__acquire_wait(fence_client *c, const char *name,
                                 const fence_lease_options *o, fence_lease **out)
{
    int64_t deadline = fence__now_us() + o->wait_ms * 1000;
    char *channel = fence__key(c, name, ":released");
    if (channel == NULL) {
        return fence__fail(c, FENCE_ENOMEM, "out of memory");
    }
    fence__conn *sub = subscribe(c, channel, o->wait_ms);
    int64_t backoff = POLL_MIN_US;
    fence_status st;
    for (;;) {
        int64_t pttl = -1;
        int64_t left_ms = (deadline - fence__now_us()) / 1000;
        /* Each attempt's I/O is bounded by what is left of the wait, but
         * never below ATTEMPT_MIN_MS: the last attempt near the deadline
         * would otherwise time out on a busy machine and report an
         * unreachable Redis instead of a lease still held. */
        st = fence__try_once(c, name, o, left_ms > ATTEMPT_MIN_MS ? left_ms : ATTEMPT_MIN_MS, out,
                             &pttl);
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
            sleep_us = pttl * 1000 + jitter(500, 3000);
        }
        if (sub != NULL) {
            if (sleep_us > SUB_SAFETY_US) {
                sleep_us = SUB_SAFETY_US;
            }
            if (wait_message(sub, sleep_us) < 0) {
                fence__conn_drop(&sub); /* fall back to polling from now on */
            }
        } else {
            int64_t j = jitter(backoff / 2, backoff);
            fence__sleep_us(j < sleep_us ? j : sleep_us);
            backoff = backoff * 2 > POLL_MAX_US ? POLL_MAX_US : backoff * 2;
        }
    }
    fence__conn_drop(&sub);
    free(channel);
    if (st == FENCE_BUSY) {
        atomic_fetch_add(&c->m.acquire_timeouts, 1);
        st = fence__fail(c, FENCE_TIMEOUT, "lease '%s' still held by another owner after %lld ms",
                         name, (long long)o->wait_ms);
    }
    return st;
}
