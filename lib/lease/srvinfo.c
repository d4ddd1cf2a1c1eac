/* srvinfo.c -- what a Redis server says about itself (INFO memory, INFO
 * persistence, CONFIG GET save), and whether fence may issue tokens there:
 * an allkeys-* eviction policy can evict a token counter. */
#include "lease_internal.h"
#include "lease_async.h"

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

static int persistence_of(int aof, int rdb)
{
    if (aof == 1) {
        return rdb == 1 ? FENCE_PERSIST_AOF_RDB : FENCE_PERSIST_AOF;
    }
    if (aof == 0 && rdb >= 0) {
        return rdb == 1 ? FENCE_PERSIST_RDB : FENCE_PERSIST_OFF;
    }
    return rdb == 1 ? FENCE_PERSIST_RDB : FENCE_PERSIST_UNKNOWN;
}

const char *fence_persistence_name(int p)
{
    switch (p) {
    case FENCE_PERSIST_OFF: return "off";
    case FENCE_PERSIST_RDB: return "rdb";
    case FENCE_PERSIST_AOF: return "aof";
    case FENCE_PERSIST_AOF_RDB: return "aof+rdb";
    default: return "unknown";
    }
}

/* Fill *out from the three replies (any may be NULL or an error). */
static void fill(fence_server_info *out, redisReply *mem, redisReply *per, redisReply *save)
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
    out->persistence = persistence_of(aof, rdb_from(save));
}

fence_status fence__srv_read(fence_client *c, fence__conn *rc, fence_server_info *out)
{
    memset(out, 0, sizeof *out);
    out->persistence = FENCE_PERSIST_UNKNOWN;
    fence__tr_appendf(rc, "INFO memory");
    fence__tr_appendf(rc, "INFO persistence");
    fence__tr_appendf(rc, "CONFIG GET save");
    redisReply *r[3] = {NULL, NULL, NULL};
    fence_status st = FENCE_OK;
    for (int i = 0; i < 3; i++) {
        if (fence__tr_reply(rc, (void **)&r[i]) != 0) {
            r[i] = NULL;
            st = fence__fail(c, FENCE_ECONN, "%s: connection failed: %s", c->url.display,
                             rc->errstr);
            break;
        }
    }
    if (st == FENCE_OK) {
        fill(out, r[0], r[1], r[2]);
        atomic_store(&c->m.persistence, fence__persistence_gauge(out->persistence));
    }
    for (int i = 0; i < 3; i++) {
        if (r[i] != NULL) {
            freeReplyObject(r[i]);
        }
    }
    return st;
}

int fence__persistence_gauge(int p)
{
    return p == FENCE_PERSIST_UNKNOWN ? -1 : p != FENCE_PERSIST_OFF;
}

fence_status fence__srv_refuse(fence_client *c, const fence_server_info *si)
{
    if (c->allow_eviction) {
        return FENCE_OK;
    }
    if (si->maxmemory_policy[0] == '\0') {
        return fence__fail(c, FENCE_ECONFIG, "%s: cannot read maxmemory_policy (INFO memory "
                           "refused?): an allkeys-* policy could evict token counters; set "
                           "allow_eviction to issue tokens anyway", c->url.display);
    }
    if (strncmp(si->maxmemory_policy, "allkeys-", 8) == 0) {
        return fence__fail(c, FENCE_ECONFIG, "%s: maxmemory-policy is %s: Redis may evict a held "
                           "lease or token counter (two holders, tokens repeated); use noeviction or a "
                           "volatile-* policy, or set allow_eviction", c->url.display,
                           si->maxmemory_policy);
    }
    return FENCE_OK;
}

void fence__srv_fill(fence_client *c, void *const replies[3], fence_server_info *out)
{
    memset(out, 0, sizeof *out);
    out->persistence = FENCE_PERSIST_UNKNOWN;
    fill(out, replies[0], replies[1], replies[2]);
    atomic_store(&c->m.persistence, fence__persistence_gauge(out->persistence));
}
