# Tests of libfence_pg against a real PostgreSQL: one Check suite per
# concern, sharing the fixture and helpers of pgutil.c.  scripts/run-suites
# runs each once per per-row implementation (FENCE_TEST_PG_IMPL=plpgsql,
# then c: the extension of lib/pgext); test_pg_interop, test_pg_pooler and
# test_pg_restore and test_pg_token once.
#   test_pg           install, fencing per row and per resource, modes, COPY, pipelines
#   test_pg_security  the security review: roles, install ownership, triggers, names
#   test_pg_api       the C API's edges: arguments, errmsg/sqlstate, fence_stale, grammar
#   test_pg_holder    holder ids at resources (version 3), upgrades from versions 1 and 2
#   test_pg_interop   both implementations in one database; the extension's life
#                     (CREATE/ALTER/DROP EXTENSION) and what only its guard does
#   test_pg_admin     administration: protect()'s refusals, fence.grant(), session tokens,
#                     the generated trigger functions, real upgrades from version 3
#   test_pg_race      fence.advance() under real concurrency, per isolation level
#   test_pg_pooler    behind a real pgbouncer (with-servers --pgbouncer):
#                     transaction, statement and session pools, both guards
#                     in one run
#   test_pg_restore   pg_dump / pg_restore (docs/postgres.md, "Dump and
#                     restore"), both implementations in one run
#   test_pg_rules     the store rule, tests/common/rule_cases.tsv, against
#                     fence.advance, the marks' guards and the row guard
#   test_pg_token     binding the token: fence.c_use_token against
#                     fence.use_token, fence_pg_prepare's choice,
#                     fence_pg_prepare_unpooled's named statements
PG_TESTS := test_pg test_pg_security test_pg_api test_pg_holder test_pg_interop \
            test_pg_admin test_pg_race test_pg_pooler test_pg_restore test_pg_rules \
            test_pg_token
PG_TEST_BINS := $(PG_TESTS:%=$(B)/tests/pg/%)
TEST_BINS += $(PG_TEST_BINS)

# fence_v2.sql, fence_v3.sql and fence_v5.sql are fence.sql versions 2, 3
# and 5 as released, kept (embedded) to test real upgrades (fence_v4.sql
# is read by tests/pgext/test_pgext_upgrade.sh).
PGUTIL_OBJ := $(B)/tests/pg/pgutil.o $(B)/tests/pg/sql_v2_embed.o $(B)/tests/pg/sql_v3_embed.o \
              $(B)/tests/pg/sql_v5_embed.o
$(eval $(call embed_rule,$(B)/tests/pg/sql_v2_embed.c,pgtest__sql_,tests/pg/fence_v2.sql))
$(eval $(call embed_rule,$(B)/tests/pg/sql_v3_embed.c,pgtest__sql_,tests/pg/fence_v3.sql))
$(eval $(call embed_rule,$(B)/tests/pg/sql_v5_embed.c,pgtest__sql_,tests/pg/fence_v5.sql))

$(B)/tests/pg/%.o: MOD_CFLAGS += -Ilib/pg $(PQ_CFLAGS)
$(PG_TEST_BINS): $(B)/tests/pg/%: $(B)/tests/pg/%.o $(PGUTIL_OBJ) $(TESTUTIL_OBJ) $(LIBFENCE_PG)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(PQ_LIBS) $(CHECK_LIBS)

# test_pg_rules reads the one table of cases (tests/common/rulecases.c).
$(B)/tests/pg/test_pg_rules: $(B)/tests/common/rulecases.o
