#!/usr/bin/python3
"""histcheck.py HISTORY -- check a torture run's history (scripts/torture).

The history is TSV, one record a line (lines starting with '#' and empty
lines are skipped), 18 fields, '-' where a field does not apply:

  kind id worker holder token lease_from lease_until store resource op
  outcome mark mark_holder reason value seq t_start t_end

kind "attempt": one attempted write, recorded by tests/torture/step.sh.
  id is WORKER:RUN (one fence run); holder the lease's holder id
  (FENCE_HOLDER, '-' when none); token FENCE_TOKEN; lease_from/lease_until
  the holder's view of its lease (fence exports neither its acquire time nor
  its deadline, so step.sh gives lease_from = its own start, which is after
  the acquire, and lease_until = '-'); store pg|sqlite; op claim (advance +
  read) or write (advance + counter := read+1 + a log row); outcome
  admitted | refused | error (the store refused for another reason: nothing
  committed) | unknown (killed, store unreachable: it may have committed);
  a refusal's mark, mark_holder and reason (older|repeat) as the store's
  message named them; value: read (claim) or written (write); seq: an
  admitted write's commit sequence (its log row id); t_start/t_end:
  wall-clock microseconds before the attempt began and after it was known
  to have ended (same host clock as the stores').
kind "commit": one admitted write as the store itself logged it after the
  run (id, worker, holder, token, value, seq; op write, outcome committed).
  seq orders commits: the log row is inserted under the locks that
  serialise writes to the resource (PostgreSQL: the counter row lock held
  to commit; SQLite: BEGIN IMMEDIATE), so seq order is commit order.
kind "counter": the store's final counter (value) for the resource.

Checked per store and resource (each violation is printed with its lines):
  decrease        commits (by seq) whose token is lower than the previous one's
  below_admitted  an admitted attempt that started after the end of an
                  admitted attempt with a higher token, or of a refusal
                  naming a higher mark (real-time order)
  repeat_holder   a token admitted from more than one holder
  refusal_mark    a refusal naming no mark, a mark below the offered token,
                  the offered token from the mark's own holder, or a reason
                  other than older (mark above) / repeat (mark equal)
  lost            a value of 1..counter never written, a value above the
                  counter, an admitted write missing from the commits
  doubled         a value written by more than one commit, or one attempt
                  committed twice
  order           a value first written after a higher one
  unmatched       a commit no attempt explains (none, or one refused / failed /
                  with another token, holder or value)
Exit 0: clean; 1: violations; 2: malformed history (or unreadable file).
"""
import sys
from collections import defaultdict

FIELDS = ("kind id worker holder token lease_from lease_until store resource op "
          "outcome mark mark_holder reason value seq t_start t_end").split()
INTS = ("worker", "token", "lease_from", "lease_until", "mark", "value", "seq",
        "t_start", "t_end")
OUTCOMES = {"attempt": {"admitted", "refused", "error", "unknown"},
            "commit": {"committed"}, "counter": {"-"}}
# The fields each kind must give ('-' not allowed).
NEEDED = {"attempt": ("id", "worker", "holder", "token", "store", "resource", "op"),
          "commit": ("id", "token", "store", "resource", "value", "seq"),
          "counter": ("store", "resource", "value")}


class Malformed(Exception):
    pass


def parse(path):
    recs = []
    try:
        f = open(path, encoding="utf-8", errors="replace")
    except OSError as e:
        raise Malformed(f"{path}: cannot read: {e.strerror}")
    with f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split("\t")
            where = f"{path}:{n}"
            if len(parts) != len(FIELDS):
                raise Malformed(f"{where}: {len(parts)} fields, expected {len(FIELDS)}")
            r = dict(zip(FIELDS, parts))
            kind = r["kind"]
            if kind not in OUTCOMES:
                raise Malformed(f"{where}: unknown kind {kind!r}")
            for k in INTS:
                v = r[k]
                if v != "-" and not (v.isdigit() and v.isascii()):
                    raise Malformed(f"{where}: {k} must be a whole number or '-', got {v!r}")
                r[k] = None if v == "-" else int(v)
            for k in NEEDED[kind]:
                if r[k] in (None, "-", ""):
                    raise Malformed(f"{where}: a {kind} line needs {k}")
            if r["outcome"] not in OUTCOMES[kind]:
                raise Malformed(f"{where}: outcome {r['outcome']!r} for a {kind} line")
            if kind == "attempt":
                if r["op"] not in ("claim", "write"):
                    raise Malformed(f"{where}: op must be claim or write, got {r['op']!r}")
                if r["outcome"] == "admitted" and (r["t_start"] is None or r["t_end"] is None):
                    raise Malformed(f"{where}: an admitted attempt needs t_start and t_end")
                if r["outcome"] == "admitted" and r["op"] == "write" and r["seq"] is None:
                    raise Malformed(f"{where}: an admitted write needs its seq")
            r["n"], r["line"] = n, line
            recs.append(r)
    return recs


class Report:
    def __init__(self):
        self.count = defaultdict(int)

    def __call__(self, kind, sr, msg, *recs):
        self.count[kind] += 1
        print(f"violation {kind} {sr[0]}/{sr[1]}: {msg}")
        for r in recs:
            print(f"  line {r['n']}: {r['line']}")


def check_store(sr, att, com, counter, bad):
    # Commits, in commit order.
    com.sort(key=lambda r: r["seq"])
    for a, b in zip(com, com[1:]):
        if a["seq"] == b["seq"]:
            raise Malformed(f"line {b['n']}: seq {b['seq']} committed twice on {sr[0]}/{sr[1]} (line {a['n']})")
        if b["token"] < a["token"]:
            bad("decrease", sr, f"token {b['token']} committed after {a['token']}", a, b)

    # Real-time order: nothing admitted below what was known admitted when it started.
    adm = [r for r in att if r["outcome"] == "admitted"]
    known = sorted([(r["t_end"], r["token"], r) for r in adm] +
                   [(r["t_end"], r["mark"], r) for r in att
                    if r["outcome"] == "refused" and r["mark"] is not None and r["t_end"] is not None],
                   key=lambda k: k[0])
    best, i = None, 0
    for r in sorted(adm, key=lambda r: r["t_start"]):
        while i < len(known) and known[i][0] < r["t_start"]:
            if best is None or known[i][1] > best[1]:
                best = known[i]
            i += 1
        if best is not None and r["token"] < best[1]:
            what = "admitted" if best[2]["outcome"] == "admitted" else "named as the mark"
            bad("below_admitted", sr, f"token {r['token']} admitted after token {best[1]} was {what}", best[2], r)

    # One holder per admitted token.
    holders = defaultdict(list)
    for r in adm + com:
        holders[r["token"]].append(r)
    for tok, rs in sorted(holders.items()):
        first = min(rs, key=lambda r: (0, r["t_start"]) if r["kind"] == "attempt" else (1, r["seq"]))
        others = [r for r in rs if r["holder"] != first["holder"]]
        if others:
            bad("repeat_holder", sr, f"token {tok} admitted from holder {first['holder']} and from "
                f"{', '.join(sorted({r['holder'] for r in others}))}", first, *others)

    # Refusals name a mark >= the offered token (equal: another holder's).
    for r in att:
        if r["outcome"] != "refused":
            continue
        if r["mark"] is None:
            bad("refusal_mark", sr, f"refusal of token {r['token']} names no mark", r)
        elif r["mark"] < r["token"]:
            bad("refusal_mark", sr, f"refusal of token {r['token']} names the lower mark {r['mark']}", r)
        elif r["mark"] == r["token"] and r["mark_holder"] == r["holder"]:
            bad("refusal_mark", sr, f"token {r['token']} refused although the mark is its own holder's", r)
        elif r["reason"] != ("repeat" if r["mark"] == r["token"] else "older"):
            bad("refusal_mark", sr, f"refusal of token {r['token']} at mark {r['mark']} gives reason {r['reason']}", r)

    # Values: exactly 1..counter in commit order, each admitted write once.
    first, top = {}, 0
    for r in com:
        v = r["value"]
        if v in first:
            bad("doubled", sr, f"value {v} written again", first[v], r)
            continue
        first[v] = r
        if v < top:
            bad("order", sr, f"value {v} first written after {top}", first[top], r)
        top = max(top, v)
    c = counter["value"] if counter else 0
    for v in range(1, c + 1):
        if v not in first:
            near = [r for r in (first.get(v - 1), first.get(v + 1)) if r]
            bad("lost", sr, f"value {v} of 1..{c} never written", *(near + ([counter] if counter else [])))
    for v, r in sorted(first.items()):
        if v > c or v < 1:
            bad("lost", sr, f"value {v} written but the counter is {c}", r, *([counter] if counter else []))
    by_id = defaultdict(list)
    for r in com:
        by_id[r["id"]].append(r)
    for rid, rs in by_id.items():
        if len(rs) > 1:
            bad("doubled", sr, f"attempt {rid} committed {len(rs)} times", *rs)
    by_seq = {r["seq"]: r for r in com}
    writes = defaultdict(list)
    for r in att:
        if r["op"] == "write":
            writes[r["id"]].append(r)
    for r in att:
        if r["op"] == "write" and r["outcome"] == "admitted":
            m = by_seq.get(r["seq"])
            if m is None or (m["id"], m["token"], m["value"]) != (r["id"], r["token"], r["value"]):
                bad("lost", sr, f"admitted write of {r['id']} (seq {r['seq']}) is not among the commits", r, *([m] if m else []))
    for m in com:
        ws = writes.get(m["id"], [])
        if not any(w["outcome"] in ("admitted", "unknown") and w["token"] == m["token"]
                   and w["holder"] == m["holder"] and w["value"] in (None, m["value"]) for w in ws):
            bad("unmatched", sr, f"commit of {m['id']} (token {m['token']}) matches no admitted or unfinished attempt", m, *ws)


def main(argv):
    if len(argv) != 2:
        print("usage: histcheck.py HISTORY", file=sys.stderr)
        return 2
    try:
        recs = parse(argv[1])
        groups = defaultdict(lambda: ([], [], []))
        for r in recs:
            groups[(r["store"], r["resource"])][("attempt", "commit", "counter").index(r["kind"])].append(r)
        bad = Report()
        for sr, (att, com, cnt) in sorted(groups.items()):
            if len(cnt) > 1:
                raise Malformed(f"line {cnt[1]['n']}: a second counter line for {sr[0]}/{sr[1]}")
            if com and not cnt:
                raise Malformed(f"{sr[0]}/{sr[1]} has commits but no counter line")
            check_store(sr, att, com, cnt[0] if cnt else None, bad)
    except Malformed as e:
        print(f"histcheck: malformed history: {e}", file=sys.stderr)
        return 2
    att = [r for r in recs if r["kind"] == "attempt"]
    fig = {"attempts": len(att), "commits": sum(r["kind"] == "commit" for r in recs)}
    for op in ("claim", "write"):
        for oc in ("admitted", "refused", "error", "unknown"):
            fig[f"{op}s_{oc}"] = sum(r["op"] == op and r["outcome"] == oc for r in att)
    for k, v in fig.items():
        print(f"histcheck figure {k} {v}")
    total = sum(bad.count.values())
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(bad.count.items())) or "none"
    print(f"histcheck: {len(recs)} records, {len(groups)} store/resource pair(s); violations {total} ({kinds})")
    return 1 if total else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except KeyboardInterrupt:
        sys.exit(130)
