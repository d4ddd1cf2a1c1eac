-- select_mark.sql -- the committed mark of resource ?1 (no row: never written).
SELECT mark FROM fence_gate_marks WHERE resource = ?1;
