/* cluster.c -- Redis Cluster: hash slots, the node table (masters and
 * replicas, each with its two connection slots), the 16384-slot map read
 * from CLUSTER SLOTS, and the redirection replies (MOVED, ASK, TRYAGAIN,
 * CLUSTERDOWN).  Detected at open from the seed's answer to CLUSTER SLOTS
 * (pipelined with the script loading: no extra round trip).  Routing a
 * call by its key's slot is eval.c's; the heartbeat's cluster pass is the
 * lease layer's (hbcluster.c).
 *
 * A slot is CRC16 (XMODEM: polynomial 0x1021, initial 0, no reflection,
 * as in the Redis cluster specification) of a key's hash tag, modulo
 * 16384.  The tag is the text between the first '{' and the first '}'
 * after it when that is non-empty, else the whole key: computed from the
 * real key, so any prefix is handled exactly. */
#include "redis.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint16_t fence__crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)buf[i] << 8);
        for (int b = 0; b < 8; b++) {
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
        }
    }
    return crc;
}

int fence__key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open != NULL) {
        size_t rest = len - (size_t)(open + 1 - key);
        const char *close = memchr(open + 1, '}', rest);
        if (close != NULL && close > open + 1) {
            return fence__crc16(open + 1, (size_t)(close - open - 1)) & (FENCE__SLOTS - 1);
        }
    }
    return fence__crc16(key, len) & (FENCE__SLOTS - 1);
}

/* The index of host:port, added if new (cl->lock held); -1 when full. */
static int node_index_locked(fence__cluster *cl, const char *host, int port)
{
    for (int i = 0; i < cl->nnodes; i++) {
        if (cl->nodes[i].port == port && strcmp(cl->nodes[i].host, host) == 0) {
            return i;
        }
    }
    if (cl->nnodes >= FENCE__CL_MAX_NODES || strlen(host) >= sizeof cl->nodes[0].host) {
        return -1;
    }
    fence__node *n = &cl->nodes[cl->nnodes];
    snprintf(n->host, sizeof n->host, "%s", host);
    n->port = port;
    return cl->nnodes++;
}

/* One node of a CLUSTER SLOTS range ([host, port, id, ...]): a nil or
 * empty host (cluster-preferred-endpoint-type unknown-endpoint) is the
 * one asked; "?" (a hostname endpoint with no hostname set) is a node we
 * cannot reach: skipped (-1). */
static int reply_node_locked(fence__cluster *cl, const redisReply *e, const char *asked)
{
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 ||
        (e->element[0]->type != REDIS_REPLY_STRING && e->element[0]->type != REDIS_REPLY_NIL) ||
        e->element[1]->type != REDIS_REPLY_INTEGER || e->element[1]->integer < 1 ||
        e->element[1]->integer > 65535) {
        return -1;
    }
    const char *h = e->element[0]->type == REDIS_REPLY_NIL ? "" : e->element[0]->str;
    if (strcmp(h, "?") == 0) {
        return -1;
    }
    return node_index_locked(cl, h[0] == '\0' ? asked : h, (int)e->element[1]->integer);
}

/* Replace the map with a CLUSTER SLOTS reply (cl->lock held); -1 if it is
 * not one (the map is then unchanged). */
static int apply_slots_locked(fence__cluster *cl, const redisReply *r, const char *asked)
{
    if (r->type != REDIS_REPLY_ARRAY) {
        return -1;
    }
    for (int s = 0; s < FENCE__SLOTS; s++) {
        cl->slots[s] = FENCE__CL_NONE;
    }
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER) {
            continue;
        }
        long long lo = e->element[0]->integer, hi = e->element[1]->integer;
        int master = reply_node_locked(cl, e->element[2], asked);
        for (size_t k = 3; k < e->elements; k++) {
            reply_node_locked(cl, e->element[k], asked); /* replicas: refresh sources */
        }
        for (long long s = lo < 0 ? 0 : lo; master >= 0 && s <= hi && s < FENCE__SLOTS; s++) {
            cl->slots[s] = (uint16_t)master;
        }
    }
    return 0;
}

fence_status fence__cluster_init(fence__redis *rs, const void *reply, const char *seed_host)
{
    const redisReply *r = reply;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        return FENCE_OK; /* "cluster support disabled": one server */
    }
    if (rs->url.db != 0) {
        return fence__rd_fail(rs, FENCE_EINVAL, "%s: the server is a Redis Cluster node, which has "
                              "database 0 only: drop /%d from the URL", rs->url.display,
                              rs->url.db);
    }
    fence__cluster *cl = calloc(1, sizeof *cl);
    if (cl == NULL) {
        return fence__rd_fail(rs, FENCE_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&cl->lock, NULL);
    pthread_mutex_init(&cl->refresh_lock, NULL);
    /* Every slot's line is made now: nodes are added under cl->lock while
     * callers may be using the lines of others. */
    for (int i = 0; i < FENCE__CL_MAX_NODES; i++) {
        if (fence__pipe_init(&cl->nodes[i].cmd.p) != 0) {
            for (int j = 0; j < i; j++) {
                fence__pipe_destroy(&cl->nodes[j].cmd.p);
            }
            pthread_mutex_destroy(&cl->lock);
            pthread_mutex_destroy(&cl->refresh_lock);
            free(cl);
            return fence__rd_fail(rs, FENCE_ENOMEM, "out of memory");
        }
    }
    apply_slots_locked(cl, r, seed_host);
    rs->cl = cl;
    return FENCE_OK;
}

void fence__cluster_free(fence__redis *rs)
{
    fence__cluster *cl = rs->cl;
    if (cl == NULL) {
        return;
    }
    for (int i = 0; i < FENCE__CL_MAX_NODES; i++) {
        fence__pipe_destroy(&cl->nodes[i].cmd.p);
        fence__conn_drop(&cl->nodes[i].hb);
    }
    pthread_mutex_destroy(&cl->lock);
    pthread_mutex_destroy(&cl->refresh_lock);
    free(cl);
    rs->cl = NULL;
}

void fence__cluster_stale(fence__redis *rs)
{
    atomic_store(&rs->cl->stale, 1);
}

int fence__cluster_node_index(fence__redis *rs, const char *host, int port)
{
    pthread_mutex_lock(&rs->cl->lock);
    int i = node_index_locked(rs->cl, host, port);
    pthread_mutex_unlock(&rs->cl->lock);
    return i;
}

/* CLUSTER SLOTS from node i on a connection of its own. */
static fence_status refresh_from(fence__redis *rs, int i, int64_t timeout_ms)
{
    fence__cluster *cl = rs->cl;
    char host[256];
    pthread_mutex_lock(&cl->lock);
    snprintf(host, sizeof host, "%s", cl->nodes[i].host);
    int port = cl->nodes[i].port;
    pthread_mutex_unlock(&cl->lock);
    fence__conn *rc = NULL;
    fence_status st = fence__conn_open_at(rs, host, port, &rc, timeout_ms);
    if (st != FENCE_OK) {
        return st;
    }
    const char *argv[2] = {"CLUSTER", "SLOTS"};
    redisReply *r = fence__tr_command(rc, 2, argv, NULL);
    if (r == NULL) {
        st = fence__rd_fail(rs, FENCE_ECONN, "%s: CLUSTER SLOTS at %s:%d failed: %s",
                            rs->url.display, host, port, rc->errstr);
    } else {
        pthread_mutex_lock(&cl->lock);
        int bad = apply_slots_locked(cl, r, host);
        pthread_mutex_unlock(&cl->lock);
        if (bad) {
            st = fence__rd_fail(rs, FENCE_ECONN, "%s: CLUSTER SLOTS refused at %s:%d: %.100s",
                                rs->url.display, host, port,
                                r->type == REDIS_REPLY_ERROR ? r->str : "not an array");
        }
        freeReplyObject(r);
    }
    fence__conn_drop(&rc);
    return st;
}

/* The refresh itself (refresh_lock held). */
static fence_status refresh_locked(fence__redis *rs, int64_t timeout_ms)
{
    fence__cluster *cl = rs->cl;
    int64_t end = fence__now_us() + (timeout_ms > 0 ? timeout_ms : 1) * 1000;
    pthread_mutex_lock(&cl->lock);
    int n = cl->nnodes, first = cl->next_seed;
    pthread_mutex_unlock(&cl->lock);
    fence_status st = fence__rd_fail(rs, FENCE_ECONN, "%s: no cluster node known", rs->url.display);
    /* Start after the node asked last time: the one that failed is often
     * the one a redirection or a failover is about.  A node that does not
     * answer is passed over next time too (a hung node must not take every
     * refresh's time). */
    for (int k = 0; k < n; k++) {
        int64_t left = (end - fence__now_us()) / 1000;
        if (left < 1) {
            break;
        }
        int i = (first + k) % n;
        cl->next_seed = (i + 1) % n;
        st = refresh_from(rs, i, left);
        if (st == FENCE_OK) {
            atomic_store(&cl->stale, 0);
            atomic_fetch_add(&cl->refreshes, 1);
            break;
        }
    }
    return st;
}

fence_status fence__cluster_refresh(fence__redis *rs, int64_t timeout_ms)
{
    pthread_mutex_lock(&rs->cl->refresh_lock);
    fence_status st = refresh_locked(rs, timeout_ms);
    pthread_mutex_unlock(&rs->cl->refresh_lock);
    return st;
}

fence_status fence__cluster_refresh_try(fence__redis *rs, int64_t timeout_ms)
{
    if (pthread_mutex_trylock(&rs->cl->refresh_lock) != 0) {
        return FENCE_OK; /* another thread is at it */
    }
    fence_status st = refresh_locked(rs, timeout_ms);
    pthread_mutex_unlock(&rs->cl->refresh_lock);
    return st;
}

int fence__cluster_node_of(fence__redis *rs, int slot, int64_t timeout_ms)
{
    fence__cluster *cl = rs->cl;
    if (atomic_load(&cl->stale)) {
        fence__cluster_refresh(rs, timeout_ms); /* on failure: the map we have */
    }
    pthread_mutex_lock(&cl->lock);
    int i = cl->slots[slot];
    pthread_mutex_unlock(&cl->lock);
    if (i == FENCE__CL_NONE) {
        atomic_store(&cl->stale, 1);
        return -1;
    }
    return i;
}

/* A decimal number of 1 to 5 digits at *p, at most max: the number (*p
 * past it), or -1 (no digits, too many, or too large). */
static long digits(const char **p, long max)
{
    long v = 0;
    int n = 0;
    while (**p >= '0' && **p <= '9' && n < 6) {
        v = v * 10 + (**p - '0');
        (*p)++;
        n++;
    }
    return n == 0 || n > 5 || v > max ? -1 : v;
}

int fence__redirect_parse(const char *err, fence__redirect *rd)
{
    memset(rd, 0, sizeof *rd);
    snprintf(rd->text, sizeof rd->text, "%s", err);
    int moved = strncmp(err, "MOVED ", 6) == 0, ask = strncmp(err, "ASK ", 4) == 0;
    if (strncmp(err, "TRYAGAIN", 8) == 0) {
        return rd->kind = FENCE__RD_TRYAGAIN;
    }
    if (strncmp(err, "CLUSTERDOWN", 11) == 0) {
        return rd->kind = FENCE__RD_DOWN;
    }
    if (!moved && !ask) {
        return FENCE__RD_NONE;
    }
    /* "MOVED <slot> <host>:<port>"; the host may hold ':' (IPv6).  The
     * slot and the port must be digits, in range. */
    const char *p = err + (moved ? 6 : 4);
    long slot = digits(&p, FENCE__SLOTS - 1);
    const char *addr = slot >= 0 && *p == ' ' ? p + 1 : NULL;
    const char *colon = addr != NULL ? strrchr(addr, ':') : NULL;
    if (colon == NULL || (size_t)(colon - addr) >= sizeof rd->host) {
        return FENCE__RD_NONE; /* not understood: reported as the error it is */
    }
    const char *q = colon + 1;
    long port = digits(&q, 65535);
    if (port < 1 || *q != '\0') {
        return FENCE__RD_NONE;
    }
    memcpy(rd->host, addr, (size_t)(colon - addr));
    rd->port = (int)port;
    rd->slot = (int)slot;
    return rd->kind = moved ? FENCE__RD_MOVED : FENCE__RD_ASK;
}

int fence__cluster_redirect(fence__redis *rs, const fence__redirect *rd, int from)
{
    fence__cluster *cl = rs->cl;
    char host[256];
    pthread_mutex_lock(&cl->lock);
    /* An empty host (cluster-preferred-endpoint-type unknown-endpoint):
     * the node that sent the reply, at the port it names. */
    snprintf(host, sizeof host, "%s",
             rd->host[0] != '\0' ? rd->host
             : from >= 0 && from < cl->nnodes ? cl->nodes[from].host : rs->url.host);
    int i = node_index_locked(cl, host, rd->port);
    if (i >= 0 && rd->kind == FENCE__RD_MOVED) {
        cl->slots[rd->slot] = (uint16_t)i;
    }
    pthread_mutex_unlock(&cl->lock);
    if (rd->kind == FENCE__RD_MOVED) {
        atomic_store(&cl->stale, 1);
    }
    return i;
}

fence_status fence__cluster_open(fence__redis *rs, int node, fence__conn **out,
                                 int64_t timeout_ms)
{
    fence__cluster *cl = rs->cl;
    char host[256];
    pthread_mutex_lock(&cl->lock);
    snprintf(host, sizeof host, "%s", cl->nodes[node].host);
    int port = cl->nodes[node].port;
    pthread_mutex_unlock(&cl->lock);
    return fence__conn_open_at(rs, host, port, out, timeout_ms);
}

fence_status fence__cluster_ensure(fence__redis *rs, int node, fence__conn **rc, int *ever,
                                   int64_t timeout_ms)
{
    if (*rc != NULL && (*rc)->err == 0) {
        return FENCE_OK;
    }
    fence__conn_drop(rc);
    fence_status st = fence__cluster_open(rs, node, rc, timeout_ms);
    if (st == FENCE_OK && fence__scripts_preload(rs, *rc) != 0) {
        st = fence__rd_fail(rs, FENCE_ECONN, "%s: cluster node %s:%d: %s", rs->url.display,
                            rs->cl->nodes[node].host, rs->cl->nodes[node].port, (*rc)->errstr);
        fence__conn_drop(rc);
    }
    if (st == FENCE_OK) {
        if (*ever) {
            atomic_fetch_add(&rs->reconnects, 1);
        }
        *ever = 1;
    }
    return st;
}
