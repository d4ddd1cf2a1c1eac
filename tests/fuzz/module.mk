# tests/fuzz/module.mk -- the libFuzzer targets, built with clang in
# build/fuzz so that they never mix with the gcc objects.  Not one of the
# top-level MODULES: only `make fuzz` (scripts/run-fuzz) reads it, as
#     make -f tests/fuzz/module.mk build/fuzz/fuzz_url
#
# The library code is compiled by the project's own rules (the top-level
# Makefile, with B=build/fuzz/obj and CC=clang), so the source lists and
# the embedded SQL stay in one place; it gets coverage instrumentation
# (fuzzer-no-link) and ASan+UBSan.  Each target, tests/fuzz/fuzz_NAME.c,
# is compiled and linked with -fsanitize=fuzzer (libFuzzer's main).

FUZZ_CC   ?= clang
FUZZ_B    := build/fuzz
FUZZ_OBJ  := $(FUZZ_B)/obj
FUZZ_SAN  := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_LIBCFLAGS := -fsanitize=fuzzer-no-link $(FUZZ_SAN)

FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,%,$(sort $(wildcard tests/fuzz/fuzz_*.c)))

PQ_CFLAGS   = $(or $(shell pkg-config --cflags libpq 2>/dev/null),-I/usr/include/postgresql)
PQ_LIBS     = $(or $(shell pkg-config --libs libpq 2>/dev/null),-lpq)
SQLITE_LIBS = $(or $(shell pkg-config --libs sqlite3 2>/dev/null),-lsqlite3)

# What each target links besides its own object: single objects where
# that is all it needs, a library's archive where the parser lives in it.
COMMON_OBJ := $(patsubst %.c,$(FUZZ_OBJ)/%.o,$(sort $(wildcard lib/common/*.c)))
fuzz_url_NEEDS         := $(FUZZ_OBJ)/lib/lease/redis/url.o $(COMMON_OBJ)
fuzz_duration_NEEDS    := $(FUZZ_OBJ)/cli/args.o $(COMMON_OBJ)
fuzz_token_NEEDS       := $(COMMON_OBJ)
fuzz_pg_detail_NEEDS   := $(FUZZ_OBJ)/libfence_pg.a
fuzz_pg_detail_LIBS     = $(PQ_LIBS)
fuzz_sqlite_msg_NEEDS  := $(FUZZ_OBJ)/libfence_sqlite.a
fuzz_sqlite_msg_LIBS    = $(SQLITE_LIBS)

# The project's warnings (top-level WARN), on the targets too.
FUZZ_WARN   := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
               -Wpointer-arith -Wformat=2 -Wvla -Wcast-qual -Wundef
FUZZ_CFLAGS = -std=c11 -D_GNU_SOURCE -g -O1 $(FUZZ_WARN) $(FUZZ_SAN) -fsanitize=fuzzer \
              -Ilib/common -Ilib/lease -Ilib/pg -Ilib/sqlite -Icli $(PQ_CFLAGS)

.PHONY: all FORCE
all: $(FUZZ_TARGETS:%=$(FUZZ_B)/%)
# Every object is kept (none is a throwaway intermediate).
.SECONDARY:

# Library objects and archives: the top-level Makefile decides whether
# they are up to date (FORCE only makes sure it is asked).
FUZZ_LIBMAKE = @$(MAKE) -s --no-print-directory -f Makefile B=$(FUZZ_OBJ) CC=$(FUZZ_CC) \
                 OPT=-O1 CFLAGS="$(FUZZ_LIBCFLAGS)" $@
$(FUZZ_OBJ)/%.o: FORCE
	$(FUZZ_LIBMAKE)
$(FUZZ_OBJ)/%.a: FORCE
	$(FUZZ_LIBMAKE)

$(FUZZ_B)/%.o: tests/fuzz/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -MF $@.dep -c -o $@ $<

# A link needs the target's own object, then what it NEEDS (listed again
# by name: a pattern rule's prerequisites cannot name per-target lists).
.SECONDEXPANSION:
$(FUZZ_B)/fuzz_%: $(FUZZ_B)/fuzz_%.o $$(fuzz_$$*_NEEDS)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ -pthread $(fuzz_$*_LIBS)

# Header dependencies of the targets (.dep, not .d: the top-level Makefile
# includes every *.d under build/).
-include $(wildcard $(FUZZ_B)/*.o.dep)
