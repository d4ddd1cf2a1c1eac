# libfence: the Redis lease core.  Links hiredis only (never libpq or SQLite).
CORE_SRC := $(wildcard lib/*.c)
CORE_LUA := $(wildcard lib/*.lua)
CORE_OBJ := $(CORE_SRC:%.c=$(B)/%.o) $(B)/lib/lua_embed.o

LIBS_STATIC += $(B)/libfence.a
LIBS_SHARED += $(B)/libfence.so
PC_FILES    += $(B)/fence.pc
HEADERS     += lib/fence.h

# Lua scripts live in lib/*.lua and are embedded at build time.
$(B)/lib/lua_embed.c: scripts/embed $(CORE_LUA) lib/core.mk
	@mkdir -p $(dir $@)
	scripts/embed fence__lua_ $(CORE_LUA) > $@.tmp && mv $@.tmp $@

$(B)/lib/lua_embed.o: $(B)/lib/lua_embed.c
	$(CC) $(REAL_CFLAGS) -c -o $@ $<

$(B)/lib/scripts.o: $(B)/lib/lua_embed.c

$(B)/libfence.a: $(CORE_OBJ)
$(B)/libfence.so: $(CORE_OBJ)
	$(call link_so,$(CORE_OBJ),$(HIREDIS_LIBS))
$(B)/fence.pc: lib/fence.pc.in
	$(make_pc)
