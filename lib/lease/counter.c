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
    st = fence__eval_cmd(c, FENCE__TOKEN_RAISE, 1, 2, args, 0, NULL, NULL, (void **)&r);
    free(counter);
    if (st != FENCE_OK) {
        return st;
    }
    uint64_t v = 0;
    if (r->type != REDIS_REPLY_STRING || parse_u64(r->str, r->len, &v) != 0) {
        st = fence__fail(c, FENCE_EPROTO, "%s: the counter of '%s' is not a number",
                         c->url.display, name);
    } else if (token_out != NULL) {
        *token_out = v;
    }
    freeReplyObject(r);
    return st;
}

fence_status fence_lease_inspect(fence_client *c, const char *name, int *held, int64_t *pttl_ms,
                                 uint64_t *holder_token, uint64_t *last_token)
{
    fence_status st = fence__check_client(c, "fence_lease_inspect");
    if (st != FENCE_OK) {
        return st;
    }
    st = fence__check_name(c, name);
    if (st != FENCE_OK) {
        return st;
    }
    char *owner = fence__key(c, name, "");
    char *counter = fence__key(c, name, ":token");
    if (owner == NULL || counter == NULL) {
        free(owner);
        free(counter);
        return fence__fail(c, FENCE_ENOMEM, "out of memory");
    }
    const char *args[2] = {owner, counter};
    redisReply *r = NULL;
    st = fence__eval_cmd(c, FENCE__INSPECT, 2, 2, args, 0, NULL, NULL, (void **)&r);
    free(owner);
    free(counter);
    if (st != FENCE_OK) {
        return st;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2) {
        freeReplyObject(r);
        return fence__fail(c, FENCE_EPROTO, "%s: unexpected reply to inspect", c->url.display);
    }
    redisReply *v = r->element[0];
    int is_held = v->type == REDIS_REPLY_STRING;
    uint64_t ht = 0, lt = 0;
    if (is_held) {
        const char *colon = memchr(v->str, ':', v->len);
        if (colon != NULL) {
            parse_u64(colon + 1, v->len - (size_t)(colon + 1 - v->str), &ht);
        }
    }
    if (r->elements > 2 && r->element[2]->type == REDIS_REPLY_STRING) {
        parse_u64(r->element[2]->str, r->element[2]->len, &lt);
    }
    if (held != NULL) {
        *held = is_held;
    }
    if (pttl_ms != NULL) {
        *pttl_ms = is_held && r->element[1]->type == REDIS_REPLY_INTEGER ? r->element[1]->integer
                                                                          : -1;
    }
    if (holder_token != NULL) {
        *holder_token = ht;
    }
    if (last_token != NULL) {
        *last_token = lt;
    }
    freeReplyObject(r);
    return FENCE_OK;
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
    st = fence__cmd_server_info(c, out);
    if (st == FENCE_OK) {
        fence__clear(c);
    }
    return st;
}
