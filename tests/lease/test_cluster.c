/*
 * test_cluster.c -- issue 9, Redis Cluster: three masters and a replica of
 * each (scripts/redis-set cluster, loopback, always stopped;
 * cluster-node-timeout 500).  The seed is any node; names spread over the
 * masters; the heartbeat makes one round trip per node per pass; a slot
 * migrated while leases in it are held (ASK, TRYAGAIN, then MOVED); a
 * master killed (its replica takes over) and then a master with no replica
 * (CLUSTERDOWN, bounded); wake-ups; bad input.  The internal counters of
 * lease_internal.h (c->iss->rd.cl) say what happened inside.
 */
#include "lease_internal.h"
#include "redis/rissuer.h"
#include "setutil.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The shared cluster (an unchecked fixture: started once, in the parent). */
static lu_set shared;
static int shared_ports[6];

static void read_ports(const lu_set *s, int *ports)
{
    char env[1100], line[256];
    snprintf(env, sizeof env, "%s/env", s->dir);
    FILE *f = fopen(env, "r");
    ck_assert_msg(f != NULL, "no %s", env);
    while (fgets(line, sizeof line, f) != NULL) {
        sscanf(line, "CLUSTER_PORTS=\"%d %d %d %d %d %d\"", &ports[0], &ports[1], &ports[2],
               &ports[3], &ports[4], &ports[5]);
    }
    fclose(f);
    for (int i = 0; i < 6; i++) {
        ck_assert_int_gt(ports[i], 0);
    }
}

static void shared_start(void)
{
    lu_set_start(&shared, "cluster", NULL);
    read_ports(&shared, shared_ports);
}

static void shared_stop(void)
{
    lu_set_stop(&shared);
}

static fence_client *open_port(int port, int mode)
{
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url;
    o.heartbeat_mode = mode;
    fence_client *c = lu_open_opts(&o);
    ck_assert_msg(c->iss->rd.cl != NULL, "%s: not detected as a cluster", url);
    return c;
}

static long long cmd_int(int port, const char *fmt, const char *arg)
{
    redisContext *r = lu_connect(port);
    redisReply *rep = redisCommand(r, fmt, arg);
    ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_INTEGER, "%s %s on %d", fmt, arg, port);
    long long v = rep->integer;
    freeReplyObject(rep);
    redisFree(r);
    return v;
}

/* The port of the master serving slot, from CLUSTER SLOTS on port. */
static int slot_owner(int port, int slot)
{
    redisContext *r = lu_connect(port);
    redisReply *rep = redisCommand(r, "CLUSTER SLOTS");
    ck_assert(rep != NULL && rep->type == REDIS_REPLY_ARRAY);
    int owner = 0;
    for (size_t i = 0; i < rep->elements; i++) {
        redisReply *e = rep->element[i];
        if (slot >= e->element[0]->integer && slot <= e->element[1]->integer) {
            owner = (int)e->element[2]->element[1]->integer;
        }
    }
    freeReplyObject(rep);
    redisFree(r);
    return owner;
}

/* The node id of port (CLUSTER MYID) into id (41 bytes). */
static void node_id(int port, char *id)
{
    redisContext *r = lu_connect(port);
    redisReply *rep = redisCommand(r, "CLUSTER MYID");
    ck_assert(rep != NULL && rep->type == REDIS_REPLY_STRING);
    snprintf(id, 41, "%s", rep->str);
    freeReplyObject(rep);
    redisFree(r);
}

START_TEST(slot_of_keys)
{
    ck_assert_uint_eq(fence__crc16("123456789", 9), 0x31C3);
    const char *keys[] = {"foo", "fence:{abc}", "fence:{abc}:token", "{user1000}.following",
                          "a{}b", "x{}{y}", "{", "}{a}", "fence:{a{b}c}", "", "plain-name"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        long long want = cmd_int(shared_ports[0], "CLUSTER KEYSLOT %s", keys[i]);
        ck_assert_msg(fence__key_slot(keys[i], strlen(keys[i])) == want, "%s: %d, Redis %lld",
                      keys[i], fence__key_slot(keys[i], strlen(keys[i])), want);
    }
    ck_assert_int_eq(fence__key_slot("fence:{abc}", 11), fence__key_slot("x{abc}:released", 15));
}
END_TEST

/* 200 names through each node in turn as the seed. */
START_TEST(any_seed_many_names)
{
    enum { N = 200 };
    static uint64_t last[N];
    for (int seed = 0; seed < 3; seed++) {
        fence_client *c = open_port(shared_ports[seed], FENCE_HEARTBEAT_THREAD);
        fence_client *other = open_port(shared_ports[(seed + 1) % 3], FENCE_HEARTBEAT_THREAD);
        int per_master[3] = {0, 0, 0};
        for (int i = 0; i < N; i++) {
            char name[32], key[64];
            snprintf(name, sizeof name, "spread-%d", i);
            snprintf(key, sizeof key, "fence:{%s}", name);
            fence_lease *l = lu_acquire_ok(c, name, 5000, 0);
            ck_assert_msg(fence_lease_token(l) > last[i], "%s: token %llu after %llu", name,
                          (unsigned long long)fence_lease_token(l), (unsigned long long)last[i]);
            last[i] = fence_lease_token(l);
            fence_lease *l2 = NULL;
            EXPECT_RC(fence_try_acquire(other, name, 5000, &l2), FENCE_BUSY, other);
            EXPECT_RC(fence_renew(l), FENCE_OK, c);
            uint64_t t = 0;
            EXPECT_RC(fence_token_last(other, name, &t), FENCE_OK, other);
            ck_assert_uint_eq(t, last[i]);
            int owner = slot_owner(shared_ports[0], fence__key_slot(key, strlen(key)));
            for (int m = 0; m < 3; m++) {
                per_master[m] += owner == shared_ports[m];
            }
            EXPECT_RC(fence_release(l), FENCE_OK, c);
        }
        for (int m = 0; m < 3; m++) {
            ck_assert_msg(per_master[m] >= 30, "master %d served only %d names", m, per_master[m]);
        }
        fence_client_close(other);
        fence_client_close(c);
    }
}
END_TEST

/* 300 leases over 3 nodes kept across several TTLs; one round trip per
 * node per pass (thread mode), and exactly 3 for one manual pass. */
START_TEST(heartbeat_one_round_trip_per_node)
{
    enum { N = 300 };
    static fence_lease *ls[N];
    fence_client *c = open_port(shared_ports[1], FENCE_HEARTBEAT_THREAD);
    lu_lost lost;
    lu_lost_init(&lost);
    for (int i = 0; i < N; i++) {
        ls[i] = lu_acquire_cb(c, tu_name("hb"), 300, 0, 0, &lost);
    }
    tu_sleep_ms(1500); /* five TTLs */
    ck_assert_int_eq(atomic_load(&lost.calls), 0);
    for (int i = 0; i < N; i++) {
        ck_assert(!fence_lease_lost(ls[i]));
    }
    uint64_t rt = atomic_load(&c->iss->rd.cl->hb_round_trips);
    uint64_t nv = atomic_load(&c->iss->rd.cl->hb_node_visits);
    ck_assert_msg(rt > 0 && rt == nv, "%llu round trips for %llu node visits",
                  (unsigned long long)rt, (unsigned long long)nv);
    for (int i = 0; i < N; i++) {
        EXPECT_RC(fence_release(ls[i]), FENCE_OK, c);
    }
    fence_client_close(c);

    c = open_port(shared_ports[2], FENCE_HEARTBEAT_MANUAL);
    for (int i = 0; i < N; i++) {
        ls[i] = lu_acquire_cb(c, tu_name("hbm"), 3000, 100, 0, NULL);
    }
    tu_sleep_ms(120);
    int64_t next = 0;
    EXPECT_RC(fence_heartbeat_run(c, &next), FENCE_OK, c);
    ck_assert_uint_eq(atomic_load(&c->iss->rd.cl->hb_last_nodes), 3);
    ck_assert_uint_eq(atomic_load(&c->iss->rd.cl->hb_last_round_trips), 3);
    fence_metrics m;
    fence_client_metrics(c, &m);
    ck_assert_uint_eq(m.renew_ok, N);
    for (int i = 0; i < N; i++) {
        EXPECT_RC(fence_release(ls[i]), FENCE_OK, c);
    }
    fence_client_close(c);
}
END_TEST

typedef struct waiter {
    fence_client *c;
    const char *name;
    int rc;
    int64_t got_ms;
} waiter;

static void *wait_main(void *arg)
{
    waiter *w = arg;
    fence_lease_options lo;
    fence_lease_options_init(&lo, 5000);
    lo.wait_ms = 5000;
    fence_lease *l = NULL;
    w->rc = fence_acquire(w->c, w->name, &lo, &l);
    w->got_ms = tu_now_ms();
    if (l != NULL) {
        fence_release(l);
    }
    return NULL;
}

/* A release wakes a waiter of another client (seeded at another node) at
 * once: pub/sub, not the 1 s safety poll or the holder's 10 s TTL; and the
 * release message reaches subscribers on every master, not only the
 * slot's (so a waiter on any node hears it). */
START_TEST(release_wakes_waiter)
{
    fence_client *holder = open_port(shared_ports[0], FENCE_HEARTBEAT_THREAD);
    fence_client *wc = open_port(shared_ports[2], FENCE_HEARTBEAT_THREAD);
    for (int k = 0; k < 3; k++) {
        const char *name = tu_name("wake");
        fence_lease *l = lu_acquire_ok(holder, name, 10000, 0);
        waiter w = {wc, name, -1, 0};
        pthread_t t;
        pthread_create(&t, NULL, wait_main, &w);
        tu_sleep_ms(300);
        /* Subscribers on every master, the slot's and the others. */
        redisContext *subs[3];
        char channel[128];
        snprintf(channel, sizeof channel, "fence:{%s}:released", name);
        for (int m = 0; m < 3; m++) {
            subs[m] = lu_connect(shared_ports[m]);
            redisReply *r = redisCommand(subs[m], "SUBSCRIBE %s", channel);
            ck_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
            freeReplyObject(r);
        }
        int64_t released = tu_now_ms();
        EXPECT_RC(fence_release(l), FENCE_OK, holder);
        pthread_join(t, NULL);
        ck_assert_int_eq(w.rc, FENCE_OK);
        ck_assert_msg(w.got_ms - released < 200, "woken after %lld ms",
                      (long long)(w.got_ms - released));
        for (int m = 0; m < 3; m++) { /* PUBLISH is broadcast over the cluster bus */
            redisReply *r = NULL;
            ck_assert_msg(redisGetReply(subs[m], (void **)&r) == REDIS_OK && r != NULL &&
                          r->type == REDIS_REPLY_ARRAY && r->elements == 3,
                          "no release message on master %d", shared_ports[m]);
            freeReplyObject(r);
            redisFree(subs[m]);
        }
    }
    fence_client_close(wc);
    fence_client_close(holder);
}
END_TEST

/* Three names whose keys share one slot, into names (32 bytes each). */
static int same_slot_names(char names[3][32])
{
    int slot = -1, found = 0;
    for (int i = 0; found < 3; i++) {
        char key[64];
        snprintf(names[found], 32, "mig-%d-%d", (int)getpid(), i);
        snprintf(key, sizeof key, "fence:{%s}", names[found]);
        int s = fence__key_slot(key, strlen(key));
        if (slot < 0) {
            slot = s;
        }
        found += s == slot;
    }
    return slot;
}

static void migrate_name(int src, int dst, const char *name)
{
    redisContext *r = lu_connect(src);
    char k1[64], k2[64];
    snprintf(k1, sizeof k1, "fence:{%s}", name);
    snprintf(k2, sizeof k2, "fence:{%s}:token", name);
    redisReply *rep = redisCommand(r, "MIGRATE 127.0.0.1 %d %b 0 5000 KEYS %s %s", dst, "", (size_t)0,
                                   k1, k2);
    ck_assert_msg(rep != NULL && rep->type != REDIS_REPLY_ERROR, "MIGRATE: %s",
                  rep ? rep->str : r->errstr);
    freeReplyObject(rep);
    redisFree(r);
}

/* End slot's migration from src to dst (whose id is did): every key still
 * in the slot on src -- the test's own, and any other test's whose name
 * hashes there (200 names are spread over the slots: one may share it) --
 * is moved first, or "CLUSTER SETSLOT ... NODE" on src would refuse ("Can't
 * assign hashslot ... while I still hold keys"); then every node is told. */
static void finish_migration(int src, int dst, int slot, const char *did)
{
    redisContext *r = lu_connect(src);
    for (;;) {
        redisReply *keys = redisCommand(r, "CLUSTER GETKEYSINSLOT %d 100", slot);
        ck_assert(keys != NULL && keys->type == REDIS_REPLY_ARRAY);
        size_t n = keys->elements;
        for (size_t i = 0; i < n; i++) {
            redisReply *rep = redisCommand(r, "MIGRATE 127.0.0.1 %d %s 0 5000", dst,
                                           keys->element[i]->str);
            ck_assert_msg(rep != NULL && rep->type != REDIS_REPLY_ERROR, "MIGRATE %s: %s",
                          keys->element[i]->str, rep ? rep->str : r->errstr);
            freeReplyObject(rep);
        }
        freeReplyObject(keys);
        if (n == 0) {
            break;
        }
    }
    redisFree(r);
    for (int p = 0; p < 3; p++) {
        redisContext *n = lu_connect(shared_ports[p]);
        lu_cmd_ok(n, "CLUSTER SETSLOT %d NODE %s", slot, did);
        redisFree(n);
    }
}

/* A slot migrated while three leases in it are held. */
START_TEST(slot_migration)
{
    char names[3][32], sid[41], did[41];
    int slot = same_slot_names(names);
    int src = slot_owner(shared_ports[0], slot);
    int dst = src == shared_ports[0] ? shared_ports[1] : shared_ports[0];
    node_id(src, sid);
    node_id(dst, did);
    fence_client *c = open_port(shared_ports[2], FENCE_HEARTBEAT_MANUAL);
    fence_lease *l[3];
    uint64_t tok[3];
    for (int i = 0; i < 3; i++) {
        l[i] = lu_acquire_cb(c, names[i], 2000, 100, 0, NULL);
        tok[i] = fence_lease_token(l[i]);
    }
    redisContext *rs = lu_connect(src), *rd = lu_connect(dst);
    lu_cmd_ok(rd, "CLUSTER SETSLOT %d IMPORTING %s", slot, sid);
    lu_cmd_ok(rs, "CLUSTER SETSLOT %d MIGRATING %s", slot, did);
    migrate_name(src, dst, names[0]); /* partly moved: names[0] only */

    uint64_t ask0 = atomic_load(&c->iss->rd.cl->ask);
    EXPECT_RC(fence_renew(l[0]), FENCE_OK, c); /* ASK */
    EXPECT_RC(fence_renew(l[1]), FENCE_OK, c); /* still on the source */
    ck_assert_uint_gt(atomic_load(&c->iss->rd.cl->ask), ask0);
    tu_sleep_ms(120);
    int64_t next;
    uint64_t ok0 = lu_metrics(c).renew_ok;
    EXPECT_RC(fence_heartbeat_run(c, &next), FENCE_OK, c); /* TRYAGAIN, split, ASK */
    ck_assert_uint_eq(lu_metrics(c).renew_ok - ok0, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert(!fence_lease_lost(l[i]));
    }
    /* Another client: acquire of the moved, held name (ASK, then BUSY). */
    fence_client *c2 = open_port(shared_ports[0], FENCE_HEARTBEAT_THREAD);
    fence_lease *busy = NULL;
    EXPECT_RC(fence_try_acquire(c2, names[0], 2000, &busy), FENCE_BUSY, c2);
    ck_assert_uint_gt(atomic_load(&c2->iss->rd.cl->ask), 0);
    EXPECT_RC(fence_release(l[0]), FENCE_OK, c); /* ASK */
    /* Free now, but its counter is on the target and its owner key on
     * neither: a two-key script there is TRYAGAIN until the migration
     * ends; the call gives up within its bound, naming the reply. */
    int64_t t0 = tu_now_ms();
    EXPECT_RC(fence_try_acquire(c2, names[0], 2000, &busy), FENCE_ECONN, c2);
    ck_assert_int_lt(tu_now_ms() - t0, 3000);
    ck_assert_msg(strstr(fence_client_errmsg(c2), "TRYAGAIN") != NULL, "%s",
                  fence_client_errmsg(c2));
    fence_client_close(c2);
    l[0] = NULL;

    migrate_name(src, dst, names[1]);
    migrate_name(src, dst, names[2]);
    finish_migration(src, dst, slot, did);
    uint64_t moved0 = atomic_load(&c->iss->rd.cl->moved);
    tu_sleep_ms(120);
    ok0 = lu_metrics(c).renew_ok;
    EXPECT_RC(fence_heartbeat_run(c, &next), FENCE_OK, c); /* MOVED */
    ck_assert_uint_eq(lu_metrics(c).renew_ok - ok0, 2);
    EXPECT_RC(fence_renew(l[1]), FENCE_OK, c);
    ck_assert_uint_gt(atomic_load(&c->iss->rd.cl->moved), moved0);
    ck_assert_int_eq(slot_owner(shared_ports[0], slot), dst);
    for (int i = 0; i < 3; i++) {
        if (l[i] != NULL) {
            ck_assert(!fence_lease_lost(l[i]));
            EXPECT_RC(fence_release(l[i]), FENCE_OK, c);
        }
        l[i] = lu_acquire_cb(c, names[i], 2000, 100, 0, NULL);
        ck_assert_uint_gt(fence_lease_token(l[i]), tok[i]);
        EXPECT_RC(fence_release(l[i]), FENCE_OK, c);
    }
    redisFree(rs);
    redisFree(rd);
    fence_client_close(c);
}
END_TEST

/* The replica of master port mp among ports (ROLE), 0 if none. */
static int replica_of(const int *ports, int mp)
{
    for (int i = 0; i < 6; i++) {
        redisContext *r = lu_connect(ports[i]);
        redisReply *rep = redisCommand(r, "ROLE");
        int is = rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements >= 3 &&
                 strcmp(rep->element[0]->str, "slave") == 0 &&
                 rep->element[2]->integer == mp;
        freeReplyObject(rep);
        redisFree(r);
        if (is) {
            return ports[i];
        }
    }
    return 0;
}

static int dir_of(const int *ports, int port)
{
    for (int i = 0; i < 6; i++) {
        if (ports[i] == port) {
            return i + 1;
        }
    }
    return 0;
}

/* A name whose slot the master mp serves (the set's view from any), into
 * out (64 bytes). */
static const char *name_on(int any, int mp, const char *base, char *out)
{
    for (;;) {
        snprintf(out, 64, "%s", tu_name(base));
        char key[128];
        snprintf(key, sizeof key, "fence:{%s}", out);
        if (slot_owner(any, fence__key_slot(key, strlen(key))) == mp) {
            return out;
        }
    }
}

/* Kill a master: its replica is promoted; the heartbeat and the next
 * acquire follow, a lease that cannot be renewed is lost on time.  Then
 * kill the promoted one (no replica left): CLUSTERDOWN, bounded. */
START_TEST(failover_then_clusterdown)
{
    lu_set s;
    int ports[6];
    lu_set_start(&s, "cluster", NULL);
    read_ports(&s, ports);
    int victim = ports[0], live = ports[1], rep = replica_of(ports, victim);
    ck_assert_int_gt(rep, 0);
    fence_client *c = open_port(live, FENCE_HEARTBEAT_THREAD);
    lu_lost lv, ll;
    lu_lost_init(&lv);
    lu_lost_init(&ll);
    char bv[64], bl[64];
    const char *nv = name_on(live, victim, "fo-v", bv), *nl = name_on(live, live, "fo-l", bl);
    fence_lease *a = lu_acquire_cb(c, nv, 1000, 0, 0, &lv);
    /* b's node stays up, but the whole cluster answers CLUSTERDOWN from
     * the victim's FAIL until its replica is promoted: b's TTL spans it. */
    fence_lease *b = lu_acquire_cb(c, nl, 5000, 0, 0, &ll);
    char who[16];
    snprintf(who, sizeof who, "node%d", dir_of(ports, victim));
    int64_t killed = tu_now_ms();
    lu_set_ctl(&s, who, "kill");
    ck_assert_msg(lu_wait_master(rep, 10000), "replica %d not promoted", rep);
    /* a: renewed on the promoted replica, or lost on time (never late). */
    if (atomic_load(&lv.calls) > 0 || fence_lease_lost(a)) {
        ck_assert_int_le(tu_now_ms() - killed, 10000);
    }
    tu_sleep_ms(1500);
    ck_assert_int_eq(atomic_load(&ll.calls), 0);
    ck_assert(!fence_lease_lost(b));
    fence_lease *a2 = NULL;
    int64_t t0 = tu_now_ms();
    int rc = fence_try_acquire(c, nv, 1000, &a2);
    for (int i = 0; rc == FENCE_BUSY && i < 30; i++) { /* a's key may live out its TTL */
        tu_sleep_ms(100);
        rc = fence_try_acquire(c, nv, 1000, &a2);
    }
    if (fence_lease_lost(a)) {
        EXPECT_RC(rc, FENCE_OK, c);
        EXPECT_RC(fence_release(a2), FENCE_OK, c);
    } else {
        ck_assert_int_eq(rc, FENCE_BUSY); /* a is still held: renewed on the promoted node */
    }
    ck_assert_int_le(tu_now_ms() - t0, 5000);
    fence_release(a);

    /* The promoted node dies too: no replica left, the cluster is down. */
    snprintf(who, sizeof who, "node%d", dir_of(ports, rep));
    lu_set_ctl(&s, who, "kill");
    for (int i = 0; i < 100; i++) {
        redisContext *r = lu_connect(live);
        redisReply *info = redisCommand(r, "CLUSTER INFO");
        int down = info != NULL && strstr(info->str, "cluster_state:fail") != NULL;
        freeReplyObject(info);
        redisFree(r);
        if (down) {
            break;
        }
        tu_sleep_ms(100);
    }
    fence_lease *l3 = NULL;
    t0 = tu_now_ms();
    EXPECT_RC(fence_try_acquire(c, tu_name("down"), 1000, &l3), FENCE_ECONN, c);
    int64_t took = tu_now_ms() - t0;
    ck_assert_msg(took < 4000, "gave up after %lld ms", (long long)took);
    ck_assert_msg(strstr(fence_client_errmsg(c), "CLUSTERDOWN") != NULL ||
                  strstr(fence_client_errmsg(c), "cluster node") != NULL,
                  "%s", fence_client_errmsg(c));
    fence_release(b);
    fence_client_close(c);
    lu_set_stop(&s);
}
END_TEST

START_TEST(bad_input)
{
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/3", shared_ports[0]);
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url;
    fence_client *c = NULL;
    EXPECT_RC(fence_client_open(&c, &o), FENCE_EINVAL, c);
    ck_assert_msg(strstr(fence_client_errmsg(c), "Redis Cluster") != NULL &&
                  strstr(fence_client_errmsg(c), "database 0") != NULL, "%s",
                  fence_client_errmsg(c));
    fence_client_close(c);
    lu_set closed;
    lu_set_start(&closed, "solo", NULL);
    int port = closed.master;
    lu_set_stop(&closed);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    c = NULL;
    EXPECT_RC(fence_client_open(&c, &o), FENCE_ECONN, c);
    ck_assert_msg(strstr(fence_client_errmsg(c), "refused") != NULL, "%s",
                  fence_client_errmsg(c));
    fence_client_close(c);
}
END_TEST


/* MIGRATE the keys of name given as suffixes ("", ":token", ":info"). */
static void migrate_keys(int src, int dst, const char *name, const char *s1, const char *s2)
{
    redisContext *r = lu_connect(src);
    char k1[96], k2[96];
    snprintf(k1, sizeof k1, "fence:{%s}%s", name, s1);
    snprintf(k2, sizeof k2, "fence:{%s}%s", name, s2 != NULL ? s2 : "");
    redisReply *rep = s2 != NULL ? redisCommand(r, "MIGRATE 127.0.0.1 %d %b 0 5000 KEYS %s %s",
                                                dst, "", (size_t)0, k1, k2)
                                 : redisCommand(r, "MIGRATE 127.0.0.1 %d %s 0 5000", dst, k1);
    ck_assert_msg(rep != NULL && rep->type != REDIS_REPLY_ERROR, "MIGRATE: %s",
                  rep ? rep->str : r->errstr);
    freeReplyObject(rep);
    redisFree(r);
}

/* A name to migrate: its slot, the node that has it (src) and another
 * master (dst), with their ids. */
typedef struct mig {
    char name[64];
    int slot, src, dst;
    char sid[41], did[41];
} mig;

static void mig_plan(mig *m, const char *base)
{
    char key[96];
    snprintf(m->name, sizeof m->name, "%s", tu_name(base));
    snprintf(key, sizeof key, "fence:{%s}", m->name);
    m->slot = fence__key_slot(key, strlen(key));
    m->src = slot_owner(shared_ports[0], m->slot);
    m->dst = m->src == shared_ports[0] ? shared_ports[1] : shared_ports[0];
    node_id(m->src, m->sid);
    node_id(m->dst, m->did);
}

/* A client on the third master, with these heartbeat mode and timeouts. */
static fence_client *open_third(int mode, int timeout_ms)
{
    fence_client_options o;
    fence_client_options_init(&o);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", shared_ports[2]);
    o.url = url;
    o.heartbeat_mode = mode;
    o.io_timeout_ms = timeout_ms;
    o.connect_timeout_ms = timeout_ms;
    return lu_open_opts(&o);
}

/* A lease with a holder description whose ":info" key has already moved
 * in a slot migration: the scripts declare it, so Redis answers TRYAGAIN
 * (or ASK) before running them -- never a script aborted midway ("non
 * local key"). */
START_TEST(info_migration)
{
    mig m;
    mig_plan(&m, "infomig");
    const char *name = m.name;
    int slot = m.slot, src = m.src, dst = m.dst;
    const char *sid = m.sid, *did = m.did;
    fence_client *c = open_third(FENCE_HEARTBEAT_MANUAL, 300);
    fence_lease_options lo;
    fence_lease_options_init(&lo, 5000);
    lo.renew_every_ms = 100;
    lo.holder_info = "migrating holder";
    fence_lease *l = NULL;
    EXPECT_RC(fence_acquire(c, name, &lo, &l), FENCE_OK, c);
    redisContext *rs = lu_connect(src), *rd = lu_connect(dst);
    lu_cmd_ok(rd, "CLUSTER SETSLOT %d IMPORTING %s", slot, sid);
    lu_cmd_ok(rs, "CLUSTER SETSLOT %d MIGRATING %s", slot, did);
    migrate_keys(src, dst, name, ":info", NULL); /* the description only */

    int rc = fence_renew(l);
    ck_assert_msg(rc == FENCE_ECONN && strstr(fence_client_errmsg(c), "TRYAGAIN") != NULL,
                  "renew: %d %s", rc, fence_client_errmsg(c));
    tu_sleep_ms(120);
    uint64_t try0 = atomic_load(&c->iss->rd.cl->tryagain);
    int64_t next;
    rc = fence_heartbeat_run(c, &next);
    ck_assert_msg(rc != FENCE_EPROTO, "heartbeat: %s", fence_client_errmsg(c));
    ck_assert_uint_gt(atomic_load(&c->iss->rd.cl->tryagain), try0);
    ck_assert(!fence_lease_lost(l));

    migrate_keys(src, dst, name, "", ":token"); /* all moved: ASK */
    EXPECT_RC(fence_renew(l), FENCE_OK, c);
    tu_sleep_ms(120);
    uint64_t ok0 = lu_metrics(c).renew_ok;
    EXPECT_RC(fence_heartbeat_run(c, &next), FENCE_OK, c);
    ck_assert_uint_eq(lu_metrics(c).renew_ok - ok0, 1);
    lu_cmd_ok(rd, "ASKING"); /* the slot is importing there */
    redisReply *pt = redisCommand(rd, "PTTL fence:{%s}:info", name);
    ck_assert(pt != NULL && pt->type == REDIS_REPLY_INTEGER && pt->integer > 4000);
    freeReplyObject(pt);
    EXPECT_RC(fence_release(l), FENCE_OK, c); /* ASK; both keys deleted there */
    lu_cmd_ok(rd, "ASKING");
    redisReply *ex = redisCommand(rd, "EXISTS fence:{%s}:info", name);
    ck_assert(ex != NULL && ex->type == REDIS_REPLY_INTEGER && ex->integer == 0);
    freeReplyObject(ex);
    finish_migration(src, dst, slot, did);
    redisFree(rs);
    redisFree(rd);
    fence_client_close(c);
}
END_TEST

/* CONFIG SET name value on the six shared nodes. */
static void config_all(const char *name, const char *value)
{
    for (int i = 0; i < 6; i++) {
        redisContext *r = lu_connect(shared_ports[i]);
        lu_cmd_ok(r, "CONFIG SET %s %s", name, value);
        redisFree(r);
    }
}

/* The pid of shared node port. */
static pid_t shared_pid(int port)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/node%d/redis.pid", shared.dir, dir_of(shared_ports, port));
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "no %s", path);
    long pid = 0;
    ck_assert_int_eq(fscanf(f, "%ld", &pid), 1);
    fclose(f);
    return (pid_t)pid;
}

/* A guard process: when the test lets go of *fd (guard_end), or dies on a
 * failed check, it sends SIGCONT to pid and restores cluster-node-timeout
 * 500 on every node.  Forked before any thread of the test exists. */
static pid_t guard_start(pid_t pid, int *fd)
{
    int p[2];
    ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
    pid_t g = fork();
    ck_assert_int_ge(g, 0);
    if (g == 0) {
        close(p[1]);
        char ch;
        while (read(p[0], &ch, 1) != 0) {
        }
        kill(pid, SIGCONT);
        usleep(300000); /* pings exchanged again before the timeout drops */
        for (int i = 0; i < 6; i++) {
            struct timeval tv = {5, 0};
            redisContext *r = redisConnectWithTimeout("127.0.0.1", shared_ports[i], tv);
            if (r != NULL && r->err == 0) {
                redisReply *rep = redisCommand(r, "CONFIG SET cluster-node-timeout 500");
                if (rep != NULL) {
                    freeReplyObject(rep);
                }
            }
            if (r != NULL) {
                redisFree(r);
            }
        }
        _exit(0);
    }
    close(p[0]);
    *fd = p[1];
    return g;
}

static void guard_end(pid_t g, int fd)
{
    close(fd);
    int st = 0;
    waitpid(g, &st, 0);
}

/* A master frozen (SIGSTOP, no failover: cluster-node-timeout raised):
 * a lease on a healthy master stays held for several TTLs, the one on the
 * frozen master is lost on time, and no pass outlasts the earliest
 * validity. */
START_TEST(hung_master)
{
    int victim = slot_owner(shared_ports[0], 0), healthy = 0;
    for (int i = 0; i < 3 && healthy == 0; i++) {
        int m = slot_owner(shared_ports[0], i * 6000 + 5500);
        healthy = m != victim ? m : 0;
    }
    ck_assert_int_gt(healthy, 0);
    config_all("cluster-node-timeout", "60000");
    int gfd = -1;
    pid_t g = guard_start(shared_pid(victim), &gfd);
    fence_client *c = open_port(healthy, FENCE_HEARTBEAT_THREAD);
    lu_lost la, lb;
    lu_lost_init(&la);
    lu_lost_init(&lb);
    char ba[64], bb[64];
    const char *na = name_on(healthy, victim, "hung-a", ba);
    const char *nb = name_on(healthy, healthy, "hung-b", bb);
    fence_lease *a = lu_acquire_cb(c, na, 1000, 0, 0, &la);
    fence_lease *b = lu_acquire_cb(c, nb, 1500, 0, 0, &lb);
    tu_sleep_ms(400); /* a pass or two: both nodes connected */
    ck_assert_int_eq(kill(shared_pid(victim), SIGSTOP), 0);
    int64_t t0 = tu_now_ms();
    int64_t waited = lu_wait_lost(&la, 3000);
    ck_assert_int_eq(atomic_load(&la.calls), 1);
    ck_assert_int_eq(atomic_load(&la.reason), FENCE_ECONN);
    ck_assert_msg(tu_now_ms() - t0 <= 1000 + 300, "a lost after %lld ms (waited %lld)",
                  (long long)(tu_now_ms() - t0), (long long)waited);
    while (tu_now_ms() - t0 < 5000) { /* > 3 TTLs of b */
        tu_sleep_ms(100);
        ck_assert_msg(atomic_load(&lb.calls) == 0 && !fence_lease_lost(b),
                      "b lost after %lld ms: %s", (long long)(tu_now_ms() - t0),
                      fence_client_errmsg(c));
    }
    EXPECT_RC(fence_renew(b), FENCE_OK, c);
    guard_end(g, gfd);
    EXPECT_RC(fence_release(b), FENCE_OK, c);
    fence_release(a);
    fence_client_close(c);
}
END_TEST

/* A name starting with '}' would give its keys an empty hash tag. */
START_TEST(name_empty_tag)
{
    fence_client *c = open_port(shared_ports[0], FENCE_HEARTBEAT_THREAD);
    fence_lease *l = NULL;
    EXPECT_RC(fence_try_acquire(c, "}x", 1000, &l), FENCE_EINVAL, c);
    ck_assert_msg(strstr(fence_client_errmsg(c), "'}'") != NULL, "%s", fence_client_errmsg(c));
    uint64_t t = 0;
    EXPECT_RC(fence_token_last(c, "}x", &t), FENCE_EINVAL, c);
    l = lu_acquire_ok(c, "x}y", 1000, 0); /* a '}' later is fine: tag "x" */
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    fence_client_close(c);
}
END_TEST

/* MOVED / ASK replies: digits, slot 0..16383, port 1..65535. */
START_TEST(redirect_parser)
{
    fence__redirect rd;
    ck_assert_int_eq(fence__redirect_parse("MOVED 3999 127.0.0.1:6381", &rd), FENCE__RD_MOVED);
    ck_assert_int_eq(rd.slot, 3999);
    ck_assert_int_eq(rd.port, 6381);
    ck_assert_str_eq(rd.host, "127.0.0.1");
    ck_assert_int_eq(fence__redirect_parse("ASK 16383 ::1:7000", &rd), FENCE__RD_ASK);
    ck_assert_str_eq(rd.host, "::1");
    ck_assert_int_eq(rd.port, 7000);
    ck_assert_int_eq(fence__redirect_parse("MOVED 0 :65535", &rd), FENCE__RD_MOVED);
    ck_assert_str_eq(rd.host, "");
    ck_assert_int_eq(rd.port, 65535);
    const char *bad[] = {"MOVED  :5", "MOVED 5 host:", "MOVED 5 host:0", "MOVED 5 host:65536",
                         "MOVED 5 host:-1", "MOVED 5 host:12x", "MOVED 16384 h:1",
                         "MOVED -1 h:1", "MOVED x h:1", "ASK 5 host", "MOVED 5",
                         "MOVED 99999999999999999999 h:1", "MOVED 5 h:4294967297"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(fence__redirect_parse(bad[i], &rd) == FENCE__RD_NONE, "%s", bad[i]);
    }
    ck_assert_int_eq(fence__redirect_parse("TRYAGAIN x", &rd), FENCE__RD_TRYAGAIN);
}
END_TEST

/* cluster-preferred-endpoint-type unknown-endpoint: CLUSTER SLOTS gives
 * nil hosts (the node asked) and MOVED an empty one (the node replying). */
START_TEST(unknown_endpoint)
{
    config_all("cluster-preferred-endpoint-type", "unknown-endpoint");
    fence_client *c = open_port(shared_ports[1], FENCE_HEARTBEAT_THREAD);
    int ok = c->iss->rd.cl->nnodes >= 3;
    for (int i = 0; i < 20 && ok; i++) {
        fence_lease *l = NULL;
        int rc = fence_try_acquire(c, tu_name("ue"), 1000, &l);
        ok = rc == FENCE_OK && fence_release(l) == FENCE_OK;
        if (!ok) {
            fprintf(stderr, "unknown_endpoint: %s\n", fence_client_errmsg(c));
        }
    }
    fence__redirect rd;
    fence__redirect_parse("MOVED 5 :1", &rd);
    int from = 1 % c->iss->rd.cl->nnodes;
    int to = fence__cluster_redirect(&c->iss->rd, &rd, from);
    ok = ok && to >= 0 && strcmp(c->iss->rd.cl->nodes[to].host, c->iss->rd.cl->nodes[from].host) == 0;
    fence_client_close(c);
    config_all("cluster-preferred-endpoint-type", "ip");
    ck_assert_msg(ok, "nodes %s", ok ? "" : "failed");
}
END_TEST

/* One caller's TRYAGAIN back-off blocks no other caller: a name whose slot
 * is being migrated with its counter moved and its owner key on neither
 * node answers TRYAGAIN (after ASK) until the call's budget runs out, the
 * call backing off between tries (25 ms << n); meanwhile other threads'
 * calls on the same client, to other slots, take their usual time.  (The
 * back-off used to sleep with the command lock held: every thread of the
 * client waited up to 800 ms.) */
typedef struct {
    fence_client *c;
    const char *name;
    int rc;
    int64_t took;
} tryagain_call;

static void *tryagain_thread(void *arg)
{
    tryagain_call *t = arg;
    fence_lease *l = NULL;
    int64_t t0 = tu_now_ms();
    t->rc = fence_try_acquire(t->c, t->name, 2000, &l);
    t->took = tu_now_ms() - t0;
    if (l != NULL) {
        fence_release(l);
    }
    return NULL;
}

START_TEST(tryagain_blocks_no_one)
{
    mig m;
    mig_plan(&m, "tryagain");
    const char *name = m.name;
    int slot = m.slot, src = m.src, dst = m.dst;
    const char *sid = m.sid, *did = m.did;
    fence_client *c = open_third(FENCE_HEARTBEAT_THREAD, 800);
    fence_lease *l = lu_acquire_cb(c, name, 2000, 0, 0, NULL); /* its counter, on src */
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    redisContext *rs = lu_connect(src), *rd = lu_connect(dst);
    lu_cmd_ok(rd, "CLUSTER SETSLOT %d IMPORTING %s", slot, sid);
    lu_cmd_ok(rs, "CLUSTER SETSLOT %d MIGRATING %s", slot, did);
    migrate_keys(src, dst, name, ":token", NULL);

    uint64_t try0 = atomic_load(&c->iss->rd.cl->tryagain);
    tryagain_call t = {c, name, -1, 0};
    pthread_t th;
    pthread_create(&th, NULL, tryagain_thread, &t);
    int64_t worst = 0, started = tu_now_ms();
    int calls = 0;
    while (tu_now_ms() - started < 1200) {
        char other[64];
        snprintf(other, sizeof other, "other-%d", calls++);
        int64_t t0 = tu_now_ms();
        fence_lease *ol = lu_acquire_cb(c, tu_name(other), 2000, 0, 0, NULL);
        EXPECT_RC(fence_release(ol), FENCE_OK, c);
        int64_t took = tu_now_ms() - t0;
        worst = took > worst ? took : worst;
        tu_sleep_ms(10);
    }
    pthread_join(th, NULL);
    fprintf(stderr, "tryagain_blocks_no_one: the TRYAGAIN call %d after %lld ms; %d other "
            "cycles meanwhile, the slowest %lld ms\n", t.rc, (long long)t.took, calls,
            (long long)worst);
    ck_assert_uint_gt(atomic_load(&c->iss->rd.cl->tryagain), try0);
    ck_assert_int_eq(t.rc, FENCE_ECONN);
    ck_assert_msg(t.took <= 1700, "the TRYAGAIN call took %lld ms (budget 1600)",
                  (long long)t.took);
    ck_assert_msg(worst < 150, "another thread's acquire+release took %lld ms", (long long)worst);
    redisFree(rs);
    redisFree(rd);
    finish_migration(src, dst, slot, did);
    fence_client_close(c);
}
END_TEST

static Suite *cluster_suite(void)
{
    Suite *s = suite_create("cluster");
    TCase *tc = tcase_create("shared");
    tcase_add_unchecked_fixture(tc, shared_start, shared_stop);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, slot_of_keys);
    tcase_add_test(tc, any_seed_many_names);
    tcase_add_test(tc, heartbeat_one_round_trip_per_node);
    tcase_add_test(tc, release_wakes_waiter);
    tcase_add_test(tc, slot_migration);
    tcase_add_test(tc, bad_input);
    tcase_add_test(tc, name_empty_tag);
    tcase_add_test(tc, redirect_parser);
    tcase_add_test(tc, unknown_endpoint);
    tcase_add_test(tc, info_migration);
    tcase_add_test(tc, tryagain_blocks_no_one);
    tcase_add_test(tc, hung_master);
    suite_add_tcase(s, tc);
    TCase *fo = tcase_create("failover");
    tcase_set_timeout(fo, 60);
    tcase_add_test(fo, failover_then_clusterdown);
    suite_add_tcase(s, fo);
    return s;
}

int main(void)
{
    return tu_run(cluster_suite());
}
