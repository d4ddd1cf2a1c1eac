/* setup "pg": `conn`, connected to $FENCE_TEST_PG_CONNINFO, fence.sql
 * installed, search_path fence_docs: a fresh table orders (id, status) with
 * row 7 'new', protected with fence.protect.
 * Check: row 7 was written ('paid'), stamped with the token, and no
 * transaction was left open (the fragment committed or rolled back). */
#include "common.h"
#include <libpq-fe.h>
#include <fence_pg.h>

static PGconn *conn;

static int doc_pg_exec(const char *sql)
{
    PGresult *r = PQexec(conn, sql);
    int bad = PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK;
    if (bad)
        doc_fail("pg: %s: %s", sql, PQerrorMessage(conn));
    PQclear(r);
    return bad;
}

static int doc_setup_pg(void)
{
    const char *ci = doc_env("FENCE_TEST_PG_CONNINFO");
    if (ci == NULL)
        return doc_fail("FENCE_TEST_PG_CONNINFO is not set (run under scripts/with-servers)");
    conn = PQconnectdb(ci);
    if (PQstatus(conn) != CONNECTION_OK)
        return doc_fail("pg: %s", PQerrorMessage(conn));
    fence_status st = fence_pg_install(conn);
    if (st != FENCE_OK)
        return doc_fail("fence_pg_install: %s", fence_pg_errmsg(conn));
    return doc_pg_exec("SET client_min_messages = warning")
        || doc_pg_exec("CREATE SCHEMA IF NOT EXISTS fence_docs")
        || doc_pg_exec("SET search_path TO fence_docs, public")
        || doc_pg_exec("DROP TABLE IF EXISTS fence_docs.orders")
        || doc_pg_exec("CREATE TABLE fence_docs.orders (id int PRIMARY KEY, status text)")
        || doc_pg_exec("INSERT INTO fence_docs.orders VALUES (7, 'new')")
        || doc_pg_exec("SELECT fence.protect('fence_docs.orders')");
}

static int doc_check_pg(void)
{
    if (PQtransactionStatus(conn) != PQTRANS_IDLE)
        return doc_fail("pg: the snippet left a transaction open (status %d)",
                        (int)PQtransactionStatus(conn));
    if (PQpipelineStatus(conn) != PQ_PIPELINE_OFF)
        return doc_fail("pg: the snippet left the connection in pipeline mode");
    PGresult *r = PQexec(conn, "SELECT status, fence_token FROM fence_docs.orders WHERE id = 7");
    int bad = PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1;
    if (bad) {
        doc_fail("pg: reading row 7: %s", PQerrorMessage(conn));
    } else if (strcmp(PQgetvalue(r, 0, 0), "paid") != 0
               || strtoull(PQgetvalue(r, 0, 1), NULL, 10) != token) {
        bad = doc_fail("pg: row 7 is (%s, token %s), expected (paid, token %" PRIu64 ")",
                       PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1), token);
    }
    PQclear(r);
    return bad;
}

static void doc_teardown_pg(void)
{
    PQfinish(conn);
}
