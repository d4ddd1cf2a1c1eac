#!/usr/bin/env bash
# test_etcd_partition.sh -- a holder partitioned from its etcd (issue 29):
# a one-member etcd in namespace R on RIP:2379, the holders in A and B
# (tests/net/netns.sh: network namespaces of this run's own, iptables; as
# root).  In A, tests/net/netholder (libfence) holds one lease and `fence
# run --url etcd://...` another around a command that leaves a sign of life
# every 2 ms; then A is cut off both ways.  What must happen: no renewal
# accepted after the cut, each lease reported lost when its validity ends
# (at most TTL after the cut), `fence run` stops its command then and exits
# 76; B gets the name only after A's command is gone, with a higher token.
#   FENCE_SUITES=test_etcd_partition scripts/run-suites build   (as root)
. "$(dirname "$0")/../net/netns.sh"

TTL=1000
RENEW=333
MARGIN=$(calc "$TTL * 0.01 + 2")
command -v etcd >/dev/null || setup_fail "etcd not found (scripts/install-deps: etcd-server)"
net_up

# etcd in R: its client and peer ports on RIP only.
mkdir -p "$T/etcd"
net_bg "$NS_R" "$T/etcd.log" etcd --name r --data-dir "$T/etcd/data" \
  --listen-client-urls "http://$RIP:2379" --advertise-client-urls "http://$RIP:2379" \
  --listen-peer-urls "http://$RIP:2380" --initial-advertise-peer-urls "http://$RIP:2380" \
  --initial-cluster "r=http://$RIP:2380" --heartbeat-interval 50 --election-timeout 250
ready=0
for i in $(seq 1 200); do
  net_in "$NS_R" curl -s -m 1 "http://$RIP:2379/health" 2>/dev/null | grep -q '"health":"true"' && { ready=1; break; }
  sleep 0.05
done
[ $ready = 1 ] || setup_fail "etcd in $NS_R did not become healthy: $(tail -3 "$T/etcd.log")"
URL=etcd://$RIP:2379

lib=part-lib run=part-run
out=$T/lib.out tick=$T/tick
net_bg "$NS_A" "$out" "$NH" hold "$URL" "$lib" "$TTL" "$RENEW"
net_bg "$NS_A" "$T/run.out" sh -c "'$F' run --ttl ${TTL}ms --url '$URL' $run -- \
  sh -c 'echo \$FENCE_TOKEN > $T/tok_a; exec $NH tick $tick'; echo \$? > '$T/run.rc'"
if ! wait_for "$out" '^acquired' 10 || ! wait_for "$tick" . 10; then
  nok "the holders did not start: $(cat "$out" "$T/run.out")"
  net_done
fi
sleep 0.5
read -r cpid _ < "$tick"
wait_for "$T/tok_a" . 5
tok_a=$(cat "$T/tok_a")
t0=$(now)
net_cut "$NS_A" || { nok "iptables refused the cut"; net_done; }
t1=$(now)
gone_at "$cpid" $((TTL / 1000 + 3)) > "$T/gone" &
gpid=$!
# B waits for the name meanwhile: it must get it only after A's command is gone.
net_bg "$NS_B" "$T/b.out" sh -c "'$F' run --ttl ${TTL}ms --url '$URL' -w 10s $run -- \
  sh -c 'echo token \$FENCE_TOKEN; $NH now'"
bpid=$BG_PID
wait_for "$out" '^lost' $((TTL / 1000 + 3))
wait_for "$T/run.rc" . $((TTL / 1000 + 4))
wait "$gpid"
wait "$bpid"
net_heal "$NS_A"

lost_t=$(field "$out" lost 2); reason=$(field "$out" lost 3); until=$(field "$out" lost 4)
if [ -z "$lost_t" ]; then
  nok "libfence: the lease was never reported lost ($(tail -3 "$out" | tr '\n' ' '))"
else
  if is "$until <= $t1 + $TTL - $MARGIN + 1"; then
    ok "libfence: no renewal accepted after the cut (validity ends $(calc "$until - $t0") ms after it; TTL $TTL)"
  else
    nok "libfence: validity until $(calc "$until - $t0") ms after the cut: a renewal sent after it was accepted"
  fi
  echo "# libfence: cut -> lost $(calc "$lost_t - $t0") ms (TTL $TTL ms), $(calc "$lost_t - $until") ms after its validity ended"
  if is "$lost_t <= $until + $SLACK_MS" && is "$lost_t - $t0 <= $TTL + $SLACK_MS"; then
    ok "libfence: reported lost ($reason) on time: $(calc "$lost_t - $t0") ms after the cut (bound TTL + $SLACK_MS ms)"
  else
    nok "libfence: reported lost late: $(calc "$lost_t - $until") ms after its validity, $(calc "$lost_t - $t0") ms after the cut"
  fi
  [ "$reason" = FENCE_ECONN ] && ok "libfence: the reason is FENCE_ECONN (no answer), not a refusal" ||
    nok "libfence: the reason is $reason, not FENCE_ECONN"
fi
rc=$(cat "$T/run.rc" 2>/dev/null)
gone=$(cat "$T/gone")
[ "$rc" = 76 ] && ok "fence run exits 76 (lease lost)" || nok "fence run exited '$rc', not 76: $(tail -3 "$T/run.out")"
if [ -n "$gone" ] && is "$gone - $t0 <= $TTL + $SLACK_MS"; then
  ok "fence run's command stopped $(calc "$gone - $t0") ms after the cut (bound TTL + $SLACK_MS ms)"
else
  nok "fence run's command not stopped on time (gone at '$gone', cut at $t0)"
fi
tok_b=$(awk '$1 == "token" { print $2 }' "$T/b.out")
b_at=$(awk 'NR > 0 && $1 ~ /^[0-9.]+$/ { print $1; exit }' "$T/b.out")
if [ -n "$tok_b" ] && [ -n "$b_at" ] && [ -n "$gone" ] && is "$b_at > $gone"; then
  ok "B got the name $(calc "$b_at - $gone") ms after A's command was gone"
else
  nok "B: token '$tok_b' at '$b_at', A's command gone at '$gone': $(cat "$T/b.out")"
fi
if [ -n "$tok_b" ] && [ -n "$tok_a" ] && [ "$tok_b" -gt "$tok_a" ] 2>/dev/null; then
  ok "B's token $tok_b is above A's $tok_a"
else
  nok "B's token '$tok_b' is not above A's '$tok_a'"
fi
net_done
