#!/usr/bin/env bash
# test_contract.sh -- the Redis contract (docs/contract.md) held to its word:
# a second client written from that page alone (contract_client.py,
# redis-py: Debian's python3-redis), loading the scripts `make install`
# put in share/fence/redis/, interoperates with the C client (libfence
# through the installed Python package, and the installed fence command) on
# the real Redis of scripts/with-servers: the installed files are the C
# client's scripts (SCRIPT EXISTS of their SHA1 after the C client alone);
# tokens rise across both, interleaved, in clock and dense mode, raises
# honoured, the other mode refused; each sees the other's lease as busy;
# renewals by each (renew.lua, renew_batch.lua, the description with them);
# a release by one wakes the other's waiter, both ways (the C client's
# waiting acquire and fence run --wait; the contract client's pub/sub);
# each reports its lease lost when the other took it after its expiry, and
# its release leaves the other's alone; fence status (and --json) shows the
# contract client's lease, holder and description; both refuse an evicting
# Redis.  Installs into a folder of its own (DESTDIR, PREFIX=/usr);
# FENCE_PKG_NO_BUILD=1 installs the build as it is.  TAP lines.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${FENCE_BUILD:-build}
PY=/usr/bin/python3            # Debian's: python3-redis is its package
missing=0
[ -n "${FENCE_TEST_REDIS_URL:-}" ] ||
  { echo "not ok - environment: FENCE_TEST_REDIS_URL is set (run under scripts/with-servers --redis)"; missing=1; }
[ -x "$PY" ] || { echo "not ok - $PY exists (scripts/install-deps)"; missing=1; }
"$PY" -c 'import redis' 2>/dev/null ||
  { echo "not ok - $PY imports redis (python3-redis: scripts/install-deps)"; missing=1; }
[ $missing -eq 0 ] || exit 1

T=$(mktemp -d "${TMPDIR:-/tmp}/fence-contract.XXXXXX")
trap 'rm -rf "$T"' EXIT
S=$T/stage
VARS=(B="$B" DESTDIR="$S" PREFIX=/usr PG_EXTENSIONS=)
[ "${FENCE_PKG_NO_BUILD:-0}" = 1 ] && VARS+=(-o all)
# Not the outer make's jobserver (make test's): a make of its own.
if env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory "${VARS[@]}" install \
     > "$T/install.log" 2>&1; then
  echo "ok - make install DESTDIR=\$T/stage PREFIX=/usr"
else
  echo "not ok - make install"; sed 's/^/# /' "$T/install.log"; exit 1
fi
FENCE_BUILD=$B scripts/san-runtime --wrap "$T/bin" "$PY" || exit 1
export FENCE_CONTRACT_SCRIPTS=$S/usr/share/fence/redis FENCE_CONTRACT_BIN=$S/usr/bin/fence
export FENCE_LIBDIR=$S/usr/lib PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH=$S/usr/lib/python3/dist-packages:$PWD/tests/contract:$PWD/tests/python
TMPDIR=$T "$T/bin/python3" tests/contract/interop_cases.py   # its files go with $T
