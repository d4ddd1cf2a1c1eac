# libfence_sqlite: storage-side fencing for SQLite (triggers + C API), and
# the same code built as a loadable SQLite extension.  Links SQLite only,
# never libfence or libpq.  The SQL lives in sql/sqlite/*.sql.  Every
# lib/sqlite/*.c but ext.c is the library; the extension is all of them,
# ext.c included, compiled again with -DFENCE_SQLITE_EXTENSION (the file
# list in lib/sqlite/sqlite_internal.h says what each one owns).
SQLITE_SQL     := $(sort $(wildcard sql/sqlite/*.sql))
SQLITE_LIB_SRC := $(filter-out lib/sqlite/ext.c,$(sort $(wildcard lib/sqlite/*.c)))
$(eval $(call embed_rule,$(B)/lib/sqlite/sql_embed.c,fence_sqlite__sql_,$(SQLITE_SQL)))
$(eval $(call library,fence_sqlite,lib/sqlite,$(SQLITE_LIB_SRC),$(B)/lib/sqlite/sql_embed.c,SQLITE_LIBS))

# The extension build: the same sources, with every sqlite3_* call going
# through the routine table SQLite hands to the entry point.  A loadable
# module, not a library to link: no SONAME, no -lsqlite3, and only the
# entry points exported.
SQLITE_EXT     := $(B)/fence_sqlite_ext.so
SQLITE_EXT_OBJ := $(patsubst lib/sqlite/%.c,$(B)/lib/sqlite/ext/%.o,$(SQLITE_LIB_SRC) lib/sqlite/ext.c) \
                  $(B)/lib/sqlite/sql_embed.o $(COMMON_OBJ)
EXTENSIONS     += $(SQLITE_EXT)
$(B)/lib/sqlite/ext/%.o: lib/sqlite/%.c
	@mkdir -p $(dir $@)
	$(CC) $(REAL_CFLAGS) -Ilib/sqlite -DFENCE_SQLITE_EXTENSION -MMD -MP -c -o $@ $<
$(SQLITE_EXT): $(SQLITE_EXT_OBJ) lib/sqlite/ext.map
	$(CC) -shared -o $@ $(SQLITE_EXT_OBJ) $(REAL_LDFLAGS) \
	  -Wl,--version-script=lib/sqlite/ext.map -Wl,-Bsymbolic -Wl,-z,defs
