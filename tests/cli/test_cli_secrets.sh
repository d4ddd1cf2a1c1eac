#!/usr/bin/env bash
# test_cli_secrets.sh -- Redis credentials and `fence` (issue 9 item 4),
# against the real password-protected Redis of scripts/with-servers
# (FENCE_TEST_REDIS_AUTH_URL, requirepass "fence-auth-pw") and the ACL user
# "fence" / "fence-test-pw" of FENCE_TEST_REDIS_URL.  While fence and its
# command run, /proc/PID/cmdline and /proc/PID/environ of both are read:
# neither may hold a password.
. "$(dirname "$0")/cli_common.sh"

if [ -z "${FENCE_TEST_REDIS_AUTH_URL:-}" ]; then
  nok "setup: FENCE_TEST_REDIS_AUTH_URL not set"
  exit 1
fi
PW=fence-auth-pw
ACLPW=fence-test-pw
AHOST=${FENCE_TEST_REDIS_AUTH_URL#redis://}          # 127.0.0.1:PORT
RHOST=${FENCE_TEST_REDIS_URL#redis://}
# The command: writes its pid, its FENCE_REDIS_URL, then holds until $1.stop exists.
HOLD='printf "%s\n" "${FENCE_REDIS_URL-unset}" > "$1.url"; echo $$ > "$1.pid.tmp"; mv "$1.pid.tmp" "$1.pid"
      while [ ! -e "$1.stop" ]; do sleep 0.05; done'

# no_secret FILE...: none of the files holds a password.
no_secret() { ! grep -a -q -F -e "$PW" -e "$ACLPW" -e "SentinelSecret" "$@"; }
# snap PREFIX FENCE_PID: copy cmdline/environ of fence and of its command.
snap() {
  local p=$1 fp=$2 cp
  wait_until 5 file_has "$p.pid" || return 1
  cp=$(cat "$p.pid")
  tr '\0' '\n' < "/proc/$fp/cmdline" > "$p.fcmd"
  tr '\0' '\n' < "/proc/$fp/environ" > "$p.fenv"
  tr '\0' '\n' < "/proc/$cp/cmdline" > "$p.ccmd"
  tr '\0' '\n' < "/proc/$cp/environ" > "$p.cenv"
}
finish() { # finish PREFIX FENCE_PID: let the command end; sets rc
  touch "$1.stop"; wait "$2"; rc=$?
}

# ---- a password in --redis: blanked in fence's argv, warned about --------------------
n=$(name)
"$F" run --redis "redis://:$PW@$AHOST" "$n" -- sh -c "$HOLD" sh "$T/a" 2> "$T/a.err" &
fp=$!; BG+=("$fp")
snap "$T/a" "$fp" || nok "the command started (a)"
check "URL password: fence's /proc/PID/cmdline no longer shows it" no_secret "$T/a.fcmd"
check "... the rest of the URL is still there (blanked in place, not removed)" \
  grep -q -E "^redis://:x+@$AHOST\$" "$T/a.fcmd"
check "... fence's environ holds no password" no_secret "$T/a.fenv"
check "... the command's cmdline and environ hold none" no_secret "$T/a.ccmd" "$T/a.cenv"
finish "$T/a" "$fp"
check "... and the URL's password was used (the command ran, exit 0)" test "$rc" = 0
check "... one warning on stderr, naming the better ways" \
  bash -c "[ \$(grep -c 'warning' '$T/a.err') = 1 ] && grep -q 'FENCE_REDIS_PASSWORD' '$T/a.err' && grep -q -- '--password-file' '$T/a.err'"
check "... the warning does not repeat the password" no_secret "$T/a.err"

# FENCE_URL (issue 28) is FENCE_REDIS_URL's kin: its password off the
# environ of fence and of the command, which gets the URL without it.
n=$(name)
env -u FENCE_REDIS_URL FENCE_URL="redis://:$PW@$AHOST" "$F" run "$n" -- \
  sh -c 'printf "%s\n" "${FENCE_URL-unset}" > "$1.furl"; '"$HOLD" sh "$T/u" 2> "$T/u.err" &
fp=$!; BG+=("$fp")
snap "$T/u" "$fp" || nok "the command started (FENCE_URL)"
check "FENCE_URL with a password: fence's and the command's environ hold none" \
  no_secret "$T/u.fenv" "$T/u.cenv"
check "... the command's FENCE_URL is the URL without it" \
  test "$(cat "$T/u.furl")" = "redis://$AHOST"
finish "$T/u" "$fp"
check "... and its password was used (exit 0)" test "$rc" = 0

# --redis=URL form, user:password (ACL user), status --json masks the URL.
"$F" status --json "--redis=redis://fence:$ACLPW@$RHOST" "$(name)" > "$T/st.json" 2> "$T/st.err"; rc=$?
check "status --redis=redis://user:pw@...: exit 0, valid JSON" \
  bash -c "[ $rc = 0 ] && python3 -c 'import json,sys; json.load(sys.stdin)' < '$T/st.json'"
check "... its \"redis\" field and stderr hold no password" no_secret "$T/st.json" "$T/st.err"
check "... and stderr has the warning" grep -q warning "$T/st.err"
"$F" status "$(name)" 2> "$T/nowarn.err" > /dev/null
check "no warning without a password in the URL" test ! -s "$T/nowarn.err"

# ---- FENCE_REDIS_URL with a password: the command gets it without -----------------------
n=$(name)
FENCE_REDIS_URL="redis://:$PW@$AHOST" "$F" run "$n" -- sh -c "$HOLD" sh "$T/b" 2> "$T/b.err" &
fp=$!; BG+=("$fp")
snap "$T/b" "$fp" || nok "the command started (b)"
check "FENCE_REDIS_URL with a password: fence's environ no longer holds it" no_secret "$T/b.fenv"
check "... nor the command's" no_secret "$T/b.cenv"
check "... the command's FENCE_REDIS_URL is the URL without credentials" \
  test "$(cat "$T/b.url")" = "redis://$AHOST"
finish "$T/b" "$fp"
check "... it was used to log in (exit 0), no warning (not on the command line)" \
  bash -c "[ $rc = 0 ] && ! grep -q warning '$T/b.err'"
n=$(name)
FENCE_REDIS_URL="redis://fence:$ACLPW@$RHOST" "$F" run "$n" -- sh -c "$HOLD" sh "$T/b2" 2> /dev/null &
fp=$!; BG+=("$fp")
snap "$T/b2" "$fp" || nok "the command started (b2)"
check "FENCE_REDIS_URL user:password@: the command's URL has neither" \
  test "$(cat "$T/b2.url")" = "redis://$RHOST"
check "... no password in either environ" no_secret "$T/b2.fenv" "$T/b2.cenv"
finish "$T/b2" "$fp"
check "... exit 0" test "$rc" = 0

# ---- the same variable twice in the environment: every copy scrubbed -------------------
# (execve allows duplicate names; getenv/setenv see only the first.)
cat > "$T/dupenv.c" <<'C'
#include <unistd.h>
int main(int argc, char **argv) {
    (void)argc;
    char *env[] = {"PATH=/usr/bin:/bin", argv[1], argv[2], argv[3], argv[4], 0};
    execve(argv[5], argv + 5, env);
    return 127;
}
C
if cc -o "$T/dupenv" "$T/dupenv.c" 2>"$T/dupenv.err"; then
  n=$(name)
  "$T/dupenv" "FENCE_REDIS_URL=redis://$RHOST" "FENCE_REDIS_URL=redis://fence:$ACLPW@$RHOST" \
    "FENCE_REDIS_PASSWORD=" "FENCE_REDIS_PASSWORD=$PW" \
    "$F" run "$n" -- sh -c "$HOLD" sh "$T/dup" 2> "$T/dup.err" &
  fpid=$!
  if snap "$T/dup" "$fpid"; then
    check "duplicate variables: fence's environ holds no password" no_secret "$T/dup.fenv"
    check "duplicate variables: the command's environ holds no password" no_secret "$T/dup.cenv"
    check "duplicate variables: the command sees one FENCE_REDIS_URL" \
      test "$(grep -c '^FENCE_REDIS_URL=' "$T/dup.cenv")" = 1
  else
    nok "duplicate variables: the command did not start ($(cat "$T/dup.err"))"
  fi
  finish "$T/dup" "$fpid"
  check "duplicate variables: exit 0" test "$rc" = 0
else
  nok "setup: cannot compile the duplicate-environment helper: $(cat "$T/dupenv.err")"
fi

# ---- FENCE_REDIS_PASSWORD --------------------------------------------------------------
n=$(name)
FENCE_REDIS_PASSWORD=$PW FENCE_REDIS_SENTINEL_PASSWORD=SentinelSecret42 \
  "$F" run --redis "$FENCE_TEST_REDIS_AUTH_URL" "$n" -- sh -c "$HOLD" sh "$T/c" 2> "$T/c.err" &
fp=$!; BG+=("$fp")
snap "$T/c" "$fp" || nok "the command started (c)"
check "FENCE_REDIS_PASSWORD: fence's environ holds no password any more" no_secret "$T/c.fenv"
check "... the command gets neither FENCE_REDIS_PASSWORD nor FENCE_REDIS_SENTINEL_PASSWORD" \
  bash -c "! grep -q -e '^FENCE_REDIS_PASSWORD=' -e '^FENCE_REDIS_SENTINEL_PASSWORD=' '$T/c.cenv' && ! grep -a -q -F -e '$PW' -e SentinelSecret42 '$T/c.cenv'"
finish "$T/c" "$fp"
check "... and the password worked (exit 0)" test "$rc" = 0
"$F" status --redis "$FENCE_TEST_REDIS_AUTH_URL" "$(name)" > /dev/null 2> "$T/nopw.err"; rc=$?
check "the same Redis without a password: exit 69" test "$rc" = 69
FENCE_REDIS_PASSWORD= "$F" status --redis "$FENCE_TEST_REDIS_AUTH_URL" "$(name)" > /dev/null 2>&1; rc=$?
check "an empty FENCE_REDIS_PASSWORD counts as unset (69)" test "$rc" = 69

# ---- --password-file ---------------------------------------------------------------------
printf '%s\n' "$PW" > "$T/pw"; chmod 600 "$T/pw"
n=$(name)
"$F" run --redis "$FENCE_TEST_REDIS_AUTH_URL" --password-file "$T/pw" "$n" -- sh -c "$HOLD" sh "$T/d" 2> "$T/d.err" &
fp=$!; BG+=("$fp")
snap "$T/d" "$fp" || nok "the command started (d)"
check "--password-file: no password in cmdline/environ of fence or the command" \
  no_secret "$T/d.fcmd" "$T/d.fenv" "$T/d.ccmd" "$T/d.cenv"
finish "$T/d" "$fp"
check "... and it worked (exit 0, nothing on stderr)" test "$rc" = 0 -a ! -s "$T/d.err"
printf '%s' "$PW" > "$T/pw-nonl"
"$F" token "--password-file=$T/pw-nonl" --redis "$FENCE_TEST_REDIS_AUTH_URL" "$(name)" > "$T/tok" 2>&1; rc=$?
check "--password-file=FILE without a final newline works (token: 0)" test "$rc" = 0 -a "$(cat "$T/tok")" = 0
printf '%s\r\n' "$PW" > "$T/pw-crlf"
"$F" status --password-file "$T/pw-crlf" --redis "$FENCE_TEST_REDIS_AUTH_URL" "$(name)" > /dev/null 2>&1; rc=$?
check "--password-file with a CRLF line end works" test "$rc" = 0
FENCE_REDIS_PASSWORD=WrongSecretEnv55 "$F" status --password-file "$T/pw" --redis "$FENCE_TEST_REDIS_AUTH_URL" "$(name)" > /dev/null 2>&1; rc=$?
check "--password-file wins over FENCE_REDIS_PASSWORD" test "$rc" = 0
"$F" status --password-file "$T/pw" --redis "redis://:WrongSecretUrl66@$AHOST" "$(name)" > /dev/null 2>&1; rc=$?
check "--password-file wins over the URL's password" test "$rc" = 0

usage_case() { # usage_case DESCRIPTION ARGS...: exit 64 with a message, no secret in it
  local what=$1; shift
  "$F" "$@" > "$T/out" 2> "$T/err"; local rc=$?
  if [ "$rc" = 64 ] && [ -s "$T/err" ] && no_secret "$T/err"; then ok "usage error exits 64: $what"
  else nok "usage error exits 64: $what (got $rc: $(head -c 200 "$T/err"))"; fi
}
: > "$T/empty"
printf 'a\nb\n' > "$T/twolines"
usage_case "--password-file missing" status --password-file "$T/nope" x
usage_case "--password-file empty" status --password-file "$T/empty" x
usage_case "--password-file with two lines" status --password-file "$T/twolines" x
head -c 4097 /dev/zero | tr '\0' a > "$T/long"
usage_case "--password-file longer than 4096 bytes" status --password-file "$T/long" x
usage_case "--password-file without a value" status x --password-file
usage_case "--sentinel-password-file missing" run --sentinel-password-file "$T/nope" x -- true
usage_case "--cacert without a value" status x --cacert
usage_case "--sni empty" run --sni= x -- true
printf 'SentinelSecret\n' > "$T/spw"
usage_case "--sentinel-password-file with a redis:// URL (refused by the library)" status --sentinel-password-file "$T/spw" x
"$F" status --password-file "$T/nope" x 2> "$T/err"
check "... the missing file's message names it and says why" \
  bash -c "grep -q -F '$T/nope' '$T/err' && grep -q 'No such file' '$T/err'"

# Only a regular file is read: a FIFO with no writer used to block fence
# forever.  timeout(1) bounds each call, so a hang fails (124), never stalls.
bounded_usage_case() { # bounded_usage_case DESCRIPTION KIND ARGS...
  local what=$1 kind=$2; shift 2
  local s e rc
  s=$(date +%s%N); timeout 5 "$F" "$@" > "$T/out" 2> "$T/err"; rc=$?; e=$(date +%s%N)
  if [ "$rc" = 64 ] && grep -q "$kind, not a regular file" "$T/err" && [ $(( (e - s) / 1000000 )) -lt 2000 ]; then
    ok "usage error exits 64 at once: $what ($(( (e - s) / 1000000 ))ms)"
  else
    nok "usage error exits 64 at once: $what (got $rc after $(( (e - s) / 1000000 ))ms: $(head -c 200 "$T/err"))"
  fi
}
mkfifo "$T/fifo"
mkdir "$T/pwdir"
bounded_usage_case "--password-file naming a FIFO with no writer" "a FIFO (named pipe) or pipe" \
  status --redis "$FENCE_TEST_REDIS_AUTH_URL" --password-file "$T/fifo" x
bounded_usage_case "--sentinel-password-file naming a FIFO with no writer" "a FIFO (named pipe) or pipe" \
  run --redis "redis-sentinel://127.0.0.1:1#m" --sentinel-password-file "$T/fifo" x -- touch "$T/fifo-ran"
check "... and the command never ran" test ! -e "$T/fifo-ran"
bounded_usage_case "--password-file naming a directory" "a directory" \
  run --password-file "$T/pwdir" x -- true
bounded_usage_case "--password-file /dev/null (a device, not an empty password)" "a character device" \
  token --password-file /dev/null x
bounded_usage_case "--password-file <(...) (a pipe: refused too)" "a FIFO (named pipe) or pipe" \
  status --password-file <(printf '%s\n' "$PW") x
ln -s "$T/pw" "$T/pw-link"
"$F" status --password-file "$T/pw-link" --redis "$FENCE_TEST_REDIS_AUTH_URL" "$(name)" > /dev/null 2>&1; rc=$?
check "--password-file through a symlink to a regular file still works" test "$rc" = 0

# ---- a wrong password: 69, and never the secret in the message -------------------------
printf 'WrongSecretFile91\n' > "$T/badpw"
"$F" run --redis "$FENCE_TEST_REDIS_AUTH_URL" --password-file "$T/badpw" "$(name)" -- touch "$T/ran1" 2> "$T/e1"; rc1=$?
FENCE_REDIS_PASSWORD=WrongSecretEnv92 "$F" run --redis "$FENCE_TEST_REDIS_AUTH_URL" "$(name)" -- touch "$T/ran2" 2> "$T/e2"; rc2=$?
"$F" status --json --redis "redis://:WrongSecretUrl93@$AHOST" "$(name)" > "$T/o3" 2> "$T/e3"; rc3=$?
check "wrong password (file): exit 69, a message, nothing ran" \
  bash -c "[ $rc1 = 69 ] && [ -s '$T/e1' ] && [ ! -e '$T/ran1' ]"
check "wrong password (FENCE_REDIS_PASSWORD): exit 69, nothing ran" \
  bash -c "[ $rc2 = 69 ] && [ -s '$T/e2' ] && [ ! -e '$T/ran2' ]"
check "wrong password (URL, status --json): exit 69" test "$rc3" = 69
check "... no message holds the wrong secret" \
  bash -c "! grep -q -e WrongSecretFile91 -e WrongSecretEnv92 -e WrongSecretUrl93 '$T/e1' '$T/e2' '$T/e3' '$T/o3'"
check "... the messages say the credentials were refused" \
  bash -c "grep -qi -e auth -e password -e credential '$T/e1' && grep -qi -e auth -e password -e credential '$T/e2'"

# ---- metrics never hold the password ----------------------------------------------------
"$F" run --redis "redis://:$PW@$AHOST" --metrics-file "$T/m.prom" "$(name)" -- true 2> /dev/null; rc=$?
check "--metrics-file with a password URL: written, no password in it" \
  bash -c "[ $rc = 0 ] && [ -s '$T/m.prom' ] && ! grep -q -F '$PW' '$T/m.prom'"

# ---- TLS options reach the library ---------------------------------------------------------
# (The TLS server itself is tested by tests/lease/test_tls.c.)  A plain
# Redis asked over TLS must fail to connect: 69, not a silent plain-text run.
"$F" status --tls "$(name)" > /dev/null 2> "$T/tls.err"; rc=$?
check "--tls against a plain-text Redis: exit 69" test "$rc" = 69
FENCE_REDIS_CACERT="$T/nope.pem" "$F" status --tls "$(name)" > /dev/null 2> "$T/tls2.err"; rc=$?
check "FENCE_REDIS_CACERT naming a missing file: refused (64 or 69) with a message" \
  bash -c "[ $rc = 64 -o $rc = 69 ] && [ -s '$T/tls2.err' ]"
"$F" status --tls --insecure "$(name)" > /dev/null 2> "$T/tls3.err"; rc=$?
check "--insecure warns loudly" grep -q 'not verified' "$T/tls3.err"

# A TLS Redis of our own (CA and server certificate made here; the server
# also wants a password).
tls_setup() {
  local d=$T/tls
  mkdir -p "$d/cadir" && cd "$d" || return 1
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=fence-test-ca -keyout ca.key -out ca.crt &&
  openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout srv.key -out srv.csr &&
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > ext &&
  openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile ext -out srv.crt &&
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=other-ca -keyout other.key -out other.crt &&
  cp ca.crt cadir/ && openssl rehash cadir
  local rc=$?; cd - > /dev/null; return $rc
}
if ! command -v openssl > /dev/null || ! tls_setup > "$T/tls.log" 2>&1; then
  nok "TLS setup: openssl could not make the certificates: $(tail -n 3 "$T/tls.log")"
else
  TP=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  redis-server --port 0 --bind 127.0.0.1 --tls-port "$TP" --tls-cert-file "$T/tls/srv.crt" \
    --tls-key-file "$T/tls/srv.key" --tls-ca-cert-file "$T/tls/ca.crt" --tls-auth-clients no \
    --requirepass "$PW" --save '' --appendonly no --dir "$T/tls" > "$T/tls/server.log" 2>&1 &
  BG+=("$!"); disown "$!"   # killed on exit, without a "Killed" line
  tls_up() { redis-cli -p "$TP" --tls --cacert "$T/tls/ca.crt" -a "$PW" --no-auth-warning ping 2>/dev/null | grep -q PONG; }
  wait_until 5 tls_up || nok "the TLS Redis started: $(tail -n 3 "$T/tls/server.log")"
  TU=redis://127.0.0.1:$TP
  export FENCE_REDIS_PASSWORD=$PW
  "$F" status --tls --cacert "$T/tls/ca.crt" --redis "$TU" "$(name)" > /dev/null 2> "$T/t1.err"; rc=$?
  check "TLS: --tls --cacert CA: exit 0" test "$rc" = 0 -a ! -s "$T/t1.err"
  FENCE_REDIS_CACERT=$T/tls/ca.crt "$F" status --redis "rediss://127.0.0.1:$TP" "$(name)" > /dev/null 2>&1; rc=$?
  check "TLS: rediss:// with FENCE_REDIS_CACERT: exit 0" test "$rc" = 0
  "$F" token --tls --cacertdir "$T/tls/cadir" --redis "$TU" "$(name)" > /dev/null 2>&1; rc=$?
  check "TLS: --cacertdir (rehashed folder): exit 0" test "$rc" = 0
  "$F" status --tls --cacert "$T/tls/other.crt" --redis "$TU" "$(name)" > /dev/null 2> "$T/t2.err"; rc=$?
  check "TLS: the wrong CA: exit 69, the message says verification failed" \
    bash -c "[ $rc = 69 ] && grep -q -i 'verif' '$T/t2.err'"
  "$F" status --tls --cacert "$T/tls/ca.crt" --sni wrong.example --redis "$TU" "$(name)" > /dev/null 2> "$T/t3.err"; rc=$?
  check "TLS: --sni naming another host: exit 69 (name mismatch)" \
    bash -c "[ $rc = 69 ] && grep -q -i -e mismatch -e name '$T/t3.err'"
  FENCE_REDIS_SNI=localhost "$F" status --tls --cacert "$T/tls/ca.crt" --redis "$TU" "$(name)" > /dev/null 2>&1; rc=$?
  check "TLS: FENCE_REDIS_SNI=localhost (in the certificate): exit 0" test "$rc" = 0
  "$F" status --tls --insecure --redis "$TU" "$(name)" > /dev/null 2> "$T/t4.err"; rc=$?
  check "TLS: --insecure connects without the CA, and says so" \
    bash -c "[ $rc = 0 ] && grep -q 'not verified' '$T/t4.err'"
  n=$(name)
  "$F" run --tls --cacert "$T/tls/ca.crt" --redis "$TU" "$n" -- sh -c "$HOLD" sh "$T/t" 2> "$T/t.err" &
  fp=$!; BG+=("$fp")
  snap "$T/t" "$fp" || nok "the command started (TLS)"
  check "TLS: fence run holds the lease over TLS; no password in either environ" \
    no_secret "$T/t.fenv" "$T/t.cenv" "$T/t.fcmd"
  finish "$T/t" "$fp"
  check "... exit 0" test "$rc" = 0
  unset FENCE_REDIS_PASSWORD
  "$F" status --tls --cacert "$T/tls/ca.crt" --redis "$TU" "$(name)" > /dev/null 2>&1; rc=$?
  check "TLS: without the password: 69" test "$rc" = 69
fi

echo "# $pass passed, $fail failed"
[ "$fail" -eq 0 ]
