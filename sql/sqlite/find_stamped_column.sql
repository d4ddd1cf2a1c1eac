-- The column the fencing triggers of table ?1 (main schema, its stored
-- name) stamp, and whether they are permissive (1) or strict (0), for
-- fence_migrate_version_column: read from the AFTER INSERT trigger, which
-- stamps with  SET "<column>" = coalesce(fence_token(), 0), and the
-- BEFORE INSERT trigger, whose no-token check reads WHERE 0 AND ... in
-- permissive mode (row_after_insert.sql, row_before_insert.sql, in this
-- version and every one before it).  No row: the table is not protected.
SELECT c.name,
       (SELECT count(*) > 0 FROM main.sqlite_master b
         WHERE b.type = 'trigger' AND b.tbl_name = ?1 COLLATE NOCASE
           AND lower(substr(b.name, 1, 9)) = 'fence_bi_'
           AND instr(b.sql, 'WHERE 0 AND (typeof(fence_token())') > 0)
  FROM pragma_table_xinfo(?1, 'main') AS c, main.sqlite_master AS m
 WHERE m.type = 'trigger' AND m.tbl_name = ?1 COLLATE NOCASE
   AND lower(substr(m.name, 1, 9)) = 'fence_ai_'
   AND instr(m.sql, 'SET "' || replace(c.name, '"', '""') || '" = coalesce(fence_token(), 0)') > 0;
