#!/usr/bin/env bash
# redis_instructions.sh -- count the instructions a redis-server runs for
# the library's scripts (tests/bench/redis_instructions.py): a redis-server
# of its own under valgrind's callgrind, on a free loopback port in a
# temporary folder, always stopped afterwards.  Not part of make bench
# (valgrind makes it slow, ~20 s); docs/redis.md, "What the scripts cost
# the server", quotes its figures.
#   tests/bench/redis_instructions.sh [GIT_REF]   (REF: also the scripts as
#   they were there, e.g. the commit before a change)
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/servers.sh
for p in valgrind callgrind_control redis-server redis-cli python3; do
  command -v "$p" >/dev/null || fence_die "$p not found (valgrind: apt-get install valgrind)"
done
dir=$(mktemp -d "${TMPDIR:-/tmp}/fence-ir.XXXXXX")
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
port=$(fence_free_port) || fence_die "no free port"
valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out.%p" \
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  >"$dir/valgrind.log" 2>&1 &
pid=$!
for _ in $(seq 1 200); do
  redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { cat "$dir/valgrind.log" >&2; fence_die "redis-server under callgrind exited"; }
  sleep 0.1
done
redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null || fence_die "redis-server under callgrind did not answer"
redis-server --version | sed 's/^/# /'
REDIS_PORT=$port VG_PID=$pid VG_DIR=$dir python3 tests/bench/redis_instructions.py "$@"
