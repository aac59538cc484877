"""Units and plain text layout: one rule for every time opskew prints
(3 significant figures, the unit chosen by size), counts with their nouns,
intervals and p-values, and the two text table shapes (key/value and columns)."""

from __future__ import annotations

import math
import sys


def fmt_time(seconds: float | None) -> str:
    """A duration with a unit that keeps 3 significant figures."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "n/a"
    # Rounded to 3 significant figures first, so that 999.6 ns reads "1 us",
    # not "1e+03 ns".
    a = abs(float(f"{seconds:.3g}"))
    if a >= 1:
        return f"{seconds:.3g} s"
    if a >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    if a >= 1e-6:
        return f"{seconds * 1e6:.3g} us"
    return f"{seconds * 1e9:.3g} ns"


def count_of(n, word: str, plural: str | None = None) -> str:
    """"1 thread", "2 threads": a count with its noun in the right number."""
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def fmt_ns(ns: float | None) -> str:
    return "n/a" if ns is None else fmt_time(ns * 1e-9)


def fmt_ci(lo: float, hi: float, fmt=fmt_ns) -> str:
    return f"[{fmt(lo)}, {fmt(hi)}]"


def table(rows: list[tuple[str, str]], title: str | None = None, out=None) -> None:
    """Two-column key/value table."""
    out = out or sys.stdout
    width = max((len(k) for k, _ in rows), default=0)
    if title:
        out.write(f"{title}\n{'-' * len(title)}\n")
    for k, v in rows:
        if k == "":
            out.write("\n")
            continue
        out.write(f"  {k.ljust(width)}  {v}\n")


def columns(header: list[str], rows: list[list[str]], right: set[int] = frozenset(), gap: int = 2) -> list[str]:
    """A table's lines (header, rule, rows) with each column as wide as its
    widest cell, so that every row's cells start where the header's do. Cells
    in `right` (column indices) are right-aligned; the last column is never
    padded. A row of one cell is a free-text line (a note), written as is."""
    cells = [header] + [r for r in rows if len(r) > 1]
    widths = [max(len(r[i]) for r in cells if i < len(r)) for i in range(len(header))]

    def line(r):
        parts = []
        for i, c in enumerate(r):
            last = i == len(r) - 1
            if i in right:
                parts.append(c.rjust(widths[i]))
            else:
                parts.append(c if last else c.ljust(widths[i]))
        return (" " * gap).join(parts).rstrip()

    out = [line(header), "-" * sum(widths) + "-" * (gap * (len(widths) - 1))]
    for r in rows:
        out.append(r[0] if len(r) == 1 else line(r))
    return out
