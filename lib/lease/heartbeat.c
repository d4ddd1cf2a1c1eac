/* heartbeat.c -- renewing a client's leases: one thread per client (or the
 * caller's own loop, in manual mode), and one issuer call per pass however
 * many leases are due (the issuer makes it one round trip where its server
 * allows: issuer.h).  What each answer means is state.c's one rule. */
#include "lease_internal.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* When the heartbeat must look next (c->lock held): the earliest renewal
 * or end of validity among the leases it renews; INT64_MAX for none. */
static int64_t next_look_locked(const fence_client *c)
{
    int64_t next = INT64_MAX;
    for (const fence_lease *l = c->leases; l != NULL; l = l->next) {
        int64_t t = fence__look_at_locked(l);
        if (t < next) {
            next = t;
        }
    }
    return next;
}

/* The leases of one pass, and what the issuer said of each. */
enum { INLINE_DUE = 8 };
typedef struct {
    size_t n, cap;
    fence_lease **l;
    fence__ilease **il;
    int *res;
    void *block;      /* l, il and res when more than INLINE_DUE are due */
    fence_lease *l0[INLINE_DUE];
    fence__ilease *il0[INLINE_DUE];
    int res0[INLINE_DUE];
    int64_t deadline; /* the earliest validity of every lease the heartbeat keeps */
} pass;

/* Room for n due leases; without memory, the inline room (renew fewer: the
 * others are due again at the next pass). */
static void pass_room(pass *p, size_t n)
{
    p->l = p->l0;
    p->il = p->il0;
    p->res = p->res0;
    p->cap = INLINE_DUE;
    if (n > INLINE_DUE) {
        p->block = malloc(n * (sizeof *p->l + sizeof *p->il + sizeof *p->res));
        if (p->block != NULL) {
            p->l = p->block;
            p->il = (fence__ilease **)(p->l + n);
            p->res = (int *)(p->il + n);
            p->cap = n;
        }
    }
}

/* Pick the due leases (marking them in_pass) and the earliest validity of
 * every lease the heartbeat keeps, due now or not: the pass must not block
 * past it, or that lease would be reported lost late.  c->lock held. */
static void collect_due_locked(fence_client *c, int64_t now, pass *p)
{
    size_t n = 0;
    p->deadline = INT64_MAX;
    for (fence_lease *l = c->leases; l != NULL; l = l->next) {
        n += fence__due_locked(l, now);
        if (l->state == FENCE__HELD && !l->no_heartbeat && l->valid_until_us > now &&
            l->valid_until_us < p->deadline) {
            p->deadline = l->valid_until_us;
        }
    }
    pass_room(p, n);
    p->n = 0;
    for (fence_lease *l = c->leases; l != NULL && p->n < p->cap; l = l->next) {
        if (fence__due_locked(l, now)) {
            l->in_pass = 1;
            p->l[p->n] = l;
            p->il[p->n] = &l->il;
            p->res[p->n] = -1; /* no answer, until the issuer gives one */
            p->n++;
        }
    }
}

static fence_status heartbeat_pass(fence_client *c, int64_t *next_ms)
{
    pass p = {.block = NULL};
    fence_status st = FENCE_OK;
    pthread_mutex_lock(&c->hb_lock);

    pthread_mutex_lock(&c->lock);
    int64_t now = fence__now_us();
    collect_due_locked(c, now, &p);
    pthread_mutex_unlock(&c->lock);

    int64_t sent = now;
    if (p.n > 0) {
        st = c->ops->renew(c->iss, p.il, p.n, FENCE__CHAN_HEARTBEAT, p.deadline, p.res, &sent);
        if (st == FENCE_OK) {
            fence__metrics_latency(&c->m, fence__now_us() - sent);
        }
    }

    fence__lostq lost = FENCE__LOSTQ_INIT;
    pthread_mutex_lock(&c->lock);
    now = fence__now_us();
    for (size_t i = 0; i < p.n; i++) {
        fence__renewed_locked(p.l[i], p.res[i], sent, now, &lost);
    }
    fence__sweep_locked(c, now, st != FENCE_OK, &lost);
    int64_t next = next_look_locked(c);
    pthread_cond_broadcast(&c->cond); /* in_pass cleared */
    pthread_mutex_unlock(&c->lock);
    pthread_mutex_unlock(&c->hb_lock);

    fence__fire_lost(&lost); /* each may free its lease */
    if (next_ms != NULL) {
        *next_ms = next == INT64_MAX ? -1 : (next - now > 0 ? (next - now + 999) / 1000 : 0);
    }
    free(p.block);
    return st;
}

fence_status fence_heartbeat_run(fence_client *c, int64_t *next_ms)
{
    fence_status st = fence__check_client(c, "fence_heartbeat_run");
    if (st != FENCE_OK) {
        return st;
    }
    if (c->heartbeat_mode != FENCE_HEARTBEAT_MANUAL) {
        return fence__fail(c, FENCE_ESTATE,
                           "fence_heartbeat_run: this client renews on its own thread");
    }
    return heartbeat_pass(c, next_ms);
}

static void *hb_main(void *arg)
{
    fence_client *c = arg;
    pthread_mutex_lock(&c->lock);
    while (!c->stopping) {
        int64_t now = fence__now_us();
        int64_t next = next_look_locked(c);
        c->hb_wake_us = next;
        if (next == INT64_MAX) {
            pthread_cond_wait(&c->cond, &c->lock);
            continue;
        }
        if (next > now) {
            struct timespec ts = fence__timespec_ns(next * 1000);
            pthread_cond_timedwait(&c->cond, &c->lock, &ts);
            continue;
        }
        c->hb_wake_us = 0; /* busy: a kick now would change nothing */
        pthread_mutex_unlock(&c->lock);
        heartbeat_pass(c, NULL);
        pthread_mutex_lock(&c->lock);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

fence_status fence__heartbeat_start(fence_client *c)
{
    if (c->heartbeat_mode != FENCE_HEARTBEAT_THREAD) {
        return FENCE_OK;
    }
    fence_status st = FENCE_OK;
    pthread_mutex_lock(&c->lock);
    if (!c->hb_started && !c->stopping) {
        /* The thread runs with every signal blocked, so the application's
         * handlers (and sigwait/signalfd) never see it. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int e = pthread_create(&c->hb_thread, NULL, hb_main, c);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (e != 0) {
            st = fence__fail(c, FENCE_ESYS, "cannot start the heartbeat thread: %s",
                             strerror(e));
        } else {
            c->hb_started = 1;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

void fence__heartbeat_stop(fence_client *c)
{
    pthread_mutex_lock(&c->lock);
    c->stopping = 1;
    int started = c->hb_started;
    c->hb_started = 0;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    if (started) {
        pthread_join(c->hb_thread, NULL);
    }
}
