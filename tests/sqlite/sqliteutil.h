/* sqliteutil.h -- what the SQLite suites share: a fresh mkdtemp() folder
 * per test, real database files in it, and the checks of a refused write. */
#ifndef FENCE_SQLITEUTIL_H
#define FENCE_SQLITEUTIL_H

#include <check.h>
#include <sqlite3.h>
#include <stdint.h>

#include "fence_sqlite.h"
#include "testutil.h"

/* Checked fixture: make the folder / remove it with its files. */
void su_setup(void);
void su_teardown(void);

/* A connection to FILE in the folder (WAL, busy_timeout 5 s); fenced ones
 * are attached. */
sqlite3 *su_open_plain(const char *file);
sqlite3 *su_open_fenced(const char *file);

void su_exec_ok(sqlite3 *db, const char *sql);
int su_exec_rc(sqlite3 *db, const char *sql);
/* Run the SQL file at PATH (at most 64 KiB), which must succeed. */
void su_exec_file(sqlite3 *db, const char *path);
/* The first column of the first row (INT64_MIN for NULL) / as text
 * ("(null)"; a static buffer, valid until the next call). */
int64_t su_q_int(sqlite3 *db, const char *sql);
const char *su_q_text(sqlite3 *db, const char *sql);
void su_set_tok(sqlite3 *db, uint64_t t);
/* A token serves one write transaction (docs/sqlite.md): su_again gives
 * db again the token and holder it was last given through su_set_tok or
 * su_set_th, for the next one.  The suites about the rule (rather than
 * the token's life) call it before each write, as a writer sets its
 * token in each transaction; su_expect_stale, su_expect_advance_stale and
 * su_advance_ok do it themselves (su_expect_stale with the token it
 * expects refused). */
void su_again(sqlite3 *db);
/* su_again (nothing when db was never given a token), then su_exec_ok. */
void su_write_ok(sqlite3 *db, const char *sql);
/* Set token t (no holder) and run SQL, which must succeed: one write
 * transaction (or several statements in one BEGIN ... COMMIT) with it. */
void su_tok_exec_ok(sqlite3 *db, uint64_t t, const char *sql);

/* The statement, run with token OFFERED (set first: a token serves one
 * write transaction), must be refused as stale, with both tokens, the kind
 * and the table or resource; or (su_expect_notoken) without a token. */
void su_expect_stale(sqlite3 *db, const char *sql, uint64_t offered, uint64_t highest,
                     fence_object_kind kind, const char *object);
void su_expect_notoken(sqlite3 *db, const char *sql);

/* A table t(id, v, email UNIQUE) in t.db protected with the default
 * column, with row 1 written by token 34. */
sqlite3 *su_table_at_34(void);

/* Fencing triggers (named fence_*) on TABLE in SCHEMA. */
int64_t su_count_fence_triggers(sqlite3 *db, const char *schema, const char *table);

/* Holder ids (test_sqlite_holder, test_sqlite_upgrade). */
#define H1 "0123456789abcdef0123456789abcdef"
#define H2 "fedcba9876543210fedcba9876543210"
/* fence_sqlite_set_token(db, t, h) must succeed. */
void su_set_th(sqlite3 *db, uint64_t t, const char *h);
/* Resource R's mark / its holder ("(none)" for NULL, "(no mark)"; a
 * static buffer, as su_q_text). */
uint64_t su_mark(sqlite3 *db, const char *r);
const char *su_mark_holder(sqlite3 *db, const char *r);
/* su_again, then fence_sqlite_advance(db, R) must succeed. */
void su_advance_ok(sqlite3 *db, const char *r);
/* su_again, then fence_sqlite_advance(db, R) must be refused as stale with these fields
 * (kind RESOURCE, object R) and the reason in the message. */
void su_expect_advance_stale(sqlite3 *db, const char *r, uint64_t offered, uint64_t highest,
                             fence_stale_reason reason, const char *holder);

#endif
