-- Upgrade a fence schema from before holders (fence_resource(name,
-- high_water), guard triggers that admit an equal token from anyone): add
-- the holder column -- existing marks keep their tokens and count as
-- recorded without a holder (NULL) -- and drop the old guard triggers, which
-- schema.sql, run right after this in the same savepoint, creates anew.
-- Run by the C code (lib/sqlite/template.c) only when the column is
-- missing.  The column's definition is the one in schema.sql.
ALTER TABLE main.fence_resource
    ADD COLUMN holder TEXT CHECK (holder IS NULL OR (typeof(holder) = 'text' AND length(holder) = 32
                                                     AND holder NOT GLOB '*[^0-9a-f]*'));
DROP TRIGGER IF EXISTS main.fence_advance_insert;
DROP TRIGGER IF EXISTS main.fence_resource_insert;
DROP TRIGGER IF EXISTS main.fence_resource_update;
DROP TRIGGER IF EXISTS main.fence_resource_delete;
