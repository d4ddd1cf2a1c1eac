# ext_preload.sh -- sourced by the shell suites that load the SQLite
# extension into a host that is not instrumented (the sqlite3 shell,
# Python): a sanitizer build of the extension needs its runtime loaded
# before the host starts.  Given EXT (the extension's path without .so),
# sets $preload (for LD_PRELOAD; "" for a plain build) and ASAN_OPTIONS.
preload=""
for rt in libasan libubsan libtsan; do
  lib=$(ldd "$EXT.so" 2>/dev/null | awk -v r="$rt" '$1 ~ "^"r"\\.so" {print $3; exit}')
  [ -n "$lib" ] && preload="$lib${preload:+:$preload}"
done
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
