/* counter.c -- a name's token counter (raising it, reading it), inspecting
 * a lease without taking it, and what the issuer says of its server. */
#include "lease_internal.h"
#include "redis/rissuer.h" /* fence_client_server_info: the Redis issuer's own */

#include <stdio.h>
#include <string.h>

fence_status fence_token_raise(fence_client *c, const char *name, uint64_t floor,
                               uint64_t *token_out)
{
    fence_status st = fence__check_client(c, "fence_token_raise");
    if (st != FENCE_OK) {
        return st;
    }
    st = fence__check_name(c, name);
    if (st != FENCE_OK) {
        return st;
    }
    if (floor > FENCE_TOKEN_MAX) {
        return fence__fail(c, FENCE_EINVAL, "floor above 2^63-1 (FENCE_TOKEN_MAX)");
    }
    uint64_t v = 0;
    st = c->ops->raise(c->iss, name, floor, INT64_MAX, &v);
    if (st == FENCE_OK && token_out != NULL) {
        *token_out = v;
    }
    return st;
}

/* One inspect of name; with want_info also its holder description. */
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
    out->pttl_ms = -1;
    return c->ops->inspect(c->iss, name, want_info, INT64_MAX, out);
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

fence_status fence_client_describe(fence_client *c, fence_issuer_info *out)
{
    fence_status st = fence__check_client(c, "fence_client_describe");
    if (st != FENCE_OK) {
        return st;
    }
    if (out == NULL) {
        return fence__fail(c, FENCE_EINVAL, "fence_client_describe: out is NULL");
    }
    memset(out, 0, sizeof *out);
    snprintf(out->issuer, sizeof out->issuer, "%s", c->ops->name);
    snprintf(out->url, sizeof out->url, "%s", c->ops->url(c->iss));
    st = c->ops->describe(c->iss, INT64_MAX, out);
    if (st == FENCE_OK) {
        fence__clear(c);
    }
    return st;
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
    if (c->ops != &fence__redis_issuer) {
        return fence__fail(c, FENCE_EINVAL, "fence_client_server_info: a Redis call; this "
                           "client's issuer is %s (use fence_client_describe)", c->ops->name);
    }
    st = fence__ri_server_info(c->iss, out);
    if (st == FENCE_OK) {
        fence__clear(c);
    }
    return st;
}
