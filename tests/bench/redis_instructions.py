# redis_instructions.py -- the instructions a redis-server runs for the
# library's scripts, counted by callgrind (deterministic to ~2%, unlike
# wall-clock microseconds on a shared machine).  Run by
# tests/bench/redis_instructions.sh, which starts the server under
# callgrind (instrumentation on) and sets REDIS_PORT, VG_PID, VG_DIR.
#
# Prints "name value unit" lines, as the bench programs do:
#  1. redis_ir_per_cycle_{library,skeleton,floor}: one acquire.lua +
#     release.lua cycle (the library's arguments: clock tokens, 10 s jump,
#     one name, its counter there), the skeleton (the same commands with
#     constant arguments, no Lua logic; as in bench_redis_cost.c) and the
#     floor (SET NX PX + INCR, GET + DEL), and the ratios to the floor.
#     With a git ref as argument (redis_instructions.sh REF), also
#     redis_ir_per_cycle_ref: the scripts as they were at REF.
#  2. redis_ir_acquire_without_<piece>: instructions one acquire.lua call
#     (with a top-level DEL of the owner key) loses when one command is
#     replaced by a constant; the same for release.lua (with a SET).
# Everything runs from the source tree (lib/lease/redis/*.lua).
import glob
import os
import re
import socket
import subprocess
import sys

PORT, PID, DIR = int(os.environ['REDIS_PORT']), os.environ['VG_PID'], os.environ['VG_DIR']
OWNER = '0123456789abcdef0123456789abcdef'
ACQ_ARGS = (OWNER, 60000, 'clock', 10000000, 0, 86400000)
# Before issue 28 acquire.lua was one script for acquire ('a') and reissue.
OLD_ACQ_ARGS = ('a',) + ACQ_ARGS


class Redis:
    """A minimal RESP client: enough for EVALSHA, SET, DEL and INFO."""

    def __init__(self, port):
        self.sock = socket.create_connection(('127.0.0.1', port))
        self.buf = b''

    def _line(self):
        while b'\r\n' not in self.buf:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise EOFError('redis closed the connection')
            self.buf += chunk
        line, self.buf = self.buf.split(b'\r\n', 1)
        return line

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b'-':
            raise RuntimeError(rest.decode())
        if kind in (b'+', b':'):
            return int(rest) if kind == b':' else rest.decode()
        if kind == b'$':
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.sock.recv(1 << 16)
            value, self.buf = self.buf[:n], self.buf[n + 2:]
            return value.decode()
        if kind == b'*':
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise RuntimeError('bad reply %r' % line)

    def cmd(self, *args):
        out = [b'*%d\r\n' % len(args)]
        for a in args:
            a = str(a).encode()
            out.append(b'$%d\r\n%s\r\n' % (len(a), a))
        self.sock.sendall(b''.join(out))
        return self._reply()


def instructions(fn, n):
    """Server instructions per call of fn, over n calls (callgrind: zero,
    run, dump; the dump's summary line is the total since the zero)."""
    subprocess.run(['callgrind_control', '-z', PID], check=True, capture_output=True)
    for _ in range(n):
        fn()
    for f in glob.glob(DIR + '/callgrind.out.*'):
        os.unlink(f)
    subprocess.run(['callgrind_control', '-d', PID], check=True, capture_output=True)
    for f in glob.glob(DIR + '/callgrind.out.*'):
        for line in open(f):
            if line.startswith('summary:'):
                return int(line.split()[1]) / n
    sys.exit('redis_instructions: no callgrind dump in %s' % DIR)


def edit(body, old, new):
    if old not in body:
        sys.exit('redis_instructions: the script no longer contains %r' % old)
    return body.replace(old, new)


FLOOR_ACQ = ("if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
             "return redis.call('INCR', KEYS[2]) end return 0")
FLOOR_REL = ("if redis.call('GET', KEYS[1]) == ARGV[1] then "
             "return redis.call('DEL', KEYS[1]) end return 0")
SKEL_ACQ = ("redis.call('GET', KEYS[1]) redis.call('HMGET', KEYS[2], 'n', 'run', 't', 'm') "
            "redis.call('INFO', 'replication') redis.call('TIME') "
            "redis.call('HSET', KEYS[2], 'n', '1796165367735919', 't', '1796165367735919') "
            "redis.call('PEXPIREAT', KEYS[2], '1796251767736') "
            "redis.call('SET', KEYS[1], ARGV[1] .. ':1796165367735919', 'PX', ARGV[2]) "
            "return {1, '1796165367735919'}")
SKEL_REL = ("if redis.call('GET', KEYS[1]) == ARGV[1] then "
            "redis.call('DEL', KEYS[1], KEYS[1] .. ':info') "
            "redis.call('PUBLISH', ARGV[2], '1') return 1 end return 0")


def main():
    r = Redis(PORT)
    # issue.lua in front of acquire.lua, as the Redis issuer loads it.
    acquire = open('lib/lease/redis/issue.lua').read() + '\n' + \
        open('lib/lease/redis/acquire.lua').read()
    release = open('lib/lease/redis/release.lua').read()
    args = {'library': ACQ_ARGS, 'skeleton': ACQ_ARGS}
    load = lambda body: r.cmd('SCRIPT', 'LOAD', body)

    # 1. whole cycles
    pairs = {'library': (load(acquire), load(release)), 'skeleton': (load(SKEL_ACQ), load(SKEL_REL))}
    floor = (load(FLOOR_ACQ), load(FLOOR_REL))

    def cycle(kind):
        key, counter = 'fence:{ir-%s}' % kind, 'fence:{ir-%s}:token' % kind
        if kind == 'floor':
            if r.cmd('EVALSHA', floor[0], 2, key, counter, OWNER, 60000) < 1 or \
               r.cmd('EVALSHA', floor[1], 1, key, OWNER) != 1:
                sys.exit('redis_instructions: the floor cycle failed')
            return
        acq, rel = pairs[kind]
        rep = r.cmd('EVALSHA', acq, 2, key, counter, *args[kind])
        if rep[0] != 1 or r.cmd('EVALSHA', rel, 1, key, '%s:%s' % (OWNER, rep[1]),
                                key + ':released') != 1:
            sys.exit('redis_instructions: the %s cycle failed: %r' % (kind, rep))

    kinds = ['library', 'skeleton', 'floor']
    if len(sys.argv) > 1:
        def show(f):
            return subprocess.run(['git', 'show', '%s:%s' % (sys.argv[1], f)],
                                  capture_output=True, text=True)
        issue = show('lib/lease/redis/issue.lua')
        if issue.returncode == 0:
            old = [issue.stdout + '\n' + show('lib/lease/redis/acquire.lua').stdout,
                   show('lib/lease/redis/release.lua').stdout]
            args['ref'] = ACQ_ARGS
        else:
            old = [show('lib/lease/acquire.lua').stdout, show('lib/lease/release.lua').stdout]
            args['ref'] = OLD_ACQ_ARGS
        pairs['ref'] = (load(old[0]), load(old[1]))
        kinds.insert(1, 'ref')
    for k in kinds:  # warm: the counters exist, the scripts are compiled
        for _ in range(50):
            cycle(k)
    ir = {k: instructions(lambda k=k: cycle(k), 500) for k in kinds}
    print('# server instructions per acquire+release cycle (callgrind), 500 cycles each')
    for k in kinds:
        print('redis_ir_per_cycle_%s %.0f Ir' % (k, ir[k]))
    for k in kinds[:-1]:
        print('redis_ir_per_cycle_%s_vs_floor_ratio %.2f x' % (k, ir[k] / ir['floor']))

    # 2. acquire.lua and release.lua, one command replaced at a time
    key, counter = 'fence:{ir-piece}', 'fence:{ir-piece}:token'
    inc = r.cmd('EVAL', "local s = redis.call('INFO', 'server', 'replication') "
                "return string.match(s, 'run_id:(%x+)') .. ':' .. string.match(s, 'master_replid:(%x+)')", 0)
    acq_pieces = [
        ('get', "local v = redis.call('GET', KEYS[1])", "local v = nil"),
        ('hmget', "local h = redis.pcall('HMGET', key, 'n', 'run', 't', 'm')",
         "local h = {'1796165367735919', '%s', '1796165367735919', 'clock'}" % inc),
        ('info', "local function incarnation(run)\n", "local function incarnation(run)\n  do return run end\n"),
        ('time', "local t = redis.call('TIME')", "local t = {'1796165367', '735919'}"),
        ('hset', "redis.call('HSET', key, 'n', s, 't', string.format('%d', now))",
         "local _ = string.format('%d', now)"),
        ('pexpireat', "redis.call('PEXPIREAT', key, string.format('%d', math.floor(token / 1000) + 1 + idle_ms))",
         "local _ = string.format('%d', math.floor(token / 1000) + 1 + idle_ms)"),
        ('set', "redis.call('SET', KEYS[1], ARGV[1] .. ':' .. token, 'PX', ARGV[2])",
         "local _ = ARGV[1] .. ':' .. token"),
    ]
    rel_pieces = [
        ('del', "    redis.call('DEL', KEYS[1], KEYS[1] .. ':info')\n", ""),
        ('publish', "  redis.call('PUBLISH', ARGV[2], '1')\n", ""),
    ]

    def acq_call(sha):
        r.cmd('EVALSHA', sha, 2, key, counter, *ACQ_ARGS)
        r.cmd('DEL', key)

    def rel_call(sha):
        r.cmd('SET', key, OWNER + ':1', 'PX', 60000)
        r.cmd('EVALSHA', sha, 1, key, OWNER + ':1', key + ':released')

    def measure(call, body):
        sha = load(body)
        for _ in range(20):
            call(sha)
        return instructions(lambda: call(sha), 300)

    print('# one acquire.lua call + a top-level DEL, and what each command costs in it '
          '(replaced by a constant), 300 calls each')
    base = measure(acq_call, acquire)
    print('redis_ir_acquire_lua %.0f Ir' % base)
    for name, old, new in acq_pieces:
        print('redis_ir_acquire_without_%s %.0f Ir' % (name, base - measure(acq_call, edit(acquire, old, new))))
    print('redis_ir_acquire_skeleton %.0f Ir' % measure(acq_call, SKEL_ACQ))
    print('redis_ir_acquire_return1 %.0f Ir' % measure(acq_call, 'return 1'))
    print('# one release.lua call + a top-level SET, the same way')
    base = measure(rel_call, release)
    print('redis_ir_release_lua %.0f Ir' % base)
    for name, old, new in rel_pieces:
        print('redis_ir_release_without_%s %.0f Ir' % (name, base - measure(rel_call, edit(release, old, new))))
    print('redis_ir_release_return1 %.0f Ir' % measure(rel_call, 'return 1'))


main()
