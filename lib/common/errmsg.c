/* errmsg.c -- the one error-message scheme: per library, per thread, per
 * handle (see common.h). */
#include "common.h"

#include <stdio.h>

int fence__err_vset(fence__errslot *slot, const void *h, int status, const char *fmt,
                    va_list ap)
{
    vsnprintf(slot->msg, sizeof slot->msg, fmt, ap);
    slot->handle = h;
    return status;
}

int fence__err_set(fence__errslot *slot, const void *h, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fence__err_vset(slot, h, status, fmt, ap);
    va_end(ap);
    return status;
}

void fence__err_clear(fence__errslot *slot, const void *h)
{
    if (slot->handle == h) {
        slot->msg[0] = '\0';
    }
}

const char *fence__err_get(const fence__errslot *slot, const void *h)
{
    return slot->handle == h ? slot->msg : "";
}
