-- 70-protect.sql -- part of fence.sql: protect and unprotect: fence.guards, fence.protected, fence.record_table(), fence.protect(), fence.move_guard(), fence.migrate_version_column(), fence.set_mode(), fence.unprotect().
-- The parts are joined in name order into $(B)/sql/postgres/fence.sql
-- (lib/pg/module.mk), the one script that psql -f, fence_pg_install()
-- and make install use; it runs as one transaction (BEGIN in
-- 10-schema.sql, COMMIT in 90-upgrade.sql).  See docs/postgres.md.

-- Every table whose zz_fence_guard_upd calls fence's guard, with what is
-- not as fence.protect() made it (internal: fence.protected lists the
-- tables with no fault, fence.verify() names the faults).  Token column and
-- mode: for generated functions ('plpgsql') what fence.generated records
-- they bake in, and only on the table they were generated for (a trigger
-- of another table calling them is not listed); for the C and generic
-- guards, which read their trigger's two arguments, those arguments.
-- implementation: 'plpgsql', 'c' (the C extension's fence.c_guard) or
-- 'generic' (version 3's fence.row_guard with WHEN clauses, which the
-- install replaces).  check_needed: a BEFORE row trigger fires after the
-- guard (it could rewrite the token column); check_present: every AFTER
-- check that needs is there and whole (true when none is needed).
-- faults: one text per fault of the guard's triggers, zz_fence_guard_ins,
-- _upd, _del and _truncate, each of which must be exactly what protect()
-- created: there, of its event and timing, for every column (no UPDATE
-- OF), for every row (no WHEN), calling the guard (refuse_truncate()) with
-- the column and mode (none), enabled (or ENABLE ALWAYS), no constraint
-- trigger, no transition tables.  check_faults: the same for the AFTER
-- checks zz_fence_check_ins / _upd that exist (calling the guard's check:
-- check_<n> for guard_<n>, c_check for c_guard).  The generic guard's
-- triggers are not inspected (its WHEN clauses are its own).
CREATE OR REPLACE VIEW fence.guards AS
SELECT t.tgrelid::regclass AS tbl,
       a.col,
       a.mode,
       k.implementation,
       (l.ins OR l.upd) AS check_needed,
       ((NOT l.ins OR x.check_ins) AND (NOT l.upd OR x.check_upd)) AS check_present,
       x.faults,
       x.check_faults
FROM pg_catalog.pg_trigger t,
     -- The trigger's function, one lookup per trigger (OFFSET 0: not
     -- flattened, so the planner never pairs every trigger with every
     -- guard function before matching them).
     LATERAL (SELECT q.oid, q.proname, q.pronamespace FROM pg_catalog.pg_proc q
              WHERE q.oid OPERATOR(pg_catalog.=) t.tgfoid
                AND q.pronamespace OPERATOR(pg_catalog.=) 'fence'::regnamespace
                AND (q.proname OPERATOR(pg_catalog.=) ANY ('{row_guard,c_guard}'::pg_catalog.name[])
                     OR q.proname OPERATOR(pg_catalog.~) '^guard_[0-9]+(_[0-9]+)?$')
              OFFSET 0) p,
     LATERAL (SELECT position(pg_catalog.decode('00', 'hex') IN t.tgargs) AS nul) z,
     LATERAL (SELECT g.col, g.mode FROM fence.generated g
              WHERE p.proname OPERATOR(pg_catalog.~) '^guard_'
                AND g.fn OPERATOR(pg_catalog.=) p.proname
                AND g.tbl::pg_catalog.oid OPERATOR(pg_catalog.=) t.tgrelid
              UNION ALL
              SELECT pg_catalog.convert_from(pg_catalog.substring(t.tgargs, 1, z.nul OPERATOR(pg_catalog.-) 1),
                                             pg_catalog.getdatabaseencoding())::name,
                     pg_catalog.convert_from(pg_catalog.substring(t.tgargs, z.nul OPERATOR(pg_catalog.+) 1,
                                               pg_catalog.octet_length(t.tgargs) OPERATOR(pg_catalog.-) z.nul OPERATOR(pg_catalog.-) 1),
                                             pg_catalog.getdatabaseencoding())
              WHERE p.proname OPERATOR(pg_catalog.!~) '^guard_'
                AND t.tgnargs OPERATOR(pg_catalog.=) 2
                AND z.nul OPERATOR(pg_catalog.>) 1
                AND pg_catalog.octet_length(t.tgargs) OPERATOR(pg_catalog.>) (z.nul OPERATOR(pg_catalog.+) 1)) a,
     LATERAL (SELECT CASE p.proname WHEN 'row_guard' THEN 'generic' WHEN 'c_guard' THEN 'c' ELSE 'plpgsql' END AS implementation,
                     (SELECT q.oid FROM pg_catalog.pg_proc q
                      WHERE q.pronamespace OPERATOR(pg_catalog.=) p.pronamespace AND q.pronargs OPERATOR(pg_catalog.=) 0
                        AND q.proname OPERATOR(pg_catalog.=) CASE p.proname WHEN 'c_guard' THEN 'c_check'
                                                                 ELSE 'check_' OPERATOR(pg_catalog.||) pg_catalog.substr(p.proname, 7) END) AS check_fn,
                     pg_catalog.convert_to(a.col, pg_catalog.getdatabaseencoding()) OPERATOR(pg_catalog.||) pg_catalog.decode('00', 'hex')
                     OPERATOR(pg_catalog.||) pg_catalog.convert_to(a.mode, pg_catalog.getdatabaseencoding())
                     OPERATOR(pg_catalog.||) pg_catalog.decode('00', 'hex') AS args) k,
     -- BEFORE row triggers (not INSTEAD OF) that fire after the guard of
     -- INSERT / of UPDATE: name order, byte-wise.  Disabled ones count
     -- too (they can be enabled).
     LATERAL (SELECT COALESCE(pg_catalog.bool_or(b.tgtype::pg_catalog.int4 OPERATOR(pg_catalog.&) 4 OPERATOR(pg_catalog.<>) 0
                                                 AND b.tgname COLLATE pg_catalog."C" OPERATOR(pg_catalog.>) 'zz_fence_guard_ins'), false) AS ins,
                     COALESCE(pg_catalog.bool_or(b.tgtype::pg_catalog.int4 OPERATOR(pg_catalog.&) 16 OPERATOR(pg_catalog.<>) 0
                                                 AND b.tgname COLLATE pg_catalog."C" OPERATOR(pg_catalog.>) 'zz_fence_guard_upd'), false) AS upd
              FROM pg_catalog.pg_trigger b
              WHERE b.tgrelid OPERATOR(pg_catalog.=) t.tgrelid AND NOT b.tgisinternal
                AND b.tgtype::pg_catalog.int4 OPERATOR(pg_catalog.&) 67 OPERATOR(pg_catalog.=) 3
                AND b.tgname OPERATOR(pg_catalog.<>) ALL ('{zz_fence_guard_ins,zz_fence_guard_upd,zz_fence_guard_del}'::pg_catalog.name[])) l,
     -- Each of fence's triggers against what protect() made.
     LATERAL (SELECT COALESCE(pg_catalog.array_agg(f.fault ORDER BY f.fault) FILTER (WHERE e.guard AND f.fault IS NOT NULL),
                              '{}') AS faults,
                     COALESCE(pg_catalog.array_agg(f.fault ORDER BY f.fault) FILTER (WHERE NOT e.guard AND f.fault IS NOT NULL),
                              '{}') AS check_faults,
                     COALESCE(pg_catalog.bool_and(y.oid IS NOT NULL AND f.fault IS NULL)
                                  FILTER (WHERE e.name OPERATOR(pg_catalog.=) 'zz_fence_check_ins'), false) AS check_ins,
                     COALESCE(pg_catalog.bool_and(y.oid IS NOT NULL AND f.fault IS NULL)
                                  FILTER (WHERE e.name OPERATOR(pg_catalog.=) 'zz_fence_check_upd'), false) AS check_upd
              FROM (VALUES ('zz_fence_guard_ins'::pg_catalog.name, true, 7, 'a BEFORE INSERT row trigger', t.tgfoid, k.args),
                           ('zz_fence_guard_upd', true, 19, 'a BEFORE UPDATE row trigger', t.tgfoid, k.args),
                           ('zz_fence_guard_del', true, 11, 'a BEFORE DELETE row trigger', t.tgfoid, k.args),
                           ('zz_fence_guard_truncate', true, 34, 'a BEFORE TRUNCATE statement trigger',
                            'fence.refuse_truncate()'::pg_catalog.regprocedure::pg_catalog.oid, ''::pg_catalog.bytea),
                           ('zz_fence_check_ins', false, 5, 'an AFTER INSERT row trigger', k.check_fn, k.args),
                           ('zz_fence_check_upd', false, 17, 'an AFTER UPDATE row trigger', k.check_fn, k.args))
                   e (name, guard, type, what, fn, args)
              LEFT JOIN pg_catalog.pg_trigger y
                ON y.tgrelid OPERATOR(pg_catalog.=) t.tgrelid AND y.tgname OPERATOR(pg_catalog.=) e.name
              LEFT JOIN LATERAL pg_catalog.unnest(
                  CASE WHEN k.implementation OPERATOR(pg_catalog.=) 'generic' THEN '{}'::pg_catalog.text[]
                       WHEN y.oid IS NULL AND e.guard THEN ARRAY[pg_catalog.format('trigger %s is missing', e.name)]
                       WHEN y.oid IS NULL THEN '{}'::pg_catalog.text[]
                       ELSE pg_catalog.array_remove(ARRAY[
                           CASE WHEN y.tgtype OPERATOR(pg_catalog.<>) e.type
                                THEN pg_catalog.format('trigger %s is not %s', e.name, e.what) END,
                           CASE WHEN pg_catalog.cardinality(y.tgattr::pg_catalog.int2[]) OPERATOR(pg_catalog.>) 0
                                THEN pg_catalog.format('trigger %s fires only on UPDATE OF %s', e.name,
                                         (SELECT pg_catalog.string_agg(pg_catalog.quote_ident(c.attname), ', ' ORDER BY c.attnum)
                                          FROM pg_catalog.pg_attribute c
                                          WHERE c.attrelid OPERATOR(pg_catalog.=) y.tgrelid
                                            AND c.attnum OPERATOR(pg_catalog.=) ANY (y.tgattr::pg_catalog.int2[]))) END,
                           CASE WHEN y.tgqual IS NOT NULL
                                THEN pg_catalog.format('trigger %s fires only %s', e.name,
                                         pg_catalog.substring(pg_catalog.pg_get_triggerdef(y.oid),
                                                              ' (WHEN \(.*\)) EXECUTE (FUNCTION|PROCEDURE) ')) END,
                           CASE WHEN y.tgfoid OPERATOR(pg_catalog.<>) COALESCE(e.fn, 0)
                                THEN pg_catalog.format('trigger %s calls %s, not %s', e.name, y.tgfoid::pg_catalog.regprocedure,
                                                       COALESCE(e.fn::pg_catalog.regprocedure::pg_catalog.text, 'fence''s check')) END,
                           CASE WHEN y.tgargs OPERATOR(pg_catalog.<>) e.args
                                THEN pg_catalog.format('trigger %s is not called with %s', e.name,
                                         CASE WHEN e.args OPERATOR(pg_catalog.=) ''::pg_catalog.bytea THEN 'no arguments'
                                              ELSE pg_catalog.format('(%L, %L)', a.col, a.mode) END) END,
                           CASE y.tgenabled WHEN 'D' THEN pg_catalog.format('trigger %s is disabled', e.name)
                                            WHEN 'R' THEN pg_catalog.format('trigger %s is disabled (ENABLE REPLICA: it fires only in replica mode)', e.name) END,
                           CASE WHEN y.tgconstraint OPERATOR(pg_catalog.<>) 0 OR y.tgdeferrable
                                     OR y.tgoldtable IS NOT NULL OR y.tgnewtable IS NOT NULL
                                THEN pg_catalog.format('trigger %s is a constraint trigger or has transition tables', e.name) END
                       ], NULL) END) f (fault) ON true) x
WHERE t.tgname OPERATOR(pg_catalog.=) 'zz_fence_guard_upd';
REVOKE ALL ON fence.guards FROM PUBLIC;
GRANT SELECT ON fence.guards TO PUBLIC;

-- Protected tables: those of fence.guards whose guard is whole (no fault),
-- with their token column, mode ('strict' or 'permissive'),
-- implementation ('plpgsql', 'c' or 'generic'), check_needed and
-- check_present (see fence.guards).  check_needed AND NOT check_present:
-- re-run fence.protect() on that table.
CREATE OR REPLACE VIEW fence.protected AS
SELECT g.tbl, g.col, g.mode, g.implementation, g.check_needed, g.check_present
FROM fence.guards g
WHERE pg_catalog.cardinality(g.faults) OPERATOR(pg_catalog.=) 0;
REVOKE ALL ON fence.protected FROM PUBLIC;
GRANT SELECT ON fence.protected TO PUBLIC;

-- Record TBL in fence.tables as fence.protected shows it now (column,
-- mode, implementation), or, when none of fence's triggers is left on it
-- (fence.unprotect()), forget it.  A table that has lost only part of its
-- guard stays recorded as it was.  protect(), move_guard(), set_mode()
-- and unprotect() call it with the caller's rights: SECURITY DEFINER,
-- since only the installer may write fence.tables; it records only what
-- the catalogs show, and only for a session that may act as TBL's owner
-- (as fence.generate(); 42501 otherwise).  22023 for NULL or a table that
-- does not exist.
CREATE OR REPLACE FUNCTION fence.record_table(tbl regclass) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    owner oid;
    p record;
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'fence: record_table: table is NULL' USING ERRCODE = '22023';
    END IF;
    SELECT c.relowner INTO owner FROM pg_catalog.pg_class c WHERE c.oid = tbl;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fence: record_table: no relation has oid %', tbl::oid USING ERRCODE = '22023';
    END IF;
    IF NOT pg_catalog.pg_has_role(session_user, owner, 'MEMBER') THEN
        RAISE EXCEPTION 'fence: only the owner of % may record its protection', tbl
            USING ERRCODE = '42501';
    END IF;
    SELECT pr.col, pr.mode, pr.implementation INTO p FROM fence.protected pr WHERE pr.tbl = record_table.tbl;
    IF FOUND THEN
        INSERT INTO fence.tables AS t (tbl, col, mode, implementation)
        VALUES (tbl, p.col, p.mode, p.implementation)
        ON CONFLICT ON CONSTRAINT tables_pkey
        DO UPDATE SET col = EXCLUDED.col, mode = EXCLUDED.mode, implementation = EXCLUDED.implementation;
    ELSIF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t
                      WHERE t.tgrelid = tbl
                        AND t.tgname IN ('zz_fence_guard_ins', 'zz_fence_guard_upd', 'zz_fence_guard_del',
                                         'zz_fence_guard_truncate', 'zz_fence_check_ins', 'zz_fence_check_upd')) THEN
        DELETE FROM fence.tables t WHERE t.tbl = record_table.tbl;
    END IF;
END
$$;
GRANT EXECUTE ON FUNCTION fence.record_table(regclass) TO PUBLIC;

-- Attach TBL's AFTER checks (zz_fence_check_ins / _upd) where a BEFORE row
-- trigger fires after its guard and the check is missing; never removes
-- one (protect() starts afresh).  Runs with the caller's rights (the
-- table's owner in protect(), the installer in the event trigger below).
CREATE OR REPLACE FUNCTION fence.add_checks(tbl regclass) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p record;
    fn text;
    need_ins boolean;
    need_upd boolean;
BEGIN
    SELECT pr.col, pr.mode, pr.implementation, g.proname INTO p
    FROM fence.protected pr
    JOIN pg_catalog.pg_trigger t ON t.tgrelid = pr.tbl AND t.tgname = 'zz_fence_guard_upd'
    JOIN pg_catalog.pg_proc g ON g.oid = t.tgfoid
    WHERE pr.tbl = add_checks.tbl;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    fn := CASE p.implementation
              WHEN 'c' THEN 'fence.c_check'
              ELSE 'fence.' || pg_catalog.quote_ident(pg_catalog.regexp_replace(p.proname, '^guard_', 'check_'))
          END;
    SELECT pg_catalog.bool_or(b.tgtype::integer & 4 <> 0 AND b.tgname COLLATE "C" > 'zz_fence_guard_ins'),
           pg_catalog.bool_or(b.tgtype::integer & 16 <> 0 AND b.tgname COLLATE "C" > 'zz_fence_guard_upd')
    INTO need_ins, need_upd
    FROM pg_catalog.pg_trigger b
    WHERE b.tgrelid = tbl AND NOT b.tgisinternal AND b.tgtype::integer & 67 = 3
      AND b.tgname NOT IN ('zz_fence_guard_ins', 'zz_fence_guard_upd', 'zz_fence_guard_del');
    -- Each existence test right before its CREATE: the CREATE fires the
    -- event trigger, which may have added the other one.
    IF need_ins AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t
                                WHERE t.tgrelid = tbl AND t.tgname = 'zz_fence_check_ins') THEN
        EXECUTE pg_catalog.format('CREATE TRIGGER zz_fence_check_ins AFTER INSERT ON %s FOR EACH ROW EXECUTE FUNCTION %s(%L, %L)',
                                  tbl, fn, p.col, p.mode);
    END IF;
    IF need_upd AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t
                                WHERE t.tgrelid = tbl AND t.tgname = 'zz_fence_check_upd') THEN
        EXECUTE pg_catalog.format('CREATE TRIGGER zz_fence_check_upd AFTER UPDATE ON %s FOR EACH ROW EXECUTE FUNCTION %s(%L, %L)',
                                  tbl, fn, p.col, p.mode);
    END IF;
END
$$;
GRANT EXECUTE ON FUNCTION fence.add_checks(regclass) TO PUBLIC;

-- Drop fence's triggers and token column marker from TBL (no error when
-- there are none) and the generated functions nothing uses any more.
CREATE OR REPLACE FUNCTION fence.unprotect(tbl regclass) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    trig text;
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'fence: unprotect: table is NULL' USING ERRCODE = '22023';
    END IF;
    FOR trig IN
        SELECT t.tgname FROM pg_catalog.pg_trigger t
        WHERE t.tgrelid = tbl
          AND t.tgname IN ('zz_fence_guard_ins', 'zz_fence_guard_upd', 'zz_fence_guard_del',
                           'zz_fence_guard_truncate', 'zz_fence_check_ins', 'zz_fence_check_upd')
    LOOP
        EXECUTE pg_catalog.format('DROP TRIGGER %I ON %s', trig, tbl);
    END LOOP;
    -- Without its marker, or the install would protect it again.
    IF EXISTS (SELECT 1 FROM fence.token_columns t WHERE t.tbl = unprotect.tbl) THEN
        PERFORM fence.mark_token_column(tbl, NULL);
    END IF;
    PERFORM fence.record_table(tbl);
    PERFORM fence.drop_orphans();
END
$$;
REVOKE ALL ON FUNCTION fence.unprotect(regclass) FROM PUBLIC;

-- Protect TBL: add COL (default fence_token), fence's own stamp column,
-- bigint NOT NULL DEFAULT 0 with fence's token column marker
-- (fence.token_marker()), and install the triggers of the chosen
-- implementation: 'c' when the C extension is installed (fence.c_guard()
-- exists), else 'plpgsql'; the four-argument form forces one.  An existing
-- column is refused (22023) unless it is fence's own (see the body): an
-- application's column, e.g. an ORM's version counter, stays the
-- application's.  Run again to change the mode or the implementation, or
-- after renaming the column.  Needs only EXECUTE on this function (and
-- ownership of TBL).  The body is shared by every signature (written once
-- below): the four-argument one is a new function, so that a GRANT on the
-- three-argument one keeps working alone.
DO $protect$
DECLARE
    move_body text;
    body CONSTANT text := $body$
DECLARE
    kind "char";
    att record;
    trig record;
    children text;
    mode text := CASE WHEN permissive THEN 'permissive' ELSE 'strict' END;
    have_c boolean := pg_catalog.to_regprocedure('fence.c_guard()') IS NOT NULL;
    fns record;
    guard_fn text;
    old_col name;
    marked name;
    have_col boolean;
BEGIN
    IF tbl IS NULL OR col IS NULL OR col = '' OR permissive IS NULL THEN
        RAISE EXCEPTION 'fence: protect: table, column and mode must not be NULL or empty'
            USING ERRCODE = '22023';
    END IF;
    IF use_impl IS NULL THEN
        use_impl := CASE WHEN have_c THEN 'c' ELSE 'plpgsql' END;
    ELSIF use_impl NOT IN ('c', 'plpgsql') THEN
        RAISE EXCEPTION 'fence: protect: implementation must be ''c'' or ''plpgsql'', got %',
                COALESCE(pg_catalog.quote_literal(use_impl), 'NULL')
            USING ERRCODE = '22023';
    ELSIF use_impl = 'c' AND NOT have_c THEN
        RAISE EXCEPTION 'fence: protect: implementation ''c'' needs the C extension (CREATE EXTENSION fence), which is not installed in this database'
            USING ERRCODE = '22023';
    END IF;
    PERFORM fence.refuse_schema(tbl);
    SELECT c.relkind INTO kind FROM pg_catalog.pg_class c WHERE c.oid = tbl;
    IF kind IS DISTINCT FROM 'r' THEN
        RAISE EXCEPTION 'fence: % is not an ordinary table (partitioned tables, views and foreign tables are not supported; protect each partition)', tbl
            USING ERRCODE = '22023';
    END IF;
    -- Fails unless the caller may change the table; holds it until commit
    -- (so no child can be attached while we look).
    EXECUTE pg_catalog.format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', tbl);
    -- Row triggers fire on the table a row is in: writes through TBL to
    -- its children's rows would not be checked.
    SELECT pg_catalog.string_agg(i.inhrelid::regclass::text, ', ' ORDER BY i.inhrelid::regclass::text)
    INTO children FROM pg_catalog.pg_inherits i WHERE i.inhparent = tbl;
    IF children IS NOT NULL THEN
        RAISE EXCEPTION 'fence: % has inheritance children (%): fencing covers only the rows of the protected table itself, so writes through % to its children''s rows would go unchecked',
                tbl, children, tbl
            USING ERRCODE = '22023',
                  HINT = 'Protect each child table instead, and do not write through the parent.';
    END IF;
    -- A protected table keeps its token column: a new one would start at
    -- 0 (or whatever it held) and admit tokens older than the stamps.
    -- move_guard() moves it on purpose, carrying every stamp over.
    -- (A column renamed since is the same column: only a token column
    -- that still exists under its recorded name counts.  fence.guards:
    -- also while the guard is not whole.)
    SELECT p.col INTO old_col FROM fence.guards p WHERE p.tbl = protect_tbl
       AND EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                   WHERE a.attrelid = protect_tbl AND a.attname = p.col AND a.attnum > 0 AND NOT a.attisdropped);
    IF move THEN
        IF old_col IS NULL THEN
            RAISE EXCEPTION 'fence: %: % is not protected (use fence.protect())', fn, tbl USING ERRCODE = '22023';
        ELSIF old_col = col THEN
            RAISE EXCEPTION 'fence: %: % is already guarded by column %', fn, tbl, pg_catalog.quote_ident(col)
                USING ERRCODE = '22023';
        END IF;
    ELSIF old_col IS NOT NULL AND old_col <> col THEN
        RAISE EXCEPTION 'fence: % is protected with token column %; refusing to guard it by column % instead (its stamps would be lost and older tokens admitted)',
                tbl, pg_catalog.quote_ident(old_col), pg_catalog.quote_ident(col)
            USING ERRCODE = '22023',
                  HINT = pg_catalog.format('If %s is an application''s or ORM''s version column that an older fence took over (fence.protect(%L, %L)), give it back: SELECT fence.migrate_version_column(%L);  it moves fencing to a column of fence''s own, fence_token, carrying every row''s stamp over.  To move the guard to another column on purpose: SELECT fence.move_guard(%L, %L).',
                                           pg_catalog.quote_ident(old_col), tbl::text, old_col, tbl::text, tbl::text, col);
    END IF;

    -- The token column is fence's own, never an application's: fence
    -- overwrites it on every write, so an ORM's version counter
    -- (SQLAlchemy's version_id_col, ActiveRecord's lock_version) would
    -- lose its meaning.  An existing column is fence's own when
    --   it carries fence's token column marker (fence.is_token_column(),
    --     defined once by fence.token_marker()), which protect() puts on
    --     the column it guards by and which travels with the table;
    --   or fence guards the table with it now (fence.guards: also a guard
    --     that is not whole; the columns of versions before 6 get the
    --     marker below, and from the install);
    --   or it is named fence_token, the column protect() adds by default
    --     (one unprotect() left behind, without its marker, with its
    --     stamps).
    -- Anything else is the application's, and refused.
    SELECT t.col INTO marked FROM fence.token_columns t WHERE t.tbl = protect_tbl;
    SELECT a.atttypid, a.attnotnull, a.attidentity, a.attgenerated INTO att
    FROM pg_catalog.pg_attribute a
    WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
    have_col := FOUND;
    IF have_col AND NOT fence.is_token_column(tbl, col) AND col IS DISTINCT FROM old_col AND col <> 'fence_token' THEN
        RAISE EXCEPTION 'fence: column % of % is not fence''s token column: fence stamps a column of its own and never takes over an existing one (an ORM''s version column such as lock_version would lose its meaning)',
                pg_catalog.quote_ident(col), tbl
            USING ERRCODE = '22023',
                  HINT = CASE WHEN move
                              THEN pg_catalog.format('Name a new column, which fence adds: SELECT fence.%s(%L, ''<new column>'').', fn, tbl::text)
                              ELSE pg_catalog.format('Let fence add its own column beside the application''s: SELECT fence.protect(%L).  If %s does hold fence''s stamps (a table an older fence protected), mark it first: SELECT fence.mark_token_column(%L, %L).',
                                                     tbl::text, pg_catalog.quote_ident(col), tbl::text, col)
                         END;
    END IF;
    IF marked IS NOT NULL AND marked <> col AND col IS DISTINCT FROM old_col AND NOT move THEN
        RAISE EXCEPTION 'fence: % has fence''s token column % (its stamps, kept from an earlier protection); refusing to guard it by column % instead (older tokens would be admitted)',
                tbl, pg_catalog.quote_ident(marked), pg_catalog.quote_ident(col)
            USING ERRCODE = '22023',
                  HINT = pg_catalog.format('Protect it with that column: SELECT fence.protect(%L, %L);  or, to start afresh without its stamps, take its marker off first: SELECT fence.mark_token_column(%L, NULL).',
                                           tbl::text, marked, tbl::text);
    END IF;

    FOR trig IN
        SELECT t.tgname FROM pg_catalog.pg_trigger t
        WHERE t.tgrelid = tbl
          AND t.tgname IN ('zz_fence_guard_ins', 'zz_fence_guard_upd', 'zz_fence_guard_del',
                           'zz_fence_guard_truncate', 'zz_fence_check_ins', 'zz_fence_check_upd')
    LOOP
        EXECUTE pg_catalog.format('DROP TRIGGER %I ON %s', trig.tgname, tbl);
    END LOOP;

    IF NOT have_col THEN
        EXECUTE pg_catalog.format('ALTER TABLE %s ADD COLUMN %I bigint NOT NULL DEFAULT 0', tbl, col);
    ELSE
        -- Fence's own column, as protect() left it (or made so by hand).
        IF att.attidentity <> '' OR att.attgenerated <> '' THEN
            RAISE EXCEPTION 'fence: column % of % is an identity or generated column', pg_catalog.quote_ident(col), tbl
                USING ERRCODE = '22023';
        END IF;
        IF att.atttypid <> 'int8'::regtype THEN
            RAISE EXCEPTION 'fence: column % of % has type %; a token column is a bigint',
                    pg_catalog.quote_ident(col), tbl, att.atttypid::regtype
                USING ERRCODE = '22023',
                      HINT = pg_catalog.format('ALTER TABLE %s ALTER COLUMN %s TYPE bigint, then protect it again.',
                                               tbl, pg_catalog.quote_ident(col));
        END IF;
        IF NOT att.attnotnull THEN
            EXECUTE pg_catalog.format('UPDATE %s SET %I = 0 WHERE %I IS NULL', tbl, col, col);
        END IF;
        EXECUTE pg_catalog.format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT 0, ALTER COLUMN %I SET NOT NULL',
                                  tbl, col, col);
    END IF;
    IF move THEN
        -- Every row keeps at least its stamp (no guard is attached now, and
        -- the table is locked; the table's own triggers do fire).  The old
        -- column keeps its values and is the application's from now on.
        EXECUTE pg_catalog.format('UPDATE %s SET %I = %I WHERE %I OPERATOR(pg_catalog.<) %I',
                                  tbl, col, old_col, col, old_col);
    END IF;
    -- The marker that travels with the table (see fence.token_marker()),
    -- on the token column and on no other (moved: the old column is the
    -- application's now).
    PERFORM fence.mark_token_column(tbl, col);

    IF use_impl = 'plpgsql' THEN
        SELECT * INTO fns FROM fence.generate(tbl, col, permissive);
        guard_fn := fns.guard_fn;
    ELSE
        guard_fn := 'fence.c_guard';
    END IF;
    -- No WHEN clauses: the guard does its own fast path.  The arguments
    -- (column, mode) are what fence.protected shows; the C guard reads
    -- them, the generated functions have them baked in.
    EXECUTE pg_catalog.format('CREATE TRIGGER zz_fence_guard_ins BEFORE INSERT ON %s FOR EACH ROW EXECUTE FUNCTION %s(%L, %L)',
                              tbl, guard_fn, col, mode);
    EXECUTE pg_catalog.format('CREATE TRIGGER zz_fence_guard_upd BEFORE UPDATE ON %s FOR EACH ROW EXECUTE FUNCTION %s(%L, %L)',
                              tbl, guard_fn, col, mode);
    EXECUTE pg_catalog.format('CREATE TRIGGER zz_fence_guard_del BEFORE DELETE ON %s FOR EACH ROW EXECUTE FUNCTION %s(%L, %L)',
                              tbl, guard_fn, col, mode);
    EXECUTE pg_catalog.format('CREATE TRIGGER zz_fence_guard_truncate BEFORE TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION fence.refuse_truncate()',
                              tbl);
    -- The AFTER checks only where a later BEFORE trigger could rewrite the
    -- column: on the hot path of every other table they cost nothing.
    PERFORM fence.add_checks(tbl);
    PERFORM fence.drop_orphans();
    -- What is now guarded is what should be (fence.tables).
    PERFORM fence.record_table(tbl);

    -- What could still undo the check: BEFORE triggers that fire after
    -- fence's guard (name order), and roles other than the owner that may
    -- add such triggers.
    FOR trig IN
        SELECT t.tgname FROM pg_catalog.pg_trigger t
        WHERE t.tgrelid = tbl AND NOT t.tgisinternal
          AND t.tgtype::integer & 67 = 3  -- ROW | BEFORE, not INSTEAD
          AND ((t.tgtype::integer & 4 <> 0 AND t.tgname COLLATE pg_catalog."C" > 'zz_fence_guard_ins')
               OR (t.tgtype::integer & 16 <> 0 AND t.tgname COLLATE pg_catalog."C" > 'zz_fence_guard_upd'))
          AND t.tgname NOT IN ('zz_fence_guard_ins', 'zz_fence_guard_upd')
        ORDER BY 1
    LOOP
        RAISE WARNING 'fence: trigger % on % fires after fence''s check (triggers fire in name order): if it writes %, those writes are refused (23Q03)',
                pg_catalog.quote_ident(trig.tgname), tbl, pg_catalog.quote_ident(col);
    END LOOP;
    FOR trig IN
        SELECT DISTINCT CASE a.grantee WHEN 0 THEN 'PUBLIC'
                        ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END AS who
        FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
        WHERE c.oid = tbl AND a.grantee <> c.relowner AND a.privilege_type = 'TRIGGER'
        ORDER BY 1
    LOOP
        RAISE WARNING 'fence: role % holds TRIGGER on %: it can add triggers that run in every writer''s transaction and switch fencing off (REVOKE TRIGGER ON % FROM %)',
                trig.who, tbl, tbl, trig.who;
    END LOOP;
END
$body$;
BEGIN
    EXECUTE pg_catalog.format(
        'CREATE OR REPLACE FUNCTION fence.protect(tbl regclass, col name DEFAULT %L, permissive boolean DEFAULT false)'
        ' RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS %L',
        'fence_token', 'DECLARE use_impl text := NULL; move constant boolean := false; protect_tbl constant regclass := tbl;'
        ' fn constant text := ''protect'';' || body);
    EXECUTE pg_catalog.format(
        'CREATE OR REPLACE FUNCTION fence.protect(tbl regclass, col name, permissive boolean, impl text)'
        ' RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS %L',
        'DECLARE use_impl text := COALESCE(impl, ''NULL''); move constant boolean := false; protect_tbl constant regclass := tbl;'
        ' fn constant text := ''protect'';' || body);
    -- Move TBL's guard to column COL (added, or fence's own as protect()
    -- requires), keeping its mode and implementation; each row's new
    -- column becomes at least its old stamp, and fence's mark moves with
    -- the guard.  The old column keeps its values and is left to the
    -- application.  Same rights as protect().
    move_body := 'DECLARE protect_tbl constant regclass := tbl; move constant boolean := true;'
        ' permissive boolean := COALESCE((SELECT p.mode = ''permissive'' FROM fence.guards p WHERE p.tbl = protect_tbl), false);'
        ' use_impl text := COALESCE((SELECT p.implementation FROM fence.guards p WHERE p.tbl = protect_tbl), ''plpgsql'');';
    EXECUTE pg_catalog.format(
        'CREATE OR REPLACE FUNCTION fence.move_guard(tbl regclass, col name)'
        ' RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS %L',
        move_body || ' fn constant text := ''move_guard'';' || body);
    -- The migration of a table an older fence retrofitted the way it then
    -- offered, fence.protect('posts', 'lock_version'): its guard (and the
    -- stamps, which that column holds now) moves to a column of fence's
    -- own, COL (default fence_token), in one statement, so that no fencing
    -- is lost; lock_version is the ORM's again (its values stay: as a
    -- counter it only goes on from there).  move_guard() under the name
    -- that says what it is for.
    EXECUTE pg_catalog.format(
        'CREATE OR REPLACE FUNCTION fence.migrate_version_column(tbl regclass, col name DEFAULT %L)'
        ' RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS %L',
        'fence_token', move_body || ' fn constant text := ''migrate_version_column'';' || body);
END
$protect$;
REVOKE ALL ON FUNCTION fence.protect(regclass, name, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.protect(regclass, name, boolean, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.move_guard(regclass, name) FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.migrate_version_column(regclass, name) FROM PUBLIC;

-- Switch a protected table between 'strict' and 'permissive' (migration)
-- mode, keeping its column and implementation.  Calls protect(): needs
-- EXECUTE on both (and on the four-argument protect() when the table's
-- implementation is not the one protect() picks by default).
CREATE OR REPLACE FUNCTION fence.set_mode(tbl regclass, mode text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c name;
    impl text;
    default_impl text;
BEGIN
    IF tbl IS NULL OR mode IS NULL OR mode NOT IN ('strict', 'permissive') THEN
        RAISE EXCEPTION 'fence: set_mode: mode must be ''strict'' or ''permissive'', got %',
                COALESCE(pg_catalog.quote_literal(mode), 'NULL')
            USING ERRCODE = '22023';
    END IF;
    SELECT p.col, p.implementation INTO c, impl FROM fence.protected p WHERE p.tbl = set_mode.tbl;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fence: % is not protected (use fence.protect())', tbl USING ERRCODE = '22023';
    END IF;
    default_impl := 'plpgsql';
    IF pg_catalog.to_regprocedure('fence.c_guard()') IS NOT NULL THEN
        default_impl := 'c';
    END IF;
    IF impl = default_impl THEN
        PERFORM fence.protect(tbl, c, mode = 'permissive');
    ELSE
        PERFORM fence.protect(tbl, c, mode = 'permissive', impl);
    END IF;
END
$$;
REVOKE ALL ON FUNCTION fence.set_mode(regclass, text) FROM PUBLIC;
