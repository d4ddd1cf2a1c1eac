/* clockshim_ctl.c -- the tests' writer of clockshim control files (the
 * format: clockshim.h).  The test process itself runs on the real clocks;
 * it writes the record with one pwrite() between two seq bumps, and the
 * shims that map the file read it again at their next clock call. */
#include "clockshim.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int64_t real_ns(clockid_t id)
{
    /* The raw call: right even if this process were under the shim. */
    struct timespec ts;
    syscall(SYS_clock_gettime, id, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int put(int fd, const struct clockshim_rec *r)
{
    return pwrite(fd, r, sizeof *r, 0) == (ssize_t)sizeof *r ? 0 : -1;
}

static int put_seq(int fd, uint32_t seq)
{
    return pwrite(fd, &seq, sizeof seq, offsetof(struct clockshim_rec, seq)) ==
                   (ssize_t)sizeof seq
               ? 0
               : -1;
}

/* Write R over the file's record: first the seq alone made odd (readers
 * retry from then on), then the record, then the seq even again. */
static int publish(int fd, struct clockshim_rec *r)
{
    r->magic = CLOCKSHIM_MAGIC;
    r->seq |= 1u;
    if (put_seq(fd, r->seq) != 0 || put(fd, r) != 0) {
        return -1;
    }
    r->seq++;
    return put_seq(fd, r->seq);
}

int clockshim_create(const char *path, int64_t wall_offset_us, double wall_rate,
                     double mono_rate)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        return -1;
    }
    struct clockshim_rec r;
    memset(&r, 0, sizeof r);
    r.anchor_ns = real_ns(CLOCK_MONOTONIC);
    r.wall_offset_ns = wall_offset_us * 1000;
    r.wall_rate = wall_rate;
    r.mono_rate = mono_rate;
    int rc = publish(fd, &r);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* The shift of a clock at real monotonic time NOW (as the shim computes it). */
static int64_t shift_at(int64_t off, double rate, int64_t anchor, int64_t now)
{
    return off + (int64_t)((double)(now - anchor) * (rate - 1.0));
}

int clockshim_step(const char *path, int64_t step_us)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    struct clockshim_rec r;
    int rc = -1;
    if (pread(fd, &r, sizeof r, 0) == (ssize_t)sizeof r && r.magic == CLOCKSHIM_MAGIC) {
        /* Re-anchor now, each clock where it is, then step the wall. */
        int64_t now = real_ns(CLOCK_MONOTONIC);
        r.wall_offset_ns = shift_at(r.wall_offset_ns, r.wall_rate, r.anchor_ns, now) +
                           step_us * 1000;
        r.mono_offset_ns = shift_at(r.mono_offset_ns, r.mono_rate, r.anchor_ns, now);
        r.anchor_ns = now;
        rc = publish(fd, &r);
    } else {
        errno = EINVAL;
    }
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

int64_t clockshim_wall_offset_us(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    struct clockshim_rec r;
    int64_t off = 0;
    if (pread(fd, &r, sizeof r, 0) == (ssize_t)sizeof r && r.magic == CLOCKSHIM_MAGIC) {
        off = shift_at(r.wall_offset_ns, r.wall_rate, r.anchor_ns, real_ns(CLOCK_MONOTONIC)) / 1000;
    }
    close(fd);
    return off;
}
