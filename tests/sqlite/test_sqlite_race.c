/* test_sqlite_race.c -- two connections on one file, in every order, and
 * threads sharing a connection (each reads its own error message). */
#include <check.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sqliteutil.h"

/* ------------------------------------------------------------------ */
/* Two connections on one file                                           */
/* ------------------------------------------------------------------ */

typedef struct writer {
    uint64_t token;
    int hold_ms;          /* keep the write transaction open this long */
    int busy_timeout_ms;
    int begin_rc, update_rc, end_rc;
    int64_t begin_waited_ms;
    int fence_status;
} writer;

/* BEGIN IMMEDIATE; UPDATE row 1; (hold); COMMIT or, if refused, ROLLBACK. */
static void writer_run(writer *w)
{
    sqlite3 *db = su_open_fenced("race.db");
    sqlite3_busy_timeout(db, w->busy_timeout_ms);
    su_set_tok(db, w->token);
    char sql[128];
    snprintf(sql, sizeof sql, "UPDATE t SET v = 'by%llu' WHERE id = 1",
             (unsigned long long)w->token);
    int64_t t0 = tu_now_ms();
    w->begin_rc = su_exec_rc(db, "BEGIN IMMEDIATE");
    w->begin_waited_ms = tu_now_ms() - t0;
    if (w->begin_rc != SQLITE_OK) {
        sqlite3_close(db);
        return;
    }
    w->update_rc = su_exec_rc(db, sql);
    w->fence_status = fence_sqlite_classify(db, NULL);
    if (w->hold_ms > 0) {
        tu_sleep_ms(w->hold_ms);
    }
    w->end_rc = su_exec_rc(db, w->update_rc == SQLITE_OK ? "COMMIT" : "ROLLBACK");
    sqlite3_close(db);
}

static void *writer_thread(void *arg)
{
    writer_run(arg);
    return NULL;
}

static sqlite3 *race_setup(void)
{
    sqlite3 *db = su_open_fenced("race.db");
    su_exec_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)");
    su_write_ok(db, "INSERT INTO t VALUES (1, 'initial')");
    ck_assert_int_eq(fence_sqlite_protect(db, "t", NULL), FENCE_OK);
    return db;
}

static void race_assert_34(sqlite3 *db)
{
    ck_assert_str_eq(su_q_text(db, "SELECT v || ' ' || fence_token FROM t WHERE id = 1"),
                     "by34 34");
}

/* Holder A (a_tok) takes the write lock and keeps it; B (b_tok) starts
 * while A holds it and waits on busy_timeout. */
static void race_hold(uint64_t a_tok, uint64_t b_tok, writer *a, writer *b)
{
    *a = (writer){.token = a_tok, .hold_ms = 300, .busy_timeout_ms = 5000};
    *b = (writer){.token = b_tok, .busy_timeout_ms = 5000};
    pthread_t ta, tb;
    ck_assert_int_eq(pthread_create(&ta, NULL, writer_thread, a), 0);
    tu_sleep_ms(100); /* A is inside its transaction now */
    ck_assert_int_eq(pthread_create(&tb, NULL, writer_thread, b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    ck_assert_int_eq(a->begin_rc, SQLITE_OK);
    ck_assert_int_eq(b->begin_rc, SQLITE_OK);
    ck_assert_msg(b->begin_waited_ms >= 50, "B did not wait for A (%lld ms)",
                  (long long)b->begin_waited_ms);
}

START_TEST(two_connections_every_order)
{
    sqlite3 *db = race_setup();
    writer a, b;

    /* 33 first, then 34 (sequential autocommit). */
    a = (writer){.token = 33, .busy_timeout_ms = 5000};
    writer_run(&a);
    ck_assert_int_eq(a.update_rc, SQLITE_OK);
    b = (writer){.token = 34, .busy_timeout_ms = 5000};
    writer_run(&b);
    ck_assert_int_eq(b.update_rc, SQLITE_OK);
    race_assert_34(db);
    /* 33 again after 34: refused. */
    a = (writer){.token = 33, .busy_timeout_ms = 5000};
    writer_run(&a);
    ck_assert_int_eq(a.update_rc, SQLITE_CONSTRAINT);
    ck_assert_int_eq(a.fence_status, FENCE_STALE);
    race_assert_34(db);

    /* 33 begins and holds; 34 waits on busy_timeout, then wins. */
    sqlite3_close(db);
    su_teardown();
    su_setup();
    db = race_setup();
    race_hold(33, 34, &a, &b);
    ck_assert_int_eq(a.update_rc, SQLITE_OK);
    ck_assert_int_eq(b.update_rc, SQLITE_OK);
    race_assert_34(db);

    /* 34 begins and holds; 33 waits, then is refused. */
    sqlite3_close(db);
    su_teardown();
    su_setup();
    db = race_setup();
    race_hold(34, 33, &a, &b);
    ck_assert_int_eq(a.update_rc, SQLITE_OK);
    ck_assert_int_eq(b.update_rc, SQLITE_CONSTRAINT);
    ck_assert_int_eq(b.fence_status, FENCE_STALE);
    race_assert_34(db);

    /* 33 begins a DEFERRED transaction and reads; 34 commits meanwhile;
     * 33's write then cannot commit a stale row (BUSY_SNAPSHOT in WAL). */
    sqlite3_close(db);
    su_teardown();
    su_setup();
    db = race_setup();
    sqlite3 *c33 = su_open_fenced("race.db");
    su_set_tok(c33, 33);
    su_exec_ok(c33, "BEGIN DEFERRED");
    ck_assert_str_eq(su_q_text(c33, "SELECT v FROM t WHERE id = 1"), "initial");
    b = (writer){.token = 34, .busy_timeout_ms = 5000};
    writer_run(&b);
    ck_assert_int_eq(b.update_rc, SQLITE_OK);
    int rc = su_exec_rc(c33, "UPDATE t SET v = 'by33' WHERE id = 1");
    ck_assert_msg(rc != SQLITE_OK, "stale deferred write went through");
    su_exec_ok(c33, "ROLLBACK");
    /* Retrying in a fresh transaction sees 34's row and is refused as stale. */
    su_exec_ok(c33, "BEGIN IMMEDIATE");
    su_expect_stale(c33, "UPDATE t SET v = 'by33' WHERE id = 1", 33, 34, FENCE_OBJECT_TABLE, "t");
    su_exec_ok(c33, "ROLLBACK");
    race_assert_34(db);

    /* 34 holds; 33 has no patience (busy_timeout 0): SQLITE_BUSY, then
     * after 34 commits, 33 retries and is refused. */
    sqlite3_close(c33);
    sqlite3_close(db);
    su_teardown();
    su_setup();
    db = race_setup();
    sqlite3 *c34 = su_open_fenced("race.db");
    su_set_tok(c34, 34);
    su_exec_ok(c34, "BEGIN IMMEDIATE");
    su_write_ok(c34, "UPDATE t SET v = 'by34' WHERE id = 1");
    a = (writer){.token = 33, .busy_timeout_ms = 0};
    writer_run(&a);
    ck_assert_int_eq(a.begin_rc, SQLITE_BUSY);
    su_exec_ok(c34, "COMMIT");
    writer_run(&a);
    ck_assert_int_eq(a.update_rc, SQLITE_CONSTRAINT);
    race_assert_34(db);

    /* 33 holds and rolls back its own work; 34 then writes. */
    su_write_ok(c34, "UPDATE t SET v = 'by34' WHERE id = 1");
    race_assert_34(db);
    sqlite3_close(c34);
    sqlite3_close(db);
}
END_TEST

START_TEST(two_connections_resource)
{
    sqlite3 *db = su_open_fenced("res.db");
    su_exec_ok(db, "CREATE TABLE log(v TEXT)");
    sqlite3 *c33 = su_open_fenced("res.db"), *c34 = su_open_fenced("res.db");
    su_set_tok(c33, 33);
    su_set_tok(c34, 34);
    /* 33 advances and writes; 34 advances and writes; 33 comes back. */
    su_exec_ok(c33, "BEGIN IMMEDIATE; INSERT INTO fence_advance VALUES ('job');"
                    "INSERT INTO log VALUES ('33a'); COMMIT");
    su_exec_ok(c34, "BEGIN IMMEDIATE; INSERT INTO fence_advance VALUES ('job');"
                    "INSERT INTO log VALUES ('34a'); COMMIT");
    su_exec_ok(c33, "BEGIN IMMEDIATE");
    su_again(c33); /* its first transaction ended its token */
    ck_assert_int_eq(fence_sqlite_advance(c33, "job", NULL), FENCE_STALE);
    su_exec_ok(c33, "ROLLBACK");
    ck_assert_str_eq(su_q_text(db, "SELECT group_concat(v, ',') FROM log"), "33a,34a");
    ck_assert_int_eq(su_q_int(db, "SELECT high_water FROM fence_resource"), 34);
    sqlite3_close(c33);
    sqlite3_close(c34);
    sqlite3_close(db);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Threads: fence_sqlite_errmsg(db) is per connection and per thread     */
/* ------------------------------------------------------------------ */

typedef struct errmsg_thread {
    sqlite3 *db;
    pthread_barrier_t *barrier;
    int rc;
    char first[1024];  /* its message right after its failure */
    char later[1024];  /* ... after the main thread failed on the same db */
    char other[1024];  /* its message for another connection */
    sqlite3 *other_db;
} errmsg_thread;

static void *errmsg_thread_run(void *arg)
{
    errmsg_thread *t = arg;
    t->rc = fence_sqlite_protect(t->db, "missing_in_thread", NULL);
    snprintf(t->first, sizeof t->first, "%s", fence_sqlite_errmsg(t->db));
    pthread_barrier_wait(t->barrier); /* 1: the main thread looks, then fails */
    pthread_barrier_wait(t->barrier); /* 2: it has failed */
    snprintf(t->later, sizeof t->later, "%s", fence_sqlite_errmsg(t->db));
    snprintf(t->other, sizeof t->other, "%s", fence_sqlite_errmsg(t->other_db));
    return NULL;
}

START_TEST(errmsg_per_thread)
{
    sqlite3 *db = su_open_fenced("threads.db");
    sqlite3 *db2 = su_open_fenced("threads.db");
    pthread_barrier_t barrier;
    ck_assert_int_eq(pthread_barrier_init(&barrier, NULL, 2), 0);
    errmsg_thread t = {.db = db, .barrier = &barrier, .other_db = db2};
    /* The main thread's own failure on db2, before the thread starts. */
    ck_assert_int_eq(fence_sqlite_unprotect(db2, "missing_on_db2"), FENCE_EINVAL);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, errmsg_thread_run, &t), 0);
    pthread_barrier_wait(&barrier); /* 1 */
    /* The thread failed on db; this thread did not: nothing here. */
    ck_assert_str_eq(fence_sqlite_errmsg(db), "");
    ck_assert_int_eq(fence_sqlite_set_token(db, UINT64_MAX, NULL), FENCE_EINVAL);
    pthread_barrier_wait(&barrier); /* 2 */
    pthread_join(th, NULL);
    pthread_barrier_destroy(&barrier);

    ck_assert_int_eq(t.rc, FENCE_EINVAL);
    ck_assert_msg(strstr(t.first, "missing_in_thread") != NULL, "%s", t.first);
    /* The main thread's failure on the same db did not reach the thread. */
    ck_assert_str_eq(t.later, t.first);
    /* Nor did its failure on db2. */
    ck_assert_str_eq(t.other, "");
    ck_assert_msg(strstr(fence_sqlite_errmsg(db), "2^63-1") != NULL, "%s", fence_sqlite_errmsg(db));
    ck_assert_msg(strstr(fence_sqlite_errmsg(db), "missing_in_thread") == NULL, "%s",
                  fence_sqlite_errmsg(db));
    sqlite3_close(db2);
    sqlite3_close(db);
}
END_TEST

static Suite *race_suite(void)
{
    Suite *s = suite_create("sqlite_race");
    TCase *tc = tcase_create("race");
    tcase_add_checked_fixture(tc, su_setup, su_teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, two_connections_every_order);
    tcase_add_test(tc, two_connections_resource);
    tcase_add_test(tc, errmsg_per_thread);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(race_suite());
}
