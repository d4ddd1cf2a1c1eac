-- Per-row fencing, UPDATE that changes a key: a row the new key would
-- collide with (and UPDATE OR REPLACE would delete, firing no DELETE
-- trigger) must admit the token (fence_stamp_rule).  The keys: every UNIQUE key and,
-- in a rowid table, the rowid -- under each of its names that is not a
-- column (rowid, _rowid_, oid) and its INTEGER PRIMARY KEY alias, since
-- "UPDATE OF" matches the names written in the SET list.  "UPDATE OF" the
-- key columns so that other UPDATEs never run it (the hot path); WHEN
-- so that it only looks when a key really changes.
CREATE TRIGGER main.{{TRIGGER}} BEFORE UPDATE OF {{KEY_COLUMNS}} ON {{TABLE}} FOR EACH ROW
WHEN {{KEYS_CHANGED}}
BEGIN
    SELECT fence_stale('table', {{TABLE_STR}}, fence_token(), {{COL}}),
           RAISE(ABORT, 'fence:stale table {{TABLE_MSG}}: write rejected')
      FROM {{TABLE}}
     WHERE ({{CONFLICT}}) AND fence_stamp_rule({{COL}}, fence_token()) = 'older';
END;
