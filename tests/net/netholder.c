/*
 * netholder.c -- the lease holder of the network fault suites (tests/net),
 * which run it inside a network namespace of their own.  Not a test by
 * itself.  Every time it prints is CLOCK_MONOTONIC in milliseconds (three
 * decimals), the clock the library measures validity on, which every
 * process on the machine shares (network namespaces do not change it): so
 * the suite can compare one holder's times with another's and with the
 * moments it cut the network.
 *
 *   netholder now
 *       Print the time.  The suites' own clock.
 *
 *   netholder pttl IP PORT KEY...
 *       For each KEY, "KEY BEFORE PTTL AFTER": the key's PTTL, asked
 *       between the times BEFORE and AFTER, so that its expiry on Redis
 *       lies within [BEFORE + PTTL, AFTER + PTTL + 1].  PTTL -2: no key.
 *
 *   netholder gone PID SECONDS
 *       Print the time PID exits (a pidfd becomes readable then: the
 *       moment it is a zombie, not when it is reaped), or nothing and exit
 *       1 when it is still running after SECONDS.
 *
 *   netholder tick FILE
 *       Every 2 ms rewrite FILE with "PID TIME": the command a suite runs
 *       under `fence run`; FILE's last content is its last sign of life.
 *
 *   netholder hold URL NAME TTL_MS RENEW_MS
 *       Acquire NAME (waiting up to 10 s) and hold it with the heartbeat
 *       thread, looking at fence_lease_valid_ms() every 2 ms.  Prints
 *         acquired TIME TOKEN OWNER
 *         valid TIME UNTIL     each time the validity moved (a renewal was
 *                              accepted): UNTIL = TIME + valid_ms, the end of
 *                              the lease's validity on the same clock
 *         lost TIME REASON UNTIL   when on_lost fires (TIME taken in the
 *                              callback; UNTIL: the last validity seen)
 *         renew TIME STATUS    on SIGUSR1: fence_renew() and its answer
 *         released TIME STATUS on SIGTERM: fence_release(), then exit 0
 *       Exit 2 when a fence_* call failed ("error STATUS WHAT: MESSAGE").
 *
 *   netholder cycle URL NAME TTL_MS HOLD_MS SECONDS LOG
 *       For SECONDS: acquire NAME (waiting up to 1 s), hold it HOLD_MS
 *       (or until it is no longer valid), release; again.  Appends to LOG:
 *         in TIME PID TOKEN    the first moment valid_ms > 0 was seen
 *         out TIME PID TOKEN HOW   the last moment valid_ms > 0 was seen,
 *                              HOW = released | lost | expired
 *       so [in, out] is exactly when this process believed it held the
 *       lease; the suite checks that no two such intervals overlap.
 *       Prints "cycles ACQUIRED LOST FAILED" at the end.
 *
 * Exit status: 0 done, 2 a fence_* call failed, 64 usage.
 */
#include "fence.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Microseconds as "ms.uuu". */
static const char *ms(int64_t us, char *buf, size_t n)
{
    snprintf(buf, n, "%" PRId64 ".%03" PRId64, us / 1000, us % 1000);
    return buf;
}

static void sleep_us(int64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static long num(const char *s, const char *what)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v <= 0) {
        fprintf(stderr, "netholder: %s must be a positive number, not \"%s\"\n", what, s);
        exit(64);
    }
    return v;
}

static int fail(fence_client *c, const char *what, int rc)
{
    printf("error %s %s: %s\n", fence_status_name(rc), what,
           c != NULL ? fence_client_errmsg(c) : "(no client)");
    fflush(stdout);
    return 2;
}

/* ---- pttl ------------------------------------------------------------------ */

static int run_pttl(const char *ip, const char *port, char **keys, int n)
{
    redisContext *r = redisConnect(ip, (int)num(port, "PORT"));
    if (r == NULL || r->err) {
        fprintf(stderr, "netholder: cannot reach %s:%s: %s\n", ip, port,
                r != NULL ? r->errstr : "out of memory");
        return 2;
    }
    for (int i = 0; i < n; i++) {
        char t1[32], t2[32];
        int64_t before = now_us();
        redisReply *rep = redisCommand(r, "PTTL %s", keys[i]);
        int64_t after = now_us();
        if (rep == NULL || rep->type != REDIS_REPLY_INTEGER) {
            fprintf(stderr, "netholder: PTTL %s failed\n", keys[i]);
            return 2;
        }
        printf("%s %s %lld %s\n", keys[i], ms(before, t1, sizeof t1), rep->integer,
               ms(after, t2, sizeof t2));
        freeReplyObject(rep);
    }
    redisFree(r);
    return 0;
}

/* ---- gone ------------------------------------------------------------------ */

static int run_gone(const char *pid_s, const char *secs)
{
    int fd = (int)syscall(SYS_pidfd_open, (pid_t)num(pid_s, "PID"), 0);
    char t[32];
    if (fd < 0) {
        if (errno == ESRCH) { /* already gone (and reaped) */
            printf("%s\n", ms(now_us(), t, sizeof t));
            return 0;
        }
        perror("netholder: pidfd_open");
        return 2;
    }
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = poll(&p, 1, (int)num(secs, "SECONDS") * 1000);
    int64_t at = now_us();
    close(fd);
    if (n != 1) {
        return 1;
    }
    printf("%s\n", ms(at, t, sizeof t));
    return 0;
}

/* ---- tick ------------------------------------------------------------------ */

static int run_tick(const char *file)
{
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror("netholder: open");
        return 2;
    }
    for (;;) {
        char line[64], t[32];
        /* Fixed width, so that a shorter line never leaves a tail. */
        int n = snprintf(line, sizeof line, "%10ld %20s\n", (long)getpid(), ms(now_us(), t, sizeof t));
        if (pwrite(fd, line, (size_t)n, 0) != n) {
            perror("netholder: write");
            return 2;
        }
        sleep_us(2000);
    }
}

/* ---- hold ------------------------------------------------------------------ */

static atomic_int lost_reason = -1;
static atomic_llong lost_at = 0;

static void on_lost(fence_lease *lease, int reason, void *user)
{
    (void)lease;
    (void)user;
    atomic_store(&lost_at, now_us());
    atomic_store(&lost_reason, reason);
}

static int run_hold(fence_client *c, const char *name, int64_t ttl, int64_t renew,
                    const sigset_t *sigs)
{
    fence_lease_options lo;
    fence_lease_options_init(&lo, ttl);
    lo.wait_ms = 10000;
    lo.renew_every_ms = renew;
    lo.on_lost = on_lost;
    fence_lease *l = NULL;
    int rc = fence_acquire(c, name, &lo, &l);
    if (rc != FENCE_OK) {
        return fail(c, "fence_acquire", rc);
    }
    char t1[32], t2[32];
    printf("acquired %s %" PRIu64 " %s\n", ms(now_us(), t1, sizeof t1), fence_lease_token(l),
           fence_lease_owner(l));
    fflush(stdout);
    int64_t until = 0;
    int reported = 0;
    for (;;) {
        struct timespec tick = {0, 2000000L};
        int sig = sigtimedwait(sigs, NULL, &tick);
        if (sig == SIGTERM || sig == SIGINT) {
            rc = fence_release(l);
            printf("released %s %s\n", ms(now_us(), t1, sizeof t1), fence_status_name(rc));
            fflush(stdout);
            return 0;
        }
        if (sig == SIGUSR1) {
            rc = fence_renew(l);
            printf("renew %s %s\n", ms(now_us(), t1, sizeof t1), fence_status_name(rc));
            fflush(stdout);
        }
        int64_t t = now_us();
        int64_t v = fence_lease_valid_ms(l);
        /* valid_ms is whole milliseconds: a move of less than 2 ms is
         * that rounding, not a renewal. */
        if (v > 0 && t + v * 1000 > until + 2000) {
            until = t + v * 1000;
            printf("valid %s %s\n", ms(t, t1, sizeof t1), ms(until, t2, sizeof t2));
            fflush(stdout);
        }
        int reason = atomic_load(&lost_reason);
        if (reason >= 0 && !reported) {
            reported = 1;
            printf("lost %s %s %s\n", ms(atomic_load(&lost_at), t1, sizeof t1),
                   fence_status_name(reason), ms(until, t2, sizeof t2));
            fflush(stdout);
        }
    }
}

/* ---- cycle ------------------------------------------------------------------ */

static void log_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_line(int fd, const char *fmt, ...)
{
    char line[160];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* O_APPEND and one short write: the line lands whole. */
    if (n < 0 || write(fd, line, (size_t)n) != n) {
        perror("netholder: write log");
        exit(2);
    }
}

static int run_cycle(fence_client *c, const char *name, int64_t ttl, int64_t hold_ms,
                     int64_t seconds, const char *log)
{
    int fd = open(log, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0) {
        perror("netholder: open log");
        return 2;
    }
    long acquired = 0, lost = 0, failed = 0;
    int64_t end = now_us() + seconds * 1000000;
    char t1[32];
    while (now_us() < end) {
        fence_lease_options lo;
        fence_lease_options_init(&lo, ttl);
        lo.wait_ms = 1000;
        fence_lease *l = NULL;
        int rc = fence_acquire(c, name, &lo, &l);
        if (rc != FENCE_OK) {
            /* Busy past the wait, or the network ate the round trip. */
            failed++;
            continue;
        }
        int64_t t = now_us(), first = -1, last = -1;
        const char *how = "released";
        for (;;) {
            int64_t now = now_us();
            if (fence_lease_valid_ms(l) <= 0) {
                how = fence_lease_lost(l) ? "lost" : "expired";
                break;
            }
            if (first < 0) {
                first = now;
                log_line(fd, "in %s %ld %" PRIu64 "\n", ms(first, t1, sizeof t1), (long)getpid(),
                         fence_lease_token(l));
            }
            last = now;
            if (now - t >= hold_ms * 1000) {
                break;
            }
            sleep_us(2000);
        }
        if (first >= 0) {
            acquired++;
            lost += how[0] != 'r';
            log_line(fd, "out %s %ld %" PRIu64 " %s\n", ms(last, t1, sizeof t1), (long)getpid(),
                     fence_lease_token(l), how);
        }
        fence_release(l); /* its outcome does not matter: the key expires anyway */
    }
    close(fd);
    printf("cycles %ld %ld %ld\n", acquired, lost, failed);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    char t[32];
    if (argc == 2 && strcmp(argv[1], "now") == 0) {
        printf("%s\n", ms(now_us(), t, sizeof t));
        return 0;
    }
    if (argc >= 5 && strcmp(argv[1], "pttl") == 0) {
        return run_pttl(argv[2], argv[3], argv + 4, argc - 4);
    }
    if (argc == 4 && strcmp(argv[1], "gone") == 0) {
        return run_gone(argv[2], argv[3]);
    }
    if (argc == 3 && strcmp(argv[1], "tick") == 0) {
        return run_tick(argv[2]);
    }
    int hold = argc == 6 && strcmp(argv[1], "hold") == 0;
    int cycle = argc == 8 && strcmp(argv[1], "cycle") == 0;
    if (!hold && !cycle) {
        fprintf(stderr, "usage: netholder now | pttl IP PORT KEY... | gone PID SECONDS | tick FILE | hold URL NAME TTL_MS RENEW_MS |\n"
                        "       cycle URL NAME TTL_MS HOLD_MS SECONDS LOG\n");
        return 64;
    }
    int64_t ttl = num(argv[4], "TTL_MS");
    /* Never outlive the suite that started us. */
    pid_t parent = getppid();
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) {
        return 0;
    }
    /* The signals hold mode waits for are blocked before the heartbeat
     * thread exists, so that only sigtimedwait() sees them. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGUSR1);
    if (hold) {
        pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    }
    fence_client_options co;
    fence_client_options_init(&co);
    co.url = argv[2];
    if (cycle) {
        /* Under packet loss a round trip may hang on a retransmission:
         * give up after a TTL rather than the default 2 s. */
        co.connect_timeout_ms = (int)ttl;
        co.io_timeout_ms = (int)ttl;
    }
    fence_client *c = NULL;
    int rc = fence_client_open(&c, &co);
    if (rc != FENCE_OK && rc != FENCE_ECONN) {
        rc = fail(c, "fence_client_open", rc);
        fence_client_close(c);
        return rc;
    }
    if (hold) {
        rc = run_hold(c, argv[3], ttl, num(argv[5], "RENEW_MS"), &sigs);
    } else {
        rc = run_cycle(c, argv[3], ttl, num(argv[5], "HOLD_MS"), num(argv[6], "SECONDS"), argv[7]);
    }
    fence_client_close(c);
    return rc;
}
