/* eissuer.c -- the etcd issuer: issuer.h's operations as etcd calls
 * (etcd.h: the keys and the token rule).
 *
 * A fence lease is an etcd lease of its own (one per name: a release
 * revokes it, a loss is that one lease's), granted with the TTL rounded up
 * to whole seconds (etcd raises it to its own minimum, 1.5 x the election
 * timeout); the core's validity still runs from the TTL asked for, so it
 * ends first.
 *
 *   acquire  /v3/lease/grant (revoked again when the name is busy), then one
 *            txn: if the owner key was never created and the floor is as
 *            last seen, put the owner key "<holder>:<off>[:<info>]" with
 *            the lease; else read both.  Token = off + the txn's revision.
 *            The owner key already holding this holder (a repeated
 *            acquire) gives back the same lease and token.
 *   renew    one /v3/lease/keepalive request carrying every lease's ID
 *            (one keepalive message per etcd lease, all in one HTTP
 *            request), then txns of up to 128 reads of the owner keys:
 *            renewed when the keepalive answered TTL > 0 and the owner key
 *            is still on this lease at this revision.
 *   release  a txn deleting the owner key only if it is on this lease at
 *            this revision, then /v3/lease/revoke.
 *   wait     /v3/watch of the owner key for a delete, from the revision
 *            read when the waiter was opened. */
#include "etcd.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_MS 2000
#define MAX_PREFIX 64
#define MAX_TXN_OPS 128 /* etcd's --max-txn-ops default */
#define GROUP_MAX 100   /* names per etcd lease */

/* A group of a client's names sharing one etcd lease (below). */
typedef struct egroup {
    int64_t id;         /* the etcd lease */
    int64_t ttl_ms;     /* its names' TTL */
    int64_t server_ttl; /* seconds, as granted */
    int members;        /* names in it (and acquires joining it) */
    int dead;           /* answered TTL 0: never joined again */
    struct egroup *next;
} egroup;

struct fence__issuer {
    fence__etcd et;
    fence__iss_env env;
    char *prefix;
    size_t prefix_len;
    pthread_mutex_t cmd_lock; /* the command path's line */
    fence__et_line cmd;
    int cmd_down;
    fence__et_line hb; /* the heartbeat's, under the core's heartbeat lock */
    pthread_mutex_t grp_lock; /* the groups */
    egroup *groups;
    int group_max;     /* names per etcd lease */
};

/* A lease's room. */
typedef struct eroom {
    int64_t lease;     /* the etcd lease holding the owner key (0: none) */
    struct egroup *grp;/* the group it joined (NULL: none) */
    int64_t rev;       /* the revision of the owner key's put */
    uint64_t off;      /* the floor's value in that put */
    int64_t floor_mod; /* the floor's mod_revision as last seen (0: absent) */
    char *owner, *floor;
    size_t owner_len, floor_len;
    char buf[];
} eroom;
#define ROOM(l) ((eroom *)(l)->room)

struct fence__waiter {
    fence__issuer *is;
    fence__et_line ln;
    int64_t start_rev;
    size_t keylen;
    char key[];
};

static fence_status fail(const fence__issuer *is, fence_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static fence_status fail(const fence__issuer *is, fence_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fence__err_vset(is->et.errslot(), is->et.errkey, (int)st, fmt, ap);
    va_end(ap);
    return st;
}

static fence_status nomem(const fence__issuer *is)
{
    return fail(is, FENCE_ENOMEM, "out of memory");
}

/* ---- options --------------------------------------------------------------------- */

static fence_status check_path(const fence__issuer *is, const char *path, const char *what)
{
    if (path != NULL && (path[0] == '\0' || access(path, R_OK) != 0)) {
        return fail(is, FENCE_EINVAL, "%s: %s", what,
                    path[0] == '\0' ? "is empty" : "cannot be read");
    }
    return FENCE_OK;
}

static char *dup_opt(const char *s, int *bad)
{
    char *d = s != NULL ? strdup(s) : NULL;
    *bad |= s != NULL && d == NULL;
    return d;
}

static fence_status tls_opts(fence__issuer *is, const fence_client_options *o)
{
    fence__etcd *et = &is->et;
    if (o->tls != 0 && o->tls != 1) {
        return fail(is, FENCE_EINVAL, "tls must be 0 or 1");
    }
    if (o->tls_insecure != 0 && o->tls_insecure != 1) {
        return fail(is, FENCE_EINVAL, "tls_insecure must be 0 or 1");
    }
    fence_status st = check_path(is, o->tls_ca_file, "tls_ca_file");
    st = st ? st : check_path(is, o->tls_ca_dir, "tls_ca_dir");
    st = st ? st : check_path(is, o->tls_cert_file, "tls_cert_file");
    st = st ? st : check_path(is, o->tls_key_file, "tls_key_file");
    if (st != FENCE_OK) {
        return st;
    }
    const char *sn = o->tls_server_name;
    if (sn != NULL && (sn[0] == '\0' || strlen(sn) > 255 || strspn(sn,
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") != strlen(sn))) {
        return fail(is, FENCE_EINVAL, "tls_server_name must be a host name (at most 255 bytes)");
    }
    if ((o->tls_cert_file == NULL) != (o->tls_key_file == NULL)) {
        return fail(is, FENCE_EINVAL, "tls_cert_file and tls_key_file go together (mutual TLS "
                    "needs both)");
    }
    et->tls |= o->tls == 1;
    int any = o->tls_ca_file || o->tls_ca_dir || o->tls_cert_file || sn || o->tls_insecure;
    if (any && !et->tls) {
        return fail(is, FENCE_EINVAL, "TLS options given but TLS is off: use an etcds:// URL "
                    "or set tls = 1");
    }
    if (o->tls_insecure && (o->tls_ca_file || o->tls_ca_dir || sn)) {
        return fail(is, FENCE_EINVAL, "tls_insecure turns verification off: it cannot be "
                    "combined with tls_ca_file, tls_ca_dir or tls_server_name");
    }
    int bad = 0;
    et->ca_file = dup_opt(o->tls_ca_file, &bad);
    et->ca_dir = dup_opt(o->tls_ca_dir, &bad);
    et->cert_file = dup_opt(o->tls_cert_file, &bad);
    et->key_file = dup_opt(o->tls_key_file, &bad);
    et->server_name = dup_opt(sn, &bad);
    et->insecure = o->tls_insecure;
    return bad ? nomem(is) : FENCE_OK;
}

static fence_status setup(fence__issuer *is, const fence_client_options *o)
{
    fence__etcd *et = &is->et;
    fence_status st = fence__et_url(et, o->url);
    if (st != FENCE_OK) {
        return st;
    }
    st = tls_opts(is, o);
    if (st != FENCE_OK) {
        return st;
    }
    const char *prefix = o->prefix != NULL ? o->prefix : "fence/";
    if (strlen(prefix) > MAX_PREFIX) {
        return fail(is, FENCE_EINVAL, "prefix longer than %d bytes", MAX_PREFIX);
    }
    for (const char *p = prefix; *p != '\0'; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            return fail(is, FENCE_EINVAL, "prefix holds a control character");
        }
    }
    int bad = 0;
    if (o->username != NULL) {
        free(et->user);
        et->user = dup_opt(o->username, &bad);
    }
    if (o->password != NULL) {
        free(et->password);
        et->password = dup_opt(o->password, &bad);
    }
    is->prefix = dup_opt(prefix, &bad);
    if (bad) {
        return nomem(is);
    }
    is->prefix_len = strlen(prefix);
    if (et->user != NULL && et->user[0] == '\0') {
        return fail(is, FENCE_EINVAL, "the user name must not be empty");
    }
    if (et->user != NULL && et->password == NULL) {
        return fail(is, FENCE_EINVAL, "a user name needs a password");
    }
    if (et->user == NULL && et->password != NULL) {
        return fail(is, FENCE_EINVAL, "etcd needs a user name with a password (etcd://user:"
                    "password@host, or username)");
    }
    if (o->connect_timeout_ms < 0 || o->io_timeout_ms < 0) {
        return fail(is, FENCE_EINVAL, "connect_timeout_ms and io_timeout_ms must be >= 0");
    }
    et->connect_timeout_ms = o->connect_timeout_ms ? o->connect_timeout_ms : DEFAULT_TIMEOUT_MS;
    et->io_timeout_ms = o->io_timeout_ms ? o->io_timeout_ms : DEFAULT_TIMEOUT_MS;
    return FENCE_OK;
}

static fence_status ei_open(fence__issuer **out, const fence_client_options *o,
                            const fence__iss_env *env)
{
    *out = NULL;
    fence__issuer *is = calloc(1, sizeof *is);
    if (is == NULL) {
        return (fence_status)fence__err_set(env->errslot(), env->errkey, FENCE_ENOMEM,
                                            "out of memory");
    }
    is->env = *env;
    is->et.errkey = env->errkey;
    is->et.errslot = env->errslot;
    pthread_mutex_init(&is->cmd_lock, NULL);
    pthread_mutex_init(&is->et.auth_lock, NULL);
    pthread_mutex_init(&is->grp_lock, NULL);
    is->group_max = GROUP_MAX;
    *out = is;
    return setup(is, o);
}

static void ei_close(fence__issuer *is)
{
    fence__et_line_close(&is->cmd);
    fence__et_line_close(&is->hb);
    fence__et_free(&is->et);
    pthread_mutex_destroy(&is->cmd_lock);
    pthread_mutex_destroy(&is->et.auth_lock);
    pthread_mutex_destroy(&is->grp_lock);
    while (is->groups != NULL) {
        egroup *g = is->groups;
        is->groups = g->next;
        free(g); /* their etcd leases expire by their TTL */
    }
    free(is->prefix);
    free(is);
}

static const char *ei_url(const fence__issuer *is)
{
    return is != NULL && is->et.display != NULL ? is->et.display : "";
}

static int ei_down(fence__issuer *is)
{
    pthread_mutex_lock(&is->cmd_lock);
    int d = is->cmd_down;
    pthread_mutex_unlock(&is->cmd_lock);
    return d;
}

static fence_status ei_check_name(fence__issuer *is, const char *name)
{
    (void)is;
    (void)name;
    return FENCE_OK;
}

/* ---- keys and calls ----------------------------------------------------------------- */

/* "<prefix><kind>/<name>" into buf (room for prefix + name + 3). */
static size_t key_of(const fence__issuer *is, char kind, const char *name, size_t namelen,
                     char *buf)
{
    memcpy(buf, is->prefix, is->prefix_len);
    buf[is->prefix_len] = kind;
    buf[is->prefix_len + 1] = '/';
    memcpy(buf + is->prefix_len + 2, name, namelen);
    buf[is->prefix_len + 2 + namelen] = '\0';
    return is->prefix_len + 2 + namelen;
}

static size_t ei_lease_room(const fence__issuer *is, size_t namelen)
{
    return sizeof(eroom) + 2 * (is->prefix_len + namelen + 3);
}

static void ei_lease_init(fence__issuer *is, fence__ilease *l)
{
    eroom *r = ROOM(l);
    memset(r, 0, sizeof *r);
    r->owner = r->buf;
    r->owner_len = key_of(is, 'o', l->name, l->namelen, r->owner);
    r->floor = r->owner + r->owner_len + 1;
    r->floor_len = key_of(is, 'f', l->name, l->namelen, r->floor);
}

/* A call on the command path's line. */
static fence_status cmd_call(fence__issuer *is, const char *path, json_t *req,
                             int64_t deadline_us, json_t **resp, int *twice, int *code)
{
    if (req == NULL) {
        return nomem(is);
    }
    pthread_mutex_lock(&is->cmd_lock);
    fence_status st = fence__et_call(&is->et, &is->cmd, path, req, deadline_us, resp, twice,
                                     code);
    is->cmd_down = st == FENCE_ECONN;
    pthread_mutex_unlock(&is->cmd_lock);
    json_decref(req);
    return st;
}

static json_t *kjson(const char *k, size_t n)
{
    return fence__et_b64(k, n);
}

static json_t *idjson(int64_t id)
{
    char s[24];
    snprintf(s, sizeof s, "%" PRId64, id);
    return json_string(s);
}

/* A range request op of key. */
static json_t *range_op(const char *k, size_t n, int keys_only)
{
    return json_pack("{s:{s:o, s:b}}", "request_range", "key", kjson(k, n), "keys_only",
                     keys_only);
}

/* The first kv of a txn response's i-th range, or NULL. */
static json_t *range_kv(const json_t *resp, size_t i)
{
    json_t *rs = json_object_get(resp, "responses");
    json_t *rr = json_object_get(json_array_get(rs, i), "response_range");
    return json_array_get(json_object_get(rr, "kvs"), 0);
}

/* The owner value "<holder>:<off>[:<info>]" of kv: holder (33 bytes),
 * off, info (room for FENCE_HOLDER_INFO_MAX + 1, may be NULL).  0 or -1. */
static int parse_owner(const json_t *kv, char *holder, uint64_t *off, char *info)
{
    char v[FENCE_HOLDER_LEN + 24 + FENCE_HOLDER_INFO_MAX + 8];
    long n = fence__et_unb64(json_object_get(kv, "value"), v, sizeof v);
    if (n < FENCE_HOLDER_LEN + 2 || v[FENCE_HOLDER_LEN] != ':') {
        return -1;
    }
    memcpy(holder, v, FENCE_HOLDER_LEN);
    holder[FENCE_HOLDER_LEN] = '\0';
    const char *end;
    if (fence__u64_scan(v + FENCE_HOLDER_LEN + 1, FENCE_TOKEN_MAX, off, &end) != 0 ||
        (*end != '\0' && *end != ':')) {
        return -1;
    }
    if (info != NULL) {
        snprintf(info, FENCE_HOLDER_INFO_MAX + 1, "%s", *end == ':' ? end + 1 : "");
    }
    return 0;
}

/* The floor's value in kv (absent: 0), and its mod_revision. */
static int parse_floor(const json_t *kv, uint64_t *off, int64_t *mod)
{
    *off = 0;
    *mod = 0;
    if (kv == NULL) {
        return 0;
    }
    char v[32];
    long n = fence__et_unb64(json_object_get(kv, "value"), v, sizeof v);
    if (n <= 0 || fence__u64_parse(v, (size_t)n, FENCE_TOKEN_MAX, off) != 0 ||
        fence__et_int(kv, "mod_revision", mod) != 0) {
        return -1;
    }
    return 0;
}

/* The compare that the floor is as last seen. */
static json_t *floor_cmp(const eroom *r)
{
    if (r->floor_mod == 0) {
        return json_pack("{s:s, s:o, s:s}", "target", "VERSION", "key",
                         kjson(r->floor, r->floor_len), "version", "0");
    }
    return json_pack("{s:s, s:o, s:o}", "target", "MOD", "key", kjson(r->floor, r->floor_len),
                     "mod_revision", idjson(r->floor_mod));
}

/* The compares that the owner key is still l's own put. */
static json_t *mine_cmps(const eroom *r)
{
    return json_pack("[{s:s, s:o, s:o}, {s:s, s:o, s:o}]",
                     "target", "LEASE", "key", kjson(r->owner, r->owner_len), "lease",
                     idjson(r->lease),
                     "target", "MOD", "key", kjson(r->owner, r->owner_len), "mod_revision",
                     idjson(r->rev));
}

/* The owner value for l with off. */
static json_t *owner_value(const fence__ilease *l, uint64_t off, const char *info)
{
    char v[FENCE_HOLDER_LEN + 24 + FENCE_HOLDER_INFO_MAX + 8];
    int n = snprintf(v, sizeof v, "%s:%" PRIu64 "%s%s", l->holder, off,
                     info != NULL ? ":" : "", info != NULL ? info : "");
    return fence__et_b64(v, (size_t)n);
}

static int64_t server_ttl_s(int64_t ttl_ms)
{
    return (ttl_ms + 999) / 1000; /* whole seconds, rounded up */
}

static void lease_revoke(fence__issuer *is, int64_t id, int64_t deadline_us)
{
    json_t *resp = NULL;
    if (cmd_call(is, "/v3/lease/revoke", json_pack("{s:o}", "ID", idjson(id)), deadline_us,
                 &resp, NULL, NULL) == FENCE_OK) {
        json_decref(resp);
    }
}

static fence_status keepalive(fence__issuer *is, fence__et_line *ln, const int64_t *ids,
                              size_t n, int64_t deadline_us, int *alive);

/* ---- groups: names sharing one etcd lease ------------------------------------------
 * A client's leases with the same TTL share etcd leases, up to GROUP_MAX
 * names each, so that renewing them costs one keepalive per etcd lease.
 * A name joins a group only after a keepalive of it in the same acquire
 * call (or in a group granted by that call): its etcd lease then ends
 * after the validity the call starts.  A group's etcd lease is revoked
 * when its last name is released; one that answered TTL 0 is dead (its
 * names are lost) and never joined again. */

static egroup *group_find(fence__issuer *is, int64_t id)
{
    for (egroup *g = is->groups; g != NULL; g = g->next) {
        if (g->id == id) {
            return g;
        }
    }
    return NULL;
}

/* Join a live group of ttl_ms with room, or NULL (none). */
static egroup *group_join(fence__issuer *is, int64_t ttl_ms)
{
    pthread_mutex_lock(&is->grp_lock);
    egroup *g = is->groups;
    while (g != NULL && (g->dead || g->ttl_ms != ttl_ms || g->members >= is->group_max)) {
        g = g->next;
    }
    if (g != NULL) {
        g->members++;
    }
    pthread_mutex_unlock(&is->grp_lock);
    return g;
}

/* Leave g; the last one out revokes its etcd lease. */
static void group_leave(fence__issuer *is, egroup *g, int64_t deadline_us)
{
    pthread_mutex_lock(&is->grp_lock);
    int last = --g->members == 0;
    if (last) {
        for (egroup **p = &is->groups; *p != NULL; p = &(*p)->next) {
            if (*p == g) {
                *p = g->next;
                break;
            }
        }
    }
    pthread_mutex_unlock(&is->grp_lock);
    if (last) {
        if (!g->dead) {
            lease_revoke(is, g->id, deadline_us);
        }
        free(g);
    }
}

static void group_dead(fence__issuer *is, egroup *g)
{
    pthread_mutex_lock(&is->grp_lock);
    g->dead = 1;
    pthread_mutex_unlock(&is->grp_lock);
}

/* A new group of l's TTL with l in it: /v3/lease/grant, the TTL rounded up
 * to whole seconds (etcd raises it to its minimum). */
static fence_status group_new(fence__issuer *is, const fence__ilease *l, int64_t deadline_us,
                              egroup **out)
{
    *out = NULL;
    json_t *resp = NULL;
    fence_status st = cmd_call(is, "/v3/lease/grant",
                               json_pack("{s:I}", "TTL", (json_int_t)server_ttl_s(l->ttl_ms)),
                               deadline_us, &resp, NULL, NULL);
    if (st != FENCE_OK) {
        return st;
    }
    int64_t id = 0, ttl = 0;
    if (fence__et_int(resp, "ID", &id) != 0 || fence__et_int(resp, "TTL", &ttl) != 0 || id == 0 ||
        ttl * 1000 < l->ttl_ms) {
        st = fail(is, FENCE_EPROTO, "%s: lease grant: unexpected reply (ID %" PRId64 ", TTL %"
                  PRId64 " s for %" PRId64 " ms asked)", is->et.display, id, ttl, l->ttl_ms);
    }
    json_decref(resp);
    egroup *g = st == FENCE_OK ? calloc(1, sizeof *g) : NULL;
    if (st == FENCE_OK && g == NULL) {
        lease_revoke(is, id, deadline_us);
        return nomem(is);
    }
    if (g != NULL) {
        g->id = id;
        g->ttl_ms = l->ttl_ms;
        g->server_ttl = ttl;
        g->members = 1;
        pthread_mutex_lock(&is->grp_lock);
        g->next = is->groups;
        is->groups = g;
        pthread_mutex_unlock(&is->grp_lock);
        *out = g;
    }
    return st;
}

/* A group for l, its etcd lease alive as of this call: a joined one kept
 * alive now, or a new one. */
static fence_status group_for(fence__issuer *is, const fence__ilease *l, int64_t deadline_us,
                              egroup **out)
{
    for (;;) {
        egroup *g = group_join(is, l->ttl_ms);
        if (g == NULL) {
            return group_new(is, l, deadline_us, out);
        }
        int alive = -1;
        pthread_mutex_lock(&is->cmd_lock);
        fence_status st = keepalive(is, &is->cmd, &g->id, 1, deadline_us, &alive);
        is->cmd_down = st == FENCE_ECONN;
        pthread_mutex_unlock(&is->cmd_lock);
        if (st != FENCE_OK) {
            group_leave(is, g, deadline_us);
            return st;
        }
        if (alive == 1) {
            *out = g;
            return FENCE_OK;
        }
        group_dead(is, g); /* expired: its names are lost */
        group_leave(is, g, deadline_us);
    }
}

/* The token off + rev, checked. */
static int token_of(uint64_t off, int64_t rev, uint64_t *token)
{
    if (rev <= 0 || off > FENCE_TOKEN_MAX - (uint64_t)rev) {
        return -1;
    }
    *token = off + (uint64_t)rev;
    return 0;
}

static fence_status ei_acquire(fence__issuer *is, fence__ilease *l, const char *holder_info,
                               int64_t deadline_us, fence__grant *g)
{
    eroom *r = ROOM(l);
    g->granted = 0;
    g->pttl_ms = -1;
    g->behind_us = 0;
    for (int round = 0; round < 4; round++) {
        egroup *grp = NULL;
        fence_status st = group_for(is, l, deadline_us, &grp);
        if (st != FENCE_OK) {
            return st;
        }
        json_t *cmp = json_pack("[{s:s, s:o, s:s}, o]", "target", "CREATE", "key",
                                kjson(r->owner, r->owner_len), "create_revision", "0",
                                floor_cmp(r));
        json_t *put = json_pack("[{s:{s:o, s:o, s:o}}]", "request_put", "key",
                                kjson(r->owner, r->owner_len), "value",
                                owner_value(l, r->off, holder_info), "lease", idjson(grp->id));
        json_t *rd = json_pack("[o, o]", range_op(r->owner, r->owner_len, 0),
                               range_op(r->floor, r->floor_len, 0));
        json_t *resp = NULL;
        int code = -1;
        st = cmd_call(is, "/v3/kv/txn", json_pack("{s:o, s:o, s:o}", "compare", cmp, "success",
                                                  put, "failure", rd),
                      deadline_us, &resp, NULL, &code);
        if (st == FENCE_EPROTO && code == 5) { /* the group's etcd lease just expired */
            group_dead(is, grp);
            group_leave(is, grp, deadline_us);
            continue;
        }
        if (st != FENCE_OK) {
            /* The put may have happened: the group stays joined (a repeated
             * acquire finds the key on it); unused, it expires. */
            return st;
        }
        int64_t rev = 0;
        fence__et_int(json_object_get(resp, "header"), "revision", &rev);
        if (json_is_true(json_object_get(resp, "succeeded"))) {
            json_decref(resp);
            if (token_of(r->off, rev, &g->token) != 0) {
                group_leave(is, grp, deadline_us);
                return fail(is, FENCE_EPROTO, "%s: acquire '%s': revision %" PRId64 " with "
                            "floor %" PRIu64 " is no token", is->et.display, l->name, rev,
                            r->off);
            }
            r->grp = grp;
            r->lease = grp->id;
            r->rev = rev;
            g->granted = 1;
            return FENCE_OK;
        }
        json_t *okv = range_kv(resp, 0), *fkv = range_kv(resp, 1);
        uint64_t foff;
        int64_t fmod;
        if (parse_floor(fkv, &foff, &fmod) != 0) {
            json_decref(resp);
            group_leave(is, grp, deadline_us);
            return fail(is, FENCE_EPROTO, "%s: the floor key of '%s' is not a number",
                        is->et.display, l->name);
        }
        r->floor_mod = fmod;
        r->off = foff;
        if (okv == NULL) {
            /* The floor moved, or released between compare and read. */
            json_decref(resp);
            group_leave(is, grp, deadline_us);
            continue;
        }
        char holder[FENCE_HOLDER_LEN + 1];
        uint64_t ooff;
        int64_t orev = 0, olease = 0;
        int ours = parse_owner(okv, holder, &ooff, NULL) == 0 &&
                   strcmp(holder, l->holder) == 0;
        fence__et_int(okv, "mod_revision", &orev);
        fence__et_int(okv, "lease", &olease);
        json_decref(resp);
        if (ours && olease != grp->id) {
            /* A repeated acquire whose first put went on another of our
             * groups (joined by that call, never left): keep it alive now,
             * so that it outlasts the validity this call starts. */
            pthread_mutex_lock(&is->grp_lock);
            egroup *prev = group_find(is, olease);
            pthread_mutex_unlock(&is->grp_lock);
            int alive = -1;
            if (prev != NULL) {
                pthread_mutex_lock(&is->cmd_lock);
                st = keepalive(is, &is->cmd, &olease, 1, deadline_us, &alive);
                pthread_mutex_unlock(&is->cmd_lock);
            }
            group_leave(is, grp, deadline_us);
            if (st != FENCE_OK) {
                return st;
            }
            if (prev == NULL || alive != 1) {
                return FENCE_OK; /* not a lease of ours we can keep: not granted */
            }
            grp = prev;
        }
        if (ours) {
            /* A repeated acquire: the lease and token it already has. */
            if (token_of(ooff, orev, &g->token) != 0) {
                group_leave(is, grp, deadline_us);
                return fail(is, FENCE_EPROTO, "%s: the owner key of '%s' is malformed",
                            is->et.display, l->name);
            }
            r->grp = grp;
            r->lease = olease;
            r->rev = orev;
            r->off = ooff;
            g->granted = 1;
            return FENCE_OK;
        }
        group_leave(is, grp, deadline_us); /* held by another */
        return FENCE_OK;
    }
    return fail(is, FENCE_ECONN, "%s: acquire '%s': the name kept changing under the txn",
                is->et.display, l->name);
}

/* ---- renewals --------------------------------------------------------------------------- */

/* Keepalives of the etcd leases ids[0..n) on ln: alive[i] 1, 0 (expired:
 * TTL 0) or -1 (no answer).  One request per etcd lease: etcd 3.4's
 * gateway cannot carry several keepalives in one HTTP/1.1 request (Go's
 * HTTP/1 server is not full duplex: once the first answer is written the
 * rest of the request body is not read, and the answers still owed are
 * dropped -- seen as 18 of 50 answered).  Each call is bounded by the
 * engine's own budget; a failure leaves the rest unanswered. */
static fence_status keepalive(fence__issuer *is, fence__et_line *ln, const int64_t *ids,
                              size_t n, int64_t deadline_us, int *alive)
{
    fence_status st = FENCE_OK;
    for (size_t i = 0; i < n; i++) {
        alive[i] = -1;
    }
    for (size_t i = 0; i < n && st == FENCE_OK; i++) {
        if (i > 0 && ids[i] == ids[i - 1]) {
            alive[i] = alive[i - 1]; /* leases share an etcd lease: asked once */
            continue;
        }
        json_t *req = json_pack("{s:o}", "ID", idjson(ids[i]));
        json_t *resp = NULL;
        if (req == NULL) {
            return nomem(is);
        }
        st = fence__et_call(&is->et, ln, "/v3/lease/keepalive", req, deadline_us, &resp, NULL,
                            NULL);
        json_decref(req);
        if (st != FENCE_OK) {
            break;
        }
        json_t *res = json_object_get(resp, "result");
        int64_t id = 0, ttl = 0;
        if (res == NULL || fence__et_int(res, "ID", &id) != 0 ||
            fence__et_int(res, "TTL", &ttl) != 0 || id != ids[i]) {
            st = fail(is, FENCE_EPROTO, "%s: unexpected reply to a keepalive", is->et.display);
        } else {
            alive[i] = ttl > 0;
        }
        json_decref(resp);
    }
    return st;
}

/* Whether each owner key of ls[0..n) (n <= MAX_TXN_OPS) is still on its
 * lease at its revision: mine[i] 1 or 0.  First one txn comparing every
 * key's mod_revision with its put's (a delete or a replace changes it; a
 * put with another lease is a replace): all still ours, the usual answer,
 * costs one small reply -- the gateway's JSON of 128 ranges costs ~20 ms.
 * Only when one differs are the keys read to say which. */
static fence_status check_keys(fence__issuer *is, fence__et_line *ln, fence__ilease *const *ls,
                               size_t n, int64_t deadline_us, int *mine)
{
    json_t *cmps = json_array();
    for (size_t i = 0; cmps != NULL && i < n; i++) {
        const eroom *r = ROOM(ls[i]);
        json_t *c = json_pack("{s:s, s:o, s:o}", "target", "MOD", "key",
                              kjson(r->owner, r->owner_len), "mod_revision", idjson(r->rev));
        if (c == NULL || json_array_append_new(cmps, c) != 0) {
            json_decref(cmps);
            cmps = NULL;
        }
    }
    json_t *creq = cmps != NULL ? json_pack("{s:o}", "compare", cmps) : NULL;
    if (creq == NULL) {
        return nomem(is);
    }
    json_t *cresp = NULL;
    fence_status cst = fence__et_call(&is->et, ln, "/v3/kv/txn", creq, deadline_us, &cresp,
                                      NULL, NULL);
    json_decref(creq);
    if (cst != FENCE_OK) {
        return cst;
    }
    int all = json_is_true(json_object_get(cresp, "succeeded"));
    json_decref(cresp);
    if (all) {
        for (size_t i = 0; i < n; i++) {
            mine[i] = 1;
        }
        return FENCE_OK;
    }
    json_t *ops = json_array();
    for (size_t i = 0; ops != NULL && i < n; i++) {
        const eroom *r = ROOM(ls[i]);
        if (json_array_append_new(ops, range_op(r->owner, r->owner_len, 1)) != 0) {
            json_decref(ops);
            ops = NULL;
        }
    }
    json_t *req = ops != NULL ? json_pack("{s:o}", "success", ops) : NULL;
    if (req == NULL) {
        return nomem(is);
    }
    json_t *resp = NULL;
    fence_status st = fence__et_call(&is->et, ln, "/v3/kv/txn", req, deadline_us, &resp, NULL,
                                     NULL);
    json_decref(req);
    if (st != FENCE_OK) {
        return st;
    }
    for (size_t i = 0; i < n; i++) {
        const eroom *r = ROOM(ls[i]);
        json_t *kv = range_kv(resp, i);
        int64_t lease = 0, mod = 0;
        fence__et_int(kv, "lease", &lease);
        fence__et_int(kv, "mod_revision", &mod);
        mine[i] = kv != NULL && lease == r->lease && mod == r->rev;
    }
    json_decref(resp);
    return FENCE_OK;
}

static int cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static fence_status ei_renew(fence__issuer *is, fence__ilease *const *ls, size_t n, int chan,
                             int64_t deadline_us, int *results, int64_t *sent_us)
{
    int *alive = malloc(2 * n * sizeof *alive);
    int64_t *ids = calloc(n > 0 ? n : 1, sizeof *ids);
    if (alive == NULL || ids == NULL) {
        free(alive);
        free(ids);
        return nomem(is);
    }
    int *mine = alive + n;
    for (size_t i = 0; i < n; i++) {
        ids[i] = ROOM(ls[i])->lease;
    }
    fence__et_line *ln = &is->hb;
    if (chan != FENCE__CHAN_HEARTBEAT) {
        pthread_mutex_lock(&is->cmd_lock);
        ln = &is->cmd;
    }
    *sent_us = fence__now_us();
    /* One keepalive per etcd lease: the distinct ones, sorted. */
    size_t nu = 0;
    qsort(ids, n, sizeof *ids, cmp_id);
    for (size_t i = 0; i < n; i++) {
        if (nu == 0 || ids[nu - 1] != ids[i]) {
            ids[nu++] = ids[i];
        }
    }
    int *alive_u = mine; /* room for n; mine is filled later */
    fence_status st = keepalive(is, ln, ids, nu, deadline_us, alive_u);
    for (size_t i = 0; i < n; i++) {
        int64_t id = ROOM(ls[i])->lease;
        const int64_t *at = bsearch(&id, ids, nu, sizeof *ids, cmp_id);
        alive[i] = at != NULL ? alive_u[at - ids] : -1;
    }
    for (size_t i = 0; st == FENCE_OK && i < n; i += MAX_TXN_OPS) {
        size_t m = n - i < MAX_TXN_OPS ? n - i : MAX_TXN_OPS;
        fence_status s = check_keys(is, ln, ls + i, m, deadline_us, mine + i);
        for (size_t j = 0; j < m; j++) {
            results[i + j] = s != FENCE_OK || alive[i + j] < 0 ? -1
                                                                 : alive[i + j] && mine[i + j];
        }
        st = s != FENCE_OK ? s : st;
    }
    if (st != FENCE_OK) {
        /* Keepalives that etcd answered with TTL 0 are lost whatever else. */
        for (size_t i = 0; i < n; i++) {
            results[i] = alive[i] == 0 ? 0 : results[i];
        }
    }
    if (chan != FENCE__CHAN_HEARTBEAT) {
        is->cmd_down = st == FENCE_ECONN;
        pthread_mutex_unlock(&is->cmd_lock);
    }
    free(alive);
    free(ids);
    return st;
}

/* ---- release, reissue, raise, inspect ------------------------------------------------------ */

static fence_status ei_release(fence__issuer *is, fence__ilease *l, int64_t deadline_us,
                               int *deleted, int *retried)
{
    eroom *r = ROOM(l);
    *deleted = 0;
    *retried = 0;
    json_t *del = json_pack("[{s:{s:o}}]", "request_delete_range", "key",
                            kjson(r->owner, r->owner_len));
    json_t *resp = NULL;
    fence_status st = cmd_call(is, "/v3/kv/txn", json_pack("{s:o, s:o}", "compare",
                                                           mine_cmps(r), "success", del),
                               deadline_us, &resp, retried, NULL);
    if (st != FENCE_OK) {
        return st;
    }
    *deleted = json_is_true(json_object_get(resp, "succeeded"));
    json_decref(resp);
    /* Out of its group; the last one out revokes the etcd lease (failing
     * that, it expires by its TTL). */
    if (r->grp != NULL) {
        group_leave(is, r->grp, deadline_us);
        r->grp = NULL;
    }
    return FENCE_OK;
}

/* The new offset so that off + (a revision above seen) > floor. */
static uint64_t raised_off(uint64_t off, uint64_t floor, int64_t seen)
{
    uint64_t want = floor > (uint64_t)seen ? floor - (uint64_t)seen : 0;
    return want > off ? want : off;
}

static json_t *u64json(uint64_t v)
{
    char s[24];
    return fence__et_b64(s, fence__u64_text(v, s));
}

static fence_status ei_reissue(fence__issuer *is, fence__ilease *l, uint64_t floor,
                               int64_t deadline_us, fence__grant *g)
{
    eroom *r = ROOM(l);
    g->granted = 0;
    g->pttl_ms = -1;
    g->behind_us = 0;
    int64_t seen = r->rev;
    uint64_t fl = r->off;
    for (int round = 0; round < 4; round++) {
        uint64_t off = raised_off(fl, floor, seen);
        json_t *cmp = mine_cmps(r);
        json_array_append_new(cmp, floor_cmp(r));
        json_t *ops = json_pack("[{s:{s:o, s:o}}, {s:{s:o, s:o, s:o}}]",
                                "request_put", "key", kjson(r->floor, r->floor_len), "value",
                                u64json(off),
                                "request_put", "key", kjson(r->owner, r->owner_len), "value",
                                owner_value(l, off, NULL), "lease", idjson(r->lease));
        json_t *rd = json_pack("[o, o]", range_op(r->owner, r->owner_len, 0),
                               range_op(r->floor, r->floor_len, 0));
        json_t *resp = NULL;
        fence_status st = cmd_call(is, "/v3/kv/txn", json_pack("{s:o, s:o, s:o}", "compare",
                                                               cmp, "success", ops, "failure",
                                                               rd),
                                   deadline_us, &resp, NULL, NULL);
        if (st != FENCE_OK) {
            return st;
        }
        int64_t rev = 0;
        fence__et_int(json_object_get(resp, "header"), "revision", &rev);
        if (json_is_true(json_object_get(resp, "succeeded"))) {
            json_decref(resp);
            if (token_of(off, rev, &g->token) != 0) {
                return fail(is, FENCE_EPROTO, "%s: reissue '%s': no token", is->et.display,
                            l->name);
            }
            r->rev = rev;
            r->off = off;
            r->floor_mod = rev;
            g->granted = 1;
            return FENCE_OK;
        }
        json_t *okv = range_kv(resp, 0);
        int64_t olease = 0, orev = 0, fmod = 0;
        fence__et_int(okv, "lease", &olease);
        fence__et_int(okv, "mod_revision", &orev);
        int held = okv != NULL && olease == r->lease && orev == r->rev;
        int bad = parse_floor(range_kv(resp, 1), &fl, &fmod) != 0;
        json_decref(resp);
        if (!held) {
            return FENCE_OK; /* no longer held */
        }
        if (bad) {
            return fail(is, FENCE_EPROTO, "%s: the floor key of '%s' is not a number",
                        is->et.display, l->name);
        }
        r->floor_mod = fmod;
        seen = rev;
    }
    return fail(is, FENCE_ECONN, "%s: reissue '%s': the floor kept changing", is->et.display,
                l->name);
}

/* Both keys of a name into a malloc'd block. */
static char *name_keys(const fence__issuer *is, const char *name, char **owner, size_t *olen,
                       char **floor, size_t *flen)
{
    size_t n = strlen(name);
    char *b = malloc(2 * (is->prefix_len + n + 3));
    if (b != NULL) {
        *owner = b;
        *olen = key_of(is, 'o', name, n, b);
        *floor = b + *olen + 1;
        *flen = key_of(is, 'f', name, n, *floor);
    }
    return b;
}

static fence_status ei_raise(fence__issuer *is, const char *name, uint64_t floor,
                             int64_t deadline_us, uint64_t *after)
{
    char *owner, *fk;
    size_t olen, flen;
    char *block = name_keys(is, name, &owner, &olen, &fk, &flen);
    if (block == NULL) {
        return nomem(is);
    }
    fence_status st = FENCE_ECONN;
    for (int round = 0; round < 4; round++) {
        json_t *resp = NULL;
        st = cmd_call(is, "/v3/kv/txn", json_pack("{s:[o]}", "success", range_op(fk, flen, 0)),
                      deadline_us, &resp, NULL, NULL);
        if (st != FENCE_OK) {
            break;
        }
        uint64_t off;
        int64_t fmod, rev = 0;
        int bad = parse_floor(range_kv(resp, 0), &off, &fmod);
        fence__et_int(json_object_get(resp, "header"), "revision", &rev);
        json_decref(resp);
        if (bad) {
            st = fail(is, FENCE_EPROTO, "%s: the floor key of '%s' is not a number",
                      is->et.display, name);
            break;
        }
        if (token_of(off, rev, after) == 0 && *after >= floor) {
            st = FENCE_OK; /* the next token is above floor already */
            break;
        }
        uint64_t noff = raised_off(off, floor, rev);
        eroom r = {0};
        r.floor = fk;
        r.floor_len = flen;
        r.floor_mod = fmod;
        st = cmd_call(is, "/v3/kv/txn",
                      json_pack("{s:[o], s:[{s:{s:o, s:o}}]}", "compare", floor_cmp(&r),
                                "success", "request_put", "key", kjson(fk, flen), "value",
                                u64json(noff)),
                      deadline_us, &resp, NULL, NULL);
        if (st != FENCE_OK) {
            break;
        }
        int ok = json_is_true(json_object_get(resp, "succeeded"));
        fence__et_int(json_object_get(resp, "header"), "revision", &rev);
        json_decref(resp);
        if (ok) {
            st = token_of(noff, rev, after) == 0
                     ? FENCE_OK
                     : fail(is, FENCE_EINVAL, "floor %" PRIu64 " is too high", floor);
            break;
        }
        st = fail(is, FENCE_ECONN, "%s: raise '%s': the floor kept changing", is->et.display,
                  name);
    }
    free(block);
    return st;
}

static fence_status ei_inspect(fence__issuer *is, const char *name, int want_info,
                               int64_t deadline_us, fence_lease_info *out)
{
    char *owner, *fk;
    size_t olen, flen;
    char *block = name_keys(is, name, &owner, &olen, &fk, &flen);
    if (block == NULL) {
        return nomem(is);
    }
    json_t *resp = NULL;
    fence_status st = cmd_call(is, "/v3/kv/txn",
                               json_pack("{s:[o, o]}", "success", range_op(owner, olen, 0),
                                         range_op(fk, flen, 0)),
                               deadline_us, &resp, NULL, NULL);
    free(block);
    if (st != FENCE_OK) {
        return st;
    }
    json_t *okv = range_kv(resp, 0);
    out->held = okv != NULL;
    out->pttl_ms = -1;
    int64_t lease = 0;
    if (okv != NULL) {
        uint64_t off;
        int64_t mod = 0;
        char info[FENCE_HOLDER_INFO_MAX + 1];
        fence__et_int(okv, "mod_revision", &mod);
        fence__et_int(okv, "lease", &lease);
        if (parse_owner(okv, out->holder, &off, info) == 0 &&
            token_of(off, mod, &out->holder_token) == 0) {
            if (want_info) {
                snprintf(out->holder_info, sizeof out->holder_info, "%s", info);
            }
        } else {
            out->holder[0] = '\0';
        }
    }
    /* The last token: a bound on every token issued for the name (off +
     * the revision now); the next one is above it. */
    uint64_t foff;
    int64_t fmod, rev = 0;
    fence__et_int(json_object_get(resp, "header"), "revision", &rev);
    if (parse_floor(range_kv(resp, 1), &foff, &fmod) == 0 &&
        token_of(foff, rev, &out->last_token) != 0) {
        out->last_token = 0;
    }
    json_decref(resp);
    if (lease != 0) {
        /* The remaining TTL, in etcd's whole seconds. */
        if (cmd_call(is, "/v3/lease/timetolive", json_pack("{s:o}", "ID", idjson(lease)),
                     deadline_us, &resp, NULL, NULL) == FENCE_OK) {
            int64_t ttl = -1;
            if (fence__et_int(resp, "TTL", &ttl) == 0 && ttl >= 0) {
                out->pttl_ms = ttl * 1000;
            }
            json_decref(resp);
        }
    }
    return FENCE_OK;
}

/* ---- waiting ------------------------------------------------------------------------------ */

static fence__waiter *ei_wait_open(fence__issuer *is, const char *name, int64_t deadline_us)
{
    size_t n = strlen(name);
    fence__waiter *w = calloc(1, sizeof *w + is->prefix_len + n + 3);
    if (w == NULL) {
        return NULL;
    }
    w->is = is;
    w->keylen = key_of(is, 'o', name, n, w->key);
    /* The revision now: the watch starts after it, so a release between
     * this and the wait is seen. */
    json_t *req = json_pack("{s:o, s:b}", "key", kjson(w->key, w->keylen), "count_only", 1);
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

static int ei_wait(fence__waiter *w, int64_t deadline_us)
{
    json_t *req = json_pack("{s:{s:o, s:o, s:[s]}}", "create_request", "key",
                            kjson(w->key, w->keylen), "start_revision", idjson(w->start_rev),
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

static void ei_wait_close(fence__waiter *w)
{
    if (w != NULL) {
        fence__et_line_close(&w->ln);
        free(w);
    }
}

/* ---- what the cluster says ------------------------------------------------------------- */

static void field(fence_issuer_info *out, const char *key, const char *value, const char *note)
{
    if (out->nfields < FENCE_DESCRIBE_FIELDS) {
        struct fence_issuer_field *f = &out->field[out->nfields++];
        snprintf(f->key, sizeof f->key, "%s", key);
        snprintf(f->value, sizeof f->value, "%s", value);
        snprintf(f->note, sizeof f->note, "%s", note);
    }
}

static fence_status ei_start(fence__issuer *is, int64_t deadline_us)
{
    json_t *resp = NULL;
    fence_status st = cmd_call(is, "/v3/maintenance/status", json_object(), deadline_us, &resp,
                               NULL, NULL);
    if (st == FENCE_OK) {
        json_decref(resp);
    }
    return st;
}

static fence_status ei_describe(fence__issuer *is, int64_t deadline_us, fence_issuer_info *out)
{
    json_t *resp = NULL;
    fence_status st = cmd_call(is, "/v3/maintenance/status", json_object(), deadline_us, &resp,
                               NULL, NULL);
    if (st != FENCE_OK) {
        return st;
    }
    json_t *v = json_object_get(resp, "version");
    int64_t db = 0, term = 0, leader = 0, member = 0;
    fence__et_int(resp, "dbSize", &db);
    fence__et_int(resp, "raftTerm", &term);
    fence__et_int(resp, "leader", &leader);
    fence__et_int(json_object_get(resp, "header"), "member_id", &member);
    char buf[64];
    field(out, "version", json_is_string(v) ? json_string_value(v) : "", "");
    snprintf(buf, sizeof buf, "%" PRId64, db);
    field(out, "db_size", buf, "bytes; lock churn grows it until compaction and defrag");
    snprintf(buf, sizeof buf, "%" PRId64, term);
    field(out, "raft_term", buf, "");
    field(out, "leader", leader == 0 ? "none" : leader == member ? "this member" : "another",
          leader == 0 ? "no quorum: no tokens are issued" : "");
    field(out, "tokens", "revision", "off + the put's Raft revision: no clock involved");
    json_decref(resp);
    return FENCE_OK;
}

static void ei_metrics(const fence__issuer *is, fence_metrics *m)
{
    m->reconnects = atomic_load(&is->et.reconnects);
    m->redis_persistence = -1;
}

const fence__issuer_ops fence__etcd_issuer = {
    .name = "etcd",
    .open = ei_open,
    .start = ei_start,
    .close = ei_close,
    .url = ei_url,
    .down = ei_down,
    .check_name = ei_check_name,
    .lease_room = ei_lease_room,
    .lease_init = ei_lease_init,
    .acquire = ei_acquire,
    .renew = ei_renew,
    .release = ei_release,
    .reissue = ei_reissue,
    .raise = ei_raise,
    .inspect = ei_inspect,
    .wait_open = ei_wait_open,
    .wait = ei_wait,
    .wait_close = ei_wait_close,
    .describe = ei_describe,
    .metrics = ei_metrics,
};
