/*
 * test_pg.c -- fence.sql (sql/postgres/) and libfence_pg against a real
 * PostgreSQL (scripts/with-servers --pg): install, per-row and
 * per-resource fencing in every interleaving, retrofit, modes, COPY,
 * TRUNCATE, the hot path, pipeline mode and prepared statements.  The
 * security review's cases are in test_pg_security.c, the C API's edges in
 * test_pg_api.c.  Each run creates its own database (installs fence.sql
 * into it twice) and its own application role, and drops both at the end.
 */
#include "casetable.h"
#include "pgutil.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/* Install                                                              */
/* ------------------------------------------------------------------ */

START_TEST(install_idempotent_and_versioned)
{
    PGconn *c = db();
    ck_assert_int_eq(num(c, "SELECT fence.version()"), PG_SQL_VERSION);
    ck_assert_int_eq(num(c, "SELECT version FROM fence.meta"), PG_SQL_VERSION);
    ck_assert_int_eq(fence_pg_install(c), FENCE_OK); /* third time */
    ck_assert_str_eq(fence_pg_errmsg(c), "");
    ck_assert_int_eq(fence_pg_install(c), FENCE_OK);

    size_t len = 0;
    const char *sql = fence_pg_install_sql(&len);
    ck_assert_ptr_nonnull(sql);
    ck_assert_uint_eq(strlen(sql), len);
    ck_assert_ptr_nonnull(strstr(sql, "CREATE SCHEMA fence"));
    ck_assert_ptr_nonnull(strstr(sql, "23Q01"));
    ck_assert_ptr_nonnull(strstr(sql, "fence.holder"));
    ck_assert_ptr_eq(fence_pg_install_sql(NULL), sql);

    /* Refused inside a transaction block (the script commits its own). */
    ok(c, "BEGIN");
    ck_assert_int_eq(fence_pg_install(c), FENCE_ESTATE);
    ck_assert_str_eq(fence_pg_sqlstate(c), ""); /* refused before reaching the server */
    ck_assert(strlen(fence_pg_errmsg(c)) > 0);
    ok(c, "ROLLBACK");

    /* A newer installed version is never downgraded; the failed install
     * leaves the connection idle and the schema as it was. */
    ok(c, "UPDATE fence.meta SET version = 99");
    ck_assert_int_eq(fence_pg_install(c), FENCE_EDB);
    ck_assert_ptr_nonnull(strstr(fence_pg_errmsg(c), "downgrade"));
    ck_assert_int_eq(PQtransactionStatus(c), PQTRANS_IDLE);
    ck_assert_int_eq(num(c, "SELECT version FROM fence.meta"), 99);
    ok(c, "UPDATE fence.meta SET version = 4");
    PQfinish(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Per-row                                                              */
/* ------------------------------------------------------------------ */

START_TEST(row_stale_update_delete_insert)
{
    PGconn *c = db();
    outcome e;
    make_table(c, "rs");
    ck_assert_int_eq(write_tok(c, 34, "UPDATE rs SET v = 1, by = 34 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM rs WHERE id = 1"), 34);

    /* Stale UPDATE: 23Q01, mapped to FENCE_STALE with both tokens. */
    ck_assert_int_eq(write_tok(c, 33, "UPDATE rs SET v = 2, by = 33 WHERE id = 1", &e),
                     FENCE_STALE);
    ck_assert_str_eq(e.sqlstate, "23Q01");
    ck_assert_uint_eq(e.stale.offered, 33);
    ck_assert_uint_eq(e.stale.highest, 34);
    ck_assert_int_eq(e.stale.kind, FENCE_OBJECT_TABLE);
    ck_assert_str_eq(e.stale.object, "public.rs");
    ck_assert_str_eq(e.message, "fence: stale token 33 for public.rs (highest seen 34)");

    /* Stale DELETE. */
    ck_assert_int_eq(write_tok(c, 33, "DELETE FROM rs WHERE id = 1", &e), FENCE_STALE);
    ck_assert_uint_eq(e.stale.offered, 33);
    ck_assert_uint_eq(e.stale.highest, 34);

    /* Stale INSERT: an upsert onto the existing row. */
    ck_assert_int_eq(write_tok(c, 33,
                               "INSERT INTO rs (id, v, by) VALUES (1, 3, 33) "
                               "ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, by = EXCLUDED.by",
                               &e),
                     FENCE_STALE);
    ck_assert_uint_eq(e.stale.offered, 33);
    ck_assert_uint_eq(e.stale.highest, 34);
    ck_assert_int_eq(num(c, "SELECT by FROM rs WHERE id = 1"), 34);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM rs"), 3);

    /* Equal admitted (many writes by one holder), higher admitted. */
    ck_assert_int_eq(write_tok(c, 34, "UPDATE rs SET v = v + 1 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(write_tok(c, 34, "UPDATE rs SET v = v + 1 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT v FROM rs WHERE id = 1"), 3);
    ck_assert_int_eq(write_tok(c, 35,
                               "INSERT INTO rs (id, v, by) VALUES (1, 9, 35) "
                               "ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, by = EXCLUDED.by",
                               &e),
                     FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM rs WHERE id = 1"), 35);
    ck_assert_int_eq(write_tok(c, 36, "INSERT INTO rs (id, v, by) VALUES (7, 7, 36)", &e),
                     FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM rs WHERE id = 7"), 36);
    ck_assert_int_eq(write_tok(c, 36, "DELETE FROM rs WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM rs WHERE id = 1"), 0);
    /* A multi-row statement stamps every row and fails as a whole. */
    ck_assert_int_eq(write_tok(c, 40, "UPDATE rs SET v = 0 WHERE id IN (2, 3)", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM rs WHERE fence_token = 40"), 2);
    ck_assert_int_eq(write_tok(c, 39, "UPDATE rs SET v = 5", &e), FENCE_STALE);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM rs WHERE v = 5"), 0);
    PQfinish(c);
}
END_TEST

START_TEST(row_client_cannot_write_the_column)
{
    PGconn *c = db();
    outcome e;
    make_table(c, "cw");
    ck_assert_int_eq(write_tok(c, 10, "UPDATE cw SET v = 1 WHERE id = 1", &e), FENCE_OK);
    /* Written values are overwritten with the writer's token. */
    ck_assert_int_eq(write_tok(c, 10, "UPDATE cw SET fence_token = 1000 WHERE id = 1", &e),
                     FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM cw WHERE id = 1"), 10);
    ck_assert_int_eq(write_tok(c, 11, "UPDATE cw SET fence_token = 0 WHERE id = 1", &e),
                     FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM cw WHERE id = 1"), 11);
    ck_assert_int_eq(write_tok(c, 12, "INSERT INTO cw (id, fence_token) VALUES (9, 999)", &e),
                     FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM cw WHERE id = 9"), 12);
    /* A stale writer that writes the column itself is still stale. */
    ck_assert_int_eq(write_tok(c, 5, "UPDATE cw SET fence_token = 99999, v = 5 WHERE id = 1", &e),
                     FENCE_STALE);
    ck_assert_int_eq(write_tok(c, 5, "UPDATE cw SET fence_token = 11, v = 5 WHERE id = 1", &e),
                     FENCE_STALE);
    /* Without a token, writing the column does not help either. */
    ck_assert_int_eq(write_raw(c, NULL, "UPDATE cw SET fence_token = 11 WHERE id = 1", &e),
                     FENCE_ENOTOKEN);
    ck_assert_int_eq(write_raw(c, NULL, "INSERT INTO cw (id, fence_token) VALUES (20, 50)", &e),
                     FENCE_ENOTOKEN);
    ck_assert_int_eq(num(c, "SELECT v FROM cw WHERE id = 1"), 1);
    PQfinish(c);
}
END_TEST

START_TEST(row_bad_tokens_rejected)
{
    static const char *const bad[] = {
        NULL, "", "abc", "-1", "0", "1.5", " 7", "7 ", "007", "+7", "1e3", "0x10",
        "9223372036854775808", "99999999999999999999", "18446744073709551616",
    };
    PGconn *c = db();
    outcome e;
    make_table(c, "bt");
    static const char *const writes[] = {
        "UPDATE bt SET v = 1 WHERE id = 1",
        "DELETE FROM bt WHERE id = 2",
        "INSERT INTO bt (id) VALUES (50)",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (size_t w = 0; w < 3; w++) {
            int st = write_raw(c, bad[i], writes[w], &e);
            ck_assert_msg(st == FENCE_ENOTOKEN, "token '%s' with '%s': %s %s",
                          bad[i] ? bad[i] : "(none)", writes[w], fence_status_name(st),
                          e.message);
            ck_assert_str_eq(e.sqlstate, "23Q02");
            ck_assert_msg(strncmp(e.message, "fence: ", 7) == 0 &&
                              strstr(e.message, "public.bt") != NULL,
                          "unclear message: %s", e.message);
            ck_assert_msg(strstr(e.message, "invalid input") == NULL, "cast error leaked: %s",
                          e.message);
        }
    }
    ck_assert_int_eq(num(c, "SELECT count(*) FROM bt WHERE v = 0"), 3);
    /* The largest valid token is accepted. */
    ck_assert_int_eq(write_raw(c, "9223372036854775807", "UPDATE bt SET v = 1 WHERE id = 1", &e),
                     FENCE_OK);
    /* current_token() parses the same way. */
    ck_assert_int_eq(write_raw(c, "1.5", "SELECT fence.current_token()", &e), FENCE_ENOTOKEN);
    ck_assert_int_eq(write_raw(c, "77", "SELECT fence.current_token()", &e), FENCE_OK);
    /* advance refuses tokens <= 0. */
    ck_assert_int_eq(run(c, "SELECT fence.advance('bt', 0)", &e), FENCE_ENOTOKEN);
    ck_assert_int_eq(run(c, "SELECT fence.advance('bt', -5)", &e), FENCE_ENOTOKEN);
    ck_assert_int_eq(run(c, "SELECT fence.advance('bt', NULL)", &e), FENCE_ENOTOKEN);
    ck_assert_int_eq(run(c, "SELECT fence.advance('', 5)", &e), FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "22023");
    PQfinish(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Two sessions, tokens 33 and 34, every interleaving                   */
/* ------------------------------------------------------------------ */

/* A statement (or a set_token) run on its own thread, for the cases where
 * one session blocks on the other's lock. */
typedef struct job {
    PGconn *c;
    const char *sql;      /* NULL: fence_pg_set_token(c, tok, NULL, resource) */
    uint64_t tok;
    const char *resource;
    int status;
    outcome err;
    pthread_t th;
} job;

static void *job_main(void *arg)
{
    job *j = arg;
    if (j->sql == NULL) {
        j->status = set_tok(j->c, j->tok, j->resource, &j->err);
    } else {
        j->status = run(j->c, j->sql, &j->err);
    }
    return NULL;
}

static void job_start(job *j)
{
    ck_assert_int_eq(pthread_create(&j->th, NULL, job_main, j), 0);
}

/* Join within timeout_ms; fails the test if the job is still running. */
static void job_join(job *j, int timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    int rc = pthread_timedjoin_np(j->th, NULL, &ts);
    ck_assert_msg(rc == 0, "the blocked statement did not finish within %d ms", timeout_ms);
}

/* Wait (bounded) until the backend of c is waiting on a lock. */
static void wait_blocked(PGconn *watch, PGconn *c)
{
    char sql[160];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_stat_activity WHERE pid = %d AND wait_event_type = 'Lock'",
             PQbackendPID(c));
    int64_t end = tu_now_ms() + 5000;
    while (num(watch, sql) != 1) {
        ck_assert_msg(tu_now_ms() < end, "session never blocked on the row lock");
        tu_sleep_ms(2);
    }
}

/* The interleavings.  mode 0: per-row (protected table, token via
 * set_token); mode 1: per-resource (plain table, fence.advance on a
 * resource).  Every interleaving ends by checking that the row ends up
 * written by 34 and stamped 34 (or the resource's mark is 34). */
enum { ROW = 0, RES = 1 };

typedef struct pair {
    PGconn *a, *b, *watch; /* a: token 33, b: token 34 */
    char table[64];
    char resource[64];
    int mode;
} pair;

static void pair_open(pair *p, int mode, const char *name)
{
    p->mode = mode;
    p->a = db();
    p->b = db();
    p->watch = db();
    snprintf(p->table, sizeof p->table, "%s", name);
    snprintf(p->resource, sizeof p->resource, "res/%s", name);
    char sql[256];
    snprintf(sql, sizeof sql, "CREATE TABLE %s (id int PRIMARY KEY, by bigint)", name);
    ok(p->watch, sql);
    snprintf(sql, sizeof sql, "INSERT INTO %s VALUES (1, 0)", name);
    ok(p->watch, sql);
    if (mode == ROW) {
        snprintf(sql, sizeof sql, "SELECT fence.protect('%s')", name);
        ok(p->watch, sql);
    }
}

static void pair_close(pair *p)
{
    PQfinish(p->a);
    PQfinish(p->b);
    PQfinish(p->watch);
}

static void pair_begin(pair *p, PGconn *c, uint64_t tok)
{
    ok(c, "BEGIN");
    outcome e;
    /* Per-resource: token set here, fence.advance at the write. */
    int st = set_tok(c, tok, NULL, &e);
    ck_assert_msg(st == FENCE_OK, "%s", e.message);
    (void)p;
}

/* The write of the token holder: advance (per-resource) + update. */
static int pair_write(pair *p, PGconn *c, uint64_t tok, outcome *e)
{
    char sql[256];
    if (p->mode == RES) {
        int st = set_tok(c, tok, p->resource, e);
        if (st != FENCE_OK) {
            return st;
        }
    }
    snprintf(sql, sizeof sql, "UPDATE %s SET by = %" PRIu64 " WHERE id = 1", p->table, tok);
    return run(c, sql, e);
}

static void pair_end(PGconn *c, int st)
{
    ok(c, st == FENCE_OK ? "COMMIT" : "ROLLBACK");
}

static void pair_check(pair *p)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT by FROM %s WHERE id = 1", p->table);
    ck_assert_int_eq(num(p->watch, sql), 34);
    if (p->mode == ROW) {
        snprintf(sql, sizeof sql, "SELECT fence_token FROM %s WHERE id = 1", p->table);
        ck_assert_int_eq(num(p->watch, sql), 34);
    } else {
        uint64_t mark = 0;
        ck_assert_int_eq(fence_pg_mark(p->watch, p->resource, &mark), FENCE_OK);
        ck_assert_uint_eq(mark, 34);
    }
}

static void expect_stale(int st, const outcome *e, const pair *p)
{
    ck_assert_msg(st == FENCE_STALE, "33 was not rejected: %s %s", fence_status_name(st),
                  e->message);
    ck_assert_uint_eq(e->stale.offered, 33);
    ck_assert_uint_eq(e->stale.highest, 34);
    ck_assert_int_eq(e->stale.kind,
                     p->mode == RES ? FENCE_OBJECT_RESOURCE : FENCE_OBJECT_TABLE);
    if (p->mode == RES) {
        ck_assert_str_eq(e->stale.object, p->resource);
    }
}

/* The five interleavings, as scripts of steps by the session holding
 * token 33 (a) or 34 (b).  A write's expected outcome is part of its step;
 * END commits when the session's last write was admitted, else rolls
 * back. */
enum op {
    DONE = 0,        /* the end of a script */
    BEGIN,           /* BEGIN, token set */
    WRITE,           /* pair_write: admitted */
    WRITE_STALE,     /* pair_write: rejected as stale */
    WRITE_BLOCKS,    /* the write (per-resource: the advance) on a thread: blocks */
    UNBLOCKED,       /* ... once released: admitted (per-resource: then the UPDATE) */
    UNBLOCKED_STALE, /* ... once released: rejected as stale */
    END,
};

typedef struct step {
    int tok; /* 33 or 34: whose step */
    enum op op;
} step;

typedef struct script {
    step steps[8];
} script;

/* 33 first (begin, write, commit), then 34. */
static const script sequential = {
    {{33, BEGIN}, {33, WRITE}, {33, END}, {34, BEGIN}, {34, WRITE}, {34, END}},
};
/* 34 first, then 33: rejected. */
static const script reversed = {
    {{34, BEGIN}, {34, WRITE}, {34, END}, {33, BEGIN}, {33, WRITE_STALE}, {33, END}},
};
/* 33 begins, 34 begins, 34 writes and commits, 33 writes: rejected. */
static const script overlapping = {
    {{33, BEGIN}, {34, BEGIN}, {34, WRITE}, {34, END}, {33, WRITE_STALE}, {33, END}},
};
/* 33 writes; 34 writes and blocks on the lock; 33 commits; 34 goes on and commits. */
static const script blocking = {
    {{33, BEGIN}, {33, WRITE}, {34, BEGIN}, {34, WRITE_BLOCKS}, {33, END}, {34, UNBLOCKED},
     {34, END}},
};
/* 34 writes; 33 writes and blocks; 34 commits; 33 is rejected. */
static const script blocking_stale = {
    {{34, BEGIN}, {34, WRITE}, {33, BEGIN}, {33, WRITE_BLOCKS}, {34, END},
     {33, UNBLOCKED_STALE}, {33, END}},
};

/* Every interleaving in both modes, each on a table of its own. */
static const struct {
    const char *name; /* also the table's name */
    int mode;
    const script *script;
} interleavings[] = {
    {"il_row_seq", ROW, &sequential},      {"il_row_rev", ROW, &reversed},
    {"il_row_ovl", ROW, &overlapping},     {"il_row_blk", ROW, &blocking},
    {"il_row_blks", ROW, &blocking_stale}, {"il_res_seq", RES, &sequential},
    {"il_res_rev", RES, &reversed},        {"il_res_ovl", RES, &overlapping},
    {"il_res_blk", RES, &blocking},        {"il_res_blks", RES, &blocking_stale},
};

START_TEST(interleaving)
{
    const int mode = interleavings[_i].mode;
    pair p;
    outcome e;
    job j;
    char sql[256];                        /* the blocked session's UPDATE */
    int last[2] = {FENCE_OK, FENCE_OK}; /* the last write's status: 33's, 34's */
    pair_open(&p, mode, interleavings[_i].name);
    for (const step *s = interleavings[_i].script->steps; s->op != DONE; s++) {
        PGconn *c = s->tok == 33 ? p.a : p.b;
        int *st = &last[s->tok == 34];
        switch (s->op) {
        case BEGIN:
            pair_begin(&p, c, (uint64_t)s->tok);
            break;
        case WRITE:
            *st = pair_write(&p, c, (uint64_t)s->tok, &e);
            ck_assert_msg(*st == FENCE_OK, "%s", e.message);
            break;
        case WRITE_STALE:
            *st = pair_write(&p, c, (uint64_t)s->tok, &e);
            expect_stale(*st, &e, &p);
            break;
        case WRITE_BLOCKS:
            snprintf(sql, sizeof sql, "UPDATE %s SET by = %d WHERE id = 1", p.table, s->tok);
            j = (job){.c = c, .sql = mode == ROW ? sql : NULL, .tok = (uint64_t)s->tok,
                      .resource = p.resource};
            job_start(&j);
            wait_blocked(p.watch, c);
            break;
        case UNBLOCKED:
            job_join(&j, 5000);
            *st = j.status;
            ck_assert_msg(j.status == FENCE_OK, "%s", j.err.message);
            if (mode == RES) {
                ck_assert_int_eq(run(c, sql, &e), FENCE_OK);
            }
            break;
        case UNBLOCKED_STALE:
            job_join(&j, 5000);
            *st = j.status;
            expect_stale(j.status, &j.err, &p);
            break;
        case END:
            pair_end(c, *st);
            break;
        case DONE:
            break;
        }
    }
    pair_check(&p);
    pair_close(&p);
}
END_TEST

/* A new resource created concurrently by 33 and 34 (both INSERT paths). */
START_TEST(resource_concurrent_create)
{
    PGconn *a = db(), *b = db(), *w = db();
    outcome e;
    ok(a, "BEGIN");
    ck_assert_int_eq(set_tok(a, 34, "fresh", &e), FENCE_OK);
    ok(b, "BEGIN");
    job j = {.c = b, .sql = NULL, .tok = 33, .resource = "fresh"};
    job_start(&j);
    wait_blocked(w, b);
    ok(a, "COMMIT");
    job_join(&j, 5000);
    ck_assert_int_eq(j.status, FENCE_STALE);
    ck_assert_uint_eq(j.err.stale.highest, 34);
    ok(b, "ROLLBACK");

    /* Equal admitted, mark readable, never lowered even by its owner. */
    ok(a, "BEGIN");
    ck_assert_int_eq(set_tok(a, 34, "fresh", &e), FENCE_OK);
    ck_assert_int_eq(set_tok(a, 34, "fresh", &e), FENCE_OK);
    ok(a, "COMMIT");
    uint64_t m = 0;
    ck_assert_int_eq(fence_pg_mark(w, "fresh", &m), FENCE_OK);
    ck_assert_uint_eq(m, 34);
    ck_assert_int_eq(fence_pg_mark(w, "never-seen", &m), FENCE_OK);
    ck_assert_uint_eq(m, 0);
    fails(w, "UPDATE fence.marks SET token = 1 WHERE resource = 'fresh'", "23Q03");
    fails(w, "UPDATE fence.marks SET resource = 'other' WHERE resource = 'fresh'", "23Q03");
    fails(w, "DELETE FROM fence.marks WHERE resource = 'fresh'", "23Q03");
    fails(w, "TRUNCATE fence.marks", "23Q03");
    ck_assert_int_eq(num(w, "SELECT fence.mark('fresh')"), 34);
    PQfinish(a);
    PQfinish(b);
    PQfinish(w);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Retrofit, modes, COPY, TRUNCATE, unprotect                           */
/* ------------------------------------------------------------------ */

/* The retrofit of a table whose application (an ORM: ActiveRecord's
 * lock_version, SQLAlchemy's version_id_col) keeps a version counter:
 * fence never takes the counter over (it would overwrite the ORM's old+1
 * with the token, so that one holder's writes leave one version: lost
 * updates and false conflicts, issue 26); it stamps a column of its own
 * beside it, and the application's optimistic UPDATE keeps its meaning. */
START_TEST(retrofit_beside_lock_version)
{
    PGconn *c = db();
    outcome e;
    ok(c, "CREATE TABLE posts (id serial PRIMARY KEY, title text, lock_version integer DEFAULT 0);"
          "INSERT INTO posts (title, lock_version) VALUES ('a', NULL), ('b', 3), ('c', 0)");
    stmt_res r = stmt_exec(c, "SELECT fence.protect('posts', 'lock_version')");
    expect_stmt_err(&r, "22023", NULL, NULL, "protect('posts', 'lock_version')");
    ck_assert_msg(strstr(r.msg, "column lock_version of public.posts is not fence's token column") != NULL,
                  "%s", r.msg);
    ck_assert_msg(strstr(r.hint, "SELECT fence.protect('public.posts')") != NULL, "%s", r.hint);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'posts'::regclass"), 0);

    ok(c, "SELECT fence.protect('posts')");
    /* lock_version is as it was; fence_token is fence's, with its mark. */
    ck_assert_str_eq(text1(c, "SELECT format_type(atttypid, atttypmod) || ' ' || attnotnull FROM pg_attribute"
                              " WHERE attrelid = 'posts'::regclass AND attname = 'lock_version'"),
                     "integer false");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM posts WHERE lock_version IS NULL"), 1);
    ck_assert_str_eq(text1(c, "SELECT format_type(atttypid, atttypmod) || ' ' || attnotnull || ' '"
                              " || pg_get_expr(adbin, adrelid) FROM pg_attribute"
                              " JOIN pg_attrdef ON adrelid = attrelid AND adnum = attnum"
                              " WHERE attrelid = 'posts'::regclass AND attname = 'fence_token'"),
                     "bigint true 0");
    ck_assert_str_eq(text1(c, "SELECT string_agg(col, ',') FROM fence.token_columns WHERE tbl = 'posts'::regclass"),
                     "fence_token");
    ck_assert_str_eq(text1(c, "SELECT fence.is_token_column('posts', 'fence_token') || ' '"
                              " || fence.is_token_column('posts', 'lock_version')"),
                     "true false");
    ck_assert_str_eq(text1(c, "SELECT col || ' ' || mode FROM fence.protected"
                              " WHERE tbl = 'posts'::regclass"),
                     "fence_token strict");

    /* The application's optimistic UPDATE, word for word: its counter
     * goes up by one per write, whoever writes, and a stale version still
     * matches no row; the token goes to fence_token. */
#define BUMP                                                                                 \
    "UPDATE posts SET title = title || '+', lock_version = lock_version + 1 WHERE id = 2 AND" \
    " lock_version = %d"
    char sql[256];
    snprintf(sql, sizeof sql, BUMP, 3);
    ck_assert_int_eq(write_tok(c, 5, sql, &e), FENCE_OK);
    snprintf(sql, sizeof sql, BUMP, 4); /* the same holder again: a new version */
    ck_assert_int_eq(write_tok(c, 5, sql, &e), FENCE_OK);
    ck_assert_str_eq(text1(c, "SELECT title || ' ' || lock_version || ' ' || fence_token FROM posts WHERE id = 2"),
                     "b++ 5 5");
    snprintf(sql, sizeof sql, BUMP, 4); /* a copy loaded before: no row */
    ok(c, "BEGIN; SELECT fence.use_token(6)");
    PGresult *res = PQexec(c, sql);
    ck_assert_str_eq(PQcmdTuples(res), "0");
    PQclear(res);
    ok(c, "COMMIT");
    /* Fencing: an older token is refused, even with the right version. */
    snprintf(sql, sizeof sql, BUMP, 5);
    ck_assert_int_eq(write_tok(c, 4, sql, &e), FENCE_STALE);
    ck_assert_uint_eq(e.stale.highest, 5);
    ck_assert_int_eq(num(c, "SELECT lock_version FROM posts WHERE id = 2"), 5);
#undef BUMP

    /* Protect again: idempotent, nothing changes.  The four guards, no
     * AFTER check (no BEFORE trigger fires after the guard). */
    ok(c, "SELECT fence.protect('posts')");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'posts'::regclass"
                            " AND tgname LIKE 'zz_fence_guard_%'"),
                     4);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'posts'::regclass"
                            " AND tgname LIKE 'zz_fence_%'"),
                     4);
    ck_assert_str_eq(text1(c, "SELECT implementation || ' ' || check_needed || ' ' || check_present"
                              " FROM fence.protected WHERE tbl = 'posts'::regclass"),
                     strcmp(pg_impl(), "c") == 0 ? "c false true" : "plpgsql false true");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'posts'::regclass"
                            " AND tgqual IS NOT NULL"),
                     0); /* no WHEN clause */
    ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.token_columns WHERE tbl = 'posts'::regclass"), 1);

    /* Unprotected, the column stays with its stamps (its marker goes:
     * fence.unprotect()); protect() takes fence_token up again by its
     * name, stale still refused, and lock_version is still refused. */
    ok(c, "SELECT fence.unprotect('posts')");
    ck_assert_int_eq(num(c, "SELECT fence_token FROM posts WHERE id = 2"), 5);
    fails(c, "SELECT fence.protect('posts', 'lock_version')", "22023");
    ok(c, "SELECT fence.protect('posts')");
    ck_assert_int_eq(write_tok(c, 4, "UPDATE posts SET title = 'x' WHERE id = 2", &e), FENCE_STALE);

    /* A column with fence's marker is fence's: taken up, whether the
     * marker came from fence.mark_token_column() or was written by hand
     * (as pg_dump writes it).  Without the marker (or with a constraint of
     * the marker's name that is not the marker), or not a bigint:
     * refused; so is another column while one carries the marker. */
    ok(c, "CREATE TABLE v8 (id int, ver bigint); INSERT INTO v8 VALUES (1, 0), (2, 7);"
          "SELECT fence.mark_token_column('v8', 'ver')");
    ok(c, "SELECT fence.protect('v8', 'ver')");
    ck_assert_int_eq(num(c, "SELECT sum(ver) FROM v8"), 7);
    ck_assert_str_eq(text1(c, "SELECT col FROM fence.protected WHERE tbl = 'v8'::regclass"), "ver");
    ok(c, "CREATE TABLE v9 (id int, ver bigint CONSTRAINT fence_token_column CHECK (ver IS NOT NULL))");
    ok(c, "SELECT fence.protect('v9', 'ver')");
    ok(c, "CREATE TABLE vu (id int, ver bigint)");
    r = stmt_exec(c, "SELECT fence.protect('vu', 'ver')");
    expect_stmt_err(&r, "22023", NULL, NULL, "protect('vu', 'ver')");
    ck_assert_msg(strstr(r.hint, "SELECT fence.mark_token_column('public.vu', 'ver')") != NULL, "%s", r.hint);
    ok(c, "CREATE TABLE vt (id int, ver integer CONSTRAINT fence_token_column CHECK (ver IS NOT NULL))");
    fails(c, "SELECT fence.protect('vt', 'ver')", "22023");
    ok(c, "CREATE TABLE vc (id int, ver bigint, CONSTRAINT fence_token_column CHECK (id > 0 AND ver > 0))");
    fails(c, "SELECT fence.protect('vc', 'ver')", "22023");
    ok(c, "CREATE TABLE vm (id int, stamp bigint NOT NULL DEFAULT 0 CONSTRAINT fence_token_column CHECK (stamp IS NOT NULL))");
    r = stmt_exec(c, "SELECT fence.protect('vm')");
    expect_stmt_err(&r, "22023", NULL, NULL, "protect('vm') with the marker on stamp");
    ck_assert_msg(strstr(r.hint, "SELECT fence.protect('public.vm', 'stamp')") != NULL, "%s", r.hint);
    ok(c, "CREATE VIEW vv AS SELECT 1 AS x");
    fails(c, "SELECT fence.protect('vv')", "22023");
    fails(c, "SELECT fence.protect('no_such_table')", "42P01");
    PQfinish(c);
}
END_TEST

START_TEST(permissive_mode)
{
    PGconn *c = db();
    outcome e;
    make_table(c, "pm");
    ck_assert_int_eq(write_tok(c, 20, "UPDATE pm SET v = 1 WHERE id = 1", &e), FENCE_OK);
    ok(c, "SELECT fence.set_mode('pm', 'permissive')");
    ck_assert_str_eq(text1(c, "SELECT mode FROM fence.protected WHERE tbl = 'pm'::regclass"),
                     "permissive");
    /* No token: admitted, the stamp stays (UPDATE) or is 0 (INSERT). */
    ck_assert_int_eq(write_raw(c, NULL, "UPDATE pm SET v = 2 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(write_raw(c, "", "UPDATE pm SET v = 3, fence_token = 99 WHERE id = 1", &e),
                     FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM pm WHERE id = 1"), 20);
    ck_assert_int_eq(write_raw(c, NULL, "INSERT INTO pm (id, fence_token) VALUES (8, 50)", &e),
                     FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM pm WHERE id = 8"), 0);
    ck_assert_int_eq(write_raw(c, NULL, "DELETE FROM pm WHERE id = 8", &e), FENCE_OK);
    /* Stale and malformed tokens are still rejected. */
    ck_assert_int_eq(write_tok(c, 19, "UPDATE pm SET v = 4 WHERE id = 1", &e), FENCE_STALE);
    ck_assert_int_eq(write_raw(c, "abc", "UPDATE pm SET v = 4 WHERE id = 1", &e), FENCE_ENOTOKEN);
    ck_assert_int_eq(write_raw(c, "0", "UPDATE pm SET v = 4 WHERE id = 1", &e), FENCE_ENOTOKEN);
    ck_assert_int_eq(write_tok(c, 21, "UPDATE pm SET v = 5 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM pm WHERE id = 1"), 21);
    /* And back. */
    ok(c, "SELECT fence.set_mode('pm', 'strict')");
    ck_assert_int_eq(write_raw(c, NULL, "UPDATE pm SET v = 6 WHERE id = 1", &e), FENCE_ENOTOKEN);
    fails(c, "SELECT fence.set_mode('pm', 'lenient')", "22023");
    ok(c, "CREATE TABLE pm_unprotected (id int)");
    fails(c, "SELECT fence.set_mode('pm_unprotected', 'strict')", "22023");
    /* protect(..., permissive => true) does the same. */
    ok(c, "SELECT fence.protect('pm', permissive => true)");
    ck_assert_int_eq(write_raw(c, NULL, "UPDATE pm SET v = 7 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT v FROM pm WHERE id = 1"), 7);
    PQfinish(c);
}
END_TEST

/* COPY FROM STDIN of rows, in a transaction with raw token (NULL: none);
 * returns the status of the COPY. */
static int copy_rows(PGconn *c, const char *raw, const char *copy, const char *data,
                     outcome *e)
{
    ok(c, "BEGIN");
    if (raw != NULL) {
        char set[256];
        snprintf(set, sizeof set,
                 "SELECT pg_catalog.set_config('fence.token', '%s', true),"
                 " pg_catalog.set_config('fence.xact', pg_catalog.pg_current_xact_id()::text, true)",
                 raw);
        ok(c, set);
    }
    PGresult *r = PQexec(c, copy);
    ck_assert_int_eq(PQresultStatus(r), PGRES_COPY_IN);
    PQclear(r);
    ck_assert_int_eq(PQputCopyData(c, data, (int)strlen(data)), 1);
    ck_assert_int_eq(PQputCopyEnd(c, NULL), 1);
    r = PQgetResult(c);
    fence_status st = note(c, fence_pg_classify(c, r, &e->stale), e);
    PQclear(r);
    while ((r = PQgetResult(c)) != NULL) {
        PQclear(r);
    }
    ok(c, st == FENCE_OK ? "COMMIT" : "ROLLBACK");
    return st;
}

START_TEST(copy_is_fenced)
{
    PGconn *c = db();
    outcome e;
    make_table(c, "cp");
    ck_assert_int_eq(copy_rows(c, NULL, "COPY cp (id, v) FROM STDIN", "10\t1\n11\t1\n", &e),
                     FENCE_ENOTOKEN);
    ck_assert_int_eq(copy_rows(c, "abc", "COPY cp (id, v) FROM STDIN", "10\t1\n", &e),
                     FENCE_ENOTOKEN);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM cp"), 3);
    ck_assert_int_eq(copy_rows(c, "42", "COPY cp (id, v, fence_token) FROM STDIN",
                               "10\t1\t999\n11\t1\t1\n", &e),
                     FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM cp WHERE fence_token = 42"), 2);
    PQfinish(c);
}
END_TEST

START_TEST(truncate_refused_and_unprotect)
{
    PGconn *c = db();
    outcome e;
    make_table(c, "tr");
    int st = run(c, "TRUNCATE tr", &e);
    ck_assert_int_eq(st, FENCE_EDB);
    ck_assert_str_eq(e.sqlstate, "23Q03");
    ck_assert_ptr_nonnull(strstr(e.message, "public.tr"));
    ck_assert_int_eq(num(c, "SELECT count(*) FROM tr"), 3);

    ok(c, "SELECT fence.unprotect('tr')");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'tr'::regclass"), 0);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM fence.protected WHERE tbl = 'tr'::regclass"), 0);
    ok(c, "UPDATE tr SET v = 9"); /* no token needed any more */
    ok(c, "SELECT fence.unprotect('tr')"); /* again: no error */
    ok(c, "TRUNCATE tr");
    ok(c, "SELECT fence.protect('tr')"); /* and back */
    ck_assert_int_eq(write_raw(c, NULL, "INSERT INTO tr (id) VALUES (1)", &e), FENCE_ENOTOKEN);
    PQfinish(c);
}
END_TEST

/* The holder's hot path: one call of the table's guard per row and
 * nothing else -- no AFTER check is attached (no BEFORE trigger fires after
 * the guard), so no AFTER event is queued either.  Version 3 skipped the
 * guard with WHEN clauses, which PostgreSQL prepared for every statement;
 * version 4's guard does its own fast path.  A new token: the guard per
 * row, still no check. */
START_TEST(row_hot_path_runs_only_the_guard)
{
    PGconn *c = db();
    outcome e;
    make_table(c, "hp");
    ck_assert_int_eq(write_tok(c, 21, "UPDATE hp SET v = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'hp'::regclass"
                            " AND (tgname LIKE 'zz_fence_check_%' OR tgqual IS NOT NULL)"),
                     0);
    /* Calls counted since the last flush of the session's statistics,
     * which never happens inside a transaction: compare within one.
     * 'all' counts the C extension's functions too; the guard is
     * fence.guard_<oid> (plpgsql) or fence.c_guard (c; for an UPDATE whose
     * plan computes the guard's rule, fence.c_stamp instead: the same
     * count, one call per row), a check any of fence.check_<oid>,
     * c_check, row_check. */
    static const char calls[] =
        "SELECT coalesce(sum(calls) FILTER (WHERE funcname ~ '^(guard_[0-9]|c_guard$|c_stamp$|row_guard$)'), 0)"
        " * 1000 + coalesce(sum(calls) FILTER (WHERE funcname ~ '^(check_[0-9]|c_check$|row_check$)'), 0)"
        " FROM pg_stat_xact_user_functions WHERE schemaname = 'fence'";
    ok(c, "SET track_functions = 'all'");
    begin_tok(c, 21, NULL);
    long long base = num(c, calls);
    ok(c, "UPDATE hp SET v = v + 1"); /* 3 rows stamped 21 */
    ck_assert_int_eq(num(c, calls) - base, 3000);
    ok(c, "INSERT INTO hp (id, v) VALUES (10, 0)"); /* no stamp yet: guard */
    ck_assert_int_eq(num(c, calls) - base, 4000);
    ok(c, "UPDATE hp SET v = v + 1"); /* 4 rows stamped 21 */
    ck_assert_int_eq(num(c, calls) - base, 8000);
    ok(c, "COMMIT");
    begin_tok(c, 22, NULL);
    base = num(c, calls);
    static const char by_fn[] =
        "SELECT coalesce(sum(calls) FILTER (WHERE funcname = 'c_guard'), 0) * 1000"
        " FROM pg_stat_xact_user_functions WHERE schemaname = 'fence'";
    long long fn0 = num(c, by_fn);
    ok(c, "UPDATE hp SET v = v + 1"); /* a new token: the guard per row */
    ck_assert_int_eq(num(c, calls) - base, 4000);
    /* In the "c" run the C guard fired for every row. */
    if (strcmp(pg_impl(), "c") == 0) {
        ck_assert_int_eq(num(c, by_fn) - fn0, 4000);
    }
    ok(c, "COMMIT");
    ck_assert_int_eq(num(c, "SELECT count(*) FROM hp WHERE fence_token = 22"), 4);
    PQfinish(c);
}
END_TEST

/* Finding 2: a BEFORE trigger that fires after zz_fence_guard_* cannot
 * rewrite the stamp (which would switch fencing off for everyone). */
/* ------------------------------------------------------------------ */
/* Pipeline mode: one round trip in autocommit                          */
/* ------------------------------------------------------------------ */

/* Send token + sql + sync (no holder); the status of sql's result. */
static int pipelined(PGconn *c, uint64_t tok, const char *resource, const char *sql,
                     outcome *e)
{
    return pipelined_h(c, tok, NULL, resource, sql, e);
}

START_TEST(pipeline_send_token)
{
    PGconn *c = db();
    outcome e;
    make_table(c, "pl");
    ck_assert_int_eq(pipelined(c, 30, NULL, "UPDATE pl SET v = 1 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM pl WHERE id = 1"), 30);
    ck_assert_int_eq(pipelined(c, 29, NULL, "UPDATE pl SET v = 2 WHERE id = 1", &e), FENCE_STALE);
    ck_assert_uint_eq(e.stale.highest, 30);
    ck_assert_int_eq(pipelined(c, 31, "pl-res", "UPDATE pl SET v = 3 WHERE id = 1", &e),
                     FENCE_OK);
    ck_assert_int_eq(pipelined(c, 30, "pl-res", "UPDATE pl SET v = 4 WHERE id = 2", &e),
                     FENCE_STALE);
    ck_assert_int_eq(e.stale.kind, FENCE_OBJECT_RESOURCE);
    ck_assert_int_eq(num(c, "SELECT sum(v) FROM pl"), 3);
    /* After the sync the token is gone: fail closed. */
    ck_assert_int_eq(run(c, "UPDATE pl SET v = 5 WHERE id = 1", &e), FENCE_ENOTOKEN);
    PQfinish(c);
}
END_TEST

START_TEST(prepared_statements)
{
    PGconn *c = db();
    outcome e;
    make_table(c, "pp");
    ck_assert_int_eq(fence_pg_prepare(NULL), FENCE_EINVAL);
    ok(c, "BEGIN");
    ck_assert_int_eq(fence_pg_prepare(c), FENCE_ESTATE);
    ok(c, "ROLLBACK");
    ck_assert_int_eq(fence_pg_prepare(c), FENCE_OK);
    ck_assert_int_eq(fence_pg_prepare(c), FENCE_OK); /* again: harmless */
    /* No statement is prepared on the server (a transaction-mode pooler
     * would lose it): the calls send unnamed statements. */
    ck_assert_int_eq(num(c, "SELECT count(*) FROM pg_prepared_statements"), 0);
    /* Same behaviour after it, in both modes. */
    ck_assert_int_eq(write_tok(c, 9, "UPDATE pp SET v = 1 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(write_tok(c, 8, "UPDATE pp SET v = 2 WHERE id = 1", &e), FENCE_STALE);
    ok(c, "BEGIN");
    ck_assert_int_eq(set_tok(c, 9, "pp-res", &e), FENCE_OK);
    ok(c, "COMMIT");
    ok(c, "BEGIN");
    ck_assert_int_eq(set_tok(c, 8, "pp-res", &e), FENCE_STALE);
    ck_assert_uint_eq(e.stale.highest, 9);
    ok(c, "ROLLBACK");
    ck_assert_int_eq(pipelined(c, 10, "pp-res", "UPDATE pp SET v = 3 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM pp WHERE id = 1"), 10);
    ck_assert_int_eq(pipelined(c, 9, NULL, "UPDATE pp SET v = 4 WHERE id = 1", &e), FENCE_STALE);

    /* Nothing on the server to lose: DEALLOCATE ALL / DISCARD ALL (what a
     * pooler runs between clients) change nothing. */
    ok(c, "DEALLOCATE ALL");
    ok(c, "DISCARD ALL");
    ck_assert_int_eq(write_tok(c, 11, "UPDATE pp SET v = 5 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(fence_pg_prepare(c), FENCE_OK);
    ck_assert_int_eq(write_tok(c, 12, "UPDATE pp SET v = 6 WHERE id = 1", &e), FENCE_OK);
    /* PQreset forgets them (the new session has none). */
    PQreset(c);
    ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
    ck_assert_int_eq(write_tok(c, 13, "UPDATE pp SET v = 7 WHERE id = 1", &e), FENCE_OK);
    ck_assert_int_eq(num(c, "SELECT fence_token FROM pp WHERE id = 1"), 13);
    PQfinish(c);
}
END_TEST

static Suite *pg_suite(void)
{
    Suite *s = suite_create("pg");
    TCase *t = pg_tcase("pg");
    tcase_add_test(t, install_idempotent_and_versioned);
    tcase_add_test(t, row_stale_update_delete_insert);
    tcase_add_test(t, row_client_cannot_write_the_column);
    tcase_add_test(t, row_bad_tokens_rejected);
    CT_ADD_CASES(t, interleaving, interleavings);
    tcase_add_test(t, resource_concurrent_create);
    tcase_add_test(t, retrofit_beside_lock_version);
    tcase_add_test(t, permissive_mode);
    tcase_add_test(t, copy_is_fenced);
    tcase_add_test(t, truncate_refused_and_unprotect);
    tcase_add_test(t, row_hot_path_runs_only_the_guard);
    tcase_add_test(t, pipeline_send_token);
    tcase_add_test(t, prepared_statements);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(pg_suite());
}
