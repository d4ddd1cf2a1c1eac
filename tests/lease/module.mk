# Tests of the Redis lease library (libfence).
LEASE_TESTS := lease client heartbeat badinput tokens failover
LEASE_TESTS += holderinfo
LEASE_TESTS += tls sentinel cluster
LEASE_TESTS += skew pipe threads
LEASE_TESTS += pg_issuer pg_issuer_fail
LEASE_TEST_BINS := $(LEASE_TESTS:%=$(B)/tests/lease/test_%)
TEST_BINS += $(LEASE_TEST_BINS) $(B)/tests/lease/holder
$(B)/tests/lease/%.o: MOD_CFLAGS += -Ilib/lease -Itests/lease
# setutil: servers of a test's own (a replica, a Sentinel) via scripts/redis-set.
$(LEASE_TEST_BINS): $(B)/tests/lease/test_%: $(B)/tests/lease/test_%.o $(LEASEUTIL_OBJ) \
		$(B)/tests/lease/setutil.o \
		$(TESTUTIL_OBJ) $(LIBFENCE) | $(B)/tests/lease/holder
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(LEASE_LIBS) $(CHECK_LIBS) $(LDLIBS_EXTRA)
# test_heartbeat: on_lost under allocation failure, through failalloc.o's
# wrappers of malloc / calloc / realloc (the tests' own; failalloc.h).
$(B)/tests/lease/test_heartbeat: $(B)/tests/lease/failalloc.o
$(B)/tests/lease/test_heartbeat: LDLIBS_EXTRA = -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc
# test_skew: skewed clocks, provoked with the tests' own LD_PRELOAD shim
# (tests/common/clockshim.c, preloaded into the servers and the skewed
# client it starts) and its control-file writer.
CLOCKSHIM_SO := $(B)/tests/common/clockshim.so
TEST_BINS += $(CLOCKSHIM_SO) $(B)/tests/lease/skewclient
$(B)/tests/lease/test_skew: $(B)/tests/common/clockshim_ctl.o $(LIBFENCE_GATE) \
		| $(CLOCKSHIM_SO) $(B)/tests/lease/skewclient
$(B)/tests/lease/test_skew: LDLIBS_EXTRA = $(SQLITE_LIBS)
$(B)/tests/lease/test_skew.o: MOD_CFLAGS += -Ilib/gate
# Without the sanitizer flags: it is preloaded into redis-server, which is
# not built with them.
$(CLOCKSHIM_SO): tests/common/clockshim.c tests/common/clockshim.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -g -O2 -fPIC -shared $(WARN) -Itests/common -o $@ $<
# clockshim-ctl: the control-file writer for scripts (make torture).
CLOCKSHIM_CTL := $(B)/tests/common/clockshim-ctl
TEST_BINS += $(CLOCKSHIM_CTL)
$(CLOCKSHIM_CTL): $(B)/tests/common/clockshim_tool.o $(B)/tests/common/clockshim_ctl.o
	$(CC) -o $@ $^ $(REAL_LDFLAGS)
# skewclient: a lease holder whose CLOCK_MONOTONIC the shim scales.
$(B)/tests/lease/skewclient: $(B)/tests/lease/skewclient.o $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(LEASE_LIBS)
# holder: a lease holder in a process of its own, spawned by the lease
# suites for the multi-process cases (kill -9, cross-process exclusion).
$(B)/tests/lease/holder: $(B)/tests/lease/holder.o $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(LEASE_LIBS)
# test_pg_issuer: the PostgreSQL issuer on the test PostgreSQL and pgbouncer
# (fence.sql installed by libfence_pg's fence_pg_install()).
$(B)/tests/lease/test_pg_issuer: $(B)/tests/lease/issuerutil.o $(LIBFENCE_PG)
$(B)/tests/lease/test_pg_issuer.o: MOD_CFLAGS += $(PQ_CFLAGS) -Ilib/pg
# test_pg_issuer_fail: its guarantee rows on clusters of its own
# (scripts/pg-cluster, scripts/pg-standby).
$(B)/tests/lease/test_pg_issuer_fail: $(B)/tests/lease/issuerutil.o $(LIBFENCE_PG)
$(B)/tests/lease/test_pg_issuer_fail.o: MOD_CFLAGS += $(PQ_CFLAGS) -Ilib/pg
# issuerutil: the behaviour suites against either issuer (FENCE_TEST_ISSUER;
# test_heartbeat and test_lease, run by run-suites as NAME and NAME:pg).
$(B)/tests/lease/test_heartbeat: $(B)/tests/lease/issuerutil.o $(LIBFENCE_PG)
$(B)/tests/lease/test_lease: $(B)/tests/lease/issuerutil.o $(LIBFENCE_PG)
$(B)/tests/lease/issuerutil.o: MOD_CFLAGS += $(PQ_CFLAGS) -Ilib/pg
