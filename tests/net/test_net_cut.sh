#!/usr/bin/env bash
# test_net_cut.sh -- a holder cut off from Redis mid-lease: the whole link,
# only its requests, only Redis's replies.  Redis runs in namespace R, the
# holders in A (tests/net/netns.sh).  In each case two holders run at once
# under the same cut: tests/net/netholder (libfence, it prints its lease's
# validity and the moment on_lost fires) and `fence run` with a command
# that leaves a sign of life every 2 ms.  What must happen: no renewal is
# accepted after the cut, the lease is reported lost when its validity ends
# (at most TTL after the cut, never later: the validity is measured from
# the last accepted renewal's sending, minus 1% + 2 ms), and `fence run`
# stops its command then and exits 76.
#   FENCE_SUITES=test_net_cut scripts/run-suites build   (as root)
. "$(dirname "$0")/netns.sh"

TTL=1000
RENEW=333
MARGIN=$(calc "$TTL * 0.01 + 2")   # the library's drift margin, ms
net_up
net_redis "$T/redis" 6379
URL=redis://$RIP:6379

# cut_case KIND (cut | cut_requests | cut_replies)
cut_case() {
  local kind=$1 lib=cut-$1-lib run=cut-$1-run
  local out=$T/$kind.lib tick=$T/$kind.tick
  net_bg "$NS_A" "$out" "$NH" hold "$URL" "$lib" "$TTL" "$RENEW"
  local hpid=$BG_PID
  net_bg "$NS_A" "$T/$kind.run" sh -c "'$F' run --ttl ${TTL}ms --redis '$URL' $run -- '$NH' tick '$tick'; \
    echo \$? > '$T/$kind.rc'; '$NH' now > '$T/$kind.end'"
  local rpid=$BG_PID
  # Held, the command running, and a renewal or two accepted.
  if ! wait_for "$out" '^acquired' 5 || ! wait_for "$tick" . 5; then
    nok "$kind: the holders did not start: $(cat "$out" "$T/$kind.run")"
    return
  fi
  sleep 0.5
  local t0 t1 e_lib e_run cpid gone
  read -r cpid _ < "$tick"
  t0=$(now)
  "net_$kind" "$NS_A" || { nok "$kind: iptables refused the cut"; return; }
  t1=$(now)
  gone_at "$cpid" $((TTL / 1000 + 3)) > "$T/$kind.gone" &
  local gpid=$!
  # The keys' expiry on Redis as the cut began (R still reaches Redis).
  # Only later renewals could move it, and a cut stops them.
  e_lib=$(expiry 6379 "fence:{$lib}")
  e_run=$(expiry 6379 "fence:{$run}")
  if [ -z "$e_lib" ] || [ -z "$e_run" ]; then
    nok "$kind: a key was already gone from Redis at the cut"
    return
  fi
  echo "# $kind: cut in place after $(calc "$t1 - $t0") ms; the keys expire on Redis $(calc "$e_lib - $t0") / $(calc "$e_run - $t0") ms after the cut"
  wait_for "$out" '^lost' $((TTL / 1000 + 3))
  wait_for "$T/$kind.rc" . $((TTL / 1000 + 4))
  net_heal "$NS_A"

  # libfence's holder.
  local lost_t reason until
  lost_t=$(field "$out" lost 2); reason=$(field "$out" lost 3); until=$(field "$out" lost 4)
  if [ -z "$lost_t" ]; then
    nok "$kind: libfence: the lease was never reported lost ($(tail -3 "$out" | tr '\n' ' '))"
  else
    # Every validity seen came from a renewal sent before the cut was in
    # place: UNTIL = sent + TTL - margin, and valid_ms is whole ms.
    if is "$until <= $t1 + $TTL - $MARGIN + 1"; then
      ok "$kind: libfence: no renewal accepted after the cut (validity ends $(calc "$until - $t0") ms after the cut; TTL $TTL)"
    else
      nok "$kind: libfence: validity until $(calc "$until - $t0") ms after the cut: a renewal sent after it was accepted"
    fi
    echo "# $kind: libfence: cut -> lost $(calc "$lost_t - $t0") ms (TTL $TTL ms); lost $(calc "$lost_t - $until") ms after its validity ended, $(calc "$e_lib - $lost_t") ms before the key's expiry on Redis"
    if is "$lost_t <= $until + $SLACK_MS" && is "$lost_t - $t0 <= $TTL + $SLACK_MS" && is "$lost_t <= $e_lib + $SLACK_MS"; then
      ok "$kind: libfence: reported lost ($reason) on time: $(calc "$lost_t - $until") ms after its validity ended, $(calc "$lost_t - $t0") ms after the cut, $(calc "$e_lib - $lost_t") ms before the key expired on Redis (bounds: +$SLACK_MS ms, TTL + $SLACK_MS ms, expiry + $SLACK_MS ms)"
    else
      nok "$kind: libfence: reported lost late: $(calc "$lost_t - $until") ms after its validity ended, $(calc "$lost_t - $t0") ms after the cut (TTL $TTL, slack $SLACK_MS)"
    fi
    if [ "$reason" = FENCE_ECONN ]; then
      ok "$kind: libfence: the reason is FENCE_ECONN (Redis unreachable), not a refusal"
    else
      nok "$kind: libfence: the reason is $reason, not FENCE_ECONN"
    fi
  fi
  kill "$hpid" 2>/dev/null

  # fence run.
  local rc end last
  rc=$(cat "$T/$kind.rc" 2>/dev/null); end=$(cat "$T/$kind.end" 2>/dev/null)
  read -r _ last < "$tick"
  if [ "$rc" = 76 ]; then
    ok "$kind: fence run exited 76 (lease lost, command stopped)"
  else
    nok "$kind: fence run exited ${rc:-<not yet>}, not 76: $(tail -3 "$T/$kind.run" | tr '\n' ' ')"
  fi
  wait "$hpid" "$rpid" "$gpid"
  sed 's/^/# fence run said: /' "$T/$kind.run"
  gone=$(cat "$T/$kind.gone")
  echo "# $kind: fence run: the command's last sign of life $(calc "$last - $t0") ms after the cut, exited $(calc "${gone:-0} - $t0") ms after it (TTL $TTL ms), $(calc "$e_run - ${gone:-0}") ms before the key's expiry on Redis; fence itself ended $(calc "${end:-0} - $t0") ms after the cut"
  if [ -n "$gone" ] && is "$gone - $t0 <= $TTL + $SLACK_MS" && is "$gone <= $e_run + $SLACK_MS"; then
    ok "$kind: fence run: the command was gone $(calc "$gone - $t0") ms after the cut , $(calc "$e_run - $gone") ms before its key expired on Redis (bounds: TTL + $SLACK_MS ms after the cut, $SLACK_MS ms after the expiry)"
  else
    nok "$kind: fence run: the command lived on: exited ${gone:+$(calc "$gone - $t0") ms after the cut}${gone:-never}, last sign of life $(calc "$last - $t0") ms (TTL $TTL)"
  fi
}

cut_case cut
cut_case cut_requests
cut_case cut_replies
net_done
