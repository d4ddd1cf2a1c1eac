-- Retrofit an existing version column (e.g. Rails' lock_version): rows
-- that never had a version count as never fenced.
UPDATE main.{{TABLE}} SET {{COL}} = 0 WHERE {{COL}} IS NULL;
