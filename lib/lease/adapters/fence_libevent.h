/*
 * fence_libevent.h -- drive a fence_async from a libevent event_base
 * (header only; libfence itself never links libevent: the program does,
 * -levent).
 *
 *   fence_ev *e;
 *   fence_async_open(&a, &opts);
 *   fence_ev_attach(a, base, &e);
 *   fence_async_acquire(a, "job", &lo, on_acquired, NULL);
 *   event_base_dispatch(base);        // renewals ride on the loop
 *   ...
 *   fence_ev_close(e);                // closes a too (safe in a callback)
 *
 * One event on the handle's descriptor (made again when the descriptor
 * or the events change; freed before the old descriptor is closed) and
 * one evtimer for its next timer.
 */
#ifndef FENCE_LIBEVENT_H
#define FENCE_LIBEVENT_H

#include <event2/event.h>
#include <stdlib.h>

#include "fence_async.h"

typedef struct fence_ev {
    fence_async *a;
    struct event_base *base;
    struct event *io; /* on fd, or NULL */
    int fd, events;
    struct event *timer;
} fence_ev;

static void fence_ev__on_io(evutil_socket_t fd, short what, void *arg)
{
    fence_ev *e = (fence_ev *)arg;
    (void)fd;
    fence_async_handle(e->a, (what & EV_READ ? FENCE_ASYNC_READ : 0) |
                             (what & EV_WRITE ? FENCE_ASYNC_WRITE : 0));
}

static void fence_ev__on_timer(evutil_socket_t fd, short what, void *arg)
{
    fence_ev *e = (fence_ev *)arg;
    (void)fd;
    (void)what;
    fence_async_handle(e->a, 0);
}

/* The watch hook (fence_async_set_watch). */
static void fence_ev__watch(fence_async *a, int fd, int events, int64_t timeout_ms, void *user)
{
    fence_ev *e = (fence_ev *)user;
    (void)a;
    if (fd != e->fd || events != e->events) {
        if (e->io != NULL) {
            event_free(e->io);
            e->io = NULL;
        }
        e->fd = fd;
        e->events = events;
        short what = (short)((events & FENCE_ASYNC_READ ? EV_READ : 0) |
                             (events & FENCE_ASYNC_WRITE ? EV_WRITE : 0));
        if (fd >= 0 && what != 0) {
            e->io = event_new(e->base, fd, (short)(what | EV_PERSIST), fence_ev__on_io, e);
            if (e->io != NULL) {
                event_add(e->io, NULL);
            }
        }
    }
    if (timeout_ms >= 0) {
        struct timeval tv = {(time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000};
        evtimer_add(e->timer, &tv);
    } else {
        evtimer_del(e->timer);
    }
}

/* Attach a to base: 0 and *out, or -1 (out of memory). */
static inline int fence_ev_attach(fence_async *a, struct event_base *base, fence_ev **out)
{
    fence_ev *e = (fence_ev *)calloc(1, sizeof *e);
    *out = NULL;
    if (a == NULL || e == NULL || (e->timer = evtimer_new(base, fence_ev__on_timer, e)) == NULL) {
        free(e);
        return -1;
    }
    e->a = a;
    e->base = base;
    e->fd = -1;
    *out = e;
    fence_async_set_watch(a, fence_ev__watch, e);
    return 0;
}

/* Stop watching and free the events, then close the fence_async.  Safe
 * from inside a fence callback. */
static inline void fence_ev_close(fence_ev *e)
{
    if (e == NULL) {
        return;
    }
    fence_async_set_watch(e->a, NULL, NULL);
    if (e->io != NULL) {
        event_free(e->io);
    }
    event_free(e->timer);
    fence_async_close(e->a);
    free(e);
}

#endif
