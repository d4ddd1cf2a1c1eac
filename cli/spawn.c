/*
 * spawn.c -- starting the command.  Everything the child needs is made
 * before fork(): the heartbeat thread exists by then, so the child may only
 * call async-signal-safe functions until it execs (no malloc, no stdio, no
 * locks).  That is why the PATH search is done here in the parent, and the
 * child only tries execve() on the prepared candidates.
 */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

const int cli__forward_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
const int cli__nforward_signals = (int)(sizeof cli__forward_signals / sizeof(int));
const int cli__jobctl_signals[] = {SIGTSTP, SIGTTIN, SIGTTOU, SIGCONT};
const int cli__njobctl_signals = (int)(sizeof cli__jobctl_signals / sizeof(int));

/* ---- what fence found at start ------------------------------------------ */

/* Signals whose disposition fence may change: the forwarded ones, SIGCHLD
 * (a handler while the command runs), SIGPIPE (ignored: a Redis socket
 * closing under a write must not kill fence) and job control (stopping
 * fence stops the command's group too; continuing continues it). */
static const int touched[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD,
                              SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU, SIGCONT};
#define NTOUCHED ((int)(sizeof touched / sizeof touched[0]))
static struct sigaction start_action[NTOUCHED];

void cli__dispositions_snapshot(void)
{
    for (int i = 0; i < NTOUCHED; i++) {
        sigaction(touched[i], NULL, &start_action[i]);
    }
}

int cli__ignored_at_start(int sig)
{
    for (int i = 0; i < NTOUCHED; i++) {
        if (touched[i] == sig) {
            return start_action[i].sa_handler == SIG_IGN;
        }
    }
    return 0;
}

/* File descriptors open when fence started, sorted: the command inherits
 * these (so `fence run x -- cmd 3>file` works) and nothing fence opened
 * later (Redis sockets, self-pipes).  hiredis does not open its sockets
 * with SOCK_CLOEXEC, so they would leak into the command otherwise. */
static int *start_fds;
static size_t nstart_fds;

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

void cli__fds_snapshot(void)
{
    size_t cap = 16;
    start_fds = malloc(cap * sizeof *start_fds);
    if (start_fds == NULL) {
        return; /* then the child keeps only 0, 1, 2 */
    }
    DIR *d = opendir("/proc/self/fd");
    if (d != NULL) {
        int self = dirfd(d);
        for (;;) {
            struct dirent *e = readdir(d);
            if (e == NULL) {
                break;
            }
            char *end;
            long fd = strtol(e->d_name, &end, 10);
            if (e->d_name[0] == '.' || *end != '\0' || fd < 3 || fd == self) {
                continue;
            }
            if (nstart_fds == cap) {
                int *v = realloc(start_fds, 2 * cap * sizeof *v);
                if (v == NULL) {
                    break;
                }
                start_fds = v;
                cap *= 2;
            }
            start_fds[nstart_fds++] = (int)fd;
        }
        closedir(d);
    } else {
        /* No /proc: probe the low descriptors. */
        for (int fd = 3; fd < 1024; fd++) {
            if (fcntl(fd, F_GETFD) != -1) {
                if (nstart_fds == cap) {
                    int *v = realloc(start_fds, 2 * cap * sizeof *v);
                    if (v == NULL) {
                        break;
                    }
                    start_fds = v;
                    cap *= 2;
                }
                start_fds[nstart_fds++] = fd;
            }
        }
    }
    qsort(start_fds, nstart_fds, sizeof *start_fds, cmp_int);
}

void cli__fds_free(void)
{
    free(start_fds);
    start_fds = NULL;
    nstart_fds = 0;
}

/* ---- the plan ---------------------------------------------------------- */

struct cli__spawn {
    char **argv;      /* the command's argv (borrowed from main's argv) */
    char **envp;      /* the environment, with FENCE_TOKEN, FENCE_NAME, FENCE_HOLDER,
                       * without Redis passwords */
    char *env_token;  /* "FENCE_TOKEN=N" */
    char *env_name;   /* "FENCE_NAME=..." */
    char *env_holder; /* "FENCE_HOLDER=<32 hex>" */
    char **cands;     /* paths to try, in order */
    size_t ncands;
    int searched;     /* argv[0] had no '/': cands come from PATH */
    char **sh_argv;   /* "/bin/sh" CAND ARGS... for ENOEXEC, like execvp */
    int *keep;        /* sorted descriptors >= 3 the child keeps */
    size_t nkeep;
    sigset_t mask;    /* the child's signal mask */
    long open_max;    /* for closing by hand when close_range is missing */
};

void cli__spawn_free(cli__spawn *sp)
{
    if (sp == NULL) {
        return;
    }
    free(sp->envp);
    free(sp->env_token);
    free(sp->env_name);
    free(sp->env_holder);
    for (size_t i = 0; i < sp->ncands; i++) {
        free(sp->cands[i]);
    }
    free(sp->cands);
    free(sp->sh_argv);
    free(sp->keep);
    free(sp);
}

static int has_key(const char *entry, const char *key)
{
    size_t n = strlen(key);
    return strncmp(entry, key, n) == 0 && entry[n] == '=';
}

static int build_env(cli__spawn *sp, const char *name, uint64_t token, const char *holder)
{
    size_t n = 0;
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        n++;
    }
    sp->envp = calloc(n + 4, sizeof *sp->envp);
    size_t len = strlen("FENCE_NAME=") + strlen(name) + 1;
    size_t hlen = strlen("FENCE_HOLDER=") + strlen(holder) + 1;
    sp->env_name = malloc(len);
    sp->env_token = malloc(32);
    sp->env_holder = malloc(hlen);
    if (sp->envp == NULL || sp->env_name == NULL || sp->env_token == NULL ||
        sp->env_holder == NULL) {
        return -1;
    }
    snprintf(sp->env_name, len, "FENCE_NAME=%s", name);
    snprintf(sp->env_token, 32, "FENCE_TOKEN=%" PRIu64, token);
    snprintf(sp->env_holder, hlen, "FENCE_HOLDER=%s", holder);
    size_t k = 0;
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        /* Redis credentials never reach the command (cli__secrets_init
         * already unset these; this is the second lock). */
        if (!has_key(*e, "FENCE_TOKEN") && !has_key(*e, "FENCE_NAME") &&
            !has_key(*e, "FENCE_HOLDER") && !has_key(*e, "FENCE_REDIS_PASSWORD") &&
            !has_key(*e, "FENCE_REDIS_SENTINEL_PASSWORD") &&
            !(has_key(*e, "FENCE_REDIS_URL") && cli__url_has_password(strchr(*e, '=') + 1))) {
            sp->envp[k++] = *e;
        }
    }
    sp->envp[k++] = sp->env_token;
    sp->envp[k++] = sp->env_name;
    sp->envp[k++] = sp->env_holder;
    sp->envp[k] = NULL;
    return 0;
}

static int add_cand(cli__spawn *sp, const char *dir, size_t dlen, const char *file)
{
    size_t flen = strlen(file);
    char *p = malloc(dlen + 1 + flen + 1);
    if (p == NULL) {
        return -1;
    }
    if (dlen == 0) {
        memcpy(p, file, flen + 1); /* an empty PATH entry is the current folder */
    } else {
        memcpy(p, dir, dlen);
        p[dlen] = '/';
        memcpy(p + dlen + 1, file, flen + 1);
    }
    sp->cands[sp->ncands++] = p;
    return 0;
}

static int build_cands(cli__spawn *sp)
{
    const char *file = sp->argv[0];
    if (strchr(file, '/') != NULL) {
        sp->cands = calloc(1, sizeof *sp->cands);
        return sp->cands == NULL ? -1 : add_cand(sp, "", 0, file);
    }
    sp->searched = 1;
    const char *path = getenv("PATH");
    if (path == NULL) {
        path = "/bin:/usr/bin"; /* glibc's default */
    }
    size_t n = 1;
    for (const char *p = path; *p != '\0'; p++) {
        n += *p == ':';
    }
    sp->cands = calloc(n, sizeof *sp->cands);
    if (sp->cands == NULL) {
        return -1;
    }
    for (const char *p = path;;) {
        const char *end = strchr(p, ':');
        size_t dlen = end != NULL ? (size_t)(end - p) : strlen(p);
        if (add_cand(sp, p, dlen, file) != 0) {
            return -1;
        }
        if (end == NULL) {
            break;
        }
        p = end + 1;
    }
    return 0;
}

cli__spawn *cli__spawn_prepare(char **argv, const char *name, uint64_t token, const char *holder,
                               const sigset_t *restore_mask)
{
    cli__spawn *sp = calloc(1, sizeof *sp);
    if (sp == NULL) {
        fprintf(stderr, "fence run: out of memory\n");
        return NULL;
    }
    sp->argv = argv;
    sp->mask = *restore_mask;
    sp->open_max = sysconf(_SC_OPEN_MAX);
    if (sp->open_max < 0 || sp->open_max > 65536) {
        sp->open_max = 65536;
    }
    size_t argc = 0;
    while (argv[argc] != NULL) {
        argc++;
    }
    sp->sh_argv = calloc(argc + 2, sizeof *sp->sh_argv);
    sp->keep = malloc((nstart_fds + 1) * sizeof *sp->keep);
    if (sp->sh_argv == NULL || sp->keep == NULL || build_env(sp, name, token, holder) != 0 ||
        build_cands(sp) != 0) {
        fprintf(stderr, "fence run: out of memory\n");
        cli__spawn_free(sp);
        return NULL;
    }
    sp->sh_argv[0] = "/bin/sh";
    for (size_t i = 1; i < argc; i++) {
        sp->sh_argv[i + 1] = argv[i];
    }
    return sp;
}

int cli__spawn_searched(const cli__spawn *sp)
{
    return sp->searched;
}

/* ---- the child: async-signal-safe only ------------------------------------- */

static void close_from_to(const cli__spawn *sp, unsigned lo, unsigned hi)
{
    if (lo > hi) {
        return;
    }
#ifdef SYS_close_range
    if (syscall(SYS_close_range, lo, hi, 0) == 0) {
        return;
    }
#endif
    for (long fd = lo; fd <= (long)hi && fd < sp->open_max; fd++) {
        close((int)fd);
    }
}

static void child_close_fds(const cli__spawn *sp)
{
    unsigned lo = 3;
    for (size_t i = 0; i < sp->nkeep; i++) {
        unsigned k = (unsigned)sp->keep[i];
        if (k >= lo) {
            if (k > lo) {
                close_from_to(sp, lo, k - 1);
            }
            lo = k + 1;
        }
    }
    close_from_to(sp, lo, ~0U);
}

static int keep_searching(int e)
{
    return e == ENOENT || e == ENOTDIR || e == ESTALE || e == ENODEV || e == ETIMEDOUT ||
           e == EACCES;
}

static void child(cli__spawn *sp, int errfd, pid_t parent)
{
    /* Dispositions back to what fence found (a handler would write into
     * the parent's pipes); every signal is still blocked here. */
    for (int i = 0; i < NTOUCHED; i++) {
        sigaction(touched[i], &start_action[i], NULL);
    }
    setpgid(0, 0);
    /* Die with fence.  The death signal is tied to the thread that forked
     * (fence's main thread, which lives until fence exits).  If fence died
     * before this line, getppid() is no longer it: give up at once. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) {
        _exit(CLI_EX_LOST);
    }
    child_close_fds(sp);
    sigprocmask(SIG_SETMASK, &sp->mask, NULL);

    int err = ENOENT, saw_eacces = 0;
    for (size_t i = 0; i < sp->ncands; i++) {
        execve(sp->cands[i], sp->argv, sp->envp);
        int e = errno;
        if (e == ENOEXEC) {
            /* Like execvp: a file without a #! line is a shell script. */
            sp->sh_argv[1] = sp->cands[i];
            execve("/bin/sh", sp->sh_argv, sp->envp);
            e = errno;
        }
        if (e == EACCES) {
            saw_eacces = 1;
        }
        if (!sp->searched || !keep_searching(e)) {
            err = e;
            saw_eacces = 0;
            break;
        }
    }
    if (saw_eacces) {
        err = EACCES;
    }
    ssize_t w;
    do {
        w = write(errfd, &err, sizeof err);
    } while (w < 0 && errno == EINTR);
    _exit(err == ENOENT ? CLI_EX_NOTFOUND : CLI_EX_NOEXEC);
}

pid_t cli__spawn_run(cli__spawn *sp, int *exec_errno)
{
    int ep[2];
    *exec_errno = 0;
    if (pipe2(ep, O_CLOEXEC) != 0) {
        return -2;
    }
    /* The descriptors the child keeps: those open at start, plus the
     * close-on-exec pipe that reports a failed exec. */
    sp->nkeep = 0;
    for (size_t i = 0; i < nstart_fds; i++) {
        sp->keep[sp->nkeep++] = start_fds[i];
    }
    sp->keep[sp->nkeep++] = ep[1];
    qsort(sp->keep, sp->nkeep, sizeof *sp->keep, cmp_int);

    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(ep[0]);
        close(ep[1]);
        errno = e;
        return -2;
    }
    if (pid == 0) {
        close(ep[0]);
        child(sp, ep[1], parent);
    }
    /* Also from this side, so the group exists before we signal it. */
    setpgid(pid, pid);
    close(ep[1]);
    int err = 0;
    ssize_t n;
    do {
        n = read(ep[0], &err, sizeof err);
    } while (n < 0 && errno == EINTR);
    close(ep[0]);
    if (n == (ssize_t)sizeof err) {
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        *exec_errno = err;
        return -1;
    }
    return pid;
}
