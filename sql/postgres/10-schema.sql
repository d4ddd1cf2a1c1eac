-- 10-schema.sql -- part of fence.sql: the transaction, the schema and who may own it, and the repair of fence's own tables.
-- The parts are joined in name order into $(B)/sql/postgres/fence.sql
-- (lib/pg/module.mk), the one script that psql -f, fence_pg_install()
-- and make install use; it runs as one transaction (BEGIN in
-- 10-schema.sql, COMMIT in 90-upgrade.sql).  See docs/postgres.md.

BEGIN;
-- Before anything else: the caller's search_path must bind nothing this
-- script creates (operators in WHEN clauses and CHECKs, types, functions).
SET LOCAL search_path = pg_catalog, pg_temp;
SET LOCAL client_min_messages = warning;

-- Serialise concurrent installs, then make sure schema "fence" is, or
-- becomes, the installer's alone (see the top).  A schema created by
-- someone else in between fails CREATE SCHEMA: it is never adopted.
DO $owner$
DECLARE
    me oid;
    ns oid;
    ns_owner oid;
    bad text;
    ext_procs oid[];
    supers oid[];
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(7274243561983541);
    -- The C extension (CREATE EXTENSION fence, superuser only) adds its
    -- functions to this schema: members of extension "fence" owned by a
    -- superuser are trusted (a superuser can do anything anyway).
    SELECT COALESCE(pg_catalog.array_agg(d.objid), '{}') INTO ext_procs
    FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
    WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.refclassid = 'pg_catalog.pg_extension'::regclass
      AND d.deptype = 'e' AND e.extname = 'fence';
    SELECT COALESCE(pg_catalog.array_agg(r.oid), '{}') INTO supers FROM pg_catalog.pg_roles r WHERE r.rolsuper;
    SELECT r.oid INTO me FROM pg_catalog.pg_roles r WHERE r.rolname = current_user;
    SELECT n.oid, n.nspowner INTO ns, ns_owner FROM pg_catalog.pg_namespace n
    WHERE n.nspname = 'fence';
    IF ns IS NULL THEN
        CREATE SCHEMA fence;
        RETURN;
    END IF;
    IF ns_owner <> me THEN
        RAISE EXCEPTION 'fence: schema "fence" is owned by role %, not by %, the role installing it; refusing to install into it',
                pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(ns_owner)), pg_catalog.quote_ident(current_user)
            USING ERRCODE = '42501',
                  HINT = 'Run the install as the schema''s owner.  If that role is an application''s, the schema is not trustworthy: drop it (DROP SCHEMA fence CASCADE, after checking what it holds) and install again.';
    END IF;

    SELECT pg_catalog.string_agg(o.what, '; ' ORDER BY o.what) INTO bad FROM (
        SELECT pg_catalog.format('relation %s owned by %I', c.oid::regclass,
                                 pg_catalog.pg_get_userbyid(c.relowner)) AS what
        FROM pg_catalog.pg_class c WHERE c.relnamespace = ns AND c.relowner <> me
        UNION ALL
        SELECT pg_catalog.format('function %s owned by %I', p.oid::regprocedure,
                                 pg_catalog.pg_get_userbyid(p.proowner))
        FROM pg_catalog.pg_proc p WHERE p.pronamespace = ns AND p.proowner <> me
          AND NOT (p.oid = ANY (ext_procs) AND p.proowner = ANY (supers))
        UNION ALL
        SELECT pg_catalog.format('type %s owned by %I', t.oid::regtype,
                                 pg_catalog.pg_get_userbyid(t.typowner))
        FROM pg_catalog.pg_type t WHERE t.typnamespace = ns AND t.typowner <> me
        UNION ALL
        SELECT pg_catalog.format('operator %s owned by %I', o.oid::regoperator,
                                 pg_catalog.pg_get_userbyid(o.oprowner))
        FROM pg_catalog.pg_operator o WHERE o.oprnamespace = ns AND o.oprowner <> me
        UNION ALL
        SELECT pg_catalog.format('collation %I owned by %I', co.collname,
                                 pg_catalog.pg_get_userbyid(co.collowner))
        FROM pg_catalog.pg_collation co WHERE co.collnamespace = ns AND co.collowner <> me
        UNION ALL
        SELECT pg_catalog.format('conversion %I owned by %I', cv.conname,
                                 pg_catalog.pg_get_userbyid(cv.conowner))
        FROM pg_catalog.pg_conversion cv WHERE cv.connamespace = ns AND cv.conowner <> me
        UNION ALL
        SELECT pg_catalog.format('operator class %I owned by %I', oc.opcname,
                                 pg_catalog.pg_get_userbyid(oc.opcowner))
        FROM pg_catalog.pg_opclass oc WHERE oc.opcnamespace = ns AND oc.opcowner <> me
        UNION ALL
        SELECT pg_catalog.format('operator family %I owned by %I', f.opfname,
                                 pg_catalog.pg_get_userbyid(f.opfowner))
        FROM pg_catalog.pg_opfamily f WHERE f.opfnamespace = ns AND f.opfowner <> me
        UNION ALL
        SELECT pg_catalog.format('statistics object %I owned by %I', s.stxname,
                                 pg_catalog.pg_get_userbyid(s.stxowner))
        FROM pg_catalog.pg_statistic_ext s WHERE s.stxnamespace = ns AND s.stxowner <> me
        UNION ALL
        SELECT pg_catalog.format('text search configuration %I owned by %I', tc.cfgname,
                                 pg_catalog.pg_get_userbyid(tc.cfgowner))
        FROM pg_catalog.pg_ts_config tc WHERE tc.cfgnamespace = ns AND tc.cfgowner <> me
        UNION ALL
        SELECT pg_catalog.format('text search dictionary %I owned by %I', td.dictname,
                                 pg_catalog.pg_get_userbyid(td.dictowner))
        FROM pg_catalog.pg_ts_dict td WHERE td.dictnamespace = ns AND td.dictowner <> me
        UNION ALL
        -- Triggers on fence's tables may only call fence's own functions.
        SELECT pg_catalog.format('trigger %I on %s calls %s', tg.tgname, tg.tgrelid::regclass,
                                 tg.tgfoid::regprocedure)
        FROM pg_catalog.pg_trigger tg
        JOIN pg_catalog.pg_class c ON c.oid = tg.tgrelid
        JOIN pg_catalog.pg_proc p ON p.oid = tg.tgfoid
        WHERE c.relnamespace = ns AND NOT tg.tgisinternal
          AND (p.pronamespace <> ns
               OR (p.proowner <> me AND NOT (p.oid = ANY (ext_procs) AND p.proowner = ANY (supers))))
        UNION ALL
        SELECT pg_catalog.format('CREATE on schema fence granted to %s',
                                 CASE a.grantee WHEN 0 THEN 'PUBLIC'
                                      ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END)
        FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
        WHERE n.oid = ns AND a.grantee <> me AND a.privilege_type = 'CREATE'
        UNION ALL
        SELECT pg_catalog.format('%s on %s granted to %s', a.privilege_type, c.oid::regclass,
                                 CASE a.grantee WHEN 0 THEN 'PUBLIC'
                                      ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END)
        FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
        WHERE c.relnamespace = ns AND a.grantee <> me
          AND a.privilege_type IN ('INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'TRIGGER', 'REFERENCES')
        UNION ALL
        SELECT pg_catalog.format('%s (%I) on %s granted to %s', a.privilege_type, at.attname, c.oid::regclass,
                                 CASE a.grantee WHEN 0 THEN 'PUBLIC'
                                      ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END)
        FROM pg_catalog.pg_class c
        JOIN pg_catalog.pg_attribute at ON at.attrelid = c.oid,
             pg_catalog.aclexplode(at.attacl) a
        WHERE c.relnamespace = ns AND a.grantee <> me
          AND a.privilege_type IN ('INSERT', 'UPDATE', 'REFERENCES')
    ) o;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'fence: schema "fence" holds what other roles own or may change: %; refusing to install', bad
            USING ERRCODE = '42501',
                  HINT = 'Only the role that installs fence may own or change anything in schema "fence".  Drop or revoke these (after checking what they do), then install again.';
    END IF;
END
$owner$;

REVOKE ALL ON SCHEMA fence FROM PUBLIC;
GRANT USAGE ON SCHEMA fence TO PUBLIC;

-- Repair: fence never protects its own tables (protect() refuses them
-- since version 4), but an older protect() did: a guard on fence.marks
-- makes every fence.advance() without a token fail.  Drop fence's triggers
-- from the tables of schema fence -- before this script writes to them --
-- and the column protect() added, if it is not one of fence's own.
DO $repair$
DECLARE
    r record;
    col name;
BEGIN
    FOR r IN
        SELECT t.tgrelid::regclass AS rel, t.tgname, t.tgargs
        FROM pg_catalog.pg_trigger t
        JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
        WHERE c.relnamespace = 'fence'::regnamespace
          AND t.tgname IN ('zz_fence_guard_ins', 'zz_fence_guard_upd', 'zz_fence_guard_del',
                           'zz_fence_guard_truncate', 'zz_fence_check_ins', 'zz_fence_check_upd')
        ORDER BY 1, 2
    LOOP
        EXECUTE pg_catalog.format('DROP TRIGGER %I ON %s', r.tgname, r.rel);
        -- (This script runs with client_min_messages = warning.)
        PERFORM pg_catalog.set_config('client_min_messages', 'notice', true);
        RAISE NOTICE 'fence: dropped trigger % from %: fence''s own tables are never protected',
                pg_catalog.quote_ident(r.tgname), r.rel;
        IF r.tgname = 'zz_fence_guard_upd' AND position(pg_catalog.decode('00', 'hex') IN r.tgargs) > 1 THEN
            col := pg_catalog.convert_from(pg_catalog.substring(r.tgargs, 1,
                       position(pg_catalog.decode('00', 'hex') IN r.tgargs) - 1), 'UTF8');
            IF col NOT IN ('resource', 'token', 'updated_at', 'holder', 'singleton', 'version', 'installed_at')
               AND EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                           WHERE a.attrelid = r.rel AND a.attname = col AND NOT a.attisdropped) THEN
                EXECUTE pg_catalog.format('ALTER TABLE %s DROP COLUMN %I', r.rel, col);
                RAISE NOTICE 'fence: dropped column % that fence.protect() added to %',
                        pg_catalog.quote_ident(col), r.rel;
            ELSIF col IN ('token', 'version') THEN
                EXECUTE pg_catalog.format('ALTER TABLE %s ALTER COLUMN %I DROP DEFAULT', r.rel, col);
            END IF;
        END IF;
        PERFORM pg_catalog.set_config('client_min_messages', 'warning', true);
    END LOOP;
END
$repair$;
