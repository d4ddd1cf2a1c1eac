/*
 * retrofit_lock_version.c -- putting a table whose application keeps a
 * Rails-style lock_version (an ORM's optimistic-locking counter) under
 * fencing, in PostgreSQL, with one call -- and the counter keeps its
 * meaning.
 *
 * What it shows, step by step (and checks each step; exit 1 if one does not
 * behave as described):
 *   1. An existing table "orders" with an integer lock_version column that
 *      holds NULLs and values, and the application's optimistic-locking
 *      UPDATE ... SET lock_version = lock_version + 1
 *                 WHERE id = $id AND lock_version = $old.
 *   2. The retrofit: SELECT fence.protect('orders').  fence adds a column
 *      of its own, fence_token (bigint NOT NULL DEFAULT 0, 0 = never
 *      fenced), beside lock_version, and triggers check and stamp it on
 *      every write.  lock_version stays exactly as it was: fence never
 *      writes it.  SELECT fence.protect('orders', 'lock_version') -- which
 *      fence before version 6 offered, and which turned the counter into
 *      the token column -- is refused (22023), its HINT naming the call
 *      above.
 *   3. The same UPDATE, unchanged, in a transaction carrying the lease's
 *      token (fence_pg_set_token): it works as it did, lock_version goes
 *      up by one on every write (two writes of one holder: two versions),
 *      and WHERE lock_version = $old still detects a concurrent change (0
 *      rows).  What changes: fence_token is the writer's token, and a write
 *      without a token is refused (fence.set_mode(..., 'permissive')
 *      admits those during a migration).  No counter needs raising: the
 *      new column starts at 0.
 *   4. What fencing adds: holder A's lease is over and holder B (a newer
 *      token) writes a row; A, still running, loads that row after B's
 *      write -- so A's lock_version is the current one and the optimistic
 *      check alone would let it through -- and writes it with its old
 *      token: refused (23Q01, FENCE_STALE).  A blind write (no version
 *      check) likewise.
 * A table retrofitted the old way (its lock_version holds tokens) moves to
 * this with SELECT fence.migrate_version_column('orders'), which carries
 * every stamp over (docs/postgres.md).
 *
 * Usage: retrofit_lock_version [--redis URL] [--pg CONNINFO] [--table NAME] [--keep]
 *   Redis: --redis, $FENCE_REDIS_URL or $FENCE_TEST_REDIS_URL.
 *   PostgreSQL: --pg, $FENCE_TEST_PG_CONNINFO or libpq's PG* variables.
 *   The table (default retrofit_orders) is dropped and created afresh, and
 *   dropped at the end unless --keep.
 * Last line: RESULT retrofit=ok|failed checks=N failed=M.
 * Exit status: 0 all as described, 1 a step did not, 2 errors, 64 usage.
 */
#include "ex_env.h"
#include "fence.h"
#include "fence_pg.h"

#include <inttypes.h>
#include <libpq-fe.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static PGconn *g_conn;
static char *g_table; /* quoted identifier */
static int g_checks, g_failed;

static void quiet(void *arg, const char *msg)
{
    (void)arg;
    (void)msg;
}

/* Record one expectation: print it when it fails. */
static void check(int ok, const char *what)
{
    g_checks++;
    if (!ok) {
        g_failed++;
        printf("   UNEXPECTED: %s\n", what);
    }
}

/* Run SQL built from fmt (%s placeholders get the table); die on error. */
__attribute__((format(printf, 1, 2))) static PGresult *sql(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    PGresult *r = PQexec(g_conn, buf);
    if (fence_pg_classify(g_conn, r, NULL) != FENCE_OK) {
        fprintf(stderr, "retrofit_lock_version: %s: %s\n", buf, fence_pg_errmsg(g_conn));
        PQclear(r);
        PQfinish(g_conn);
        exit(2);
    }
    return r;
}

/* Run a statement with one parameter, $1 = the table; die on error. */
static PGresult *sql_table_param(const char *stmt)
{
    const char *param = g_table;
    PGresult *r = PQexecParams(g_conn, stmt, 1, NULL, &param, NULL, NULL, 0);
    if (fence_pg_classify(g_conn, r, NULL) != FENCE_OK) {
        fprintf(stderr, "retrofit_lock_version: %s: %s\n", stmt, fence_pg_errmsg(g_conn));
        PQclear(r);
        PQfinish(g_conn);
        exit(2);
    }
    return r;
}

static void sql_void(const char *s)
{
    PQclear(sql("%s", s));
}

/* The rows, with fence_token once the table has it. */
static void show_rows(void)
{
    PGresult *r = sql("SELECT id, item, qty, lock_version, to_jsonb(o) ->> 'fence_token' FROM %s o"
                      " ORDER BY id",
                      g_table);
    printf("   ");
    for (int i = 0; i < PQntuples(r); i++)
        printf("%sid=%s %s qty=%s lock_version=%s%s%s", i ? " | " : "", PQgetvalue(r, i, 0),
               PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
               PQgetisnull(r, i, 3) ? "NULL" : PQgetvalue(r, i, 3),
               PQgetisnull(r, i, 4) ? "" : " fence_token=", PQgetvalue(r, i, 4));
    printf("\n");
    PQclear(r);
}

/* Column col of row id (-1 for NULL or no row). */
static long long column_of(const char *col, int id)
{
    PGresult *r = sql("SELECT %s FROM %s WHERE id = %d", col, g_table, id);
    long long v = PQntuples(r) == 1 && !PQgetisnull(r, 0, 0) ? strtoll(PQgetvalue(r, 0, 0), NULL, 10)
                                                             : -1;
    PQclear(r);
    return v;
}

static long long version_of(int id)
{
    return column_of("lock_version", id);
}

static long long stamp_of(int id)
{
    return column_of("fence_token", id);
}

/*
 * The application's optimistic-locking UPDATE, word for word the same
 * before and after the retrofit.  token 0: no token (as before).  Returns
 * the fence status; *rows gets the rows updated.
 */
static int app_update(int id, int qty, long long old_version, uint64_t token, int *rows,
                      fence_stale *e)
{
    char q[16], i[16], v[32], stmt[256];
    snprintf(q, sizeof q, "%d", qty);
    snprintf(i, sizeof i, "%d", id);
    snprintf(v, sizeof v, "%lld", old_version);
    snprintf(stmt, sizeof stmt,
             "UPDATE %s SET qty = $1, lock_version = lock_version + 1"
             " WHERE id = $2 AND lock_version = $3",
             g_table);
    const char *params[3] = {q, i, v};
    *rows = 0;
    sql_void("BEGIN");
    int rc = FENCE_OK;
    if (token != 0)
        rc = fence_pg_set_token(g_conn, token, NULL, NULL, e);
    if (rc == FENCE_OK) {
        PGresult *r = PQexecParams(g_conn, stmt, 3, NULL, params, NULL, NULL, 0);
        rc = fence_pg_classify(g_conn, r, e);
        if (rc == FENCE_OK)
            *rows = atoi(PQcmdTuples(r));
        PQclear(r);
    }
    sql_void(rc == FENCE_OK ? "COMMIT" : "ROLLBACK");
    return rc;
}

/* A blind write (no version check) carrying token. */
static int blind_update(int id, int qty, uint64_t token, fence_stale *e)
{
    char stmt[256];
    snprintf(stmt, sizeof stmt, "UPDATE %s SET qty = %d WHERE id = %d", g_table, qty, id);
    sql_void("BEGIN");
    int rc = fence_pg_set_token(g_conn, token, NULL, NULL, e);
    if (rc == FENCE_OK) {
        PGresult *r = PQexec(g_conn, stmt);
        rc = fence_pg_classify(g_conn, r, e);
        PQclear(r);
    }
    sql_void(rc == FENCE_OK ? "COMMIT" : "ROLLBACK");
    return rc;
}

static int usage(FILE *f)
{
    fputs("usage: retrofit_lock_version [--redis URL] [--pg CONNINFO] [--table NAME] [--keep]\n", f);
    return f == stdout ? 0 : 64;
}

int main(int argc, char **argv)
{
    const char *url = NULL, *conninfo = NULL, *table = "retrofit_orders";
    int keep = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return usage(stdout);
        if (strcmp(argv[i], "--keep") == 0) {
            keep = 1;
            continue;
        }
        if (i + 1 >= argc)
            return usage(stderr);
        if (strcmp(argv[i], "--redis") == 0)
            url = argv[++i];
        else if (strcmp(argv[i], "--pg") == 0)
            conninfo = argv[++i];
        else if (strcmp(argv[i], "--table") == 0)
            table = argv[++i];
        else
            return usage(stderr);
    }
    url = ex_redis_url("retrofit_lock_version", url);
    if (url == NULL) {
        return 64;
    }
    conninfo = ex_pg_conninfo("retrofit_lock_version", conninfo);
    if (conninfo == NULL) {
        return 64;
    }

    g_conn = PQconnectdb(conninfo != NULL ? conninfo : "");
    if (g_conn == NULL || PQstatus(g_conn) != CONNECTION_OK) {
        fprintf(stderr, "retrofit_lock_version: cannot connect to PostgreSQL: %s",
                g_conn != NULL ? PQerrorMessage(g_conn) : "out of memory\n");
        PQfinish(g_conn);
        return 2;
    }
    PQsetNoticeProcessor(g_conn, quiet, NULL);
    fence_stale e;
    int rc = fence_pg_install(g_conn);
    if (rc != FENCE_OK) {
        fprintf(stderr, "retrofit_lock_version: fence_pg_install: %s\n", fence_pg_errmsg(g_conn));
        PQfinish(g_conn);
        return 2;
    }
    g_table = PQescapeIdentifier(g_conn, table, strlen(table));
    if (g_table == NULL) {
        PQfinish(g_conn);
        return 2;
    }
    fence_client *c = NULL;
    rc = fence_client_open_url(&c, url);
    if (rc != FENCE_OK) {
        fprintf(stderr, "retrofit_lock_version: cannot reach Redis: %s\n",
                c != NULL ? fence_client_errmsg(c) : "out of memory");
        fence_client_close(c);
        PQfreemem(g_table);
        PQfinish(g_conn);
        return 2;
    }
    char lease_name[128];
    snprintf(lease_name, sizeof lease_name, "retrofit:%s:%ld", table, (long)getpid());
    int rows = 0;

    /* 1 ------------------------------------------------------------ */
    printf("1. the existing table, with a Rails-style lock_version (integer, NULLs allowed)\n");
    PQclear(sql("DROP TABLE IF EXISTS %s", g_table));
    PQclear(sql("CREATE TABLE %s (id int PRIMARY KEY, item text NOT NULL, qty int NOT NULL,"
                " lock_version integer)",
                g_table));
    PQclear(sql("INSERT INTO %s VALUES (1, 'apples', 1, NULL), (2, 'pears', 5, 3),"
                " (3, 'plums', 2, 17)",
                g_table));
    show_rows();
    printf("   the application's optimistic-locking write:\n"
           "     UPDATE orders SET qty = $1, lock_version = lock_version + 1\n"
           "      WHERE id = $2 AND lock_version = $3\n");
    rc = app_update(2, 6, 3, 0, &rows, &e);
    printf("   id=2 with lock_version 3: %d row updated, lock_version now %lld\n", rows,
           version_of(2));
    check(rc == FENCE_OK && rows == 1 && version_of(2) == 4, "old path: 1 row, version 3 -> 4");

    /* 2 ------------------------------------------------------------ */
    printf("2. the retrofit, one call: SELECT fence.protect('orders')\n");
    PGresult *r = PQexecParams(g_conn, "SELECT fence.protect($1::regclass, 'lock_version')", 1, NULL,
                               (const char *const[]){g_table}, NULL, NULL, 0);
    rc = fence_pg_classify(g_conn, r, NULL);
    printf("   SELECT fence.protect('orders', 'lock_version'): %s, SQLSTATE %s -- fence never takes\n"
           "   over the application's counter\n",
           rc == FENCE_OK ? "admitted" : "refused", fence_pg_sqlstate(g_conn));
    const char *hint = PQresultErrorField(r, PG_DIAG_MESSAGE_HINT);
    check(rc != FENCE_OK && strcmp(fence_pg_sqlstate(g_conn), "22023") == 0 && hint != NULL &&
              strstr(hint, "SELECT fence.protect(") != NULL,
          "protect(orders, lock_version) refused, 22023, the HINT naming protect(orders)");
    PQclear(r);
    PQclear(sql_table_param("SELECT fence.protect($1::regclass)"));
    r = sql_table_param("SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod)"
                        " || CASE WHEN attnotnull THEN ' NOT NULL' ELSE '' END, ', ' ORDER BY attnum)"
                        " FROM pg_attribute WHERE attrelid = $1::regclass"
                        " AND attname IN ('lock_version', 'fence_token')");
    printf("   now: %s (fence's own column beside the application's)\n", PQgetvalue(r, 0, 0));
    check(strcmp(PQgetvalue(r, 0, 0), "lock_version integer, fence_token bigint NOT NULL") == 0,
          "lock_version untouched, fence_token added");
    PQclear(r);
    show_rows();
    check(version_of(1) == -1 && version_of(2) == 4 && version_of(3) == 17,
          "lock_version's values (and its NULL) kept");

    /* 3 ------------------------------------------------------------ */
    printf("3. the same UPDATE, now in a transaction carrying the lease's token\n");
    fence_lease *a = NULL;
    rc = fence_try_acquire(c, lease_name, 5000, &a);
    if (rc != FENCE_OK) {
        fprintf(stderr, "retrofit_lock_version: fence_try_acquire: %s: %s\n",
                fence_status_name(rc), fence_client_errmsg(c));
        g_failed++;
        goto out;
    }
    uint64_t ta = fence_lease_token(a);
    printf("   holder A acquired the lease: token %" PRIu64 " (no counter to raise: fence_token\n"
           "   starts at 0)\n",
           ta);

    long long v2 = version_of(2);
    rc = app_update(2, 7, v2, ta, &rows, &e);
    printf("   stays:   id=2 WHERE lock_version = %lld: %d row updated (%s), lock_version is now\n"
           "            %lld -- old+1, the application's counter; fence_token %lld\n",
           v2, rows, fence_status_name(rc), version_of(2), stamp_of(2));
    check(rc == FENCE_OK && rows == 1 && version_of(2) == v2 + 1 && stamp_of(2) == (long long)ta,
          "version = old + 1, stamp = token");

    rc = app_update(2, 8, v2, ta, &rows, &e);
    printf("   stays:   the same UPDATE with the old lock_version %lld: %d rows updated -- a\n"
           "            concurrent change is still detected\n",
           v2, rows);
    check(rc == FENCE_OK && rows == 0, "stale lock_version: 0 rows");

    rc = app_update(2, 9, v2 + 1, ta, &rows, &e);
    printf("   stays:   A writes id=2 again (WHERE lock_version = %lld): %d row, lock_version %lld --\n"
           "            every write a new version, whoever writes it\n",
           v2 + 1, rows, version_of(2));
    check(rc == FENCE_OK && rows == 1 && version_of(2) == v2 + 2, "same holder: a new version");

    rc = app_update(2, 10, v2 + 2, 0, &rows, &e);
    printf("   changes: the old code path without a token: %s (%s); during a migration\n"
           "            fence.set_mode('orders', 'permissive') admits such writes\n",
           fence_status_name(rc), rc == FENCE_ENOTOKEN ? "refused" : "admitted");
    check(rc == FENCE_ENOTOKEN, "no token: refused");

    /* 4 ------------------------------------------------------------ */
    printf("4. what fencing adds: an older holder's write, refused\n");
    fence_lease_options lo;
    fence_lease_options_init(&lo, 5000);
    uint64_t tb = 0;
    rc = fence_release(a);
    a = NULL;
    fence_lease *b = NULL;
    rc = fence_acquire(c, lease_name, &lo, &b);
    if (rc == FENCE_OK) {
        tb = fence_lease_token(b);
        long long v3 = version_of(3);
        rc = app_update(3, 4, v3, tb, &rows, &e);
        printf("   adds:    holder B (token %" PRIu64 ") updates id=3: %d row, lock_version %lld\n",
               tb, rows, version_of(3));
        check(rc == FENCE_OK && rows == 1 && version_of(3) == v3 + 1, "B wrote id=3");
        v3 = version_of(3);
        rc = app_update(3, 98, v3, ta, &rows, &e);
        printf("   adds:    A, its lease long gone, loads id=3 after B's write (lock_version %lld, the\n"
               "            current one) and saves it with token %" PRIu64 ": %s",
               v3, ta, fence_status_name(rc));
        if (rc == FENCE_STALE)
            printf(" (%" PRIu64 " < %" PRIu64 ")", e.offered, e.highest);
        printf("\n");
        check(rc == FENCE_STALE && e.offered == ta && e.highest == tb,
              "A's write with the current lock_version rejected");
        rc = blind_update(3, 99, ta, &e);
        printf("   adds:    A writes id=3 blind (no lock_version check) with\n"
               "            token %" PRIu64 ": %s",
               ta, fence_status_name(rc));
        if (rc == FENCE_STALE)
            printf(" (%" PRIu64 " < %" PRIu64 ")", e.offered, e.highest);
        printf("\n");
        check(rc == FENCE_STALE && e.offered == ta && e.highest == tb, "A's blind write rejected");
        check(version_of(3) == v3, "id=3 as B left it");
        fence_release(b);
    } else {
        fprintf(stderr, "retrofit_lock_version: fence_acquire: %s\n", fence_status_name(rc));
        g_failed++;
    }
    show_rows();

out:
    if (!keep)
        PQclear(sql("DROP TABLE IF EXISTS %s", g_table));
    printf("RESULT retrofit=%s checks=%d failed=%d\n", g_failed == 0 ? "ok" : "failed", g_checks,
           g_failed);
    fence_client_close(c);
    PQfreemem(g_table);
    PQfinish(g_conn);
    return g_failed == 0 ? 0 : 1;
}
