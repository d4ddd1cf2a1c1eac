/* ecall.c -- what the etcd issuer's files share (eissuer.h): messages,
 * keys, the command path's calls, JSON pieces. */
#include "eissuer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>

fence_status fence__ei_fail(const fence__issuer *is, fence_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fence__err_vset(is->et.errslot(), is->et.errkey, (int)st, fmt, ap);
    va_end(ap);
    return st;
}

fence_status fence__ei_nomem(const fence__issuer *is)
{
    return fence__ei_fail(is, FENCE_ENOMEM, "out of memory");
}

/* ---- keys and calls ----------------------------------------------------------------- */

/* "<prefix><kind>/<name>" into buf (room for prefix + name + 3). */
size_t fence__ei_key_of(const fence__issuer *is, char kind, const char *name, size_t namelen,
                     char *buf)
{
    memcpy(buf, is->prefix, is->prefix_len);
    buf[is->prefix_len] = kind;
    buf[is->prefix_len + 1] = '/';
    memcpy(buf + is->prefix_len + 2, name, namelen);
    buf[is->prefix_len + 2 + namelen] = '\0';
    return is->prefix_len + 2 + namelen;
}

/* A call on the command path's line. */
fence_status fence__ei_cmd_call(fence__issuer *is, const char *path, json_t *req,
                             int64_t deadline_us, json_t **resp, int *twice, int *code)
{
    if (req == NULL) {
        return fence__ei_nomem(is);
    }
    pthread_mutex_lock(&is->cmd_lock);
    fence_status st = fence__et_call(&is->et, &is->cmd, path, req, deadline_us, resp, twice,
                                     code);
    is->cmd_down = st == FENCE_ECONN;
    pthread_mutex_unlock(&is->cmd_lock);
    json_decref(req);
    return st;
}

json_t *fence__ei_kjson(const char *k, size_t n)
{
    return fence__et_b64(k, n);
}

json_t *fence__ei_idjson(int64_t id)
{
    char s[24];
    snprintf(s, sizeof s, "%" PRId64, id);
    return json_string(s);
}

/* A range request op of key. */
json_t *fence__ei_range_op(const char *k, size_t n, int keys_only)
{
    return json_pack("{s:{s:o, s:b}}", "request_range", "key", fence__ei_kjson(k, n), "keys_only",
                     keys_only);
}

/* The first kv of a txn response's i-th range, or NULL. */
json_t *fence__ei_range_kv(const json_t *resp, size_t i)
{
    json_t *rs = json_object_get(resp, "responses");
    json_t *rr = json_object_get(json_array_get(rs, i), "response_range");
    return json_array_get(json_object_get(rr, "kvs"), 0);
}

int64_t fence__ei_server_ttl_s(int64_t ttl_ms)
{
    return (ttl_ms + 999) / 1000; /* whole seconds, rounded up */
}

void fence__ei_lease_revoke(fence__issuer *is, int64_t id, int64_t deadline_us)
{
    json_t *resp = NULL;
    if (fence__ei_cmd_call(is, "/v3/lease/revoke", json_pack("{s:o}", "ID", fence__ei_idjson(id)), deadline_us,
                 &resp, NULL, NULL) == FENCE_OK) {
        json_decref(resp);
    }
}

