/* hbcluster.c -- a heartbeat pass in a Redis Cluster.  The due leases are
 * grouped by node, and within a node by slot: one renew_batch.lua call per
 * slot (a script may only touch keys of one slot), each node's calls
 * written before any reply is read: one round trip per node.  The pass has
 * one deadline (just before the earliest validity the heartbeat keeps);
 * every connect, write and read gets only the time left.  The nodes
 * already connected go first: their batches are sent, then their replies
 * read with one poll() over all their sockets (nodes in parallel: a hung
 * node delays no other node's reply); then the nodes needing a new
 * connection (connected one after another, each within the time left)
 * likewise.  A node that fails is failed for the whole pass.  A batch
 * answered MOVED or ASK is sent once more, to its new node (a second round
 * trip, for it alone); anything else unanswered stays unanswered --
 * validity comes only from accepted renewals (the core's state.c), so a
 * lease that cannot be renewed is lost on time.  Called by rrenew.c under
 * the core's heartbeat lock (the node heartbeat connections are under it). */
#include "rissuer.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
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
    fence__issuer *c;
    fence__ilease *const *ls;
    int *results;
    item *it;
    size_t n;
    batch *b;
    size_t nb;
    int *failed;       /* per node: its connection failed this pass */
    const char **argv; /* room for one batch */
    size_t *lens;
    fence_status st;
    int64_t end_us;    /* the pass's deadline */
    size_t cur[FENCE__CL_MAX_NODES], stop[FENCE__CL_MAX_NODES]; /* replies due */
} hbc;

/* The time left before the pass's deadline, in ms (may be <= 0). */
static int64_t left_ms(const hbc *h)
{
    return (h->end_us - fence__now_us()) / 1000;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

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
    fence__cluster *cl = h->c->rd.cl;
    size_t m = 0, per = (size_t)h->c->env.renew_batch;
    pthread_mutex_lock(&cl->lock);
    for (size_t i = 0; i < h->n; i++) {
        const char *k = FENCE__RKEYS(h->ls[i])->owner;
        int slot = fence__key_slot(k, strlen(k));
        int node = cl->slots[slot];
        if (node != FENCE__CL_NONE) {
            h->it[m++] = (item){node, slot, i};
        }
    }
    pthread_mutex_unlock(&cl->lock);
    if (m < h->n) {
        fence__cluster_stale(&h->c->rd); /* unanswered now; the next pass knows more */
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
    for (size_t i = 0; i < h->nb; i++) { /* a node's batches are contiguous */
        int nd = h->b[i].node;
        if (i == 0 || h->b[i - 1].node != nd) {
            h->cur[nd] = i;
        }
        h->stop[nd] = i + 1;
    }
    return 0;
}

/* Queue batch b on rc (ASKING first when asking).  Its keys: the owner
 * keys, then the holder descriptions of those leases that have one (every
 * key the script touches is declared: during a slot migration Redis then
 * answers ASK / TRYAGAIN before running it). */
static int append_batch(hbc *h, fence__conn *rc, const batch *b, int use_sha, int asking)
{
    fence__issuer *c = h->c;
    size_t m = 0;
    for (size_t i = 0; i < b->k; i++) {
        m += h->ls[h->it[b->lo + i].idx]->has_info;
    }
    char nk[24];
    snprintf(nk, sizeof nk, "%zu", b->k + m);
    const char **argv = h->argv;
    argv[0] = use_sha ? "EVALSHA" : "EVAL";
    argv[1] = use_sha ? c->rd.sha[FENCE__RENEW_BATCH] : c->rd.script[FENCE__RENEW_BATCH];
    h->lens[1] = use_sha ? 40 : c->rd.script_len[FENCE__RENEW_BATCH];
    argv[2] = nk;
    size_t at = 3 + b->k, args = 3 + b->k + m;
    for (size_t i = 0; i < b->k; i++) {
        const fence__ilease *l = h->ls[h->it[b->lo + i].idx];
        argv[3 + i] = FENCE__RKEYS(l)->owner;
        if (l->has_info) {
            argv[at++] = FENCE__RKEYS(l)->info;
        }
        argv[args + 2 * i] = l->value;
        argv[args + 2 * i + 1] = FENCE__RKEYS(l)->ttl;
    }
    size_t argc = args + 2 * b->k;
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
    fence__issuer *c = h->c;
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
            atomic_fetch_add(&c->rd.cl->moved, 1);
            to = fence__cluster_redirect(&c->rd, &rd, b->node);
        } else if (ask) {
            atomic_fetch_add(&c->rd.cl->ask, 1);
            to = fence__cluster_redirect(&c->rd, &rd, b->node);
        } else {
            atomic_fetch_add(&c->rd.cl->tryagain, 1);
            if (rd.kind == FENCE__RD_TRYAGAIN && b->k > 1) {
                b->split = 1; /* keys partly migrated: each lease alone */
            }
        }
        if (to >= 0) {
            *b = (batch){b->node, b->lo, b->k, 1, to, ask, 0, 0};
        }
    } else {
        h->st = fence__rd_fail(&c->rd, FENCE_EPROTO, "%s: heartbeat: unexpected reply: %.200s",
                            c->rd.url.display, r->type == REDIS_REPLY_ERROR ? r->str : "");
    }
}

/* Node conn failed: drop it, the map may be stale (a failover).  The node
 * is failed for the rest of the pass. */
static void node_failed(hbc *h, int node, fence__conn **rc)
{
    if (*rc != NULL) {
        h->st = fence__rd_fail(&h->c->rd, FENCE_ECONN, "%s: heartbeat connection to %s:%d failed: %s",
                            h->c->rd.url.display, h->c->rd.cl->nodes[node].host,
                            h->c->rd.cl->nodes[node].port, (*rc)->errstr);
    }
    fence__conn_drop(rc);
    h->failed[node] = 1;
    fence__cluster_stale(&h->c->rd);
}

/* Send node nd's batches (connecting first if connect is set; a node not
 * connected is otherwise left for later): 1 sent, 0 left, -1 failed. */
static int send_node(hbc *h, int nd, int use_sha, int connect)
{
    fence__issuer *c = h->c;
    fence__node *node = &c->rd.cl->nodes[nd];
    int64_t left = left_ms(h);
    if (h->failed[nd] || left < 1) {
        return -1;
    }
    if (node->hb == NULL || node->hb->err != 0) {
        if (!connect) {
            return 0;
        }
        fence_status st = fence__cluster_ensure(&c->rd, nd, &node->hb, &node->hb_ever, left);
        if (st != FENCE_OK) {
            h->st = st;
            node_failed(h, nd, &node->hb);
            return -1;
        }
        left = left_ms(h);
    }
    fence__conn_timeout(node->hb, min64(left, c->rd.io_timeout_ms));
    for (size_t i = h->cur[nd]; i < h->stop[nd]; i++) {
        if (append_batch(h, node->hb, &h->b[i], use_sha, 0) != 0) {
            node_failed(h, nd, &node->hb); /* nothing of it may go out */
            return -1;
        }
    }
    if (fence__tr_flush(node->hb) != 0) {
        node_failed(h, nd, &node->hb);
        return -1;
    }
    return 1;
}

/* Take what node nd has sent; 0 all its replies in (or it failed), else
 * the poll events to wait for. */
static short drain_node(hbc *h, int nd)
{
    fence__conn **rc = &h->c->rd.cl->nodes[nd].hb;
    while (!h->failed[nd] && h->cur[nd] < h->stop[nd]) {
        redisReply *r = NULL;
        short ev = 0;
        int got = fence__tr_try_reply(*rc, (void **)&r, &ev);
        if (got < 0) {
            node_failed(h, nd, rc);
        } else if (got == 0) {
            return ev;
        } else {
            take_reply(h, &h->b[h->cur[nd]++], r);
            freeReplyObject(r);
        }
    }
    return 0;
}

/* Read the replies of the nodes in sent[0..k) with one poll() over all of
 * them, until every reply is in or the deadline passes (the nodes still
 * owing replies then fail). */
static void read_nodes(hbc *h, const int *sent, int k)
{
    fence__cluster *cl = h->c->rd.cl;
    for (;;) {
        struct pollfd pf[FENCE__CL_MAX_NODES];
        int who[FENCE__CL_MAX_NODES], np = 0;
        for (int j = 0; j < k; j++) {
            short ev = drain_node(h, sent[j]);
            if (ev != 0) {
                pf[np] = (struct pollfd){.fd = cl->nodes[sent[j]].hb->fd, .events = ev};
                who[np++] = sent[j];
            }
        }
        int64_t left = left_ms(h);
        if (np == 0) {
            return;
        }
        if (left < 1) {
            for (int j = 0; j < np; j++) {
                h->st = fence__rd_fail(&h->c->rd, FENCE_ECONN, "%s: heartbeat: %s:%d did not answer "
                                    "in time", h->c->rd.url.display, cl->nodes[who[j]].host,
                                    cl->nodes[who[j]].port);
                fence__conn_drop(&cl->nodes[who[j]].hb);
                h->failed[who[j]] = 1;
                fence__cluster_stale(&h->c->rd);
            }
            return;
        }
        if (poll(pf, (nfds_t)np, (int)min64(left, 1000)) < 0 && errno != EINTR) {
            h->end_us = 0; /* cannot wait: what did not come is unanswered */
        }
    }
}

/* Send and read the batches of the nodes connected (connect 0) or not yet
 * connected (connect 1): one round trip per node, all in parallel. */
static void round_trip(hbc *h, int use_sha, int connect)
{
    fence__cluster *cl = h->c->rd.cl;
    int sent[FENCE__CL_MAX_NODES], k = 0;
    for (size_t i = 0; i < h->nb; i++) {
        int nd = h->b[i].node;
        if ((i == 0 || h->b[i - 1].node != nd) && h->cur[nd] < h->stop[nd] &&
            send_node(h, nd, use_sha, connect) > 0) {
            sent[k++] = nd;
        }
    }
    read_nodes(h, sent, k);
    atomic_fetch_add(&cl->hb_round_trips, (uint64_t)k);
    atomic_fetch_add(&cl->hb_node_visits, (uint64_t)k);
    atomic_fetch_add(&cl->hb_last_round_trips, (uint64_t)k);
    atomic_fetch_add(&cl->hb_last_nodes, (uint64_t)k);
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

/* Send batch b again on its own (ASKING first after ASK), within the time
 * left; never to a node failed in this pass. */
static void send_again(hbc *h, batch *b)
{
    fence__issuer *c = h->c;
    int nd = b->again_node;
    fence__node *node = &c->rd.cl->nodes[nd];
    b->again = 0;
    int64_t left = left_ms(h);
    if (h->failed[nd] || left < 1) {
        return;
    }
    if (fence__cluster_ensure(&c->rd, nd, &node->hb, &node->hb_ever, left) != 0) {
        node_failed(h, nd, &node->hb);
        return;
    }
    fence__conn_timeout(node->hb, min64(left_ms(h), c->rd.io_timeout_ms));
    int use_sha = !b->eval && c->rd.sha[FENCE__RENEW_BATCH][0] != '\0';
    redisReply *r = NULL;
    if (append_batch(h, node->hb, b, use_sha, b->asking) != 0 ||
        (b->asking && fence__tr_reply(node->hb, (void **)&r) != 0)) {
        node_failed(h, nd, &node->hb);
        return;
    }
    if (r != NULL) {
        freeReplyObject(r); /* ASKING's +OK */
        r = NULL;
    }
    atomic_fetch_add(&c->rd.cl->hb_round_trips, 1);
    atomic_fetch_add(&c->rd.cl->hb_last_round_trips, 1);
    if (fence__tr_reply(node->hb, (void **)&r) != 0) {
        node_failed(h, nd, &node->hb);
        return;
    }
    b->node = nd;
    take_reply(h, b, r); /* may ask for one more round */
    freeReplyObject(r);
}

/* The batches answered MOVED / ASK / NOSCRIPT / TRYAGAIN, sent again: at
 * most two more rounds (a split batch's leases may then be asked on). */
static void resend(hbc *h)
{
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < h->nb; i++) {
            if (h->b[i].split) {
                h->b[i].split = 0;
                split(h, i);
            }
            if (h->b[i].again && h->b[i].again_node >= 0) {
                send_again(h, &h->b[i]);
            }
        }
    }
}

fence_status fence__hb_cluster(fence__issuer *c, fence__ilease *const *ls, size_t n,
                               int *results, int64_t deadline_us, int64_t *sent)
{
    size_t per = (size_t)c->env.renew_batch;
    hbc h = {.c = c, .ls = ls, .results = results, .n = n, .st = FENCE_OK};
    h.it = malloc(n * sizeof *h.it);
    h.b = malloc(n * sizeof *h.b);
    h.failed = calloc(FENCE__CL_MAX_NODES, sizeof *h.failed);
    h.argv = malloc((3 + 4 * per) * sizeof *h.argv);
    h.lens = malloc((3 + 4 * per) * sizeof *h.lens);
    *sent = fence__now_us();
    int64_t bound_ms = (deadline_us - *sent) / 1000;
    if (bound_ms < 1) {
        bound_ms = 1;
    }
    /* Stop a little before the earliest validity, so that the renewals
     * answered in time can still be applied in time. */
    h.end_us = *sent + bound_ms * 1000 - (bound_ms > 20 ? 2000 : bound_ms * 100);
    if (h.it == NULL || h.b == NULL || h.failed == NULL || h.argv == NULL || h.lens == NULL) {
        h.st = fence__rd_fail(&c->rd, FENCE_ENOMEM, "out of memory");
    } else {
        if (atomic_load(&c->rd.cl->stale)) {
            /* A quarter of the time at most, and never waiting for a
             * refresh another thread runs; on failure: the map we have. */
            fence__cluster_refresh_try(&c->rd, bound_ms / 4 > 0 ? bound_ms / 4 : 1);
        }
        plan(&h);
        int use_sha = c->rd.sha[FENCE__RENEW_BATCH][0] != '\0';
        atomic_store(&c->rd.cl->hb_last_round_trips, 0);
        atomic_store(&c->rd.cl->hb_last_nodes, 0);
        *sent = fence__now_us();
        round_trip(&h, use_sha, 0); /* the nodes connected */
        round_trip(&h, use_sha, 1); /* then those to connect */
        resend(&h);
    }
    free(h.it);
    free(h.b);
    free(h.failed);
    free(h.argv);
    free(h.lens);
    return h.st;
}
