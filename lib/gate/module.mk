# libfence_gate: the fencing write gate for stores that are not SQL (files,
# blobs, in-process services).  Links SQLite and pthread; never libfence.
# Its SQL lives in sql/gate/*.sql, embedded at build time.
GATE_SRC := $(sort $(wildcard lib/gate/*.c))
GATE_SQL := $(sort $(wildcard sql/gate/*.sql))
GATE_OBJ := $(GATE_SRC:%.c=$(B)/%.o) $(B)/lib/gate/sql_embed.o $(COMMON_OBJ)

LIBS_STATIC += $(LIBFENCE_GATE)
LIBS_SHARED += $(B)/libfence_gate.so
PC_FILES    += $(B)/fence_gate.pc
HEADERS     += lib/gate/fence_gate.h

$(B)/lib/gate/%.o: MOD_CFLAGS += -Ilib/gate
# One C string per .sql file: fence_gate__sql_<basename> and its _len.
$(eval $(call embed_rule,$(B)/lib/gate/sql_embed.c,fence_gate__sql_,$(GATE_SQL)))

$(LIBFENCE_GATE): $(GATE_OBJ)
$(B)/libfence_gate.so: $(GATE_OBJ)
	$(call link_so,$(GATE_OBJ),$(SQLITE_LIBS))
$(B)/fence_gate.pc: lib/gate/fence_gate.pc.in
	$(make_pc)
