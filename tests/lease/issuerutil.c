/* issuerutil.c -- see issuerutil.h. */
#include "issuerutil.h"
#include "fence_pg.h"

#include <libpq-fe.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lu_iss_pg(void)
{
    const char *v = getenv("FENCE_TEST_ISSUER");
    return v != NULL && strcmp(v, "pg") == 0;
}

const char *lu_iss_name(void)
{
    return lu_iss_pg() ? "pg" : "redis";
}

const char *lu_iss_url(void)
{
    static char buf[160];
    if (!lu_iss_pg()) {
        return tu_env("FENCE_TEST_REDIS_URL");
    }
    snprintf(buf, sizeof buf, "postgresql://postgres@127.0.0.1:%s/postgres",
             tu_env("FENCE_TEST_PG_PORT"));
    return buf;
}

static PGconn *pg(void)
{
    PGconn *c = PQconnectdb(tu_env("FENCE_TEST_PG_CONNINFO"));
    ck_assert_msg(PQstatus(c) == CONNECTION_OK, "test PostgreSQL: %s", PQerrorMessage(c));
    return c;
}

/* One statement with text parameters; the result (PQclear it). */
static PGresult *pgq(PGconn *c, const char *sql, int n, const char *const *v)
{
    PGresult *r = PQexecParams(c, sql, n, NULL, v, NULL, NULL, 0);
    ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK,
                  "%s: %s", sql, PQresultErrorMessage(r));
    return r;
}

void lu_iss_setup(void)
{
    if (!lu_iss_pg()) {
        return;
    }
    PGconn *c = PQconnectdb(getenv("FENCE_TEST_PG_CONNINFO") ? getenv("FENCE_TEST_PG_CONNINFO")
                                                             : "");
    if (PQstatus(c) != CONNECTION_OK || fence_pg_install(c) != FENCE_OK) {
        fprintf(stderr, "%s: FENCE_TEST_ISSUER=pg: cannot install fence.sql on the test "
                "PostgreSQL: %s\n", program_invocation_short_name, PQerrorMessage(c));
        exit(1);
    }
    PQfinish(c);
}

fence_client *lu_iss_open(void)
{
    return lu_open_url(lu_iss_url());
}

fence_client *lu_iss_open_mode(int mode)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = lu_iss_url();
    o.heartbeat_mode = mode;
    return lu_open_opts(&o);
}

static void owner_key(char *k, size_t n, const char *name)
{
    lu_owner_key(k, n, name);
}

int lu_iss_held(const char *name)
{
    if (!lu_iss_pg()) {
        char k[600];
        owner_key(k, sizeof k, name);
        redisContext *r = tu_redis();
        long long e = lu_rexists(r, k);
        redisFree(r);
        return e == 1;
    }
    PGconn *c = pg();
    const char *v[1] = {name};
    PGresult *r = pgq(c, "SELECT held FROM fence.lease_inspect($1)", 1, v);
    int held = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    PQfinish(c);
    return held;
}

char *lu_iss_owner(const char *name)
{
    if (!lu_iss_pg()) {
        char k[600];
        owner_key(k, sizeof k, name);
        redisContext *r = tu_redis();
        char *v = lu_rget(r, k);
        redisFree(r);
        return v;
    }
    PGconn *c = pg();
    const char *v[1] = {name};
    PGresult *r = pgq(c, "SELECT holder || ':' || token FROM fence.lease_inspect($1) WHERE held",
                      1, v);
    char *o = PQntuples(r) == 1 ? strdup(PQgetvalue(r, 0, 0)) : NULL;
    PQclear(r);
    PQfinish(c);
    return o;
}

long long lu_iss_pttl(const char *name)
{
    if (!lu_iss_pg()) {
        char k[600];
        owner_key(k, sizeof k, name);
        redisContext *r = tu_redis();
        long long t = lu_rpttl(r, k);
        redisFree(r);
        return t;
    }
    PGconn *c = pg();
    const char *v[1] = {name};
    PGresult *r = pgq(c, "SELECT CASE WHEN held THEN pttl_ms ELSE -2 END FROM "
                         "fence.lease_inspect($1)", 1, v);
    long long t = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    PQfinish(c);
    return t;
}

int lu_iss_drop(const char *name)
{
    if (!lu_iss_pg()) {
        char k[600];
        owner_key(k, sizeof k, name);
        redisContext *r = tu_redis();
        long long d = lu_rdel(r, k);
        redisFree(r);
        return d == 1;
    }
    PGconn *c = pg();
    const char *v[1] = {name};
    PGresult *r = pgq(c, "UPDATE fence.leases SET expires = clock_timestamp() - interval '1 ms'"
                         " WHERE name = $1 AND holder IS NOT NULL AND expires > clock_timestamp()",
                      1, v);
    int n = atoi(PQcmdTuples(r));
    PQclear(r);
    PQfinish(c);
    return n == 1;
}

void lu_iss_take(const char *name, const char *owner)
{
    if (!lu_iss_pg()) {
        char k[600];
        owner_key(k, sizeof k, name);
        redisContext *r = tu_redis();
        redisReply *rep = redisCommand(r, "SET %s %s PX 5000", k, owner);
        ck_assert_ptr_nonnull(rep);
        freeReplyObject(rep);
        redisFree(r);
        return;
    }
    const char *colon = strchr(owner, ':');
    ck_assert_ptr_nonnull(colon);
    char holder[64];
    snprintf(holder, sizeof holder, "%.*s", (int)(colon - owner), owner);
    PGconn *c = pg();
    const char *v[3] = {name, holder, colon + 1};
    PQclear(pgq(c, "UPDATE fence.leases SET counter = GREATEST(counter, $3::bigint), holder = $2,"
                   " token = $3::bigint, expires = clock_timestamp() + interval '5 s'"
                   " WHERE name = $1", 3, v));
    PQfinish(c);
}

/* The test PostgreSQL's pg_ctl with ARGS (as the postgres user). */
static int pg_ctl(const char *args)
{
    char line[1400];
    snprintf(line, sizeof line, "runuser -u postgres -- %s/pg_ctl -D %s/data -w -t 60 %s "
             ">/dev/null 2>&1", tu_env("FENCE_TEST_PG_BINDIR"), tu_env("FENCE_TEST_PG_DIR"), args);
    return system(line);
}

void lu_iss_ctl(const char *cmd)
{
    if (!lu_iss_pg()) {
        tu_redis_ctl(cmd);
        return;
    }
    /* "start": restart reads the options the server last ran with
     * (postmaster.opts) and starts it when it is down. */
    int rc = strcmp(cmd, "stop") == 0 ? pg_ctl("-m fast stop") : pg_ctl("restart");
    ck_assert_msg(rc == 0, "pg_ctl %s failed (status %d)", cmd, rc);
}

void lu_iss_signal(int sig)
{
    if (!lu_iss_pg()) {
        char path[1024];
        snprintf(path, sizeof path, "%s/redis.pid", tu_env("FENCE_TEST_REDIS_DIR"));
        FILE *f = fopen(path, "r");
        ck_assert_msg(f != NULL, "cannot read %s", path);
        long pid = 0;
        ck_assert_int_eq(fscanf(f, "%ld", &pid), 1);
        fclose(f);
        ck_assert_int_eq(kill((pid_t)pid, sig), 0);
        return;
    }
    char data[1024];
    snprintf(data, sizeof data, "%s/data", tu_env("FENCE_TEST_PG_DIR"));
    lu_pg_signal_cluster(data, sig);
}

void lu_pg_signal_cluster(const char *data, int sig)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/postmaster.pid", data);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    int pm = 0;
    ck_assert_int_eq(fscanf(f, "%d", &pm), 1);
    fclose(f);
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        int pid = atoi(e->d_name);
        char stat[64], buf[512];
        snprintf(stat, sizeof stat, "/proc/%d/stat", pid);
        FILE *s = pid > 0 ? fopen(stat, "r") : NULL;
        if (s == NULL) {
            continue;
        }
        int ppid = 0;
        const char *p = fgets(buf, sizeof buf, s) != NULL ? strrchr(buf, ')') : NULL;
        if (p != NULL && sscanf(p + 2, "%*c %d", &ppid) == 1 && ppid == pm) {
            kill(pid, sig);
        }
        fclose(s);
    }
    if (d != NULL) {
        closedir(d);
    }
    ck_assert_int_eq(kill(pm, sig), 0);
}

static char *vvalue(PGconn *c, const char *fmt, va_list ap)
{
    char q[2048];
    vsnprintf(q, sizeof q, fmt, ap);
    PGresult *r = PQexec(c, q);
    ExecStatusType t = PQresultStatus(r);
    ck_assert_msg(t == PGRES_TUPLES_OK || t == PGRES_COMMAND_OK, "%s: %s", q,
                  PQresultErrorMessage(r));
    char *v = strdup(t == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "");
    PQclear(r);
    return v;
}

char *lu_pg_value(PGconn *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *v = vvalue(c, fmt, ap);
    va_end(ap);
    return v;
}

long long lu_pg_num(PGconn *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *v = vvalue(c, fmt, ap);
    va_end(ap);
    long long n = strtoll(v, NULL, 10);
    free(v);
    return n;
}

void lu_iss_ensure_up(void)
{
    if (!lu_iss_pg()) {
        lu_ensure_redis_up();
        return;
    }
    const char *ci = getenv("FENCE_TEST_PG_CONNINFO");
    if (ci == NULL) {
        return;
    }
    PGconn *c = PQconnectdb(ci);
    int up = PQstatus(c) == CONNECTION_OK;
    PQfinish(c);
    if (!up && pg_ctl("restart") != 0) {
        fprintf(stderr, "%s: could not start the test PostgreSQL again\n",
                program_invocation_short_name);
    }
}

void lu_iss_kill_connections(void)
{
    if (!lu_iss_pg()) {
        redisContext *r = tu_redis();
        redisReply *rep = redisCommand(r, "CLIENT KILL TYPE normal SKIPME yes");
        ck_assert_ptr_nonnull(rep);
        freeReplyObject(rep);
        redisFree(r);
        return;
    }
    PGconn *c = pg();
    PQclear(pgq(c, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                   " WHERE application_name = 'fence'", 0, NULL));
    PQfinish(c);
}

/* One look: whether someone waits for NAME's release. */
static int waiting_now(const char *name)
{
    if (!lu_iss_pg()) {
        char chan[600];
        snprintf(chan, sizeof chan, "fence:{%s}:released", name);
        redisContext *r = tu_redis();
        redisReply *a = redisCommand(r, "PUBSUB NUMSUB %s", chan);
        redisReply *b = redisCommand(r, "PUBSUB NUMPAT");
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        long long subs = 0;
        if (a->type == REDIS_REPLY_ARRAY && a->elements == 2 &&
            a->element[1]->type == REDIS_REPLY_INTEGER) {
            subs = a->element[1]->integer;
        }
        long long pats = b->type == REDIS_REPLY_INTEGER ? b->integer : 0;
        freeReplyObject(a);
        freeReplyObject(b);
        redisFree(r);
        return subs > 0 || pats > 0;
    }
    PGconn *c = pg();
    PGresult *r = pgq(c, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'fence'"
                         " AND query = 'LISTEN fence_lease_released'", 0, NULL);
    int n = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    PQfinish(c);
    return n > 0;
}

int lu_iss_waiting(const char *name, int timeout_ms)
{
    int64_t deadline = tu_now_ms() + timeout_ms;
    while (tu_now_ms() < deadline) {
        if (waiting_now(name)) {
            return 1;
        }
        tu_sleep_ms(5);
    }
    return 0;
}
