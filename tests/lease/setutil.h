/* setutil.h -- servers of a test's own (scripts/redis-set): a master, a
 * replica, a Sentinel, on free loopback ports under $FENCE_TEST_SPAWN_DIR.
 * A test stops its set with lu_set_stop(); a set left behind by a test
 * that died is stopped by scripts/with-servers on exit. */
#ifndef FENCE_SETUTIL_H
#define FENCE_SETUTIL_H
#include "leaseutil.h"

typedef struct lu_set {
    char dir[1024];
    int master, replica, sentinel; /* ports; 0 when not started */
    char master_url[64], replica_url[64];
} lu_set;

/* Start a set: kind "solo", "replica" or "sentinel"; conf (may be NULL)
 * one extra redis.conf line for the master.  Fails the test if it cannot. */
void lu_set_start(lu_set *s, const char *kind, const char *conf);
/* Stop everything in the set (never fails). */
void lu_set_stop(lu_set *s);
/* scripts/redis-ctl on one of the set's servers ("master", "replica",
 * "sentinel"): stop, start, restart, pause, resume, kill.  Fails the test
 * on a non-zero exit. */
void lu_set_ctl(const lu_set *s, const char *who, const char *cmd);
/* A raw connection to 127.0.0.1:port (fails the test if it cannot). */
redisContext *lu_connect(int port);
/* A command whose reply must not be an error; the reply is freed. */
void lu_cmd_ok(redisContext *r, const char *fmt, ...);
/* The current time of the server behind r in microseconds (TIME). */
uint64_t lu_server_time_us(redisContext *r);
/* The server's run_id, into out (41 bytes). */
void lu_run_id(redisContext *r, char *out);
/* The server's incarnation as acquire.lua records it in a counter's run
 * field, "<run_id>:<master_replid>", into out (LU_INCARNATION_LEN + 1). */
#define LU_INCARNATION_LEN 81
void lu_incarnation(redisContext *r, char *out);
/* Poll ROLE on port until it says master, at most timeout_ms; 1 if so. */
int lu_wait_master(int port, int64_t timeout_ms);
#endif
