/* pwait.c -- waiting for a release: LISTEN fence_lease_released (which
 * fence.lease_release() notifies, the lease's name as payload) on a
 * connection of its own, made before the waiter's first attempt.  With
 * fence_wait=poll (a pooler in transaction mode, where a LISTEN would not
 * stay on one server connection) there is no waiter: the core polls. */
#include "pgissuer.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>

struct fence__waiter {
    PGconn *c;
    char *name;
};

fence__waiter *fence__pq_wait_open(fence__issuer *is, const char *name, int64_t deadline_us)
{
    if (is->wait_mode == FENCE__PG_WAIT_POLL) {
        return NULL;
    }
    fence__waiter *w = calloc(1, sizeof *w);
    if (w == NULL || (w->name = strdup(name)) == NULL) {
        free(w);
        return NULL;
    }
    int64_t deadline = fence__pq_deadline(is, deadline_us);
    fence_status st;
    w->c = fence__pq_connect(is, deadline, &st);
    /* Not in a pipeline: a LISTEN and then only notifications. */
    if (w->c == NULL || PQexitPipelineMode(w->c) != 1 ||
        !PQsendQuery(w->c, "LISTEN fence_lease_released")) {
        fence__pq_wait_close(w);
        return NULL;
    }
    int ok = 0;
    for (;;) {
        while (PQflush(w->c) == 1 || PQisBusy(w->c)) {
            if (fence__wait_fd(PQsocket(w->c), POLLIN, deadline) != 1 || !PQconsumeInput(w->c)) {
                fence__pq_wait_close(w);
                return NULL;
            }
        }
        PGresult *r = PQgetResult(w->c);
        if (r == NULL) {
            break;
        }
        ok |= PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
    }
    if (!ok) {
        fence__pq_wait_close(w);
        return NULL;
    }
    return w;
}

/* 1 when a notification for w's name is there (all of them consumed). */
static int drain(fence__waiter *w)
{
    int hit = 0;
    PGnotify *n;
    while ((n = PQnotifies(w->c)) != NULL) {
        hit |= n->extra != NULL && strcmp(n->extra, w->name) == 0;
        PQfreemem(n);
    }
    return hit;
}

int fence__pq_wait(fence__waiter *w, int64_t deadline_us)
{
    for (;;) {
        if (drain(w)) {
            return 1;
        }
        int rc = fence__wait_fd(PQsocket(w->c), POLLIN, deadline_us);
        if (rc <= 0) {
            return rc;
        }
        if (!PQconsumeInput(w->c)) {
            return -1;
        }
    }
}

void fence__pq_wait_close(fence__waiter *w)
{
    if (w != NULL) {
        if (w->c != NULL) {
            PQfinish(w->c);
        }
        free(w->name);
        free(w);
    }
}
