# Tests of libfence_pg against a real PostgreSQL: one Check suite per
# concern, sharing the fixture and helpers of pgutil.c.
#   test_pg           install, fencing per row and per resource, modes, COPY, pipelines
#   test_pg_security  the security review: roles, install ownership, triggers, names
#   test_pg_api       the C API's edges: arguments, errmsg/sqlstate, fence_stale, grammar
#   test_pg_holder    holder ids at resources (version 3), upgrades from versions 1 and 2
# fence_v2.sql is fence.sql version 2 as released, kept to test real upgrades.
PG_TESTS    := test_pg test_pg_security test_pg_api test_pg_holder
PGUTIL_OBJ  := $(B)/tests/pg/pgutil.o $(B)/tests/pg/sql_v2_embed.o
$(eval $(call embed_rule,$(B)/tests/pg/sql_v2_embed.c,pgtest__sql_,tests/pg/fence_v2.sql))
TEST_BINS   += $(PG_TESTS:%=$(B)/tests/pg/%)
$(B)/tests/pg/%.o: MOD_CFLAGS += -Ilib/pg $(PQ_CFLAGS)
$(PG_TESTS:%=$(B)/tests/pg/%): $(B)/tests/pg/%: $(B)/tests/pg/%.o $(PGUTIL_OBJ) $(TESTUTIL_OBJ) \
                                               $(LIBFENCE_PG)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(PQ_LIBS) $(CHECK_LIBS)


# Benchmark (make bench, never make test).
BENCH_BINS += $(B)/tests/bench/bench_pg
$(B)/tests/bench/bench_pg.o: MOD_CFLAGS += -Ilib/pg $(PQ_CFLAGS)
$(B)/tests/bench/bench_pg: $(B)/tests/bench/bench_pg.o $(LIBFENCE_PG)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(PQ_LIBS) -lm
