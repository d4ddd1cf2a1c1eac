/* lease.c -- acquire, renew, release, and what a lease knows about itself. */
#include "internal.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fence_lease_options_init(fence_lease_options *o, int64_t ttl_ms)
{
    if (o != NULL) {
        memset(o, 0, sizeof *o);
        o->ttl_ms = ttl_ms;
    }
}

int64_t fence__margin_us(int64_t ttl_ms)
{
    /* 1% of the TTL for clock drift between us and Redis, plus 2 ms. */
    return ttl_ms * 10 + 2000;
}

int fence__check_name(const fence_client *c, const char *name)
{
    size_t bad = SIZE_MAX;
    const char *why = fence__name_problem(name, FENCE__NAME_PRINTABLE, &bad);
    if (why == NULL) {
        return FENCE_OK;
    }
    if (bad != SIZE_MAX) {
        return fence__fail(c, FENCE_EINVAL, "lease name %s (byte %zu)", why, bad);
    }
    return fence__fail(c, FENCE_EINVAL, "lease name %s", why);
}

char *fence__key(const fence_client *c, const char *name, const char *suffix)
{
    size_t n = strlen(c->prefix) + strlen(name) + strlen(suffix) + 3;
    char *k = malloc(n);
    if (k != NULL) {
        snprintf(k, n, "%s{%s}%s", c->prefix, name, suffix);
    }
    return k;
}

static int check_opts(fence_client *c, const fence_lease_options *o)
{
    if (o->ttl_ms < FENCE_TTL_MIN_MS || o->ttl_ms > FENCE_TTL_MAX_MS) {
        return fence__fail(c, FENCE_EINVAL, "ttl_ms %" PRId64 " out of range (%d..%lld ms)",
                           o->ttl_ms, FENCE_TTL_MIN_MS, (long long)FENCE_TTL_MAX_MS);
    }
    if (o->wait_ms < 0 || o->wait_ms > FENCE_WAIT_MAX_MS) {
        return fence__fail(c, FENCE_EINVAL, "wait_ms %" PRId64 " out of range (0..%lld ms)",
                           o->wait_ms, (long long)FENCE_WAIT_MAX_MS);
    }
    if (o->renew_every_ms < 0 || (o->renew_every_ms > 0 && o->renew_every_ms >= o->ttl_ms)) {
        return fence__fail(c, FENCE_EINVAL,
                           "renew_every_ms %" PRId64 " must be 0 (ttl/3) or less than ttl_ms",
                           o->renew_every_ms);
    }
    if (o->no_heartbeat != 0 && o->no_heartbeat != 1) {
        return fence__fail(c, FENCE_EINVAL, "no_heartbeat must be 0 or 1");
    }
    return FENCE_OK;
}

static void lease_free(fence_lease *l)
{
    if (l != NULL) {
        free(l->name);
        free(l->owner_key);
        free(l->channel);
        free(l);
    }
}

/* Counter and token values in Redis replies: the one grammar, 0..max. */
static int parse_u64(const char *s, size_t n, uint64_t *out)
{
    return fence__u64_parse(s, n, FENCE_TOKEN_MAX, out);
}

int fence__try_once(fence_client *c, const char *name, const fence_lease_options *o,
                    int64_t bound_ms, fence_lease **out, int64_t *pttl_ms)
{
    *out = NULL;
    fence_lease *l = calloc(1, sizeof *l);
    if (l == NULL) {
        return fence__fail(c, FENCE_ENOMEM, "out of memory");
    }
    l->c = c;
    l->name = strdup(name);
    l->owner_key = fence__key(c, name, "");
    char *counter = fence__key(c, name, ":token");
    l->channel = fence__key(c, name, ":released");
    if (l->name == NULL || l->owner_key == NULL || counter == NULL || l->channel == NULL) {
        free(counter);
        lease_free(l);
        return fence__fail(c, FENCE_ENOMEM, "out of memory");
    }
    char owner[2 * FENCE_OWNER_BYTES + 1];
    if (fence__owner_id(owner) != FENCE_OK) {
        free(counter);
        lease_free(l);
        return fence__fail(c, FENCE_ESYS, "getrandom() failed: no owner id");
    }
    l->ttl_ms = o->ttl_ms;
    l->renew_every_ms = o->renew_every_ms > 0 ? o->renew_every_ms : o->ttl_ms / 3;
    if (l->renew_every_ms < 1) {
        l->renew_every_ms = 1;
    }
    l->no_heartbeat = o->no_heartbeat;
    l->on_lost = o->on_lost;
    l->user = o->user;

    char ttl[24];
    snprintf(ttl, sizeof ttl, "%" PRId64, o->ttl_ms);
    const char *args[4] = {l->owner_key, counter, owner, ttl};
    redisReply *r = NULL;
    atomic_fetch_add(&c->m.acquire_attempts, 1);
    int64_t sent = fence__now_us();
    int st = fence__eval_cmd(c, FENCE__ACQUIRE, 2, 4, args, bound_ms, NULL, (void **)&r);
    free(counter);
    if (st != FENCE_OK) {
        lease_free(l);
        return st;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        freeReplyObject(r);
        lease_free(l);
        return fence__fail(c, FENCE_EPROTO, "%s: unexpected reply to acquire", c->url.display);
    }
    if (r->element[0]->integer == 0) {
        *pttl_ms = r->element[1]->type == REDIS_REPLY_INTEGER ? r->element[1]->integer : -1;
        freeReplyObject(r);
        lease_free(l);
        atomic_fetch_add(&c->m.acquire_contended, 1);
        return fence__fail(c, FENCE_BUSY, "lease '%s' is held by another owner", name);
    }
    redisReply *t = r->element[1];
    uint64_t token = 0;
    if (t->type != REDIS_REPLY_STRING || parse_u64(t->str, t->len, &token) != 0 || token == 0) {
        freeReplyObject(r);
        lease_free(l);
        return fence__fail(c, FENCE_EPROTO, "%s: bad token in the reply to acquire",
                           c->url.display);
    }
    freeReplyObject(r);
    l->token = token;
    snprintf(l->value, sizeof l->value, "%s:%" PRIu64, owner, token);
    l->state = FENCE__HELD;
    l->valid_until_us = sent + l->ttl_ms * 1000 - fence__margin_us(l->ttl_ms);
    l->next_renew_us = sent + l->renew_every_ms * 1000;

    int64_t first_renewal = fence__renew_at(l); /* before others can see l */
    pthread_mutex_lock(&c->lock);
    l->next = c->leases;
    if (c->leases != NULL) {
        c->leases->prev = l;
    }
    c->leases = l;
    pthread_mutex_unlock(&c->lock);
    atomic_fetch_add(&c->m.lease_acquired, 1);
    atomic_fetch_add(&c->m.leases_held, 1);
    if (!l->no_heartbeat) {
        fence__heartbeat_kick(c, first_renewal);
    }
    *out = l;
    return FENCE_OK;
}

int fence_acquire(fence_client *c, const char *name, const fence_lease_options *o,
                  fence_lease **out)
{
    if (out != NULL) {
        *out = NULL;
    }
    int st = fence__check_client(c, "fence_acquire");
    if (st != FENCE_OK) {
        return st;
    }
    if (out == NULL || o == NULL) {
        return fence__fail(c, FENCE_EINVAL, "fence_acquire: %s is NULL",
                           out == NULL ? "out" : "opts");
    }
    st = fence__check_name(c, name);
    if (st == FENCE_OK) {
        st = check_opts(c, o);
    }
    if (st != FENCE_OK) {
        return st;
    }
    if (!o->no_heartbeat) {
        st = fence__heartbeat_start(c);
        if (st != FENCE_OK) {
            return st;
        }
    }
    fence__clear(c);
    if (o->wait_ms > 0) {
        return fence__acquire_wait(c, name, o, out);
    }
    int64_t pttl;
    return fence__try_once(c, name, o, 0, out, &pttl);
}

int fence_try_acquire(fence_client *c, const char *name, int64_t ttl_ms, fence_lease **out)
{
    fence_lease_options o;
    fence_lease_options_init(&o, ttl_ms);
    return fence_acquire(c, name, &o, out);
}

int fence__mark_lost_locked(fence_lease *l, int reason)
{
    if (l->state != FENCE__HELD) {
        return 0;
    }
    l->state = FENCE__LOST;
    l->lost_reason = reason; /* written once, here, under the lock */
    l->valid_until_us = 0;
    atomic_fetch_add(&l->c->m.lease_lost, 1);
    atomic_fetch_sub(&l->c->m.leases_held, 1);
    if (l->on_lost != NULL) {
        /* Claimed now, under the lock, so a concurrent fence_release()
         * waits for the callback instead of freeing the lease under it. */
        l->cb_running = 1;
        l->cb_thread = pthread_self();
    }
    return 1;
}

static void unlink_locked(fence_lease *l)
{
    fence_client *c = l->c;
    if (l->prev != NULL) {
        l->prev->next = l->next;
    } else if (c->leases == l) {
        c->leases = l->next;
    }
    if (l->next != NULL) {
        l->next->prev = l->prev;
    }
    l->prev = l->next = NULL;
}

/* How many lost callbacks this thread is inside (fence_release() must not
 * wait for another thread's callback from inside one: two callbacks
 * releasing each other's leases would wait for each other forever). */
static _Thread_local int tl_in_callback;

void fence__fire_lost(fence_lease *l, int reason)
{
    fence_client *c = l->c;
    pthread_mutex_lock(&c->lock);
    /* Released between being marked lost and now (from another callback):
     * then its callback must not run. */
    int skip = l->on_lost == NULL || l->released;
    pthread_mutex_unlock(&c->lock);
    if (!skip) {
        tl_in_callback++;
        l->on_lost(l, reason, l->user);
        tl_in_callback--;
    }
    pthread_mutex_lock(&c->lock);
    l->cb_running = 0;
    int free_it = l->free_after_cb;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    if (free_it) {
        lease_free(l);
    }
}

int fence_renew(fence_lease *l)
{
    if (l == NULL) {
        return fence__fail(NULL, FENCE_EINVAL, "fence_renew: lease is NULL");
    }
    fence_client *c = l->c;
    char msg[FENCE_NAME_MAX + 128];
    snprintf(msg, sizeof msg, "lease '%s' was lost", l->name);

    /* Already lost, or its validity already ran out: lost for good. */
    pthread_mutex_lock(&c->lock);
    int was_lost = l->state != FENCE__HELD;
    int fire = !was_lost && l->valid_until_us <= fence__now_us() &&
               fence__mark_lost_locked(l, FENCE_LOST);
    int claimed = fire && l->cb_running;
    pthread_mutex_unlock(&c->lock);
    if (fire) {
        atomic_fetch_add(&c->m.renew_failed, 1);
        snprintf(msg, sizeof msg, "lease '%s' was lost: its validity ran out before this "
                 "renewal", l->name);
        if (claimed) {
            fence__fire_lost(l, FENCE_LOST); /* may free l */
        }
        return fence__fail(c, FENCE_LOST, "%s", msg);
    }
    if (was_lost) {
        return fence__fail(c, FENCE_LOST, "%s", msg);
    }

    char ttl[24];
    snprintf(ttl, sizeof ttl, "%" PRId64, l->ttl_ms);
    const char *args[3] = {l->owner_key, l->value, ttl};
    redisReply *r = NULL;
    int64_t sent = fence__now_us();
    int st = fence__eval_cmd(c, FENCE__RENEW, 1, 3, args, 0, NULL, (void **)&r);
    int ok = 0;
    if (st == FENCE_OK) {
        int proto = r->type != REDIS_REPLY_INTEGER;
        ok = !proto && r->integer == 1;
        freeReplyObject(r);
        if (proto) {
            st = fence__fail(c, FENCE_EPROTO, "%s: unexpected reply to renew", c->url.display);
        }
    }

    pthread_mutex_lock(&c->lock);
    int64_t now = fence__now_us();
    int reason = 0;
    if (l->state != FENCE__HELD) {
        reason = -1; /* lost meanwhile (the heartbeat said so) */
    } else if (st == FENCE_OK && !ok) {
        reason = FENCE_LOST; /* refused: expired or taken */
    } else if (l->valid_until_us <= now) {
        reason = FENCE_ECONN; /* unanswered, or answered after its validity ran out */
    } else if (st == FENCE_OK) {
        int64_t until = sent + l->ttl_ms * 1000 - fence__margin_us(l->ttl_ms);
        if (until > l->valid_until_us) {
            l->valid_until_us = until;
        }
        l->next_renew_us = sent + l->renew_every_ms * 1000;
        l->retrying = 0;
    }
    fire = reason > 0 && fence__mark_lost_locked(l, reason);
    claimed = fire && l->cb_running;
    pthread_mutex_unlock(&c->lock);

    if (reason == 0 && st == FENCE_OK) {
        atomic_fetch_add(&c->m.renew_ok, 1);
        return FENCE_OK;
    }
    atomic_fetch_add(&c->m.renew_failed, 1);
    if (reason == 0) {
        return st; /* not answered; still held until its validity runs out */
    }
    if (reason == FENCE_LOST) {
        snprintf(msg, sizeof msg, "lease '%s' was lost: the owner key expired or holds "
                 "another owner", l->name);
    } else if (reason == FENCE_ECONN) {
        snprintf(msg, sizeof msg, "lease '%s' was lost: Redis did not answer before its "
                 "validity ran out", l->name);
    }
    if (claimed) {
        fence__fire_lost(l, reason); /* may free l */
    }
    return fence__fail(c, FENCE_LOST, "%s", msg);
}

int fence_release(fence_lease *l)
{
    if (l == NULL) {
        return fence__fail(NULL, FENCE_EINVAL, "fence_release: lease is NULL");
    }
    fence_client *c = l->c;
    pthread_t self = pthread_self();
    pthread_mutex_lock(&c->lock);
    l->released = 1; /* a callback not yet started will not run */
    /* Wait for a heartbeat round trip that includes the lease, and for its
     * callback if one is running on another thread -- but never from inside
     * a callback: two callbacks releasing each other's leases would wait
     * for each other.  The last one out frees the lease (below, and in
     * fence__fire_lost). */
    for (;;) {
        int own_cb = l->cb_running && pthread_equal(l->cb_thread, self);
        int wait_cb = l->cb_running && !own_cb && tl_in_callback == 0;
        if (!wait_cb && !l->in_pass) {
            break;
        }
        pthread_cond_wait(&c->cond, &c->lock);
    }
    unlink_locked(l);
    int was_held = l->state == FENCE__HELD;
    int lost_reason = was_held ? 0 : l->lost_reason;
    if (was_held) {
        /* No callback for a lease its user releases; stop renewing it. */
        l->state = FENCE__LOST;
        atomic_fetch_sub(&c->m.leases_held, 1);
    }
    int offline = c->offline;
    pthread_mutex_unlock(&c->lock);

    int st;
    /* A lease lost because Redis went unanswered may still own its key:
     * compare-and-delete is always safe, and frees it for the waiters. */
    if ((was_held || lost_reason == FENCE_ECONN) && !offline) {
        const char *args[3] = {l->owner_key, l->value, l->channel};
        redisReply *r = NULL;
        int retried = 0;
        st = fence__eval_cmd(c, FENCE__RELEASE, 1, 3, args, 0, &retried, (void **)&r);
        if (st == FENCE_OK) {
            int deleted = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
            if (r->type != REDIS_REPLY_INTEGER) {
                st = fence__fail(c, FENCE_EPROTO, "%s: unexpected reply to release",
                                 c->url.display);
            } else if (!was_held) {
                st = fence__fail(c, FENCE_LOST, "lease '%s' had already been lost", l->name);
            } else if (deleted) {
                atomic_fetch_add(&c->m.lease_released, 1);
            } else if (retried) {
                /* The first attempt may have deleted it before its reply
                 * was lost: the lease is not held, but whether it was
                 * released or had been lost is unknown. */
                st = fence__fail(c, FENCE_ECONN, "%s: the connection failed during the release "
                                 "of '%s'; it is no longer held (released or expired)",
                                 c->url.display, l->name);
            } else {
                st = fence__fail(c, FENCE_LOST, "lease '%s' was lost before release; the "
                                 "current owner's key was left alone", l->name);
                atomic_fetch_add(&c->m.lease_lost, 1);
            }
            freeReplyObject(r);
        }
    } else if (!was_held) {
        st = fence__fail(c, FENCE_LOST, "lease '%s' had already been lost", l->name);
    } else {
        st = fence__fail(c, FENCE_ECONN, "%s: not contacted while closing (unreachable); "
                         "'%s' expires by its TTL", c->url.display, l->name);
    }
    pthread_mutex_lock(&c->lock);
    int free_now = !l->cb_running; /* else its callback's end frees it */
    if (!free_now) {
        l->free_after_cb = 1;
    }
    pthread_mutex_unlock(&c->lock);
    if (free_now) {
        lease_free(l);
    }
    return st;
}

uint64_t fence_lease_token(const fence_lease *l)
{
    return l != NULL ? l->token : 0;
}

const char *fence_lease_name(const fence_lease *l)
{
    return l != NULL ? l->name : "";
}

const char *fence_lease_owner(const fence_lease *l)
{
    return l != NULL ? l->value : "";
}

fence_client *fence_lease_client(const fence_lease *l)
{
    return l != NULL ? l->c : NULL;
}

int fence_lease_lost(const fence_lease *l)
{
    if (l == NULL) {
        return 1;
    }
    pthread_mutex_lock(&l->c->lock);
    int lost = l->state != FENCE__HELD || l->valid_until_us <= fence__now_us();
    pthread_mutex_unlock(&l->c->lock);
    return lost;
}

int64_t fence_lease_valid_ms(const fence_lease *l)
{
    if (l == NULL) {
        return 0;
    }
    pthread_mutex_lock(&l->c->lock);
    int64_t left = l->state == FENCE__HELD ? l->valid_until_us - fence__now_us() : 0;
    pthread_mutex_unlock(&l->c->lock);
    return left > 0 ? left / 1000 : 0;
}

/* ---- counters and inspection ------------------------------------------------ */

int fence_token_raise(fence_client *c, const char *name, uint64_t floor, uint64_t *token_out)
{
    int st = fence__check_client(c, "fence_token_raise");
    if (st != FENCE_OK) {
        return st;
    }
    st = fence__check_name(c, name);
    if (st != FENCE_OK) {
        return st;
    }
    if (floor > (uint64_t)INT64_MAX) {
        return fence__fail(c, FENCE_EINVAL, "floor above 2^63-1 (Redis counters are signed)");
    }
    char *counter = fence__key(c, name, ":token");
    if (counter == NULL) {
        return fence__fail(c, FENCE_ENOMEM, "out of memory");
    }
    char f[24];
    snprintf(f, sizeof f, "%" PRIu64, floor);
    const char *args[2] = {counter, f};
    redisReply *r = NULL;
    st = fence__eval_cmd(c, FENCE__TOKEN_RAISE, 1, 2, args, 0, NULL, (void **)&r);
    free(counter);
    if (st != FENCE_OK) {
        return st;
    }
    uint64_t v = 0;
    if (r->type != REDIS_REPLY_STRING || parse_u64(r->str, r->len, &v) != 0) {
        st = fence__fail(c, FENCE_EPROTO, "%s: the counter of '%s' is not a number",
                         c->url.display, name);
    } else if (token_out != NULL) {
        *token_out = v;
    }
    freeReplyObject(r);
    return st;
}

int fence_lease_inspect(fence_client *c, const char *name, int *held, int64_t *pttl_ms,
                        uint64_t *holder_token, uint64_t *last_token)
{
    int st = fence__check_client(c, "fence_lease_inspect");
    if (st != FENCE_OK) {
        return st;
    }
    st = fence__check_name(c, name);
    if (st != FENCE_OK) {
        return st;
    }
    char *owner = fence__key(c, name, "");
    char *counter = fence__key(c, name, ":token");
    if (owner == NULL || counter == NULL) {
        free(owner);
        free(counter);
        return fence__fail(c, FENCE_ENOMEM, "out of memory");
    }
    const char *args[2] = {owner, counter};
    redisReply *r = NULL;
    st = fence__eval_cmd(c, FENCE__INSPECT, 2, 2, args, 0, NULL, (void **)&r);
    free(owner);
    free(counter);
    if (st != FENCE_OK) {
        return st;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2) {
        freeReplyObject(r);
        return fence__fail(c, FENCE_EPROTO, "%s: unexpected reply to inspect", c->url.display);
    }
    redisReply *v = r->element[0];
    int is_held = v->type == REDIS_REPLY_STRING;
    uint64_t ht = 0, lt = 0;
    if (is_held) {
        const char *colon = memchr(v->str, ':', v->len);
        if (colon != NULL) {
            parse_u64(colon + 1, v->len - (size_t)(colon + 1 - v->str), &ht);
        }
    }
    if (r->elements > 2 && r->element[2]->type == REDIS_REPLY_STRING) {
        parse_u64(r->element[2]->str, r->element[2]->len, &lt);
    }
    if (held != NULL) {
        *held = is_held;
    }
    if (pttl_ms != NULL) {
        *pttl_ms = is_held && r->element[1]->type == REDIS_REPLY_INTEGER ? r->element[1]->integer
                                                                          : -1;
    }
    if (holder_token != NULL) {
        *holder_token = ht;
    }
    if (last_token != NULL) {
        *last_token = lt;
    }
    freeReplyObject(r);
    return FENCE_OK;
}

int fence_token_last(fence_client *c, const char *name, uint64_t *token_out)
{
    if (token_out == NULL) {
        return fence__fail(c, FENCE_EINVAL, "fence_token_last: token_out is NULL");
    }
    return fence_lease_inspect(c, name, NULL, NULL, NULL, token_out);
}
