-- fence--1.0.sql -- CREATE EXTENSION fence: the C implementation of
-- fence.sql's per-row guard and check, added to schema "fence".
--
-- An accelerator, not a replacement: sql/postgres/fence.sql (version 4 or
-- later) must be installed in this database first -- it owns the schema,
-- fence.marks, fence.advance() and fence.protect(), which picks these
-- functions ('c') for the tables it protects once they exist.
--   fence.c_guard()    BEFORE ROW INSERT/UPDATE/DELETE trigger function;
--                      TG_ARGV[0] the token column, TG_ARGV[1] 'strict' or
--                      'permissive'
--   fence.c_check()    AFTER ROW INSERT/UPDATE trigger function (same args)
--   fence.c_version()  the module's interface revision (1)
--   fence.c_restoring()  for this script: is a dump being restored (below)
-- DROP EXTENSION fence fails while tables are protected with them (their
-- triggers depend on the functions): re-protect those tables with
-- fence.protect(tbl, col, permissive, 'plpgsql') first, or drop with
-- CASCADE, which drops those tables' triggers (leaving them unprotected).

\echo Use "CREATE EXTENSION fence" to load this file. \quit

-- The check is skipped while a dump is being restored: pg_dump's scripts
-- SET check_function_bodies = false and create the extension before the
-- fence.sql objects they hold; the C functions need nothing of fence.sql
-- to exist (only fence.protect() needs them).  CREATE EXTENSION turns
-- check_function_bodies off for the script itself, so the session's value
-- is read from under that by fence.c_restoring().
CREATE FUNCTION fence.c_restoring() RETURNS boolean
AS 'MODULE_PATHNAME', 'fence_c_restoring'
LANGUAGE C STABLE;

DO $check$
DECLARE
    v integer;
BEGIN
    IF fence.c_restoring() THEN
        RETURN;
    END IF;
    IF pg_catalog.to_regprocedure('fence.version()') IS NULL THEN
        RAISE EXCEPTION 'fence: install sql/postgres/fence.sql (version 4 or later) in this database before CREATE EXTENSION fence'
            USING ERRCODE = '55000',
                  HINT = 'psql -v ON_ERROR_STOP=1 -f fence.sql (or fence_pg_install()), then CREATE EXTENSION fence.';
    END IF;
    EXECUTE 'SELECT fence.version()' INTO v;
    IF v IS NULL OR v < 4 THEN
        RAISE EXCEPTION 'fence: CREATE EXTENSION fence needs fence.sql version 4 or later; version % is installed', v
            USING ERRCODE = '55000',
                  HINT = 'Run sql/postgres/fence.sql version 4 or later first (it upgrades in place), then CREATE EXTENSION fence.';
    END IF;
END
$check$;

CREATE FUNCTION fence.c_guard() RETURNS trigger
AS 'MODULE_PATHNAME', 'fence_c_guard'
LANGUAGE C;

CREATE FUNCTION fence.c_check() RETURNS trigger
AS 'MODULE_PATHNAME', 'fence_c_check'
LANGUAGE C;

CREATE FUNCTION fence.c_version() RETURNS integer
AS 'MODULE_PATHNAME', 'fence_c_version'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- Any table owner may attach the trigger functions (CREATE TRIGGER needs
-- EXECUTE on them; fence.protect() runs with the caller's rights); a
-- trigger function cannot be called directly.
REVOKE ALL ON FUNCTION fence.c_guard() FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.c_check() FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.c_version() FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.c_restoring() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fence.c_guard() TO PUBLIC;
GRANT EXECUTE ON FUNCTION fence.c_check() TO PUBLIC;
GRANT EXECUTE ON FUNCTION fence.c_version() TO PUBLIC;
