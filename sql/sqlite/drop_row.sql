-- Remove a table's fencing triggers.  The token column stays (dropping a
-- column rewrites the table); its values stay valid if protection returns.
DROP TRIGGER IF EXISTS {{TRIG_BI}};
DROP TRIGGER IF EXISTS {{TRIG_AI}};
DROP TRIGGER IF EXISTS {{TRIG_BU}};
DROP TRIGGER IF EXISTS {{TRIG_AU}};
DROP TRIGGER IF EXISTS {{TRIG_BD}};
