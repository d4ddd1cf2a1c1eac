/* econn.c -- the etcd issuer's engine: its URL, HTTP lines to the
 * members (libcurl easy handles, HTTP/1.1, keep-alive), TLS, auth, and
 * one call as one POST with its deadline (etcd.h).  No HTTP or JSON is
 * written by hand here: libcurl speaks HTTP, jansson reads and writes
 * JSON, OpenSSL's EVP codes base64. */
#include "etcd.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_PORT 2379

fence_status fence__et_fail(const fence__etcd *et, fence_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fence__err_vset(et->errslot(), et->errkey, (int)st, fmt, ap);
    va_end(ap);
    return st;
}

static void wipe_free(char *s)
{
    if (s != NULL) {
        volatile char *p = s;
        while (*p != '\0') {
            *p++ = '\0';
        }
        free(s);
    }
}

/* ---- the URL ---------------------------------------------------------------- */

/* Percent-decoded copy of s[0..n), or NULL (bad escape or no memory:
 * *bad tells). */
static char *decode(const char *s, size_t n, int *bad)
{
    char *d = malloc(n + 1);
    size_t j = 0;
    for (size_t i = 0; d != NULL && i < n; i++) {
        if (s[i] == '%') {
            unsigned v;
            if (i + 2 >= n) {
                *bad = 1;
                free(d);
                return NULL;
            }
            char hex[3] = {s[i + 1], s[i + 2], '\0'};
            char *end;
            v = (unsigned)strtoul(hex, &end, 16);
            if (end != hex + 2 || v == 0) {
                *bad = 1;
                free(d);
                return NULL;
            }
            d[j++] = (char)v;
            i += 2;
        } else {
            d[j++] = s[i];
        }
    }
    if (d != NULL) {
        d[j] = '\0';
    }
    return d;
}

fence_status fence__et_url(fence__etcd *et, const char *url)
{
    const char *rest;
    if (strncmp(url, "etcd://", 7) == 0) {
        rest = url + 7;
    } else if (strncmp(url, "etcds://", 8) == 0) {
        rest = url + 8;
        et->tls = 1;
    } else {
        return fence__et_fail(et, FENCE_EINVAL, "not an etcd URL: expected etcd:// or etcds://");
    }
    size_t len = strcspn(rest, "/?#");
    if (rest[len] == '/' && rest[len + 1] != '\0') {
        return fence__et_fail(et, FENCE_EINVAL, "etcd URL: nothing may follow host:port "
                              "(a path, a query); use the prefix option for keys");
    }
    if (rest[len] == '?' || rest[len] == '#') {
        return fence__et_fail(et, FENCE_EINVAL, "etcd URL: no query or fragment is understood");
    }
    const char *at = memchr(rest, '@', len);
    if (at != NULL) {
        /* "user@" alone: the password comes from the options (a file, the
         * environment: never argv); without one the issuer refuses. */
        const char *colon = memchr(rest, ':', (size_t)(at - rest));
        const char *uend = colon != NULL ? colon : at;
        int bad = 0;
        et->user = decode(rest, (size_t)(uend - rest), &bad);
        if (colon != NULL && !bad) {
            et->password = decode(colon + 1, (size_t)(at - colon - 1), &bad);
        }
        if (bad) {
            return fence__et_fail(et, FENCE_EINVAL, "etcd URL: bad percent-escape in the "
                                  "credentials");
        }
        if (et->user == NULL || (colon != NULL && et->password == NULL)) {
            return fence__et_fail(et, FENCE_ENOMEM, "out of memory");
        }
        if (et->user[0] == '\0') {
            return fence__et_fail(et, FENCE_EINVAL, "etcd URL: empty user name");
        }
        len -= (size_t)(at + 1 - rest);
        rest = at + 1;
    }
    if (len == 0) {
        return fence__et_fail(et, FENCE_EINVAL, "etcd URL: no host (etcd://host:port"
                              "[,host:port...])");
    }
    const char *p = rest, *end = rest + len;
    while (p <= end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma != NULL ? comma : end;
        if (e == p) {
            return fence__et_fail(et, FENCE_EINVAL, "etcd URL: an empty member in the list");
        }
        if (et->nmembers == FENCE__ET_MAX_MEMBERS) {
            return fence__et_fail(et, FENCE_EINVAL, "etcd URL: more than %d members",
                                  FENCE__ET_MAX_MEMBERS);
        }
        const char *colon = memchr(p, ':', (size_t)(e - p));
        if (*p == '[') {
            return fence__et_fail(et, FENCE_EINVAL, "etcd URL: IPv6 literals are not supported "
                                  "(use a host name)");
        }
        int port = DEFAULT_PORT;
        const char *hend = colon != NULL ? colon : e;
        if (colon != NULL) {
            char digits[8];
            size_t nd = (size_t)(e - colon - 1);
            char *dend;
            if (nd == 0 || nd > 5) {
                return fence__et_fail(et, FENCE_EINVAL, "etcd URL: bad port in '%.*s'",
                                      (int)(e - p), p);
            }
            memcpy(digits, colon + 1, nd);
            digits[nd] = '\0';
            long v = strtol(digits, &dend, 10);
            if (*dend != '\0' || digits[0] < '0' || digits[0] > '9' || v < 1 || v > 65535) {
                return fence__et_fail(et, FENCE_EINVAL, "etcd URL: bad port in '%.*s' (1 to "
                                      "65535)", (int)(e - p), p);
            }
            port = (int)v;
        }
        if (hend == p) {
            return fence__et_fail(et, FENCE_EINVAL, "etcd URL: a member without a host");
        }
        for (const char *c = p; c < hend; c++) {
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                  (*c >= '0' && *c <= '9') || *c == '.' || *c == '-' || *c == '_')) {
                return fence__et_fail(et, FENCE_EINVAL, "etcd URL: bad character in host "
                                      "'%.*s'", (int)(hend - p), p);
            }
        }
        fence__et_member *m = &et->members[et->nmembers++];
        m->host = strndup(p, (size_t)(hend - p));
        m->port = port;
        if (m->host == NULL) {
            return fence__et_fail(et, FENCE_ENOMEM, "out of memory");
        }
        if (comma == NULL) {
            break;
        }
        p = comma + 1;
    }
    /* The display form: scheme and members, never the credentials. */
    size_t cap = 16;
    for (int i = 0; i < et->nmembers; i++) {
        cap += strlen(et->members[i].host) + 8;
    }
    et->display = malloc(cap);
    if (et->display == NULL) {
        return fence__et_fail(et, FENCE_ENOMEM, "out of memory");
    }
    size_t n = (size_t)snprintf(et->display, cap, "%s", et->tls ? "etcds://" : "etcd://");
    for (int i = 0; i < et->nmembers; i++) {
        n += (size_t)snprintf(et->display + n, cap - n, "%s%s:%d", i ? "," : "",
                              et->members[i].host, et->members[i].port);
    }
    return FENCE_OK;
}

void fence__et_free(fence__etcd *et)
{
    for (int i = 0; i < et->nmembers; i++) {
        free(et->members[i].host);
    }
    wipe_free(et->user);
    wipe_free(et->password);
    wipe_free(et->auth_header);
    free(et->display);
    free(et->ca_file);
    free(et->ca_dir);
    free(et->cert_file);
    free(et->key_file);
    free(et->server_name);
}

void fence__et_line_close(fence__et_line *ln)
{
    if (ln->h != NULL) {
        curl_easy_cleanup(ln->h);
    }
    free(ln->buf);
    memset(ln, 0, sizeof *ln);
}

/* ---- JSON helpers ------------------------------------------------------------ */

int fence__et_int(const json_t *obj, const char *key, int64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL) {
        *out = 0;
        return 0;
    }
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return 0;
    }
    if (!json_is_string(v)) {
        return -1;
    }
    const char *s = json_string_value(v);
    char *end;
    if (s[0] == '\0') {
        return -1;
    }
    long long x = strtoll(s, &end, 10);
    if (*end != '\0') {
        return -1;
    }
    *out = (int64_t)x;
    return 0;
}

json_t *fence__et_b64(const char *s, size_t n)
{
    size_t cap = 4 * ((n + 2) / 3) + 1;
    char *b = malloc(cap);
    if (b == NULL) {
        return NULL;
    }
    int m = EVP_EncodeBlock((unsigned char *)b, (const unsigned char *)s, (int)n);
    json_t *v = json_stringn(b, (size_t)m);
    free(b);
    return v;
}

long fence__et_unb64(const json_t *v, char *out, size_t cap)
{
    if (v == NULL) {
        out[0] = '\0';
        return 0;
    }
    if (!json_is_string(v)) {
        return -1;
    }
    size_t n = json_string_length(v);
    const char *s = json_string_value(v);
    if (n % 4 != 0 || n / 4 * 3 + 1 > cap) {
        return -1;
    }
    int m = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
    if (m < 0) {
        return -1;
    }
    /* EVP_DecodeBlock counts the padding's zero bytes: take them off. */
    if (n > 0 && s[n - 1] == '=') {
        m--;
    }
    if (n > 1 && s[n - 2] == '=') {
        m--;
    }
    out[m] = '\0';
    return m;
}

/* ---- HTTP ---------------------------------------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_OK;
static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* The body of a reply into ln->buf; for a stream, each whole value to
 * ln->on_chunk. */
static size_t on_write(char *p, size_t size, size_t nmemb, void *arg)
{
    fence__et_line *ln = arg;
    size_t n = size * nmemb;
    if (ln->len + n + 1 > ln->cap) {
        size_t cap = ln->cap ? ln->cap : 4096;
        while (cap < ln->len + n + 1) {
            cap *= 2;
        }
        char *b = realloc(ln->buf, cap);
        if (b == NULL) {
            return 0; /* CURLE_WRITE_ERROR */
        }
        ln->buf = b;
        ln->cap = cap;
    }
    memcpy(ln->buf + ln->len, p, n);
    ln->len += n;
    ln->buf[ln->len] = '\0';
    if (ln->on_chunk != NULL) {
        size_t used = 0;
        int stop = ln->on_chunk(ln->chunk_arg, ln->buf, ln->len, &used);
        memmove(ln->buf, ln->buf + used, ln->len - used);
        ln->len -= used;
        if (stop) {
            return 0; /* ends the transfer: the caller knows why */
        }
    }
    return n;
}

static fence_status line_open(fence__etcd *et, fence__et_line *ln)
{
    if (ln->h != NULL) {
        return FENCE_OK;
    }
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK) {
        return fence__et_fail(et, FENCE_ESYS, "libcurl would not initialise: %s",
                              curl_easy_strerror(curl_init_rc));
    }
    CURL *h = curl_easy_init();
    if (h == NULL) {
        return fence__et_fail(et, FENCE_ENOMEM, "out of memory (a curl handle)");
    }
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, ln);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    if (et->tls) {
        if (et->ca_file != NULL) {
            curl_easy_setopt(h, CURLOPT_CAINFO, et->ca_file);
        }
        if (et->ca_dir != NULL) {
            curl_easy_setopt(h, CURLOPT_CAPATH, et->ca_dir);
        }
        if (et->cert_file != NULL) {
            curl_easy_setopt(h, CURLOPT_SSLCERT, et->cert_file);
            curl_easy_setopt(h, CURLOPT_SSLKEY, et->key_file);
        }
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, et->insecure ? 0L : 1L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, et->insecure ? 0L : 2L);
    }
    ln->h = h;
    return FENCE_OK;
}

/* Log in: /v3/auth/authenticate with the user and password; the token
 * becomes the Authorization header.  Under auth_lock. */
static fence_status authenticate(fence__etcd *et, fence__et_line *ln, int64_t deadline_us);

typedef struct one_try {
    CURLcode cc;
    long http;
    int sent; /* the request may have reached the member */
} one_try;

/* One POST of body to member m.  Reply in ln->buf. */
static one_try post(fence__etcd *et, fence__et_line *ln, int m, const char *path,
                    const char *body, size_t blen, int64_t timeout_ms, const char *auth)
{
    one_try t = {CURLE_OK, 0, 0};
    const fence__et_member *mb = &et->members[m];
    char url[512], connect_to[512];
    const char *host = et->tls && et->server_name != NULL ? et->server_name : mb->host;
    snprintf(url, sizeof url, "%s://%s:%d%s", et->tls ? "https" : "http", host, mb->port, path);
    struct curl_slist *hdr = NULL, *ct = NULL, *tmp;
    hdr = curl_slist_append(NULL, "Content-Type: application/json");
    tmp = hdr != NULL ? curl_slist_append(hdr, "Expect:") : NULL;
    hdr = tmp != NULL ? tmp : hdr;
    if (auth != NULL && hdr != NULL) {
        tmp = curl_slist_append(hdr, auth);
        hdr = tmp != NULL ? tmp : hdr;
    }
    if (et->tls && et->server_name != NULL) {
        /* Verify (and send as SNI) the configured name, connect to the
         * member's address. */
        snprintf(connect_to, sizeof connect_to, "%s:%d:%s:%d", et->server_name, mb->port,
                 mb->host, mb->port);
        ct = curl_slist_append(NULL, connect_to);
    }
    CURL *h = ln->h;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CONNECT_TO, ct);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)blen);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(timeout_ms > 0 ? timeout_ms : 1));
    long cto = et->connect_timeout_ms < timeout_ms ? et->connect_timeout_ms : timeout_ms;
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, cto > 0 ? cto : 1L);
    ln->len = 0;
    if (hdr == NULL || (et->tls && et->server_name != NULL && ct == NULL)) {
        t.cc = CURLE_OUT_OF_MEMORY;
    } else {
        t.cc = curl_easy_perform(h);
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &t.http);
    curl_off_t up = 0;
    curl_easy_getinfo(h, CURLINFO_SIZE_UPLOAD_T, &up);
    t.sent = up > 0 || t.http != 0;
    /* The lists go before the handle is used again. */
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(h, CURLOPT_CONNECT_TO, NULL);
    curl_slist_free_all(hdr);
    curl_slist_free_all(ct);
    ln->member = m;
    return t;
}

/* etcd's error reply {"error", "message", "code"}: the code, or -1. */
static int error_code(const fence__et_line *ln, char *msg, size_t cap)
{
    json_error_t je;
    json_t *v = json_loadb(ln->buf != NULL ? ln->buf : "", ln->len, 0, &je);
    int code = -1;
    msg[0] = '\0';
    if (v != NULL) {
        json_t *c = json_object_get(v, "code");
        json_t *m = json_object_get(v, "message");
        code = json_is_integer(c) ? (int)json_integer_value(c) : -1;
        snprintf(msg, cap, "%s", json_is_string(m) ? json_string_value(m) : "");
        json_decref(v);
    }
    return code;
}

/* gRPC codes the gateway passes on. */
enum { GRPC_INVALID_ARGUMENT = 3, GRPC_DEADLINE = 4, GRPC_NOT_FOUND = 5,
       GRPC_PERMISSION_DENIED = 7, GRPC_UNAVAILABLE = 14, GRPC_UNAUTHENTICATED = 16 };

/* Whether a member's error says "ask another member" (no leader, stopping,
 * timed out waiting for Raft). */
static int member_trouble(int code, const char *msg)
{
    return code == GRPC_UNAVAILABLE || code == GRPC_DEADLINE ||
           strstr(msg, "no leader") != NULL || strstr(msg, "timed out") != NULL ||
           strstr(msg, "leader changed") != NULL || strstr(msg, "not capable") != NULL;
}

static int64_t call_end(const fence__etcd *et, int64_t deadline_us)
{
    int64_t own = fence__now_us() +
                  ((int64_t)et->connect_timeout_ms + et->io_timeout_ms) * 1000;
    return deadline_us < own ? deadline_us : own;
}

fence_status fence__et_call(fence__etcd *et, fence__et_line *ln, const char *path,
                            json_t *req, int64_t deadline_us, json_t **resp, int *sent_twice,
                            int *code)
{
    *resp = NULL;
    if (code != NULL) {
        *code = -1;
    }
    fence_status st = line_open(et, ln);
    if (st != FENCE_OK) {
        return st;
    }
    char *body = json_dumps(req, JSON_COMPACT);
    if (body == NULL) {
        return fence__et_fail(et, FENCE_ENOMEM, "out of memory (a request)");
    }
    int64_t end = call_end(et, deadline_us);
    int sent = 0, reauthed = 0, tries = 0;
    int m = ln->h != NULL && ln->buf != NULL ? ln->member : atomic_load(&et->preferred);
    char what[300] = "";
    st = FENCE_ECONN;
    while (tries < et->nmembers + reauthed) {
        int64_t left_ms = (end - fence__now_us()) / 1000;
        if (left_ms <= 0) {
            break;
        }
        /* A member that hangs must leave time for the others. */
        int rest = et->nmembers + reauthed - tries;
        int64_t try_ms = rest > 1 ? left_ms / rest : left_ms;
        try_ms = try_ms < 50 && left_ms >= 50 ? 50 : try_ms;
        if (et->user != NULL) {
            pthread_mutex_lock(&et->auth_lock);
            if (et->auth_header == NULL) {
                st = authenticate(et, ln, end);
                if (st != FENCE_OK) {
                    pthread_mutex_unlock(&et->auth_lock);
                    free(body);
                    return st;
                }
            }
            pthread_mutex_unlock(&et->auth_lock);
        }
        pthread_mutex_lock(&et->auth_lock);
        char *auth = et->auth_header != NULL ? strdup(et->auth_header) : NULL;
        uint64_t gen = et->auth_gen;
        pthread_mutex_unlock(&et->auth_lock);
        if (et->user != NULL && auth == NULL) {
            free(body);
            return fence__et_fail(et, FENCE_ENOMEM, "out of memory");
        }
        one_try t = post(et, ln, m, path, body, strlen(body), try_ms, auth);
        wipe_free(auth);
        tries++;
        sent += t.sent;
        if (t.cc == CURLE_OK && t.http == 200) {
            json_error_t je;
            *resp = json_loadb(ln->buf != NULL ? ln->buf : "", ln->len, 0, &je);
            atomic_store(&et->preferred, m);
            if (*resp == NULL) {
                st = fence__et_fail(et, FENCE_EPROTO, "%s: a reply to %s that is not JSON: %s",
                                    et->display, path, je.text);
            } else {
                st = FENCE_OK;
            }
            break;
        }
        if (t.cc == CURLE_OK) {
            char msg[200];
            int c = error_code(ln, msg, sizeof msg);
            if (code != NULL) {
                *code = c;
            }
            if (c == GRPC_UNAUTHENTICATED && et->user != NULL && !reauthed) {
                /* The token expired (or etcd restarted): log in again. */
                pthread_mutex_lock(&et->auth_lock);
                if (et->auth_gen == gen) {
                    wipe_free(et->auth_header);
                    et->auth_header = NULL;
                }
                pthread_mutex_unlock(&et->auth_lock);
                reauthed = 1;
                continue;
            }
            if (c == GRPC_UNAUTHENTICATED || c == GRPC_PERMISSION_DENIED ||
                strstr(msg, "user name is empty") != NULL ||
                strstr(msg, "authentication failed") != NULL) {
                st = fence__et_fail(et, FENCE_EAUTH, "%s: %s: %s", et->display, path,
                                    msg[0] ? msg : "refused");
                break;
            }
            if (!member_trouble(c, msg)) {
                st = fence__et_fail(et, FENCE_EPROTO, "%s: %s: %s (HTTP %ld)", et->display,
                                    path, msg[0] ? msg : "error", t.http);
                break;
            }
            snprintf(what, sizeof what, "%s:%d: %s", et->members[m].host, et->members[m].port,
                     msg);
        } else {
            snprintf(what, sizeof what, "%s:%d: %s", et->members[m].host, et->members[m].port,
                     curl_easy_strerror(t.cc));
            if (t.cc == CURLE_SSL_CACERT || t.cc == CURLE_PEER_FAILED_VERIFICATION ||
                t.cc == CURLE_SSL_CERTPROBLEM || t.cc == CURLE_SSL_CONNECT_ERROR) {
                char err[320];
                snprintf(err, sizeof err, "%s", what);
                /* TLS refusals do not get better on another try. */
                free(body);
                return fence__et_fail(et, FENCE_ECONN, "%s: TLS failed: %s", et->display, err);
            }
        }
        m = (m + 1) % et->nmembers;
        atomic_fetch_add(&et->reconnects, 1);
    }
    free(body);
    if (sent_twice != NULL) {
        *sent_twice = sent > 1;
    }
    if (st == FENCE_ECONN) {
        st = fence__et_fail(et, FENCE_ECONN, "%s: no member answered %s in time%s%s",
                            et->display, path, what[0] ? "; last: " : "", what);
    }
    return st;
}

static fence_status authenticate(fence__etcd *et, fence__et_line *ln, int64_t deadline_us)
{
    json_t *req = json_pack("{s:s, s:s}", "name", et->user, "password", et->password);
    if (req == NULL) {
        return fence__et_fail(et, FENCE_ENOMEM, "out of memory");
    }
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (body == NULL) {
        return fence__et_fail(et, FENCE_ENOMEM, "out of memory");
    }
    fence_status st = FENCE_ECONN;
    char what[300] = "no time left";
    int m = atomic_load(&et->preferred);
    for (int i = 0; i < et->nmembers; i++, m = (m + 1) % et->nmembers) {
        int64_t left = (deadline_us - fence__now_us()) / 1000;
        if (left <= 0) {
            break;
        }
        one_try t = post(et, ln, m, "/v3/auth/authenticate", body, strlen(body), left, NULL);
        if (t.cc != CURLE_OK) {
            snprintf(what, sizeof what, "%s", curl_easy_strerror(t.cc));
            continue;
        }
        if (t.http != 200) {
            char msg[200];
            int c = error_code(ln, msg, sizeof msg);
            if (member_trouble(c, msg)) {
                snprintf(what, sizeof what, "%s", msg);
                continue;
            }
            st = fence__et_fail(et, FENCE_EAUTH, "%s: login as '%s' refused: %s", et->display,
                                et->user, msg[0] ? msg : "error");
            break;
        }
        json_error_t je;
        json_t *v = json_loadb(ln->buf, ln->len, 0, &je);
        json_t *tok = json_object_get(v, "token");
        if (!json_is_string(tok)) {
            st = fence__et_fail(et, FENCE_EAUTH, "%s: login as '%s' gave no token (is auth "
                                "enabled on the cluster?)", et->display, et->user);
        } else {
            size_t n = strlen("Authorization: ") + json_string_length(tok) + 1;
            et->auth_header = malloc(n);
            if (et->auth_header == NULL) {
                st = fence__et_fail(et, FENCE_ENOMEM, "out of memory");
            } else {
                snprintf(et->auth_header, n, "Authorization: %s", json_string_value(tok));
                et->auth_gen++;
                st = FENCE_OK;
            }
        }
        json_decref(v);
        break;
    }
    wipe_free(body);
    if (st == FENCE_ECONN) {
        st = fence__et_fail(et, FENCE_ECONN, "%s: no member answered the login: %s",
                            et->display, what);
    }
    return st;
}

/* ---- streams --------------------------------------------------------------------- */

typedef struct stream_ctx {
    int (*on_value)(void *arg, json_t *v);
    void *arg;
    int stopped;
} stream_ctx;

static int stream_chunk(void *arg, const char *buf, size_t len, size_t *used)
{
    stream_ctx *sc = arg;
    *used = 0;
    while (*used < len) {
        json_error_t je;
        json_t *v = json_loadb(buf + *used, len - *used, JSON_DISABLE_EOF_CHECK, &je);
        if (v == NULL) {
            return 0; /* not whole yet */
        }
        *used += (size_t)je.position;
        while (*used < len && (buf[*used] == '\n' || buf[*used] == '\r' || buf[*used] == ' ')) {
            (*used)++;
        }
        int stop = sc->on_value(sc->arg, v);
        json_decref(v);
        if (stop) {
            sc->stopped = 1;
            return 1;
        }
    }
    return 0;
}

fence_status fence__et_stream(fence__etcd *et, fence__et_line *ln, const char *path,
                              json_t *req, const char *raw, int64_t deadline_us,
                              int (*on_value)(void *arg, json_t *v), void *arg,
                              int *timed_out)
{
    *timed_out = 0;
    fence_status st = line_open(et, ln);
    if (st != FENCE_OK) {
        return st;
    }
    if (et->user != NULL) {
        pthread_mutex_lock(&et->auth_lock);
        st = et->auth_header == NULL ? authenticate(et, ln, call_end(et, deadline_us))
                                     : FENCE_OK;
        pthread_mutex_unlock(&et->auth_lock);
        if (st != FENCE_OK) {
            return st;
        }
    }
    char *body = req != NULL ? json_dumps(req, JSON_COMPACT) : strdup(raw);
    pthread_mutex_lock(&et->auth_lock);
    char *auth = et->auth_header != NULL ? strdup(et->auth_header) : NULL;
    pthread_mutex_unlock(&et->auth_lock);
    if (body == NULL || (et->user != NULL && auth == NULL)) {
        free(body);
        wipe_free(auth);
        return fence__et_fail(et, FENCE_ENOMEM, "out of memory");
    }
    stream_ctx sc = {on_value, arg, 0};
    ln->on_chunk = stream_chunk;
    ln->chunk_arg = &sc;
    int64_t left = (deadline_us - fence__now_us()) / 1000;
    one_try t = post(et, ln, atomic_load(&et->preferred), path, body, strlen(body),
                     left > 0 ? left : 1, auth);
    ln->on_chunk = NULL;
    ln->chunk_arg = NULL;
    free(body);
    wipe_free(auth);
    if (sc.stopped) {
        atomic_store(&et->preferred, ln->member);
        return FENCE_OK;
    }
    if (t.cc != CURLE_OK) {
        /* That member is down or hangs (or a watch just ran out of time):
         * the next stream asks another. */
        atomic_store(&et->preferred, (ln->member + 1) % et->nmembers);
        atomic_fetch_add(&et->reconnects, 1);
    }
    if (t.cc == CURLE_OPERATION_TIMEDOUT && fence__now_us() >= deadline_us - 1000) {
        *timed_out = 1;
        return fence__et_fail(et, FENCE_ECONN, "%s: %s: no answer in time", et->display, path);
    }
    if (t.cc != CURLE_OK) {
        return fence__et_fail(et, FENCE_ECONN, "%s: %s: %s", et->display, path,
                              curl_easy_strerror(t.cc));
    }
    if (t.http != 200) {
        char msg[200];
        error_code(ln, msg, sizeof msg);
        return fence__et_fail(et, FENCE_EPROTO, "%s: %s: %s (HTTP %ld)", et->display, path,
                              msg[0] ? msg : "error", t.http);
    }
    return FENCE_OK;
}
