#!/usr/bin/env python3
"""links.py FILE... -- every relative link of these Markdown files leads
somewhere: the file or folder exists and, for FILE.md#anchor (or #anchor
alone), a heading of that file has that anchor, as GitHub makes it.  For
tests/docs/test_docs.sh: prints one "ok - ..." line per file whose links
all resolve, one "not ok - ..." line per broken link; exits 1 on any.
Links to other sites (http:, https:, mailto:) are not fetched."""
import os
import re
import sys

LINK = re.compile(r'!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')
FENCE = re.compile(r'^\s*```')
CODE_SPAN = re.compile(r'`[^`]*`')


def prose(path):
    """(line number, text) of the lines outside code blocks, code spans blanked."""
    inside = False
    for n, line in enumerate(open(path, encoding='utf-8').read().split('\n'), 1):
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            yield n, CODE_SPAN.sub('', line)


def slug(heading):
    """GitHub's anchor for a heading: lowercase, punctuation dropped (but
    '-' and '_'), spaces to '-'."""
    s = heading.strip().lower()
    s = re.sub(r'[^\w\- ]', '', s)
    return s.replace(' ', '-')


def anchors(path):
    seen, out = {}, set()
    inside = False
    for line in open(path, encoding='utf-8').read().split('\n'):
        if FENCE.match(line):
            inside = not inside
            continue
        m = None if inside else re.match(r'^#{1,6}\s+(.*?)\s*#*\s*$', line)
        if m:
            a = slug(m.group(1))
            k = seen.get(a, 0)
            seen[a] = k + 1
            out.add(a if k == 0 else '%s-%d' % (a, k))
        for m in re.finditer(r'<a\s+(?:name|id)="([^"]+)"', line):
            out.add(m.group(1))
    return out


def main(files):
    bad = 0
    for path in files:
        broken = []
        for n, text in prose(path):
            for m in LINK.finditer(text):
                target = m.group(1)
                if re.match(r'^[a-z]+:', target):
                    continue
                where, _, anchor = target.partition('#')
                dest = os.path.normpath(os.path.join(os.path.dirname(path), where)) if where else path
                if not os.path.exists(dest):
                    broken.append('%s:%d: %s: no such file' % (path, n, target))
                elif anchor and dest.endswith('.md') and anchor not in anchors(dest):
                    broken.append('%s:%d: %s: %s has no heading with that anchor'
                                  % (path, n, target, dest))
        for b in broken:
            print('not ok - link %s' % b)
        if not broken:
            print('ok - %s: every relative link resolves' % path)
        bad += len(broken)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
