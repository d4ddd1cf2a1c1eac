/* lease_async.h -- the pieces of the lease layer's blocking files that the
 * asynchronous API (async*.c, docs/async.md) uses: parts of one call made
 * callable alone.  Each is defined in the file its comment names (at the
 * end of that file, or in async_args.c); the engine's non-blocking pieces
 * (the stepwise connect and TLS handshake, login, server info) are in
 * redis/redis.h.  Not installed. */
#ifndef FENCE_LEASE_ASYNC_H
#define FENCE_LEASE_ASYNC_H

#include "lease_internal.h"



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
