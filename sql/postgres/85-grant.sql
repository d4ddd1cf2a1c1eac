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
