#!/usr/bin/python3
"""orm_sqlalchemy.py -- SQLAlchemy 1.4's optimistic locking (version_id_col)
on a table fence protects, against the same program on an unprotected one
(tests/orm/test_orm.sh runs it for each; read by it, not by hand).

    orm_sqlalchemy.py --backend pg --db CONNINFO --mode plain|fenced|migrated|old_retrofit [--impl plpgsql|c] --table T
    orm_sqlalchemy.py --backend sqlite --db FILE --ext build/fence_sqlite_ext --mode ... --table T

It makes table T (id, title, lock_version: the ORM's counter) with rows 1..9
and, with --mode fenced, protects it: fence.protect(T, 'fence_token', false,
IMPL) in PostgreSQL, fence_protect(T) in SQLite -- fence stamps a column of
its own, fence_token, and never writes lock_version.  With --mode migrated
(PostgreSQL) it is first retrofitted the way fence.sql before version 6
did, lock_version the token column (a bigint, marked as fence's), then
moved by fence.migrate_version_column(T): the same outcomes are expected as
with --mode fenced.  --mode old_retrofit is that retrofit not moved (the
flaw of issue 26): its outcomes are printed, not judged here (test_orm.sh
compares them with the issue's table).  Then it runs every
scenario of SCENARIOS below through the ORM, each "request" a Session whose
transactions carry the lease's token (bound in after_begin, as
docs/languages.md shows), and checks what the ORM did (saved, deleted, its
StaleDataError, or fence's refusal), the rows after, and (fenced) their
stamps.  The outcomes are the same with and without fence but for the
stale holder, which only fence refuses.  Prints TAP lines, and for each
scenario "# outcome SCENARIO: OUTCOMES | ROWS", which test_orm.sh compares
between the modes.  Exit status: 0 all as expected, 1 not, 2 setup error."""
import argparse
import sqlite3
import sys

import sqlalchemy
from sqlalchemy import Column, Integer, String, create_engine, event, text
from sqlalchemy.orm import Session, declarative_base, sessionmaker
from sqlalchemy.orm.exc import StaleDataError
from sqlalchemy.pool import QueuePool

HOLDER = 100            # the lease's token in most scenarios: one holder writing
OLDER, NEWER = 150, 200  # the stale holder's token, and the newer holder's
BACKEND = None           # 'pg' or 'sqlite'


# How a transaction gets the lease's token and holder, per store.
USE_TOKEN = {'pg': 'SELECT fence.use_token(:token, :holder)',
             'sqlite': 'SELECT fence_set_token(:token, :holder)'}


# The token of every transaction a Session begins, session.info['lease']
# ({'token': ..., 'holder': ...}), given to the store before the ORM's first
# statement in it: an ORM that writes only after it began a transaction of
# its own (SQLAlchemy's autobegin) carries the token in every write.
@event.listens_for(Session, 'after_begin')
def use_token(session, transaction, connection):
    connection.execute(text(USE_TOKEN[BACKEND]), session.info['lease'])


def make_engine(args):
    if args.backend == 'pg':
        import psycopg2
        return create_engine('postgresql+psycopg2://', creator=lambda: psycopg2.connect(args.db),
                             poolclass=QueuePool, pool_size=2)

    def connect():
        # isolation_level=None: SQLAlchemy says BEGIN (below), not the module.
        conn = sqlite3.connect(args.db, timeout=5.0, isolation_level=None)
        conn.enable_load_extension(True)
        conn.load_extension(args.ext)
        conn.enable_load_extension(False)
        return conn
    engine = create_engine('sqlite://', creator=connect, poolclass=QueuePool, pool_size=2)

    @event.listens_for(engine, 'begin')
    def begin(conn):
        conn.exec_driver_sql('BEGIN IMMEDIATE')
    return engine


def make_model(table):
    base = declarative_base()

    class Post(base):
        __tablename__ = table
        id = Column(Integer, primary_key=True)
        title = Column(String, nullable=False)
        lock_version = Column(Integer, nullable=False)
        __mapper_args__ = {'version_id_col': lock_version}
    return Post


def setup(args, engine):
    """Table T with rows 1..9 (as the ORM inserts them: lock_version 1),
    protected with --mode fenced (or migrated)."""
    q = '"%s"' % args.table
    with engine.connect() as c:
        c = c.execution_options(isolation_level='AUTOCOMMIT') if args.backend == 'pg' else c
        raw = c.connection  # the DBAPI connection: DDL outside a transaction
        cur = raw.cursor()
        cur.execute('DROP TABLE IF EXISTS %s' % q)
        cur.execute('CREATE TABLE %s (id INTEGER PRIMARY KEY, title TEXT NOT NULL,'
                    ' lock_version INTEGER NOT NULL DEFAULT 0)' % q)
        for i in range(1, 10):
            cur.execute('INSERT INTO %s VALUES (%d, %s, 1)' % (q, i, "'row %d'" % i))
        if args.mode == 'fenced' and args.backend == 'pg':
            cur.execute("SELECT fence.protect(%s, 'fence_token', false, %s)", (args.table, args.impl))
        elif args.mode in ('migrated', 'old_retrofit'):
            # The old retrofit, as fence.sql before 6 left it (its install
            # of 6 marks the guarded column): lock_version holds the stamps.
            cur.execute('ALTER TABLE %s ALTER COLUMN lock_version TYPE bigint' % q)
            cur.execute("SELECT fence.mark_token_column(%s, 'lock_version')", (args.table,))
            cur.execute("SELECT fence.protect(%s, 'lock_version', false, %s)", (args.table, args.impl))
            if args.mode == 'migrated':
                cur.execute('SELECT fence.migrate_version_column(%s)', (args.table,))
        elif args.mode == 'fenced':
            cur.execute('SELECT fence_init()')
            cur.execute('SELECT fence_protect(?)', (args.table,))
        if args.backend == 'pg':
            cur.execute('SELECT count(*) FROM fence.protected WHERE tbl = %s::regclass', (args.table,))
        else:
            cur.execute("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?",
                        (args.table,))
        protected = cur.fetchone()[0] > 0
        cur.execute('SELECT * FROM %s WHERE false' % q)
        cols = [d[0] for d in cur.description]
        cur.close()
    return protected, cols


class Run:
    def __init__(self, args, engine):
        self.args = args
        self.engine = engine
        self.Post = make_model(args.table)
        self.sessions = sessionmaker(bind=engine, expire_on_commit=False)

    def request(self, token):
        """A request of one service: a Session whose transactions carry token."""
        return self.sessions(info={'lease': {'token': token, 'holder': None}})

    def attempt(self, session, work=None):
        """work(session), then commit: 'saved', or the refusal (ORM's or
        fence's) after which the transaction is rolled back."""
        try:
            if work is not None:
                work(session)
            session.commit()
            return 'saved'
        except StaleDataError:
            session.rollback()
            return 'StaleDataError'
        except sqlalchemy.exc.DBAPIError as e:
            session.rollback()
            code = getattr(e.orig, 'pgcode', None)
            if code == '23Q01' or str(e.orig).startswith('fence:stale '):
                return 'refused as stale'
            return 'error %s: %s' % (code, str(e.orig).splitlines()[0])

    def load(self, token, id_):
        """A request that loads row id_ (its read transaction ends; the
        object stays, with the version it was loaded at)."""
        s = self.request(token)
        obj = s.get(self.Post, id_)
        s.commit()
        return s, obj

    def rows(self, ids):
        with self.engine.connect() as c:
            got = c.execute(text('SELECT id, title, lock_version FROM "%s" WHERE id IN (%s) ORDER BY id'
                                 % (self.args.table, ','.join(map(str, ids))))).fetchall()
        return ' '.join('%d:%s:%d' % tuple(r) for r in got) or '-'

    def stamps(self, ids):
        with self.engine.connect() as c:
            got = c.execute(text('SELECT fence_token FROM "%s" WHERE id IN (%s) ORDER BY id'
                                 % (self.args.table, ','.join(map(str, ids))))).fetchall()
        return ' '.join(str(r[0]) for r in got) or '-'


# ---- the scenarios --------------------------------------------------------
# Each returns the outcomes of its saves, in order.

def insert(run):
    s = run.request(HOLDER)
    return [run.attempt(s, lambda s: s.add(run.Post(id=101, title='new')))]


def two_copies(run):
    """Two requests of one service (one lease) load the row this holder
    already wrote; both save."""
    w, row = run.load(HOLDER, 2)
    first = run.attempt(w, lambda s: setattr(row, 'title', 'written'))
    r1, c1 = run.load(HOLDER, 2)
    r2, c2 = run.load(HOLDER, 2)
    return [first, run.attempt(r1, lambda s: setattr(c1, 'title', 'r1')),
            run.attempt(r2, lambda s: setattr(c2, 'title', 'r2'))]


def flush_twice(run):
    """One object modified and flushed twice in one transaction."""
    s = run.request(HOLDER)

    def work(s):
        p = s.get(run.Post, 3)
        p.title = 'a'
        s.flush()
        p.title = 'b'
        s.flush()
    return [run.attempt(s, work)]


def insert_flush_modify_flush(run):
    s = run.request(HOLDER)

    def work(s):
        p = run.Post(id=104, title='a')
        s.add(p)
        s.flush()
        p.title = 'b'
        s.flush()
    return [run.attempt(s, work)]


def saved_twice(run):
    """One object saved, then saved again (two transactions, one Session)."""
    s, p = run.load(HOLDER, 5)
    return [run.attempt(s, lambda s: setattr(p, 'title', 'a')),
            run.attempt(s, lambda s: setattr(p, 'title', 'b'))]


def stale_holder(run):
    """A holder whose lease is over (token OLDER) loads the row after the
    newer holder (NEWER) wrote it, and saves."""
    b, row = run.load(NEWER, 6)
    newer = run.attempt(b, lambda s: setattr(row, 'title', 'newer'))
    a, old = run.load(OLDER, 6)
    return [newer, run.attempt(a, lambda s: setattr(old, 'title', 'older'))]


def delete(run):
    s, p = run.load(HOLDER, 7)
    return [run.attempt(s, lambda s: s.delete(p)).replace('saved', 'deleted')]


def delete_stale_copy(run):
    """The ORM's versioned DELETE of a copy loaded before another request
    changed the row."""
    r1, c1 = run.load(HOLDER, 8)
    r2, c2 = run.load(HOLDER, 8)
    return [run.attempt(r1, lambda s: setattr(c1, 'title', 'changed')),
            run.attempt(r2, lambda s: s.delete(c2)).replace('saved', 'deleted')]


# name, function, rows it touches, outcomes alone, outcomes with fence
# (None: the same), rows after alone, rows after with fence (None: the
# same), stamps after with fence.
SCENARIOS = [
    ('insert', insert, [101], ['saved'], None, '101:new:1', None, str(HOLDER)),
    ('two_copies', two_copies, [2], ['saved', 'saved', 'StaleDataError'], None, '2:r1:3', None, str(HOLDER)),
    ('flush_twice', flush_twice, [3], ['saved'], None, '3:b:3', None, str(HOLDER)),
    ('insert_flush_modify_flush', insert_flush_modify_flush, [104], ['saved'], None, '104:b:2', None,
     str(HOLDER)),
    ('saved_twice', saved_twice, [5], ['saved', 'saved'], None, '5:b:3', None, str(HOLDER)),
    ('stale_holder', stale_holder, [6], ['saved', 'saved'], ['saved', 'refused as stale'],
     '6:older:3', '6:newer:2', str(NEWER)),
    ('delete', delete, [7], ['deleted'], None, '-', None, '-'),
    ('delete_stale_copy', delete_stale_copy, [8], ['saved', 'StaleDataError'], None, '8:changed:2', None,
     str(HOLDER)),
]


def main():
    global BACKEND
    ap = argparse.ArgumentParser()
    ap.add_argument('--backend', choices=['pg', 'sqlite'], required=True)
    ap.add_argument('--db', required=True)
    ap.add_argument('--ext')
    ap.add_argument('--mode', choices=['plain', 'fenced', 'migrated', 'old_retrofit'], required=True)
    ap.add_argument('--impl', choices=['plpgsql', 'c'], default='plpgsql')
    ap.add_argument('--table', required=True)
    args = ap.parse_args()
    BACKEND = args.backend
    if args.backend == 'sqlite' and not args.ext:
        ap.error('--ext is needed with --backend sqlite')
    if args.backend == 'sqlite' and args.mode in ('migrated', 'old_retrofit'):
        ap.error('--mode %s is PostgreSQL\'s' % args.mode)
    label = 'sqlalchemy %s %s/%s%s' % (sqlalchemy.__version__, args.backend, args.mode,
                                       ':' + args.impl if args.backend == 'pg' and args.mode != 'plain' else '')
    fenced = args.mode in ('fenced', 'migrated')
    old = args.mode == 'old_retrofit'
    fails = 0

    def check(good, what):
        nonlocal fails
        print('%s - %s: %s' % ('ok' if good else 'not ok', label, what))
        fails += 0 if good else 1

    try:
        engine = make_engine(args)
        protected, cols = setup(args, engine)
    except Exception as e:  # the setup: a clear line, exit 2
        print('not ok - %s: setup: %s' % (label, e))
        return 2
    check(protected == (fenced or old) and ('fence_token' in cols) == fenced,
          'the table is %s (columns %s)' % ('protected' if protected else 'unprotected', ', '.join(cols)))
    run = Run(args, engine)
    for name, fn, ids, alone, with_fence, rows_alone, rows_fence, stamps in SCENARIOS:
        want = with_fence if fenced and with_fence is not None else alone
        want_rows = rows_fence if fenced and rows_fence is not None else rows_alone
        got = fn(run)
        rows = run.rows(ids)
        print('# outcome %s: %s | %s' % (name, ', '.join(got), rows))
        if old:
            continue
        check(got == want, '%s: %s (expected %s)' % (name, ', '.join(got), ', '.join(want)))
        check(rows == want_rows, '%s: rows after %s (expected %s)' % (name, rows, want_rows))
        if fenced:
            got_stamps = run.stamps(ids)
            check(got_stamps == stamps, '%s: fence_token %s (expected %s), lock_version the ORM\'s'
                  % (name, got_stamps, stamps))
    engine.dispose()
    return 1 if fails else 0


if __name__ == '__main__':
    sys.exit(main())
