-- Upgrade the guard triggers of a fence schema from an older version --
-- insert triggers without the one name rule of every fence store (a
-- resource name is 1..512 bytes of text with no NUL byte), or triggers
-- that compare tokens themselves instead of asking fence_mark_rule(): drop
-- them; schema.sql, run right after this in the same savepoint, creates
-- them anew.  Marks are untouched.  Run by the C code
-- (lib/sqlite/template.c) only when a guard trigger is out of date.
DROP TRIGGER IF EXISTS main.fence_advance_insert;
DROP TRIGGER IF EXISTS main.fence_resource_insert;
DROP TRIGGER IF EXISTS main.fence_resource_update;
