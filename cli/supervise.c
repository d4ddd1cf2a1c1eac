/*
 * supervise.c -- `fence run` while the command runs: the self-pipes that
 * the signal handlers and the lease's on_lost callback write into, and the
 * main thread's loop that reaps the command, passes signals on to its
 * process group and stops it when the lease is lost.  (The thread and
 * signal rules are at the top of run.c.)
 */
#include "cli.h"
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int sig_pipe[2] = {-1, -1};  /* signal handlers -> main thread */
static int lost_pipe[2] = {-1, -1}; /* on_lost (heartbeat thread) -> main thread */
static atomic_int lost_reason;      /* 0, or the reason on_lost was given */

static int64_t now_ms(void)
{
    return fence__now_ns() / 1000000;
}

/* ---- the pipes and what writes into them ------------------------------------ */

static int make_pipe(int p[2])
{
    return pipe2(p, O_CLOEXEC | O_NONBLOCK);
}

static void close_pipe(int p[2])
{
    for (int i = 0; i < 2; i++) {
        if (p[i] >= 0) {
            close(p[i]);
            p[i] = -1;
        }
    }
}

int cli__pipes_open(void)
{
    return make_pipe(sig_pipe) != 0 || make_pipe(lost_pipe) != 0 ? -1 : 0;
}

void cli__pipes_close(void)
{
    close_pipe(sig_pipe);
    close_pipe(lost_pipe);
}

/* Runs on the heartbeat thread: only an atomic store and a write(). */
void cli__on_lost(fence_lease *lease, int reason, void *user)
{
    (void)lease;
    (void)user;
    int saved = errno;
    atomic_store(&lost_reason, reason != 0 ? reason : FENCE_LOST);
    unsigned char b = 1;
    if (write(lost_pipe[1], &b, 1) < 0) {
        /* full: a byte is already waiting, which is all we need */
    }
    errno = saved;
}

int cli__lost_reason(void)
{
    return atomic_load(&lost_reason);
}

const char *cli__lost_why(int reason)
{
    return reason == FENCE_ECONN
               ? "Redis could not be reached before the lease ran out"
               : "its renewal was refused: the key had expired, been deleted or taken by another "
                 "owner";
}

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    if (write(sig_pipe[1], &b, 1) < 0) {
        /* full: signals coalesce anyway */
    }
    errno = saved;
}

void cli__install_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigfillset(&sa.sa_mask);
    for (int i = 0; i < cli__nforward_signals; i++) {
        int sig = cli__forward_signals[i];
        if (!cli__ignored_at_start(sig)) {
            sigaction(sig, &sa, NULL);
        }
    }
    for (int i = 0; i < cli__njobctl_signals; i++) {
        int sig = cli__jobctl_signals[i];
        if (!cli__ignored_at_start(sig)) {
            sigaction(sig, &sa, NULL);
        }
    }
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);
}

/* ---- the loop ------------------------------------------------------------------ */

/* What the loop knows about the command. */
typedef struct {
    pid_t pid;
    const char *name;
    fence_lease *lease;
    int watchdog;     /* the watchdog runs */
    int64_t dog_deadline; /* the last deadline given to it (its clock) */
    int64_t kill_after_ms;
    int64_t hold_end; /* --max-hold: when to stop the command (0: never) */
    int reaped, st;
    int dog_died, dog_ws; /* the watchdog died before its time, how */
    int dog_failed;   /* ... and could not be replaced: the command was stopped */
    int lost;         /* the lease was lost */
    int held_out;     /* the command outlived --max-hold */
    int stopping;     /* SIGTERM sent (lost or held out) */
    int killed;       /* SIGKILL sent */
    int64_t kill_at;
} sup;

/* What the exit status of a command that ended with wait status st is. */
static int command_status(int st)
{
    if (WIFEXITED(st)) {
        return WEXITSTATUS(st);
    }
    if (WIFSIGNALED(st)) {
        return 128 + WTERMSIG(st);
    }
    return CLI_EX_SOFTWARE;
}

/* Reap the command, and any orphan of its that was handed to us (we are a
 * child subreaper), so that a dead group member does not linger as a
 * zombie in the group. */
static void reap(sup *s)
{
    for (;;) {
        int ws = 0;
        pid_t w = waitpid(-1, &ws, WNOHANG);
        if (cli__watchdog_reaped(w) == 2) {
            s->dog_died = (int)w;
            s->dog_ws = ws;
        }
        if (w == s->pid) {
            s->st = ws;
            s->reaped = 1;
        } else if (w <= 0) {
            if (w < 0 && errno == ECHILD && !s->reaped) {
                s->reaped = 1; /* cannot happen; do not spin */
            }
            return;
        }
    }
}

/* Whether the loop is over: the command is gone (and, once it is being
 * stopped, its whole group, or the grace ended and SIGKILL was sent). */
static int finished(const sup *s)
{
    if (!s->reaped) {
        return 0;
    }
    if (!s->stopping || s->killed) {
        return 1;
    }
    return kill(-s->pid, 0) < 0 && errno == ESRCH;
}

/* How long poll() may wait (ms; -1: until something happens). */
static int poll_timeout(const sup *s)
{
    if (!s->stopping && s->hold_end > 0 && !s->reaped) {
        int64_t left = s->hold_end - now_ms();
        return left < 0 ? 0 : left > 60000 ? 60000 : (int)left;
    }
    if (!s->stopping || s->killed) {
        return -1;
    }
    int64_t left = s->kill_at - now_ms();
    int timeout = left < 0 ? 0 : (int)left;
    if (s->reaped && timeout > 10) {
        timeout = 10; /* poll the group's members */
    }
    return timeout;
}

/* Act on the signals the handlers wrote into sig_pipe. */
static void take_signals(const sup *s)
{
    unsigned char buf[64];
    for (;;) {
        ssize_t got = read(sig_pipe[0], buf, sizeof buf);
        if (got <= 0) {
            return;
        }
        for (ssize_t i = 0; i < got; i++) {
            int sig = buf[i];
            if (sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) {
                /* Ctrl-Z: the command's group is not the terminal's, so
                 * stop it ourselves, then stop fence (and with it the
                 * heartbeat: a stop longer than the lease's validity loses
                 * the lease, seen when continued). */
                if (!s->reaped) {
                    kill(-s->pid, SIGSTOP);
                }
                raise(SIGSTOP);
            } else if (sig != SIGCHLD && !s->reaped) {
                kill(-s->pid, sig); /* forwarded; SIGCONT continues the group */
            }
        }
    }
}

/* Stop the command's group: SIGTERM now, SIGKILL after the grace (once). */
static void stop_group(sup *s)
{
    if (s->stopping) {
        return; /* already under way (a loss during --max-hold's grace) */
    }
    s->stopping = 1;
    kill(-s->pid, SIGTERM);
    kill(-s->pid, SIGCONT); /* a stopped command must see the SIGTERM */
    s->kill_at = now_ms() + s->kill_after_ms;
    if (s->kill_after_ms == 0) {
        kill(-s->pid, SIGKILL);
        s->killed = 1;
    }
}

/* The lease was lost (on_lost wrote into lost_pipe): stop the command. */
static void take_lost(sup *s)
{
    unsigned char buf[64];
    int lost_now = 0;
    while (read(lost_pipe[0], buf, sizeof buf) > 0) {
        lost_now = 1;
    }
    if (!lost_now || s->lost) {
        return;
    }
    s->lost = 1;
    if (s->stopping) {
        fprintf(stderr, "fence run: lease '%s' was lost while the command was being stopped "
                "(%s)\n", s->name, cli__lost_why(cli__lost_reason()));
    } else {
        fprintf(stderr, "fence run: lease '%s' was lost while the command ran (%s); stopping "
                "the command (SIGTERM, SIGKILL after %" PRId64 "ms)\n", s->name,
                cli__lost_why(cli__lost_reason()), s->kill_after_ms);
    }
    stop_group(s);
}

/* --max-hold ran out with the command still running: stop it. */
static void check_hold(sup *s, int64_t max_hold_ms)
{
    if (s->hold_end == 0 || s->stopping || s->reaped || now_ms() < s->hold_end) {
        return;
    }
    s->held_out = 1;
    fprintf(stderr, "fence run: the command has held lease '%s' for its --max-hold of %" PRId64
            "ms; stopping it (SIGTERM, SIGKILL after %" PRId64 "ms)\n", s->name, max_hold_ms,
            s->kill_after_ms);
    stop_group(s);
}

/* The watchdog died before its time (SIGKILLed by someone, the OOM
 * killer): without it a fence stopped now would keep its command running
 * past the lease.  Start another at once; when that fails, stop the
 * command (fail closed). */
static void replace_watchdog(sup *s)
{
    if (!s->dog_died) {
        return;
    }
    int old = s->dog_died, ws = s->dog_ws;
    s->dog_died = 0;
    char how[32];
    if (WIFSIGNALED(ws)) {
        snprintf(how, sizeof how, "signal %d", WTERMSIG(ws));
    } else {
        snprintf(how, sizeof how, "exit %d", WEXITSTATUS(ws));
    }
    if (s->reaped || s->killed) {
        s->watchdog = 0; /* nothing left to guard */
    } else if (cli__watchdog_restart() == 0) {
        fprintf(stderr, "fence run: the watchdog (pid %d) died (%s); started another (pid %ld)\n",
                old, how, (long)cli__watchdog_pid());
    } else {
        fprintf(stderr, "fence run: the watchdog (pid %d) died (%s) and another cannot be "
                "started (%s): stopping the command (SIGTERM, SIGKILL after %" PRId64 "ms)\n",
                old, how, strerror(errno), s->kill_after_ms);
        s->watchdog = 0;
        s->dog_failed = 1;
        stop_group(s);
    }
}

/* The instant (the watchdog's clock) after which the command must be gone:
 * the lease's validity end while it is held, fence's own SIGKILL time once
 * fence stops the command, each plus the slack.  Never moved earlier. */
static void tell_watchdog(sup *s)
{
    if (!s->watchdog || s->killed) {
        return;
    }
    int64_t now = cli__watchdog_now_ms(), d;
    if (s->stopping) {
        d = now + (s->kill_at - now_ms()) + CLI_WATCHDOG_SLACK_MS;
    } else {
        int64_t valid = fence_lease_valid_ms(s->lease);
        if (valid <= 0) {
            return; /* lost: fence is about to take it (take_lost) */
        }
        d = now + valid + CLI_WATCHDOG_SLACK_MS;
    }
    if (d > s->dog_deadline) {
        s->dog_deadline = d;
        cli__watchdog_set(d);
    }
}

int cli__supervise(const cli__sup_args *a, int *was_lost)
{
    pid_t pid = a->pid;
    int64_t max_hold_ms = a->max_hold_ms;
    sup s = {.pid = pid, .name = a->name, .lease = a->lease,
             .kill_after_ms = a->kill_after_ms};
    if (max_hold_ms > 0) {
        s.hold_end = now_ms() + max_hold_ms;
    }
    /* Wake often enough to move the watchdog's deadline well before it:
     * the validity runs about 2/3 TTL past each renewal. */
    int64_t period = a->ttl_ms / 6;
    period = period < 5 ? 5 : period > 1000 ? 1000 : period;
    s.dog_deadline = cli__watchdog_now_ms() + fence_lease_valid_ms(a->lease) +
                     CLI_WATCHDOG_SLACK_MS;
    if (cli__watchdog_start(pid, s.dog_deadline) == 0) {
        s.watchdog = 1;
    } else {
        fprintf(stderr, "fence run: warning: cannot start the watchdog (%s): while fence is "
                "stopped the command may outlive the lease\n", strerror(errno));
    }
    for (;;) {
        reap(&s);
        replace_watchdog(&s);
        check_hold(&s, max_hold_ms);
        tell_watchdog(&s);
        if (s.stopping && !s.killed && now_ms() >= s.kill_at) {
            fprintf(stderr, "fence run: the command is still running %" PRId64
                    "ms after SIGTERM: sending SIGKILL\n", s.kill_after_ms);
            kill(-pid, SIGKILL);
            s.killed = 1;
        }
        if (finished(&s)) {
            break;
        }
        struct pollfd pf[2] = {{.fd = sig_pipe[0], .events = POLLIN},
                               {.fd = lost_pipe[0], .events = POLLIN}};
        int timeout = poll_timeout(&s);
        if (s.watchdog && !s.killed && (timeout < 0 || timeout > period)) {
            timeout = (int)period;
        }
        int n = poll(pf, 2, timeout);
        if (n < 0 && errno != EINTR) {
            perror("fence run: poll");
            struct timespec ts = {0, 10000000L};
            nanosleep(&ts, NULL);
        }
        take_signals(&s);
        take_lost(&s);
    }
    if (cli__watchdog_stop()) {
        /* The lease's validity ran out unrenewed: lost, as far as fence
         * can tell (its key may outlive the validity by a little). */
        fprintf(stderr, "fence run: the validity of lease '%s' ran out while fence was stopped "
                "or stalled; the watchdog SIGKILLed the command's process group\n", s.name);
        s.lost = 1;
    }
    *was_lost = s.lost;
    return s.lost ? CLI_EX_LOST : s.held_out ? CLI_EX_MAXHOLD : s.dog_failed ? CLI_EX_OSERR
                                                                            : command_status(s.st);
}
