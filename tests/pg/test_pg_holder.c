/*
 * test_pg_holder.c -- holder ids at PostgreSQL resources (fence.sql
 * version 3) against a real PostgreSQL: the rule for an equal token (only
 * from the holder recorded with the mark; "none" equals only "none"), the
 * reason and holder a rejection reports, fence.advance's answer for every
 * kind of name, token and holder, malformed holders refused at both ends
 * with nothing changed, fence.holder set per session or per transaction
 * like fence.token, prepared and pipelined calls (an application role's
 * too), rows (which compare tokens only), and upgrades from the released
 * version 2 keeping their marks.  Own database and roles per run
 * (pgutil.c).
 */
#include "pgutil.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HA "0123456789abcdef0123456789abcdef"
#define HB "fedcba9876543210fedcba9876543210"

/* A rejection of resource as stale with the given tokens, reason and
 * recorded holder ("" none), as fence_pg_set_token reported it. */
static void expect_stale(fence_status st, const outcome *e, const char *resource,
                         uint64_t offered, uint64_t highest, fence_stale_reason reason,
                         const char *holder)
{
    ck_assert_msg(st == FENCE_STALE, "not stale: %s %s", fence_status_name(st), e->message);
    ck_assert_str_eq(e->sqlstate, "23Q01");
    ck_assert_uint_eq(e->stale.offered, offered);
    ck_assert_uint_eq(e->stale.highest, highest);
    ck_assert_int_eq(e->stale.kind, FENCE_OBJECT_RESOURCE);
    ck_assert_str_eq(e->stale.object, resource);
    ck_assert_int_eq(e->stale.reason, reason);
    ck_assert_str_eq(e->stale.holder, holder);
}

/* The mark of resource is (token, holder). */
static void expect_mark(PGconn *c, const char *resource, uint64_t token, const char *holder)
{
    char h[FENCE_HOLDER_LEN + 1];
    memset(h, 'z', sizeof h);
    ck_assert_uint_eq(mark_of(c, resource, h), token);
    ck_assert_str_eq(h, holder);
}

/* The DETAIL of the error sql raises (which must fail). */
/* How many times needle occurs in hay. */
static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle)) {
        n++;
    }
    return n;
}

static const char *detail_of(PGconn *c, const char *sql)
{
    static char buf[2048];
    PGresult *r = PQexec(c, sql);
    ck_assert_int_eq(PQresultStatus(r), PGRES_FATAL_ERROR);
    const char *d = PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL);
    snprintf(buf, sizeof buf, "%s", d != NULL ? d : "(none)");
    PQclear(r);
    return buf;
}

/* ------------------------------------------------------------------ */
/* The rule                                                             */
/* ------------------------------------------------------------------ */

START_TEST(equal_token_only_from_the_same_holder)
{
    PGconn *c = db();
    outcome e;
    /* A new resource admits any token; the mark records the holder. */
    ck_assert_int_eq(advance_h(c, 10, HA, "hr", &e), FENCE_OK);
    expect_mark(c, "hr", 10, HA);
    /* Equal token, same holder: admitted (one holder writes many times). */
    ck_assert_int_eq(advance_h(c, 10, HA, "hr", &e), FENCE_OK);
    ck_assert_int_eq(advance_h(c, 10, HA, "hr", &e), FENCE_OK);
    /* Equal token, another holder: a repeat, the recorded holder named. */
    expect_stale(advance_h(c, 10, HB, "hr", &e), &e, "hr", 10, 10, FENCE_STALE_REPEAT, HA);
    ck_assert_msg(strstr(e.message, "stale token 10") != NULL &&
                      strstr(e.message, "different holder") != NULL,
                  "%s", e.message);
    /* Equal token, no holder, against a recorded holder: a repeat too. */
    expect_stale(advance_h(c, 10, NULL, "hr", &e), &e, "hr", 10, 10, FENCE_STALE_REPEAT, HA);
    expect_mark(c, "hr", 10, HA);
    /* Older: reason OLDER, from any holder, the recorded holder named. */
    expect_stale(advance_h(c, 9, HA, "hr", &e), &e, "hr", 9, 10, FENCE_STALE_OLDER, HA);
    expect_stale(advance_h(c, 9, NULL, "hr", &e), &e, "hr", 9, 10, FENCE_STALE_OLDER, HA);
    ck_assert_str_eq(e.message, "fence: stale token 9 for resource hr (highest seen 10)");
    /* Higher from another holder: admitted and recorded. */
    ck_assert_int_eq(advance_h(c, 11, HB, "hr", &e), FENCE_OK);
    expect_mark(c, "hr", 11, HB);
    expect_stale(advance_h(c, 11, HA, "hr", &e), &e, "hr", 11, 11, FENCE_STALE_REPEAT, HB);
    ck_assert_int_eq(advance_h(c, 11, HB, "hr", &e), FENCE_OK);
    /* Higher with no holder: the mark has none; none vs none admitted. */
    ck_assert_int_eq(advance_h(c, 12, NULL, "hr", &e), FENCE_OK);
    expect_mark(c, "hr", 12, "");
    ck_assert_int_eq(advance_h(c, 12, NULL, "hr", &e), FENCE_OK);
    /* A holder against a mark recorded with none: a repeat, holder "". */
    expect_stale(advance_h(c, 12, HA, "hr", &e), &e, "hr", 12, 12, FENCE_STALE_REPEAT, "");
    expect_stale(advance_h(c, 11, NULL, "hr", &e), &e, "hr", 11, 12, FENCE_STALE_OLDER, "");
    expect_mark(c, "hr", 12, "");

    /* A resource first written with no holder. */
    ck_assert_int_eq(advance_h(c, 5, NULL, "hr-none", &e), FENCE_OK);
    ck_assert_int_eq(advance_h(c, 5, NULL, "hr-none", &e), FENCE_OK);
    expect_stale(advance_h(c, 5, HB, "hr-none", &e), &e, "hr-none", 5, 5, FENCE_STALE_REPEAT,
                 "");
    ck_assert_int_eq(advance_h(c, 6, HB, "hr-none", &e), FENCE_OK);
    expect_mark(c, "hr-none", 6, HB);
    /* No mark at all: 0 and "". */
    expect_mark(c, "hr-never", 0, "");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.marks WHERE resource = 'hr-never'"), 0);
    PQfinish(c);
}
END_TEST

/* The DETAIL of every 23Q01: the fields of version 2 first, then the
 * reason, then the recorded holder when there is one; fence.mark_holder. */
START_TEST(detail_format)
{
    PGconn *c = db();
    outcome e;
    ck_assert_int_eq(advance_h(c, 20, HA, "df", &e), FENCE_OK);
    ck_assert_int_eq(advance_h(c, 20, NULL, "df-none", &e), FENCE_OK);
    ck_assert_str_eq(detail_of(c, "SELECT fence.advance('df', 19)"),
                     "offered=19 highest=20 kind=resource object=df reason=older holder=" HA);
    ck_assert_str_eq(detail_of(c, "SELECT fence.advance('df', 20)"),
                     "offered=20 highest=20 kind=resource object=df reason=repeat holder=" HA);
    ck_assert_str_eq(detail_of(c, "BEGIN; SELECT fence.use_token(20, '" HB "');"
                                  " SELECT fence.advance('df-none', 20)"),
                     "offered=20 highest=20 kind=resource object=df-none reason=repeat");
    ok(c, "ROLLBACK");
    ck_assert_str_eq(detail_of(c, "SELECT fence.advance('df-none', 3)"),
                     "offered=3 highest=20 kind=resource object=df-none reason=older");
    /* Rows report reason=older (they never compare holders). */
    make_table(c, "dft");
    ck_assert_int_eq(write_tok(c, 8, "UPDATE dft SET v = 1 WHERE id = 1", &e), FENCE_OK);
    ck_assert_str_eq(detail_of(c, "BEGIN; SELECT fence.use_token(7);"
                                  " UPDATE dft SET v = 2 WHERE id = 1"),
                     "offered=7 highest=8 kind=table object=public.dft reason=older");
    ok(c, "ROLLBACK");
    /* A resource whose name ends like a reason is still read back whole. */
    static const char odd[] = "odd reason=older holder=" HB;
    ck_assert_int_eq(advance_h(c, 30, HA, odd, &e), FENCE_OK);
    expect_stale(advance_h(c, 30, HB, odd, &e), &e, odd, 30, 30, FENCE_STALE_REPEAT, HA);
    expect_stale(advance_h(c, 29, NULL, odd, &e), &e, odd, 29, 30, FENCE_STALE_OLDER, HA);
    /* fence.mark_holder: NULL for none or no mark; fence.mark unchanged. */
    ck_assert_str_eq(text1(c, "SELECT fence.mark_holder('df')"), HA);
    ck_assert_int_eq(num(c, "SELECT (fence.mark_holder('df-none') IS NULL)::int"), 1);
    ck_assert_int_eq(num(c, "SELECT (fence.mark_holder('nothing') IS NULL)::int"), 1);
    ck_assert_int_eq(num(c, "SELECT fence.mark('df')"), 20);
    PQfinish(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* fence.advance, case by case                                          */
/* ------------------------------------------------------------------ */

/* What one call of fence.advance returned. */
typedef struct adv_res {
    fence_status status; /* fence_pg_classify */
    fence_stale stale;
    char state[6];      /* SQLSTATE, "" on success */
    char msg[600];
    char detail[600];
    char hint[600];
    char value[32];     /* what it returned, on success */
    char mark[128];     /* on success: "mark|holder" afterwards, in the same transaction
                         * (fence.mark, fence.mark_holder; "" for no holder) */
} adv_res;

static void field(const PGresult *r, int code, char *out, size_t n)
{
    const char *v = PQresultErrorField(r, code);
    snprintf(out, n, "%s", v != NULL ? v : "");
}

/* One transaction: fence.holder set to the raw value holder (NULL: left
 * alone), bound to the transaction as fence.use_token() binds it (so that
 * any value, malformed ones included, reaches fence.advance), then SELECT
 * fence.advance($1::text, <tok>) (resource NULL: SQL NULL; tok is SQL
 * text: "7", "0", "NULL").  Committed when `commit` and it succeeded,
 * rolled back otherwise.  Its outcome into *o. */
static void raw_advance(PGconn *c, const char *holder, const char *resource, const char *tok,
                        bool commit, adv_res *o)
{
    char sql[256];
    memset(o, 0, sizeof *o);
    ok(c, "BEGIN");
    if (holder != NULL) {
        const char *v[1] = {holder};
        PGresult *h = PQexecParams(c,
                                   "SELECT pg_catalog.set_config('fence.holder', $1, true),"
                                   " pg_catalog.set_config('fence.xact', pg_catalog.pg_current_xact_id()::text, true)",
                                   1, NULL, v, NULL, NULL, 0);
        ck_assert_int_eq(PQresultStatus(h), PGRES_TUPLES_OK);
        PQclear(h);
    }
    snprintf(sql, sizeof sql, "SELECT fence.advance($1::text, %s)", tok);
    const char *v[1] = {resource};
    PGresult *r = PQexecParams(c, sql, 1, NULL, v, NULL, NULL, 0);
    o->status = fence_pg_classify(c, r, &o->stale);
    field(r, PG_DIAG_SQLSTATE, o->state, sizeof o->state);
    field(r, PG_DIAG_MESSAGE_PRIMARY, o->msg, sizeof o->msg);
    field(r, PG_DIAG_MESSAGE_DETAIL, o->detail, sizeof o->detail);
    field(r, PG_DIAG_MESSAGE_HINT, o->hint, sizeof o->hint);
    if (o->status == FENCE_OK) {
        snprintf(o->value, sizeof o->value, "%s", PQgetvalue(r, 0, 0));
        PQclear(r);
        r = PQexecParams(c, "SELECT fence.mark($1) || '|' || coalesce(fence.mark_holder($1), '')",
                         1, NULL, v, NULL, NULL, 0);
        ck_assert_msg(PQntuples(r) == 1, "reading the mark: %s", PQresultErrorMessage(r));
        snprintf(o->mark, sizeof o->mark, "%s", PQgetvalue(r, 0, 0));
    }
    PQclear(r);
    ok(c, commit && o->status == FENCE_OK ? "COMMIT" : "ROLLBACK");
}

/* fence.advance with raw holder (NULL: left alone) in a transaction of
 * its own, committed on success; its status, the stale description into
 * *o. */
static fence_status raw_commit(PGconn *c, const char *holder, const char *resource, long long tok,
                               adv_res *o)
{
    char t[24];
    snprintf(t, sizeof t, "%lld", tok);
    raw_advance(c, holder, resource, t, true, o);
    return o->status;
}

/* One call on the marks as they are, rolled back: SQLSTATE state ("" for
 * success); on success it returns tok and leaves the mark `mark`. */
static void expect_advance(PGconn *c, const char *holder, const char *resource, const char *tok,
                           const char *state, const char *mark)
{
    adv_res o;
    raw_advance(c, holder, resource, tok, false, &o);
    ck_assert_msg(strcmp(o.state, state) == 0, "advance(%s, %s) holder %s gave '%s' (%s), expected '%s'",
                  resource ? resource : "NULL", tok, holder ? holder : "-", o.state, o.msg, state);
    if (state[0] == '\0') {
        ck_assert_str_eq(o.value, tok);
        ck_assert_msg(strcmp(o.mark, mark) == 0, "advance(%s, %s) holder %s left the mark '%s', expected '%s'",
                      resource, tok, holder ? holder : "-", o.mark, mark);
    }
}

/* Every kind of name, token and holder (left alone, '', either of two
 * holders, too short, too long) against a mark with a holder, one
 * without, one whose name needs quoting and a new resource: the
 * SQLSTATE, the value and the mark left.  (These are the cases the C
 * fence.c_advance of extension 1.1-1.3 was compared on.) */
START_TEST(advance_outcomes)
{
    PGconn *c = db();
    adv_res o;
    const char *rh = "ao-h";       /* mark 10, holder HA */
    const char *rn = "ao-n";       /* mark 10, no holder */
    const char *rq = "Ao \"Q\" x"; /* mark 10, holder HB; needs quoting */
    const char *fresh = "ao-new";
    ck_assert_int_eq(raw_commit(c, HA, rh, 10, &o), FENCE_OK);
    ck_assert_int_eq(raw_commit(c, NULL, rn, 10, &o), FENCE_OK);
    ck_assert_int_eq(raw_commit(c, HB, rq, 10, &o), FENCE_OK);
    const char *rs[3] = {rh, rn, rq};
    const char *marks[3] = {"10|" HA, "10|", "10|" HB};
    const char *holders[6] = {NULL, "", HA, HB, "ABC", HA "0123456789"};
    const char *toks[7] = {"5", "10", "11", "9223372036854775807", "0", "-3", "NULL"};
    for (int r = 0; r < 4; r++) {
        const char *res = r < 3 ? rs[r] : fresh;
        for (int h = 0; h < 6; h++) {
            for (int t = 0; t < 7; t++) {
                const char *tok = toks[t];
                const char *want;
                char mark[128] = "";
                int bad_tok = t >= 4, bad_holder = h >= 4;
                int mine = (r == 0 && h == 2) || (r == 1 && h < 2) || (r == 2 && h == 3);
                if (bad_tok) {
                    want = "23Q02";
                } else if (bad_holder) {
                    want = "23Q02";
                } else if (r == 3 || t >= 2) {
                    want = ""; /* new resource, or raised: the writer's token and holder */
                    snprintf(mark, sizeof mark, "%s|%s", tok, h >= 2 ? holders[h] : "");
                } else if (t == 0) {
                    want = "23Q01"; /* older */
                } else {
                    want = mine ? "" : "23Q01"; /* same holder (the mark unchanged), or repeat */
                    snprintf(mark, sizeof mark, "%s", marks[r]);
                }
                expect_advance(c, holders[h], res, tok, want, mark);
            }
        }
    }
    /* Names: NULL, empty, too long; the longest is fine. */
    char big[600];
    memset(big, 'x', 513);
    big[513] = '\0';
    expect_advance(c, NULL, NULL, "5", "22023", NULL);
    expect_advance(c, NULL, NULL, "NULL", "22023", NULL);
    expect_advance(c, NULL, "", "5", "22023", NULL);
    expect_advance(c, "ABC", big, "0", "22023", NULL);
    big[512] = '\0';
    expect_advance(c, NULL, big, "5", "", "5|");
    expect_advance(c, "", "\xc3\xb1 \xe2\x82\xac", "NULL", "23Q02", NULL);
    /* A malformed holder is clipped to 40 characters in the message. */
    const char *n42 = "\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1"
                      "\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1"
                      "\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1"
                      "\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1"
                      "\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1\xc3\xb1'";
    expect_advance(c, n42, rh, "10", "23Q02", NULL);
    raw_advance(c, n42, rh, "10", false, &o);
    char clipped[160];
    snprintf(clipped, sizeof clipped, "malformed holder '%.80s' in fence.holder for resource \"ao-h\"", n42); /* 40 of them */
    ck_assert_msg(strstr(o.msg, clipped) != NULL, "%s", o.msg);
    PQfinish(c);
}
END_TEST

/* Holders left alone, '' and two others on one mark, each call committed:
 * '' is none, an equal token only from the holder recorded, a raise
 * records the writer's holder; updated_at moves with a raise. */
START_TEST(advance_sequence)
{
    PGconn *c = db();
    adv_res o;
    char holder[FENCE_HOLDER_LEN + 1];
    const char *ri = "as-mix";
    ck_assert_int_eq(raw_commit(c, NULL, ri, 5, &o), FENCE_OK);
    ck_assert_int_eq(raw_commit(c, NULL, ri, 6, &o), FENCE_OK);
    ck_assert_uint_eq(mark_of(c, ri, holder), 6);
    ck_assert_int_eq(raw_commit(c, "", ri, 6, &o), FENCE_OK);
    ck_assert_int_eq(raw_commit(c, NULL, ri, 5, &o), FENCE_STALE);
    ck_assert_int_eq(o.stale.reason, FENCE_STALE_OLDER);
    ck_assert_uint_eq(o.stale.highest, 6);
    ck_assert_int_eq(raw_commit(c, HA, ri, 7, &o), FENCE_OK);
    ck_assert_int_eq(raw_commit(c, HB, ri, 7, &o), FENCE_STALE);
    ck_assert_int_eq(o.stale.reason, FENCE_STALE_REPEAT);
    ck_assert_str_eq(o.stale.holder, HA);
    ck_assert_int_eq(raw_commit(c, HA, ri, 7, &o), FENCE_OK);
    ck_assert_int_eq(raw_commit(c, HB, ri, 8, &o), FENCE_OK);
    ck_assert_uint_eq(mark_of(c, ri, holder), 8);
    ck_assert_str_eq(holder, HB);
    ck_assert_int_eq(raw_commit(c, HA, ri, 8, &o), FENCE_STALE);
    ck_assert_int_eq(o.stale.reason, FENCE_STALE_REPEAT);
    ck_assert_int_eq(raw_commit(c, NULL, ri, 9, &o), FENCE_OK);
    ck_assert_uint_eq(mark_of(c, ri, holder), 9);
    ck_assert_str_eq(holder, "");
    /* updated_at moves with a raise (now(), the transaction's time). */
    ok(c, "BEGIN");
    ok(c, "SELECT fence.advance('as-time', 1)");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.marks WHERE resource = 'as-time'"
                            " AND updated_at = now()"), 1);
    ok(c, "ROLLBACK");
    ok(c, "SELECT fence.advance('as-time', 1)");
    ok(c, "BEGIN");
    ok(c, "SELECT fence.advance('as-time', 2)");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.marks WHERE resource = 'as-time'"
                            " AND updated_at = now()"), 1);
    ok(c, "ROLLBACK");
    PQfinish(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Malformed holders: refused, nothing changed                          */
/* ------------------------------------------------------------------ */

static const char *const bad_holders[] = {
    "",                                   /* the C API refuses "" (NULL is none) */
    "0123456789abcdef",                   /* too short */
    "0123456789abcdef0123456789abcde",    /* 31 */
    "0123456789abcdef0123456789abcdef0",  /* 33 */
    "0123456789ABCDEF0123456789ABCDEF",   /* uppercase */
    "0123456789abcdeF0123456789abcdef",   /* one uppercase */
    "0123456789abcdeg0123456789abcdef",   /* non-hex */
    " 0123456789abcdef0123456789abcde",   /* space */
    "0x23456789abcdef0123456789abcdef",   /* prefix */
    "0123456789abcdef0123456789abcde\n",  /* line break */
    "0123456789abcdef0123456789abcdef ",  /* trailing space */
};
#define N_BAD (sizeof bad_holders / sizeof bad_holders[0])

START_TEST(malformed_holder_refused_by_the_library)
{
    PGconn *c = db();
    outcome e;
    ck_assert_int_eq(advance_h(c, 40, HA, "mh", &e), FENCE_OK);
    for (size_t i = 0; i < N_BAD; i++) {
        /* set_token: EINVAL before anything is sent; the transaction is
         * untouched and still usable. */
        ok(c, "BEGIN");
        memset(&e.stale, 0xa5, sizeof e.stale);
        fence_status st = set_tok_h(c, 41, bad_holders[i], "mh", &e);
        ck_assert_msg(st == FENCE_EINVAL, "holder #%zu: %s", i, fence_status_name(st));
        ck_assert_str_eq(e.sqlstate, "");
        ck_assert_msg(strstr(e.message, "fence_pg_set_token: the holder") != NULL, "%s",
                      e.message);
        ck_assert_uint_eq(e.stale.offered, 0);
        ck_assert_str_eq(e.stale.holder, "");
        ck_assert_int_eq(PQtransactionStatus(c), PQTRANS_INTRANS);
        ck_assert_str_eq(text1(c, "SELECT coalesce(current_setting('fence.token', true), '')"),
                         "");
        ck_assert_str_eq(text1(c, "SELECT coalesce(current_setting('fence.holder', true), '')"),
                         "");
        ok(c, "COMMIT");
        /* send_token: EINVAL, nothing queued (the pipeline can be left). */
        ck_assert_int_eq(PQenterPipelineMode(c), 1);
        ck_assert_int_eq(fence_pg_send_token(c, 41, bad_holders[i], "mh"), FENCE_EINVAL);
        ck_assert_ptr_nonnull(strstr(fence_pg_errmsg(c), "fence_pg_send_token: the holder"));
        ck_assert_int_eq(PQexitPipelineMode(c), 1);
    }
    /* Argument order: a bad holder is reported before a bad resource. */
    ok(c, "BEGIN");
    ck_assert_int_eq(fence_pg_set_token(c, 41, "x", "", NULL), FENCE_EINVAL);
    ck_assert_ptr_nonnull(strstr(fence_pg_errmsg(c), "holder"));
    ok(c, "ROLLBACK");
    expect_mark(c, "mh", 40, HA);
    /* fence_pg_mark_holder's own arguments. */
    uint64_t m = 9;
    char h[FENCE_HOLDER_LEN + 1] = "junk";
    ck_assert_int_eq(fence_pg_mark_holder(c, "mh", &m, NULL), FENCE_EINVAL);
    ck_assert_uint_eq(m, 0);
    ck_assert_int_eq(fence_pg_mark_holder(c, "mh", NULL, h), FENCE_EINVAL);
    ck_assert_str_eq(h, "");
    ck_assert_int_eq(fence_pg_mark_holder(c, "", &m, h), FENCE_EINVAL);
    ck_assert_int_eq(fence_pg_mark_holder(NULL, "mh", &m, h), FENCE_EINVAL);
    ck_assert_int_eq(PQenterPipelineMode(c), 1);
    ck_assert_int_eq(fence_pg_mark_holder(c, "mh", &m, h), FENCE_ESTATE);
    ck_assert_int_eq(PQexitPipelineMode(c), 1);
    PQfinish(c);
}
END_TEST

/* Set in SQL, a malformed fence.holder fails closed (23Q02 naming
 * fence.holder) and changes nothing -- a higher token does not raise the
 * mark, a new resource gets none; '' is no holder. */
START_TEST(malformed_holder_refused_by_the_sql)
{
    PGconn *c = db();
    outcome e;
    char sql[256];
    ck_assert_int_eq(advance_h(c, 50, HA, "ms", &e), FENCE_OK);
    for (size_t i = 1; i < N_BAD; i++) { /* [0] is '': none, below */
        char *lit = PQescapeLiteral(c, bad_holders[i], strlen(bad_holders[i]));
        static const char *const targets[] = {"ms', 51", "ms', 50", "ms-new', 1"};
        for (size_t t = 0; t < 3; t++) {
            snprintf(sql, sizeof sql,
                     "BEGIN; SELECT set_config('fence.holder', %s, true);"
                     " SELECT fence.advance('%s)", lit, targets[t]);
            ck_assert_int_eq(run(c, sql, &e), FENCE_ENOTOKEN);
            ck_assert_str_eq(e.sqlstate, "23Q02");
            ck_assert_msg(strstr(e.message, "fence.holder") != NULL, "%s", e.message);
            ok(c, "ROLLBACK");
        }
        PQfreemem(lit);
    }
    ck_assert_str_eq(detail_of(c, "BEGIN; SET LOCAL fence.holder = 'nope';"
                                  " SELECT fence.advance('ms', 51)"),
                     "reason=malformed setting=fence.holder");
    ok(c, "ROLLBACK");
    expect_mark(c, "ms", 50, HA);
    expect_mark(c, "ms-new", 0, "");
    /* '' is none (a repeat against HA), unset too. */
    fails(c, "BEGIN; SET LOCAL fence.holder = ''; SELECT fence.advance('ms', 50)", "23Q01");
    ok(c, "ROLLBACK");
    ok(c, "BEGIN; SET LOCAL fence.holder = ''; SELECT fence.advance('ms', 51); COMMIT");
    expect_mark(c, "ms", 51, "");
    /* The marks' CHECK and guard hold even for the owner. */
    fails(c, "INSERT INTO fence.marks (resource, token, holder) VALUES ('ms-x', 1, 'ABC')",
          "23514");
    fails(c, "UPDATE fence.marks SET holder = '" HB "' WHERE resource = 'ms'", "23Q03");
    ok(c, "UPDATE fence.marks SET holder = '" HB "', token = 52 WHERE resource = 'ms'");
    expect_mark(c, "ms", 52, HB);
    fails(c, "UPDATE fence.marks SET holder = NULL WHERE resource = 'ms'", "23Q03");
    PQfinish(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* fence.holder per session or per transaction, like fence.token         */
/* ------------------------------------------------------------------ */

START_TEST(session_and_local_settings)
{
    PGconn *c = db();
    outcome e;
    /* Session-level: neither is admitted (only fence.use_token() binds
     * them to the transaction that writes), and nothing is written. */
    ok(c, "SET fence.token = 60; SET fence.holder = '" HA "'");
    ck_assert_str_eq(detail_of(c, "SELECT fence.advance('sl', 60)"),
                     "reason=unbound setting=fence.holder");
    ck_assert_str_eq(detail_of(c, "SELECT fence.current_token()"),
                     "reason=unbound setting=fence.token");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.marks WHERE resource = 'sl'"), 0);
    /* use_token() overrides them for one transaction; afterwards the
     * session's are back, and refused again. */
    ok(c, "BEGIN; SELECT fence.use_token(61, '" HB "')");
    ck_assert_int_eq(num(c, "SELECT fence.current_token()"), 61);
    ck_assert_int_eq(num(c, "SELECT fence.advance('sl', 61)"), 61);
    ok(c, "COMMIT");
    expect_mark(c, "sl", 61, HB);
    ck_assert_str_eq(text1(c, "SELECT current_setting('fence.holder')"), HA);
    fails(c, "SELECT fence.current_token()", "23Q02");
    fails(c, "BEGIN; SET LOCAL fence.holder = '" HB "'; SELECT fence.advance('sl', 61)", "23Q02");
    ok(c, "ROLLBACK");

    /* The C API: NULL means no holder for that transaction (the session's
     * does not leak in). */
    ok(c, "BEGIN");
    ck_assert_int_eq(set_tok_h(c, 61, NULL, NULL, &e), FENCE_OK);
    ck_assert_str_eq(text1(c, "SELECT current_setting('fence.holder')"), "");
    ok(c, "ROLLBACK");
    expect_stale(advance_h(c, 61, NULL, "sl", &e), &e, "sl", 61, 61, FENCE_STALE_REPEAT, HB);
    ck_assert_int_eq(advance_h(c, 61, HB, "sl", &e), FENCE_OK);

    /* A transaction's settings are gone after it, for both. */
    ok(c, "RESET fence.token; RESET fence.holder");
    ok(c, "BEGIN; SELECT fence.use_token(70, '" HB "');"
          " SELECT fence.advance('sl2', 70); COMMIT");
    expect_mark(c, "sl2", 70, HB);
    ck_assert_str_eq(text1(c, "SELECT current_setting('fence.token', true)"), "");
    ck_assert_str_eq(text1(c, "SELECT current_setting('fence.holder', true)"), "");
    fails(c, "SELECT fence.current_token()", "23Q02");
    fails(c, "SELECT fence.advance('sl2', 70)", "23Q01"); /* no holder now: a repeat */

    /* A session-level holder through fence.advance: refused with its own
     * message, DETAIL and HINT (fence_pg_classify: FENCE_ENOTOKEN); a
     * holder bound to the transaction over it is used; so is the
     * library's, prepared or not, in both modes. */
    adv_res x;
    ck_assert_int_eq(advance_h(c, 10, HA, "sl3", &e), FENCE_OK);
    ok(c, "SET fence.holder = '" HA "'");
    raw_advance(c, NULL, "sl3", "10", false, &x);
    ck_assert_str_eq(x.state, "23Q02");
    ck_assert_int_eq(x.status, FENCE_ENOTOKEN);
    ck_assert_str_eq(x.detail, "reason=unbound setting=fence.holder");
    ck_assert_ptr_nonnull(strstr(x.msg, "was not set by fence.use_token() in this transaction"));
    ck_assert_ptr_nonnull(strstr(x.hint, "fence.use_token("));
    raw_advance(c, HA, "sl3", "10", false, &x); /* LOCAL over it */
    ck_assert_str_eq(x.state, "");
    ck_assert_int_eq(advance_h(c, 10, HA, "sl3", &e), FENCE_OK);
    ck_assert_int_eq(fence_pg_prepare(c), FENCE_OK);
    ck_assert_int_eq(advance_h(c, 10, HA, "sl3", &e), FENCE_OK);
    ck_assert_int_eq(pipelined_h(c, 10, HA, "sl3", "SELECT 1", &e), FENCE_OK);
    ok(c, "RESET fence.holder");
    PQfinish(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Prepared and pipelined                                               */
/* ------------------------------------------------------------------ */

/* The rule through every path of the library: unprepared and prepared,
 * fence_pg_set_token and fence_pg_send_token. */
static void rule_through(PGconn *c, const char *res, uint64_t base)
{
    outcome e;
    char sql[128];
    snprintf(sql, sizeof sql, "UPDATE pq SET v = v + 1 WHERE id = 1");
    /* set_token */
    ck_assert_int_eq(advance_h(c, base, HA, res, &e), FENCE_OK);
    ck_assert_int_eq(advance_h(c, base, HA, res, &e), FENCE_OK);
    expect_stale(advance_h(c, base, HB, res, &e), &e, res, base, base, FENCE_STALE_REPEAT, HA);
    expect_stale(advance_h(c, base, NULL, res, &e), &e, res, base, base, FENCE_STALE_REPEAT, HA);
    /* The holder is set in the same statement, also without a resource. */
    ok(c, "BEGIN");
    ck_assert_int_eq(set_tok_h(c, base, HB, NULL, &e), FENCE_OK);
    ck_assert_str_eq(text1(c, "SELECT current_setting('fence.holder')"), HB);
    ck_assert_int_eq(set_tok_h(c, base, NULL, NULL, &e), FENCE_OK);
    ck_assert_str_eq(text1(c, "SELECT current_setting('fence.holder')"), "");
    ok(c, "ROLLBACK");
    /* send_token: a repeat aborts the pipeline, the UPDATE does not run. */
    long long before = num(c, "SELECT v FROM pq WHERE id = 1");
    ck_assert_int_eq(pipelined_h(c, base, HA, res, sql, &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT v FROM pq WHERE id = 1"), before + 1);
    fence_status st = pipelined_h(c, base, HB, res, sql, &e);
    expect_stale(st, &e, res, base, base, FENCE_STALE_REPEAT, HA);
    ck_assert_int_eq(pipelined_h(c, base + 1, HB, res, sql, &e), FENCE_OK);
    expect_mark(c, res, base + 1, HB);
    ck_assert_int_eq(pipelined_h(c, base + 1, NULL, res, sql, &e), FENCE_STALE);
    ck_assert_int_eq(e.stale.reason, FENCE_STALE_REPEAT);
    ck_assert_int_eq(pipelined_h(c, base + 2, NULL, res, sql, &e), FENCE_OK);
    expect_mark(c, res, base + 2, "");
    ck_assert_int_eq(num(c, "SELECT v FROM pq WHERE id = 1"), before + 3);
}

START_TEST(prepared_and_pipelined)
{
    PGconn *c = db();
    ok(c, "CREATE TABLE pq (id int PRIMARY KEY, v int); INSERT INTO pq VALUES (1, 0)");
    rule_through(c, "pq-unprepared", 100);
    ck_assert_int_eq(fence_pg_prepare(c), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_prepared_statements"), 0);
    rule_through(c, "pq-prepared", 200);
    /* A session that kept an older library's statement (one parameter,
     * no holder) under the old name: prepared anew under the new names. */
    PGconn *d = db();
    ok(d, "PREPARE fence_pg_set_token(text) AS SELECT pg_catalog.set_config('fence.token', $1, true)");
    ck_assert_int_eq(fence_pg_prepare(d), FENCE_OK);
    outcome e;
    ck_assert_int_eq(advance_h(d, 300, HA, "pq-d", &e), FENCE_OK);
    expect_stale(advance_h(d, 300, HB, "pq-d", &e), &e, "pq-d", 300, 300, FENCE_STALE_REPEAT, HA);
    PQfinish(d);
    PQfinish(c);
}
END_TEST

/* An application role through the library on a fence_pg_prepare()d
 * connection: the library advances with fence.advance, the rule holds,
 * fence.marks stays closed to the role (its guard enabled), and revoking fence.advance from PUBLIC closes it to the
 * role (42501) until fence.grant() gives it back. */
START_TEST(prepared_as_application)
{
    PGconn *c = db();
    PGconn *a = db_app();
    outcome e;
    adv_res o;
    const char *res = "pa-app";
    ck_assert_int_eq(fence_pg_prepare(a), FENCE_OK);
    ck_assert_int_eq(num(a, "SELECT count(*) FROM pg_prepared_statements"), 0);
    ck_assert_int_eq(advance_h(a, 3, HA, res, &e), FENCE_OK);
    /* The statement the library sends advances with fence.advance, also
     * where the extension is installed (the session's last statement,
     * seen while it is idle in a transaction). */
    char q[256];
    snprintf(q, sizeof q, "SELECT count(*) FROM pg_stat_activity WHERE pid = %d"
             " AND query LIKE '%%fence.advance($3, %%' AND query NOT LIKE '%%c\\_advance%%'",
             PQbackendPID(a));
    ok(a, "BEGIN");
    ck_assert_int_eq(set_tok_h(a, 3, HA, res, &e), FENCE_OK);
    ck_assert_int_eq(num(c, q), 1);
    ok(a, "ROLLBACK");
    ck_assert_int_eq(advance_h(a, 2, HA, res, &e), FENCE_STALE);
    ck_assert_int_eq(advance_h(a, 3, HB, res, &e), FENCE_STALE);
    ck_assert_int_eq(e.stale.reason, FENCE_STALE_REPEAT);
    ck_assert_int_eq(pipelined_h(a, 4, NULL, res, "SELECT 1", &e), FENCE_OK);
    ck_assert_int_eq(raw_commit(a, NULL, res, 5, &o), FENCE_OK);
    expect_mark(c, res, 5, "");
    /* fence.marks itself stays closed to the role. */
    fails(a, "UPDATE fence.marks SET token = 9223372036854775807", "42501");
    fails(a, "INSERT INTO fence.marks (resource, token) VALUES ('pa-app-x', 1)", "42501");
    fails(a, "SELECT * FROM fence.marks FOR UPDATE", "42501");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'fence.marks'::regclass"
                            " AND tgname = 'marks_no_lowering' AND tgenabled = 'O'"),
                     1);
    /* Revoking fence.advance from PUBLIC (fence.grant's restriction). */
    ok(c, "REVOKE EXECUTE ON FUNCTION fence.advance(text, bigint) FROM PUBLIC");
    outcome ea;
    ck_assert_int_eq(run(a, "SELECT fence.advance('pa-app-y', 1)", &ea), FENCE_EDB);
    ck_assert_str_eq(ea.sqlstate, "42501");
    char grant[256];
    snprintf(grant, sizeof grant, "SELECT fence.grant('%s', false)", g_app);
    ok(c, grant);
    ck_assert_int_eq(run(a, "SELECT fence.advance('pa-app-y', 1)", &ea), FENCE_OK);
    ok(c, "GRANT EXECUTE ON FUNCTION fence.advance(text, bigint) TO PUBLIC");
    snprintf(grant, sizeof grant, "REVOKE EXECUTE ON FUNCTION fence.advance(text, bigint) FROM %s",
             g_app);
    ok(c, grant);
    PQfinish(a);
    PQfinish(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Rows compare tokens only                                             */
/* ------------------------------------------------------------------ */

START_TEST(rows_compare_tokens_only)
{
    PGconn *c = db();
    outcome e;
    make_table(c, "rt");
    /* Two holders with the same token: both pass the row triggers... */
    ok(c, "BEGIN");
    ck_assert_int_eq(set_tok_h(c, 80, HA, NULL, &e), FENCE_OK);
    ok(c, "UPDATE rt SET v = 1 WHERE id = 1; COMMIT");
    ok(c, "BEGIN");
    ck_assert_int_eq(set_tok_h(c, 80, HB, NULL, &e), FENCE_OK);
    ok(c, "UPDATE rt SET v = 2 WHERE id = 1; COMMIT");
    ck_assert_int_eq(num(c, "SELECT v FROM rt WHERE id = 1"), 2);
    /* ...and a malformed fence.holder is not their business. */
    ok(c, "BEGIN; SELECT fence.use_token(80); SET LOCAL fence.holder = 'nope';"
          " UPDATE rt SET v = 3 WHERE id = 1; COMMIT");
    /* Advancing a resource in the same transaction makes rows repeat-proof:
     * the second holder is refused before it writes. */
    ok(c, "BEGIN");
    ck_assert_int_eq(set_tok_h(c, 81, HA, "rt/1", &e), FENCE_OK);
    ok(c, "UPDATE rt SET v = 4 WHERE id = 1; COMMIT");
    ok(c, "BEGIN");
    expect_stale(set_tok_h(c, 81, HB, "rt/1", &e), &e, "rt/1", 81, 81, FENCE_STALE_REPEAT, HA);
    ok(c, "ROLLBACK");
    ck_assert_int_eq(num(c, "SELECT v FROM rt WHERE id = 1"), 4);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM rt WHERE id = 1"), 81);
    PQfinish(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Upgrade from version 2                                               */
/* ------------------------------------------------------------------ */

/* The released version 2, installed by a non-superuser admin, with marks,
 * a protected table and a restricted fence.advance, upgraded in place:
 * marks kept (with no holder), tables still protected with their stamps,
 * grants kept; then the holder rule applies to the old marks. */
START_TEST(upgrade_from_version_2_keeps_marks)
{
    char d[NAME_BUF], fadmin[NAME_BUF], app[NAME_BUF], sql[1024];
    side_role("h2admin", fadmin);
    side_role("h2app", app);
    side_db("h2", NULL, d);
    PGconn *su = connect_as(d, NULL);
    PQsetNoticeProcessor(su, quiet_notice, NULL);
    snprintf(sql, sizeof sql, "GRANT CREATE ON DATABASE %s TO %s; GRANT CREATE ON SCHEMA public TO %s",
             d, fadmin, fadmin);
    ok(su, sql);
    PGconn *fa = connect_as(d, fadmin);
    PQsetNoticeProcessor(fa, quiet_notice, NULL);
    install_v2(fa);
    ck_assert_int_eq(num(fa, "SELECT count(*) FROM pg_attribute WHERE attrelid = 'fence.marks'::regclass"
                             " AND attname = 'holder'"),
                     0);
    ok(fa, "BEGIN; SELECT fence.advance('u2-a', 7), fence.advance('u2-b', 9); COMMIT");
    ok(fa, "CREATE TABLE u2t (id int PRIMARY KEY, v int); INSERT INTO u2t VALUES (1, 0);"
           "SELECT fence.protect('u2t');"
           "BEGIN; SET LOCAL fence.token = 15; UPDATE u2t SET v = 1; COMMIT");
    snprintf(sql, sizeof sql,
             "REVOKE EXECUTE ON FUNCTION fence.advance(text, bigint) FROM PUBLIC;"
             "GRANT EXECUTE ON FUNCTION fence.advance(text, bigint) TO %s;"
             "GRANT SELECT, UPDATE ON u2t TO %s",
             app, app);
    ok(fa, sql);

    /* Upgrade (twice: idempotent), as the same admin. */
    notes n = {{0}};
    PQsetNoticeReceiver(fa, collect_notice, &n);
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(fence_pg_install(fa) == FENCE_OK, "upgrade #%d: %s", i + 1,
                      fence_pg_errmsg(fa));
    }
    /* The only warning: a non-superuser installs no event trigger. */
    char *et = strstr(n.text, "WARNING:  fence: installed by ");
    ck_assert_msg(et != NULL && strstr(et, "not a superuser: no event trigger") != NULL,
                  "warnings: %s", n.text);
    ck_assert_msg(strstr(n.text, "WARNING:  fence: ") == et, "warnings: %s", n.text);
    ck_assert_int_eq(count_of(n.text, "WARNING:"), 2); /* one per install */
    ck_assert_int_eq(count_of(n.text, "not a superuser: no event trigger"), 2);
    ck_assert_int_eq(num(fa, "SELECT fence.version()"), PG_SQL_VERSION);
    ck_assert_int_eq(num(fa, "SELECT version FROM fence.meta"), PG_SQL_VERSION);
    ck_assert_int_eq(num(fa, "SELECT count(*) FROM pg_constraint"
                             " WHERE conrelid = 'fence.marks'::regclass"
                             " AND conname = 'marks_holder_check'"),
                     1);
    /* The marks are kept, with no holder. */
    ck_assert_int_eq(num(fa, "SELECT count(*) FROM fence.marks WHERE holder IS NULL"), 2);
    expect_mark(fa, "u2-a", 7, "");
    expect_mark(fa, "u2-b", 9, "");
    /* The protected table keeps its stamps and grants, and is protected
     * again by version 4 (its owner installs): the four guards, generated
     * functions, no AFTER check needed. */
    ck_assert_int_eq(num(fa, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'u2t'::regclass"
                             " AND tgname LIKE 'zz_fence_%'"),
                     4);
    ck_assert_str_eq(text1(fa, "SELECT implementation || ' ' || col || ' ' || mode FROM fence.protected"
                               " WHERE tbl = 'u2t'::regclass"),
                     "plpgsql fence_token strict");
    ck_assert_int_eq(num(fa, "SELECT fence_token FROM u2t WHERE id = 1"), 15);

    /* The application: advance still restricted to it, the rule applies
     * to the old marks (recorded with no holder). */
    PGconn *ap = connect_as(d, app);
    PQsetNoticeProcessor(ap, quiet_notice, NULL);
    outcome e;
    ck_assert_int_eq(advance_h(ap, 7, NULL, "u2-a", &e), FENCE_OK); /* none == none */
    expect_stale(advance_h(ap, 7, HA, "u2-a", &e), &e, "u2-a", 7, 7, FENCE_STALE_REPEAT, "");
    expect_stale(advance_h(ap, 6, HA, "u2-a", &e), &e, "u2-a", 6, 7, FENCE_STALE_OLDER, "");
    ck_assert_int_eq(advance_h(ap, 8, HA, "u2-a", &e), FENCE_OK);
    expect_mark(ap, "u2-a", 8, HA);
    ck_assert_int_eq(write_tok(ap, 14, "UPDATE u2t SET v = 2", &e), FENCE_STALE);
    ck_assert_int_eq(write_tok(ap, 15, "UPDATE u2t SET v = 2", &e), FENCE_OK);
    PGconn *other = connect_as(d, g_app);
    fails(other, "SELECT fence.advance('u2-a', 9)", "42501");
    ck_assert_str_eq(text1(other, "SELECT fence.mark_holder('u2-a')"), HA);
    PQfinish(other);
    PQfinish(ap);
    PQfinish(fa);
    PQfinish(su);
    drop_side_db(d);
}
END_TEST

/* A connection that still runs the version-2 install (not yet upgraded):
 * fence_pg_mark_holder fails clearly; fence_pg_set_token still fences by
 * token (version 2 ignores fence.holder, as documented). */
/* What fence_pg_send_token sends without a resource (no result column)
 * still sets both settings for the transaction: read back in the same
 * pipeline, prepared and not; a later call with no holder clears one set
 * earlier in the same transaction. */
static void send_then_read(PGconn *c, uint64_t tok, const char *holder, char *out, size_t n)
{
    ck_assert_int_eq(fence_pg_send_token(c, tok, holder, NULL), FENCE_OK);
    ck_assert_int_eq(PQsendQueryParams(c,
                                       "SELECT current_setting('fence.token', true) || '/' || "
                                       "current_setting('fence.holder', true)",
                                       0, NULL, NULL, NULL, NULL, 0),
                     1);
    /* Results before the sync: ask the server to send what it has. */
    ck_assert_int_eq(PQsendFlushRequest(c), 1);
    ck_assert_int_eq(PQflush(c), 0);
    PGresult *r = PQgetResult(c);
    ck_assert_int_eq(fence_pg_classify(c, r, NULL), FENCE_OK);
    PQclear(r);
    ck_assert_ptr_null(PQgetResult(c));
    r = PQgetResult(c);
    ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
    snprintf(out, n, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    ck_assert_ptr_null(PQgetResult(c));
}

START_TEST(send_token_sets_both_settings)
{
    for (int prepared = 0; prepared < 2; prepared++) {
        PGconn *c = db();
        char got[128];
        if (prepared) {
            ck_assert_int_eq(fence_pg_prepare(c), FENCE_OK);
        }
        ck_assert_int_eq(PQenterPipelineMode(c), 1);
        /* One implicit transaction: set with a holder, then without. */
        send_then_read(c, 41, HA, got, sizeof got);
        ck_assert_str_eq(got, "41/" HA);
        send_then_read(c, 42, NULL, got, sizeof got);
        ck_assert_str_eq(got, "42/");
        ck_assert_int_eq(PQpipelineSync(c), 1);
        PGresult *r = PQgetResult(c);
        ck_assert_int_eq(PQresultStatus(r), PGRES_PIPELINE_SYNC);
        PQclear(r);
        ck_assert_int_eq(PQexitPipelineMode(c), 1);
        /* Transaction-local: gone after it. */
        ck_assert_str_eq(text1(c, "SELECT coalesce(current_setting('fence.token', true), '') || "
                                  "'/' || coalesce(current_setting('fence.holder', true), '')"),
                         "/");
        PQfinish(c);
    }
}
END_TEST

START_TEST(library_against_version_2)
{
    char d[NAME_BUF];
    side_db("h2lib", NULL, d);
    PGconn *c = connect_as(d, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    install_v2(c);
    outcome e;
    /* The library needs fence.use_token() (version 5): it says so, and
     * writes nothing. */
    ck_assert_int_eq(advance_h(c, 5, HA, "v2", &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "42883");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.marks"), 0);
    /* Version 2's own DETAIL still parses (object last). */
    ok(c, "SELECT fence.advance('v2', 5)");
    PGresult *r = PQexec(c, "SELECT fence.advance('v2', 4)");
    ck_assert_int_eq(fence_pg_classify(c, r, &e.stale), FENCE_STALE);
    PQclear(r);
    ck_assert_int_eq(e.stale.reason, FENCE_STALE_OLDER);
    ck_assert_str_eq(e.stale.object, "v2");
    ck_assert_str_eq(e.stale.holder, "");
    uint64_t m = 1;
    char h[FENCE_HOLDER_LEN + 1];
    ck_assert_int_eq(fence_pg_mark_holder(c, "v2", &m, h), FENCE_EDB);
    ck_assert_str_eq(fence_pg_sqlstate(c), "42883"); /* no fence.mark_holder */
    ck_assert_uint_eq(m, 0);
    ck_assert_int_eq(fence_pg_mark(c, "v2", &m), FENCE_OK);
    ck_assert_uint_eq(m, 5);
    /* Upgrading makes the holder rule apply. */
    ck_assert_int_eq(fence_pg_install(c), FENCE_OK);
    expect_stale(advance_h(c, 5, HA, "v2", &e), &e, "v2", 5, 5, FENCE_STALE_REPEAT, "");
    PQfinish(c);
    drop_side_db(d);
}
END_TEST

static Suite *pg_holder_suite(void)
{
    Suite *s = suite_create("pg_holder");
    TCase *t = pg_tcase("pg_holder");
    tcase_add_test(t, equal_token_only_from_the_same_holder);
    tcase_add_test(t, detail_format);
    tcase_add_test(t, advance_outcomes);
    tcase_add_test(t, advance_sequence);
    tcase_add_test(t, malformed_holder_refused_by_the_library);
    tcase_add_test(t, malformed_holder_refused_by_the_sql);
    tcase_add_test(t, session_and_local_settings);
    tcase_add_test(t, prepared_and_pipelined);
    tcase_add_test(t, prepared_as_application);
    tcase_add_test(t, send_token_sets_both_settings);
    tcase_add_test(t, rows_compare_tokens_only);
    tcase_add_test(t, upgrade_from_version_2_keeps_marks);
    tcase_add_test(t, library_against_version_2);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(pg_holder_suite());
}
