#!/usr/bin/env bash
# test_python.sh -- the Python examples (examples/python/) and the shell
# jobs of docs/languages.md, run under the real `fence run` against the
# real Redis and PostgreSQL of scripts/with-servers, with Debian's
# /usr/bin/python3 (psycopg2, psycopg 3, sqlite3) and the SQLite extension.
# For each job: it writes under fence run; a straggler of an older lease,
# whose token a newer holder has overtaken, is refused (by SQLSTATE 23Q01 /
# "fence:stale") and exits 3; a malformed holder is refused (exit 4).  The
# PostgreSQL jobs survive being a deadlock victim (40P01) by retrying; after
# a refused SQLite write the job's rollback releases the write lock (and
# without it another writer gets "database is locked").  Through the real
# pgbouncer of with-servers --pgbouncer in transaction mode (pool of 2):
# pg_job3 and pg_job, 4 workers x 50 transactions each, commit every one;
# psycopg 3 with its default prepare_threshold fails there (asserted: at
# least one transaction fails, 42P05 / 26000 / 08P01; printed: how many,
# and rows moved by another client's statement), the same program with
# pg_job3.connect() (prepare_threshold=None) commits 200 of 200; psycopg2
# leaves no prepared statement on the server.
# Prints TAP-style lines; exits non-zero on any failure.  Needs
# FENCE_BUILD, FENCE_TEST_REDIS_URL, FENCE_TEST_PG_CONNINFO and the
# pgbouncer's FENCE_TEST_PGBOUNCER_PORT, FENCE_TEST_PGBOUNCER_TX_USER.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${FENCE_BUILD:-build}
PY=/usr/bin/python3            # Debian's: its python3-psycopg2 / python3-psycopg
fails=0
ok() { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; fails=$((fails + 1)); }
check() { # check DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then ok "$what"; else not_ok "$what"; fi
}
# COND; expect $? DESCRIPTION -- for conditions of several commands ($?
# first: it is expanded before any $(...) in the description).
expect() {
  if [ "$1" -eq 0 ]; then ok "$2"; else not_ok "$2"; fi
}

# ---- environment: fail loudly, never skip -----------------------------
missing=0
for v in FENCE_TEST_REDIS_URL FENCE_TEST_PG_CONNINFO FENCE_TEST_PGBOUNCER_PORT FENCE_TEST_PGBOUNCER_TX_USER; do
  [ -n "${!v:-}" ] || { not_ok "environment: $v is set (run under scripts/with-servers --redis --pgbouncer)"; missing=1; }
done
for f in "$B/fence" "$B/fence_sqlite_ext.so" "$B/sql/postgres/fence.sql"; do
  [ -e "$f" ] || { not_ok "$f exists (make -j2 all)"; missing=1; }
done
[ -x "$PY" ] || { not_ok "$PY exists (scripts/install-deps)"; missing=1; }
for m in psycopg2 psycopg sqlite3; do
  [ -x "$PY" ] && { "$PY" -c "import $m" 2>/dev/null || { not_ok "$PY imports $m (scripts/install-deps)"; missing=1; }; }
done
command -v psql >/dev/null || { not_ok "psql is installed"; missing=1; }
command -v sqlite3 >/dev/null || { not_ok "sqlite3 is installed"; missing=1; }
[ $missing -eq 0 ] || { echo "test_python: cannot run" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fence-test-python.XXXXXX")
# python3 and sqlite3 load the extension: under make check SANITIZER=...
# its runtime must come first in them (scripts/san-runtime).
scripts/san-runtime --wrap "$tmp/bin" "$PY" sqlite3 || exit 1
PY=$tmp/bin/python3 PATH=$tmp/bin:$PATH
db=fence_py_$$
bg_pids=()
cleanup() {
  local p
  for p in "${bg_pids[@]:-}" "$(cat "$tmp/straggler.pid" 2>/dev/null)"; do
    [ -n "$p" ] && kill -KILL "$p" 2>/dev/null
  done
  psql "$FENCE_TEST_PG_CONNINFO" -X -q -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT
CONN="$FENCE_TEST_PG_CONNINFO dbname=$db"     # the last dbname wins
pg() { psql "$CONN" -X -q -At -v ON_ERROR_STOP=1 "$@"; }
fence_run() { "$B/fence" run --ttl 2s --redis "$FENCE_TEST_REDIS_URL" "$@"; }
flat() { printf '%s' "${1//$'\n'/ | }"; }   # output, on one TAP line
balances() { pg -c "SELECT string_agg(balance::text, ' ' ORDER BY id) FROM accounts WHERE id IN ($1)"; }
EXT=$PWD/$B/fence_sqlite_ext
sq() { sqlite3 -bail -cmd ".load $EXT" "$tmp/app.db" "$@"; }   # no output from .load
sq_balances() { sq "SELECT group_concat(balance, ' ') FROM (SELECT balance FROM accounts WHERE id IN ($1) ORDER BY id)"; }

# wait_for SECONDS COMMAND...: poll until COMMAND succeeds
wait_for() {
  local n=$(( $1 * 50 )); shift
  while [ $n -gt 0 ]; do "$@" && return 0; sleep 0.02; n=$((n - 1)); done
  return 1
}

psql "$FENCE_TEST_PG_CONNINFO" -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE $db" \
  && pg -f "$B/sql/postgres/fence.sql" >/dev/null \
  && pg -c "CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL)" \
        -c "INSERT INTO accounts SELECT g, 100 FROM generate_series(1, 80) g" \
        -c "SELECT fence.protect('accounts')" >/dev/null
check "fence.sql installed into a database of its own ($db), accounts protected" [ $? -eq 0 ]

# straggler JOB RC_FILE ARGS...: start JOB under fence run, in the
# background of a shell that exits at once -- the lease is released while
# JOB (holding that lease's token) waits for $tmp/go before writing.
# JOB's pid goes to $tmp/straggler.pid (cleanup kills it: it is no child
# of ours), its exit status to RC_FILE, its stderr to RC_FILE.err.
straggler() {
  local job=$1 rcf=$2; shift 2
  rm -f "$tmp/go" "$rcf" "$tmp/straggler.pid"
  fence_run "py-$job-$$" -- sh -c '(
      "$@" 2>"$0.err" & echo $! >"${0%/*}/straggler.pid"
      wait $!; echo $? >"$0"
    ) &' "$rcf" "$@"
}

# ---- PostgreSQL: psycopg2 and psycopg 3 -------------------------------
a=1   # each job uses accounts a..a+3 of its own
for job in pg_job pg_job3; do
  J=examples/python/$job.py
  name=py-$job-$$
  out=$(fence_run "$name" -- "$PY" "$J" --db "$CONN" --from $a --to $((a + 1)) --amount 10 2>&1); rc=$?
  tok=$(sed -n "s/^$job: wrote with token \([0-9]*\)$/\1/p" <<<"$out")
  [ $rc -eq 0 ] && [ -n "$tok" ]; expect $? "$job under fence run writes (exit $rc: $(flat "$out"))"
  check "$job: the transfer landed ($(balances $a,$((a + 1))))" [ "$(balances $a,$((a + 1)))" = "90 110" ]
  [ "$(pg -c "SELECT count(*) FROM accounts WHERE id IN ($a, $((a + 1))) AND fence_token = $tok")" = 2 ] \
    && [ "$(pg -c "SELECT fence.mark('$name')")" = "$tok" ]
  expect $? "$job: rows stamped and resource advanced with its token $tok"

  # A straggler of an older lease, then a newer holder writes, then the straggler.
  straggler "$job" "$tmp/rc" "$PY" "$J" --wait-for "$tmp/go" --db "$CONN" --from $a --to $((a + 1)) --amount 1000
  out=$(fence_run "$name" -- "$PY" "$J" --db "$CONN" --from $a --to $((a + 1)) --amount 5 2>&1); rc=$?
  check "$job: a newer holder writes meanwhile (exit $rc)" [ $rc -eq 0 ]
  touch "$tmp/go"
  wait_for 15 test -s "$tmp/rc"
  rc=$(cat "$tmp/rc" 2>/dev/null); err=$(cat "$tmp/rc.err" 2>/dev/null)
  check "$job: the straggler's write is refused as stale, exit 3 (got ${rc:-none}: $(flat "$err"))" [ "$rc" = 3 ]
  check "$job: ... reported by SQLSTATE 23Q01 with the reason" \
    grep -q "refused as stale (SQLSTATE 23Q01): fence: stale token .* reason=older" "$tmp/rc.err"
  check "$job: ... and changed nothing ($(balances $a,$((a + 1))))" [ "$(balances $a,$((a + 1)))" = "85 115" ]

  out=$(FENCE_HOLDER=XYZ FENCE_TOKEN=9 "$PY" "$J" --db "$CONN" --from $a --to $((a + 1)) --amount 1 2>&1); rc=$?
  [ $rc -eq 4 ] && grep -q "refused, no valid token (SQLSTATE 23Q02): fence: use_token: malformed holder 'XYZ'" <<<"$out"
  expect $? "$job: a malformed holder is refused by use_token, SQLSTATE 23Q02, exit 4 (got $rc: $(flat "$out"))"
  out=$(env -u FENCE_TOKEN "$PY" "$J" --db "$CONN" --from $a --to $((a + 1)) --amount 1 2>&1); rc=$?
  [ $rc -eq 64 ] && grep -q "run me under fence run" <<<"$out"
  expect $? "$job: without FENCE_TOKEN it refuses to run, exit 64 (got $rc)"

  # Deadlock: S holds row a+3 and, once the job waits for it, takes row
  # a+2, which the job holds.  S's deadlock_timeout is 10 s, the job's
  # the default 1 s: the job's backend finds the cycle first and is the
  # victim (40P01); it retries the whole transaction and lands after S.
  s_app=py-s-$$-$job; j_app=py-j-$$-$job
  psql "$CONN" -X -q -At -v ON_ERROR_STOP=1 >"$tmp/s.out" 2>&1 <<EOF &
SET application_name = '$s_app';
SET deadlock_timeout = '10s';
BEGIN;
SELECT fence.use_token(1);
UPDATE accounts SET balance = balance - 1 WHERE id = $((a + 3));
DO \$\$ DECLARE t timestamptz := clock_timestamp(); BEGIN
  WHILE NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = '$j_app' AND wait_event_type = 'Lock')
        AND clock_timestamp() < t + interval '15 s' LOOP
    PERFORM pg_sleep(0.02);
    PERFORM pg_stat_clear_snapshot();   -- else the loop sees its first snapshot forever
  END LOOP; END \$\$;
UPDATE accounts SET balance = balance + 1 WHERE id = $((a + 2));
COMMIT;
EOF
  s_pid=$!; bg_pids+=("$s_pid")
  s_waiting() { [ "$(pg -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = '$s_app' AND wait_event = 'PgSleep'")" = 1 ]; }
  wait_for 10 s_waiting
  check "$job deadlock: the other writer holds row $((a + 3)) and waits" [ $? -eq 0 ]
  out=$(PGAPPNAME=$j_app fence_run "$name" -- "$PY" "$J" --db "$CONN" --from $((a + 2)) --to $((a + 3)) --amount 10 2>&1); rc=$?
  wait "$s_pid"; s_rc=$?
  [ $rc -eq 0 ] && grep -q "^$job: SQLSTATE 40P01, retrying (attempt 2 of 5): deadlock detected" <<<"$out" \
    && grep -q "^$job: wrote with token" <<<"$out"
  expect $? "$job deadlock: the job was the victim, retried and wrote (exit $rc: $(flat "$out"))"
  check "$job deadlock: the other writer committed (exit $s_rc: $(flat "$(cat "$tmp/s.out")"))" [ $s_rc -eq 0 ]
  check "$job deadlock: both transfers landed once ($(balances $((a + 2)),$((a + 3))))" \
    [ "$(balances $((a + 2)),$((a + 3)))" = "91 109" ]
  a=$((a + 4))
done

# ---- PostgreSQL behind pgbouncer, transaction mode ---------------------
# The pool of with-servers --pgbouncer: 2 server connections, transaction
# mode for the role FENCE_TEST_PGBOUNCER_TX_USER; the pool is this
# database's own (one pool per database and role).  Each worker below is
# its own client connection running 50 transactions on it.
POOL="host=127.0.0.1 port=$FENCE_TEST_PGBOUNCER_PORT dbname=$db user=$FENCE_TEST_PGBOUNCER_TX_USER sslmode=disable gssencmode=disable"
pg -c "GRANT SELECT, UPDATE ON accounts TO $FENCE_TEST_PGBOUNCER_TX_USER" >/dev/null
check "the pool's role may write accounts" [ $? -eq 0 ]
# pool_workers JOB FIRST_ROW: 4 workers of JOB (pg_job or pg_job3), each
# under a lease of its own, --count 50 on rows FIRST_ROW+2w, +2w+1, at once.
pool_workers() {
  local job=$1 row=$2 w pids=() rc all=0
  for w in 0 1 2 3; do
    fence_run "py-pool-$job-$w-$$" -- "$PY" "examples/python/$job.py" --db "$POOL" \
      --from $((row + 2 * w)) --to $((row + 2 * w + 1)) --amount 1 --count 50 \
      >"$tmp/pool-$job-$w.out" 2>&1 &
    pids+=($!)
  done
  for w in 0 1 2 3; do
    wait "${pids[$w]}"; rc=$?
    [ $rc -eq 0 ] || { all=1; echo "# $job worker $w: exit $rc: $(flat "$(cat "$tmp/pool-$job-$w.out")")"; }
  done
  return $all
}
pool_balances() { # FIRST_ROW: the 8 rows of the 4 workers
  balances "$(seq -s, "$1" $(($1 + 7)))"
}
for spec in pg_job3:31 pg_job:41; do
  job=${spec%:*}; row=${spec#*:}
  pool_workers "$job" "$row"
  expect $? "$job through pgbouncer (transaction mode, pool of 2): 4 workers x 50 transactions, every one committed"
  got=$(pool_balances "$row")
  check "$job through pgbouncer: every transfer landed once ($got)" [ "$got" = "50 150 50 150 50 150 50 150" ]
done

# What pg_job3's connect() avoids: the same 4 x 50 transactions with
# psycopg 3's default prepare_threshold (5).  "same": every worker runs
# pg_job3.transfer(); "mixed": workers 0 and 3 do, worker 1 runs the same
# statements with the credit before the debit, worker 2 reads its
# resource's mark first -- the names psycopg gives prepared statements
# (_pg3_0, _pg3_1, ... in the order each query reaches the threshold)
# then stand for other statements on different clients.  Each of the 4
# clients prepares _pg3_0 at its 6th transaction, on
# one of the 2 server connections, where no DEALLOCATE runs between
# clients in transaction mode (psycopg sends DEALLOCATE ALL only after a
# ROLLBACK, i.e. after a failure): so at least one client meets another's
# _pg3_0 and fails, whatever the scheduling.  The same program with
# pg_job3.connect() (prepare_threshold=None) must commit all 200.
pool_run() { # THRESHOLD(default|none) same|mixed FIRST_ROW
  fence_run "py-pool-$1-$2-$$" -- "$PY" - "$POOL" "$CONN" "$1" "$2" "$3" <<'EOF'
import collections, os, re, sys, threading
sys.path.insert(0, 'examples/python')
import psycopg
import pg_job3
pool, direct, mode, kinds, first = sys.argv[1:5] + [int(sys.argv[5])]
token, holder = int(os.environ['FENCE_TOKEN']), os.environ['FENCE_HOLDER']
prefix = 'py-pool-%s-%s-%d-' % (mode, kinds, os.getpid())
committed, errors, lock = {}, collections.Counter(), threading.Lock()
BOGUS = "SELECT count(*) FROM fence.marks WHERE resource NOT LIKE 'py-%'"
with psycopg.connect(direct, autocommit=True) as d:
    bogus = d.execute(BOGUS).fetchone()[0]
def worker(w):
    conn = (psycopg.connect(pool, autocommit=True) if mode == 'default'
            else pg_job3.connect(pool))
    frm, to, res, n = first + 2 * w, first + 2 * w + 1, prefix + str(w), 0
    for _ in range(50):
        try:
            if kinds == 'mixed' and w == 1:
                with conn.transaction():   # pg_job3.transfer's statements, credit first
                    conn.execute('SELECT fence.use_token(%s::bigint, %s)', (token, holder))
                    conn.execute('SELECT fence.advance(%s, %s::bigint)', (res, token))
                    conn.execute('UPDATE accounts SET balance = balance + %s WHERE id = %s', (1, to))
                    conn.execute('UPDATE accounts SET balance = balance - %s WHERE id = %s', (1, frm))
            else:
                if kinds == 'mixed' and w == 2:
                    conn.execute('SELECT fence.mark(%s)', (res,))
                pg_job3.transfer(conn, token, holder, res, frm, to, 1)
            n += 1
        except psycopg.Error as e:
            with lock:
                errors['%s %s' % (e.sqlstate, re.sub(r'_pg3_[0-9]+', '_pg3_N',
                                                    e.diag.message_primary or str(e))[:90])] += 1
    committed[w] = n
    conn.close()
threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
with psycopg.connect(direct, autocommit=True) as d:
    bal = dict(d.execute('SELECT id, balance FROM accounts').fetchall())
    marks = d.execute(BOGUS).fetchone()[0] - bogus
wrong = [w for w in range(4) if (bal[first + 2 * w], bal[first + 2 * w + 1])
         != (100 - committed[w], 100 + committed[w])]
print('committed %d of 200 (per worker %s), failed %d, workers whose rows moved otherwise '
      'than their committed transfers: %d, marks of resources nobody advanced: %d'
      % (sum(committed.values()), [committed[w] for w in range(4)], 200 - sum(committed.values()),
         len(wrong), marks))
for what, n in errors.most_common():
    print('  %d x %s' % (n, what))
for w in wrong:
    print('  worker %d: %d transfers committed, its rows moved by %+d / %+d'
          % (w, committed[w], bal[first + 2 * w] - 100, bal[first + 2 * w + 1] - 100))
EOF
}
for kinds in same:51 mixed:59; do
  out=$(pool_run default "${kinds%:*}" "${kinds#*:}" 2>&1)
  echo "$out" | sed 's/^/# /'
  n=$(sed -n 's/^committed \([0-9]*\) of 200.*/\1/p' <<<"$out")
  [ -n "$n" ] && [ "$n" -lt 200 ] && grep -Eq '^  [0-9]+ x (42P05|26000|08P01) ' <<<"$out"
  expect $? "psycopg 3's default prepare_threshold through pgbouncer, ${kinds%:*} statements: transactions fail (${n:-?} of 200 committed; 42P05 / 26000 / 08P01)"
done
out=$(pool_run none mixed 67 2>&1)
echo "$out" | sed 's/^/# /'
grep -q '^committed 200 of 200 (per worker \[50, 50, 50, 50\]), failed 0, workers whose rows moved otherwise than their committed transfers: 0, marks of resources nobody advanced: 0$' <<<"$out"
expect $? "the mixed program with pg_job3.connect() (prepare_threshold=None): 200 of 200, every row right"

# The mechanism, on a direct connection: after 10 transfers psycopg2 has
# prepared nothing on the server (it sends each query whole), psycopg 3's
# default has prepared the transfer's 4 statements, pg_job3.connect() none.
out=$("$PY" - "$CONN" <<'EOF' 2>&1
import sys
sys.path.insert(0, 'examples/python')
import psycopg, psycopg2, pg_job, pg_job3
conninfo = sys.argv[1]
H = '0123456789abcdef0123456789abcdef'
def count(execute):
    return execute('SELECT count(*) FROM pg_prepared_statements')
c2 = psycopg2.connect(conninfo)
for _ in range(10):
    pg_job.transfer(c2, 1, H, 'py-prep-2', 75, 76, 0)
cur = c2.cursor()
cur.execute('SELECT count(*) FROM pg_prepared_statements')
print('psycopg2: %d' % cur.fetchone()[0])
for name, conn in (('psycopg 3 default', psycopg.connect(conninfo, autocommit=True)),
                   ('pg_job3.connect()', pg_job3.connect(conninfo))):
    for _ in range(10):
        pg_job3.transfer(conn, 1, H, 'py-prep-3', 75, 76, 0)
    print('%s: %d' % (name, conn.execute('SELECT count(*) FROM pg_prepared_statements').fetchone()[0]))
EOF
)
echo "$out" | sed 's/^/# /'
[ "$out" = $'psycopg2: 0\npsycopg 3 default: 4\npg_job3.connect(): 0' ]
expect $? "server-side prepared statements after 10 transfers on one connection: psycopg2 0, psycopg 3's default 4, pg_job3.connect() 0"

# ---- SQLite: the standard sqlite3 module ------------------------------
J=examples/python/sqlite_job.py
name=py-sqlite-$$
sq "SELECT fence_init();" \
   "CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL);" \
   "WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < 10) INSERT INTO accounts SELECT i, 100 FROM g;" \
   "SELECT fence_protect('accounts');" >/dev/null
check "SQLite database created, accounts protected" [ $? -eq 0 ]
out=$(fence_run "$name" -- "$PY" "$J" --db "$tmp/app.db" --ext "$EXT" --from 1 --to 2 --amount 10 2>&1); rc=$?
tok=$(sed -n 's/^sqlite_job: wrote with token \([0-9]*\)$/\1/p' <<<"$out")
[ $rc -eq 0 ] && [ -n "$tok" ]; expect $? "sqlite_job under fence run writes (exit $rc: $(flat "$out"))"
check "sqlite_job: the transfer landed ($(sq_balances 1,2))" [ "$(sq_balances 1,2)" = "90 110" ]
check "sqlite_job: resource advanced with its token" \
  [ "$(sq "SELECT high_water FROM fence_resource WHERE name = '$name'")" = "$tok" ]
straggler sqlite "$tmp/rc" "$PY" "$J" --wait-for "$tmp/go" --db "$tmp/app.db" --ext "$EXT" --from 1 --to 2 --amount 1000
out=$(fence_run "$name" -- "$PY" "$J" --db "$tmp/app.db" --ext "$EXT" --from 1 --to 2 --amount 5 2>&1); rc=$?
check "sqlite_job: a newer holder writes meanwhile (exit $rc)" [ $rc -eq 0 ]
touch "$tmp/go"
wait_for 15 test -s "$tmp/rc"
rc=$(cat "$tmp/rc" 2>/dev/null); err=$(cat "$tmp/rc.err" 2>/dev/null)
check "sqlite_job: the straggler's write is refused as stale, exit 3 (got ${rc:-none}: $(flat "$err"))" [ "$rc" = 3 ]
check "sqlite_job: ... with fence's message" \
  grep -q "refused as stale: fence:stale resource \"$name\": token [0-9]* is older than [0-9]* (write rejected) reason=older holder=" "$tmp/rc.err"
check "sqlite_job: ... and changed nothing ($(sq_balances 1,2))" [ "$(sq_balances 1,2)" = "85 115" ]
out=$(FENCE_HOLDER=XYZ FENCE_TOKEN=9 "$PY" "$J" --db "$tmp/app.db" --ext "$EXT" --from 1 --to 2 --amount 1 2>&1); rc=$?
[ $rc -eq 4 ] && grep -q "refused, no valid token: fence:notoken fence_set_token: the holder" <<<"$out"
expect $? "sqlite_job: a malformed holder is refused (fence:notoken), exit 4 (got $rc: $(flat "$out"))"

# The lock after a refusal, in one process with two connections: the
# job's transfer() rolls back, so another writer gets in while the refused
# connection stays open; the default sqlite3 pattern without a rollback
# keeps the transaction, and the other writer gets "database is locked".
out=$("$PY" - "$tmp/app.db" "$EXT" "$tok" <<'EOF' 2>&1
import sqlite3, sys
sys.path.insert(0, 'examples/python')
import sqlite_job
path, ext, tok = sys.argv[1], sys.argv[2], int(sys.argv[3])
H = '0123456789abcdef0123456789abcdef'
def other_writer():
    c = sqlite3.connect(path, timeout=0.3)
    c.enable_load_extension(True); c.load_extension(ext)
    try:
        c.execute('SELECT fence_set_token(?, ?)', (tok + 10**6, H))
        c.execute('UPDATE accounts SET balance = balance + 0 WHERE id = 3')
        c.commit()
        return 'wrote'
    except sqlite3.Error as e:
        c.rollback()
        return 'failed: %s' % e
    finally:
        c.close()
job = sqlite_job.connect(path, ext)
try:
    sqlite_job.transfer(job, 1, None, "lock-test", 1, 2, 1)
    print('job: wrote (unexpected)')
except sqlite3.IntegrityError as e:
    print('job: refused: %s; in transaction: %s' % (e, job.in_transaction))
print('with rollback, other writer: %s' % other_writer())
naive = sqlite3.connect(path, timeout=0.3)        # the default isolation_level
naive.enable_load_extension(True); naive.load_extension(ext)
naive.execute('SELECT fence_set_token(1)')
try:
    naive.execute('UPDATE accounts SET balance = 0 WHERE id = 3')
except sqlite3.IntegrityError as e:
    print('naive: refused: %s; in transaction: %s' % (e, naive.in_transaction))
print('without rollback, other writer: %s' % other_writer())
naive.rollback()
print('after naive.rollback(), other writer: %s' % other_writer())
EOF
)
echo "$out" | sed 's/^/# /'
check "SQLite refusal: the job's connection is left with no open transaction" \
  grep -q "^job: refused: fence:stale table \"accounts\": token 1 is older than .*; in transaction: False$" <<<"$out"
check "SQLite refusal: after the job's rollback another writer succeeds" grep -qx "with rollback, other writer: wrote" <<<"$out"
check "SQLite refusal: without a rollback the transaction stays open" grep -q "^naive: refused: fence:stale .*; in transaction: True$" <<<"$out"
check "SQLite refusal: ... and another writer gets \"database is locked\"" \
  grep -qx "without rollback, other writer: failed: database is locked" <<<"$out"
check "SQLite refusal: ... until it rolls back" grep -qx "after naive.rollback(), other writer: wrote" <<<"$out"

# ---- the shell jobs (examples/shell): psql and sqlite3 ------------------
# A holder whose lease is over writes again with its old token (an old
# token and holder, taken from a lease of the same name first).
for store in pg sqlite; do
  J=examples/shell/${store}_job.sh
  name=py-sh-$store-$$
  if [ $store = pg ]; then target=$CONN; a=21; bal() { balances "$1"; }
  else target=$tmp/app.db; a=5; bal() { sq_balances "$1"; }; fi
  old=$(fence_run "$name" -- sh -c 'echo "$FENCE_TOKEN $FENCE_HOLDER"')
  before=$(bal $a,$((a + 1)))
  out=$(FENCE_SQLITE_EXT=$EXT fence_run "$name" -- "$J" "$target" $a $((a + 1)) 10 2>&1); rc=$?
  [ $rc -eq 0 ] && grep -q "^${store}_job.sh: wrote with token [0-9]*$" <<<"$out"
  expect $? "${store}_job.sh under fence run writes (exit $rc: $(flat "$out"))"
  after=$(bal $a,$((a + 1)))
  check "${store}_job.sh: the transfer landed ($before -> $after)" [ "$after" = "90 110" ]
  out=$(FENCE_SQLITE_EXT=$EXT FENCE_TOKEN=${old% *} FENCE_HOLDER=${old#* } FENCE_NAME=$name \
        "$J" "$target" $a $((a + 1)) 1000 2>&1); rc=$?
  if [ $store = pg ]; then want="ERROR:  23Q01: fence: stale token ${old% *} for resource \"$name\""
  else want="fence:stale resource \"$name\": token ${old% *} is older than"; fi
  [ $rc -eq 3 ] && grep -qF "$want" <<<"$out"
  expect $? "${store}_job.sh: the old holder's token is refused as stale, exit 3 (got $rc: $(flat "$out"))"
  check "${store}_job.sh: ... and changed nothing" [ "$(bal $a,$((a + 1)))" = "$after" ]
  out=$(env -u FENCE_TOKEN "$J" "$target" $a $((a + 1)) 1 2>&1); rc=$?
  check "${store}_job.sh: without FENCE_TOKEN it refuses to run, exit 64 (got $rc)" [ $rc -eq 64 ]
done

# ---- docs/languages.md shows these files, not copies that drift --------
out=$("$PY" - docs/languages.md examples/python/*.py examples/shell/*.sh tests/orm/*.py <<'EOF'
import re, sys
doc = open(sys.argv[1]).read()
files = {p: open(p).read() for p in sys.argv[2:]}
n = 0
for lang, body in re.findall(r'^```(python|sh)\n(.*?)^```$', doc, re.S | re.M):
    n += 1
    where = [p for p, text in files.items() if body in text]
    print('%s block %d (%s): %s' % (lang, n, body.split('\n')[0][:40],
                                    ', '.join(where) if where else 'NOT FOUND'))
EOF
)
echo "$out" | sed 's/^/# /'
[ -n "$out" ] && ! grep -q "NOT FOUND" <<<"$out" && [ "$(grep -c . <<<"$out")" -ge 7 ]
expect $? "docs/languages.md: each python and sh block is copied from examples/ or tests/orm/ ($(grep -c . <<<"$out") blocks)"
check "docs/languages.md: the shell scripts are shown whole" \
  "$PY" -c 'import sys; d = open("docs/languages.md").read(); sys.exit(not all("```sh\n" + open(p).read() + "```" in d for p in sys.argv[1:]))' \
  examples/shell/pg_job.sh examples/shell/sqlite_job.sh

[ $fails -eq 0 ]
