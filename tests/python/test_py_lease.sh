#!/usr/bin/env bash
# test_py_lease.sh -- the Python package (python/fence) over this build's
# libfence, with Debian's /usr/bin/python3, against the real Redis of
# scripts/with-servers.  Proves: the ctypes structs are the C structs
# (offsetof of every field) and the package's status numbers fence_common.h's
# (layout.py); a lease's token, holder, validity and release; tokens rise;
# a held name raises fence.Busy, a wait that runs out fence.Timeout, a
# waiter is woken by the release while other Python threads run (the GIL is
# released in C); on_lost is called once on the heartbeat thread when the
# key is deleted (FENCE_LOST) and when Redis is stopped (FENCE_ECONN, on
# time), leaving the block of a lost lease raises fence.Lost but never hides
# the block's exception, a callback that raises goes no further, one that
# releases its lease works and one that closes its own client is refused;
# 1,000 leases on one client stay renewed past three TTLs and close()
# releases them; 8 threads on one client and one name, one holder at a time,
# tokens rising; bad arguments (types, ranges, unknown options, NULs) are
# TypeError, ValueError or fence.InvalidArgument with a clear message and
# leave nothing behind; the manual heartbeat, renew and reissue; a closed
# client, a child after fork() and an interpreter that exits with leases
# held (and a callback running) behave; a missing library is
# fence.LibraryNotFound naming where it looked.  Under make check
# SANITIZER=... python3 runs with the sanitizer runtime preloaded
# (scripts/san-runtime).  TAP lines; exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${FENCE_BUILD:-build}
case "$B" in /*) ;; *) B=$PWD/$B ;; esac
PY=/usr/bin/python3            # Debian's, never the pyenv one first on PATH
missing=0
for v in FENCE_TEST_REDIS_URL FENCE_TEST_REDIS_CTL; do
  [ -n "${!v:-}" ] || { echo "not ok - environment: $v is set (run under scripts/with-servers --redis)"; missing=1; }
done
for f in "$B/libfence.so.0" "$PY"; do
  [ -e "$f" ] || { echo "not ok - $f exists (make -j2 all; scripts/install-deps)"; missing=1; }
done
[ $missing -eq 0 ] || exit 1

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fence-py-lease.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
scripts/san-runtime --wrap "$tmp/bin" "$PY" || exit 1
export FENCE_LIBDIR=$B PYTHONPATH=$PWD/python:$PWD/tests/python PYTHONDONTWRITEBYTECODE=1 FENCE_PY=$tmp/bin/python3
rc=0
"$tmp/bin/python3" tests/python/layout.py "$tmp" || rc=1
"$tmp/bin/python3" tests/python/lease_cases.py || rc=1
exit $rc
