# Tests of libfence_gate: one Check suite per concern, sharing gateutil.
#   test_gate_rule     the rule (the table of cases, tests/common/rule_cases.tsv,
#                      against lib/common/rule.c and both backings), marks,
#                      names, the stale description, txn_mark
#   test_gate_args     misuse refused, and the messages per gate and thread
#   test_gate_threads  begin/commit against other threads, waits, many threads
#   test_gate_procs    processes sharing a file, a killed holder
GATE_TESTS := rule args threads procs
GATE_TEST_BINS := $(GATE_TESTS:%=$(B)/tests/gate/test_gate_%)
GATEUTIL_OBJ := $(B)/tests/gate/gateutil.o
TEST_BINS += $(GATE_TEST_BINS)
$(B)/tests/gate/%.o: MOD_CFLAGS += -Ilib/gate -Itests/gate
$(GATE_TEST_BINS): $(B)/tests/gate/test_gate_%: $(B)/tests/gate/test_gate_%.o $(GATEUTIL_OBJ) \
		$(TESTUTIL_OBJ) $(RULECASES_OBJ) $(LIBFENCE_GATE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(SQLITE_LIBS) $(CHECK_LIBS)
