-- 80-events.sql -- part of fence.sql: the event triggers: later BEFORE triggers get their checks, dropped tables leave the registry, a new table carrying fence's token column marker is named.
-- The parts are joined in name order into $(B)/sql/postgres/fence.sql
-- (lib/pg/module.mk), the one script that psql -f, fence_pg_install()
-- and make install use; it runs as one transaction (BEGIN in
-- 10-schema.sql, COMMIT in 90-upgrade.sql).  See docs/postgres.md.

-- The event trigger's function: after CREATE TRIGGER, ALTER TRIGGER
-- (rename) and ALTER TABLE (ENABLE TRIGGER, ...) on a protected table,
-- attach the AFTER checks a later BEFORE trigger now needs.  SECURITY
-- DEFINER (the installer, a superuser: event triggers need one) so that it
-- may do so on any table, whoever ran the command; it only ever adds
-- fence's own checks.  A failure fails the command: closed, not open.
CREATE OR REPLACE FUNCTION fence.on_ddl() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rel regclass;
BEGIN
    FOR rel IN
        SELECT DISTINCT pr.tbl
        FROM pg_catalog.pg_event_trigger_ddl_commands() d
        JOIN fence.protected pr
          ON pr.tbl::oid = CASE WHEN d.classid = 'pg_catalog.pg_trigger'::regclass
                                THEN (SELECT t.tgrelid FROM pg_catalog.pg_trigger t WHERE t.oid = d.objid)
                                WHEN d.classid = 'pg_catalog.pg_class'::regclass THEN d.objid END
        WHERE NOT pr.check_present
    LOOP
        PERFORM fence.add_checks(rel);
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION fence.on_ddl() FROM PUBLIC;

-- The other event trigger's function: a table dropped (DROP TABLE, DROP
-- SCHEMA ... CASCADE, DROP OWNED ...) leaves fence.tables and
-- fence.generated at once, so that no dump ever holds its oid -- a number,
-- which in another cluster may be another table's.  (Without the event
-- trigger, drop_orphans() forgets it at the next protect(), unprotect() or
-- install; its unused generated functions go then too.)  SECURITY DEFINER
-- (the installer): only it may write these.
CREATE OR REPLACE FUNCTION fence.on_drop() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM fence.tables t
    USING pg_catalog.pg_event_trigger_dropped_objects() d
    WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.objsubid = 0 AND d.objid = t.tbl::oid;
    DELETE FROM fence.generated g
    USING pg_catalog.pg_event_trigger_dropped_objects() d
    WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.objsubid = 0 AND d.objid = g.tbl::oid;
END
$$;
REVOKE ALL ON FUNCTION fence.on_drop() FROM PUBLIC;

-- The third: a table created with fence's token column marker
-- (fence.token_marker()) and no row in fence.tables -- pg_restore -t or
-- pg_dump -t | psql of a protected table, which bring no guard back
-- (pg_restore -t no triggers at all), or CREATE TABLE ... (LIKE ...
-- INCLUDING CONSTRAINTS) -- gets a WARNING: it takes writes without a
-- token until the install or fence.protect() protects it again, and
-- fence.verify() lists it meanwhile.  It is not protected here: the rows
-- of a restore are loaded after CREATE TABLE, with no token.  Reads only
-- what PUBLIC may read.
CREATE OR REPLACE FUNCTION fence.on_create() RETURNS event_trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
BEGIN
    -- Never in the way of a CREATE TABLE: not while fence is half there.
    IF pg_catalog.to_regclass('fence.tables') IS NULL OR pg_catalog.to_regclass('fence.token_columns') IS NULL THEN
        RETURN;
    END IF;
    FOR r IN
        SELECT m.tbl, m.col
        FROM pg_catalog.pg_event_trigger_ddl_commands() d
        JOIN fence.token_columns m ON m.tbl::oid = d.objid
        WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.objsubid = 0
          AND NOT EXISTS (SELECT 1 FROM fence.tables t WHERE t.tbl = m.tbl)
    LOOP
        RAISE WARNING 'fence: % carries fence''s token column marker (column %) but is not protected: it takes writes without a token',
                r.tbl, pg_catalog.quote_ident(r.col)
            USING HINT = pg_catalog.format('Restored alone?  Load its rows, then run fence.sql again (or, as its owner, SELECT fence.protect(%L, %L)).  A copy that is not to be fenced: ALTER TABLE %s DROP CONSTRAINT %I.',
                                           r.tbl::text, r.col, r.tbl, (fence.token_marker(r.col)).conname);
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION fence.on_create() FROM PUBLIC;

DO $event$
BEGIN
    IF (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
        DROP EVENT TRIGGER IF EXISTS fence_later_triggers;
        CREATE EVENT TRIGGER fence_later_triggers ON ddl_command_end
            WHEN TAG IN ('CREATE TRIGGER', 'ALTER TRIGGER', 'ALTER TABLE')
            EXECUTE FUNCTION fence.on_ddl();
        DROP EVENT TRIGGER IF EXISTS fence_dropped_tables;
        CREATE EVENT TRIGGER fence_dropped_tables ON sql_drop
            EXECUTE FUNCTION fence.on_drop();
        DROP EVENT TRIGGER IF EXISTS fence_marked_tables;
        CREATE EVENT TRIGGER fence_marked_tables ON ddl_command_end
            WHEN TAG IN ('CREATE TABLE')
            EXECUTE FUNCTION fence.on_create();
    ELSIF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_event_trigger e
                      WHERE e.evtname = 'fence_later_triggers' AND e.evtenabled <> 'D') THEN
        RAISE WARNING 'fence: installed by %, not a superuser: no event trigger watches for BEFORE triggers created later on protected tables',
                pg_catalog.quote_ident(current_user)
            USING HINT = 'A BEFORE row trigger that sorts after zz_fence_guard_* and is created after fence.protect() is not checked until fence.protect() runs again on its table (SELECT * FROM fence.protected WHERE check_needed AND NOT check_present).  A dropped protected table stays in fence.tables until the next fence.protect(), fence.unprotect() or install (a dump taken meanwhile holds its oid).  A superuser may re-run this script to add the event triggers.';
    END IF;
END
$event$;
