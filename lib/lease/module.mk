# libfence: the Redis lease library (the token issuer).  Links hiredis
# (RESP encoding and parsing) and OpenSSL (TLS) only, never libpq or
# SQLite.  Its Lua lives in lib/lease/*.lua.  Whatever links libfence
# links $(HIREDIS_LIBS), which therefore carries OpenSSL too.
SSL_LIBS := $(or $(shell pkg-config --libs openssl 2>/dev/null),-lssl -lcrypto)
HIREDIS_LIBS += $(SSL_LIBS)
LEASE_SRC := $(sort $(wildcard lib/lease/*.c lib/lease/redis/*.c))
LEASE_LUA := $(sort $(wildcard lib/lease/*.lua))
LEASE_OBJ := $(LEASE_SRC:%.c=$(B)/%.o) $(B)/lib/lease/lua_embed.o $(COMMON_OBJ)

LIBS_STATIC += $(LIBFENCE)
LIBS_SHARED += $(B)/libfence.so
PC_FILES    += $(B)/fence.pc
HEADERS     += lib/lease/fence.h lib/lease/fence_async.h \
               lib/lease/adapters/fence_libuv.h lib/lease/adapters/fence_libevent.h

$(B)/lib/lease/%.o: MOD_CFLAGS += -Ilib/lease
$(eval $(call embed_rule,$(B)/lib/lease/lua_embed.c,fence__lua_,$(LEASE_LUA)))
$(B)/lib/lease/scripts.o: $(B)/lib/lease/lua_embed.c

$(LIBFENCE): $(LEASE_OBJ)
$(B)/libfence.so: $(LEASE_OBJ)
	$(call link_so,$(LEASE_OBJ),$(HIREDIS_LIBS))
$(B)/fence.pc: lib/lease/fence.pc.in
	$(make_pc)
