-- 87-verify.sql -- part of fence.sql: fence.verify(), what should be (fence.tables, the token column markers, fence.advance_grants) against what is.
-- The parts are joined in name order into $(B)/sql/postgres/fence.sql
-- (lib/pg/module.mk), the one script that psql -f, fence_pg_install()
-- and make install use; it runs as one transaction (BEGIN in
-- 10-schema.sql, COMMIT in 90-upgrade.sql).  See docs/postgres.md.

-- One row per difference between what fence recorded and what is, with
-- its reason.  For the recorded tables (fence.tables; those dropped since
-- are not listed):
--   no guard: zz_fence_guard_upd is missing or does not call fence's
--     guard (fence.guards does not list the table);
--   each fault fence.guards names: one of the guard's triggers
--     (zz_fence_guard_ins, _upd, _del, _truncate) or of the AFTER checks
--     missing, not of its event or timing, only for UPDATE OF some
--     columns, only WHEN a condition holds, calling another function or
--     with other arguments, disabled (or ENABLE REPLICA: it fires only in
--     replica mode), a constraint trigger;
--   the AFTER check missing where fence.guards says it is needed;
--   guarded by another column, mode or implementation than recorded;
--   the token column without fence's marker (fence.token_marker()).
-- A table that carries the marker but has no row in fence.tables (pg_dump
-- -t / pg_restore -t of it alone, which leaves out its triggers and
-- fence's registries; a copy made with CREATE TABLE ... LIKE ... INCLUDING
-- CONSTRAINTS): tbl, the marked column, mode and implementation NULL.
-- The privilege policy (fence.advance_grants against the ACL of
-- fence.advance): tbl is fence.advance_grants, col, mode and
-- implementation NULL; PUBLIC or a role that may execute it without a
-- record, a recorded one that may not, a recorded role that does not exist
-- in this cluster.  A deploy script goes live only when SELECT count(*)
-- FROM fence.verify() is 0; the install (re-running this script) repairs
-- what it can and WARNs about the rest.  Reads only fence's tables and
-- views (SELECT to PUBLIC) and the catalogs, with the caller's rights:
-- EXECUTE to PUBLIC.
CREATE OR REPLACE FUNCTION fence.verify()
RETURNS TABLE (tbl regclass, col name, mode text, implementation text, reason text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT v.* FROM (
    SELECT r.tbl, r.col, r.mode, r.implementation, f.reason
    FROM fence.tables r
    JOIN pg_catalog.pg_class c ON c.oid = r.tbl
    LEFT JOIN fence.guards g ON g.tbl = r.tbl,
    LATERAL (
        SELECT 'no guard: zz_fence_guard_upd is missing or does not call fence''s guard' AS reason
        WHERE g.tbl IS NULL
        UNION ALL
        SELECT u.fault FROM pg_catalog.unnest(g.faults OPERATOR(pg_catalog.||) g.check_faults) u (fault)
        UNION ALL
        SELECT 'AFTER check missing: a BEFORE row trigger fires after the guard and could rewrite the token column (zz_fence_check_ins/_upd)'
        WHERE g.check_needed AND NOT g.check_present AND pg_catalog.cardinality(g.check_faults) = 0
        UNION ALL
        SELECT pg_catalog.format('guarded by column %I, %s, %s, not as fence.tables records it (column %I, %s, %s)',
                                 g.col, g.mode, g.implementation, r.col, r.mode, r.implementation)
        WHERE (g.col, g.mode, g.implementation) <> (r.col, r.mode, r.implementation)
        UNION ALL
        SELECT pg_catalog.format('token column %I does not carry fence''s marker (constraint %I): restored alone (pg_dump -t, pg_restore -t), the table would come back unguarded and unreported',
                                 r.col, (fence.token_marker(r.col)).conname)
        WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                      WHERE a.attrelid = r.tbl AND a.attname = r.col AND a.attnum > 0 AND NOT a.attisdropped)
          AND NOT fence.is_token_column(r.tbl, r.col)
    ) f
    UNION ALL
    SELECT m.tbl, m.col, NULL, NULL,
           pg_catalog.format('not recorded: column %I carries fence''s token column marker (constraint %I), but fence.tables has no row for this table (restored alone with pg_dump -t or pg_restore -t, or copied with LIKE ... INCLUDING CONSTRAINTS): it takes writes without a token until the install protects it again',
                             m.col, (fence.token_marker(m.col)).conname)
    FROM fence.token_columns m
    WHERE NOT EXISTS (SELECT 1 FROM fence.tables r WHERE r.tbl = m.tbl)
    UNION ALL
    SELECT 'fence.advance_grants'::regclass, NULL, NULL, NULL, p.reason
    FROM (
        SELECT CASE WHEN x.grantee = 'public' THEN 'PUBLIC' ELSE pg_catalog.format('role %I', x.grantee) END
               || ' may execute fence.advance(), which fence.advance_grants does not allow' AS reason
        FROM fence.advance_acl() x (grantee)
        WHERE NOT EXISTS (SELECT 1 FROM fence.advance_grants a WHERE a.grantee = x.grantee)
        UNION ALL
        SELECT CASE WHEN a.grantee <> 'public'
                         AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles o WHERE o.rolname = a.grantee)
                    THEN pg_catalog.format('role %I is in fence.advance_grants but does not exist in this cluster', a.grantee)
                    WHEN a.grantee = 'public'
                    THEN 'PUBLIC may not execute fence.advance(), which fence.advance_grants allows'
                    ELSE pg_catalog.format('role %I may not execute fence.advance(), which fence.advance_grants allows', a.grantee) END
        FROM fence.advance_grants a
        WHERE NOT EXISTS (SELECT 1 FROM fence.advance_acl() x (grantee) WHERE x.grantee = a.grantee)
    ) p
  ) v
  ORDER BY v.tbl::text, v.reason
$$;
REVOKE ALL ON FUNCTION fence.verify() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fence.verify() TO PUBLIC;
