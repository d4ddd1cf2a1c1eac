/* fuzz_pg_detail.c -- fence_pg__parse_stale (lib/pg): the DETAIL of a
 * 23Q01 error, as fence.sql (sql/postgres/) writes it,
 *     offered=33 highest=34 kind=table object=public.orders reason=older
 *     offered=34 highest=34 kind=resource object=jobs/42 reason=repeat holder=<32 hex>
 * (version 2 wrote no reason and no holder) parsed into a fence_stale, on
 * any text.
 *
 * Checks besides "no crash": the answer is 0 or -1; on 0 the text really
 * is that line: it starts with exactly "offered=<offered> highest=<highest>
 * kind=<table|resource> object=" printed back from what was parsed (so a
 * sign, a space or a leading zero in a number is never accepted), tokens
 * are <= FENCE_TOKEN_MAX, the object is NUL-terminated and taken from the
 * rest of the text, the reason is OLDER or REPEAT,
 * and the holder is "" or 32 lowercase hex digits.  A violation abort()s, which libFuzzer reports. */
#include "pg_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "fuzz_pg_detail: check failed: %s\n", #cond);  \
            abort();                                                       \
        }                                                                  \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *detail = malloc(size + 1);
    if (detail == NULL) {
        return 0;
    }
    memcpy(detail, data, size);
    detail[size] = '\0';

    fence_stale st;
    memset(&st, 0, sizeof st);
    int rc = fence_pg__parse_stale(detail, &st);
    CHECK(rc == 0 || rc == -1);
    if (rc == 0) {
        CHECK(st.kind == FENCE_OBJECT_TABLE || st.kind == FENCE_OBJECT_RESOURCE);
        CHECK(st.offered <= FENCE_TOKEN_MAX && st.highest <= FENCE_TOKEN_MAX);
        CHECK(memchr(st.object, '\0', sizeof st.object) != NULL);
        CHECK(memchr(st.holder, '\0', sizeof st.holder) != NULL);
        CHECK(st.reason == FENCE_STALE_OLDER || st.reason == FENCE_STALE_REPEAT);
        size_t hl = strlen(st.holder);
        CHECK(hl == 0 || hl == FENCE_HOLDER_LEN);
        for (size_t i = 0; i < hl; i++) {
            CHECK((st.holder[i] >= '0' && st.holder[i] <= '9') ||
                  (st.holder[i] >= 'a' && st.holder[i] <= 'f'));
        }
        char head[128];
        int n = snprintf(head, sizeof head, "offered=%llu highest=%llu kind=%s object=",
                         (unsigned long long)st.offered, (unsigned long long)st.highest,
                         st.kind == FENCE_OBJECT_TABLE ? "table" : "resource");
        CHECK(n > 0 && (size_t)n < sizeof head);
        CHECK(strncmp(detail, head, (size_t)n) == 0);
        /* The object comes from the rest of the text (possibly cut to
         * fit, possibly with line breaks or trailing space dropped). */
        const char *rest = detail + n;
        size_t olen = strlen(st.object);
        CHECK(olen <= strlen(rest));
        if (strchr(rest, '\n') == NULL && strchr(rest, '\r') == NULL) {
            CHECK(strncmp(rest, st.object, olen) == 0);
        }
    }
    free(detail);
    return 0;
}
