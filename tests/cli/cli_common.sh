# cli_common.sh -- what the CLI suites share (sourced; not a suite itself).
# Sets F (the fence binary), U (the test Redis URL), T (a temporary folder,
# removed on exit), BG (background pids, killed on exit) and the helpers
# ok/nok/check, wait_until, alive, name.
set -u
cd "$(dirname "$0")/../.."

B=${FENCE_BUILD:-build}
F=$PWD/$B/fence
case "$B" in /*) F=$B/fence ;; esac
pass=0; fail=0
ok() { echo "ok - $*"; pass=$((pass + 1)); }
nok() { echo "not ok - $*"; fail=$((fail + 1)); }
check() { # check DESCRIPTION COMMAND...: ok when COMMAND succeeds
  local what=$1; shift
  if "$@"; then ok "$what"; else nok "$what"; fi
}

if [ -z "${FENCE_TEST_REDIS_URL:-}" ] || [ -z "${FENCE_TEST_REDIS_CTL:-}" ]; then
  nok "setup: FENCE_TEST_REDIS_URL / FENCE_TEST_REDIS_CTL not set (run under scripts/with-servers --redis)"
  exit 1
fi
if [ ! -x "$F" ]; then
  nok "setup: $F is missing (make $B/fence)"
  exit 1
fi
U=$FENCE_TEST_REDIS_URL
export FENCE_REDIS_URL=$U
unset FENCE_REDIS_PASSWORD FENCE_REDIS_SENTINEL_PASSWORD
T=$(mktemp -d "${TMPDIR:-/tmp}/fence-cli.XXXXXX")
BG=()
rcli() { $FENCE_TEST_REDIS_CTL cli "$@"; }
cleanup() {
  local p
  for p in "${BG[@]}"; do kill -9 "$p" 2>/dev/null; done
  # A suite that changes more (the shared Redis's settings) defines this.
  if declare -F cleanup_suite >/dev/null; then cleanup_suite; fi
  rm -rf "$T"
}
trap cleanup EXIT

alive() {
  local st
  st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  case "$st" in Z*) return 1 ;; esac
  return 0
}
wait_until() { # wait_until SECONDS COMMAND...: poll every 20 ms
  local n=$(($(awk -v s="$1" 'BEGIN{printf "%d", s * 50}'))); shift
  local i
  for ((i = 0; i < n; i++)); do
    "$@" && return 0
    sleep 0.02
  done
  "$@"
}
file_has() { [ -s "$1" ]; }
key_gone() { [ "$(rcli exists "fence:{$1}")" = 0 ]; }
echo 0 > "$T/counter"
name() { # a fresh lease name each call
  local k; k=$(($(cat "$T/counter") + 1)); echo "$k" > "$T/counter"
  echo "clitest-$$-$k"
}
