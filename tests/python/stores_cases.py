"""stores_cases.py -- fence.pg (psycopg2, psycopg 3, direct and behind
pgbouncer) and fence.sqlite (Python's sqlite3 and the extension) against
real servers, and the paused-holder race with SIGSTOP (run by
test_py_stores.sh, which says what it proves and makes the databases).
TAP lines on stdout."""
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time

import psycopg
import psycopg2

from tap import ok, raises, need_env, done
import fence
import fence.pg
import fence.sqlite

need_env('FENCE_TEST_REDIS_URL', 'FENCE_TEST_PG_CONNINFO', 'FENCE_TEST_PGBOUNCER_PORT',
         'FENCE_TEST_PGBOUNCER_TX_USER', 'FENCE_PY_DB', 'FENCE_PY_SQLITE')
URL = os.environ['FENCE_TEST_REDIS_URL']
DB = os.environ['FENCE_PY_DB']
DIRECT = '%s dbname=%s' % (os.environ['FENCE_TEST_PG_CONNINFO'], DB)
BOUNCER = 'host=127.0.0.1 port=%s user=%s dbname=%s' % (
    os.environ['FENCE_TEST_PGBOUNCER_PORT'], os.environ['FENCE_TEST_PGBOUNCER_TX_USER'], DB)
SQLITE = os.environ['FENCE_PY_SQLITE']
TAG = 'py-stores-%d' % os.getpid()
client = fence.Client(URL)


def two_leases(name):
    """An older lease (released) and a newer one (held) of NAME."""
    old = client.lease(name, 5000)
    old.release()
    return old, client.lease(name, 5000)


class Bad:
    """A lease-like object with any token and holder."""

    def __init__(self, token, holder=None):
        self.token, self.holder = token, holder


def pg_row(id_):
    with psycopg2.connect(DIRECT) as c, c.cursor() as cur:
        cur.execute('SELECT balance, fence_token FROM accounts WHERE id = %s', (id_,))
        return cur.fetchone()


# ---- PostgreSQL: the same cases through each driver, direct and pooled -------
def connect(driver, dsn):
    if driver == 'psycopg2':
        return psycopg2.connect(dsn)
    # Behind a transaction-mode pooler psycopg 3 must not prepare the
    # caller's statements (docs/python.md).
    return psycopg.connect(dsn, prepare_threshold=None)


def write(driver, conn, lease, id_, value, resource=None):
    """One fenced transaction: use_token, UPDATE row id_; refusals raised
    as fence.Stale; rolled back on any error."""
    if driver == 'psycopg2':
        try:
            with conn, conn.cursor() as cur, fence.pg.refusals():
                fence.pg.use_token(cur, lease, resource)
                cur.execute('UPDATE accounts SET balance = %s WHERE id = %s', (value, id_))
        finally:
            conn.rollback()
    else:
        with conn.transaction(), conn.cursor() as cur, fence.pg.refusals():
            fence.pg.use_token(cur, lease, resource)
            cur.execute('UPDATE accounts SET balance = %s WHERE id = %s', (value, id_))


row = 1
for driver in ('psycopg2', 'psycopg'):
    for where, dsn in (('direct', DIRECT), ('pgbouncer (transaction mode)', BOUNCER)):
        tag = '%s %s' % (driver, where)
        conn = connect(driver, dsn)
        if driver == 'psycopg':
            conn.autocommit = True
        old, new = two_leases('%s-pg-%d' % (TAG, row))
        write(driver, conn, new, row, 10)
        ok(pg_row(row) == (10, new.token), '%s: use_token + UPDATE lands, the row stamped with the '
           'token (%r)' % (tag, pg_row(row)))
        raises(fence.Stale, lambda: write(driver, conn, old, row, 666),
               '%s: an older lease\'s write is refused as fence.Stale' % tag,
               lambda e: (e.offered, e.highest, e.kind, e.object, e.reason, e.status_name)
               == (old.token, new.token, 'table', 'public.accounts', 'older', 'FENCE_STALE')
               and isinstance(e.__cause__, psycopg2.Error if driver == 'psycopg2' else psycopg.Error))
        ok(pg_row(row) == (10, new.token), '%s: ... nothing changed (%r)' % (tag, pg_row(row)))
        res = '%s-res-%d' % (TAG, row)
        write(driver, conn, new, row, 11, resource=res)
        raises(fence.Stale, lambda: write(driver, conn, old, row, 666, resource=res),
               '%s: use_token(cursor, old, resource) on a newer mark: fence.Stale' % tag,
               lambda e: (e.kind, e.object, e.reason, e.holder) == ('resource', res, 'older',
                                                                   new.holder))

        def no_token():
            if driver == 'psycopg2':
                with conn, conn.cursor() as cur, fence.pg.refusals():
                    cur.execute('UPDATE accounts SET balance = 1 WHERE id = %s', (row,))
            else:
                with conn.transaction(), conn.cursor() as cur, fence.pg.refusals():
                    cur.execute('UPDATE accounts SET balance = 1 WHERE id = %s', (row,))

        raises(fence.NoToken, no_token, '%s: a write with no token bound: fence.NoToken (23Q02), '
               'a fence.Stale' % tag, lambda e: isinstance(e, fence.Stale)
               and e.status_name == 'FENCE_ENOTOKEN' and 'SQLSTATE 23Q02' in e.message)
        if driver == 'psycopg2':
            conn.rollback()
        raises(fence.NoToken, lambda: write(driver, conn, Bad(new.token, 'XYZ'), row, 1),
               '%s: a malformed holder: fence.NoToken from use_token' % tag,
               lambda e: 'malformed holder' in e.message)
        raises(fence.NoToken, lambda: write(driver, conn, Bad(0), row, 1),
               '%s: token 0: fence.NoToken, nothing sent' % tag)
        raises(TypeError, lambda: write(driver, conn, Bad('7'), row, 1),
               '%s: a token that is no int: TypeError' % tag)

        def not_fence():
            if driver == 'psycopg2':
                with conn, conn.cursor() as cur, fence.pg.refusals():
                    cur.execute('SELECT * FROM no_such_table')
            else:
                with conn.transaction(), conn.cursor() as cur, fence.pg.refusals():
                    cur.execute('SELECT * FROM no_such_table')

        raises(psycopg2.Error if driver == 'psycopg2' else psycopg.Error, not_fence,
               '%s: any other error passes unchanged through refusals()' % tag)
        if driver == 'psycopg2':
            conn.rollback()
        # No transaction would hold the token: refused, not silently unfenced.
        conn.autocommit = True
        cur = conn.cursor()
        raises(fence.Error, lambda: fence.pg.use_token(cur, new),
               '%s: use_token in autocommit outside a transaction: fence.Error FENCE_ESTATE' % tag,
               lambda e: e.status_name == 'FENCE_ESTATE')
        # Many transactions on one connection: use_token is never prepared,
        # so the pooler's server connections may change under it.
        if driver == 'psycopg2':
            conn.autocommit = False
        errors = 0
        for i in range(30):
            try:
                write(driver, conn, new, row + 1, i)
            except Exception as e:
                errors += 1
                last = e
        ok(errors == 0 and pg_row(row + 1) == (29, new.token),
           '%s: 30 fenced transactions on one connection, each lands (%d errors%s)'
           % (tag, errors, ': %r' % last if errors else ''))
        new.release()
        conn.close()
        row += 2

raises(TypeError, lambda: fence.pg.use_token(object(), Bad(1)), 'use_token(not a cursor): TypeError')
ok(fence.pg.refused(ValueError('x')) is None, 'fence.pg.refused(an exception not from psycopg): None')

# ---- SQLite ----------------------------------------------------------------------
conn = sqlite3.connect(SQLITE, timeout=5, isolation_level=None)
fence.sqlite.load_extension(conn)
ok(fence.sqlite.extension_path() == os.path.join(os.environ['FENCE_LIBDIR'], 'fence_sqlite_ext.so'),
   'fence.sqlite.extension_path() finds the build\'s extension (%s)' % fence.sqlite.extension_path())


def sq_row(id_):
    return conn.execute('SELECT balance, fence_token FROM accounts WHERE id = ?', (id_,)).fetchone()


def other_writer():
    """Can another connection take the write lock now?"""
    o = sqlite3.connect(SQLITE, timeout=0.3, isolation_level=None)
    try:
        o.execute('BEGIN IMMEDIATE')
        o.execute('ROLLBACK')
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        o.close()


old, new = two_leases(TAG + '-sqlite')
with fence.sqlite.transaction(conn, new, resource=TAG + '-sqlite'):
    conn.execute('UPDATE accounts SET balance = 10 WHERE id = 1')
ok(sq_row(1) == (10, new.token), 'sqlite: transaction() lands, the row stamped (%r)' % (sq_row(1),))


def stale_row():
    with fence.sqlite.transaction(conn, old):
        conn.execute('UPDATE accounts SET balance = 666 WHERE id = 1')


raises(fence.Stale, stale_row, 'sqlite: an older lease\'s write is refused as fence.Stale',
       lambda e: (e.offered, e.highest, e.kind, e.object, e.reason)
       == (old.token, new.token, 'table', 'accounts', 'older')
       and isinstance(e.__cause__, sqlite3.IntegrityError))
ok(sq_row(1) == (10, new.token) and not conn.in_transaction and other_writer(),
   'sqlite: ... nothing changed, the transaction rolled back: another writer gets the lock')
raises(fence.Stale, lambda: fence.sqlite.transaction(conn, old, resource=TAG + '-sqlite').__enter__(),
       'sqlite: transaction(conn, old, resource) on a newer mark: fence.Stale',
       lambda e: (e.kind, e.object, e.reason, e.holder) == ('resource', TAG + '-sqlite', 'older',
                                                            new.holder))
ok(not conn.in_transaction, 'sqlite: ... and no transaction is left open')


def after():
    with fence.sqlite.refusals():
        conn.execute('UPDATE accounts SET balance = 5 WHERE id = 1')


raises(fence.NoToken, after, 'sqlite: after transaction() the connection carries no token: a '
       'write outside one is fence.NoToken (a token lasts one transaction)',
       lambda e: e.status_name == 'FENCE_ENOTOKEN')
raises(fence.Error, lambda: fence.sqlite.use_token(conn, new), 'sqlite: use_token outside a '
       'transaction: fence.Error FENCE_ESTATE', lambda e: e.status_name == 'FENCE_ESTATE')
conn.execute('BEGIN IMMEDIATE')
fence.sqlite.use_token(conn, new)
conn.execute('UPDATE accounts SET balance = 12 WHERE id = 2')
conn.execute('COMMIT')
ok(sq_row(2) == (12, new.token), 'sqlite: use_token inside BEGIN IMMEDIATE binds it')
conn.execute('SELECT fence_set_token(NULL)')


def bad_holder():
    with fence.sqlite.transaction(conn, Bad(new.token, 'XYZ')):
        pass


raises(fence.NoToken, bad_holder, 'sqlite: a malformed holder: fence.NoToken',
       lambda e: 'holder' in e.message)
ok(not conn.in_transaction and other_writer(), 'sqlite: ... the lock is free again')


def not_fence():
    with fence.sqlite.transaction(conn, new):
        conn.execute('SELECT * FROM no_such_table')


raises(sqlite3.OperationalError, not_fence, 'sqlite: any other error passes unchanged')
raises(TypeError, lambda: fence.sqlite.use_token('app.db', new), 'sqlite: use_token(not a connection): '
       'TypeError')
new.release()

# ---- the paused-holder race, with SIGSTOP -------------------------------------------
py = os.environ.get('FENCE_PY', sys.executable)
holder = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'holder.py')
for store, target, rid in (('pg', DIRECT, 20), ('sqlite', SQLITE, 3)):
    name = '%s-race-%s' % (TAG, store)
    p = subprocess.Popen([py, holder, store, target, name, '300', str(rid)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    ok(line[:1] == ['ready'], '%s race: the holder took the lease (token %s)' % (store, line[1:2]))
    a_token = int(line[1])
    os.kill(p.pid, signal.SIGSTOP)
    time.sleep(0.7)    # past its TTL (300 ms): the lease expires while it is frozen
    with client.lease(name, 5000) as b:
        ok(b.token > a_token, '%s race: while it is frozen a newer holder gets the lease (%d > %d)'
           % (store, b.token, a_token))
        if store == 'pg':
            with psycopg2.connect(DIRECT) as c, c.cursor() as cur:
                fence.pg.use_token(cur, b)
                cur.execute('UPDATE accounts SET balance = 2 WHERE id = %s', (rid,))
        else:
            with fence.sqlite.transaction(conn, b):
                conn.execute('UPDATE accounts SET balance = 2 WHERE id = ?', (rid,))
        os.kill(p.pid, signal.SIGCONT)
        out, _ = p.communicate('go\n', timeout=30)
    ok(out.strip() == 'stale %d %d table %s older' % (a_token, b.token,
                                                    'public.accounts' if store == 'pg' else 'accounts'),
       '%s race: woken, the old holder\'s write is refused as fence.Stale (%r)' % (store, out.strip()))
    got = pg_row(rid) if store == 'pg' else sq_row(rid)
    ok(got == (2, b.token), '%s race: the store holds the newer holder\'s write (%r)' % (store, got))
    ok(p.returncode == 0, '%s race: the old holder exits 0 (%d)' % (store, p.returncode))

# ---- docs/python.md: every python block runs, as the page shows it --------------
doc = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'docs', 'python.md')
blocks = re.findall(r'^```python\n(.*?)^```$', open(doc).read(), re.S | re.M)
ok(len(blocks) >= 5, 'docs/python.md has its python blocks (%d)' % len(blocks))
for i, code in enumerate(blocks, 1):
    env = dict(os.environ, FENCE_REDIS_URL=URL, APP_SQLITE=SQLITE,
               APP_DB=BOUNCER if 'import psycopg\n' in code else DIRECT)
    p = subprocess.run([py, '-c', code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=60)
    ok(p.returncode == 0 and not p.stderr and 'refused' not in p.stdout,
       'docs/python.md block %d runs (exit %d%s)' % (
           i, p.returncode, (': ' + p.stderr[-300:]) if p.stderr else ''))

conn.close()
client.close()
done()
