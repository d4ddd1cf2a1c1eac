/* lease_async.h -- the pieces of the blocking files that the asynchronous
 * API (async*.c, docs/async.md) uses: non-blocking steps beside the
 * blocking ones, and parts of one call made callable alone.  Each is
 * defined in the file its comment names (at the end of that file, or in
 * connect_async.c / async_args.c beside it); not installed. */
#ifndef FENCE_LEASE_ASYNC_H
#define FENCE_LEASE_ASYNC_H

#include "lease_internal.h"



/* tls.c: a handshake in steps.  fence__tls_start: a session on the
 * connected socket fd (SNI and verified name as fence__tls_connect), NULL
 * with why in err.  fence__tls_step: 1 done, 0 wants *ev (poll, then call
 * again), -1 failed (err).  fence__tls_drop: free a session that never
 * finished its handshake. */
void *fence__tls_start(void *ctx, int fd, const char *name, int insecure, char *err,
                       size_t errlen);
int fence__tls_step(void *ssl, short *ev, char *err, size_t errlen);
void fence__tls_drop(void *ssl);

/* connect_async.c (on transport.c): connecting without waiting.  Start: the socket is made and
 * connect() begun (DNS through getaddrinfo, which blocks for a host name;
 * numeric addresses and unix sockets never do); FENCE_OK and *op, or
 * FENCE_ECONN / FENCE_ENOMEM with why in err.  Step: 1 connected (*out,
 * op freed and NULLed), 0 in progress (poll fence__tr_opening_fd for
 * *ev), 2 this address failed and the next step closes its socket for
 * the next one (stop watching it first), -1 failed (err; op freed and
 * NULLed).  The caller keeps the deadline (abort when it passes). */
typedef struct fence__tr_opening fence__tr_opening;
fence_status fence__tr_open_start(const fence__target *t, int64_t io_ms, fence__tr_opening **op,
                                  char *err, size_t errlen);
int fence__tr_open_step(fence__tr_opening **op, fence__conn **out, short *ev, char *err,
                        size_t errlen);
int fence__tr_opening_fd(const fence__tr_opening *op);
void fence__tr_open_abort(fence__tr_opening **op);
/* transport.c: a connection on a connected socket fd (and its TLS session
 * ssl, or NULL), I/O calls taking up to io_ms; NULL out of memory (fd and
 * ssl are then still the caller's). */
fence__conn *fence__tr_adopt(int fd, void *ssl, int64_t io_ms);

/* conn.c: where c's URL points (standalone or unix: not Sentinel). */
void fence__conn_target(const fence_client *c, fence__target *t);
/* Append AUTH and SELECT as the URL and options ask: how many commands
 * (0..2), or -1 out of memory. */
int fence__conn_append_login(const fence_client *c, fence__conn *cn);
/* The reply to the i-th command fence__conn_append_login appended
 * (NULL: none came): FENCE_OK, or the status and message of the blocking
 * path (FENCE_EAUTH, FENCE_EINVAL for SELECT on a cluster node, ...). */
fence_status fence__conn_login_reply(fence_client *c, int i, const void *reply);

/* srvinfo.c: fence__srv_read's result from its three replies (INFO memory,
 * INFO persistence, CONFIG GET save; any may be NULL), with the gauge. */
void fence__srv_fill(fence_client *c, void *const replies[3], fence_server_info *out);

/* acquire.c: fence_acquire's checks of lease options (FENCE_EINVAL). */
fence_status fence__check_lease_opts(fence_client *c, const fence_lease_options *o);

/* async_args.c and lease.c: the pieces of one acquire attempt and of renew /
 * release. */
typedef struct fence__acq_args {
    char owner[2 * FENCE_OWNER_BYTES + 1];
    char *counter; /* "<prefix>{NAME}:token" (malloc'd) */
    char *info;    /* the holder description (malloc'd), or NULL */
    char ttl[24], jump[24], limit[24], idle[24];
    const char *v[11]; /* keys then arguments, as fence__try_once sends them */
    int n, nkeys;
} fence__acq_args;
/* A new lease for name (not yet in Redis, not on the client's list) and
 * the acquire script's arguments in *a (fence__acq_args_free later). */
fence_status fence__acquire_prepare(fence_client *c, const char *name,
                                    const fence_lease_options *o, fence__acq_args *a,
                                    fence_lease **out);
void fence__acq_args_free(fence__acq_args *a);
/* lease.c's lease_new: a lease for name with its keys, not yet in Redis;
 * owner gets its new owner id, *counter the counter's key. */
fence_status fence__lease_new(fence_client *c, const char *name, const fence_lease_options *o,
                              char *owner, char **counter, fence_lease **out);
/* The acquire script's reply r (freed here): FENCE_OK with *token and
 * *behind_us, FENCE_BUSY with *pttl_ms, or an error (message set). */
fence_status fence__acquire_reply(fence_client *c, const char *name, void *r, uint64_t *token,
                                  int64_t *behind_us, int64_t *pttl_ms);
/* l was granted token by a request sent at sent_us: held, on its client. */
void fence__lease_publish(fence_lease *l, const char *owner, uint64_t token, int64_t sent_us);
/* release.lua's keys and arguments for l (args: 4): their count, *nkeys. */
int fence__release_args(const fence_lease *l, const char **args, int *nkeys);
/* renew.lua's for l with its owner value and TTL argument (buffers the
 * caller keeps; args: 4): the number of keys (arguments: keys + 2). */
int fence__renew_args(const fence_lease *l, const char *value, const char *ttl,
                      const char **args);

/* client.c: a client set up from o (every check of fence_client_open)
 * that does not connect; *out as fence_client_open's. */
fence_status fence__client_prepare(fence_client **out, const fence_client_options *o);
/* fence_client_close without contacting Redis (its leases expire by TTL). */
void fence__client_close_offline(fence_client *c);

#endif
