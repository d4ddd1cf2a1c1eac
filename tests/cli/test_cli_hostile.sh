#!/usr/bin/env bash
# test_cli_hostile.sh -- a broken or hostile server (or proxy) cannot hold a
# call past its deadline.  hiredis 0.14's reader has no limits: before the
# caps in lib/lease/redis/transport.c, "*2147483647" x7 held `fence status`
# for 46 s against its 2 s I/O timeout (16 GiB of empty slots per level).
# Each case: a fake server of tests/cli/hostile_server.py, then `fence
# status` must fail with exit 69 and a clear message within 6 s.
. "$(dirname "$0")/cli_common.sh"

run_case() { # run_case KIND WHAT_THE_MESSAGE_SAYS
  local kind=$1 want=$2 pf=$T/port.$1
  python3 tests/cli/hostile_server.py "$pf" "$kind" & BG+=($!)
  wait_until 5 test -s "$pf" || { nok "$kind: the fake server did not start"; return; }
  local port t0 t1 rc
  port=$(cat "$pf")
  t0=$(date +%s%N)
  timeout -s KILL 60 "$F" status --redis "redis://127.0.0.1:$port" job > "$T/out" 2> "$T/err"
  rc=$?
  t1=$(date +%s%N)
  local ms=$(( (t1 - t0) / 1000000 ))
  echo "# $kind: exit $rc after $ms ms: $(head -c 300 "$T/err")"
  check "$kind: fence status fails with exit 69 (got $rc)" test "$rc" = 69
  check "$kind: within 6 s of its start (took $ms ms)" test "$ms" -lt 6000
  check "$kind: the message says '$want'" grep -q -- "$want" "$T/err"
}

run_case huge-arrays "protocol error"
run_case huge-bulk "protocol error"
run_case drip "timed out"
echo "# $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
