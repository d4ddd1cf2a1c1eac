# servers.sh -- sourced by scripts/with-servers: start and stop throwaway
# redis-server and PostgreSQL instances on free loopback ports in temporary
# folders.  Nothing here listens on anything but 127.0.0.1.

fence_die() { echo "servers: $*" >&2; exit 1; }

# A port nobody is listening on, from 10000 up to the start of the kernel's
# ephemeral range (ip_local_port_range, 32768 by default): a port in that
# range can be held by an outgoing connection's local end, which a connect
# probe does not see but a bind then trips over.
fence_free_port() {
  local p i lo=10000 hi
  hi=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null) || hi=32768
  [ "${hi:-0}" -gt $((lo + 1000)) ] 2>/dev/null || hi=32768
  for i in $(seq 1 200); do
    p=$(( lo + (RANDOM * 32768 + RANDOM) % (hi - lo) ))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"; return 0
    fi
  done
  return 1
}

# fence_start_redis_in DIR [extra redis.conf lines...]
# Starts redis-server with its redis.conf, pid, log and port files in DIR
# (made by the caller) on a free port; prints the port.  Retries on a port
# taken meanwhile; returns 1 when it would not start.  "@PORT2@" in an extra
# line becomes a second free port, new at each try, kept in DIR/port2 (the
# TLS listener's).
fence_start_redis_in() {
  local dir=$1; shift
  command -v redis-server >/dev/null || fence_die "redis-server not found: run scripts/install-deps"
  command -v redis-cli >/dev/null || fence_die "redis-cli not found: run scripts/install-deps"
  local port port2 try line
  for try in 1 2 3 4 5; do
    port=$(fence_free_port) || fence_die "no free port"
    port2=$(fence_free_port) || fence_die "no free port"
    {
      echo "bind 127.0.0.1"
      echo "port $port"
      echo "dir $dir"
      echo "daemonize yes"
      echo "pidfile $dir/redis.pid"
      echo "logfile $dir/redis.log"
      echo "save \"\""
      echo "appendonly no"
      echo "protected-mode yes"
      for line in "$@"; do echo "${line//@PORT2@/$port2}"; done
    } > "$dir/redis.conf"
    echo "$port" > "$dir/port"
    echo "$port2" > "$dir/port2"
    if redis-server "$dir/redis.conf" >/dev/null 2>&1 && \
       scripts/redis-ctl "$dir" wait; then
      echo "$port"
      return 0
    fi
    scripts/redis-ctl "$dir" stop >/dev/null 2>&1 || true
  done
  cat "$dir/redis.log" >&2 2>/dev/null || true
  return 1
}

# fence_start_sentinel DIR MASTER_PORT [QUORUM]: a Sentinel (redis-server
# --sentinel; Debian has no separate redis-sentinel) monitoring
# 127.0.0.1:MASTER_PORT as "fence-m" with quorum QUORUM (default 1),
# down-after-milliseconds 200 and failover-timeout 1000, in DIR (a file
# "sentinel" there tells scripts/redis-ctl); prints the port.
fence_start_sentinel() {
  local dir=$1 mport=$2 quorum=${3:-1} port try
  : > "$dir/sentinel"
  for try in 1 2 3 4 5; do
    port=$(fence_free_port) || fence_die "no free port"
    {
      echo "bind 127.0.0.1"
      echo "port $port"
      echo "dir $dir"
      echo "daemonize yes"
      echo "pidfile $dir/redis.pid"
      echo "logfile $dir/redis.log"
      echo "protected-mode no"
      echo "sentinel monitor fence-m 127.0.0.1 $mport $quorum"
      echo "sentinel down-after-milliseconds fence-m 200"
      echo "sentinel failover-timeout fence-m 1000"
    } > "$dir/redis.conf"
    echo "$port" > "$dir/port"
    if redis-server "$dir/redis.conf" --sentinel >/dev/null 2>&1 && \
       scripts/redis-ctl "$dir" wait; then
      echo "$port"
      return 0
    fi
    scripts/redis-ctl "$dir" stop >/dev/null 2>&1 || true
  done
  cat "$dir/redis.log" >&2 2>/dev/null || true
  return 1
}

# fence_tls_conf CERTDIR TLS_PORT: the redis.conf lines of a TLS listener
# on 127.0.0.1:TLS_PORT (beside the plain port, which scripts/redis-ctl
# uses) with CERTDIR/{ca.crt,server.crt,server.key}; clients need no
# certificate unless a later line says "tls-auth-clients yes".
fence_tls_conf() {
  echo "tls-port $2"
  echo "tls-cert-file $1/server.crt"
  echo "tls-key-file $1/server.key"
  echo "tls-ca-cert-file $1/ca.crt"
  echo "tls-auth-clients no"
  echo "tls-replication no"
}

# fence_start_redis VAR_PREFIX [extra redis.conf lines...]
# Starts redis-server; sets ${VAR_PREFIX}_PORT and ${VAR_PREFIX}_DIR.
# The folder holds redis.conf so scripts/redis-ctl can stop and restart it.
fence_start_redis() {
  local var=$1; shift
  local dir port
  dir=$(mktemp -d "${TMPDIR:-/tmp}/fence-redis.XXXXXX")
  FENCE__REDIS_DIRS+=("$dir")
  port=$(fence_start_redis_in "$dir" "$@") || fence_die "redis-server would not start"
  printf -v "${var}_PORT" '%s' "$port"
  printf -v "${var}_DIR" '%s' "$dir"
}

# The PostgreSQL the test servers run: FENCE_PG_SERVER_BINDIR when set
# (scripts/pg-versions: a build of another major version, which offers no
# extension), else Debian's newest under /usr/lib/postgresql.
fence_pg_bindir() {
  local d
  if [ -n "${FENCE_PG_SERVER_BINDIR:-}" ]; then
    d=$FENCE_PG_SERVER_BINDIR
  else
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  fi
  [ -n "$d" ] && [ -x "$d/initdb" ] || return 1
  echo "$d"
}

# Run a PostgreSQL program as the postgres user when we are root
# (PostgreSQL refuses to run as root).
fence_as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# fence_pg_private_tree BINDIR EXTDIR TREE: a private installation of the
# PostgreSQL of BINDIR under TREE that also holds the extension "fence"
# built in EXTDIR (fence.so, fence.control, fence--*.sql), so that CREATE
# EXTENSION fence works as in production without writing to system
# folders; with EXTDIR "" a tree without the extension, even when the
# system has it (a server like a managed PostgreSQL's).  PostgreSQL finds its share and lib folders relative to the
# real path of its binary (for Debian's bin /usr/lib/postgresql/15/bin:
# ../../../../share/postgresql/15 and ../lib), so the tree mirrors that
# layout: postgres and pg_ctl (which starts the postgres next to its own
# real path) are copies, everything else of bin, lib and share is a
# symlink, and share's extension folder is a real one with the
# extension's files added.  The extension's own names (fence.so,
# fence.control, fence--*.sql) are never linked, whether or not the
# system has them (make install-pgext): the tree's are copies of EXTDIR's,
# made where nothing was, so that nothing is ever written through a link
# into the system's folders.  Prints the tree's bin folder.
fence_pg_private_tree() {
  local bindir=$1 ext=$2 tree=$3 pgc share pkglib sub rel f
  pgc="$bindir/pg_config"
  [ -x "$pgc" ] || pgc=$(command -v pg_config) || return 1
  share=$("$pgc" --sharedir) && pkglib=$("$pgc" --pkglibdir) || return 1
  # The bin folder's path below the prefix the three folders share
  # (Debian: lib/postgresql/15/bin, share/postgresql/15, lib/postgresql/15/lib).
  local prefix=${bindir%/lib/postgresql/*}
  [ "$prefix" != "$bindir" ] && [ "${share#"$prefix"/}" != "$share" ] && \
    [ "${pkglib#"$prefix"/}" != "$pkglib" ] || return 1
  for sub in "${bindir#"$prefix"/}" "${pkglib#"$prefix"/}" "${share#"$prefix"/}/extension"; do
    mkdir -p "$tree/$sub" || return 1
  done
  rel=${bindir#"$prefix"/}
  for f in "$bindir"/*; do
    case ${f##*/} in
      postgres|pg_ctl) cp -p "$f" "$tree/$rel/" ;;
      *) ln -s "$f" "$tree/$rel/" ;;
    esac
  done
  for f in "$pkglib"/*; do
    [ "${f##*/}" = fence.so ] || ln -s "$f" "$tree/${pkglib#"$prefix"/}/"
  done
  for f in "$share"/*; do
    [ "${f##*/}" = extension ] || ln -s "$f" "$tree/${share#"$prefix"/}/"
  done
  for f in "$share"/extension/*; do
    case ${f##*/} in
      fence.control|fence--*.sql) ;;
      *) ln -s "$f" "$tree/${share#"$prefix"/}/extension/" ;;
    esac
  done
  if [ -n "$ext" ]; then
    fence_pg_tree_offer "$tree/${pkglib#"$prefix"/}" "$tree/${share#"$prefix"/}/extension" "$ext" || return 1
  fi
  echo "$tree/$rel"
}

# fence_pg_tree_offer LIBDIR EXTDIR FROM: make the private tree's lib
# folder LIBDIR and extension folder EXTDIR offer the extension of folder
# FROM (fence.so, fence.control, fence--*.sql) and nothing else of it: the
# tree's fence.so, fence.control and fence--*.sql go (they are copies,
# never links: refused otherwise), FROM's are copied.  Used by
# fence_pg_private_tree, and to swap one build for another in a tree a
# server runs from (fence_pg_tree_dirs gives its folders).
fence_pg_tree_offer() {
  local lib=$1 ext=$2 from=$3 f
  [ -f "$from/fence.so" ] && [ -f "$from/fence.control" ] || return 1
  for f in "$lib/fence.so" "$ext/fence.control" "$ext"/fence--*.sql; do
    [ -L "$f" ] && return 1
    if [ -e "$f" ]; then rm -f "$f" || return 1; fi
  done
  cp "$from/fence.so" "$lib/" || return 1
  cp "$from"/fence.control "$from"/fence--*.sql "$ext/" || return 1
}

# fence_pg_tree_dirs TREE: the lib and extension folders of the private
# tree TREE that fence_start_postgres made (fence_pg_private_tree of
# fence_pg_bindir's PostgreSQL), one a line.
fence_pg_tree_dirs() {
  local tree=$1 bindir pgc share pkglib prefix
  bindir=$(fence_pg_bindir) || return 1
  pgc="$bindir/pg_config"
  [ -x "$pgc" ] || pgc=$(command -v pg_config) || return 1
  share=$("$pgc" --sharedir) && pkglib=$("$pgc" --pkglibdir) || return 1
  prefix=${bindir%/lib/postgresql/*}
  echo "$tree/${pkglib#"$prefix"/}"
  echo "$tree/${share#"$prefix"/}/extension"
}

# The folder of the built extension the test PostgreSQL should offer:
# FENCE_PGEXT_DIR (scripts/run-tests sets it to BUILD_DIR/lib/pgext), or
# nothing.  It holds fence.so (built); the control and SQL files come from
# FENCE_PGEXT_SQL_DIR, by default lib/pgext/ (a VPATH build has none).
fence_pgext_dir() {
  local d=${FENCE_PGEXT_DIR:-}
  [ -n "$d" ] && [ -f "$d/fence.so" ] || return 1
  echo "$d"
}

# fence_start_postgres: sets FENCE_PG_PORT, FENCE_PG_DIR, FENCE_PG_BINDIR
# (the private tree's bin when the extension is offered, see above; the
# tree is FENCE_PG_DIR/tree).
fence_start_postgres() {
  local bindir dir port ext
  bindir=$(fence_pg_bindir) || fence_die "PostgreSQL server binaries not found: run scripts/install-deps"
  dir=$(mktemp -d "${TMPDIR:-/tmp}/fence-pg.XXXXXX")
  chmod 755 "$dir"
  if ext=$(fence_pgext_dir) && [ -n "${FENCE_PG_SERVER_BINDIR:-}" ]; then
    fence_die "FENCE_PG_SERVER_BINDIR's PostgreSQL cannot offer the extension: unset FENCE_PGEXT_DIR"
  fi
  if ext=$(fence_pgext_dir); then
    local sql=${FENCE_PGEXT_SQL_DIR:-lib/pgext}
    mkdir -p "$dir/ext" && cp "$ext/fence.so" "$dir/ext/" && \
      cp "$sql"/fence.control "$sql"/fence--*.sql "$dir/ext/" || fence_die "cannot copy the extension from $ext and $sql"
    bindir=$(fence_pg_private_tree "$bindir" "$dir/ext" "$dir/tree") || \
      fence_die "cannot build a private PostgreSQL tree with the extension in $dir/tree"
  fi
  FENCE__PG_DIRS+=("$dir")
  port=$(fence_pg_start_in "$dir" "$bindir") || fence_die "PostgreSQL would not start"
  FENCE_PG_PORT=$port; FENCE_PG_DIR=$dir; FENCE_PG_BINDIR=$bindir
}

# fence_pg_start_in DIR BINDIR: initdb DIR/data (superuser postgres, trust,
# as the postgres user when we are root) with the PostgreSQL of BINDIR and
# start it on a free loopback port (socket in DIR, log DIR/server.log);
# prints the port.  DIR must exist and be reachable by the postgres user.
# Returns 1, the log on stderr, when it would not start.
fence_pg_start_in() {
  local dir=$1 bindir=$2 port try
  [ "$(id -u)" -eq 0 ] && chown -hR postgres:postgres "$dir"
  fence_as_pg "$bindir/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 \
      --locale=C >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; return 1; }
  for try in 1 2 3 4 5; do
    port=$(fence_free_port) || return 1
    if fence_as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=100 -c max_prepared_transactions=4" \
        start >/dev/null 2>&1; then
      echo "$port"
      return 0
    fi
  done
  cat "$dir/server.log" >&2 2>/dev/null || true
  return 1
}

# The PostgreSQL roles the test pgbouncer gives a pool mode each ([users]
# pool_mode): one pool per (database, role), so a suite reaches its own
# database in each mode by connecting as the role.
FENCE_PGBOUNCER_ROLES=(fence_pool_tx:transaction fence_pool_stmt:statement fence_pool_sess:session)

# The pgbouncer program: FENCE_PGBOUNCER when set, else Debian's
# /usr/sbin/pgbouncer, else the one on PATH.
fence_pgbouncer_bin() {
  if [ -n "${FENCE_PGBOUNCER:-}" ]; then
    [ -x "$FENCE_PGBOUNCER" ] && echo "$FENCE_PGBOUNCER"
  elif [ -x /usr/sbin/pgbouncer ]; then
    echo /usr/sbin/pgbouncer
  else
    command -v pgbouncer
  fi
}

# fence_start_pgbouncer: a real pgbouncer (PgBouncer 1.18 of Debian,
# /usr/sbin/pgbouncer) in front of the PostgreSQL of fence_start_postgres
# (call that first), in a temporary folder, on a free port of 127.0.0.1
# (no Unix socket), run as the postgres user (pgbouncer refuses root).
# [databases] has only the fallback "* = host=127.0.0.1 port=PG": any
# database name a client asks for is the same-named database of the test
# PostgreSQL, so the suites' per-run databases (tests/pg/pgutil.c
# setup_db) are reachable without telling the harness their names.  The
# pool mode comes from the client's role: the roles of
# FENCE_PGBOUNCER_ROLES (created here as plain LOGIN roles, no superuser)
# are in transaction, statement and session mode; default_pool_size 2;
# auth_type trust with a userlist naming them.  Nothing else is set:
# server_reset_query stays DISCARD ALL, run in session mode only (the
# default users have).  Sets FENCE_PGBOUNCER_PORT and FENCE_PGBOUNCER_DIR
# (pgbouncer.ini, pgbouncer.log).  Dies when pgbouncer is missing or
# will not start.
fence_start_pgbouncer() {
  local bin dir port try spec psql sql=""
  bin=$(fence_pgbouncer_bin) || fence_die "pgbouncer not found: run scripts/install-deps"
  [ -n "${FENCE_PG_PORT:-}" ] || fence_die "pgbouncer needs the test PostgreSQL (start it first)"
  psql="$(fence_pg_bindir)/psql"
  [ -x "$psql" ] || psql=$(command -v psql) || fence_die "psql not found: run scripts/install-deps"
  for spec in "${FENCE_PGBOUNCER_ROLES[@]}"; do
    sql+="CREATE ROLE ${spec%%:*} LOGIN;"
  done
  "$psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$FENCE_PG_PORT" -U postgres -d postgres \
      -c "$sql" >/dev/null || fence_die "cannot create the pgbouncer roles"
  dir=$(mktemp -d "${TMPDIR:-/tmp}/fence-pgbouncer.XXXXXX")
  FENCE__PGBOUNCER_DIRS+=("$dir")
  for spec in "${FENCE_PGBOUNCER_ROLES[@]}"; do
    echo "\"${spec%%:*}\" \"\""
  done > "$dir/userlist.txt"
  [ "$(id -u)" -eq 0 ] && chown -R postgres:postgres "$dir"
  for try in 1 2 3 4 5; do
    port=$(fence_free_port) || fence_die "no free port"
    {
      echo "[databases]"
      echo "* = host=127.0.0.1 port=$FENCE_PG_PORT"
      echo "[users]"
      for spec in "${FENCE_PGBOUNCER_ROLES[@]}"; do
        echo "${spec%%:*} = pool_mode=${spec#*:}"
      done
      echo "[pgbouncer]"
      echo "listen_addr = 127.0.0.1"
      echo "listen_port = $port"
      echo "unix_socket_dir ="
      echo "auth_type = trust"
      echo "auth_file = $dir/userlist.txt"
      echo "pidfile = $dir/pgbouncer.pid"
      echo "logfile = $dir/pgbouncer.log"
      echo "default_pool_size = 2"
      echo "max_client_conn = 200"
    } > "$dir/pgbouncer.ini"
    [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$dir/pgbouncer.ini"
    echo "$port" > "$dir/port"
    if fence_as_pg "$bin" -d -q "$dir/pgbouncer.ini" >>"$dir/start.log" 2>&1; then
      # Up when a query goes through it to PostgreSQL.
      for _ in $(seq 1 100); do
        if "$psql" -X -q -At -h 127.0.0.1 -p "$port" -U fence_pool_sess -d postgres \
            -c "SELECT 1" 2>/dev/null | grep -qx 1; then
          FENCE_PGBOUNCER_PORT=$port; FENCE_PGBOUNCER_DIR=$dir
          return 0
        fi
        grep -q ' FATAL ' "$dir/pgbouncer.log" 2>/dev/null && break # e.g. the port was taken
        sleep 0.05
      done
    fi
    fence_stop_pgbouncer "$dir"
    cat "$dir/pgbouncer.log" >> "$dir/start.log" 2>/dev/null; rm -f "$dir/pgbouncer.log"
  done
  cat "$dir/start.log" >&2 2>/dev/null || true
  fence_die "pgbouncer would not start"
}

# fence_stop_pgbouncer DIR: stop the pgbouncer of DIR (SIGTERM, then
# SIGKILL after 5 s).
fence_stop_pgbouncer() {
  local pid
  pid=$(cat "$1/pgbouncer.pid" 2>/dev/null) || return 0
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.05
  done
  kill -KILL "$pid" 2>/dev/null || true
}

fence_stop_all() {
  local d
  for d in "${FENCE__PGBOUNCER_DIRS[@]:-}"; do
    [ -n "$d" ] || continue
    fence_stop_pgbouncer "$d"
    rm -rf "$d"
  done
  # Sets of servers the tests started (scripts/redis-set) and left behind.
  if [ -n "${FENCE_TEST_SPAWN_DIR:-}" ] && [ -d "$FENCE_TEST_SPAWN_DIR" ]; then
    for d in "$FENCE_TEST_SPAWN_DIR"/*/; do
      [ -d "$d" ] || continue
      if [ -f "$d/pg-cluster" ]; then
        scripts/pg-cluster stop "${d%/}" >/dev/null 2>&1
      elif [ -f "$d/etcd-cluster" ]; then
        scripts/etcd-cluster stop "${d%/}" >/dev/null 2>&1
      else
        scripts/redis-set stop "${d%/}" >/dev/null 2>&1
      fi
    done
    rm -rf "$FENCE_TEST_SPAWN_DIR"
  fi
  for d in "${FENCE__REDIS_DIRS[@]:-}"; do
    [ -n "$d" ] || continue
    scripts/redis-ctl "$d" stop >/dev/null 2>&1 || true
    rm -rf "$d"
  done
  for d in "${FENCE__PG_DIRS[@]:-}"; do
    [ -n "$d" ] || continue
    fence_as_pg "$(fence_pg_bindir)/pg_ctl" -D "$d/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$d"
  done
}
FENCE__REDIS_DIRS=()
FENCE__PG_DIRS=()
FENCE__PGBOUNCER_DIRS=()
