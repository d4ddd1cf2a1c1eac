#!/usr/bin/env bash
# test_cli_habits.sh -- `fence` as a flock(1) / consul lock user expects
# (issue 11): -q, -E, -w, who holds a lease (fence status), a lease label on
# --metrics-file series, status --json that is always valid UTF-8 JSON, and
# a missing metrics folder refused before anything runs.  Real Redis.
. "$(dirname "$0")/cli_common.sh"

now() { date +%s.%N; }
elapsed_ge() { awk -v a="$1" -v b="$2" -v m="$3" 'BEGIN{exit !(b - a >= m)}'; }
elapsed_lt() { awk -v a="$1" -v b="$2" -v m="$3" 'BEGIN{exit !(b - a < m)}'; }
json_ok() { python3 -c 'import json,sys; json.load(sys.stdin)' < "$1"; }
# The command: writes its FENCE_HOLDER and pid, holds until $1.stop exists.
HOLD='echo "$FENCE_HOLDER" > "$1.holder"; echo $$ > "$1.pid.tmp"; mv "$1.pid.tmp" "$1.pid"
      while [ ! -e "$1.stop" ]; do sleep 0.05; done'
hold() { # hold PREFIX NAME [OPTIONS...]: a fence run holding NAME in the background; sets hp
  local p=$1 nm=$2; shift 2
  "$F" run --ttl 2s "$@" "$nm" -- sh -c "$HOLD" sh "$p" 2> "$p.err" &
  hp=$!; BG+=("$hp")
  wait_until 5 file_has "$p.pid"
}
release() { touch "$1.stop"; wait "$2"; }

# ---- -q, -E, -w while another run holds the lease --------------------------------
n=$(name)
hold "$T/h" "$n" || nok "the holder started"
hpid=$hp
"$F" run -q "$n" -- touch "$T/ran" > "$T/q.out" 2> "$T/q.err"; rc=$?
check "-q: busy lease exits 75 with nothing on stderr or stdout" \
  bash -c "[ $rc = 75 ] && [ ! -s '$T/q.err' ] && [ ! -s '$T/q.out' ] && [ ! -e '$T/ran' ]"
"$F" run --quiet "$n" -- true 2> "$T/q2.err"; rc=$?
check "--quiet: the same" test "$rc" = 75 -a ! -s "$T/q2.err"
"$F" run -q --redis redis://127.0.0.1:1 "$(name)" -- true 2> "$T/q3.err"; rc=$?
check "-q keeps other errors (unreachable Redis: 69 with a message)" test "$rc" = 69 -a -s "$T/q3.err"
"$F" run "$n" -- true 2> "$T/busy.err"; rc=$?
check "without -q: 75 and the message says who holds it (host, pid, since)" \
  bash -c "[ $rc = 75 ] && grep -q 'held by another owner' '$T/busy.err' && grep -q 'host=.* pid=$hpid since=' '$T/busy.err'"
"$F" run -E 3 "$n" -- true 2> "$T/e.err"; rc=$?
check "-E 3: busy exits 3 (the message stays)" test "$rc" = 3 -a -s "$T/e.err"
"$F" run -qE3 "$n" -- true 2> /dev/null; rc=$?
check "-qE3 (bundled short options) is refused as a usage error" test "$rc" = 64
"$F" run -q -E3 "$n" -- true 2> "$T/e2.err"; rc=$?
check "-q -E3 (value attached): busy exits 3, silently" test "$rc" = 3 -a ! -s "$T/e2.err"
"$F" run --conflict-exit-code=0 -q "$n" -- touch "$T/ran0"; rc=$?
check "--conflict-exit-code=0: busy exits 0, the command never ran" test "$rc" = 0 -a ! -e "$T/ran0"
"$F" run --conflict-exit-code 200 "$n" -- true 2> /dev/null; rc=$?
check "--conflict-exit-code 200" test "$rc" = 200
s=$(now); "$F" run -w 300ms -E 9 -q "$n" -- true; rc=$?; e=$(now)
check "-w 300ms -E 9: waits, then exits 9" test "$rc" = 9
check "... after waiting at least 300ms" elapsed_ge "$s" "$e" 0.29
s=$(now); "$F" run -w300ms "$n" -- true 2> "$T/w.err"; rc=$?; e=$(now)
check "-w300ms (attached): 75 after the wait, the message says so" \
  bash -c "[ $rc = 75 ] && grep -q 'after waiting 300ms' '$T/w.err'"
check "... after at least 300ms" elapsed_ge "$s" "$e" 0.29

for bad in "-E 256" "-E -1" "-E x" "-E 03" "--conflict-exit-code=" "-w soon" "-w -1s" "-w 010s"; do
  # shellcheck disable=SC2086
  "$F" run $bad "$(name)" -- true > /dev/null 2> "$T/u.err"; rc=$?
  check "usage error exits 64: run $bad" test "$rc" = 64 -a -s "$T/u.err"
done
"$F" run "$(name)" -- true -E > /dev/null 2>&1; rc=$?
check "-E after -- belongs to the command (exit 0)" test "$rc" = 0
for last in -E -w; do
  "$F" run x "$last" > /dev/null 2> "$T/u.err"; rc=$?
  check "usage error exits 64: $last without a value" test "$rc" = 64 -a -s "$T/u.err"
done

# ---- fence status: who holds it ---------------------------------------------------------
"$F" status "$n" > "$T/st.txt"
"$F" status --json "$n" > "$T/st.json"
host=$(hostname)
check "status (text): holder_info host=<hostname> pid=<fence's pid> since=<UTC>" \
  grep -q -E "^holder_info: +host=$host pid=$hpid since=[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\$" "$T/st.txt"
check "status (text): holder is the command's FENCE_HOLDER" \
  grep -q "^holder: *$(cat "$T/h.holder")\$" "$T/st.txt"
check "status --json: holder_info and holder" python3 - "$T/st.json" "$host" "$hpid" "$(cat "$T/h.holder")" <<'PY'
import json, sys, re, datetime
d = json.load(open(sys.argv[1]))
m = re.fullmatch(r"host=(\S+) pid=(\d+) since=(\S+)", d["holder_info"])
since = datetime.datetime.strptime(m.group(3), "%Y-%m-%dT%H:%M:%SZ")
age = (datetime.datetime.utcnow() - since).total_seconds()
sys.exit(not (m.group(1) == sys.argv[2] and m.group(2) == sys.argv[3]
              and d["holder"] == sys.argv[4] and -5 <= age < 120))
PY
release "$T/h" "$hpid"
"$F" status --json "$n" > "$T/free.json"
check "status --json after release: holder_info and holder are null" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); sys.exit(not (d["holder_info"] is None and d["holder"] is None and d["held"] is False))' "$T/free.json"
"$F" status "$n" > "$T/free.txt"
check "status (text) after release: no holder_info line" bash -c "! grep -q holder_info '$T/free.txt'"

# ---- --metrics-file: a lease label, two jobs told apart -----------------------------------
mkdir "$T/textfile"
n1=$(name); n2="job \"two\" \\ $(name)"
"$F" run --metrics-file "$T/textfile/one.prom" "$n1" -- sleep 0.2 & p1=$!
"$F" run --metrics-file "$T/textfile/two.prom" "$n2" -- sleep 0.2 & p2=$!
wait "$p1"; rc1=$?; wait "$p2"; rc2=$?
check "two jobs write their metrics files (exit 0, 0)" test "$rc1" = 0 -a "$rc2" = 0
check "every sample line carries its lease label (escaped per the text format)" \
  python3 - "$T/textfile/one.prom" "$n1" "$T/textfile/two.prom" "$n2" <<'PY'
import re, sys
sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{lease="((?:[^"\\\n]|\\["\\n])*)"(?:,[a-zA-Z_]+="[^"]*")*\} \S+$')
def unescape(v):
    return re.sub(r'\\(.)', lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), v)
ok = True
for path, name in ((sys.argv[1], sys.argv[2]), (sys.argv[3], sys.argv[4])):
    lines = [l for l in open(path).read().splitlines() if l and not l.startswith("#")]
    ok &= len(lines) > 10
    for l in lines:
        m = sample.match(l)
        if not m or unescape(m.group(2)) != name:
            print("# bad line in", path, repr(l)); ok = False
sys.exit(not ok)
PY
check "... the histogram keeps its le label after the lease label" \
  grep -q "^fence_heartbeat_latency_seconds_bucket{lease=\"$n1\",le=\"+Inf\"} " "$T/textfile/one.prom"
check "... job two's file says job two acquired once" \
  grep -q -F "fence_lease_acquired_total{lease=\"job \\\"two\\\" \\\\ " "$T/textfile/two.prom"
cat "$T/textfile/one.prom" "$T/textfile/two.prom" > "$T/both.prom"
check "one folder, two jobs: two distinct fence_lease_acquired_total series" \
  test "$(grep -c '^fence_lease_acquired_total{' "$T/both.prom")" = 2 -a \
       "$(grep '^fence_lease_acquired_total{' "$T/both.prom" | sort -u | wc -l)" = 2

# ---- --metrics-file in a missing folder: refused before anything runs ----------------------
n=$(name)
"$F" run --metrics-file "$T/no/such/dir/m.prom" "$n" -- touch "$T/mran" 2> "$T/m.err"; rc=$?
check "--metrics-file in a missing folder: exit 64, the command never ran" \
  test "$rc" = 64 -a ! -e "$T/mran"
check "... a clear message naming the folder" \
  bash -c "grep -q -F '$T/no/such/dir' '$T/m.err' && grep -q 'No such file or directory' '$T/m.err'"
check "... and no lease was taken (no token issued)" test "$("$F" token "$n")" = 0
touch "$T/afile"
"$F" run --metrics-file "$T/afile/m.prom" "$n" -- touch "$T/mran" 2> /dev/null; rc=$?
check "--metrics-file under a plain file: 64, nothing ran" test "$rc" = 64 -a ! -e "$T/mran"
"$F" run --metrics-file "$T/textfile" "$n" -- touch "$T/mran" 2> /dev/null; rc=$?
check "--metrics-file naming a folder: 64, nothing ran" test "$rc" = 64 -a ! -e "$T/mran"
(cd "$T" && "$F" run --metrics-file rel.prom "$n" -- true); rc=$?
check "--metrics-file with no folder part (the current folder) works" test "$rc" = 0 -a -s "$T/rel.prom"

# ---- status --json is valid UTF-8 JSON whatever bytes a name holds --------------------------
# Names are bytes.  Expected "name" values: '"' and '\' round-trip, valid
# UTF-8 is kept, every byte that is not part of well-formed UTF-8 becomes
# U+FFFD (one per byte).
jcase() { # jcase DESCRIPTION NAME_PRINTF_FORMAT EXPECTED_PYTHON_LITERAL
  local what=$1 nm; nm=$(printf "$2-%s" "$$")
  "$F" run --ttl 2s "$nm" -- sh -c 'echo x > "$1"; while [ ! -e "$1.stop" ]; do sleep 0.05; done' sh "$T/j" 2> /dev/null &
  local jp=$!; BG+=("$jp")
  wait_until 5 file_has "$T/j"
  "$F" status --json "$nm" > "$T/j.json" 2> "$T/j.err"; local rc=$?
  touch "$T/j.stop"; wait "$jp"; rm -f "$T/j" "$T/j.stop"
  if [ "$rc" = 0 ] && python3 - "$T/j.json" "$3-$$" <<'PY'
import ast, json, sys
raw = open(sys.argv[1], "rb").read()
d = json.loads(raw.decode("utf-8"))          # strict: invalid UTF-8 raises
exp = ast.literal_eval(sys.argv[2].rsplit("-", 1)[0]) + "-" + sys.argv[2].rsplit("-", 1)[1]
sys.exit(not (d["name"] == exp and d["held"] is True and d["holder_info"].startswith("host=")))
PY
  then ok "status --json, $what: valid UTF-8 JSON, name decodes as expected"
  else nok "status --json, $what (rc $rc: $(head -c 300 "$T/j.json" | od -c | head -5))"; fi
}
jcase 'quotes and backslashes' 'q"uo\\te\\' "'q\"uo\\\\te\\\\'"
jcase 'valid UTF-8 (2, 3, 4 bytes)' 'caf\303\251 \342\202\254 \360\237\230\200' "'caf\u00e9 \u20ac \U0001f600'"
jcase 'invalid bytes 0xff 0xfe' 'bad\377\376x' "'bad\ufffd\ufffdx'"
jcase 'a lone continuation byte' 'a\200b' "'a\ufffdb'"
jcase 'an overlong encoding of /' 'ov\300\257' "'ov\ufffd\ufffd'"
jcase 'a UTF-16 surrogate in UTF-8' 'sur\355\240\200' "'sur\ufffd\ufffd\ufffd'"
jcase 'a truncated 3-byte sequence' 'tr\342\202' "'tr\ufffd\ufffd'"
jcase 'above U+10FFFF' 'big\364\220\200\200' "'big\ufffd\ufffd\ufffd\ufffd'"
# Control bytes cannot be in a name at all (fence refuses them before asking
# Redis), so status --json never has to print one there.
for c in '\001' '\033' '\177'; do
  "$F" status --json "$(printf "ctl${c}x")" > "$T/c.out" 2> "$T/c.err"; rc=$?
  check "status --json with control byte $c in the name: 64, nothing on stdout" \
    test "$rc" = 64 -a ! -s "$T/c.out" -a -s "$T/c.err"
done

# Holder info written into Redis by hand may hold any byte: --json escapes
# control bytes as \u00XX; the text output and the busy message print '?'.
n=$(name); hid=0123456789abcdef0123456789abcdef
rcli set "fence:{$n}" "$hid:42" PX 5000 > /dev/null
rcli set "fence:{$n}:info" "$hid:"$'esc\033[31m bell\007 del\177 nl\n end\\ "q"' PX 5000 > /dev/null
"$F" status --json "$n" > "$T/ctl.json" 2> /dev/null; rc=$?
check "holder_info with control bytes: --json is valid and decodes to the stored text" \
  python3 -c '
import json,sys; d=json.loads(open(sys.argv[1],"rb").read().decode("utf-8"))
sys.exit(not (d["holder_info"] == "esc\x1b[31m bell\x07 del\x7f nl\n end\\ \"q\"" and d["holder"] == sys.argv[2]))' "$T/ctl.json" "$hid"
check "... written as \\u00XX (\\u001b \\u0007 \\u007f \\u000a), no raw control byte in the output" \
  bash -c "grep -q -F '\\u001b' '$T/ctl.json' && grep -q -F '\\u0007' '$T/ctl.json' && grep -q -F '\\u007f' '$T/ctl.json' && grep -q -F '\\u000a' '$T/ctl.json' && ! LC_ALL=C grep -q -P '[\\x00-\\x1f\\x7f]' <(tr -d '\\n' < '$T/ctl.json')"
"$F" status "$n" > "$T/ctl.txt"
"$F" run "$n" -- true 2> "$T/ctl.err"
check "text status and the busy message print them as '?'" \
  bash -c "grep -q -F 'holder_info:  esc?[31m bell? del? nl? end' '$T/ctl.txt' && grep -q -F 'esc?[31m bell?' '$T/ctl.err' && ! LC_ALL=C grep -q -P '[\\x00-\\x08\\x0b-\\x1f\\x7f]' '$T/ctl.txt' '$T/ctl.err'"
rcli del "fence:{$n}" "fence:{$n}:info" > /dev/null

echo "# $pass passed, $fail failed"
[ "$fail" -eq 0 ]
