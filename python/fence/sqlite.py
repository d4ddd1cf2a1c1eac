"""fence.sqlite -- SQLite writes that carry a lease's token, through
Python's sqlite3 module and fence's loadable extension (docs/sqlite.md).

    conn = sqlite3.connect(path, isolation_level=None)   # we say BEGIN
    fence.sqlite.load_extension(conn)
    with fence.sqlite.transaction(conn, lease, resource='transfer'):
        conn.execute('UPDATE accounts SET ... WHERE id = ?', (7,))

transaction(conn, lease[, resource]) is one fenced write transaction:
BEGIN IMMEDIATE (the write lock first, docs/sqlite.md), the token and
holder bound (fence_set_token), the resource advanced, the block, COMMIT;
on any exception ROLLBACK (a refused write never keeps the lock); the
token ends with the transaction (the extension's rule: a token serves one
write transaction).  use_token(conn, lease) is the binding alone,
inside a transaction the caller opened.  A refused write ("fence:stale",
"fence:notoken") is raised as fence.Stale / fence.NoToken from the
sqlite3 exception, parsed by libfence_sqlite's classifier
(fence_sqlite_classify_error), the one reader of the extension's
messages.
"""
import sqlite3

from . import _lib
from ._bind import Refusals, StaleInfo, byref, classified, not_in_transaction, token_of

__all__ = ['extension_path', 'load_extension', 'use_token', 'transaction', 'refused',
           'refusals']

_SQLITE_ERROR, _SQLITE_CONSTRAINT = 1, 19


def extension_path():
    """The file of fence's SQLite extension (fence_sqlite_ext.so), found as
    the libraries are (fence._lib: $FENCE_LIBDIR, the installed LIBDIR/fence,
    the build folder); fence.LibraryNotFound when it is not there.  After
    make install, `pkg-config --variable=extension fence_sqlite` prints the
    same path."""
    return _lib.find_file('fence_sqlite_ext.so', installed_sub='fence')


def load_extension(conn, path=None):
    """Load fence's extension (path, else extension_path()) into conn and
    switch extension loading off again."""
    if not isinstance(conn, sqlite3.Connection):
        raise TypeError('fence.sqlite.load_extension: conn must be a sqlite3.Connection, not %s'
                        % type(conn).__name__)
    conn.enable_load_extension(True)
    try:
        conn.load_extension(path or extension_path())
    finally:
        conn.enable_load_extension(False)


def refused(exc):
    """The fence.Stale ("fence:stale ...") or fence.NoToken ("fence:notoken
    ...") a sqlite3 exception stands for, or None for any other."""
    if not isinstance(exc, sqlite3.Error):
        return None
    code = getattr(exc, 'sqlite_errorcode', None)
    if code is None:   # Python before 3.11 does not say: the primary code its class means
        code = _SQLITE_CONSTRAINT if isinstance(exc, sqlite3.IntegrityError) else _SQLITE_ERROR
    lib = _lib.lib('fence_sqlite')
    msg = str(exc)
    info = StaleInfo()
    st = lib.fence_sqlite_classify_error(code, msg.encode('utf-8', 'replace'), byref(info))
    return classified(lib, st, info, msg)


def refusals():
    """A context manager that raises a refused write as fence.Stale /
    fence.NoToken from the sqlite3 exception."""
    return Refusals(refused)


def _check_conn(what, conn):
    if not isinstance(conn, sqlite3.Connection):
        raise TypeError('%s: conn must be a sqlite3.Connection, not %s'
                        % (what, type(conn).__name__))


def use_token(conn, lease):
    """Set the token and holder conn's writes carry (fence_set_token),
    inside the transaction the caller opened (BEGIN IMMEDIATE): call it in
    every writing transaction.  Raises fence.NoToken for a malformed
    holder, fence.Error (FENCE_ESTATE) outside a transaction."""
    what = 'fence.sqlite.use_token'
    _check_conn(what, conn)
    token, holder = token_of(what, lease)
    if not conn.in_transaction:
        raise not_in_transaction(what, 'BEGIN IMMEDIATE first, or use fence.sqlite.transaction()')
    with refusals():
        conn.execute('SELECT fence_set_token(?, ?)', (token, holder))


class transaction:
    """with fence.sqlite.transaction(conn, lease[, resource]): one fenced
    write transaction (see the module's text).  conn must have no
    transaction open (isolation_level=None is the mode this is for)."""

    def __init__(self, conn, lease, resource=None):
        what = 'fence.sqlite.transaction'
        _check_conn(what, conn)
        self._token = token_of(what, lease)
        if resource is not None and not isinstance(resource, str):
            raise TypeError('%s: resource must be a str or None, not %s'
                            % (what, type(resource).__name__))
        self._conn, self._resource = conn, resource

    def __enter__(self):
        conn = self._conn
        with refusals():
            conn.execute('BEGIN IMMEDIATE')
            try:
                conn.execute('SELECT fence_set_token(?, ?)', self._token)
                if self._resource is not None:
                    conn.execute('INSERT INTO fence_advance(resource) VALUES (?)',
                                 (self._resource,))
            except BaseException:
                self._end('ROLLBACK')
                raise
        return conn

    def _end(self, sql):
        conn = self._conn
        try:
            if conn.in_transaction:
                conn.execute(sql)
        finally:
            if conn.in_transaction:      # a failed COMMIT: give the lock back
                conn.execute('ROLLBACK')

    def __exit__(self, exc_type, exc, tb):
        with refusals():
            if exc_type is not None:
                try:
                    self._end('ROLLBACK')
                except sqlite3.Error:
                    pass            # the block's own exception says more
                err = refused(exc)
                if err is not None:
                    raise err from exc
                return False
            self._end('COMMIT')
        return False
