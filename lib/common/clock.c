/* clock.c -- the one monotonic clock every library measures time with. */
#include "common.h"

#include <errno.h>
#include <poll.h>
#include <time.h>

_Static_assert(FENCE_NAME_MAX == 512, "name.c's message says 512 bytes");
_Static_assert(FENCE_HOLDER_LEN == 32, "name.c's messages say 32 characters");

int64_t fence__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t fence__now_us(void)
{
    return fence__now_ns() / 1000;
}

void fence__sleep_us(int64_t us)
{
    if (us <= 0) {
        return;
    }
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int fence__cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0) {
        return -1;
    }
    int rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0) {
        rc = pthread_cond_init(cond, &attr);
    }
    pthread_condattr_destroy(&attr);
    return rc == 0 ? 0 : -1;
}

struct timespec fence__timespec_ns(int64_t at_ns)
{
    if (at_ns < 0) {
        at_ns = 0;
    }
    struct timespec ts = {(time_t)(at_ns / 1000000000LL), (long)(at_ns % 1000000000LL)};
    return ts;
}

int fence__wait_fd(int fd, short ev, int64_t deadline_us)
{
    for (;;) {
        int64_t left = deadline_us - fence__now_us();
        if (left <= 0) {
            return 0;
        }
        struct pollfd pfd = {.fd = fd, .events = ev};
        int n = poll(&pfd, 1, (int)((left + 999) / 1000));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        return n < 0 ? -1 : n > 0;
    }
}
