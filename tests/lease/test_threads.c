/* test_threads.c -- many threads on one fence_client, whose calls share one
 * connection through the engine's request queue (lib/lease/redis/pipe.c):
 * every caller gets its own answer, none hangs past its deadline, leases
 * lost and released at the same time each end once.  Run under TSan by
 * make check SANITIZER=thread. */
#include "setutil.h"

#include <check.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { NT = 16 };

/* ---- own answers ------------------------------------------------------------- */
typedef struct own_arg {
    fence_client *c;
    int id;
    int cycles;
    char err[300];
} own_arg;

static void *own_worker(void *p)
{
    own_arg *a = p;
    char name[64];
    snprintf(name, sizeof name, "thr-own-%ld-%d", (long)getpid(), a->id);
    uint64_t last = 0;
    for (int i = 0; i < 150; i++) {
        fence_lease *l = NULL;
        fence_status st = fence_try_acquire(a->c, name, 10000, &l);
        if (st != FENCE_OK) {
            snprintf(a->err, sizeof a->err, "try_acquire %d: %s: %s", i, fence_status_name(st),
                     fence_client_errmsg(a->c));
            return NULL;
        }
        /* Its own lease: its name, and a token above its last one. */
        if (strcmp(fence_lease_name(l), name) != 0 || fence_lease_token(l) <= last) {
            snprintf(a->err, sizeof a->err, "cycle %d: lease %s token %llu after %llu", i,
                     fence_lease_name(l), (unsigned long long)fence_lease_token(l),
                     (unsigned long long)last);
            fence_release(l);
            return NULL;
        }
        last = fence_lease_token(l);
        st = fence_release(l);
        if (st != FENCE_OK) {
            snprintf(a->err, sizeof a->err, "release %d: %s", i, fence_status_name(st));
            return NULL;
        }
        a->cycles++;
    }
    return NULL;
}

START_TEST(every_caller_its_own_answer)
{
    fence_client *c = lu_open_client();
    pthread_t t[NT];
    own_arg a[NT];
    for (int i = 0; i < NT; i++) {
        a[i] = (own_arg){c, i, 0, ""};
        ck_assert_int_eq(pthread_create(&t[i], NULL, own_worker, &a[i]), 0);
    }
    for (int i = 0; i < NT; i++) {
        pthread_join(t[i], NULL);
    }
    for (int i = 0; i < NT; i++) {
        ck_assert_msg(a[i].err[0] == '\0', "thread %d: %s", i, a[i].err);
        ck_assert_int_eq(a[i].cycles, 150);
    }
    /* Two names held at once by one thread never mix either. */
    fence_client_close(c);
}
END_TEST

/* ---- lost and released at once ------------------------------------------------ */
static atomic_int lost_calls[NT];

static void on_lost(fence_lease *l, int why, void *user)
{
    (void)l;
    (void)why;
    atomic_fetch_add(&lost_calls[(intptr_t)user], 1);
}

static void *release_worker(void *l)
{
    fence_release(l);
    return NULL;
}

START_TEST(lost_and_released_at_once)
{
    fence_client *c = lu_open_client();
    redisContext *r = tu_redis();
    fence_lease *l[NT];
    for (int i = 0; i < NT; i++) {
        atomic_store(&lost_calls[i], 0);
        char name[64];
        snprintf(name, sizeof name, "thr-lost-%ld-%d", (long)getpid(), i);
        fence_lease_options o;
        fence_lease_options_init(&o, 600);
        o.on_lost = on_lost;
        o.user = (void *)(intptr_t)i;
        EXPECT_RC(fence_acquire(c, name, &o, &l[i]), FENCE_OK, c);
    }
    /* Half of them lose their key (another holder's doing), while the
     * other half are released from threads of their own. */
    for (int i = 0; i < NT; i += 2) {
        char key[96];
        snprintf(key, sizeof key, "fence:{thr-lost-%ld-%d}", (long)getpid(), i);
        freeReplyObject(redisCommand(r, "DEL %s", key));
    }
    pthread_t t[NT];
    for (int i = 1; i < NT; i += 2) {
        ck_assert_int_eq(pthread_create(&t[i], NULL, release_worker, l[i]), 0);
    }
    for (int i = 1; i < NT; i += 2) {
        pthread_join(t[i], NULL);
    }
    /* The heartbeat (every 200 ms) finds the lost ones. */
    int64_t end = tu_now_ms() + 3000;
    int lost = 0;
    while (tu_now_ms() < end) {
        lost = 0;
        for (int i = 0; i < NT; i += 2) {
            lost += atomic_load(&lost_calls[i]) > 0;
        }
        if (lost == NT / 2) {
            break;
        }
        usleep(20000);
    }
    for (int i = 0; i < NT; i++) {
        ck_assert_msg(atomic_load(&lost_calls[i]) == (i % 2 == 0 ? 1 : 0),
                      "lease %d: lost called %d times", i, atomic_load(&lost_calls[i]));
    }
    for (int i = 0; i < NT; i += 2) {
        ck_assert_int_eq(fence_release(l[i]), FENCE_LOST);
    }
    redisFree(r);
    fence_client_close(c);
}
END_TEST

/* ---- a server killed mid-pipeline ---------------------------------------------- */
typedef struct kill_arg {
    fence_client *c;
    int id;
    atomic_int *stop;
    int ok, failed;
    int64_t worst_ms; /* the longest call */
} kill_arg;

static void *kill_worker(void *p)
{
    kill_arg *a = p;
    char name[64];
    snprintf(name, sizeof name, "thr-kill-%d", a->id);
    while (!atomic_load(a->stop)) {
        int64_t t0 = tu_now_ms();
        fence_lease *l = NULL;
        fence_status st = fence_try_acquire(a->c, name, 5000, &l);
        if (st == FENCE_OK) {
            st = fence_release(l);
        }
        int64_t took = tu_now_ms() - t0;
        if (took > a->worst_ms) {
            a->worst_ms = took;
        }
        if (st == FENCE_OK) {
            a->ok++;
        } else {
            a->failed++;
            usleep(5000);
        }
    }
    return NULL;
}

START_TEST(killed_server_mid_pipeline)
{
    lu_set s;
    lu_set_start(&s, "solo", NULL);
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = s.master_url;
    o.connect_timeout_ms = 300;
    o.io_timeout_ms = 300;
    fence_client *c = lu_open_opts(&o);
    atomic_int stop;
    atomic_init(&stop, 0);
    pthread_t t[8];
    kill_arg a[8];
    for (int i = 0; i < 8; i++) {
        a[i] = (kill_arg){c, i, &stop, 0, 0, 0};
        ck_assert_int_eq(pthread_create(&t[i], NULL, kill_worker, &a[i]), 0);
    }
    usleep(300000);
    lu_set_ctl(&s, "master", "kill");
    usleep(700000);
    lu_set_ctl(&s, "master", "start");
    usleep(700000);
    atomic_store(&stop, 1);
    int ok = 0, failed = 0;
    int64_t worst = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        ok += a[i].ok;
        failed += a[i].failed;
        worst = a[i].worst_ms > worst ? a[i].worst_ms : worst;
    }
    /* One call is at most a connect (300 ms) and a reply (300 ms) per
     * attempt, two attempts: no caller waits on another's. */
    ck_assert_msg(worst < 1500, "a call took %lld ms", (long long)worst);
    ck_assert_msg(failed > 0, "no call failed while the server was down");
    ck_assert_msg(ok > 16, "only %d cycles succeeded (failed %d)", ok, failed);
    /* And after the restart every thread got through again. */
    fence_lease *l = NULL;
    EXPECT_RC(fence_try_acquire(c, "thr-kill-after", 5000, &l), FENCE_OK, c);
    fence_release(l);
    fence_client_close(c);
    lu_set_stop(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("threads");
    TCase *tc = tcase_create("threads");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, every_caller_its_own_answer);
    tcase_add_test(tc, lost_and_released_at_once);
    tcase_add_test(tc, killed_server_mid_pipeline);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
