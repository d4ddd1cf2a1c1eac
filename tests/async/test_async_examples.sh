#!/usr/bin/env bash
# test_async_examples.sh -- the asynchronous API's adapters at work: the
# libuv and libevent examples (examples/async_libuv.c, async_libevent.c)
# each run a loop that acquires a 300 ms lease, keeps it over four TTLs by
# the loop's renewals, writes with its token and releases it, against the
# test Redis; a lease held by someone else makes them say so and fail;
# libfence itself links neither libuv nor libevent.  TAP-style lines.
set -uo pipefail
B=${FENCE_BUILD:-build}
fails=0
ok() { echo "ok - $1"; }
nok() { echo "not ok - $1"; fails=$((fails + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else nok "$what"; fi; }

: "${FENCE_TEST_REDIS_URL:?needs scripts/with-servers (FENCE_TEST_REDIS_URL)}"
: "${FENCE_TEST_REDIS_PORT:?needs scripts/with-servers (FENCE_TEST_REDIS_PORT)}"
dir=$(mktemp -d "${TMPDIR:-/tmp}/fence-async-ex.XXXXXX")
trap 'rm -rf "$dir"' EXIT
rcli() { redis-cli -h 127.0.0.1 -p "$FENCE_TEST_REDIS_PORT" "$@"; }

for ex in async_libuv async_libevent; do
  bin="$B/examples/$ex"
  if [ ! -x "$bin" ]; then
    nok "$ex: $bin exists (make examples)"
    continue
  fi
  name="$ex-$$"
  # A deadline, so that a hang fails instead of blocking the run.
  timeout 20 "$bin" --redis "$FENCE_TEST_REDIS_URL" --name "$name" --ttl 300 --hold 1200 \
    --out "$dir/$ex.out" >"$dir/$ex.log" 2>&1
  rc=$?
  check "$ex: acquires, holds 1.2 s (4 TTLs), releases: exit 0 (got $rc: $(tr '\n' ' ' <"$dir/$ex.log"))" [ $rc -eq 0 ]
  renews=$(sed -n 's/.*renewed \([0-9]*\) times.*/\1/p' "$dir/$ex.log")
  check "$ex: the loop renewed it at least 6 times (every 100 ms; got ${renews:-none})" \
    [ "${renews:-0}" -ge 6 ]
  token=$(sed -n 's/.*with token \([0-9]*\).*/\1/p' "$dir/$ex.log")
  check "$ex: wrote '$name <token>' with the lease's token" \
    [ "$(cat "$dir/$ex.out" 2>/dev/null)" = "$name ${token:-none}" ]
  check "$ex: the owner key is gone after the release" [ "$(rcli EXISTS "fence:{$name}")" = 0 ]

  rcli SET "fence:{$name}" "someone-else:1" PX 5000 >/dev/null
  timeout 20 "$bin" --redis "$FENCE_TEST_REDIS_URL" --name "$name" --ttl 300 --hold 100 \
    >"$dir/$ex.busy" 2>&1
  rc=$?
  check "$ex: a lease held by another owner: exit 1 (got $rc)" [ $rc -eq 1 ]
  check "$ex: ... saying it is held" grep -q "held by another owner" "$dir/$ex.busy"
  check "$ex: ... and the other owner's key is untouched" [ "$(rcli GET "fence:{$name}")" = "someone-else:1" ]
  rcli DEL "fence:{$name}" >/dev/null
done

so="$B/libfence.so"
if [ -e "$so" ]; then
  check "libfence.so links neither libuv nor libevent" \
    bash -c "! ldd '$so' | grep -Eq 'libuv|libevent'"
  check "libfence.so has no libuv or libevent symbol" \
    bash -c "! nm -D --undefined-only '$so' | grep -Eq ' (uv_|event_)'"
else
  nok "libfence.so exists ($so)"
fi
[ $fails -eq 0 ]
