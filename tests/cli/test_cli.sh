#!/usr/bin/env bash
# test_cli.sh -- the `fence` command-line tool against a real Redis (and a
# real PostgreSQL for the psql case).  Run by scripts/run-suites with
# FENCE_BUILD set (build, build/address, ...) inside scripts/with-servers:
#   FENCE_SUITES=test_cli scripts/with-servers --redis --pg -- scripts/run-suites build
# Prints "ok - ..." / "not ok - ..." lines; exits non-zero on any failure.
. "$(dirname "$0")/cli_common.sh"
# shellcheck source=tests/cli/redis_sets.sh
. tests/cli/redis_sets.sh   # servers of the suite's own (the one it freezes)

redis_up() { [ "$(rcli ping 2>/dev/null)" = PONG ]; }
cleanup_suite() { # called by cli_common.sh's cleanup
  redis_sets_stop
  # Leave the shared Redis as we found it.
  redis_up && rcli config set maxmemory-policy noeviction > /dev/null 2>&1
  redis_up && rcli config set appendonly no > /dev/null 2>&1
  # Always leave Redis running for the suites after us.
  redis_up || $FENCE_TEST_REDIS_CTL start >/dev/null 2>&1
}
not_alive() { ! alive "$1"; }
now() { date +%s.%N; }
elapsed_ge() { awk -v a="$1" -v b="$2" -v m="$3" 'BEGIN{exit !(b - a >= m)}'; }
elapsed_lt() { awk -v a="$1" -v b="$2" -v m="$3" 'BEGIN{exit !(b - a < m)}'; }
key_gone_at() { # key_gone_at URL NAME: the lease's key is not in that Redis
  [ "$(redis-cli -u "$1" exists "fence:{$2}")" = 0 ]
}
json_field() { # json_field FILE FIELD
  python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print(json.dumps(v))' "$1" "$2"
}

# ---- basics -------------------------------------------------------------------
out=$("$F" --version); rc=$?
check "--version prints the version and exits 0" \
  test "$rc" = 0 -a "$out" = "fence $(sed -n 's/^#define FENCE_VERSION_STRING "\(.*\)"/\1/p' lib/common/fence_common.h)"
"$F" run --help > "$T/help" 2>&1; rc=$?
check "run --help exits 0 and documents exit codes and the pdeathsig limit" \
  bash -c "[ $rc = 0 ] && grep -q '^   76' '$T/help' && grep -q PDEATHSIG '$T/help' && grep -q 'leaves the group' '$T/help'"

# ---- the environment and tokens ----------------------------------------------------
n=$(name)
FENCE_TOKEN=999999 FENCE_NAME=wrong FENCE_HOLDER=nobody "$F" run --ttl 300ms "$n" -- \
  sh -c 'echo "$FENCE_TOKEN $FENCE_NAME $FENCE_HOLDER" > "$1"' sh "$T/env1"; rc1=$?
"$F" run --ttl 300ms "$n" -- sh -c 'echo "$FENCE_TOKEN $FENCE_NAME $FENCE_HOLDER" > "$1"' sh "$T/env2"; rc2=$?
read -r t1 n1 h1 < "$T/env1"; read -r t2 n2 h2 < "$T/env2"
check "FENCE_TOKEN, FENCE_NAME and FENCE_HOLDER set (inherited ones replaced)" \
  test "$rc1" = 0 -a "$n1" = "$n" -a "$n2" = "$n" -a "$t1" != 999999 -a "$h1" != nobody
check "FENCE_HOLDER is 32 lowercase hex, a new one per run" \
  bash -c "[[ '$h1' =~ ^[0-9a-f]{32}\$ ]] && [[ '$h2' =~ ^[0-9a-f]{32}\$ ]] && [ '$h1' != '$h2' ]"
check "tokens increase across runs ($t1 < $t2)" test "$t1" -ge 1 -a "$t2" -gt "$t1"
# Clock tokens: microseconds of Redis's clock (~1.7e15), below 2^53.
rnow=$(rcli time | head -n 1)
check "clock tokens come from Redis's clock ($t1 >= ${rnow}000000 - 60 s)" \
  test "$t1" -ge $(( rnow * 1000000 - 60000000 )) -a "$t2" -lt 9007199254740992
check "fence token prints the last token issued" test "$("$F" token "$n")" = "$t2"
check "fence token of an unused name is 0" test "$("$F" token "$(name)")" = 0
check "fence token --raise never lowers the clock counter" test "$("$F" token --raise 1000 "$n")" = "$t2"
# Dense tokens, where the exact value is the point.
n=$(name)
"$F" run --token-mode dense "$n" -- sh -c 'echo "$FENCE_TOKEN" > "$1"' sh "$T/envd"
check "--token-mode dense: the first token is 1" test "$(cat "$T/envd")" = 1
check "fence token --raise raises the counter" test "$("$F" token --raise 1000 "$n")" = 1000
check "fence token --raise never lowers it" test "$("$F" token --raise=5 "$n")" = 1000
"$F" run --token-mode=dense "$n" -- sh -c 'echo "$FENCE_TOKEN" > "$1"' sh "$T/env3"
check "the next dense run after --raise 1000 gets token 1001" test "$(cat "$T/env3")" = 1001
"$F" run "$n" -- touch "$T/env4" 2> "$T/err"; rc=$?
check "a clock run on the dense counter: exit 78 naming both modes, the command never runs" \
  bash -c "[ $rc = 78 ] && grep -q 'dense (FENCE_TOKENS_DENSE)' '$T/err' && [ ! -e '$T/env4' ]"

# The command inherits fence's own descriptors (here 0-2 and 7), never the
# Redis sockets or pipes fence opened.
# Compared with the same command started without fence.
# (ls lists its own descriptors, plus the one it opens to read the folder.)
ls /proc/self/fd 7< /dev/null | sort -n | tr '\n' ' ' > "$T/fds0"
"$F" run "$(name)" -- ls /proc/self/fd 7< /dev/null | sort -n | tr '\n' ' ' > "$T/fds"
check "the command inherits fd 7 and fence's other fds, no Redis socket ($(cat "$T/fds"))" \
  bash -c "grep -q ' 7 ' '$T/fds' && [ \"\$(cat '$T/fds')\" = \"\$(cat '$T/fds0')\" ]"

# ---- exit status ---------------------------------------------------------------
"$F" run "$(name)" -- true; rc=$?
check "exit status 0 passed through" test "$rc" = 0
"$F" run "$(name)" -- sh -c 'exit 3'; rc=$?
check "exit status 3 passed through" test "$rc" = 3
"$F" run "$(name)" -- sh -c 'kill -KILL $$'; rc=$?
check "a command killed by SIGKILL gives 128+9 ($rc)" test "$rc" = 137
"$F" run "$(name)" -- sh -c 'kill -TERM $$'; rc=$?
check "a command killed by SIGTERM gives 128+15 ($rc)" test "$rc" = 143
"$F" run "$(name)" -- no-such-command-here 2> "$T/err"; rc=$?
check "a missing command exits 127 with a message" \
  bash -c "[ $rc = 127 ] && grep -q 'command not found' '$T/err'"
printf 'echo hi\n' > "$T/noexec"; chmod 644 "$T/noexec"
"$F" run "$(name)" -- "$T/noexec" 2> "$T/err"; rc=$?
check "a command that cannot be executed exits 126" test "$rc" = 126

# ---- usage errors -----------------------------------------------------------------
usage_case() { # usage_case DESCRIPTION ARGS...
  local what=$1; shift
  "$F" "$@" > "$T/out" 2> "$T/err"; local rc=$?
  if [ "$rc" = 64 ] && [ -s "$T/err" ]; then ok "usage error exits 64: $what"
  else nok "usage error exits 64: $what (got $rc: $(head -c 200 "$T/err"))"; fi
}
usage_case "no arguments"
usage_case "unknown command" frobnicate
usage_case "run without NAME" run
usage_case "run without --" run x true
usage_case "run without a command after --" run x --
usage_case "--ttl 0" run --ttl 0 x -- true
usage_case "--ttl -1s" run --ttl -1s x -- true
usage_case "--ttl 10x" run --ttl 10x x -- true
usage_case "--ttl overflow" run --ttl 99999999999999999999999s x -- true
usage_case "--ttl 8d (above the maximum)" run --ttl 8d x -- true
usage_case "--wait junk" run --wait soon x -- true
usage_case "--kill-after with no value" run x --kill-after
usage_case "--kill-after 0.0001s (finer than 1ms)" run --kill-after 0.0001s x -- true
# Durations share the one decimal grammar: no leading zero, a digit first.
usage_case "--ttl 010s (leading zero)" run --ttl 010s x -- true
usage_case "--wait .5s (no digit before the point)" run --wait .5s x -- true
usage_case "token --raise 007 (leading zero)" token --raise 007 a
usage_case "unknown option" run --bogus x -- true
usage_case "NAME with a control character" run "$(printf 'a\tb')" -- true
usage_case "status without NAME" status
usage_case "status with two names" status a b
usage_case "token --raise junk" token --raise 12x a
usage_case "--min-replicas -1" run --min-replicas -1 x -- true
usage_case "--min-replicas junk" run --min-replicas two x -- true
usage_case "--min-replicas 65 (above the maximum)" run --min-replicas 65 x -- true
usage_case "--min-replicas 01 (leading zero)" run --min-replicas 01 x -- true
usage_case "--replica-timeout without --min-replicas" run --replica-timeout 1s x -- true
usage_case "--replica-timeout 0" run --min-replicas 1 --replica-timeout 0 x -- true
usage_case "--replica-timeout junk" run --min-replicas 1 --replica-timeout soon x -- true
usage_case "--replica-timeout 2m (above the maximum)" run --min-replicas 1 --replica-timeout 2m x -- true
usage_case "--max-hold 0" run --max-hold 0 x -- true
usage_case "--max-hold -1s" run --max-hold -1s x -- true
usage_case "--max-hold soon (malformed)" run --max-hold soon x -- true
usage_case "--max-hold 8d (above the 7d maximum)" run --max-hold 8d x -- true
usage_case "--max-hold 0.0001s (finer than 1ms)" run --max-hold 0.0001s x -- true
usage_case "--max-hold without a value" run x --max-hold
usage_case "--token-mode bogus" run --token-mode fast x -- true
usage_case "--token-mode without a value" run x --token-mode
# Durations that are fine: none of these may be a usage error.
"$F" run --ttl 1.5s --wait 0 --kill-after 0 "$(name)" -- true; rc1=$?
"$F" run --ttl=2 --wait=250ms --kill-after=1m "$(name)" -- true; rc2=$?
check "good durations accepted (1.5s, 0, bare 2, 250ms, 1m)" test "$rc1" = 0 -a "$rc2" = 0
"$F" run --ttl 0.5s --wait 10.25s "$(name)" -- true; rc1=$?
check "good durations accepted (0.5s, 10.25s)" test "$rc1" = 0

# ---- Redis unreachable / refused ------------------------------------------------------
"$F" run --redis redis://127.0.0.1:1 "$(name)" -- true 2> "$T/err"; rc=$?
check "unreachable Redis (closed port) exits 69 with a message" \
  bash -c "[ $rc = 69 ] && grep -qi 'connect' '$T/err'"
FENCE_REDIS_URL=redis://127.0.0.1:1 "$F" status x > /dev/null 2>&1; rc=$?
check "FENCE_REDIS_URL is the default (unreachable: 69)" test "$rc" = 69
if [ -n "${FENCE_TEST_REDIS_AUTH_URL:-}" ]; then
  au=${FENCE_TEST_REDIS_AUTH_URL#redis://}
  "$F" run --redis "redis://:WrongSecret77@$au" "$(name)" -- true 2> "$T/err"; rc=$?
  check "refused password exits 69 and never prints the password" \
    bash -c "[ $rc = 69 ] && [ -s '$T/err' ] && ! grep -q WrongSecret77 '$T/err'"
else
  nok "FENCE_TEST_REDIS_AUTH_URL not set"
fi

# ---- the issuer: --url / FENCE_URL pick it by the URL's scheme (issue 28) ----------------------
"$F" run --url redis://127.0.0.1:1 "$(name)" -- true 2> "$T/err"; rc=$?
check "--url redis://... is --redis's (unreachable: 69)" test "$rc" = 69
FENCE_URL=redis://127.0.0.1:1 "$F" status x > /dev/null 2>&1; rc=$?
check "FENCE_URL is the default (unreachable: 69)" test "$rc" = 69
FENCE_URL=$U FENCE_REDIS_URL=redis://127.0.0.1:1 "$F" status x > /dev/null 2>&1; rc=$?
check "FENCE_URL wins over FENCE_REDIS_URL" test "$rc" = 0
"$F" status --url "$U" --redis "$U" x > /dev/null 2> "$T/err"; rc=$?
check "--url and --redis both: exit 64 (give the URL once)" \
  bash -c "[ $rc = 64 ] && grep -q 'once' '$T/err'"
for u in postgresql://127.0.0.1:1/db postgres://x@127.0.0.1:1/db; do
  "$F" run --url "$u" "$(name)" -- touch "$T/pg-ran" 2> "$T/err"; rc=$?
  check "$u: the PostgreSQL issuer, unreachable (closed port): exit 69, the command never runs" \
    bash -c "[ $rc = 69 ] && grep -q 'postgresql://' '$T/err' && [ ! -e '$T/pg-ran' ]"
done
for u in etcd://127.0.0.1:1 etcds://127.0.0.1:1; do
  "$F" run --url "$u" "$(name)" -- touch "$T/pg-ran" 2> "$T/err"; rc=$?
  check "$u: exit 64, not available in this build, the command never runs" \
    bash -c "[ $rc = 64 ] && grep -q 'not available in this build' '$T/err' && [ ! -e '$T/pg-ran' ]"
done
for opt in "--token-mode dense" "--allow-eviction" "--min-replicas 1" "--tls"; do
  # shellcheck disable=SC2086 # the option and its value are two words
  "$F" run --url postgresql://127.0.0.1:1/db $opt "$(name)" -- true 2> "$T/err"; rc=$?
  check "postgresql:// with the Redis option $opt: exit 64 naming the option and Redis" \
    bash -c "[ $rc = 64 ] && grep -q 'option of the Redis issuer only' '$T/err'"
done
FENCE_REDIS_CACERT=/nonexistent FENCE_REDIS_PASSWORD=x "$F" status --url postgresql://127.0.0.1:1/db x \
  2> "$T/err"; rc=$?
check "FENCE_REDIS_* defaults are not options of a postgresql:// URL (unreachable: 69, not 64)" \
  bash -c "[ $rc = 69 ] && ! grep -q 'option of the Redis issuer' '$T/err'"
"$F" run --url ftp://127.0.0.1/x "$(name)" -- true 2> "$T/err"; rc=$?
check "an unknown scheme: exit 64, the schemes listed" \
  bash -c "[ $rc = 64 ] && grep -q 'unsupported URL scheme' '$T/err'"
"$F" status --url "$U" --json "$(name)" > "$T/iss.json"
check "status --json names the issuer and the URL (and keeps \"redis\")" \
  test "$(json_field "$T/iss.json" issuer)" = '"redis"' -a \
       "$(json_field "$T/iss.json" url)" = "$(json_field "$T/iss.json" redis)"
"$F" status --url "$U" "$(name)" > "$T/iss.txt"
check "status (text) names the issuer" grep -q '^issuer: *redis$' "$T/iss.txt"

# ---- the server's configuration (issue 8) ------------------------------------------------
"$F" status --json "$(name)" > "$T/srv.json"
check "status --json shows persistence off and the policy (save \"\", no AOF)" \
  test "$(json_field "$T/srv.json" persistence)" = '"off"' -a \
       "$(json_field "$T/srv.json" maxmemory_policy)" = '"noeviction"'
"$F" status "$(name)" > "$T/srv.txt"
check "status (text) shows persistence and maxmemory_policy" \
  bash -c "grep -q '^persistence: *off' '$T/srv.txt' && grep -q '^maxmemory_policy: noeviction' '$T/srv.txt'"
rcli config set appendonly yes > /dev/null
"$F" status --json "$(name)" > "$T/srv2.json"
rcli config set appendonly no > /dev/null
check "status --json shows aof when AOF is on" test "$(json_field "$T/srv2.json" persistence)" = '"aof"'
n=$(name)
rcli config set maxmemory-policy allkeys-lru > /dev/null
"$F" run "$n" -- touch "$T/evict-ran" 2> "$T/err"; rc=$?
"$F" run --allow-eviction "$n" -- sh -c 'echo ok > "$1"' sh "$T/evict-ok"; rc2=$?
rcli config set maxmemory-policy volatile-lru > /dev/null
"$F" run "$n" -- touch "$T/volatile-ran" 2> "$T/err3"; rc3=$?
rcli config set maxmemory-policy noeviction > /dev/null
check "allkeys-lru: exit 78 naming the policy, the command never runs" \
  bash -c "[ $rc = 78 ] && grep -q 'allkeys-lru' '$T/err' && [ ! -e '$T/evict-ran' ]"
check "allkeys-lru with --allow-eviction: runs" test "$rc2" = 0 -a -s "$T/evict-ok"
check "volatile-lru: exit 78, saying it evicts the held lease's owner key" \
  bash -c "[ $rc3 = 78 ] && grep -q 'volatile-lru' '$T/err3' && grep -q \"owner key\" '$T/err3' && [ ! -e '$T/volatile-ran' ]"
n=$(name)
s=$(now); "$F" run --min-replicas 1 --replica-timeout 150ms "$n" -- touch "$T/wait-ran" 2> "$T/err"; rc=$?; e=$(now)
check "--min-replicas 1 without replicas: exit 69, '0 of 1 replicas acknowledged'" \
  bash -c "[ $rc = 69 ] && grep -q '0 of 1 replicas acknowledged' '$T/err' && [ ! -e '$T/wait-ran' ]"
check "... after the replica timeout (150ms)" elapsed_ge "$s" "$e" 0.14
check "... and the lease was given back (key gone)" key_gone "$n"
"$F" run --min-replicas 0 "$n" -- true; rc=$?
check "--min-replicas 0 is off" test "$rc" = 0

# ---- status ------------------------------------------------------------------------
n=$(name)
"$F" run --ttl 300ms "$n" -- sh -c 'echo "$FENCE_TOKEN" > "$1.tmp" && mv "$1.tmp" "$1"; exec sleep 30' sh "$T/tok" &
fp=$!; BG+=("$fp")
wait_until 5 file_has "$T/tok"
"$F" status --json "$n" > "$T/held.json"
check "status --json parses (held)" bash -c "python3 -m json.tool '$T/held.json' > /dev/null"
check "status --json says held, with the holder's token" \
  test "$(json_field "$T/held.json" held)" = true -a "$(json_field "$T/held.json" holder_token)" = "$(cat "$T/tok")"
ttl=$(json_field "$T/held.json" ttl_ms)
check "status --json ttl_ms within the TTL ($ttl)" test "$ttl" -gt 0 -a "$ttl" -le 300
"$F" status "$n" > "$T/held.txt"
check "status (text) says held" grep -q '^state: *held' "$T/held.txt"
# Held: a second run fails with 75.
"$F" run "$(name)" -- true; rc=$?
check "another name can be taken meanwhile" test "$rc" = 0
"$F" run "$n" -- true 2> "$T/err"; rc=$?
check "exit 75 while another fence run holds the lease" \
  bash -c "[ $rc = 75 ] && grep -q 'held by another owner' '$T/err'"
s=$(now); "$F" run --wait 300ms "$n" -- true 2> /dev/null; rc=$?; e=$(now)
check "exit 75 when --wait 300ms runs out (rc $rc)" test "$rc" = 75
check "... after waiting at least 300ms" elapsed_ge "$s" "$e" 0.29
# SIGTERM while waiting for the lease ends the wait at once; nothing runs.
"$F" run --wait 10s "$n" -- touch "$T/ran" 2> /dev/null &
wp=$!; BG+=("$wp")
sleep 0.2
s=$(now); kill -TERM "$wp"; wait "$wp"; rc=$?; e=$(now)
check "SIGTERM during --wait ends fence at once (143), the command never runs" \
  bash -c "[ $rc = 143 ] && [ ! -e '$T/ran' ]"
check "... promptly" elapsed_lt "$s" "$e" 1
kill -TERM "$fp"; wait "$fp"; rc=$?
check "SIGTERM to fence reaches the command (sleep dies: 143)" test "$rc" = 143
check "the lease is released after the command ends (key gone)" key_gone "$n"
"$F" status --json "$n" > "$T/free.json"
check "status --json parses and says free after release" \
  test "$(json_field "$T/free.json" held)" = false -a "$(json_field "$T/free.json" state)" = '"free"' \
       -a "$(json_field "$T/free.json" last_token)" = "$(cat "$T/tok")"

# A key set by hand (not a fence owner) also makes the lease held.
n=$(name)
rcli set "fence:{$n}" someone PX 5000 > /dev/null
"$F" run "$n" -- true 2> /dev/null; rc=$?
check "exit 75 when the key was set with redis-cli" test "$rc" = 75
rcli del "fence:{$n}" > /dev/null

# --wait succeeds when the holder finishes in time.
n=$(name)
"$F" run --ttl 300ms "$n" -- sh -c 'echo "$FENCE_TOKEN" > "$1.tmp" && mv "$1.tmp" "$1"; sleep 0.3' sh "$T/w1" &
fp=$!; BG+=("$fp")
wait_until 5 file_has "$T/w1"
s=$(now)
"$F" run --wait 5s "$n" -- sh -c 'echo "$FENCE_TOKEN" > "$1"' sh "$T/w2"; rc=$?; e=$(now)
wait "$fp"
check "--wait 5s succeeds when the holder finishes in time" test "$rc" = 0 -a "$(cat "$T/w2")" -gt "$(cat "$T/w1")"
check "... promptly after the release (woken, not timed out)" elapsed_lt "$s" "$e" 2

# ---- signals forwarded -----------------------------------------------------------------
trap_child='trap "echo \$1 > \"\$2\"; exit 7" $1; echo $$ > "$2.pid"; while :; do sleep 0.05; done'
for sig in TERM INT HUP USR1; do
  n=$(name)
  # A background job of a script starts with SIGINT ignored; give fence the
  # default action back, as an interactive shell would.
  env --default-signal=INT,QUIT "$F" run --ttl 300ms "$n" -- sh -c "$trap_child" sh "$sig" "$T/sig$sig" 2> /dev/null &
  fp=$!; BG+=("$fp")
  wait_until 5 file_has "$T/sig$sig.pid"
  kill -"$sig" "$fp"; wait "$fp"; rc=$?
  check "SIG$sig to fence reaches the command's trap (exit 7 passed through)" \
    test "$rc" = 7 -a "$(cat "$T/sig$sig" 2>/dev/null)" = "$sig"
  check "... and the lease is released" key_gone "$n"
done

# ---- the lease lost while the command runs -----------------------------------------
# (a) the owner key deleted: the next renewal is refused.
n=$(name)
"$F" run --ttl 300ms "$n" -- sh -c 'echo $$ > "$1.tmp" && mv "$1.tmp" "$1"; exec sleep 30' sh "$T/lost_a" 2> "$T/err" &
fp=$!; BG+=("$fp")
wait_until 5 file_has "$T/lost_a"
cpid=$(cat "$T/lost_a")
rcli del "fence:{$n}" > /dev/null
s=$(now); wait "$fp"; rc=$?; e=$(now)
check "owner key deleted mid-run: exit 76" test "$rc" = 76
want="fence run: lease '$n' was lost while the command ran (its renewal was refused: the key had expired, been deleted or taken by another owner); stopping the command (SIGTERM, SIGKILL after 5000ms)"
check "... with one clear line: lost while the command ran, why, what fence does ($(head -c 300 "$T/err"))" \
  test "$(cat "$T/err")" = "$want"
check "... the command is gone" not_alive "$cpid"
check "... within a second" elapsed_lt "$s" "$e" 1

# Lost just as the command ends: the command itself deletes the key (TTL 5s:
# no renewal comes first), so the release finds it gone and no on_lost came.
n=$(name)
"$F" run --ttl 5s "$n" -- $FENCE_TEST_REDIS_CTL cli del "fence:{$n}" > /dev/null 2> "$T/err"; rc=$?
check "lease lost by the time of release (no callback): exit 76" test "$rc" = 76
want="fence run: lease '$n' was lost before the command ended (at release its key had expired or had another owner); it may have run unleased for a moment"
check "... one line that says so, naming the lease once ($(head -c 300 "$T/err"))" \
  test "$(cat "$T/err")" = "$want"

# The whole group: a grandchild dies too.
n=$(name)
"$F" run --ttl 300ms "$n" -- sh -c 'sleep 30 & echo $! > "$1.tmp"; mv "$1.tmp" "$1"; wait' sh "$T/gc" 2> /dev/null &
fp=$!; BG+=("$fp")
wait_until 5 file_has "$T/gc"
gpid=$(cat "$T/gc")
rcli del "fence:{$n}" > /dev/null
s=$(now); wait "$fp"; rc=$?; e=$(now)
wait_until 1 not_alive "$gpid"
check "lease lost: the command's grandchild (same group) is stopped too" \
  bash -c "[ $rc = 76 ] && ! ps -o stat= -p $gpid | grep -qv Z"
check "... and fence sees the group gone without waiting out the 5s grace" elapsed_lt "$s" "$e" 2

# SIGTERM first: a command that handles it exits in its own time, fence still says 76.
n=$(name)
"$F" run --ttl 300ms "$n" -- sh -c 'trap "echo term > \"\$1\"; exit 0" TERM; echo $$ > "$1.pid"; while :; do sleep 0.05; done' sh "$T/gt" 2> /dev/null &
fp=$!; BG+=("$fp")
wait_until 5 file_has "$T/gt.pid"
rcli del "fence:{$n}" > /dev/null
wait "$fp"; rc=$?
check "lease lost: the command gets SIGTERM first, fence exits 76 even though it exited 0" \
  test "$rc" = 76 -a "$(cat "$T/gt" 2>/dev/null)" = term

# --kill-after: a command that ignores SIGTERM is SIGKILLed after the grace.
n=$(name)
"$F" run --ttl 300ms --kill-after 400ms "$n" -- sh -c 'trap "" TERM; echo $$ > "$1.tmp"; mv "$1.tmp" "$1"; while :; do sleep 0.05; done' sh "$T/ka" 2> "$T/err" &
fp=$!; BG+=("$fp")
wait_until 5 file_has "$T/ka"
cpid=$(cat "$T/ka")
s=$(now)
rcli del "fence:{$n}" > /dev/null
wait "$fp"; rc=$?; e=$(now)
check "--kill-after: a command ignoring SIGTERM ends with exit 76" test "$rc" = 76
check "... SIGKILLed only after the 400ms grace" elapsed_ge "$s" "$e" 0.4
check "... but soon after it" elapsed_lt "$s" "$e" 2
check "... and is gone" not_alive "$cpid"
check "... the message says SIGKILL" grep -q SIGKILL "$T/err"

# ---- --max-hold: the command is stopped once it has held the lease that long ------------
n=$(name)
s=$(now); "$F" run --ttl 5s --max-hold 300ms "$n" -- sleep 5 2> "$T/err"; rc=$?; e=$(now)
check "--max-hold 300ms -- sleep 5: exit 77 ($rc)" test "$rc" = 77
check "... after 300ms ($(awk -v a="$s" -v b="$e" 'BEGIN{printf "%.3f", b - a}') s)" elapsed_ge "$s" "$e" 0.3
check "... and soon after it (sleep dies of the SIGTERM: well within the 5s grace)" elapsed_lt "$s" "$e" 1.5
check "... with one line that says why ($(head -c 200 "$T/err"))" \
  test "$(cat "$T/err")" = "fence run: the command has held lease '$n' for its --max-hold of 300ms; stopping it (SIGTERM, SIGKILL after 5000ms)"
check "... the lease was released (key gone)" key_gone "$n"
s=$(now); "$F" run "$n" -- true; rc=$?; e=$(now)
check "... a second fence run takes it at once (exit $rc, $(awk -v a="$s" -v b="$e" 'BEGIN{printf "%.3f", b - a}') s)" \
  bash -c "[ $rc = 0 ] && awk -v a=$s -v b=$e 'BEGIN{exit !(b - a < 1)}'"
# A command that ignores SIGTERM gets SIGKILL after --kill-after; the lease
# (TTL 300ms) is renewed meanwhile, so it is 77, not 76.
# The command notes when the SIGTERM came (and survives it): the times are
# measured from fence's start and from that SIGTERM, not from when a poll
# saw the command running (which a loaded machine delays).
n=$(name)
s0=$(now)
"$F" run --ttl 300ms --max-hold 700ms --kill-after 300ms "$n" -- sh -c 'trap "date +%s.%N > \"\$1.term\"" TERM; echo $$ > "$1.tmp"; mv "$1.tmp" "$1"; while :; do sleep 0.05; done' sh "$T/mh" 2> "$T/err" &
fp=$!; BG+=("$fp")
wait_until 5 file_has "$T/mh"
s=$(now); wait "$fp"; rc=$?; e=$(now)
term=$(cat "$T/mh.term" 2>/dev/null || echo 0)
check "--max-hold 700ms (TTL 300ms), SIGTERM ignored: exit 77 ($rc), the lease held throughout" test "$rc" = 77
check "... SIGTERM at the --max-hold ($(awk -v a="$s0" -v b="$term" 'BEGIN{printf "%.3f", b - a}') s after fence started; >= 0.7)" \
  elapsed_ge "$s0" "$term" 0.7
# sh runs the trap only when its current "sleep 0.05" ends, so the noted
# time is up to one sleep (and date's start) after the SIGTERM: 0.25, not 0.3.
check "... SIGKILLed after the 300ms grace (fence ended $(awk -v a="$term" -v b="$e" 'BEGIN{printf "%.3f", b - a}') s after the noted SIGTERM; >= 0.25)" \
  elapsed_ge "$term" "$e" 0.25
check "... but soon after it" elapsed_lt "$s" "$e" 3
check "... the command is gone, the message says SIGKILL" \
  bash -c "! kill -0 $(cat "$T/mh") 2>/dev/null && grep -q SIGKILL '$T/err'"
check "... and the lease was released" key_gone "$n"
"$F" run --max-hold 10s "$(name)" -- sh -c 'exit 3'; rc=$?
check "a command that ends within --max-hold: its own exit status (3)" test "$rc" = 3

# ---- job control: Ctrl-Z stops the command too -------------------------------------
# The command is in its own process group, so SIGTSTP to fence must stop the
# group first; SIGCONT continues both.  (Otherwise the command would run on
# while fence, and with it the heartbeat, is stopped.)
n=$(name)
env --default-signal=TSTP,CONT "$F" run --ttl 5s "$n" -- sh -c 'echo $$ > "$1.tmp"; mv "$1.tmp" "$1"; exec sleep 30' sh "$T/jc" 2> /dev/null &
fp=$!; BG+=("$fp")
wait_until 5 file_has "$T/jc"
cpid=$(cat "$T/jc")
stopped() { case "$(ps -o stat= -p "$1" 2>/dev/null)" in T*) return 0 ;; esac; return 1; }
running() { alive "$1" && ! stopped "$1"; }
kill -TSTP "$fp"
check "SIGTSTP to fence stops the command's group" wait_until 3 stopped "$cpid"
check "... and fence itself" wait_until 3 stopped "$fp"
kill -CONT "$fp"
check "SIGCONT to fence continues the command" wait_until 3 running "$cpid"
check "... and fence" wait_until 3 running "$fp"
kill -TERM "$fp"; wait "$fp"; rc=$?
check "... which then still forwards SIGTERM (exit 143) and releases the lease" \
  bash -c "[ $rc = 143 ] && [ \"\$($FENCE_TEST_REDIS_CTL cli exists 'fence:{$n}')\" = 0 ]"

# ---- the watchdog: SIGSTOP to fence alone cannot keep the command running ---------------
# SIGSTOP stops fence and its heartbeat, not the command (in a group of its
# own) nor the watchdog (another group): the watchdog SIGKILLs the command
# once the lease's validity (at most the TTL, 1 s, after the last renewal)
# plus its 100ms slack has passed.
n=$(name)
"$F" run --ttl 1s "$n" -- sh -c 'echo $$ > "$1.tmp"; mv "$1.tmp" "$1"; exec sleep 30' sh "$T/wd" 2> "$T/err" &
fp=$!; BG+=("$fp")
wait_until 5 file_has "$T/wd"
cpid=$(cat "$T/wd")
sleep 0.5   # a renewal or two first
kids=$(ps -o pid= --ppid "$fp" | tr -d ' ' | tr '\n' ' ')   # the command and the watchdog
dog=$(for k in $kids; do [ "$k" != "$cpid" ] && echo "$k"; done)
check "the watchdog runs beside the command, in a process group of its own (pids: $kids)" \
  bash -c "[ -n '$dog' ] && [ \"\$(ps -o pgid= -p '$dog' | tr -d ' ')\" = '$dog' ]"
kill -STOP "$fp"; s=$(now)
wait_until 5 not_alive "$cpid"; e=$(now)
kill -CONT "$fp"
wait "$fp"; rc=$?
el=$(awk -v a="$s" -v b="$e" 'BEGIN{printf "%.3f", b - a}')
check "fence SIGSTOPped (TTL 1s): the command is gone ${el} s later, by the validity end + slack (< 1.6 s)" \
  elapsed_lt "$s" "$e" 1.6
check "... not before the lease could have run out (>= 0.5 s: the last renewal was at most TTL/3 before)" \
  elapsed_ge "$s" "$e" 0.5
check "... continued, fence exits 76 and says the watchdog SIGKILLed the command (rc $rc: $(tr "\n" " " < "$T/err" | head -c 400))" \
  bash -c "[ $rc = 76 ] && grep -q \"the validity of lease '$n' ran out while fence was stopped or stalled; the watchdog SIGKILLed the command's process group\" '$T/err'"
check "... and no watchdog is left behind" not_alive "${dog:-0}"

# ---- started with stdin and stderr closed (cron, daemons) ------------------------------
# fence's own pipes must not take fds 0-2: a message on stderr would then be
# read back as signal numbers and sent to the command.
n=$(name)
"$F" run --ttl 300ms --kill-after 2s "$n" -- sh -c 'trap "echo term > \"\$1\"; exit 0" TERM; echo $$ > "$1.pid"; while :; do sleep 0.05; done' sh "$T/cl" 0<&- 2>&- &
fp=$!; BG+=("$fp")
wait_until 5 file_has "$T/cl.pid"
rcli del "fence:{$n}" > /dev/null
wait "$fp"; rc=$?
check "fds 0 and 2 closed at start: on loss the command gets SIGTERM (its trap ran), exit 76" \
  test "$rc" = 76 -a "$(cat "$T/cl" 2>/dev/null)" = term

# ---- fence killed with SIGKILL: the command dies with it (PR_SET_PDEATHSIG) ----------
n=$(name)
"$F" run --ttl 300ms "$n" -- sh -c 'echo $$ > "$1.tmp"; mv "$1.tmp" "$1"; exec sleep 30' sh "$T/pd" &
fp=$!; BG+=("$fp")
wait_until 5 file_has "$T/pd"
cpid=$(cat "$T/pd")
kill -KILL "$fp"; wait "$fp" 2>/dev/null
wait_until 2 not_alive "$cpid"
check "fence killed with SIGKILL: the command dies too" not_alive "$cpid"
check "... and the lease expires by its TTL" wait_until 2 key_gone "$n"

# ---- metrics file ----------------------------------------------------------------------
n=$(name)
"$F" run --metrics-file "$T/m.prom" "$n" -- true; rc=$?
# (Every series carries the lease's name as a label since issue 11.)
check "--metrics-file writes the Prometheus text" \
  bash -c "[ $rc = 0 ] && grep -q '^fence_lease_acquired_total{lease=\"$n\"} 1' '$T/m.prom' && grep -q '^fence_lease_released_total{lease=\"$n\"} 1' '$T/m.prom'"

# ---- (b) Redis stopped mid-run: validity runs out unanswered ------------------------
n=$(name)
"$F" run --ttl 300ms --kill-after 200ms "$n" -- sh -c 'echo $$ > "$1.tmp"; mv "$1.tmp" "$1"; exec sleep 30' sh "$T/lost_b" 2> "$T/err" &
fp=$!; BG+=("$fp")
wait_until 5 file_has "$T/lost_b"
cpid=$(cat "$T/lost_b")
$FENCE_TEST_REDIS_CTL stop
s=$(now); wait "$fp"; rc=$?; e=$(now)
$FENCE_TEST_REDIS_CTL start > /dev/null || nok "Redis restarted"
check "Redis stopped mid-run: exit 76" test "$rc" = 76
check "... the message says Redis could not be reached" grep -q "could not be reached" "$T/err"
check "... the command is gone" not_alive "$cpid"
check "... within a couple of seconds" elapsed_lt "$s" "$e" 2.5
check "Redis is back for what follows" redis_up

# ---- (c) Redis frozen mid-run (SIGSTOP): nothing answers, not even the release ------------
# On a server of the suite's own.  After the loss fence's release waits for
# an answer at most max(TTL, 500ms) (not the library's 2 s), and says
# truthfully that the key was not deleted and has expired by its TTL.
if [ -z "${FENCE_TEST_SPAWN_DIR:-}" ] || [ -z "${FENCE_TEST_REDIS_SET:-}" ]; then
  nok "setup: FENCE_TEST_SPAWN_DIR / FENCE_TEST_REDIS_SET not set (run under scripts/with-servers)"
elif ! redis_set_start PS solo 2> "$T/ps.err"; then
  nok "setup: a Redis of the suite's own would not start: $(head -c 300 "$T/ps.err")"
else
  PU=redis://127.0.0.1:$(sed -n 's/^MASTER_PORT=//p' "$PS/env")
  n=$(name)
  "$F" run --redis "$PU" --ttl 300ms --kill-after 200ms "$n" -- sh -c 'echo $$ > "$1.tmp"; mv "$1.tmp" "$1"; exec sleep 30' sh "$T/lost_c" 2> "$T/err" &
  fp=$!; BG+=("$fp")
  wait_until 5 file_has "$T/lost_c"
  cpid=$(cat "$T/lost_c")
  scripts/redis-ctl "$PS/master" pause
  s=$(now); wait "$fp"; rc=$?; e=$(now)
  scripts/redis-ctl "$PS/master" resume
  check "Redis frozen mid-run: exit 76, the command is gone" bash -c "[ $rc = 76 ] && ! kill -0 $cpid 2>/dev/null"
  # Loss within the TTL (300ms), SIGTERM kills sleep at once, the release
  # gives up after 500ms: about 0.8 s; the library's 2 s would make it 2.3.
  check "... fence exits within 1.6 s of the freeze ($(awk -v a="$s" -v b="$e" 'BEGIN{printf "%.2f", b - a}') s), not after a 2 s timeout" \
    elapsed_lt "$s" "$e" 1.6
  check "... it says the key was not deleted and has expired by its TTL ($(tail -n 1 "$T/err" | head -c 200))" \
    bash -c "grep -q \"lease '$n' was lost while the command ran (Redis could not be reached\" '$T/err' &&
             grep -q \"the key of lease '$n' was not deleted; it has expired by its TTL\" '$T/err' &&
             ! grep -q 'expires within' '$T/err'"
  check "... and the key is indeed gone once Redis answers again" key_gone_at "$PU" "$n"
fi

# ---- psql: the token protects a real write ------------------------------------------------
SQL=${FENCE_BUILD:-build}/sql/postgres/fence.sql   # built by make from sql/postgres/
if [ ! -f "$SQL" ]; then
  nok "psql test: $SQL is missing (make builds it)"
elif [ -z "${PGHOST:-}" ] || [ -z "${FENCE_TEST_PG_CONNINFO:-}" ]; then
  nok "psql test: PGHOST / FENCE_TEST_PG_CONNINFO not set (run under scripts/with-servers --pg)"
else
  n=$(name); tbl="cli_t_$$"; fail0=$fail
  pq() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
  if pq -f "$SQL" > "$T/pg.log" 2>&1 &&
     pq -c "DROP TABLE IF EXISTS $tbl; CREATE TABLE $tbl (id int PRIMARY KEY, v text);
            SELECT fence.protect('$tbl');" >> "$T/pg.log" 2>&1; then
    ok "psql: fence.sql installed and the table protected"
  else
    nok "psql: installing $SQL / fence.protect failed: $(tail -n 3 "$T/pg.log")"
  fi
  write_sql='BEGIN; SELECT fence.use_token($FENCE_TOKEN); '
  "$F" run "$n" -- sh -c "echo \$FENCE_TOKEN > $T/pg1; psql -X -q -v ON_ERROR_STOP=1 -c \"${write_sql}INSERT INTO $tbl VALUES (1, 'first'); COMMIT;\"" \
    >> "$T/pg.log" 2>&1; rc=$?
  check "psql: a write under fence run with the current token lands" test "$rc" = 0
  "$F" run "$n" -- sh -c "echo \$FENCE_TOKEN > $T/pg2; psql -X -q -v ON_ERROR_STOP=1 -c \"${write_sql}UPDATE $tbl SET v = 'second' WHERE id = 1; COMMIT;\"" \
    >> "$T/pg.log" 2>&1; rc=$?
  check "psql: the next holder's write (newer token) lands" test "$rc" = 0
  old=$(cat "$T/pg1" 2>/dev/null || echo 0)
  pq -c "BEGIN; SELECT fence.use_token($old); UPDATE $tbl SET v = 'stale' WHERE id = 1; COMMIT;" \
    >> "$T/pg.log" 2>&1; rc=$?
  check "psql: a write with the older token ($old) is rejected as stale" \
    bash -c "[ $rc != 0 ] && grep -q 'stale token' '$T/pg.log'"
  v=$(psql -X -At -c "SELECT v FROM $tbl WHERE id = 1" 2>> "$T/pg.log")
  check "psql: the row holds the newer holder's value ($v)" test "$v" = second
  [ "$fail" -gt "$fail0" ] && sed 's/^/# /' "$T/pg.log"
  psql -X -q -c "DROP TABLE IF EXISTS $tbl" > /dev/null 2>&1
fi

[ "$fail" -eq 0 ]
