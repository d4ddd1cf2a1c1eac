/*
 * cycle_loop.c -- N acquire+release cycles done one way and nothing else,
 * to be run under strace -c, perf stat or callgrind (per cycle: divide by
 * N; run it at two N and take the difference to drop the start-up).  Not a
 * benchmark of its own (make bench builds it, scripts/run-bench runs only
 * bench_*): docs/measurements.md, "Redis: where the client's time goes",
 * gives the commands.  Same local Redis as bench_lease
 * (FENCE_TEST_REDIS_URL/PORT: scripts/with-servers --redis).
 *
 *   cycle_loop library N      fence_try_acquire + fence_release (heartbeat
 *                             thread on, as bench_lease)
 *   cycle_loop scripts N      the library's two scripts by bare hiredis,
 *                             its arguments (bench_lease's middle loop)
 *   cycle_loop bare N         SET NX PX + DEL by bare hiredis
 *   cycle_loop bare-poll N    the same, each reply waited for by poll() on
 *                             the socket and an eventfd (as the library's
 *                             driver waits) before hiredis reads it
 *
 * Run from the source tree (the scripts are read from lib/lease/redis).
 */
#include "fence.h"
#include "scriptload.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

static void die(const char *what)
{
    fprintf(stderr, "cycle_loop: %s\n", what);
    exit(1);
}

static const char *env_or_die(const char *name)
{
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0') {
        fprintf(stderr, "cycle_loop: %s is not set: run it under scripts/with-servers --redis\n",
                name);
        exit(1);
    }
    return v;
}

static void library(int n)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = env_or_die("FENCE_TEST_REDIS_URL");
    o.heartbeat_mode = FENCE_HEARTBEAT_THREAD;
    fence_client *c = NULL;
    if (fence_client_open(&c, &o) != FENCE_OK) {
        die("fence_client_open failed");
    }
    char name[64];
    snprintf(name, sizeof name, "cycle-loop-%ld", (long)getpid());
    for (int i = 0; i < n; i++) {
        fence_lease *l = NULL;
        if (fence_try_acquire(c, name, 60000, &l) != FENCE_OK || fence_release(l) != FENCE_OK) {
            die(fence_client_errmsg(c));
        }
    }
    fence_client_close(c);
}

static void scripts(redisContext *r, int n)
{
    char acq[41], rel[41], key[96], counter[112], channel[112], value[96];
    bench_load_script(r, "lib/lease/redis/issue.lua", "lib/lease/redis/acquire.lua", acq);
    bench_load_script(r, "lib/lease/redis/release.lua", NULL, rel);
    const char *holder = "0123456789abcdef0123456789abcdef";
    snprintf(key, sizeof key, "fence:{cycle-loop-%ld}", (long)getpid());
    snprintf(counter, sizeof counter, "%s:token", key);
    snprintf(channel, sizeof channel, "%s:released", key);
    for (int i = 0; i < n; i++) {
        redisReply *a = redisCommand(r, "EVALSHA %s 2 %s %s %s 60000 clock 10000000 0 86400000",
                                     acq, key, counter, holder);
        if (a == NULL || a->type != REDIS_REPLY_ARRAY || a->elements < 2 ||
            a->element[1]->type != REDIS_REPLY_STRING) {
            die("EVALSHA acquire.lua: no token");
        }
        snprintf(value, sizeof value, "%s:%s", holder, a->element[1]->str);
        freeReplyObject(a);
        redisReply *d = redisCommand(r, "EVALSHA %s 1 %s %s %s", rel, key, value, channel);
        if (d == NULL || d->type != REDIS_REPLY_INTEGER || d->integer != 1) {
            die("EVALSHA release.lua did not delete the lease");
        }
        freeReplyObject(d);
    }
}

/* One command; with efd >= 0, its reply waited for by poll() first. */
static void command(redisContext *r, int efd, const char *fmt, const char *key)
{
    int done = 0;
    if (redisAppendCommand(r, fmt, key) != REDIS_OK) {
        die("out of memory");
    }
    while (!done) {
        if (redisBufferWrite(r, &done) != REDIS_OK) {
            die("write failed");
        }
    }
    if (efd >= 0) {
        struct pollfd pf[2] = {{r->fd, POLLIN, 0}, {efd, POLLIN, 0}};
        if (poll(pf, 2, 5000) != 1 || !(pf[0].revents & POLLIN)) {
            die("poll failed");
        }
    }
    void *reply = NULL;
    if (redisGetReply(r, &reply) != REDIS_OK || reply == NULL) {
        die("no reply");
    }
    freeReplyObject(reply);
}

static void bare(redisContext *r, int n, int with_poll)
{
    int efd = with_poll ? eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC) : -1;
    if (with_poll && efd < 0) {
        die("eventfd failed");
    }
    char key[64];
    snprintf(key, sizeof key, "cycle-loop-bare:%ld", (long)getpid());
    for (int i = 0; i < n; i++) {
        command(r, efd, "SET %s 0123456789abcdef0123456789abcdef:1 NX PX 60000", key);
        command(r, efd, "DEL %s", key);
    }
    if (efd >= 0) {
        close(efd);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3 || atoi(argv[2]) < 1) {
        fprintf(stderr, "usage: cycle_loop library|scripts|bare|bare-poll N\n");
        return 64;
    }
    int n = atoi(argv[2]);
    if (strcmp(argv[1], "library") == 0) {
        library(n);
        return 0;
    }
    struct timeval tv = {5, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", atoi(env_or_die("FENCE_TEST_REDIS_PORT")),
                                              tv);
    if (r == NULL || r->err) {
        die("cannot connect to Redis");
    }
    redisSetTimeout(r, tv);
    if (strcmp(argv[1], "scripts") == 0) {
        scripts(r, n);
    } else if (strcmp(argv[1], "bare") == 0 || strcmp(argv[1], "bare-poll") == 0) {
        bare(r, n, argv[1][4] == '-');
    } else {
        fprintf(stderr, "usage: cycle_loop library|scripts|bare|bare-poll N\n");
        return 64;
    }
    redisFree(r);
    return 0;
}
