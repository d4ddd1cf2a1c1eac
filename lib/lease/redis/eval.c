/* eval.c -- the handle (init, close) and running scripts by index into
 * its table on the command line: queued behind the other callers'
 * requests (redis/pipe.c), EVALSHA with the NOSCRIPT fallback, one retry
 * on a new connection, routing a call to its key's node in a cluster, and
 * for the calls that ask for them the owner's first_use check before the
 * first one on a connection and the WAIT pipelined behind the script.
 *
 * cmd_lock guards the lines (the client's and the cluster nodes'); it is
 * held to queue a request and to look at a line, and released while a
 * caller waits for its reply or connects -- and never held across a
 * cluster's back-off or a refresh of its slot map, which other callers'
 * calls must not wait for.  Nobody closes a connection while a caller
 * drives its I/O (fence__pipe_wait polls its fd unlocked); a line is
 * reconnected only once every request on it has failed.
 *
 * Each call has one budget (redis.h, fence__eval_cmd): a connect phase of
 * connect_timeout_ms, a request phase of io_timeout_ms (+ WAIT's), the
 * whole capped by their sum and by the caller's deadline. */
#include "redis.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int fence__rd_init(fence__redis *rs)
{
    pthread_mutex_init(&rs->cmd_lock, NULL);
    atomic_init(&rs->reconnects, 0);
    return fence__pipe_init(&rs->cmd.p);
}

void fence__rd_close(fence__redis *rs)
{
    fence__pipe_destroy(&rs->cmd.p);
    fence__cluster_free(rs);
    fence__url_free(&rs->url);
    pthread_mutex_destroy(&rs->cmd_lock);
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int is_noscript(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/* An error reply to a script: auth, a cluster redirection (into *rd),
 * or the script's own error. */
static fence_status script_error(const fence__redis *rs, const redisReply *r, fence__redirect *rd)
{
    if (rd != NULL && fence__redirect_parse(r->str, rd) != FENCE__RD_NONE) {
        return fence__rd_fail(rs, FENCE_ECONN, "%s: %.200s", rs->url.display, r->str);
    }
    if (fence__is_auth_error(r->str)) {
        return fence__rd_fail(rs, FENCE_EAUTH, "%s: %.200s", rs->url.display, r->str);
    }
    return fence__rd_fail(rs, FENCE_EPROTO, "%s: script error: %.300s", rs->url.display, r->str);
}

/* Where a command-path call goes: the client's line, or a cluster node's. */
typedef struct dest {
    fence__line *ln;
    int node; /* -1: the client's own line */
} dest;

/* One script call, as the caller asked for it. */
typedef struct call {
    int script, nkeys, nargs;
    const char **args;
    fence__eval_opts *io;
    void **reply;
    int64_t end_us;  /* the whole call's deadline */
    int64_t io_us;   /* the request phase's budget: the I/O timeout, plus WAIT's */
} call;

/* Make d's connection usable (cmd_lock held; released while waiting for
 * another caller's connect or while connecting), before deadline_us.
 * *fresh: this call opened it. */
static fence_status line_ready(fence__redis *rs, dest *d, int64_t deadline_us, int *fresh)
{
    fence__line *ln = d->ln;
    *fresh = 0;
    for (;;) {
        if (!ln->opening && ln->p.cn != NULL && ln->p.cn->err == 0) {
            return FENCE_OK;
        }
        if (!ln->opening && !ln->p.driving) {
            break;
        }
        /* Another caller is connecting, or still leaving a failed
         * connection's poll: wait for it. */
        if (fence__now_us() >= deadline_us) {
            return fence__rd_fail(rs, FENCE_ECONN, "%s: cannot connect: timed out waiting for "
                                  "another caller's connect", rs->url.display);
        }
        struct timespec ts = fence__timespec_ns(deadline_us * 1000);
        pthread_cond_timedwait(&ln->p.cond, &rs->cmd_lock, &ts);
    }
    int64_t left_ms = (deadline_us - fence__now_us()) / 1000;
    if (left_ms < 1) {
        return fence__rd_fail(rs, FENCE_ECONN, "%s: cannot connect: timed out",
                              rs->url.display);
    }
    fence__pipe_fail_all(&ln->p, "the connection was replaced", 0);
    fence__tr_close(&ln->p.cn);
    ln->opening = 1;
    int ever = ln->ever;
    pthread_mutex_unlock(&rs->cmd_lock);
    fence__conn *cn = NULL;
    fence_status st = d->node < 0 ? fence__conn_ensure(rs, &cn, &ever, left_ms)
                                  : fence__cluster_ensure(rs, d->node, &cn, &ever, left_ms);
    pthread_mutex_lock(&rs->cmd_lock);
    ln->opening = 0;
    ln->ever = ever;
    if (st == FENCE_OK) {
        ln->p.cn = cn;
        ln->gen++;
        ln->checked = 0; /* a new connection: perhaps another server */
        *fresh = 1;
    }
    pthread_cond_broadcast(&ln->p.cond);
    return st;
}

/* Queue q (its commands appended to d's connection) and wait for it until
 * deadline_us (cmd_lock held; released while waiting).  FENCE_OK: q is
 * DONE (the caller frees it).  Otherwise FENCE_ECONN with a message, q
 * freed or left to the pipe, *timed_out set for a timeout. */
static fence_status exchange(fence__redis *rs, dest *d, fence__req *q, int64_t deadline_us,
                             int *timed_out)
{
    fence__pipe_submit(&d->ln->p, q, 0); /* the driver writes what is queued, together */
    if (fence__pipe_wait(&d->ln->p, &rs->cmd_lock, q, deadline_us) != 0) {
        /* Our time is up; the connection stays, for the others. */
        *timed_out = 1;
        return fence__rd_fail(rs, FENCE_ECONN, "%s: connection failed: Resource temporarily "
                              "unavailable (timed out)", rs->url.display);
    }
    if (q->state != FENCE__REQ_DONE) {
        *timed_out = q->timed_out;
        fence_status st = fence__rd_fail(rs, FENCE_ECONN, "%s: connection failed: %s",
                                         rs->url.display, q->errstr);
        fence__req_free(q);
        return st;
    }
    return FENCE_OK;
}

/* Before the first call asking for it on a connection: read what the
 * server says of itself and let the owner refuse it (cmd_lock held), before
 * deadline_us.  Checked once per connection (callers that come at once may
 * each ask); a refusal is asked again next time. */
static fence_status check_server_locked(fence__redis *rs, dest *d, int64_t deadline_us,
                                        int *timed_out)
{
    fence__line *ln = d->ln;
    if (ln->checked || rs->first_use == NULL) {
        return FENCE_OK;
    }
    unsigned gen = ln->gen;
    fence__req *q = fence__req_new(FENCE__SRV_NREPLIES, fence__script_allowance_us(rs, NULL));
    if (q == NULL) {
        return fence__rd_fail(rs, FENCE_ENOMEM, "out of memory");
    }
    fence__srv_append(ln->p.cn);
    fence_status st = exchange(rs, d, q, deadline_us, timed_out);
    if (st != FENCE_OK) {
        return st;
    }
    fence__srvinfo si;
    fence__srv_fill(&si, q->reply);
    fence__req_free(q);
    st = rs->first_use(rs->first_use_arg, &si);
    if (st == FENCE_OK && ln->gen == gen) {
        ln->checked = 1;
    }
    return st;
}

int fence__script_append(const fence__redis *rs, fence__conn *cn, int script, int use_sha,
                         int nkeys, int nargs, const char **args, int asking,
                         const fence__eval_opts *io)
{
    enum { MAXARGV = 3 + 11 }; /* acquire with a holder description: 3 keys, 7 arguments */
    const char *argv[MAXARGV];
    size_t argvlen[MAXARGV];
    char nk[16];
    if (script < 0 || script >= rs->nscripts || nargs < 0 || nargs + 3 > MAXARGV) {
        return -1;
    }
    use_sha = use_sha && rs->sha[script][0] != '\0';
    argv[0] = use_sha ? "EVALSHA" : "EVAL";
    argvlen[0] = use_sha ? 7 : 4;
    argv[1] = use_sha ? rs->sha[script] : rs->script[script];
    argvlen[1] = use_sha ? 40 : rs->script_len[script];
    argv[2] = nk;
    argvlen[2] = fence__u64_text((uint64_t)(nkeys > 0 ? nkeys : 0), nk);
    for (int i = 0; i < nargs; i++) {
        argv[3 + i] = args[i];
        argvlen[3 + i] = strlen(args[i]);
    }
    int wait = io != NULL && io->min_replicas > 0;
    /* An append that fails (out of memory) marks the connection failed:
     * its request then fails, nothing is sent. */
    (void)(asking && fence__tr_appendf(cn, "ASKING") != 0);
    fence__tr_append(cn, nargs + 3, argv, argvlen);
    (void)(wait && fence__tr_appendf(cn, "WAIT %d %lld", io->min_replicas,
                                     (long long)io->replica_timeout_ms) != 0);
    return asking + 1 + wait;
}

fence_status fence__script_verdict(const fence__redis *rs, const void *reply,
                                   fence__redirect *rd, int *noscript)
{
    const redisReply *r = reply;
    *noscript = 0;
    if (r->type != REDIS_REPLY_ERROR) {
        return FENCE_OK;
    }
    if (is_noscript(r)) {
        *noscript = 1; /* Redis restarted or SCRIPT FLUSH: send the body */
        return FENCE_EPROTO;
    }
    if (rs->url.sentinel && fence__is_failover_error(r->str)) {
        /* READONLY / LOADING / MASTERDOWN from a Sentinel-managed node: a
         * failover.  The transport has marked the connection failed (a new
         * one asks the Sentinels again). */
        return fence__rd_fail(rs, FENCE_ECONN, "%s: connection failed: the server is no master "
                              "now (%.60s): asking the Sentinels again", rs->url.display, r->str);
    }
    return script_error(rs, r, rd);
}

int64_t fence__script_allowance_us(const fence__redis *rs, const fence__eval_opts *io)
{
    int64_t ms = rs->io_timeout_ms;
    if (io != NULL && io->min_replicas > 0) {
        ms += io->replica_timeout_ms;
    }
    return ms * 1000;
}

/* The script itself on d's line (cmd_lock held), before deadline_us:
 * EVALSHA, EVAL after NOSCRIPT; ASKING before it, WAIT behind it when
 * asked. */
static fence_status run_script(fence__redis *rs, dest *d, const call *k, int asking,
                               int64_t deadline_us, fence__redirect *rd, int *timed_out)
{
    int wait = k->io != NULL && k->io->min_replicas > 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        fence__req *q = fence__req_new(asking + 1 + wait, fence__script_allowance_us(rs, k->io));
        if (q == NULL) {
            return fence__rd_fail(rs, FENCE_ENOMEM, "out of memory");
        }
        if (fence__script_append(rs, d->ln->p.cn, k->script, attempt == 0, k->nkeys, k->nargs,
                                 k->args, asking, k->io) < 0) {
            fence__req_free(q);
            return fence__rd_fail(rs, FENCE_EINVAL, "internal: no script %d, or too many "
                                  "arguments (%d)", k->script, k->nargs);
        }
        fence_status st = exchange(rs, d, q, deadline_us, timed_out);
        if (st != FENCE_OK) {
            return st;
        }
        /* ASKING's reply is +OK, or an error the script's reply repeats. */
        redisReply *r = fence__req_take(q, asking);
        if (wait) {
            const redisReply *w = q->reply[asking + 1];
            k->io->acked = w->type == REDIS_REPLY_INTEGER ? w->integer : -1;
        }
        fence__req_free(q);
        int noscript = 0;
        st = fence__script_verdict(rs, r, rd, &noscript);
        if (st == FENCE_OK) {
            *k->reply = r;
            return FENCE_OK;
        }
        freeReplyObject(r);
        if (!noscript || attempt > 0) {
            return noscript ? fence__rd_fail(rs, FENCE_EPROTO, "%s: NOSCRIPT after EVAL",
                                             rs->url.display)
                            : st;
        }
    }
    return FENCE_EPROTO; /* not reached */
}

/* One attempt on d (takes cmd_lock for its own length): connect if needed
 * (the connect phase), the server check and the script (the request
 * phase).  *fresh: the connection is new; *unsent: failed before the script
 * went out (safe to retry). */
static fence_status attempt(fence__redis *rs, dest *d, const call *k, int asking,
                            fence__redirect *rd, int *fresh, int *unsent, int *timed_out)
{
    *unsent = 1;
    *timed_out = 0;
    if (rd != NULL) {
        rd->kind = FENCE__RD_NONE;
    }
    *k->reply = NULL;
    pthread_mutex_lock(&rs->cmd_lock);
    fence_status st = line_ready(rs, d, min64(k->end_us,
                                              fence__now_us() + rs->connect_timeout_ms * 1000),
                                 fresh);
    int64_t req_end = min64(k->end_us, fence__now_us() + k->io_us);
    if (st == FENCE_OK && k->io != NULL && k->io->check) {
        st = check_server_locked(rs, d, req_end, timed_out);
    }
    if (st == FENCE_OK) {
        *unsent = 0;
        st = run_script(rs, d, k, asking, req_end, rd, timed_out);
    }
    pthread_mutex_unlock(&rs->cmd_lock);
    return st;
}

static fence_status standalone(fence__redis *rs, const call *k, int *retried)
{
    dest d = {&rs->cmd, -1};
    fence_status st = FENCE_ECONN;
    for (int n = 0; n < 2; n++) {
        int fresh = 0, unsent = 0, timed_out = 0;
        st = attempt(rs, &d, k, 0, NULL, &fresh, &unsent, &timed_out);
        /* A connection that had been idle may have been closed by a Redis
         * restart: retry once on a new one.  The owner's scripts must be
         * safe to repeat (the issuer's are: rissuer.h), and *retried tells
         * the caller, whose answer may then be ambiguous.  A timeout is not
         * retried: Redis is there but not answering, and a second wait
         * would only double the caller's. */
        if (st != FENCE_ECONN || fresh || timed_out || unsent || fence__now_us() >= k->end_us) {
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
 * map's node), 0 stop.  Redirections mean the script did not run.  A
 * back-off sleeps here, with no lock held. */
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
         * may be promoting its replica): back off, look at the map again
         * -- unless the back-off would use up the call's time, which an
         * attempt then would not have. */
        atomic_fetch_add(&rs->cl->tryagain, 1);
        int64_t us = (int64_t)25000 << *redirs;
        if (fence__now_us() + us >= end) {
            return 0;
        }
        fence__sleep_us(us);
    }
    return 1;
}

static fence_status cluster(fence__redis *rs, const call *k, int *retried)
{
    const char *key = k->args[0];
    int slot = fence__key_slot(key, strlen(key));
    int redirs = 0, next = -1, asking = 0, io_retried = 0;
    char last[200] = "";
    for (;;) {
        int64_t left = (k->end_us - fence__now_us()) / 1000;
        int node = next >= 0 ? next : fence__cluster_node_of(rs, slot, left > 1 ? left : 1);
        fence__redirect rd = {.kind = FENCE__RD_NONE};
        fence_status st;
        int fresh = 0, unsent = 1, timed_out = 0;
        if (node < 0) {
            st = fence__rd_fail(rs, FENCE_ECONN, "%s: no known cluster node serves slot %d",
                                rs->url.display, slot);
        } else {
            fence__node *nd = &rs->cl->nodes[node];
            dest d = {&nd->cmd, node};
            st = attempt(rs, &d, k, asking, &rd, &fresh, &unsent, &timed_out);
        }
        if (st != FENCE_ECONN) {
            return st;
        }
        snprintf(last, sizeof last, "%s", fence__err_get(rs->errslot(), rs->errkey));
        if (rd.kind == FENCE__RD_NONE) {
            fence__cluster_stale(rs);
            /* Sent and unanswered: the rule of one server (one retry of an
             * idle connection, never after a timeout). */
            if (!unsent && (fresh || timed_out || io_retried++)) {
                return st;
            }
            if (!unsent && retried != NULL) {
                *retried = 1;
            }
        }
        if (!cluster_next(rs, &rd, &redirs, &next, &asking, k->end_us, node)) {
            return fence__rd_fail(rs, FENCE_ECONN, "%s: slot %d: gave up after %d attempts "
                                  "(last: %.150s)", rs->url.display, slot, redirs, last);
        }
    }
}

/* The whole call's deadline: connect + I/O (+ WAIT's), capped by the
 * caller's. */
static int64_t call_end(const fence__redis *rs, int64_t io_us, int64_t deadline_us)
{
    return min64(deadline_us, fence__now_us() + rs->connect_timeout_ms * 1000 + io_us);
}

fence_status fence__eval_cmd(fence__redis *rs, int script, int nkeys, int nargs,
                             const char **args, int64_t deadline_us, int *retried,
                             fence__eval_opts *io, void **reply)
{
    if (retried != NULL) {
        *retried = 0;
    }
    int64_t io_us = fence__script_allowance_us(rs, io); /* WAIT holds the reply back */
    call k = {script, nkeys, nargs, args, io, reply, call_end(rs, io_us, deadline_us), io_us};
    return rs->cl != NULL ? cluster(rs, &k, retried) : standalone(rs, &k, retried);
}

fence_status fence__cmd_server_info(fence__redis *rs, int64_t deadline_us, fence__srvinfo *out)
{
    memset(out, 0, sizeof *out);
    out->aof = out->rdb = -1;
    int64_t io_us = rs->io_timeout_ms * 1000;
    int64_t end = call_end(rs, io_us, deadline_us);
    dest d = {&rs->cmd, -1};
    int fresh = 0, timed_out = 0;
    pthread_mutex_lock(&rs->cmd_lock);
    fence_status st = line_ready(rs, &d, min64(end, fence__now_us() +
                                               rs->connect_timeout_ms * 1000), &fresh);
    if (st == FENCE_OK) {
        fence__req *q = fence__req_new(FENCE__SRV_NREPLIES, io_us);
        if (q == NULL) {
            st = fence__rd_fail(rs, FENCE_ENOMEM, "out of memory");
        } else {
            fence__srv_append(d.ln->p.cn);
            st = exchange(rs, &d, q, min64(end, fence__now_us() + io_us), &timed_out);
            if (st == FENCE_OK) {
                fence__srv_fill(out, q->reply);
                fence__req_free(q);
            }
        }
    }
    pthread_mutex_unlock(&rs->cmd_lock);
    return st;
}
