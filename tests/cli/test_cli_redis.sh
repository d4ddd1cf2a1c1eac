#!/usr/bin/env bash
# test_cli_redis.sh -- `fence run` / `fence status` end to end against the
# production shapes of Redis, each a set of servers of this suite's own on
# 127.0.0.1 (tests/cli/redis_sets.sh; stopped on exit, also on failure):
#   1. mutual TLS (tls-auth-clients yes; CA and certificates made here with
#      openssl): --tls --cacert --cacertdir --cert --key --sni --insecure and
#      the FENCE_REDIS_CACERT/CERT/KEY/SNI variables; without the client
#      certificate, with the wrong CA, a foreign client certificate or a
#      wrong --sni it fails with 69 and a message naming the problem;
#   2. a Sentinel URL (scripts/redis-set sentinel; the URL lists a Sentinel
#      that is down before the live one): the lease is on the master the
#      Sentinel names, tokens rise, status shows the holder; the master is
#      killed, the replica promoted: the running command keeps its lease
#      (--min-replicas 1), and a new run works there with a higher token;
#   3. Sentinels with a password of their own (and the data node another):
#      given by variable or file, fence runs through them; a wrong or
#      missing password fails clearly; neither password is in the
#      cmdline/environ of fence or of its command.
# Run by scripts/run-suites inside scripts/with-servers --redis:
#   FENCE_SUITES=test_cli_redis scripts/with-servers --redis -- scripts/run-suites build
# Prints "ok N - ..." / "not ok N - ..." lines and a closing plan; exits
# non-zero on any failure.  A server or tool that is missing fails loudly.
. "$(dirname "$0")/cli_common.sh"
# shellcheck source=tests/cli/redis_sets.sh
. tests/cli/redis_sets.sh

# Numbered TAP lines (cli_common.sh's ok/nok, with the test's number).
tapn=0
ok() { tapn=$((tapn + 1)); echo "ok $tapn - $*"; pass=$((pass + 1)); }
nok() { tapn=$((tapn + 1)); echo "not ok $tapn - $*"; fail=$((fail + 1)); }
cleanup_suite() { redis_sets_stop; }   # called by cli_common.sh's exit trap
trap 'exit 130' INT
trap 'exit 143' TERM

need() { # need WHAT: a setup step failed -- a failure, never a skip
  nok "setup: $*"
}
for tool in redis-server redis-cli openssl; do
  command -v "$tool" > /dev/null || need "$tool is not installed (scripts/install-deps)"
done
if [ -z "${FENCE_TEST_SPAWN_DIR:-}" ] || [ -z "${FENCE_TEST_REDIS_SET:-}" ]; then
  need "FENCE_TEST_SPAWN_DIR / FENCE_TEST_REDIS_SET not set (run under scripts/with-servers)"
  exit 1
fi

# The command fence runs: writes its token, holder, FENCE_REDIS_URL and pid
# next to $1, then holds the lease until $1.stop exists.
HOLD='printf "%s\n" "$FENCE_TOKEN" > "$1.tok"; printf "%s\n" "$FENCE_HOLDER" > "$1.holder"
      printf "%s\n" "${FENCE_REDIS_URL-unset}" > "$1.url"
      echo $$ > "$1.pid.tmp"; mv "$1.pid.tmp" "$1.pid"
      while [ ! -e "$1.stop" ]; do sleep 0.02; done'
started() { wait_until 5 file_has "$1.pid"; }
finish() { # finish PREFIX FENCE_PID: let the command end; sets rc
  touch "$1.stop"; wait "$2"; rc=$?
}
# tok_gt A B: token A > token B (both non-empty decimal).
tok_gt() {
  [[ $1 =~ ^[1-9][0-9]{0,17}$ && $2 =~ ^[1-9][0-9]{0,17}$ ]] && [ "$1" -gt "$2" ]
}
# field FILE NAME: the value of "NAME: value" in fence status output.
field() { sed -n "s/^$2: *//p" "$1"; }
json_field() { # json_field FILE FIELD: a string or number field of status --json (flat, one line)
  sed -n -e "s/.*\"$2\": \"\([^\"]*\)\".*/\1/p" -e "t" -e "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"
}
# shows_holder STATUS_OUT PREFIX FENCE_PID: `fence status` exited 0 ($rc)
# and says the lease is held by the command of PREFIX (its token and holder
# id) started by that fence run (holder_info pid=).
shows_holder() {
  [ "$rc" = 0 ] && [ "$(field "$1" state)" = held ] &&
    [ "$(field "$1" holder_token)" = "$(cat "$2.tok")" ] &&
    [ "$(field "$1" holder)" = "$(cat "$2.holder")" ] &&
    grep -q "^holder_info: .*pid=$3 " "$1"
}
# grep_all FILE PATTERN...: FILE matches every (extended, case-blind) pattern.
grep_all() {
  local f=$1 p; shift
  for p in "$@"; do grep -q -i -E -- "$p" "$f" || return 1; done
}
# expect_fail WHAT RC_WANTED ERRFILE PATTERN...: the last command's rc (in
# $rc) and its stderr.
expect_fail() {
  local what=$1 want=$2 err=$3; shift 3
  if [ "$rc" = "$want" ] && grep_all "$err" "$@"; then
    ok "$what"
  else
    nok "$what (exit $rc, wanted $want and /$*/; stderr: $(head -c 300 "$err"))"
  fi
}

# =========================================================================
# 1. Mutual TLS
# =========================================================================
tls_suite() {
  local C=$T/certs TLSSET TP U rc fp n t1 t2
  if ! redis_make_certs "$C" 2> "$T/certs.err"; then
    need "openssl could not make the certificates: $(tail -n 3 "$T/certs.err")"
    return
  fi
  if ! FENCE_TLS_DIR=$C redis_set_start TLSSET tls "tls-auth-clients yes" 2> "$T/tlsset.err"; then
    need "the mutual-TLS Redis (scripts/redis-set tls) would not start: $(tail -n 3 "$T/tlsset.err")"
    return
  fi
  TP=$(sed -n 's/^TLS_PORT=//p' "$TLSSET/env")
  U=redis://127.0.0.1:$TP
  local MTLS=(--redis "$U" --tls --cacert "$C/ca.crt" --cert "$C/client.crt" --key "$C/client.key")

  # ---- fence run with CA + client certificate (options) ----------------------
  n=$(name)
  "$F" run --ttl 2s "${MTLS[@]}" "$n" -- sh -c "$HOLD" sh "$T/m1" 2> "$T/m1.err" &
  fp=$!; BG+=("$fp")
  if ! started "$T/m1"; then
    nok "mTLS: fence run --tls --cacert --cert --key starts the command ($(head -c 300 "$T/m1.err"))"
  else
    t1=$(cat "$T/m1.tok")
    check "mTLS: fence run --tls --cacert --cert --key runs the command with a token" \
      test -n "$t1" -a "$t1" != 0
    # status through the variables and a rediss:// URL
    FENCE_REDIS_CACERT=$C/ca.crt FENCE_REDIS_CERT=$C/client.crt FENCE_REDIS_KEY=$C/client.key \
      "$F" status --redis "rediss://127.0.0.1:$TP" "$n" > "$T/m1.st" 2> "$T/m1.sterr"; rc=$?
    check "mTLS: fence status (rediss:// + FENCE_REDIS_CACERT/CERT/KEY) shows the lease held by the command" \
      shows_holder "$T/m1.st" "$T/m1" "$fp"
    "$F" status --json "${MTLS[@]}" "$n" > "$T/m1.json" 2> /dev/null; rc=$?
    check "mTLS: status --json over TLS: held, the same holder token" \
      test "$rc" = 0 -a "$(json_field "$T/m1.json" state) $(json_field "$T/m1.json" holder_token)" = "held $t1"
    "$F" run "${MTLS[@]}" "$n" -- touch "$T/m1.busy" 2> "$T/m1b.err"; rc=$?
    check "mTLS: a second fence run on the held lease: 75, the command does not run" \
      test "$rc" = 75 -a ! -e "$T/m1.busy"
  fi
  finish "$T/m1" "$fp"
  check "mTLS: ... fence run exits 0, nothing on stderr" test "$rc" = 0 -a ! -s "$T/m1.err"
  "$F" status "${MTLS[@]}" "$n" > "$T/m1.st2" 2> /dev/null
  check "mTLS: ... then the lease is free, last_token is the command's token" \
    test "$(field "$T/m1.st2" state)" = free -a "$(field "$T/m1.st2" last_token)" = "${t1:-x}"

  # ---- the variables alone; --cacertdir; a correct --sni ---------------------
  FENCE_REDIS_CACERT=$C/ca.crt FENCE_REDIS_CERT=$C/client.crt FENCE_REDIS_KEY=$C/client.key \
    "$F" run --redis "rediss://127.0.0.1:$TP" "$n" -- sh -c 'echo "$FENCE_TOKEN" > "$1"' sh "$T/m2.tok" \
    2> "$T/m2.err"; rc=$?
  t2=$(cat "$T/m2.tok" 2> /dev/null)
  check "mTLS: fence run with FENCE_REDIS_CACERT/CERT/KEY only: exit 0, the token rose" \
    eval '[ "$rc" = 0 ] && tok_gt "$t2" "$t1"'
  "$F" status --redis "$U" --tls --cacertdir "$C/cadir" --cert "$C/client.crt" --key "$C/client.key" \
    "$n" > /dev/null 2> "$T/m3.err"; rc=$?
  check "mTLS: --cacertdir (rehashed) + client certificate: exit 0" test "$rc" = 0
  FENCE_REDIS_CACERTDIR=$C/cadir FENCE_REDIS_CERT=$C/client.crt FENCE_REDIS_KEY=$C/client.key \
    "$F" token --redis "rediss://127.0.0.1:$TP" "$n" > "$T/m3.tok" 2> /dev/null; rc=$?
  check "mTLS: fence token with FENCE_REDIS_CACERTDIR: exit 0, the last token" \
    test "$rc" = 0 -a "$(cat "$T/m3.tok")" = "${t2:-x}"
  "$F" status "${MTLS[@]}" --sni localhost "$n" > /dev/null 2>&1; rc=$?
  check "mTLS: --sni localhost (a name in the certificate): exit 0" test "$rc" = 0

  # ---- failures, each with a message naming the problem --------------------------
  "$F" run --redis "$U" --tls --cacert "$C/ca.crt" "$(name)" -- touch "$T/f1.ran" 2> "$T/f1.err"; rc=$?
  # The server's alert ("certificate required") races with its reset of the
  # connection; after a reset fence says no client certificate was given:
  # either way the message names the certificate; the command must not run.
  expect_fail "mTLS: no client certificate: fence run exits 69, the message names the certificate" \
    69 "$T/f1.err" 'TLS: .*(certificate required|reset by peer \(no client certificate was given)'
  check "... and the command did not run" test ! -e "$T/f1.ran"
  FENCE_REDIS_CACERT=$C/ca.crt "$F" status --redis "rediss://127.0.0.1:$TP" "$(name)" \
    > /dev/null 2> "$T/f1s.err"; rc=$?
  expect_fail "mTLS: no client certificate: fence status exits 69 (TLS)" 69 "$T/f1s.err" 'TLS'

  "$F" run --redis "$U" --tls --cacert "$C/other-ca.crt" --cert "$C/client.crt" --key "$C/client.key" \
    "$(name)" -- touch "$T/f2.ran" 2> "$T/f2.err"; rc=$?
  expect_fail "mTLS: the wrong CA: 69, 'certificate verification failed'" 69 "$T/f2.err" \
    'certificate verification failed'
  check "... and the command did not run" test ! -e "$T/f2.ran"
  FENCE_REDIS_CACERT=$C/other-ca.crt "$F" status --redis "rediss://127.0.0.1:$TP" \
    --cert "$C/client.crt" --key "$C/client.key" "$(name)" > /dev/null 2> "$T/f2s.err"; rc=$?
  expect_fail "mTLS: the wrong CA in FENCE_REDIS_CACERT: status 69, verification failed" 69 \
    "$T/f2s.err" 'certificate verification failed'

  "$F" status --redis "$U" --tls --cacert "$C/ca.crt" --cert "$C/rogue.crt" --key "$C/rogue.key" \
    "$(name)" > /dev/null 2> "$T/f3.err"; rc=$?
  expect_fail "mTLS: a client certificate of another CA: 69 with a TLS error" 69 "$T/f3.err" \
    'TLS: .*(unknown ca|reset by peer|certificate)'

  "$F" run "${MTLS[@]}" --sni wrong.example "$(name)" -- touch "$T/f4.ran" 2> "$T/f4.err"; rc=$?
  expect_fail "mTLS: --sni wrong.example: 69, 'hostname mismatch'" 69 "$T/f4.err" 'hostname mismatch'
  check "... and the command did not run" test ! -e "$T/f4.ran"
  FENCE_REDIS_SNI=wrong.example "$F" status "${MTLS[@]}" "$(name)" > /dev/null 2> "$T/f5.err"; rc=$?
  expect_fail "mTLS: FENCE_REDIS_SNI=wrong.example: 69, 'hostname mismatch'" 69 "$T/f5.err" \
    'hostname mismatch'

  "$F" run --redis "$U" --tls --cacert "$C/ca.crt" --cert "$C/client.crt" "$(name)" -- \
    touch "$T/f6.ran" 2> "$T/f6.err"; rc=$?
  expect_fail "mTLS: --cert without --key: 64, they go together" 64 "$T/f6.err" 'cert.*key'
  "$F" status --redis "$U" --tls --cacert "$C/ca.crt" --cert "$C/client.crt" --key "$C/rogue.key" \
    "$(name)" > /dev/null 2> "$T/f7.err"; rc=$?
  expect_fail "mTLS: a key that is not the certificate's: 64, 'does not match'" 64 "$T/f7.err" \
    'does not match'
  check "... nothing ran" test ! -e "$T/f6.ran"

  # ---- --insecure: no CA needed (the client certificate still is) --------------
  n=$(name)
  "$F" run --redis "$U" --tls --insecure --cert "$C/client.crt" --key "$C/client.key" "$n" -- \
    sh -c 'echo "$FENCE_TOKEN" > "$1"' sh "$T/i1.tok" 2> "$T/i1.err"; rc=$?
  check "mTLS: fence run --insecure (no CA) with the client certificate: exit 0, the command ran" \
    test "$rc" = 0 -a -s "$T/i1.tok"
  check "... and fence says the server was not verified" grep -q 'not verified' "$T/i1.err"
  FENCE_REDIS_CERT=$C/client.crt FENCE_REDIS_KEY=$C/client.key \
    "$F" status --redis "rediss://127.0.0.1:$TP" --insecure "$n" > "$T/i2.st" 2> "$T/i2.err"; rc=$?
  check "mTLS: fence status --insecure (rediss://, client certificate from the variables): exit 0" \
    test "$rc" = 0 -a "$(field "$T/i2.st" last_token)" = "$(cat "$T/i1.tok" 2> /dev/null)"
  "$F" status --redis "$U" --tls --insecure "$(name)" > /dev/null 2> "$T/i3.err"; rc=$?
  expect_fail "mTLS: --insecure without a client certificate is still refused by the server: 69" \
    69 "$T/i3.err" 'TLS'
  # An explicit --insecure wins over CA / name defaults from the environment
  # (even wrong ones), and contradicts them on the command line.
  FENCE_REDIS_CACERT=$C/rogue.crt FENCE_REDIS_SNI=wrong.example FENCE_REDIS_CERT=$C/client.crt \
    FENCE_REDIS_KEY=$C/client.key "$F" status --redis "$U" --tls --insecure "$n" > "$T/i4.st" \
    2> "$T/i4.err"; rc=$?
  check "mTLS: --insecure ignores FENCE_REDIS_CACERT / FENCE_REDIS_SNI: exit 0" \
    test "$rc" = 0 -a "$(field "$T/i4.st" last_token)" = "$(cat "$T/i1.tok" 2> /dev/null)"
  "$F" status --redis "$U" --tls --insecure --cacert "$C/ca.crt" "$n" > /dev/null \
    2> "$T/i5.err"; rc=$?
  expect_fail "mTLS: --insecure beside --cacert: 64, named" 64 "$T/i5.err" 'insecure.*cacert'
}

# =========================================================================
# 2. A Sentinel URL: a master, a replica, a Sentinel; a failover
# =========================================================================
sentinel_suite() {
  local S rc fp n t1 t2 t3 SU MP NP dead p0 p1 renewed
  if ! redis_set_start S sentinel 2> "$T/s3.err"; then
    need "the Sentinel set (scripts/redis-set sentinel) would not start: $(tail -n 3 "$T/s3.err")"
    return
  fi
  . "$S/env"   # MASTER_PORT, REPLICA_PORT, SENTINEL_PORT
  MP=$MASTER_PORT
  # Two Sentinels listed; the first is down (a closed loopback port), so
  # every connection -- the heartbeat's reconnect after the failover too --
  # has to go on to the next one.
  dead=$(fence_free_port)
  SU="redis-sentinel://127.0.0.1:$dead,127.0.0.1:$SENTINEL_PORT#fence-m"
  n=$(name)

  # ---- two runs through the Sentinel URL; the lease is on the master it names --
  "$F" run --ttl 2s --redis "$SU" "$n" -- sh -c \
    'echo "$FENCE_TOKEN" > "$1"; redis-cli -h 127.0.0.1 -p "$2" exists "fence:{$3}" > "$1.onmaster"' \
    sh "$T/s1.tok" "$MP" "$n" 2> "$T/s1.err"; rc=$?
  t1=$(cat "$T/s1.tok" 2> /dev/null)
  check "Sentinel: fence run --redis redis-sentinel://DOWN,UP#fence-m: exit 0, a token" \
    test "$rc" = 0 -a -n "$t1" -a ! -s "$T/s1.err"
  check "... while it ran, the lease key was on the master the Sentinel names" \
    test "$(cat "$T/s1.tok.onmaster" 2> /dev/null)" = 1

  # The second run holds the lease (and waits for the replica to have it)
  # across the failover below.
  FENCE_REDIS_URL=$SU "$F" run --ttl 6s --min-replicas 1 --replica-timeout 2s "$n" -- \
    sh -c "$HOLD" sh "$T/s2" 2> "$T/s2.err" &
  fp=$!; BG+=("$fp")
  if ! started "$T/s2"; then
    nok "Sentinel: fence run (FENCE_REDIS_URL, --min-replicas 1) starts the command ($(head -c 300 "$T/s2.err"))"
    finish "$T/s2" "$fp"
    return
  fi
  t2=$(cat "$T/s2.tok")
  check "Sentinel: a second run (FENCE_REDIS_URL): its token is higher than the first's" tok_gt "$t2" "$t1"
  check "... the command's FENCE_REDIS_URL is the Sentinel URL" test "$(cat "$T/s2.url")" = "$SU"
  "$F" status --redis "$SU" "$n" > "$T/s2.st" 2> "$T/s2.sterr"; rc=$?
  check "Sentinel: fence status through the Sentinel URL shows the holder (state, token, holder id, pid)" \
    shows_holder "$T/s2.st" "$T/s2" "$fp"
  check "... and names the server by the Sentinel URL" \
    grep -q '^redis: *redis-sentinel://127\.0\.0\.1:[0-9]*,.*#fence-m$' "$T/s2.st"
  "$F" status --json --redis "$SU" "$n" > "$T/s2.json" 2> /dev/null
  check "Sentinel: status --json: held, \"redis\" is the Sentinel URL" \
    test "$(json_field "$T/s2.json" state) $(json_field "$T/s2.json" redis | cut -c1-17)" = "held redis-sentinel://"
  "$F" run --redis "$SU" "$n" -- touch "$T/s2.busy" 2> /dev/null; rc=$?
  check "Sentinel: another run on the held lease: 75, the command does not run" \
    test "$rc" = 75 -a ! -e "$T/s2.busy"
  "$F" status --redis "redis-sentinel://127.0.0.1:$SENTINEL_PORT/0#fence-m" "$n" \
    > "$T/s2d.st" 2> "$T/s2d.err"; rc=$?
  check "Sentinel: status through the live Sentinel alone (/0 given): held, same token" \
    test "$rc" = 0 -a "$(field "$T/s2d.st" holder_token)" = "$t2"

  # ---- the master is killed; the Sentinels promote a replica -------------------
  local tkill; tkill=$(( $(date +%s%N) / 1000000 ))
  scripts/redis-ctl "$S/master" kill
  NP=$(settled_master 10) || NP=
  echo "# the Sentinel settled after $(( $(date +%s%N) / 1000000 - tkill )) ms (1 s of it to be sure);" \
       "switch-master events in its log: $(grep -c switch-master "$S/sentinel/redis.log")"
  if [ -z "$NP" ]; then
    nok "Sentinel: after the master was killed, the Sentinel promoted the replica and settled (state: $(cat "$T/settle.last" 2>/dev/null))"
    finish "$T/s2" "$fp"
    return
  fi
  ok "Sentinel: the master killed, the Sentinel promoted the replica on port $NP"
  # The running command's heartbeat renews on the new master: its key's
  # TTL there goes up again (it only falls without a renewal).
  renewed=0
  p0=$(redis-cli -h 127.0.0.1 -p "$NP" pttl "fence:{$n}")
  check "... the promoted replica had the lease key (--min-replicas 1)" test "${p0:--2}" -ge 0
  for _ in $(seq 1 150); do   # at most about 3.5 s (TTL/3 is 2 s)
    p1=$(redis-cli -h 127.0.0.1 -p "$NP" pttl "fence:{$n}")
    if [ "${p1:--2}" -gt "${p0:--2}" ] 2>/dev/null; then renewed=1; break; fi
    [ "${p1:--2}" -ge 0 ] 2>/dev/null && p0=$p1
    sleep 0.02
  done
  check "Sentinel: the running fence's heartbeat followed the failover (renewed on the new master)" \
    test "$renewed" = 1
  "$F" status --redis "$SU" "$n" > "$T/s3.st" 2> /dev/null; rc=$?
  check "... status through the Sentinel URL: still held by the same token" \
    test "$rc" = 0 -a "$(field "$T/s3.st" state)" = held -a "$(field "$T/s3.st" holder_token)" = "$t2"
  finish "$T/s2" "$fp"
  check "... the command ends normally: fence exits 0 (the lease was not lost)" \
    test "$rc" = 0
  check "... and the lease was released on the new master" key_gone_at "$NP" "$n"

  # ---- a new run after the failover --------------------------------------------
  "$F" run --ttl 2s --redis "$SU" "$n" -- sh -c \
    'echo "$FENCE_TOKEN" > "$1"; redis-cli -h 127.0.0.1 -p "$2" exists "fence:{$3}" > "$1.onmaster"' \
    sh "$T/s4.tok" "$NP" "$n" 2> "$T/s4.err"; rc=$?
  t3=$(cat "$T/s4.tok" 2> /dev/null)
  check "Sentinel: after the failover fence run works through the same URL (exit 0)" \
    test "$rc" = 0 -a -n "$t3"
  check "... on the new master (the lease key was there while the command ran)" \
    test "$(cat "$T/s4.tok.onmaster" 2> /dev/null)" = 1
  check "... with a higher token than every run before the failover" tok_gt "$t3" "$t2"
  "$F" status --redis "$SU" "$n" > "$T/s4.st" 2> /dev/null; rc=$?
  check "Sentinel: status after the failover: free, last_token is the new run's" \
    test "$rc" = 0 -a "$(field "$T/s4.st" state)" = free -a "$(field "$T/s4.st" last_token)" = "$t3"
}
# failover_state: the new master's port once the Sentinel names another
# master than the killed one, with flags "master" only (no s_down, o_down,
# failover in progress), and that node says it is a master.
failover_state() {
  local p f
  p=$(redis-cli -h 127.0.0.1 -p "$SENTINEL_PORT" sentinel get-master-addr-by-name fence-m 2>/dev/null | tail -n 1)
  [ -n "$p" ] && [ "$p" != "$MASTER_PORT" ] || return 1
  f=$(redis-cli -h 127.0.0.1 -p "$SENTINEL_PORT" sentinel master fence-m 2>/dev/null | sed -n '/^flags$/{n;p}')
  [ "$f" = master ] || return 1
  [ "$(redis-cli -h 127.0.0.1 -p "$p" role 2>/dev/null | head -n 1)" = master ] || return 1
  echo "$p"
}
# settled_master SECONDS: waits until failover_state has named the same
# master for 1 s in a row; prints its port.  (Not scripts/redis-set
# sentinel3: with down-after-milliseconds 200 its three Sentinels mostly
# fail over four to six times in a row, for 4 to 10 s, with two masters at
# once meanwhile; one Sentinel fails over once, in about a second.)
settled_master() {
  local end p cur='' since=0 now
  end=$(( $(date +%s%N) / 1000000 + $1 * 1000 ))
  while now=$(( $(date +%s%N) / 1000000 )); [ "$now" -lt "$end" ]; do
    p=$(failover_state) || p=
    if [ -n "$p" ] && [ "$p" = "$cur" ]; then
      [ $((now - since)) -ge 1000 ] && { echo "$p"; return 0; }
    else
      cur=$p; since=$now
    fi
    echo "${p:-unsettled} at $now (deadline $end)" > "$T/settle.last"
    sleep 0.05
  done
  return 1
}
key_gone_at() { [ "$(redis-cli -h 127.0.0.1 -p "$1" exists "fence:{$2}")" = 0 ]; }

# =========================================================================
# 3. Sentinels with a password of their own
# =========================================================================
auth_sentinel_suite() {
  local DPW="DataNodePw-$$-q7" SPW="SentinelPw-$$-k9" A rc fp n t1 t2 SU
  if ! redis_auth_sentinel_set A "$DPW" "$SPW" 2> "$T/as.err"; then
    need "the password-protected Sentinel set would not start: $(tail -n 3 "$T/as.err")"
    return
  fi
  . "$A/env"   # MASTER_PORT, SENTINEL_PORT
  SU="redis-sentinel://127.0.0.1:$SENTINEL_PORT#fence-m"
  # no_secret FILE...: none of the files holds either password.
  no_secret() { ! grep -a -q -F -e "$DPW" -e "$SPW" "$@"; }
  snap() { # snap PREFIX FENCE_PID: cmdline/environ of fence and of its command
    local p=$1 cp
    started "$p" || return 1
    cp=$(cat "$p.pid")
    tr '\0' '\n' < "/proc/$2/cmdline" > "$p.fcmd"
    tr '\0' '\n' < "/proc/$2/environ" > "$p.fenv"
    tr '\0' '\n' < "/proc/$cp/cmdline" > "$p.ccmd"
    tr '\0' '\n' < "/proc/$cp/environ" > "$p.cenv"
  }

  # ---- both passwords from the variables ------------------------------------
  n=$(name)
  FENCE_REDIS_SENTINEL_PASSWORD=$SPW FENCE_REDIS_PASSWORD=$DPW \
    "$F" run --ttl 2s --redis "$SU" "$n" -- sh -c "$HOLD" sh "$T/a1" 2> "$T/a1.err" &
  fp=$!; BG+=("$fp")
  if ! snap "$T/a1" "$fp"; then
    nok "Sentinel password (FENCE_REDIS_SENTINEL_PASSWORD): fence run starts the command ($(head -c 300 "$T/a1.err"))"
  else
    t1=$(cat "$T/a1.tok")
    ok "Sentinel password (FENCE_REDIS_SENTINEL_PASSWORD + FENCE_REDIS_PASSWORD): the command runs with token $t1"
    check "... neither password in fence's /proc/PID/cmdline or environ" no_secret "$T/a1.fcmd" "$T/a1.fenv"
    check "... nor in the command's cmdline or environ" no_secret "$T/a1.ccmd" "$T/a1.cenv"
    check "... the command gets no FENCE_REDIS_PASSWORD / FENCE_REDIS_SENTINEL_PASSWORD" \
      bash -c "! grep -q -e '^FENCE_REDIS_PASSWORD=' -e '^FENCE_REDIS_SENTINEL_PASSWORD=' '$T/a1.cenv'"
    FENCE_REDIS_SENTINEL_PASSWORD=$SPW FENCE_REDIS_PASSWORD=$DPW \
      "$F" status --redis "$SU" "$n" > "$T/a1.st" 2> /dev/null; rc=$?
    check "... fence status through the protected Sentinel shows the holder" \
      shows_holder "$T/a1.st" "$T/a1" "$fp"
    check "... the lease is on the master" \
      test "$(redis-cli -h 127.0.0.1 -p "$MASTER_PORT" --no-auth-warning -a "$DPW" exists "fence:{$n}")" = 1
  fi
  finish "$T/a1" "$fp"
  check "... fence run exits 0, nothing on stderr" test "$rc" = 0 -a ! -s "$T/a1.err"

  # ---- both from files ------------------------------------------------------------
  printf '%s\n' "$SPW" > "$T/spw"; printf '%s\n' "$DPW" > "$T/dpw"; chmod 600 "$T/spw" "$T/dpw"
  "$F" run --ttl 2s --redis "$SU" --sentinel-password-file "$T/spw" --password-file "$T/dpw" "$n" -- \
    sh -c "$HOLD" sh "$T/a2" 2> "$T/a2.err" &
  fp=$!; BG+=("$fp")
  if ! snap "$T/a2" "$fp"; then
    nok "Sentinel password (--sentinel-password-file + --password-file): the command starts ($(head -c 300 "$T/a2.err"))"
  else
    t2=$(cat "$T/a2.tok")
    check "Sentinel password (--sentinel-password-file + --password-file): the command runs, token rose" \
      tok_gt "$t2" "$t1"
    check "... no password in the cmdline/environ of fence or the command" \
      no_secret "$T/a2.fcmd" "$T/a2.fenv" "$T/a2.ccmd" "$T/a2.cenv"
  fi
  finish "$T/a2" "$fp"
  check "... exit 0, nothing on stderr" test "$rc" = 0 -a ! -s "$T/a2.err"

  # ---- the data nodes' password in the URL, the Sentinels' from the variable ----
  FENCE_REDIS_SENTINEL_PASSWORD=$SPW "$F" run --ttl 2s --redis "redis-sentinel://:$DPW@127.0.0.1:$SENTINEL_PORT#fence-m" \
    "$n" -- sh -c "$HOLD" sh "$T/a3" 2> "$T/a3.err" &
  fp=$!; BG+=("$fp")
  if ! snap "$T/a3" "$fp"; then
    nok "Sentinel URL with the data password: the command starts ($(head -c 300 "$T/a3.err"))"
  else
    check "Sentinel URL with the data password: fence's argv is blanked, no password in any cmdline/environ" \
      no_secret "$T/a3.fcmd" "$T/a3.fenv" "$T/a3.ccmd" "$T/a3.cenv"
  fi
  finish "$T/a3" "$fp"
  check "... exit 0, one warning that does not repeat the password" \
    bash -c "[ $rc = 0 ] && [ \$(grep -c warning '$T/a3.err') = 1 ] && ! grep -q -F -e '$DPW' -e '$SPW' '$T/a3.err'"

  # ---- refusals -----------------------------------------------------------------
  printf 'WrongSentinelPw-77\n' > "$T/spw-bad"
  "$F" run --redis "$SU" --sentinel-password-file "$T/spw-bad" --password-file "$T/dpw" "$(name)" -- \
    touch "$T/r1.ran" 2> "$T/r1.err"; rc=$?
  expect_fail "Sentinel password wrong: 69, 'authentication refused' by the Sentinel (named by its address)" \
    69 "$T/r1.err" 'authentication refused' "127\\.0\\.0\\.1:$SENTINEL_PORT"
  check "... the command did not run; the message holds no password" \
    bash -c "[ ! -e '$T/r1.ran' ] && ! grep -q -F -e WrongSentinelPw-77 -e '$DPW' -e '$SPW' '$T/r1.err'"
  FENCE_REDIS_PASSWORD=$DPW "$F" run --redis "$SU" "$(name)" -- touch "$T/r2.ran" 2> "$T/r2.err"; rc=$?
  expect_fail "Sentinel password missing: 69, the Sentinel wants authentication (NOAUTH)" \
    69 "$T/r2.err" 'auth'
  check "... the command did not run" test ! -e "$T/r2.ran"
  FENCE_REDIS_SENTINEL_PASSWORD=$SPW FENCE_REDIS_PASSWORD=WrongDataPw-88 \
    "$F" run --redis "$SU" "$(name)" -- touch "$T/r3.ran" 2> "$T/r3.err"; rc=$?
  expect_fail "data password wrong (Sentinel's right): 69, 'authentication refused'" \
    69 "$T/r3.err" 'authentication refused'
  check "... the command did not run; no password in the message" \
    bash -c "[ ! -e '$T/r3.ran' ] && ! grep -q -F -e WrongDataPw-88 -e '$DPW' -e '$SPW' '$T/r3.err'"
  # Swapped: each password given to the other side.
  FENCE_REDIS_SENTINEL_PASSWORD=$DPW FENCE_REDIS_PASSWORD=$SPW \
    "$F" status --redis "$SU" "$(name)" > /dev/null 2> "$T/r4.err"; rc=$?
  expect_fail "the two passwords swapped: 69, 'authentication refused'" 69 "$T/r4.err" \
    'authentication refused'

  # Regression (lib/lease/redis/conn.c, check_role; found by this suite against
  # commit ae999f4): with the Sentinels' password right and no data
  # password, the master's NOAUTH reply to ROLE was taken for "no master":
  # FENCE_ECONN, retried every 100 ms for the whole connect timeout (2 s),
  # then "127.0.0.1:PORT, named master by the Sentinels, is no master
  # (ROLE: ?)" -- instead of FENCE_EAUTH at once, as for a redis:// URL.
  local t0 t9
  t0=$(date +%s%N)
  FENCE_REDIS_SENTINEL_PASSWORD=$SPW "$F" run --redis "$SU" "$(name)" -- touch "$T/r5.ran" 2> "$T/r5.err"; rc=$?
  t9=$(date +%s%N)
  expect_fail "data password missing (Sentinel's right): 69, the message says the master wants authentication (not 'is no master (ROLE: ?)')" \
    69 "$T/r5.err" 'auth(entication)? (refused|required)|NOAUTH'
  check "... and fails at once, not after asking the Sentinels again for the connect timeout (took $(( (t9 - t0) / 1000000 )) ms)" \
    test $(( (t9 - t0) / 1000000 )) -lt 1000
  check "... the command did not run" test ! -e "$T/r5.ran"
}

tls_suite
sentinel_suite
auth_sentinel_suite

echo "1..$tapn"
echo "# $pass passed, $fail failed"
[ "$fail" -eq 0 ]
