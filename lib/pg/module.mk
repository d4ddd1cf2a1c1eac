# libfence_pg: storage-side fencing for PostgreSQL.  Links libpq only; it
# never links libfence.  The SQL lives in sql/postgres/fence.sql and is
# embedded at build time for fence_pg_install().
PG_SRC := $(sort $(wildcard lib/pg/*.c))
PG_OBJ := $(PG_SRC:%.c=$(B)/%.o) $(B)/lib/pg/sql_embed.o $(COMMON_OBJ)

LIBS_STATIC += $(LIBFENCE_PG)
LIBS_SHARED += $(B)/libfence_pg.so
PC_FILES    += $(B)/fence_pg.pc
HEADERS     += lib/pg/fence_pg.h

$(B)/lib/pg/%.o: MOD_CFLAGS += -Ilib/pg $(PQ_CFLAGS)
$(eval $(call embed_rule,$(B)/lib/pg/sql_embed.c,fence_pg__sql_,sql/postgres/fence.sql))

$(LIBFENCE_PG): $(PG_OBJ)
$(B)/libfence_pg.so: $(PG_OBJ)
	$(call link_so,$(PG_OBJ),$(PQ_LIBS))
$(B)/fence_pg.pc: lib/pg/fence_pg.pc.in
	$(make_pc)
