/* clock.c -- monotonic time and non-secret jitter. */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

int64_t fence__now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
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

int64_t fence__jitter(int64_t lo, int64_t hi)
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
