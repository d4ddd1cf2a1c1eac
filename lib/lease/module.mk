# libfence: the lease core (lib/lease/*.c), the Redis issuer with its private
# Redis client (lib/lease/redis/), and the asynchronous API
# (lib/lease/async/).  Links hiredis (RESP parsing) and OpenSSL (TLS) only,
# never libpq or SQLite: $(LEASE_LIBS) (the top Makefile), which whatever
# links libfence links too.  The Redis issuer's Lua lives in
# lib/lease/redis/*.lua, embedded at build time.
LEASE_SRC := $(sort $(wildcard lib/lease/*.c lib/lease/redis/*.c lib/lease/async/*.c))
# The PostgreSQL issuer (lib/lease/pg/): libfence links libpq itself
# (docs/issuers.md says why); the checkers still link no issuer.
LEASE_SRC += $(sort $(wildcard lib/lease/pg/*.c))
$(B)/lib/lease/pg/%.o: MOD_CFLAGS += $(PQ_CFLAGS)
LEASE_LUA := $(sort $(wildcard lib/lease/redis/*.lua))
$(eval $(call embed_rule,$(B)/lib/lease/lua_embed.c,fence__lua_,$(LEASE_LUA)))
$(eval $(call library,fence,lib/lease,$(LEASE_SRC),$(B)/lib/lease/lua_embed.c,LEASE_LIBS))
# The asynchronous API and its header-only event-loop adapters (libfence
# links neither libuv nor libevent).
HEADERS += lib/lease/fence_async.h lib/lease/adapters/fence_libuv.h \
           lib/lease/adapters/fence_libevent.h
