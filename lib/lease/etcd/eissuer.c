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
#include "eissuer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_MS 2000
#define MAX_PREFIX 64

/* ---- options --------------------------------------------------------------------- */

static fence_status check_path(const fence__issuer *is, const char *path, const char *what)
{
    if (path != NULL && (path[0] == '\0' || access(path, R_OK) != 0)) {
        return fence__ei_fail(is, FENCE_EINVAL, "%s: %s", what,
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
        return fence__ei_fail(is, FENCE_EINVAL, "tls must be 0 or 1");
    }
    if (o->tls_insecure != 0 && o->tls_insecure != 1) {
        return fence__ei_fail(is, FENCE_EINVAL, "tls_insecure must be 0 or 1");
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
        return fence__ei_fail(is, FENCE_EINVAL, "tls_server_name must be a host name (at most 255 bytes)");
    }
    if ((o->tls_cert_file == NULL) != (o->tls_key_file == NULL)) {
        return fence__ei_fail(is, FENCE_EINVAL, "tls_cert_file and tls_key_file go together (mutual TLS "
                    "needs both)");
    }
    et->tls |= o->tls == 1;
    int any = o->tls_ca_file || o->tls_ca_dir || o->tls_cert_file || sn || o->tls_insecure;
    if (any && !et->tls) {
        return fence__ei_fail(is, FENCE_EINVAL, "TLS options given but TLS is off: use an etcds:// URL "
                    "or set tls = 1");
    }
    if (o->tls_insecure && (o->tls_ca_file || o->tls_ca_dir || sn)) {
        return fence__ei_fail(is, FENCE_EINVAL, "tls_insecure turns verification off: it cannot be "
                    "combined with tls_ca_file, tls_ca_dir or tls_server_name");
    }
    int bad = 0;
    et->ca_file = dup_opt(o->tls_ca_file, &bad);
    et->ca_dir = dup_opt(o->tls_ca_dir, &bad);
    et->cert_file = dup_opt(o->tls_cert_file, &bad);
    et->key_file = dup_opt(o->tls_key_file, &bad);
    et->server_name = dup_opt(sn, &bad);
    et->insecure = o->tls_insecure;
    return bad ? fence__ei_nomem(is) : FENCE_OK;
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
        return fence__ei_fail(is, FENCE_EINVAL, "prefix longer than %d bytes", MAX_PREFIX);
    }
    for (const char *p = prefix; *p != '\0'; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            return fence__ei_fail(is, FENCE_EINVAL, "prefix holds a control character");
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
        return fence__ei_nomem(is);
    }
    is->prefix_len = strlen(prefix);
    if (et->user != NULL && et->user[0] == '\0') {
        return fence__ei_fail(is, FENCE_EINVAL, "the user name must not be empty");
    }
    if (et->user != NULL && et->password == NULL) {
        return fence__ei_fail(is, FENCE_EINVAL, "a user name needs a password");
    }
    if (et->user == NULL && et->password != NULL) {
        return fence__ei_fail(is, FENCE_EINVAL, "etcd needs a user name with a password (etcd://user:"
                    "password@host, or username)");
    }
    if (o->connect_timeout_ms < 0 || o->io_timeout_ms < 0) {
        return fence__ei_fail(is, FENCE_EINVAL, "connect_timeout_ms and io_timeout_ms must be >= 0");
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

static size_t ei_lease_room(const fence__issuer *is, size_t namelen)
{
    return sizeof(eroom) + 2 * (is->prefix_len + namelen + 3);
}

static void ei_lease_init(fence__issuer *is, fence__ilease *l)
{
    eroom *r = ROOM(l);
    memset(r, 0, sizeof *r);
    r->owner = r->buf;
    r->owner_len = fence__ei_key_of(is, 'o', l->name, l->namelen, r->owner);
    r->floor = r->owner + r->owner_len + 1;
    r->floor_len = fence__ei_key_of(is, 'f', l->name, l->namelen, r->floor);
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
                         fence__ei_kjson(r->floor, r->floor_len), "version", "0");
    }
    return json_pack("{s:s, s:o, s:o}", "target", "MOD", "key", fence__ei_kjson(r->floor, r->floor_len),
                     "mod_revision", fence__ei_idjson(r->floor_mod));
}

/* The compares that the owner key is still l's own put. */
static json_t *mine_cmps(const eroom *r)
{
    return json_pack("[{s:s, s:o, s:o}, {s:s, s:o, s:o}]",
                     "target", "LEASE", "key", fence__ei_kjson(r->owner, r->owner_len), "lease",
                     fence__ei_idjson(r->lease),
                     "target", "MOD", "key", fence__ei_kjson(r->owner, r->owner_len), "mod_revision",
                     fence__ei_idjson(r->rev));
}

/* The owner value for l with off. */
static json_t *owner_value(const fence__ilease *l, uint64_t off, const char *info)
{
    char v[FENCE_HOLDER_LEN + 24 + FENCE_HOLDER_INFO_MAX + 8];
    int n = snprintf(v, sizeof v, "%s:%" PRIu64 "%s%s", l->holder, off,
                     info != NULL ? ":" : "", info != NULL ? info : "");
    return fence__et_b64(v, (size_t)n);
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
        fence_status st = fence__ei_group_for(is, l, deadline_us, &grp);
        if (st != FENCE_OK) {
            return st;
        }
        json_t *cmp = json_pack("[{s:s, s:o, s:s}, o]", "target", "CREATE", "key",
                                fence__ei_kjson(r->owner, r->owner_len), "create_revision", "0",
                                floor_cmp(r));
        json_t *put = json_pack("[{s:{s:o, s:o, s:o}}]", "request_put", "key",
                                fence__ei_kjson(r->owner, r->owner_len), "value",
                                owner_value(l, r->off, holder_info), "lease", fence__ei_idjson(grp->id));
        json_t *rd = json_pack("[o, o]", fence__ei_range_op(r->owner, r->owner_len, 0),
                               fence__ei_range_op(r->floor, r->floor_len, 0));
        json_t *resp = NULL;
        int code = -1;
        st = fence__ei_cmd_call(is, "/v3/kv/txn", json_pack("{s:o, s:o, s:o}", "compare", cmp, "success",
                                                  put, "failure", rd),
                      deadline_us, &resp, NULL, &code);
        if (st == FENCE_EPROTO && code == 5) { /* the group's etcd lease just expired */
            fence__ei_group_dead(is, grp);
            fence__ei_group_leave(is, grp, deadline_us);
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
                fence__ei_group_leave(is, grp, deadline_us);
                return fence__ei_fail(is, FENCE_EPROTO, "%s: acquire '%s': revision %" PRId64 " with "
                            "floor %" PRIu64 " is no token", is->et.display, l->name, rev,
                            r->off);
            }
            r->grp = grp;
            r->lease = grp->id;
            r->rev = rev;
            g->granted = 1;
            return FENCE_OK;
        }
        json_t *okv = fence__ei_range_kv(resp, 0), *fkv = fence__ei_range_kv(resp, 1);
        uint64_t foff;
        int64_t fmod;
        if (parse_floor(fkv, &foff, &fmod) != 0) {
            json_decref(resp);
            fence__ei_group_leave(is, grp, deadline_us);
            return fence__ei_fail(is, FENCE_EPROTO, "%s: the floor key of '%s' is not a number",
                        is->et.display, l->name);
        }
        r->floor_mod = fmod;
        r->off = foff;
        if (okv == NULL) {
            /* The floor moved, or released between compare and read. */
            json_decref(resp);
            fence__ei_group_leave(is, grp, deadline_us);
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
            egroup *prev = fence__ei_group_find(is, olease);
            pthread_mutex_unlock(&is->grp_lock);
            int alive = -1;
            if (prev != NULL) {
                pthread_mutex_lock(&is->cmd_lock);
                st = fence__ei_keepalive(is, &is->cmd, &olease, 1, deadline_us, &alive);
                pthread_mutex_unlock(&is->cmd_lock);
            }
            fence__ei_group_leave(is, grp, deadline_us);
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
                fence__ei_group_leave(is, grp, deadline_us);
                return fence__ei_fail(is, FENCE_EPROTO, "%s: the owner key of '%s' is malformed",
                            is->et.display, l->name);
            }
            r->grp = grp;
            r->lease = olease;
            r->rev = orev;
            r->off = ooff;
            g->granted = 1;
            return FENCE_OK;
        }
        fence__ei_group_leave(is, grp, deadline_us); /* held by another */
        return FENCE_OK;
    }
    return fence__ei_fail(is, FENCE_ECONN, "%s: acquire '%s': the name kept changing under the txn",
                is->et.display, l->name);
}

/* ---- release, reissue, raise, inspect ------------------------------------------------------ */

static fence_status ei_release(fence__issuer *is, fence__ilease *l, int64_t deadline_us,
                               int *deleted, int *retried)
{
    eroom *r = ROOM(l);
    *deleted = 0;
    *retried = 0;
    json_t *del = json_pack("[{s:{s:o}}]", "request_delete_range", "key",
                            fence__ei_kjson(r->owner, r->owner_len));
    json_t *resp = NULL;
    fence_status st = fence__ei_cmd_call(is, "/v3/kv/txn", json_pack("{s:o, s:o}", "compare",
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
        fence__ei_group_leave(is, r->grp, deadline_us);
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
                                "request_put", "key", fence__ei_kjson(r->floor, r->floor_len), "value",
                                u64json(off),
                                "request_put", "key", fence__ei_kjson(r->owner, r->owner_len), "value",
                                owner_value(l, off, NULL), "lease", fence__ei_idjson(r->lease));
        json_t *rd = json_pack("[o, o]", fence__ei_range_op(r->owner, r->owner_len, 0),
                               fence__ei_range_op(r->floor, r->floor_len, 0));
        json_t *resp = NULL;
        fence_status st = fence__ei_cmd_call(is, "/v3/kv/txn", json_pack("{s:o, s:o, s:o}", "compare",
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
                return fence__ei_fail(is, FENCE_EPROTO, "%s: reissue '%s': no token", is->et.display,
                            l->name);
            }
            r->rev = rev;
            r->off = off;
            r->floor_mod = rev;
            g->granted = 1;
            return FENCE_OK;
        }
        json_t *okv = fence__ei_range_kv(resp, 0);
        int64_t olease = 0, orev = 0, fmod = 0;
        fence__et_int(okv, "lease", &olease);
        fence__et_int(okv, "mod_revision", &orev);
        int held = okv != NULL && olease == r->lease && orev == r->rev;
        int bad = parse_floor(fence__ei_range_kv(resp, 1), &fl, &fmod) != 0;
        json_decref(resp);
        if (!held) {
            return FENCE_OK; /* no longer held */
        }
        if (bad) {
            return fence__ei_fail(is, FENCE_EPROTO, "%s: the floor key of '%s' is not a number",
                        is->et.display, l->name);
        }
        r->floor_mod = fmod;
        seen = rev;
    }
    return fence__ei_fail(is, FENCE_ECONN, "%s: reissue '%s': the floor kept changing", is->et.display,
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
        *olen = fence__ei_key_of(is, 'o', name, n, b);
        *floor = b + *olen + 1;
        *flen = fence__ei_key_of(is, 'f', name, n, *floor);
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
        return fence__ei_nomem(is);
    }
    fence_status st = FENCE_ECONN;
    for (int round = 0; round < 4; round++) {
        json_t *resp = NULL;
        st = fence__ei_cmd_call(is, "/v3/kv/txn", json_pack("{s:[o]}", "success", fence__ei_range_op(fk, flen, 0)),
                      deadline_us, &resp, NULL, NULL);
        if (st != FENCE_OK) {
            break;
        }
        uint64_t off;
        int64_t fmod, rev = 0;
        int bad = parse_floor(fence__ei_range_kv(resp, 0), &off, &fmod);
        fence__et_int(json_object_get(resp, "header"), "revision", &rev);
        json_decref(resp);
        if (bad) {
            st = fence__ei_fail(is, FENCE_EPROTO, "%s: the floor key of '%s' is not a number",
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
        st = fence__ei_cmd_call(is, "/v3/kv/txn",
                      json_pack("{s:[o], s:[{s:{s:o, s:o}}]}", "compare", floor_cmp(&r),
                                "success", "request_put", "key", fence__ei_kjson(fk, flen), "value",
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
                     : fence__ei_fail(is, FENCE_EINVAL, "floor %" PRIu64 " is too high", floor);
            break;
        }
        st = fence__ei_fail(is, FENCE_ECONN, "%s: raise '%s': the floor kept changing", is->et.display,
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
        return fence__ei_nomem(is);
    }
    json_t *resp = NULL;
    fence_status st = fence__ei_cmd_call(is, "/v3/kv/txn",
                               json_pack("{s:[o, o]}", "success", fence__ei_range_op(owner, olen, 0),
                                         fence__ei_range_op(fk, flen, 0)),
                               deadline_us, &resp, NULL, NULL);
    free(block);
    if (st != FENCE_OK) {
        return st;
    }
    json_t *okv = fence__ei_range_kv(resp, 0);
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
    if (parse_floor(fence__ei_range_kv(resp, 1), &foff, &fmod) == 0 &&
        token_of(foff, rev, &out->last_token) != 0) {
        out->last_token = 0;
    }
    json_decref(resp);
    if (lease != 0) {
        /* The remaining TTL, in etcd's whole seconds. */
        if (fence__ei_cmd_call(is, "/v3/lease/timetolive", json_pack("{s:o}", "ID", fence__ei_idjson(lease)),
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

/* ---- what the cluster says ------------------------------------------------------------- */

static fence_status ei_start(fence__issuer *is, int64_t deadline_us)
{
    json_t *resp = NULL;
    fence_status st = fence__ei_cmd_call(is, "/v3/maintenance/status", json_object(), deadline_us, &resp,
                               NULL, NULL);
    if (st == FENCE_OK) {
        json_decref(resp);
    }
    return st;
}

static fence_status ei_describe(fence__issuer *is, int64_t deadline_us, fence_issuer_info *out)
{
    json_t *resp = NULL;
    fence_status st = fence__ei_cmd_call(is, "/v3/maintenance/status", json_object(), deadline_us, &resp,
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
    fence__iss_field(out, "version", json_is_string(v) ? json_string_value(v) : "", "");
    snprintf(buf, sizeof buf, "%" PRId64, db);
    fence__iss_field(out, "db_size", buf, "bytes; lock churn grows it until compaction and defrag");
    snprintf(buf, sizeof buf, "%" PRId64, term);
    fence__iss_field(out, "raft_term", buf, "");
    fence__iss_field(out, "leader", leader == 0 ? "none" : leader == member ? "this member" : "another",
          leader == 0 ? "no quorum: no tokens are issued" : "");
    fence__iss_field(out, "tokens", "revision", "off + the put's Raft revision: no clock involved");
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
    .renew = fence__ei_renew,
    .release = ei_release,
    .reissue = ei_reissue,
    .raise = ei_raise,
    .inspect = ei_inspect,
    .wait_open = fence__ei_wait_open,
    .wait = fence__ei_wait,
    .wait_close = fence__ei_wait_close,
    .describe = ei_describe,
    .metrics = ei_metrics,
};

