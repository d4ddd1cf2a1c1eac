/* setutil.c -- servers of a test's own; see setutil.h. */
#include "setutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void lu_set_start(lu_set *s, const char *kind, const char *conf)
{
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "%s/%s", tu_env("FENCE_TEST_SPAWN_DIR"), tu_name(kind));
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' start '%s' %s %s%s%s", tu_env("FENCE_TEST_REDIS_SET"),
             s->dir, kind, conf ? "'" : "", conf ? conf : "", conf ? "'" : "");
    int rc = system(cmd);
    ck_assert_msg(rc == 0, "%s: exit %d", cmd, rc);
    char env[1100], line[128];
    snprintf(env, sizeof env, "%s/env", s->dir);
    FILE *f = fopen(env, "r");
    ck_assert_msg(f != NULL, "no %s", env);
    while (fgets(line, sizeof line, f) != NULL) {
        sscanf(line, "MASTER_PORT=%d", &s->master);
        sscanf(line, "REPLICA_PORT=%d", &s->replica);
        sscanf(line, "SENTINEL_PORT=%d", &s->sentinel);
    }
    fclose(f);
    ck_assert_int_gt(s->master, 0);
    snprintf(s->master_url, sizeof s->master_url, "redis://127.0.0.1:%d", s->master);
    snprintf(s->replica_url, sizeof s->replica_url, "redis://127.0.0.1:%d", s->replica);
}

void lu_set_stop(lu_set *s)
{
    if (s->dir[0] == '\0') {
        return;
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' stop '%s'", tu_env("FENCE_TEST_REDIS_SET"), s->dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "setutil: %s failed\n", cmd);
    }
    s->dir[0] = '\0';
}

void lu_set_ctl(const lu_set *s, const char *who, const char *what)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "scripts/redis-ctl '%s/%s' %s", s->dir, who, what);
    int rc = system(cmd);
    ck_assert_msg(rc == 0, "%s: exit %d", cmd, rc);
}

redisContext *lu_connect(int port)
{
    struct timeval tv = {5, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", port, tv);
    ck_assert_msg(r != NULL && r->err == 0, "connect 127.0.0.1:%d: %s", port,
                  r ? r->errstr : "out of memory");
    redisSetTimeout(r, tv);
    return r;
}

void lu_cmd_ok(redisContext *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    ck_assert_msg(rep != NULL, "%s: %s", fmt, r->errstr);
    ck_assert_msg(rep->type != REDIS_REPLY_ERROR, "%s: %s", fmt, rep->str);
    freeReplyObject(rep);
}

uint64_t lu_server_time_us(redisContext *r)
{
    redisReply *rep = redisCommand(r, "TIME");
    ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2, "TIME");
    uint64_t us = strtoull(rep->element[0]->str, NULL, 10) * 1000000 +
                  strtoull(rep->element[1]->str, NULL, 10);
    freeReplyObject(rep);
    return us;
}

void lu_run_id(redisContext *r, char *out)
{
    redisReply *rep = redisCommand(r, "INFO server");
    ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_STRING, "INFO server");
    const char *p = strstr(rep->str, "run_id:");
    ck_assert_ptr_nonnull(p);
    snprintf(out, 41, "%.40s", p + 7);
    freeReplyObject(rep);
}

void lu_incarnation(redisContext *r, char *out)
{
    char run[41];
    lu_run_id(r, run);
    redisReply *rep = redisCommand(r, "INFO replication");
    ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_STRING, "INFO replication");
    const char *p = strstr(rep->str, "master_replid:");
    ck_assert_ptr_nonnull(p);
    snprintf(out, LU_INCARNATION_LEN + 1, "%s:%.40s", run, p + 14);
    freeReplyObject(rep);
}

int lu_wait_master(int port, int64_t timeout_ms)
{
    for (int64_t waited = 0; waited <= timeout_ms; waited += 50) {
        redisContext *r = lu_connect(port);
        redisReply *rep = redisCommand(r, "ROLE");
        int is_master = rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
                        strcmp(rep->element[0]->str, "master") == 0;
        if (rep != NULL) {
            freeReplyObject(rep);
        }
        redisFree(r);
        if (is_master) {
            return 1;
        }
        usleep(50000);
    }
    return 0;
}
