/* errmsg.c -- libfence_gate's slot in lib/common's error-message scheme:
 * the gate's error messages, per gate and per thread, through lib/common's
 * error slots (fence__errslot).
 *
 * A gate is shared by threads, so each thread keeps its own messages.  A
 * thread may use several gates, so it keeps a few slots (not one), each
 * about one gate, and a failure on one gate does not wipe the message of
 * another; the least recently set slot is reused.  A slot is keyed by the
 * gate's id, unique per open, not by its address, which a later gate may
 * reuse: a message about a closed gate never shows up on a new one. */
#include "gate_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define SLOTS 8

static _Thread_local fence__errslot tl_err[SLOTS];
static _Thread_local uint64_t tl_used[SLOTS]; /* when each slot was last set */
static _Thread_local uint64_t tl_clock;
/* How many of the thread's slots hold a message: while none do (no call
 * of this thread failed, or every failure was followed by a success),
 * clearing is a single test -- the gate clears on every call. */
static _Thread_local int tl_nset;

/* The key of g's slot.  Ids start at 1, so no key is NULL (common.h's
 * "no handle"). */
static const void *key_of(const fence_gate *g)
{
    return (const void *)(uintptr_t)g->id;
}

static fence__errslot *find_slot(const void *key)
{
    for (int i = 0; i < SLOTS; i++) {
        if (tl_err[i].handle == key) {
            return &tl_err[i];
        }
    }
    return NULL;
}

fence_status fence_gate__fail(const fence_gate *g, fence_status status, const char *fmt, ...)
{
    const void *key = key_of(g);
    int k = 0;
    for (int i = 0; i < SLOTS; i++) {
        if (tl_err[i].handle == key) {
            k = i;
            break;
        }
        if (tl_used[i] < tl_used[k]) {
            k = i;
        }
    }
    tl_used[k] = ++tl_clock;
    int was_set = tl_err[k].msg[0] != '\0';
    va_list ap;
    va_start(ap, fmt);
    fence__err_vset(&tl_err[k], key, status, fmt, ap);
    va_end(ap);
    tl_nset += (tl_err[k].msg[0] != '\0') - was_set;
    return status;
}

void fence_gate__err_clear(const fence_gate *g)
{
    if (tl_nset == 0) {
        return;
    }
    fence__errslot *s = find_slot(key_of(g));
    if (s != NULL && s->msg[0] != '\0') {
        fence__err_clear(s, s->handle);
        tl_nset--;
    }
}

const char *fence_gate__err_get(const fence_gate *g)
{
    const void *key = key_of(g);
    fence__errslot *s = find_slot(key);
    return s != NULL ? fence__err_get(s, key) : "";
}

fence_status fence_gate__fail_stale(const fence_gate *g, const fence_gate_txn *t)
{
    if (t->rule != FENCE__RULE_REPEAT) {
        return fence_gate__fail(g, FENCE_STALE, "stale token %llu for \"%s\": a write with "
                                "token %llu was already accepted", (unsigned long long)t->token,
                                fence_gate__show(t->resource),
                                (unsigned long long)t->mark_seen);
    }
    const char *had = t->mark_holder, *has = t->holder;
    return fence_gate__fail(g, FENCE_STALE, "repeated token %llu for \"%s\": it was accepted "
                            "from %s%s, this write is from %s%s (one token issued to two "
                            "holders, as after a Redis failover)", (unsigned long long)t->token,
                            fence_gate__show(t->resource), had[0] ? "holder " : "no holder",
                            had, has[0] ? "holder " : "no holder", has);
}

const char *fence_gate__show(const char *resource)
{
    static _Thread_local char buf[96];
    size_t n = strlen(resource);
    if (n < sizeof buf) {
        return resource;
    }
    snprintf(buf, sizeof buf, "%.60s...(%zu bytes)", resource, n);
    return buf;
}
