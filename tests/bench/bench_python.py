#!/usr/bin/python3
"""bench_python.py BUILD_DIR -- what a lease costs from Python: acquire +
release cycles per second through the Python package (python/fence, over
BUILD_DIR's libfence.so.0), the C client doing the same cycle
(bench_python_c, a process of its own, told each round's count on a pipe),
and redis-py's Lock (Debian's python3-redis: SET NX PX, then its release
script; also a process of its own, so that no side's interpreter state
weighs on another's), all three on the same Redis ($FENCE_TEST_REDIS_URL, make bench's
scripts/with-servers), one client each, one name each, try-once and a TTL
of 60 s.  ROUNDS rounds of CYCLES cycles each, the three interleaved in a
rotating order (so a noisy moment of this shared machine falls on each in
turn); medians of the per-round rates, and of the per-round ratios.  One figure per line, "name value
unit": the three rates, and the two ratios with a goal
(scripts/run-bench): python_vs_c_acquire_release_ratio (Python's rate over
C's, >= 0.9) and python_vs_redis_py_lock_ratio (over redis-py's, >= 1).
Run through make bench, or:
    scripts/with-servers --redis -- build/tests/bench/bench_python"""
import os
import statistics
import subprocess
import sys
import time

ROUNDS, CYCLES, TTL_MS = 21, 1000, 60000

build = sys.argv[1] if len(sys.argv) > 1 else 'build'
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, '..', '..', 'python'))
os.environ.setdefault('FENCE_LIBDIR', build)
import fence   # noqa: E402
import redis   # noqa: E402,F401  (python3-redis: fail here, loudly, when missing)

url = os.environ.get('FENCE_TEST_REDIS_URL')
if not url:
    sys.exit('bench_python: FENCE_TEST_REDIS_URL is not set (run under scripts/with-servers --redis)')
tag = 'bench-py-%d' % os.getpid()

c_side = subprocess.Popen([os.path.join(build, 'tests', 'bench', 'py', 'bench_python_c'), url,
                           tag + '-c', str(TTL_MS)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def c_round(n):
    return 1e9 / ask(c_side, n, 'bench_python_c')   # it answers ns per cycle


client = fence.Client(url)


def py_round(n):
    name = tag + '-py'
    t0 = time.perf_counter()
    for _ in range(n):
        with client.lease(name, TTL_MS):
            pass
    return n / (time.perf_counter() - t0)


# redis-py in a process of its own, as the C client is: each side's
# interpreter state (objects, caches) stays its own.
REDIS_PY = r"""
import sys, time, redis
r = redis.Redis.from_url(sys.argv[1])
for line in sys.stdin:
    n = int(line)
    t0 = time.perf_counter()
    for _ in range(n):
        with r.lock(sys.argv[2], timeout=int(sys.argv[3]) / 1000, blocking=False):
            pass
    print(n / (time.perf_counter() - t0), flush=True)
"""
redis_py_side = subprocess.Popen([sys.executable, '-c', REDIS_PY, url, tag + '-redis-py', str(TTL_MS)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def ask(side, n, what):
    """One round on a helper process: its rate (cycles/s)."""
    side.stdin.write('%d\n' % n)
    side.stdin.flush()
    line = side.stdout.readline()
    if not line:
        sys.exit('bench_python: %s ended (exit %s)' % (what, side.wait()))
    return float(line)


def redis_py_round(n):
    return ask(redis_py_side, n, 'the redis-py side')


sides = [('c', c_round), ('python', py_round), ('redis_py', redis_py_round)]
rates = {k: [] for k, _ in sides}
for _, fn in sides:          # warm-up: connections, script caches
    fn(CYCLES // 4)
for i in range(ROUNDS):
    for k, fn in sides[i % 3:] + sides[:i % 3]:
        rates[k].append(fn(CYCLES))
for side in (c_side, redis_py_side):
    side.stdin.close()
    side.wait()
client.close()

med = {k: statistics.median(v) for k, v in rates.items()}


def ratio(a, b):
    """The median over rounds of a's rate over b's in the same round (the
    three of a round run back to back: a drift of the machine's load
    between rounds cancels out)."""
    return statistics.median(x / y for x, y in zip(rates[a], rates[b]))


print('python_acquire_release_per_s %.0f cycles/s' % med['python'])
print('c_acquire_release_per_s %.0f cycles/s' % med['c'])
print('redis_py_lock_per_s %.0f cycles/s' % med['redis_py'])
print('python_vs_c_acquire_release_ratio %.3f x' % ratio('python', 'c'))
print('python_vs_redis_py_lock_ratio %.3f x' % ratio('python', 'redis_py'))
