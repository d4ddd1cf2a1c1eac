-- upsert_mark.sql -- raise resource ?1's mark to token ?2, recorded for
-- holder ?3 (NULL: none).  The mark never goes down, even if this ran for
-- an older token by mistake.  Runs inside the write transaction opened by
-- begin; commit makes it durable.
INSERT INTO fence_gate_marks (resource, mark, holder) VALUES (?1, ?2, ?3)
ON CONFLICT (resource) DO UPDATE SET mark = excluded.mark, holder = excluded.holder
WHERE excluded.mark > fence_gate_marks.mark;
