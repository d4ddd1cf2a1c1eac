-- fence.sql -- storage-side fencing for PostgreSQL: schema "fence", version 5.
-- Version 5 as released (git 031e1f3, sql/postgres/[0-9]*.sql joined in name order), kept to test real upgrades and fence.migrate_version_column().
-- Install: psql -v ON_ERROR_STOP=1 -q -f fence.sql (docs/postgres.md).

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

-- 20-version.sql -- part of fence.sql: the schema version: fence.meta and fence.version().
-- The parts are joined in name order into $(B)/sql/postgres/fence.sql
-- (lib/pg/module.mk), the one script that psql -f, fence_pg_install()
-- and make install use; it runs as one transaction (BEGIN in
-- 10-schema.sql, COMMIT in 90-upgrade.sql).  See docs/postgres.md.

-- ------------------------------------------------------------------
-- Version
-- ------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS fence.meta (
    singleton boolean PRIMARY KEY DEFAULT true CONSTRAINT meta_singleton_check CHECK (singleton),
    version integer NOT NULL,
    installed_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
REVOKE ALL ON fence.meta FROM PUBLIC;

-- The version installed before this run (0: none) goes into the
-- transaction-local setting fence.install_from for the steps below.
DO $install$
DECLARE
    v integer;
BEGIN
    SELECT m.version INTO v FROM fence.meta m;
    IF v > 5 THEN
        RAISE EXCEPTION 'fence: schema version % is installed, this script is version 5; refusing to downgrade', v;
    END IF;
    PERFORM pg_catalog.set_config('fence.install_from', COALESCE(v, 0)::text, true);
END
$install$;

INSERT INTO fence.meta (version) VALUES (5)
ON CONFLICT (singleton) DO UPDATE SET version = EXCLUDED.version;

-- The schema version of this install script.
CREATE OR REPLACE FUNCTION fence.version() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 5 $$;

-- 30-token.sql -- part of fence.sql: the token rule: fence.current_token() and fence.use_token(), which binds a token to its transaction.
-- The parts are joined in name order into $(B)/sql/postgres/fence.sql
-- (lib/pg/module.mk), the one script that psql -f, fence_pg_install()
-- and make install use; it runs as one transaction (BEGIN in
-- 10-schema.sql, COMMIT in 90-upgrade.sql).  See docs/postgres.md.

-- ------------------------------------------------------------------
-- The writer's token
-- ------------------------------------------------------------------

-- The token of the current transaction, parsed strictly from the setting
-- fence.token.  Raises 23Q02 when it is missing or malformed, or returns
-- NULL for a missing one when missing_ok.  `what` names the object in the
-- message.
CREATE OR REPLACE FUNCTION fence.current_token(missing_ok boolean DEFAULT false,
                                               what text DEFAULT 'this write')
RETURNS bigint
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    raw text := pg_catalog.current_setting('fence.token', true);
BEGIN
    IF raw IS NULL OR raw = '' THEN
        IF missing_ok THEN
            RETURN NULL;
        END IF;
        RAISE EXCEPTION 'fence: no fencing token for %', what
            USING ERRCODE = '23Q02',
                  DETAIL = 'reason=missing',
                  HINT = 'Set it in the writing transaction: SELECT fence.use_token(<token>).';
    END IF;
    IF raw !~ '^[1-9][0-9]{0,18}$'
       OR (pg_catalog.length(raw) = 19 AND raw COLLATE "C" > '9223372036854775807') THEN
        RAISE EXCEPTION 'fence: malformed fencing token % for %',
                pg_catalog.quote_literal(pg_catalog.left(raw, 40)), what
            USING ERRCODE = '23Q02',
                  DETAIL = 'reason=malformed',
                  HINT = 'fence.token must be a decimal integer 1..9223372036854775807, no sign, spaces or leading zeros.';
    END IF;
    IF pg_catalog.current_setting('fence.xact', true) IS DISTINCT FROM pg_catalog.pg_current_xact_id()::text THEN
        RAISE EXCEPTION 'fence: fencing token for % was not set by fence.use_token() in this transaction', what
            USING ERRCODE = '23Q02',
                  DETAIL = 'reason=unbound setting=fence.token',
                  HINT = 'Set it in the writing transaction with SELECT fence.use_token(<token>): a value left by SET, ALTER ROLE/DATABASE ... SET or an earlier transaction of the connection is never admitted.';
    END IF;
    RETURN raw::bigint;
END
$$;

-- Give the current transaction its token and holder: the one way a writer
-- sets them.  Sets, for this transaction only (set_config(..., true)):
-- fence.token (TOKEN's canonical text), fence.holder (HOLDER, '' for none)
-- and fence.xact, the transaction's id (pg_current_xact_id(), 64 bits with
-- the epoch: never the same for two transactions of the cluster).  Every
-- guard admits a token only when fence.xact is the id of the transaction
-- it runs in, so a value left at session level -- a plain SET, ALTER
-- ROLE/DATABASE ... SET, or a pooled connection's previous client -- is
-- refused (23Q02 reason=unbound), never admitted.  Returns TOKEN.
-- Refuses a NULL token (23Q02 reason=missing), one <= 0 (reason=malformed)
-- and a holder that is not '' or 32 lowercase hex digits (reason=malformed
-- setting=fence.holder); a refused call sets nothing.  No SET clause (one
-- would undo the settings at return) and nothing that reads search_path.
-- Assigns the transaction an id (it is about to write anyway).
CREATE OR REPLACE FUNCTION fence.use_token(token bigint, holder text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
BEGIN
    IF use_token.token IS NULL THEN
        RAISE EXCEPTION 'fence: use_token: no fencing token (NULL)'
            USING ERRCODE = '23Q02', DETAIL = 'reason=missing';
    END IF;
    IF use_token.token OPERATOR(pg_catalog.<=) 0 THEN
        RAISE EXCEPTION 'fence: use_token: malformed fencing token % (tokens are 1..9223372036854775807)', use_token.token
            USING ERRCODE = '23Q02', DETAIL = 'reason=malformed';
    END IF;
    IF use_token.holder IS NOT NULL AND use_token.holder OPERATOR(pg_catalog.<>) ''
       AND use_token.holder OPERATOR(pg_catalog.!~) '^[0-9a-f]{32}$' THEN
        RAISE EXCEPTION 'fence: use_token: malformed holder %', pg_catalog.quote_literal(pg_catalog.left(use_token.holder, 40))
            USING ERRCODE = '23Q02', DETAIL = 'reason=malformed setting=fence.holder',
                  HINT = 'The holder is the lease''s holder id, 32 lowercase hex digits, or NULL or empty for none.';
    END IF;
    PERFORM pg_catalog.set_config('fence.token', use_token.token::pg_catalog.text, true),
            pg_catalog.set_config('fence.holder', COALESCE(use_token.holder, ''), true),
            pg_catalog.set_config('fence.xact', pg_catalog.pg_current_xact_id()::pg_catalog.text, true);
    RETURN use_token.token;
END
$$;

-- 40-marks.sql -- part of fence.sql: per-resource marks: fence.marks, its guards, fence.advance(), fence.mark(), fence.mark_holder().
-- The parts are joined in name order into $(B)/sql/postgres/fence.sql
-- (lib/pg/module.mk), the one script that psql -f, fence_pg_install()
-- and make install use; it runs as one transaction (BEGIN in
-- 10-schema.sql, COMMIT in 90-upgrade.sql).  See docs/postgres.md.

-- ------------------------------------------------------------------
-- Per-resource high-water marks
-- ------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS fence.marks (
    resource text PRIMARY KEY
        CONSTRAINT marks_resource_check
        CHECK (pg_catalog.octet_length(resource) OPERATOR(pg_catalog.>=) 1
               AND pg_catalog.octet_length(resource) OPERATOR(pg_catalog.<=) 512),
    token bigint NOT NULL CONSTRAINT marks_token_check CHECK (token OPERATOR(pg_catalog.>) 0),
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
REVOKE ALL ON fence.marks FROM PUBLIC;
-- Version 3: the holder that wrote the mark (NULL: none), added in place
-- to the marks of versions 1 and 2 (which keep their tokens, no holder).
ALTER TABLE fence.marks ADD COLUMN IF NOT EXISTS holder text
    CONSTRAINT marks_holder_check
    CHECK (holder OPERATOR(pg_catalog.~) '^[0-9a-f]{32}$');

-- Version 1 did not pin search_path: a CHECK it created under a hostile
-- one may call an operator or function from outside pg_catalog (those of
-- pg_catalog are pinned and leave no pg_depend row).  Re-create those.
DO $checks$
DECLARE
    con record;
BEGIN
    FOR con IN
        SELECT DISTINCT c.conname, c.conrelid::regclass AS rel
        FROM pg_catalog.pg_constraint c
        JOIN pg_catalog.pg_depend d
          ON d.classid = 'pg_catalog.pg_constraint'::regclass AND d.objid = c.oid
        WHERE c.conrelid IN ('fence.marks'::regclass, 'fence.meta'::regclass)
          AND c.contype = 'c'
          AND c.conname IN ('marks_resource_check', 'marks_token_check', 'marks_holder_check',
                            'meta_singleton_check')
          AND d.refclassid IN ('pg_catalog.pg_operator'::regclass, 'pg_catalog.pg_proc'::regclass,
                               'pg_catalog.pg_type'::regclass, 'pg_catalog.pg_collation'::regclass)
    LOOP
        EXECUTE pg_catalog.format('ALTER TABLE %s DROP CONSTRAINT %I', con.rel, con.conname);
        EXECUTE pg_catalog.format('ALTER TABLE %s ADD CONSTRAINT %I CHECK (%s)', con.rel, con.conname,
            CASE con.conname
                WHEN 'marks_resource_check' THEN
                    'pg_catalog.octet_length(resource) OPERATOR(pg_catalog.>=) 1'
                    ' AND pg_catalog.octet_length(resource) OPERATOR(pg_catalog.<=) 512'
                WHEN 'marks_token_check' THEN 'token OPERATOR(pg_catalog.>) 0'
                WHEN 'marks_holder_check' THEN
                    'holder OPERATOR(pg_catalog.~) ''^[0-9a-f]{32}$'''
                WHEN 'meta_singleton_check' THEN 'singleton'
            END);
        RAISE WARNING 'fence: re-created constraint % on %: it was bound to an operator or function outside pg_catalog',
                con.conname, con.rel;
    END LOOP;
END
$checks$;
-- Refuses lowering, renaming and deleting a mark, and changing its holder
-- without raising its token (even by its owner).  BEFORE UPDATE it admits
-- a raise (or the same token and holder) itself, without a WHEN clause
-- (PostgreSQL prepares a WHEN clause once per statement, which cost more
-- than this function).  Every operator is schema-qualified: it runs inside
-- fence.advance(), which no longer pins search_path (see there).
CREATE OR REPLACE FUNCTION fence.marks_guard() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF TG_OP OPERATOR(pg_catalog.=) 'UPDATE' THEN
        IF NEW.resource OPERATOR(pg_catalog.=) OLD.resource
           AND (NEW.token OPERATOR(pg_catalog.>) OLD.token
                OR (NEW.token OPERATOR(pg_catalog.=) OLD.token
                    AND COALESCE(NEW.holder, '') OPERATOR(pg_catalog.=) COALESCE(OLD.holder, ''))) THEN
            RETURN NEW;
        END IF;
        RAISE EXCEPTION 'fence: high-water mark of resource % cannot be lowered (% to %) or renamed, nor its holder changed at the same token',
                pg_catalog.quote_ident(OLD.resource), OLD.token, NEW.token
            USING ERRCODE = '23Q03';
    END IF;
    IF TG_LEVEL OPERATOR(pg_catalog.=) 'STATEMENT' THEN
        RAISE EXCEPTION 'fence: fence.marks cannot be truncated: high-water marks are never deleted'
            USING ERRCODE = '23Q03';
    END IF;
    RAISE EXCEPTION 'fence: high-water mark of resource % cannot be deleted',
            pg_catalog.quote_ident(OLD.resource)
        USING ERRCODE = '23Q03';
END
$$;
REVOKE ALL ON FUNCTION fence.marks_guard() FROM PUBLIC;

DROP TRIGGER IF EXISTS marks_no_lowering ON fence.marks;
CREATE TRIGGER marks_no_lowering BEFORE UPDATE ON fence.marks
    FOR EACH ROW EXECUTE FUNCTION fence.marks_guard();
DROP TRIGGER IF EXISTS marks_no_delete ON fence.marks;
CREATE TRIGGER marks_no_delete BEFORE DELETE ON fence.marks
    FOR EACH ROW EXECUTE FUNCTION fence.marks_guard();
DROP TRIGGER IF EXISTS marks_no_truncate ON fence.marks;
CREATE TRIGGER marks_no_truncate BEFORE TRUNCATE ON fence.marks
    FOR EACH STATEMENT EXECUTE FUNCTION fence.marks_guard();

-- An INSERT of a resource that already has a mark merges instead of
-- failing on the primary key: the mark is raised to the row's token (with
-- its holder and time) when that is higher, and otherwise kept as it is
-- (never lowered; at the same token its holder stays).  This is what makes
-- a data-only restore of fence.marks (pg_restore --data-only, a COPY) into
-- a database with marks of its own safe: no mark goes backwards, and the
-- restored ones the database lacks are added.  The row stays locked until
-- commit, as fence.advance() needs (which inserts only a resource it did
-- not find: a concurrent first writer's row then lands here, and advance()
-- reads the result).  Schema-qualified throughout, as marks_guard().
CREATE OR REPLACE FUNCTION fence.marks_merge() RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    have pg_catalog.int8;
BEGIN
    SELECT m.token INTO have FROM fence.marks m
    WHERE m.resource OPERATOR(pg_catalog.=) NEW.resource FOR UPDATE;
    -- (A row no mark could hold goes on to its constraint's error.)
    IF NOT FOUND OR NOT COALESCE(NEW.token OPERATOR(pg_catalog.>) 0, false) THEN
        RETURN NEW;
    END IF;
    IF NEW.token OPERATOR(pg_catalog.>) have THEN
        UPDATE fence.marks m SET token = NEW.token, holder = NEW.holder, updated_at = NEW.updated_at
        WHERE m.resource OPERATOR(pg_catalog.=) NEW.resource;
    END IF;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION fence.marks_merge() FROM PUBLIC;
DROP TRIGGER IF EXISTS marks_merge ON fence.marks;
CREATE TRIGGER marks_merge BEFORE INSERT ON fence.marks
    FOR EACH ROW EXECUTE FUNCTION fence.marks_merge();

-- Raise RESOURCE's high-water mark to TOKEN, recording the writer's holder
-- (the setting fence.holder), or raise 23Q01 when the mark is higher, or
-- equal but recorded for a different holder (a repeated token).  The
-- mark's row stays locked until the transaction ends (SELECT ... FOR
-- UPDATE, or INSERT ... ON CONFLICT DO UPDATE, which locks the row even
-- when its WHERE is false), so the writes that follow in the same
-- transaction cannot be overtaken by a writer with a lower token.  Returns
-- the mark (= TOKEN).
-- SECURITY DEFINER without SET search_path (version 4): a pinned
-- search_path costs a configuration save/restore on every call.  Instead
-- nothing in it depends on the caller's search_path: every relation,
-- function, type and operator is schema-qualified (OPERATOR(pg_catalog.x),
-- no IS DISTINCT FROM / BETWEEN / IN, which look operators up), and the
-- hot path -- the mark exists and is not raised -- is one statement.
CREATE OR REPLACE FUNCTION fence.advance(resource text, token bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
AS $$
#variable_conflict use_column
DECLARE
    seen pg_catalog.int8;
    seen_holder pg_catalog.text;
    writer pg_catalog.text;
BEGIN
    -- The common case, the mark exists: lock its row and read it in one
    -- statement (FOR UPDATE waits for a concurrent writer and then sees
    -- its committed mark).  No mark can have an invalid name (CHECK), so
    -- checking the arguments can wait until the slow path.
    SELECT m.token, m.holder, pg_catalog.current_setting('fence.holder', true)
    INTO seen, seen_holder, writer
    FROM fence.marks m WHERE m.resource OPERATOR(pg_catalog.=) advance.resource FOR UPDATE;
    -- The hot path, one expression (PL/pgSQL prepares each once per
    -- transaction): the holder writes again with the mark's token.  A
    -- malformed fence.holder never equals a recorded (valid) one, nor
    -- '' (none) unless it is ''.
    IF FOUND AND seen OPERATOR(pg_catalog.=) advance.token
       AND COALESCE(seen_holder, '') OPERATOR(pg_catalog.=) COALESCE(writer, '')
       AND (COALESCE(writer, '') OPERATOR(pg_catalog.=) ''
            OR pg_catalog.current_setting('fence.xact', true) OPERATOR(pg_catalog.=) pg_catalog.pg_current_xact_id()::pg_catalog.text) THEN
        RETURN seen;
    END IF;

    IF advance.resource IS NULL OR pg_catalog.octet_length(advance.resource) OPERATOR(pg_catalog.<) 1
       OR pg_catalog.octet_length(advance.resource) OPERATOR(pg_catalog.>) 512 THEN
        RAISE EXCEPTION 'fence: resource name must be 1..512 bytes, got %',
                COALESCE(pg_catalog.octet_length(advance.resource)::pg_catalog.text OPERATOR(pg_catalog.||) ' bytes', 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF advance.token IS NULL OR advance.token OPERATOR(pg_catalog.<=) 0 THEN
        RAISE EXCEPTION 'fence: no valid fencing token for resource %: % (tokens are 1..9223372036854775807)',
                pg_catalog.quote_ident(advance.resource), COALESCE(advance.token::pg_catalog.text, 'NULL')
            USING ERRCODE = '23Q02',
                  DETAIL = CASE WHEN advance.token IS NULL THEN 'reason=missing' ELSE 'reason=malformed' END;
    END IF;
    -- The writer's holder: unset or '' is none; anything but 32 lowercase
    -- hex digits fails closed.
    writer := pg_catalog.current_setting('fence.holder', true);
    IF writer OPERATOR(pg_catalog.=) '' THEN
        writer := NULL;
    ELSIF writer OPERATOR(pg_catalog.!~) '^[0-9a-f]{32}$' THEN
        RAISE EXCEPTION 'fence: malformed holder % in fence.holder for resource %',
                pg_catalog.quote_literal(pg_catalog.left(writer, 40)), pg_catalog.quote_ident(advance.resource)
            USING ERRCODE = '23Q02',
                  DETAIL = 'reason=malformed setting=fence.holder',
                  HINT = 'fence.holder must be the lease''s holder id, 32 lowercase hex digits, or empty for none.';
    END IF;
    -- A holder counts only when fence.use_token() gave it to this very
    -- transaction (see there): one left at session level is refused.
    IF writer IS NOT NULL
       AND pg_catalog.current_setting('fence.xact', true) IS DISTINCT FROM pg_catalog.pg_current_xact_id()::pg_catalog.text THEN
        RAISE EXCEPTION 'fence: holder for resource % was not set by fence.use_token() in this transaction',
                pg_catalog.quote_ident(advance.resource)
            USING ERRCODE = '23Q02',
                  DETAIL = 'reason=unbound setting=fence.holder',
                  HINT = 'Set it in the writing transaction with SELECT fence.use_token(<token>, <holder>): a value left by SET, ALTER ROLE/DATABASE ... SET or an earlier transaction of the connection is never admitted.';
    END IF;

    IF seen IS NULL THEN
        -- A new resource, possibly created concurrently: ON CONFLICT waits
        -- for the other inserter and then locks its row (even when its
        -- WHERE is false).
        INSERT INTO fence.marks AS m (resource, token, holder)
        VALUES (advance.resource, advance.token, writer)
        ON CONFLICT (resource) DO UPDATE
            SET token = EXCLUDED.token, holder = EXCLUDED.holder, updated_at = pg_catalog.now()
            WHERE m.token OPERATOR(pg_catalog.<) EXCLUDED.token;
        IF FOUND THEN
            RETURN advance.token;
        END IF;
        SELECT m.token, m.holder INTO seen, seen_holder
        FROM fence.marks m WHERE m.resource OPERATOR(pg_catalog.=) advance.resource;
    END IF;
    IF seen OPERATOR(pg_catalog.>) advance.token THEN
        RAISE EXCEPTION 'fence: stale token % for resource % (highest seen %)',
                advance.token, pg_catalog.quote_ident(advance.resource), seen
            USING ERRCODE = '23Q01',
                  DETAIL = pg_catalog.format('offered=%s highest=%s kind=resource object=%s reason=older%s',
                                             advance.token, seen, advance.resource,
                                             ' holder=' OPERATOR(pg_catalog.||) seen_holder);
    END IF;
    IF seen OPERATOR(pg_catalog.<) advance.token THEN
        UPDATE fence.marks m SET token = advance.token, holder = writer, updated_at = pg_catalog.now()
        WHERE m.resource OPERATOR(pg_catalog.=) advance.resource;
        RETURN advance.token;
    END IF;
    IF COALESCE(seen_holder, '') OPERATOR(pg_catalog.=) COALESCE(writer, '') THEN
        RETURN advance.token;
    END IF;
    RAISE EXCEPTION 'fence: stale token % for resource % (highest seen %, recorded for a different holder)',
            advance.token, pg_catalog.quote_ident(advance.resource), seen
        USING ERRCODE = '23Q01',
              DETAIL = pg_catalog.format('offered=%s highest=%s kind=resource object=%s reason=repeat%s',
                                         advance.token, seen, advance.resource,
                                         ' holder=' OPERATOR(pg_catalog.||) seen_holder),
              HINT = 'The token was issued twice (e.g. after a Redis failover); only the holder it was recorded for may repeat it.  Acquire the lease again for a higher token.';
END
$$;

-- The high-water mark of RESOURCE (0 when it has none).
CREATE OR REPLACE FUNCTION fence.mark(resource text) RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT COALESCE((SELECT m.token FROM fence.marks m WHERE m.resource = $1), 0)
$$;

-- The holder recorded with RESOURCE's mark (NULL when it has none, or no
-- mark).
CREATE OR REPLACE FUNCTION fence.mark_holder(resource text) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT m.holder FROM fence.marks m WHERE m.resource = $1
$$;

-- 50-guard-templates.sql -- part of fence.sql: the per-row guard: fence.refuse_truncate() and the templates of each table's generated guard and check.
-- The parts are joined in name order into $(B)/sql/postgres/fence.sql
-- (lib/pg/module.mk), the one script that psql -f, fence_pg_install()
-- and make install use; it runs as one transaction (BEGIN in
-- 10-schema.sql, COMMIT in 90-upgrade.sql).  See docs/postgres.md.

-- ------------------------------------------------------------------
-- Per-row mode, version 3's generic functions
-- ------------------------------------------------------------------

-- Version 3's generic functions (fence.row_guard, fence.row_check, used
-- with WHEN clauses) are gone since version 5: the upgrade below protects
-- every table that used them again, then drops them.

-- Statement trigger refusing TRUNCATE of a protected table.
CREATE OR REPLACE FUNCTION fence.refuse_truncate() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    RAISE EXCEPTION 'fence: TRUNCATE of %.% is refused: it is fenced (fence.unprotect() it first)',
            pg_catalog.quote_ident(TG_TABLE_SCHEMA), pg_catalog.quote_ident(TG_TABLE_NAME)
        USING ERRCODE = '23Q03', SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME;
END
$$;

-- Any table owner may attach the trigger functions (CREATE TRIGGER needs
-- EXECUTE on them); a trigger function cannot be called directly.
GRANT EXECUTE ON FUNCTION fence.refuse_truncate() TO PUBLIC;

-- ------------------------------------------------------------------
-- Per-row mode, version 4: trigger functions generated per table
-- ------------------------------------------------------------------

-- The body of a table's generated BEFORE guard, a format() template:
-- %1$s the token column as an identifier, always double-quoted (see
-- fence.write_functions), %2$L its name as a literal, %3$s 'true' in
-- permissive mode, else 'false'.  The column is read and written directly
-- (OLD.col, NEW.col := tok) and no WHEN clause is involved: the hot path
-- -- the row already carries exactly the writer's token and the column is
-- not written -- is one expression and RETURN.  The setting's text equal to
-- the stamp's canonical text, with the stamp > 0, holds only for a valid
-- token equal to the stamp.  Runs with the writer's rights and needs none;
-- every operator is schema-qualified instead of pinning search_path (a
-- configuration save/restore per row).  Table and schema names are read
-- at run time (TG_TABLE_*), so a renamed table is named right.
CREATE OR REPLACE FUNCTION fence.guard_template() RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $template$ SELECT $body$
DECLARE
    raw pg_catalog.text;
    tok pg_catalog.int8;
BEGIN
    -- The hot path, UPDATE, in one expression: PL/pgSQL prepares each
    -- expression once per transaction, so every one costs.  (INSERT: OLD
    -- is NULL; DELETE: NEW is; a comparison with NULL is not true.)
    IF pg_catalog.current_setting('fence.token', true) OPERATOR(pg_catalog.=) OLD.%1$s::pg_catalog.text
       AND NEW.%1$s OPERATOR(pg_catalog.=) OLD.%1$s
       AND OLD.%1$s OPERATOR(pg_catalog.>) 0
       AND pg_catalog.current_setting('fence.xact', true) OPERATOR(pg_catalog.=) pg_catalog.pg_current_xact_id()::pg_catalog.text THEN
        RETURN NEW;
    END IF;
    raw := pg_catalog.current_setting('fence.token', true);
    IF TG_OP OPERATOR(pg_catalog.=) 'DELETE'
       AND raw OPERATOR(pg_catalog.=) OLD.%1$s::pg_catalog.text AND OLD.%1$s OPERATOR(pg_catalog.>) 0
       AND pg_catalog.current_setting('fence.xact', true) OPERATOR(pg_catalog.=) pg_catalog.pg_current_xact_id()::pg_catalog.text THEN
        RETURN OLD;
    END IF;

    IF raw IS NULL OR raw OPERATOR(pg_catalog.=) '' THEN
        IF NOT %3$s THEN
            RAISE EXCEPTION 'fence: no fencing token for %% on %%', TG_OP,
                    pg_catalog.quote_ident(TG_TABLE_SCHEMA) OPERATOR(pg_catalog.||) '.'
                        OPERATOR(pg_catalog.||) pg_catalog.quote_ident(TG_TABLE_NAME)
                USING ERRCODE = '23Q02', DETAIL = 'reason=missing',
                      HINT = 'Set it in the writing transaction: SELECT fence.use_token(<token>).',
                      SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME, COLUMN = %2$L;
        END IF;
        -- Permissive mode, no token: keep the stamp (a new row gets 0).
        IF TG_OP OPERATOR(pg_catalog.=) 'INSERT' THEN
            NEW.%1$s := 0;
            RETURN NEW;
        ELSIF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
            RETURN OLD;
        END IF;
        NEW.%1$s := OLD.%1$s;
        RETURN NEW;
    END IF;
    IF raw OPERATOR(pg_catalog.!~) '^[1-9][0-9]{0,18}$'
       OR (pg_catalog.length(raw) OPERATOR(pg_catalog.=) 19
           AND raw COLLATE pg_catalog."C" OPERATOR(pg_catalog.>) '9223372036854775807') THEN
        RAISE EXCEPTION 'fence: malformed fencing token %% for %% on %%',
                pg_catalog.quote_literal(pg_catalog.left(raw, 40)), TG_OP,
                pg_catalog.quote_ident(TG_TABLE_SCHEMA) OPERATOR(pg_catalog.||) '.'
                    OPERATOR(pg_catalog.||) pg_catalog.quote_ident(TG_TABLE_NAME)
            USING ERRCODE = '23Q02', DETAIL = 'reason=malformed',
                  HINT = 'fence.token must be a decimal integer 1..9223372036854775807, no sign, spaces or leading zeros.',
                  SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME, COLUMN = %2$L;
    END IF;
    -- Only a token given to this very transaction by fence.use_token().
    IF pg_catalog.current_setting('fence.xact', true) IS DISTINCT FROM pg_catalog.pg_current_xact_id()::pg_catalog.text THEN
        RAISE EXCEPTION 'fence: fencing token for %% on %% was not set by fence.use_token() in this transaction', TG_OP,
                pg_catalog.quote_ident(TG_TABLE_SCHEMA) OPERATOR(pg_catalog.||) '.'
                    OPERATOR(pg_catalog.||) pg_catalog.quote_ident(TG_TABLE_NAME)
            USING ERRCODE = '23Q02', DETAIL = 'reason=unbound setting=fence.token',
                  HINT = 'Set it in the writing transaction with SELECT fence.use_token(<token>): a value left by SET, ALTER ROLE/DATABASE ... SET or an earlier transaction of the connection is never admitted.',
                  SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME, COLUMN = %2$L;
    END IF;
    tok := raw::pg_catalog.int8;
    IF TG_OP OPERATOR(pg_catalog.=) 'INSERT' THEN
        NEW.%1$s := tok;
        RETURN NEW;
    END IF;
    IF tok OPERATOR(pg_catalog.<) OLD.%1$s THEN
        RAISE EXCEPTION 'fence: stale token %% for %% (highest seen %%)', tok,
                pg_catalog.quote_ident(TG_TABLE_SCHEMA) OPERATOR(pg_catalog.||) '.'
                    OPERATOR(pg_catalog.||) pg_catalog.quote_ident(TG_TABLE_NAME),
                OLD.%1$s
            USING ERRCODE = '23Q01',
                  DETAIL = pg_catalog.format('offered=%%s highest=%%s kind=table object=%%s reason=older',
                                             tok, OLD.%1$s,
                                             pg_catalog.quote_ident(TG_TABLE_SCHEMA) OPERATOR(pg_catalog.||) '.'
                                                 OPERATOR(pg_catalog.||) pg_catalog.quote_ident(TG_TABLE_NAME)),
                  SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME, COLUMN = %2$L;
    END IF;
    IF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
        RETURN OLD;
    END IF;
    NEW.%1$s := tok;
    RETURN NEW;
END
$body$ $template$;

-- The body of a table's generated AFTER check (same placeholders): the row
-- as finally written must carry the stamp the guard gave it -- the
-- writer's token, or with no token in permissive mode the kept stamp
-- (OLD's on UPDATE, 0 on INSERT).  Raises 23Q03.  Only attached when a
-- BEFORE row trigger fires after the guard (see fence.add_checks).
CREATE OR REPLACE FUNCTION fence.check_template() RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $template$ SELECT $body$
DECLARE
    raw pg_catalog.text := pg_catalog.current_setting('fence.token', true);
    want pg_catalog.int8;
    obj pg_catalog.text;
BEGIN
    -- The guard refused anything but a valid token (or none, permissive).
    IF raw OPERATOR(pg_catalog.=) NEW.%1$s::pg_catalog.text THEN
        RETURN NULL;
    END IF;
    obj := pg_catalog.quote_ident(TG_TABLE_SCHEMA) OPERATOR(pg_catalog.||) '.'
               OPERATOR(pg_catalog.||) pg_catalog.quote_ident(TG_TABLE_NAME);
    IF raw IS NULL OR raw OPERATOR(pg_catalog.=) '' THEN
        IF NOT %3$s THEN
            RAISE EXCEPTION 'fence: no fencing token for %% on %% (fence.token was cleared during the statement)', TG_OP, obj
                USING ERRCODE = '23Q02', DETAIL = 'reason=missing',
                      SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME, COLUMN = %2$L;
        END IF;
        IF TG_OP OPERATOR(pg_catalog.=) 'INSERT' THEN
            want := 0;
        ELSE
            want := COALESCE(OLD.%1$s, 0);
        END IF;
    ELSIF raw OPERATOR(pg_catalog.!~) '^[1-9][0-9]{0,18}$'
          OR (pg_catalog.length(raw) OPERATOR(pg_catalog.=) 19
              AND raw COLLATE pg_catalog."C" OPERATOR(pg_catalog.>) '9223372036854775807') THEN
        RAISE EXCEPTION 'fence: malformed fencing token %% for %% on %%',
                pg_catalog.quote_literal(pg_catalog.left(raw, 40)), TG_OP, obj
            USING ERRCODE = '23Q02', DETAIL = 'reason=malformed',
                  SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME, COLUMN = %2$L;
    ELSE
        want := raw::pg_catalog.int8;
    END IF;
    IF NEW.%1$s IS NULL OR NEW.%1$s OPERATOR(pg_catalog.<>) want THEN
        RAISE EXCEPTION 'fence: %% of %% was rewritten after the fencing check (%% written, %% expected) on %%',
                pg_catalog.quote_ident(%2$L), obj, COALESCE(NEW.%1$s::pg_catalog.text, 'NULL'), want, TG_OP
            USING ERRCODE = '23Q03',
                  DETAIL = pg_catalog.format('written=%%s expected=%%s kind=table object=%%s',
                                             COALESCE(NEW.%1$s::pg_catalog.text, 'NULL'), want, obj),
                  HINT = 'A BEFORE trigger that fires after zz_fence_guard_* (triggers fire in name order) writes the token column; it must not.',
                  SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME, COLUMN = %2$L;
    END IF;
    RETURN NULL;
END
$body$ $template$;
REVOKE ALL ON FUNCTION fence.guard_template() FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.check_template() FROM PUBLIC;

-- 60-generated.sql -- part of fence.sql: what fence keeps per table: fence.refuse_schema(), the registries fence.generated and fence.tables, fence.generate(), fence.drop_orphans().
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

-- 70-protect.sql -- part of fence.sql: protect and unprotect: fence.protected, fence.verify(), fence.protect(), fence.move_guard(), fence.set_mode(), fence.unprotect().
-- The parts are joined in name order into $(B)/sql/postgres/fence.sql
-- (lib/pg/module.mk), the one script that psql -f, fence_pg_install()
-- and make install use; it runs as one transaction (BEGIN in
-- 10-schema.sql, COMMIT in 90-upgrade.sql).  See docs/postgres.md.

-- Protected tables: their token column and mode ('strict' or
-- 'permissive'), the implementation of their guard ('plpgsql': generated
-- functions; 'c': the C extension's fence.c_guard; 'generic': version 3's
-- fence.row_guard with WHEN clauses), whether a BEFORE row trigger fires
-- after the guard (check_needed: it could rewrite the token column), and
-- whether every AFTER check that needs is in place (check_present; true
-- when none is needed).  check_needed AND NOT check_present: re-run
-- fence.protect() on that table.
-- Column and mode: for generated functions ('plpgsql') what fence.generated
-- records they bake in, and only on the table they were generated for (a
-- trigger of another table calling them is not listed); for the C and
-- generic guards, which read their trigger's arguments, those arguments
-- (a trigger without both is not listed).
CREATE OR REPLACE VIEW fence.protected AS
SELECT t.tgrelid::regclass AS tbl,
       a.col,
       a.mode,
       CASE p.proname WHEN 'row_guard' THEN 'generic' WHEN 'c_guard' THEN 'c' ELSE 'plpgsql' END AS implementation,
       (l.ins OR l.upd) AS check_needed,
       ((NOT l.ins OR EXISTS (SELECT 1 FROM pg_catalog.pg_trigger c
                              WHERE c.tgrelid OPERATOR(pg_catalog.=) t.tgrelid
                                AND c.tgname OPERATOR(pg_catalog.=) 'zz_fence_check_ins'))
        AND (NOT l.upd OR EXISTS (SELECT 1 FROM pg_catalog.pg_trigger c
                                  WHERE c.tgrelid OPERATOR(pg_catalog.=) t.tgrelid
                                    AND c.tgname OPERATOR(pg_catalog.=) 'zz_fence_check_upd'))) AS check_present
FROM pg_catalog.pg_trigger t
JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) t.tgfoid,
     LATERAL (SELECT position(pg_catalog.decode('00', 'hex') IN t.tgargs) AS nul) z,
     LATERAL (SELECT g.col, g.mode FROM fence.generated g
              WHERE p.proname OPERATOR(pg_catalog.~) '^guard_'
                AND g.fn OPERATOR(pg_catalog.=) p.proname
                AND g.tbl::pg_catalog.oid OPERATOR(pg_catalog.=) t.tgrelid
              UNION ALL
              SELECT pg_catalog.convert_from(pg_catalog.substring(t.tgargs, 1, z.nul OPERATOR(pg_catalog.-) 1), 'UTF8')::name,
                     pg_catalog.convert_from(pg_catalog.substring(t.tgargs, z.nul OPERATOR(pg_catalog.+) 1,
                                               pg_catalog.octet_length(t.tgargs) OPERATOR(pg_catalog.-) z.nul OPERATOR(pg_catalog.-) 1), 'UTF8')
              WHERE p.proname OPERATOR(pg_catalog.!~) '^guard_'
                AND z.nul OPERATOR(pg_catalog.>) 1
                AND pg_catalog.octet_length(t.tgargs) OPERATOR(pg_catalog.>) (z.nul OPERATOR(pg_catalog.+) 1)) a,
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
                AND b.tgname OPERATOR(pg_catalog.<>) ALL ('{zz_fence_guard_ins,zz_fence_guard_upd,zz_fence_guard_del}'::pg_catalog.name[])) l
WHERE t.tgname OPERATOR(pg_catalog.=) 'zz_fence_guard_upd'
  AND p.pronamespace OPERATOR(pg_catalog.=) 'fence'::regnamespace
  AND (p.proname OPERATOR(pg_catalog.=) ANY ('{row_guard,c_guard}'::pg_catalog.name[])
       OR p.proname OPERATOR(pg_catalog.~) '^guard_[0-9]+(_[0-9]+)?$');
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

-- The recorded tables (fence.tables) whose guard is not whole, one row per
-- fault, with its reason:
--   no guard: zz_fence_guard_upd is missing or does not call fence's
--     guard (fence.protected does not list the table);
--   a zz_fence_guard_ins / _upd / _del trigger missing, not a BEFORE row
--     trigger of its event, or not calling the same guard with the same
--     arguments as zz_fence_guard_upd;
--   zz_fence_guard_truncate missing or not fence.refuse_truncate();
--   one of fence's triggers disabled (ALTER TABLE ... DISABLE TRIGGER, or
--     ENABLE REPLICA TRIGGER: it fires only in replica mode);
--   the AFTER check missing where fence.protected says it is needed.
-- Tables dropped since they were recorded are not listed.  A deploy
-- script goes live only when SELECT count(*) FROM fence.verify() is 0; the
-- install (re-running this script) protects every listed table again.
-- Reads only fence.tables, fence.protected (both SELECT to PUBLIC) and the
-- catalogs, with the caller's rights: EXECUTE to PUBLIC.
CREATE OR REPLACE FUNCTION fence.verify()
RETURNS TABLE (tbl regclass, col name, mode text, implementation text, reason text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT r.tbl, r.col, r.mode, r.implementation, f.reason
    FROM fence.tables r
    JOIN pg_catalog.pg_class c ON c.oid = r.tbl
    LEFT JOIN fence.protected p ON p.tbl = r.tbl
    LEFT JOIN pg_catalog.pg_trigger u ON u.tgrelid = r.tbl AND u.tgname = 'zz_fence_guard_upd',
    LATERAL (
        SELECT 'no guard: zz_fence_guard_upd is missing or does not call fence''s guard' AS reason
        WHERE p.tbl IS NULL
        UNION ALL
        SELECT pg_catalog.format('trigger %s is missing or is not %s', e.name, e.what)
        FROM (VALUES ('zz_fence_guard_ins', 7, 'a BEFORE INSERT row trigger calling the guard of zz_fence_guard_upd'),
                     ('zz_fence_guard_upd', 19, 'a BEFORE UPDATE row trigger'),
                     ('zz_fence_guard_del', 11, 'a BEFORE DELETE row trigger calling the guard of zz_fence_guard_upd'))
             e (name, type, what)
        WHERE p.tbl IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t
                          WHERE t.tgrelid = r.tbl AND t.tgname = e.name AND t.tgtype = e.type
                            AND t.tgfoid = u.tgfoid AND t.tgargs = u.tgargs)
        UNION ALL
        SELECT 'trigger zz_fence_guard_truncate is missing or is not a BEFORE TRUNCATE trigger calling fence.refuse_truncate()'
        WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t
                          WHERE t.tgrelid = r.tbl AND t.tgname = 'zz_fence_guard_truncate' AND t.tgtype = 34
                            AND t.tgfoid = 'fence.refuse_truncate()'::regprocedure)
        UNION ALL
        SELECT pg_catalog.format('trigger %s is disabled%s', t.tgname,
                                 CASE t.tgenabled WHEN 'R' THEN ' (ENABLE REPLICA: it fires only in replica mode)' ELSE '' END)
        FROM pg_catalog.pg_trigger t
        WHERE t.tgrelid = r.tbl AND t.tgenabled IN ('D', 'R')
          AND t.tgname IN ('zz_fence_guard_ins', 'zz_fence_guard_upd', 'zz_fence_guard_del',
                           'zz_fence_guard_truncate', 'zz_fence_check_ins', 'zz_fence_check_upd')
        UNION ALL
        SELECT 'AFTER check missing: a BEFORE row trigger fires after the guard and could rewrite the token column (zz_fence_check_ins/_upd)'
        WHERE p.check_needed AND NOT p.check_present
    ) f
    ORDER BY r.tbl::text, f.reason
$$;
REVOKE ALL ON FUNCTION fence.verify() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fence.verify() TO PUBLIC;

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

-- Drop fence's triggers from TBL (no error when there are none) and the
-- generated functions nothing uses any more.
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
    PERFORM fence.record_table(tbl);
    PERFORM fence.drop_orphans();
END
$$;
REVOKE ALL ON FUNCTION fence.unprotect(regclass) FROM PUBLIC;

-- Protect TBL: make COL (default fence_token) a bigint NOT NULL DEFAULT 0
-- stamp column (adding it, or converting an existing integer column and
-- its NULLs), and install the triggers of the chosen implementation: 'c'
-- when the C extension is installed (fence.c_guard() exists), else
-- 'plpgsql'; the four-argument form forces one.  Run again to change the
-- mode or the implementation, or after renaming the column.  Needs only
-- EXECUTE on this function (and ownership of TBL).  The body is shared by
-- both signatures (written once below): the four-argument one is a new
-- function, so that a GRANT on the three-argument one keeps working alone.
DO $protect$
DECLARE
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
    -- that still exists under its recorded name counts.)
    SELECT p.col INTO old_col FROM fence.protected p WHERE p.tbl = protect_tbl
       AND EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                   WHERE a.attrelid = protect_tbl AND a.attname = p.col AND a.attnum > 0 AND NOT a.attisdropped);
    IF move THEN
        IF old_col IS NULL THEN
            RAISE EXCEPTION 'fence: move_guard: % is not protected (use fence.protect())', tbl USING ERRCODE = '22023';
        ELSIF old_col = col THEN
            RAISE EXCEPTION 'fence: move_guard: % is already guarded by column %', tbl, pg_catalog.quote_ident(col)
                USING ERRCODE = '22023';
        END IF;
    ELSIF old_col IS NOT NULL AND old_col <> col THEN
        RAISE EXCEPTION 'fence: % is protected with token column %; refusing to guard it by column % instead (its stamps would be lost and older tokens admitted)',
                tbl, pg_catalog.quote_ident(old_col), pg_catalog.quote_ident(col)
            USING ERRCODE = '22023',
                  HINT = pg_catalog.format('To move the guard to another column on purpose: SELECT fence.move_guard(%L, %L);  it carries every row''s stamp over.',
                                           tbl::text, col);
    END IF;

    FOR trig IN
        SELECT t.tgname FROM pg_catalog.pg_trigger t
        WHERE t.tgrelid = tbl
          AND t.tgname IN ('zz_fence_guard_ins', 'zz_fence_guard_upd', 'zz_fence_guard_del',
                           'zz_fence_guard_truncate', 'zz_fence_check_ins', 'zz_fence_check_upd')
    LOOP
        EXECUTE pg_catalog.format('DROP TRIGGER %I ON %s', trig.tgname, tbl);
    END LOOP;

    SELECT a.atttypid, a.attnotnull, a.attidentity, a.attgenerated INTO att
    FROM pg_catalog.pg_attribute a
    WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
    IF NOT FOUND THEN
        EXECUTE pg_catalog.format('ALTER TABLE %s ADD COLUMN %I bigint NOT NULL DEFAULT 0', tbl, col);
    ELSE
        IF att.attidentity <> '' OR att.attgenerated <> '' THEN
            RAISE EXCEPTION 'fence: column % of % is an identity or generated column', pg_catalog.quote_ident(col), tbl
                USING ERRCODE = '22023';
        END IF;
        IF att.atttypid NOT IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype) THEN
            RAISE EXCEPTION 'fence: column % of % has type %; a token column must be smallint, integer or bigint',
                    pg_catalog.quote_ident(col), tbl, att.atttypid::regtype
                USING ERRCODE = '22023';
        END IF;
        IF att.atttypid <> 'int8'::regtype THEN
            EXECUTE pg_catalog.format('ALTER TABLE %s ALTER COLUMN %I TYPE bigint USING COALESCE(%I, 0)',
                                      tbl, col, col);
        ELSIF NOT att.attnotnull THEN
            EXECUTE pg_catalog.format('UPDATE %s SET %I = 0 WHERE %I IS NULL', tbl, col, col);
        END IF;
        EXECUTE pg_catalog.format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT 0, ALTER COLUMN %I SET NOT NULL',
                                  tbl, col, col);
    END IF;
    IF move THEN
        -- Every row keeps at least its stamp (no guard is attached now, and
        -- the table is locked; the table's own triggers do fire).
        EXECUTE pg_catalog.format('UPDATE %s SET %I = %I WHERE %I OPERATOR(pg_catalog.<) %I',
                                  tbl, col, old_col, col, old_col);
    END IF;

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
        'fence_token', 'DECLARE use_impl text := NULL; move constant boolean := false; protect_tbl constant regclass := tbl;' || body);
    EXECUTE pg_catalog.format(
        'CREATE OR REPLACE FUNCTION fence.protect(tbl regclass, col name, permissive boolean, impl text)'
        ' RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS %L',
        'DECLARE use_impl text := COALESCE(impl, ''NULL''); move constant boolean := false; protect_tbl constant regclass := tbl;' || body);
    -- Move TBL's guard to column COL (made or converted as protect() does),
    -- keeping its mode and implementation; each row's new column becomes
    -- at least its old stamp.  Same rights as protect().
    EXECUTE pg_catalog.format(
        'CREATE OR REPLACE FUNCTION fence.move_guard(tbl regclass, col name)'
        ' RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS %L',
        'DECLARE protect_tbl constant regclass := tbl; move constant boolean := true;'
        ' permissive boolean := COALESCE((SELECT p.mode = ''permissive'' FROM fence.protected p WHERE p.tbl = protect_tbl), false);'
        ' use_impl text := COALESCE((SELECT p.implementation FROM fence.protected p WHERE p.tbl = protect_tbl), ''plpgsql'');'
        || body);
END
$protect$;
REVOKE ALL ON FUNCTION fence.protect(regclass, name, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.protect(regclass, name, boolean, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.move_guard(regclass, name) FROM PUBLIC;

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

-- 80-events.sql -- part of fence.sql: the event triggers: later BEFORE triggers get their checks, dropped tables leave the registry.
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
    ELSIF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_event_trigger e
                      WHERE e.evtname = 'fence_later_triggers' AND e.evtenabled <> 'D') THEN
        RAISE WARNING 'fence: installed by %, not a superuser: no event trigger watches for BEFORE triggers created later on protected tables',
                pg_catalog.quote_ident(current_user)
            USING HINT = 'A BEFORE row trigger that sorts after zz_fence_guard_* and is created after fence.protect() is not checked until fence.protect() runs again on its table (SELECT * FROM fence.protected WHERE check_needed AND NOT check_present).  A dropped protected table stays in fence.tables until the next fence.protect(), fence.unprotect() or install (a dump taken meanwhile holds its oid).  A superuser may re-run this script to add the event triggers.';
    END IF;
END
$event$;

-- 85-grant.sql -- part of fence.sql: what applications may call, and fence.grant().
-- The parts are joined in name order into $(B)/sql/postgres/fence.sql
-- (lib/pg/module.mk), the one script that psql -f, fence_pg_install()
-- and make install use; it runs as one transaction (BEGIN in
-- 10-schema.sql, COMMIT in 90-upgrade.sql).  See docs/postgres.md.

-- ------------------------------------------------------------------
-- What applications may call
-- ------------------------------------------------------------------

REVOKE ALL ON FUNCTION fence.mark(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.mark_holder(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.current_token(boolean, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.version() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fence.mark(text) TO PUBLIC;
GRANT EXECUTE ON FUNCTION fence.mark_holder(text) TO PUBLIC;
GRANT EXECUTE ON FUNCTION fence.current_token(boolean, text) TO PUBLIC;
-- use_token sets nothing but the caller's own transaction settings.
REVOKE ALL ON FUNCTION fence.use_token(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fence.use_token(bigint, text) TO PUBLIC;
GRANT EXECUTE ON FUNCTION fence.version() TO PUBLIC;
-- advance() only on a fresh install, so that an operator's REVOKE (see
-- the top) survives re-installs.
DO $grant$
BEGIN
    IF pg_catalog.current_setting('fence.install_from') = '0' THEN
        REVOKE ALL ON FUNCTION fence.advance(text, bigint) FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION fence.advance(text, bigint) TO PUBLIC;
    END IF;
END
$grant$;


-- One call to restrict fence.advance() to ROLE: grants it EXECUTE on
-- fence.advance (and on fence.mark, mark_holder, current_token and
-- version where PUBLIC has lost it, and USAGE on the schema likewise),
-- then revokes EXECUTE on fence.advance from PUBLIC (unless revoke_public
-- is false).  Idempotent; call it once per application role.  Only the
-- owner of schema fence (the installer) may run it.  Re-installing keeps
-- what it did (advance() is granted to PUBLIC only on a fresh install).
CREATE OR REPLACE FUNCTION fence.grant(role regrole, revoke_public boolean DEFAULT true) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f regprocedure;
BEGIN
    IF role IS NULL OR revoke_public IS NULL THEN
        RAISE EXCEPTION 'fence: grant: role and revoke_public must not be NULL' USING ERRCODE = '22023';
    END IF;
    IF NOT pg_catalog.pg_has_role(current_user,
                                  (SELECT n.nspowner FROM pg_catalog.pg_namespace n WHERE n.nspname = 'fence'),
                                  'USAGE') THEN
        RAISE EXCEPTION 'fence: grant: only the owner of schema fence (the role that installed it) may grant fence.advance(), not %',
                pg_catalog.quote_ident(current_user)
            USING ERRCODE = '42501';
    END IF;
    IF NOT pg_catalog.has_schema_privilege('public', 'fence', 'USAGE') THEN
        EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA fence TO %s', role);
    END IF;
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION fence.advance(text, bigint) TO %s', role);
    FOREACH f IN ARRAY ARRAY['fence.mark(text)', 'fence.mark_holder(text)',
                             'fence.current_token(boolean, text)', 'fence.version()']::regprocedure[]
    LOOP
        IF NOT pg_catalog.has_function_privilege('public', f, 'EXECUTE') THEN
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s', f, role);
        END IF;
    END LOOP;
    IF revoke_public THEN
        REVOKE EXECUTE ON FUNCTION fence.advance(text, bigint) FROM PUBLIC;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION fence.grant(regrole, boolean) FROM PUBLIC;

-- 90-upgrade.sql -- part of fence.sql: upgrades from older versions and repairs, then COMMIT.
-- The parts are joined in name order into $(B)/sql/postgres/fence.sql
-- (lib/pg/module.mk), the one script that psql -f, fence_pg_install()
-- and make install use; it runs as one transaction (BEGIN in
-- 10-schema.sql, COMMIT in 90-upgrade.sql).  See docs/postgres.md.

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

-- fence.tables: every table fence.protected lists and fence.tables does
-- not yet (tables protected before fence.tables existed) is recorded as it
-- is.  Then the repair: every recorded table whose guard is not whole
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
        SELECT v.tbl, v.col, v.mode, v.implementation,
               pg_catalog.string_agg(v.reason, '; ' ORDER BY v.reason) AS reasons
        FROM fence.verify() v
        GROUP BY 1, 2, 3, 4
        ORDER BY v.tbl::text
    LOOP
        impl := r.implementation;
        IF impl = 'c' AND NOT have_c THEN
            impl := 'plpgsql';
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                       WHERE a.attrelid = r.tbl AND a.attname = r.col AND a.attnum > 0 AND NOT a.attisdropped
                         AND a.atttypid = 'pg_catalog.int8'::regtype AND a.attnotnull
                         AND a.attidentity = '' AND a.attgenerated = '') THEN
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
