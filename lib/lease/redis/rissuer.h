/* rissuer.h -- the Redis issuer: the lease operations of issuer.h in Redis's
 * terms, on the private Redis client of redis.h below it.  Not installed.
 *
 * Its files sit above the engine's in this room (redis.h's levels 0-5):
 *
 *   6  rscripts.c   the Lua scripts (the .lua files here, embedded at build
 *                   time; issue.lua in front of acquire.lua and reissue.lua),
 *                   each script's keys and arguments, what each reply means
 *   7  rrenew.c     renewing many leases on the heartbeat's own connection:
 *                   one server (batches pipelined), a cluster (hbcluster.c)
 *      hbcluster.c  a cluster pass: grouped by node and slot, one round trip
 *                   per node
 *      rwait.c      waiting for a release: pub/sub on a connection of its own
 *   8  rissuer.c    the options, the server check before a connection's first
 *                   token, the ops table (fence__redis_issuer)
 *
 * The asynchronous API (lib/lease/async/) sends the same scripts with the
 * same arguments on its own connection: it uses rscripts.c's builders and
 * parsers and the engine's request queue, never the blocking calls here. */
#ifndef FENCE_RISSUER_H
#define FENCE_RISSUER_H

#include "issuer.h"
#include "redis.h"

/* The scripts, by index into the engine's table. */
enum fence__script {
    FENCE__ACQUIRE,
    FENCE__REISSUE,
    FENCE__RENEW,
    FENCE__RENEW_BATCH,
    FENCE__RELEASE,
    FENCE__TOKEN_RAISE,
    FENCE__INSPECT,
    FENCE__NSCRIPTS
};
_Static_assert(FENCE__NSCRIPTS <= FENCE__RD_MAX_SCRIPTS, "the engine's script table is too small");

/* The Redis issuer's handle. */
struct fence__issuer {
    fence__redis rd;   /* the engine: URL, timeouts, scripts, lines, cluster table */
    fence__iss_env env;
    char *prefix;      /* key prefix, default "fence:" */
    size_t prefix_len;
    int token_mode;    /* enum fence_token_mode */
    int64_t token_jump_ms;
    int64_t clock_behind_limit_ms; /* 0: none */
    int64_t counter_idle_ms;       /* -1: never expires */
    int allow_eviction;
    int min_replicas;  /* 0: no WAIT */
    int64_t replica_timeout_ms;
    /* The scripts' arguments that never change for a client. */
    const char *mode_arg;                      /* "clock" / "dense" */
    char jump_arg[24], limit_arg[24], idle_arg[24];
    atomic_int persistence; /* the metrics gauge: 1 on, 0 off, -1 unknown */
    /* The heartbeat's connection (one server), under the core's heartbeat
     * lock; a cluster's are the nodes' hb slots. */
    fence__conn *hb;
    int hb_ever;
};

/* A lease's keys, in the room the core allocates with it (issuer.h). */
typedef struct fence__rkeys {
    char *owner;   /* "<prefix>{NAME}" */
    char *counter; /* "<prefix>{NAME}:token" */
    char *channel; /* "<prefix>{NAME}:released" */
    char *info;    /* "<prefix>{NAME}:info" */
    char ttl[24];  /* the TTL argument of renewals: "<ttl>", "-<ttl>" with a description */
    char buf[];
} fence__rkeys;
#define FENCE__RKEYS(l) ((fence__rkeys *)(l)->room)

/* ==== level 6: rscripts.c ================================================== */
/* Give rd the script bodies (issue.lua joined with acquire.lua and
 * reissue.lua once, at the first client).  FENCE_ENOMEM if that failed. */
fence_status fence__ri_scripts(fence__redis *rd);
/* The room a lease's keys need, and filling it. */
size_t fence__ri_room(const fence__issuer *ri, size_t namelen);
void fence__ri_keys(const fence__issuer *ri, fence__ilease *l);

/* Keys and arguments of each script into args (room for 10): how many in
 * all, with the keys' count in *nkeys. */
int fence__ri_acquire_args(const fence__issuer *ri, const fence__ilease *l,
                           const char *holder_info, const char **args, int *nkeys);
int fence__ri_reissue_args(const fence__issuer *ri, const fence__ilease *l, const char *floor,
                           const char **args, int *nkeys);
/* renew.lua's for l with its owner value (a buffer the caller keeps). */
int fence__ri_renew_args(const fence__ilease *l, const char *value, const char **args,
                         int *nkeys);
int fence__ri_release_args(const fence__issuer *ri, const fence__ilease *l, const char **args,
                           int *nkeys);

/* What each reply means (r: a redisReply, not freed here).  acquire and
 * reissue: FENCE_OK with *g (granted, or held by another / no longer
 * held), FENCE_ECLOCK (g->behind_us), FENCE_ECONFIG (the counter is another
 * token mode's), FENCE_EPROTO; what ("acquire", "reissue") and name go into
 * messages. */
fence_status fence__ri_grant_reply(const fence__issuer *ri, const void *r, const char *what,
                                   const char *name, fence__grant *g);
/* renew.lua's: 1 renewed, 0 refused, -1 not its reply (FENCE_EPROTO set). */
int fence__ri_renew_reply(const fence__issuer *ri, const void *r);
/* release.lua's: FENCE_OK with *deleted, or FENCE_EPROTO. */
fence_status fence__ri_release_reply(const fence__issuer *ri, const void *r, int *deleted);

/* ==== level 7: rrenew.c, hbcluster.c, rwait.c ============================== */
/* Renew ls[0..n) on the heartbeat's connection (issuer.h's renew, chan
 * FENCE__CHAN_HEARTBEAT), before deadline_us. */
fence_status fence__ri_renew_hb(fence__issuer *ri, fence__ilease *const *ls, size_t n,
                                int64_t deadline_us, int *results, int64_t *sent_us);
/* The same in a cluster: grouped by node, and within a node by slot (one
 * renew_batch.lua call per slot: a script touches one slot); each node's
 * batches sent before its replies are read: one round trip per node, the
 * replies of all nodes read with one poll().  deadline_us bounds the whole
 * pass: each step gets only the time left; a failed node is failed for the
 * whole pass.  Redirected batches are sent again once to their new node.
 * results[i]: 1 renewed, 0 refused, -1 no answer (kept at -1 on any
 * failure).  *sent: when the first batch went out.  FENCE_OK, or the last
 * failure. */
fence_status fence__hb_cluster(fence__issuer *ri, fence__ilease *const *ls, size_t n,
                               int *results, int64_t deadline_us, int64_t *sent);
fence__waiter *fence__ri_wait_open(fence__issuer *ri, const char *name, int64_t deadline_us);
int fence__ri_wait(fence__waiter *w, int64_t deadline_us);
void fence__ri_wait_close(fence__waiter *w);

/* ==== level 8: rissuer.c =================================================== */
/* fence_client_server_info() (a Redis call of fence.h). */
fence_status fence__ri_server_info(fence__issuer *ri, fence_server_info *out);
/* The persistence of fence.h for what a server said of itself. */
int fence__ri_persistence(const fence__srvinfo *si);

#endif
