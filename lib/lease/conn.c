/* conn.c -- connections to Redis: connect with timeouts, AUTH, SELECT,
 * and script loading (running scripts: eval.c). */
#include "lease_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

static struct timeval tv_ms(int64_t ms)
{
    if (ms < 1) {
        ms = 1;
    }
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000)};
    return tv;
}

void fence__conn_timeout(redisContext *rc, int64_t ms)
{
    if (rc != NULL) {
        redisSetTimeout(rc, tv_ms(ms));
    }
}

void fence__conn_drop(redisContext **rc)
{
    if (*rc != NULL) {
        redisFree(*rc);
        *rc = NULL;
    }
}

/* An error reply that means "who are you?": map it to FENCE_EAUTH. */
int fence__is_auth_error(const char *s)
{
    return strncmp(s, "NOAUTH", 6) == 0 || strncmp(s, "WRONGPASS", 9) == 0 ||
           strncmp(s, "ERR invalid password", 20) == 0 ||
           strncmp(s, "ERR AUTH", 8) == 0 || strncmp(s, "NOPERM", 6) == 0;
}

static fence_status simple(fence_client *c, redisContext *rc, int argc, const char **argv, int is_auth)
{
    redisReply *r = redisCommandArgv(rc, argc, argv, NULL);
    if (r == NULL) {
        return fence__fail(c, FENCE_ECONN, "%s: %s failed: %s", c->url.display,
                           is_auth ? "AUTH" : argv[0], rc->errstr);
    }
    fence_status st = FENCE_OK;
    if (r->type == REDIS_REPLY_ERROR) {
        if (is_auth || fence__is_auth_error(r->str)) {
            /* The server's text names no secret; ours neither. */
            st = fence__fail(c, FENCE_EAUTH, "%s: authentication refused: %.200s",
                             c->url.display, r->str);
        } else {
            st = fence__fail(c, FENCE_EPROTO, "%s: %s refused: %.200s", c->url.display,
                             argv[0], r->str);
        }
    }
    freeReplyObject(r);
    return st;
}

fence_status fence__conn_open(fence_client *c, redisContext **out, int64_t timeout_ms)
{
    *out = NULL;
    int64_t ct = c->connect_timeout_ms;
    if (timeout_ms > 0 && timeout_ms < ct) {
        ct = timeout_ms;
    }
    redisContext *rc = c->url.is_unix ? redisConnectUnixWithTimeout(c->url.path, tv_ms(ct))
                                      : redisConnectWithTimeout(c->url.host, c->url.port, tv_ms(ct));
    if (rc == NULL) {
        return fence__fail(c, FENCE_ENOMEM, "out of memory connecting to %s", c->url.display);
    }
    if (rc->err) {
        fence_status st = fence__fail(c, FENCE_ECONN, "cannot connect to %s: %s", c->url.display,
                             rc->errstr);
        redisFree(rc);
        return st;
    }
    /* hiredis 0.14 opens its socket without SOCK_CLOEXEC: a program that
     * forks and execs must not hand our connections to its children. */
    int fl = fcntl(rc->fd, F_GETFD);
    if (fl >= 0) {
        fcntl(rc->fd, F_SETFD, fl | FD_CLOEXEC);
    }
    int64_t io = c->io_timeout_ms;
    if (timeout_ms > 0 && timeout_ms < io) {
        io = timeout_ms;
    }
    redisSetTimeout(rc, tv_ms(io));
    if (!c->url.is_unix) {
        redisEnableKeepAlive(rc);
    }
    fence_status st = FENCE_OK;
    if (c->url.password != NULL) {
        const char *argv[3] = {"AUTH", c->url.user, c->url.password};
        if (c->url.user != NULL) {
            st = simple(c, rc, 3, argv, 1);
        } else {
            argv[1] = c->url.password;
            st = simple(c, rc, 2, argv, 1);
        }
    }
    if (st == FENCE_OK && c->url.db != 0) {
        char db[16];
        snprintf(db, sizeof db, "%d", c->url.db);
        const char *argv[2] = {"SELECT", db};
        st = simple(c, rc, 2, argv, 0);
    }
    if (st != FENCE_OK) {
        redisFree(rc);
        return st;
    }
    *out = rc;
    return FENCE_OK;
}

fence_status fence__conn_ensure(fence_client *c, redisContext **rc, int *ever,
                                int64_t timeout_ms)
{
    if (*rc != NULL && (*rc)->err == 0) {
        return FENCE_OK;
    }
    fence__conn_drop(rc);
    fence_status st = fence__conn_open(c, rc, timeout_ms);
    if (st == FENCE_OK) {
        if (*ever) {
            atomic_fetch_add(&c->m.reconnects, 1);
        }
        *ever = 1;
    }
    return st;
}

void fence__scripts_load(fence_client *c, redisContext *rc)
{
    for (int s = 0; s < FENCE__NSCRIPTS; s++) {
        const char *argv[3] = {"SCRIPT", "LOAD", fence__script_body(s)};
        size_t lens[3] = {6, 4, fence__script_len(s)};
        redisAppendCommandArgv(rc, 3, argv, lens);
    }
    for (int s = 0; s < FENCE__NSCRIPTS; s++) {
        redisReply *r = NULL;
        if (redisGetReply(rc, (void **)&r) != REDIS_OK) {
            return; /* the caller sees rc->err */
        }
        if (r->type == REDIS_REPLY_STRING && r->len == 40) {
            memcpy(c->sha[s], r->str, 41);
        }
        freeReplyObject(r);
    }
}
