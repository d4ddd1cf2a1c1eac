-- fence--1.4--1.5.sql -- ALTER EXTENSION fence UPDATE (TO '1.5') from 1.4.
--
-- 1.5 adds fence.c_use_token(token, holder), fence.use_token() in C (the
-- same checks, errors and transaction-local settings), which libfence_pg
-- calls once fence_pg_prepare() found it.  The guard and check are the
-- same functions and symbols as 1.4's: every protected table keeps its
-- triggers.  A backend still running 1.4's fence.so (loaded before the
-- package was upgraded) has no fence_c_use_token symbol: its calls fail
-- (42883), never set a token unbound.

\echo Use "ALTER EXTENSION fence UPDATE TO '1.5'" to load this file. \quit

CREATE FUNCTION fence.c_use_token(token bigint, holder text DEFAULT NULL) RETURNS bigint
AS 'MODULE_PATHNAME', 'fence_c_use_token'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION fence.c_use_token(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fence.c_use_token(bigint, text) TO PUBLIC;
