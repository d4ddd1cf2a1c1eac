#!/usr/bin/env bash
# test_histcheck.sh -- tests/torture/histcheck.py on fabricated histories
# (tests/torture/histories/): good.tsv must pass (exit 0, violations 0);
# KIND.tsv and KIND.VARIANT.tsv must be flagged with exactly the violation
# kind KIND (exit 1, every "violation" line of kind KIND); malformed*.tsv
# must be refused as malformed (exit 2, a message, no traceback).
#   FENCE_SUITES=test_histcheck scripts/run-suites build
# Needs nothing but Debian's /usr/bin/python3.
set -u
cd "$(dirname "$0")/../.." || exit 1
PY=/usr/bin/python3
CHK=tests/torture/histcheck.py
H=tests/torture/histories
n=0 fails=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; fails=$((fails + 1)); }
[ -x "$PY" ] || { echo "not ok 1 - $PY is missing (apt-get install python3)"; exit 1; }

out=$(mktemp "${TMPDIR:-/tmp}/fence-histcheck.XXXXXX")
trap 'rm -f "$out" "$out.err"' EXIT
run() { "$PY" "$CHK" "$@" >"$out" 2>"$out.err"; }
kinds() { sed -n 's/^violation \([a-z_]*\) .*/\1/p' "$out" | sort -u | tr '\n' ' '; }

run "$H/good.tsv"; rc=$?
if [ $rc -eq 0 ] && grep -q 'violations 0 ' "$out" && [ -z "$(kinds)" ]; then
  ok "good.tsv passes (exit 0, violations 0)"
else
  nok "good.tsv: exit $rc, kinds '$(kinds)': $(head -5 "$out" "$out.err" | tr '\n' ' ')"
fi

nbad=0
for f in "$H"/*.tsv; do
  b=$(basename "$f" .tsv)
  kind=${b%%.*}
  case "$kind" in good|malformed) continue ;; esac
  nbad=$((nbad + 1))
  run "$f"; rc=$?
  got=$(kinds)
  if [ $rc -eq 1 ] && [ "$got" = "$kind " ]; then
    ok "$b.tsv is flagged as $kind and nothing else ($(grep -c '^violation ' "$out") violation line(s))"
  else
    nok "$b.tsv: expected exit 1 and kind $kind, got exit $rc and kinds '$got' $(head -3 "$out.err" | tr '\n' ' ')"
  fi
done
# One fabricated history per property the checker promises.
for kind in decrease below_admitted repeat_holder refusal_mark lost doubled; do
  [ -e "$H/$kind.tsv" ] || nok "histories/$kind.tsv is missing"
done
[ $nbad -ge 6 ] && ok "$nbad bad histories checked"

for f in "$H"/malformed*.tsv /nonexistent/history.tsv; do
  run "$f"; rc=$?
  if [ $rc -eq 2 ] && grep -q '^histcheck: malformed history: ' "$out.err" && ! grep -q Traceback "$out.err"; then
    ok "$(basename "$f") is refused as malformed (exit 2: $(head -1 "$out.err"))"
  else
    nok "$(basename "$f"): expected exit 2 and a malformed message, got exit $rc: $(head -3 "$out.err" | tr '\n' ' ')"
  fi
done
run; rc=$?
if [ $rc -eq 2 ] && grep -q '^usage: ' "$out.err"; then ok "no argument: usage, exit 2"
else nok "no argument: exit $rc"; fi

[ $fails -eq 0 ]
