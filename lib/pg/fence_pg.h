/*
 * fence_pg.h -- fencing tokens for PostgreSQL writes (libfence_pg).
 *
 * The server side is sql/postgres/fence.sql (schema "fence"): protected
 * tables reject a write whose token is lower than the row's stamp, and
 * fence.advance() rejects a token lower than a named resource's mark, or
 * equal to it but recorded for another holder (a token issued twice).
 * This library sets the token and holder of the caller's transaction (and
 * optionally advances a resource) in one round trip, and tells a stale
 * rejection (SQLSTATE 23Q01, FENCE_STALE) apart from every other error:
 *
 *     PQexec(conn, "BEGIN");
 *     if (fence_pg_set_token(conn, token, holder, NULL, NULL) != FENCE_OK) ...
 *     PGresult *r = PQexec(conn, "UPDATE orders SET ... WHERE id = 7");
 *     fence_stale why;
 *     if (fence_pg_classify(conn, r, &why) == FENCE_STALE)
 *         ... why.offered < why.highest: a newer holder has written; give up ...
 *     PQclear(r);
 *     PQexec(conn, "COMMIT");
 *
 * How it works, the SQLSTATEs, what the fence does not do, install and
 * admin roles, pipeline mode: docs/postgres.md.
 *
 * Ownership: the library never takes, keeps or frees the caller's PGconn or
 * PGresult, and allocates nothing the caller must free.
 * Threads: as with libpq, one PGconn must not be used by two threads at
 * once.  The library's only state is a per-thread error slot
 * (fence_pg_errmsg).
 * Every call that can return FENCE_STALE takes an optional `fence_stale *`
 * last: zeroed whenever it is not NULL, filled only on FENCE_STALE.
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

/*
 * Set the token and holder of the current transaction with
 * fence.use_token(), which binds them to it (fence.sql version 5: no guard
 * admits a token set any other way, nor one left by an earlier transaction
 * of the connection) and, when resource is not NULL, advance that
 * resource's mark with fence.advance() -- one statement, one round trip,
 * sent unnamed (safe behind a transaction- or statement-mode pooler)
 * unless conn was declared unpooled (fence_pg_prepare_unpooled).
 * holder: the lease's holder id, FENCE_HOLDER_LEN lowercase hex digits
 * (fence_lease_holder), or NULL for none (the setting becomes '', so a
 * session-level fence.holder never leaks in).  conn must be idle inside a
 * transaction block (after BEGIN): a token set outside one would vanish at
 * once, so the call refuses rather than silently not fencing.
 *
 * FENCE_OK; FENCE_STALE (resource has a higher mark, or the same token
 * recorded for another holder; *stale filled, with reason and the recorded
 * holder; the transaction is aborted: roll it back); FENCE_ENOTOKEN (token
 * 0 or above FENCE_TOKEN_MAX); FENCE_EINVAL (NULL conn; holder not NULL
 * and not 32 lowercase hex digits, "" included; resource empty or over
 * FENCE_NAME_MAX bytes -- nothing is sent); FENCE_ESTATE (not in a
 * transaction block, failed transaction, command in progress, pipeline
 * mode: use fence_pg_send_token); FENCE_ECONN; FENCE_ENOMEM; FENCE_EDB (any
 * other server error, e.g. fence.sql version 5 not installed: 42883, no
 * function fence.use_token).
 */
FENCE_API fence_status fence_pg_set_token(PGconn *conn, uint64_t token, const char *holder,
                                          const char *resource, fence_stale *stale);

/*
 * The query of fence_pg_set_token, queued in libpq pipeline mode
 * (PQenterPipelineMode) with PQsendQueryParams: no extra round trip even in
 * autocommit, and token and holder hold up to the next PQpipelineSync.  FENCE_OK
 * once queued; its PGresult comes back in order like any other -- pass it
 * to fence_pg_classify.  FENCE_ESTATE out of pipeline mode or in an aborted
 * pipeline; argument errors as fence_pg_set_token.
 */
FENCE_API fence_status fence_pg_send_token(PGconn *conn, uint64_t token, const char *holder,
                                           const char *resource);

/*
 * Optional, once per connection (again after PQreset): asks the server
 * (one query) whether this database has the extension's
 * fence.c_use_token (extension 1.5: fence.use_token in C, the same checks,
 * settings and errors) that the role may call, and if so has
 * fence_pg_set_token and fence_pg_send_token on conn call it instead of
 * fence.sql's PL/pgSQL fence.use_token.  Prepares nothing: the statements
 * stay unnamed, so it is safe behind a transaction- or statement-mode
 * pooler (every server connection of a pool is the same database).
 * Without it, or without the extension, fence.use_token is called; if the
 * extension is dropped later the calls fail (42883), never unfenced.
 * FENCE_OK; FENCE_EINVAL for a NULL conn; FENCE_ECONN for a connection
 * that is not usable; FENCE_ESTATE unless idle, outside a transaction
 * block and out of pipeline mode; FENCE_EDB for a server error; FENCE_ENOMEM.
 * Calling it again is harmless.
 */
FENCE_API fence_status fence_pg_prepare(PGconn *conn);

/*
 * fence_pg_prepare, and the token statements prepared by name on conn
 * (fence_pg_token_set, fence_pg_token_send, fence_pg_token_advance), which
 * fence_pg_set_token and fence_pg_send_token then execute by name: no
 * parsing and planning per transaction.  Only for a connection the
 * application declares unpooled -- straight to PostgreSQL, or through a
 * pooler in session mode -- never a guess of the library: a transaction-
 * or statement-mode pooler (pgbouncer 1.18) does not keep a name for its
 * client, and the calls then fail (26000), never unfenced.  Nor on a
 * connection whose application runs DEALLOCATE ALL or DISCARD ALL (the
 * same 26000).  PQreset forgets the declaration (the new session has no
 * statement): call it again.  Errors as fence_pg_prepare; when a
 * statement could not be prepared (FENCE_EDB, e.g. 42P05: the name is
 * taken), conn keeps sending unnamed statements.  Calling it again is
 * harmless.
 */
FENCE_API fence_status fence_pg_prepare_unpooled(PGconn *conn);

/*
 * Classify a result of a query on conn: FENCE_OK for any success status
 * (commands, tuples, COPY, pipeline sync); FENCE_STALE for SQLSTATE 23Q01
 * (*stale filled from the error's DETAIL when fence.sql raised it: tokens,
 * object, reason OLDER or REPEAT, and the holder recorded with the mark);
 * FENCE_ENOTOKEN for 23Q02; FENCE_EDB for any other error, including a
 * pipeline aborted by an earlier error; FENCE_EINVAL for a NULL res (libpq
 * returns NULL when out of memory or when it could not send the query).
 * conn only keys the message (fence_pg_errmsg); it may be NULL.  Does not
 * free res.
 */
FENCE_API fence_status fence_pg_classify(PGconn *conn, const PGresult *res, fence_stale *stale);

/*
 * fence_pg_classify for an error known by its fields instead of a
 * PGresult (a driver that hands out no PGresult: psycopg2's e.pgcode and
 * e.diag, JDBC, the Python package): sqlstate (PG_DIAG_SQLSTATE), detail
 * (PG_DIAG_MESSAGE_DETAIL) and table (PG_DIAG_TABLE_NAME), each as the
 * server sent it; detail and table may be NULL.  FENCE_STALE for 23Q01
 * (*stale filled as fence_pg_classify fills it), FENCE_ENOTOKEN for 23Q02,
 * FENCE_EDB for any other SQLSTATE; FENCE_EINVAL for a NULL sqlstate
 * (fence_pg_errmsg(NULL) says so).  Records no other message: no
 * connection is involved.
 */
FENCE_API fence_status fence_pg_classify_error(const char *sqlstate, const char *detail,
                                               const char *table, fence_stale *stale);

/*
 * RESOURCE's mark into *mark (0 when it has none; *mark is 0 on any
 * failure).  In or out of a transaction block, not in a failed one nor in
 * pipeline mode (FENCE_ESTATE).  FENCE_EINVAL for NULL arguments or a bad
 * name; FENCE_EDB for a server error or an unexpected reply.
 */
FENCE_API fence_status fence_pg_mark(PGconn *conn, const char *resource, uint64_t *mark);

/*
 * fence_pg_mark, plus the holder recorded with the mark into holder (at
 * least FENCE_HOLDER_LEN + 1 bytes): 32 lowercase hex digits, or "" when the
 * mark has none or there is no mark ("" on any failure).  One statement.
 * Needs fence.sql version 3 (FENCE_EDB otherwise).  Errors as
 * fence_pg_mark; FENCE_EINVAL for a NULL holder too.
 */
FENCE_API fence_status fence_pg_mark_holder(PGconn *conn, const char *resource, uint64_t *mark,
                                            char *holder);

/*
 * Install or upgrade schema "fence" by running the embedded fence.sql
 * (fence_pg_install_sql).  Idempotent; upgrades in place, never downgrades.
 * Run it on an administrator's connection, never an application's (see
 * docs/postgres.md: it refuses, 42501, a schema another role owns or may
 * change).  conn must be idle outside a transaction block (the script
 * commits its own); on failure nothing is left half-installed and conn is
 * idle again.  FENCE_OK, FENCE_EINVAL, FENCE_ESTATE, FENCE_ECONN, FENCE_EDB.
 */
FENCE_API fence_status fence_pg_install(PGconn *conn);

/* The embedded fence.sql, NUL-terminated; *len (optional) gets its length.
 * Static storage: never NULL, never freed. */
FENCE_API const char *fence_pg_install_sql(size_t *len);

/*
 * The message of the calling thread's last failed fence_pg call on conn:
 * the server's message, or what was wrong with the arguments or the
 * connection's state; "" when that thread's last failure was about another
 * connection or a call on conn has succeeded since.  conn NULL: the message
 * of a call given a NULL conn.  Never NULL; valid until the thread's next
 * fence_pg call.
 */
FENCE_API const char *fence_pg_errmsg(const PGconn *conn);

/* The SQLSTATE of that same failure ("23Q01", "42501", ...), or "" when it
 * was not a server error or there is no message.  Never NULL; same
 * lifetime. */
FENCE_API const char *fence_pg_sqlstate(const PGconn *conn);

#ifdef __cplusplus
}
#endif
#endif /* FENCE_PG_H */
