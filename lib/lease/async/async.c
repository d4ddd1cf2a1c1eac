/* async.c -- the public calls of fence_async.h: a handle around a
 * fence_client that never connects (its options, checks, messages, leases,
 * state machine and metrics are the blocking API's own), one connection
 * driven by the caller's loop (async_conn.c), and the leases' timers
 * (async_lease.c).
 * User callbacks run in the fire phase at the end of fence_async_handle()
 * and in fence_async_close(), never inside the call that queued them. */
#include "async_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

fence_status fence_async_open(fence_async **out, const fence_client_options *o)
{
    if (out == NULL) {
        return fence__fail(NULL, FENCE_EINVAL, "fence_async_open: out is NULL");
    }
    *out = NULL;
    if (o == NULL) {
        return fence__fail(NULL, FENCE_EINVAL, "fence_async_open: options are NULL");
    }
    fence_async *a = calloc(1, sizeof *a);
    if (a == NULL) {
        return fence__fail(NULL, FENCE_ENOMEM, "out of memory");
    }
    fence__async_conn_init(a);
    /* No heartbeat thread: the caller's loop renews (a bad mode is still
     * refused by the client's own checks). */
    fence_client_options copy = *o;
    if (copy.heartbeat_mode == FENCE_HEARTBEAT_THREAD) {
        copy.heartbeat_mode = FENCE_HEARTBEAT_MANUAL;
    }
    fence_status st = fence__client_prepare(&a->c, &copy);
    if (a->c == NULL) {
        fence__pipe_destroy(&a->p);
        free(a);
        return st;
    }
    *out = a;
    fence_client *c = a->c;
    if (st == FENCE_OK && c->ops != &fence__redis_issuer) {
        c->ready = 0;
        st = fence__fail(c, FENCE_EINVAL, "the asynchronous API speaks Redis only; this URL "
                         "names the %s issuer: use the blocking API (fence_client_open)",
                         c->ops->name);
    }
    a->ri = st == FENCE_OK ? c->iss : NULL;
    if (st == FENCE_OK && a->ri->rd.url.sentinel) {
        c->ready = 0;
        st = fence__fail(c, FENCE_EINVAL, "redis-sentinel:// URLs are not supported by the "
                         "asynchronous API: use the blocking API (fence_client_open)");
    }
    return st;
}

/* Run the callbacks that are due: lost leases first, then finished
 * requests (each may queue more; they run in this same pass). */
static void fire(fence_async *a)
{
    a->depth++;
    while (a->lost.head != NULL || a->done != NULL) {
        if (a->lost.head != NULL) {
            fence__fire_lost(&a->lost); /* may free leases; empties the queue */
            continue;
        }
        fence__aop *op = a->done;
        a->done = op->next;
        if (a->done == NULL) {
            a->done_tail = NULL;
        }
        if (op->acb != NULL) {
            op->acb(a, op->st, op->out, op->pttl_ms, op->msg, op->user);
        } else if (op->rcb != NULL) {
            op->rcb(a, op->st, op->msg, op->user);
        }
        if (op->free_l != NULL) {
            fence__async_free_lease(a, op->free_l);
        }
        fence__aop_free(op);
    }
    a->depth--;
}

static void really_close(fence_async *a)
{
    fence__fail(a->c, FENCE_ESTATE, "the asynchronous client was closed before the reply "
                "came (an acquire may have happened in Redis: it expires by its TTL)");
    char msg[300];
    snprintf(msg, sizeof msg, "%s", fence_client_errmsg(a->c));
    a->closing = 1;
    a->watch = NULL; /* the adapter may be freeing itself */
    fire(a);         /* lost callbacks due, finished requests */
    fence__async_conn_shutdown(a, FENCE_ESTATE, msg);
    fire(a);         /* the requests just failed */
    fence__pipe_destroy(&a->p);
    fence__client_close_offline(a->c); /* frees the leases still open, Redis untold */
    free(a);
}

void fence_async_close(fence_async *a)
{
    if (a == NULL || a->closing) {
        return;
    }
    if (a->depth > 0) {
        a->closing = 1; /* from a callback: at the end of fence_async_handle */
        return;
    }
    really_close(a);
}

const char *fence_async_errmsg(const fence_async *a)
{
    return fence_client_errmsg(a != NULL ? a->c : NULL);
}

fence_client *fence_async_client(const fence_async *a)
{
    return a != NULL ? a->c : NULL;
}

/* ---- the loop's side --------------------------------------------------------- */

int fence_async_fd(const fence_async *a)
{
    return a != NULL ? fence__async_conn_fd(a) : -1;
}

int fence_async_events(const fence_async *a)
{
    return a != NULL && fence__async_conn_fd(a) >= 0 ? fence__async_conn_events(a) : 0;
}

/* The absolute time the loop must call fence_async_handle() by. */
static int64_t due_us(const fence_async *a)
{
    if (a->done != NULL || a->lost.head != NULL) {
        return 0;
    }
    int64_t d = fence__async_conn_due(a), l = fence__async_lease_due(a);
    return l < d ? l : d;
}

static int64_t to_ms(int64_t due)
{
    if (due == INT64_MAX) {
        return -1;
    }
    int64_t now = fence__now_us();
    return due <= now ? 0 : (due - now + 999) / 1000;
}

int64_t fence_async_timeout_ms(const fence_async *a)
{
    return a != NULL ? to_ms(due_us(a)) : -1;
}

/* Tell the watch hook what to watch now, if that changed (not from
 * inside fence_async_handle: it tells once at its end). */
static void notify(fence_async *a)
{
    if (a->watch == NULL || a->depth > 0 || a->closing) {
        return;
    }
    int fd = fence__async_conn_fd(a);
    int ev = fd >= 0 ? fence__async_conn_events(a) : 0;
    int64_t due = due_us(a);
    if (fd == a->w_fd && ev == a->w_events && due == a->w_due) {
        return;
    }
    a->w_fd = fd;
    a->w_events = ev;
    a->w_due = due;
    a->watch(a, fd, ev, to_ms(due), a->watch_user);
}

void fence_async_set_watch(fence_async *a, fence_async_watch_cb cb, void *user)
{
    if (a == NULL) {
        return;
    }
    a->watch = cb;
    a->watch_user = user;
    a->w_fd = -2; /* tell it at once */
    notify(a);
}

fence_status fence_async_handle(fence_async *a, int events)
{
    (void)events; /* a hint: every step that can be taken is taken */
    if (a == NULL) {
        return fence__fail(NULL, FENCE_EINVAL, "fence_async_handle: handle is NULL");
    }
    if (a->closing) {
        return FENCE_OK;
    }
    a->depth++;
    fence__async_io(a);
    fence__async_timers(a, fence__now_us());
    if (a->p.cn != NULL && a->p.cn->olen > 0) {
        fence__async_io(a); /* the renewals just queued go out */
    }
    fire(a);
    if (!a->closing && a->p.cn != NULL && a->p.cn->olen > 0) {
        fence__async_io(a); /* what the callbacks queued, at once */
    }
    a->depth--;
    if (a->closing) {
        really_close(a);
        return FENCE_OK;
    }
    /* Always told after a handle: a loop's one-shot timer may have fired a
     * little early (libuv's clock is the loop's cached one), and must be
     * armed again even when the deadline is the same. */
    a->w_due = -1;
    notify(a);
    return FENCE_OK;
}

/* ---- leases -------------------------------------------------------------------- */

/* What the asynchronous API does not do (the options are valid for the
 * blocking one). */
static fence_status check_async_opts(fence_client *c, const fence_lease_options *o)
{
    if (o->wait_ms != 0) {
        return fence__fail(c, FENCE_EINVAL, "wait_ms must be 0 with the asynchronous API "
                           "(it tries once: retry from the loop on FENCE_BUSY)");
    }
    if (o->no_heartbeat != 0) {
        return fence__fail(c, FENCE_EINVAL, "no_heartbeat must be 0 with the asynchronous "
                           "API (the loop renews every lease)");
    }
    return FENCE_OK;
}

fence_status fence_async_acquire(fence_async *a, const char *name,
                                 const fence_lease_options *o, fence_async_acquire_cb cb,
                                 void *user)
{
    if (a == NULL) {
        return fence__fail(NULL, FENCE_EINVAL, "fence_async_acquire: handle is NULL");
    }
    fence_client *c = a->c;
    fence_status st = fence__check_client(c, "fence_async_acquire");
    if (st == FENCE_OK && a->closing) {
        st = fence__fail(c, FENCE_ESTATE, "fence_async_acquire: the handle is closing");
    }
    if (st == FENCE_OK && (o == NULL || cb == NULL)) {
        st = fence__fail(c, FENCE_EINVAL, "fence_async_acquire: %s is NULL",
                         o == NULL ? "opts" : "callback");
    }
    st = st != FENCE_OK ? st : fence__check_name(c, name);
    st = st != FENCE_OK ? st : fence__check_lease_opts(c, o);
    st = st != FENCE_OK ? st : check_async_opts(c, o);
    if (st != FENCE_OK) {
        return st;
    }
    fence__aop *op = fence__aop_new(a, FENCE__ACQUIRE);
    if (op == NULL) {
        return fence__fail(c, FENCE_ENOMEM, "out of memory");
    }
    st = fence__lease_new(c, name, o, &op->l);
    if (st == FENCE_OK && op->l->il.has_info && (op->info = strdup(o->holder_info)) == NULL) {
        fence__lease_free(op->l);
        st = fence__fail(c, FENCE_ENOMEM, "out of memory");
    }
    if (st != FENCE_OK) {
        fence__aop_free(op);
        return st;
    }
    op->nargs = fence__ri_acquire_args(a->ri, &op->l->il, op->info, op->args, &op->nkeys);
    op->needs_check = 1;
    op->wait = a->ri->min_replicas > 0;
    op->on_reply = fence__async_acquired;
    op->acb = cb;
    op->user = user;
    atomic_fetch_add(&c->m.acquire_attempts, 1);
    fence__clear(c);
    fence__async_submit(a, op);
    notify(a);
    return FENCE_OK;
}

fence_status fence_async_release(fence_async *a, fence_lease *l, fence_async_release_cb cb,
                                 void *user)
{
    if (a == NULL || l == NULL) {
        return fence__fail(a != NULL ? a->c : NULL, FENCE_EINVAL, "fence_async_release: %s is "
                           "NULL", a == NULL ? "handle" : "lease");
    }
    fence_client *c = a->c;
    if (l->c != c) {
        return fence__fail(c, FENCE_EINVAL, "fence_async_release: the lease belongs to "
                           "another handle");
    }
    fence__aop *op = fence__aop_new(a, FENCE__RELEASE);
    if (op == NULL) {
        return fence__fail(c, FENCE_ENOMEM, "out of memory");
    }
    int contact = 0;
    fence__release_begin(l, 0, &op->was_held, &contact);
    op->l = l;
    op->on_reply = fence__async_released;
    op->rcb = cb;
    op->user = user;
    fence__clear(c);
    if (a->closing) {
        op->st = fence__fail(c, FENCE_ESTATE, "fence_async_release: the handle is closing; "
                             "lease '%s' expires by its TTL", l->il.name);
        snprintf(op->msg, sizeof op->msg, "%s", fence_client_errmsg(c));
        op->l = NULL;
        op->free_l = l;
        fence__async_finish(a, op);
    } else if (contact) {
        op->nargs = fence__ri_release_args(a->ri, &l->il, op->args, &op->nkeys);
        fence__async_submit(a, op);
    } else {
        op->st = fence__fail(c, FENCE_LOST, "lease '%s' had already been lost", l->il.name);
        snprintf(op->msg, sizeof op->msg, "%s", fence_client_errmsg(c));
        op->l = NULL;
        op->free_l = l;
        fence__async_finish(a, op);
    }
    notify(a);
    return FENCE_OK;
}
