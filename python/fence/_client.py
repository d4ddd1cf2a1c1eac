"""_client.py -- fence.Client and fence.Lease: Redis leases with fencing
tokens, over libfence (fence.h) through ctypes.

Threads, as the C client: a Client may be shared by any number of threads
(every blocking call releases the GIL, so they run at once); a Lease
belongs to the Client that acquired it.  On top of C's rule, nothing here
can touch a freed handle: a Lease's accessors, renew() and release() are
serialised by the lease's lock, and close() waits for the calls in flight
on other threads (an acquire that waits waits that long) and then frees
every lease still open on the client, releasing them in Redis.

Ownership: a Client is open until close() (or the end of its with block,
or the interpreter's exit, when every open client is closed); a Lease is
held until release() (or the end of its with block, or its client's
close()).  Neither is closed by the garbage collector: the collector may
run on the heartbeat thread, which must never wait for itself.

on_lost(lease) runs on libfence's heartbeat thread (or in the thread
calling lease.renew() / client.heartbeat()), with the GIL taken by ctypes.
It may use the lease and the client except client.close(); an exception
it raises is printed to stderr and goes no further (there is no caller to
raise it into).  One trampoline for the whole package (_ON_LOST, never
freed) finds the Lease by a number passed as the callback's user pointer,
so no callback object can be collected while C may still call it.
"""
import atexit
import itertools
import os
import sys
import threading
import traceback
import ctypes

from . import _lib
from ._errors import Error, ESTATE, LOST, OK, from_status

# ---- arguments -------------------------------------------------------------------

_I64_MIN, _I64_MAX = -2 ** 63, 2 ** 63 - 1
_INT_RANGE = {_lib.c_int: (-2 ** 31, 2 ** 31 - 1), _lib.c_int64: (-2 ** 63, 2 ** 63 - 1),
              _lib.c_uint64: (0, 2 ** 64 - 1)}
# Option fields that are a yes/no or one of a few words in Python, and how
# each maps onto the C int.  Every other field is a str (char *) or an int.
_BOOLS = {'allow_eviction', 'tls', 'tls_insecure'}
_ENUMS = {'heartbeat_mode': {'thread': 0, 'manual': 1}, 'token_mode': {'clock': 0, 'dense': 1}}
_OPTION_TYPES = {name: t for name, t in _lib.ClientOptions._fields_ if name != 'url'}


def _text(what, value, none_ok=True):
    """A str argument as UTF-8 bytes for C (None: NULL)."""
    if value is None and none_ok:
        return None
    if not isinstance(value, str):
        raise TypeError('%s must be a str%s, not %s' % (what, ' or None' if none_ok else '',
                                                       type(value).__name__))
    if '\0' in value:
        raise ValueError('%s must not contain a NUL character' % what)
    return value.encode('utf-8')


def _int(what, value, ctype):
    """An int argument that fits ctype (bools refused: say what you mean)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError('%s must be an int, not %s' % (what, type(value).__name__))
    lo, hi = _INT_RANGE[ctype]
    if not lo <= value <= hi:
        raise ValueError('%s is out of range: %d (at most %d)' % (what, value, hi)
                         if value > hi else '%s is out of range: %d (at least %d)'
                         % (what, value, lo))
    return value


def _option(name, value):
    """One keyword of Client() as the value of its C field."""
    if name in _BOOLS:
        if not isinstance(value, bool):
            raise TypeError('option %s must be True or False, not %r' % (name, value))
        return int(value)
    if name in _ENUMS:
        words = _ENUMS[name]
        if value not in words:
            raise ValueError('option %s must be one of %s, not %r'
                             % (name, ', '.join(repr(w) for w in words), value))
        return words[value]
    ctype = _OPTION_TYPES[name]
    if ctype is _lib.c_char_p:
        return _text('option ' + name, value)
    return _int('option ' + name, value, ctype)


def _closed_error(why):
    return Error(ESTATE, why, 'FENCE_ESTATE')


# ---- the lost callback -----------------------------------------------------------

_targets = {}                 # user number -> Lease with an on_lost
_numbers = itertools.count(1)
_tls = threading.local()      # .client: the client whose on_lost runs in this thread
_exiting = False


def _on_lost(lease_ptr, reason, user):
    """The one C callback (LOST_CB): find the Lease, run its on_lost.
    Never lets an exception out into C."""
    try:
        lease = None if _exiting else _targets.get(user)
        if lease is not None:
            lease._lost(reason)
    except BaseException:  # pragma: no cover -- a bug here must not reach C
        try:
            traceback.print_exc()
        except BaseException:
            pass


_ON_LOST = _lib.LOST_CB(_on_lost)

# ---- the client ------------------------------------------------------------------

_open = set()                 # every open Client (closed at exit)
_open_lock = threading.Lock()


class Client:
    """A connection to one Redis (or Sentinel set, or Cluster) through
    libfence: fence.Client(url, **options).  options are the fields of
    fence_client_options by name (fence.h documents each and its default):
    username, password, connect_timeout_ms, io_timeout_ms, prefix,
    heartbeat_mode ('thread' or 'manual'), renew_batch, token_mode
    ('clock' or 'dense'), token_jump_ms, allow_eviction, min_replicas,
    replica_timeout_ms, tls, tls_ca_file, tls_ca_dir, tls_cert_file,
    tls_key_file, tls_server_name, tls_insecure, sentinel_password,
    sentinel_username, clock_behind_limit_ms, counter_idle_ms.  An unknown
    option is a TypeError, a value of the wrong type a TypeError, one C
    cannot hold a ValueError, one libfence refuses fence.InvalidArgument;
    a server that cannot be reached raises fence.Error (FENCE_ECONN)."""

    def __init__(self, url, **options):
        self._lib = lib = _lib.lib('fence')
        opts = _lib.ClientOptions()
        lib.fence_client_options_init(ctypes.byref(opts))
        opts.url = _text('url', url, none_ok=False)
        for name, value in options.items():
            if name not in _OPTION_TYPES:
                raise TypeError('fence.Client() got an unexpected option %r (the options: %s)'
                                % (name, ', '.join(sorted(_OPTION_TYPES))))
            if value is not None:
                setattr(opts, name, _option(name, value))
        self._manual = opts.heartbeat_mode == 1
        h = ctypes.c_void_p()
        st = lib.fence_client_open(ctypes.byref(h), ctypes.byref(opts))
        if st != OK:
            err = from_status(lib, st, self._errmsg(h.value))
            lib.fence_client_close(h.value)
            raise err
        self._h = h.value
        self._mu = threading.Lock()     # _h, _busy, _closing, _leases
        self._busy = 0            # calls in flight on self._h
        self._closing = False
        self._idle = threading.Event()  # set when closing and _busy is 0
        self._closed = threading.Event()
        self._why_closed = 'fence.Client: the client is closed'
        self._leases = {}         # id(Lease) -> Lease: the leases held on it
        self.url = lib.fence_client_url(self._h).decode('utf-8', 'replace')
        with _open_lock:
            _open.add(self)

    def __repr__(self):
        return '<fence.Client %s%s>' % (self.url, ' closed' if self._h is None else '')

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def closed(self):
        return self._h is None

    def _errmsg(self, h=None):
        return self._lib.fence_client_errmsg(self._h if h is None else h).decode(
            'utf-8', 'replace')

    # A call on the handle: _enter() before, _leave() after, so that
    # close() waits for it.
    def _enter(self):
        with self._mu:
            if self._h is None or self._closing:
                raise _closed_error(self._why_closed)
            self._busy += 1
            return self._h

    def _leave(self):
        with self._mu:
            self._busy -= 1
            if self._closing and self._busy == 0:
                self._idle.set()

    def _fail(self, st, what=''):
        msg = self._errmsg()
        return from_status(self._lib, st, (what + ': ' + msg if what and msg else what or msg))

    def close(self):
        """Release every lease still held on this client (best effort, as
        fence_client_close), stop its heartbeat thread, close its
        connections.  Waits for calls in flight on other threads.  Closing
        again is a no-op; from an on_lost callback of this client it is an
        error (the close would wait for the callback's own thread)."""
        if getattr(_tls, 'client', None) is self:
            raise _closed_error('fence.Client.close() called from an on_lost callback of the '
                                'same client: it would wait for its own thread')
        with self._mu:
            if self._h is None:
                return
            other = self._closing
            self._closing = True
            if not self._busy:
                self._idle.set()
        if other:              # another thread closes it: wait for that
            self._closed.wait()
            return
        self._idle.wait()
        with self._mu:
            h, leases = self._h, list(self._leases.values())
        for lease in leases:
            lease._forget()
        self._lib.fence_client_close(h)   # waits for a callback that runs
        for lease in leases:
            _targets.pop(lease._user, None)
        with self._mu:
            self._h = None
            self._leases.clear()
        self._closed.set()
        with _open_lock:
            _open.discard(self)

    def _forked(self):
        """In a child after fork(): the C client did not survive it (no
        heartbeat thread); never call it again, never free it."""
        self._why_closed = ('fence.Client: opened before fork(); a client does not survive '
                            'fork(): open a new one in the child')
        for lease in list(self._leases.values()):
            lease._forget(ask=False)
        self._h = None
        self._mu = threading.Lock()   # (new locks: the parent's may have been held)
        self._idle, self._closed = threading.Event(), threading.Event()
        self._closed.set()
        self._busy, self._closing = 0, False
        self._leases.clear()

    def lease(self, name, ttl_ms, *, wait_ms=0, on_lost=None, renew_every_ms=0,
              heartbeat=True, holder_info=None):
        """Acquire the lease NAME (fence_acquire) and return it as a
        fence.Lease, a context manager that releases it at the end.
        ttl_ms: its time-to-live (10 ms .. 7 days); wait_ms: how long to
        wait while another owner holds it (0: try once); on_lost(lease):
        called once if it is lost; renew_every_ms: the renewal period
        (default ttl/3); heartbeat=False: renewed only by lease.renew();
        holder_info: who holds it, shown by `fence status`.
        Raises fence.Busy (held, wait_ms 0), fence.Timeout (still held when
        wait_ms ran out), fence.InvalidArgument, or another fence.Error."""
        lib = self._lib
        if type(name) is str and '\0' not in name:
            bname = name.encode('utf-8')
        else:
            bname = _text('name', name, none_ok=False)   # raises the right error
        if not (type(ttl_ms) is int and type(wait_ms) is int and type(renew_every_ms) is int
                and _I64_MIN <= ttl_ms <= _I64_MAX and _I64_MIN <= wait_ms <= _I64_MAX
                and _I64_MIN <= renew_every_ms <= _I64_MAX):
            for what, v in (('ttl_ms', ttl_ms), ('wait_ms', wait_ms),
                            ('renew_every_ms', renew_every_ms)):
                _int(what, v, _lib.c_int64)   # raises the right error
        if not isinstance(heartbeat, bool):
            raise TypeError('heartbeat must be True or False, not %r' % (heartbeat,))
        # What fence_lease_options_init(&o, ttl_ms) makes (zeroes, then the
        # TTL: tests/python checks it byte for byte), in one step.
        opts = _lib.LeaseOptions(ttl_ms, wait_ms, renew_every_ms, 0 if heartbeat else 1)
        if holder_info is not None:
            opts.holder_info = _text('holder_info', holder_info)
        if on_lost is not None and not callable(on_lost):
            raise TypeError('on_lost must be callable or None, not %s' % type(on_lost).__name__)
        lease = Lease(self, name, on_lost)
        if on_lost is not None:
            opts.on_lost = _ON_LOST
            opts.user = lease._user
            _targets[lease._user] = lease
        out = ctypes.c_void_p()
        st = -1
        mu = self._mu
        with mu:                # _enter(), inline: this is the hot path
            h = self._h
            if h is None or self._closing:
                _targets.pop(lease._user, None)
                raise _closed_error(self._why_closed)
            self._busy += 1
        try:
            # With an on_lost, a loss reported at once waits for the handle
            # (the lease's lock); without one nothing else can see the lease.
            if on_lost is not None:
                lease._lock.acquire()
            try:
                st = lib.fence_acquire(h, bname, ctypes.byref(opts), ctypes.byref(out))
                if st != OK:
                    raise self._fail(st)
                lh = lease._h = out.value
                lease.token = lib.fence_lease_token(lh)
                lease.holder = lib.fence_lease_holder(lh).decode('ascii')
            finally:
                if on_lost is not None:
                    lease._lock.release()
        except BaseException:
            _targets.pop(lease._user, None)
            raise
        finally:
            with mu:            # _leave(), and the lease joins the client's
                if st == OK:
                    self._leases[id(lease)] = lease
                self._busy -= 1
                if self._closing and self._busy == 0:
                    self._idle.set()
        return lease

    def _call(self, fn, *args):
        """fn(handle, *args) on this client, raising its failure; the
        calling thread counts as inside a callback of this client meanwhile
        (fn may run on_lost: fence_heartbeat_run)."""
        h = self._enter()
        prev = getattr(_tls, 'client', None)
        _tls.client = self
        try:
            st = fn(h, *args)
            if st != OK:
                raise self._fail(st)
        finally:
            _tls.client = prev
            self._leave()

    def last_token(self, name):
        """The last token issued for NAME (0 if none), without acquiring."""
        out = _lib.c_uint64()
        self._call(self._lib.fence_token_last, _text('name', name, none_ok=False),
                   ctypes.byref(out))
        return out.value

    def raise_token(self, name, floor):
        """Raise NAME's counter to at least floor (never lowers it), so the
        next token is > floor; returns the counter."""
        out = _lib.c_uint64()
        self._call(self._lib.fence_token_raise, _text('name', name, none_ok=False),
                   _int('floor', floor, _lib.c_uint64), ctypes.byref(out))
        return out.value

    def inspect(self, name):
        """Who holds NAME (fence_lease_inspect_info), as a LeaseInfo."""
        info = _lib.LeaseInfo()
        self._call(self._lib.fence_lease_inspect_info, _text('name', name, none_ok=False),
                   ctypes.byref(info))
        return LeaseInfo(info)

    def heartbeat(self):
        """heartbeat_mode='manual': renew every lease that is due, now, in
        one round trip (fence_heartbeat_run); returns the milliseconds
        until the next renewal is due (-1: none held)."""
        nxt = _lib.c_int64()
        self._call(self._lib.fence_heartbeat_run, ctypes.byref(nxt))
        return nxt.value


class LeaseInfo:
    """What client.inspect() read: held, ttl_ms (-1 when free),
    holder_token (0 when free), last_token, holder ('' when free),
    holder_info ('' when none)."""
    __slots__ = ('held', 'ttl_ms', 'holder_token', 'last_token', 'holder', 'holder_info')

    def __init__(self, c):
        self.held, self.ttl_ms = bool(c.held), c.pttl_ms
        self.holder_token, self.last_token = c.holder_token, c.last_token
        self.holder = c.holder.decode('ascii', 'replace')
        self.holder_info = c.holder_info.decode('ascii', 'replace')

    def __repr__(self):
        return '<fence.LeaseInfo %s>' % ' '.join('%s=%r' % (k, getattr(self, k))
                                                 for k in self.__slots__)


class Lease:
    """A held lease (client.lease() returns it).  token: its fencing token
    (int, attach it to every write); holder: its holder id (32 lowercase
    hex digits); name; lost, lost_reason; valid_ms().  A context manager:
    the end of the block releases it."""

    __slots__ = ('_client', '_h', '_lock', '_user', '_on_lost', '_lost_reason', '_was_lost',
                 'name', 'token', 'holder', '__weakref__')

    def __init__(self, client, name, on_lost):
        self._client = client
        self._h = None
        self._lock = threading.RLock()
        self._user = next(_numbers)
        self._on_lost = on_lost
        self._lost_reason = None
        self._was_lost = False
        self.name, self.token, self.holder = name, 0, ''

    def __repr__(self):
        return '<fence.Lease %r token=%d%s>' % (
            self.name, self.token, ' lost' if self.lost else ' released' if self._h is None
            else '')

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.release()
        else:
            try:
                self.release()
            except Error:
                pass   # the block's own exception says more

    @property
    def client(self):
        return self._client

    @property
    def lost(self):
        """True once the lease is lost (renewal refused, or its validity
        ran out unrenewed)."""
        with self._lock:
            h = self._h
            if h is not None:
                return bool(self._client._lib.fence_lease_lost(h))
            return self._was_lost or self._lost_reason is not None

    @property
    def lost_reason(self):
        """'FENCE_LOST' (renewal refused) or 'FENCE_ECONN' (Redis could not
        be reached until the validity ran out), as on_lost was told; None
        when not lost or when no on_lost was given."""
        r = self._lost_reason
        return None if r is None else self._client._lib.fence_status_name(r).decode()

    def valid_ms(self):
        """Milliseconds the lease is still surely held (0 when lost or
        released)."""
        with self._lock:
            h = self._h
            return self._client._lib.fence_lease_valid_ms(h) if h is not None else 0

    def _handle(self):
        h = self._h
        if h is None:
            raise _closed_error('fence.Lease: lease %r is no longer held here (released, or '
                                'its client closed)' % self.name)
        return h

    def renew(self):
        """Renew now (fence_renew); fence.Lost when it is lost."""
        c = self._client
        c._enter()
        try:
            with self._lock:
                _tls.client = c
                try:
                    st = c._lib.fence_renew(self._handle())
                finally:
                    _tls.client = None
                if st != OK:
                    raise c._fail(st, 'renew lease %r' % self.name)
        finally:
            c._leave()

    def reissue(self, store_highest):
        """A store refused this holder's write because it has seen
        store_highest although the lease is still held (the counter fell
        behind the store; fence.Stale's highest): raise the counter past it
        and take a fresh token (fence_lease_reissue).  Returns the new
        token (also self.token)."""
        highest = _int('store_highest', store_highest, _lib.c_uint64)
        c = self._client
        out = _lib.c_uint64()
        c._enter()
        try:
            with self._lock:
                st = c._lib.fence_lease_reissue(self._handle(), highest, ctypes.byref(out))
                if st != OK:
                    raise c._fail(st, 'reissue lease %r' % self.name)
                self.token = out.value
        finally:
            c._leave()
        return self.token

    def release(self):
        """Release the lease (compare-and-delete; waiters are woken).
        Raises fence.Lost when it had been lost already, another
        fence.Error when Redis could not be told (the key then expires by
        its TTL); either way it is no longer held.  Releasing again, or
        after the client closed, does nothing."""
        c = self._client
        mu = c._mu
        with mu:                # c._enter(), inline: this is the hot path
            if c._h is None or c._closing:
                return          # closed or closing: close() releases it
            c._busy += 1
        st, h = OK, None
        try:
            with self._lock:
                h, self._h = self._h, None
            if h is not None:
                st = c._lib.fence_release(h)   # waits for its on_lost if it runs
                if st == LOST:
                    self._was_lost = True
                _targets.pop(self._user, None)
                if st != OK:
                    raise c._fail(st)
        finally:
            with mu:            # c._leave()
                if h is not None:
                    c._leases.pop(id(self), None)
                c._busy -= 1
                if c._closing and c._busy == 0:
                    c._idle.set()

    def _forget(self, ask=True):
        """Its client closes (or, ask False, did not survive a fork: no C
        call then, a lock of the parent's threads may be held): drop the
        handle."""
        if not ask:
            self._h = None   # nor a lock: another thread of the parent may hold it
            self._lock = threading.RLock()
            return
        with self._lock:
            h, self._h = self._h, None
            if h is not None and ask:
                self._was_lost = self._was_lost or bool(self._client._lib.fence_lease_lost(h))

    def _lost(self, reason):
        """From the trampoline, with the GIL: note the loss, run on_lost."""
        self._lost_reason = reason
        fn = self._on_lost
        if fn is None:
            return
        prev = getattr(_tls, 'client', None)
        _tls.client = self._client
        try:
            fn(self)
        except BaseException:
            try:
                sys.stderr.write('fence: the on_lost callback of lease %r raised (ignored: it '
                                 'runs on the heartbeat thread, there is no caller to raise '
                                 'into):\n' % self.name)
                traceback.print_exc()
            except BaseException:
                pass
        finally:
            _tls.client = prev


# ---- exit and fork -----------------------------------------------------------------

def _close_all():
    """At interpreter exit, while it is still whole: close every open
    client (its leases are released, its heartbeat thread stopped), so that
    no C thread calls into an interpreter being torn down."""
    global _exiting
    with _open_lock:
        clients = list(_open)
    for c in clients:
        try:
            c.close()
        except BaseException:
            pass
    _exiting = True


def _after_fork():
    with _open_lock:
        clients = list(_open)
        _open.clear()
    _targets.clear()
    for c in clients:
        c._forked()


atexit.register(_close_all)
os.register_at_fork(after_in_child=_after_fork)
