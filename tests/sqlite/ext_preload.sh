# ext_preload.sh -- sourced by the shell suites that load the SQLite
# extension into a host that is not instrumented (the sqlite3 shell,
# Python): a sanitizer build of the extension needs its runtime loaded
# before the host starts.  Given EXT (the extension's path without .so),
# sets $preload (for LD_PRELOAD; "" for a plain build) and ASAN_OPTIONS.
# The rule itself is scripts/san-runtime's.
preload=$("$(dirname "${BASH_SOURCE[0]}")/../../scripts/san-runtime" "$EXT.so")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
