/*
 * fence_pg.h -- fencing tokens for PostgreSQL writes (libfence_pg).
 *
 * The server side is sql/postgres/fence.sql (schema "fence"): protected
 * tables reject an INSERT, UPDATE or DELETE whose token is lower than the
 * row's stamp, and fence.advance() rejects a token lower than a named
 * resource's high-water mark.  The token of a write is the transaction-local
 * setting fence.token.  This library sets it -- and optionally advances a
 * resource -- in one round trip inside the caller's transaction, and tells a
 * stale rejection (SQLSTATE 23Q01, FENCE_STALE) apart from every other
 * error:
 *
 *     PQexec(conn, "BEGIN");
 *     if (fence_pg_set_token(conn, fence_lease_token(lease), NULL, &e) != FENCE_OK) ...
 *     PGresult *r = PQexec(conn, "UPDATE orders SET ... WHERE id = 7");
 *     if (fence_pg_result(r, &e) == FENCE_STALE)
 *         ... e.offered < e.highest: a newer holder has written; give up ...
 *     PQclear(r);
 *     PQexec(conn, "COMMIT");
 *
 * Ownership (the one rule, stated once): the library never takes, keeps or
 * frees the caller's PGconn or PGresult, and allocates nothing the caller
 * must free.  Details of an outcome go into a caller-owned fence_pg_error,
 * which every call fills when `err` is not NULL (err is always optional).
 * Threads: as with libpq, one PGconn must not be used by two threads at
 * once; the library keeps no global state.
 *
 * SQLSTATEs (see the top of fence.sql): 23Q01 stale token -> FENCE_STALE;
 * 23Q02 missing or malformed token -> FENCE_ENOTOKEN; anything else ->
 * FENCE_EDB, with the server's message (23Q03: a refused operation, e.g.
 * TRUNCATE of a protected table, or a later BEFORE trigger of the table
 * rewriting the token column).
 *
 * What the fence does not do (details at the top of fence.sql):
 *   - Tokens are self-declared: the check stops a stale but honest writer
 *     (a paused holder whose lease has passed on), not a hostile role that
 *     can write the table and simply sets the largest token.
 *   - A role allowed to set session_replication_role (a superuser, or on
 *     PostgreSQL 15+ one granted SET ON PARAMETER session_replication_role)
 *     can switch the triggers off; so can the table's owner, and a role with
 *     TRIGGER on the table can run its own code in every writer's
 *     transaction.  Do not grant these to application roles.
 *   - fence.advance() is EXECUTE to PUBLIC and resource names have no
 *     namespaces: any role can raise any resource's mark.  To restrict it,
 *     REVOKE EXECUTE ON FUNCTION fence.advance(text, bigint) FROM PUBLIC and
 *     grant it to the application roles; re-installing keeps that.
 *   - Only the protected table itself is fenced: fence.protect() refuses a
 *     table with inheritance children and partitioned tables (protect each
 *     child or partition).
 */
#ifndef FENCE_PG_H
#define FENCE_PG_H

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "fence_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest valid token: tokens are 1..INT64_MAX (PostgreSQL bigint). */
#define FENCE_PG_TOKEN_MAX ((uint64_t)INT64_MAX)
/* Resource names are 1..FENCE_PG_RESOURCE_MAX bytes (as in fence.sql). */
#define FENCE_PG_RESOURCE_MAX 512

/*
 * What a call found out.  Every field is set by every call that gets a
 * non-NULL err: zero/empty unless it applies.
 */
typedef struct fence_pg_error {
    int status;          /* what the call returned (a fence_status) */
    char sqlstate[6];    /* the server's SQLSTATE, or "" */
    /* FENCE_STALE only (0/"" otherwise, or when the server did not say): */
    uint64_t offered;    /* the token of the rejected write */
    uint64_t highest;    /* the highest token the object has accepted */
    int is_resource;     /* 1: object is a resource name; 0: a table */
    char object[1024];   /* "public.orders" (quoted as SQL) or the resource */
    /* One line a human can act on: the server's message, or what was wrong
     * with the arguments or the connection's state.  Always NUL-terminated. */
    char message[1024];
} fence_pg_error;

/*
 * Set the token of the caller's current transaction (SET LOCAL
 * fence.token) and, when resource is not NULL, advance that resource's
 * high-water mark with fence.advance() -- in one round trip.  The
 * connection must be idle inside a transaction block (after BEGIN):
 * outside one, a transaction-local setting would vanish at once, so the
 * call refuses with FENCE_ESTATE instead of silently not fencing.
 *
 * Returns FENCE_OK; FENCE_STALE (the resource has a higher mark; the
 * transaction is now aborted: roll it back); FENCE_ENOTOKEN (token 0 or
 * above FENCE_PG_TOKEN_MAX); FENCE_EINVAL (NULL conn, empty or oversized
 * resource); FENCE_ESTATE (not in a transaction block, transaction
 * aborted, a command in progress, or pipeline mode: use
 * fence_pg_send_token()); FENCE_ECONN (connection bad); FENCE_ENOMEM;
 * FENCE_EDB (any other server error, e.g. fence.sql not installed).
 */
FENCE_API int fence_pg_set_token(PGconn *conn, uint64_t token, const char *resource,
                                 fence_pg_error *err);

/*
 * Optional, once per connection: prepare the statements that
 * fence_pg_set_token() and fence_pg_send_token() send, so that every later
 * call skips parsing and planning them (a measurable share of a short
 * transaction).  The connection remembers it (libpq instance data, cleared
 * by PQreset); on a connection never prepared the calls send their
 * statements unprepared and work the same.  If the application drops them
 * (DEALLOCATE ALL, DISCARD ALL), the next call fails with FENCE_EDB
 * (SQLSTATE 26000): call fence_pg_prepare() again.  The connection must be
 * idle outside a transaction block and not in pipeline mode (FENCE_ESTATE).
 * Calling it again is harmless.
 */
FENCE_API int fence_pg_prepare(PGconn *conn, fence_pg_error *err);

/*
 * The same query as fence_pg_set_token(), queued in libpq pipeline mode
 * (PQenterPipelineMode) with PQsendQueryParams, so that a fenced write
 * needs no extra round trip even in autocommit: everything queued up to
 * the next PQpipelineSync() runs in one implicit transaction (unless you
 * queue BEGIN/COMMIT yourself), and the token holds for all of it.
 * Returns FENCE_OK once queued; its PGresult comes back in order like any
 * other queued query's -- pass it to fence_pg_result().  FENCE_ESTATE when
 * the connection is not in pipeline mode; other codes as
 * fence_pg_set_token() for bad arguments.
 */
FENCE_API int fence_pg_send_token(PGconn *conn, uint64_t token, const char *resource,
                                  fence_pg_error *err);

/*
 * Classify a result: FENCE_OK for any success status (commands, tuples,
 * COPY, pipeline sync); FENCE_STALE for SQLSTATE 23Q01, with offered,
 * highest, is_resource and object parsed from the error's DETAIL;
 * FENCE_ENOTOKEN for 23Q02; FENCE_EDB for every other error (including a
 * pipeline aborted by an earlier error) with the server's message;
 * FENCE_EINVAL for a NULL result (libpq returns NULL when out of memory or
 * when it could not send the query: see PQerrorMessage()).  Does not free
 * the result.
 */
FENCE_API int fence_pg_result(const PGresult *res, fence_pg_error *err);

/*
 * Read RESOURCE's high-water mark into *out (0 when it has none).  Usable
 * in or out of a transaction block (not in an aborted one, nor in pipeline
 * mode).  FENCE_EINVAL for NULL arguments or a bad name.
 */
FENCE_API int fence_pg_mark(PGconn *conn, const char *resource, uint64_t *out,
                            fence_pg_error *err);

/*
 * Install or upgrade schema "fence" by running the fence.sql embedded in
 * this library (the same text as fence_pg_install_sql()).  Idempotent; it
 * upgrades an older version in place (and re-protects the tables that
 * version protected, WARNING about those the connection's role may not).
 *
 * Run it on an administrator's connection -- a superuser, or a dedicated
 * role that owns schema "fence" and nothing the applications use -- never
 * on an application's own connection: whoever owns the schema can drop or
 * replace the guards and run code inside fence.advance() with the owner's
 * rights.  The script therefore refuses (FENCE_EDB, SQLSTATE 42501) a schema
 * "fence" owned by a role other than the connection's current user, or one
 * holding anything another role owns or may change.  A non-superuser admin
 * needs CREATE on the database; table owners then need EXECUTE on
 * fence.protect(regclass, name, boolean) to protect their tables.  The
 * script pins its own search_path, so the connection's does not matter.
 *
 * The connection must be idle and outside a transaction block (the script
 * commits its own); on failure nothing is left half-installed and the
 * connection is returned to idle.  FENCE_OK, FENCE_EINVAL, FENCE_ESTATE,
 * FENCE_ECONN or FENCE_EDB (e.g. not enough privileges, the schema belongs
 * to another role, or a newer version is installed).
 */
FENCE_API int fence_pg_install(PGconn *conn, fence_pg_error *err);

/* The embedded fence.sql, NUL-terminated; *len (optional) gets its length.
 * Static storage: never NULL, never freed. */
FENCE_API const char *fence_pg_install_sql(size_t *len);

#ifdef __cplusplus
}
#endif
#endif /* FENCE_PG_H */
