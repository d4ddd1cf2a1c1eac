-- select_mark.sql -- the committed mark of resource ?1 and its holder (NULL:
-- none); no row: never written.
SELECT mark, holder FROM fence_gate_marks WHERE resource = ?1;
