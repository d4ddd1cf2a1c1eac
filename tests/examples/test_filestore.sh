#!/usr/bin/env bash
# test_filestore.sh -- the fenced file store example (examples/filestore.c)
# on the write gate: a stale put never replaces a newer file.  Prints
# TAP-style lines; exits non-zero on any failure.  Needs
# $FENCE_BUILD/examples/filestore (built by make tests-build / examples).
set -uo pipefail
B=${FENCE_BUILD:-build}
FS="$B/examples/filestore"
fails=0
ok() { echo "ok - $1"; }
nok() { echo "not ok - $1"; fails=$((fails + 1)); }
check() { # check "what" cond...
  local what=$1; shift
  if "$@"; then ok "$what"; else nok "$what"; fi
}

if [ ! -x "$FS" ]; then
  nok "filestore binary $FS exists (build it: make $FS)"
  exit 1
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/fence-filestore.XXXXXX")
trap 'rm -rf "$dir"' EXIT

put() { # put KEY TOKEN DATA [HOLDER] -> exit status
  printf '%s' "$3" | "$FS" "$dir" put "$1" "$2" ${4+"$4"} 2>"$dir/.err"
}
HA=0123456789abcdef0123456789abcdef
HB=fedcba9876543210fedcba9876543210
get() { "$FS" "$dir" get "$1" 2>/dev/null; }

put k 5 v5; check "put with token 5 succeeds" [ $? -eq 0 ]
check "get returns what was put" [ "$(get k)" = v5 ]
put k 7 v7; check "put with a higher token succeeds" [ $? -eq 0 ]
put k 6 v6; rc=$?
check "put with an older token is refused as stale (exit 3, got $rc)" [ $rc -eq 3 ]
check "the stale put did not replace the file" [ "$(get k)" = v7 ]
check "the refusal says why" grep -q "stale token 6" "$dir/.err"
put k 7 v7b; check "put with an equal token succeeds (same holder)" [ $? -eq 0 ]
check "... and replaces the file" [ "$(get k)" = v7b ]
check "mark prints the high-water mark" [ "$("$FS" "$dir" mark k)" = 7 ]

for bad in 0 -1 abc "" " 9" 9x 99999999999999999999999 9223372036854775808 \
           007 +7 " 7" "7 " 00 -0 0x7 18446744073709551616; do
  put k "$bad" junk; rc=$?
  check "token '$bad' is refused (exit 6, got $rc)" [ $rc -eq 6 ]
done
check "refused tokens changed nothing" [ "$(get k)" = v7b ]
check "... and the refusal names the grammar" grep -q "leading zero" "$dir/.err"
put max 9223372036854775807 top; check "the largest token 2^63-1 is accepted" [ $? -eq 0 ]
check "... and recorded" [ "$("$FS" "$dir" mark max)" = 9223372036854775807 ]

# Holders: an equal token is admitted only from the holder that wrote it.
put h 5 a1 "$HA"; check "put with a holder succeeds" [ $? -eq 0 ]
put h 5 a2 "$HA"; check "the same token from the same holder succeeds" [ $? -eq 0 ]
put h 5 b1 "$HB"; rc=$?
check "the same token from another holder is refused (exit 3, got $rc)" [ $rc -eq 3 ]
check "... the refusal says it is a repeat" grep -q "repeated token 5" "$dir/.err"
check "... and the file is the first holder's" [ "$(get h)" = a2 ]
printf 'b2' | FENCE_HOLDER=$HB "$FS" "$dir" put h 5 2>"$dir/.err"; rc=$?
check "FENCE_HOLDER of another holder is refused too (exit 3, got $rc)" [ $rc -eq 3 ]
printf 'a3' | FENCE_HOLDER=$HA "$FS" "$dir" put h 5 2>"$dir/.err"
check "FENCE_HOLDER of the same holder is admitted" [ $? -eq 0 ]
put h 5 none; rc=$?
check "the same token with no holder is refused (exit 3, got $rc)" [ $rc -eq 3 ]
printf 'x' | FENCE_HOLDER= "$FS" "$dir" put h 5 2>/dev/null; rc=$?
check "an empty FENCE_HOLDER means none: refused too (exit 3, got $rc)" [ $rc -eq 3 ]
put h 6 b6 "$HB"; check "a higher token from the other holder succeeds" [ $? -eq 0 ]
put h 6 a6 "$HA"; rc=$?
check "... and now the first holder's equal token is refused (exit 3, got $rc)" [ $rc -eq 3 ]
put h 5 a5 "$HA"; rc=$?
check "... and its older token too (exit 3, got $rc)" [ $rc -eq 3 ]
check "get returns the data without the holder" [ "$(get h)" = b6 ]
put n 3 n1; put n 3 n2; check "with no holder at all, equal tokens still write" [ $? -eq 0 ]
put n 3 nh "$HA"; rc=$?
check "... but not with a holder (exit 3, got $rc)" [ $rc -eq 3 ]
for badh in ABCDEF0123456789ABCDEF0123456789 0123456789abcdef0123456789abcde \
            0123456789abcdef0123456789abcdef0 0123456789abcdeg0123456789abcdef; do
  put h 7 junk "$badh"; rc=$?
  check "holder '$badh' is refused (exit 2, got $rc)" [ $rc -eq 2 ]
  printf 'junk' | FENCE_HOLDER=$badh "$FS" "$dir" put h 7 2>/dev/null; rc=$?
  check "... also as FENCE_HOLDER (exit 2, got $rc)" [ $rc -eq 2 ]
done
check "refused holders changed nothing" [ "$(get h)" = b6 ]
check "... not even the mark" [ "$("$FS" "$dir" mark h)" = 6 ]
# A writer with a holder killed between rename and commit: its file says
# who wrote it, so the same token from another holder is still refused.
printf 'FENCE 60 %s\nfrom-a-dead-holder' "$HA" >"$dir/d"
put d 60 other "$HB"; rc=$?
check "a file's own token from another holder is refused (exit 3, got $rc)" [ $rc -eq 3 ]
check "... and the file stays" [ "$(get d)" = from-a-dead-holder ]
put d 60 mine "$HA"; check "the same holder may write it again" [ $? -eq 0 ]
check "... with its data" [ "$(get d)" = mine ]

for badkey in ../escape .hidden "a/b" "" "sp ace"; do
  put "$badkey" 9 junk; rc=$?
  check "key '$badkey' is refused (exit 2, got $rc)" [ $rc -eq 2 ]
done
check "no file escaped the folder" [ ! -e "$dir/../escape" ]

"$FS" "$dir" get nosuch >/dev/null 2>&1; rc=$?
check "get of a missing key exits 5 (got $rc)" [ $rc -eq 5 ]

# Binary data round-trips.
head -c 200000 /dev/urandom >"$dir/.blob"
"$FS" "$dir" put blob 1 <"$dir/.blob"; check "binary put succeeds" [ $? -eq 0 ]
"$FS" "$dir" get blob >"$dir/.blob.out"
check "binary data round-trips" cmp -s "$dir/.blob" "$dir/.blob.out"

# A writer killed after its rename but before its commit leaves a file
# whose token the gate never recorded: the file's own token still wins.
printf 'FENCE 40\nfrom-a-dead-writer' >"$dir/k"
put k 30 old; rc=$?
check "an older token than the file's own is refused (exit 3, got $rc)" [ $rc -eq 3 ]
check "... and the file stays" [ "$(get k)" = from-a-dead-writer ]
put k 41 new; check "a newer token replaces it" [ $? -eq 0 ]
check "... with its data" [ "$(get k)" = new ]

# Concurrent writers with tokens 50..69 in random order: whatever the
# interleaving, the file ends with the highest token's data.
pids=()
for t in $(shuf -i 50-69); do
  (printf 'v%s' "$t" | "$FS" "$dir" put race "$t" 2>/dev/null; echo $? >"$dir/.rc.$t") &
  pids+=($!)
done
wait "${pids[@]}"
check "concurrent puts: the newest token's data is what stays" [ "$(get race)" = v69 ]
check "concurrent puts: the newest was admitted" [ "$(cat "$dir/.rc.69")" = 0 ]
bad_rc=$(cat "$dir"/.rc.* | grep -cv '^[03]$')
check "concurrent puts: each either succeeded or was stale" [ "$bad_rc" -eq 0 ]
check "concurrent puts: mark is 69" [ "$("$FS" "$dir" mark race)" = 69 ]

leftovers=$(find "$dir" -name '.tmp-*' | wc -l)
check "no temp files are left behind" [ "$leftovers" -eq 0 ]

# The marks persist in the folder's gate file.
check "the gate file exists" [ -f "$dir/.fence-gate.db" ]
put k 41 again; check "after all that, token 41 still writes k" [ $? -eq 0 ]
put k 40 stale; check "and 40 still does not" [ $? -eq 3 ]

[ $fails -eq 0 ]
