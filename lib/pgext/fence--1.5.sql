-- fence--1.5.sql -- CREATE EXTENSION fence: the C row guard and check and
-- fence.use_token() in C, added to schema "fence" of sql/postgres/fence.sql.
--
-- An accelerator, not a replacement: sql/postgres/fence.sql (version 5 or
-- later) must be installed in this database first -- it owns the schema
-- (CREATE EXTENSION fails with 'schema "fence" does not exist' without
-- it), fence.marks, fence.use_token(), fence.advance() and fence.protect(),
-- which picks these functions ('c') for the tables it protects once they
-- exist.  The script reads nothing of fence.sql, so a restore that creates
-- the extension before the schema's other objects works.
--   fence.c_guard()    BEFORE ROW INSERT/UPDATE/DELETE trigger function;
--                      TG_ARGV[0] the token column, TG_ARGV[1] 'strict' or
--                      'permissive'
--   fence.c_check()    AFTER ROW INSERT/UPDATE trigger function (same args)
--   fence.c_use_token(token, holder)  fence.use_token() in C: the same
--                      checks, errors and settings (libfence_pg calls it
--                      once fence_pg_prepare() found it)
--   fence.c_version()  the module's interface revision (2: tokens bound to
--                      their transaction by fence.use_token())
-- (1.1 to 1.3 also had fence.c_advance(resource, token), fence.advance()
-- in C; 1.4 has none: resources are advanced by fence.sql's fence.advance.)
-- The guard and check are bound to the module's symbols fence_c_*_v2,
-- which no module before 1.4 has: a backend still running an older
-- fence.so (loaded before the package was upgraded) fails their calls
-- (42883) rather than apply the older rule.
-- DROP EXTENSION fence fails while tables are protected with them (their
-- triggers depend on the functions): re-protect those tables with
-- fence.protect(tbl, col, permissive, 'plpgsql') first, or drop with
-- CASCADE, which drops those tables' triggers (leaving them unprotected).

\echo Use "CREATE EXTENSION fence" to load this file. \quit

CREATE FUNCTION fence.c_guard() RETURNS trigger
AS 'MODULE_PATHNAME', 'fence_c_guard_v2'
LANGUAGE C;

CREATE FUNCTION fence.c_check() RETURNS trigger
AS 'MODULE_PATHNAME', 'fence_c_check_v2'
LANGUAGE C;

CREATE FUNCTION fence.c_use_token(token bigint, holder text DEFAULT NULL) RETURNS bigint
AS 'MODULE_PATHNAME', 'fence_c_use_token'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION fence.c_version() RETURNS integer
AS 'MODULE_PATHNAME', 'fence_c_version'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- Any table owner may attach the trigger functions (CREATE TRIGGER needs
-- EXECUTE on them; fence.protect() runs with the caller's rights); a
-- trigger function cannot be called directly.
REVOKE ALL ON FUNCTION fence.c_guard() FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.c_check() FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.c_version() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fence.c_guard() TO PUBLIC;
GRANT EXECUTE ON FUNCTION fence.c_check() TO PUBLIC;
GRANT EXECUTE ON FUNCTION fence.c_version() TO PUBLIC;
-- As fence.use_token: it sets nothing but the caller's own transaction
-- settings.
REVOKE ALL ON FUNCTION fence.c_use_token(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fence.c_use_token(bigint, text) TO PUBLIC;
