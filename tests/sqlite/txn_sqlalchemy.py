#!/usr/bin/python3
"""txn_sqlalchemy.py DB EXT -- a token serves one write transaction, seen from
SQLAlchemy's QueuePool (Debian's python3-sqlalchemy, pysqlite in its
default mode) with fence's extension EXT loaded on every connection: a pool
of one, so every request gets the same DBAPI connection.  After a fenced
request (the token set as the transaction begins, as docs/languages.md
has it), an ORM request without a token of its own is refused at flush --
UPDATE, INSERT and DELETE -- and after the session's rollback no
transaction and no lock is left (another connection with timeout=0
writes).  A request that set a token and only read leaves it for the next
writer unless the pool's checkin clears it (the recipe of docs/sqlite.md).
Prints TAP-style ok / not ok lines (run by test_sqlite_reuse.sh)."""
import sqlite3
import sys

import sqlalchemy as sa
from sqlalchemy import event, exc, orm

from txn_tap import check, failures

DB, EXT = sys.argv[1], sys.argv[2]


Base = orm.declarative_base()


class Account(Base):
    __tablename__ = 'accounts'
    id = sa.Column(sa.Integer, primary_key=True)
    balance = sa.Column(sa.Integer, nullable=False)


def make_engine(clear_at_checkin):
    engine = sa.create_engine('sqlite:///' + DB, poolclass=sa.pool.QueuePool, pool_size=1,
                              max_overflow=0, connect_args={'timeout': 5})

    @event.listens_for(engine, 'connect')
    def load_fence(dbapi_conn, record):
        dbapi_conn.enable_load_extension(True)
        dbapi_conn.load_extension(EXT)
        dbapi_conn.enable_load_extension(False)

    if clear_at_checkin:
        @event.listens_for(engine, 'checkin')
        def end_token(dbapi_conn, record):
            dbapi_conn.execute('SELECT fence_set_token(NULL)')
    return engine


def request(engine, token, work):
    """One request: a session, its transaction, the token (if any) set as
    it begins; returns (the DBAPI connection it ran on, the error)."""
    with orm.Session(engine) as s:
        try:
            with s.begin():
                if token is not None:
                    s.execute(sa.text('SELECT fence_set_token(:t)'), {'t': token})
                dbapi = s.connection().connection.dbapi_connection
                work(s)
            return dbapi, None
        except exc.IntegrityError as e:
            return dbapi, e


def other_writes():
    other = sqlite3.connect(DB, timeout=0, isolation_level=None)
    try:
        other.execute("INSERT INTO side VALUES ('other')")
        return True, ''
    except sqlite3.Error as e:
        return False, e
    finally:
        other.close()


setup = sqlite3.connect(DB, isolation_level=None)
setup.enable_load_extension(True)
setup.load_extension(EXT)
setup.executescript("""
    PRAGMA journal_mode=WAL;
    CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL);
    INSERT INTO accounts VALUES (1, 100), (2, 100);
    CREATE TABLE side(v TEXT);
    SELECT fence_protect('accounts');
""")
setup.close()


def transfer(s):
    a, b = s.get(Account, 1), s.get(Account, 2)
    a.balance -= 10
    b.balance += 10


engine = make_engine(clear_at_checkin=False)
first, err = request(engine, 9000, transfer)
check(err is None, 'a fenced request transfers', err)
for what, work in (('UPDATE', lambda s: setattr(s.get(Account, 1), 'balance', 0)),
                   ('INSERT', lambda s: s.add(Account(id=3, balance=1))),
                   ('DELETE', lambda s: s.delete(s.get(Account, 2)))):
    conn, err = request(engine, None, work)
    check(conn is first, 'the next request gets the same DBAPI connection from the pool')
    check(err is not None and 'fence:notoken ' in str(err.orig),
          'its token-less ORM %s is refused at flush' % what, err)
    check(not conn.in_transaction, '... the session\'s rollback leaves no transaction',
          conn.in_transaction)
    ok, e = other_writes()
    check(ok, '... nor a lock (another connection, timeout=0, writes)', e)
with engine.connect() as c:
    rows = c.exec_driver_sql('SELECT group_concat(id || ":" || balance || ":" || fence_token) '
                             'FROM accounts').scalar()
check(rows == '1:90:9000,2:110:9000', 'nothing of the refused requests was written', rows)

# A request that sets its token and only reads: pysqlite begins nothing
# for it, so SQLite sees no transaction end, and the token waits for the
# connection's next write transaction -- the documented limit ...
_, err = request(engine, 9001, lambda s: s.get(Account, 1))
_, err = request(engine, None, lambda s: setattr(s.get(Account, 1), 'balance', 91))
with engine.connect() as c:
    stamp = c.exec_driver_sql('SELECT fence_token FROM accounts WHERE id = 1').scalar()
check(err is None and stamp == 9001,
      'a read-only request\'s token serves the next writer of the pooled connection '
      '(the documented limit)', '%s %s' % (err, stamp))
engine.dispose()
# ... which the pool's checkin closes (docs/sqlite.md).
engine = make_engine(clear_at_checkin=True)
_, err = request(engine, 9002, lambda s: s.get(Account, 1))
_, err = request(engine, None, lambda s: setattr(s.get(Account, 1), 'balance', 92))
check(err is not None and 'fence:notoken ' in str(err.orig),
      'with fence_set_token(NULL) at checkin, the next request\'s write is refused', err)
_, err = request(engine, 9003, transfer)
check(err is None, 'and a fenced request still writes', err)
engine.dispose()
sys.exit(1 if failures() else 0)
