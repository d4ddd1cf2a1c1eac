-- Per-row fencing, INSERT, after the row is written: stamp it with the
-- writer's token.  The stamping UPDATE fires the AFTER UPDATE trigger,
-- which finds the row's column <= the token (row_before_insert saw to
-- that) and does nothing more.
CREATE TRIGGER {{TRIGGER}} AFTER INSERT ON {{TABLE}} FOR EACH ROW
BEGIN
    UPDATE {{TABLE}} SET {{COL}} = fence_token()
     WHERE {{ROWKEY}} AND {{COL}} IS NOT fence_token() AND fence_token() IS NOT NULL;
END;
