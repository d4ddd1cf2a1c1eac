#!/usr/bin/python3
"""sqlite_job.py -- a fenced SQLite writer in Python (the standard sqlite3
module and fence's loadable extension), run under `fence run`:

    fence run --ttl 10s transfer -- examples/python/sqlite_job.py --db app.db \\
        --ext build/fence_sqlite_ext --from 1 --to 2 --amount 10

It moves AMOUNT between two rows of `accounts` (protected with
SELECT fence_protect('accounts')) in one BEGIN IMMEDIATE transaction, with
the transaction's token and holder set by fence_set_token() and the resource
FENCE_NAME advanced.  A refusal fails with SQLITE_CONSTRAINT_TRIGGER and a
message starting "fence:stale " (older or repeated token) or "fence:notoken ".

The pitfall: Python's sqlite3 by default opens a transaction before a write
on its own and leaves it open when the write fails -- with the write lock,
so every other writer gets "database is locked" until this connection rolls
back.  So: isolation_level=None (we say BEGIN and COMMIT), and ROLLBACK in
the except path.

Options: --db PATH, --ext PATH (the extension, without .so), --wait-for PATH
(as in pg_job.py).  Exit status: 0 written, 3 refused as stale, 4 refused:
no valid token, 2 any other database error, 64 usage."""
import argparse
import os
import re
import sqlite3
import sys
import time


def lease_from_env():
    token = os.environ.get('FENCE_TOKEN', '')
    if not re.fullmatch(r'[1-9][0-9]{0,18}', token) or int(token) > 2**63 - 1:
        print('sqlite_job: FENCE_TOKEN is missing or malformed (%r): run me under fence run' % token,
              file=sys.stderr)
        sys.exit(64)
    return int(token), os.environ.get('FENCE_HOLDER') or None, os.environ.get('FENCE_NAME') or 'transfer'


def connect(path, ext):
    conn = sqlite3.connect(path, timeout=5.0, isolation_level=None)   # busy_timeout 5 s
    conn.enable_load_extension(True)
    conn.load_extension(ext)
    conn.enable_load_extension(False)
    return conn


def transfer(conn, token, holder, resource, frm, to, amount):
    """One fenced transaction; on any error it is rolled back (the lock is
    released) and the error re-raised."""
    conn.execute('SELECT fence_set_token(?, ?)', (token, holder))   # for this one transaction
    conn.execute('BEGIN IMMEDIATE')
    try:
        conn.execute('INSERT INTO fence_advance(resource) VALUES (?)', (resource,))
        conn.execute('UPDATE accounts SET balance = balance - ? WHERE id = ?', (amount, frm))
        conn.execute('UPDATE accounts SET balance = balance + ? WHERE id = ?', (amount, to))
        conn.execute('COMMIT')
    except BaseException:
        if conn.in_transaction:
            conn.execute('ROLLBACK')
        raise


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--db', required=True)
    ap.add_argument('--ext', default='fence_sqlite_ext')
    ap.add_argument('--from', dest='frm', type=int, required=True)
    ap.add_argument('--to', type=int, required=True)
    ap.add_argument('--amount', type=int, required=True)
    ap.add_argument('--wait-for')
    args = ap.parse_args()
    token, holder, resource = lease_from_env()
    conn = connect(args.db, args.ext)
    if args.wait_for:
        while not os.path.exists(args.wait_for):
            time.sleep(0.02)
    try:
        transfer(conn, token, holder, resource, args.frm, args.to, args.amount)
    except sqlite3.Error as e:
        msg = str(e)
        if msg.startswith('fence:stale '):
            print('sqlite_job: refused as stale: %s' % msg, file=sys.stderr)
            return 3
        if msg.startswith('fence:notoken '):
            print('sqlite_job: refused, no valid token: %s' % msg, file=sys.stderr)
            return 4
        print('sqlite_job: database error: %s' % msg, file=sys.stderr)
        return 2
    print('sqlite_job: wrote with token %d' % token)
    return 0


if __name__ == '__main__':
    sys.exit(main())
