# libfence_gate: the fencing write gate for stores that are not SQL (files,
# blobs, in-process services).  Links SQLite and pthread; never libfence.
# Its SQL lives in sql/gate/*.sql, embedded at build time: one C string per
# .sql file, fence_gate__sql_<basename> and its _len.
GATE_SRC := $(sort $(wildcard lib/gate/*.c))
GATE_SQL := $(sort $(wildcard sql/gate/*.sql))
$(eval $(call embed_rule,$(B)/lib/gate/sql_embed.c,fence_gate__sql_,$(GATE_SQL)))
$(eval $(call library,fence_gate,lib/gate,$(GATE_SRC),$(B)/lib/gate/sql_embed.c,SQLITE_LIBS))
