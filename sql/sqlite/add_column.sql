-- Add fence's own token column to a table: {{COL_TYPE}} is the declared
-- type by which fence knows its column again (FENCE_SQLITE_COLUMN_TYPE;
-- SQLite and the ORMs read it as INTEGER).  0 means "never fenced".
-- Qualified with main: a TEMP table of the same name would otherwise get it.
ALTER TABLE main.{{TABLE}} ADD COLUMN {{COL}} {{COL_TYPE}} NOT NULL DEFAULT 0;
