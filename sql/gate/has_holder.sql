-- has_holder.sql -- 1 when fence_gate_marks has the holder column, 0 when
-- the file was created by a gate that did not record holders.
SELECT count(*) FROM pragma_table_info('fence_gate_marks') WHERE name = 'holder';
