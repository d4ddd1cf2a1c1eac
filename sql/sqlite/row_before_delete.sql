-- Per-row fencing, DELETE: the row's stamp must admit the writer's token
-- (fence_stamp_rule, the rule of lib/common/rule.c: at least the stamp).
-- A write without a token (strict tables) is refused too.  (Once a row is deleted its token is gone
-- with it; fence a re-insert through a resource, see schema.sql.)
CREATE TRIGGER main.{{TRIGGER}} BEFORE DELETE ON {{TABLE}} FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:notoken table {{TABLE_MSG}}: no fencing token for this transaction (a token serves one write transaction); call fence_set_token(N) with N >= 1 in it')
     WHERE {{STRICT}} AND (typeof(fence_token()) <> 'integer' OR fence_token() < 1);
    SELECT fence_stale('table', {{TABLE_STR}}, fence_token(), OLD.{{COL}}),
           RAISE(ABORT, 'fence:stale table {{TABLE_MSG}}: write rejected')
     WHERE fence_stamp_rule(OLD.{{COL}}, fence_token()) = 'older';
END;
