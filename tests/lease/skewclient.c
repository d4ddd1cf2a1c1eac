/*
 * skewclient.c -- a lease holder for test_skew, run under the clock shim
 * (tests/common/clockshim.h) with its CLOCK_MONOTONIC at another rate: the
 * library measures a lease's validity with that clock.  Not a test by
 * itself.
 *
 *   skewclient PORT NAME TTL_MS
 *
 * Acquires NAME on redis://127.0.0.1:PORT (manual heartbeat, the lease
 * never renewed: as a holder whose renewals stopped), prints
 * "token N", then watches until the library reports the lease lost: at
 * each sample it first reads the owner key itself (a connection of its
 * own), then asks the library whether the lease is still valid.  A sample
 * where the key no longer held this lease's owner value but the lease
 * was still valid after that is an overlap: the library vouched for a
 * lease Redis had already let go.  The first one prints
 * "overlap VALID_MS" at once (so the test can take the lease meanwhile);
 * at the end "lost overlaps=K overlap_ms=MS after_ms=A", MS the real
 * time from the first overlap to the last, A the real time from the
 * acquire to the loss (real: the raw system call, past the shim).
 *
 * Exit status: 0 done, 2 a call failed (a line "error ..." says which),
 * 3 not lost within 30 s, 64 usage.
 */
#include "fence.h"

#include <hiredis/hiredis.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

static int64_t real_ms(void)
{
    struct timespec ts;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: skewclient PORT NAME TTL_MS\n");
        return 64;
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
    int port = atoi(argv[1]);
    const char *name = argv[2];
    int64_t ttl = strtoll(argv[3], NULL, 10);
    char url[64], key[600];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    snprintf(key, sizeof key, "fence:{%s}", name);

    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url;
    /* No thread: its waits are absolute CLOCK_MONOTONIC deadlines, which
     * the shim does not translate. */
    o.heartbeat_mode = FENCE_HEARTBEAT_MANUAL;
    fence_client *c = NULL;
    int rc = fence_client_open(&c, &o);
    if (rc != FENCE_OK) {
        printf("error %s open: %s\n", fence_status_name(rc), fence_client_errmsg(c));
        return 2;
    }
    struct timeval tv = {5, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (r == NULL || r->err != 0) {
        printf("error connect %s\n", r != NULL ? r->errstr : "out of memory");
        return 2;
    }
    fence_lease_options lo;
    fence_lease_options_init(&lo, ttl);
    lo.no_heartbeat = 1;
    fence_lease *l = NULL;
    int64_t t0 = real_ms();
    rc = fence_acquire(c, name, &lo, &l);
    if (rc != FENCE_OK) {
        printf("error %s acquire: %s\n", fence_status_name(rc), fence_client_errmsg(c));
        return 2;
    }
    printf("token %" PRIu64 "\n", fence_lease_token(l));
    fflush(stdout);

    long overlaps = 0;
    int64_t first = 0, last = 0;
    while (!fence_lease_lost(l)) {
        if (real_ms() - t0 > 30000) {
            printf("error not lost within 30 s\n");
            return 3;
        }
        redisReply *rep = redisCommand(r, "GET %s", key);
        if (rep == NULL) {
            printf("error GET: %s\n", r->errstr);
            return 2;
        }
        int ours = rep->type == REDIS_REPLY_STRING && strcmp(rep->str, fence_lease_owner(l)) == 0;
        freeReplyObject(rep);
        int64_t valid = fence_lease_valid_ms(l); /* read after the key */
        if (!ours && valid > 0) {
            last = real_ms();
            if (overlaps++ == 0) {
                first = last;
                printf("overlap %" PRId64 "\n", valid);
                fflush(stdout);
            }
        }
        usleep(2000);
    }
    printf("lost overlaps=%ld overlap_ms=%" PRId64 " after_ms=%" PRId64 "\n", overlaps,
           last - first, real_ms() - t0);
    fflush(stdout);
    fence_release(l);
    redisFree(r);
    fence_client_close(c);
    return 0;
}
