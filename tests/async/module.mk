# Tests of the asynchronous API (lib/lease/fence_async.h): Check suites on
# a real Redis (scripts/with-servers, plus servers of their own), and a
# shell suite that runs the libuv and libevent examples.
ASYNC_TESTS := async async_net async_adapters
ASYNC_TEST_BINS := $(ASYNC_TESTS:%=$(B)/tests/async/test_%)
TEST_BINS += $(ASYNC_TEST_BINS)
$(B)/tests/async/%.o: MOD_CFLAGS += -Ilib/lease -Itests/lease -Itests/async
$(ASYNC_TEST_BINS): $(B)/tests/async/test_%: $(B)/tests/async/test_%.o \
		$(B)/tests/async/asyncutil.o $(LEASEUTIL_OBJ) $(B)/tests/lease/setutil.o \
		$(TESTUTIL_OBJ) $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(LEASE_LIBS) $(CHECK_LIBS) $(ASYNC_LOOP_LIBS)
# test_async_adapters runs the header-only adapters in real loops: it links
# libuv and libevent (UV_LIBS, EVENT_LIBS: examples/module.mk).
$(B)/tests/async/test_async_adapters.o: MOD_CFLAGS += -Ilib/lease/adapters
$(B)/tests/async/test_async_adapters: ASYNC_LOOP_LIBS = $(UV_LIBS) $(EVENT_LIBS)

# Benchmark (make bench): async_64_inflight_vs_blocking_ratio (goal >= 5).
BENCH_BINS += $(B)/tests/bench/bench_async
$(B)/tests/bench/bench_async.o: MOD_CFLAGS += -Ilib/lease
$(B)/tests/bench/bench_async: $(B)/tests/bench/bench_async.o $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(LEASE_LIBS)
