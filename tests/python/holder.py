"""holder.py STORE TARGET NAME TTL_MS ROW -- a holder for stores_cases.py's
paused-holder race: takes the lease NAME on $FENCE_TEST_REDIS_URL, says
"ready TOKEN HOLDER" and waits for a line on stdin (the test freezes it
there with SIGSTOP, past the TTL, while a newer holder writes), then writes
row ROW of accounts with its token -- PostgreSQL (STORE pg, TARGET a
conninfo; psycopg2): its transaction was opened and the token bound before
the pause, as a process stopped between binding and writing would; SQLite
(STORE sqlite, TARGET a file): fence.sqlite.transaction() after the pause,
as the write lock is taken at BEGIN -- and prints "written" or "stale
OFFERED HIGHEST KIND OBJECT REASON"."""
import os
import sys

import fence

store, target, name, ttl, row = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
client = fence.Client(os.environ['FENCE_TEST_REDIS_URL'])
lease = client.lease(name, ttl)
try:
    if store == 'pg':
        import psycopg2
        import fence.pg
        conn = psycopg2.connect(target)
        cur = conn.cursor()
        fence.pg.use_token(cur, lease)
        print('ready %d %s' % (lease.token, lease.holder), flush=True)
        sys.stdin.readline()
        with fence.pg.refusals():
            try:
                cur.execute('UPDATE accounts SET balance = 999 WHERE id = %s', (row,))
                conn.commit()
            finally:
                conn.rollback()
    else:
        import sqlite3
        import fence.sqlite
        conn = sqlite3.connect(target, timeout=5, isolation_level=None)
        fence.sqlite.load_extension(conn)
        print('ready %d %s' % (lease.token, lease.holder), flush=True)
        sys.stdin.readline()
        with fence.sqlite.transaction(conn, lease):
            conn.execute('UPDATE accounts SET balance = 999 WHERE id = ?', (row,))
    print('written', flush=True)
except fence.Stale as e:
    print('stale %d %d %s %s %s' % (e.offered, e.highest, e.kind, e.object, e.reason), flush=True)
try:
    lease.release()
except fence.Lost:
    pass
client.close()
