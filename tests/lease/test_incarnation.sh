#!/usr/bin/env bash
# test_incarnation.sh -- the incarnation rule of issue.lua (in front of acquire.lua) on real servers
# (issue 20): the counter's run is "<run_id>:<master_replid>", but the
# script reads INFO server (run_id) only when the counter's run does not
# end in this master's master_replid (INFO replication, a tenth of the
# size).  That is exact if master_replid is new whenever a server can have
# missed tokens of its own name's counter: at every start and every
# promotion, never inherited by a master.  This suite checks both halves
# on servers of its own (scripts/redis-set): the master_replid facts, and
# the token of acquire.lua itself in each case.
#
# The counter is kept ahead of the clock (jump J = 100 s, the test takes a
# few seconds), so the rule gives exactly n + 1 on the same incarnation and
# n + 1 + J on a new one: each case asserts the exact token.
#   FENCE_SUITES=test_incarnation scripts/run-suites build
set -uo pipefail
cd "$(dirname "$0")/../.."

n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; }
die() { echo "not ok $((n + 1)) - setup: $*"; exit 1; }

[ -n "${FENCE_TEST_SPAWN_DIR:-}" ] && [ -n "${FENCE_TEST_REDIS_SET:-}" ] ||
  die "FENCE_TEST_SPAWN_DIR / FENCE_TEST_REDIS_SET not set: run it under scripts/with-servers"
command -v redis-cli >/dev/null || die "redis-cli not found: run scripts/install-deps"

SOLO=$(mktemp -d "$FENCE_TEST_SPAWN_DIR/incarnation-solo.XXXXXX")
PAIR=$(mktemp -d "$FENCE_TEST_SPAWN_DIR/incarnation-pair.XXXXXX")
trap '"$FENCE_TEST_REDIS_SET" stop "$SOLO"; "$FENCE_TEST_REDIS_SET" stop "$PAIR"' EXIT

J=100000000 # the jump, µs
OWNER=0123456789abcdef0123456789abcdef
ACQUIRE=$(printf '%s\n%s' "$(cat lib/lease/redis/issue.lua)" "$(cat lib/lease/redis/acquire.lua)")

rc() { local p=$1; shift; redis-cli -h 127.0.0.1 -p "$p" --raw "$@"; }
field() { rc "$1" info "$2" | tr -d '\r' | sed -n "s/^$3://p"; }
replid() { field "$1" replication master_replid; }
runid() { field "$1" server run_id; }
role() { field "$1" replication role; }
counter() { rc "$1" hget "fence:{$2}:token" n; }
run_of() { rc "$1" hget "fence:{$2}:token" run; }
# issue PORT NAME: one acquisition by acquire.lua with the library's
# arguments (clock tokens, jump J, no clock limit, idle 1 day), the owner
# key freed first (a release); prints the token.
issue() {
  rc "$1" del "fence:{$2}" >/dev/null
  local out
  out=$(rc "$1" eval "$ACQUIRE" 2 "fence:{$2}" "fence:{$2}:token" "$OWNER" 60000 clock "$J" 0 86400000)
  [ "$(echo "$out" | sed -n 1p)" = 1 ] || { echo "acquire failed: $out" >&2; echo 0; return; }
  echo "$out" | sed -n 2p
}
# expect WHAT PORT NAME BEFORE TOKEN JUMPED(0|1): the token is exactly
# BEFORE + 1 (+ J when JUMPED), and the counter's run names this server,
# "<run_id>:<master_replid>" (what every fence 0.2+ script compares).
expect() {
  local what=$1 port=$2 name=$3 before=$4 tok=$5 jumped=$6
  local want=$((before + 1 + jumped * J)) run have
  run=$(run_of "$port" "$name"); have="$(runid "$port"):$(replid "$port")"
  if [ "$tok" = "$want" ] && [ "$run" = "$have" ]; then
    ok "$what: token $tok = n + 1$([ "$jumped" = 1 ] && echo " + jump"), run is this server's \"<run_id>:<master_replid>\""
  else
    nok "$what: token $tok, expected $want (n $before$([ "$jumped" = 1 ] && echo ", jump $J")); run '$run', the server's '$have'"
  fi
}
wait_for() { # wait_for SECONDS CMD...: poll CMD every 50 ms
  local i
  for i in $(seq 1 $(($1 * 20))); do "${@:2}" && return 0; sleep 0.05; done
  return 1
}

# ---- one server: restarts from RDB and from AOF --------------------------
"$FENCE_TEST_REDIS_SET" start "$SOLO" solo || die "redis-set solo would not start"
. "$SOLO/env"
M=$MASTER_PORT
t0=$(issue "$M" job) # a new counter: clock + J, ahead of the clock from here on
t1=$(issue "$M" job)
expect "same master, next acquisition (INFO replication only)" "$M" job "$t0" "$t1" 0

# Restart from an RDB file: SAVE, stop (the set's servers have save ""),
# start again in the same folder.
id0=$(runid "$M"); rep0=$(replid "$M")
rc "$M" save >/dev/null
scripts/redis-ctl "$SOLO/master" stop && scripts/redis-ctl "$SOLO/master" start ||
  die "the master would not restart"
id1=$(runid "$M"); rep1=$(replid "$M")
if [ "$id1" != "$id0" ] && [ "$rep1" != "$rep0" ] && [ "$(counter "$M" job)" = "$t1" ]; then
  ok "restart from RDB: new run_id and new master_replid, the counter kept"
else
  nok "restart from RDB: run_id $id0 -> $id1, master_replid $rep0 -> $rep1, n $(counter "$M" job) (was $t1)"
fi
t2=$(issue "$M" job)
expect "restart from RDB, first acquisition" "$M" job "$t1" "$t2" 1
t3=$(issue "$M" job)
expect "restart from RDB, second acquisition" "$M" job "$t2" "$t3" 0

# Restart from an AOF alone: appendonly on (kept in redis.conf by CONFIG
# REWRITE), the RDB file removed, stop, start.
rc "$M" config set appendonly yes >/dev/null
aof_done() { [ "$(field "$M" persistence aof_rewrite_in_progress)" = 0 ] &&
             [ "$(field "$M" persistence aof_rewrite_scheduled)" = 0 ]; }
wait_for 10 aof_done || die "the AOF rewrite did not finish"
t4=$(issue "$M" job) # written to the AOF
rc "$M" config rewrite >/dev/null || die "CONFIG REWRITE failed"
id2=$(runid "$M"); rep2=$(replid "$M")
scripts/redis-ctl "$SOLO/master" stop || die "the master would not stop"
rm -f "$SOLO/master/dump.rdb"
scripts/redis-ctl "$SOLO/master" start || die "the master would not start from its AOF"
id3=$(runid "$M"); rep3=$(replid "$M")
if [ "$(field "$M" persistence aof_enabled)" = 1 ] && [ ! -e "$SOLO/master/dump.rdb" ] &&
   [ "$id3" != "$id2" ] && [ "$rep3" != "$rep2" ] && [ "$(counter "$M" job)" = "$t4" ]; then
  ok "restart from AOF: new run_id and new master_replid, the counter kept (from the AOF alone)"
else
  nok "restart from AOF: aof_enabled $(field "$M" persistence aof_enabled), run_id $id2 -> $id3, master_replid $rep2 -> $rep3, n $(counter "$M" job) (was $t4)"
fi
t5=$(issue "$M" job)
expect "restart from AOF, first acquisition" "$M" job "$t4" "$t5" 1

# ---- master + replica: promotions, a demoted master, a writable replica --
"$FENCE_TEST_REDIS_SET" start "$PAIR" replica || die "redis-set replica would not start"
. "$PAIR/env"
A=$MASTER_PORT B=$REPLICA_PORT
synced() { [ "$(rc "$1" wait 1 2000)" = 1 ]; }
u0=$(issue "$A" job)
u1=$(issue "$A" job)
synced "$A" || die "the replica did not acknowledge"
if [ "$(role "$B")" = slave ] && [ "$(replid "$B")" = "$(replid "$A")" ] &&
   [ "$(counter "$B" job)" = "$u1" ]; then
  ok "a replica has its master's master_replid (role:slave) and the counter"
else
  nok "replica: role $(role "$B"), master_replid $(replid "$B") (master's $(replid "$A")), n $(counter "$B" job)"
fi

# A restart of a master that has a replica: its RDB file carries the
# replication id (Redis 4.0.0 and 4.0.1 restored it on a master; since
# 4.0.2 a master keeps it only as master_replid2).
ida=$(runid "$A"); repa=$(replid "$A")
rc "$A" save >/dev/null
scripts/redis-ctl "$PAIR/master" stop && scripts/redis-ctl "$PAIR/master" start ||
  die "the master (with a replica) would not restart"
if [ "$(runid "$A")" != "$ida" ] && [ "$(replid "$A")" != "$repa" ] &&
   [ "$(field "$A" replication master_replid2)" = "$repa" ] && [ "$(counter "$A" job)" = "$u1" ]; then
  ok "restart from RDB of a master with a replica: new run_id, new master_replid (the file's is master_replid2), the counter kept"
else
  nok "restart of a master with a replica: run_id $ida -> $(runid "$A"), master_replid $repa -> $(replid "$A") (replid2 $(field "$A" replication master_replid2)), n $(counter "$A" job) (was $u1)"
fi
u3=$(issue "$A" job)
expect "restart of a master with a replica, first acquisition" "$A" job "$u1" "$u3" 1
relinked() { [ "$(field "$B" replication master_link_status)" = up ] &&
             [ "$(replid "$B")" = "$(replid "$A")" ]; }
wait_for 10 relinked || die "the replica did not reconnect to the restarted master"
synced "$A" || die "the replica did not acknowledge after the restart"

# A writable replica shares the master's master_replid: it must read run_id
# (role:slave), and its run_id is not the master's, so it jumps.
rc "$B" config set replica-read-only no >/dev/null
nw=$(counter "$B" job)
w=$(issue "$B" job)
expect "writable replica (role:slave: INFO server read)" "$B" job "$nw" "$w" 1
rc "$B" config set replica-read-only yes >/dev/null

# Promotion: REPLICAOF NO ONE.
rep_b=$(replid "$B")
rc "$B" replicaof no one >/dev/null
if [ "$(replid "$B")" != "$rep_b" ] && [ "$(field "$B" replication master_replid2)" = "$rep_b" ]; then
  ok "REPLICAOF NO ONE: a new master_replid (the inherited one becomes master_replid2)"
else
  nok "REPLICAOF NO ONE: master_replid $rep_b -> $(replid "$B")"
fi
# The replica's own write above went nowhere; its copy of the master's
# counter was overwritten on the next sync, or is its own: issue on a fresh
# name's counter copied from the master instead.
u2=$(issue "$A" other) # A is still a master too (split for a moment)
rc "$A" replicaof 127.0.0.1 "$B" >/dev/null
# A, demoted: it loads B's data; then it is promoted again with its run_id.
in_sync() { [ "$(field "$A" replication master_link_status)" = up ] &&
            [ "$(replid "$A")" = "$(replid "$B")" ]; }
wait_for 10 in_sync || die "the demoted master did not sync with the promoted one"
nb=$(counter "$B" job)
v=$(issue "$B" job)
expect "promoted replica, first acquisition" "$B" job "$nb" "$v" 1
v2=$(issue "$B" job)
expect "promoted replica, second acquisition" "$B" job "$v" "$v2" 0
synced "$B" || die "the demoted master did not acknowledge"
ida=$(runid "$A")
rc "$A" replicaof no one >/dev/null
if [ "$(runid "$A")" = "$ida" ] && [ "$(replid "$A")" != "$(replid "$B")" ]; then
  ok "a master demoted, resynced and promoted again: the same run_id, a new master_replid"
else
  nok "promoted again: run_id $ida -> $(runid "$A"), master_replid $(replid "$A") (B's $(replid "$B"))"
fi
# Relative to the copy A has (the rule's input), whichever it is.
na=$(counter "$A" job)
x=$(issue "$A" job)
expect "promoted again (same run_id), first acquisition" "$A" job "$na" "$x" 1

# FAILOVER (Redis 6.2+): the coordinated switch, B a replica of A again.
rc "$B" replicaof 127.0.0.1 "$A" >/dev/null
b_sync() { [ "$(field "$B" replication master_link_status)" = up ] &&
           [ "$(replid "$B")" = "$(replid "$A")" ]; }
wait_for 10 b_sync || die "B did not sync with A"
x2=$(issue "$A" job)
synced "$A" || die "B did not acknowledge"
rep_a=$(replid "$A")
rc "$A" failover >/dev/null || die "FAILOVER was refused"
promoted() { [ "$(role "$B")" = master ] && [ "$(role "$A")" = slave ]; }
wait_for 10 promoted || die "FAILOVER did not complete: A $(role "$A"), B $(role "$B")"
if [ "$(replid "$B")" != "$rep_a" ]; then
  ok "FAILOVER: the new master has a new master_replid"
else
  nok "FAILOVER: the new master kept master_replid $rep_a"
fi
ny=$(counter "$B" job)
y=$(issue "$B" job)
expect "after FAILOVER, first acquisition" "$B" job "$ny" "$y" 1
[ "$ny" = "$x2" ] || echo "# FAILOVER: B's copy n=$ny, A issued $x2 last"
[ "$u2" -gt 0 ] || nok "the split master's own acquisition failed"

# A counter written by the scripts before this change (same format, this
# server's "<run_id>:<master_replid>") is the same incarnation: no jump.
rc "$B" hset "fence:{job}:token" run "$(runid "$B"):$(replid "$B")" >/dev/null
nz=$(counter "$B" job)
z=$(issue "$B" job)
expect "counter stamped as the previous script did" "$B" job "$nz" "$z" 0
