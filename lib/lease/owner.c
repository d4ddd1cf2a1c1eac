/* owner.c -- owner ids: FENCE_OWNER_BYTES (128 bits) from getrandom(), the
 * OS CSPRNG.  Never a weaker fallback: if the kernel cannot give us
 * randomness, acquiring fails (fail closed). */
#include "lease_internal.h"

#include <errno.h>
#include <sys/random.h>

fence_status fence__owner_id(char *hex)
{
    unsigned char raw[FENCE_OWNER_BYTES];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return FENCE_ESYS;
        }
        got += (size_t)n;
    }
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof raw; i++) {
        hex[2 * i] = digits[raw[i] >> 4];
        hex[2 * i + 1] = digits[raw[i] & 15];
    }
    hex[2 * sizeof raw] = '\0';
    return FENCE_OK;
}
