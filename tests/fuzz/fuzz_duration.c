/* fuzz_duration.c -- cli__parse_duration (cli/args.c) and
 * fence__name_problem (lib/common/name.c) on the same text.
 *
 * Checks besides "no crash": a parsed duration is within 0..max_ms and a
 * refusal always says why; a name is accepted exactly when it is
 * 1..FENCE_NAME_MAX bytes (without control characters, when asked), and
 * the offset of a reported control character points at one. */
#include "cli.h"
#include "common.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "fuzz_duration: check failed: %s\n", #cond);   \
            abort();                                                       \
        }                                                                  \
    } while (0)

static void duration(const char *s, int64_t max_ms)
{
    int64_t ms = -1;
    const char *why = NULL;
    if (cli__parse_duration(s, max_ms, &ms, &why) == 0) {
        CHECK(ms >= 0 && ms <= max_ms);
        /* A duration starts with a digit or a decimal point. */
        CHECK((s[0] >= '0' && s[0] <= '9') || s[0] == '.');
    } else {
        CHECK(why != NULL && why[0] != '\0');
        CHECK(ms == -1);
    }
}

static int is_control(unsigned char ch)
{
    return ch < 0x20 || ch == 0x7f;
}

static void name(const char *s, int rules)
{
    size_t bad = SIZE_MAX;
    const char *why = fence__name_problem(s, rules, &bad);
    size_t n = strlen(s);
    int has_control = 0;
    for (size_t i = 0; i < n && i <= FENCE_NAME_MAX; i++) {
        has_control |= is_control((unsigned char)s[i]);
    }
    int want_ok = n >= 1 && n <= FENCE_NAME_MAX &&
                  !(rules == FENCE__NAME_PRINTABLE && has_control);
    CHECK((why == NULL) == want_ok);
    if (why != NULL && strcmp(why, "contains a control character") == 0) {
        CHECK(rules == FENCE__NAME_PRINTABLE);
        CHECK(bad < n && is_control((unsigned char)s[bad]));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s == NULL) {
        return 0;
    }
    memcpy(s, data, size);
    s[size] = '\0';

    duration(s, INT64_MAX);
    duration(s, CLI_KILL_AFTER_MAX_MS);
    duration(s, CLI_DEFAULT_TTL_MS);
    duration(s, 0);
    name(s, FENCE__NAME_ANY_BYTE);
    name(s, FENCE__NAME_PRINTABLE);

    free(s);
    return 0;
}
