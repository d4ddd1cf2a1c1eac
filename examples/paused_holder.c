/*
 * paused_holder.c -- the GC-pause race, shown and defeated, with real
 * processes and a real SIGSTOP.
 *
 * What it shows.  A lease alone cannot protect a write: a holder can be
 * paused (a GC pause, a VM migration, SIGSTOP) after it checked its lease
 * and before it writes.  While it is paused the lease expires in Redis,
 * another process acquires it and writes, and then the paused one wakes up
 * and writes too -- over the newer data.  The fencing token is what stops
 * that write: the store remembers the newest token it has seen and rejects
 * the older one.
 *
 * How.  The parent orchestrates two child processes, each with its own
 * fence_client and its own store connection (opened after fork):
 *   1. A acquires the lease (TTL 400 ms) and gets token N, reads the
 *      balance (100), checks fence_lease_valid_ms() (fine), tells the
 *      parent it is about to write, and blocks waiting for "go".
 *   2. The parent stops A with SIGSTOP -- the whole process, heartbeat
 *      thread included -- and waits (bounded) until the lease has expired
 *      in Redis (fence_lease_inspect).
 *   3. B acquires the lease (token N+1), reads 100, writes 200, releases.
 *   4. The parent sends "go" and SIGCONT; A wakes up and writes 150 with
 *      its token N, as it meant to all along.
 * It runs this twice: without fencing (the store does not check tokens: A's
 * stale write lands and B's update is lost) and with fencing (A's write is
 * rejected with FENCE_STALE, B's data is intact).  The parent then reads
 * the final row back from the store -- not from what anyone believes they
 * wrote -- and prints a verdict and one machine-readable line per run:
 *   RESULT store=sqlite fencing=off stale_write=landed final_writer=A ...
 *
 * Usage: paused_holder [--store sqlite|postgres|gate] [--fencing off|on|both]
 *                      [--redis URL] [--pg CONNINFO] [--ttl MS]
 *   Redis: --redis, else $FENCE_REDIS_URL, else $FENCE_TEST_REDIS_URL.
 *   PostgreSQL: --pg, else $FENCE_TEST_PG_CONNINFO, else libpq's PG* vars.
 *   Stores: sqlite (a file in a temp dir, libfence_sqlite), postgres (a
 *   table, libfence_pg, fence.sql installed from C), gate (a plain file
 *   behind a persistent fence_gate, libfence_gate).
 * Exit status: 0 when every run behaved as predicted, 1 when one did not,
 * 2 when something failed (a server unreachable, ...), 64 on bad usage.
 * Every wait is bounded, and every child is reaped -- on failure it is sent
 * SIGCONT and SIGKILL first, so no stopped process is ever left behind.
 */
#include "ex_env.h"
#include "fence.h"
#include "ph_store.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_TTL_MS 400
#define ACQUIRE_WAIT_MS 3000  /* how long a child may wait for the lease */
#define CHILD_REPLY_MS 10000  /* how long the parent waits for a child */
#define GO_WAIT_MS 30000      /* how long A waits for "go" */

/* ------------------------------------------------------------------ */
/* Child -> parent messages                                             */
/* ------------------------------------------------------------------ */

enum msg_kind { MSG_READY = 1, MSG_WROTE = 2, MSG_ERROR = 3 };

/* Well under PIPE_BUF, so each write(2) of one lands whole. */
typedef struct msg {
    int kind;
    uint64_t token;     /* the child's fencing token */
    int64_t valid_ms;   /* READY: fence_lease_valid_ms() */
    long long balance;  /* READY: balance read; WROTE: balance written */
    ph_outcome outcome; /* WROTE */
    int64_t at_us;      /* READY: when acquired; WROTE: when the write returned */
    char text[600];     /* ERROR */
} msg;

/* ------------------------------------------------------------------ */
/* Small helpers                                                        */
/* ------------------------------------------------------------------ */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* --events FILE: one machine-readable line per event, for the timeline
 * picture (scripts/demo draws it):
 *   EVENT t_us=N run=off|on who=A|B|- what=WHAT [key=value ...]
 * t_us is CLOCK_MONOTONIC in microseconds since the program started (the
 * children's clock is the same clock).  WHAT: start (ttl_ms, store),
 * acquire (token, valid_ms), pause, expired, write (token, balance,
 * result=accepted|rejected|failed, highest), release, resume, final
 * (balance, writer, token, intact=yes|no). */
static FILE *g_events;
static int64_t g_t0_us;

__attribute__((format(printf, 5, 6))) static void event(int fenced, const char *who,
                                                        const char *what, int64_t at_us,
                                                        const char *fmt, ...)
{
    if (g_events == NULL)
        return;
    fprintf(g_events, "EVENT t_us=%" PRId64 " run=%s who=%s what=%s", at_us - g_t0_us,
            fenced ? "on" : "off", who, what);
    char rest[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rest, sizeof rest, fmt, ap);
    va_end(ap);
    fprintf(g_events, "%s%s\n", rest[0] != '\0' ? " " : "", rest);
    fflush(g_events);
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* The narrative goes to stdout, flushed line by line (stdout may be a pipe,
 * and nothing may sit in the buffer when we fork). */
__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
}

__attribute__((format(printf, 1, 2))) static void complain(const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fputs("paused_holder: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Read exactly len bytes within timeout_ms.  0 ok, -1 EOF or error,
 * -2 timeout. */
static int read_all(int fd, void *buf, size_t len, int64_t timeout_ms)
{
    char *p = buf;
    int64_t deadline = now_ms() + timeout_ms;
    while (len > 0) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return -2;
        struct pollfd pfd = {fd, POLLIN, 0};
        int pr = poll(&pfd, 1, (int)left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr < 0)
            return -1;
        if (pr == 0)
            return -2;
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* The children                                                         */
/* ------------------------------------------------------------------ */

typedef struct child_args {
    const ph_config *cfg;
    int fenced;
    const char *url;
    const char *lease;
    int64_t ttl_ms;
    int report_fd; /* child -> parent */
    int go_fd;     /* parent -> child ("go"), A only; -1 for B */
    const char *who;
    long long delta; /* what the child adds to the balance it read */
} child_args;

static void child_send(const child_args *a, msg *m)
{
    if (write_all(a->report_fd, m, sizeof *m) != 0)
        _exit(2); /* the parent is gone */
}

__attribute__((format(printf, 2, 3))) static void child_error(const child_args *a,
                                                              const char *fmt, ...)
{
    msg m;
    memset(&m, 0, sizeof m);
    m.kind = MSG_ERROR;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m.text, sizeof m.text, fmt, ap);
    va_end(ap);
    child_send(a, &m);
}

/* A holder's lost-lease callback (heartbeat thread).  A real job would
 * stop working here; A never gets the chance: its heartbeat thread was
 * frozen with the rest of it and only finds out after SIGCONT, racing
 * with the write A is already making.  That is the point of the demo. */
static void on_lost(fence_lease *lease, int reason, void *user)
{
    (void)lease;
    (void)reason;
    atomic_store((atomic_int *)user, 1);
}

static atomic_int g_child_lost = 0;

/*
 * One holder: acquire, read, (A: report ready and wait for "go"), write
 * balance + delta with the lease's token, report, release.  Runs in a
 * child process and never returns.
 */
__attribute__((noreturn)) static void run_child(const child_args *a)
{
    fence_client *c = NULL;
    fence_lease *l = NULL;
    ph_store *s = NULL;
    char err[512];
    msg m;
    int rc;

    /* Die with the parent, whatever happens to it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);

    rc = fence_client_open_url(&c, a->url);
    if (rc != FENCE_OK) {
        child_error(a, "%s: fence_client_open_url: %s: %s", a->who, fence_status_name(rc),
                    c != NULL ? fence_client_errmsg(c) : "out of memory");
        goto out;
    }
    fence_lease_options lo;
    fence_lease_options_init(&lo, a->ttl_ms);
    lo.wait_ms = ACQUIRE_WAIT_MS;
    lo.on_lost = on_lost;
    lo.user = &g_child_lost;
    rc = fence_acquire(c, a->lease, &lo, &l);
    if (rc != FENCE_OK) {
        child_error(a, "%s: fence_acquire %s: %s: %s", a->who, a->lease, fence_status_name(rc),
                    fence_client_errmsg(c));
        goto out;
    }
    rc = ph_store_open(a->cfg, a->fenced, &s, err, sizeof err);
    ph_row row;
    if (rc == FENCE_OK)
        rc = ph_store_read(s, &row, err, sizeof err);
    if (rc != FENCE_OK) {
        child_error(a, "%s: %s", a->who, err);
        goto out;
    }

    /* The check every careful holder makes before a critical step. */
    int64_t valid = fence_lease_valid_ms(l);
    if (valid <= 0) {
        child_error(a, "%s: the lease is no longer valid right after acquiring it", a->who);
        goto out;
    }
    memset(&m, 0, sizeof m);
    m.kind = MSG_READY;
    m.at_us = now_us();
    m.token = fence_lease_token(l);
    m.valid_ms = valid;
    m.balance = row.balance;
    child_send(a, &m);

    if (a->go_fd >= 0) {
        /* A: here the parent stops us.  Whatever pauses a real process
         * (GC, swap, a VM stall) can strike exactly here, after the
         * check and before the write; we do not check again. */
        char go[3];
        if (read_all(a->go_fd, go, sizeof go, GO_WAIT_MS) != 0 || memcmp(go, "go\n", 3) != 0) {
            child_error(a, "%s: no \"go\" from the parent", a->who);
            goto out;
        }
    }

    memset(&m, 0, sizeof m);
    m.kind = MSG_WROTE;
    m.token = fence_lease_token(l);
    m.balance = row.balance + a->delta;
    ph_store_write(s, m.balance, a->who, m.token, fence_lease_holder(l), &m.outcome);
    m.at_us = now_us();
    child_send(a, &m);

out:
    ph_store_close(s);
    fence_release(l); /* A's comes back FENCE_LOST: the lease is B's now */
    fence_client_close(c);
    _exit(0);
}

/* ------------------------------------------------------------------ */
/* The parent: children bookkeeping                                     */
/* ------------------------------------------------------------------ */

static volatile pid_t g_kids[2] = {0, 0};

/* Async-signal-safe: wake and kill every child still alive. */
static void kill_kids(void)
{
    for (int i = 0; i < 2; i++) {
        pid_t p = g_kids[i];
        if (p > 0) {
            kill(p, SIGCONT);
            kill(p, SIGKILL);
        }
    }
}

/* Kill (SIGCONT + SIGKILL) and reap every child still alive. */
static void reap_kids(void)
{
    kill_kids();
    for (int i = 0; i < 2; i++) {
        pid_t p = g_kids[i];
        if (p > 0) {
            while (waitpid(p, NULL, 0) < 0 && errno == EINTR) {
            }
            g_kids[i] = 0;
        }
    }
}

static void on_signal(int sig)
{
    kill_kids();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Wait (bounded) for child slot i to exit; 0 when it exited with status 0. */
static int wait_exit(int i, int64_t timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        int st;
        pid_t r = waitpid(g_kids[i], &st, WNOHANG);
        if (r == g_kids[i]) {
            g_kids[i] = 0;
            if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
                return 0;
            complain("child %c ended badly (status 0x%x)", i == 0 ? 'A' : 'B', st);
            return -1;
        }
        if (r < 0 && errno != EINTR) {
            complain("waitpid: %s", strerror(errno));
            return -1;
        }
        if (now_ms() >= deadline) {
            complain("child %c did not exit within %" PRId64 " ms", i == 0 ? 'A' : 'B', timeout_ms);
            return -1;
        }
        sleep_ms(5);
    }
}

/* Wait (bounded) until child slot i is stopped. */
static int wait_stopped(int i, int64_t timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        int st;
        pid_t r = waitpid(g_kids[i], &st, WNOHANG | WUNTRACED);
        if (r == g_kids[i]) {
            if (WIFSTOPPED(st))
                return 0;
            g_kids[i] = 0; /* it exited instead */
            complain("child A exited instead of stopping (status 0x%x)", st);
            return -1;
        }
        if (r < 0 && errno != EINTR)
            return -1;
        if (now_ms() >= deadline) {
            complain("child A did not stop within %" PRId64 " ms", timeout_ms);
            return -1;
        }
        sleep_ms(1);
    }
}

/* Read one message from a child (bounded); an ERROR message is reported
 * and counts as a failure. */
static int get_msg(int fd, const char *who, int want, msg *m)
{
    int r = read_all(fd, m, sizeof *m, CHILD_REPLY_MS);
    if (r == -2) {
        complain("%s said nothing for %d ms", who, CHILD_REPLY_MS);
        return -1;
    }
    if (r != 0) {
        complain("%s died without saying why", who);
        return -1;
    }
    if (m->kind == MSG_ERROR) {
        complain("%s", m->text);
        return -1;
    }
    if (m->kind != want) {
        complain("%s sent message %d, expected %d", who, m->kind, want);
        return -1;
    }
    return 0;
}

static pid_t spawn(child_args *a, int slot, int close_a, int close_b)
{
    fflush(stdout);
    fflush(stderr);
    pid_t p = fork();
    if (p < 0) {
        complain("fork: %s", strerror(errno));
        return -1;
    }
    if (p == 0) {
        if (close_a >= 0)
            close(close_a);
        if (close_b >= 0)
            close(close_b);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        run_child(a);
    }
    g_kids[slot] = p;
    return p;
}

/* ------------------------------------------------------------------ */
/* One run of the scenario                                              */
/* ------------------------------------------------------------------ */

typedef struct run_result {
    const char *stale_write; /* "landed", "rejected", "error", "unknown" */
    char final_writer[16];
    long long final_balance;
    uint64_t token_a, token_b;
} run_result;

/* The story of one run; returns 0 when it got to the end (the verdict is
 * in *res), -1 on a failure (already reported). */
static int play(const ph_config *cfg, int fenced, fence_client *pc, const char *url,
                const char *lease, int64_t ttl_ms, run_result *res)
{
    int rep_a[2] = {-1, -1}, go_a[2] = {-1, -1}, rep_b[2] = {-1, -1};
    int ret = -1;
    char err[512];
    msg m;
    const char *store = ph_kind_name(cfg->kind);

    int rc = ph_store_setup(cfg, fenced, err, sizeof err);
    if (rc != FENCE_OK) {
        complain("setting up the %s store: %s", store, err);
        return -1;
    }
    event(fenced, "-", "start", now_us(), "store=%s ttl_ms=%" PRId64 " balance=100", store, ttl_ms);
    say("the account starts at balance = 100 (%s%s)", store,
        fenced ? ", fenced: writes must carry a token" : ", not fenced: writes are not checked");

    if (pipe2(rep_a, O_CLOEXEC) != 0 || pipe2(go_a, O_CLOEXEC) != 0) {
        complain("pipe: %s", strerror(errno));
        goto out;
    }

    /* A */
    child_args aa = {cfg, fenced, url, lease, ttl_ms, rep_a[1], go_a[0], "A", 50};
    if (spawn(&aa, 0, rep_a[0], go_a[1]) < 0)
        goto out;
    close(rep_a[1]);
    close(go_a[0]);
    rep_a[1] = go_a[0] = -1;
    if (get_msg(rep_a[0], "A", MSG_READY, &m) != 0)
        goto out;
    res->token_a = m.token;
    long long a_read = m.balance;
    event(fenced, "A", "acquire", m.at_us, "token=%" PRIu64 " valid_ms=%" PRId64, m.token,
          m.valid_ms);
    say("A (pid %ld) acquired the lease: token %" PRIu64 " (valid for %" PRId64 " ms)",
        (long)g_kids[0], m.token, m.valid_ms);
    say("A read balance = %lld; it will add 50 and write %lld", a_read, a_read + 50);

    /* Pause A, heartbeat and all. */
    say("A is about to write ... paused (SIGSTOP)");
    if (kill(g_kids[0], SIGSTOP) != 0 || wait_stopped(0, 2000) != 0)
        goto out;
    int64_t stopped_at = now_ms();
    event(fenced, "A", "pause", now_us(), "signal=SIGSTOP");

    /* Wait (bounded) for Redis to expire A's lease. */
    int64_t deadline = stopped_at + ttl_ms + 5000;
    for (;;) {
        int held = 1;
        rc = fence_lease_inspect(pc, lease, &held, NULL, NULL, NULL);
        if (rc != FENCE_OK) {
            complain("fence_lease_inspect: %s: %s", fence_status_name(rc), fence_client_errmsg(pc));
            goto out;
        }
        if (!held)
            break;
        if (now_ms() >= deadline) {
            complain("the lease was still held %" PRId64 " ms after A was stopped",
                     now_ms() - stopped_at);
            goto out;
        }
        sleep_ms(10);
    }
    event(fenced, "-", "expired", now_us(), "%s", "");
    say("the lease expired in Redis while A was paused (%" PRId64 " ms after SIGSTOP)",
        now_ms() - stopped_at);

    /* B (its pipe made only now, so that A holds no end of it) */
    if (pipe2(rep_b, O_CLOEXEC) != 0) {
        complain("pipe: %s", strerror(errno));
        goto out;
    }
    child_args bb = {cfg, fenced, url, lease, ttl_ms, rep_b[1], -1, "B", 100};
    if (spawn(&bb, 1, rep_b[0], go_a[1]) < 0)
        goto out;
    close(rep_b[1]);
    rep_b[1] = -1;
    if (get_msg(rep_b[0], "B", MSG_READY, &m) != 0)
        goto out;
    res->token_b = m.token;
    event(fenced, "B", "acquire", m.at_us, "token=%" PRIu64 " valid_ms=%" PRId64, m.token,
          m.valid_ms);
    say("B (pid %ld) acquired the lease: token %" PRIu64, (long)g_kids[1], m.token);
    if (get_msg(rep_b[0], "B", MSG_WROTE, &m) != 0)
        goto out;
    if (m.outcome.status != FENCE_OK) {
        complain("B's write failed: %s: %s", fence_status_name(m.outcome.status), m.outcome.message);
        goto out;
    }
    event(fenced, "B", "write", m.at_us, "token=%" PRIu64 " balance=%lld result=accepted",
          m.token, m.balance);
    say("B wrote: balance = %lld (token %" PRIu64 "), and released the lease", m.balance, m.token);
    if (wait_exit(1, CHILD_REPLY_MS) != 0)
        goto out;
    event(fenced, "B", "release", now_us(), "%s", "");

    /* Wake A: it goes on with the write it was about to make. */
    if (write_all(go_a[1], "go\n", 3) != 0 || kill(g_kids[0], SIGCONT) != 0) {
        complain("waking A: %s", strerror(errno));
        goto out;
    }
    event(fenced, "A", "resume", now_us(), "signal=SIGCONT");
    if (get_msg(rep_a[0], "A", MSG_WROTE, &m) != 0)
        goto out;
    event(fenced, "A", "write", m.at_us,
          "token=%" PRIu64 " balance=%lld result=%s highest=%" PRIu64, m.token, m.balance,
          m.outcome.status == FENCE_OK      ? "accepted"
          : m.outcome.status == FENCE_STALE ? "rejected"
                                            : "failed",
          m.outcome.status == FENCE_STALE ? m.outcome.highest : m.token);
    if (m.outcome.status == FENCE_OK) {
        res->stale_write = "landed";
        say("A woke up (SIGCONT) and wrote balance = %lld with token %" PRIu64
            ": ACCEPTED   <- stale write landed: B's update is lost",
            m.balance, m.token);
    } else if (m.outcome.status == FENCE_STALE) {
        res->stale_write = "rejected";
        say("A woke up (SIGCONT) and wrote balance = %lld with token %" PRIu64
            ": REJECTED (stale: %" PRIu64 " < %" PRIu64 ")",
            m.balance, m.token, m.outcome.offered, m.outcome.highest);
        if (m.outcome.offered != res->token_a || m.outcome.highest != res->token_b) {
            complain("the rejection named tokens %" PRIu64 " < %" PRIu64 ", expected %" PRIu64
                     " < %" PRIu64,
                     m.outcome.offered, m.outcome.highest, res->token_a, res->token_b);
            res->stale_write = "error";
        }
    } else {
        res->stale_write = "error";
        say("A woke up (SIGCONT) and wrote with token %" PRIu64 ": FAILED (%s: %s)", m.token,
            fence_status_name(m.outcome.status), m.outcome.message);
    }
    if (wait_exit(0, CHILD_REPLY_MS) != 0)
        goto out;
    event(fenced, "A", "release", now_us(), "%s", "");

    /* The verdict comes from the store itself. */
    ph_store *s = NULL;
    ph_row row;
    rc = ph_store_open(cfg, 0, &s, err, sizeof err);
    if (rc == FENCE_OK)
        rc = ph_store_read(s, &row, err, sizeof err);
    ph_store_close(s);
    if (rc != FENCE_OK) {
        complain("reading the final row: %s", err);
        goto out;
    }
    snprintf(res->final_writer, sizeof res->final_writer, "%s", row.writer);
    res->final_balance = row.balance;
    int corrupted = strcmp(row.writer, "B") != 0 || row.balance != a_read + 100;
    event(fenced, "-", "final", now_us(), "balance=%lld writer=%s token=%" PRIu64 " intact=%s",
          row.balance, row.writer, row.token, corrupted ? "no" : "yes");
    say("final row: balance = %lld, written by %s (token %" PRIu64 ")   %s", row.balance,
        row.writer, row.token, corrupted ? "CORRUPTED" : "intact");
    ret = 0;

out:
    reap_kids();
    int fds[] = {rep_a[0], rep_a[1], go_a[0], go_a[1], rep_b[0], rep_b[1]};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return ret;
}

/* Run the scenario once; print its RESULT line; 0 when it behaved as the
 * scenario predicts, 1 when not, 2 on a failure. */
static int run_once(const ph_config *cfg, int fenced, fence_client *pc, const char *url,
                    const char *lease, int64_t ttl_ms)
{
    const char *store = ph_kind_name(cfg->kind);
    run_result res;
    memset(&res, 0, sizeof res);
    res.stale_write = "unknown";
    snprintf(res.final_writer, sizeof res.final_writer, "unknown");

    say("-- %s fencing (%s) --", fenced ? "with" : "without", store);
    int played = play(cfg, fenced, pc, url, lease, ttl_ms, &res);
    ph_store_teardown(cfg);

    /* The prediction: without fencing the stale write lands and A's data
     * is what is left (B's update is lost); with fencing it is rejected
     * and B's data is intact. */
    int predicted;
    if (fenced)
        predicted = strcmp(res.stale_write, "rejected") == 0 && strcmp(res.final_writer, "B") == 0
                    && res.final_balance == 200;
    else
        predicted = strcmp(res.stale_write, "landed") == 0 && strcmp(res.final_writer, "A") == 0
                    && res.final_balance == 150;
    if (played == 0)
        say("%s", predicted ? (fenced ? "=> the fencing token stopped the stale write"
                                      : "=> the lease alone did not stop the stale write")
                            : "=> NOT what the scenario predicts");
    say("RESULT store=%s fencing=%s stale_write=%s final_writer=%s final_balance=%lld "
        "token_a=%" PRIu64 " token_b=%" PRIu64 " as_predicted=%s",
        store, fenced ? "on" : "off", res.stale_write, res.final_writer, res.final_balance,
        res.token_a, res.token_b, played == 0 && predicted ? "yes" : "no");
    if (played != 0)
        return 2;
    return predicted ? 0 : 1;
}

/* ------------------------------------------------------------------ */
/* main                                                                 */
/* ------------------------------------------------------------------ */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static int usage(FILE *f)
{
    fputs("usage: paused_holder [--store sqlite|postgres|gate] [--fencing off|on|both]\n"
          "                     [--redis URL] [--pg CONNINFO] [--ttl MS] [--events FILE]\n"
          "  --events FILE: also write one EVENT line per step (monotonic times) to FILE\n"
          "  Redis: --redis, $FENCE_REDIS_URL or $FENCE_TEST_REDIS_URL\n"
          "  PostgreSQL: --pg, $FENCE_TEST_PG_CONNINFO or libpq's PG* variables\n",
          f);
    return f == stdout ? 0 : 64;
}

int main(int argc, char **argv)
{
    ph_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.kind = PH_SQLITE;
    const char *url = NULL;
    const char *fencing = "both";
    int64_t ttl_ms = DEFAULT_TTL_MS;
    const char *events_path = NULL;
    g_t0_us = now_us();

    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0)
            return usage(stdout);
        if (i + 1 >= argc) {
            fprintf(stderr, "paused_holder: %s needs a value\n", o);
            return usage(stderr);
        }
        const char *v = argv[++i];
        if (strcmp(o, "--store") == 0) {
            if (strcmp(v, "sqlite") == 0)
                cfg.kind = PH_SQLITE;
            else if (strcmp(v, "postgres") == 0)
                cfg.kind = PH_POSTGRES;
            else if (strcmp(v, "gate") == 0)
                cfg.kind = PH_GATE;
            else {
                fprintf(stderr, "paused_holder: unknown store \"%s\"\n", v);
                return usage(stderr);
            }
        } else if (strcmp(o, "--fencing") == 0) {
            if (strcmp(v, "off") != 0 && strcmp(v, "on") != 0 && strcmp(v, "both") != 0) {
                fprintf(stderr, "paused_holder: --fencing takes off, on or both\n");
                return usage(stderr);
            }
            fencing = v;
        } else if (strcmp(o, "--redis") == 0) {
            url = v;
        } else if (strcmp(o, "--pg") == 0) {
            cfg.pg_conninfo = v;
        } else if (strcmp(o, "--ttl") == 0) {
            char *end = NULL;
            long long t = strtoll(v, &end, 10);
            if (end == v || *end != '\0' || t < 50 || t > 60000) {
                fprintf(stderr, "paused_holder: --ttl takes 50..60000 (ms)\n");
                return usage(stderr);
            }
            ttl_ms = t;
        } else if (strcmp(o, "--events") == 0) {
            events_path = v;
        } else {
            fprintf(stderr, "paused_holder: unknown option %s\n", o);
            return usage(stderr);
        }
    }
    url = ex_redis_url("paused_holder", url);
    if (url == NULL) {
        return 64;
    }
    if (cfg.kind == PH_POSTGRES) {
        cfg.pg_conninfo = ex_pg_conninfo("paused_holder", cfg.pg_conninfo);
        if (cfg.pg_conninfo == NULL) {
            return 64;
        }
    }
    snprintf(cfg.pg_table, sizeof cfg.pg_table, "paused_holder_account_%ld", (long)getpid());

    const char *tmp = ex_env("TMPDIR");
    snprintf(cfg.dir, sizeof cfg.dir, "%s/fence-paused-holder.XXXXXX", tmp != NULL ? tmp : "/tmp");
    if (mkdtemp(cfg.dir) == NULL) {
        fprintf(stderr, "paused_holder: mkdtemp %s: %s\n", cfg.dir, strerror(errno));
        return 2;
    }

    if (events_path != NULL) {
        g_events = fopen(events_path, "we");
        if (g_events == NULL) {
            fprintf(stderr, "paused_holder: --events %s: %s\n", events_path, strerror(errno));
            nftw(cfg.dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
            return 2;
        }
    }

    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);

    /* The parent's own client, only for watching the lease: manual
     * heartbeat, so the parent has no threads when it forks. */
    fence_client_options co;
    fence_client_options_init(&co);
    co.url = url;
    co.heartbeat_mode = FENCE_HEARTBEAT_MANUAL;
    fence_client *pc = NULL;
    int rc = fence_client_open(&pc, &co);
    int status = 0;
    if (rc != FENCE_OK) {
        fprintf(stderr, "paused_holder: cannot reach Redis at %s: %s: %s\n", url,
                fence_status_name(rc), pc != NULL ? fence_client_errmsg(pc) : "out of memory");
        status = 2;
    } else {
        char lease[128];
        snprintf(lease, sizeof lease, "paused-holder:account:%ld", (long)getpid());
        int runs[2] = {strcmp(fencing, "on") != 0, strcmp(fencing, "off") != 0};
        for (int fenced = 0; fenced < 2; fenced++) {
            if (!runs[fenced])
                continue;
            if (fenced && runs[0])
                say("%s", ""); /* a blank line between the two runs */
            int r = run_once(&cfg, fenced, pc, url, lease, ttl_ms);
            if (r > status)
                status = r;
        }
    }
    fence_client_close(pc);
    if (g_events != NULL && fclose(g_events) != 0) {
        fprintf(stderr, "paused_holder: --events %s: %s\n", events_path, strerror(errno));
        if (status == 0)
            status = 2;
    }
    nftw(cfg.dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    return status;
}
