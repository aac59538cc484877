"""Formatting helpers for terminal tables and JSON output."""

from __future__ import annotations

import json
import math
import sys


def fmt_time(seconds: float | None) -> str:
    """A duration with a unit that keeps 3 significant figures."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "n/a"
    a = abs(seconds)
    if a >= 1:
        return f"{seconds:.3g} s"
    if a >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    if a >= 1e-6:
        return f"{seconds * 1e6:.3g} us"
    return f"{seconds * 1e9:.3g} ns"


def fmt_ns(ns: float | None) -> str:
    return "n/a" if ns is None else fmt_time(ns * 1e-9)


def fmt_ci(lo: float, hi: float, fmt=fmt_ns) -> str:
    return f"[{fmt(lo)}, {fmt(hi)}]"


def fmt_p(p: float) -> str:
    return f"{p:.2g}" if p >= 1e-4 else "<1e-4"


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


def write_json(obj, path: str) -> None:
    """Writes JSON to `path` ("-" for stdout) atomically: a reader never sees
    half a file."""
    text = json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n"
    if path == "-":
        sys.stdout.write(text)
        return
    import os
    import tempfile

    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".opskew-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
