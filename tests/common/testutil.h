/* testutil.h -- shared helpers for the Check suites.  Every test talks to a
 * real server started by scripts/with-servers; a missing server fails the
 * test loudly, never skips it. */
#ifndef FENCE_TESTUTIL_H
#define FENCE_TESTUTIL_H
#include <check.h>
#include <stdint.h>

/* The value of an environment variable set by scripts/with-servers; fails
 * the running test with a clear message when it is missing. */
const char *tu_env(const char *name);

/* Milliseconds from CLOCK_MONOTONIC. */
int64_t tu_now_ms(void);
void tu_sleep_ms(int64_t ms);

/* A lease name unique to this process and call: "<base>-<pid>-<n>-<rand>". */
const char *tu_name(const char *base);

/* Run the suite with a TAP log when CK_TAP_LOG_FILE_NAME is set (run-suites
 * sets it) and return the process exit status. */
int tu_run(Suite *s);

#endif
