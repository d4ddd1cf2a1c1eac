# Tests of libfence_pg against a real PostgreSQL.
TEST_BINS += $(B)/tests/pg/test_pg
$(B)/tests/pg/%.o: MOD_CFLAGS += -Ilib/pg $(PQ_CFLAGS)
$(B)/tests/pg/test_pg: $(B)/tests/pg/test_pg.o $(TESTUTIL_OBJ) $(LIBFENCE_PG)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(PQ_LIBS) $(CHECK_LIBS)


# Benchmark (make bench, never make test).
BENCH_BINS += $(B)/tests/bench/bench_pg
$(B)/tests/bench/bench_pg.o: MOD_CFLAGS += -Ilib/pg $(PQ_CFLAGS)
$(B)/tests/bench/bench_pg: $(B)/tests/bench/bench_pg.o $(LIBFENCE_PG)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(PQ_LIBS) -lm
