/*
 * test_pg_rules.c -- the store rule, as tests/common/rule_cases.tsv writes
 * it (the one table of cases every store runs), against fence.sql and the
 * row guard of this run (FENCE_TEST_PG_IMPL: the generated PL/pgSQL guard,
 * or the extension's C guard).  One Check test per row of the table:
 *   mark cases  fence.advance() (outcome; the mark after; a refusal is
 *               23Q01 with exactly the DETAIL offered=.. highest=..
 *               kind=resource object=.. reason=older|repeat [holder=..]);
 *               fence.marks_guard (an UPDATE of fence.marks: admitted, or
 *               refused 23Q03, the mark unchanged); fence.marks_merge (an
 *               INSERT of a resource that has a mark: raised, or kept);
 *               and fence.mark_rule(), the one SQL function all three ask;
 *   row cases   the guard on UPDATE and on DELETE (admitted: the row
 *               stamped with the token, or gone; refused: 23Q01 with
 *               exactly the DETAIL offered=.. highest=.. kind=table
 *               object=.. reason=older, the row as it was); and
 *               fence.stamp_rule(), which the PL/pgSQL guard asks (the C
 *               guard asks lib/common/rule.c);
 *   grammar     fence.valid_token(), the SQL's token grammar, against
 *               lib/common's fence__token_parse, text by text;
 *   inlining    the SQL rule and grammar functions are inlined by the
 *               planner (their expressions in the plan, no call).
 * Own database and roles per run (pgutil.c); each case its own resource
 * names and table.
 */
#include "casetable.h"
#include "common.h"
#include "pgutil.h"
#include "rulecases.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rulecase g_marks[RULECASES_MAX];
static rulecase g_rows[RULECASES_MAX];
static int g_nmarks, g_nrows;

/* A holder as an SQL literal (NULL: none). */
static const char *lit(const char *holder)
{
    static char buf[2][48];
    static int k;
    k ^= 1;
    if (holder == NULL) {
        return "NULL";
    }
    snprintf(buf[k], sizeof buf[k], "'%s'", holder);
    return buf[k];
}

/* The mark of resource as "token holder" ("0 -" none, "-" no holder). */
static const char *mark_text(PGconn *c, const char *resource)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT COALESCE((SELECT token || ' ' || COALESCE(holder, '-') FROM fence.marks"
             " WHERE resource = '%s'), '0 -')",
             resource);
    return text1(c, sql);
}

/* Give resource the case's mark (none when the case's mark is 0). */
static void set_mark(PGconn *c, const rulecase *k, const char *resource)
{
    if (k->mark == 0) {
        return;
    }
    char sql[256];
    snprintf(sql, sizeof sql, "INSERT INTO fence.marks (resource, token, holder) VALUES ('%s', %" PRIu64 ", %s)",
             resource, k->mark, lit(k->mark_holder));
    ok(c, sql);
}

static void expect_mark(PGconn *c, const char *resource, uint64_t token, const char *holder,
                        const char *what)
{
    char want[64];
    snprintf(want, sizeof want, "%" PRIu64 " %s", token, holder != NULL ? holder : "-");
    const char *got = mark_text(c, resource);
    ck_assert_msg(strcmp(got, want) == 0, "%s: the mark is %s, not %s", what, got, want);
}

static bool admits(const rulecase *k)
{
    return k->outcome == RULECASE_RAISE || k->outcome == RULECASE_ADMIT;
}

START_TEST(mark_rule)
{
    const rulecase *k = &g_marks[_i];
    PGconn *c = db();
    char sql[512], res[96], d[2048];
    stmt_res r;

    /* fence.advance(), in a transaction that fence.use_token() gave the
     * token and holder. */
    snprintf(res, sizeof res, "advance/%s", k->name);
    set_mark(c, k, res);
    snprintf(sql, sizeof sql, "BEGIN; SELECT fence.use_token(%" PRIu64 ", %s)", k->token, lit(k->holder));
    ok(c, sql);
    snprintf(sql, sizeof sql, "SELECT fence.advance('%s', %" PRIu64 ")", res, k->token);
    r = stmt_exec(c, sql);
    stmt_describe(&r, d, sizeof d);
    if (admits(k)) {
        char rows[64];
        snprintf(rows, sizeof rows, "SELECT 1 [%" PRIu64 "]", k->token);
        expect_stmt_ok(&r, rows, "fence.advance");
        ok(c, "COMMIT");
    } else {
        char detail[512];
        snprintf(detail, sizeof detail,
                 "offered=%" PRIu64 " highest=%" PRIu64 " kind=resource object=%s reason=%s%s%s", k->token,
                 k->mark, res, rulecase_reason(k->outcome), k->mark_holder != NULL ? " holder=" : "",
                 k->mark_holder != NULL ? k->mark_holder : "");
        expect_stmt_err(&r, "23Q01", NULL, detail, "fence.advance");
        ok(c, "ROLLBACK");
    }
    if (k->outcome == RULECASE_RAISE) {
        expect_mark(c, res, k->token, k->holder, "fence.advance raised");
    } else {
        expect_mark(c, res, k->mark, k->mark_holder, "fence.advance kept");
    }

    /* fence.marks_guard: an UPDATE of the mark itself (there is one). */
    if (k->mark > 0) {
        snprintf(res, sizeof res, "guard/%s", k->name);
        set_mark(c, k, res);
        snprintf(sql, sizeof sql, "UPDATE fence.marks SET token = %" PRIu64 ", holder = %s WHERE resource = '%s'",
                 k->token, lit(k->holder), res);
        r = stmt_exec(c, sql);
        if (admits(k)) {
            expect_stmt_ok(&r, "UPDATE 1", "fence.marks_guard");
            expect_mark(c, res, k->token, k->holder, "fence.marks_guard admitted");
        } else {
            expect_stmt_err(&r, "23Q03", NULL, NULL, "fence.marks_guard");
            expect_mark(c, res, k->mark, k->mark_holder, "fence.marks_guard refused");
        }
    }

    /* fence.marks_merge: an INSERT (a data-only restore) raises or keeps,
     * never refuses. */
    snprintf(res, sizeof res, "merge/%s", k->name);
    set_mark(c, k, res);
    snprintf(sql, sizeof sql, "INSERT INTO fence.marks (resource, token, holder) VALUES ('%s', %" PRIu64 ", %s)",
             res, k->token, lit(k->holder));
    ok(c, sql);
    if (k->outcome == RULECASE_RAISE) {
        expect_mark(c, res, k->token, k->holder, "fence.marks_merge raised");
    } else {
        expect_mark(c, res, k->mark, k->mark_holder, "fence.marks_merge kept");
    }

    /* fence.mark_rule(), which all three ask: the outcome's name. */
    snprintf(sql, sizeof sql, "SELECT fence.mark_rule(%" PRIu64 ", %s, %" PRIu64 ", %s)", k->mark,
             lit(k->mark_holder), k->token, lit(k->holder));
    ck_assert_str_eq(text1(c, sql), rulecase_outcome_name(k->outcome));
    PQfinish(c);
}
END_TEST

/* One UPDATE or DELETE of a row stamped k->mark, with k->token. */
static void row_write(PGconn *c, const rulecase *k, const char *tbl, bool del)
{
    char sql[256], detail[512], what[64];
    snprintf(what, sizeof what, "%s %s", pg_impl(), del ? "DELETE" : "UPDATE");
    snprintf(sql, sizeof sql, "BEGIN; SELECT fence.use_token(%" PRIu64 ")", k->token);
    ok(c, sql);
    if (del) {
        snprintf(sql, sizeof sql, "DELETE FROM %s WHERE id = 1", tbl);
    } else {
        snprintf(sql, sizeof sql, "UPDATE %s SET v = v + 1 WHERE id = 1", tbl);
    }
    stmt_res r = stmt_exec(c, sql);
    if (k->outcome == RULECASE_ADMIT) {
        expect_stmt_ok(&r, del ? "DELETE 1" : "UPDATE 1", what);
        ok(c, "COMMIT");
    } else {
        snprintf(detail, sizeof detail,
                 "offered=%" PRIu64 " highest=%" PRIu64 " kind=table object=public.%s reason=older", k->token,
                 k->mark, tbl);
        expect_stmt_err(&r, "23Q01", NULL, detail, what);
        ok(c, "ROLLBACK");
    }
}

START_TEST(row_rule)
{
    const rulecase *k = &g_rows[_i];
    PGconn *c = db();
    char sql[512], tbl[64];

    /* A row stamped k->mark: 0 as protect() leaves it, else written once
     * with that token. */
    snprintf(tbl, sizeof tbl, "rule_%d", _i);
    snprintf(sql, sizeof sql,
             "CREATE TABLE %s (id int PRIMARY KEY, v int NOT NULL); INSERT INTO %s VALUES (1, 0);"
             "SELECT fence.protect('%s')",
             tbl, tbl, tbl);
    ok(c, sql);
    snprintf(sql, sizeof sql, "SELECT implementation FROM fence.protected WHERE tbl = '%s'::regclass", tbl);
    ck_assert_str_eq(text1(c, sql), pg_impl());
    if (k->mark > 0) {
        snprintf(sql, sizeof sql, "UPDATE %s SET v = 0", tbl);
        ck_assert_int_eq(write_tok(c, k->mark, sql, NULL), FENCE_OK);
    }
    snprintf(sql, sizeof sql, "SELECT fence_token FROM %s WHERE id = 1", tbl);
    ck_assert_uint_eq((uint64_t)num(c, sql), k->mark);

    row_write(c, k, tbl, false);
    snprintf(sql, sizeof sql, "SELECT fence_token || ' ' || v FROM %s WHERE id = 1", tbl);
    char want[64];
    snprintf(want, sizeof want, "%" PRIu64 " %d", k->outcome == RULECASE_ADMIT ? k->token : k->mark,
             k->outcome == RULECASE_ADMIT ? 1 : 0);
    ck_assert_str_eq(text1(c, sql), want);

    /* DELETE of the row as the UPDATE left it: stamped as the case says
     * when that was refused, with the token (admitted again) when not. */
    row_write(c, k, tbl, true);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", tbl);
    ck_assert_int_eq(num(c, sql), k->outcome == RULECASE_ADMIT ? 0 : 1);

    /* fence.stamp_rule(), which the PL/pgSQL guard asks. */
    snprintf(sql, sizeof sql, "SELECT fence.stamp_rule(%" PRIu64 ", %" PRIu64 ")", k->mark, k->token);
    ck_assert_str_eq(text1(c, sql), rulecase_outcome_name(k->outcome));
    PQfinish(c);
}
END_TEST

/* fence.valid_token(), the token grammar written once in fence.sql, is
 * lib/common's (fence__token_parse, which the C guard and every library
 * use): the same verdict for every text of the table. */
static const struct {
    const char *name;
    const char *text;
} g_texts[] = {
    {"empty", ""},
    {"letters", "abc"},
    {"negative", "-1"},
    {"zero", "0"},
    {"zeros", "00"},
    {"one", "1"},
    {"seven", "7"},
    {"fraction", "1.5"},
    {"space_before", " 7"},
    {"space_after", "7 "},
    {"leading_zeros", "007"},
    {"plus", "+7"},
    {"exponent", "1e3"},
    {"hex", "0x10"},
    {"tab", "\t7"},
    {"newline", "7\n"},
    {"max_minus_1", "9223372036854775806"},
    {"max", "9223372036854775807"},
    {"max_plus_1", "9223372036854775808"},
    {"nineteen_nines", "9999999999999999999"},
    {"ten_to_18", "1000000000000000000"},
    {"ten_to_19", "10000000000000000000"},
    {"twenty_nines", "99999999999999999999"},
    {"u64_max", "18446744073709551615"},
    {"u64_max_plus_1", "18446744073709551616"},
    {"arabic_indic_3", "\xd9\xa3"},
};

START_TEST(token_grammar)
{
    const char *text = g_texts[_i].text;
    PGconn *c = db();
    const char *v[1] = {text};
    PGresult *r = PQexecParams(c, "SELECT fence.valid_token($1)::text", 1, NULL, v, NULL, NULL, 0);
    ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQerrorMessage(c));
    uint64_t tok;
    const char *want = fence__token_parse(text, strlen(text), &tok) == 0 ? "true" : "false";
    ck_assert_msg(strcmp(PQgetvalue(r, 0, 0), want) == 0, "fence.valid_token('%s') is %s, token.c says %s",
                  text, PQgetvalue(r, 0, 0), want);
    PQclear(r);
    PQfinish(c);
}
END_TEST

/* fence.mark_rule() and fence.stamp_rule() are inlined by the planner
 * (docs/postgres.md: written once at no cost): the plan of a query that
 * calls them with values only known at run time shows their CASE
 * expression, and no call of either. */
START_TEST(rules_inlined)
{
    PGconn *c = db();
    PGresult *r = PQexec(c, "EXPLAIN (VERBOSE, COSTS OFF)"
                            " SELECT fence.mark_rule(g::bigint, 'h', (g + 1)::bigint, g::text),"
                            "        fence.stamp_rule(g::bigint, (g - 1)::bigint),"
                            "        fence.valid_token(g::text)"
                            " FROM generate_series(1, 3) g");
    ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "EXPLAIN: %s", PQerrorMessage(c));
    char plan[4096] = "";
    for (int i = 0; i < PQntuples(r); i++) {
        strncat(plan, PQgetvalue(r, i, 0), sizeof plan - strlen(plan) - 2);
        strncat(plan, "\n", sizeof plan - strlen(plan) - 1);
    }
    PQclear(r);
    ck_assert_msg(strstr(plan, "CASE WHEN") != NULL, "no CASE in the plan:\n%s", plan);
    ck_assert_msg(strstr(plan, "mark_rule") == NULL && strstr(plan, "stamp_rule") == NULL &&
                      strstr(plan, "valid_token") == NULL,
                  "a rule function is called, not inlined:\n%s", plan);
    PQfinish(c);
}
END_TEST

static Suite *pg_rules_suite(void)
{
    Suite *s = suite_create("pg_rules");
    TCase *t = pg_tcase("rules");
    g_nmarks = rulecases_of_kind(RULECASE_MARK, g_marks);
    g_nrows = rulecases_of_kind(RULECASE_ROW, g_rows);
    ct_add_cases(t, mark_rule, g_nmarks, &g_marks[0].name, sizeof g_marks[0]);
    ct_add_cases(t, row_rule, g_nrows, &g_rows[0].name, sizeof g_rows[0]);
    CT_ADD_CASES(t, token_grammar, g_texts);
    tcase_add_test(t, rules_inlined);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(pg_rules_suite());
}
