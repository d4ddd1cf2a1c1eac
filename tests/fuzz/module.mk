# The libFuzzer targets, tests/fuzz/fuzz_NAME.c (make fuzz runs them
# through scripts/run-fuzz; never part of make all or make test).  They
# are built in the fuzz build only, `make SANITIZER=fuzz CC=clang` (the top
# Makefile: B=build/fuzz, every object with libFuzzer's coverage, ASan and
# UBSan), so they get the project's own flags and source lists and never
# mix with the gcc objects.  Each is linked with -fsanitize=fuzzer
# (libFuzzer's main) to what it needs besides its own object: single
# objects where that is all, a library's archive where the parser lives in it.
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,%,$(sort $(wildcard tests/fuzz/fuzz_*.c)))
FUZZ_BINS    += $(FUZZ_TARGETS:%=$(B)/tests/fuzz/%)
$(B)/tests/fuzz/%.o: MOD_CFLAGS += -Ilib/lease -Ilib/pg -Ilib/sqlite -Icli $(PQ_CFLAGS)

$(B)/tests/fuzz/fuzz_url:        $(B)/lib/lease/redis/url.o $(COMMON_OBJ)
$(B)/tests/fuzz/fuzz_duration:   $(B)/cli/args.o $(COMMON_OBJ)
$(B)/tests/fuzz/fuzz_token:      $(COMMON_OBJ)
$(B)/tests/fuzz/fuzz_pg_detail:  $(LIBFENCE_PG)
$(B)/tests/fuzz/fuzz_pg_detail:  FUZZ_LIBS = $(PQ_LIBS)
$(B)/tests/fuzz/fuzz_sqlite_msg: $(LIBFENCE_SQLITE)
$(B)/tests/fuzz/fuzz_sqlite_msg: FUZZ_LIBS = $(SQLITE_LIBS)

$(FUZZ_TARGETS:%=$(B)/tests/fuzz/%): $(B)/tests/fuzz/%: $(B)/tests/fuzz/%.o
	$(CC) -fsanitize=fuzzer -o $@ $^ $(REAL_LDFLAGS) $(FUZZ_LIBS)
