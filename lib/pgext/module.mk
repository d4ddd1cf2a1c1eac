# lib/pgext: the PostgreSQL extension "fence" (C row guards for
# fence.sql's per-row fencing; docs/postgres-extension.md).  Built with
# PGXS (pg_config --pgxs, Debian: postgresql-server-dev-15) by
# lib/pgext/Makefile, out of tree in $(B)/lib/pgext (a VPATH build: the
# source folder gets no build output).  Never built with the sanitizer
# flags: it is loaded by the PostgreSQL server, which is not.
# make install-pgext / uninstall-pgext put it where pg_config says
# (pkglibdir and sharedir/extension), under DESTDIR; make install and
# uninstall do too when they may write there (the top Makefile), and
# otherwise say so in one line.  The test servers of scripts/
# with-servers offer it when FENCE_PGEXT_DIR names $(B)/lib/pgext
# (scripts/run-tests, make bench).
PG_CONFIG    ?= pg_config
PGEXT_DIR    := $(B)/lib/pgext
PGEXT_SO     := $(PGEXT_DIR)/fence.so
PG_EXTENSIONS := $(PGEXT_SO)
PGEXT_MAKE    = $(MAKE) --no-print-directory -C $(PGEXT_DIR) -f $(CURDIR)/lib/pgext/Makefile \
                VPATH=$(CURDIR)/lib/pgext PG_CONFIG='$(PG_CONFIG)'

# PGXS tracks no header dependencies and no change to OBJS (a removed
# source file would stay linked in), so whenever a source, header or the
# Makefile changed, the objects and the module are built again from
# scratch (five small files: three of its own, two of lib/common).
$(PGEXT_SO): $(wildcard lib/pgext/*.c lib/pgext/*.h) lib/common/token.c lib/common/rule.c \
             lib/common/common.h lib/common/fence_common.h lib/pgext/Makefile
	@mkdir -p $(PGEXT_DIR)
	rm -f $(PGEXT_DIR)/*.o $@
	+$(PGEXT_MAKE)
# Its folders, asked of pg_config only when an install needs them.
PGEXT_LIBDIR  = $(shell $(PG_CONFIG) --pkglibdir)
PGEXT_EXTDIR  = $(shell $(PG_CONFIG) --sharedir)/extension
