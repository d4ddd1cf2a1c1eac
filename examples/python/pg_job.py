#!/usr/bin/python3
"""pg_job.py -- a fenced PostgreSQL writer in Python (psycopg2), run under
`fence run`:

    fence run --ttl 10s transfer -- examples/python/pg_job.py --from 1 --to 2 --amount 10

It moves AMOUNT from account FROM to account TO in table `accounts`
(protected with fence.protect('accounts')), in one transaction that binds
the lease's token and holder (FENCE_TOKEN, FENCE_HOLDER) with
fence.use_token() and advances the resource FENCE_NAME.  A refusal is
recognised by its SQLSTATE: 23Q01 stale (a newer holder has written), 23Q02
no valid token.  A deadlock victim (40P01) is retried, the whole
transaction, a bounded number of times.

Options: --db CONNINFO (default: libpq's PG* variables), --count N (the
transfer N times, one transaction each, on one connection: a worker serving
N requests), --wait-for PATH (wait until PATH exists before writing: stands
for long work, so that a test can make this holder stale).  psycopg2 never
prepares a statement on the server (it sends each query whole, parameters
interpolated), so it works behind a pooler in any pool mode.
Exit status: 0 written, 3 refused as stale, 4 refused: no valid token,
2 any other database error (or deadlocks on every attempt), 64 usage."""
import argparse
import os
import re
import sys
import time

import psycopg2

STALE, NO_TOKEN = '23Q01', '23Q02'   # fence's SQLSTATEs: not in psycopg2.errors
RETRY = ('40P01', '40001')           # deadlock victim, serialization failure
ATTEMPTS = 5


def lease_from_env():
    """The token, holder and lease name `fence run` exports."""
    token = os.environ.get('FENCE_TOKEN', '')
    if not re.fullmatch(r'[1-9][0-9]{0,18}', token) or int(token) > 2**63 - 1:
        print('pg_job: FENCE_TOKEN is missing or malformed (%r): run me under fence run' % token,
              file=sys.stderr)
        sys.exit(64)
    return int(token), os.environ.get('FENCE_HOLDER') or None, os.environ.get('FENCE_NAME') or 'transfer'


def transfer(conn, token, holder, resource, frm, to, amount):
    """One fenced transaction.  `with conn:` commits, or rolls back when
    anything in it raises, so a refused write never leaves it open."""
    with conn, conn.cursor() as cur:
        cur.execute('SELECT fence.use_token(%s, %s)', (token, holder))   # per transaction
        cur.execute('SELECT fence.advance(%s, %s)', (resource, token))
        cur.execute('UPDATE accounts SET balance = balance - %s WHERE id = %s', (amount, frm))
        cur.execute('UPDATE accounts SET balance = balance + %s WHERE id = %s', (amount, to))


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
    conn = psycopg2.connect(args.db)
    if args.wait_for:
        while not os.path.exists(args.wait_for):
            time.sleep(0.02)
    for _ in range(args.count):
        rc = transfer_retrying(conn, token, holder, resource, args)
        if rc != 0:
            return rc
    print('pg_job: wrote with token %d' % token
          + (' (%d transfers)' % args.count if args.count != 1 else ''))
    return 0


def transfer_retrying(conn, token, holder, resource, args):
    """One transfer; a deadlock victim is retried.  Returns the exit status."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            transfer(conn, token, holder, resource, args.frm, args.to, args.amount)
            return 0
        except psycopg2.Error as e:
            # A stale write is a plain IntegrityError: tell it by pgcode.
            code, first = e.pgcode, e.diag.message_primary or str(e)
            if code in RETRY and attempt < ATTEMPTS:
                print('pg_job: SQLSTATE %s, retrying (attempt %d of %d): %s'
                      % (code, attempt + 1, ATTEMPTS, first), file=sys.stderr)
                time.sleep(0.05 * attempt)   # the transaction was rolled back: redo all of it
                continue
            detail = e.diag.message_detail or ''
            if code == STALE:
                print('pg_job: refused as stale (SQLSTATE %s): %s [%s]' % (code, first, detail),
                      file=sys.stderr)
                return 3
            if code == NO_TOKEN:
                print('pg_job: refused, no valid token (SQLSTATE %s): %s [%s]' % (code, first, detail),
                      file=sys.stderr)
                return 4
            print('pg_job: database error (SQLSTATE %s): %s' % (code, first), file=sys.stderr)
            return 2
    return 2


if __name__ == '__main__':
    sys.exit(main())
