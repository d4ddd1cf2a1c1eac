/* heartbeat.c -- renewing a client's leases: one thread per client (or the
 * caller's own loop, in manual mode), one connection of its own, and one
 * pipelined round trip per pass however many leases are due. */
#include "lease_internal.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int due(const fence_lease *l, int64_t now)
{
    /* Not one whose validity already ran out: it is lost (the sweep in
     * the pass says so), and renewing it would only delay that. */
    return l->state == FENCE__HELD && !l->no_heartbeat && !l->in_pass &&
           l->valid_until_us > now && fence__renew_at(l) <= now;
}

/* When the heartbeat must look next (c->lock held): the earliest renewal
 * or end of validity among the leases it renews; INT64_MAX for none. */
static int64_t next_look_locked(const fence_client *c)
{
    int64_t next = INT64_MAX;
    for (const fence_lease *l = c->leases; l != NULL; l = l->next) {
        if (l->state == FENCE__HELD && !l->no_heartbeat) {
            int64_t t = fence__renew_at(l);
            if (l->valid_until_us < t) {
                t = l->valid_until_us;
            }
            if (t < next) {
                next = t;
            }
        }
    }
    return next;
}

/* The leases of one pass: those due, and what Redis said of each. */
typedef struct {
    fence__leasev due;
    int *results;     /* per due lease: 1 renewed, 0 refused, -1 no answer */
    int64_t deadline; /* the earliest validity of every lease the heartbeat keeps */
    int64_t sent;     /* when the round trip was sent */
} pass;

/* The leases of batch b, in ls[lo .. lo + *k). */
static size_t batch_range(const fence_client *c, size_t n, size_t b, size_t *k)
{
    size_t per = (size_t)c->renew_batch, lo = b * per;
    *k = n - lo < per ? n - lo : per;
    return lo;
}

/* Append one EVALSHA (or EVAL) renew_batch per batch, none read yet.
 * argv, lens and ttl have room for one batch. */
static fence_status send_batches(fence_client *c, fence_lease **ls, size_t n, int use_sha,
                                 const char **argv, size_t *lens, char (*ttl)[24])
{
    size_t per = (size_t)c->renew_batch;
    for (size_t b = 0; b < (n + per - 1) / per; b++) {
        size_t k, lo = batch_range(c, n, b, &k);
        char nk[16];
        snprintf(nk, sizeof nk, "%zu", k);
        argv[0] = use_sha ? "EVALSHA" : "EVAL";
        argv[1] = use_sha ? c->rd.sha[FENCE__RENEW_BATCH] : c->rd.script[FENCE__RENEW_BATCH];
        lens[1] = use_sha ? 40 : c->rd.script_len[FENCE__RENEW_BATCH];
        argv[2] = nk;
        for (size_t i = 0; i < k; i++) {
            fence_lease *l = ls[lo + i];
            fence__renew_ttl_arg(l, ttl[i], sizeof ttl[i]);
            argv[3 + i] = l->owner_key;
            argv[3 + k + 2 * i] = l->value;
            argv[3 + k + 2 * i + 1] = ttl[i];
        }
        size_t argc = 3 + 3 * k;
        for (size_t i = 0; i < argc; i++) {
            if (i != 1) {
                lens[i] = strlen(argv[i]);
            }
        }
        if (fence__tr_append(c->hb, (int)argc, argv, lens) != 0) {
            /* The batches already appended must never be sent: their
             * replies would be taken for later ones. */
            fence__conn_drop(&c->hb);
            return fence__fail(c, FENCE_ENOMEM, "out of memory");
        }
    }
    return FENCE_OK;
}

/* Read one reply per batch into results; *noscript when a batch was
 * answered NOSCRIPT. */
static fence_status read_replies(fence_client *c, size_t n, int *results, int *noscript)
{
    size_t per = (size_t)c->renew_batch;
    fence_status st = FENCE_OK;
    for (size_t b = 0; b < (n + per - 1) / per; b++) {
        size_t k, lo = batch_range(c, n, b, &k);
        redisReply *r = NULL;
        if (fence__tr_reply(c->hb, (void **)&r) != 0) {
            st = fence__fail(c, FENCE_ECONN, "%s: heartbeat connection failed: %s",
                             c->rd.url.display, c->hb->errstr);
            fence__conn_drop(&c->hb);
            return st;
        }
        if (r->type == REDIS_REPLY_ARRAY && r->elements == k) {
            for (size_t i = 0; i < k; i++) {
                redisReply *e = r->element[i];
                results[lo + i] = e->type == REDIS_REPLY_INTEGER && e->integer == 1;
            }
        } else if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
            *noscript = 1;
        } else {
            st = fence__fail(c, FENCE_EPROTO, "%s: heartbeat: unexpected reply: %.200s",
                             c->rd.url.display, r->type == REDIS_REPLY_ERROR ? r->str : "");
        }
        freeReplyObject(r);
    }
    return st;
}

/* Send every batch, all appended before any reply is read: one round
 * trip.  results[i] = 1 renewed, 0 lost, -1 no answer.  Returns FENCE_OK
 * or the connection error; *noscript when the caller must resend with EVAL. */
static fence_status renew_round_trip(fence_client *c, fence_lease **ls, size_t n, int *results,
                                     int use_sha, int *noscript)
{
    size_t per = (size_t)c->renew_batch;
    const char **argv = malloc((3 + 3 * per) * sizeof *argv);
    size_t *lens = malloc((3 + 3 * per) * sizeof *lens);
    char(*ttl)[24] = malloc(per * sizeof *ttl);
    fence_status st = FENCE_OK;
    *noscript = 0;
    if (argv == NULL || lens == NULL || ttl == NULL) {
        st = fence__fail(c, FENCE_ENOMEM, "out of memory");
    } else {
        for (size_t i = 0; i < n; i++) {
            results[i] = -1;
        }
        st = send_batches(c, ls, n, use_sha, argv, lens, ttl);
    }
    if (st == FENCE_OK) {
        st = read_replies(c, n, results, noscript);
    }
    if (st != FENCE_OK) {
        *noscript = 0;
    }
    free(argv);
    free(lens);
    free(ttl);
    return st;
}

/* Pick the due leases (marking them in_pass) and the earliest validity of
 * every lease the heartbeat keeps, due now or not: the pass must not block
 * past it, or that lease would be reported lost late.  (Those already past
 * it are marked lost by the sweep.)  c->lock held. */
static void collect_due_locked(fence_client *c, int64_t now, pass *p)
{
    p->deadline = INT64_MAX;
    for (fence_lease *l = c->leases; l != NULL; l = l->next) {
        if (l->state == FENCE__HELD && !l->no_heartbeat && l->valid_until_us > now &&
            l->valid_until_us < p->deadline) {
            p->deadline = l->valid_until_us;
        }
        if (due(l, now) && fence__leasev_push(&p->due, l) == 0) { /* no memory: renew fewer */
            l->in_pass = 1;
        }
    }
}

/* Renew p's due leases in one round trip, never blocking past the earliest
 * local deadline: a lease whose validity runs out while we wait must be
 * reported lost on time.  Fills p->results and p->sent. */
static fence_status renew_due(fence_client *c, pass *p, int64_t now)
{
    size_t n = p->due.n;
    p->results = malloc(n * sizeof *p->results);
    int64_t bound_ms = (p->deadline - now) / 1000;
    if (bound_ms < 1) {
        bound_ms = 1;
    }
    if (p->results == NULL) {
        return fence__fail(c, FENCE_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        p->results[i] = -1; /* no answer, until Redis gives one */
    }
    if (c->rd.cl != NULL) {
        fence_status st = fence__hb_cluster(c, p->due.v, n, p->results, bound_ms, &p->sent);
        if (st == FENCE_OK) {
            fence__metrics_latency(&c->m, fence__now_us() - p->sent);
        }
        return st;
    }
    fence_status st = fence__conn_ensure(&c->rd, &c->hb, &c->hb_ever, bound_ms);
    if (st != FENCE_OK) {
        return st;
    }
    fence__conn_timeout(c->hb, bound_ms < c->rd.io_timeout_ms ? bound_ms : c->rd.io_timeout_ms);
    p->sent = fence__now_us();
    int use_sha = c->rd.sha[FENCE__RENEW_BATCH][0] != '\0';
    int noscript = 0;
    st = renew_round_trip(c, p->due.v, n, p->results, use_sha, &noscript);
    if (noscript) {
        st = renew_round_trip(c, p->due.v, n, p->results, 0, &noscript);
    }
    if (st == FENCE_OK) {
        fence__metrics_latency(&c->m, fence__now_us() - p->sent);
    }
    return st;
}

/* Apply what Redis said of each due lease (c->lock held); the leases lost
 * go on lost. */
static void apply_results_locked(fence_client *c, pass *p, int64_t now, fence__leasev *lost)
{
    for (size_t i = 0; i < p->due.n; i++) {
        fence_lease *l = p->due.v[i];
        int res = p->results != NULL ? p->results[i] : -1;
        l->in_pass = 0;
        if (l->state != FENCE__HELD) {
            continue;
        }
        if (res == 1 && l->valid_until_us > now) {
            fence__renewed_locked(l, p->sent);
            continue;
        }
        atomic_fetch_add(&c->m.renew_failed, 1);
        if (res == 1) {
            /* Renewed, but the answer came after its validity had run
             * out: once lost, always lost (the sweep says so). */
            l->retrying = 1;
        } else if (res == 0) {
            fence__lose_locked(l, FENCE_LOST, lost); /* renewal refused */
        } else {
            l->retrying = 1;
            l->next_renew_us = now + fence__retry_us(l);
            if (l->next_renew_us > l->valid_until_us) {
                l->next_renew_us = l->valid_until_us;
            }
        }
    }
}

/* Any lease whose local validity ran out (Redis unreachable for too long)
 * is lost, renewal or not (c->lock held).  pass_st: how this pass went. */
static void sweep_expired_locked(fence_client *c, int64_t now, fence_status pass_st,
                                 fence__leasev *lost)
{
    for (fence_lease *l = c->leases; l != NULL; l = l->next) {
        if (l->state == FENCE__HELD && !l->no_heartbeat && !l->in_pass &&
            l->valid_until_us <= now) {
            /* Unanswered renewals, or this pass could not reach Redis:
             * FENCE_ECONN.  None tried (a manual loop that did not run
             * in time): it simply expired, FENCE_LOST. */
            int why = l->retrying || pass_st != FENCE_OK ? FENCE_ECONN : FENCE_LOST;
            fence__lose_locked(l, why, lost);
        }
    }
}

fence_status fence__heartbeat_pass(fence_client *c, int64_t *next_ms)
{
    pass p = {.results = NULL, .sent = 0};
    fence__leasev_init(&p.due);
    fence_status st = FENCE_OK;
    pthread_mutex_lock(&c->hb_lock);

    pthread_mutex_lock(&c->lock);
    int64_t now = fence__now_us();
    collect_due_locked(c, now, &p);
    pthread_mutex_unlock(&c->lock);

    if (p.due.n > 0) {
        st = renew_due(c, &p, now);
    }

    fence__leasev lost;
    fence__leasev_init(&lost);
    pthread_mutex_lock(&c->lock);
    now = fence__now_us();
    apply_results_locked(c, &p, now, &lost);
    sweep_expired_locked(c, now, st, &lost);
    int64_t next = next_look_locked(c);
    pthread_cond_broadcast(&c->cond); /* in_pass cleared */
    pthread_mutex_unlock(&c->lock);
    pthread_mutex_unlock(&c->hb_lock);

    fence__fire_lost(&lost); /* each may free its lease */
    if (next_ms != NULL) {
        *next_ms = next == INT64_MAX ? -1 : (next - now > 0 ? (next - now + 999) / 1000 : 0);
    }
    fence__leasev_free(&p.due);
    free(p.results);
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
    return fence__heartbeat_pass(c, next_ms);
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
        fence__heartbeat_pass(c, NULL);
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

void fence__heartbeat_kick(fence_client *c, int64_t due_us)
{
    pthread_mutex_lock(&c->lock);
    /* Wake the thread only if it would otherwise sleep past this lease's
     * first renewal: most acquisitions then cost no context switch. */
    if (due_us < c->hb_wake_us) {
        pthread_cond_broadcast(&c->cond);
    }
    pthread_mutex_unlock(&c->lock);
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
