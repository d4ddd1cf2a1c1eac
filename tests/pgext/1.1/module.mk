# lib/pgext: the PostgreSQL extension "fence" (C row guards for
# fence.sql's per-row fencing; docs/postgres-extension.md).  Built with
# PGXS (pg_config --pgxs, Debian: postgresql-server-dev-15) by
# lib/pgext/Makefile, out of tree in $(B)/lib/pgext (a VPATH build: the
# source folder gets no build output).  Never built with the sanitizer
# flags: it is loaded by the PostgreSQL server, which is not.
# make install / uninstall put it where pg_config says (pkglibdir and
# sharedir/extension), under DESTDIR.  The test servers of scripts/
# with-servers offer it when FENCE_PGEXT_DIR names $(B)/lib/pgext
# (scripts/run-tests, make bench).
PG_CONFIG    ?= pg_config
PGEXT_DIR    := $(B)/lib/pgext
PGEXT_SO     := $(PGEXT_DIR)/fence.so
PG_EXTENSIONS := $(PGEXT_SO)
PGEXT_MAKE    = $(MAKE) --no-print-directory -C $(PGEXT_DIR) -f $(CURDIR)/lib/pgext/Makefile \
                VPATH=$(CURDIR)/lib/pgext PG_CONFIG='$(PG_CONFIG)'

$(PGEXT_SO): $(wildcard lib/pgext/*.c lib/pgext/*.h) lib/pgext/Makefile
	@mkdir -p $(PGEXT_DIR)
	+$(PGEXT_MAKE)
