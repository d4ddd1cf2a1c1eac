/* state.c -- the one state machine of a lease, which the blocking calls,
 * the heartbeat and the asynchronous API all drive: created (an owner id),
 * granted (held, on its client's list), renewed or not (one rule), lost
 * (one sweep, one transition, callbacks queued without allocating), released
 * (begin / outcome / end), reissued (claim / outcome); and the checks every
 * call makes, validity and scheduling. */
#include "lease_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* ---- checks ----------------------------------------------------------------- */

fence_status fence__check_client(const fence_client *c, const char *fn)
{
    if (c == NULL) {
        return fence__fail(NULL, FENCE_EINVAL, "%s: client is NULL", fn);
    }
    if (!c->ready) {
        return fence__fail(c, FENCE_ESTATE, "%s: this client failed to open (bad options); "
                           "close it", fn);
    }
    return FENCE_OK;
}

fence_status fence__check_name(const fence_client *c, const char *name)
{
    size_t bad = SIZE_MAX;
    const char *why = fence__name_problem(name, FENCE__NAME_PRINTABLE, &bad);
    if (why == NULL) {
        return c != NULL && c->ops->check_name != NULL ? c->ops->check_name(c->iss, name)
                                                      : FENCE_OK;
    }
    if (bad != SIZE_MAX) {
        return fence__fail(c, FENCE_EINVAL, "lease name %s (byte %zu)", why, bad);
    }
    return fence__fail(c, FENCE_EINVAL, "lease name %s", why);
}

/* NULL or "" (none), or 1..FENCE_HOLDER_INFO_MAX bytes of printable ASCII. */
static fence_status check_holder_info(fence_client *c, const char *info)
{
    if (info == NULL) {
        return FENCE_OK;
    }
    size_t n = strnlen(info, FENCE_HOLDER_INFO_MAX + 1);
    if (n > FENCE_HOLDER_INFO_MAX) {
        return fence__fail(c, FENCE_EINVAL, "holder_info is longer than %d bytes",
                           FENCE_HOLDER_INFO_MAX);
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)info[i];
        if (ch < 0x20 || ch > 0x7e) {
            return fence__fail(c, FENCE_EINVAL, "holder_info: byte %zu is 0x%02x; only "
                               "printable ASCII (0x20-0x7e) is allowed, no control "
                               "characters", i, ch);
        }
    }
    return FENCE_OK;
}

fence_status fence__check_lease_opts(fence_client *c, const fence_lease_options *o)
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
    return check_holder_info(c, o->holder_info);
}

/* ---- validity and scheduling ------------------------------------------------- */

int64_t fence__margin_us(int64_t ttl_ms)
{
    /* 1% of the TTL for clock drift between us and the server, plus 2 ms. */
    return ttl_ms * 10 + 2000;
}

int64_t fence__valid_until(const fence_lease *l, int64_t sent_us)
{
    return sent_us + l->il.ttl_ms * 1000 - fence__margin_us(l->il.ttl_ms);
}

/* How soon to retry a renewal that went unanswered: a quarter of the
 * renewal period, 10 ms to 250 ms. */
static int64_t retry_us(const fence_lease *l)
{
    int64_t r = l->renew_every_ms * 1000 / 4;
    return r < 10000 ? 10000 : r > 250000 ? 250000 : r;
}

int64_t fence__renew_at(const fence_lease *l)
{
    /* Within a quarter period of its renewal a lease rides along with a
     * pass: renewing a little early costs nothing and keeps passes few.
     * A retry after an unanswered renewal waits its whole delay. */
    return l->retrying ? l->next_renew_us : l->next_renew_us - l->renew_every_ms * 250;
}

int fence__due_locked(const fence_lease *l, int64_t now)
{
    /* Not one whose validity already ran out: it is lost (the sweep says
     * so), and renewing it would only delay that. */
    return l->state == FENCE__HELD && !l->no_heartbeat && !l->in_pass &&
           l->valid_until_us > now && fence__renew_at(l) <= now;
}

int64_t fence__look_at_locked(const fence_lease *l)
{
    if (l->state != FENCE__HELD || l->no_heartbeat) {
        return INT64_MAX;
    }
    int64_t t = l->in_pass ? l->valid_until_us : fence__renew_at(l);
    return l->valid_until_us < t ? l->valid_until_us : t;
}

/* ---- owner ids --------------------------------------------------------------- */

/* Owner ids: FENCE_OWNER_BYTES (128 bits) from getrandom(), the OS CSPRNG,
 * fetched 32 ids at a time into a pool (a syscall per acquire cost ~1.3 us
 * of a ~100 us cycle: docs/benchmarks.md).  Never a weaker fallback: if the
 * kernel cannot give randomness, acquiring fails (fail closed).  A fork()
 * empties the pool in the child (pthread_atfork), so parent and child never
 * hand out the same bytes; bytes handed out are wiped from the pool. */
#define POOL_IDS 32
static struct {
    pthread_mutex_t mu;
    unsigned char buf[POOL_IDS * FENCE_OWNER_BYTES];
    size_t left; /* unused bytes at the end of buf */
} pool = {PTHREAD_MUTEX_INITIALIZER, {0}, 0};
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static void pool_prepare(void)
{
    pthread_mutex_lock(&pool.mu);
}

static void pool_parent(void)
{
    pthread_mutex_unlock(&pool.mu);
}

static void pool_child(void)
{
    memset(pool.buf, 0, sizeof pool.buf);
    pool.left = 0;
    pthread_mutex_init(&pool.mu, NULL);
}

static void pool_init(void)
{
    pthread_atfork(pool_prepare, pool_parent, pool_child);
}

/* The next owner id as lowercase hex into hex (2 * FENCE_OWNER_BYTES + 1). */
static int owner_id(char *hex)
{
    pthread_once(&pool_once, pool_init);
    unsigned char raw[FENCE_OWNER_BYTES];
    pthread_mutex_lock(&pool.mu);
    while (pool.left < sizeof raw) {
        ssize_t n = getrandom(pool.buf, sizeof pool.buf, 0);
        if (n == (ssize_t)sizeof pool.buf) {
            pool.left = sizeof pool.buf;
        } else if (n >= 0 || errno != EINTR) {
            pthread_mutex_unlock(&pool.mu);
            return -1; /* a short read (cannot happen for 512 bytes) counts as none */
        }
    }
    unsigned char *at = pool.buf + sizeof pool.buf - pool.left;
    memcpy(raw, at, sizeof raw);
    memset(at, 0, sizeof raw);
    pool.left -= sizeof raw;
    pthread_mutex_unlock(&pool.mu);
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof raw; i++) {
        hex[2 * i] = digits[raw[i] >> 4];
        hex[2 * i + 1] = digits[raw[i] & 15];
    }
    hex[2 * sizeof raw] = '\0';
    return 0;
}

/* ---- created, granted -------------------------------------------------------- */

fence_status fence__lease_new(fence_client *c, const char *name, const fence_lease_options *o,
                              fence_lease **out)
{
    *out = NULL;
    size_t namelen = strlen(name);
    size_t room = c->ops->lease_room(c->iss, namelen);
    size_t at = (sizeof(fence_lease) + namelen + 1 + 15) & ~(size_t)15;
    fence_lease *l = calloc(1, at + room);
    if (l == NULL) {
        return fence__fail(c, FENCE_ENOMEM, "out of memory");
    }
    char *nm = (char *)(l + 1);
    memcpy(nm, name, namelen + 1);
    l->c = c;
    l->il.name = nm;
    l->il.namelen = namelen;
    l->il.ttl_ms = o->ttl_ms;
    l->il.has_info = o->holder_info != NULL && o->holder_info[0] != '\0';
    l->il.room = room > 0 ? (char *)l + at : NULL;
    if (owner_id(l->il.holder) != 0) {
        free(l);
        return fence__fail(c, FENCE_ESYS, "getrandom() failed: no owner id");
    }
    c->ops->lease_init(c->iss, &l->il);
    l->renew_every_ms = o->renew_every_ms > 0 ? o->renew_every_ms : o->ttl_ms / 3;
    if (l->renew_every_ms < 1) {
        l->renew_every_ms = 1;
    }
    l->no_heartbeat = o->no_heartbeat;
    l->on_lost = o->on_lost;
    l->user = o->user;
    *out = l;
    return FENCE_OK;
}

void fence__lease_free(fence_lease *l)
{
    free(l);
}

/* "<holder>:<token>" into l's owner value. */
static void set_token(fence_lease *l, uint64_t token)
{
    l->il.token = token;
    memcpy(l->il.value, l->il.holder, FENCE_HOLDER_LEN);
    l->il.value[FENCE_HOLDER_LEN] = ':';
    fence__u64_text(token, l->il.value + FENCE_HOLDER_LEN + 1);
}

fence_status fence__acquired(fence_lease *l, fence_status st, const fence__grant *g,
                             int64_t sent_us)
{
    fence_client *c = l->c;
    if (st == FENCE_ECLOCK || (st == FENCE_OK && g->behind_us > 0)) {
        fence__metrics_behind(&c->m, g->behind_us);
    }
    if (st == FENCE_OK && !g->granted) {
        atomic_fetch_add(&c->m.acquire_contended, 1);
        st = fence__fail(c, FENCE_BUSY, "lease '%s' is held by another owner", l->il.name);
    }
    if (st != FENCE_OK) {
        fence__lease_free(l);
        return st;
    }
    set_token(l, g->token);
    l->clock_behind_us = g->behind_us;
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
    /* Wake the heartbeat thread only if it would otherwise sleep past this
     * lease's first renewal: most acquisitions then cost no context switch. */
    if (!l->no_heartbeat && first_renewal < c->hb_wake_us) {
        pthread_cond_broadcast(&c->cond);
    }
    pthread_mutex_unlock(&c->lock);
    atomic_fetch_add(&c->m.lease_acquired, 1);
    atomic_fetch_add(&c->m.leases_held, 1);
    return FENCE_OK;
}

/* ---- lost -------------------------------------------------------------------- */

/* How many lost callbacks this thread is inside (fence_release() must not
 * wait for another thread's callback from inside one: two callbacks
 * releasing each other's leases would wait for each other forever). */
static _Thread_local int tl_in_callback;

int fence__in_callback(void)
{
    return tl_in_callback;
}

int fence__lose_locked(fence_lease *l, int reason, fence__lostq *q)
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
        l->lost_next = NULL;
        if (q->tail != NULL) {
            q->tail->lost_next = l;
        } else {
            q->head = l;
        }
        q->tail = l;
    }
    return 1;
}

/* Fire l's claimed callback (no lock held).  Frees l afterwards if it was
 * released from inside. */
static void fire_one(fence_lease *l)
{
    fence_client *c = l->c;
    int reason = l->lost_reason; /* written once, before l was queued */
    pthread_mutex_lock(&c->lock);
    /* Released between being marked lost and now (from another callback):
     * then its callback must not run. */
    int skip = l->released;
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
        fence__lease_free(l);
    }
}

void fence__fire_lost(fence__lostq *q)
{
    fence_lease *l = q->head;
    q->head = q->tail = NULL;
    while (l != NULL) {
        fence_lease *next = l->lost_next; /* read before the callback may free l */
        fire_one(l);
        l = next;
    }
}

int fence__lose_expired_locked(fence_lease *l, int64_t now, int unreachable, fence__lostq *q)
{
    if (l->state != FENCE__HELD || l->valid_until_us > now) {
        return 0;
    }
    int why = l->retrying || l->in_pass || unreachable ? FENCE_ECONN : FENCE_LOST;
    return fence__lose_locked(l, why, q);
}

void fence__sweep_locked(fence_client *c, int64_t now, int unreachable, fence__lostq *q)
{
    for (fence_lease *l = c->leases; l != NULL; l = l->next) {
        if (!l->no_heartbeat) {
            fence__lose_expired_locked(l, now, unreachable, q);
        }
    }
}

/* ---- renewed ----------------------------------------------------------------- */

int fence__renewed_locked(fence_lease *l, int res, int64_t sent_us, int64_t now,
                          fence__lostq *q)
{
    l->in_pass = 0;
    if (l->state != FENCE__HELD) {
        return 0; /* lost meanwhile (the sweep, or another caller, said so) */
    }
    if (res == 1 && l->valid_until_us > now) {
        int64_t until = fence__valid_until(l, sent_us);
        if (until > l->valid_until_us) {
            l->valid_until_us = until;
        }
        l->next_renew_us = sent_us + l->renew_every_ms * 1000;
        l->retrying = 0;
        atomic_fetch_add(&l->c->m.renew_ok, 1);
        return 1;
    }
    atomic_fetch_add(&l->c->m.renew_failed, 1);
    if (res == 0) {
        fence__lose_locked(l, FENCE_LOST, q); /* refused: expired or taken */
    } else if (l->valid_until_us <= now) {
        fence__lose_locked(l, FENCE_ECONN, q); /* answered too late, or not at all */
    } else {
        l->retrying = 1;
        l->next_renew_us = now + retry_us(l);
        if (l->next_renew_us > l->valid_until_us) {
            l->next_renew_us = l->valid_until_us;
        }
    }
    return 0;
}

/* ---- released ---------------------------------------------------------------- */

void fence__release_begin(fence_lease *l, int wait_pass, int *was_held, int *ask)
{
    fence_client *c = l->c;
    pthread_t self = pthread_self();
    pthread_mutex_lock(&c->lock);
    l->released = 1; /* a callback not yet started will not run */
    /* Wait for a round trip that includes l, and for its callback if one
     * runs on another thread -- but never from inside a callback: two
     * callbacks releasing each other's leases would wait for each other.
     * The last one out frees the lease (fence__release_end, or the
     * callback's end). */
    for (;;) {
        int own_cb = l->cb_running && pthread_equal(l->cb_thread, self);
        int wait_cb = l->cb_running && !own_cb && fence__in_callback() == 0;
        if (!wait_cb && !(wait_pass && l->in_pass)) {
            break;
        }
        pthread_cond_wait(&c->cond, &c->lock);
    }
    if (l->prev != NULL) {
        l->prev->next = l->next;
    } else if (c->leases == l) {
        c->leases = l->next;
    }
    if (l->next != NULL) {
        l->next->prev = l->prev;
    }
    l->prev = l->next = NULL;
    *was_held = l->state == FENCE__HELD;
    int lost_reason = *was_held ? 0 : l->lost_reason;
    if (*was_held) {
        /* No callback for a lease its user releases; stop renewing it. */
        l->state = FENCE__LOST;
        atomic_fetch_sub(&c->m.leases_held, 1);
    }
    /* A lease lost because the issuer went unanswered may still own its
     * key: compare-and-delete is always safe, and frees it for waiters. */
    *ask = (*was_held || lost_reason == FENCE_ECONN) && !c->offline;
    pthread_mutex_unlock(&c->lock);
}

fence_status fence__released(fence_lease *l, int was_held, int asked, fence_status st,
                             int deleted, int retried)
{
    fence_client *c = l->c;
    const char *url = c->ops->url(c->iss);
    if (!asked && !was_held) {
        return fence__fail(c, FENCE_LOST, "lease '%s' had already been lost", l->il.name);
    }
    if (!asked) {
        return fence__fail(c, FENCE_ECONN, "%s: not contacted while closing (unreachable); "
                           "'%s' expires by its TTL", url, l->il.name);
    }
    if (st != FENCE_OK) {
        return st; /* the issuer's message: it could not be told (the key expires) */
    }
    if (!was_held) {
        return fence__fail(c, FENCE_LOST, "lease '%s' had already been lost", l->il.name);
    }
    if (deleted) {
        atomic_fetch_add(&c->m.lease_released, 1);
        return FENCE_OK;
    }
    if (retried) {
        /* The first attempt may have deleted it before its reply was lost:
         * the lease is not held, but whether it was released or had been
         * lost is unknown. */
        return fence__fail(c, FENCE_ECONN, "%s: the connection failed during the release of "
                           "'%s'; it is no longer held (released or expired)", url, l->il.name);
    }
    atomic_fetch_add(&c->m.lease_lost, 1);
    return fence__fail(c, FENCE_LOST, "lease '%s' was lost before release; the current "
                       "owner's key was left alone", l->il.name);
}

void fence__release_end(fence_lease *l)
{
    fence_client *c = l->c;
    pthread_mutex_lock(&c->lock);
    int free_now = !l->cb_running; /* else its callback's end frees it */
    if (!free_now) {
        l->free_after_cb = 1;
    }
    pthread_mutex_unlock(&c->lock);
    if (free_now) {
        fence__lease_free(l);
    }
}

/* ---- reissued ---------------------------------------------------------------- */

fence_status fence__reissue_claim(fence_lease *l)
{
    fence_client *c = l->c;
    pthread_mutex_lock(&c->lock);
    while (l->in_pass) {
        pthread_cond_wait(&c->cond, &c->lock);
    }
    int held = l->state == FENCE__HELD && l->valid_until_us > fence__now_us();
    if (held) {
        l->in_pass = 1; /* the heartbeat leaves its owner value alone meanwhile */
    }
    pthread_mutex_unlock(&c->lock);
    return held ? FENCE_OK : fence__fail(c, FENCE_LOST, "lease '%s' was lost", l->il.name);
}

fence_status fence__reissued(fence_lease *l, fence_status st, const fence__grant *g)
{
    fence_client *c = l->c;
    if (st == FENCE_ECLOCK || (st == FENCE_OK && g->behind_us > 0)) {
        fence__metrics_behind(&c->m, g->behind_us);
    }
    fence__lostq lost = FENCE__LOSTQ_INIT;
    int gone = st == FENCE_OK && !g->granted;
    pthread_mutex_lock(&c->lock);
    l->in_pass = 0;
    if (st == FENCE_OK && g->granted) {
        set_token(l, g->token);
        l->clock_behind_us = g->behind_us;
    } else if (gone) {
        fence__lose_locked(l, FENCE_LOST, &lost);
    }
    pthread_cond_broadcast(&c->cond); /* in_pass cleared */
    pthread_mutex_unlock(&c->lock);
    if (gone) {
        char msg[FENCE_NAME_MAX + 96];
        snprintf(msg, sizeof msg, "lease '%s' was lost: the owner key expired or holds "
                 "another owner", l->il.name);
        fence__fire_lost(&lost); /* may free l */
        return fence__fail(c, FENCE_LOST, "%s", msg);
    }
    if (st == FENCE_OK) {
        atomic_fetch_add(&c->m.token_regressions, 1);
    }
    return st;
}
