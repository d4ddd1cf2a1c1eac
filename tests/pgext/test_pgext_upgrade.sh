#!/usr/bin/env bash
# test_pgext_upgrade.sh -- upgrades from the released extension builds and
# the released fence.sql version 4 keep every protected table enforcing, on
# real PostgreSQL servers.
#
# The old builds are the released sources, tests/pgext/1.0 .. 1.3 (the
# same git trees as lib/pgext at each release, tests/pgext/README.md),
# each built with its own Makefile (PGXS) in a copy in a temporary folder;
# fence.sql version 4 is tests/pg/fence_v4.sql.  For each version V:
#   1. a PostgreSQL whose private tree offers V's fence.so and scripts
#      (scripts/servers.sh, FENCE_PGEXT_DIR / FENCE_PGEXT_SQL_DIR);
#      fence.sql 4, CREATE EXTENSION fence VERSION 'V' (1.2 and 1.3 with
#      session_preload_libraries = 'fence', as documented then, so UPDATEs
#      carry the plan stamp); tables protected 'c' (strict, with an own
#      integer column, permissive, one with a later BEFORE trigger and so
#      the AFTER checks) and one 'plpgsql'; rows stamped and a resource
#      mark raised with a holder the old way (SET LOCAL fence.token /
#      fence.holder); the old build refuses what it refused (stale,
#      token-less, session-level).
#   2. the window: the new fence.so and scripts replace V's in the tree
#      (a package upgrade) and the server restarts, while the database
#      still has fence.sql 4 and extension V.  The C guard is the new
#      build's, which admits only a token fence.use_token() bound to the
#      writing transaction -- and fence.sql 4 has no use_token.  So every
#      write to a strict 'c' table is refused: SET LOCAL fence.token (the
#      old way, current token or stale) 23Q02 reason=unbound, no token
#      23Q02 reason=missing, fence.use_token() 42883 (no such function);
#      a permissive 'c' table admits a token-less write keeping its stamps
#      (as always).  What is still version 4's PL/pgSQL -- the 'plpgsql'
#      table's generated guard and fence.advance() -- still works the old
#      way (admits SET LOCAL, refuses stale and token-less).  The
#      functions the new fence.so lacks (c_advance 1.1-1.3, c_stamp 1.2,
#      c_send 1.3) fail 42883.
#   3. the new fence.sql and ALTER EXTENSION fence UPDATE: from 1.0 and
#      1.2 in the order the update scripts ask (fence.sql first; use_token
#      writers admitted in between), from 1.1 the other way round (the
#      window's refusals last until the new fence.sql).  From 1.3 the new fence.sql
#      goes in before the package, while the old module runs: its C guard
#      admits use_token's token and still the old way (and c_send), while
#      the new version's PL/pgSQL guards and fence.advance refuse the old way at
#      once; after the package, every guard is the new version's.  Then:
#      extversion 1.4, exactly the functions of a fresh 1.4 install
#      (compared with one: symbols, attributes, privileges), c_advance /
#      c_stamp / c_send / c_restoring gone (calling c_advance fails
#      42883), the schema as a fresh new version's, every
#      table with the triggers it had, listed by fence.protected with its
#      column, mode and implementation, the stamps and marks kept, and
#      enforcing: a stale token via use_token 23Q01, the current and a
#      higher one admitted, no token 23Q02 missing, a session-level token
#      (also one left with an earlier transaction's fence.xact) and SET
#      LOCAL 23Q02 unbound; at the marks (the one c_advance raised before
#      the upgrade too) the holder's token repeated only by that holder, a
#      SET LOCAL holder unbound, through fence.advance.
#   From 1.1 the server restarts only after the upgrade, and a session
#   opened before the swap shows what happens without one: PostgreSQL
#   never unloads a library, so that session still runs 1.1's module
#   (c_version 1); 1.4's catalog binds the guard and check to symbols
#   only 1.4's module has, so its writes fail (42883) instead of being
#   judged by 1.1's rule, until it ends; c_advance is gone there too.
# And once, without the extension: fence.sql 4 to the new version keeps tables protected
# 'plpgsql' by the real version 4 enforcing (their generated functions are
# written again from the new version's templates), the schema as a fresh new version's.
# Needs pg_config with PGXS (postgresql-server-dev-15), PostgreSQL's server
# binaries and FENCE_BUILD's lib/pgext/fence.so (make tests-build); starts
# its own servers (stopped and removed on any exit).  Run by
# scripts/run-suites from the repo root with FENCE_BUILD set.
set -u
cd "$(dirname "$0")/../.." || exit 1

B=${FENCE_BUILD:-build}
PGC=${PG_CONFIG:-pg_config}
VERSIONS=(1.0 1.1 1.2 1.3)
# The version under test (lib/pgext/fence.control's default_version).
CUR=$(sed -n "s/^default_version = '\\(.*\\)'$/\\1/p" lib/pgext/fence.control)
# The version of the fence.sql under test (what its fence.version() returns).
NEW=$(sed -n 's/^AS \$\$ SELECT \([0-9][0-9]*\) \$\$;$/\1/p' "$B/sql/postgres/fence.sql" 2>/dev/null)
H1=0123456789abcdef0123456789abcdef
H2=fedcba9876543210fedcba9876543210
pass=0; fail=0; finished=0
ok() { echo "ok - $*"; pass=$((pass + 1)); }
nok() { echo "not ok - $*"; fail=$((fail + 1)); }
finish() {
  finished=1
  echo "# test_pgext_upgrade: $pass passed, $fail failed"
  [ "$fail" -eq 0 ]; exit
}

. scripts/servers.sh
# Only this test's servers are stopped: the servers of an outer
# scripts/with-servers (run-suites) and what its tests spawned are not
# ours (fence_stop_all would stop FENCE_TEST_SPAWN_DIR's).
unset FENCE_TEST_SPAWN_DIR
# Every psql here names its server; nothing of the outer one applies.
unset PGHOST PGHOSTADDR PGPORT PGUSER PGDATABASE PGOPTIONS PGSERVICE PGSERVICEFILE
T=$(mktemp -d "${TMPDIR:-/tmp}/fence-pgext-upgrade.XXXXXX")
chmod 755 "$T"
cleanup() {
  if [ -n "${OLD_PID:-}" ]; then kill "$OLD_PID" 2>/dev/null; wait "$OLD_PID" 2>/dev/null; fi
  fence_stop_all
  rm -rf "$T"
  if [ "$finished" = 0 ]; then
    nok "the test ran to its end (it stopped early: see above)"
    echo "# test_pgext_upgrade: $pass passed, $fail failed"
    exit 1
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
now() { date +%s.%N; }
secs() { awk -v s="$1" -v e="$(now)" 'BEGIN{printf "%.1f", e-s}'; }
t0=$(now)

# FENCE_PGEXT_UPGRADE_PORTABLE=1 (scripts/pg-versions, on a PostgreSQL that
# cannot load the extension): only the part without the extension, fence.sql
# 4 to the new version, on the server of scripts/servers.sh's
# fence_pg_bindir (FENCE_PG_SERVER_BINDIR).
PORTABLE_ONLY=${FENCE_PGEXT_UPGRADE_PORTABLE:-0}
if [ "$PORTABLE_ONLY" = 1 ]; then
  echo "# test_pgext_upgrade: fence.sql 4 to version $NEW only (FENCE_PGEXT_UPGRADE_PORTABLE=1): no extension"
  VERSIONS=()
fi

# --- what it needs ----------------------------------------------------------
if [ "$PORTABLE_ONLY" != 1 ]; then
pgxs=$("$PGC" --pgxs 2>/dev/null)
if [ -z "$pgxs" ] || ! [ -f "$pgxs" ]; then
  nok "$PGC --pgxs names PGXS's makefile (install postgresql-server-dev-15: scripts/install-deps)"; finish
fi
fence_pg_bindir >/dev/null || { nok "PostgreSQL's server binaries are installed (scripts/install-deps)"; finish; }
[ -f "$B/lib/pgext/fence.so" ] || { nok "$B/lib/pgext/fence.so is built (make tests-build)"; finish; }
for v in "${VERSIONS[@]}"; do
  [ -f "tests/pgext/$v/Makefile" ] && [ -f "tests/pgext/$v/fence.control" ] || {
    nok "tests/pgext/$v holds the released extension $v (Makefile, fence.control)"; finish; }
  grep -qx "default_version = '$v'" "tests/pgext/$v/fence.control" || {
    nok "tests/pgext/$v/fence.control is version $v's"; finish; }
done
fi # PORTABLE_ONLY
grep -q '^-- fence.sql -- .*version 4\.$' tests/pg/fence_v4.sql || {
  nok "tests/pg/fence_v4.sql is fence.sql version 4"; finish; }

[ -n "$NEW" ] && [ "$NEW" -ge 5 ] || { nok "$B/sql/postgres/fence.sql says its version (fence.version(), 5 or later)"; finish; }
# --- the old builds, in copies, all at once -----------------------------------
# The outer make's flags and variables (MAKEFLAGS) are not theirs.
declare -A build_pid
for v in "${VERSIONS[@]}"; do
  mkdir -p "$T/old/$v" && cp -p "tests/pgext/$v"/* "$T/old/$v/" || { nok "copy tests/pgext/$v"; finish; }
  env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u CFLAGS make -s --no-print-directory -C "$T/old/$v" \
    PG_CONFIG="$PGC" > "$T/old/$v.log" 2>&1 &
  build_pid[$v]=$!
done
for v in "${VERSIONS[@]}"; do
  if wait "${build_pid[$v]}" && [ -f "$T/old/$v/fence.so" ]; then
    ok "the released extension $v builds (PGXS, -Werror) from tests/pgext/$v"
  else
    nok "the released extension $v builds from tests/pgext/$v"; sed 's/^/# /' "$T/old/$v.log"; finish
  fi
done
echo "# old builds: $(secs "$t0") s"
# The new one: this build's fence.so, the working tree's scripts.
if [ "$PORTABLE_ONLY" != 1 ]; then
mkdir -p "$T/new" && cp "$B/lib/pgext/fence.so" lib/pgext/fence.control lib/pgext/fence--*.sql "$T/new/" || {
  nok "copy the new build"; finish; }
fi

# --- SQL helpers --------------------------------------------------------------
PSQL='' PORT=''
# run_sql DB SQL: SQL (psql input, meta-commands allowed) in database DB,
# stopping at the first error; stdout in T/out, stderr in T/err.
run_sql() {
  printf '%s\n' "$2" | "$PSQL" -X -q -At -v ON_ERROR_STOP=1 -v VERBOSITY=verbose \
    -h 127.0.0.1 -p "$PORT" -U postgres -d "$1" -f - > "$T/out" 2> "$T/err"
}
first_error() { grep -m1 'ERROR:' "$T/err" | sed 's/^psql:<stdin>:[0-9]*: //'; }
# expect_ok WHAT DB SQL [OUTPUT]: it runs, and prints exactly OUTPUT.
expect_ok() {
  local what=$1 db=$2 sql=$3
  if ! run_sql "$db" "$sql"; then nok "$what: $(first_error)"; return 1; fi
  if [ $# -ge 4 ] && [ "$(cat "$T/out")" != "$4" ]; then
    nok "$what: printed '$(paste -sd' ' "$T/out")', not '$(printf '%s' "$4" | paste -sd' ')'"; return 1
  fi
  ok "$what"
}
# expect_err WHAT DB SQLSTATE DETAIL SQL: refused with SQLSTATE and a
# DETAIL line containing DETAIL ('' for none asked).
expect_err() {
  local what=$1 db=$2 code=$3 detail=$4 sql=$5
  if run_sql "$db" "$sql"; then nok "$what: admitted, not refused $code"; return 1; fi
  if ! grep -q "ERROR:  $code:" "$T/err"; then nok "$what: not $code but: $(first_error)"; return 1; fi
  if [ -n "$detail" ] && ! grep '^DETAIL:' "$T/err" | grep -qF -- "$detail"; then
    nok "$what: $code without DETAIL '$detail': $(grep -m1 '^DETAIL:' "$T/err")"; return 1
  fi
  ok "$what: $code${detail:+ $detail}"
}
# expect_err_msg WHAT DB SQLSTATE MESSAGE SQL: refused with SQLSTATE and an
# ERROR line containing MESSAGE.
expect_err_msg() {
  local what=$1 db=$2 code=$3 msg=$4 sql=$5
  if run_sql "$db" "$sql"; then nok "$what: admitted, not refused $code"; return 1; fi
  if ! grep "ERROR:  $code:" "$T/err" | grep -qF -- "$msg"; then
    nok "$what: not $code '$msg' but: $(first_error)"; return 1
  fi
  ok "$what: $code $msg"
}
# The two ways a call of fence.c_advance fails once 1.4 is in place: the
# catalog of 1.1-1.3 still declares it, but the new fence.so has no such
# symbol; 1.4's catalog has no such function.
NO_SYMBOL='could not find function "fence_c_advance" in file'
NO_FUNCTION='function fence.c_advance(unknown, integer) does not exist'
val() { run_sql "$1" "$2" && cat "$T/out"; }
# expect_plan WHAT DB TABLE N: EXPLAIN VERBOSE of an UPDATE of TABLE
# names fence.c_stamp N times (1.2's plan stamp: 1; none: 0).
expect_plan() {
  local n
  if ! run_sql "$2" "EXPLAIN (VERBOSE, COSTS OFF) UPDATE $3 SET v = v WHERE id = 1;"; then
    nok "$1: $(first_error)"; return 1
  fi
  n=$(grep -c 'fence\.c_stamp(' "$T/out")
  if [ "$n" = "$4" ]; then ok "$1"; else nok "$1: fence.c_stamp $n times in:"; sed 's/^/# /' "$T/out"; fi
}
# A session kept open across the upgrade (a pooler's server connection):
# old_open DB starts it, old_sql SQL runs SQL there (its output and errors
# in T/old.out), old_close ends it.
OLD_PID=
old_open() {
  coproc OLDS { exec "$PSQL" -X -q -At -v VERBOSITY=verbose -h 127.0.0.1 -p "$PORT" -U postgres -d "$1" 2>&1; }
  OLD_PID=$OLDS_PID
}
old_sql() {
  local line
  : > "$T/old.out"
  [ -n "$OLD_PID" ] || return 1
  printf '%s\nSELECT %s;\n' "$1" "'__end__'" >&"${OLDS[1]}" || return 1
  while IFS= read -r -t 30 line <&"${OLDS[0]}"; do
    [ "$line" = __end__ ] && return 0
    echo "$line" >> "$T/old.out"
  done
  return 1
}
old_close() {
  if [ -n "$OLD_PID" ]; then kill "$OLD_PID" 2>/dev/null; wait "$OLD_PID" 2>/dev/null; fi
  OLD_PID=
}
# old_expect WHAT SQL OUTPUT: SQL in the kept session prints exactly
# OUTPUT: its result lines that start with a digit, and each error as
# "ERROR:  SQLSTATE".
old_expect() {
  local got
  if ! old_sql "$2"; then nok "$1: the kept session did not answer"; return 1; fi
  got=$(sed -n -e 's/^\(ERROR:  [0-9A-Z]\{5\}\):.*/\1/p' -e '/^[0-9]/p' "$T/old.out")
  if [ "$got" = "$3" ]; then ok "$1"; else
    nok "$1: printed '$(paste -sd' ' "$T/old.out")'"; return 1
  fi
}

# Writers.  TABLE's row ID, its stamp printed (RETURNING).
upd() { echo "UPDATE $1 SET v = v || '+' WHERE id = $2 RETURNING $3;"; }
w_old() { printf 'BEGIN;\nSET LOCAL fence.token = %s;\n%s\nCOMMIT;\n' "$1" "$2"; }
w_use() { printf 'BEGIN;\nSELECT fence.use_token(%s) AS _t \\gset\n%s\nCOMMIT;\n' "$1" "$2"; }
w_none() { printf '%s\n' "$1"; }
w_session() { printf 'SET fence.token = %s;\n%s\n' "$1" "$2"; }
# A value left at session level by an earlier transaction, with that
# transaction's id in fence.xact (a pooled connection's previous client).
w_leftover() {
  printf "BEGIN;\nSELECT set_config('fence.token', '%s', false), set_config('fence.xact', pg_current_xact_id()::text, false) \\\\gset\nCOMMIT;\n%s\n" "$1" "$2"
}

# The fence schema as a snapshot to compare an upgraded database with a
# fresh install: functions (definition, privileges; not the generated
# per-table ones), relations, columns, constraints, triggers on fence's
# tables, the event trigger, the schema's privileges.
SNAPSHOT="SELECT x FROM (
  SELECT 'function ' || p.oid::regprocedure || ' ' || md5(pg_get_functiondef(p.oid)) || ' ' || COALESCE(p.proacl::text, '-')
    FROM pg_proc p WHERE p.pronamespace = 'fence'::regnamespace AND p.proname !~ '^(guard|check)_[0-9]+(_[0-9]+)?\$'
  UNION ALL SELECT format('relation %s %s %s', c.oid::regclass, c.relkind, COALESCE(c.relacl::text, '-'))
    FROM pg_class c WHERE c.relnamespace = 'fence'::regnamespace
  UNION ALL SELECT 'column ' || a.attrelid::regclass || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                   || ' ' || a.attnotnull || ' ' || COALESCE(pg_get_expr(d.adbin, d.adrelid), '-')
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE c.relnamespace = 'fence'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL SELECT 'constraint ' || conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid)
    FROM pg_constraint WHERE connamespace = 'fence'::regnamespace
  UNION ALL SELECT format('trigger %s %s', pg_get_triggerdef(t.oid), t.tgenabled)
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    WHERE c.relnamespace = 'fence'::regnamespace AND NOT t.tgisinternal
  UNION ALL SELECT format('event trigger %s %s %s %s %s', evtname, evtevent, evtfoid::regproc, evtenabled,
                          COALESCE(evttags::text, '-')) FROM pg_event_trigger
  UNION ALL SELECT 'schema fence ' || COALESCE(nspacl::text, '-') FROM pg_namespace WHERE nspname = 'fence'
  UNION ALL SELECT 'version ' || version FROM fence.meta
) s(x) ORDER BY x COLLATE \"C\""
# The functions of extension fence: signature, result, C symbol, library,
# volatility, parallel safety, strictness, privileges.
EXT_FUNCS="SELECT format('%s %s %s %s volatile=%s parallel=%s strict=%s definer=%s cost=%s %s', p.oid::regprocedure,
           p.prorettype::regtype, p.prosrc, p.probin, p.provolatile, p.proparallel, p.proisstrict, p.prosecdef,
           p.procost, COALESCE(p.proacl::text, '-'))
  FROM pg_depend d JOIN pg_proc p ON p.oid = d.objid
  WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' AND d.classid = 'pg_proc'::regclass
    AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'fence')
  ORDER BY 1"
EXT_MEMBERS="SELECT string_agg(pg_describe_object(d.classid, d.objid, d.objsubid), ', '
                  ORDER BY pg_describe_object(d.classid, d.objid, d.objsubid))
  FROM pg_depend d WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
    AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'fence')"
# The user tables' triggers: name, function, enabled, arguments.
TRIGGERS="SELECT format('%s %s %s %s %s', t.tgrelid::regclass, t.tgname, t.tgfoid::regprocedure, t.tgenabled,
                  encode(t.tgargs, 'escape'))
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
  WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal ORDER BY 1"
PROTECTED="SELECT tbl, col, mode, implementation, check_needed, check_present FROM fence.protected ORDER BY tbl::text"
# The stamps of every user table, \"table id stamp\" a line.
stamps_sql() {
  local t sql=
  for t in "$@"; do
    sql+="${sql:+ UNION ALL }SELECT '${t%%:*}', id, ${t#*:}::bigint FROM ${t%%:*}"
  done
  echo "SELECT * FROM ($sql) s ORDER BY 1, 2"
}
# Whether every generated guard of fence.generated binds its token to the
# transaction (the new version's template), and how many there are.
GEN="SELECT count(*) || ' ' || COALESCE(bool_and(p.prosrc LIKE '%fence.xact%'), false)
  FROM fence.generated g JOIN pg_proc p ON p.proname = g.fn AND p.pronamespace = 'fence'::regnamespace"

# compare WHAT DB1 DB2 SQL: SQL prints the same in both databases.
compare() {
  local what=$1 a b
  a=$(val "$2" "$4") || { nok "$what: $(first_error)"; return 1; }
  b=$(val "$3" "$4") || { nok "$what: $(first_error)"; return 1; }
  if [ "$a" = "$b" ]; then ok "$what"; else
    nok "$what:"; diff <(echo "$a") <(echo "$b") | sed 's/^/# /'; return 1
  fi
}

# make_tables LABEL DB NAME:COL:MODE:IMPL...: each table (id, v) protected with
# COL (an integer column of its own when not fence_token), MODE and IMPL
# (version 4's four-argument protect()); the first gets a BEFORE trigger
# that fires after the guard (so the AFTER checks).  Rows 1 and 2 written
# with token 5, then row 1 with token 7, the old way.
make_tables() {
  local label=$1 db=$2 spec name col mode impl sql first=1; shift 2
  sql="CREATE FUNCTION later() RETURNS trigger LANGUAGE plpgsql AS \$\$BEGIN RETURN NEW; END\$\$;"
  for spec in "$@"; do
    IFS=: read -r name col mode impl <<< "$spec"
    sql+="
CREATE TABLE $name (id int PRIMARY KEY, v text NOT NULL$([ "$col" = fence_token ] || echo ", $col integer"));"
    [ $first = 1 ] && sql+="
CREATE TRIGGER zzz_later BEFORE INSERT OR UPDATE ON $name FOR EACH ROW EXECUTE FUNCTION later();"
    first=0
    sql+="
SELECT fence.protect('$name', '$col', $([ "$mode" = permissive ] && echo true || echo false), '$impl') \\gset
$(w_old 5 "INSERT INTO $name (id, v) VALUES (1, 'a'), (2, 'b');")
$(w_old 7 "UPDATE $name SET v = 'a7' WHERE id = 1;")"
  done
  expect_ok "$label: fence.sql 4 protects $(printf '%s ' "$@")and writes them the old way (SET LOCAL fence.token)" "$db" "$sql"
}

# enforcing LABEL DB NAME:COL:MODE:IMPL...: after the upgrade, each table
# (row 1 stamped 7, row 2 5) refuses and admits what the new version does.
# Leaves row 1 stamped 7 and row 2 stamped 9 (strict; permissive: the
# same).
enforcing() {
  local label=$1 db=$2 spec name col mode impl; shift 2
  for spec in "$@"; do
    IFS=: read -r name col mode impl <<< "$spec"
    local p="$label: $name ($impl, $mode, $col)"
    expect_err "$p: a stale token via use_token" "$db" 23Q01 "offered=6 highest=7 kind=table object=public.$name reason=older" \
      "$(w_use 6 "$(upd "$name" 1 "$col")")"
    expect_ok "$p: the current token via use_token" "$db" "$(w_use 7 "$(upd "$name" 1 "$col")")" 7
    expect_ok "$p: a higher token via use_token" "$db" "$(w_use 9 "$(upd "$name" 2 "$col")")" 9
    if [ "$mode" = strict ]; then
      expect_err "$p: no token" "$db" 23Q02 "reason=missing" "$(w_none "$(upd "$name" 1 "$col")")"
    else
      expect_ok "$p: no token (permissive: admitted, the stamp kept)" "$db" "$(w_none "$(upd "$name" 1 "$col")")" 7
    fi
    expect_err "$p: a session-level token (SET fence.token)" "$db" 23Q02 "reason=unbound setting=fence.token" \
      "$(w_session 9 "$(upd "$name" 2 "$col")")"
    expect_err "$p: a session-level token with an earlier transaction's fence.xact" "$db" 23Q02 \
      "reason=unbound setting=fence.token" "$(w_leftover 9 "$(upd "$name" 2 "$col")")"
    expect_err "$p: the old way, SET LOCAL fence.token" "$db" 23Q02 "reason=unbound setting=fence.token" \
      "$(w_old 9 "$(upd "$name" 2 "$col")")"
    expect_err "$p: a stale DELETE via use_token" "$db" 23Q01 "reason=older" \
      "$(w_use 8 "DELETE FROM $name WHERE id = 2 RETURNING id;")"
    expect_ok "$p: an INSERT via use_token, stamped" "$db" \
      "$(w_use 9 "INSERT INTO $name (id, v) VALUES (3, 'c') RETURNING $col; DELETE FROM $name WHERE id = 3 RETURNING $col;")" \
      "9
9"
  done
}

# marks LABEL DB FN...: the mark of resource 'res' (7, holder H1) through
# each FN (fence.advance), the new version's rules.
marks() {
  local label=$1 db=$2 fn; shift 2
  for fn in "$@"; do
    expect_ok "$label: $fn: the holder repeats its token (use_token)" "$db" \
      "BEGIN; SELECT fence.use_token(7, '$H1') AS _t \\gset
SELECT $fn('res', 7); COMMIT;" 7
    expect_err "$label: $fn: another holder repeating the token" "$db" 23Q01 "reason=repeat" \
      "BEGIN; SELECT fence.use_token(7, '$H2') AS _t \\gset
SELECT $fn('res', 7); COMMIT;"
    expect_err "$label: $fn: the old way, SET LOCAL fence.holder" "$db" 23Q02 "reason=unbound setting=fence.holder" \
      "BEGIN; SET LOCAL fence.holder = '$H1'; SELECT $fn('res', 7); COMMIT;"
    expect_err "$label: $fn: a lower token" "$db" 23Q01 "offered=6 highest=7 kind=resource object=res reason=older" \
      "BEGIN; SELECT fence.use_token(6, '$H1') AS _t \\gset
SELECT $fn('res', 6); COMMIT;"
  done
}

start_pg() { # VERSION_DIR: a server offering that folder's extension
  FENCE_PGEXT_DIR=$1 FENCE_PGEXT_SQL_DIR=$1 fence_start_postgres
  PSQL=$FENCE_PG_BINDIR/psql PORT=$FENCE_PG_PORT
}
stop_pg() {
  fence_as_pg "$FENCE_PG_BINDIR/pg_ctl" -D "$FENCE_PG_DIR/data" -m fast -w stop >/dev/null 2>&1
  rm -rf "$FENCE_PG_DIR"
  # shellcheck disable=SC2034  # scripts/servers.sh's list, for fence_stop_all
  FENCE__PG_DIRS=()
}
restart_pg() {
  fence_as_pg "$FENCE_PG_BINDIR/pg_ctl" -D "$FENCE_PG_DIR/data" -l "$FENCE_PG_DIR/server.log" -w -t 60 \
    restart >/dev/null 2>&1
}

# --- fence.sql 4 to the new version, no extension (once) -------------------------------------
portable() {
  local db=portable tabs=(p_rows:fence_token:strict:plpgsql p_lock:lock_version:strict:plpgsql
                          p_perm:fence_token:permissive:plpgsql)
  expect_ok "$db: CREATE DATABASE, fence.sql version 4" postgres \
    "CREATE DATABASE $db; CREATE DATABASE fresh_$db; \\c $db
\\i tests/pg/fence_v4.sql
SELECT fence.version(), (SELECT count(*) FROM pg_extension WHERE extname = 'fence');" "4|0"
  make_tables "$db" "$db" "${tabs[@]}"
  expect_ok "$db: a mark raised the old way (SET LOCAL fence.holder)" "$db" \
    "BEGIN; SET LOCAL fence.holder = '$H1'; SELECT fence.advance('res', 7); COMMIT;" 7
  val "$db" "$TRIGGERS" > "$T/p.triggers.before"
  expect_ok "$db: version 4's generated guards do not bind the token" "$db" "$GEN" "3 false"
  expect_ok "$db: fence.sql version $NEW over version 4" "$db" "\\i $B/sql/postgres/fence.sql
SELECT fence.version();" "$NEW"
  expect_ok "$db: every generated guard written again from version $NEW's template" "$db" "$GEN" "3 true"
  expect_ok "$db: fence.protected lists every table, column, mode, implementation" "$db" "$PROTECTED" \
"p_lock|lock_version|strict|plpgsql|f|t
p_perm|fence_token|permissive|plpgsql|f|t
p_rows|fence_token|strict|plpgsql|t|t"
  val "$db" "$TRIGGERS" > "$T/p.triggers.after"
  if cmp -s "$T/p.triggers.before" "$T/p.triggers.after" && [ -s "$T/p.triggers.after" ]; then
    ok "$db: every table's triggers are as before the install"
  else
    nok "$db: the tables' triggers changed:"; diff "$T/p.triggers.before" "$T/p.triggers.after" | sed 's/^/# /'
  fi
  expect_ok "$db: the stamps are kept" "$db" "$(stamps_sql p_lock:lock_version p_perm:fence_token p_rows:fence_token)" \
"p_lock|1|7
p_lock|2|5
p_perm|1|7
p_perm|2|5
p_rows|1|7
p_rows|2|5"
  expect_ok "$db: the mark and its holder are kept" "$db" "SELECT fence.mark('res'), fence.mark_holder('res');" "7|$H1"
  enforcing "$db after fence.sql $NEW" "$db" "${tabs[@]}"
  marks "$db after fence.sql $NEW" "$db" fence.advance
  expect_ok "fresh_$db: fence.sql version $NEW" "fresh_$db" "\\i $B/sql/postgres/fence.sql
SELECT fence.version();" "$NEW"
  compare "$db: the schema upgraded from version 4 is a fresh version $NEW's" "$db" "fresh_$db" "$SNAPSHOT"
}

# --- each released extension ---------------------------------------------------
# upgrade_from VERSION ORDER: after the new package (fence.so and scripts)
# and a restart, ORDER sql-first runs the new fence.sql and then ALTER EXTENSION
# fence UPDATE (as the update scripts say), ext-first the other way round;
# sql-before-swap runs the new fence.sql before the package, with the old module
# running, and ALTER EXTENSION last.
upgrade_from() {
  local v=$1 order=$2 db=ext tv0 s name col mode impl tabs=(c_rows:fence_token:strict:c c_lock:lock_version:strict:c
                                       c_perm:fence_token:permissive:c p_rows:fence_token:strict:plpgsql)
  tv0=$(now)
  start_pg "$T/old/$v"
  echo "# extension $v: PostgreSQL on 127.0.0.1:$PORT, $FENCE_PG_DIR"
  [ "$v" = 1.0 ] && portable
  # 1. the old world
  expect_ok "$v: fence.sql version 4, CREATE EXTENSION fence VERSION '$v'" postgres \
    "CREATE DATABASE $db; CREATE DATABASE fresh; \\c $db
\\i tests/pg/fence_v4.sql
CREATE EXTENSION fence VERSION '$v';
SELECT fence.version(), extversion, fence.c_version() FROM pg_extension WHERE extname = 'fence';" "4|$v|1"
  case $v in 1.2|1.3)
    # As documented for 1.2 and 1.3: the module in every session, so every
    # UPDATE of a table whose only BEFORE UPDATE trigger is the C guard has
    # the guard's rule in its plan (fence.c_stamp), the trigger skipped.
    expect_ok "$v: ALTER DATABASE $db SET session_preload_libraries = 'fence' (the plan stamp, 1.2/1.3)" "$db" \
      "ALTER DATABASE $db SET session_preload_libraries = 'fence';" ;;
  esac
  make_tables "$v" "$db" "${tabs[@]}"
  case $v in 1.2|1.3)
    expect_plan "$v before: an UPDATE of c_lock has fence.c_stamp in its plan (the old build's planner hook)" "$db" c_lock 1 ;;
  esac
  expect_ok "$v: a mark raised the old way (SET LOCAL fence.holder), fence.advance" "$db" \
    "BEGIN; SET LOCAL fence.holder = '$H1'; SELECT fence.advance('res', 7); COMMIT;" 7
  if [ "$v" != 1.0 ]; then
    expect_ok "$v: a mark raised the old way, fence.c_advance" "$db" \
      "BEGIN; SET LOCAL fence.holder = '$H1'; SELECT fence.c_advance('res-c', 8); COMMIT;" 8
  fi
  for s in "${tabs[@]}"; do
    IFS=: read -r name col mode impl <<< "$s"
    expect_err "$v before: $name: the old build refuses a stale token" "$db" 23Q01 "reason=older" \
      "$(w_old 6 "$(upd "$name" 1 "$col")")"
    [ "$mode" = strict ] && expect_err "$v before: $name: the old build refuses no token" "$db" 23Q02 "reason=missing" \
      "$(w_none "$(upd "$name" 1 "$col")")"
    [ "$impl" = c ] && expect_err "$v before: $name: the old build's C guard refuses a session-level token" "$db" \
      23Q02 "reason=session" "$(w_session 9 "$(upd "$name" 1 "$col")")"
  done
  val "$db" "$TRIGGERS" > "$T/$v.triggers.before"
  expect_ok "$v before: fence.protected" "$db" "$PROTECTED" \
"c_lock|lock_version|strict|c|f|t
c_perm|fence_token|permissive|c|f|t
c_rows|fence_token|strict|c|t|t
p_rows|fence_token|strict|plpgsql|f|t"

  local v5="\\i $B/sql/postgres/fence.sql
SELECT fence.version();"
  local alter="ALTER EXTENSION fence UPDATE;
SELECT extversion, fence.c_version() FROM pg_extension WHERE extname = 'fence';"
  local dirs kept=0 fv=4 p
  # 2a. sql-before-swap: the new fence.sql while the old module still runs.  Its
  #     C guard admits use_token's token (a LOCAL setting) and still the
  #     old way; the new version's PL/pgSQL refuses the old way at once.
  if [ "$order" = sql-before-swap ]; then
    fv=$NEW
    expect_ok "$v: fence.sql version $NEW over version 4, the old module still loaded" "$db" "$v5" "$NEW"
    for s in "${tabs[@]}"; do
      IFS=: read -r name col mode impl <<< "$s"
      p="$v old module, fence.sql $NEW: $name ($impl, $mode)"
      expect_ok "$p: use_token admitted" "$db" "$(w_use 7 "$(upd "$name" 1 "$col")")" 7
      expect_err "$p: a stale token via use_token refused" "$db" 23Q01 "offered=6 highest=7" \
        "$(w_use 6 "$(upd "$name" 1 "$col")")"
      if [ "$impl" = c ]; then
        expect_ok "$p: the old way still admitted by the old module" "$db" "$(w_old 7 "$(upd "$name" 1 "$col")")" 7
        expect_err "$p: a session-level token refused by the old module" "$db" 23Q02 "reason=session" \
          "$(w_session 9 "$(upd "$name" 1 "$col")")"
      else
        expect_err "$p: the old way refused by version $NEW's guard" "$db" 23Q02 "reason=unbound setting=fence.token" \
          "$(w_old 7 "$(upd "$name" 1 "$col")")"
      fi
      if [ "$mode" = strict ]; then
        expect_err "$p: no token refused" "$db" 23Q02 "reason=missing" "$(w_none "$(upd "$name" 1 "$col")")"
      fi
    done
    expect_err "$v old module, fence.sql $NEW: fence.advance (version $NEW's) refuses the old way" "$db" 23Q02 \
      "reason=unbound setting=fence.holder" "BEGIN; SET LOCAL fence.holder = '$H1'; SELECT fence.advance('res', 7); COMMIT;"
    expect_ok "$v old module, fence.sql $NEW: fence.c_advance (the old module's) still admits the old way" "$db" \
      "BEGIN; SET LOCAL fence.holder = '$H1'; SELECT fence.c_advance('res-c', 8); COMMIT;" 8
    [ "$v" = 1.3 ] && expect_ok "$v old module, fence.sql $NEW: fence.c_send (libfence_pg 1.3's) still works" "$db" \
      "BEGIN; SELECT fence.c_send('7', ''); $(upd c_rows 1 fence_token) COMMIT;" "t
7"
  fi

  # 2. the window: the new build on disk, the server restarted, the
  #    database still extension $v (and fence.sql 4, but for
  #    sql-before-swap).  For 1.1, a session that loaded the old module
  #    stays open, and the server restarts only after the upgrade (below).
  if [ "$v" = 1.1 ]; then
    kept=1
    old_open "$db"
    old_expect "$v: a session kept open loads the old module" "SELECT fence.c_version();" 1
  fi
  mapfile -t dirs < <(fence_pg_tree_dirs "$FENCE_PG_DIR/tree")
  if [ ${#dirs[@]} -eq 2 ] && fence_pg_tree_offer "${dirs[0]}" "${dirs[1]}" "$T/new" && { [ $kept = 1 ] || restart_pg; }; then
    ok "$v: the new fence.so and scripts replace $v's in the server's tree$([ $kept = 1 ] && echo ", no restart yet" || echo ", the server restarts")"
  else
    nok "$v: swap in the new build and restart"; sed 's/^/# /' "$FENCE_PG_DIR/server.log" | tail -n 20; stop_pg; return
  fi
  expect_ok "$v window: extension $v in the catalog, the new module loaded (c_version 2)" "$db" \
    "SELECT fence.version(), extversion, fence.c_version() FROM pg_extension WHERE extname = 'fence';" "$fv|$v|2"
  for s in "${tabs[@]}"; do
    IFS=: read -r name col mode impl <<< "$s"
    p="$v window, fence.sql $fv: $name ($impl, $mode)"
    if [ "$impl" = c ] || [ "$fv" = "$NEW" ]; then
      expect_err "$p: the old way with the current token is refused" "$db" 23Q02 "reason=unbound setting=fence.token" \
        "$(w_old 7 "$(upd "$name" 1 "$col")")"
      expect_err "$p: the old way with a stale token is refused" "$db" 23Q02 "reason=unbound setting=fence.token" \
        "$(w_old 6 "$(upd "$name" 1 "$col")")"
    fi
    if [ $fv = 4 ] && [ "$impl" = c ]; then
      expect_err "$p: there is no fence.use_token yet (fence.sql 4)" "$db" 42883 "" \
        "$(w_use 7 "$(upd "$name" 1 "$col")")"
    elif [ $fv = 4 ]; then
      expect_ok "$p: version 4's guard still admits the old way" "$db" "$(w_old 7 "$(upd "$name" 1 "$col")")" 7
      expect_err "$p: version 4's guard refuses a stale token" "$db" 23Q01 "offered=6 highest=7" \
        "$(w_old 6 "$(upd "$name" 1 "$col")")"
    else
      expect_ok "$p: use_token admitted" "$db" "$(w_use 7 "$(upd "$name" 1 "$col")")" 7
      expect_err "$p: a stale token via use_token refused" "$db" 23Q01 "offered=6 highest=7" \
        "$(w_use 6 "$(upd "$name" 1 "$col")")"
    fi
    if [ "$mode" = strict ]; then
      expect_err "$p: no token is refused" "$db" 23Q02 "reason=missing" "$(w_none "$(upd "$name" 1 "$col")")"
    else
      expect_ok "$p: no token admitted (permissive), the stamp kept" "$db" "$(w_none "$(upd "$name" 1 "$col")")" 7
    fi
  done
  if [ $fv = 4 ]; then
    expect_ok "$v window: fence.advance (still version 4's) admits the old way" "$db" \
      "BEGIN; SET LOCAL fence.holder = '$H1'; SELECT fence.advance('res', 7); COMMIT;" 7
  fi
  if [ "$v" != 1.0 ]; then
    expect_err_msg "$v window: fence.c_advance ($v's), which the new module lacks, fails" "$db" 42883 \
      "$NO_SYMBOL" "SELECT fence.c_advance('res-c', 8);"
    expect_ok "$v window: the mark c_advance raised is still there" "$db" "SELECT fence.mark('res-c');" 8
  fi
  case $v in 1.2|1.3)
    expect_err "$v window: fence.c_stamp, which the new module lacks, fails" "$db" 42883 "" \
      "SELECT fence.c_stamp(1, 1, 'c_rows'::regclass, 1::smallint, false, 'O');" ;;
  esac
  [ "$v" = 1.3 ] && expect_err "$v window: fence.c_send (libfence_pg 1.3's), which the new module lacks, fails" "$db" \
    42883 "" "SELECT fence.c_send('7', '');"

  # 3. the new fence.sql and ALTER EXTENSION fence UPDATE, in ORDER.
  case $order in
  sql-first)
    expect_ok "$v: fence.sql version $NEW over version 4, extension $v" "$db" "$v5" "$NEW"
    expect_ok "$v after fence.sql $NEW, before ALTER EXTENSION: the C guard admits use_token" "$db" \
      "$(w_use 7 "$(upd c_rows 1 fence_token)")" 7
    expect_err "$v after fence.sql $NEW, before ALTER EXTENSION: the C guard refuses the old way" "$db" 23Q02 \
      "reason=unbound setting=fence.token" "$(w_old 7 "$(upd c_rows 1 fence_token)")"
    expect_ok "$v: ALTER EXTENSION fence UPDATE" "$db" "$alter" "$CUR|2" ;;
  ext-first)
    expect_ok "$v: ALTER EXTENSION fence UPDATE, fence.sql still version 4" "$db" "$alter" "$CUR|2"
    expect_err "$v after ALTER EXTENSION, before fence.sql $NEW: the C guard refuses the old way" "$db" 23Q02 \
      "reason=unbound setting=fence.token" "$(w_old 7 "$(upd c_rows 1 fence_token)")"
    expect_err "$v after ALTER EXTENSION, before fence.sql $NEW: no token is refused" "$db" 23Q02 \
      "reason=missing" "$(w_none "$(upd c_lock 1 lock_version)")"
    expect_err_msg "$v after ALTER EXTENSION, before fence.sql $NEW: fence.c_advance is gone" "$db" 42883 \
      "$NO_FUNCTION" "SELECT fence.c_advance('res', 7);"
    expect_ok "$v after ALTER EXTENSION, before fence.sql $NEW: fence.advance (version 4's) still admits the old way" \
      "$db" "BEGIN; SET LOCAL fence.holder = '$H1'; SELECT fence.advance('res', 7); COMMIT;" 7
    expect_ok "$v: fence.sql version $NEW over version 4, extension $CUR" "$db" "$v5" "$NEW" ;;
  sql-before-swap)
    expect_ok "$v: ALTER EXTENSION fence UPDATE" "$db" "$alter" "$CUR|2" ;;
  esac
  if [ $kept = 1 ]; then
    # The session that loaded the old module keeps it (PostgreSQL never
    # unloads a library; it finds "fence" loaded by name), but 1.4's
    # catalog binds the guard and check to the symbols fence_c_*_v2,
    # which no older module has: its writes are refused (42883), never
    # judged by 1.1's rule (which admitted SET LOCAL fence.token without
    # use_token).  1.4's catalog has no c_advance, so the old module's
    # cannot be called there either.  Restart, or recycle every session.
    old_expect "$v after, in the session kept open: the old module still runs (c_version 1)" \
      "SELECT fence.c_version();" 1
    old_expect "$v after, in the session kept open: the old way is refused there (no such symbol)" \
      "$(w_old 7 "$(upd c_lock 1 lock_version)")" "ERROR:  42883"
    old_expect "$v after, in the session kept open: use_token's token is refused there too" \
      "$(w_use 9 "$(upd c_lock 1 lock_version)")" "ERROR:  42883"
    old_expect "$v after, in the session kept open: fence.c_advance is gone there too" \
      "SELECT count(*) FROM pg_proc WHERE pronamespace = 'fence'::regnamespace AND proname = 'c_advance';" 0
    old_expect "$v after, in the session kept open: calling fence.c_advance fails there (no such function)" \
      "SELECT fence.c_advance('kept', 99);" "ERROR:  42883"
    old_close
    if restart_pg; then ok "$v: the server restarts"; else nok "$v: the server restarts"; stop_pg; return; fi
    expect_ok "$v after the restart: every session runs the new module" "$db" "SELECT fence.c_version();" 2
  fi
  expect_ok "$v after: c_advance, c_stamp, c_send and c_restoring are gone" "$db" \
    "SELECT count(*) FROM pg_proc WHERE pronamespace = 'fence'::regnamespace AND proname IN ('c_advance', 'c_stamp', 'c_send', 'c_restoring');" 0
  expect_err_msg "$v after: calling fence.c_advance fails (no such function)" "$db" 42883 \
    "$NO_FUNCTION" "SELECT fence.c_advance('res', 7);"
  expect_ok "$v after: the extension has c_check, c_guard, c_use_token, c_version" "$db" "$EXT_MEMBERS" \
    "function fence.c_check(), function fence.c_guard(), function fence.c_use_token(bigint,text), function fence.c_version()"
  expect_ok "fresh ($v's server): fence.sql $NEW, CREATE EXTENSION fence ($CUR)" fresh "\\i $B/sql/postgres/fence.sql
CREATE EXTENSION fence;
SELECT extversion FROM pg_extension WHERE extname = 'fence';" "$CUR"
  compare "$v after: the extension's functions are a fresh $CUR's (symbols, attributes, privileges)" "$db" fresh "$EXT_FUNCS"
  compare "$v after: the schema is a fresh version $NEW + $CUR's" "$db" fresh "$SNAPSHOT"
  val "$db" "$TRIGGERS" > "$T/$v.triggers.after"
  if cmp -s "$T/$v.triggers.before" "$T/$v.triggers.after" && [ -s "$T/$v.triggers.after" ]; then
    ok "$v after: every table keeps its triggers (names, functions, arguments, enabled)"
  else
    nok "$v after: the tables' triggers changed:"; diff "$T/$v.triggers.before" "$T/$v.triggers.after" | sed 's/^/# /'
  fi
  expect_ok "$v after: fence.protected lists every table with its implementation" "$db" "$PROTECTED" \
"c_lock|lock_version|strict|c|f|t
c_perm|fence_token|permissive|c|f|t
c_rows|fence_token|strict|c|t|t
p_rows|fence_token|strict|plpgsql|f|t"
  expect_ok "$v after: the 'plpgsql' table's guard written from version $NEW's template" "$db" "$GEN" "1 true"
  case $v in 1.2|1.3)
    expect_plan "$v after: no plan has fence.c_stamp (session_preload_libraries still loads fence, 1.4's)" "$db" c_lock 0 ;;
  esac
  expect_ok "$v after: the stamps are kept" "$db" \
    "$(stamps_sql c_lock:lock_version c_perm:fence_token c_rows:fence_token p_rows:fence_token)" \
"c_lock|1|7
c_lock|2|5
c_perm|1|7
c_perm|2|5
c_rows|1|7
c_rows|2|5
p_rows|1|7
p_rows|2|5"
  if [ "$v" = 1.0 ]; then
    expect_ok "$v after: the mark and its holder are kept" "$db" "SELECT fence.mark('res'), fence.mark_holder('res');" "7|$H1"
  else
    expect_ok "$v after: the marks and their holders are kept" "$db" \
      "SELECT fence.mark('res'), fence.mark_holder('res'), fence.mark('res-c'), fence.mark_holder('res-c');" "7|$H1|8|$H1"
  fi
  enforcing "$v after" "$db" "${tabs[@]}"
  marks "$v after" "$db" fence.advance
  stop_pg
  echo "# extension $v: $(secs "$tv0") s"
}

# The package (fence.so) first, then fence.sql, then ALTER EXTENSION from
# 1.0 and 1.2; ALTER EXTENSION before fence.sql from 1.1; fence.sql before
# the package from 1.3.
if [ "$PORTABLE_ONLY" = 1 ]; then
  FENCE_PGEXT_DIR='' fence_start_postgres
  PSQL=$FENCE_PG_BINDIR/psql PORT=$FENCE_PG_PORT
  echo "# PostgreSQL $("$PSQL" -X -At -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -c 'SHOW server_version') on 127.0.0.1:$PORT"
  portable
  stop_pg
  echo "# total: $(secs "$t0") s"
  finish
fi
upgrade_from 1.0 sql-first
upgrade_from 1.1 ext-first
upgrade_from 1.2 sql-first
upgrade_from 1.3 sql-before-swap
echo "# total: $(secs "$t0") s"
finish
