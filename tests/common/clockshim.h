/* clockshim.h -- the control file of tests/common/clockshim.so, the tests'
 * own LD_PRELOAD clock shim, and a writer for it.
 *
 * A process started with
 *     LD_PRELOAD=$FENCE_BUILD/tests/common/clockshim.so
 *     FENCE_CLOCKSHIM=/path/of/a/control/file
 * reads its clocks through the shim: clock_gettime(), gettimeofday(),
 * time() and timespec_get() answer the real clock (read by the raw system
 * call, never the vDSO nor dlsym, so nothing recurses at start-up) shifted
 * and scaled by the record below, which the shim maps MAP_SHARED and reads
 * again at every call: rewriting the file changes the clocks of a live
 * process at once.  With FENCE_CLOCKSHIM unset the shim passes the real
 * clocks through; set but not a valid control file, the process is
 * stopped at its first clock read (exit 70, a line on stderr).
 *
 * The file: one struct clockshim_rec (64 bytes, host byte order).  With
 * R and M the real CLOCK_REALTIME and CLOCK_MONOTONIC in ns and
 * E = M - anchor_ns (the real time elapsed since the anchor):
 *     wall clocks (REALTIME, REALTIME_COARSE, gettimeofday, time)
 *         = R + wall_offset_ns + E * (wall_rate - 1)
 *     monotonic clocks (MONOTONIC, MONOTONIC_COARSE, MONOTONIC_RAW,
 *     BOOTTIME)
 *         = M + mono_offset_ns + E * (mono_rate - 1)
 * so at the anchor the offsets hold and from there each clock runs at its
 * rate (1.0: real speed; 0.5: half speed; 1.01: 1% fast).  seq is a
 * seqlock: odd while a writer is changing the record.  Other clocks (the
 * CPU-time ones) pass through.  Not translated: absolute waits
 * (pthread_cond_timedwait, clock_nanosleep TIMER_ABSTIME, sem_timedwait)
 * compare the shimmed deadline with the kernel's real clock; a program
 * whose monotonic clock is scaled should wait with relative timeouts (the
 * tests' skewed client uses FENCE_HEARTBEAT_MANUAL).
 */
#ifndef FENCE_CLOCKSHIM_H
#define FENCE_CLOCKSHIM_H
#include <stdint.h>

#define CLOCKSHIM_MAGIC 0x48534b43u /* "CKSH" */
#define CLOCKSHIM_ENV "FENCE_CLOCKSHIM"

struct clockshim_rec {
    uint32_t magic;         /* CLOCKSHIM_MAGIC */
    uint32_t seq;           /* seqlock: even when stable */
    int64_t anchor_ns;      /* real CLOCK_MONOTONIC at which the offsets hold */
    int64_t wall_offset_ns; /* wall clocks' offset at the anchor */
    int64_t mono_offset_ns; /* monotonic clocks' offset at the anchor */
    double wall_rate;       /* the wall clocks' speed from the anchor on */
    double mono_rate;       /* the monotonic clocks' speed from the anchor on */
    int64_t reserved[2];
};
_Static_assert(sizeof(struct clockshim_rec) == 64, "the documented size");

/* Test-side writer (tests/common/clockshim_ctl.c). */

/* Create (or truncate) the control file PATH: offset WALL_OFFSET_US on the
 * wall clocks, no monotonic offset, both rates given, anchored now.
 * Returns 0, or -1 with errno. */
int clockshim_create(const char *path, int64_t wall_offset_us, double wall_rate,
                     double mono_rate);

/* Step the wall clocks of every process using PATH by STEP_US (negative:
 * backwards) now, keeping their rates; the monotonic clocks are left
 * continuous.  Returns 0, or -1 with errno. */
int clockshim_step(const char *path, int64_t step_us);

/* The wall-clock offset (µs) the processes of PATH see now. */
int64_t clockshim_wall_offset_us(const char *path);

#endif
