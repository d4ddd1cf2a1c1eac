-- fence--1.1--1.2.sql -- ALTER EXTENSION fence UPDATE TO '1.2': adds
-- fence.c_stamp(), the C guard's rule for an UPDATE as an expression.
--
-- Once the module is loaded in a backend (any C function of the extension
-- called; fence_pg_prepare() calls one; or session_preload_libraries =
-- 'fence'), its planner hook assigns the token column of an UPDATE of a
-- table guarded by fence.c_guard() (and no other BEFORE UPDATE row
-- trigger) fence.c_stamp(col, <the statement's value>, table, column,
-- mode, tgenabled), and its executor hook then skips the trigger, which
-- would lock each old row first (lib/pgext/plan.c,
-- docs/postgres-extension.md).  Same rules and errors as the guard.
-- It reads the caller's own fence.token and writes nothing, so it is
-- EXECUTE to PUBLIC; revoked from PUBLIC, UPDATEs keep the trigger (a
-- cached plan may run under any role of the session).

\echo Use "ALTER EXTENSION fence UPDATE TO '1.2'" to load this file. \quit

CREATE FUNCTION fence.c_stamp(old bigint, new bigint, tbl oid, col smallint,
                              permissive boolean, enabled "char") RETURNS bigint
AS 'MODULE_PATHNAME', 'fence_c_stamp'
LANGUAGE C VOLATILE;

REVOKE ALL ON FUNCTION fence.c_stamp(bigint, bigint, oid, smallint, boolean, "char") FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fence.c_stamp(bigint, bigint, oid, smallint, boolean, "char") TO PUBLIC;
