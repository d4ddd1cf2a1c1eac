/* eval.c -- the handle (init, close) and running scripts by index into
 * its table: EVALSHA with the NOSCRIPT fallback, the command connection's
 * one retry, routing a call to its key's node in a cluster, and for the
 * calls that ask for them the owner's first_use check before the first
 * one on a connection and the WAIT pipelined behind the script. */
#include "redis.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void fence__rd_init(fence__redis *rs)
{
    pthread_mutex_init(&rs->cmd_lock, NULL);
    atomic_init(&rs->reconnects, 0);
}

void fence__rd_close(fence__redis *rs)
{
    fence__conn_drop(&rs->cmd);
    fence__cluster_free(rs);
    fence__url_free(&rs->url);
    pthread_mutex_destroy(&rs->cmd_lock);
}

static int is_noscript(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/* Read WAIT's reply (appended after the script): *acked, or -1. */
static int read_wait(fence__conn *rc, long long *acked)
{
    redisReply *w = NULL;
    if (fence__tr_reply(rc, (void **)&w) != 0) {
        return -1;
    }
    *acked = w->type == REDIS_REPLY_INTEGER ? w->integer : -1;
    freeReplyObject(w);
    return 0;
}

/* Send argv (the script call), and WAIT behind it when io asks; read the
 * script's reply into *r (NULL on an I/O error). */
static void send_script(fence__conn *rc, int argc, const char **argv, const size_t *lens,
                        fence__eval_opts *io, int asking, redisReply **r)
{
    *r = NULL;
    int wait = io != NULL && io->min_replicas > 0;
    if ((asking && fence__tr_appendf(rc, "ASKING") != 0) ||
        fence__tr_append(rc, argc, argv, lens) != 0 ||
        (wait && fence__tr_appendf(rc, "WAIT %d %lld", io->min_replicas,
                                   (long long)io->replica_timeout_ms) != 0)) {
        return;
    }
    if (asking) { /* +OK, or an error the script's reply repeats */
        if (fence__tr_reply(rc, (void **)r) != 0) {
            *r = NULL;
            return;
        }
        freeReplyObject(*r);
    }
    if (fence__tr_reply(rc, (void **)r) != 0) {
        *r = NULL;
        return;
    }
    if (wait && read_wait(rc, &io->acked) != 0) {
        freeReplyObject(*r);
        *r = NULL;
    }
}

/* The I/O failure of a script call on *rcp: message, drop, FENCE_ECONN. */
static fence_status io_failed(fence__redis *rs, fence__conn **rcp, int *timed_out)
{
    if (timed_out != NULL && (*rcp)->timed_out) {
        *timed_out = 1;
    }
    fence_status st = fence__rd_fail(rs, FENCE_ECONN, "%s: connection failed: %s", rs->url.display,
                                     (*rcp)->errstr);
    fence__conn_drop(rcp);
    return st;
}

/* An error reply to a script: auth, a cluster redirection (into *rd),
 * or the script's own error. */
static fence_status script_error(fence__redis *rs, const redisReply *r, fence__redirect *rd)
{
    if (rd != NULL && fence__redirect_parse(r->str, rd) != FENCE__RD_NONE) {
        return fence__rd_fail(rs, FENCE_ECONN, "%s: %.200s", rs->url.display, r->str);
    }
    if (fence__is_auth_error(r->str)) {
        return fence__rd_fail(rs, FENCE_EAUTH, "%s: %.200s", rs->url.display, r->str);
    }
    return fence__rd_fail(rs, FENCE_EPROTO, "%s: script error: %.300s", rs->url.display, r->str);
}

fence_status fence__eval(fence__redis *rs, fence__conn **rcp, int script, int nkeys, int nargs,
                         const char **args, int *timed_out, fence__eval_opts *io, int asking,
                         fence__redirect *rd, void **reply)
{
    if (rd != NULL) {
        rd->kind = FENCE__RD_NONE;
    }
    if (timed_out != NULL) {
        *timed_out = 0;
    }
    enum { MAXARGV = 3 + 11 }; /* acquire with a holder description: 3 keys, 8 arguments */
    const char *argv[MAXARGV];
    size_t argvlen[MAXARGV];
    char nk[16];
    *reply = NULL;
    if (script < 0 || script >= rs->nscripts) {
        return fence__rd_fail(rs, FENCE_EINVAL, "internal: no script %d", script);
    }
    if (nargs + 3 > MAXARGV) {
        return fence__rd_fail(rs, FENCE_EINVAL, "internal: too many script arguments");
    }
    snprintf(nk, sizeof nk, "%d", nkeys);
    for (int i = 0; i < nargs; i++) {
        argv[3 + i] = args[i];
        argvlen[3 + i] = strlen(args[i]);
    }
    argv[2] = nk;
    argvlen[2] = strlen(nk);
    for (int attempt = 0; attempt < 2; attempt++) {
        int use_sha = attempt == 0 && rs->sha[script][0] != '\0';
        argv[0] = use_sha ? "EVALSHA" : "EVAL";
        argv[1] = use_sha ? rs->sha[script] : rs->script[script];
        argvlen[1] = use_sha ? 40 : rs->script_len[script];
        argvlen[0] = strlen(argv[0]);
        errno = 0;
        redisReply *r = NULL;
        send_script(*rcp, nargs + 3, argv, argvlen, io, asking, &r);
        if (r == NULL) {
            return io_failed(rs, rcp, timed_out);
        }
        if (use_sha && is_noscript(r)) {
            freeReplyObject(r); /* Redis restarted or SCRIPT FLUSH: send the body */
            continue;
        }
        if (r->type == REDIS_REPLY_ERROR && (*rcp)->err) {
            /* READONLY / LOADING / MASTERDOWN from a Sentinel-managed
             * node: a failover; the connection is dropped (a new one asks
             * the Sentinels again). */
            freeReplyObject(r);
            return io_failed(rs, rcp, NULL);
        }
        if (r->type == REDIS_REPLY_ERROR) {
            fence_status st = script_error(rs, r, rd);
            freeReplyObject(r);
            return st;
        }
        *reply = r;
        return FENCE_OK;
    }
    return fence__rd_fail(rs, FENCE_EPROTO, "%s: NOSCRIPT after EVAL", rs->url.display);
}

/* Where a command-path call goes: the client's one connection, or a
 * cluster node's (all under cmd_lock). */
typedef struct dest {
    fence__conn **rc;
    int *ever, *checked;
    int node; /* -1: the client's own connection */
} dest;

/* One script call, as the caller asked for it. */
typedef struct call {
    int script, nkeys, nargs;
    const char **args;
    fence__eval_opts *io;
    void **reply;
    int64_t bound_ms, iot;
} call;

/* Before the first call asking for it on a command connection: read what
 * the server says of itself and let the owner refuse it (cmd_lock held).
 * Checked once per connection; a refusal is asked again next time. */
static fence_status check_server_locked(fence__redis *rs, dest *d)
{
    if (*d->checked || rs->first_use == NULL) {
        return FENCE_OK;
    }
    fence_server_info si;
    fence_status st = fence__srv_read(rs, *d->rc, &si);
    if (st == FENCE_OK) {
        st = rs->first_use(rs->first_use_arg, &si);
    }
    if (st == FENCE_OK) {
        *d->checked = 1;
    } else if (*d->rc != NULL && (*d->rc)->err != 0) {
        fence__conn_drop(d->rc);
    }
    return st;
}

/* One attempt on d: connect if needed, the server check, the script.
 * *fresh: the connection is new; *unsent: failed before the script went
 * out (safe to retry). */
static fence_status attempt(fence__redis *rs, dest *d, const call *k, int asking,
                            fence__redirect *rd, int *fresh, int *unsent, int *timed_out)
{
    *fresh = *d->rc == NULL || (*d->rc)->err != 0;
    *unsent = 1;
    *timed_out = 0;
    fence_status st = d->node < 0 ? fence__conn_ensure(rs, d->rc, d->ever, k->bound_ms)
                                  : fence__cluster_ensure(rs, d->node, d->rc, d->ever, k->bound_ms);
    if (st != FENCE_OK) {
        return st;
    }
    if (*fresh) {
        *d->checked = 0; /* a new connection: perhaps another server */
    }
    fence__conn_timeout(*d->rc, k->iot);
    if (k->io != NULL && k->io->check) {
        st = check_server_locked(rs, d);
        if (st != FENCE_OK) {
            return st;
        }
    }
    *unsent = 0;
    return fence__eval(rs, d->rc, k->script, k->nkeys, k->nargs, k->args, timed_out, k->io,
                       asking, rd, k->reply);
}

static fence_status standalone_locked(fence__redis *rs, const call *k, int *retried)
{
    dest d = {&rs->cmd, &rs->cmd_ever, &rs->cmd_checked, -1};
    fence_status st = FENCE_ECONN;
    for (int n = 0; n < 2; n++) {
        int fresh = 0, unsent = 0, timed_out = 0;
        st = attempt(rs, &d, k, 0, NULL, &fresh, &unsent, &timed_out);
        /* A connection that had been idle may have been closed by a Redis
         * restart: retry once on a new one.  The owner's scripts must be
         * safe to repeat (the lease layer's are: see lease.c), and *retried
         * tells the caller, whose answer may then be ambiguous.
         * A timeout is not retried: Redis is there but not answering, and
         * a second wait would only double the caller's. */
        if (st != FENCE_ECONN || fresh || timed_out || unsent) {
            break;
        }
        if (retried != NULL) {
            *retried = 1;
        }
    }
    return st;
}

#define MAX_REDIRECTS 5

/* What to do after a failed cluster attempt: 1 retry (on *next, -1: the
 * map's node), 0 stop.  Redirections mean the script did not run. */
static int cluster_next(fence__redis *rs, const fence__redirect *rd, int *redirs, int *next,
                        int *asking, int64_t end, int from)
{
    *next = -1;
    *asking = 0;
    if (++*redirs > MAX_REDIRECTS || fence__now_us() >= end) {
        return 0;
    }
    if (rd->kind == FENCE__RD_MOVED) {
        atomic_fetch_add(&rs->cl->moved, 1);
        *next = fence__cluster_redirect(rs, rd, from);
    } else if (rd->kind == FENCE__RD_ASK) {
        atomic_fetch_add(&rs->cl->ask, 1);
        *next = fence__cluster_redirect(rs, rd, from);
        *asking = *next >= 0;
    } else {
        /* TRYAGAIN, CLUSTERDOWN, or a node we could not reach (a failover
         * may be promoting its replica): back off, look at the map again. */
        atomic_fetch_add(&rs->cl->tryagain, 1);
        int64_t us = (int64_t)25000 << *redirs, left = end - fence__now_us();
        fence__sleep_us(us < left ? us : left);
    }
    return 1;
}

static fence_status cluster_locked(fence__redis *rs, const call *k, int *retried)
{
    const char *key = k->args[0];
    int slot = fence__key_slot(key, strlen(key));
    int64_t span = k->bound_ms > 0 ? k->bound_ms
                   : (rs->connect_timeout_ms > rs->io_timeout_ms ? rs->connect_timeout_ms
                                                               : rs->io_timeout_ms);
    int64_t end = fence__now_us() + span * 1000;
    int redirs = 0, next = -1, asking = 0, io_retried = 0;
    char last[200] = "";
    for (;;) {
        int64_t left = (end - fence__now_us()) / 1000;
        int node = next >= 0 ? next : fence__cluster_node_of(rs, slot, left > 1 ? left : 1);
        fence__redirect rd = {.kind = FENCE__RD_NONE};
        fence_status st;
        int fresh = 0, unsent = 1, timed_out = 0;
        if (node < 0) {
            st = fence__rd_fail(rs, FENCE_ECONN, "%s: no known cluster node serves slot %d",
                                rs->url.display, slot);
        } else {
            fence__node *nd = &rs->cl->nodes[node];
            dest d = {&nd->cmd, &nd->cmd_ever, &nd->cmd_checked, node};
            st = attempt(rs, &d, k, asking, &rd, &fresh, &unsent, &timed_out);
        }
        if (st != FENCE_ECONN) {
            return st;
        }
        snprintf(last, sizeof last, "%s", fence__err_get(fence__rd_errslot(), rs->errkey));
        if (rd.kind == FENCE__RD_NONE) {
            fence__cluster_stale(rs);
            /* Sent and unanswered: today's rule (one retry of an idle
             * connection, never after a timeout). */
            if (!unsent && (fresh || timed_out || io_retried++)) {
                return st;
            }
            if (!unsent && retried != NULL) {
                *retried = 1;
            }
        }
        if (!cluster_next(rs, &rd, &redirs, &next, &asking, end, node)) {
            return fence__rd_fail(rs, FENCE_ECONN, "%s: slot %d: gave up after %d attempts "
                                  "(last: %.150s)", rs->url.display, slot, redirs, last);
        }
    }
}

fence_status fence__eval_cmd(fence__redis *rs, int script, int nkeys, int nargs,
                             const char **args, int64_t bound_ms, int *retried,
                             fence__eval_opts *io, void **reply)
{
    int64_t iot = rs->io_timeout_ms;
    if (bound_ms > 0 && bound_ms < iot) {
        iot = bound_ms;
    }
    /* WAIT holds the reply back for up to its own timeout. */
    if (io != NULL && io->min_replicas > 0) {
        iot += io->replica_timeout_ms;
    }
    if (retried != NULL) {
        *retried = 0;
    }
    call k = {script, nkeys, nargs, args, io, reply, bound_ms, iot};
    pthread_mutex_lock(&rs->cmd_lock);
    fence_status st = rs->cl != NULL ? cluster_locked(rs, &k, retried)
                                    : standalone_locked(rs, &k, retried);
    if (rs->cmd != NULL && iot != rs->io_timeout_ms) {
        fence__conn_timeout(rs->cmd, rs->io_timeout_ms);
    }
    pthread_mutex_unlock(&rs->cmd_lock);
    return st;
}

fence_status fence__cmd_server_info(fence__redis *rs, fence_server_info *out)
{
    pthread_mutex_lock(&rs->cmd_lock);
    int fresh = rs->cmd == NULL || rs->cmd->err != 0;
    fence_status st = fence__conn_ensure(rs, &rs->cmd, &rs->cmd_ever, 0);
    if (st == FENCE_OK) {
        if (fresh) {
            rs->cmd_checked = 0;
        }
        st = fence__srv_read(rs, rs->cmd, out);
        if (rs->cmd != NULL && rs->cmd->err != 0) {
            fence__conn_drop(&rs->cmd);
        }
    }
    pthread_mutex_unlock(&rs->cmd_lock);
    return st;
}
