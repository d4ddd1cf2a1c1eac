/*
 * cli.h -- what the files of the `fence` command-line tool share.
 * Internal names start with cli__.  Not installed.
 */
#ifndef FENCE_CLI_H
#define FENCE_CLI_H

#include "fence.h"

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

/* Exit statuses (sysexits.h where one fits). */
enum {
    CLI_EX_OK = 0,
    CLI_EX_USAGE = 64,       /* bad flags, bad durations, missing NAME or command */
    CLI_EX_UNAVAILABLE = 69, /* Redis unreachable, refused our credentials, or misbehaved */
    CLI_EX_SOFTWARE = 70,    /* anything else that failed inside fence */
    CLI_EX_OSERR = 71,       /* fork, pipe or another system call failed */
    CLI_EX_TEMPFAIL = 75,    /* the lease is held by someone else (after --wait) */
    CLI_EX_LOST = 76,        /* the lease was lost while the command ran */
    CLI_EX_CONFIG = 78,      /* Redis's configuration can lose fencing state (allkeys-*) */
    CLI_EX_NOEXEC = 126,     /* the command was found but could not be executed */
    CLI_EX_NOTFOUND = 127    /* the command was not found */
};

#define CLI_DEFAULT_URL "redis://127.0.0.1:6379"
#define CLI_DEFAULT_TTL_MS 10000
#define CLI_DEFAULT_KILL_AFTER_MS 5000
#define CLI_KILL_AFTER_MAX_MS (86400000LL) /* one day */

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

/* --redis, else $FENCE_REDIS_URL (when not empty), else the default. */
const char *cli__redis_url(const char *given);

/* ---- client.c: opening a client and mapping errors -------------------- */

/* The exit status for a fence status code. */
int cli__exit_for(int status);

/*
 * Open a client with options o (o->url set).  On failure prints "fence
 * CMD: what: detail" (never a password), closes what was opened and
 * returns the exit status (64 bad URL or option, 69 unreachable or refused).
 */
int cli__open(const char *cmd, const fence_client_options *o, fence_client **out);
/* cli__open() with default options for url. */
int cli__open_url(const char *cmd, const char *url, fence_client **out);

/* Print "fence CMD: what: detail" for a failed call on c; returns the exit
 * status for rc. */
int cli__fail(const char *cmd, fence_client *c, const char *what, int rc);

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
/* Wait for the command pid; pass signals on to its group; stop it if the
 * lease is lost (SIGTERM, SIGKILL after kill_after_ms).  Returns the exit
 * status (CLI_EX_LOST when lost), and *was_lost. */
int cli__supervise(pid_t pid, const char *name, int64_t kill_after_ms, int *was_lost);

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
