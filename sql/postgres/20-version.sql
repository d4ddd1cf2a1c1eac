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
    IF v > 7 THEN
        RAISE EXCEPTION 'fence: schema version % is installed, this script is version 7; refusing to downgrade', v;
    END IF;
    PERFORM pg_catalog.set_config('fence.install_from', COALESCE(v, 0)::text, true);
END
$install$;

INSERT INTO fence.meta (version) VALUES (7)
ON CONFLICT (singleton) DO UPDATE SET version = EXCLUDED.version;

-- The schema version of this install script.
CREATE OR REPLACE FUNCTION fence.version() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 7 $$;
