/*
 * bench_pg_issuer.c -- the PostgreSQL issuer against baselines measured in
 * the same run, on a PostgreSQL of its own with fsync on (scripts/pg-standby
 * start BASE solo: the test PostgreSQL of scripts/with-servers runs with
 * fsync off).  One figure per line: "name value unit".
 *
 *  1. acquire+release through the library (one client, try-acquire and
 *     release of one name, heartbeat thread on, TTL 30 s) vs the floor a
 *     durable token needs -- two one-row UPDATE commits on one connection
 *     (one to grant, one to release) -- and beside them
 *     pg_try_advisory_lock + pg_advisory_unlock on one connection, which
 *     write nothing and issue no token.  Rounds are interleaved; medians of
 *     per-round times, and the ratios the median of each round's ratio.
 *     pg_acquire_release_vs_floor_ratio: goal <= 1.2.
 *     The server's CPU per cycle (every process of the cluster, from
 *     /proc/PID/schedstat) for each loop; and a fourth loop, the library's
 *     two SQL calls (fence.lease_acquire, fence.lease_release) sent by bare
 *     libpq, which splits the difference into the server's part and the
 *     client library's.
 *  2. One renewal pass over 10,000 leases held by one client in
 *     FENCE_HEARTBEAT_MANUAL mode (renew_batch 5,000: two statements,
 *     pipelined in one round trip), all due: time of fence_heartbeat_run(),
 *     and the statements that renewed them (distinct xmins of their rows).
 */
#include "fence.h"
#include "fence_pg.h"

#include <dirent.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 21
#define CYCLES 60
#define LEASES 10000

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "bench_pg_issuer: %s: %s\n", what, msg);
    exit(1);
}

static char base[512];
static int postmaster;

static void stop_cluster(void)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "scripts/pg-standby stop %s", base);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_pg_issuer: %s failed\n", cmd);
    }
}

/* CPU time (ns) of the cluster's processes, the postmaster and its
 * children: the first field of /proc/PID/schedstat (time on a CPU, ns). */
static int64_t server_cpu_ns(void)
{
    int64_t total = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        int pid = atoi(e->d_name);
        if (pid <= 0) {
            continue;
        }
        char path[64], buf[1024];
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        FILE *f = fopen(path, "r");
        if (f == NULL) {
            continue;
        }
        int ppid = 0;
        if (fgets(buf, sizeof buf, f) != NULL) {
            const char *p = strrchr(buf, ')');
            if (p == NULL || sscanf(p + 2, "%*c %d", &ppid) != 1) {
                ppid = 0;
            }
        }
        fclose(f);
        if (ppid != postmaster && pid != postmaster) {
            continue;
        }
        snprintf(path, sizeof path, "/proc/%d/schedstat", pid);
        f = fopen(path, "r");
        long long ns = 0;
        if (f != NULL && fscanf(f, "%lld", &ns) == 1) {
            total += ns;
        }
        if (f != NULL) {
            fclose(f);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    return total;
}

static void exec_ok(PGconn *c, const char *q)
{
    PGresult *r = PQexec(c, q);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
        die(q, PQresultErrorMessage(r));
    }
    PQclear(r);
}

/* One statement without parameters by the extended protocol. */
static void params_ok(PGconn *c, const char *q)
{
    PGresult *r = PQexecParams(c, q, 0, NULL, NULL, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
        die(q, PQresultErrorMessage(r));
    }
    PQclear(r);
}

int main(void)
{
    const char *spawn = getenv("FENCE_TEST_SPAWN_DIR");
    if (spawn == NULL) {
        die("FENCE_TEST_SPAWN_DIR", "not set: run it under scripts/with-servers (make bench)");
    }
    snprintf(base, sizeof base, "%s/bench-pgiss-%d", spawn, (int)getpid());
    char cmd[700];
    snprintf(cmd, sizeof cmd, "scripts/pg-standby start %s solo", base);
    FILE *p = popen(cmd, "r");
    int port = 0;
    if (p == NULL || fscanf(p, "%d", &port) != 1 || pclose(p) != 0) {
        die(cmd, "failed");
    }
    atexit(stop_cluster);
    char path[600];
    snprintf(path, sizeof path, "%s.primary/data/postmaster.pid", base);
    FILE *pf = fopen(path, "r");
    if (pf == NULL || fscanf(pf, "%d", &postmaster) != 1) {
        die(path, "unreadable");
    }
    fclose(pf);

    char ci[128], url[128];
    snprintf(ci, sizeof ci, "host=127.0.0.1 port=%d user=postgres dbname=postgres", port);
    snprintf(url, sizeof url, "postgresql://postgres@127.0.0.1:%d/postgres", port);
    PGconn *pc = PQconnectdb(ci);
    if (PQstatus(pc) != CONNECTION_OK) {
        die("connect", PQerrorMessage(pc));
    }
    if (fence_pg_install(pc) != FENCE_OK) {
        die("fence_pg_install", fence_pg_errmsg(pc));
    }
    exec_ok(pc, "SET synchronous_commit = on");
    PGresult *r = PQexec(pc, "SELECT current_setting('fsync')");
    printf("# fsync=%s synchronous_commit=on\n", PQgetvalue(r, 0, 0));
    PQclear(r);
    exec_ok(pc, "CREATE TABLE bench_floor (id int PRIMARY KEY, v bigint NOT NULL)");
    exec_ok(pc, "INSERT INTO bench_floor VALUES (1, 0)");

    fence_client *c = NULL;
    if (fence_client_open_url(&c, url) != FENCE_OK) {
        die("fence_client_open_url", fence_client_errmsg(c));
    }
    double t[4][ROUNDS], cpu[4][ROUNDS];
    for (int round = 0; round < ROUNDS; round++) {
        for (int m = 0; m < 4; m++) {
            int64_t c0 = server_cpu_ns(), t0 = now_ns();
            for (int i = 0; i < CYCLES; i++) {
                if (m == 0) {
                    /* The floor: grant and release, each a durable commit
                     * (the extended protocol, as the library's calls). */
                    params_ok(pc, "UPDATE bench_floor SET v = v + 1 WHERE id = 1");
                    params_ok(pc, "UPDATE bench_floor SET v = v + 1 WHERE id = 1");
                } else if (m == 1) {
                    params_ok(pc, "SELECT pg_try_advisory_lock(42)");
                    params_ok(pc, "SELECT pg_advisory_unlock(42)");
                } else if (m == 3) {
                    /* The library's two statements, sent by bare libpq. */
                    const char *h = "0123456789abcdef0123456789abcdef";
                    const char *va[4] = {"bench-pg-sql", h, "30000", NULL};
                    PGresult *g = PQexecParams(pc, "SELECT granted, token, pttl_ms FROM "
                                               "fence.lease_acquire($1, $2, $3, $4)", 4, NULL,
                                               va, NULL, NULL, 0);
                    if (PQresultStatus(g) != PGRES_TUPLES_OK) {
                        die("lease_acquire", PQresultErrorMessage(g));
                    }
                    const char *vr[3] = {"bench-pg-sql", h, PQgetvalue(g, 0, 1)};
                    PGresult *x = PQexecParams(pc, "SELECT fence.lease_release($1, $2, $3)", 3,
                                               NULL, vr, NULL, NULL, 0);
                    if (PQresultStatus(x) != PGRES_TUPLES_OK) {
                        die("lease_release", PQresultErrorMessage(x));
                    }
                    PQclear(g);
                    PQclear(x);
                } else {
                    fence_lease *l = NULL;
                    if (fence_try_acquire(c, "bench-pg-issuer", 30000, &l) != FENCE_OK ||
                        fence_release(l) != FENCE_OK) {
                        die("acquire+release", fence_client_errmsg(c));
                    }
                }
            }
            t[m][round] = (double)(now_ns() - t0) / CYCLES;
            cpu[m][round] = (double)(server_cpu_ns() - c0) / CYCLES;
        }
    }
    double floor_ns = median(t[0], ROUNDS), adv_ns = median(t[1], ROUNDS),
           lib_ns = median(t[2], ROUNDS);
    printf("pg_floor_two_updates_per_s %.0f cycles/s\n", 1e9 / floor_ns);
    printf("pg_advisory_lock_unlock_per_s %.0f cycles/s\n", 1e9 / adv_ns);
    printf("pg_acquire_release_per_s %.0f cycles/s\n", 1e9 / lib_ns);
    printf("pg_acquire_release_us %.1f us\n", lib_ns / 1e3);
    /* The ratios of each round (its three loops ran within a second of
     * each other: the disk's and the machine's drift cancel), their median. */
    double rf[ROUNDS], ra[ROUNDS];
    for (int i = 0; i < ROUNDS; i++) {
        rf[i] = t[2][i] / t[0][i];
        ra[i] = t[2][i] / t[1][i];
    }
    printf("pg_acquire_release_vs_floor_ratio %.2f x\n", median(rf, ROUNDS));
    printf("pg_acquire_release_vs_advisory_ratio %.2f x\n", median(ra, ROUNDS));
    printf("pg_floor_server_cpu_us_per_cycle %.1f us\n", median(cpu[0], ROUNDS) / 1e3);
    printf("pg_advisory_server_cpu_us_per_cycle %.1f us\n", median(cpu[1], ROUNDS) / 1e3);
    printf("pg_acquire_release_server_cpu_us_per_cycle %.1f us\n", median(cpu[2], ROUNDS) / 1e3);
    /* The split: the same two SQL calls by bare libpq (the server's part
     * of the difference) against the library. */
    double rs[ROUNDS];
    for (int i = 0; i < ROUNDS; i++) {
        rs[i] = t[3][i] / t[0][i];
    }
    printf("pg_lease_sql_by_libpq_per_s %.0f cycles/s\n", 1e9 / median(t[3], ROUNDS));
    printf("pg_lease_sql_by_libpq_vs_floor_ratio %.2f x\n", median(rs, ROUNDS));
    printf("pg_lease_sql_server_cpu_us_per_cycle %.1f us\n", median(cpu[3], ROUNDS) / 1e3);
    fflush(stdout);

    /* 2. Renewing 10,000 leases in one pass. */
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url;
    o.heartbeat_mode = FENCE_HEARTBEAT_MANUAL;
    o.renew_batch = 5000;
    o.io_timeout_ms = 30000;
    fence_client *m = NULL;
    if (fence_client_open(&m, &o) != FENCE_OK) {
        die("fence_client_open", fence_client_errmsg(m));
    }
    fence_lease_options lo;
    fence_lease_options_init(&lo, 600000);
    lo.renew_every_ms = 100;
    int64_t a0 = now_ns();
    for (int i = 0; i < LEASES; i++) {
        char name[32];
        snprintf(name, sizeof name, "bench-renew-%05d", i);
        fence_lease *l = NULL;
        if (fence_acquire(m, name, &lo, &l) != FENCE_OK) {
            die("acquire", fence_client_errmsg(m));
        }
    }
    printf("pg_acquire_10k_s %.2f s\n", (double)(now_ns() - a0) / 1e9);
    struct timespec pause = {0, 150000000L};
    nanosleep(&pause, NULL);
    int64_t next = 0, r0 = now_ns();
    if (fence_heartbeat_run(m, &next) != FENCE_OK) {
        die("fence_heartbeat_run", fence_client_errmsg(m));
    }
    double pass_ms = (double)(now_ns() - r0) / 1e6;
    fence_metrics mt;
    fence_client_metrics(m, &mt);
    r = PQexec(pc, "SELECT count(DISTINCT xmin::text) FROM fence.leases WHERE name LIKE 'bench-renew-%'"
                   " AND expires > clock_timestamp() + interval '590 s'");
    printf("pg_renew_10k_pass_ms %.1f ms\n", pass_ms);
    printf("pg_renew_10k_renewed %llu leases\n", (unsigned long long)mt.renew_ok);
    printf("pg_renew_10k_statements %s statements\n", PQgetvalue(r, 0, 0));
    PQclear(r);
    fflush(stdout);
    PQfinish(pc);
    /* Stop the server first: closing the client then leaves the 10,000
     * leases to the server's TTL instead of 10,000 release commits. */
    stop_cluster();
    fence_client_close(m);
    fence_client_close(c);
    return 0;
}
