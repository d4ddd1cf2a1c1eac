/* async_args.c -- the script arguments of one acquire attempt and of a
 * renewal, as fence__try_once and renew_send (lease.c) send them, for the
 * asynchronous API, which queues them instead of waiting. */
#include "lease_internal.h"
#include "lease_async.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

fence_status fence__acquire_prepare(fence_client *c, const char *name,
                                    const fence_lease_options *o, fence__acq_args *a,
                                    fence_lease **out)
{
    memset(a, 0, sizeof *a);
    fence_status st = fence__lease_new(c, name, o, a->owner, &a->counter, out);
    if (st != FENCE_OK) {
        return st;
    }
    fence_lease *l = *out;
    if (l->has_info && (a->info = strdup(o->holder_info)) == NULL) {
        fence__acq_args_free(a);
        fence__lease_free(l);
        *out = NULL;
        return fence__fail(c, FENCE_ENOMEM, "out of memory");
    }
    /* The order of fence__try_once's. */
    snprintf(a->ttl, sizeof a->ttl, "%" PRId64, o->ttl_ms);
    const char *mode = fence__mode_args(c, a->jump, a->limit, a->idle);
    a->v[a->n++] = l->owner_key;
    a->v[a->n++] = a->counter;
    if (l->has_info) {
        a->v[a->n++] = l->info_key;
    }
    a->nkeys = a->n;
    const char *rest[7] = {"a", a->owner, a->ttl, mode, a->jump, a->limit, a->idle};
    for (int i = 0; i < 7; i++) {
        a->v[a->n++] = rest[i];
    }
    if (l->has_info) {
        a->v[a->n++] = a->info;
    }
    return FENCE_OK;
}

void fence__acq_args_free(fence__acq_args *a)
{
    free(a->counter);
    free(a->info);
    a->counter = a->info = NULL;
}

int fence__renew_args(const fence_lease *l, const char *value, const char *ttl,
                      const char **args)
{
    /* renew_send's: the holder description's key as KEYS[2] when there is one. */
    int i = 0;
    args[i++] = l->owner_key;
    if (l->info_key != NULL) {
        args[i++] = l->info_key;
    }
    args[i++] = value;
    args[i++] = ttl;
    return l->info_key != NULL ? 2 : 1;
}
