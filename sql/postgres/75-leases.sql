-- 75-leases.sql -- part of fence.sql: PostgreSQL as an issuer of leases and tokens: fence.leases and fence.lease_acquire(), lease_renew(), lease_release(), lease_reissue(), lease_raise(), lease_inspect().
-- The parts are joined in name order into $(B)/sql/postgres/fence.sql
-- (lib/pg/module.mk), the one script that psql -f, fence_pg_install()
-- and make install use; it runs as one transaction (BEGIN in
-- 10-schema.sql, COMMIT in 90-upgrade.sql).  See docs/postgres.md and
-- docs/issuers.md.
--
-- libfence's PostgreSQL issuer (lib/lease/pg/) calls these functions, one
-- statement per operation, no session state (no prepared statement, no SET,
-- no advisory lock): it works through pgbouncer in transaction mode.  Each
-- is SECURITY DEFINER (the installer) with a pinned search_path: callers
-- get no privilege on fence.leases itself.
--
-- The rules they keep (lib/lease/issuer.h):
--   - a name's counter never goes down and its row is never deleted (a
--     trigger refuses both, even for the owner); each grant issues
--     counter + 1, above the counter raised by lease_raise() (a floor: the
--     last token the Redis issuer gave, `fence token NAME --raise N`) and
--     above the mark fence.marks holds for a resource of the same name;
--   - the token is issued in the statement that grants the lease, and
--     committed with synchronous_commit at least 'on' (raised for that
--     transaction when the session has 'off' or 'local'): a token is
--     durable -- and with synchronous_standby_names on a synchronous
--     standby -- before its holder sees it;
--   - expiry by the server's clock, clock_timestamp() (never now(): a
--     statement that waited for a row lock reads the time after the wait);
--   - renew and release compare holder and token; a release NOTIFYs
--     channel fence_lease_released with the name as payload, for waiters
--     (LISTEN on a direct connection; a pooler in transaction mode cannot
--     carry it: the issuer polls there).

CREATE TABLE IF NOT EXISTS fence.leases (
    name text PRIMARY KEY
        CONSTRAINT leases_name_check
        CHECK (pg_catalog.octet_length(name) OPERATOR(pg_catalog.>=) 1
               AND pg_catalog.octet_length(name) OPERATOR(pg_catalog.<=) 512),
    -- The last token issued for the name, or the floor raised: the next
    -- grant issues counter + 1.
    counter bigint NOT NULL DEFAULT 0 CONSTRAINT leases_counter_check CHECK (counter OPERATOR(pg_catalog.>=) 0),
    -- The holder (NULL: free), its token and when the lease expires.
    holder text CONSTRAINT leases_holder_check CHECK (holder OPERATOR(pg_catalog.~) '^[0-9a-f]{32}$'),
    token bigint,
    expires timestamptz,
    -- The holder's description (fence_lease_options.holder_info).
    info text CONSTRAINT leases_info_check CHECK (pg_catalog.octet_length(info) OPERATOR(pg_catalog.<=) 256),
    CONSTRAINT leases_held_check CHECK ((holder IS NULL) OPERATOR(pg_catalog.=) (token IS NULL)
                                        AND (holder IS NULL) OPERATOR(pg_catalog.=) (expires IS NULL)
                                        AND (token IS NULL OR (token OPERATOR(pg_catalog.>) 0
                                                               AND token OPERATOR(pg_catalog.<=) counter)))
);
REVOKE ALL ON fence.leases FROM PUBLIC;

-- Refuses lowering a counter, renaming a name, deleting a row and
-- TRUNCATE, even by the owner: a counter lost is a token repeated.
CREATE OR REPLACE FUNCTION fence.leases_guard() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF NEW.name = OLD.name AND NEW.counter >= OLD.counter THEN
            RETURN NEW;
        END IF;
        RAISE EXCEPTION 'fence: the token counter of lease % cannot be lowered (% to %) or renamed',
                pg_catalog.quote_ident(OLD.name), OLD.counter, NEW.counter
            USING ERRCODE = '23Q03';
    END IF;
    IF TG_LEVEL = 'STATEMENT' THEN
        RAISE EXCEPTION 'fence: fence.leases cannot be truncated: its token counters never go down'
            USING ERRCODE = '23Q03';
    END IF;
    RAISE EXCEPTION 'fence: lease % cannot be deleted: its token counter never goes down (release it instead)',
            pg_catalog.quote_ident(OLD.name)
        USING ERRCODE = '23Q03';
END
$$;
REVOKE ALL ON FUNCTION fence.leases_guard() FROM PUBLIC;
DROP TRIGGER IF EXISTS leases_guard_upd ON fence.leases;
DROP TRIGGER IF EXISTS leases_guard_del ON fence.leases;
DROP TRIGGER IF EXISTS leases_guard_truncate ON fence.leases;
-- Only an UPDATE that would lower a counter or rename a row calls the
-- guard (the WHEN clause is an expression the executor evaluates itself):
-- grants, renewals and releases pay no function call for it.
CREATE TRIGGER leases_guard_upd BEFORE UPDATE ON fence.leases
    FOR EACH ROW WHEN (NEW.counter OPERATOR(pg_catalog.<) OLD.counter OR NEW.name OPERATOR(pg_catalog.<>) OLD.name)
    EXECUTE FUNCTION fence.leases_guard();
CREATE TRIGGER leases_guard_del BEFORE DELETE ON fence.leases
    FOR EACH ROW EXECUTE FUNCTION fence.leases_guard();
CREATE TRIGGER leases_guard_truncate BEFORE TRUNCATE ON fence.leases
    FOR EACH STATEMENT EXECUTE FUNCTION fence.leases_guard();

-- The argument checks every lease function shares: 22023 with a message.
CREATE OR REPLACE FUNCTION fence.lease_check(name text, holder text, ttl_ms bigint, floor bigint)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF name IS NULL OR pg_catalog.octet_length(name) < 1 OR pg_catalog.octet_length(name) > 512 THEN
        RAISE EXCEPTION 'fence: lease name must be 1..512 bytes, got %',
                COALESCE(pg_catalog.octet_length(name)::text || ' bytes', 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF name ~ '[\x01-\x1f\x7f]' THEN
        RAISE EXCEPTION 'fence: lease name % contains a control character', pg_catalog.quote_literal(pg_catalog.left(name, 40))
            USING ERRCODE = '22023';
    END IF;
    IF holder IS NOT NULL AND holder !~ '^[0-9a-f]{32}$' THEN
        RAISE EXCEPTION 'fence: holder must be 32 lowercase hex digits, got %', pg_catalog.quote_literal(pg_catalog.left(holder, 40))
            USING ERRCODE = '22023';
    END IF;
    IF ttl_ms IS NOT NULL AND (ttl_ms < 10 OR ttl_ms > 604800000) THEN
        RAISE EXCEPTION 'fence: lease TTL must be 10..604800000 ms, got %', ttl_ms
            USING ERRCODE = '22023';
    END IF;
    IF floor IS NOT NULL AND (floor < 0 OR floor > 9223372036854775806) THEN
        RAISE EXCEPTION 'fence: token floor must be 0..9223372036854775806, got %', floor
            USING ERRCODE = '22023';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION fence.lease_check(text, text, bigint, bigint) FROM PUBLIC;

-- The lowest token NAME may be issued next (the counter already locked):
-- above counter, floor and the mark of the resource NAME.  22003 when it
-- would pass 2^63-1.
CREATE OR REPLACE FUNCTION fence.lease_next(name text, counter bigint, floor bigint) RETURNS bigint
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    top bigint := GREATEST(counter, COALESCE(floor, 0),
                           COALESCE((SELECT m.token FROM fence.marks m WHERE m.resource = name), 0));
BEGIN
    IF top >= 9223372036854775807 THEN
        RAISE EXCEPTION 'fence: the tokens of lease % are exhausted (the counter is at 2^63-1)',
                pg_catalog.quote_ident(name)
            USING ERRCODE = '22003';
    END IF;
    RETURN top + 1;
END
$$;
REVOKE ALL ON FUNCTION fence.lease_next(text, bigint, bigint) FROM PUBLIC;

-- A token is durable before its holder sees it: a session with
-- synchronous_commit off or local commits this transaction with 'on'.
CREATE OR REPLACE FUNCTION fence.lease_durable() RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF pg_catalog.current_setting('synchronous_commit') OPERATOR(pg_catalog.=) ANY ('{off,local}'::pg_catalog.text[]) THEN
        PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
    END IF;
END
$$;
REVOKE ALL ON FUNCTION fence.lease_durable() FROM PUBLIC;

-- Acquire NAME for HOLDER for TTL_MS: granted with a new token when it is
-- free or expired; granted with the token it has when HOLDER holds it
-- already (an acquire sent again: nothing issued, the expiry moved); else
-- not granted, with the holder's token and remaining TTL.  INFO: the
-- holder's description (NULL: none).  The common case, a free name that
-- has a row, is one UPDATE: under READ COMMITTED a concurrent acquire's
-- row lock makes it wait, then re-check its WHERE on the row that one
-- committed (held now: no row updated, the slow path says by whom).
CREATE OR REPLACE FUNCTION fence.lease_acquire(name text, holder text, ttl_ms bigint, info text DEFAULT NULL,
                                               OUT granted boolean, OUT token bigint, OUT pttl_ms bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    r fence.leases%ROWTYPE;
    t timestamptz;
BEGIN
    IF lease_acquire.holder IS NULL OR lease_acquire.ttl_ms IS NULL
       OR lease_acquire.holder !~ '^[0-9a-f]{32}$' OR lease_acquire.ttl_ms < 10 OR lease_acquire.ttl_ms > 604800000
       OR lease_acquire.name IS NULL OR pg_catalog.octet_length(lease_acquire.name) < 1
       OR pg_catalog.octet_length(lease_acquire.name) > 512 OR lease_acquire.name ~ '[\x01-\x1f\x7f]'
       OR pg_catalog.octet_length(lease_acquire.info) > 256 THEN
        IF lease_acquire.holder IS NULL OR lease_acquire.ttl_ms IS NULL THEN
            RAISE EXCEPTION 'fence: lease_acquire needs a holder and a TTL' USING ERRCODE = '22023';
        END IF;
        IF pg_catalog.octet_length(lease_acquire.info) > 256 THEN
            RAISE EXCEPTION 'fence: holder description longer than 256 bytes' USING ERRCODE = '22023';
        END IF;
        PERFORM fence.lease_check(lease_acquire.name, lease_acquire.holder, lease_acquire.ttl_ms, NULL);
    END IF;
    IF pg_catalog.current_setting('synchronous_commit') = ANY ('{off,local}'::text[]) THEN
        PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
    END IF;
    UPDATE fence.leases l
    SET (counter, token) = (SELECT n.v, n.v FROM (SELECT GREATEST(l.counter,
                                COALESCE((SELECT m.token FROM fence.marks m WHERE m.resource = l.name), 0))
                                OPERATOR(pg_catalog.+) 1 AS v) n),
        holder = lease_acquire.holder,
        expires = pg_catalog.clock_timestamp() + lease_acquire.ttl_ms * interval '1 millisecond',
        info = lease_acquire.info
    WHERE l.name = lease_acquire.name
      AND (l.holder IS NULL OR l.expires <= pg_catalog.clock_timestamp())
    RETURNING l.token INTO lease_acquire.token;
    IF FOUND THEN
        granted := true;
        pttl_ms := lease_acquire.ttl_ms;
        RETURN;
    END IF;
    -- Held (by HOLDER or another), or a name without a row yet.
    SELECT * INTO r FROM fence.leases l WHERE l.name = lease_acquire.name FOR UPDATE;
    IF NOT FOUND THEN
        -- A new name, perhaps inserted concurrently: ON CONFLICT waits for
        -- the other inserter, then the row is locked as above.
        INSERT INTO fence.leases (name) VALUES (lease_acquire.name) ON CONFLICT DO NOTHING;
        SELECT * INTO r FROM fence.leases l WHERE l.name = lease_acquire.name FOR UPDATE;
    END IF;
    t := pg_catalog.clock_timestamp();
    IF r.holder IS NOT NULL AND r.expires > t THEN
        IF r.holder = lease_acquire.holder THEN
            UPDATE fence.leases l SET expires = t + lease_acquire.ttl_ms * interval '1 millisecond'
            WHERE l.name = lease_acquire.name;
            granted := true;
            token := r.token;
            pttl_ms := lease_acquire.ttl_ms;
            RETURN;
        END IF;
        granted := false;
        token := r.token;
        pttl_ms := GREATEST(1, pg_catalog.ceil(EXTRACT(epoch FROM r.expires - t) * 1000)::bigint);
        RETURN;
    END IF;
    token := fence.lease_next(lease_acquire.name, r.counter, 0);
    UPDATE fence.leases l
    SET counter = lease_acquire.token, holder = lease_acquire.holder, token = lease_acquire.token,
        expires = t + lease_acquire.ttl_ms * interval '1 millisecond', info = lease_acquire.info
    WHERE l.name = lease_acquire.name;
    granted := true;
    pttl_ms := lease_acquire.ttl_ms;
END
$$;

-- Renew many leases in one statement: element i of the arrays is one
-- lease (name, holder, token, TTL in ms); the answer's element i is true
-- when it was renewed (held by that holder with that token, not expired),
-- false when refused.  Arrays of different lengths: 22023.
CREATE OR REPLACE FUNCTION fence.lease_renew(names text[], holders text[], tokens bigint[], ttls_ms bigint[])
RETURNS boolean[]
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer := COALESCE(pg_catalog.cardinality(names), 0);
    res boolean[];
BEGIN
    IF n <> COALESCE(pg_catalog.cardinality(holders), 0) OR n <> COALESCE(pg_catalog.cardinality(tokens), 0)
       OR n <> COALESCE(pg_catalog.cardinality(ttls_ms), 0) THEN
        RAISE EXCEPTION 'fence: lease_renew needs arrays of one length (names %, holders %, tokens %, TTLs %)',
                n, COALESCE(pg_catalog.cardinality(holders), 0), COALESCE(pg_catalog.cardinality(tokens), 0),
                COALESCE(pg_catalog.cardinality(ttls_ms), 0)
            USING ERRCODE = '22023';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.unnest(ttls_ms) x WHERE x IS NULL OR x < 10 OR x > 604800000) THEN
        RAISE EXCEPTION 'fence: lease TTLs must be 10..604800000 ms' USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.current_setting('synchronous_commit') = ANY ('{off,local}'::text[]) THEN
        PERFORM pg_catalog.set_config('synchronous_commit', 'on', true); -- fence.lease_durable()
    END IF;
    WITH u AS (
        SELECT * FROM ROWS FROM (pg_catalog.unnest(names), pg_catalog.unnest(holders), pg_catalog.unnest(tokens),
                                pg_catalog.unnest(ttls_ms)) WITH ORDINALITY AS u(name, holder, token, ttl, i)
    ), r AS (
        UPDATE fence.leases l SET expires = pg_catalog.clock_timestamp() + u.ttl * interval '1 millisecond'
        FROM u
        WHERE l.name = u.name AND l.holder = u.holder AND l.token = u.token
          AND l.expires > pg_catalog.clock_timestamp()
        RETURNING u.i
    )
    SELECT pg_catalog.array_agg(r.i IS NOT NULL ORDER BY u.i) INTO res FROM u LEFT JOIN r ON r.i = u.i;
    RETURN COALESCE(res, '{}');
END
$$;

-- Release NAME if HOLDER holds it with TOKEN and it has not expired: true
-- (and the waiters are notified), else false (expired, or another's).
CREATE OR REPLACE FUNCTION fence.lease_release(name text, holder text, token bigint) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE fence.leases l SET holder = NULL, token = NULL, expires = NULL, info = NULL
    WHERE l.name = lease_release.name AND l.holder = lease_release.holder AND l.token = lease_release.token
      AND l.expires > pg_catalog.clock_timestamp();
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM pg_catalog.pg_notify('fence_lease_released', lease_release.name);
    RETURN true;
END
$$;

-- While HOLDER holds NAME with TOKEN: raise its counter to at least FLOOR
-- and give it a new token above it (returned; the expiry stays).  NULL
-- when it no longer holds it.
CREATE OR REPLACE FUNCTION fence.lease_reissue(name text, holder text, token bigint, floor bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r fence.leases%ROWTYPE;
    t bigint;
BEGIN
    PERFORM fence.lease_check(lease_reissue.name, lease_reissue.holder, NULL, lease_reissue.floor);
    PERFORM fence.lease_durable();
    SELECT * INTO r FROM fence.leases l
    WHERE l.name = lease_reissue.name AND l.holder = lease_reissue.holder AND l.token = lease_reissue.token
      AND l.expires > pg_catalog.clock_timestamp()
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    t := fence.lease_next(lease_reissue.name, r.counter, lease_reissue.floor);
    UPDATE fence.leases l SET counter = t, token = t WHERE l.name = lease_reissue.name;
    RETURN t;
END
$$;

-- Raise NAME's counter to at least FLOOR (the next token is above it);
-- returns the counter then.  A held lease keeps its token.
CREATE OR REPLACE FUNCTION fence.lease_raise(name text, floor bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c bigint;
BEGIN
    IF lease_raise.floor IS NULL THEN
        RAISE EXCEPTION 'fence: lease_raise needs a floor' USING ERRCODE = '22023';
    END IF;
    PERFORM fence.lease_check(lease_raise.name, NULL, NULL, lease_raise.floor);
    PERFORM fence.lease_durable();
    INSERT INTO fence.leases AS l (name, counter) VALUES (lease_raise.name, lease_raise.floor)
    ON CONFLICT ON CONSTRAINT leases_pkey DO UPDATE SET counter = GREATEST(l.counter, EXCLUDED.counter)
    RETURNING l.counter INTO c;
    RETURN c;
END
$$;

-- What NAME looks like now: held (not expired), its holder, token and
-- remaining TTL (-1 when free), the last token issued (the counter: 0 for
-- a name never seen) and the holder's description.
CREATE OR REPLACE FUNCTION fence.lease_inspect(name text, OUT held boolean, OUT holder text, OUT token bigint,
                                               OUT pttl_ms bigint, OUT last_token bigint, OUT info text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    r fence.leases%ROWTYPE;
    t timestamptz := pg_catalog.clock_timestamp();
BEGIN
    PERFORM fence.lease_check(lease_inspect.name, NULL, NULL, NULL);
    SELECT * INTO r FROM fence.leases l WHERE l.name = lease_inspect.name;
    last_token := COALESCE(r.counter, 0);
    held := r.holder IS NOT NULL AND r.expires > t;
    pttl_ms := -1;
    IF held THEN
        holder := r.holder;
        token := r.token;
        info := r.info;
        pttl_ms := GREATEST(1, pg_catalog.ceil(EXTRACT(epoch FROM r.expires - t) * 1000)::bigint);
    END IF;
END
$$;

-- Every role may take leases (as with a Redis every client can reach): on
-- a fresh install, or the upgrade that adds them; after that, what the DBA
-- granted or revoked stays (CREATE OR REPLACE keeps a function's ACL).
DO $leasegrant$
BEGIN
    IF pg_catalog.current_setting('fence.install_from')::integer < 7 THEN
        REVOKE ALL ON FUNCTION fence.lease_acquire(text, text, bigint, text) FROM PUBLIC;
        REVOKE ALL ON FUNCTION fence.lease_renew(text[], text[], bigint[], bigint[]) FROM PUBLIC;
        REVOKE ALL ON FUNCTION fence.lease_release(text, text, bigint) FROM PUBLIC;
        REVOKE ALL ON FUNCTION fence.lease_reissue(text, text, bigint, bigint) FROM PUBLIC;
        REVOKE ALL ON FUNCTION fence.lease_raise(text, bigint) FROM PUBLIC;
        REVOKE ALL ON FUNCTION fence.lease_inspect(text) FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION fence.lease_acquire(text, text, bigint, text) TO PUBLIC;
        GRANT EXECUTE ON FUNCTION fence.lease_renew(text[], text[], bigint[], bigint[]) TO PUBLIC;
        GRANT EXECUTE ON FUNCTION fence.lease_release(text, text, bigint) TO PUBLIC;
        GRANT EXECUTE ON FUNCTION fence.lease_reissue(text, text, bigint, bigint) TO PUBLIC;
        GRANT EXECUTE ON FUNCTION fence.lease_raise(text, bigint) TO PUBLIC;
        GRANT EXECUTE ON FUNCTION fence.lease_inspect(text) TO PUBLIC;
    END IF;
END
$leasegrant$;
