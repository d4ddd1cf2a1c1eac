-- Add the token column to a table that has none.  0 means "never fenced".
ALTER TABLE {{TABLE}} ADD COLUMN {{COL}} INTEGER NOT NULL DEFAULT 0;
