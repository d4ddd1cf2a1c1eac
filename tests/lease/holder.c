/*
 * holder.c -- a lease holder in a process of its own, spawned by the core
 * suites for the multi-process cases.  Not a test by itself.
 *
 *   holder URL NAME TTL_MS
 *       Acquire NAME (waiting up to 10 s), print "token N", then hold it
 *       with the heartbeat thread (holder_info: $FENCE_TEST_HOLDER_INFO,
 *       if set).  On SIGTERM (or when the parent dies):
 *       release, print "released STATUS" and exit 0.  If the lease is lost:
 *       print "lost REASON" and exit 3.  kill -9 leaves the key to expire.
 *
 *   holder URL NAME TTL_MS CYCLES LOGFILE
 *       CYCLES times: acquire NAME (waiting up to 10 s), append
 *       "in PID TOKEN" to LOGFILE, pause ~1 ms, append "out PID TOKEN",
 *       release.  Then print "done" and exit 0.  The test reads LOGFILE to
 *       check that no two processes were ever inside at once.
 *
 * Exit status: 0 done, 2 a fence_* call failed (the line "error STATUS
 * MESSAGE" says which), 3 lease lost, 64 usage.
 */
#include "fence.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static atomic_int lost_reason = -1;

static void on_lost(fence_lease *lease, int reason, void *user)
{
    (void)lease;
    (void)user;
    atomic_store(&lost_reason, reason);
}

static int fail(fence_client *c, const char *what, int rc)
{
    printf("error %s %s: %s\n", fence_status_name(rc), what,
           c != NULL ? fence_client_errmsg(c) : "(no client)");
    fflush(stdout);
    return 2;
}

static void append_line(int fd, const char *tag, uint64_t token)
{
    char line[96];
    int n = snprintf(line, sizeof line, "%s %ld %" PRIu64 "\n", tag, (long)getpid(), token);
    /* O_APPEND and one short write: the line lands whole. */
    if (write(fd, line, (size_t)n) != n) {
        perror("holder: write log");
        exit(2);
    }
}

static int run_cycles(fence_client *c, const char *name, int64_t ttl, long cycles,
                      const char *log)
{
    int fd = open(log, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0) {
        perror("holder: open log");
        return 2;
    }
    for (long i = 0; i < cycles; i++) {
        fence_lease_options lo;
        fence_lease_options_init(&lo, ttl);
        lo.wait_ms = 10000;
        fence_lease *l = NULL;
        int rc = fence_acquire(c, name, &lo, &l);
        if (rc != FENCE_OK) {
            close(fd);
            return fail(c, "fence_acquire", rc);
        }
        uint64_t tok = fence_lease_token(l);
        append_line(fd, "in", tok);
        struct timespec pause = {0, 1000000L};
        nanosleep(&pause, NULL);
        append_line(fd, "out", tok);
        rc = fence_release(l);
        if (rc != FENCE_OK) {
            close(fd);
            return fail(c, "fence_release", rc);
        }
    }
    close(fd);
    printf("done\n");
    fflush(stdout);
    return 0;
}

static int run_hold(fence_client *c, const char *name, int64_t ttl, const sigset_t *sigs)
{
    fence_lease_options lo;
    fence_lease_options_init(&lo, ttl);
    lo.wait_ms = 10000;
    lo.on_lost = on_lost;
    lo.holder_info = getenv("FENCE_TEST_HOLDER_INFO"); /* test_holderinfo */
    fence_lease *l = NULL;
    int rc = fence_acquire(c, name, &lo, &l);
    if (rc != FENCE_OK) {
        return fail(c, "fence_acquire", rc);
    }
    printf("token %" PRIu64 "\n", fence_lease_token(l));
    fflush(stdout);
    for (;;) {
        struct timespec tick = {0, 20000000L};
        int sig = sigtimedwait(sigs, NULL, &tick);
        if (sig == SIGTERM || sig == SIGINT) {
            rc = fence_release(l);
            printf("released %s\n", fence_status_name(rc));
            fflush(stdout);
            return 0;
        }
        int reason = atomic_load(&lost_reason);
        if (reason >= 0) {
            printf("lost %s\n", fence_status_name(reason));
            fflush(stdout);
            fence_release(l);
            return 3;
        }
    }
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 6) {
        fprintf(stderr, "usage: holder URL NAME TTL_MS [CYCLES LOGFILE]\n");
        return 64;
    }
    /* Never outlive the test that spawned us: the parent's death is a
     * SIGTERM, which releases the lease like a normal stop. */
    pid_t parent = getppid();
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) {
        return 0;
    }
    /* Block the stop signals before the heartbeat thread exists, so that
     * only sigtimedwait() below sees them. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    int64_t ttl = strtoll(argv[3], NULL, 10);
    fence_client *c = NULL;
    int rc = fence_client_open_url(&c, argv[1]);
    if (rc != FENCE_OK) {
        rc = fail(c, "fence_client_open_url", rc);
        fence_client_close(c);
        return rc;
    }
    if (argc == 6) {
        rc = run_cycles(c, argv[2], ttl, strtol(argv[4], NULL, 10), argv[5]);
    } else {
        rc = run_hold(c, argv[2], ttl, &sigs);
    }
    fence_client_close(c);
    return rc;
}
