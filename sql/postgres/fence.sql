-- fence.sql -- storage-side fencing for PostgreSQL: schema "fence", version 1.
--
-- A write carries a fencing token (a 64-bit number from a lease, 1..2^63-1).
-- The store remembers the highest token it has accepted -- per row, or per
-- named resource -- and rejects any write whose token is lower.  An equal
-- token is admitted (one holder writes many times).
--
-- Install (idempotent; run it again to upgrade, never to downgrade):
--     psql -v ON_ERROR_STOP=1 -f sql/postgres/fence.sql
-- or fence_pg_install() from lib/pg/fence_pg.h, which runs this same file.
-- Run it as the role that should own the schema (a superuser or a dedicated
-- "fence admin" role).  Applications must not own anything in it.
--
-- The writer's token
--     The token is read from the transaction-local setting fence.token:
--         BEGIN; SET LOCAL fence.token = 42; UPDATE ...; COMMIT;
--     or  SELECT pg_catalog.set_config('fence.token', '42', true);
--     It must be a canonical decimal 1..9223372036854775807: no sign, no
--     spaces, no leading zeros, no decimals.  Missing, '', 'abc', '-1', '0',
--     '1.5', ' 7', '007' and anything above 2^63-1 are rejected.
--
-- Per-row mode: SELECT fence.protect('orders');  -- column fence_token
--               SELECT fence.protect('orders', 'lock_version');  -- retrofit
--     Adds the column if missing (bigint NOT NULL DEFAULT 0; 0 = never
--     fenced).  An existing smallint/integer/bigint column becomes bigint NOT
--     NULL DEFAULT 0, its NULLs 0.  Row triggers (named zz_fence_guard_* so
--     that they fire after the table's other BEFORE triggers) check every
--     INSERT, UPDATE and DELETE -- COPY FROM included -- and stamp the row
--     with the writer's token; whatever a client writes into the column
--     itself is overwritten.  A row can only be updated or deleted with a
--     token >= its stamp.  TRUNCATE is refused.  A WHEN clause skips the
--     trigger function entirely when the row is already stamped with exactly
--     the writer's token and the column is not being written, which is the
--     hot path of a holder that writes many times.
--     An INSERT of a new row has no stamp to compare with: it only needs a
--     valid token (and is stamped with it).  An INSERT ... ON CONFLICT DO
--     UPDATE that hits an existing row is checked against that row's stamp.
--     To fence the creation of rows (or anything else not tied to one row),
--     call fence.advance() on a resource in the same transaction.
--   fence.set_mode('orders', 'permissive')  -- or protect(..., permissive => true)
--     Migration mode: writes with NO token (setting missing or '') are
--     admitted (UPDATE keeps the stamp, INSERT stamps 0); malformed tokens
--     and stale tokens are still rejected.  set_mode('orders', 'strict')
--     goes back.
--   fence.unprotect('orders') drops the triggers and keeps the column.
--   SELECT * FROM fence.protected lists protected tables, columns, modes.
--   protect/unprotect/set_mode run with the caller's rights (the caller must
--   own the table); EXECUTE on them is not granted to PUBLIC.
--
-- Per-resource mode: SELECT fence.advance('jobs/42', 34);
--     In the writer's transaction, atomically raises the resource's
--     high-water mark to the token (an equal token is admitted) and keeps
--     the mark's row locked until commit, so a stale writer that comes later
--     in any interleaving waits, then is rejected.  Returns the mark.
--     Marks are never lowered or deleted: applications cannot write
--     fence.marks at all, and a trigger refuses lowering, deleting and
--     truncating even for its owner.  fence.mark('jobs/42') reads a mark (0
--     when none).  Resource names are 1..512 bytes.
--
-- Errors (SQLSTATE):
--   23Q01  stale token.  Message: "fence: stale token 33 for public.orders
--          (highest seen 34)" or "... for resource "jobs/42" ...".
--          DETAIL, machine-readable, one line, object last:
--            offered=33 highest=34 kind=table object=public.orders
--            offered=33 highest=34 kind=resource object=jobs/42
--          (object is the rest of the line; the table form is the quoted,
--          schema-qualified name).  For tables the error's SCHEMA, TABLE and
--          COLUMN fields are set too.
--   23Q02  no valid token: fence.token missing, empty or malformed (or a
--          token <= 0 given to fence.advance).  DETAIL says which.
--   23Q03  operation refused on fenced data: TRUNCATE of a protected table,
--          lowering/deleting/truncating a high-water mark.
--   22023  bad argument to a fence function (NULL, empty or oversized name).
--
-- Security model:  fence.marks is writable only through fence.advance()
-- (SECURITY DEFINER, search_path pinned).  Only advance(), mark(),
-- current_token(), version() and the fence.protected view are granted to
-- PUBLIC.  Disabling or dropping the triggers needs ownership of the table,
-- and session_replication_role needs superuser, as PostgreSQL enforces.

BEGIN;
SET LOCAL client_min_messages = warning;

-- Serialise concurrent installs.
DO $lock$ BEGIN PERFORM pg_catalog.pg_advisory_xact_lock(7274243561983541); END $lock$;

CREATE SCHEMA IF NOT EXISTS fence;
REVOKE ALL ON SCHEMA fence FROM PUBLIC;
GRANT USAGE ON SCHEMA fence TO PUBLIC;

-- ------------------------------------------------------------------
-- Version
-- ------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS fence.meta (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    version integer NOT NULL,
    installed_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
REVOKE ALL ON fence.meta FROM PUBLIC;

DO $install$
DECLARE
    v integer;
BEGIN
    SELECT m.version INTO v FROM fence.meta m;
    IF v > 1 THEN
        RAISE EXCEPTION 'fence: schema version % is installed, this script is version 1; refusing to downgrade', v;
    END IF;
END
$install$;

INSERT INTO fence.meta (version) VALUES (1)
ON CONFLICT (singleton) DO UPDATE SET version = EXCLUDED.version;

-- The schema version of this install script.
CREATE OR REPLACE FUNCTION fence.version() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 1 $$;

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
        CHECK (pg_catalog.octet_length(resource) BETWEEN 1 AND 512),
    token bigint NOT NULL CHECK (token > 0),
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
REVOKE ALL ON fence.marks FROM PUBLIC;

-- Refuses lowering, renaming and deleting a mark (even by its owner).
CREATE OR REPLACE FUNCTION fence.marks_guard() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        RAISE EXCEPTION 'fence: high-water mark of resource % cannot be lowered (% to %) or renamed',
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
    WHEN (NEW.token < OLD.token OR NEW.resource IS DISTINCT FROM OLD.resource)
    EXECUTE FUNCTION fence.marks_guard();
DROP TRIGGER IF EXISTS marks_no_delete ON fence.marks;
CREATE TRIGGER marks_no_delete BEFORE DELETE ON fence.marks
    FOR EACH ROW EXECUTE FUNCTION fence.marks_guard();
DROP TRIGGER IF EXISTS marks_no_truncate ON fence.marks;
CREATE TRIGGER marks_no_truncate BEFORE TRUNCATE ON fence.marks
    FOR EACH STATEMENT EXECUTE FUNCTION fence.marks_guard();

-- Raise RESOURCE's high-water mark to TOKEN, or raise 23Q01 when the mark
-- is already higher.  The mark's row stays locked until the transaction
-- ends (SELECT ... FOR UPDATE, or INSERT ... ON CONFLICT DO UPDATE, which
-- locks the row even when its WHERE is false), so the writes that follow
-- in the same transaction cannot be overtaken by a writer with a lower
-- token.  Returns the mark (= TOKEN).
CREATE OR REPLACE FUNCTION fence.advance(resource text, token bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    seen bigint;
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

    -- The common case, the mark exists: lock its row and read it in one
    -- statement (FOR UPDATE waits for a concurrent writer and then sees
    -- its committed mark), raise it if lower.
    SELECT m.token INTO seen FROM fence.marks m WHERE m.resource = advance.resource FOR UPDATE;
    IF NOT FOUND THEN
        -- A new resource, possibly created concurrently: ON CONFLICT waits
        -- for the other inserter and then locks its row (even when its
        -- WHERE is false).
        INSERT INTO fence.marks AS m (resource, token)
        VALUES (advance.resource, advance.token)
        ON CONFLICT (resource) DO UPDATE
            SET token = EXCLUDED.token, updated_at = pg_catalog.now()
            WHERE m.token < EXCLUDED.token;
        IF FOUND THEN
            RETURN advance.token;
        END IF;
        SELECT m.token INTO seen FROM fence.marks m WHERE m.resource = advance.resource;
    END IF;
    IF seen > advance.token THEN
        RAISE EXCEPTION 'fence: stale token % for resource % (highest seen %)',
                advance.token, pg_catalog.quote_ident(advance.resource), seen
            USING ERRCODE = '23Q01',
                  DETAIL = pg_catalog.format('offered=%s highest=%s kind=resource object=%s',
                                             advance.token, seen, advance.resource);
    END IF;
    IF seen < advance.token THEN
        UPDATE fence.marks m SET token = advance.token, updated_at = pg_catalog.now()
        WHERE m.resource = advance.resource;
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

-- ------------------------------------------------------------------
-- Per-row mode
-- ------------------------------------------------------------------

-- Row trigger of protected tables.  TG_ARGV[0]: the token column;
-- TG_ARGV[1]: 'strict' or 'permissive'.  Runs with the writer's rights and
-- needs none; everything is schema-qualified instead of pinning
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
              AND raw COLLATE "C" OPERATOR(pg_catalog.>) '9223372036854775807') THEN
        RAISE EXCEPTION 'fence: malformed fencing token % for % on %',
                pg_catalog.quote_literal(pg_catalog.left(raw, 40)), TG_OP, obj
            USING ERRCODE = '23Q02', DETAIL = 'reason=malformed',
                  HINT = 'fence.token must be a decimal integer 1..9223372036854775807, no sign, spaces or leading zeros.',
                  SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME, COLUMN = col;
    ELSE
        tok := raw::bigint;
    END IF;

    IF TG_OP OPERATOR(pg_catalog.=) 'INSERT' THEN
        RETURN pg_catalog.jsonb_populate_record(NEW,
                   pg_catalog.jsonb_build_object(col, COALESCE(tok, 0)));
    END IF;

    seen := COALESCE((pg_catalog.to_jsonb(OLD) OPERATOR(pg_catalog.->>) col)::bigint, 0);
    IF tok OPERATOR(pg_catalog.<) seen THEN
        RAISE EXCEPTION 'fence: stale token % for % (highest seen %)', tok, obj, seen
            USING ERRCODE = '23Q01',
                  DETAIL = pg_catalog.format('offered=%s highest=%s kind=table object=%s', tok, seen, obj),
                  SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME, COLUMN = col;
    END IF;
    IF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN pg_catalog.jsonb_populate_record(NEW,
               pg_catalog.jsonb_build_object(col, COALESCE(tok, seen)));
END
$$;
REVOKE ALL ON FUNCTION fence.row_guard() FROM PUBLIC;

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
REVOKE ALL ON FUNCTION fence.refuse_truncate() FROM PUBLIC;

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
          AND t.tgname IN ('zz_fence_guard_ins', 'zz_fence_guard_upd',
                           'zz_fence_guard_del', 'zz_fence_guard_truncate')
    LOOP
        EXECUTE pg_catalog.format('DROP TRIGGER %I ON %s', trig, tbl);
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION fence.unprotect(regclass) FROM PUBLIC;

-- Protect TBL: make COL (default fence_token) a bigint NOT NULL DEFAULT 0
-- stamp column (adding it, or converting an existing integer column and
-- its NULLs), and install the triggers.  Run again to change the mode.
CREATE OR REPLACE FUNCTION fence.protect(tbl regclass, col name DEFAULT 'fence_token',
                                         permissive boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    kind "char";
    att record;
    mode text := CASE WHEN permissive THEN 'permissive' ELSE 'strict' END;
BEGIN
    IF tbl IS NULL OR col IS NULL OR col = '' OR permissive IS NULL THEN
        RAISE EXCEPTION 'fence: protect: table, column and mode must not be NULL or empty'
            USING ERRCODE = '22023';
    END IF;
    SELECT c.relkind INTO kind FROM pg_catalog.pg_class c WHERE c.oid = tbl;
    IF kind IS DISTINCT FROM 'r' THEN
        RAISE EXCEPTION 'fence: % is not an ordinary table (partitioned tables, views and foreign tables are not supported)', tbl
            USING ERRCODE = '22023';
    END IF;
    -- Fails unless the caller may change the table; holds it until commit.
    EXECUTE pg_catalog.format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', tbl);
    PERFORM fence.unprotect(tbl);

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

    -- The WHEN clauses skip the trigger function when the row already
    -- carries exactly the writer's token and the column is not written:
    -- the setting's text equals the stamp's canonical text only for a
    -- valid token equal to the stamp.  Every operand that can be NULL is
    -- tested with IS [DISTINCT], so a NULL never skips the check.
    EXECUTE pg_catalog.format(
        'CREATE TRIGGER zz_fence_guard_ins BEFORE INSERT ON %1$s FOR EACH ROW'
        ' WHEN (NEW.%2$I IS NULL OR NEW.%2$I <= 0'
        ' OR pg_catalog.current_setting(''fence.token'', true) IS DISTINCT FROM NEW.%2$I::pg_catalog.text)'
        ' EXECUTE FUNCTION fence.row_guard(%3$L, %4$L)', tbl, col, col, mode);
    EXECUTE pg_catalog.format(
        'CREATE TRIGGER zz_fence_guard_upd BEFORE UPDATE ON %1$s FOR EACH ROW'
        ' WHEN (OLD.%2$I IS NULL OR OLD.%2$I <= 0 OR NEW.%2$I IS DISTINCT FROM OLD.%2$I'
        ' OR pg_catalog.current_setting(''fence.token'', true) IS DISTINCT FROM OLD.%2$I::pg_catalog.text)'
        ' EXECUTE FUNCTION fence.row_guard(%3$L, %4$L)', tbl, col, col, mode);
    EXECUTE pg_catalog.format(
        'CREATE TRIGGER zz_fence_guard_del BEFORE DELETE ON %1$s FOR EACH ROW'
        ' WHEN (OLD.%2$I IS NULL OR OLD.%2$I <= 0'
        ' OR pg_catalog.current_setting(''fence.token'', true) IS DISTINCT FROM OLD.%2$I::pg_catalog.text)'
        ' EXECUTE FUNCTION fence.row_guard(%3$L, %4$L)', tbl, col, col, mode);
    EXECUTE pg_catalog.format(
        'CREATE TRIGGER zz_fence_guard_truncate BEFORE TRUNCATE ON %s FOR EACH STATEMENT'
        ' EXECUTE FUNCTION fence.refuse_truncate()', tbl);
END
$$;
REVOKE ALL ON FUNCTION fence.protect(regclass, name, boolean) FROM PUBLIC;

-- Protected tables: their token column and mode ('strict' or 'permissive').
CREATE OR REPLACE VIEW fence.protected AS
SELECT t.tgrelid::regclass AS tbl,
       pg_catalog.convert_from(pg_catalog.substring(t.tgargs, 1, a.nul - 1), 'UTF8')::name AS col,
       pg_catalog.convert_from(pg_catalog.substring(t.tgargs, a.nul + 1,
                                 pg_catalog.octet_length(t.tgargs) - a.nul - 1), 'UTF8') AS mode
FROM pg_catalog.pg_trigger t,
     LATERAL (SELECT position(pg_catalog.decode('00', 'hex') IN t.tgargs) AS nul) a
WHERE t.tgname = 'zz_fence_guard_upd'
  AND t.tgfoid = 'fence.row_guard()'::pg_catalog.regprocedure;
REVOKE ALL ON fence.protected FROM PUBLIC;
GRANT SELECT ON fence.protected TO PUBLIC;

-- Switch a protected table between 'strict' and 'permissive' (migration)
-- mode, keeping its column.
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

REVOKE ALL ON FUNCTION fence.advance(text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.mark(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.current_token(boolean, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.version() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fence.advance(text, bigint) TO PUBLIC;
GRANT EXECUTE ON FUNCTION fence.mark(text) TO PUBLIC;
GRANT EXECUTE ON FUNCTION fence.current_token(boolean, text) TO PUBLIC;
GRANT EXECUTE ON FUNCTION fence.version() TO PUBLIC;

COMMIT;
