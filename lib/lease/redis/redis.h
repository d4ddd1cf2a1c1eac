/* redis.h -- libfence's private Redis client (the engine); not installed.
 * Internal non-static names start with fence__.
 *
 * It speaks Redis -- URLs, the transport (TCP, unix sockets, TLS),
 * connections (AUTH, SELECT, Sentinel, ROLE), Redis Cluster (node table,
 * slot map, redirections), what a server says of itself, and running
 * scripts by index -- and knows nothing of leases: the Redis issuer above
 * it in this room (rissuer.h: the lease operations in Redis's terms) owns
 * one fence__redis per client and gives it the script bodies, its check
 * before a connection's first use and the error slot to write into.  Its
 * files include only this header (and lib/common's common.h and
 * fence_common.h, for fence_status), never issuer.h, fence.h or
 * lease_internal.h, and call nothing of lib/lease/ (its .c files)
 * (scripts/check-layering checks both).
 *
 * Layering: a file calls only files on its own level's left or on a lower
 * level, never a higher one (no call cycles between files):
 *
 *   0  tls.c url.c   (and lib/common) OpenSSL contexts, handshakes, its
 *                    socket BIO; URLs (url.c frees a URL's SSL_CTX through
 *                    a pointer, so the URL fuzzer links it alone)
 *   1  transport.c   the one transport (socket, poll timeouts, TCP / unix
 *                    / TLS, RESP through hiredis's encoder and reader)
 *   2  sentinel.c    asking the Sentinels for the master
 *      pipe.c        many requests in flight on one connection (the
 *                    blocking callers' queue, and an event loop's core)
 *      connect_async.c  connecting without waiting (the asynchronous API)
 *   3  conn.c        the error slot; connections (AUTH, SELECT, ROLE);
 *                    loading the scripts
 *   4  srvinfo.c     what the server says of itself
 *      cluster.c     hash slots; Redis Cluster's node table, slot map and
 *                    redirection replies
 *   5  eval.c        the handle's init and close; running scripts (EVALSHA,
 *                    the one retry, routing a call to its key's slot's node)
 *
 * How the pieces work is in docs/redis.md ("Inside the library"). */
#ifndef FENCE_REDIS_H
#define FENCE_REDIS_H

#include "common.h"
#include "fence_common.h"

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

/* ---- requests and the lines they go on (pipe.c, eval.c) ------------------ */
/* One caller's share of a connection: the replies of `want` consecutive
 * commands it appended.  Heap-allocated (fence__req_new): a caller that
 * gives up leaves it to the pipe, which frees it once its replies came. */
#define FENCE__REQ_MAX 6
enum { FENCE__REQ_WAITING, FENCE__REQ_DONE, FENCE__REQ_FAILED };
typedef struct fence__req fence__req;
struct fence__req {
    int want, got;
    void *reply[FENCE__REQ_MAX]; /* redisReply *, in order (owned by the request) */
    int state;
    int timed_out;     /* FAILED because the connection went quiet too long */
    char errstr[256];  /* FAILED: why (no secrets) */
    int64_t allow_us;  /* how long its replies may take the server (I/O timeout, plus WAIT's) */
    int abandoned;     /* its caller left: free it when it finishes */
    void (*done)(fence__req *q, void *arg); /* event-loop use: called once it finishes */
    void *arg;
    pthread_cond_t *wake; /* blocking use: its caller's own, signalled once it finishes */
    fence__req *next;
};

/* A connection and the requests waiting on it, in order.  A connection is
 * used either this way or directly (fence__tr_reply), never both at once:
 * setup commands (AUTH, SELECT, SCRIPT LOAD) go first, directly. */
typedef struct fence__pipe {
    struct fence__conn *cn; /* NULL: not connected */
    fence__req *head, *tail;
    int64_t quiet_since_us; /* the last reply, or when the queue became non-empty */
    int64_t idle_since_us;  /* when the queue last became empty */
    int driving;            /* a blocking caller is doing the I/O */
    int polling;            /* ... and is in poll() without the lock */
    int woken;              /* a wake-up was written to wake_fd, not yet read */
    int wake_fd;            /* eventfd that wakes a polling driver; -1: not made yet */
    pthread_cond_t cond;    /* the driver left (blocking callers are woken by their requests) */
} fence__pipe;

/* A command line: one connection that any number of threads share through
 * its request queue (all under cmd_lock, which is held only to queue, to
 * hand out replies, and to look at these fields).  The client's own, and
 * one per cluster node. */
typedef struct fence__line {
    fence__pipe p; /* p.cn: the connection, NULL when there is none */
    int ever;      /* it had connected before: a new connection is a reconnect */
    int checked;   /* the server of this connection passed first_use */
    unsigned gen;  /* counts its connections: a check passed on an older one counts for nothing */
    int opening;   /* a caller is connecting it (without cmd_lock): the others wait on p.cond */
} fence__line;

/* ---- the handle ------------------------------------------------------------ */
#define FENCE__RD_MAX_SCRIPTS 8
#define FENCE__SLOTS 16384

/* What a server says of itself (srvinfo.c): its maxmemory-policy ("" when
 * INFO memory would not tell), AOF and RDB snapshots (1 on, 0 off, -1
 * unknown: a refused INFO persistence or CONFIG GET save). */
typedef struct fence__srvinfo {
    char maxmemory_policy[32];
    int aof, rdb;
} fence__srvinfo;

/* The transport options the owner takes from its callers (conn.c checks
 * them): TLS, and the Sentinels' own credentials. */
typedef struct fence__rd_opts {
    int tls, tls_insecure;
    const char *tls_ca_file, *tls_ca_dir, *tls_cert_file, *tls_key_file, *tls_server_name;
    const char *sentinel_username, *sentinel_password;
} fence__rd_opts;
#define FENCE__CL_MAX_NODES 64
#define FENCE__CL_NONE 0xffff

/* What the engine needs to talk to one Redis deployment (a standalone
 * server, a Sentinel-managed master, or a Redis Cluster).  Its owner
 * calls fence__rd_init, fills url (fence__url_parse, fence__conn_config),
 * the timeouts, errkey, the script table and first_use before the first
 * connection, and fence__rd_close at the end; the connection fields are
 * the engine's (the owner reads them only under cmd_lock). */
typedef struct fence__redis {
    fence__url url;
    int64_t connect_timeout_ms;
    int64_t io_timeout_ms;
    /* Error messages go to the slot errslot() gives (this thread's, the
     * owner's library's) keyed by errkey: the owner's handle, so its errmsg
     * function shows them. */
    const void *errkey;
    fence__errslot *(*errslot)(void);
    /* Scripts, known by index: bodies the owner gave; SHAs "" until
     * SCRIPT LOAD told us. */
    int nscripts;
    const char *script[FENCE__RD_MAX_SCRIPTS];
    size_t script_len[FENCE__RD_MAX_SCRIPTS];
    char sha[FENCE__RD_MAX_SCRIPTS][41];
    /* The owner's check of a server before a call that asks for it
     * (fence__eval_opts.check) runs for the first time on a connection;
     * FENCE_OK lets the call go on.  NULL: no check. */
    fence_status (*first_use)(void *arg, const fence__srvinfo *si);
    void *first_use_arg;

    /* The command line, shared by the calling threads. */
    pthread_mutex_t cmd_lock;
    fence__line cmd;
    struct fence__cluster *cl; /* NULL: one server (standalone, Sentinel) */

    atomic_uint_fast64_t reconnects; /* connections re-established (a metric) */
} fence__redis;

/* ---- Redis Cluster's node table (cluster.c) ------------------------------ */
/* A node of the cluster (master or replica; a replica may be promoted).
 * Entries are only ever appended: an index stays valid for the client's
 * life.  host/port are written before nnodes grows (under lock).  Each
 * has two connection slots: cmd, the command path's (under cmd_lock), and
 * hb, a second one for a caller that must never wait on cmd_lock (the
 * heartbeat; under that caller's own lock). */
typedef struct fence__node {
    char host[256];
    int port;
    fence__line cmd;  /* cmd_lock */
    fence__conn *hb;  /* the second caller's lock */
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
    /* Kept for the second caller's passes (the heartbeat counts them). */
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
/* Queue a command (RESP: fence__tr_append writes it, _appendf through
 * hiredis's redisvFormatCommand; lens NULL: strlen of each word);
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
/* A reply already read and parsed, without reading: 1 and *reply, 0 none,
 * -1 failed (cn->err set). */
int fence__tr_parsed(fence__conn *cn, void **reply);
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

/* ==== level 2 ============================================================ */

/* ---- pipe.c: many requests in flight on one connection ---------------- */
/* 0, or -1 (the condition variable could not be made). */
int fence__pipe_init(fence__pipe *p);
/* Fail every request, close the connection (nobody may be driving). */
void fence__pipe_destroy(fence__pipe *p);

/* A request for want (1..FENCE__REQ_MAX) replies; NULL out of memory. */
fence__req *fence__req_new(int want, int64_t allow_us);
/* Free q and its replies (NULL: no-op). */
void fence__req_free(fence__req *q);
/* Take reply i out of q (the caller frees it then). */
void *fence__req_take(fence__req *q, int i);

/* Queue q, whose commands the caller has just appended to p->cn; with
 * write_now, try to write them at once (blocking callers: a driver may be
 * polling without POLLOUT), else leave that to the next step (an event
 * loop writes everything queued in one go).  Not connected: q is FAILED
 * at once.  A write failure fails every waiting request, q included. */
void fence__pipe_submit(fence__pipe *p, fence__req *q, int write_now);

/* ---- the non-blocking core (an event loop, or the driver below) ---------- */
/* Write what can be written, read what has come, hand replies to their
 * requests in order (calling done callbacks), and fail every waiting
 * request when the connection fails or stays quiet past the head
 * request's allowance.  Returns how many requests finished. */
int fence__pipe_step(fence__pipe *p);
/* The poll(2) events the connection waits for now (0: nothing waits). */
short fence__pipe_events(const fence__pipe *p);
/* When the head request's allowance ends (monotonic us), or INT64_MAX. */
int64_t fence__pipe_deadline(const fence__pipe *p);
/* A connection that was idle (nothing waits on p): whatever the server
 * sent meanwhile is a reply nobody asked for (a broken server or proxy),
 * which would otherwise be taken for the next request's: the connection is
 * failed.  0 fine, -1 (p->cn->err set). */
int fence__pipe_idle_check(fence__pipe *p);
/* Fail every waiting request with why (timed_out: a timeout) and mark the
 * connection unusable; returns how many there were. */
int fence__pipe_fail_all(fence__pipe *p, const char *why, int timed_out);

/* ---- blocking callers ------------------------------------------------------ */
/* Wait, with lk held (it is released while waiting), until q has finished
 * or deadline_us (monotonic) has passed.  One waiting caller at a time
 * does the I/O for everyone; the others sleep until their own request
 * finishes or the driver leaves.  0: q finished (DONE or FAILED; the
 * caller frees it).  -1: the deadline passed first; q now belongs to the
 * pipe (abandoned), the caller must not touch it. */
int fence__pipe_wait(fence__pipe *p, pthread_mutex_t *lk, fence__req *q, int64_t deadline_us);


/* ---- sentinel.c ------------------------------------------------------ */
/* Ask the URL's Sentinels in turn (SENTINEL get-master-addr-by-name) for
 * the master's address, within timeout_ms.  FENCE_OK and host/port;
 * FENCE_ECONN / FENCE_EAUTH with why in err (each Sentinel's answer). */
fence_status fence__sentinel_master(const fence__url *u, int64_t timeout_ms, char *host,
                                    size_t hostlen, int *port, char *err, size_t errlen);

/* ==== level 3 ============================================================ */

/* ---- conn.c: messages ------------------------------------------------------ */
/* Record a failure about rs's owner for this thread (in rs->errslot()'s
 * slot, keyed by rs->errkey); returns status. */
fence_status fence__rd_fail(const fence__redis *rs, fence_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- conn.c: connections ----------------------------------------------------- */
/* Check and take the transport options (TLS, the Sentinels' credentials)
 * after the URL was parsed into rs->url; FENCE_EINVAL with a message. */
fence_status fence__conn_config(fence__redis *rs, const fence__rd_opts *o);
/* Open a connection: connect (within timeout_ms), set I/O timeouts, AUTH,
 * SELECT.  FENCE_ECONN / FENCE_EAUTH / FENCE_EPROTO with a message. */
fence_status fence__conn_open(fence__redis *rs, fence__conn **out, int64_t timeout_ms);
/* Make sure *rc is open, reconnecting if needed.  *ever says whether this
 * slot was ever connected: a new connection then counts as a reconnect. */
fence_status fence__conn_ensure(fence__redis *rs, fence__conn **rc, int *ever,
                                int64_t timeout_ms);
/* Close and NULL *rc. */
void fence__conn_drop(fence__conn **rc);
/* Open a connection to host:port (a cluster node): TCP, TLS, AUTH as for
 * the URL (database 0).  Errors as fence__conn_open. */
fence_status fence__conn_open_at(fence__redis *rs, const char *host, int port,
                                 fence__conn **out, int64_t timeout_ms);
/* Set both I/O timeouts on an open connection. */
void fence__conn_timeout(fence__conn *rc, int64_t ms);
/* Load every script, pipelined, and remember the SHAs (best effort).
 * slots (optional): CLUSTER SLOTS pipelined behind them, its reply there
 * (NULL on an I/O error): cluster detection costs no round trip. */
void fence__scripts_load(fence__redis *rs, fence__conn *rc, void **slots);
/* Load every script on rc, pipelined, keeping no SHA (a cluster node's
 * new connection); -1 on an I/O error. */
int fence__scripts_preload(const fence__redis *rs, fence__conn *rc);

/* ==== level 4 ============================================================ */

/* ---- srvinfo.c ------------------------------------------------------- */
/* What a server says of itself, asked in one round trip: append INFO
 * memory, INFO persistence and CONFIG GET save to rc, then fill *out from
 * their three replies (a refused command, or a NULL reply, leaves its
 * fields unknown). */
#define FENCE__SRV_NREPLIES 3
void fence__srv_append(fence__conn *rc);
void fence__srv_fill(fence__srvinfo *out, void *const *replies);

/* ---- cluster.c: hash slots ---------------------------------------------- */
/* CRC16/XMODEM of buf (crc16("123456789") == 0x31C3). */
uint16_t fence__crc16(const char *buf, size_t len);
/* The hash slot of a key: its {tag} when non-empty, else the whole key. */
int fence__key_slot(const char *key, size_t len);

/* ---- cluster.c: the node table, the slot map, redirections ------------ */
/* The reply to CLUSTER SLOTS at open: an array makes rs a cluster client
 * (its map read from it; seed_host replaces an empty announced host).
 * FENCE_OK (cluster or not), FENCE_EINVAL (a /db URL), FENCE_ENOMEM. */
fence_status fence__cluster_init(fence__redis *rs, const void *reply, const char *seed_host);
/* Close every node connection and free the table (rs->cl NULL: no-op). */
void fence__cluster_free(fence__redis *rs);
/* The map may be out of date: refresh before its next use. */
void fence__cluster_stale(fence__redis *rs);
/* Ask the known nodes in turn for CLUSTER SLOTS (within timeout_ms) and
 * replace the map.  FENCE_OK, or FENCE_ECONN with a message. */
fence_status fence__cluster_refresh(fence__redis *rs, int64_t timeout_ms);
/* The same unless another thread is refreshing now: then FENCE_OK at
 * once, nothing done (the heartbeat never waits on a caller's refresh). */
fence_status fence__cluster_refresh_try(fence__redis *rs, int64_t timeout_ms);
/* The master of slot (refreshing a stale map first): a node index, or -1
 * when no known node serves it. */
int fence__cluster_node_of(fence__redis *rs, int slot, int64_t timeout_ms);
/* The index of host:port, added if new; -1 when the table is full. */
int fence__cluster_node_index(fence__redis *rs, const char *host, int port);
/* Parse an error reply: FENCE__RD_* (NONE: not a cluster redirection). */
int fence__redirect_parse(const char *err, fence__redirect *rd);
/* The node a MOVED or ASK reply sent by node from names (added if new;
 * -1 if the table is full); an empty host is from's.  MOVED: the slot now
 * belongs to it, and the whole map is refreshed before the next command. */
int fence__cluster_redirect(fence__redis *rs, const fence__redirect *rd, int from);
/* A new connection to node (AUTH; no scripts: pub/sub). */
fence_status fence__cluster_open(fence__redis *rs, int node, fence__conn **out,
                                 int64_t timeout_ms);
/* Make sure *rc (a node's connection) is open: AUTH and the scripts on a
 * new one; a new connection after an earlier one counts as a reconnect. */
fence_status fence__cluster_ensure(fence__redis *rs, int node, fence__conn **rc, int *ever,
                                   int64_t timeout_ms);

/* ---- connect_async.c, tls.c, transport.c, conn.c: what the asynchronous
 * API needs -- connecting and logging in without waiting ------------------- */
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

/* conn.c: where rs's URL points (standalone or unix: not Sentinel). */
void fence__conn_target(const fence__redis *rs, fence__target *t);
/* Append AUTH and SELECT as the URL and options ask: how many commands
 * (0..2), or -1 out of memory. */
int fence__conn_append_login(const fence__redis *rs, fence__conn *cn);
/* The reply to the i-th command fence__conn_append_login appended
 * (NULL: none came): FENCE_OK, or the status and message of the blocking
 * path (FENCE_EAUTH, FENCE_EINVAL for SELECT on a cluster node, ...). */
fence_status fence__conn_login_reply(const fence__redis *rs, int i, const void *reply);

/* ==== level 5 ============================================================ */

/* ---- eval.c: the handle ------------------------------------------------------ */
/* Initialise rs's locks, its line and counters (the rest: zero or the
 * owner's).  0, or -1 (a condition variable could not be made). */
int fence__rd_init(fence__redis *rs);
/* Close every connection, free the cluster table and the URL, destroy the
 * locks. */
void fence__rd_close(fence__redis *rs);

/* ---- eval.c: running scripts ------------------------------------------------- */
/* The extras of a script call. */
typedef struct fence__eval_opts {
    int check;                  /* rs->first_use before the first such call on a connection */
    int min_replicas;           /* > 0: WAIT min_replicas replica_timeout_ms behind it */
    int64_t replica_timeout_ms;
    long long acked;            /* out: WAIT's answer (-1 unknown) */
} fence__eval_opts;
/* The pieces of a script call, for the command line below and for the
 * asynchronous API's own connection.  Append [ASKING] EVALSHA (use_sha,
 * when the SHA is known) or EVAL, and WAIT behind it when io asks, to cn:
 * the number of replies to expect, or -1 for a bad script index or too
 * many arguments (nothing appended). */
int fence__script_append(const fence__redis *rs, fence__conn *cn, int script, int use_sha,
                         int nkeys, int nargs, const char **args, int asking,
                         const fence__eval_opts *io);
/* What the script's reply means: FENCE_OK (a reply to use), *noscript
 * (send the body with EVAL), or the status and message of an error reply
 * (FENCE_EAUTH, FENCE_ECONN for a failover under Sentinel or a cluster
 * redirection, into rd when given; FENCE_EPROTO for the script's own). */
fence_status fence__script_verdict(const fence__redis *rs, const void *reply,
                                   fence__redirect *rd, int *noscript);
/* How long a script call's replies may take before its connection counts
 * as dead: the I/O timeout, plus WAIT's own. */
int64_t fence__script_allowance_us(const fence__redis *rs, const fence__eval_opts *io);
/* Run a script (an index into rs's table) on the command line: EVALSHA,
 * falling back to EVAL on NOSCRIPT, queued behind the other callers'
 * requests (any number of threads at once), with one retry on a new
 * connection when one that had been idle failed.  *reply is the reply
 * (owned by the caller: freeReplyObject) on FENCE_OK; an error reply is
 * FENCE_EPROTO, a cluster redirection is followed.
 *
 * One budget per call: at most connect_timeout_ms to get a usable
 * connection (when one must be made: TCP, TLS, AUTH, SELECT, the scripts),
 * then at most io_timeout_ms (plus WAIT's replica_timeout_ms) for what it
 * asks (the first_use check, the script, its EVAL after NOSCRIPT); the idle
 * connection's retry and a cluster's redirections and back-offs share what
 * is left of the whole (connect + I/O), and deadline_us (INT64_MAX: none)
 * caps it all.  A caller whose time runs out gets FENCE_ECONN ("timed
 * out") and leaves the connection to the others.  cmd_lock is held only to
 * queue and to look at a line, never across a sleep or a cluster refresh.
 * *retried (optional) tells whether the retry happened.  io (optional):
 * the first_use check and the WAIT. */
fence_status fence__eval_cmd(fence__redis *rs, int script, int nkeys, int nargs,
                             const char **args, int64_t deadline_us, int *retried,
                             fence__eval_opts *io, void **reply);
/* What the server says of itself (srvinfo.c's commands), on the command
 * path (in a cluster, the seed node's line), within deadline_us and the
 * call budget above. */
fence_status fence__cmd_server_info(fence__redis *rs, int64_t deadline_us, fence__srvinfo *out);

#endif
