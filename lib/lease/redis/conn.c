/* conn.c -- the handle and its connections to Redis: its messages (into
 * the slot its owner gives), the transport options, connect (through the Sentinels for a
 * redis-sentinel:// URL, then ROLE), AUTH, SELECT, and script loading
 * (running scripts: eval.c). */
#include "redis.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

fence_status fence__rd_fail(const fence__redis *rs, fence_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fence__err_vset(rs->errslot(), rs->errkey, (int)status, fmt, ap);
    va_end(ap);
    return status;
}

void fence__conn_timeout(fence__conn *rc, int64_t ms)
{
    fence__tr_timeout(rc, ms);
}

void fence__conn_drop(fence__conn **rc)
{
    fence__tr_close(rc);
}

/* An error reply that means "who are you?": map it to FENCE_EAUTH. */
static fence_status simple(fence__redis *rs, fence__conn *rc, int argc, const char **argv,
                           int is_auth)
{
    redisReply *r = fence__tr_command(rc, argc, argv, NULL);
    if (r == NULL) {
        return fence__rd_fail(rs, FENCE_ECONN, "%s: %s failed: %s", rs->url.display,
                              is_auth ? "AUTH" : argv[0], rc->errstr);
    }
    fence_status st = FENCE_OK;
    if (r->type == REDIS_REPLY_ERROR) {
        if (strcmp(argv[0], "SELECT") == 0 && strstr(r->str, "cluster mode") != NULL) {
            /* A Redis Cluster node: database 0 only. */
            st = fence__rd_fail(rs, FENCE_EINVAL, "%s: the server is a Redis Cluster node, which "
                                "has database 0 only: drop /%s from the URL", rs->url.display,
                                argv[1]);
        } else if (is_auth || fence__is_auth_error(r->str)) {
            /* The server's text names no secret; ours neither. */
            st = fence__rd_fail(rs, FENCE_EAUTH, "%s: authentication refused: %.200s",
                                rs->url.display, r->str);
        } else {
            st = fence__rd_fail(rs, FENCE_EPROTO, "%s: %s refused: %.200s", rs->url.display,
                                argv[0], r->str);
        }
    }
    freeReplyObject(r);
    return st;
}

static char *dup_opt(const char *s, int *nomem)
{
    char *d = s != NULL ? strdup(s) : NULL;
    *nomem |= s != NULL && d == NULL;
    return d;
}

/* A path option: NULL, or a non-empty string without control characters. */
static fence_status check_path(fence__redis *rs, const char *v, const char *name)
{
    if (v == NULL) {
        return FENCE_OK;
    }
    if (v[0] == '\0' || strlen(v) > 4096) {
        return fence__rd_fail(rs, FENCE_EINVAL, "%s must be a non-empty path (at most 4096 bytes)",
                              name);
    }
    for (const char *p = v; *p != '\0'; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            return fence__rd_fail(rs, FENCE_EINVAL, "%s holds a control character", name);
        }
    }
    return FENCE_OK;
}

static fence_status check_tls_opts(fence__redis *rs, const fence__rd_opts *o)
{
    if (o->tls != 0 && o->tls != 1) {
        return fence__rd_fail(rs, FENCE_EINVAL, "tls must be 0 or 1");
    }
    if (o->tls_insecure != 0 && o->tls_insecure != 1) {
        return fence__rd_fail(rs, FENCE_EINVAL, "tls_insecure must be 0 or 1");
    }
    fence_status st = check_path(rs, o->tls_ca_file, "tls_ca_file");
    st = st ? st : check_path(rs, o->tls_ca_dir, "tls_ca_dir");
    st = st ? st : check_path(rs, o->tls_cert_file, "tls_cert_file");
    st = st ? st : check_path(rs, o->tls_key_file, "tls_key_file");
    if (st != FENCE_OK) {
        return st;
    }
    const char *sn = o->tls_server_name;
    if (sn != NULL && (sn[0] == '\0' || strlen(sn) > 255 || strspn(sn,
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:*") != strlen(sn))) {
        return fence__rd_fail(rs, FENCE_EINVAL, "tls_server_name must be a host name or IP address "
                              "(at most 255 bytes)");
    }
    if ((o->tls_cert_file == NULL) != (o->tls_key_file == NULL)) {
        return fence__rd_fail(rs, FENCE_EINVAL, "tls_cert_file and tls_key_file go together "
                              "(mutual TLS needs both)");
    }
    int any = o->tls_ca_file || o->tls_ca_dir || o->tls_cert_file || sn || o->tls_insecure;
    if (any && !rs->url.tls) {
        return fence__rd_fail(rs, FENCE_EINVAL, "TLS options given but TLS is off: use a rediss:// "
                              "URL or set tls = 1");
    }
    if (rs->url.tls && rs->url.is_unix) {
        return fence__rd_fail(rs, FENCE_EINVAL, "TLS over a unix socket is not supported");
    }
    if (o->tls_insecure && (o->tls_ca_file || o->tls_ca_dir || sn)) {
        return fence__rd_fail(rs, FENCE_EINVAL, "tls_insecure turns verification off: it cannot "
                              "be combined with tls_ca_file, tls_ca_dir or tls_server_name");
    }
    return FENCE_OK;
}

fence_status fence__conn_config(fence__redis *rs, const fence__rd_opts *o)
{
    rs->url.tls |= o->tls == 1;
    fence_status st = check_tls_opts(rs, o);
    if (st != FENCE_OK) {
        return st;
    }
    if ((o->sentinel_password != NULL || o->sentinel_username != NULL) && !rs->url.sentinel) {
        return fence__rd_fail(rs, FENCE_EINVAL, "sentinel_username / sentinel_password need a "
                              "redis-sentinel:// URL");
    }
    if (o->sentinel_username != NULL && o->sentinel_password == NULL) {
        return fence__rd_fail(rs, FENCE_EINVAL, "sentinel_username needs sentinel_password");
    }
    if ((o->sentinel_password != NULL && o->sentinel_password[0] == '\0') ||
        (o->sentinel_username != NULL && o->sentinel_username[0] == '\0')) {
        return fence__rd_fail(rs, FENCE_EINVAL, "sentinel_username / sentinel_password must not "
                              "be empty");
    }
    int nomem = 0;
    rs->url.sentinel_user = dup_opt(o->sentinel_username, &nomem);
    rs->url.sentinel_password = dup_opt(o->sentinel_password, &nomem);
    rs->url.tls_server_name = dup_opt(o->tls_server_name, &nomem);
    if (nomem) {
        return fence__rd_fail(rs, FENCE_ENOMEM, "out of memory");
    }
    rs->url.tls_insecure = o->tls_insecure;
    if (rs->url.tls) {
        char err[300];
        fence__tls_opts to = {o->tls_ca_file, o->tls_ca_dir, o->tls_cert_file, o->tls_key_file};
        rs->url.tls_ctx = fence__tls_ctx_new(&to, o->tls_insecure, err, sizeof err);
        rs->url.tls_ctx_free = fence__tls_ctx_free;
        if (rs->url.tls_ctx == NULL) {
            return fence__rd_fail(rs, FENCE_EINVAL, "%s", err);
        }
    }
    return FENCE_OK;
}

/* AUTH and SELECT on a new connection. */
static fence_status login(fence__redis *rs, fence__conn *rc)
{
    fence_status st = FENCE_OK;
    if (rs->url.password != NULL) {
        const char *argv[3] = {"AUTH", rs->url.user, rs->url.password};
        if (rs->url.user != NULL) {
            st = simple(rs, rc, 3, argv, 1);
        } else {
            argv[1] = rs->url.password;
            st = simple(rs, rc, 2, argv, 1);
        }
    }
    if (st == FENCE_OK && rs->url.db != 0) {
        char db[16];
        snprintf(db, sizeof db, "%d", rs->url.db);
        const char *argv[2] = {"SELECT", db};
        st = simple(rs, rc, 2, argv, 0);
    }
    return st;
}

/* ROLE on the node a Sentinel named: FENCE_OK only if it is a master. */
static fence_status check_role(fence__redis *rs, fence__conn *rc, const char *where)
{
    const char *argv[1] = {"ROLE"};
    redisReply *r = fence__tr_command(rc, 1, argv, NULL);
    if (r == NULL) {
        return fence__rd_fail(rs, FENCE_ECONN, "%s: ROLE failed at %s: %s", rs->url.display, where,
                              rc->errstr);
    }
    if (r->type == REDIS_REPLY_ERROR && fence__is_auth_error(r->str)) {
        /* No password given and the master wants one: say so at once
         * (asking the Sentinels again would not help). */
        fence_status st = fence__rd_fail(rs, FENCE_EAUTH, "%s: the master at %s wants "
                                         "authentication: %.200s", rs->url.display, where, r->str);
        freeReplyObject(r);
        return st;
    }
    int master = r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                 r->element[0]->type == REDIS_REPLY_STRING &&
                 strcmp(r->element[0]->str, "master") == 0;
    fence_status st = master ? FENCE_OK
                             : fence__rd_fail(rs, FENCE_ECONN, "%s: %s, named master by the "
                                              "Sentinels, is no master (ROLE: %.40s)",
                                              rs->url.display, where,
                                              r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                                                   r->element[0]->type == REDIS_REPLY_STRING
                                               ? r->element[0]->str : "?");
    freeReplyObject(r);
    return st;
}

/* One attempt: resolve (Sentinel), connect, log in, check the role. */
static fence_status open_once(fence__redis *rs, fence__conn **out, int64_t ct, int64_t io)
{
    char host[256], err[600], where[300];
    int port = rs->url.port;
    snprintf(host, sizeof host, "%s", rs->url.host);
    if (rs->url.sentinel) {
        fence_status st = fence__sentinel_master(&rs->url, ct, host, sizeof host, &port, err,
                                                 sizeof err);
        if (st != FENCE_OK) {
            return fence__rd_fail(rs, st, "%s: %s", rs->url.display, err);
        }
    }
    snprintf(where, sizeof where, "%s:%d", host, port);
    fence__target t = {rs->url.is_unix ? rs->url.path : NULL, host, port, rs->url.tls_ctx,
                       rs->url.tls_server_name, rs->url.tls_insecure};
    fence_status st = fence__tr_open(&t, ct, io, out, err, sizeof err);
    if (st != FENCE_OK) {
        return fence__rd_fail(rs, st, "cannot connect to %s%s%s: %s", rs->url.display,
                              rs->url.sentinel ? " at " : "", rs->url.sentinel ? where : "", err);
    }
    (*out)->failover = rs->url.sentinel;
    st = login(rs, *out);
    if (st == FENCE_OK && rs->url.sentinel) {
        st = check_role(rs, *out, where);
    }
    if (st != FENCE_OK) {
        fence__tr_close(out);
    }
    return st;
}

fence_status fence__conn_open(fence__redis *rs, fence__conn **out, int64_t timeout_ms)
{
    *out = NULL;
    int64_t ct = rs->connect_timeout_ms;
    if (timeout_ms > 0 && timeout_ms < ct) {
        ct = timeout_ms;
    }
    int64_t io = rs->io_timeout_ms;
    if (timeout_ms > 0 && timeout_ms < io) {
        io = timeout_ms;
    }
    /* During a failover the Sentinels name the old master (down, or no
     * master any more) until they switch: ask again, every 100 ms, until
     * the connect timeout runs out. */
    int64_t end = fence__now_us() + ct * 1000;
    for (;;) {
        int64_t left = (end - fence__now_us()) / 1000;
        fence_status st = open_once(rs, out, left > 1 ? left : 1, io);
        left = (end - fence__now_us()) / 1000;
        if (st != FENCE_ECONN || !rs->url.sentinel || left <= 100) {
            return st;
        }
        fence__sleep_us(100000);
    }
}

fence_status fence__conn_open_at(fence__redis *rs, const char *host, int port,
                                 fence__conn **out, int64_t timeout_ms)
{
    *out = NULL;
    int64_t ct = rs->connect_timeout_ms, io = rs->io_timeout_ms;
    if (timeout_ms > 0 && timeout_ms < ct) {
        ct = timeout_ms;
    }
    if (timeout_ms > 0 && timeout_ms < io) {
        io = timeout_ms;
    }
    char err[600];
    fence__target t = {NULL, host, port, rs->url.tls_ctx, rs->url.tls_server_name,
                       rs->url.tls_insecure};
    fence_status st = fence__tr_open(&t, ct, io, out, err, sizeof err);
    if (st != FENCE_OK) {
        return fence__rd_fail(rs, st, "%s: cannot connect to cluster node %s:%d: %s",
                              rs->url.display, host, port, err);
    }
    st = login(rs, *out);
    if (st != FENCE_OK) {
        fence__tr_close(out);
    }
    return st;
}

fence_status fence__conn_ensure(fence__redis *rs, fence__conn **rc, int *ever,
                                int64_t timeout_ms)
{
    if (*rc != NULL && (*rc)->err == 0) {
        return FENCE_OK;
    }
    fence__conn_drop(rc);
    fence_status st = fence__conn_open(rs, rc, timeout_ms);
    if (st == FENCE_OK) {
        if (*ever) {
            atomic_fetch_add(&rs->reconnects, 1);
        }
        *ever = 1;
    }
    return st;
}

static int append_loads(const fence__redis *rs, fence__conn *rc)
{
    for (int s = 0; s < rs->nscripts; s++) {
        const char *argv[3] = {"SCRIPT", "LOAD", rs->script[s]};
        size_t lens[3] = {6, 4, rs->script_len[s]};
        if (fence__tr_append(rc, 3, argv, lens) != 0) {
            return -1;
        }
    }
    return 0;
}

void fence__scripts_load(fence__redis *rs, fence__conn *rc, void **slots)
{
    if (slots != NULL) {
        *slots = NULL;
    }
    if (append_loads(rs, rc) != 0 ||
        (slots != NULL && fence__tr_appendf(rc, "CLUSTER SLOTS") != 0)) {
        return;
    }
    for (int s = 0; s < rs->nscripts; s++) {
        redisReply *r = NULL;
        if (fence__tr_reply(rc, (void **)&r) != 0) {
            return; /* the caller sees rc->err */
        }
        if (r->type == REDIS_REPLY_STRING && r->len == 40) {
            memcpy(rs->sha[s], r->str, 41);
        }
        freeReplyObject(r);
    }
    if (slots != NULL && fence__tr_reply(rc, slots) != 0) {
        *slots = NULL;
    }
}

int fence__scripts_preload(const fence__redis *rs, fence__conn *rc)
{
    if (append_loads(rs, rc) != 0) {
        return -1;
    }
    for (int s = 0; s < rs->nscripts; s++) {
        redisReply *r = NULL;
        if (fence__tr_reply(rc, (void **)&r) != 0) {
            return -1;
        }
        freeReplyObject(r);
    }
    return 0;
}

/* ---- the pieces the asynchronous API uses (async_conn.c) ------------------ */

void fence__conn_target(const fence__redis *rs, fence__target *t)
{
    t->path = rs->url.is_unix ? rs->url.path : NULL;
    t->host = rs->url.host;
    t->port = rs->url.port;
    t->tls_ctx = rs->url.tls_ctx;
    t->tls_name = rs->url.tls_server_name;
    t->tls_insecure = rs->url.tls_insecure;
}

int fence__conn_append_login(const fence__redis *rs, fence__conn *cn)
{
    int n = 0;
    if (rs->url.password != NULL) {
        const char *argv[3] = {"AUTH", rs->url.user, rs->url.password};
        if (rs->url.user == NULL) {
            argv[1] = rs->url.password;
        }
        if (fence__tr_append(cn, rs->url.user != NULL ? 3 : 2, argv, NULL) != 0) {
            return -1;
        }
        n++;
    }
    if (rs->url.db != 0) {
        if (fence__tr_appendf(cn, "SELECT %d", rs->url.db) != 0) {
            return -1;
        }
        n++;
    }
    return n;
}

fence_status fence__conn_login_reply(const fence__redis *rs, int i, const void *reply)
{
    const redisReply *r = reply;
    int is_auth = i == 0 && rs->url.password != NULL;
    if (r == NULL) {
        return fence__rd_fail(rs, FENCE_ECONN, "%s: %s failed", rs->url.display,
                              is_auth ? "AUTH" : "SELECT");
    }
    if (r->type != REDIS_REPLY_ERROR) {
        return FENCE_OK;
    }
    if (!is_auth && strstr(r->str, "cluster mode") != NULL) {
        return fence__rd_fail(rs, FENCE_EINVAL, "%s: the server is a Redis Cluster node, which "
                           "has database 0 only: drop /%d from the URL", rs->url.display,
                           rs->url.db);
    }
    if (is_auth || fence__is_auth_error(r->str)) {
        return fence__rd_fail(rs, FENCE_EAUTH, "%s: authentication refused: %.200s",
                           rs->url.display, r->str);
    }
    return fence__rd_fail(rs, FENCE_EPROTO, "%s: SELECT refused: %.200s", rs->url.display, r->str);
}
