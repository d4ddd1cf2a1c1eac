/* pgutil.h -- what the libfence_pg suites share: one database and one
 * application role per run (the fixture), connections, and short ways to
 * run SQL and read what a call left behind.  Every suite talks to the real
 * PostgreSQL of scripts/with-servers --pg. */
#ifndef FENCE_TEST_PGUTIL_H
#define FENCE_TEST_PGUTIL_H

#include "fence_pg.h"
#include "testutil.h"

#include <stdbool.h>
#include <stdint.h>

/* The schema version of the fence.sql these suites test (fence.version()). */
#define PG_SQL_VERSION 7

extern char g_db[64];  /* this run's database */
extern char g_app[64]; /* this run's non-superuser role */

/* The fixture: creates g_db (fence.sql installed twice, then CREATE
 * EXTENSION fence when pg_impl() is "c")
 * and g_app; the teardown drops
 * both and every side database and role of this run. */
void setup_db(void);
void teardown_db(void);

/* The per-row implementation this run tests, from FENCE_TEST_PG_IMPL
 * (scripts/run-suites runs every PostgreSQL suite once per value): "c"
 * (the extension of lib/pgext, which fence.protect() then picks) or
 * "plpgsql" (the portable generated trigger functions; the default). */
const char *pg_impl(void);
/* Whether this run covers implementation impl ("c" or "plpgsql") in the
 * suites that cover both in one run (test_pg_pooler, test_pg_restore):
 * FENCE_TEST_PG_IMPLS, a list of them (scripts/pg-versions sets
 * "plpgsql" for servers that cannot load the extension), or both when
 * unset.  A suite that leaves one out says so on stderr (pg_impl_note). */
bool pg_impl_wanted(const char *impl);
/* "# <suite>: the C guard is left out (FENCE_TEST_PG_IMPLS=...): <what>"
 * on stderr, when pg_impl_wanted("c") is false; returns whether it is. */
bool pg_impl_note(const char *suite, const char *what);
/* CREATE EXTENSION fence in the database of c (superuser). */
void create_extension(PGconn *c);

/* Connect to dbname (NULL: the server's default database) as user (NULL:
 * the superuser of FENCE_TEST_PG_CONNINFO). */
PGconn *connect_as(const char *dbname, const char *user);
PGconn *db(void);     /* g_db as the superuser, notices silenced */
PGconn *db_app(void); /* g_db as g_app, notices silenced */
void quiet_notice(void *arg, const char *msg);

/* What a call left behind, read right after it: its status, the stale
 * description it filled, and the connection's fence_pg_errmsg and
 * fence_pg_sqlstate.  The helpers below run more calls on the same
 * connection (COMMIT, ROLLBACK), and a successful call clears the
 * message, so they hand it back through one of these. */
typedef struct outcome {
    fence_status status;
    fence_stale stale;
    char sqlstate[6];
    char message[1024];
} outcome;

/* Record st and conn's message and SQLSTATE into o (when not NULL);
 * returns st.  o->stale is left as the call filled it. */
fence_status note(const PGconn *c, fence_status st, outcome *o);

/* Run sql; return the fence status of its result (fence_pg_classify),
 * filling *o (optional). */
fence_status run(PGconn *c, const char *sql, outcome *o);
/* fence_pg_set_token with no holder, filling *o (optional). */
fence_status set_tok(PGconn *c, uint64_t tok, const char *resource, outcome *o);
/* fence_pg_set_token with holder (NULL: none), filling *o (optional). */
fence_status set_tok_h(PGconn *c, uint64_t tok, const char *holder, const char *resource,
                       outcome *o);
/* One transaction that advances resource with token tok and holder (NULL:
 * none) through fence_pg_set_token; committed on success, rolled back
 * otherwise.  Returns the status, filling *o (optional). */
fence_status advance_h(PGconn *c, uint64_t tok, const char *holder, const char *resource,
                       outcome *o);
/* resource's mark and holder ("" none) through fence_pg_mark_holder;
 * holder gets FENCE_HOLDER_LEN + 1 bytes.  Returns the mark. */
uint64_t mark_of(PGconn *c, const char *resource, char *holder);
/* In pipeline mode: fence_pg_send_token (holder NULL: none) + sql + sync;
 * returns the status of sql's result (or of the token's, when that
 * failed), filling *e. */
fence_status pipelined_h(PGconn *c, uint64_t tok, const char *holder, const char *resource,
                         const char *sql, outcome *e);
/* Run sql and require success. */
void ok(PGconn *c, const char *sql);
/* Run sql and require it to fail with SQLSTATE state. */
void fails(PGconn *c, const char *sql, const char *state);
/* The single value sql returns, as a number / as text (static buffer). */
long long num(PGconn *c, const char *sql);
const char *text1(PGconn *c, const char *sql);

/* BEGIN, set the token with the C API (optionally advancing resource). */
void begin_tok(PGconn *c, uint64_t tok, const char *resource);
/* One transaction with token tok running sql; returns its status (the
 * transaction is committed on success, rolled back otherwise). */
fence_status write_tok(PGconn *c, uint64_t tok, const char *sql, outcome *o);
/* Like write_tok but the token is the raw setting value (NULL: none). */
fence_status write_raw(PGconn *c, const char *raw, const char *sql, outcome *o);
/* A protected table NAME(id int primary key, v int, by bigint) with rows
 * 1..3, unstamped. */
void make_table(PGconn *c, const char *name);

/* A statement sent with PQsendQuery on c, watched from another
 * connection (the tests of concurrency): */
/* whether c's answer has not arrived yet (input consumed); */
bool pg_busy(PGconn *c);
/* what c's backend waits for, "type/event" per pg_stat_activity ("/" none,
 * "gone/" no backend; static buffer); */
const char *pg_wait_event(PGconn *watch, PGconn *c);
/* whether it is blocked: its backend waits on a heavyweight lock within 3 s
 * and it is still busy, still on a lock, after block_ms (false as soon as
 * it answers); */
bool pg_held(PGconn *watch, PGconn *c, int block_ms);
/* its first result, within answer_ms (a failed assertion otherwise); the
 * others are read and dropped.  The caller PQclears it. */
PGresult *pg_answer(PGconn *c, const char *what, int answer_ms);

/* Names of side databases and roles: under 64 bytes, PostgreSQL's limit. */
#define NAME_BUF 128
/* A database of this run named <g_db>_<suffix>, owned by owner (NULL: the
 * superuser); its name goes to out (NAME_BUF bytes). */
void side_db(const char *suffix, const char *owner, char *out);
void drop_side_db(const char *name);
/* A login role of this run named <g_app>_<suffix>; its name goes to out. */
void side_role(const char *suffix, char *out);

/* Notices (WARNINGs) a connection received, concatenated
 * (PQsetNoticeReceiver(c, collect_notice, &n)). */
typedef struct notes {
    char text[8192];
} notes;
void collect_notice(void *arg, const PGresult *r);

/* fence.sql version 2 as released (tests/pg/fence_v2.sql, embedded):
 * install it into the database of c (which must not hold a newer one). */
extern const char pgtest__sql_fence_v2[];
extern const size_t pgtest__sql_fence_v2_len;
void install_v2(PGconn *c);
/* Install a released fence.sql (its text and length, embedded) into the
 * database of c, checking that it says it is `version` and is. */
void install_release(PGconn *c, const char *script, size_t len, int version);

/* What one statement returned, to compare outcomes field by field:
 * on error its SQLSTATE, message, DETAIL, HINT and CONTEXT; on success
 * the command status and the rows, each as [a,b,...], sorted (an UPDATE's
 * RETURNING rows come in the scan's order). */
typedef struct stmt_res {
    bool ok;
    char state[6];
    char msg[512];
    char detail[512];
    char hint[512];
    char context[2048];
    char rows[1024];
} stmt_res;
void stmt_take(PGresult *r, stmt_res *o); /* does not PQclear r */
stmt_res stmt_exec(PGconn *c, const char *sql);
/* Same outcome: all but the CONTEXT. */
bool stmt_eq(const stmt_res *a, const stmt_res *b);
void stmt_describe(const stmt_res *r, char *out, size_t n);
/* o is an error with SQLSTATE state (and, when not NULL, exactly message
 * msg and DETAIL detail); `what` names the case in a failure. */
void expect_stmt_err(const stmt_res *o, const char *state, const char *msg, const char *detail,
                     const char *what);
/* o succeeded (with exactly rows, when not NULL). */
void expect_stmt_ok(const stmt_res *o, const char *rows, const char *what);

/* A Check case with the fixture, for suite_add_tcase. */
TCase *pg_tcase(const char *name);

#endif
