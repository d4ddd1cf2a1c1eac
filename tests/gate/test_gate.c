/* test_gate.c -- the fencing write gate (lib/gate), in memory and backed
 * by a SQLite file: stale writes rejected, equal and higher admitted,
 * begin/commit atomic against other threads and processes, a killed holder
 * does not block others, bad arguments refused.  Loop tests run each case
 * twice: _i == 0 in memory, _i == 1 persistent. */
#include "fence_gate.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/* Helpers                                                              */
/* ------------------------------------------------------------------ */

static char tmp_dir[256];
static char db_path[300];

/* A fresh temp folder per test (Check forks one process per test). */
static void setup(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/fence-gate-XXXXXX",
             base != NULL && base[0] != '\0' ? base : "/tmp");
    ck_assert_msg(mkdtemp(tmp_dir) != NULL, "mkdtemp: %s", strerror(errno));
    snprintf(db_path, sizeof db_path, "%s/gate.db", tmp_dir);
}

static void teardown(void)
{
    DIR *d = opendir(tmp_dir);
    if (d == NULL) {
        return;
    }
    struct dirent *de;
    char p[600];
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
            snprintf(p, sizeof p, "%s/%s", tmp_dir, de->d_name);
            unlink(p);
        }
    }
    closedir(d);
    rmdir(tmp_dir);
}

/* Under valgrind everything is ~20x slower: do less. */
static int scale(int n)
{
    const char *v = getenv("FENCE_VALGRIND");
    return v != NULL && strcmp(v, "1") == 0 ? n / 2 : n;
}

static fence_gate *open_gate_opts(int persistent, int64_t wait_ms, int sync)
{
    fence_gate_options o;
    fence_gate_options_init(&o);
    o.path = persistent ? db_path : NULL;
    o.wait_ms = wait_ms;
    o.synchronous = sync;
    fence_gate *g = NULL;
    int rc = fence_gate_open(&g, &o);
    ck_assert_msg(rc == FENCE_OK, "fence_gate_open: %s: %s", fence_status_name(rc),
                  fence_gate_errmsg(g));
    ck_assert_int_eq(fence_gate_is_persistent(g), persistent);
    return g;
}

static fence_gate *open_gate(int persistent, int64_t wait_ms)
{
    return open_gate_opts(persistent, wait_ms, FENCE_GATE_SYNC_FULL);
}

#define ck_status(rc, want, g)                                                         \
    do {                                                                               \
        int rc_ = (rc);                                                                \
        ck_assert_msg(rc_ == (want), "%s: got %s, want %s (%s)", #rc,                 \
                      fence_status_name(rc_), fence_status_name(want),                \
                      fence_gate_errmsg(g));                                           \
    } while (0)

/* begin + commit in one go; returns begin's status. */
static int write_once(fence_gate *g, const char *res, uint64_t token, uint64_t *mark)
{
    fence_gate_txn *t = NULL;
    int rc = fence_gate_begin(g, res, token, &t, mark);
    if (rc == FENCE_OK) {
        ck_assert_ptr_nonnull(t);
        ck_assert_uint_eq(fence_gate_txn_token(t), token);
        ck_assert_str_eq(fence_gate_txn_resource(t), res);
        ck_status(fence_gate_commit(t), FENCE_OK, g);
    } else {
        ck_assert_ptr_null(t);
    }
    return rc;
}

static uint64_t high_water(fence_gate *g, const char *res)
{
    uint64_t m = 99999;
    ck_status(fence_gate_high_water(g, res, &m), FENCE_OK, g);
    return m;
}

static void close_gate(fence_gate *g)
{
    ck_status(fence_gate_close(g), FENCE_OK, g);
}

/* ------------------------------------------------------------------ */
/* The rule                                                             */
/* ------------------------------------------------------------------ */

START_TEST(test_stale_equal_higher)
{
    fence_gate *g = open_gate(_i, 2000);
    uint64_t mark = 99;
    ck_assert_uint_eq(high_water(g, "r"), 0);
    ck_status(write_once(g, "r", 33, &mark), FENCE_OK, g);
    ck_assert_uint_eq(mark, 0); /* never written before */
    ck_assert_uint_eq(high_water(g, "r"), 33);

    ck_status(write_once(g, "r", 33, &mark), FENCE_OK, g); /* equal: same holder */
    ck_assert_uint_eq(mark, 33);
    ck_status(write_once(g, "r", 34, &mark), FENCE_OK, g); /* higher */
    ck_assert_uint_eq(mark, 33);
    ck_assert_uint_eq(high_water(g, "r"), 34);

    ck_status(write_once(g, "r", 33, &mark), FENCE_STALE, g); /* older */
    ck_assert_uint_eq(mark, 34);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "stale token 33"));
    ck_status(write_once(g, "r", 1, NULL), FENCE_STALE, g);
    ck_assert_uint_eq(high_water(g, "r"), 34);

    /* Other resources have their own marks. */
    ck_status(write_once(g, "s", 1, &mark), FENCE_OK, g);
    ck_assert_uint_eq(high_water(g, "s"), 1);
    ck_assert_uint_eq(high_water(g, "r"), 34);
    /* The largest valid token. */
    ck_status(write_once(g, "r", FENCE_GATE_TOKEN_MAX, NULL), FENCE_OK, g);
    ck_assert_uint_eq(high_water(g, "r"), FENCE_GATE_TOKEN_MAX);
    ck_status(write_once(g, "r", FENCE_GATE_TOKEN_MAX - 1, NULL), FENCE_STALE, g);
    close_gate(g);
}
END_TEST

START_TEST(test_abort_records_nothing)
{
    fence_gate *g = open_gate(_i, 2000);
    ck_status(write_once(g, "r", 10, NULL), FENCE_OK, g);
    fence_gate_txn *t = NULL;
    ck_status(fence_gate_begin(g, "r", 50, &t, NULL), FENCE_OK, g);
    ck_status(fence_gate_abort(t), FENCE_OK, g);
    ck_assert_uint_eq(high_water(g, "r"), 10);
    ck_status(write_once(g, "r", 40, NULL), FENCE_OK, g); /* 40 < 50 is fine */
    ck_assert_uint_eq(high_water(g, "r"), 40);
    /* A resource first seen in an aborted txn stays unwritten. */
    ck_status(fence_gate_begin(g, "new", 7, &t, NULL), FENCE_OK, g);
    ck_status(fence_gate_abort(t), FENCE_OK, g);
    ck_assert_uint_eq(high_water(g, "new"), 0);
    close_gate(g);
}
END_TEST

START_TEST(test_token_zero_rejected)
{
    fence_gate *g = open_gate(_i, 2000);
    fence_gate_txn *t = (fence_gate_txn *)&t; /* must be reset to NULL */
    uint64_t mark = 5;
    ck_status(fence_gate_begin(g, "r", 0, &t, &mark), FENCE_ENOTOKEN, g);
    ck_assert_ptr_null(t);
    ck_assert_uint_eq(mark, 0);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "token 0"));
    ck_status(fence_gate_begin(g, "r", FENCE_GATE_TOKEN_MAX + 1, &t, NULL), FENCE_ENOTOKEN, g);
    ck_status(fence_gate_begin(g, "r", UINT64_MAX, &t, NULL), FENCE_ENOTOKEN, g);
    ck_assert_uint_eq(high_water(g, "r"), 0);
    /* A rejected token 0 does not even pass an unwritten resource. */
    ck_status(write_once(g, "r", 1, NULL), FENCE_OK, g);
    ck_status(fence_gate_begin(g, "r", 0, &t, NULL), FENCE_ENOTOKEN, g);
    ck_assert_uint_eq(high_water(g, "r"), 1);
    close_gate(g);
}
END_TEST

START_TEST(test_persists_across_reopen)
{
    fence_gate *g = open_gate(1, 2000);
    ck_status(write_once(g, "orders/1", 10, NULL), FENCE_OK, g);
    ck_status(write_once(g, "orders/2", 3, NULL), FENCE_OK, g);
    close_gate(g);

    g = open_gate(1, 2000);
    ck_assert_uint_eq(high_water(g, "orders/1"), 10);
    ck_assert_uint_eq(high_water(g, "orders/2"), 3);
    uint64_t mark = 0;
    ck_status(write_once(g, "orders/1", 9, &mark), FENCE_STALE, g);
    ck_assert_uint_eq(mark, 10);
    ck_status(write_once(g, "orders/1", 10, NULL), FENCE_OK, g);
    close_gate(g);

    /* An in-memory gate starts empty every time. */
    g = open_gate(0, 2000);
    ck_status(write_once(g, "orders/1", 10, NULL), FENCE_OK, g);
    close_gate(g);
    g = open_gate(0, 2000);
    ck_assert_uint_eq(high_water(g, "orders/1"), 0);
    close_gate(g);
}
END_TEST

START_TEST(test_injection_names_are_names)
{
    static const char *names[] = {
        "x'); DROP TABLE fence_gate_marks; --", "' OR '1'='1", "%s%s%n%x",
        "fence_gate_marks", "a\"b\\c", "\xe5\x90\x8d\xe5\x89\x8d", " ", "\n\t", "r",
    };
    size_t n = sizeof names / sizeof names[0];
    fence_gate *g = open_gate(_i, 2000);
    for (size_t k = 0; k < n; k++) {
        ck_status(write_once(g, names[k], 100 + k, NULL), FENCE_OK, g);
    }
    for (size_t k = 0; k < n; k++) {
        ck_assert_uint_eq(high_water(g, names[k]), 100 + k);
        ck_status(write_once(g, names[k], 99, NULL), FENCE_STALE, g);
    }
    /* The longest allowed name works and is distinct from its prefix. */
    char longname[FENCE_GATE_NAME_MAX + 1];
    memset(longname, 'n', FENCE_GATE_NAME_MAX);
    longname[FENCE_GATE_NAME_MAX] = '\0';
    ck_status(write_once(g, longname, 5, NULL), FENCE_OK, g);
    longname[FENCE_GATE_NAME_MAX - 1] = '\0';
    ck_assert_uint_eq(high_water(g, longname), 0);
    close_gate(g);
    if (_i == 1) { /* the table survived, and so did the marks */
        g = open_gate(1, 2000);
        ck_assert_uint_eq(high_water(g, names[0]), 100);
        ck_assert_uint_eq(high_water(g, names[n - 1]), 100 + n - 1);
        close_gate(g);
    }
}
END_TEST

/* Many distinct names: the in-memory table grows, nothing gets mixed up. */
START_TEST(test_many_resources)
{
    int n = scale(_i == 0 ? 5000 : 300);
    fence_gate *g = open_gate_opts(_i, 2000, FENCE_GATE_SYNC_NORMAL);
    char name[64];
    for (int k = 0; k < n; k++) {
        snprintf(name, sizeof name, "res-%d", k);
        ck_status(write_once(g, name, (uint64_t)k + 1, NULL), FENCE_OK, g);
    }
    for (int k = 0; k < n; k++) {
        snprintf(name, sizeof name, "res-%d", k);
        ck_assert_uint_eq(high_water(g, name), (uint64_t)k + 1);
    }
    snprintf(name, sizeof name, "res-%d", n);
    ck_assert_uint_eq(high_water(g, name), 0);
    close_gate(g);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Bad arguments and states                                             */
/* ------------------------------------------------------------------ */

START_TEST(test_bad_arguments)
{
    fence_gate_options o;
    fence_gate *g = NULL;
    fence_gate_options_init(NULL); /* no-op */

    ck_assert_int_eq(fence_gate_open(NULL, NULL), FENCE_EINVAL);
    fence_gate_options_init(&o);
    o.wait_ms = -1;
    ck_assert_int_eq(fence_gate_open(&g, &o), FENCE_EINVAL);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "wait_ms"));
    ck_assert_int_eq(fence_gate_begin(g, "r", 1, &(fence_gate_txn *){NULL}, NULL), FENCE_ESTATE);
    ck_assert_int_eq(fence_gate_close(g), FENCE_OK);
    o.wait_ms = FENCE_GATE_WAIT_MAX_MS + 1;
    ck_assert_int_eq(fence_gate_open(&g, &o), FENCE_EINVAL);
    fence_gate_close(g);
    fence_gate_options_init(&o);
    o.synchronous = 7;
    ck_assert_int_eq(fence_gate_open(&g, &o), FENCE_EINVAL);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "synchronous"));
    fence_gate_close(g);
    fence_gate_options_init(&o);
    o.path = "";
    ck_assert_int_eq(fence_gate_open(&g, &o), FENCE_EINVAL);
    fence_gate_close(g);
    /* A file that cannot be opened: EDB, and a handle that says why. */
    o.path = "/nonexistent-dir-for-fence/x/gate.db";
    ck_assert_int_eq(fence_gate_open(&g, &o), FENCE_EDB);
    ck_assert_ptr_nonnull(g);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "/nonexistent-dir-for-fence"));
    uint64_t m = 1;
    ck_assert_int_eq(fence_gate_high_water(g, "r", &m), FENCE_ESTATE);
    ck_assert_int_eq(fence_gate_close(g), FENCE_OK);
    /* A folder is not a database file. */
    o.path = tmp_dir;
    ck_assert_int_eq(fence_gate_open(&g, &o), FENCE_EDB);
    fence_gate_close(g);

    ck_assert_int_eq(fence_gate_close(NULL), FENCE_OK);
    ck_assert_ptr_nonnull(fence_gate_errmsg(NULL));
    ck_assert_int_eq(fence_gate_is_persistent(NULL), 0);
    ck_assert_uint_eq(fence_gate_txn_token(NULL), 0);
    ck_assert_str_eq(fence_gate_txn_resource(NULL), "");
    ck_assert_int_eq(fence_gate_commit(NULL), FENCE_EINVAL);
    ck_assert_int_eq(fence_gate_abort(NULL), FENCE_EINVAL);

    for (int persistent = 0; persistent <= 1; persistent++) {
        g = open_gate(persistent, 2000);
        fence_gate_txn *t = NULL;
        char big[FENCE_GATE_NAME_MAX + 2];
        memset(big, 'x', sizeof big - 1);
        big[sizeof big - 1] = '\0';

        ck_assert_int_eq(fence_gate_begin(NULL, "r", 1, &t, NULL), FENCE_EINVAL);
        ck_status(fence_gate_begin(g, "r", 1, NULL, NULL), FENCE_EINVAL, g);
        ck_status(fence_gate_begin(g, NULL, 1, &t, NULL), FENCE_EINVAL, g);
        ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "NULL"));
        ck_status(fence_gate_begin(g, "", 1, &t, NULL), FENCE_EINVAL, g);
        ck_status(fence_gate_begin(g, big, 1, &t, NULL), FENCE_EINVAL, g);
        ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "longer than"));
        ck_assert_ptr_null(t);

        ck_assert_int_eq(fence_gate_high_water(NULL, "r", &m), FENCE_EINVAL);
        ck_status(fence_gate_high_water(g, "r", NULL), FENCE_EINVAL, g);
        ck_status(fence_gate_high_water(g, NULL, &m), FENCE_EINVAL, g);
        ck_status(fence_gate_high_water(g, "", &m), FENCE_EINVAL, g);
        ck_status(fence_gate_high_water(g, big, &m), FENCE_EINVAL, g);

        /* A success clears the thread's message. */
        ck_status(fence_gate_high_water(g, "r", &m), FENCE_OK, g);
        ck_assert_str_eq(fence_gate_errmsg(g), "");
        close_gate(g);
    }
}
END_TEST

START_TEST(test_close_with_open_txn)
{
    fence_gate *g = open_gate(_i, 2000);
    fence_gate_txn *t = NULL;
    ck_status(fence_gate_begin(g, "r", 3, &t, NULL), FENCE_OK, g);
    ck_assert_int_eq(fence_gate_close(g), FENCE_ESTATE);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "still open"));
    ck_status(fence_gate_commit(t), FENCE_OK, g);
    ck_assert_uint_eq(high_water(g, "r"), 3);
    close_gate(g);
}
END_TEST

START_TEST(test_same_thread_rebegin)
{
    fence_gate *g = open_gate(_i, 5000);
    fence_gate_txn *t = NULL, *t2 = NULL;
    ck_status(fence_gate_begin(g, "r", 3, &t, NULL), FENCE_OK, g);
    int64_t start = tu_now_ms();
    ck_status(fence_gate_begin(g, "r", 4, &t2, NULL), FENCE_ESTATE, g);
    ck_assert_int_lt(tu_now_ms() - start, 1000); /* refused at once, no self-wait */
    ck_assert_ptr_null(t2);
    if (_i == 0) { /* in memory another resource is independent */
        ck_status(fence_gate_begin(g, "other", 4, &t2, NULL), FENCE_OK, g);
        ck_status(fence_gate_commit(t2), FENCE_OK, g);
    } else { /* persistent: the file is the unit */
        ck_status(fence_gate_begin(g, "other", 4, &t2, NULL), FENCE_ESTATE, g);
    }
    ck_status(fence_gate_commit(t), FENCE_OK, g);
    close_gate(g);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Two writers, deterministic: A (33) holds, B (34) waits, A's write    */
/* lands first, then B's; A's late retry is rejected.                   */
/* ------------------------------------------------------------------ */

typedef struct ab_state {
    fence_gate *g;
    pthread_barrier_t bar;
    char log[64]; /* the "store": written only while the gate is held */
    int a_committing; /* atomic */
    int b_returned;   /* atomic */
    int b_rc, b_commit_rc, b_saw_a_commit;
    uint64_t b_mark;
} ab_state;

static void *writer_b(void *arg)
{
    ab_state *s = arg;
    fence_gate_txn *t = NULL;
    pthread_barrier_wait(&s->bar); /* A holds the resource now */
    s->b_rc = fence_gate_begin(s->g, "acct", 34, &t, &s->b_mark);
    s->b_saw_a_commit = __atomic_load_n(&s->a_committing, __ATOMIC_SEQ_CST);
    __atomic_store_n(&s->b_returned, 1, __ATOMIC_SEQ_CST);
    if (s->b_rc == FENCE_OK) {
        strcat(s->log, "B34;");
        s->b_commit_rc = fence_gate_commit(t);
    }
    return NULL;
}

START_TEST(test_ab_interleaving)
{
    ab_state s;
    memset(&s, 0, sizeof s);
    s.g = open_gate(_i, 10000);
    pthread_barrier_init(&s.bar, NULL, 2);
    pthread_t b;
    ck_assert_int_eq(pthread_create(&b, NULL, writer_b, &s), 0);

    fence_gate_txn *a = NULL;
    ck_status(fence_gate_begin(s.g, "acct", 33, &a, NULL), FENCE_OK, s.g);
    pthread_barrier_wait(&s.bar);
    tu_sleep_ms(200); /* B is in begin by now, and must still be waiting */
    ck_assert_msg(__atomic_load_n(&s.b_returned, __ATOMIC_SEQ_CST) == 0,
                  "B's begin returned while A held the resource (rc %s)",
                  fence_status_name(s.b_rc));
    /* A is a slow writer, but a legitimate one: its write lands first. */
    strcat(s.log, "A33;");
    __atomic_store_n(&s.a_committing, 1, __ATOMIC_SEQ_CST);
    ck_status(fence_gate_commit(a), FENCE_OK, s.g);
    pthread_join(b, NULL);

    ck_assert_msg(s.b_rc == FENCE_OK, "B: %s", fence_status_name(s.b_rc));
    ck_assert_int_eq(s.b_commit_rc, FENCE_OK);
    ck_assert_int_eq(s.b_saw_a_commit, 1);
    ck_assert_uint_eq(s.b_mark, 33);
    ck_assert_str_eq(s.log, "A33;B34;");
    ck_assert_uint_eq(high_water(s.g, "acct"), 34);

    /* A wakes up again and retries with its old token: rejected. */
    uint64_t mark = 0;
    ck_status(fence_gate_begin(s.g, "acct", 33, &a, &mark), FENCE_STALE, s.g);
    ck_assert_ptr_null(a);
    ck_assert_uint_eq(mark, 34);
    ck_assert_str_eq(s.log, "A33;B34;");
    pthread_barrier_destroy(&s.bar);
    close_gate(s.g);
}
END_TEST

/* A holder keeps the resource; the waiter gives up after wait_ms. */
typedef struct hold_state {
    fence_gate *g;
    const char *res;
    pthread_barrier_t held, release;
    int rc;
} hold_state;

static void *holder(void *arg)
{
    hold_state *h = arg;
    fence_gate_txn *t = NULL;
    h->rc = fence_gate_begin(h->g, h->res, 10, &t, NULL);
    pthread_barrier_wait(&h->held);
    pthread_barrier_wait(&h->release);
    if (h->rc == FENCE_OK) {
        fence_gate_commit(t);
    }
    return NULL;
}

START_TEST(test_wait_times_out)
{
    hold_state h = {.res = "busy"};
    h.g = open_gate(_i, 150);
    pthread_barrier_init(&h.held, NULL, 2);
    pthread_barrier_init(&h.release, NULL, 2);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, holder, &h), 0);
    pthread_barrier_wait(&h.held);
    ck_assert_int_eq(h.rc, FENCE_OK);

    fence_gate_txn *t = NULL;
    int64_t start = tu_now_ms();
    ck_status(fence_gate_begin(h.g, "busy", 11, &t, NULL), FENCE_TIMEOUT, h.g);
    int64_t took = tu_now_ms() - start;
    ck_assert_msg(took >= 140 && took < 3000, "waited %lld ms for wait_ms 150", (long long)took);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(h.g), "still held"));
    ck_assert_ptr_null(t);
    if (_i == 0) { /* in memory: other resources do not wait */
        start = tu_now_ms();
        ck_status(write_once(h.g, "free", 1, NULL), FENCE_OK, h.g);
        ck_assert_int_lt(tu_now_ms() - start, 100);
    } else { /* persistent: the whole file waits */
        ck_status(write_once(h.g, "free", 1, NULL), FENCE_TIMEOUT, h.g);
    }
    /* Readers never wait for a holder, and do not see its txn. */
    ck_assert_uint_eq(high_water(h.g, "busy"), 0);
    pthread_barrier_wait(&h.release);
    pthread_join(th, NULL);
    ck_assert_uint_eq(high_water(h.g, "busy"), 10);
    ck_status(write_once(h.g, "busy", 11, NULL), FENCE_OK, h.g);
    pthread_barrier_destroy(&h.held);
    pthread_barrier_destroy(&h.release);
    close_gate(h.g);

    /* wait_ms 0: try once. */
    h.g = open_gate(_i, 0);
    h.res = "busy2";
    pthread_barrier_init(&h.held, NULL, 2);
    pthread_barrier_init(&h.release, NULL, 2);
    ck_assert_int_eq(pthread_create(&th, NULL, holder, &h), 0);
    pthread_barrier_wait(&h.held);
    ck_assert_int_eq(h.rc, FENCE_OK);
    start = tu_now_ms();
    ck_status(fence_gate_begin(h.g, "busy2", 11, &t, NULL), FENCE_TIMEOUT, h.g);
    ck_assert_int_lt(tu_now_ms() - start, 100);
    pthread_barrier_wait(&h.release);
    pthread_join(th, NULL);
    pthread_barrier_destroy(&h.held);
    pthread_barrier_destroy(&h.release);
    close_gate(h.g);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Many threads: the accepted writes per resource never go backwards    */
/* ------------------------------------------------------------------ */

#define MT_RESOURCES 3
typedef struct mt_rec {
    int res;
    uint64_t token;
} mt_rec;

typedef struct mt_shared {
    fence_gate *g;
    int iters;
    mt_rec *log;
    size_t log_n;                     /* atomic */
    uint64_t last[MT_RESOURCES];      /* plain: only touched while held */
    uint64_t admitted_max[MT_RESOURCES];
    int violations, bad_status, bad_mark; /* atomic */
    int admitted, stale;              /* atomic */
} mt_shared;

typedef struct mt_arg {
    mt_shared *s;
    unsigned seed;
} mt_arg;

static const char *mt_names[MT_RESOURCES] = {"alpha", "beta", "gamma"};

static void *mt_writer(void *arg)
{
    mt_arg *a = arg;
    mt_shared *s = a->s;
    for (int i = 0; i < s->iters; i++) {
        int r = (int)(rand_r(&a->seed) % MT_RESOURCES);
        /* Tokens climb with i, jittered so that threads overtake each
         * other and many writes are stale. */
        uint64_t token = (uint64_t)i + 1 + (uint64_t)(rand_r(&a->seed) % 24);
        fence_gate_txn *t = NULL;
        uint64_t mark = 0;
        int rc = fence_gate_begin(s->g, mt_names[r], token, &t, &mark);
        if (rc == FENCE_STALE) {
            __atomic_add_fetch(&s->stale, 1, __ATOMIC_RELAXED);
            if (mark <= token) {
                __atomic_add_fetch(&s->bad_mark, 1, __ATOMIC_RELAXED);
            }
            continue;
        }
        if (rc != FENCE_OK) {
            __atomic_add_fetch(&s->bad_status, 1, __ATOMIC_RELAXED);
            continue;
        }
        if (mark > token) {
            __atomic_add_fetch(&s->bad_mark, 1, __ATOMIC_RELAXED);
        }
        if (rand_r(&a->seed) % 4 == 0) {
            sched_yield(); /* a slow writer: others get to try meanwhile */
        }
        /* The "write": plain memory, guarded only by the gate (TSan
         * checks that), plus a log in the order writes happened. */
        if (token < s->last[r]) {
            __atomic_add_fetch(&s->violations, 1, __ATOMIC_RELAXED);
        }
        s->last[r] = token;
        if (token > s->admitted_max[r]) {
            s->admitted_max[r] = token;
        }
        size_t k = __atomic_fetch_add(&s->log_n, 1, __ATOMIC_RELAXED);
        s->log[k].res = r;
        s->log[k].token = token;
        __atomic_add_fetch(&s->admitted, 1, __ATOMIC_RELAXED);
        if (fence_gate_commit(t) != FENCE_OK) {
            __atomic_add_fetch(&s->bad_status, 1, __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

START_TEST(test_many_threads)
{
    enum { NTHREADS = 8 };
    /* Persistent commits go through the disk: fewer of them. */
    int iters = scale(_i == 0 ? 2000 : 1000);
    mt_shared s;
    memset(&s, 0, sizeof s);
    s.g = open_gate_opts(_i, 20000, FENCE_GATE_SYNC_NORMAL);
    s.iters = iters;
    s.log = calloc((size_t)NTHREADS * (size_t)iters, sizeof *s.log);
    ck_assert_ptr_nonnull(s.log);
    pthread_t th[NTHREADS];
    mt_arg args[NTHREADS];
    for (int k = 0; k < NTHREADS; k++) {
        args[k].s = &s;
        args[k].seed = (unsigned)(k * 7919 + 17);
        ck_assert_int_eq(pthread_create(&th[k], NULL, mt_writer, &args[k]), 0);
    }
    for (int k = 0; k < NTHREADS; k++) {
        pthread_join(th[k], NULL);
    }
    ck_assert_int_eq(s.bad_status, 0);
    ck_assert_int_eq(s.bad_mark, 0);
    ck_assert_int_eq(s.violations, 0);
    ck_assert_int_eq(s.admitted + s.stale, NTHREADS * iters);
    ck_assert_int_gt(s.admitted, 0);
    ck_assert_int_gt(s.stale, 0);
    /* The log, in the order the writes happened: per resource, tokens
     * never go down. */
    uint64_t prev[MT_RESOURCES] = {0};
    ck_assert_uint_eq(s.log_n, (size_t)s.admitted);
    for (size_t k = 0; k < s.log_n; k++) {
        mt_rec *rec = &s.log[k];
        ck_assert_msg(rec->token >= prev[rec->res], "write %zu: %s token %llu after %llu", k,
                      mt_names[rec->res], (unsigned long long)rec->token,
                      (unsigned long long)prev[rec->res]);
        prev[rec->res] = rec->token;
    }
    for (int r = 0; r < MT_RESOURCES; r++) {
        ck_assert_uint_eq(high_water(s.g, mt_names[r]), s.admitted_max[r]);
    }
    free(s.log);
    close_gate(s.g);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Two processes on one persistent gate                                 */
/* ------------------------------------------------------------------ */

/* A child: ITERS writes on the shared file, each admitted one appended
 * to the shared log (O_APPEND) while the gate is held.  Exit 0 when all
 * went as expected. */
static void child_writer(int startfd, int logfd, int iters, unsigned seed)
{
    char c;
    if (read(startfd, &c, 1) < 0) { /* EOF when the parent says go */
        _exit(10);
    }
    fence_gate_options o;
    fence_gate_options_init(&o);
    o.path = db_path;
    o.wait_ms = 20000;
    o.synchronous = FENCE_GATE_SYNC_NORMAL;
    fence_gate *g = NULL;
    if (fence_gate_open(&g, &o) != FENCE_OK) {
        fprintf(stderr, "child %d: open: %s\n", (int)getpid(), fence_gate_errmsg(g));
        _exit(11);
    }
    int admitted = 0, stale = 0;
    for (int i = 0; i < iters; i++) {
        int r = (int)(rand_r(&seed) % MT_RESOURCES);
        uint64_t token = (uint64_t)i + 1 + (uint64_t)(rand_r(&seed) % 24);
        fence_gate_txn *t = NULL;
        uint64_t mark = 0;
        int rc = fence_gate_begin(g, mt_names[r], token, &t, &mark);
        if (rc == FENCE_STALE && mark > token) {
            stale++;
            continue;
        }
        if (rc != FENCE_OK || mark > token) {
            fprintf(stderr, "child %d: begin: %s %s\n", (int)getpid(), fence_status_name(rc),
                    fence_gate_errmsg(g));
            _exit(12);
        }
        char line[64];
        int n = snprintf(line, sizeof line, "W %d %020llu %d\n", r, (unsigned long long)token,
                         (int)getpid());
        if (write(logfd, line, (size_t)n) != n) {
            _exit(13);
        }
        admitted++;
        if (fence_gate_commit(t) != FENCE_OK) {
            fprintf(stderr, "child %d: commit: %s\n", (int)getpid(), fence_gate_errmsg(g));
            _exit(14);
        }
    }
    char line[64];
    int n = snprintf(line, sizeof line, "S %d %d %d\n", admitted, stale, (int)getpid());
    if (write(logfd, line, (size_t)n) != n || fence_gate_close(g) != FENCE_OK) {
        _exit(15);
    }
    _exit(0);
}

START_TEST(test_two_processes)
{
    enum { NCHILD = 2 };
    int iters = scale(1000);
    char log_path[400];
    snprintf(log_path, sizeof log_path, "%s/writes.log", tmp_dir);
    int logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0600);
    ck_assert_int_ge(logfd, 0);
    /* Create the file first so the children do not race to, and close it
     * again: SQLite connections must not cross fork(). */
    fence_gate *g = open_gate(1, 2000);
    close_gate(g);
    int go[2];
    ck_assert_int_eq(pipe(go), 0);
    pid_t pids[NCHILD];
    for (int k = 0; k < NCHILD; k++) {
        pids[k] = fork();
        ck_assert_int_ge(pids[k], 0);
        if (pids[k] == 0) {
            close(go[1]);
            child_writer(go[0], logfd, iters, (unsigned)(k * 104729 + 3));
        }
    }
    close(go[0]);
    close(go[1]); /* go */
    close(logfd);
    for (int k = 0; k < NCHILD; k++) {
        int st = 0;
        ck_assert_int_eq(waitpid(pids[k], &st, 0), pids[k]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d ended with status %d",
                      (int)pids[k], st);
    }

    FILE *f = fopen(log_path, "r");
    ck_assert_ptr_nonnull(f);
    uint64_t prev[MT_RESOURCES] = {0};
    int writes = 0, admitted = 0, stale = 0, summaries = 0;
    char line[128];
    while (fgets(line, sizeof line, f) != NULL) {
        int r, pid, a, s;
        unsigned long long tok;
        if (sscanf(line, "W %d %llu %d", &r, &tok, &pid) == 3) {
            ck_assert(r >= 0 && r < MT_RESOURCES);
            ck_assert_msg(tok >= prev[r], "write %d: %s token %llu after %llu (pid %d)", writes,
                          mt_names[r], tok, (unsigned long long)prev[r], pid);
            prev[r] = tok;
            writes++;
        } else if (sscanf(line, "S %d %d %d", &a, &s, &pid) == 3) {
            admitted += a;
            stale += s;
            summaries++;
        } else {
            ck_abort_msg("bad log line: %s", line);
        }
    }
    fclose(f);
    g = open_gate(1, 2000);
    ck_assert_int_eq(summaries, NCHILD);
    ck_assert_int_eq(writes, admitted);
    ck_assert_int_eq(admitted + stale, NCHILD * iters);
    ck_assert_int_gt(admitted, 0);
    ck_assert_int_gt(stale, 0);
    for (int r = 0; r < MT_RESOURCES; r++) {
        ck_assert_uint_eq(high_water(g, mt_names[r]), prev[r]);
    }
    close_gate(g);
}
END_TEST

/* A process killed while holding does not block the others for ever, and
 * its unfinished write is not recorded. */
START_TEST(test_killed_holder)
{
    fence_gate *g = open_gate(1, 300);
    ck_status(write_once(g, "res", 3, NULL), FENCE_OK, g);
    close_gate(g); /* SQLite connections must not cross fork() */
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(p[0]);
        fence_gate_options o;
        fence_gate_options_init(&o);
        o.path = db_path;
        fence_gate *cg = NULL;
        fence_gate_txn *t = NULL;
        if (fence_gate_open(&cg, &o) != FENCE_OK ||
            fence_gate_begin(cg, "res", 5, &t, NULL) != FENCE_OK) {
            _exit(1);
        }
        if (write(p[1], "h", 1) != 1) {
            _exit(2);
        }
        for (;;) {
            pause(); /* holding, until killed */
        }
    }
    close(p[1]);
    char c = 0;
    ck_assert_int_eq(read(p[0], &c, 1), 1); /* the child holds "res" */
    close(p[0]);

    g = open_gate(1, 300);
    fence_gate_txn *t = NULL;
    int64_t start = tu_now_ms();
    ck_status(fence_gate_begin(g, "res", 6, &t, NULL), FENCE_TIMEOUT, g);
    ck_assert_int_ge(tu_now_ms() - start, 250);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "another process"));
    ck_assert_uint_eq(high_water(g, "res"), 3); /* reads do not wait */

    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

    uint64_t mark = 0;
    start = tu_now_ms();
    ck_status(fence_gate_begin(g, "res", 4, &t, &mark), FENCE_OK, g);
    ck_assert_int_lt(tu_now_ms() - start, 300);
    ck_assert_uint_eq(mark, 3); /* the dead holder's 5 was never recorded */
    ck_status(fence_gate_commit(t), FENCE_OK, g);
    ck_assert_uint_eq(high_water(g, "res"), 4);
    close_gate(g);

    /* And a fresh open of the file sees the same. */
    g = open_gate(1, 300);
    ck_assert_uint_eq(high_water(g, "res"), 4);
    close_gate(g);
}
END_TEST

static Suite *gate_suite(void)
{
    Suite *s = suite_create("gate");
    TCase *tc = tcase_create("rule");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_stale_equal_higher, 0, 2);
    tcase_add_loop_test(tc, test_abort_records_nothing, 0, 2);
    tcase_add_loop_test(tc, test_token_zero_rejected, 0, 2);
    tcase_add_test(tc, test_persists_across_reopen);
    tcase_add_loop_test(tc, test_injection_names_are_names, 0, 2);
    tcase_add_loop_test(tc, test_many_resources, 0, 2);
    tcase_add_test(tc, test_bad_arguments);
    tcase_add_loop_test(tc, test_close_with_open_txn, 0, 2);
    tcase_add_loop_test(tc, test_same_thread_rebegin, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase_create("concurrency");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_ab_interleaving, 0, 2);
    tcase_add_loop_test(tc, test_wait_times_out, 0, 2);
    tcase_add_loop_test(tc, test_many_threads, 0, 2);
    tcase_add_test(tc, test_two_processes);
    tcase_add_test(tc, test_killed_holder);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(gate_suite());
}
