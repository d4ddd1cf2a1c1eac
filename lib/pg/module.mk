# libfence_pg: storage-side fencing for PostgreSQL.  Links libpq; the core
# libfence never does.  The SQL lives in sql/postgres/fence.sql and is
# embedded at build time (scripts/embed) for fence_pg_install().
PG_SRC := $(wildcard lib/pg/*.c)
PG_OBJ := $(PG_SRC:%.c=$(B)/%.o) $(B)/lib/pg/sql_embed.o

LIBS_STATIC += $(B)/libfence_pg.a
LIBS_SHARED += $(B)/libfence_pg.so
PC_FILES    += $(B)/fence_pg.pc
HEADERS     += lib/pg/fence_pg.h

$(B)/lib/pg/%.o: MOD_CFLAGS += $(PQ_CFLAGS)

$(B)/lib/pg/sql_embed.c: scripts/embed sql/postgres/fence.sql lib/pg/module.mk
	@mkdir -p $(dir $@)
	scripts/embed fence_pg__sql_ sql/postgres/fence.sql > $@.tmp && mv $@.tmp $@

$(B)/lib/pg/sql_embed.o: $(B)/lib/pg/sql_embed.c
	$(CC) $(REAL_CFLAGS) $(PQ_CFLAGS) -Ilib/pg -c -o $@ $<

$(B)/libfence_pg.a: $(PG_OBJ)
$(B)/libfence_pg.so: $(PG_OBJ)
	$(call link_so,$(PG_OBJ),$(PQ_LIBS))
$(B)/fence_pg.pc: lib/pg/fence_pg.pc.in
	$(make_pc)

# Tests and benchmark.
TEST_BINS  += $(B)/tests/test_pg
BENCH_BINS += $(B)/tests/bench/bench_pg

$(B)/tests/test_pg.o $(B)/tests/bench/bench_pg.o: MOD_CFLAGS += $(PQ_CFLAGS) -Ilib/pg

$(B)/tests/test_pg: $(B)/tests/test_pg.o $(B)/tests/testutil.o $(B)/libfence_pg.a $(B)/libfence.a
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(PQ_LIBS) $(HIREDIS_LIBS) $(CHECK_LIBS)

$(B)/tests/bench/bench_pg: $(B)/tests/bench/bench_pg.o $(B)/libfence_pg.a
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(PQ_LIBS) -lm
