#!/usr/bin/env bash
# test_docs.sh -- the documentation's code is tested: every ```c block of
# README.md and docs/*.md is compiled with the pkg-config line the text
# gives next to it and run against the real servers of scripts/with-servers
# (FENCE_TEST_REDIS_URL, FENCE_TEST_PG_CONNINFO); every ```sh, ```sql and
# ```console block must paste cleanly.  Prints one TAP-style line per check
# ("ok - ..." / "not ok - ..."); exits non-zero on any failure.
#
# Markers.  Each ```c block needs an HTML comment (invisible on GitHub) on
# the line before it (blank lines in between are allowed):
#   <!-- doc-test: program -->
#       a whole program with main(): compiled as it is and run (exit 0).
#   <!-- doc-test: fragment setup=NAME[,NAME...] -->
#       the body of a function: its leading #include lines go to file scope,
#       tests/docs/setup/NAME.h gives it the variables it uses (c, lease,
#       conn, db, g, token, holder ...), and after it returns the setup
#       checks that the write happened (e.g. PostgreSQL: row 7 is 'paid',
#       stamped with the token, and no transaction was left open).  The
#       setups: lease (Redis), pg, sqlite, gate.  `return 1` in a fragment
#       is a failure.
#   <!-- doc-test: compile-only [setup=...] WHY -->
#       compiled and linked, not run; the TAP line says so (none today).
# The build line: the block itself or the 3 lines after it must contain
# "$(pkg-config --cflags --libs NAMES)"; exactly those NAMES are used,
# against .pc files that point at $FENCE_BUILD (a staging folder: the
# headers of lib/*/, the shared libraries and .pc files of the build).
#
# ```sh / ```sql / ```console blocks are pasted by readers: a "..." in one
# is a failure unless the block is marked <!-- doc-test: illustrative -->.
# <!-- doc-test: run --> before a ```sh block runs it with bash -e in an
# empty folder, with the build's fence first in PATH and FENCE_REDIS_URL
# set to the test Redis.
# Last, every relative link of the same files must resolve, anchors
# included (tests/docs/links.py), and every SQL function, C name,
# SQLSTATE, reason= and version they quote must exist in the code, read
# from the code (tests/docs/names.py, which states the rules; the one
# exemption: docs/history.md may name what is gone).
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
B=${FENCE_BUILD:-build}
case "$B" in /*) ;; *) B=$root/$B ;; esac
fails=0
ok() { echo "ok - $1"; }
nok() { echo "not ok - $1"; fails=$((fails + 1)); }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fence-docs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

for v in FENCE_TEST_REDIS_URL FENCE_TEST_PG_CONNINFO; do
  if [ -z "${!v:-}" ]; then
    nok "$v is set (run under scripts/with-servers --redis --pg)"
    exit 1
  fi
done

# The staging prefix: what `make install` would give a user, from the build.
stage=$tmp/stage
mkdir -p "$stage/include" "$stage/lib/pkgconfig"
for h in lib/*/fence*.h; do
  case "$h" in *_internal.h) continue ;; esac
  ln -s "$root/$h" "$stage/include/"
done
for so in "$B"/lib*.so*; do
  [ -e "$so" ] && ln -s "$so" "$stage/lib/"
done
for in in lib/*/*.pc.in; do
  name=$(basename "$in" .in)
  if [ -f "$B/$name" ]; then
    sed "s|^prefix=.*|prefix=$stage|" "$B/$name" > "$stage/lib/pkgconfig/$name"
  else
    sed -e "s|@PREFIX@|$stage|g" -e 's|@LIBDIR@|${prefix}/lib|g' \
        -e 's|@INCLUDEDIR@|${prefix}/include|g' -e 's|@VERSION@|0|g' "$in" \
        > "$stage/lib/pkgconfig/$name"
  fi
done
export PKG_CONFIG_PATH=$stage/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}

cflags=(-Wall -Wextra -Wno-unused-parameter -Werror -I"$root/tests/docs")
if [ -n "${FENCE_SANITIZER:-}" ]; then
  cflags+=(-fsanitize="$FENCE_SANITIZER" -fno-sanitize-recover=all -fno-omit-frame-pointer)
fi

# FENCE_DOC_FILES="a.md b.md" checks other files (to try the suite itself).
read -ra docs <<< "${FENCE_DOC_FILES:-README.md $(echo docs/*.md)}"
if ! python3 tests/docs/extract.py "$tmp" "${docs[@]}" > "$tmp/manifest"; then
  nok "extract the code blocks of ${docs[*]}"
  exit 1
fi
nc=$(awk -F'\t' '$3 == "c"' "$tmp/manifest" | wc -l)
[ "$nc" -gt 0 ]; r=$?
[ $r -eq 0 ] && ok "found $nc C snippets in ${docs[*]}" || nok "found C snippets in ${docs[*]}"

while IFS=$'\t' read -r id where lang mode setups pkgs problem; do
  if [ "$problem" != "-" ]; then
    nok "$where ($lang): $problem"
    continue
  fi
  case "$lang" in
  c)
    what="$where ($mode${setups:+, setup $setups})"
    [ "$setups" = "-" ] && what="$where ($mode)"
    read -ra pc <<< "$(pkg-config --cflags --libs $pkgs 2>"$tmp/$id.pcerr")" \
      || { nok "$what: pkg-config --cflags --libs $pkgs: $(cat "$tmp/$id.pcerr")"; continue; }
    if cc "${cflags[@]}" -o "$tmp/$id" "$tmp/$id.c" "${pc[@]}" > "$tmp/$id.cc" 2>&1; then
      ok "$what: compiles with \$(pkg-config --cflags --libs $pkgs)"
    else
      nok "$what: compiles with \$(pkg-config --cflags --libs $pkgs)"
      sed 's/^/#   /' "$tmp/$id.cc" | head -40
      continue
    fi
    if [ "$mode" = compile-only ]; then
      ok "$what: compile-only, not run (the marker says why)"
      continue
    fi
    mkdir -p "$tmp/run-$id"
    ( cd "$tmp/run-$id" &&
      LD_LIBRARY_PATH=$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
      FENCE_REDIS_URL=$FENCE_TEST_REDIS_URL timeout 60 "$tmp/$id" ) > "$tmp/$id.out" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
      ok "$what: runs against the test servers (exit 0)"
    else
      nok "$what: runs against the test servers (exit $rc)"
      sed 's/^/#   /' "$tmp/$id.out" | head -40
    fi
    ;;
  *)
    case "$mode" in
    illustrative) ok "$where ($lang): marked illustrative" ;;
    paste) ok "$where ($lang): pastes cleanly (no \"...\")" ;;
    run)
      if [ "$lang" != sh ]; then
        nok "$where ($lang): only sh blocks can be run"
        continue
      fi
      mkdir -p "$tmp/run-$id"
      ( cd "$tmp/run-$id" && PATH=$B:$PATH FENCE_REDIS_URL=$FENCE_TEST_REDIS_URL \
        timeout 60 bash -e "$tmp/$id.sh" ) > "$tmp/$id.out" 2>&1
      rc=$?
      if [ $rc -eq 0 ]; then
        ok "$where (sh): pastes cleanly and runs (exit 0)"
      else
        nok "$where (sh): runs (exit $rc)"
        sed 's/^/#   /' "$tmp/$id.out" | head -20
      fi
      ;;
    esac
    ;;
  esac
done < "$tmp/manifest"

# Every relative link and anchor of the same files leads somewhere
# (links.py prints its own ok / not ok lines).
python3 tests/docs/links.py "${docs[@]}" > "$tmp/links" 2>&1; r=$?
cat "$tmp/links"
[ $r -eq 0 ] || nok "every relative link of ${docs[*]} resolves (links.py exit $r)"

# Every name and version they quote is the code's (names.py prints its own
# ok / not ok lines).
python3 tests/docs/names.py "${docs[@]}" > "$tmp/names" 2>&1; r=$?
cat "$tmp/names"
[ $r -eq 0 ] || nok "every name and version of ${docs[*]} exists in the code (names.py exit $r)"

[ $fails -eq 0 ]
