-- fence.sql -- storage-side fencing for PostgreSQL: schema "fence", version 3.
--
-- A write carries a fencing token (a 64-bit number from a lease, 1..2^63-1)
-- and, optionally, the id of its holder (the lease's 128-bit owner id as 32
-- lowercase hex digits).  The store remembers the highest token it has
-- accepted -- per row, or per named resource -- and rejects any write whose
-- token is lower.  An equal token is admitted (one holder writes many
-- times); at a resource only from the holder recorded with it, so that a
-- token issued twice (a Redis failover, restart or eviction) admits only
-- the first holder that used it.  Rows compare tokens only.
--
-- Install (idempotent; run it again to upgrade, never to downgrade):
--     psql -v ON_ERROR_STOP=1 -f sql/postgres/fence.sql
-- or fence_pg_install() from lib/pg/fence_pg.h, which runs this same file.
-- Run it as the role that should own the schema (a superuser or a dedicated
-- "fence admin" role), never from an application's own connection: the
-- installer must own schema "fence" and everything in it.  The script
-- refuses (42501) a schema "fence" that another role owns, or one holding an
-- object another role owns (table, index, view, function, type, operator,
-- ...), a trigger on its tables calling a function from elsewhere, CREATE on
-- the schema granted to another role, or write/TRIGGER/REFERENCES/TRUNCATE
-- on its tables (or their columns) granted to another role: any of these
-- would let that role run code inside fence.advance() with the installer's
-- rights, or drop the guards.  The script pins its own search_path
-- (pg_catalog, pg_temp), so the caller's search_path cannot bind anything
-- it creates to a user-writable schema.
--
-- Upgrading from version 1 or 2: run this script; it upgrades in place.
-- From either, fence.marks gains the column holder (ACCESS EXCLUSIVE lock
-- on fence.marks briefly); every existing mark keeps its token and has no
-- holder, so until it is raised only writers with no holder may repeat its
-- token.  From version 1 it also re-protects every table protected by
-- version 1 (same column and mode, which takes each table's ACCESS
-- EXCLUSIVE lock briefly) when the installer may, and WARNs naming those it
-- may not (not the owner, or the table has inheritance children): run
-- fence.protect() on those as their owner.  Constraints of fence.marks
-- bound to operators outside pg_catalog are re-created.
--
-- The writer's token
--     The token is read from the transaction-local setting fence.token:
--         BEGIN; SET LOCAL fence.token = 42; UPDATE ...; COMMIT;
--     or  SELECT pg_catalog.set_config('fence.token', '42', true);
--     It must be a canonical decimal 1..9223372036854775807: no sign, no
--     spaces, no leading zeros, no decimals.  Missing, '', 'abc', '-1', '0',
--     '1.5', ' 7', '007' and anything above 2^63-1 are rejected.
--
-- The writer's holder
--     The holder is read from the transaction-local setting fence.holder:
--         BEGIN; SET LOCAL fence.token = 42;
--         SET LOCAL fence.holder = '0123456789abcdef0123456789abcdef'; ...
--     Exactly 32 lowercase hex digits; unset or '' means "no holder".
--     Anything else (wrong length, uppercase, non-hex) makes fence.advance()
--     fail closed with 23Q02 naming fence.holder.  Only fence.advance()
--     reads it: row triggers compare tokens only.  Like fence.token, a
--     session-level SET fence.holder holds for every later transaction of
--     the session; SET LOCAL (set_config(..., true)) for one.
--
-- Per-row mode: SELECT fence.protect('orders');  -- column fence_token
--               SELECT fence.protect('orders', 'lock_version');  -- retrofit
--     Adds the column if missing (bigint NOT NULL DEFAULT 0; 0 = never
--     fenced).  An existing smallint/integer/bigint column becomes bigint NOT
--     NULL DEFAULT 0, its NULLs 0.  BEFORE row triggers (named
--     zz_fence_guard_* so that they fire after the table's other BEFORE
--     triggers) check every INSERT, UPDATE and DELETE -- COPY FROM included
--     -- and stamp the row with the writer's token; whatever a client writes
--     into the column itself is overwritten.  A row can only be updated or
--     deleted with a token >= its stamp.  TRUNCATE is refused.  A WHEN
--     clause skips the trigger function entirely when the row is already
--     stamped with exactly the writer's token and the column is not being
--     written, which is the hot path of a holder that writes many times.
--     AFTER row triggers (zz_fence_check_ins/_upd) check the row as it is
--     finally written: if a BEFORE trigger that fires later (its name sorts
--     after zz_fence_guard_*) rewrote the column, the write is refused with
--     23Q03.  Their WHEN clause is false when the final stamp is exactly the
--     writer's token, so on the hot path they queue nothing.  protect()
--     WARNs about such later BEFORE triggers, and about roles other than the
--     owner holding TRIGGER on the table.
--     An INSERT of a new row has no stamp to compare with: it only needs a
--     valid token (and is stamped with it).  An INSERT ... ON CONFLICT DO
--     UPDATE that hits an existing row is checked against that row's stamp.
--     To fence the creation of rows (or anything else not tied to one row),
--     call fence.advance() on a resource in the same transaction.
--     Only the table itself is covered: protect() refuses (22023) a table
--     with inheritance children, and partitioned tables; protect each child
--     or partition instead.  A child attached later (CREATE TABLE ...
--     INHERITS, ALTER TABLE ... INHERIT, both need the table's owner) is not
--     covered either.
--   fence.set_mode('orders', 'permissive')  -- or protect(..., permissive => true)
--     Migration mode: writes with NO token (setting missing or '') are
--     admitted (UPDATE keeps the stamp, INSERT stamps 0); malformed tokens
--     and stale tokens are still rejected.  set_mode('orders', 'strict')
--     goes back.  (In this mode a write with no token runs the AFTER check's
--     function for every row.)
--   fence.unprotect('orders') drops the triggers and keeps the column.
--   SELECT * FROM fence.protected lists protected tables, columns, modes.
--   protect/unprotect/set_mode run with the caller's rights (the caller must
--   own the table); EXECUTE on them is not granted to PUBLIC.  To let a
--   table owner that is not the installer protect its tables:
--       GRANT EXECUTE ON FUNCTION fence.protect(regclass, name, boolean) TO owner_role;
--   (set_mode calls protect: grant both; unprotect on its own).  The trigger
--   functions row_guard, row_check and refuse_truncate are EXECUTE to PUBLIC
--   so that CREATE TRIGGER works for any table owner; a trigger function
--   cannot be called directly.
--
-- Per-resource mode: SELECT fence.advance('jobs/42', 34);
--     In the writer's transaction, atomically raises the resource's
--     high-water mark to the token and keeps the mark's row locked until
--     commit, so a stale writer that comes later in any interleaving waits,
--     then is rejected.  Returns the mark.  A mark is a token and the holder
--     that wrote it (fence.holder, NULL for none).  Given the writer's token
--     t and holder h, and the mark (T, H): t > T is admitted and the mark
--     becomes (t, h); t = T is admitted only when h is H ("no holder" is
--     equal only to "no holder"), else rejected as a repeat (23Q01,
--     reason=repeat); t < T is rejected (23Q01, reason=older).  A new
--     resource admits any token.
--     Marks are never lowered or deleted: applications cannot write
--     fence.marks at all, and a trigger refuses lowering, deleting,
--     truncating and changing the holder at the same token even for its
--     owner.  fence.mark('jobs/42') reads a mark's token (0 when none),
--     fence.mark_holder('jobs/42') its holder (NULL when none).  Resource
--     names are 1..512 bytes.
--     Rows: the per-row triggers compare tokens only, so a repeated token
--     passes them.  For repeat-proof fencing of rows, advance a resource in
--     the same transaction (fence_pg_set_token does both in one round trip).
--
-- Errors (SQLSTATE):
--   23Q01  stale token.  Message: "fence: stale token 33 for public.orders
--          (highest seen 34)" or "... for resource "jobs/42" ..." (a
--          repeat: "... (highest seen 34, recorded for a different
--          holder)").
--          DETAIL, machine-readable, one line, reason (and holder) last:
--            offered=33 highest=34 kind=table object=public.orders reason=older
--            offered=33 highest=34 kind=resource object=jobs/42 reason=older
--            offered=34 highest=34 kind=resource object=jobs/42 reason=repeat holder=<32 hex>
--          " holder=<32 hex>" is the holder recorded with the mark, present
--          only when the mark has one (resources only).  object is what
--          lies between " object=" and the last " reason=" (a resource
--          name may hold any byte but NUL); the table form is the quoted,
--          schema-qualified name.  Version 2 wrote the same without
--          " reason=..." (object was the rest of the line).  For tables the
--          error's SCHEMA, TABLE and COLUMN fields are set too.
--   23Q02  no valid token: fence.token missing, empty or malformed (or a
--          token <= 0 given to fence.advance), or fence.holder malformed
--          (DETAIL: reason=malformed setting=fence.holder).  DETAIL says
--          which.
--   23Q03  operation refused on fenced data: TRUNCATE of a protected table,
--          lowering/deleting/truncating a high-water mark, a token column
--          rewritten after the check by a later BEFORE trigger (DETAIL:
--          written=N expected=M kind=table object=...).
--   22023  bad argument to a fence function (NULL, empty or oversized name,
--          a table that cannot be protected).
--   42501  install: schema "fence" or something in it belongs to another role.
--
-- Security model and its limits:
--   * fence.marks is writable only through fence.advance() (SECURITY
--     DEFINER, search_path pinned).  Only advance(), mark(), mark_holder(),
--     current_token(), version(), the trigger functions and the
--     fence.protected view are granted to PUBLIC.  Disabling or dropping the triggers needs ownership
--     of the table.
--   * Tokens are self-declared.  The check stops a stale but honest writer
--     (a paused or partitioned lease holder); it does not stop a hostile
--     role that can write the table: such a role can set fence.token to
--     9223372036854775807 and stamp rows so that every honest writer is
--     refused from then on.  Only give write access to code that takes its
--     token from the lease.  Holders are self-declared too: the holder
--     rule stops an honest second holder of a repeated token, not a role
--     that copies another holder's id.  Holder ids are not secret to
--     fence: any role that may call fence.mark_holder() or fence.advance()
--     on a resource can read the holder recorded with its mark.
--   * A role that holds TRIGGER on a protected table (GRANT ALL includes it)
--     can run its own code in every writer's transaction: the AFTER check
--     refuses a rewritten column, but such code can also change fence.token
--     itself.  Do not grant TRIGGER on protected tables.
--   * session_replication_role = replica stops ordinary triggers, fence's
--     included.  Setting it needs superuser -- or, since PostgreSQL 15, a
--     role granted SET ON PARAMETER session_replication_role: such a role
--     can switch fencing off.  (Logical replication apply workers run as
--     replica, which is why the triggers are not ENABLE ALWAYS.)
--   * fence.advance() is EXECUTE to PUBLIC and resource names have no
--     namespaces: any role that can connect can raise any resource's mark
--     (up to 2^63-1, making every later writer stale).  To restrict it:
--         REVOKE EXECUTE ON FUNCTION fence.advance(text, bigint) FROM PUBLIC;
--         GRANT EXECUTE ON FUNCTION fence.advance(text, bigint) TO app_role;
--     Re-running this script keeps that: advance() is granted to PUBLIC
--     only on a fresh install.

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
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(7274243561983541);
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
          AND (p.pronamespace <> ns OR p.proowner <> me)
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
    IF v > 3 THEN
        RAISE EXCEPTION 'fence: schema version % is installed, this script is version 3; refusing to downgrade', v;
    END IF;
    PERFORM pg_catalog.set_config('fence.install_from', COALESCE(v, 0)::text, true);
END
$install$;

INSERT INTO fence.meta (version) VALUES (3)
ON CONFLICT (singleton) DO UPDATE SET version = EXCLUDED.version;

-- The schema version of this install script.
CREATE OR REPLACE FUNCTION fence.version() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 3 $$;
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
                  HINT = 'Set it in the writing transaction: SET LOCAL fence.token = <token>.';
    END IF;
    IF raw !~ '^[1-9][0-9]{0,18}$'
       OR (pg_catalog.length(raw) = 19 AND raw COLLATE "C" > '9223372036854775807') THEN
        RAISE EXCEPTION 'fence: malformed fencing token % for %',
                pg_catalog.quote_literal(pg_catalog.left(raw, 40)), what
            USING ERRCODE = '23Q02',
                  DETAIL = 'reason=malformed',
                  HINT = 'fence.token must be a decimal integer 1..9223372036854775807, no sign, spaces or leading zeros.';
    END IF;
    RETURN raw::bigint;
END
$$;


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
-- without raising its token (even by its owner).
CREATE OR REPLACE FUNCTION fence.marks_guard() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        RAISE EXCEPTION 'fence: high-water mark of resource % cannot be lowered (% to %) or renamed, nor its holder changed at the same token',
                pg_catalog.quote_ident(OLD.resource), OLD.token, NEW.token
            USING ERRCODE = '23Q03';
    END IF;
    IF TG_LEVEL = 'STATEMENT' THEN
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
    FOR EACH ROW
    WHEN (NEW.token OPERATOR(pg_catalog.<) OLD.token
          OR NEW.resource OPERATOR(pg_catalog.<>) OLD.resource
          OR (NEW.token OPERATOR(pg_catalog.=) OLD.token
              AND COALESCE(NEW.holder, '') OPERATOR(pg_catalog.<>) COALESCE(OLD.holder, '')))
    EXECUTE FUNCTION fence.marks_guard();
DROP TRIGGER IF EXISTS marks_no_delete ON fence.marks;
CREATE TRIGGER marks_no_delete BEFORE DELETE ON fence.marks
    FOR EACH ROW EXECUTE FUNCTION fence.marks_guard();
DROP TRIGGER IF EXISTS marks_no_truncate ON fence.marks;
CREATE TRIGGER marks_no_truncate BEFORE TRUNCATE ON fence.marks
    FOR EACH STATEMENT EXECUTE FUNCTION fence.marks_guard();

-- Raise RESOURCE's high-water mark to TOKEN, recording the writer's holder
-- (the setting fence.holder), or raise 23Q01 when the mark is higher, or
-- equal but recorded for a different holder (a repeated token).  The
-- mark's row stays locked until the transaction ends (SELECT ... FOR
-- UPDATE, or INSERT ... ON CONFLICT DO UPDATE, which locks the row even
-- when its WHERE is false), so the writes that follow in the same
-- transaction cannot be overtaken by a writer with a lower token.  Returns
-- the mark (= TOKEN).
CREATE OR REPLACE FUNCTION fence.advance(resource text, token bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    seen bigint;
    seen_holder text;
    writer text := pg_catalog.current_setting('fence.holder', true);
BEGIN
    IF advance.resource IS NULL OR pg_catalog.octet_length(advance.resource) NOT BETWEEN 1 AND 512 THEN
        RAISE EXCEPTION 'fence: resource name must be 1..512 bytes, got %',
                COALESCE(pg_catalog.octet_length(advance.resource)::text || ' bytes', 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF advance.token IS NULL OR advance.token <= 0 THEN
        RAISE EXCEPTION 'fence: no valid fencing token for resource %: % (tokens are 1..9223372036854775807)',
                pg_catalog.quote_ident(advance.resource), COALESCE(advance.token::text, 'NULL')
            USING ERRCODE = '23Q02',
                  DETAIL = 'reason=' || CASE WHEN advance.token IS NULL THEN 'missing' ELSE 'malformed' END;
    END IF;
    -- The writer's holder: unset or '' is none; anything but 32 lowercase
    -- hex digits fails closed.
    IF writer = '' THEN
        writer := NULL;
    ELSIF writer !~ '^[0-9a-f]{32}$' THEN
        RAISE EXCEPTION 'fence: malformed holder % in fence.holder for resource %',
                pg_catalog.quote_literal(pg_catalog.left(writer, 40)), pg_catalog.quote_ident(advance.resource)
            USING ERRCODE = '23Q02',
                  DETAIL = 'reason=malformed setting=fence.holder',
                  HINT = 'fence.holder must be the lease''s holder id, 32 lowercase hex digits, or empty for none.';
    END IF;

    -- The common case, the mark exists: lock its row and read it in one
    -- statement (FOR UPDATE waits for a concurrent writer and then sees
    -- its committed mark), raise it if lower.
    SELECT m.token, m.holder INTO seen, seen_holder
    FROM fence.marks m WHERE m.resource = advance.resource FOR UPDATE;
    IF NOT FOUND THEN
        -- A new resource, possibly created concurrently: ON CONFLICT waits
        -- for the other inserter and then locks its row (even when its
        -- WHERE is false).
        INSERT INTO fence.marks AS m (resource, token, holder)
        VALUES (advance.resource, advance.token, writer)
        ON CONFLICT (resource) DO UPDATE
            SET token = EXCLUDED.token, holder = EXCLUDED.holder, updated_at = pg_catalog.now()
            WHERE m.token < EXCLUDED.token;
        IF FOUND THEN
            RETURN advance.token;
        END IF;
        SELECT m.token, m.holder INTO seen, seen_holder
        FROM fence.marks m WHERE m.resource = advance.resource;
    END IF;
    IF seen > advance.token THEN
        RAISE EXCEPTION 'fence: stale token % for resource % (highest seen %)',
                advance.token, pg_catalog.quote_ident(advance.resource), seen
            USING ERRCODE = '23Q01',
                  DETAIL = pg_catalog.format('offered=%s highest=%s kind=resource object=%s reason=older%s',
                                             advance.token, seen, advance.resource,
                                             ' holder=' || seen_holder);
    END IF;
    IF seen < advance.token THEN
        UPDATE fence.marks m SET token = advance.token, holder = writer, updated_at = pg_catalog.now()
        WHERE m.resource = advance.resource;
    ELSIF seen_holder IS DISTINCT FROM writer THEN
        RAISE EXCEPTION 'fence: stale token % for resource % (highest seen %, recorded for a different holder)',
                advance.token, pg_catalog.quote_ident(advance.resource), seen
            USING ERRCODE = '23Q01',
                  DETAIL = pg_catalog.format('offered=%s highest=%s kind=resource object=%s reason=repeat%s',
                                             advance.token, seen, advance.resource,
                                             ' holder=' || seen_holder),
                  HINT = 'The token was issued twice (e.g. after a Redis failover); only the holder it was recorded for may repeat it.  Acquire the lease again for a higher token.';
    END IF;
    RETURN advance.token;
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


-- ------------------------------------------------------------------
-- Per-row mode
-- ------------------------------------------------------------------

-- BEFORE row trigger of protected tables: checks the writer's token
-- against the row's stamp and stamps the row.  TG_ARGV[0]: the token
-- column; TG_ARGV[1]: 'strict' or 'permissive'.  Runs with the writer's
-- rights and needs none; everything is schema-qualified instead of pinning
-- search_path, which would cost a configuration save/restore per row.
CREATE OR REPLACE FUNCTION fence.row_guard() RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    col text := TG_ARGV[0];
    raw text := pg_catalog.current_setting('fence.token', true);
    obj text := pg_catalog.quote_ident(TG_TABLE_SCHEMA) || '.' || pg_catalog.quote_ident(TG_TABLE_NAME);
    tok bigint;
    seen bigint;
BEGIN
    IF raw IS NULL OR raw OPERATOR(pg_catalog.=) '' THEN
        IF TG_ARGV[1] OPERATOR(pg_catalog.<>) 'permissive' THEN
            RAISE EXCEPTION 'fence: no fencing token for % on %', TG_OP, obj
                USING ERRCODE = '23Q02', DETAIL = 'reason=missing',
                      HINT = 'Set it in the writing transaction: SET LOCAL fence.token = <token>.',
                      SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME, COLUMN = col;
        END IF;
    ELSIF raw OPERATOR(pg_catalog.!~) '^[1-9][0-9]{0,18}$'
          OR (pg_catalog.length(raw) OPERATOR(pg_catalog.=) 19
              AND raw COLLATE pg_catalog."C" OPERATOR(pg_catalog.>) '9223372036854775807') THEN
        RAISE EXCEPTION 'fence: malformed fencing token % for % on %',
                pg_catalog.quote_literal(pg_catalog.left(raw, 40)), TG_OP, obj
            USING ERRCODE = '23Q02', DETAIL = 'reason=malformed',
                  HINT = 'fence.token must be a decimal integer 1..9223372036854775807, no sign, spaces or leading zeros.',
                  SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME, COLUMN = col;
    ELSE
        tok := raw::pg_catalog.int8;
    END IF;

    IF TG_OP OPERATOR(pg_catalog.=) 'INSERT' THEN
        RETURN pg_catalog.jsonb_populate_record(NEW,
                   pg_catalog.jsonb_build_object(col, COALESCE(tok, 0)));
    END IF;

    seen := COALESCE((pg_catalog.to_jsonb(OLD) OPERATOR(pg_catalog.->>) col)::pg_catalog.int8, 0);
    IF tok OPERATOR(pg_catalog.<) seen THEN
        RAISE EXCEPTION 'fence: stale token % for % (highest seen %)', tok, obj, seen
            USING ERRCODE = '23Q01',
                  DETAIL = pg_catalog.format('offered=%s highest=%s kind=table object=%s reason=older', tok, seen, obj),
                  SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME, COLUMN = col;
    END IF;
    IF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN pg_catalog.jsonb_populate_record(NEW,
               pg_catalog.jsonb_build_object(col, COALESCE(tok, seen)));
END
$$;

-- AFTER INSERT/UPDATE row trigger of protected tables: the row as finally
-- written must carry the stamp row_guard gave it -- the writer's token, or
-- with no token in permissive mode the kept stamp (OLD's on UPDATE, 0 on
-- INSERT).  A BEFORE trigger that fires after zz_fence_guard_* and
-- rewrites the column would otherwise switch fencing off (e.g. stamp 0,
-- after which any token passes).  Raises 23Q03.  Only runs when its WHEN
-- clause finds the final stamp is not exactly the writer's token.
CREATE OR REPLACE FUNCTION fence.row_check() RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    col text := TG_ARGV[0];
    raw text := pg_catalog.current_setting('fence.token', true);
    obj text := pg_catalog.quote_ident(TG_TABLE_SCHEMA) || '.' || pg_catalog.quote_ident(TG_TABLE_NAME);
    written bigint := (pg_catalog.to_jsonb(NEW) OPERATOR(pg_catalog.->>) col)::pg_catalog.int8;
    want bigint;
BEGIN
    IF raw IS NULL OR raw OPERATOR(pg_catalog.=) '' THEN
        IF TG_ARGV[1] OPERATOR(pg_catalog.<>) 'permissive' THEN
            RAISE EXCEPTION 'fence: no fencing token for % on % (fence.token was cleared during the statement)', TG_OP, obj
                USING ERRCODE = '23Q02', DETAIL = 'reason=missing',
                      SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME, COLUMN = col;
        END IF;
        IF TG_OP OPERATOR(pg_catalog.=) 'INSERT' THEN
            want := 0;
        ELSE
            want := COALESCE((pg_catalog.to_jsonb(OLD) OPERATOR(pg_catalog.->>) col)::pg_catalog.int8, 0);
        END IF;
    ELSIF raw OPERATOR(pg_catalog.!~) '^[1-9][0-9]{0,18}$'
          OR (pg_catalog.length(raw) OPERATOR(pg_catalog.=) 19
              AND raw COLLATE pg_catalog."C" OPERATOR(pg_catalog.>) '9223372036854775807') THEN
        RAISE EXCEPTION 'fence: malformed fencing token % for % on %',
                pg_catalog.quote_literal(pg_catalog.left(raw, 40)), TG_OP, obj
            USING ERRCODE = '23Q02', DETAIL = 'reason=malformed',
                  SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME, COLUMN = col;
    ELSE
        want := raw::pg_catalog.int8;
    END IF;
    IF written IS NULL OR written OPERATOR(pg_catalog.<>) want THEN
        RAISE EXCEPTION 'fence: % of % was rewritten after the fencing check (% written, % expected) on %',
                pg_catalog.quote_ident(col), obj, COALESCE(written::pg_catalog.text, 'NULL'), want, TG_OP
            USING ERRCODE = '23Q03',
                  DETAIL = pg_catalog.format('written=%s expected=%s kind=table object=%s',
                                             COALESCE(written::pg_catalog.text, 'NULL'), want, obj),
                  HINT = 'A BEFORE trigger that fires after zz_fence_guard_* (triggers fire in name order) writes the token column; it must not.',
                  SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME, COLUMN = col;
    END IF;
    RETURN NULL;
END
$$;

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
GRANT EXECUTE ON FUNCTION fence.row_guard() TO PUBLIC;
GRANT EXECUTE ON FUNCTION fence.row_check() TO PUBLIC;
GRANT EXECUTE ON FUNCTION fence.refuse_truncate() TO PUBLIC;

-- Drop fence's triggers from TBL (no error when there are none).
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
END
$$;
REVOKE ALL ON FUNCTION fence.unprotect(regclass) FROM PUBLIC;

-- Protect TBL: make COL (default fence_token) a bigint NOT NULL DEFAULT 0
-- stamp column (adding it, or converting an existing integer column and
-- its NULLs), and install the triggers.  Run again to change the mode.
-- Needs only EXECUTE on this function (and ownership of TBL).
CREATE OR REPLACE FUNCTION fence.protect(tbl regclass, col name DEFAULT 'fence_token',
                                         permissive boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    kind "char";
    att record;
    trig record;
    children text;
    mode text := CASE WHEN permissive THEN 'permissive' ELSE 'strict' END;
    -- The WHEN clauses skip the trigger function when the row already
    -- carries exactly the writer's token (and, BEFORE UPDATE, the column
    -- is not written): the setting's text equals the stamp's canonical
    -- text, and the stamp is > 0, only for a valid token equal to the
    -- stamp.  A comparison with a NULL operand is NULL, which makes the
    -- AND NULL or false, and "IS NOT TRUE" runs the function: a NULL never
    -- skips a check.  They are kept short: PostgreSQL reads and prepares
    -- each WHEN clause once per statement.  Every operator is spelled
    -- OPERATOR(pg_catalog.x), and search_path is pinned here anyway.
    setting CONSTANT text := 'pg_catalog.current_setting(''fence.token'', true)';
BEGIN
    IF tbl IS NULL OR col IS NULL OR col = '' OR permissive IS NULL THEN
        RAISE EXCEPTION 'fence: protect: table, column and mode must not be NULL or empty'
            USING ERRCODE = '22023';
    END IF;
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

    EXECUTE pg_catalog.format(
        'CREATE TRIGGER zz_fence_guard_ins BEFORE INSERT ON %1$s FOR EACH ROW'
        ' WHEN ((%5$s OPERATOR(pg_catalog.=) NEW.%2$I::pg_catalog.text'
        ' AND NEW.%2$I OPERATOR(pg_catalog.>) 0) IS NOT TRUE)'
        ' EXECUTE FUNCTION fence.row_guard(%3$L, %4$L)', tbl, col, col, mode, setting);
    EXECUTE pg_catalog.format(
        'CREATE TRIGGER zz_fence_guard_upd BEFORE UPDATE ON %1$s FOR EACH ROW'
        ' WHEN ((%5$s OPERATOR(pg_catalog.=) OLD.%2$I::pg_catalog.text'
        ' AND NEW.%2$I OPERATOR(pg_catalog.=) OLD.%2$I'
        ' AND OLD.%2$I OPERATOR(pg_catalog.>) 0) IS NOT TRUE)'
        ' EXECUTE FUNCTION fence.row_guard(%3$L, %4$L)', tbl, col, col, mode, setting);
    EXECUTE pg_catalog.format(
        'CREATE TRIGGER zz_fence_guard_del BEFORE DELETE ON %1$s FOR EACH ROW'
        ' WHEN ((%5$s OPERATOR(pg_catalog.=) OLD.%2$I::pg_catalog.text'
        ' AND OLD.%2$I OPERATOR(pg_catalog.>) 0) IS NOT TRUE)'
        ' EXECUTE FUNCTION fence.row_guard(%3$L, %4$L)', tbl, col, col, mode, setting);
    EXECUTE pg_catalog.format(
        'CREATE TRIGGER zz_fence_guard_truncate BEFORE TRUNCATE ON %s FOR EACH STATEMENT'
        ' EXECUTE FUNCTION fence.refuse_truncate()', tbl);
    -- The final row must carry exactly the writer's token; else (a later
    -- BEFORE trigger rewrote it, or permissive mode with no token) the
    -- function decides.  False on the hot path: no event is queued.  The
    -- setting is a valid token here (the guard refused anything else,
    -- '0' included, before this row was written), so its text equal to the
    -- stamp's means the stamp is the token.
    EXECUTE pg_catalog.format(
        'CREATE TRIGGER zz_fence_check_ins AFTER INSERT ON %1$s FOR EACH ROW'
        ' WHEN ((%5$s OPERATOR(pg_catalog.=) NEW.%2$I::pg_catalog.text) IS NOT TRUE)'
        ' EXECUTE FUNCTION fence.row_check(%3$L, %4$L)', tbl, col, col, mode, setting);
    EXECUTE pg_catalog.format(
        'CREATE TRIGGER zz_fence_check_upd AFTER UPDATE ON %1$s FOR EACH ROW'
        ' WHEN ((%5$s OPERATOR(pg_catalog.=) NEW.%2$I::pg_catalog.text) IS NOT TRUE)'
        ' EXECUTE FUNCTION fence.row_check(%3$L, %4$L)', tbl, col, col, mode, setting);

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
$$;
REVOKE ALL ON FUNCTION fence.protect(regclass, name, boolean) FROM PUBLIC;

-- Protected tables: their token column and mode ('strict' or 'permissive').
CREATE OR REPLACE VIEW fence.protected AS
SELECT t.tgrelid::regclass AS tbl,
       pg_catalog.convert_from(pg_catalog.substring(t.tgargs, 1, a.nul OPERATOR(pg_catalog.-) 1), 'UTF8')::name AS col,
       pg_catalog.convert_from(pg_catalog.substring(t.tgargs, a.nul OPERATOR(pg_catalog.+) 1,
                                 pg_catalog.octet_length(t.tgargs) OPERATOR(pg_catalog.-) a.nul OPERATOR(pg_catalog.-) 1), 'UTF8') AS mode
FROM pg_catalog.pg_trigger t,
     LATERAL (SELECT position(pg_catalog.decode('00', 'hex') IN t.tgargs) AS nul) a
WHERE t.tgname OPERATOR(pg_catalog.=) 'zz_fence_guard_upd'
  AND t.tgfoid OPERATOR(pg_catalog.=) 'fence.row_guard()'::pg_catalog.regprocedure;
REVOKE ALL ON fence.protected FROM PUBLIC;
GRANT SELECT ON fence.protected TO PUBLIC;

-- Switch a protected table between 'strict' and 'permissive' (migration)
-- mode, keeping its column.  Calls protect(): needs EXECUTE on both.
CREATE OR REPLACE FUNCTION fence.set_mode(tbl regclass, mode text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c name;
BEGIN
    IF tbl IS NULL OR mode IS NULL OR mode NOT IN ('strict', 'permissive') THEN
        RAISE EXCEPTION 'fence: set_mode: mode must be ''strict'' or ''permissive'', got %',
                COALESCE(pg_catalog.quote_literal(mode), 'NULL')
            USING ERRCODE = '22023';
    END IF;
    SELECT p.col INTO c FROM fence.protected p WHERE p.tbl = set_mode.tbl;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fence: % is not protected (use fence.protect())', tbl USING ERRCODE = '22023';
    END IF;
    PERFORM fence.protect(tbl, c, mode = 'permissive');
END
$$;
REVOKE ALL ON FUNCTION fence.set_mode(regclass, text) FROM PUBLIC;

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

-- ------------------------------------------------------------------
-- Upgrade: tables protected by an older version get the current triggers
-- ------------------------------------------------------------------

DO $upgrade$
DECLARE
    p record;
BEGIN
    FOR p IN
        SELECT pr.tbl, pr.col, pr.mode FROM fence.protected pr
        WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t
                          WHERE t.tgrelid = pr.tbl AND t.tgname = 'zz_fence_check_upd')
        ORDER BY pr.tbl::text
    LOOP
        BEGIN
            PERFORM fence.protect(p.tbl, p.col, p.mode = 'permissive');
        EXCEPTION WHEN insufficient_privilege OR invalid_parameter_value THEN
            RAISE WARNING 'fence: % keeps the triggers of an older version, without the checks of version 2: %',
                    p.tbl, SQLERRM
                USING HINT = pg_catalog.format('As its owner: SELECT fence.protect(%L, %L, permissive => %s);',
                                               p.tbl::text, p.col,
                                               CASE WHEN p.mode = 'permissive' THEN 'true' ELSE 'false' END);
        END;
    END LOOP;
END
$upgrade$;

COMMIT;
