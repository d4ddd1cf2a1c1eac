/* lease.c -- one acquire attempt, renew, release, and what a lease tells
 * about itself. */
#include "lease_internal.h"
#include "lease_async.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* Owner ids: FENCE_OWNER_BYTES (128 bits) from getrandom(), the OS
 * CSPRNG, as lower-case hex plus NUL into hex (2 * FENCE_OWNER_BYTES + 1
 * bytes).  Never a weaker fallback: if the kernel cannot give us
 * randomness, acquiring fails (fail closed): FENCE_ESYS. */
static fence_status owner_id(char *hex)
{
    unsigned char raw[FENCE_OWNER_BYTES];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return FENCE_ESYS;
        }
        got += (size_t)n;
    }
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof raw; i++) {
        hex[2 * i] = digits[raw[i] >> 4];
        hex[2 * i + 1] = digits[raw[i] & 15];
    }
    hex[2 * sizeof raw] = '\0';
    return FENCE_OK;
}

/* ---- one acquire attempt ------------------------------------------------- */

/* A new lease for name with its keys and options, not yet in Redis.
 * *counter gets the counter's key and owner its new owner id. */
static fence_status lease_new(fence_client *c, const char *name, const fence_lease_options *o,
                              char *owner, char **counter, fence_lease **out)
{
    *out = NULL;
    *counter = NULL;
    fence_lease *l = calloc(1, sizeof *l);
    if (l == NULL) {
        return fence__fail(c, FENCE_ENOMEM, "out of memory");
    }
    l->c = c;
    l->name = strdup(name);
    l->owner_key = fence__key(c, name, "");
    char *k = fence__key(c, name, ":token");
    l->channel = fence__key(c, name, ":released");
    if (l->name == NULL || l->owner_key == NULL || k == NULL || l->channel == NULL) {
        free(k);
        fence__lease_free(l);
        return fence__fail(c, FENCE_ENOMEM, "out of memory");
    }
    if (owner_id(owner) != FENCE_OK) {
        free(k);
        fence__lease_free(l);
        return fence__fail(c, FENCE_ESYS, "getrandom() failed: no owner id");
    }
    l->ttl_ms = o->ttl_ms;
    l->has_info = o->holder_info != NULL && o->holder_info[0] != '\0';
    if (l->has_info && (l->info_key = fence__key(c, name, ":info")) == NULL) {
        free(k);
        fence__lease_free(l);
        return fence__fail(c, FENCE_ENOMEM, "out of memory");
    }
    l->renew_every_ms = o->renew_every_ms > 0 ? o->renew_every_ms : o->ttl_ms / 3;
    if (l->renew_every_ms < 1) {
        l->renew_every_ms = 1;
    }
    l->no_heartbeat = o->no_heartbeat;
    l->on_lost = o->on_lost;
    l->user = o->user;
    *counter = k;
    *out = l;
    return FENCE_OK;
}

/* The acquire script's answer r (freed here): FENCE_OK with *token,
 * FENCE_BUSY with *pttl_ms, or FENCE_EPROTO. */
static fence_status acquire_reply(fence_client *c, const char *name, redisReply *r,
                                  uint64_t *token, int64_t *behind_us, int64_t *pttl_ms)
{
    fence_status st;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        st = fence__fail(c, FENCE_EPROTO, "%s: unexpected reply to acquire", c->rd.url.display);
    } else if (r->element[0]->integer == 0) {
        *pttl_ms = r->element[1]->type == REDIS_REPLY_INTEGER ? r->element[1]->integer : -1;
        atomic_fetch_add(&c->m.acquire_contended, 1);
        st = fence__fail(c, FENCE_BUSY, "lease '%s' is held by another owner", name);
    } else {
        st = fence__issued(c, r, "acquire", name, token, behind_us);
    }
    freeReplyObject(r);
    return st;
}

/* l was granted with token by a request sent at sent_us: make it held,
 * add it to its client and tell the heartbeat. */
static void publish(fence_lease *l, const char *owner, uint64_t token, int64_t sent_us)
{
    fence_client *c = l->c;
    l->token = token;
    memcpy(l->holder, owner, FENCE_HOLDER_LEN + 1);
    snprintf(l->value, sizeof l->value, "%s:%" PRIu64, owner, token);
    l->state = FENCE__HELD;
    l->valid_until_us = fence__valid_until(l, sent_us);
    l->next_renew_us = sent_us + l->renew_every_ms * 1000;

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
}

void fence__issue_init(const fence_client *c, fence__eval_opts *io)
{
    io->check = 1;
    io->min_replicas = c->min_replicas;
    io->replica_timeout_ms = c->replica_timeout_ms;
    io->acked = -1;
}

const char *fence__mode_args(const fence_client *c, char *jump_us, char *limit_us,
                             char *idle_ms)
{
    snprintf(jump_us, 24, "%" PRId64, c->token_jump_ms * 1000);
    snprintf(limit_us, 24, "%" PRId64, c->clock_behind_limit_ms * 1000);
    snprintf(idle_ms, 24, "%" PRId64, c->counter_idle_ms);
    return c->token_mode == FENCE_TOKENS_DENSE ? "dense" : "clock";
}

/* A non-negative decimal reply element, or -1. */
static int64_t reply_us(const redisReply *e)
{
    uint64_t v;
    if (e->type != REDIS_REPLY_STRING || fence__token_parse(e->str, e->len, &v) != 0 ||
        v > (uint64_t)INT64_MAX) {
        return -1;
    }
    return (int64_t)v;
}

static void note_behind(fence_client *c, int64_t behind_us)
{
    atomic_fetch_add(&c->m.clock_behind, 1);
    int_fast64_t seen = atomic_load(&c->m.clock_behind_max_us);
    while (behind_us > seen &&
           !atomic_compare_exchange_weak(&c->m.clock_behind_max_us, &seen, behind_us)) {
    }
}

fence_status fence__issued(fence_client *c, const redisReply *r, const char *what,
                           const char *name, uint64_t *token, int64_t *behind_us)
{
    *behind_us = 0;
    int64_t code = r->element[0]->integer;
    if (code == 2 && r->elements == 2 && (*behind_us = reply_us(r->element[1])) > 0) {
        note_behind(c, *behind_us);
        return fence__fail(c, FENCE_ECLOCK, "lease '%s': %s refused: the Redis server's clock "
                           "is %.3f s behind the clock that issued its last token (limit "
                           "%.3f s: clock_behind_limit_ms); nothing was written",
                           name, what, (double)*behind_us / 1e6,
                           (double)c->clock_behind_limit_ms / 1e3);
    }
    if (code != 1 || r->elements < 2 || r->elements > 3 ||
        r->element[1]->type != REDIS_REPLY_STRING ||
        fence__token_parse(r->element[1]->str, r->element[1]->len, token) != 0) {
        return fence__fail(c, FENCE_EPROTO, "%s: bad token in the reply to %s", c->rd.url.display,
                           what);
    }
    if (r->elements == 3) {
        if ((*behind_us = reply_us(r->element[2])) <= 0) {
            return fence__fail(c, FENCE_EPROTO, "%s: bad clock lag in the reply to %s",
                               c->rd.url.display, what);
        }
        note_behind(c, *behind_us);
    }
    return FENCE_OK;
}

/* release.lua's keys and arguments for l into args (4): the count, with
 * the keys' in *nkeys.  A holder description's key is declared (KEYS[2]);
 * without one, a cluster client says 'n' (leave ":info" alone), one
 * server lets the script delete a stale one. */
static int release_args(const fence_lease *l, const char **args, int *nkeys)
{
    if (l->info_key != NULL) {
        *nkeys = 2;
        args[0] = l->owner_key;
        args[1] = l->info_key;
        args[2] = l->value;
        args[3] = l->channel;
        return 4;
    }
    *nkeys = 1;
    args[0] = l->owner_key;
    args[1] = l->value;
    args[2] = l->channel;
    args[3] = "n";
    return l->c->rd.cl != NULL ? 4 : 3;
}

/* Fewer replicas than asked acknowledged the acquisition of l: give it
 * back (compare-and-delete) and say how many did. */
static fence_status too_few_replicas(fence_lease *l, long long acked)
{
    fence_client *c = l->c;
    const char *args[4];
    int nkeys = 1, nargs = release_args(l, args, &nkeys);
    void *r = NULL;
    fence_status st = fence__eval_cmd(&c->rd, FENCE__RELEASE, nkeys, nargs, args, 0, NULL, NULL,
                                      &r);
    if (r != NULL) {
        freeReplyObject(r);
    }
    return fence__fail(c, FENCE_EREPLICAS, "%lld of %d replicas acknowledged lease '%s' "
                       "within %" PRId64 " ms; %s", acked < 0 ? 0 : acked, c->min_replicas,
                       l->name, c->replica_timeout_ms,
                       st == FENCE_OK ? "it was released" : "it could not be released "
                       "(it expires by its TTL)");
}

fence_status fence__try_once(fence_client *c, const char *name, const fence_lease_options *o,
                             int64_t bound_ms, fence_lease **out, int64_t *pttl_ms)
{
    *out = NULL;
    char owner[2 * FENCE_OWNER_BYTES + 1];
    char *counter = NULL;
    fence_lease *l = NULL;
    fence_status st = lease_new(c, name, o, owner, &counter, &l);
    if (st != FENCE_OK) {
        return st;
    }
    char ttl[24], jump[24], limit[24], idle[24];
    snprintf(ttl, sizeof ttl, "%" PRId64, o->ttl_ms);
    const char *mode = fence__mode_args(c, jump, limit, idle);
    /* A holder description goes as ARGV[8], its key declared as KEYS[3]
     * (a script declares every key it touches: Redis Cluster). */
    int has_info = l->has_info;
    const char *args[11];
    int na = 0;
    args[na++] = l->owner_key;
    args[na++] = counter;
    if (has_info) {
        args[na++] = l->info_key;
    }
    int nkeys = na;
    args[na++] = "a";
    args[na++] = owner;
    args[na++] = ttl;
    args[na++] = mode;
    args[na++] = jump;
    args[na++] = limit;
    args[na++] = idle;
    if (has_info) {
        args[na++] = o->holder_info;
    }
    fence__eval_opts io;
    fence__issue_init(c, &io);
    redisReply *r = NULL;
    atomic_fetch_add(&c->m.acquire_attempts, 1);
    int64_t sent = fence__now_us();
    st = fence__eval_cmd(&c->rd, FENCE__ACQUIRE, nkeys, na, args, bound_ms, NULL, &io, (void **)&r);
    free(counter);
    uint64_t token = 0;
    if (st == FENCE_OK) {
        st = acquire_reply(c, name, r, &token, &l->clock_behind_us, pttl_ms);
    }
    if (st == FENCE_OK && c->min_replicas > 0 && io.acked < c->min_replicas) {
        snprintf(l->value, sizeof l->value, "%s:%" PRIu64, owner, token);
        st = too_few_replicas(l, io.acked);
    }
    if (st != FENCE_OK) {
        fence__lease_free(l);
        return st;
    }
    publish(l, owner, token, sent);
    *out = l;
    return FENCE_OK;
}

/* ---- renew ---------------------------------------------------------------- */

/* Before a renewal: FENCE_OK while l is held and valid; else FENCE_LOST
 * (it had been lost, or its validity ran out and it is lost now: its
 * callback fires, and may free l).  msg holds "lease '<name>' was lost". */
static fence_status renew_check(fence_lease *l, char *msg, size_t msgsize)
{
    fence_client *c = l->c;
    fence__leasev lost;
    fence__leasev_init(&lost);
    pthread_mutex_lock(&c->lock);
    int was_lost = l->state != FENCE__HELD;
    int lost_now = !was_lost && l->valid_until_us <= fence__now_us() &&
                   fence__lose_locked(l, FENCE_LOST, &lost);
    pthread_mutex_unlock(&c->lock);
    if (lost_now) {
        atomic_fetch_add(&c->m.renew_failed, 1);
        snprintf(msg, msgsize, "lease '%s' was lost: its validity ran out before this "
                 "renewal", l->name);
        fence__fire_lost(&lost); /* may free l */
        return fence__fail(c, FENCE_LOST, "%s", msg);
    }
    if (was_lost) {
        return fence__fail(c, FENCE_LOST, "%s", msg);
    }
    return FENCE_OK;
}

/* Send the renew script: FENCE_OK with *ok (1 renewed, 0 refused), or the
 * error. */
static fence_status renew_send(fence_lease *l, int64_t *sent, int *ok)
{
    fence_client *c = l->c;
    char ttl[24], value[sizeof l->value];
    fence__renew_ttl_arg(l, ttl, sizeof ttl);
    pthread_mutex_lock(&c->lock);
    memcpy(value, l->value, sizeof value);
    pthread_mutex_unlock(&c->lock);
    /* The holder description's key declared as KEYS[2] when there is one. */
    const char *args[4] = {l->owner_key, l->info_key, value, ttl};
    if (l->info_key == NULL) {
        args[1] = value;
        args[2] = ttl;
    }
    int nk = l->info_key != NULL ? 2 : 1;
    redisReply *r = NULL;
    *ok = 0;
    *sent = fence__now_us();
    fence_status st = fence__eval_cmd(&c->rd, FENCE__RENEW, nk, nk + 2, args, 0, NULL, NULL,
                                      (void **)&r);
    if (st == FENCE_OK) {
        int proto = r->type != REDIS_REPLY_INTEGER;
        *ok = !proto && r->integer == 1;
        freeReplyObject(r);
        if (proto) {
            st = fence__fail(c, FENCE_EPROTO, "%s: unexpected reply to renew", c->rd.url.display);
        }
    }
    return st;
}

fence_status fence_renew(fence_lease *l)
{
    if (l == NULL) {
        return fence__fail(NULL, FENCE_EINVAL, "fence_renew: lease is NULL");
    }
    fence_client *c = l->c;
    char msg[FENCE_NAME_MAX + 128];
    snprintf(msg, sizeof msg, "lease '%s' was lost", l->name);
    fence_status st = renew_check(l, msg, sizeof msg);
    if (st != FENCE_OK) {
        return st; /* l may be gone */
    }
    int64_t sent;
    int ok;
    st = renew_send(l, &sent, &ok);

    fence__leasev lost;
    fence__leasev_init(&lost);
    pthread_mutex_lock(&c->lock);
    int reason = 0;
    if (l->state != FENCE__HELD) {
        reason = -1; /* lost meanwhile (the heartbeat said so) */
    } else if (st == FENCE_OK && !ok) {
        reason = FENCE_LOST; /* refused: expired or taken */
    } else if (l->valid_until_us <= fence__now_us()) {
        reason = FENCE_ECONN; /* unanswered, or answered after its validity ran out */
    } else if (st == FENCE_OK) {
        fence__renewed_locked(l, sent);
    }
    if (reason > 0) {
        fence__lose_locked(l, reason, &lost);
    }
    pthread_mutex_unlock(&c->lock);

    if (reason == 0 && st == FENCE_OK) {
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
    fence__fire_lost(&lost); /* may free l */
    return fence__fail(c, FENCE_LOST, "%s", msg);
}

/* ---- release -------------------------------------------------------------- */

/* Compare-and-delete l's owner key (and wake the waiters).  was_held: l
 * was held until this release began. */
static fence_status release_in_redis(fence_lease *l, int was_held)
{
    fence_client *c = l->c;
    const char *args[4];
    int nkeys = 1, nargs = release_args(l, args, &nkeys);
    redisReply *r = NULL;
    int retried = 0;
    fence_status st = fence__eval_cmd(&c->rd, FENCE__RELEASE, nkeys, nargs, args, 0, &retried, NULL,
                                      (void **)&r);
    if (st != FENCE_OK) {
        return st;
    }
    int deleted = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    if (r->type != REDIS_REPLY_INTEGER) {
        st = fence__fail(c, FENCE_EPROTO, "%s: unexpected reply to release", c->rd.url.display);
    } else if (!was_held) {
        st = fence__fail(c, FENCE_LOST, "lease '%s' had already been lost", l->name);
    } else if (deleted) {
        atomic_fetch_add(&c->m.lease_released, 1);
    } else if (retried) {
        /* The first attempt may have deleted it before its reply was
         * lost: the lease is not held, but whether it was released or had
         * been lost is unknown. */
        st = fence__fail(c, FENCE_ECONN, "%s: the connection failed during the release "
                         "of '%s'; it is no longer held (released or expired)",
                         c->rd.url.display, l->name);
    } else {
        st = fence__fail(c, FENCE_LOST, "lease '%s' was lost before release; the "
                         "current owner's key was left alone", l->name);
        atomic_fetch_add(&c->m.lease_lost, 1);
    }
    freeReplyObject(r);
    return st;
}

/* Wait (c->lock held) for a heartbeat round trip that includes l, and for
 * its callback if one is running on another thread -- but never from
 * inside a callback: two callbacks releasing each other's leases would wait
 * for each other.  The last one out frees the lease (fence_release(), or
 * the callback's end in state.c). */
static void release_wait_locked(fence_lease *l)
{
    pthread_t self = pthread_self();
    for (;;) {
        int own_cb = l->cb_running && pthread_equal(l->cb_thread, self);
        int wait_cb = l->cb_running && !own_cb && fence__in_callback() == 0;
        if (!wait_cb && !l->in_pass) {
            break;
        }
        pthread_cond_wait(&l->c->cond, &l->c->lock);
    }
}

fence_status fence_release(fence_lease *l)
{
    if (l == NULL) {
        return fence__fail(NULL, FENCE_EINVAL, "fence_release: lease is NULL");
    }
    fence_client *c = l->c;
    pthread_mutex_lock(&c->lock);
    l->released = 1; /* a callback not yet started will not run */
    release_wait_locked(l);
    fence__unlink_locked(l);
    int was_held = l->state == FENCE__HELD;
    int lost_reason = was_held ? 0 : l->lost_reason;
    if (was_held) {
        /* No callback for a lease its user releases; stop renewing it. */
        l->state = FENCE__LOST;
        atomic_fetch_sub(&c->m.leases_held, 1);
    }
    int offline = c->offline;
    pthread_mutex_unlock(&c->lock);

    fence_status st;
    /* A lease lost because Redis went unanswered may still own its key:
     * compare-and-delete is always safe, and frees it for the waiters. */
    if ((was_held || lost_reason == FENCE_ECONN) && !offline) {
        st = release_in_redis(l, was_held);
    } else if (!was_held) {
        st = fence__fail(c, FENCE_LOST, "lease '%s' had already been lost", l->name);
    } else {
        st = fence__fail(c, FENCE_ECONN, "%s: not contacted while closing (unreachable); "
                         "'%s' expires by its TTL", c->rd.url.display, l->name);
    }
    pthread_mutex_lock(&c->lock);
    int free_now = !l->cb_running; /* else its callback's end frees it */
    if (!free_now) {
        l->free_after_cb = 1;
    }
    pthread_mutex_unlock(&c->lock);
    if (free_now) {
        fence__lease_free(l);
    }
    return st;
}

/* ---- what a lease tells ------------------------------------------------------ */

uint64_t fence_lease_token(const fence_lease *l)
{
    if (l == NULL) {
        return 0;
    }
    pthread_mutex_lock(&l->c->lock);
    uint64_t t = l->token;
    pthread_mutex_unlock(&l->c->lock);
    return t;
}

int64_t fence_lease_clock_behind_us(const fence_lease *l)
{
    if (l == NULL) {
        return 0;
    }
    pthread_mutex_lock(&l->c->lock);
    int64_t b = l->clock_behind_us;
    pthread_mutex_unlock(&l->c->lock);
    return b;
}

const char *fence_lease_holder(const fence_lease *l)
{
    return l != NULL ? l->holder : "";
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

/* ---- the same pieces, for the asynchronous API (lease_async.h) ---------------- */

fence_status fence__lease_new(fence_client *c, const char *name, const fence_lease_options *o,
                              char *owner, char **counter, fence_lease **out)
{
    return lease_new(c, name, o, owner, counter, out);
}

fence_status fence__acquire_reply(fence_client *c, const char *name, void *r, uint64_t *token,
                                  int64_t *behind_us, int64_t *pttl_ms)
{
    return acquire_reply(c, name, r, token, behind_us, pttl_ms);
}

void fence__lease_publish(fence_lease *l, const char *owner, uint64_t token, int64_t sent_us)
{
    publish(l, owner, token, sent_us);
}

int fence__release_args(const fence_lease *l, const char **args, int *nkeys)
{
    return release_args(l, args, nkeys);
}
