-- fence--1.2--1.3.sql -- ALTER EXTENSION fence UPDATE TO '1.3': adds
-- fence.c_send(token text, holder text), the writer's token and holder
-- for the current transaction without PostgreSQL's settings machinery.
--
-- What set_config('fence.token', token, true) and
-- set_config('fence.holder', holder, true) would set, with the same
-- scoping (the transaction; a rolled-back savepoint drops it), kept in the
-- backend's memory: every reader sees it (the C ones directly, PL/pgSQL's
-- current_setting through fence.token's and fence.holder's show hooks,
-- which the module defines once loaded).  A transaction that also changes
-- either setting (SET LOCAL, set_config, SET, RESET, a function's SET
-- clause) is refused by every reader, 23Q02 reason=conflict: nothing is
-- guessed.  libfence_pg's fence_pg_prepare() uses it when the role may
-- (lib/pgext/send.c, docs/postgres-extension.md).  It sets nothing but the
-- caller's own transaction state, as set_config does: EXECUTE to PUBLIC.

\echo Use "ALTER EXTENSION fence UPDATE TO '1.3'" to load this file. \quit

CREATE FUNCTION fence.c_send(token text, holder text) RETURNS boolean
AS 'MODULE_PATHNAME', 'fence_c_send'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION fence.c_send(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fence.c_send(text, text) TO PUBLIC;
