#!/usr/bin/env bash
# test_sqlite_reuse.sh -- a SQLite token serves one write transaction, through
# the loadable extension on one connection reused as pools reuse it: the
# real `sqlite3` shell (one session kept open while a second process
# writes), Python's sqlite3 (tests/sqlite/txn_pysqlite.py) and SQLAlchemy's
# QueuePool (tests/sqlite/txn_sqlalchemy.py), with Debian's /usr/bin/python3.
# After a fenced transaction every write without a token of its own is
# refused and undone as any refused statement is: in autocommit SQLite
# rolls its transaction back, leaving no transaction and no lock behind;
# in a transaction that transaction stays open, holding the write lock
# (another process cannot write), until its owner rolls it back, which
# leaves none.  The C API's side
# and the edges: test_sqlite_txn.c.  Needs FENCE_BUILD (the build dir) with
# fence_sqlite_ext.so in it.  Prints ok/not ok lines; exits non-zero on any
# failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=${FENCE_BUILD:-build}
PY=/usr/bin/python3 # Debian's: its python3-sqlalchemy
export PYTHONDONTWRITEBYTECODE=1 # no __pycache__ in the source tree
failures=0
ok()     { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; failures=$((failures + 1)); }

missing=0
command -v sqlite3 >/dev/null 2>&1 || { not_ok "the sqlite3 shell is installed (scripts/install-deps)"; missing=1; }
[ -f "$B/fence_sqlite_ext.so" ] || { not_ok "$B/fence_sqlite_ext.so exists (make -j2 all)"; missing=1; }
[ -x "$PY" ] || { not_ok "$PY exists (scripts/install-deps)"; missing=1; }
for m in sqlite3 sqlalchemy; do
  [ -x "$PY" ] && { "$PY" -c "import $m" 2>/dev/null || { not_ok "$PY imports $m (scripts/install-deps)"; missing=1; }; }
done
[ $missing -eq 0 ] || exit 1
EXT=$(cd "$B" && pwd)/fence_sqlite_ext

. "$(dirname "$0")/ext_preload.sh" # $preload: a sanitizer build's runtime, for the host

dir=$(mktemp -d "${TMPDIR:-/tmp}/fence-sqlite-txn.XXXXXX")
shell_pid=""
cleanup() {
  [ -n "$shell_pid" ] && kill "$shell_pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
db=$dir/shell.db

sqlite3 -bail "$db" "PRAGMA journal_mode=WAL;
  CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'a'), (2, 'b');
  CREATE TABLE side(v TEXT);" >/dev/null

# ---- the shell: one session, kept open ---------------------------------
# say SQL...: send lines to the session, then read its answers up to a
# marker line; they land in $out.
coproc SHELL_SESSION { LD_PRELOAD="$preload" sqlite3 "$db" 2>&1; }
shell_pid=$SHELL_SESSION_PID
n=0
say() {
  n=$((n + 1))
  printf '%s\n' "$@" "SELECT 'end-$n';" >&"${SHELL_SESSION[1]}"
  out=""
  local line
  while IFS= read -r -t 10 line <&"${SHELL_SESSION[0]}"; do
    [ "$line" = "end-$n" ] && return 0
    out+="$line"$'\n'
  done
  out+="(no answer from the shell)"
}
expect() { # name, pattern
  if printf '%s' "$out" | grep -qE -- "$2"; then ok "$1"; else
    not_ok "$1"; printf '#   expected /%s/, got:\n' "$2"; printf '%s\n' "$out" | sed 's/^/#   /'
  fi
}
# Another process writes the file with no busy timeout: any lock the
# session kept would fail it.
other_writes() {
  if err=$(sqlite3 -cmd ".timeout 0" "$db" "INSERT INTO side VALUES ('other');" 2>&1); then
    ok "$1"
  else
    not_ok "$1"; echo "#   $err"
  fi
}

say ".load $EXT" "SELECT fence_protect('t');"
say "SELECT fence_set_token(5);" "UPDATE t SET v = 'by5' WHERE id = 1;" \
    "SELECT 'stamp=' || fence_token FROM t WHERE id = 1;"
expect "the shell: select fence_set_token(5); then update ...; is admitted" 'stamp=5'
say "UPDATE t SET v = 'tokenless' WHERE id = 2;"
expect "the next update of the session, with no token of its own, is refused" \
  'fence:notoken table "t": no fencing token for this transaction \(a token serves one write transaction\)'
other_writes "the refused update leaves no lock (another process writes at once)"
say "BEGIN;" "UPDATE t SET v = 'begun' WHERE id = 2;"
expect "a token-less update in BEGIN is refused" 'fence:notoken table "t"'
if sqlite3 -cmd ".timeout 0" "$db" "INSERT INTO side VALUES ('too early');" 2>/dev/null; then
  not_ok "... its transaction is the session's, and holds the write lock until rolled back"
else
  ok "... its transaction is the session's, and holds the write lock until rolled back"
fi
say "ROLLBACK;"
other_writes "... which the session's ROLLBACK releases"
say "SELECT fence_set_token(6);" "BEGIN IMMEDIATE;" "UPDATE t SET v = 'six' WHERE id = 1;" \
    "UPDATE t SET v = 'six' WHERE id = 2;" "COMMIT;" \
    "SELECT 'rows=' || group_concat(v || fence_token, ',') FROM t;" \
    "SELECT 'after=' || coalesce(fence_token(), 'none');"
expect "a transaction's writes share its token" 'rows=six6,six6'
expect "... which its COMMIT ends" 'after=none'
say "DELETE FROM t;" "SELECT 'count=' || count(*) FROM t;"
expect "a later token-less delete is refused" 'fence:notoken table "t"'
expect "... and deletes nothing" 'count=2'
printf '.quit\n' >&"${SHELL_SESSION[1]}"
wait "$shell_pid" 2>/dev/null
shell_pid=""

# ---- Python's sqlite3 and SQLAlchemy's QueuePool ------------------------
for script in txn_pysqlite.py txn_sqlalchemy.py; do
  rm -f "$dir/py.db" "$dir/py.db-wal" "$dir/py.db-shm"
  res=$(LD_PRELOAD="$preload" "$PY" "$here/$script" "$dir/py.db" "$EXT" 2>&1)
  rc=$?
  printf '%s\n' "$res" | sed "s/^\(not \)\{0,1\}ok - /&${script%.py}: /"
  failures=$((failures + $(printf '%s\n' "$res" | grep -c '^not ok')))
  if [ $rc -ne 0 ] && ! printf '%s\n' "$res" | grep -q '^not ok'; then
    not_ok "$script ran to the end (exit $rc)"
  fi
done

if [ "$failures" -gt 0 ]; then
  echo "# $failures failed"
  exit 1
fi
exit 0
