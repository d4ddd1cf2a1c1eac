"""_lib.py -- finding fence's shared libraries and declaring, through
ctypes, the C functions and structs the package calls.  Nothing else in
the package names a C symbol or a struct field.

Where a library is looked for, in this order (the first rule that applies
decides; a library it names but cannot load is an error, never a silent
fall-through):

1. $FENCE_LIBDIR: the folder that holds libfence.so.0, libfence_pg.so.0,
   libfence_sqlite.so.0 and fence_sqlite_ext.so -- a build folder
   (build/, build/address) or an installed LIBDIR;
2. the LIBDIR `make install` wrote into fence/_installed.py (an installed
   package only);
3. the build folder next to the sources (python/fence -> build/);
4. the dynamic linker's own search: ctypes.util.find_library (ldconfig's
   cache, which `make install` as root refreshes), then the soname as is
   (LD_LIBRARY_PATH).

The struct layouts below mirror fence.h, fence_common.h; tests/python
checks them field by field against the C compiler's offsetof().
"""
import ctypes
import ctypes.util
import os
import threading

SOVERSION = '0'

try:
    from . import _installed
except ImportError:  # the sources, not an installed package
    _installed = None

_HERE = os.path.dirname(os.path.abspath(__file__))
_BUILD = os.path.join(os.path.dirname(os.path.dirname(_HERE)), 'build')


class LibraryNotFound(OSError):
    """A fence library (or the SQLite extension) cannot be found or
    loaded; the message says where it was looked for."""


def _folders():
    """(where, folder) pairs in the order of the rules above; an explicit
    one (FENCE_LIBDIR) is the only one looked at."""
    env = os.environ.get('FENCE_LIBDIR')
    if env:
        return [('$FENCE_LIBDIR', env)], True
    out = []
    if _installed is not None:
        out.append(('the installed LIBDIR', _installed.LIBDIR))
    elif os.path.isdir(_BUILD):
        out.append(('the build folder', _BUILD))
    return out, False


def find_file(name, installed_sub=''):
    """The path of NAME (e.g. fence_sqlite_ext.so) in the folders above,
    or LibraryNotFound.  installed_sub: its subfolder under an installed
    LIBDIR ('fence' for the SQLite extension)."""
    folders, explicit = _folders()
    tried = []
    for where, d in folders:
        cands = [os.path.join(d, name)]
        if installed_sub and where != 'the build folder':
            cands.insert(0, os.path.join(d, installed_sub, name))
        for p in cands:
            if os.path.exists(p):
                return p
            tried.append(p)
    raise LibraryNotFound('fence: cannot find %s (looked for %s)%s' % (
        name, ', '.join(tried) or 'no folder: not installed, no build folder',
        '' if explicit else '; set FENCE_LIBDIR to the folder that holds it (the build '
        'folder, e.g. build/, or the installed LIBDIR) or run make install'))


def _load(base):
    """Load lib<base>.so.<SOVERSION> by the rules above."""
    soname = 'lib%s.so.%s' % (base, SOVERSION)
    folders, explicit = _folders()
    tried = []
    for where, d in folders:
        p = os.path.join(d, soname)
        if os.path.exists(p):
            try:
                return ctypes.CDLL(p), p
            except OSError as e:
                raise LibraryNotFound('fence: cannot load %s (%s): %s' % (p, where, e)) from None
        tried.append('%s (%s)' % (p, where))
    if not explicit:
        found = ctypes.util.find_library(base)
        for name in ([found] if found else []) + [soname]:
            try:
                return ctypes.CDLL(name), name
            except OSError:
                tried.append('%s (the dynamic linker)' % name)
    raise LibraryNotFound('fence: cannot find %s: tried %s%s' % (
        soname, ', '.join(tried),
        '' if explicit else '; set FENCE_LIBDIR to the folder that holds it (the build '
        'folder, e.g. build/, or the installed LIBDIR), or run make install (as root it '
        'also runs ldconfig)'))


# ---- the structs -------------------------------------------------------------

c_int, c_int64, c_uint64, c_char_p, c_void_p = (
    ctypes.c_int, ctypes.c_int64, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_void_p)

FENCE_NAME_MAX = 512
FENCE_HOLDER_LEN = 32
FENCE_HOLDER_INFO_MAX = 256
FENCE_TOKEN_MAX = 2 ** 63 - 1


class ClientOptions(ctypes.Structure):
    """struct fence_client_options (fence.h)."""
    _fields_ = [
        ('url', c_char_p), ('username', c_char_p), ('password', c_char_p),
        ('connect_timeout_ms', c_int), ('io_timeout_ms', c_int),
        ('prefix', c_char_p),
        ('heartbeat_mode', c_int), ('renew_batch', c_int),
        ('token_mode', c_int), ('token_jump_ms', c_int64),
        ('allow_eviction', c_int),
        ('min_replicas', c_int), ('replica_timeout_ms', c_int64),
        ('tls', c_int), ('tls_ca_file', c_char_p), ('tls_ca_dir', c_char_p),
        ('tls_cert_file', c_char_p), ('tls_key_file', c_char_p),
        ('tls_server_name', c_char_p), ('tls_insecure', c_int),
        ('sentinel_password', c_char_p), ('sentinel_username', c_char_p),
        ('clock_behind_limit_ms', c_int64), ('counter_idle_ms', c_int64),
    ]


LOST_CB = ctypes.CFUNCTYPE(None, c_void_p, c_int, c_void_p)


class LeaseOptions(ctypes.Structure):
    """struct fence_lease_options (fence.h)."""
    _fields_ = [
        ('ttl_ms', c_int64), ('wait_ms', c_int64), ('renew_every_ms', c_int64),
        ('no_heartbeat', c_int), ('on_lost', LOST_CB), ('user', c_void_p),
        ('holder_info', c_char_p),
    ]


class LeaseInfo(ctypes.Structure):
    """struct fence_lease_info (fence.h)."""
    _fields_ = [
        ('held', c_int), ('pttl_ms', c_int64), ('holder_token', c_uint64),
        ('last_token', c_uint64), ('holder', ctypes.c_char * (FENCE_HOLDER_LEN + 1)),
        ('holder_info', ctypes.c_char * (FENCE_HOLDER_INFO_MAX + 1)),
    ]


class StaleInfo(ctypes.Structure):
    """struct fence_stale (fence_common.h)."""
    _fields_ = [
        ('offered', c_uint64), ('highest', c_uint64), ('kind', c_int), ('reason', c_int),
        ('object', ctypes.c_char * (2 * FENCE_NAME_MAX + 8)),
        ('holder', ctypes.c_char * (FENCE_HOLDER_LEN + 1)),
    ]


# The struct names in C, for the layout check.
STRUCTS = {'fence_client_options': ClientOptions, 'fence_lease_options': LeaseOptions,
           'fence_lease_info': LeaseInfo, 'fence_stale': StaleInfo}

# ---- the functions -------------------------------------------------------------

P = ctypes.POINTER
_COMMON = {
    'fence_strerror': (c_char_p, [c_int]),
    'fence_status_name': (c_char_p, [c_int]),
}
_FENCE = dict(_COMMON, **{
    'fence_client_options_init': (None, [P(ClientOptions)]),
    'fence_client_open': (c_int, [P(c_void_p), P(ClientOptions)]),
    'fence_client_close': (None, [c_void_p]),
    'fence_client_errmsg': (c_char_p, [c_void_p]),
    'fence_client_url': (c_char_p, [c_void_p]),
    'fence_lease_options_init': (None, [P(LeaseOptions), c_int64]),
    'fence_acquire': (c_int, [c_void_p, c_char_p, P(LeaseOptions), P(c_void_p)]),
    'fence_renew': (c_int, [c_void_p]),
    'fence_release': (c_int, [c_void_p]),
    'fence_lease_token': (c_uint64, [c_void_p]),
    'fence_lease_holder': (c_char_p, [c_void_p]),
    'fence_lease_lost': (c_int, [c_void_p]),
    'fence_lease_valid_ms': (c_int64, [c_void_p]),
    'fence_lease_reissue': (c_int, [c_void_p, c_uint64, P(c_uint64)]),
    'fence_heartbeat_run': (c_int, [c_void_p, P(c_int64)]),
    'fence_token_raise': (c_int, [c_void_p, c_char_p, c_uint64, P(c_uint64)]),
    'fence_token_last': (c_int, [c_void_p, c_char_p, P(c_uint64)]),
    'fence_lease_inspect_info': (c_int, [c_void_p, c_char_p, P(LeaseInfo)]),
})
_FENCE_PG = dict(_COMMON, **{
    'fence_pg_classify_error': (c_int, [c_char_p, c_char_p, c_char_p, P(StaleInfo)]),
    'fence_pg_errmsg': (c_char_p, [c_void_p]),
})
_FENCE_SQLITE = dict(_COMMON, **{
    'fence_sqlite_classify_error': (c_int, [c_int, c_char_p, P(StaleInfo)]),
    'fence_sqlite_errmsg': (c_char_p, [c_void_p]),
})


class _Library:
    """One loaded library with its functions declared (attributes)."""

    def __init__(self, base, protos):
        self.cdll, self.path = _load(base)
        for name, (res, args) in protos.items():
            fn = getattr(self.cdll, name)
            fn.restype, fn.argtypes = res, args
            setattr(self, name, fn)


_loaded = {}
_lock = threading.Lock()
_PROTOS = {'fence': _FENCE, 'fence_pg': _FENCE_PG, 'fence_sqlite': _FENCE_SQLITE}


def lib(base='fence'):
    """The library lib<base> (fence, fence_pg or fence_sqlite), loaded once."""
    got = _loaded.get(base)
    if got is None:
        with _lock:
            got = _loaded.get(base)
            if got is None:
                got = _loaded[base] = _Library(base, _PROTOS[base])
    return got
