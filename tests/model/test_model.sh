#!/usr/bin/env bash
# test_model.sh -- the Promela model of the token rule (tests/model/fence.pml,
# docs/model.md), verified by spin in every configuration below.  Each run:
# spin -a with the configuration's -D options, gcc on pan.c (-DSAFETY: the
# property is an assert), ./pan, and then the EXACT outcome is asserted:
# - "holds": errors: 0, a full state-space search (no bitstate, no "max
#   search depth too small", depth reached below -m), and every statement
#   of the model reached except world's end (so a model that can no longer
#   fail over or admit a write does not pass as "proved");
# - "violates ASSERT": errors: 1 on that very assertion, and `spin -t`
#   replays the trail: its printed steps show the violation themselves (an
#   older holder's write admitted after a newer holder's, or a token not
#   above the one before it), checked here from the replay's text.
# Then the store's check itself (store.pml, the inline fence.pml calls)
# against every "mark" row of tests/common/rule_cases.tsv: a generated
# harness per row runs store_rule on the row's mark, holders and token and
# asserts the row's outcome (spin's simulation: the harness has one path).
# Prints TAP lines; one "# ..." line per run with its states and time.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
n=0; fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; fails=$((fails + 1)); }

for tool in spin gcc; do
  if ! command -v "$tool" > /dev/null; then
    nok "$tool is installed (scripts/install-deps)"
    exit 1
  fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fence-model.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
DEPTH=10000 # pan -m: far above the deepest path of any configuration (~60)

# run NAME OPTS...: verify fence.pml with the -D options OPTS in $tmp/NAME
# (fence.pml, pan, pan.out, the trail); sets $dir.
run() {
  local name=$1; shift
  dir=$tmp/$name
  mkdir -p "$dir"
  cp -p "$here/fence.pml" "$here/store.pml" "$dir/"
  local start secs
  start=$(date +%s.%N)
  (cd "$dir" && spin "$@" -a fence.pml > spin.out 2>&1 &&
     gcc -O0 -DSAFETY -o pan pan.c > gcc.out 2>&1 &&
     ./pan -m$DEPTH -w20 > pan.out 2>&1)
  local rc=$?
  secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e-s}')
  echo "# $name ($*): $(grep -o '[0-9]* states, stored' "$dir/pan.out" 2>/dev/null || echo 'no states'),"\
       "$(grep -o 'depth reached [0-9]*' "$dir/pan.out" 2>/dev/null),"\
       "search $(grep -o 'elapsed time [0-9.e+-]*' "$dir/pan.out" 2>/dev/null | grep -o '[0-9.e+-]*$')s, ${secs}s in all (spin + gcc + pan)"
  return $rc
}

# holds NAME WHAT OPTS...: the property holds, by a complete search.
holds() {
  local name=$1 what=$2; shift 2
  if ! run "$name" "$@"; then
    nok "$what: spin, gcc and pan ran (see $name)"; sed 's/^/#   /' "$dir"/*.out; return
  fi
  local out=$dir/pan.out why=""
  grep -q '^Full statespace search' "$out" || why="not a full state-space search"
  grep -q 'errors: 0$' "$out" || why="$why; $(grep -o 'errors: [0-9]*' "$out" || echo 'no errors line')"
  grep -q 'max search depth too small' "$out" && why="$why; max search depth too small"
  local depth
  depth=$(grep -o 'depth reached [0-9]*' "$out" | grep -o '[0-9]*$')
  [ -n "$depth" ] && [ "$depth" -lt "$DEPTH" ] || why="$why; depth ${depth:-?} not below $DEPTH"
  # pan lists the statements the search never reached: only world's end.
  local unreached
  unreached=$(grep -E '^[[:space:]]+fence\.pml:[0-9]+, state' "$out")
  # (pan lists them only after a search without errors)
  if [ -z "$why" ] && { [ "$(printf '%s\n' "$unreached" | grep -c .)" != 1 ] ||
                        ! grep -q -- '"-end-"' <<< "$unreached"; }; then
    why="$why; unreached: $(tr '\n\t' '  ' <<< "$unreached")"
  fi
  if [ -z "$why" ]; then
    ok "$what: holds (errors: 0, complete search, every statement reached)"
  else
    nok "$what: expected to hold, but:${why#;}"
    sed 's/^/#   /' "$out"
  fi
}

# violates NAME ASSERT WHAT OPTS...: spin finds a violation of assertion
# ASSERT ("newest": the store property; "strict": token order) and the
# replayed trail shows it.
violates() {
  local name=$1 which=$2 what=$3; shift 3
  run "$name" "$@"
  local out=$dir/pan.out text
  case $which in
    newest) text='k>=newest' ;;
    strict) text='t>top' ;;
  esac
  if ! grep -q "assertion violated ($text)" "$out" || ! grep -q 'errors: 1$' "$out" ||
     [ ! -f "$dir/fence.pml.trail" ]; then
    nok "$what: expected spin to find assertion ($text) violated, got: $(grep -o 'errors: [0-9]*' "$out" || echo 'no run')"
    sed 's/^/#   /' "$dir"/*.out
    return
  fi
  (cd "$dir" && spin "$@" -t fence.pml > replay.out 2>&1)
  local steps=$dir/steps
  grep -E '^[[:space:]]*(acquire|write|replication|raise|failover|rejoin|the lease):? ' "$dir/replay.out" |
    sed 's/^[[:space:]]*//' > "$steps"
  # The replay's own text must show it: for "newest", an admitted write of
  # holder k after an admitted write of a holder above k; for "strict", a
  # token not above the highest one acquired before it.
  local shown
  case $which in
    newest) shown=$(awk '/^write: holder [0-9]+ token [0-9]+ admitted/ {
                           if ($3 + 0 < top) { print "yes"; exit } if ($3 + 0 > top) top = $3 + 0 }' "$steps") ;;
    strict) shown=$(awk '/^acquire: holder/ { t = $6 + 0; if (seen && t <= top) { print "yes"; exit }
                                              seen = 1; if (t > top) top = t }' "$steps") ;;
  esac
  if grep -q "assertion violated" "$dir/replay.out" && [ "$shown" = yes ]; then
    ok "$what: violation found, the trail replays it ($(grep -o 'depth [0-9]*' "$out" | head -1))"
    sed 's/^/#   /' "$steps"
  else
    nok "$what: the trail did not replay the violation"
    sed 's/^/#   /' "$dir/replay.out"
  fi
}

# The configurations (J = 2 ticks, 3 holders, 4 ticks of time unless
# given; see fence.pml for what each option means).  Clocks: the promoted
# replica's clock is any offset in [-BEHIND, +AHEAD] from the master's.

# (a) the new rule under its assumptions.
holds new_skew_J "new rule, clock behind by up to J, any replication loss: tokens strictly increase" \
  -DRULE=1 -DBEHIND=2 -DAHEAD=2 -DSTRICT=1
holds new_skew_J1 "new rule, clock behind by up to J + 1 tick: the store property still holds" \
  -DRULE=1 -DBEHIND=3 -DAHEAD=2
violates new_skew_J1_strict strict "new rule, clock behind by J + 1 tick: a token repeats (the holder check refuses it)" \
  -DRULE=1 -DBEHIND=3 -DSTRICT=1
holds new_lag_J "new rule, replica lag within J, counter raised past the clock by J + 3, clock behind by up to J + 3: tokens strictly increase" \
  -DRULE=1 -DRAISE=5 -DLAGMAX=2 -DBEHIND=5 -DAHEAD=2 -DSTRICT=1

# (b) dense tokens.
violates dense newest "dense tokens, replica lag: an older holder's write is admitted after a newer one's" \
  -DRULE=0

# (c) where the rule cannot help.
violates new_nocounter_behind newest "new rule, the replica never got the counter, its clock behind by J + 2" \
  -DRULE=1 -DNOREPL=1 -DBEHIND=4
violates new_lost_lead newest "new rule, a counter raised past the clock by J + 3 and lost at the failover" \
  -DRULE=1 -DRAISE=5

# (d) the case the new rule fixes: a counter leading the clock by more than
# J, replica lag within J, no clock skew.
violates old_lead_lag_J newest "old rule, counter raised past the clock by J + 3, replica lag within J" \
  -DRULE=2 -DRAISE=5 -DLAGMAX=2
holds new_lead_lag_J "new rule, the same scenario: tokens strictly increase" \
  -DRULE=1 -DRAISE=5 -DLAGMAX=2 -DSTRICT=1
holds old_skew_J "old rule, clock behind by up to J, no raise: tokens strictly increase (the old rule was right there)" \
  -DRULE=2 -DBEHIND=2 -DAHEAD=2 -DSTRICT=1

# (e) two failovers: the old master (cut off, not restarted) comes back as
# the new master's replica, resyncs, and is promoted again with its run_id
# unchanged, so the counter's run can match it although its data came from
# another incarnation: no jump.  FRESHID is the fix acquire.lua has made
# (the identity "<run_id>:<master_replid>", new at every promotion).
violates rejoin_clock newest "previous identity (run_id alone): two failovers, the old master back with its run_id: no skew, no raise, yet a token goes back" \
  -DRULE=1 -DREJOIN=1
violates rejoin_lag_J newest "previous identity (run_id alone): two failovers, the old master back with its run_id: replica lag 2 < J = 3, a raised counter, no skew" \
  -DRULE=1 -DREJOIN=1 -DJ=3 -DRAISE=6 -DLAGMAX=2
holds rejoin_fresh_clock "two failovers, a new identity at every promotion: no skew, tokens strictly increase" \
  -DRULE=1 -DREJOIN=1 -DFRESHID=1 -DSTRICT=1
holds rejoin_fresh_lag_J "two failovers, a new identity at every promotion: lag within J, raise, clock behind by up to J + 3" \
  -DRULE=1 -DREJOIN=1 -DFRESHID=1 -DRAISE=5 -DLAGMAX=2 -DBEHIND=5 -DAHEAD=2 -DSTRICT=1

# (f') consensus tokens (etcd): the same failovers, clocks skewed both ways
# past the jump, a raise, the old leader back -- no clock assumption, and
# tokens strictly increase.
holds consensus_skew "consensus tokens (etcd's revision), a failover to a member whose clock is 5 behind or 2 ahead, a raise, tokens strictly increase" \
  -DRULE=3 -DBEHIND=5 -DAHEAD=2 -DRAISE=5 -DSTRICT=1
holds consensus_rejoin "consensus tokens, two failovers (the old leader back), clocks 4 behind to 4 ahead: tokens strictly increase" \
  -DRULE=3 -DREJOIN=1 -DBEHIND=4 -DAHEAD=4 -DSTRICT=1

# (f) clock_behind_limit_ms: the check compares the clock with the t of
# the counter the new master has, not with the lost tokens' times, so it
# is no guarantee.
violates limit_has_t newest "new rule, clock_behind_limit of 1 tick, clock behind by J + 2, the replica has a token of the old master's (and its t), 6 ticks" \
  -DRULE=1 -DBEHIND=4 -DLIMIT=1 -DHASCOPY=1 -DTMAX=6
violates limit_rejoin newest "new rule, clock_behind_limit of 1 tick, the two failovers of rejoin_clock" \
  -DRULE=1 -DREJOIN=1 -DLIMIT=1

# (g) the store's check against the one table of cases.  The rule only
# compares the two tokens, so the harness gives it the row's tokens as the
# smallest numbers in the same order (a mark of 0, none yet, stays 0): the
# model's integers are bytes, the table's tokens reach 2^63-1.  Holders A
# and B are holders 1 and 2, "-" is none (0), as in fence.pml.  Each
# harness asserts the row's outcome and prints the one store_rule gave.
cases=$here/../common/rule_cases.tsv
holder_num() { case $1 in A) echo 1 ;; B) echo 2 ;; *) echo 0 ;; esac; }
rows=0
while IFS=$'\t' read -r kind name mark mark_holder token holder outcome; do
  [ "$kind" = mark ] || continue
  rows=$((rows + 1))
  if [ "$mark" = 0 ]; then m=0; t=1
  elif [ "$token" -gt "$mark" ]; then m=1; t=2
  elif [ "$token" -eq "$mark" ]; then m=1; t=1
  else m=2; t=1; fi
  dir=$tmp/case_$name
  mkdir -p "$dir"
  cp -p "$here/store.pml" "$dir/"
  {
    echo '#include "store.pml"'
    echo 'init {'
    echo '  byte out;'
    echo "  store_rule($m, $(holder_num "$mark_holder"), $t, $(holder_num "$holder"), out);"
    echo '  if'
    for o in raise admit older repeat; do
      echo "  :: out == ST_$(echo $o | tr a-z A-Z) -> printf(\"outcome $o\\n\")"
    done
    echo '  fi;'
    echo "  assert(out == ST_$(echo "$outcome" | tr a-z A-Z))"
    echo '}'
  } > "$dir/harness.pml"
  got=$(cd "$dir" && spin harness.pml 2>&1)
  rc=$?
  if [ $rc -eq 0 ] && ! grep -q 'assertion violated' <<< "$got" &&
     grep -q "^ *outcome $outcome\$" <<< "$got"; then
    ok "store check, case $name: mark $mark of holder $mark_holder, token $token of holder $holder: $outcome"
  else
    nok "store check, case $name: expected $outcome"
    sed 's/^/#   /' <<< "$got"
  fi
done < "$cases"
[ "$rows" -gt 0 ] || nok "$cases has mark rows (is it readable?)"

echo "1..$n"
[ "$fails" -eq 0 ]
