-- The fence schema for SQLite as it was before holders (fence 0.2 before issue 8:
-- git show 5210649:sql/sqlite/schema.sql, verbatim below), for the upgrade tests.

-- Fence schema for SQLite: per-resource high-water marks.  Idempotent.
--
-- A resource's high_water is the highest fencing token that advanced it.
-- Advance it inside the writer's own transaction (BEGIN IMMEDIATE):
--     INSERT INTO fence_advance(resource) VALUES ('orders');
-- with the connection's token (fence_token()): a lower token is refused
-- (fence:stale), an equal one is admitted, a higher one raises the mark.
-- Marks are never lowered, renamed or deleted: the guard triggers refuse.
--
-- Everything is created in main (a TEMP object of the same name must not
-- catch it); the trigger bodies name tables unqualified, as SQLite
-- requires, and SQLite resolves them in the trigger's own schema, main.
CREATE TABLE IF NOT EXISTS main.fence_resource (
    name       TEXT PRIMARY KEY NOT NULL,
    high_water INTEGER NOT NULL
);

CREATE VIEW IF NOT EXISTS main.fence_advance(resource) AS
    SELECT name FROM fence_resource WHERE 0;

CREATE TRIGGER IF NOT EXISTS main.fence_advance_insert
INSTEAD OF INSERT ON fence_advance FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:notoken resource: no fencing token on this connection; call fence_set_token(N) with N >= 1')
     WHERE typeof(fence_token()) <> 'integer' OR fence_token() < 1;
    SELECT RAISE(ABORT, 'fence:einval resource: the name must be non-empty text')
     WHERE typeof(NEW.resource) <> 'text' OR NEW.resource = '';
    SELECT fence_stale('resource', name, fence_token(), high_water),
           RAISE(ABORT, 'fence:stale resource: write rejected')
      FROM fence_resource
     WHERE name = NEW.resource AND high_water > fence_token();
    INSERT INTO fence_resource(name, high_water) VALUES (NEW.resource, fence_token())
        ON CONFLICT(name) DO UPDATE SET high_water = excluded.high_water
        WHERE excluded.high_water > fence_resource.high_water;
END;

-- Direct writes to fence_resource obey the same rule as fence_advance.
CREATE TRIGGER IF NOT EXISTS main.fence_resource_insert
BEFORE INSERT ON fence_resource FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:notoken resource: no fencing token on this connection; call fence_set_token(N) with N >= 1')
     WHERE typeof(fence_token()) <> 'integer' OR fence_token() < 1;
    SELECT RAISE(ABORT, 'fence:forbidden resource: a high-water mark must be set to the writer''s own token')
     WHERE NEW.high_water IS NOT fence_token();
    SELECT fence_stale('resource', name, fence_token(), high_water),
           RAISE(ABORT, 'fence:stale resource: write rejected')
      FROM fence_resource
     WHERE name = NEW.name AND high_water > fence_token();
END;

CREATE TRIGGER IF NOT EXISTS main.fence_resource_update
BEFORE UPDATE ON fence_resource FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:forbidden resource: a high-water mark cannot be renamed')
     WHERE NEW.name IS NOT OLD.name;
    SELECT RAISE(ABORT, 'fence:notoken resource: no fencing token on this connection; call fence_set_token(N) with N >= 1')
     WHERE typeof(fence_token()) <> 'integer' OR fence_token() < 1;
    SELECT fence_stale('resource', OLD.name, fence_token(), OLD.high_water),
           RAISE(ABORT, 'fence:stale resource: write rejected')
     WHERE OLD.high_water > fence_token();
    SELECT RAISE(ABORT, 'fence:forbidden resource: a high-water mark must be set to the writer''s own token')
     WHERE NEW.high_water IS NOT fence_token() AND NEW.high_water IS NOT OLD.high_water;
END;

CREATE TRIGGER IF NOT EXISTS main.fence_resource_delete
BEFORE DELETE ON fence_resource FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:forbidden resource: high-water marks are never deleted');
END;
