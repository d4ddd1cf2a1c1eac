-- Remove one fencing trigger (find_row_triggers.sql finds them).  The
-- token column stays (dropping a column rewrites the table); its values
-- stay valid if protection returns.
DROP TRIGGER IF EXISTS main.{{TRIGGER}};
