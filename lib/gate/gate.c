/* gate.c -- the public face of the write gate: argument checks, handles,
 * txns.  The work is done by a backing (gate_mem.c or gate_sqlite.c),
 * called through the gate's ops table; see gate_internal.h for the
 * layers. */
#include "gate_internal.h"

#include <stdlib.h>
#include <string.h>

#define GATE_DEFAULT_WAIT_MS 5000

static uint64_t next_gate_id; /* atomic */

/* ------------------------------------------------------------------ */
/* Open and close                                                       */
/* ------------------------------------------------------------------ */

void fence_gate_options_init(fence_gate_options *opts)
{
    if (opts == NULL) {
        return;
    }
    memset(opts, 0, sizeof *opts);
    opts->path = NULL;
    opts->wait_ms = GATE_DEFAULT_WAIT_MS;
    opts->synchronous = FENCE_GATE_SYNC_FULL;
}

static fence_status check_options(fence_gate *g, const fence_gate_options *o)
{
    if (o->wait_ms < 0 || o->wait_ms > FENCE_GATE_WAIT_MAX_MS) {
        return fence_gate__fail(g, FENCE_EINVAL, "wait_ms must be 0..%lld, got %lld",
                                (long long)FENCE_GATE_WAIT_MAX_MS, (long long)o->wait_ms);
    }
    if (o->synchronous != FENCE_GATE_SYNC_FULL && o->synchronous != FENCE_GATE_SYNC_NORMAL) {
        return fence_gate__fail(g, FENCE_EINVAL, "synchronous must be FENCE_GATE_SYNC_FULL or "
                                "_NORMAL, got %d", o->synchronous);
    }
    if (o->path != NULL && o->path[0] == '\0') {
        return fence_gate__fail(g, FENCE_EINVAL, "path is empty: give a file name, or NULL or "
                                "\":memory:\" for an in-memory gate");
    }
    return FENCE_OK;
}

fence_status fence_gate_open(fence_gate **out, const fence_gate_options *opts)
{
    if (out == NULL) {
        return FENCE_EINVAL;
    }
    *out = NULL;
    fence_gate_options defaults;
    fence_gate_options_init(&defaults);
    if (opts == NULL) {
        opts = &defaults;
    }
    fence_gate *g = calloc(1, sizeof *g);
    if (g == NULL) {
        return FENCE_ENOMEM;
    }
    g->id = __atomic_add_fetch(&next_gate_id, 1, __ATOMIC_RELAXED);
    *out = g;

    fence_status rc = check_options(g, opts);
    if (rc != FENCE_OK) {
        return rc;
    }
    g->wait_ms = opts->wait_ms;
    g->synchronous = opts->synchronous;
    g->persistent = opts->path != NULL && strcmp(opts->path, ":memory:") != 0;
    g->ops = g->persistent ? &fence_gate__sqlite_ops : &fence_gate__mem_ops;
    rc = g->ops->open(g, g->persistent ? opts->path : NULL);
    g->ok = rc == FENCE_OK;
    return rc;
}

fence_status fence_gate_close(fence_gate *g)
{
    if (g == NULL) {
        return FENCE_OK;
    }
    if (g->ops != NULL) {
        unsigned open = g->ops->open_txns(g);
        if (open > 0) {
            return fence_gate__fail(g, FENCE_ESTATE, "%u txn(s) of this gate are still open: "
                                    "commit or abort them before closing", open);
        }
        g->ops->close(g);
    }
    fence_gate__err_clear(g);
    free(g);
    return FENCE_OK;
}

const char *fence_gate_errmsg(const fence_gate *g)
{
    if (g == NULL) {
        return "the gate handle is NULL";
    }
    return fence_gate__err_get(g);
}

int fence_gate_is_persistent(const fence_gate *g)
{
    return g != NULL && g->persistent;
}

/* ------------------------------------------------------------------ */
/* Writes                                                               */
/* ------------------------------------------------------------------ */

/* A resource name: 1..FENCE_NAME_MAX bytes, any but NUL.  FENCE_OK, or
 * FENCE_EINVAL with a message. */
static fence_status check_resource(const fence_gate *g, const char *resource)
{
    const char *why = fence__name_problem(resource, FENCE__NAME_ANY_BYTE, NULL);
    if (why != NULL) {
        return fence_gate__fail(g, FENCE_EINVAL, "resource %s", why);
    }
    return FENCE_OK;
}

/* A handle whose open failed is only good for errmsg and close. */
static fence_status check_opened(const fence_gate *g)
{
    if (!g->ok) {
        return fence_gate__fail(g, FENCE_ESTATE, "this gate failed to open; close it");
    }
    return FENCE_OK;
}

static fence_status check_token(const fence_gate *g, const char *resource, uint64_t token)
{
    if (token == 0) {
        return fence_gate__fail(g, FENCE_ENOTOKEN, "token 0 for \"%s\": a write needs a "
                                "fencing token >= 1 from a lease", fence_gate__show(resource));
    }
    if (token > FENCE_TOKEN_MAX) {
        return fence_gate__fail(g, FENCE_ENOTOKEN, "token %llu for \"%s\" is above the largest "
                                "valid token %llu", (unsigned long long)token,
                                fence_gate__show(resource), (unsigned long long)FENCE_TOKEN_MAX);
    }
    return FENCE_OK;
}

/* Nonzero when the 32 bytes at h are all lowercase hex digits: eight at a
 * time, each byte tested for '0'..'9' or 'a'..'f' (begin is a hot path). */
static int lower_hex32(const char *h)
{
    const uint64_t L = 0x0101010101010101ULL, H = 0x8080808080808080ULL;
    uint64_t bad = 0;
    for (int i = 0; i < FENCE_HOLDER_LEN; i += 8) {
        uint64_t w;
        memcpy(&w, h + i, sizeof w);
        /* Per byte x < 0x80: ((x | 0x80) - c) & 0x80 is set iff x >= c,
         * and no byte borrows from the next. */
        uint64_t x = w | H;
        uint64_t digit = ((x - 0x30 * L) & ~(x - 0x3a * L)) & H;
        uint64_t alpha = ((x - 0x61 * L) & ~(x - 0x67 * L)) & H;
        bad |= (w & H) | ((digit | alpha) ^ H);
    }
    return bad == 0;
}

/* A holder id: NULL (none), or exactly FENCE_HOLDER_LEN lowercase hex
 * digits.  FENCE_OK, or FENCE_EINVAL with a message saying what is wrong. */
static fence_status check_holder(const fence_gate *g, const char *holder)
{
    static const char want[] = "a holder id is exactly 32 lowercase hex digits (NULL: none)";
    _Static_assert(FENCE_HOLDER_LEN == 32, "the message says 32");
    if (holder == NULL) {
        return FENCE_OK;
    }
    size_t n = strnlen(holder, FENCE_HOLDER_LEN + 1);
    if (n == FENCE_HOLDER_LEN && lower_hex32(holder)) {
        return FENCE_OK;
    }
    /* The slow path only says why. */
    size_t bad = SIZE_MAX;
    const char *why = fence__holder_problem(holder, n, &bad);
    if (bad != SIZE_MAX) {
        unsigned char c = (unsigned char)holder[bad];
        return fence_gate__fail(g, FENCE_EINVAL, "holder has byte 0x%02x ('%c') at offset %zu: %s",
                                c, c > 32 && c < 127 ? c : '?', bad, want);
    }
    if (why == NULL) { /* lower_hex32 and the common check disagree: never */
        return fence_gate__fail(g, FENCE_EINVAL, "holder is malformed: %s", want);
    }
    return fence_gate__fail(g, FENCE_EINVAL, "holder is %s %d characters long: %s",
                            n < FENCE_HOLDER_LEN ? "only" : "more than",
                            n < FENCE_HOLDER_LEN ? (int)n : FENCE_HOLDER_LEN, want);
}

static void describe_stale(fence_stale *stale, const fence_gate_txn *t)
{
    stale->offered = t->token;
    stale->highest = t->mark_seen;
    stale->kind = FENCE_OBJECT_RESOURCE;
    stale->reason = t->rule == FENCE__RULE_REPEAT ? FENCE_STALE_REPEAT : FENCE_STALE_OLDER;
    fence_gate__holder_copy(stale->holder, t->mark_holder);
    /* A resource name (<= FENCE_NAME_MAX bytes) always fits. */
    _Static_assert(sizeof stale->object > FENCE_NAME_MAX, "fence_stale.object holds a name");
    strcpy(stale->object, t->resource);
}

fence_status fence_gate_begin(fence_gate *g, const char *resource, uint64_t token,
                              const char *holder, fence_gate_txn **out, fence_stale *stale)
{
    if (out != NULL) {
        *out = NULL;
    }
    if (stale != NULL) {
        memset(stale, 0, sizeof *stale);
    }
    if (g == NULL) {
        return FENCE_EINVAL;
    }
    fence_gate__err_clear(g);
    if (out == NULL) {
        return fence_gate__fail(g, FENCE_EINVAL, "out (where the txn goes) is NULL");
    }
    fence_status rc = check_resource(g, resource);
    if (rc == FENCE_OK) {
        rc = check_token(g, resource, token);
    }
    if (rc == FENCE_OK) {
        rc = check_holder(g, holder);
    }
    if (rc == FENCE_OK) {
        rc = check_opened(g);
    }
    if (rc != FENCE_OK) {
        return rc;
    }
    size_t len = strlen(resource);
    fence_gate_txn *t = malloc(sizeof *t + len + 1);
    if (t == NULL) {
        return fence_gate__fail(g, FENCE_ENOMEM, "out of memory");
    }
    t->gate = g;
    t->hold = NULL;
    t->token = token;
    t->mark_seen = 0;
    t->rule = FENCE__RULE_OLDER; /* until a backing's begin says */
    fence_gate__holder_copy(t->holder, holder != NULL ? holder : "");
    memcpy(t->resource, resource, len + 1);

    rc = g->ops->begin(g, t);
    if (rc == FENCE_OK) {
        *out = t;
        return FENCE_OK;
    }
    if (rc == FENCE_STALE && stale != NULL) {
        describe_stale(stale, t);
    }
    free(t);
    return rc;
}

fence_status fence_gate_commit(fence_gate_txn *txn)
{
    if (txn == NULL) {
        return FENCE_EINVAL;
    }
    fence_gate__err_clear(txn->gate);
    fence_status rc = txn->gate->ops->commit(txn);
    free(txn);
    return rc;
}

fence_status fence_gate_abort(fence_gate_txn *txn)
{
    if (txn == NULL) {
        return FENCE_EINVAL;
    }
    fence_gate__err_clear(txn->gate);
    fence_status rc = txn->gate->ops->abort(txn);
    free(txn);
    return rc;
}

fence_status fence_gate_mark(fence_gate *g, const char *resource, uint64_t *mark)
{
    if (mark != NULL) {
        *mark = 0;
    }
    if (g == NULL) {
        return FENCE_EINVAL;
    }
    fence_gate__err_clear(g);
    if (mark == NULL) {
        return fence_gate__fail(g, FENCE_EINVAL, "mark (where the answer goes) is NULL");
    }
    fence_status rc = check_resource(g, resource);
    if (rc == FENCE_OK) {
        rc = check_opened(g);
    }
    if (rc != FENCE_OK) {
        return rc;
    }
    return g->ops->mark(g, resource, mark);
}

uint64_t fence_gate_txn_token(const fence_gate_txn *txn)
{
    return txn != NULL ? txn->token : 0;
}

uint64_t fence_gate_txn_mark(const fence_gate_txn *txn)
{
    return txn != NULL ? txn->mark_seen : 0;
}

const char *fence_gate_txn_resource(const fence_gate_txn *txn)
{
    return txn != NULL ? txn->resource : "";
}

const char *fence_gate_txn_holder(const fence_gate_txn *txn)
{
    return txn != NULL ? txn->holder : "";
}
