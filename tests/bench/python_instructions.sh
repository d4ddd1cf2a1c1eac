#!/usr/bin/env bash
# python_instructions.sh -- where the client-side work of an acquire+release
# cycle goes: the user-space instructions per cycle of the same cycle as
# bench_python (try once, TTL 60 s, one name, one client) through the
# Python package (Debian's python3 over BUILD_DIR's libfence.so.0), through
# the C client (BUILD_DIR/tests/bench/py/bench_python_c) and through
# redis-py's Lock (python3-redis), each counted by valgrind's callgrind
# (all threads, the heartbeat's too; the kernel's work is not counted) for
# 1 and for 1+N cycles, the difference over N, split by ELF object.  Not
# part of make bench (valgrind makes it slow, ~30 s); docs/measurements.md
# quotes its figures.  Needs the Redis of scripts/with-servers:
#   scripts/with-servers --redis -- tests/bench/python_instructions.sh [BUILD_DIR [N]]
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
N=${2:-2000}
PY=/usr/bin/python3
for p in valgrind callgrind_annotate "$PY" "$B/tests/bench/py/bench_python_c" "$B/libfence.so.0"; do
  command -v "$p" >/dev/null || { echo "python_instructions: $p not found (make -j2 all tests-build; apt-get install valgrind)" >&2; exit 1; }
done
[ -n "${FENCE_TEST_REDIS_URL:-}" ] || { echo "python_instructions: run under scripts/with-servers --redis" >&2; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/fence-pyir.XXXXXX")
trap 'rm -rf "$dir"' EXIT

# count OUT CYCLES SIDE: one run of SIDE (python, c or redis_py) doing
# CYCLES cycles under callgrind, its profile in OUT.
count() {
  local out=$1 n=$2 side=$3 name=pyir-$side-$$
  case $side in
    python) FENCE_LIBDIR=$B PYTHONPATH=python valgrind --tool=callgrind --callgrind-out-file="$out" "$PY" -c '
import os, sys, fence
c = fence.Client(os.environ["FENCE_TEST_REDIS_URL"])
for _ in range(int(sys.argv[1])):
    with c.lease(sys.argv[2], 60000):
        pass' "$n" "$name" ;;
    c) printf '%s\n' "$n" | valgrind --tool=callgrind --callgrind-out-file="$out" \
         "$B/tests/bench/py/bench_python_c" "$FENCE_TEST_REDIS_URL" "$name" 60000 ;;
    redis_py) valgrind --tool=callgrind --callgrind-out-file="$out" "$PY" -c '
import os, sys, redis
r = redis.Redis.from_url(os.environ["FENCE_TEST_REDIS_URL"])
for _ in range(int(sys.argv[1])):
    with r.lock(sys.argv[2], timeout=60, blocking=False):
        pass' "$n" "$name" ;;
  esac >/dev/null 2>"$dir/valgrind.log" || { cat "$dir/valgrind.log" >&2; exit 1; }
}
# by_object PROFILE: "OBJECT INSTRUCTIONS" per ELF object, sorted by name.
by_object() {
  callgrind_annotate --inclusive=no --threshold=100 --show-percs=no "$1" 2>/dev/null \
    | sed -n '/file:function/,$p' \
    | awk 'match($0, /\[[^]]*\]$/) { ir = $1; gsub(",", "", ir); o = substr($0, RSTART + 1, RLENGTH - 2);
                                    k = split(o, a, "/"); s[a[k]] += ir }
           END { for (o in s) print o, s[o] }' | sort
}
for side in c python redis_py; do
  count "$dir/$side-1.out" 1 "$side"
  count "$dir/$side-n.out" $((N + 1)) "$side"
  by_object "$dir/$side-1.out" > "$dir/$side-1.txt"
  by_object "$dir/$side-n.out" > "$dir/$side-n.txt"
  join -a1 -a2 -e0 -o 0,1.2,2.2 "$dir/$side-1.txt" "$dir/$side-n.txt" \
    | awk -v side="$side" -v n="$N" '{ d = ($3 - $2) / n; t += d; if (d >= 50) printf "%s_instructions_per_cycle %s %.0f\n", side, $1, d }
                                     END { printf "%s_instructions_per_cycle total %.0f\n", side, t }' \
    | sort -k3 -n -r
done
