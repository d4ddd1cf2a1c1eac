/* pissuer.c -- the PostgreSQL issuer (issuer.h's operations,
 * fence__pg_issuer): its options, and each operation as one call of a lease
 * function of fence.sql (sql/postgres/75-leases.sql), which says what each
 * keeps. */
#include "pgissuer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_TIMEOUT_MS 2000

/* ---- open, start, close ------------------------------------------------------ */

static fence_status pi_open(fence__issuer **out, const fence_client_options *o,
                            const fence__iss_env *env)
{
    *out = NULL;
    fence__issuer *is = calloc(1, sizeof *is);
    if (is == NULL) {
        return (fence_status)fence__err_set(env->errslot(), env->errkey, FENCE_ENOMEM,
                                            "out of memory");
    }
    is->env = *env;
    pthread_mutex_init(&is->lock, NULL);
    atomic_init(&is->reconnects, 0);
    atomic_init(&is->down, 0);
    atomic_init(&is->broken, 0);
    *out = is;
    is->connect_timeout_ms = o->connect_timeout_ms ? o->connect_timeout_ms : DEFAULT_TIMEOUT_MS;
    is->io_timeout_ms = o->io_timeout_ms ? o->io_timeout_ms : DEFAULT_TIMEOUT_MS;
    if ((o->username != NULL && (is->user = strdup(o->username)) == NULL) ||
        (o->password != NULL && (is->password = strdup(o->password)) == NULL)) {
        return fence__pq_fail(is, FENCE_ENOMEM, "out of memory");
    }
    return fence__pq_url(is, o->url);
}

static void wipe_free(char *s)
{
    if (s != NULL) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

static void pi_close(fence__issuer *is)
{
    fence__pq_idle_close(is);
    pthread_mutex_destroy(&is->lock);
    wipe_free(is->url);
    wipe_free(is->password);
    free(is->user);
    free(is);
}

/* One statement with one row expected: FENCE_OK with *r (PQclear it). */
static fence_status one(fence__issuer *is, const char *what, const char *sql, int n,
                        const char *const *v, int64_t deadline_us, PGresult **r, int *twice)
{
    fence__pq_stmt s = {sql, n, v};
    fence_status st = fence__pq_run(is, what, &s, 1, deadline_us, r, twice, NULL);
    if (st == FENCE_OK && (*r == NULL || PQntuples(*r) != 1)) {
        PQclear(*r);
        *r = NULL;
        st = fence__pq_fail(is, FENCE_EPROTO, "%s: %s: expected one row", is->display, what);
    }
    if (st != FENCE_OK && *r != NULL) {
        PQclear(*r);
        *r = NULL;
    }
    return st;
}

/* The first contact: connect, and ask for fence.sql's version (the lease
 * functions are version 7's). */
static fence_status pi_start(fence__issuer *is, int64_t deadline_us)
{
    PGresult *r = NULL;
    fence_status st = one(is, "the check of fence.sql", "SELECT fence.version()", 0, NULL,
                          deadline_us, &r, NULL);
    if (st != FENCE_OK) {
        return st;
    }
    long v = strtol(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    if (v < 7) {
        return fence__pq_fail(is, FENCE_ECONFIG, "%s: fence.sql version %ld is installed; the "
                              "lease functions need version 7 or later: install it again "
                              "(psql -f fence.sql, fence_pg_install(); docs/postgres.md)",
                              is->display, v);
    }
    return FENCE_OK;
}

static const char *pi_url(const fence__issuer *is)
{
    return is != NULL ? is->display : "";
}

static int pi_down(fence__issuer *is)
{
    return atomic_load(&is->down);
}

static size_t pi_lease_room(const fence__issuer *is, size_t namelen)
{
    (void)is;
    (void)namelen;
    return 0;
}

static void pi_lease_init(fence__issuer *is, fence__ilease *l)
{
    (void)is;
    (void)l;
}

/* ---- values ------------------------------------------------------------------------ */

static int parse_u64(const char *s, uint64_t *out)
{
    return fence__token_parse(s, strlen(s), out);
}

static int64_t parse_i64(const char *s)
{
    return strtoll(s, NULL, 10);
}

/* ---- the lease operations ------------------------------------------------------------ */

static fence_status pi_acquire(fence__issuer *is, fence__ilease *l, const char *holder_info,
                               int64_t deadline_us, fence__grant *g)
{
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%" PRId64, l->ttl_ms);
    const char *v[4] = {l->name, l->holder, ttl, holder_info};
    PGresult *r = NULL;
    fence_status st = one(is, "acquire", "SELECT granted, token, pttl_ms FROM "
                          "fence.lease_acquire($1, $2, $3, $4)", 4, v, deadline_us, &r, NULL);
    if (st != FENCE_OK) {
        return st;
    }
    g->granted = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    g->behind_us = 0;
    g->pttl_ms = PQgetisnull(r, 0, 2) ? -1 : parse_i64(PQgetvalue(r, 0, 2));
    if (PQgetisnull(r, 0, 1) || parse_u64(PQgetvalue(r, 0, 1), &g->token) != 0) {
        st = fence__pq_fail(is, FENCE_EPROTO, "%s: acquire of '%s': no valid token in the "
                            "answer", is->display, l->name);
    }
    if (!g->granted) {
        g->token = 0;
    }
    PQclear(r);
    return st;
}

/* Append s to the array literal at *p as a quoted element. */
static char *quoted(char *p, const char *s, size_t n)
{
    *p++ = '"';
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"' || s[i] == '\\') {
            *p++ = '\\';
        }
        *p++ = s[i];
    }
    *p++ = '"';
    return p;
}

/* One batch's four array literals in one malloc'd block: v[0..4). */
static char *renew_arrays(fence__ilease *const *ls, size_t n, const char **v)
{
    size_t names = 3, holders = 3, tokens = 3, ttls = 3;
    for (size_t i = 0; i < n; i++) {
        names += 2 * ls[i]->namelen + 3;
        holders += FENCE_HOLDER_LEN + 1;
        tokens += 21;
        ttls += 21;
    }
    char *block = malloc(names + holders + tokens + ttls);
    if (block == NULL) {
        return NULL;
    }
    char *a = block, *b = a + names, *c = b + holders, *d = c + tokens;
    v[0] = a, v[1] = b, v[2] = c, v[3] = d;
    *a++ = '{', *b++ = '{', *c++ = '{', *d++ = '{';
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            *a++ = ',', *b++ = ',', *c++ = ',', *d++ = ',';
        }
        a = quoted(a, ls[i]->name, ls[i]->namelen);
        memcpy(b, ls[i]->holder, FENCE_HOLDER_LEN);
        b += FENCE_HOLDER_LEN;
        c += sprintf(c, "%" PRIu64, ls[i]->token);
        d += sprintf(d, "%" PRId64, ls[i]->ttl_ms);
    }
    memcpy(a, "}", 2), memcpy(b, "}", 2), memcpy(c, "}", 2), memcpy(d, "}", 2);
    return block;
}

/* "{t,f,...}" into results[0..n): 0 when it has exactly n. */
static int renew_answer(const char *s, size_t n, int *results)
{
    if (*s++ != '{') {
        return -1;
    }
    size_t i = 0;
    while (*s != '}' && *s != '\0') {
        if (i >= n || (*s != 't' && *s != 'f')) {
            return -1;
        }
        results[i++] = *s++ == 't';
        if (*s == ',') {
            s++;
        }
    }
    return i == n && *s == '}' ? 0 : -1;
}

/* Renew in batches of env.renew_batch, each one statement, all of them in
 * one round trip (pipelined); chan does not matter here: every call has a
 * connection of its own (pconn.c). */
static fence_status pi_renew(fence__issuer *is, fence__ilease *const *ls, size_t n, int chan,
                             int64_t deadline_us, int *results, int64_t *sent_us)
{
    (void)chan;
    if (n == 0) {
        return FENCE_OK;
    }
    size_t per = is->env.renew_batch > 0 ? (size_t)is->env.renew_batch : n;
    size_t nb = (n + per - 1) / per;
    fence__pq_stmt *s = calloc(nb, sizeof *s);
    const char **vals = calloc(nb * 4, sizeof *vals);
    char **blocks = calloc(nb, sizeof *blocks);
    PGresult **res = calloc(nb, sizeof *res);
    fence_status st = FENCE_OK;
    for (size_t b = 0; s != NULL && vals != NULL && blocks != NULL && res != NULL && b < nb; b++) {
        size_t k = b * per + per <= n ? per : n - b * per;
        blocks[b] = renew_arrays(ls + b * per, k, vals + 4 * b);
        if (blocks[b] == NULL) {
            st = FENCE_ENOMEM;
            break;
        }
        s[b] = (fence__pq_stmt){"SELECT fence.lease_renew($1, $2, $3, $4)", 4, vals + 4 * b};
    }
    if (s == NULL || vals == NULL || blocks == NULL || res == NULL || st != FENCE_OK) {
        st = fence__pq_fail(is, FENCE_ENOMEM, "out of memory (a renewal of %zu leases)", n);
    } else {
        st = fence__pq_run(is, "renew", s, nb, deadline_us, res, NULL, sent_us);
        for (size_t b = 0; b < nb; b++) {
            size_t k = b * per + per <= n ? per : n - b * per;
            if (res[b] == NULL) {
                continue; /* no answer: they stay -1 */
            }
            if (PQntuples(res[b]) != 1 || renew_answer(PQgetvalue(res[b], 0, 0), k,
                                                       results + b * per) != 0) {
                for (size_t i = 0; i < k; i++) {
                    results[b * per + i] = -1;
                }
                st = fence__pq_fail(is, FENCE_EPROTO, "%s: renew: unexpected answer",
                                    is->display);
            }
            PQclear(res[b]);
        }
    }
    for (size_t b = 0; blocks != NULL && b < nb; b++) {
        free(blocks[b]);
    }
    free(blocks);
    free(vals);
    free(s);
    free(res);
    return st;
}

static fence_status pi_release(fence__issuer *is, fence__ilease *l, int64_t deadline_us,
                               int *deleted, int *retried)
{
    char tok[24];
    snprintf(tok, sizeof tok, "%" PRIu64, l->token);
    const char *v[3] = {l->name, l->holder, tok};
    PGresult *r = NULL;
    fence_status st = one(is, "release", "SELECT fence.lease_release($1, $2, $3)", 3, v,
                          deadline_us, &r, retried);
    if (st == FENCE_OK) {
        *deleted = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
        PQclear(r);
    }
    return st;
}

static fence_status pi_reissue(fence__issuer *is, fence__ilease *l, uint64_t floor,
                               int64_t deadline_us, fence__grant *g)
{
    char tok[24], fl[24];
    snprintf(tok, sizeof tok, "%" PRIu64, l->token);
    snprintf(fl, sizeof fl, "%" PRIu64, floor);
    const char *v[4] = {l->name, l->holder, tok, fl};
    PGresult *r = NULL;
    fence_status st = one(is, "reissue", "SELECT fence.lease_reissue($1, $2, $3, $4)", 4, v,
                          deadline_us, &r, NULL);
    if (st != FENCE_OK) {
        return st;
    }
    g->granted = !PQgetisnull(r, 0, 0);
    g->pttl_ms = -1;
    if (g->granted && parse_u64(PQgetvalue(r, 0, 0), &g->token) != 0) {
        st = fence__pq_fail(is, FENCE_EPROTO, "%s: reissue of '%s': no valid token in the answer",
                            is->display, l->name);
    }
    PQclear(r);
    return st;
}

static fence_status pi_raise(fence__issuer *is, const char *name, uint64_t floor,
                             int64_t deadline_us, uint64_t *after)
{
    char fl[24];
    snprintf(fl, sizeof fl, "%" PRIu64, floor);
    const char *v[2] = {name, fl};
    PGresult *r = NULL;
    fence_status st = one(is, "token raise", "SELECT fence.lease_raise($1, $2)", 2, v,
                          deadline_us, &r, NULL);
    if (st != FENCE_OK) {
        return st;
    }
    *after = 0;
    if (strcmp(PQgetvalue(r, 0, 0), "0") != 0 && parse_u64(PQgetvalue(r, 0, 0), after) != 0) {
        st = fence__pq_fail(is, FENCE_EPROTO, "%s: the counter of '%s' is not a number",
                            is->display, name);
    }
    PQclear(r);
    return st;
}

static fence_status pi_inspect(fence__issuer *is, const char *name, int want_info,
                               int64_t deadline_us, fence_lease_info *out)
{
    const char *v[1] = {name};
    PGresult *r = NULL;
    fence_status st = one(is, "inspect", "SELECT held, holder, token, pttl_ms, last_token, info "
                          "FROM fence.lease_inspect($1)", 1, v, deadline_us, &r, NULL);
    if (st != FENCE_OK) {
        return st;
    }
    out->held = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    out->pttl_ms = parse_i64(PQgetvalue(r, 0, 3));
    if (out->held) {
        parse_u64(PQgetvalue(r, 0, 2), &out->holder_token);
        if (strlen(PQgetvalue(r, 0, 1)) == FENCE_HOLDER_LEN) {
            memcpy(out->holder, PQgetvalue(r, 0, 1), FENCE_HOLDER_LEN);
        }
        if (want_info && !PQgetisnull(r, 0, 5)) {
            snprintf(out->holder_info, sizeof out->holder_info, "%s", PQgetvalue(r, 0, 5));
        }
    }
    if (strcmp(PQgetvalue(r, 0, 4), "0") != 0) {
        parse_u64(PQgetvalue(r, 0, 4), &out->last_token);
    }
    PQclear(r);
    return FENCE_OK;
}

/* ---- what the server says ---------------------------------------------------------- */

static fence_status pi_describe(fence__issuer *is, int64_t deadline_us, fence_issuer_info *out)
{
    PGresult *r = NULL;
    fence_status st = one(is, "describe",
                          "SELECT pg_catalog.current_setting('server_version'), fence.version(), "
                          "pg_catalog.current_setting('fsync'), "
                          "pg_catalog.current_setting('synchronous_standby_names'), "
                          "pg_catalog.pg_is_in_recovery()", 0, NULL, deadline_us, &r, NULL);
    if (st != FENCE_OK) {
        return st;
    }
    const char *fsync = PQgetvalue(r, 0, 2), *sync = PQgetvalue(r, 0, 3);
    int standby = strcmp(PQgetvalue(r, 0, 4), "t") == 0;
    fence__iss_field(out, "server_version", PQgetvalue(r, 0, 0), "");
    fence__iss_field(out, "fence_sql_version", PQgetvalue(r, 0, 1), "");
    fence__iss_field(out, "fsync", fsync, strcmp(fsync, "on") != 0
                                   ? "a crash can lose issued tokens: they may repeat" : "");
    fence__iss_field(out, "synchronous_standby_names", sync[0] != '\0' ? sync : "none",
          sync[0] == '\0' ? "no synchronous standby: after a failover the newest tokens can be "
                             "issued again" : "");
    fence__iss_field(out, "role", standby ? "standby" : "primary",
          standby ? "a standby issues no token (read-only)" : "");
    fence__iss_field(out, "wait", is->wait_mode == FENCE__PG_WAIT_POLL ? "poll" : "notify",
          is->wait_mode == FENCE__PG_WAIT_POLL ? "waiters poll (fence_wait=poll)"
                                                : "waiters LISTEN (fence_wait=notify)");
    PQclear(r);
    return FENCE_OK;
}

static void pi_metrics(const fence__issuer *is, fence_metrics *m)
{
    m->reconnects = atomic_load(&is->reconnects);
    m->redis_persistence = -1;
}

const fence__issuer_ops fence__pg_issuer = {
    .name = "postgresql",
    .open = pi_open,
    .start = pi_start,
    .close = pi_close,
    .url = pi_url,
    .down = pi_down,
    .check_name = NULL,
    .lease_room = pi_lease_room,
    .lease_init = pi_lease_init,
    .acquire = pi_acquire,
    .renew = pi_renew,
    .release = pi_release,
    .reissue = pi_reissue,
    .raise = pi_raise,
    .inspect = pi_inspect,
    .wait_open = fence__pq_wait_open,
    .wait = fence__pq_wait,
    .wait_close = fence__pq_wait_close,
    .describe = pi_describe,
    .metrics = pi_metrics,
};
