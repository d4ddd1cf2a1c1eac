/* pg.c -- libfence_pg calls that talk to the server: set (and advance) the
 * token and holder of the caller's transaction, read a resource's mark,
 * install fence.sql; and fence_pg_prepare, which only checks its
 * arguments.  Calls result.c and errmsg.c, never the
 * reverse. */
#include "pg_internal.h"

#include <inttypes.h>
#include <libpq-events.h>
#include <stdio.h>
#include <string.h>

#define TEXTOID_ 25 /* pg_type.oid of text (catalog/pg_type_d.h is server-side) */

/* Token and holder in one statement, through fence.use_token() (fence.sql
 * version 5), which binds them to the transaction: no guard admits a token
 * set any other way -- or through fence.c_use_token(), the same function
 * in C (extension 1.5), when fence_pg_prepare() found it.  The select list
 * runs left to right: the holder is read back after use_token set it, and
 * fence.advance runs after both.  '' for no holder.  Sent unnamed
 * (PQexecParams) unless the application declared the connection unpooled
 * (fence_pg_prepare_unpooled): a name is state of one server connection,
 * which a transaction-mode pooler does not keep for its client. */
enum { Q_SET, Q_SEND, Q_ADVANCE, NQ };
static const char *const SQL_TOKEN[2][NQ] = {
    {
        "SELECT fence.use_token($1::pg_catalog.int8, $2), "
        "pg_catalog.current_setting('fence.holder')",
        /* What fence_pg_send_token() sends without a resource: no result
         * column (the caller only classifies the result).  use_token
         * never returns NULL: one row of no columns. */
        "SELECT WHERE fence.use_token($1::pg_catalog.int8, $2) IS NOT NULL",
        "SELECT fence.use_token($1::pg_catalog.int8, $2), pg_catalog.current_setting('fence.holder'), "
        "fence.advance($3, $1::pg_catalog.int8)",
    },
    {
        "SELECT fence.c_use_token($1::pg_catalog.int8, $2), "
        "pg_catalog.current_setting('fence.holder')",
        "SELECT WHERE fence.c_use_token($1::pg_catalog.int8, $2) IS NOT NULL",
        "SELECT fence.c_use_token($1::pg_catalog.int8, $2), "
        "pg_catalog.current_setting('fence.holder'), fence.advance($3, $1::pg_catalog.int8)",
    },
};
/* The names fence_pg_prepare_unpooled gives them on the connection. */
static const char *const STMT_TOKEN[NQ] = {"fence_pg_token_set", "fence_pg_token_send",
                                           "fence_pg_token_advance"};
static const int NPARAMS[NQ] = {2, 2, 3};
/* Whether fence.c_use_token(bigint, text) exists and may be called: 't',
 * 'f' or NULL. */
static const char SQL_HAS_C[] =
    "SELECT pg_catalog.has_function_privilege(a, 'EXECUTE') FROM "
    "pg_catalog.to_regprocedure('fence.c_use_token(pg_catalog.int8,pg_catalog.text)') a";

/* Per-connection memory of fence_pg_prepare() and
 * fence_pg_prepare_unpooled(): libpq instance data of this event
 * procedure, a pointer to conn_flags[f] where f has USE_C (call
 * fence.c_use_token) and UNPOOLED (the statements are prepared by name),
 * or NULL (neither).  PQreset forgets it: a new server connection has
 * no prepared statement. */
enum { USE_C = 1, UNPOOLED = 2 };
/* Never written (not const: libpq keeps a void *). */
static char conn_flags[4] = {0, USE_C, UNPOOLED, USE_C | UNPOOLED};

static int event_proc(PGEventId id, void *info, void *pass)
{
    (void)pass;
    if (id == PGEVT_CONNRESET) {
        PQsetInstanceData(((PGEventConnReset *)info)->conn, event_proc, NULL);
    }
    return 1;
}

static int flags_of(const PGconn *conn)
{
    const char *f = PQinstanceData(conn, event_proc);
    return f != NULL ? *f : 0;
}

static const char SQL_MARK[] = "SELECT fence.mark($1)";
static const char SQL_MARK_HOLDER[] = "SELECT fence.mark($1), fence.mark_holder($1)";

/* Checks shared by every call that takes a resource name (NULL allowed
 * when optional): the one name check of common.h, any byte but NUL, as
 * fence.sql (1..FENCE_NAME_MAX bytes). */
static fence_status check_resource(const char *fn, const PGconn *conn, const char *resource,
                                   int optional)
{
    if (resource == NULL && optional) {
        return FENCE_OK;
    }
    const char *problem = fence__name_problem(resource, FENCE__NAME_ANY_BYTE, NULL);
    if (problem != NULL) {
        return fence_pg__fail(conn, FENCE_EINVAL,
                              "%s: the resource name %s (names are 1..%d bytes)", fn, problem,
                              FENCE_NAME_MAX);
    }
    return FENCE_OK;
}

/* conn usable at all: not NULL, connection good. */
static fence_status check_conn(const char *fn, const PGconn *conn)
{
    if (conn == NULL) {
        return fence_pg__fail(conn, FENCE_EINVAL, "%s: conn is NULL", fn);
    }
    if (PQstatus(conn) != CONNECTION_OK) {
        return fence_pg__fail(conn, FENCE_ECONN, "%s: the connection is not usable: %s", fn,
                              PQerrorMessage(conn));
    }
    return FENCE_OK;
}

/* A holder id is NULL (none) or exactly FENCE_HOLDER_LEN lowercase hex
 * digits; the message never repeats the text. */
static fence_status check_holder(const char *fn, const PGconn *conn, const char *holder)
{
    if (holder == NULL) {
        return FENCE_OK;
    }
    const char *why = fence__holder_problem(holder, strnlen(holder, FENCE_HOLDER_LEN + 1), NULL);
    if (why != NULL) {
        return fence_pg__fail(conn, FENCE_EINVAL,
                              "%s: the holder %s (a holder id is %d lowercase hex digits; "
                              "NULL for none)", fn, why, FENCE_HOLDER_LEN);
    }
    return FENCE_OK;
}

static fence_status check_token(const char *fn, const PGconn *conn, uint64_t token)
{
    if (token == 0) {
        return fence_pg__fail(conn, FENCE_ENOTOKEN,
                              "%s: token 0 is not a fencing token (tokens are 1..%" PRIu64 ")", fn,
                              FENCE_TOKEN_MAX);
    }
    if (token > FENCE_TOKEN_MAX) {
        return fence_pg__fail(conn, FENCE_ENOTOKEN,
                              "%s: token %" PRIu64 " does not fit a PostgreSQL bigint (max %" PRIu64
                              ")", fn, token, FENCE_TOKEN_MAX);
    }
    return FENCE_OK;
}

/* Status for a NULL result from libpq. */
static fence_status null_result(const char *fn, const PGconn *conn)
{
    fence_status st = PQstatus(conn) == CONNECTION_OK ? FENCE_ENOMEM : FENCE_ECONN;
    return fence_pg__fail(conn, st, "%s: %s", fn,
                          PQerrorMessage(conn)[0] ? PQerrorMessage(conn) : "no result from libpq");
}

/* Classify res (and free it); on success check that the first two values
 * are the token use_token returned (server text, read with the one token
 * grammar) and the holder it set ("" for none). */
static fence_status finish_set(const char *fn, PGconn *conn, PGresult *res, uint64_t token,
                               const char *holder, fence_stale *stale)
{
    fence_status st = fence_pg_classify(conn, res, stale);
    if (st == FENCE_OK) {
        uint64_t got = 0;
        int shaped = PQntuples(res) == 1 && PQnfields(res) >= 2;
        const char *v = shaped ? PQgetvalue(res, 0, 0) : "";
        const char *h = shaped ? PQgetvalue(res, 0, 1) : "";
        if (fence__token_parse(v, strlen(v), &got) != 0 || got != token) {
            st = fence_pg__fail(conn, FENCE_EDB,
                                "%s: the server did not confirm fence.token = %" PRIu64, fn, token);
        } else if (!shaped || strcmp(h, holder != NULL ? holder : "") != 0) {
            st = fence_pg__fail(conn, FENCE_EDB, "%s: the server did not confirm fence.holder",
                                fn);
        }
    }
    PQclear(res);
    return st;
}

/* A valid connection that is idle, outside a transaction block and out of
 * pipeline mode; why (may be "") is appended to the message. */
static fence_status check_idle(const char *fn, const PGconn *conn, const char *why)
{
    fence_status st = check_conn(fn, conn);
    if (st != FENCE_OK) {
        return st;
    }
    if (PQpipelineStatus(conn) != PQ_PIPELINE_OFF || PQtransactionStatus(conn) != PQTRANS_IDLE) {
        return fence_pg__fail(conn, FENCE_ESTATE,
                              "%s: the connection must be idle, outside a transaction block and "
                              "out of pipeline mode%s", fn, why);
    }
    return FENCE_OK;
}

/* The arguments of a call that sets a token: a connection, a valid token,
 * an optional holder and an optional resource name. */
static fence_status check_token_call(const char *fn, const PGconn *conn, uint64_t token,
                                     const char *holder, const char *resource)
{
    fence_status st = check_conn(fn, conn);
    if (st == FENCE_OK) {
        st = check_token(fn, conn, token);
    }
    if (st == FENCE_OK) {
        st = check_holder(fn, conn, holder);
    }
    if (st == FENCE_OK) {
        st = check_resource(fn, conn, resource, 1);
    }
    return st;
}

/* fence_pg_set_token's state: out of pipeline mode, idle in a transaction
 * block. */
static fence_status check_in_block(const char *fn, const PGconn *conn)
{
    if (PQpipelineStatus(conn) != PQ_PIPELINE_OFF) {
        return fence_pg__fail(conn, FENCE_ESTATE,
                              "%s: the connection is in pipeline mode: use fence_pg_send_token()",
                              fn);
    }
    switch (PQtransactionStatus(conn)) {
    case PQTRANS_INTRANS:
        return FENCE_OK;
    case PQTRANS_IDLE:
        return fence_pg__fail(conn, FENCE_ESTATE,
                              "%s: not inside a transaction block: BEGIN first (a "
                              "transaction-local token set outside one would vanish at once and "
                              "the writes would not be fenced)", fn);
    case PQTRANS_INERROR:
        return fence_pg__fail(conn, FENCE_ESTATE,
                              "%s: the current transaction has failed: ROLLBACK first", fn);
    case PQTRANS_ACTIVE:
        return fence_pg__fail(conn, FENCE_ESTATE,
                              "%s: a command is still in progress on this connection", fn);
    case PQTRANS_UNKNOWN:
    default:
        return fence_pg__fail(conn, FENCE_ECONN, "%s: the connection is not usable: %s", fn,
                              PQerrorMessage(conn));
    }
}

/* The parameters of the set-token query, shared by set and send. */
typedef struct token_query {
    char tok[24];
    const char *values[3];
    int q;         /* Q_SET, Q_SEND, Q_ADVANCE */
    int flags;     /* the connection's: USE_C, UNPOOLED */
} token_query;

/* `send`: for fence_pg_send_token, whose caller only classifies the
 * result (without a resource, the form with no result column). */
static void token_query_init(token_query *q, const PGconn *conn, uint64_t token,
                             const char *holder, const char *resource, int send)
{
    snprintf(q->tok, sizeof q->tok, "%" PRIu64, token);
    q->values[0] = q->tok;
    q->values[1] = holder != NULL ? holder : ""; /* '' is "no holder" to fence.sql */
    q->values[2] = resource;
    q->q = resource != NULL ? Q_ADVANCE : send ? Q_SEND : Q_SET;
    q->flags = flags_of(conn);
}

static const Oid text_types[3] = {TEXTOID_, TEXTOID_, TEXTOID_};

/* Send the query (PQsendQueryPrepared by name on a connection declared
 * unpooled, else PQsendQueryParams); 1 sent, 0 not (libpq's message). */
static int token_query_send(PGconn *conn, const token_query *q)
{
    if (q->flags & UNPOOLED) {
        return PQsendQueryPrepared(conn, STMT_TOKEN[q->q], NPARAMS[q->q], q->values, NULL, NULL,
                                   0);
    }
    return PQsendQueryParams(conn, SQL_TOKEN[(q->flags & USE_C) != 0][q->q], NPARAMS[q->q],
                             text_types, q->values, NULL, NULL, 0);
}

fence_status fence_pg_set_token(PGconn *conn, uint64_t token, const char *holder,
                                const char *resource, fence_stale *stale)
{
    static const char fn[] = "fence_pg_set_token";
    if (stale != NULL) {
        memset(stale, 0, sizeof *stale);
    }
    fence_status st = check_token_call(fn, conn, token, holder, resource);
    if (st == FENCE_OK) {
        st = check_in_block(fn, conn);
    }
    if (st != FENCE_OK) {
        return st;
    }
    token_query q;
    token_query_init(&q, conn, token, holder, resource, 0);
    PGresult *res = NULL;
    if (token_query_send(conn, &q)) {
        /* The last result of the one statement (libpq's PQexec way). */
        PGresult *r;
        while ((r = PQgetResult(conn)) != NULL) {
            PQclear(res);
            res = r;
        }
    }
    if (res == NULL) {
        return null_result(fn, conn);
    }
    return finish_set(fn, conn, res, token, holder, stale);
}

fence_status fence_pg_send_token(PGconn *conn, uint64_t token, const char *holder,
                                 const char *resource)
{
    static const char fn[] = "fence_pg_send_token";
    fence_status st = check_token_call(fn, conn, token, holder, resource);
    if (st != FENCE_OK) {
        return st;
    }
    switch (PQpipelineStatus(conn)) {
    case PQ_PIPELINE_ON:
        break;
    case PQ_PIPELINE_ABORTED:
        return fence_pg__fail(conn, FENCE_ESTATE,
                              "%s: the pipeline is aborted by an earlier error: read its results "
                              "up to the PQpipelineSync first", fn);
    case PQ_PIPELINE_OFF:
    default:
        return fence_pg__fail(conn, FENCE_ESTATE,
                              "%s: the connection is not in pipeline mode (PQenterPipelineMode); "
                              "outside it use fence_pg_set_token()", fn);
    }
    token_query q;
    token_query_init(&q, conn, token, holder, resource, 1);
    if (!token_query_send(conn, &q)) {
        return null_result(fn, conn);
    }
    return fence_pg__ok(conn);
}

/* Whether this database offers fence.c_use_token to the caller: FENCE_OK
 * with *c 1 or 0, or the failure (recorded, "fn: " in front). */
static fence_status ask_c_use_token(const char *fn, PGconn *conn, int *c)
{
    *c = 0;
    PGresult *has = PQexec(conn, SQL_HAS_C);
    if (has == NULL) {
        return null_result(fn, conn);
    }
    fence_status st = fence_pg_classify(conn, has, NULL);
    *c = st == FENCE_OK && PQntuples(has) == 1 && PQnfields(has) == 1 &&
         !PQgetisnull(has, 0, 0) && strcmp(PQgetvalue(has, 0, 0), "t") == 0;
    PQclear(has);
    if (st != FENCE_OK) {
        fence_pg__prefix(conn, fn);
    }
    return st;
}

/* Remember flags on conn (instance data of event_proc).  Leaves the
 * message slot alone. */
static int remember(PGconn *conn, int flags)
{
    /* Registering fails harmlessly when an earlier call registered it. */
    (void)PQregisterEventProc(conn, event_proc, "fence_pg", NULL);
    return PQsetInstanceData(conn, event_proc, flags ? (void *)&conn_flags[flags] : NULL);
}

static fence_status remember_ok(const char *fn, PGconn *conn, int flags)
{
    if (!remember(conn, flags)) {
        return fence_pg__fail(conn, FENCE_ENOMEM,
                              "%s: libpq could not register the connection's event procedure",
                              fn);
    }
    return fence_pg__ok(conn);
}

fence_status fence_pg_prepare(PGconn *conn)
{
    static const char fn[] = "fence_pg_prepare";
    int c = 0;
    fence_status st = check_idle(fn, conn, "");
    if (st == FENCE_OK) {
        st = ask_c_use_token(fn, conn, &c);
    }
    if (st != FENCE_OK) {
        return st;
    }
    /* A connection declared unpooled stays so (its statements are there)
     * unless the choice of function changed: then unnamed again until
     * fence_pg_prepare_unpooled prepares them anew. */
    int had = flags_of(conn);
    int keep = (had & USE_C) == (c ? USE_C : 0) ? (had & UNPOOLED) : 0;
    return remember_ok(fn, conn, (c ? USE_C : 0) | keep);
}

fence_status fence_pg_prepare_unpooled(PGconn *conn)
{
    static const char fn[] = "fence_pg_prepare_unpooled";
    int c = 0;
    fence_status st = check_idle(fn, conn, "");
    if (st == FENCE_OK) {
        st = ask_c_use_token(fn, conn, &c);
    }
    if (st != FENCE_OK) {
        return st;
    }
    int had = flags_of(conn);
    if ((had & UNPOOLED) && (had & USE_C) == (c ? USE_C : 0)) {
        return fence_pg__ok(conn); /* prepared already, the same way */
    }
    /* Unnamed statements until every named one is there. */
    if (!remember(conn, c ? USE_C : 0)) {
        return remember_ok(fn, conn, 0);
    }
    for (int i = 0; i < NQ; i++) {
        if (had & UNPOOLED) { /* prepared before for the other function */
            char sql[64];
            snprintf(sql, sizeof sql, "DEALLOCATE %s", STMT_TOKEN[i]);
            PQclear(PQexec(conn, sql));
        }
        PGresult *r = PQprepare(conn, STMT_TOKEN[i], SQL_TOKEN[c][i], NPARAMS[i], text_types);
        if (r == NULL) {
            return null_result(fn, conn);
        }
        st = fence_pg_classify(conn, r, NULL);
        PQclear(r);
        if (st != FENCE_OK) {
            fence_pg__prefix(conn, fn);
            return st;
        }
    }
    return remember_ok(fn, conn, (c ? USE_C : 0) | UNPOOLED);
}

/* fence_pg_mark's arguments and state. */
static fence_status check_mark(const char *fn, const PGconn *conn, const char *resource,
                               const uint64_t *mark, int want_holder, const char *holder)
{
    fence_status st = check_conn(fn, conn);
    if (st == FENCE_OK) {
        st = check_resource(fn, conn, resource, 0);
    }
    if (st != FENCE_OK) {
        return st;
    }
    if (mark == NULL || (want_holder && holder == NULL)) {
        return fence_pg__fail(conn, FENCE_EINVAL, "%s: %s is NULL", fn,
                              mark == NULL ? "mark" : "holder");
    }
    if (PQpipelineStatus(conn) != PQ_PIPELINE_OFF) {
        return fence_pg__fail(conn, FENCE_ESTATE, "%s: not available in pipeline mode", fn);
    }
    PGTransactionStatusType ts = PQtransactionStatus(conn);
    if (ts != PQTRANS_IDLE && ts != PQTRANS_INTRANS) {
        return fence_pg__fail(conn, FENCE_ESTATE,
                              "%s: the connection is busy or its transaction has failed", fn);
    }
    return FENCE_OK;
}

/* A holder as the server returned it: NULL (none) or the id fence.sql's
 * CHECK admits. */
static int holder_reply_ok(const PGresult *res, int col)
{
    if (PQgetisnull(res, 0, col)) {
        return 1;
    }
    const char *v = PQgetvalue(res, 0, col);
    size_t n = strlen(v);
    for (size_t i = 0; i < n; i++) {
        if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f'))) {
            return 0;
        }
    }
    return n == FENCE_HOLDER_LEN;
}

/* fence_pg_mark and fence_pg_mark_holder: holder NULL reads the token only
 * (fence.mark), else both in one statement. */
static fence_status read_mark(const char *fn, PGconn *conn, const char *resource,
                              uint64_t *mark, int want_holder, char *holder)
{
    if (mark != NULL) {
        *mark = 0;
    }
    if (want_holder && holder != NULL) {
        holder[0] = '\0';
    }
    fence_status st = check_mark(fn, conn, resource, mark, want_holder, holder);
    if (st != FENCE_OK) {
        return st;
    }
    const Oid types[1] = {TEXTOID_};
    const char *values[1] = {resource};
    int nfields = want_holder ? 2 : 1;
    PGresult *res = PQexecParams(conn, want_holder ? SQL_MARK_HOLDER : SQL_MARK, 1, types,
                                 values, NULL, NULL, 0);
    if (res == NULL) {
        return null_result(fn, conn);
    }
    st = fence_pg_classify(conn, res, NULL);
    if (st == FENCE_OK) {
        int shaped = PQntuples(res) == 1 && PQnfields(res) == nfields;
        const char *v = shaped ? PQgetvalue(res, 0, 0) : "";
        uint64_t n = 0;
        /* A mark is 0 (none) or a token: the one grammar, 0..FENCE_TOKEN_MAX. */
        if (fence__u64_parse(v, strlen(v), FENCE_TOKEN_MAX, &n) != 0) {
            st = fence_pg__fail(conn, FENCE_EDB, "%s: unexpected reply '%.40s'", fn, v);
        } else if (want_holder && !holder_reply_ok(res, 1)) {
            st = fence_pg__fail(conn, FENCE_EDB, "%s: unexpected holder in the reply", fn);
        } else {
            *mark = n;
            if (want_holder) {
                memcpy(holder, PQgetvalue(res, 0, 1), strlen(PQgetvalue(res, 0, 1)) + 1);
            }
        }
    }
    PQclear(res);
    return st;
}

fence_status fence_pg_mark(PGconn *conn, const char *resource, uint64_t *mark)
{
    return read_mark("fence_pg_mark", conn, resource, mark, 0, NULL);
}

fence_status fence_pg_mark_holder(PGconn *conn, const char *resource, uint64_t *mark,
                                  char *holder)
{
    return read_mark("fence_pg_mark_holder", conn, resource, mark, 1, holder);
}

fence_status fence_pg_install(PGconn *conn)
{
    static const char fn[] = "fence_pg_install";
    fence_status st = check_idle(fn, conn, " (the script commits its own transaction)");
    if (st != FENCE_OK) {
        return st;
    }
    PGresult *res = PQexec(conn, fence_pg__sql_fence);
    if (res == NULL) {
        return null_result(fn, conn);
    }
    st = fence_pg_classify(conn, res, NULL);
    PQclear(res);
    if (st != FENCE_OK) {
        fence_pg__prefix(conn, fn); /* "fence_pg_install: <server's message>" */
    }
    PGTransactionStatusType ts = PQtransactionStatus(conn);
    if (ts == PQTRANS_INERROR || ts == PQTRANS_INTRANS) {
        /* The script failed inside its BEGIN: nothing was committed. */
        PGresult *rb = PQexec(conn, "ROLLBACK");
        PQclear(rb);
        if (st == FENCE_OK) {
            st = fence_pg__fail(conn, FENCE_EDB, "%s: the script did not commit", fn);
        }
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
