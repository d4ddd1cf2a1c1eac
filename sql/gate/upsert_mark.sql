-- upsert_mark.sql -- raise resource ?1's mark to token ?2.  The mark never
-- goes down, even if this ran for an older token by mistake.  Runs inside
-- the write transaction opened by begin; commit makes it durable.
INSERT INTO fence_gate_marks (resource, mark) VALUES (?1, ?2)
ON CONFLICT (resource) DO UPDATE SET mark = max(mark, excluded.mark);
