/* acquire.c -- fence_acquire(): check the arguments, start the heartbeat,
 * then try once (lease.c) or wait (wait.c). */
#include "lease_internal.h"
#include "lease_async.h"

#include <inttypes.h>
#include <string.h>

void fence_lease_options_init(fence_lease_options *o, int64_t ttl_ms)
{
    if (o != NULL) {
        memset(o, 0, sizeof *o);
        o->ttl_ms = ttl_ms;
    }
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

static fence_status check_opts(fence_client *c, const fence_lease_options *o)
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
        st = check_opts(c, o);
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
    return fence__try_once(c, name, o, 0, out, &pttl);
}

fence_status fence_try_acquire(fence_client *c, const char *name, int64_t ttl_ms,
                               fence_lease **out)
{
    fence_lease_options o;
    fence_lease_options_init(&o, ttl_ms);
    return fence_acquire(c, name, &o, out);
}

fence_status fence__check_lease_opts(fence_client *c, const fence_lease_options *o)
{
    return check_opts(c, o);
}
