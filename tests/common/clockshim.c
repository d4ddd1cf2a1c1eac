/* clockshim.c -- an LD_PRELOAD shim that skews a process's clocks, for
 * the tests of skewed clocks (tests/lease/test_skew.c).  The control file
 * and the formulas: clockshim.h.
 *
 * Why not libfaketime: Debian's 0.9.10 recurses in clock_gettime while
 * redis-server starts (its jemalloc reads the clock before libfaketime has
 * found the real function with dlsym), and Redis never listens.  Here the
 * real clocks come from the raw system call, so nothing is looked up and
 * nothing allocates: the shim works from the very first call.
 */
#include "clockshim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define SHIM_API __attribute__((visibility("default")))

/* The mapped record; NO_FILE when FENCE_CLOCKSHIM is unset (pass through),
 * NULL before the first look. */
static const struct clockshim_rec *const NO_FILE = (const struct clockshim_rec *)1;
static _Atomic(const struct clockshim_rec *) rec_ptr;

static void die(const char *what)
{
    /* No stdio: this may run before the C library is fully set up. */
    static const char pre[] = "clockshim: ";
    ssize_t ignored = write(2, pre, sizeof pre - 1);
    ignored = write(2, what, strlen(what));
    ignored = write(2, "\n", 1);
    (void)ignored;
    _exit(70);
}

static const struct clockshim_rec *rec(void)
{
    const struct clockshim_rec *r = atomic_load_explicit(&rec_ptr, memory_order_acquire);
    if (r != NULL) {
        return r;
    }
    const char *path = getenv(CLOCKSHIM_ENV);
    if (path == NULL || path[0] == '\0') {
        r = NO_FILE;
    } else {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            die("cannot open the file named by FENCE_CLOCKSHIM");
        }
        struct stat st;
        if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(struct clockshim_rec)) {
            die("the file named by FENCE_CLOCKSHIM is shorter than a record (64 bytes)");
        }
        void *m = mmap(NULL, sizeof(struct clockshim_rec), PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        if (m == MAP_FAILED) {
            die("cannot map the file named by FENCE_CLOCKSHIM");
        }
        r = m;
        if (r->magic != CLOCKSHIM_MAGIC) {
            die("the file named by FENCE_CLOCKSHIM is not a clockshim record");
        }
    }
    /* Two threads may both map it: one mapping wins, the other goes. */
    const struct clockshim_rec *expected = NULL;
    if (!atomic_compare_exchange_strong(&rec_ptr, &expected, r)) {
        if (r != NO_FILE) {
            munmap((void *)(uintptr_t)r, sizeof(struct clockshim_rec));
        }
        r = expected;
    }
    return r;
}

/* Read the file early, so that a bad one stops the process at once. */
__attribute__((constructor)) static void shim_init(void)
{
    (void)rec();
}

static int raw_clock(clockid_t id, struct timespec *ts)
{
    return (int)syscall(SYS_clock_gettime, id, ts);
}

static int64_t ts_ns(const struct timespec *ts)
{
    return (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

static void ns_ts(int64_t ns, struct timespec *ts)
{
    int64_t s = ns / 1000000000LL, rem = ns % 1000000000LL;
    if (rem < 0) {
        rem += 1000000000LL;
        s--;
    }
    ts->tv_sec = (time_t)s;
    ts->tv_nsec = (long)rem;
}

enum kind { PASS, WALL, MONO };

static enum kind kind_of(clockid_t id)
{
    switch (id) {
    case CLOCK_REALTIME:
    case CLOCK_REALTIME_COARSE:
        return WALL;
    case CLOCK_MONOTONIC:
    case CLOCK_MONOTONIC_COARSE:
    case CLOCK_MONOTONIC_RAW:
    case CLOCK_BOOTTIME:
        return MONO;
    default:
        return PASS;
    }
}

/* The shift (ns) to add to the real clock of kind K read at real
 * monotonic time MONO_NS. */
static int64_t shift_ns(const struct clockshim_rec *r, enum kind k, int64_t mono_ns)
{
    for (;;) {
        uint32_t s1 = atomic_load_explicit((const _Atomic uint32_t *)&r->seq, memory_order_acquire);
        if (s1 & 1u) {
            continue; /* a writer is halfway */
        }
        int64_t anchor = r->anchor_ns;
        int64_t off = k == WALL ? r->wall_offset_ns : r->mono_offset_ns;
        double rate = k == WALL ? r->wall_rate : r->mono_rate;
        atomic_thread_fence(memory_order_acquire);
        uint32_t s2 = atomic_load_explicit((const _Atomic uint32_t *)&r->seq, memory_order_relaxed);
        if (s1 == s2) {
            return off + (int64_t)((double)(mono_ns - anchor) * (rate - 1.0));
        }
    }
}

static int shim_clock(clockid_t id, struct timespec *ts)
{
    enum kind k = kind_of(id);
    const struct clockshim_rec *r = rec();
    if (k == PASS || r == NO_FILE) {
        return raw_clock(id, ts);
    }
    struct timespec real, mono;
    if (raw_clock(id, &real) != 0) {
        return -1;
    }
    if (k == MONO && id == CLOCK_MONOTONIC) {
        mono = real;
    } else if (raw_clock(CLOCK_MONOTONIC, &mono) != 0) {
        return -1;
    }
    ns_ts(ts_ns(&real) + shift_ns(r, k, ts_ns(&mono)), ts);
    return 0;
}

SHIM_API int clock_gettime(clockid_t id, struct timespec *ts)
{
    return shim_clock(id, ts); /* ts: nonnull in glibc's declaration */
}

SHIM_API int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    if (tz != NULL) {
        memset(tz, 0, 2 * sizeof(int)); /* struct timezone: no zone, as Linux */
    }
    struct timespec ts; /* tv: nonnull in glibc's declaration */
    if (shim_clock(CLOCK_REALTIME, &ts) != 0) {
        return -1;
    }
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

SHIM_API time_t time(time_t *out)
{
    struct timespec ts;
    if (shim_clock(CLOCK_REALTIME, &ts) != 0) {
        return (time_t)-1;
    }
    if (out != NULL) {
        *out = ts.tv_sec;
    }
    return ts.tv_sec;
}

SHIM_API int timespec_get(struct timespec *ts, int base)
{
    if (base != TIME_UTC || shim_clock(CLOCK_REALTIME, ts) != 0) {
        return 0;
    }
    return base;
}
