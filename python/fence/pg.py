"""fence.pg -- PostgreSQL writes that carry a lease's token, through
psycopg 2 or psycopg 3 (fence.sql in the database: docs/postgres.md).

    with conn, conn.cursor() as cur, fence.pg.refusals():     # psycopg2
        fence.pg.use_token(cur, lease)
        cur.execute('UPDATE accounts SET ... WHERE id = %s', (7,))

use_token(cursor, lease[, resource]) binds lease.token and lease.holder
to the current transaction with fence.use_token() -- the one way fence.sql
admits a token, and only in the transaction that set it -- and, with a
resource, advances it (fence.advance).  A refused write, 23Q01 (a newer
holder has written) or 23Q02 (no valid token), is raised by use_token and
inside refusals() as fence.Stale / fence.NoToken from the driver's
exception, with offered, highest, object, reason and holder parsed by
libfence_pg's classifier (fence_pg_classify_error), the one reader of
fence.sql's DETAIL.  Anything else passes unchanged.  Behind a
transaction-mode pooler (pgbouncer): the statements are never prepared
(psycopg 3: prepare=False), but the caller's own statements are prepared
by psycopg 3 after five runs unless the connection has
prepare_threshold=None.
"""
from . import _lib
from ._errors import EDB, Error
from ._bind import Refusals, StaleInfo, byref, classified, not_in_transaction, token_of

__all__ = ['use_token', 'refused', 'refusals']

_SET = 'SELECT fence.use_token(%s::pg_catalog.int8, %s)'
_SET_ADVANCE = ('SELECT fence.use_token(%s::pg_catalog.int8, %s), '
                'fence.advance(%s, %s::pg_catalog.int8)')


def refused(exc):
    """The fence.Stale (23Q01) or fence.NoToken (23Q02) a psycopg 2 or 3
    exception stands for, or None for any other exception."""
    state = getattr(exc, 'sqlstate', None) or getattr(exc, 'pgcode', None)
    diag = getattr(exc, 'diag', None)
    if not isinstance(state, str) or diag is None:
        return None
    lib = _lib.lib('fence_pg')
    detail, table = diag.message_detail, diag.table_name
    info = StaleInfo()
    st = lib.fence_pg_classify_error(
        state.encode(), detail.encode('utf-8', 'replace') if detail else None,
        table.encode('utf-8', 'replace') if table else None, byref(info))
    message = diag.message_primary or str(exc).strip()
    return classified(lib, st, info, '%s (SQLSTATE %s)' % (message, state))


def refusals():
    """A context manager that raises a refused write (23Q01, 23Q02) as
    fence.Stale / fence.NoToken from the driver's exception."""
    return Refusals(refused)


def _module(obj):
    return type(obj).__module__.split('.')[0]


def _in_transaction(conn, kind):
    """Whether a statement sent now runs in a transaction that outlives it:
    inside a transaction block, or not in autocommit (the driver begins
    one)."""
    if not conn.autocommit:
        return True
    if kind == 'psycopg2':
        return conn.get_transaction_status() != 0   # TRANSACTION_STATUS_IDLE
    return conn.info.transaction_status != 0        # pq.TransactionStatus.IDLE


def use_token(cursor, lease, resource=None):
    """Bind lease's token and holder to the current transaction
    (fence.use_token) and, with resource, advance that resource's mark
    (fence.advance).  cursor: a psycopg2 or psycopg 3 cursor (or a psycopg
    3 connection), in a transaction: not autocommit, or after BEGIN /
    inside conn.transaction().  Call it in every writing transaction, after
    every BEGIN: a token never outlives its transaction.  Raises
    fence.Stale (resource has a newer mark), fence.NoToken (a malformed
    holder or token), fence.Error (FENCE_ESTATE: no transaction would hold
    the token); a driver error otherwise."""
    what = 'fence.pg.use_token'
    token, holder = token_of(what, lease)
    kind = _module(cursor)
    if kind not in ('psycopg', 'psycopg2') or not hasattr(cursor, 'execute'):
        raise TypeError('%s: cursor must be a psycopg2 or psycopg 3 cursor, not %s'
                        % (what, type(cursor).__name__))
    if resource is not None and not isinstance(resource, str):
        raise TypeError('%s: resource must be a str or None, not %s'
                        % (what, type(resource).__name__))
    conn = getattr(cursor, 'connection', cursor)
    if not _in_transaction(conn, kind):
        raise not_in_transaction(what, 'autocommit is on: BEGIN first, or with '
                                 'conn.transaction(): in psycopg 3')
    if resource is None:
        query, params = _SET, (token, holder)
    else:
        query, params = _SET_ADVANCE, (token, holder, resource, token)
    with refusals():
        if kind == 'psycopg':
            cur = cursor.execute(query, params, prepare=False)   # pooler-safe
        else:
            cursor.execute(query, params)
            cur = cursor
        row = cur.fetchone()
    if row is None or row[0] != token:
        raise Error(EDB, '%s: fence.use_token() answered %r for token %d: is fence.sql version 5 '
                    'installed?' % (what, row, token), 'FENCE_EDB')
