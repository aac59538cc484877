"""Figures picked out of a table's rows, as a report gives them before any
text: which operators the correction moved most."""

from __future__ import annotations

from opskew.vocab import is_step


def moved_most(rows, n: int = 3) -> list:
    """Of `rows` [(name, reported self ns, corrected self ns)], the `n` the
    correction moved most (reported less corrected, 1% of reported at
    least), ProfilerStep#N ranges left out (they are the step, not an
    operator): [[name, reported, corrected]], a JSON document's lists."""
    rows = sorted((r for r in rows if not is_step(r[0])), key=lambda r: r[2] - r[1])
    return [list(r) for r in rows[:n] if r[1] - r[2] > 0.01 * r[1]]
