/* test_sqlite_rule.c -- the one table of cases of the store rule
 * (tests/common/rule_cases.tsv) against every place the SQLite store
 * applies it, one test per row and place: the SQL functions
 * fence_mark_rule() and fence_stamp_rule() that every trigger asks; a
 * resource's mark through fence_advance (fence_sqlite_advance) and through
 * direct writes to fence_resource; a row's stamp through each row trigger
 * (UPDATE, DELETE, INSERT OR REPLACE onto the row, UPDATE OR REPLACE of
 * another row's key onto it).  Each write runs in a transaction of its own
 * (BEGIN IMMEDIATE, the token set in it, COMMIT or ROLLBACK). */
#include "rulecases.h"
#include "sqliteutil.h"

#include <stdio.h>
#include <string.h>

static rulecase mark_cases[RULECASES_MAX], row_cases[RULECASES_MAX];
static int n_marks, n_rows;

/* In one transaction with token t and holder h: run sql.  FENCE_OK when
 * it ran (committed), else what fence_sqlite_classify() says (rolled
 * back), with the description in *st. */
static fence_status in_txn(sqlite3 *db, uint64_t t, const char *h, const char *sql,
                           fence_stale *st)
{
    memset(st, 0, sizeof *st);
    su_exec_ok(db, "BEGIN IMMEDIATE");
    su_set_th(db, t, h);
    if (su_exec_rc(db, sql) == SQLITE_OK) {
        su_exec_ok(db, "COMMIT");
        return FENCE_OK;
    }
    fence_status rc = fence_sqlite_classify(db, st);
    if (!sqlite3_get_autocommit(db)) {
        su_exec_ok(db, "ROLLBACK");
    }
    return rc;
}

/* The refusal a row expects (older or repeat), as fence_sqlite_classify
 * describes it. */
static void check_refusal(fence_status rc, const fence_stale *st, const rulecase *c,
                          fence_object_kind kind, const char *object, sqlite3 *db)
{
    ck_assert_msg(rc == FENCE_STALE, "%s: want a stale refusal, got %s (%s)", c->name,
                  fence_status_name(rc), fence_sqlite_errmsg(db));
    ck_assert_int_eq(st->reason, c->outcome == RULECASE_REPEAT ? FENCE_STALE_REPEAT
                                                               : FENCE_STALE_OLDER);
    ck_assert_uint_eq(st->offered, c->token);
    ck_assert_uint_eq(st->highest, c->mark);
    ck_assert_int_eq(st->kind, kind);
    ck_assert_str_eq(st->object, object);
    if (kind == FENCE_OBJECT_RESOURCE) {
        ck_assert_str_eq(st->holder, c->mark_holder != NULL ? c->mark_holder : "");
    }
}

static void bind_holder(sqlite3_stmt *s, int i, const char *h)
{
    if (h != NULL) {
        sqlite3_bind_text(s, i, h, -1, SQLITE_STATIC);
    } else {
        sqlite3_bind_null(s, i);
    }
}

/* ---- the SQL functions ------------------------------------------------- */

START_TEST(fence_mark_rule_fn)
{
    const rulecase *c = &mark_cases[_i];
    sqlite3 *db = su_open_fenced("f.db");
    sqlite3_stmt *s = NULL;
    ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT fence_mark_rule(?1, ?2, ?3, ?4)", -1, &s,
                                        NULL),
                     SQLITE_OK);
    sqlite3_bind_int64(s, 1, (sqlite3_int64)c->mark);
    bind_holder(s, 2, c->mark_holder);
    sqlite3_bind_int64(s, 3, (sqlite3_int64)c->token);
    bind_holder(s, 4, c->holder);
    ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
    ck_assert_str_eq((const char *)sqlite3_column_text(s, 0), rulecase_outcome_name(c->outcome));
    sqlite3_finalize(s);
    sqlite3_close(db);
}
END_TEST

START_TEST(fence_stamp_rule_fn)
{
    const rulecase *c = &row_cases[_i];
    sqlite3 *db = su_open_fenced("f.db");
    sqlite3_stmt *s = NULL;
    ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT fence_stamp_rule(?1, ?2)", -1, &s, NULL),
                     SQLITE_OK);
    sqlite3_bind_int64(s, 1, (sqlite3_int64)c->mark);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)c->token);
    ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
    ck_assert_str_eq((const char *)sqlite3_column_text(s, 0), rulecase_outcome_name(c->outcome));
    sqlite3_finalize(s);
    sqlite3_close(db);
}
END_TEST

/* ---- a resource's mark ---------------------------------------------------- */

/* The resource "r" with the row's mark (none for mark 0). */
static sqlite3 *resource_at_mark(const rulecase *c)
{
    sqlite3 *db = su_open_fenced("r.db");
    fence_stale st;
    if (c->mark > 0) {
        ck_assert_int_eq(in_txn(db, c->mark, c->mark_holder,
                                "INSERT INTO fence_advance(resource) VALUES ('r')", &st),
                         FENCE_OK);
    }
    return db;
}

/* After the offered write: the mark and its holder are as the row says. */
static void check_mark_after(sqlite3 *db, const rulecase *c)
{
    int raised = c->outcome == RULECASE_RAISE;
    uint64_t mark = raised ? c->token : c->mark;
    const char *holder = raised ? c->holder : c->mark_holder;
    ck_assert_uint_eq(su_mark(db, "r"), mark);
    ck_assert_str_eq(su_mark_holder(db, "r"),
                     mark == 0 ? "(no mark)" : holder != NULL ? holder : "(none)");
}

/* Admitted or refused as the row says, with the mark after it. */
static void check_resource_write(sqlite3 *db, const rulecase *c, fence_status rc,
                                 const fence_stale *st)
{
    if (c->outcome == RULECASE_RAISE || c->outcome == RULECASE_ADMIT) {
        ck_assert_msg(rc == FENCE_OK, "%s: want admitted, got %s (%s)", c->name,
                      fence_status_name(rc), fence_sqlite_errmsg(db));
    } else {
        check_refusal(rc, st, c, FENCE_OBJECT_RESOURCE, "r", db);
    }
    check_mark_after(db, c);
}

START_TEST(fence_advance)
{
    const rulecase *c = &mark_cases[_i];
    sqlite3 *db = resource_at_mark(c);
    /* fence_sqlite_advance is INSERT INTO fence_advance, classified. */
    su_exec_ok(db, "BEGIN IMMEDIATE");
    su_set_th(db, c->token, c->holder);
    fence_stale st;
    fence_status rc = fence_sqlite_advance(db, "r", &st);
    su_exec_ok(db, rc == FENCE_OK ? "COMMIT" : "ROLLBACK");
    check_resource_write(db, c, rc, &st);
    sqlite3_close(db);
}
END_TEST

START_TEST(fence_resource_direct)
{
    const rulecase *c = &mark_cases[_i];
    sqlite3 *db = resource_at_mark(c);
    /* No mark yet: an INSERT makes it; else an UPDATE moves it. */
    const char *sql = c->mark == 0 ? "INSERT INTO fence_resource(name, high_water, holder) "
                                     "VALUES ('r', fence_token(), fence_holder())"
                                   : "UPDATE fence_resource SET high_water = fence_token(), "
                                     "holder = fence_holder() WHERE name = 'r'";
    fence_stale st;
    fence_status rc = in_txn(db, c->token, c->holder, sql, &st);
    check_resource_write(db, c, rc, &st);
    sqlite3_close(db);
}
END_TEST

/* ---- a row's stamp --------------------------------------------------------- */

/* t(id, k UNIQUE, v) protected, row 1 (k 'a') stamped with the row's mark
 * (0: written before protection), row 2 (k 'b') stamped 0. */
static sqlite3 *row_at_stamp(const rulecase *c)
{
    sqlite3 *db = su_open_fenced("t.db");
    su_exec_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT UNIQUE, v TEXT);"
                   "INSERT INTO t VALUES (1, 'a', 'before'), (2, 'b', 'before')");
    ck_assert_int_eq(fence_sqlite_protect(db, "t", NULL), FENCE_OK);
    fence_stale st;
    if (c->mark > 0) {
        ck_assert_int_eq(in_txn(db, c->mark, NULL, "UPDATE t SET v = 'stamped' WHERE id = 1",
                                &st),
                         FENCE_OK);
    }
    char want[64];
    snprintf(want, sizeof want, "%llu", (unsigned long long)c->mark);
    ck_assert_str_eq(su_q_text(db, "SELECT fence_token FROM t WHERE id = 1"), want);
    return db;
}

/* The offered write SQL on row 1; admitted, CHECK answers AFTER (with the
 * token for its one capital T, if any); refused, the table is as it was. */
static void row_case(const rulecase *c, const char *sql, const char *check, const char *after)
{
    sqlite3 *db = row_at_stamp(c);
    const char *before_sql = "SELECT group_concat(id || ':' || k || ':' || v || ':' || "
                             "fence_token, ' ') FROM t";
    char before[256];
    snprintf(before, sizeof before, "%s", su_q_text(db, before_sql));
    fence_stale st;
    fence_status rc = in_txn(db, c->token, NULL, sql, &st);
    if (c->outcome == RULECASE_ADMIT) {
        ck_assert_msg(rc == FENCE_OK, "%s: want admitted, got %s (%s)", c->name,
                      fence_status_name(rc), fence_sqlite_errmsg(db));
        /* AFTER with its "T" (the last character that is one) the token. */
        char want[256];
        const char *t = strrchr(after, 'T');
        snprintf(want, sizeof want, "%.*s%llu%s", t ? (int)(t - after) : (int)strlen(after),
                 after, (unsigned long long)c->token, t ? t + 1 : "");
        if (t == NULL) {
            snprintf(want, sizeof want, "%s", after);
        }
        ck_assert_str_eq(su_q_text(db, check), want);
    } else {
        check_refusal(rc, &st, c, FENCE_OBJECT_TABLE, "t", db);
        ck_assert_str_eq(su_q_text(db, before_sql), before);
    }
    sqlite3_close(db);
}

#define ROW1 "SELECT coalesce((SELECT k || ':' || v || ':' || fence_token FROM t WHERE id = 1), 'gone')"

START_TEST(row_update)
{
    row_case(&row_cases[_i], "UPDATE t SET v = 'new' WHERE id = 1", ROW1, "a:new:T");
}
END_TEST

START_TEST(row_delete)
{
    row_case(&row_cases[_i], "DELETE FROM t WHERE id = 1", ROW1, "gone");
}
END_TEST

START_TEST(row_insert_or_replace)
{
    row_case(&row_cases[_i], "INSERT OR REPLACE INTO t(id, k, v) VALUES (1, 'a', 'replaced')",
             ROW1, "a:replaced:T");
}
END_TEST

START_TEST(row_key_change)
{
    /* Row 2 takes row 1's key: UPDATE OR REPLACE deletes row 1, which
     * fires no DELETE trigger; the key-change trigger checks it. */
    row_case(&row_cases[_i], "UPDATE OR REPLACE t SET k = 'a' WHERE id = 2",
             "SELECT group_concat(id || ':' || k || ':' || fence_token, ' ') FROM t",
             "2:a:T");
}
END_TEST

static Suite *rule_suite(void)
{
    n_marks = rulecases_of_kind(RULECASE_MARK, mark_cases);
    n_rows = rulecases_of_kind(RULECASE_ROW, row_cases);
    Suite *s = suite_create("sqlite_rule");
    TCase *tc = tcase_create("functions");
    tcase_add_checked_fixture(tc, su_setup, su_teardown);
    RULECASES_ADD(tc, fence_mark_rule_fn, mark_cases, n_marks);
    RULECASES_ADD(tc, fence_stamp_rule_fn, row_cases, n_rows);
    suite_add_tcase(s, tc);

    tc = tcase_create("resource");
    tcase_add_checked_fixture(tc, su_setup, su_teardown);
    RULECASES_ADD(tc, fence_advance, mark_cases, n_marks);
    RULECASES_ADD(tc, fence_resource_direct, mark_cases, n_marks);
    suite_add_tcase(s, tc);

    tc = tcase_create("row");
    tcase_add_checked_fixture(tc, su_setup, su_teardown);
    RULECASES_ADD(tc, row_update, row_cases, n_rows);
    RULECASES_ADD(tc, row_delete, row_cases, n_rows);
    RULECASES_ADD(tc, row_insert_or_replace, row_cases, n_rows);
    RULECASES_ADD(tc, row_key_change, row_cases, n_rows);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(rule_suite());
}
