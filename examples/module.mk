# Examples: small programs that show the libraries at work (make examples).
# Each example adds itself to EXAMPLE_BINS.

# filestore: a fenced file store on the write gate (lib/gate).
EXAMPLE_BINS += $(B)/examples/filestore
$(B)/examples/filestore.o: MOD_CFLAGS += -Ilib/gate
$(B)/examples/filestore: $(B)/examples/filestore.o $(LIBFENCE_GATE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(SQLITE_LIBS)

# Where the examples find their servers (flags, else the environment).
EX_ENV_OBJ := $(B)/examples/ex_env.o

# paused_holder: the GC-pause race with real processes and SIGSTOP, without
# and with fencing, on SQLite, PostgreSQL or the C gate (make demo runs it).
PH_OBJ := $(addprefix $(B)/examples/,paused_holder.o ph_store.o ph_sqlite.o ph_pg.o ph_gate.o) $(EX_ENV_OBJ)
EXAMPLE_BINS += $(B)/examples/paused_holder
$(PH_OBJ): MOD_CFLAGS += -Ilib/lease -Ilib/sqlite -Ilib/pg -Ilib/gate $(PQ_CFLAGS)
$(B)/examples/paused_holder: $(PH_OBJ) $(LIBFENCE_SQLITE) $(LIBFENCE_PG) $(LIBFENCE_GATE) $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(SQLITE_LIBS) $(PQ_LIBS) $(LEASE_LIBS)

# invoice_job: a scheduled job under a lease, writing through fence_pg.
EXAMPLE_BINS += $(B)/examples/invoice_job
$(B)/examples/invoice_job.o: MOD_CFLAGS += -Ilib/lease -Ilib/pg $(PQ_CFLAGS)
$(B)/examples/invoice_job: $(B)/examples/invoice_job.o $(EX_ENV_OBJ) $(LIBFENCE_PG) $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(PQ_LIBS) $(LEASE_LIBS)

# retrofit_lock_version: a Rails-style lock_version column put under fencing.
EXAMPLE_BINS += $(B)/examples/retrofit_lock_version
$(B)/examples/retrofit_lock_version.o: MOD_CFLAGS += -Ilib/lease -Ilib/pg $(PQ_CFLAGS)
$(B)/examples/retrofit_lock_version: $(B)/examples/retrofit_lock_version.o $(EX_ENV_OBJ) \
                                     $(LIBFENCE_PG) $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(PQ_LIBS) $(LEASE_LIBS)

# self_heal: a store ahead of the counter rejects a holder's write; the
# holder reissues its token (fence_lease_reissue) and the write lands.
EXAMPLE_BINS += $(B)/examples/self_heal
$(B)/examples/self_heal.o: MOD_CFLAGS += -Ilib/lease -Ilib/sqlite
$(B)/examples/self_heal: $(B)/examples/self_heal.o $(EX_ENV_OBJ) $(LIBFENCE_SQLITE) $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(SQLITE_LIBS) $(LEASE_LIBS)

# async_libuv / async_libevent: a lease held from an event loop through the
# asynchronous API (lib/lease/fence_async.h) and its header-only adapters
# (lib/lease/adapters): the program links libuv or libevent, libfence never.
UV_LIBS    = $(or $(shell pkg-config --libs libuv 2>/dev/null),-luv)
EVENT_LIBS = $(or $(shell pkg-config --libs libevent 2>/dev/null),-levent)
EXAMPLE_BINS += $(B)/examples/async_libuv $(B)/examples/async_libevent
$(B)/examples/async_libuv.o $(B)/examples/async_libevent.o: MOD_CFLAGS += -Ilib/lease -Ilib/lease/adapters
$(B)/examples/async_libuv: $(B)/examples/async_libuv.o $(EX_ENV_OBJ) $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(LEASE_LIBS) $(UV_LIBS)
$(B)/examples/async_libevent: $(B)/examples/async_libevent.o $(EX_ENV_OBJ) $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(LEASE_LIBS) $(EVENT_LIBS)
