/* test_gate_procs.c -- the persistent gate (lib/gate) shared by
 * processes: two processes writing through one file never let a write go
 * backwards, and a process killed while holding blocks the others only
 * until it dies, its unfinished write unrecorded. */
#include "gateutil.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MT_RESOURCES 3
static const char *mt_names[MT_RESOURCES] = {"alpha", "beta", "gamma"};

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
    o.path = gu_db_path;
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
        fence_stale st;
        int rc = fence_gate_begin(g, mt_names[r], token, NULL, &t, &st);
        if (rc == FENCE_STALE && st.highest > token && st.offered == token) {
            stale++;
            continue;
        }
        if (rc != FENCE_OK || fence_gate_txn_mark(t) > token) {
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
    int iters = gu_scale(1000);
    char log_path[400];
    snprintf(log_path, sizeof log_path, "%s/writes.log", gu_tmp_dir);
    int logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0600);
    ck_assert_int_ge(logfd, 0);
    /* Create the file first so the children do not race to, and close it
     * again: SQLite connections must not cross fork(). */
    fence_gate *g = gu_open(1, 2000);
    gu_close(g);
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
    g = gu_open(1, 2000);
    ck_assert_int_eq(summaries, NCHILD);
    ck_assert_int_eq(writes, admitted);
    ck_assert_int_eq(admitted + stale, NCHILD * iters);
    ck_assert_int_gt(admitted, 0);
    ck_assert_int_gt(stale, 0);
    for (int r = 0; r < MT_RESOURCES; r++) {
        ck_assert_uint_eq(gu_mark(g, mt_names[r]), prev[r]);
    }
    gu_close(g);
}
END_TEST

/* A process killed while holding does not block the others for ever, and
 * its unfinished write is not recorded. */
START_TEST(test_killed_holder)
{
    fence_gate *g = gu_open(1, 300);
    ck_status(gu_write_once(g, "res", 3, NULL), FENCE_OK, g);
    gu_close(g); /* SQLite connections must not cross fork() */
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(p[0]);
        fence_gate_options o;
        fence_gate_options_init(&o);
        o.path = gu_db_path;
        fence_gate *cg = NULL;
        fence_gate_txn *t = NULL;
        if (fence_gate_open(&cg, &o) != FENCE_OK ||
            fence_gate_begin(cg, "res", 5, NULL, &t, NULL) != FENCE_OK) {
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

    g = gu_open(1, 300);
    fence_gate_txn *t = NULL;
    int64_t start = tu_now_ms();
    ck_status(fence_gate_begin(g, "res", 6, NULL, &t, NULL), FENCE_TIMEOUT, g);
    ck_assert_int_ge(tu_now_ms() - start, 250);
    ck_assert_ptr_nonnull(strstr(fence_gate_errmsg(g), "another process"));
    ck_assert_uint_eq(gu_mark(g, "res"), 3); /* reads do not wait */

    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

    start = tu_now_ms();
    ck_status(fence_gate_begin(g, "res", 4, NULL, &t, NULL), FENCE_OK, g);
    ck_assert_int_lt(tu_now_ms() - start, 300);
    ck_assert_uint_eq(fence_gate_txn_mark(t), 3); /* the dead holder's 5 was never recorded */
    ck_status(fence_gate_commit(t), FENCE_OK, g);
    ck_assert_uint_eq(gu_mark(g, "res"), 4);
    gu_close(g);

    /* And a fresh open of the file sees the same. */
    g = gu_open(1, 300);
    ck_assert_uint_eq(gu_mark(g, "res"), 4);
    gu_close(g);
}
END_TEST

static Suite *procs_suite(void)
{
    Suite *s = suite_create("gate_procs");
    TCase *tc = tcase_create("processes");
    tcase_add_checked_fixture(tc, gu_setup, gu_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_two_processes);
    tcase_add_test(tc, test_killed_holder);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(procs_suite());
}
