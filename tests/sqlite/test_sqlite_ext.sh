#!/usr/bin/env bash
# sqlite_ext.sh -- the loadable extension from the real `sqlite3` shell
# (Debian package sqlite3).  Needs FENCE_BUILD (the build dir) with
# fence_sqlite_ext.so in it.  Prints ok/not ok lines; exits non-zero on any
# failure.
set -uo pipefail
B=${FENCE_BUILD:-build}
EXT="$B/fence_sqlite_ext"
failures=0
ok()     { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; failures=$((failures + 1)); }

if ! command -v sqlite3 >/dev/null 2>&1; then
  not_ok "the sqlite3 shell is installed (apt-get install sqlite3)"
  exit 1
fi
if [ ! -f "$EXT.so" ]; then
  not_ok "$EXT.so exists (make $EXT.so)"
  exit 1
fi
EXT=$(cd "$(dirname "$EXT")" && pwd)/$(basename "$EXT")

. "$(dirname "$0")/ext_preload.sh" # $preload: a sanitizer build's runtime, for the host

dir=$(mktemp -d "${TMPDIR:-/tmp}/fence-sqlite-ext.XXXXXX")
trap 'rm -rf "$dir"' EXIT
db="$dir/t.db"

# run SQL [--load]: run the shell on $db, stdout+stderr together.
sq() {
  local load=$1; shift
  {
    [ "$load" = load ] && echo ".load $EXT"
    printf '%s\n' "$@"
  } | LD_PRELOAD="$preload" sqlite3 -bail "$db" 2>&1
}

expect() { # name, pattern, output
  if printf '%s' "$3" | grep -qE -- "$2"; then ok "$1"; else
    not_ok "$1"; printf '#   expected /%s/, got:\n' "$2"; printf '%s\n' "$3" | sed 's/^/#   /'
  fi
}
refute() { # name, pattern, output
  if printf '%s' "$3" | grep -qE -- "$2"; then
    not_ok "$1"; printf '#   did not expect /%s/, got:\n' "$2"; printf '%s\n' "$3" | sed 's/^/#   /'
  else ok "$1"; fi
}

out=$(sq noload "PRAGMA journal_mode=WAL;" \
  "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, lock_version INTEGER);" \
  "INSERT INTO t VALUES (1, 'initial', NULL), (2, 'two', 3);" \
  "CREATE TABLE s(id INTEGER PRIMARY KEY, v TEXT);" \
  "INSERT INTO s VALUES (1, 'initial');")
expect "create the test tables" '^wal$' "$out"

out=$(sq load "SELECT 'protect=' || fence_protect('s');" \
  "SELECT 'token=' || fence_set_token(42);" "SELECT 'read=' || fence_token();" \
  "UPDATE s SET v = 'by42' WHERE id = 1;" "SELECT v || ' ' || fence_token FROM s;")
expect ".load, fence_protect('s')" 'protect=1' "$out"
expect "fence_set_token(42) and fence_token()" 'token=42' "$out"
expect "fence_token() reads it back" 'read=42' "$out"
expect "fresh write admitted and stamped" 'by42 42' "$out"

out=$(sq load "SELECT fence_set_token(41);" "UPDATE s SET v = 'by41' WHERE id = 1;")
expect "stale write refused with the message" \
  'fence:stale table "s": token 41 is older than 42 \(write rejected\)' "$out"
out=$(sq load "SELECT fence_set_token(41);" "DELETE FROM s;")
expect "stale delete refused" 'fence:stale table "s"' "$out"
out=$(sq load "UPDATE s SET v = 'notoken' WHERE id = 1;")
expect "write without a token refused" 'fence:notoken table "s"' "$out"
out=$(sq load "SELECT fence_set_token('abc');")
expect "fence_set_token('abc') refused" 'fence:notoken fence_set_token' "$out"
# One token grammar everywhere (PostgreSQL's too): digits only, no sign,
# no space, no leading zero.  Each refusal also clears the token.
for bad in "'007'" "'+7'" "' 7'" "'07'"; do
  out=$(sq load ".bail off" "SELECT fence_set_token(7);" "SELECT fence_set_token($bad);" \
    "SELECT 'after=' || coalesce(fence_token(), 'none');")
  expect "fence_set_token($bad) refused" \
    'fence:notoken fence_set_token: the token is not a decimal integer.*leading zero' "$out"
  expect "fence_set_token($bad) clears the token" 'after=none' "$out"
done
out=$(sq load "SELECT 'text=' || fence_set_token('7');" "SELECT 'zero=' || coalesce(fence_set_token('0'), 'cleared');")
expect "fence_set_token('7') sets 7" 'text=7' "$out"
expect "fence_set_token('0') clears" 'zero=cleared' "$out"
out=$(sq load "SELECT fence_set_token(43);" "UPDATE s SET v = 'by43' WHERE id = 1;" \
  "SELECT v || ' ' || fence_token FROM s;")
expect "higher token admitted" 'by43 43' "$out"

out=$(sq load "SELECT fence_protect('t', 'lock_version');")
expect "fence_protect('t', 'lock_version') is refused: a version column is the application's" \
  "column \"lock_version\" of \"t\" is the application's.*fence_protect\('t'\).*fence_migrate_version_column\('t'\)" "$out"
out=$(sq load "SELECT 'protect=' || fence_protect('t');" \
  "SELECT fence_set_token(5);" "UPDATE t SET v = 'by5', lock_version = lock_version + 1;" \
  "SELECT group_concat(v || ':' || coalesce(lock_version, 'null') || ':' || fence_token, ',') FROM t;")
expect "fence_protect('t') stamps fence_token beside lock_version, which the writer bumps" \
  'by5:null:5,by5:4:5' "$out"
# A table fenced on its version column by an older fence: one call moves
# the stamps to fence_token (tests/sqlite/db_before_own_column.sql).
olddb="$dir/retrofit.db"
sqlite3 -bail "$olddb" < "$(dirname "$0")/db_before_own_column.sql" 2>&1
out=$(printf '%s\n' ".load $EXT" "SELECT fence_protect('posts');" | LD_PRELOAD="$preload" sqlite3 "$olddb" 2>&1)
expect "protecting an old retrofit again is refused, naming the migration" \
  "stamp its column \"lock_version\".*fence_migrate_version_column\('posts'\)" "$out"
out=$(printf '%s\n' ".load $EXT" "SELECT 'migrated=' || fence_migrate_version_column('posts');" \
  "SELECT group_concat(lock_version || ':' || fence_token, ',') FROM posts;" \
  "SELECT fence_set_token(29);" "UPDATE posts SET title = 'stale' WHERE id = 1;" \
  | LD_PRELOAD="$preload" sqlite3 "$olddb" 2>&1)
expect "fence_migrate_version_column('posts')" 'migrated=1' "$out"
expect "fence_token has exactly the old stamps, lock_version keeps its values" '30:30,34:34,0:0' "$out"
expect "and a stale write is refused as before" 'fence:stale table "posts": token 29 is older than 30' "$out"

out=$(sq noload "UPDATE s SET v = 'plain' WHERE id = 1;")
expect "a shell without .load cannot write the protected table" 'no such function: fence_token' "$out"
out=$(sq noload "DELETE FROM s;")
expect "nor delete from it" 'no such function: fence_token' "$out"
out=$(sq noload "SELECT v FROM s;")
expect "the row is still the one written with 43" '^by43$' "$out"

out=$(sq load "SELECT fence_set_token(44);" "SELECT fence_unprotect('s');")
refute "fence_unprotect('s')" 'Error|error' "$out"
out=$(sq noload "UPDATE s SET v = 'plain' WHERE id = 1;" "SELECT v FROM s;")
expect "after fence_unprotect a plain shell writes again" '^plain$' "$out"

out=$(sq load "CREATE TRIGGER sneaky AFTER UPDATE ON t BEGIN SELECT fence_set_token(999); END;" \
  "SELECT fence_set_token(6);" "UPDATE t SET v = 'x';")
expect "fence_set_token is refused inside a trigger (DIRECTONLY)" 'unsafe use of fence_set_token' "$out"
out=$(sq load "DROP TRIGGER sneaky;" "PRAGMA trusted_schema=OFF;" "SELECT fence_set_token(6);" \
  "UPDATE t SET v = 'trusted-off';" "SELECT count(*) FROM t WHERE v = 'trusted-off';")
expect "the triggers work under trusted_schema=OFF" '^6.2$' "$(printf '%s' "$out" | tr '\n' '.')"

out=$(sq load "SELECT fence_init();" "SELECT fence_set_token(7);" \
  "INSERT INTO fence_advance(resource) VALUES ('job');" \
  "SELECT fence_set_token(6);" "INSERT INTO fence_advance(resource) VALUES ('job');")
expect "per-resource advance: stale refused" 'fence:stale resource "job": token 6 is older than 7' "$out"

out=$(sq load "CREATE TABLE r(v TEXT, name TEXT UNIQUE);" "SELECT fence_protect('r');" \
  "SELECT fence_set_token(10);" "INSERT INTO r(v, name) VALUES ('by10', 'a');" \
  "SELECT fence_set_token(5);" "INSERT INTO r(v, name) VALUES ('by5', 'c');" \
  "SELECT fence_set_token(5);" \
  "INSERT OR REPLACE INTO r(rowid, v, name) VALUES (1, 'stale-replace', 'b');")
expect "stale INSERT OR REPLACE through an explicit rowid refused" \
  'fence:stale table "r": token 5 is older than 10' "$out"
out=$(sq load "SELECT fence_set_token(5);" "UPDATE OR REPLACE r SET rowid = 1 WHERE rowid = 2;")
expect "stale UPDATE OR REPLACE SET rowid refused" 'fence:stale table "r"' "$out"
out=$(sq noload "SELECT group_concat(rowid || ':' || v, ',') FROM r;")
expect "the token-10 row is still there" '^1:by10,2:by5$' "$out"

out=$(sq load "CREATE TEMP TABLE s(id INTEGER PRIMARY KEY, v TEXT);" "SELECT fence_protect('s');")
expect "fence_protect refuses a name a TEMP table shadows" 'a TEMP table named "s" shadows' "$out"

out=$(sq load ".load $EXT sqlite3_fencesqlite_init" "SELECT fence_set_token(8);" "SELECT fence_token();")
expect "the short entry point sqlite3_fencesqlite_init works" '^8.8$' "$(printf '%s' "$out" | tr '\n' '.')"

# Holder ids (issue 8): an equal token is admitted on a resource only from
# the holder recorded with it.
H1=0123456789abcdef0123456789abcdef
H2=fedcba9876543210fedcba9876543210
out=$(sq load "SELECT 'token=' || fence_set_token(50, '$H1');" "SELECT 'holder=' || fence_holder();" \
  "BEGIN;" "INSERT INTO fence_advance(resource) VALUES ('h');" "INSERT INTO fence_advance(resource) VALUES ('h');" "COMMIT;" \
  "SELECT 'mark=' || high_water || ':' || holder FROM fence_resource WHERE name = 'h';")
expect "fence_set_token(50, holder) and fence_holder()" "token=50.holder=$H1" "$(printf '%s' "$out" | tr '\n' '.')"
expect "equal token, same holder: admitted and recorded" "mark=50:$H1" "$out"
out=$(sq load "SELECT fence_set_token(50, '$H2');" "INSERT INTO fence_advance(resource) VALUES ('h');")
expect "equal token, other holder: refused as a repeat" \
  "fence:stale resource \"h\": token 50 is not newer than 50 \(write rejected\) reason=repeat holder=$H1" "$out"
out=$(sq load "SELECT fence_set_token(50);" "SELECT 'holder=' || coalesce(fence_holder(), 'none');" \
  "INSERT INTO fence_advance(resource) VALUES ('h');")
expect "fence_set_token(N) alone: no holder" 'holder=none' "$out"
expect "equal token, no holder vs a recorded one: refused" 'reason=repeat holder='"$H1" "$out"
out=$(sq load "SELECT fence_set_token(49, '$H1');" "INSERT INTO fence_advance(resource) VALUES ('h');")
expect "older token: reason=older with the mark's holder" \
  "token 49 is older than 50 \(write rejected\) reason=older holder=$H1" "$out"
out=$(sq load "SELECT fence_set_token(51, '');" "INSERT INTO fence_advance(resource) VALUES ('h');" \
  "SELECT fence_set_token(51, NULL);" "INSERT INTO fence_advance(resource) VALUES ('h');" \
  "SELECT 'mark=' || high_water || ':' || coalesce(holder, 'none') FROM fence_resource WHERE name = 'h';")
expect "higher token without a holder ('' = none): admitted, no holder vs none again admitted" 'mark=51:none' "$out"
for bad in "'0123456789abcdef0123456789abcde'" "'${H1}0'" "'0123456789ABCDEF0123456789abcdef'" \
           "'0123456789abcdef0123456789abcdeg'" "7"; do
  out=$(sq load ".bail off" "SELECT fence_set_token(52, '$H1');" "SELECT fence_set_token(53, $bad);" \
    "SELECT 'after=' || coalesce(fence_token(), 'none') || ',' || coalesce(fence_holder(), 'none');")
  expect "fence_set_token(53, $bad) refused" 'fence:notoken fence_set_token: the holder' "$out"
  expect "fence_set_token(53, $bad) clears token and holder" 'after=none,none' "$out"
done
out=$(sq noload "SELECT 'mark=' || high_water || ':' || coalesce(holder, 'none') FROM fence_resource WHERE name = 'h';")
expect "refused holders changed nothing" 'mark=51:none' "$out"

# A database from before holders (tests/sqlite/schema_before_holder.sql):
# fence_init() upgrades it in place and keeps its marks.
olddb="$dir/old.db"
{ cat "$(dirname "$0")/schema_before_holder.sql"
  echo "DROP TRIGGER fence_resource_insert;"
  echo "INSERT INTO fence_resource VALUES ('job', 7);"
} | sqlite3 -bail "$olddb" 2>&1
out=$(printf '%s\n' ".load $EXT" "SELECT 'cols=' || count(*) FROM pragma_table_info('fence_resource');" \
  "SELECT fence_init();" "SELECT 'cols=' || count(*) FROM pragma_table_info('fence_resource');" \
  "SELECT 'mark=' || high_water || ':' || coalesce(holder, 'none') FROM fence_resource;" \
  "SELECT fence_set_token(7, '$H1');" "INSERT INTO fence_advance(resource) VALUES ('job');" \
  | LD_PRELOAD="$preload" sqlite3 "$olddb" 2>&1)
expect "an old database has no holder column" 'cols=2' "$out"
expect "fence_init() adds it" 'cols=3' "$out"
expect "and keeps the marks, recorded without a holder" 'mark=7:none' "$out"
expect "the new rule applies to them" 'token 7 is not newer than 7 \(write rejected\) reason=repeat holder=none' "$out"

if [ "$failures" -gt 0 ]; then
  echo "# $failures failed"
  exit 1
fi
exit 0
