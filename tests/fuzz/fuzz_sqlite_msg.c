/* fuzz_sqlite_msg.c -- fence_sqlite__parse_message (lib/sqlite): the text
 * of sqlite3_errmsg() after a refused write, as fence's triggers and
 * fence_stale() write it, e.g.
 *     fence:stale table "orders": token 3 is older than 5 (write rejected)
 *     fence:stale resource: write rejected
 *     fence:notoken table "orders": no fencing token on this connection; ...
 *     fence:einval resource: the name must be text of 1..512 bytes with no NUL
 * mapped to FENCE_STALE / FENCE_ENOTOKEN / FENCE_EINVAL / FENCE_EDB, on any
 * text.
 *
 * Checks besides "no crash": the status is one of those four, STALE
 * only for a "fence:stale" message, ENOTOKEN only for "fence:notoken" and
 * EINVAL only for "fence:einval";
 * on STALE the kind is a known one, the strings are NUL-terminated, the
 * tokens are <= FENCE_TOKEN_MAX, and a token reported is really in the
 * text as "token N " / "than N " with N printed back from the value (so a
 * sign, a space or a leading zero is never accepted).  A violation
 * abort()s, which libFuzzer reports. */
#include "sqlite_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "fuzz_sqlite_msg: check failed: %s\n", #cond); \
            abort();                                                       \
        }                                                                  \
    } while (0)

/* Whether "<word><value> " occurs in msg. */
static int mentions(const char *msg, const char *word, uint64_t value)
{
    char needle[64];
    snprintf(needle, sizeof needle, "%s%llu ", word, (unsigned long long)value);
    return strstr(msg, needle) != NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *msg = malloc(size + 1);
    if (msg == NULL) {
        return 0;
    }
    memcpy(msg, data, size);
    msg[size] = '\0';

    fence_stale st;
    memset(&st, 0, sizeof st);
    fence_status rc = fence_sqlite__parse_message(msg, &st);
    CHECK(rc == FENCE_STALE || rc == FENCE_ENOTOKEN || rc == FENCE_EINVAL || rc == FENCE_EDB);
    if (rc == FENCE_STALE) {
        CHECK(strncmp(msg, "fence:stale", 11) == 0);
        CHECK(st.kind == FENCE_OBJECT_UNKNOWN || st.kind == FENCE_OBJECT_TABLE ||
              st.kind == FENCE_OBJECT_RESOURCE);
        CHECK(memchr(st.object, '\0', sizeof st.object) != NULL);
        CHECK(memchr(st.holder, '\0', sizeof st.holder) != NULL);
        CHECK(st.offered <= FENCE_TOKEN_MAX && st.highest <= FENCE_TOKEN_MAX);
        if (st.offered != 0) {
            CHECK(mentions(msg, "token ", st.offered));
        }
        if (st.highest != 0) {
            CHECK(mentions(msg, "than ", st.highest));
        }
    } else if (rc == FENCE_ENOTOKEN) {
        CHECK(strncmp(msg, "fence:notoken", 13) == 0);
    } else if (rc == FENCE_EINVAL) {
        CHECK(strncmp(msg, "fence:einval ", 13) == 0);
    }
    free(msg);
    return 0;
}
