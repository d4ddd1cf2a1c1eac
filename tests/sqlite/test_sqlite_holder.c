/* test_sqlite_holder.c -- holder ids at the SQLite store (issue 8): a
 * resource's mark records who holds its token, and an equal token is
 * admitted only from that holder ("none" equals only "none"); the setter
 * and getter of the connection's holder, in C and SQL, and their bad
 * input; the stale description and message (reason, holder); direct
 * writes to fence_resource; rows, which stay token-only.  Upgrading a
 * database from before holders: test_sqlite_upgrade.  Real database files
 * in a mkdtemp() folder. */
#include <check.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite_internal.h"
#include "sqliteutil.h"


/* The same through SQL, read back with fence_sqlite_classify. */
static void expect_sql_stale(sqlite3 *db, const char *sql, uint64_t offered, uint64_t highest,
                             fence_stale_reason reason, const char *holder)
{
    su_again(db);
    ck_assert_int_eq(su_exec_rc(db, sql), SQLITE_CONSTRAINT);
    ck_assert_int_eq(sqlite3_extended_errcode(db), SQLITE_CONSTRAINT_TRIGGER);
    fence_stale s;
    ck_assert_int_eq(fence_sqlite_classify(db, &s), FENCE_STALE);
    ck_assert_uint_eq(s.offered, offered);
    ck_assert_uint_eq(s.highest, highest);
    ck_assert_int_eq(s.kind, FENCE_OBJECT_RESOURCE);
    ck_assert_int_eq(s.reason, reason);
    ck_assert_str_eq(s.holder, holder);
}

START_TEST(equal_token_needs_same_holder)
{
    sqlite3 *db = su_open_fenced("rule.db");
    /* First advance: recorded with its holder; again from it: admitted. */
    su_set_th(db, 34, H1);
    su_advance_ok(db, "job");
    ck_assert_str_eq(su_mark_holder(db, "job"), H1);
    su_advance_ok(db, "job");
    su_write_ok(db, "INSERT INTO fence_advance VALUES ('job')");
    /* The same token from another holder, or from none: REPEAT. */
    su_set_th(db, 34, H2);
    su_expect_advance_stale(db, "job", 34, 34, FENCE_STALE_REPEAT, H1);
    ck_assert_msg(strstr(fence_sqlite_errmsg(db), "token 34 is not newer than 34 (write "
                                                  "rejected) reason=repeat holder=" H1) != NULL,
                  "%s", fence_sqlite_errmsg(db));
    expect_sql_stale(db, "INSERT INTO fence_advance VALUES ('job')", 34, 34, FENCE_STALE_REPEAT,
                     H1);
    su_set_th(db, 34, NULL);
    su_expect_advance_stale(db, "job", 34, 34, FENCE_STALE_REPEAT, H1);
    ck_assert_uint_eq(su_mark(db, "job"), 34);
    ck_assert_str_eq(su_mark_holder(db, "job"), H1);
    /* A higher token from anyone: admitted and recorded, none included. */
    su_set_th(db, 35, NULL);
    su_advance_ok(db, "job");
    ck_assert_str_eq(su_mark_holder(db, "job"), "(none)");
    /* None vs none: admitted; a holder vs none: REPEAT, holder "". */
    su_advance_ok(db, "job");
    su_set_th(db, 35, H1);
    su_expect_advance_stale(db, "job", 35, 35, FENCE_STALE_REPEAT, "");
    ck_assert_msg(strstr(fence_sqlite_errmsg(db), "reason=repeat holder=none") != NULL, "%s",
                  fence_sqlite_errmsg(db));
    su_set_th(db, 36, H2);
    su_advance_ok(db, "job");
    ck_assert_uint_eq(su_mark(db, "job"), 36);
    ck_assert_str_eq(su_mark_holder(db, "job"), H2);
    /* Older: reason OLDER, with the mark's holder. */
    su_set_th(db, 35, H2);
    su_expect_advance_stale(db, "job", 35, 36, FENCE_STALE_OLDER, H2);
    ck_assert_msg(strstr(fence_sqlite_errmsg(db), "token 35 is older than 36 (write rejected) "
                                                  "reason=older holder=" H2) != NULL,
                  "%s", fence_sqlite_errmsg(db));
    expect_sql_stale(db, "INSERT INTO fence_advance VALUES ('job')", 35, 36, FENCE_STALE_OLDER,
                     H2);
    /* In the caller's transaction: the refusal leaves it open, to roll back. */
    su_exec_ok(db, "CREATE TABLE work(v)");
    su_set_th(db, 36, H1);
    su_exec_ok(db, "BEGIN IMMEDIATE");
    su_write_ok(db, "INSERT INTO work VALUES ('by the other 36')");
    su_expect_advance_stale(db, "job", 36, 36, FENCE_STALE_REPEAT, H2);
    su_exec_ok(db, "ROLLBACK");
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM work"), 0);
    ck_assert_uint_eq(su_mark(db, "job"), 36);
    ck_assert_str_eq(su_mark_holder(db, "job"), H2);
    /* Another resource has its own mark. */
    su_advance_ok(db, "other");
    ck_assert_str_eq(su_mark_holder(db, "other"), H1);
    sqlite3_close(db);
}
END_TEST

START_TEST(two_connections_same_token)
{
    /* The failover case: one token issued to two holders. */
    sqlite3 *a = su_open_fenced("two.db");
    sqlite3 *b = su_open_fenced("two.db");
    su_set_th(a, 7, H1);
    su_set_th(b, 7, H2);
    su_advance_ok(a, "r");
    su_expect_advance_stale(b, "r", 7, 7, FENCE_STALE_REPEAT, H1);
    su_advance_ok(a, "r");
    sqlite3_close(b);
    sqlite3_close(a);
}
END_TEST

START_TEST(sql_set_token_and_holder)
{
    sqlite3 *db = su_open_fenced("sql.db");
    ck_assert_int_eq(su_q_int(db, "SELECT fence_set_token(5, '" H1 "')"), 5);
    ck_assert_str_eq(su_q_text(db, "SELECT fence_holder()"), H1);
    char h[FENCE_HOLDER_LEN + 1];
    ck_assert_int_eq(fence_sqlite_holder(db, h), FENCE_OK);
    ck_assert_str_eq(h, H1);
    su_exec_ok(db, "INSERT INTO fence_advance VALUES ('r')");
    ck_assert_str_eq(su_mark_holder(db, "r"), H1);
    /* One argument, NULL or '': no holder. */
    ck_assert_int_eq(su_q_int(db, "SELECT fence_set_token(5)"), 5);
    ck_assert_str_eq(su_q_text(db, "SELECT fence_holder()"), "(null)");
    su_exec_ok(db, "SELECT fence_set_token(5, '" H2 "')");
    su_exec_ok(db, "SELECT fence_set_token(5, NULL)");
    ck_assert_int_eq(su_q_int(db, "SELECT fence_holder() IS NULL"), 1);
    su_exec_ok(db, "SELECT fence_set_token(5, '" H2 "')");
    su_exec_ok(db, "SELECT fence_set_token(5, '')");
    ck_assert_int_eq(su_q_int(db, "SELECT fence_holder() IS NULL"), 1);
    ck_assert_int_eq(fence_sqlite_holder(db, h), FENCE_OK);
    ck_assert_str_eq(h, "");
    expect_sql_stale(db, "INSERT INTO fence_advance VALUES ('r')", 5, 5, FENCE_STALE_REPEAT, H1);
    /* Set in C, read in SQL; token 0 with a holder keeps the holder. */
    su_set_th(db, 0, H2);
    ck_assert_str_eq(su_q_text(db, "SELECT fence_holder()"), H2);
    ck_assert_int_eq(su_q_int(db, "SELECT fence_token() IS NULL"), 1);
    ck_assert_int_eq(su_q_int(db, "SELECT fence_set_token(6, '" H2 "')"), 6);
    su_exec_ok(db, "INSERT INTO fence_advance VALUES ('r')");
    ck_assert_str_eq(su_mark_holder(db, "r"), H2);
    /* DIRECTONLY like the one-argument form; fence_holder() runs under
     * trusted_schema=OFF (the resource triggers call it). */
    su_exec_ok(db, "CREATE TABLE t(v)");
    su_exec_ok(db, "CREATE TRIGGER sneaky AFTER INSERT ON t BEGIN "
                   "SELECT fence_set_token(1000, '" H1 "'); END");
    ck_assert_int_ne(su_exec_rc(db, "INSERT INTO t VALUES (1)"), SQLITE_OK);
    ck_assert_msg(strstr(sqlite3_errmsg(db), "unsafe use of fence_set_token") != NULL, "%s",
                  sqlite3_errmsg(db));
    su_exec_ok(db, "DROP TRIGGER sneaky");
    su_exec_ok(db, "PRAGMA trusted_schema=OFF");
    su_set_th(db, 7, H1);
    su_write_ok(db, "INSERT INTO fence_advance VALUES ('r')");
    ck_assert_str_eq(su_mark_holder(db, "r"), H1);
    sqlite3_close(db);
}
END_TEST

static const char *const bad_holders[] = {
    "",                                  /* empty (C only: '' is none in SQL) */
    "0123456789abcdef0123456789abcde",   /* 31 */
    "0123456789abcdef0123456789abcdef0", /* 33 */
    "0123456789ABCDEF0123456789abcdef",  /* uppercase */
    "0123456789abcdef0123456789abcdeg",  /* not hex */
    "0123456789abcdef 123456789abcdef",  /* a space */
    "x",
};

START_TEST(malformed_holders_refused)
{
    sqlite3 *db = su_open_fenced("bad.db");
    su_set_th(db, 9, H1);
    su_advance_ok(db, "r");
    char h[FENCE_HOLDER_LEN + 1];
    uint64_t t = 1;
    for (size_t i = 0; i < sizeof bad_holders / sizeof bad_holders[0]; i++) {
        /* C: EINVAL naming the holder; token and holder cleared. */
        su_set_th(db, 9, H1);
        ck_assert_int_eq(fence_sqlite_set_token(db, 10, bad_holders[i]), FENCE_EINVAL);
        ck_assert_msg(strstr(fence_sqlite_errmsg(db), "holder") != NULL, "%s",
                      fence_sqlite_errmsg(db));
        ck_assert_int_eq(fence_sqlite_token(db, &t), FENCE_OK);
        ck_assert_uint_eq(t, 0);
        ck_assert_int_eq(fence_sqlite_holder(db, h), FENCE_OK);
        ck_assert_str_eq(h, "");
        ck_assert_int_eq(fence_sqlite_advance(db, "r", NULL), FENCE_ENOTOKEN);
        if (bad_holders[i][0] == '\0') {
            continue;
        }
        /* SQL: fence:notoken naming the holder; both cleared. */
        char *sql = sqlite3_mprintf("SELECT fence_set_token(10, %Q)", bad_holders[i]);
        su_exec_ok(db, "SELECT fence_set_token(9, '" H1 "')");
        ck_assert_int_ne(su_exec_rc(db, sql), SQLITE_OK);
        ck_assert_msg(strncmp(sqlite3_errmsg(db), "fence:notoken fence_set_token: the holder ",
                              42) == 0,
                      "%s", sqlite3_errmsg(db));
        ck_assert_int_eq(fence_sqlite_classify(db, NULL), FENCE_ENOTOKEN);
        ck_assert_int_eq(su_q_int(db, "SELECT fence_token() IS NULL AND fence_holder() IS NULL"),
                         1);
        sqlite3_free(sql);
    }
    static const char *const bad_sql[] = {
        "SELECT fence_set_token(10, 5)",
        "SELECT fence_set_token(10, x'30313233343536373839616263646566"
        "30313233343536373839616263646566')",
        "SELECT fence_set_token(10, CAST(x'3031320033' AS TEXT))",
        "SELECT fence_set_token(10, 1.5)",
        /* A bad token with a good holder clears both too. */
        "SELECT fence_set_token('007', '" H1 "')",
    };
    for (size_t i = 0; i < sizeof bad_sql / sizeof bad_sql[0]; i++) {
        su_exec_ok(db, "SELECT fence_set_token(9, '" H1 "')");
        ck_assert_msg(su_exec_rc(db, bad_sql[i]) != SQLITE_OK, "%s admitted", bad_sql[i]);
        ck_assert_msg(strncmp(sqlite3_errmsg(db), "fence:notoken fence_set_token: ", 31) == 0,
                      "%s", sqlite3_errmsg(db));
        ck_assert_int_eq(su_q_int(db, "SELECT fence_token() IS NULL AND fence_holder() IS NULL"),
                         1);
    }
    /* A token too big, with a good holder: both cleared. */
    su_set_th(db, 9, H1);
    ck_assert_int_eq(fence_sqlite_set_token(db, UINT64_MAX, H1), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_holder(db, h), FENCE_OK);
    ck_assert_str_eq(h, "");
    /* Nothing changed in the database. */
    ck_assert_uint_eq(su_mark(db, "r"), 9);
    ck_assert_str_eq(su_mark_holder(db, "r"), H1);
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM fence_resource"), 1);
    sqlite3_close(db);
}
END_TEST

START_TEST(holder_getter_bad_input)
{
    sqlite3 *db = su_open_fenced("get.db");
    char h[FENCE_HOLDER_LEN + 1];
    strcpy(h, "junk");
    ck_assert_int_eq(fence_sqlite_holder(NULL, h), FENCE_EINVAL);
    ck_assert_str_eq(h, "");
    ck_assert_msg(strstr(fence_sqlite_errmsg(NULL), "db is NULL") != NULL, "%s",
                  fence_sqlite_errmsg(NULL));
    ck_assert_int_eq(fence_sqlite_holder(db, NULL), FENCE_EINVAL);
    ck_assert_msg(strstr(fence_sqlite_errmsg(db), "holder is NULL") != NULL, "%s",
                  fence_sqlite_errmsg(db));
    strcpy(h, "junk");
    ck_assert_int_eq(fence_sqlite_holder(db, h), FENCE_OK); /* none yet */
    ck_assert_str_eq(h, "");
    ck_assert_str_eq(fence_sqlite_errmsg(db), "");
    ck_assert_int_eq(fence_sqlite_set_token(NULL, 1, H1), FENCE_EINVAL);
    sqlite3 *plain = su_open_plain("get.db");
    strcpy(h, "junk");
    ck_assert_int_eq(fence_sqlite_holder(plain, h), FENCE_ESTATE);
    ck_assert_str_eq(h, "");
    ck_assert_int_eq(fence_sqlite_set_token(plain, 1, H1), FENCE_ESTATE);
    ck_assert_int_eq(fence_sqlite_set_token(plain, 1, "bad"), FENCE_ESTATE);
    sqlite3_close(plain);
    /* Attaching again keeps the holder, as it keeps the token. */
    su_set_th(db, 3, H2);
    ck_assert_int_eq(fence_sqlite_attach(db), FENCE_OK);
    ck_assert_int_eq(fence_sqlite_holder(db, h), FENCE_OK);
    ck_assert_str_eq(h, H2);
    sqlite3_close(db);
}
END_TEST

START_TEST(direct_writes_to_marks)
{
    sqlite3 *db = su_open_fenced("direct.db");
    su_set_th(db, 40, H1);
    /* A mark's holder is the writer's own: not another's, not none. */
    su_again(db);
    ck_assert_int_ne(su_exec_rc(db, "INSERT INTO fence_resource VALUES ('x', 40, '" H2 "')"),
                     SQLITE_OK);
    ck_assert_msg(strncmp(sqlite3_errmsg(db), "fence:forbidden ", 16) == 0, "%s",
                  sqlite3_errmsg(db));
    su_again(db);
    ck_assert_int_ne(su_exec_rc(db, "INSERT INTO fence_resource(name, high_water) "
                                    "VALUES ('x', 40)"),
                     SQLITE_OK);
    su_write_ok(db, "INSERT INTO fence_resource VALUES ('x', 40, '" H1 "')");
    /* Not changed afterwards, nor raised without it. */
    su_again(db);
    ck_assert_int_ne(su_exec_rc(db, "UPDATE fence_resource SET holder = NULL"), SQLITE_OK);
    su_set_th(db, 41, H2);
    su_again(db);
    ck_assert_int_ne(su_exec_rc(db, "UPDATE fence_resource SET holder = '" H2 "'"), SQLITE_OK);
    su_again(db);
    ck_assert_int_ne(su_exec_rc(db, "UPDATE fence_resource SET high_water = 41"), SQLITE_OK);
    ck_assert_msg(strncmp(sqlite3_errmsg(db), "fence:forbidden ", 16) == 0, "%s",
                  sqlite3_errmsg(db));
    su_write_ok(db, "UPDATE fence_resource SET high_water = fence_token(), holder = fence_holder()");
    ck_assert_str_eq(su_mark_holder(db, "x"), H2);
    /* The rule holds for direct writes too. */
    su_set_th(db, 41, H1);
    expect_sql_stale(db, "UPDATE fence_resource SET high_water = 41, holder = fence_holder()", 41,
                     41, FENCE_STALE_REPEAT, H2);
    expect_sql_stale(db, "INSERT OR REPLACE INTO fence_resource VALUES ('x', 41, '" H1 "')", 41,
                     41, FENCE_STALE_REPEAT, H2);
    su_set_th(db, 40, H2);
    expect_sql_stale(db, "INSERT OR REPLACE INTO fence_resource VALUES ('x', 40, '" H2 "')", 40,
                     41, FENCE_STALE_OLDER, H2);
    ck_assert_uint_eq(su_mark(db, "x"), 41);
    ck_assert_str_eq(su_mark_holder(db, "x"), H2);
    /* Around the triggers, the column still only holds an id or NULL. */
    su_exec_ok(db, "DROP TRIGGER fence_resource_insert");
    ck_assert_int_eq(su_exec_rc(db, "INSERT INTO fence_resource VALUES ('y', 1, 'ABC')"),
                     SQLITE_CONSTRAINT);
    ck_assert_int_eq(su_exec_rc(db, "INSERT INTO fence_resource VALUES ('y', 1, '" H1 "0')"),
                     SQLITE_CONSTRAINT);
    ck_assert_int_eq(su_exec_rc(db, "INSERT INTO fence_resource VALUES ('y', 1, x'00')"),
                     SQLITE_CONSTRAINT);
    sqlite3_close(db);
}
END_TEST

/* Rows of protected tables compare tokens only: an equal token from
 * another holder is admitted there; advancing a resource in the same
 * transaction makes the write repeat-proof (docs/sqlite.md). */
START_TEST(rows_stay_token_only)
{
    sqlite3 *db = su_open_fenced("rows.db");
    su_exec_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)");
    su_write_ok(db, "INSERT INTO t VALUES (1, 'old')");
    ck_assert_int_eq(fence_sqlite_protect(db, "t", NULL), FENCE_OK);
    su_set_th(db, 34, H1);
    su_exec_ok(db, "BEGIN IMMEDIATE; INSERT INTO fence_advance VALUES ('t');"
                   "UPDATE t SET v = 'by H1'; COMMIT");
    su_set_th(db, 34, H2);
    su_write_ok(db, "UPDATE t SET v = 'by H2 alone'"); /* the row alone admits it */
    su_exec_ok(db, "BEGIN IMMEDIATE");
    expect_sql_stale(db, "INSERT INTO fence_advance VALUES ('t')", 34, 34, FENCE_STALE_REPEAT,
                     H1);
    su_exec_ok(db, "ROLLBACK");
    /* The stale description of a row never has a holder. */
    su_set_th(db, 33, H2);
    su_expect_stale(db, "UPDATE t SET v = 'by33'", 33, 34, FENCE_OBJECT_TABLE, "t");
    sqlite3_close(db);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The message parser: reason and holder                                 */
/* ------------------------------------------------------------------ */

static fence_status parse(const char *msg, fence_stale *s)
{
    size_t n = strlen(msg);
    char *copy = malloc(n + 1); /* exactly: ASan sees any read past it */
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, msg, n + 1);
    fence_status st = fence_sqlite__parse_message(copy, s);
    free(copy);
    return st;
}

START_TEST(parse_reason_and_holder)
{
    fence_stale s;
    static const struct {
        const char *msg;
        uint64_t offered, highest;
        fence_stale_reason reason;
        const char *holder;
    } cases[] = {
        {"fence:stale resource \"r\": token 7 is not newer than 7 (write rejected) "
         "reason=repeat holder=" H1, 7, 7, FENCE_STALE_REPEAT, H1},
        {"fence:stale resource \"r\": token 7 is not newer than 7 (write rejected) "
         "reason=repeat holder=none", 7, 7, FENCE_STALE_REPEAT, ""},
        {"fence:stale resource \"r\": token 6 is older than 7 (write rejected) "
         "reason=older holder=" H2, 6, 7, FENCE_STALE_OLDER, H2},
        {"fence:stale resource \"r\": token 6 is older than 7 (write rejected) holder=" H2
         " more=1", 6, 7, FENCE_STALE_OLDER, H2},
        /* The previous format still reads. */
        {"fence:stale resource \"r\": token 6 is older than 7 (write rejected)", 6, 7,
         FENCE_STALE_OLDER, ""},
        {"fence:stale table \"t\": token 6 is older than 7 (write rejected) reason=older", 6, 7,
         FENCE_STALE_OLDER, ""},
        /* Only a well-formed id, and only after the tokens. */
        {"fence:stale resource \"r\": token 6 is older than 7 (write rejected) "
         "holder=0123456789ABCDEF0123456789abcdef", 6, 7, FENCE_STALE_OLDER, ""},
        {"fence:stale resource \"r\": token 6 is older than 7 (write rejected) holder=" H1 "0",
         6, 7, FENCE_STALE_OLDER, ""},
        {"fence:stale resource \"r\": token 6 is older than 7 (write rejected) holder=" H1 "x",
         6, 7, FENCE_STALE_OLDER, ""},
        {"fence:stale resource \"r\": token 6 is older than 7 (write rejected) holder=0123", 6, 7,
         FENCE_STALE_OLDER, ""},
        {"fence:stale resource \"x holder=" H1 "\": token 6 is older than 7 (write rejected)", 6,
         7, FENCE_STALE_OLDER, ""},
        {"fence:stale resource \"r\": token 6 is older than 7 holder=" H1, 6, 0,
         FENCE_STALE_OLDER, ""},
        {"fence:stale resource \"r\": token 7 is not newer than 007 (write rejected) holder=" H1,
         7, 0, FENCE_STALE_REPEAT, ""},
        {"fence:stale resource \"r\": token 7 is newer than 7 (write rejected) holder=" H1, 0, 0,
         FENCE_STALE_OLDER, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_int_eq(parse(cases[i].msg, &s), FENCE_STALE);
        ck_assert_msg(s.offered == cases[i].offered && s.highest == cases[i].highest &&
                          s.reason == cases[i].reason && strcmp(s.holder, cases[i].holder) == 0,
                      "'%s': %llu %llu reason %d holder '%s'", cases[i].msg,
                      (unsigned long long)s.offered, (unsigned long long)s.highest, s.reason,
                      s.holder);
    }
    /* Random text from the message's pieces: the holder is "" or an id that
     * the text carries as "holder=<id>". */
    static const char *const pieces[] = {
        "fence:stale ", "resource", " \"r\"", ": token ", "7", "007", " is older than ",
        " is not newer than ", " (write rejected)", " reason=repeat", " holder=", H1, "A", "0",
        " ", "none", "\"",
    };
    const size_t np = sizeof pieces / sizeof pieces[0];
    unsigned seed = 4242;
    char buf[512];
    for (int round = 0; round < 20000; round++) {
        size_t len = (size_t)snprintf(buf, sizeof buf, "fence:stale ");
        int count = (int)(rand_r(&seed) % 14);
        for (int i = 0; i < count; i++) {
            const char *p = pieces[(size_t)rand_r(&seed) % np];
            size_t pl = strlen(p);
            if (len + pl >= sizeof buf) {
                break;
            }
            memcpy(buf + len, p, pl);
            len += pl;
        }
        buf[len] = '\0';
        ck_assert_int_eq(parse(buf, &s), FENCE_STALE);
        size_t hl = strlen(s.holder);
        ck_assert(hl == 0 || hl == FENCE_HOLDER_LEN);
        if (hl != 0) {
            char needle[64];
            snprintf(needle, sizeof needle, "holder=%s", s.holder);
            ck_assert(strstr(buf, needle) != NULL);
            ck_assert(fence__holder_problem(s.holder, hl, NULL) == NULL);
        }
    }
}
END_TEST

static Suite *holder_suite(void)
{
    Suite *s = suite_create("sqlite_holder");
    TCase *tc = tcase_create("holder");
    tcase_add_checked_fixture(tc, su_setup, su_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, equal_token_needs_same_holder);
    tcase_add_test(tc, two_connections_same_token);
    tcase_add_test(tc, sql_set_token_and_holder);
    tcase_add_test(tc, malformed_holders_refused);
    tcase_add_test(tc, holder_getter_bad_input);
    tcase_add_test(tc, direct_writes_to_marks);
    tcase_add_test(tc, rows_stay_token_only);
    tcase_add_test(tc, parse_reason_and_holder);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(holder_suite());
}
