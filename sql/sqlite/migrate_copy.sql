-- fence_migrate_version_column: fence's own column takes exactly the stamps
-- the old token column holds (NULL, like 0, is "never fenced").  Run with
-- the table's fencing triggers dropped, inside the migration's savepoint.
UPDATE main.{{TABLE}} SET {{COL}} = coalesce({{OLD_COL}}, 0);
