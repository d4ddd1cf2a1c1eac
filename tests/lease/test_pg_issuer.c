/*
 * test_pg_issuer.c -- the PostgreSQL issuer (lib/lease/pg/, fence.sql's
 * 75-leases.sql) on the real PostgreSQL and pgbouncer of scripts/with-servers
 * --pgbouncer: acquire, busy, release; tokens strictly rising; renewing many
 * leases in one statement; a lease lost (taken, expired) and the row that
 * cannot be deleted; waiting woken by NOTIFY and by polling; the pooler in
 * transaction mode; raise and the store's marks; a paused holder (SIGSTOP)
 * refused by the issuer and by the store; bad input refused with a code and
 * a message.  The server's own failures (restart, pause, failover) are in
 * test_pg_issuer_fail.c.
 */
#include "fence.h"
#include "fence_pg.h"
#include "issuerutil.h"
#include "leaseutil.h"

#include <libpq-fe.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* ---- helpers ---------------------------------------------------------------- */

/* The test PostgreSQL's URL, with query (or "") appended. */
static const char *pg_url(const char *query)
{
    static _Thread_local char buf[256];
    snprintf(buf, sizeof buf, "postgresql://postgres@127.0.0.1:%s/postgres%s",
             tu_env("FENCE_TEST_PG_PORT"), query);
    return buf;
}

static PGconn *su(void)
{
    PGconn *c = PQconnectdb(tu_env("FENCE_TEST_PG_CONNINFO"));
    ck_assert_msg(PQstatus(c) == CONNECTION_OK, "PostgreSQL: %s", PQerrorMessage(c));
    return c;
}

/* The SQLSTATE sql fails with ("" if it succeeds), into state[6]. */
static void sql_fails(PGconn *c, const char *q, const char *want)
{
    PGresult *r = PQexec(c, q);
    const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    ck_assert_msg(st != NULL && strcmp(st, want) == 0, "%s: expected SQLSTATE %s, got %s (%s)", q,
                  want, st != NULL ? st : "success", PQresultErrorMessage(r));
    PQclear(r);
}

static fence_client *pg_client(const char *query)
{
    return lu_open_url(pg_url(query));
}

static void install(void)
{
    PGconn *c = PQconnectdb(getenv("FENCE_TEST_PG_CONNINFO") ? getenv("FENCE_TEST_PG_CONNINFO")
                                                             : "");
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "test_pg_issuer: no PostgreSQL (scripts/with-servers --pg): %s\n",
                PQerrorMessage(c));
        exit(1);
    }
    if (fence_pg_install(c) != FENCE_OK) {
        fprintf(stderr, "test_pg_issuer: fence_pg_install: %s\n", fence_pg_errmsg(c));
        exit(1);
    }
    PQfinish(c);
}

/* ---- acquire, busy, release, tokens ---------------------------------------------- */

START_TEST(acquire_busy_release)
{
    fence_client *a = pg_client(""), *b = pg_client("");
    ck_assert_str_eq(fence_client_issuer(a), "postgresql");
    const char *name = tu_name("pg-abr");
    fence_lease *la = NULL, *lb = NULL;
    EXPECT_RC(fence_try_acquire(a, name, 5000, &la), FENCE_OK, a);
    uint64_t t1 = fence_lease_token(la);
    ck_assert_uint_ge(t1, 1);
    ck_assert_int_gt(fence_lease_valid_ms(la), 4000);
    EXPECT_RC(fence_try_acquire(b, name, 5000, &lb), FENCE_BUSY, b);
    fence_lease_info li;
    EXPECT_RC(fence_lease_inspect_info(b, name, &li), FENCE_OK, b);
    ck_assert_int_eq(li.held, 1);
    ck_assert_uint_eq(li.holder_token, t1);
    ck_assert_str_eq(li.holder, fence_lease_holder(la));
    ck_assert_int_gt(li.pttl_ms, 4000);
    ck_assert_int_le(li.pttl_ms, 5000);
    EXPECT_RC(fence_renew(la), FENCE_OK, a);
    EXPECT_RC(fence_release(la), FENCE_OK, a);
    EXPECT_RC(fence_try_acquire(b, name, 5000, &lb), FENCE_OK, b);
    ck_assert_uint_gt(fence_lease_token(lb), t1);
    EXPECT_RC(fence_lease_inspect_info(a, name, &li), FENCE_OK, a);
    ck_assert_uint_eq(li.last_token, fence_lease_token(lb));
    EXPECT_RC(fence_release(lb), FENCE_OK, b);
    EXPECT_RC(fence_lease_inspect_info(a, name, &li), FENCE_OK, a);
    ck_assert_int_eq(li.held, 0);
    ck_assert_int_eq(li.pttl_ms, -1);
    fence_client_close(a);
    fence_client_close(b);
}
END_TEST

START_TEST(tokens_strictly_rise)
{
    fence_client *c[2] = {pg_client(""), pg_client("?fence_wait=poll")};
    const char *name = tu_name("pg-rise");
    uint64_t last = 0;
    for (int i = 0; i < 40; i++) {
        fence_lease *l = NULL;
        EXPECT_RC(fence_try_acquire(c[i % 2], name, 2000, &l), FENCE_OK, c[i % 2]);
        ck_assert_uint_gt(fence_lease_token(l), last);
        last = fence_lease_token(l);
        if (i % 5 == 4) {
            /* Lost by expiry instead of released: the next is higher too. */
            PGconn *s = su();
            free(lu_pg_value(s, "UPDATE fence.leases SET expires = clock_timestamp() - interval '1 s'"
                         " WHERE name = '%s'", name));
            PQfinish(s);
            ck_assert_int_eq(fence_release(l), FENCE_LOST);
        } else {
            EXPECT_RC(fence_release(l), FENCE_OK, c[i % 2]);
        }
    }
    fence_client_close(c[0]);
    fence_client_close(c[1]);
}
END_TEST

/* An acquire sent again by its holder (its answer lost) gets the lease and
 * token it has, nothing issued; the expiry moves. */
START_TEST(acquire_again_same_holder)
{
    PGconn *s = su();
    const char *name = tu_name("pg-again");
    const char *h = "0123456789abcdef0123456789abcdef";
    long long t = lu_pg_num(s, "SELECT token FROM fence.lease_acquire('%s', '%s', 1000)", name, h);
    ck_assert_int_ge(t, 1);
    ck_assert_int_eq(lu_pg_num(s, "SELECT token FROM fence.lease_acquire('%s', '%s', 60000)", name, h),
                     t);
    ck_assert_int_eq(lu_pg_num(s, "SELECT counter FROM fence.leases WHERE name = '%s'", name), t);
    ck_assert_int_gt(lu_pg_num(s, "SELECT pttl_ms FROM fence.lease_inspect('%s')", name), 50000);
    char *g = lu_pg_value(s, "SELECT granted FROM fence.lease_acquire('%s', '%s', 1000)", name,
                   "ffffffffffffffffffffffffffffffff");
    ck_assert_str_eq(g, "f");
    free(g);
    PQfinish(s);
}
END_TEST

/* ---- renewing many ------------------------------------------------------------------- */

/* n leases on one client in manual mode, all due, renewed by one pass: the
 * rows renewed by one statement share its transaction (one xmin), so the
 * number of distinct xmins is the number of statements. */
static void renew_many(int n, int batch, long long statements)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = pg_url("");
    o.heartbeat_mode = FENCE_HEARTBEAT_MANUAL;
    o.renew_batch = batch;
    fence_client *c = lu_open_opts(&o);
    char base[64];
    snprintf(base, sizeof base, "%s", tu_name("pg-many"));
    fence_lease **ls = calloc((size_t)n, sizeof *ls);
    fence_lease_options lo;
    fence_lease_options_init(&lo, 8000);
    lo.renew_every_ms = 50;
    for (int i = 0; i < n; i++) {
        char name[96];
        snprintf(name, sizeof name, "%s-%05d", base, i);
        EXPECT_RC(fence_acquire(c, name, &lo, &ls[i]), FENCE_OK, c);
    }
    tu_sleep_ms(60);
    int64_t next = 0;
    EXPECT_RC(fence_heartbeat_run(c, &next), FENCE_OK, c);
    PGconn *s = su();
    ck_assert_int_eq(lu_pg_num(s, "SELECT count(DISTINCT xmin::text) FROM fence.leases"
                             " WHERE name LIKE '%s-%%' AND expires > clock_timestamp()"
                             " + interval '7800 ms'", base),
                     statements);
    ck_assert_int_eq(lu_pg_num(s, "SELECT count(*) FROM fence.leases WHERE name LIKE '%s-%%'"
                             " AND expires > clock_timestamp() + interval '7800 ms'", base),
                     n);
    PQfinish(s);
    fence_metrics m = lu_metrics(c);
    ck_assert_uint_eq(m.renew_ok, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        EXPECT_RC(fence_release(ls[i]), FENCE_OK, c);
    }
    free(ls);
    fence_client_close(c);
}

START_TEST(renew_many_one_statement)
{
    renew_many(2000, 5000, 1);
}
END_TEST

START_TEST(renew_many_batched)
{
    renew_many(1200, 500, 3); /* three statements, pipelined in one round trip */
}
END_TEST

/* ---- lost -------------------------------------------------------------------------- */

static atomic_int lost_calls, lost_reason;
static void on_lost(fence_lease *l, int reason, void *user)
{
    (void)l;
    (void)user;
    atomic_store(&lost_reason, reason);
    atomic_fetch_add(&lost_calls, 1);
}

START_TEST(lost_taken_expired_not_deleted)
{
    fence_client *c = pg_client("");
    PGconn *s = su();
    char name[96];
    snprintf(name, sizeof name, "%s", tu_name("pg-lost"));
    fence_lease_options lo;
    fence_lease_options_init(&lo, 600);
    lo.on_lost = on_lost;
    atomic_store(&lost_calls, 0);
    fence_lease *l = NULL;
    EXPECT_RC(fence_acquire(c, name, &lo, &l), FENCE_OK, c);
    /* Taken: another holder in the row (with a higher token). */
    free(lu_pg_value(s, "UPDATE fence.leases SET holder = 'ffffffffffffffffffffffffffffffff',"
                 " counter = counter + 1, token = counter + 1 WHERE name = '%s'", name));
    for (int i = 0; i < 100 && atomic_load(&lost_calls) == 0; i++) {
        tu_sleep_ms(10);
    }
    ck_assert_int_eq(atomic_load(&lost_calls), 1);
    ck_assert_int_eq(atomic_load(&lost_reason), FENCE_LOST);
    ck_assert_int_eq(fence_renew(l), FENCE_LOST);
    ck_assert_int_eq(fence_release(l), FENCE_LOST);
    /* Expired under a manual renewal. */
    char name2[96];
    snprintf(name2, sizeof name2, "%s", tu_name("pg-lost2"));
    EXPECT_RC(fence_try_acquire(c, name2, 5000, &l), FENCE_OK, c);
    free(lu_pg_value(s, "UPDATE fence.leases SET expires = clock_timestamp() - interval '1 ms'"
                 " WHERE name = '%s'", name2));
    ck_assert_int_eq(fence_renew(l), FENCE_LOST);
    ck_assert_int_eq(fence_release(l), FENCE_LOST);
    /* The row of a name is never deleted, its counter never lowered. */
    char q[512];
    snprintf(q, sizeof q, "DELETE FROM fence.leases WHERE name = '%s'", name);
    sql_fails(s, q, "23Q03");
    snprintf(q, sizeof q, "UPDATE fence.leases SET counter = 1 WHERE name = '%s'", name);
    sql_fails(s, q, "23Q03");
    sql_fails(s, "TRUNCATE fence.leases", "23Q03");
    PQfinish(s);
    fence_client_close(c);
}
END_TEST

/* ---- waiting ---------------------------------------------------------------------------- */

typedef struct {
    fence_client *c;
    const char *name;
    int64_t got_ms;
    fence_status st;
    uint64_t token;
} waiter_arg;

static void *waiter(void *p)
{
    waiter_arg *w = p;
    fence_lease_options lo;
    fence_lease_options_init(&lo, 5000);
    lo.wait_ms = 8000;
    fence_lease *l = NULL;
    w->st = fence_acquire(w->c, w->name, &lo, &l);
    w->got_ms = tu_now_ms();
    if (w->st == FENCE_OK) {
        w->token = fence_lease_token(l);
        fence_release(l);
    }
    return NULL;
}

/* The holder's TTL is 20 s: without a wake-up the waiter would look again
 * only after a second (the core's safety re-look) with LISTEN, or after its
 * polling backoff (at most 200 ms) without. */
static int64_t wait_for_release(const char *query, int64_t hold_ms)
{
    fence_client *a = pg_client(""), *b = pg_client(query);
    waiter_arg w = {b, tu_name("pg-wait"), 0, FENCE_EINVAL, 0};
    fence_lease *l = NULL;
    EXPECT_RC(fence_try_acquire(a, w.name, 20000, &l), FENCE_OK, a);
    uint64_t t = fence_lease_token(l);
    pthread_t th;
    pthread_create(&th, NULL, waiter, &w);
    tu_sleep_ms(hold_ms);
    int64_t released = tu_now_ms();
    EXPECT_RC(fence_release(l), FENCE_OK, a);
    pthread_join(th, NULL);
    ck_assert_int_eq(w.st, FENCE_OK);
    ck_assert_uint_gt(w.token, t);
    fence_client_close(a);
    fence_client_close(b);
    return w.got_ms - released;
}

START_TEST(wait_woken_by_notify)
{
    /* Released 400 ms into the wait: the LISTEN wakes it at once, where
     * its next look would be 1 s after the first. */
    int64_t after = wait_for_release("", 400);
    ck_assert_msg(after < 300, "woken %lld ms after the release", (long long)after);
}
END_TEST

START_TEST(wait_by_polling)
{
    fence_client *c = pg_client("?fence_wait=poll");
    fence_issuer_info ii;
    EXPECT_RC(fence_client_describe(c, &ii), FENCE_OK, c);
    int found = 0;
    for (int i = 0; i < ii.nfields; i++) {
        found |= strcmp(ii.field[i].key, "wait") == 0 && strcmp(ii.field[i].value, "poll") == 0;
    }
    ck_assert_msg(found, "describe has no wait=poll");
    fence_client_close(c);
    int64_t after = wait_for_release("?fence_wait=poll", 700);
    ck_assert_msg(after < 600, "got it %lld ms after the release", (long long)after);
}
END_TEST

/* ---- the pooler ---------------------------------------------------------------------------- */

typedef struct {
    const char *url, *name, *log;
    int cycles;
    fence_status st;
} pool_arg;

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static void *pool_worker(void *p)
{
    pool_arg *a = p;
    fence_client *c = NULL;
    a->st = fence_client_open_url(&c, a->url);
    for (int i = 0; a->st == FENCE_OK && i < a->cycles; i++) {
        fence_lease_options lo;
        fence_lease_options_init(&lo, 3000);
        lo.wait_ms = 10000;
        fence_lease *l = NULL;
        a->st = fence_acquire(c, a->name, &lo, &l);
        if (a->st != FENCE_OK) {
            break;
        }
        FILE *f = fopen(a->log, "a");
        pthread_mutex_lock(&log_lock);
        fprintf(f, "in %llu\n", (unsigned long long)fence_lease_token(l));
        fflush(f);
        pthread_mutex_unlock(&log_lock);
        a->st = fence_renew(l);
        pthread_mutex_lock(&log_lock);
        fprintf(f, "out %llu\n", (unsigned long long)fence_lease_token(l));
        pthread_mutex_unlock(&log_lock);
        fclose(f);
        if (a->st == FENCE_OK) {
            a->st = fence_release(l);
        }
    }
    fence_client_close(c);
    return NULL;
}

/* Through a real pgbouncer in transaction mode (2 server connections for
 * every client): 4 clients x 25 cycles, never two inside at once, tokens
 * strictly rising in the order they went in. */
START_TEST(pooler_transaction_mode)
{
    char url[256], log[256];
    snprintf(url, sizeof url, "postgresql://%s@127.0.0.1:%s/postgres?fence_wait=poll",
             tu_env("FENCE_TEST_PGBOUNCER_TX_USER"), tu_env("FENCE_TEST_PGBOUNCER_PORT"));
    snprintf(log, sizeof log, "%s/pg-pool-%d.log", tu_env("FENCE_TEST_SPAWN_DIR"), (int)getpid());
    remove(log);
    const char *name = tu_name("pg-pool");
    pool_arg a[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (pool_arg){url, name, log, 25, FENCE_EINVAL};
        pthread_create(&th[i], NULL, pool_worker, &a[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(a[i].st == FENCE_OK, "worker %d: %s", i, fence_status_name(a[i].st));
    }
    FILE *f = fopen(log, "r");
    ck_assert_ptr_nonnull(f);
    char what[8];
    unsigned long long tok, last = 0, inside = 0;
    int lines = 0;
    while (fscanf(f, "%7s %llu", what, &tok) == 2) {
        lines++;
        if (strcmp(what, "in") == 0) {
            ck_assert_msg(inside == 0, "token %llu went in while %llu was inside", tok, inside);
            ck_assert_uint_gt(tok, last);
            inside = last = tok;
        } else {
            ck_assert_uint_eq(tok, inside);
            inside = 0;
        }
    }
    fclose(f);
    ck_assert_int_eq(lines, 200);
    /* The pooler's user went through pgbouncer, not around it. */
    PGconn *s = su();
    ck_assert_int_ge(lu_pg_num(s, "SELECT counter FROM fence.leases WHERE name = '%s'", name), 100);
    PQfinish(s);
}
END_TEST

/* ---- raise and the store's marks ------------------------------------------------------------ */

START_TEST(raise_and_marks)
{
    fence_client *c = pg_client("");
    const char *name = tu_name("pg-raise");
    uint64_t after = 0;
    EXPECT_RC(fence_token_raise(c, name, 500, &after), FENCE_OK, c);
    ck_assert_uint_eq(after, 500);
    EXPECT_RC(fence_token_raise(c, name, 100, &after), FENCE_OK, c); /* never down */
    ck_assert_uint_eq(after, 500);
    fence_lease *l = NULL;
    EXPECT_RC(fence_try_acquire(c, name, 3000, &l), FENCE_OK, c);
    ck_assert_uint_eq(fence_lease_token(l), 501);
    /* A store's mark for the resource of the same name, above the counter
     * (restored from elsewhere, or written with another issuer's tokens):
     * the next token is above it; a reissue goes above it too. */
    PGconn *s = su();
    free(lu_pg_value(s, "SELECT fence.advance('%s', 900)", name));
    uint64_t fresh = 0;
    EXPECT_RC(fence_lease_reissue(l, 950, &fresh), FENCE_OK, c);
    ck_assert_uint_eq(fresh, 951);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    free(lu_pg_value(s, "SELECT fence.advance('%s', 2000)", name));
    EXPECT_RC(fence_try_acquire(c, name, 3000, &l), FENCE_OK, c);
    ck_assert_uint_eq(fence_lease_token(l), 2001);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    PQfinish(s);
    fence_client_close(c);
}
END_TEST

/* ---- a paused holder ------------------------------------------------------------------------ */

static const char *holder_path(void)
{
    static char path[PATH_MAX + 16];
    const char *b = getenv("FENCE_BUILD");
    snprintf(path, sizeof path, "%s/tests/lease/holder", b != NULL ? b : "build");
    ck_assert_msg(access(path, X_OK) == 0, "the helper program %s is missing", path);
    return path;
}

/* A holder process SIGSTOPped past its TTL: another takes the lease with a
 * higher token and writes; continued, the holder's renewal is refused
 * (lost, exit 3) and a write with its token is refused by the store. */
START_TEST(holder_paused_past_ttl)
{
    const char *name = tu_name("pg-paused");
    int out[2];
    ck_assert_int_eq(pipe(out), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    char prog[PATH_MAX + 16], url[256], nm[128], ttl[] = "400";
    snprintf(prog, sizeof prog, "%s", holder_path());
    snprintf(url, sizeof url, "%s", pg_url(""));
    snprintf(nm, sizeof nm, "%s", name);
    char *argv[] = {prog, url, nm, ttl, NULL};
    pid_t pid;
    ck_assert_int_eq(posix_spawn(&pid, argv[0], &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    FILE *f = fdopen(out[0], "r");
    unsigned long long old = 0;
    char first[128] = "";
    ck_assert_ptr_nonnull(fgets(first, sizeof first, f));
    ck_assert_msg(sscanf(first, "token %llu", &old) == 1, "the holder said: %s", first);
    kill(pid, SIGSTOP);
    tu_sleep_ms(600);
    fence_client *c = pg_client("");
    fence_lease *l = NULL;
    EXPECT_RC(fence_try_acquire(c, name, 5000, &l), FENCE_OK, c);
    ck_assert_uint_gt(fence_lease_token(l), old);
    PGconn *s = su();
    char q[512];
    snprintf(q, sizeof q, "SELECT fence.advance('%s-res', %llu)", name,
             (unsigned long long)fence_lease_token(l));
    free(lu_pg_value(s, "%s", q));
    kill(pid, SIGCONT);
    char line[128] = "";
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert_msg(strncmp(line, "lost", 4) == 0, "the holder said: %s", line);
    int status = 0;
    waitpid(pid, &status, 0);
    ck_assert_int_eq(WEXITSTATUS(status), 3);
    fclose(f);
    snprintf(q, sizeof q, "SELECT fence.advance('%s-res', %llu)", name, old);
    sql_fails(s, q, "23Q01");
    PQfinish(s);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    fence_client_close(c);
}
END_TEST

/* ---- bad input -------------------------------------------------------------------------------- */

START_TEST(bad_input)
{
    fence_client *c = pg_client("");
    fence_lease *l = NULL;
    /* The core's checks (every issuer's). */
    ck_assert_int_eq(fence_try_acquire(c, "", 1000, &l), FENCE_EINVAL);
    ck_assert_int_eq(fence_try_acquire(c, "a\nb", 1000, &l), FENCE_EINVAL);
    ck_assert_int_eq(fence_try_acquire(c, "x", 1, &l), FENCE_EINVAL);
    /* Bytes that are not UTF-8 (the database's encoding): refused by the
     * server, reported as invalid input with its message. */
    ck_assert_int_eq(fence_try_acquire(c, "caf\xe9", 1000, &l), FENCE_EINVAL);
    ck_assert_ptr_nonnull(strstr(fence_client_errmsg(c), "SQLSTATE 22021"));
    uint64_t after;
    ck_assert_int_eq(fence_token_raise(c, "x", (uint64_t)INT64_MAX, &after), FENCE_EINVAL);
    fence_client_close(c);
    /* The SQL functions, called directly: 22023 with a message each. */
    PGconn *s = su();
    sql_fails(s, "SELECT fence.lease_acquire('', '0123456789abcdef0123456789abcdef', 1000)", "22023");
    sql_fails(s, "SELECT fence.lease_acquire('x', 'ABC', 1000)", "22023");
    sql_fails(s, "SELECT fence.lease_acquire('x', '0123456789abcdef0123456789abcdef', 5)", "22023");
    sql_fails(s, "SELECT fence.lease_acquire('x', NULL, 1000)", "22023");
    sql_fails(s, "SELECT fence.lease_renew('{x}', '{}', '{1}', '{1000}')", "22023");
    sql_fails(s, "SELECT fence.lease_renew('{x}', '{0123456789abcdef0123456789abcdef}', '{1}', '{0}')",
              "22023");
    sql_fails(s, "SELECT fence.lease_raise('x', -1)", "22023");
    sql_fails(s, "SELECT fence.lease_raise('x', NULL)", "22023");
    /* The table itself: no privilege for an ordinary role. */
    free(lu_pg_value(s, "DROP ROLE IF EXISTS pgiss_app; CREATE ROLE pgiss_app LOGIN"));
    free(lu_pg_value(s, "SET ROLE pgiss_app"));
    sql_fails(s, "SELECT * FROM fence.leases", "42501");
    sql_fails(s, "UPDATE fence.leases SET counter = 0", "42501");
    ck_assert_int_ge(lu_pg_num(s, "SELECT token FROM fence.lease_acquire('pgiss-app-%d',"
                             " '0123456789abcdef0123456789abcdef', 1000)", (int)getpid()),
                     1);
    free(lu_pg_value(s, "RESET ROLE"));
    PQfinish(s);
    /* A database without fence.sql: refused at open, saying what to do. */
    s = su();
    free(lu_pg_value(s, "DROP DATABASE IF EXISTS pgiss_bare"));
    free(lu_pg_value(s, "CREATE DATABASE pgiss_bare"));
    char url[256];
    snprintf(url, sizeof url, "postgresql://postgres@127.0.0.1:%s/pgiss_bare",
             tu_env("FENCE_TEST_PG_PORT"));
    c = NULL;
    ck_assert_int_eq(fence_client_open_url(&c, url), FENCE_ECONFIG);
    ck_assert_ptr_nonnull(strstr(fence_client_errmsg(c), "fence.sql version 7"));
    fence_client_close(c);
    free(lu_pg_value(s, "DROP DATABASE pgiss_bare"));
    PQfinish(s);
    /* A password never shows: not in the URL shown, not in a message. */
    snprintf(url, sizeof url, "postgresql://postgres:s3cr3t-pw@127.0.0.1:1/postgres");
    ck_assert_int_eq(fence_client_open_url(&c, url), FENCE_ECONN);
    ck_assert_ptr_null(strstr(fence_client_errmsg(c), "s3cr3t"));
    ck_assert_ptr_null(strstr(fence_client_url(c), "s3cr3t"));
    fence_client_close(c);
    ck_assert_int_eq(fence_client_open_url(&c, "postgresql://u:s3cr3t@h/x?nope=1"), FENCE_EINVAL);
    ck_assert_ptr_null(strstr(fence_client_errmsg(c), "s3cr3t"));
    fence_client_close(c);
}
END_TEST

/* A closed port: every call fails within its timeouts, with ECONN. */
START_TEST(unreachable_within_timeouts)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = "postgresql://postgres@127.0.0.1:1/postgres";
    o.connect_timeout_ms = 300;
    o.io_timeout_ms = 300;
    fence_client *c = NULL;
    int64_t t0 = tu_now_ms();
    ck_assert_int_eq(fence_client_open(&c, &o), FENCE_ECONN);
    fence_lease *l = NULL;
    ck_assert_int_eq(fence_try_acquire(c, "x", 1000, &l), FENCE_ECONN);
    ck_assert_int_lt(tu_now_ms() - t0, 1200);
    fence_client_close(c);
}
END_TEST

static Suite *pg_issuer_suite(void)
{
    Suite *s = suite_create("pg_issuer");
    TCase *tc = tcase_create("pg_issuer");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, acquire_busy_release);
    tcase_add_test(tc, tokens_strictly_rise);
    tcase_add_test(tc, acquire_again_same_holder);
    tcase_add_test(tc, renew_many_one_statement);
    tcase_add_test(tc, renew_many_batched);
    tcase_add_test(tc, lost_taken_expired_not_deleted);
    tcase_add_test(tc, wait_woken_by_notify);
    tcase_add_test(tc, wait_by_polling);
    tcase_add_test(tc, pooler_transaction_mode);
    tcase_add_test(tc, raise_and_marks);
    tcase_add_test(tc, holder_paused_past_ttl);
    tcase_add_test(tc, bad_input);
    tcase_add_test(tc, unreachable_within_timeouts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    install();
    return tu_run(pg_issuer_suite());
}
