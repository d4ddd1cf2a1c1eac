/*
 * test_pg_send.c -- version 1.3 of the extension: fence.c_send(token,
 * holder) gives the transaction a fencing token and holder without
 * PostgreSQL's settings machinery (lib/pgext/send.c), against a real
 * PostgreSQL.  Runs once (the fixture's database gets CREATE EXTENSION
 * fence here).  It proves:
 *   - scoping: what c_send sent is what SET LOCAL would have set, for
 *     tables guarded by the C guard (UPDATEs stamped by the plan, INSERT,
 *     DELETE) and by the generated PL/pgSQL guard: a rolled-back savepoint
 *     drops what it sent, a released one hands it to its parent (three
 *     levels, mixed), a PL/pgSQL exception block that raises drops it,
 *     COMMIT / ROLLBACK / PREPARE TRANSACTION clear it, and a session's
 *     own SET fence.token is overridden for the transaction only;
 *   - conflicts: c_send refuses to send (23Q02 reason=conflict
 *     setting=fence.token, else setting=fence.holder: the token is checked
 *     first) while either setting was changed in the transaction and the
 *     change is still in force (SET LOCAL, set_config local or not, SET,
 *     RESET, a function's SET clause -- c_send called inside such a
 *     function --, a SET LOCAL made before the module was loaded); the
 *     transaction is then aborted.  A change made after c_send (also in
 *     the same function body) is refused by every reader of that setting,
 *     as before.  A change rolled back with its savepoint leaves none: c_send
 *     succeeds after it.  What c_send would send inside a function with a
 *     SET clause for either setting can therefore never outlive the
 *     function (send_inside_function_with_set_clause: with the extension
 *     as first built it did; now the call fails, nothing is written, and
 *     the caller's earlier token is still in force after rolling back to a
 *     savepoint around the call);
 *   - memory: sending again at the same level, and sending in PL/pgSQL
 *     exception blocks, frees what was replaced or dropped
 *     (TopTransactionContext stays small over 30,000 calls);
 *   - the same outcome as set_config(.., true) for every token and holder
 *     (SQLSTATE, message, DETAIL, HINT, rows, marks);
 *   - parallel mode: c_send refuses to run there (as set_config does);
 *   - libfence_pg: fence_pg_prepare() prepares c_send statements when the
 *     role may call it, set_config ones otherwise (EXECUTE revoked,
 *     extension 1.2), and both write right; a change of either setting
 *     made before fence_pg_set_token makes it fail with the conflict (its
 *     c_send refuses), naming that setting, and one made after it makes
 *     the write (or a pipelined set_config) fail;
 *   - ALTER EXTENSION fence UPDATE TO '1.3' gives the c_send of a fresh
 *     1.3, a member of the extension;
 *   - fence.token and fence.holder are settings of the module once it is
 *     loaded, keeping values set (for the session or SET LOCAL) before.
 * Every connection that sends has loaded the module (SELECT
 * fence.c_version()); statement_timeout guards against a test that would
 * wait on a lock.
 */
#include "pgutil.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOLDER "0123456789abcdef0123456789abcdef"
#define HOLDER2 "fedcba9876543210fedcba9876543210"
/* 45 two-byte characters: the messages show the first 40. */
#define E5 "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
#define LONG_TOKEN E5 E5 E5 E5 E5 E5 E5 E5 E5

#define CONFLICT_HINT                                                                           \
    "Set the token one way per transaction: libfence_pg's fence_pg_set_token/"                  \
    "fence_pg_send_token (which call fence.c_send), or SET LOCAL fence.token, not both."

/* The declaration of fence.c_send, as one text. */
static const char DECL[] =
    "SELECT concat_ws(' ', coalesce(proacl::text, '-'), provolatile::text, proparallel::text,"
    " proisstrict::text, prosecdef::text, proowner::regrole::text, prorettype::regtype::text,"
    " proargtypes::text, coalesce(array_to_string(proargnames, ','), '-'),"
    " (SELECT lanname FROM pg_language l WHERE l.oid = prolang), prosrc, coalesce(probin, '-'))"
    " FROM pg_proc WHERE oid = 'fence.c_send(text, text)'::regprocedure";

/* ------------------------------------------------------------------ */
/* What a statement returned (stmt_res, pgutil.h)                      */
/* ------------------------------------------------------------------ */

/* The 23Q02 conflict on setting ("fence.token" or "fence.holder"). */
static void expect_conflict(const stmt_res *o, const char *setting, const char *what)
{
    char msg[256];
    char detail[128];
    snprintf(msg, sizeof msg,
             "fence: %s was set twice in this transaction, by fence.c_send() and by SET, "
             "set_config or a function's SET clause",
             setting);
    snprintf(detail, sizeof detail, "reason=conflict setting=%s", setting);
    expect_stmt_err(o, "23Q02", msg, detail, what);
    ck_assert_msg(strcmp(o->hint, CONFLICT_HINT) == 0, "%s: HINT \"%s\"", what, o->hint);
}

/* o is an error raised inside a function by (or under) the statement
 * stmt of its body: its CONTEXT names it, as PL/pgSQL does ("SQL statement
 * \"<stmt>...\"").  Tells c_send's own refusal from a reader's after it. */
static void expect_raised_by(const stmt_res *o, const char *stmt, const char *what)
{
    char want[256];
    snprintf(want, sizeof want, "SQL statement \"%s", stmt);
    ck_assert_msg(strstr(o->context, want) != NULL, "%s: raised in\n%s\nexpected by %s...", what,
                  o->context, stmt);
}

/* ------------------------------------------------------------------ */
/* Connections, tables                                                  */
/* ------------------------------------------------------------------ */

/* The fixture's database as the superuser, with the extension. */
static PGconn *admin(void)
{
    PGconn *c = db();
    ok(c, "CREATE EXTENSION IF NOT EXISTS fence");
    return c;
}

/* A superuser connection to dbname (NULL: the fixture's) whose backend
 * has the module loaded (load) or not. */
static PGconn *conn_to(const char *dbname, bool load)
{
    PGconn *c = connect_as(dbname != NULL ? dbname : g_db, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    ok(c, "SET statement_timeout = '10s'");
    if (load) {
        ck_assert_int_eq(num(c, "SELECT fence.c_version()"), 1);
    }
    return c;
}

static PGconn *loaded(void)
{
    return conn_to(NULL, true);
}

/* Run sql with no trigger firing (superuser). */
static void force(PGconn *adm, const char *sql)
{
    ok(adm, "SET session_replication_role = replica");
    ok(adm, sql);
    ok(adm, "RESET session_replication_role");
}

/* Tables <pfx>c (the C guard) and <pfx>p (the generated PL/pgSQL guard),
 * both (id int PRIMARY KEY, v int, tok bigint) strict on tok, rows
 * (1, 0, 5), (2, 0, 5), (3, 0, 7); g_app may read and write them. */
static void tables(PGconn *adm, const char *pfx)
{
    char sql[1024];
    static const char *const impl[2] = {"c", "plpgsql"};
    for (int i = 0; i < 2; i++) {
        snprintf(sql, sizeof sql,
                 "CREATE TABLE %s%c (id int PRIMARY KEY, v int, tok bigint);"
                 "SELECT fence.protect('%s%c', 'tok', false, '%s');"
                 "GRANT SELECT, INSERT, UPDATE, DELETE ON %s%c TO %s",
                 pfx, impl[i][0], pfx, impl[i][0], impl[i], pfx, impl[i][0], g_app);
        ok(adm, sql);
    }
    snprintf(sql, sizeof sql,
             "DELETE FROM %sc; DELETE FROM %sp;"
             "INSERT INTO %sc VALUES (1, 0, 5), (2, 0, 5), (3, 0, 7);"
             "INSERT INTO %sp VALUES (1, 0, 5), (2, 0, 5), (3, 0, 7)",
             pfx, pfx, pfx, pfx);
    force(adm, sql);
}

/* The rows of tbl as "id:v:tok ..." (static buffer). */
static const char *rows_of(PGconn *c, const char *tbl)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT coalesce(string_agg(format('%%s:%%s:%%s', id, v, tok), ' ' ORDER BY id), '')"
             " FROM %s",
             tbl);
    return text1(c, sql);
}

static void expect_rows(PGconn *c, const char *tbl, const char *want, const char *what)
{
    const char *got = rows_of(c, tbl);
    ck_assert_msg(strcmp(got, want) == 0, "%s: %s holds '%s', expected '%s'", what, tbl, got,
                  want);
}

/* The plan of an UPDATE of <pfx>c carries the stamp (the planner's path)
 * or not (the trigger), as want says. */
static void expect_plan(PGconn *c, const char *pfx, bool want)
{
    char sql[256];
    snprintf(sql, sizeof sql, "EXPLAIN (VERBOSE, COSTS OFF) UPDATE %sc SET v = v + 1 WHERE id = 1",
             pfx);
    PGresult *r = PQexec(c, sql);
    ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
    bool stamped = false;
    for (int i = 0; i < PQntuples(r); i++) {
        stamped = stamped || strstr(PQgetvalue(r, i, 0), "fence.c_stamp(") != NULL;
    }
    PQclear(r);
    ck_assert_msg(stamped == want, "the UPDATE of %sc is %sstamped by the plan", pfx,
                  stamped ? "" : "not ");
}

static void expect_stamped(PGconn *c, const char *pfx)
{
    expect_plan(c, pfx, true);
}

/* ------------------------------------------------------------------ */
/* The probe: what every reader sees, inside the open transaction        */
/* ------------------------------------------------------------------ */

/* Runs, each in a savepoint rolled back at once (the transaction's state
 * is left as it was): the current token and holder (current_setting), an
 * UPDATE of row 1 (stamp 5), an INSERT and a DELETE of row 3 (stamp 7) of
 * both tables.  Into out: "t/h c=U,I,D p=U,I,D", U and I the stamp
 * written, D "del", or the SQLSTATE of the refusal. */
static void probe(PGconn *c, const char *pfx, char *out, size_t n)
{
    char sql[7][256];
    snprintf(sql[0], sizeof sql[0],
             "SELECT current_setting('fence.token') || '/' || current_setting('fence.holder')");
    for (int t = 0; t < 2; t++) {
        char tbl = t == 0 ? 'c' : 'p';
        snprintf(sql[1 + 3 * t], sizeof sql[0],
                 "UPDATE %s%c SET v = v + 1 WHERE id = 1 RETURNING tok", pfx, tbl);
        snprintf(sql[2 + 3 * t], sizeof sql[0], "INSERT INTO %s%c VALUES (100, 0, 0) RETURNING tok",
                 pfx, tbl);
        snprintf(sql[3 + 3 * t], sizeof sql[0], "DELETE FROM %s%c WHERE id = 3 RETURNING 'del'",
                 pfx, tbl);
    }
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < 7 && len < n; i++) {
        ok(c, "SAVEPOINT fence_probe");
        PGresult *r = PQexec(c, sql[i]);
        char v[256];
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
            snprintf(v, sizeof v, "%s", PQgetvalue(r, 0, 0));
        } else {
            const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
            snprintf(v, sizeof v, "%s", st != NULL ? st : "?");
        }
        PQclear(r);
        ok(c, "ROLLBACK TO SAVEPOINT fence_probe");
        ok(c, "RELEASE SAVEPOINT fence_probe");
        static const char *const sep[7] = {"", " c=", ",", ",", " p=", ",", ","};
        len += (size_t)snprintf(out + len, n - len, "%s%s", sep[i], v);
    }
}

/* What probe() gives for token tok (NULL or '': none) and holder h. */
static void probe_want(const char *tok, const char *h, char *out, size_t n)
{
    if (tok == NULL || tok[0] == '\0') {
        snprintf(out, n, "/%s c=23Q02,23Q02,23Q02 p=23Q02,23Q02,23Q02", h != NULL ? h : "");
        return;
    }
    long long v = atoll(tok);
    char u[32];
    snprintf(u, sizeof u, "%s", v >= 5 ? tok : "23Q01");
    const char *d = v >= 7 ? "del" : "23Q01";
    snprintf(out, n, "%s/%s c=%s,%s,%s p=%s,%s,%s", tok, h != NULL ? h : "", u, tok, d, u, tok, d);
}

static void expect_probe(PGconn *c, const char *pfx, const char *tok, const char *h,
                         const char *what)
{
    char got[512];
    char want[512];
    probe(c, pfx, got, sizeof got);
    probe_want(tok, h, want, sizeof want);
    ck_assert_msg(strcmp(got, want) == 0, "%s: the readers see\n  %s\nexpected\n  %s", what, got,
                  want);
}

/* SELECT fence.c_send(tok, h) (NULL: SQL NULL), which must succeed. */
static void sent_by(PGconn *c, const char *tok, const char *h)
{
    char sql[256];
    char a[64];
    char b[64];
    snprintf(a, sizeof a, tok != NULL ? "'%s'" : "NULL", tok);
    snprintf(b, sizeof b, h != NULL ? "'%s'" : "NULL", h);
    snprintf(sql, sizeof sql, "SELECT fence.c_send(%s, %s)", a, b);
    ck_assert_str_eq(text1(c, sql), "t");
}

/* The open transaction of c is aborted: the next statement is not run
 * (25P02). */
static void expect_aborted(PGconn *c, const char *what)
{
    ck_assert_msg(PQtransactionStatus(c) == PQTRANS_INERROR,
                  "%s: the transaction is not aborted (status %d)", what,
                  (int)PQtransactionStatus(c));
    stmt_res r = stmt_exec(c, "SELECT 1");
    expect_stmt_err(&r, "25P02", NULL, NULL, what);
}

/* SELECT fence.c_send(tok, h), which must itself refuse with the conflict
 * on setting, leaving the transaction aborted. */
static void send_refused(PGconn *c, const char *tok, const char *h, const char *setting,
                         const char *what)
{
    char sql[256];
    char a[64];
    char b[64];
    snprintf(a, sizeof a, tok != NULL ? "'%s'" : "NULL", tok);
    snprintf(b, sizeof b, h != NULL ? "'%s'" : "NULL", h);
    snprintf(sql, sizeof sql, "SELECT fence.c_send(%s, %s)", a, b);
    stmt_res r = stmt_exec(c, sql);
    expect_conflict(&r, setting, what);
    expect_aborted(c, what);
}

/* ------------------------------------------------------------------ */
/* 1. Scoping                                                           */
/* ------------------------------------------------------------------ */

/* What c_send sent is what SET LOCAL would have set, for every reader;
 * savepoints rolled back drop it, released ones hand it up. */
START_TEST(send_scoped_like_set_local)
{
    PGconn *adm = admin();
    tables(adm, "s1");
    PGconn *c = loaded();
    expect_stamped(c, "s1");
    char a[512];
    char b[512];
    char want[512];

    /* The same admissions and refusals as SET LOCAL (stale: 23Q01). */
    static const char *const toks[] = {"4", "5", "6", "8"};
    for (size_t i = 0; i < sizeof toks / sizeof toks[0]; i++) {
        char sql[128];
        ok(c, "BEGIN");
        sent_by(c, toks[i], NULL);
        probe(c, "s1", a, sizeof a);
        ok(c, "ROLLBACK");
        ok(c, "BEGIN");
        snprintf(sql, sizeof sql, "SET LOCAL fence.token = '%s'", toks[i]);
        ok(c, sql);
        probe(c, "s1", b, sizeof b);
        ok(c, "ROLLBACK");
        probe_want(toks[i], NULL, want, sizeof want);
        ck_assert_msg(strcmp(a, b) == 0 && strcmp(a, want) == 0,
                      "token %s:\n  c_send    %s\n  SET LOCAL %s\n  expected  %s", toks[i], a, b,
                      want);
    }

    /* A rolled-back savepoint gives back the outer token; what is sent
     * after it, at the savepoint's level, is kept by its RELEASE. */
    ok(c, "BEGIN");
    sent_by(c, "6", NULL);
    ok(c, "SAVEPOINT a");
    sent_by(c, "8", HOLDER);
    expect_probe(c, "s1", "8", HOLDER, "inside savepoint a");
    ok(c, "ROLLBACK TO SAVEPOINT a");
    expect_probe(c, "s1", "6", "", "savepoint a rolled back");
    sent_by(c, "4", NULL);
    expect_probe(c, "s1", "4", "", "sent again in savepoint a");
    ok(c, "RELEASE SAVEPOINT a");
    expect_probe(c, "s1", "4", "", "savepoint a released");
    ok(c, "ROLLBACK");

    /* RELEASE keeps the inner token and holder (over the outer ones). */
    ok(c, "BEGIN");
    sent_by(c, "4", HOLDER);
    ok(c, "SAVEPOINT a");
    sent_by(c, "8", HOLDER2);
    ok(c, "RELEASE SAVEPOINT a");
    expect_probe(c, "s1", "8", HOLDER2, "inner token released");
    ok(c, "SAVEPOINT b");
    ok(c, "ROLLBACK TO SAVEPOINT b");
    expect_probe(c, "s1", "8", HOLDER2, "released, then an empty savepoint rolled back");
    ok(c, "ROLLBACK");

    /* Three levels, mixed; then written and committed. */
    ok(c, "BEGIN");
    sent_by(c, "6", HOLDER);
    ok(c, "SAVEPOINT a");
    sent_by(c, "7", NULL);
    ok(c, "SAVEPOINT b");
    ok(c, "SAVEPOINT c");
    sent_by(c, "9", HOLDER2);
    expect_probe(c, "s1", "9", HOLDER2, "level c");
    ok(c, "RELEASE SAVEPOINT c");
    expect_probe(c, "s1", "9", HOLDER2, "level c released into b");
    ok(c, "ROLLBACK TO SAVEPOINT b");
    expect_probe(c, "s1", "7", "", "level b rolled back");
    sent_by(c, "8", HOLDER2);
    ok(c, "SAVEPOINT c");
    sent_by(c, "10", NULL);
    expect_probe(c, "s1", "10", "", "level c again");
    ok(c, "ROLLBACK TO SAVEPOINT c");
    expect_probe(c, "s1", "8", HOLDER2, "level c rolled back");
    ok(c, "RELEASE SAVEPOINT c");
    ok(c, "RELEASE SAVEPOINT b");
    expect_probe(c, "s1", "8", HOLDER2, "levels c and b released into a");
    ok(c, "ROLLBACK TO SAVEPOINT a");
    expect_probe(c, "s1", "6", HOLDER, "level a rolled back");
    ok(c, "RELEASE SAVEPOINT a");
    expect_probe(c, "s1", "6", HOLDER, "level a released");
    stmt_res r = stmt_exec(c, "UPDATE s1c SET v = v + 1 WHERE id = 2 RETURNING tok");
    expect_stmt_ok(&r, "UPDATE 1 [6]", "the C table, after the savepoints");
    r = stmt_exec(c, "UPDATE s1p SET v = v + 1 WHERE id = 2 RETURNING tok");
    expect_stmt_ok(&r, "UPDATE 1 [6]", "the PL/pgSQL table, after the savepoints");
    ok(c, "COMMIT");
    expect_rows(adm, "s1c", "1:0:5 2:1:6 3:0:7", "committed");
    expect_rows(adm, "s1p", "1:0:5 2:1:6 3:0:7", "committed");

    /* Released all the way up from two levels down. */
    ok(c, "BEGIN");
    ok(c, "SAVEPOINT a");
    ok(c, "SAVEPOINT b");
    sent_by(c, "9", NULL);
    ok(c, "RELEASE SAVEPOINT b");
    ok(c, "RELEASE SAVEPOINT a");
    expect_probe(c, "s1", "9", "", "released twice");
    ok(c, "ROLLBACK");

    /* Sent only in a savepoint rolled back: nothing. */
    ok(c, "BEGIN");
    ok(c, "SAVEPOINT a");
    sent_by(c, "9", HOLDER);
    ok(c, "ROLLBACK TO SAVEPOINT a");
    expect_probe(c, "s1", NULL, "", "sent only in a rolled-back savepoint");
    ok(c, "ROLLBACK");

    /* SET LOCAL outside, then c_send in a savepoint: c_send refuses (the
     * SET LOCAL is in force there); the savepoint rolled back, SET LOCAL's
     * token, and no conflict. */
    ok(c, "BEGIN");
    ok(c, "SET LOCAL fence.token = '8'");
    ok(c, "SAVEPOINT a");
    send_refused(c, "6", NULL, "fence.token", "SET LOCAL, then c_send in a savepoint");
    ok(c, "ROLLBACK TO SAVEPOINT a");
    expect_probe(c, "s1", "8", "", "SET LOCAL, then a refused send rolled back");
    ok(c, "ROLLBACK");

    /* SET LOCAL inside a savepoint rolled back before c_send: nothing of
     * it is left, c_send sends. */
    ok(c, "BEGIN");
    ok(c, "SAVEPOINT a");
    ok(c, "SET LOCAL fence.token = '8'");
    ok(c, "SET LOCAL fence.holder = '" HOLDER2 "'");
    ok(c, "ROLLBACK TO SAVEPOINT a");
    sent_by(c, "6", HOLDER);
    expect_probe(c, "s1", "6", HOLDER, "SET LOCAL rolled back, then c_send");
    ok(c, "ROLLBACK");
    PQfinish(c);
    PQfinish(adm);
}
END_TEST

/* PL/pgSQL exception blocks are subtransactions: one that raises drops
 * what it sent, one that ends normally hands it up; the readers inside
 * the block see the block's token. */
START_TEST(send_in_plpgsql_blocks)
{
    PGconn *adm = admin();
    tables(adm, "s2");
    PGconn *c = loaded();
    ok(c, "BEGIN");
    sent_by(c, "6", HOLDER);
    ok(c, "DO $$ DECLARE t bigint; BEGIN"
          "  BEGIN"
          "    PERFORM fence.c_send('9', NULL);"
          "    UPDATE s2c SET v = 100 WHERE id = 2 RETURNING tok INTO t;"
          "    IF t <> 9 OR current_setting('fence.token') <> '9' THEN"
          "      RAISE EXCEPTION 'the C guard saw %', t; END IF;"
          "    UPDATE s2p SET v = 100 WHERE id = 2 RETURNING tok INTO t;"
          "    IF t <> 9 THEN RAISE EXCEPTION 'the PL/pgSQL guard saw %', t; END IF;"
          "    PERFORM 1 / 0;"
          "  EXCEPTION WHEN division_by_zero THEN NULL;"
          "  END;"
          "END $$");
    expect_probe(c, "s2", "6", HOLDER, "after a block that sent 9 and raised");
    expect_rows(c, "s2c", "1:0:5 2:0:5 3:0:7", "the block's write is gone too");

    /* Nested: the inner block sends 10 and raises (caught inside the
     * outer block, which sent 9 and then raises too). */
    ok(c, "DO $$ BEGIN"
          "  BEGIN"
          "    PERFORM fence.c_send('9', NULL);"
          "    BEGIN"
          "      PERFORM fence.c_send('10', NULL);"
          "      PERFORM 1 / 0;"
          "    EXCEPTION WHEN division_by_zero THEN"
          "      IF current_setting('fence.token') <> '9' THEN"
          "        RAISE EXCEPTION 'inner: %', current_setting('fence.token'); END IF;"
          "    END;"
          "    RAISE EXCEPTION USING ERRCODE = 'P0100';"
          "  EXCEPTION WHEN SQLSTATE 'P0100' THEN NULL;"
          "  END;"
          "END $$");
    expect_probe(c, "s2", "6", HOLDER, "after nested blocks that raised");

    /* A block that ends normally: its token stays. */
    ok(c, "DO $$ BEGIN"
          "  BEGIN PERFORM fence.c_send('8', NULL);"
          "  EXCEPTION WHEN division_by_zero THEN NULL; END;"
          "END $$");
    expect_probe(c, "s2", "8", "", "after a block that sent 8 and ended");

    /* An error caught by the client's savepoint: the function's send goes. */
    ok(c, "SAVEPOINT a");
    fails(c, "DO $$ BEGIN PERFORM fence.c_send('9', NULL); PERFORM 1 / 0; END $$", "22012");
    ok(c, "ROLLBACK TO SAVEPOINT a");
    expect_probe(c, "s2", "8", "", "after a DO that sent 9 and failed");
    ok(c, "ROLLBACK");
    PQfinish(c);
    PQfinish(adm);
}
END_TEST

/* COMMIT, ROLLBACK, a failed transaction and the end of an autocommit
 * statement clear what was sent; a multi-statement query is one
 * transaction; a session's own SET fence.token is overridden for the
 * transaction only. */
START_TEST(send_cleared_at_transaction_end)
{
    PGconn *adm = admin();
    tables(adm, "s3");
    PGconn *c = loaded();

    ok(c, "BEGIN");
    sent_by(c, "6", HOLDER);
    stmt_res r = stmt_exec(c, "UPDATE s3c SET v = v + 1 WHERE id = 1 RETURNING tok");
    expect_stmt_ok(&r, "UPDATE 1 [6]", "C table before COMMIT");
    r = stmt_exec(c, "UPDATE s3p SET v = v + 1 WHERE id = 1 RETURNING tok");
    expect_stmt_ok(&r, "UPDATE 1 [6]", "PL/pgSQL table before COMMIT");
    ok(c, "COMMIT");
    expect_rows(adm, "s3c", "1:1:6 2:0:5 3:0:7", "committed");
    expect_rows(adm, "s3p", "1:1:6 2:0:5 3:0:7", "committed");
    ck_assert_str_eq(text1(c, "SELECT current_setting('fence.token') || '/' ||"
                              " current_setting('fence.holder')"),
                     "/");
    force(adm, "UPDATE s3c SET v = 0, tok = 5 WHERE id = 1; UPDATE s3p SET v = 0, tok = 5 WHERE id = 1");
    ok(c, "BEGIN");
    expect_probe(c, "s3", NULL, "", "the transaction after a COMMIT");
    r = stmt_exec(c, "UPDATE s3c SET v = 1 WHERE id = 1");
    expect_stmt_err(&r, "23Q02", "fence: no fencing token for UPDATE on public.s3c", "reason=missing",
               "after COMMIT, strict");
    ok(c, "ROLLBACK");

    ok(c, "BEGIN");
    sent_by(c, "8", HOLDER);
    ok(c, "ROLLBACK");
    ok(c, "BEGIN");
    expect_probe(c, "s3", NULL, "", "the transaction after a ROLLBACK");
    ok(c, "ROLLBACK");

    ok(c, "BEGIN");
    sent_by(c, "8", HOLDER);
    fails(c, "SELECT 1 / 0", "22012");
    ok(c, "ROLLBACK");
    ok(c, "BEGIN");
    expect_probe(c, "s3", NULL, "", "the transaction after a failed one");
    ok(c, "ROLLBACK");

    sent_by(c, "8", HOLDER); /* its own transaction */
    ok(c, "BEGIN");
    expect_probe(c, "s3", NULL, "", "after an autocommit c_send");
    ok(c, "ROLLBACK");

    /* One query string of several statements is one transaction, as for
     * set_config(.., true). */
    static const struct {
        const char *tok;
        const char *rows;
    } multi[] = {{"8", "UPDATE 1 [8]"}, {"4", NULL}, {"", NULL}};
    for (size_t i = 0; i < sizeof multi / sizeof multi[0]; i++) {
        char q[2][256];
        stmt_res m[2];
        snprintf(q[0], sizeof q[0],
                 "SELECT set_config('fence.token', '%s', true);"
                 " UPDATE s3c SET v = v + 1 WHERE id = 2 RETURNING tok",
                 multi[i].tok);
        snprintf(q[1], sizeof q[1],
                 "SELECT fence.c_send('%s', NULL); UPDATE s3c SET v = v + 1 WHERE id = 2"
                 " RETURNING tok",
                 multi[i].tok);
        for (int k = 0; k < 2; k++) {
            force(adm, "UPDATE s3c SET v = 0, tok = 5 WHERE id = 2");
            m[k] = stmt_exec(c, q[k]);
        }
        char d0[2048];
        char d1[2048];
        stmt_describe(&m[0], d0, sizeof d0);
        stmt_describe(&m[1], d1, sizeof d1);
        ck_assert_msg(stmt_eq(&m[0], &m[1]), "multi-statement, token '%s':\n  set_config %s\n"
                                            "  c_send     %s",
                      multi[i].tok, d0, d1);
        ck_assert_msg(multi[i].rows != NULL ? m[1].ok && strcmp(m[1].rows, multi[i].rows) == 0
                                            : !m[1].ok,
                      "multi-statement, token '%s': %s", multi[i].tok, d1);
        ok(c, "BEGIN");
        expect_probe(c, "s3", NULL, "", "after a multi-statement query");
        ok(c, "ROLLBACK");
    }
    force(adm, "UPDATE s3c SET v = 0, tok = 5 WHERE id = 2");

    /* A procedure's COMMIT ends the transaction: what it sent goes, as
     * set_config's value does (its first write committed, the second
     * refused). */
    ok(adm, "CREATE OR REPLACE PROCEDURE s3_commit(by_send boolean) LANGUAGE plpgsql AS $f$"
            " BEGIN"
            "   IF by_send THEN PERFORM fence.c_send('6', NULL);"
            "   ELSE PERFORM set_config('fence.token', '6', true); END IF;"
            "   UPDATE s3c SET v = v + 1 WHERE id = 2;"
            "   COMMIT;"
            "   UPDATE s3c SET v = v + 1 WHERE id = 1;"
            " END $f$");
    for (int by_send = 0; by_send < 2; by_send++) {
        force(adm, "UPDATE s3c SET v = 0, tok = 5");
        r = stmt_exec(c, by_send ? "CALL s3_commit(true)" : "CALL s3_commit(false)");
        expect_stmt_err(&r, "23Q02", "fence: no fencing token for UPDATE on public.s3c",
                   "reason=missing", by_send ? "CALL, c_send, COMMIT" : "CALL, set_config, COMMIT");
        expect_rows(adm, "s3c", "1:0:5 2:1:6 3:0:5", by_send ? "CALL, c_send" : "CALL, set_config");
    }
    force(adm, "UPDATE s3c SET v = 0, tok = 5 WHERE id <= 2; UPDATE s3c SET tok = 7 WHERE id = 3");

    /* A session-level token and holder (set before the transaction). */
    ok(c, "SET fence.token = '3'");
    ok(c, "SET fence.holder = '" HOLDER "'");
    ok(c, "BEGIN");
    r = stmt_exec(c, "UPDATE s3c SET v = 1 WHERE id = 1");
    expect_stmt_err(&r, "23Q02", NULL, "reason=session setting=fence.token", "session token, no send");
    ok(c, "ROLLBACK");
    ok(c, "BEGIN");
    sent_by(c, "6", NULL);
    expect_probe(c, "s3", "6", "", "sent over a session-level token and holder");
    ok(c, "COMMIT");
    ck_assert_str_eq(text1(c, "SHOW fence.token"), "3");
    ck_assert_str_eq(text1(c, "SHOW fence.holder"), HOLDER);
    ok(c, "BEGIN");
    r = stmt_exec(c, "UPDATE s3c SET v = 1 WHERE id = 1");
    expect_stmt_err(&r, "23Q02",
               "fence: fence.token is set for the session, not for the transaction, for UPDATE "
               "on public.s3c",
               "reason=session setting=fence.token", "session token again, next transaction");
    ok(c, "ROLLBACK");
    /* The PL/pgSQL guard cannot tell a session's token (existing
     * behaviour): it admits 3, a new row. */
    ok(c, "BEGIN");
    r = stmt_exec(c, "INSERT INTO s3p VALUES (50, 0, 0) RETURNING tok");
    expect_stmt_ok(&r, "INSERT 0 1 [3]", "session token, PL/pgSQL guard");
    ok(c, "ROLLBACK");
    /* set_config of the token alone leaves the session's holder, which
     * the C guard refuses; c_send replaced it (above). */
    ok(c, "BEGIN");
    ok(c, "SELECT set_config('fence.token', '6', true)");
    r = stmt_exec(c, "UPDATE s3c SET v = 1 WHERE id = 1");
    expect_stmt_err(&r, "23Q02", NULL, "reason=session setting=fence.holder", "session holder");
    ok(c, "ROLLBACK");
    PQfinish(c);
    PQfinish(adm);
}
END_TEST

/* ------------------------------------------------------------------ */
/* 2. Conflicts                                                         */
/* ------------------------------------------------------------------ */

/* A reader: the statement ({c}, {p}: the tables; {s}: the setting), a
 * statement before it in the transaction (NULL), and which settings it
 * reads. */
typedef struct reader {
    const char *name;
    const char *pre;
    const char *sql;
    bool token;
    bool holder;
} reader;

static const reader READERS[] = {
    {"C guard, UPDATE stamped by the plan", NULL, "UPDATE {c} SET v = v + 1 WHERE id = 1", true,
     true},
    {"C guard, UPDATE by the trigger", "SET LOCAL fence.plan_stamp = off",
     "UPDATE {c} SET v = v + 1 WHERE id = 1", true, true},
    {"C guard, INSERT", NULL, "INSERT INTO {c} VALUES (100, 0, 0)", true, true},
    {"C guard, DELETE", NULL, "DELETE FROM {c} WHERE id = 1", true, true},
    {"fence.c_advance", NULL, "SELECT fence.c_advance('cf_c', 5)", false, true},
    {"PL/pgSQL guard, UPDATE", NULL, "UPDATE {p} SET v = v + 1 WHERE id = 1", true, false},
    {"PL/pgSQL guard, INSERT", NULL, "INSERT INTO {p} VALUES (100, 0, 0)", true, false},
    {"fence.advance", NULL, "SELECT fence.advance('cf_p', 5)", false, true},
    {"fence.current_token", NULL, "SELECT fence.current_token()", true, false},
    {"current_setting", NULL, "SELECT current_setting('{s}')", true, true},
    {"current_setting, missing_ok", NULL, "SELECT current_setting('{s}', true)", true, true},
    {"SHOW", NULL, "SHOW {s}", true, true},
};

/* A way to change a setting in the transaction ({s}: the setting, {v}:
 * its value); NULL sql: a function's SET clause. */
typedef struct change {
    const char *name;
    const char *sql;
} change;

static const change CHANGES[] = {
    {"SET LOCAL", "SET LOCAL {s} = '{v}'"},
    {"set_config local", "SELECT set_config('{s}', '{v}', true)"},
    {"set_config session", "SELECT set_config('{s}', '{v}', false)"},
    {"SET", "SET {s} = '{v}'"},
    {"RESET", "RESET {s}"},
    {"a function's SET clause", NULL},
};

/* src with {c} {p} {s} {v} replaced. */
static void expand(const char *src, const char *pfx, const char *setting, char *out, size_t n)
{
    size_t len = 0;
    const char *value = strcmp(setting, "fence.token") == 0 ? "5" : HOLDER;
    for (const char *p = src; *p != '\0' && len + 1 < n; p++) {
        const char *with = NULL;
        char tbl[64];
        if (p[0] == '{' && p[1] != '\0' && p[2] == '}') {
            switch (p[1]) {
            case 'c':
            case 'p':
                snprintf(tbl, sizeof tbl, "%s%c", pfx, p[1]);
                with = tbl;
                break;
            case 's':
                with = setting;
                break;
            case 'v':
                with = value;
                break;
            default:
                break;
            }
        }
        if (with != NULL) {
            len += (size_t)snprintf(out + len, n - len, "%s", with);
            p += 2;
        } else {
            out[len++] = *p;
        }
    }
    out[len < n ? len : n - 1] = '\0';
}

/* Which statement of conflict_case gave its outcome. */
typedef enum stage {
    AT_CHANGE, /* the change (set_config after c_send) */
    AT_SEND,   /* c_send (or the function that calls it inside its SET clause) */
    AT_READER, /* the reader (or the function that runs it inside its SET clause) */
} stage;

/* One transaction: c_send('5', HOLDER) and the change of setting, in
 * the order given, then the reader; rolled back.  The outcome of the
 * first statement that failed, else the reader's; *at says which one.
 * After a failure the transaction must be aborted (the rest is not run). */
static stmt_res conflict_case(PGconn *c, const char *pfx, const char *setting, const change *ch,
                         bool change_first, const reader *rd, stage *at)
{
    char sql[1024];
    char fn[64];
    char body[512];
    stmt_res o;
    bool tok = strcmp(setting, "fence.token") == 0;
    expand(rd->sql, pfx, setting, body, sizeof body);
    ok(c, "BEGIN");
    if (rd->pre != NULL) {
        ok(c, rd->pre);
    }
    if (ch->sql == NULL) {
        /* cf_<tok|hold>[_send](q): runs q with the setting's SET clause;
         * _send calls c_send first, inside the function. */
        snprintf(fn, sizeof fn, "cf_%s%s", tok ? "tok" : "hold", change_first ? "_send" : "");
        if (!change_first) {
            sent_by(c, "5", HOLDER);
        }
        snprintf(sql, sizeof sql, "SELECT %s($q$%s$q$)", fn, body);
        o = stmt_exec(c, sql);
        *at = change_first ? AT_SEND : AT_READER;
    } else {
        char set[256];
        expand(ch->sql, pfx, setting, set, sizeof set);
        if (!change_first) {
            sent_by(c, "5", HOLDER);
        }
        o = stmt_exec(c, set);
        *at = AT_CHANGE;
        if (o.ok && change_first) {
            o = stmt_exec(c, "SELECT fence.c_send('5', '" HOLDER "')");
            *at = AT_SEND;
        }
        if (o.ok) {
            o = stmt_exec(c, body);
            *at = AT_READER;
        }
    }
    if (!o.ok) {
        expect_aborted(c, body);
    }
    ok(c, "ROLLBACK");
    return o;
}

static void conflict_functions(PGconn *adm)
{
    static const char *const fmt =
        "CREATE OR REPLACE FUNCTION cf_%s%s(q text) RETURNS void LANGUAGE plpgsql"
        " SET %s = '%s' AS $f$ BEGIN %s EXECUTE q; END $f$";
    char sql[512];
    for (int t = 0; t < 2; t++) {
        for (int s = 0; s < 2; s++) {
            snprintf(sql, sizeof sql, fmt, t == 0 ? "tok" : "hold", s ? "_send" : "",
                     t == 0 ? "fence.token" : "fence.holder", t == 0 ? "5" : HOLDER,
                     s ? "PERFORM fence.c_send('5', '" HOLDER "');" : "");
            ok(adm, sql);
        }
    }
}

/* Every way of changing fence.token or fence.holder, before or after
 * c_send, against every reader.  Before: c_send itself refuses (23Q02
 * reason=conflict setting=...), also inside a function with the SET
 * clause, and the reader is never run.  After: the readers of that
 * setting refuse it; the others do not read it and admit the write;
 * set_config after c_send is refused at once (its result is the
 * setting's value, read through the show hook). */
START_TEST(conflicts_refused_by_every_reader)
{
    PGconn *adm = admin();
    tables(adm, "k1");
    conflict_functions(adm);
    PGconn *c = loaded();
    expect_stamped(c, "k1");
    ok(c, "BEGIN");
    ok(c, READERS[1].pre);
    expect_plan(c, "k1", false);
    ok(c, "ROLLBACK");
    static const char *const settings[2] = {"fence.token", "fence.holder"};
    static const char *const stages[3] = {"the change", "c_send", "the reader"};
    int by_send = 0;
    int at_once = 0;
    int by_reader = 0;
    int admitted = 0;
    for (int s = 0; s < 2; s++) {
        bool tok = s == 0;
        for (size_t w = 0; w < sizeof CHANGES / sizeof CHANGES[0]; w++) {
            for (int first = 0; first < 2; first++) {
                for (size_t i = 0; i < sizeof READERS / sizeof READERS[0]; i++) {
                    const reader *rd = &READERS[i];
                    char what[256];
                    stage at;
                    snprintf(what, sizeof what, "%s: %s %s c_send, read by %s", settings[s],
                             CHANGES[w].name, first ? "before" : "after", rd->name);
                    stmt_res o = conflict_case(c, "k1", settings[s], &CHANGES[w], first, rd, &at);
                    bool reads = tok ? rd->token : rd->holder;
                    bool set_config = CHANGES[w].sql != NULL &&
                                      strncmp(CHANGES[w].sql, "SELECT set_config", 17) == 0;
                    stage want;
                    if (first) {
                        want = AT_SEND;
                        by_send++;
                    } else if (set_config) {
                        want = AT_CHANGE;
                        at_once++;
                    } else if (reads) {
                        want = AT_READER;
                        by_reader++;
                    } else {
                        expect_stmt_ok(&o, NULL, what);
                        ck_assert_msg(at == AT_READER, "%s: stopped at %s", what, stages[at]);
                        admitted++;
                        continue;
                    }
                    expect_conflict(&o, settings[s], what);
                    ck_assert_msg(at == want, "%s: refused by %s, expected by %s", what,
                                  stages[at], stages[want]);
                    if (first && CHANGES[w].sql == NULL) {
                        /* c_send inside the function, not the reader after it */
                        expect_raised_by(&o, "SELECT fence.c_send(", what);
                    }
                }
            }
        }
    }
    /* 2 settings x 6 changes x 12 readers before c_send; after it, 2
     * set_config ways x 12 readers, and 4 other ways x the 10 readers of
     * the token and the 9 of the holder. */
    ck_assert_int_eq(by_send, 2 * 6 * 12);
    ck_assert_int_eq(at_once, 2 * 2 * 12);
    ck_assert_int_eq(by_reader, 4 * 10 + 4 * 9);
    ck_assert_int_eq(admitted, 4 * 2 + 4 * 3);

    /* Both settings changed: c_send names the token (checked first),
     * whichever was changed first. */
    static const char *const both[2] = {
        "SET LOCAL fence.holder = '" HOLDER "'; SET LOCAL fence.token = '5'",
        "SET LOCAL fence.token = '5'; SET LOCAL fence.holder = '" HOLDER "'"};
    for (int k = 0; k < 2; k++) {
        ok(c, "BEGIN");
        ok(c, both[k]);
        send_refused(c, "5", HOLDER, "fence.token", both[k]);
        ok(c, "ROLLBACK");
    }
    /* The holder alone, with NULL arguments too: the holder is named. */
    ok(c, "BEGIN");
    ok(c, "SELECT set_config('fence.holder', '', true)");
    send_refused(c, NULL, NULL, "fence.holder", "set_config of the holder, c_send(NULL, NULL)");
    ok(c, "ROLLBACK");
    /* The refused sends left nothing: the next transaction sends. */
    ok(c, "BEGIN");
    expect_probe(c, "k1", NULL, "", "after the refused sends");
    sent_by(c, "6", HOLDER);
    expect_probe(c, "k1", "6", HOLDER, "a send after the refused ones");
    ok(c, "ROLLBACK");
    PQfinish(c);
    PQfinish(adm);
}
END_TEST

/* A change made in a savepoint that is rolled back leaves no conflict
 * (made before c_send, c_send succeeds after the rollback); one released
 * stays in force: c_send after it refuses, and a reader refuses one made
 * after c_send. */
START_TEST(conflicts_and_savepoints)
{
    PGconn *adm = admin();
    tables(adm, "k2");
    PGconn *c = loaded();
    static const char *const settings[2] = {"fence.token", "fence.holder"};
    for (int s = 0; s < 2; s++) {
        for (size_t w = 0; w < sizeof CHANGES / sizeof CHANGES[0]; w++) {
            if (CHANGES[w].sql == NULL) {
                continue; /* a function's SET clause ends with the function */
            }
            char set[256];
            expand(CHANGES[w].sql, "k2", settings[s], set, sizeof set);
            for (int first = 0; first < 2; first++) {
                char what[256];
                snprintf(what, sizeof what, "%s: %s in a savepoint %s c_send", settings[s],
                         CHANGES[w].name, first ? "before" : "after");
                /* Rolled back: c_send's token and holder, no conflict. */
                ok(c, "BEGIN");
                if (!first) {
                    sent_by(c, "6", HOLDER);
                }
                ok(c, "SAVEPOINT a");
                stmt_res o = stmt_exec(c, set);
                if (!first && strncmp(CHANGES[w].sql, "SELECT set_config", 17) == 0) {
                    expect_conflict(&o, settings[s], what); /* refused at once */
                } else {
                    expect_stmt_ok(&o, NULL, what);
                }
                ok(c, "ROLLBACK TO SAVEPOINT a");
                ok(c, "RELEASE SAVEPOINT a");
                if (first) {
                    sent_by(c, "6", HOLDER); /* at the top level: sends */
                }
                expect_probe(c, "k2", "6", HOLDER, what);
                o = stmt_exec(c, "SELECT fence.advance('ks1', 6), fence.c_advance('ks2', 6)");
                expect_stmt_ok(&o, "SELECT 1 [6,6]", what);
                ok(c, "ROLLBACK");
                /* Released: the change stays in force. */
                ok(c, "BEGIN");
                if (!first) {
                    sent_by(c, "6", HOLDER);
                }
                ok(c, "SAVEPOINT a");
                o = stmt_exec(c, set);
                if (first) {
                    /* c_send after it refuses. */
                    expect_stmt_ok(&o, NULL, what);
                    ok(c, "RELEASE SAVEPOINT a");
                    send_refused(c, "6", HOLDER, settings[s], what);
                } else {
                    if (o.ok) {
                        ok(c, "RELEASE SAVEPOINT a");
                        char sql[128];
                        snprintf(sql, sizeof sql, "SELECT current_setting('%s')", settings[s]);
                        o = stmt_exec(c, sql);
                    }
                    expect_conflict(&o, settings[s], what);
                }
                ok(c, "ROLLBACK");
            }
        }
    }
    PQfinish(c);
    PQfinish(adm);
}
END_TEST

/* c_send inside a function that has a SET clause for fence.token or
 * fence.holder.  PostgreSQL restores the setting when the function
 * returns, undoing a SET LOCAL / set_config(.., true) made inside it; what
 * c_send sent there must not outlive it either.  With send.c as first
 * built it did (the entry it pushed belongs to the transaction level, not
 * to the function, and once the SET clause was popped from the setting's
 * stack nothing was a conflict): the writes after the call carried the
 * function's token and holder.  Now c_send refuses inside such a function
 * (the SET clause is an entry on the setting's stack): the call fails
 * with the conflict naming the setting of the clause (the token when both
 * have one), nothing the function would have written or advanced is
 * there, and a token the caller sent before is still in force after
 * rolling back to a savepoint around the call.  A SET clause of another
 * setting changes nothing: c_send inside sends, for the caller too, as
 * set_config(.., true) inside does. */
START_TEST(send_inside_function_with_set_clause)
{
    PGconn *adm = admin();
    tables(adm, "k3");
    /* Each k3_send* sends, writes both tables and advances resource k3
     * with what it sent. */
#define K3_BODY                                                                                 \
    " AS $f$ BEGIN PERFORM fence.c_send('8', '" HOLDER2 "');"                                   \
    " UPDATE k3c SET v = v + 1 WHERE id = 1; INSERT INTO k3p VALUES (50, 0, 0);"                \
    " PERFORM fence.c_advance('k3', 8); END $f$;"
    ok(adm, "CREATE OR REPLACE FUNCTION k3_send() RETURNS void LANGUAGE plpgsql"
            " SET fence.token = '7' SET fence.holder = ''" K3_BODY
            "CREATE OR REPLACE FUNCTION k3_send_t() RETURNS void LANGUAGE plpgsql"
            " SET fence.token = '7'" K3_BODY
            "CREATE OR REPLACE FUNCTION k3_send_h() RETURNS void LANGUAGE plpgsql"
            " SET fence.holder = ''" K3_BODY
            "CREATE OR REPLACE FUNCTION k3_other() RETURNS void LANGUAGE plpgsql"
            " SET work_mem = '8MB'"
            " AS $f$ BEGIN PERFORM fence.c_send('8', '" HOLDER2 "'); END $f$;"
            "CREATE OR REPLACE FUNCTION k3_other_set() RETURNS void LANGUAGE plpgsql"
            " SET work_mem = '8MB'"
            " AS $f$ BEGIN PERFORM set_config('fence.token', '8', true),"
            " set_config('fence.holder', '" HOLDER2 "', true); END $f$;"
            /* The conflict caught inside the function: its DETAIL. */
            "CREATE OR REPLACE FUNCTION k3_catch() RETURNS text LANGUAGE plpgsql"
            " SET fence.token = '7' SET fence.holder = ''"
            " AS $f$ DECLARE d text; BEGIN"
            "   BEGIN PERFORM fence.c_send('8', '" HOLDER2 "'); d := 'sent';"
            "   EXCEPTION WHEN SQLSTATE '23Q02' THEN"
            "     GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;"
            "   END;"
            "   RETURN d; END $f$;"
            "CREATE OR REPLACE FUNCTION k3_set() RETURNS void LANGUAGE plpgsql"
            " SET fence.token = '7' SET fence.holder = ''"
            " AS $f$ BEGIN PERFORM set_config('fence.token', '8', true),"
            " set_config('fence.holder', '" HOLDER2 "', true); END $f$");
#undef K3_BODY
    PGconn *c = loaded();
    /* SET .. FROM CURRENT: the value of the creating session ('' here, the
     * module loaded). */
    ok(c, "CREATE OR REPLACE FUNCTION k3_send_fc() RETURNS void LANGUAGE plpgsql"
          " SET fence.token FROM CURRENT"
          " AS $f$ BEGIN PERFORM fence.c_send('8', '" HOLDER2 "');"
          " UPDATE k3c SET v = v + 1 WHERE id = 1; END $f$");
    static const char UNTOUCHED[] = "1:0:5 2:0:5 3:0:7";
    static const char MARK_K3[] =
        "SELECT coalesce((SELECT token || '/' || coalesce(holder, '-') FROM fence.marks"
        " WHERE resource = 'k3'), 'none')";

    /* set_config inside the function (the reference): gone at its return. */
    ok(c, "BEGIN");
    ok(c, "SELECT k3_set()");
    stmt_res r = stmt_exec(c, "UPDATE k3c SET v = v + 1 WHERE id = 1 RETURNING tok");
    expect_stmt_err(&r, "23Q02", "fence: no fencing token for UPDATE on public.k3c", "reason=missing",
               "set_config inside a function with SET clauses, then an UPDATE");
    ck_assert_str_eq(r.hint, "Set it in the writing transaction: SET LOCAL fence.token = "
                             "<token>.");
    ok(c, "ROLLBACK");
    ok(c, "BEGIN");
    ok(c, "SELECT k3_set()");
    r = stmt_exec(c, "SELECT fence.c_advance('k3', 9)");
    expect_stmt_ok(&r, "SELECT 1 [9]", "set_config inside a function with SET clauses, then c_advance");
    ck_assert_str_eq(text1(c, MARK_K3), "9/-");
    ok(c, "ROLLBACK");

    /* c_send inside: the call fails with the conflict, whose setting is
     * the clause's (the token first). */
    static const struct {
        const char *fn;
        const char *setting;
    } refused[] = {{"k3_send", "fence.token"},
                   {"k3_send_t", "fence.token"},
                   {"k3_send_h", "fence.holder"},
                   {"k3_send_fc", "fence.token"}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char sql[128];
        char what[256];
        snprintf(sql, sizeof sql, "SELECT %s()", refused[i].fn);

        /* Nothing sent before. */
        snprintf(what, sizeof what, "%s(), nothing sent before", refused[i].fn);
        ok(c, "BEGIN");
        r = stmt_exec(c, sql);
        expect_conflict(&r, refused[i].setting, what);
        expect_raised_by(&r, "SELECT fence.c_send(", what); /* not the UPDATE after it */
        expect_aborted(c, what);
        ok(c, "ROLLBACK");
        ok(c, "BEGIN");
        expect_probe(c, "k3", NULL, "", what); /* nothing left over */
        ok(c, "ROLLBACK");

        /* The caller sent 6 first; a savepoint around the call. */
        snprintf(what, sizeof what, "%s(), after the caller sent 6", refused[i].fn);
        ok(c, "BEGIN");
        sent_by(c, "6", HOLDER);
        ok(c, "SAVEPOINT f");
        r = stmt_exec(c, sql);
        expect_conflict(&r, refused[i].setting, what);
        expect_raised_by(&r, "SELECT fence.c_send(", what);
        expect_aborted(c, what);
        ok(c, "ROLLBACK TO SAVEPOINT f");
        expect_rows(c, "k3c", UNTOUCHED, what);
        expect_rows(c, "k3p", UNTOUCHED, what);
        ck_assert_str_eq(text1(c, MARK_K3), "none");
        expect_probe(c, "k3", "6", HOLDER, what);
        r = stmt_exec(c, "UPDATE k3c SET v = v + 1 WHERE id = 1 RETURNING tok");
        expect_stmt_ok(&r, "UPDATE 1 [6]", what);
        r = stmt_exec(c, "SELECT fence.c_advance('k3', 6)");
        expect_stmt_ok(&r, "SELECT 1 [6]", what);
        ck_assert_str_eq(text1(c, MARK_K3), "6/" HOLDER);
        ok(c, "ROLLBACK");
        expect_rows(adm, "k3c", UNTOUCHED, what);
        expect_rows(adm, "k3p", UNTOUCHED, what);
        ck_assert_str_eq(text1(adm, MARK_K3), "none");
    }

    /* The conflict caught inside the function: nothing sent, the caller's
     * token in force after the call. */
    ok(c, "BEGIN");
    sent_by(c, "6", HOLDER);
    ck_assert_str_eq(text1(c, "SELECT k3_catch()"), "reason=conflict setting=fence.token");
    expect_probe(c, "k3", "6", HOLDER, "the conflict caught inside the function");
    ok(c, "ROLLBACK");
    ok(c, "BEGIN");
    ck_assert_str_eq(text1(c, "SELECT k3_catch()"), "reason=conflict setting=fence.token");
    expect_probe(c, "k3", NULL, "", "the conflict caught inside the function, nothing sent");
    ok(c, "ROLLBACK");

    /* A SET clause of another setting: c_send inside sends, and what it
     * sent stays after the return, as set_config's values do. */
    ok(c, "BEGIN");
    ok(c, "SELECT k3_other_set()");
    expect_probe(c, "k3", "8", HOLDER2, "set_config in a function with SET work_mem");
    ok(c, "ROLLBACK");
    for (int k = 0; k < 2; k++) {
        ok(c, "BEGIN");
        if (k == 1) {
            sent_by(c, "6", HOLDER); /* replaced by the function's send */
        }
        ok(c, "SELECT k3_other()");
        expect_probe(c, "k3", "8", HOLDER2,
                     k == 1 ? "c_send in a function with SET work_mem, after the caller's"
                            : "c_send in a function with SET work_mem");
        ok(c, "ROLLBACK");
    }
    PQfinish(c);
    PQfinish(adm);
}
END_TEST

/* c_send, then a change of the setting, in one PL/pgSQL function body:
 * still a conflict for every reader after it (set_config refuses at once,
 * its result being the setting's value; a SET LOCAL is refused by the
 * write after it, in the function or after its return). */
START_TEST(change_after_send_in_one_function)
{
    PGconn *adm = admin();
    tables(adm, "k4");
    ok(adm, "CREATE OR REPLACE FUNCTION k4_set_config(s text, q text) RETURNS void"
            " LANGUAGE plpgsql AS $f$ BEGIN"
            "   PERFORM fence.c_send('6', '" HOLDER "');"
            "   PERFORM set_config(s, CASE WHEN s = 'fence.token' THEN '6' ELSE '" HOLDER "' END,"
            "                      true);"
            "   EXECUTE q; END $f$;"
            "CREATE OR REPLACE FUNCTION k4_set_local(s text, q text) RETURNS void"
            " LANGUAGE plpgsql AS $f$ BEGIN"
            "   PERFORM fence.c_send('6', '" HOLDER "');"
            "   IF s = 'fence.token' THEN SET LOCAL fence.token = '6';"
            "   ELSE SET LOCAL fence.holder = '" HOLDER "'; END IF;"
            "   IF q <> '' THEN EXECUTE q; END IF; END $f$");
    PGconn *c = loaded();
    static const struct {
        const char *setting;
        const char *write;
    } cases[] = {
        {"fence.token", "UPDATE k4c SET v = v + 1 WHERE id = 1"},
        {"fence.token", "INSERT INTO k4c VALUES (100, 0, 0)"},
        {"fence.token", "DELETE FROM k4c WHERE id = 3"},
        {"fence.token", "UPDATE k4p SET v = v + 1 WHERE id = 1"},
        {"fence.token", "INSERT INTO k4p VALUES (100, 0, 0)"},
        {"fence.holder", "UPDATE k4c SET v = v + 1 WHERE id = 1"},
        {"fence.holder", "SELECT fence.c_advance('k4', 6)"},
        {"fence.holder", "SELECT fence.advance('k4', 6)"},
    };
    static const char UNTOUCHED[] = "1:0:5 2:0:5 3:0:7";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char sql[512];
        char what[512];
        /* set_config after c_send, then the write: refused at set_config. */
        snprintf(sql, sizeof sql, "SELECT k4_set_config('%s', $q$%s$q$)", cases[i].setting,
                 cases[i].write);
        snprintf(what, sizeof what, "c_send, set_config('%s'), '%s' in one function",
                 cases[i].setting, cases[i].write);
        ok(c, "BEGIN");
        stmt_res r = stmt_exec(c, sql);
        expect_conflict(&r, cases[i].setting, what);
        expect_raised_by(&r, "SELECT set_config(", what);
        expect_aborted(c, what);
        ok(c, "ROLLBACK");
        /* SET LOCAL after c_send, then the write inside the function. */
        snprintf(sql, sizeof sql, "SELECT k4_set_local('%s', $q$%s$q$)", cases[i].setting,
                 cases[i].write);
        snprintf(what, sizeof what, "c_send, SET LOCAL %s, '%s' in one function",
                 cases[i].setting, cases[i].write);
        ok(c, "BEGIN");
        r = stmt_exec(c, sql);
        expect_conflict(&r, cases[i].setting, what);
        expect_raised_by(&r, cases[i].write, what);
        expect_aborted(c, what);
        ok(c, "ROLLBACK");
        /* The same, the write after the function returned. */
        snprintf(sql, sizeof sql, "SELECT k4_set_local('%s', '')", cases[i].setting);
        snprintf(what, sizeof what, "c_send, SET LOCAL %s in one function, then '%s'",
                 cases[i].setting, cases[i].write);
        ok(c, "BEGIN");
        ok(c, sql);
        r = stmt_exec(c, cases[i].write);
        expect_conflict(&r, cases[i].setting, what);
        expect_aborted(c, what);
        ok(c, "ROLLBACK");
    }
    expect_rows(adm, "k4c", UNTOUCHED, "after the refused writes");
    expect_rows(adm, "k4p", UNTOUCHED, "after the refused writes");
    ck_assert_int_eq(num(adm, "SELECT count(*) FROM fence.marks WHERE resource = 'k4'"), 0);
    PQfinish(c);
    PQfinish(adm);
}
END_TEST

/* ------------------------------------------------------------------ */
/* 2b. Memory                                                           */
/* ------------------------------------------------------------------ */

/* One transaction: 20,000 sends at the same level, 5,000 in PL/pgSQL
 * exception blocks that raise (rolled back) and 5,000 in blocks that end
 * normally (released); what was replaced or dropped is freed, so
 * TopTransactionContext stays under 2 MB. */
START_TEST(send_memory_bounded)
{
    PGconn *adm = admin();
    tables(adm, "mm");
    PGconn *c = loaded();
    static const char TOP[] = "SELECT total_bytes FROM pg_backend_memory_contexts"
                              " WHERE name = 'TopTransactionContext'";
    ok(c, "BEGIN");
    long long before = num(c, TOP);
    ok(c, "DO $$ BEGIN FOR i IN 1..20000 LOOP"
          "  PERFORM fence.c_send(i::text, '" HOLDER "');"
          " END LOOP; END $$");
    ck_assert_str_eq(text1(c, "SELECT current_setting('fence.token') || '/' ||"
                              " current_setting('fence.holder')"),
                     "20000/" HOLDER);
    long long same_level = num(c, TOP);
    ok(c, "DO $$ BEGIN FOR i IN 1..5000 LOOP"
          "  BEGIN"
          "    PERFORM fence.c_send((100000 + i)::text, '" HOLDER2 "');"
          "    RAISE EXCEPTION USING ERRCODE = 'P0100';"
          "  EXCEPTION WHEN SQLSTATE 'P0100' THEN NULL;"
          "  END;"
          " END LOOP; END $$");
    ck_assert_str_eq(text1(c, "SELECT current_setting('fence.token') || '/' ||"
                              " current_setting('fence.holder')"),
                     "20000/" HOLDER);
    long long rolled_back = num(c, TOP);
    ok(c, "DO $$ BEGIN FOR i IN 1..5000 LOOP"
          "  BEGIN"
          "    PERFORM fence.c_send((200000 + i)::text, '" HOLDER2 "');"
          "  EXCEPTION WHEN SQLSTATE 'P0100' THEN NULL;"
          "  END;"
          " END LOOP; END $$");
    ck_assert_str_eq(text1(c, "SELECT current_setting('fence.token') || '/' ||"
                              " current_setting('fence.holder')"),
                     "205000/" HOLDER2);
    long long released = num(c, TOP);
    ck_assert_msg(same_level < 2 * 1024 * 1024 && rolled_back < 2 * 1024 * 1024 &&
                      released < 2 * 1024 * 1024,
                  "TopTransactionContext: %lld bytes at the start, %lld after 20,000 sends at"
                  " one level, %lld after 5,000 more rolled back, %lld after 5,000 more"
                  " released (limit 2 MB)",
                  before, same_level, rolled_back, released);
    /* And the token still writes. */
    stmt_res r = stmt_exec(c, "UPDATE mmc SET v = v + 1 WHERE id = 1 RETURNING tok");
    expect_stmt_ok(&r, "UPDATE 1 [205000]", "after 30,000 sends");
    ok(c, "ROLLBACK");
    PQfinish(c);
    PQfinish(adm);
}
END_TEST

/* ------------------------------------------------------------------ */
/* 3. The same outcomes as set_config                                   */
/* ------------------------------------------------------------------ */

static const char *const SAME_TARGETS[] = {
    "UPDATE o1c SET v = v + 1 WHERE id = 1 RETURNING id, v, tok",
    "SET LOCAL fence.plan_stamp = off; UPDATE o1c SET v = v + 1 WHERE id = 2 RETURNING id, v, tok",
    "INSERT INTO o1c VALUES (10, 1, 0) RETURNING tok",
    "DELETE FROM o1c WHERE id = 3 RETURNING id, tok",
    "UPDATE o1p SET v = v + 1 WHERE id = 1 RETURNING id, v, tok",
    "INSERT INTO o1p VALUES (10, 1, 0) RETURNING tok",
    "DELETE FROM o1p WHERE id = 3 RETURNING id, tok",
    "SELECT fence.advance('o1a', 6)",
    "SELECT fence.c_advance('o1a', 6)",
    "SELECT fence.advance('o1b', 6)",
    "SELECT fence.c_advance('o1b', 6)",
    "SELECT fence.current_token()",
    "SELECT current_setting('fence.token'), current_setting('fence.holder')",
    "UPDATE o1x SET v = v + 1 WHERE id = 1 RETURNING tok",
    "UPDATE o1x SET v = 1000 WHERE id = 1 RETURNING tok",
    "INSERT INTO o1x VALUES (10, 1, 0) RETURNING tok",
    "UPDATE o1y SET v = v + 1 WHERE id = 1 RETURNING tok",
    "UPDATE o1y SET v = 1000 WHERE id = 1 RETURNING tok",
    "INSERT INTO o1y VALUES (10, 1, 0) RETURNING tok",
};

static const char O1_STATE[] =
    "SELECT (SELECT string_agg(format('%s:%s:%s', id, v, tok), ' ' ORDER BY id) FROM o1c)"
    " || ' | ' || (SELECT string_agg(format('%s:%s:%s', id, v, tok), ' ' ORDER BY id) FROM o1p)"
    " || ' | ' || (SELECT string_agg(format('%s:%s:%s', id, v, tok), ' ' ORDER BY id) FROM o1x)"
    " || ' | ' || (SELECT string_agg(format('%s:%s:%s', id, v, tok), ' ' ORDER BY id) FROM o1y)"
    " || ' | ' || coalesce((SELECT string_agg(format('%s:%s:%s', resource, token,"
    " coalesce(holder, '-')), ' ' ORDER BY resource) FROM fence.marks"
    " WHERE resource IN ('o1a', 'o1b')), '')";

typedef struct pair {
    const char *tok; /* NULL: SQL NULL */
    const char *holder;
} pair;

/* One transaction: token and holder by set_config (send false) or c_send,
 * then target; the outcome and what the tables and marks hold then
 * (rolled back). */
static stmt_res same_case(PGconn *c, const pair *p, const char *target, bool by_send, char *state,
                     size_t n)
{
    const char *vals[2] = {p->tok, p->holder};
    ok(c, "BEGIN");
    PGresult *r = PQexecParams(
        c,
        by_send ? "SELECT fence.c_send($1, $2)"
                : "SELECT set_config('fence.token', $1, true), set_config('fence.holder', $2, true)",
        2, NULL, vals, NULL, NULL, 0);
    ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "setting the token: %s",
                  PQresultErrorMessage(r));
    PQclear(r);
    stmt_res o = stmt_exec(c, target); /* the last result of a multi-statement target */
    if (o.ok) {
        snprintf(state, n, "%s", text1(c, O1_STATE));
    }
    ok(c, "ROLLBACK");
    if (!o.ok) {
        snprintf(state, n, "%s", text1(c, O1_STATE));
    }
    return o;
}

START_TEST(same_outcomes_as_set_config)
{
    PGconn *adm = admin();
    tables(adm, "o1");
    force(adm, "INSERT INTO fence.marks (resource, token, holder) VALUES ('o1a', 6, '" HOLDER
               "') ON CONFLICT DO NOTHING");
    /* o1x (C) and o1y (PL/pgSQL): a BEFORE trigger after the guard, so
     * the check (c_check, the generated check) reads the token too. */
    for (int i = 0; i < 2; i++) {
        char sql[1024];
        const char *t = i == 0 ? "o1x" : "o1y";
        snprintf(sql, sizeof sql,
                 "CREATE TABLE %s (id int PRIMARY KEY, v int, tok bigint);"
                 "INSERT INTO %s VALUES (1, 0, 5);"
                 "CREATE TRIGGER zzz_touch BEFORE INSERT OR UPDATE ON %s FOR EACH ROW"
                 " EXECUTE FUNCTION o1_touch();"
                 "SELECT fence.protect('%s', 'tok', false, '%s')",
                 t, t, t, t, i == 0 ? "c" : "plpgsql");
        if (i == 0) {
            ok(adm, "CREATE FUNCTION o1_touch() RETURNS trigger LANGUAGE plpgsql AS $f$"
                    " BEGIN IF NEW.v > 100 THEN NEW.tok := NEW.tok + 1; END IF; RETURN NEW;"
                    " END $f$");
        }
        ok(adm, sql);
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM pg_trigger WHERE tgrelid = '%s'::regclass"
                 " AND tgname IN ('zz_fence_check_ins', 'zz_fence_check_upd')",
                 t);
        ck_assert_int_eq(num(adm, sql), 2);
    }
    PGconn *c = loaded();
    expect_stamped(c, "o1");
    static const pair cases[] = {
        {"5", HOLDER},
        {"6", HOLDER},
        {"4", HOLDER},
        {"0", HOLDER},
        {"-1", HOLDER},
        {"007", HOLDER},
        {" 5", HOLDER},
        {"5 ", HOLDER},
        {"abc", HOLDER},
        {"9223372036854775807", HOLDER},
        {"9223372036854775808", HOLDER},
        {"", HOLDER},
        {NULL, HOLDER},
        {"6", HOLDER2},
        {"6", "0123456789ABCDEF0123456789ABCDEF"},
        {"6", "not-a-holder"},
        {"6", ""},
        {"6", NULL},
        {NULL, NULL},
        {LONG_TOKEN, LONG_TOKEN},
    };
    size_t ntargets = sizeof SAME_TARGETS / sizeof SAME_TARGETS[0];
    static stmt_res seen[sizeof cases / sizeof cases[0]][sizeof SAME_TARGETS / sizeof SAME_TARGETS[0]];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (size_t t = 0; t < ntargets; t++) {
            char st[2][1024];
            stmt_res o[2];
            for (int k = 0; k < 2; k++) {
                o[k] = same_case(c, &cases[i], SAME_TARGETS[t], k == 1, st[k], sizeof st[k]);
            }
            char d0[2048];
            char d1[2048];
            stmt_describe(&o[0], d0, sizeof d0);
            stmt_describe(&o[1], d1, sizeof d1);
            ck_assert_msg(stmt_eq(&o[0], &o[1]) && strcmp(st[0], st[1]) == 0,
                          "token %s%s%s, holder %s%s%s, '%s':\n  set_config %s; holds '%s'\n"
                          "  c_send     %s; holds '%s'",
                          cases[i].tok ? "'" : "", cases[i].tok ? cases[i].tok : "NULL",
                          cases[i].tok ? "'" : "", cases[i].holder ? "'" : "",
                          cases[i].holder ? cases[i].holder : "NULL", cases[i].holder ? "'" : "",
                          SAME_TARGETS[t], d0, st[0], d1, st[1]);
            seen[i][t] = o[1];
        }
    }
    /* Not the same mistake both ways: a few outcomes outright. */
    expect_stmt_ok(&seen[0][0], "UPDATE 1 [1,1,5]", "token 5, stamped UPDATE");
    expect_stmt_ok(&seen[1][1], "UPDATE 1 [2,1,6]", "token 6, UPDATE by the trigger");
    expect_stmt_err(&seen[2][0], "23Q01", "fence: stale token 4 for public.o1c (highest seen 5)",
               "offered=4 highest=5 kind=table object=public.o1c reason=older", "token 4");
    expect_stmt_err(&seen[2][4], "23Q01", "fence: stale token 4 for public.o1p (highest seen 5)",
               "offered=4 highest=5 kind=table object=public.o1p reason=older", "token 4, plpgsql");
    expect_stmt_err(&seen[5][2], "23Q02", "fence: malformed fencing token '007' for INSERT on public.o1c",
               "reason=malformed", "token 007");
    expect_stmt_err(&seen[11][5], "23Q02", "fence: no fencing token for INSERT on public.o1p",
               "reason=missing", "token ''");
    expect_stmt_err(&seen[12][0], "23Q02", "fence: no fencing token for UPDATE on public.o1c",
               "reason=missing", "token NULL");
    expect_stmt_ok(&seen[9][3], "DELETE 1 [3,7]", "the largest token, DELETE");
    expect_stmt_ok(&seen[1][7], "SELECT 1 [6]", "the holder of the mark repeats its token");
    expect_stmt_err(&seen[13][8], "23Q01", NULL,
               "offered=6 highest=6 kind=resource object=o1a reason=repeat holder=" HOLDER,
               "another holder repeats the token");
    expect_stmt_err(&seen[15][9], "23Q02", NULL, "reason=malformed setting=fence.holder",
               "a malformed holder");
    expect_stmt_ok(&seen[17][10], "SELECT 1 [6]", "no holder");
    expect_stmt_ok(&seen[18][12], "SELECT 1 [,]", "NULL, NULL");
    expect_stmt_ok(&seen[1][13], "UPDATE 1 [6]", "the C check reads the sent token");
    expect_stmt_err(&seen[1][14], "23Q03", NULL, "written=7 expected=6 kind=table object=public.o1x",
               "the C check, a rewritten stamp");
    expect_stmt_ok(&seen[1][16], "UPDATE 1 [6]", "the PL/pgSQL check reads the sent token");
    expect_stmt_err(&seen[1][17], "23Q03", NULL, "written=7 expected=6 kind=table object=public.o1y",
               "the PL/pgSQL check, a rewritten stamp");
    expect_stmt_err(&seen[19][0], "23Q02",
               "fence: malformed fencing token '" E5 E5 E5 E5 E5 E5 E5 E5 "' for UPDATE on "
               "public.o1c",
               "reason=malformed", "a long token");
    PQfinish(c);
    PQfinish(adm);
}
END_TEST

/* ------------------------------------------------------------------ */
/* 4. Parallel mode                                                     */
/* ------------------------------------------------------------------ */

/* Whether the plan of sql has a Gather node. */
static bool gathered(PGconn *c, const char *sql)
{
    char q[512];
    snprintf(q, sizeof q, "EXPLAIN (COSTS OFF) %s", sql);
    PGresult *r = PQexec(c, q);
    ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
    bool g = false;
    for (int i = 0; i < PQntuples(r); i++) {
        g = g || strstr(PQgetvalue(r, i, 0), "Gather") != NULL;
    }
    PQclear(r);
    return g;
}

/* c_send refuses to run in a parallel operation, as set_config does
 * (25000), and a parallel query that tried leaves nothing sent.  A
 * parallel worker does not see what the leader sent (send.c: fence's
 * readers are PARALLEL UNSAFE and run in the leader): current_setting in
 * a worker reads the setting's own value, where set_config's value is
 * copied to the workers. */
START_TEST(parallel_mode)
{
    PGconn *adm = admin();
    tables(adm, "q1");
    ok(adm, "CREATE OR REPLACE FUNCTION q1_send() RETURNS boolean LANGUAGE plpgsql"
            " PARALLEL SAFE AS $f$ BEGIN RETURN fence.c_send('6', NULL); END $f$;"
            "CREATE OR REPLACE FUNCTION q1_set() RETURNS boolean LANGUAGE plpgsql"
            " PARALLEL SAFE AS $f$ BEGIN RETURN set_config('fence.token', '6', true) = '6';"
            " END $f$;"
            "CREATE OR REPLACE FUNCTION q1_read() RETURNS text LANGUAGE plpgsql"
            " PARALLEL SAFE AS $f$ BEGIN RETURN pg_backend_pid() || ':' ||"
            " current_setting('fence.token'); END $f$");
    PGconn *c = loaded();
    ok(c, "SET force_parallel_mode = on");
    ck_assert(gathered(c, "SELECT q1_send()"));
    /* c_send itself is PARALLEL UNSAFE: never under a Gather. */
    ck_assert(!gathered(c, "SELECT fence.c_send('6', NULL)"));

    ok(c, "BEGIN");
    stmt_res r = stmt_exec(c, "SELECT q1_send()");
    expect_stmt_err(&r, "25000", "fence: cannot send a token during a parallel operation", NULL,
               "c_send in a parallel query");
    ok(c, "ROLLBACK");
    ok(c, "BEGIN");
    r = stmt_exec(c, "SELECT q1_set()");
    expect_stmt_err(&r, "25000", "parameter \"fence.token\" cannot be set during a parallel operation",
               NULL, "set_config in a parallel query");
    ok(c, "ROLLBACK");
    ck_assert_int_eq(PQstatus(c), CONNECTION_OK);

    /* Once something is sent, the same query runs without workers and
     * outside parallel mode, so its c_send works, scoped like any other:
     * gone with the savepoint it ran in. */
    ok(c, "BEGIN");
    sent_by(c, "8", NULL);
    ok(c, "SAVEPOINT a");
    r = stmt_exec(c, "SELECT q1_send()");
    expect_stmt_ok(&r, "SELECT 1 [t]", "c_send in a would-be parallel query, in a savepoint");
    ck_assert_str_eq(text1(c, "SHOW fence.token"), "6");
    ok(c, "ROLLBACK TO SAVEPOINT a");
    ok(c, "RESET force_parallel_mode");
    expect_probe(c, "q1", "8", "", "after the savepoint was rolled back");
    ok(c, "SET LOCAL force_parallel_mode = on");

    /* While something is sent, a query runs without workers: the leader
     * evaluates the parallel-safe function and reads what was sent. */
    char leader[32];
    snprintf(leader, sizeof leader, "%d:8", PQbackendPID(c));
    ck_assert_str_eq(text1(c, "SELECT q1_read()"), leader);
    /* The writes run in the leader and see it. */
    r = stmt_exec(c, "UPDATE q1c SET v = v + 1 WHERE id = 1 RETURNING tok");
    expect_stmt_ok(&r, "UPDATE 1 [8]", "C table, force_parallel_mode on");
    r = stmt_exec(c, "UPDATE q1p SET v = v + 1 WHERE id = 1 RETURNING tok");
    expect_stmt_ok(&r, "UPDATE 1 [8]", "PL/pgSQL table, force_parallel_mode on");
    ok(c, "ROLLBACK");
    ok(c, "BEGIN");
    ok(c, "SELECT set_config('fence.token', '8', true)");
    ok(c, "SET LOCAL force_parallel_mode = on");
    const char *v = text1(c, "SELECT q1_read()");
    ck_assert_msg(strchr(v, ':') != NULL && strcmp(strchr(v, ':'), ":8") == 0,
                  "set_config's token in a parallel query: '%s'", v);
    ok(c, "ROLLBACK");
    ck_assert_int_eq(num(c, "SELECT 1"), 1);

    /* A real parallel plan (Gather over a parallel scan), every row's
     * current_setting() counted: with a session value underneath, a
     * worker would read the session's '5' instead of the sent '9'
     * (the first review counted 10,612 such rows before the fix). */
    ok(adm, "CREATE TABLE q1_big AS SELECT g AS id FROM generate_series(1, 60000) g;"
            "ANALYZE q1_big;"
            "CREATE OR REPLACE FUNCTION q1_tok() RETURNS text LANGUAGE plpgsql PARALLEL SAFE"
            " AS $f$ BEGIN RETURN current_setting('fence.token'); END $f$");
    ok(c, "RESET force_parallel_mode");
    ok(c, "SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;"
          "SET min_parallel_table_scan_size = 0; SET max_parallel_workers_per_gather = 2");
    static const char count_sql[] =
        "SELECT count(*) FILTER (WHERE q1_tok() = '9') || '/' || count(*) FROM q1_big";
    ck_assert(gathered(c, count_sql));
    ok(c, "SET fence.token = '5'");
    ok(c, "BEGIN");
    sent_by(c, "9", NULL);
    ck_assert_str_eq(text1(c, count_sql), "60000/60000");
    ok(c, "COMMIT");
    /* set_config's value reaches the workers itself. */
    ok(c, "BEGIN");
    ok(c, "SELECT set_config('fence.token', '9', true)");
    ck_assert_str_eq(text1(c, count_sql), "60000/60000");
    ok(c, "COMMIT");
    ok(c, "RESET fence.token");
    PQfinish(c);
    PQfinish(adm);
}
END_TEST

/* ------------------------------------------------------------------ */
/* 5. PREPARE TRANSACTION                                               */
/* ------------------------------------------------------------------ */

START_TEST(prepare_transaction_clears)
{
    PGconn *adm = admin();
    ck_assert_msg(num(adm, "SELECT current_setting('max_prepared_transactions')::int") > 0,
                  "the test PostgreSQL has max_prepared_transactions = 0: scripts/servers.sh "
                  "starts it with -c max_prepared_transactions=4");
    tables(adm, "x1");
    PGconn *c = loaded();
    char gid[NAME_BUF];
    char sql[256];
    snprintf(gid, sizeof gid, "%s_x1", g_db);

    /* Rows 2 and 10 (and mark x1) only: the probe below must not wait
     * on the prepared transaction's locks. */
    ok(c, "BEGIN");
    sent_by(c, "8", HOLDER);
    ok(c, "UPDATE x1c SET v = v + 1 WHERE id = 2");
    ok(c, "SAVEPOINT a");
    sent_by(c, "9", HOLDER2);
    ok(c, "RELEASE SAVEPOINT a");
    ok(c, "UPDATE x1p SET v = v + 1 WHERE id = 2");
    ok(c, "INSERT INTO x1c VALUES (10, 0, 0)");
    ok(c, "SELECT fence.c_advance('x1', 9)");
    snprintf(sql, sizeof sql, "PREPARE TRANSACTION '%s'", gid);
    ok(c, sql);
    ck_assert_str_eq(text1(c, "SELECT current_setting('fence.token') || '/' ||"
                              " current_setting('fence.holder')"),
                     "/");
    ok(c, "BEGIN");
    expect_probe(c, "x1", NULL, "", "the transaction after PREPARE TRANSACTION");
    ok(c, "ROLLBACK");
    expect_rows(adm, "x1c", "1:0:5 2:0:5 3:0:7", "before COMMIT PREPARED");
    snprintf(sql, sizeof sql, "COMMIT PREPARED '%s'", gid);
    ok(c, sql);
    expect_rows(adm, "x1c", "1:0:5 2:1:8 3:0:7 10:0:9", "after COMMIT PREPARED");
    expect_rows(adm, "x1p", "1:0:5 2:1:9 3:0:7", "after COMMIT PREPARED");
    ck_assert_str_eq(text1(adm, "SELECT token || '/' || holder FROM fence.marks"
                                " WHERE resource = 'x1'"),
                     "9/" HOLDER2);

    /* ROLLBACK PREPARED: nothing left either. */
    ok(c, "BEGIN");
    sent_by(c, "8", HOLDER);
    ok(c, "UPDATE x1c SET v = v + 1 WHERE id = 2");
    snprintf(sql, sizeof sql, "PREPARE TRANSACTION '%s'", gid);
    ok(c, sql);
    ok(c, "BEGIN");
    expect_probe(c, "x1", NULL, "", "after a second PREPARE TRANSACTION");
    ok(c, "ROLLBACK");
    snprintf(sql, sizeof sql, "ROLLBACK PREPARED '%s'", gid);
    ok(c, sql);
    expect_rows(adm, "x1c", "1:0:5 2:1:8 3:0:7 10:0:9", "after ROLLBACK PREPARED");
    PQfinish(c);
    PQfinish(adm);
}
END_TEST

/* ------------------------------------------------------------------ */
/* 6. libfence_pg                                                       */
/* ------------------------------------------------------------------ */

/* c prepared: three statements, each with c_send (and not set_config)
 * when send, else with set_config (and not c_send); the advance one
 * calls c_advance when c_adv, else fence.advance. */
static void expect_prepared(PGconn *c, bool send_way, bool c_adv, const char *what)
{
    ck_assert_msg(fence_pg_prepare(c) == FENCE_OK, "%s: fence_pg_prepare: %s", what,
                  fence_pg_errmsg(c));
    static const char *const names[3] = {"fence_pg_send_token_h", "fence_pg_set_token_h",
                                         "fence_pg_set_token_h_advance"};
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_prepared_statements"
                            " WHERE name LIKE 'fence_pg_%'"),
                     3);
    for (int i = 0; i < 3; i++) {
        char sql[256];
        snprintf(sql, sizeof sql, "SELECT statement FROM pg_prepared_statements WHERE name = '%s'",
                 names[i]);
        const char *st = text1(c, sql);
        bool has_send = strstr(st, "fence.c_send($1, $2)") != NULL;
        bool has_set = strstr(st, "set_config(") != NULL;
        ck_assert_msg(has_send == send_way && has_set == !send_way, "%s: %s is '%s'", what,
                      names[i], st);
        if (i == 2) {
            ck_assert_msg((strstr(st, "fence.c_advance($3") != NULL) == c_adv &&
                              (strstr(st, "fence.advance($3") != NULL) == !c_adv,
                          "%s: %s is '%s'", what, names[i], st);
        }
    }
}

/* The writes of libfence_pg on c (tables <pfx>c, <pfx>p, resource <pfx>
 * with no mark yet), each way: set_token, set_token with a resource,
 * stale, pipeline, and the next transaction without a token. */
static void expect_writes(PGconn *c, PGconn *adm, const char *pfx, const char *what)
{
    char tc[64];
    char tp[64];
    char sql[256];
    char w[256];
    outcome e;
    snprintf(tc, sizeof tc, "%sc", pfx);
    snprintf(tp, sizeof tp, "%sp", pfx);

    ok(c, "BEGIN");
    ck_assert_msg(set_tok_h(c, 6, HOLDER, NULL, &e) == FENCE_OK, "%s: set_token: %s", what,
                  e.message);
    ck_assert_str_eq(text1(c, "SHOW fence.token"), "6");
    ck_assert_str_eq(text1(c, "SHOW fence.holder"), HOLDER);
    snprintf(sql, sizeof sql, "UPDATE %s SET v = v + 1 WHERE id = 1", tc);
    ok(c, sql);
    snprintf(sql, sizeof sql, "UPDATE %s SET v = v + 1 WHERE id = 1", tp);
    ok(c, sql);
    ok(c, "COMMIT");
    snprintf(w, sizeof w, "%s, set_token", what);
    expect_rows(adm, tc, "1:1:6 2:0:5 3:0:7", w);
    expect_rows(adm, tp, "1:1:6 2:0:5 3:0:7", w);

    ok(c, "BEGIN");
    ck_assert_msg(set_tok_h(c, 7, HOLDER, pfx, &e) == FENCE_OK, "%s: set_token, resource: %s",
                  what, e.message);
    ok(c, "COMMIT");
    char h[FENCE_HOLDER_LEN + 1];
    ck_assert_uint_eq(mark_of(c, pfx, h), 7);
    ck_assert_str_eq(h, HOLDER);
    ok(c, "BEGIN");
    ck_assert_int_eq(set_tok_h(c, 6, NULL, pfx, &e), FENCE_STALE);
    ck_assert_uint_eq(e.stale.offered, 6);
    ck_assert_uint_eq(e.stale.highest, 7);
    ok(c, "ROLLBACK");

    snprintf(sql, sizeof sql, "UPDATE %s SET v = v + 1 WHERE id = 2", tc);
    ck_assert_msg(pipelined_h(c, 8, HOLDER, NULL, sql, &e) == FENCE_OK, "%s: pipeline: %s", what,
                  e.message);
    snprintf(sql, sizeof sql, "UPDATE %s SET v = v + 1 WHERE id = 2", tp);
    ck_assert_msg(pipelined_h(c, 8, HOLDER2, pfx, sql, &e) == FENCE_OK,
                  "%s: pipeline, resource: %s", what, e.message);
    snprintf(w, sizeof w, "%s, pipeline", what);
    expect_rows(adm, tc, "1:1:6 2:1:8 3:0:7", w);
    expect_rows(adm, tp, "1:1:6 2:1:8 3:0:7", w);
    ck_assert_uint_eq(mark_of(c, pfx, h), 8);
    ck_assert_str_eq(h, HOLDER2);
    snprintf(sql, sizeof sql, "UPDATE %s SET v = v + 1 WHERE id = 3", tc);
    ck_assert_int_eq(pipelined_h(c, 6, NULL, NULL, sql, &e), FENCE_STALE);

    /* Over a session-level token: the transaction's. */
    ok(c, "SET fence.token = '3'");
    ok(c, "BEGIN");
    ck_assert_msg(set_tok_h(c, 9, HOLDER, NULL, &e) == FENCE_OK,
                  "%s: set_token over a session's token: %s", what, e.message);
    snprintf(sql, sizeof sql, "UPDATE %s SET v = v + 1 WHERE id = 1 RETURNING tok", tc);
    stmt_res r = stmt_exec(c, sql);
    expect_stmt_ok(&r, "UPDATE 1 [9]", what);
    ok(c, "ROLLBACK");
    ok(c, "RESET fence.token");

    /* Nothing carried over. */
    snprintf(sql, sizeof sql, "UPDATE %s SET v = v + 1 WHERE id = 1", tc);
    ok(c, "BEGIN");
    ck_assert_int_eq(run(c, sql, &e), FENCE_ENOTOKEN);
    ok(c, "ROLLBACK");
    snprintf(sql, sizeof sql, "UPDATE %s SET v = v + 1 WHERE id = 1", tp);
    ok(c, "BEGIN");
    ck_assert_int_eq(run(c, sql, &e), FENCE_ENOTOKEN);
    ok(c, "ROLLBACK");
}

/* fence_pg_prepare() on a database with 1.3: c_send statements, and the
 * writes right; a SET LOCAL / set_config of the same transaction made
 * before set_token makes it fail (its c_send refuses, naming the setting,
 * and the transaction is aborted); one made after it, the write. */
START_TEST(libpq_prepares_c_send)
{
    PGconn *adm = admin();
    tables(adm, "l1");
    PGconn *app = db_app();
    ok(app, "SET statement_timeout = '10s'");
    expect_prepared(app, true, true, "application role, 1.3");
    expect_writes(app, adm, "l1", "application role, 1.3");

    outcome e;
    static const struct {
        const char *sql;
        const char *setting;
    } before[] = {{"SET LOCAL fence.token = '9'", "fence.token"},
                  {"SET LOCAL fence.holder = ''", "fence.holder"},
                  {"SELECT set_config('fence.token', '9', true)", "fence.token"},
                  {"SELECT set_config('fence.holder', '', true)", "fence.holder"}};
    for (size_t i = 0; i < sizeof before / sizeof before[0]; i++) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "fence: %s was set twice in this transaction, by fence.c_send() and by SET, "
                 "set_config or a function's SET clause",
                 before[i].setting);
        for (int with_res = 0; with_res < 2; with_res++) {
            ok(app, "BEGIN");
            ok(app, before[i].sql);
            fence_status st = set_tok_h(app, 9, with_res ? HOLDER : NULL, with_res ? "l1x" : NULL,
                                        &e);
            ck_assert_msg(st == FENCE_ENOTOKEN && strcmp(e.sqlstate, "23Q02") == 0 &&
                              strcmp(e.message, msg) == 0,
                          "'%s' then set_token%s: %s %s %s", before[i].sql,
                          with_res ? " with a resource" : "", fence_status_name(st), e.sqlstate,
                          e.message);
            expect_aborted(app, before[i].sql);
            ok(app, "ROLLBACK");
        }
    }
    ck_assert_int_eq(num(adm, "SELECT count(*) FROM fence.marks WHERE resource = 'l1x'"), 0);
    /* The other order: the write is refused. */
    ok(app, "BEGIN");
    ck_assert_int_eq(set_tok(app, 9, NULL, &e), FENCE_OK);
    ok(app, "SET LOCAL fence.token = '9'");
    stmt_res r = stmt_exec(app, "UPDATE l1c SET v = v + 1 WHERE id = 1");
    expect_conflict(&r, "fence.token", "set_token, SET LOCAL, UPDATE");
    ok(app, "ROLLBACK");
    /* In a pipeline: the write after it. */
    ck_assert_int_eq(pipelined_h(app, 9, NULL, NULL,
                                 "SELECT set_config('fence.token', '9', true)", &e),
                     FENCE_ENOTOKEN);
    ck_assert_str_eq(e.sqlstate, "23Q02");
    ck_assert_str_eq(e.message, "fence: fence.token was set twice in this transaction, by "
                                "fence.c_send() and by SET, set_config or a function's SET "
                                "clause");
    PQfinish(app);

    /* Not prepared: set_config, which a SET LOCAL simply overrides. */
    app = db_app();
    ok(app, "BEGIN");
    ck_assert_int_eq(set_tok(app, 9, NULL, &e), FENCE_OK);
    ok(app, "SET LOCAL fence.token = '10'");
    r = stmt_exec(app, "UPDATE l1c SET v = v + 1 WHERE id = 1 RETURNING tok");
    expect_stmt_ok(&r, "UPDATE 1 [10]", "unprepared set_token, then SET LOCAL");
    ok(app, "ROLLBACK");
    ck_assert_int_eq(num(app, "SELECT count(*) FROM pg_prepared_statements"), 0);
    PQfinish(app);
    PQfinish(adm);
}
END_TEST

/* A side database with fence.sql, the extension (version ver, NULL: the
 * default) and tables <pfx>c, <pfx>p; returns a superuser connection. */
static PGconn *ext_db(const char *suffix, const char *ver, const char *pfx, char *name)
{
    char sql[256];
    side_db(suffix, NULL, name);
    PGconn *c = connect_as(name, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    ck_assert_int_eq(fence_pg_install(c), FENCE_OK);
    if (ver != NULL) {
        snprintf(sql, sizeof sql, "CREATE EXTENSION fence VERSION '%s'", ver);
        ok(c, sql);
    } else {
        ok(c, "CREATE EXTENSION fence");
    }
    if (pfx != NULL) {
        tables(c, pfx);
    }
    return c;
}

/* EXECUTE on c_send revoked from PUBLIC, or extension 1.2: set_config
 * statements, and the writes still right. */
START_TEST(libpq_falls_back_to_set_config)
{
    char name[NAME_BUF];
    PGconn *su = ext_db("norx", NULL, "l2", name);
    /* c_advance revoked, c_send not: c_send with fence.advance. */
    tables(su, "l4");
    ok(su, "REVOKE EXECUTE ON FUNCTION fence.c_advance(text, bigint) FROM PUBLIC");
    PGconn *app = connect_as(name, g_app);
    PQsetNoticeProcessor(app, quiet_notice, NULL);
    expect_prepared(app, true, false, "EXECUTE on c_advance revoked");
    expect_writes(app, su, "l4", "EXECUTE on c_advance revoked");
    PQfinish(app);
    ok(su, "GRANT EXECUTE ON FUNCTION fence.c_advance(text, bigint) TO PUBLIC;"
           "REVOKE EXECUTE ON FUNCTION fence.c_send(text, text) FROM PUBLIC");
    app = connect_as(name, g_app);
    PQsetNoticeProcessor(app, quiet_notice, NULL);
    fails(app, "SELECT fence.c_send('5', NULL)", "42501");
    expect_prepared(app, false, true, "EXECUTE on c_send revoked");
    expect_writes(app, su, "l2", "EXECUTE on c_send revoked");
    /* No conflict on the set_config way. */
    outcome e;
    ok(app, "BEGIN");
    ck_assert_int_eq(set_tok(app, 9, NULL, &e), FENCE_OK);
    ok(app, "SET LOCAL fence.holder = ''");
    stmt_res r = stmt_exec(app, "UPDATE l2c SET v = v + 1 WHERE id = 1 RETURNING tok");
    expect_stmt_ok(&r, "UPDATE 1 [9]", "set_config way, then SET LOCAL fence.holder");
    ok(app, "ROLLBACK");
    PQfinish(app);
    /* The superuser of the same database may call it. */
    PGconn *c = connect_as(name, NULL);
    expect_prepared(c, true, true, "superuser, EXECUTE revoked from PUBLIC");
    PQfinish(c);
    PQfinish(su);
    drop_side_db(name);

    su = ext_db("v12", "1.2", "l3", name);
    ck_assert_int_eq(num(su, "SELECT count(*) FROM pg_proc WHERE proname = 'c_send'"), 0);
    c = connect_as(name, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    expect_prepared(c, false, true, "extension 1.2");
    expect_writes(c, su, "l3", "extension 1.2");
    PQfinish(c);
    PQfinish(su);
    drop_side_db(name);
}
END_TEST

/* ------------------------------------------------------------------ */
/* 7. Upgrade                                                           */
/* ------------------------------------------------------------------ */

START_TEST(upgrade_from_1_2)
{
    static const char MEMBER[] =
        "SELECT count(*) FROM pg_depend WHERE classid = 'pg_proc'::regclass"
        " AND objid = 'fence.c_send(text, text)'::regprocedure"
        " AND refclassid = 'pg_extension'::regclass"
        " AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'fence')"
        " AND deptype = 'e'";
    PGconn *f = admin();
    char fresh[1024];
    snprintf(fresh, sizeof fresh, "%s", text1(f, DECL));
    ck_assert_int_eq(num(f, MEMBER), 1);
    ck_assert_str_eq(fresh, "{postgres=X/postgres,=X/postgres} v u false false postgres boolean"
                            " 25 25 token,holder c fence_c_send $libdir/fence");

    char name[NAME_BUF];
    PGconn *c = ext_db("up", "1.2", NULL, name);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_proc WHERE proname = 'c_send'"), 0);
    PGconn *old = conn_to(name, true); /* the module loaded under 1.2 */
    ck_assert_str_eq(text1(old, "SELECT current_setting('fence.token')"), "");
    ok(c, "ALTER EXTENSION fence UPDATE TO '1.3'");
    ck_assert_str_eq(text1(c, "SELECT extversion FROM pg_extension WHERE extname = 'fence'"),
                     "1.3");
    ck_assert_str_eq(text1(c, DECL), fresh);
    ck_assert_int_eq(num(c, MEMBER), 1);
    PGconn *nw = conn_to(name, false);
    PGconn *both[2] = {old, nw};
    for (int i = 0; i < 2; i++) {
        ok(both[i], "BEGIN");
        sent_by(both[i], "5", HOLDER);
        ck_assert_str_eq(text1(both[i], "SELECT current_setting('fence.token') || '/' ||"
                                        " current_setting('fence.holder')"),
                         "5/" HOLDER);
        ok(both[i], "ROLLBACK");
    }
    /* DROP EXTENSION takes it along. */
    PQfinish(old);
    PQfinish(nw);
    ok(c, "DROP EXTENSION fence");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_proc WHERE proname = 'c_send'"), 0);
    PQfinish(c);
    PQfinish(f);
    drop_side_db(name);
}
END_TEST

/* ------------------------------------------------------------------ */
/* 8. The module's settings                                             */
/* ------------------------------------------------------------------ */

START_TEST(module_defines_the_settings)
{
    PGconn *adm = admin();
    tables(adm, "m1");

    /* Before the module is loaded there is no such setting; after, both
     * read '' when unset. */
    PGconn *c = conn_to(NULL, false);
    ck_assert_int_eq(num(c, "SELECT (current_setting('fence.token', true) IS NULL)::int"), 1);
    fails(c, "SHOW fence.token", "42704");
    ck_assert_int_eq(num(c, "SELECT fence.c_version()"), 1);
    ck_assert_str_eq(text1(c, "SELECT current_setting('fence.token') || '/' ||"
                              " current_setting('fence.holder')"),
                     "/");
    ck_assert_str_eq(text1(c, "SHOW fence.token"), "");
    ck_assert_str_eq(text1(c, "SHOW fence.holder"), "");
    ck_assert_str_eq(text1(c, "SELECT string_agg(name || ':' || vartype || ':' || context, ' '"
                              " ORDER BY name) FROM pg_settings"
                              " WHERE name IN ('fence.token', 'fence.holder')"),
                     "fence.holder:string:user fence.token:string:user");
    PQfinish(c);

    /* A session's values set before the load survive it, and stay the
     * session's (the C guard refuses them). */
    c = conn_to(NULL, false);
    ok(c, "SET fence.token = '4'");
    ok(c, "SET fence.holder = '" HOLDER "'");
    ck_assert_int_eq(num(c, "SELECT fence.c_version()"), 1);
    ck_assert_str_eq(text1(c, "SHOW fence.token"), "4");
    ck_assert_str_eq(text1(c, "SHOW fence.holder"), HOLDER);
    ok(c, "BEGIN");
    stmt_res r = stmt_exec(c, "UPDATE m1c SET v = v + 1 WHERE id = 1");
    expect_stmt_err(&r, "23Q02", NULL, "reason=session setting=fence.token", "session token, loaded");
    ok(c, "ROLLBACK");
    ok(c, "BEGIN");
    sent_by(c, "6", NULL);
    r = stmt_exec(c, "UPDATE m1c SET v = v + 1 WHERE id = 1 RETURNING tok");
    expect_stmt_ok(&r, "UPDATE 1 [6]", "sent over the session's values");
    ok(c, "ROLLBACK");
    ck_assert_str_eq(text1(c, "SHOW fence.token"), "4");
    PQfinish(c);

    /* SET LOCAL before the load, in the same transaction: kept as the
     * transaction's value, and the session's back at its end. */
    for (int commit = 0; commit < 2; commit++) {
        c = conn_to(NULL, false);
        ok(c, "SET fence.token = '3'");
        ok(c, "BEGIN");
        ok(c, "SET LOCAL fence.token = '9'");
        ck_assert_int_eq(num(c, "SELECT fence.c_version()"), 1);
        ck_assert_str_eq(text1(c, "SHOW fence.token"), "9");
        r = stmt_exec(c, "UPDATE m1c SET v = v + 1 WHERE id = 1 RETURNING tok");
        expect_stmt_ok(&r, "UPDATE 1 [9]", "SET LOCAL before the load");
        ok(c, commit ? "COMMIT" : "ROLLBACK");
        ck_assert_str_eq(text1(c, "SHOW fence.token"), "3");
        ok(c, "BEGIN");
        r = stmt_exec(c, "UPDATE m1c SET v = v + 1 WHERE id = 1");
        expect_stmt_err(&r, "23Q02", NULL, "reason=session setting=fence.token",
                   "the session's token after the transaction");
        ok(c, "ROLLBACK");
        PQfinish(c);
    }
    force(adm, "UPDATE m1c SET v = 0, tok = 5 WHERE id = 1");

    /* SET LOCAL before the load, which c_send itself does: the SET LOCAL
     * is kept on the setting's stack, so that c_send refuses (naming the
     * setting changed); the module stays loaded and the next transaction
     * sends. */
    static const struct {
        const char *set;
        const char *setting;
    } before_load[] = {{"SET LOCAL fence.token = '9'", "fence.token"},
                       {"SET LOCAL fence.holder = '" HOLDER "'", "fence.holder"},
                       {"SELECT set_config('fence.holder', '', true)", "fence.holder"}};
    for (size_t i = 0; i < sizeof before_load / sizeof before_load[0]; i++) {
        char what[256];
        snprintf(what, sizeof what, "'%s', then c_send loads the module", before_load[i].set);
        c = conn_to(NULL, false);
        ok(c, "BEGIN");
        ok(c, before_load[i].set);
        send_refused(c, "5", NULL, before_load[i].setting, what);
        ok(c, "ROLLBACK");
        ok(c, "BEGIN");
        sent_by(c, "6", NULL);
        ck_assert_str_eq(text1(c, "SHOW fence.token"), "6");
        r = stmt_exec(c, "UPDATE m1c SET v = v + 1 WHERE id = 1 RETURNING tok");
        expect_stmt_ok(&r, "UPDATE 1 [6]", what);
        ok(c, "ROLLBACK");
        PQfinish(c);
    }
    PQfinish(adm);
}
END_TEST

/* REFRESH MATERIALIZED VIEW, CREATE INDEX and ANALYZE run the owner's
 * code in a security-restricted operation and undo its settings when it
 * ends, without a subtransaction: a c_send there would outlive it and
 * replace the caller's token (second review).  It is refused (42501); the
 * caller's token stays. */
START_TEST(send_refused_in_security_restricted_operations)
{
    PGconn *adm = admin();
    tables(adm, "sr");
    ok(adm, "CREATE FUNCTION sr_send(int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $f$"
            " BEGIN IF current_setting('fence_test.plant', true) = 'on' THEN"
            " PERFORM fence.c_send('9000000000000000000', ''); END IF; RETURN $1; END $f$;"
            "CREATE TABLE sr_m (a int); INSERT INTO sr_m SELECT g FROM generate_series(1, 50) g;"
            "CREATE INDEX sr_m_expr ON sr_m (sr_send(a));"
            "CREATE MATERIALIZED VIEW sr_mv AS SELECT sr_send(a) AS b FROM sr_m WITH NO DATA");
    ok(adm, "SELECT fence.c_version()"); /* the module, in this backend */
    static const char *const ops[] = {
        "REFRESH MATERIALIZED VIEW sr_mv",
        "CREATE INDEX sr_m_expr2 ON sr_m (sr_send(a + 1))",
        "ANALYZE sr_m",
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        ok(adm, "BEGIN");
        ck_assert_str_eq(text1(adm, "SELECT fence.c_send('6', '')"), "t");
        ok(adm, "SAVEPOINT a");
        ok(adm, "SET LOCAL fence_test.plant = 'on'");
        stmt_res r = stmt_exec(adm, ops[i]);
        expect_stmt_err(&r, "42501",
                   "fence: cannot send a token within a security-restricted operation", NULL,
                   ops[i]);
        ok(adm, "ROLLBACK TO SAVEPOINT a");
        ck_assert_str_eq(text1(adm, "SHOW fence.token"), "6");
        ck_assert_str_eq(text1(adm, "UPDATE src SET v = v + 1 WHERE id = 1 RETURNING tok"), "6");
        ck_assert_str_eq(text1(adm, "UPDATE srp SET v = v + 1 WHERE id = 1 RETURNING tok"), "6");
        ok(adm, "ROLLBACK");
    }
    /* Without the plant, the operations run (the refusal is c_send's). */
    ok(adm, "BEGIN");
    ck_assert_str_eq(text1(adm, "SELECT fence.c_send('6', '')"), "t");
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        ok(adm, ops[i]);
    }
    ck_assert_str_eq(text1(adm, "SHOW fence.token"), "6");
    ok(adm, "ROLLBACK");
    PQfinish(adm);
}
END_TEST

/* The plan copy that keeps a query without workers is given back after
 * each run: a SQL function runs a new query per call, in memory that lives
 * as long as its caller's query, and a copy per call piled up there (the
 * third review: 65 MB for 200,000 calls). */
START_TEST(serial_plan_copies_do_not_pile_up)
{
    PGconn *adm = admin();
    ok(adm, "CREATE TABLE pu_small AS SELECT 1 AS x; ANALYZE pu_small;"
            "CREATE FUNCTION pu_f(int) RETURNS int LANGUAGE sql AS"
            " $f$ SELECT 1; SELECT x + $1 FROM pu_small $f$;"
            "CREATE FUNCTION pu_mem() RETURNS bigint LANGUAGE sql AS"
            " $f$ SELECT sum(total_bytes)::bigint FROM pg_backend_memory_contexts $f$");
    PGconn *c = loaded();
    ok(c, "SET force_parallel_mode = on");
    ck_assert(gathered(c, "SELECT x + 1 FROM pu_small"));
    static const char q[] =
        "WITH a AS MATERIALIZED (SELECT sum(pu_f(g)) s FROM generate_series(1, 100000) g)"
        " SELECT (SELECT pu_mem() WHERE a.s IS NOT NULL) FROM a";
    ok(c, "BEGIN");
    ok(c, "SET LOCAL force_parallel_mode = off");
    sent_by(c, "9", NULL);
    long long serial_plan = num(c, q); /* no copies made at all */
    ok(c, "COMMIT");
    ok(c, "BEGIN");
    sent_by(c, "9", NULL);
    long long copied = num(c, q); /* a copy per call, each given back */
    ok(c, "COMMIT");
    ck_assert_msg(copied < serial_plan + 4 * 1024 * 1024,
                  "100,000 calls with copies: %lld bytes, without: %lld", copied, serial_plan);
    PQfinish(c);
    PQfinish(adm);
}
END_TEST

static Suite *pg_send_suite(void)
{
    Suite *s = suite_create("pg_send");
    TCase *t = pg_tcase("pg_send");
    tcase_add_test(t, send_scoped_like_set_local);
    tcase_add_test(t, send_in_plpgsql_blocks);
    tcase_add_test(t, send_cleared_at_transaction_end);
    tcase_add_test(t, conflicts_refused_by_every_reader);
    tcase_add_test(t, conflicts_and_savepoints);
    tcase_add_test(t, send_inside_function_with_set_clause);
    tcase_add_test(t, change_after_send_in_one_function);
    tcase_add_test(t, send_memory_bounded);
    tcase_add_test(t, same_outcomes_as_set_config);
    tcase_add_test(t, parallel_mode);
    tcase_add_test(t, prepare_transaction_clears);
    tcase_add_test(t, libpq_prepares_c_send);
    tcase_add_test(t, libpq_falls_back_to_set_config);
    tcase_add_test(t, upgrade_from_1_2);
    tcase_add_test(t, module_defines_the_settings);
    tcase_add_test(t, send_refused_in_security_restricted_operations);
    tcase_add_test(t, serial_plan_copies_do_not_pile_up);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(pg_send_suite());
}
