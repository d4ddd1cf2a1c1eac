/*
 * ph_pg.c -- paused_holder's account in a PostgreSQL table, fenced per row
 * with fence.sql (sql/postgres/) (installed from C by fence_pg_install) and
 * libfence_pg: fence.protect() on the table, the token set in each writing
 * transaction with fence_pg_set_token().
 */
#include "ph_store_impl.h"

#include "fence_pg.h"

#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ph_pg {
    PGconn *conn;
    char *table; /* quoted identifier (PQescapeIdentifier) */
    int fenced;
};

static void quiet(void *arg, const char *msg)
{
    (void)arg;
    (void)msg; /* NOTICEs from fence.sql and protect() are not the story */
}

static int pg_connect(const ph_config *cfg, PGconn **out, char **table, char *err, size_t errlen)
{
    PGconn *conn = PQconnectdb(cfg->pg_conninfo != NULL ? cfg->pg_conninfo : "");
    *out = NULL;
    if (conn == NULL || PQstatus(conn) != CONNECTION_OK) {
        snprintf(err, errlen, "postgres: cannot connect: %s",
                 conn != NULL ? PQerrorMessage(conn) : "out of memory");
        PQfinish(conn);
        return FENCE_ECONN;
    }
    PQsetNoticeProcessor(conn, quiet, NULL);
    if (table != NULL) {
        *table = PQescapeIdentifier(conn, cfg->pg_table, strlen(cfg->pg_table));
        if (*table == NULL) {
            snprintf(err, errlen, "postgres: %s", PQerrorMessage(conn));
            PQfinish(conn);
            return FENCE_ENOMEM;
        }
    }
    *out = conn;
    return FENCE_OK;
}

/* Run one command; FENCE_OK or FENCE_EDB with the server's message. */
static int exec_ok(PGconn *conn, const char *sql, char *err, size_t errlen)
{
    PGresult *r = PQexec(conn, sql);
    int ok = r != NULL && (PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK);
    if (!ok)
        snprintf(err, errlen, "postgres: %.200s: %s", sql, PQerrorMessage(conn));
    PQclear(r);
    return ok ? FENCE_OK : FENCE_EDB;
}

static int pg_setup(const ph_config *cfg, int fenced, char *err, size_t errlen)
{
    PGconn *conn = NULL;
    char *table = NULL;
    int rc = pg_connect(cfg, &conn, &table, err, errlen);
    if (rc != FENCE_OK)
        return rc;
    rc = fence_pg_install(conn); /* schema "fence"; idempotent */
    if (rc != FENCE_OK) {
        snprintf(err, errlen, "fence_pg_install: %s: %.400s", fence_strerror(rc),
                 fence_pg_errmsg(conn));
        goto out;
    }
    char sql[1024];
    snprintf(sql, sizeof sql,
             "DROP TABLE IF EXISTS %s;"
             "CREATE TABLE %s (id int PRIMARY KEY, balance bigint NOT NULL,"
             "                 written_by text NOT NULL, fence_token bigint NOT NULL DEFAULT 0);"
             "INSERT INTO %s VALUES (1, 100, 'setup', 0);",
             table, table, table);
    rc = exec_ok(conn, sql, err, errlen);
    if (rc == FENCE_OK && fenced) {
        /* The one call that puts the table under fencing. */
        const char *param = table;
        PGresult *r = PQexecParams(conn, "SELECT fence.protect($1::regclass)", 1, NULL, &param,
                                   NULL, NULL, 0);
        rc = fence_pg_classify(conn, r, NULL);
        if (rc != FENCE_OK)
            snprintf(err, errlen, "fence.protect: %.400s", fence_pg_errmsg(conn));
        PQclear(r);
    }
out:
    PQfreemem(table);
    PQfinish(conn);
    return rc;
}

static int pg_open(const ph_config *cfg, int fenced, void **out, char *err, size_t errlen)
{
    struct ph_pg *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return FENCE_ENOMEM;
    }
    s->fenced = fenced;
    int rc = pg_connect(cfg, &s->conn, &s->table, err, errlen);
    if (rc != FENCE_OK) {
        free(s);
        return rc;
    }
    *out = s;
    return FENCE_OK;
}

static int pg_read(void *impl, ph_row *row, char *err, size_t errlen)
{
    struct ph_pg *s = impl;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT balance, written_by, fence_token FROM %s WHERE id = 1", s->table);
    PGresult *r = PQexec(s->conn, sql);
    int rc = FENCE_OK;
    if (r == NULL || PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        snprintf(err, errlen, "postgres: read the account: %s", PQerrorMessage(s->conn));
        rc = FENCE_EDB;
    } else {
        row->balance = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        snprintf(row->writer, sizeof row->writer, "%s", PQgetvalue(r, 0, 1));
        row->token = strtoull(PQgetvalue(r, 0, 2), NULL, 10);
    }
    PQclear(r);
    return rc;
}

static int pg_write(void *impl, long long balance, const char *writer, uint64_t token,
                    const char *holder, ph_outcome *out)
{
    struct ph_pg *s = impl;
    fence_stale stale;
    char sql[256], bal[32], tok[32];
    snprintf(bal, sizeof bal, "%lld", balance);
    snprintf(tok, sizeof tok, "%" PRIu64, token);
    const char *params[3] = {bal, writer, tok};
    int rc;

    if (!s->fenced) { /* the bare write: the token is just data */
        snprintf(sql, sizeof sql,
                 "UPDATE %s SET balance = $1, written_by = $2, fence_token = $3 WHERE id = 1",
                 s->table);
        PGresult *r = PQexecParams(s->conn, sql, 3, NULL, params, NULL, NULL, 0);
        rc = fence_pg_classify(s->conn, r, NULL);
        PQclear(r);
        if (rc != FENCE_OK)
            snprintf(out->message, sizeof out->message, "UPDATE: %.490s",
                     fence_pg_errmsg(s->conn));
        out->status = rc;
        return rc;
    }

    /* Fenced: BEGIN; the token for this transaction; the write; COMMIT.
     * The row trigger compares the token with the row's stamp and stamps
     * fence_token itself. */
    rc = exec_ok(s->conn, "BEGIN", out->message, sizeof out->message);
    if (rc != FENCE_OK) {
        out->status = rc;
        return rc;
    }
    rc = fence_pg_set_token(s->conn, token, holder, NULL, &stale);
    if (rc == FENCE_OK) {
        snprintf(sql, sizeof sql, "UPDATE %s SET balance = $1, written_by = $2 WHERE id = 1",
                 s->table);
        PGresult *r = PQexecParams(s->conn, sql, 2, NULL, params, NULL, NULL, 0);
        rc = fence_pg_classify(s->conn, r, &stale);
        PQclear(r);
    }
    if (rc == FENCE_OK) {
        rc = exec_ok(s->conn, "COMMIT", out->message, sizeof out->message);
        out->status = rc;
        return rc;
    }
    out->status = rc;
    if (rc == FENCE_STALE) {
        out->offered = stale.offered;
        out->highest = stale.highest;
    }
    snprintf(out->message, sizeof out->message, "%.500s", fence_pg_errmsg(s->conn));
    char ignored[64];
    exec_ok(s->conn, "ROLLBACK", ignored, sizeof ignored);
    return rc;
}

static void pg_close(void *impl)
{
    struct ph_pg *s = impl;
    if (s == NULL)
        return;
    PQfreemem(s->table);
    PQfinish(s->conn);
    free(s);
}

static void pg_teardown(const ph_config *cfg)
{
    PGconn *conn = NULL;
    char *table = NULL;
    char err[256], sql[256];
    if (pg_connect(cfg, &conn, &table, err, sizeof err) != FENCE_OK)
        return;
    snprintf(sql, sizeof sql, "DROP TABLE IF EXISTS %s", table);
    exec_ok(conn, sql, err, sizeof err);
    PQfreemem(table);
    PQfinish(conn);
}

const ph_ops ph__pg_ops = {pg_setup, pg_open, pg_read, pg_write, pg_close, pg_teardown};
