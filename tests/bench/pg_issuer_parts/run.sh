#!/usr/bin/env bash
# run.sh -- the breakdown of docs/measurements.md's PostgreSQL-issuer
# section: a solo cluster of its own (scripts/pg-standby, fsync on), fence.sql
# and the variants (variants.py), parts.c's rounds with fsync on and then,
# restarted, with fsync off (the server's CPU without the disk's wait).
#   tests/bench/pg_issuer_parts/run.sh [ROUNDS [CYCLES]]   (from the top folder)
set -euo pipefail
rounds=${1:-21} cycles=${2:-120}
d=$(mktemp -d /tmp/fence-parts.XXXXXX)
chmod 755 "$d"
trap 'scripts/pg-standby stop "$d/c" >/dev/null 2>&1 || true; rm -rf "$d"' EXIT
cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -o "$d/parts" tests/bench/pg_issuer_parts/parts.c \
  -I"$(pg_config --includedir)" -lpq
port=$(scripts/pg-standby start "$d/c" solo)
ci="host=127.0.0.1 port=$port user=postgres dbname=postgres"
make -s build/sql/postgres/fence.sql
psql "$ci" -qX -v ON_ERROR_STOP=1 -f build/sql/postgres/fence.sql >/dev/null
python3 tests/bench/pg_issuer_parts/variants.py > "$d/variants.sql"
psql "$ci" -qX -v ON_ERROR_STOP=1 -f "$d/variants.sql" 2>&1 | grep -v NOTICE || true
echo "# fsync=$(psql "$ci" -qXAtc 'show fsync')"
"$d/parts" "$ci" "$rounds" "$cycles"
bindir=$(pg_config --bindir)
as_pg=(); [ "$(id -u)" = 0 ] && as_pg=(runuser -u postgres --)
"${as_pg[@]}" "$bindir/pg_ctl" -D "$d/c.primary/data" -w -l "$d/c.primary/server.log" \
  -o "-c listen_addresses=127.0.0.1 -p $port -k $d/c.primary -c fsync=off -c max_connections=40" restart >/dev/null
echo "# fsync=$(psql "$ci" -qXAtc 'show fsync')"
"$d/parts" "$ci" "$rounds" "$cycles"
