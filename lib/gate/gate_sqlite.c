/* gate_sqlite.c -- the persistent backing: marks in a SQLite file (WAL).
 *
 * begin  = BEGIN IMMEDIATE (takes the file's write lock, waiting for other
 *          processes up to the deadline), SELECT the mark and its holder,
 *          and if the token is admitted and higher, UPSERT both -- all
 *          inside the transaction, which stays open while the caller writes;
 * commit = COMMIT (the mark becomes durable and visible);
 * abort  = ROLLBACK (nothing was recorded).
 * Doing the UPSERT at begin rather than at commit changes nothing anyone
 * can see (the transaction is not visible until COMMIT) and leaves COMMIT
 * as the only step that can fail after the caller has written.
 *
 * Threads of one gate share one write connection and take turns through
 * the gate's slot (slot_busy, waited for on a condition variable), so they
 * never poll the file lock against each other; only other processes (or
 * other gates on the same file) are waited for by the busy handler.
 * The SQL text lives in sql/gate/, embedded at build time. */
#include "gate_internal.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Embedded from sql/gate/ (see module.mk). */
extern const char fence_gate__sql_schema[];
extern const char fence_gate__sql_has_holder[];
extern const char fence_gate__sql_add_holder[];
extern const char fence_gate__sql_select_mark[];
extern const size_t fence_gate__sql_select_mark_len;
extern const char fence_gate__sql_upsert_mark[];
extern const size_t fence_gate__sql_upsert_mark_len;

#define OPEN_MIN_WAIT_MS 1000
#define BUSY_SLEEP_SHORT_US 100 /* first polls: 0.1 ms */
#define BUSY_SLEEP_LONG_US 1000 /* then: 1 ms */

typedef struct db_gate {
    char *path;
    /* Guard the slot; their own flags say whether they were initialised. */
    pthread_mutex_t mu;
    pthread_cond_t slot_cond;
    int mu_ok, cond_ok;
    /* One write connection, used only by the thread that holds the slot
     * (slot_busy), so threads of this gate queue on slot_cond instead of
     * polling the file lock.  Other processes are waited for by the busy
     * handler, up to deadline_ns. */
    int slot_busy;
    pthread_t slot_holder;
    unsigned open_txns; /* atomic: txns begun and not yet ended */
    sqlite3 *wdb;
    sqlite3_stmt *st_begin, *st_commit, *st_rollback, *st_select, *st_upsert;
    int64_t deadline_ns; /* owned by the slot holder */
    /* A read connection for fence_gate_mark(), guarded by rmu (in WAL mode
     * it never waits for the writer). */
    pthread_mutex_t rmu;
    int rmu_ok;
    sqlite3 *rdb;
    sqlite3_stmt *st_rselect;
} db_gate;

static fence_status db_fail(const fence_gate *g, sqlite3 *db, const char *what)
{
    const db_gate *d = g->impl;
    return fence_gate__fail(g, FENCE_EDB, "%s: %s (SQLite code %d, file %s)", what,
                            db != NULL ? sqlite3_errmsg(db) : "out of memory",
                            db != NULL ? sqlite3_extended_errcode(db) : SQLITE_NOMEM, d->path);
}

static int is_busy(int rc)
{
    return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
}

/*
 * Busy handler of the write connection: keep retrying the file lock until
 * deadline_ns, sleeping briefly between tries.  SQLite's own busy_timeout
 * sleeps up to 100 ms between tries, which lets one busy process starve
 * another; short sleeps keep the hand-over quick.  Only the slot holder
 * runs statements on this connection, so deadline_ns is read by the
 * thread that set it.
 */
static int busy_cb(void *arg, int count)
{
    const db_gate *d = arg;
    int64_t left_us = (d->deadline_ns - fence__now_ns()) / 1000;
    if (left_us <= 0) {
        return 0;
    }
    int64_t us = count < 20 ? BUSY_SLEEP_SHORT_US : BUSY_SLEEP_LONG_US;
    fence__sleep_us(left_us < us ? left_us : us);
    return 1;
}

static int64_t open_wait_ms(const fence_gate *g)
{
    return g->wait_ms > OPEN_MIN_WAIT_MS ? g->wait_ms : OPEN_MIN_WAIT_MS;
}

static fence_status open_conn(fence_gate *g, sqlite3 **db, const char *what)
{
    const db_gate *d = g->impl;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(d->path, db, flags, NULL) != SQLITE_OK) {
        return db_fail(g, *db, what);
    }
    sqlite3_extended_result_codes(*db, 1);
    return FENCE_OK;
}

static fence_status prepare(fence_gate *g, sqlite3 *db, const char *sql, int len,
                            sqlite3_stmt **st)
{
    int rc = sqlite3_prepare_v3(db, sql, len, SQLITE_PREPARE_PERSISTENT, st, NULL);
    if (rc != SQLITE_OK) {
        return db_fail(g, db, "cannot prepare a statement");
    }
    return FENCE_OK;
}

/* Run a statement that returns one text row (a PRAGMA) into buf. */
static fence_status pragma(fence_gate *g, sqlite3 *db, const char *sql, char *buf, size_t size)
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
    fence_status out = rc == SQLITE_OK ? FENCE_OK : db_fail(g, db, sql);
    sqlite3_finalize(st);
    return out;
}

/* A table created before holders were recorded gains the holder column
 * (its marks: no holder).  Checked first without a lock; only a file that
 * needs it is locked (BEGIN IMMEDIATE) and checked again, so processes
 * opening it at once upgrade it once. */
static fence_status upgrade(fence_gate *g, db_gate *d)
{
    char buf[32];
    fence_status rc = pragma(g, d->wdb, fence_gate__sql_has_holder, buf, sizeof buf);
    if (rc != FENCE_OK || strcmp(buf, "0") != 0) {
        return rc;
    }
    char *err = NULL;
    int src = sqlite3_exec(d->wdb, "BEGIN IMMEDIATE", NULL, NULL, &err);
    if (src == SQLITE_OK) {
        rc = pragma(g, d->wdb, fence_gate__sql_has_holder, buf, sizeof buf);
        if (rc == FENCE_OK && strcmp(buf, "0") == 0) {
            src = sqlite3_exec(d->wdb, fence_gate__sql_add_holder, NULL, NULL, &err);
        }
    }
    if (src == SQLITE_OK && rc == FENCE_OK) {
        src = sqlite3_exec(d->wdb, "COMMIT", NULL, NULL, &err);
    }
    if (src != SQLITE_OK) {
        rc = fence_gate__fail(g, FENCE_EDB, "cannot add the holder column to the gate's table "
                              "in %s: %s", d->path, err != NULL ? err : sqlite3_errmsg(d->wdb));
    }
    sqlite3_free(err);
    if (!sqlite3_get_autocommit(d->wdb)) {
        sqlite3_exec(d->wdb, "ROLLBACK", NULL, NULL, NULL);
    }
    return rc;
}

/* The write connection's settings: WAL, the sync mode, the table. */
static fence_status setup_writer(fence_gate *g, db_gate *d)
{
    char buf[32];
    fence_status rc = pragma(g, d->wdb, "PRAGMA journal_mode=WAL", buf, sizeof buf);
    if (rc != FENCE_OK) {
        return rc;
    }
    if (strcmp(buf, "wal") != 0) {
        return fence_gate__fail(g, FENCE_EDB, "cannot put %s in WAL mode (journal_mode is "
                                "\"%s\"); is it on a file system without shared memory, such "
                                "as NFS?", d->path, buf);
    }
    rc = pragma(g, d->wdb,
                g->synchronous == FENCE_GATE_SYNC_NORMAL ? "PRAGMA synchronous=NORMAL"
                                                         : "PRAGMA synchronous=FULL",
                buf, sizeof buf);
    if (rc != FENCE_OK) {
        return rc;
    }
    char *err = NULL;
    if (sqlite3_exec(d->wdb, fence_gate__sql_schema, NULL, NULL, &err) != SQLITE_OK) {
        rc = fence_gate__fail(g, FENCE_EDB, "cannot create the gate's table in %s: %s", d->path,
                              err != NULL ? err : "out of memory");
        sqlite3_free(err);
        return rc;
    }
    return upgrade(g, d);
}

static fence_status open_writer(fence_gate *g, db_gate *d)
{
    fence_status rc = open_conn(g, &d->wdb, "cannot open the gate's database");
    if (rc != FENCE_OK) {
        return rc;
    }
    d->deadline_ns = fence__now_ns() + open_wait_ms(g) * 1000000LL;
    sqlite3_busy_handler(d->wdb, busy_cb, d);
    rc = setup_writer(g, d);
    if (rc != FENCE_OK) {
        return rc;
    }
    const struct {
        const char *sql;
        int len;
        sqlite3_stmt **out;
    } stmts[] = {
        {"BEGIN IMMEDIATE", -1, &d->st_begin},
        {"COMMIT", -1, &d->st_commit},
        {"ROLLBACK", -1, &d->st_rollback},
        {fence_gate__sql_select_mark, (int)fence_gate__sql_select_mark_len, &d->st_select},
        {fence_gate__sql_upsert_mark, (int)fence_gate__sql_upsert_mark_len, &d->st_upsert},
    };
    for (size_t i = 0; i < sizeof stmts / sizeof stmts[0] && rc == FENCE_OK; i++) {
        rc = prepare(g, d->wdb, stmts[i].sql, stmts[i].len, stmts[i].out);
    }
    return rc;
}

/* The read connection, for fence_gate_mark(). */
static fence_status open_reader(fence_gate *g, db_gate *d)
{
    char buf[32];
    fence_status rc = open_conn(g, &d->rdb, "cannot open a read connection to the gate's "
                                            "database");
    if (rc != FENCE_OK) {
        return rc;
    }
    sqlite3_busy_timeout(d->rdb, (int)open_wait_ms(g));
    rc = pragma(g, d->rdb, "PRAGMA query_only=1", buf, sizeof buf);
    if (rc != FENCE_OK) {
        return rc;
    }
    return prepare(g, d->rdb, fence_gate__sql_select_mark, (int)fence_gate__sql_select_mark_len,
                   &d->st_rselect);
}

/* The state without the connections: path and the locks. */
static fence_status init_state(fence_gate *g, db_gate *d, const char *path)
{
    d->path = strdup(path);
    if (d->path == NULL) {
        return fence_gate__fail(g, FENCE_ENOMEM, "out of memory copying the path");
    }
    d->mu_ok = pthread_mutex_init(&d->mu, NULL) == 0;
    d->cond_ok = fence__cond_init_monotonic(&d->slot_cond) == 0;
    d->rmu_ok = pthread_mutex_init(&d->rmu, NULL) == 0;
    if (!d->mu_ok || !d->rmu_ok) {
        return fence_gate__fail(g, FENCE_ESYS, "cannot initialise a mutex");
    }
    if (!d->cond_ok) {
        return fence_gate__fail(g, FENCE_ESYS, "cannot initialise a condition variable");
    }
    if (sqlite3_threadsafe() == 0) {
        return fence_gate__fail(g, FENCE_EDB, "the SQLite library was built without thread "
                                "support (SQLITE_THREADSAFE=0); the gate needs it");
    }
    return FENCE_OK;
}

static fence_status db_open(fence_gate *g, const char *path)
{
    db_gate *d = calloc(1, sizeof *d);
    if (d == NULL) {
        return fence_gate__fail(g, FENCE_ENOMEM, "out of memory");
    }
    g->impl = d;
    fence_status rc = init_state(g, d, path);
    if (rc == FENCE_OK) {
        rc = open_writer(g, d);
    }
    if (rc == FENCE_OK) {
        rc = open_reader(g, d);
    }
    return rc;
}

static void db_close(fence_gate *g)
{
    db_gate *d = g->impl;
    if (d == NULL) {
        return;
    }
    sqlite3_stmt *all[] = {d->st_begin,  d->st_commit, d->st_rollback,
                           d->st_select, d->st_upsert, d->st_rselect};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        sqlite3_finalize(all[i]);
    }
    sqlite3_close_v2(d->rdb);
    sqlite3_close_v2(d->wdb);
    if (d->rmu_ok) {
        pthread_mutex_destroy(&d->rmu);
    }
    if (d->cond_ok) {
        pthread_cond_destroy(&d->slot_cond);
    }
    if (d->mu_ok) {
        pthread_mutex_destroy(&d->mu);
    }
    free(d->path);
    free(d);
    g->impl = NULL;
}

static unsigned db_open_txns(fence_gate *g)
{
    db_gate *d = g->impl;
    return d != NULL ? __atomic_load_n(&d->open_txns, __ATOMIC_ACQUIRE) : 0;
}

/* Step a statement that returns no rows; the SQLite result code. */
static int run(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc;
}

static void rollback(db_gate *d)
{
    if (!sqlite3_get_autocommit(d->wdb)) {
        run(d->st_rollback);
    }
}

/* Take the gate's slot (its write connection), waiting for other threads
 * of this gate up to deadline. */
static fence_status take_slot(fence_gate *g, db_gate *d, int64_t deadline)
{
    pthread_t self = pthread_self();
    pthread_mutex_lock(&d->mu);
    if (d->slot_busy && pthread_equal(d->slot_holder, self)) {
        pthread_mutex_unlock(&d->mu);
        return fence_gate__fail(g, FENCE_ESTATE, "this thread already holds a txn of this "
                                "persistent gate (which locks the whole file): commit or abort "
                                "it first");
    }
    if (fence_gate__wait_free(&d->mu, &d->slot_cond, &d->slot_busy, deadline) != FENCE_OK) {
        pthread_mutex_unlock(&d->mu);
        return fence_gate__fail(g, FENCE_TIMEOUT, "%s is still held by another thread of this "
                                "gate after %lld ms (a persistent gate locks the whole file)",
                                d->path, (long long)g->wait_ms);
    }
    d->slot_busy = 1;
    d->slot_holder = self;
    __atomic_add_fetch(&d->open_txns, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&d->mu);
    return FENCE_OK;
}

static void release_slot(db_gate *d)
{
    pthread_mutex_lock(&d->mu);
    d->slot_busy = 0;
    __atomic_sub_fetch(&d->open_txns, 1, __ATOMIC_ACQ_REL);
    pthread_cond_broadcast(&d->slot_cond);
    pthread_mutex_unlock(&d->mu);
}

/* Column col of st as a holder id into h ("" for NULL); -1 when it is
 * neither NULL nor a well-formed id. */
static int column_holder(sqlite3_stmt *st, int col, char *h)
{
    h[0] = '\0';
    int type = sqlite3_column_type(st, col);
    if (type == SQLITE_NULL) {
        return 0;
    }
    const unsigned char *v = sqlite3_column_text(st, col);
    if (type != SQLITE_TEXT || v == NULL || sqlite3_column_bytes(st, col) != FENCE_HOLDER_LEN) {
        return -1;
    }
    for (int i = 0; i < FENCE_HOLDER_LEN; i++) {
        if ((v[i] < '0' || v[i] > '9') && (v[i] < 'a' || v[i] > 'f')) {
            return -1;
        }
    }
    memcpy(h, v, FENCE_HOLDER_LEN);
    h[FENCE_HOLDER_LEN] = '\0';
    return 0;
}

/* Read resource's mark with statement st into *mark, and (holder not
 * NULL) its holder into holder. */
static fence_status read_mark(fence_gate *g, sqlite3_stmt *st, const char *resource,
                              uint64_t *mark, char *holder)
{
    const db_gate *d = g->impl;
    sqlite3 *db = sqlite3_db_handle(st);
    fence_status out = FENCE_OK;
    int rc = sqlite3_bind_text(st, 1, resource, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
    }
    if (rc == SQLITE_ROW) {
        sqlite3_int64 v = sqlite3_column_int64(st, 0);
        if (sqlite3_column_type(st, 0) != SQLITE_INTEGER || v < 1) {
            /* Fail closed: a mark we cannot read admits nothing. */
            out = fence_gate__fail(g, FENCE_EDB, "the mark of \"%s\" in %s is not a positive "
                                   "integer; refusing to guess", fence_gate__show(resource),
                                   d->path);
        } else if (holder != NULL && column_holder(st, 1, holder) != 0) {
            out = fence_gate__fail(g, FENCE_EDB, "the holder of \"%s\" in %s is not NULL or "
                                   "32 lowercase hex digits; refusing to guess",
                                   fence_gate__show(resource), d->path);
        } else {
            *mark = (uint64_t)v;
        }
    } else if (rc == SQLITE_DONE) {
        *mark = 0;
        if (holder != NULL) {
            holder[0] = '\0';
        }
    } else if (is_busy(rc)) {
        out = fence_gate__fail(g, FENCE_TIMEOUT, "%s is locked: %s", d->path,
                               sqlite3_errmsg(db));
    } else {
        out = db_fail(g, db, "cannot read a mark");
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return out;
}

/* Inside the write transaction: the store rule (fence__mark_rule) on the
 * token and holder -- older, or equal from another holder: stale -- and
 * the mark raised when it says so. */
static fence_status check_and_record(fence_gate *g, db_gate *d, fence_gate_txn *t)
{
    fence_status rc = read_mark(g, d->st_select, t->resource, &t->mark_seen, t->mark_holder);
    if (rc != FENCE_OK) {
        return rc;
    }
    t->rule = fence__mark_rule(t->mark_seen, t->mark_holder, t->token, t->holder);
    if (t->rule == FENCE__RULE_OLDER || t->rule == FENCE__RULE_REPEAT) {
        return fence_gate__fail_stale(g, t);
    }
    if (t->rule == FENCE__RULE_ADMIT) { /* the same holder again: nothing to raise */
        return FENCE_OK;
    }
    sqlite3_stmt *st = d->st_upsert;
    int src = sqlite3_bind_text(st, 1, t->resource, -1, SQLITE_STATIC);
    if (src == SQLITE_OK) {
        src = sqlite3_bind_int64(st, 2, (sqlite3_int64)t->token);
    }
    if (src == SQLITE_OK) {
        src = t->holder[0] != '\0'
                  ? sqlite3_bind_text(st, 3, t->holder, FENCE_HOLDER_LEN, SQLITE_STATIC)
                  : sqlite3_bind_null(st, 3);
    }
    if (src == SQLITE_OK) {
        src = sqlite3_step(st);
    }
    if (src != SQLITE_DONE) {
        rc = db_fail(g, d->wdb, "cannot record a mark");
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc != FENCE_OK) {
        return rc;
    }
    /* Read it back: whoever can write the file can add a trigger to the
     * marks table that drops the write (RAISE(IGNORE)) or puts the old mark
     * back, and the statement still succeeds.  Only a mark that is now
     * exactly this token and holder admits the write. */
    uint64_t now = 0;
    fence_gate__holder now_holder;
    rc = read_mark(g, d->st_select, t->resource, &now, now_holder);
    if (rc == FENCE_OK && (now != t->token || !fence_gate__holder_eq(t->holder, now_holder))) {
        rc = fence_gate__fail(g, FENCE_EDB,
                              "the mark of \"%s\" in %s did not become %" PRIu64
                              " (it reads %" PRIu64 "): something in the file (a trigger on "
                              "fence_gate_marks?) changed the write; refusing it",
                              fence_gate__show(t->resource), d->path, t->token, now);
    }
    return rc;
}

static fence_status db_begin(fence_gate *g, fence_gate_txn *t)
{
    db_gate *d = g->impl;
    int64_t deadline = fence_gate__deadline(g->wait_ms);
    fence_status rc = take_slot(g, d, deadline);
    if (rc != FENCE_OK) {
        return rc;
    }
    /* Now the connection is ours.  A deadline already past makes the busy
     * handler give up at once (wait_ms 0: try once). */
    d->deadline_ns = deadline >= 0 ? deadline : 0;
    int src = run(d->st_begin);
    if (src == SQLITE_DONE) {
        rc = check_and_record(g, d, t);
    } else if (is_busy(src)) {
        rc = fence_gate__fail(g, FENCE_TIMEOUT, "%s is still locked by another process or "
                              "connection after %lld ms (%s)", d->path, (long long)g->wait_ms,
                              sqlite3_errmsg(d->wdb));
    } else {
        rc = db_fail(g, d->wdb, "cannot begin a write transaction");
    }
    if (rc != FENCE_OK) {
        rollback(d);
        release_slot(d);
    }
    return rc;
}

static fence_status db_end(fence_gate_txn *t, int commit)
{
    fence_gate *g = t->gate;
    db_gate *d = g->impl;
    fence_status out = FENCE_OK;
    /* COMMIT and ROLLBACK of a WAL writer do not normally wait, but give
     * the busy handler a little room rather than none. */
    d->deadline_ns = fence__now_ns() + OPEN_MIN_WAIT_MS * 1000000LL;
    if (commit) {
        if (run(d->st_commit) != SQLITE_DONE) {
            out = db_fail(g, d->wdb, "cannot commit; the mark was not recorded");
            rollback(d);
        }
    } else if (run(d->st_rollback) != SQLITE_DONE) {
        out = db_fail(g, d->wdb, "cannot roll back");
    }
    release_slot(d);
    return out;
}

static fence_status db_commit(fence_gate_txn *t)
{
    return db_end(t, 1);
}

static fence_status db_abort(fence_gate_txn *t)
{
    return db_end(t, 0);
}

static fence_status db_mark(fence_gate *g, const char *resource, uint64_t *mark)
{
    db_gate *d = g->impl;
    pthread_mutex_lock(&d->rmu);
    fence_status rc = read_mark(g, d->st_rselect, resource, mark, NULL);
    pthread_mutex_unlock(&d->rmu);
    return rc;
}

const fence_gate__ops fence_gate__sqlite_ops = {
    .open = db_open,
    .close = db_close,
    .open_txns = db_open_txns,
    .begin = db_begin,
    .commit = db_commit,
    .abort = db_abort,
    .mark = db_mark,
};
