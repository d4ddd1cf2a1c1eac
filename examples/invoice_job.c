/*
 * invoice_job.c -- a scheduled job protected by a lease, writing through
 * the PostgreSQL fence.
 *
 * What it shows.  The job runs from cron (or any scheduler) on several
 * machines; only one instance may work at a time.  It:
 *   - takes the lease "invoice-job" without waiting (another instance
 *     holds it: skip this run, exit 0);
 *   - keeps the lease alive with the heartbeat thread while it works, for
 *     longer in total than the TTL (each step is one invoice);
 *   - stops as soon as the lease is lost (the on_lost callback sets a flag
 *     the loop checks), and checks fence_lease_valid_ms() before each
 *     write;
 *   - writes each invoice in a transaction that carries the lease's token
 *     (fence_pg_set_token) and advances the resource "invoice-job" with it:
 *     if the lease was lost anyway (a pause the checks could not see), a
 *     newer holder's token has advanced the resource and PostgreSQL
 *     rejects the write with FENCE_STALE;
 *   - releases the lease at the end.
 * Its table (default invoice_job_demo, not the README's own `invoices`,
 * so that running the example never touches a table of that name) is
 * protected per row (fence.protect), so every row carries the token that
 * wrote it.
 *
 * Usage: invoice_job [--redis URL] [--pg CONNINFO] [--ttl MS] [--invoices N]
 *                    [--step-ms MS] [--lease NAME] [--table NAME] [--run ID]
 *   --table     the table it creates and writes, default invoice_job_demo
 *   --lease     the lease (and fenced resource) name, default invoice-job
 *   --ttl       lease TTL, default 10000 ms (renewed every TTL/3)
 *   --invoices  how many invoices this run writes, default 5
 *   --step-ms   the work per invoice, default 1000 ms
 *   Redis: --redis, $FENCE_REDIS_URL or $FENCE_TEST_REDIS_URL.
 *   PostgreSQL: --pg, $FENCE_TEST_PG_CONNINFO or libpq's PG* variables.
 * It ends with one line: RESULT status=done|skipped|stopped invoices=K ...
 * Exit status: 0 done (or skipped), 3 stopped because the lease was lost or
 * a write was rejected as stale, 2 on errors, 64 on bad usage.
 */
#include "ex_env.h"
#include "fence.h"
#include "fence_pg.h"

#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int g_lost = 0;        /* set by the lost callback */
static atomic_int g_lost_reason = 0; /* FENCE_LOST or FENCE_ECONN */

/* Runs on the heartbeat thread: only raise the flag; the job's loop sees
 * it between (and during) steps and stops. */
static void on_lost(fence_lease *lease, int reason, void *user)
{
    (void)lease;
    (void)user;
    atomic_store(&g_lost_reason, reason);
    atomic_store(&g_lost, 1);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The "work" of one step: sleep, but wake early when the lease is lost. */
static void work(int64_t ms)
{
    int64_t end = now_ms() + ms;
    while (!atomic_load(&g_lost)) {
        int64_t left = end - now_ms();
        if (left <= 0)
            break;
        if (left > 10)
            left = 10;
        struct timespec ts = {0, (long)left * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static void quiet(void *arg, const char *msg)
{
    (void)arg;
    (void)msg; /* "relation already exists, skipping" and such */
}

static int exec_ok(PGconn *conn, const char *sql)
{
    PGresult *r = PQexec(conn, sql);
    int rc = fence_pg_classify(conn, r, NULL);
    if (rc != FENCE_OK)
        fprintf(stderr, "invoice_job: %.80s: %s\n", sql, fence_pg_errmsg(conn));
    PQclear(r);
    return rc;
}

/* Schema "fence" and the protected invoice table (idempotent; in real
 * life a migration does this once). */
static int setup_schema(PGconn *conn, const char *table)
{
    int rc = fence_pg_install(conn);
    if (rc != FENCE_OK) {
        fprintf(stderr, "invoice_job: fence_pg_install: %s: %s\n", fence_status_name(rc),
                fence_pg_errmsg(conn));
        return rc;
    }
    char *t = PQescapeIdentifier(conn, table, strlen(table));
    if (t == NULL) {
        fprintf(stderr, "invoice_job: %s", PQerrorMessage(conn));
        return FENCE_ENOMEM;
    }
    char sql[512];
    snprintf(sql, sizeof sql,
             "CREATE TABLE IF NOT EXISTS %s (id bigserial PRIMARY KEY, run text NOT NULL,"
             " number int NOT NULL, customer text NOT NULL, amount_cents bigint NOT NULL,"
             " UNIQUE (run, number))",
             t);
    rc = exec_ok(conn, sql);
    if (rc == FENCE_OK) {
        /* Protect it once: rows get a fence_token column stamped by the
         * writer's token. */
        const char *param = t;
        PGresult *r = PQexecParams(conn,
                                   "SELECT fence.protect($1::regclass) WHERE NOT EXISTS "
                                   "(SELECT 1 FROM fence.protected WHERE tbl = $1::regclass)",
                                   1, NULL, &param, NULL, NULL, 0);
        rc = fence_pg_classify(conn, r, NULL);
        if (rc != FENCE_OK)
            fprintf(stderr, "invoice_job: fence.protect: %s\n", fence_pg_errmsg(conn));
        PQclear(r);
    }
    PQfreemem(t);
    return rc;
}

/* One invoice, in one transaction carrying the token, which also advances
 * the job's resource (recorded with the lease's holder id, so that a token
 * issued twice cannot pass as this job's).  Returns a fence status; *stale
 * describes a stale rejection, fence_pg_errmsg(conn) any failure. */
static int write_invoice(PGconn *conn, const char *table, uint64_t token, const char *holder,
                         const char *resource, const char *run, int number, fence_stale *stale)
{
    int rc = exec_ok(conn, "BEGIN");
    if (rc != FENCE_OK)
        return rc;
    rc = fence_pg_set_token(conn, token, holder, resource, stale);
    if (rc == FENCE_OK) {
        char *t = PQescapeIdentifier(conn, table, strlen(table));
        char sql[512], num[16], customer[32], amount[32];
        snprintf(sql, sizeof sql,
                 "INSERT INTO %s (run, number, customer, amount_cents) VALUES ($1, $2, $3, $4)",
                 t != NULL ? t : "\"\"");
        PQfreemem(t);
        snprintf(num, sizeof num, "%d", number);
        snprintf(customer, sizeof customer, "customer-%03d", number);
        snprintf(amount, sizeof amount, "%d", 1000 + 250 * number);
        const char *params[4] = {run, num, customer, amount};
        PGresult *r = PQexecParams(conn, sql, 4, NULL, params, NULL, NULL, 0);
        rc = fence_pg_classify(conn, r, stale);
        PQclear(r);
    }
    if (rc == FENCE_OK)
        return exec_ok(conn, "COMMIT");
    PGresult *r = PQexec(conn, "ROLLBACK"); /* not through fence_pg: keeps the message */
    PQclear(r);
    return rc;
}

static int usage(FILE *f)
{
    fputs("usage: invoice_job [--redis URL] [--pg CONNINFO] [--ttl MS] [--invoices N]\n"
          "                   [--step-ms MS] [--lease NAME] [--table NAME] [--run ID]\n",
          f);
    return f == stdout ? 0 : 64;
}

static int parse_num(const char *opt, const char *v, long long lo, long long hi, long long *out)
{
    char *end = NULL;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || n < lo || n > hi) {
        fprintf(stderr, "invoice_job: %s takes %lld..%lld\n", opt, lo, hi);
        return -1;
    }
    *out = n;
    return 0;
}

int main(int argc, char **argv)
{
    const char *url = NULL, *conninfo = NULL;
    const char *lease_name = "invoice-job", *table = "invoice_job_demo";
    char run_buf[64];
    const char *run = NULL;
    long long ttl = 10000, count = 5, step = 1000;

    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0)
            return usage(stdout);
        if (i + 1 >= argc) {
            fprintf(stderr, "invoice_job: %s needs a value\n", o);
            return usage(stderr);
        }
        const char *v = argv[++i];
        if (strcmp(o, "--redis") == 0)
            url = v;
        else if (strcmp(o, "--pg") == 0)
            conninfo = v;
        else if (strcmp(o, "--lease") == 0)
            lease_name = v;
        else if (strcmp(o, "--table") == 0)
            table = v;
        else if (strcmp(o, "--run") == 0)
            run = v;
        else if (strcmp(o, "--ttl") == 0) {
            if (parse_num(o, v, 30, FENCE_TTL_MAX_MS, &ttl) != 0)
                return usage(stderr);
        } else if (strcmp(o, "--invoices") == 0) {
            if (parse_num(o, v, 1, 100000, &count) != 0)
                return usage(stderr);
        } else if (strcmp(o, "--step-ms") == 0) {
            if (parse_num(o, v, 0, 3600000, &step) != 0)
                return usage(stderr);
        } else {
            fprintf(stderr, "invoice_job: unknown option %s\n", o);
            return usage(stderr);
        }
    }
    url = ex_redis_url("invoice_job", url);
    if (url == NULL) {
        return 64;
    }
    conninfo = ex_pg_conninfo("invoice_job", conninfo);
    if (conninfo == NULL) {
        return 64;
    }
    if (run == NULL) {
        snprintf(run_buf, sizeof run_buf, "run-%ld-%lld", (long)getpid(), (long long)time(NULL));
        run = run_buf;
    }

    int status = 2;
    fence_client *c = NULL;
    fence_lease *l = NULL;
    PGconn *conn = PQconnectdb(conninfo != NULL ? conninfo : "");
    if (conn == NULL || PQstatus(conn) != CONNECTION_OK) {
        fprintf(stderr, "invoice_job: cannot connect to PostgreSQL: %s",
                conn != NULL ? PQerrorMessage(conn) : "out of memory\n");
        goto out;
    }
    PQsetNoticeProcessor(conn, quiet, NULL);
    if (setup_schema(conn, table) != FENCE_OK)
        goto out;

    int rc = fence_client_open_url(&c, url);
    if (rc != FENCE_OK) {
        fprintf(stderr, "invoice_job: cannot reach Redis: %s: %s\n", fence_status_name(rc),
                c != NULL ? fence_client_errmsg(c) : "out of memory");
        goto out;
    }

    /* A scheduled job does not queue up behind another instance: try once. */
    fence_lease_options lo;
    fence_lease_options_init(&lo, ttl);
    lo.wait_ms = 0;
    lo.on_lost = on_lost;
    rc = fence_acquire(c, lease_name, &lo, &l);
    if (rc == FENCE_BUSY) {
        printf("another instance holds the lease \"%s\": skipping this run\n", lease_name);
        printf("RESULT status=skipped invoices=0 token=0 renewals=0 lost=no\n");
        status = 0;
        goto out;
    }
    if (rc != FENCE_OK) {
        fprintf(stderr, "invoice_job: fence_acquire: %s: %s\n", fence_status_name(rc),
                fence_client_errmsg(c));
        goto out;
    }
    uint64_t token = fence_lease_token(l);
    printf("%s: lease \"%s\" acquired, token %" PRIu64 " (TTL %lld ms, renewed every %lld ms)\n",
           run, lease_name, token, ttl, ttl / 3);
    fflush(stdout);

    int64_t started = now_ms();
    int written = 0;
    const char *why = NULL;
    for (int n = 1; n <= count; n++) {
        work(step);
        if (atomic_load(&g_lost)) {
            why = "the lease was lost";
            break;
        }
        /* Not a guarantee (a pause can strike right after it); the token
         * in the transaction is what protects the write. */
        if (fence_lease_valid_ms(l) <= 0) {
            why = "the lease is no longer surely held";
            break;
        }
        fence_stale e;
        rc = write_invoice(conn, table, token, fence_lease_holder(l), lease_name, run, n, &e);
        if (rc == FENCE_STALE) {
            printf("invoice %d/%lld REJECTED: token %" PRIu64 " is stale (a newer holder wrote "
                   "with %" PRIu64 ")\n",
                   n, count, e.offered, e.highest);
            why = "a newer holder has written";
            break;
        }
        if (rc != FENCE_OK) {
            fprintf(stderr, "invoice_job: invoice %d: %s: %s\n", n, fence_status_name(rc),
                    fence_pg_errmsg(conn));
            goto out;
        }
        written++;
        printf("invoice %d/%lld written with token %" PRIu64 " (%.1f s in, lease valid for "
               "another %" PRId64 " ms)\n",
               n, count, token, (double)(now_ms() - started) / 1000.0, fence_lease_valid_ms(l));
        fflush(stdout);
    }

    fence_metrics m;
    memset(&m, 0, sizeof m);
    fence_client_metrics(c, &m);
    int lost = atomic_load(&g_lost);
    rc = fence_release(l);
    l = NULL;
    if (why == NULL) {
        printf("done: %d invoices in %.1f s (%.1f TTLs), the heartbeat renewed the lease %" PRIu64
               " times; released: %s\n",
               written, (double)(now_ms() - started) / 1000.0,
               (double)(now_ms() - started) / (double)ttl, m.renew_ok, fence_status_name(rc));
        status = 0;
    } else {
        printf("stopped after %d invoices: %s%s%s; the rest is left for the next run\n", written, why,
               lost ? " -- " : "", lost ? fence_status_name(atomic_load(&g_lost_reason)) : "");
        status = 3;
    }
    printf("RESULT status=%s invoices=%d token=%" PRIu64 " renewals=%" PRIu64 " lost=%s\n",
           why == NULL ? "done" : "stopped", written, token, m.renew_ok, lost ? "yes" : "no");

out:
    fence_release(l);
    fence_client_close(c);
    PQfinish(conn);
    return status;
}
