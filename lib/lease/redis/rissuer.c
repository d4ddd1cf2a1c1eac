/* rissuer.c -- the Redis issuer (issuer.h's operations, fence__redis_issuer):
 * its options, the check of a server before a connection's first token
 * (an evicting maxmemory-policy refused), and each operation as one script
 * call on the engine's command line (rscripts.c says what goes and what
 * comes back), renewals of the heartbeat on its own connection (rrenew.c). */
#include "rissuer.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_TIMEOUT_MS 2000
#define MAX_PREFIX 64

/* ---- the server check --------------------------------------------------------- */

int fence__ri_persistence(const fence__srvinfo *si)
{
    if (si->aof == 1) {
        return si->rdb == 1 ? FENCE_PERSIST_AOF_RDB : FENCE_PERSIST_AOF;
    }
    if (si->aof == 0 && si->rdb >= 0) {
        return si->rdb == 1 ? FENCE_PERSIST_RDB : FENCE_PERSIST_OFF;
    }
    return si->rdb == 1 ? FENCE_PERSIST_RDB : FENCE_PERSIST_UNKNOWN;
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

static int persistence_gauge(int p)
{
    return p == FENCE_PERSIST_UNKNOWN ? -1 : p != FENCE_PERSIST_OFF;
}

/* The engine's first_use hook: before the first token on a connection,
 * record the persistence gauge and refuse a server that may evict keys
 * (FENCE_ECONFIG, a message naming the policy) unless the client allows
 * eviction.  Every policy but noeviction evicts: allkeys-* any key,
 * volatile-* keys with a TTL -- and a held lease's owner key always has
 * one, so volatile-lru / -lfu / -random / -ttl pick exactly the keys that
 * hold leases (a second holder at once). */
static fence_status check_server(void *arg, const fence__srvinfo *si)
{
    fence__issuer *ri = arg;
    const fence__redis *rd = &ri->rd;
    atomic_store(&ri->persistence, persistence_gauge(fence__ri_persistence(si)));
    if (ri->allow_eviction) {
        return FENCE_OK;
    }
    if (si->maxmemory_policy[0] == '\0') {
        return fence__rd_fail(rd, FENCE_ECONFIG, "%s: cannot read maxmemory_policy (INFO memory "
                              "refused?): an evicting policy could drop held leases and token "
                              "counters; set allow_eviction to issue tokens anyway",
                              rd->url.display);
    }
    if (strcmp(si->maxmemory_policy, "noeviction") != 0) {
        int volatile_ = strncmp(si->maxmemory_policy, "volatile-", 9) == 0;
        return fence__rd_fail(rd, FENCE_ECONFIG, "%s: maxmemory-policy is %s: Redis may evict %s "
                              "(two holders at once, tokens repeated); use noeviction, or set "
                              "allow_eviction", rd->url.display, si->maxmemory_policy,
                              volatile_ ? "a held lease's owner key, since owner keys always "
                                          "carry a TTL and volatile-* policies evict keys that "
                                          "have one"
                                        : "a held lease or a token counter");
    }
    return FENCE_OK;
}

/* ---- options ------------------------------------------------------------------- */

static char *dup_secret(const char *s, int *nomem)
{
    char *d = strdup(s);
    *nomem |= d == NULL;
    return d;
}

/* Token mode, jump, clock limit, counter idle time, eviction, the WAIT gate. */
static fence_status check_token_opts(fence__issuer *ri, const fence_client_options *o)
{
    const fence__redis *rd = &ri->rd;
    if (o->token_mode != FENCE_TOKENS_CLOCK && o->token_mode != FENCE_TOKENS_DENSE) {
        return fence__rd_fail(rd, FENCE_EINVAL, "token_mode must be FENCE_TOKENS_CLOCK (0) or "
                              "FENCE_TOKENS_DENSE (1)");
    }
    if (o->token_jump_ms < 0 || o->token_jump_ms > FENCE_TOKEN_JUMP_MAX_MS) {
        return fence__rd_fail(rd, FENCE_EINVAL, "token_jump_ms must be 0 (default %d) to %lld ms",
                              FENCE_TOKEN_JUMP_DEFAULT_MS, (long long)FENCE_TOKEN_JUMP_MAX_MS);
    }
    if (o->token_jump_ms != 0 && o->token_mode == FENCE_TOKENS_DENSE) {
        return fence__rd_fail(rd, FENCE_EINVAL, "token_jump_ms applies to clock tokens only "
                              "(token_mode is FENCE_TOKENS_DENSE)");
    }
    if (o->clock_behind_limit_ms < 0 || o->clock_behind_limit_ms > FENCE_TOKEN_JUMP_MAX_MS) {
        return fence__rd_fail(rd, FENCE_EINVAL, "clock_behind_limit_ms must be 0 (none) to %lld "
                              "ms", (long long)FENCE_TOKEN_JUMP_MAX_MS);
    }
    if (o->clock_behind_limit_ms != 0 && o->token_mode == FENCE_TOKENS_DENSE) {
        return fence__rd_fail(rd, FENCE_EINVAL, "clock_behind_limit_ms applies to clock tokens "
                              "only (token_mode is FENCE_TOKENS_DENSE)");
    }
    if (o->counter_idle_ms < -1 || o->counter_idle_ms > FENCE_COUNTER_IDLE_MAX_MS) {
        return fence__rd_fail(rd, FENCE_EINVAL, "counter_idle_ms must be -1 (never), 0 (default "
                              "%lld) or 1 to %lld ms", (long long)FENCE_COUNTER_IDLE_DEFAULT_MS,
                              (long long)FENCE_COUNTER_IDLE_MAX_MS);
    }
    if (o->counter_idle_ms != 0 && o->token_mode == FENCE_TOKENS_DENSE) {
        return fence__rd_fail(rd, FENCE_EINVAL, "counter_idle_ms applies to clock tokens only "
                              "(dense counters never expire)");
    }
    if (o->allow_eviction != 0 && o->allow_eviction != 1) {
        return fence__rd_fail(rd, FENCE_EINVAL, "allow_eviction must be 0 or 1");
    }
    if (o->min_replicas < 0 || o->min_replicas > FENCE_MIN_REPLICAS_MAX) {
        return fence__rd_fail(rd, FENCE_EINVAL, "min_replicas must be 0 (off) to %d",
                              FENCE_MIN_REPLICAS_MAX);
    }
    if (o->replica_timeout_ms < 0 || o->replica_timeout_ms > FENCE_REPLICA_TIMEOUT_MAX_MS) {
        return fence__rd_fail(rd, FENCE_EINVAL, "replica_timeout_ms must be 0 (default %d) to %d "
                              "ms", FENCE_REPLICA_TIMEOUT_DEFAULT_MS,
                              FENCE_REPLICA_TIMEOUT_MAX_MS);
    }
    if (o->replica_timeout_ms != 0 && o->min_replicas == 0) {
        return fence__rd_fail(rd, FENCE_EINVAL, "replica_timeout_ms needs min_replicas > 0");
    }
    ri->token_mode = o->token_mode;
    ri->token_jump_ms = o->token_jump_ms ? o->token_jump_ms : FENCE_TOKEN_JUMP_DEFAULT_MS;
    ri->clock_behind_limit_ms = o->clock_behind_limit_ms;
    ri->counter_idle_ms = o->counter_idle_ms ? o->counter_idle_ms
                                             : FENCE_COUNTER_IDLE_DEFAULT_MS;
    ri->allow_eviction = o->allow_eviction;
    ri->min_replicas = o->min_replicas;
    ri->replica_timeout_ms = o->replica_timeout_ms ? o->replica_timeout_ms
                                                   : FENCE_REPLICA_TIMEOUT_DEFAULT_MS;
    ri->mode_arg = ri->token_mode == FENCE_TOKENS_DENSE ? "dense" : "clock";
    snprintf(ri->jump_arg, sizeof ri->jump_arg, "%" PRId64, ri->token_jump_ms * 1000);
    snprintf(ri->limit_arg, sizeof ri->limit_arg, "%" PRId64, ri->clock_behind_limit_ms * 1000);
    snprintf(ri->idle_arg, sizeof ri->idle_arg, "%" PRId64, ri->counter_idle_ms);
    return FENCE_OK;
}

/* The rest: prefix, URL, transport (TLS, Sentinels), credentials, timeouts. */
static fence_status setup(fence__issuer *ri, const fence_client_options *o)
{
    fence__redis *rd = &ri->rd;
    fence_status st = check_token_opts(ri, o);
    if (st != FENCE_OK) {
        return st;
    }
    const char *prefix = o->prefix != NULL ? o->prefix : "fence:";
    if (strlen(prefix) > MAX_PREFIX) {
        return fence__rd_fail(rd, FENCE_EINVAL, "prefix longer than %d bytes", MAX_PREFIX);
    }
    if (strchr(prefix, '{') != NULL || strchr(prefix, '}') != NULL) {
        return fence__rd_fail(rd, FENCE_EINVAL, "prefix must not contain '{' or '}' (the lease "
                              "name is the hash tag)");
    }
    char err[256];
    int ust = fence__url_parse(&rd->url, o->url, err, sizeof err);
    if (ust != FENCE_OK) {
        return fence__rd_fail(rd, ust == FENCE_ENOMEM ? FENCE_ENOMEM : FENCE_EINVAL, "%s",
                              ust == FENCE_ENOMEM ? "out of memory" : err);
    }
    fence__rd_opts ro = {o->tls, o->tls_insecure, o->tls_ca_file, o->tls_ca_dir,
                         o->tls_cert_file, o->tls_key_file, o->tls_server_name,
                         o->sentinel_username, o->sentinel_password};
    st = fence__conn_config(rd, &ro);
    if (st != FENCE_OK) {
        return st;
    }
    int nomem = 0;
    if (o->username != NULL) {
        fence__wipe_free(rd->url.user);
        rd->url.user = dup_secret(o->username, &nomem);
    }
    if (o->password != NULL) {
        fence__wipe_free(rd->url.password);
        rd->url.password = dup_secret(o->password, &nomem);
    }
    ri->prefix = strdup(prefix);
    if (nomem || ri->prefix == NULL) {
        return fence__rd_fail(rd, FENCE_ENOMEM, "out of memory");
    }
    ri->prefix_len = strlen(ri->prefix);
    if (rd->url.user != NULL && rd->url.password == NULL) {
        return fence__rd_fail(rd, FENCE_EINVAL, "a user name needs a password");
    }
    rd->connect_timeout_ms = o->connect_timeout_ms ? o->connect_timeout_ms : DEFAULT_TIMEOUT_MS;
    rd->io_timeout_ms = o->io_timeout_ms ? o->io_timeout_ms : DEFAULT_TIMEOUT_MS;
    return FENCE_OK;
}

static fence_status ri_open(fence__issuer **out, const fence_client_options *o,
                            const fence__iss_env *env)
{
    *out = NULL;
    fence__issuer *ri = calloc(1, sizeof *ri);
    if (ri == NULL) {
        return (fence_status)fence__err_set(env->errslot(), env->errkey, FENCE_ENOMEM,
                                            "out of memory");
    }
    ri->env = *env;
    ri->rd.errkey = env->errkey;
    ri->rd.errslot = env->errslot;
    atomic_init(&ri->persistence, -1);
    if (fence__rd_init(&ri->rd) != 0) {
        pthread_mutex_destroy(&ri->rd.cmd_lock);
        free(ri);
        return (fence_status)fence__err_set(env->errslot(), env->errkey, FENCE_ENOMEM,
                                            "out of memory (a condition variable)");
    }
    *out = ri;
    ri->rd.first_use = check_server;
    ri->rd.first_use_arg = ri;
    fence_status st = fence__ri_scripts(&ri->rd);
    return st != FENCE_OK ? st : setup(ri, o);
}

static void ri_close(fence__issuer *ri)
{
    fence__conn_drop(&ri->hb);
    fence__rd_close(&ri->rd);
    free(ri->prefix);
    free(ri);
}

/* Two keys of name, "<prefix>{name}" and "<prefix>{name}:token" (then
 * "...:info" with want_info), into one malloc'd block. */
static char *name_keys(const fence__issuer *ri, const char *name, const char **keys, int n)
{
    static const char *const suf[3] = {"", ":token", ":info"};
    size_t len = strlen(name), each = ri->prefix_len + len + 2 + 7;
    char *block = malloc((size_t)n * each);
    for (int i = 0; block != NULL && i < n; i++) {
        char *k = block + (size_t)i * each;
        snprintf(k, each, "%s{%s}%s", ri->prefix, name, suf[i]);
        keys[i] = k;
    }
    return block;
}

/* A server that wants a password we did not give answers NOAUTH only now:
 * ask it something harmless to find out. */
static fence_status probe(fence__issuer *ri, int64_t deadline_us)
{
    const char *keys[2];
    char *block = name_keys(ri, "probe", keys, 2);
    if (block == NULL) {
        return fence__rd_fail(&ri->rd, FENCE_ENOMEM, "out of memory");
    }
    void *r = NULL;
    fence_status st = fence__eval_cmd(&ri->rd, FENCE__INSPECT, 2, 2, keys, deadline_us, NULL,
                                      NULL, &r);
    if (r != NULL) {
        freeReplyObject(r);
    }
    free(block);
    return st;
}

/* Connect the command connection, load the scripts, detect a cluster. */
static fence_status ri_start(fence__issuer *ri, int64_t deadline_us)
{
    fence__redis *rd = &ri->rd;
    int64_t left = (deadline_us - fence__now_us()) / 1000;
    pthread_mutex_lock(&rd->cmd_lock);
    /* Nobody else uses the line yet: the setup goes directly. */
    fence__conn **cn = &rd->cmd.p.cn;
    fence_status st = fence__conn_open(rd, cn, left > 0 && deadline_us != INT64_MAX ? left : 0);
    rd->cmd.ever = st == FENCE_OK;
    rd->cmd.gen += st == FENCE_OK;
    if (st == FENCE_OK) {
        /* CLUSTER SLOTS rides along: a cluster is detected at no cost
         * (a Sentinel-managed master is never one). */
        void *slots = NULL;
        fence__scripts_load(rd, *cn, rd->url.sentinel ? NULL : &slots);
        if ((*cn)->err) {
            st = fence__rd_fail(rd, FENCE_ECONN, "%s: connection failed: %s", rd->url.display,
                                (*cn)->errstr);
            fence__conn_drop(cn);
        } else {
            st = fence__cluster_init(rd, slots, rd->url.is_unix ? "127.0.0.1" : rd->url.host);
        }
        if (slots != NULL) {
            freeReplyObject(slots);
        }
    }
    pthread_mutex_unlock(&rd->cmd_lock);
    return st == FENCE_OK ? probe(ri, deadline_us) : st;
}

static const char *ri_url(const fence__issuer *ri)
{
    return ri != NULL ? ri->rd.url.display : "";
}

static int ri_down(fence__issuer *ri)
{
    fence__redis *rd = &ri->rd;
    pthread_mutex_lock(&rd->cmd_lock);
    /* In a cluster, the call's own budget already gave up.  A request
     * still queued is one the server has not answered. */
    const fence__pipe *p = &rd->cmd.p;
    int down = rd->cl != NULL || p->cn == NULL || p->cn->err != 0 || p->head != NULL;
    pthread_mutex_unlock(&rd->cmd_lock);
    return down;
}

static fence_status ri_check_name(fence__issuer *ri, const char *name)
{
    if (ri->rd.cl != NULL && name[0] == '}') {
        /* "<prefix>{}..." has an empty hash tag: each key of the lease
         * would hash whole, to a slot of its own (CROSSSLOT). */
        return fence__rd_fail(&ri->rd, FENCE_EINVAL, "lease name may not start with '}' in a "
                              "Redis Cluster (its keys would have an empty hash tag and land in "
                              "different slots)");
    }
    return FENCE_OK;
}

static size_t ri_lease_room(const fence__issuer *ri, size_t namelen)
{
    return fence__ri_room(ri, namelen);
}

static void ri_lease_init(fence__issuer *ri, fence__ilease *l)
{
    fence__ri_keys(ri, l);
}

/* ---- the lease operations ---------------------------------------------------------- */

/* Fewer replicas than asked acknowledged the acquisition of l (token
 * granted): give it back (compare-and-delete) and say how many did. */
static fence_status too_few_replicas(fence__issuer *ri, fence__ilease *l, long long acked,
                                     int64_t deadline_us)
{
    const char *args[4];
    int nkeys = 1, nargs = fence__ri_release_args(ri, l, args, &nkeys);
    void *r = NULL;
    fence_status st = fence__eval_cmd(&ri->rd, FENCE__RELEASE, nkeys, nargs, args, deadline_us,
                                      NULL, NULL, &r);
    if (r != NULL) {
        freeReplyObject(r);
    }
    return fence__rd_fail(&ri->rd, FENCE_EREPLICAS, "%lld of %d replicas acknowledged lease "
                          "'%s' within %" PRId64 " ms; %s", acked < 0 ? 0 : acked,
                          ri->min_replicas, l->name, ri->replica_timeout_ms,
                          st == FENCE_OK ? "it was released"
                                         : "it could not be released (it expires by its TTL)");
}

/* The issuing extras of a script call: the server check, and for an
 * acquire the WAIT gate. */
static fence__eval_opts issue_opts(const fence__issuer *ri, int wait)
{
    fence__eval_opts io = {1, wait ? ri->min_replicas : 0, ri->replica_timeout_ms, -1};
    return io;
}

static fence_status ri_acquire(fence__issuer *ri, fence__ilease *l, const char *holder_info,
                               int64_t deadline_us, fence__grant *g)
{
    const char *args[10];
    int nkeys = 0, nargs = fence__ri_acquire_args(ri, l, holder_info, args, &nkeys);
    fence__eval_opts io = issue_opts(ri, 1);
    void *r = NULL;
    fence_status st = fence__eval_cmd(&ri->rd, FENCE__ACQUIRE, nkeys, nargs, args, deadline_us,
                                      NULL, &io, &r);
    if (st != FENCE_OK) {
        return st;
    }
    st = fence__ri_grant_reply(ri, r, "acquire", l->name, g);
    freeReplyObject(r);
    if (st == FENCE_OK && g->granted && ri->min_replicas > 0 && io.acked < ri->min_replicas) {
        snprintf(l->value, sizeof l->value, "%s:%" PRIu64, l->holder, g->token);
        g->granted = 0;
        return too_few_replicas(ri, l, io.acked, deadline_us);
    }
    return st;
}

static fence_status ri_renew(fence__issuer *ri, fence__ilease *const *ls, size_t n, int chan,
                             int64_t deadline_us, int *results, int64_t *sent_us)
{
    if (chan == FENCE__CHAN_HEARTBEAT) {
        return fence__ri_renew_hb(ri, ls, n, deadline_us, results, sent_us);
    }
    fence_status st = FENCE_OK;
    for (size_t i = 0; i < n; i++) {
        const char *args[4];
        int nkeys = 0, nargs = fence__ri_renew_args(ls[i], ls[i]->value, args, &nkeys);
        void *r = NULL;
        if (i == 0) {
            *sent_us = fence__now_us();
        }
        fence_status s = fence__eval_cmd(&ri->rd, FENCE__RENEW, nkeys, nargs, args, deadline_us,
                                         NULL, NULL, &r);
        if (s == FENCE_OK) {
            results[i] = fence__ri_renew_reply(ri, r);
            s = results[i] < 0 ? FENCE_EPROTO : FENCE_OK;
            freeReplyObject(r);
        }
        st = s != FENCE_OK ? s : st;
    }
    return st;
}

static fence_status ri_release(fence__issuer *ri, fence__ilease *l, int64_t deadline_us,
                               int *deleted, int *retried)
{
    const char *args[4];
    int nkeys = 1, nargs = fence__ri_release_args(ri, l, args, &nkeys);
    void *r = NULL;
    fence_status st = fence__eval_cmd(&ri->rd, FENCE__RELEASE, nkeys, nargs, args, deadline_us,
                                      retried, NULL, &r);
    if (st == FENCE_OK) {
        st = fence__ri_release_reply(ri, r, deleted);
        freeReplyObject(r);
    }
    return st;
}

static fence_status ri_reissue(fence__issuer *ri, fence__ilease *l, uint64_t floor,
                               int64_t deadline_us, fence__grant *g)
{
    char f[24];
    snprintf(f, sizeof f, "%" PRIu64, floor);
    const char *args[9];
    int nkeys = 0, nargs = fence__ri_reissue_args(ri, l, f, args, &nkeys);
    fence__eval_opts io = issue_opts(ri, 0); /* the WAIT gate is acquire's */
    void *r = NULL;
    fence_status st = fence__eval_cmd(&ri->rd, FENCE__REISSUE, nkeys, nargs, args, deadline_us,
                                      NULL, &io, &r);
    if (st == FENCE_OK) {
        st = fence__ri_grant_reply(ri, r, "reissue", l->name, g);
        freeReplyObject(r);
    }
    return st;
}

/* Counter and token values in replies: the one grammar, 0..max. */
static int parse_u64(const char *s, size_t n, uint64_t *out)
{
    return fence__u64_parse(s, n, FENCE_TOKEN_MAX, out);
}

static fence_status ri_raise(fence__issuer *ri, const char *name, uint64_t floor,
                             int64_t deadline_us, uint64_t *after)
{
    const char *keys[2];
    char *block = name_keys(ri, name, keys, 2);
    if (block == NULL) {
        return fence__rd_fail(&ri->rd, FENCE_ENOMEM, "out of memory");
    }
    char f[24];
    snprintf(f, sizeof f, "%" PRIu64, floor);
    const char *args[2] = {keys[1], f};
    redisReply *r = NULL;
    fence_status st = fence__eval_cmd(&ri->rd, FENCE__TOKEN_RAISE, 1, 2, args, deadline_us, NULL,
                                      NULL, (void **)&r);
    free(block);
    if (st != FENCE_OK) {
        return st;
    }
    if (r->type != REDIS_REPLY_STRING || parse_u64(r->str, r->len, after) != 0) {
        st = fence__rd_fail(&ri->rd, FENCE_EPROTO, "%s: the counter of '%s' is not a number",
                            ri->rd.url.display, name);
    }
    freeReplyObject(r);
    return st;
}

/* The reply to inspect.lua: owner value, PTTL, n (and the holder
 * description with want_info) into *out, already zeroed. */
static fence_status inspect_reply(const fence__issuer *ri, const redisReply *r, int want_info,
                                  fence_lease_info *out)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < (want_info ? 4u : 2u)) {
        return fence__rd_fail(&ri->rd, FENCE_EPROTO, "%s: unexpected reply to inspect",
                              ri->rd.url.display);
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

static fence_status ri_inspect(fence__issuer *ri, const char *name, int want_info,
                               int64_t deadline_us, fence_lease_info *out)
{
    const char *keys[3];
    int n = want_info ? 3 : 2;
    char *block = name_keys(ri, name, keys, n);
    if (block == NULL) {
        return fence__rd_fail(&ri->rd, FENCE_ENOMEM, "out of memory");
    }
    redisReply *r = NULL;
    fence_status st = fence__eval_cmd(&ri->rd, FENCE__INSPECT, n, n, keys, deadline_us, NULL,
                                      NULL, (void **)&r);
    free(block);
    if (st == FENCE_OK) {
        st = inspect_reply(ri, r, want_info, out);
        freeReplyObject(r);
    }
    return st;
}

/* ---- what the server says -------------------------------------------------------- */

fence_status fence__ri_server_info(fence__issuer *ri, fence_server_info *out)
{
    memset(out, 0, sizeof *out);
    out->persistence = FENCE_PERSIST_UNKNOWN;
    fence__srvinfo si;
    fence_status st = fence__cmd_server_info(&ri->rd, INT64_MAX, &si);
    if (st == FENCE_OK) {
        memcpy(out->maxmemory_policy, si.maxmemory_policy, sizeof out->maxmemory_policy);
        out->persistence = fence__ri_persistence(&si);
        atomic_store(&ri->persistence, persistence_gauge(out->persistence));
    }
    return st;
}

static fence_status ri_describe(fence__issuer *ri, int64_t deadline_us, fence_issuer_info *out)
{
    (void)deadline_us;
    fence_server_info si;
    fence_status st = fence__ri_server_info(ri, &si);
    if (st != FENCE_OK) {
        return st;
    }
    fence__iss_field(out, "persistence", fence_persistence_name(si.persistence),
          si.persistence == FENCE_PERSIST_OFF
              ? "a restart loses the counters: clock tokens jump past them" : "");
    fence__iss_field(out, "maxmemory_policy", si.maxmemory_policy,
          si.maxmemory_policy[0] != '\0' && strcmp(si.maxmemory_policy, "noeviction") != 0
              ? "evicts keys: tokens are refused unless allow_eviction" : "");
    return FENCE_OK;
}

static void ri_metrics(const fence__issuer *ri, fence_metrics *m)
{
    m->reconnects = atomic_load(&ri->rd.reconnects);
    m->redis_persistence = atomic_load(&ri->persistence);
}

const fence__issuer_ops fence__redis_issuer = {
    .name = "redis",
    .open = ri_open,
    .start = ri_start,
    .close = ri_close,
    .url = ri_url,
    .down = ri_down,
    .check_name = ri_check_name,
    .lease_room = ri_lease_room,
    .lease_init = ri_lease_init,
    .acquire = ri_acquire,
    .renew = ri_renew,
    .release = ri_release,
    .reissue = ri_reissue,
    .raise = ri_raise,
    .inspect = ri_inspect,
    .wait_open = fence__ri_wait_open,
    .wait = fence__ri_wait,
    .wait_close = fence__ri_wait_close,
    .describe = ri_describe,
    .metrics = ri_metrics,
};
