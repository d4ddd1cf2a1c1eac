/* acquire.c -- fence_acquire(): check the arguments, start the heartbeat,
 * then try once (lease.c) or wait (wait.c). */
#include "lease_internal.h"

#include <string.h>

void fence_lease_options_init(fence_lease_options *o, int64_t ttl_ms)
{
    if (o != NULL) {
        memset(o, 0, sizeof *o);
        o->ttl_ms = ttl_ms;
    }
}

fence_status fence_acquire(fence_client *c, const char *name, const fence_lease_options *o,
                           fence_lease **out)
{
    if (out != NULL) {
        *out = NULL;
    }
    fence_status st = fence__check_client(c, "fence_acquire");
    if (st != FENCE_OK) {
        return st;
    }
    if (out == NULL || o == NULL) {
        return fence__fail(c, FENCE_EINVAL, "fence_acquire: %s is NULL",
                           out == NULL ? "out" : "opts");
    }
    st = fence__check_name(c, name);
    if (st == FENCE_OK) {
        st = fence__check_lease_opts(c, o);
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
    return fence__try_once(c, name, o, INT64_MAX, out, &pttl);
}

fence_status fence_try_acquire(fence_client *c, const char *name, int64_t ttl_ms,
                               fence_lease **out)
{
    fence_lease_options o;
    fence_lease_options_init(&o, ttl_ms);
    return fence_acquire(c, name, &o, out);
}
