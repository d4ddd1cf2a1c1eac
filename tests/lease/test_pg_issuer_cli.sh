#!/usr/bin/env bash
# test_pg_issuer_cli.sh -- `fence run`, `fence status` and `fence token` with
# the PostgreSQL issuer (--url postgresql://...) on the test PostgreSQL: the
# exit codes (0, 75 held and wait ran out, 76 lost while the command ran:
# the row expired or taken behind its back, 69 unreachable), the wait woken
# by the release, three loops of runs racing for one lease (never two
# inside, tokens rising), status and token with --raise, and the URL's
# lone user@ taken for a user name (no password warning).  Run by
# scripts/run-suites inside scripts/with-servers.
. "$(dirname "$0")/../cli/cli_common.sh"

if [ -z "${FENCE_TEST_PG_PORT:-}" ] || [ -z "${FENCE_TEST_PG_CONNINFO:-}" ]; then
  nok "setup: FENCE_TEST_PG_PORT / FENCE_TEST_PG_CONNINFO not set (run under scripts/with-servers --pg)"
  exit 1
fi
P=postgresql://postgres@127.0.0.1:$FENCE_TEST_PG_PORT/postgres
pq() { psql -X -q -At -v ON_ERROR_STOP=1 "$FENCE_TEST_PG_CONNINFO" "$@"; }
pq -f "$B/sql/postgres/fence.sql" > /dev/null 2>&1 || { nok "setup: fence.sql would not install"; exit 1; }
held() { [ "$(pq -c "SELECT held FROM fence.lease_inspect('$1')")" = t ]; }
not_held() { ! held "$1"; }
now() { date +%s.%N; }
elapsed_lt() { awk -v a="$1" -v b="$2" -v m="$3" 'BEGIN{exit !(b - a < m)}'; }
not_alive() { ! alive "$1"; }

# ---- run, tokens, held ----------------------------------------------------------------
n=$(name)
"$F" run --url "$P" --ttl 300ms "$n" -- sh -c 'echo "$FENCE_TOKEN $FENCE_HOLDER" > "$1"' sh "$T/e1" 2> "$T/err1"; rc1=$?
"$F" run --url "$P" --ttl 300ms "$n" -- sh -c 'echo "$FENCE_TOKEN $FENCE_HOLDER" > "$1"' sh "$T/e2"; rc2=$?
read -r t1 h1 < "$T/e1"; read -r t2 h2 < "$T/e2"
check "fence run --url postgresql://: exit 0, FENCE_TOKEN and FENCE_HOLDER set" \
  bash -c "[ $rc1 = 0 ] && [ $rc2 = 0 ] && [[ '$h1' =~ ^[0-9a-f]{32}\$ ]] && [ '$h1' != '$h2' ]"
check "tokens rise across runs ($t1 < $t2)" test "$t1" -ge 1 -a "$t2" -gt "$t1"
check "a lone user@ in the URL is no password: no warning" test ! -s "$T/err1"
check "the lease is released after the command (the row free)" not_held "$n"
check "fence token prints the last token" test "$("$F" token --url "$P" "$n")" = "$t2"
check "fence token --raise 1000 raises the counter" test "$("$F" token --url "$P" --raise 1000 "$n")" = 1000
"$F" run --url "$P" "$n" -- sh -c 'echo "$FENCE_TOKEN" > "$1"' sh "$T/e3"
check "the next run's token is above the raise ($(cat "$T/e3"))" test "$(cat "$T/e3")" = 1001

"$F" run --url "$P" --ttl 2s "$n" -- sh -c 'touch "$1"; sleep 1.5' sh "$T/in" &
fp=$!; BG+=("$fp")
wait_until 5 test -e "$T/in"
"$F" status --url "$P" --json "$n" > "$T/held.json"
check "status --json: issuer postgresql, held, the holder's token" \
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(not (j["issuer"] == "postgresql" and j["held"] and j["holder_token"] == 1002 and 0 < j["ttl_ms"] <= 2000))' "$T/held.json"
"$F" run --url "$P" "$n" -- true 2> "$T/err"; rc=$?
check "exit 75 while another fence run holds the lease" \
  bash -c "[ $rc = 75 ] && grep -q 'held by another owner' '$T/err'"
"$F" run --url "$P" --wait 200ms "$n" -- true 2> /dev/null; rc=$?
check "exit 75 when --wait 200ms runs out" test "$rc" = 75
"$F" run --url "$P" --wait 5s "$n" -- true; rc=$?; e=$(now)
wait "$fp"; rel=$(now)
check "--wait 5s gets it once the holder is done (rc $rc)" test "$rc" = 0
check "... promptly after the release (woken by NOTIFY, not polling its TTL)" elapsed_lt "$rel" "$e" 0.5

# ---- lost while the command runs ---------------------------------------------------------
for how in expired taken; do
  n=$(name)
  "$F" run --url "$P" --ttl 300ms "$n" -- sh -c 'echo $$ > "$1.tmp" && mv "$1.tmp" "$1"; exec sleep 30' sh "$T/lost_$how" 2> "$T/err" &
  fp=$!; BG+=("$fp")
  wait_until 5 file_has "$T/lost_$how"
  cpid=$(cat "$T/lost_$how")
  if [ "$how" = expired ]; then
    pq -c "UPDATE fence.leases SET expires = clock_timestamp() - interval '1 ms' WHERE name = '$n'"
  else
    pq -c "UPDATE fence.leases SET holder = 'ffffffffffffffffffffffffffffffff', counter = counter + 1, token = counter + 1 WHERE name = '$n'"
  fi
  s=$(now); wait "$fp"; rc=$?; e=$(now)
  check "the row $how behind fence's back: exit 76, saying the renewal was refused" \
    bash -c "[ $rc = 76 ] && grep -q 'its renewal was refused' '$T/err'"
  check "... the command is gone" not_alive "$cpid"
  check "... within a second" elapsed_lt "$s" "$e" 1
done

# ---- three loops racing ---------------------------------------------------------------
n=$(name)
: > "$T/race.log"
loop() {
  local i
  for i in $(seq 1 8); do
    "$F" run --url "$P" --ttl 2s --wait 20s "$n" -- \
      sh -c 'echo "in $FENCE_TOKEN" >> "$1"; sleep 0.02; echo "out $FENCE_TOKEN" >> "$1"' sh "$T/race.log" || echo "rc $?" >> "$T/race.log"
  done
}
loop & l1=$!; loop & l2=$!; loop & l3=$!
wait "$l1" "$l2" "$l3"
check "three loops x 8 runs: every run in, out, never two inside, tokens rising" \
  awk 'BEGIN{inside=0; last=0; n=0}
       $1 == "rc" {exit 1}
       $1 == "in" {if (inside || $2 <= last) exit 1; inside=$2; last=$2; n++}
       $1 == "out" {if ($2 != inside) exit 1; inside=0}
       END{exit !(n == 24 && inside == 0)}' "$T/race.log"

# ---- unreachable ----------------------------------------------------------------------
"$F" run --url postgresql://postgres@127.0.0.1:1/postgres "$(name)" -- touch "$T/ran" 2> "$T/err"; rc=$?
check "a closed port: exit 69, the command never runs" bash -c "[ $rc = 69 ] && [ ! -e '$T/ran' ]"
"$F" run --url "$P?fence_wait=sometimes" "$(name)" -- true 2> "$T/err"; rc=$?
check "a bad fence_wait: exit 64 naming it" bash -c "[ $rc = 64 ] && grep -q 'fence_wait=sometimes' '$T/err'"

echo "# $pass passed, $fail failed"
[ "$fail" -eq 0 ]
