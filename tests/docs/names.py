#!/usr/bin/env python3
"""names.py FILE... -- every name and version these Markdown pages quote
exists in the code, for tests/docs/test_docs.sh.  Prints one "ok - ..."
line per file whose names all check, one "not ok - FILE:LINE: ..." line per
name that does not; exits 1 on any.  Everything is read from the code at
run time; nothing here lists a name or a version.

What a page may name (anywhere in it, code blocks included):
  fence.NAME(   an SQL function CREATEd by sql/postgres/*.sql (fence.sql)
                or lib/pgext/fence--*.sql (the extension), or a table of
                theirs shown with its columns, fence.marks(token, holder);
  fence.NAME    the same, or a table, view or setting of theirs
                (fence.marks, fence.protected, fence.token ...); file names
                (fence.sql, fence.so, fence.h, fence.c, fence.control,
                fence.pc, fence.pml) and placeholders (fence.guard_<oid>)
                are not names;
  fence_NAME    an identifier of the code: lib/, cli/, sql/ (C, Lua, SQL,
                comments left out), the Makefiles and scripts/, a file's
                base name in the repository (tests/pg/fence_v4.sql), or a
                name a C file composes with a "fence_%s" format from its
                string literals (the metrics, fence_renew_ok_total);
  a SQLSTATE    fence's own class 23Q (23Q01 ...) must be raised by the
                code (ERRCODE = '23Q0N' in SQL, MAKE_SQLSTATE in C); any
                other must be one of PostgreSQL's (utils/errcodes.h of
                pg_config --includedir-server).  A SQLSTATE is a 5-character
                code with a letter (23Q02, 42P05, 3F000), or 5 digits
                written as one (`42501`, (42501), SQLSTATE 42501,
                "ERROR:  42501:");
  reason=WORD   WORD (each of reason=a|b) must be a reason the code writes
                (reason=WORD in lib/ or sql/, comments left out).
Versions a page quotes, against the code's own:
  fence.sql's schema version  fence.version()'s body (sql/postgres/
      20-version.sql); "fence.sql N", "fence.sql version N", "version N"
      (in postgres*.md and history.md), "schema version N";
  the extension's default_version  lib/pgext/fence.control; "extension
      1.N", "version 1.N", "builds 1.N", ranges and lists of them;
  the module's interface revision  FENCE_EXT_VERSION (lib/pgext/
      fence_ext.h): "c_version() ... returns/returning N";
  the libraries' version  VERSION in the Makefile: "fence 0.N",
      "libfence_pg 0.N";
  the SQLite schema version, if the code has one (PRAGMA user_version = N
      in sql/sqlite or lib/sqlite): "SQLite schema version N".
Each must be at most the code's (no version that does not exist).  Where a
page says which version is *current* -- "the current version is N",
"schema version (N)", fence.version() "returns ... (N)" / "is N",
"default_version" in the same sentence, c_version() returns N -- it must be
the code's exactly.
The rule for history: docs/history.md describes what earlier versions had,
so its fence.NAME, fence_NAME, SQLSTATE and reason= names are not looked up
(they may be gone); its versions are checked like any page's, current
claims included.  Every other page names only what exists."""
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
HISTORY = 'history.md'
FILE_EXTS = {'sql', 'so', 'h', 'c', 'control', 'pc', 'pml', 'md', 'in', 'mk'}


def read(rel):
    with open(os.path.join(ROOT, rel), encoding='utf-8', errors='replace') as fh:
        return fh.read()


def files(top, exts):
    out = []
    for d, subdirs, names in os.walk(os.path.join(ROOT, top)):
        subdirs[:] = [s for s in subdirs if s not in ('.git', 'build')]
        for n in names:
            if n.rsplit('.', 1)[-1] in exts or n in exts:
                out.append(os.path.relpath(os.path.join(d, n), ROOT))
    return sorted(out)


def strip_c(text):
    """C source without its comments (string and character literals kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            i = n if j < 0 else j + 2
            out.append(' ')
        elif text.startswith('//', i):
            j = text.find('\n', i)
            i = n if j < 0 else j
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def strip_dashes(text):
    """SQL or Lua without its -- comments (a -- inside a '...' string kept)."""
    text = re.sub(r'--\[\[.*?\]\]', ' ', text, flags=re.S)
    out = []
    for line in text.split('\n'):
        quoted = False
        for k, ch in enumerate(line):
            if ch == "'":
                quoted = not quoted
            elif not quoted and line.startswith('--', k):
                line = line[:k]
                break
        out.append(line)
    return '\n'.join(out)


def strip_hash(text):
    return '\n'.join(re.sub(r'(^|\s)#.*$', r'\1', l) for l in text.split('\n'))


class Code:
    """What the code defines, raises and says its versions are."""

    def __init__(self):
        self.sql = {p: strip_dashes(read(p)) for p in
                    files('sql/postgres', {'sql'}) + files('lib/pgext', {'sql'})}
        allsql = '\n'.join(self.sql.values())
        self.functions = set(re.findall(
            r'CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+fence\.(\w+)\s*\(', allsql, re.I))
        self.relations = set(re.findall(
            r'CREATE\s+(?:OR\s+REPLACE\s+)?(?:VIEW|TABLE(?:\s+IF\s+NOT\s+EXISTS)?)\s+fence\.(\w+)',
            allsql, re.I))
        csrc = {p: strip_c(read(p)) for p in files('lib', {'c', 'h'}) + files('cli', {'c', 'h'})}
        self.settings = set(re.findall(r"(?:set_config|current_setting)\(\s*'fence\.(\w+)'", allsql))
        for text in csrc.values():
            self.settings |= set(re.findall(r'"fence\.(\w+)"', text))
        other = {}
        for p in files('lib', {'lua'}) + files('sql', {'sql'}):
            other[p] = strip_dashes(read(p))
        for p in ['Makefile'] + files('.', {'mk'}) + files('scripts', {'sh'}) + \
                [os.path.join('scripts', n) for n in os.listdir(os.path.join(ROOT, 'scripts'))
                 if '.' not in n]:
            other[p] = strip_hash(read(p))
        for p in files('lib', {'in', 'control'}) + files('cli', {'in'}):
            other[p] = read(p)
        everything = list(csrc.values()) + list(other.values())
        self.idents = set()
        for text in everything:
            self.idents |= set(re.findall(r'\bfence_[A-Za-z0-9_]+', text))
        # Names the code composes from a "fence_%s" format and string
        # literals of the same file (the metrics' names).
        self.literals = set()
        for text in csrc.values():
            if 'fence_%s' in text:
                self.literals |= set(re.findall(r'"([a-z][a-z0-9_]*)"', text))
        for d, subdirs, names in os.walk(ROOT):
            subdirs[:] = [s for s in subdirs if s not in ('.git', 'build', 'docs')]
            for n in names:
                self.idents.add(n.split('.', 1)[0])
        code = list(csrc.values()) + [strip_dashes(read(p)) for p in files('sql', {'sql'})] + \
            list(self.sql.values())
        self.reasons = set()
        for text in code:
            self.reasons |= set(re.findall(r'reason=([a-z_]+)', text))
        self.raised = set()
        for text in code:
            self.raised |= set(re.findall(r"ERRCODE\s*=\s*'([0-9A-Z]{5})'", text))
            for m in re.findall(r"MAKE_SQLSTATE\(((?:\s*'.'\s*,?){5})\)", text):
                self.raised.add(''.join(re.findall(r"'(.)'", m)))
        self.pg_sqlstates = set()
        try:
            inc = subprocess.run(['pg_config', '--includedir-server'], capture_output=True,
                                 text=True, check=True).stdout.strip()
            with open(os.path.join(inc, 'utils', 'errcodes.h')) as fh:
                for m in re.findall(r"MAKE_SQLSTATE\(((?:\s*'.'\s*,?){5})\)", fh.read()):
                    self.pg_sqlstates.add(''.join(re.findall(r"'(.)'", m)))
        except (OSError, subprocess.CalledProcessError):
            pass
        self.versions = {}
        self.errors = []
        m = re.search(r'FUNCTION\s+fence\.version\(\).*?\$\$\s*SELECT\s+(\d+)\s*\$\$',
                      read('sql/postgres/20-version.sql'), re.S)
        self.versions['schema'] = int(m.group(1)) if m else None
        m = re.search(r"^default_version\s*=\s*'(\d+)\.(\d+)'", read('lib/pgext/fence.control'), re.M)
        self.versions['extension'] = (int(m.group(1)), int(m.group(2))) if m else None
        m = re.search(r'#define\s+FENCE_EXT_VERSION\s+(\d+)', read('lib/pgext/fence_ext.h'))
        self.versions['c_version'] = int(m.group(1)) if m else None
        m = re.search(r'^VERSION\s*:?=\s*(\d+)\.(\d+)', read('Makefile'), re.M)
        self.versions['library'] = (int(m.group(1)), int(m.group(2))) if m else None
        self.versions['sqlite'] = None
        for p in files('sql/sqlite', {'sql'}) + files('lib/sqlite', {'c', 'h', 'sql'}):
            m = re.search(r'user_version\s*=\s*(\d+)', read(p), re.I)
            if m:
                self.versions['sqlite'] = int(m.group(1))
        for what in ('schema', 'extension', 'c_version', 'library'):
            if self.versions[what] is None:
                self.errors.append('cannot read the %s version from the code' % what)
        if not self.functions or not self.reasons or not self.raised:
            self.errors.append('found no SQL functions, reasons or SQLSTATEs in the code')
        if not self.pg_sqlstates:
            self.errors.append("cannot read PostgreSQL's SQLSTATEs (pg_config --includedir-server"
                               "/utils/errcodes.h: postgresql-server-dev-15, scripts/install-deps)")


SQLSTATE_LETTER = re.compile(r'(?<![\w.$-])([0-9][0-9A-Z]{4})(?![\w-])')
SQLSTATE_DIGITS = re.compile(r'(?:`(\d{5})`|\((\d{5})[),;]|SQLSTATEs? (\d{5})\b|ERROR: +(\d{5}):'
                             r'|\b(\d{5}) `reason=)')
EXT_LIST = r"'?(1\.\d+)'?((?:\s*(?:,|or|and|to|-|–|/)\s*'?1\.\d+'?)*)"


def dotted(s):
    return tuple(int(x) for x in s.split('.'))


def show(v):
    return '.'.join(str(x) for x in v) if isinstance(v, tuple) else str(v)


def _reporters(code, path, n, bad):
    v = code.versions

    def over(kind, got, what):
        if v[kind] is not None and got > v[kind]:
            bad.append('%s:%d: %s %s: the code\'s is %s (no such version)'
                       % (path, n, what, show(got), show(v[kind])))

    def current(kind, got, what):
        if v[kind] is not None and got != v[kind]:
            bad.append('%s:%d: %s is %s here, %s in the code' % (path, n, what, show(got), show(v[kind])))
    return over, current


def check_sentence(code, path, n, sentence, bad):
    """The claims of which version is current, in one sentence (it may
    span lines: n is the line it starts on)."""
    over, current = _reporters(code, path, n, bad)
    for m in re.finditer(r'fence\.version\(\)`?[^.;]*?(?:\((\d+)\)|\b(?:returns|is) (\d+)\b(?!\.\d))', sentence):
        current('schema', int(m.group(1) or m.group(2)), 'fence.version()')
    k = sentence.find('default_version')
    if k >= 0:
        before = re.findall(r"(?<![\d.])(1\.\d+)(?![\d.])", sentence[:k])
        after = re.findall(r"(?<![\d.])(1\.\d+)(?![\d.])", sentence[k:])
        if before or after:
            current('extension', dotted((before or [None])[-1] or after[0]),
                    "the extension's default_version")
    for m in re.finditer(r'c_version\(\)`?[^.;]*?\b(?:returns|returning|revision,?) \(?(\d+)\b', sentence):
        if os.path.basename(path) == HISTORY:
            over('c_version', int(m.group(1)), 'fence.c_version()')
        else:
            current('c_version', int(m.group(1)), 'fence.c_version()')


def check_versions(code, path, n, line, bad):
    """The versions one line quotes."""
    v = code.versions
    base = os.path.basename(path)
    over, current = _reporters(code, path, n, bad)
    # fence.sql's schema version.
    for m in re.finditer(r'fence\.sql(?:\'s)?(?: schema)?(?: version)? (\d+)\b(?!\.\d)', line):
        over('schema', int(m.group(1)), 'fence.sql version')
    for m in re.finditer(r'schema version (\d+)\b(?!\.\d)', line):
        if 'SQLite' not in line[max(0, m.start() - 10):m.start()]:
            over('schema', int(m.group(1)), 'schema version')
    if base.startswith('postgres') or base == HISTORY:
        for m in re.finditer(r'\b[Vv]ersions? (\d+)\b(?![.\d])((?:(?:, | or | and |-)\d+\b(?![.\d]))*)', line):
            for x in [m.group(1)] + re.findall(r'\d+', m.group(2)):
                over('schema', int(x), 'fence.sql version')
    for m in re.finditer(r'current (?:schema )?version is `?(\d+)`?\b(?!\.\d)', line):
        current('schema', int(m.group(1)), 'the current schema version')
    for m in re.finditer(r'schema version \((\d+)\)', line):
        current('schema', int(m.group(1)), 'the schema version')
    # The extension's version.
    for m in re.finditer(r'(?:[Ee]xtension|[Vv]ersions?|VERSION|builds?|TO|[Ff]rom)\s+' + EXT_LIST, line):
        for x in [m.group(1)] + re.findall(r'1\.\d+', m.group(2)):
            over('extension', dotted(x), 'extension version')
    for m in re.finditer(r'fence--(1\.\d+)(?:--(1\.\d+))?\.sql', line):
        for x in m.groups():
            if x:
                over('extension', dotted(x), 'extension script version')
    for m in re.finditer(r"extension's version is `?'?(1\.\d+)", line):
        current('extension', dotted(m.group(1)), "the extension's version")
    # The libraries.
    for m in re.finditer(r'\b(?:[Ff]ence|libfence\w*)`? (0\.\d+)(?:\.\d+)?\b((?:(?:/| and | or )0\.\d+)*)', line):
        for x in [m.group(1)] + re.findall(r'0\.\d+', m.group(2)):
            over('library', dotted(x), 'library version')
    # SQLite.
    for m in re.finditer(r'SQLite schema version (\d+)|user_version\D{0,5}(\d+)', line):
        got = int(m.group(1) or m.group(2))
        if v['sqlite'] is None:
            bad.append('%s:%d: SQLite schema version %d: the code has none' % (path, n, got))
        else:
            current('sqlite', got, 'the SQLite schema version')


def _line_of(para, offset):
    """The index of the line of para (joined by spaces) at offset."""
    total = 0
    for i, l in enumerate(para):
        total += len(l) + 1
        if offset < total:
            return i
    return len(para) - 1


def check_file(code, path):
    text = open(path, encoding='utf-8').read()
    lines = text.split('\n')
    history = os.path.basename(path) == HISTORY
    bad = []
    # The claims of the current version, sentence by sentence (a sentence
    # may span lines; a paragraph ends at a blank line, a heading, a table
    # row or a code fence).
    para, first = [], 1
    for n, line in enumerate(lines + [''], 1):
        if line.strip() and not line.startswith(('#', '|', '```')):
            if not para:
                first = n
            para.append(line)
            continue
        if line.startswith('|'):
            check_sentence(code, path, n, line, bad)
        text = ' '.join(para)
        pos = 0
        for sent in re.split(r'(?<=[.;])\s+', text):
            k = text.find(sent, pos)
            pos = k + len(sent)
            check_sentence(code, path, first + _line_of(para, k), sent, bad)
        para = []
    for n, line in enumerate(lines, 1):
        check_versions(code, path, n, line, bad)
        if history:
            continue
        for m in re.finditer(r'(?<![\w.])fence\.([A-Za-z_][A-Za-z0-9_]*)(\(|<|\.in\b)?', line):
            name, after = m.group(1), m.group(2) or ''
            if name in FILE_EXTS or after in ('<', '.in') or name.endswith('_') and after == '<':
                continue
            if after == '(':   # a function, or a table shown with its columns
                if name not in code.functions | code.relations:
                    bad.append('%s:%d: SQL function fence.%s() is created by no sql/postgres or lib/pgext script'
                               % (path, n, name))
            elif name not in code.functions | code.relations | code.settings:
                bad.append('%s:%d: fence.%s is no function, table, view or setting of sql/postgres or lib/pgext'
                           % (path, n, name))
        for m in re.finditer(r'(?<![\w.$/-])(fence_[A-Za-z0-9_]+)', line):
            name = m.group(1).rstrip('_')
            if name not in code.idents and m.group(1) not in code.idents \
                    and name[len('fence_'):] not in code.literals:
                bad.append('%s:%d: %s is in no source of lib/, cli/, sql/, scripts/ or the Makefiles'
                           % (path, n, m.group(1)))
        seen = set(m.group(1) for m in SQLSTATE_LETTER.finditer(line) if re.search('[A-Z]', m.group(1)))
        for m in SQLSTATE_DIGITS.finditer(line):
            seen.add(next(g for g in m.groups() if g))
        for st in sorted(seen):
            if st.startswith('23Q'):
                if st not in code.raised:
                    bad.append('%s:%d: SQLSTATE %s is raised nowhere in the code' % (path, n, st))
            elif st not in code.pg_sqlstates:
                bad.append("%s:%d: SQLSTATE %s is not one of PostgreSQL's (utils/errcodes.h)"
                           % (path, n, st))
        for m in re.finditer(r'reason=([a-z_]+(?:\|[a-z_]+)*)', line):
            for r in m.group(1).split('|'):
                if r not in code.reasons:
                    bad.append('%s:%d: reason=%s is written nowhere in the code' % (path, n, r))
    return list(dict.fromkeys(bad))   # a version two patterns found, once


def main(paths):
    code = Code()
    for e in code.errors:
        print('not ok - names.py: %s' % e)
    if code.errors:
        return 1
    nbad = 0
    for path in paths:
        bad = check_file(code, path)
        for b in bad:
            print('not ok - %s' % b)
        if not bad and os.path.basename(path) == HISTORY:
            print('ok - %s: every version it quotes exists in the code (its names are history)' % path)
        elif not bad:
            print('ok - %s: every function, SQLSTATE, reason and version it names exists in the code'
                  % path)
        nbad += len(bad)
    return 1 if nbad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
