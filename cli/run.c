/*
 * run.c -- `fence run`: take a lease, run a command under it, stop the
 * command when the lease is lost, release the lease when it ends.
 *
 * Threads and signals.  The forwarded signals and SIGCHLD are blocked in
 * the main thread before the first fence_acquire(), so the library's
 * heartbeat thread (created there) inherits them blocked and never runs a
 * handler.  While the command runs only the main thread takes them: their
 * handlers write the signal number into a self-pipe.  The lease's on_lost
 * callback (on the heartbeat thread) writes a byte into a second pipe.  The
 * main thread waits in poll() on both and reaps the command with waitpid()
 * (supervise.c).
 */
#include "cli.h"
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

const char cli__run_help[] =
    "usage: fence run [OPTIONS] NAME -- COMMAND [ARGS...]\n"
    "\n"
    "Take the lease NAME (in Redis, or from the issuer --url names), run COMMAND\n"
    "while keeping the lease alive, and release it when COMMAND ends.  COMMAND\n"
    "gets FENCE_TOKEN (the fencing token: a decimal number greater than every\n"
    "token issued before for NAME), FENCE_NAME and FENCE_HOLDER (the lease's\n"
    "holder id, 32 hex) in its environment.  Pass the token with every write, so\n"
    "that storage which checks it rejects writes from an older holder.\n"
    "\n"
    "Options:\n"
    "  --ttl DUR            the lease's time-to-live, renewed every TTL/3\n"
    "                       (default 10s; 10ms to 7d)\n"
    "  -w, --wait DUR       wait up to DUR while the lease is held by another\n"
    "                       owner (default 0: try once)\n"
    "  --max-hold DUR       stop the command once it has held the lease for DUR\n"
    "                       (SIGTERM, SIGKILL after --kill-after), release the\n"
    "                       lease, exit 77 (default: no limit; 1ms to 7d)\n"
    "  -q, --quiet          no message when the lease is held by another owner\n"
    "                       (for cron: an overlap is not news)\n"
    "  -E, --conflict-exit-code N  exit N (0-255) instead of 75 when the lease is\n"
    "                       held by another owner (flock's -E)\n"
    "  --kill-after DUR     when the lease is lost (or --max-hold ran out): SIGKILL\n"
    "                       the command this long after SIGTERM (default 5s; 0: at\n"
    "                       once; at most 1d)\n"
    "  --metrics-file PATH  when the command ends, write this run's lease metrics\n"
    "                       (Prometheus text format, e.g. for node_exporter's\n"
    "                       textfile collector) to PATH, replacing it atomically;\n"
    "                       each series has a lease=\"NAME\" label.  PATH's folder\n"
    "                       must exist (else exit 64 before anything runs)\n"
    "  --allow-eviction     issue tokens even if Redis's maxmemory-policy evicts\n"
    "                       (anything but noeviction: allkeys-* may evict leases\n"
    "                       and counters, volatile-* evicts exactly held leases,\n"
    "                       whose keys have a TTL; refused with exit 78 otherwise)\n"
    "  --min-replicas N     after taking the lease, wait for N replicas to\n"
    "                       acknowledge it (WAIT); fewer: release it, exit 69\n"
    "  --replica-timeout DUR  how long that wait may take (default 100ms; needs\n"
    "                       --min-replicas)\n"
    "  --token-mode MODE    clock (default: tokens from Redis's clock, safe across\n"
    "                       a lost counter) or dense (1, 2, 3: tokens REPEAT if\n"
    "                       the counter is lost)\n"
    "  -h, --help           this text\n"
    "\n" CLI_CONN_HELP
    "\n"
    "The command fence runs never gets Redis credentials: FENCE_REDIS_PASSWORD and\n"
    "FENCE_REDIS_SENTINEL_PASSWORD are not passed on, and its FENCE_REDIS_URL has\n"
    "them removed.  The lease records who holds it, \"host=H pid=P since=T\" (fence's\n"
    "pid), shown by `fence status`.\n"
    "\n"
    "DUR is a number and a unit: ms, s, m, h or d (250ms, 1.5s, 2m, 1h); a bare\n"
    "number is seconds.\n"
    "\n"
    "Exit status: the command's own (128+N when it died of signal N), or\n"
    "   64  usage error (bad option, duration or NAME; no command)\n"
    "   69  the server could not be reached, refused the credentials, or failed; or\n"
    "       fewer replicas than --min-replicas acknowledged the lease\n"
    "   70  internal error     71  a system call (fork, pipe) failed\n"
    "   75  the lease is held by another owner (still, after --wait; see -E)\n"
    "   76  the lease was lost while the command ran: the command was stopped\n"
    "   77  the command ran longer than --max-hold: it was stopped, the lease released\n"
    "   78  Redis's maxmemory-policy evicts (see --allow-eviction), or the name's\n"
    "       counter was written with the other --token-mode\n"
    "  126  the command could not be executed   127  the command was not found\n"
    "\n"
    "The lease is lost when its renewal is refused (the key expired, was deleted\n"
    "or has another owner) or when Redis cannot be reached until the lease runs\n"
    "out.  Then the command's process group gets SIGTERM (and SIGCONT), SIGKILL\n"
    "after --kill-after, and fence exits 76.  SIGINT, SIGTERM, SIGHUP, SIGQUIT,\n"
    "SIGUSR1 and SIGUSR2 sent to fence are passed on to the command's process\n"
    "group; the lease is released when the command ends.  A signal that was\n"
    "ignored when fence started (SIGHUP under nohup) stays ignored, by fence\n"
    "and by the command.  While fence waits for the lease (--wait) these\n"
    "signals act on fence as usual.  Job control: SIGTSTP (Ctrl-Z), SIGTTIN and\n"
    "SIGTTOU stop the command's group and then fence; SIGCONT continues both.\n"
    "A stopped fence renews nothing: stopped longer than the lease's validity,\n"
    "the lease is lost.  A watchdog process, in a process group of its own and\n"
    "not stopped with fence (not even by a SIGSTOP sent to fence alone), then\n"
    "SIGKILLs the command's group 100ms after the validity ran out; continued,\n"
    "fence exits 76.\n"
    "\n"
    "Limits.  The command runs in a process group of its own, with\n"
    "PR_SET_PDEATHSIG=SIGKILL, so it dies with fence even when fence is killed\n"
    "with SIGKILL.  What the command starts is covered less well: a process that\n"
    "leaves the group (setsid, setpgid) is not signalled when the lease is lost,\n"
    "and, since the parent-death signal is not inherited, a grandchild outlives\n"
    "a fence killed with SIGKILL unless it sets its own (a shell's `exec` keeps\n"
    "it: `sh -c 'exec cmd'`).  Processes the command leaves running after it\n"
    "exits are not covered by the lease.  Only the fencing token protects writes\n"
    "from such stragglers.  The command is not in the terminal's foreground\n"
    "group, so a command that reads from the terminal stops (SIGTTIN): give it\n"
    "input from a file or a pipe.  The command inherits the file descriptors\n"
    "fence was started with, not the ones fence opens (its Redis sockets).\n"
    "fence is a child subreaper while the command runs: orphans of the command\n"
    "are reaped by fence, and go to init when fence exits.\n";

/* The library's I/O timeout (fence_client_options.io_timeout_ms 0), and
 * the least one fence run sets on its client (see cli__cmd_run). */
#define LIB_IO_TIMEOUT_MS 2000
#define IO_TIMEOUT_FLOOR_MS 500

typedef struct {
    cli__conn conn;
    const char *name;
    const char *metrics_file;
    int64_t ttl_ms;
    int64_t wait_ms;
    int64_t kill_after_ms;
    int64_t max_hold_ms; /* 0: no limit */
    int allow_eviction;
    int min_replicas;
    int64_t replica_timeout_ms; /* 0: the library's default */
    int token_mode;
    int quiet;
    int conflict_exit; /* the exit status when the lease is busy */
    char **cmd;
} run_args;

static int dur_opt(cli__argv *a, const char *arg, const char *name, int64_t max, int64_t *out)
{
    const char *v = cli__optval(a, arg, name);
    const char *why = NULL;
    if (v == NULL) {
        return CLI_EX_USAGE;
    }
    if (cli__parse_duration(v, max, out, &why) != 0) {
        return cli__usage_error("run", "%s '%s': %s", name, v, why);
    }
    return CLI_EX_OK;
}

/* The options of the Redis client (token mode, eviction, the WAIT gate):
 * 1 when arg was one (*ex set), 0 when not. */
static int client_opt(cli__argv *a, const char *arg, run_args *ra, int *ex)
{
    const char *v = NULL;
    uint64_t n = 0;
    *ex = CLI_EX_OK;
    if (strcmp(arg, "--allow-eviction") == 0) {
        ra->allow_eviction = 1;
    } else if (cli__is_opt(arg, "--min-replicas")) {
        v = cli__optval(a, arg, "--min-replicas");
        if (v == NULL) {
            *ex = CLI_EX_USAGE;
        } else if (cli__parse_u64(v, FENCE_MIN_REPLICAS_MAX, &n) != 0) {
            *ex = cli__usage_error("run", "--min-replicas '%s': a number from 0 to %d", v,
                                   FENCE_MIN_REPLICAS_MAX);
        }
        ra->min_replicas = (int)n;
    } else if (cli__is_opt(arg, "--replica-timeout")) {
        *ex = dur_opt(a, arg, "--replica-timeout", FENCE_REPLICA_TIMEOUT_MAX_MS,
                      &ra->replica_timeout_ms);
        if (*ex == CLI_EX_OK && ra->replica_timeout_ms < 1) {
            *ex = cli__usage_error("run", "--replica-timeout must be at least 1ms");
        }
    } else if (cli__is_opt(arg, "--token-mode")) {
        v = cli__optval(a, arg, "--token-mode");
        if (v == NULL) {
            *ex = CLI_EX_USAGE;
        } else if (strcmp(v, "clock") == 0 || strcmp(v, "dense") == 0) {
            ra->token_mode = v[0] == 'd' ? FENCE_TOKENS_DENSE : FENCE_TOKENS_CLOCK;
        } else {
            *ex = cli__usage_error("run", "--token-mode '%s': clock or dense", v);
        }
    } else {
        return 0;
    }
    return 1;
}

/* The value of short option -X at arg: "-Xvalue" or "-X value"; NULL
 * (after a message) when there is none. */
static const char *short_val(cli__argv *a, const char *arg)
{
    if (arg[2] != '\0') {
        return arg + 2;
    }
    if (a->i + 1 >= a->argc) {
        cli__usage_error(a->cmd, "option '%s' needs a value", arg);
        return NULL;
    }
    return a->argv[++a->i];
}

/* The habits of flock(1): -w/--wait, -q/--quiet, -E/--conflict-exit-code.
 * 1 when arg was one (*ex set), 0 when not. */
static int habit_opt(cli__argv *a, const char *arg, run_args *ra, int *ex)
{
    const char *why = NULL, *v;
    uint64_t n = 0;
    *ex = CLI_EX_OK;
    if (strcmp(arg, "-q") == 0 || strcmp(arg, "--quiet") == 0) {
        ra->quiet = 1;
    } else if (cli__is_opt(arg, "--wait")) {
        *ex = dur_opt(a, arg, "--wait", FENCE_WAIT_MAX_MS, &ra->wait_ms);
    } else if (strncmp(arg, "-w", 2) == 0) {
        v = short_val(a, arg);
        if (v == NULL) {
            *ex = CLI_EX_USAGE;
        } else if (cli__parse_duration(v, FENCE_WAIT_MAX_MS, &ra->wait_ms, &why) != 0) {
            *ex = cli__usage_error("run", "-w '%s': %s", v, why);
        }
    } else if (cli__is_opt(arg, "--conflict-exit-code") || strncmp(arg, "-E", 2) == 0) {
        v = arg[1] == 'E' ? short_val(a, arg) : cli__optval(a, arg, "--conflict-exit-code");
        if (v == NULL) {
            *ex = CLI_EX_USAGE;
        } else if (cli__parse_u64(v, 255, &n) != 0) {
            *ex = cli__usage_error("run", "--conflict-exit-code '%s': a number from 0 to 255",
                                   v);
        }
        ra->conflict_exit = (int)n;
    } else {
        return 0;
    }
    return 1;
}

/* What parse() checks once every option is read. */
static int parse_end(run_args *ra)
{
    if (ra->replica_timeout_ms > 0 && ra->min_replicas == 0) {
        return cli__usage_error("run", "--replica-timeout needs --min-replicas N (N > 0)");
    }
    if (ra->name == NULL) {
        return cli__usage_error("run", "missing the lease NAME");
    }
    int ex = cli__check_name("run", ra->name);
    if (ex != CLI_EX_OK) {
        return ex;
    }
    if (ra->cmd == NULL) {
        return cli__usage_error("run", "missing '--' and the COMMAND after it");
    }
    if (ra->cmd[0] == NULL) {
        return cli__usage_error("run", "missing the COMMAND after '--'");
    }
    if (ra->cmd[0][0] == '\0') {
        return cli__usage_error("run", "the COMMAND is an empty string");
    }
    return ra->metrics_file != NULL ? cli__metrics_check(ra->metrics_file) : CLI_EX_OK;
}

/* Returns CLI_EX_OK, CLI_EX_USAGE, or -1 for --help. */
static int parse(int argc, char **argv, run_args *ra)
{
    cli__argv a = {argc, argv, 1, "run"};
    memset(ra, 0, sizeof *ra);
    ra->ttl_ms = CLI_DEFAULT_TTL_MS;
    ra->kill_after_ms = CLI_DEFAULT_KILL_AFTER_MS;
    ra->conflict_exit = CLI_EX_TEMPFAIL;
    int ex = CLI_EX_OK;
    for (; a.i < argc; a.i++) {
        const char *arg = argv[a.i];
        if (strcmp(arg, "--") == 0) {
            ra->cmd = argv + a.i + 1;
            break;
        } else if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            return -1;
        } else if (cli__is_opt(arg, "--ttl")) {
            ex = dur_opt(&a, arg, "--ttl", FENCE_TTL_MAX_MS, &ra->ttl_ms);
            if (ex == CLI_EX_OK && ra->ttl_ms < FENCE_TTL_MIN_MS) {
                ex = cli__usage_error("run", "--ttl must be at least %dms", FENCE_TTL_MIN_MS);
            }
        } else if (cli__is_opt(arg, "--kill-after")) {
            ex = dur_opt(&a, arg, "--kill-after", CLI_KILL_AFTER_MAX_MS, &ra->kill_after_ms);
        } else if (cli__is_opt(arg, "--max-hold")) {
            ex = dur_opt(&a, arg, "--max-hold", CLI_MAX_HOLD_MAX_MS, &ra->max_hold_ms);
            if (ex == CLI_EX_OK && ra->max_hold_ms < 1) {
                ex = cli__usage_error("run", "--max-hold must be at least 1ms");
            }
        } else if (cli__is_opt(arg, "--metrics-file")) {
            ra->metrics_file = cli__optval(&a, arg, "--metrics-file");
            if (ra->metrics_file == NULL) {
                return CLI_EX_USAGE;
            }
            if (ra->metrics_file[0] == '\0') {
                return cli__usage_error("run", "--metrics-file: empty path");
            }
        } else if (habit_opt(&a, arg, ra, &ex) || client_opt(&a, arg, ra, &ex) ||
                   cli__conn_opt(&a, arg, &ra->conn, &ex)) {
            /* ex set */
        } else if (arg[0] == '-' && arg[1] != '\0') {
            return cli__usage_error("run", "unknown option '%s'", arg);
        } else if (ra->name == NULL) {
            ra->name = arg;
        } else {
            return cli__usage_error("run", "unexpected argument '%s': put the command after "
                                    "'--' (fence run NAME -- COMMAND ...)", arg);
        }
        if (ex != CLI_EX_OK) {
            return ex;
        }
    }
    return parse_end(ra);
}

/* "held by another owner" with what inspect can tell (nothing with
 * --quiet); returns the busy exit status (75, or -E's). */
static int report_busy(fence_client *c, const run_args *ra, int rc)
{
    if (ra->quiet) {
        return ra->conflict_exit;
    }
    char wait[64] = "";
    if (rc == FENCE_TIMEOUT) {
        snprintf(wait, sizeof wait, " after waiting %" PRId64 "ms", ra->wait_ms);
    }
    fence_lease_info li;
    if (fence_lease_inspect_info(c, ra->name, &li) == FENCE_OK && li.held) {
        fprintf(stderr, "fence run: lease '%s' is held by another owner%s (holder token %" PRIu64
                ", expires in %" PRId64 "ms%s", ra->name, wait, li.holder_token, li.pttl_ms,
                li.holder_info[0] != '\0' ? "; " : "");
        cli__put_printable(stderr, li.holder_info);
        fputs(")\n", stderr);
    } else {
        fprintf(stderr, "fence run: lease '%s' is held by another owner%s\n", ra->name, wait);
    }
    return ra->conflict_exit;
}

/* "host=<hostname> pid=<pid> since=<ISO-8601 UTC>" into buf (printable
 * ASCII, as fence_lease_options.holder_info must be). */
static void holder_info(char *buf, size_t size)
{
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') {
        snprintf(host, sizeof host, "unknown");
    }
    host[128] = '\0';
    for (char *p = host; *p != '\0'; p++) {
        if (*p <= 0x20 || *p >= 0x7f) {
            *p = '?';
        }
    }
    char since[32] = "unknown";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm) != NULL) {
        strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    snprintf(buf, size, "host=%.128s pid=%ld since=%.31s", host, (long)getpid(), since);
}

/*
 * Acquire.  The first attempt is made with the signals blocked, so the
 * heartbeat thread starts with them blocked.  While waiting (--wait) they
 * are unblocked with their usual actions, so Ctrl-C ends a long wait.
 */
static int acquire(fence_client *c, const run_args *ra, const sigset_t *sigs,
                   fence_lease **out)
{
    char info[FENCE_HOLDER_INFO_MAX + 1];
    holder_info(info, sizeof info);
    fence_lease_options lo;
    fence_lease_options_init(&lo, ra->ttl_ms);
    lo.on_lost = cli__on_lost;
    lo.holder_info = info;
    int64_t start = fence__now_ns() / 1000000;
    int rc = fence_acquire(c, ra->name, &lo, out);
    if (rc == FENCE_BUSY && ra->wait_ms > 0) {
        int64_t left = ra->wait_ms - (fence__now_ns() / 1000000 - start);
        if (left > 0) {
            lo.wait_ms = left;
            pthread_sigmask(SIG_UNBLOCK, sigs, NULL);
            rc = fence_acquire(c, ra->name, &lo, out);
            pthread_sigmask(SIG_BLOCK, sigs, NULL);
        } else {
            rc = FENCE_TIMEOUT;
        }
    }
    if (rc == FENCE_BUSY || rc == FENCE_TIMEOUT) {
        return report_busy(c, ra, rc);
    }
    if (rc != FENCE_OK) {
        return cli__fail("run", c, "cannot acquire the lease", rc);
    }
    int64_t behind = fence_lease_clock_behind_us(*out);
    if (behind > 0) {
        fprintf(stderr, "fence run: warning: the Redis server's clock is %.3f s behind the "
                "clock that issued lease '%s''s last token; the token was issued above it "
                "(docs/redis.md, \"Clocks\")\n", (double)behind / 1e6, ra->name);
    }
    return CLI_EX_OK;
}

static int run_locked(fence_client *c, fence_lease **leasep, const run_args *ra,
                      const sigset_t *sigs, const sigset_t *start_mask)
{
    fence_lease *lease = *leasep;
    uint64_t token = fence_lease_token(lease);
    cli__spawn *sp = cli__spawn_prepare(ra->cmd, ra->name, token, fence_lease_holder(lease),
                                        start_mask);
    if (sp == NULL) {
        return CLI_EX_OSERR;
    }
    if (cli__lost_reason() != 0) {
        cli__spawn_free(sp);
        fprintf(stderr, "fence run: lease '%s' lost before the command started: %s\n",
                ra->name, cli__lost_why(cli__lost_reason()));
        return CLI_EX_LOST;
    }
    cli__install_handlers();
    /* Orphans of the command come to us, not to init: we reap them, so
     * "the group is empty" can be seen even where init leaves zombies. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    int exec_errno = 0;
    pid_t pid = cli__spawn_run(sp, &exec_errno);
    int searched = cli__spawn_searched(sp);
    cli__spawn_free(sp);
    if (pid == -2) {
        fprintf(stderr, "fence run: cannot start the command: %s\n", strerror(errno));
        return CLI_EX_OSERR;
    }
    if (pid == -1) {
        if (exec_errno == ENOENT && searched) {
            fprintf(stderr, "fence run: %s: command not found\n", ra->cmd[0]);
        } else {
            fprintf(stderr, "fence run: %s: %s\n", ra->cmd[0], strerror(exec_errno));
        }
        return exec_errno == ENOENT ? CLI_EX_NOTFOUND : CLI_EX_NOEXEC;
    }
    pthread_sigmask(SIG_UNBLOCK, sigs, NULL);
    int was_lost = 0;
    cli__sup_args sa = {.pid = pid, .lease = lease, .name = ra->name, .ttl_ms = ra->ttl_ms,
                        .kill_after_ms = ra->kill_after_ms, .max_hold_ms = ra->max_hold_ms};
    int ex = cli__supervise(&sa, &was_lost);
    pthread_sigmask(SIG_BLOCK, sigs, NULL);

    int rc = fence_release(lease);
    *leasep = NULL;
    /* After release no callback can come any more: a loss that raced with
     * the command's exit shows in lost_reason (or in release's answer),
     * whatever the reason, and still means the command ran unleased. */
    int reason = cli__lost_reason();
    if ((rc == FENCE_LOST || reason != 0) && !was_lost) {
        fprintf(stderr, "fence run: lease '%s' was lost before the command ended (%s); it may "
                "have run unleased for a moment\n", ra->name,
                reason != 0 ? cli__lost_why(reason)
                            : "at release its key had expired or had another owner");
        ex = CLI_EX_LOST;
    }
    if (rc != FENCE_OK && rc != FENCE_LOST && reason == FENCE_ECONN) {
        /* Lost because Redis did not answer: its validity, and so (but for
         * the clock-drift margin) the key's TTL, had run out before the
         * command was stopped. */
        fprintf(stderr, "fence run: Redis still did not answer, so the key of lease '%s' was "
                "not deleted; it has expired by its TTL, or does so within moments (%s)\n",
                ra->name, fence_client_errmsg(c));
    } else if (rc != FENCE_OK && rc != FENCE_LOST) {
        fprintf(stderr, "fence run: could not release lease '%s' (%s: %s); it expires "
                "within %" PRId64 "ms\n", ra->name, fence_strerror(rc), fence_client_errmsg(c),
                ra->ttl_ms);
    }
    return ex;
}

int cli__cmd_run(int argc, char **argv)
{
    run_args ra;
    int ex = parse(argc, argv, &ra);
    if (ex == -1) {
        fputs(cli__run_help, stdout);
        return CLI_EX_OK;
    }
    if (ex != CLI_EX_OK) {
        return ex;
    }

    /* Block before any thread exists (see the top of the file). */
    sigset_t sigs, start_mask;
    sigemptyset(&sigs);
    for (int i = 0; i < cli__nforward_signals; i++) {
        sigaddset(&sigs, cli__forward_signals[i]);
    }
    for (int i = 0; i < cli__njobctl_signals; i++) {
        sigaddset(&sigs, cli__jobctl_signals[i]);
    }
    sigaddset(&sigs, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &sigs, &start_mask);
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, NULL);

    if (cli__pipes_open() != 0) {
        perror("fence run: pipe");
        cli__pipes_close();
        return CLI_EX_OSERR;
    }
    fence_client *c = NULL;
    fence_client_options co;
    fence_client_options_init(&co);
    co.allow_eviction = ra.allow_eviction;
    co.min_replicas = ra.min_replicas;
    co.replica_timeout_ms = ra.replica_timeout_ms;
    co.token_mode = ra.token_mode;
    /* A reply that takes longer than the TTL is worthless: an acquire
     * answered then gives a lease already expired, and a release after a
     * loss to an unanswering Redis (the key's TTL has run out) would only
     * delay fence's exit.  So no call waits longer than the TTL (never
     * below IO_TIMEOUT_FLOOR_MS, for a busy machine; the heartbeat is
     * bounded by the lease's validity anyway). */
    if (ra.ttl_ms < LIB_IO_TIMEOUT_MS) {
        co.io_timeout_ms = ra.ttl_ms > IO_TIMEOUT_FLOOR_MS ? (int)ra.ttl_ms : IO_TIMEOUT_FLOOR_MS;
    }
    ex = cli__conn_open("run", &ra.conn, &co, &c);
    fence_lease *lease = NULL;
    if (ex == CLI_EX_OK) {
        ex = acquire(c, &ra, &sigs, &lease);
    }
    if (ex == CLI_EX_OK && lease != NULL) { /* NULL: busy, with -E 0 */
        ex = run_locked(c, &lease, &ra, &sigs, &start_mask);
    }
    if (lease != NULL) {
        fence_release(lease);
    }
    if (c != NULL && ra.metrics_file != NULL) {
        cli__metrics_write(c, ra.metrics_file, ra.name);
    }
    fence_client_close(c);
    cli__pipes_close();
    return ex;
}
