#!/usr/bin/env python3
"""variants.py -- prints the SQL of parts.c's variants: fence.sql's
lease_acquire and lease_release (sql/postgres/75-leases.sql) copied into
schemas bx1..bx8 with one part changed, the copy tables bench_plain (fence.leases'
columns without its CHECKs and triggers) and bench_checks (with the CHECKs, no triggers), the floor's table, and a row per
name.  A measurement tool: nothing of it is installed anywhere else."""
import re

SRC = open('sql/postgres/75-leases.sql').read()


def fn(name):
    i = SRC.index('CREATE OR REPLACE FUNCTION fence.%s(' % name)
    return SRC[i:SRC.index('$$;', SRC.index('AS $$', i)) + 3]


def variant(schema, body, secdef=True, path=True, notify=True, setcfg=True, marks=True, generic=False, table=None):
    b = body.replace('FUNCTION fence.', 'FUNCTION %s.' % schema)
    if table is not None:
        b = b.replace('fence.leases', table)
    pin = 'SET search_path = pg_catalog, pg_temp\n'
    if not secdef:
        b = b.replace(' SECURITY DEFINER', '')
    if not path:
        b = b.replace(pin, '')
    if generic:
        b = b.replace(pin, pin + 'SET plan_cache_mode = force_generic_plan\n')
    if not notify:
        b = b.replace("    PERFORM pg_catalog.pg_notify('fence_lease_released', lease_release.name);\n", '')
    if not setcfg:
        b = re.sub(r"    IF pg_catalog.current_setting\('synchronous_commit'\).*?END IF;\n", '', b, flags=re.S)
    if not marks:
        b = b.replace("COALESCE((SELECT m.token FROM fence.marks m WHERE m.resource = l.name), 0)", "0")
    return b


ACQ, REL = fn('lease_acquire'), fn('lease_release')
out = ['DROP SCHEMA IF EXISTS bx1, bx2, bx3, bx4, bx5, bx6, bx7, bx8 CASCADE;',
       'CREATE SCHEMA bx1; CREATE SCHEMA bx2; CREATE SCHEMA bx3; CREATE SCHEMA bx4; CREATE SCHEMA bx5; CREATE SCHEMA bx6;'
       ' CREATE SCHEMA bx7; CREATE SCHEMA bx8;',
       'CREATE TABLE bench_floor (id int PRIMARY KEY, v bigint NOT NULL);',
       'INSERT INTO bench_floor VALUES (1, 0);',
       'CREATE TABLE bench_plain (LIKE fence.leases INCLUDING DEFAULTS, PRIMARY KEY (name));',
       "INSERT INTO bench_plain (name) VALUES ('n-plain'), ('n-bx7');",
       'CREATE TABLE bench_checks (LIKE fence.leases INCLUDING DEFAULTS INCLUDING CONSTRAINTS, PRIMARY KEY (name));',
       "INSERT INTO bench_checks (name) VALUES ('n-bx8');",
       "INSERT INTO fence.leases (name) VALUES ('n-fence'), ('n-bx1'), ('n-bx2'), ('n-bx3'), ('n-bx4'), ('n-bx5'),"
       " ('n-bx6'), ('n-raw'), ('n-rawn'), ('n-rawm');"]
# bx1: no SECURITY DEFINER, no SET search_path; bx2: SECURITY DEFINER alone
out += [variant('bx1', ACQ, secdef=False, path=False), variant('bx1', REL, secdef=False, path=False)]
out += [variant('bx2', ACQ, path=False), variant('bx2', REL, path=False)]
# bx3: no NOTIFY; bx4: no synchronous_commit check; bx5: no fence.marks lookup
out += [variant('bx3', ACQ),
        variant('bx3', REL, notify=False)]
out += [variant('bx4', ACQ, setcfg=False), variant('bx4', REL)]
out += [variant('bx5', ACQ, marks=False), variant('bx5', REL)]
# bx6: generic plans for the statements inside (plan_cache_mode)
out += [variant('bx6', ACQ, generic=True), variant('bx6', REL, generic=True)]
# bx7: on bench_plain (no CHECKs, no triggers); bx8: on bench_checks (the
# CHECKs, no triggers)
out += [variant('bx7', ACQ, table='public.bench_plain'), variant('bx7', REL, table='public.bench_plain')]
out += [variant('bx8', ACQ, table='public.bench_checks'), variant('bx8', REL, table='public.bench_checks')]
print('\n'.join(out))
