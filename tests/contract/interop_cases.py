"""interop_cases.py -- the contract client (contract_client.py, redis-py,
the installed scripts) against the C client (libfence, through the
installed Python package `fence`, and the installed `fence` command) on the
real Redis of scripts/with-servers.  Run by test_contract.sh with
FENCE_CONTRACT_SCRIPTS (share/fence/redis of a staged install) and
FENCE_CONTRACT_BIN (its fence); TAP lines."""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from tap import ok, raises, wait_for, need_env, done
import fence                       # the C client: libfence through ctypes
import contract_client as cc       # the client written from docs/contract.md

need_env('FENCE_TEST_REDIS_URL', 'FENCE_CONTRACT_SCRIPTS', 'FENCE_CONTRACT_BIN')
URL = os.environ['FENCE_TEST_REDIS_URL']
SCRIPTS = os.environ['FENCE_CONTRACT_SCRIPTS']
FENCE = os.environ['FENCE_CONTRACT_BIN']
TAG = 'contract-%d' % os.getpid()
# A woken waiter has the lease this soon after the release (s).  Each
# release comes 0.3 s after the waiter's first attempt, and both clients'
# waiters look again only a second after an attempt (at a 10 s TTL), so a
# lease taken within WAKE came from the release message.
WAKE = 0.4
TMP = tempfile.mkdtemp()


def name(s):
    return '%s-%s' % (TAG, s)


def run(*args, timeout=20):
    p = subprocess.run([FENCE] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def fence_run(n, *cmd, opts=()):
    """fence run --url URL [opts] n -- cmd: (exit, stdout, stderr)."""
    return run('run', '--url', URL, *opts, n, '--', *cmd)


def fence_run_bg(n, ttl, shell):
    """fence run --ttl ttl n -- sh -c shell, in the background; OUT in shell
    names a file of this run's: (the process, that file's path)."""
    fd, path = tempfile.mkstemp(dir=TMP)
    os.close(fd)
    proc = subprocess.Popen([FENCE, 'run', '--url', URL, '--ttl', ttl, n, '--', 'sh', '-c',
                             shell.replace('OUT', path)])
    return proc, path


def words(path):
    with open(path) as f:
        return f.read().split()


def status(n):
    rc, out, err = run('status', '--url', URL, n)
    fields = dict(l.split(':', 1) for l in out.splitlines() if ':' in l)
    return rc, {k.strip(): v.strip() for k, v in fields.items()}, err


def subscribers(channel):
    return dict(raw.pubsub_numsub(channel)).get(channel, 0)


def rising(tokens):
    return all(a < b for a, b in zip(tokens, tokens[1:]))


# ---- the installed files are the C client's scripts --------------------------
raw = __import__('redis').Redis.from_url(URL, decode_responses=True)
raw.script_flush()
shas = {}
for s in cc.SCRIPTS:
    with open(os.path.join(SCRIPTS, s + '.lua'), 'rb') as f:
        shas[s] = hashlib.sha1(f.read()).hexdigest()
with fence.Client(URL) as c0:        # the C client alone, after SCRIPT FLUSH
    with c0.lease(name('sha'), 1000):
        pass
    c0.inspect(name('sha'))
    known = raw.script_exists(*shas.values())
ok(all(known), 'after SCRIPT FLUSH and the C client alone: SCRIPT EXISTS knows the SHA1 of every '
   'installed script (%s)' % ', '.join('%s %s' % (s, k) for s, k in zip(shas, known)))

PY = cc.Client(URL, SCRIPTS)
C = fence.Client(URL)
ok(True, 'the contract client loads the installed scripts (first line contract 1.x, SHA1 = '
   'SCRIPT LOAD)')
bad = tempfile.mkdtemp()
try:
    for s in cc.SCRIPTS:
        shutil.copy(os.path.join(SCRIPTS, s + '.lua'), bad)
    with open(os.path.join(bad, 'release.lua'), 'r+b') as f:
        body = f.read().replace(b'contract 1.0', b'contract 2.0', 1)
        f.seek(0)
        f.write(body)
    raises(cc.Error, lambda: cc.Client(URL, bad), 'a script whose first line says contract 2.0 is '
           'refused by a client written for 1', lambda e: 'release.lua' in str(e))
finally:
    shutil.rmtree(bad)

# The page and the files agree: its version is each file's first line, and
# it has a section for each installed script and for no other.
with open('docs/contract.md') as f:
    page = f.read()
version = re.search(r'\*\*Contract version (\d+\.\d+)\*\*', page)
firsts = set()
for s in cc.SCRIPTS:
    with open(os.path.join(SCRIPTS, s + '.lua')) as f:
        firsts.add(f.readline().rstrip('\n'))
ok(version and firsts == {'-- fence redis contract %s (docs/contract.md)' % version.group(1)}
   and min(firsts) in page, 'docs/contract.md says contract %s, the first line of every installed '
   'script' % (version and version.group(1)))
sections = re.findall(r'^### `(\w+)\.lua`', page, re.M)
installed = sorted(f[:-len('.lua')] for f in os.listdir(SCRIPTS))
ok(sorted(sections) == installed == sorted(cc.SCRIPTS),
   'docs/contract.md has a section for each installed script and no other (%s)' % ', '.join(sections))

# ---- tokens rise across both -------------------------------------------------
n = name('rise')
tokens, who = [], []
for i in range(8):
    with C.lease(n, 2000) as l:
        tokens.append(l.token)
        who.append('C')
    p = PY.try_acquire(n, 2000)
    tokens.append(p.token)
    who.append('py')
    ok(PY.release(p), 'contract client: release of its own lease answers 1 (round %d)' % i)
    rc, out, err = fence_run(n, 'sh', '-c', 'echo $FENCE_TOKEN')
    tokens.append(int(out.strip() or 0) if rc == 0 else 0)
    who.append('run')
ok(rising(tokens), 'clock tokens rise across the C client, the contract client and fence run, '
   'interleaved (%d acquisitions: %s)'
   % (len(tokens), ' '.join('%s:%d' % x for x in zip(who, tokens))))
ok(C.last_token(n) == tokens[-1] == PY.inspect(n)['last'],
   'each reads the last token the other issued (%d)' % tokens[-1])

n = name('dense')
CD = fence.Client(URL, token_mode='dense')
PD = cc.Client(URL, SCRIPTS, mode='dense')
dense = []
for i in range(5):
    with CD.lease(n, 2000) as l:
        dense.append(l.token)
    p = PD.try_acquire(n, 2000)
    dense.append(p.token)
    PD.release(p)
ok(dense == list(range(1, 11)),
   'dense tokens across both: 1..10, each one above the other\'s (%s)' % dense)
raises(cc.Refused, lambda: PY.try_acquire(n, 2000), 'a clock contract client on the dense counter: '
       '{3, mode}, nothing written', lambda e: e.code == 3 and e.detail == 'dense')
n2 = name('dense-py')
p = PD.try_acquire(n2, 2000)
PD.release(p)
raises(fence.Error, lambda: C.lease(n2, 2000), 'a clock C client on a counter the dense '
       'contract client wrote: FENCE_ECONFIG', lambda e: e.status_name == 'FENCE_ECONFIG')
ok(PY.inspect(n2)['last'] == 1 and not PY.inspect(n2)['held'],
   '... and it wrote nothing (n still 1, free)')

n = name('raise')
with C.lease(n, 2000) as l:
    first = l.token
floor = first + 10 ** 9
ok(PY.raise_token(n, floor) == floor,
   'contract client raises the counter (token_raise.lua answers the floor)')
with C.lease(n, 2000) as l:
    ok(l.token > floor,
       'the C client\'s next token is above its floor (%d > %d)' % (l.token, floor))
big = 2 ** 60
C.raise_token(n, big)
p = PY.try_acquire(n, 2000)
ok(p.token == big + 1 and p.owner == '%s:%d' % (p.holder, big + 1),
   'after the C client raised to 2^60, the contract client gets exactly 2^60 + 1 (%d)' % p.token)
PY.release(p)
with C.lease(n, 2000) as l:
    ok(l.token == big + 2, 'and the C client 2^60 + 2, exact past 2^53 (%d)' % l.token)
p = PY.try_acquire(n, 2000)
new = PY.reissue(p, big + 100)
ok(new > big + 100 and p.owner == '%s:%d' % (p.holder, new) and C.inspect(n).holder_token == new,
   'reissue.lua: a token above the floor, the owner key "<holder>:<new token>" for the C client '
   'too (%d)' % new)
ok(PY.renew(p) and PY.release(p), '... renewed and released by the new owner value')
with C.lease(n, 2000) as l:
    ok(l.token > new, 'the C client\'s next token is above it (%d)' % l.token)

# ---- a flushed script cache; a retried acquire ------------------------------
n = name('noscript')
raw.script_flush()
p = PY.try_acquire(n, 2000)
ok(p.token > 0, 'after SCRIPT FLUSH the contract client acquires (NOSCRIPT, then EVAL)')
again = PY._eval('acquire', [PY.key(n), PY.key(n, ':token')], [p.holder, '2000'] + PY.args)
ok(again == [1, str(p.token)] and C.last_token(n) == p.token,
   'acquire.lua sent again with the same holder: {1, its token} (%r), nothing issued' % again)
PY.release(p)
raw.script_flush()
with C.lease(n, 2000) as l:
    ok(l.token > p.token, 'after SCRIPT FLUSH the C client acquires too, the token above')

# ---- each sees the other's lease as busy -------------------------------------
n = name('busy')
with C.lease(n, 5000) as l:
    try:
        PY.try_acquire(n, 5000)
        ok(False, 'contract client acquired a name the C client holds')
    except cc.Busy as e:
        ok(0 < e.pttl <= 5000,
           'the C client holds it: the contract client gets {0, pttl} (%d ms)' % e.pttl)
    ok(PY.inspect(n)['holder'] == l.holder and PY.inspect(n)['token'] == l.token,
       'inspect.lua shows the C lease\'s "<holder>:<token>"')
p = PY.try_acquire(n, 5000)
raises(fence.Busy, lambda: C.lease(n, 5000),
       'the contract client holds it: the C client gets FENCE_BUSY')
rc, out, err = fence_run(n, 'true')
ok(rc == 75, 'fence run exits 75 on the contract client\'s lease (exit %d: %s)' % (rc, err.strip()))
ok(PY.inspect(n)['token'] == p.token, '... and neither touched it')
PY.release(p)

# ---- renewals by each --------------------------------------------------------
n = name('renew-c')
with C.lease(n, 300) as l:
    seen = set()
    end = time.monotonic() + 1.2
    busy = True
    while time.monotonic() < end:
        try:
            PY.try_acquire(n, 300)
            busy = False
        except cc.Busy:
            pass
        seen.add(PY.inspect(n)['holder'])
        time.sleep(0.05)
    ok(busy and seen == {l.holder} and not l.lost,
       'the C heartbeat keeps a 300 ms lease for 4 TTLs: busy for the contract client every 50 ms')
n = name('renew-py')
p = PY.try_acquire(n, 300, info='host=contract pid=%d' % os.getpid())
hb = cc.Heartbeat(PY, p)
end = time.monotonic() + 1.2
busy = True
while time.monotonic() < end:
    try:
        C.lease(n, 300).release()
        busy = False
    except fence.Busy:
        pass
    time.sleep(0.05)
rc, st, err = status(n)
hb.stop()
ok(busy and hb.renewals >= 8 and not p.lost,
   'the contract client renews (renew.lua, %d renewals) a 300 ms lease for 4 TTLs: busy for the '
   'C client' % hb.renewals)
ok(st.get('holder_info') == 'host=contract pid=%d' % os.getpid(),
   '... and its description with it (negative TTL): fence status shows it after 4 TTLs (%r)'
   % st.get('holder_info'))
ok(PY.release(p), '... released')
a, b = name('batch-a'), name('batch-b')
pa, pb = PY.try_acquire(a, 300, info='batch'), PY.try_acquire(b, 300)
end = time.monotonic() + 1.0
answers = []
while time.monotonic() < end:
    answers += PY.renew_many([pa, pb])
    time.sleep(0.1)
ia, ib = C.inspect(a), C.inspect(b)
ok(set(answers) == {1} and ia.holder == pa.holder and ib.holder == pb.holder
   and ia.holder_info == 'batch',
   'renew_batch.lua keeps two leases (one with a description) past 3 TTLs: the C client sees '
   'both held')
PY.release(pa)
PY.release(pb)

# ---- a release wakes the other's waiter --------------------------------------


def waiter(fn):
    """Run fn() on a thread; returns (thread, box): box['t'] the monotonic time it returned."""
    box = {}

    def go():
        try:
            box['v'] = fn()
        except BaseException as e:
            box['e'] = e
        box['t'] = time.monotonic()
    th = threading.Thread(target=go)
    th.start()
    return th, box


def woken(n, wait, release, clock=time.monotonic):
    """wait() on a thread until it subscribed to n's channel, 0.3 s more,
    then release(): (subscribed, what wait() returned, its time, the
    release's time on clock)."""
    th, box = waiter(wait)
    subscribed = wait_for(lambda: subscribers('fence:{%s}:released' % n) >= 1, 3)
    time.sleep(0.3)
    t0 = clock()
    release()
    th.join(8)
    return subscribed, box.get('v'), box.get('t', t0), t0


n = name('wake-c')
p = PY.try_acquire(n, 10000)
subscribed, got, t, t0 = woken(n, lambda: C.lease(n, 5000, wait_ms=5000), lambda: PY.release(p))
ok(subscribed and got is not None and t - t0 < WAKE,
   'the C client\'s waiting acquire (subscribed to its channel) has the lease %.0f ms after the '
   'contract client\'s release (TTL 10 s)' % ((t - t0) * 1000))
if got is not None:
    got.release()

n = name('wake-run')
p = PY.try_acquire(n, 10000)
subscribed, got, t, t0 = woken(n, lambda: fence_run(n, 'date', '+%s.%N', opts=('--wait', '5s')),
                               lambda: PY.release(p), clock=time.time)   # date's clock
rc, out, err = got or (-1, '', '')
started = float(out.strip() or 0)
ok(subscribed and rc == 0 and 0 < started - t0 < WAKE,
   'fence run --wait 5s runs its command %.0f ms after the contract client\'s release (exit %d)'
   % ((started - t0) * 1000, rc))

n = name('wake-py')
l = C.lease(n, 10000)
subscribed, got, t, t0 = woken(n, lambda: PY.acquire(n, 5000, wait_ms=5000), l.release)
ok(subscribed and got is not None and t - t0 < WAKE and got.token > l.token,
   'the contract client\'s pub/sub waiter has the lease %.0f ms after the C client\'s release '
   '(TTL 10 s)' % ((t - t0) * 1000))
if got is not None:
    PY.release(got)

n = name('wake-py-run')
proc, out = fence_run_bg(n, '10s', 'echo $FENCE_TOKEN > OUT; sleep 0.3')
held = wait_for(lambda: PY.inspect(n)['held'], 3)
th, box = waiter(lambda: PY.acquire(n, 5000, wait_ms=5000))
subscribed = wait_for(lambda: subscribers('fence:{%s}:released' % n) >= 1, 3)
proc.wait(10)
t_end = time.monotonic()
th.join(6)
got = box.get('v')
run_token = int((words(out) + ['0'])[0])
ok(held and subscribed and proc.returncode == 0 and got is not None and box['t'] - t_end < WAKE
   and got.token > run_token,
   'the contract client\'s waiter has the lease %.0f ms after fence run (TTL 10 s) ended (it '
   'releases, then exits), its token above fence run\'s' % ((box.get('t', t_end) - t_end) * 1000))
if got is not None:
    PY.release(got)

# ---- loss: the other takes an expired lease ----------------------------------
n = name('lost-c')
CM = fence.Client(URL, heartbeat_mode='manual')      # a C holder that is not renewed (paused)
lost_at = []
l = CM.lease(n, 300, on_lost=lambda lease: lost_at.append(time.monotonic()))
p = PY.acquire(n, 5000, wait_ms=3000)                 # waits for the expiry
t_py = time.monotonic()
ok(l.valid_ms() == 0 and p.token > l.token,
   'the contract client takes the expired C lease with a higher token (%d > %d); the C lease\'s '
   'validity had ended' % (p.token, l.token))
raises(fence.Lost, l.renew, 'the C client\'s renewal then: fence.Lost')
ok(len(lost_at) == 1, 'on_lost called once')
try:
    l.release()
except fence.Lost:
    pass
ok(PY.inspect(n)['holder'] == p.holder and PY.renew(p),
   'the C release of its lost lease left the contract client\'s untouched (still held, renewed)')
PY.release(p)
CM.close()

n = name('lost-py')
p = PY.try_acquire(n, 300)
l = C.lease(n, 5000, wait_ms=3000)                    # the C waiter takes it after the expiry
ok(p.valid_ms() == 0, 'the contract client\'s lease, not renewed, is past its validity when the C '
   'client takes it (token %d > %d)' % (l.token, p.token))
ok(l.token > p.token and not PY.renew(p) and p.lost, 'its renewal is refused (lost)')
p.lost, p.valid_until = False, time.monotonic() + 1   # as if it still counted itself valid
ok(not PY.renew(p) and not PY.release(p),
   'renew.lua and release.lua with its owner value answer 0 while the C client holds the name')
ok(C.inspect(n).holder == l.holder and l.valid_ms() > 0, '... and the C lease is untouched')
l.release()

# ---- fence status shows the contract client's lease --------------------------
n = name('status')
info = 'host=contract pid=%d since=2026-12-07T00:00:00Z' % os.getpid()
p = PY.try_acquire(n, 10000, info=info)
rc, st, err = status(n)
ok(rc == 0 and st.get('state') == 'held' and st.get('holder') == p.holder and
   st.get('holder_token') == str(p.token) and st.get('holder_info') == info and
   st.get('last_token') == str(p.token) and 0 < int(st.get('ttl_ms', 0)) <= 10000,
   'fence status: held, holder, holder_token, holder_info, last_token, ttl_ms of the contract '
   'client\'s lease (%s)' % ', '.join('%s=%s' % kv for kv in st.items() if kv[0] != 'redis'))
rc, out, err = run('status', '--url', URL, '--json', n)
j = json.loads(out) if rc == 0 else {}
ok(j.get('state') == 'held' and j.get('held') is True and j.get('holder') == p.holder and
   j.get('holder_token') == p.token and j.get('holder_info') == info
   and j.get('last_token') == p.token,
   'fence status --json: the same (%s)' % out.strip())
PY.release(p)
rc, st, err = status(n)
ok(st.get('state') == 'free' and 'holder' not in st, 'after its release: free, no holder')
p = PY.try_acquire(n, 10000)
rc, out, err = run('status', '--url', URL, '--json', n)
j = json.loads(out) if rc == 0 else {}
ok(j.get('holder') == p.holder and j.get('holder_info') is None,
   'a contract lease without a description: holder shown, holder_info null (the previous '
   'lease\'s description went with its release)')
PY.release(p)

n = name('status-run')
proc, out = fence_run_bg(n, '5s', 'echo $FENCE_HOLDER $FENCE_TOKEN > OUT; sleep 1')
seen = wait_for(lambda: words(out) and PY.inspect(n), 3)
holder, token = (words(out) + ['', ''])[:2]
proc.wait(10)
ok(seen and seen['holder'] == holder and str(seen['token']) == token and
   (seen['info'] or '').startswith('host=') and ' pid=%d ' % proc.pid in seen['info'] + ' ',
   'the contract client reads fence run\'s lease: its FENCE_HOLDER, FENCE_TOKEN and description '
   '(%r)' % seen)

# ---- the eviction check ------------------------------------------------------
n = name('evict')
raw.config_set('maxmemory-policy', 'allkeys-lru')
try:
    raises(cc.Error, lambda: PY.try_acquire(n, 1000), 'maxmemory-policy allkeys-lru: the contract '
           'client issues no token', lambda e: 'allkeys-lru' in str(e))
    with fence.Client(URL) as ce:
        raises(fence.Error, lambda: ce.lease(n, 1000),
               '... nor does a new C client (FENCE_ECONFIG)',
               lambda e: e.status_name == 'FENCE_ECONFIG')
    ok(PY.inspect(n)['last'] == 0, '... and the counter was never written')
finally:
    raw.config_set('maxmemory-policy', 'noeviction')

C.close()
CD.close()
shutil.rmtree(TMP)
done()
