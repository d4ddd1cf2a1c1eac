/* hbcluster.c -- a heartbeat pass in a Redis Cluster.  The due leases are
 * grouped by node, and within a node by slot: one renew_batch.lua call per
 * slot (a script may only touch keys of one slot), every node's calls
 * written before any reply is read (nodes in parallel): one round trip per
 * node.  A batch answered MOVED or ASK is sent once more, to its new node
 * (a second round trip, for it alone); anything else unanswered stays
 * unanswered -- validity comes only from accepted renewals (state.c), so a
 * lease that cannot be renewed is lost on time.  Called by heartbeat.c
 * with hb_lock held (the node heartbeat connections are under it). */
#include "lease_internal.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct item {
    int node, slot;
    size_t idx; /* into the pass's leases */
} item;

typedef struct batch {
    int node;
    size_t lo, k;      /* items[lo .. lo + k) */
    int again;         /* send once more to node again_node */
    int again_node, asking, eval;
    int split;         /* TRYAGAIN: send each lease on its own */
} batch;

typedef struct hbc {
    fence_client *c;
    fence_lease **ls;
    int *results;
    item *it;
    size_t n;
    batch *b;
    size_t nb;
    int *failed;       /* per node: its connection failed this pass */
    const char **argv; /* room for one batch */
    size_t *lens;
    char (*ttl)[24];
    fence_status st;
} hbc;

static int by_node_slot(const void *a, const void *b)
{
    const item *x = a, *y = b;
    if (x->node != y->node) {
        return x->node < y->node ? -1 : 1;
    }
    return x->slot < y->slot ? -1 : x->slot > y->slot;
}

/* The items (leases with a known node), sorted, and their batches. */
static int plan(hbc *h)
{
    fence__cluster *cl = h->c->cl;
    size_t m = 0, per = (size_t)h->c->renew_batch;
    pthread_mutex_lock(&cl->lock);
    for (size_t i = 0; i < h->n; i++) {
        const char *k = h->ls[i]->owner_key;
        int slot = fence__key_slot(k, strlen(k));
        int node = cl->slots[slot];
        if (node != FENCE__CL_NONE) {
            h->it[m++] = (item){node, slot, i};
        }
    }
    pthread_mutex_unlock(&cl->lock);
    if (m < h->n) {
        fence__cluster_stale(h->c); /* unanswered now; the next pass knows more */
    }
    qsort(h->it, m, sizeof *h->it, by_node_slot);
    h->nb = 0;
    for (size_t i = 0; i < m; i++) {
        batch *last = h->nb > 0 ? &h->b[h->nb - 1] : NULL;
        if (last != NULL && last->node == h->it[i].node && last->k < per &&
            h->it[last->lo].slot == h->it[i].slot) {
            last->k++;
        } else {
            h->b[h->nb++] = (batch){h->it[i].node, i, 1, 0, -1, 0, 0, 0};
        }
    }
    return 0;
}

/* Queue batch b on rc (ASKING first when asking). */
static int append_batch(hbc *h, fence__conn *rc, const batch *b, int use_sha, int asking)
{
    fence_client *c = h->c;
    char nk[16];
    snprintf(nk, sizeof nk, "%zu", b->k);
    const char **argv = h->argv;
    argv[0] = use_sha ? "EVALSHA" : "EVAL";
    argv[1] = use_sha ? c->sha[FENCE__RENEW_BATCH] : fence__script_body(FENCE__RENEW_BATCH);
    h->lens[1] = use_sha ? 40 : fence__script_len(FENCE__RENEW_BATCH);
    argv[2] = nk;
    for (size_t i = 0; i < b->k; i++) {
        fence_lease *l = h->ls[h->it[b->lo + i].idx];
        fence__renew_ttl_arg(l, h->ttl[i], sizeof h->ttl[i]);
        argv[3 + i] = l->owner_key;
        argv[3 + b->k + 2 * i] = l->value;
        argv[3 + b->k + 2 * i + 1] = h->ttl[i];
    }
    size_t argc = 3 + 3 * b->k;
    for (size_t i = 0; i < argc; i++) {
        if (i != 1) {
            h->lens[i] = strlen(argv[i]);
        }
    }
    if (asking && fence__tr_appendf(rc, "ASKING") != 0) {
        return -1;
    }
    return fence__tr_append(rc, (int)argc, argv, h->lens);
}

/* The reply r to batch b: results, or what to do again. */
static void take_reply(hbc *h, batch *b, const redisReply *r)
{
    fence_client *c = h->c;
    fence__redirect rd;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == b->k) {
        for (size_t i = 0; i < b->k; i++) {
            const redisReply *e = r->element[i];
            h->results[h->it[b->lo + i].idx] = e->type == REDIS_REPLY_INTEGER && e->integer == 1;
        }
    } else if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
        *b = (batch){b->node, b->lo, b->k, 1, b->node, 0, 1, 0};
    } else if (r->type == REDIS_REPLY_ERROR && fence__redirect_parse(r->str, &rd) != FENCE__RD_NONE) {
        int ask = rd.kind == FENCE__RD_ASK;
        int to = -1;
        if (rd.kind == FENCE__RD_MOVED) {
            atomic_fetch_add(&c->cl->moved, 1);
            to = fence__cluster_moved(c, &rd);
        } else if (ask) {
            atomic_fetch_add(&c->cl->ask, 1);
            to = fence__cluster_node_index(c, rd.host[0] ? rd.host : c->url.host, rd.port);
        } else {
            atomic_fetch_add(&c->cl->tryagain, 1);
            if (rd.kind == FENCE__RD_TRYAGAIN && b->k > 1) {
                b->split = 1; /* keys partly migrated: each lease alone */
            }
        }
        if (to >= 0) {
            *b = (batch){b->node, b->lo, b->k, 1, to, ask, 0, 0};
        }
    } else {
        h->st = fence__fail(c, FENCE_EPROTO, "%s: heartbeat: unexpected reply: %.200s",
                            c->url.display, r->type == REDIS_REPLY_ERROR ? r->str : "");
    }
}

/* Node conn failed: drop it, the map may be stale (a failover). */
static void node_failed(hbc *h, int node, fence__conn **rc)
{
    if (*rc != NULL) {
        h->st = fence__fail(h->c, FENCE_ECONN, "%s: heartbeat connection to %s:%d failed: %s",
                            h->c->url.display, h->c->cl->nodes[node].host,
                            h->c->cl->nodes[node].port, (*rc)->errstr);
    }
    fence__conn_drop(rc);
    h->failed[node] = 1;
    fence__cluster_stale(h->c);
}

/* Connect to each node with batches and queue them all. */
static void queue_all(hbc *h, int64_t bound_ms, int use_sha)
{
    fence_client *c = h->c;
    for (size_t i = 0; i < h->nb; i++) {
        int nd = h->b[i].node;
        fence__node *node = &c->cl->nodes[nd];
        if (h->failed[nd]) {
            continue;
        }
        if (i == 0 || h->b[i - 1].node != nd) {
            fence_status st = fence__cluster_ensure(c, nd, &node->hb, &node->hb_ever, bound_ms);
            if (st != FENCE_OK) {
                h->st = st;
                node_failed(h, nd, &node->hb);
                continue;
            }
            fence__conn_timeout(node->hb, bound_ms < c->io_timeout_ms ? bound_ms
                                                                      : c->io_timeout_ms);
        }
        if (append_batch(h, node->hb, &h->b[i], use_sha, 0) != 0) {
            node_failed(h, nd, &node->hb); /* nothing of it may go out */
        }
    }
}

/* Flush every node, then read each node's replies: one round trip each. */
static void round_trip(hbc *h)
{
    fence__cluster *cl = h->c->cl;
    uint64_t nodes = 0;
    for (size_t i = 0; i < h->nb; i++) {
        int nd = h->b[i].node;
        if (!h->failed[nd] && (i == 0 || h->b[i - 1].node != nd) &&
            fence__tr_flush(cl->nodes[nd].hb) != 0) {
            node_failed(h, nd, &cl->nodes[nd].hb);
        }
    }
    for (size_t i = 0; i < h->nb; i++) {
        int nd = h->b[i].node;
        if (h->failed[nd]) {
            continue;
        }
        nodes += i == 0 || h->b[i - 1].node != nd;
        redisReply *r = NULL;
        if (fence__tr_reply(cl->nodes[nd].hb, (void **)&r) != 0) {
            node_failed(h, nd, &cl->nodes[nd].hb);
            continue;
        }
        take_reply(h, &h->b[i], r);
        freeReplyObject(r);
    }
    atomic_fetch_add(&cl->hb_round_trips, nodes);
    atomic_fetch_add(&cl->hb_node_visits, nodes);
    atomic_store(&cl->hb_last_round_trips, nodes);
    atomic_store(&cl->hb_last_nodes, nodes);
}

/* Split batch i (answered TRYAGAIN: a slot being migrated, its keys
 * partly moved) into one batch per lease, each sent again on its own. */
static void split(hbc *h, size_t i)
{
    batch b = h->b[i];
    for (size_t j = 0; j < b.k; j++) {
        batch one = {b.node, b.lo + j, 1, 1, b.node, 0, b.eval, 0};
        if (j == 0) {
            h->b[i] = one;
        } else {
            h->b[h->nb++] = one; /* at most one batch per lease in all */
        }
    }
}

/* Send batch b again on its own (ASKING first after ASK). */
static void send_again(hbc *h, batch *b, int64_t bound_ms)
{
    fence_client *c = h->c;
    fence__node *node = &c->cl->nodes[b->again_node];
    b->again = 0;
    if (fence__cluster_ensure(c, b->again_node, &node->hb, &node->hb_ever, bound_ms) != 0) {
        return;
    }
    fence__conn_timeout(node->hb, bound_ms < c->io_timeout_ms ? bound_ms : c->io_timeout_ms);
    int use_sha = !b->eval && c->sha[FENCE__RENEW_BATCH][0] != '\0';
    redisReply *r = NULL;
    if (append_batch(h, node->hb, b, use_sha, b->asking) != 0 ||
        (b->asking && fence__tr_reply(node->hb, (void **)&r) != 0)) {
        fence__conn_drop(&node->hb);
        return;
    }
    if (r != NULL) {
        freeReplyObject(r); /* ASKING's +OK */
        r = NULL;
    }
    atomic_fetch_add(&c->cl->hb_round_trips, 1);
    atomic_fetch_add(&c->cl->hb_last_round_trips, 1);
    if (fence__tr_reply(node->hb, (void **)&r) != 0) {
        fence__conn_drop(&node->hb);
        return;
    }
    b->node = b->again_node;
    take_reply(h, b, r); /* may ask for one more round */
    freeReplyObject(r);
}

/* The batches answered MOVED / ASK / NOSCRIPT / TRYAGAIN, sent again: at
 * most two more rounds (a split batch's leases may then be asked on). */
static void resend(hbc *h, int64_t bound_ms)
{
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < h->nb; i++) {
            if (h->b[i].split) {
                h->b[i].split = 0;
                split(h, i);
            }
            if (h->b[i].again && h->b[i].again_node >= 0) {
                send_again(h, &h->b[i], bound_ms);
            }
        }
    }
}

fence_status fence__hb_cluster(fence_client *c, fence_lease **ls, size_t n, int *results,
                               int64_t bound_ms, int64_t *sent)
{
    size_t per = (size_t)c->renew_batch;
    hbc h = {.c = c, .ls = ls, .results = results, .n = n, .st = FENCE_OK};
    h.it = malloc(n * sizeof *h.it);
    h.b = malloc(n * sizeof *h.b);
    h.failed = calloc(FENCE__CL_MAX_NODES, sizeof *h.failed);
    h.argv = malloc((3 + 3 * per) * sizeof *h.argv);
    h.lens = malloc((3 + 3 * per) * sizeof *h.lens);
    h.ttl = malloc(per * sizeof *h.ttl);
    *sent = fence__now_us();
    if (h.it == NULL || h.b == NULL || h.failed == NULL || h.argv == NULL || h.lens == NULL ||
        h.ttl == NULL) {
        h.st = fence__fail(c, FENCE_ENOMEM, "out of memory");
    } else {
        if (atomic_load(&c->cl->stale)) {
            fence__cluster_refresh(c, bound_ms); /* on failure: the map we have */
        }
        plan(&h);
        queue_all(&h, bound_ms, c->sha[FENCE__RENEW_BATCH][0] != '\0');
        *sent = fence__now_us();
        round_trip(&h);
        resend(&h, bound_ms);
    }
    free(h.it);
    free(h.b);
    free(h.failed);
    free(h.argv);
    free(h.lens);
    free(h.ttl);
    return h.st;
}
