#!/usr/bin/env bash
# test_race.sh -- the paused-holder race, reproduced with real processes and
# SIGSTOP/SIGCONT against Redis plus each store (SQLite, PostgreSQL, the C
# gate), and the invoice-job and retrofit examples against PostgreSQL.
#
# For each store: without fencing the stale write must LAND (the race is
# real, not assumed); with fencing it must be REJECTED and the newer
# holder's data must be what the store holds.  Asserted on the RESULT lines
# of examples/paused_holder, which reads the final row back from the store.
#
# Needs scripts/with-servers --redis --pg and FENCE_BUILD (the build dir);
# a missing server variable or binary fails loudly.
set -uo pipefail
cd "$(dirname "$0")/../.."

B=${FENCE_BUILD:-}
fails=0
ok() { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; fails=$((fails + 1)); }
check() { # check DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then ok "$what"; else not_ok "$what"; fi
}
# COND1 && COND2; expect $? DESCRIPTION -- $? first: it is expanded before
# any $(...) in the description can change it.
expect() {
  if [ "$1" -eq 0 ]; then ok "$2"; else not_ok "$2"; fi
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fence-test-race.XXXXXX")
bg_pids=()
cleanup() {
  local p
  for p in "${bg_pids[@]:-}"; do
    [ -n "$p" ] && kill -KILL "$p" 2>/dev/null
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

# ---- environment: fail loudly, never skip -----------------------------
missing=0
for v in FENCE_BUILD FENCE_TEST_REDIS_URL FENCE_TEST_REDIS_CTL FENCE_TEST_PG_CONNINFO; do
  if [ -z "${!v:-}" ]; then
    not_ok "environment: $v is not set (run under scripts/with-servers --redis --pg)"
    missing=1
  fi
done
for b in paused_holder invoice_job retrofit_lock_version; do
  if [ -n "$B" ] && [ ! -x "$B/examples/$b" ]; then
    not_ok "binary $B/examples/$b is missing (make $B/examples/$b)"
    missing=1
  fi
done
command -v psql >/dev/null || { not_ok "psql not found"; missing=1; }
if [ $missing -ne 0 ]; then
  echo "test_race: cannot run" >&2
  exit 1
fi
PH=$B/examples/paused_holder
redis_cli() { $FENCE_TEST_REDIS_CTL cli "$@"; }
pg() { psql "$FENCE_TEST_PG_CONNINFO" -X -q -At -v ON_ERROR_STOP=1 "$@"; }

# field NAME LINE: the value of NAME=... in a RESULT line
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }

# ---- the race, on each store ------------------------------------------
for store in sqlite postgres gate; do
  out=$tmp/ph-$store.out
  start=$(date +%s%N)
  "$PH" --store "$store" >"$out" 2>&1
  rc=$?
  secs=$(( ($(date +%s%N) - start) / 1000000 ))
  check "$store: paused_holder exits 0 (both runs as predicted; ${secs} ms)" [ "$rc" -eq 0 ]
  off=$(grep "^RESULT store=$store fencing=off " "$out")
  on=$(grep "^RESULT store=$store fencing=on " "$out")
  check "$store: without fencing the stale write lands (stale_write=$(field stale_write "$off"))" \
    [ "$(field stale_write "$off")" = landed ]
  [ "$(field final_writer "$off")" = A ] && [ "$(field final_balance "$off")" = 150 ]
  expect $? "$store: without fencing A's stale data is what is left (final_writer=$(field final_writer "$off"), balance $(field final_balance "$off"))"
  check "$store: with fencing the stale write is rejected (stale_write=$(field stale_write "$on"))" \
    [ "$(field stale_write "$on")" = rejected ]
  [ "$(field final_writer "$on")" = B ] && [ "$(field final_balance "$on")" = 200 ]
  expect $? "$store: with fencing B's data is intact (final_writer=$(field final_writer "$on"), balance $(field final_balance "$on"))"
  ta=$(field token_a "$on"); tb=$(field token_b "$on")
  check "$store: the rejection names both tokens ($ta < $tb)" \
    grep -q "REJECTED (stale: $ta < $tb)" "$out"
  check "$store: A was really stopped and the lease really expired in Redis meanwhile" \
    [ "$(grep -c -e 'paused (SIGSTOP)' -e 'the lease expired in Redis while A was paused' "$out")" -eq 4 ]
  if [ $rc -ne 0 ] || grep -q UNEXPECTED "$out"; then sed 's/^/#   /' "$out"; fi
done

# ---- no stopped child left behind when the parent is killed ------------
# A long TTL keeps A stopped for seconds; kill the parent meanwhile and A
# must be gone (SIGCONT+SIGKILL on SIGTERM; PDEATHSIG on SIGKILL).
for sig in TERM KILL; do
  out=$tmp/kill-$sig.out
  TMPDIR=$tmp "$PH" --store sqlite --fencing on --ttl 8000 >"$out" 2>&1 &
  ph=$!
  bg_pids+=("$ph")
  apid='' stat_before=''
  for _ in $(seq 1 500); do
    [ -z "$apid" ] && apid=$(sed -n 's/^A (pid \([0-9]*\)) acquired.*/\1/p' "$out")
    [ -n "$apid" ] && stat_before=$(ps -o stat= -p "$apid" 2>/dev/null | tr -d ' ')
    [ "${stat_before:0:1}" = T ] && break
    sleep 0.01
  done
  kill -"$sig" "$ph"
  wait "$ph" 2>/dev/null
  gone=0
  for _ in $(seq 1 200); do
    if ! kill -0 "${apid:-0}" 2>/dev/null; then gone=1; break; fi
    sleep 0.01
  done
  [ -n "$apid" ] && [ "${stat_before:0:1}" = T ] && [ $gone -eq 1 ]
  expect $? "SIG$sig to paused_holder while A (pid ${apid:-?}, state ${stat_before:-?}) is stopped: A is gone"
done

# ---- the invoice job ----------------------------------------------------
suffix=$$_$RANDOM
table=invoices_test_$suffix
lease=invoice-job-test-$suffix
out=$tmp/invoice.out
"$B/examples/invoice_job" --ttl 300 --step-ms 120 --invoices 6 --lease "$lease" --table "$table" \
  >"$out" 2>&1
rc=$?
res=$(grep '^RESULT ' "$out")
[ $rc -eq 0 ] && [ "$(field status "$res")" = done ] && [ "$(field invoices "$res")" = 6 ]
expect $? "invoice_job: exits 0 and reports done (exit $rc: $res)"
[ "$(field renewals "$res")" -ge 3 ] && [ "$(field lost "$res")" = no ]
expect $? "invoice_job: 0.7 s of work on a 300 ms lease: the heartbeat renewed it ($(field renewals "$res") times) and it was never lost"
tok=$(field token "$res")
rows=$(pg -c "SELECT count(*) FROM $table WHERE fence_token = ${tok:-0}" 2>&1)
check "invoice_job: 6 invoices in PostgreSQL, each stamped with token $tok (got $rows)" [ "$rows" = 6 ]
mark=$(pg -c "SELECT fence.mark('$lease')" 2>&1)
check "invoice_job: the resource's high-water mark is the job's token ($mark)" [ "$mark" = "$tok" ]
[ $rc -eq 0 ] || sed 's/^/#   /' "$out"

# The lost-lease callback stops the job: delete its owner key mid-run.
out=$tmp/invoice-lost.out
"$B/examples/invoice_job" --ttl 300 --step-ms 150 --invoices 40 --lease "$lease-lost" \
  --table "$table" >"$out" 2>&1 &
job=$!
bg_pids+=("$job")
for _ in $(seq 1 300); do grep -q '^invoice 2/' "$out" && break; sleep 0.01; done
redis_cli DEL "fence:{$lease-lost}" >/dev/null
for _ in $(seq 1 500); do kill -0 "$job" 2>/dev/null || break; sleep 0.01; done
wait "$job"
rc=$?
res=$(grep '^RESULT ' "$out")
n=$(field invoices "$res")
[ $rc -eq 3 ] && [ "$(field status "$res")" = stopped ] && [ "$(field lost "$res")" = yes ] && [ "${n:-40}" -lt 40 ]
expect $? "invoice_job: a lost lease stops the job (exit $rc: $res)"

# A scheduled run skips when another instance holds the lease.
redis_cli SET "fence:{$lease-busy}" "someone-else:1" PX 5000 >/dev/null
out=$tmp/invoice-busy.out
"$B/examples/invoice_job" --lease "$lease-busy" --table "$table" --invoices 1 >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q '^RESULT status=skipped ' "$out"
expect $? "invoice_job: skips the run when another instance holds the lease (exit $rc)"
pg -c "DROP TABLE IF EXISTS $table" >/dev/null 2>&1

# ---- retrofitting lock_version ------------------------------------------
out=$tmp/retrofit.out
"$B/examples/retrofit_lock_version" --table "retrofit_test_$suffix" >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q '^RESULT retrofit=ok .* failed=0$' "$out"
expect $? "retrofit_lock_version: every step as described (exit $rc: $(grep '^RESULT ' "$out"))"
check "retrofit_lock_version: protect('orders', 'lock_version') is refused (22023): fence never takes over the counter" \
  grep -q "SELECT fence.protect('orders', 'lock_version'): refused, SQLSTATE 22023" "$out"
check "retrofit_lock_version: the old optimistic UPDATE works with a token, lock_version = old+1 beside fence_token" \
  grep -q '^ *[0-9]* -- old+1, the application.s counter; fence_token [0-9]*$' "$out"
check "retrofit_lock_version: a stale holder with the current lock_version is rejected" \
  grep -q 'current one) and saves it with token [0-9]*: FENCE_STALE ([0-9]* < [0-9]*)$' "$out"
check "retrofit_lock_version: a stale holder's blind write is rejected" \
  grep -q '^ *token [0-9]*: FENCE_STALE ([0-9]* < [0-9]*)$' "$out"
[ $rc -eq 0 ] || sed 's/^/#   /' "$out"

[ $fails -eq 0 ]
