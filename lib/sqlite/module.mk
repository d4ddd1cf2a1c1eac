# libfence_sqlite: storage-side fencing for SQLite (triggers + C API), and
# the same code built as a loadable SQLite extension.  Links SQLite only,
# never the core or libpq.
SQLITE_SQL     := $(sort $(wildcard sql/sqlite/*.sql))
SQLITE_OBJ     := $(B)/lib/sqlite/fence_sqlite.o $(B)/lib/sqlite/sql_embed.o
SQLITE_EXT_OBJ := $(B)/lib/sqlite/ext/fence_sqlite.o $(B)/lib/sqlite/ext/ext.o \
                  $(B)/lib/sqlite/sql_embed.o
SQLITE_EXT     := $(B)/fence_sqlite_ext.so

LIBS_STATIC += $(B)/libfence_sqlite.a
LIBS_SHARED += $(B)/libfence_sqlite.so
PC_FILES    += $(B)/fence_sqlite.pc
HEADERS     += lib/sqlite/fence_sqlite.h

# The SQL lives in sql/sqlite/*.sql and is embedded at build time.
$(B)/lib/sqlite/sql_embed.c: scripts/embed $(SQLITE_SQL) lib/sqlite/module.mk
	@mkdir -p $(dir $@)
	scripts/embed fence_sqlite__sql_ $(SQLITE_SQL) > $@.tmp && mv $@.tmp $@

$(B)/lib/sqlite/sql_embed.o: $(B)/lib/sqlite/sql_embed.c
	$(CC) $(REAL_CFLAGS) -c -o $@ $<

# The extension build: the same sources, with every sqlite3_* call going
# through the routine table SQLite hands to the entry point.
$(B)/lib/sqlite/ext/%.o: lib/sqlite/%.c
	@mkdir -p $(dir $@)
	$(CC) $(REAL_CFLAGS) -DFENCE_SQLITE_EXTENSION -MMD -MP -c -o $@ $<

$(B)/libfence_sqlite.a: $(SQLITE_OBJ)
$(B)/libfence_sqlite.so: $(SQLITE_OBJ)
	$(call link_so,$(SQLITE_OBJ),$(SQLITE_LIBS))
$(B)/fence_sqlite.pc: lib/sqlite/fence_sqlite.pc.in
	$(make_pc)

# A loadable module, not a library to link: no SONAME, no -lsqlite3, and
# only the entry points exported.
$(SQLITE_EXT): $(SQLITE_EXT_OBJ) lib/sqlite/ext.map
	$(CC) -shared -o $@ $(SQLITE_EXT_OBJ) $(REAL_LDFLAGS) \
	  -Wl,--version-script=lib/sqlite/ext.map -Wl,-Bsymbolic -Wl,-z,defs
EXTENSIONS += $(SQLITE_EXT)

# Tests and benchmark.  (tests/module.mk is read after this file, so its
# variables are not set yet here: name testutil.o directly.)
TEST_BINS += $(B)/tests/test_sqlite
$(B)/tests/test_sqlite: $(B)/tests/test_sqlite.o $(B)/tests/testutil.o $(B)/libfence_sqlite.a \
                        $(B)/libfence.a
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(SQLITE_LIBS) $(HIREDIS_LIBS) $(CHECK_LIBS)
tests-build: $(SQLITE_EXT)

BENCH_BINS += $(B)/tests/bench/bench_sqlite
$(B)/tests/bench/bench_sqlite: $(B)/tests/bench/bench_sqlite.o $(B)/libfence_sqlite.a
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(SQLITE_LIBS) -lm
