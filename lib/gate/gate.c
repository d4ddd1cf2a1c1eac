/* gate.c -- the public face of the write gate: argument checks, handles,
 * per-thread messages; the work is done by gate_mem.c or gate_sqlite.c. */
#include "gate_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GATE_DEFAULT_WAIT_MS 5000

/* ------------------------------------------------------------------ */
/* Per-thread messages                                                  */
/* ------------------------------------------------------------------ */

/*
 * A gate is shared by threads, so its message is kept per thread: a few
 * slots per thread, keyed by the gate's unique id (never its address,
 * which a later gate may reuse).  A thread juggling more than
 * MSG_SLOTS failing gates at once loses the oldest message, which then
 * reads as a generic text rather than someone else's detail.
 */
#define MSG_SLOTS 8
#define MSG_MAX 400

typedef struct msg_slot {
    uint64_t gate_id; /* 0 = free */
    uint64_t used;    /* for least-recently-set replacement */
    char text[MSG_MAX];
} msg_slot;

static _Thread_local msg_slot tl_msgs[MSG_SLOTS];
static _Thread_local uint64_t tl_clock;
static uint64_t next_gate_id; /* atomic */

static msg_slot *find_slot(uint64_t id)
{
    for (int i = 0; i < MSG_SLOTS; i++) {
        if (tl_msgs[i].gate_id == id) {
            return &tl_msgs[i];
        }
    }
    return NULL;
}

void fence_gate__set_err(const fence_gate *g, const char *fmt, ...)
{
    msg_slot *s = find_slot(g->id);
    if (s == NULL) {
        s = &tl_msgs[0];
        for (int i = 1; i < MSG_SLOTS; i++) {
            if (tl_msgs[i].used < s->used) {
                s = &tl_msgs[i];
            }
        }
        s->gate_id = g->id;
    }
    s->used = ++tl_clock;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->text, sizeof s->text, fmt, ap);
    va_end(ap);
}

void fence_gate__clear_err(const fence_gate *g)
{
    msg_slot *s = find_slot(g->id);
    if (s != NULL) {
        s->text[0] = '\0';
    }
}

const char *fence_gate_errmsg(const fence_gate *g)
{
    if (g == NULL) {
        return "the gate handle is NULL";
    }
    msg_slot *s = find_slot(g->id);
    return s != NULL ? s->text : "";
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

int64_t fence_gate__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int fence_gate__cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0) {
        return -1;
    }
    int rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0) {
        rc = pthread_cond_init(cond, &attr);
    }
    pthread_condattr_destroy(&attr);
    return rc == 0 ? 0 : -1;
}

int fence_gate__wait_free(pthread_mutex_t *mu, pthread_cond_t *cond, const int *busy,
                          int64_t deadline_ns)
{
    while (*busy) {
        if (deadline_ns < 0) {
            return FENCE_TIMEOUT;
        }
        struct timespec ts = {(time_t)(deadline_ns / 1000000000LL),
                              (long)(deadline_ns % 1000000000LL)};
        int rc = pthread_cond_timedwait(cond, mu, &ts);
        if (rc == ETIMEDOUT && *busy) {
            return FENCE_TIMEOUT;
        }
    }
    return FENCE_OK;
}

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

static int check_options(fence_gate *g, const fence_gate_options *o)
{
    if (o->wait_ms < 0 || o->wait_ms > FENCE_GATE_WAIT_MAX_MS) {
        fence_gate__set_err(g, "wait_ms must be 0..%lld, got %lld", (long long)FENCE_GATE_WAIT_MAX_MS,
                            (long long)o->wait_ms);
        return FENCE_EINVAL;
    }
    if (o->synchronous != FENCE_GATE_SYNC_FULL && o->synchronous != FENCE_GATE_SYNC_NORMAL) {
        fence_gate__set_err(g, "synchronous must be FENCE_GATE_SYNC_FULL or _NORMAL, got %d",
                            o->synchronous);
        return FENCE_EINVAL;
    }
    if (o->path != NULL && o->path[0] == '\0') {
        fence_gate__set_err(g, "path is empty: give a file name, or NULL or \":memory:\" "
                               "for an in-memory gate");
        return FENCE_EINVAL;
    }
    return FENCE_OK;
}

int fence_gate_open(fence_gate **out, const fence_gate_options *opts)
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
    fence_gate__clear_err(g);
    *out = g;

    int rc = check_options(g, opts);
    if (rc != FENCE_OK) {
        return rc;
    }
    g->wait_ms = opts->wait_ms;
    g->synchronous = opts->synchronous;
    g->persistent = opts->path != NULL && strcmp(opts->path, ":memory:") != 0;
    if (pthread_mutex_init(&g->mu, NULL) != 0) {
        fence_gate__set_err(g, "cannot initialise a mutex");
        return FENCE_ESYS;
    }
    if (fence_gate__cond_init(&g->slot_cond) != 0) {
        pthread_mutex_destroy(&g->mu);
        fence_gate__set_err(g, "cannot initialise a condition variable");
        return FENCE_ESYS;
    }
    g->mu_ok = 1;
    if (!g->persistent) {
        return fence_gate__mem_open(g);
    }
    g->path = strdup(opts->path);
    if (g->path == NULL) {
        fence_gate__set_err(g, "out of memory copying the path");
        return FENCE_ENOMEM;
    }
    if (pthread_mutex_init(&g->rmu, NULL) != 0) {
        fence_gate__set_err(g, "cannot initialise a mutex");
        return FENCE_ESYS;
    }
    g->rmu_ok = 1;
    return fence_gate__db_open(g);
}

int fence_gate_close(fence_gate *g)
{
    if (g == NULL) {
        return FENCE_OK;
    }
    unsigned open = g->persistent ? __atomic_load_n(&g->open_txns, __ATOMIC_ACQUIRE)
                                  : fence_gate__mem_held(g);
    if (open > 0) {
        fence_gate__set_err(g, "%u txn(s) of this gate are still open: commit or abort "
                               "them before closing", open);
        return FENCE_ESTATE;
    }
    if (g->persistent) {
        fence_gate__db_close(g);
    } else {
        fence_gate__mem_close(g);
    }
    if (g->rmu_ok) {
        pthread_mutex_destroy(&g->rmu);
    }
    if (g->mu_ok) {
        pthread_cond_destroy(&g->slot_cond);
        pthread_mutex_destroy(&g->mu);
    }
    fence_gate__clear_err(g);
    free(g->path);
    free(g);
    return FENCE_OK;
}

int fence_gate_is_persistent(const fence_gate *g)
{
    return g != NULL && g->persistent;
}

/* ------------------------------------------------------------------ */
/* Writes                                                               */
/* ------------------------------------------------------------------ */

/* Checks a resource name; FENCE_OK or FENCE_EINVAL with a message. */
static int check_resource(const fence_gate *g, const char *resource, size_t *len)
{
    if (resource == NULL) {
        fence_gate__set_err(g, "resource is NULL");
        return FENCE_EINVAL;
    }
    size_t n = strnlen(resource, FENCE_GATE_NAME_MAX + 1);
    if (n == 0) {
        fence_gate__set_err(g, "resource is empty");
        return FENCE_EINVAL;
    }
    if (n > FENCE_GATE_NAME_MAX) {
        fence_gate__set_err(g, "resource name is longer than %d bytes", FENCE_GATE_NAME_MAX);
        return FENCE_EINVAL;
    }
    *len = n;
    return FENCE_OK;
}

static int usable(const fence_gate *g)
{
    /* A handle whose open failed is only good for errmsg and close. */
    if (g->persistent) {
        return g->wdb != NULL && g->st_upsert != NULL && g->st_rselect != NULL;
    }
    return g->nstripes_ok == FENCE_GATE__STRIPES;
}

int fence_gate_begin(fence_gate *g, const char *resource, uint64_t token,
                     fence_gate_txn **out, uint64_t *mark_out)
{
    if (out != NULL) {
        *out = NULL;
    }
    if (mark_out != NULL) {
        *mark_out = 0;
    }
    if (g == NULL) {
        return FENCE_EINVAL;
    }
    fence_gate__clear_err(g);
    if (out == NULL) {
        fence_gate__set_err(g, "out (where the txn goes) is NULL");
        return FENCE_EINVAL;
    }
    size_t len = 0;
    int rc = check_resource(g, resource, &len);
    if (rc != FENCE_OK) {
        return rc;
    }
    if (token == 0) {
        fence_gate__set_err(g, "token 0 for \"%s\": a write needs a fencing token >= 1 "
                               "from a lease", fence_gate__show(resource));
        return FENCE_ENOTOKEN;
    }
    if (token > FENCE_GATE_TOKEN_MAX) {
        fence_gate__set_err(g, "token %llu for \"%s\" is above the largest valid token %llu",
                            (unsigned long long)token, fence_gate__show(resource),
                            (unsigned long long)FENCE_GATE_TOKEN_MAX);
        return FENCE_ENOTOKEN;
    }
    if (!usable(g)) {
        fence_gate__set_err(g, "this gate failed to open; close it");
        return FENCE_ESTATE;
    }
    fence_gate_txn *t = malloc(sizeof *t + len + 1);
    if (t == NULL) {
        fence_gate__set_err(g, "out of memory");
        return FENCE_ENOMEM;
    }
    t->gate = g;
    t->entry = NULL;
    t->token = token;
    t->mark_seen = 0;
    memcpy(t->resource, resource, len + 1);

    rc = g->persistent ? fence_gate__db_begin(g, t) : fence_gate__mem_begin(g, t);
    if (mark_out != NULL && (rc == FENCE_OK || rc == FENCE_STALE)) {
        *mark_out = t->mark_seen;
    }
    if (rc != FENCE_OK) {
        free(t);
        return rc;
    }
    *out = t;
    return FENCE_OK;
}

static int end_txn(fence_gate_txn *t, int commit)
{
    if (t == NULL) {
        return FENCE_EINVAL;
    }
    fence_gate *g = t->gate;
    fence_gate__clear_err(g);
    int rc = g->persistent ? fence_gate__db_end(t, commit) : fence_gate__mem_end(t, commit);
    free(t);
    return rc;
}

int fence_gate_commit(fence_gate_txn *txn)
{
    return end_txn(txn, 1);
}

int fence_gate_abort(fence_gate_txn *txn)
{
    return end_txn(txn, 0);
}

int fence_gate_high_water(fence_gate *g, const char *resource, uint64_t *mark)
{
    if (mark != NULL) {
        *mark = 0;
    }
    if (g == NULL) {
        return FENCE_EINVAL;
    }
    fence_gate__clear_err(g);
    if (mark == NULL) {
        fence_gate__set_err(g, "mark (where the answer goes) is NULL");
        return FENCE_EINVAL;
    }
    size_t len = 0;
    int rc = check_resource(g, resource, &len);
    if (rc != FENCE_OK) {
        return rc;
    }
    if (!usable(g)) {
        fence_gate__set_err(g, "this gate failed to open; close it");
        return FENCE_ESTATE;
    }
    return g->persistent ? fence_gate__db_high_water(g, resource, mark)
                         : fence_gate__mem_high_water(g, resource, mark);
}

uint64_t fence_gate_txn_token(const fence_gate_txn *txn)
{
    return txn != NULL ? txn->token : 0;
}

const char *fence_gate_txn_resource(const fence_gate_txn *txn)
{
    return txn != NULL ? txn->resource : "";
}
