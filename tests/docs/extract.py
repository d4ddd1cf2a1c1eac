#!/usr/bin/env python3
"""extract.py OUTDIR FILE... -- the code blocks of Markdown files, for
tests/docs/test_docs.sh (which documents the markers).  Writes
OUTDIR/NNN.c or OUTDIR/NNN.sh and prints one tab-separated line per
checked block:  NNN  FILE:LINE  LANG  MODE  SETUPS  PKGS  PROBLEM
(PROBLEM "-" when none; "-" also stands for an empty SETUPS or PKGS)."""
import os
import re
import sys

MARK = re.compile(r'^\s*<!--\s*doc-test:\s*(.*?)\s*-->\s*$')
FENCE = re.compile(r'^(\s*)```\s*([A-Za-z0-9_+-]*)\s*$')
PKG = re.compile(r'pkg-config --cflags --libs ([a-z0-9_ ]+?)\)')
C_MODES = ('program', 'fragment', 'compile-only')
SH_MODES = ('run', 'illustrative', 'paste')


def blocks(path):
    lines = open(path, encoding='utf-8').read().split('\n')
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        start = i
        j = i + 1
        while j < len(lines) and not re.match(r'^\s*```\s*$', lines[j]):
            j += 1
        body = [l[len(indent):] if l.startswith(indent) else l for l in lines[i + 1:j]]
        k = start - 1
        while k >= 0 and lines[k].strip() == '':
            k -= 1
        mark = MARK.match(lines[k]).group(1) if k >= 0 and MARK.match(lines[k]) else None
        after = '\n'.join(lines[j + 1:j + 4])
        yield start + 1, lang, body, mark, after
        i = j + 1


def parse_mark(mark):
    words = mark.split()
    mode = words[0] if words else ''
    opts = {}
    for w in words[1:]:
        if '=' in w:
            k, v = w.split('=', 1)
            opts[k] = v
    return mode, opts


def wrap_fragment(src, line, body, setups):
    """The fragment is the body of doc_fragment(); its leading #include
    lines go to file scope (blank lines keep the numbering)."""
    head, rest = [], []
    for n, l in enumerate(body):
        if l.startswith('#include') and all(x.startswith('#include') or x.strip() == ''
                                           for x in body[:n]):
            head.append(l)
            rest.append('')
        else:
            rest.append(l)
    out = ['/* %s:%d, wrapped by tests/docs/extract.py (setup: %s) */' % (src, line, ','.join(setups))]
    out += head
    out += ['#include "setup/%s.h"' % s for s in setups]
    out += ['static int doc_fragment(void);', 'static int doc_fragment(void)', '{',
            '#line %d "%s"' % (line + 1, src)]
    out += rest
    out += ['#line 1 "doc-test-main"', '    return 0;', '}', '', 'int main(void)', '{',
            '    int rc = 0;']
    out.append('    if (%s)' % ' || '.join('doc_setup_%s() != 0' % s for s in setups))
    out += ['        rc = 2;', '    else {', '        rc = doc_fragment();']
    for s in setups:
        out.append('        if (rc == 0 && doc_check_%s() != 0)' % s)
        out.append('            rc = 3;')
    out.append('    }')
    for s in reversed(setups):
        out.append('    doc_teardown_%s();' % s)
    out += ['    return rc;', '}', '']
    return '\n'.join(out)


def main():
    outdir, files = sys.argv[1], sys.argv[2:]
    n = 0
    for path in files:
        for line, lang, body, mark, after in blocks(path):
            where = '%s:%d' % (path, line)
            text = '\n'.join(body)
            if lang == 'c':
                n += 1
                nid = '%03d' % n
                problem = '-'
                mode, opts = parse_mark(mark) if mark else ('', {})
                setups = [s for s in opts.get('setup', '').split(',') if s]
                m = PKG.search(text) or PKG.search(after)
                pkgs = m.group(1).strip() if m else ''
                if mark is None:
                    problem = 'no <!-- doc-test: ... --> marker before this C block'
                elif mode not in C_MODES:
                    problem = 'unknown mode "%s" (program, fragment, compile-only)' % mode
                elif not pkgs:
                    problem = 'no "$(pkg-config --cflags --libs ...)" build line in or right after the block'
                elif mode == 'fragment' and not setups:
                    problem = 'a fragment needs setup=NAME[,NAME]'
                if mode == 'fragment' or (mode == 'compile-only' and setups):
                    code = wrap_fragment(path, line, body, setups)
                else:
                    code = '#line %d "%s"\n%s\n' % (line + 1, path, text)
                with open(os.path.join(outdir, nid + '.c'), 'w') as fh:
                    fh.write(code)
                print('\t'.join([nid, where, 'c', mode or '-', ','.join(setups) or '-',
                                 pkgs or '-', problem]))
            elif lang in ('sh', 'bash', 'console', 'sql'):
                n += 1
                nid = '%03d' % n
                mode = parse_mark(mark)[0] if mark else 'paste'
                problem = '-'
                if mode not in SH_MODES:
                    problem = 'unknown mode "%s" (run, illustrative)' % mode
                elif mode != 'illustrative':
                    for k, l in enumerate(body):
                        if '...' in l:
                            problem = ('line %d has "..." and would break when pasted: make it '
                                       'runnable or mark the block <!-- doc-test: illustrative -->'
                                       % (line + 1 + k))
                            break
                with open(os.path.join(outdir, nid + '.' + ('sql' if lang == 'sql' else 'sh')), 'w') as fh:
                    fh.write(text + '\n')
                print('\t'.join([nid, where, lang, mode, '-', '-', problem]))


main()
