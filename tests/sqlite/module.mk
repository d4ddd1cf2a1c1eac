# Tests of libfence_sqlite and its loadable extension.
TEST_BINS += $(B)/tests/sqlite/test_sqlite
$(B)/tests/sqlite/%.o: MOD_CFLAGS += -Ilib/sqlite
$(B)/tests/sqlite/test_sqlite: $(B)/tests/sqlite/test_sqlite.o $(TESTUTIL_OBJ) $(LIBFENCE_SQLITE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(SQLITE_LIBS) $(CHECK_LIBS)


# Benchmark (make bench, never make test).
BENCH_BINS += $(B)/tests/bench/bench_sqlite
$(B)/tests/bench/bench_sqlite.o: MOD_CFLAGS += -Ilib/sqlite
$(B)/tests/bench/bench_sqlite: $(B)/tests/bench/bench_sqlite.o $(LIBFENCE_SQLITE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(SQLITE_LIBS) -lm
