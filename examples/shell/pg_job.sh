#!/bin/sh
# pg_job.sh DB FROM TO AMOUNT -- pg_job.py in psql, run under fence run:
#   fence run --ttl 10s transfer -- examples/shell/pg_job.sh "dbname=app" 1 2 10
# Exit status: 0 written, 3 refused as stale (23Q01), 4 no valid token
# (23Q02), 2 any other error.  psql stops at the first error
# (ON_ERROR_STOP) and the server rolls the open transaction back.
[ $# -eq 4 ] || { echo "usage: pg_job.sh DB FROM TO AMOUNT" >&2; exit 64; }
case "${FENCE_TOKEN:-}" in ''|0*|*[!0-9]*) echo "pg_job.sh: run me under fence run" >&2; exit 64 ;; esac
err=$(psql "$1" -X -q -v ON_ERROR_STOP=1 -v VERBOSITY=verbose \
        -v from="$2" -v to="$3" -v amount="$4" 2>&1 >/dev/null <<'SQL'
\getenv token FENCE_TOKEN
\getenv holder FENCE_HOLDER
\getenv name FENCE_NAME
BEGIN;
SELECT fence.use_token(:'token', :'holder');
SELECT fence.advance(:'name', :'token');
UPDATE accounts SET balance = balance - :amount WHERE id = :from;
UPDATE accounts SET balance = balance + :amount WHERE id = :to;
COMMIT;
SQL
) && { echo "pg_job.sh: wrote with token $FENCE_TOKEN"; exit 0; }
echo "pg_job.sh: $err" >&2
case "$err" in       # VERBOSITY=verbose puts the SQLSTATE first: "ERROR:  23Q01: fence: stale token"
  *"ERROR:  23Q01:"*) exit 3 ;;
  *"ERROR:  23Q02:"*) exit 4 ;;
esac
exit 2
