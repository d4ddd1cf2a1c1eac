/* url.c -- redis:// and rediss://[user:password@]host[:port][/db],
 * unix:///path[?db=N] and
 * redis-sentinel://[[user:]password@]host[:port][,host[:port]...][/db]#master.
 * Messages about a URL never quote its credentials. */
#include "redis.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fence__wipe_free(char *s)
{
    if (s != NULL) {
        volatile char *p = s;
        while (*p != '\0') {
            *p++ = '\0';
        }
        free(s);
    }
}

void fence__url_free(fence__url *u)
{
    if (u == NULL) {
        return;
    }
    fence__wipe_free(u->user);
    fence__wipe_free(u->password);
    fence__wipe_free(u->sentinel_user);
    fence__wipe_free(u->sentinel_password);
    free(u->tls_server_name);
    if (u->tls_ctx != NULL && u->tls_ctx_free != NULL) {
        u->tls_ctx_free(u->tls_ctx);
    }
    u->user = NULL;
    u->password = NULL;
    u->sentinel_user = NULL;
    u->sentinel_password = NULL;
    u->tls_server_name = NULL;
    u->tls_ctx = NULL;
}

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9') {
        return ch - '0';
    }
    if (ch >= 'a' && ch <= 'f') {
        return ch - 'a' + 10;
    }
    if (ch >= 'A' && ch <= 'F') {
        return ch - 'A' + 10;
    }
    return -1;
}

/* Percent-decode s[0..n) into a new string; NULL on a bad escape, an
 * embedded NUL, or no memory (*nomem tells which). */
static char *pct_decode(const char *s, size_t n, int *nomem)
{
    char *out = malloc(n + 1);
    size_t j = 0;
    *nomem = out == NULL;
    if (out == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            if (i + 2 >= n) {
                free(out);
                return NULL;
            }
            int a = hexval((unsigned char)s[i + 1]);
            int b = hexval((unsigned char)s[i + 2]);
            if (a < 0 || b < 0 || (a == 0 && b == 0)) {
                free(out);
                return NULL;
            }
            out[j++] = (char)(a * 16 + b);
            i += 2;
        } else {
            out[j++] = s[i];
        }
    }
    out[j] = '\0';
    return out;
}

/* Parse a decimal integer in s[0..n) within [lo, hi]; -1 when it is not. */
static long parse_num(const char *s, size_t n, long lo, long hi)
{
    uint64_t v = 0;
    if (fence__u64_parse(s, n, (uint64_t)hi, &v) != 0 || v < (uint64_t)lo) {
        return -1;
    }
    return (long)v;
}

/* Where a parse is: the URL being filled and where to say what is wrong. */
typedef struct {
    fence__url *u;
    char *err;
    size_t errlen;
} parser;

/* Say why the URL is refused; FENCE_EINVAL. */
__attribute__((format(printf, 2, 3))) static int bad(parser *ps, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->err, ps->errlen, fmt, ap);
    va_end(ap);
    return FENCE_EINVAL;
}

/* unix:///path[?db=N]: p is what follows "unix://". */
static int parse_unix(parser *ps, const char *p)
{
    fence__url *u = ps->u;
    u->is_unix = 1;
    const char *q = strchr(p, '?');
    size_t plen = q ? (size_t)(q - p) : strlen(p);
    if (plen == 0 || p[0] != '/') {
        return bad(ps, "unix URL needs an absolute socket path: unix:///path/to/redis.sock");
    }
    if (plen >= sizeof u->path) {
        return bad(ps, "unix socket path longer than %zu bytes", sizeof u->path - 1);
    }
    memcpy(u->path, p, plen);
    u->path[plen] = '\0';
    if (q != NULL) {
        long db = strncmp(q, "?db=", 4) == 0 ? parse_num(q + 4, strlen(q + 4), 0, 1000000) : -1;
        if (db < 0) {
            return bad(ps, "unix URL: the only query accepted is ?db=N (N a database number)");
        }
        u->db = (int)db;
    }
    snprintf(u->display, sizeof u->display, "unix://%s%s%.*s", u->path,
             u->db ? "?db=" : "", u->db ? 12 : 0, q ? q + 4 : "");
    return FENCE_OK;
}

/* user:password@ or :password@ in p[0..at) (and, where bare_ok, a lone
 * password@, as Sentinel URLs write it): percent-decoded, never quoted. */
static int parse_userinfo(parser *ps, const char *p, const char *at, int bare_ok)
{
    fence__url *u = ps->u;
    const char *colon = memchr(p, ':', (size_t)(at - p));
    int nomem = 0;
    if (colon == NULL && bare_ok) {
        colon = p - 1; /* all of it is the password */
    } else if (colon == NULL) {
        return bad(ps, "redis URL: credentials must be user:password@ or :password@");
    }
    if (colon > p) {
        u->user = pct_decode(p, (size_t)(colon - p), &nomem);
        if (u->user == NULL) {
            return nomem ? FENCE_ENOMEM : bad(ps, "redis URL: bad percent-escape in the user name");
        }
    }
    u->password = pct_decode(colon + 1, (size_t)(at - colon - 1), &nomem);
    if (u->password == NULL) {
        return nomem ? FENCE_ENOMEM : bad(ps, "redis URL: bad percent-escape in the password");
    }
    if (u->password[0] == '\0') {
        return bad(ps, "redis URL: empty password");
    }
    return FENCE_OK;
}

/* [IPv6] at p, before end; *portp gets where a port starts, if any. */
static int parse_host_v6(parser *ps, const char *p, const char *end, const char **portp)
{
    fence__url *u = ps->u;
    const char *rb = memchr(p, ']', (size_t)(end - p));
    if (rb == NULL) {
        return bad(ps, "redis URL: unterminated [IPv6] host");
    }
    if ((size_t)(rb - p - 1) >= sizeof u->host || rb == p + 1) {
        return bad(ps, "redis URL: bad [IPv6] host");
    }
    memcpy(u->host, p + 1, (size_t)(rb - p - 1));
    u->host[rb - p - 1] = '\0';
    const char *hend = rb + 1;
    if (hend < end) {
        if (*hend != ':') {
            return bad(ps, "redis URL: junk after the [IPv6] host");
        }
        *portp = hend + 1;
    }
    return FENCE_OK;
}

/* A host name or IPv4 address at p, before end; *portp as above. */
static int parse_host_name(parser *ps, const char *p, const char *end, const char **portp)
{
    fence__url *u = ps->u;
    const char *colon = memchr(p, ':', (size_t)(end - p));
    const char *hend = colon ? colon : end;
    if (hend == p) {
        return bad(ps, "redis URL: missing host");
    }
    if ((size_t)(hend - p) >= sizeof u->host) {
        return bad(ps, "redis URL: host name longer than %zu bytes", sizeof u->host - 1);
    }
    for (const char *s = p; s < hend; s++) {
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9') || *s == '.' || *s == '-' || *s == '_')) {
            return bad(ps, "redis URL: bad character in the host name");
        }
    }
    memcpy(u->host, p, (size_t)(hend - p));
    u->host[hend - p] = '\0';
    if (colon != NULL) {
        *portp = colon + 1;
    }
    return FENCE_OK;
}

/* host[:port] in p[0..end), then the optional /db from end. */
static int parse_hostport_db(parser *ps, const char *p, const char *end)
{
    fence__url *u = ps->u;
    const char *portp = NULL;
    int st = *p == '[' ? parse_host_v6(ps, p, end, &portp)
                       : parse_host_name(ps, p, end, &portp);
    if (st != FENCE_OK) {
        return st;
    }
    u->port = 6379;
    if (portp != NULL) {
        long port = parse_num(portp, (size_t)(end - portp), 1, 65535);
        if (port < 0) {
            return bad(ps, "redis URL: port must be a number from 1 to 65535");
        }
        u->port = (int)port;
    }
    if (*end == '/' && end[1] != '\0') {
        long db = parse_num(end + 1, strlen(end + 1), 0, 1000000);
        if (db < 0) {
            return bad(ps, "redis URL: the path must be a database number, like /0");
        }
        u->db = (int)db;
    }
    return FENCE_OK;
}

/* The last '@' in p[0..end), or NULL. */
static const char *last_at(const char *p, const char *end)
{
    const char *at = NULL;
    for (const char *s = p; s < end; s++) {
        if (*s == '@') {
            at = s;
        }
    }
    return at;
}

/* redis:// or rediss://[user:password@]host[:port][/db]: p follows the
 * scheme. */
static int parse_redis(parser *ps, const char *p, const char *scheme)
{
    fence__url *u = ps->u;
    const char *end = p + strcspn(p, "/?#");
    if (*end == '?' || *end == '#') {
        return bad(ps, "redis URL: query strings and fragments are not supported");
    }
    /* userinfo: up to the last '@' before the path */
    const char *at = last_at(p, end);
    int st = at != NULL ? parse_userinfo(ps, p, at, 0) : FENCE_OK;
    if (st == FENCE_OK) {
        st = parse_hostport_db(ps, at != NULL ? at + 1 : p, end);
    }
    if (st != FENCE_OK) {
        return st;
    }
    int v6 = strchr(u->host, ':') != NULL;
    snprintf(u->display, sizeof u->display, "%s%s%s%s%s:%d/%d", scheme,
             (u->user || u->password) ? "***@" : "", v6 ? "[" : "", u->host, v6 ? "]" : "",
             u->port, u->db);
    return FENCE_OK;
}

/* One Sentinel's host[:port] in p[0..end) into u->sentinels. */
static int parse_sentinel_addr(parser *ps, const char *p, const char *end)
{
    fence__url *u = ps->u;
    if (u->nsentinels >= FENCE__MAX_SENTINELS) {
        return bad(ps, "redis-sentinel URL: more than %d Sentinels", FENCE__MAX_SENTINELS);
    }
    const char *portp = NULL;
    int st = p < end && *p == '[' ? parse_host_v6(ps, p, end, &portp)
                                  : parse_host_name(ps, p, end, &portp);
    if (st != FENCE_OK) {
        return st;
    }
    fence__hostport *h = &u->sentinels[u->nsentinels++];
    memcpy(h->host, u->host, sizeof h->host);
    h->port = 26379;
    if (portp != NULL) {
        long port = parse_num(portp, (size_t)(end - portp), 1, 65535);
        if (port < 0) {
            return bad(ps, "redis-sentinel URL: port must be a number from 1 to 65535");
        }
        h->port = (int)port;
    }
    return FENCE_OK;
}

/* #master: letters, digits, - _ . :, 1..127 bytes. */
static int parse_master(parser *ps, const char *hash)
{
    fence__url *u = ps->u;
    if (hash == NULL || hash[1] == '\0') {
        return bad(ps, "redis-sentinel URL: the master's name is missing: "
                       "redis-sentinel://host[:port][,host[:port]...][/db]#master");
    }
    size_t n = strlen(hash + 1);
    if (n >= sizeof u->master) {
        return bad(ps, "redis-sentinel URL: master name longer than %zu bytes",
                   sizeof u->master - 1);
    }
    if (strspn(hash + 1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:") != n) {
        return bad(ps, "redis-sentinel URL: the master name may hold only letters, digits "
                       "and - _ . :");
    }
    memcpy(u->master, hash + 1, n + 1);
    return FENCE_OK;
}

/* redis-sentinel://[[user:]password@]host[:port][,host[:port]...][/db]#master */
static int parse_sentinel(parser *ps, const char *p)
{
    fence__url *u = ps->u;
    u->sentinel = 1;
    const char *hash = strchr(p, '#');
    int st = parse_master(ps, hash);
    const char *end = hash != NULL ? hash : p + strlen(p);
    const char *path = p + strcspn(p, "/?#");
    if (st == FENCE_OK && *path == '?') {
        return bad(ps, "redis-sentinel URL: query strings are not supported");
    }
    const char *at = last_at(p, path);
    if (st == FENCE_OK && at != NULL) {
        st = parse_userinfo(ps, p, at, 1);
    }
    for (const char *h = at != NULL ? at + 1 : p; st == FENCE_OK;) {
        const char *comma = memchr(h, ',', (size_t)(path - h));
        const char *hend = comma != NULL ? comma : path;
        st = hend == h ? bad(ps, "redis-sentinel URL: an empty Sentinel address")
                       : parse_sentinel_addr(ps, h, hend);
        if (comma == NULL) {
            break;
        }
        h = comma + 1;
    }
    if (st == FENCE_OK && *path == '/' && path + 1 < end) {
        long db = parse_num(path + 1, (size_t)(end - path - 1), 0, 1000000);
        st = db < 0 ? bad(ps, "redis-sentinel URL: the path must be a database number, like /0")
                    : FENCE_OK;
        u->db = (int)db;
    }
    if (st != FENCE_OK) {
        return st;
    }
    snprintf(u->host, sizeof u->host, "%s", u->sentinels[0].host);
    u->port = u->sentinels[0].port;
    int v6 = strchr(u->host, ':') != NULL;
    snprintf(u->display, sizeof u->display, "redis-sentinel://%s%s%s%s:%d%s/%d#%.100s",
             (u->user || u->password) ? "***@" : "", v6 ? "[" : "", u->host, v6 ? "]" : "",
             u->port, u->nsentinels > 1 ? ",..." : "", u->db, u->master);
    return FENCE_OK;
}

int fence__url_parse(fence__url *u, const char *url, char *err, size_t errlen)
{
    parser ps = {u, err, errlen};
    int st;
    memset(u, 0, sizeof *u);
    if (url == NULL || url[0] == '\0') {
        st = bad(&ps, "empty URL: expected redis://[user:password@]host[:port][/db], "
                      "rediss://..., redis-sentinel://host[:port][,...]#master or unix:///path");
    } else if (strlen(url) > 2048) {
        st = bad(&ps, "URL longer than 2048 bytes");
    } else if (strncmp(url, "unix://", 7) == 0) {
        st = parse_unix(&ps, url + 7);
    } else if (strncmp(url, "rediss://", 9) == 0) {
        u->tls = 1;
        st = parse_redis(&ps, url + 9, "rediss://");
    } else if (strncmp(url, "redis-sentinel://", 17) == 0) {
        st = parse_sentinel(&ps, url + 17);
    } else if (strncmp(url, "redis://", 8) != 0) {
        st = bad(&ps, "unsupported URL scheme: expected redis://, rediss:// (TLS), "
                      "redis-sentinel://host[:port][,...]#master or unix:///path");
    } else {
        st = parse_redis(&ps, url + 8, "redis://");
    }
    if (st != FENCE_OK) {
        fence__url_free(u);
    }
    return st;
}
