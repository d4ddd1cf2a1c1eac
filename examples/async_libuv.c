/* async_libuv.c -- a lease held from a libuv loop (fence_async.h and the
 * header-only adapter lib/lease/adapters/fence_libuv.h): acquire, hold it
 * while the loop renews it, write something with its token, release.
 *
 *   async_libuv [--redis URL] [--name NAME] [--ttl MS] [--hold MS] [--out FILE]
 *
 * Exits 0 when the lease was acquired, kept through the hold (renewed by
 * the loop, never lost) and released; 1 otherwise, saying why. */
#include "ex_env.h"
#include "fence_libuv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct job {
    fence_uv *u;
    fence_lease *lease;
    uv_timer_t hold;
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
        fprintf(stderr, "async_libuv: release: %s: %s\n", fence_status_name(st), msg);
    }
    fence_uv_close(j->u); /* nothing left: uv_run returns */
}

static void on_hold_over(uv_timer_t *t)
{
    job *j = t->data;
    uv_close((uv_handle_t *)t, NULL);
    if (fence_lease_lost(j->lease)) {
        fprintf(stderr, "async_libuv: the lease was lost while held\n");
        fence_async_release(j->u->a, j->lease, NULL, NULL);
        fence_uv_close(j->u);
        return;
    }
    fence_async_release(j->u->a, j->lease, on_released, j);
}

static void on_lost(fence_lease *l, int reason, void *user)
{
    (void)user;
    fprintf(stderr, "async_libuv: lease '%s' lost (%s)\n", fence_lease_name(l),
            fence_status_name(reason));
}

static void on_acquired(fence_async *a, fence_status st, fence_lease *l, int64_t pttl_ms,
                        const char *msg, void *user)
{
    job *j = user;
    if (st != FENCE_OK) {
        if (st == FENCE_BUSY) {
            fprintf(stderr, "async_libuv: held by another owner for %" PRId64 " ms more\n",
                    pttl_ms);
        } else {
            fprintf(stderr, "async_libuv: acquire: %s: %s\n", fence_status_name(st), msg);
        }
        fence_uv_close(j->u);
        return;
    }
    (void)a;
    j->lease = l;
    /* The write a store would check against its highest token
     * (examples/filestore.c, the SQLite and PostgreSQL triggers). */
    FILE *f = fopen(j->out, "w");
    if (f == NULL || fprintf(f, "%s %" PRIu64 "\n", fence_lease_name(l),
                             fence_lease_token(l)) < 0 || fclose(f) != 0) {
        fprintf(stderr, "async_libuv: cannot write %s\n", j->out);
    }
    printf("acquired '%s' with token %" PRIu64 "; holding %" PRId64 " ms\n",
           fence_lease_name(l), fence_lease_token(l), j->hold_ms);
    fflush(stdout);
    uv_timer_init(uv_default_loop(), &j->hold);
    j->hold.data = j;
    uv_timer_start(&j->hold, on_hold_over, (uint64_t)j->hold_ms, 0);
}

int main(int argc, char **argv)
{
    const char *url = NULL, *name = "async-libuv", *out = "/dev/null";
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
            fprintf(stderr, "usage: async_libuv [--redis URL] [--name NAME] [--ttl MS] "
                    "[--hold MS] [--out FILE]\n");
            return 2;
        }
    }
    if ((url = ex_redis_url("async_libuv", url)) == NULL) {
        return 2;
    }
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url;
    fence_async *a = NULL;
    fence_status st = fence_async_open(&a, &o);
    if (st != FENCE_OK) {
        fprintf(stderr, "async_libuv: %s\n", fence_async_errmsg(a));
        fence_async_close(a);
        return 1;
    }
    job j = {.out = out, .hold_ms = hold};
    fence_lease_options lo;
    fence_lease_options_init(&lo, ttl);
    lo.on_lost = on_lost;
    if (fence_uv_attach(a, uv_default_loop(), &j.u) != 0 ||
        fence_async_acquire(a, name, &lo, on_acquired, &j) != FENCE_OK) {
        fprintf(stderr, "async_libuv: %s\n", fence_async_errmsg(a));
        if (j.u != NULL) {
            fence_uv_close(j.u);
        } else {
            fence_async_close(a);
        }
        return 1;
    }
    uv_run(uv_default_loop(), UV_RUN_DEFAULT);
    uv_loop_close(uv_default_loop());
    return j.ok ? 0 : 1;
}
