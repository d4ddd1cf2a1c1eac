"""txn_tap.py -- what txn_pysqlite.py and txn_sqlalchemy.py share: TAP-style
lines (check) and their count (failures())."""
_failures = [0]


def check(cond, what, detail=''):
    """Print "ok - WHAT" or "not ok - WHAT" and DETAIL as comments."""
    print(('ok - ' if cond else 'not ok - ') + what)
    if not cond:
        _failures[0] += 1
        for line in str(detail).splitlines():
            print('#   ' + line)


def failures():
    return _failures[0]
