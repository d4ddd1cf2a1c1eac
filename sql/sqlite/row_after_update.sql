-- Per-row fencing, UPDATE.  The check and the stamp live in one AFTER
-- trigger on purpose:
--   * OLD.<col> is the token the row held before this statement, whatever
--     the client put in the column, so writing the column cannot fool the
--     check;
--   * the stamping UPDATE below cannot fire this trigger again (SQLite
--     never fires a trigger from inside itself unless PRAGMA
--     recursive_triggers is on; if it is, the nested run finds the column
--     already equal to the token, passes, and stops);
--   * RAISE(ABORT) in an AFTER trigger undoes the whole statement, so a
--     refused write leaves nothing behind.
-- The check is fence_stamp_rule (lib/common/rule.c): the token must be at
-- least the row's stamp.
-- A BEFORE UPDATE check would be re-run by the stamping UPDATE against the
-- client's value of the column, and could not tell the two apart.
--
-- The stamp: the writer's token; without a token (permissive tables only)
-- the row keeps the stamp it had, whatever the client wrote to the column
-- (a legacy writer's lock_version = lock_version + 1, or a planted 0 that
-- would let a stale token in, or a huge value that would lock the row).
-- Values of at most 0 and NULL all mean "never fenced" and count as equal,
-- so the 0 that row_after_insert stamps on a new row is left alone.  (With
-- recursive_triggers on, restoring the old stamp re-runs this trigger,
-- which cannot tell the restore from a client write: such a write ends in
-- "too many levels of trigger recursion" and is undone whole.)
CREATE TRIGGER main.{{TRIGGER}} AFTER UPDATE ON {{TABLE}} FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:notoken table {{TABLE_MSG}}: no fencing token for this transaction (a token serves one write transaction); call fence_set_token(N) with N >= 1 in it')
     WHERE {{STRICT}} AND (typeof(fence_token()) <> 'integer' OR fence_token() < 1);
    SELECT fence_stale('table', {{TABLE_STR}}, fence_token(), OLD.{{COL}}),
           RAISE(ABORT, 'fence:stale table {{TABLE_MSG}}: write rejected')
     WHERE fence_stamp_rule(OLD.{{COL}}, fence_token()) = 'older';
    UPDATE {{TABLE}} SET {{COL}} = coalesce(fence_token(), OLD.{{COL}})
     WHERE {{ROWKEY}} AND {{COL}} IS NOT coalesce(fence_token(), OLD.{{COL}})
       AND (fence_token() IS NOT NULL
            OR max(coalesce(NEW.{{COL}}, 0), 0) IS NOT max(coalesce(OLD.{{COL}}, 0), 0));
END;
