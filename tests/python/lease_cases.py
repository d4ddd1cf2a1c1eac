"""lease_cases.py -- fence.Client and fence.Lease against the real Redis of
scripts/with-servers (run by test_py_lease.sh, which says what it proves).
TAP lines on stdout."""
import io
import os
import re
import sys
import threading
import time

from tap import ok, raises, wait_for, redis_ctl, python, need_env, done
import fence

need_env('FENCE_TEST_REDIS_URL', 'FENCE_TEST_REDIS_CTL')
URL = os.environ['FENCE_TEST_REDIS_URL']
TAG = 'py-lease-%d' % os.getpid()
HEX32 = re.compile(r'^[0-9a-f]{32}$')


def name(s):
    return '%s-%s' % (TAG, s)


def key(n):
    return 'fence:{%s}' % n


client = fence.Client(URL)
other = fence.Client(URL)

# ---- a lease: acquire, what it carries, release --------------------------------
n = name('basic')
with client.lease(n, ttl_ms=2000) as lease:
    ok(isinstance(lease.token, int) and lease.token > 0, 'lease.token is an int > 0 (%r)' % lease.token)
    ok(HEX32.match(lease.holder), 'lease.holder is 32 lowercase hex digits (%s)' % lease.holder)
    v = lease.valid_ms()
    ok(0 < v <= 2000, 'lease.valid_ms() is within the TTL (%d ms)' % v)
    ok(lease.lost is False and lease.lost_reason is None, 'a held lease is not lost')
    info = client.inspect(n)
    ok(info.held and info.holder_token == lease.token and info.holder == lease.holder,
       'client.inspect() sees it held by this token and holder (%r)' % info)
    first = lease.token
ok(not client.inspect(n).held, 'the end of the with block released it (the key is gone)')
ok(lease.valid_ms() == 0 and lease.token == first, 'after release: valid_ms() 0, token still readable')
lease.release()
ok(True, 'releasing again does nothing')
with client.lease(n, 2000) as l2:
    ok(l2.token > first, 'the next acquisition has a higher token (%d > %d)' % (l2.token, first))
ok(client.last_token(n) == l2.token, 'client.last_token() is the last token issued')
raised = client.raise_token(n, l2.token + 1000)
with client.lease(n, 2000) as l3:
    ok(l3.token > l2.token + 1000 and raised >= l2.token + 1000,
       'raise_token(floor): the next token is above the floor')

# ---- busy, timeout, a waiter woken by the release ------------------------------
n = name('busy')
held = client.lease(n, 5000)
raises(fence.Busy, lambda: other.lease(n, 5000), 'a held name raises fence.Busy',
       lambda e: e.status == 6 and e.status_name == 'FENCE_BUSY' and n in e.message)
t0 = time.monotonic()
raises(fence.Timeout, lambda: other.lease(n, 5000, wait_ms=150),
       'still held when wait_ms runs out: fence.Timeout (a subclass of fence.Busy)',
       lambda e: isinstance(e, fence.Busy) and e.status_name == 'FENCE_TIMEOUT')
ok(0.14 <= time.monotonic() - t0 < 2, '... after about wait_ms (%.2f s)' % (time.monotonic() - t0))
got = {}


def waiter():
    t = time.monotonic()
    with other.lease(n, 5000, wait_ms=5000) as w:
        got['token'], got['secs'] = w.token, time.monotonic() - t


th = threading.Thread(target=waiter)
th.start()
time.sleep(0.2)
ticks = 0
t = time.monotonic()
while time.monotonic() - t < 0.1:      # this thread runs while the waiter blocks in C
    ticks += 1
held.release()
th.join(5)
ok(got.get('token', 0) > held.token and got['secs'] < 2,
   'a waiter on another thread is woken by the release and gets a higher token (%r)' % got)
ok(ticks > 1000, 'a call waiting in C lets other Python threads run (the GIL is released: %d '
   'loop turns in 0.1 s)' % ticks)

# ---- the lost callback -----------------------------------------------------------
n = name('lost-del')
seen = []
done_evt = threading.Event()


def on_lost(lease):
    seen.append((lease, threading.current_thread() is threading.main_thread(), lease.lost,
                 lease.lost_reason))
    done_evt.set()


lease = client.lease(n, ttl_ms=300, on_lost=on_lost)
redis_ctl('cli', 'del', key(n))
done_evt.wait(3)
ok(len(seen) == 1 and seen[0][0] is lease,
   'key deleted: on_lost(lease) is called once, with the lease (%d calls)' % len(seen))
ok(seen and seen[0][1] is False, '... on the heartbeat thread, not the main thread')
ok(seen and seen[0][2] is True and seen[0][3] == 'FENCE_LOST',
   '... the lease already reads lost, lost_reason FENCE_LOST (%r)' % (seen[0][2:] if seen else None,))
time.sleep(0.4)
ok(len(seen) == 1, 'on_lost is not called again')
raises(fence.Lost, lease.release, 'releasing a lost lease raises fence.Lost',
       lambda e: e.status_name == 'FENCE_LOST')

n = name('lost-exit')


def block():
    with client.lease(n, ttl_ms=300):
        redis_ctl('cli', 'del', key(n))
        wait_for(lambda: False, 0.6)


raises(fence.Lost, block, 'a lease lost inside its with block: leaving the block raises fence.Lost')


class Boom(Exception):
    pass


def block2():
    with client.lease(n, ttl_ms=300):
        redis_ctl('cli', 'del', key(n))
        time.sleep(0.6)
        raise Boom('the block\'s own error')


raises(Boom, block2, '... but never hides the block\'s own exception')

# A callback that raises: reported on stderr, nothing reaches C, the
# client goes on.  One that releases its lease and uses the client.
n = name('lost-raise')
calls = []


def bad(lease):
    calls.append(1)
    raise RuntimeError('raised in on_lost on purpose')


lease = client.lease(n, ttl_ms=300, on_lost=bad)
real_stderr, sys.stderr = sys.stderr, io.StringIO()
try:
    redis_ctl('cli', 'del', key(n))
    wait_for(lambda: calls, 3)
    # The heartbeat thread prints the traceback after the call: wait for
    # its last line, not a while (a sanitizer build takes its time).
    wait_for(lambda: 'RuntimeError: raised in on_lost on purpose' in sys.stderr.getvalue(), 5)
    time.sleep(0.1)
finally:
    said, sys.stderr = sys.stderr.getvalue(), real_stderr
ok(calls == [1], 'an on_lost that raises is called once; its exception goes no further')
ok(said.startswith("fence: the on_lost callback of lease '%s' raised" % n)
   and 'RuntimeError: raised in on_lost on purpose' in said,
   '... it is printed on stderr with its traceback (%r)' % said[:90])
with client.lease(name('after-raise'), 1000) as l4:
    ok(l4.token > 0, '... and the client works on')

n = name('lost-release')
res = {}


def releasing(lease):
    try:
        lease.release()
    except fence.Lost as e:
        res['release'] = e.status_name
    res['token'] = client.last_token(n)
    try:
        client.close()
    except fence.Error as e:
        res['close'] = e.status_name


lease = client.lease(n, ttl_ms=300, on_lost=releasing)
redis_ctl('cli', 'del', key(n))
wait_for(lambda: 'close' in res, 3)
ok(res.get('release') == 'FENCE_LOST' and res.get('token') == lease.token,
   'on_lost may release its lease and call the client (%r)' % res)
ok(res.get('close') == 'FENCE_ESTATE' and not client.closed,
   '... but client.close() from it is refused (it would wait for its own thread), client open')

# Redis stopped: lost on time, reason FENCE_ECONN.
n = name('lost-stop')
seen.clear()
done_evt.clear()
lease = client.lease(n, ttl_ms=400, on_lost=on_lost)
t0 = time.monotonic()
redis_ctl('stop')
try:
    done_evt.wait(5)
    secs = time.monotonic() - t0
finally:
    redis_ctl('start')
ok(len(seen) == 1 and seen[0][3] == 'FENCE_ECONN',
   'Redis stopped: on_lost once, lost_reason FENCE_ECONN (%r)' % ([s[3] for s in seen],))
ok(seen and secs < 1.5, '... within the lease\'s validity plus a little (%.2f s at TTL 0.4 s)' % secs)
try:
    lease.release()
except fence.Error:
    pass
ok(wait_for(lambda: redis_ctl('cli', 'ping') == 'PONG', 5), 'Redis is back')

# ---- 1,000 leases on one client ---------------------------------------------------
many = fence.Client(URL)
lost = []
t0 = time.monotonic()
leases = [many.lease(name('many-%d' % i), ttl_ms=600, on_lost=lambda l: lost.append(l.name))
          for i in range(1000)]
took = time.monotonic() - t0
ok(len({l.token for l in leases}) == 1000, '1,000 leases acquired on one client, 1,000 '
   'distinct tokens (%.1f s)' % took)
time.sleep(2.0)   # more than three TTLs: the heartbeat renews them all
ok(not lost and all(l.valid_ms() > 0 for l in leases),
   '... all still held after 2 s at TTL 600 ms, renewed by the C heartbeat (%d lost)' % len(lost))
sample = leases[::25]
ok(all(i.held and i.holder_token == l.token for i, l in ((other.inspect(l.name), l) for l in sample)),
   '... and Redis says so: another client sees each of %d sampled names held by its token'
   % len(sample))
for l in leases[:500]:
    l.release()
ok(not any(other.inspect(l.name).held for l in leases[:500:50]), '... 500 released one by one')
many.close()
ok(all(not other.inspect(l.name).held for l in leases[500::50]) and all(l.valid_ms() == 0 for l in leases),
   '... the other 500 released by client.close()')
ok(not lost, '... and none of them reported lost')

# ---- many threads on one client ---------------------------------------------------
n = name('threads')
inside, errors, order = [0], [], []
mu = threading.Lock()


def worker():
    for _ in range(40):
        try:
            with client.lease(n, 5000, wait_ms=5000) as l:
                with mu:
                    inside[0] += 1
                    if inside[0] != 1:
                        errors.append('two holders at once')
                    order.append(l.token)
                time.sleep(0.0005)
                with mu:
                    inside[0] -= 1
        except fence.Error as e:
            errors.append(repr(e))


ths = [threading.Thread(target=worker) for _ in range(8)]
for t in ths:
    t.start()
for t in ths:
    t.join(60)
ok(not errors and len(order) == 320, '8 threads x 40 on one client and one name: one holder at a '
   'time, no error (%d cycles, %s)' % (len(order), errors[:2]))
ok(order == sorted(order) and len(set(order)) == len(order),
   '... tokens strictly increasing in the order the holders held it')

# ---- bad arguments get clear errors ---------------------------------------------
raises(TypeError, lambda: fence.Client(6379), 'Client(6379): TypeError (url must be a str)')
raises(TypeError, lambda: fence.Client(URL, connect_timeout_ms='2000'),
       'an option of the wrong type: TypeError naming it', lambda e: 'connect_timeout_ms' in str(e))
raises(TypeError, lambda: fence.Client(URL, tls=1), 'a yes/no option given 1: TypeError')
raises(ValueError, lambda: fence.Client(URL, connect_timeout_ms=2 ** 40),
       'a value a C int cannot hold: ValueError', lambda e: 'out of range' in str(e))
raises(ValueError, lambda: fence.Client(URL, token_mode='sparse'),
       'token_mode not clock/dense: ValueError naming the words', lambda e: "'dense'" in str(e))
raises(TypeError, lambda: fence.Client(URL, ttl=5), 'an unknown option: TypeError listing the options',
       lambda e: "'ttl'" in str(e) and 'io_timeout_ms' in str(e))
raises(fence.InvalidArgument, lambda: fence.Client(URL, connect_timeout_ms=-5),
       'a value libfence refuses: fence.InvalidArgument (a ValueError) with its message',
       lambda e: isinstance(e, ValueError) and e.status_name == 'FENCE_EINVAL')
raises(fence.InvalidArgument, lambda: fence.Client('http://127.0.0.1:6379'),
       'a malformed URL: fence.InvalidArgument')
raises(ValueError, lambda: fence.Client('redis://127.0.0.1\0:6379'), 'a NUL in the URL: ValueError')
raises(fence.Error, lambda: fence.Client('redis://:s3cret-pw@127.0.0.1:1', connect_timeout_ms=300),
       'a closed port: fence.Error FENCE_ECONN, and the message holds no password',
       lambda e: e.status_name == 'FENCE_ECONN' and 's3cret' not in str(e))
raises(TypeError, lambda: client.lease(None, 1000), 'lease(None): TypeError')
raises(fence.InvalidArgument, lambda: client.lease('', 1000), "lease(''): fence.InvalidArgument")
raises(fence.InvalidArgument, lambda: client.lease('x' * 513, 1000),
       'a name over 512 bytes: fence.InvalidArgument')
raises(ValueError, lambda: client.lease('a\0b', 1000), 'a NUL in the name: ValueError')
raises(fence.InvalidArgument, lambda: client.lease(name('ttl'), 5),
       'ttl_ms 5 (< 10): fence.InvalidArgument with the range', lambda e: '10' in e.message)
raises(TypeError, lambda: client.lease(name('ttl'), '1000'), "ttl_ms '1000': TypeError")
raises(TypeError, lambda: client.lease(name('ttl'), 1000.0), 'ttl_ms 1000.0: TypeError')
raises(ValueError, lambda: client.lease(name('ttl'), 2 ** 70), 'ttl_ms 2**70: ValueError')
raises(fence.InvalidArgument, lambda: client.lease(name('w'), 1000, wait_ms=-1),
       'wait_ms -1: fence.InvalidArgument')
raises(TypeError, lambda: client.lease(name('cb'), 1000, on_lost=5), 'on_lost=5: TypeError')
raises(fence.InvalidArgument, lambda: client.lease(name('hi'), 1000, holder_info='a\nb'),
       'holder_info with a control character: fence.InvalidArgument')
raises(ValueError, lambda: client.raise_token(name('r'), -1), 'raise_token(name, -1): ValueError')
raises(TypeError, lambda: client.lease(name('hb'), 1000, heartbeat=1), 'heartbeat=1: TypeError')
ok(not any(client.inspect(name(s)).held for s in ('ttl', 'w', 'cb', 'hi', 'hb')),
   'no refused call left a lease behind')

# ---- manual heartbeat, renew, reissue -------------------------------------------
with fence.Client(URL, heartbeat_mode='manual') as man:
    l = man.lease(name('manual'), ttl_ms=300)
    for _ in range(6):
        nxt = man.heartbeat()
        time.sleep(0.1)
    ok(not l.lost and 0 <= nxt <= 300, "heartbeat_mode='manual': client.heartbeat() keeps it "
       '(next in %d ms)' % nxt)
    l.renew()
    new = l.reissue(l.token + 10 ** 6)
    ok(new == l.token and new > 10 ** 6, 'lease.renew(), and lease.reissue(highest) gives a token above it')
    l.release()
raises(fence.Error, lambda: client.heartbeat(), "heartbeat() with the heartbeat thread: "
       'fence.Error FENCE_ESTATE', lambda e: e.status_name == 'FENCE_ESTATE')

# ---- closed clients, fork, exit with a lease held, the library not found ----------
c2 = fence.Client(URL)
l = c2.lease(name('closed'), 5000)
c2.close()
c2.close()
ok(not other.inspect(name('closed')).held and l.valid_ms() == 0,
   'close() releases what is held; closing twice is fine')
raises(fence.Error, lambda: c2.lease(name('closed'), 1000), 'a call on a closed client: '
       'fence.Error FENCE_ESTATE', lambda e: e.status_name == 'FENCE_ESTATE')
l.release()

with fence.Client(URL) as c3:
    l = c3.lease(name('fork'), 5000)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            c3.lease(name('fork-child'), 1000)
            msg = 'no error'
        except fence.Error as e:
            msg = '%s %s' % (e.status_name, 'fork' in e.message)
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    msg = os.read(r, 200).decode()
    os.waitpid(pid, 0)
    ok(msg == 'FENCE_ESTATE True', 'in a child after fork(): the client refuses, saying why (%s)' % msg)
    ok(l.valid_ms() > 0 and not l.lost, '... and the parent\'s lease is still held')

n = name('exit')
rc, out, err = python('''
import os, sys, threading, time, fence
c = fence.Client(os.environ['FENCE_TEST_REDIS_URL'])
started = threading.Event()
def slow(lease):
    started.set()
    time.sleep(0.3)
    print('callback ended', flush=True)
a = c.lease(sys.argv[1] + '-a', 5000)
b = c.lease(sys.argv[1] + '-b', 300, on_lost=slow)
os.system(os.environ['FENCE_TEST_REDIS_CTL'] + ' cli del "fence:{%s-b}" >/dev/null' % sys.argv[1])
started.wait(3)
print('exiting', flush=True)
''', n)
ok(rc == 0 and not err, 'an interpreter that exits holding a lease (and with an on_lost running) '
   'exits cleanly (exit %d, stderr %r)' % (rc, err[:200]))
ok(out.split('\n') == ['exiting', 'callback ended'],
   '... after the running callback ended (%r)' % out)
ok(not other.inspect(n + '-a').held, '... and its lease was released at exit')

env = dict(os.environ, FENCE_LIBDIR='/nonexistent/fence-lib')
rc, out, err = python('import fence\ntry:\n    fence.Client("redis://127.0.0.1:1")\n'
                      'except fence.LibraryNotFound as e:\n    print(e)\n', env=env)
ok(rc == 0 and '/nonexistent/fence-lib/libfence.so.0' in out and 'FENCE_LIBDIR' in out,
   'libfence not found: fence.LibraryNotFound names where it looked (%s)' % out)

client.close()
other.close()
done()
