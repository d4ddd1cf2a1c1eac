/* srvinfo.c -- what a Redis server says about itself (INFO memory, INFO
 * persistence, CONFIG GET save), as the facts: the policy, AOF on or off,
 * RDB snapshots configured.  What the owner makes of them is its own
 * business (the handle's first_use hook, the issuer's describe). */
#include "redis.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

/* The value of "field:" on its own line of INFO text, into out; 0, or -1
 * when missing. */
static int info_field(const char *text, const char *field, char *out, size_t n)
{
    size_t fl = strlen(field);
    for (const char *p = text; p != NULL && *p != '\0';) {
        if (strncmp(p, field, fl) == 0 && p[fl] == ':') {
            const char *v = p + fl + 1;
            size_t len = strcspn(v, "\r\n");
            if (len >= n) {
                len = n - 1;
            }
            memcpy(out, v, len);
            out[len] = '\0';
            return 0;
        }
        p = strchr(p, '\n');
        p = p != NULL ? p + 1 : NULL;
    }
    return -1;
}

/* RDB snapshots: 1 configured, 0 off, -1 unknown (CONFIG refused). */
static int rdb_from(const redisReply *r)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[1]->type != REDIS_REPLY_STRING) {
        return -1;
    }
    return r->element[1]->len > 0;
}

/* Fill *out from the three replies (any may be NULL or an error). */
static void fill(fence__srvinfo *out, redisReply *mem, redisReply *per, redisReply *save)
{
    if (mem != NULL && mem->type == REDIS_REPLY_STRING) {
        info_field(mem->str, "maxmemory_policy", out->maxmemory_policy,
                   sizeof out->maxmemory_policy);
    }
    int aof = -1;
    char v[8];
    if (per != NULL && per->type == REDIS_REPLY_STRING &&
        info_field(per->str, "aof_enabled", v, sizeof v) == 0) {
        aof = strcmp(v, "0") != 0;
    }
    out->aof = aof;
    out->rdb = rdb_from(save);
}

void fence__srv_append(fence__conn *rc)
{
    fence__tr_appendf(rc, "INFO memory");
    fence__tr_appendf(rc, "INFO persistence");
    fence__tr_appendf(rc, "CONFIG GET save");
}

void fence__srv_fill(fence__srvinfo *out, void *const *replies)
{
    memset(out, 0, sizeof *out);
    fill(out, replies[0], replies[1], replies[2]);
}
