/* eissuer.h -- the etcd issuer's files above the engine (etcd.h): its
 * handle, a lease's room, the groups, and what the files share.  Not
 * installed.  Levels, bottom up:
 *   ecall.c    messages, keys, the command path's calls, JSON pieces
 *   egroup.c   groups of names sharing one etcd lease, keepalives, the
 *              renewal (issuer.h's renew) and its key check
 *   ewait.c    waiting for a release (/v3/watch)
 *   eissuer.c  options, acquire, release, reissue, raise, inspect,
 *              describe, the ops table (fence__etcd_issuer) */
#ifndef FENCE_EISSUER_H
#define FENCE_EISSUER_H

#include "etcd.h"

#define MAX_TXN_OPS 128 /* etcd's --max-txn-ops default */
#define GROUP_MAX 100   /* names per etcd lease */

/* A group of a client's names sharing one etcd lease (below). */
typedef struct egroup {
    int64_t id;         /* the etcd lease */
    int64_t ttl_ms;     /* its names' TTL */
    int64_t server_ttl; /* seconds, as granted */
    int members;        /* names in it (and acquires joining it) */
    int dead;           /* answered TTL 0: never joined again */
    struct egroup *next;
} egroup;

struct fence__issuer {
    fence__etcd et;
    fence__iss_env env;
    char *prefix;
    size_t prefix_len;
    pthread_mutex_t cmd_lock; /* the command path's line */
    fence__et_line cmd;
    int cmd_down;
    fence__et_line hb; /* the heartbeat's, under the core's heartbeat lock */
    pthread_mutex_t grp_lock; /* the groups */
    egroup *groups;
    int group_max;     /* names per etcd lease */
};

/* A lease's room. */
typedef struct eroom {
    int64_t lease;     /* the etcd lease holding the owner key (0: none) */
    struct egroup *grp;/* the group it joined (NULL: none) */
    int64_t rev;       /* the revision of the owner key's put */
    uint64_t off;      /* the floor's value in that put */
    int64_t floor_mod; /* the floor's mod_revision as last seen (0: absent) */
    char *owner, *floor;
    size_t owner_len, floor_len;
    char buf[];
} eroom;
#define ROOM(l) ((eroom *)(l)->room)

/* ---- ecall.c ------------------------------------------------------------------ */
/* Fail with st and a message keyed to the client; returns st. */
fence_status fence__ei_fail(const fence__issuer *is, fence_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
fence_status fence__ei_nomem(const fence__issuer *is);
/* "<prefix><kind>/<name>" into buf (room for prefix + name + 3); its length. */
size_t fence__ei_key_of(const fence__issuer *is, char kind, const char *name, size_t namelen,
                        char *buf);
/* A call on the command path's line (req consumed; NULL: out of memory). */
fence_status fence__ei_cmd_call(fence__issuer *is, const char *path, json_t *req,
                                int64_t deadline_us, json_t **resp, int *twice, int *code);
/* A key (base64), an int64 (decimal string), a range op, a txn reply's
 * i-th range's first kv (or NULL). */
json_t *fence__ei_kjson(const char *k, size_t n);
json_t *fence__ei_idjson(int64_t id);
json_t *fence__ei_range_op(const char *k, size_t n, int keys_only);
json_t *fence__ei_range_kv(const json_t *resp, size_t i);
/* The etcd lease's TTL for ttl_ms: whole seconds, rounded up. */
int64_t fence__ei_server_ttl_s(int64_t ttl_ms);
/* /v3/lease/revoke id, best effort. */
void fence__ei_lease_revoke(fence__issuer *is, int64_t id, int64_t deadline_us);

/* ---- egroup.c ------------------------------------------------------------------ */
/* Keepalives of ids[0..n) on ln: alive[i] 1, 0 (TTL 0) or -1 (no answer). */
fence_status fence__ei_keepalive(fence__issuer *is, fence__et_line *ln, const int64_t *ids,
                                 size_t n, int64_t deadline_us, int *alive);
/* The group holding etcd lease id, or NULL (the caller holds grp_lock). */
egroup *fence__ei_group_find(fence__issuer *is, int64_t id);
/* A group for l whose etcd lease is alive as of this call (joined: its
 * members counted with l), or an error. */
fence_status fence__ei_group_for(fence__issuer *is, const fence__ilease *l, int64_t deadline_us,
                                 egroup **out);
/* Leave g; the last one out revokes its etcd lease and frees it. */
void fence__ei_group_leave(fence__issuer *is, egroup *g, int64_t deadline_us);
/* g answered TTL 0: never joined again. */
void fence__ei_group_dead(fence__issuer *is, egroup *g);
/* issuer.h's renew. */
fence_status fence__ei_renew(fence__issuer *is, fence__ilease *const *ls, size_t n, int chan,
                             int64_t deadline_us, int *results, int64_t *sent_us);

/* ---- ewait.c ------------------------------------------------------------------- */
fence__waiter *fence__ei_wait_open(fence__issuer *is, const char *name, int64_t deadline_us);
int fence__ei_wait(fence__waiter *w, int64_t deadline_us);
void fence__ei_wait_close(fence__waiter *w);

#endif
