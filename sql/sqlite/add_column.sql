-- Add the token column to a table that has none.  0 means "never fenced".
-- Qualified with main: a TEMP table of the same name would otherwise get it.
ALTER TABLE main.{{TABLE}} ADD COLUMN {{COL}} INTEGER NOT NULL DEFAULT 0;
