#!/usr/bin/env bash
# test_py_stores.sh -- the Python package's stores: fence.pg with psycopg2
# and psycopg 3 (Debian's), each straight to PostgreSQL and through a real
# pgbouncer in transaction mode (psycopg 3 with prepare_threshold=None),
# and fence.sqlite with Python's sqlite3 and the build's extension, with
# Debian's /usr/bin/python3 against the servers of scripts/with-servers.
# Proves, for each: use_token binds the lease's token and the write is
# stamped with it; an older lease's write is refused as fence.Stale with
# offered, highest, kind, object and reason (parsed by the C classifiers,
# fence_pg_classify_error / fence_sqlite_classify_error) raised from the
# driver's exception, and changes nothing; a resource advanced by a newer
# holder refuses the older one (with that holder); a write with no token is
# fence.NoToken; a malformed holder or token is refused, a token that is no
# int is a TypeError; any other error passes unchanged; a token never
# outlives its transaction (use_token refuses where no transaction would
# hold it; after fence.sqlite.transaction() the connection has none); 30
# fenced transactions on one pooled connection all land; a refused SQLite
# writer leaves the write lock free.  And the paused-holder race, for real:
# a holder (its own process) bound its token, is frozen with SIGSTOP past
# its TTL, a newer holder takes the lease and writes, the old one is
# continued and its write is refused as fence.Stale; the store keeps the
# newer write.  TAP lines; exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${FENCE_BUILD:-build}
case "$B" in /*) ;; *) B=$PWD/$B ;; esac
PY=/usr/bin/python3            # Debian's: its python3-psycopg2 / python3-psycopg
missing=0
for v in FENCE_TEST_REDIS_URL FENCE_TEST_PG_CONNINFO FENCE_TEST_PGBOUNCER_PORT FENCE_TEST_PGBOUNCER_TX_USER; do
  [ -n "${!v:-}" ] || { echo "not ok - environment: $v is set (run under scripts/with-servers --redis --pgbouncer)"; missing=1; }
done
for f in "$B/libfence.so.0" "$B/libfence_pg.so.0" "$B/libfence_sqlite.so.0" "$B/fence_sqlite_ext.so" \
         "$B/sql/postgres/fence.sql" "$PY"; do
  [ -e "$f" ] || { echo "not ok - $f exists (make -j2 all; scripts/install-deps)"; missing=1; }
done
for m in psycopg2 psycopg; do
  [ -x "$PY" ] && { "$PY" -c "import $m" 2>/dev/null || { echo "not ok - $PY imports $m (scripts/install-deps)"; missing=1; }; }
done
command -v psql >/dev/null || { echo "not ok - psql is installed"; missing=1; }
[ $missing -eq 0 ] || exit 1

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fence-py-stores.XXXXXX")
db=fence_pystores_$$
cleanup() {
  psql "$FENCE_TEST_PG_CONNINFO" -X -q -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT
scripts/san-runtime --wrap "$tmp/bin" "$PY" sqlite3 || exit 1
pg() { psql "$FENCE_TEST_PG_CONNINFO dbname=$db" -X -q -At -v ON_ERROR_STOP=1 "$@"; }
if psql "$FENCE_TEST_PG_CONNINFO" -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE $db" >/dev/null \
   && pg -f "$B/sql/postgres/fence.sql" >/dev/null \
   && pg -c "CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL)" \
         -c "INSERT INTO accounts SELECT g, 100 FROM generate_series(1, 40) g" \
         -c "SELECT fence.protect('accounts')" \
         -c "GRANT SELECT, INSERT, UPDATE, DELETE ON accounts TO $FENCE_TEST_PGBOUNCER_TX_USER" >/dev/null; then
  echo "ok - PostgreSQL database $db with fence.sql, accounts protected"
else
  echo "not ok - PostgreSQL database $db with fence.sql, accounts protected"; exit 1
fi
if "$tmp/bin/sqlite3" -bail -cmd ".load $B/fence_sqlite_ext" "$tmp/app.db" "SELECT fence_init();" \
     "CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL);" \
     "INSERT INTO accounts VALUES (1, 100), (2, 100), (3, 100);" \
     "SELECT fence_protect('accounts');" >/dev/null; then
  echo "ok - SQLite database with the extension, accounts protected"
else
  echo "not ok - SQLite database with the extension, accounts protected"; exit 1
fi
export FENCE_LIBDIR=$B PYTHONPATH=$PWD/python:$PWD/tests/python PYTHONDONTWRITEBYTECODE=1 \
       FENCE_PY=$tmp/bin/python3 FENCE_PY_DB=$db FENCE_PY_SQLITE=$tmp/app.db
"$tmp/bin/python3" tests/python/stores_cases.py
