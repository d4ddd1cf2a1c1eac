/* ewait.c -- waiting for a release of a name: a /v3/watch of its owner key
 * for a delete, from the revision read when the waiter was opened, so a
 * release between the attempt and the wait is seen (eissuer.h). */
#include "eissuer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fence__waiter {
    fence__issuer *is;
    fence__et_line ln;
    int64_t start_rev;
    size_t keylen;
    char key[];
};


/* ---- waiting ------------------------------------------------------------------------------ */

fence__waiter *fence__ei_wait_open(fence__issuer *is, const char *name, int64_t deadline_us)
{
    size_t n = strlen(name);
    fence__waiter *w = calloc(1, sizeof *w + is->prefix_len + n + 3);
    if (w == NULL) {
        return NULL;
    }
    w->is = is;
    w->keylen = fence__ei_key_of(is, 'o', name, n, w->key);
    /* The revision now: the watch starts after it, so a release between
     * this and the wait is seen. */
    json_t *req = json_pack("{s:o, s:b}", "key", fence__ei_kjson(w->key, w->keylen), "count_only", 1);
    json_t *resp = NULL;
    fence_status st = req != NULL ? fence__et_call(&is->et, &w->ln, "/v3/kv/range", req,
                                                   deadline_us, &resp, NULL, NULL)
                                  : FENCE_ENOMEM;
    json_decref(req);
    int64_t rev = 0;
    if (st == FENCE_OK) {
        fence__et_int(json_object_get(resp, "header"), "revision", &rev);
        json_decref(resp);
    }
    if (st != FENCE_OK || rev <= 0) {
        fence__et_line_close(&w->ln);
        free(w);
        return NULL;
    }
    w->start_rev = rev + 1;
    return w;
}

typedef struct watch_ctx {
    int released;
    int failed;
} watch_ctx;

static int on_watch(void *arg, json_t *v)
{
    watch_ctx *c = arg;
    json_t *res = json_object_get(v, "result");
    if (res == NULL) {
        c->failed = 1;
        return 1;
    }
    int64_t compact = 0;
    fence__et_int(res, "compact_revision", &compact);
    if (compact != 0 || json_is_true(json_object_get(res, "canceled"))) {
        c->released = 1; /* history gone: a release may have happened */
        return 1;
    }
    json_t *ev = json_object_get(res, "events");
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *t = json_object_get(json_array_get(ev, i), "type");
        if (json_is_string(t) && strcmp(json_string_value(t), "DELETE") == 0) {
            c->released = 1;
            return 1;
        }
    }
    return 0;
}

int fence__ei_wait(fence__waiter *w, int64_t deadline_us)
{
    json_t *req = json_pack("{s:{s:o, s:o, s:[s]}}", "create_request", "key",
                            fence__ei_kjson(w->key, w->keylen), "start_revision", fence__ei_idjson(w->start_rev),
                            "filters", "NOPUT");
    char *body = req != NULL ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (body == NULL) {
        return -1;
    }
    watch_ctx c = {0, 0};
    int timed_out = 0;
    fence_status st = fence__et_stream(&w->is->et, &w->ln, "/v3/watch", NULL, body, deadline_us,
                                       on_watch, &c, &timed_out);
    free(body);
    if (c.released) {
        return 1;
    }
    if (timed_out || (st == FENCE_OK && !c.failed && fence__now_us() >= deadline_us)) {
        return 0;
    }
    return -1;
}

void fence__ei_wait_close(fence__waiter *w)
{
    if (w != NULL) {
        fence__et_line_close(&w->ln);
        free(w);
    }
}

