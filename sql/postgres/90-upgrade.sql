-- 90-upgrade.sql -- part of fence.sql: upgrades from older versions and repairs, then COMMIT.
-- The parts are joined in name order into $(B)/sql/postgres/fence.sql
-- (lib/pg/module.mk), the one script that psql -f, fence_pg_install()
-- and make install use; it runs as one transaction (BEGIN in
-- 10-schema.sql, COMMIT in 90-upgrade.sql).  See docs/postgres.md.

-- Version 7 adds the issuer's table and functions (75-leases.sql: CREATE
-- TABLE IF NOT EXISTS fence.leases, CREATE OR REPLACE of its functions,
-- their EXECUTE to PUBLIC when the install comes from a version below 7):
-- an upgrade from 6 gets them there, and changes nothing else.

-- ------------------------------------------------------------------
-- Upgrade: tables protected by an older version get the current triggers
-- ------------------------------------------------------------------

-- Tables still on version 3's generic functions (WHEN clauses, or version
-- 1's without the AFTER checks) are protected again with the default
-- implementation, and the generic functions are dropped.  A table that
-- cannot be (the installer does not own it, or it has inheritance
-- children, which protect() refuses) fails the whole install, which
-- changes nothing: every table stays guarded by what it had, and the
-- error says what to do.
DO $upgrade$
DECLARE
    p record;
BEGIN
    FOR p IN
        SELECT pr.tbl, pr.col, pr.mode FROM fence.protected pr
        WHERE pr.implementation = 'generic'
        ORDER BY pr.tbl::text
    LOOP
        BEGIN
            PERFORM fence.protect(p.tbl, p.col, p.mode = 'permissive');
        EXCEPTION WHEN insufficient_privilege OR invalid_parameter_value THEN
            RAISE EXCEPTION 'fence: % is protected by version 3''s generic triggers and cannot be protected again by this install: %',
                    p.tbl, SQLERRM
                USING ERRCODE = '55000',
                      HINT = pg_catalog.format('Version 5 drops the generic triggers.  Install as a superuser or as the owner of %s, '
                                               'or first unprotect it (SELECT fence.unprotect(%L)), detach its inheritance children '
                                               'and protect each of them, then run this script again.',
                                               p.tbl::text, p.tbl::text);
        END;
    END LOOP;
    DROP FUNCTION IF EXISTS fence.row_guard();
    DROP FUNCTION IF EXISTS fence.row_check();
    -- Tables protected 'plpgsql': their functions from this version's
    -- templates (the names, column and mode stay).
    -- Column and mode from fence.generated (what the functions bake in),
    -- never from trigger arguments: any table owner may attach a generated
    -- function to its own table, with any arguments.
    PERFORM fence.drop_orphans();
    FOR p IN
        SELECT g.tbl, g.col, g.mode, g.fn
        FROM fence.generated g
        WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_proc q
                      WHERE q.pronamespace = 'fence'::regnamespace AND q.proname = g.fn)
        ORDER BY g.fn
    LOOP
        PERFORM fence.write_functions(p.tbl::regclass, p.col, p.mode = 'permissive', p.fn,
                                      'check_' || pg_catalog.substr(p.fn, 7));
    END LOOP;
END
$upgrade$;

-- Whether COL of TBL is the bigint NOT NULL column protect() leaves (not
-- identity, not generated): what protect() then only re-attaches triggers
-- to and the install only marks, running no code of the table's.
CREATE OR REPLACE FUNCTION fence.plain_token_column(tbl regclass, col name) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                   WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped
                     AND a.atttypid = 'pg_catalog.int8'::regtype AND a.attnotnull
                     AND a.attidentity = '' AND a.attgenerated = '')
$$;
REVOKE ALL ON FUNCTION fence.plain_token_column(regclass, name) FROM PUBLIC;

-- fence.tables: every table fence.protected lists and fence.tables does
-- not yet (tables protected before fence.tables existed) is recorded as it
-- is; so is every ordinary table that carries fence's token column marker
-- (fence.token_marker()) and has no row -- restored alone (pg_dump -t,
-- pg_restore -t), or a copy made with LIKE ... INCLUDING CONSTRAINTS --
-- 'strict' with the default implementation, a WARNING each (nothing of
-- its mode travels with it: set_mode() if it was permissive).  Every
-- recorded token column without the marker (protected before it existed)
-- gets it, where the installer may (else a WARNING: fence.verify() keeps
-- listing it).  Then the repair: every recorded table whose guard is not whole
-- (fence.verify(): a restore without the C extension, triggers dropped or
-- disabled, a missing AFTER check) is protected again -- same column (its
-- stamps kept), mode and implementation, or the portable guard where the
-- table was recorded 'c' and the extension is not installed -- with a
-- WARNING naming it.  A table this cannot protect again (the installer
-- does not own it, ...) is left as it is, with a WARNING: fence.verify()
-- keeps listing it.  So is one whose recorded column is no longer the
-- bigint NOT NULL column protect() left (renamed, dropped, changed): then
-- protect() would add or convert a column (UPDATE ... SET col = 0 fires
-- the table's own triggers, which would run as the installer), and it
-- only ever re-attaches fence's triggers.
DO $repair$
DECLARE
    r record;
    impl text;
    have_c constant boolean := pg_catalog.to_regprocedure('fence.c_guard()') IS NOT NULL;
BEGIN
    INSERT INTO fence.tables (tbl, col, mode, implementation)
    SELECT p.tbl, p.col, p.mode, p.implementation FROM fence.protected p
    WHERE p.implementation IN ('plpgsql', 'c')
    ON CONFLICT (tbl) DO NOTHING;
    FOR r IN
        SELECT m.tbl, m.col, c.relkind = 'r' AND c.relnamespace <> 'fence'::regnamespace AS ordinary
        FROM fence.token_columns m
        JOIN pg_catalog.pg_class c ON c.oid = m.tbl
        WHERE NOT EXISTS (SELECT 1 FROM fence.tables t WHERE t.tbl = m.tbl)
        ORDER BY m.tbl::text
    LOOP
        IF NOT r.ordinary THEN
            RAISE WARNING 'fence: % carries fence''s token column marker on column % but is not an ordinary table of a schema fence protects: not recorded',
                    r.tbl, pg_catalog.quote_ident(r.col)
                USING HINT = pg_catalog.format('ALTER TABLE %s DROP CONSTRAINT %I', r.tbl, (fence.token_marker(r.col)).conname);
            CONTINUE;
        END IF;
        INSERT INTO fence.tables (tbl, col, mode, implementation)
        VALUES (r.tbl, r.col, 'strict', CASE WHEN have_c THEN 'c' ELSE 'plpgsql' END);
        RAISE WARNING 'fence: % carries fence''s token column marker (column %) but was not recorded (restored alone, or copied with LIKE ... INCLUDING CONSTRAINTS): recorded, strict, to be protected again',
                r.tbl, pg_catalog.quote_ident(r.col)
            USING HINT = pg_catalog.format('If it was permissive: SELECT fence.set_mode(%L, ''permissive'');  if it should not be protected: SELECT fence.unprotect(%L);',
                                           r.tbl::text, r.tbl::text);
    END LOOP;
    FOR r IN
        SELECT t.tbl, t.col FROM fence.tables t
        WHERE fence.plain_token_column(t.tbl, t.col) AND NOT fence.is_token_column(t.tbl, t.col)
        ORDER BY t.tbl::text
    LOOP
        BEGIN
            PERFORM fence.mark_token_column(r.tbl, r.col);
        EXCEPTION WHEN insufficient_privilege OR invalid_parameter_value THEN
            RAISE WARNING 'fence: cannot put fence''s token column marker on column % of %: %',
                    pg_catalog.quote_ident(r.col), r.tbl, SQLERRM
                USING HINT = pg_catalog.format('Run this script as a superuser or as the owner of %s, or as its owner: SELECT fence.protect(%L, %L);',
                                               r.tbl::text, r.tbl::text, r.col);
        END;
    END LOOP;
    FOR r IN
        SELECT v.tbl, v.col, v.mode, v.implementation,
               pg_catalog.string_agg(v.reason, '; ' ORDER BY v.reason) AS reasons
        FROM fence.verify() v
        WHERE v.mode IS NOT NULL  -- the recorded tables (not the privilege policy)
        GROUP BY 1, 2, 3, 4
        ORDER BY v.tbl::text
    LOOP
        impl := r.implementation;
        IF impl = 'c' AND NOT have_c THEN
            impl := 'plpgsql';
        END IF;
        IF NOT fence.plain_token_column(r.tbl, r.col) THEN
            RAISE WARNING 'fence: % is not guarded as fence.protect() left it (%), and its token column % is no longer the bigint NOT NULL column it was (renamed, dropped or changed since): not protected again',
                    r.tbl, r.reasons, pg_catalog.quote_ident(r.col)
                USING HINT = pg_catalog.format('Its owner may protect it again: SELECT fence.protect(%L, <its token column>);',
                                               r.tbl::text);
            CONTINUE;
        END IF;
        BEGIN
            PERFORM fence.protect(r.tbl, r.col, r.mode = 'permissive', impl);
        EXCEPTION WHEN insufficient_privilege OR invalid_parameter_value THEN
            RAISE WARNING 'fence: % is not guarded as fence.protect() left it (%), and this install cannot protect it again: %',
                    r.tbl, r.reasons, SQLERRM
                USING HINT = pg_catalog.format('Run this script as a superuser or as the owner of %s, or as its owner: SELECT fence.protect(%L, %L, %s, %L);',
                                               r.tbl::text, r.tbl::text, r.col, r.mode = 'permissive', impl);
            CONTINUE;
        END;
        IF impl = r.implementation THEN
            RAISE WARNING 'fence: % was not guarded as fence.protect() left it (%): protected again (column %, %, %)',
                    r.tbl, r.reasons, pg_catalog.quote_ident(r.col), r.mode, impl;
        ELSE
            RAISE WARNING 'fence: % was not guarded as fence.protect() left it (%): protected again with the portable guard (column %, %, plpgsql): it was protected ''c'', and the C extension is not installed in this database',
                    r.tbl, r.reasons, pg_catalog.quote_ident(r.col), r.mode
                USING HINT = 'CREATE EXTENSION fence (a superuser), then SELECT fence.protect(<table>, <column>, <permissive>, ''c''), to use the C guard again.';
        END IF;
    END LOOP;
END
$repair$;

-- fence.token, fence.holder or fence.xact set for whole sessions by ALTER
-- ROLE / ALTER DATABASE ... SET (or left in the installing session): no
-- guard admits such a value (it was not given to the writing transaction
-- by fence.use_token()), so every fenced write of those sessions that
-- forgets use_token() is refused; say so once, here.
DO $session$
DECLARE
    s record;
BEGIN
    FOR s IN
        SELECT CASE WHEN d.setrole = 0 THEN 'every role' ELSE 'role ' || pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(d.setrole)) END
               || CASE WHEN d.setdatabase = 0 THEN ' in every database'
                       ELSE ' in database ' || pg_catalog.quote_ident(db.datname) END AS who,
               pg_catalog.split_part(cfg, '=', 1) AS name
        FROM pg_catalog.pg_db_role_setting d
        LEFT JOIN pg_catalog.pg_database db ON db.oid = d.setdatabase,
             pg_catalog.unnest(d.setconfig) cfg
        WHERE cfg ~ '^fence\.(token|holder|xact)='
        ORDER BY 1, 2
    LOOP
        RAISE WARNING 'fence: % is set for % (ALTER ROLE/DATABASE ... SET): no guard admits it',
                s.name, s.who
            USING HINT = 'Remove it (ALTER ROLE/DATABASE ... RESET): give each writing transaction its token with SELECT fence.use_token(<token>).';
    END LOOP;
    IF COALESCE(pg_catalog.current_setting('fence.token', true), '') <> '' THEN
        RAISE WARNING 'fence: fence.token is set for this whole session (%): no guard admits it',
                pg_catalog.quote_literal(pg_catalog.left(pg_catalog.current_setting('fence.token', true), 40))
            USING HINT = 'RESET fence.token; give each writing transaction its token with SELECT fence.use_token(<token>).';
    END IF;
END
$session$;

COMMIT;
