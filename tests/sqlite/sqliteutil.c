/* sqliteutil.c -- shared helpers of the SQLite suites (sqliteutil.h). */
#include "sqliteutil.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[PATH_MAX];

/* The token and holder each connection was last given through
 * su_set_tok / su_set_th, for su_again. */
static struct last_set {
    sqlite3 *db;
    uint64_t token;
    char holder[FENCE_HOLDER_LEN + 1];
} last[32];

static void forget(sqlite3 *db)
{
    for (size_t i = 0; i < sizeof last / sizeof last[0]; i++) {
        if (last[i].db == db) {
            last[i].db = NULL;
        }
    }
}

void su_setup(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/fence-sqlite-XXXXXX", base && *base ? base : "/tmp");
    ck_assert_msg(mkdtemp(g_dir) != NULL, "mkdtemp: %s", strerror(errno));
}

void su_teardown(void)
{
    DIR *d = opendir(g_dir);
    if (d == NULL) {
        return;
    }
    struct dirent *e;
    char path[PATH_MAX + 256];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            snprintf(path, sizeof path, "%s/%s", g_dir, e->d_name);
            unlink(path);
        }
    }
    closedir(d);
    rmdir(g_dir);
}

sqlite3 *su_open_plain(const char *file)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", g_dir, file);
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    ck_assert_msg(rc == SQLITE_OK, "open %s: %s", path, db ? sqlite3_errmsg(db) : "nomem");
    sqlite3_busy_timeout(db, 5000);
    ck_assert_int_eq(sqlite3_exec(db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL), SQLITE_OK);
    forget(db); /* a closed connection's address may come back */
    return db;
}

sqlite3 *su_open_fenced(const char *file)
{
    sqlite3 *db = su_open_plain(file);
    int rc = fence_sqlite_attach(db);
    ck_assert_msg(rc == FENCE_OK, "attach: %s", fence_sqlite_errmsg(db));
    return db;
}

void su_exec_ok(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
    ck_assert_msg(rc == SQLITE_OK, "'%s' failed: %s", sql, err ? err : "?");
}

void su_exec_file(sqlite3 *db, const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "open %s: %s", path, strerror(errno));
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    ck_assert_msg(feof(f), "%s is larger than %zu bytes", path, sizeof text - 1);
    fclose(f);
    text[n] = '\0';
    su_exec_ok(db, text);
}

int su_exec_rc(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

int64_t su_q_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "prepare '%s': %s",
                  sql, sqlite3_errmsg(db));
    ck_assert_msg(sqlite3_step(st) == SQLITE_ROW, "'%s' gave no row: %s", sql,
                  sqlite3_errmsg(db));
    int64_t v = sqlite3_column_type(st, 0) == SQLITE_NULL ? INT64_MIN
                                                           : sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

const char *su_q_text(sqlite3 *db, const char *sql)
{
    static char buf[512];
    sqlite3_stmt *st = NULL;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "prepare '%s': %s",
                  sql, sqlite3_errmsg(db));
    ck_assert_msg(sqlite3_step(st) == SQLITE_ROW, "'%s' gave no row", sql);
    const unsigned char *t = sqlite3_column_text(st, 0);
    snprintf(buf, sizeof buf, "%s", t ? (const char *)t : "(null)");
    sqlite3_finalize(st);
    return buf;
}

static struct last_set *last_of(sqlite3 *db)
{
    struct last_set *free_slot = NULL;
    for (size_t i = 0; i < sizeof last / sizeof last[0]; i++) {
        if (last[i].db == db) {
            return &last[i];
        }
        if (last[i].db == NULL && free_slot == NULL) {
            free_slot = &last[i];
        }
    }
    ck_assert_msg(free_slot != NULL, "sqliteutil: more than 32 connections");
    free_slot->db = db;
    return free_slot;
}

static void remember(sqlite3 *db, uint64_t t, const char *h)
{
    struct last_set *l = last_of(db);
    l->token = t;
    snprintf(l->holder, sizeof l->holder, "%s", h != NULL ? h : "");
}

void su_set_tok(sqlite3 *db, uint64_t t)
{
    ck_assert_int_eq(fence_sqlite_set_token(db, t, NULL), FENCE_OK);
    remember(db, t, NULL);
}

void su_again(sqlite3 *db)
{
    struct last_set *l = NULL;
    for (size_t i = 0; i < sizeof last / sizeof last[0] && l == NULL; i++) {
        l = last[i].db == db ? &last[i] : NULL;
    }
    if (l == NULL) {
        return; /* never given one */
    }
    ck_assert_int_eq(fence_sqlite_set_token(db, l->token, l->holder[0] ? l->holder : NULL),
                     FENCE_OK);
}

void su_tok_exec_ok(sqlite3 *db, uint64_t t, const char *sql)
{
    su_set_tok(db, t);
    su_exec_ok(db, sql);
}

void su_write_ok(sqlite3 *db, const char *sql)
{
    su_again(db);
    su_exec_ok(db, sql);
}

void su_expect_stale(sqlite3 *db, const char *sql, uint64_t offered, uint64_t highest,
                     fence_object_kind kind, const char *object)
{
    /* A token serves one write transaction: this one. */
    struct last_set *l = last_of(db);
    ck_assert_int_eq(fence_sqlite_set_token(db, offered, l->holder[0] ? l->holder : NULL),
                     FENCE_OK);
    int rc = su_exec_rc(db, sql);
    ck_assert_msg(rc == SQLITE_CONSTRAINT, "'%s' should be refused as stale, got %d (%s)", sql,
                  rc, sqlite3_errmsg(db));
    ck_assert_int_eq(sqlite3_extended_errcode(db), SQLITE_CONSTRAINT_TRIGGER);
    ck_assert_msg(strncmp(sqlite3_errmsg(db), "fence:stale ", 12) == 0, "message: %s",
                  sqlite3_errmsg(db));
    fence_stale e;
    fence_status st = fence_sqlite_classify(db, &e);
    ck_assert_int_eq(st, FENCE_STALE);
    /* classify reads the error; it leaves the code where it was. */
    ck_assert_int_eq(sqlite3_extended_errcode(db), SQLITE_CONSTRAINT_TRIGGER);
    ck_assert_uint_eq(e.offered, offered);
    ck_assert_uint_eq(e.highest, highest);
    ck_assert_int_eq(e.kind, kind);
    ck_assert_str_eq(e.object, object);
    ck_assert_str_eq(e.holder, "");
}

void su_expect_notoken(sqlite3 *db, const char *sql)
{
    int rc = su_exec_rc(db, sql);
    ck_assert_msg(rc != SQLITE_OK, "'%s' should be refused without a token", sql);
    ck_assert_msg(strncmp(sqlite3_errmsg(db), "fence:notoken ", 14) == 0, "message: %s",
                  sqlite3_errmsg(db));
    ck_assert_int_eq(fence_sqlite_classify(db, NULL), FENCE_ENOTOKEN);
}

sqlite3 *su_table_at_34(void)
{
    sqlite3 *db = su_open_fenced("t.db");
    su_exec_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, email TEXT UNIQUE)");
    su_exec_ok(db, "INSERT INTO t(id, v, email) VALUES (1, 'old', 'a@x'), (2, 'old', 'b@x')");
    ck_assert_int_eq(fence_sqlite_protect(db, "t", NULL), FENCE_OK);
    su_tok_exec_ok(db, 34, "UPDATE t SET v = 'by34' WHERE id = 1");
    return db;
}

int64_t su_count_fence_triggers(sqlite3 *db, const char *schema, const char *table)
{
    char *sql = sqlite3_mprintf("SELECT count(*) FROM %s.sqlite_master WHERE type = 'trigger' "
                                "AND tbl_name = %Q AND name LIKE 'fence\\_%%' ESCAPE '\\'",
                                schema, table);
    ck_assert_ptr_nonnull(sql);
    int64_t n = su_q_int(db, sql);
    sqlite3_free(sql);
    return n;
}

void su_set_th(sqlite3 *db, uint64_t t, const char *h)
{
    ck_assert_msg(fence_sqlite_set_token(db, t, h) == FENCE_OK, "set_token(%llu, %s): %s",
                  (unsigned long long)t, h ? h : "NULL", fence_sqlite_errmsg(db));
    remember(db, t, h);
}

void su_advance_ok(sqlite3 *db, const char *r)
{
    su_again(db);
    ck_assert_msg(fence_sqlite_advance(db, r, NULL) == FENCE_OK, "advance %s: %s", r,
                  fence_sqlite_errmsg(db));
}

const char *su_mark_holder(sqlite3 *db, const char *r)
{
    char *sql = sqlite3_mprintf("SELECT coalesce((SELECT coalesce(holder, '(none)') FROM "
                                "fence_resource WHERE name = %Q), '(no mark)')",
                                r);
    ck_assert_ptr_nonnull(sql);
    const char *v = su_q_text(db, sql);
    sqlite3_free(sql);
    return v;
}

uint64_t su_mark(sqlite3 *db, const char *r)
{
    uint64_t m = 99;
    ck_assert_int_eq(fence_sqlite_mark(db, r, &m), FENCE_OK);
    return m;
}

void su_expect_advance_stale(sqlite3 *db, const char *r, uint64_t offered, uint64_t highest,
                                 fence_stale_reason reason, const char *holder)
{
    fence_stale s;
    memset(&s, 0xab, sizeof s);
    su_again(db);
    ck_assert_int_eq(fence_sqlite_advance(db, r, &s), FENCE_STALE);
    ck_assert_uint_eq(s.offered, offered);
    ck_assert_uint_eq(s.highest, highest);
    ck_assert_int_eq(s.kind, FENCE_OBJECT_RESOURCE);
    ck_assert_str_eq(s.object, r);
    ck_assert_int_eq(s.reason, reason);
    ck_assert_str_eq(s.holder, holder);
    ck_assert_msg(strstr(fence_sqlite_errmsg(db), reason == FENCE_STALE_REPEAT
                                                      ? "reason=repeat"
                                                      : "reason=older") != NULL,
                  "%s", fence_sqlite_errmsg(db));
}
