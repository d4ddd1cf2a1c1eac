/* test_sqlite_upgrade.c -- a database from before holders (its schema:
 * tests/sqlite/schema_before_holder.sql, the previous sql/sqlite/schema.sql)
 * upgraded in place by fence_sqlite_attach(), fence_init() and
 * fence_sqlite_protect(): the holder column added, the guard triggers
 * replaced, the marks kept (recorded without a holder), atomically, also
 * inside the caller's transaction and by several connections at once.
 * Real database files in a mkdtemp() folder. */
#include <check.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sqlite_internal.h"
#include "sqliteutil.h"

static int64_t g_old_token;
static void old_fence_token(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    (void)argv;
    sqlite3_result_int64(ctx, g_old_token);
}

/* FILE with the previous schema and marks a=7, b=9 written through its own
 * triggers (fence_token() and fence_stale() stood in by the test). */
static void make_old_db(const char *file)
{
    FILE *f = fopen(SU_OLD_SCHEMA, "r");
    ck_assert_msg(f != NULL, "open %s", SU_OLD_SCHEMA);
    static char text[16384];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    sqlite3 *db = su_open_plain(file);
    su_exec_ok(db, text);
    ck_assert_int_eq(sqlite3_create_function_v2(db, "fence_token", 0, SQLITE_UTF8, NULL,
                                                old_fence_token, NULL, NULL, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_create_function_v2(db, "fence_stale", 4, SQLITE_UTF8, NULL,
                                                old_fence_token, NULL, NULL, NULL),
                     SQLITE_OK); /* named by the triggers; never reached here */
    g_old_token = 7;
    su_exec_ok(db, "INSERT INTO fence_advance VALUES ('a')");
    g_old_token = 9;
    su_exec_ok(db, "INSERT INTO fence_advance VALUES ('b')");
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM pragma_table_info('fence_resource')"), 2);
    sqlite3_close(db);
}

static int64_t holder_columns(sqlite3 *db)
{
    return su_q_int(db, "SELECT count(*) FROM pragma_table_info('fence_resource') "
                        "WHERE name = 'holder'");
}

START_TEST(upgrade_keeps_marks)
{
    make_old_db("old.db");
    sqlite3 *db = su_open_fenced("old.db");
    ck_assert_int_eq(holder_columns(db), 1);
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' "
                                  "AND sql LIKE '%fence_holder()%'"),
                     3);
    ck_assert_uint_eq(su_mark(db, "a"), 7);
    ck_assert_uint_eq(su_mark(db, "b"), 9);
    ck_assert_str_eq(su_mark_holder(db, "a"), "(none)");
    ck_assert_str_eq(su_mark_holder(db, "b"), "(none)");
    /* Its marks were recorded without a holder. */
    su_set_th(db, 7, H1);
    su_expect_advance_stale(db, "a", 7, 7, FENCE_STALE_REPEAT, "");
    su_set_th(db, 7, NULL);
    su_advance_ok(db, "a");
    su_set_th(db, 8, H1);
    su_expect_advance_stale(db, "b", 8, 9, FENCE_STALE_OLDER, "");
    su_set_th(db, 10, H1);
    su_advance_ok(db, "b");
    ck_assert_str_eq(su_mark_holder(db, "b"), H1);
    /* Attaching again, or another connection: nothing more to do. */
    ck_assert_int_eq(fence_sqlite_attach(db), FENCE_OK);
    sqlite3 *other = su_open_fenced("old.db");
    ck_assert_int_eq(holder_columns(other), 1);
    ck_assert_uint_eq(su_mark(other, "b"), 10);
    sqlite3_close(other);
    /* The upgraded column checks its values like a new one. */
    su_exec_ok(db, "DROP TRIGGER fence_resource_insert");
    ck_assert_int_eq(su_exec_rc(db, "INSERT INTO fence_resource VALUES ('y', 1, 'ABC')"),
                     SQLITE_CONSTRAINT);
    sqlite3_close(db);

    /* Inside the caller's transaction, with it; also through fence_init()
     * and fence_sqlite_protect(). */
    make_old_db("old2.db");
    db = su_open_plain("old2.db");
    su_exec_ok(db, "BEGIN IMMEDIATE");
    ck_assert_int_eq(fence_sqlite_attach(db), FENCE_OK);
    ck_assert_int_eq(holder_columns(db), 1);
    su_exec_ok(db, "ROLLBACK");
    ck_assert_int_eq(holder_columns(db), 0);
    ck_assert_uint_eq(su_mark(db, "b"), 9);
    su_exec_ok(db, "SELECT fence_init()");
    ck_assert_int_eq(holder_columns(db), 1);
    sqlite3_close(db);
    make_old_db("old3.db");
    db = su_open_plain("old3.db");
    ck_assert_int_eq(fence_sqlite__register(db, NULL), FENCE_OK); /* the extension's way in */
    su_exec_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY)");
    ck_assert_int_eq(fence_sqlite_protect(db, "t", NULL), FENCE_OK);
    ck_assert_int_eq(holder_columns(db), 1);
    ck_assert_str_eq(su_mark_holder(db, "a"), "(none)");
    sqlite3_close(db);
}
END_TEST

enum { N_UPGRADERS = 4 };
typedef struct upgrader {
    sqlite3 *db;
    pthread_barrier_t *go;
    int rc;
    char msg[256];
} upgrader;

static void *upgrade_run(void *arg)
{
    upgrader *u = arg;
    pthread_barrier_wait(u->go);
    u->rc = fence_sqlite_attach(u->db);
    snprintf(u->msg, sizeof u->msg, "%s", fence_sqlite_errmsg(u->db));
    return NULL;
}

/* Connections upgrading one file at once wait for each other; none fails. */
START_TEST(upgrade_by_many_at_once)
{
    for (int round = 0; round < 5; round++) {
        char file[32];
        snprintf(file, sizeof file, "many%d.db", round);
        make_old_db(file);
        pthread_barrier_t go;
        ck_assert_int_eq(pthread_barrier_init(&go, NULL, N_UPGRADERS), 0);
        upgrader u[N_UPGRADERS];
        pthread_t th[N_UPGRADERS];
        for (int i = 0; i < N_UPGRADERS; i++) {
            u[i] = (upgrader){.db = su_open_plain(file), .go = &go, .rc = -1};
        }
        for (int i = 0; i < N_UPGRADERS; i++) {
            ck_assert_int_eq(pthread_create(&th[i], NULL, upgrade_run, &u[i]), 0);
        }
        for (int i = 0; i < N_UPGRADERS; i++) {
            pthread_join(th[i], NULL);
        }
        pthread_barrier_destroy(&go);
        for (int i = 0; i < N_UPGRADERS; i++) {
            ck_assert_msg(u[i].rc == FENCE_OK, "round %d, connection %d: %d %s", round, i,
                          u[i].rc, u[i].msg);
            ck_assert_int_eq(holder_columns(u[i].db), 1);
            ck_assert_uint_eq(su_mark(u[i].db, "b"), 9);
            sqlite3_close(u[i].db);
        }
    }
}
END_TEST

/* A file made by the schema before the name rule (holders, but insert
 * triggers that took any non-empty text): opened, its two insert triggers
 * are replaced, its marks kept, and a 600-byte name is refused. */
START_TEST(upgrade_adds_the_name_rule)
{
    FILE *f = fopen(SU_SCHEMA_BEFORE_NAMES, "r");
    ck_assert_msg(f != NULL, "open %s", SU_SCHEMA_BEFORE_NAMES);
    static char text[16384];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    static const char rule[] = "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' "
                               "AND name IN ('fence_advance_insert', 'fence_resource_insert') "
                               "AND instr(sql, 'x''00''') > 0";
    sqlite3 *db = su_open_fenced("names_old.db");
    su_set_tok(db, 3);
    su_write_ok(db, "INSERT INTO fence_advance VALUES ('kept')");
    sqlite3_close(db);
    /* The two triggers as a file from before has them. */
    db = su_open_plain("names_old.db");
    su_exec_ok(db, "DROP TRIGGER fence_advance_insert; DROP TRIGGER fence_resource_insert");
    su_exec_ok(db, text);
    ck_assert_int_eq(su_q_int(db, rule), 0);
    sqlite3_close(db);

    db = su_open_fenced("names_old.db");
    ck_assert_int_eq(su_q_int(db, rule), 2);
    ck_assert_uint_eq(su_mark(db, "kept"), 3);
    su_set_tok(db, 4);
    char sql[700];
    snprintf(sql, sizeof sql, "INSERT INTO fence_advance VALUES ('%0600d')", 0);
    ck_assert_int_ne(su_exec_rc(db, sql), SQLITE_OK);
    ck_assert_int_eq(fence_sqlite_classify(db, NULL), FENCE_EINVAL);
    ck_assert_int_eq(su_q_int(db, "SELECT count(*) FROM fence_resource"), 1);
    sqlite3_close(db);
}
END_TEST

static Suite *upgrade_suite(void)
{
    Suite *s = suite_create("sqlite_upgrade");
    TCase *tc = tcase_create("upgrade");
    tcase_add_checked_fixture(tc, su_setup, su_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, upgrade_keeps_marks);
    tcase_add_test(tc, upgrade_adds_the_name_rule);
    tcase_add_test(tc, upgrade_by_many_at_once);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(upgrade_suite());
}
