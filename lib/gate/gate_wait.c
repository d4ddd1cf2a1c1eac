/* gate_wait.c -- waiting for a held resource (in memory) or for the
 * gate's write connection (persistent): a condition variable on the
 * monotonic clock, up to a deadline. */
#include "gate_internal.h"

#include <errno.h>

int64_t fence_gate__deadline(int64_t wait_ms)
{
    return wait_ms > 0 ? fence__now_ns() + wait_ms * 1000000LL : -1;
}

fence_status fence_gate__wait_free(pthread_mutex_t *mu, pthread_cond_t *cond, const int *busy,
                                   int64_t deadline_ns)
{
    while (*busy) {
        if (deadline_ns < 0) {
            return FENCE_TIMEOUT;
        }
        struct timespec ts = fence__timespec_ns(deadline_ns);
        int rc = pthread_cond_timedwait(cond, mu, &ts);
        if (rc == ETIMEDOUT && *busy) {
            return FENCE_TIMEOUT;
        }
    }
    return FENCE_OK;
}
