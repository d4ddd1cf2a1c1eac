# The benchmarks (make bench runs them through scripts/run-bench; never
# part of make test): one program per library, tests/bench/bench_*.c.

# bench_lease: the lease core against bare hiredis baselines, on the same Redis.
BENCH_BINS += $(B)/tests/bench/bench_lease
$(B)/tests/bench/bench_lease.o: MOD_CFLAGS += -Ilib/lease
$(B)/tests/bench/bench_lease: $(B)/tests/bench/bench_lease.o $(B)/tests/bench/scriptload.o $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(LEASE_LIBS) -lm

# cycle_loop: N acquire+release cycles one way (library, its scripts by
# hiredis, bare SET NX PX + DEL, the same with poll()), nothing else: a tool
# for strace -c / perf stat / callgrind per cycle (docs/measurements.md),
# built by make bench, never run by it (run-bench runs bench_* only).
BENCH_BINS += $(B)/tests/bench/cycle_loop
$(B)/tests/bench/cycle_loop.o: MOD_CFLAGS += -Ilib/lease
$(B)/tests/bench/cycle_loop: $(B)/tests/bench/cycle_loop.o $(B)/tests/bench/scriptload.o $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(LEASE_LIBS)

# Issue 20: what one fenced acquire+release costs the Redis server
# (redis_usec_per_cycle_vs_floor_ratio, goal <= 1.5), where that time goes,
# 8 threads on one client vs 1, and (node + npm present) ioredis beside it.
BENCH_BINS += $(B)/tests/bench/bench_redis_cost
$(B)/tests/bench/bench_redis_cost.o: MOD_CFLAGS += -Ilib/lease
$(B)/tests/bench/bench_redis_cost: $(B)/tests/bench/bench_redis_cost.o $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(LEASE_LIBS)

# Issue 9: acquire_release_tls_vs_plain_ratio (goal <= 1.3), a program of its
# own (it starts a TLS Redis through scripts/redis-set): run it with
#   scripts/with-servers -- $(B)/tests/bench/bench_tls
BENCH_BINS += $(B)/tests/bench/bench_tls
$(B)/tests/bench/bench_tls.o: MOD_CFLAGS += -Ilib/lease
$(B)/tests/bench/bench_tls: $(B)/tests/bench/bench_tls.o $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(LEASE_LIBS)

# Issue 9: renew_10k_cluster_round_trips_per_node (goal 1) and
# renew_10k_cluster_pass_ms, a program of its own (it starts a Redis Cluster
# through scripts/redis-set): run it with
#   scripts/with-servers -- $(B)/tests/bench/bench_cluster
BENCH_BINS += $(B)/tests/bench/bench_cluster
$(B)/tests/bench/bench_cluster.o: MOD_CFLAGS += -Ilib/lease
$(B)/tests/bench/bench_cluster: $(B)/tests/bench/bench_cluster.o $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(LEASE_LIBS)

# bench_pg: what fencing costs a PostgreSQL write (fence.sql and the extension).
BENCH_BINS += $(B)/tests/bench/bench_pg
$(B)/tests/bench/bench_pg.o: MOD_CFLAGS += -Ilib/pg $(PQ_CFLAGS)
$(B)/tests/bench/bench_pg: $(B)/tests/bench/bench_pg.o $(LIBFENCE_PG)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(PQ_LIBS) -lm

# bench_sqlite: what fencing costs an SQLite UPDATE.
BENCH_BINS += $(B)/tests/bench/bench_sqlite
$(B)/tests/bench/bench_sqlite.o: MOD_CFLAGS += -Ilib/sqlite
$(B)/tests/bench/bench_sqlite: $(B)/tests/bench/bench_sqlite.o $(LIBFENCE_SQLITE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(SQLITE_LIBS) -lm

# bench_gate: begin/commit per second through the write gate.
BENCH_BINS += $(B)/tests/bench/bench_gate
$(B)/tests/bench/bench_gate.o: MOD_CFLAGS += -Ilib/gate
$(B)/tests/bench/bench_gate: $(B)/tests/bench/bench_gate.o $(LIBFENCE_GATE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(SQLITE_LIBS) -lm

# Issue 30: the Python package's acquire+release against the C client's
# and redis-py's Lock (python_vs_c_acquire_release_ratio, goal >= 0.9;
# python_vs_redis_py_lock_ratio, goal >= 1).  bench_python is a two-line
# script that runs tests/bench/bench_python.py with Debian's python3 on
# this build; the C side, bench_python_c, lives in py/ so that run-bench
# (which runs every bench_* here) does not take it for a benchmark.
BENCH_BINS += $(B)/tests/bench/bench_python $(B)/tests/bench/py/bench_python_c
$(B)/tests/bench/bench_python: tests/bench/bench_python.py tests/bench/module.mk
	@mkdir -p $(dir $@)
	printf '#!/bin/sh\n# make bench: tests/bench/bench_python.py on %s\nexec /usr/bin/python3 tests/bench/bench_python.py %s "$$@"\n' '$(B)' '$(B)' > $@.tmp
	chmod +x $@.tmp && mv $@.tmp $@
$(B)/tests/bench/py/bench_python_c.o: tests/bench/bench_python_c.c
	@mkdir -p $(dir $@)
	$(CC) $(REAL_CFLAGS) -Ilib/lease -MMD -MP -c -o $@ $<
$(B)/tests/bench/py/bench_python_c: $(B)/tests/bench/py/bench_python_c.o $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(LEASE_LIBS)

# Issue 28: the PostgreSQL issuer's acquire+release against two one-row
# UPDATE commits (pg_acquire_release_vs_floor_ratio, goal <= 1.2) and beside
# pg_try_advisory_lock + pg_advisory_unlock, on a PostgreSQL of its own with
# fsync on (scripts/pg-standby start BASE solo); renewing 10,000 leases.
BENCH_BINS += $(B)/tests/bench/bench_pg_issuer
$(B)/tests/bench/bench_pg_issuer.o: MOD_CFLAGS += -Ilib/lease -Ilib/pg $(PQ_CFLAGS)
$(B)/tests/bench/bench_pg_issuer: $(B)/tests/bench/bench_pg_issuer.o $(LIBFENCE_PG) $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(LEASE_LIBS) $(PQ_LIBS)
