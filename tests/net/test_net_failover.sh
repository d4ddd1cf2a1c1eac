#!/usr/bin/env bash
# test_net_failover.sh -- a holder cut off from Redis while Sentinel fails
# the master over.  In R: a master, its replica and a Sentinel (quorum 1);
# the holder in A reaches them through the Sentinel
# (redis-sentinel://RIP:26379#fence-m).  A is cut, and the failover
# (SENTINEL FAILOVER) starts at once.  What must happen: the lease is
# reported lost on time -- when its validity ends, at most a TTL after the
# cut -- and after the heal the next holder, through the Sentinel, reaches
# the promoted replica and gets a higher token.
#   FENCE_SUITES=test_net_failover scripts/run-suites build   (as root)
. "$(dirname "$0")/netns.sh"

TTL=1000
RENEW=333
MARGIN=$(calc "$TTL * 0.01 + 2")
net_up
# No 5 s wait for more replicas before the first sync.
net_redis "$T/master" 6379 "repl-diskless-sync-delay 0"
net_redis "$T/replica" 6380 "replicaof $RIP 6379"
for _ in $(seq 1 200); do
  rcli 6380 info replication | grep -q '^master_link_status:up' && break
  sleep 0.02
done
rcli 6380 info replication | grep -q '^master_link_status:up' ||
  setup_fail "the replica's link to the master is not up"
net_sentinel "$T/sentinel" 26379 6379
# The Sentinel learns of the replica from the master's INFO.
for _ in $(seq 1 300); do
  rcli 26379 sentinel replicas fence-m | grep -qx "$RIP:6380" && break
  sleep 0.02
done
rcli 26379 sentinel replicas fence-m | grep -qx "$RIP:6380" ||
  setup_fail "the Sentinel does not know the replica"
URL="redis-sentinel://$RIP:26379#fence-m"
NAME=fo-lease

out=$T/holder1.out
net_bg "$NS_A" "$out" "$NH" hold "$URL" "$NAME" "$TTL" "$RENEW"
h1=$BG_PID
wait_for "$out" '^acquired' 5 || setup_fail "the holder did not get the lease: $(cat "$out")"
# The replica has the counter with this token before the cut.  (A replica
# whose link just came up gets no writes until its first REPLCONF ACK, up
# to a second later: a failover then loses the counter -- the case
# test_skew covers -- and the next token owes its rise to the clock alone.)
tok1=$(field "$out" acquired 3)
for _ in $(seq 1 150); do
  [ "$(rcli 6380 hget "fence:{$NAME}:token" n)" = "$tok1" ] && break
  sleep 0.02
done
[ "$(rcli 6380 hget "fence:{$NAME}:token" n)" = "$tok1" ] ||
  setup_fail "the replica did not get the counter within 3 s"
sleep 0.5
t0=$(now)
net_cut "$NS_A"
t1=$(now)
rcli 26379 sentinel failover fence-m > "$T/failover.out"
e=$(expiry 6379 "fence:{$NAME}")
# The failover: the Sentinel names the replica, and it says it is a master.
for _ in $(seq 1 400); do
  rcli 26379 sentinel get-master-addr-by-name fence-m | grep -qx 6380 &&
    rcli 6380 role | head -1 | grep -qx master && break
  sleep 0.02
done
tf=$(now)
wait_for "$out" '^lost' $((TTL / 1000 + 3))
echo "# failover: $(cat "$T/failover.out"); the replica is master $(calc "$tf - $t1") ms after the cut"

lost_t=$(field "$out" lost 2); reason=$(field "$out" lost 3); until=$(field "$out" lost 4)
if [ -z "$lost_t" ]; then
  nok "failover: the cut-off holder was never reported lost: $(tail -3 "$out" | tr '\n' ' ')"
else
  echo "# failover: cut -> lost $(calc "$lost_t - $t0") ms (TTL $TTL), $(calc "$lost_t - $until") ms after the validity ended, $(calc "${e:-0} - $lost_t") ms before the key's expiry on the old master"
  if is "$until <= $t1 + $TTL - $MARGIN + 1" && is "$lost_t <= $until + $SLACK_MS" &&
     is "$lost_t - $t0 <= $TTL + $SLACK_MS"; then
    ok "failover: the cut-off holder was reported lost ($reason) on time: $(calc "$lost_t - $until") ms after its validity ended, $(calc "$lost_t - $t0") ms after the cut (bounds +$SLACK_MS ms, TTL + $SLACK_MS ms), with no renewal accepted after the cut"
  else
    nok "failover: lost late, or renewed after the cut: validity until $(calc "$until - $t0") ms, lost $(calc "$lost_t - $t0") ms after the cut"
  fi
fi
kill "$h1" 2>/dev/null; wait "$h1"

net_heal "$NS_A"
if rcli 6380 role | head -1 | grep -qx master; then
  ok "failover: the replica was promoted ($(calc "$tf - $t1") ms after the cut)"
else
  nok "failover: the replica was not promoted: $(rcli 26379 sentinel master fence-m | tr '\n' ' ')"
fi
out2=$T/holder2.out
net_bg "$NS_A" "$out2" "$NH" hold "$URL" "$NAME" "$TTL" "$RENEW"
h2=$BG_PID
wait_for "$out2" '^acquired' 5
tok2=$(field "$out2" acquired 3)
on_new=$(rcli 6380 exists "fence:{$NAME}")
if [ -n "$tok2" ] && [ "$tok2" -gt "$tok1" ] && [ "$on_new" = 1 ]; then
  ok "failover: after the heal the next holder got the lease on the promoted replica, token $tok2 > $tok1 (+$((tok2 - tok1)))"
else
  nok "failover: the next holder: token ${tok2:-none} (old $tok1), key on the promoted replica: $on_new; $(cat "$out2")"
fi
# The promoted replica is a new server incarnation: the rule adds the
# jump (10 s, in microseconds) on top of the counter it holds, tok1's.
if [ -n "$tok2" ] && [ $((tok2 - tok1)) -gt 10000000 ]; then
  ok "failover: the promoted replica's token jumped: $tok2 - $tok1 = $((tok2 - tok1)) us > the 10 s jump"
else
  nok "failover: no jump on the promoted replica: $tok2 - $tok1 = $((${tok2:-0} - tok1)) us"
  for p in 6379 6380; do
    echo "# :$p $(rcli $p role | head -1), counter: $(rcli $p hgetall "fence:{$NAME}:token" | tr '\n' ' ')"
  done
fi
kill "$h2" 2>/dev/null; wait "$h2"
net_done
