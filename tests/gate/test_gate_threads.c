/* test_gate_threads.c -- the gate (lib/gate) under threads, in memory and
 * backed by a SQLite file: begin/commit is atomic against other threads
 * (a waiter waits, a late writer is rejected), waits end at wait_ms, and
 * under many threads the accepted writes per resource never go backwards.
 * Loop tests run each case twice: _i == 0 in memory, _i == 1 persistent. */
#include "gateutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Two writers, deterministic: A (33) holds, B (34) waits, A's write    */
/* lands first, then B's; A's late retry is rejected.                   */
/* ------------------------------------------------------------------ */

typedef struct ab_state {
    fence_gate *g;
    pthread_barrier_t bar;
    char log[64]; /* the "store": written only while the gate is held */
    int a_committing; /* atomic */
    int b_returned;   /* atomic */
    int b_rc, b_commit_rc, b_saw_a_commit;
    uint64_t b_mark;
} ab_state;

static void *writer_b(void *arg)
{
    ab_state *s = arg;
    fence_gate_txn *t = NULL;
    pthread_barrier_wait(&s->bar); /* A holds the resource now */
    s->b_rc = fence_gate_begin(s->g, "acct", 34, NULL, &t, NULL);
    s->b_saw_a_commit = __atomic_load_n(&s->a_committing, __ATOMIC_SEQ_CST);
    __atomic_store_n(&s->b_returned, 1, __ATOMIC_SEQ_CST);
    if (s->b_rc == FENCE_OK) {
        s->b_mark = fence_gate_txn_mark(t);
        strcat(s->log, "B34;");
        s->b_commit_rc = fence_gate_commit(t);
    }
    return NULL;
}

START_TEST(test_ab_interleaving)
{
    ab_state s;
    memset(&s, 0, sizeof s);
    s.g = gu_open(_i, 10000);
    pthread_barrier_init(&s.bar, NULL, 2);
    pthread_t b;
    ck_assert_int_eq(pthread_create(&b, NULL, writer_b, &s), 0);

    fence_gate_txn *a = NULL;
    ck_status(fence_gate_begin(s.g, "acct", 33, NULL, &a, NULL), FENCE_OK, s.g);
    pthread_barrier_wait(&s.bar);
    tu_sleep_ms(200); /* B is in begin by now, and must still be waiting */
    ck_assert_msg(__atomic_load_n(&s.b_returned, __ATOMIC_SEQ_CST) == 0,
                  "B's begin returned while A held the resource (rc %s)",
                  fence_status_name(s.b_rc));
    /* A is a slow writer, but a legitimate one: its write lands first. */
    strcat(s.log, "A33;");
    __atomic_store_n(&s.a_committing, 1, __ATOMIC_SEQ_CST);
    ck_status(fence_gate_commit(a), FENCE_OK, s.g);
    pthread_join(b, NULL);

    ck_assert_msg(s.b_rc == FENCE_OK, "B: %s", fence_status_name(s.b_rc));
    ck_assert_int_eq(s.b_commit_rc, FENCE_OK);
    ck_assert_int_eq(s.b_saw_a_commit, 1);
    ck_assert_uint_eq(s.b_mark, 33);
    ck_assert_str_eq(s.log, "A33;B34;");
    ck_assert_uint_eq(gu_mark(s.g, "acct"), 34);

    /* A wakes up again and retries with its old token: rejected. */
    fence_stale st;
    ck_status(fence_gate_begin(s.g, "acct", 33, NULL, &a, &st), FENCE_STALE, s.g);
    ck_assert_ptr_null(a);
    ck_assert_uint_eq(st.highest, 34);
    ck_assert_uint_eq(st.offered, 33);
    ck_assert_str_eq(st.object, "acct");
    ck_assert_str_eq(s.log, "A33;B34;");
    pthread_barrier_destroy(&s.bar);
    gu_close(s.g);
}
END_TEST

/* A holder keeps the resource; the waiter gives up after wait_ms. */
typedef struct hold_state {
    fence_gate *g;
    const char *res;
    pthread_barrier_t held, release;
    int rc;
} hold_state;

static void *holder(void *arg)
{
    hold_state *h = arg;
    fence_gate_txn *t = NULL;
    h->rc = fence_gate_begin(h->g, h->res, 10, NULL, &t, NULL);
    pthread_barrier_wait(&h->held);
    pthread_barrier_wait(&h->release);
    if (h->rc == FENCE_OK) {
        fence_gate_commit(t);
    }
    return NULL;
}

START_TEST(test_wait_times_out)
{
    hold_state h = {.res = "busy"};
    h.g = gu_open(_i, 150);
    pthread_barrier_init(&h.held, NULL, 2);
    pthread_barrier_init(&h.release, NULL, 2);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, holder, &h), 0);
    pthread_barrier_wait(&h.held);
    ck_assert_int_eq(h.rc, FENCE_OK);

    fence_gate_txn *t = NULL;
    int64_t start = tu_now_ms();
    ck_status(fence_gate_begin(h.g, "busy", 11, NULL, &t, NULL), FENCE_TIMEOUT, h.g);
    int64_t took = tu_now_ms() - start;
    ck_assert_msg(took >= 140 && took < 3000, "waited %lld ms for wait_ms 150", (long long)took);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(h.g), "still held"));
    ck_assert_ptr_null(t);
    if (_i == 0) { /* in memory: other resources do not wait */
        start = tu_now_ms();
        ck_status(gu_write_once(h.g, "free", 1, NULL), FENCE_OK, h.g);
        ck_assert_int_lt(tu_now_ms() - start, 100);
    } else { /* persistent: the whole file waits */
        ck_status(gu_write_once(h.g, "free", 1, NULL), FENCE_TIMEOUT, h.g);
    }
    /* Readers never wait for a holder, and do not see its txn. */
    ck_assert_uint_eq(gu_mark(h.g, "busy"), 0);
    pthread_barrier_wait(&h.release);
    pthread_join(th, NULL);
    ck_assert_uint_eq(gu_mark(h.g, "busy"), 10);
    ck_status(gu_write_once(h.g, "busy", 11, NULL), FENCE_OK, h.g);
    pthread_barrier_destroy(&h.held);
    pthread_barrier_destroy(&h.release);
    gu_close(h.g);

    /* wait_ms 0: try once. */
    h.g = gu_open(_i, 0);
    h.res = "busy2";
    pthread_barrier_init(&h.held, NULL, 2);
    pthread_barrier_init(&h.release, NULL, 2);
    ck_assert_int_eq(pthread_create(&th, NULL, holder, &h), 0);
    pthread_barrier_wait(&h.held);
    ck_assert_int_eq(h.rc, FENCE_OK);
    start = tu_now_ms();
    ck_status(fence_gate_begin(h.g, "busy2", 11, NULL, &t, NULL), FENCE_TIMEOUT, h.g);
    ck_assert_int_lt(tu_now_ms() - start, 100);
    pthread_barrier_wait(&h.release);
    pthread_join(th, NULL);
    pthread_barrier_destroy(&h.held);
    pthread_barrier_destroy(&h.release);
    gu_close(h.g);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Many threads: the accepted writes per resource never go backwards    */
/* ------------------------------------------------------------------ */

#define MT_RESOURCES 3
typedef struct mt_rec {
    int res;
    uint64_t token;
} mt_rec;

typedef struct mt_shared {
    fence_gate *g;
    int iters;
    mt_rec *log;
    size_t log_n;                     /* atomic */
    uint64_t last[MT_RESOURCES];      /* plain: only touched while held */
    uint64_t admitted_max[MT_RESOURCES];
    int violations, bad_status, bad_mark; /* atomic */
    int admitted, stale;              /* atomic */
} mt_shared;

typedef struct mt_arg {
    mt_shared *s;
    unsigned seed;
} mt_arg;

static const char *mt_names[MT_RESOURCES] = {"alpha", "beta", "gamma"};

static void *mt_writer(void *arg)
{
    mt_arg *a = arg;
    mt_shared *s = a->s;
    for (int i = 0; i < s->iters; i++) {
        int r = (int)(rand_r(&a->seed) % MT_RESOURCES);
        /* Tokens climb with i, jittered so that threads overtake each
         * other and many writes are stale. */
        uint64_t token = (uint64_t)i + 1 + (uint64_t)(rand_r(&a->seed) % 24);
        fence_gate_txn *t = NULL;
        fence_stale st;
        int rc = fence_gate_begin(s->g, mt_names[r], token, NULL, &t, &st);
        if (rc == FENCE_STALE) {
            __atomic_add_fetch(&s->stale, 1, __ATOMIC_RELAXED);
            if (st.highest <= token || st.offered != token ||
                strcmp(st.object, mt_names[r]) != 0) {
                __atomic_add_fetch(&s->bad_mark, 1, __ATOMIC_RELAXED);
            }
            continue;
        }
        if (rc != FENCE_OK) {
            __atomic_add_fetch(&s->bad_status, 1, __ATOMIC_RELAXED);
            continue;
        }
        if (fence_gate_txn_mark(t) > token || st.offered != 0) {
            __atomic_add_fetch(&s->bad_mark, 1, __ATOMIC_RELAXED);
        }
        if (rand_r(&a->seed) % 4 == 0) {
            sched_yield(); /* a slow writer: others get to try meanwhile */
        }
        /* The "write": plain memory, guarded only by the gate (TSan
         * checks that), plus a log in the order writes happened. */
        if (token < s->last[r]) {
            __atomic_add_fetch(&s->violations, 1, __ATOMIC_RELAXED);
        }
        s->last[r] = token;
        if (token > s->admitted_max[r]) {
            s->admitted_max[r] = token;
        }
        size_t k = __atomic_fetch_add(&s->log_n, 1, __ATOMIC_RELAXED);
        s->log[k].res = r;
        s->log[k].token = token;
        __atomic_add_fetch(&s->admitted, 1, __ATOMIC_RELAXED);
        if (fence_gate_commit(t) != FENCE_OK) {
            __atomic_add_fetch(&s->bad_status, 1, __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

START_TEST(test_many_threads)
{
    enum { NTHREADS = 8 };
    /* Persistent commits go through the disk: fewer of them. */
    int iters = gu_scale(_i == 0 ? 2000 : 1000);
    mt_shared s;
    memset(&s, 0, sizeof s);
    s.g = gu_open_opts(_i, 20000, FENCE_GATE_SYNC_NORMAL);
    s.iters = iters;
    s.log = calloc((size_t)NTHREADS * (size_t)iters, sizeof *s.log);
    ck_assert_ptr_nonnull(s.log);
    pthread_t th[NTHREADS];
    mt_arg args[NTHREADS];
    for (int k = 0; k < NTHREADS; k++) {
        args[k].s = &s;
        args[k].seed = (unsigned)(k * 7919 + 17);
        ck_assert_int_eq(pthread_create(&th[k], NULL, mt_writer, &args[k]), 0);
    }
    for (int k = 0; k < NTHREADS; k++) {
        pthread_join(th[k], NULL);
    }
    ck_assert_int_eq(s.bad_status, 0);
    ck_assert_int_eq(s.bad_mark, 0);
    ck_assert_int_eq(s.violations, 0);
    ck_assert_int_eq(s.admitted + s.stale, NTHREADS * iters);
    ck_assert_int_gt(s.admitted, 0);
    ck_assert_int_gt(s.stale, 0);
    /* The log, in the order the writes happened: per resource, tokens
     * never go down. */
    uint64_t prev[MT_RESOURCES] = {0};
    ck_assert_uint_eq(s.log_n, (size_t)s.admitted);
    for (size_t k = 0; k < s.log_n; k++) {
        mt_rec *rec = &s.log[k];
        ck_assert_msg(rec->token >= prev[rec->res], "write %zu: %s token %llu after %llu", k,
                      mt_names[rec->res], (unsigned long long)rec->token,
                      (unsigned long long)prev[rec->res]);
        prev[rec->res] = rec->token;
    }
    for (int r = 0; r < MT_RESOURCES; r++) {
        ck_assert_uint_eq(gu_mark(s.g, mt_names[r]), s.admitted_max[r]);
    }
    free(s.log);
    gu_close(s.g);
}
END_TEST

static Suite *threads_suite(void)
{
    Suite *s = suite_create("gate_threads");
    TCase *tc = tcase_create("concurrency");
    tcase_add_checked_fixture(tc, gu_setup, gu_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_ab_interleaving, 0, 2);
    tcase_add_loop_test(tc, test_wait_times_out, 0, 2);
    tcase_add_loop_test(tc, test_many_threads, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(threads_suite());
}
