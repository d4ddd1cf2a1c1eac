#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

const char *tu_env(const char *name)
{
    const char *v = getenv(name);
    ck_assert_msg(v != NULL && v[0] != '\0',
                  "%s is not set: run the tests with 'make test' (scripts/with-servers "
                  "starts the servers they need)", name);
    return v;
}

int64_t tu_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void tu_sleep_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

const char *tu_name(const char *base)
{
    static _Thread_local char buf[256];
    static int counter;
    unsigned int r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) {
        r = (unsigned int)time(NULL);
    }
    snprintf(buf, sizeof buf, "%s-%ld-%d-%08x", base, (long)getpid(),
             __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED), r);
    return buf;
}

int tu_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    const char *tap = getenv("CK_TAP_LOG_FILE_NAME");
    if (tap != NULL && tap[0] != '\0') {
        srunner_set_tap(sr, tap);
    }
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
