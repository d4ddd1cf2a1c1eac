-- Per-row fencing, DELETE: the row's token must not be higher than the
-- writer's.  (Once a row is deleted its token is gone with it; fence a
-- re-insert through a resource, see schema.sql.)
CREATE TRIGGER main.{{TRIGGER}} BEFORE DELETE ON {{TABLE}} FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:notoken table {{TABLE_MSG}}: no fencing token on this connection; call fence_set_token(N) with N >= 1')
     WHERE {{STRICT}} AND (typeof(fence_token()) <> 'integer' OR fence_token() < 1);
    SELECT fence_stale('table', {{TABLE_STR}}, fence_token(), OLD.{{COL}}),
           RAISE(ABORT, 'fence:stale table {{TABLE_MSG}}: write rejected')
     WHERE coalesce(OLD.{{COL}}, 0) > fence_token();
END;
