# The network fault suites (tests/net/test_*.sh): holders and Redis in
# network namespaces of their own, cut, one-way cut, packet loss, latency.
# These are their tools, not suites: netholder (a lease holder that prints
# its times on CLOCK_MONOTONIC) and delay_relay (latency without tc netem).
NET_TOOLS := $(B)/tests/net/netholder $(B)/tests/net/delay_relay
TEST_BINS += $(NET_TOOLS)
$(B)/tests/net/netholder.o: MOD_CFLAGS += -Ilib/lease
$(B)/tests/net/netholder: $(B)/tests/net/netholder.o $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(LEASE_LIBS)
$(B)/tests/net/delay_relay: $(B)/tests/net/delay_relay.o
	$(CC) -o $@ $^ $(REAL_LDFLAGS)
