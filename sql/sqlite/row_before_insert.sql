-- Per-row fencing, INSERT, before the row is written: the transaction
-- must carry a token, the client may not write the token column above
-- it (a write without a token counts as token 0), and a row the INSERT
-- would replace (INSERT OR REPLACE, REPLACE INTO, UPSERT) must admit the
-- token (fence_stamp_rule).  That row is found through every UNIQUE key and, in a rowid
-- table, through the rowid: rows deleted by REPLACE fire no DELETE trigger
-- (unless PRAGMA recursive_triggers is on), so this is the only check they
-- get.  With no rowid given, NEW.rowid reads -1 here (SQLite assigns the
-- real one later, and never one already in use): the check then looks at
-- row -1, which can only refuse, never admit, a write.
--
-- The trigger is created in main, on main's table; its body must name the
-- table unqualified and SQLite resolves it in the trigger's own schema, so
-- a TEMP table of the same name is never what it reads.
CREATE TRIGGER main.{{TRIGGER}} BEFORE INSERT ON {{TABLE}} FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:notoken table {{TABLE_MSG}}: no fencing token for this transaction (a token serves one write transaction); call fence_set_token(N) with N >= 1 in it')
     WHERE {{STRICT}} AND (typeof(fence_token()) <> 'integer' OR fence_token() < 1);
    SELECT RAISE(ABORT, 'fence:forbidden table {{TABLE_MSG}}: the token column may not be written above the writer''s own token (0 without a token)')
     WHERE NEW.{{COL}} > coalesce(fence_token(), 0);
    SELECT fence_stale('table', {{TABLE_STR}}, fence_token(), {{COL}}),
           RAISE(ABORT, 'fence:stale table {{TABLE_MSG}}: write rejected')
      FROM {{TABLE}}
     WHERE ({{CONFLICT}}) AND fence_stamp_rule({{COL}}, fence_token()) = 'older';
END;
