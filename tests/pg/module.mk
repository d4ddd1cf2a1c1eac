# Tests of libfence_pg against a real PostgreSQL: one Check suite per
# concern, sharing the fixture and helpers of pgutil.c.  scripts/run-suites
# runs each once per per-row implementation (FENCE_TEST_PG_IMPL=plpgsql,
# then c: the extension of lib/pgext), test_pg_interop once.
#   test_pg           install, fencing per row and per resource, modes, COPY, pipelines
#   test_pg_security  the security review: roles, install ownership, triggers, names
#   test_pg_api       the C API's edges: arguments, errmsg/sqlstate, fence_stale, grammar
#   test_pg_holder    holder ids at resources (version 3), upgrades from versions 1 and 2
#   test_pg_interop   both implementations in one database; the extension's life
#                     (CREATE/ALTER/DROP EXTENSION) and what only its guard does
# fence_v2.sql is fence.sql version 2 as released, kept to test real upgrades.
# Lines appended at the end of this file may add to PG_TESTS and
# PGUTIL_OBJ: the rules that read them are deferred (LATE_RULES, read by
# the top Makefile once every fragment is in).
PG_TESTS    := test_pg test_pg_security test_pg_api test_pg_holder test_pg_interop
PGUTIL_OBJ  := $(B)/tests/pg/pgutil.o $(B)/tests/pg/sql_v2_embed.o
$(eval $(call embed_rule,$(B)/tests/pg/sql_v2_embed.c,pgtest__sql_,tests/pg/fence_v2.sql))
$(B)/tests/pg/%.o: MOD_CFLAGS += -Ilib/pg $(PQ_CFLAGS)
define PG_TEST_RULES
TEST_BINS += $(PG_TESTS:%=$(B)/tests/pg/%)
$(PG_TESTS:%=$(B)/tests/pg/%): $(B)/tests/pg/%: $(B)/tests/pg/%.o $(PGUTIL_OBJ) $(TESTUTIL_OBJ) \
                                               $(LIBFENCE_PG)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(PQ_LIBS) $(CHECK_LIBS)
endef
LATE_RULES += PG_TEST_RULES


# Benchmark (make bench, never make test).
BENCH_BINS += $(B)/tests/bench/bench_pg
$(B)/tests/bench/bench_pg.o: MOD_CFLAGS += -Ilib/pg $(PQ_CFLAGS)
$(B)/tests/bench/bench_pg: $(B)/tests/bench/bench_pg.o $(LIBFENCE_PG)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(PQ_LIBS) -lm
PG_TESTS += test_pg_admin
# fence_v3.sql: fence.sql version 3 as released, for real upgrades (test_pg_admin).
PGUTIL_OBJ += $(B)/tests/pg/sql_v3_embed.o
$(eval $(call embed_rule,$(B)/tests/pg/sql_v3_embed.c,pgtest__sql_,tests/pg/fence_v3.sql))
PG_TESTS += test_pg_race
# Behind a real pgbouncer (with-servers --pgbouncer): transaction, statement
# and session pools, both guards in one run: runs once.
PG_TESTS += test_pg_pooler
# test_pg_restore: pg_dump / pg_restore (docs/postgres.md, "Dump and restore"),
# both implementations in one run: runs once (scripts/run-suites).
PG_TESTS += test_pg_restore
