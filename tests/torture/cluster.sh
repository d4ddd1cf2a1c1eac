# cluster.sh -- sourced by scripts/torture: the torture run's own servers, on
# free ports in folders under $TC_DIR (which the caller made and removes).
# The Redis nodes and the Sentinel run in the network namespace
# $TORTURE_NS_R on address $TORTURE_RIP (scripts/torture makes it, with a
# veth pair to the namespace the rest of the run is in; without it, both are
# "" and 127.0.0.1, on the loopback of the caller's namespace); the
# PostgreSQL cluster listens on 127.0.0.1 where the caller runs:
#   two redis-server nodes (node 0 starts as master, node 1 as its replica),
#   with AOF on (appendfsync everysec: a killed process loses nothing it
#   acknowledged, since the kernel keeps what was written);
#   each node running under the tests' clock shim ($TC_CLOCKSHIM, preloaded;
#   control file DIR/clock, offset 0 until a fault steps it: tc_clock_step);
#   one Sentinel (`redis-server --sentinel`) watching them as master "m";
#   one PostgreSQL cluster (run as the postgres user when we are root).
# Nothing here touches scripts/servers.sh's servers.  tc_stop_all stops
# everything that was started, whatever state it is in (stopped processes
# included); the caller runs it from an EXIT trap.

TC_NODES=()      # node folders, by index
TC_SENT_DIR=''
TC_SENT_PORT=''
TC_PG_DIR=''
TC_PG_PORT=''
TC_PG_BINDIR=''

tc_die() { echo "torture: $*" >&2; exit 2; }

# The clock shim and its writer (tests/common/clockshim.c, clockshim-ctl),
# from the build folder the caller gives as TC_BUILD.
TC_CLOCKSHIM=$TC_BUILD/tests/common/clockshim.so
TC_CLOCKCTL=$TC_BUILD/tests/common/clockshim-ctl
[ -f "$TC_CLOCKSHIM" ] && [ -x "$TC_CLOCKCTL" ] ||
  tc_die "no clock shim in $TC_BUILD/tests/common (make $TC_CLOCKSHIM $TC_CLOCKCTL)"

# tc_redis DIR ARGS...: redis-server ARGS with DIR's clock.
tc_redis() {
  local dir=$1; shift
  tc_inr env LD_PRELOAD="$TC_CLOCKSHIM" FENCE_CLOCKSHIM="$dir/clock" redis-server "$@"
}
# tc_clock_step I US: step node I's wall clock by US microseconds, now.
tc_clock_step() { "$TC_CLOCKCTL" step "${TC_NODES[$1]}/clock" "$2"; }
# tc_clock_offset I: node I's wall clock offset (us).
tc_clock_offset() { "$TC_CLOCKCTL" offset "${TC_NODES[$1]}/clock"; }

# A port nobody is listening on: scripts/servers.sh's choice (below the
# kernel's ephemeral range).
# shellcheck source=../../scripts/servers.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/servers.sh"
tc_free_port() { fence_free_port; }

# tc_alive PID [COMM]: the process exists, is not a zombie (and is COMM).
tc_alive() {
  local st
  [ -n "${1:-}" ] || return 1
  st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  case "$st" in Z*|'') return 1 ;; esac
  if [ -n "${2:-}" ]; then
    [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ] || return 1
  fi
  return 0
}

TC_NS_R=${TORTURE_NS_R:-}
TC_RIP=${TORTURE_RIP:-127.0.0.1}
# tc_inr CMD...: CMD in the Redis namespace: the controls of the run (its
# redis-cli calls, its token reads) reach Redis whatever a partition cuts
# between the holders and it.
tc_inr() {
  if [ -n "$TC_NS_R" ]; then ip netns exec "$TC_NS_R" "$@"; else "$@"; fi
}

tc_rcli() { # tc_rcli PORT ARGS...
  local port=$1; shift
  tc_inr redis-cli -h "$TC_RIP" -p "$port" "$@" 2>/dev/null
}

tc_node_port() { cat "${TC_NODES[$1]}/port"; }
tc_node_pid() { cat "${TC_NODES[$1]}/redis.pid" 2>/dev/null; }
tc_node_by_port() { # index of the node on PORT
  local i
  for i in "${!TC_NODES[@]}"; do
    [ "$(tc_node_port "$i")" = "$1" ] && { echo "$i"; return 0; }
  done
  return 1
}

tc_wait_ping() { # PORT [tries of 25 ms]
  local i
  for ((i = 0; i < ${2:-400}; i++)); do
    [ "$(tc_rcli "$1" ping)" = PONG ] && return 0
    sleep 0.025
  done
  return 1
}

# tc_node_new [MASTER_PORT]: make and start a node; prints its index.
tc_node_new() {
  local dir port idx try
  idx=${#TC_NODES[@]}
  dir="$TC_DIR/redis$idx"
  mkdir -p "$dir"
  for try in 1 2 3 4 5; do
    port=$(tc_free_port) || tc_die "no free port"
    {
      echo "bind $TC_RIP"
      echo "port $port"
      echo "dir $dir"
      echo "daemonize yes"
      echo "pidfile $dir/redis.pid"
      echo "logfile $dir/redis.log"
      # No password: protected mode would refuse all but loopback clients
      # (the namespace is the run's own, reachable from its other one only).
      echo "protected-mode $([ "$TC_RIP" = 127.0.0.1 ] && echo yes || echo no)"
      echo "save \"\""
      echo "appendonly yes"
      echo "appendfsync everysec"
      echo "repl-diskless-sync-delay 0"
      [ -n "${1:-}" ] && echo "replicaof $TC_RIP $1"
    } > "$dir/redis.conf"
    echo "$port" > "$dir/port"
    [ -f "$dir/clock" ] || "$TC_CLOCKCTL" create "$dir/clock" 0 || tc_die "no clock file in $dir"
    if tc_redis "$dir" "$dir/redis.conf" >/dev/null 2>&1 && tc_wait_ping "$port"; then
      TC_NODES+=("$dir")
      return 0
    fi
    tc_kill_pidfile "$dir/redis.pid"
  done
  cat "$dir/redis.log" >&2 2>/dev/null
  tc_die "redis-server would not start"
}

tc_kill_pidfile() { # SIGKILL (and SIGCONT) the redis-server of a pid file
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 0
  [ -n "$pid" ] || return 0
  tc_alive "$pid" redis-server || return 0
  kill -KILL "$pid" 2>/dev/null
  kill -CONT "$pid" 2>/dev/null
  local i
  for i in $(seq 1 200); do tc_alive "$pid" || return 0; sleep 0.01; done
}

# tc_node_start I: start node I again from its (possibly Sentinel-rewritten)
# config; its data comes back from its AOF, if it still has one.
tc_node_start() {
  local dir=${TC_NODES[$1]}
  tc_redis "$dir" "$dir/redis.conf" >/dev/null 2>&1 || return 1
  tc_wait_ping "$(tc_node_port "$1")"
}

# tc_node_stop I kill|save|wipe
#   kill: SIGKILL (a crash; the AOF keeps what was acknowledged)
#   save: SHUTDOWN SAVE NOW (a clean stop)
#   wipe: SHUTDOWN NOSAVE NOW and delete the node's data (a restart without
#         persistence comes back empty)
tc_node_stop() {
  local dir=${TC_NODES[$1]} port pid i
  port=$(tc_node_port "$1"); pid=$(tc_node_pid "$1")
  case "$2" in
    kill) tc_kill_pidfile "$dir/redis.pid" ;;
    save|wipe)
      if [ "$2" = save ]; then tc_rcli "$port" SHUTDOWN SAVE NOW >/dev/null
      else tc_rcli "$port" SHUTDOWN NOSAVE NOW >/dev/null; fi
      for i in $(seq 1 300); do tc_alive "$pid" || break; sleep 0.01; done
      tc_kill_pidfile "$dir/redis.pid" ;;
  esac
  if [ "$2" = wipe ]; then
    rm -rf "$dir/appendonlydir" "$dir/dump.rdb"
  fi
  return 0
}

tc_sentinel_start() { # tc_sentinel_start MASTER_PORT
  local dir="$TC_DIR/sentinel" port try
  mkdir -p "$dir"
  for try in 1 2 3 4 5; do
    port=$(tc_free_port) || tc_die "no free port"
    {
      echo "bind $TC_RIP"
      echo "port $port"
      echo "dir $dir"
      echo "daemonize yes"
      echo "pidfile $dir/sentinel.pid"
      echo "logfile $dir/sentinel.log"
      echo "protected-mode $([ "$TC_RIP" = 127.0.0.1 ] && echo yes || echo no)"
      echo "sentinel monitor m $TC_RIP $1 1"
      # 3 s: the Sentinel reconnects a dropped link only once a second, so
      # with 1 s every restart of the master would turn into a failover.
      # The planned failovers are started with SENTINEL FAILOVER.
      echo "sentinel down-after-milliseconds m 3000"
      echo "sentinel failover-timeout m 5000"
      echo "sentinel parallel-syncs m 1"
    } > "$dir/sentinel.conf"
    if tc_inr redis-server "$dir/sentinel.conf" --sentinel >/dev/null 2>&1 && tc_wait_ping "$port"; then
      TC_SENT_DIR=$dir; TC_SENT_PORT=$port
      return 0
    fi
    tc_kill_pidfile "$dir/sentinel.pid"
  done
  cat "$dir/sentinel.log" >&2 2>/dev/null
  tc_die "redis-server --sentinel would not start"
}

# The master's port as the Sentinel names it ("" when it cannot say).
tc_master_port() {
  tc_rcli "$TC_SENT_PORT" SENTINEL get-master-addr-by-name m | sed -n 2p
}

tc_role() { tc_rcli "$1" ROLE | head -n 1; }

# tc_healthy: the Sentinel's master is a master, every other node is up, a
# replica of it with the link up, and known to the Sentinel without s_down.
# When not, TC_UNHEALTHY says why.
TC_UNHEALTHY=''
tc_healthy() {
  local m i p info sv flags
  m=$(tc_master_port)
  [ -n "$m" ] || { TC_UNHEALTHY="the Sentinel names no master"; return 1; }
  [ "$(tc_role "$m")" = master ] || { TC_UNHEALTHY=":$m (the Sentinel's master) is not a master"; return 1; }
  sv=$(tc_rcli "$TC_SENT_PORT" SENTINEL replicas m)
  for i in "${!TC_NODES[@]}"; do
    p=$(tc_node_port "$i")
    [ "$p" = "$m" ] && continue
    info=$(tc_rcli "$p" INFO replication | tr -d '\r')
    grep -q '^role:slave' <<<"$info" || { TC_UNHEALTHY=":$p is not a replica"; return 1; }
    grep -q "^master_port:$m\$" <<<"$info" || { TC_UNHEALTHY=":$p replicates another master"; return 1; }
    grep -q '^master_link_status:up' <<<"$info" || { TC_UNHEALTHY=":$p's link to :$m is down"; return 1; }
    # The Sentinel's flags for this replica: plain "slave", no s_down.
    flags=$(awk -v p="$p" '
      prev == "port" && $0 == p { want = 1 }
      want && prev == "flags" { print; exit }
      { prev = $0 }' <<<"$sv")
    [ "$flags" = slave ] || { TC_UNHEALTHY="the Sentinel's flags for :$p: '$flags'"; return 1; }
  done
  TC_UNHEALTHY=''
  return 0
}

# tc_wait_healthy SECONDS: wait for tc_healthy.  A node that came back as a
# master after a failover is made a replica of the Sentinel's master after
# 1 s (the Sentinel itself would wait about 10 s).
tc_wait_healthy() {
  local i m p j
  for ((i = 0; i < $1 * 10; i++)); do
    tc_healthy && return 0
    if [ $((i % 10)) = 9 ] && m=$(tc_master_port) && [ -n "$m" ]; then
      for j in "${!TC_NODES[@]}"; do
        p=$(tc_node_port "$j")
        [ "$p" != "$m" ] && [ "$(tc_role "$p")" = master ] && tc_rcli "$p" REPLICAOF "$TC_RIP" "$m" >/dev/null
      done
    fi
    sleep 0.1
  done
  return 1
}

# ---- PostgreSQL ---------------------------------------------------------------
tc_as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

tc_pg_start() {
  local dir="$TC_DIR/pg" port try
  TC_PG_BINDIR=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$TC_PG_BINDIR" ] && [ -x "$TC_PG_BINDIR/initdb" ] || \
    tc_die "PostgreSQL server binaries not found: run scripts/install-deps"
  mkdir -p "$dir"
  chmod 755 "$TC_DIR" "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$dir"
  tc_as_pg "$TC_PG_BINDIR/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 \
    --locale=C >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; tc_die "initdb failed"; }
  TC_PG_DIR=$dir
  for try in 1 2 3 4 5; do
    port=$(tc_free_port) || tc_die "no free port"
    # synchronous_commit stays on: a commit a worker saw succeed must survive
    # an immediate (crash) restart.  fsync=off is safe: only PostgreSQL
    # crashes here, never the kernel.
    if tc_as_pg "$TC_PG_BINDIR/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c full_page_writes=off -c max_connections=60" \
        start >/dev/null 2>&1; then
      TC_PG_PORT=$port
      return 0
    fi
  done
  cat "$dir/server.log" >&2 2>/dev/null
  tc_die "PostgreSQL would not start"
}

# tc_pg_restart fast|immediate (immediate: a crash, then WAL recovery)
tc_pg_restart() {
  tc_as_pg "$TC_PG_BINDIR/pg_ctl" -D "$TC_PG_DIR/data" -l "$TC_PG_DIR/server.log" \
    -m "$1" -w -t 60 restart >/dev/null 2>&1
}

tc_pg_up() {
  tc_as_pg "$TC_PG_BINDIR/pg_ctl" -D "$TC_PG_DIR/data" status >/dev/null 2>&1
}

tc_stop_all() {
  local i
  [ -n "$TC_SENT_DIR" ] && tc_kill_pidfile "$TC_SENT_DIR/sentinel.pid"
  for i in "${!TC_NODES[@]}"; do
    tc_kill_pidfile "${TC_NODES[$i]}/redis.pid"
  done
  if [ -n "$TC_PG_DIR" ] && [ -d "$TC_PG_DIR/data" ]; then
    tc_as_pg "$TC_PG_BINDIR/pg_ctl" -D "$TC_PG_DIR/data" -m immediate -w stop >/dev/null 2>&1
  fi
  return 0
}
