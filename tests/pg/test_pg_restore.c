/* test_pg_restore.c -- fence.sql through pg_dump and pg_restore (the
 * Debian binaries of the test server's bin folder, FENCE_TEST_PG_BINDIR):
 * what fence keeps about a table survives a dump as its name (fence.tables,
 * fence.generated), a full restore into a fresh cluster -- a second one
 * this suite starts (scripts/pg-cluster), which does not offer the C
 * extension -- and into a database where the old oids belong to other
 * relations, a restore of tables protected 'c' where the extension is
 * missing (the install protects them again with the portable guard),
 * fence.verify() and fence.record_table(), the in-place migration of an
 * oid-keyed fence.generated, the data-only restore of docs/postgres.md
 * ("Dump and restore"), whose marks never go backwards; the privilege
 * policy (fence.grant()) restored where its role is missing -- pg_restore
 * exits 1 and fence.advance is PUBLIC's until the install puts the
 * recorded policy back -- and with the roles restored first
 * (pg_dumpall --globals-only); one table restored alone (pg_restore -t,
 * pg_dump -t | psql, with and without --no-comments, into the same
 * database after DROP TABLE or into the second cluster), which comes back
 * unguarded and is found by fence's token column marker and protected
 * again by the install; guards tampered with (WHEN, UPDATE OF, disabled)
 * that a dump carries over, reported and repaired there.
 * Both implementations in each run: runs once (scripts/run-suites). */
#include "casetable.h"
#include "pgutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define HA "0123456789abcdef0123456789abcdef"
#define HB "fedcba9876543210fedcba9876543210"

static char g_tmp[256];      /* this run's folder: dumps, command output */
static char g_c2_dir[512];   /* the second cluster's folder */
static int g_c2_port;        /* and its port */
static char g_out[32768];    /* what the last sh() printed */

/* Run the shell command; its stdout and stderr land in g_out.  Returns its
 * exit status (-1 when it did not exit). */
__attribute__((format(printf, 1, 2))) static int sh(const char *fmt, ...)
{
    char cmd[4096], full[4608];
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    ck_assert(w > 0 && (size_t)w < sizeof cmd);
    snprintf(full, sizeof full, "(%s) >'%s/out' 2>&1", cmd, g_tmp);
    int st = system(full);
    char path[512];
    snprintf(path, sizeof path, "%s/out", g_tmp);
    FILE *f = fopen(path, "r");
    size_t n = f != NULL ? fread(g_out, 1, sizeof g_out - 1, f) : 0;
    g_out[n] = '\0';
    if (f != NULL) {
        fclose(f);
    }
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The second cluster, once per run (in the parent process: stopped by the
 * teardown whatever the tests did; scripts/with-servers stops it too if
 * this process dies first). */
static void cluster_start(void)
{
    const char *tmpdir = getenv("TMPDIR");
    snprintf(g_tmp, sizeof g_tmp, "%s/fence-restore.XXXXXX",
             tmpdir != NULL && tmpdir[0] != '\0' ? tmpdir : "/tmp");
    ck_assert_msg(mkdtemp(g_tmp) != NULL, "mkdtemp %s failed", g_tmp);
    snprintf(g_c2_dir, sizeof g_c2_dir, "%s/%s", tu_env("FENCE_TEST_SPAWN_DIR"), tu_name("pg2"));
    int rc = sh("'%s' start '%s'", tu_env("FENCE_TEST_PG_CLUSTER"), g_c2_dir);
    ck_assert_msg(rc == 0, "starting a second PostgreSQL cluster failed (%d): %.1500s", rc, g_out);
    g_c2_port = atoi(g_out);
    ck_assert_msg(g_c2_port > 0, "scripts/pg-cluster printed no port: %.1500s", g_out);
}

static void cluster_stop(void)
{
    if (g_c2_dir[0] != '\0') {
        sh("'%s' stop '%s'", tu_env("FENCE_TEST_PG_CLUSTER"), g_c2_dir);
    }
    if (g_tmp[0] != '\0') {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
        ck_assert_int_eq(system(cmd), 0);
    }
}

/* A connection to database db of the second cluster, as its superuser. */
static PGconn *c2(const char *db)
{
    char ci[256];
    snprintf(ci, sizeof ci, "host=127.0.0.1 port=%d user=postgres dbname=%s", g_c2_port, db);
    PGconn *c = PQconnectdb(ci);
    ck_assert_msg(PQstatus(c) == CONNECTION_OK, "second cluster, %s: %s", db, PQerrorMessage(c));
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    return c;
}

static void c2_createdb(const char *db)
{
    PGconn *c = c2("postgres");
    char sql[256];
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", db);
    ok(c, sql);
    PQfinish(c);
}

static const char *bin(void)
{
    return tu_env("FENCE_TEST_PG_BINDIR");
}

/* pg_dump -Fc of database db of the test server into g_tmp/name.dump
 * (path: 512 bytes). */
static void dump(const char *db, const char *name, char *path)
{
    snprintf(path, 512, "%s/%s.dump", g_tmp, name);
    int rc = sh("'%s/pg_dump' -h 127.0.0.1 -p %s -U postgres -Fc -d %s -f '%s'", bin(),
                tu_env("FENCE_TEST_PG_PORT"), db, path);
    ck_assert_msg(rc == 0, "pg_dump %s: %d %.1500s", db, rc, g_out);
}

/* pg_restore [opts] of path into db on port as user (NULL: postgres);
 * returns its exit status, its output in g_out. */
static int restore_as(int port, const char *user, const char *db, const char *opts,
                      const char *path)
{
    return sh("'%s/pg_restore' -h 127.0.0.1 -p %d -U %s -d %s %s '%s'", bin(), port,
              user != NULL ? user : "postgres", db, opts, path);
}

static int main_port(void)
{
    return atoi(tu_env("FENCE_TEST_PG_PORT"));
}

/* Install the embedded fence.sql on c; returns the WARNINGs it raised
 * (static buffer, "" for none). */
static const char *install(PGconn *c)
{
    static notes n;
    memset(&n, 0, sizeof n);
    PQsetNoticeReceiver(c, collect_notice, &n);
    fence_status st = fence_pg_install(c);
    PQsetNoticeReceiver(c, NULL, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    ck_assert_msg(st == FENCE_OK, "install: %s", fence_pg_errmsg(c));
    return n.text;
}

/* The single value sql returns, as text, up to 16 KB (static buffer). */
static const char *text_long(PGconn *c, const char *sql)
{
    static char buf[16384];
    PGresult *r = PQexec(c, sql);
    ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1, "'%s': %s", sql,
                  PQresultErrorMessage(r));
    ck_assert_msg(PQgetlength(r, 0, 0) < (int)sizeof buf, "'%s': too long", sql);
    snprintf(buf, sizeof buf, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return buf;
}

/* fence.protected, one "tbl col mode implementation check_needed
 * check_present" per table, ordered by name. */
static const char *protected_list(PGconn *c)
{
    return text_long(c, "SELECT COALESCE(string_agg(tbl::text || ' ' || col || ' ' || mode || ' '"
                    " || implementation || ' ' || check_needed || ' ' || check_present, ','"
                    " ORDER BY tbl::text), '') FROM fence.protected");
}

/* fence.verify(), one "tbl: reason" a line. */
static const char *verify_list(PGconn *c)
{
    return text_long(c, "SELECT COALESCE(string_agg(tbl::text || ': ' || reason, E'\\n'"
                    " ORDER BY tbl::text, reason), '') FROM fence.verify()");
}

/* Table tbl (rows id 1..3) is guarded by column col: a write without a
 * token is refused (strict) or admitted keeping the stamps (permissive),
 * a token below row 1's stamp is refused naming the stamp, the stamp
 * itself is admitted. */
static void expect_guarded(PGconn *c, const char *tbl, const char *col, bool permissive,
                           long long stamp)
{
    char sql[512], q[256];
    outcome e;
    snprintf(sql, sizeof sql, "UPDATE %s SET v = v + 1 WHERE id = 1", tbl);
    fence_status st = write_raw(c, NULL, sql, &e);
    if (permissive) {
        ck_assert_msg(st == FENCE_OK, "%s: a permissive write without a token: %s", tbl,
                      e.message);
    } else {
        ck_assert_msg(st == FENCE_ENOTOKEN, "%s: a write without a token: %s %s", tbl,
                      fence_status_name(st), e.message);
    }
    snprintf(q, sizeof q, "SELECT %s FROM %s WHERE id = 1", col, tbl);
    ck_assert_int_eq(num(c, q), stamp);
    st = write_tok(c, (uint64_t)stamp - 1, sql, &e);
    ck_assert_msg(st == FENCE_STALE, "%s: token %lld below the stamp: %s %s", tbl, stamp - 1,
                  fence_status_name(st), e.message);
    ck_assert_uint_eq(e.stale.highest, (uint64_t)stamp);
    ck_assert_int_eq(write_tok(c, (uint64_t)stamp, sql, NULL), FENCE_OK);
    ck_assert_int_eq(num(c, q), stamp);
}

/* The portable source: fence.sql alone; plain (strict), app."Odd Name"
 * (column lock_version, permissive) and later (a BEFORE trigger after the
 * guard: the AFTER check), stamped 7, 8 and 9 on row 1; mark "kept" 9. */
static void make_portable(PGconn *c)
{
    install(c);
    ok(c, "CREATE SCHEMA app;"
          "CREATE TABLE plain (id int PRIMARY KEY, v int);"
          "CREATE TABLE app.\"Odd Name\" (id int PRIMARY KEY, v int);"
          "CREATE TABLE later (id int PRIMARY KEY, v int);"
          "CREATE TRIGGER zzz_later BEFORE UPDATE ON later FOR EACH ROW"
          " EXECUTE FUNCTION suppress_redundant_updates_trigger();"
          "INSERT INTO plain SELECT g, 0 FROM generate_series(1, 3) g;"
          "INSERT INTO app.\"Odd Name\" SELECT g, 0 FROM generate_series(1, 3) g;"
          "INSERT INTO later SELECT g, 0 FROM generate_series(1, 3) g;"
          "SELECT fence.protect('plain', 'fence_token', false, 'plpgsql'),"
          " fence.protect('app.\"Odd Name\"', 'lock_version', true, 'plpgsql'),"
          " fence.protect('later', 'fence_token', false, 'plpgsql')");
    ck_assert_int_eq(write_tok(c, 7, "UPDATE plain SET v = 1 WHERE id = 1", NULL), FENCE_OK);
    ck_assert_int_eq(write_tok(c, 8, "UPDATE app.\"Odd Name\" SET v = 1 WHERE id = 1", NULL),
                     FENCE_OK);
    ck_assert_int_eq(write_tok(c, 9, "UPDATE later SET v = 1 WHERE id = 1", NULL), FENCE_OK);
    ck_assert_int_eq(advance_h(c, 9, HA, "kept", NULL), FENCE_OK);
}

#define PORTABLE_PROTECTED                                                                    \
    "app.\"Odd Name\" lock_version permissive plpgsql false true,"                            \
    "later fence_token strict plpgsql true true,plain fence_token strict plpgsql false true"

/* A restored copy of make_portable's database, as it must be. */
static void expect_portable(PGconn *c)
{
    ck_assert_str_eq(protected_list(c), PORTABLE_PROTECTED);
    ck_assert_str_eq(text1(c, "SELECT string_agg(tbl::text || ' ' || col || ' ' || mode || ' '"
                              " || implementation, ',' ORDER BY tbl::text) FROM fence.tables"),
                     "app.\"Odd Name\" lock_version permissive plpgsql,"
                     "later fence_token strict plpgsql,plain fence_token strict plpgsql");
    ck_assert_str_eq(verify_list(c), "");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.verify()"), 0);
    /* The registry points at the restored tables, whose triggers call its
     * functions. */
    ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.generated g JOIN pg_trigger t"
                            " ON t.tgrelid = g.tbl AND t.tgname = 'zz_fence_guard_upd'"
                            " JOIN pg_proc p ON p.oid = t.tgfoid AND p.proname = g.fn"),
                     3);
    expect_guarded(c, "plain", "fence_token", false, 7);
    expect_guarded(c, "app.\"Odd Name\"", "lock_version", true, 8);
    expect_guarded(c, "later", "fence_token", false, 9);
    char h[FENCE_HOLDER_LEN + 1];
    ck_assert_uint_eq(mark_of(c, "kept", h), 9);
    ck_assert_str_eq(h, HA);
    outcome e;
    ck_assert_int_eq(advance_h(c, 9, NULL, "kept", &e), FENCE_STALE);
    ck_assert_int_eq(e.stale.reason, FENCE_STALE_REPEAT);
}

/* A database where the old oids of the dumped tables belong to other
 * relations -- what a fresh cluster does when its oid counter passes them
 * again, made certain here: a copy of the source (CREATE DATABASE ...
 * TEMPLATE keeps the oids) whose tables are renamed and whose fence is
 * dropped.  Restored into it, fence.generated must still point at the
 * restored tables (it held the raw oids, and fence.protected listed none),
 * and the dump holds their names, not their oids. */
START_TEST(restore_where_old_oids_are_other_relations)
{
    char src[NAME_BUF], dst[NAME_BUF], path[512], sql[512];
    side_db("osrc", NULL, src);
    PGconn *c = connect_as(src, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    make_portable(c);
    long long oid_plain = num(c, "SELECT 'plain'::regclass::oid");
    long long oid_odd = num(c, "SELECT 'app.\"Odd Name\"'::regclass::oid");
    long long oid_later = num(c, "SELECT 'later'::regclass::oid");
    PQfinish(c);
    dump(src, "oids", path);

    int w = snprintf(dst, sizeof dst, "%s_odst", g_db);
    ck_assert(w > 0 && w < 64);
    PGconn *su = connect_as(NULL, NULL);
    snprintf(sql, sizeof sql, "CREATE DATABASE %s TEMPLATE %s", dst, src);
    ok(su, sql);
    PQfinish(su);
    c = connect_as(dst, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    ok(c, "DROP SCHEMA fence CASCADE; ALTER SCHEMA app RENAME TO decoy_app;"
          "ALTER TABLE plain DROP CONSTRAINT fence_token_column;"
          "ALTER TABLE decoy_app.\"Odd Name\" DROP CONSTRAINT fence_token_column;"
          "ALTER TABLE later DROP CONSTRAINT fence_token_column;"
          "ALTER TABLE plain RENAME TO decoy_plain; ALTER TABLE later RENAME TO decoy_later;"
          "ALTER INDEX plain_pkey RENAME TO decoy_plain_pkey;"
          "ALTER INDEX later_pkey RENAME TO decoy_later_pkey");
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_class WHERE oid IN (%lld, %lld, %lld)"
             " AND relname IN ('decoy_plain', 'Odd Name', 'decoy_later')",
             oid_plain, oid_odd, oid_later);
    ck_assert_int_eq(num(c, sql), 3);
    PQfinish(c);

    int rc = restore_as(main_port(), NULL, dst, "", path);
    ck_assert_msg(rc == 0, "pg_restore: %d %.1500s", rc, g_out);
    c = connect_as(dst, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_class WHERE oid IN (%lld, %lld, %lld)"
             " AND oid IN ('plain'::regclass, 'app.\"Odd Name\"'::regclass, 'later'::regclass)",
             oid_plain, oid_odd, oid_later);
    ck_assert_int_eq(num(c, sql), 0); /* new oids */
    expect_portable(c);
    /* The install finds nothing to repair. */
    ck_assert_str_eq(install(c), "");
    ck_assert_str_eq(protected_list(c), PORTABLE_PROTECTED);
    ck_assert_str_eq(verify_list(c), "");
    PQfinish(c);

    /* The dump names the tables. */
    ck_assert_int_eq(sh("'%s/pg_restore' --data-only -n fence -t generated -t tables -f - '%s'",
                        bin(), path),
                     0);
    static const char *const names[] = {
        "\tpublic.plain\tfence_token\tstrict\n",               /* fence.generated */
        "\tapp.\"Odd Name\"\tlock_version\tpermissive\n",
        "\tpublic.later\tfence_token\tstrict\n",
        "\npublic.plain\tfence_token\tstrict\tplpgsql\n",     /* fence.tables */
        "\napp.\"Odd Name\"\tlock_version\tpermissive\tplpgsql\n",
        "\npublic.later\tfence_token\tstrict\tplpgsql\n",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        ck_assert_msg(strstr(g_out, names[i]) != NULL, "no \"%s\" in the dump:\n%.1500s", names[i],
                      g_out);
    }
    long long oids[] = {oid_plain, oid_odd, oid_later};
    for (size_t i = 0; i < 3; i++) {
        char t1[32], t2[32];
        snprintf(t1, sizeof t1, "\t%lld\t", oids[i]);
        snprintf(t2, sizeof t2, "\n%lld\t", oids[i]);
        ck_assert_msg(strstr(g_out, t1) == NULL && strstr(g_out, t2) == NULL,
                      "the dump holds the oid %lld:\n%.1500s", oids[i], g_out);
    }
}
END_TEST

/* The portable database restored into a fresh cluster: every table is
 * listed, guarded with its stamps, the marks kept; the install has nothing
 * to repair. */
START_TEST(restore_into_fresh_cluster)
{
    char src[NAME_BUF], path[512];
    side_db("fsrc", NULL, src);
    PGconn *c = connect_as(src, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    make_portable(c);
    PQfinish(c);
    dump(src, "fresh", path);
    c2_createdb("fresh");
    int rc = restore_as(g_c2_port, NULL, "fresh", "", path);
    ck_assert_msg(rc == 0, "pg_restore: %d %.1500s", rc, g_out);
    c = c2("fresh");
    expect_portable(c);
    ck_assert_str_eq(install(c), "");
    ck_assert_str_eq(verify_list(c), "");
    PQfinish(c);
}
END_TEST

/* Tables protected 'c' (tc strict; tl permissive by column v2 with a
 * later trigger: the AFTER check) and one 'plpgsql' (tp), stamped 5, 6, 7.
 * Restored where the extension is offered, they keep the C guard.
 * Restored into the fresh cluster, which lacks it, pg_restore fails on
 * the extension and on the C triggers: tc and tl are left unguarded,
 * which fence.verify() says; the install protects them again with the
 * portable guard (a WARNING each), same column, mode and stamps, and
 * fence.verify() is empty. */
START_TEST(restore_with_and_without_extension)
{
    char src[NAME_BUF], dst[NAME_BUF], path[512];
    side_db("csrc", NULL, src);
    PGconn *c = connect_as(src, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    install(c);
    create_extension(c);
    ok(c, "CREATE TABLE tc (id int PRIMARY KEY, v int);"
          "CREATE TABLE tl (id int PRIMARY KEY, v int);"
          "CREATE TRIGGER zzz_later BEFORE UPDATE ON tl FOR EACH ROW"
          " EXECUTE FUNCTION suppress_redundant_updates_trigger();"
          "CREATE TABLE tp (id int PRIMARY KEY, v int);"
          "INSERT INTO tc SELECT g, 0 FROM generate_series(1, 3) g;"
          "INSERT INTO tl SELECT g, 0 FROM generate_series(1, 3) g;"
          "INSERT INTO tp SELECT g, 0 FROM generate_series(1, 3) g;"
          "SELECT fence.protect('tc'), fence.protect('tl', 'v2', true),"
          " fence.protect('tp', 'fence_token', false, 'plpgsql')");
    ck_assert_int_eq(write_tok(c, 5, "UPDATE tc SET v = 1 WHERE id = 1", NULL), FENCE_OK);
    ck_assert_int_eq(write_tok(c, 6, "UPDATE tl SET v = 1 WHERE id = 1", NULL), FENCE_OK);
    ck_assert_int_eq(write_tok(c, 7, "UPDATE tp SET v = 1 WHERE id = 1", NULL), FENCE_OK);
    ck_assert_str_eq(protected_list(c), "tc fence_token strict c false true,"
                                        "tl v2 permissive c true true,"
                                        "tp fence_token strict plpgsql false true");
    PQfinish(c);
    dump(src, "c", path);

    /* Without it: pg_restore fails on the extension and the C triggers,
     * the install protects those tables again. */
    c2_createdb("noext");
    int rc = restore_as(g_c2_port, NULL, "noext", "", path);
    ck_assert_msg(rc == 1, "pg_restore without the extension: %d %.1500s", rc, g_out);
    ck_assert_msg(strstr(g_out, "fence.control") != NULL && strstr(g_out, "c_guard") != NULL,
                  "pg_restore's errors: %.1500s", g_out);
    c = c2("noext");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_extension WHERE extname = 'fence'"), 0);
    ck_assert_str_eq(protected_list(c), "tp fence_token strict plpgsql false true");
    char warn[sizeof(notes)];
    snprintf(warn, sizeof warn, "%s", install(c));
    expect_guarded(c, "tc", "fence_token", false, 5);
    expect_guarded(c, "tl", "v2", true, 6);
    expect_guarded(c, "tp", "fence_token", false, 7);
    ck_assert_msg(strstr(warn, "public.tc was not guarded") != NULL &&
                      strstr(warn, "public.tl was not guarded") != NULL &&
                      strstr(warn, "portable guard") != NULL &&
                      strstr(warn, "C extension is not installed") != NULL &&
                      strstr(warn, "public.tp") == NULL,
                  "the install's warnings: %.1500s", warn);
    ck_assert_str_eq(protected_list(c), "tc fence_token strict plpgsql false true,"
                                        "tl v2 permissive plpgsql true true,"
                                        "tp fence_token strict plpgsql false true");
    ck_assert_str_eq(text1(c, "SELECT string_agg(tbl::text || ' ' || implementation, ','"
                              " ORDER BY tbl::text) FROM fence.tables"),
                     "tc plpgsql,tl plpgsql,tp plpgsql");
    ck_assert_str_eq(verify_list(c), "");
    ck_assert_str_eq(install(c), ""); /* nothing left to repair */
    PQfinish(c);

    /* With the extension: as it was. */
    side_db("cdst", NULL, dst);
    rc = restore_as(main_port(), NULL, dst, "", path);
    ck_assert_msg(rc == 0, "pg_restore with the extension: %d %.1500s", rc, g_out);
    c = connect_as(dst, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    ck_assert_str_eq(protected_list(c), "tc fence_token strict c false true,"
                                        "tl v2 permissive c true true,"
                                        "tp fence_token strict plpgsql false true");
    ck_assert_str_eq(verify_list(c), "");
    expect_guarded(c, "tc", "fence_token", false, 5);
    expect_guarded(c, "tl", "v2", true, 6);
    expect_guarded(c, "tp", "fence_token", false, 7);
    ck_assert_str_eq(install(c), "");
    PQfinish(c);

    /* Before the install, fence.verify() says which tables are left
     * unguarded -- and they are: a write without a token goes through. */
    c2_createdb("noext2");
    rc = restore_as(g_c2_port, NULL, "noext2", "", path);
    ck_assert_msg(rc == 1, "pg_restore without the extension: %d %.1500s", rc, g_out);
    c = c2("noext2");
    ck_assert_str_eq(verify_list(c),
                     "tc: no guard: zz_fence_guard_upd is missing or does not call fence's guard\n"
                     "tl: no guard: zz_fence_guard_upd is missing or does not call fence's guard");
    ok(c, "BEGIN; UPDATE tc SET v = 9 WHERE id = 1; ROLLBACK");
    PQfinish(c);
}
END_TEST

/* The regproc of tbl's zz_fence_guard_upd (static buffer). */
static const char *guard_fn(PGconn *c, const char *tbl)
{
    static char fn[128];
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT tgfoid::regproc::text FROM pg_trigger WHERE tgrelid = '%s'::regclass"
             " AND tgname = 'zz_fence_guard_upd'",
             tbl);
    snprintf(fn, sizeof fn, "%s", text1(c, sql));
    return fn;
}

static int cmp_line(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* fence.verify() as "tbl: reason" lines in byte order. */
static const char *verify_lines(PGconn *c)
{
    return text_long(c, "SELECT COALESCE(string_agg(l, E'\\n' ORDER BY l COLLATE \"C\"), '') FROM"
                    " (SELECT tbl::text || ': ' || reason AS l FROM fence.verify()) v");
}

/* got and want, lines joined by '\n', are equal; else the first line
 * that differs is named (check drops a failure message longer than a few
 * kB, which a whole fence.verify() listing can be). */
static void lines_eq(const char *got, const char *want)
{
    size_t line = 1;
    const char *g = got, *w = want;
    while (*g != '\0' && *g == *w) {
        line += *g == '\n' ? 1 : 0;
        g++;
        w++;
    }
    if (*g == *w) {
        return;
    }
    while (g > got && g[-1] != '\n') {
        g--;
        w--;
    }
    ck_abort_msg("line %zu differs: got \"%.300s\", want \"%.300s\" (%zu and %zu bytes in all)", line,
                 g, w, strlen(got), strlen(want));
}

/* A table per fault, for each implementation: fence.verify() names each
 * (and only those), also to a role that owns nothing; dropped and
 * unprotected tables are forgotten; the install protects every listed
 * table again (a WARNING each) but those whose column it would have to
 * convert, running no code of the table's.  Then
 * fence.record_table()'s refusals, and the registry following set_mode(),
 * move_guard() and unprotect(). */
START_TEST(verify_names_every_fault)
{
    char d[NAME_BUF], sql[4096];
    side_db("verify", NULL, d);
    PGconn *c = connect_as(d, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    install(c);
    create_extension(c);
    ok(c, "CREATE FUNCTION noop() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';"
          "CREATE TABLE ran_as (who name);"
          "CREATE FUNCTION log_user() RETURNS trigger LANGUAGE plpgsql"
          " AS 'BEGIN INSERT INTO public.ran_as VALUES (current_user); RETURN NEW; END'");
    static const char *const faults[] = {"ok",      "off",      "replica", "nodel",   "noins",
                                         "foreign", "after",    "args",    "noguard", "notrunc",
                                         "nocheck", "offcheck", "renamed", "nullable", "gone",
                                         "unprot"};
    static const char *const impls[] = {"plpgsql", "c"};
    const size_t nf = sizeof faults / sizeof faults[0];
    for (size_t i = 0; i < 2; i++) {
        for (size_t f = 0; f < nf; f++) {
            snprintf(sql, sizeof sql,
                     "CREATE TABLE %s_%s (id int PRIMARY KEY, v int);"
                     "INSERT INTO %s_%s VALUES (1, 0);"
                     "SELECT fence.protect('%s_%s', 'fence_token', false, '%s')",
                     faults[f], impls[i], faults[f], impls[i], faults[f], impls[i], impls[i]);
            ok(c, sql);
        }
    }
    ck_assert_str_eq(verify_lines(c), "");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.tables"), 2 * (long long)nf);

    /* The event trigger would add the AFTER checks: off meanwhile. */
    ok(c, "ALTER EVENT TRIGGER fence_later_triggers DISABLE");
    char *want[64];
    size_t nw = 0;
    for (size_t i = 0; i < 2; i++) {
        const char *m = impls[i];
        char t[64], fn_after[128], fn_args[128], fn_foreign[128];
        snprintf(t, sizeof t, "after_%s", m);
        snprintf(fn_after, sizeof fn_after, "%s", guard_fn(c, t));
        snprintf(t, sizeof t, "args_%s", m);
        snprintf(fn_args, sizeof fn_args, "%s", guard_fn(c, t));
        snprintf(t, sizeof t, "foreign_%s", m);
        snprintf(fn_foreign, sizeof fn_foreign, "%s", guard_fn(c, t));
        snprintf(sql, sizeof sql,
                 "ALTER TABLE off_%s DISABLE TRIGGER zz_fence_guard_ins;"
                 "ALTER TABLE replica_%s ENABLE REPLICA TRIGGER zz_fence_guard_del;"
                 "DROP TRIGGER zz_fence_guard_del ON nodel_%s;"
                 "DROP TRIGGER zz_fence_guard_ins ON noins_%s;"
                 "DROP TRIGGER zz_fence_guard_ins ON foreign_%s;"
                 "CREATE TRIGGER zz_fence_guard_ins BEFORE INSERT ON foreign_%s FOR EACH ROW"
                 " EXECUTE FUNCTION noop();"
                 "DROP TRIGGER zz_fence_guard_upd ON after_%s;"
                 "CREATE TRIGGER zz_fence_guard_upd AFTER UPDATE ON after_%s FOR EACH ROW"
                 " EXECUTE FUNCTION %s('fence_token', 'strict');"
                 "DROP TRIGGER zz_fence_guard_del ON args_%s;"
                 "CREATE TRIGGER zz_fence_guard_del BEFORE DELETE ON args_%s FOR EACH ROW"
                 " EXECUTE FUNCTION %s('v', 'strict');"
                 "DROP TRIGGER zz_fence_guard_upd ON noguard_%s;"
                 "DROP TRIGGER zz_fence_guard_truncate ON notrunc_%s;"
                 "CREATE TRIGGER zzz BEFORE INSERT ON nocheck_%s FOR EACH ROW"
                 " EXECUTE FUNCTION noop();"
                 "CREATE TRIGGER zzz BEFORE UPDATE ON offcheck_%s FOR EACH ROW"
                 " EXECUTE FUNCTION noop();"
                 "SELECT fence.protect('offcheck_%s', 'fence_token', false, '%s');"
                 "ALTER TABLE offcheck_%s DISABLE TRIGGER zz_fence_check_upd;"
                 "ALTER TABLE renamed_%s RENAME COLUMN fence_token TO tok;"
                 "DROP TRIGGER zz_fence_guard_upd ON renamed_%s;"
                 "ALTER TABLE nullable_%s ALTER COLUMN fence_token DROP NOT NULL,"
                 " DROP CONSTRAINT fence_token_column;"
                 "DROP TRIGGER zz_fence_guard_upd ON nullable_%s;"
                 "UPDATE nullable_%s SET fence_token = NULL;"
                 "CREATE TRIGGER a_log BEFORE UPDATE ON nullable_%s FOR EACH ROW"
                 " EXECUTE FUNCTION log_user();"
                 "DROP TABLE gone_%s;"
                 "SELECT fence.unprotect('unprot_%s')",
                 m, m, m, m, m, m, m, m, fn_after, m, m, fn_args, m, m, m, m, m, m, m, m, m, m, m, m,
                 m, m, m);
        ok(c, sql);
        static const char *const lines[][2] = {
            {"after", "trigger zz_fence_guard_upd is not a BEFORE UPDATE row trigger"},
            {"args", "trigger zz_fence_guard_del is not called with ('fence_token', 'strict')"},
            {"foreign", "trigger zz_fence_guard_ins is not called with ('fence_token', 'strict')"},
            {"nocheck", "AFTER check missing: a BEFORE row trigger fires after the guard and could"
                        " rewrite the token column (zz_fence_check_ins/_upd)"},
            {"nodel", "trigger zz_fence_guard_del is missing"},
            {"noguard", "no guard: zz_fence_guard_upd is missing or does not call fence's guard"},
            {"noins", "trigger zz_fence_guard_ins is missing"},
            {"notrunc", "trigger zz_fence_guard_truncate is missing"},
            {"off", "trigger zz_fence_guard_ins is disabled"},
            {"offcheck", "trigger zz_fence_check_upd is disabled"},
            {"renamed", "no guard: zz_fence_guard_upd is missing or does not call fence's guard"},
            {"nullable", "no guard: zz_fence_guard_upd is missing or does not call fence's guard"},
            {"nullable", "token column fence_token does not carry fence's marker (constraint"
                         " fence_token_column): restored alone (pg_dump -t, pg_restore -t), the"
                         " table would come back unguarded and unreported"},
            {"replica", "trigger zz_fence_guard_del is disabled (ENABLE REPLICA: it fires only in"
                        " replica mode)"},
        };
        for (size_t l = 0; l < sizeof lines / sizeof lines[0]; l++) {
            want[nw] = malloc(512);
            ck_assert_ptr_nonnull(want[nw]);
            snprintf(want[nw++], 512, "%s_%s: %s", lines[l][0], m, lines[l][1]);
        }
        /* foreign_*: its zz_fence_guard_ins calls noop(), not the guard. */
        want[nw] = malloc(512);
        ck_assert_ptr_nonnull(want[nw]);
        snprintf(want[nw++], 512, "foreign_%s: trigger zz_fence_guard_ins calls public.noop(), not %s()",
                 m, fn_foreign);
    }
    ok(c, "ALTER EVENT TRIGGER fence_later_triggers ENABLE");
    qsort(want, nw, sizeof want[0], cmp_line);
    char expected[16384] = "";
    for (size_t i = 0; i < nw; i++) {
        size_t len = strlen(expected);
        snprintf(expected + len, sizeof expected - len, "%s%s", i > 0 ? "\n" : "", want[i]);
        free(want[i]);
    }
    lines_eq(verify_lines(c), expected);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.tables"), 2 * (long long)(nf - 2));
    ck_assert_int_eq(num(c, "SELECT count(*) FROM ran_as"), 0);
    /* Anyone may ask. */
    PGconn *app = connect_as(d, g_app);
    PQsetNoticeProcessor(app, quiet_notice, NULL);
    ck_assert_int_eq(num(app, "SELECT count(*) FROM fence.verify()"), (long long)nw);

    /* The install protects them again, but renamed_* and nullable_*,
     * whose columns it would have to convert (which would run the
     * table's own triggers as the installer). */
    const char *warn = install(c);
    ck_assert_str_eq(text1(c, "SELECT COALESCE(string_agg(who, ','), '') FROM ran_as"), "");
    for (size_t i = 0; i < 2; i++) {
        for (size_t f = 1; f < nf - 4; f++) {
            char w[128];
            snprintf(w, sizeof w, "public.%s_%s was not guarded", faults[f], impls[i]);
            ck_assert_msg(strstr(warn, w) != NULL, "no \"%s\" in the install's warnings: %.1500s", w,
                          warn);
        }
        for (size_t f = nf - 4; f < nf - 2; f++) {
            char w[512];
            snprintf(w, sizeof w,
                     "public.%s_%s is not guarded as fence.protect() left it (no guard: "
                     "zz_fence_guard_upd is missing or does not call fence's guard",
                     faults[f], impls[i]);
            const char *at = strstr(warn, w);
            ck_assert_msg(at != NULL, "no \"%s\" in the install's warnings: %.1500s", w, warn);
            const char *rest = "and its token column fence_token is no longer the bigint NOT NULL column";
            const char *nl = strchr(at, '\n');
            const char *r = strstr(at, rest);
            ck_assert_msg(r != NULL && (nl == NULL || r < nl), "no \"%s\" after \"%s\": %.1500s", rest,
                          w, warn);
        }
    }
    ck_assert_msg(strstr(warn, "public.ok_") == NULL, "the install's warnings: %.1500s", warn);
    ck_assert_str_eq(verify_lines(c),
                     "nullable_c: no guard: zz_fence_guard_upd is missing or does not call fence's guard\n"
                     "nullable_c: token column fence_token does not carry fence's marker (constraint"
                     " fence_token_column): restored alone (pg_dump -t, pg_restore -t), the table"
                     " would come back unguarded and unreported\n"
                     "nullable_plpgsql: no guard: zz_fence_guard_upd is missing or does not call fence's guard\n"
                     "nullable_plpgsql: token column fence_token does not carry fence's marker (constraint"
                     " fence_token_column): restored alone (pg_dump -t, pg_restore -t), the table"
                     " would come back unguarded and unreported\n"
                     "renamed_c: no guard: zz_fence_guard_upd is missing or does not call fence's guard\n"
                     "renamed_plpgsql: no guard: zz_fence_guard_upd is missing or does not call fence's guard");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.protected WHERE implementation = 'c'"),
                     (long long)nf - 4);
    ck_assert_int_eq(write_raw(c, NULL, "INSERT INTO off_c VALUES (2, 0)", NULL), FENCE_ENOTOKEN);
    ck_assert_int_eq(write_raw(c, NULL, "INSERT INTO foreign_plpgsql VALUES (2, 0)", NULL),
                     FENCE_ENOTOKEN);
    ck_assert_int_eq(write_raw(c, NULL, "DELETE FROM replica_plpgsql", NULL), FENCE_ENOTOKEN);
    fails(c, "TRUNCATE notrunc_c", "23Q03");

    /* fence.record_table(): NULL, no such table, not the owner -- each changes
     * nothing. */
    const char *before = "SELECT string_agg(tbl::text || col || mode || implementation, ','"
                         " ORDER BY tbl::text) FROM fence.tables";
    char snap[4096];
    snprintf(snap, sizeof snap, "%s", text_long(c, before));
    fails(app, "SELECT fence.record_table(NULL)", "22023");
    fails(app, "SELECT fence.record_table(4000000000::oid::regclass)", "22023");
    fails(app, "SELECT fence.record_table('ok_c')", "42501");
    ck_assert_str_eq(text_long(c, before), snap);
    /* The registry follows set_mode, move_guard and unprotect. */
    ok(c, "SELECT fence.set_mode('ok_plpgsql', 'permissive'), fence.move_guard('ok_c', 'tok2')");
    ck_assert_str_eq(text1(c, "SELECT string_agg(tbl::text || ' ' || col || ' ' || mode || ' '"
                              " || implementation, ',' ORDER BY tbl::text) FROM fence.tables"
                              " WHERE tbl::text LIKE 'ok\\_%'"),
                     "ok_c tok2 strict c,ok_plpgsql fence_token permissive plpgsql");
    ok(c, "SELECT fence.unprotect('ok_plpgsql')");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.tables WHERE tbl = 'ok_plpgsql'::regclass"),
                     0);
    PQfinish(app);
    PQfinish(c);
}
END_TEST

/* A database from before fence.generated named its tables: the column a
 * raw oid, no fence.tables, no event trigger for drops (made from this
 * version, as the older ones were).  One row holds an oid that is now
 * another relation's -- a database restored from such a dump.  The
 * install converts the column in place, points that row at the table
 * whose trigger calls its function, records both tables, and lists them. */
START_TEST(install_migrates_an_oid_keyed_registry)
{
    char d[NAME_BUF];
    side_db("migrate", NULL, d);
    PGconn *c = connect_as(d, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    install(c);
    ok(c, "CREATE TABLE m1 (id int PRIMARY KEY, v int); CREATE TABLE m2 (LIKE m1 INCLUDING ALL);"
          "CREATE TABLE decoy (id int); INSERT INTO m1 VALUES (1, 0); INSERT INTO m2 VALUES (1, 0);"
          "SELECT fence.protect('m1', 'fence_token', false, 'plpgsql'),"
          " fence.protect('m2', 'fence_token', true, 'plpgsql')");
    ck_assert_int_eq(write_tok(c, 4, "UPDATE m1 SET v = 1", NULL), FENCE_OK);
    /* (fence.protected stands in with a view that reads the column, as
     * the old one did; the event trigger that reads it runs on the
     * install's ALTER TABLE.) */
    ok(c, "ALTER EVENT TRIGGER fence_later_triggers DISABLE;"
          "DROP EVENT TRIGGER IF EXISTS fence_dropped_tables; DROP VIEW fence.protected, fence.guards;"
          "DROP FUNCTION IF EXISTS fence.verify(); DROP TABLE IF EXISTS fence.tables;"
          "ALTER TABLE fence.generated ALTER COLUMN tbl TYPE oid USING tbl::oid;"
          "UPDATE fence.generated SET tbl = 'decoy'::regclass::oid WHERE tbl = 'm2'::regclass::oid;"
          "CREATE VIEW fence.protected AS SELECT g.tbl::regclass AS tbl, g.col, g.mode COLLATE \"C\","
          " 'plpgsql'::text AS implementation, false AS check_needed, true AS check_present"
          " FROM fence.generated g;"
          "GRANT SELECT ON fence.protected TO PUBLIC;"
          "ALTER EVENT TRIGGER fence_later_triggers ENABLE");
    ck_assert_str_eq(install(c), "");
    ck_assert_str_eq(text1(c, "SELECT atttypid::regtype::text FROM pg_attribute"
                              " WHERE attrelid = 'fence.generated'::regclass AND attname = 'tbl'"),
                     "regclass");
    ck_assert_str_eq(text1(c, "SELECT string_agg(tbl::text, ',' ORDER BY tbl::text) FROM fence.generated"),
                     "m1,m2");
    ck_assert_str_eq(protected_list(c), "m1 fence_token strict plpgsql false true,"
                                        "m2 fence_token permissive plpgsql false true");
    ck_assert_str_eq(text1(c, "SELECT string_agg(tbl::text || ' ' || mode, ',' ORDER BY tbl::text)"
                              " FROM fence.tables"),
                     "m1 strict,m2 permissive");
    ck_assert_str_eq(verify_lines(c), "");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_event_trigger WHERE evtname = 'fence_dropped_tables'"),
                     1);
    expect_guarded(c, "m1", "fence_token", false, 4);
    ck_assert_str_eq(install(c), "");
    PQfinish(c);
}
END_TEST

/* The marks of database c as "resource token holder" (holder "-" for
 * none), ordered. */
static const char *marks(PGconn *c)
{
    return text1(c, "SELECT COALESCE(string_agg(resource || ' ' || token || ' ' || COALESCE(holder, '-'),"
                    " ',' ORDER BY resource), '') FROM fence.marks");
}

/* The application's schema, as a migration makes it: acct (with rows
 * 1..3 when rows) protected. */
static void make_schema(PGconn *c, bool rows)
{
    install(c);
    ok(c, "CREATE TABLE acct (id int PRIMARY KEY, v int)");
    if (rows) {
        ok(c, "INSERT INTO acct SELECT g, 0 FROM generate_series(1, 3) g");
    }
    ok(c, "SELECT fence.protect('acct', 'fence_token', false, 'plpgsql')");
}

/* docs/postgres.md, "Dump and restore": a data-only restore into a
 * migrated schema whose marks are partly higher.  All in one
 * pg_restore --data-only --disable-triggers fails on fence's own tables
 * (and, its triggers off, lowers no mark but brings none over); the
 * recipe -- the application's data with the guards off and schema fence
 * left out, then fence.marks alone with its triggers on -- restores the
 * rows with their stamps and merges the marks: each the higher of both,
 * the target's holder kept at an equal token, the missing ones added;
 * again, nothing changes.  fence.verify() is empty. */
START_TEST(data_only_restore)
{
    char src[NAME_BUF], naive[NAME_BUF], dst[NAME_BUF], path[512];
    side_db("dsrc", NULL, src);
    PGconn *c = connect_as(src, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    make_schema(c, true);
    ck_assert_int_eq(write_tok(c, 7, "UPDATE acct SET v = 1 WHERE id = 1", NULL), FENCE_OK);
    ck_assert_int_eq(write_tok(c, 12, "UPDATE acct SET v = 1 WHERE id = 2", NULL), FENCE_OK);
    ck_assert_int_eq(advance_h(c, 50, HA, "m/a", NULL), FENCE_OK);
    ck_assert_int_eq(advance_h(c, 70, NULL, "m/b", NULL), FENCE_OK);
    ck_assert_int_eq(advance_h(c, 30, HA, "m/c", NULL), FENCE_OK);
    ck_assert_int_eq(advance_h(c, 40, HA, "m/d", NULL), FENCE_OK);
    PQfinish(c);
    dump(src, "data", path);

    const char *target_marks = "m/a 100 " HB ",m/b 10 " HB ",m/d 40 " HB;
    side_db("dnaive", NULL, naive);
    side_db("ddst", NULL, dst);
    const char *dbs[] = {naive, dst};
    for (int i = 0; i < 2; i++) {
        c = connect_as(dbs[i], NULL);
        PQsetNoticeProcessor(c, quiet_notice, NULL);
        make_schema(c, false);
        ck_assert_int_eq(advance_h(c, 100, HB, "m/a", NULL), FENCE_OK);
        ck_assert_int_eq(advance_h(c, 10, HB, "m/b", NULL), FENCE_OK);
        ck_assert_int_eq(advance_h(c, 40, HB, "m/d", NULL), FENCE_OK);
        ck_assert_str_eq(marks(c), target_marks);
        PQfinish(c);
    }

    /* Everything at once. */
    int rc = restore_as(main_port(), NULL, naive, "--data-only --disable-triggers", path);
    ck_assert_msg(rc == 1, "pg_restore --data-only --disable-triggers: %d %.1500s", rc, g_out);
    ck_assert_msg(strstr(g_out, "meta_pkey") != NULL && strstr(g_out, "marks_pkey") != NULL,
                  "pg_restore's errors: %.1500s", g_out);
    c = connect_as(naive, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    ck_assert_str_eq(marks(c), target_marks);
    PQfinish(c);

    /* The recipe, step 1: without --disable-triggers the guard refuses
     * the rows. */
    rc = restore_as(main_port(), NULL, dst, "--data-only --exclude-schema=fence", path);
    ck_assert_msg(rc == 1 && strstr(g_out, "no fencing token") != NULL, "pg_restore: %d %.1500s", rc,
                  g_out);
    c = connect_as(dst, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM acct"), 0);
    rc = restore_as(main_port(), NULL, dst, "--data-only --disable-triggers --exclude-schema=fence",
                    path);
    ck_assert_msg(rc == 0, "pg_restore, the application's data: %d %.1500s", rc, g_out);
    ck_assert_str_eq(text1(c, "SELECT string_agg(id || ':' || fence_token, ',' ORDER BY id) FROM acct"),
                     "1:7,2:12,3:0");
    ck_assert_str_eq(marks(c), target_marks);
    /* Step 2: the marks, merged.  Twice: the same. */
    for (int i = 0; i < 2; i++) {
        rc = restore_as(main_port(), NULL, dst, "--data-only --schema=fence --table=marks", path);
        ck_assert_msg(rc == 0, "pg_restore, fence.marks (#%d): %d %.1500s", i + 1, rc, g_out);
        ck_assert_str_eq(marks(c), "m/a 100 " HB ",m/b 70 -,m/c 30 " HA ",m/d 40 " HB);
    }
    ck_assert_str_eq(verify_lines(c), "");
    expect_guarded(c, "acct", "fence_token", false, 7);
    outcome e;
    ck_assert_int_eq(advance_h(c, 99, HB, "m/a", &e), FENCE_STALE);
    ck_assert_int_eq(advance_h(c, 70, HA, "m/b", &e), FENCE_STALE);
    ck_assert_int_eq(e.stale.reason, FENCE_STALE_REPEAT);
    ck_assert_int_eq(advance_h(c, 40, HA, "m/d", &e), FENCE_STALE);
    ck_assert_int_eq(advance_h(c, 30, HA, "m/c", NULL), FENCE_OK);
    ck_assert_str_eq(install(c), "");
    PQfinish(c);

    /* Step 1 without a superuser: the table's owner switches its user
     * triggers off around the load; fence.verify() says until it is done. */
    char own[NAME_BUF], sql[512];
    side_db("downer", NULL, own);
    c = connect_as(own, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    install(c);
    snprintf(sql, sizeof sql,
             "GRANT CREATE ON SCHEMA public TO %s;"
             "GRANT EXECUTE ON FUNCTION fence.protect(regclass, name, boolean, text) TO %s",
             g_app, g_app);
    ok(c, sql);
    PGconn *app = connect_as(own, g_app);
    PQsetNoticeProcessor(app, quiet_notice, NULL);
    ok(app, "CREATE TABLE acct (id int PRIMARY KEY, v int);"
            "SELECT fence.protect('acct', 'fence_token', false, 'plpgsql');"
            "ALTER TABLE acct DISABLE TRIGGER USER");
    ck_assert_int_eq(num(app, "SELECT count(*) FROM fence.verify() WHERE reason LIKE '% is disabled'"),
                     4);
    rc = restore_as(main_port(), g_app, own, "--data-only --exclude-schema=fence", path);
    ck_assert_msg(rc == 0, "pg_restore as the owner: %d %.1500s", rc, g_out);
    ok(app, "ALTER TABLE acct ENABLE TRIGGER USER");
    ck_assert_str_eq(verify_lines(app), "");
    ck_assert_str_eq(text1(app, "SELECT string_agg(id || ':' || fence_token, ',' ORDER BY id) FROM acct"),
                     "1:7,2:12,3:0");
    expect_guarded(app, "acct", "fence_token", false, 7);
    PQfinish(app);
    PQfinish(c);
}
END_TEST

/* Whether role r may call fence.advance in database db of the cluster on
 * port (any other outcome fails the test). */
static bool may_advance(int port, const char *db, const char *r)
{
    char ci[256];
    snprintf(ci, sizeof ci, "host=127.0.0.1 port=%d user=%s dbname=%s", port, r, db);
    PGconn *c = PQconnectdb(ci);
    ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s as %s: %s", db, r, PQerrorMessage(c));
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    outcome e;
    fence_status st = run(c, "SELECT fence.advance('policy', 1)", &e);
    ck_assert_msg(st == FENCE_OK || strcmp(e.sqlstate, "42501") == 0, "advance as %s: %s", r,
                  e.message);
    PQfinish(c);
    return st == FENCE_OK;
}

/* fence.verify()'s rows about the privilege policy, one reason a line. */
static const char *policy_lines(PGconn *c)
{
    return text_long(c, "SELECT COALESCE(string_agg(reason, E'\\n' ORDER BY reason COLLATE \"C\"), '')"
                        " FROM fence.verify() WHERE tbl = 'fence.advance_grants'::regclass");
}

/* fence.grant(app) in the source.  Restored into the second cluster,
 * which lacks role app, pg_restore exits 1 (the function's whole ACL
 * entry fails) and fence.advance is PUBLIC's again: any role may raise
 * a mark past every holder.  fence.verify() says so, from
 * fence.advance_grants, which the dump carried; the install revokes it
 * from PUBLIC, WARNs about the missing role, and grants it once the roles
 * are restored (pg_dumpall --globals-only, the recipe's first step);
 * with the roles restored first, pg_restore exits 0 and the policy is
 * whole at once. */
START_TEST(restore_keeps_the_privilege_policy)
{
    char src[NAME_BUF], app[NAME_BUF], other[NAME_BUF], path[512], sql[512], want[1024];
    side_role("rapp", app);
    side_role("rother", other);
    side_db("psrc", NULL, src);
    PGconn *c = connect_as(src, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    install(c);
    snprintf(sql, sizeof sql, "SELECT fence.grant('%s')", app);
    ok(c, sql);
    ck_assert_str_eq(policy_lines(c), "");
    PQfinish(c);
    ck_assert(may_advance(main_port(), src, app));
    ck_assert(!may_advance(main_port(), src, other));
    dump(src, "policy", path);

    /* Into the second cluster, which has neither role: only "other", made
     * here, to show who may advance. */
    c2_createdb("policy");
    c = c2("postgres");
    snprintf(sql, sizeof sql, "CREATE ROLE %s LOGIN", other);
    ok(c, sql);
    PQfinish(c);
    int rc = restore_as(g_c2_port, NULL, "policy", "", path);
    snprintf(want, sizeof want, "role \"%s\" does not exist", app);
    ck_assert_msg(rc == 1 && strstr(g_out, want) != NULL && strstr(g_out, "fence.advance") != NULL,
                  "pg_restore without the role: %d %.1500s", rc, g_out);
    ck_assert(may_advance(g_c2_port, "policy", other)); /* the hole */
    c = c2("policy");
    snprintf(want, sizeof want,
             "PUBLIC may execute fence.advance(), which fence.advance_grants does not allow\n"
             "role %s is in fence.advance_grants but does not exist in this cluster",
             app);
    ck_assert_str_eq(policy_lines(c), want);
    char warn[sizeof(notes)];
    snprintf(warn, sizeof warn, "%s", install(c));
    snprintf(want, sizeof want,
             "lets role %s execute fence.advance(), and no role of that name exists in this cluster",
             app);
    ck_assert_msg(strstr(warn, "revoked EXECUTE on fence.advance() from PUBLIC") != NULL &&
                      strstr(warn, want) != NULL,
                  "the install's warnings: %.1500s", warn);
    ck_assert(!may_advance(g_c2_port, "policy", other));
    snprintf(want, sizeof want, "role %s is in fence.advance_grants but does not exist in this cluster",
             app);
    ck_assert_str_eq(policy_lines(c), want);

    /* The roles: pg_dumpall --globals-only into the new cluster (its
     * errors: the roles it has already), then the install again. */
    rc = sh("'%s/pg_dumpall' -h 127.0.0.1 -p %d -U postgres --globals-only"
            " | '%s/psql' -X -q -h 127.0.0.1 -p %d -U postgres -d postgres",
            bin(), main_port(), bin(), g_c2_port);
    ck_assert_msg(rc == 0, "pg_dumpall --globals-only | psql: %d %.1500s", rc, g_out);
    snprintf(warn, sizeof warn, "%s", install(c));
    snprintf(want, sizeof want, "granted EXECUTE on fence.advance() to role %s", app);
    ck_assert_msg(strstr(warn, want) != NULL, "the install's warnings: %.1500s", warn);
    ck_assert_str_eq(policy_lines(c), "");
    ck_assert_str_eq(install(c), "");
    PQfinish(c);
    ck_assert(may_advance(g_c2_port, "policy", app));
    ck_assert(!may_advance(g_c2_port, "policy", other));

    /* The recipe in its order: roles first, then pg_restore: exit 0, the
     * ACL restored, nothing to repair. */
    c2_createdb("policy2");
    rc = restore_as(g_c2_port, NULL, "policy2", "", path);
    ck_assert_msg(rc == 0, "pg_restore with the roles: %d %.1500s", rc, g_out);
    c = c2("policy2");
    ck_assert_str_eq(verify_list(c), "");
    ck_assert_str_eq(install(c), "");
    PQfinish(c);
    ck_assert(may_advance(g_c2_port, "policy2", app));
    ck_assert(!may_advance(g_c2_port, "policy2", other));
}
END_TEST

/* One table restored alone, which brings back the table (its columns,
 * defaults and CHECK constraints -- fence's marker among them -- and its
 * rows) but not fence.tables and fence.generated, and with pg_restore -t
 * not its triggers either.  how: pg_restore -t of a -Fc dump, or pg_dump
 * -t into psql; where: into the same database after DROP TABLE (then
 * fence.drop_orphans() or not: whether the old generated guard is still
 * there for pg_dump's CREATE TRIGGER), or into a database of the second
 * cluster with fence.sql installed (no extension); --no-comments or not. */
enum { BY_RESTORE_T, BY_DUMP_T };
enum { SAME_DB, OTHER_CLUSTER };
static const struct alone_case {
    const char *name;
    int how, where;
    bool no_comments, drop_orphans;
} alone_cases[] = {
    {"restore_t_after_drop", BY_RESTORE_T, SAME_DB, false, false},
    {"restore_t_other_cluster", BY_RESTORE_T, OTHER_CLUSTER, false, false},
    {"restore_t_no_comments_other_cluster", BY_RESTORE_T, OTHER_CLUSTER, true, false},
    {"dump_t_after_drop", BY_DUMP_T, SAME_DB, false, false},
    {"dump_t_after_drop_and_orphans", BY_DUMP_T, SAME_DB, false, true},
    {"dump_t_other_cluster", BY_DUMP_T, OTHER_CLUSTER, false, false},
    {"dump_t_no_comments_other_cluster", BY_DUMP_T, OTHER_CLUSTER, true, false},
};

/* For each implementation: the command exits 0; fence.verify() names the
 * table (it carries the marker, fence.tables has no row for it); a write
 * without a token is admitted wherever no guard came back (pg_restore
 * -t; pg_dump -t where the guard function is gone); the install records
 * and protects it again -- strict, the default implementation -- with a
 * WARNING, its stamps kept, and then has nothing left to do. */
START_TEST(table_restored_alone_is_protected_again)
{
    const struct alone_case *ac = &alone_cases[_i];
    static const char *const impls[] = {"plpgsql", "c"};
    for (int i = 0; i < (pg_impl_wanted("c") ? 2 : 1); i++) {
        char src[NAME_BUF], suffix[64], path[512], dst[NAME_BUF];
        snprintf(suffix, sizeof suffix, "alone%d%s", _i, impls[i]);
        side_db(suffix, NULL, src);
        PGconn *c = connect_as(src, NULL);
        PQsetNoticeProcessor(c, quiet_notice, NULL);
        install(c);
        if (i == 1) {
            create_extension(c);
        }
        char sql[512];
        snprintf(sql, sizeof sql,
                 "CREATE TABLE orders (id int PRIMARY KEY, v int);"
                 "INSERT INTO orders SELECT g, 0 FROM generate_series(1, 3) g;"
                 "SELECT fence.protect('orders', 'fence_token', false, '%s')",
                 impls[i]);
        ok(c, sql);
        ck_assert_int_eq(write_tok(c, 7, "UPDATE orders SET v = 1 WHERE id = 1", NULL), FENCE_OK);
        const char *nc = ac->no_comments ? "--no-comments" : "";
        int rc;
        if (ac->how == BY_RESTORE_T) {
            dump(src, suffix, path);
        } else {
            snprintf(path, sizeof path, "%s/%s.sql", g_tmp, suffix);
            rc = sh("'%s/pg_dump' -h 127.0.0.1 -p %d -U postgres -t orders %s -d %s -f '%s'", bin(),
                    main_port(), nc, src, path);
            ck_assert_msg(rc == 0, "pg_dump -t: %d %.1500s", rc, g_out);
        }
        int port = main_port();
        if (ac->where == SAME_DB) {
            snprintf(dst, sizeof dst, "%s", src);
            ok(c, ac->drop_orphans ? "DROP TABLE orders; SELECT fence.drop_orphans()"
                                   : "DROP TABLE orders");
            PQfinish(c);
        } else {
            PQfinish(c);
            snprintf(dst, sizeof dst, "%s", suffix);
            c2_createdb(dst);
            port = g_c2_port;
            c = c2(dst);
            install(c);
            PQfinish(c);
        }
        if (ac->how == BY_RESTORE_T) {
            char opts[64];
            snprintf(opts, sizeof opts, "-t orders %s", nc);
            rc = restore_as(port, NULL, dst, opts, path);
        } else {
            rc = sh("'%s/psql' -X -q -h 127.0.0.1 -p %d -U postgres -d %s -f '%s'", bin(), port,
                    dst, path);
        }
        ck_assert_msg(rc == 0, "%s (%s): %d %.1500s", ac->name, impls[i], rc, g_out);
        /* The event trigger's WARNING at CREATE TABLE (psql shows it;
         * pg_restore only with -v). */
        ck_assert_msg(ac->how == BY_RESTORE_T ||
                          strstr(g_out, "WARNING:  fence: public.orders carries fence's token column"
                                        " marker (column fence_token) but is not protected") != NULL,
                      "%s (%s): psql's output: %.1500s", ac->name, impls[i], g_out);
        c = ac->where == SAME_DB ? connect_as(dst, NULL) : c2(dst);
        PQsetNoticeProcessor(c, quiet_notice, NULL);
        ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.tables WHERE tbl = 'orders'::regclass"), 0);
        ck_assert_str_eq(verify_lines(c),
                         "orders: not recorded: column fence_token carries fence's token column"
                         " marker (constraint fence_token_column), but fence.tables has no row for"
                         " this table (restored alone with pg_dump -t or pg_restore -t, or copied"
                         " with LIKE ... INCLUDING CONSTRAINTS): it takes writes without a token"
                         " until the install protects it again");
        /* A guard came back only where pg_dump's CREATE TRIGGER found its
         * function. */
        bool guarded = ac->how == BY_DUMP_T && ac->where == SAME_DB && (i == 1 || !ac->drop_orphans);
        ok(c, "BEGIN");
        fence_status st = run(c, "INSERT INTO orders VALUES (4, 0)", NULL);
        ok(c, "ROLLBACK");
        ck_assert_msg(st == (guarded ? FENCE_ENOTOKEN : FENCE_OK), "%s (%s): a write without a token: %s",
                      ac->name, impls[i], fence_status_name(st));

        /* The C guard came back whole (fence.protected lists it): the
         * install records it as it is, quietly; any other is recorded
         * from its marker and protected again, with a WARNING. */
        bool whole = guarded && i == 1;
        ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.protected WHERE tbl = 'orders'::regclass"),
                         whole ? 1 : 0);
        char warn[sizeof(notes)];
        snprintf(warn, sizeof warn, "%s", install(c));
        ck_assert_msg(whole ? warn[0] == '\0'
                            : strstr(warn, "public.orders carries fence's token column marker (column"
                                           " fence_token) but was not recorded") != NULL,
                      "%s (%s): the install's warnings: %.1500s", ac->name, impls[i], warn);
        ck_assert_str_eq(verify_lines(c), "");
        const char *impl = ac->where == SAME_DB && i == 1 ? "c" : "plpgsql";
        char want[128];
        snprintf(want, sizeof want, "orders fence_token strict %s", impl);
        ck_assert_str_eq(text1(c, "SELECT tbl::text || ' ' || col || ' ' || mode || ' ' || implementation"
                                  " FROM fence.tables WHERE tbl = 'orders'::regclass"),
                         want);
        snprintf(want, sizeof want, "orders fence_token strict %s false true", impl);
        ck_assert_str_eq(protected_list(c), want);
        expect_guarded(c, "orders", "fence_token", false, 7);
        ck_assert_str_eq(install(c), "");
        PQfinish(c);
    }
}
END_TEST

/* Guards tampered with in the source (a WHEN (false), an UPDATE OF, a
 * disabled trigger) come through pg_dump / pg_restore into the second
 * cluster as they were: fence.verify() names each there, fence.protected
 * lists none of them, and the install protects them again. */
START_TEST(tampered_guard_restored)
{
    char src[NAME_BUF], path[512];
    side_db("tsrc", NULL, src);
    PGconn *c = connect_as(src, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    install(c);
    static const char *const tables[] = {"t_when", "t_of", "t_off"};
    for (size_t i = 0; i < 3; i++) {
        char sql[512];
        snprintf(sql, sizeof sql,
                 "CREATE TABLE %s (id int PRIMARY KEY, v int, status text);"
                 "INSERT INTO %s VALUES (1, 0, 'a');"
                 "SELECT fence.protect('%s', 'fence_token', false, 'plpgsql')",
                 tables[i], tables[i], tables[i]);
        ok(c, sql);
    }
    char sql[1024], g_when[128], g_of[128];
    snprintf(g_when, sizeof g_when, "%s", guard_fn(c, "t_when"));
    snprintf(g_of, sizeof g_of, "%s", guard_fn(c, "t_of"));
    snprintf(sql, sizeof sql,
             "DROP TRIGGER zz_fence_guard_upd ON t_when; DROP TRIGGER zz_fence_guard_upd ON t_of;"
             "CREATE TRIGGER zz_fence_guard_upd BEFORE UPDATE ON t_when FOR EACH ROW WHEN (false)"
             " EXECUTE FUNCTION %s('fence_token', 'strict');"
             "CREATE TRIGGER zz_fence_guard_upd BEFORE UPDATE OF status ON t_of FOR EACH ROW"
             " EXECUTE FUNCTION %s('fence_token', 'strict');"
             "ALTER TABLE t_off DISABLE TRIGGER zz_fence_guard_del",
             g_when, g_of);
    ok(c, sql);
    PQfinish(c);
    dump(src, "tampered", path);
    c2_createdb("tampered");
    int rc = restore_as(g_c2_port, NULL, "tampered", "", path);
    ck_assert_msg(rc == 0, "pg_restore: %d %.1500s", rc, g_out);
    c = c2("tampered");
    ck_assert_str_eq(verify_lines(c), "t_of: trigger zz_fence_guard_upd fires only on UPDATE OF status\n"
                                      "t_off: trigger zz_fence_guard_del is disabled\n"
                                      "t_when: trigger zz_fence_guard_upd fires only WHEN (false)");
    ck_assert_str_eq(protected_list(c), "");
    ok(c, "BEGIN; UPDATE t_when SET v = 2; UPDATE t_of SET v = 2; DELETE FROM t_off; ROLLBACK");
    const char *warn = install(c);
    for (size_t i = 0; i < 3; i++) {
        char w[128];
        snprintf(w, sizeof w, "public.%s was not guarded", tables[i]);
        ck_assert_msg(strstr(warn, w) != NULL, "the install's warnings: %.1500s", warn);
    }
    ck_assert_str_eq(verify_lines(c), "");
    ck_assert_str_eq(protected_list(c), "t_of fence_token strict plpgsql false true,"
                                        "t_off fence_token strict plpgsql false true,"
                                        "t_when fence_token strict plpgsql false true");
    ck_assert_int_eq(write_raw(c, NULL, "UPDATE t_when SET v = 2", NULL), FENCE_ENOTOKEN);
    ck_assert_int_eq(write_raw(c, NULL, "UPDATE t_of SET v = 2", NULL), FENCE_ENOTOKEN);
    ck_assert_int_eq(write_raw(c, NULL, "DELETE FROM t_off", NULL), FENCE_ENOTOKEN);
    PQfinish(c);
}
END_TEST

/* A database of fence.sql version 4 as released (tests/pg/fence_v4.sql):
 * no markers, no fence.tables, no fence.advance_grants, and fence.advance
 * restricted the way version 4 documented (REVOKE from PUBLIC, GRANT to
 * the application's role).  The install records the tables, puts the
 * marker on each token column quietly (the installer, a superuser, may:
 * another role's table too), and records the ACL as the policy: nothing
 * to repair, the operator's REVOKE and GRANT kept.  Then a table of it
 * restored alone into the second cluster is found by its marker. */
START_TEST(install_over_version_4_marks_and_records)
{
    char d[NAME_BUF], app[NAME_BUF], other[NAME_BUF], path[512], sql[1024];
    side_role("v4app", app);
    side_role("v4other", other);
    side_db("v4", NULL, d);
    ck_assert_msg(access("tests/pg/fence_v4.sql", R_OK) == 0, "tests/pg/fence_v4.sql is missing");
    int rc = sh("'%s/psql' -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p %d -U postgres -d %s"
                " -f tests/pg/fence_v4.sql",
                bin(), main_port(), d);
    ck_assert_msg(rc == 0, "installing version 4: %d %.1500s", rc, g_out);
    PGconn *c = connect_as(d, NULL);
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    ck_assert_int_eq(num(c, "SELECT fence.version()"), 4);
    snprintf(sql, sizeof sql,
             "GRANT CREATE ON SCHEMA public TO %s;"
             "GRANT EXECUTE ON FUNCTION fence.protect(regclass, name, boolean) TO %s;"
             "CREATE TABLE v4t (id int PRIMARY KEY, v int); INSERT INTO v4t VALUES (1, 0);"
             "SELECT fence.protect('v4t');"
             "REVOKE EXECUTE ON FUNCTION fence.advance(text, bigint) FROM PUBLIC;"
             "GRANT EXECUTE ON FUNCTION fence.advance(text, bigint) TO %s",
             other, other, app);
    ok(c, sql);
    PGconn *o = connect_as(d, other);
    PQsetNoticeProcessor(o, quiet_notice, NULL);
    ok(o, "CREATE TABLE v4o (id int PRIMARY KEY, v int); INSERT INTO v4o VALUES (1, 0);"
          "SELECT fence.protect('v4o', 'fence_token', true)");
    PQfinish(o);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_constraint WHERE conname = 'fence_token_column'"), 0);

    ck_assert_str_eq(install(c), "");
    ck_assert_int_eq(write_tok(c, 6, "UPDATE v4t SET v = 1", NULL), FENCE_OK);
    ck_assert_str_eq(verify_list(c), "");
    ck_assert_str_eq(text1(c, "SELECT string_agg(t.tbl || ' ' || fence.is_token_column(t.tbl, t.col), ','"
                              " ORDER BY t.tbl::text) FROM fence.tables t"),
                     "v4o true,v4t true");
    ck_assert_str_eq(text1(c, "SELECT string_agg(grantee, ',') FROM fence.advance_grants"), app);
    ck_assert(may_advance(main_port(), d, app));
    ck_assert(!may_advance(main_port(), d, other));
    expect_guarded(c, "v4t", "fence_token", false, 6);
    ck_assert_str_eq(install(c), "");
    PQfinish(c);

    /* v4t alone into the second cluster. */
    dump(d, "v4", path);
    c2_createdb("v4alone");
    c = c2("v4alone");
    install(c);
    rc = restore_as(g_c2_port, NULL, "v4alone", "-t v4t", path);
    ck_assert_msg(rc == 0, "pg_restore -t v4t: %d %.1500s", rc, g_out);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.verify() WHERE tbl = 'v4t'::regclass"
                            " AND reason LIKE 'not recorded: %'"),
                     1);
    install(c);
    ck_assert_str_eq(verify_list(c), "");
    expect_guarded(c, "v4t", "fence_token", false, 6);
    PQfinish(c);
}
END_TEST

static Suite *pg_restore_suite(void)
{
    Suite *s = suite_create("pg_restore");
    TCase *t = pg_tcase("pg_restore");
    tcase_add_unchecked_fixture(t, cluster_start, cluster_stop);
    tcase_set_timeout(t, 60);
    tcase_add_test(t, restore_where_old_oids_are_other_relations);
    tcase_add_test(t, restore_into_fresh_cluster);
    if (pg_impl_note("test_pg_restore", "restore_with_and_without_extension and "
                                        "verify_names_every_fault not run, the other cases "
                                        "with the PL/pgSQL guard only")) {
        tcase_add_test(t, restore_with_and_without_extension);
        tcase_add_test(t, verify_names_every_fault);
    }
    tcase_add_test(t, install_migrates_an_oid_keyed_registry);
    tcase_add_test(t, data_only_restore);
    tcase_add_test(t, restore_keeps_the_privilege_policy);
    CT_ADD_CASES(t, table_restored_alone_is_protected_again, alone_cases);
    tcase_add_test(t, tampered_guard_restored);
    tcase_add_test(t, install_over_version_4_marks_and_records);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(pg_restore_suite());
}
