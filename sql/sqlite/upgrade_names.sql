-- Upgrade a fence schema whose insert triggers predate the one name rule
-- of every fence store (a resource name is 1..512 bytes of text with no
-- NUL byte, as the C API and the gate have it): drop the two triggers, which
-- schema.sql, run right after this in the same savepoint, creates anew
-- with the rule.  Marks are untouched.  Run by the C code
-- (lib/sqlite/template.c) only when a trigger lacks the rule.
DROP TRIGGER IF EXISTS main.fence_advance_insert;
DROP TRIGGER IF EXISTS main.fence_resource_insert;
