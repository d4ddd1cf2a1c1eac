/* errmsg.c -- fence_client_errmsg(): libfence's one slot in the error-message
 * scheme of lib/common (per thread, per client).  The core writes into it
 * here; every issuer writes into the same slot through the pointer the core
 * gives it (fence__iss_env.errslot), keyed by the client, so this one
 * function reads the messages of both. */
#include "lease_internal.h"

static _Thread_local fence__errslot tl_err;

fence__errslot *fence__errslot_get(void)
{
    return &tl_err;
}

fence_status fence__fail(const fence_client *c, fence_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fence__err_vset(&tl_err, c, (int)status, fmt, ap);
    va_end(ap);
    return status;
}

void fence__clear(const fence_client *c)
{
    fence__err_clear(&tl_err, c);
}

const char *fence_client_errmsg(const fence_client *c)
{
    /* NULL: the message of this thread's last call that had no client
     * (a failed open with out == NULL, say), if that was its last failure. */
    if (c == NULL && tl_err.handle != NULL) {
        return "no client (NULL handle)";
    }
    return fence__err_get(&tl_err, c);
}
