# fence -- top-level Makefile.
#
#   make                     libraries (static + shared with SONAME), .pc files, CLI, extensions
#   make test                the whole test suite against real servers (installs deps if missing)
#   make check SANITIZER=address|undefined|thread   the same suite under a sanitizer
#   make valgrind            the Check suites under valgrind memcheck (shell suites as usual)
#   make bench               the benchmarks (never part of make test); writes docs/benchmarks.md
#   make demo                the paused-holder race, shown and defeated
#   make install / uninstall honour PREFIX, DESTDIR, LIBDIR, INCLUDEDIR, BINDIR, DATADIR,
#                            PKGCONFIGDIR, MANDIR, BASHCOMPDIR, PYTHON, PYTHONDIR (given at install time:
#                            the .pc files are written then, from lib/*/*.pc.in); they
#                            do the PostgreSQL extension's too when its folders are
#                            writable, and else say so in one line and leave it
#   make install-pgext / uninstall-pgext   the PostgreSQL extension alone, where
#                            PG_CONFIG (pg_config) says, under DESTDIR (as root for the
#                            system's PostgreSQL)
#   make help                every target, one line each
#
# Your CFLAGS/LDFLAGS add to the project's flags; they never replace them.

VERSION    := 0.2.0
SOVERSION  := 0
PREFIX     ?= /usr/local
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR     ?= $(PREFIX)/bin
DATADIR    ?= $(PREFIX)/share/fence
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
MANDIR     ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
# The Python package fence (python/fence) goes where PYTHON searches under
# PREFIX (python/sitedir.py; asked only by install and uninstall, once).
PYTHON     ?= $(firstword $(wildcard /usr/bin/python3) python3)
PYTHONDIR  ?= $(eval PYTHONDIR := $$(shell $$(PYTHON) python/sitedir.py '$$(PREFIX)'))$(PYTHONDIR)
DESTDIR    ?=
CC         ?= cc

SANITIZER ?=
# SANITIZER=fuzz is make fuzz's build (scripts/run-fuzz, with CC=clang):
# libFuzzer's coverage on every object, with ASan and UBSan, in build/fuzz;
# tests/fuzz/module.mk links the targets.
comma := ,
SAN_CHECKS := $(if $(filter fuzz,$(SANITIZER)),fuzzer-no-link$(comma)address$(comma)undefined,$(SANITIZER))
ifeq ($(SANITIZER),)
B := build
SAN_FLAGS :=
else
B := build/$(SANITIZER)
SAN_FLAGS := -fsanitize=$(SAN_CHECKS) -fno-sanitize-recover=all -fno-omit-frame-pointer
endif

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wpointer-arith -Wformat=2 -Wvla -Wcast-qual -Wundef
OPT  ?= -O2
REAL_CFLAGS  := -std=c11 -D_GNU_SOURCE -g $(OPT) -fPIC -fvisibility=hidden -pthread $(WARN) $(SAN_FLAGS) -Ilib/common $(CFLAGS)
REAL_LDFLAGS := -pthread $(SAN_FLAGS) $(LDFLAGS)

# pkg-config answers are read lazily (=) so a fresh machine can run the
# install step first; fallbacks keep the build going without pkg-config.
HIREDIS_LIBS = $(or $(shell pkg-config --libs hiredis 2>/dev/null),-lhiredis)
SSL_LIBS     = $(or $(shell pkg-config --libs openssl 2>/dev/null),-lssl -lcrypto)
CURL_LIBS    = $(or $(shell pkg-config --libs libcurl 2>/dev/null),-lcurl)
JANSSON_LIBS = $(or $(shell pkg-config --libs jansson 2>/dev/null),-ljansson)
PQ_CFLAGS    = $(or $(shell pkg-config --cflags libpq 2>/dev/null),-I/usr/include/postgresql)
PQ_LIBS      = $(or $(shell pkg-config --libs libpq 2>/dev/null),-lpq)
SQLITE_LIBS  = $(or $(shell pkg-config --libs sqlite3 2>/dev/null),-lsqlite3)
CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   = $(or $(shell pkg-config --libs check 2>/dev/null),-lcheck -lsubunit -lrt -lm)

# Filled in by the fragments below.
LIBS_STATIC :=
LIBS_SHARED :=
PC_FILES    :=
HEADERS     :=
BINS        :=
TEST_BINS   :=
BENCH_BINS  :=
EXAMPLE_BINS :=
FUZZ_BINS   :=   # the libFuzzer targets, built only with SANITIZER=fuzz (make fuzz)
EXTENSIONS  :=   # loadable modules (the SQLite extension), installed in $(LIBDIR)/fence
PG_EXTENSIONS :=  # the PostgreSQL extension (lib/pgext), installed where pg_config says

# Names more than one fragment uses are set here, before any fragment is
# read, so that the fragments can be read in any order.
#   lib/common: compiled into every library (hidden), never a library of its own.
COMMON_SRC := $(sort $(wildcard lib/common/*.c))
COMMON_OBJ := $(COMMON_SRC:%.c=$(B)/%.o)
HEADERS    += lib/common/fence_common.h
#   The libraries, by path (each fragment says how to build its own).
LIBFENCE        := $(B)/libfence.a
LIBFENCE_PG     := $(B)/libfence_pg.a
LIBFENCE_SQLITE := $(B)/libfence_sqlite.a
LIBFENCE_GATE   := $(B)/libfence_gate.a
#   What libfence links (hiredis for RESP, OpenSSL for TLS, libpq for the
#   PostgreSQL issuer, libcurl and jansson for etcd's JSON gateway), and so
#   what every program linking libfence links too.
LEASE_LIBS = $(HIREDIS_LIBS) $(SSL_LIBS) $(PQ_LIBS) $(CURL_LIBS) $(JANSSON_LIBS)
#   What the test suites share.
TESTUTIL_OBJ  := $(B)/tests/common/testutil.o
#   The one table of cases of the store rule (tests/common/rule_cases.tsv),
#   read for every store's suite.
RULECASES_OBJ := $(B)/tests/common/rulecases.o
LEASEUTIL_OBJ := $(B)/tests/lease/leaseutil.o

.PHONY: all test test-pg-versions check valgrind bench demo examples install uninstall install-pgext uninstall-pgext clean deps fuzz torture tests-build help
all:

# Turn a .pc.in into a .pc.  The sed program is the one `make install`
# uses with the install-time variables: the installed .pc files are always
# written at install time (a build made with one PREFIX installs correctly
# with another); $(B)/*.pc are only this build's copies, never installed.
# libdir and includedir are written relative to ${prefix} when they lie
# under it.
PC_LIBDIR     = $(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))
PC_INCLUDEDIR = $(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))
PC_DATADIR    = $(patsubst $(PREFIX)/%,$${prefix}/%,$(DATADIR))
PC_SED = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(PC_LIBDIR)|g' \
             -e 's|@INCLUDEDIR@|$(PC_INCLUDEDIR)|g' -e 's|@DATADIR@|$(PC_DATADIR)|g' \
             -e 's|@VERSION@|$(VERSION)|g'
define make_pc
	@mkdir -p $(dir $@)
	$(PC_SED) $< > $@
endef

# Embed Lua or SQL files as C strings (scripts/embed), written once:
#   $(eval $(call embed_rule,OUTPUT.c,SYMBOL_PREFIX,FILES))
# The output depends on the fragment that calls it, so that a changed file
# list regenerates it.
define embed_rule
$(1): scripts/embed $(3) $(lastword $(MAKEFILE_LIST))
	@mkdir -p $$(dir $$@)
	scripts/embed $(2) $(3) > $$@.tmp && mv $$@.tmp $$@
endef

# Link a shared library: $(call link_so,objects,libs)
define link_so
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,$(notdir $@).$(SOVERSION) -o $@.$(VERSION) $(1) $(REAL_LDFLAGS) $(2)
	ln -sf $(notdir $@).$(VERSION) $@.$(SOVERSION)
	ln -sf $(notdir $@).$(VERSION) $@
endef

# One library, said once (each lib/*/module.mk calls it with what is its own):
#   $(eval $(call library,NAME,DIR,SOURCES,GENERATED,LIBS_VAR))
# NAME is the library's name without "lib" (fence_pg), DIR its folder
# (lib/pg), SOURCES its C files, GENERATED the C file(s) embed_rule writes
# for its SQL or Lua (in the build tree; may be empty), LIBS_VAR the name
# of the variable holding what it links (a name, so that pkg-config is
# asked when linking, not when the fragment is read).  It makes
#   $(B)/libNAME.a, $(B)/libNAME.so (SONAME libNAME.so.$(SOVERSION), link_so),
#   $(B)/NAME.pc from DIR/NAME.pc.in, and installs DIR/NAME.h;
# lib/common is compiled into it, its objects (NAME_OBJ) see -IDIR.
define library
$(1)_OBJ := $$(patsubst %.c,$$(B)/%.o,$(3)) $$(patsubst %.c,%.o,$(4)) $$(COMMON_OBJ)
LIBS_STATIC += $$(B)/lib$(1).a
LIBS_SHARED += $$(B)/lib$(1).so
PC_FILES    += $$(B)/$(1).pc
HEADERS     += $(2)/$(1).h
$$(B)/$(2)/%.o: MOD_CFLAGS += -I$(2)
$$(B)/lib$(1).a: $$($(1)_OBJ)
	@mkdir -p $$(dir $$@)
	rm -f $$@ && ar rcs $$@ $$^
$$(B)/lib$(1).so: $$($(1)_OBJ)
	$$(call link_so,$$($(1)_OBJ),$$($(5)))
$$(B)/$(1).pc: $(2)/$(1).pc.in
	$$(make_pc)
endef

# Every module; a missing one is an error, not a silent skip.
MODULES := lib/lease lib/pg lib/pgext lib/sqlite lib/gate cli examples \
           tests tests/lease tests/pg tests/sqlite tests/gate tests/net tests/bench tests/fuzz tests/async \
           tests/etcd
include $(MODULES:%=%/module.mk)

all: $(LIBS_STATIC) $(LIBS_SHARED) $(PC_FILES) $(BINS) $(EXTENSIONS) $(PG_EXTENSIONS)
examples: $(EXAMPLE_BINS)
# The shell suites drive the CLI, the examples and the SQLite extension;
# the PostgreSQL suites run once per implementation, one of them the
# PostgreSQL extension's.
tests-build: $(TEST_BINS) $(BINS) $(EXAMPLE_BINS) $(EXTENSIONS) $(PG_EXTENSIONS)

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(REAL_CFLAGS) $(MOD_CFLAGS) -MMD -MP -c -o $@ $<

# Generated sources (the embedded Lua and SQL) live in the build tree.
$(B)/%.o: $(B)/%.c
	$(CC) $(REAL_CFLAGS) $(MOD_CFLAGS) -c -o $@ $<

deps:
	scripts/install-deps

# make test: install what is missing, build, start throwaway servers, run every suite.
test:
	@scripts/install-deps --if-missing
	@$(MAKE) --no-print-directory all examples tests-build
	@scripts/run-tests $(B)

# make test-pg-versions: the portable PostgreSQL suites (libfence_pg API,
# race, pooler, restore, the upgrade from fence.sql 4) against PostgreSQL
# 13 to 18 (PG_VERSIONS), the npm registry's server builds, fetched once
# and cached under $(B)/pg-versions (scripts/pg-versions).  Not part of make
# test; .ci/run runs it.
PG_VERSIONS ?= 13 14 15 16 17 18
test-pg-versions:
	@scripts/install-deps --if-missing
	@$(MAKE) --no-print-directory all tests-build
	@FENCE_BUILD=$(B) scripts/pg-versions test $(PG_VERSIONS)

check:
	@if [ -z "$(SANITIZER)" ]; then echo "usage: make check SANITIZER=address|undefined|thread" >&2; exit 64; fi
	@scripts/install-deps --if-missing
	@$(MAKE) --no-print-directory SANITIZER=$(SANITIZER) OPT=-O1 all examples tests-build
	@FENCE_SANITIZER=$(SANITIZER) scripts/run-tests $(B)

valgrind:
	@scripts/install-deps --if-missing
	@$(MAKE) --no-print-directory OPT=-O1 B=build/valgrind all examples tests-build
	@FENCE_VALGRIND=1 CK_FORK=no scripts/run-tests build/valgrind

bench:
	@scripts/install-deps --if-missing
	@$(MAKE) --no-print-directory all $(BENCH_BINS)
	@start=$$(date +%s); FENCE_PGEXT_DIR=$(B)/lib/pgext scripts/run-bench $(B); rc=$$?; \
	  scripts/bench-report $(B) $$rc $$start && exit $$rc

# make fuzz: the libFuzzer targets (tests/fuzz), built with clang in
# build/fuzz (never mixed with the gcc objects), each run for FUZZ_SECONDS
# seconds on a copy of its seed corpus; a crashing input is kept in
# build/fuzz/crashes/.  Not part of make test (CI runs it before).
fuzz:
	@scripts/install-deps --if-missing
	@FUZZ_SECONDS=$(or $(FUZZ_SECONDS),10) scripts/run-fuzz

# make torture: a bounded fault run (scripts/torture): workers under
# `fence run` advance a counter on PostgreSQL and SQLite while holders are
# stopped and killed, Redis is restarted and failed over (Sentinel; also to
# a replica whose clock is skewed, by the tests' clock shim) and
# PostgreSQL restarted; any lost or doubled update is a violation (exit 1).
# TORTURE_SECONDS sets its length (150).  Not part of make test (which runs
# a 20-second one, tests/torture/test_torture.sh).
torture:
	@scripts/install-deps --if-missing
	@$(MAKE) --no-print-directory all $(CLOCKSHIM_SO) $(CLOCKSHIM_CTL)
	@TORTURE_SECONDS=$(or $(TORTURE_SECONDS),150) scripts/torture $(B)

demo:
	@scripts/install-deps --if-missing
	@$(MAKE) --no-print-directory -s all examples
	@scripts/demo $(B)

# The PostgreSQL extension goes where pg_config says (PGXS's install and
# uninstall, lib/pgext/Makefile), under DESTDIR: a system folder, which a
# non-root `make install PREFIX=$HOME/opt` may not write.  install and
# uninstall do its part only when each folder, or the nearest one of its
# parents that exists, is writable; else they print one line naming the
# target to run as root.
PGEXT_INSTALL   = $(PGEXT_MAKE) install DESTDIR='$(DESTDIR)'
PGEXT_UNINSTALL = mkdir -p $(PGEXT_DIR) && $(PGEXT_MAKE) uninstall DESTDIR='$(DESTDIR)'
PGEXT_UNWRITABLE = for d in '$(DESTDIR)$(PGEXT_LIBDIR)' '$(DESTDIR)$(PGEXT_EXTDIR)'; do \
	  e=$$d; while [ ! -e "$$e" ]; do e=$$(dirname "$$e"); done; \
	  [ -d "$$e" ] && [ -w "$$e" ] || { echo "$$d"; break; }; done
# $(call pgext_if_writable,RECIPE,TARGET)
pgext_if_writable = bad=$$($(PGEXT_UNWRITABLE)); \
	if [ -z "$$bad" ]; then $(1); \
	else echo "make $@: left out the PostgreSQL extension ($$bad is not writable); run 'make $(2)' as root for it" >&2; fi

install-pgext: $(PG_EXTENSIONS)
	$(if $(PG_EXTENSIONS),$(PGEXT_INSTALL))

uninstall-pgext:
	$(if $(PG_EXTENSIONS),$(PGEXT_UNINSTALL))

# What make install puts where, and exactly what make uninstall removes.
# The source lists are the same for both, so uninstall removes the files
# install wrote and nothing else (no globs, no rm -r); of the folders only
# fence's own ($(LIBDIR)/fence, the sql and redis folders under $(DATADIR), and
# $(DATADIR) itself when it is named "fence"), each only when empty.
PC_IN      := $(foreach p,$(notdir $(PC_FILES)),$(firstword $(wildcard lib/*/$(p).in)))
MAN1       := $(sort $(wildcard man/*.1))
MAN3       := $(sort $(wildcard man/*.3))
COMPLETION := completion/fence.bash
SQL_PARTS  := sqlite gate    # postgres: the one built script, $(FENCE_SQL)
# The Python package: python/fence/*.py, plus fence/_installed.py (the
# LIBDIR its libraries are in), byte-compiled by install so that an import
# as root writes nothing that uninstall would not know of.  Left out, with
# one line, when PYTHON cannot say where (no python3).
PY_SRC     := $(sort $(wildcard python/fence/*.py))
PY_FILES    = $(notdir $(PY_SRC)) _installed.py
PY_PKGDIR   = $(DESTDIR)$(PYTHONDIR)/fence
PY_CACHED   = $(PYTHON) -c 'import importlib.util as u, sys; print("\n".join(u.cache_from_source(f) for f in sys.argv[1:]))'
# The Redis contract (docs/contract.md): each script exactly as the Redis
# issuer sends it (rscripts.c: issue.lua, a newline, then acquire.lua or
# reissue.lua; the others as they are), in $(B)/redis and installed in
# $(DATADIR)/redis, for clients in other languages.
REDIS_SCRIPTS := acquire reissue renew renew_batch release token_raise inspect
REDIS_SHARE   := $(REDIS_SCRIPTS:%=$(B)/redis/%.lua)
all: $(REDIS_SHARE)
install: $(REDIS_SHARE)
$(B)/redis/acquire.lua $(B)/redis/reissue.lua: $(B)/redis/%.lua: lib/lease/redis/issue.lua lib/lease/redis/%.lua
	@mkdir -p $(dir $@)
	{ cat lib/lease/redis/issue.lua && printf '\n' && cat lib/lease/redis/$*.lua; } > $@.tmp && mv $@.tmp $@
$(B)/redis/%.lua: lib/lease/redis/%.lua
	@mkdir -p $(dir $@)
	cp $< $@.tmp && mv $@.tmp $@
# A root install (no DESTDIR: the system itself) refreshes the dynamic
# linker's cache, so that programs (and ctypes.util.find_library) find
# the new sonames; it says so when LIBDIR is not among the folders the
# linker searches.
LDCONFIG_IF_ROOT = if [ -z '$(DESTDIR)' ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then

install: all
	install -d '$(DESTDIR)$(LIBDIR)' '$(DESTDIR)$(INCLUDEDIR)' '$(DESTDIR)$(PKGCONFIGDIR)' '$(DESTDIR)$(BINDIR)'
	install -m 644 $(HEADERS) '$(DESTDIR)$(INCLUDEDIR)/'
	install -m 644 $(LIBS_STATIC) '$(DESTDIR)$(LIBDIR)/'
	for so in $(LIBS_SHARED); do \
	  base=$$(basename $$so); \
	  install -m 755 $$so.$(VERSION) '$(DESTDIR)$(LIBDIR)/' && \
	  ln -sf $$base.$(VERSION) '$(DESTDIR)$(LIBDIR)/'$$base.$(SOVERSION) && \
	  ln -sf $$base.$(VERSION) '$(DESTDIR)$(LIBDIR)/'$$base || exit 1; \
	done
	for src in $(PC_IN); do \
	  pc=$$(basename $$src .in); \
	  $(PC_SED) $$src > '$(DESTDIR)$(PKGCONFIGDIR)/'$$pc.tmp && \
	  chmod 644 '$(DESTDIR)$(PKGCONFIGDIR)/'$$pc.tmp && \
	  mv -f '$(DESTDIR)$(PKGCONFIGDIR)/'$$pc.tmp '$(DESTDIR)$(PKGCONFIGDIR)/'$$pc || exit 1; \
	done
	$(if $(BINS),install -m 755 $(BINS) '$(DESTDIR)$(BINDIR)/')
	$(if $(EXTENSIONS),install -d '$(DESTDIR)$(LIBDIR)/fence' && install -m 755 $(EXTENSIONS) '$(DESTDIR)$(LIBDIR)/fence/')
	@$(if $(PG_EXTENSIONS),$(call pgext_if_writable,$(PGEXT_INSTALL),install-pgext))
	for d in $(SQL_PARTS); do \
	  install -d '$(DESTDIR)$(DATADIR)/'$$d && install -m 644 sql/$$d/*.sql '$(DESTDIR)$(DATADIR)/'$$d/ || exit 1; \
	done
	install -d '$(DESTDIR)$(DATADIR)/postgres' && install -m 644 $(FENCE_SQL) '$(DESTDIR)$(DATADIR)/postgres/fence.sql'
	install -d '$(DESTDIR)$(DATADIR)/redis' && install -m 644 $(REDIS_SHARE) '$(DESTDIR)$(DATADIR)/redis/'
	$(if $(MAN1),install -d '$(DESTDIR)$(MANDIR)/man1' && install -m 644 $(MAN1) '$(DESTDIR)$(MANDIR)/man1/')
	$(if $(MAN3),install -d '$(DESTDIR)$(MANDIR)/man3' && install -m 644 $(MAN3) '$(DESTDIR)$(MANDIR)/man3/')
	install -d '$(DESTDIR)$(BASHCOMPDIR)'
	install -m 644 $(COMPLETION) '$(DESTDIR)$(BASHCOMPDIR)/fence'
	@if [ -z '$(PYTHONDIR)' ]; then echo "make $@: left out the Python package ($(PYTHON) cannot say where: set PYTHONDIR)" >&2; else \
	  install -d '$(PY_PKGDIR)' && install -m 644 $(PY_SRC) '$(PY_PKGDIR)/' && \
	  printf '# Written by make install: where it put the libraries (python/fence/_lib.py).\nLIBDIR = %s\n' \
	    "$$($(PYTHON) -c 'import sys; print(repr(sys.argv[1]))' '$(LIBDIR)')" > '$(PY_PKGDIR)/_installed.py' && \
	  $(PYTHON) -m compileall -q -d '$(PYTHONDIR)/fence' '$(PY_PKGDIR)' >/dev/null || exit 1; fi
	@$(LDCONFIG_IF_ROOT) ldconfig && \
	  { ldconfig -p | grep -qF ' => $(LIBDIR)/libfence.so.$(SOVERSION)' || \
	    echo "make $@: $(LIBDIR) is not in the dynamic linker's search path (/etc/ld.so.conf): the Python package finds libfence there, other programs need -Wl,-rpath,$(LIBDIR) or LD_LIBRARY_PATH"; }; fi

uninstall:
	for f in $(notdir $(HEADERS)); do rm -f '$(DESTDIR)$(INCLUDEDIR)/'$$f; done
	for f in $(notdir $(LIBS_STATIC)); do rm -f '$(DESTDIR)$(LIBDIR)/'$$f; done
	for f in $(notdir $(LIBS_SHARED)); do \
	  rm -f '$(DESTDIR)$(LIBDIR)/'$$f '$(DESTDIR)$(LIBDIR)/'$$f.$(SOVERSION) '$(DESTDIR)$(LIBDIR)/'$$f.$(VERSION); \
	done
	for f in $(notdir $(PC_FILES)); do rm -f '$(DESTDIR)$(PKGCONFIGDIR)/'$$f; done
	for f in $(notdir $(BINS)); do rm -f '$(DESTDIR)$(BINDIR)/'$$f; done
	for f in $(notdir $(EXTENSIONS)); do rm -f '$(DESTDIR)$(LIBDIR)/fence/'$$f; done
	$(if $(EXTENSIONS),rmdir '$(DESTDIR)$(LIBDIR)/fence' 2>/dev/null || true)
	@$(if $(PG_EXTENSIONS),$(call pgext_if_writable,$(PGEXT_UNINSTALL),uninstall-pgext))
	for d in $(SQL_PARTS); do \
	  for f in sql/$$d/*.sql; do rm -f '$(DESTDIR)$(DATADIR)/'$$d/$${f##*/}; done; \
	  rmdir '$(DESTDIR)$(DATADIR)/'$$d 2>/dev/null || true; \
	done
	rm -f '$(DESTDIR)$(DATADIR)/postgres/fence.sql'
	rmdir '$(DESTDIR)$(DATADIR)/postgres' 2>/dev/null || true
	for f in $(REDIS_SCRIPTS); do rm -f '$(DESTDIR)$(DATADIR)/redis/'$$f.lua; done
	rmdir '$(DESTDIR)$(DATADIR)/redis' 2>/dev/null || true
	$(if $(filter fence,$(notdir $(DATADIR))),rmdir '$(DESTDIR)$(DATADIR)' 2>/dev/null || true)
	for f in $(notdir $(MAN1)); do rm -f '$(DESTDIR)$(MANDIR)/man1/'$$f; done
	for f in $(notdir $(MAN3)); do rm -f '$(DESTDIR)$(MANDIR)/man3/'$$f; done
	rm -f '$(DESTDIR)$(BASHCOMPDIR)/fence'
	@if [ -n '$(PYTHONDIR)' ]; then \
	  for f in $(PY_FILES); do rm -f '$(PY_PKGDIR)/'$$f; done; \
	  $(PY_CACHED) $(addprefix '$(PY_PKGDIR)/,$(addsuffix ',$(PY_FILES))) | while IFS= read -r c; do rm -f "$$c"; done; \
	  rmdir '$(PY_PKGDIR)/__pycache__' '$(PY_PKGDIR)' 2>/dev/null || true; fi
	@$(LDCONFIG_IF_ROOT) ldconfig; fi

# make help: one line per target.
help:
	@echo 'make [all]        the four libraries (static, shared with SONAME), their .pc files, the fence CLI,'
	@echo '                  the SQLite extension, the PostgreSQL extension (lib/pgext, PGXS)'
	@echo 'make examples     the example programs (examples/)'
	@echo 'make test         every test suite against throwaway Redis and PostgreSQL (installs deps if missing)'
	@echo 'make test-pg-versions  the portable PostgreSQL suites against PostgreSQL 13 to 18 (npm builds, cached in build/pg-versions)'
	@echo 'make check SANITIZER=address|undefined|thread   the same suites under a sanitizer'
	@echo 'make valgrind     the Check suites under valgrind memcheck (shell suites as usual)'
	@echo 'make bench        the benchmarks (never part of make test); writes docs/benchmarks.md'
	@echo 'make demo         the paused-holder race, shown and defeated'
	@echo 'make fuzz         the libFuzzer targets, FUZZ_SECONDS each (clang, build/fuzz)'
	@echo 'make torture      a bounded fault run, TORTURE_SECONDS long (150)'
	@echo 'make tests-build  the test binaries, the CLI, the examples, the SQLite and PostgreSQL extensions, without running'
	@echo 'make deps         install the Debian packages needed to build and test (scripts/install-deps)'
	@echo 'make install      libraries, headers, .pc, fence, SQLite extension, SQL, Redis scripts, man pages, bash completion,'
	@echo '                  the Python package (PREFIX=$(PREFIX) DESTDIR LIBDIR INCLUDEDIR BINDIR DATADIR PKGCONFIGDIR'
	@echo '                  MANDIR BASHCOMPDIR PYTHON PYTHONDIR); as root without DESTDIR it runs ldconfig;'
	@echo '                  and the PostgreSQL extension when its folders (below) are writable; else one line'
	@echo '                  says it was left out (PG_EXTENSIONS= leaves it out of the build and the install)'
	@echo 'make uninstall    remove exactly what make install put there (same variables)'
	@echo 'make install-pgext    the PostgreSQL extension alone, where pg_config says (PG_CONFIG, DESTDIR):'
	@echo '                  fence.so in its pkglibdir, fence.control and fence--*.sql in sharedir/extension'
	@echo '                  (as root for the system PostgreSQL: sudo make install-pgext)'
	@echo 'make uninstall-pgext  remove exactly those files'
	@echo 'make clean        remove build/'
	@echo 'make help         this list'
	@echo 'Variables: B=DIR (build folder), SANITIZER, OPT, CC, CFLAGS, LDFLAGS (added to the project flags),'
	@echo '           PG_CONFIG (the PostgreSQL the extension is built for and installed into).'

clean:
	rm -rf build

-include $(shell find $(B) -name "*.d" 2>/dev/null)
