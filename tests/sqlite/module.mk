# Tests of libfence_sqlite and its loadable extension, one Check suite per
# concern (the shell suites drive the extension: test_sqlite_ext.sh from the
# sqlite3 shell, test_sqlite_reuse.sh on connections reused by the shell,
# Python's sqlite3 and SQLAlchemy's pool):
#   test_sqlite         what is refused and admitted, tokens, resources, names
#   test_sqlite_tables  keys, odd tables, TEMP shadows, renamed tables
#   test_sqlite_race    two connections on one file; threads sharing one
#   test_sqlite_api     arguments, messages, marks, the stale description
#   test_sqlite_holder  holder ids: the rule for equal tokens, the setter and
#                       getter, the message
#   test_sqlite_column  the token column is fence's own; the migration of a
#                       table an older fence fenced on its version column
#                       (tests/sqlite/db_before_own_column.sql)
#   test_sqlite_txn     a token serves one write transaction: a connection
#                       reused as a pool reuses it, the edges (the extension
#                       from Python, SQLAlchemy and the shell:
#                       test_sqlite_reuse.sh)
#   test_sqlite_rule    the one table of cases of the store rule
#                       (tests/common/rule_cases.tsv) against the SQL rule
#                       functions and every trigger that asks them
#   test_sqlite_upgrade a schema from before holders upgraded in place
#                       (tests/sqlite/schema_before_holder.sql), and one from
#                       before the name rule (schema_before_names.sql)
SQLITE_TESTS     := test_sqlite test_sqlite_tables test_sqlite_race test_sqlite_api \
                    test_sqlite_holder test_sqlite_upgrade test_sqlite_rule test_sqlite_column \
                    test_sqlite_txn
SQLITE_TEST_BINS := $(SQLITE_TESTS:%=$(B)/tests/sqlite/%)
SQLITEUTIL_OBJ   := $(B)/tests/sqlite/sqliteutil.o
TEST_BINS += $(SQLITE_TEST_BINS)
$(B)/tests/sqlite/%.o: MOD_CFLAGS += -Ilib/sqlite
$(B)/tests/sqlite/test_sqlite_upgrade.o: MOD_CFLAGS += \
  -DSU_OLD_SCHEMA='"$(CURDIR)/tests/sqlite/schema_before_holder.sql"' \
  -DSU_SCHEMA_BEFORE_NAMES='"$(CURDIR)/tests/sqlite/schema_before_names.sql"'
$(B)/tests/sqlite/test_sqlite_column.o: MOD_CFLAGS += \
  -DSU_BEFORE_OWN_COLUMN='"$(CURDIR)/tests/sqlite/db_before_own_column.sql"'
$(SQLITE_TEST_BINS): $(B)/tests/sqlite/%: $(B)/tests/sqlite/%.o $(SQLITEUTIL_OBJ) $(TESTUTIL_OBJ) \
                                          $(RULECASES_OBJ) $(LIBFENCE_SQLITE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(SQLITE_LIBS) $(CHECK_LIBS)
