/*
 * test_lease.c -- the lease itself: mutual exclusion (clients, processes,
 * threads), fencing tokens, release after loss, waiting and wake-up,
 * token counter helpers.  Real redis-server from scripts/with-servers, or
 * with FENCE_TEST_ISSUER=pg the PostgreSQL issuer on the test PostgreSQL
 * (run-suites: test_lease and test_lease:pg; issuerutil.h).  The cases
 * about Redis itself (its keys, the key prefix, Lua's doubles and the
 * clock tokens) are in the tcase "redis", run only against Redis.
 */
#include "fence.h"
#include "issuerutil.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/* Helpers                                                              */
/* ------------------------------------------------------------------ */

static double now_ms_f(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- the holder helper process ---- */

static const char *holder_path(void)
{
    static char path[PATH_MAX + 16];
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash != NULL) {
            *slash = '\0';
            snprintf(path, sizeof path, "%s/holder", exe);
            if (access(path, X_OK) == 0) {
                return path;
            }
        }
    }
    const char *b = getenv("FENCE_BUILD");
    snprintf(path, sizeof path, "%s/tests/lease/holder", b != NULL ? b : "build");
    ck_assert_msg(access(path, X_OK) == 0, "the helper program %s is missing: make %s", path,
                  path);
    return path;
}

typedef struct holder {
    pid_t pid;
    int fd; /* its stdout */
} holder;

static holder holder_spawn(const char *name, int64_t ttl, long cycles, const char *log)
{
    char ttl_s[32], cycles_s[32];
    snprintf(ttl_s, sizeof ttl_s, "%" PRId64, ttl);
    snprintf(cycles_s, sizeof cycles_s, "%ld", cycles);
    const char *path = holder_path();
    char *argv[7] = {(char *)(uintptr_t)path, (char *)(uintptr_t)lu_iss_url(),
                     (char *)(uintptr_t)name, ttl_s, NULL, NULL, NULL};
    if (cycles > 0) {
        argv[4] = cycles_s;
        argv[5] = (char *)(uintptr_t)log;
    }
    int p[2];
    ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
    holder h = {0, p[0]};
    int err = posix_spawn(&h.pid, path, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    ck_assert_msg(err == 0, "posix_spawn %s: %s", path, strerror(err));
    return h;
}

/* One line of the holder's stdout (without the newline), waiting up to
 * timeout_ms; "" on timeout or EOF. */
static void holder_line(holder *h, char *buf, size_t n, int timeout_ms)
{
    size_t len = 0;
    int64_t deadline = tu_now_ms() + timeout_ms;
    buf[0] = '\0';
    while (len + 1 < n) {
        int64_t left = deadline - tu_now_ms();
        if (left <= 0) {
            break;
        }
        struct pollfd pfd = {h->fd, POLLIN, 0};
        int pr = poll(&pfd, 1, (int)left);
        if (pr <= 0) {
            if (pr < 0 && errno == EINTR) {
                continue;
            }
            break;
        }
        char ch;
        ssize_t r = read(h->fd, &ch, 1);
        if (r <= 0) {
            break;
        }
        if (ch == '\n') {
            break;
        }
        buf[len++] = ch;
        buf[len] = '\0';
    }
}

static uint64_t holder_token(holder *h)
{
    char line[256];
    holder_line(h, line, sizeof line, 10000);
    uint64_t tok = 0;
    ck_assert_msg(sscanf(line, "token %" SCNu64, &tok) == 1,
                  "holder did not report a token; it said \"%s\"", line);
    ck_assert_uint_ge(tok, 1);
    return tok;
}

/* Wait for the holder to exit; returns its exit status (128+sig if killed). */
static int holder_wait(holder *h, int timeout_ms)
{
    int64_t deadline = tu_now_ms() + timeout_ms;
    int st = 0;
    for (;;) {
        pid_t r = waitpid(h->pid, &st, WNOHANG);
        if (r == h->pid) {
            break;
        }
        if (tu_now_ms() > deadline) {
            kill(h->pid, SIGKILL);
            waitpid(h->pid, &st, 0);
            close(h->fd);
            ck_abort_msg("holder %ld did not exit within %d ms", (long)h->pid, timeout_ms);
        }
        tu_sleep_ms(5);
    }
    close(h->fd);
    h->fd = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ------------------------------------------------------------------ */
/* Acquire / release basics                                             */
/* ------------------------------------------------------------------ */

START_TEST(acquire_basic)
{
    fence_client *c = lu_open_client();
    redisContext *r = tu_redis();
    const char *name = tu_name("basic");
    char ok_key[600], tk_key[600];
    lu_owner_key(ok_key, sizeof ok_key, name);
    lu_token_key(tk_key, sizeof tk_key, name);

    fence_lease *l = NULL;
    EXPECT_RC(fence_try_acquire(c, name, 500, &l), FENCE_OK, c);
    ck_assert_ptr_nonnull(l);
    uint64_t tok = fence_lease_token(l);
    ck_assert_uint_ge(tok, 1);
    ck_assert_str_eq(fence_lease_name(l), name);
    ck_assert_ptr_eq(fence_lease_client(l), c);
    ck_assert_int_eq(fence_lease_lost(l), 0);

    /* Owner value "<32 hex>:<token>", and it is what Redis holds. */
    const char *owner = fence_lease_owner(l);
    ck_assert_ptr_nonnull(owner);
    ck_assert_uint_ge(strlen(owner), 34);
    for (int i = 0; i < 2 * FENCE_OWNER_BYTES; i++) {
        ck_assert_msg(strchr("0123456789abcdefABCDEF", owner[i]) != NULL && owner[i] != '\0',
                      "owner \"%s\" is not 32 hex digits then ':'", owner);
    }
    ck_assert_int_eq(owner[32], ':');
    char want_tok[32];
    snprintf(want_tok, sizeof want_tok, "%" PRIu64, tok);
    ck_assert_str_eq(owner + 33, want_tok);

    lu_expect_get(r, ok_key, owner);
    long long pttl = lu_rpttl(r, ok_key);
    ck_assert_msg(pttl > 0 && pttl <= 500, "owner key PTTL %lld, expected 1..500", pttl);

    /* The counter (a hash: n, run, t) holds the token and is kept (a
     * clock counter expires a day after its token's instant). */
    lu_expect_counter(r, tk_key, want_tok);
    lu_expect_counter_kept(r, tk_key);

    EXPECT_RC(fence_release(l), FENCE_OK, c);
    ck_assert_int_eq(lu_rexists(r, ok_key), 0);
    /* The counter survives the release. */
    ck_assert_int_eq(lu_rexists(r, tk_key), 1);
    lu_expect_counter_kept(r, tk_key);

    /* Acquire again: a greater token (consecutive in DENSE mode:
     * test_tokens dense_tokens_are_consecutive). */
    l = lu_acquire_ok(c, name, 500, 0);
    ck_assert_uint_gt(fence_lease_token(l), tok);
    EXPECT_RC(fence_release(l), FENCE_OK, c);

    redisFree(r);
    fence_client_close(c);
}
END_TEST

START_TEST(mutex_two_clients)
{
    fence_client *c1 = lu_iss_open();
    fence_client *c2 = lu_iss_open();
    const char *name = tu_name("mutex2");
    fence_lease *l1 = lu_acquire_ok(c1, name, 2000, 0);

    fence_lease *l2 = (fence_lease *)(uintptr_t)0x1; /* must be reset to NULL */
    EXPECT_RC(fence_try_acquire(c2, name, 2000, &l2), FENCE_BUSY, c2);
    ck_assert_ptr_null(l2);
    /* The same client cannot take it twice either. */
    l2 = NULL;
    EXPECT_RC(fence_try_acquire(c1, name, 2000, &l2), FENCE_BUSY, c1);
    ck_assert_ptr_null(l2);

    uint64_t t1 = fence_lease_token(l1);
    EXPECT_RC(fence_release(l1), FENCE_OK, c1);
    l2 = lu_acquire_ok(c2, name, 2000, 0);
    ck_assert_uint_gt(fence_lease_token(l2), t1);
    l1 = NULL;
    EXPECT_RC(fence_try_acquire(c1, name, 2000, &l1), FENCE_BUSY, c1);
    EXPECT_RC(fence_release(l2), FENCE_OK, c2);

    fence_client_close(c1);
    fence_client_close(c2);
}
END_TEST

START_TEST(mutex_across_processes)
{
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("mutexproc"));
    holder h = holder_spawn(nm, 2000, 0, NULL);
    uint64_t htok = holder_token(&h);

    fence_client *c = lu_iss_open();
    fence_lease *l = NULL;
    EXPECT_RC(fence_try_acquire(c, nm, 2000, &l), FENCE_BUSY, c);
    ck_assert_ptr_null(l);

    /* Stop the holder: it releases, and then we get the lease. */
    kill(h.pid, SIGTERM);
    char line[256];
    holder_line(&h, line, sizeof line, 5000);
    ck_assert_str_eq(line, "released FENCE_OK");
    ck_assert_int_eq(holder_wait(&h, 5000), 0);

    l = lu_acquire_ok(c, nm, 2000, 0);
    ck_assert_uint_gt(fence_lease_token(l), htok);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    fence_client_close(c);
}
END_TEST

/* Three processes take turns on one name; their log shows nobody else was
 * ever inside, and tokens grow in the order the lease was held. */
START_TEST(mutex_processes_cycles)
{
    enum { NPROC = 3, CYCLES = 15 };
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("cycles"));
    char log[] = "/tmp/fence-cycles.XXXXXX";
    int fd = mkstemp(log);
    ck_assert_int_ge(fd, 0);
    close(fd);

    holder hs[NPROC];
    for (int i = 0; i < NPROC; i++) {
        hs[i] = holder_spawn(nm, 2000, CYCLES, log);
    }
    for (int i = 0; i < NPROC; i++) {
        char line[256];
        holder_line(&hs[i], line, sizeof line, 30000);
        int st = holder_wait(&hs[i], 30000);
        ck_assert_msg(st == 0 && strcmp(line, "done") == 0, "holder %d: exit %d, said \"%s\"",
                      i, st, line);
    }

    FILE *f = fopen(log, "r");
    ck_assert_ptr_nonnull(f);
    char tag[8], tag2[8];
    long pid, pid2;
    uint64_t tok, tok2, last = 0;
    int n = 0;
    while (fscanf(f, "%7s %ld %" SCNu64, tag, &pid, &tok) == 3) {
        ck_assert_str_eq(tag, "in");
        ck_assert_msg(tok > last, "token %" PRIu64 " after %" PRIu64 " (not increasing)", tok,
                      last);
        last = tok;
        ck_assert_msg(fscanf(f, "%7s %ld %" SCNu64, tag2, &pid2, &tok2) == 3,
                      "log ends inside a critical section");
        ck_assert_msg(strcmp(tag2, "out") == 0 && pid2 == pid && tok2 == tok,
                      "overlap: \"in %ld %" PRIu64 "\" followed by \"%s %ld %" PRIu64 "\"",
                      pid, tok, tag2, pid2, tok2);
        n++;
    }
    fclose(f);
    unlink(log);
    ck_assert_int_eq(n, NPROC * CYCLES);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Tokens                                                               */
/* ------------------------------------------------------------------ */

START_TEST(tokens_increase_across_clients)
{
    enum { NCLI = 3, ROUNDS = 60 };
    fence_client *cs[NCLI];
    for (int i = 0; i < NCLI; i++) {
        cs[i] = lu_iss_open();
    }
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("tokens"));
    uint64_t last = 0;
    for (int i = 0; i < ROUNDS; i++) {
        fence_client *c = cs[(i * 7 + i / 3) % NCLI]; /* irregular interleaving */
        fence_lease *l = lu_acquire_ok(c, nm, 1000, 0);
        uint64_t t = fence_lease_token(l);
        ck_assert_msg(t > last, "round %d: token %" PRIu64 " not > %" PRIu64, i, t, last);
        last = t;
        EXPECT_RC(fence_release(l), FENCE_OK, c);
    }
    ck_assert_uint_ge(last, ROUNDS);
    uint64_t tl = 0;
    EXPECT_RC(fence_token_last(cs[0], nm, &tl), FENCE_OK, cs[0]);
    ck_assert_uint_eq(tl, last);
    if (!lu_iss_pg()) { /* (a PostgreSQL counter is a row that is never deleted) */
        char tk_key[600];
        lu_token_key(tk_key, sizeof tk_key, nm);
        redisContext *r = tu_redis();
        lu_expect_counter_kept(r, tk_key);
        redisFree(r);
    }
    for (int i = 0; i < NCLI; i++) {
        fence_client_close(cs[i]);
    }
}
END_TEST

/* Threads contending on one name, with their own clients or one shared
 * client: an in-critical-section counter never exceeds 1, tokens grow in
 * the order the lease was held, and each thread's private name is never
 * busy. */
enum { NTHREADS = 4, THREAD_ITERS = 20 };

typedef struct race {
    fence_client *shared;
    const char *url;
    char name[256];
    atomic_int in_cs;
    atomic_int overlap;
    atomic_int order_bad;
    atomic_int errors;
    atomic_int first_err;
    atomic_uint_least64_t last_token;
    atomic_int done;
} race;

typedef struct race_arg {
    race *r;
    int idx;
} race_arg;

static void race_err(race *r, int rc)
{
    int zero = 0;
    atomic_fetch_add(&r->errors, 1);
    atomic_compare_exchange_strong(&r->first_err, &zero, rc);
}

static void *race_thread(void *arg)
{
    race_arg *a = arg;
    race *r = a->r;
    fence_client *c = r->shared;
    if (c == NULL) {
        int rc = fence_client_open_url(&c, r->url);
        if (rc != FENCE_OK) {
            race_err(r, rc);
            fence_client_close(c);
            return NULL;
        }
    }
    char own[300];
    snprintf(own, sizeof own, "%s-own%d", r->name, a->idx);
    for (int i = 0; i < THREAD_ITERS; i++) {
        fence_lease_options lo;
        fence_lease_options_init(&lo, 5000);
        lo.wait_ms = 10000;
        fence_lease *l = NULL;
        int rc = fence_acquire(c, r->name, &lo, &l);
        if (rc != FENCE_OK) {
            race_err(r, rc);
            continue;
        }
        if (atomic_fetch_add(&r->in_cs, 1) != 0) {
            atomic_fetch_add(&r->overlap, 1);
        }
        uint64_t t = fence_lease_token(l);
        if (t <= atomic_load(&r->last_token)) {
            atomic_fetch_add(&r->order_bad, 1);
        }
        atomic_store(&r->last_token, t);
        struct timespec pause = {0, 200000L};
        nanosleep(&pause, NULL);
        atomic_fetch_sub(&r->in_cs, 1);
        rc = fence_release(l);
        if (rc != FENCE_OK) {
            race_err(r, rc);
        }

        /* A name only this thread uses is always free. */
        fence_lease *o = NULL;
        rc = fence_try_acquire(c, own, 5000, &o);
        if (rc != FENCE_OK) {
            race_err(r, rc);
            continue;
        }
        rc = fence_release(o);
        if (rc != FENCE_OK) {
            race_err(r, rc);
        }
    }
    atomic_fetch_add(&r->done, 1);
    if (r->shared == NULL) {
        fence_client_close(c);
    }
    return NULL;
}

static void run_race(int shared)
{
    race *r = calloc(1, sizeof *r);
    ck_assert_ptr_nonnull(r);
    r->url = lu_iss_url();
    snprintf(r->name, sizeof r->name, "%s", tu_name(shared ? "race-shared" : "race-own"));
    if (shared) {
        r->shared = lu_iss_open();
    }
    pthread_t th[NTHREADS];
    race_arg args[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        args[i].r = r;
        args[i].idx = i;
        ck_assert_int_eq(pthread_create(&th[i], NULL, race_thread, &args[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
    }
    int errors = atomic_load(&r->errors), first = atomic_load(&r->first_err);
    int overlap = atomic_load(&r->overlap), order_bad = atomic_load(&r->order_bad);
    int done = atomic_load(&r->done);
    uint64_t last = atomic_load(&r->last_token);
    fence_client *sc = r->shared;
    char name[256];
    snprintf(name, sizeof name, "%s", r->name);
    free(r);
    ck_assert_msg(errors == 0, "%d fence_* calls failed in the threads (first: %s)", errors,
                  fence_status_name(first));
    ck_assert_msg(overlap == 0, "%d times two threads held the lease at once", overlap);
    ck_assert_msg(order_bad == 0, "%d tokens were not greater than the previous holder's",
                  order_bad);
    ck_assert_int_eq(done, NTHREADS);
    ck_assert_uint_ge(last, NTHREADS * THREAD_ITERS);
    ck_assert_int_eq(lu_iss_held(name), 0);
    fence_client_close(sc);
}

START_TEST(threads_own_clients)
{
    run_race(0);
}
END_TEST

START_TEST(threads_shared_client)
{
    run_race(1);
}
END_TEST

START_TEST(token_raise_last_inspect)
{
    /* The exact values are the point: dense tokens (the clock mode's
     * raise is in test_tokens; PostgreSQL's tokens are dense). */
    fence_client *c = lu_iss_pg() ? lu_iss_open() : lu_open_dense();
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("raise"));

    uint64_t t = 99;
    EXPECT_RC(fence_token_last(c, nm, &t), FENCE_OK, c);
    ck_assert_uint_eq(t, 0);
    int held = -5;
    int64_t pttl = -5;
    uint64_t ht = 99, lt = 99;
    EXPECT_RC(fence_lease_inspect(c, nm, &held, &pttl, &ht, &lt), FENCE_OK, c);
    ck_assert_int_eq(held, 0);
    ck_assert_int_eq(pttl, -1);
    ck_assert_uint_eq(ht, 0);
    ck_assert_uint_eq(lt, 0);

    EXPECT_RC(fence_token_raise(c, nm, 1000, &t), FENCE_OK, c);
    ck_assert_uint_eq(t, 1000);
    /* Never lowers. */
    EXPECT_RC(fence_token_raise(c, nm, 10, &t), FENCE_OK, c);
    ck_assert_uint_eq(t, 1000);
    EXPECT_RC(fence_token_raise(c, nm, 5, NULL), FENCE_OK, c);

    fence_lease *l = lu_acquire_ok(c, nm, 1000, 0);
    ck_assert_uint_eq(fence_lease_token(l), 1001);
    EXPECT_RC(fence_lease_inspect(c, nm, &held, &pttl, &ht, &lt), FENCE_OK, c);
    ck_assert_int_eq(held, 1);
    ck_assert_msg(pttl > 0 && pttl <= 1000, "pttl %" PRId64, pttl);
    ck_assert_uint_eq(ht, 1001);
    ck_assert_uint_eq(lt, 1001);
    EXPECT_RC(fence_lease_inspect(c, nm, NULL, NULL, NULL, NULL), FENCE_OK, c);
    EXPECT_RC(fence_token_last(c, nm, &t), FENCE_OK, c);
    ck_assert_uint_eq(t, 1001);

    /* Raising while held moves the counter, not the holder's token. */
    EXPECT_RC(fence_token_raise(c, nm, 5000, &t), FENCE_OK, c);
    ck_assert_uint_eq(t, 5000);
    ck_assert_uint_eq(fence_lease_token(l), 1001);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    l = lu_acquire_ok(c, nm, 1000, 0);
    ck_assert_uint_eq(fence_lease_token(l), 5001);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    EXPECT_RC(fence_lease_inspect(c, nm, &held, &pttl, &ht, &lt), FENCE_OK, c);
    ck_assert_int_eq(held, 0);
    ck_assert_uint_eq(ht, 0);
    ck_assert_uint_eq(lt, 5001);
    fence_client_close(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Loss, kill -9, release after loss                                    */
/* ------------------------------------------------------------------ */

/* Tokens stay exact across 2^53, where Lua's doubles stop being exact, up
 * to the largest value a Redis counter can hold: clock tokens (_i 0; far
 * past the clock they are last + 1, after one jump: a counter that
 * fence_token_raise made was never issued from by this server) and dense
 * tokens (_i 1). */
START_TEST(tokens_exact_past_2_53)
{
    fence_client *c = _i == 0 ? lu_open_client() : lu_open_dense();
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("big"));
    uint64_t t = 0;
    const uint64_t start = 9007199254740990ULL; /* 2^53 - 2 */
    EXPECT_RC(fence_token_raise(c, nm, start, &t), FENCE_OK, c);
    ck_assert_uint_eq(t, start);
    const uint64_t jump = _i == 0 ? FENCE_TOKEN_JUMP_DEFAULT_MS * 1000ULL : 0;
    for (uint64_t i = 1; i <= 4; i++) {
        fence_lease *l = lu_acquire_ok(c, nm, 1000, 0);
        ck_assert_uint_eq(fence_lease_token(l), start + i + jump);
        ck_assert_int_eq(fence_release(l), FENCE_OK);
    }
    EXPECT_RC(fence_token_raise(c, nm, (uint64_t)INT64_MAX - 1, &t), FENCE_OK, c);
    fence_lease *l = lu_acquire_ok(c, nm, 1000, 0);
    ck_assert_uint_eq(fence_lease_token(l), (uint64_t)INT64_MAX);
    ck_assert_int_eq(fence_release(l), FENCE_OK);
    /* The counter is exhausted: acquiring fails with a clear error and
     * leaves no owner key behind. */
    fence_lease *none = NULL;
    ck_assert_int_eq(fence_try_acquire(c, nm, 1000, &none), FENCE_EPROTO);
    ck_assert_ptr_null(none);
    int held = 1;
    EXPECT_RC(fence_lease_inspect(c, nm, &held, NULL, NULL, &t), FENCE_OK, c);
    ck_assert_int_eq(held, 0);
    ck_assert_uint_eq(t, (uint64_t)INT64_MAX);
    fence_client_close(c);
}
END_TEST

START_TEST(kill9_frees_after_ttl)
{
    const int64_t ttl = 300;
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("kill9"));
    holder h = holder_spawn(nm, ttl, 0, NULL);
    uint64_t htok = holder_token(&h);
    tu_sleep_ms(ttl); /* a few heartbeats: the lease is still its */

    fence_client *c = lu_iss_open();
    fence_lease *l = NULL;
    EXPECT_RC(fence_try_acquire(c, nm, ttl, &l), FENCE_BUSY, c);

    ck_assert_int_eq(kill(h.pid, SIGKILL), 0);
    ck_assert_int_eq(holder_wait(&h, 5000), 128 + SIGKILL);
    double t0 = now_ms_f();
    /* The key (the row) outlives its holder until the TTL runs out... */
    long long left = lu_iss_pttl(nm);
    ck_assert_msg(left > 0 && left <= ttl, "after kill -9 the lease has PTTL %lld", left);
    /* ...and then the lease is free, with a higher token. */
    l = lu_acquire_ok(c, nm, ttl, 3000);
    double waited = now_ms_f() - t0;
    fprintf(stderr, "kill9_frees_after_ttl: acquired %.1f ms after kill -9 (PTTL was %lld)\n",
            waited, left);
    ck_assert_msg(waited <= (double)left + 1000,
                  "acquired only %.1f ms after the killed holder's key expired (PTTL %lld)",
                  waited, left);
    ck_assert_uint_gt(fence_lease_token(l), htok);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    fence_client_close(c);
}
END_TEST

START_TEST(release_after_delete_is_lost)
{
    fence_client *c1 = lu_iss_open();
    fence_client *c2 = lu_iss_open();
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("reldel"));

    fence_lease *l1 = lu_acquire_ok(c1, nm, 5000, 0);
    uint64_t t1 = fence_lease_token(l1);
    /* Behind the library's back: the key deleted (the row expired). */
    ck_assert_int_eq(lu_iss_drop(nm), 1);
    fence_lease *l2 = lu_acquire_ok(c2, nm, 5000, 0);
    ck_assert_uint_gt(fence_lease_token(l2), t1);
    char owner2[128];
    snprintf(owner2, sizeof owner2, "%s", fence_lease_owner(l2));

    EXPECT_RC(fence_release(l1), FENCE_LOST, c1);
    /* The new owner's lease is untouched. */
    char *now = lu_iss_owner(nm);
    ck_assert_ptr_nonnull(now);
    ck_assert_str_eq(now, owner2);
    free(now);
    ck_assert_int_eq(fence_lease_lost(l2), 0);
    EXPECT_RC(fence_renew(l2), FENCE_OK, c2);
    EXPECT_RC(fence_release(l2), FENCE_OK, c2);
    ck_assert_int_eq(lu_iss_held(nm), 0);
    fence_client_close(c1);
    fence_client_close(c2);
}
END_TEST

START_TEST(release_after_expiry_is_lost)
{
    fence_client *c1 = lu_iss_open();
    fence_client *c2 = lu_iss_open();
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("relexp"));

    fence_lease *l1 = lu_acquire_cb(c1, nm, 100, 0, 1, NULL); /* no heartbeat */
    tu_sleep_ms(150);
    ck_assert_int_eq(fence_lease_valid_ms(l1), 0);
    fence_lease *l2 = lu_acquire_ok(c2, nm, 5000, 0);
    char owner2[128];
    snprintf(owner2, sizeof owner2, "%s", fence_lease_owner(l2));

    EXPECT_RC(fence_renew(l1), FENCE_LOST, c1);
    ck_assert_int_ne(fence_lease_lost(l1), 0);
    ck_assert_int_eq(fence_lease_valid_ms(l1), 0);
    /* Renewing a lost lease stays lost: it must never take the key back. */
    EXPECT_RC(fence_renew(l1), FENCE_LOST, c1);
    EXPECT_RC(fence_release(l1), FENCE_LOST, c1);
    char *now = lu_iss_owner(nm);
    ck_assert_ptr_nonnull(now);
    ck_assert_str_eq(now, owner2);
    free(now);
    long long pttl = lu_iss_pttl(nm);
    ck_assert_msg(pttl > 4000, "new owner's lease PTTL %lld: someone touched it", pttl);
    EXPECT_RC(fence_release(l2), FENCE_OK, c2);
    fence_client_close(c1);
    fence_client_close(c2);
}
END_TEST

START_TEST(close_releases_open_leases)
{
    fence_client *c = lu_iss_open();
    char n1[256], n2[256];
    snprintf(n1, sizeof n1, "%s", tu_name("close1"));
    snprintf(n2, sizeof n2, "%s", tu_name("close2"));
    lu_acquire_ok(c, n1, 5000, 0);
    lu_acquire_ok(c, n2, 5000, 0);
    ck_assert_int_eq(lu_iss_held(n1), 1);
    ck_assert_int_eq(lu_iss_held(n2), 1);
    fence_client_close(c); /* frees and releases both */
    ck_assert_int_eq(lu_iss_held(n1), 0);
    ck_assert_int_eq(lu_iss_held(n2), 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Waiting                                                              */
/* ------------------------------------------------------------------ */

typedef struct waiter {
    fence_client *c;
    const char *name;
    int64_t ttl_ms;
    int64_t wait_ms;
    int rc;
    fence_lease *lease;
    double start_ms;
    double done_ms;
} waiter;

static void *waiter_thread(void *arg)
{
    waiter *w = arg;
    fence_lease_options lo;
    fence_lease_options_init(&lo, w->ttl_ms);
    lo.wait_ms = w->wait_ms;
    w->start_ms = now_ms_f();
    w->rc = fence_acquire(w->c, w->name, &lo, &w->lease);
    w->done_ms = now_ms_f();
    return NULL;
}

START_TEST(wait_woken_by_release)
{
    fence_client *c1 = lu_iss_open();
    fence_client *c2 = lu_iss_open();
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("wake"));
    /* A long TTL so that expiry cannot explain a quick hand-off. */
    fence_lease *l1 = lu_acquire_ok(c1, nm, 5000, 0);
    uint64_t t1 = fence_lease_token(l1);

    waiter w = {c2, nm, 5000, 2000, -1, NULL, 0, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, waiter_thread, &w), 0);
    int subscribed = lu_iss_waiting(nm, 1000);
    tu_sleep_ms(100); /* let it settle into its wait */
    double t0 = now_ms_f();
    EXPECT_RC(fence_release(l1), FENCE_OK, c1);
    pthread_join(th, NULL);
    double latency = w.done_ms - t0;
    fprintf(stderr,
            "wait_woken_by_release: waiter acquired %.2f ms after release "
            "(subscriber seen: %s)\n",
            latency, subscribed ? "yes" : "no");
    ck_assert_msg(w.rc == FENCE_OK, "waiter: %s (%s)", fence_status_name(w.rc),
                  fence_client_errmsg(c2));
    ck_assert_uint_gt(fence_lease_token(w.lease), t1);
    ck_assert_msg(latency < 50.0,
                  "waiter acquired %.2f ms after the release (expected < 50 ms: woken by the "
                  "release, not by polling)",
                  latency);
    ck_assert_msg(subscribed, "nobody listened for %s's release while waiting (%s)", nm,
                  lu_iss_name());
    EXPECT_RC(fence_release(w.lease), FENCE_OK, c2);
    fence_client_close(c1);
    fence_client_close(c2);
}
END_TEST

START_TEST(wait_times_out)
{
    fence_client *c1 = lu_iss_open();
    fence_client *c2 = lu_iss_open();
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("timeout"));
    fence_lease *l1 = lu_acquire_ok(c1, nm, 5000, 0);
    fence_metrics m0 = lu_metrics(c2);

    fence_lease_options lo;
    fence_lease_options_init(&lo, 5000);
    lo.wait_ms = 300;
    fence_lease *l2 = (fence_lease *)(uintptr_t)0x1;
    double t0 = now_ms_f();
    int rc = fence_acquire(c2, nm, &lo, &l2);
    double waited = now_ms_f() - t0;
    fprintf(stderr, "wait_times_out: FENCE_TIMEOUT after %.1f ms (wait_ms 300)\n", waited);
    ck_assert_msg(rc == FENCE_TIMEOUT, "got %s", fence_status_name(rc));
    ck_assert_ptr_null(l2);
    ck_assert_msg(waited >= 295 && waited <= 700, "waited %.1f ms for wait_ms 300", waited);
    fence_metrics m1 = lu_metrics(c2);
    ck_assert_uint_eq(m1.acquire_timeouts, m0.acquire_timeouts + 1);
    ck_assert_uint_ge(m1.acquire_contended, m0.acquire_contended + 1);
    ck_assert_uint_eq(m1.lease_acquired, m0.lease_acquired);
    ck_assert_int_eq(fence_lease_lost(l1), 0);
    EXPECT_RC(fence_release(l1), FENCE_OK, c1);
    fence_client_close(c1);
    fence_client_close(c2);
}
END_TEST

START_TEST(wait_gets_expired_lease)
{
    fence_client *c1 = lu_iss_open();
    fence_client *c2 = lu_iss_open();
    char nm[256];
    snprintf(nm, sizeof nm, "%s", tu_name("waitexp"));
    /* No heartbeat: it expires without a release, so nobody publishes. */
    fence_lease *l1 = lu_acquire_cb(c1, nm, 300, 0, 1, NULL);
    double t0 = now_ms_f();
    fence_lease *l2 = lu_acquire_ok(c2, nm, 1000, 3000);
    double waited = now_ms_f() - t0;
    fprintf(stderr, "wait_gets_expired_lease: acquired after %.1f ms (holder TTL 300 ms)\n",
            waited);
    ck_assert_msg(waited >= 250, "acquired after %.1f ms, before the 300 ms TTL ran out",
                  waited);
    ck_assert_msg(waited <= 1500, "acquired only after %.1f ms for a 300 ms TTL", waited);
    ck_assert_uint_gt(fence_lease_token(l2), fence_lease_token(l1));
    EXPECT_RC(fence_release(l1), FENCE_LOST, c1);
    EXPECT_RC(fence_release(l2), FENCE_OK, c2);
    fence_client_close(c1);
    fence_client_close(c2);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Names and prefixes                                                   */
/* ------------------------------------------------------------------ */

START_TEST(odd_names)
{
    fence_client *c = lu_iss_open();
    char longname[FENCE_NAME_MAX + 1];
    memset(longname, 'n', FENCE_NAME_MAX);
    longname[FENCE_NAME_MAX] = '\0';
    snprintf(longname, 40, "%s", tu_name("long")); /* unique start */
    longname[strlen(longname)] = 'n';              /* undo the NUL snprintf wrote */
    char n1[256], n2[256], n3[256];
    snprintf(n1, sizeof n1, "%s a}b{c} d", tu_name("brace"));
    snprintf(n2, sizeof n2, "%s-\xc3\xa9t\xc3\xa9 *?[x]", tu_name("utf8"));
    snprintf(n3, sizeof n3, "%s:token", tu_name("colon"));
    const char *names[] = {longname, n1, n2, n3};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        fence_lease *l = lu_acquire_ok(c, names[i], 1000, 0);
        ck_assert_str_eq(fence_lease_name(l), names[i]);
        char *owner = lu_iss_owner(names[i]);
        ck_assert_ptr_nonnull(owner);
        ck_assert_str_eq(owner, fence_lease_owner(l));
        free(owner);
        fence_lease *busy = NULL;
        EXPECT_RC(fence_try_acquire(c, names[i], 1000, &busy), FENCE_BUSY, c);
        EXPECT_RC(fence_release(l), FENCE_OK, c);
        ck_assert_int_eq(lu_iss_held(names[i]), 0);
    }
    ck_assert_uint_eq(strlen(longname), FENCE_NAME_MAX);
    fence_client_close(c);
}
END_TEST

START_TEST(custom_prefix)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = tu_env("FENCE_TEST_REDIS_URL");
    o.prefix = "tpfx:";
    fence_client *c = NULL;
    EXPECT_RC(fence_client_open(&c, &o), FENCE_OK, c);
    fence_client *d = lu_open_client(); /* default prefix: a different lease */
    redisContext *r = tu_redis();
    char nm[256], k[600], tk[600];
    snprintf(nm, sizeof nm, "%s", tu_name("prefix"));
    snprintf(k, sizeof k, "tpfx:{%s}", nm);
    snprintf(tk, sizeof tk, "tpfx:{%s}:token", nm);
    fence_lease *l = lu_acquire_ok(c, nm, 1000, 0);
    lu_expect_get(r, k, fence_lease_owner(l));
    lu_expect_counter_kept(r, tk);
    fence_lease *l2 = lu_acquire_ok(d, nm, 1000, 0); /* "fence:{NAME}" is free */
    EXPECT_RC(fence_release(l2), FENCE_OK, d);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    ck_assert_int_eq(lu_rexists(r, k), 0);
    redisFree(r);
    fence_client_close(c);
    fence_client_close(d);
}
END_TEST

static Suite *lease_suite(void)
{
    Suite *s = suite_create("lease");
    TCase *tc = tcase_create("basics");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, mutex_two_clients);
    tcase_add_test(tc, mutex_across_processes);
    tcase_add_test(tc, mutex_processes_cycles);
    tcase_add_test(tc, close_releases_open_leases);
    tcase_add_test(tc, odd_names);
    suite_add_tcase(s, tc);

    tc = tcase_create("tokens");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, tokens_increase_across_clients);
    tcase_add_test(tc, threads_own_clients);
    tcase_add_test(tc, threads_shared_client);
    tcase_add_test(tc, token_raise_last_inspect);
    suite_add_tcase(s, tc);

    tc = tcase_create("loss");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, kill9_frees_after_ttl);
    tcase_add_test(tc, release_after_delete_is_lost);
    tcase_add_test(tc, release_after_expiry_is_lost);
    suite_add_tcase(s, tc);

    tc = tcase_create("wait");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, wait_woken_by_release);
    tcase_add_test(tc, wait_times_out);
    tcase_add_test(tc, wait_gets_expired_lease);
    suite_add_tcase(s, tc);

    /* Redis only: its keys and their values (acquire_basic), the key
     * prefix, the clock tokens and exact values past Lua's 2^53 (the
     * PostgreSQL issuer's rows and bigint counter: test_pg_issuer). */
    if (!lu_iss_pg()) {
        tc = tcase_create("redis");
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, acquire_basic);
        tcase_add_test(tc, custom_prefix);
        tcase_add_loop_test(tc, tokens_exact_past_2_53, 0, 2);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    lu_iss_setup();
    return tu_run(lease_suite());
}
