/* eval.c -- running the scripts: EVALSHA with the NOSCRIPT fallback, the
 * command connection's one retry, and for the calls that issue a token
 * the server check before the first one on a connection and the WAIT
 * pipelined behind the script. */
#include "lease_internal.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

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
                        fence__issue *io, redisReply **r)
{
    *r = NULL;
    int wait = io != NULL && io->min_replicas > 0;
    if (fence__tr_append(rc, argc, argv, lens) != 0 ||
        (wait && fence__tr_appendf(rc, "WAIT %d %lld", io->min_replicas,
                                   (long long)io->replica_timeout_ms) != 0)) {
        return;
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
static fence_status io_failed(fence_client *c, fence__conn **rcp, int *timed_out)
{
    if (timed_out != NULL && (*rcp)->timed_out) {
        *timed_out = 1;
    }
    fence_status st = fence__fail(c, FENCE_ECONN, "%s: connection failed: %s", c->url.display,
                                  (*rcp)->errstr);
    fence__conn_drop(rcp);
    return st;
}

fence_status fence__eval(fence_client *c, fence__conn **rcp, int script, int nkeys, int nargs,
                         const char **args, int *timed_out, fence__issue *io, void **reply)
{
    if (timed_out != NULL) {
        *timed_out = 0;
    }
    enum { MAXARGV = 3 + 8 };
    const char *argv[MAXARGV];
    size_t argvlen[MAXARGV];
    char nk[16];
    *reply = NULL;
    if (nargs + 3 > MAXARGV) {
        return fence__fail(c, FENCE_EINVAL, "internal: too many script arguments");
    }
    snprintf(nk, sizeof nk, "%d", nkeys);
    for (int i = 0; i < nargs; i++) {
        argv[3 + i] = args[i];
        argvlen[3 + i] = strlen(args[i]);
    }
    argv[2] = nk;
    argvlen[2] = strlen(nk);
    for (int attempt = 0; attempt < 2; attempt++) {
        int use_sha = attempt == 0 && c->sha[script][0] != '\0';
        argv[0] = use_sha ? "EVALSHA" : "EVAL";
        argv[1] = use_sha ? c->sha[script] : fence__script_body(script);
        argvlen[1] = use_sha ? 40 : fence__script_len(script);
        argvlen[0] = strlen(argv[0]);
        errno = 0;
        redisReply *r = NULL;
        send_script(*rcp, nargs + 3, argv, argvlen, io, &r);
        if (r == NULL) {
            return io_failed(c, rcp, timed_out);
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
            return io_failed(c, rcp, NULL);
        }
        if (r->type == REDIS_REPLY_ERROR) {
            fence_status st = fence__is_auth_error(r->str)
                         ? fence__fail(c, FENCE_EAUTH, "%s: %.200s", c->url.display, r->str)
                         : fence__fail(c, FENCE_EPROTO, "%s: script error: %.300s",
                                       c->url.display, r->str);
            freeReplyObject(r);
            return st;
        }
        *reply = r;
        return FENCE_OK;
    }
    return fence__fail(c, FENCE_EPROTO, "%s: NOSCRIPT after EVAL", c->url.display);
}

/* Before the first token on the command connection: read what the server
 * says of itself and refuse one that can evict the counters (cmd_lock
 * held).  Checked once per connection; a refusal is asked again next time. */
static fence_status check_server_locked(fence_client *c)
{
    if (c->cmd_checked) {
        return FENCE_OK;
    }
    fence_server_info si;
    fence_status st = fence__srv_read(c, c->cmd, &si);
    if (st == FENCE_OK) {
        st = fence__srv_refuse(c, &si);
    }
    if (st == FENCE_OK) {
        c->cmd_checked = 1;
    } else if (c->cmd != NULL && c->cmd->err != 0) {
        fence__conn_drop(&c->cmd);
    }
    return st;
}

fence_status fence__eval_cmd(fence_client *c, int script, int nkeys, int nargs,
                             const char **args, int64_t bound_ms, int *retried,
                             fence__issue *io, void **reply)
{
    int64_t iot = c->io_timeout_ms;
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
    pthread_mutex_lock(&c->cmd_lock);
    fence_status st = FENCE_ECONN;
    for (int attempt = 0; attempt < 2; attempt++) {
        int fresh = c->cmd == NULL || c->cmd->err != 0;
        st = fence__conn_ensure(c, &c->cmd, &c->cmd_ever, bound_ms);
        if (st != FENCE_OK) {
            break;
        }
        if (fresh) {
            c->cmd_checked = 0; /* a new connection: perhaps another server */
        }
        fence__conn_timeout(c->cmd, iot);
        if (io != NULL && io->check) {
            st = check_server_locked(c);
            if (st != FENCE_OK) {
                break;
            }
        }
        int timed_out = 0;
        st = fence__eval(c, &c->cmd, script, nkeys, nargs, args, &timed_out, io, reply);
        /* A connection that had been idle may have been closed by a Redis
         * restart: retry once on a new one.  Every script is safe to
         * repeat (acquire recognises its own owner id; the caller of a
         * retried release is told, since its answer is then ambiguous).
         * A timeout is not retried: Redis is there but not answering, and
         * a second wait would only double the caller's. */
        if (st != FENCE_ECONN || fresh || timed_out) {
            break;
        }
        if (retried != NULL) {
            *retried = 1;
        }
    }
    if (c->cmd != NULL && iot != c->io_timeout_ms) {
        fence__conn_timeout(c->cmd, c->io_timeout_ms);
    }
    pthread_mutex_unlock(&c->cmd_lock);
    return st;
}

fence_status fence__cmd_server_info(fence_client *c, fence_server_info *out)
{
    pthread_mutex_lock(&c->cmd_lock);
    int fresh = c->cmd == NULL || c->cmd->err != 0;
    fence_status st = fence__conn_ensure(c, &c->cmd, &c->cmd_ever, 0);
    if (st == FENCE_OK) {
        if (fresh) {
            c->cmd_checked = 0;
        }
        st = fence__srv_read(c, c->cmd, out);
        if (c->cmd != NULL && c->cmd->err != 0) {
            fence__conn_drop(&c->cmd);
        }
    }
    pthread_mutex_unlock(&c->cmd_lock);
    return st;
}
