/* lease_internal.h -- what libfence's files share; not installed.
 * Internal non-static names start with fence__.
 *
 * Layering: a file calls only files on its own level's left or on a lower
 * level, never a higher one (no call cycles between files):
 *
 *   0  jitter.c owner.c scripts.c tls.c url.c errmsg.c slot.c  (and
 *                    lib/common; tls.c: OpenSSL contexts, handshakes, its
 *                    socket BIO; url.c frees a URL's SSL_CTX through a
 *                    pointer; slot.c: CRC16 and hash tags of Redis Cluster)
 *   1  metrics.c transport.c srvinfo.c sentinel.c conn.c cluster.c eval.c
 *                    counters; the one transport (socket, poll timeouts,
 *                    TCP / unix / TLS, RESP through hiredis's encoder and
 *                    reader); what the server says of itself; asking the
 *                    Sentinels for the master; connections (AUTH, SELECT,
 *                    ROLE); Redis Cluster's node table, slot map and
 *                    redirection replies; running scripts (and routing
 *                    them to the node of their slot)
 *   2  state.c       what a lease knows: keys, checks, validity, the
 *                    lost transition and its callback, a renewal's effect
 *   3  hbcluster.c heartbeat.c
 *                    a cluster pass (leases grouped by node and slot, one
 *                    round trip per node); the renewal passes, its
 *                    thread, fence_heartbeat_run
 *   4  lease.c       one acquire attempt, renew, release, accessors
 *      counter.c     token_raise, token_last, lease_inspect, server info
 *      reissue.c     fence_lease_reissue (self-healing)
 *   5  wait.c        acquiring with a deadline (pub/sub, polling)
 *   6  acquire.c     fence_acquire: check, start the heartbeat, once or wait
 *   7  client.c      open and close
 *
 * The Redis key contract, the thread rules and how the pieces work are in
 * docs/redis.md. */
#ifndef FENCE_INTERNAL_H
#define FENCE_INTERNAL_H

#include "fence.h"
#include "common.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>

/* One connection to a Redis server or Sentinel, over any transport
 * (transport.c).  err != 0: unusable, errstr says why (no secrets). */
typedef struct fence__conn {
    int err;
    char errstr[256];
    int timed_out;  /* the last failure was a timeout */
    int fd;
    void *ssl;      /* SSL *, or NULL for plain TCP / unix */
    void *reader;   /* hiredis redisReader * */
    char *obuf;     /* RESP appended, not yet sent */
    size_t olen, ocap;
    int64_t io_ms;  /* per call: the time a reply may take */
    int failover;   /* Sentinel-managed: READONLY / LOADING / MASTERDOWN
                     * replies make the connection unusable (re-resolve) */
} fence__conn;

/* ==== level 0 ============================================================ */

/* ---- jitter.c (the clock itself is lib/common/clock.c) ----------- */
/* A uniformly random value in [lo, hi] (not for secrets). */
int64_t fence__jitter(int64_t lo, int64_t hi);

/* ---- owner.c: owner ids from the OS CSPRNG ------------------------ */
/* Writes FENCE_OWNER_BYTES random bytes as lower-case hex plus NUL into
 * hex (2 * FENCE_OWNER_BYTES + 1 bytes).  FENCE_ESYS if getrandom fails. */
fence_status fence__owner_id(char *hex);

/* ---- tls.c: OpenSSL, below the transport ---------------------------- */
typedef struct fence__tls_opts {
    const char *ca_file, *ca_dir, *cert_file, *key_file;
} fence__tls_opts;
/* A client SSL_CTX (TLS 1.2+; verification on unless insecure; the CA file
 * and/or directory, else the system default; the client certificate and
 * key for mutual TLS).  NULL with why in err. */
void *fence__tls_ctx_new(const fence__tls_opts *o, int insecure, char *err, size_t errlen);
void fence__tls_ctx_free(void *ctx);
/* Handshake on the connected non-blocking socket fd before deadline_us
 * (monotonic): SNI and the verified name are name (a host name, or an IP
 * address checked as one; NULL: none).  0 and *ssl; -1 with why in err
 * (*timed_out set when the deadline passed). */
int fence__tls_connect(void *ctx, int fd, const char *name, int insecure, int64_t deadline_us,
                       void **ssl, int *timed_out, char *err, size_t errlen);
/* Non-blocking I/O on ssl: > 0 bytes; 0 the peer closed; -1 fatal (err);
 * -2 wants to read, -3 wants to write (poll, then call again). */
long fence__tls_write(void *ssl, const char *buf, size_t n, char *err, size_t errlen);
long fence__tls_read(void *ssl, char *buf, size_t n, char *err, size_t errlen);
/* Bytes already decrypted and waiting in ssl. */
int fence__tls_pending(void *ssl);
void fence__tls_free(void *ssl);

/* ---- url.c ---------------------------------------------------------- */
#define FENCE__MAX_SENTINELS 16
typedef struct fence__hostport {
    char host[256];
    int port;
} fence__hostport;

typedef struct fence__url {
    int is_unix;
    char host[256];
    int port;
    char path[108]; /* unix socket path */
    int db;
    char *user;     /* NULL or heap, wiped on free */
    char *password; /* NULL or heap, wiped on free */
    char display[400];
    /* TLS: rediss://, or the tls option (also for the Sentinels). */
    int tls;
    int tls_insecure;
    char *tls_server_name; /* NULL: the host connected to */
    void *tls_ctx;         /* SSL_CTX *, freed with the URL by ... */
    void (*tls_ctx_free)(void *); /* ... this (set with it, so url.c,
                                   * which the URL fuzzer links alone,
                                   * needs no OpenSSL) */
    /* redis-sentinel://[[user:]password@]host[:port][,host[:port]...][/db]#master */
    int sentinel;
    int nsentinels;
    fence__hostport sentinels[FENCE__MAX_SENTINELS];
    char master[128];
    char *sentinel_user;     /* the Sentinels' own credentials (options) */
    char *sentinel_password;
} fence__url;

/* Parse a URL into *u (which it first clears).  FENCE_OK; FENCE_EINVAL
 * with why in err (never with credentials); FENCE_ENOMEM.  On failure *u
 * holds nothing to free.  Never crashes on any NUL-terminated text; url
 * may be NULL.  (The fuzzer's entry point: keep this signature.) */
int fence__url_parse(fence__url *u, const char *url, char *err, size_t errlen);
void fence__url_free(fence__url *u);
/* Overwrite a secret string with zeros, then free it (NULL: no-op). */
void fence__wipe_free(char *s);

/* ---- errmsg.c: fence_client_errmsg(), on common.h's error slots ------- */
/* Record a failure on c (may be NULL) for this thread; returns status. */
fence_status fence__fail(const fence_client *c, fence_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A call on c succeeded: clear this thread's message about c. */
void fence__clear(const fence_client *c);

/* ---- slot.c: Redis Cluster hash slots --------------------------------- */
#define FENCE__SLOTS 16384
/* CRC16/XMODEM of buf (crc16("123456789") == 0x31C3). */
uint16_t fence__crc16(const char *buf, size_t len);
/* The hash slot of a key: its {tag} when non-empty, else the whole key. */
int fence__key_slot(const char *key, size_t len);

/* ---- scripts.c ---------------------------------------------------------- */
enum fence__script {
    FENCE__ACQUIRE,
    FENCE__RENEW,
    FENCE__RENEW_BATCH,
    FENCE__RELEASE,
    FENCE__TOKEN_RAISE,
    FENCE__INSPECT,
    FENCE__NSCRIPTS
};
const char *fence__script_body(int s);
size_t fence__script_len(int s);

/* ---- the handles ---------------------------------------------------------- */
typedef struct fence__metrics {
    atomic_uint_fast64_t lease_acquired, lease_lost, lease_released;
    atomic_uint_fast64_t acquire_attempts, acquire_contended, acquire_timeouts;
    atomic_uint_fast64_t renew_ok, renew_failed, reconnects;
    atomic_int_fast64_t leases_held;
    atomic_uint_fast64_t token_regressions;
    atomic_int persistence; /* gauge: 1 on, 0 off, -1 unknown */
    atomic_uint_fast64_t hb_bucket[FENCE_LATENCY_NBUCKETS];
    atomic_uint_fast64_t hb_count, hb_sum_ns;
    atomic_uint_fast64_t clock_behind;
    atomic_int_fast64_t clock_behind_max_us;
} fence__metrics;

enum { FENCE__HELD = 0, FENCE__LOST = 1 };

struct fence_lease {
    fence_client *c;
    char *name;
    char *owner_key; /* "<prefix>{NAME}" */
    char *channel;   /* "<prefix>{NAME}:released" */
    char *info_key;  /* "<prefix>{NAME}:info" when has_info, else NULL */
    char holder[FENCE_HOLDER_LEN + 1]; /* the owner id, "<hex>" */
    /* value and token change only under c->lock with in_pass set
     * (fence_lease_reissue), so the heartbeat never reads them then. */
    char value[2 * FENCE_OWNER_BYTES + 1 + 21]; /* "<hex>:<token>" */
    uint64_t token;
    int64_t clock_behind_us; /* when token was issued (fence_lease_clock_behind_us) */
    int64_t ttl_ms;
    int has_info; /* a holder description was stored: renewals extend it too */
    int64_t renew_every_ms;
    int no_heartbeat;
    fence_lost_cb on_lost;
    void *user;
    /* The fields below are guarded by c->lock. */
    int state;              /* FENCE__HELD or FENCE__LOST */
    int64_t valid_until_us; /* monotonic deadline of sure validity */
    int64_t next_renew_us;  /* when the heartbeat renews it next */
    int in_pass;            /* a heartbeat round trip for it is in flight */
    int cb_running;         /* its lost callback is running */
    pthread_t cb_thread;    /* ... on this thread */
    int free_after_cb;      /* released while its callback runs: it frees l */
    int released;           /* fence_release() has begun */
    int lost_reason;        /* FENCE_LOST or FENCE_ECONN, once lost */
    int retrying;           /* the last renewal went unanswered */
    fence_lease *prev, *next; /* the client's open leases */
};

struct fence_client {
    fence__url url;
    char *prefix;
    int connect_timeout_ms;
    int io_timeout_ms;
    int heartbeat_mode;
    int renew_batch;
    int token_mode;       /* enum fence_token_mode */
    int64_t token_jump_ms;
    int64_t clock_behind_limit_ms; /* 0: none */
    int64_t counter_idle_ms;       /* -1: never expires */
    int allow_eviction;
    int min_replicas;     /* 0: no WAIT */
    int64_t replica_timeout_ms;
    int ready;   /* options were valid: the handle may be used */
    int offline; /* closing with Redis unreachable: stop contacting it */
    char sha[FENCE__NSCRIPTS][41]; /* "" until SCRIPT LOAD told us */

    /* The command connection, used by calling threads. */
    pthread_mutex_t cmd_lock;
    fence__conn *cmd;
    int cmd_ever; /* it had connected before: a new connection is a reconnect */
    int cmd_checked; /* the server of this connection passed fence__srv_refuse */

    /* Leases and heartbeat state. */
    pthread_mutex_t lock;
    pthread_cond_t cond; /* heartbeat wake-ups; in_pass / cb_running done */
    fence_lease *leases; /* every open (not yet released) lease */
    int stopping;
    int hb_started;
    pthread_t hb_thread;
    int64_t hb_wake_us; /* when the thread plans to wake; INT64_MAX: idle */

    /* The heartbeat connection; one pass at a time. */
    pthread_mutex_t hb_lock;
    fence__conn *hb;
    int hb_ever;

    fence__metrics m;
    struct fence__cluster *cl; /* NULL: one server (standalone, Sentinel) */
};

/* ---- Redis Cluster (cluster.c) ------------------------------------------ */
#define FENCE__CL_MAX_NODES 64
#define FENCE__CL_NONE 0xffff
/* A node of the cluster (master or replica; a replica may be promoted).
 * Entries are only ever appended: an index stays valid for the client's
 * life.  host/port are written before nnodes grows (under lock). */
typedef struct fence__node {
    char host[256];
    int port;
    fence__conn *cmd; /* cmd_lock */
    int cmd_ever, cmd_checked;
    fence__conn *hb;  /* hb_lock */
    int hb_ever;
} fence__node;

typedef struct fence__cluster {
    pthread_mutex_t lock;         /* slots[], nnodes */
    pthread_mutex_t refresh_lock; /* one CLUSTER SLOTS at a time */
    int nnodes;
    fence__node nodes[FENCE__CL_MAX_NODES];
    uint16_t slots[FENCE__SLOTS]; /* slot -> master's node index, or NONE */
    atomic_int stale;             /* refresh the map before the next use */
    int next_seed;                /* where the next refresh asks first */
    /* Internal counters (tests and make bench read them). */
    atomic_uint_fast64_t moved, ask, tryagain, refreshes;
    atomic_uint_fast64_t hb_round_trips; /* per node: one flush + its replies */
    atomic_uint_fast64_t hb_node_visits; /* per pass, the nodes it renewed on */
    atomic_uint_fast64_t hb_last_round_trips, hb_last_nodes; /* the last pass */
} fence__cluster;

/* A cluster error reply, parsed. */
enum { FENCE__RD_NONE, FENCE__RD_MOVED, FENCE__RD_ASK, FENCE__RD_TRYAGAIN, FENCE__RD_DOWN };
typedef struct fence__redirect {
    int kind;
    int slot;
    char host[256];
    int port;
    char text[160]; /* the reply, for messages */
} fence__redirect;

/* ==== level 1 ============================================================ */

/* ---- metrics.c ---------------------------------------------------------- */
void fence__metrics_latency(fence__metrics *m, int64_t us);

/* ---- transport.c: the one code path for TCP, unix sockets and TLS ---- */
/* Whether an error reply means "who are you?" (NOAUTH, WRONGPASS, ...). */
int fence__is_auth_error(const char *s);
/* Where to connect: a unix socket path, or host:port (TLS when tls_ctx). */
typedef struct fence__target {
    const char *path; /* non-NULL: a unix socket */
    const char *host;
    int port;
    void *tls_ctx;           /* SSL_CTX *, or NULL: plain */
    const char *tls_name;    /* SNI and verified name; NULL: host */
    int tls_insecure;
} fence__target;
/* Connect (within connect_ms: DNS, TCP, TLS handshake), close-on-exec,
 * keep-alive on TCP.  FENCE_OK and *out (I/O calls then take up to io_ms
 * each); FENCE_ECONN / FENCE_ENOMEM with why in err. */
fence_status fence__tr_open(const fence__target *t, int64_t connect_ms, int64_t io_ms,
                            fence__conn **out, char *err, size_t errlen);
/* Close and NULL *cp (NULL: no-op). */
void fence__tr_close(fence__conn **cp);
/* Queue a command (RESP through redisFormatCommandArgv / redisvFormatCommand);
 * nothing is sent until a reply is asked for.  0, or -1 out of memory
 * (the connection is then unusable: queued commands must not go out). */
int fence__tr_append(fence__conn *cn, int argc, const char **argv, const size_t *lens);
int fence__tr_appendf(fence__conn *cn, const char *fmt, ...);
/* Send what is queued and read the next reply into *reply (a redisReply,
 * freeReplyObject).  0, or -1 with cn->err set (timeout: cn->timed_out). */
int fence__tr_reply(fence__conn *cn, void **reply);
/* Send what is queued (within the I/O timeout), reading nothing: a
 * pipeline to several servers at once.  0, or -1 with cn->err set. */
int fence__tr_flush(fence__conn *cn);
/* The next reply without waiting (reading what the socket has): 1 and
 * *reply, 0 none yet (poll cn->fd for *ev, then call again), -1 failed
 * (cn->err set).  Nothing is sent: fence__tr_flush first. */
int fence__tr_try_reply(fence__conn *cn, void **reply, short *ev);
/* Write what is queued until done or the socket would block (*ev: the
 * poll(2) event it waits for, 0 when all went).  0, or -1 (cn->err set). */
int fence__tr_send_some(fence__conn *cn, short *ev);
/* fence__tr_append + fence__tr_reply; NULL on failure. */
void *fence__tr_command(fence__conn *cn, int argc, const char **argv, const size_t *lens);
/* Wait up to us for a reply (pub/sub): 1 *reply set, 0 none yet, -1 failed. */
int fence__tr_wait(fence__conn *cn, int64_t us, void **reply);
/* The time each later I/O call may take. */
void fence__tr_timeout(fence__conn *cn, int64_t ms);
/* Whether an error reply says this node is no master (now): READONLY,
 * LOADING, MASTERDOWN. */
int fence__is_failover_error(const char *s);

/* ---- srvinfo.c ------------------------------------------------------- */
/* INFO memory, INFO persistence and CONFIG GET save in one round trip on
 * rc; records the persistence gauge.  FENCE_ECONN on an I/O error (the
 * caller drops rc); a refused command leaves its fields unknown. */
fence_status fence__srv_read(fence_client *c, fence__conn *rc, fence_server_info *out);
/* FENCE_ECONFIG (with a message naming the policy) unless the server may
 * hold tokens: not allkeys-*, or the client allows eviction. */
fence_status fence__srv_refuse(fence_client *c, const fence_server_info *si);
/* The metrics gauge for a fence_persistence value: 1, 0 or -1. */
int fence__persistence_gauge(int p);

/* ---- sentinel.c ------------------------------------------------------ */
/* Ask the URL's Sentinels in turn (SENTINEL get-master-addr-by-name) for
 * the master's address, within timeout_ms.  FENCE_OK and host/port;
 * FENCE_ECONN / FENCE_EAUTH with why in err (each Sentinel's answer). */
fence_status fence__sentinel_master(const fence__url *u, int64_t timeout_ms, char *host,
                                    size_t hostlen, int *port, char *err, size_t errlen);

/* ---- conn.c ---------------------------------------------------------- */
/* Check and take the transport options (TLS, the Sentinels' credentials)
 * after the URL was parsed into c->url; FENCE_EINVAL with a message. */
fence_status fence__conn_config(fence_client *c, const fence_client_options *o);
/* Open a connection: connect (within timeout_ms), set I/O timeouts, AUTH,
 * SELECT.  FENCE_ECONN / FENCE_EAUTH / FENCE_EPROTO with a message. */
fence_status fence__conn_open(fence_client *c, fence__conn **out, int64_t timeout_ms);
/* Make sure *rc is open, reconnecting if needed.  *ever says whether this
 * slot was ever connected: a new connection then counts as a reconnect. */
fence_status fence__conn_ensure(fence_client *c, fence__conn **rc, int *ever,
                                int64_t timeout_ms);
/* Close and NULL *rc. */
void fence__conn_drop(fence__conn **rc);
/* Open a connection to host:port (a cluster node): TCP, TLS, AUTH as for
 * the URL (database 0).  Errors as fence__conn_open. */
fence_status fence__conn_open_at(fence_client *c, const char *host, int port,
                                 fence__conn **out, int64_t timeout_ms);
/* Set both I/O timeouts on an open connection. */
void fence__conn_timeout(fence__conn *rc, int64_t ms);
/* Load every script, pipelined, and remember the SHAs (best effort).
 * slots (optional): CLUSTER SLOTS pipelined behind them, its reply there
 * (NULL on an I/O error): cluster detection costs no round trip. */
void fence__scripts_load(fence_client *c, fence__conn *rc, void **slots);
/* Load every script on rc, pipelined, keeping no SHA (a cluster node's
 * new connection); -1 on an I/O error. */
int fence__scripts_preload(fence__conn *rc);

/* ---- cluster.c: the node table, the slot map, redirections ------------ */
/* The reply to CLUSTER SLOTS at open: an array makes c a cluster client
 * (its map read from it; seed_host replaces an empty announced host).
 * FENCE_OK (cluster or not), FENCE_EINVAL (a /db URL), FENCE_ENOMEM. */
fence_status fence__cluster_init(fence_client *c, const void *reply, const char *seed_host);
/* Close every node connection and free the table (c->cl NULL: no-op). */
void fence__cluster_free(fence_client *c);
/* The map may be out of date: refresh before its next use. */
void fence__cluster_stale(fence_client *c);
/* Ask the known nodes in turn for CLUSTER SLOTS (within timeout_ms) and
 * replace the map.  FENCE_OK, or FENCE_ECONN with a message. */
fence_status fence__cluster_refresh(fence_client *c, int64_t timeout_ms);
/* The same unless another thread is refreshing now: then FENCE_OK at
 * once, nothing done (the heartbeat never waits on a caller's refresh). */
fence_status fence__cluster_refresh_try(fence_client *c, int64_t timeout_ms);
/* The master of slot (refreshing a stale map first): a node index, or -1
 * when no known node serves it. */
int fence__cluster_node_of(fence_client *c, int slot, int64_t timeout_ms);
/* The index of host:port, added if new; -1 when the table is full. */
int fence__cluster_node_index(fence_client *c, const char *host, int port);
/* Parse an error reply: FENCE__RD_* (NONE: not a cluster redirection). */
int fence__redirect_parse(const char *err, fence__redirect *rd);
/* The node a MOVED or ASK reply sent by node from names (added if new;
 * -1 if the table is full); an empty host is from's.  MOVED: the slot now
 * belongs to it, and the whole map is refreshed before the next command. */
int fence__cluster_redirect(fence_client *c, const fence__redirect *rd, int from);
/* A new connection to node (AUTH; no scripts: pub/sub). */
fence_status fence__cluster_open(fence_client *c, int node, fence__conn **out,
                                 int64_t timeout_ms);
/* Make sure *rc (a node's connection) is open: AUTH and the scripts on a
 * new one; a new connection after an earlier one counts as a reconnect. */
fence_status fence__cluster_ensure(fence_client *c, int node, fence__conn **rc, int *ever,
                                   int64_t timeout_ms);

/* ---- eval.c ---------------------------------------------------------- */
/* The extras of a script call that issues a token. */
typedef struct fence__issue {
    int check;                  /* check the server before the first token on a connection */
    int min_replicas;           /* > 0: WAIT min_replicas replica_timeout_ms behind it */
    int64_t replica_timeout_ms;
    long long acked;            /* out: WAIT's answer (-1 unknown) */
} fence__issue;
/* Run a script on *rc: EVALSHA, falling back to EVAL on NOSCRIPT.  On an
 * I/O error the connection is dropped.  *reply is the reply (owned by the
 * caller: freeReplyObject) on FENCE_OK; an error reply is FENCE_EPROTO.
 * io (optional): WAIT pipelined behind the script. */
/* Cluster: asking sends ASKING first; with rd, a MOVED / ASK / TRYAGAIN /
 * CLUSTERDOWN reply fills *rd and returns FENCE_ECONN (the script did not
 * run). */
fence_status fence__eval(fence_client *c, fence__conn **rc, int script, int nkeys, int nargs,
                         const char **args, int *timed_out, fence__issue *io, int asking,
                         fence__redirect *rd, void **reply);
/* Run a script on the command connection with one retry after a
 * reconnect when a connection that had been idle failed.  Takes cmd_lock.
 * bound_ms > 0 caps each attempt's connect and I/O time below the client's
 * timeouts.  *retried (optional) tells whether the retry happened.  io
 * (optional): the server check and the WAIT of a token-issuing call. */
fence_status fence__eval_cmd(fence_client *c, int script, int nkeys, int nargs,
                             const char **args, int64_t bound_ms, int *retried,
                             fence__issue *io, void **reply);
/* fence__srv_read() on the command connection (takes cmd_lock); in a
 * cluster, the seed node's. */
fence_status fence__cmd_server_info(fence_client *c, fence_server_info *out);

/* ==== level 2: state.c =================================================== */
/* FENCE_EINVAL for NULL, FENCE_ESTATE for a handle whose open failed on
 * its options; fn names the caller in the message. */
fence_status fence__check_client(const fence_client *c, const char *fn);
fence_status fence__check_name(const fence_client *c, const char *name);
/* Build "<prefix>{NAME}<suffix>"; NULL when out of memory. */
char *fence__key(const fence_client *c, const char *name, const char *suffix);
/* The safety margin taken off a TTL (clock drift). */
int64_t fence__margin_us(int64_t ttl_ms);
/* The end of sure validity of l for a request sent at sent_us. */
int64_t fence__valid_until(const fence_lease *l, int64_t sent_us);
/* When the heartbeat renews l next (c->lock held, or l not yet shared). */
int64_t fence__renew_at(const fence_lease *l);
/* The TTL argument of renew.lua / renew_batch.lua for l: "<ttl_ms>", or
 * "-<ttl_ms>" when l has a holder description whose key must be extended
 * too (so leases without one cost no extra command). */
void fence__renew_ttl_arg(const fence_lease *l, char *buf, size_t size);
/* Free a lease's memory (nothing else). */
void fence__lease_free(fence_lease *l);
/* Take l off its client's list (c->lock held). */
void fence__unlink_locked(fence_lease *l);
/* Whether the calling thread is inside a lost callback. */
int fence__in_callback(void);

/* A renewal of l sent at sent_us was accepted in time (c->lock held; l is
 * held and still valid): extend its validity, schedule its next renewal,
 * clear retrying, count renew_ok. */
void fence__renewed_locked(fence_lease *l, int64_t sent_us);

/* A growable list of leases; the first few need no allocation.  Not to be
 * copied once initialised. */
typedef struct fence__leasev {
    fence_lease **v;
    size_t n, cap;
    fence_lease *small[8];
} fence__leasev;
void fence__leasev_init(fence__leasev *a);
/* 0, or -1 when out of memory (a is unchanged). */
int fence__leasev_push(fence__leasev *a, fence_lease *l);
void fence__leasev_free(fence__leasev *a);

/* Mark l HELD -> LOST with its reason (FENCE_LOST or FENCE_ECONN), under
 * c->lock; returns 1 if this call made the transition.  A lease with a
 * callback is then claimed (cb_running: fence_release() waits for it) and
 * queued on q, for fence__fire_lost() once the lock is dropped; if q
 * cannot grow, no callback (out of memory).  Only a lease with a callback
 * may be touched after the lock is dropped: one without may be freed at
 * any moment. */
int fence__lose_locked(fence_lease *l, int reason, fence__leasev *q);
/* Run the callbacks queued by fence__lose_locked() (no lock held), then
 * empty q.  Each may free its lease. */
void fence__fire_lost(fence__leasev *q);

/* ==== level 3: hbcluster.c, heartbeat.c ================================== */
/* Renew ls[0..n) in a cluster: grouped by node, and within a node by slot
 * (one renew_batch.lua call per slot: a script touches one slot); each
 * node's batches sent before its replies are read: one round trip per
 * node, the replies of all nodes read with one poll().  bound_ms is the
 * whole pass's limit: each step gets only the time left; a failed node is
 * failed for the whole pass.  Redirected batches are sent again once to
 * their new node.  results[i]:
 * 1 renewed, 0 refused, -1 no answer (kept at -1 on any failure).  *sent:
 * when the first batch went out.  FENCE_OK, or the last failure. */
fence_status fence__hb_cluster(fence_client *c, fence_lease **ls, size_t n, int *results,
                               int64_t bound_ms, int64_t *sent);

/* Start the thread if the mode asks for it and it is not running. */
fence_status fence__heartbeat_start(fence_client *c);
void fence__heartbeat_stop(fence_client *c);
/* A lease was added whose first renewal is due at due_us: wake the thread
 * if it plans to sleep past that. */
void fence__heartbeat_kick(fence_client *c, int64_t due_us);
/* One pass: renew the due leases in one round trip. */
fence_status fence__heartbeat_pass(fence_client *c, int64_t *next_ms);

/* ==== level 4: lease.c =================================================== */
/* One acquire attempt.  FENCE_OK (*out set), FENCE_BUSY (*pttl_ms set). */
fence_status fence__try_once(fence_client *c, const char *name, const fence_lease_options *o,
                             int64_t bound_ms, fence_lease **out, int64_t *pttl_ms);

/* Fill the token-issuing extras of a script call from c's options. */
void fence__issue_init(const fence_client *c, fence__issue *io);
/* The token mode, jump, clock-behind limit and counter idle time as script
 * arguments: mode "clock"/"dense", jump_us, limit_us and idle_ms (room for
 * 24 bytes each). */
const char *fence__mode_args(const fence_client *c, char *jump_us, char *limit_us,
                             char *idle_ms);
/* acquire.lua's answer when it issued ({1, token[, behind]}) or refused
 * under the clock-behind limit ({2, behind}): FENCE_OK with *token and
 * *behind_us, FENCE_ECLOCK, or FENCE_EPROTO; counts the clock_behind
 * metrics.  what ("acquire", "reissue") and name go into messages. */
struct redisReply;
fence_status fence__issued(fence_client *c, const struct redisReply *r, const char *what,
                           const char *name, uint64_t *token, int64_t *behind_us);

/* ==== level 5: wait.c ==================================================== */
fence_status fence__acquire_wait(fence_client *c, const char *name,
                                 const fence_lease_options *o, fence_lease **out);

#endif
