/*
 * watchdog.c -- `fence run`'s watchdog: a small process that SIGKILLs the
 * command's process group when the lease's validity has run out and fence
 * did not say otherwise -- so the command never outlives the lease even
 * while fence itself is stopped (SIGSTOP stops every thread of fence, the
 * heartbeat with them, but not the watchdog).
 *
 * The watchdog is forked by fence's main thread right after the command
 * started.  It is in a process group of its own (a terminal's Ctrl-Z
 * reaches fence's group, not it; a signal sent to fence's pid is fence's
 * alone), blocks every signal (SIGKILL still ends it), and dies with fence
 * (PR_SET_PDEATHSIG).  The two share one page (MAP_SHARED, made before the
 * fork): fence writes there the instant, on CLOCK_MONOTONIC (one clock for
 * every process), after which the command must be gone: the lease's
 * validity end plus CLI_WATCHDOG_SLACK_MS while the lease is held (updated
 * by supervise.c's loop, which wakes often enough), its own SIGKILL time
 * plus the slack once it stops the command itself.  The watchdog sleeps
 * until that instant, reads it again, and when it has not moved, SIGKILLs
 * the group.  Forked from a threaded process, it calls only
 * async-signal-safe functions.
 *
 * Its process title is its own ("fence-watchdog for fence P, command C",
 * in /proc/PID/cmdline over its copy of fence's argv, and comm
 * "fence-watchdog"), so pgrep -f / pkill -f on fence's command line never
 * find it.  A watchdog that dies before its time (killed by someone) is
 * seen by fence's loop as soon as it is reaped and replaced at once on the
 * same page (supervise.c); one that cannot be replaced makes fence stop
 * the command.
 */
#include "cli.h"
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    atomic_llong deadline_ms; /* CLOCK_MONOTONIC milliseconds */
    atomic_int fired;         /* the watchdog SIGKILLed the group */
} shared;

static shared *sh;
static pid_t dog = -1;
static pid_t dog_group = -1;
/* fence's argv strings (one block, argv[0] first: /proc/PID/cmdline), which
 * the watchdog overwrites with its own title, so that pgrep -f / pkill -f
 * on fence's command line never find it; found and written before the
 * fork, so the child only copies bytes. */
static char *argv_area;
static size_t argv_len;
static char title[80];

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Where fence's argv lies: from argv[0] (glibc's program_invocation_name
 * is that very pointer), as long as /proc/self/cmdline says, when the
 * block really ends there with a NUL.  Otherwise the title is comm only. */
static void find_argv(void)
{
    char buf[4096];
    size_t len = 0;
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return;
    }
    for (;;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got <= 0) {
            break;
        }
        len += (size_t)got;
    }
    close(fd);
    char *start = program_invocation_name;
    if (start != NULL && len > 0 && start[len - 1] == '\0') {
        argv_area = start;
        argv_len = len;
    }
}

/* The child's title: its /proc/PID/cmdline and comm (async-signal-safe:
 * bytes copied, one prctl). */
static void set_title(void)
{
    if (argv_area != NULL) {
        size_t n = strlen(title);
        if (n >= argv_len) {
            n = argv_len - 1;
        }
        memcpy(argv_area, title, n);
        memset(argv_area + n, 0, argv_len - n);
    }
    prctl(PR_SET_NAME, "fence-watchdog");
}

/* The watchdog's life (the child; async-signal-safe calls only). */
static void watch(pid_t group, pid_t parent)
{
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL); /* fence's handlers are not ours */
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) {
        _exit(0); /* fence is already gone */
    }
    set_title();
    for (;;) {
        int64_t d = atomic_load(&sh->deadline_ms);
        if (mono_ms() >= d) {
            atomic_store(&sh->fired, 1);
            kill(-group, SIGKILL); /* also ends a stopped group */
            _exit(0);
        }
        struct timespec ts = {(time_t)(d / 1000), (long)(d % 1000) * 1000000L};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    }
}

/* Fork a watchdog on the shared page: 0, or -1 with errno. */
static int spawn(void)
{
    pid_t parent = getpid();
    /* No handler of fence's may run in the child before it blocks them
     * (it would write into fence's signal pipe). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t p = fork();
    if (p == 0) {
        watch(dog_group, parent);
    }
    int e = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (p < 0) {
        errno = e;
        return -1;
    }
    dog = p;
    return 0;
}

int cli__watchdog_start(pid_t group, int64_t deadline_ms)
{
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        sh = NULL;
        return -1;
    }
    atomic_store(&sh->deadline_ms, (long long)deadline_ms);
    atomic_store(&sh->fired, 0);
    dog_group = group;
    snprintf(title, sizeof title, "fence-watchdog for fence %ld, command %ld", (long)getpid(),
             (long)group);
    find_argv();
    if (spawn() != 0) {
        int e = errno;
        munmap(sh, sizeof *sh);
        sh = NULL;
        errno = e;
        return -1;
    }
    return 0;
}

int cli__watchdog_restart(void)
{
    return sh != NULL && dog < 0 && !atomic_load(&sh->fired) ? spawn() : -1;
}

pid_t cli__watchdog_pid(void)
{
    return dog;
}

void cli__watchdog_set(int64_t deadline_ms)
{
    if (sh != NULL) {
        atomic_store(&sh->deadline_ms, (long long)deadline_ms);
    }
}

int64_t cli__watchdog_now_ms(void)
{
    return mono_ms();
}

int cli__watchdog_reaped(pid_t w)
{
    if (w <= 0 || w != dog) {
        return 0;
    }
    dog = -1; /* reaped: never signal a pid that may be reused */
    return sh != NULL && atomic_load(&sh->fired) ? 1 : 2;
}

int cli__watchdog_stop(void)
{
    int fired = 0;
    if (dog > 0) {
        kill(dog, SIGKILL);
        while (waitpid(dog, NULL, 0) < 0 && errno == EINTR) {
        }
        dog = -1; /* (reaped here, or already by supervise.c's reap()) */
    }
    if (sh != NULL) {
        fired = atomic_load(&sh->fired);
        munmap(sh, sizeof *sh);
        sh = NULL;
    }
    return fired;
}
