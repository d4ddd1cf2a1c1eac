"""contract_client.py -- a lease client written from docs/contract.md alone,
in redis-py (Debian's python3-redis), loading the scripts `make install`
put in share/fence/redis/.  Not the Python package (python/fence, which
calls libfence): this one speaks Redis itself, so that
tests/contract/test_contract.sh can hold the contract to its word against
the C client.  Everything here follows a sentence of the contract; nothing
was read from lib/lease/.

    c = Client('redis://127.0.0.1:6379', '/usr/local/share/fence/redis')
    lease = c.acquire('job', ttl_ms=10000, info='host=a pid=1')  # or Busy
    c.renew(lease); c.release(lease)
"""
import hashlib
import os
import random
import re
import threading
import time

import redis

MAJOR = 1   # the contract's major version this client was written for
SCRIPTS = ('acquire', 'reissue', 'renew', 'renew_batch', 'release', 'token_raise', 'inspect')
FIRST_LINE = re.compile(rb'^-- fence redis contract (\d+)\.(\d+) \(docs/contract\.md\)$')
TOKEN = re.compile(r'^[1-9][0-9]*$')
TOKEN_MAX = 2 ** 63 - 1


class Error(Exception):
    """A refusal or an answer the contract does not allow."""


class Busy(Error):
    """Held by another holder; pttl: its remaining TTL in ms."""
    def __init__(self, name, pttl):
        Error.__init__(self, 'lease %r is held by another holder (pttl %d ms)' % (name, pttl))
        self.pttl = pttl


class Timeout(Busy):
    pass


class Refused(Error):
    """{2, behind} or {3, mode}: nothing was written."""
    def __init__(self, code, detail):
        Error.__init__(self, 'refused: {%d, %s}' % (code, detail))
        self.code, self.detail = code, detail


def token_of(text):
    """The token grammar: decimal digits, no sign, no leading zero, 1..2^63-1."""
    if not TOKEN.match(text) or int(text) > TOKEN_MAX:
        raise Error('not a token: %r' % text)
    return int(text)


class Lease:
    def __init__(self, name, holder, token, ttl_ms, info, sent):
        self.name, self.holder, self.ttl_ms, self.info = name, holder, ttl_ms, info
        self.token = token
        self.owner = '%s:%d' % (holder, token)   # "<holder>:<token>"
        self.lost = False
        self.behind_us = 0
        self._valid(sent)

    def _valid(self, sent):
        # sent + TTL - (TTL / 100 + 2 ms), counted from when the request was sent
        self.valid_until = sent + (self.ttl_ms - (self.ttl_ms / 100.0 + 2)) / 1000.0

    def valid_ms(self):
        if self.lost:
            return 0
        left = (self.valid_until - time.monotonic()) * 1000.0
        if left <= 0:
            self.lost = True   # lost for good: never renewed again
            return 0
        return int(left)


class Client:
    def __init__(self, url, scripts_dir, prefix='fence:', mode='clock', jump_ms=10000,
                 behind_limit_ms=0, idle_ms=86400000):
        if mode not in ('clock', 'dense'):
            raise ValueError('mode: clock or dense')
        if len(prefix.encode()) > 64 or '{' in prefix or '}' in prefix:
            raise ValueError('prefix: 0..64 bytes, no { or }')
        self.r = redis.Redis.from_url(url, decode_responses=True)
        self.prefix, self.mode = prefix, mode
        self.args = [mode, str(jump_ms * 1000), str(behind_limit_ms * 1000), str(idle_ms)]
        self.body, self.sha = {}, {}
        for s in SCRIPTS:
            with open(os.path.join(scripts_dir, s + '.lua'), 'rb') as f:
                body = f.read()
            m = FIRST_LINE.match(body.split(b'\n', 1)[0])
            if not m or int(m.group(1)) != MAJOR:
                raise Error('%s.lua: not contract %d.x: %r' % (s, MAJOR, body[:60]))
            self.body[s] = body
            self.sha[s] = self.r.script_load(body)   # its reply is the file's SHA1
            if self.sha[s] != hashlib.sha1(body).hexdigest():
                raise Error('%s.lua: SCRIPT LOAD answered %s' % (s, self.sha[s]))

    # ---- keys ----------------------------------------------------------------
    def key(self, name, suffix=''):
        if not 1 <= len(name.encode()) <= 512 or re.search('[\x00-\x1f\x7f]', name):
            raise ValueError('name: 1..512 bytes, no control characters')
        return '%s{%s}%s' % (self.prefix, name, suffix)

    def _eval(self, script, keys, args):
        try:
            return self.r.evalsha(self.sha[script], len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:   # a restarted Redis, SCRIPT FLUSH
            return self.r.eval(self.body[script], len(keys), *keys, *args)

    def _check_eviction(self):
        # before a token: only maxmemory_policy noeviction
        try:
            policy = self.r.info('memory')['maxmemory_policy']
        except (redis.exceptions.RedisError, KeyError) as e:
            raise Error('INFO memory cannot be read: %s' % e)
        if policy != 'noeviction':
            raise Error('maxmemory-policy %s may evict leases: refused' % policy)

    def _granted(self, reply):
        if reply[0] == 2 or reply[0] == 3:
            raise Refused(reply[0], reply[1])
        if reply[0] != 1 or len(reply) not in (2, 3):
            raise Error('unexpected reply %r' % (reply,))
        return token_of(reply[1]), int(reply[2]) if len(reply) == 3 else 0

    # ---- the scripts -----------------------------------------------------------
    def try_acquire(self, name, ttl_ms, info=None):
        """A Lease, or Busy."""
        if info is not None and not re.match('^[\x20-\x7e]{1,256}$', info):
            raise ValueError('info: 1..256 bytes of printable ASCII')
        self._check_eviction()
        holder = os.urandom(16).hex()   # the OS CSPRNG (getrandom)
        keys = [self.key(name), self.key(name, ':token')]
        args = [holder, str(ttl_ms)] + self.args
        if info is not None:
            keys.append(self.key(name, ':info'))
            args.append(info)
        sent = time.monotonic()
        reply = self._eval('acquire', keys, args)
        if reply[0] == 0:
            raise Busy(name, reply[1])
        token, behind = self._granted(reply)
        lease = Lease(name, holder, token, ttl_ms, info, sent)
        lease.behind_us = behind
        return lease

    def renew(self, lease):
        """True renewed; False lost (answered 0, or past its validity)."""
        if lease.valid_ms() <= 0:
            return False
        ttl = -lease.ttl_ms if lease.info is not None else lease.ttl_ms
        sent = time.monotonic()
        if self._eval('renew', [self.key(lease.name)], [lease.owner, str(ttl)]) == 1:
            lease._valid(sent)
            return True
        lease.lost = True
        return False

    def renew_many(self, leases):
        keys = [self.key(l.name) for l in leases]
        args = []
        for l in leases:
            args += [l.owner, str(-l.ttl_ms if l.info is not None else l.ttl_ms)]
        sent = time.monotonic()
        out = self._eval('renew_batch', keys, args)
        for l, ans in zip(leases, out):
            if ans == 1 and l.valid_ms() > 0:
                l._valid(sent)
            else:
                l.lost = True
        return out

    def release(self, lease):
        """True: deleted (and the waiters woken); False: gone or another's."""
        lease.lost = True
        return self._eval('release', [self.key(lease.name)],
                          [lease.owner, self.key(lease.name, ':released')]) == 1

    def reissue(self, lease, floor):
        self._check_eviction()
        reply = self._eval('reissue', [self.key(lease.name), self.key(lease.name, ':token')],
                           [lease.holder, lease.owner] + self.args + [str(floor)])
        if reply[0] == 0:
            lease.lost = True
            raise Error('lease %r: lost before the reissue' % lease.name)
        lease.token, lease.behind_us = self._granted(reply)
        lease.owner = '%s:%d' % (lease.holder, lease.token)
        return lease.token

    def raise_token(self, name, floor):
        return token_of(self._eval('token_raise', [self.key(name, ':token')], [str(floor)]))

    def inspect(self, name):
        """{'held', 'pttl', 'holder', 'token', 'last', 'info'} as fence status reads them."""
        v, pttl, n, info = self._eval('inspect', [self.key(name), self.key(name, ':token'),
                                                  self.key(name, ':info')], [])
        out = {'held': v is not None, 'pttl': pttl, 'holder': None, 'token': 0,
               'last': int(n) if n else 0, 'info': None}
        if v is not None and ':' in v:
            holder, token = v.split(':', 1)
            out['holder'], out['token'] = holder, int(token)
            if info is not None and info.startswith(holder + ':'):
                out['info'] = info[len(holder) + 1:]
        return out

    # ---- waiting -----------------------------------------------------------------
    def acquire(self, name, ttl_ms, wait_ms=0, info=None):
        """try_acquire, waiting up to wait_ms for a release (Timeout then)."""
        if wait_ms <= 0:
            return self.try_acquire(name, ttl_ms, info)
        deadline = time.monotonic() + wait_ms / 1000.0
        ps = self.r.pubsub()   # a connection of its own
        try:
            ps.subscribe(self.key(name, ':released'))
            while True:   # subscribed before the attempt: no release slips between
                m = ps.get_message(timeout=max(0.0, deadline - time.monotonic()))
                if m is not None and m['type'] == 'subscribe':
                    break
                if time.monotonic() >= deadline:
                    raise Timeout(name, -1)
            while True:
                try:
                    return self.try_acquire(name, ttl_ms, info)
                except Busy as e:
                    pttl = e.pttl
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Timeout(name, pttl)
                nap = min(left, 1.0)   # look again at least once a second
                if pttl > 0:
                    nap = min(nap, pttl / 1000.0 + random.uniform(0.0005, 0.003))
                end = time.monotonic() + nap
                while time.monotonic() < end:   # until a message (any payload)
                    m = ps.get_message(timeout=end - time.monotonic())
                    if m is not None and m['type'] == 'message':
                        break
        finally:
            ps.close()


class Heartbeat:
    """Renews leases every TTL/3 on a thread of its own until stop()."""
    def __init__(self, client, lease):
        self.client, self.lease = client, lease
        self.renewals = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.wait(self.lease.ttl_ms / 3000.0):
            if not self.client.renew(self.lease):
                return
            self.renewals += 1

    def stop(self):
        self._stop.set()
        self._t.join()
