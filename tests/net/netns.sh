# shellcheck shell=bash disable=SC2034
# netns.sh -- what the network fault suites (tests/net/test_*.sh) share;
# sourced, not a suite itself.  Needs root (network namespaces, iptables).
#
# net_up makes three network namespaces of this run's own: R (Redis, and
# whatever else runs next to it), A and B (the holders).  A and B each have
# a veth pair to R and a default route through it; Redis listens on RIP,
# an address on R's loopback, so both reach it, and nothing else: the
# namespaces have no link to the host's network, and the addresses
# (10.250.0.0/16) exist only inside them.  The teardown (a trap, always)
# kills every process left in the three namespaces -- only processes this
# suite started can be there -- and deletes them.  A namespace that cannot
# be made is a failure ("not ok - setup: ..." and exit 1), never a skip.
#
# Faults, on a holder namespace X (A or B), on its traffic with RIP:
#   net_cut X           both directions dropped (iptables, in X)
#   net_cut_requests X  only what X sends (its requests) dropped
#   net_cut_replies X   only what X receives (Redis's replies) dropped
#   net_drop X P        each packet, either way, dropped with probability P
#   net_heal X          all of that removed
# Latency: net_latency_setup PORT chooses tc netem when this kernel has
# it, else a delaying TCP relay (tests/net/delay_relay) in R in front of
# Redis's PORT; it says which in a comment line and sets DELAY_PORT, the
# port a holder that is to see the latency connects to (in A).  Then
# net_delay MS sets the one-way delay, each way.
#
# (The netem branch is not exercised on the kernel this was written on,
# which has no sch_netem; CI's is the same kind.)
#
# Also: ok/nok (TAP lines), net_done (the exit status), net_in NS CMD...,
# net_bg NS OUT CMD... (in the background, BG_PID), net_redis DIR PORT
# [conf lines], net_sentinel DIR PORT MASTER_PORT, rcli PORT ARGS..., now
# (the monotonic clock in ms, as tests/net/netholder prints it), gone_at
# PID SECONDS (when it exits), expiry PORT KEY (a key's expiry on Redis),
# wait_for FILE REGEX SECONDS, calc EXPR and is EXPR (awk), field (of a
# holder's output), and SLACK_MS: what the suites allow a
# loaded machine for scheduling on top of every bound (50 ms;
# FENCE_NET_SLACK_MS changes it).
set -u
cd "$(dirname "$0")/../.." || exit 1

B=${FENCE_BUILD:-build}
case "$B" in /*) ;; *) B=$PWD/$B ;; esac
F=$B/fence
NH=$B/tests/net/netholder
RELAY=$B/tests/net/delay_relay
SLACK_MS=${FENCE_NET_SLACK_MS:-50}

n_ok=0; n_fail=0
ok() { echo "ok - $*"; n_ok=$((n_ok + 1)); }
nok() { echo "not ok - $*"; n_fail=$((n_fail + 1)); }
setup_fail() { nok "setup: $*"; exit 1; }
# A suite's last line: its exit status says whether everything passed.
net_done() { [ "$n_fail" -eq 0 ] && [ "$n_ok" -gt 0 ]; exit $?; }

NS_R=fence-$$-r; NS_A=fence-$$-a; NS_B=fence-$$-b
RIP=10.250.0.1
NET_MADE=()
T=$(mktemp -d "${TMPDIR:-/tmp}/fence-net.XXXXXX")

net_teardown() {
  local ns pids
  for ns in "${NET_MADE[@]}"; do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    # shellcheck disable=SC2086
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null
  done
  for ns in "${NET_MADE[@]}"; do
    # A namespace goes once its last process is gone.
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break
      sleep 0.05
    done
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$T"
}
trap net_teardown EXIT
trap 'exit 1' INT TERM HUP

net_in() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
# net_bg NS OUT CMD...: CMD in NS in the background, its output to OUT;
# BG_PID is CMD's own pid (ip netns exec execs it), so a kill reaches it.
net_bg() {
  local ns=$1 o=$2; shift 2
  ip netns exec "$ns" "$@" > "$o" 2>&1 &
  BG_PID=$!
}
now() { "$NH" now; }
calc() { awk "BEGIN { printf \"%.1f\", $1 }"; }
# is EXPR: awk's truth of a comparison.
is() { awk "BEGIN { exit !($1) }"; }

wait_for() { # FILE REGEX SECONDS: until a line of FILE matches
  local i n
  n=$(awk -v s="$3" 'BEGIN { printf "%d", s * 100 }')
  for ((i = 0; i < n; i++)); do
    grep -Eq "$2" "$1" 2>/dev/null && return 0
    sleep 0.01
  done
  grep -Eq "$2" "$1" 2>/dev/null
}

# One veth pair R <-> X, addresses 10.250.N.1 (R) and 10.250.N.2 (X).
net_link() {
  local x=$1 n=$2
  ip -n "$NS_R" link add "r$n" type veth peer name "x$n" netns "$x" &&
    ip -n "$NS_R" addr add "10.250.$n.1/30" dev "r$n" &&
    ip -n "$x" addr add "10.250.$n.2/30" dev "x$n" &&
    ip -n "$NS_R" link set "r$n" up &&
    ip -n "$x" link set "x$n" up &&
    ip -n "$x" link set lo up &&
    ip -n "$x" route add default via "10.250.$n.1"
}

net_up() {
  local ns x tool
  [ "$(id -u)" = 0 ] || setup_fail "the network suites need root (network namespaces, iptables)"
  for tool in ip iptables redis-server redis-cli; do
    command -v "$tool" >/dev/null || setup_fail "$tool not found (scripts/install-deps)"
  done
  for tool in "$F" "$NH" "$RELAY"; do
    [ -x "$tool" ] || setup_fail "$tool is missing (make tests-build)"
  done
  for ns in "$NS_R" "$NS_A" "$NS_B"; do
    ip netns add "$ns" || setup_fail "cannot make the network namespace $ns (ip netns add)"
    NET_MADE+=("$ns")
  done
  ip -n "$NS_R" link set lo up && ip -n "$NS_R" addr add "$RIP/32" dev lo ||
    setup_fail "cannot set up $NS_R's loopback"
  net_link "$NS_A" 1 || setup_fail "cannot link $NS_A to $NS_R (veth)"
  net_link "$NS_B" 2 || setup_fail "cannot link $NS_B to $NS_R (veth)"
  net_probe_iptables
}

# The iptables that really drops here: a TCP connect from A to a listener
# in R works, fails under a cut, works again after the heal.
IPT=
net_probe_iptables() {
  local ipt lfile="$T/probe.out" lpid
  net_bg "$NS_R" "$lfile" "$RELAY" "$RIP" 9 "$RIP" 9 /dev/null
  lpid=$BG_PID
  wait_for "$lfile" '^ready' 5 || setup_fail "the probe listener did not start: $(cat "$lfile")"
  connects() { net_in "$NS_A" timeout 0.3 bash -c "exec 3<>/dev/tcp/$RIP/9" 2>/dev/null; }
  connects || setup_fail "A cannot reach $RIP (the veth link does not work)"
  for ipt in iptables iptables-legacy; do
    command -v "$ipt" >/dev/null || continue
    IPT=$ipt
    net_cut "$NS_A" || continue
    if ! connects; then
      net_heal "$NS_A"
      connects || setup_fail "$ipt: A cannot reach $RIP after the heal"
      echo "# cuts and drops: $ipt in the holders' namespaces"
      kill "$lpid" 2>/dev/null; wait "$lpid" 2>/dev/null
      return 0
    fi
    net_heal "$NS_A"
  done
  setup_fail "no iptables here drops packets in a namespace (tried iptables, iptables-legacy)"
}

ipt_in() { local x=$1; shift; net_in "$x" "$IPT" -w "$@"; }
net_cut_requests() { ipt_in "$1" -I OUTPUT -d "$RIP" -j DROP; }
net_cut_replies() { ipt_in "$1" -I INPUT -s "$RIP" -j DROP; }
net_cut() { net_cut_requests "$1" && net_cut_replies "$1"; }
net_drop() {
  ipt_in "$1" -I OUTPUT -d "$RIP" -m statistic --mode random --probability "$2" -j DROP &&
    ipt_in "$1" -I INPUT -s "$RIP" -m statistic --mode random --probability "$2" -j DROP
}
net_heal() { ipt_in "$1" -F OUTPUT && ipt_in "$1" -F INPUT; }

# net_redis DIR PORT [conf lines]: a redis-server in R on RIP:PORT, its
# files in DIR (made here), started and answering.
net_redis() {
  local dir=$1 port=$2 line i; shift 2
  mkdir -p "$dir"
  {
    echo "bind $RIP"
    echo "port $port"
    echo "dir $dir"
    echo "daemonize yes"
    echo "pidfile $dir/redis.pid"
    echo "logfile $dir/redis.log"
    echo "save \"\""
    echo "appendonly no"
    # Only this run's namespaces can reach it.
    echo "protected-mode no"
    for line in "$@"; do echo "$line"; done
  } > "$dir/redis.conf"
  net_in "$NS_R" redis-server "$dir/redis.conf" > /dev/null ||
    setup_fail "redis-server would not start on $RIP:$port: $(tail -3 "$dir/redis.log" 2>/dev/null)"
  for i in $(seq 1 200); do
    [ "$(rcli "$port" ping 2>/dev/null)" = PONG ] && return 0
    sleep 0.02
  done
  setup_fail "redis-server on $RIP:$port does not answer: $(tail -3 "$dir/redis.log" 2>/dev/null)"
}

# net_sentinel DIR PORT MASTER_PORT: a Sentinel in R monitoring
# RIP:MASTER_PORT as "fence-m" (quorum 1).
net_sentinel() {
  local dir=$1 port=$2 mport=$3 i
  mkdir -p "$dir"
  {
    echo "bind $RIP"
    echo "port $port"
    echo "dir $dir"
    echo "daemonize yes"
    echo "pidfile $dir/redis.pid"
    echo "logfile $dir/redis.log"
    echo "protected-mode no"
    echo "sentinel monitor fence-m $RIP $mport 1"
    echo "sentinel down-after-milliseconds fence-m 200"
    echo "sentinel failover-timeout fence-m 1000"
  } > "$dir/sentinel.conf"
  net_in "$NS_R" redis-server "$dir/sentinel.conf" --sentinel > /dev/null ||
    setup_fail "the Sentinel would not start on $RIP:$port"
  for i in $(seq 1 200); do
    rcli "$port" sentinel get-master-addr-by-name fence-m 2>/dev/null | grep -qx "$mport" && return 0
    sleep 0.02
  done
  setup_fail "the Sentinel on $RIP:$port does not know the master"
}

rcli() { local port=$1; shift; net_in "$NS_R" redis-cli -h "$RIP" -p "$port" "$@"; }

# Latency: tc netem where the kernel has it, else the relay.
DELAY_PORT=
NET_DELAY=
net_latency_setup() {
  local port=$1
  if net_in "$NS_A" tc qdisc add dev x1 root netem delay 1ms 2>/dev/null; then
    net_in "$NS_A" tc qdisc del dev x1 root
    NET_DELAY=netem
    DELAY_PORT=$port
    echo "# latency: tc netem on the A <-> R link, each way"
    return 0
  fi
  NET_DELAY=relay
  DELAY_PORT=$((port + 1000))
  echo 0 > "$T/delay_ms"
  net_bg "$NS_R" "$T/relay.out" "$RELAY" "$RIP" "$DELAY_PORT" "$RIP" "$port" "$T/delay_ms"
  disown "$BG_PID" # it lives until the teardown: no "Killed" line then
  wait_for "$T/relay.out" '^ready' 5 || setup_fail "the delay relay did not start: $(cat "$T/relay.out")"
  echo "# latency: this kernel has no tc netem; a delaying TCP relay (tests/net/delay_relay) in R, $RIP:$DELAY_PORT -> :$port, delays each chunk each way"
}
net_delay() {
  if [ "$NET_DELAY" = netem ]; then
    if [ "$1" = 0 ]; then
      net_in "$NS_A" tc qdisc del dev x1 root 2>/dev/null
      net_in "$NS_R" tc qdisc del dev r1 root 2>/dev/null
    else
      net_in "$NS_A" tc qdisc replace dev x1 root netem delay "$1ms" &&
        net_in "$NS_R" tc qdisc replace dev r1 root netem delay "$1ms"
    fi
  else
    echo "$1" > "$T/delay_ms.tmp" && mv "$T/delay_ms.tmp" "$T/delay_ms"
  fi
}

# Fields of a holder's output (tests/net/netholder hold).
field() { # FILE WORD N: field N of the first line starting with WORD
  awk -v w="$2" -v n="$3" '$1 == w { print $n; exit }' "$1"
}

# gone_at PID SECONDS: print the time PID exits (exactly: a pidfd, see
# tests/net/netholder), or nothing if it lives on past SECONDS.
gone_at() { "$NH" gone "$1" "$2"; }
# expiry PORT KEY: the earliest the key can expire on Redis, from its PTTL
# (tests/net/netholder pttl, asked in R); empty when there is no key.
expiry() {
  local line
  line=$(net_in "$NS_R" "$NH" pttl "$RIP" "$1" "$2") || return 1
  awk '$3 >= 0 { printf "%.3f\n", $2 + $3 }' <<< "$line"
}
