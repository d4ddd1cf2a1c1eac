-- fence--1.0--1.1.sql -- ALTER EXTENSION fence UPDATE TO '1.1': adds
-- fence.c_advance(resource text, token bigint), fence.advance() in C.
--
-- The same rules, errors and locking as fence.sql's fence.advance(), which
-- stays (libfence_pg's fence_pg_prepare() picks fence.c_advance when it
-- exists).  Not SECURITY DEFINER: it admits the callers that may EXECUTE
-- fence.advance(text, bigint) (fence.grant() restricts both) and writes
-- fence.marks as that table's owner, the way PostgreSQL's foreign-key
-- triggers do.  One refusal is its own, as the C guard's: a non-empty
-- fence.holder set for the session (23Q02 reason=session
-- setting=fence.holder).  See docs/postgres-extension.md.

\echo Use "ALTER EXTENSION fence UPDATE TO '1.1'" to load this file. \quit

CREATE FUNCTION fence.c_advance(resource text, token bigint) RETURNS bigint
AS 'MODULE_PATHNAME', 'fence_c_advance'
LANGUAGE C VOLATILE;

-- Like fence.advance()'s default (the function itself checks EXECUTE on
-- fence.advance for the caller).
REVOKE ALL ON FUNCTION fence.c_advance(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fence.c_advance(text, bigint) TO PUBLIC;
