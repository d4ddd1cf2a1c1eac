/*
 * test_pg_issuer_fail.c -- the PostgreSQL issuer's guarantee rows
 * (docs/issuers.md), each provoked on servers of the test's own: an
 * immediate restart (leases survive with their expiry, tokens go on
 * rising), the server SIGSTOPped longer than the TTL (lost on time, the old
 * holder refused afterwards), failover to a synchronous standby
 * (scripts/pg-standby: pg_basebackup -R, synchronous_standby_names,
 * pg_ctl promote: no token repeats) and to an asynchronous one (tokens of
 * the replication gap are issued again: shown, and the raise that fixes it).
 */
#include "fence.h"
#include "fence_pg.h"
#include "issuerutil.h"
#include "leaseutil.h"

#include <libpq-fe.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------------ */

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static PGconn *conn_at(int port)
{
    char ci[128];
    snprintf(ci, sizeof ci, "host=127.0.0.1 port=%d user=postgres dbname=postgres", port);
    PGconn *c = PQconnectdb(ci);
    ck_assert_msg(PQstatus(c) == CONNECTION_OK, "port %d: %s", port, PQerrorMessage(c));
    return c;
}

static void install_at(int port)
{
    PGconn *c = conn_at(port);
    ck_assert_msg(fence_pg_install(c) == FENCE_OK, "fence_pg_install: %s", fence_pg_errmsg(c));
    PQfinish(c);
}

static const char *url_at(int port)
{
    static _Thread_local char buf[128];
    snprintf(buf, sizeof buf, "postgresql://postgres@127.0.0.1:%d/postgres", port);
    return buf;
}

static fence_client *client_at(int port, int timeout_ms)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url_at(port);
    o.connect_timeout_ms = timeout_ms;
    o.io_timeout_ms = timeout_ms;
    return lu_open_opts(&o);
}

/* A cluster of the test's own (scripts/pg-cluster): its folder and port. */
typedef struct {
    char dir[512];
    int port;
} cluster;

static void cluster_start(cluster *k, const char *tag)
{
    snprintf(k->dir, sizeof k->dir, "%s/%s-%d", tu_env("FENCE_TEST_SPAWN_DIR"), tag, (int)getpid());
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "%s start %s", tu_env("FENCE_TEST_PG_CLUSTER"), k->dir);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(fscanf(p, "%d", &k->port), 1);
    ck_assert_int_eq(pclose(p), 0);
    install_at(k->port);
}

static void cluster_stop(const cluster *k)
{
    run("%s stop %s", tu_env("FENCE_TEST_PG_CLUSTER"), k->dir);
}

/* SIGSTOP or SIGCONT the cluster's postmaster and all its children. */
static void cluster_signal(const cluster *k, int sig)
{
    char data[600];
    snprintf(data, sizeof data, "%s/data", k->dir);
    lu_pg_signal_cluster(data, sig);
}

static atomic_int lost_calls, lost_reason;
static atomic_llong lost_at_ms;
static void on_lost(fence_lease *l, int reason, void *user)
{
    (void)l;
    (void)user;
    atomic_store(&lost_reason, reason);
    atomic_store(&lost_at_ms, (long long)tu_now_ms());
    atomic_fetch_add(&lost_calls, 1);
}

/* ---- an immediate restart ------------------------------------------------------------ */

/* pg_ctl restart -m immediate (a crash of every server process): the
 * leases are rows, committed before their holders saw them, so they
 * survive with their expiry by the server's clock: a held lease with a
 * heartbeat is renewed on a new connection and never lost; one nobody
 * renews stays held until its expiry, then goes to the next holder with a
 * higher token. */
START_TEST(restart_immediate)
{
    cluster k;
    cluster_start(&k, "pgiss-restart");
    fence_client *a = client_at(k.port, 1000), *b = client_at(k.port, 1000);
    char held[96], idle[96], cyc[96];
    snprintf(held, sizeof held, "%s", tu_name("pg-restart-held"));
    snprintf(idle, sizeof idle, "%s", tu_name("pg-restart-idle"));
    snprintf(cyc, sizeof cyc, "%s", tu_name("pg-restart-cycle"));
    fence_lease_options lo;
    fence_lease_options_init(&lo, 3000);
    lo.on_lost = on_lost;
    atomic_store(&lost_calls, 0);
    fence_lease *lh = NULL, *li = NULL, *l = NULL;
    EXPECT_RC(fence_acquire(a, held, &lo, &lh), FENCE_OK, a);
    fence_lease_options io;
    fence_lease_options_init(&io, 2500);
    io.no_heartbeat = 1;
    EXPECT_RC(fence_acquire(a, idle, &io, &li), FENCE_OK, a);
    uint64_t last = 0;
    for (int i = 0; i < 10; i++) {
        EXPECT_RC(fence_try_acquire(b, cyc, 2000, &l), FENCE_OK, b);
        last = fence_lease_token(l);
        EXPECT_RC(fence_release(l), FENCE_OK, b);
    }
    ck_assert_int_eq(run("runuser -u postgres -- %s/pg_ctl -D %s/data -m immediate -w -t 60 "
                         "restart > /dev/null 2>&1", tu_env("FENCE_TEST_PG_BINDIR"), k.dir), 0);
    /* The idle lease is still held by its row until its expiry. */
    fence_status st = fence_try_acquire(b, idle, 2000, &l);
    if (st == FENCE_ECONN) {
        st = fence_try_acquire(b, idle, 2000, &l); /* the first call may meet the restart */
    }
    EXPECT_RC(st, FENCE_BUSY, b);
    tu_sleep_ms(2600);
    EXPECT_RC(fence_try_acquire(b, idle, 2000, &l), FENCE_OK, b);
    ck_assert_uint_gt(fence_lease_token(l), fence_lease_token(li));
    EXPECT_RC(fence_release(l), FENCE_OK, b);
    ck_assert_int_eq(fence_release(li), FENCE_LOST);
    /* The held one: renewed all along, never lost. */
    ck_assert_int_eq(atomic_load(&lost_calls), 0);
    EXPECT_RC(fence_renew(lh), FENCE_OK, a);
    ck_assert_int_gt(fence_lease_valid_ms(lh), 2000);
    /* Tokens go on rising. */
    EXPECT_RC(fence_try_acquire(b, cyc, 2000, &l), FENCE_OK, b);
    ck_assert_uint_eq(fence_lease_token(l), last + 1);
    EXPECT_RC(fence_release(l), FENCE_OK, b);
    EXPECT_RC(fence_release(lh), FENCE_OK, a);
    fence_metrics m = lu_metrics(a);
    ck_assert_uint_ge(m.reconnects, 1);
    fence_client_close(a);
    fence_client_close(b);
    cluster_stop(&k);
}
END_TEST

/* ---- the server paused --------------------------------------------------------------------- */

/* Every server process SIGSTOPped for 3 TTLs: the holder is told it lost
 * the lease (FENCE_ECONN) when its validity ends; continued, the server's
 * own clock has expired the row: the old holder's renewal is refused, the
 * next holder gets a higher token. */
START_TEST(server_paused_past_ttl)
{
    cluster k;
    cluster_start(&k, "pgiss-pause");
    fence_client *a = client_at(k.port, 300);
    const char *name = tu_name("pg-pause");
    char nm[96];
    snprintf(nm, sizeof nm, "%s", name);
    fence_lease_options lo;
    fence_lease_options_init(&lo, 600);
    lo.on_lost = on_lost;
    atomic_store(&lost_calls, 0);
    fence_lease *l = NULL;
    EXPECT_RC(fence_acquire(a, nm, &lo, &l), FENCE_OK, a);
    uint64_t old = fence_lease_token(l);
    char holder[FENCE_HOLDER_LEN + 1];
    snprintf(holder, sizeof holder, "%s", fence_lease_holder(l));
    int64_t stopped = tu_now_ms();
    cluster_signal(&k, SIGSTOP);
    while (atomic_load(&lost_calls) == 0 && tu_now_ms() - stopped < 3000) {
        tu_sleep_ms(10);
    }
    int64_t lost_after = atomic_load(&lost_at_ms) - stopped;
    tu_sleep_ms(1800 - (tu_now_ms() - stopped));
    cluster_signal(&k, SIGCONT);
    ck_assert_int_eq(atomic_load(&lost_calls), 1);
    ck_assert_int_eq(atomic_load(&lost_reason), FENCE_ECONN);
    /* Lost when the validity ran out: before the server's expiry (at most
     * one TTL after the last renewal, which is at most a TTL before the
     * stop). */
    ck_assert_msg(lost_after <= 600 + 100, "lost %lld ms after the stop", (long long)lost_after);
    ck_assert_int_eq(fence_renew(l), FENCE_LOST);
    PGconn *s = conn_at(k.port);
    ck_assert_int_eq(lu_pg_num(s, "SELECT (fence.lease_renew(ARRAY['%s'], ARRAY['%s'], ARRAY[%llu],"
                             " ARRAY[600]::bigint[]))[1]::int", nm, holder,
                          (unsigned long long)old),
                     0);
    PQfinish(s);
    fence_client *b = client_at(k.port, 1000);
    EXPECT_RC(fence_try_acquire(b, nm, 1000, &l), FENCE_OK, b);
    ck_assert_uint_gt(fence_lease_token(l), old);
    EXPECT_RC(fence_release(l), FENCE_OK, b);
    fence_client_close(b);
    fence_client_close(a);
    cluster_stop(&k);
}
END_TEST

/* ---- failover ---------------------------------------------------------------------------- */

typedef struct {
    char base[512];
    int primary, standby;
} pair;

static void pair_start(pair *p, const char *mode)
{
    snprintf(p->base, sizeof p->base, "%s/pgiss-%s-%d", tu_env("FENCE_TEST_SPAWN_DIR"), mode,
             (int)getpid());
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "scripts/pg-standby start %s %s", p->base, mode);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fscanf(f, "%d %d", &p->primary, &p->standby), 2);
    ck_assert_int_eq(pclose(f), 0);
    install_at(p->primary);
}

static void pair_do(const pair *p, const char *what)
{
    ck_assert_msg(run("scripts/pg-standby %s %s", what, p->base) == 0, "pg-standby %s failed",
                  what);
}

/* Wait until the standby has replayed everything the primary wrote. */
static void caught_up(const pair *p)
{
    PGconn *pc = conn_at(p->primary), *sc = conn_at(p->standby);
    PGresult *r = PQexec(pc, "SELECT pg_current_wal_lsn()::text");
    char lsn[64];
    snprintf(lsn, sizeof lsn, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    for (int i = 0; i < 300; i++) {
        if (lu_pg_num(sc, "SELECT (pg_last_wal_replay_lsn() >= '%s'::pg_lsn)::int", lsn) == 1) {
            break;
        }
        tu_sleep_ms(10);
    }
    ck_assert_int_eq(lu_pg_num(sc, "SELECT (pg_last_wal_replay_lsn() >= '%s'::pg_lsn)::int", lsn), 1);
    PQfinish(pc);
    PQfinish(sc);
}

/* n acquire+release cycles of name on c: the last token. */
static uint64_t cycles(fence_client *c, const char *name, int n)
{
    uint64_t last = 0;
    for (int i = 0; i < n; i++) {
        fence_lease *l = NULL;
        EXPECT_RC(fence_try_acquire(c, name, 1000, &l), FENCE_OK, c);
        ck_assert_uint_gt(fence_lease_token(l), last);
        last = fence_lease_token(l);
        EXPECT_RC(fence_release(l), FENCE_OK, c);
    }
    return last;
}

/* Synchronous standby: every token a holder saw was flushed on the standby
 * before the primary answered; the primary crashes (-m immediate), the
 * standby is promoted, and its first token is above every token issued --
 * the counter is exactly the last one.  A lease held at the crash stays
 * held on the promoted standby until its expiry. */
START_TEST(failover_sync_standby)
{
    pair p;
    pair_start(&p, "sync");
    fence_client *a = client_at(p.primary, 1000);
    char name[96], held[96];
    snprintf(name, sizeof name, "%s", tu_name("pg-sync"));
    snprintf(held, sizeof held, "%s", tu_name("pg-sync-held"));
    uint64_t last = cycles(a, name, 30);
    fence_lease_options lo;
    fence_lease_options_init(&lo, 1500);
    lo.no_heartbeat = 1;
    fence_lease *lh = NULL;
    EXPECT_RC(fence_acquire(a, held, &lo, &lh), FENCE_OK, a);
    uint64_t held_token = fence_lease_token(lh);
    pair_do(&p, "stop-primary");
    pair_do(&p, "promote");
    fence_client *b = client_at(p.standby, 1000);
    fence_lease_info li;
    EXPECT_RC(fence_lease_inspect_info(b, name, &li), FENCE_OK, b);
    ck_assert_uint_eq(li.last_token, last);
    fence_lease *l = NULL;
    EXPECT_RC(fence_try_acquire(b, name, 1000, &l), FENCE_OK, b);
    ck_assert_uint_eq(fence_lease_token(l), last + 1);
    EXPECT_RC(fence_release(l), FENCE_OK, b);
    EXPECT_RC(fence_try_acquire(b, held, 1000, &l), FENCE_BUSY, b);
    fence_lease_options wo;
    fence_lease_options_init(&wo, 1000);
    wo.wait_ms = 3000;
    EXPECT_RC(fence_acquire(b, held, &wo, &l), FENCE_OK, b);
    ck_assert_uint_gt(fence_lease_token(l), held_token);
    EXPECT_RC(fence_release(l), FENCE_OK, b);
    fence_client_close(b);
    fence_client_close(a); /* its release of the old lease fails: the primary is gone */
    pair_do(&p, "stop");
}
END_TEST

/* Asynchronous standby: the primary answers before the standby has the
 * commit.  With the standby's WAL receiver paused, the primary issues
 * tokens the standby never gets; after the crash and the promotion the
 * counter is the last replicated one, and the next tokens repeat those of
 * the gap (shown here, docs/issuers.md).  fence token raise to the last
 * token the old primary issued (or any floor above it) puts the counter
 * past them again. */
START_TEST(failover_async_standby)
{
    pair p;
    pair_start(&p, "async");
    fence_client *a = client_at(p.primary, 1000);
    char name[96];
    snprintf(name, sizeof name, "%s", tu_name("pg-async"));
    uint64_t replicated = cycles(a, name, 10);
    caught_up(&p);
    pair_do(&p, "pause-receiver");
    uint64_t issued = cycles(a, name, 10);
    ck_assert_uint_eq(issued, replicated + 10);
    pair_do(&p, "stop-primary");
    /* What the receiver had not written (in its socket) is lost with it. */
    pair_do(&p, "kill-receiver");
    pair_do(&p, "promote");
    fence_client *b = client_at(p.standby, 1000);
    fence_lease_info li;
    EXPECT_RC(fence_lease_inspect_info(b, name, &li), FENCE_OK, b);
    ck_assert_uint_eq(li.last_token, replicated);
    fence_lease *l = NULL;
    EXPECT_RC(fence_try_acquire(b, name, 1000, &l), FENCE_OK, b);
    /* A token the old primary already issued, given again. */
    ck_assert_uint_eq(fence_lease_token(l), replicated + 1);
    ck_assert_uint_le(fence_lease_token(l), issued);
    EXPECT_RC(fence_release(l), FENCE_OK, b);
    uint64_t after = 0;
    EXPECT_RC(fence_token_raise(b, name, issued, &after), FENCE_OK, b);
    EXPECT_RC(fence_try_acquire(b, name, 1000, &l), FENCE_OK, b);
    ck_assert_uint_eq(fence_lease_token(l), issued + 1);
    EXPECT_RC(fence_release(l), FENCE_OK, b);
    fence_client_close(b);
    fence_client_close(a);
    pair_do(&p, "stop");
}
END_TEST

static Suite *pg_issuer_fail_suite(void)
{
    Suite *s = suite_create("pg_issuer_fail");
    TCase *tc = tcase_create("pg_issuer_fail");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, restart_immediate);
    tcase_add_test(tc, server_paused_past_ttl);
    tcase_add_test(tc, failover_sync_standby);
    tcase_add_test(tc, failover_async_standby);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(pg_issuer_fail_suite());
}
