/* transport.c -- the one transport of libfence's Redis engine: the socket
 * (TCP or unix, non-blocking, close-on-exec), connect and I/O timeouts by
 * poll(), TLS through tls.c, and RESP: commands written here (the
 * protocol's whole request format is "*N" and N "$len" strings, written
 * with memcpy: hiredis's redisFormatCommandArgv formats each length with
 * sprintf, 8,000 instructions per script call), printf-style ones through
 * hiredis's redisvFormatCommand, replies through hiredis's reader.  Every connection of
 * the library -- commands, heartbeat, pub/sub, Sentinels -- is one of
 * these.  Writes never raise SIGPIPE (send(MSG_NOSIGNAL), or tls.c's BIO). */
#include "redis.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define READ_CHUNK 16384
/* What a reply may hold.  hiredis 0.14 has no limits of its own: one
 * "*2147483647" allocates 16 GiB of empty slots (per nesting level), and
 * freeing walks them -- a broken server or proxy held a call for 46 s.
 * The largest reply the library asks for is CLUSTER SLOTS of a full
 * cluster (16,384 ranges, a few MB). */
#define MAX_ELEMENTS 65536
#define MAX_REPLY_BYTES (64 * 1024 * 1024)

__attribute__((format(printf, 2, 3))) static int fail(fence__conn *cn, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cn->errstr, sizeof cn->errstr, fmt, ap);
    va_end(ap);
    cn->err = 1;
    return -1;
}

int fence__is_failover_error(const char *s)
{
    return strncmp(s, "READONLY", 8) == 0 || strncmp(s, "LOADING", 7) == 0 ||
           strncmp(s, "MASTERDOWN", 10) == 0;
}

/* ---- the reader, capped ----------------------------------------------------- */

/* hiredis's own functions, with the array constructor checked first
 * (copied from the first reader: hiredis does not export them). */
static redisReplyObjectFunctions capped_fns;
static void *(*default_array)(const redisReadTask *, int); /* hiredis 0.14: int */
static pthread_once_t capped_once = PTHREAD_ONCE_INIT;

static void *capped_array(const redisReadTask *task, int elements)
{
    return elements > MAX_ELEMENTS ? NULL : default_array(task, elements);
}

static void capped_init(void)
{
    redisReader *r = redisReaderCreate();
    if (r != NULL) {
        capped_fns = *r->fn;
        default_array = capped_fns.createArray;
        capped_fns.createArray = capped_array;
        redisReaderFree(r);
    }
}

/* A reader whose arrays hold at most MAX_ELEMENTS (a bigger one is a
 * protocol error); NULL out of memory. */
static redisReader *reader_new(void)
{
    pthread_once(&capped_once, capped_init);
    return default_array != NULL ? redisReaderCreateWithFunctions(&capped_fns) : NULL;
}

/* ---- connecting -------------------------------------------------------- */

/* A non-blocking close-on-exec socket connected to sa before deadline;
 * -1 with errno (ETIMEDOUT when the deadline passed). */
static int connect_addr(const struct sockaddr *sa, socklen_t salen, int64_t deadline_us)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return -1;
    }
    int rc = connect(fd, sa, salen);
    /* A unix socket whose listen backlog is full answers EAGAIN at once
     * (TCP would say EINPROGRESS): try again until the deadline. */
    while (rc != 0 && errno == EAGAIN && sa->sa_family == AF_UNIX &&
           fence__now_us() < deadline_us) {
        fence__sleep_us(1000);
        rc = connect(fd, sa, salen);
    }
    if (rc == 0) {
        return fd;
    }
    if (errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    int n = fence__wait_fd(fd, POLLOUT, deadline_us);
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (n == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr == 0) {
        return fd;
    }
    close(fd);
    errno = n == 0 ? ETIMEDOUT : soerr != 0 ? soerr : EIO;
    return -1;
}

static int connect_unix(const char *path, int64_t deadline_us)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof sa.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(sa.sun_path, path);
    return connect_addr((struct sockaddr *)&sa, sizeof sa, deadline_us);
}

/* Each address of host:port in turn; keep-alive and no delay on success. */
static int connect_tcp(const char *host, int port, int64_t deadline_us, char *err, size_t errlen)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int gai = getaddrinfo(host, ps, &hints, &res);
    if (gai != 0) {
        snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(gai));
        return -1;
    }
    int fd = -1, e = 0;
    for (struct addrinfo *a = res; a != NULL && fd < 0; a = a->ai_next) {
        fd = connect_addr(a->ai_addr, a->ai_addrlen, deadline_us);
        e = errno;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errlen, "%s", e == ETIMEDOUT ? "Connection timed out" : strerror(e));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int idle = 15;
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    return fd;
}

fence_status fence__tr_open(const fence__target *t, int64_t connect_ms, int64_t io_ms,
                            fence__conn **out, char *err, size_t errlen)
{
    *out = NULL;
    int64_t deadline = fence__now_us() + (connect_ms > 0 ? connect_ms : 1) * 1000;
    char why[200] = "";
    int fd = t->path != NULL ? connect_unix(t->path, deadline)
                             : connect_tcp(t->host, t->port, deadline, why, sizeof why);
    if (fd < 0) {
        snprintf(err, errlen, "%s", why[0] ? why
                                  : errno == ETIMEDOUT ? "Connection timed out" : strerror(errno));
        return FENCE_ECONN;
    }
    fence__conn *cn = calloc(1, sizeof *cn);
    if (cn == NULL || (cn->reader = reader_new()) == NULL) {
        free(cn);
        close(fd);
        snprintf(err, errlen, "out of memory");
        return FENCE_ENOMEM;
    }
    cn->fd = fd;
    cn->io_ms = io_ms > 0 ? io_ms : 1;
    if (t->tls_ctx != NULL) {
        const char *name = t->tls_name != NULL ? t->tls_name : t->host;
        int to = 0;
        if (fence__tls_connect(t->tls_ctx, fd, name, t->tls_insecure, deadline, &cn->ssl, &to,
                               err, errlen) != 0) {
            fence__tr_close(&cn);
            return FENCE_ECONN;
        }
    }
    *out = cn;
    return FENCE_OK;
}

void fence__tr_close(fence__conn **cp)
{
    fence__conn *cn = *cp;
    if (cn == NULL) {
        return;
    }
    fence__tls_free(cn->ssl);
    if (cn->fd >= 0) {
        close(cn->fd);
    }
    if (cn->reader != NULL) {
        redisReaderFree(cn->reader);
    }
    free(cn->obuf);
    free(cn);
    *cp = NULL;
}

void fence__tr_timeout(fence__conn *cn, int64_t ms)
{
    if (cn != NULL) {
        cn->io_ms = ms > 0 ? ms : 1;
    }
}

/* ---- queueing commands -------------------------------------------------- */

/* Room for len more bytes in cn's output buffer: 0, or -1 (failed). */
static int reserve(fence__conn *cn, size_t len)
{
    if (cn->olen + len > cn->ocap) {
        size_t cap = cn->ocap ? cn->ocap : 256;
        while (cap < cn->olen + len) {
            cap *= 2;
        }
        char *p = realloc(cn->obuf, cap);
        if (p == NULL) {
            return fail(cn, "out of memory");
        }
        cn->obuf = p;
        cn->ocap = cap;
    }
    return 0;
}

static int append_raw(fence__conn *cn, const char *cmd, long long len)
{
    if (len < 0 || reserve(cn, (size_t)len) != 0) {
        return fail(cn, "out of memory");
    }
    memcpy(cn->obuf + cn->olen, cmd, (size_t)len);
    cn->olen += (size_t)len;
    return 0;
}

/* c (a '*' or '$'), v in decimal, "\r\n" at p; returns the end. */
static char *put_header(char *p, char c, size_t v)
{
    *p++ = c;
    p += fence__u64_text(v, p);
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

int fence__tr_append(fence__conn *cn, int argc, const char **argv, const size_t *lens)
{
    enum { HEADER = 1 + 20 + 2 }; /* '*' or '$', a number, CRLF */
    if (argc < 1) {
        return fail(cn, "internal: a command without words");
    }
    size_t need = HEADER;
    for (int i = 0; i < argc; i++) {
        need += HEADER + (lens != NULL ? lens[i] : strlen(argv[i])) + 2;
    }
    if (reserve(cn, need) != 0) {
        return -1;
    }
    char *p = put_header(cn->obuf + cn->olen, '*', (size_t)argc);
    for (int i = 0; i < argc; i++) {
        size_t n = lens != NULL ? lens[i] : strlen(argv[i]);
        p = put_header(p, '$', n);
        memcpy(p, argv[i], n);
        p += n;
        *p++ = '\r';
        *p++ = '\n';
    }
    cn->olen = (size_t)(p - cn->obuf);
    return 0;
}

int fence__tr_appendf(fence__conn *cn, const char *fmt, ...)
{
    char *cmd = NULL;
    va_list ap;
    va_start(ap, fmt);
    int len = redisvFormatCommand(&cmd, fmt, ap);
    va_end(ap);
    int rc = cmd != NULL && len >= 0 ? append_raw(cn, cmd, len) : fail(cn, "out of memory");
    free(cmd);
    return rc;
}

/* ---- I/O ------------------------------------------------------------------ */

/* One write of what is queued; 0 progress or would block (*ev set), -1. */
static int write_some(fence__conn *cn, short *ev)
{
    *ev = 0;
    long w;
    if (cn->ssl != NULL) {
        char why[200] = "";
        w = fence__tls_write(cn->ssl, cn->obuf, cn->olen, why, sizeof why);
        if (w == -2 || w == -3) {
            *ev = w == -2 ? POLLIN : POLLOUT;
            return 0;
        }
        if (w <= 0) {
            return fail(cn, "%s", why[0] ? why : "connection closed by the server");
        }
    } else {
        w = send(cn->fd, cn->obuf, cn->olen, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            *ev = POLLOUT;
            return 0;
        }
        if (w < 0) {
            return fail(cn, "%s", strerror(errno));
        }
    }
    memmove(cn->obuf, cn->obuf + w, cn->olen - (size_t)w);
    cn->olen -= (size_t)w;
    return 0;
}

/* One read into the reader; 1 got bytes, 0 would block (*ev set), -1. */
static int read_some(fence__conn *cn, short *ev)
{
    char buf[READ_CHUNK];
    long r;
    *ev = 0;
    if (cn->ssl != NULL) {
        char why[200] = "";
        r = fence__tls_read(cn->ssl, buf, sizeof buf, why, sizeof why);
        if (r == -2 || r == -3) {
            *ev = r == -2 ? POLLIN : POLLOUT;
            return 0;
        }
        if (r < 0) {
            return fail(cn, "%s", why);
        }
    } else {
        r = recv(cn->fd, buf, sizeof buf, 0);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            *ev = POLLIN;
            return 0;
        }
        if (r < 0) {
            return fail(cn, "%s", strerror(errno));
        }
    }
    if (r == 0) {
        return fail(cn, "Server closed the connection");
    }
    redisReader *rd = cn->reader;
    if (rd->len - rd->pos + (size_t)r > MAX_REPLY_BYTES) {
        return fail(cn, "protocol error: a reply over %d MB", MAX_REPLY_BYTES >> 20);
    }
    if (redisReaderFeed(rd, buf, (size_t)r) != REDIS_OK) {
        return fail(cn, "protocol error");
    }
    return 1;
}

/* Wait for ev before deadline; -1 (a timeout: cn->timed_out) if not. */
static int await(fence__conn *cn, short ev, int64_t deadline_us)
{
    int n = fence__wait_fd(cn->fd, ev, deadline_us);
    if (n == 1) {
        return 0;
    }
    cn->timed_out = n == 0;
    return fail(cn, "%s", n == 0 ? "Resource temporarily unavailable (timed out)"
                                 : strerror(errno));
}

static int flush(fence__conn *cn, int64_t deadline_us)
{
    while (cn->olen > 0) {
        short ev = 0;
        if (write_some(cn, &ev) != 0 || (ev != 0 && await(cn, ev, deadline_us) != 0)) {
            return -1;
        }
    }
    return 0;
}

/* A reply already parsed: 1 (*reply), 0 none, -1 protocol error. */
static int parsed(fence__conn *cn, void **reply)
{
    *reply = NULL;
    if (redisReaderGetReply(cn->reader, reply) != REDIS_OK) {
        redisReader *rd = cn->reader;
        return fail(cn, "protocol error%s%s", rd->errstr[0] ? ": " : "",
                    rd->err == REDIS_ERR_OOM ? "a reply too large (or out of memory)" : rd->errstr);
    }
    if (*reply == NULL) {
        return 0;
    }
    redisReply *r = *reply;
    if (cn->failover && r->type == REDIS_REPLY_ERROR && fence__is_failover_error(r->str)) {
        fail(cn, "the server is no master now (%.60s): asking the Sentinels again", r->str);
    }
    return 1;
}

int fence__tr_parsed(fence__conn *cn, void **reply)
{
    return cn->err ? -1 : parsed(cn, reply);
}

int fence__tr_reply(fence__conn *cn, void **reply)
{
    *reply = NULL;
    if (cn->err) {
        return -1;
    }
    cn->timed_out = 0;
    int64_t deadline = fence__now_us() + cn->io_ms * 1000;
    if (flush(cn, deadline) != 0) {
        return -1;
    }
    for (;;) {
        int got = parsed(cn, reply);
        if (got != 0) {
            return got > 0 ? 0 : -1;
        }
        short ev = 0;
        int rd = read_some(cn, &ev);
        if (rd < 0 || (rd == 0 && await(cn, ev, deadline) != 0)) {
            return -1;
        }
    }
}

int fence__tr_try_reply(fence__conn *cn, void **reply, short *ev)
{
    *reply = NULL;
    *ev = 0;
    if (cn->err) {
        return -1;
    }
    /* Read until the socket would block: bytes TLS already decrypted are
     * taken too, so a poll() on the fd then misses nothing. */
    for (;;) {
        int got = parsed(cn, reply);
        if (got != 0) {
            return got;
        }
        int rd = read_some(cn, ev);
        if (rd <= 0) {
            return rd;
        }
    }
}

int fence__tr_send_some(fence__conn *cn, short *ev)
{
    *ev = 0;
    if (cn->err) {
        return -1;
    }
    while (cn->olen > 0 && *ev == 0) {
        if (write_some(cn, ev) != 0) {
            return -1;
        }
    }
    return 0;
}

int fence__tr_flush(fence__conn *cn)
{
    if (cn->err) {
        return -1;
    }
    cn->timed_out = 0;
    return flush(cn, fence__now_us() + cn->io_ms * 1000);
}

void *fence__tr_command(fence__conn *cn, int argc, const char **argv, const size_t *lens)
{
    void *r = NULL;
    if (fence__tr_append(cn, argc, argv, lens) != 0 || fence__tr_reply(cn, &r) != 0) {
        return NULL;
    }
    return r;
}

int fence__tr_wait(fence__conn *cn, int64_t us, void **reply)
{
    *reply = NULL;
    if (cn->err) {
        return -1;
    }
    int64_t deadline = fence__now_us() + us;
    if (flush(cn, deadline) != 0) {
        return -1;
    }
    for (;;) {
        int got = parsed(cn, reply);
        if (got != 0) {
            return got;
        }
        short ev = 0;
        int rd = read_some(cn, &ev);
        if (rd < 0) {
            return -1;
        }
        if (rd == 0) {
            int n = fence__wait_fd(cn->fd, ev, deadline);
            if (n <= 0) {
                return n == 0 ? 0 : fail(cn, "%s", strerror(errno));
            }
        }
    }
}

/* Below the Sentinel code and the connection setup, which both ask it. */
int fence__is_auth_error(const char *s)
{
    return strncmp(s, "NOAUTH", 6) == 0 || strncmp(s, "WRONGPASS", 9) == 0 ||
           strncmp(s, "ERR invalid password", 20) == 0 ||
           strncmp(s, "ERR AUTH", 8) == 0 || strncmp(s, "NOPERM", 6) == 0;
}

/* ---- for the asynchronous API (connect_async.c connects) ------------------- */

fence__conn *fence__tr_adopt(int fd, void *ssl, int64_t io_ms)
{
    fence__conn *cn = calloc(1, sizeof *cn);
    if (cn == NULL || (cn->reader = reader_new()) == NULL) {
        free(cn);
        return NULL;
    }
    cn->fd = fd;
    cn->ssl = ssl;
    cn->io_ms = io_ms > 0 ? io_ms : 1;
    return cn;
}
