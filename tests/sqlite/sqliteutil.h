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
/* The first column of the first row (INT64_MIN for NULL) / as text
 * ("(null)"; a static buffer, valid until the next call). */
int64_t su_q_int(sqlite3 *db, const char *sql);
const char *su_q_text(sqlite3 *db, const char *sql);
void su_set_tok(sqlite3 *db, uint64_t t);

/* The statement must be refused as stale, with both tokens, the kind and
 * the table or resource; or without a token. */
void su_expect_stale(sqlite3 *db, const char *sql, uint64_t offered, uint64_t highest,
                     fence_object_kind kind, const char *object);
void su_expect_notoken(sqlite3 *db, const char *sql);

/* A table t(id, v, email UNIQUE) in t.db protected with the default
 * column, with row 1 written by token 34. */
sqlite3 *su_table_at_34(void);

/* Fencing triggers (named fence_*) on TABLE in SCHEMA. */
int64_t su_count_fence_triggers(sqlite3 *db, const char *schema, const char *table);

#endif
