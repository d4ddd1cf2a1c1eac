# fence -- top-level Makefile.
#
#   make                     libraries (static + shared with SONAME), .pc files, CLI
#   make test                the whole test suite against real servers (installs deps if missing)
#   make check SANITIZER=address|undefined|thread   the same suite under a sanitizer
#   make valgrind            the core suites under valgrind memcheck
#   make bench               the benchmarks (never part of make test)
#   make demo                the paused-holder race, shown and defeated
#   make install / uninstall honour PREFIX, DESTDIR, LIBDIR, INCLUDEDIR, BINDIR, DATADIR
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
DESTDIR    ?=
CC         ?= cc

SANITIZER ?=
ifeq ($(SANITIZER),)
B := build
SAN_FLAGS :=
else
B := build/$(SANITIZER)
SAN_FLAGS := -fsanitize=$(SANITIZER) -fno-sanitize-recover=all -fno-omit-frame-pointer
endif

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wpointer-arith -Wformat=2 -Wvla -Wcast-qual -Wundef
OPT  ?= -O2
REAL_CFLAGS  := -std=c11 -D_GNU_SOURCE -g $(OPT) -fPIC -fvisibility=hidden -pthread $(WARN) $(SAN_FLAGS) -Ilib/common $(CFLAGS)
REAL_LDFLAGS := -pthread $(SAN_FLAGS) $(LDFLAGS)

# pkg-config answers are read lazily (=) so a fresh machine can run the
# install step first; fallbacks keep the build going without pkg-config.
HIREDIS_LIBS = $(or $(shell pkg-config --libs hiredis 2>/dev/null),-lhiredis)
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
FUZZ_BINS   :=
EXTENSIONS  :=   # loadable modules (the SQLite extension), installed in $(LIBDIR)/fence

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
#   What the test suites share.
TESTUTIL_OBJ  := $(B)/tests/common/testutil.o
LEASEUTIL_OBJ := $(B)/tests/lease/leaseutil.o

.PHONY: all test check valgrind bench demo examples install uninstall clean deps fuzz torture tests-build
all:

# Turn a .pc.in into a .pc with this build's paths.
define make_pc
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' $< > $@
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

# Every module; a missing one is an error, not a silent skip.
MODULES := lib/lease lib/pg lib/sqlite lib/gate cli examples \
           tests tests/lease tests/pg tests/sqlite tests/gate
include $(MODULES:%=%/module.mk)

all: $(LIBS_STATIC) $(LIBS_SHARED) $(PC_FILES) $(BINS) $(EXTENSIONS)
examples: $(EXAMPLE_BINS)
# The shell suites drive the CLI, the examples and the SQLite extension.
tests-build: $(TEST_BINS) $(BINS) $(EXAMPLE_BINS) $(EXTENSIONS)

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(REAL_CFLAGS) $(MOD_CFLAGS) -MMD -MP -c -o $@ $<

# Generated sources (the embedded Lua and SQL) live in the build tree.
$(B)/%.o: $(B)/%.c
	$(CC) $(REAL_CFLAGS) $(MOD_CFLAGS) -c -o $@ $<

# Generic rules for a library's .a, .so (with SONAME and symlinks) and .pc.
$(B)/lib%.a:
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

deps:
	scripts/install-deps

# make test: install what is missing, build, start throwaway servers, run every suite.
test:
	@scripts/install-deps --if-missing
	@$(MAKE) --no-print-directory all examples tests-build
	@scripts/run-tests $(B)

check:
	@if [ -z "$(SANITIZER)" ]; then echo "usage: make check SANITIZER=address|undefined|thread" >&2; exit 64; fi
	@scripts/install-deps --if-missing
	@$(MAKE) --no-print-directory SANITIZER=$(SANITIZER) OPT=-O1 all examples tests-build
	@FENCE_SANITIZER=$(SANITIZER) scripts/run-tests build/$(SANITIZER)

valgrind:
	@scripts/install-deps --if-missing
	@$(MAKE) --no-print-directory OPT=-O1 B=build/valgrind all examples tests-build
	@FENCE_VALGRIND=1 CK_FORK=no scripts/run-tests build/valgrind

bench:
	@scripts/install-deps --if-missing
	@$(MAKE) --no-print-directory all $(BENCH_BINS)
	@scripts/run-bench $(B)

# make fuzz: the libFuzzer targets (tests/fuzz), built with clang in
# build/fuzz (never mixed with the gcc objects), each run for FUZZ_SECONDS
# seconds on a copy of its seed corpus; a crashing input is kept in
# build/fuzz/crashes/.  Not part of make test (CI runs it before).
fuzz:
	@scripts/install-deps --if-missing
	@FUZZ_SECONDS=$(or $(FUZZ_SECONDS),10) scripts/run-fuzz

# make torture: a bounded fault run (scripts/torture): workers under
# `fence run` advance a counter on PostgreSQL and SQLite while holders are
# stopped and killed, Redis is restarted and failed over (Sentinel) and
# PostgreSQL restarted; any lost or doubled update is a violation (exit 1).
# TORTURE_SECONDS sets its length (150).  Not part of make test (which runs
# a 20-second one, tests/torture/test_torture.sh).
torture:
	@scripts/install-deps --if-missing
	@$(MAKE) --no-print-directory all
	@TORTURE_SECONDS=$(or $(TORTURE_SECONDS),150) scripts/torture $(B)

demo:
	@scripts/install-deps --if-missing
	@$(MAKE) --no-print-directory -s all examples
	@scripts/demo $(B)

install: all
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(BINDIR)
	install -m 644 $(HEADERS) $(DESTDIR)$(INCLUDEDIR)/
	install -m 644 $(LIBS_STATIC) $(DESTDIR)$(LIBDIR)/
	for so in $(LIBS_SHARED); do \
	  base=$$(basename $$so); \
	  install -m 755 $$so.$(VERSION) $(DESTDIR)$(LIBDIR)/ && \
	  ln -sf $$base.$(VERSION) $(DESTDIR)$(LIBDIR)/$$base.$(SOVERSION) && \
	  ln -sf $$base.$(VERSION) $(DESTDIR)$(LIBDIR)/$$base; \
	done
	install -m 644 $(PC_FILES) $(DESTDIR)$(PKGCONFIGDIR)/
	$(if $(BINS),install -m 755 $(BINS) $(DESTDIR)$(BINDIR)/)
	$(if $(EXTENSIONS),install -d $(DESTDIR)$(LIBDIR)/fence && install -m 755 $(EXTENSIONS) $(DESTDIR)$(LIBDIR)/fence/)
	install -d $(DESTDIR)$(DATADIR)/postgres $(DESTDIR)$(DATADIR)/sqlite
	install -m 644 sql/postgres/*.sql $(DESTDIR)$(DATADIR)/postgres/
	install -m 644 sql/sqlite/*.sql $(DESTDIR)$(DATADIR)/sqlite/
	install -d $(DESTDIR)$(DATADIR)/gate
	install -m 644 sql/gate/*.sql $(DESTDIR)$(DATADIR)/gate/

uninstall:
	for h in $(notdir $(HEADERS)); do rm -f $(DESTDIR)$(INCLUDEDIR)/$$h; done
	for l in $(notdir $(LIBS_STATIC) $(LIBS_SHARED)); do rm -f $(DESTDIR)$(LIBDIR)/$$l $(DESTDIR)$(LIBDIR)/$$l.*; done
	for p in $(notdir $(PC_FILES)); do rm -f $(DESTDIR)$(PKGCONFIGDIR)/$$p; done
	for b in $(notdir $(BINS)); do rm -f $(DESTDIR)$(BINDIR)/$$b; done
	for e in $(notdir $(EXTENSIONS)); do rm -f $(DESTDIR)$(LIBDIR)/fence/$$e; done
	rm -rf $(DESTDIR)$(DATADIR)

clean:
	rm -rf build

-include $(shell find $(B) -name "*.d" 2>/dev/null)
