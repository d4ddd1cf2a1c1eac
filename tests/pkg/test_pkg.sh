#!/usr/bin/env bash
# test_pkg.sh -- packaging: a DESTDIR install with PREFIX=/usr and a custom
# LIBDIR (the .pc files, pkg-config --validate, one program per library
# built with exactly `cc x.c $(pkg-config --cflags --libs fence_X)` against
# the staged tree and run), uninstall (no file left, nothing outside
# removed), the man pages (mandoc -T lint, every subcommand), the bash
# completion; `make install PREFIX=...` and uninstall as a user who may not
# write pg_config's folders (nobody, when run as root): all but the
# PostgreSQL extension, one line saying so, nothing built or written as
# that user in the repo or the system; the paths pkg-config names
# (fence_sql, the SQLite extension: loaded by that path from Python's
# sqlite3 and the sqlite3 shell, and by the name docs/sqlite.md gives); the
# Python package installed where python3 looks under the prefix and
# finding its libraries there (a clear error when they are not); a root
# install without DESTDIR running ldconfig (none under DESTDIR); the
# completion found by bash-completion's loader; the Redis scripts in
# share/fence/redis (docs/contract.md).  Needs no server.  Run by
# scripts/run-suites from the repo root with FENCE_BUILD set; reuses that
# build (make install rebuilds nothing that is up to date).
set -u
cd "$(dirname "$0")/../.."

B=${FENCE_BUILD:-build}
pass=0; fail=0
ok() { echo "ok - $*"; pass=$((pass + 1)); }
nok() { echo "not ok - $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else nok "$what"; fi; }

T=$(mktemp -d "${TMPDIR:-/tmp}/fence-pkg.XXXXXX")
trap 'rm -rf "$T"' EXIT
S=$T/stage
LIB=/usr/lib/fence-multiarch     # a LIBDIR that is not $(PREFIX)/lib
PCDIR=$S$LIB/pkgconfig
SAN=()
[ -n "${FENCE_SANITIZER:-}" ] && SAN=(-fsanitize="$FENCE_SANITIZER")
VARS=(B="$B" DESTDIR="$S" PREFIX=/usr LIBDIR="$LIB")
PY=/usr/bin/python3            # Debian's: the one `make install` asks where the package goes
# Hosts that load the extension, with a sanitizer build's runtime first.
SANRUN=$T/bin
FENCE_BUILD=$B scripts/san-runtime --wrap "$SANRUN" "$PY" sqlite3 || exit 1
chmod 755 "$T" "$SANRUN" "$SANRUN/.pysite" 2>/dev/null
# FENCE_PKG_NO_BUILD=1: install the build as it is, without bringing it up
# to date first (while others' sources are mid-change).
[ "${FENCE_PKG_NO_BUILD:-0}" = 1 ] && VARS+=(-o all)

# --- install ------------------------------------------------------------
mkdir -p "$S/usr/share"
echo keep > "$S/usr/share/sentinel"          # not ours: must survive uninstall
if make -s --no-print-directory "${VARS[@]}" install > "$T/install.log" 2>&1; then
  ok "make install DESTDIR PREFIX=/usr LIBDIR=$LIB"
else
  nok "make install"; sed 's/^/# /' "$T/install.log"; exit 1
fi
for f in usr/bin/fence usr/include/fence.h usr/include/fence_common.h usr/include/fence_pg.h \
         usr/include/fence_sqlite.h usr/include/fence_gate.h "${LIB#/}/fence/fence_sqlite_ext.so" \
         usr/share/fence/postgres/fence.sql usr/share/man/man1/fence.1 usr/share/man/man3/fence.3 \
         usr/share/man/man3/fence_pg.3 usr/share/man/man3/fence_sqlite.3 \
         usr/share/man/man3/fence_gate.3 usr/share/man/man3/fence_common.3 \
         usr/share/bash-completion/completions/fence; do
  check "installed /$f" test -f "$S/$f"
done
# The Redis contract (docs/contract.md): every script as the Redis issuer
# sends it (tests/contract/test_contract.sh checks the bytes against the C
# client's on a real Redis), each beginning with the contract's version.
for f in acquire reissue renew renew_batch release token_raise inspect; do
  check "installed /usr/share/fence/redis/$f.lua, the contract's first line" \
    test "$(head -n 1 "$S/usr/share/fence/redis/$f.lua" 2>/dev/null)" = '-- fence redis contract 1.0 (docs/contract.md)'
done
check "... acquire.lua and reissue.lua begin with issue.lua, then their own text" \
  bash -c 'cd lib/lease/redis && for f in acquire reissue; do cmp -s <(cat issue.lua; printf "\n"; cat $f.lua) "$1/$f.lua" || exit 1; done' _ "$S/usr/share/fence/redis"
check "... and no other file there ($(ls "$S/usr/share/fence/redis" | tr '\n' ' '))" \
  test "$(ls "$S/usr/share/fence/redis" | wc -l)" = 7
PYS=$S/usr/lib/python3/dist-packages/fence    # Debian's python3 searches it for PREFIX=/usr
for f in __init__.py _client.py _lib.py pg.py sqlite.py _installed.py; do
  check "the Python package: ${PYS#"$S"}/$f" test -f "$PYS/$f"
done
check "... byte-compiled (__pycache__/_client.*.pyc)" bash -c "ls '$PYS'/__pycache__/_client.*.pyc >/dev/null"
check "... _installed.py names LIBDIR $LIB" grep -qx "LIBDIR = '$LIB'" "$PYS/_installed.py"
check "no ldconfig under DESTDIR (the install log says nothing of it)" bash -c "! grep -q ldconfig '$T/install.log'"
out=$(cd "$T" && PYTHONPATH=${PYS%/fence} "$SANRUN/python3" -c 'import fence
try:
    fence.Client("redis://127.0.0.1:1")
except fence.LibraryNotFound as e:
    print(e)' 2>&1)
check "staged, its LIBDIR not there yet: fence.LibraryNotFound names $LIB/libfence.so.0 ($out)" \
  bash -c "[[ \"\$1\" == *'$LIB/libfence.so.0'* ]] && [[ \"\$1\" == *FENCE_LIBDIR* ]]" _ "$out"
out=$(cd "$T" && FENCE_LIBDIR=$S$LIB PYTHONPATH=${PYS%/fence} "$SANRUN/python3" -c 'import fence; print(fence.library_path())' 2>&1)
check "... with FENCE_LIBDIR=\$S$LIB it loads the staged libfence ($out)" test "$out" = "$S$LIB/libfence.so.0"
for l in fence fence_pg fence_sqlite fence_gate; do
  check "lib$l.so -> .so.0 -> .so.0.2.0 and lib$l.a in LIBDIR" \
    test -L "$S$LIB/lib$l.so" -a -L "$S$LIB/lib$l.so.0" -a -f "$S$LIB/lib$l.so.0.2.0" -a -f "$S$LIB/lib$l.a"
done
PGC=${PG_CONFIG:-pg_config}
PKGLIB=$("$PGC" --pkglibdir) EXTDIR=$("$PGC" --sharedir)/extension
for f in "$PKGLIB/fence.so" "$EXTDIR/fence.control" "$EXTDIR/fence--1.4.sql"; do
  check "the PostgreSQL extension under DESTDIR: $f" test -f "$S$f"
done

# --- make install PREFIX=... as a user who may not write pg_config's folders --
# The build is up to date (the install above brought it there, as root):
# the user only reads it.  Run as root, the user is nobody; run as a user,
# that user.
U=$T/user
mkdir -p "$U"
if [ "$(id -u)" -eq 0 ]; then
  chmod 755 "$T" && chown nobody "$U"
  AS=(runuser -u nobody --) who=nobody
else
  AS=() who=$(id -un)
fi
UVARS=(B="$B" PREFIX="$U/opt")
# Not the outer make's jobserver (run from make test, its file descriptors
# do not reach the user's make, which then warns): the user's own make.
NOJOBS=(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL)
[ "${FENCE_PKG_NO_BUILD:-0}" = 1 ] && UVARS+=(-o all)
listing() { find "$PKGLIB" "$EXTDIR" -printf '%p %y %s %T@\n' | sort; }
skipped() { grep -c "^make $1: left out the PostgreSQL extension ($PKGLIB is not writable); run 'make $1-pgext' as root for it\$" "$2"; }
if "${AS[@]}" test -w "$PKGLIB"; then
  nok "$who may write $PKGLIB: no user here to try a non-root make install as"
else
  listing > "$T/pg.before"
  touch "$T/mark"
  "${AS[@]}" "${NOJOBS[@]}" make -s --no-print-directory "${UVARS[@]}" install > "$T/user-install.log" 2>&1; rc=$?
  check "make install PREFIX=\$T/user/opt as $who exits 0 (exit $rc)" test $rc -eq 0
  [ $rc -eq 0 ] || sed 's/^/# /' "$T/user-install.log"
  for f in bin/fence include/fence.h include/fence_pg.h lib/libfence.so lib/libfence_pg.a \
           lib/pkgconfig/fence.pc lib/fence/fence_sqlite_ext.so share/fence/postgres/fence.sql \
           share/fence/redis/acquire.lua share/fence/redis/release.lua; do
    check "... installs $f" test -e "$U/opt/$f"
  done
  UPY=$("$PY" python/sitedir.py "$U/opt")
  check "... installs the Python package in $UPY" test -f "$UPY/fence/__init__.py"
  out=$(cd "$T" && "${AS[@]}" env PYTHONPATH="$UPY" "$SANRUN/python3" -c 'import fence, fence.sqlite
print(fence.library_path()); print(fence.sqlite.extension_path())' 2>&1)
  check "... which loads the prefix's libfence and finds its extension ($(tr '\n' ' ' <<<"$out"))" \
    test "$out" = "$U/opt/lib/libfence.so.0"$'\n'"$U/opt/lib/fence/fence_sqlite_ext.so"
  upc() { PKG_CONFIG_PATH=$U/opt/lib/pkgconfig pkg-config "$@" 2>/dev/null; }
  sql=$(upc --variable=fence_sql fence_pg)
  check "pkg-config --variable=fence_sql fence_pg names the installed fence.sql ($sql)" \
    test "$sql" = "$U/opt/share/fence/postgres/fence.sql" -a -f "$sql"
  ext=$(upc --variable=extension fence_sqlite)
  check "pkg-config --variable=extension fence_sqlite names the installed extension ($ext)" \
    test "$ext" = "$U/opt/lib/fence/fence_sqlite_ext.so" -a -f "$ext"
  out=$(cd "$T" && "${AS[@]}" "$SANRUN/python3" -c 'import sqlite3, sys
c = sqlite3.connect(":memory:"); c.enable_load_extension(True); c.load_extension(sys.argv[1])
print(c.execute("SELECT fence_set_token(7)").fetchone()[0])' "$ext" 2>&1)
  check "... Python's sqlite3 loads it by that path ($out)" test "$out" = 7
  out=$(cd "$T" && "${AS[@]}" "$SANRUN/sqlite3" :memory: ".load $ext" "SELECT fence_set_token(8);" 2>&1)
  check "... the sqlite3 shell too ($out)" test "$out" = 8
  out=$(cd "$T" && "${AS[@]}" "$SANRUN/sqlite3" :memory: ".load $U/opt/lib/fence/fence_sqlite_ext" "SELECT fence_set_token(9);" 2>&1)
  check "... and by the name docs/sqlite.md gives after make install, PREFIX/lib/fence/fence_sqlite_ext ($out)" test "$out" = 9
  out=$(cd "$T" && "${AS[@]}" "$SANRUN/python3" -c 'import sqlite3, sys
c = sqlite3.connect(":memory:"); c.enable_load_extension(True); c.load_extension(sys.argv[1])
print(c.execute("SELECT fence_set_token(10)").fetchone()[0])' "$U/opt/lib/fence/fence_sqlite_ext" 2>&1)
  check "... Python's load_extension() by that name too ($out)" test "$out" = 10
  out=$(cd "$T" && "${AS[@]}" env PYTHONPATH="$UPY" "$SANRUN/python3" -c 'import sqlite3, fence.sqlite
c = sqlite3.connect(":memory:"); fence.sqlite.load_extension(c)
print(c.execute("SELECT fence_set_token(11)").fetchone()[0])' 2>&1)
  check "... and the installed package's fence.sqlite.load_extension(conn) ($out)" test "$out" = 11
  check "... prints one line saying the PostgreSQL extension was left out, naming make install-pgext" \
    test "$(skipped install "$T/user-install.log")" = 1
  check "... and nothing else" test "$(wc -l < "$T/user-install.log")" = 1
  listing > "$T/pg.after"
  check "... writes nothing under $PKGLIB or $EXTDIR" cmp -s "$T/pg.before" "$T/pg.after"
  changed=$(find . -newer "$T/mark" ! -path ./.git | head -n 5)
  check "... builds or writes nothing in the repo${changed:+: $changed}" test -z "$changed"
  "${AS[@]}" "${NOJOBS[@]}" make -s --no-print-directory "${UVARS[@]}" uninstall > "$T/user-uninstall.log" 2>&1; rc=$?
  check "make uninstall PREFIX=\$T/user/opt as $who exits 0 (exit $rc)" test $rc -eq 0
  check "... prints one line saying the PostgreSQL extension was left, naming make uninstall-pgext" \
    test "$(skipped uninstall "$T/user-uninstall.log")" = 1
  left=$(find "$U/opt" ! -type d)
  check "... leaves no file in the prefix${left:+: $left}" test -z "$left"
  listing > "$T/pg.after"
  check "... and nothing under pg_config's folders changed" cmp -s "$T/pg.before" "$T/pg.after"
fi

# --- a root install without DESTDIR runs ldconfig --------------------------
# Into a prefix of the test's (without the PostgreSQL extension: the
# system's folders stay untouched); the linker's cache is rebuilt from the
# system's own configuration, so it lists the same libraries afterwards.
if [ "$(id -u)" -eq 0 ]; then
  R=$T/root/opt
  ldconfig -p | sort > "$T/ld.before"
  make -s --no-print-directory B="$B" PREFIX="$R" PG_EXTENSIONS= install > "$T/root-install.log" 2>&1; rc=$?
  check "make install PREFIX=\$T/root/opt as root exits 0 (exit $rc)" test $rc -eq 0
  check "... runs ldconfig and says $R/lib is not in the linker's search path ($(head -c 200 "$T/root-install.log"))" \
    grep -q "make install: $R/lib is not in the dynamic linker's search path (/etc/ld.so.conf)" "$T/root-install.log"
  ldconfig -p | sort > "$T/ld.after"
  check "... and the linker's cache lists the same libraries as before" cmp -s "$T/ld.before" "$T/ld.after"
  make -s --no-print-directory B="$B" PREFIX="$R" PG_EXTENSIONS= uninstall > "$T/root-uninstall.log" 2>&1
  left=$(find "$R" ! -type d)
  check "... uninstall leaves no file${left:+: $left}" test -z "$left"
else
  nok "a root install without DESTDIR (run as root)"
fi

# --- .pc files ----------------------------------------------------------
pc() { PKG_CONFIG_PATH=$PCDIR pkg-config "$@" 2>/dev/null; }
for p in fence fence_pg fence_sqlite fence_gate; do
  f=$PCDIR/$p.pc
  check "$p.pc: prefix=/usr" grep -qx 'prefix=/usr' "$f"
  check "$p.pc: libdir is $LIB" test "$(pc --variable=libdir "$p")" = "$LIB"
  check "$p.pc: includedir is /usr/include" test "$(pc --variable=includedir "$p")" = /usr/include
  check "$p.pc: Version 0.2.0" test "$(pc --modversion "$p")" = 0.2.0
  check "$p.pc: no @VARIABLE@ left" bash -c "! grep -q @ '$f'"
  check "$p.pc: pkg-config --validate" pc --validate "$p"
  check "$p.pc: no Requires: fence (the checkers never link libfence)" \
    bash -c "! PKG_CONFIG_PATH='$PCDIR' pkg-config --print-requires '$p' 2>/dev/null | grep -qx fence"
done
v=$(pc --variable=fence_sql fence_pg)
check "fence_pg.pc: fence_sql is /usr/share/fence/postgres/fence.sql, installed ($v)" \
  test "$v" = /usr/share/fence/postgres/fence.sql -a -f "$S$v"
v=$(pc --variable=extension fence_sqlite)
check "fence_sqlite.pc: extension is $LIB/fence/fence_sqlite_ext.so, installed ($v)" \
  test "$v" = "$LIB/fence/fence_sqlite_ext.so" -a -f "$S$v"
check "fence_pg.pc: Requires libpq (fence_pg.h exposes PGconn)" \
  bash -c "PKG_CONFIG_PATH='$PCDIR' pkg-config --print-requires fence_pg 2>/dev/null | grep -q '^libpq'"
check "fence_sqlite.pc: Requires sqlite3 (fence_sqlite.h exposes sqlite3)" \
  bash -c "PKG_CONFIG_PATH='$PCDIR' pkg-config --print-requires fence_sqlite 2>/dev/null | grep -q '^sqlite3'"

# --- one program per library, built against the staged tree ---------------
cat > "$T/x_fence.c" <<'C'
#include <fence.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    fence_client_options o;
    fence_client_options_init(&o);
    return strcmp(fence_status_name(FENCE_LOST), "FENCE_LOST") != 0;
}
C
cat > "$T/x_fence_pg.c" <<'C'
#include <fence_pg.h>
#include <string.h>
int main(void) {
    size_t len = 0;
    const char *sql = fence_pg_install_sql(&len);
    PGconn *conn = NULL;   /* the header exposes libpq's types */
    return !(len > 0 && strlen(sql) == len && fence_pg_errmsg(conn) != NULL);
}
C
cat > "$T/x_fence_sqlite.c" <<'C'
#include <fence_sqlite.h>
int main(void) {
    sqlite3 *db;
    uint64_t t = 0;
    if (sqlite3_open(":memory:", &db) != SQLITE_OK) return 1;
    int bad = fence_sqlite_attach(db) != FENCE_OK ||
              fence_sqlite_set_token(db, 42, NULL) != FENCE_OK ||
              fence_sqlite_token(db, &t) != FENCE_OK || t != 42;
    sqlite3_close(db);
    return bad;
}
C
cat > "$T/x_fence_gate.c" <<'C'
#include <fence_gate.h>
int main(void) {
    fence_gate *g;
    fence_gate_txn *t;
    uint64_t mark = 0;
    if (fence_gate_open(&g, NULL) != FENCE_OK) return 1;
    int bad = fence_gate_begin(g, "r", 7, NULL, &t, NULL) != FENCE_OK ||
              fence_gate_commit(t) != FENCE_OK ||
              fence_gate_begin(g, "r", 6, NULL, &t, NULL) != FENCE_STALE ||
              fence_gate_mark(g, "r", &mark) != FENCE_OK || mark != 7;
    fence_gate_close(g);
    return bad;
}
C
# PKG_CONFIG_SYSROOT_DIR puts the staged root before every -I/-L, the
# dependencies' too (libpq's /usr/include/postgresql, hiredis): a sysroot
# holds its -dev packages, so link the ones the flags name into the stage
# for the build, and take them away before uninstall.
links=()
for p in fence fence_pg fence_sqlite fence_gate; do
  for fl in $(PKG_CONFIG_SYSROOT_DIR=$S pc --cflags "$p"); do
    case "$fl" in -I"$S"/*) d=${fl#-I"$S"} ;; *) continue ;; esac
    if [ ! -e "$S$d" ] && [ -d "$d" ]; then ln -s "$d" "$S$d" && links+=("$S$d"); fi
  done
done
for p in fence fence_pg fence_sqlite fence_gate; do
  flags=$(PKG_CONFIG_SYSROOT_DIR=$S PKG_CONFIG_PATH=$PCDIR pkg-config --cflags --libs "$p" 2>/dev/null)
  # shellcheck disable=SC2086 # the flags are words
  if cc "${SAN[@]}" -o "$T/x_$p" "$T/x_$p.c" $flags 2> "$T/cc.log"; then
    ok "cc x_$p.c \$(pkg-config --cflags --libs $p) against the staged install"
    check "x_$p runs against the staged lib$p.so" env LD_LIBRARY_PATH="$S$LIB" "$T/x_$p"
    check "x_$p is linked to the staged lib$p.so.0" \
      bash -c "LD_LIBRARY_PATH='$S$LIB' ldd '$T/x_$p' | grep -q '$S$LIB/lib$p.so.0'"
  else
    nok "cc x_$p.c \$(pkg-config --cflags --libs $p): $flags"; sed 's/^/# /' "$T/cc.log"
  fi
done
for l in "${links[@]}"; do rm -f "$l"; done

# --- man pages and completion --------------------------------------------
M=$S/usr/share/man
for page in "$M"/man1/*.1 "$M"/man3/*.3; do
  # References to pages this machine lacks (and its mandoc.db) are the
  # machine's business; the fence pages are looked up in the stage.
  # (Debian's mandoc looks Xr up in the system manpath only, -M or not:
  # a reference to a fence page counts as found when the stage has it.)
  out=$(mandoc -T lint -W all "$page" 2>&1 | grep -v 'outdated mandoc.db' |
        grep -v -E 'referenced manual not found: Xr (redis-cli|c_rehash|ps|flock|nohup|setsid|fork|snprintf|sqlite3) ' |
        while IFS= read -r line; do
          if [[ "$line" =~ referenced\ manual\ not\ found:\ Xr\ (fence[a-z_]*)\ ([13]) ]] &&
             [ -f "$M/man${BASH_REMATCH[2]}/${BASH_REMATCH[1]}.${BASH_REMATCH[2]}" ]; then continue; fi
          echo "$line"
        done)
  check "mandoc -T lint ${page#"$M"/}${out:+: $out}" test -z "$out"
done
for cmd in run status token help; do
  check "fence(1) documents subcommand $cmd" grep -q "^\.It Cm $cmd" "$M/man1/fence.1"
done
# Every option the CLI's help texts name is in fence(1).
opts=$( { "$S/usr/bin/fence" --help; for c in run status token; do "$S/usr/bin/fence" help "$c"; done; } 2>&1 |
        grep -o -E '(^|[ ,])--?[a-zA-Z][-a-zA-Z]*' | sed 's/^[ ,]//' | grep -v -x -e -c | sort -u)
for o in $opts; do
  check "fence(1) documents $o" grep -q -e "Fl \\\\${o#-}\\b" -e "Fl ${o#-}\\b" "$M/man1/fence.1"
done
for h in fence fence_pg fence_sqlite fence_gate fence_common; do
  check "$h(3): thread and ownership rule" grep -q '^\.Sh THREADS AND OWNERSHIP' "$M/man3/$h.3"
done
C=$S/usr/share/bash-completion/completions/fence
check "completion: bash -n" bash -n "$C"
check "completion: fence r<TAB> -> run" \
  test "$(bash -c 'source "$1"; COMP_WORDS=(fence r); COMP_CWORD=1; _fence; echo "${COMPREPLY[*]}"' _ "$C")" = run
check "completion: fence run --tt<TAB> -> --ttl" \
  test "$(bash -c 'source "$1"; COMP_WORDS=(fence run --tt); COMP_CWORD=2; _fence; echo "${COMPREPLY[*]}"' _ "$C")" = --ttl
check "install-deps installs bash-completion, whose loader reads the installed completion" \
  grep -q '^ *bash-completion ' scripts/install-deps
# (It looks in $XDG_DATA_DIRS, default /usr/local/share:/usr/share: where
# PREFIX=/usr/local and /usr put it.)
out=$(XDG_DATA_DIRS=$S/usr/share bash -c '. /usr/share/bash-completion/bash_completion && __load_completion fence && complete -p fence' 2>&1)
check "... bash-completion's loader finds it under PREFIX/share ($out)" test "$out" = "complete -F _fence fence"
check "completion: fence status --j<TAB> -> --json" \
  test "$(bash -c 'source "$1"; COMP_WORDS=(fence status --j); COMP_CWORD=2; _fence; echo "${COMPREPLY[*]}"' _ "$C")" = --json

# --- uninstall ------------------------------------------------------------
if make -s --no-print-directory "${VARS[@]}" uninstall > "$T/uninstall.log" 2>&1; then
  ok "make uninstall"
else
  nok "make uninstall"; sed 's/^/# /' "$T/uninstall.log"
fi
left=$(find "$S" ! -type d ! -path "$S/usr/share/sentinel")
check "uninstall leaves no file in the DESTDIR tree${left:+: $left}" test -z "$left"
check "uninstall keeps a file it did not install (share/sentinel)" grep -qx keep "$S/usr/share/sentinel"
check "uninstall removes fence's own empty folders (LIBDIR/fence, share/fence)" \
  test ! -e "$S$LIB/fence" -a ! -e "$S/usr/share/fence"

# The issue's case: DATADIR=/usr/share must never take /usr/share with it.
VARS2=("${VARS[@]}" DATADIR=/usr/share)
make -s --no-print-directory "${VARS2[@]}" install > "$T/install2.log" 2>&1 &&
  make -s --no-print-directory "${VARS2[@]}" uninstall > "$T/uninstall2.log" 2>&1
check "install + uninstall with DATADIR=/usr/share" test $? -eq 0
check "... /usr/share and its sentinel survive" grep -qx keep "$S/usr/share/sentinel"
left=$(find "$S" ! -type d ! -path "$S/usr/share/sentinel")
check "... and no installed file is left${left:+: $left}" test -z "$left"
check "no rm -r in the Makefile's install/uninstall" \
  bash -c "! sed -n '/^install:/,/^help:/p' Makefile | grep -q 'rm -[a-z]*r'"
help=$(make -s --no-print-directory help 2>&1)
for t in all examples test check valgrind bench demo fuzz torture deps install uninstall install-pgext \
         uninstall-pgext clean help; do
  check "make help lists $t" grep -q -E "^make (\[)?$t" <<< "$help"
done

echo "# test_pkg: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
