# The etcd issuer's suites (lib/lease/etcd): a one-member etcd of
# scripts/with-servers --etcd, and clusters of their own (scripts/etcd-cluster).
ETCD_TESTS := etcd etcd_cluster
ETCD_TEST_BINS := $(ETCD_TESTS:%=$(B)/tests/etcd/test_%)
TEST_BINS += $(ETCD_TEST_BINS)
$(B)/tests/etcd/%.o: MOD_CFLAGS += -Ilib/lease -Itests/etcd -Itests/lease
$(ETCD_TEST_BINS): $(B)/tests/etcd/test_%: $(B)/tests/etcd/test_%.o $(B)/tests/etcd/etcdutil.o \
		$(TESTUTIL_OBJ) $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(LEASE_LIBS) $(CHECK_LIBS)
