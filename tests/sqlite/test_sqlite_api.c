/* test_sqlite_api.c -- the C API itself: bad arguments, the state that
 * follows the connection, fence_sqlite_errmsg per connection,
 * fence_sqlite_mark, the stale description (fence_stale) and reading a
 * refusal's message back (fence_sqlite_classify and the parser under it). */
#include <check.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite_internal.h"
#include "sqliteutil.h"

START_TEST(bad_arguments)
{
    sqlite3 *db = su_open_fenced("bad.db");
    su_exec_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v)");
    char longname[FENCE_NAME_MAX + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    fence_sqlite_protect_options o;
    fence_sqlite_protect_options_init(NULL);

    ck_assert_int_eq(fence_sqlite_attach(NULL), FENCE_EINVAL);
    ck_assert_msg(fence_sqlite_errmsg(NULL)[0] != '\0', "no message");

    ck_assert_int_eq(fence_sqlite_protect(NULL, "t", NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_protect(db, NULL, NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_protect(db, "", NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_protect(db, longname, NULL), FENCE_EINVAL);
    fence_sqlite_protect_options_init(&o);
    o.column = "";
    ck_assert_int_eq(fence_sqlite_protect(db, "t", &o), FENCE_EINVAL);
    o.column = longname;
    ck_assert_int_eq(fence_sqlite_protect(db, "t", &o), FENCE_EINVAL);
    o.column = NULL;
    o.permissive = 2;
    ck_assert_int_eq(fence_sqlite_protect(db, "t", &o), FENCE_EINVAL);
    o.permissive = -1;
    ck_assert_int_eq(fence_sqlite_protect(db, "t", &o), FENCE_EINVAL);
    /* None of that touched t. */
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM pragma_table_info('t')"), 2);

    ck_assert_int_eq(fence_sqlite_unprotect(NULL, "t"), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_unprotect(db, NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_unprotect(db, ""), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_unprotect(db, longname), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_unprotect(db, "missing"), FENCE_EINVAL);

    ck_assert_int_eq(fence_sqlite_set_token(NULL, 1, NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_set_token(db, (uint64_t)INT64_MAX + 1, NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_set_token(db, UINT64_MAX, NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_set_token(db, 0, NULL), FENCE_OK); /* clears */
    uint64_t t = 1;
    ck_assert_int_eq(fence_sqlite_token(NULL, &t), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_token(db, NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_token(db, &t), FENCE_OK);
    ck_assert_int_eq(t, 0);

    ck_assert_int_eq(fence_sqlite_advance(NULL, "r", NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_advance(db, NULL, NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_advance(db, "", NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_advance(db, longname, NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_advance(db, "r", NULL), FENCE_ENOTOKEN); /* token 0 */
    su_set_tok(db, 5);
    ck_assert_int_eq(fence_sqlite_advance(db, "r", NULL), FENCE_OK);
    ck_assert_int_ne(su_exec_rc(db, "INSERT INTO fence_advance VALUES ('')"), SQLITE_OK);
    ck_assert_int_ne(su_exec_rc(db, "INSERT INTO fence_advance VALUES (NULL)"), SQLITE_OK);
    ck_assert_int_ne(su_exec_rc(db, "INSERT INTO fence_advance VALUES (42)"), SQLITE_OK);

    fence_stale e;
    ck_assert_int_eq(fence_sqlite_classify(NULL, &e), FENCE_EINVAL);
    su_exec_ok(db, "SELECT 1");
    ck_assert_int_eq(fence_sqlite_classify(db, &e), FENCE_OK);
    ck_assert_int_eq(fence_sqlite_classify(db, NULL), FENCE_OK);
    ck_assert_int_ne(su_exec_rc(db, "SELECT * FROM no_such_table"), SQLITE_OK);
    ck_assert_int_eq(fence_sqlite_classify(db, &e), FENCE_EDB);
    ck_assert_msg(strstr(fence_sqlite_errmsg(db), "no_such_table") != NULL, "%s",
                  fence_sqlite_errmsg(db));

    /* From SQL. */
    ck_assert_int_ne(su_exec_rc(db, "SELECT fence_protect(NULL)"), SQLITE_OK);
    ck_assert_int_ne(su_exec_rc(db, "SELECT fence_protect('')"), SQLITE_OK);
    ck_assert_int_ne(su_exec_rc(db, "SELECT fence_protect(42)"), SQLITE_OK);
    ck_assert_int_ne(su_exec_rc(db, "SELECT fence_protect('t', 42)"), SQLITE_OK);
    ck_assert_int_ne(su_exec_rc(db, "SELECT fence_protect('t', NULL, 'yes')"), SQLITE_OK);
    ck_assert_int_ne(su_exec_rc(db, "SELECT fence_unprotect(NULL)"), SQLITE_OK);
    ck_assert_int_ne(su_exec_rc(db, "SELECT fence_protect(printf('%.600c', 'a'))"), SQLITE_OK);

    /* Attaching again keeps the token. */
    su_set_tok(db, 5);
    ck_assert_int_eq(fence_sqlite_attach(db), FENCE_OK);
    ck_assert_int_eq(fence_sqlite_token(db, &t), FENCE_OK);
    ck_assert_int_eq(t, 5);
    sqlite3_close(db);
    sqlite3_close(NULL);
}
END_TEST

START_TEST(state_follows_connection)
{
    for (int i = 0; i < 20; i++) {
        sqlite3 *db = su_open_fenced("s.db");
        su_set_tok(db, 7);
        sqlite3_close(db);
        db = su_open_plain("s.db");
        ck_assert_int_eq(fence_sqlite_set_token(db, 7, NULL), FENCE_ESTATE);
        ck_assert_int_eq(fence_sqlite_attach(db), FENCE_OK);
        uint64_t t = 1;
        ck_assert_int_eq(fence_sqlite_token(db, &t), FENCE_OK);
        ck_assert_int_eq(t, 0);
        sqlite3_close(db);
    }
}
END_TEST

/* Raise MSG from a trigger and classify it. */
static void classify_raised(sqlite3 *db, const char *msg, uint64_t offered, uint64_t highest)
{
    char *sql = sqlite3_mprintf("DROP TRIGGER IF EXISTS temp.raiser;"
                                "CREATE TEMP TRIGGER raiser BEFORE INSERT ON temp.scratch "
                                "BEGIN SELECT RAISE(ABORT, %Q); END",
                                msg);
    ck_assert_ptr_nonnull(sql);
    su_exec_ok(db, sql);
    sqlite3_free(sql);
    ck_assert_int_eq(su_exec_rc(db, "INSERT INTO temp.scratch VALUES (1)"), SQLITE_CONSTRAINT);
    fence_stale e;
    ck_assert_int_eq(fence_sqlite_classify(db, &e), FENCE_STALE);
    ck_assert_msg(e.offered == offered && e.highest == highest,
                  "'%s': offered %llu highest %llu, want %llu %llu", msg,
                  (unsigned long long)e.offered, (unsigned long long)e.highest,
                  (unsigned long long)offered, (unsigned long long)highest);
}

/* A stamp that is not a plain integer is unknown (0), never misread. */
START_TEST(classify_reads_tokens_strictly)
{
    sqlite3 *db = su_open_fenced("real.db");
    su_exec_ok(db, "CREATE TABLE r(id INTEGER PRIMARY KEY, v TEXT)");
    su_exec_ok(db, "INSERT INTO r VALUES (1, 'a')");
    ck_assert_int_eq(fence_sqlite_protect(db, "r", NULL), FENCE_OK);
    ck_assert_int_eq(fence_sqlite_unprotect(db, "r"), FENCE_OK);
    su_exec_ok(db, "UPDATE r SET fence_token = 1e30");
    ck_assert_int_eq(fence_sqlite_protect(db, "r", NULL), FENCE_OK);
    ck_assert_str_eq(su_q_text(db, "SELECT typeof(fence_token) FROM r"), "real");
    su_set_tok(db, 5);
    ck_assert_int_eq(su_exec_rc(db, "UPDATE r SET v = 'b'"), SQLITE_CONSTRAINT);
    fence_stale e;
    ck_assert_int_eq(fence_sqlite_classify(db, &e), FENCE_STALE);
    ck_assert_msg(strstr(fence_sqlite_errmsg(db), "older than 1.0e+30") != NULL, "%s",
                  fence_sqlite_errmsg(db));
    ck_assert_uint_eq(e.offered, 5);
    ck_assert_uint_eq(e.highest, 0);
    ck_assert_str_eq(e.object, "r");

    su_exec_ok(db, "CREATE TEMP TABLE scratch(x)");
    static const char pre[] = "fence:stale table \"x\": token ";
    static const struct {
        const char *tail;
        uint64_t offered, highest;
    } cases[] = {
        {"5 is older than 7 (write rejected)", 5, 7},
        {"5 is older than 9223372036854775807 (write rejected)", 5, INT64_MAX},
        {"5 is older than 1.0e+30 (write rejected)", 5, 0},
        {"5 is older than 12abc (write rejected)", 5, 0},
        {"5 is older than 9223372036854775808 (write rejected)", 5, 0},
        {"5 is older than 99999999999999999999 (write rejected)", 5, 0},
        {"5 is older than -7 (write rejected)", 5, 0},
        {"5 is older than  7 (write rejected)", 5, 0},
        {"5 is older than +7 (write rejected)", 5, 0},
        {"5 is older than 'abc' (write rejected)", 5, 0},
        {"5 is older than 7", 5, 0},
        {"5.5 is older than 7 (write rejected)", 0, 0},
        {"-5 is older than 7 (write rejected)", 0, 0},
        {"99999999999999999999 is older than 7 (write rejected)", 0, 0},
        {"NULL is older than 7 (write rejected)", 0, 0},
        /* One grammar: no leading zero or sign in either token. */
        {"5 is older than 007 (write rejected)", 5, 0},
        {"5 is older than 07 (write rejected)", 5, 0},
        {"007 is older than 7 (write rejected)", 0, 0},
        {"+5 is older than 7 (write rejected)", 0, 0},
        {" 5 is older than 7 (write rejected)", 0, 0},
        {"5 is older than 0 (write rejected)", 5, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s%s", pre, cases[i].tail);
        classify_raised(db, msg, cases[i].offered, cases[i].highest);
    }
    sqlite3_close(db);
}
END_TEST

/* ------------------------------------------------------------------ */
/* fence_sqlite_errmsg(db): per connection (per thread: test_sqlite_race) */
/* ------------------------------------------------------------------ */

START_TEST(errmsg_per_connection)
{
    sqlite3 *a = su_open_fenced("a.db");
    sqlite3 *b = su_open_fenced("b.db");
    sqlite3 *never = su_open_plain("c.db");
    ck_assert_str_eq(fence_sqlite_errmsg(a), "");
    ck_assert_str_eq(fence_sqlite_errmsg(never), "");
    ck_assert_ptr_nonnull(fence_sqlite_errmsg(NULL));

    /* A failure on a is a's message only. */
    ck_assert_int_eq(fence_sqlite_protect(a, "missing_a", NULL), FENCE_EINVAL);
    ck_assert_msg(strstr(fence_sqlite_errmsg(a), "missing_a") != NULL, "%s",
                  fence_sqlite_errmsg(a));
    ck_assert_str_eq(fence_sqlite_errmsg(b), "");
    ck_assert_str_eq(fence_sqlite_errmsg(NULL), "");
    /* A success on b leaves it; a success on a clears it. */
    ck_assert_int_eq(fence_sqlite_set_token(b, 5, NULL), FENCE_OK);
    ck_assert_msg(strstr(fence_sqlite_errmsg(a), "missing_a") != NULL, "%s",
                  fence_sqlite_errmsg(a));
    ck_assert_int_eq(fence_sqlite_set_token(a, 5, NULL), FENCE_OK);
    ck_assert_str_eq(fence_sqlite_errmsg(a), "");

    /* Never attached: the message says what to do. */
    ck_assert_int_eq(fence_sqlite_set_token(never, 1, NULL), FENCE_ESTATE);
    ck_assert_msg(strstr(fence_sqlite_errmsg(never), "fence_sqlite_attach") != NULL, "%s",
                  fence_sqlite_errmsg(never));
    ck_assert_str_eq(fence_sqlite_errmsg(a), "");
    /* No db at all: the message is about NULL. */
    uint64_t t = 0;
    ck_assert_int_eq(fence_sqlite_token(NULL, &t), FENCE_EINVAL);
    ck_assert_msg(strstr(fence_sqlite_errmsg(NULL), "db is NULL") != NULL, "%s",
                  fence_sqlite_errmsg(NULL));
    ck_assert_str_eq(fence_sqlite_errmsg(never), "");

    /* classify: SQLite's message on a refusal, cleared when there is none. */
    ck_assert_int_ne(su_exec_rc(b, "SELECT * FROM no_such_table_b"), SQLITE_OK);
    ck_assert_int_eq(fence_sqlite_classify(b, NULL), FENCE_EDB);
    ck_assert_msg(strstr(fence_sqlite_errmsg(b), "no_such_table_b") != NULL, "%s",
                  fence_sqlite_errmsg(b));
    su_exec_ok(b, "SELECT 1");
    ck_assert_int_eq(fence_sqlite_classify(b, NULL), FENCE_OK);
    ck_assert_str_eq(fence_sqlite_errmsg(b), "");
    /* An advance refused as stale keeps both tokens in the message. */
    su_set_tok(b, 9);
    ck_assert_int_eq(fence_sqlite_advance(b, "r", NULL), FENCE_OK);
    su_set_tok(b, 8);
    ck_assert_int_eq(fence_sqlite_advance(b, "r", NULL), FENCE_STALE);
    ck_assert_msg(strstr(fence_sqlite_errmsg(b), "token 8 is older than 9") != NULL, "%s",
                  fence_sqlite_errmsg(b));
    sqlite3_close(never);
    sqlite3_close(b);
    sqlite3_close(a);
}
END_TEST

/* ------------------------------------------------------------------ */
/* fence_sqlite_mark                                                      */
/* ------------------------------------------------------------------ */

START_TEST(mark_reads_the_high_water)
{
    sqlite3 *db = su_open_fenced("mark.db");
    uint64_t m = 99;
    ck_assert_int_eq(fence_sqlite_mark(db, "job", &m), FENCE_OK);
    ck_assert_uint_eq(m, 0); /* never advanced */
    su_set_tok(db, 34);
    ck_assert_int_eq(fence_sqlite_advance(db, "job", NULL), FENCE_OK);
    ck_assert_int_eq(fence_sqlite_mark(db, "job", &m), FENCE_OK);
    ck_assert_uint_eq(m, 34);
    /* A stale advance changes nothing; another resource has its own. */
    su_set_tok(db, 33);
    ck_assert_int_eq(fence_sqlite_advance(db, "job", NULL), FENCE_STALE);
    ck_assert_int_eq(fence_sqlite_mark(db, "job", &m), FENCE_OK);
    ck_assert_uint_eq(m, 34);
    ck_assert_str_eq(fence_sqlite_errmsg(db), "");
    ck_assert_int_eq(fence_sqlite_mark(db, "other", &m), FENCE_OK);
    ck_assert_uint_eq(m, 0);
    /* Inside the caller's transaction: it sees the transaction's own
     * advance, which rolls back with it. */
    su_set_tok(db, 40);
    su_exec_ok(db, "BEGIN IMMEDIATE");
    ck_assert_int_eq(fence_sqlite_advance(db, "job", NULL), FENCE_OK);
    ck_assert_int_eq(fence_sqlite_mark(db, "job", &m), FENCE_OK);
    ck_assert_uint_eq(m, 40);
    su_exec_ok(db, "ROLLBACK");
    ck_assert_int_eq(fence_sqlite_mark(db, "job", &m), FENCE_OK);
    ck_assert_uint_eq(m, 34);
    /* Another connection reads the same mark; names are bound. */
    sqlite3 *other = su_open_fenced("mark.db");
    ck_assert_int_eq(fence_sqlite_mark(other, "job", &m), FENCE_OK);
    ck_assert_uint_eq(m, 34);
    const char *evil = "job' OR 1=1; --";
    ck_assert_int_eq(fence_sqlite_mark(other, evil, &m), FENCE_OK);
    ck_assert_uint_eq(m, 0);
    sqlite3_close(other);

    /* Bad arguments: refused, *mark 0. */
    char longname[FENCE_NAME_MAX + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    m = 7;
    ck_assert_int_eq(fence_sqlite_mark(NULL, "job", &m), FENCE_EINVAL);
    ck_assert_uint_eq(m, 0);
    m = 7;
    ck_assert_int_eq(fence_sqlite_mark(db, NULL, &m), FENCE_EINVAL);
    ck_assert_uint_eq(m, 0);
    ck_assert_int_eq(fence_sqlite_mark(db, "", &m), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_mark(db, longname, &m), FENCE_EINVAL);
    ck_assert_int_eq(fence_sqlite_mark(db, "job", NULL), FENCE_EINVAL);
    ck_assert_msg(strstr(fence_sqlite_errmsg(db), "mark is NULL") != NULL, "%s",
                  fence_sqlite_errmsg(db));
    sqlite3 *plain = su_open_plain("mark.db");
    ck_assert_int_eq(fence_sqlite_mark(plain, "job", &m), FENCE_ESTATE);
    sqlite3_close(plain);

    /* A mark written around the guard triggers that is not a token. */
    su_exec_ok(db, "DROP TRIGGER fence_resource_insert");
    su_exec_ok(db, "INSERT INTO fence_resource(name, high_water) VALUES ('bad', 'x'), ('neg', -1)");
    m = 7;
    ck_assert_int_eq(fence_sqlite_mark(db, "bad", &m), FENCE_EDB);
    ck_assert_uint_eq(m, 0);
    ck_assert_msg(strstr(fence_sqlite_errmsg(db), "not a token") != NULL, "%s",
                  fence_sqlite_errmsg(db));
    ck_assert_int_eq(fence_sqlite_mark(db, "neg", &m), FENCE_EDB);
    sqlite3_close(db);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The stale description                                                 */
/* ------------------------------------------------------------------ */

static int all_zero(const fence_stale *s)
{
    static const fence_stale zero;
    return memcmp(s, &zero, sizeof zero) == 0;
}

START_TEST(stale_description)
{
    /* A table: kind TABLE, the name as stored (not as given), unquoted. */
    sqlite3 *db = su_open_fenced("desc.db");
    su_exec_ok(db, "CREATE TABLE \"My \"\"Orders\"\"\"(id INTEGER PRIMARY KEY, v TEXT)");
    su_exec_ok(db, "INSERT INTO \"My \"\"Orders\"\"\" VALUES (1, 'a')");
    ck_assert_int_eq(fence_sqlite_protect(db, "my \"orders\"", NULL), FENCE_OK);
    su_tok_exec_ok(db, 12, "UPDATE \"My \"\"Orders\"\"\" SET v = 'b'");
    su_expect_stale(db, "UPDATE \"My \"\"Orders\"\"\" SET v = 'c'", 11, 12, FENCE_OBJECT_TABLE,
                    "My \"Orders\"");
    fence_stale s;
    memset(&s, 0xab, sizeof s);
    ck_assert_int_eq(fence_sqlite_classify(db, &s), FENCE_STALE);
    ck_assert_int_eq(s.kind, FENCE_OBJECT_TABLE);
    ck_assert_str_eq(s.object, "My \"Orders\"");
    ck_assert_str_eq(s.holder, "");
    /* NULL is fine. */
    ck_assert_int_eq(fence_sqlite_classify(db, NULL), FENCE_STALE);

    /* A resource: kind RESOURCE, through SQL and through the C API. */
    su_set_tok(db, 20);
    ck_assert_int_eq(fence_sqlite_advance(db, "nightly", NULL), FENCE_OK);
    su_set_tok(db, 19);
    su_expect_stale(db, "INSERT INTO fence_advance VALUES ('nightly')", 19, 20,
                    FENCE_OBJECT_RESOURCE, "nightly");
    memset(&s, 0xab, sizeof s);
    su_set_tok(db, 19);
    ck_assert_int_eq(fence_sqlite_advance(db, "nightly", &s), FENCE_STALE);
    ck_assert_uint_eq(s.offered, 19);
    ck_assert_uint_eq(s.highest, 20);
    ck_assert_int_eq(s.kind, FENCE_OBJECT_RESOURCE);
    ck_assert_str_eq(s.object, "nightly");
    ck_assert_str_eq(s.holder, "");
    su_set_tok(db, 19);
    ck_assert_int_eq(fence_sqlite_advance(db, "nightly", NULL), FENCE_STALE);

    /* Zeroed whenever given, filled only on FENCE_STALE. */
    memset(&s, 0xab, sizeof s);
    su_set_tok(db, 25);
    ck_assert_int_eq(fence_sqlite_advance(db, "nightly", &s), FENCE_OK);
    ck_assert(all_zero(&s));
    memset(&s, 0xab, sizeof s);
    ck_assert_int_eq(fence_sqlite_classify(db, &s), FENCE_OK);
    ck_assert(all_zero(&s));
    su_set_tok(db, 0);
    memset(&s, 0xab, sizeof s);
    ck_assert_int_eq(fence_sqlite_advance(db, "nightly", &s), FENCE_ENOTOKEN);
    ck_assert(all_zero(&s));
    su_expect_notoken(db, "INSERT INTO fence_advance VALUES ('nightly')");
    memset(&s, 0xab, sizeof s);
    ck_assert_int_eq(fence_sqlite_classify(db, &s), FENCE_ENOTOKEN);
    ck_assert(all_zero(&s));
    ck_assert_int_ne(su_exec_rc(db, "SELECT * FROM no_such_table"), SQLITE_OK);
    memset(&s, 0xab, sizeof s);
    ck_assert_int_eq(fence_sqlite_classify(db, &s), FENCE_EDB);
    ck_assert(all_zero(&s));
    memset(&s, 0xab, sizeof s);
    ck_assert_int_eq(fence_sqlite_classify(NULL, &s), FENCE_EINVAL);
    ck_assert(all_zero(&s));
    memset(&s, 0xab, sizeof s);
    ck_assert_int_eq(fence_sqlite_advance(db, "", &s), FENCE_EINVAL);
    ck_assert(all_zero(&s));
    memset(&s, 0xab, sizeof s);
    ck_assert_int_eq(fence_sqlite_advance(NULL, "nightly", &s), FENCE_EINVAL);
    ck_assert(all_zero(&s));

    /* The longest name, all quotes (doubled in the message): it fits. */
    char name[FENCE_NAME_MAX + 1];
    for (size_t i = 0; i < FENCE_NAME_MAX; i++) {
        name[i] = i % 2 ? '"' : 'q';
    }
    name[FENCE_NAME_MAX] = '\0';
    char *create = sqlite3_mprintf("CREATE TABLE \"%w\"(id INTEGER PRIMARY KEY, v)", name);
    char *insert = sqlite3_mprintf("INSERT INTO \"%w\"(id, v) VALUES (1, 0)", name);
    char *update = sqlite3_mprintf("UPDATE \"%w\" SET v = 1", name);
    su_exec_ok(db, create);
    ck_assert_int_eq(fence_sqlite_protect(db, name, NULL), FENCE_OK);
    su_set_tok(db, 3);
    su_exec_ok(db, insert);
    su_set_tok(db, 2);
    su_expect_stale(db, update, 2, 3, FENCE_OBJECT_TABLE, name);
    sqlite3_free(insert);
    sqlite3_free(update);
    sqlite3_free(create);
    sqlite3_close(db);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The message parser (fence_sqlite__parse_message, the fuzzer's entry)  */
/* ------------------------------------------------------------------ */

/* Parse a heap copy of exactly strlen(msg) + 1 bytes (so that ASan sees
 * any read past the end) and check what every result must satisfy. */
static fence_status parse_copy(const char *msg, fence_stale *out)
{
    size_t n = strlen(msg);
    char *copy = malloc(n + 1);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, msg, n + 1);
    fence_status st = fence_sqlite__parse_message(copy, out);
    free(copy);
    ck_assert(st == FENCE_STALE || st == FENCE_ENOTOKEN || st == FENCE_EDB);
    if (out != NULL) {
        ck_assert_uint_lt(strnlen(out->object, sizeof out->object), sizeof out->object);
        ck_assert_str_eq(out->holder, "");
        ck_assert_uint_le(out->offered, FENCE_TOKEN_MAX);
        ck_assert_uint_le(out->highest, FENCE_TOKEN_MAX);
        if (st != FENCE_STALE) {
            ck_assert(all_zero(out));
        }
    }
    return st;
}

START_TEST(parse_message_any_text)
{
    fence_stale s;
    ck_assert_int_eq(fence_sqlite__parse_message(NULL, &s), FENCE_EDB);
    ck_assert(all_zero(&s));
    ck_assert_int_eq(fence_sqlite__parse_message(NULL, NULL), FENCE_EDB);
    ck_assert_int_eq(parse_copy("", &s), FENCE_EDB);
    ck_assert_int_eq(parse_copy("fence:stale", &s), FENCE_EDB);
    ck_assert_int_eq(parse_copy("fence:stale ", &s), FENCE_STALE);
    ck_assert(all_zero(&s));
    ck_assert_int_eq(parse_copy("fence:stale table", &s), FENCE_STALE);
    ck_assert_int_eq(s.kind, FENCE_OBJECT_UNKNOWN);
    ck_assert_int_eq(parse_copy("fence:stale table \"", &s), FENCE_STALE);
    ck_assert_int_eq(s.kind, FENCE_OBJECT_TABLE);
    ck_assert_str_eq(s.object, "");
    ck_assert_int_eq(parse_copy("fence:stale table \"unterminated", &s), FENCE_STALE);
    ck_assert_str_eq(s.object, "unterminated");
    ck_assert_int_eq(parse_copy("fence:stale table \"a\"\"", &s), FENCE_STALE);
    ck_assert_str_eq(s.object, "a\"");
    ck_assert_int_eq(parse_copy("fence:stale resource \"r\": token 4 is older than ", &s),
                     FENCE_STALE);
    ck_assert_int_eq(s.kind, FENCE_OBJECT_RESOURCE);
    ck_assert_uint_eq(s.offered, 4);
    ck_assert_uint_eq(s.highest, 0);
    ck_assert_int_eq(parse_copy("fence:stale resource: token 4 is older than 5 (write rejected)",
                                &s),
                     FENCE_STALE);
    ck_assert_int_eq(s.kind, FENCE_OBJECT_RESOURCE);
    ck_assert_str_eq(s.object, "");
    ck_assert_uint_eq(s.offered, 4);
    ck_assert_uint_eq(s.highest, 5);
    ck_assert_int_eq(parse_copy("fence:stale thing \"x\": token 4 is older than 5 (write "
                                "rejected)",
                                &s),
                     FENCE_STALE);
    ck_assert_int_eq(s.kind, FENCE_OBJECT_UNKNOWN);
    ck_assert_str_eq(s.object, "");
    ck_assert_int_eq(parse_copy("fence:notoken table \"t\": no fencing token", &s),
                     FENCE_ENOTOKEN);
    ck_assert_int_eq(parse_copy("fence:forbidden table \"t\"", &s), FENCE_EDB);
    ck_assert_int_eq(parse_copy("no such function: fence_token", NULL), FENCE_EDB);
    ck_assert_int_eq(parse_copy("fence:stale table \"t\": token 1 is older than 2 (write "
                                "rejected)",
                                NULL),
                     FENCE_STALE);

    /* A name longer than the object field: cut to fit, terminated. */
    size_t big = 3 * sizeof s.object;
    char *msg = malloc(big + 64);
    ck_assert_ptr_nonnull(msg);
    int n = snprintf(msg, 64, "fence:stale table \"");
    memset(msg + n, 'x', big);
    snprintf(msg + n + big, 64, "\": token 1 is older than 2 (write rejected)");
    ck_assert_int_eq(parse_copy(msg, &s), FENCE_STALE);
    ck_assert_uint_eq(strlen(s.object), sizeof s.object - 1);
    ck_assert_uint_eq(s.offered, 1);
    ck_assert_uint_eq(s.highest, 2);
    free(msg);

    /* Random text built from the message's own pieces. */
    static const char *const pieces[] = {
        "fence:stale ", "fence:notoken ", "table", "resource", " ", "\"", "\"\"", ":",
        ": token ", " is older than ", " (write rejected)", "0", "7", "007", "-", "+",
        "9223372036854775807", "9223372036854775808", "99999999999999999999", "1.0e+30",
        "x", "\n",
    };
    const size_t npieces = sizeof pieces / sizeof pieces[0];
    unsigned seed = 12345;
    char buf[512];
    for (int round = 0; round < 20000; round++) {
        size_t len = 0;
        int count = (int)(rand_r(&seed) % 12);
        if (rand_r(&seed) % 2) {
            len += (size_t)snprintf(buf, sizeof buf, "fence:stale ");
        }
        for (int i = 0; i < count; i++) {
            const char *p = pieces[(size_t)rand_r(&seed) % npieces];
            size_t pl = strlen(p);
            if (len + pl >= sizeof buf) {
                break;
            }
            memcpy(buf + len, p, pl);
            len += pl;
        }
        buf[len] = '\0';
        parse_copy(buf, (round % 7) == 0 ? NULL : &s);
    }
}
END_TEST

static Suite *api_suite(void)
{
    Suite *s = suite_create("sqlite_api");
    TCase *tc = tcase_create("api");
    tcase_add_checked_fixture(tc, su_setup, su_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, state_follows_connection);
    tcase_add_test(tc, classify_reads_tokens_strictly);
    tcase_add_test(tc, errmsg_per_connection);
    tcase_add_test(tc, mark_reads_the_high_water);
    tcase_add_test(tc, stale_description);
    tcase_add_test(tc, parse_message_any_text);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(api_suite());
}
