/*
 * cli.h -- what the files of the `fence` command-line tool share.
 * Internal names start with cli__.  Not installed.
 */
#ifndef FENCE_CLI_H
#define FENCE_CLI_H

#include "fence.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Exit statuses (sysexits.h where one fits). */
enum {
    CLI_EX_OK = 0,
    CLI_EX_USAGE = 64,       /* bad flags, bad durations, missing NAME or command */
    CLI_EX_UNAVAILABLE = 69, /* the server unreachable, refused our credentials, or misbehaved */
    CLI_EX_SOFTWARE = 70,    /* anything else that failed inside fence */
    CLI_EX_OSERR = 71,       /* fork, pipe or another system call failed */
    CLI_EX_TEMPFAIL = 75,    /* the lease is held by someone else (after --wait) */
    CLI_EX_LOST = 76,        /* the lease was lost while the command ran */
    CLI_EX_MAXHOLD = 77,     /* the command outlived --max-hold and was stopped */
    CLI_EX_CONFIG = 78,      /* the server's configuration can lose fencing state (an evicting
                              * maxmemory-policy), or the name's counter is another token mode's */
    CLI_EX_NOEXEC = 126,     /* the command was found but could not be executed */
    CLI_EX_NOTFOUND = 127    /* the command was not found */
};

#define CLI_DEFAULT_URL "redis://127.0.0.1:6379"
#define CLI_DEFAULT_TTL_MS 10000
#define CLI_DEFAULT_KILL_AFTER_MS 5000
#define CLI_KILL_AFTER_MAX_MS (86400000LL) /* one day */
#define CLI_MAX_HOLD_MAX_MS FENCE_WAIT_MAX_MS /* --max-hold: 7 days, as --wait */

/* The connection options' help (every subcommand takes them). */
#define CLI_CONN_HELP                                                                         \
    "Connection options:\n"                                                                  \
    "  --url URL            the issuer, by the URL's scheme: Redis:\n"                       \
    "  --redis URL          redis://[user:password@]host[:port][/db],\n"                    \
    "                       rediss://... (TLS), unix:///path[?db=N] or\n"                   \
    "                       redis-sentinel://[[user:]password@]host[:port][,host...][/db]#master;\n" \
    "                       PostgreSQL: postgresql://[user@]host[:port]/db[?fence_wait=poll]\n" \
    "                       (libpq's URI form; fence.sql 7 in that database; etcd:// is\n"   \
    "                       refused as not available in this build; default $FENCE_URL,\n" \
    "                       else $FENCE_REDIS_URL, else " CLI_DEFAULT_URL ")\n"           \
    "  --password-file FILE the server's password, the one line in FILE, a regular\n"      \
    "                       file (not a FIFO, pipe or device; default, for Redis URLs:\n"  \
    "                       $FENCE_REDIS_PASSWORD, else the URL's; a password in a\n"      \
    "                       URL on the command line is blanked from fence's argv,\n"       \
    "                       with a warning: others may have seen it)\n"                     \
    "  --sentinel-password-file FILE  the Sentinels' own password, for a\n"                \
    "                       redis-sentinel:// URL (default\n"                                \
    "                       $FENCE_REDIS_SENTINEL_PASSWORD)\n"                              \
    "  --tls                TLS (also implied by rediss://)\n"                              \
    "  --cacert FILE        CA bundle (PEM) to verify the server ($FENCE_REDIS_CACERT;\n"   \
    "                       default: the system's)\n"                                       \
    "  --cacertdir DIR      CA folder ($FENCE_REDIS_CACERTDIR)\n"                          \
    "  --cert FILE          client certificate, for mutual TLS ($FENCE_REDIS_CERT)\n"       \
    "  --key FILE           its private key ($FENCE_REDIS_KEY)\n"                          \
    "  --sni NAME           server name to send and verify ($FENCE_REDIS_SNI;\n"            \
    "                       default: the URL's host)\n"                                     \
    "  --insecure           do not verify the server's certificate (unsafe)\n"

/* ---- args.c: parsing ------------------------------------------------ */

/*
 * Parse a duration into milliseconds: a decimal number with an optional
 * fraction and a unit, "250ms", "10s", "1.5s", "2m", "1h", "1d"; a bare
 * number is seconds.  The whole part follows the one decimal grammar of
 * common.h (digits, no sign, no leading zero: "010s" and ".5s" are
 * refused); at most 9 decimals.  Rejects a sign, junk ("10x", "s", ""), a
 * value finer than a millisecond and anything above max_ms.  0 on success
 * (*out_ms set), -1 with a reason in *why (static text) otherwise.  s may
 * be NULL; never crashes on any NUL-terminated text.  (The fuzzer's entry
 * point: keep this signature.)
 */
int cli__parse_duration(const char *s, int64_t max_ms, int64_t *out_ms, const char **why);

/* Parse a plain unsigned decimal (no sign, no spaces) up to max.  0 or -1. */
int cli__parse_u64(const char *s, uint64_t max, uint64_t *out);

/*
 * Command-line walker for one subcommand.  cli__next() returns the next
 * argument: *opt is set for "--name" or "--name=value" (and "-h"), else
 * the argument is positional.  "--" ends the options (*dashdash = 1).
 */
typedef struct cli__argv {
    int argc;
    char **argv;
    int i;
    const char *cmd; /* the subcommand, for messages */
} cli__argv;

/* The value of the option at argv[i] ("--x=v" or "--x v"); NULL (after a
 * message on stderr) when it has none. */
const char *cli__optval(cli__argv *a, const char *arg, const char *name);

/* Print "fence CMD: message" to stderr; returns CLI_EX_USAGE. */
int cli__usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A lease name fence can use (non-empty, at most FENCE_NAME_MAX bytes, no
 * control characters); else prints why and returns CLI_EX_USAGE. */
int cli__check_name(const char *cmd, const char *name);

/* --url / --redis, else $FENCE_URL, else $FENCE_REDIS_URL, as fence
 * started with them (when not empty), else the default. */
const char *cli__url(const char *given);

/* Write s to f with every byte outside printable ASCII as '?' (text that
 * came from Redis and must not drive a terminal). */
void cli__put_printable(FILE *f, const char *s);

/* Whether arg is "--name" or "--name=...". */
int cli__is_opt(const char *arg, const char *name);

/* ---- secrets.c: credentials out of argv, environ and the command's env ---- */

/* First thing in main: copy $FENCE_REDIS_PASSWORD,
 * $FENCE_REDIS_SENTINEL_PASSWORD, $FENCE_URL and $FENCE_REDIS_URL,
 * overwrite their secret bytes in the environment block, unset the
 * password variables and put the URL variables back without credentials
 * (the command inherits those). */
void cli__secrets_init(void);
/* Wipe and free every copy (at exit). */
void cli__secrets_free(void);
/* The copies (NULL when unset or empty). */
const char *cli__env_url(void);       /* $FENCE_URL */
const char *cli__env_redis_url(void); /* $FENCE_REDIS_URL */
const char *cli__env_password(void);
const char *cli__env_sentinel_password(void);
/* Whether url has "[user:]password@" before its host(s). */
int cli__url_has_password(const char *url);
/* url without "user:password@" (malloc'ed; NULL when out of memory). */
char *cli__url_strip(const char *url);
/* val, a URL in fence's argv: when it holds a password, returns a copy and
 * overwrites the password's bytes in val (so /proc/PID/cmdline no longer
 * shows it), warning once on stderr.  Otherwise returns val. */
const char *cli__url_from_argv(char *val);
/* Read a one-line password file (a regular file: a FIFO, device or
 * directory is refused without blocking; one trailing newline cut; at most
 * 4096 bytes; not empty) into *out (kept until cli__secrets_free).  0, or
 * the exit status after a message (64). */
int cli__read_secret(const char *cmd, const char *opt, const char *path, const char **out);

/* ---- client.c: opening a client and mapping errors -------------------- */

/* The connection options every subcommand takes (--url / --redis, the
 * password files, TLS); NULL / 0: not given. */
typedef struct cli__conn {
    const char *url;
    const char *url_opt; /* which option gave it ("--url", "--redis") */
    const char *password_file, *sentinel_password_file;
    const char *cacert, *cacertdir, *cert, *key, *sni;
    int tls, insecure;
} cli__conn;

/* 1 when arg (at a->argv[a->i]) is a connection option (read into cc; *ex
 * is CLI_EX_OK or the usage error's status), 0 when not. */
int cli__conn_opt(cli__argv *a, const char *arg, cli__conn *cc, int *ex);
/* Fill o's URL, credentials and TLS fields from cc and the environment
 * (password: --password-file, else -- for a Redis URL -- $FENCE_REDIS_PASSWORD,
 * else the URL's; same for the Sentinels'; the $FENCE_REDIS_* TLS defaults
 * only for a Redis URL too), then cli__open(). */
int cli__conn_open(const char *cmd, const cli__conn *cc, fence_client_options *o,
                   fence_client **out);

/* The exit status for a fence status code. */
int cli__exit_for(int status);

/*
 * Open a client with options o (o->url set).  On failure prints "fence
 * CMD: what: detail" (never a password), closes what was opened and
 * returns the exit status (64 bad URL or option -- an option of another
 * issuer, an issuer this build lacks --, 69 unreachable or refused).
 */
int cli__open(const char *cmd, const fence_client_options *o, fence_client **out);

/* Print "fence CMD: what: detail" for a failed call on c; returns the exit
 * status for rc. */
int cli__fail(const char *cmd, fence_client *c, const char *what, int rc);
/* The status and message ("what: text: detail", never a password) of the
 * last cli__fail(); -1 and "" when none. */
int cli__last_failure(const char **msg);

/* ---- supervise.c: while the command runs ---------------------------------- */

/* The self-pipes (signal handlers -> main thread, on_lost -> main thread).
 * Open: 0, or -1 with errno. */
int cli__pipes_open(void);
void cli__pipes_close(void);
/* The lease's on_lost callback (heartbeat thread): note the reason, wake
 * the main thread. */
void cli__on_lost(fence_lease *lease, int reason, void *user);
/* 0, or the reason on_lost was given. */
int cli__lost_reason(void);
/* Why a lease was lost, for messages. */
const char *cli__lost_why(int reason);
/* Install the handlers that feed the signal pipe (not for signals ignored
 * at start), and SIGCHLD's. */
void cli__install_handlers(void);
/* What cli__supervise() watches. */
typedef struct cli__sup_args {
    pid_t pid;            /* the command (leader of its own process group) */
    fence_lease *lease;   /* its lease (read for the watchdog's deadline) */
    const char *name;
    int64_t ttl_ms, kill_after_ms;
    int64_t max_hold_ms;  /* 0: no limit */
} cli__sup_args;
/* Wait for the command; pass signals on to its group; stop it (SIGTERM,
 * SIGKILL after kill_after_ms) if the lease is lost or, with max_hold_ms >
 * 0, once it has run that long; keep the watchdog's deadline up to date
 * (watchdog.c) and stop the watchdog at the end.  Returns the exit status
 * (CLI_EX_LOST when lost, else CLI_EX_MAXHOLD when held out), and
 * *was_lost. */
int cli__supervise(const cli__sup_args *a, int *was_lost);

/* ---- watchdog.c: SIGKILL the command when the lease's validity ends ------- */

/* How long after the lease's validity end the watchdog strikes, so that
 * fence, when it is running, takes the loss first (its SIGTERM and
 * --kill-after grace). */
#define CLI_WATCHDOG_SLACK_MS 100
/* Fork the watchdog for the command's process group, with its first
 * deadline (CLOCK_MONOTONIC ms).  0, or -1 with errno. */
int cli__watchdog_start(pid_t group, int64_t deadline_ms);
/* Move the deadline (only fence's main thread). */
void cli__watchdog_set(int64_t deadline_ms);
/* CLOCK_MONOTONIC in milliseconds, the watchdog's clock. */
int64_t cli__watchdog_now_ms(void);
/* Tell the watchdog module that waitpid() returned pid w: 0 when it was
 * not the watchdog, 1 when it was and it had SIGKILLed the group, 2 when it
 * died before its time (killed by someone): replace it. */
int cli__watchdog_reaped(pid_t w);
/* Fork another watchdog on the same deadline (after 2 above): 0, or -1
 * with errno. */
int cli__watchdog_restart(void);
/* The watchdog's pid, or -1. */
pid_t cli__watchdog_pid(void);
/* Stop and reap the watchdog; returns whether it had SIGKILLed the group. */
int cli__watchdog_stop(void);

/* ---- metrics.c: --metrics-file ------------------------------------------- */

/* Before anything runs: PATH's folder exists and can be written into, and
 * PATH is not a folder.  0, or 64 after a message. */
int cli__metrics_check(const char *path);
/* Write c's metrics to path (atomically: path.tmp.PID renamed over it),
 * each series labelled lease="name"; a failure is reported on stderr. */
void cli__metrics_write(fence_client *c, const char *path, const char *name);

/* ---- the subcommands ---------------------------------------------------- */
int cli__cmd_run(int argc, char **argv);
int cli__cmd_status(int argc, char **argv);
int cli__cmd_token(int argc, char **argv);

extern const char cli__run_help[];
extern const char cli__status_help[];
extern const char cli__token_help[];

/* ---- spawn.c: fork and exec, prepared before the fork ---------------------- */

/*
 * Everything the child needs, made before fork() so that the child calls
 * only async-signal-safe functions: the environment, the candidate paths
 * for the command (the PATH search is done here), the file descriptors to
 * keep, and the signal dispositions to restore.
 */
typedef struct cli__spawn cli__spawn;

/* Record the file descriptors open now (call first thing in main): the
 * child inherits these and no others (the Redis sockets stay with us). */
void cli__fds_snapshot(void);
/* Free what cli__fds_snapshot() recorded (at exit). */
void cli__fds_free(void);

/* Build a spawn plan; NULL when out of memory (message printed). */
cli__spawn *cli__spawn_prepare(char **argv, const char *name, uint64_t token,
                               const char *holder, const sigset_t *restore_mask);
void cli__spawn_free(cli__spawn *sp);

/*
 * Fork and exec.  The child gets its own process group, PR_SET_PDEATHSIG
 * SIGKILL, the signal mask restore_mask and the dispositions it had when
 * fence started.  Returns the child's pid (> 0) once exec succeeded, or
 * -1 with *exec_errno set when exec failed (the child has been reaped),
 * or -2 when fork/pipe failed (errno set).
 */
pid_t cli__spawn_run(cli__spawn *sp, int *exec_errno);

/* Whether argv[0] was searched in PATH (for "command not found"). */
int cli__spawn_searched(const cli__spawn *sp);

/* The signals fence passes on to the command. */
extern const int cli__forward_signals[];
extern const int cli__nforward_signals;
/* Job control: SIGTSTP/SIGTTIN/SIGTTOU stop the command's group, then
 * fence; SIGCONT continues the group. */
extern const int cli__jobctl_signals[];
extern const int cli__njobctl_signals;

/* Remember the dispositions the forwarded signals (and SIGPIPE) had at
 * start, so the child gets them back (an ignored SIGHUP under nohup stays
 * ignored).  Returns whether sig was ignored at start. */
void cli__dispositions_snapshot(void);
int cli__ignored_at_start(int sig);

#endif /* FENCE_CLI_H */
