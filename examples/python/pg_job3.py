#!/usr/bin/python3
"""pg_job3.py -- pg_job.py with psycopg 3 (Debian: python3-psycopg), run
under `fence run`:

    fence run --ttl 10s transfer -- examples/python/pg_job3.py --from 1 --to 2 --amount 10

The same job, options and exit status as pg_job.py; what differs is
psycopg 3's:
- it binds parameters on the server, so `SET LOCAL fence.token = %s` is a
  syntax error (42601), and fence.sql 5 refuses a bare SET LOCAL anyway:
  bind with SELECT fence.use_token(%s::bigint, %s).  The cast makes the type
  explicit (psycopg sends an int of 2^63 or more as numeric, and
  fence.use_token(numeric, unknown) does not exist, 42883);
- `with conn:` closes the connection at the end of the block: transactions
  are `with conn.transaction():` (commit, or roll back on an exception);
- e.sqlstate is the SQLSTATE (23Q01 has no class of its own here either);
- it prepares a statement on the server once one connection has run it 5
  times (prepare_threshold=5), which breaks behind a pooler in transaction
  mode: connect() turns that off (see there).
--count N runs the transfer N times, one transaction each, on one
connection (a worker serving N requests)."""
import argparse
import os
import re
import sys
import time

import psycopg

STALE, NO_TOKEN = '23Q01', '23Q02'
RETRY = ('40P01', '40001')
ATTEMPTS = 5


def lease_from_env():
    token = os.environ.get('FENCE_TOKEN', '')
    if not re.fullmatch(r'[1-9][0-9]{0,18}', token) or int(token) > 2**63 - 1:
        print('pg_job3: FENCE_TOKEN is missing or malformed (%r): run me under fence run' % token,
              file=sys.stderr)
        sys.exit(64)
    return int(token), os.environ.get('FENCE_HOLDER') or None, os.environ.get('FENCE_NAME') or 'transfer'


def connect(conninfo):
    """autocommit=True: transactions only where we say.  prepare_threshold=None:
    never a server-side prepared statement.  psycopg 3's default prepares a
    query the 6th time one connection runs it, under a name (_pg3_0, ...) that
    lives on one server connection; behind a pooler in transaction mode the
    next transaction may run on another one: 42P05 (the name is another
    client's there), 26000 (not there), 08P01 (another client's statement
    takes other parameters), or, silently, another client's statement of the
    same name run with these parameters."""
    return psycopg.connect(conninfo, autocommit=True, prepare_threshold=None)


def transfer(conn, token, holder, resource, frm, to, amount):
    with conn.transaction():
        conn.execute('SELECT fence.use_token(%s::bigint, %s)', (token, holder))
        conn.execute('SELECT fence.advance(%s, %s::bigint)', (resource, token))
        conn.execute('UPDATE accounts SET balance = balance - %s WHERE id = %s', (amount, frm))
        conn.execute('UPDATE accounts SET balance = balance + %s WHERE id = %s', (amount, to))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--db', default='')
    ap.add_argument('--from', dest='frm', type=int, required=True)
    ap.add_argument('--to', type=int, required=True)
    ap.add_argument('--amount', type=int, required=True)
    ap.add_argument('--count', type=int, default=1)
    ap.add_argument('--wait-for')
    args = ap.parse_args()
    token, holder, resource = lease_from_env()
    conn = connect(args.db)
    if args.wait_for:
        while not os.path.exists(args.wait_for):
            time.sleep(0.02)
    for _ in range(args.count):
        rc = transfer_retrying(conn, token, holder, resource, args)
        if rc != 0:
            return rc
    print('pg_job3: wrote with token %d' % token
          + (' (%d transfers)' % args.count if args.count != 1 else ''))
    return 0


def transfer_retrying(conn, token, holder, resource, args):
    """One transfer; a deadlock victim is retried.  Returns the exit status."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            transfer(conn, token, holder, resource, args.frm, args.to, args.amount)
            return 0
        except psycopg.Error as e:
            code, first = e.sqlstate, e.diag.message_primary or str(e)
            if code in RETRY and attempt < ATTEMPTS:
                print('pg_job3: SQLSTATE %s, retrying (attempt %d of %d): %s'
                      % (code, attempt + 1, ATTEMPTS, first), file=sys.stderr)
                time.sleep(0.05 * attempt)
                continue
            detail = e.diag.message_detail or ''
            if code == STALE:
                print('pg_job3: refused as stale (SQLSTATE %s): %s [%s]' % (code, first, detail),
                      file=sys.stderr)
                return 3
            if code == NO_TOKEN:
                print('pg_job3: refused, no valid token (SQLSTATE %s): %s [%s]' % (code, first, detail),
                      file=sys.stderr)
                return 4
            print('pg_job3: database error (SQLSTATE %s): %s' % (code, first), file=sys.stderr)
            return 2
    return 2


if __name__ == '__main__':
    sys.exit(main())
