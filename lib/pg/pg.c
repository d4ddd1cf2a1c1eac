/* pg.c -- libfence_pg calls: set (and advance) the token of the caller's
 * transaction, read a resource's mark, install fence.sql. */
#include "pg_internal.h"

#include <libpq-events.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEXTOID_ 25 /* pg_type.oid of text (catalog/pg_type_d.h is server-side) */

static const char SQL_SET[] = "SELECT pg_catalog.set_config('fence.token', $1, true)";
static const char SQL_SET_ADVANCE[] =
    "SELECT pg_catalog.set_config('fence.token', $1, true), fence.advance($2, $1::pg_catalog.int8)";
static const char SQL_MARK[] = "SELECT fence.mark($1)";

/* Names of the statements fence_pg_prepare() prepares. */
static const char STMT_SET[] = "fence_pg_set_token";
static const char STMT_SET_ADVANCE[] = "fence_pg_set_token_advance";

/* Per-connection memory of fence_pg_prepare(): libpq instance data of
 * this event procedure, set to &prepared_marker while the statements are
 * known to exist, NULL otherwise (PQreset drops them). */
static char prepared_marker;

static int event_proc(PGEventId id, void *info, void *pass)
{
    (void)pass;
    if (id == PGEVT_CONNRESET) {
        PQsetInstanceData(((PGEventConnReset *)info)->conn, event_proc, NULL);
    }
    return 1;
}

static int is_prepared(const PGconn *conn)
{
    return PQinstanceData(conn, event_proc) == &prepared_marker;
}

/* Checks shared by every call that takes a resource name (NULL allowed
 * when optional). */
static int check_resource(const char *fn, const char *resource, int optional,
                          fence_pg_error *err)
{
    if (resource == NULL) {
        if (optional) {
            return FENCE_OK;
        }
        return fence_pg__fail(err, FENCE_EINVAL, "%s: resource is NULL", fn);
    }
    size_t n = strnlen(resource, FENCE_PG_RESOURCE_MAX + 1);
    if (n == 0 || n > FENCE_PG_RESOURCE_MAX) {
        return fence_pg__fail(err, FENCE_EINVAL, "%s: resource name must be 1..%d bytes%s", fn,
                              FENCE_PG_RESOURCE_MAX, n == 0 ? " (it is empty)" : "");
    }
    return FENCE_OK;
}

/* conn usable at all: not NULL, connection good. */
static int check_conn(const char *fn, PGconn *conn, fence_pg_error *err)
{
    if (conn == NULL) {
        return fence_pg__fail(err, FENCE_EINVAL, "%s: conn is NULL", fn);
    }
    if (PQstatus(conn) != CONNECTION_OK) {
        return fence_pg__fail(err, FENCE_ECONN, "%s: the connection is not usable: %s", fn,
                              PQerrorMessage(conn));
    }
    return FENCE_OK;
}

static int check_token(const char *fn, uint64_t token, fence_pg_error *err)
{
    if (token == 0) {
        return fence_pg__fail(err, FENCE_ENOTOKEN,
                              "%s: token 0 is not a fencing token (tokens are 1..%" PRIu64 ")", fn,
                              FENCE_PG_TOKEN_MAX);
    }
    if (token > FENCE_PG_TOKEN_MAX) {
        return fence_pg__fail(err, FENCE_ENOTOKEN,
                              "%s: token %" PRIu64 " does not fit a PostgreSQL bigint (max %" PRIu64
                              ")", fn, token, FENCE_PG_TOKEN_MAX);
    }
    return FENCE_OK;
}

/* Status for a NULL result from libpq. */
static int null_result(const char *fn, PGconn *conn, fence_pg_error *err)
{
    int st = PQstatus(conn) == CONNECTION_OK ? FENCE_ENOMEM : FENCE_ECONN;
    return fence_pg__fail(err, st, "%s: %s", fn,
                          PQerrorMessage(conn)[0] ? PQerrorMessage(conn) : "no result from libpq");
}

/* Classify res (and free it); on success check the single value returned
 * by set_config equals want. */
static int finish_set(const char *fn, PGresult *res, const char *want, fence_pg_error *err)
{
    int st = fence_pg_result(res, err);
    if (st == FENCE_OK &&
        (PQntuples(res) != 1 || PQnfields(res) < 1 || strcmp(PQgetvalue(res, 0, 0), want) != 0)) {
        st = fence_pg__fail(err, FENCE_EDB, "%s: the server did not confirm fence.token = %s", fn,
                            want);
    }
    PQclear(res);
    return st;
}

/* A valid connection that is idle, outside a transaction block and out of
 * pipeline mode; why (may be "") is appended to the message. */
static int check_idle(const char *fn, PGconn *conn, const char *why, fence_pg_error *err)
{
    int st = check_conn(fn, conn, err);
    if (st != FENCE_OK) {
        return st;
    }
    if (PQpipelineStatus(conn) != PQ_PIPELINE_OFF || PQtransactionStatus(conn) != PQTRANS_IDLE) {
        return fence_pg__fail(err, FENCE_ESTATE,
                              "%s: the connection must be idle, outside a transaction block and "
                              "out of pipeline mode%s", fn, why);
    }
    return FENCE_OK;
}

/* The arguments of a call that sets a token: a connection, a valid token,
 * and an optional resource name. */
static int check_token_call(const char *fn, PGconn *conn, uint64_t token, const char *resource,
                            fence_pg_error *err)
{
    int st = check_conn(fn, conn, err);
    if (st == FENCE_OK) {
        st = check_token(fn, token, err);
    }
    if (st == FENCE_OK) {
        st = check_resource(fn, resource, 1, err);
    }
    return st;
}

int fence_pg_set_token(PGconn *conn, uint64_t token, const char *resource, fence_pg_error *err)
{
    static const char fn[] = "fence_pg_set_token";
    int st = check_token_call(fn, conn, token, resource, err);
    if (st != FENCE_OK) {
        return st;
    }
    if (PQpipelineStatus(conn) != PQ_PIPELINE_OFF) {
        return fence_pg__fail(err, FENCE_ESTATE,
                              "%s: the connection is in pipeline mode: use fence_pg_send_token()",
                              fn);
    }
    switch (PQtransactionStatus(conn)) {
    case PQTRANS_INTRANS:
        break;
    case PQTRANS_IDLE:
        return fence_pg__fail(err, FENCE_ESTATE,
                              "%s: not inside a transaction block: BEGIN first (a transaction-local "
                              "token set outside one would vanish at once and the writes would "
                              "not be fenced)", fn);
    case PQTRANS_INERROR:
        return fence_pg__fail(err, FENCE_ESTATE,
                              "%s: the current transaction has failed: ROLLBACK first", fn);
    case PQTRANS_ACTIVE:
        return fence_pg__fail(err, FENCE_ESTATE,
                              "%s: a command is still in progress on this connection", fn);
    case PQTRANS_UNKNOWN:
    default:
        return fence_pg__fail(err, FENCE_ECONN, "%s: the connection is not usable: %s", fn,
                              PQerrorMessage(conn));
    }

    char tok[24];
    snprintf(tok, sizeof tok, "%" PRIu64, token);
    const Oid types[2] = {TEXTOID_, TEXTOID_};
    const char *values[2] = {tok, resource};
    int nparams = resource != NULL ? 2 : 1;
    int prepared = is_prepared(conn);
    PGresult *res = prepared
        ? PQexecPrepared(conn, resource != NULL ? STMT_SET_ADVANCE : STMT_SET, nparams, values,
                         NULL, NULL, 0)
        : PQexecParams(conn, resource != NULL ? SQL_SET_ADVANCE : SQL_SET, nparams, types,
                       values, NULL, NULL, 0);
    if (res == NULL) {
        return null_result(fn, conn, err);
    }
    if (prepared && PQresultStatus(res) == PGRES_FATAL_ERROR) {
        const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        if (state != NULL && strcmp(state, "26000") == 0) {
            /* Dropped behind our back: forget them. */
            PQsetInstanceData(conn, event_proc, NULL);
        }
    }
    return finish_set(fn, res, tok, err);
}

int fence_pg_send_token(PGconn *conn, uint64_t token, const char *resource, fence_pg_error *err)
{
    static const char fn[] = "fence_pg_send_token";
    int st = check_token_call(fn, conn, token, resource, err);
    if (st != FENCE_OK) {
        return st;
    }
    switch (PQpipelineStatus(conn)) {
    case PQ_PIPELINE_ON:
        break;
    case PQ_PIPELINE_ABORTED:
        return fence_pg__fail(err, FENCE_ESTATE,
                              "%s: the pipeline is aborted by an earlier error: read its results "
                              "up to the PQpipelineSync first", fn);
    case PQ_PIPELINE_OFF:
    default:
        return fence_pg__fail(err, FENCE_ESTATE,
                              "%s: the connection is not in pipeline mode (PQenterPipelineMode); "
                              "outside it use fence_pg_set_token()", fn);
    }

    char tok[24];
    snprintf(tok, sizeof tok, "%" PRIu64, token);
    const Oid types[2] = {TEXTOID_, TEXTOID_};
    const char *values[2] = {tok, resource};
    int nparams = resource != NULL ? 2 : 1;
    int sent = is_prepared(conn)
        ? PQsendQueryPrepared(conn, resource != NULL ? STMT_SET_ADVANCE : STMT_SET, nparams,
                              values, NULL, NULL, 0)
        : PQsendQueryParams(conn, resource != NULL ? SQL_SET_ADVANCE : SQL_SET, nparams, types,
                            values, NULL, NULL, 0);
    if (!sent) {
        return null_result(fn, conn, err);
    }
    return fence_pg__reset(err, FENCE_OK);
}

int fence_pg_prepare(PGconn *conn, fence_pg_error *err)
{
    static const char fn[] = "fence_pg_prepare";
    int st = check_idle(fn, conn, "", err);
    if (st != FENCE_OK) {
        return st;
    }
    if (is_prepared(conn)) {
        return fence_pg__reset(err, FENCE_OK);
    }
    const Oid types[2] = {TEXTOID_, TEXTOID_};
    const char *const names[2] = {STMT_SET, STMT_SET_ADVANCE};
    const char *const sqls[2] = {SQL_SET, SQL_SET_ADVANCE};
    for (int i = 0; i < 2; i++) {
        PGresult *res = PQprepare(conn, names[i], sqls[i], i + 1, types);
        if (res == NULL) {
            return null_result(fn, conn, err);
        }
        const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        int dup = state != NULL && strcmp(state, "42P05") == 0; /* exists already */
        st = dup ? fence_pg__reset(err, FENCE_OK) : fence_pg_result(res, err);
        PQclear(res);
        if (st != FENCE_OK) {
            return st;
        }
    }
    /* Registering fails harmlessly when an earlier call registered it. */
    (void)PQregisterEventProc(conn, event_proc, "fence_pg", NULL);
    if (!PQsetInstanceData(conn, event_proc, &prepared_marker)) {
        return fence_pg__fail(err, FENCE_ENOMEM, "%s: libpq could not register the connection's "
                              "event procedure", fn);
    }
    return fence_pg__reset(err, FENCE_OK);
}

int fence_pg_mark(PGconn *conn, const char *resource, uint64_t *out, fence_pg_error *err)
{
    static const char fn[] = "fence_pg_mark";
    if (out != NULL) {
        *out = 0;
    }
    int st = check_conn(fn, conn, err);
    if (st == FENCE_OK) {
        st = check_resource(fn, resource, 0, err);
    }
    if (st != FENCE_OK) {
        return st;
    }
    if (out == NULL) {
        return fence_pg__fail(err, FENCE_EINVAL, "%s: out is NULL", fn);
    }
    if (PQpipelineStatus(conn) != PQ_PIPELINE_OFF) {
        return fence_pg__fail(err, FENCE_ESTATE, "%s: not available in pipeline mode", fn);
    }
    PGTransactionStatusType ts = PQtransactionStatus(conn);
    if (ts != PQTRANS_IDLE && ts != PQTRANS_INTRANS) {
        return fence_pg__fail(err, FENCE_ESTATE,
                              "%s: the connection is busy or its transaction has failed", fn);
    }
    const Oid types[1] = {TEXTOID_};
    const char *values[1] = {resource};
    PGresult *res = PQexecParams(conn, SQL_MARK, 1, types, values, NULL, NULL, 0);
    if (res == NULL) {
        return null_result(fn, conn, err);
    }
    st = fence_pg_result(res, err);
    if (st == FENCE_OK) {
        const char *v = PQntuples(res) == 1 && PQnfields(res) == 1 ? PQgetvalue(res, 0, 0) : "";
        char *end = NULL;
        unsigned long long n = strtoull(v, &end, 10);
        if (v[0] < '0' || v[0] > '9' || end == NULL || *end != '\0' || n > FENCE_PG_TOKEN_MAX) {
            st = fence_pg__fail(err, FENCE_EDB, "%s: unexpected reply '%.40s'", fn, v);
        } else {
            *out = n;
        }
    }
    PQclear(res);
    return st;
}

int fence_pg_install(PGconn *conn, fence_pg_error *err)
{
    static const char fn[] = "fence_pg_install";
    int st = check_idle(fn, conn, " (the script commits its own transaction)", err);
    if (st != FENCE_OK) {
        return st;
    }
    PGresult *res = PQexec(conn, fence_pg__sql_fence);
    if (res == NULL) {
        return null_result(fn, conn, err);
    }
    st = fence_pg_result(res, err);
    PQclear(res);
    if (PQtransactionStatus(conn) == PQTRANS_INERROR || PQtransactionStatus(conn) == PQTRANS_INTRANS) {
        /* The script failed inside its BEGIN: nothing was committed. */
        PGresult *rb = PQexec(conn, "ROLLBACK");
        PQclear(rb);
        if (st == FENCE_OK) {
            st = fence_pg__fail(err, FENCE_EDB, "%s: the script did not commit", fn);
        }
    }
    if (st != FENCE_OK && err != NULL) {
        /* Prefix the message with the function's name, in place. */
        size_t pre = sizeof fn + 1; /* "fence_pg_install: " */
        size_t len = strnlen(err->message, sizeof err->message - 1);
        if (len + pre >= sizeof err->message) {
            len = sizeof err->message - 1 - pre;
        }
        memmove(err->message + pre, err->message, len);
        memcpy(err->message, fn, sizeof fn - 1);
        err->message[sizeof fn - 1] = ':';
        err->message[sizeof fn] = ' ';
        err->message[pre + len] = '\0';
    }
    return st;
}

const char *fence_pg_install_sql(size_t *len)
{
    if (len != NULL) {
        *len = fence_pg__sql_fence_len;
    }
    return fence_pg__sql_fence;
}
