#!/usr/bin/env bash
# test_net_drop.sh -- packet loss between the holders and Redis.  Four
# holders (tests/net/netholder cycle: two in A, two in B) take turns on one
# lease -- acquire, hold 700 ms (TTL 600 ms: renewed every 200 ms), release -- for 6 s; for 4 s of that, 30%
# of the packets between A or B and Redis are dropped, each way.  Renewals,
# acquires and releases then time out, retransmit, get lost; leases are
# lost.  What must hold all the same: at no moment do two holders believe
# they hold the lease (each logs the first and the last moment it saw
# fence_lease_valid_ms() > 0; no two such intervals overlap), and the
# tokens of successive holders increase.
#   FENCE_SUITES=test_net_drop scripts/run-suites build   (as root)
. "$(dirname "$0")/netns.sh"

TTL=600
HOLD=700
SECONDS_RUN=6
P=0.3
net_up
net_redis "$T/redis" 6379
URL=redis://$RIP:6379
LOG=$T/drop.log

pids=()
for ns in "$NS_A" "$NS_A" "$NS_B" "$NS_B"; do
  net_bg "$ns" "$T/cycle.${#pids[@]}" "$NH" cycle "$URL" drop-lease "$TTL" "$HOLD" "$SECONDS_RUN" "$LOG"
  pids+=("$BG_PID")
done
sleep 0.8
d0=$(now)
net_drop "$NS_A" "$P" && net_drop "$NS_B" "$P" || nok "iptables refused the drop rule"
sleep 4
net_heal "$NS_A"; net_heal "$NS_B"
d1=$(now)
wait "${pids[@]}"
for f in "$T"/cycle.*; do sed 's/^/# holder: /' "$f"; done

# One line per belief interval: IN OUT PID TOKEN HOW, in order of IN.
awk '$1 == "in" { start[$3 " " $4] = $2 }
     $1 == "out" { k = $3 " " $4; print start[k], $2, $3, $4, $5; delete start[k] }
     END { for (k in start) print start[k], "open", k, "none" }' "$LOG" | sort -n > "$T/intervals"
n=$(wc -l < "$T/intervals")
during=$(awk -v a="$d0" -v b="$d1" '$1 >= a && $1 <= b' "$T/intervals" | wc -l)
lost=$(awk '$5 != "released"' "$T/intervals" | wc -l)
echo "# $n holdings ($during begun under the ${P} drop rate), $lost of them ended lost or expired rather than released"

# Overlaps: an interval that begins before the latest end so far.
overlap=$(awk '$2 == "open" { print "open:", $0; exit }
  NR > 1 && $1 <= maxout { print $0, "begins before", maxout, "(" who ")"; exit }
  { if (NR == 1 || $2 > maxout) { maxout = $2; who = $3 " token " $4 } }' "$T/intervals")
gap=$(awk 'NR > 1 { g = $1 - prev; if (min == "" || g < min) min = g } { prev = $2 } END { printf "%.1f", min }' "$T/intervals")
# After a holding that ended lost, the next holder waits for the key to
# expire on Redis: the closest such handover.
lgap=$(awk 'NR > 1 && how != "released" { g = $1 - prev; if (min == "" || g < min) min = g }
  { prev = $2; how = $5 } END { print (min == "" ? "none" : sprintf("%.1f ms", min)) }' "$T/intervals")
echo "# closest handover after a holding that ended lost or expired: $lgap"
if [ "$n" -ge 2 ] && [ -z "$overlap" ]; then
  ok "drop ${P}: no two holders believed they held the lease at once ($n holdings; the closest handover: ${gap} ms from one's last valid moment to the next one's first)"
else
  nok "drop ${P}: two holders at once (or too few holdings, $n): $overlap"
fi

down=$(awk 'NR > 1 && $4 <= prev { print "token", $4, "after", prev; exit } { prev = $4 }' "$T/intervals")
if [ "$n" -ge 2 ] && [ -z "$down" ]; then
  ok "drop ${P}: the tokens of successive holders increase ($n holdings)"
else
  nok "drop ${P}: tokens out of order: $down"
fi

if [ "$during" -ge 1 ] && [ "$n" -ge 4 ]; then
  ok "drop ${P}: the holders made progress: $n holdings, $during begun under the drop rate"
else
  nok "drop ${P}: too little progress to mean anything: $n holdings, $during under the drop rate"
fi
net_done
