-- add_holder.sql -- upgrade a table created before holders were recorded:
-- its marks keep their tokens and count as recorded without a holder (NULL).
-- Runs inside a write transaction, only when has_holder.sql says 0.
ALTER TABLE fence_gate_marks ADD COLUMN
    holder TEXT NULL CHECK (holder IS NULL OR (typeof(holder) = 'text' AND
                            length(holder) = 32 AND holder NOT GLOB '*[^0-9a-f]*'));
