-- Per-row fencing, INSERT, after the row is written: stamp it with the
-- writer's token, or 0 (never fenced) for a write without a token
-- (permissive tables only; row_before_insert refused anything above 0).
-- The stamping UPDATE fires the AFTER UPDATE trigger, which finds the
-- row's column <= the token (row_before_insert saw to that), or, without a
-- token, an old value of at most 0 (NULL or negative) that counts the same
-- as the new 0, and does nothing more.
CREATE TRIGGER main.{{TRIGGER}} AFTER INSERT ON {{TABLE}} FOR EACH ROW
BEGIN
    UPDATE {{TABLE}} SET {{COL}} = coalesce(fence_token(), 0)
     WHERE {{ROWKEY}} AND {{COL}} IS NOT coalesce(fence_token(), 0);
END;
