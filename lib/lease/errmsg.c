/* errmsg.c -- fence_client_errmsg(): libfence's slot in the one
 * error-message scheme of lib/common (per thread, per client).  The slot
 * itself is the engine's (fence__rd_errslot, redis/conn.c): the engine
 * writes its messages there keyed by its handle's errkey, which is the
 * client, so this one function reads both layers' messages. */
#include "lease_internal.h"

fence_status fence__fail(const fence_client *c, fence_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fence__err_vset(fence__rd_errslot(), c, (int)status, fmt, ap);
    va_end(ap);
    return status;
}

void fence__clear(const fence_client *c)
{
    fence__err_clear(fence__rd_errslot(), c);
}

const char *fence_client_errmsg(const fence_client *c)
{
    const fence__errslot *slot = fence__rd_errslot();
    /* NULL: the message of this thread's last call that had no client
     * (a failed open with out == NULL, say), if that was its last failure. */
    if (c == NULL && slot->handle != NULL) {
        return "no client (NULL handle)";
    }
    return fence__err_get(slot, c);
}
