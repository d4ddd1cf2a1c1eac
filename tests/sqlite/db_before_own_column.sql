-- db_before_own_column.sql -- a database as fence before its own-column rule
-- made it (commit 031e1f3, `sqlite3 .dump` of what tests/sqlite's
-- test_sqlite_column.c describes): two tables protected the old retrofit's
-- way, on their version column lock_version, which therefore holds tokens
-- -- posts (strict: row 1 written with token 30, row 2 with 34 by an
-- UPDATE ... SET lock_version = lock_version + 1 that the trigger stamped
-- over, row 3 never fenced) and drafts (permissive: row 2 written with 20)
-- -- and the guard triggers of fence_resource of that version, which
-- compare tokens themselves.  For fence_migrate_version_column and the
-- guard trigger upgrade.
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE fence_resource (
    name       TEXT PRIMARY KEY NOT NULL,
    high_water INTEGER NOT NULL,
    holder     TEXT CHECK (holder IS NULL OR (typeof(holder) = 'text' AND length(holder) = 32
                                              AND holder NOT GLOB '*[^0-9a-f]*'))
);
CREATE TABLE posts(id INTEGER PRIMARY KEY, title TEXT, lock_version INTEGER NOT NULL DEFAULT 0);
INSERT INTO posts VALUES(1,'one by 30',30);
INSERT INTO posts VALUES(2,'two by 34',34);
INSERT INTO posts VALUES(3,'three',0);
CREATE TABLE drafts(id INTEGER PRIMARY KEY, body TEXT, lock_version INTEGER);
INSERT INTO drafts VALUES(1,'a',0);
INSERT INTO drafts VALUES(2,'b by 20',20);
CREATE VIEW fence_advance(resource) AS
    SELECT name FROM fence_resource WHERE 0;
CREATE TRIGGER fence_advance_insert
INSTEAD OF INSERT ON fence_advance FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:notoken resource: no fencing token on this connection; call fence_set_token(N) with N >= 1')
     WHERE typeof(fence_token()) <> 'integer' OR fence_token() < 1;
    SELECT RAISE(ABORT, 'fence:einval resource: the name must be text of 1..512 bytes with no NUL')
     WHERE typeof(NEW.resource) <> 'text' OR NEW.resource = ''
        OR length(CAST(NEW.resource AS BLOB)) > 512 OR instr(CAST(NEW.resource AS BLOB), x'00') > 0;
    SELECT fence_stale('resource', name, fence_token(), high_water, 'older', holder),
           RAISE(ABORT, 'fence:stale resource: write rejected')
      FROM fence_resource
     WHERE name = NEW.resource AND high_water > fence_token();
    SELECT fence_stale('resource', name, fence_token(), high_water, 'repeat', holder),
           RAISE(ABORT, 'fence:stale resource: write rejected')
      FROM fence_resource
     WHERE name = NEW.resource AND high_water = fence_token() AND holder IS NOT fence_holder();
    INSERT INTO fence_resource(name, high_water, holder)
        VALUES (NEW.resource, fence_token(), fence_holder())
        ON CONFLICT(name) DO UPDATE SET high_water = excluded.high_water, holder = excluded.holder
        WHERE excluded.high_water > fence_resource.high_water;
END;
CREATE TRIGGER fence_resource_insert
BEFORE INSERT ON fence_resource FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:notoken resource: no fencing token on this connection; call fence_set_token(N) with N >= 1')
     WHERE typeof(fence_token()) <> 'integer' OR fence_token() < 1;
    SELECT RAISE(ABORT, 'fence:einval resource: the name must be text of 1..512 bytes with no NUL')
     WHERE typeof(NEW.name) <> 'text' OR NEW.name = ''
        OR length(CAST(NEW.name AS BLOB)) > 512 OR instr(CAST(NEW.name AS BLOB), x'00') > 0;
    SELECT RAISE(ABORT, 'fence:forbidden resource: a high-water mark must be set to the writer''s own token')
     WHERE NEW.high_water IS NOT fence_token();
    SELECT RAISE(ABORT, 'fence:forbidden resource: a mark''s holder must be the writer''s own (fence_holder())')
     WHERE NEW.holder IS NOT fence_holder();
    SELECT fence_stale('resource', name, fence_token(), high_water, 'older', holder),
           RAISE(ABORT, 'fence:stale resource: write rejected')
      FROM fence_resource
     WHERE name = NEW.name AND high_water > fence_token();
    SELECT fence_stale('resource', name, fence_token(), high_water, 'repeat', holder),
           RAISE(ABORT, 'fence:stale resource: write rejected')
      FROM fence_resource
     WHERE name = NEW.name AND high_water = fence_token() AND holder IS NOT fence_holder();
END;
CREATE TRIGGER fence_resource_update
BEFORE UPDATE ON fence_resource FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:forbidden resource: a high-water mark cannot be renamed')
     WHERE NEW.name IS NOT OLD.name;
    SELECT RAISE(ABORT, 'fence:notoken resource: no fencing token on this connection; call fence_set_token(N) with N >= 1')
     WHERE typeof(fence_token()) <> 'integer' OR fence_token() < 1;
    SELECT fence_stale('resource', OLD.name, fence_token(), OLD.high_water, 'older', OLD.holder),
           RAISE(ABORT, 'fence:stale resource: write rejected')
     WHERE OLD.high_water > fence_token();
    SELECT fence_stale('resource', OLD.name, fence_token(), OLD.high_water, 'repeat', OLD.holder),
           RAISE(ABORT, 'fence:stale resource: write rejected')
     WHERE OLD.high_water = fence_token() AND OLD.holder IS NOT fence_holder();
    SELECT RAISE(ABORT, 'fence:forbidden resource: a high-water mark must be set to the writer''s own token')
     WHERE NEW.high_water IS NOT fence_token() AND NEW.high_water IS NOT OLD.high_water;
    SELECT RAISE(ABORT, 'fence:forbidden resource: a mark''s holder must be the writer''s own (fence_holder()), set with its token')
     WHERE (NEW.high_water IS NOT OLD.high_water AND NEW.holder IS NOT fence_holder())
        OR (NEW.high_water IS OLD.high_water AND NEW.holder IS NOT OLD.holder);
END;
CREATE TRIGGER fence_resource_delete
BEFORE DELETE ON fence_resource FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:forbidden resource: high-water marks are never deleted');
END;
CREATE TRIGGER "fence_bi_posts" BEFORE INSERT ON "posts" FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:notoken table "posts": no fencing token on this connection; call fence_set_token(N) with N >= 1')
     WHERE 1 AND (typeof(fence_token()) <> 'integer' OR fence_token() < 1);
    SELECT RAISE(ABORT, 'fence:forbidden table "posts": the token column may not be written above the writer''s own token (0 without a token)')
     WHERE NEW."lock_version" > coalesce(fence_token(), 0);
    SELECT fence_stale('table', 'posts', fence_token(), "lock_version"),
           RAISE(ABORT, 'fence:stale table "posts": write rejected')
      FROM "posts"
     WHERE ((rowid = NEW.rowid)) AND coalesce("lock_version", 0) > fence_token();
END;
CREATE TRIGGER "fence_ai_posts" AFTER INSERT ON "posts" FOR EACH ROW
BEGIN
    UPDATE "posts" SET "lock_version" = coalesce(fence_token(), 0)
     WHERE rowid IS NEW.rowid AND "lock_version" IS NOT coalesce(fence_token(), 0);
END;
CREATE TRIGGER "fence_bu_posts" BEFORE UPDATE OF rowid, _rowid_, oid, "id" ON "posts" FOR EACH ROW
WHEN NEW.rowid IS NOT OLD.rowid
BEGIN
    SELECT fence_stale('table', 'posts', fence_token(), "lock_version"),
           RAISE(ABORT, 'fence:stale table "posts": write rejected')
      FROM "posts"
     WHERE ((rowid = NEW.rowid)) AND coalesce("lock_version", 0) > fence_token();
END;
CREATE TRIGGER "fence_au_posts" AFTER UPDATE ON "posts" FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:notoken table "posts": no fencing token on this connection; call fence_set_token(N) with N >= 1')
     WHERE 1 AND (typeof(fence_token()) <> 'integer' OR fence_token() < 1);
    SELECT fence_stale('table', 'posts', fence_token(), OLD."lock_version"),
           RAISE(ABORT, 'fence:stale table "posts": write rejected')
     WHERE coalesce(OLD."lock_version", 0) > fence_token();
    UPDATE "posts" SET "lock_version" = coalesce(fence_token(), OLD."lock_version")
     WHERE rowid IS NEW.rowid AND "lock_version" IS NOT coalesce(fence_token(), OLD."lock_version")
       AND (fence_token() IS NOT NULL
            OR max(coalesce(NEW."lock_version", 0), 0) IS NOT max(coalesce(OLD."lock_version", 0), 0));
END;
CREATE TRIGGER "fence_bd_posts" BEFORE DELETE ON "posts" FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:notoken table "posts": no fencing token on this connection; call fence_set_token(N) with N >= 1')
     WHERE 1 AND (typeof(fence_token()) <> 'integer' OR fence_token() < 1);
    SELECT fence_stale('table', 'posts', fence_token(), OLD."lock_version"),
           RAISE(ABORT, 'fence:stale table "posts": write rejected')
     WHERE coalesce(OLD."lock_version", 0) > fence_token();
END;
CREATE TRIGGER "fence_bi_drafts" BEFORE INSERT ON "drafts" FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:notoken table "drafts": no fencing token on this connection; call fence_set_token(N) with N >= 1')
     WHERE 0 AND (typeof(fence_token()) <> 'integer' OR fence_token() < 1);
    SELECT RAISE(ABORT, 'fence:forbidden table "drafts": the token column may not be written above the writer''s own token (0 without a token)')
     WHERE NEW."lock_version" > coalesce(fence_token(), 0);
    SELECT fence_stale('table', 'drafts', fence_token(), "lock_version"),
           RAISE(ABORT, 'fence:stale table "drafts": write rejected')
      FROM "drafts"
     WHERE ((rowid = NEW.rowid)) AND coalesce("lock_version", 0) > fence_token();
END;
CREATE TRIGGER "fence_ai_drafts" AFTER INSERT ON "drafts" FOR EACH ROW
BEGIN
    UPDATE "drafts" SET "lock_version" = coalesce(fence_token(), 0)
     WHERE rowid IS NEW.rowid AND "lock_version" IS NOT coalesce(fence_token(), 0);
END;
CREATE TRIGGER "fence_bu_drafts" BEFORE UPDATE OF rowid, _rowid_, oid, "id" ON "drafts" FOR EACH ROW
WHEN NEW.rowid IS NOT OLD.rowid
BEGIN
    SELECT fence_stale('table', 'drafts', fence_token(), "lock_version"),
           RAISE(ABORT, 'fence:stale table "drafts": write rejected')
      FROM "drafts"
     WHERE ((rowid = NEW.rowid)) AND coalesce("lock_version", 0) > fence_token();
END;
CREATE TRIGGER "fence_au_drafts" AFTER UPDATE ON "drafts" FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:notoken table "drafts": no fencing token on this connection; call fence_set_token(N) with N >= 1')
     WHERE 0 AND (typeof(fence_token()) <> 'integer' OR fence_token() < 1);
    SELECT fence_stale('table', 'drafts', fence_token(), OLD."lock_version"),
           RAISE(ABORT, 'fence:stale table "drafts": write rejected')
     WHERE coalesce(OLD."lock_version", 0) > fence_token();
    UPDATE "drafts" SET "lock_version" = coalesce(fence_token(), OLD."lock_version")
     WHERE rowid IS NEW.rowid AND "lock_version" IS NOT coalesce(fence_token(), OLD."lock_version")
       AND (fence_token() IS NOT NULL
            OR max(coalesce(NEW."lock_version", 0), 0) IS NOT max(coalesce(OLD."lock_version", 0), 0));
END;
CREATE TRIGGER "fence_bd_drafts" BEFORE DELETE ON "drafts" FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:notoken table "drafts": no fencing token on this connection; call fence_set_token(N) with N >= 1')
     WHERE 0 AND (typeof(fence_token()) <> 'integer' OR fence_token() < 1);
    SELECT fence_stale('table', 'drafts', fence_token(), OLD."lock_version"),
           RAISE(ABORT, 'fence:stale table "drafts": write rejected')
     WHERE coalesce(OLD."lock_version", 0) > fence_token();
END;
COMMIT;
