# libfence_gate: the fencing write gate for stores that are not SQL (files,
# blobs, in-process services).  Links SQLite and pthread; the core never
# links SQLite.  Its SQL lives in lib/gate/sql/*.sql, embedded at build time.
GATE_SRC := lib/gate/gate.c lib/gate/gate_mem.c lib/gate/gate_sqlite.c
GATE_SQL := $(sort $(wildcard lib/gate/sql/*.sql))
GATE_OBJ := $(GATE_SRC:%.c=$(B)/%.o) $(B)/lib/gate/sql_embed.o

LIBS_STATIC += $(B)/libfence_gate.a
LIBS_SHARED += $(B)/libfence_gate.so
PC_FILES    += $(B)/fence_gate.pc
HEADERS     += lib/gate/fence_gate.h

# One C string per .sql file: fence_gate__sql_<basename> and its _len.
$(B)/lib/gate/sql_embed.c: scripts/embed $(GATE_SQL) lib/gate/module.mk
	@mkdir -p $(dir $@)
	scripts/embed fence_gate__sql_ $(GATE_SQL) > $@.tmp && mv $@.tmp $@

$(B)/lib/gate/sql_embed.o: $(B)/lib/gate/sql_embed.c
	$(CC) $(REAL_CFLAGS) -c -o $@ $<

$(B)/libfence_gate.a: $(GATE_OBJ)
$(B)/libfence_gate.so: $(GATE_OBJ)
	$(call link_so,$(GATE_OBJ),$(SQLITE_LIBS))
$(B)/fence_gate.pc: lib/gate/fence_gate.pc.in
	$(make_pc)

# The Check suite.  (testutil.o is named directly: tests/module.mk, which
# defines TESTUTIL_OBJ, is read after this file.)
TEST_BINS += $(B)/tests/test_gate
$(B)/tests/test_gate.o: MOD_CFLAGS += -Ilib/gate
$(B)/tests/test_gate: $(B)/tests/test_gate.o $(B)/tests/testutil.o $(B)/libfence_gate.a $(B)/libfence.a
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(SQLITE_LIBS) $(HIREDIS_LIBS) $(CHECK_LIBS)

# The benchmark: begin/commit per second, memory and persistent, against a
# bare SQLite upsert transaction measured in the same run.
BENCH_BINS += $(B)/tests/bench/bench_gate
$(B)/tests/bench/bench_gate.o: MOD_CFLAGS += -Ilib/gate
$(B)/tests/bench/bench_gate: $(B)/tests/bench/bench_gate.o $(B)/libfence_gate.a
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(SQLITE_LIBS) -lm
