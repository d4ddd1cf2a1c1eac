/* counter.c -- a name's token counter: raising it, reading it, and
 * inspecting the lease without taking it; what the server says of itself. */
#include "lease_internal.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Counter and token values in Redis replies: the one grammar, 0..max. */
static int parse_u64(const char *s, size_t n, uint64_t *out)
{
    return fence__u64_parse(s, n, FENCE_TOKEN_MAX, out);
}

fence_status fence_token_raise(fence_client *c, const char *name, uint64_t floor, uint64_t *token_out)
{
    fence_status st = fence__check_client(c, "fence_token_raise");
    if (st != FENCE_OK) {
        return st;
    }
    st = fence__check_name(c, name);
    if (st != FENCE_OK) {
        return st;
    }
    if (floor > (uint64_t)INT64_MAX) {
        return fence__fail(c, FENCE_EINVAL, "floor above 2^63-1 (Redis counters are signed)");
    }
    char *counter = fence__key(c, name, ":token");
    if (counter == NULL) {
        return fence__fail(c, FENCE_ENOMEM, "out of memory");
    }
    char f[24];
    snprintf(f, sizeof f, "%" PRIu64, floor);
    const char *args[2] = {counter, f};
    redisReply *r = NULL;
    st = fence__eval_cmd(&c->rd, FENCE__TOKEN_RAISE, 1, 2, args, 0, NULL, NULL, (void **)&r);
    free(counter);
    if (st != FENCE_OK) {
        return st;
    }
    uint64_t v = 0;
    if (r->type != REDIS_REPLY_STRING || parse_u64(r->str, r->len, &v) != 0) {
        st = fence__fail(c, FENCE_EPROTO, "%s: the counter of '%s' is not a number",
                         c->rd.url.display, name);
    } else if (token_out != NULL) {
        *token_out = v;
    }
    freeReplyObject(r);
    return st;
}

/* The reply to inspect.lua: owner value, PTTL, n (and the holder
 * description with want_info) into *out, already zeroed. */
static fence_status inspect_reply(fence_client *c, const redisReply *r, int want_info,
                                  fence_lease_info *out)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < (want_info ? 4u : 2u)) {
        return fence__fail(c, FENCE_EPROTO, "%s: unexpected reply to inspect", c->rd.url.display);
    }
    const redisReply *v = r->element[0];
    out->held = v->type == REDIS_REPLY_STRING;
    out->pttl_ms = out->held && r->element[1]->type == REDIS_REPLY_INTEGER
                       ? r->element[1]->integer : -1;
    const char *colon = out->held ? memchr(v->str, ':', v->len) : NULL;
    if (colon != NULL) {
        parse_u64(colon + 1, v->len - (size_t)(colon + 1 - v->str), &out->holder_token);
        if (colon - v->str == FENCE_HOLDER_LEN) {
            memcpy(out->holder, v->str, FENCE_HOLDER_LEN);
        }
    }
    if (r->elements > 2 && r->element[2]->type == REDIS_REPLY_STRING) {
        parse_u64(r->element[2]->str, r->element[2]->len, &out->last_token);
    }
    /* "<holder id>:<text>", shown only when it is the current holder's:
     * a stale one of a crashed holder (or under an owner that set none)
     * is not this holder's description. */
    const redisReply *d = want_info ? r->element[3] : NULL;
    if (d != NULL && d->type == REDIS_REPLY_STRING && out->holder[0] != '\0' &&
        d->len > FENCE_HOLDER_LEN && d->len <= FENCE_HOLDER_LEN + 1 + FENCE_HOLDER_INFO_MAX &&
        memcmp(d->str, out->holder, FENCE_HOLDER_LEN) == 0 && d->str[FENCE_HOLDER_LEN] == ':') {
        memcpy(out->holder_info, d->str + FENCE_HOLDER_LEN + 1, d->len - FENCE_HOLDER_LEN - 1);
    }
    return FENCE_OK;
}

/* One inspect.lua call for name; with want_info also its ":info" key. */
static fence_status inspect(fence_client *c, const char *fn, const char *name, int want_info,
                            fence_lease_info *out)
{
    memset(out, 0, sizeof *out);
    fence_status st = fence__check_client(c, fn);
    if (st != FENCE_OK) {
        return st;
    }
    st = fence__check_name(c, name);
    if (st != FENCE_OK) {
        return st;
    }
    char *keys[3] = {fence__key(c, name, ""), fence__key(c, name, ":token"),
                     want_info ? fence__key(c, name, ":info") : NULL};
    if (keys[0] == NULL || keys[1] == NULL || (want_info && keys[2] == NULL)) {
        st = fence__fail(c, FENCE_ENOMEM, "out of memory");
    } else {
        const char *args[3] = {keys[0], keys[1], keys[2]};
        redisReply *r = NULL;
        st = fence__eval_cmd(&c->rd, FENCE__INSPECT, want_info ? 3 : 2, want_info ? 3 : 2, args, 0,
                             NULL, NULL, (void **)&r);
        if (st == FENCE_OK) {
            st = inspect_reply(c, r, want_info, out);
            freeReplyObject(r);
        }
    }
    for (int i = 0; i < 3; i++) {
        free(keys[i]);
    }
    return st;
}

fence_status fence_lease_inspect(fence_client *c, const char *name, int *held, int64_t *pttl_ms,
                                 uint64_t *holder_token, uint64_t *last_token)
{
    fence_lease_info info;
    fence_status st = inspect(c, "fence_lease_inspect", name, 0, &info);
    if (st != FENCE_OK) {
        return st;
    }
    if (held != NULL) {
        *held = info.held;
    }
    if (pttl_ms != NULL) {
        *pttl_ms = info.pttl_ms;
    }
    if (holder_token != NULL) {
        *holder_token = info.holder_token;
    }
    if (last_token != NULL) {
        *last_token = info.last_token;
    }
    return FENCE_OK;
}

fence_status fence_lease_inspect_info(fence_client *c, const char *name, fence_lease_info *out)
{
    if (out == NULL) {
        fence_status st = fence__check_client(c, "fence_lease_inspect_info");
        return st != FENCE_OK ? st : fence__fail(c, FENCE_EINVAL,
                                                 "fence_lease_inspect_info: out is NULL");
    }
    return inspect(c, "fence_lease_inspect_info", name, 1, out);
}

fence_status fence_token_last(fence_client *c, const char *name, uint64_t *token_out)
{
    if (token_out == NULL) {
        return fence__fail(c, FENCE_EINVAL, "fence_token_last: token_out is NULL");
    }
    return fence_lease_inspect(c, name, NULL, NULL, NULL, token_out);
}

fence_status fence_client_server_info(fence_client *c, fence_server_info *out)
{
    fence_status st = fence__check_client(c, "fence_client_server_info");
    if (st != FENCE_OK) {
        return st;
    }
    if (out == NULL) {
        return fence__fail(c, FENCE_EINVAL, "fence_client_server_info: out is NULL");
    }
    st = fence__cmd_server_info(&c->rd, out);
    if (st == FENCE_OK) {
        atomic_store(&c->m.persistence, fence__persistence_gauge(out->persistence));
        fence__clear(c);
    }
    return st;
}
