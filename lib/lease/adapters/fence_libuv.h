/*
 * fence_libuv.h -- drive a fence_async from a libuv loop (header only;
 * libfence itself never links libuv: the program does, -luv).
 *
 *   fence_uv *u;
 *   fence_async_open(&a, &opts);
 *   fence_uv_attach(a, uv_default_loop(), &u);
 *   fence_async_acquire(a, "job", &lo, on_acquired, NULL);
 *   uv_run(loop, UV_RUN_DEFAULT);     // renewals ride on the loop
 *   ...
 *   fence_uv_close(u);                // closes a too (safe in a callback)
 *
 * One uv_poll_t on the handle's descriptor (made again when the
 * descriptor changes, closed before the old one is) and one uv_timer_t
 * for its next timer.  While connected the descriptor stays watched (a
 * server closing it is noticed at once): uv_run() returns once the
 * adapter is closed (fence_uv_close).
 */
#ifndef FENCE_LIBUV_H
#define FENCE_LIBUV_H

#include <stdlib.h>
#include <uv.h>

#include "fence_async.h"

typedef struct fence_uv {
    fence_async *a;
    uv_loop_t *loop;
    uv_poll_t *poll; /* on fd, or NULL */
    int fd, events;
    uv_timer_t *timer;
} fence_uv;

static void fence_uv__free_handle(uv_handle_t *h)
{
    free(h);
}

static void fence_uv__on_poll(uv_poll_t *p, int status, int events)
{
    fence_uv *u = (fence_uv *)p->data;
    int ev = (events & UV_READABLE ? FENCE_ASYNC_READ : 0) |
             (events & UV_WRITABLE ? FENCE_ASYNC_WRITE : 0);
    (void)status; /* an error shows as a failed read or write */
    fence_async_handle(u->a, ev); /* u may be gone afterwards (fence_uv_close) */
}

static void fence_uv__on_timer(uv_timer_t *t)
{
    fence_uv *u = (fence_uv *)t->data;
    fence_async_handle(u->a, 0);
}

static void fence_uv__drop_poll(fence_uv *u)
{
    if (u->poll != NULL) {
        uv_close((uv_handle_t *)u->poll, fence_uv__free_handle);
        u->poll = NULL;
    }
    u->fd = -1;
    u->events = 0;
}

/* The watch hook (fence_async_set_watch). */
static void fence_uv__watch(fence_async *a, int fd, int events, int64_t timeout_ms, void *user)
{
    fence_uv *u = (fence_uv *)user;
    (void)a;
    if (fd != u->fd) {
        fence_uv__drop_poll(u);
        if (fd >= 0 && (u->poll = (uv_poll_t *)malloc(sizeof *u->poll)) != NULL) {
            if (uv_poll_init(u->loop, u->poll, fd) != 0) {
                free(u->poll);
                u->poll = NULL;
            } else {
                u->poll->data = u;
                u->fd = fd;
            }
        }
    }
    if (u->poll != NULL && events != u->events) {
        int uvev = (events & FENCE_ASYNC_READ ? UV_READABLE : 0) |
                   (events & FENCE_ASYNC_WRITE ? UV_WRITABLE : 0);
        if (uvev != 0) {
            uv_poll_start(u->poll, uvev, fence_uv__on_poll);
        } else {
            uv_poll_stop(u->poll);
        }
        u->events = events;
    }
    if (timeout_ms >= 0) {
        uv_timer_start(u->timer, fence_uv__on_timer, (uint64_t)timeout_ms, 0);
    } else {
        uv_timer_stop(u->timer);
    }
}

/* Attach a to loop: 0 and *out, or -1 (out of memory, a libuv error). */
static inline int fence_uv_attach(fence_async *a, uv_loop_t *loop, fence_uv **out)
{
    fence_uv *u = (fence_uv *)calloc(1, sizeof *u);
    uv_timer_t *t = (uv_timer_t *)malloc(sizeof *t);
    *out = NULL;
    if (a == NULL || u == NULL || t == NULL || uv_timer_init(loop, t) != 0) {
        free(u);
        free(t);
        return -1;
    }
    u->a = a;
    u->loop = loop;
    u->fd = -1;
    u->timer = t;
    t->data = u;
    *out = u;
    fence_async_set_watch(a, fence_uv__watch, u);
    return 0;
}

/* Stop watching (the handles are closed; freed by the loop), then close
 * the fence_async.  Safe from inside a fence callback. */
static inline void fence_uv_close(fence_uv *u)
{
    if (u == NULL) {
        return;
    }
    fence_async_set_watch(u->a, NULL, NULL);
    fence_uv__drop_poll(u);
    uv_close((uv_handle_t *)u->timer, fence_uv__free_handle);
    fence_async_close(u->a);
    free(u);
}

#endif
