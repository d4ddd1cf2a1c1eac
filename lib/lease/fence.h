/*
 * fence.h -- leases that carry a monotonic fencing token (libfence).
 *
 * Each acquisition returns a token strictly greater than every token issued
 * before for that lease name (clock tokens: also across a lost counter,
 * under the clock assumption of docs/redis.md); the storage libraries
 * reject writes with an older one.  The server that keeps the leases and
 * issues the tokens is an issuer, named by the URL's scheme: Redis
 * (redis://, rediss://, unix://, redis-sentinel://) in this build;
 * postgresql:// and etcd:// are refused as not available here
 * (fence_url_issuer, fence_client_issuer).  Status codes, limits and
 * fence_strerror() are in fence_common.h.  How it works, the Redis key
 * contract and the thread and process rules in full: docs/redis.md;
 * timeouts and the issuers: docs/api.md.
 *
 * Threads and ownership: a fence_client may be shared by any number of
 * threads.  A fence_lease belongs to the client that acquired it and is
 * freed by fence_release() (or fence_client_close()).  Whatever a call
 * returns through an out-pointer is the caller's until the matching
 * release/close; strings a handle returns belong to the handle.  A client
 * does not survive fork().
 */
#ifndef FENCE_H
#define FENCE_H

#include <stddef.h>
#include <stdint.h>

#include "fence_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Limits                                                               */
/* ------------------------------------------------------------------ */

#define FENCE_TTL_MIN_MS 10                /* shortest lease TTL */
#define FENCE_TTL_MAX_MS (7LL * 86400000)  /* longest lease TTL: 7 days */
#define FENCE_WAIT_MAX_MS (7LL * 86400000) /* longest acquire wait */
#define FENCE_OWNER_BYTES 16               /* random bytes in an owner id */

/* ------------------------------------------------------------------ */
/* Client                                                               */
/* ------------------------------------------------------------------ */

typedef struct fence_client fence_client;
typedef struct fence_lease fence_lease;

/* How tokens are issued (docs/redis.md, "Tokens"). */
enum fence_token_mode {
    /* Default: max(last + 1, the Redis server's clock in microseconds), plus
     * token_jump_ms when the counter is missing or was written by another
     * server incarnation (failover, restart, flush, eviction).  Tokens
     * never repeat or go back while successive servers' clocks differ by
     * less than the time between their tokens plus the jump. */
    FENCE_TOKENS_CLOCK = 0,
    /* 1, 2, 3, ...: last + 1, no floor, no jump.  RISK: a lost counter
     * (failover to a lagging replica, restart without persistence, DEL,
     * FLUSHALL, eviction) starts again lower: tokens REPEAT, and a store
     * admits a second holder with an equal token. */
    FENCE_TOKENS_DENSE = 1
};

#define FENCE_TOKEN_JUMP_DEFAULT_MS 10000       /* 10 s */
#define FENCE_COUNTER_IDLE_DEFAULT_MS 86400000LL /* 1 day */
#define FENCE_COUNTER_IDLE_MAX_MS (365LL * 86400000) /* 1 year */
#define FENCE_TOKEN_JUMP_MAX_MS (86400000LL)    /* 1 day */
#define FENCE_MIN_REPLICAS_MAX 64
#define FENCE_REPLICA_TIMEOUT_DEFAULT_MS 100
#define FENCE_REPLICA_TIMEOUT_MAX_MS 60000

enum fence_heartbeat_mode {
    FENCE_HEARTBEAT_THREAD = 0, /* one background thread per client (default) */
    FENCE_HEARTBEAT_MANUAL = 1  /* no threads: call fence_heartbeat_run() */
};

/*
 * Options for fence_client_open().  Initialise with
 * fence_client_options_init(), then set what you need; zero means "the
 * default" for every numeric field.  url, the credentials, the timeouts,
 * heartbeat_mode and renew_batch are every issuer's; the others are the
 * Redis issuer's, and setting one with a URL of another issuer is refused
 * (FENCE_EINVAL, naming the option).
 *
 * Timeouts: every call is held to one budget of its own -- at most
 * connect_timeout_ms to get a usable connection when it has to make one
 * (TCP, TLS, AUTH, SELECT, loading the scripts), then at most io_timeout_ms
 * (plus replica_timeout_ms with min_replicas) for everything it asks the
 * server in that call; so never longer than their sum, however the server
 * paces its answers (docs/api.md, "Timeouts").
 */
typedef struct fence_client_options {
    /* The issuer, by the scheme.  Redis: redis://[user:password@]host[:port][/db],
     * rediss://... (TLS), unix:///path[?db=N], or
     * redis-sentinel://[[user:]password@]host[:port][,host[:port]...][/db]#master
     * (Sentinel port default 26379; the credentials are the data nodes').
     * PostgreSQL: postgresql:// or postgres://, libpq's URI form (its
     * parameters in the query, and fence_wait=notify|poll: docs/issuers.md);
     * the database needs fence.sql 7.  etcd:// URLs: FENCE_EINVAL, not
     * available in this build.  Required.  Percent-escapes are decoded in
     * user and password.  Transports, TLS and Sentinel: docs/redis.md. */
    const char *url;
    /* Overrides for the URL's credentials (NULL: take them from the URL).
     * Credentials never appear in messages. */
    const char *username;
    const char *password;
    int connect_timeout_ms; /* default 2000 */
    int io_timeout_ms;      /* default 2000 */
    /* Key prefix: owner key "<prefix>{NAME}", counter "<prefix>{NAME}:token".
     * Default "fence:". At most 64 bytes. */
    const char *prefix;
    int heartbeat_mode; /* enum fence_heartbeat_mode; default THREAD */
    /* Leases renewed in one script call by the heartbeat (default 500);
     * all batches of a pass go out in one pipelined round trip. */
    int renew_batch;
    int token_mode;        /* enum fence_token_mode; default CLOCK */
    /* CLOCK only: the jump after a lost counter, 1..FENCE_TOKEN_JUMP_MAX_MS
     * (default FENCE_TOKEN_JUMP_DEFAULT_MS). */
    int64_t token_jump_ms;
    /* 0 (default): before the first token on each connection, refuse a
     * server whose maxmemory-policy is anything but noeviction
     * (FENCE_ECONFIG): allkeys-* may evict any key, volatile-* the keys
     * with a TTL -- and a held lease's owner key always has one, so it
     * picks exactly them (two holders at once).  1: issue anyway. */
    int allow_eviction;
    /* 0 (default): off.  1..FENCE_MIN_REPLICAS_MAX: acquire pipelines
     * WAIT min_replicas replica_timeout_ms behind its script; fewer acks:
     * the lease is released and acquire returns FENCE_EREPLICAS. */
    int min_replicas;
    /* 1..FENCE_REPLICA_TIMEOUT_MAX_MS, default 100; only with min_replicas. */
    int64_t replica_timeout_ms;
    int tls;                      /* 1: TLS (also implied by rediss://) */
    const char *tls_ca_file;      /* CA bundle (PEM); NULL: the system default */
    const char *tls_ca_dir;       /* CA directory (c_rehash'ed) */
    const char *tls_cert_file;    /* client certificate (PEM), for mutual TLS */
    const char *tls_key_file;     /* its private key (PEM) */
    const char *tls_server_name;  /* SNI and the name verified; default: the URL's host */
    int tls_insecure;             /* 1: do not verify the server's certificate (say so loudly) */
    const char *sentinel_password;/* the Sentinels' own password (data-node credentials come
                                     from the URL / username / password) */
    const char *sentinel_username;
    /* CLOCK only.  A server whose clock reads earlier than the one that
     * issued a counter's last token (another server's clock ahead of it, or
     * its own stepped back) is "behind": docs/redis.md, "Clocks".  0
     * (default): issue anyway (the token is still above the counter's, plus
     * the jump on a new server) and report it (fence_lease_clock_behind_us,
     * the clock_behind metrics).  1..FENCE_TOKEN_JUMP_MAX_MS: refuse to issue
     * when behind by more than this (FENCE_ECLOCK, nothing written). */
    int64_t clock_behind_limit_ms;
    /* CLOCK only.  A clock token is an instant (microseconds since 1970):
     * each issue sets the counter to expire this long after the instant its
     * token names, so an idle name's counter leaves Redis and the next token
     * (clock + jump) is still above every one issued (docs/redis.md, "The
     * Redis key contract").  0: FENCE_COUNTER_IDLE_DEFAULT_MS; -1: never
     * (counters are kept forever, as dense ones always are);
     * 1..FENCE_COUNTER_IDLE_MAX_MS. */
    int64_t counter_idle_ms;
} fence_client_options;

FENCE_API void fence_client_options_init(fence_client_options *opts);

/*
 * Open a client.  On success returns FENCE_OK and *out is a connected
 * client.  On failure returns the status and, where memory allowed, still
 * sets *out to a handle whose fence_client_errmsg() says why; it must be
 * closed with fence_client_close() either way.  *out is NULL only when
 * out itself was NULL or memory ran out.  A handle whose options were
 * valid but whose server could not be reached is usable (calls reconnect);
 * one whose options were invalid answers every call with FENCE_ESTATE.
 */
FENCE_API fence_status fence_client_open(fence_client **out, const fence_client_options *opts);

/* fence_client_open() with default options and the given URL.  url NULL:
 * the environment variable FENCE_URL when it is set and not empty, else
 * FENCE_REDIS_URL likewise, else "redis://127.0.0.1:6379" (as the fence
 * CLI does). */
FENCE_API fence_status fence_client_open_url(fence_client **out, const char *url);

/* Stop the heartbeat thread, release every lease still open on the client
 * (best effort: once Redis proves unreachable the rest are left to expire
 * by their TTL instead of costing a timeout each), close its connections
 * and free it.  NULL is a no-op. */
FENCE_API void fence_client_close(fence_client *c);

/* Detail of the calling thread's last failed call on this client ("" if
 * none; a successful call clears it).  Never NULL; valid until that
 * thread's next call on the client.  Never contains credentials.  NULL:
 * the message of a failed call that had no client. */
FENCE_API const char *fence_client_errmsg(const fence_client *c);

/* The URL the client talks to, with any credentials removed. */
FENCE_API const char *fence_client_url(const fence_client *c);

/* The issuer a URL's scheme names -- "redis" (redis://, rediss://, unix://,
 * redis-sentinel://), "postgresql" (postgresql://, postgres://), "etcd"
 * (etcd://, etcds://) -- whether this build has it or not; NULL for any
 * other text (NULL too).  Static strings. */
FENCE_API const char *fence_url_issuer(const char *url);

/* The issuer of an open client ("redis", "postgresql"); "" for NULL. */
FENCE_API const char *fence_client_issuer(const fence_client *c);

/* ------------------------------------------------------------------ */
/* Leases                                                               */
/* ------------------------------------------------------------------ */

/*
 * Called exactly once when a held lease is lost (also when memory has run
 * out: losing a lease allocates nothing); reason is FENCE_LOST (renewal
 * refused, or validity ran out with no renewal tried) or FENCE_ECONN
 * (validity ran out while renewals went unanswered).  Runs on the
 * heartbeat thread (or in fence_heartbeat_run()/fence_renew()) with no lock
 * held; may call any fence_* function except fence_client_close() on its
 * own client.  Never for a lease its user released, never after
 * fence_release() returns (one exception: docs/redis.md, "The lost
 * callback").
 */
typedef void (*fence_lost_cb)(fence_lease *lease, int reason, void *user);

typedef struct fence_lease_options {
    int64_t ttl_ms;   /* required: FENCE_TTL_MIN_MS..FENCE_TTL_MAX_MS */
    /* How long fence_acquire() may keep trying: 0 tries once (FENCE_BUSY
     * when held), >0 waits up to that long (FENCE_TIMEOUT when it ends;
     * docs/redis.md, "Waiting with pub/sub"). */
    int64_t wait_ms;
    /* Renewal period; default ttl/3.  Must be < ttl. */
    int64_t renew_every_ms;
    /* 0 (default): the heartbeat renews this lease.  1: never renewed
     * automatically; call fence_renew() yourself. */
    int no_heartbeat;
    fence_lost_cb on_lost; /* optional */
    void *user;            /* handed to on_lost */
    /* Optional description of the holder, e.g. "host=web1 pid=42
     * since=2024-05-01T10:00:00Z": 1..FENCE_HOLDER_INFO_MAX bytes of
     * printable ASCII (0x20-0x7e), else FENCE_EINVAL; NULL or "": none.
     * Stored in Redis with the lease (key "<prefix>{NAME}:info", same TTL,
     * written by the acquire itself, kept by renewals and
     * fence_lease_reissue(), deleted by release); read it back with
     * fence_lease_inspect_info().  Not a secret: anyone who can read the
     * Redis can read it.  Copied: need not outlive the call. */
    const char *holder_info;
} fence_lease_options;

#define FENCE_HOLDER_INFO_MAX 256 /* bytes in fence_lease_options.holder_info */

FENCE_API void fence_lease_options_init(fence_lease_options *opts, int64_t ttl_ms);

/*
 * Acquire the lease NAME (1..FENCE_NAME_MAX bytes, no control characters)
 * in one atomic round trip; a held lease costs no token.  Returns FENCE_OK
 * and sets *out (release it with fence_release()), or FENCE_BUSY (held by
 * another owner and wait_ms == 0), FENCE_TIMEOUT (still held when wait_ms
 * ran out), or an error; *out is NULL on anything but FENCE_OK.
 */
FENCE_API fence_status fence_acquire(fence_client *c, const char *name,
                            const fence_lease_options *opts, fence_lease **out);

/* fence_acquire() with default options: try once, heartbeat on. */
FENCE_API fence_status fence_try_acquire(fence_client *c, const char *name, int64_t ttl_ms,
                                fence_lease **out);

/*
 * Renew now: extend the TTL only if Redis still holds this lease's owner
 * value.  FENCE_OK, or FENCE_LOST (expired or taken, or its local validity
 * had already run out: the lease becomes lost and its on_lost fires), or
 * FENCE_ECONN etc. (the lease stays held until its local validity runs
 * out; a failed renewal past that point makes it lost, reason
 * FENCE_ECONN).  Works in every heartbeat mode.
 */
FENCE_API fence_status fence_renew(fence_lease *lease);

/*
 * Release the lease and free the handle (always, whatever the outcome).
 * Compare-and-delete: the owner key is deleted only if it still holds this
 * lease's owner value, and waiters are woken.  FENCE_OK when deleted,
 * FENCE_LOST when the lease had already been lost (the new owner's key is
 * left untouched; a lease lost only because Redis did not answer is still
 * deleted if its key is there, to free it for waiters), FENCE_ECONN etc.
 * when Redis could not be told (the key then expires by its TTL) or when
 * the connection failed mid-release (the lease is then not held, but
 * whether it was released or had expired is unknown).  NULL is a no-op
 * returning FENCE_EINVAL.
 */
FENCE_API fence_status fence_release(fence_lease *lease);

/* The fencing token issued with this lease (>= 1). */
FENCE_API uint64_t fence_lease_token(const fence_lease *lease);

/* Microseconds the Redis server's clock was behind the clock that had
 * issued the counter's previous token, when this lease's token was issued
 * (by acquire or fence_lease_reissue); 0 when it was not behind
 * (docs/redis.md, "Clocks"). */
FENCE_API int64_t fence_lease_clock_behind_us(const fence_lease *lease);

/* The lease's name (owned by the lease). */
FENCE_API const char *fence_lease_name(const fence_lease *lease);

/* The owner value stored in Redis for this lease, "<32 hex>:<token>".
 * Changes with fence_lease_reissue(). */
FENCE_API const char *fence_lease_owner(const fence_lease *lease);

/* The lease's holder id: its 128-bit owner id as FENCE_HOLDER_LEN (32)
 * lowercase hex digits (the owner value before ':'); what the stores
 * record with a token.  Owned by the lease; never changes. */
FENCE_API const char *fence_lease_holder(const fence_lease *lease);

/*
 * Self-healing after a regression: a store rejected this holder's write
 * because it has seen store_highest (> this lease's token) although the
 * lease is still held -- the counter fell behind the store.  In one script
 * call, only while Redis still holds this lease's owner value: raise the
 * counter to at least store_highest (0..FENCE_TOKEN_MAX-1), issue a fresh
 * token (the acquire rule: > store_highest), and make the owner value
 * "<holder>:<new token>" keeping the key's TTL.  FENCE_OK with *new_token
 * (optional) = fence_lease_token(lease); FENCE_LOST when the lease is no
 * longer held (it becomes lost; on_lost fires); errors as acquire
 * (FENCE_ECONFIG included).  Counted in the token_regressions metric.  Do
 * not call it concurrently with other calls on the same lease.
 */
FENCE_API fence_status fence_lease_reissue(fence_lease *lease, uint64_t store_highest,
                                           uint64_t *new_token);

/* Nonzero once the lease is lost (renewal refused or validity ran out). */
FENCE_API int fence_lease_lost(const fence_lease *lease);

/*
 * Milliseconds the lease is still surely held (CLOCK_MONOTONIC, from when
 * the last successful acquire/renew was sent, plus the TTL, minus a margin:
 * docs/redis.md, "Validity").  0 when lost or expired.
 */
FENCE_API int64_t fence_lease_valid_ms(const fence_lease *lease);

/* The client a lease belongs to. */
FENCE_API fence_client *fence_lease_client(const fence_lease *lease);

/*
 * Manual heartbeat (FENCE_HEARTBEAT_MANUAL, or to force a pass): renew
 * every lease whose renewal is due, in one pipelined round trip, firing
 * on_lost for any that are lost.  *next_ms (optional) receives the
 * milliseconds until the next renewal is due (-1 when no lease is held).
 * Returns FENCE_OK, or the connection error (leases stay held until their
 * validity runs out, and the next call tries again).  With the thread mode
 * it returns FENCE_ESTATE.
 */
FENCE_API fence_status fence_heartbeat_run(fence_client *c, int64_t *next_ms);

/*
 * Raise NAME's token counter to at least `floor` (never lowers it), so
 * that the next token is > floor.  For retrofitting a store whose version
 * column already holds numbers.  *token_out (optional) gets the counter's
 * value afterwards.  Raised past the clock, clock tokens are dense (last
 * + 1) until the clock passes them (docs/redis.md, "Tokens").
 */
FENCE_API fence_status fence_token_raise(fence_client *c, const char *name, uint64_t floor,
                                uint64_t *token_out);

/* The last token issued for NAME (0 if none yet), without acquiring. */
FENCE_API fence_status fence_token_last(fence_client *c, const char *name, uint64_t *token_out);

/*
 * Inspect NAME: *held is 1 if the owner key exists, *pttl_ms its remaining
 * TTL (-1 when free), *holder_token the token of the current holder (0 when
 * free), *last_token the last token issued.  Any out-pointer may be NULL.
 */
FENCE_API fence_status fence_lease_inspect(fence_client *c, const char *name, int *held,
                                  int64_t *pttl_ms, uint64_t *holder_token,
                                  uint64_t *last_token);

/* What fence_lease_inspect_info() reads about a lease (one snapshot). */
typedef struct fence_lease_info {
    int held;              /* 1 if the owner key exists */
    int64_t pttl_ms;       /* its remaining TTL in ms; -1 when free */
    uint64_t holder_token; /* the current holder's token; 0 when free */
    uint64_t last_token;   /* the last token issued for NAME; 0 if none */
    /* The holder id (fence_lease_holder() of the lease that holds it);
     * "" when free or when the owner value is not "<32 hex>:<token>". */
    char holder[FENCE_HOLDER_LEN + 1];
    /* The holder's fence_lease_options.holder_info; "" when free, when it
     * gave none, or when the stored one belongs to another holder. */
    char holder_info[FENCE_HOLDER_INFO_MAX + 1];
} fence_lease_info;

/*
 * fence_lease_inspect() plus who holds NAME: fills *out (zeroed first)
 * from one read-only script call.  FENCE_EINVAL when out is NULL.
 */
FENCE_API fence_status fence_lease_inspect_info(fence_client *c, const char *name,
                                                fence_lease_info *out);

/* What a Redis server says about its ability to keep fencing state. */
enum fence_persistence {
    FENCE_PERSIST_UNKNOWN = -1, /* AOF off and CONFIG GET save refused */
    FENCE_PERSIST_OFF = 0,      /* no AOF, no RDB snapshots: a restart loses counters */
    FENCE_PERSIST_RDB = 1,
    FENCE_PERSIST_AOF = 2,
    FENCE_PERSIST_AOF_RDB = 3
};

typedef struct fence_server_info {
    char maxmemory_policy[32]; /* INFO memory; "" when it could not be read */
    int persistence;           /* enum fence_persistence */
} fence_server_info;

/* Ask the client's Redis (INFO memory, INFO persistence, CONFIG GET
 * save; one round trip).  Fields it refused to tell stay ""/unknown.  A
 * Redis call: FENCE_EINVAL for a client of another issuer. */
FENCE_API fence_status fence_client_server_info(fence_client *c, fence_server_info *out);

/* "off", "rdb", "aof", "aof+rdb" or "unknown". */
FENCE_API const char *fence_persistence_name(int persistence);

/* What an issuer says of its server (fence_client_describe(); `fence
 * status` shows it for any issuer). */
#define FENCE_DESCRIBE_FIELDS 8
typedef struct fence_issuer_info {
    char issuer[16]; /* fence_client_issuer(): "redis" */
    char url[400];   /* fence_client_url(): no credentials */
    int nfields;
    struct fence_issuer_field {
        char key[32];    /* Redis: "persistence", "maxmemory_policy" */
        char value[128]; /* "" when the server would not tell */
        char note[160];  /* a remark for people reading it, or "" */
    } field[FENCE_DESCRIBE_FIELDS];
} fence_issuer_info;

/* Ask the client's server what it says of itself (one round trip for
 * Redis: fence_client_server_info's) and fill *out (zeroed first). */
FENCE_API fence_status fence_client_describe(fence_client *c, fence_issuer_info *out);

/* ------------------------------------------------------------------ */
/* Metrics                                                              */
/* ------------------------------------------------------------------ */

/* Upper bounds (seconds) of heartbeat_latency's buckets; the last bucket
 * is +Inf. */
#define FENCE_LATENCY_BUCKETS                                                \
    {0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5}
#define FENCE_LATENCY_NBUCKETS 13 /* 12 bounds + Inf */

/* A snapshot of one client's counters since it was opened. */
typedef struct fence_metrics {
    uint64_t lease_acquired;    /* successful acquisitions */
    uint64_t lease_lost;        /* leases lost (each counted once) */
    uint64_t lease_released;    /* releases that deleted the key */
    uint64_t acquire_attempts;  /* acquire script calls */
    uint64_t acquire_contended; /* attempts that found the lease held */
    uint64_t acquire_timeouts;  /* waits that ran out */
    uint64_t renew_ok;          /* lease renewals that succeeded */
    uint64_t renew_failed;      /* renewals refused or not answered */
    uint64_t reconnects;        /* connections re-established */
    uint64_t leases_held;       /* gauge: leases currently held */
    uint64_t token_regressions; /* fence_lease_reissue() calls that succeeded */
    /* gauge: the server's persistence when last checked (before the first
     * token on a connection): 1 on, 0 off, -1 unknown or not yet asked. */
    int64_t redis_persistence;
    /* heartbeat_latency: the round-trip time of each heartbeat pass. */
    uint64_t heartbeat_latency_bucket[FENCE_LATENCY_NBUCKETS]; /* not cumulative */
    uint64_t heartbeat_latency_count;
    double heartbeat_latency_sum_s;
    /* Tokens issued by a server whose clock was behind the one that issued
     * the counter's previous token, and the largest such lag seen (us);
     * refusals under clock_behind_limit_ms count too. */
    uint64_t clock_behind;
    int64_t clock_behind_max_us;
} fence_metrics;

FENCE_API fence_status fence_client_metrics(const fence_client *c, fence_metrics *out);

/*
 * Write a snapshot in the Prometheus text exposition format (version
 * 0.0.4): fence_lease_acquired_total, fence_lease_lost_total,
 * fence_heartbeat_latency_seconds (histogram) and the rest.  Like
 * snprintf: writes at most `size` bytes including the NUL and returns the
 * length the whole text needs (excluding the NUL), or -1 on bad arguments.
 */
FENCE_API int fence_metrics_prometheus(const fence_metrics *m, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* FENCE_H */
