#!/usr/bin/env bash
# step.sh WORKER RUN -- one worker step of the torture run, started by
#   fence run --ttl 300ms ... torture -- tests/torture/step.sh WORKER RUN
# with FENCE_TOKEN (and FENCE_HOLDER, once fence exports it) set.
#
# On each store (SQLite through the sqlite3 shell and the loadable extension,
# PostgreSQL through psql), with the lease's token (and holder):
#   claim:  BEGIN; set the token; advance resource "torture"; read the
#           counter; COMMIT
#   pause:  a few ms, outside any transaction (where a holder may be stopped)
#   write:  BEGIN; set the token; advance "torture" again; counter := read+1;
#           append (worker, run, token, holder, value=read+1) to the log; COMMIT
# Order: SQLite claim, PostgreSQL claim, pause, PostgreSQL write, SQLite write.
# The read and the write are in separate transactions on purpose: inside one
# transaction the mark's row lock (PostgreSQL) or the write lock (SQLite)
# would serialise the whole read-modify-write and hide any fencing failure.
# Here only the token check at the write stands between a stale holder and a
# lost or doubled update -- which is what the run measures.
#
# Every outcome is appended to $TORTURE_DIR/wWORKER.res, one line each:
#   pg|sq ok W:RUN TOKEN VALUE        the write committed (psql/sqlite3 said so)
#   pg|sq stale claim|write [repeat]  rejected by the fence (older/repeat token)
#   pg|sq down claim|write            the store could not be reached
#   pg|sq err claim|write MSG         anything else (reported, never expected)
# Environment (from scripts/torture): TORTURE_DIR, TORTURE_PG (conninfo),
# TORTURE_PSQL (the psql binary), TORTURE_DB (SQLite file), TORTURE_EXT (the
# extension), TORTURE_SQ_HOLDER (1 when fence_set_token takes a holder).
set -u

# --stop-hook W RUN STEP_PID FENCE_PID TOKEN: run by psql (\!) between the
# PostgreSQL read and write.  The first step to get here takes the driver's
# stop request (an atomic rename), says so, and stops its fence and its own
# process group (step.sh, psql, this hook): a holder paused between its reads
# and its writes.  The driver continues them later (the group first).
if [ "${1:-}" = --stop-hook ]; then
  D=$TORTURE_DIR
  if [ "$(cat "/proc/$5/comm" 2>/dev/null)" = fence ] && \
     mv "$D/stopreq" "$D/stopreq.$2" 2>/dev/null; then
    echo "$2 $4 $5 $6 $2:$3" > "$D/stopped.tmp.$2"
    mv "$D/stopped.tmp.$2" "$D/stopped.$2"
    kill -STOP "$5"
    kill -STOP 0
  fi
  exit 0
fi

w=$1 run=$2
D=$TORTURE_DIR
res=$D/w$w.res
errf=$D/w$w.err
tok=${FENCE_TOKEN:-}
holder=${FENCE_HOLDER:-}
pause=$(printf '0.%03d' $((2 + RANDOM % 14)))   # 2..15 ms
echo "$$" > "$D/w$w.cpid"
if ! [[ $tok =~ ^[1-9][0-9]{0,18}$ ]]; then
  echo "pg err claim bad-FENCE_TOKEN:$tok" >> "$res"
  exit 1
fi
if [ -n "$holder" ] && ! [[ $holder =~ ^[0-9a-f]{32}$ ]]; then
  echo "pg err claim bad-FENCE_HOLDER:$holder" >> "$res"
  holder=''
fi
pg_use="SELECT fence.use_token($tok);"
[ -n "$holder" ] && pg_use="SELECT fence.use_token($tok, '$holder');"
sq_holder=''
[ -n "$holder" ] && [ "${TORTURE_SQ_HOLDER:-0}" = 1 ] && sq_holder=", '$holder'"
hsql=NULL
[ -n "$holder" ] && hsql="'$holder'"

# classify STORE PHASE: append the outcome of a failed transaction.
classify() {
  local st=$1 ph=$2 msg
  msg=$(tr '\n' ' ' < "$errf" | cut -c1-300)
  case "$msg" in
    *23Q01*|*fence:stale*)
      case "$msg" in *repeat*) echo "$st stale $ph repeat" ;; *) echo "$st stale $ph" ;; esac ;;
    *"could not connect"*|*"server closed the connection"*|*"terminating connection"*|\
    *"connection to server"*|*"shutting down"*|*"starting up"*|*"in recovery mode"*|\
    *"no connection to the server"*|*"connection was lost"*)
      echo "$st down $ph" ;;
    *) echo "$st err $ph $msg" ;;
  esac >> "$res"
}

psql_run() { # SQL on stdin; the tagged lines on stdout
  "$TORTURE_PSQL" -X -q -At -v ON_ERROR_STOP=1 -v VERBOSITY=verbose "$TORTURE_PG" 2>"$errf"
}
sqlite_run() {
  LD_PRELOAD="${SQ_PRELOAD:-}" sqlite3 -bail "$TORTURE_DB" 2>"$errf"
}

# PostgreSQL: claim, pause, write in one psql session (two transactions).
# With STOP_HOOK set, the stop hook runs between them.
pg_step() {
  local o v hook=''
  [ -n "$STOP_HOOK" ] && hook="\\! bash $0 --stop-hook $w $run $$ $PPID $tok"
  o=$(psql_run <<SQL
BEGIN;
$pg_use
SELECT 'ADV ' || fence.advance('torture', $tok);
SELECT v AS cur FROM torture_counter WHERE id = 1 \gset
COMMIT;
\echo VAL :cur
$hook
SELECT pg_sleep($pause);
BEGIN;
$pg_use
SELECT 'ADV ' || fence.advance('torture', $tok);
UPDATE torture_counter SET v = :cur + 1 WHERE id = 1;
INSERT INTO torture_log(worker, run, token, holder, value) VALUES ($w, '$w:$run', $tok, $hsql, :cur + 1);
COMMIT;
\echo DONE
SQL
)
  v=$(sed -n 's/^VAL \([0-9][0-9]*\)$/\1/p' <<<"$o")
  if [ -z "$v" ]; then classify pg claim; return 1; fi
  if ! grep -qx DONE <<<"$o"; then classify pg write; return 1; fi
  echo "pg ok $w:$run $tok $((v + 1))" >> "$res"
}

sq_claim() {
  local o
  o=$(sqlite_run <<SQL
.timeout 10000
.load $TORTURE_EXT
SELECT 'TOK ' || fence_set_token($tok$sq_holder);
BEGIN IMMEDIATE;
INSERT INTO fence_advance(resource) VALUES ('torture');
SELECT 'VAL ' || v FROM counter WHERE id = 1;
COMMIT;
SQL
) || { classify sq claim; return 1; }
  sed -n 's/^VAL \([0-9][0-9]*\)$/\1/p' <<<"$o"
}

sq_write() { # sq_write VALUE
  sqlite_run >/dev/null <<SQL || { classify sq write; return 1; }
.timeout 10000
.load $TORTURE_EXT
SELECT fence_set_token($tok$sq_holder);
BEGIN IMMEDIATE;
INSERT INTO fence_advance(resource) VALUES ('torture');
UPDATE counter SET v = $1 WHERE id = 1;
INSERT INTO log(worker, run, token, holder, value) VALUES ($w, '$w:$run', $tok, $hsql, $1);
COMMIT;
SQL
  echo "sq ok $w:$run $tok $1" >> "$res"
}

sv=$(sq_claim)
# A stop request from the driver is taken between the PostgreSQL read and
# write, by a step whose SQLite claim was admitted too (so that both stores'
# writes are the stopped holder's).
STOP_HOOK=''
[ -n "$sv" ] && [ -e "$D/stopreq" ] && STOP_HOOK=1
pg_step
[ -n "$sv" ] && sq_write $((sv + 1))
exit 0
