# libfence_sqlite: storage-side fencing for SQLite (triggers + C API), and
# the same code built as a loadable SQLite extension.  Links SQLite only,
# never libfence or libpq.  The SQL lives in sql/sqlite/*.sql.  Every
# lib/sqlite/*.c but ext.c is the library; the extension is all of them,
# ext.c included, compiled again with -DFENCE_SQLITE_EXTENSION (the file
# list in lib/sqlite/sqlite_internal.h says what each one owns).
SQLITE_SQL     := $(sort $(wildcard sql/sqlite/*.sql))
SQLITE_LIB_SRC := $(filter-out lib/sqlite/ext.c,$(sort $(wildcard lib/sqlite/*.c)))
SQLITE_OBJ     := $(SQLITE_LIB_SRC:%.c=$(B)/%.o) $(B)/lib/sqlite/sql_embed.o $(COMMON_OBJ)
SQLITE_EXT_OBJ := $(patsubst lib/sqlite/%.c,$(B)/lib/sqlite/ext/%.o,$(SQLITE_LIB_SRC) lib/sqlite/ext.c) \
                  $(B)/lib/sqlite/sql_embed.o $(COMMON_OBJ)
SQLITE_EXT     := $(B)/fence_sqlite_ext.so

LIBS_STATIC += $(LIBFENCE_SQLITE)
LIBS_SHARED += $(B)/libfence_sqlite.so
PC_FILES    += $(B)/fence_sqlite.pc
HEADERS     += lib/sqlite/fence_sqlite.h
EXTENSIONS  += $(SQLITE_EXT)

$(B)/lib/sqlite/%.o: MOD_CFLAGS += -Ilib/sqlite
$(eval $(call embed_rule,$(B)/lib/sqlite/sql_embed.c,fence_sqlite__sql_,$(SQLITE_SQL)))

# The extension build: the same sources, with every sqlite3_* call going
# through the routine table SQLite hands to the entry point.
$(B)/lib/sqlite/ext/%.o: lib/sqlite/%.c
	@mkdir -p $(dir $@)
	$(CC) $(REAL_CFLAGS) -Ilib/sqlite -DFENCE_SQLITE_EXTENSION -MMD -MP -c -o $@ $<

$(LIBFENCE_SQLITE): $(SQLITE_OBJ)
$(B)/libfence_sqlite.so: $(SQLITE_OBJ)
	$(call link_so,$(SQLITE_OBJ),$(SQLITE_LIBS))
$(B)/fence_sqlite.pc: lib/sqlite/fence_sqlite.pc.in
	$(make_pc)

# A loadable module, not a library to link: no SONAME, no -lsqlite3, and
# only the entry points exported.
$(SQLITE_EXT): $(SQLITE_EXT_OBJ) lib/sqlite/ext.map
	$(CC) -shared -o $@ $(SQLITE_EXT_OBJ) $(REAL_LDFLAGS) \
	  -Wl,--version-script=lib/sqlite/ext.map -Wl,-Bsymbolic -Wl,-z,defs
