/* test_async_adapters.c -- the header-only adapters (fence_libuv.h,
 * fence_libevent.h) in real loops on the test Redis: each loop acquires a
 * 300 ms lease, keeps it over four TTLs while its connection is killed
 * twice behind its back (the adapter follows the descriptor to the new
 * connection), releases it, and closes the handle from inside the release
 * callback.  A loop-side timer stops the loop after 10 s: nothing hangs. */
#include "asyncutil.h"
#include "fence_libevent.h"
#include "fence_libuv.h"

#include <stdio.h>
#include <string.h>

/* What a run saw, whichever loop drove it. */
typedef struct run {
    fence_async *a;
    const char *name;
    fence_lease *lease;
    lu_lost lost;
    int ticks;         /* the loop's own 100 ms timer */
    int kills;         /* CLIENT KILLs done */
    int held_at_end;   /* still held, not lost, when the hold ended */
    int released, closed, timed_out;
    uint64_t reconnects, renew_ok; /* the client's metrics at the release */
    fence_status acq_st, rel_st;
    char msg[600];
    void (*close)(struct run *r); /* the adapter's close */
    void *adapter;
} run;

static void kill_clients(void)
{
    redisContext *r = tu_redis();
    freeReplyObject(redisCommand(r, "CLIENT KILL TYPE normal SKIPME yes"));
    redisFree(r);
}

static void on_released(fence_async *a, fence_status st, const char *msg, void *user)
{
    run *r = user;
    r->rel_st = st;
    snprintf(r->msg, sizeof r->msg, "%s", msg);
    r->released = 1;
    fence_metrics m;
    fence_client_metrics(fence_async_client(a), &m);
    r->reconnects = m.reconnects;
    r->renew_ok = m.renew_ok;
    r->close(r); /* from inside a callback */
    r->closed = 1;
}

static void on_acquired(fence_async *a, fence_status st, fence_lease *l, int64_t pttl,
                        const char *msg, void *user)
{
    (void)a;
    (void)pttl;
    run *r = user;
    r->acq_st = st;
    r->lease = l;
    snprintf(r->msg, sizeof r->msg, "%s", msg);
}

/* Every 100 ms: kill the connection at 0.4 s and 0.8 s, release at 1.3 s;
 * returns 1 when the loop should stop its tick timer. */
static int tick(run *r)
{
    r->ticks++;
    if (r->lease == NULL) {
        return r->ticks > 100; /* never acquired: 10 s */
    }
    if (r->released) {
        return 1;
    }
    if ((r->ticks == 4 || r->ticks == 8) && r->kills < 2) {
        kill_clients();
        r->kills++;
    }
    if (r->ticks == 13) {
        r->held_at_end = !fence_lease_lost(r->lease) && atomic_load(&r->lost.calls) == 0;
        fence_async_release(r->a, r->lease, on_released, r);
    }
    if (r->ticks > 100) {
        r->timed_out = 1;
        return 1;
    }
    return 0;
}

static void start(run *r, const char *name)
{
    memset(r, 0, sizeof *r);
    r->name = name;
    r->acq_st = r->rel_st = -1;
    lu_lost_init(&r->lost);
    r->a = au_open(tu_env("FENCE_TEST_REDIS_URL"), 0);
}

static void acquire(run *r)
{
    fence_lease_options lo;
    fence_lease_options_init(&lo, 300);
    lo.on_lost = lu_on_lost;
    lo.user = &r->lost;
    ck_assert_int_eq(fence_async_acquire(r->a, r->name, &lo, on_acquired, r), FENCE_OK);
}

static void check(const run *r, const char *loop)
{
    ck_assert_msg(r->acq_st == FENCE_OK, "%s: acquire %s: %s", loop,
                  fence_status_name(r->acq_st), r->msg);
    ck_assert_msg(!r->timed_out, "%s: did not finish in 10 s", loop);
    ck_assert_int_eq(r->kills, 2);
    ck_assert_msg(r->reconnects >= 2, "%s: %llu reconnects after two kills", loop,
                  (unsigned long long)r->reconnects);
    ck_assert_msg(r->renew_ok >= 6, "%s: renew_ok %llu in 1.3 s", loop,
                  (unsigned long long)r->renew_ok);
    ck_assert_msg(r->held_at_end, "%s: lost across the killed connections (%d lost calls)",
                  loop, atomic_load(&r->lost.calls));
    ck_assert_msg(r->rel_st == FENCE_OK, "%s: release %s: %s", loop,
                  fence_status_name(r->rel_st), r->msg);
    ck_assert(r->closed);
}

/* ---- libuv ----------------------------------------------------------------------- */

static void uv_close_run(run *r)
{
    fence_uv_close(r->adapter);
}

static void uv_tick(uv_timer_t *t)
{
    if (tick(t->data)) {
        uv_timer_stop(t);
    }
}

START_TEST(libuv_loop)
{
    run r;
    start(&r, tu_name("async-uv"));
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    fence_uv *u = NULL;
    ck_assert_int_eq(fence_uv_attach(r.a, &loop, &u), 0);
    r.adapter = u;
    r.close = uv_close_run;
    acquire(&r);
    uv_timer_t t;
    uv_timer_init(&loop, &t);
    t.data = &r;
    uv_timer_start(&t, uv_tick, 100, 100);
    uv_run(&loop, UV_RUN_DEFAULT); /* returns once the adapter and the tick are closed */
    if (!r.closed) {
        fence_uv_close(u);
    }
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0); /* every handle was closed */
    check(&r, "libuv");
}
END_TEST

/* ---- libevent -------------------------------------------------------------------- */

static void ev_close_run(run *r)
{
    fence_ev_close(r->adapter);
}

typedef struct ev_run {
    run r;
    struct event *tick;
} ev_run;

static void ev_tick2(evutil_socket_t fd, short what, void *arg)
{
    ev_run *e = arg;
    (void)fd;
    (void)what;
    if (tick(&e->r)) {
        event_del(e->tick);
    }
}

START_TEST(libevent_loop)
{
    ev_run e;
    start(&e.r, tu_name("async-ev"));
    struct event_base *base = event_base_new();
    ck_assert_ptr_nonnull(base);
    fence_ev *fe = NULL;
    ck_assert_int_eq(fence_ev_attach(e.r.a, base, &fe), 0);
    e.r.adapter = fe;
    e.r.close = ev_close_run;
    acquire(&e.r);
    e.tick = event_new(base, -1, EV_PERSIST, ev_tick2, &e);
    struct timeval tv = {0, 100000};
    event_add(e.tick, &tv);
    event_base_dispatch(base); /* returns once the adapter's events and the tick are gone */
    if (!e.r.closed) {
        fence_ev_close(fe);
    }
    event_free(e.tick);
    event_base_free(base);
    check(&e.r, "libevent");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("async_adapters");
    TCase *t = tcase_create("async_adapters");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, libuv_loop);
    tcase_add_test(t, libevent_loop);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
