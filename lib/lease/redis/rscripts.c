/* rscripts.c -- the Redis issuer's scripts: their bodies (lib/lease/redis/
 * *.lua, embedded at build time; issue.lua, the one issuance rule, in front
 * of acquire.lua and reissue.lua), a lease's keys, each script's keys and
 * arguments, and what each reply means.  The blocking calls (rissuer.c) and
 * the asynchronous API send exactly these. */
#include "rissuer.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const char fence__lua_issue[], fence__lua_acquire[], fence__lua_reissue[],
    fence__lua_renew[], fence__lua_renew_batch[], fence__lua_release[], fence__lua_token_raise[],
    fence__lua_inspect[];
extern const size_t fence__lua_issue_len, fence__lua_acquire_len, fence__lua_reissue_len,
    fence__lua_renew_len, fence__lua_renew_batch_len, fence__lua_release_len,
    fence__lua_token_raise_len, fence__lua_inspect_len;

/* issue.lua + acquire.lua and issue.lua + reissue.lua, made once. */
static char *joined[2];
static size_t joined_len[2];
static pthread_once_t join_once = PTHREAD_ONCE_INIT;

static char *join(const char *tail, size_t tail_len, size_t *len)
{
    char *s = malloc(fence__lua_issue_len + 1 + tail_len + 1);
    if (s != NULL) {
        memcpy(s, fence__lua_issue, fence__lua_issue_len);
        s[fence__lua_issue_len] = '\n';
        memcpy(s + fence__lua_issue_len + 1, tail, tail_len);
        *len = fence__lua_issue_len + 1 + tail_len;
        s[*len] = '\0';
    }
    return s;
}

static void join_scripts(void)
{
    joined[0] = join(fence__lua_acquire, fence__lua_acquire_len, &joined_len[0]);
    joined[1] = join(fence__lua_reissue, fence__lua_reissue_len, &joined_len[1]);
}

fence_status fence__ri_scripts(fence__redis *rd)
{
    pthread_once(&join_once, join_scripts);
    if (joined[0] == NULL || joined[1] == NULL) {
        return fence__rd_fail(rd, FENCE_ENOMEM, "out of memory");
    }
    const char *body[FENCE__NSCRIPTS] = {
        [FENCE__ACQUIRE] = joined[0],
        [FENCE__REISSUE] = joined[1],
        [FENCE__RENEW] = fence__lua_renew,
        [FENCE__RENEW_BATCH] = fence__lua_renew_batch,
        [FENCE__RELEASE] = fence__lua_release,
        [FENCE__TOKEN_RAISE] = fence__lua_token_raise,
        [FENCE__INSPECT] = fence__lua_inspect,
    };
    size_t len[FENCE__NSCRIPTS] = {
        [FENCE__ACQUIRE] = joined_len[0],
        [FENCE__REISSUE] = joined_len[1],
        [FENCE__RENEW] = fence__lua_renew_len,
        [FENCE__RENEW_BATCH] = fence__lua_renew_batch_len,
        [FENCE__RELEASE] = fence__lua_release_len,
        [FENCE__TOKEN_RAISE] = fence__lua_token_raise_len,
        [FENCE__INSPECT] = fence__lua_inspect_len,
    };
    rd->nscripts = FENCE__NSCRIPTS;
    for (int s = 0; s < FENCE__NSCRIPTS; s++) {
        rd->script[s] = body[s];
        rd->script_len[s] = len[s];
    }
    return FENCE_OK;
}

/* ---- a lease's keys ---------------------------------------------------------- */

static const char *const suffix[4] = {"", ":token", ":released", ":info"};

size_t fence__ri_room(const fence__issuer *ri, size_t namelen)
{
    size_t base = ri->prefix_len + namelen + 2; /* "<prefix>{NAME}" */
    return sizeof(fence__rkeys) + 4 * (base + 1) + 6 + 9 + 5;
}

void fence__ri_keys(const fence__issuer *ri, fence__ilease *l)
{
    fence__rkeys *k = FENCE__RKEYS(l);
    char **slot[4] = {&k->owner, &k->counter, &k->channel, &k->info};
    char *p = k->buf;
    for (int i = 0; i < 4; i++) {
        *slot[i] = p;
        memcpy(p, ri->prefix, ri->prefix_len);
        p += ri->prefix_len;
        *p++ = '{';
        memcpy(p, l->name, l->namelen);
        p += l->namelen;
        *p++ = '}';
        size_t n = strlen(suffix[i]);
        memcpy(p, suffix[i], n + 1);
        p += n + 1;
    }
    /* renew.lua / renew_batch.lua: "-<ttl>" when a holder description must
     * be extended too, so that leases without one cost no extra command. */
    k->ttl[0] = '-';
    fence__u64_text((uint64_t)l->ttl_ms, k->ttl + l->has_info);
}

/* ---- arguments ---------------------------------------------------------------- */

int fence__ri_acquire_args(const fence__issuer *ri, const fence__ilease *l,
                           const char *holder_info, const char **args, int *nkeys)
{
    const fence__rkeys *k = FENCE__RKEYS(l);
    int n = 0;
    args[n++] = k->owner;
    args[n++] = k->counter;
    if (holder_info != NULL) {
        args[n++] = k->info; /* declared: a script declares every key it touches */
    }
    *nkeys = n;
    args[n++] = l->holder;
    args[n++] = k->ttl + (k->ttl[0] == '-'); /* the TTL, without renew's sign */
    args[n++] = ri->mode_arg;
    args[n++] = ri->jump_arg;
    args[n++] = ri->limit_arg;
    args[n++] = ri->idle_arg;
    if (holder_info != NULL) {
        args[n++] = holder_info;
    }
    return n;
}

int fence__ri_reissue_args(const fence__issuer *ri, const fence__ilease *l, const char *floor,
                           const char **args, int *nkeys)
{
    const fence__rkeys *k = FENCE__RKEYS(l);
    const char *v[9] = {k->owner,      k->counter,    l->holder,     l->value, ri->mode_arg,
                        ri->jump_arg, ri->limit_arg, ri->idle_arg, floor};
    memcpy(args, v, sizeof v);
    *nkeys = 2;
    return 9;
}

int fence__ri_renew_args(const fence__ilease *l, const char *value, const char **args,
                         int *nkeys)
{
    const fence__rkeys *k = FENCE__RKEYS(l);
    int n = 0;
    args[n++] = k->owner;
    if (l->has_info) {
        args[n++] = k->info; /* declared as KEYS[2] */
    }
    *nkeys = n;
    args[n++] = value;
    args[n++] = k->ttl;
    return n;
}

int fence__ri_release_args(const fence__issuer *ri, const fence__ilease *l, const char **args,
                           int *nkeys)
{
    const fence__rkeys *k = FENCE__RKEYS(l);
    if (l->has_info) {
        *nkeys = 2; /* the holder description's key declared (KEYS[2]) */
        args[0] = k->owner;
        args[1] = k->info;
        args[2] = l->value;
        args[3] = k->channel;
        return 4;
    }
    /* Without one, a cluster client says 'n' (leave ":info" alone), one
     * server lets the script delete a stale one. */
    *nkeys = 1;
    args[0] = k->owner;
    args[1] = l->value;
    args[2] = k->channel;
    args[3] = "n";
    return ri->rd.cl != NULL ? 4 : 3;
}

/* ---- replies ------------------------------------------------------------------- */

/* A non-negative decimal reply element, or -1. */
static int64_t reply_us(const redisReply *e)
{
    uint64_t v;
    if (e->type != REDIS_REPLY_STRING || fence__token_parse(e->str, e->len, &v) != 0 ||
        v > (uint64_t)INT64_MAX) {
        return -1;
    }
    return (int64_t)v;
}

/* The token mode a client was opened with, as a person reads it. */
static const char *mode_name(const char *m)
{
    return strcmp(m, "dense") == 0 ? "dense (FENCE_TOKENS_DENSE)" : "clock (FENCE_TOKENS_CLOCK)";
}

fence_status fence__ri_grant_reply(const fence__issuer *ri, const void *reply, const char *what,
                                   const char *name, fence__grant *g)
{
    const redisReply *r = reply;
    const fence__redis *rd = &ri->rd;
    g->granted = 0;
    g->behind_us = 0;
    g->pttl_ms = -1;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        return fence__rd_fail(rd, FENCE_EPROTO, "%s: unexpected reply to %s", rd->url.display,
                              what);
    }
    int64_t code = r->element[0]->integer;
    if (code == 0) { /* held by another owner ('a'), or no longer ours ('r') */
        if (r->elements >= 2 && r->element[1]->type == REDIS_REPLY_INTEGER) {
            g->pttl_ms = r->element[1]->integer;
        }
        return FENCE_OK;
    }
    if (code == 2 && r->elements == 2 && (g->behind_us = reply_us(r->element[1])) > 0) {
        return fence__rd_fail(rd, FENCE_ECLOCK, "lease '%s': %s refused: the Redis server's "
                              "clock is %.3f s behind the clock that issued its last token "
                              "(limit %.3f s: clock_behind_limit_ms); nothing was written",
                              name, what, (double)g->behind_us / 1e6,
                              (double)ri->clock_behind_limit_ms / 1e3);
    }
    if (code == 3 && r->elements == 2 && r->element[1]->type == REDIS_REPLY_STRING) {
        const char *theirs = r->element[1]->str;
        return fence__rd_fail(rd, FENCE_ECONFIG, "lease '%s': %s refused: its token counter "
                              "was written by a client issuing %s tokens, and this client "
                              "issues %s tokens; one name's tokens follow one rule (docs/"
                              "redis.md, \"Tokens\"); nothing was written", name, what,
                              mode_name(theirs), mode_name(ri->mode_arg));
    }
    if (code != 1 || r->elements < 2 || r->elements > 3 ||
        r->element[1]->type != REDIS_REPLY_STRING ||
        fence__token_parse(r->element[1]->str, r->element[1]->len, &g->token) != 0) {
        return fence__rd_fail(rd, FENCE_EPROTO, "%s: bad token in the reply to %s",
                              rd->url.display, what);
    }
    if (r->elements == 3 && (g->behind_us = reply_us(r->element[2])) <= 0) {
        g->behind_us = 0;
        return fence__rd_fail(rd, FENCE_EPROTO, "%s: bad clock lag in the reply to %s",
                              rd->url.display, what);
    }
    g->granted = 1;
    return FENCE_OK;
}

int fence__ri_renew_reply(const fence__issuer *ri, const void *reply)
{
    const redisReply *r = reply;
    if (r->type != REDIS_REPLY_INTEGER) {
        fence__rd_fail(&ri->rd, FENCE_EPROTO, "%s: unexpected reply to renew",
                       ri->rd.url.display);
        return -1;
    }
    return r->integer == 1;
}

fence_status fence__ri_release_reply(const fence__issuer *ri, const void *reply, int *deleted)
{
    const redisReply *r = reply;
    *deleted = 0;
    if (r->type != REDIS_REPLY_INTEGER) {
        return fence__rd_fail(&ri->rd, FENCE_EPROTO, "%s: unexpected reply to release",
                              ri->rd.url.display);
    }
    *deleted = r->integer == 1;
    return FENCE_OK;
}
