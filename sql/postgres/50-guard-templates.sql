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

-- The row rule, written once for fence.sql (the generated guards call
-- it): what a row stamped STAMP does with TOKEN: 'admit' when TOKEN is at
-- least the stamp (the row is then stamped TOKEN), 'older' when it is
-- lower (refused).  Rows compare tokens only, never holders.  NULL for a
-- NULL stamp or token.  lib/common/rule.c is the same rule for the C
-- guard; tests/common/rule_cases.tsv the cases both run.  Inlined by the
-- planner into the caller's expression, as fence.mark_rule() (see there).
CREATE OR REPLACE FUNCTION fence.stamp_rule(stamp bigint, token bigint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN $2 OPERATOR(pg_catalog.>=) $1 THEN 'admit'
                WHEN $2 OPERATOR(pg_catalog.<) $1 THEN 'older'
           END
$$;
GRANT EXECUTE ON FUNCTION fence.stamp_rule(bigint, bigint) TO PUBLIC;

-- The body of a table's generated BEFORE guard, a format() template:
-- %1$s the token column as an identifier, always double-quoted (see
-- fence.write_functions), %2$L its name as a literal, %3$s 'true' in
-- permissive mode, else 'false'.  The column is read and written directly
-- (OLD.col, NEW.col := tok) and no WHEN clause is involved: the hot path
-- -- the row already carries exactly the writer's token and the column is
-- not written -- is one expression and RETURN.  The setting's text equal to
-- the stamp's canonical text, with the stamp > 0, holds only for a valid
-- token equal to the stamp (the rule's equal case, decided before the
-- token is parsed); every other UPDATE and DELETE asks fence.stamp_rule(),
-- after fence.valid_token() judged the token's text.  Runs with the
-- writer's rights and needs none but EXECUTE on those two; every
-- operator is schema-qualified instead of pinning search_path (a
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
    IF NOT fence.valid_token(raw) THEN
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
    IF fence.stamp_rule(OLD.%1$s, tok) OPERATOR(pg_catalog.=) 'older' THEN
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
    ELSIF NOT fence.valid_token(raw) THEN
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
