# libfence: the Redis lease library (the token issuer).  Links hiredis
# (RESP encoding and parsing) and OpenSSL (TLS) only, never libpq or
# SQLite: $(LEASE_LIBS) (the top Makefile), which whatever links libfence
# links too.  Its Lua lives in lib/lease/*.lua, embedded at build time.
LEASE_SRC := $(sort $(wildcard lib/lease/*.c lib/lease/redis/*.c))
LEASE_LUA := $(sort $(wildcard lib/lease/*.lua))
$(eval $(call embed_rule,$(B)/lib/lease/lua_embed.c,fence__lua_,$(LEASE_LUA)))
$(B)/lib/lease/client.o: $(B)/lib/lease/lua_embed.c
$(eval $(call library,fence,lib/lease,$(LEASE_SRC),$(B)/lib/lease/lua_embed.c,LEASE_LIBS))
# The asynchronous API and its header-only event-loop adapters (libfence
# links neither libuv nor libevent).
HEADERS += lib/lease/fence_async.h lib/lease/adapters/fence_libuv.h \
           lib/lease/adapters/fence_libevent.h
