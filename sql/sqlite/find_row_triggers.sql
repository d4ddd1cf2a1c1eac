-- The fencing triggers of table ?1 (main schema), found by what they are,
-- not by the name derived from the table's current name: ALTER TABLE
-- RENAME moves a table's triggers along (tbl_name follows) but keeps their
-- names, fence_<kind>_<old name>.  A fencing trigger: on this table, named
-- with one of the reserved prefixes, and calling fence_token().
SELECT name FROM main.sqlite_master
 WHERE type = 'trigger'
   AND tbl_name = ?1 COLLATE NOCASE
   AND lower(substr(name, 1, 9)) IN ('fence_bi_', 'fence_ai_', 'fence_bu_', 'fence_au_', 'fence_bd_')
   AND instr(sql, 'fence_token()') > 0
 ORDER BY name;
