/* heartbeat.c -- renewing a client's leases: one thread per client (or the
 * caller's own loop, in manual mode), one connection of its own, and one
 * pipelined round trip per pass however many leases are due. */
#include "internal.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How soon to retry a renewal that could not reach Redis. */
static int64_t retry_us(const fence_lease *l)
{
    int64_t r = l->renew_every_ms * 1000 / 4;
    if (r < 10000) {
        r = 10000;
    }
    if (r > 250000) {
        r = 250000;
    }
    return r;
}

int64_t fence__renew_at(const fence_lease *l)
{
    /* Within a quarter period of its renewal a lease rides along with a
     * pass: renewing a little early costs nothing and keeps passes few.
     * A retry after an unanswered renewal waits its whole delay. */
    return l->retrying ? l->next_renew_us : l->next_renew_us - l->renew_every_ms * 250;
}

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

typedef struct {
    fence_lease **v;
    size_t n, cap;
} vec;

static int vec_push(vec *a, fence_lease *l)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        fence_lease **v = realloc(a->v, cap * sizeof *v);
        if (v == NULL) {
            return -1;
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = l;
    return 0;
}

/* Send one EVALSHA (or EVAL) renew_batch per batch, all appended before any
 * reply is read: one round trip.  results[i] = 1 renewed, 0 lost, -1 no
 * answer.  Returns FENCE_OK or the connection error. */
static int renew_round_trip(fence_client *c, fence_lease **ls, size_t n, int *results,
                            int use_sha)
{
    size_t per = (size_t)c->renew_batch;
    size_t nbatch = (n + per - 1) / per;
    const char **argv = malloc((3 + 3 * per) * sizeof *argv);
    size_t *lens = malloc((3 + 3 * per) * sizeof *lens);
    char(*ttl)[24] = malloc(per * sizeof *ttl);
    int st = FENCE_OK;
    if (argv == NULL || lens == NULL || ttl == NULL) {
        st = fence__fail(c, FENCE_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        results[i] = -1;
    }
    for (size_t b = 0; b < nbatch; b++) {
        size_t lo = b * per, k = n - lo < per ? n - lo : per;
        char nk[16];
        snprintf(nk, sizeof nk, "%zu", k);
        argv[0] = use_sha ? "EVALSHA" : "EVAL";
        argv[1] = use_sha ? c->sha[FENCE__RENEW_BATCH] : fence__script_body(FENCE__RENEW_BATCH);
        lens[1] = use_sha ? 40 : fence__script_len(FENCE__RENEW_BATCH);
        argv[2] = nk;
        for (size_t i = 0; i < k; i++) {
            fence_lease *l = ls[lo + i];
            snprintf(ttl[i], sizeof ttl[i], "%" PRId64, l->ttl_ms);
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
        if (redisAppendCommandArgv(c->hb, (int)argc, argv, lens) != REDIS_OK) {
            /* The batches already appended must never be sent: their
             * replies would be taken for later ones. */
            fence__conn_drop(&c->hb);
            st = fence__fail(c, FENCE_ENOMEM, "out of memory");
            goto out;
        }
    }
    int noscript = 0;
    for (size_t b = 0; b < nbatch; b++) {
        size_t lo = b * per, k = n - lo < per ? n - lo : per;
        redisReply *r = NULL;
        if (redisGetReply(c->hb, (void **)&r) != REDIS_OK) {
            st = fence__fail(c, FENCE_ECONN, "%s: heartbeat connection failed: %s",
                             c->url.display, c->hb->errstr);
            fence__conn_drop(&c->hb);
            goto out;
        }
        if (r->type == REDIS_REPLY_ARRAY && r->elements == k) {
            for (size_t i = 0; i < k; i++) {
                redisReply *e = r->element[i];
                results[lo + i] = e->type == REDIS_REPLY_INTEGER && e->integer == 1;
            }
        } else if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
            noscript = 1;
        } else {
            st = fence__fail(c, FENCE_EPROTO, "%s: heartbeat: unexpected reply: %.200s",
                             c->url.display, r->type == REDIS_REPLY_ERROR ? r->str : "");
        }
        freeReplyObject(r);
    }
    if (noscript && st == FENCE_OK) {
        st = -1; /* the caller resends with EVAL */
    }
out:
    free(argv);
    free(lens);
    free(ttl);
    return st;
}

int fence__heartbeat_pass(fence_client *c, int64_t *next_ms)
{
    vec due_v = {0};
    int st = FENCE_OK;
    pthread_mutex_lock(&c->hb_lock);

    pthread_mutex_lock(&c->lock);
    int64_t now = fence__now_us();
    /* The earliest validity of every lease the heartbeat keeps, due now or
     * not: the pass must not block past it, or that lease would be
     * reported lost late.  (Those already past it are marked lost below.) */
    int64_t deadline = INT64_MAX;
    for (fence_lease *l = c->leases; l != NULL; l = l->next) {
        if (l->state == FENCE__HELD && !l->no_heartbeat && l->valid_until_us > now &&
            l->valid_until_us < deadline) {
            deadline = l->valid_until_us;
        }
        if (due(l, now) && vec_push(&due_v, l) == 0) { /* out of memory: renew fewer */
            l->in_pass = 1;
        }
    }
    pthread_mutex_unlock(&c->lock);

    int *results = NULL;
    int64_t sent = 0, took = 0;
    if (due_v.n > 0) {
        results = malloc(due_v.n * sizeof *results);
        /* Never block past the earliest local deadline: a lease whose
         * validity runs out while we wait must be reported lost on time. */
        int64_t bound_ms = (deadline - now) / 1000;
        if (bound_ms < 1) {
            bound_ms = 1;
        }
        if (results == NULL) {
            st = fence__fail(c, FENCE_ENOMEM, "out of memory");
        } else {
            for (size_t i = 0; i < due_v.n; i++) {
                results[i] = -1; /* no answer, until Redis gives one */
            }
            st = fence__conn_ensure(c, &c->hb, &c->hb_ever, bound_ms);
        }
        if (st == FENCE_OK) {
            fence__conn_timeout(c->hb, bound_ms < c->io_timeout_ms ? bound_ms : c->io_timeout_ms);
            sent = fence__now_us();
            int use_sha = c->sha[FENCE__RENEW_BATCH][0] != '\0';
            st = renew_round_trip(c, due_v.v, due_v.n, results, use_sha);
            if (st == -1) {
                st = renew_round_trip(c, due_v.v, due_v.n, results, 0);
            }
            took = fence__now_us() - sent;
            if (st == FENCE_OK) {
                fence__metrics_latency(&c->m, took);
            }
        }
    }

    /* Apply the results; collect the leases lost in this pass. */
    vec lost = {0};
    pthread_mutex_lock(&c->lock);
    now = fence__now_us();
    for (size_t i = 0; i < due_v.n; i++) {
        fence_lease *l = due_v.v[i];
        int res = results != NULL ? results[i] : -1;
        l->in_pass = 0;
        if (l->state != FENCE__HELD) {
            continue;
        }
        if (res == 1 && l->valid_until_us > now) {
            int64_t until = sent + l->ttl_ms * 1000 - fence__margin_us(l->ttl_ms);
            if (until > l->valid_until_us) {
                l->valid_until_us = until;
            }
            l->next_renew_us = sent + l->renew_every_ms * 1000;
            l->retrying = 0;
            atomic_fetch_add(&c->m.renew_ok, 1);
        } else if (res == 1) {
            /* Renewed, but the answer came after its validity had run
             * out: once lost, always lost (the sweep below says so). */
            atomic_fetch_add(&c->m.renew_failed, 1);
            l->retrying = 1;
        } else if (res == 0) {
            atomic_fetch_add(&c->m.renew_failed, 1);
            if (fence__mark_lost_locked(l, FENCE_LOST)) { /* renewal refused */
                /* Only a lease with a callback is touched after the lock
                 * is dropped: its claimed callback makes fence_release()
                 * wait.  One without may be freed at any moment. */
                if (l->on_lost != NULL && vec_push(&lost, l) != 0) {
                    l->cb_running = 0; /* out of memory: no callback */
                }
            }
        } else {
            atomic_fetch_add(&c->m.renew_failed, 1);
            l->retrying = 1;
            l->next_renew_us = now + retry_us(l);
            if (l->next_renew_us > l->valid_until_us) {
                l->next_renew_us = l->valid_until_us;
            }
        }
    }
    /* Any lease whose local validity ran out (Redis unreachable for too
     * long) is lost, renewal or not. */
    for (fence_lease *l = c->leases; l != NULL; l = l->next) {
        if (l->state == FENCE__HELD && !l->no_heartbeat && !l->in_pass &&
            l->valid_until_us <= now) {
            /* Unanswered renewals, or this pass could not reach Redis:
             * FENCE_ECONN.  None tried (a manual loop that did not run
             * in time): it simply expired, FENCE_LOST. */
            int why = l->retrying || st != FENCE_OK ? FENCE_ECONN : FENCE_LOST;
            if (fence__mark_lost_locked(l, why)) {
                /* Only a lease with a callback is touched after the lock
                 * is dropped: its claimed callback makes fence_release()
                 * wait.  One without may be freed at any moment. */
                if (l->on_lost != NULL && vec_push(&lost, l) != 0) {
                    l->cb_running = 0; /* out of memory: no callback */
                }
            }
        }
    }
    int64_t next = next_look_locked(c);
    pthread_cond_broadcast(&c->cond); /* in_pass cleared */
    pthread_mutex_unlock(&c->lock);
    pthread_mutex_unlock(&c->hb_lock);

    for (size_t i = 0; i < lost.n; i++) {
        fence_lease *l = lost.v[i];
        fence__fire_lost(l, l->lost_reason); /* may free l */
    }
    if (next_ms != NULL) {
        *next_ms = next == INT64_MAX ? -1 : (next - now > 0 ? (next - now + 999) / 1000 : 0);
    }
    free(lost.v);
    free(due_v.v);
    free(results);
    return st;
}

int fence_heartbeat_run(fence_client *c, int64_t *next_ms)
{
    int st = fence__check_client(c, "fence_heartbeat_run");
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
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            int64_t wake = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000 + (next - now);
            ts.tv_sec = (time_t)(wake / 1000000);
            ts.tv_nsec = (long)(wake % 1000000) * 1000L;
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

int fence__heartbeat_start(fence_client *c)
{
    if (c->heartbeat_mode != FENCE_HEARTBEAT_THREAD) {
        return FENCE_OK;
    }
    int st = FENCE_OK;
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
