/* wait.c -- acquiring with a deadline.  The waiter is made *before* the
 * first attempt (the issuer's: a subscription to the lease's releases, a
 * LISTEN, a watch), so no release can slip between a failed attempt and the
 * wait; it then sleeps until a release, the holder's TTL running out, or the
 * deadline.  Where the issuer cannot wake us it polls with jittered
 * exponential backoff. */
#include "lease_internal.h"

#include <stdlib.h>
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
/* With a waiter, still look again at least this often in case a wake-up
 * was lost (a reconnect, a release by another tool). */
#define SAFETY_US 1000000
/* Each attempt may take at least this long, whatever is left of the wait:
 * the last attempt near the deadline would otherwise time out on a busy
 * machine and report an unreachable server instead of a lease still held. */
#define ATTEMPT_MIN_US 50000

fence_status fence__acquire_wait(fence_client *c, const char *name,
                                 const fence_lease_options *o, fence_lease **out)
{
    int64_t deadline = fence__now_us() + o->wait_ms * 1000;
    fence__waiter *w = c->ops->wait_open(c->iss, name, deadline);
    int64_t backoff = POLL_MIN_US;
    fence_status st;
    for (;;) {
        int64_t pttl = -1;
        int64_t now = fence__now_us();
        st = fence__try_once(c, name, o, deadline - now > ATTEMPT_MIN_US ? deadline
                                                                          : now + ATTEMPT_MIN_US,
                             out, &pttl);
        if (st != FENCE_BUSY) {
            break;
        }
        now = fence__now_us();
        if (now >= deadline) {
            break;
        }
        int64_t sleep_us = deadline - now;
        if (pttl > 0 && pttl * 1000 + 1000 < sleep_us) {
            /* The holder's key expires then unless renewed; spread the
             * waiters a little so they do not arrive at once. */
            sleep_us = pttl * 1000 + jitter(500, 3000);
        }
        if (w != NULL) {
            if (sleep_us > SAFETY_US) {
                sleep_us = SAFETY_US;
            }
            if (c->ops->wait(w, now + sleep_us) < 0) {
                c->ops->wait_close(w); /* fall back to polling from now on */
                w = NULL;
            }
        } else {
            int64_t j = jitter(backoff / 2, backoff);
            fence__sleep_us(j < sleep_us ? j : sleep_us);
            backoff = backoff * 2 > POLL_MAX_US ? POLL_MAX_US : backoff * 2;
        }
    }
    if (w != NULL) {
        c->ops->wait_close(w);
    }
    if (st == FENCE_BUSY) {
        atomic_fetch_add(&c->m.acquire_timeouts, 1);
        st = fence__fail(c, FENCE_TIMEOUT, "lease '%s' still held by another owner after %lld ms",
                         name, (long long)o->wait_ms);
    }
    return st;
}
