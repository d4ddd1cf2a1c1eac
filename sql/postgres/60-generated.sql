-- 60-generated.sql -- part of fence.sql: what fence keeps per table: fence.refuse_schema(), the registries fence.generated and fence.tables, fence's token column marker, fence.generate(), fence.drop_orphans().
-- The parts are joined in name order into $(B)/sql/postgres/fence.sql
-- (lib/pg/module.mk), the one script that psql -f, fence_pg_install()
-- and make install use; it runs as one transaction (BEGIN in
-- 10-schema.sql, COMMIT in 90-upgrade.sql).  See docs/postgres.md.

-- Refuse (22023) to protect a table of a schema fence must never guard:
-- its own (a guard on fence.marks would make every fence.advance without a
-- token fail), and the system's.
CREATE OR REPLACE FUNCTION fence.refuse_schema(tbl regclass) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    nsp name;
BEGIN
    SELECT n.nspname INTO nsp FROM pg_catalog.pg_class c
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tbl;
    IF nsp IN ('fence', 'pg_catalog', 'information_schema') OR nsp LIKE 'pg\_toast%' THEN
        RAISE EXCEPTION 'fence: % is in schema %: fence never protects the tables of schemas fence, pg_catalog, information_schema and pg_toast',
                tbl, pg_catalog.quote_ident(nsp)
            USING ERRCODE = '22023';
    END IF;
END
$$;
GRANT EXECUTE ON FUNCTION fence.refuse_schema(regclass) TO PUBLIC;

-- What each generated function pair bakes in: guard function FN (its check
-- is 'check_' || substr(fn, 7)), the table it was generated for, its token
-- column and mode.  Written only by SECURITY DEFINER code (generate(),
-- drop_orphans(), through write_functions) and by this script; nobody
-- else may write it (the install refuses such grants).  The install's
-- refresh and fence.protected read column and mode from here, never from
-- trigger arguments (any table owner may attach a generated function to
-- its own table with any arguments).  The table is a regclass, which
-- pg_dump writes as its name: a restore into another cluster, where the
-- table gets another oid, keeps the row pointing at it.
CREATE TABLE IF NOT EXISTS fence.generated (
    fn name PRIMARY KEY,
    tbl regclass NOT NULL,
    col name NOT NULL,
    mode text NOT NULL CONSTRAINT generated_mode_check
        CHECK (mode OPERATOR(pg_catalog.=) 'strict' OR mode OPERATOR(pg_catalog.=) 'permissive')
);
REVOKE ALL ON fence.generated FROM PUBLIC;

-- Earlier installs kept the table as a raw oid, which a dump keeps as a
-- number: restored into another cluster it names no table, or another
-- relation.  Converted in place (the oids of this database stay right);
-- a row whose table does not call its function while exactly one table's
-- zz_fence_guard_upd does -- a database restored from such a dump -- is
-- pointed at that table.  fence.protected reads the column: it is
-- emptied for the conversion (its real body comes below, in this same
-- transaction).
DO $generated$
DECLARE
    cols text;
BEGIN
    IF (SELECT a.atttypid FROM pg_catalog.pg_attribute a
        WHERE a.attrelid = 'fence.generated'::regclass AND a.attname = 'tbl') = 'pg_catalog.oid'::regtype THEN
        -- (Its columns as they are, types and collations: CREATE OR
        -- REPLACE VIEW keeps them.  The event trigger reads the view on
        -- the ALTER TABLE below.)
        SELECT pg_catalog.string_agg(pg_catalog.format('NULL::%s%s AS %I',
                                                       pg_catalog.format_type(a.atttypid, a.atttypmod),
                                                       CASE WHEN a.attcollation <> 0
                                                            THEN ' COLLATE ' || a.attcollation::regcollation::text END,
                                                       a.attname),
                                     ', ' ORDER BY a.attnum)
        INTO cols
        FROM pg_catalog.pg_attribute a
        WHERE a.attrelid = pg_catalog.to_regclass('fence.protected') AND a.attnum > 0 AND NOT a.attisdropped;
        IF cols IS NOT NULL THEN
            EXECUTE pg_catalog.format('CREATE OR REPLACE VIEW fence.protected AS SELECT %s WHERE false', cols);
        END IF;
        ALTER TABLE fence.generated ALTER COLUMN tbl TYPE regclass USING tbl::regclass;
        UPDATE fence.generated g SET tbl = u.tgrelid
        FROM (SELECT p.proname, pg_catalog.min(t.tgrelid) AS tgrelid
              FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_proc p ON p.oid = t.tgfoid
              WHERE t.tgname = 'zz_fence_guard_upd' AND p.pronamespace = 'fence'::regnamespace
              GROUP BY p.proname HAVING pg_catalog.count(DISTINCT t.tgrelid) = 1) u
        WHERE u.proname = g.fn
          AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_proc p ON p.oid = t.tgfoid
                          WHERE t.tgrelid = g.tbl AND p.pronamespace = 'fence'::regnamespace AND p.proname = g.fn);
    END IF;
END
$generated$;

-- The tables fence protects, as fence.protect() left them: table, token
-- column, mode and implementation ('plpgsql' or 'c').  Written by
-- fence.record_table() (which protect(), move_guard(), set_mode() and
-- unprotect() call), pruned of dropped tables (fence.drop_orphans(), the
-- event trigger fence_dropped_tables), and by this script.  It is what
-- should be guarded -- fence.protected is what is guarded now, and
-- fence.verify() the difference -- so that a table whose guard is lost
-- (restored where the C extension is missing, triggers dropped or
-- disabled) is never silently unguarded: the install protects it again.
-- The table is a regclass, written by pg_dump as its name.  Readable by
-- everyone (fence.verify() reads it with the caller's rights), written by
-- nobody else (the install refuses such grants).
CREATE TABLE IF NOT EXISTS fence.tables (
    tbl regclass PRIMARY KEY,
    col name NOT NULL,
    mode text NOT NULL CONSTRAINT tables_mode_check
        CHECK (mode OPERATOR(pg_catalog.=) 'strict' OR mode OPERATOR(pg_catalog.=) 'permissive'),
    implementation text NOT NULL CONSTRAINT tables_implementation_check
        CHECK (implementation OPERATOR(pg_catalog.=) 'plpgsql' OR implementation OPERATOR(pg_catalog.=) 'c')
);
REVOKE ALL ON fence.tables FROM PUBLIC;
GRANT SELECT ON fence.tables TO PUBLIC;

-- fence's token column marker, defined here once: on a table, the CHECK
-- constraint fence_token_column whose expression is exactly
-- ("<column>" IS NOT NULL), validated.  fence.protect() puts it on the
-- table's token column (fence.mark_token_column()), unprotect() takes it
-- off.  It is part of the table's own definition, so it travels with the
-- table wherever the table goes: pg_dump writes a validated CHECK inside
-- CREATE TABLE, with or without --no-comments, and pg_restore -t / pg_dump
-- -t (which leave out the triggers, fence.tables and fence.generated)
-- bring it back.  fence.verify() reports a table that carries it but is not
-- recorded (and a recorded one whose column lacks it); the install
-- protects the first again (strict, the default implementation).  It
-- follows the column (the constraint names it by number): a rename keeps
-- it, DROP COLUMN drops it.  It refuses nothing NOT NULL does not already
-- refuse.  fence.token_marker(col) is its definition, as pg_get_constraintdef()
-- writes it: the name and the text after it (NULL for a NULL column).
CREATE OR REPLACE FUNCTION fence.token_marker(col name, OUT conname name, OUT condef text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT 'fence_token_column'::name, pg_catalog.format('CHECK ((%s IS NOT NULL))', pg_catalog.quote_ident(col)) $$;
GRANT EXECUTE ON FUNCTION fence.token_marker(name) TO PUBLIC;

-- Every column that carries the marker: table, column, the constraint's
-- oid.  At most one per table (a constraint name is unique per table).
CREATE OR REPLACE VIEW fence.token_columns AS
SELECT c.conrelid::regclass AS tbl, a.attname AS col, c.oid AS conoid
FROM pg_catalog.pg_constraint c
JOIN pg_catalog.pg_attribute a
  ON a.attrelid OPERATOR(pg_catalog.=) c.conrelid AND a.attnum OPERATOR(pg_catalog.=) c.conkey[1]
 AND NOT a.attisdropped,
     LATERAL fence.token_marker(a.attname) m
WHERE c.contype OPERATOR(pg_catalog.=) 'c' AND c.convalidated AND c.conrelid OPERATOR(pg_catalog.<>) 0
  AND pg_catalog.cardinality(c.conkey) OPERATOR(pg_catalog.=) 1
  AND c.conname OPERATOR(pg_catalog.=) (fence.token_marker(NULL)).conname  -- a constant: the index
  AND pg_catalog.pg_get_constraintdef(c.oid) OPERATOR(pg_catalog.=) m.condef;
REVOKE ALL ON fence.token_columns FROM PUBLIC;
GRANT SELECT ON fence.token_columns TO PUBLIC;

-- Whether COL is TBL's token column by fence's marker: true exactly when
-- TBL has a validated CHECK constraint named fence_token_column over the
-- one column COL whose definition is fence.token_marker(COL) -- whoever
-- made it (mark_token_column(), a restore, CREATE TABLE ... LIKE, by hand)
-- and whether TBL's own or inherited from a parent; false for anything
-- else (NOT VALID, NO INHERIT, another expression or name), for NULLs, and
-- for a table or column that does not exist.  Only the catalogs are read;
-- it takes no lock.  What protect() and the install recognise fence's own
-- token column by.
CREATE OR REPLACE FUNCTION fence.is_token_column(tbl regclass, col name) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT 1 FROM fence.token_columns t
                   WHERE t.tbl = is_token_column.tbl AND t.col = is_token_column.col)
$$;
GRANT EXECUTE ON FUNCTION fence.is_token_column(regclass, name) TO PUBLIC;

-- Make COL the one column of TBL that carries the marker (COL NULL: none
-- does): drops a constraint of the marker's name that is not the marker on
-- COL, adds the marker when missing (validated: one scan of the table,
-- under its ACCESS EXCLUSIVE lock).  With the caller's rights: only TBL's
-- owner may (42501 from ALTER TABLE).  22023 for a NULL table, a table of
-- a schema fence never protects, a relation that is not an ordinary table
-- (fence protects no other; a partitioned table's marker would pass to
-- every partition), or a column TBL does not have.
CREATE OR REPLACE FUNCTION fence.mark_token_column(tbl regclass, col name) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m record;
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'fence: mark_token_column: table is NULL' USING ERRCODE = '22023';
    END IF;
    PERFORM fence.refuse_schema(tbl);
    IF (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid = tbl) IS DISTINCT FROM 'r' THEN
        RAISE EXCEPTION 'fence: mark_token_column: % is not an ordinary table', tbl
            USING ERRCODE = '22023';
    END IF;
    IF col IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                                       WHERE a.attrelid = tbl AND a.attname = col
                                         AND a.attnum > 0 AND NOT a.attisdropped) THEN
        RAISE EXCEPTION 'fence: mark_token_column: % has no column %', tbl, pg_catalog.quote_ident(col)
            USING ERRCODE = '22023';
    END IF;
    IF col IS NOT NULL AND fence.is_token_column(tbl, col) THEN
        RETURN;
    END IF;
    m := fence.token_marker(col);
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_constraint c WHERE c.conrelid = tbl AND c.conname = m.conname) THEN
        EXECUTE pg_catalog.format('ALTER TABLE %s DROP CONSTRAINT %I', tbl, m.conname);
    END IF;
    IF col IS NOT NULL THEN
        EXECUTE pg_catalog.format('ALTER TABLE %s ADD CONSTRAINT %I %s', tbl, m.conname, m.condef);
    END IF;
END
$$;
GRANT EXECUTE ON FUNCTION fence.mark_token_column(regclass, name) TO PUBLIC;

-- Functions generated before the registry existed: registered from what
-- the installer alone wrote (their COMMENT: column and mode) when the
-- table whose oid they are named after calls them; the others are left
-- unregistered (not refreshed, not listed in fence.protected: run
-- fence.protect() on their table again).
INSERT INTO fence.generated (fn, tbl, col, mode)
SELECT p.proname, t.tgrelid, x.col, x.m[2]
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_trigger t
  ON t.tgfoid OPERATOR(pg_catalog.=) p.oid AND t.tgname OPERATOR(pg_catalog.=) 'zz_fence_guard_upd'
 AND t.tgrelid::pg_catalog.text OPERATOR(pg_catalog.=) (pg_catalog.regexp_match(p.proname, '^guard_([0-9]+)'))[1],
     LATERAL (SELECT pg_catalog.regexp_match(pg_catalog.obj_description(p.oid, 'pg_proc'),
                  '^fence: BEFORE row guard of .*, column ("(?:[^"]|"")*"|[^",]+), (strict|permissive) \(generated by fence\.protect\)$') AS m) r,
     LATERAL (SELECT r.m, CASE WHEN pg_catalog.left(r.m[1], 1) OPERATOR(pg_catalog.=) '"'
                               THEN pg_catalog.replace(pg_catalog.substr(r.m[1], 2, pg_catalog.length(r.m[1]) OPERATOR(pg_catalog.-) 2), '""', '"')
                               ELSE r.m[1] END::name AS col) x
WHERE p.pronamespace OPERATOR(pg_catalog.=) 'fence'::regnamespace
  AND p.proname OPERATOR(pg_catalog.~) '^guard_[0-9]+(_[0-9]+)?$'
  AND r.m IS NOT NULL
ON CONFLICT (fn) DO NOTHING;

-- Write (CREATE OR REPLACE) TBL's guard and check functions, named GNAME
-- and CNAME in schema fence, from the templates, for token column COL and
-- the mode.  Internal: generate() calls it after its checks, and the
-- install re-writes the functions of every table protected 'plpgsql', so
-- that a newer template reaches them.
CREATE OR REPLACE FUNCTION fence.write_functions(tbl regclass, col name, permissive boolean,
                                                 gname text, cname text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- Always quoted: format('%I') leaves a non-reserved SQL keyword bare,
    -- and PL/pgSQL reads some of those (by, alias, ...) as its own keywords
    -- after "OLD.", so OLD.by is not the column.
    qcol text := '"' OPERATOR(pg_catalog.||) pg_catalog.replace(col, '"', '""') OPERATOR(pg_catalog.||) '"';
BEGIN
    EXECUTE pg_catalog.format('CREATE OR REPLACE FUNCTION fence.%I() RETURNS trigger LANGUAGE plpgsql AS %L',
                              gname, pg_catalog.format(fence.guard_template(), qcol, col, CASE WHEN permissive THEN 'true' ELSE 'false' END));
    EXECUTE pg_catalog.format('CREATE OR REPLACE FUNCTION fence.%I() RETURNS trigger LANGUAGE plpgsql AS %L',
                              cname, pg_catalog.format(fence.check_template(), qcol, col, CASE WHEN permissive THEN 'true' ELSE 'false' END));
    EXECUTE pg_catalog.format('COMMENT ON FUNCTION fence.%I() IS %L', gname,
                              pg_catalog.format('fence: BEFORE row guard of %s, column %I, %s (generated by fence.protect)',
                                                tbl, col, CASE WHEN permissive THEN 'permissive' ELSE 'strict' END));
    EXECUTE pg_catalog.format('COMMENT ON FUNCTION fence.%I() IS %L', cname,
                              pg_catalog.format('fence: AFTER row check of %s, column %I, %s (generated by fence.protect)',
                                                tbl, col, CASE WHEN permissive THEN 'permissive' ELSE 'strict' END));
    -- Trigger functions cannot be called directly; any table owner's
    -- CREATE TRIGGER needs EXECUTE.
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION fence.%I() TO PUBLIC', gname);
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION fence.%I() TO PUBLIC', cname);
    -- What they bake in, for generate() and the install to compare with.
    INSERT INTO fence.generated AS g (fn, tbl, col, mode)
    VALUES (gname, tbl, col, CASE WHEN permissive THEN 'permissive' ELSE 'strict' END)
    ON CONFLICT (fn) DO UPDATE SET tbl = EXCLUDED.tbl, col = EXCLUDED.col, mode = EXCLUDED.mode;
END
$$;
REVOKE ALL ON FUNCTION fence.write_functions(regclass, name, boolean, text, text) FROM PUBLIC;

-- Generate (or replace) TBL's guard and check functions for token column
-- COL and mode: fence.guard_<oid>() and fence.check_<oid>() (a suffix
-- _<n> when that name is taken by another table's triggers, e.g. after a
-- restore reused an oid).  Returns their quoted, qualified names.  SECURITY
-- DEFINER because only the installer may create functions in schema fence;
-- it takes no code, only a table, a column name (quoted with %I/%L) and a
-- mode.  It never changes what a function in use does: it creates the
-- pair when absent, replaces it when fence.generated records exactly this
-- table, column and mode (an idempotent refresh), or when no trigger uses
-- either function; anything else is refused (42501).  So whoever calls it
-- -- in whatever context: another role's SECURITY DEFINER function, an
-- index expression run by ANALYZE, VACUUM, CREATE INDEX or REFRESH as the
-- table's owner while session_user is someone else -- cannot change a
-- protected table's column or mode.  fence.protect() drops the table's
-- triggers (which only its owner may) before calling it, which is how an
-- owner changes column or mode.  It also refuses a session whose
-- session_user may not act as TBL's owner (not the protection, only a
-- first filter).
CREATE OR REPLACE FUNCTION fence.generate(tbl regclass, col name, permissive boolean,
                                          OUT guard_fn text, OUT check_fn text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    owner oid;
    n integer := 0;
    gname text;
    cname text;
    want text := CASE WHEN permissive THEN 'permissive' ELSE 'strict' END;
    reg record;
BEGIN
    IF tbl IS NULL OR col IS NULL OR col = '' OR permissive IS NULL THEN
        RAISE EXCEPTION 'fence: generate: table, column and mode must not be NULL or empty'
            USING ERRCODE = '22023';
    END IF;
    SELECT c.relowner INTO owner FROM pg_catalog.pg_class c WHERE c.oid = tbl AND c.relkind = 'r';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fence: % is not an ordinary table', tbl USING ERRCODE = '22023';
    END IF;
    PERFORM fence.refuse_schema(tbl);
    IF NOT pg_catalog.pg_has_role(session_user, owner, 'MEMBER') THEN
        RAISE EXCEPTION 'fence: only the owner of % may generate its trigger functions', tbl
            USING ERRCODE = '42501';
    END IF;
    -- One generate() at a time: the checks below hold until commit.
    LOCK TABLE fence.generated IN SHARE ROW EXCLUSIVE MODE;
    LOOP
        gname := 'guard_' || tbl::oid || CASE WHEN n > 0 THEN '_' || n ELSE '' END;
        cname := 'check_' || tbl::oid || CASE WHEN n > 0 THEN '_' || n ELSE '' END;
        EXIT WHEN NOT EXISTS (
            SELECT 1 FROM pg_catalog.pg_trigger t
            JOIN pg_catalog.pg_proc p ON p.oid = t.tgfoid
            WHERE p.pronamespace = 'fence'::regnamespace AND p.proname IN (gname, cname)
              AND t.tgrelid <> tbl);
        n := n + 1;
    END LOOP;
    -- Never change what a function in use does.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
               WHERE p.pronamespace = 'fence'::regnamespace AND p.proname IN (gname, cname)) THEN
        SELECT g.tbl, g.col, g.mode INTO reg FROM fence.generated g WHERE g.fn = gname;
        IF NOT (FOUND AND reg.tbl = tbl::oid AND reg.col = col AND reg.mode = want)
           AND EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t
                       JOIN pg_catalog.pg_proc p ON p.oid = t.tgfoid
                       WHERE p.pronamespace = 'fence'::regnamespace AND p.proname IN (gname, cname)) THEN
            RAISE EXCEPTION 'fence: generate: fence.%() is in use by triggers with another column or mode; refusing to change it',
                    gname
                USING ERRCODE = '42501',
                      HINT = pg_catalog.format('Only fence.protect() by the owner of %s (which drops its triggers first) changes its column or mode.', tbl);
        END IF;
    END IF;
    PERFORM fence.write_functions(tbl, col, permissive, gname, cname);
    guard_fn := 'fence.' || pg_catalog.quote_ident(gname);
    check_fn := 'fence.' || pg_catalog.quote_ident(cname);
END
$$;
GRANT EXECUTE ON FUNCTION fence.generate(regclass, name, boolean) TO PUBLIC;

-- Drop the generated functions no trigger uses any more (their table was
-- unprotected, dropped, or protected by another implementation): a pair
-- guard_X / check_X when neither is used; and forget, in fence.generated
-- and fence.tables, what no longer exists.  Anyone may run it: it drops
-- nothing in use.
CREATE OR REPLACE FUNCTION fence.drop_orphans() RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f regprocedure;
    dropped integer := 0;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'fence'::regnamespace
          AND p.proname ~ '^(guard|check)_[0-9]+(_[0-9]+)?$'
          AND p.prorettype = 'pg_catalog.trigger'::regtype AND p.pronargs = 0
          -- guard_X and check_X go together: both unused
          AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t
                          JOIN pg_catalog.pg_proc q ON q.oid = t.tgfoid
                          WHERE q.pronamespace = p.pronamespace
                            AND q.proname IN ('guard_' || pg_catalog.substr(p.proname, 7),
                                              'check_' || pg_catalog.substr(p.proname, 7)))
    LOOP
        BEGIN
            EXECUTE pg_catalog.format('DROP FUNCTION IF EXISTS %s', f);
            dropped := dropped + 1;
        EXCEPTION WHEN dependent_objects_still_exist OR undefined_function THEN
            NULL;  -- attached or dropped concurrently
        END;
    END LOOP;
    -- The registry keeps only functions that exist, fence.tables only
    -- tables that exist.
    DELETE FROM fence.generated g
    WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
                      WHERE p.pronamespace = 'fence'::regnamespace AND p.proname = g.fn);
    DELETE FROM fence.tables t
    WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid = t.tbl);
    RETURN dropped;
END
$$;
GRANT EXECUTE ON FUNCTION fence.drop_orphans() TO PUBLIC;
