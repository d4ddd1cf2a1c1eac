/*
 * test_pg_race.c -- fence.advance(resource, token) under real concurrency
 * against a real PostgreSQL, in every run (the portable PL/pgSQL
 * fence.advance, SELECT ... FOR UPDATE; in a "c" run the databases also
 * have the extension, which since 1.4 has no C fence.c_advance: 1.1 to 1.3
 * had one, and these cases were written to hold it to fence.advance's
 * behaviour):
 *   - every call, the equal-token hot path included, leaves the mark's row
 *     locked FOR UPDATE until the transaction ends;
 *   - in READ COMMITTED a call waits for a concurrent writer of the mark
 *     and then judges the token against what that writer committed (or
 *     the mark it rolled back to);
 *   - in REPEATABLE READ / SERIALIZABLE a mark changed after the snapshot
 *     is a serialization failure (40001);
 *   - a transaction sees its own raises (and rolled back savepoints);
 *   - creators of a new resource wait for each other;
 *   - committed tokens never go down in the order the row lock admits
 *     them (a threaded stress);
 *   - what a backend has prepared for fence.marks (PL/pgSQL's saved plans)
 *     survives REINDEX, VACUUM FULL, REINDEX CONCURRENTLY (a new index
 *     OID), ALTER TABLE ADD/DROP COLUMN, and ANALYZE / VACUUM, also when
 *     these commit while the caller's transaction is already open;
 *   - and stays right when an invalidation is taken in during a call: a
 *     later renaming of the token column, a later pg_proc invalidation;
 *   - a child table of fence.marks (the statement reads it) and row
 *     security forced on it (the statements run as its owner, subject to
 *     the policies), in a backend that knew fence.marks before and in a
 *     fresh one.  The renaming, the child table and row security each get
 *     a database of their own.
 * A call shown to be blocked is still busy after BLOCK_MS and its backend
 * waits on a heavyweight lock (pg_stat_activity.wait_event_type = 'Lock').
 * Own database and role per run (pgutil.c).
 */
#include "casetable.h"
#include "pgutil.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HA "0123456789abcdef0123456789abcdef"
#define HB "fedcba9876543210fedcba9876543210"

/* How long a blocked call must stay blocked; how long a released one may
 * take to answer. */
#define BLOCK_MS 300
#define ANSWER_MS 5000

static bool is_c(void)
{
    return strcmp(pg_impl(), "c") == 0;
}

/* What one statement returned. */
typedef struct res {
    bool ok;
    long long value; /* the first column of the first row, when ok */
    char state[6];
    char msg[512];
    char detail[512];
} res;

static void take(PGresult *r, res *o)
{
    memset(o, 0, sizeof *o);
    ExecStatusType s = PQresultStatus(r);
    if (s == PGRES_TUPLES_OK || s == PGRES_COMMAND_OK) {
        o->ok = true;
        if (s == PGRES_TUPLES_OK && PQntuples(r) > 0 && PQnfields(r) > 0 &&
            !PQgetisnull(r, 0, 0)) {
            o->value = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        }
        return;
    }
    const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    const char *m = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
    const char *d = PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL);
    snprintf(o->state, sizeof o->state, "%s", st != NULL ? st : "?????");
    snprintf(o->msg, sizeof o->msg, "%s", m != NULL ? m : PQresultErrorMessage(r));
    snprintf(o->detail, sizeof o->detail, "%s", d != NULL ? d : "");
}

static void adv_sql(char *buf, size_t n, const char *resource, long long tok)
{
    snprintf(buf, n, "SELECT fence.advance('%s', %lld)", resource, tok);
}

/* fence.advance(resource, tok), synchronously. */
static res call(PGconn *c, const char *resource, long long tok)
{
    char sql[256];
    res o;
    adv_sql(sql, sizeof sql, resource, tok);
    PGresult *r = PQexec(c, sql);
    take(r, &o);
    PQclear(r);
    return o;
}

static void expect_ok(const res *o, long long value, const char *what)
{
    ck_assert_msg(o->ok, "%s: failed: %s (%s)", what, o->msg, o->state);
    ck_assert_msg(o->value == value, "%s: returned %lld, expected %lld", what, o->value, value);
}

static void expect_state(const res *o, const char *state, const char *what)
{
    ck_assert_msg(!o->ok, "%s: succeeded (returned %lld); expected SQLSTATE %s", what, o->value,
                  state);
    ck_assert_msg(strcmp(o->state, state) == 0, "%s: SQLSTATE %s (%s), expected %s", what,
                  o->state, o->msg, state);
}

/* A 23Q01 naming highest as the mark (reason older unless repeat). */
static void expect_stale(const res *o, long long offered, long long highest, bool repeat,
                         const char *what)
{
    char want[128];
    expect_state(o, "23Q01", what);
    snprintf(want, sizeof want, "stale token %lld ", offered);
    ck_assert_msg(strstr(o->msg, want) != NULL, "%s: message '%s'", what, o->msg);
    snprintf(want, sizeof want, "(highest seen %lld%s", highest,
             repeat ? ", recorded for a different holder)" : ")");
    ck_assert_msg(strstr(o->msg, want) != NULL, "%s: message '%s', expected '%s'", what, o->msg,
                  want);
    snprintf(want, sizeof want, "offered=%lld highest=%lld ", offered, highest);
    ck_assert_msg(strstr(o->detail, want) != NULL, "%s: detail '%s'", what, o->detail);
    ck_assert_msg(strstr(o->detail, repeat ? "reason=repeat" : "reason=older") != NULL,
                  "%s: detail '%s'", what, o->detail);
}

/* The committed mark of resource (0: none), read by the superuser
 * connection watch. */
static long long mark(PGconn *watch, const char *resource)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT COALESCE((SELECT token FROM fence.marks WHERE resource = '%s'), 0)",
             resource);
    return num(watch, sql);
}

/* Raise resource's mark to tok in a transaction of its own. */
static void set_mark(PGconn *c, const char *resource, long long tok)
{
    res o = call(c, resource, tok);
    expect_ok(&o, tok, "setting the mark");
}

/* ------------------------------------------------------------------ */
/* Asynchronous calls: sent, shown blocked, released, collected          */
/* ------------------------------------------------------------------ */

static void send_sql(PGconn *c, const char *sql)
{
    ck_assert_msg(PQsendQuery(c, sql) == 1, "PQsendQuery: %s", PQerrorMessage(c));
}

static void send_call(PGconn *c, const char *resource, long long tok)
{
    char sql[256];
    adv_sql(sql, sizeof sql, resource, tok);
    send_sql(c, sql);
}

/* The statement sent on c is blocked: its backend waits on a lock, and it
 * is still busy after BLOCK_MS. */
static void expect_blocked(PGconn *watch, PGconn *c, const char *what)
{
    int64_t start = tu_now_ms();
    int64_t deadline = start + 3000;
    const char *w;
    for (;;) {
        ck_assert_msg(pg_busy(c), "%s: answered at once; expected it to wait", what);
        w = pg_wait_event(watch, c);
        if (strncmp(w, "Lock/", 5) == 0) {
            break;
        }
        ck_assert_msg(tu_now_ms() < deadline, "%s: never waited on a lock (wait event '%s')",
                      what, w);
        tu_sleep_ms(5);
    }
    while (tu_now_ms() < start + BLOCK_MS) {
        ck_assert_msg(pg_busy(c), "%s: answered after %lld ms; expected it to stay blocked", what,
                      (long long)(tu_now_ms() - start));
        tu_sleep_ms(10);
    }
    ck_assert_msg(pg_busy(c), "%s: answered; expected it to stay blocked", what);
    w = pg_wait_event(watch, c);
    ck_assert_msg(strncmp(w, "Lock/", 5) == 0, "%s: after %d ms waits on '%s', not a lock", what,
                  BLOCK_MS, w);
}

/* The answer to the statement sent on c, within ANSWER_MS. */
static res collect(PGconn *c, const char *what)
{
    res o;
    PGresult *r = pg_answer(c, what, ANSWER_MS);
    take(r, &o);
    PQclear(r);
    return o;
}

/* ------------------------------------------------------------------ */
/* 1. The hot path holds the row lock                                    */
/* ------------------------------------------------------------------ */

START_TEST(hot_path_holds_the_row_lock)
{
    PGconn *watch = db();
    PGconn *a = db_app();
    PGconn *b = db();
    res o;
    set_mark(a, "race1", 5);

    ok(a, "BEGIN");
    o = call(a, "race1", 5); /* equal token, same (no) holder: the hot path */
    expect_ok(&o, 5, "A advance(race1, 5)");
    fails(b, "SELECT 1 FROM fence.marks WHERE resource = 'race1' FOR UPDATE NOWAIT", "55P03");
    /* FOR KEY SHARE conflicts with FOR UPDATE only: the lock is that strong. */
    fails(b, "SELECT 1 FROM fence.marks WHERE resource = 'race1' FOR KEY SHARE NOWAIT", "55P03");
    /* A plain read is not blocked. */
    ck_assert_int_eq(mark(b, "race1"), 5);
    /* A writer waits. */
    send_sql(b, "SELECT 1 FROM fence.marks WHERE resource = 'race1' FOR UPDATE");
    expect_blocked(watch, b, "B SELECT FOR UPDATE");
    ok(a, "COMMIT");
    o = collect(b, "B SELECT FOR UPDATE");
    expect_ok(&o, 1, "B SELECT FOR UPDATE after A's commit");
    ok(b, "SELECT 1 FROM fence.marks WHERE resource = 'race1' FOR UPDATE NOWAIT");

    /* A call that finds a lower mark (and raises it) holds the lock too. */
    ok(a, "BEGIN");
    o = call(a, "race1", 6);
    expect_ok(&o, 6, "A advance(race1, 6)");
    fails(b, "SELECT 1 FROM fence.marks WHERE resource = 'race1' FOR UPDATE NOWAIT", "55P03");
    ok(a, "ROLLBACK");
    ok(b, "SELECT 1 FROM fence.marks WHERE resource = 'race1' FOR UPDATE NOWAIT");
    ck_assert_int_eq(mark(watch, "race1"), 5);

    /* And so does the first call for a new resource (its insert). */
    ok(a, "BEGIN");
    o = call(a, "race1-new", 3);
    expect_ok(&o, 3, "A advance(race1-new, 3)");
    send_sql(b, "SELECT 1 FROM fence.marks WHERE resource = 'race1-new' FOR UPDATE");
    /* B cannot see the uncommitted row: it finds nothing and returns. */
    o = collect(b, "B SELECT FOR UPDATE of an uncommitted mark");
    ck_assert_msg(o.ok, "%s", o.msg);
    ok(a, "COMMIT");
    ck_assert_int_eq(mark(watch, "race1-new"), 3);
    ok(a, "BEGIN");
    o = call(a, "race1-new", 3);
    expect_ok(&o, 3, "A advance(race1-new, 3) again");
    fails(b, "SELECT 1 FROM fence.marks WHERE resource = 'race1-new' FOR UPDATE NOWAIT",
          "55P03");
    ok(a, "COMMIT");

    PQfinish(a);
    PQfinish(b);
    PQfinish(watch);
}
END_TEST

/* ------------------------------------------------------------------ */
/* 2. A waiter for the row lock judges what its holder committed        */
/* ------------------------------------------------------------------ */

/* One holder and one waiter, both application sessions, on a resource of
 * the case's own whose committed mark is mark.  The waiter first opens its
 * transaction if it has one (at iso, the snapshot taken at once: before
 * the holder's call); the holder calls advance(held) in a transaction
 * (held == mark: only the lock, the hot path); the waiter offers offered
 * and must block, the committed mark still mark; the holder commits or
 * rolls back; the waiter's call then is admitted (returns offered), or is
 * refused with state (23Q01: stale against the holder's committed held, a
 * repeat or older).  A waiter in a transaction then holds the lock when it was
 * admitted (and commits), else rolls back.  The mark ends as final. */
static const struct {
    const char *name;
    long long mark;    /* the committed mark before */
    long long held;    /* the holder's token, uncommitted */
    bool ha;           /* the holder calls as HA (else no holder) */
    bool commit;       /* the holder commits (else rolls back) */
    const char *iso;   /* the waiter's transaction (NULL: autocommit) */
    bool hb;           /* the waiter calls as HB (in its transaction) */
    long long offered; /* the waiter's token */
    const char *state; /* the SQLSTATE refusing it (NULL: admitted) */
    bool repeat;       /* a 23Q01 refusal's reason is repeat (else older) */
    long long final;   /* the committed mark in the end */
} waiters[] = {
    /* READ COMMITTED: a higher token waits for a holder of the lock ... */
    {"rc_higher_behind_equal", 5, 5, false, true, NULL, false, 6, NULL, false, 6},
    {"rc_higher_behind_higher", 6, 7, false, true, NULL, false, 8, NULL, false, 8},
    /* ... and is judged against what the holder committed: the equal
     * token, the old mark, the same token for another holder (a repeat) */
    {"rc_equal_refused_after_raise", 5, 6, false, true, NULL, false, 5, "23Q01", false, 6},
    {"rc_old_mark_refused_after_raise", 6, 7, false, true, NULL, false, 6, "23Q01", false, 7},
    {"rc_other_holder_refused_as_repeat", 7, 11, true, true, "READ COMMITTED", true, 11, "23Q01",
     true, 11},
    /* ... or against the mark the holder rolled back to: the equal token
     * is admitted, the mark stays; a higher one (below the holder's)
     * raises it. */
    {"rc_equal_admitted_after_rollback", 7, 8, false, false, NULL, false, 7, NULL, false, 7},
    {"rc_higher_admitted_after_rollback", 7, 10, false, false, NULL, false, 9, NULL, false, 9},
    /* REPEATABLE READ: a commit of a raise is a serialization failure, a
     * rollback (or a commit of a mere lock, the hot path) is not. */
    {"rr_refused_after_raise", 5, 6, false, true, "REPEATABLE READ", false, 6, "40001", false, 6},
    {"rr_admitted_after_rollback", 6, 7, false, false, "REPEATABLE READ", false, 7, NULL, false,
     7},
    {"rr_admitted_after_lock_only", 7, 7, false, true, "REPEATABLE READ", false, 7, NULL, false,
     7},
};

static void as_holder(PGconn *c, const char *id)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT set_config('fence.holder', '%s', true),"
             " set_config('fence.xact', pg_current_xact_id()::text, true)",
             id);
    ok(c, sql);
}

START_TEST(waiter_judges_the_holders_outcome)
{
    PGconn *watch = db();
    PGconn *holder = db_app();
    PGconn *waiter = db_app();
    char resource[64], what[256], sql[256];
    res o;
    snprintf(resource, sizeof resource, "race2-%d", _i);
    snprintf(what, sizeof what, "%s: waiter advance(%s, %lld)%s behind the holder's uncommitted"
                                " %lld%s, %s",
             waiters[_i].name, resource, waiters[_i].offered, waiters[_i].hb ? " as HB" : "",
             waiters[_i].held, waiters[_i].ha ? " as HA" : "",
             waiters[_i].commit ? "committed" : "rolled back");
    set_mark(holder, resource, waiters[_i].mark);

    if (waiters[_i].iso != NULL) {
        snprintf(sql, sizeof sql, "BEGIN ISOLATION LEVEL %s", waiters[_i].iso);
        ok(waiter, sql);
        if (strcmp(waiters[_i].iso, "READ COMMITTED") != 0) {
            ok(waiter, "SELECT 1"); /* the snapshot */
        }
        if (waiters[_i].hb) {
            as_holder(waiter, HB);
        }
    }
    ok(holder, "BEGIN");
    if (waiters[_i].ha) {
        as_holder(holder, HA);
    }
    o = call(holder, resource, waiters[_i].held);
    expect_ok(&o, waiters[_i].held, "the holder's advance");
    send_call(waiter, resource, waiters[_i].offered);
    expect_blocked(watch, waiter, what);
    ck_assert_int_eq(mark(watch, resource), waiters[_i].mark);
    ok(holder, waiters[_i].commit ? "COMMIT" : "ROLLBACK");
    o = collect(waiter, what);
    if (waiters[_i].state == NULL) {
        expect_ok(&o, waiters[_i].offered, what);
    } else if (strcmp(waiters[_i].state, "23Q01") == 0) {
        expect_stale(&o, waiters[_i].offered, waiters[_i].held, waiters[_i].repeat, what);
    } else {
        expect_state(&o, waiters[_i].state, what);
    }
    if (waiters[_i].iso != NULL) {
        if (o.ok) { /* the waiter has the lock now */
            snprintf(sql, sizeof sql,
                     "SELECT 1 FROM fence.marks WHERE resource = '%s' FOR UPDATE NOWAIT",
                     resource);
            fails(watch, sql, "55P03");
        }
        ok(waiter, o.ok ? "COMMIT" : "ROLLBACK");
    }
    ck_assert_int_eq(mark(watch, resource), waiters[_i].final);

    PQfinish(holder);
    PQfinish(waiter);
    PQfinish(watch);
}
END_TEST

/* READ COMMITTED, the waiter in a transaction: once released it keeps the
 * lock it got, so the former holder now waits behind it, and is then
 * admitted with the equal token (no holders). */
START_TEST(rc_released_waiter_keeps_the_lock)
{
    PGconn *watch = db();
    PGconn *a = db_app();
    PGconn *b = db_app();
    res o;
    set_mark(a, "race2k", 8);

    ok(a, "BEGIN");
    o = call(a, "race2k", 8);
    expect_ok(&o, 8, "A advance(race2k, 8)");
    ok(b, "BEGIN");
    send_call(b, "race2k", 9);
    expect_blocked(watch, b, "B advance(race2k, 9) in a transaction");
    ok(a, "COMMIT");
    o = collect(b, "B advance(race2k, 9)");
    expect_ok(&o, 9, "B advance(race2k, 9)");
    ok(a, "BEGIN");
    send_call(a, "race2k", 9);
    expect_blocked(watch, a, "A advance(race2k, 9) behind B's uncommitted 9");
    ok(b, "COMMIT");
    o = collect(a, "A advance(race2k, 9)");
    expect_ok(&o, 9, "A advance(race2k, 9) after B's commit of 9 (equal, no holder)");
    ok(a, "COMMIT");
    ck_assert_int_eq(mark(watch, "race2k"), 9);

    PQfinish(a);
    PQfinish(b);
    PQfinish(watch);
}
END_TEST
/* ------------------------------------------------------------------ */
/* 3. REPEATABLE READ / SERIALIZABLE                                     */
/* ------------------------------------------------------------------ */

/* A: a transaction at iso with its snapshot taken; then B (autocommit)
 * raises resource from 5 to 6 (or creates it with 6 when fresh); then A
 * calls advance(resource, mine).  Returns A's outcome. */
static res snapshot_then_concurrent_raise(const char *iso, const char *resource, bool fresh,
                                          long long mine)
{
    PGconn *a = db_app();
    PGconn *b = db_app();
    char sql[128];
    res o;
    if (!fresh) {
        o = call(b, resource, 5);
        expect_ok(&o, 5, "setting the mark to 5");
    }
    snprintf(sql, sizeof sql, "BEGIN ISOLATION LEVEL %s", iso);
    ok(a, sql);
    ok(a, "SELECT 1"); /* the snapshot */
    o = call(b, resource, 6);
    expect_ok(&o, 6, "B raising the mark to 6");
    o = call(a, resource, mine);
    ok(a, "ROLLBACK");
    PQfinish(a);
    PQfinish(b);
    return o;
}

START_TEST(repeatable_read_and_serializable)
{
    static const struct {
        const char *iso;
        bool fresh;
        long long mine;
        const char *want; /* SQLSTATE */
    } cases[] = {
        {"REPEATABLE READ", false, 6, "40001"},
        {"REPEATABLE READ", false, 5, "40001"},
        {"REPEATABLE READ", false, 7, "40001"},
        {"SERIALIZABLE", false, 6, "40001"},
        {"SERIALIZABLE", false, 5, "40001"},
        {"REPEATABLE READ", true, 6, "40001"}, /* created after the snapshot */
        {"REPEATABLE READ", true, 7, "40001"},
    };
    PGconn *watch = db();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char resource[64], what[192];
        snprintf(resource, sizeof resource, "race4-%zu", i);
        snprintf(what, sizeof what, "%s: mark %s concurrently, then advance(%s, %lld)",
                 cases[i].iso, cases[i].fresh ? "created (6)" : "raised 5 -> 6", resource,
                 cases[i].mine);
        res got = snapshot_then_concurrent_raise(cases[i].iso, resource, cases[i].fresh,
                                                 cases[i].mine);
        expect_state(&got, cases[i].want, what);
        ck_assert_int_eq(mark(watch, resource), 6);
    }
    PQfinish(watch);
}
END_TEST

/* ------------------------------------------------------------------ */
/* 4. One transaction                                                    */
/* ------------------------------------------------------------------ */

START_TEST(same_transaction)
{
    PGconn *watch = db();
    PGconn *a = db_app();
    res o;
    set_mark(a, "race5", 5);

    ok(a, "BEGIN");
    o = call(a, "race5", 5);
    expect_ok(&o, 5, "advance(race5, 5) #1");
    o = call(a, "race5", 5);
    expect_ok(&o, 5, "advance(race5, 5) #2");
    o = call(a, "race5", 6);
    expect_ok(&o, 6, "advance(race5, 6)");
    o = call(a, "race5", 6);
    expect_ok(&o, 6, "advance(race5, 6) again (its own raise)");
    ck_assert_int_eq(mark(watch, "race5"), 5); /* not committed */
    fails(watch, "SELECT 1 FROM fence.marks WHERE resource = 'race5' FOR UPDATE NOWAIT", "55P03");
    o = call(a, "race5", 5);
    expect_stale(&o, 5, 6, false, "advance(race5, 5) after its own raise to 6");
    ok(a, "ROLLBACK");
    ck_assert_int_eq(mark(watch, "race5"), 5);
    ok(watch, "SELECT 1 FROM fence.marks WHERE resource = 'race5' FOR UPDATE NOWAIT");

    /* Several calls in one statement see each other. */
    ck_assert_int_eq(num(a, "SELECT fence.advance('race5', 6) + fence.advance('race5', 6)"
                            " + fence.advance('race5', 7)"),
                     19);
    ck_assert_int_eq(num(a, "SELECT sum(fence.advance('race5', g)) FROM generate_series(8, 10) g"),
                     27);
    ck_assert_int_eq(mark(watch, "race5"), 10);
    PGresult *r = PQexec(a, "SELECT fence.advance('race5', 12), fence.advance('race5', 11)");
    take(r, &o);
    PQclear(r);
    expect_stale(&o, 11, 12, false, "advance 12 then 11 in one statement");
    ck_assert_int_eq(mark(watch, "race5"), 10);

    /* Savepoints: a raise rolled back to a savepoint is forgotten. */
    ok(a, "BEGIN");
    o = call(a, "race5", 10);
    expect_ok(&o, 10, "advance(race5, 10)");
    ok(a, "SAVEPOINT s");
    o = call(a, "race5", 11);
    expect_ok(&o, 11, "advance(race5, 11) in the savepoint");
    ok(a, "ROLLBACK TO SAVEPOINT s");
    o = call(a, "race5", 10);
    expect_ok(&o, 10, "advance(race5, 10) after ROLLBACK TO the savepoint");
    ok(a, "SAVEPOINT t");
    o = call(a, "race5", 9);
    expect_stale(&o, 9, 10, false, "advance(race5, 9) in a savepoint");
    ok(a, "ROLLBACK TO SAVEPOINT t");
    /* The lock is still held after the refusal rolled back to t. */
    fails(watch, "SELECT 1 FROM fence.marks WHERE resource = 'race5' FOR UPDATE NOWAIT", "55P03");
    o = call(a, "race5", 12);
    expect_ok(&o, 12, "advance(race5, 12)");
    ok(a, "COMMIT");
    ck_assert_int_eq(mark(watch, "race5"), 12);

    /* REPEATABLE READ sees its own raise too. */
    ok(a, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    o = call(a, "race5", 13);
    expect_ok(&o, 13, "RR advance(race5, 13)");
    o = call(a, "race5", 13);
    expect_ok(&o, 13, "RR advance(race5, 13) again");
    o = call(a, "race5", 12);
    expect_stale(&o, 12, 13, false, "RR advance(race5, 12)");
    ok(a, "ROLLBACK");
    ck_assert_int_eq(mark(watch, "race5"), 12);

    PQfinish(a);
    PQfinish(watch);
}
END_TEST

/* ------------------------------------------------------------------ */
/* 5. Creators of a new resource                                         */
/* ------------------------------------------------------------------ */

/* A creates resource with token first (and holder ha, NULL none), B then
 * offers second (holder hb) and waits for A's insert; A ends with
 * a_commit (COMMIT or ROLLBACK); returns B's outcome, B's transaction
 * committed when it succeeded. */
static res create_race(PGconn *watch, const char *resource, long long first, const char *ha,
                       long long second, const char *hb, bool a_commit)
{
    PGconn *a = db_app();
    PGconn *b = db_app();
    char what[128];
    res o;
    ok(a, "BEGIN");
    if (ha != NULL) {
        ok(a, "SELECT set_config('fence.holder', '" HA "', true),"
                  " set_config('fence.xact', pg_current_xact_id()::text, true)");
    }
    o = call(a, resource, first);
    expect_ok(&o, first, "A creating the resource");
    ok(b, "BEGIN");
    if (hb != NULL) {
        ok(b, "SELECT set_config('fence.holder', '" HB "', true),"
                  " set_config('fence.xact', pg_current_xact_id()::text, true)");
    }
    send_call(b, resource, second);
    snprintf(what, sizeof what, "B advance(%s, %lld) behind A's uncommitted insert of %lld",
             resource, second, first);
    expect_blocked(watch, b, what);
    ck_assert_int_eq(mark(watch, resource), 0);
    ok(a, a_commit ? "COMMIT" : "ROLLBACK");
    o = collect(b, what);
    ok(b, o.ok ? "COMMIT" : "ROLLBACK");
    PQfinish(a);
    PQfinish(b);
    return o;
}

static const struct {
    const char *name;
    long long first; /* A's token, A's insert uncommitted */
    bool ha;         /* A's holder HA (else none) */
    long long second; /* B's token, waiting for A's insert */
    bool hb;          /* B's holder HB (else none) */
    bool a_commit;    /* A commits (else rolls back) */
    long long want;   /* B's result: the token returned, or 0: refused */
    bool repeat;      /* the refusal is a repeat (else older) */
    long long mark;   /* the final mark */
} creates[] = {
    /* 6 raises A's committed 5 */
    {"higher_after_commit", 5, false, 6, false, true, 6, false, 6},
    /* 5 refused against A's committed 6 */
    {"lower_after_commit", 6, false, 5, false, true, 0, false, 6},
    /* A's 5 rolled back: 6 creates it */
    {"higher_after_rollback", 5, false, 6, false, false, 6, false, 6},
    /* A's 6 rolled back: 5 creates it */
    {"lower_after_rollback", 6, false, 5, false, false, 5, false, 5},
    /* equal, no holders: admitted */
    {"equal_no_holders", 5, false, 5, false, true, 5, false, 5},
    /* equal, other holders: a repeat */
    {"equal_other_holders", 5, true, 5, true, true, 0, true, 5},
};

START_TEST(fresh_resource_raced)
{
    PGconn *watch = db();
    char resource[64], what[128];
    snprintf(resource, sizeof resource, "race6-%d", _i);
    snprintf(what, sizeof what, "%s: B's %lld%s after A's %s %lld%s", resource,
             creates[_i].second, creates[_i].hb ? " as HB" : "",
             creates[_i].a_commit ? "committed" : "rolled back", creates[_i].first,
             creates[_i].ha ? " as HA" : "");
    res o = create_race(watch, resource, creates[_i].first, creates[_i].ha ? HA : NULL,
                        creates[_i].second, creates[_i].hb ? HB : NULL, creates[_i].a_commit);
    if (creates[_i].want != 0) {
        expect_ok(&o, creates[_i].want, what);
    } else {
        expect_stale(&o, creates[_i].second, creates[_i].first, creates[_i].repeat, what);
    }
    ck_assert_int_eq(mark(watch, resource), creates[_i].mark);
    /* No call was admitted with a token lower than a committed mark. */
    ck_assert(!o.ok || o.value >= (creates[_i].a_commit ? creates[_i].first : 0));
    if (creates[_i].ha && creates[_i].a_commit) {
        char sql[160];
        snprintf(sql, sizeof sql, "SELECT holder FROM fence.marks WHERE resource = '%s'",
                 resource);
        ck_assert_str_eq(text1(watch, sql), HA);
    }
    PQfinish(watch);
}
END_TEST

/* Many sessions on one resource at once (threads, blocking calls): each
 * transaction advances, then logs its token with a sequence number taken
 * while it holds the row lock, then commits.  The row lock orders them, so
 * the logged tokens never go down in that order, the mark is the highest
 * logged token, and only 23Q01 ever refuses (READ COMMITTED). */
#define STRESS_THREADS 4
#define STRESS_ROUNDS 50

typedef struct stress {
    int id;
    int *next; /* shared token counter */
    pthread_mutex_t *mu;
    int admitted, refused;
    char error[640];
} stress;

static void *stress_main(void *arg)
{
    stress *s = arg;
    PGconn *c = db_app();
    unsigned seed = (unsigned)(s->id * 7919 + 1);
    for (int i = 0; i < STRESS_ROUNDS && s->error[0] == '\0'; i++) {
        pthread_mutex_lock(s->mu);
        long long tok = *s->next + (long long)(rand_r(&seed) % 7) - 3;
        (*s->next)++;
        pthread_mutex_unlock(s->mu);
        if (tok < 1) {
            tok = 1;
        }
        char sql[256];
        PGresult *r = PQexec(c, "BEGIN");
        PQclear(r);
        adv_sql(sql, sizeof sql, "race6-stress", tok);
        r = PQexec(c, sql);
        res o;
        take(r, &o);
        PQclear(r);
        if (o.ok && o.value == tok) {
            snprintf(sql, sizeof sql,
                     "SELECT pg_sleep(0.001);"
                     "INSERT INTO race_log (seq, token) VALUES (nextval('race_seq'), %lld)",
                     tok);
            r = PQexec(c, sql);
            take(r, &o);
            PQclear(r);
            if (!o.ok) {
                snprintf(s->error, sizeof s->error, "log insert: %s (%s)", o.msg, o.state);
            }
            r = PQexec(c, "COMMIT");
            take(r, &o);
            PQclear(r);
            if (!o.ok) {
                snprintf(s->error, sizeof s->error, "commit: %s (%s)", o.msg, o.state);
            }
            s->admitted++;
        } else {
            if (o.ok) {
                snprintf(s->error, sizeof s->error, "advance %lld returned %lld", tok, o.value);
            } else if (strcmp(o.state, "23Q01") != 0) {
                snprintf(s->error, sizeof s->error, "advance %lld: %s (%s)", tok, o.msg, o.state);
            }
            r = PQexec(c, "ROLLBACK");
            PQclear(r);
            s->refused++;
        }
    }
    PQfinish(c);
    return NULL;
}

START_TEST(stress_commit_order)
{
    PGconn *watch = db();
    char sql[256];
    ok(watch, "CREATE TABLE race_log (seq bigint PRIMARY KEY, token bigint NOT NULL);"
              "CREATE SEQUENCE race_seq");
    snprintf(sql, sizeof sql, "GRANT INSERT, SELECT ON race_log TO %s;"
                              "GRANT USAGE ON SEQUENCE race_seq TO %s", g_app, g_app);
    ok(watch, sql);
    int next = 10;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    stress s[STRESS_THREADS];
    pthread_t th[STRESS_THREADS];
    for (int i = 0; i < STRESS_THREADS; i++) {
        memset(&s[i], 0, sizeof s[i]);
        s[i].id = i;
        s[i].next = &next;
        s[i].mu = &mu;
        ck_assert_int_eq(pthread_create(&th[i], NULL, stress_main, &s[i]), 0);
    }
    int admitted = 0, refused = 0;
    for (int i = 0; i < STRESS_THREADS; i++) {
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        ck_assert_msg(s[i].error[0] == '\0', "thread %d: %s", i, s[i].error);
        admitted += s[i].admitted;
        refused += s[i].refused;
    }
    ck_assert_int_eq(admitted + refused, STRESS_THREADS * STRESS_ROUNDS);
    ck_assert_int_gt(admitted, 0);
    ck_assert_int_gt(refused, 0);
    ck_assert_int_eq(num(watch, "SELECT count(*) FROM race_log"), admitted);
    /* In lock order (the sequence), no token is lower than an earlier one. */
    long long bad = num(watch, "SELECT count(*) FROM (SELECT token, lag(token) OVER (ORDER BY seq)"
                               " AS prev FROM race_log) x WHERE token < prev");
    ck_assert_msg(bad == 0, "%lld logged tokens are lower than one committed before them: %s", bad,
                  text1(watch, "SELECT string_agg(token::text, ' ' ORDER BY seq) FROM race_log"));
    ck_assert_int_eq(mark(watch, "race6-stress"),
                     num(watch, "SELECT max(token) FROM race_log"));
    ok(watch, "DROP TABLE race_log; DROP SEQUENCE race_seq");
    PQfinish(watch);
}
END_TEST

/* ------------------------------------------------------------------ */
/* 6. What a backend prepared for fence.marks, against DDL on it        */
/* ------------------------------------------------------------------ */

/* On a: tok is admitted (twice), tok + 1 raises, tok refused after it. */
static void round_on(PGconn *a, PGconn *watch, const char *resource, long long tok,
                     const char *after)
{
    char what[160];
    res o;
    snprintf(what, sizeof what, "after %s: advance(%s, %lld)", after, resource, tok);
    o = call(a, resource, tok);
    expect_ok(&o, tok, what);
    o = call(a, resource, tok + 1);
    expect_ok(&o, tok + 1, what);
    o = call(a, resource, tok + 1);
    expect_ok(&o, tok + 1, what);
    o = call(a, resource, tok);
    expect_stale(&o, tok, tok + 1, false, what);
    ck_assert_int_eq(mark(watch, resource), tok + 1);
}

/* In a transaction already started before the statement sql committed,
 * on a: only the call's own lock on fence.marks takes the invalidation in.
 * raise: the call raises the mark from tok - 1 to tok (the statements'
 * path), else it offers the mark's own tok (the hot path) and then
 * tok - 1 (refused). */
static void in_open_transaction(PGconn *a, PGconn *ddl, PGconn *watch, const char *resource,
                                long long tok, const char *sql, bool raise)
{
    char what[256];
    res o;
    snprintf(what, sizeof what, "'%s' committed inside A's open transaction: advance(%s, %lld)%s",
             sql, resource, tok, raise ? " (a raise)" : " (equal: the hot path)");
    ck_assert_int_eq(mark(watch, resource), raise ? tok - 1 : tok);
    ok(a, "BEGIN");
    ok(a, "SELECT 1");
    if (strncmp(sql, "VACUUM fence", 12) == 0 || strncmp(sql, "ANALYZE", 7) == 0) {
        /* New marks first, so that the statistics change: only then is
         * pg_class updated (and an invalidation sent). */
        static int pad;
        char ins[256];
        snprintf(ins, sizeof ins,
                 "SELECT count(fence.advance('race7o-pad-%d-' || g, 1))"
                 " FROM generate_series(1, 40) g",
                 ++pad);
        ck_assert_int_eq(num(ddl, ins), 40);
    }
    ok(ddl, sql);
    o = call(a, resource, tok);
    expect_ok(&o, tok, what);
    if (!raise) {
        o = call(a, resource, tok - 1);
        expect_stale(&o, tok - 1, tok, false, what);
    }
    ok(a, o.ok ? "COMMIT" : "ROLLBACK");
    ck_assert_int_eq(mark(watch, resource), tok);
}

START_TEST(caches_survive_ddl)
{
    PGconn *watch = db();
    PGconn *a = db();
    PGconn *ddl = db();
    long long before_idx = num(watch, "SELECT 'fence.marks_pkey'::regclass::oid::bigint");

    set_mark(a, "race7", 5);
    round_on(a, watch, "race7", 5, "nothing");
    ok(ddl, "REINDEX TABLE fence.marks");
    round_on(a, watch, "race7", 6, "REINDEX TABLE");
    ok(ddl, "VACUUM FULL fence.marks");
    round_on(a, watch, "race7", 7, "VACUUM FULL");
    ok(ddl, "ALTER TABLE fence.marks ADD COLUMN zz int");
    round_on(a, watch, "race7", 8, "ADD COLUMN zz");
    ok(ddl, "ALTER TABLE fence.marks DROP COLUMN zz");
    round_on(a, watch, "race7", 9, "DROP COLUMN zz");
    /* The dropped column stays in the tuple descriptor (attisdropped); the
     * three columns keep their numbers. */
    ck_assert_int_ge(num(watch, "SELECT count(*) FROM pg_attribute WHERE attrelid ="
                                " 'fence.marks'::regclass AND attisdropped"),
                     1);
    ok(ddl, "REINDEX TABLE CONCURRENTLY fence.marks");
    ck_assert_int_ne(num(watch, "SELECT 'fence.marks_pkey'::regclass::oid::bigint"), before_idx);
    round_on(a, watch, "race7", 10, "REINDEX CONCURRENTLY (a new key index OID)");
    /* A new resource after all that (the insert path). */
    round_on(a, watch, "race7-new", 1, "all of the above, a new resource");

    round_on(a, watch, "race7", 30, "all of the above");

    /* The same for an application role's session (the statements run as
     * fence.marks's owner). */
    PGconn *app = db_app();
    round_on(app, watch, "race7", 40, "nothing (app)");
    ok(ddl, "VACUUM FULL fence.marks");
    round_on(app, watch, "race7", 42, "VACUUM FULL (app)");
    ok(ddl, "ALTER TABLE fence.marks ADD COLUMN zz int");
    round_on(app, watch, "race7", 44, "ADD COLUMN zz (app)");
    ok(ddl, "ALTER TABLE fence.marks DROP COLUMN zz");
    round_on(app, watch, "race7", 46, "DROP COLUMN zz (app)");
    PQfinish(app);

    PQfinish(a);
    PQfinish(ddl);
    PQfinish(watch);
}
END_TEST

/* A statement that invalidates what a backend knows of fence.marks,
 * committed by another session while the caller's transaction is already
 * open (so only the call's own lock on fence.marks takes the invalidation
 * in): plain ANALYZE and VACUUM after new marks (what autovacuum does to a
 * busy fence.marks: pg_class updated in place, a relcache invalidation),
 * then DDL. */
static const struct {
    const char *name;
    const char *before_hot, *before_raise, *cleanup;
    bool app; /* in an application role's session (else the superuser's) */
} in_open[] = {
    {"analyze", "ANALYZE fence.marks", "ANALYZE fence.marks", NULL, false},
    {"vacuum", "VACUUM fence.marks", "VACUUM fence.marks", NULL, false},
    {"vacuum_full", "VACUUM FULL fence.marks", "VACUUM FULL fence.marks", NULL, false},
    {"reindex", "REINDEX TABLE fence.marks", "REINDEX TABLE fence.marks", NULL, false},
    {"reindex_concurrently", "REINDEX TABLE CONCURRENTLY fence.marks",
     "REINDEX TABLE CONCURRENTLY fence.marks", NULL, false},
    {"add_drop_column", "ALTER TABLE fence.marks ADD COLUMN zz2 int",
     "ALTER TABLE fence.marks DROP COLUMN zz2", NULL, false},
    {"analyze_add_column", "ANALYZE fence.marks", "ALTER TABLE fence.marks ADD COLUMN zz3 int",
     "ALTER TABLE fence.marks DROP COLUMN zz3", false},
    {"app_analyze", "ANALYZE fence.marks", "ANALYZE fence.marks", NULL, true},
    {"app_vacuum_full_reindex", "VACUUM FULL fence.marks", "REINDEX TABLE fence.marks", NULL,
     true},
    {"app_add_drop_column", "ALTER TABLE fence.marks ADD COLUMN zz4 int",
     "ALTER TABLE fence.marks DROP COLUMN zz4", NULL, true},
};

START_TEST(caches_survive_invalidation_in_open_transaction)
{
    PGconn *watch = db();
    PGconn *ddl = db();
    PGconn *a = in_open[_i].app ? db_app() : db();
    char resource[64];
    snprintf(resource, sizeof resource, "race7o-%d", _i);
    /* The backend's caches warm first (a call on another resource). */
    set_mark(a, "race7o-warm", 1);
    set_mark(a, resource, 5);
    in_open_transaction(a, ddl, watch, resource, 5, in_open[_i].before_hot, false);
    in_open_transaction(a, ddl, watch, resource, 6, in_open[_i].before_raise, true);
    if (in_open[_i].cleanup != NULL) {
        ok(ddl, in_open[_i].cleanup);
    }
    round_on(a, watch, resource, 7, in_open[_i].before_raise);
    PQfinish(a);
    PQfinish(ddl);
    PQfinish(watch);
}
END_TEST

/* ------------------------------------------------------------------ */
/* 7. Invalidations taken in during a call, odd tables                  */
/* ------------------------------------------------------------------ */

/* A side database of this run (<g_db>_<suffix>, name to d) with fence.sql
 * installed by owner (NULL: the superuser) -- so owning fence.marks --
 * and the extension in a "c" run.  Returns a superuser connection to it. */
static PGconn *fence_side_db(const char *suffix, const char *owner, char *d)
{
    char sql[512];
    side_db(suffix, NULL, d);
    PGconn *su = connect_as(d, NULL);
    PQsetNoticeProcessor(su, quiet_notice, NULL);
    PGconn *inst = su;
    if (owner != NULL) {
        snprintf(sql, sizeof sql, "GRANT CREATE ON DATABASE %s TO %s", d, owner);
        ok(su, sql);
        inst = connect_as(d, owner);
        PQsetNoticeProcessor(inst, quiet_notice, NULL);
    }
    ck_assert_msg(fence_pg_install(inst) == FENCE_OK, "install into %s: %s", d,
                  fence_pg_errmsg(inst));
    if (inst != su) {
        PQfinish(inst);
    }
    if (is_c()) {
        create_extension(su);
    }
    return su;
}

/* Marks a later ANALYZE of fence.marks counts (so that it changes the
 * statistics, updates pg_class and sends an invalidation). */
static void pad_marks(PGconn *c, const char *prefix)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(fence.advance('%s-' || g, 1)) FROM generate_series(1, 40) g", prefix);
    ck_assert_int_eq(num(c, sql), 40);
}

/* A hot-path call takes in an ANALYZE committed inside its transaction
 * (the call's own lock on fence.marks processes the invalidation); then
 * the owner renumbers the token column (a migration: the old column
 * renamed, a new one filled with every mark + 100).  The same backend must
 * read the new column: the old token is refused against the new mark, as
 * a fresh backend refuses it.  (Written against extension 1.1-1.3's
 * fence.c_advance, which once kept reading the renamed column.) */
START_TEST(stale_layout_after_invalidation_in_call)
{
    char d[NAME_BUF];
    PGconn *su = fence_side_db("rlay", NULL, d);
    PGconn *a = connect_as(d, NULL);
    PQsetNoticeProcessor(a, quiet_notice, NULL);
    res o;

    set_mark(a, "x", 1); /* A's caches warm */
    ok(a, "BEGIN");
    ok(a, "SELECT 1");
    pad_marks(su, "rlay-pad");
    ok(su, "ANALYZE fence.marks");
    o = call(a, "x", 1); /* equal: the hot path, which takes the ANALYZE in */
    expect_ok(&o, 1, "A's hot-path advance(x, 1) with an ANALYZE committed meanwhile");
    ok(a, "COMMIT");

    ok(su, "ALTER TABLE fence.marks RENAME COLUMN token TO token_v1;"
           "ALTER TABLE fence.marks ADD COLUMN token bigint;"
           "SET session_replication_role = replica;"
           "UPDATE fence.marks SET token = token_v1 + 100;"
           "RESET session_replication_role;"
           "ALTER TABLE fence.marks ALTER COLUMN token SET NOT NULL,"
           " ALTER COLUMN token_v1 DROP NOT NULL");
    ck_assert_int_eq(num(su, "SELECT token FROM fence.marks WHERE resource = 'x'"), 101);

    /* A (the backend that saw the ANALYZE in a call) and a fresh backend. */
    PGconn *fresh = connect_as(d, NULL);
    PQsetNoticeProcessor(fresh, quiet_notice, NULL);
    PGconn *who[2] = {a, fresh};
    for (int w = 0; w < 2; w++) {
        char what[192];
        snprintf(what, sizeof what, "%s after the token column was renumbered: advance(x, 1)",
                 w == 0 ? "A" : "a fresh backend");
        ok(who[w], "BEGIN");
        o = call(who[w], "x", 1);
        ok(who[w], "ROLLBACK");
        expect_stale(&o, 1, 101, false, what);
    }
    /* And A goes on with the new column: the mark's own token (the hot
     * path), a raise, a refusal. */
    o = call(a, "x", 101);
    expect_ok(&o, 101, "A advance(x, 101) after the renumbering");
    o = call(a, "x", 102);
    expect_ok(&o, 102, "A advance(x, 102) after the renumbering");
    o = call(a, "x", 101);
    expect_stale(&o, 101, 102, false, "A advance(x, 101) after the raise to 102");
    ck_assert_int_eq(num(su, "SELECT token FROM fence.marks WHERE resource = 'x'"), 102);
    ck_assert_int_eq(num(su, "SELECT token_v1 FROM fence.marks WHERE resource = 'x'"), 1);

    PQfinish(fresh);
    PQfinish(a);
    PQfinish(su);
    drop_side_db(d);
}
END_TEST

/* An application role's hot-path call takes in an ANALYZE committed
 * inside its transaction; in its next transaction a function is replaced
 * (any pg_proc invalidation) before its next call.  That call must still
 * succeed.  (Written against extension 1.1-1.3's fence.c_advance, which
 * once checked the privilege on function OID 0 there: "function with OID
 * 0 does not exist".) */
START_TEST(acl_after_proc_invalidation)
{
    PGconn *watch = db();
    PGconn *ddl = db();
    PGconn *a = db_app();
    res o;

    set_mark(a, "race8", 1); /* A's caches warm */
    ok(a, "BEGIN");
    ok(a, "SELECT 1");
    pad_marks(ddl, "race8-pad");
    ok(ddl, "ANALYZE fence.marks");
    o = call(a, "race8", 1);
    expect_ok(&o, 1, "A's hot-path advance(race8, 1) with an ANALYZE committed meanwhile");
    ok(a, "COMMIT");

    ok(a, "BEGIN");
    ok(a, "SELECT 1");
    ok(ddl, "CREATE OR REPLACE FUNCTION public.race8_zz() RETURNS int LANGUAGE sql AS 'SELECT 1'");
    o = call(a, "race8", 1);
    expect_ok(&o, 1, "A advance(race8, 1) with a function replaced meanwhile");
    o = call(a, "race8", 2);
    expect_ok(&o, 2, "A advance(race8, 2) (a raise) in the same transaction");
    ok(a, "COMMIT");
    ck_assert_int_eq(mark(watch, "race8"), 2);

    /* Once more, with both in one transaction of A's. */
    ok(a, "BEGIN");
    ok(a, "SELECT 1");
    pad_marks(ddl, "race8-pad2");
    ok(ddl, "ANALYZE fence.marks");
    ok(ddl, "CREATE OR REPLACE FUNCTION public.race8_zz() RETURNS int LANGUAGE sql AS 'SELECT 2'");
    o = call(a, "race8", 2);
    expect_ok(&o, 2, "A advance(race8, 2) with an ANALYZE and a function replaced meanwhile");
    o = call(a, "race8", 1);
    expect_stale(&o, 1, 2, false, "A advance(race8, 1) after that");
    ok(a, "ROLLBACK");
    round_on(a, watch, "race8", 3, "the function replaced");
    ok(ddl, "DROP FUNCTION public.race8_zz()");

    PQfinish(a);
    PQfinish(ddl);
    PQfinish(watch);
}
END_TEST

/* A child table of fence.marks holds a mark ('y', 50): the statement
 * (SELECT ... FOR UPDATE on fence.marks) reads it, so fence.advance
 * refuses a lower token -- also in a backend that knew fence.marks before
 * the child existed -- and never inserts a second 'y' into fence.marks
 * itself.  (Written against extension 1.1-1.3's fence.c_advance, whose
 * key-index lookup once saw only the parent.) */
START_TEST(inherited_child_table)
{
    char d[NAME_BUF];
    PGconn *su = fence_side_db("rinh", NULL, d);
    PGconn *warm = connect_as(d, g_app);
    PQsetNoticeProcessor(warm, quiet_notice, NULL);
    res o = call(warm, "warm", 1); /* warm, before the child exists */
    expect_ok(&o, 1, "warming up");
    ok(su, "CREATE TABLE fence.marks_archive () INHERITS (fence.marks);"
           "INSERT INTO fence.marks_archive (resource, token) VALUES ('y', 50)");
    PGconn *fresh = connect_as(d, g_app);
    PQsetNoticeProcessor(fresh, quiet_notice, NULL);
    PGconn *who[2] = {warm, fresh};
    for (int w = 0; w < 2; w++) {
        char what[192];
        const char *kind = w == 0 ? "a warm" : "a fresh";
        snprintf(what, sizeof what, "%s backend: advance(y, 1), y = 50 in a child table", kind);
        o = call(who[w], "y", 1);
        expect_stale(&o, 1, 50, false, what);
        snprintf(what, sizeof what, "%s backend: advance(y, 50), y = 50 in a child table", kind);
        o = call(who[w], "y", 50);
        expect_ok(&o, 50, what);
        /* A raise updates the child's row (rolled back). */
        snprintf(what, sizeof what, "%s backend: advance(y, 51), y = 50 in a child table", kind);
        ok(who[w], "BEGIN");
        o = call(who[w], "y", 51);
        expect_ok(&o, 51, what);
        ck_assert_int_eq(num(who[w], "SELECT fence.mark('y')"), 51);
        ok(who[w], "ROLLBACK");
        ck_assert_int_eq(num(su, "SELECT count(*) FROM fence.marks WHERE resource = 'y'"), 1);
        ck_assert_str_eq(text1(su, "SELECT tableoid::regclass::text || ' ' || token"
                                   " FROM fence.marks WHERE resource = 'y'"),
                         "fence.marks_archive 50");
    }
    PQfinish(fresh);
    PQfinish(warm);
    PQfinish(su);
    drop_side_db(d);
}
END_TEST

/* Row security on fence.marks, enabled and forced by its owner (not a
 * superuser, so the policies apply to it, and so to the statements
 * fence.advance runs as it): a policy hides the marks named 'hid%'.  Every
 * call has the outcome below -- also in a backend that knew fence.marks
 * before row security was enabled.  (Written against extension 1.1-1.3's
 * fence.c_advance, whose key-index lookup once read the hidden mark.) */
START_TEST(row_security_forced)
{
    static const struct {
        const char *resource;
        long long tok;
        const char *want; /* its SQLSTATE, NULL: it returns tok */
    } cases[] = {
        {"vis", 5, NULL},       /* the mark's own token: the hot path */
        {"vis", 4, "23Q01"},    /* lower */
        {"vis", 6, NULL},       /* a raise */
        {"hid", 1, "42501"},    /* hidden: the insert violates the policy */
        {"hid", 50, "42501"},
        {"hid", 51, "42501"},
        {"hid-new", 3, "42501"},
        {"vis-new", 3, NULL},
    };
    char d[NAME_BUF], owner[NAME_BUF];
    side_role("rlsown", owner);
    PGconn *su = fence_side_db("rrls", owner, d);
    PGconn *own = connect_as(d, owner);
    PQsetNoticeProcessor(own, quiet_notice, NULL);
    ck_assert_str_eq(text1(su, "SELECT relowner::regrole::text FROM pg_class"
                               " WHERE oid = 'fence.marks'::regclass"),
                     owner);
    PGconn *warm = connect_as(d, g_app);
    PQsetNoticeProcessor(warm, quiet_notice, NULL);
    res o;
    o = call(warm, "vis", 5);
    expect_ok(&o, 5, "setting vis");
    o = call(warm, "hid", 50);
    expect_ok(&o, 50, "setting hid");
    o = call(warm, "vis", 5); /* warm, before row security */
    expect_ok(&o, 5, "warming up");
    ok(own, "ALTER TABLE fence.marks ENABLE ROW LEVEL SECURITY;"
            "ALTER TABLE fence.marks FORCE ROW LEVEL SECURITY;"
            "CREATE POLICY visible ON fence.marks USING (resource NOT LIKE 'hid%')");

    PGconn *fresh = connect_as(d, g_app);
    PQsetNoticeProcessor(fresh, quiet_notice, NULL);
    PGconn *who[2] = {warm, fresh};
    for (int w = 0; w < 2; w++) {
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            char what[192];
            snprintf(what, sizeof what, "%s backend, row security forced: advance(%s, %lld)",
                     w == 0 ? "a warm" : "a fresh", cases[i].resource, cases[i].tok);
            ok(who[w], "BEGIN"); /* rolled back: every case sees the same marks */
            res got = call(who[w], cases[i].resource, cases[i].tok);
            ok(who[w], "ROLLBACK");
            if (cases[i].want == NULL) {
                expect_ok(&got, cases[i].tok, what);
            } else {
                expect_state(&got, cases[i].want, what);
            }
        }
    }
    ok(su, "ALTER TABLE fence.marks NO FORCE ROW LEVEL SECURITY;"
           "ALTER TABLE fence.marks DISABLE ROW LEVEL SECURITY");
    ck_assert_str_eq(text1(su, "SELECT string_agg(resource || '=' || token, ' ' ORDER BY resource)"
                               " FROM fence.marks"),
                     "hid=50 vis=5");
    PQfinish(fresh);
    PQfinish(warm);
    PQfinish(own);
    PQfinish(su);
    drop_side_db(d);
}
END_TEST

static Suite *pg_race_suite(void)
{
    Suite *s = suite_create("pg_race");
    TCase *t = pg_tcase("pg_race");
    tcase_add_test(t, hot_path_holds_the_row_lock);
    CT_ADD_CASES(t, waiter_judges_the_holders_outcome, waiters);
    tcase_add_test(t, rc_released_waiter_keeps_the_lock);
    tcase_add_test(t, repeatable_read_and_serializable);
    tcase_add_test(t, same_transaction);
    CT_ADD_CASES(t, fresh_resource_raced, creates);
    tcase_add_test(t, stress_commit_order);
    tcase_add_test(t, caches_survive_ddl);
    CT_ADD_CASES(t, caches_survive_invalidation_in_open_transaction, in_open);
    tcase_add_test(t, stale_layout_after_invalidation_in_call);
    tcase_add_test(t, acl_after_proc_invalidation);
    tcase_add_test(t, inherited_child_table);
    tcase_add_test(t, row_security_forced);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(pg_race_suite());
}
