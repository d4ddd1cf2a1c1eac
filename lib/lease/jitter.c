/* jitter.c -- non-secret jitter for retry and wake-up times. */
#include "lease_internal.h"

#include <stdlib.h>
#include <sys/random.h>

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
