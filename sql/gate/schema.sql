-- schema.sql -- the persistent gate's one table: per resource, the highest
-- fencing token whose write was committed (its "high-water mark") and the
-- holder that committed it (32 lowercase hex digits, or NULL: none).
-- Run at every open; IF NOT EXISTS makes that harmless.  A table created
-- before holders were recorded gains the column at open (add_holder.sql).
CREATE TABLE IF NOT EXISTS fence_gate_marks (
    resource TEXT PRIMARY KEY NOT NULL,
    mark     INTEGER NOT NULL CHECK (typeof(mark) = 'integer' AND mark >= 1),
    holder   TEXT NULL CHECK (holder IS NULL OR (typeof(holder) = 'text' AND
                              length(holder) = 32 AND holder NOT GLOB '*[^0-9a-f]*'))
) WITHOUT ROWID;
