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
# Every attempt is also recorded for the history checker
# (tests/torture/histcheck.py, which documents the fields) in
# $TORTURE_DIR/wWORKER.hist: before it starts, a line with outcome "unknown"
# (what stays when the step is killed: it may have committed); when it ends,
# the same attempt again with its outcome (scripts/torture keeps the last
# line of each attempt; "skipped": a write never tried because its claim
# failed).  Each line is one append (one write(2)), so a kill leaves whole
# lines.  fence exports no acquire time or deadline (docs/cli.md): the lease
# view recorded is lease_from = this step's start (after the acquire) and
# lease_until = "-".  Times are wall-clock microseconds (bash's
# EPOCHREALTIME, or PostgreSQL's clock_timestamp() inside the session: the
# same host clock).
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
histf=$D/w$w.hist
lease_from=${EPOCHREALTIME//[!0-9]/}
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
PG_NOW="(extract(epoch FROM clock_timestamp()) * 1000000)::bigint"

now_us() { NOW=${EPOCHREALTIME//[!0-9]/}; }

# hist STORE OP OUTCOME VALUE SEQ T_START T_END [MARK MARK_HOLDER REASON]:
# one attempt line (the field order of histcheck.py).
hist() {
  printf 'attempt\t%s\t%s\t%s\t%s\t%s\t-\t%s\ttorture\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
    "$w:$run" "$w" "${holder:--}" "$tok" "$lease_from" "$1" "$2" "$3" \
    "${8:--}" "${9:--}" "${10:--}" "$4" "$5" "$6" "$7" >> "$histf"
}

# classify STORE PHASE: append the outcome of a failed transaction, and set
# C_OUT (refused, unknown or error) and, for a refusal, C_MARK, C_MH and
# C_REASON as the store's message names them (PostgreSQL 23Q01's DETAIL
# "highest=M ... reason=R holder=H"; SQLite's "token T is older|not newer
# than M (write rejected) reason=R holder=H"; "-" when not named).
RE_PG_MARK='highest=([0-9]+)'
RE_SQ_MARK='token [0-9]+ is (older|not newer) than ([0-9]+)'
RE_REASON='reason=([a-z]+)'
RE_MH='reason=[a-z]+ holder=([0-9a-f]{32})'
classify() {
  local st=$1 ph=$2 msg full
  full=$(tr '\n' ' ' < "$errf")
  msg=${full:0:300}
  C_MARK=- C_MH=- C_REASON=-
  case "$msg" in
    *23Q01*|*fence:stale*)
      C_OUT=refused
      if [[ $full =~ $RE_PG_MARK ]]; then C_MARK=${BASH_REMATCH[1]}
      elif [[ $full =~ $RE_SQ_MARK ]]; then C_MARK=${BASH_REMATCH[2]}; fi
      [[ $full =~ $RE_REASON ]] && C_REASON=${BASH_REMATCH[1]}
      [[ $full =~ $RE_MH ]] && C_MH=${BASH_REMATCH[1]}
      case "$msg" in *repeat*) echo "$st stale $ph repeat" ;; *) echo "$st stale $ph" ;; esac ;;
    *"could not connect"*|*"server closed the connection"*|*"terminating connection"*|\
    *"connection to server"*|*"shutting down"*|*"starting up"*|*"in recovery mode"*|\
    *"no connection to the server"*|*"connection was lost"*)
      C_OUT=unknown
      echo "$st down $ph" ;;
    *)
      # A store error rolls the transaction back; no message at all (psql
      # or sqlite3 died) leaves the outcome unknown.
      if [ -n "${full// /}" ]; then C_OUT=error; else C_OUT=unknown; fi
      echo "$st err $ph $msg" ;;
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
# The write's commit order is its log row's seq: nextval runs after the
# counter UPDATE, whose row lock is held to COMMIT, so seq order is commit
# order.  TC (after the claim's COMMIT) and TW (before the write's BEGIN)
# are the server's clock.
pg_step() {
  local o v='' tc='-' tw='-' seq='-' done=0 k x t0 hook=''
  [ -n "$STOP_HOOK" ] && hook="\\! bash $0 --stop-hook $w $run $$ $PPID $tok"
  now_us; t0=$NOW
  hist pg claim unknown - - "$t0" -
  hist pg write unknown - - - -
  o=$(psql_run <<SQL
BEGIN;
$pg_use
SELECT 'ADV ' || fence.advance('torture', $tok);
SELECT v AS cur FROM torture_counter WHERE id = 1 \gset
COMMIT;
SELECT 'TC ' || $PG_NOW;
\echo VAL :cur
$hook
SELECT pg_sleep($pause);
SELECT 'TW ' || $PG_NOW;
BEGIN;
$pg_use
SELECT 'ADV ' || fence.advance('torture', $tok);
UPDATE torture_counter SET v = :cur + 1 WHERE id = 1;
INSERT INTO torture_log(worker, run, token, holder, value) VALUES ($w, '$w:$run', $tok, $hsql, :cur + 1)
  RETURNING 'SEQ ' || seq;
COMMIT;
\echo DONE
SQL
)
  now_us
  while read -r k x; do
    case "$k" in
      VAL) [[ $x =~ ^[0-9]+$ ]] && v=$x ;;
      TC) tc=$x ;; TW) tw=$x ;; SEQ) seq=$x ;; DONE) done=1 ;;
    esac
  done <<<"$o"
  if [ -z "$v" ]; then
    classify pg claim
    hist pg claim "$C_OUT" - - "$t0" "$NOW" "$C_MARK" "$C_MH" "$C_REASON"
    hist pg write skipped - - - -
    return 1
  fi
  hist pg claim admitted "$v" - "$t0" "$tc"
  if [ $done = 0 ]; then
    classify pg write
    hist pg write "$C_OUT" $((v + 1)) - "$tw" "$NOW" "$C_MARK" "$C_MH" "$C_REASON"
    return 1
  fi
  hist pg write admitted $((v + 1)) "$seq" "$tw" "$NOW"
  echo "pg ok $w:$run $tok $((v + 1))" >> "$res"
}

# sq_claim: sets SV to the counter read ('' when the claim failed).
sq_claim() {
  local o k x t0
  SV=''
  now_us; t0=$NOW
  hist sqlite claim unknown - - "$t0" -
  o=$(sqlite_run <<SQL
.timeout 10000
.load $TORTURE_EXT
SELECT 'TOK ' || fence_set_token($tok$sq_holder);
BEGIN IMMEDIATE;
INSERT INTO fence_advance(resource) VALUES ('torture');
SELECT 'VAL ' || v FROM counter WHERE id = 1;
COMMIT;
SQL
)
  local rc=$?
  now_us
  if [ $rc -ne 0 ]; then
    classify sq claim
    hist sqlite claim "$C_OUT" - - "$t0" "$NOW" "$C_MARK" "$C_MH" "$C_REASON"
    return 1
  fi
  while read -r k x; do [ "$k" = VAL ] && [[ $x =~ ^[0-9]+$ ]] && SV=$x; done <<<"$o"
  hist sqlite claim "$([ -n "$SV" ] && echo admitted || echo unknown)" "${SV:--}" - "$t0" "$NOW"
}

# sq_write VALUE.  BEGIN IMMEDIATE holds the write lock to COMMIT, so the
# log row's seq (rowid) order is commit order.
sq_write() {
  local o k x t0 seq='-'
  now_us; t0=$NOW
  hist sqlite write unknown "$1" - "$t0" -
  o=$(sqlite_run <<SQL
.timeout 10000
.load $TORTURE_EXT
SELECT fence_set_token($tok$sq_holder);
BEGIN IMMEDIATE;
INSERT INTO fence_advance(resource) VALUES ('torture');
UPDATE counter SET v = $1 WHERE id = 1;
INSERT INTO log(worker, run, token, holder, value) VALUES ($w, '$w:$run', $tok, $hsql, $1)
  RETURNING 'SEQ ' || seq;
COMMIT;
SQL
)
  local rc=$?
  now_us
  if [ $rc -ne 0 ]; then
    classify sq write
    hist sqlite write "$C_OUT" "$1" - "$t0" "$NOW" "$C_MARK" "$C_MH" "$C_REASON"
    return 1
  fi
  while read -r k x; do [ "$k" = SEQ ] && seq=$x; done <<<"$o"
  hist sqlite write admitted "$1" "$seq" "$t0" "$NOW"
  echo "sq ok $w:$run $tok $1" >> "$res"
}

sq_claim
sv=$SV
# A stop request from the driver is taken between the PostgreSQL read and
# write, by a step whose SQLite claim was admitted too (so that both stores'
# writes are the stopped holder's).
STOP_HOOK=''
[ -n "$sv" ] && [ -e "$D/stopreq" ] && STOP_HOOK=1
pg_step
[ -n "$sv" ] && sq_write $((sv + 1))
exit 0
