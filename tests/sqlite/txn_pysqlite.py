#!/usr/bin/python3
"""txn_pysqlite.py DB EXT -- a token serves one write transaction, seen from
Python's sqlite3 (Debian's /usr/bin/python3) with fence's extension EXT on
ONE connection reused by "requests", as a web worker or a pool reuses it:
after a fenced request, a request without a token of its own is refused,
in the module's default mode (it BEGINs before a write by itself) and with
isolation_level=None.  The refusal undoes the statement: in the default
mode the transaction the module began stays open, holding the write lock
(another connection with timeout=0 gets "database is locked"), until the
except path rolls it back; with isolation_level=None the write was an
autocommit statement, which SQLite rolls back itself.  Either way nothing
is left after the except path (the other connection writes).  Also what a
request that set a token and only read leaves (docs/sqlite.md), and the
way to end such a request.  Prints TAP-style ok / not ok lines (run by
test_sqlite_reuse.sh)."""
import sqlite3
import sys

from txn_tap import check, failures

DB, EXT = sys.argv[1], sys.argv[2]


def connect(**kw):
    conn = sqlite3.connect(DB, **kw)
    conn.enable_load_extension(True)
    conn.load_extension(EXT)
    conn.enable_load_extension(False)
    return conn


def other_writes():
    """A second connection, no busy timeout: any lock left fails it."""
    other = connect(timeout=0, isolation_level=None)
    try:
        other.execute('SELECT fence_set_token(1000)')
        other.execute("INSERT INTO side VALUES ('other')")
        return True, ''
    except sqlite3.Error as e:
        return False, e
    finally:
        other.close()


def refused(conn, sql):
    """The write must fail with fence:notoken; returns the message, whether
    a transaction was open right after the refusal, and whether another
    connection could write then.  Rolled back in the except path, as
    docs/languages.md says (in the default mode the module began the
    transaction itself)."""
    try:
        conn.execute(sql)
        conn.commit()
        return None, None, None
    except sqlite3.IntegrityError as e:
        open_after, (other_ok, _) = conn.in_transaction, other_writes()
        conn.rollback()
        return str(e), open_after, other_ok


setup = connect(isolation_level=None)
setup.executescript("""
    PRAGMA journal_mode=WAL;
    CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER);
    INSERT INTO accounts VALUES (1, 100), (2, 100);
    CREATE TABLE side(v TEXT);
    SELECT fence_protect('accounts');
""")
setup.close()

for mode, kw in (('default mode', {}), ('isolation_level=None', {'isolation_level': None})):
    conn = connect(timeout=5, **kw)
    # Request 1: fenced, as the docs say (the token before the writes).
    conn.execute('SELECT fence_set_token(9000)')
    if conn.isolation_level is None:
        conn.execute('BEGIN IMMEDIATE')
    conn.execute('UPDATE accounts SET balance = balance - 10 WHERE id = 1')
    conn.execute('UPDATE accounts SET balance = balance + 10 WHERE id = 2')
    conn.commit() if conn.isolation_level is not None else conn.execute('COMMIT')
    stamps = conn.execute('SELECT group_concat(fence_token) FROM accounts').fetchone()[0]
    check(stamps == '9000,9000', '%s: the fenced request wrote with its token' % mode, stamps)
    token = conn.execute('SELECT fence_token()').fetchone()[0]
    check(token is None, '%s: its token ended with its COMMIT' % mode, token)
    all_rows = 'SELECT group_concat(id || ":" || balance || ":" || fence_token) FROM accounts'
    before = conn.execute(all_rows).fetchone()[0]
    # Request 2 on the same connection, no token of its own: refused,
    # UPDATE, DELETE and INSERT alike.
    for sql in ('UPDATE accounts SET balance = 0 WHERE id = 1', 'DELETE FROM accounts',
                'INSERT INTO accounts(id, balance) VALUES (3, 1)'):
        msg, open_after, other_ok = refused(conn, sql)
        check(msg is not None and msg.startswith('fence:notoken '),
              '%s: the next request\'s token-less %s is refused' % (mode, sql.split()[0]), msg)
        if conn.isolation_level is None:
            check(open_after is False and other_ok is True,
                  '%s: ... in autocommit, undone by SQLite: no transaction, no lock' % mode,
                  '%s %s' % (open_after, other_ok))
        else:
            check(open_after is True and other_ok is False,
                  '%s: ... in the transaction the module began, which holds the lock '
                  'until rolled back' % mode, '%s %s' % (open_after, other_ok))
        check(not conn.in_transaction,
              '%s: ... after the rollback no transaction is open' % mode, conn.in_transaction)
        ok, err = other_writes()
        check(ok, '%s: ... nor a lock (another connection, timeout=0, writes)' % mode, err)
    rows = conn.execute(all_rows).fetchone()[0]
    check(rows == before, '%s: nothing of it was written' % mode, '%s, was %s' % (rows, before))
    conn.close()

# A request that sets its token and only reads: SQLite reports nothing when
# a read ends, so the token waits for the connection's next write
# transaction (docs/sqlite.md) -- the next request's, if it writes without
# setting one.  Ending the request with fence_set_token(NULL) closes that.
conn = connect(timeout=5)
conn.execute('SELECT fence_set_token(9001)')
conn.execute('SELECT balance FROM accounts').fetchall()
conn.commit()
conn.execute('UPDATE accounts SET balance = balance WHERE id = 1')
conn.commit()
stamp = conn.execute('SELECT fence_token FROM accounts WHERE id = 1').fetchone()[0]
check(stamp == 9001, 'a read-only request\'s token serves the next write transaction '
      '(the documented limit)', stamp)
conn.execute('SELECT fence_set_token(9002)')
conn.execute('SELECT balance FROM accounts').fetchall()
conn.execute('SELECT fence_set_token(NULL)')            # the end of the request
msg, _, _ = refused(conn, 'UPDATE accounts SET balance = 0 WHERE id = 1')
check(msg is not None and msg.startswith('fence:notoken '),
      'ended with fence_set_token(NULL), the next request\'s write is refused', msg)
conn.close()
sys.exit(1 if failures() else 0)
