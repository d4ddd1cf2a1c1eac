# libfence: the Redis lease core.  Links hiredis only (never libpq or SQLite).
CORE_SRC := lib/status.c lib/errmsg.c lib/url.c lib/owner.c lib/clock.c lib/conn.c \
            lib/scripts.c lib/client.c lib/lease.c lib/wait.c lib/heartbeat.c lib/metrics.c
CORE_LUA := lib/acquire.lua lib/renew.lua lib/renew_batch.lua lib/release.lua \
            lib/token_raise.lua lib/inspect.lua
CORE_OBJ := $(CORE_SRC:%.c=$(B)/%.o) $(B)/lib/lua_embed.o

LIBS_STATIC += $(B)/libfence.a
LIBS_SHARED += $(B)/libfence.so
PC_FILES    += $(B)/fence.pc
HEADERS     += lib/fence.h

# Lua scripts live in lib/*.lua and are embedded at build time.
$(B)/lib/lua_embed.c: scripts/embed-lua $(CORE_LUA)
	@mkdir -p $(dir $@)
	scripts/embed-lua $(CORE_LUA) > $@.tmp && mv $@.tmp $@

$(B)/lib/lua_embed.o: $(B)/lib/lua_embed.c
	$(CC) $(REAL_CFLAGS) -c -o $@ $<

$(B)/lib/scripts.o: $(B)/lib/lua_embed.c

$(B)/libfence.a: $(CORE_OBJ)
$(B)/libfence.so: $(CORE_OBJ)
	$(call link_so,$(CORE_OBJ),$(HIREDIS_LIBS))
$(B)/fence.pc: lib/fence.pc.in
	$(make_pc)
