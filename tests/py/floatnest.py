"""Does a Chrome trace nest the same when read as float64?

Viewers and scripts (torch-tb-profiler, HTA, pandas) read "ts" and "dur" as
float64 microseconds and an event's end as ``ts + dur`` in float64. Near
ts = 5.8e12 us one ulp is about 1 ns, so two boundaries the exact decimal text
ties (a child ending where its parent ends, siblings abutting) can read
crossed: an overlap the text does not have. ``float_nesting_errors(path)``
lists the pairs of complete ("X") events of one (pid, tid) whose float64
reading nests otherwise than the exact decimal reading: a containment or a
disjointness (touching included) that holds exactly and not in float64, or
an exact overlap that float64 reads as nested or disjoint. docs/outputs.md,
"Read as float64", gives opskew's rule for its writers.
"""
from __future__ import annotations

import bisect
import gzip
import json
import math
from decimal import Decimal


def _load(path):
    with open(path, "rb") as f:
        magic = f.read(2)
    opener = gzip.open if magic == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f, parse_float=Decimal)


def _bits(sa, ea, sb, eb):
    """Bit 0: a holds b; bit 1: b holds a; bit 2: disjoint (touching too)."""
    return (int(sa <= sb and eb <= ea) | int(sb <= sa and ea <= eb) << 1
            | int(ea <= sb or eb <= sa) << 2)


def float_nesting_errors(path) -> list:
    """The pairs of complete events, per (pid, tid), whose float64 reading
    (``float(ts)``, ``float(ts) + float(dur)``) nests differently from the
    exact decimal reading. Each is a dict: pid, tid, the two events (name, ts,
    dur as written), and the exact and float64 relations (bit 0: the first
    holds the second, bit 1 the reverse, bit 2 disjoint; 0: overlap)."""
    doc = _load(path)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    threads = {}
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        ts, dur = e.get("ts"), e.get("dur")
        if not isinstance(ts, (int, Decimal)) or not isinstance(dur, (int, Decimal)) or isinstance(ts, bool):
            continue
        xs, xd = Decimal(ts), Decimal(dur)
        fs = float(ts)
        threads.setdefault((str(e.get("pid")), str(e.get("tid"))), []).append(
            (xs, xs + xd, fs, fs + float(dur), e))
    errors = []
    for (pid, tid), evs in threads.items():
        # A pair can read otherwise only where two of its boundaries lie
        # within float64's error of each other: boundaries sorted exactly,
        # each looked at against those within a few ulp.
        pts = sorted((x, k) for k, ev in enumerate(evs) for x in (ev[0], ev[1]))
        keys = [p[0] for p in pts]
        seen = set()
        for x, k in pts:
            reach = Decimal(4 * math.ulp(abs(float(x)) or 1.0))
            hi = bisect.bisect_right(keys, x + reach)
            for _, j in pts[bisect.bisect_left(keys, x - reach):hi]:
                if j == k or (min(j, k), max(j, k)) in seen:
                    continue
                seen.add((min(j, k), max(j, k)))
                a, b = evs[k], evs[j]
                exact = _bits(a[0], a[1], b[0], b[1])
                f64 = _bits(a[2], a[3], b[2], b[3])
                if (exact & ~f64) if exact else f64:
                    errors.append({"pid": pid, "tid": tid,
                                   "a": {k2: str(a[4].get(k2)) for k2 in ("name", "ts", "dur")},
                                   "b": {k2: str(b[4].get(k2)) for k2 in ("name", "ts", "dur")},
                                   "exact": exact, "float64": f64})
    return errors
