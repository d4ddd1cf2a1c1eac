/* etcd.h -- the etcd issuer (fence__etcd_issuer): issuer.h's operations on
 * etcd 3.4's v3 JSON gateway (grpc-gateway: POST /v3/..., JSON bodies,
 * base64 keys and values, 64-bit numbers as strings), spoken over HTTP/1.1
 * by libcurl easy handles and read with jansson.  Not installed.
 *
 * Its files, bottom up:
 *   econn.c    the URL (etcd://, etcds://, several members), the members'
 *              HTTP lines (one easy handle each: the command path, the
 *              heartbeat, a waiter), TLS options, user+password auth
 *              (/v3/auth/authenticate, the token renewed when etcd says it
 *              is invalid), one call = one POST with its deadline, moving
 *              to the next member when one does not answer
 *   ecall.c, egroup.c, ewait.c, eissuer.c   the issuer above it
 *              (eissuer.h): the keys and the token rule, each operation as
 *              one or two calls, groups and renewals, waiting (/v3/watch),
 *              the ops table
 *
 * Keys, under the prefix (default "fence/"):
 *   <prefix>o/NAME   the owner key: "<holder>" or "<holder>:<off>" ... see
 *                    eissuer.c; attached to the lease's own etcd lease
 *   <prefix>f/NAME   the floor: a decimal offset that `fence token raise`
 *                    raises; absent = 0
 * The token of an acquisition is off + the revision of the txn that put
 * the owner key (etcd's revision: one counter of the whole cluster,
 * committed through Raft, strictly increasing, no clock involved).  off
 * is the floor's value read in that same txn, so tokens of a name rise
 * strictly (revisions rise, the floor never falls). */
#ifndef FENCE_ETCD_H
#define FENCE_ETCD_H

#include "issuer.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

#define FENCE__ET_MAX_MEMBERS 16

/* One member of the URL. */
typedef struct fence__et_member {
    char *host;
    int port;
} fence__et_member;

/* One HTTP line: an easy handle (its connection kept alive) and the
 * member it last talked to.  Used by one thread at a time (its owner's
 * lock). */
typedef struct fence__et_line {
    void *h; /* CURL * */
    int member;
    char *buf; /* the last reply's body */
    size_t len, cap;
    int (*on_chunk)(void *arg, const char *buf, size_t len, size_t *used); /* streams */
    void *chunk_arg;
} fence__et_line;

/* The engine: where, how, as whom. */
typedef struct fence__etcd {
    const void *errkey;
    fence__errslot *(*errslot)(void);
    char *display; /* the URL without credentials */
    int tls;
    fence__et_member members[FENCE__ET_MAX_MEMBERS];
    int nmembers;
    char *user, *password;
    char *ca_file, *ca_dir, *cert_file, *key_file, *server_name;
    int insecure;
    int connect_timeout_ms, io_timeout_ms;
    pthread_mutex_t auth_lock;
    char *auth_header; /* "Authorization: <token>", or NULL */
    uint64_t auth_gen;
    atomic_int preferred; /* the member that answered last */
    atomic_ullong reconnects;
} fence__etcd;

/* ---- econn.c ------------------------------------------------------------ */
/* Fail with status and a message (keyed to the client); returns status. */
fence_status fence__et_fail(const fence__etcd *et, fence_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Parse url into et (members, TLS from etcds://, user and password):
 * FENCE_OK, FENCE_EINVAL or FENCE_ENOMEM with the message set. */
fence_status fence__et_url(fence__etcd *et, const char *url);
void fence__et_free(fence__etcd *et);
void fence__et_line_close(fence__et_line *ln);

/* POST req (not consumed) to path on ln, by deadline_us (and the
 * engine's own budget): FENCE_OK with *resp (the parsed reply: json_decref
 * it), or a status with the message set.  *sent_twice (optional): the
 * request went out more than once (to another member after no answer).
 * etcd's own errors: FENCE_EAUTH (auth), FENCE_ECONN (no leader,
 * unavailable, timed out: after trying the other members), FENCE_EPROTO
 * (the rest; *code, optional, gets the gRPC code). */
fence_status fence__et_call(fence__etcd *et, fence__et_line *ln, const char *path,
                            json_t *req, int64_t deadline_us, json_t **resp, int *sent_twice,
                            int *code);
/* The same for a streaming reply, the request req or (req NULL) the
 * bytes body (several JSON values: a keepalive of many leases) (/v3/watch, /v3/lease/keepalive): each
 * whole JSON value of the reply goes to on_value as it arrives; it returns
 * 0 to go on, 1 to stop (the call then returns FENCE_OK).  The call also
 * returns FENCE_OK when the reply ends; at deadline_us FENCE_ECONN with
 * *timed_out set.  No retry on another member. */
fence_status fence__et_stream(fence__etcd *et, fence__et_line *ln, const char *path,
                              json_t *req, const char *body, int64_t deadline_us,
                              int (*on_value)(void *arg, json_t *v), void *arg,
                              int *timed_out);

/* JSON helpers.  A 64-bit number of the gateway (a string, or absent = 0)
 * at obj.key: 0 or -1 (not a number). */
int fence__et_int(const json_t *obj, const char *key, int64_t *out);
/* base64 of s[0..n) as a new JSON string (NULL: out of memory). */
json_t *fence__et_b64(const char *s, size_t n);
/* The decoded bytes of the base64 JSON string v into out (room for cap
 * bytes, NUL-terminated): their length, or -1. */
long fence__et_unb64(const json_t *v, char *out, size_t cap);

#endif
