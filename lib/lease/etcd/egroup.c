/* egroup.c -- a client's names sharing etcd leases (groups), keepalives,
 * and the renewal with its key check (eissuer.h). */
#include "eissuer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- groups: names sharing one etcd lease ------------------------------------------
 * A client's leases with the same TTL share etcd leases, up to GROUP_MAX
 * names each, so that renewing them costs one keepalive per etcd lease.
 * A name joins a group only after a keepalive of it in the same acquire
 * call (or in a group granted by that call): its etcd lease then ends
 * after the validity the call starts.  A group's etcd lease is revoked
 * when its last name is released; one that answered TTL 0 is dead (its
 * names are lost) and never joined again. */

egroup *fence__ei_group_find(fence__issuer *is, int64_t id)
{
    for (egroup *g = is->groups; g != NULL; g = g->next) {
        if (g->id == id) {
            return g;
        }
    }
    return NULL;
}

/* Join a live group of ttl_ms with room, or NULL (none). */
static egroup *group_join(fence__issuer *is, int64_t ttl_ms)
{
    pthread_mutex_lock(&is->grp_lock);
    egroup *g = is->groups;
    while (g != NULL && (g->dead || g->ttl_ms != ttl_ms || g->members >= is->group_max)) {
        g = g->next;
    }
    if (g != NULL) {
        g->members++;
    }
    pthread_mutex_unlock(&is->grp_lock);
    return g;
}

/* Leave g; the last one out revokes its etcd lease. */
void fence__ei_group_leave(fence__issuer *is, egroup *g, int64_t deadline_us)
{
    pthread_mutex_lock(&is->grp_lock);
    int last = --g->members == 0;
    if (last) {
        for (egroup **p = &is->groups; *p != NULL; p = &(*p)->next) {
            if (*p == g) {
                *p = g->next;
                break;
            }
        }
    }
    pthread_mutex_unlock(&is->grp_lock);
    if (last) {
        if (!g->dead) {
            fence__ei_lease_revoke(is, g->id, deadline_us);
        }
        free(g);
    }
}

void fence__ei_group_dead(fence__issuer *is, egroup *g)
{
    pthread_mutex_lock(&is->grp_lock);
    g->dead = 1;
    pthread_mutex_unlock(&is->grp_lock);
}

/* A new group of l's TTL with l in it: /v3/lease/grant, the TTL rounded up
 * to whole seconds (etcd raises it to its minimum). */
static fence_status group_new(fence__issuer *is, const fence__ilease *l, int64_t deadline_us,
                              egroup **out)
{
    *out = NULL;
    json_t *resp = NULL;
    fence_status st = fence__ei_cmd_call(is, "/v3/lease/grant",
                               json_pack("{s:I}", "TTL", (json_int_t)fence__ei_server_ttl_s(l->ttl_ms)),
                               deadline_us, &resp, NULL, NULL);
    if (st != FENCE_OK) {
        return st;
    }
    int64_t id = 0, ttl = 0;
    if (fence__et_int(resp, "ID", &id) != 0 || fence__et_int(resp, "TTL", &ttl) != 0 || id == 0 ||
        ttl * 1000 < l->ttl_ms) {
        st = fence__ei_fail(is, FENCE_EPROTO, "%s: lease grant: unexpected reply (ID %" PRId64 ", TTL %"
                  PRId64 " s for %" PRId64 " ms asked)", is->et.display, id, ttl, l->ttl_ms);
    }
    json_decref(resp);
    egroup *g = st == FENCE_OK ? calloc(1, sizeof *g) : NULL;
    if (st == FENCE_OK && g == NULL) {
        fence__ei_lease_revoke(is, id, deadline_us);
        return fence__ei_nomem(is);
    }
    if (g != NULL) {
        g->id = id;
        g->ttl_ms = l->ttl_ms;
        g->server_ttl = ttl;
        g->members = 1;
        pthread_mutex_lock(&is->grp_lock);
        g->next = is->groups;
        is->groups = g;
        pthread_mutex_unlock(&is->grp_lock);
        *out = g;
    }
    return st;
}

/* A group for l, its etcd lease alive as of this call: a joined one kept
 * alive now, or a new one. */
fence_status fence__ei_group_for(fence__issuer *is, const fence__ilease *l, int64_t deadline_us,
                              egroup **out)
{
    for (;;) {
        egroup *g = group_join(is, l->ttl_ms);
        if (g == NULL) {
            return group_new(is, l, deadline_us, out);
        }
        int alive = -1;
        pthread_mutex_lock(&is->cmd_lock);
        fence_status st = fence__ei_keepalive(is, &is->cmd, &g->id, 1, deadline_us, &alive);
        is->cmd_down = st == FENCE_ECONN;
        pthread_mutex_unlock(&is->cmd_lock);
        if (st != FENCE_OK) {
            fence__ei_group_leave(is, g, deadline_us);
            return st;
        }
        if (alive == 1) {
            *out = g;
            return FENCE_OK;
        }
        fence__ei_group_dead(is, g); /* expired: its names are lost */
        fence__ei_group_leave(is, g, deadline_us);
    }
}

/* ---- renewals --------------------------------------------------------------------------- */

/* Keepalives of the etcd leases ids[0..n) on ln: alive[i] 1, 0 (expired:
 * TTL 0) or -1 (no answer).  One request per etcd lease: etcd 3.4's
 * gateway cannot carry several keepalives in one HTTP/1.1 request (Go's
 * HTTP/1 server is not full duplex: once the first answer is written the
 * rest of the request body is not read, and the answers still owed are
 * dropped -- seen as 18 of 50 answered).  Each call is bounded by the
 * engine's own budget; a failure leaves the rest unanswered. */
fence_status fence__ei_keepalive(fence__issuer *is, fence__et_line *ln, const int64_t *ids,
                              size_t n, int64_t deadline_us, int *alive)
{
    fence_status st = FENCE_OK;
    for (size_t i = 0; i < n; i++) {
        alive[i] = -1;
    }
    for (size_t i = 0; i < n && st == FENCE_OK; i++) {
        if (i > 0 && ids[i] == ids[i - 1]) {
            alive[i] = alive[i - 1]; /* leases share an etcd lease: asked once */
            continue;
        }
        json_t *req = json_pack("{s:o}", "ID", fence__ei_idjson(ids[i]));
        json_t *resp = NULL;
        if (req == NULL) {
            return fence__ei_nomem(is);
        }
        st = fence__et_call(&is->et, ln, "/v3/lease/keepalive", req, deadline_us, &resp, NULL,
                            NULL);
        json_decref(req);
        if (st != FENCE_OK) {
            break;
        }
        json_t *res = json_object_get(resp, "result");
        int64_t id = 0, ttl = 0;
        if (res == NULL || fence__et_int(res, "ID", &id) != 0 ||
            fence__et_int(res, "TTL", &ttl) != 0 || id != ids[i]) {
            st = fence__ei_fail(is, FENCE_EPROTO, "%s: unexpected reply to a keepalive", is->et.display);
        } else {
            alive[i] = ttl > 0;
        }
        json_decref(resp);
    }
    return st;
}

/* Whether each owner key of ls[0..n) (n <= MAX_TXN_OPS) is still on its
 * lease at its revision: mine[i] 1 or 0.  First one txn comparing every
 * key's mod_revision with its put's (a delete or a replace changes it; a
 * put with another lease is a replace): all still ours, the usual answer,
 * costs one small reply -- the gateway's JSON of 128 ranges costs ~20 ms.
 * Only when one differs are the keys read to say which. */
static fence_status check_keys(fence__issuer *is, fence__et_line *ln, fence__ilease *const *ls,
                               size_t n, int64_t deadline_us, int *mine)
{
    json_t *cmps = json_array();
    for (size_t i = 0; cmps != NULL && i < n; i++) {
        const eroom *r = ROOM(ls[i]);
        json_t *c = json_pack("{s:s, s:o, s:o}", "target", "MOD", "key",
                              fence__ei_kjson(r->owner, r->owner_len), "mod_revision", fence__ei_idjson(r->rev));
        if (c == NULL || json_array_append_new(cmps, c) != 0) {
            json_decref(cmps);
            cmps = NULL;
        }
    }
    json_t *creq = cmps != NULL ? json_pack("{s:o}", "compare", cmps) : NULL;
    if (creq == NULL) {
        return fence__ei_nomem(is);
    }
    json_t *cresp = NULL;
    fence_status cst = fence__et_call(&is->et, ln, "/v3/kv/txn", creq, deadline_us, &cresp,
                                      NULL, NULL);
    json_decref(creq);
    if (cst != FENCE_OK) {
        return cst;
    }
    int all = json_is_true(json_object_get(cresp, "succeeded"));
    json_decref(cresp);
    if (all) {
        for (size_t i = 0; i < n; i++) {
            mine[i] = 1;
        }
        return FENCE_OK;
    }
    json_t *ops = json_array();
    for (size_t i = 0; ops != NULL && i < n; i++) {
        const eroom *r = ROOM(ls[i]);
        if (json_array_append_new(ops, fence__ei_range_op(r->owner, r->owner_len, 1)) != 0) {
            json_decref(ops);
            ops = NULL;
        }
    }
    json_t *req = ops != NULL ? json_pack("{s:o}", "success", ops) : NULL;
    if (req == NULL) {
        return fence__ei_nomem(is);
    }
    json_t *resp = NULL;
    fence_status st = fence__et_call(&is->et, ln, "/v3/kv/txn", req, deadline_us, &resp, NULL,
                                     NULL);
    json_decref(req);
    if (st != FENCE_OK) {
        return st;
    }
    for (size_t i = 0; i < n; i++) {
        const eroom *r = ROOM(ls[i]);
        json_t *kv = fence__ei_range_kv(resp, i);
        int64_t lease = 0, mod = 0;
        fence__et_int(kv, "lease", &lease);
        fence__et_int(kv, "mod_revision", &mod);
        mine[i] = kv != NULL && lease == r->lease && mod == r->rev;
    }
    json_decref(resp);
    return FENCE_OK;
}

static int cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

fence_status fence__ei_renew(fence__issuer *is, fence__ilease *const *ls, size_t n, int chan,
                             int64_t deadline_us, int *results, int64_t *sent_us)
{
    int *alive = malloc(2 * n * sizeof *alive);
    int64_t *ids = calloc(n > 0 ? n : 1, sizeof *ids);
    if (alive == NULL || ids == NULL) {
        free(alive);
        free(ids);
        return fence__ei_nomem(is);
    }
    int *mine = alive + n;
    for (size_t i = 0; i < n; i++) {
        ids[i] = ROOM(ls[i])->lease;
    }
    fence__et_line *ln = &is->hb;
    if (chan != FENCE__CHAN_HEARTBEAT) {
        pthread_mutex_lock(&is->cmd_lock);
        ln = &is->cmd;
    }
    *sent_us = fence__now_us();
    /* One keepalive per etcd lease: the distinct ones, sorted. */
    size_t nu = 0;
    qsort(ids, n, sizeof *ids, cmp_id);
    for (size_t i = 0; i < n; i++) {
        if (nu == 0 || ids[nu - 1] != ids[i]) {
            ids[nu++] = ids[i];
        }
    }
    int *alive_u = mine; /* room for n; mine is filled later */
    fence_status st = fence__ei_keepalive(is, ln, ids, nu, deadline_us, alive_u);
    for (size_t i = 0; i < n; i++) {
        int64_t id = ROOM(ls[i])->lease;
        const int64_t *at = bsearch(&id, ids, nu, sizeof *ids, cmp_id);
        alive[i] = at != NULL ? alive_u[at - ids] : -1;
    }
    for (size_t i = 0; st == FENCE_OK && i < n; i += MAX_TXN_OPS) {
        size_t m = n - i < MAX_TXN_OPS ? n - i : MAX_TXN_OPS;
        fence_status s = check_keys(is, ln, ls + i, m, deadline_us, mine + i);
        for (size_t j = 0; j < m; j++) {
            results[i + j] = s != FENCE_OK || alive[i + j] < 0 ? -1
                                                                 : alive[i + j] && mine[i + j];
        }
        st = s != FENCE_OK ? s : st;
    }
    if (st != FENCE_OK) {
        /* Keepalives that etcd answered with TTL 0 are lost whatever else. */
        for (size_t i = 0; i < n; i++) {
            results[i] = alive[i] == 0 ? 0 : results[i];
        }
    }
    if (chan != FENCE__CHAN_HEARTBEAT) {
        is->cmd_down = st == FENCE_ECONN;
        pthread_mutex_unlock(&is->cmd_lock);
    }
    free(alive);
    free(ids);
    return st;
}

