# Tests: one Check suite per module.  Each module's fragment adds its own
# binaries to TEST_BINS; the core suites are here.  Shell suites are
# tests/*.sh and print TAP-style "ok"/"not ok" lines.
TESTUTIL_OBJ := $(B)/tests/testutil.o
# leaseutil: helpers only the core suites share (clients, keys, raw Redis).
LEASEUTIL_OBJ := $(B)/tests/leaseutil.o

CORE_TESTS := lease client heartbeat badinput
CORE_TEST_BINS := $(CORE_TESTS:%=$(B)/tests/test_%)
TEST_BINS += $(CORE_TEST_BINS)

$(CORE_TEST_BINS): $(B)/tests/test_%: $(B)/tests/test_%.o $(LEASEUTIL_OBJ) $(TESTUTIL_OBJ) \
		$(B)/libfence.a | $(B)/tests/holder
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(HIREDIS_LIBS) $(CHECK_LIBS)

# holder: a lease holder in a process of its own, spawned by the core
# suites for the multi-process cases (kill -9, cross-process exclusion).
$(B)/tests/holder: $(B)/tests/holder.o $(B)/libfence.a
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(HIREDIS_LIBS)

$(B)/tests/%.o: MOD_CFLAGS += $(CHECK_CFLAGS)

# Benchmarks: separate programs, never run by make test.
BENCH_BINS += $(B)/tests/bench/bench_lease
$(B)/tests/bench/bench_lease: $(B)/tests/bench/bench_lease.o $(B)/libfence.a
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(HIREDIS_LIBS) -lm

.PHONY: tests-build
tests-build: $(TEST_BINS)
