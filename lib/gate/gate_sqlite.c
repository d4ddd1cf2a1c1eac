/* gate_sqlite.c -- the persistent gate: marks in a SQLite file (WAL mode).
 *
 * begin  = BEGIN IMMEDIATE (takes the file's write lock, waiting for other
 *          processes up to the deadline), SELECT the mark, and if the token
 *          is admitted and higher, UPSERT it -- all inside the transaction,
 *          which stays open while the caller writes;
 * commit = COMMIT (the mark becomes durable and visible);
 * abort  = ROLLBACK (nothing was recorded).
 * Doing the UPSERT at begin rather than at commit changes nothing anyone
 * can see (the transaction is not visible until COMMIT) and leaves COMMIT
 * as the only step that can fail after the caller has written.
 *
 * Threads of one gate share one write connection and take turns through
 * the gate's slot (g->slot_busy, waited for on a condition variable), so
 * they never poll the file lock against each other; only other processes
 * (or other gates on the same file) are waited for by the busy handler.
 * The SQL text lives in lib/gate/sql/, embedded at build time. */
#include "gate_internal.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Embedded from lib/gate/sql/ (see module.mk). */
extern const char fence_gate__sql_schema[];
extern const char fence_gate__sql_select_mark[];
extern const size_t fence_gate__sql_select_mark_len;
extern const char fence_gate__sql_upsert_mark[];
extern const size_t fence_gate__sql_upsert_mark_len;

#define OPEN_MIN_WAIT_MS 1000
#define BUSY_SLEEP_SHORT_NS 100000L /* first polls: 0.1 ms */
#define BUSY_SLEEP_LONG_NS 1000000L /* then: 1 ms */

static int db_fail(fence_gate *g, sqlite3 *db, const char *what)
{
    fence_gate__set_err(g, "%s: %s (SQLite code %d, file %s)", what,
                        db != NULL ? sqlite3_errmsg(db) : "out of memory",
                        db != NULL ? sqlite3_extended_errcode(db) : SQLITE_NOMEM, g->path);
    return FENCE_EDB;
}

static int is_busy(int rc)
{
    return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
}

/*
 * Busy handler of the write connection: keep retrying the file lock until
 * g->deadline_ns, sleeping briefly between tries.  SQLite's own
 * busy_timeout sleeps up to 100 ms between tries, which lets one busy
 * process starve another; short sleeps keep the hand-over quick.  Only the
 * slot holder runs statements on this connection, so deadline_ns is read
 * by the thread that set it.
 */
static int busy_cb(void *arg, int count)
{
    const fence_gate *g = arg;
    int64_t left = g->deadline_ns - fence_gate__now_ns();
    if (left <= 0) {
        return 0;
    }
    long ns = count < 20 ? BUSY_SLEEP_SHORT_NS : BUSY_SLEEP_LONG_NS;
    if (left < ns) {
        ns = (long)left;
    }
    struct timespec ts = {0, ns};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    return 1;
}

static int64_t open_wait_ms(const fence_gate *g)
{
    return g->wait_ms > OPEN_MIN_WAIT_MS ? g->wait_ms : OPEN_MIN_WAIT_MS;
}

static int open_conn(fence_gate *g, sqlite3 **db, const char *what)
{
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    int rc = sqlite3_open_v2(g->path, db, flags, NULL);
    if (rc != SQLITE_OK) {
        return db_fail(g, *db, what);
    }
    sqlite3_extended_result_codes(*db, 1);
    return FENCE_OK;
}

static int prepare(fence_gate *g, sqlite3 *db, const char *sql, int len, sqlite3_stmt **st)
{
    int rc = sqlite3_prepare_v3(db, sql, len, SQLITE_PREPARE_PERSISTENT, st, NULL);
    if (rc != SQLITE_OK) {
        return db_fail(g, db, "cannot prepare a statement");
    }
    return FENCE_OK;
}

/* Run a statement that returns one text row (a PRAGMA) into buf. */
static int pragma(fence_gate *g, sqlite3 *db, const char *sql, char *buf, size_t size)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            const unsigned char *v = sqlite3_column_text(st, 0);
            snprintf(buf, size, "%s", v != NULL ? (const char *)v : "");
            rc = SQLITE_OK;
        } else if (rc == SQLITE_DONE) {
            buf[0] = '\0';
            rc = SQLITE_OK;
        }
    }
    if (rc != SQLITE_OK) {
        int out = db_fail(g, db, sql);
        sqlite3_finalize(st);
        return out;
    }
    sqlite3_finalize(st);
    return FENCE_OK;
}

int fence_gate__db_open(fence_gate *g)
{
    char buf[32];
    if (sqlite3_threadsafe() == 0) {
        fence_gate__set_err(g, "the SQLite library was built without thread support "
                               "(SQLITE_THREADSAFE=0); the gate needs it");
        return FENCE_EDB;
    }
    int rc = open_conn(g, &g->wdb, "cannot open the gate's database");
    if (rc != FENCE_OK) {
        return rc;
    }
    g->deadline_ns = fence_gate__now_ns() + open_wait_ms(g) * 1000000LL;
    sqlite3_busy_handler(g->wdb, busy_cb, g);

    rc = pragma(g, g->wdb, "PRAGMA journal_mode=WAL", buf, sizeof buf);
    if (rc != FENCE_OK) {
        return rc;
    }
    if (strcmp(buf, "wal") != 0) {
        fence_gate__set_err(g, "cannot put %s in WAL mode (journal_mode is \"%s\"); is it on "
                               "a file system without shared memory, such as NFS?",
                            g->path, buf);
        return FENCE_EDB;
    }
    rc = pragma(g, g->wdb,
                g->synchronous == FENCE_GATE_SYNC_NORMAL ? "PRAGMA synchronous=NORMAL"
                                                         : "PRAGMA synchronous=FULL",
                buf, sizeof buf);
    if (rc != FENCE_OK) {
        return rc;
    }
    char *err = NULL;
    if (sqlite3_exec(g->wdb, fence_gate__sql_schema, NULL, NULL, &err) != SQLITE_OK) {
        fence_gate__set_err(g, "cannot create the gate's table in %s: %s", g->path,
                            err != NULL ? err : "out of memory");
        sqlite3_free(err);
        return FENCE_EDB;
    }
    const struct {
        const char *sql;
        int len;
        sqlite3_stmt **out;
    } stmts[] = {
        {"BEGIN IMMEDIATE", -1, &g->st_begin},
        {"COMMIT", -1, &g->st_commit},
        {"ROLLBACK", -1, &g->st_rollback},
        {fence_gate__sql_select_mark, (int)fence_gate__sql_select_mark_len, &g->st_select},
        {fence_gate__sql_upsert_mark, (int)fence_gate__sql_upsert_mark_len, &g->st_upsert},
    };
    for (size_t i = 0; i < sizeof stmts / sizeof stmts[0]; i++) {
        rc = prepare(g, g->wdb, stmts[i].sql, stmts[i].len, stmts[i].out);
        if (rc != FENCE_OK) {
            return rc;
        }
    }

    /* The read connection, for fence_gate_high_water(). */
    rc = open_conn(g, &g->rdb, "cannot open a read connection to the gate's database");
    if (rc != FENCE_OK) {
        return rc;
    }
    sqlite3_busy_timeout(g->rdb, (int)open_wait_ms(g));
    rc = pragma(g, g->rdb, "PRAGMA query_only=1", buf, sizeof buf);
    if (rc != FENCE_OK) {
        return rc;
    }
    return prepare(g, g->rdb, fence_gate__sql_select_mark, (int)fence_gate__sql_select_mark_len,
                   &g->st_rselect);
}

void fence_gate__db_close(fence_gate *g)
{
    sqlite3_stmt *all[] = {g->st_begin,  g->st_commit, g->st_rollback,
                           g->st_select, g->st_upsert, g->st_rselect};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        sqlite3_finalize(all[i]);
    }
    sqlite3_close_v2(g->rdb);
    sqlite3_close_v2(g->wdb);
    g->rdb = g->wdb = NULL;
}

/* Step a statement that returns no rows; the SQLite result code. */
static int run(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc;
}

static void rollback(fence_gate *g)
{
    if (!sqlite3_get_autocommit(g->wdb)) {
        run(g->st_rollback);
    }
}

static void release_slot(fence_gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->slot_busy = 0;
    __atomic_sub_fetch(&g->open_txns, 1, __ATOMIC_ACQ_REL);
    pthread_cond_broadcast(&g->slot_cond);
    pthread_mutex_unlock(&g->mu);
}

/* Read resource's mark on connection st's database into *mark. */
static int read_mark(fence_gate *g, sqlite3_stmt *st, const char *resource, uint64_t *mark)
{
    sqlite3 *db = sqlite3_db_handle(st);
    int out = FENCE_OK;
    int rc = sqlite3_bind_text(st, 1, resource, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
    }
    if (rc == SQLITE_ROW) {
        sqlite3_int64 v = sqlite3_column_int64(st, 0);
        if (sqlite3_column_type(st, 0) != SQLITE_INTEGER || v < 1) {
            /* Fail closed: a mark we cannot read admits nothing. */
            fence_gate__set_err(g, "the mark of \"%s\" in %s is not a positive integer; "
                                   "refusing to guess", fence_gate__show(resource), g->path);
            out = FENCE_EDB;
        } else {
            *mark = (uint64_t)v;
        }
    } else if (rc == SQLITE_DONE) {
        *mark = 0;
    } else if (is_busy(rc)) {
        fence_gate__set_err(g, "%s is locked: %s", g->path, sqlite3_errmsg(db));
        out = FENCE_TIMEOUT;
    } else {
        out = db_fail(g, db, "cannot read a mark");
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return out;
}

int fence_gate__db_begin(fence_gate *g, fence_gate_txn *t)
{
    int64_t deadline = g->wait_ms > 0 ? fence_gate__now_ns() + g->wait_ms * 1000000LL : -1;
    pthread_t self = pthread_self();

    pthread_mutex_lock(&g->mu);
    if (g->slot_busy && pthread_equal(g->slot_holder, self)) {
        pthread_mutex_unlock(&g->mu);
        fence_gate__set_err(g, "this thread already holds a txn of this persistent gate (which "
                               "locks the whole file): commit or abort it first");
        return FENCE_ESTATE;
    }
    int rc = fence_gate__wait_free(&g->mu, &g->slot_cond, &g->slot_busy, deadline);
    if (rc != FENCE_OK) {
        pthread_mutex_unlock(&g->mu);
        fence_gate__set_err(g, "%s is still held by another thread of this gate after %lld ms "
                               "(a persistent gate locks the whole file)",
                            g->path, (long long)g->wait_ms);
        return rc;
    }
    g->slot_busy = 1;
    g->slot_holder = self;
    __atomic_add_fetch(&g->open_txns, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&g->mu);

    /* Now the connection is ours.  A deadline already past makes the busy
     * handler give up at once (wait_ms 0: try once). */
    g->deadline_ns = deadline >= 0 ? deadline : 0;
    rc = run(g->st_begin);
    if (rc != SQLITE_DONE) {
        if (is_busy(rc)) {
            fence_gate__set_err(g, "%s is still locked by another process or connection after "
                                   "%lld ms (%s)",
                                g->path, (long long)g->wait_ms, sqlite3_errmsg(g->wdb));
            rc = FENCE_TIMEOUT;
        } else {
            rc = db_fail(g, g->wdb, "cannot begin a write transaction");
        }
        rollback(g);
        release_slot(g);
        return rc;
    }
    rc = read_mark(g, g->st_select, t->resource, &t->mark_seen);
    if (rc == FENCE_OK && t->token < t->mark_seen) {
        fence_gate__set_err(g, "stale token %llu for \"%s\": a write with token %llu was "
                               "already accepted",
                            (unsigned long long)t->token, fence_gate__show(t->resource),
                            (unsigned long long)t->mark_seen);
        rc = FENCE_STALE;
    }
    if (rc == FENCE_OK && t->token > t->mark_seen) {
        sqlite3_stmt *st = g->st_upsert;
        int src = sqlite3_bind_text(st, 1, t->resource, -1, SQLITE_STATIC);
        if (src == SQLITE_OK) {
            src = sqlite3_bind_int64(st, 2, (sqlite3_int64)t->token);
        }
        if (src == SQLITE_OK) {
            src = sqlite3_step(st);
        }
        if (src != SQLITE_DONE) {
            rc = db_fail(g, g->wdb, "cannot record a mark");
        }
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
    }
    if (rc != FENCE_OK) {
        rollback(g);
        release_slot(g);
    }
    return rc;
}

int fence_gate__db_end(fence_gate_txn *t, int commit)
{
    fence_gate *g = t->gate;
    int out = FENCE_OK;
    /* COMMIT and ROLLBACK of a WAL writer do not normally wait, but give
     * the busy handler a little room rather than none. */
    g->deadline_ns = fence_gate__now_ns() + OPEN_MIN_WAIT_MS * 1000000LL;
    if (commit) {
        int rc = run(g->st_commit);
        if (rc != SQLITE_DONE) {
            out = db_fail(g, g->wdb, "cannot commit; the mark was not recorded");
            rollback(g);
        }
    } else {
        int rc = run(g->st_rollback);
        if (rc != SQLITE_DONE) {
            out = db_fail(g, g->wdb, "cannot roll back");
        }
    }
    release_slot(g);
    return out;
}

int fence_gate__db_high_water(fence_gate *g, const char *resource, uint64_t *mark)
{
    pthread_mutex_lock(&g->rmu);
    int rc = read_mark(g, g->st_rselect, resource, mark);
    pthread_mutex_unlock(&g->rmu);
    return rc;
}
