#!/usr/bin/env bash
# test_pgext_system.sh -- the test servers never write to the system's
# PostgreSQL.  With the extension installed where pg_config says (make
# install-pgext, its fence.control marked), scripts/with-servers --pg
# offering another build of it (FENCE_PGEXT_DIR: a copy of the built
# fence.so, marked too) runs CREATE EXTENSION from its private tree
# (scripts/servers.sh), and every file of pg_config's pkglibdir and
# sharedir/extension is then as it was, the fence files byte for byte;
# make uninstall-pgext removes exactly what install-pgext put there.
# The system's fence files are put back as they were before the test
# (none, or the ones found), also when it fails or is interrupted.
# Needs root (it writes the system's folders) and no outer servers (it
# starts its own PostgreSQL).  Run by scripts/run-suites from the repo
# root with FENCE_BUILD set; reuses that build.
set -u
cd "$(dirname "$0")/../.."

B=${FENCE_BUILD:-build}
pass=0; fail=0
ok() { echo "ok - $*"; pass=$((pass + 1)); }
nok() { echo "not ok - $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else nok "$what"; fi; }
finish() { echo "# test_pgext_system: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit; }

if [ "$(id -u)" -ne 0 ]; then
  nok "runs as root (it installs the extension into pg_config's folders)"; finish
fi
PGC=${PG_CONFIG:-pg_config}
PKGLIB=$("$PGC" --pkglibdir) EXTDIR=$("$PGC" --sharedir)/extension
if ! [ -d "$PKGLIB" ] || ! [ -d "$EXTDIR" ]; then
  nok "$PGC names existing pkglibdir and sharedir/extension folders ($PKGLIB, $EXTDIR)"; finish
fi
[ -f "$B/lib/pgext/fence.so" ] || { nok "$B/lib/pgext/fence.so is built (make tests-build)"; finish; }

T=$(mktemp -d "${TMPDIR:-/tmp}/fence-pgext-system.XXXXXX")
# The fence files in pg_config's folders now, one a line.
system_fence_files() {
  local f
  for f in "$PKGLIB/fence.so" "$EXTDIR/fence.control" "$EXTDIR"/fence--*.sql; do
    if [ -e "$f" ] || [ -L "$f" ]; then echo "$f"; fi
  done
}
# What a file's name, type, size, mtime, link target and contents are.
describe() {
  local f
  for f in "$@"; do
    stat -c '%n %F %s %.9Y %N' "$f"
    [ -f "$f" ] && sha256sum "$f"
  done
}
mapfile -t before < <(system_fence_files)
describe "${before[@]}" > "$T/before.txt"
# A copy of each, as T/before/N (cp -a: links as links, mode, owner, mtime).
mkdir -p "$T/before"
for i in "${!before[@]}"; do
  cp -a "${before[$i]}" "$T/before/$i" || { nok "keep a copy of ${before[$i]}"; rm -rf "$T"; finish; }
done
# Put the system's fence files back as they were: ours go, the ones found
# before come back.
restored=0
restore() {
  [ "$restored" = 1 ] && return 0
  local now i
  mapfile -t now < <(system_fence_files)
  [ ${#now[@]} -eq 0 ] || rm -f "${now[@]}"
  for i in "${!before[@]}"; do cp -a "$T/before/$i" "${before[$i]}" || return 1; done
  restored=1
}
trap 'restore; rm -rf "$T"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
echo "# pg_config: $PKGLIB, $EXTDIR; fence files there before: ${before[*]:-none}"

# --- the system install, marked ------------------------------------------
MK=(B="$B" PG_CONFIG="$PGC")
[ "${FENCE_PKG_NO_BUILD:-0}" = 1 ] && MK+=(-o "$B/lib/pgext/fence.so")
if make -s --no-print-directory "${MK[@]}" install-pgext > "$T/install.log" 2>&1; then
  ok "make install-pgext (as root, into $PKGLIB and $EXTDIR)"
else
  nok "make install-pgext"; sed 's/^/# /' "$T/install.log"; finish
fi
installed=("$PKGLIB/fence.so" "$EXTDIR/fence.control")
for f in lib/pgext/fence--*.sql; do installed+=("$EXTDIR/${f##*/}"); done
for f in "${installed[@]}"; do check "installed $f" test -f "$f"; done
echo "# the system's copy, not the test's: $$" >> "$EXTDIR/fence.control"
# Everything in both folders (names, sizes, mtimes) and the fence files' bytes.
snapshot() { find "$PKGLIB" "$EXTDIR" -printf '%p %y %s %T@ %l\n' | sort; sha256sum "${installed[@]}"; }
snapshot > "$T/system.txt"

# --- the test servers, offering another build ------------------------------
mkdir -p "$T/ext"
cp "$B/lib/pgext/fence.so" "$T/ext/fence.so" && printf '\nfence-test-build-%08d\n' "$$" >> "$T/ext/fence.so"
cat > "$T/inner.sh" <<'SH'
set -eu
q() { "$FENCE_TEST_PG_BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 "$@"; }
q -f "$FENCE_BUILD/sql/postgres/fence.sql" > /dev/null
q -c 'CREATE EXTENSION fence'
echo "c_version=$(q -c 'SELECT fence.c_version()')"
lib=$(q -c "SELECT setting FROM pg_config WHERE name = 'PKGLIBDIR'")
echo "pkglibdir=$lib"
echo "pgdir=$FENCE_TEST_PG_DIR"
echo "links=$(find "$FENCE_TEST_PG_DIR/tree" \( -name fence.so -o -name fence.control -o -name 'fence--*.sql' \) \
  -type l | wc -l)"
echo "tail=$(q -c "SELECT convert_from(pg_read_binary_file('$lib/fence.so', -26, 25), 'SQL_ASCII')")"
SH
FENCE_BUILD=$B FENCE_PGEXT_DIR=$T/ext scripts/with-servers --pg -- bash "$T/inner.sh" > "$T/servers.log" 2>&1
rc=$?
val() { sed -n "s/^$1=//p" "$T/servers.log"; }
if [ $rc -eq 0 ]; then
  ok "scripts/with-servers --pg with FENCE_PGEXT_DIR: fence.sql, CREATE EXTENSION fence"
else
  nok "scripts/with-servers --pg with FENCE_PGEXT_DIR (exit $rc)"; sed 's/^/# /' "$T/servers.log"
fi
check "fence.c_version() is 2" test "$(val c_version)" = 2
pgdir=$(val pgdir) lib=$(val pkglibdir)
check "the test server's pkglibdir ($lib) is in its private tree, $pgdir/tree" \
  test -n "$pgdir" -a "${lib#"$pgdir"/tree/}" != "$lib"
check "none of the extension's files in the private tree is a link (to the system's)" test "$(val links)" = 0
marker=$(printf 'fence-test-build-%08d' "$$")
check "the test server's fence.so is the test build's ($marker), not the system's" \
  test "$(val tail)" = "$marker"
snapshot > "$T/system.after.txt"
if cmp -s "$T/system.txt" "$T/system.after.txt"; then
  ok "nothing in $PKGLIB or $EXTDIR changed: the fence files are byte-identical, same mtimes"
else
  nok "the test servers changed the system's folders:"
  diff "$T/system.txt" "$T/system.after.txt" | sed 's/^/# /'
fi

# --- uninstall-pgext, then the system as it was ------------------------------
if make -s --no-print-directory "${MK[@]}" uninstall-pgext > "$T/uninstall.log" 2>&1; then
  ok "make uninstall-pgext"
else
  nok "make uninstall-pgext"; sed 's/^/# /' "$T/uninstall.log"
fi
left=$(for f in "${installed[@]}"; do if [ -e "$f" ]; then echo "$f"; fi; done)
check "uninstall-pgext removes every file install-pgext wrote${left:+: $left}" test -z "$left"
restore
mapfile -t after < <(system_fence_files)
describe "${after[@]}" > "$T/after.txt"
if cmp -s "$T/before.txt" "$T/after.txt"; then
  ok "the system's fence files are as before the test (${before[*]:-none})"
else
  nok "the system's fence files differ from before the test:"
  diff "$T/before.txt" "$T/after.txt" | sed 's/^/# /'
fi
finish
