/* test_gate_args.c -- the gate's misuse and its messages (lib/gate): bad
 * arguments and states refused with a reason, and fence_gate_errmsg()
 * kept per gate and per thread.  Loop tests run each case twice: _i == 0
 * in memory, _i == 1 persistent. */
#include "gateutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Bad arguments and states                                             */
/* ------------------------------------------------------------------ */

START_TEST(test_bad_arguments)
{
    fence_gate_options o;
    fence_gate *g = NULL;
    fence_gate_options_init(NULL); /* no-op */

    ck_assert_int_eq(fence_gate_open(NULL, NULL), FENCE_EINVAL);
    fence_gate_options_init(&o);
    o.wait_ms = -1;
    ck_assert_int_eq(fence_gate_open(&g, &o), FENCE_EINVAL);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "wait_ms"));
    ck_assert_int_eq(fence_gate_begin(g, "r", 1, NULL, &(fence_gate_txn *){NULL}, NULL), FENCE_ESTATE);
    ck_assert_int_eq(fence_gate_close(g), FENCE_OK);
    o.wait_ms = FENCE_GATE_WAIT_MAX_MS + 1;
    ck_assert_int_eq(fence_gate_open(&g, &o), FENCE_EINVAL);
    fence_gate_close(g);
    fence_gate_options_init(&o);
    o.synchronous = 7;
    ck_assert_int_eq(fence_gate_open(&g, &o), FENCE_EINVAL);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "synchronous"));
    fence_gate_close(g);
    fence_gate_options_init(&o);
    o.path = "";
    ck_assert_int_eq(fence_gate_open(&g, &o), FENCE_EINVAL);
    fence_gate_close(g);
    /* A file that cannot be opened: EDB, and a handle that says why. */
    o.path = "/nonexistent-dir-for-fence/x/gate.db";
    ck_assert_int_eq(fence_gate_open(&g, &o), FENCE_EDB);
    ck_assert_ptr_nonnull(g);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "/nonexistent-dir-for-fence"));
    uint64_t m = 1;
    ck_assert_int_eq(fence_gate_mark(g, "r", &m), FENCE_ESTATE);
    ck_assert_int_eq(fence_gate_close(g), FENCE_OK);
    /* A folder is not a database file. */
    o.path = gu_tmp_dir;
    ck_assert_int_eq(fence_gate_open(&g, &o), FENCE_EDB);
    fence_gate_close(g);

    ck_assert_int_eq(fence_gate_close(NULL), FENCE_OK);
    ck_assert_ptr_nonnull(fence_gate_errmsg(NULL));
    ck_assert_int_eq(fence_gate_is_persistent(NULL), 0);
    ck_assert_uint_eq(fence_gate_txn_token(NULL), 0);
    ck_assert_str_eq(fence_gate_txn_resource(NULL), "");
    ck_assert_str_eq(fence_gate_txn_holder(NULL), "");
    ck_assert_int_eq(fence_gate_commit(NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_gate_abort(NULL), FENCE_EINVAL);

    for (int persistent = 0; persistent <= 1; persistent++) {
        g = gu_open(persistent, 2000);
        fence_gate_txn *t = NULL;
        char big[FENCE_NAME_MAX + 2];
        memset(big, 'x', sizeof big - 1);
        big[sizeof big - 1] = '\0';

        ck_assert_int_eq(fence_gate_begin(NULL, "r", 1, NULL, &t, NULL), FENCE_EINVAL);
        ck_status(fence_gate_begin(g, "r", 1, NULL, NULL, NULL), FENCE_EINVAL, g);
        ck_status(fence_gate_begin(g, NULL, 1, NULL, &t, NULL), FENCE_EINVAL, g);
        ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "NULL"));
        ck_status(fence_gate_begin(g, "", 1, NULL, &t, NULL), FENCE_EINVAL, g);
        ck_status(fence_gate_begin(g, big, 1, NULL, &t, NULL), FENCE_EINVAL, g);
        ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "longer than"));
        ck_assert_ptr_null(t);

        ck_assert_int_eq(fence_gate_mark(NULL, "r", &m), FENCE_EINVAL);
        ck_status(fence_gate_mark(g, "r", NULL), FENCE_EINVAL, g);
        ck_status(fence_gate_mark(g, NULL, &m), FENCE_EINVAL, g);
        ck_status(fence_gate_mark(g, "", &m), FENCE_EINVAL, g);
        ck_status(fence_gate_mark(g, big, &m), FENCE_EINVAL, g);

        /* A success clears the thread's message. */
        ck_status(fence_gate_mark(g, "r", &m), FENCE_OK, g);
        ck_assert_str_eq(fence_gate_errmsg(g), "");
        gu_close(g);
    }
}
END_TEST

START_TEST(test_bad_holders)
{
    static const char *bad[] = {
        "",                                   /* empty: use NULL for none */
        "0123456789abcdef0123456789abcde",    /* 31 */
        "0123456789abcdef0123456789abcdef0",  /* 33 */
        "0123456789abcdef0123456789abcdef0123456789abcdef", /* 48 */
        "0123456789ABCDEF0123456789abcdef",   /* uppercase */
        "0123456789abcdeg0123456789abcdef",   /* 'g' */
        "0123456789abcdef 123456789abcdef",   /* a space */
        "-123456789abcdef0123456789abcdef",   /* a sign */
        "0x23456789abcdef0123456789abcdef",   /* a prefix */
        "0123456789abcdef\xc3\xa9" "0123456789abcd", /* a non-ASCII byte */
    };
    fence_gate *g = gu_open(_i, 0); /* wait 0: a held resource would time out */
    ck_status(gu_write_as(g, "r", 5, GU_HA, NULL, NULL), FENCE_OK, g);
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        for (uint64_t token = 4; token <= 6; token++) { /* older, equal, higher */
            fence_gate_txn *t = (fence_gate_txn *)&t;
            fence_stale st;
            memset(&st, 0x5a, sizeof st);
            ck_status(fence_gate_begin(g, "r", token, bad[k], &t, &st), FENCE_EINVAL, g);
            ck_assert_ptr_null(t);
            ck_assert(gu_stale_is_zero(&st));
            ck_assert_msg(strstr(fence_gate_errmsg(g), "holder") != NULL, "bad[%zu]: %s", k,
                          fence_gate_errmsg(g));
            ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "32 lowercase hex"));
        }
        /* A bad holder on a new resource creates nothing either. */
        ck_status(fence_gate_begin(g, "fresh", 1, bad[k], &(fence_gate_txn *){NULL}, NULL),
                  FENCE_EINVAL, g);
    }
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "offset 16"));
    /* Nothing changed, and nothing is held (wait 0 would time out). */
    ck_assert_uint_eq(gu_mark(g, "r"), 5);
    ck_assert_uint_eq(gu_mark(g, "fresh"), 0);
    ck_status(gu_write_as(g, "r", 5, GU_HA, NULL, NULL), FENCE_OK, g);
    ck_status(gu_write_as(g, "r", 5, GU_HB, NULL, NULL), FENCE_STALE, g);
    ck_status(gu_write_as(g, "fresh", 1, GU_HB, NULL, NULL), FENCE_OK, g);
    /* The messages say what is wrong. */
    fence_gate_txn *t = NULL;
    ck_status(fence_gate_begin(g, "r", 6, bad[1], &t, NULL), FENCE_EINVAL, g);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "only 31 characters"));
    ck_status(fence_gate_begin(g, "r", 6, bad[2], &t, NULL), FENCE_EINVAL, g);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "more than 32 characters"));
    ck_status(fence_gate_begin(g, "r", 6, bad[4], &t, NULL), FENCE_EINVAL, g);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "0x41 ('A') at offset 10"));
    ck_status(fence_gate_begin(g, "r", 6, bad[0], &t, NULL), FENCE_EINVAL, g);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "only 0 characters"));
    /* A well-formed one is fine, and clears the message. */
    ck_status(fence_gate_begin(g, "r", 6, GU_HB, &t, NULL), FENCE_OK, g);
    ck_assert_str_eq(fence_gate_errmsg(g), "");
    ck_status(fence_gate_abort(t), FENCE_OK, g);
    gu_close(g);
}
END_TEST

START_TEST(test_close_with_open_txn)
{
    fence_gate *g = gu_open(_i, 2000);
    fence_gate_txn *t = NULL;
    ck_status(fence_gate_begin(g, "r", 3, NULL, &t, NULL), FENCE_OK, g);
    ck_assert_int_eq(fence_gate_close(g), FENCE_ESTATE);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "still open"));
    ck_status(fence_gate_commit(t), FENCE_OK, g);
    ck_assert_uint_eq(gu_mark(g, "r"), 3);
    gu_close(g);
}
END_TEST

START_TEST(test_same_thread_rebegin)
{
    fence_gate *g = gu_open(_i, 5000);
    fence_gate_txn *t = NULL, *t2 = NULL;
    ck_status(fence_gate_begin(g, "r", 3, NULL, &t, NULL), FENCE_OK, g);
    int64_t start = tu_now_ms();
    ck_status(fence_gate_begin(g, "r", 4, NULL, &t2, NULL), FENCE_ESTATE, g);
    ck_assert_int_lt(tu_now_ms() - start, 1000); /* refused at once, no self-wait */
    ck_assert_ptr_null(t2);
    if (_i == 0) { /* in memory another resource is independent */
        ck_status(fence_gate_begin(g, "other", 4, NULL, &t2, NULL), FENCE_OK, g);
        ck_status(fence_gate_commit(t2), FENCE_OK, g);
    } else { /* persistent: the file is the unit */
        ck_status(fence_gate_begin(g, "other", 4, NULL, &t2, NULL), FENCE_ESTATE, g);
    }
    ck_status(fence_gate_commit(t), FENCE_OK, g);
    gu_close(g);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Messages: per thread, per gate                                       */
/* ------------------------------------------------------------------ */

/* Two threads share a gate and take turns (a barrier between steps):
 * each reads only its own message. */
typedef struct msg_state {
    fence_gate *g;
    pthread_barrier_t step;
    char seen[4][160]; /* what the other thread read at each step */
} msg_state;

static void copy_msg(char *dst, const fence_gate *g)
{
    snprintf(dst, 160, "%s", fence_gate_errmsg(g));
}

static void *msg_other(void *arg)
{
    msg_state *s = arg;
    fence_gate_txn *t = NULL;
    pthread_barrier_wait(&s->step); /* 1: the main thread failed */
    copy_msg(s->seen[0], s->g);
    fence_gate_begin(s->g, "", 1, NULL, &t, NULL); /* fails: empty name */
    copy_msg(s->seen[1], s->g);
    pthread_barrier_wait(&s->step); /* 2: the main thread looked */
    pthread_barrier_wait(&s->step); /* 3: the main thread succeeded */
    copy_msg(s->seen[2], s->g);
    uint64_t m = 0;
    fence_gate_mark(s->g, "r", &m); /* succeeds */
    copy_msg(s->seen[3], s->g);
    pthread_barrier_wait(&s->step); /* 4 */
    return NULL;
}

START_TEST(test_errmsg_per_thread)
{
    msg_state s;
    memset(&s, 0, sizeof s);
    s.g = gu_open(_i, 2000);
    pthread_barrier_init(&s.step, NULL, 2);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, msg_other, &s), 0);

    fence_gate_txn *t = NULL;
    ck_status(fence_gate_begin(s.g, "r", 0, NULL, &t, NULL), FENCE_ENOTOKEN, s.g);
    pthread_barrier_wait(&s.step); /* 1 */
    pthread_barrier_wait(&s.step); /* 2 */
    /* The other thread saw none of our message, and its own failure did
     * not replace ours. */
    ck_assert_str_eq(s.seen[0], "");
    ck_assert_ptr_nonnull(strstr(s.seen[1], "resource is empty"));
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(s.g), "token 0"));
    ck_assert_ptr_null(strstr(fence_gate_errmsg(s.g), "empty"));

    ck_status(gu_write_once(s.g, "r", 3, NULL), FENCE_OK, s.g);
    ck_assert_str_eq(fence_gate_errmsg(s.g), ""); /* our success cleared ours */
    pthread_barrier_wait(&s.step); /* 3 */
    pthread_barrier_wait(&s.step); /* 4 */
    /* ... and not the other thread's; its own success cleared it. */
    ck_assert_ptr_nonnull(strstr(s.seen[2], "resource is empty"));
    ck_assert_str_eq(s.seen[3], "");
    pthread_join(th, NULL);
    pthread_barrier_destroy(&s.step);
    gu_close(s.g);
}
END_TEST

START_TEST(test_errmsg_per_gate)
{
    fence_gate *a = gu_open(0, 2000);
    fence_gate *b = gu_open(_i, 2000);
    fence_gate_txn *t = NULL;
    uint64_t m = 0;
    ck_status(fence_gate_begin(a, "r", 0, NULL, &t, NULL), FENCE_ENOTOKEN, a);
    ck_status(fence_gate_mark(b, "", &m), FENCE_EINVAL, b);
    /* A failure on b leaves a's message alone, and each reads its own. */
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(a), "token 0"));
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(b), "resource is empty"));
    /* A success on b clears only b's. */
    ck_status(fence_gate_mark(b, "r", &m), FENCE_OK, b);
    ck_assert_str_eq(fence_gate_errmsg(b), "");
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(a), "token 0"));
    gu_close(a);

    /* A new gate starts with no message, even where a closed one that
     * failed had its handle. */
    for (int k = 0; k < 4; k++) {
        fence_gate *c = gu_open(0, 2000);
        ck_status(fence_gate_begin(c, "r", 0, NULL, &t, NULL), FENCE_ENOTOKEN, c);
        ck_status(fence_gate_close(c), FENCE_OK, c);
        c = gu_open(0, 2000);
        ck_assert_str_eq(fence_gate_errmsg(c), "");
        gu_close(c);
    }

    /* Many failing gates at once: a message is the gate's own or "" (the
     * oldest may be dropped), never another gate's. */
    enum { N = 12 };
    fence_gate *gs[N];
    char want[N][32];
    for (int k = 0; k < N; k++) {
        gs[k] = gu_open(0, 2000);
        snprintf(want[k], sizeof want[k], "gate-%d-", k);
        ck_status(fence_gate_begin(gs[k], want[k], 0, NULL, &t, NULL), FENCE_ENOTOKEN, gs[k]);
    }
    for (int k = 0; k < N; k++) {
        const char *msg = fence_gate_errmsg(gs[k]);
        ck_assert_msg(msg[0] == '\0' || strstr(msg, want[k]) != NULL, "gate %d reads \"%s\"",
                      k, msg);
    }
    /* The most recent ones are all kept. */
    for (int k = N - 4; k < N; k++) {
        ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(gs[k]), want[k]));
    }
    for (int k = 0; k < N; k++) {
        gu_close(gs[k]);
    }
    gu_close(b);
}
END_TEST

static Suite *args_suite(void)
{
    Suite *s = suite_create("gate_args");
    TCase *tc = tcase_create("args");
    tcase_add_checked_fixture(tc, gu_setup, gu_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_bad_arguments);
    tcase_add_loop_test(tc, test_bad_holders, 0, 2);
    tcase_add_loop_test(tc, test_close_with_open_txn, 0, 2);
    tcase_add_loop_test(tc, test_same_thread_rebegin, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase_create("errmsg");
    tcase_add_checked_fixture(tc, gu_setup, gu_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_errmsg_per_thread, 0, 2);
    tcase_add_loop_test(tc, test_errmsg_per_gate, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(args_suite());
}
