/* async_conn.c -- the asynchronous API's one connection: connected in
 * steps (fence__tr_open_start / _step), set up by one queued request
 * (AUTH, SELECT, SCRIPT LOAD, INFO cluster), checked before the first
 * token (INFO memory / persistence, CONFIG GET save: the Redis issuer's
 * rule), and every script call a request on the pipe (redis/pipe.c):
 * EVALSHA, then EVAL when the server answers NOSCRIPT.  Never blocks (DNS
 * aside).
 *
 * Two kinds of deadline, as in the blocking API: connecting and the setup
 * request end by connect_end_us (connect_timeout_ms from the start), and
 * each call ends by its own deadline (fence__async_submit: the connect
 * budget when it had to wait for a connection, then io_timeout_ms, plus
 * WAIT's) -- however the server paces its replies.  A call past its
 * deadline fails with FENCE_ECONN ("timed out"); its request stays on the
 * pipe as a placeholder, so the replies after it still find their owners. */
#include "async_internal.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The scripts the asynchronous API runs, loaded at setup. */
static const int used_scripts[3] = {FENCE__ACQUIRE, FENCE__RENEW, FENCE__RELEASE};

void fence__async_conn_init(fence_async *a)
{
    fence__pipe_init(&a->p);
    a->state = FENCE__A_IDLE;
    a->w_fd = -1;
    a->w_due = INT64_MAX;
}

fence__aop *fence__aop_new(fence_async *a, int script)
{
    fence__aop *op = calloc(1, sizeof *op);
    if (op != NULL) {
        op->a = a;
        op->script = script;
        op->deadline_us = INT64_MAX;
    }
    return op;
}

void fence__aop_free(fence__aop *op)
{
    if (op != NULL) {
        free(op->info);
        free(op);
    }
}

/* Append op to the list head .. *tail. */
static void push(fence__aop **head, fence__aop **tail, fence__aop *op)
{
    op->next = NULL;
    if (*tail != NULL) {
        (*tail)->next = op;
    } else {
        *head = op;
    }
    *tail = op;
}

void fence__async_finish(fence_async *a, fence__aop *op)
{
    push(&a->done, &a->done_tail, op);
}

/* op failed with st: its message from the client's last failure. */
static void fail_op(fence__aop *op, fence_status st, const char *msg)
{
    op->st = st;
    snprintf(op->msg, sizeof op->msg, "%s", msg);
    op->on_reply(op, NULL);
    if (!op->keep) {
        fence__async_finish(op->a, op);
    }
}

static void unflight(fence_async *a, fence__aop *op)
{
    for (fence__aop **pp = &a->flight; *pp != NULL; pp = &(*pp)->fnext) {
        if (*pp == op) {
            *pp = op->fnext;
            break;
        }
    }
    op->fnext = NULL;
    op->q = NULL;
}

/* ---- script calls on the pipe ---------------------------------------------- */

static void send_op(fence_async *a, fence__aop *op);

/* A script call's request finished (in fence__pipe_step). */
static void op_done(fence__req *q, void *arg)
{
    fence__aop *op = arg;
    fence_async *a = op->a;
    fence_client *c = a->c;
    const fence__redis *rd = &a->ri->rd;
    redisReply *r = q->state == FENCE__REQ_DONE ? fence__req_take(q, 0) : NULL;
    redisReply *w = q->state == FENCE__REQ_DONE && q->want == 2 ? fence__req_take(q, 1) : NULL;
    if (w != NULL) {
        op->acked = w->type == REDIS_REPLY_INTEGER ? w->integer : -1;
        freeReplyObject(w);
    }
    char why[256];
    snprintf(why, sizeof why, "%s", q->errstr);
    fence__req_free(q);
    unflight(a, op);
    if (r == NULL) {
        fence__fail(c, FENCE_ECONN, "%s: connection failed: %s", rd->url.display, why);
        fail_op(op, FENCE_ECONN, fence_client_errmsg(c));
        return;
    }
    int noscript = 0;
    fence_status st = fence__script_verdict(rd, r, NULL, &noscript);
    if (noscript && !op->eval_body) {
        freeReplyObject(r); /* Redis restarted or SCRIPT FLUSH: send the body */
        op->eval_body = 1;
        send_op(a, op);
        return;
    }
    if (st != FENCE_OK) {
        if (noscript) {
            st = fence__fail(c, FENCE_EPROTO, "%s: NOSCRIPT after EVAL", rd->url.display);
        }
        freeReplyObject(r);
        fail_op(op, st, fence_client_errmsg(c));
        return;
    }
    op->on_reply(op, r);
    if (!op->keep) {
        fence__async_finish(a, op);
    }
}

/* EVALSHA (EVAL once NOSCRIPT came, or without a SHA) onto the pipe: the
 * engine's script call, as the blocking path sends it. */
static void send_op(fence_async *a, fence__aop *op)
{
    fence_client *c = a->c;
    const fence__issuer *ri = a->ri;
    fence__eval_opts io = {0, op->wait ? ri->min_replicas : 0, ri->replica_timeout_ms, -1};
    fence__req *q = fence__req_new(op->wait ? 2 : 1, fence__script_allowance_us(&ri->rd, &io));
    if (q == NULL) {
        fence__fail(c, FENCE_ENOMEM, "out of memory");
        fail_op(op, FENCE_ENOMEM, fence_client_errmsg(c));
        return;
    }
    q->done = op_done;
    q->arg = op;
    op->acked = -1;
    if (fence__script_append(&ri->rd, a->p.cn, op->script, !op->eval_body, op->nkeys,
                             op->nargs, op->args, 0, &io) < 0) {
        fence__req_free(q);
        fence__fail(c, FENCE_EINVAL, "internal: bad script call");
        fail_op(op, FENCE_EINVAL, fence_client_errmsg(c));
        return;
    }
    op->fnext = a->flight;
    a->flight = op;
    op->q = q;
    op->sent_us = fence__now_us();
    fence__pipe_submit(&a->p, q, 0);
    if (q->state == FENCE__REQ_FAILED) { /* the connection was unusable */
        op_done(q, op);
    }
}

/* ---- the waiting list --------------------------------------------------------- */

static void wait_push(fence_async *a, fence__aop *op)
{
    push(&a->waiting, &a->waiting_tail, op);
}

/* Fail the waiting requests (all, or only those that need the check). */
static void fail_waiting(fence_async *a, fence_status st, const char *msg, int only_check)
{
    char copy[600];
    snprintf(copy, sizeof copy, "%s", msg); /* msg may be the client's slot */
    msg = copy;
    fence__aop *keep = NULL, *keep_tail = NULL, *op = a->waiting;
    a->waiting = a->waiting_tail = NULL;
    while (op != NULL) {
        fence__aop *next = op->next;
        if (only_check && !op->needs_check) {
            push(&keep, &keep_tail, op);
        } else {
            fail_op(op, st, msg);
        }
        op = next;
    }
    a->waiting = keep;
    a->waiting_tail = keep_tail;
}

static void start_check(fence_async *a);

/* Send what may go now: everything once set up, tokens once checked. */
static void release_waiting(fence_async *a)
{
    if (a->state != FENCE__A_READY) {
        return;
    }
    fence__aop *op = a->waiting, *keep = NULL, *keep_tail = NULL;
    a->waiting = a->waiting_tail = NULL;
    while (op != NULL) {
        fence__aop *next = op->next;
        op->next = NULL;
        if (op->needs_check && !a->checked) {
            push(&keep, &keep_tail, op);
        } else {
            send_op(a, op);
        }
        op = next;
    }
    a->waiting = keep;
    a->waiting_tail = keep_tail;
    if (keep != NULL && !a->checking) {
        start_check(a);
    }
}

/* ---- the server check ---------------------------------------------------------- */

static void check_done(fence__req *q, void *arg)
{
    fence_async *a = arg;
    fence_client *c = a->c;
    a->checking = 0;
    const fence__redis *rd = &a->ri->rd;
    if (q->state != FENCE__REQ_DONE) {
        fence__fail(c, FENCE_ECONN, "%s: connection failed: %s", rd->url.display, q->errstr);
        fence__req_free(q);
        fail_waiting(a, FENCE_ECONN, fence_client_errmsg(c), 1);
        return;
    }
    fence__srvinfo si;
    fence__srv_fill(&si, q->reply);
    fence__req_free(q);
    fence_status st = rd->first_use(rd->first_use_arg, &si);
    if (st != FENCE_OK) {
        fail_waiting(a, st, fence_client_errmsg(c), 1); /* asked again next time */
        return;
    }
    a->checked = 1;
    release_waiting(a);
}

static void start_check(fence_async *a)
{
    fence__req *q = fence__req_new(3, (int64_t)a->ri->rd.io_timeout_ms * 1000);
    if (q == NULL) {
        fence__fail(a->c, FENCE_ENOMEM, "out of memory");
        fail_waiting(a, FENCE_ENOMEM, fence_client_errmsg(a->c), 1);
        return;
    }
    q->done = check_done;
    q->arg = a;
    a->checking = 1;
    fence__tr_appendf(a->p.cn, "INFO memory");
    fence__tr_appendf(a->p.cn, "INFO persistence");
    fence__tr_appendf(a->p.cn, "CONFIG GET save");
    fence__pipe_submit(&a->p, q, 0);
    if (q->state == FENCE__REQ_FAILED) {
        check_done(q, a);
    }
}

/* ---- connecting and the setup request ----------------------------------------- */

/* Stop the hook watching the descriptor that is about to close. */
static void unwatch(fence_async *a)
{
    if (a->watch != NULL && a->w_fd >= 0) {
        a->w_fd = -1;
        a->w_events = 0;
        a->watch(a, -1, 0, -1, a->watch_user);
    }
}

/* Close the connection (nothing may be waiting on the pipe). */
static void drop_conn(fence_async *a)
{
    unwatch(a);
    fence__tr_open_abort(&a->opening);
    fence__tr_close(&a->p.cn);
    a->state = FENCE__A_IDLE;
    a->checked = a->checking = 0;
}

/* The connection cannot be used: the waiting requests fail with st.  It
 * is closed by fence__async_io() (this may run inside fence__pipe_step,
 * which still holds it). */
static void conn_failed(fence_async *a, fence_status st, const char *msg)
{
    char copy[600];
    snprintf(copy, sizeof copy, "%s", msg); /* msg may be the client's slot */
    if (a->p.cn != NULL) {
        fence__pipe_fail_all(&a->p, copy, 0);
    } else {
        a->state = FENCE__A_IDLE;
    }
    fail_waiting(a, st, copy, 0);
}

/* The setup's replies: login (nlogin of them), the SHAs, INFO cluster. */
static fence_status setup_check(fence_async *a, fence__req *q, int nlogin)
{
    fence_client *c = a->c;
    fence__redis *rd = &a->ri->rd;
    for (int i = 0; i < nlogin; i++) {
        fence_status st = fence__conn_login_reply(rd, i, q->reply[i]);
        if (st != FENCE_OK) {
            return st;
        }
    }
    for (int i = 0; i < 3; i++) {
        const redisReply *r = q->reply[nlogin + i];
        if (r->type == REDIS_REPLY_ERROR) {
            /* No password given and the server wants one: NOAUTH now. */
            return fence__is_auth_error(r->str)
                       ? fence__fail(c, FENCE_EAUTH, "%s: %.200s", rd->url.display, r->str)
                       : fence__fail(c, FENCE_EPROTO, "%s: SCRIPT LOAD refused: %.200s",
                                     rd->url.display, r->str);
        }
        if (r->type == REDIS_REPLY_STRING && r->len == 40) {
            memcpy(rd->sha[used_scripts[i]], r->str, 41);
        }
    }
    const redisReply *ci = q->reply[nlogin + 3];
    if (ci->type == REDIS_REPLY_STRING && strstr(ci->str, "cluster_enabled:1") != NULL) {
        return fence__fail(c, FENCE_EINVAL, "%s: the server is a Redis Cluster node: the "
                           "asynchronous API does not support Redis Cluster; use the "
                           "blocking API (fence_client_open)", rd->url.display);
    }
    return FENCE_OK;
}

static void setup_done(fence__req *q, void *arg)
{
    fence_async *a = arg;
    fence_client *c = a->c;
    const fence__redis *rd = &a->ri->rd;
    fence_status st;
    if (q->state != FENCE__REQ_DONE) {
        st = fence__fail(c, FENCE_ECONN, "%s: connection failed: %s", rd->url.display,
                         q->errstr);
    } else {
        st = setup_check(a, q, q->want - 4);
    }
    fence__req_free(q);
    if (st != FENCE_OK) {
        conn_failed(a, st, fence_client_errmsg(c));
        return;
    }
    a->state = FENCE__A_READY;
    release_waiting(a);
}

/* Connected: queue the setup request. */
static void start_setup(fence_async *a)
{
    fence_client *c = a->c;
    fence__redis *rd = &a->ri->rd;
    a->state = FENCE__A_SETUP;
    int n = fence__conn_append_login(rd, a->p.cn);
    fence__req *q = n >= 0 ? fence__req_new(n + 4, (int64_t)rd->io_timeout_ms * 1000) : NULL;
    if (q == NULL) {
        fence__fail(c, FENCE_ENOMEM, "out of memory");
        conn_failed(a, FENCE_ENOMEM, fence_client_errmsg(c));
        return;
    }
    for (int i = 0; i < 3; i++) {
        const char *argv[3] = {"SCRIPT", "LOAD", rd->script[used_scripts[i]]};
        size_t lens[3] = {6, 4, rd->script_len[used_scripts[i]]};
        fence__tr_append(a->p.cn, 3, argv, lens);
    }
    fence__tr_appendf(a->p.cn, "INFO cluster");
    q->done = setup_done;
    q->arg = a;
    fence__pipe_submit(&a->p, q, 0);
    if (q->state == FENCE__REQ_FAILED) {
        setup_done(q, a);
    }
}

static void start_connect(fence_async *a)
{
    fence_client *c = a->c;
    const fence__redis *rd = &a->ri->rd;
    fence__target t;
    fence__conn_target(rd, &t);
    char err[300];
    fence_status st = fence__tr_open_start(&t, rd->io_timeout_ms, &a->opening, err, sizeof err);
    if (st != FENCE_OK) {
        fence__fail(c, st, "cannot connect to %s: %s", rd->url.display, err);
        conn_failed(a, st, fence_client_errmsg(c));
        return;
    }
    a->state = FENCE__A_CONNECTING;
    a->opening_ev = POLLOUT; /* connect() in progress */
    a->connect_end_us = fence__now_us() + (int64_t)rd->connect_timeout_ms * 1000;
}

/* One connecting step: connected, still waiting, or failed. */
static void connect_step(fence_async *a)
{
    fence_client *c = a->c;
    fence__redis *rd = &a->ri->rd;
    char err[300];
    short ev = 0;
    fence__conn *cn = NULL;
    int rc = fence__tr_open_step(&a->opening, &cn, &ev, err, sizeof err);
    if (rc == 2) {
        unwatch(a); /* its next step closes this socket */
        rc = fence__tr_open_step(&a->opening, &cn, &ev, err, sizeof err);
    }
    a->opening_ev = ev;
    if (rc == 0 && fence__now_us() >= a->connect_end_us) {
        snprintf(err, sizeof err, "Connection timed out");
        rc = -1;
    }
    if (rc < 0) {
        unwatch(a);
        fence__tr_open_abort(&a->opening);
        fence__fail(c, FENCE_ECONN, "cannot connect to %s: %s", rd->url.display, err);
        conn_failed(a, FENCE_ECONN, fence_client_errmsg(c));
        return;
    }
    if (rc == 1) {
        a->p.cn = cn;
        atomic_fetch_add(&rd->reconnects, rd->sha[FENCE__ACQUIRE][0] != '\0');
        start_setup(a);
    }
}

void fence__async_submit(fence_async *a, fence__aop *op)
{
    if (op->deadline_us == INT64_MAX) {
        /* The call's budget: connecting first when it must, then its I/O. */
        const fence__redis *rd = &a->ri->rd;
        int64_t ms = rd->io_timeout_ms + (op->wait ? a->ri->replica_timeout_ms : 0);
        if (a->state != FENCE__A_READY) {
            ms += rd->connect_timeout_ms;
        }
        op->deadline_us = fence__now_us() + ms * 1000;
    }
    if (a->state == FENCE__A_READY && (!op->needs_check || a->checked)) {
        send_op(a, op);
        return;
    }
    wait_push(a, op);
    if (a->state == FENCE__A_IDLE) {
        start_connect(a);
        if (a->state == FENCE__A_CONNECTING) {
            connect_step(a); /* a unix socket is often connected at once */
        }
    } else if (a->state == FENCE__A_READY && !a->checking) {
        start_check(a);
    }
}

/* ---- the loop's side ------------------------------------------------------------ */

/* The calls whose own deadline has passed fail ("timed out"): those
 * waiting for the connection or the check, and those in flight, whose
 * requests stay on the pipe as placeholders (freed when their replies
 * come). */
static void expire_calls(fence_async *a, int64_t now)
{
    fence_client *c = a->c;
    fence__aop *gone = NULL, **gone_tail = &gone;
    fence__aop **pp = &a->waiting;
    a->waiting_tail = NULL;
    while (*pp != NULL) {
        fence__aop *op = *pp;
        if (op->deadline_us > now) {
            a->waiting_tail = op;
            pp = &op->next;
            continue;
        }
        *pp = op->next;
        op->next = NULL;
        *gone_tail = op;
        gone_tail = &op->next;
    }
    for (fence__aop *op = a->flight, *next; op != NULL; op = next) {
        next = op->fnext;
        if (op->deadline_us <= now) {
            op->q->done = NULL; /* a placeholder now: the pipe frees it */
            op->q->abandoned = 1;
            unflight(a, op);
            op->next = NULL;
            *gone_tail = op;
            gone_tail = &op->next;
        }
    }
    if (gone == NULL) {
        return;
    }
    fence__fail(c, FENCE_ECONN, "%s: timed out: no answer within the call's time "
                "(connect_timeout_ms to connect, then io_timeout_ms)", a->ri->rd.url.display);
    char msg[600];
    snprintf(msg, sizeof msg, "%s", fence_client_errmsg(c));
    while (gone != NULL) {
        fence__aop *op = gone;
        gone = op->next;
        op->next = NULL;
        fail_op(op, FENCE_ECONN, msg); /* may queue more: onto the lists, not gone */
    }
}

void fence__async_io(fence_async *a)
{
    const fence__redis *rd = &a->ri->rd;
    if (a->state == FENCE__A_CONNECTING) {
        connect_step(a);
    }
    if (a->p.cn != NULL && a->p.cn->err == 0) {
        if (a->p.head != NULL) {
            fence__pipe_step(&a->p); /* done callbacks: requests onto the done list */
        } else if (a->state == FENCE__A_READY) {
            /* Idle and connected: a readable socket is the server closing
             * it (or a reply nobody asked for). */
            fence__pipe_idle_check(&a->p);
        }
    }
    if (a->state == FENCE__A_SETUP && a->p.cn != NULL && a->p.cn->err == 0 &&
        fence__now_us() >= a->connect_end_us) {
        /* Connected, but the setup did not come back within the connect
         * budget: the connection is given up. */
        fence__pipe_fail_all(&a->p, "the setup timed out (connect_timeout_ms)", 1);
    }
    if (a->p.cn != NULL && a->p.cn->err != 0) {
        fence_client *c = a->c;
        fence__pipe_fail_all(&a->p, a->p.cn->errstr, a->p.cn->timed_out);
        fence__fail(c, FENCE_ECONN, "%s: connection failed: %s", rd->url.display,
                    a->p.cn->errstr);
        fail_waiting(a, FENCE_ECONN, fence_client_errmsg(c), 0);
        drop_conn(a);
    }
    expire_calls(a, fence__now_us());
}

int fence__async_conn_fd(const fence_async *a)
{
    if (a->opening != NULL) {
        return fence__tr_opening_fd(a->opening);
    }
    return a->p.cn != NULL ? a->p.cn->fd : -1;
}

int fence__async_conn_events(const fence_async *a)
{
    if (a->state == FENCE__A_CONNECTING) { /* the connect, or the TLS handshake's turn */
        return ((a->opening_ev & POLLIN) ? FENCE_ASYNC_READ : 0) |
               ((a->opening_ev & POLLOUT) ? FENCE_ASYNC_WRITE : 0);
    }
    if (a->p.cn == NULL || a->p.cn->err) {
        return 0;
    }
    short ev = fence__pipe_events(&a->p);
    if (ev == 0 && a->state == FENCE__A_READY) {
        return FENCE_ASYNC_READ; /* idle: notice the server closing */
    }
    return ((ev & POLLIN) ? FENCE_ASYNC_READ : 0) | ((ev & POLLOUT) ? FENCE_ASYNC_WRITE : 0);
}

int64_t fence__async_conn_due(const fence_async *a)
{
    int64_t due = INT64_MAX;
    if (a->state == FENCE__A_CONNECTING || a->state == FENCE__A_SETUP) {
        due = a->connect_end_us;
    }
    if (a->p.cn != NULL && fence__pipe_deadline(&a->p) < due) {
        due = fence__pipe_deadline(&a->p);
    }
    for (const fence__aop *op = a->waiting; op != NULL; op = op->next) {
        due = op->deadline_us < due ? op->deadline_us : due;
    }
    for (const fence__aop *op = a->flight; op != NULL; op = op->fnext) {
        due = op->deadline_us < due ? op->deadline_us : due;
    }
    return due;
}

void fence__async_conn_shutdown(fence_async *a, fence_status st, const char *msg)
{
    char copy[600];
    snprintf(copy, sizeof copy, "%s", msg);
    fence__aop *fl = a->flight;
    a->flight = NULL;
    /* The pipe's requests: detached first, so that their ops fail with st. */
    for (fence__req *q = a->p.head; q != NULL; q = q->next) {
        q->done = NULL;
        q->abandoned = 1;
    }
    fence__pipe_fail_all(&a->p, copy, 0);
    while (fl != NULL) {
        fence__aop *next = fl->fnext;
        fl->fnext = NULL;
        fail_op(fl, st, copy);
        fl = next;
    }
    fail_waiting(a, st, copy, 0);
    drop_conn(a);
}

void fence__async_forget(fence_async *a, const fence_lease *l)
{
    for (fence__aop *op = a->flight; op != NULL; op = op->fnext) {
        if (op->l == l) {
            op->l = NULL;
        }
    }
    for (fence__aop *op = a->waiting; op != NULL; op = op->next) {
        if (op->l == l) {
            op->l = NULL;
        }
    }
}
