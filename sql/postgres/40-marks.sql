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
-- The mark rule, written once for fence.sql (fence.advance(),
-- fence.marks_guard() and fence.marks_merge() call it): what a mark --
-- MARK, recorded for MARK_HOLDER -- does with TOKEN offered by HOLDER:
--   'raise'   TOKEN is higher: admitted, the mark becomes TOKEN, HOLDER;
--   'admit'   equal, from the same holder: admitted, the mark unchanged;
--   'older'   lower: refused;
--   'repeat'  equal, from another holder: refused (the token was issued
--             twice, e.g. after a Redis failover).
-- NULL and '' are both "no holder"; NULL for a NULL mark or token (no
-- outcome: nothing admits it).  lib/common/rule.c is the same rule for the
-- C stores, tests/common/rule_cases.tsv the one table of cases both run.
-- A single SELECT of one expression, IMMUTABLE, neither STRICT nor SECURITY
-- DEFINER, no SET: the planner inlines it into the caller's expression
-- (PL/pgSQL's too), so it costs what the expression written in place
-- costs.  Inlined under the caller's search_path (fence.advance() pins
-- none): every operator is schema-qualified.
CREATE OR REPLACE FUNCTION fence.mark_rule(mark bigint, mark_holder text, token bigint, holder text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN $3 OPERATOR(pg_catalog.>) $1 THEN 'raise'
                WHEN $3 OPERATOR(pg_catalog.<) $1 THEN 'older'
                WHEN $3 OPERATOR(pg_catalog.=) $1 THEN
                    CASE WHEN COALESCE($2, '') OPERATOR(pg_catalog.=) COALESCE($4, '') THEN 'admit'
                         ELSE 'repeat' END
           END
$$;
GRANT EXECUTE ON FUNCTION fence.mark_rule(bigint, text, bigint, text) TO PUBLIC;

-- Refuses lowering, renaming and deleting a mark, and changing its holder
-- without raising its token (even by its owner).  BEFORE UPDATE it admits
-- what fence.mark_rule() admits ('raise', or 'admit': the same token and
-- holder) itself, without a WHEN clause
-- (PostgreSQL prepares a WHEN clause once per statement, which cost more
-- than this function).  Every operator is schema-qualified: it runs inside
-- fence.advance(), which no longer pins search_path (see there).
CREATE OR REPLACE FUNCTION fence.marks_guard() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF TG_OP OPERATOR(pg_catalog.=) 'UPDATE' THEN
        IF NEW.resource OPERATOR(pg_catalog.=) OLD.resource
           AND fence.mark_rule(OLD.token, OLD.holder, NEW.token, NEW.holder)
               OPERATOR(pg_catalog.=) ANY ('{raise,admit}'::pg_catalog.text[]) THEN
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
-- its holder and time) when fence.mark_rule() says 'raise', and otherwise
-- kept as it is (never lowered; at the same token its holder stays: a
-- merge refuses nothing).  This is what makes
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
    have_holder pg_catalog.text;
BEGIN
    SELECT m.token, m.holder INTO have, have_holder FROM fence.marks m
    WHERE m.resource OPERATOR(pg_catalog.=) NEW.resource FOR UPDATE;
    -- (A row no mark could hold goes on to its constraint's error.)
    IF NOT FOUND OR NOT COALESCE(NEW.token OPERATOR(pg_catalog.>) 0, false) THEN
        RETURN NEW;
    END IF;
    IF fence.mark_rule(have, have_holder, NEW.token, NEW.holder) OPERATOR(pg_catalog.=) 'raise' THEN
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
    outcome pg_catalog.text;
BEGIN
    -- The common case, the mark exists: lock its row and read it in one
    -- statement (FOR UPDATE waits for a concurrent writer and then sees
    -- its committed mark).  No mark can have an invalid name (CHECK), so
    -- checking the arguments can wait until the slow path.
    SELECT m.token, m.holder, pg_catalog.current_setting('fence.holder', true)
    INTO seen, seen_holder, writer
    FROM fence.marks m WHERE m.resource OPERATOR(pg_catalog.=) advance.resource FOR UPDATE;
    -- The hot path, one expression (PL/pgSQL prepares each once per
    -- transaction): the holder writes again with the mark's token (the
    -- rule's 'admit').  A malformed fence.holder never equals a recorded
    -- (valid) one, nor '' (none) unless it is ''.
    IF FOUND AND fence.mark_rule(seen, seen_holder, advance.token, writer) OPERATOR(pg_catalog.=) 'admit'
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
            WHERE fence.mark_rule(m.token, m.holder, EXCLUDED.token, EXCLUDED.holder) OPERATOR(pg_catalog.=) 'raise';
        IF FOUND THEN
            RETURN advance.token;
        END IF;
        SELECT m.token, m.holder INTO seen, seen_holder
        FROM fence.marks m WHERE m.resource OPERATOR(pg_catalog.=) advance.resource;
    END IF;
    outcome := fence.mark_rule(seen, seen_holder, advance.token, writer);
    IF outcome OPERATOR(pg_catalog.=) 'raise' THEN
        UPDATE fence.marks m SET token = advance.token, holder = writer, updated_at = pg_catalog.now()
        WHERE m.resource OPERATOR(pg_catalog.=) advance.resource;
        RETURN advance.token;
    END IF;
    IF outcome OPERATOR(pg_catalog.=) 'admit' THEN
        RETURN advance.token;
    END IF;
    IF outcome OPERATOR(pg_catalog.=) 'older' THEN
        RAISE EXCEPTION 'fence: stale token % for resource % (highest seen %)',
                advance.token, pg_catalog.quote_ident(advance.resource), seen
            USING ERRCODE = '23Q01',
                  DETAIL = pg_catalog.format('offered=%s highest=%s kind=resource object=%s reason=older%s',
                                             advance.token, seen, advance.resource,
                                             ' holder=' OPERATOR(pg_catalog.||) seen_holder);
    END IF;
    -- 'repeat'
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
