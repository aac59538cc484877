"""`opskew compare`'s text for people: the table of the inputs side by
side (also the notebook's HTML table: table_cells), and its CSV rows."""

from __future__ import annotations

import sys

from opskew.render import answers
from opskew.render.tables import Col, op_table
from opskew.render.units import fmt_ns

# What each metric is, as the table's title says it.
METRIC_TEXT = {"self": "self time per call", "total": "total (inclusive) time of all calls",
               "mean": "mean (inclusive time per call)", "calls": "calls"}


def shown(result: dict) -> tuple:
    """(the rows the table prints, how many it leaves out): every figure,
    and the rows of the first --top operators."""
    top, names, rows, left = result["top"], {}, [], 0
    for r in result["rows"]:
        op = r["operator"]
        if op is not None:
            names.setdefault(op, len(names))
            if top and names[op] >= top:
                left += 1
                continue
        rows.append(r)
    return rows, left


def _fmt(v, unit: str) -> str:
    if v is None:
        return "n/a"
    if unit == "ns":
        return fmt_ns(v)
    if unit == "ratio":
        return f"x{v:.3g}"
    return f"{v:d}" if isinstance(v, int) else f"{v:.6g}"


def _columns(result: dict) -> tuple:
    labels = [i["label"] for i in result["inputs"]]
    a = labels[0]
    table = [Col("name", "name", "name")] + [Col(x, "rtext", x) for x in labels]
    for x in labels[1:]:
        table += [Col(f"{x}/{a}", "rtext", f"{x}_ratio"), Col(f"{x} change", "rtext", f"{x}_change"),
                  Col(f"{x} significant", "rtext", f"{x}_significant")]
    csv_cols = ([Col("name", "name", "name"), Col("unit", "text", "unit")]
                + [Col(x, "interval", x) for x in labels])
    for x in labels[1:]:
        csv_cols += [Col(x, "count", f"{x}_ratio"), Col(x, "count", f"{x}_change"),
                     Col(x, "count", f"{x}_significant")]
    return table, csv_cols


def print_human(result: dict, out=None) -> None:
    out = out or sys.stdout
    what = {"operators": f"{METRIC_TEXT.get(result['metric'], '')}, per operator",
            "correct": f"corrected {METRIC_TEXT.get(result['metric'], '')}, per operator",
            "check": "check figures, and the per-operator verdict's corrected times",
            "matrix": "matrix: in-window cost per event",
            "profile": "opskew profile runs: the corrected step and W, and the latest cycle's corrected "
                       "times per operator"}[result["kind"]]
    out.write(answers.lead(answers.compare(result)))
    out.write(f"opskew compare: {what}\n")
    for i in result["inputs"]:
        out.write(f"  {i['label']}: {i['path']} ({i['schema']}"
                  + (f", {i['status']}" if i["status"] not in ("ok", "complete") else "") + ")\n")
    out.write("\n")
    cols, rows, left = table_cells(result)
    op_table(rows, cols, omitted=left, out=out)
    out.write(f"significant: {result['significance']}\n")


def table_cells(result: dict) -> tuple:
    """(columns, rows of text cells, rows left out by --top): the table the
    command prints, and the notebook's HTML table (api.Result)."""
    cols, _ = _columns(result)
    rows = []
    show, left = shown(result)
    for r in show:
        cells = [r["name"]]
        for v, ci in zip(r["values"], r["ci95"]):
            cells.append(_fmt(v, r["unit"]) + (f" [{_fmt(ci[0], r['unit'])}, {_fmt(ci[1], r['unit'])}]"
                                               if ci and v is not None else ""))
        for c in r["changes"]:
            s = c["significant"]
            change = "n/a" if c["change"] is None else f"{100 * c['change']:+.1f}%"
            if c.get("drift_scaled_change") is not None:
                change += f" ({round(100 * c['drift_scaled_change'], 1) + 0.0:+.1f}% over drift)"  # no -0.0
            cells += ["n/a" if c["ratio"] is None else f"x{c['ratio']:.3f}", change,
                      "drift" if r.get("drift") else "n/a" if s is None else "yes" if s else "no"]
        rows.append(cells)
    return cols, rows, left


def csv_rows(result: dict) -> list:
    rows = []
    for r in result["rows"]:
        cells = [r["name"], r["unit"]]
        for v, ci in zip(r["values"], r["ci95"]):
            cells.append((v, ci[0], ci[1]) if ci else (v, None, None))
        for c in r["changes"]:
            cells += [c["ratio"], c["change"], c["significant"]]
        rows.append(cells)
    return rows



def csv_columns(result: dict) -> list:
    """The CSV's columns (csv_rows' cells)."""
    return _columns(result)[1]
