#!/usr/bin/env bash
# test_torture.sh -- the 20-second version of `make torture` (scripts/torture),
# run by scripts/run-suites inside make test.  The torture run starts its own
# servers (two Redis nodes and a Sentinel, PostgreSQL) on free loopback ports
# and stops them itself; it needs FENCE_BUILD (the build dir) with the fence
# CLI and fence_sqlite_ext.so, nothing from scripts/with-servers.
#   FENCE_SUITES=test_torture scripts/run-suites build
# TORTURE_QUICK_SECONDS changes the length (20).  Prints "ok - ..." /
# "not ok - ..." lines and the run's figures as "# torture ..." comments;
# exits non-zero on any failure.  The run's history (TORTURE_HISTORY) must
# pass tests/torture/histcheck.py, run here on it again.
set -u
cd "$(dirname "$0")/../.."

B=${FENCE_BUILD:-build}
fails=0
ok() { echo "ok - $*"; }
nok() { echo "not ok - $*"; fails=$((fails + 1)); }

for x in "$B/fence" "$B/fence_sqlite_ext.so"; do
  if [ ! -e "$x" ]; then
    nok "setup: $x is missing (make B=$B all)"
    exit 1
  fi
done

out=$(mktemp "${TMPDIR:-/tmp}/fence-torture-test.XXXXXX")
trap 'rm -f "$out" "$out.err" "$out.hist" "$out.chk"' EXIT
secs=${TORTURE_QUICK_SECONDS:-20}
TORTURE_HISTORY=$out.hist TORTURE_SECONDS=$secs scripts/torture "$B" >"$out" 2>"$out.err"
rc=$?
sed 's/^/# /' "$out.err"
sed 's/^/# /' "$out"
fig() { sed -n "s/^torture $1 \([0-9][0-9]*\)$/\1/p" "$out"; }

if [ $rc -eq 0 ] || [ $rc -eq 1 ]; then
  ok "torture: a ${secs}-second run set up its servers, ran and checked both stores (exit $rc)"
else
  nok "torture: the run could not be set up or failed (exit $rc)"
  exit 1
fi

v=$(fig violations)
pgv=$(grep -c '^torture violation pg:' "$out.err")
sqv=$(grep -c '^torture violation sq:' "$out.err")
[ "$rc" -eq 0 ] && [ "${v:-x}" = 0 ]
if [ $? -eq 0 ]; then
  ok "torture: no lost or doubled update (violations 0; $(fig increments_pg) increments on PostgreSQL, $(fig increments_sqlite) on SQLite)"
else
  nok "torture: $v violation(s)"
fi
if [ "$pgv" -eq 0 ]; then ok "torture: PostgreSQL: counter == committed increments, values exactly 1..counter"
else nok "torture: PostgreSQL: $pgv violation line(s): $(grep '^torture violation pg:' "$out.err" | head -3 | tr '\n' ' ')"; fi
if [ "$sqv" -eq 0 ]; then ok "torture: SQLite: counter == committed increments, values exactly 1..counter"
else nok "torture: SQLite: $sqv violation line(s): $(grep '^torture violation sq:' "$out.err" | head -3 | tr '\n' ' ')"; fi

ip=$(fig increments_pg); is=$(fig increments_sqlite)
if [ "${ip:-0}" -gt 0 ] && [ "${is:-0}" -gt 0 ]; then
  ok "torture: the workers made progress on both stores ($ip / $is increments)"
else
  nok "torture: no progress (increments_pg ${ip:-?}, increments_sqlite ${is:-?})"
fi

missing=''
for k in sigstop sigkill redis_restart_persist redis_restart_nopersist failover failover_skewed partition pg_restart; do
  n=$(fig "faults_$k")
  [ "${n:-0}" -ge 1 ] || missing="$missing $k"
done
if [ -z "$missing" ]; then
  ok "torture: every fault kind was injected (sigstop $(fig faults_sigstop), sigkill $(fig faults_sigkill), redis_restart $(fig faults_redis_restart), failover $(fig faults_failover), failover_skewed $(fig faults_failover_skewed), partition $(fig faults_partition), pg_restart $(fig faults_pg_restart))"
else
  nok "torture: fault kinds not injected:$missing"
fi


# The history: every attempt and each store's commits, through the checker.
/usr/bin/python3 tests/torture/histcheck.py "$out.hist" >"$out.chk" 2>&1
hrc=$?
hsum=$(grep '^histcheck: ' "$out.chk")
ncommit=$(grep -c '^commit	' "$out.hist" 2>/dev/null)
natt=$(grep -c '^attempt	' "$out.hist" 2>/dev/null)
if [ $hrc -eq 0 ] && [ "${ncommit:-0}" -eq $(( ${ip:-0} + ${is:-0} )) ] && [ "${natt:-0}" -gt "${ncommit:-0}" ]; then
  ok "torture: the run's history passes histcheck.py ($natt attempts, $ncommit commits; $hsum)"
else
  nok "torture: history check exit $hrc ($natt attempts, $ncommit commits for $ip + $is increments): $(grep -E '^(violation|histcheck)' "$out.chk" | head -5 | tr '\n' ' ')"
  grep -E '^(violation|  line)' "$out.chk" | head -40 | sed 's/^/# /'
fi
hv=$(fig history_violations)
if [ "${hv:-x}" = 0 ]; then ok "torture: the run counted the checker's verdict (history_violations 0)"
else nok "torture: history_violations ${hv:-missing}"; fi

e=$(fig store_errors)
if [ "${e:-1}" = 0 ]; then
  ok "torture: every failed store transaction was a fence rejection or an unreachable store"
else
  nok "torture: ${e:-?} unexpected store error(s) (see the run's output above)"
fi

[ $fails -eq 0 ]
