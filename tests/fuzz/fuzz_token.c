/* fuzz_token.c -- the one decimal grammar (lib/common/token.c):
 * fence__u64_scan, fence__u64_parse and fence__token_parse.
 *
 * Each answer is compared with a reference written from the grammar's
 * words (common.h): one or more ASCII digits, no leading zero unless the
 * number is "0", value <= max; a token is also >= 1.  An accepted text
 * must print back (%llu) to the same bytes.  A violation abort()s, which
 * libFuzzer reports.  fence__u64_parse and fence__token_parse get the
 * fuzzer's own buffer, unterminated, so a read past its end is caught. */
#include "common.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "fuzz_token: check failed: %s\n", #cond);      \
            abort();                                                       \
        }                                                                  \
    } while (0)

#define SENTINEL 0xdeadbeefcafef00dULL

static const uint64_t maxes[] = {
    UINT64_MAX, FENCE_TOKEN_MAX, FENCE_TOKEN_MAX - 1, 1000000, 65535, 10, 9, 1, 0,
};

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The reference: is s[0..n) an accepted decimal <= max?  Compares the
 * text with max's decimal text, so no arithmetic is shared with token.c. */
static int grammar_ok(const char *s, size_t n, uint64_t max)
{
    if (n == 0) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(s[i])) {
            return 0;
        }
    }
    if (s[0] == '0' && n > 1) {
        return 0;
    }
    char m[24];
    size_t mn = (size_t)snprintf(m, sizeof m, "%llu", (unsigned long long)max);
    return n < mn || (n == mn && memcmp(s, m, n) <= 0);
}

/* An accepted value prints back to exactly the text it came from. */
static void round_trips(const char *s, size_t n, uint64_t v, uint64_t max)
{
    char buf[24];
    int len = snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    CHECK(v <= max);
    CHECK(len > 0 && (size_t)len == n && memcmp(buf, s, n) == 0);
}

static void scan(const char *s, uint64_t max)
{
    uint64_t v = SENTINEL;
    const char *end = NULL;
    size_t run = 0;
    while (is_digit(s[run])) {
        run++;
    }
    int rc = fence__u64_scan(s, max, &v, &end);
    CHECK(rc == 0 || rc == -1);
    CHECK(rc == (grammar_ok(s, run, max) ? 0 : -1));
    if (rc == 0) {
        CHECK(end == s + run); /* stops at the first non-digit, no sooner */
        round_trips(s, run, v, max);
    } else {
        CHECK(v == SENTINEL); /* *out left alone */
    }
}

static void parse(const char *s, size_t n, uint64_t max)
{
    uint64_t v = SENTINEL;
    int rc = fence__u64_parse(s, n, max, &v);
    CHECK(rc == 0 || rc == -1);
    CHECK(rc == (grammar_ok(s, n, max) ? 0 : -1));
    if (rc == 0) {
        round_trips(s, n, v, max);
    } else {
        CHECK(v == SENTINEL);
    }
}

static void token(const char *s, size_t n)
{
    uint64_t v = SENTINEL;
    int rc = fence__token_parse(s, n, &v);
    int want = grammar_ok(s, n, FENCE_TOKEN_MAX) && !(n == 1 && s[0] == '0');
    CHECK(rc == (want ? 0 : -1));
    if (rc == 0) {
        CHECK(v >= 1);
        round_trips(s, n, v, FENCE_TOKEN_MAX);
    } else {
        CHECK(v == SENTINEL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *raw = (const char *)data;
    char *s = malloc(size + 1);
    if (s == NULL) {
        return 0;
    }
    memcpy(s, data, size);
    s[size] = '\0';

    for (size_t i = 0; i < sizeof maxes / sizeof maxes[0]; i++) {
        scan(s, maxes[i]);
        parse(raw, size, maxes[i]);
    }
    token(raw, size);
    /* NULL and empty text are refused, never read. */
    CHECK(fence__u64_parse(NULL, size, UINT64_MAX, &(uint64_t){0}) == -1);
    CHECK(fence__token_parse(raw, 0, &(uint64_t){0}) == -1);

    free(s);
    return 0;
}
