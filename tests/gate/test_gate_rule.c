/* test_gate_rule.c -- the gate's rule (lib/gate), in memory and backed
 * by a SQLite file: the one table of cases of the store rule
 * (tests/common/rule_cases.tsv) against lib/common/rule.c itself and
 * against both backings, one test per row; stale writes rejected, equal and higher admitted,
 * marks kept per resource and across reopen, names are only names, and
 * what begin reports: the stale description and the txn's mark; holders
 * (an equal token admitted only from the same holder) and the upgrade of
 * a file created before holders were recorded.  Loop tests run each case
 * twice: _i == 0 in memory, _i == 1 persistent. */
#include "common.h"
#include "gateutil.h"
#include "rulecases.h"

#include <pthread.h>
#include <sqlite3.h>
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
    ck_status(fence_gate_begin(g, "r", 50, NULL, &t, NULL), FENCE_OK, g);
    ck_status(fence_gate_abort(t), FENCE_OK, g);
    ck_assert_uint_eq(gu_mark(g, "r"), 10);
    ck_status(gu_write_once(g, "r", 40, NULL), FENCE_OK, g); /* 40 < 50 is fine */
    ck_assert_uint_eq(gu_mark(g, "r"), 40);
    /* A resource first seen in an aborted txn stays unwritten. */
    ck_status(fence_gate_begin(g, "new", 7, NULL, &t, NULL), FENCE_OK, g);
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
    ck_status(fence_gate_begin(g, "r", 0, NULL, &t, &st), FENCE_ENOTOKEN, g);
    ck_assert_ptr_null(t);
    ck_assert(gu_stale_is_zero(&st));
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "token 0"));
    ck_status(fence_gate_begin(g, "r", FENCE_TOKEN_MAX + 1, NULL, &t, NULL), FENCE_ENOTOKEN, g);
    ck_status(fence_gate_begin(g, "r", UINT64_MAX, NULL, &t, NULL), FENCE_ENOTOKEN, g);
    ck_assert_uint_eq(gu_mark(g, "r"), 0);
    /* A rejected token 0 does not even pass an unwritten resource. */
    ck_status(gu_write_once(g, "r", 1, NULL), FENCE_OK, g);
    ck_status(fence_gate_begin(g, "r", 0, NULL, &t, NULL), FENCE_ENOTOKEN, g);
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
    ck_status(fence_gate_begin(g, "acct/7", 33, NULL, &t, &st), FENCE_STALE, g);
    ck_assert_ptr_null(t);
    ck_assert_uint_eq(st.offered, 33);
    ck_assert_uint_eq(st.highest, 34);
    ck_assert_int_eq(st.kind, FENCE_OBJECT_RESOURCE);
    ck_assert_str_eq(st.object, "acct/7");
    ck_assert_str_eq(st.holder, ""); /* none was recorded */
    ck_assert_int_eq(st.reason, FENCE_STALE_OLDER);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "stale token 33"));

    /* The same struct, reused by a call that succeeds: zeroed again. */
    ck_status(fence_gate_begin(g, "acct/7", 35, NULL, &t, &st), FENCE_OK, g);
    ck_assert(gu_stale_is_zero(&st));
    ck_status(fence_gate_commit(t), FENCE_OK, g);

    /* Zeroed by every other failure too, and when the gate is NULL. */
    memset(&st, 0x5a, sizeof st);
    ck_status(fence_gate_begin(g, "", 40, NULL, &t, &st), FENCE_EINVAL, g);
    ck_assert(gu_stale_is_zero(&st));
    memset(&st, 0x5a, sizeof st);
    ck_status(fence_gate_begin(g, "acct/7", 0, NULL, &t, &st), FENCE_ENOTOKEN, g);
    ck_assert(gu_stale_is_zero(&st));
    memset(&st, 0x5a, sizeof st);
    ck_status(fence_gate_begin(g, "acct/7", 40, NULL, NULL, &st), FENCE_EINVAL, g);
    ck_assert(gu_stale_is_zero(&st));
    memset(&st, 0x5a, sizeof st);
    ck_assert_int_eq(fence_gate_begin(NULL, "acct/7", 40, NULL, &t, &st), FENCE_EINVAL);
    ck_assert(gu_stale_is_zero(&st));

    /* The longest name fits in object whole, and odd bytes stay as they are. */
    char longname[FENCE_NAME_MAX + 1];
    memset(longname, 'q', FENCE_NAME_MAX);
    longname[FENCE_NAME_MAX] = '\0';
    longname[3] = '\n';
    ck_status(gu_write_once(g, longname, 9, NULL), FENCE_OK, g);
    ck_status(fence_gate_begin(g, longname, 8, NULL, &t, &st), FENCE_STALE, g);
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
    ck_status(fence_gate_begin(g, "r", 5, NULL, &t, NULL), FENCE_OK, g);
    ck_assert_uint_eq(fence_gate_txn_mark(t), 0);
    ck_status(fence_gate_commit(t), FENCE_OK, g);
    /* A stale write without a description: the status and the message. */
    ck_status(fence_gate_begin(g, "r", 4, NULL, &t, NULL), FENCE_STALE, g);
    ck_assert_ptr_null(t);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "stale token 4"));
    ck_status(fence_gate_begin(g, "r", 0, NULL, &t, NULL), FENCE_ENOTOKEN, g);
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
    ck_status(fence_gate_begin(g, "m", 10, NULL, &t, NULL), FENCE_OK, g);
    ck_assert_uint_eq(fence_gate_txn_mark(t), 0);
    ck_assert_uint_eq(fence_gate_txn_token(t), 10);
    ck_status(fence_gate_commit(t), FENCE_OK, g);

    /* Higher: the old mark; it does not move while the txn is open. */
    ck_status(fence_gate_begin(g, "m", 12, NULL, &t, NULL), FENCE_OK, g);
    ck_assert_uint_eq(fence_gate_txn_mark(t), 10);
    ck_assert_uint_eq(gu_mark(g, "m"), 10); /* not seen before commit */
    ck_assert_uint_eq(fence_gate_txn_mark(t), 10);
    ck_status(fence_gate_abort(t), FENCE_OK, g);

    /* Equal: the mark is the token. */
    ck_status(fence_gate_begin(g, "m", 10, NULL, &t, NULL), FENCE_OK, g);
    ck_assert_uint_eq(fence_gate_txn_mark(t), 10);
    ck_status(fence_gate_commit(t), FENCE_OK, g);

    /* After a commit of 15, the next txn sees 15. */
    ck_status(gu_write_once(g, "m", 15, NULL), FENCE_OK, g);
    ck_status(fence_gate_begin(g, "m", FENCE_TOKEN_MAX, NULL, &t, NULL), FENCE_OK, g);
    ck_assert_uint_eq(fence_gate_txn_mark(t), 15);
    ck_status(fence_gate_abort(t), FENCE_OK, g);
    gu_close(g);

    if (_i == 1) { /* a reopened file: the mark read from disk */
        g = gu_open(1, 2000);
        ck_status(fence_gate_begin(g, "m", 16, NULL, &t, NULL), FENCE_OK, g);
        ck_assert_uint_eq(fence_gate_txn_mark(t), 15);
        ck_status(fence_gate_commit(t), FENCE_OK, g);
        gu_close(g);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Holders: an equal token is admitted only from the same holder        */
/* ------------------------------------------------------------------ */

/* begin must refuse as a repeat; checks the description and the message. */
static void expect_repeat(fence_gate *g, const char *res, uint64_t token, const char *holder,
                          const char *recorded)
{
    fence_stale st;
    ck_status(gu_write_as(g, res, token, holder, NULL, &st), FENCE_STALE, g);
    ck_assert_int_eq(st.reason, FENCE_STALE_REPEAT);
    ck_assert_uint_eq(st.offered, token);
    ck_assert_uint_eq(st.highest, token);
    ck_assert_str_eq(st.holder, recorded);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "repeated token"));
}

START_TEST(test_holder_equal_token)
{
    fence_gate *g = gu_open(_i, 2000);
    uint64_t mark = 0;
    /* Equal token, same holder: admitted (one holder writes many times). */
    ck_status(gu_write_as(g, "r", 7, GU_HA, &mark, NULL), FENCE_OK, g);
    ck_assert_uint_eq(mark, 0);
    ck_status(gu_write_as(g, "r", 7, GU_HA, &mark, NULL), FENCE_OK, g);
    ck_assert_uint_eq(mark, 7);
    /* Equal token, another holder: a repeat, the recorded holder reported. */
    expect_repeat(g, "r", 7, GU_HB, GU_HA);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), GU_HA));
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), GU_HB));
    /* Equal token, no holder against a recorded one. */
    expect_repeat(g, "r", 7, NULL, GU_HA);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "this write is from no holder"));
    ck_assert_uint_eq(gu_mark(g, "r"), 7);
    /* ... and still admitted from the recorded holder. */
    ck_status(gu_write_as(g, "r", 7, GU_HA, NULL, NULL), FENCE_OK, g);

    /* Recorded without a holder: equal from no holder admitted, from a
     * holder refused, with holder "". */
    ck_status(gu_write_as(g, "s", 3, NULL, NULL, NULL), FENCE_OK, g);
    ck_status(gu_write_as(g, "s", 3, NULL, &mark, NULL), FENCE_OK, g);
    ck_assert_uint_eq(mark, 3);
    expect_repeat(g, "s", 3, GU_HA, "");
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "accepted from no holder"));
    ck_assert_uint_eq(gu_mark(g, "s"), 3);
    gu_close(g);
}
END_TEST

START_TEST(test_holder_higher_and_older)
{
    fence_gate *g = gu_open(_i, 2000);
    fence_stale st;
    ck_status(gu_write_as(g, "r", 10, GU_HA, NULL, NULL), FENCE_OK, g);
    /* A higher token from any holder is admitted and recorded with it. */
    ck_status(gu_write_as(g, "r", 11, GU_HB, NULL, NULL), FENCE_OK, g);
    ck_assert_uint_eq(gu_mark(g, "r"), 11);
    expect_repeat(g, "r", 11, GU_HA, GU_HB);
    ck_status(gu_write_as(g, "r", 11, GU_HB, NULL, NULL), FENCE_OK, g);
    ck_status(gu_write_as(g, "r", 12, NULL, NULL, NULL), FENCE_OK, g); /* then none */
    expect_repeat(g, "r", 12, GU_HB, "");
    ck_status(gu_write_as(g, "r", 13, GU_HA, NULL, NULL), FENCE_OK, g); /* and a holder again */
    expect_repeat(g, "r", 13, NULL, GU_HA);

    /* Older: reason OLDER, the recorded holder reported, whoever asks. */
    const char *askers[] = {GU_HA, GU_HB, NULL};
    for (int k = 0; k < 3; k++) {
        ck_status(gu_write_as(g, "r", 12, askers[k], NULL, &st), FENCE_STALE, g);
        ck_assert_int_eq(st.reason, FENCE_STALE_OLDER);
        ck_assert_uint_eq(st.highest, 13);
        ck_assert_str_eq(st.holder, GU_HA);
        ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "stale token 12"));
    }
    /* An aborted txn records neither token nor holder. */
    fence_gate_txn *t = NULL;
    ck_status(fence_gate_begin(g, "r", 20, GU_HB, &t, NULL), FENCE_OK, g);
    ck_status(fence_gate_abort(t), FENCE_OK, g);
    ck_assert_uint_eq(gu_mark(g, "r"), 13);
    expect_repeat(g, "r", 13, GU_HB, GU_HA);
    /* Nor does an equal token from the same holder change anything. */
    ck_status(gu_write_as(g, "r", 13, GU_HA, NULL, NULL), FENCE_OK, g);
    expect_repeat(g, "r", 13, GU_HB, GU_HA);
    gu_close(g);

    if (_i == 1) { /* the holder is on disk: a reopened file still knows it */
        g = gu_open(1, 2000);
        ck_assert_uint_eq(gu_mark(g, "r"), 13);
        expect_repeat(g, "r", 13, GU_HB, GU_HA);
        ck_status(gu_write_as(g, "r", 13, GU_HA, NULL, NULL), FENCE_OK, g);
        gu_close(g);
    }
}
END_TEST

START_TEST(test_txn_holder)
{
    fence_gate *g = gu_open(_i, 2000);
    fence_gate_txn *t = NULL;
    ck_assert_str_eq(fence_gate_txn_holder(NULL), "");
    ck_status(fence_gate_begin(g, "r", 5, NULL, &t, NULL), FENCE_OK, g);
    ck_assert_str_eq(fence_gate_txn_holder(t), "");
    ck_status(fence_gate_commit(t), FENCE_OK, g);

    /* A copy: the caller's string may change or go away after begin. */
    char h[FENCE_HOLDER_LEN + 1];
    memcpy(h, GU_HA, sizeof h);
    ck_status(fence_gate_begin(g, "r", 6, h, &t, NULL), FENCE_OK, g);
    memset(h, 'x', FENCE_HOLDER_LEN);
    ck_assert_str_eq(fence_gate_txn_holder(t), GU_HA);
    ck_assert_uint_eq(fence_gate_txn_mark(t), 5);
    ck_status(fence_gate_commit(t), FENCE_OK, g);
    expect_repeat(g, "r", 6, GU_HB, GU_HA); /* the copy was recorded */
    gu_close(g);
}
END_TEST

/* Many resources, each with its own holder: nothing gets mixed up. */
START_TEST(test_holder_per_resource)
{
    int n = gu_scale(_i == 0 ? 500 : 100);
    fence_gate *g = gu_open_opts(_i, 2000, FENCE_GATE_SYNC_NORMAL);
    char name[64];
    for (int k = 0; k < n; k++) {
        snprintf(name, sizeof name, "res-%d", k);
        ck_status(gu_write_as(g, name, 9, k % 3 == 0 ? NULL : k % 3 == 1 ? GU_HA : GU_HB,
                              NULL, NULL), FENCE_OK, g);
    }
    for (int k = 0; k < n; k++) {
        snprintf(name, sizeof name, "res-%d", k);
        const char *mine = k % 3 == 0 ? NULL : k % 3 == 1 ? GU_HA : GU_HB;
        const char *other = k % 3 == 1 ? GU_HB : GU_HA;
        ck_status(gu_write_as(g, name, 9, mine, NULL, NULL), FENCE_OK, g);
        expect_repeat(g, name, 9, other, mine != NULL ? mine : "");
    }
    gu_close(g);
}
END_TEST

/* ------------------------------------------------------------------ */
/* A file created before holders were recorded                          */
/* ------------------------------------------------------------------ */

/* The table as the previous version created it (sql/gate/schema.sql
 * before holders), with two marks. */
static const char old_schema[] =
    "CREATE TABLE IF NOT EXISTS fence_gate_marks (\n"
    "    resource TEXT PRIMARY KEY NOT NULL,\n"
    "    mark     INTEGER NOT NULL CHECK (typeof(mark) = 'integer' AND mark >= 1)\n"
    ") WITHOUT ROWID;\n";

static void exec_or_fail(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
    ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, err != NULL ? err : "?");
}

static void make_old_file(const char *path)
{
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    exec_or_fail(db, "PRAGMA journal_mode=WAL");
    exec_or_fail(db, old_schema);
    exec_or_fail(db, "INSERT INTO fence_gate_marks (resource, mark) VALUES ('old/1', 40), "
                     "('old/2', 7)");
    sqlite3_close(db);
}

/* 1 when the file's table has the holder column. */
static int has_holder_column(const char *path)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT count(*) FROM pragma_table_info("
                                            "'fence_gate_marks') WHERE name = 'holder'",
                                        -1, &st, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    int n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
}

START_TEST(test_upgrade_old_file)
{
    make_old_file(gu_db_path);
    ck_assert_int_eq(has_holder_column(gu_db_path), 0);
    fence_gate *g = gu_open(1, 2000);
    ck_assert_int_eq(has_holder_column(gu_db_path), 1);
    /* The marks are kept, recorded without a holder. */
    ck_assert_uint_eq(gu_mark(g, "old/1"), 40);
    ck_assert_uint_eq(gu_mark(g, "old/2"), 7);
    ck_assert_uint_eq(gu_mark(g, "new"), 0);
    ck_status(gu_write_once(g, "old/1", 39, NULL), FENCE_STALE, g);
    ck_status(gu_write_once(g, "old/1", 40, NULL), FENCE_OK, g);
    expect_repeat(g, "old/1", 40, GU_HA, "");
    ck_status(gu_write_as(g, "old/1", 41, GU_HA, NULL, NULL), FENCE_OK, g);
    expect_repeat(g, "old/1", 41, GU_HB, GU_HA);
    ck_status(gu_write_as(g, "new", 1, GU_HB, NULL, NULL), FENCE_OK, g);
    gu_close(g);

    /* Opening again finds the column and changes nothing. */
    g = gu_open(1, 2000);
    ck_assert_uint_eq(gu_mark(g, "old/1"), 41);
    ck_assert_uint_eq(gu_mark(g, "old/2"), 7);
    expect_repeat(g, "old/1", 41, NULL, GU_HA);
    expect_repeat(g, "new", 1, GU_HA, GU_HB);
    ck_status(gu_write_once(g, "old/2", 7, NULL), FENCE_OK, g);
    gu_close(g);
    ck_assert_int_eq(has_holder_column(gu_db_path), 1);
}
END_TEST

/* Several gates (connections) open the same old file at once: each
 * opens, the column is added once, no mark is lost. */
enum { UPGRADERS = 4 };
static pthread_barrier_t up_bar;

static void *upgrader(void *arg)
{
    int *rc = arg;
    fence_gate_options o;
    fence_gate_options_init(&o);
    o.path = gu_db_path;
    fence_gate *g = NULL;
    pthread_barrier_wait(&up_bar);
    *rc = fence_gate_open(&g, &o);
    if (*rc == FENCE_OK) {
        uint64_t m = 0;
        *rc = fence_gate_mark(g, "old/1", &m);
        if (*rc == FENCE_OK && m != 40) {
            *rc = -1;
        }
    }
    fence_gate_close(g);
    return NULL;
}

START_TEST(test_upgrade_at_once)
{
    make_old_file(gu_db_path);
    pthread_t th[UPGRADERS];
    int rc[UPGRADERS];
    pthread_barrier_init(&up_bar, NULL, UPGRADERS);
    for (int k = 0; k < UPGRADERS; k++) {
        rc[k] = -2;
        ck_assert_int_eq(pthread_create(&th[k], NULL, upgrader, &rc[k]), 0);
    }
    for (int k = 0; k < UPGRADERS; k++) {
        pthread_join(th[k], NULL);
        ck_assert_msg(rc[k] == FENCE_OK, "gate %d: %d", k, rc[k]);
    }
    pthread_barrier_destroy(&up_bar);
    ck_assert_int_eq(has_holder_column(gu_db_path), 1);
    fence_gate *g = gu_open(1, 2000);
    ck_assert_uint_eq(gu_mark(g, "old/2"), 7);
    expect_repeat(g, "old/2", 7, GU_HA, "");
    gu_close(g);
}
END_TEST

/* A holder in the file that is not an id (written around the CHECK):
 * begin fails closed rather than guess. */
START_TEST(test_bad_holder_in_file)
{
    fence_gate *g = gu_open(1, 2000);
    ck_status(gu_write_as(g, "r", 5, GU_HA, NULL, NULL), FENCE_OK, g);
    gu_close(g);
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open(gu_db_path, &db), SQLITE_OK);
    exec_or_fail(db, "PRAGMA ignore_check_constraints=1");
    exec_or_fail(db, "UPDATE fence_gate_marks SET holder = 'ABC' WHERE resource = 'r'");
    sqlite3_close(db);

    g = gu_open(1, 2000);
    fence_gate_txn *t = NULL;
    ck_status(fence_gate_begin(g, "r", 5, GU_HA, &t, NULL), FENCE_EDB, g);
    ck_assert_ptr_null(t);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "holder"));
    ck_status(fence_gate_begin(g, "r", 6, GU_HA, &t, NULL), FENCE_EDB, g);
    ck_assert_uint_eq(gu_mark(g, "r"), 5);
    gu_close(g);
}
END_TEST

/* Found by trying hostile files: whoever can write the file can add a
 * trigger to fence_gate_marks that drops the gate's write (RAISE(IGNORE))
 * or puts the old mark back (an AFTER trigger), and the statement still
 * succeeds.  The gate reads its mark back and refuses such a write; the
 * stale token stays refused.  (Before: begin(200) reported FENCE_OK, the
 * mark stayed 100, and then 150 was admitted.) */
START_TEST(test_hostile_trigger_on_marks)
{
    static const char *const triggers[] = {
        "CREATE TRIGGER swallow BEFORE UPDATE ON fence_gate_marks BEGIN SELECT RAISE(IGNORE); END",
        "CREATE TRIGGER undo AFTER UPDATE ON fence_gate_marks BEGIN "
        "UPDATE fence_gate_marks SET mark = OLD.mark, holder = OLD.holder WHERE resource = OLD.resource; END",
        "CREATE TRIGGER swallow_new BEFORE INSERT ON fence_gate_marks BEGIN SELECT RAISE(IGNORE); END",
    };
    for (size_t i = 0; i < sizeof triggers / sizeof triggers[0]; i++) {
        fence_gate *g = gu_open(1, 2000);
        ck_status(gu_write_as(g, "r", 100, GU_HA, NULL, NULL), FENCE_OK, g);
        gu_close(g);
        sqlite3 *db = NULL;
        ck_assert_int_eq(sqlite3_open(gu_db_path, &db), SQLITE_OK);
        exec_or_fail(db, triggers[i]);
        sqlite3_close(db);

        g = gu_open(1, 2000);
        fence_gate_txn *t = NULL;
        const char *res = i == 2 ? "fresh" : "r";
        ck_status(fence_gate_begin(g, res, 200, GU_HA, &t, NULL), FENCE_EDB, g);
        ck_assert_ptr_null(t);
        ck_assert_msg(strstr(fence_gate_errmsg(g), "did not become 200") != NULL, "%s",
                      fence_gate_errmsg(g));
        ck_assert_uint_eq(gu_mark(g, "r"), 100);
        ck_status(fence_gate_begin(g, "r", 99, GU_HA, &t, NULL), FENCE_STALE, g);
        ck_assert_ptr_null(t);
        gu_close(g);
        ck_assert_int_eq(sqlite3_open(gu_db_path, &db), SQLITE_OK);
        exec_or_fail(db, "DROP TRIGGER IF EXISTS swallow; DROP TRIGGER IF EXISTS undo;"
                         " DROP TRIGGER IF EXISTS swallow_new; DELETE FROM fence_gate_marks");
        sqlite3_close(db);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* The table of cases (tests/common/rule_cases.tsv)                     */
/* ------------------------------------------------------------------ */

static rulecase all_cases[RULECASES_MAX], mark_cases[RULECASES_MAX];
static int n_all, n_marks;

/* lib/common/rule.c itself: every row, marks and row stamps. */
START_TEST(rule_c)
{
    const rulecase *c = &all_cases[_i];
    int got = c->kind == RULECASE_MARK
                  ? fence__mark_rule(c->mark, c->mark_holder, c->token, c->holder)
                  : fence__stamp_rule(c->mark, c->token);
    ck_assert_str_eq(fence__rule_name(got), rulecase_outcome_name(c->outcome));
    const char *reason = fence__rule_reason(got);
    const char *want = rulecase_reason(c->outcome);
    ck_assert_str_eq(reason != NULL ? reason : "-", want != NULL ? want : "-");
}
END_TEST

/* A holder that is not H (NULL: none). */
static const char *other_than(const char *h)
{
    return h != NULL && strcmp(h, RULECASE_HOLDER_A) == 0 ? RULECASE_HOLDER_B : RULECASE_HOLDER_A;
}

/* The holder recorded with resource r's mark (token m), read through the
 * public API: an equal token from another holder is refused as a repeat
 * that names the mark's holder. */
static void check_mark_holder(fence_gate *g, uint64_t m, const char *want)
{
    fence_gate_txn *t = NULL;
    fence_stale st;
    ck_status(fence_gate_begin(g, "r", m, other_than(want), &t, &st), FENCE_STALE, g);
    ck_assert_int_eq(st.reason, FENCE_STALE_REPEAT);
    ck_assert_str_eq(st.holder, want != NULL ? want : "");
}

/* One mark row against a backing (_i indexes mark_cases; persistent says
 * which): the mark is made by a committed write, then the offered write's
 * begin, commit, and the mark afterwards. */
static void gate_case(const rulecase *c, int persistent)
{
    fence_gate *g = gu_open(persistent, 0);
    if (c->mark > 0) {
        ck_status(gu_write_as(g, "r", c->mark, c->mark_holder, NULL, NULL), FENCE_OK, g);
    }
    fence_gate_txn *t = NULL;
    fence_stale st;
    fence_status rc = fence_gate_begin(g, "r", c->token, c->holder, &t, &st);
    uint64_t mark_after = c->mark;
    const char *holder_after = c->mark_holder;
    switch (c->outcome) {
    case RULECASE_RAISE:
        mark_after = c->token;
        holder_after = c->holder;
        /* fall through */
    case RULECASE_ADMIT:
        ck_status(rc, FENCE_OK, g);
        ck_assert_uint_eq(fence_gate_txn_mark(t), c->mark);
        ck_status(fence_gate_commit(t), FENCE_OK, g);
        break;
    case RULECASE_OLDER:
    case RULECASE_REPEAT:
        ck_status(rc, FENCE_STALE, g);
        ck_assert_ptr_null(t);
        ck_assert_int_eq(st.reason, c->outcome == RULECASE_REPEAT ? FENCE_STALE_REPEAT
                                                                  : FENCE_STALE_OLDER);
        ck_assert_uint_eq(st.offered, c->token);
        ck_assert_uint_eq(st.highest, c->mark);
        ck_assert_str_eq(st.holder, c->mark_holder != NULL ? c->mark_holder : "");
        ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), c->outcome == RULECASE_REPEAT
                                                              ? "repeated token"
                                                              : "stale token"));
        break;
    }
    ck_assert_uint_eq(gu_mark(g, "r"), mark_after);
    check_mark_holder(g, mark_after, holder_after);
    gu_close(g);
}

START_TEST(gate_memory)
{
    gate_case(&mark_cases[_i], 0);
}
END_TEST

START_TEST(gate_file)
{
    gate_case(&mark_cases[_i], 1);
}
END_TEST

static Suite *rule_suite(void)
{
    Suite *s = suite_create("gate_rule");
    TCase *tc = tcase_create("cases");
    tcase_add_checked_fixture(tc, gu_setup, gu_teardown);
    tcase_set_timeout(tc, 60);
    rulecases_load(&n_all);
    n_all = rulecases_of_kind(RULECASE_MARK, all_cases);
    n_all += rulecases_of_kind(RULECASE_ROW, all_cases + n_all);
    n_marks = rulecases_of_kind(RULECASE_MARK, mark_cases);
    RULECASES_ADD(tc, rule_c, all_cases, n_all);
    RULECASES_ADD(tc, gate_memory, mark_cases, n_marks);
    RULECASES_ADD(tc, gate_file, mark_cases, n_marks);
    suite_add_tcase(s, tc);

    tc = tcase_create("rule");
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

    tc = tcase_create("holder");
    tcase_add_checked_fixture(tc, gu_setup, gu_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_holder_equal_token, 0, 2);
    tcase_add_loop_test(tc, test_holder_higher_and_older, 0, 2);
    tcase_add_loop_test(tc, test_txn_holder, 0, 2);
    tcase_add_loop_test(tc, test_holder_per_resource, 0, 2);
    tcase_add_test(tc, test_upgrade_old_file);
    tcase_add_test(tc, test_upgrade_at_once);
    tcase_add_test(tc, test_hostile_trigger_on_marks);
    tcase_add_test(tc, test_bad_holder_in_file);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(rule_suite());
}
