# Tests: one folder per part (tests/lease, tests/pg, tests/sqlite,
# tests/gate, tests/cli, tests/examples), the shared helpers in
# tests/common, the benchmarks in tests/bench.  A Check suite is a binary
# $(B)/tests/PART/test_*; a shell suite is tests/PART/test_*.sh and prints
# TAP-style "ok"/"not ok" lines.  scripts/run-suites runs them all.
$(B)/tests/%.o: MOD_CFLAGS += $(CHECK_CFLAGS) -Itests/common

# ---- lease: the Redis lease library -----------------------------------
LEASE_TESTS := lease client heartbeat badinput
LEASE_TEST_BINS := $(LEASE_TESTS:%=$(B)/tests/lease/test_%)
TEST_BINS += $(LEASE_TEST_BINS) $(B)/tests/lease/holder
$(B)/tests/lease/%.o: MOD_CFLAGS += -Ilib/lease -Itests/lease
$(LEASE_TEST_BINS): $(B)/tests/lease/test_%: $(B)/tests/lease/test_%.o $(LEASEUTIL_OBJ) \
		$(TESTUTIL_OBJ) $(LIBFENCE) | $(B)/tests/lease/holder
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(HIREDIS_LIBS) $(CHECK_LIBS)
# holder: a lease holder in a process of its own, spawned by the lease
# suites for the multi-process cases (kill -9, cross-process exclusion).
$(B)/tests/lease/holder: $(B)/tests/lease/holder.o $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(HIREDIS_LIBS)

# ---- pg -----------------------------------------------------------------
TEST_BINS += $(B)/tests/pg/test_pg
$(B)/tests/pg/%.o: MOD_CFLAGS += -Ilib/pg $(PQ_CFLAGS)
$(B)/tests/pg/test_pg: $(B)/tests/pg/test_pg.o $(TESTUTIL_OBJ) $(LIBFENCE_PG)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(PQ_LIBS) $(CHECK_LIBS)

# ---- sqlite ---------------------------------------------------------------
TEST_BINS += $(B)/tests/sqlite/test_sqlite $(SQLITE_EXT)
$(B)/tests/sqlite/%.o: MOD_CFLAGS += -Ilib/sqlite
$(B)/tests/sqlite/test_sqlite: $(B)/tests/sqlite/test_sqlite.o $(TESTUTIL_OBJ) $(LIBFENCE_SQLITE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(SQLITE_LIBS) $(CHECK_LIBS)

# ---- gate -----------------------------------------------------------------
TEST_BINS += $(B)/tests/gate/test_gate
$(B)/tests/gate/%.o: MOD_CFLAGS += -Ilib/gate
$(B)/tests/gate/test_gate: $(B)/tests/gate/test_gate.o $(TESTUTIL_OBJ) $(LIBFENCE_GATE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(SQLITE_LIBS) $(CHECK_LIBS)

# ---- cli: tests/cli/test_cli.sh drives $(B)/fence -------------------------
TEST_BINS += $(BINS)

# ---- benchmarks: separate programs, never run by make test --------------
$(B)/tests/bench/bench_lease.o: MOD_CFLAGS += -Ilib/lease
$(B)/tests/bench/bench_pg.o: MOD_CFLAGS += -Ilib/pg $(PQ_CFLAGS)
$(B)/tests/bench/bench_sqlite.o: MOD_CFLAGS += -Ilib/sqlite
$(B)/tests/bench/bench_gate.o: MOD_CFLAGS += -Ilib/gate
BENCH_BINS += $(addprefix $(B)/tests/bench/,bench_lease bench_pg bench_sqlite bench_gate)
$(B)/tests/bench/bench_lease: $(B)/tests/bench/bench_lease.o $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(HIREDIS_LIBS) -lm
$(B)/tests/bench/bench_pg: $(B)/tests/bench/bench_pg.o $(LIBFENCE_PG)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(PQ_LIBS) -lm
$(B)/tests/bench/bench_sqlite: $(B)/tests/bench/bench_sqlite.o $(LIBFENCE_SQLITE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(SQLITE_LIBS) -lm
$(B)/tests/bench/bench_gate: $(B)/tests/bench/bench_gate.o $(LIBFENCE_GATE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(SQLITE_LIBS) -lm

tests-build: $(TEST_BINS)
