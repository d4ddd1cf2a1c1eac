-- 85-grant.sql -- part of fence.sql: what applications may call, who may advance (fence.advance_grants, fence.grant(), fence.revoke(), fence.grant_public(), fence.revoke_public()), and the install putting that policy back.
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
-- advance() to PUBLIC only on a fresh install; after that the policy below
-- decides.
DO $grant$
BEGIN
    IF pg_catalog.current_setting('fence.install_from') = '0' THEN
        REVOKE ALL ON FUNCTION fence.advance(text, bigint) FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION fence.advance(text, bigint) TO PUBLIC;
    END IF;
END
$grant$;

-- ------------------------------------------------------------------
-- Who may advance: the policy, recorded
-- ------------------------------------------------------------------

-- Who may EXECUTE fence.advance() (any mark raised past every holder's
-- token makes every writer stale: whoever may call it can stop them all):
-- one row per role granted it directly, by name, and the row 'public'
-- while PUBLIC may (no role can be named public).  The function's ACL
-- alone does not survive a restore into a cluster that lacks one of the
-- roles: pg_restore fails the function's whole ACL entry, and fence.advance
-- is PUBLIC's again.  This table does (names, not oids), so the install
-- puts the ACL back from it and fence.verify() reports every difference.
-- The owner of fence.advance is not listed (it always may).  Written by
-- fence.grant(), fence.revoke(), fence.grant_public(),
-- fence.revoke_public() and this script (the installer); readable by
-- everyone (fence.verify() reads it with the caller's rights).  Created
-- by an install over an existing schema, it records the ACL as it is, so
-- that what an operator did by hand is kept.
DO $policy$
BEGIN
    IF pg_catalog.to_regclass('fence.advance_grants') IS NULL THEN
        CREATE TABLE fence.advance_grants (
            grantee name PRIMARY KEY
        );
        INSERT INTO fence.advance_grants (grantee)
        SELECT DISTINCT CASE a.grantee WHEN 0 THEN 'public'::name ELSE r.rolname END
        FROM pg_catalog.pg_proc p,
             pg_catalog.aclexplode(COALESCE(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
        LEFT JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
        WHERE p.oid = 'fence.advance(text, bigint)'::regprocedure
          AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
          AND (a.grantee = 0 OR r.rolname IS NOT NULL);
    END IF;
END
$policy$;
REVOKE ALL ON fence.advance_grants FROM PUBLIC;
GRANT SELECT ON fence.advance_grants TO PUBLIC;

-- Who may EXECUTE fence.advance() now, directly (not through membership):
-- 'public' for PUBLIC, else the role's name; the owner is left out.  What
-- fence.advance_grants is compared with (fence.verify(), the install).
CREATE OR REPLACE FUNCTION fence.advance_acl() RETURNS SETOF name
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT DISTINCT CASE a.grantee WHEN 0 THEN 'public'::name ELSE pg_catalog.pg_get_userbyid(a.grantee)::name END
    FROM pg_catalog.pg_proc p,
         pg_catalog.aclexplode(COALESCE(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
    WHERE p.oid = 'fence.advance(text, bigint)'::regprocedure
      AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
$$;
REVOKE ALL ON FUNCTION fence.advance_acl() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fence.advance_acl() TO PUBLIC;

-- Let GRANTEE ('public' or a role's name) EXECUTE fence.advance() or not
-- (ALLOWED), in the ACL and in fence.advance_grants together: what the
-- four functions below share.  A role allowed also gets EXECUTE on mark,
-- mark_holder, current_token and version, and USAGE on the schema, where
-- PUBLIC has lost them.  Only the owner of schema fence (the installer)
-- may (42501, whoever holds EXECUTE): CALLER names the function for the
-- message.
CREATE OR REPLACE FUNCTION fence.set_advance(grantee name, allowed boolean, caller text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f regprocedure;
    who text := CASE WHEN grantee = 'public' THEN 'PUBLIC' ELSE pg_catalog.quote_ident(grantee) END;
BEGIN
    IF grantee IS NULL OR allowed IS NULL THEN
        RAISE EXCEPTION 'fence: %: role must not be NULL', caller USING ERRCODE = '22023';
    END IF;
    IF NOT pg_catalog.pg_has_role(current_user,
                                  (SELECT n.nspowner FROM pg_catalog.pg_namespace n WHERE n.nspname = 'fence'),
                                  'USAGE') THEN
        RAISE EXCEPTION 'fence: %: only the owner of schema fence (the role that installed it) may grant fence.advance(), not %',
                caller, pg_catalog.quote_ident(current_user)
            USING ERRCODE = '42501';
    END IF;
    IF NOT allowed THEN
        IF grantee = 'public' OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = grantee) THEN
            EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION fence.advance(text, bigint) FROM %s', who);
        END IF;
        DELETE FROM fence.advance_grants g WHERE g.grantee = set_advance.grantee;
        RETURN;
    END IF;
    IF grantee <> 'public' THEN
        IF NOT pg_catalog.has_schema_privilege('public', 'fence', 'USAGE') THEN
            EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA fence TO %s', who);
        END IF;
        FOREACH f IN ARRAY ARRAY['fence.mark(text)', 'fence.mark_holder(text)',
                                 'fence.current_token(boolean, text)', 'fence.version()']::regprocedure[]
        LOOP
            IF NOT pg_catalog.has_function_privilege('public', f, 'EXECUTE') THEN
                EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s', f, who);
            END IF;
        END LOOP;
    END IF;
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION fence.advance(text, bigint) TO %s', who);
    INSERT INTO fence.advance_grants AS g (grantee) VALUES (grantee) ON CONFLICT ON CONSTRAINT advance_grants_pkey DO NOTHING;
END
$$;
REVOKE ALL ON FUNCTION fence.set_advance(name, boolean, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fence.set_advance(name, boolean, text) TO PUBLIC;

-- One call to restrict fence.advance() to ROLE: grants it EXECUTE on
-- fence.advance (and on fence.mark, mark_holder, current_token and
-- version where PUBLIC has lost it, and USAGE on the schema likewise),
-- then revokes EXECUTE on fence.advance from PUBLIC (unless revoke_public
-- is false); both recorded in fence.advance_grants, so that a restore and
-- the install that follows keep them.  Idempotent; call it once per
-- application role.  Only the owner of schema fence (the installer) may
-- run it.
CREATE OR REPLACE FUNCTION fence.grant(role regrole, revoke_public boolean DEFAULT true) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF role IS NULL OR revoke_public IS NULL THEN
        RAISE EXCEPTION 'fence: grant: role and revoke_public must not be NULL' USING ERRCODE = '22023';
    END IF;
    PERFORM fence.set_advance(pg_catalog.pg_get_userbyid(role::oid)::name, true, 'grant');
    IF revoke_public THEN
        PERFORM fence.set_advance('public', false, 'grant');
    END IF;
END
$$;
REVOKE ALL ON FUNCTION fence.grant(regrole, boolean) FROM PUBLIC;

-- Take EXECUTE on fence.advance() from the role named ROLE, and its row
-- from fence.advance_grants (what fence.grant() gave it on the readers
-- stays).  A name, not a regrole, so that a recorded role that does not
-- exist in this cluster can be forgotten too.
CREATE OR REPLACE FUNCTION fence.revoke(role name) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF role IS NULL OR role = 'public' THEN
        RAISE EXCEPTION 'fence: revoke: role must not be NULL or public (fence.revoke_public())' USING ERRCODE = '22023';
    END IF;
    PERFORM fence.set_advance(role, false, 'revoke');
END
$$;
REVOKE ALL ON FUNCTION fence.revoke(name) FROM PUBLIC;

-- Let every role call fence.advance() again (a fresh install's policy) /
-- take it from PUBLIC without naming a role (only those granted it, and
-- the owner, may then); recorded.
CREATE OR REPLACE FUNCTION fence.grant_public() RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT fence.set_advance('public', true, 'grant_public') $$;
REVOKE ALL ON FUNCTION fence.grant_public() FROM PUBLIC;
CREATE OR REPLACE FUNCTION fence.revoke_public() RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT fence.set_advance('public', false, 'revoke_public') $$;
REVOKE ALL ON FUNCTION fence.revoke_public() FROM PUBLIC;

-- The install puts the recorded policy back where a restore loses it, and
-- records what its owner changed by hand.  A restore whose ACL entry for
-- fence.advance fails (a role it names is missing) leaves the function
-- executable by PUBLIC and the roles without it; a restore never adds a
-- grant, nor takes one from PUBLIC.  So: PUBLIC executing it without a
-- record loses it (also after a GRANT ... TO PUBLIC by hand: fail closed;
-- fence.grant_public() is the way); each recorded role that exists and
-- lacks it gets it (also after a REVOKE by hand: fence.revoke() is the
-- way); a recorded role that does not exist is left for fence.verify() to
-- keep reporting (restore the roles first: pg_dumpall --globals-only).  A
-- role granted it by hand, and PUBLIC's EXECUTE revoked by hand, are
-- recorded (only the function's owner can have done either).  A WARNING
-- each.
DO $apply$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT g.grantee, x.grantee IS NOT NULL AS has,
               g.grantee = 'public' OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles o WHERE o.rolname = g.grantee) AS known
        FROM fence.advance_grants g
        LEFT JOIN fence.advance_acl() x (grantee) ON x.grantee = g.grantee
        WHERE x.grantee IS NULL
        ORDER BY g.grantee
    LOOP
        IF r.grantee = 'public' THEN
            DELETE FROM fence.advance_grants g WHERE g.grantee = 'public';
            RAISE WARNING 'fence: PUBLIC may no longer execute fence.advance() (revoked by hand): recorded in fence.advance_grants'
                USING HINT = 'SELECT fence.grant_public(); lets every role advance again.';
        ELSIF NOT r.known THEN
            RAISE WARNING 'fence: fence.advance_grants lets role % execute fence.advance(), and no role of that name exists in this cluster',
                    pg_catalog.quote_ident(r.grantee)
                USING HINT = pg_catalog.format('Restore the roles first (pg_dumpall --globals-only | psql), then run this script again; or forget it: SELECT fence.revoke(%L);',
                                               r.grantee);
        ELSE
            PERFORM fence.set_advance(r.grantee, true, 'install');
            RAISE WARNING 'fence: granted EXECUTE on fence.advance() to role %, as fence.advance_grants records (its grant was lost, e.g. by a restore)',
                    pg_catalog.quote_ident(r.grantee)
                USING HINT = pg_catalog.format('To take it away: SELECT fence.revoke(%L);', r.grantee);
        END IF;
    END LOOP;
    FOR r IN
        SELECT x.grantee FROM fence.advance_acl() x (grantee)
        WHERE NOT EXISTS (SELECT 1 FROM fence.advance_grants g WHERE g.grantee = x.grantee)
        ORDER BY x.grantee
    LOOP
        IF r.grantee = 'public' THEN
            REVOKE EXECUTE ON FUNCTION fence.advance(text, bigint) FROM PUBLIC;
            RAISE WARNING 'fence: revoked EXECUTE on fence.advance() from PUBLIC, which fence.advance_grants does not allow (a restore that lost the function''s ACL, or a GRANT by hand)'
                USING HINT = 'To let every role advance: SELECT fence.grant_public();';
        ELSE
            INSERT INTO fence.advance_grants (grantee) VALUES (r.grantee);
            RAISE WARNING 'fence: role % may execute fence.advance() (granted by hand): recorded in fence.advance_grants',
                    pg_catalog.quote_ident(r.grantee)
                USING HINT = pg_catalog.format('To take it away: SELECT fence.revoke(%L);', r.grantee);
        END IF;
    END LOOP;
END
$apply$;
