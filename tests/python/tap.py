"""tap.py -- the TAP lines the tests/python suites print ("ok - ..." /
"not ok - ..."), as the other shell suites do, and the few helpers every
case file uses.  Imported by the case files; not a suite of its own."""
import os
import subprocess
import sys
import time

fails = 0


def ok(cond, what):
    """One check: a TAP line; returns cond."""
    global fails
    if not cond:
        fails += 1
    print('%s - %s' % ('ok' if cond else 'not ok', what.replace('\n', ' | ')), flush=True)
    return bool(cond)


def raises(exc_type, fn, what, check=None):
    """fn() must raise exc_type (and check(e), when given, be true); the
    line shows what it raised."""
    try:
        fn()
    except exc_type as e:
        good = check is None or check(e)
        return ok(good, '%s: %s(%s)' % (what, type(e).__name__, e))
    except BaseException as e:
        return ok(False, '%s: raised %s(%s), not %s' % (what, type(e).__name__, e,
                                                         exc_type.__name__))
    return ok(False, '%s: raised nothing (expected %s)' % (what, exc_type.__name__))


def wait_for(cond, seconds):
    """Poll cond() every 10 ms for up to seconds; its last value."""
    end = time.monotonic() + seconds
    while True:
        v = cond()
        if v or time.monotonic() >= end:
            return v
        time.sleep(0.01)


def redis_ctl(*args):
    """$FENCE_TEST_REDIS_CTL ARGS (scripts/redis-ctl: stop, start, cli ...):
    its stdout."""
    cmd = os.environ['FENCE_TEST_REDIS_CTL'].split() + list(args)
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True).stdout.strip()


def python(code, *args, timeout=30, **kw):
    """Run code in a new interpreter ($FENCE_PY, the suite's python3 with
    the sanitizer runtime when there is one: scripts/san-runtime), with
    this environment: (exit status, stdout, stderr)."""
    py = os.environ.get('FENCE_PY', sys.executable)
    p = subprocess.run([py, '-c', code] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=timeout, **kw)
    return p.returncode, p.stdout.strip(), p.stderr.strip()


def need_env(*names):
    missing = [n for n in names if not os.environ.get(n)]
    for n in missing:
        ok(False, 'environment: %s is set (run under scripts/with-servers)' % n)
    if missing:
        sys.exit(1)


def done():
    sys.exit(1 if fails else 0)
