/* async_libevent.c -- a lease held from a libevent loop (fence_async.h and the
 * header-only adapter lib/lease/adapters/fence_libevent.h): acquire, hold it
 * while the loop renews it, write something with its token, release.
 *
 *   async_libevent [--redis URL] [--name NAME] [--ttl MS] [--hold MS] [--out FILE]
 *
 * Exits 0 when the lease was acquired, kept through the hold (renewed by
 * the loop, never lost) and released; 1 otherwise, saying why. */
#include "ex_env.h"
#include "fence_libevent.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct job {
    fence_ev *u;
    fence_lease *lease;
    struct event *hold;
    const char *out;
    int64_t hold_ms;
    int ok;
} job;

static void on_released(fence_async *a, fence_status st, const char *msg, void *user)
{
    job *j = user;
    fence_metrics m;
    fence_client_metrics(fence_async_client(a), &m);
    if (st == FENCE_OK) {
        printf("released; renewed %" PRIu64 " times by the loop\n", m.renew_ok);
        j->ok = 1;
    } else {
        fprintf(stderr, "async_libevent: release: %s: %s\n", fence_status_name(st), msg);
    }
    fence_ev_close(j->u); /* nothing left: the dispatch returns */
}

static void on_hold_over(evutil_socket_t fd, short what, void *arg)
{
    job *j = arg;
    (void)fd;
    (void)what;
    if (fence_lease_lost(j->lease)) {
        fprintf(stderr, "async_libevent: the lease was lost while held\n");
        fence_async_release(j->u->a, j->lease, NULL, NULL);
        fence_ev_close(j->u);
        return;
    }
    fence_async_release(j->u->a, j->lease, on_released, j);
}

static void on_lost(fence_lease *l, int reason, void *user)
{
    (void)user;
    fprintf(stderr, "async_libevent: lease '%s' lost (%s)\n", fence_lease_name(l),
            fence_status_name(reason));
}

static void on_acquired(fence_async *a, fence_status st, fence_lease *l, int64_t pttl_ms,
                        const char *msg, void *user)
{
    job *j = user;
    if (st != FENCE_OK) {
        if (st == FENCE_BUSY) {
            fprintf(stderr, "async_libevent: held by another owner for %" PRId64 " ms more\n",
                    pttl_ms);
        } else {
            fprintf(stderr, "async_libevent: acquire: %s: %s\n", fence_status_name(st), msg);
        }
        fence_ev_close(j->u);
        return;
    }
    (void)a;
    j->lease = l;
    /* The write a store would check against its highest token
     * (examples/filestore.c, the SQLite and PostgreSQL triggers). */
    FILE *f = fopen(j->out, "w");
    if (f == NULL || fprintf(f, "%s %" PRIu64 "\n", fence_lease_name(l),
                             fence_lease_token(l)) < 0 || fclose(f) != 0) {
        fprintf(stderr, "async_libevent: cannot write %s\n", j->out);
    }
    printf("acquired '%s' with token %" PRIu64 "; holding %" PRId64 " ms\n",
           fence_lease_name(l), fence_lease_token(l), j->hold_ms);
    fflush(stdout);
    struct timeval tv = {(time_t)(j->hold_ms / 1000), (suseconds_t)(j->hold_ms % 1000) * 1000};
    evtimer_add(j->hold, &tv);
}

int main(int argc, char **argv)
{
    const char *url = NULL, *name = "async-libevent", *out = "/dev/null";
    int64_t ttl = 600, hold = 2000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--redis") == 0) {
            url = argv[i + 1];
        } else if (strcmp(argv[i], "--name") == 0) {
            name = argv[i + 1];
        } else if (strcmp(argv[i], "--ttl") == 0) {
            ttl = atoll(argv[i + 1]);
        } else if (strcmp(argv[i], "--hold") == 0) {
            hold = atoll(argv[i + 1]);
        } else if (strcmp(argv[i], "--out") == 0) {
            out = argv[i + 1];
        } else {
            fprintf(stderr, "usage: async_libevent [--redis URL] [--name NAME] [--ttl MS] "
                    "[--hold MS] [--out FILE]\n");
            return 2;
        }
    }
    if ((url = ex_redis_url("async_libevent", url)) == NULL) {
        return 2;
    }
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url;
    fence_async *a = NULL;
    fence_status st = fence_async_open(&a, &o);
    if (st != FENCE_OK) {
        fprintf(stderr, "async_libevent: %s\n", fence_async_errmsg(a));
        fence_async_close(a);
        return 1;
    }
    struct event_base *base = event_base_new();
    job j = {.out = out, .hold_ms = hold};
    j.hold = base != NULL ? evtimer_new(base, on_hold_over, &j) : NULL;
    fence_lease_options lo;
    fence_lease_options_init(&lo, ttl);
    lo.on_lost = on_lost;
    if (j.hold == NULL || fence_ev_attach(a, base, &j.u) != 0 ||
        fence_async_acquire(a, name, &lo, on_acquired, &j) != FENCE_OK) {
        fprintf(stderr, "async_libevent: %s\n", fence_async_errmsg(a));
        if (j.u != NULL) {
            fence_ev_close(j.u);
        } else {
            fence_async_close(a);
        }
        if (j.hold != NULL) {
            event_free(j.hold);
        }
        event_base_free(base);
        return 1;
    }
    event_base_dispatch(base); /* returns when no event is left */
    event_free(j.hold);
    event_base_free(base);
    return j.ok ? 0 : 1;
}
