# shellcheck shell=bash
# redis_sets.sh -- sourced by tests/cli/test_cli_redis.sh (not a suite):
# sets of throwaway servers of the suite's own, on 127.0.0.1 only, under
# $FENCE_TEST_SPAWN_DIR (so scripts/with-servers stops what a killed suite
# leaves behind), each recorded in REDIS_SETS and stopped by
# redis_sets_stop (the suite calls it from its exit trap).
#   redis_set_start VAR KIND [lines...]    scripts/redis-set start (solo,
#                                          sentinel, sentinel3, tls ...);
#                                          VAR gets the set's folder
#   redis_auth_sentinel_set VAR DATA_PW SENTINEL_PW
#                                          a master with requirepass DATA_PW
#                                          and one Sentinel ("fence-m") with
#                                          requirepass SENTINEL_PW
#   redis_make_certs DIR                   CA, server and client
#                                          certificates (openssl req/x509)
# Every start returns non-zero (with the reason on stderr) when a server
# would not start: the caller reports that as a failure, never a skip.
# Expects the current folder to be the repository (cli_common.sh cd's there).
. scripts/servers.sh

REDIS_SETS=()

# A new, empty set folder under the spawn folder; VAR gets its path.
redis__set_dir() {
  local d
  d=$(mktemp -d "${FENCE_TEST_SPAWN_DIR:?}/cli-redis.XXXXXX") || return 1
  REDIS_SETS+=("$d")
  printf -v "$1" '%s' "$d"
}

redis_set_start() {
  local var=$1 kind=$2 dir; shift 2
  redis__set_dir dir || return 1
  printf -v "$var" '%s' "$dir"
  "${FENCE_TEST_REDIS_SET:?}" start "$dir" "$kind" "$@"
}

# redis__start_sentinel DIR MASTER_PORT [lines...]: fence_start_sentinel's
# Sentinel ("fence-m", quorum 1, down-after-milliseconds 200) with extra
# sentinel.conf lines (which fence_start_sentinel does not take), started
# and waited for by scripts/redis-ctl; prints the port.
redis__start_sentinel() {
  local dir=$1 mport=$2 port line; shift 2
  : > "$dir/sentinel"
  for _ in 1 2 3 4 5; do
    port=$(fence_free_port) || return 1
    {
      echo "bind 127.0.0.1"
      echo "port $port"
      echo "dir $dir"
      echo "daemonize yes"
      echo "pidfile $dir/redis.pid"
      echo "logfile $dir/redis.log"
      echo "protected-mode no"
      echo "sentinel monitor fence-m 127.0.0.1 $mport 1"
      echo "sentinel down-after-milliseconds fence-m 200"
      echo "sentinel failover-timeout fence-m 1000"
      for line in "$@"; do echo "$line"; done
    } > "$dir/redis.conf"
    chmod 600 "$dir/redis.conf"
    echo "$port" > "$dir/port"
    if scripts/redis-ctl "$dir" start; then
      echo "$port"
      return 0
    fi
    scripts/redis-ctl "$dir" stop > /dev/null 2>&1
  done
  cat "$dir/redis.log" >&2 2>/dev/null
  return 1
}

redis_auth_sentinel_set() {
  local var=$1 dpw=$2 spw=$3 dir mp sp
  redis__set_dir dir || return 1
  printf -v "$var" '%s' "$dir"
  mkdir -p "$dir/master" "$dir/sentinel" || return 1
  mp=$(fence_start_redis_in "$dir/master" "requirepass $dpw" "masterauth $dpw") || return 1
  echo "MASTER_PORT=$mp" > "$dir/env"
  sp=$(redis__start_sentinel "$dir/sentinel" "$mp" "sentinel auth-pass fence-m $dpw" \
         "requirepass $spw") || return 1
  echo "SENTINEL_PORT=$sp" >> "$dir/env"
  # The Sentinel answers for the master (and logs in to it) only once it
  # has read its own config; ask it, with its password, until it does.
  for _ in $(seq 1 100); do
    [ "$(redis-cli -h 127.0.0.1 -p "$sp" --no-auth-warning -a "$spw" \
          sentinel get-master-addr-by-name fence-m 2>/dev/null | tail -n 1)" = "$mp" ] && return 0
    sleep 0.05
  done
  echo "redis_sets: the password-protected Sentinel does not name its master" >&2
  return 1
}

redis_sets_stop() {
  local d
  for d in "${REDIS_SETS[@]}"; do
    [ -d "$d" ] && "${FENCE_TEST_REDIS_SET:?}" stop "$d" > /dev/null 2>&1
  done
  REDIS_SETS=()
}

# CA (ca.crt), a second CA (other-ca.crt), a server certificate for
# localhost / 127.0.0.1 (server.crt, server.key), a client certificate of
# the CA (client.crt, client.key), one of the other CA (rogue.crt,
# rogue.key), and cadir/ (the CA, rehashed).
redis_make_certs() {
  local d=$1 ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
  mkdir -p "$d/cadir" || return 1
  # One && chain (set -e would be ignored: the caller tests the result).
  # shellcheck disable=SC2086
  (
    cd "$d" &&
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > server.ext &&
    printf 'extendedKeyUsage=clientAuth\n' > client.ext &&
    {
      openssl req -x509 $ec -keyout ca.key -out ca.crt -days 2 -subj /CN=fence-test-ca &&
      openssl req -x509 $ec -keyout other-ca.key -out other-ca.crt -days 2 -subj /CN=fence-other-ca &&
      openssl req $ec -keyout server.key -out server.csr -subj /CN=localhost &&
      openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
        -out server.crt -days 2 -extfile server.ext &&
      openssl req $ec -keyout client.key -out client.csr -subj /CN=fence-client &&
      openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
        -out client.crt -days 2 -extfile client.ext &&
      openssl req $ec -keyout rogue.key -out rogue.csr -subj /CN=fence-rogue &&
      openssl x509 -req -in rogue.csr -CA other-ca.crt -CAkey other-ca.key -CAcreateserial \
        -out rogue.crt -days 2 -extfile client.ext
    } > openssl.log 2>&1 &&
    cp ca.crt cadir/ &&
    openssl rehash cadir > /dev/null 2>&1
  ) || { tail -n 5 "$d/openssl.log" >&2 2>/dev/null; return 1; }
}
