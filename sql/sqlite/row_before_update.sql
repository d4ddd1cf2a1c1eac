-- Per-row fencing, UPDATE that changes a UNIQUE key: a row the new key
-- would collide with (and UPDATE OR REPLACE would delete) must not hold a
-- higher token.  Created only for tables that have UNIQUE keys, and
-- "UPDATE OF" the key columns so that other UPDATEs never run it.
CREATE TRIGGER {{TRIGGER}} BEFORE UPDATE OF {{KEY_COLUMNS}} ON {{TABLE}} FOR EACH ROW
WHEN {{KEYS_CHANGED}}
BEGIN
    SELECT fence_stale('table', {{TABLE_STR}}, fence_token(), {{COL}}),
           RAISE(ABORT, 'fence:stale table {{TABLE_MSG}}: write rejected')
      FROM {{TABLE}}
     WHERE ({{CONFLICT}}) AND coalesce({{COL}}, 0) > fence_token();
END;
