/*
 * test_pg_api.c -- the edges of libfence_pg's C API against a real
 * PostgreSQL: bad arguments and states, fence_pg_errmsg and
 * fence_pg_sqlstate (per connection, per thread), the fence_stale
 * description, the one token grammar shared with the SQL, and the DETAIL
 * parser behind FENCE_STALE.  Own database and role per run (pgutil.c).
 */
#include "pgutil.h"

#include "common.h"      /* fence__token_parse: the grammar the SQL must match */
#include "pg_internal.h" /* fence_pg__parse_stale */

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* s is all zero / "" (what every call leaves unless it returns STALE). */
static void assert_zero(const fence_stale *s)
{
    ck_assert_uint_eq(s->offered, 0);
    ck_assert_uint_eq(s->highest, 0);
    ck_assert_int_eq(s->kind, FENCE_OBJECT_UNKNOWN);
    ck_assert_str_eq(s->object, "");
    ck_assert_str_eq(s->holder, "");
}

/* ------------------------------------------------------------------ */
/* C API: bad arguments and states                                      */
/* ------------------------------------------------------------------ */

START_TEST(api_bad_arguments)
{
    fence_stale s;
    uint64_t m = 7;
    char big[FENCE_NAME_MAX + 2];
    memset(big, 'r', sizeof big - 1);
    big[sizeof big - 1] = '\0';

    /* NULL handles: the message is the one for a NULL conn. */
    ck_assert_int_eq(fence_pg_set_token(NULL, 1, NULL, NULL, &s), FENCE_EINVAL);
    ck_assert_ptr_nonnull(strstr(fence_pg_errmsg(NULL), "conn is NULL"));
    ck_assert(strlen(fence_pg_errmsg(NULL)) > 0);
    ck_assert_int_eq(fence_pg_set_token(NULL, 1, NULL, NULL, NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_pg_send_token(NULL, 1, NULL, NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_pg_classify(NULL, NULL, &s), FENCE_EINVAL);
    ck_assert(strlen(fence_pg_errmsg(NULL)) > 0);
    ck_assert_int_eq(fence_pg_classify(NULL, NULL, NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_pg_mark(NULL, "r", &m), FENCE_EINVAL);
    ck_assert_uint_eq(m, 0);
    ck_assert_int_eq(fence_pg_install(NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_pg_prepare(NULL), FENCE_EINVAL);

    PGconn *c = db();
    /* A NULL result with a connection: the message is about that conn. */
    ck_assert_int_eq(fence_pg_classify(c, NULL, &s), FENCE_EINVAL);
    ck_assert_ptr_nonnull(strstr(fence_pg_errmsg(c), "result is NULL"));
    /* Tokens. */
    ok(c, "BEGIN");
    ck_assert_int_eq(fence_pg_set_token(c, 0, NULL, NULL, &s), FENCE_ENOTOKEN);
    ck_assert_int_eq(fence_pg_set_token(c, (uint64_t)INT64_MAX + 1, NULL, NULL, &s),
                     FENCE_ENOTOKEN);
    ck_assert_int_eq(fence_pg_set_token(c, UINT64_MAX, NULL, "r", &s), FENCE_ENOTOKEN);
    ck_assert_int_eq(fence_pg_set_token(c, FENCE_TOKEN_MAX, NULL, NULL, &s), FENCE_OK);
    ck_assert_str_eq(text1(c, "SELECT current_setting('fence.token')"), "9223372036854775807");
    /* Resource names. */
    ck_assert_int_eq(fence_pg_set_token(c, 5, NULL, "", &s), FENCE_EINVAL);
    ck_assert_int_eq(fence_pg_set_token(c, 5, NULL, big, &s), FENCE_EINVAL);
    big[FENCE_NAME_MAX] = '\0'; /* exactly the maximum */
    ck_assert_int_eq(fence_pg_set_token(c, 5, NULL, big, &s), FENCE_OK);
    ck_assert_int_eq(fence_pg_mark(c, "", &m), FENCE_EINVAL);
    ck_assert_int_eq(fence_pg_mark(c, NULL, &m), FENCE_EINVAL);
    ck_assert_int_eq(fence_pg_mark(c, "r", NULL), FENCE_EINVAL);
    ok(c, "COMMIT");
    PQfinish(c);
}
END_TEST

START_TEST(api_bad_states_and_results)
{
    fence_stale s;
    uint64_t m = 7;
    PGconn *c = db();
    /* States: not in a transaction block (would not fence), failed
     * transaction, pipeline mode. */
    ck_assert_int_eq(fence_pg_set_token(c, 5, NULL, NULL, &s), FENCE_ESTATE);
    ck_assert_ptr_nonnull(strstr(fence_pg_errmsg(c), "BEGIN"));
    ck_assert_int_eq(fence_pg_set_token(c, 5, NULL, "r", NULL), FENCE_ESTATE);
    ck_assert_int_eq(num(c, "SELECT fence.mark('r')"), 0); /* nothing advanced */
    ok(c, "BEGIN");
    run(c, "SELECT 1/0", NULL);
    ck_assert_str_eq(fence_pg_sqlstate(c), "22012");
    ck_assert_int_eq(fence_pg_set_token(c, 5, NULL, NULL, &s), FENCE_ESTATE);
    ck_assert_int_eq(fence_pg_mark(c, "r", &m), FENCE_ESTATE);
    ok(c, "ROLLBACK");
    ck_assert_int_eq(fence_pg_send_token(c, 5, NULL, NULL), FENCE_ESTATE);
    ck_assert_int_eq(PQenterPipelineMode(c), 1);
    ck_assert_int_eq(fence_pg_set_token(c, 5, NULL, NULL, &s), FENCE_ESTATE);
    ck_assert_int_eq(fence_pg_mark(c, "r", &m), FENCE_ESTATE);
    ck_assert_int_eq(fence_pg_install(c), FENCE_ESTATE);
    ck_assert_int_eq(fence_pg_prepare(c), FENCE_ESTATE);
    ck_assert_int_eq(fence_pg_send_token(c, 0, NULL, NULL), FENCE_ENOTOKEN);
    ck_assert_int_eq(fence_pg_send_token(c, 5, NULL, ""), FENCE_EINVAL);
    ck_assert_int_eq(PQexitPipelineMode(c), 1);

    /* Results: success, and errors that are not fence's. */
    PGresult *r = PQexec(c, "SELECT 1");
    ck_assert_int_eq(fence_pg_classify(c, r, &s), FENCE_OK);
    ck_assert_str_eq(fence_pg_sqlstate(c), "");
    PQclear(r);
    r = PQexec(c, "SELEKT 1");
    ck_assert_int_eq(fence_pg_classify(c, r, &s), FENCE_EDB);
    ck_assert_str_eq(fence_pg_sqlstate(c), "42601");
    ck_assert(strlen(fence_pg_errmsg(c)) > 0);
    ck_assert_uint_eq(s.offered, 0);
    PQclear(r);
    /* A 23Q01 raised by someone else (no machine-readable DETAIL). */
    r = PQexec(c, "DO $$ BEGIN RAISE EXCEPTION 'custom stale' USING ERRCODE = '23Q01'; END $$");
    ck_assert_int_eq(fence_pg_classify(c, r, &s), FENCE_STALE);
    ck_assert_uint_eq(s.offered, 0);
    ck_assert_int_eq(s.kind, FENCE_OBJECT_UNKNOWN); /* it did not say */
    ck_assert_str_eq(s.object, "");
    ck_assert_str_eq(fence_pg_errmsg(c), "custom stale");
    PQclear(r);
    r = PQexec(c, "DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = '23Q01', "
                  "DETAIL = 'offered=99999999999999999999 highest=1 kind=table object=t'; END $$");
    ck_assert_int_eq(fence_pg_classify(c, r, &s), FENCE_STALE);
    ck_assert_uint_eq(s.offered, 0); /* overflow: not parsed */
    PQclear(r);
    PQfinish(c);

    /* A database without fence.sql: a clear FENCE_EDB.  One of this run's
     * own (the server's default database may have it: other suites of the
     * same servers install there). */
    char plain_db[NAME_BUF];
    side_db("nofence", NULL, plain_db);
    PGconn *plain = connect_as(plain_db, NULL);
    ok(plain, "BEGIN");
    ck_assert_int_eq(fence_pg_set_token(plain, 5, NULL, "r", &s), FENCE_EDB);
    ck_assert_str_eq(fence_pg_sqlstate(plain), "3F000"); /* schema "fence" does not exist */
    ok(plain, "ROLLBACK");
    ck_assert_int_eq(fence_pg_mark(plain, "r", &m), FENCE_EDB);
    ck_assert_str_eq(fence_pg_sqlstate(plain), "3F000");
    PQfinish(plain);
    drop_side_db(plain_db);

    /* A connection that failed. */
    PGconn *bad = PQconnectdb("host=127.0.0.1 port=1 connect_timeout=2");
    ck_assert_int_eq(fence_pg_set_token(bad, 5, NULL, NULL, &s), FENCE_ECONN);
    ck_assert(strlen(fence_pg_errmsg(bad)) > 0);
    ck_assert_int_eq(fence_pg_send_token(bad, 5, NULL, NULL), FENCE_ECONN);
    ck_assert_int_eq(fence_pg_mark(bad, "r", &m), FENCE_ECONN);
    ck_assert_int_eq(fence_pg_install(bad), FENCE_ECONN);
    ck_assert_int_eq(fence_pg_prepare(bad), FENCE_ECONN);
    PQfinish(bad);
}
END_TEST

/* ------------------------------------------------------------------ */
/* fence_pg_errmsg and fence_pg_sqlstate                                */
/* ------------------------------------------------------------------ */

/* Two connections: neither reads the other's message. */
START_TEST(errmsg_per_connection)
{
    PGconn *a = db(), *b = db();
    ck_assert_str_eq(fence_pg_errmsg(a), "");
    ck_assert_str_eq(fence_pg_sqlstate(a), "");

    /* a fails: only a has a message. */
    ck_assert_int_eq(fence_pg_set_token(a, 5, NULL, NULL, NULL), FENCE_ESTATE);
    ck_assert_ptr_nonnull(strstr(fence_pg_errmsg(a), "BEGIN"));
    ck_assert_str_eq(fence_pg_errmsg(b), "");
    ck_assert_str_eq(fence_pg_sqlstate(b), "");
    /* A success on b leaves a's message alone. */
    ok(b, "SELECT 1");
    ck_assert_ptr_nonnull(strstr(fence_pg_errmsg(a), "BEGIN"));
    /* A success on a clears it. */
    ok(a, "SELECT 1");
    ck_assert_str_eq(fence_pg_errmsg(a), "");

    /* b fails with a server error; a never reads b's message. */
    ck_assert_int_eq(fence_pg_set_token(a, 5, NULL, NULL, NULL), FENCE_ESTATE);
    PGresult *r = PQexec(b, "SELEKT 1");
    ck_assert_int_eq(fence_pg_classify(b, r, NULL), FENCE_EDB);
    PQclear(r);
    ck_assert_str_eq(fence_pg_sqlstate(b), "42601");
    ck_assert_ptr_nonnull(strstr(fence_pg_errmsg(b), "SELEKT"));
    ck_assert_str_eq(fence_pg_errmsg(a), ""); /* one slot per thread: now b's */
    ck_assert_str_eq(fence_pg_sqlstate(a), "");
    ck_assert_str_eq(fence_pg_errmsg(NULL), "");
    /* And a success on b clears message and SQLSTATE together. */
    ok(b, "SELECT 1");
    ck_assert_str_eq(fence_pg_errmsg(b), "");
    ck_assert_str_eq(fence_pg_sqlstate(b), "");

    /* A call given no connection has a message of its own. */
    uint64_t m = 1;
    ck_assert_int_eq(fence_pg_mark(NULL, "r", &m), FENCE_EINVAL);
    ck_assert(strlen(fence_pg_errmsg(NULL)) > 0);
    ck_assert_str_eq(fence_pg_errmsg(a), "");
    ck_assert_str_eq(fence_pg_errmsg(b), "");
    PQfinish(a);
    PQfinish(b);
}
END_TEST

/* What another thread saw of a connection: before its own call, then its
 * own call's result. */
typedef struct peek {
    PGconn *c;
    uint64_t token; /* passed to fence_pg_set_token (0 or too large: refused) */
    int rounds;
    char before_msg[1024];
    char before_state[6];
    fence_status st;
    char msg[1024];
    char state[6];
    int mismatches; /* rounds where the thread read a message not its own */
} peek;

static void *peek_main(void *arg)
{
    peek *p = arg;
    snprintf(p->before_msg, sizeof p->before_msg, "%s", fence_pg_errmsg(p->c));
    snprintf(p->before_state, sizeof p->before_state, "%s", fence_pg_sqlstate(p->c));
    char want[64];
    snprintf(want, sizeof want, "token %" PRIu64 " ", p->token);
    for (int i = 0; i < p->rounds; i++) {
        p->st = fence_pg_set_token(p->c, p->token, NULL, NULL, NULL);
        if (strstr(fence_pg_errmsg(p->c), want) == NULL) {
            p->mismatches++;
        }
    }
    snprintf(p->msg, sizeof p->msg, "%s", fence_pg_errmsg(p->c));
    snprintf(p->state, sizeof p->state, "%s", fence_pg_sqlstate(p->c));
    return NULL;
}

/* The same connection, used by one thread after the other: neither reads
 * the other's message.  Then two threads on two connections at once. */
START_TEST(errmsg_per_thread)
{
    PGconn *c = db();
    PGresult *r = PQexec(c, "SELEKT 1");
    ck_assert_int_eq(fence_pg_classify(c, r, NULL), FENCE_EDB);
    PQclear(r);
    char mine[1024];
    snprintf(mine, sizeof mine, "%s", fence_pg_errmsg(c));
    ck_assert(strlen(mine) > 0);

    peek p = {.c = c, .token = 0, .rounds = 1};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, peek_main, &p), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_str_eq(p.before_msg, ""); /* this thread's failure is not its */
    ck_assert_str_eq(p.before_state, "");
    ck_assert_int_eq(p.st, FENCE_ENOTOKEN);
    ck_assert_ptr_nonnull(strstr(p.msg, "token 0 "));
    ck_assert_str_eq(p.state, "");
    /* Its failure left this thread's message and SQLSTATE alone. */
    ck_assert_str_eq(fence_pg_errmsg(c), mine);
    ck_assert_str_eq(fence_pg_sqlstate(c), "42601");

    /* Two threads, two connections, failing at the same time with
     * different messages: each only ever reads its own. */
    PGconn *d = db();
    peek p1 = {.c = c, .token = 0, .rounds = 2000};
    peek p2 = {.c = d, .token = UINT64_MAX, .rounds = 2000};
    pthread_t t1, t2;
    ck_assert_int_eq(pthread_create(&t1, NULL, peek_main, &p1), 0);
    ck_assert_int_eq(pthread_create(&t2, NULL, peek_main, &p2), 0);
    ck_assert_int_eq(pthread_join(t1, NULL), 0);
    ck_assert_int_eq(pthread_join(t2, NULL), 0);
    ck_assert_int_eq(p1.mismatches, 0);
    ck_assert_int_eq(p2.mismatches, 0);
    ck_assert_ptr_nonnull(strstr(p2.msg, "does not fit a PostgreSQL bigint"));
    ck_assert_str_eq(fence_pg_errmsg(d), "");
    ck_assert_str_eq(fence_pg_errmsg(c), mine);
    PQfinish(d);
    PQfinish(c);
}
END_TEST

/* fence_pg_sqlstate belongs to the failure fence_pg_errmsg describes. */
START_TEST(sqlstate_follows_the_failure)
{
    PGconn *c = db();
    outcome e;
    fence_stale s;
    make_table(c, "sq");
    ck_assert_int_eq(write_tok(c, 10, "UPDATE sq SET v = 1 WHERE id = 1", &e), FENCE_OK);
    ck_assert_str_eq(e.sqlstate, "");
    ck_assert_str_eq(e.message, "");

    /* Stale: 23Q01, from fence_pg_classify. */
    ok(c, "BEGIN");
    ck_assert_int_eq(fence_pg_set_token(c, 9, NULL, NULL, &s), FENCE_OK);
    PGresult *r = PQexec(c, "UPDATE sq SET v = 2 WHERE id = 1");
    ck_assert_int_eq(fence_pg_classify(c, r, &s), FENCE_STALE);
    PQclear(r);
    ck_assert_str_eq(fence_pg_sqlstate(c), "23Q01");
    ck_assert_str_eq(fence_pg_errmsg(c), "fence: stale token 9 for public.sq (highest seen 10)");
    /* A failure that is not the server's replaces both. */
    ck_assert_int_eq(fence_pg_set_token(c, 0, NULL, NULL, &s), FENCE_ENOTOKEN);
    ck_assert_str_eq(fence_pg_sqlstate(c), "");
    ck_assert_ptr_nonnull(strstr(fence_pg_errmsg(c), "token 0"));
    ok(c, "ROLLBACK");
    ck_assert_str_eq(fence_pg_sqlstate(c), "");

    /* No token: 23Q02.  A refused TRUNCATE: 23Q03. */
    ok(c, "BEGIN");
    r = PQexec(c, "UPDATE sq SET v = 3");
    ck_assert_int_eq(fence_pg_classify(c, r, &s), FENCE_ENOTOKEN);
    PQclear(r);
    ck_assert_str_eq(fence_pg_sqlstate(c), "23Q02");
    ok(c, "ROLLBACK");
    ck_assert_int_eq(run(c, "TRUNCATE sq", NULL), FENCE_EDB);
    ck_assert_str_eq(fence_pg_sqlstate(c), "23Q03");

    /* Stale through fence_pg_set_token's own advance: 23Q01 too. */
    ok(c, "BEGIN");
    ck_assert_int_eq(fence_pg_set_token(c, 10, NULL, "sq-res", &s), FENCE_OK);
    ok(c, "COMMIT");
    ok(c, "BEGIN");
    ck_assert_int_eq(fence_pg_set_token(c, 9, NULL, "sq-res", &s), FENCE_STALE);
    ck_assert_str_eq(fence_pg_sqlstate(c), "23Q01");
    ck_assert_ptr_nonnull(strstr(fence_pg_errmsg(c), "stale token 9"));
    ok(c, "ROLLBACK");
    ck_assert_str_eq(fence_pg_errmsg(c), "");
    PQfinish(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* fence_stale                                                          */
/* ------------------------------------------------------------------ */

/* Zeroed by every call that takes one, filled only on FENCE_STALE: kind
 * and object say what was checked. */
START_TEST(stale_describes_the_object)
{
    PGconn *c = db();
    fence_stale s;
    outcome e;
    make_table(c, "sd");
    ck_assert_int_eq(write_tok(c, 20, "UPDATE sd SET v = 1 WHERE id = 1", &e), FENCE_OK);

    /* A table row. */
    ok(c, "BEGIN");
    memset(&s, 0xa5, sizeof s);
    ck_assert_int_eq(fence_pg_set_token(c, 19, NULL, NULL, &s), FENCE_OK);
    assert_zero(&s);
    PGresult *r = PQexec(c, "UPDATE sd SET v = 2 WHERE id = 1");
    memset(&s, 0xa5, sizeof s);
    ck_assert_int_eq(fence_pg_classify(c, r, &s), FENCE_STALE);
    PQclear(r);
    ck_assert_uint_eq(s.offered, 19);
    ck_assert_uint_eq(s.highest, 20);
    ck_assert_int_eq(s.kind, FENCE_OBJECT_TABLE);
    ck_assert_str_eq(s.object, "public.sd");
    ck_assert_str_eq(s.holder, ""); /* rows record no holder */
    ck_assert_int_eq(s.reason, FENCE_STALE_OLDER);
    ok(c, "ROLLBACK");

    /* A resource. */
    ok(c, "BEGIN");
    memset(&s, 0xa5, sizeof s);
    ck_assert_int_eq(fence_pg_set_token(c, 30, NULL, "sd/res 1", &s), FENCE_OK);
    assert_zero(&s);
    ok(c, "COMMIT");
    ok(c, "BEGIN");
    memset(&s, 0xa5, sizeof s);
    ck_assert_int_eq(fence_pg_set_token(c, 29, NULL, "sd/res 1", &s), FENCE_STALE);
    ck_assert_uint_eq(s.offered, 29);
    ck_assert_uint_eq(s.highest, 30);
    ck_assert_int_eq(s.kind, FENCE_OBJECT_RESOURCE);
    ck_assert_str_eq(s.object, "sd/res 1");
    ck_assert_str_eq(s.holder, "");
    ck_assert_int_eq(s.reason, FENCE_STALE_OLDER);
    ok(c, "ROLLBACK");

    /* Every other outcome zeroes it: a server's ENOTOKEN, an argument
     * error, a success. */
    ok(c, "BEGIN");
    r = PQexec(c, "UPDATE sd SET v = 3");
    memset(&s, 0xa5, sizeof s);
    ck_assert_int_eq(fence_pg_classify(c, r, &s), FENCE_ENOTOKEN);
    PQclear(r);
    assert_zero(&s);
    memset(&s, 0xa5, sizeof s);
    ck_assert_int_eq(fence_pg_set_token(c, 0, NULL, NULL, &s), FENCE_ENOTOKEN);
    assert_zero(&s);
    ok(c, "ROLLBACK");
    memset(&s, 0xa5, sizeof s);
    ck_assert_int_eq(fence_pg_set_token(c, 31, NULL, NULL, &s), FENCE_ESTATE);
    assert_zero(&s);
    r = PQexec(c, "SELECT 1");
    memset(&s, 0xa5, sizeof s);
    ck_assert_int_eq(fence_pg_classify(c, r, &s), FENCE_OK);
    PQclear(r);
    assert_zero(&s);
    PQfinish(c);
}
END_TEST

/* A NULL fence_stale is fine everywhere, on the stale paths too. */
START_TEST(stale_null_is_fine)
{
    PGconn *c = db();
    outcome e;
    make_table(c, "sn");
    ck_assert_int_eq(write_tok(c, 40, "UPDATE sn SET v = 1 WHERE id = 1", &e), FENCE_OK);
    ok(c, "BEGIN");
    ck_assert_int_eq(fence_pg_set_token(c, 39, NULL, NULL, NULL), FENCE_OK);
    PGresult *r = PQexec(c, "UPDATE sn SET v = 2 WHERE id = 1");
    ck_assert_int_eq(fence_pg_classify(c, r, NULL), FENCE_STALE);
    PQclear(r);
    ck_assert_str_eq(fence_pg_sqlstate(c), "23Q01");
    ok(c, "ROLLBACK");

    ok(c, "BEGIN");
    ck_assert_int_eq(fence_pg_set_token(c, 40, NULL, "sn-res", NULL), FENCE_OK);
    ok(c, "COMMIT");
    ok(c, "BEGIN");
    ck_assert_int_eq(fence_pg_set_token(c, 39, NULL, "sn-res", NULL), FENCE_STALE);
    ck_assert_ptr_nonnull(strstr(fence_pg_errmsg(c), "stale token 39"));
    ok(c, "ROLLBACK");

    /* Raised by someone else, with and without a table: the fallback
     * path has nothing to fill either. */
    r = PQexec(c, "DO $$ BEGIN RAISE EXCEPTION 'other' USING ERRCODE = '23Q01', "
                  "TABLE = 'sn'; END $$");
    ck_assert_int_eq(fence_pg_classify(c, r, NULL), FENCE_STALE);
    fence_stale s;
    ck_assert_int_eq(fence_pg_classify(c, r, &s), FENCE_STALE);
    ck_assert_int_eq(s.kind, FENCE_OBJECT_TABLE);
    ck_assert_str_eq(s.object, "sn");
    ck_assert_uint_eq(s.offered, 0);
    PQclear(r);
    PQfinish(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* One token grammar: the library's and the SQL's                       */
/* ------------------------------------------------------------------ */

/* Every text is accepted by fence.token exactly when common.h's
 * fence__token_parse accepts it; "007" is refused by both. */
START_TEST(token_text_one_grammar)
{
    static const char *const texts[] = {
        "7", "10", "9223372036854775807", "007", "07", "0", "00", "", " 7", "7 ", "+7", "-7",
        "1.5", "1e3", "0x10", "9223372036854775808", "18446744073709551616", "٣",
    };
    PGconn *c = db();
    outcome e;
    make_table(c, "gr");
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        uint64_t v = 0;
        int lib_ok = fence__token_parse(texts[i], strlen(texts[i]), &v) == 0;
        fence_status st = write_raw(c, texts[i], "SELECT fence.current_token()", &e);
        ck_assert_msg((st == FENCE_OK) == lib_ok, "'%s': library %s, SQL %s (%s)", texts[i],
                      lib_ok ? "accepts" : "refuses", fence_status_name(st), e.message);
        if (!lib_ok) {
            ck_assert_str_eq(e.sqlstate, "23Q02");
        }
    }
    /* "007" on a write to a protected table: refused, nothing written. */
    ck_assert_int_eq(write_raw(c, "007", "UPDATE gr SET v = 7 WHERE id = 1", &e), FENCE_ENOTOKEN);
    ck_assert_str_eq(e.sqlstate, "23Q02");
    ck_assert_ptr_nonnull(strstr(e.message, "public.gr"));
    ck_assert_int_eq(num(c, "SELECT count(*) FROM gr WHERE v = 7"), 0);
    ck_assert_int_eq(write_raw(c, "7", "UPDATE gr SET v = 7 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM gr WHERE id = 1"), 7);
    uint64_t v = 0;
    ck_assert_int_eq(fence__token_parse("007", 3, &v), -1);
    PQfinish(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* fence_pg__parse_stale: the DETAIL of 23Q01                           */
/* ------------------------------------------------------------------ */

/* Parse a heap copy of exactly len bytes of text (so that ASan sees any
 * read past its end). */
static int parse_copy(const char *text, size_t len, fence_stale *out)
{
    char *d = malloc(len + 1);
    ck_assert_ptr_nonnull(d);
    memcpy(d, text, len);
    d[len] = '\0';
    int rc = fence_pg__parse_stale(d, out);
    free(d);
    return rc;
}

START_TEST(parse_stale_detail)
{
    fence_stale s;
    memset(&s, 0xa5, sizeof s);
    ck_assert_int_eq(fence_pg__parse_stale("offered=33 highest=34 kind=table object=public.orders",
                                           &s), 0);
    ck_assert_uint_eq(s.offered, 33);
    ck_assert_uint_eq(s.highest, 34);
    ck_assert_int_eq(s.kind, FENCE_OBJECT_TABLE);
    ck_assert_str_eq(s.object, "public.orders");
    ck_assert_str_eq(s.holder, "");
    ck_assert_int_eq(fence_pg__parse_stale("offered=1 highest=9223372036854775807 kind=resource "
                                           "object=jobs/42 with space=x",
                                           &s), 0);
    ck_assert_uint_eq(s.highest, FENCE_TOKEN_MAX);
    ck_assert_int_eq(s.kind, FENCE_OBJECT_RESOURCE);
    ck_assert_str_eq(s.object, "jobs/42 with space=x");
    ck_assert_int_eq(fence_pg__parse_stale("offered=1 highest=2 kind=table object=t", NULL), 0);

    /* Refused: out is all zero afterwards. */
    static const char *const bad[] = {
        "", "offered", "offered=", "offered=33", "offered=33 highest=34",
        "offered=33 highest=34 kind=", "offered=33 highest=34 kind=table",
        "offered=33 highest=34 kind=table object", "offered=33 highest=34 kind=row object=t",
        "offered=033 highest=34 kind=table object=t", "offered=-1 highest=34 kind=table object=t",
        "offered=+1 highest=34 kind=table object=t", "offered= 1 highest=34 kind=table object=t",
        "offered=33  highest=34 kind=table object=t",
        "offered=33 highest=9223372036854775808 kind=table object=t",
        "offered=99999999999999999999 highest=1 kind=table object=t",
        "Offered=33 highest=34 kind=table object=t", "written=5 expected=6 kind=table object=t",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&s, 0xa5, sizeof s);
        ck_assert_msg(parse_copy(bad[i], strlen(bad[i]), &s) == -1, "parsed '%s'", bad[i]);
        assert_zero(&s);
    }
    memset(&s, 0xa5, sizeof s);
    ck_assert_int_eq(fence_pg__parse_stale(NULL, &s), -1);
    assert_zero(&s);
    ck_assert_int_eq(fence_pg__parse_stale(NULL, NULL), -1);

    /* Every prefix of a valid line: refused until " object=" is complete,
     * never a read past the end. */
    static const char line[] = "offered=12 highest=345 kind=resource object=r/1";
    size_t need = strlen("offered=12 highest=345 kind=resource object=");
    for (size_t len = 0; len <= strlen(line); len++) {
        int rc = parse_copy(line, len, &s);
        ck_assert_msg(rc == (len >= need ? 0 : -1), "prefix of %zu bytes: %d", len, rc);
    }

    /* Version 3's tail: reason, then the recorded holder, cut off the
     * object; a tail that is not exactly that stays in the object. */
    static const struct {
        const char *text;
        const char *object;
        fence_stale_reason reason;
        const char *holder;
    } tails[] = {
        {"offered=34 highest=34 kind=resource object=jobs/42 reason=repeat holder="
         "0123456789abcdef0123456789abcdef",
         "jobs/42", FENCE_STALE_REPEAT, "0123456789abcdef0123456789abcdef"},
        {"offered=3 highest=34 kind=resource object=jobs/42 reason=older holder="
         "0123456789abcdef0123456789abcdef",
         "jobs/42", FENCE_STALE_OLDER, "0123456789abcdef0123456789abcdef"},
        {"offered=34 highest=34 kind=resource object=jobs/42 reason=repeat", "jobs/42",
         FENCE_STALE_REPEAT, ""},
        {"offered=3 highest=4 kind=table object=public.t reason=older", "public.t",
         FENCE_STALE_OLDER, ""},
        {"offered=3 highest=4 kind=resource object= reason=repeat", "", FENCE_STALE_REPEAT, ""},
        {"offered=3 highest=4 kind=resource object=a reason=older reason=repeat",
         "a reason=older", FENCE_STALE_REPEAT, ""},
        {"offered=3 highest=4 kind=resource object=a reason=repeat holder="
         "0123456789abcdef0123456789abcdef reason=older",
         "a reason=repeat holder=0123456789abcdef0123456789abcdef", FENCE_STALE_OLDER, ""},
        /* Not a tail: no reason, a bad holder, an unknown reason. */
        {"offered=3 highest=4 kind=resource object=a holder=0123456789abcdef0123456789abcdef",
         "a holder=0123456789abcdef0123456789abcdef", FENCE_STALE_OLDER, ""},
        {"offered=3 highest=4 kind=resource object=a reason=repeat holder="
         "0123456789ABCDEF0123456789abcdef",
         "a reason=repeat holder=0123456789ABCDEF0123456789abcdef", FENCE_STALE_OLDER, ""},
        {"offered=3 highest=4 kind=resource object=a reason=repeat holder="
         "0123456789abcdef0123456789abcde",
         "a reason=repeat holder=0123456789abcdef0123456789abcde", FENCE_STALE_OLDER, ""},
        {"offered=3 highest=4 kind=resource object=a reason=repeat holder="
         "0123456789abcdef0123456789abcdef0",
         "a reason=repeat holder=0123456789abcdef0123456789abcdef0", FENCE_STALE_OLDER, ""},
        {"offered=3 highest=4 kind=resource object=a reason=newer", "a reason=newer",
         FENCE_STALE_OLDER, ""},
        {"offered=3 highest=4 kind=resource object=reason=repeat", "reason=repeat",
         FENCE_STALE_OLDER, ""},
        {"offered=3 highest=4 kind=resource object=a reason=repeat ", "a reason=repeat ",
         FENCE_STALE_OLDER, ""},
    };
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        memset(&s, 0xa5, sizeof s);
        ck_assert_msg(parse_copy(tails[i].text, strlen(tails[i].text), &s) == 0, "refused '%s'",
                      tails[i].text);
        ck_assert_msg(strcmp(s.object, tails[i].object) == 0, "'%s': object '%s'", tails[i].text,
                      s.object);
        ck_assert_msg(s.reason == tails[i].reason, "'%s': reason %d", tails[i].text, s.reason);
        ck_assert_msg(strcmp(s.holder, tails[i].holder) == 0, "'%s': holder '%s'", tails[i].text,
                      s.holder);
    }
    /* Every prefix of a version-3 line: parsed once " object=" is there,
     * the object always a prefix of the rest, never a read past the end. */
    static const char line3[] = "offered=34 highest=34 kind=resource object=r/1 reason=repeat "
                                "holder=0123456789abcdef0123456789abcdef";
    size_t need3 = strlen("offered=34 highest=34 kind=resource object=");
    for (size_t len = 0; len <= strlen(line3); len++) {
        int rc = parse_copy(line3, len, &s);
        ck_assert_msg(rc == (len >= need3 ? 0 : -1), "prefix of %zu bytes: %d", len, rc);
        if (rc == 0) {
            ck_assert(strncmp(line3 + need3, s.object, strlen(s.object)) == 0);
            int tail = len == strlen(line3) || len == need3 + strlen("r/1 reason=repeat");
            ck_assert_int_eq(s.reason, tail ? FENCE_STALE_REPEAT : FENCE_STALE_OLDER);
        }
    }
    ck_assert_str_eq(s.object, "r/1");
    ck_assert_str_eq(s.holder, "0123456789abcdef0123456789abcdef");

    /* An object longer than the field: cut, NUL-terminated. */
    size_t n = 3 * sizeof s.object;
    char *longer = malloc(n + 64);
    ck_assert_ptr_nonnull(longer);
    int w = snprintf(longer, 64, "offered=1 highest=2 kind=table object=");
    memset(longer + w, 'x', n);
    longer[w + n] = '\0';
    ck_assert_int_eq(fence_pg__parse_stale(longer, &s), 0);
    ck_assert_uint_eq(strlen(s.object), sizeof s.object - 1);
    free(longer);
}
END_TEST

/* fence.use_token() and the setting fence.xact it writes: every bad
 * argument is refused with its SQLSTATE and DETAIL, and a refused call
 * changes nothing (the transaction's earlier token stays, and no later
 * write is admitted on the strength of the failed call). */
static const char *use_token_detail(PGconn *c, const char *args)
{
    static char detail[256];
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT fence.use_token(%s)", args);
    ok(c, "SAVEPOINT u");
    PGresult *r = PQexec(c, sql);
    ck_assert_msg(PQresultStatus(r) == PGRES_FATAL_ERROR, "%s was accepted", sql);
    const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    const char *d = PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL);
    ck_assert_msg(st != NULL && strcmp(st, "23Q02") == 0, "%s: SQLSTATE %s", sql, st ? st : "-");
    snprintf(detail, sizeof detail, "%s", d != NULL ? d : "");
    PQclear(r);
    ok(c, "ROLLBACK TO SAVEPOINT u");
    return detail;
}

START_TEST(use_token_bad_input)
{
    PGconn *c = db();
    outcome e;
    make_table(c, "ut");
    ok(c, "BEGIN");
    ok(c, "SELECT fence.use_token(5, '0123456789abcdef0123456789abcdef')");
    ck_assert_str_eq(use_token_detail(c, "NULL"), "reason=missing");
    ck_assert_str_eq(use_token_detail(c, "NULL, NULL"), "reason=missing");
    ck_assert_str_eq(use_token_detail(c, "0"), "reason=malformed");
    ck_assert_str_eq(use_token_detail(c, "-1"), "reason=malformed");
    ck_assert_str_eq(use_token_detail(c, "-9223372036854775808"), "reason=malformed");
    static const char *const holders[] = {
        "'0123456789ABCDEF0123456789ABCDEF'", /* uppercase */
        "'0123456789abcdef0123456789abcde'",  /* 31 */
        "'0123456789abcdef0123456789abcdef0'", /* 33 */
        "'0123456789abcdef0123456789abcdeg'", /* not hex */
        "' 123456789abcdef0123456789abcdef'",
    };
    for (size_t i = 0; i < sizeof holders / sizeof holders[0]; i++) {
        char args[128];
        snprintf(args, sizeof args, "7, %s", holders[i]);
        ck_assert_str_eq(use_token_detail(c, args), "reason=malformed setting=fence.holder");
    }
    /* Out of range for bigint: refused by the argument's type (22003 as
     * text, as libpq's parameters are; 42883 as a numeric literal). */
    fails(c, "SELECT fence.use_token('9223372036854775808')", "22003");
    ok(c, "ROLLBACK; BEGIN");
    fails(c, "SELECT fence.use_token(9223372036854775808)", "42883");
    ok(c, "ROLLBACK; BEGIN");
    fails(c, "SELECT fence.use_token('abc')", "22P02");
    ok(c, "ROLLBACK");
    ok(c, "BEGIN");
    ok(c, "SELECT fence.use_token(5, '0123456789abcdef0123456789abcdef')");
    ck_assert_str_eq(use_token_detail(c, "0"), "reason=malformed");
    /* Nothing changed: the earlier token and holder are the transaction's. */
    ck_assert_str_eq(text1(c, "SELECT current_setting('fence.token') || '/' || current_setting('fence.holder')"),
                     "5/0123456789abcdef0123456789abcdef");
    ck_assert_int_eq(run(c, "UPDATE ut SET v = 1 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM ut WHERE id = 1"), 5);
    ok(c, "COMMIT");
    /* '' and NULL holders mean none. */
    ok(c, "BEGIN; SELECT fence.use_token(6, ''); SELECT fence.use_token(6, NULL)");
    ck_assert_str_eq(text1(c, "SELECT current_setting('fence.holder')"), "");
    ok(c, "COMMIT");
    /* A token whose fence.xact is not exactly this transaction's id is
     * refused: '', malformed, another transaction's (the one before, the
     * one after), with a trailing space. */
    static const char *const xacts[] = {"''", "'abc'", "'-1'", "(pg_current_xact_id()::text::bigint - 1)::text",
                                        "(pg_current_xact_id()::text::bigint + 1)::text",
                                        "pg_current_xact_id()::text || ' '",
                                        "'0' || pg_current_xact_id()::text"};
    for (size_t i = 0; i < sizeof xacts / sizeof xacts[0]; i++) {
        char sql[512];
        snprintf(sql, sizeof sql,
                 "BEGIN; SELECT set_config('fence.token', '9', true),"
                 " set_config('fence.xact', %s, true); UPDATE ut SET v = 2 WHERE id = 1", xacts[i]);
        ck_assert_int_eq(run(c, sql, &e), FENCE_ENOTOKEN);
        ck_assert_msg(strstr(e.message, "was not set by fence.use_token() in this transaction") != NULL,
                      "fence.xact = %s: %s", xacts[i], e.message);
        ok(c, "ROLLBACK");
    }
    ck_assert_int_eq(num(c, "SELECT fence_token FROM ut WHERE id = 1"), 5);
    PQfinish(c);
}
END_TEST

static Suite *pg_api_suite(void)
{
    Suite *s = suite_create("pg_api");
    TCase *t = pg_tcase("pg_api");
    tcase_add_test(t, api_bad_arguments);
    tcase_add_test(t, api_bad_states_and_results);
    tcase_add_test(t, errmsg_per_connection);
    tcase_add_test(t, errmsg_per_thread);
    tcase_add_test(t, sqlstate_follows_the_failure);
    tcase_add_test(t, stale_describes_the_object);
    tcase_add_test(t, stale_null_is_fine);
    tcase_add_test(t, token_text_one_grammar);
    tcase_add_test(t, parse_stale_detail);
    tcase_add_test(t, use_token_bad_input);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(pg_api_suite());
}
