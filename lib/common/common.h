/* common.h -- helpers every fence library compiles in (not installed).
 *
 * Each library links its own copy of lib/common/ objects with hidden
 * visibility, so the checkers never depend on libfence.  Names start with
 * fence__.  Nothing here allocates or keeps state. */
#ifndef FENCE_COMMON_INTERNAL_H
#define FENCE_COMMON_INTERNAL_H

#include "fence_common.h"

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* ---- token.c: the one decimal grammar --------------------------------- */
/* Scan an unsigned decimal at s: one or more ASCII digits, no sign, no
 * space, no leading zero (a lone "0" is fine), value <= max.  On success
 * returns 0, sets *out and *end (the first byte after the digits); on
 * failure returns -1 and leaves *out alone. */
int fence__u64_scan(const char *s, uint64_t max, uint64_t *out, const char **end);
/* The whole of s[0..len) as such a decimal.  0 or -1. */
int fence__u64_parse(const char *s, size_t len, uint64_t max, uint64_t *out);
/* A fencing token: such a decimal in 1..FENCE_TOKEN_MAX.  0 or -1. */
int fence__token_parse(const char *s, size_t len, uint64_t *out);

/* ---- rule.c: the store rule, once for the C stores ----------------------
 * A resource's mark (highest admitted token, 0 = none, and the holder it
 * was admitted for, NULL or "" = none) admits TOKEN from HOLDER when it is
 * higher (the mark becomes token and holder), or equal from the same
 * holder (nothing changes); refuses a lower token (older) and an equal one
 * from another holder (repeat: the token was issued twice).  A row's stamp
 * compares tokens only: at least the stamp is admitted.  Every store runs
 * tests/common/rule_cases.tsv against its implementation. */
enum {
    FENCE__RULE_ADMIT = 0,  /* admitted, the mark unchanged */
    FENCE__RULE_RAISE = 1,  /* admitted, the mark becomes (token, holder) */
    FENCE__RULE_OLDER = 2,  /* refused: below the mark (reason=older) */
    FENCE__RULE_REPEAT = 3  /* refused: equal, another holder (reason=repeat) */
};
int fence__mark_rule(uint64_t mark, const char *mark_holder, uint64_t token, const char *holder);
/* FENCE__RULE_ADMIT or FENCE__RULE_OLDER. */
int fence__stamp_rule(uint64_t stamp, uint64_t token);
/* "older" or "repeat" for a refusal, NULL for an admission. */
const char *fence__rule_reason(int outcome);
/* Every outcome's name, as rule_cases.tsv spells it: "admit", "raise",
 * "older", "repeat" ("?" for anything else). */
const char *fence__rule_name(int outcome);

/* ---- name.c: lease and resource names ---------------------------------- */
enum {
    FENCE__NAME_ANY_BYTE = 0,  /* any byte but NUL */
    FENCE__NAME_PRINTABLE = 1  /* no control characters (0x00-0x1f, 0x7f) */
};
/* NULL when name is 1..FENCE_NAME_MAX bytes (and printable, when asked);
 * otherwise static text saying why not ("is empty", "is longer than 512
 * bytes", "contains a control character"); *bad_byte (optional) gets the
 * offset of a control character. */
const char *fence__name_problem(const char *name, int rules, size_t *bad_byte);

/* The one check for a holder id: exactly FENCE_HOLDER_LEN lowercase hex
 * digits.  h[0..len) (len from strnlen(h, FENCE_HOLDER_LEN + 1) for a C
 * string).  NULL when well formed, otherwise static text saying why not
 * ("is empty", "contains a character that is not a hex digit", "is
 * shorter than 32 characters", ...); a bad character is reported before a
 * bad length, and *bad_byte (optional) gets its offset. */
const char *fence__holder_problem(const char *h, size_t len, size_t *bad_byte);

/* ---- clock.c: the one monotonic clock ---------------------------------- */
int64_t fence__now_ns(void);
int64_t fence__now_us(void);
/* Sleep, resuming after signals, for us microseconds (<= 0: no-op). */
void fence__sleep_us(int64_t us);
/* A condition variable whose timed waits use CLOCK_MONOTONIC.  0 or -1. */
int fence__cond_init_monotonic(pthread_cond_t *cond);
/* Wait for fd to be ready for the poll(2) events ev before the monotonic
 * deadline_us, resuming after signals: 1 ready, 0 deadline passed, -1 error
 * (errno set). */
int fence__wait_fd(int fd, short ev, int64_t deadline_us);
/* The absolute CLOCK_MONOTONIC time at_ns as a timespec (for
 * pthread_cond_timedwait on such a condition variable). */
struct timespec fence__timespec_ns(int64_t at_ns);

/* ---- errmsg.c: the one error-message scheme ------------------------------
 * Every library keeps, per thread, the message of that thread's last failed
 * call and the handle it was about, in a slot of its own:
 *     static _Thread_local fence__errslot tl_err;
 * so that threads sharing a handle never read each other's message and the
 * libraries never overwrite each other's.  A message is read back only for
 * the handle it was written for ("" for any other). */
typedef struct fence__errslot {
    const void *handle;
    char msg[1024];
} fence__errslot;
/* Write a message about handle h into slot; returns status. */
int fence__err_set(fence__errslot *slot, const void *h, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int fence__err_vset(fence__errslot *slot, const void *h, int status, const char *fmt,
                    va_list ap) __attribute__((format(printf, 4, 0)));
/* Clear the slot's message if it is about h (a call on h succeeded). */
void fence__err_clear(fence__errslot *slot, const void *h);
/* The slot's message for h: "" when it is about another handle.  Never
 * NULL.  For h == NULL: the message of a call that had no handle. */
const char *fence__err_get(const fence__errslot *slot, const void *h);

#endif
