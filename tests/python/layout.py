"""layout.py OUTDIR -- the package's ctypes mirrors of the C structs are the
C structs: a C program generated from fence._lib's field lists prints
sizeof and offsetof() of every field as the compiler lays them out (from
lib/common/fence_common.h and lib/lease/fence.h), and each must equal
ctypes'; the status numbers fence/_errors.py names are fence_common.h's;
the lease options the package builds in one step are, byte for byte, what
fence_lease_options_init() writes.  TAP lines on stdout."""
import ctypes
import os
import subprocess
import sys

from tap import ok, done
import fence
from fence import _lib, _errors

out = sys.argv[1]
lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "fence.h"', 'int main(void) {']
for cname, cls in _lib.STRUCTS.items():
    lines.append('    printf("%s sizeof %%zu\\n", sizeof(%s));' % (cname, cname))
    for field, _ in cls._fields_:
        lines.append('    printf("%s %s %%zu\\n", offsetof(%s, %s));' % (cname, field, cname, field))
statuses = {n: getattr(_errors, n) for n in ('OK', 'EINVAL', 'ESTATE', 'BUSY', 'TIMEOUT', 'LOST',
                                             'STALE', 'EDB', 'ENOTOKEN')}
for n in statuses:
    lines.append('    printf("status %s %%d\\n", (int)FENCE_%s);' % (n, n))
lines += ['    printf("limit FENCE_TOKEN_MAX %llu\\n", (unsigned long long)FENCE_TOKEN_MAX);',
          '    return 0;', '}']
src = os.path.join(out, 'layout.c')
with open(src, 'w') as fh:
    fh.write('\n'.join(lines) + '\n')
exe = os.path.join(out, 'layout')
cc = subprocess.run([os.environ.get('CC', 'cc'), '-std=c11', '-Ilib/common', '-Ilib/lease', '-o',
                     exe, src], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
if not ok(cc.returncode == 0, 'the layout program compiles against fence.h%s'
          % ('' if cc.returncode == 0 else ': ' + cc.stdout)):
    done()
c = {}
for line in subprocess.run([exe], stdout=subprocess.PIPE, text=True, check=True).stdout.split('\n'):
    if line:
        k1, k2, v = line.split(' ')
        c[(k1, k2)] = int(v)
for cname, cls in _lib.STRUCTS.items():
    bad = ['%s: C %d, ctypes %d' % (f, c[(cname, f)], getattr(cls, f).offset)
           for f, _ in cls._fields_ if c[(cname, f)] != getattr(cls, f).offset]
    ok(not bad and c[(cname, 'sizeof')] == ctypes.sizeof(cls),
       'struct %s: sizeof %d (ctypes %d) and every field at its C offset%s'
       % (cname, c[(cname, 'sizeof')], ctypes.sizeof(cls), (': ' + ', '.join(bad)) if bad else ''))
bad = [n for n, v in statuses.items() if c[('status', n)] != v]
ok(not bad, 'the status numbers fence names are fence_common.h\'s%s' % (': ' + ', '.join(bad) if bad else ''))
ok(c[('limit', 'FENCE_TOKEN_MAX')] == fence.FENCE_TOKEN_MAX, 'FENCE_TOKEN_MAX is 2^63-1')

lib = _lib.lib('fence')
mine = _lib.LeaseOptions(12345, 0, 0, 0)
theirs = _lib.LeaseOptions()
ctypes.memset(ctypes.byref(theirs), 0xA5, ctypes.sizeof(theirs))
lib.fence_lease_options_init(ctypes.byref(theirs), 12345)
ok(bytes(mine) == bytes(theirs),
   'a lease\'s options as the package builds them are fence_lease_options_init()\'s, byte for byte')
done()
