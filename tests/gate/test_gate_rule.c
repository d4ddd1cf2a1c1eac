/* test_gate_rule.c -- the gate's rule (lib/gate), in memory and backed
 * by a SQLite file: stale writes rejected, equal and higher admitted,
 * marks kept per resource and across reopen, names are only names, and
 * what begin reports: the stale description and the txn's mark.  Loop
 * tests run each case twice: _i == 0 in memory, _i == 1 persistent. */
#include "gateutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* The rule                                                             */
/* ------------------------------------------------------------------ */

START_TEST(test_stale_equal_higher)
{
    fence_gate *g = gu_open(_i, 2000);
    uint64_t mark = 99;
    ck_assert_uint_eq(gu_mark(g, "r"), 0);
    ck_status(gu_write_once(g, "r", 33, &mark), FENCE_OK, g);
    ck_assert_uint_eq(mark, 0); /* never written before */
    ck_assert_uint_eq(gu_mark(g, "r"), 33);

    ck_status(gu_write_once(g, "r", 33, &mark), FENCE_OK, g); /* equal: same holder */
    ck_assert_uint_eq(mark, 33);
    ck_status(gu_write_once(g, "r", 34, &mark), FENCE_OK, g); /* higher */
    ck_assert_uint_eq(mark, 33);
    ck_assert_uint_eq(gu_mark(g, "r"), 34);

    ck_status(gu_write_once(g, "r", 33, &mark), FENCE_STALE, g); /* older */
    ck_assert_uint_eq(mark, 34);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "stale token 33"));
    ck_status(gu_write_once(g, "r", 1, NULL), FENCE_STALE, g);
    ck_assert_uint_eq(gu_mark(g, "r"), 34);

    /* Other resources have their own marks. */
    ck_status(gu_write_once(g, "s", 1, &mark), FENCE_OK, g);
    ck_assert_uint_eq(gu_mark(g, "s"), 1);
    ck_assert_uint_eq(gu_mark(g, "r"), 34);
    /* The largest valid token. */
    ck_status(gu_write_once(g, "r", FENCE_TOKEN_MAX, NULL), FENCE_OK, g);
    ck_assert_uint_eq(gu_mark(g, "r"), FENCE_TOKEN_MAX);
    ck_status(gu_write_once(g, "r", FENCE_TOKEN_MAX - 1, NULL), FENCE_STALE, g);
    gu_close(g);
}
END_TEST

START_TEST(test_abort_records_nothing)
{
    fence_gate *g = gu_open(_i, 2000);
    ck_status(gu_write_once(g, "r", 10, NULL), FENCE_OK, g);
    fence_gate_txn *t = NULL;
    ck_status(fence_gate_begin(g, "r", 50, &t, NULL), FENCE_OK, g);
    ck_status(fence_gate_abort(t), FENCE_OK, g);
    ck_assert_uint_eq(gu_mark(g, "r"), 10);
    ck_status(gu_write_once(g, "r", 40, NULL), FENCE_OK, g); /* 40 < 50 is fine */
    ck_assert_uint_eq(gu_mark(g, "r"), 40);
    /* A resource first seen in an aborted txn stays unwritten. */
    ck_status(fence_gate_begin(g, "new", 7, &t, NULL), FENCE_OK, g);
    ck_status(fence_gate_abort(t), FENCE_OK, g);
    ck_assert_uint_eq(gu_mark(g, "new"), 0);
    gu_close(g);
}
END_TEST

START_TEST(test_token_zero_rejected)
{
    fence_gate *g = gu_open(_i, 2000);
    fence_gate_txn *t = (fence_gate_txn *)&t; /* must be reset to NULL */
    fence_stale st;
    memset(&st, 0x5a, sizeof st); /* must be zeroed */
    ck_status(fence_gate_begin(g, "r", 0, &t, &st), FENCE_ENOTOKEN, g);
    ck_assert_ptr_null(t);
    ck_assert(gu_stale_is_zero(&st));
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "token 0"));
    ck_status(fence_gate_begin(g, "r", FENCE_TOKEN_MAX + 1, &t, NULL), FENCE_ENOTOKEN, g);
    ck_status(fence_gate_begin(g, "r", UINT64_MAX, &t, NULL), FENCE_ENOTOKEN, g);
    ck_assert_uint_eq(gu_mark(g, "r"), 0);
    /* A rejected token 0 does not even pass an unwritten resource. */
    ck_status(gu_write_once(g, "r", 1, NULL), FENCE_OK, g);
    ck_status(fence_gate_begin(g, "r", 0, &t, NULL), FENCE_ENOTOKEN, g);
    ck_assert_uint_eq(gu_mark(g, "r"), 1);
    gu_close(g);
}
END_TEST

START_TEST(test_persists_across_reopen)
{
    fence_gate *g = gu_open(1, 2000);
    ck_status(gu_write_once(g, "orders/1", 10, NULL), FENCE_OK, g);
    ck_status(gu_write_once(g, "orders/2", 3, NULL), FENCE_OK, g);
    gu_close(g);

    g = gu_open(1, 2000);
    ck_assert_uint_eq(gu_mark(g, "orders/1"), 10);
    ck_assert_uint_eq(gu_mark(g, "orders/2"), 3);
    uint64_t mark = 0;
    ck_status(gu_write_once(g, "orders/1", 9, &mark), FENCE_STALE, g);
    ck_assert_uint_eq(mark, 10);
    ck_status(gu_write_once(g, "orders/1", 10, NULL), FENCE_OK, g);
    gu_close(g);

    /* An in-memory gate starts empty every time. */
    g = gu_open(0, 2000);
    ck_status(gu_write_once(g, "orders/1", 10, NULL), FENCE_OK, g);
    gu_close(g);
    g = gu_open(0, 2000);
    ck_assert_uint_eq(gu_mark(g, "orders/1"), 0);
    gu_close(g);
}
END_TEST

START_TEST(test_injection_names_are_names)
{
    static const char *names[] = {
        "x'); DROP TABLE fence_gate_marks; --", "' OR '1'='1", "%s%s%n%x",
        "fence_gate_marks", "a\"b\\c", "\xe5\x90\x8d\xe5\x89\x8d", " ", "\n\t", "r",
    };
    size_t n = sizeof names / sizeof names[0];
    fence_gate *g = gu_open(_i, 2000);
    for (size_t k = 0; k < n; k++) {
        ck_status(gu_write_once(g, names[k], 100 + k, NULL), FENCE_OK, g);
    }
    for (size_t k = 0; k < n; k++) {
        ck_assert_uint_eq(gu_mark(g, names[k]), 100 + k);
        ck_status(gu_write_once(g, names[k], 99, NULL), FENCE_STALE, g);
    }
    /* The longest allowed name works and is distinct from its prefix. */
    char longname[FENCE_NAME_MAX + 1];
    memset(longname, 'n', FENCE_NAME_MAX);
    longname[FENCE_NAME_MAX] = '\0';
    ck_status(gu_write_once(g, longname, 5, NULL), FENCE_OK, g);
    longname[FENCE_NAME_MAX - 1] = '\0';
    ck_assert_uint_eq(gu_mark(g, longname), 0);
    gu_close(g);
    if (_i == 1) { /* the table survived, and so did the marks */
        g = gu_open(1, 2000);
        ck_assert_uint_eq(gu_mark(g, names[0]), 100);
        ck_assert_uint_eq(gu_mark(g, names[n - 1]), 100 + n - 1);
        gu_close(g);
    }
}
END_TEST

/* Many distinct names: the in-memory table grows, nothing gets mixed up. */
START_TEST(test_many_resources)
{
    int n = gu_scale(_i == 0 ? 5000 : 300);
    fence_gate *g = gu_open_opts(_i, 2000, FENCE_GATE_SYNC_NORMAL);
    char name[64];
    for (int k = 0; k < n; k++) {
        snprintf(name, sizeof name, "res-%d", k);
        ck_status(gu_write_once(g, name, (uint64_t)k + 1, NULL), FENCE_OK, g);
    }
    for (int k = 0; k < n; k++) {
        snprintf(name, sizeof name, "res-%d", k);
        ck_assert_uint_eq(gu_mark(g, name), (uint64_t)k + 1);
    }
    snprintf(name, sizeof name, "res-%d", n);
    ck_assert_uint_eq(gu_mark(g, name), 0);
    gu_close(g);
}
END_TEST

/* ------------------------------------------------------------------ */
/* What begin reports: the stale description, the txn's mark            */
/* ------------------------------------------------------------------ */

START_TEST(test_stale_description)
{
    fence_gate *g = gu_open(_i, 2000);
    ck_status(gu_write_once(g, "acct/7", 34, NULL), FENCE_OK, g);

    fence_gate_txn *t = NULL;
    fence_stale st;
    memset(&st, 0x5a, sizeof st);
    ck_status(fence_gate_begin(g, "acct/7", 33, &t, &st), FENCE_STALE, g);
    ck_assert_ptr_null(t);
    ck_assert_uint_eq(st.offered, 33);
    ck_assert_uint_eq(st.highest, 34);
    ck_assert_int_eq(st.kind, FENCE_OBJECT_RESOURCE);
    ck_assert_str_eq(st.object, "acct/7");
    ck_assert_str_eq(st.holder, ""); /* the gate records no holder */
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "stale token 33"));

    /* The same struct, reused by a call that succeeds: zeroed again. */
    ck_status(fence_gate_begin(g, "acct/7", 35, &t, &st), FENCE_OK, g);
    ck_assert(gu_stale_is_zero(&st));
    ck_status(fence_gate_commit(t), FENCE_OK, g);

    /* Zeroed by every other failure too, and when the gate is NULL. */
    memset(&st, 0x5a, sizeof st);
    ck_status(fence_gate_begin(g, "", 40, &t, &st), FENCE_EINVAL, g);
    ck_assert(gu_stale_is_zero(&st));
    memset(&st, 0x5a, sizeof st);
    ck_status(fence_gate_begin(g, "acct/7", 0, &t, &st), FENCE_ENOTOKEN, g);
    ck_assert(gu_stale_is_zero(&st));
    memset(&st, 0x5a, sizeof st);
    ck_status(fence_gate_begin(g, "acct/7", 40, NULL, &st), FENCE_EINVAL, g);
    ck_assert(gu_stale_is_zero(&st));
    memset(&st, 0x5a, sizeof st);
    ck_assert_int_eq(fence_gate_begin(NULL, "acct/7", 40, &t, &st), FENCE_EINVAL);
    ck_assert(gu_stale_is_zero(&st));

    /* The longest name fits in object whole, and odd bytes stay as they are. */
    char longname[FENCE_NAME_MAX + 1];
    memset(longname, 'q', FENCE_NAME_MAX);
    longname[FENCE_NAME_MAX] = '\0';
    longname[3] = '\n';
    ck_status(gu_write_once(g, longname, 9, NULL), FENCE_OK, g);
    ck_status(fence_gate_begin(g, longname, 8, &t, &st), FENCE_STALE, g);
    ck_assert_str_eq(st.object, longname);
    ck_assert_uint_eq(strlen(st.object), FENCE_NAME_MAX);
    ck_assert_uint_eq(st.offered, 8);
    ck_assert_uint_eq(st.highest, 9);
    ck_assert_uint_eq(gu_mark(g, "acct/7"), 35);
    gu_close(g);
}
END_TEST

START_TEST(test_null_stale)
{
    fence_gate *g = gu_open(_i, 2000);
    fence_gate_txn *t = NULL;
    ck_status(fence_gate_begin(g, "r", 5, &t, NULL), FENCE_OK, g);
    ck_assert_uint_eq(fence_gate_txn_mark(t), 0);
    ck_status(fence_gate_commit(t), FENCE_OK, g);
    /* A stale write without a description: the status and the message. */
    ck_status(fence_gate_begin(g, "r", 4, &t, NULL), FENCE_STALE, g);
    ck_assert_ptr_null(t);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "stale token 4"));
    ck_status(fence_gate_begin(g, "r", 0, &t, NULL), FENCE_ENOTOKEN, g);
    ck_assert_uint_eq(gu_mark(g, "r"), 5);
    gu_close(g);
}
END_TEST

START_TEST(test_txn_mark)
{
    fence_gate *g = gu_open(_i, 2000);
    fence_gate_txn *t = NULL;
    ck_assert_uint_eq(fence_gate_txn_mark(NULL), 0);

    /* Never written: 0. */
    ck_status(fence_gate_begin(g, "m", 10, &t, NULL), FENCE_OK, g);
    ck_assert_uint_eq(fence_gate_txn_mark(t), 0);
    ck_assert_uint_eq(fence_gate_txn_token(t), 10);
    ck_status(fence_gate_commit(t), FENCE_OK, g);

    /* Higher: the old mark; it does not move while the txn is open. */
    ck_status(fence_gate_begin(g, "m", 12, &t, NULL), FENCE_OK, g);
    ck_assert_uint_eq(fence_gate_txn_mark(t), 10);
    ck_assert_uint_eq(gu_mark(g, "m"), 10); /* not seen before commit */
    ck_assert_uint_eq(fence_gate_txn_mark(t), 10);
    ck_status(fence_gate_abort(t), FENCE_OK, g);

    /* Equal: the mark is the token. */
    ck_status(fence_gate_begin(g, "m", 10, &t, NULL), FENCE_OK, g);
    ck_assert_uint_eq(fence_gate_txn_mark(t), 10);
    ck_status(fence_gate_commit(t), FENCE_OK, g);

    /* After a commit of 15, the next txn sees 15. */
    ck_status(gu_write_once(g, "m", 15, NULL), FENCE_OK, g);
    ck_status(fence_gate_begin(g, "m", FENCE_TOKEN_MAX, &t, NULL), FENCE_OK, g);
    ck_assert_uint_eq(fence_gate_txn_mark(t), 15);
    ck_status(fence_gate_abort(t), FENCE_OK, g);
    gu_close(g);

    if (_i == 1) { /* a reopened file: the mark read from disk */
        g = gu_open(1, 2000);
        ck_status(fence_gate_begin(g, "m", 16, &t, NULL), FENCE_OK, g);
        ck_assert_uint_eq(fence_gate_txn_mark(t), 15);
        ck_status(fence_gate_commit(t), FENCE_OK, g);
        gu_close(g);
    }
}
END_TEST

static Suite *rule_suite(void)
{
    Suite *s = suite_create("gate_rule");
    TCase *tc = tcase_create("rule");
    tcase_add_checked_fixture(tc, gu_setup, gu_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_stale_equal_higher, 0, 2);
    tcase_add_loop_test(tc, test_abort_records_nothing, 0, 2);
    tcase_add_loop_test(tc, test_token_zero_rejected, 0, 2);
    tcase_add_test(tc, test_persists_across_reopen);
    tcase_add_loop_test(tc, test_injection_names_are_names, 0, 2);
    tcase_add_loop_test(tc, test_many_resources, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase_create("report");
    tcase_add_checked_fixture(tc, gu_setup, gu_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_stale_description, 0, 2);
    tcase_add_loop_test(tc, test_null_stale, 0, 2);
    tcase_add_loop_test(tc, test_txn_mark, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(rule_suite());
}
