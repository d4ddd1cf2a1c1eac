/* tls.c -- OpenSSL for the transport: client contexts, the handshake with
 * SNI and name verification, non-blocking reads and writes, and a socket
 * BIO that sends with MSG_NOSIGNAL (a peer that went away must never kill
 * the program with SIGPIPE).  Nothing here knows about Redis. */
#include "redis.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

/* ---- the socket BIO: send(MSG_NOSIGNAL) / recv ------------------------- */

static int no_passphrase(char *buf, int size, int rwflag, void *user)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)user;
    return 0;
}

static BIO_METHOD *bio_method;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

static int bio_write(BIO *b, const char *buf, int n)
{
    int fd = (int)(intptr_t)BIO_get_data(b);
    BIO_clear_retry_flags(b);
    ssize_t w = send(fd, buf, (size_t)n, MSG_NOSIGNAL);
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        BIO_set_retry_write(b);
    }
    return (int)w;
}

static int bio_read(BIO *b, char *buf, int n)
{
    int fd = (int)(intptr_t)BIO_get_data(b);
    BIO_clear_retry_flags(b);
    ssize_t r = recv(fd, buf, (size_t)n, 0);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        BIO_set_retry_read(b);
    }
    return (int)r;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)b;
    (void)num;
    (void)ptr;
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static int bio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static void bio_init_once(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "fence socket");
    if (m != NULL && (!BIO_meth_set_write(m, bio_write) || !BIO_meth_set_read(m, bio_read) ||
                      !BIO_meth_set_ctrl(m, bio_ctrl) || !BIO_meth_set_create(m, bio_create))) {
        BIO_meth_free(m);
        m = NULL;
    }
    bio_method = m;
}

/* ---- contexts ------------------------------------------------------------ */

/* The first OpenSSL error on this thread's queue, as text (then clear it). */
static void ssl_error(char *err, size_t errlen, const char *what)
{
    unsigned long e = ERR_get_error();
    char buf[200] = "";
    if (e != 0) {
        ERR_error_string_n(e, buf, sizeof buf);
    }
    snprintf(err, errlen, "%s%s%s", what, buf[0] ? ": " : "", buf);
    ERR_clear_error();
}

void *fence__tls_ctx_new(const fence__tls_opts *o, int insecure, char *err, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) {
        ssl_error(err, errlen, "TLS: cannot make a context");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_verify(ctx, insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    int ok = 1;
    struct stat st;
    if (o->ca_dir != NULL && (stat(o->ca_dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
        /* OpenSSL takes any directory name and fails only at the handshake,
         * with a misleading reason: say it here. */
        snprintf(err, errlen, "TLS: the CA directory (tls_ca_dir) %s",
                 errno == ENOENT ? "does not exist" : "is not a readable directory");
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (o->ca_file != NULL || o->ca_dir != NULL) {
        ok = SSL_CTX_load_verify_locations(ctx, o->ca_file, o->ca_dir) == 1;
        if (!ok) {
            ssl_error(err, errlen, "TLS: cannot load the CA file or directory");
        }
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        ok = 0;
        ssl_error(err, errlen, "TLS: cannot load the system's CA certificates");
    }
    /* An encrypted key must never make OpenSSL prompt on the terminal (a
     * library call that blocks on /dev/tty): refuse it instead. */
    SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
    if (ok && o->cert_file != NULL &&
        SSL_CTX_use_certificate_chain_file(ctx, o->cert_file) != 1) {
        ok = 0;
        ssl_error(err, errlen, "TLS: cannot load the client certificate (tls_cert_file)");
    }
    if (ok && o->key_file != NULL &&
        SSL_CTX_use_PrivateKey_file(ctx, o->key_file, SSL_FILETYPE_PEM) != 1) {
        ok = 0;
        int mismatch = ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
        ssl_error(err, errlen, mismatch ? "TLS: the client key does not match the client "
                                          "certificate"
                                        : "TLS: cannot load the client key (tls_key_file)");
    }
    if (ok && o->cert_file != NULL && SSL_CTX_check_private_key(ctx) != 1) {
        ok = 0;
        ssl_error(err, errlen, "TLS: the client key does not match the client certificate");
    }
    if (!ok) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

void fence__tls_ctx_free(void *ctx)
{
    SSL_CTX_free(ctx);
}

/* ---- connections ----------------------------------------------------------- */

/* SNI and the name verified: a host name, or an IP address. */
static int set_name(SSL *ssl, const char *name, int insecure)
{
    unsigned char ip[16];
    int is_ip = inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
    if (!is_ip && SSL_set_tlsext_host_name(ssl, name) != 1) {
        return -1;
    }
    if (insecure) {
        return 0;
    }
    X509_VERIFY_PARAM *p = SSL_get0_param(ssl);
    if (is_ip) {
        return X509_VERIFY_PARAM_set1_ip_asc(p, name) == 1 ? 0 : -1;
    }
    X509_VERIFY_PARAM_set_hostflags(p, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    return X509_VERIFY_PARAM_set1_host(p, name, 0) == 1 ? 0 : -1;
}

/* Why a handshake failed, the certificate's verdict first. */
static void handshake_error(SSL *ssl, int rc, char *err, size_t errlen)
{
    long v = SSL_get_verify_result(ssl);
    if (v != X509_V_OK) {
        snprintf(err, errlen, "TLS: certificate verification failed: %s",
                 X509_verify_cert_error_string(v));
        ERR_clear_error();
        return;
    }
    int e = SSL_get_error(ssl, rc);
    if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
        snprintf(err, errlen, "TLS: handshake failed: %s",
                 errno != 0 ? strerror(errno) : "the server closed the connection");
        return;
    }
    ssl_error(err, errlen, "TLS: handshake failed");
}

int fence__tls_connect(void *ctx, int fd, const char *name, int insecure, int64_t deadline_us,
                       void **out, int *timed_out, char *err, size_t errlen)
{
    /* The stepwise handshake below, waited for here. */
    *out = NULL;
    *timed_out = 0;
    void *ssl = fence__tls_start(ctx, fd, name, insecure, err, errlen);
    if (ssl == NULL) {
        return -1;
    }
    for (;;) {
        short ev = 0;
        int rc = fence__tls_step(ssl, &ev, err, errlen);
        if (rc == 1) {
            *out = ssl;
            return 0;
        }
        int n = rc == 0 ? fence__wait_fd(fd, ev, deadline_us) : -2;
        if (n <= 0) {
            if (n != -2) {
                *timed_out = n == 0;
                snprintf(err, errlen, "TLS: handshake %s", n == 0 ? "timed out" : "failed");
            }
            fence__tls_drop(ssl);
            return -1;
        }
    }
}

/* The outcome of SSL_read / SSL_write: see fence__tls_read. */
static long io_result(SSL *ssl, int rc, char *err, size_t errlen)
{
    if (rc > 0) {
        return rc;
    }
    int e = SSL_get_error(ssl, rc);
    switch (e) {
    case SSL_ERROR_WANT_READ:
        return -2;
    case SSL_ERROR_WANT_WRITE:
        return -3;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL:
        if (ERR_peek_error() == 0) {
            /* With TLS 1.3 a server that wants a client certificate
             * refuses one after the handshake; its alert is often lost
             * to the reset, so say what most likely happened. */
            int nocert = (errno == ECONNRESET || errno == EPIPE) && SSL_get_certificate(ssl) == NULL;
            snprintf(err, errlen, "TLS: %s%s", errno ? strerror(errno) : "connection closed",
                     nocert ? " (no client certificate was given: does the server require one? "
                              "tls_cert_file / --cert)" : "");
            return errno ? -1 : 0;
        }
        ssl_error(err, errlen, "TLS");
        return -1;
    default:
        ssl_error(err, errlen, "TLS");
        return -1;
    }
}

long fence__tls_write(void *ssl, const char *buf, size_t n, char *err, size_t errlen)
{
    errno = 0;
    ERR_clear_error();
    int rc = SSL_write(ssl, buf, n > INT32_MAX ? INT32_MAX : (int)n);
    return io_result(ssl, rc, err, errlen);
}

long fence__tls_read(void *ssl, char *buf, size_t n, char *err, size_t errlen)
{
    errno = 0;
    ERR_clear_error();
    int rc = SSL_read(ssl, buf, n > INT32_MAX ? INT32_MAX : (int)n);
    return io_result(ssl, rc, err, errlen);
}

int fence__tls_pending(void *ssl)
{
    return SSL_pending(ssl);
}

void fence__tls_free(void *ssl)
{
    if (ssl != NULL) {
        SSL_shutdown(ssl); /* best effort: one close_notify, no waiting */
        SSL_free(ssl);
        ERR_clear_error();
    }
}

/* ---- a handshake in steps (an event loop waits; fence__tls_connect above
 * waits itself) ---------------------------------------------------------- */

void *fence__tls_start(void *ctx, int fd, const char *name, int insecure, char *err,
                       size_t errlen)
{
    pthread_once(&bio_once, bio_init_once);
    SSL *ssl = bio_method != NULL ? SSL_new(ctx) : NULL;
    BIO *bio = ssl != NULL ? BIO_new(bio_method) : NULL;
    if (bio == NULL) {
        ssl_error(err, errlen, "TLS: out of memory");
        SSL_free(ssl);
        return NULL;
    }
    BIO_set_data(bio, (void *)(intptr_t)fd);
    SSL_set_bio(ssl, bio, bio);
    if (name != NULL && set_name(ssl, name, insecure) != 0) {
        ssl_error(err, errlen, "TLS: cannot set the server name");
        SSL_free(ssl);
        return NULL;
    }
    return ssl;
}

int fence__tls_step(void *ssl, short *ev, char *err, size_t errlen)
{
    *ev = 0;
    errno = 0;
    int rc = SSL_connect(ssl);
    if (rc == 1) {
        return 1;
    }
    int e = SSL_get_error(ssl, rc);
    *ev = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
    if (*ev != 0) {
        return 0;
    }
    handshake_error(ssl, rc, err, errlen);
    return -1;
}

void fence__tls_drop(void *ssl)
{
    SSL_free(ssl); /* a handshake that failed or was given up: no close_notify */
    ERR_clear_error();
}
