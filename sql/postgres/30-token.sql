-- 30-token.sql -- part of fence.sql: the token rule: fence.current_token() and fence.use_token(), which binds a token to its transaction.
-- The parts are joined in name order into $(B)/sql/postgres/fence.sql
-- (lib/pg/module.mk), the one script that psql -f, fence_pg_install()
-- and make install use; it runs as one transaction (BEGIN in
-- 10-schema.sql, COMMIT in 90-upgrade.sql).  See docs/postgres.md.

-- ------------------------------------------------------------------
-- The writer's token
-- ------------------------------------------------------------------

-- The token grammar, written once for fence.sql (fence.current_token(),
-- the generated guard and check call it): true when RAW is a token's
-- canonical decimal text, 1..9223372036854775807 with no sign, spaces or
-- leading zeros -- lib/common/token.c's grammar (fence__token_parse), which
-- the C guard and every library use; NULL for NULL.  One expression,
-- IMMUTABLE, no SET, every operator and the collation pg_catalog's: the
-- planner inlines it into the caller's expression under the caller's
-- search_path, as fence.mark_rule().
CREATE OR REPLACE FUNCTION fence.valid_token(raw text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT $1 OPERATOR(pg_catalog.~) '^[1-9][0-9]{0,18}$'
           AND (pg_catalog.length($1) OPERATOR(pg_catalog.<) 19
                OR $1 COLLATE pg_catalog."C" OPERATOR(pg_catalog.<=) '9223372036854775807')
$$;
GRANT EXECUTE ON FUNCTION fence.valid_token(text) TO PUBLIC;

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
    IF NOT fence.valid_token(raw) THEN
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
