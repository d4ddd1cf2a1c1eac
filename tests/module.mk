# Tests: one folder per part (tests/lease, tests/pg, tests/sqlite,
# tests/gate, tests/cli, tests/examples), the shared helpers in
# tests/common, the benchmarks in tests/bench.  A Check suite is a binary
# $(B)/tests/PART/test_*; a shell suite is tests/PART/test_*.sh and prints
# TAP-style "ok"/"not ok" lines.  scripts/run-suites runs them all.
$(B)/tests/%.o: MOD_CFLAGS += $(CHECK_CFLAGS) -Itests/common

# The parts' own fragments (tests/PART/module.mk) are listed in MODULES
# in the top-level Makefile, which also builds, for the shell suites, the
# CLI (tests/cli), the examples (tests/examples) and the SQLite extension.
