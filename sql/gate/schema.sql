-- schema.sql -- the persistent gate's one table: per resource, the highest
-- fencing token whose write was committed (its "high-water mark").
-- Run at every open; IF NOT EXISTS makes that harmless.
CREATE TABLE IF NOT EXISTS fence_gate_marks (
    resource TEXT PRIMARY KEY NOT NULL,
    mark     INTEGER NOT NULL CHECK (typeof(mark) = 'integer' AND mark >= 1)
) WITHOUT ROWID;
