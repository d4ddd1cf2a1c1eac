/* test_pipe.c -- the request queue of lib/lease/redis/pipe.c on a real
 * Redis: many threads on one connection each get their own replies; a
 * caller that gives up leaves a placeholder, so the replies after it still
 * find their owners; a connection killed mid-pipeline fails every caller
 * at once, none waits past its deadline; a server quiet past the head
 * request's allowance fails the connection; bytes queued while another
 * caller drives go out at once (the driver is woken, never re-polls); a
 * reply nobody asked for fails the connection. */
#include "lease_internal.h"
#include "redis/rissuer.h"
#include "leaseutil.h"

#include <check.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static fence__conn *open_conn(void)
{
    char host[256];
    int port = 0;
    ck_assert_msg(sscanf(lu_hostport("FENCE_TEST_REDIS_URL"), "%255[^:]:%d", host, &port) == 2,
                  "FENCE_TEST_REDIS_URL is no host:port URL");
    fence__target t = {NULL, host, port, NULL, NULL, 0};
    fence__conn *cn = NULL;
    char err[300];
    ck_assert_msg(fence__tr_open(&t, 2000, 2000, &cn, err, sizeof err) == FENCE_OK,
                  "connect: %s", err);
    return cn;
}

typedef struct shared {
    fence__pipe p;
    pthread_mutex_t lk;
} shared;

static void shared_init(shared *s)
{
    ck_assert_int_eq(fence__pipe_init(&s->p), 0);
    pthread_mutex_init(&s->lk, NULL);
    s->p.cn = open_conn();
}

static void shared_free(shared *s)
{
    fence__pipe_destroy(&s->p);
    pthread_mutex_destroy(&s->lk);
}

/* Append a command given as space-separated words. */
static void append_words(fence__conn *cn, const char *cmd)
{
    char buf[256];
    const char *argv[8];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", cmd);
    for (char *save = NULL, *w = strtok_r(buf, " ", &save); w != NULL && argc < 8;
         w = strtok_r(NULL, " ", &save)) {
        argv[argc++] = w;
    }
    ck_assert_int_eq(fence__tr_append(cn, argc, argv, NULL), 0);
}

/* Submit argv-style commands (n of them, each a format) as one request and
 * wait until deadline_ms from now: 0 finished (*out), -1 gave up. */
static int call(shared *s, int n, const char **cmds, int64_t allow_ms, int64_t deadline_ms,
                fence__req **out)
{
    fence__req *q = fence__req_new(n, allow_ms * 1000);
    ck_assert_ptr_nonnull(q);
    pthread_mutex_lock(&s->lk);
    for (int i = 0; i < n; i++) {
        if (s->p.cn != NULL && s->p.cn->err == 0) {
            append_words(s->p.cn, cmds[i]);
        }
    }
    fence__pipe_submit(&s->p, q, 1);
    int rc = fence__pipe_wait(&s->p, &s->lk, q, fence__now_us() + deadline_ms * 1000);
    pthread_mutex_unlock(&s->lk);
    *out = rc == 0 ? q : NULL;
    return rc;
}

/* ---- many threads, their own replies -------------------------------------- */
enum { NTHREADS = 8, NCALLS = 1500 };
typedef struct worker {
    shared *s;
    int id;
    int wrong, failed;
} worker;

static void *echo_worker(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < NCALLS; i++) {
        char a[64], b[64], ca[80], cb[80];
        snprintf(a, sizeof a, "t%d-%d-a", w->id, i);
        snprintf(b, sizeof b, "t%d-%d-b", w->id, i);
        snprintf(ca, sizeof ca, "ECHO %s", a);
        snprintf(cb, sizeof cb, "ECHO %s", b);
        const char *cmds[2] = {ca, cb};
        fence__req *q = NULL;
        if (call(w->s, 2, cmds, 2000, 5000, &q) != 0 || q->state != FENCE__REQ_DONE) {
            w->failed++;
            fence__req_free(q);
            continue;
        }
        redisReply *ra = q->reply[0], *rb = q->reply[1];
        if (ra->type != REDIS_REPLY_STRING || strcmp(ra->str, a) != 0 ||
            rb->type != REDIS_REPLY_STRING || strcmp(rb->str, b) != 0) {
            w->wrong++;
        }
        fence__req_free(q);
    }
    return NULL;
}

START_TEST(many_threads_own_replies)
{
    shared s;
    shared_init(&s);
    pthread_t t[NTHREADS];
    worker w[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (worker){&s, i, 0, 0};
        ck_assert_int_eq(pthread_create(&t[i], NULL, echo_worker, &w[i]), 0);
    }
    int wrong = 0, failed = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(t[i], NULL);
        wrong += w[i].wrong;
        failed += w[i].failed;
    }
    ck_assert_msg(wrong == 0 && failed == 0, "%d replies went to the wrong caller, %d failed "
                  "(of %d)", wrong, failed, NTHREADS * NCALLS);
    shared_free(&s);
}
END_TEST

static fence__req *submit_raw(shared *s, const char *script, int ms, int64_t allow_ms)
{
    fence__req *q = fence__req_new(1, allow_ms * 1000);
    char n[16];
    snprintf(n, sizeof n, "%d", ms);
    const char *argv[4] = {"EVAL", script, "0", n};
    fence__tr_append(s->p.cn, 4, argv, NULL);
    fence__pipe_submit(&s->p, q, 1);
    return q;
}

static const char *BUSY = "local t=redis.call('TIME') local s=t[1]*1e6+t[2] "
                          "repeat local u=redis.call('TIME') "
                          "until (u[1]*1e6+u[2]-s)>=tonumber(ARGV[1])*1000 return 1";

START_TEST(gave_up_caller_keeps_the_order)
{
    shared s;
    shared_init(&s);
    pthread_mutex_lock(&s.lk);
    fence__req *slow = submit_raw(&s, BUSY, 300, 2000);
    int64_t t0 = fence__now_us();
    int rc = fence__pipe_wait(&s.p, &s.lk, slow, t0 + 50000);
    int64_t waited = fence__now_us() - t0;
    pthread_mutex_unlock(&s.lk);
    ck_assert_msg(rc == -1, "the 300 ms script answered within the 50 ms deadline?");
    ck_assert_msg(waited < 250000, "gave up after %lld us, not at its 50 ms deadline",
                  (long long)waited);
    /* The next caller must get its own reply, not the script's. */
    const char *cmds[1] = {"ECHO after"};
    fence__req *q = NULL;
    ck_assert_int_eq(call(&s, 1, cmds, 2000, 3000, &q), 0);
    ck_assert_int_eq(q->state, FENCE__REQ_DONE);
    redisReply *r = q->reply[0];
    ck_assert_msg(r->type == REDIS_REPLY_STRING && strcmp(r->str, "after") == 0,
                  "the next caller got someone else's reply (type %d)", r->type);
    fence__req_free(q);
    ck_assert_int_eq(s.p.cn->err, 0);
    shared_free(&s);
}
END_TEST

START_TEST(quiet_server_fails_the_connection)
{
    shared s;
    shared_init(&s);
    pthread_mutex_lock(&s.lk);
    fence__req *slow = submit_raw(&s, BUSY, 400, 100); /* allowance 100 ms */
    int rc = fence__pipe_wait(&s.p, &s.lk, slow, fence__now_us() + 3000000);
    pthread_mutex_unlock(&s.lk);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(slow->state, FENCE__REQ_FAILED);
    ck_assert_msg(slow->timed_out, "failed, but not as a timeout: %s", slow->errstr);
    ck_assert_int_ne(s.p.cn->err, 0);
    fence__req_free(slow);
    /* Further calls fail at once (the connection is done for). */
    const char *cmds[1] = {"PING"};
    fence__req *q = NULL;
    ck_assert_int_eq(call(&s, 1, cmds, 2000, 3000, &q), 0);
    ck_assert_int_eq(q->state, FENCE__REQ_FAILED);
    fence__req_free(q);
    fence__sleep_us(400000); /* let the script end before the next test */
    shared_free(&s);
}
END_TEST

/* ---- killed mid-pipeline --------------------------------------------------- */
typedef struct killer_arg {
    shared *s;
    int failed, done, late;
} killer_arg;

static void *loop_until_failed(void *arg)
{
    killer_arg *k = arg;
    for (;;) {
        const char *cmds[1] = {"ECHO x"};
        fence__req *q = NULL;
        int64_t t0 = fence__now_us();
        int rc = call(k->s, 1, cmds, 2000, 2000, &q);
        if (fence__now_us() - t0 > 2500000) {
            k->late++;
        }
        if (rc != 0) {
            k->late++; /* a 2 s deadline on a killed connection: it must fail sooner */
            break;
        }
        int st = q->state;
        fence__req_free(q);
        if (st == FENCE__REQ_FAILED) {
            k->failed++;
            break;
        }
        k->done++;
    }
    return NULL;
}

START_TEST(killed_connection_fails_every_caller)
{
    shared s;
    shared_init(&s);
    const char *idc[1] = {"CLIENT ID"};
    fence__req *q = NULL;
    ck_assert_int_eq(call(&s, 1, idc, 2000, 3000, &q), 0);
    long long id = ((redisReply *)q->reply[0])->integer;
    fence__req_free(q);
    pthread_t t[NTHREADS];
    killer_arg k[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        k[i] = (killer_arg){&s, 0, 0, 0};
        ck_assert_int_eq(pthread_create(&t[i], NULL, loop_until_failed, &k[i]), 0);
    }
    fence__sleep_us(200000);
    redisContext *r = tu_redis();
    redisReply *kr = redisCommand(r, "CLIENT KILL ID %lld", id);
    ck_assert_msg(kr != NULL && kr->type == REDIS_REPLY_INTEGER && kr->integer == 1,
                  "CLIENT KILL did not kill our connection");
    freeReplyObject(kr);
    redisFree(r);
    int failed = 0, late = 0, done = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(t[i], NULL);
        failed += k[i].failed;
        late += k[i].late;
        done += k[i].done;
    }
    ck_assert_msg(failed == NTHREADS && late == 0, "%d of %d callers failed, %d waited past "
                  "their deadline (%d calls done before the kill)", failed, NTHREADS, late, done);
    ck_assert_msg(done > NTHREADS, "only %d calls before the kill", done);
    shared_free(&s);
}
END_TEST

/* A caller that queues while another drives: the driver, in poll() for a
 * reply that takes 300 ms (BLPOP on an empty list), is woken and writes the
 * new bytes at once.  (It used to see them only at its next reply, or 50
 * ms after it had started polling with bytes already queued.)  Then both
 * get their own replies. */
typedef struct {
    shared *s;
    int rc;
    fence__req *q;
} blpop_call;

static void *blpop_thread(void *arg)
{
    blpop_call *b = arg;
    const char *cmd[1] = {"BLPOP fence-test-wake-empty 0.3"};
    b->rc = call(b->s, 1, cmd, 2000, 2000, &b->q);
    return NULL;
}

START_TEST(queued_bytes_wake_the_driver)
{
    shared s;
    shared_init(&s);
    blpop_call b = {&s, -1, NULL};
    pthread_t th;
    pthread_create(&th, NULL, blpop_thread, &b);
    tu_sleep_ms(30); /* the BLPOP's caller drives, polling for its reply */
    fence__req *q = fence__req_new(1, 2000000);
    pthread_mutex_lock(&s.lk);
    ck_assert_msg(s.p.driving && s.p.head != NULL, "the BLPOP is not being driven");
    append_words(s.p.cn, "PING");
    fence__pipe_submit(&s.p, q, 0); /* as the command line queues: written by the driver */
    pthread_mutex_unlock(&s.lk);
    tu_sleep_ms(20);
    pthread_mutex_lock(&s.lk);
    size_t left = s.p.cn->olen;
    pthread_mutex_unlock(&s.lk);
    ck_assert_msg(left == 0, "%zu bytes still queued 20 ms later", left);
    pthread_mutex_lock(&s.lk);
    int rc = fence__pipe_wait(&s.p, &s.lk, q, fence__now_us() + 2000000);
    pthread_mutex_unlock(&s.lk);
    pthread_join(th, NULL);
    ck_assert_int_eq(b.rc, 0);
    ck_assert_int_eq(b.q->state, FENCE__REQ_DONE);
    ck_assert_int_eq(((redisReply *)b.q->reply[0])->type, REDIS_REPLY_NIL);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(q->state, FENCE__REQ_DONE);
    ck_assert_str_eq(((redisReply *)q->reply[0])->str, "PONG");
    fence__req_free(b.q);
    fence__req_free(q);
    shared_free(&s);
}
END_TEST

/* A reply nobody asked for: the connection subscribed to a channel (a
 * request of one reply) and a message published to it later, while the
 * connection sat idle -- the next request must not take it for its own
 * reply: the connection fails, and so does that request. */
START_TEST(reply_nobody_asked_for)
{
    shared s;
    shared_init(&s);
    fence__req *q = NULL;
    const char *sub[1] = {"SUBSCRIBE fence-test-unasked"};
    ck_assert_int_eq(call(&s, 1, sub, 2000, 2000, &q), 0);
    ck_assert_int_eq(q->state, FENCE__REQ_DONE);
    fence__req_free(q);
    redisContext *r = tu_redis();
    redisReply *pub = redisCommand(r, "PUBLISH fence-test-unasked hello");
    ck_assert(pub != NULL && pub->type == REDIS_REPLY_INTEGER && pub->integer == 1);
    freeReplyObject(pub);
    redisFree(r);
    tu_sleep_ms(20); /* idle past the check's threshold, the message arrived */
    const char *ping[1] = {"PING"};
    ck_assert_int_eq(call(&s, 1, ping, 2000, 2000, &q), 0);
    ck_assert_int_eq(q->state, FENCE__REQ_FAILED);
    ck_assert_msg(strstr(q->errstr, "a reply nobody asked for") != NULL, "%s", q->errstr);
    fence__req_free(q);
    shared_free(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pipe");
    TCase *tc = tcase_create("pipe");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, many_threads_own_replies);
    tcase_add_test(tc, gave_up_caller_keeps_the_order);
    tcase_add_test(tc, quiet_server_fails_the_connection);
    tcase_add_test(tc, killed_connection_fails_every_caller);
    tcase_add_test(tc, queued_bytes_wake_the_driver);
    tcase_add_test(tc, reply_nobody_asked_for);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
