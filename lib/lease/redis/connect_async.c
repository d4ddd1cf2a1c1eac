/* connect_async.c -- connecting without waiting, for the asynchronous
 * API: the socket made and connect() begun, then stepped by the caller's
 * loop (each address of a host in turn), then the TLS handshake in steps
 * (tls.c); the connection handed to transport.c (fence__tr_adopt).  The
 * blocking connect is transport.c's fence__tr_open. */
#include "redis.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

struct fence__tr_opening {
    int fd;
    int tcp;                  /* set the TCP options once connected */
    int advance;              /* this address failed: the next one at the next step */
    struct addrinfo *res, *at; /* TCP: the addresses, the one being tried */
    struct sockaddr_un sun;    /* unix */
    void *tls_ctx, *ssl;       /* TLS: the context, then the session */
    char *tls_name;
    int tls_insecure;
    int64_t io_ms;
    char why[200];             /* the last address's failure */
};

/* Start a non-blocking connect to sa: 0 (op->fd connecting or connected),
 * -1 (errno). */
static int start_addr(fence__tr_opening *op, const struct sockaddr *sa, socklen_t len)
{
    op->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (op->fd < 0) {
        return -1;
    }
    if (connect(op->fd, sa, len) == 0 || errno == EINPROGRESS) {
        return 0;
    }
    int e = errno;
    close(op->fd);
    op->fd = -1;
    errno = e;
    return -1;
}

/* The next TCP address that starts connecting; -1 when none is left. */
static int start_next(fence__tr_opening *op)
{
    for (; op->at != NULL; op->at = op->at->ai_next) {
        if (start_addr(op, op->at->ai_addr, op->at->ai_addrlen) == 0) {
            return 0;
        }
        snprintf(op->why, sizeof op->why, "%s", strerror(errno));
    }
    return -1;
}

void fence__tr_open_abort(fence__tr_opening **opp)
{
    fence__tr_opening *op = *opp;
    if (op == NULL) {
        return;
    }
    if (op->ssl != NULL) {
        fence__tls_drop(op->ssl);
    }
    if (op->fd >= 0) {
        close(op->fd);
    }
    if (op->res != NULL) {
        freeaddrinfo(op->res);
    }
    free(op->tls_name);
    free(op);
    *opp = NULL;
}

fence_status fence__tr_open_start(const fence__target *t, int64_t io_ms, fence__tr_opening **out,
                                  char *err, size_t errlen)
{
    *out = NULL;
    fence__tr_opening *op = calloc(1, sizeof *op);
    const char *name = t->tls_name != NULL ? t->tls_name : t->host;
    if (op == NULL || (t->tls_ctx != NULL && (op->tls_name = strdup(name)) == NULL)) {
        free(op);
        snprintf(err, errlen, "out of memory");
        return FENCE_ENOMEM;
    }
    op->fd = -1;
    op->io_ms = io_ms > 0 ? io_ms : 1;
    op->tls_ctx = t->tls_ctx;
    op->tls_insecure = t->tls_insecure;
    int rc;
    if (t->path != NULL) {
        op->sun.sun_family = AF_UNIX;
        if (strlen(t->path) >= sizeof op->sun.sun_path) {
            errno = ENAMETOOLONG;
            rc = -1;
        } else {
            strcpy(op->sun.sun_path, t->path);
            rc = start_addr(op, (struct sockaddr *)&op->sun, sizeof op->sun);
        }
        snprintf(op->why, sizeof op->why, "%s", rc != 0 ? strerror(errno) : "");
    } else {
        /* getaddrinfo() may block on DNS; numeric addresses never do. */
        struct addrinfo hints;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        char ps[16];
        snprintf(ps, sizeof ps, "%d", t->port);
        int gai = getaddrinfo(t->host, ps, &hints, &op->res);
        if (gai != 0) {
            op->res = NULL;
            snprintf(err, errlen, "cannot resolve %s: %s", t->host, gai_strerror(gai));
            fence__tr_open_abort(&op);
            return FENCE_ECONN;
        }
        op->tcp = 1;
        op->at = op->res;
        rc = start_next(op);
    }
    if (rc != 0) {
        snprintf(err, errlen, "%s", op->why);
        fence__tr_open_abort(&op);
        return FENCE_ECONN;
    }
    *out = op;
    return FENCE_OK;
}

int fence__tr_opening_fd(const fence__tr_opening *op)
{
    return op->fd;
}

/* The socket is connected: options, then the TLS session if any. */
static int connected(fence__tr_opening *op, char *err, size_t errlen)
{
    if (op->tcp) {
        int one = 1, idle = 15;
        setsockopt(op->fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
        setsockopt(op->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(op->fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    }
    if (op->tls_ctx != NULL) {
        op->ssl = fence__tls_start(op->tls_ctx, op->fd, op->tls_name, op->tls_insecure, err,
                                   errlen);
        return op->ssl != NULL ? 0 : -1;
    }
    return 0;
}

/* The socket's connect finished (POLLOUT): 0 connected, -1 this address
 * failed (op->why). */
static int socket_result(fence__tr_opening *op)
{
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (getsockopt(op->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr == 0) {
        return 0;
    }
    snprintf(op->why, sizeof op->why, "%s", strerror(soerr != 0 ? soerr : EIO));
    return -1;
}

int fence__tr_open_step(fence__tr_opening **opp, fence__conn **out, short *ev, char *err,
                        size_t errlen)
{
    fence__tr_opening *op = *opp;
    *out = NULL;
    *ev = 0;
    if (op->advance) {
        /* The caller has stopped watching the failed address's socket. */
        op->advance = 0;
        close(op->fd);
        op->fd = -1;
        op->at = op->at->ai_next;
        if (start_next(op) != 0) {
            snprintf(err, errlen, "%s", op->why);
            fence__tr_open_abort(opp);
            return -1;
        }
    }
    while (op->ssl == NULL) {
        struct pollfd pfd = {op->fd, POLLOUT, 0};
        if (poll(&pfd, 1, 0) == 0) {
            *ev = POLLOUT; /* still connecting */
            return 0;
        }
        if (socket_result(op) == 0) {
            if (connected(op, err, errlen) != 0) {
                fence__tr_open_abort(opp);
                return -1;
            }
            break;
        }
        if (op->tcp && op->at->ai_next != NULL) {
            op->advance = 1; /* the next address gets a socket of its own */
            return 2;
        }
        snprintf(err, errlen, "%s", op->why);
        fence__tr_open_abort(opp);
        return -1;
    }
    if (op->ssl != NULL) {
        int rc = fence__tls_step(op->ssl, ev, err, errlen);
        if (rc <= 0) {
            if (rc < 0) {
                fence__tr_open_abort(opp);
            }
            return rc;
        }
    }
    fence__conn *cn = fence__tr_adopt(op->fd, op->ssl, op->io_ms);
    if (cn == NULL) {
        snprintf(err, errlen, "out of memory");
        fence__tr_open_abort(opp);
        return -1;
    }
    op->fd = -1;
    op->ssl = NULL;
    fence__tr_open_abort(opp);
    *out = cn;
    return 1;
}
