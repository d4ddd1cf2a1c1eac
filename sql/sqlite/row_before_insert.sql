-- Per-row fencing, INSERT, before the row is written: the connection must
-- carry a token, the client may not write the token column above it, and
-- a row the INSERT would replace (INSERT OR REPLACE, REPLACE INTO, UPSERT;
-- found through every UNIQUE key) must not hold a higher token.
CREATE TRIGGER {{TRIGGER}} BEFORE INSERT ON {{TABLE}} FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'fence:notoken table {{TABLE_MSG}}: no fencing token on this connection; call fence_set_token(N) with N >= 1')
     WHERE {{STRICT}} AND (typeof(fence_token()) <> 'integer' OR fence_token() < 1);
    SELECT RAISE(ABORT, 'fence:forbidden table {{TABLE_MSG}}: the token column may not be written above the writer''s own token')
     WHERE NEW.{{COL}} > fence_token();
    SELECT fence_stale('table', {{TABLE_STR}}, fence_token(), {{COL}}),
           RAISE(ABORT, 'fence:stale table {{TABLE_MSG}}: write rejected')
      FROM {{TABLE}}
     WHERE ({{CONFLICT}}) AND coalesce({{COL}}, 0) > fence_token();
END;
