"""fence -- distributed locks that stay safe when the holder pauses: Redis
leases that carry a fencing token, from Python, over libfence (ctypes,
the standard library only).

    import fence
    with fence.Client('redis://127.0.0.1:6379') as client:
        with client.lease('invoice-job', ttl_ms=10000) as lease:
            ...   # attach lease.token (and lease.holder) to every write

The stores check the token: fence.pg.use_token(cursor, lease) for
PostgreSQL (psycopg 2 and 3), fence.sqlite.use_token(conn, lease) for
SQLite; a refused write is raised as fence.Stale.  The whole page:
docs/python.md.  Where the libraries are found: fence._lib (FENCE_LIBDIR).
"""
from ._errors import Error, InvalidArgument, Busy, Timeout, Lost, Stale, NoToken
from ._client import Client, Lease, LeaseInfo
from ._lib import LibraryNotFound, FENCE_TOKEN_MAX, FENCE_NAME_MAX

__all__ = ['Client', 'Lease', 'LeaseInfo', 'Error', 'InvalidArgument', 'Busy', 'Timeout',
           'Lost', 'Stale', 'NoToken', 'LibraryNotFound', 'FENCE_TOKEN_MAX', 'FENCE_NAME_MAX',
           'library_path']
__version__ = '0.2.0'


def library_path(name='fence'):
    """The file libfence (or 'fence_pg', 'fence_sqlite') was loaded from."""
    from . import _lib
    return _lib.lib(name).path
