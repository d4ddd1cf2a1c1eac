/* sentinel.c -- asking the Sentinels where the master is (the Redis
 * Sentinel client guidelines: each Sentinel in turn, SENTINEL
 * get-master-addr-by-name; the caller connects and checks ROLE).  The
 * Sentinels' own credentials are sentinel_username / sentinel_password;
 * TLS, when on, applies to them as to the data nodes. */
#include "redis.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* AUTH with the Sentinels' own credentials: 0, or -1 / -2 (refused)
 * with why. */
static int sentinel_auth(const fence__url *u, fence__conn *cn, char *why, size_t n)
{
    if (u->sentinel_password == NULL) {
        return 0;
    }
    const char *argv[3] = {"AUTH", u->sentinel_user, u->sentinel_password};
    if (u->sentinel_user == NULL) {
        argv[1] = u->sentinel_password;
    }
    redisReply *r = fence__tr_command(cn, u->sentinel_user ? 3 : 2, argv, NULL);
    if (r == NULL) {
        snprintf(why, n, "%s", cn->errstr);
        return -1;
    }
    int bad = r->type == REDIS_REPLY_ERROR;
    if (bad) {
        snprintf(why, n, "authentication refused: %.120s", r->str);
    }
    freeReplyObject(r);
    return bad ? -2 : 0;
}

/* Ask one Sentinel.  0 and host/port; -1 with why; -2 auth refused. */
static int ask(const fence__url *u, const fence__hostport *s, int64_t ms, char *host,
               size_t hostlen, int *port, char *why, size_t n)
{
    fence__conn *cn = NULL;
    fence__target t = {NULL, s->host, s->port, u->tls ? u->tls_ctx : NULL, u->tls_server_name,
                       u->tls_insecure};
    if (fence__tr_open(&t, ms, ms, &cn, why, n) != FENCE_OK) {
        return -1;
    }
    int rc = sentinel_auth(u, cn, why, n);
    if (rc != 0) {
        fence__tr_close(&cn);
        return rc;
    }
    const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", u->master};
    redisReply *r = fence__tr_command(cn, 3, argv, NULL);
    rc = -1;
    if (r == NULL) {
        snprintf(why, n, "%s", cn->errstr);
    } else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
               r->element[0]->type == REDIS_REPLY_STRING &&
               r->element[1]->type == REDIS_REPLY_STRING) {
        long p = strtol(r->element[1]->str, NULL, 10);
        if (p >= 1 && p <= 65535 && r->element[0]->len < hostlen) {
            snprintf(host, hostlen, "%s", r->element[0]->str);
            *port = (int)p;
            rc = 0;
        } else {
            snprintf(why, n, "a bad address for master '%s'", u->master);
        }
    } else if (r->type == REDIS_REPLY_NIL) {
        snprintf(why, n, "knows no master named '%s'", u->master);
    } else {
        snprintf(why, n, "%.160s", r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
        rc = r->type == REDIS_REPLY_ERROR && fence__is_auth_error(r->str) ? -2 : -1;
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    fence__tr_close(&cn);
    return rc;
}

fence_status fence__sentinel_master(const fence__url *u, int64_t timeout_ms, char *host,
                                    size_t hostlen, int *port, char *err, size_t errlen)
{
    int64_t end = fence__now_us() + timeout_ms * 1000;
    size_t used = (size_t)snprintf(err, errlen, "no Sentinel named master '%s':", u->master);
    int auth = 0;
    for (int i = 0; i < u->nsentinels; i++) {
        int64_t left = (end - fence__now_us()) / 1000;
        if (left < 1) {
            left = 1;
        }
        char why[300] = "";
        int rc = ask(u, &u->sentinels[i], left, host, hostlen, port, why, sizeof why);
        if (rc == 0) {
            return FENCE_OK;
        }
        auth |= rc == -2;
        if (used < errlen) {
            int v6 = strchr(u->sentinels[i].host, ':') != NULL;
            used += (size_t)snprintf(err + used, errlen - used, "%s %s%s%s:%d: %s",
                                     i ? ";" : "", v6 ? "[" : "", u->sentinels[i].host,
                                     v6 ? "]" : "", u->sentinels[i].port, why);
        }
    }
    return auth ? FENCE_EAUTH : FENCE_ECONN;
}
