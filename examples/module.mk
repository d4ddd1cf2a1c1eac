# Examples: small programs that show the libraries at work (make examples).
# Each example adds itself to EXAMPLE_BINS.

# filestore: a fenced file store on the write gate (lib/gate).
EXAMPLE_BINS += $(B)/examples/filestore
$(B)/examples/filestore.o: MOD_CFLAGS += -Ilib/gate
$(B)/examples/filestore: $(B)/examples/filestore.o $(B)/libfence_gate.a $(B)/libfence.a
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(SQLITE_LIBS)
# tests/test_filestore.sh drives this binary, so it is built with the tests.
TEST_BINS += $(B)/examples/filestore
