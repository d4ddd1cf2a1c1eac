# Tests of libfence_gate.
TEST_BINS += $(B)/tests/gate/test_gate
$(B)/tests/gate/%.o: MOD_CFLAGS += -Ilib/gate
$(B)/tests/gate/test_gate: $(B)/tests/gate/test_gate.o $(TESTUTIL_OBJ) $(LIBFENCE_GATE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(SQLITE_LIBS) $(CHECK_LIBS)


# Benchmark (make bench, never make test).
BENCH_BINS += $(B)/tests/bench/bench_gate
$(B)/tests/bench/bench_gate.o: MOD_CFLAGS += -Ilib/gate
$(B)/tests/bench/bench_gate: $(B)/tests/bench/bench_gate.o $(LIBFENCE_GATE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(SQLITE_LIBS) -lm
