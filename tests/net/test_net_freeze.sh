#!/usr/bin/env bash
# test_net_freeze.sh -- Redis frozen (SIGSTOP of redis-server in R) for
# twice the TTL while a holder in A holds a lease.  The kernel still accepts
# the holder's connections and its requests; nothing answers.  What must
# happen: the lease is reported lost (FENCE_ECONN) when its validity ends,
# at most a TTL after the freeze; after SIGCONT Redis has let the key expire
# (it expires keys by its wall clock, which ran on), so the old holder's
# renewal is refused -- by Redis (renew.lua with its owner value answers 0)
# and by the library (fence_renew: FENCE_LOST, the lease is lost for good)
# -- and the next holder gets a higher token.
#   FENCE_SUITES=test_net_freeze scripts/run-suites build   (as root)
. "$(dirname "$0")/netns.sh"

TTL=800
RENEW=266
MARGIN=$(calc "$TTL * 0.01 + 2")
net_up
net_redis "$T/redis" 6379
URL=redis://$RIP:6379
NAME=frozen-lease
rpid=$(cat "$T/redis/redis.pid")

out=$T/holder.out
net_bg "$NS_A" "$out" "$NH" hold "$URL" "$NAME" "$TTL" "$RENEW"
h1=$BG_PID
wait_for "$out" '^acquired' 5 || setup_fail "the holder did not get the lease: $(cat "$out")"
sleep 0.5
e=$(expiry 6379 "fence:{$NAME}")
t0=$(now)
kill -STOP "$rpid"
wait_for "$out" '^lost' $((TTL / 1000 + 3))
# Frozen for twice the TTL in all.
sleep "$(awk -v t0="$t0" -v now="$(now)" -v ttl="$TTL" 'BEGIN { s = (t0 + 2 * ttl - now) / 1000; printf "%.3f", (s > 0 ? s : 0) }')"
t1=$(now)
kill -CONT "$rpid"
echo "# Redis frozen for $(calc "$t1 - $t0") ms (TTL $TTL)"

lost_t=$(field "$out" lost 2); reason=$(field "$out" lost 3); until=$(field "$out" lost 4)
tok1=$(field "$out" acquired 3); owner=$(field "$out" acquired 4)
if [ -z "$lost_t" ]; then
  nok "freeze: the lease was never reported lost: $(tail -3 "$out" | tr '\n' ' ')"
else
  echo "# freeze: frozen -> lost $(calc "$lost_t - $t0") ms (TTL $TTL), $(calc "$lost_t - $until") ms after the validity ended, $(calc "$e - $lost_t") ms before the key's expiry"
  if [ "$reason" = FENCE_ECONN ] && is "$until <= $t0 + $TTL - $MARGIN + 1" &&
     is "$lost_t <= $until + $SLACK_MS" && is "$lost_t - $t0 <= $TTL + $SLACK_MS"; then
    ok "freeze: reported lost ($reason) $(calc "$lost_t - $until") ms after its validity ended, $(calc "$lost_t - $t0") ms after the freeze (bounds +$SLACK_MS ms, TTL + $SLACK_MS ms), no renewal accepted after it"
  else
    nok "freeze: lost late, for another reason, or renewed while frozen: $reason, validity until $(calc "$until - $t0") ms, lost $(calc "$lost_t - $t0") ms after the freeze"
  fi
fi

# Redis, continued: the key is gone and a renewal with the old owner value
# is refused (the library's renew.lua, as the heartbeat sends it).
gone=$(rcli 6379 exists "fence:{$NAME}")
ans=$(rcli 6379 eval "$(cat lib/lease/redis/renew.lua)" 1 "fence:{$NAME}" "$owner" "$TTL")
if [ "$gone" = 0 ] && [ "$ans" = 0 ]; then
  ok "freeze: after SIGCONT the key had expired and Redis refused the old holder's renewal (renew.lua: 0)"
else
  nok "freeze: after SIGCONT: key exists=$gone, renew.lua answered '$ans'"
fi
kill -USR1 "$h1"
wait_for "$out" '^renew' 3
st=$(field "$out" renew 3)
if [ "$st" = FENCE_LOST ]; then
  ok "freeze: the old holder's own fence_renew() after SIGCONT: FENCE_LOST (lost for good)"
else
  nok "freeze: the old holder's fence_renew() after SIGCONT said ${st:-nothing}"
fi
kill "$h1" 2>/dev/null; wait "$h1"

out2=$T/holder2.out
net_bg "$NS_B" "$out2" "$NH" hold "$URL" "$NAME" "$TTL" "$RENEW"
h2=$BG_PID
wait_for "$out2" '^acquired' 5
tok2=$(field "$out2" acquired 3)
if [ -n "$tok2" ] && [ "$tok2" -gt "$tok1" ]; then
  ok "freeze: the next holder (in B) got token $tok2 > $tok1"
else
  nok "freeze: the next holder: ${tok2:-no token} (old $tok1): $(cat "$out2")"
fi
kill "$h2" 2>/dev/null; wait "$h2"
net_done
