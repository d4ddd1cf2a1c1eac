/* pipe.h -- many requests in flight on one connection (pipe.c). */
#ifndef FENCE_PIPE_H
#define FENCE_PIPE_H

#include <pthread.h>
#include <stdint.h>

struct fence__conn;

/* One caller's share of a connection: the replies of `want` consecutive
 * commands it appended.  Heap-allocated (fence__req_new): a caller that
 * gives up leaves it to the pipe, which frees it once its replies came. */
#define FENCE__REQ_MAX 6
enum { FENCE__REQ_WAITING, FENCE__REQ_DONE, FENCE__REQ_FAILED };
typedef struct fence__req fence__req;
struct fence__req {
    int want, got;
    void *reply[FENCE__REQ_MAX]; /* redisReply *, in order (owned by the request) */
    int state;
    int timed_out;     /* FAILED because the connection went quiet too long */
    char errstr[256];  /* FAILED: why (no secrets) */
    int64_t allow_us;  /* how long its replies may take the server (I/O timeout, plus WAIT's) */
    int abandoned;     /* its caller left: free it when it finishes */
    void (*done)(fence__req *q, void *arg); /* event-loop use: called once it finishes */
    void *arg;
    fence__req *next;
};

/* A connection and the requests waiting on it, in order.  A connection is
 * used either this way or directly (fence__tr_reply), never both at once:
 * setup commands (AUTH, SELECT, SCRIPT LOAD) go first, directly. */
typedef struct fence__pipe {
    struct fence__conn *cn; /* NULL: not connected */
    fence__req *head, *tail;
    int64_t quiet_since_us; /* the last reply, or when the queue became non-empty */
    int driving;            /* a blocking caller is doing the I/O */
    pthread_cond_t cond;    /* a request finished, or the driver left */
} fence__pipe;

/* 0, or -1 (the condition variable could not be made). */
int fence__pipe_init(fence__pipe *p);
/* Fail every request, close the connection (nobody may be driving). */
void fence__pipe_destroy(fence__pipe *p);

/* A request for want (1..FENCE__REQ_MAX) replies; NULL out of memory. */
fence__req *fence__req_new(int want, int64_t allow_us);
/* Free q and its replies (NULL: no-op). */
void fence__req_free(fence__req *q);
/* Take reply i out of q (the caller frees it then). */
void *fence__req_take(fence__req *q, int i);

/* Queue q, whose commands the caller has just appended to p->cn; with
 * write_now, try to write them at once (blocking callers: a driver may be
 * polling without POLLOUT), else leave that to the next step (an event
 * loop writes everything queued in one go).  Not connected: q is FAILED
 * at once.  A write failure fails every waiting request, q included. */
void fence__pipe_submit(fence__pipe *p, fence__req *q, int write_now);

/* ---- the non-blocking core (an event loop, or the driver below) ---------- */
/* Write what can be written, read what has come, hand replies to their
 * requests in order (calling done callbacks), and fail every waiting
 * request when the connection fails or stays quiet past the head
 * request's allowance.  Returns how many requests finished. */
int fence__pipe_step(fence__pipe *p);
/* The poll(2) events the connection waits for now (0: nothing waits). */
short fence__pipe_events(const fence__pipe *p);
/* When the head request's allowance ends (monotonic us), or INT64_MAX. */
int64_t fence__pipe_deadline(const fence__pipe *p);
/* Fail every waiting request with why (timed_out: a timeout) and mark the
 * connection unusable; returns how many there were. */
int fence__pipe_fail_all(fence__pipe *p, const char *why, int timed_out);

/* ---- blocking callers ------------------------------------------------------ */
/* Wait, with lk held (it is released while waiting), until q has finished
 * or deadline_us (monotonic) has passed.  One waiting caller at a time
 * does the I/O for everyone; the others sleep until their own request
 * finishes or the driver leaves.  0: q finished (DONE or FAILED; the
 * caller frees it).  -1: the deadline passed first; q now belongs to the
 * pipe (abandoned), the caller must not touch it. */
int fence__pipe_wait(fence__pipe *p, pthread_mutex_t *lk, fence__req *q, int64_t deadline_us);

#endif
