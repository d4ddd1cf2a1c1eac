# libfence_pg: storage-side fencing for PostgreSQL.  Links libpq only; it
# never links libfence.  The SQL lives in sql/postgres/NN-*.sql, one file
# per concern, joined in name order into the one script $(FENCE_SQL)
# (built by make, never edited: psql -f it, make install installs it) and
# embedded from there for fence_pg_install().
PG_SRC := $(sort $(wildcard lib/pg/*.c))
FENCE_SQL_PARTS := $(sort $(wildcard sql/postgres/[0-9]*.sql))
FENCE_SQL       := $(B)/sql/postgres/fence.sql
all: $(FENCE_SQL)
$(FENCE_SQL): $(FENCE_SQL_PARTS) lib/pg/module.mk
	@mkdir -p $(dir $@)
	{ printf '%s\n' '-- fence.sql -- storage-side fencing for PostgreSQL: schema "fence".' \
	    '-- Built by make from sql/postgres/[0-9]*.sql (joined in name order): edit those.' \
	    '-- Install: psql -v ON_ERROR_STOP=1 -q -f fence.sql (docs/postgres.md).'; \
	  for f in $(FENCE_SQL_PARTS); do printf '\n'; cat "$$f"; done; } > $@.tmp && mv $@.tmp $@
$(eval $(call embed_rule,$(B)/lib/pg/sql_embed.c,fence_pg__sql_,$(FENCE_SQL)))
$(eval $(call library,fence_pg,lib/pg,$(PG_SRC),$(B)/lib/pg/sql_embed.c,PQ_LIBS))
$(B)/lib/pg/%.o: MOD_CFLAGS += $(PQ_CFLAGS)
