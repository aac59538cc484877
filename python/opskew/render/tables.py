"""The one per-operator table renderer (issue 13): every table of operators
that opskew prints (`summary`, `record --summary`, `opskew.trace()`'s
`Trace.summary`, `correct`, `check`'s per-operator verdict, `compare`) goes
through `op_table`, and every `--csv` through `write_csv`, so that

- one concept has one column name everywhere (COLUMNS: "calls", "total",
  "self", "mean", "corrected total", "corrected self", ...);
- times have one unit rule: `report.fmt_ns` (3 significant figures, the unit
  chosen per value); CSV cells are plain numbers in ns;
- names have one truncation rule: at most NAME_WIDTH characters, a longer
  name cut to NAME_WIDTH - 3 and "..." added;
- a table cut by --top ends with one line: "... N more (--top 0 shows all)".

The loop here is over rows (operator names), never over events.
"""

from __future__ import annotations

import csv
import io
import sys
from typing import NamedTuple, Sequence

from opskew.output import write_file
from opskew.render.units import fmt_ns

NAME_WIDTH = 48
SEP = "  "
MORE = "... {n} more (--top 0 shows all)"


class Col(NamedTuple):
    """A column: its title, how its cells are formatted, its CSV header.
    kind: "name" (left, truncated), "text" (left), "rtext" (right, already
    formatted), "time" (ns, fmt_ns), "count", "share" (a fraction, printed
    as a percentage), "interval" ((median, low, high) in ns)."""

    title: str
    kind: str
    csv: str


# One name per concept. A command picks its columns from here.
COLUMNS = {c.title: c for c in (
    Col("name", "name", "name"),
    Col("calls", "count", "calls"),
    Col("total", "time", "total_ns"),          # inclusive time, all calls
    Col("total %", "share", "total_share"),    # total over the sum of all self time
    Col("self", "time", "self_ns"),            # exclusive time, all calls
    Col("self %", "share", "self_share"),      # self over the sum of all self time
    Col("mean", "time", "mean_ns"),            # total / calls
    Col("self / call", "time", "self_per_call_ns"),
    Col("p50", "time", "p50_ns"),              # of one call's inclusive time
    Col("p99", "time", "p99_ns"),
    Col("added", "time", "added_ns"),          # what the instrument added to total
    Col("corrected total", "time", "corrected_total_ns"),
    Col("corrected self", "time", "corrected_self_ns"),
    Col("corrected mean", "time", "corrected_mean_ns"),
    Col("corrected total [95% CI]", "interval", "corrected_total_ns"),
    Col("corrected self [95% CI]", "interval", "corrected_self_ns"),
    Col("clamped", "count", "clamped"),
    Col("verdict", "text", "verdict"),
)}


def column(c) -> Col:
    """A column by its title in COLUMNS, or a Col as it is (compare's
    per-input columns)."""
    if isinstance(c, Col):
        return c
    try:
        return COLUMNS[c]
    except KeyError:
        raise KeyError(f"no column {c!r}; the columns: {', '.join(COLUMNS)}") from None


_CONTROL = {i: f"\\x{i:02x}" for i in range(32)} | {ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t", 127: "\\x7f"}


def truncate(name: str, width: int = NAME_WIDTH) -> str:
    """The one truncation rule for operator names; control characters are
    shown escaped (a newline in a name split its row)."""
    name = name.translate(_CONTROL)
    return name if len(name) <= width else name[: width - 3] + "..."


def cell(value, kind: str) -> str:
    """One cell as printed."""
    if kind in ("name", "text", "rtext"):
        return "" if value is None else str(value)
    if value is None:
        return "n/a"
    if kind == "time":
        return fmt_ns(value)
    if kind == "count":
        return f"{value:d}" if isinstance(value, int) else f"{value:.6g}"
    if kind == "share":
        return f"{100.0 * value:.2f}%"
    if kind == "interval":
        med, lo, hi = value
        return f"{fmt_ns(med)} [{fmt_ns(lo)}, {fmt_ns(hi)}]"
    raise ValueError(f"unknown column kind {kind!r}")


def _left(kind: str) -> bool:
    return kind in ("name", "text")


def op_table(rows: Sequence[Sequence], columns: Sequence, *, top: int = 0, out=None, omitted: int = 0) -> list:
    """Prints a header, a rule, the first `top` rows (0: all) and, when rows
    were left out (those past `top`, plus `omitted` the caller cut already),
    the "more" line. `rows` are sequences of raw values, one
    per column (times in ns, shares as fractions). Returns each column's
    (start, end) offsets in every line, the same for header and rows."""
    out = out or sys.stdout  # looked up per call: a redirected or captured stdout is honoured
    cols = [column(c) for c in columns]
    shown = rows if top == 0 else rows[:top]
    cells = []
    for r in shown:
        if len(r) != len(cols):
            raise ValueError(f"a row has {len(r)} cells for {len(cols)} columns")
        cells.append([truncate(cell(v, c.kind)) if c.kind == "name" else cell(v, c.kind) for v, c in zip(r, cols)])
    widths = [max([len(c.title)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]
    spans, at = [], 0
    for w in widths:
        spans.append((at, at + w))
        at += w + len(SEP)

    def line(texts):
        parts = [t.ljust(w) if _left(c.kind) else t.rjust(w) for t, w, c in zip(texts, widths, cols)]
        return SEP.join(parts).rstrip()

    header = line([c.title for c in cols])
    out.write(header + "\n" + "-" * len(SEP.join(" " * w for w in widths)) + "\n")
    for r in cells:
        out.write(line(r) + "\n")
    more = len(rows) - len(shown) + omitted
    if more > 0:
        out.write(MORE.format(n=more) + "\n")
    return spans


def csv_text(rows: Sequence[Sequence], columns: Sequence) -> str:
    """The rows (all of them) as CSV: a header line of the columns' CSV names,
    then plain numbers (times in ns, shares as fractions, no unit strings);
    an interval column is three: NAME, NAME_low, NAME_high; None is empty."""
    cols = [column(c) for c in columns]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    head = []
    for c in cols:
        head += [c.csv, c.csv + "_low", c.csv + "_high"] if c.kind == "interval" else [c.csv]
    w.writerow(head)
    for r in rows:
        line = []
        for v, c in zip(r, cols):
            if c.kind == "interval":
                line += ["" if x is None else _num(x) for x in (v if v is not None else (None, None, None))]
            else:
                line.append("" if v is None else _num(v) if isinstance(v, (int, float)) else str(v))
        w.writerow(line)
    return buf.getvalue()


def _num(x) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    return repr(float(x)) if x != int(x) or abs(x) >= 1e16 else str(int(x))


def write_csv(path: str, rows: Sequence[Sequence], columns: Sequence) -> None:
    """`csv_text` written to `path` ("-": standard output) through the one
    writer (report.write_file; docs/outputs.md). Check the path first with
    report.check_output, before any work."""
    write_file(path, csv_text(rows, columns))


# -- the tables of each JSON schema, shared by the commands that print them --

def summary_rows(ops: list, columns: Sequence, self_sum: float | None = None) -> list:
    """Rows of `columns` from per-operator dicts of opskew.summary/1 or
    opskew.trace.summary/1 (calls, total_ns, self_ns, mean_ns, p50_ns,
    p99_ns, and total_corrected_ns/self_corrected_ns in the tracer's).
    Shares are of `self_sum` (default: the sum of `ops`' self times)."""
    if self_sum is None:
        self_sum = sum(o["self_ns"] for o in ops)
    get = {
        "name": lambda o: o["name"], "calls": lambda o: o["calls"],
        "total": lambda o: o["total_ns"], "self": lambda o: o["self_ns"],
        "total %": lambda o: o["total_ns"] / self_sum if self_sum > 0 else None,
        "self %": lambda o: o["self_ns"] / self_sum if self_sum > 0 else None,
        "mean": lambda o: o["mean_ns"], "p50": lambda o: o.get("p50_ns"), "p99": lambda o: o.get("p99_ns"),
        "self / call": lambda o: o["self_ns"] / o["calls"] if o["calls"] else None,
        "corrected total": lambda o: o.get("total_corrected_ns"),
        "corrected self": lambda o: o.get("self_corrected_ns"),
    }
    return [[get[column(c).title](o) for c in columns] for o in ops]


SUMMARY_COLUMNS = ("name", "calls", "total", "total %", "self", "self %", "mean", "p50", "p99")
TRACE_SUMMARY_COLUMNS = ("name", "calls", "total", "self", "self %", "corrected total", "corrected self",
                         "mean", "p50", "p99")


def trace_summary(doc: dict, top: int = 0, out=None) -> None:
    """The tracer's summary (schema opskew.trace.summary/1: `record
    --summary`, `Trace.summary`) as text: a line on the session, the table,
    the self-time total and the losses."""
    out = out or sys.stdout
    lost = doc.get("lost") or {}
    threads = doc.get("threads", 0)
    out.write(f"opskew trace: instrument {doc.get('instrument', '?')}, {doc.get('events', 0)} events, "
              f"{threads} thread{'' if threads == 1 else 's'}, lost {lost.get('total', 0)}\n")
    spill = doc.get("spill") or {}
    if spill.get("events"):
        out.write(f"memory budget {spill['budget_bytes'] / 1048576:.0f} MiB: {spill['events']} events "
                  f"({spill['bytes'] / 1048576:.1f} MiB) went through the spill file\n")
    cal = doc.get("calibration")
    if cal:
        # One W for the tracer (docs/tracer.md): where it came from, as the header says.
        source = cal.get("w_source") or "self-calibrated"
        out.write(f"tracer cost: W {cal['w_ns']:.1f} ns/event, delta {cal['delta_ns']:.1f} ns (W: {source}); "
                  "the 'corrected' columns subtract it\n")
    ops = doc.get("ops", [])
    op_table(summary_rows(ops, TRACE_SUMMARY_COLUMNS), TRACE_SUMMARY_COLUMNS, top=top, out=out)
    out.write(f"self time total: {fmt_ns(sum(o['self_ns'] for o in ops))}\n")
    causes = [f"{n} {k}" for k, n in lost.items() if k != "total" and n]
    if causes:
        out.write("LOST EVENTS (by cause, docs/tracer.md): " + "; ".join(causes) + "\n")
