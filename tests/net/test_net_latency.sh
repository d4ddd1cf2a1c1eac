#!/usr/bin/env bash
# test_net_latency.sh -- latency between a holder and Redis above the
# renewal interval.  TTL 600 ms, renewed every 200 ms: the validity a
# renewal gives is V = 600 - (1% + 2 ms) = 592 ms from its sending.  The
# heartbeat has one round trip in flight at a time, and a pass never waits
# past the current validity, so (RTT: the round-trip time):
#   RTT <= 200 ms          renewals keep pace: the lease survives;
#   200 < RTT < V/2 (296)  each renewal goes out when the last reply came,
#                          and its reply beats the validity the last one
#                          gave: the lease survives, renewed every RTT;
#   RTT >= V/2             at most one renewal sent under the latency is
#                          accepted (the next would have to come back within
#                          the validity the one before it gave), none when
#                          RTT >= V - 200; the lease is reported lost when
#                          the validity of the last accepted one ends, at
#                          most 200 ms + a TTL after the latency began.
# This suite runs 110 ms (RTT 220), 160 ms (RTT 320: each round trip is
# shorter than V, yet the lease is lost, since two in a row are not) and
# 300 ms (RTT 600) each way and asserts exactly that, and that the lease
# is never kept past its validity: every accepted renewal is seen before
# the validity of the one before it ends.  In the lost cases a second holder in B (no latency) waits for the
# lease: it gets it only after the first was reported lost, with a higher
# token.
#   FENCE_SUITES=test_net_latency scripts/run-suites build   (as root)
. "$(dirname "$0")/netns.sh"

TTL=600
RENEW=200
V=$(calc "$TTL - ($TTL * 0.01 + 2)")
net_up
net_redis "$T/redis" 6379
net_latency_setup 6379
URL=redis://$RIP:$DELAY_PORT

# The "valid TIME UNTIL" lines of a holder's output, checked: each renewal
# was seen before the validity before it ended.  Prints the first time
# (ms) one was not, or nothing.
revived() {
  awk '$1 == "valid" { if (u != "" && $2 >= u) { print $2; exit } u = $3 }' "$1"
}

# latency_case D: one-way delay D ms; sets out, t0, t1 (the delay began
# between them), hpid.
latency_start() {
  local name=$1
  out=$T/$name.out
  net_delay 0
  net_bg "$NS_A" "$out" "$NH" hold "$URL" "$name" "$TTL" "$RENEW"
  hpid=$BG_PID
  # Held, and renewed a few times at full speed first.
  wait_for "$out" '^acquired' 5 && sleep 0.5 || return 1
  t0=$(now)
  net_delay "$2"
  t1=$(now)
}

# ---- 110 ms each way: survives, renewed late --------------------------------
D=110
if latency_start lat-survive $D; then
  sleep 2.5
  t2=$(now)
  net_delay 0
  # Renewals sent under the delay, both ways (their sending is UNTIL - V,
  # from t1 until 2D before it was taken away at t2).
  stats=$(awk -v t1="$t1" -v t2="$t2" -v d="$D" -v v="$V" '$1 == "valid" && $3 - v >= t1 && $3 - v + 2 * d <= t2 {
      rtt = $2 - ($3 - v); n++
      if (min == "" || rtt < min) min = rtt; if (rtt > max) max = rtt
    } END { printf "%d %.1f %.1f", n, min, max }' "$out")
  read -r n rmin rmax <<< "$stats"
  echo "# one-way ${D} ms: $n renewals sent under it were accepted, seen $rmin .. $rmax ms after their sending"
  if ! grep -q '^lost' "$out" && [ "$n" -ge 4 ] && is "$rmin >= 2 * $D - 2"; then
    ok "one-way ${D} ms (RTT $((2 * D)) > renewal interval $RENEW, < V/2): the lease survived 2.5 s, $n renewals accepted $rmin .. $rmax ms after their sending"
  else
    nok "one-way ${D} ms: lost or not renewed under the latency: $n renewals, RTT $rmin .. $rmax ms; $(grep '^lost' "$out")"
  fi
  r=$(revived "$out")
  if [ -z "$r" ]; then
    ok "one-way ${D} ms: never kept past its validity: each of $(grep -c '^valid' "$out") renewals was seen before the validity before it ended"
  else
    nok "one-way ${D} ms: a renewal was seen at $r, after the validity before it had ended"
  fi
  kill "$hpid"; wait "$hpid"
  st=$(field "$out" released 3)
  if [ "$st" = FENCE_OK ]; then ok "one-way ${D} ms: released (FENCE_OK) once the latency was gone"
  else nok "one-way ${D} ms: release said ${st:-nothing}: $(tail -3 "$out" | tr '\n' ' ')"; fi
else
  nok "one-way ${D} ms: the holder did not start: $(cat "$out")"
fi

# ---- 160 and 300 ms each way: lost on time ----------------------------------
# lost_case D MAX: the lease must be lost on time, with at most MAX
# renewals sent under the latency accepted; a second holder in B (straight
# to Redis, no latency) waits for the lease and gets it only after A was
# reported lost, with a higher token.
lost_case() {
  local D=$1 max=$2 name=lat-lost-$1 bout=$T/lat-b-$1.out bpid
  if ! latency_start "$name" "$D"; then
    nok "one-way ${D} ms: the holder did not start: $(cat "$out")"
    return
  fi
  net_bg "$NS_B" "$bout" "$NH" hold "redis://$RIP:6379" "$name" "$TTL" "$RENEW"
  bpid=$BG_PID
  wait_for "$out" '^lost' 3
  wait_for "$bout" '^acquired' 5
  net_delay 0
  local lost_t reason until n r b_t b_tok a_tok
  lost_t=$(field "$out" lost 2); reason=$(field "$out" lost 3); until=$(field "$out" lost 4)
  if [ -z "$lost_t" ]; then
    nok "one-way ${D} ms: the lease was never reported lost: $(tail -3 "$out" | tr '\n' ' ')"
    kill "$hpid" "$bpid" 2>/dev/null; wait "$hpid" "$bpid"
    return
  fi
  # Renewals sent under the latency (sending = UNTIL - V) that were accepted.
  n=$(awk -v t1="$t1" -v v="$V" '$1 == "valid" && $3 - v >= t1' "$out" | wc -l)
  echo "# one-way ${D} ms: latency -> lost $(calc "$lost_t - $t0") ms (TTL $TTL), $(calc "$lost_t - $until") ms after the validity ended; $n renewals sent under the latency accepted, the last accepted one sent $(calc "$until - $V - $t0") ms after the latency began"
  if [ "$n" -le "$max" ]; then
    ok "one-way ${D} ms (RTT $((2 * D)) >= V/2): $n renewals sent under the latency were accepted (at most $max)"
  else
    nok "one-way ${D} ms: $n renewals sent under the latency were accepted, more than $max"
  fi
  if [ "$reason" = FENCE_ECONN ] && is "$lost_t <= $until + $SLACK_MS" &&
     is "$lost_t - $t0 <= $max * $RENEW + $TTL + $SLACK_MS"; then
    ok "one-way ${D} ms: reported lost ($reason) $(calc "$lost_t - $until") ms after its validity ended, $(calc "$lost_t - $t0") ms after the latency began (bounds +$SLACK_MS ms, $max x $RENEW + TTL + $SLACK_MS ms)"
  else
    nok "one-way ${D} ms: lost late or for another reason: $reason, $(calc "$lost_t - $until") ms after the validity, $(calc "$lost_t - $t0") ms after the latency began"
  fi
  r=$(revived "$out")
  if [ -z "$r" ]; then ok "one-way ${D} ms: never kept past its validity (every renewal seen before the validity before it ended)"
  else nok "one-way ${D} ms: a renewal was seen at $r, after the validity before it had ended"; fi
  b_t=$(field "$bout" acquired 2); b_tok=$(field "$bout" acquired 3); a_tok=$(field "$out" acquired 3)
  if [ -n "$b_t" ] && is "$b_t > $lost_t" && [ "$b_tok" -gt "$a_tok" ]; then
    ok "one-way ${D} ms: the holder in B got the lease $(calc "$b_t - $lost_t") ms after A was reported lost, token $b_tok > $a_tok"
  else
    nok "one-way ${D} ms: holder B: acquired at ${b_t:-never} (A lost at $lost_t), token ${b_tok:-none} vs $a_tok: $(cat "$bout")"
  fi
  kill "$hpid" "$bpid" 2>/dev/null; wait "$hpid" "$bpid"
}
# RTT 320: each round trip fits in the validity a renewal gives (592), but
# not two in a row: the first renewal under it may be accepted (its reply
# beats the validity the last fast one gave), the next cannot be.
lost_case 160 1
# RTT 600 > V: none can.
lost_case 300 0
net_done
