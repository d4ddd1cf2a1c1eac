-- Fence schema for SQLite: per-resource high-water marks.  Idempotent.
--
-- A resource's mark is the highest fencing token that advanced it and the
-- holder that token was used by (fence_holder(): 32 lowercase hex digits,
-- or NULL for none).  Advance it inside the writer's own transaction
-- (BEGIN IMMEDIATE):
--     INSERT INTO fence_advance(resource) VALUES ('orders');
-- with the transaction's token and holder (fence_token(), fence_holder()),
-- by the store rule, which every trigger here asks of fence_mark_rule()
-- (C: lib/common/rule.c) rather than writing it again:
--   - a higher token is admitted and the mark becomes (token, holder)
--     ('raise');
--   - an equal token is admitted only from the same holder ('admit'), where
--     "none" equals only "none"; from any other it is refused (fence:stale,
--     reason=repeat): after a Redis failover one token can be issued twice;
--   - a lower token is refused (fence:stale, reason=older).
-- Marks are never lowered, renamed or deleted, and a mark's holder is only
-- ever the writer's own, set with its token: the guard triggers refuse.
--
-- Everything is created in main (a TEMP object of the same name must not
-- catch it); the trigger bodies name tables unqualified, as SQLite
-- requires, and SQLite resolves them in the trigger's own schema, main.
-- A database from before holders is upgraded by upgrade_holder.sql (the
-- C code runs it, then this file, when the holder column is missing); keep
-- the column's definition the same in both files.  Guard triggers of an
-- older version (without fence_mark_rule or the name rule) are dropped by
-- upgrade_triggers.sql and created here anew.
CREATE TABLE IF NOT EXISTS main.fence_resource (
    name       TEXT PRIMARY KEY NOT NULL,
    high_water INTEGER NOT NULL,
    holder     TEXT CHECK (holder IS NULL OR (typeof(holder) = 'text' AND length(holder) = 32
                                              AND holder NOT GLOB '*[^0-9a-f]*'))
);

CREATE VIEW IF NOT EXISTS main.fence_advance(resource) AS
    SELECT name FROM fence_resource WHERE 0;

CREATE TRIGGER IF NOT EXISTS main.fence_advance_insert
INSTEAD OF INSERT ON fence_advance FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:notoken resource: no fencing token for this transaction (a token serves one write transaction); call fence_set_token(N) with N >= 1 in it')
     WHERE typeof(fence_token()) <> 'integer' OR fence_token() < 1;
    SELECT RAISE(ABORT, 'fence:einval resource: the name must be text of 1..512 bytes with no NUL')
     WHERE typeof(NEW.resource) <> 'text' OR NEW.resource = ''
        OR length(CAST(NEW.resource AS BLOB)) > 512 OR instr(CAST(NEW.resource AS BLOB), x'00') > 0;
    SELECT fence_stale('resource', name, fence_token(), high_water, rule, holder),
           RAISE(ABORT, 'fence:stale resource: write rejected')
      FROM (SELECT name, high_water, holder,
                   fence_mark_rule(high_water, holder, fence_token(), fence_holder()) AS rule
              FROM fence_resource WHERE name = NEW.resource)
     WHERE rule IN ('older', 'repeat');
    INSERT INTO fence_resource(name, high_water, holder)
        VALUES (NEW.resource, fence_token(), fence_holder())
        ON CONFLICT(name) DO UPDATE SET high_water = excluded.high_water, holder = excluded.holder
        WHERE fence_mark_rule(fence_resource.high_water, fence_resource.holder,
                              excluded.high_water, excluded.holder) = 'raise';
END;

-- Direct writes to fence_resource obey the same rule as fence_advance.
CREATE TRIGGER IF NOT EXISTS main.fence_resource_insert
BEFORE INSERT ON fence_resource FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:notoken resource: no fencing token for this transaction (a token serves one write transaction); call fence_set_token(N) with N >= 1 in it')
     WHERE typeof(fence_token()) <> 'integer' OR fence_token() < 1;
    SELECT RAISE(ABORT, 'fence:einval resource: the name must be text of 1..512 bytes with no NUL')
     WHERE typeof(NEW.name) <> 'text' OR NEW.name = ''
        OR length(CAST(NEW.name AS BLOB)) > 512 OR instr(CAST(NEW.name AS BLOB), x'00') > 0;
    SELECT RAISE(ABORT, 'fence:forbidden resource: a high-water mark must be set to the writer''s own token')
     WHERE NEW.high_water IS NOT fence_token();
    SELECT RAISE(ABORT, 'fence:forbidden resource: a mark''s holder must be the writer''s own (fence_holder())')
     WHERE NEW.holder IS NOT fence_holder();
    SELECT fence_stale('resource', name, fence_token(), high_water, rule, holder),
           RAISE(ABORT, 'fence:stale resource: write rejected')
      FROM (SELECT name, high_water, holder,
                   fence_mark_rule(high_water, holder, fence_token(), fence_holder()) AS rule
              FROM fence_resource WHERE name = NEW.name)
     WHERE rule IN ('older', 'repeat');
END;

CREATE TRIGGER IF NOT EXISTS main.fence_resource_update
BEFORE UPDATE ON fence_resource FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:forbidden resource: a high-water mark cannot be renamed')
     WHERE NEW.name IS NOT OLD.name;
    SELECT RAISE(ABORT, 'fence:notoken resource: no fencing token for this transaction (a token serves one write transaction); call fence_set_token(N) with N >= 1 in it')
     WHERE typeof(fence_token()) <> 'integer' OR fence_token() < 1;
    SELECT fence_stale('resource', OLD.name, fence_token(), OLD.high_water, rule, OLD.holder),
           RAISE(ABORT, 'fence:stale resource: write rejected')
      FROM (SELECT fence_mark_rule(OLD.high_water, OLD.holder, fence_token(), fence_holder()) AS rule)
     WHERE rule IN ('older', 'repeat');
    SELECT RAISE(ABORT, 'fence:forbidden resource: a high-water mark must be set to the writer''s own token')
     WHERE NEW.high_water IS NOT fence_token() AND NEW.high_water IS NOT OLD.high_water;
    SELECT RAISE(ABORT, 'fence:forbidden resource: a mark''s holder must be the writer''s own (fence_holder()), set with its token')
     WHERE (NEW.high_water IS NOT OLD.high_water AND NEW.holder IS NOT fence_holder())
        OR (NEW.high_water IS OLD.high_water AND NEW.holder IS NOT OLD.holder);
END;

CREATE TRIGGER IF NOT EXISTS main.fence_resource_delete
BEFORE DELETE ON fence_resource FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:forbidden resource: high-water marks are never deleted');
END;
