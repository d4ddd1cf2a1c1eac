#!/bin/sh
# sqlite_job.sh DB FROM TO AMOUNT -- sqlite_job.py in the sqlite3 shell,
# run under fence run (FENCE_SQLITE_EXT: the extension, without .so):
#   fence run --ttl 10s transfer -- examples/shell/sqlite_job.sh app.db 1 2 10
# Exit status as pg_job.sh.  -bail stops at the first error, and the
# sqlite3 process exits: its open transaction is rolled back.
[ $# -eq 4 ] || { echo "usage: sqlite_job.sh DB FROM TO AMOUNT" >&2; exit 64; }
case "${FENCE_TOKEN:-}" in ''|0*|*[!0-9]*) echo "sqlite_job.sh: run me under fence run" >&2; exit 64 ;; esac
case "${FENCE_HOLDER:-}" in *[!0-9a-f]*) echo "sqlite_job.sh: bad FENCE_HOLDER" >&2; exit 64 ;; esac
for n in "$2" "$3" "$4"; do case "$n" in ''|*[!0-9]*) exit 64 ;; esac; done
name=$(printf '%s' "${FENCE_NAME:-transfer}" | sed "s/'/''/g")   # an SQL string literal
err=$(sqlite3 -bail "$1" 2>&1 >/dev/null <<SQL
.load ${FENCE_SQLITE_EXT:-fence_sqlite_ext}
.timeout 5000
SELECT fence_set_token($FENCE_TOKEN, '$FENCE_HOLDER');
BEGIN IMMEDIATE;
INSERT INTO fence_advance(resource) VALUES ('$name');
UPDATE accounts SET balance = balance - $4 WHERE id = $2;
UPDATE accounts SET balance = balance + $4 WHERE id = $3;
COMMIT;
SQL
) && { echo "sqlite_job.sh: wrote with token $FENCE_TOKEN"; exit 0; }
echo "sqlite_job.sh: $err" >&2
case "$err" in
  *"fence:stale "*) exit 3 ;;
  *"fence:notoken "*) exit 4 ;;
esac
exit 2
