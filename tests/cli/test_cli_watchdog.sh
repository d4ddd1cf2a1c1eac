#!/usr/bin/env bash
# test_cli_watchdog.sh -- `fence run`'s watchdog found by trying it, and
# `fence status --json` when Redis cannot be reached (issue 30), against the
# real Redis of scripts/with-servers.  Proves: a watchdog killed with
# SIGKILL is noticed at once and replaced (fence says so), so that a fence
# stopped with SIGSTOP afterwards still cannot keep its command running:
# the new watchdog SIGKILLs the command by the lease's validity end plus
# its slack, and the command is gone before another owner takes the lease;
# the watchdog's process title is its own (no byte of fence's command line
# in its /proc/PID/cmdline, comm "fence-watchdog"), so pgrep -f on fence's
# command line finds fence alone; `fence status --json` with Redis
# unreachable prints one JSON error object on stdout (exit 69) besides the
# message on stderr.  TAP lines; exits non-zero on any failure.
. "$(dirname "$0")/cli_common.sh"

now() { date +%s.%N; }
elapsed_lt() { awk -v a="$1" -v b="$2" -v m="$3" 'BEGIN{exit !(b - a < m)}'; }
not_alive() { ! alive "$1"; }
# The watchdog of fence pid $1 whose command is $2: its other child.
dog_of() {
  local k
  for k in $(ps -o pid= --ppid "$1" | tr -d ' '); do [ "$k" != "$2" ] && echo "$k"; done
}
new_dog() { local d; d=$(dog_of "$1" "$2"); [ -n "$d" ] && [ "$d" != "$3" ]; }
# start TTL FILE: fence run --ttl TTL on a fresh name n around a sleep;
# sets n, fp (fence), cpid (the command) and dog (its watchdog).
start() {
  n=$(name)
  "$F" run --ttl "$1" "$n" -- sh -c 'echo $$ > "$1.tmp"; mv "$1.tmp" "$1"; exec sleep 30' sh "$2" 2> "$T/err" &
  fp=$!; BG+=("$fp")
  wait_until 5 file_has "$2"
  cpid=$(cat "$2")
  wait_until 2 test -n "$(dog_of "$fp" "$cpid")"
  dog=$(dog_of "$fp" "$cpid")
}

# ---- a watchdog killed is replaced at once -----------------------------------------
start 1s "$T/wd"
check "fence run has a watchdog (pid ${dog:-none})" test -n "$dog"
kill -KILL "$dog"
wait_until 1 new_dog "$fp" "$cpid" "$dog"
dog2=$(dog_of "$fp" "$cpid")
check "the watchdog SIGKILLed: fence starts another at once (pid ${dog2:-none})" new_dog "$fp" "$cpid" "$dog"
check "... in a process group of its own" \
  test -n "$dog2" -a "$(ps -o pgid= -p "${dog2:-0}" 2>/dev/null | tr -d ' ')" = "$dog2"
check "... and says so on stderr ($(tr '\n' ' ' < "$T/err" | head -c 300))" \
  grep -q "fence run: the watchdog (pid $dog) died (signal 9); started another (pid $dog2)" "$T/err"

# Now freeze fence alone, as before: the new watchdog must end the command
# by the lease's validity end plus its slack -- at most 100 ms after the
# key expires and another owner can take it (README: the slack may exceed
# the margin; the token covers those 100 ms), never seconds later.
kill -STOP "$fp"; s=$(now)
"$F" run --ttl 5s -w 10s "$n" -- true > "$T/second" 2>&1; rc2=$?
got=$(now)
wait_until 0.5 not_alive "$cpid"; e=$(now)
kill -CONT "$fp"
wait "$fp"; rc=$?
el=$(awk -v a="$s" -v b="$got" 'BEGIN{printf "%.3f", b - a}')
late=$(awk -v a="$got" -v b="$e" 'BEGIN{printf "%.3f", b - a}')
check "... fence then SIGSTOPped: another owner gets the lease ${el} s later (exit $rc2)" test "$rc2" = 0
check "... and the command is gone by then or within 0.5 s (${late} s after)" \
  bash -c "! kill -0 $cpid 2>/dev/null && awk -v l='$late' 'BEGIN{exit !(l < 0.5)}'"
check "... SIGKILLed within the validity + slack of the stop (< 1.6 s)" elapsed_lt "$s" "$e" 1.6
check "... continued, fence exits 76: the new watchdog SIGKILLed the command (rc $rc)" \
  bash -c "[ $rc = 76 ] && grep -q 'the watchdog SIGKILLed the command' '$T/err'"
check "... and leaves no watchdog behind" not_alive "${dog2:-0}"

# ---- the watchdog's title is its own --------------------------------------------------
start 10s "$T/ti"
cmdline=$(tr '\0' ' ' < "/proc/${dog:-0}/cmdline" 2>/dev/null | sed 's/ *$//')
check "the watchdog's command line is its own title ('$cmdline')" \
  bash -c "[[ '$cmdline' == fence-watchdog* ]] && [[ '$cmdline' != *'$n'* ]] && [[ '$cmdline' != *sleep* ]] && [[ '$cmdline' != *--ttl* ]]"
check "... its comm is fence-watchdog ($(cat "/proc/${dog:-0}/comm" 2>/dev/null))" \
  test "$(cat "/proc/${dog:-0}/comm" 2>/dev/null)" = fence-watchdog
found=$(pgrep -f -- "run --ttl 10s $n" | tr '\n' ' ' | sed 's/ $//')
check "pgrep -f on fence's command line finds fence alone ($found; fence $fp, watchdog $dog)" \
  test "$found" = "$fp"
kill -TERM "$fp"; wait "$fp"

# ---- fence status --json when Redis cannot be reached --------------------------------
out=$("$F" status --json --redis redis://127.0.0.1:1 "$(name)" 2> "$T/err"); rc=$?
check "fence status --json, Redis unreachable: exit 69 (rc $rc)" test "$rc" = 69
check "... one JSON error object on stdout ($out)" /usr/bin/python3 -c '
import json, sys
o = json.loads(sys.argv[1])
sys.exit(not (o["state"] == "error" and o["status"] == "FENCE_ECONN" and o["exit"] == 69
              and "127.0.0.1:1" in o["error"] and o["name"].startswith("clitest-")))' "$out"
check "... and the message on stderr too" grep -q "fence status: cannot open the client" "$T/err"
out=$("$F" status --json --redis 'redis://:pw-in-url@127.0.0.1:1' x 2>/dev/null)
check "... with no password in it ($out)" bash -c "[[ '$out' != *pw-in-url* ]] && [[ '$out' == *'\"state\": \"error\"'* ]]"

# ---- docs/demo.md: the race under fence run, as the page shows it -------------------
mkdir -p "$T/demo"
python3 - docs/demo.md > "$T/demo/race.sh" <<'PY'
import re, sys
doc = open(sys.argv[1]).read()
part = doc[doc.index('## The same race under `fence run`'):]
print(re.search(r'^```sh\n(.*?)^```$', part, re.S | re.M).group(1))
PY
scripts/san-runtime --wrap "$T/bin" sqlite3 >/dev/null
ext=$(dirname "$F")/fence_sqlite_ext
out=$(cd "$T/demo" && PATH=$(dirname "$F"):$T/bin:$PATH FENCE_SQLITE_EXT=$ext bash race.sh 2>&1)
check "docs/demo.md's race under fence run: fence exits 76, the worker's write is refused as stale, B's stands ($(tr '\n' '|' <<<"$out" | head -c 400))" \
  bash -c "grep -qx 'fence run exited 76' <<<\"\$1\" && grep -q 'fence:stale table \"acct\": token [0-9]* is older than [0-9]* (write rejected) reason=older' <<<\"\$1\" && [ \"\$(tail -n 1 <<<\"\$1\")\" = 200 ]" _ "$out"

echo "# test_cli_watchdog: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
