/* errmsg.c -- the per-thread detail message behind fence_client_errmsg().
 * Each thread keeps the message of its own last failure and the client it
 * was about, so threads sharing a client never read each other's. */
#include "internal.h"

#include <stdio.h>

static _Thread_local const fence_client *tl_client;
static _Thread_local char tl_msg[512];

int fence__fail(const fence_client *c, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tl_msg, sizeof tl_msg, fmt, ap);
    va_end(ap);
    tl_client = c;
    return status;
}

void fence__clear(const fence_client *c)
{
    if (tl_client == c) {
        tl_msg[0] = '\0';
    }
}

const char *fence_client_errmsg(const fence_client *c)
{
    if (c == NULL) {
        return tl_client == NULL ? tl_msg : "no client (NULL handle)";
    }
    return tl_client == c ? tl_msg : "";
}
