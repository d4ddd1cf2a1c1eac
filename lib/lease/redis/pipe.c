/* pipe.c -- many requests in flight on one connection.  A request is the
 * replies of the commands one caller appended; commands go out as they
 * come, replies are handed to their requests in the order they were sent.
 *
 * The core (fence__pipe_step, _events, _deadline) never blocks: an event
 * loop drives it (the asynchronous API), or the blocking callers drive it
 * themselves (fence__pipe_wait): one waiting caller at a time does the
 * I/O for everyone, the others sleep until their own request finishes or
 * their own deadline passes.  A caller that gives up leaves its request
 * behind as a placeholder, so the replies after it still find their
 * owners; its own reply is freed when it comes.
 *
 * Two clocks, kept apart: a caller's deadline is its own business (it
 * fails that caller only); the connection is given up only when the
 * server has sent nothing for the head request's allowance (the I/O
 * timeout, plus WAIT's) -- then every waiting request fails, since a
 * reply that comes later could no longer be matched to its request.
 *
 * The driver is woken, never re-polls: while it waits in poll() (without
 * the lock) a caller that queues bytes writes to the pipe's eventfd, which
 * the driver polls beside the socket, and the driver sends everything
 * queued at once.  It reads only when poll() says the socket is readable,
 * and a reply nobody asked for is looked for in what was already read, and
 * on a connection reused after more than IDLE_CHECK_US of quiet: no system
 * call is spent on either in a busy loop. */
#include "redis.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* A connection quiet this long is read before it is used again: what a
 * server (or a proxy) sent meanwhile is a reply nobody asked for. */
#define IDLE_CHECK_US 1000

int fence__pipe_init(fence__pipe *p)
{
    memset(p, 0, sizeof *p);
    p->wake_fd = -1;
    return fence__cond_init_monotonic(&p->cond);
}

void fence__pipe_destroy(fence__pipe *p)
{
    fence__pipe_fail_all(p, "the connection was closed", 0);
    fence__tr_close(&p->cn);
    if (p->wake_fd >= 0) {
        close(p->wake_fd);
        p->wake_fd = -1;
    }
    pthread_cond_destroy(&p->cond);
}

fence__req *fence__req_new(int want, int64_t allow_us)
{
    if (want < 1 || want > FENCE__REQ_MAX) {
        return NULL;
    }
    fence__req *q = calloc(1, sizeof *q);
    if (q != NULL) {
        q->want = want;
        q->allow_us = allow_us > 0 ? allow_us : 1;
    }
    return q;
}

void fence__req_free(fence__req *q)
{
    if (q == NULL) {
        return;
    }
    for (int i = 0; i < q->got; i++) {
        if (q->reply[i] != NULL) {
            freeReplyObject(q->reply[i]);
        }
    }
    free(q);
}

void *fence__req_take(fence__req *q, int i)
{
    void *r = i >= 0 && i < q->got ? q->reply[i] : NULL;
    if (r != NULL) {
        q->reply[i] = NULL;
    }
    return r;
}

/* q has left the queue, DONE or FAILED: hand it over (free it, call its
 * callback, or wake its blocking caller -- that one alone). */
static void finish(fence__req *q)
{
    if (q->abandoned) {
        fence__req_free(q);
    } else if (q->done != NULL) {
        q->done(q, q->arg);
    } else if (q->wake != NULL) {
        pthread_cond_signal(q->wake);
    }
}

int fence__pipe_fail_all(fence__pipe *p, const char *why, int timed_out)
{
    int n = 0;
    fence__req *q = p->head;
    p->head = p->tail = NULL;
    /* Replies still on their way could not be matched any more: the
     * connection is done for. */
    if (p->cn != NULL && p->cn->err == 0) {
        p->cn->err = 1;
        p->cn->timed_out = timed_out;
        snprintf(p->cn->errstr, sizeof p->cn->errstr, "%s", why);
    }
    while (q != NULL) {
        fence__req *next = q->next;
        q->state = FENCE__REQ_FAILED;
        q->timed_out = timed_out;
        snprintf(q->errstr, sizeof q->errstr, "%s", why);
        finish(q);
        q = next;
        n++;
    }
    return n;
}

int fence__pipe_idle_check(fence__pipe *p)
{
    fence__conn *cn = p->cn;
    void *r = NULL;
    short ev = 0;
    int got = fence__tr_try_reply(cn, &r, &ev);
    if (got > 0) {
        freeReplyObject(r);
        snprintf(cn->errstr, sizeof cn->errstr, "a reply nobody asked for");
        cn->err = 1;
    }
    return cn->err ? -1 : 0;
}

/* Bytes were queued while another caller drives: wake it (its poll() then
 * sends them with whatever else is queued).  Without an eventfd (none could
 * be made), write them ourselves. */
static void nudge(fence__pipe *p)
{
    if (!p->polling || p->woken) {
        return;
    }
    if (p->wake_fd >= 0 && eventfd_write(p->wake_fd, 1) == 0) {
        p->woken = 1;
        return;
    }
    short ev = 0;
    if (fence__tr_send_some(p->cn, &ev) != 0) {
        fence__pipe_fail_all(p, p->cn->errstr, 0);
    }
}

void fence__pipe_submit(fence__pipe *p, fence__req *q, int write_now)
{
    q->next = NULL;
    q->state = FENCE__REQ_WAITING;
    int64_t now = fence__now_us();
    if (p->cn != NULL && p->cn->err == 0 && p->head == NULL &&
        now - p->idle_since_us > IDLE_CHECK_US) {
        fence__pipe_idle_check(p);
    }
    if (p->cn == NULL || p->cn->err) {
        q->state = FENCE__REQ_FAILED;
        snprintf(q->errstr, sizeof q->errstr, "%s",
                 p->cn != NULL ? p->cn->errstr : "not connected");
        return;
    }
    if (p->head == NULL) {
        p->head = q;
        p->quiet_since_us = now;
    } else {
        p->tail->next = q;
    }
    p->tail = q;
    short ev = 0;
    if (write_now && fence__tr_send_some(p->cn, &ev) != 0) {
        fence__pipe_fail_all(p, p->cn->errstr, 0);
    } else if (p->driving) {
        nudge(p);
    }
}

/* A reply for the head request; 1 if that finished it. */
static int deliver(fence__pipe *p, void *r)
{
    fence__req *q = p->head;
    q->reply[q->got++] = r;
    p->quiet_since_us = fence__now_us();
    if (q->got < q->want) {
        return 0;
    }
    p->head = q->next;
    if (p->head == NULL) {
        p->tail = NULL;
    }
    q->next = NULL;
    q->state = FENCE__REQ_DONE;
    finish(q);
    return 1;
}

/* One step: send what is queued, read (when may_read: the socket may have
 * something), hand out replies, fail on errors and quiet. */
static int step(fence__pipe *p, int may_read)
{
    fence__conn *cn = p->cn;
    if (cn == NULL || p->head == NULL) {
        return 0;
    }
    int finished = 0;
    short ev = 0;
    if (cn->err == 0 && cn->olen > 0) {
        fence__tr_send_some(cn, &ev);
    }
    while (may_read && cn->err == 0 && p->head != NULL) {
        void *r = NULL;
        if (fence__tr_try_reply(cn, &r, &ev) <= 0) {
            break;
        }
        finished += deliver(p, r);
    }
    if (cn->err == 0 && p->head == NULL) {
        /* Nothing waits, yet the server may have said more in what was read
         * already: a reply no request asked for is a broken server or
         * proxy.  (What comes later is read before the next use:
         * fence__pipe_submit.) */
        void *r = NULL;
        p->idle_since_us = fence__now_us();
        if (fence__tr_parsed(cn, &r) > 0) {
            freeReplyObject(r);
            snprintf(cn->errstr, sizeof cn->errstr, "a reply nobody asked for");
            cn->err = 1;
        }
    }
    if (cn->err != 0) {
        finished += fence__pipe_fail_all(p, cn->errstr, cn->timed_out);
    } else if (p->head != NULL && fence__now_us() >= fence__pipe_deadline(p)) {
        finished += fence__pipe_fail_all(p, "Resource temporarily unavailable (timed out)", 1);
    }
    return finished;
}

int fence__pipe_step(fence__pipe *p)
{
    return step(p, 1);
}

short fence__pipe_events(const fence__pipe *p)
{
    if (p->cn == NULL || p->cn->err || p->head == NULL) {
        return 0;
    }
    /* Reading is always wanted while a request waits (TLS may also need
     * it to finish a write); writing while bytes are queued. */
    return (short)(POLLIN | (p->cn->olen > 0 ? POLLOUT : 0));
}

int64_t fence__pipe_deadline(const fence__pipe *p)
{
    return p->head != NULL ? p->quiet_since_us + p->head->allow_us : INT64_MAX;
}

/* Wait (no lock held) until the connection fd is ready for ev, the wake-up
 * fd wfd (-1: none) is readable, or until_us: whether fd is readable (or
 * failed). */
static int wait_two(int fd, short ev, int wfd, int64_t until_us)
{
    struct pollfd pf[2] = {{fd, ev, 0}, {wfd, POLLIN, 0}};
    for (;;) {
        int64_t left = until_us - fence__now_us();
        int ms = left <= 0 ? 0 : left > 1000000 ? 1000 : (int)((left + 999) / 1000);
        int n = poll(pf, wfd >= 0 ? 2 : 1, ms);
        if (n > 0) {
            return (pf[0].revents & (POLLIN | POLLERR | POLLHUP | POLLNVAL)) != 0;
        }
        if ((n < 0 && errno != EINTR) || (n == 0 && fence__now_us() >= until_us)) {
            return n < 0;
        }
    }
}

/* Do the I/O until q finishes or deadline_us passes (lk held on entry and
 * exit, released while polling).  The connection stays open meanwhile:
 * it is only closed while nobody drives. */
static void drive(fence__pipe *p, pthread_mutex_t *lk, fence__req *q, int64_t deadline_us)
{
    p->driving = 1;
    if (p->wake_fd < 0) {
        p->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    }
    int readable = 0;
    for (;;) {
        step(p, readable); /* finished requests' callers are woken one by one */
        int64_t now = fence__now_us();
        if (q->state != FENCE__REQ_WAITING || now >= deadline_us) {
            break;
        }
        int64_t until = fence__pipe_deadline(p);
        until = until < deadline_us ? until : deadline_us;
        if (p->wake_fd < 0 && until > now + 1000) {
            /* No eventfd could be made: the others write their own bytes
             * (nudge), and we look at what they queued every ms. */
            until = now + 1000;
        }
        short ev = fence__pipe_events(p);
        int fd = p->cn->fd, wfd = p->wake_fd;
        p->polling = 1;
        pthread_mutex_unlock(lk);
        readable = wait_two(fd, ev, wfd, until);
        pthread_mutex_lock(lk);
        p->polling = 0;
        if (p->woken) {
            eventfd_t v;
            eventfd_read(p->wake_fd, &v);
            p->woken = 0;
        }
    }
    p->driving = 0;
    /* Hand the I/O to the next caller still waiting, if any; and tell
     * whoever waits to replace a failed connection that we left it. */
    for (fence__req *w = p->head; w != NULL; w = w->next) {
        if (w->wake != NULL && !w->abandoned) {
            pthread_cond_signal(w->wake);
            break;
        }
    }
    pthread_cond_broadcast(&p->cond);
}

/* Each blocking caller sleeps on a condition variable of its own thread,
 * so that a reply wakes its caller alone (no herd on one variable). */
static _Thread_local pthread_cond_t tl_wake;
static _Thread_local int tl_wake_ok;

int fence__pipe_wait(fence__pipe *p, pthread_mutex_t *lk, fence__req *q, int64_t deadline_us)
{
    if (!tl_wake_ok) {
        tl_wake_ok = fence__cond_init_monotonic(&tl_wake) == 0 ? 1 : -1;
    }
    /* Without a variable of its own (cannot happen on Linux), the caller
     * polls: it drives whenever nobody does, else looks again in 1 ms. */
    q->wake = tl_wake_ok == 1 ? &tl_wake : NULL;
    for (;;) {
        if (q->state != FENCE__REQ_WAITING) {
            q->wake = NULL;
            return 0;
        }
        int64_t now = fence__now_us();
        if (now >= deadline_us) {
            q->wake = NULL;
            q->abandoned = 1;
            return -1;
        }
        if (!p->driving) {
            drive(p, lk, q, deadline_us);
            continue;
        }
        int64_t until = q->wake != NULL ? deadline_us : (now + 1000 < deadline_us ? now + 1000 : deadline_us);
        struct timespec ts = fence__timespec_ns(until * 1000);
        pthread_cond_timedwait(q->wake != NULL ? q->wake : &p->cond, lk, &ts);
    }
}
