"""Results as notebooks show them (`_repr_html_`): the headline figures and
the table, with the text tables' units and columns (opskew.render.tables)."""

from __future__ import annotations

import json
from html import escape

from opskew.render.compare import table_cells
from opskew.render.correct import CORRECT_COLUMNS, correct_rows
from opskew.render.notes import words
from opskew.render.tables import SUMMARY_COLUMNS, cell, column, summary_rows
from opskew.render.units import fmt_ns, fmt_time
from opskew.render.verdict import (MARK_COLOURS, VERDICT_COLUMNS, marks_line, reconcile, sentence, skew_words,
                                   verdict_rows)


def html(kind: str, d: dict, *, top: int = 30, rows=None) -> str:
    """A result as a notebook shows it: its headline figures, then its
    table (coloured by trust mark for check's verdict)."""
    e = escape
    parts = [f"<div class='opskew-{e(kind)}'><b>opskew {e(kind)}</b>"]
    head = headline(kind, d)
    if head:
        parts.append("<table>" + "".join(f"<tr><th style='text-align:left'>{e(k)}</th>"
                                         f"<td style='text-align:left'>{e(v)}</td></tr>" for k, v in head)
                     + "</table>")
    cols, body = table_rows(kind, d, top=top, rows=rows)
    if body:
        parts.append("<table><tr>" + "".join(f"<th>{e(c)}</th>" for c in cols) + "</tr>"
                     + "".join("<tr>" + "".join(cell for cell in r) + "</tr>" for r in body)
                     + "</table>")
    if kind in ("check", "profile cycle") and (d.get("operators") or {}).get("summary"):
        parts.append(f"<p>where the skew lands: {e(sentence(d['operators']['summary']))}</p>")
    return "".join(parts) + "</div>"


def headline(kind: str, d: dict) -> list:
    """(label, text) pairs: the figures a person reads first."""
    c = d.get("conditions", {})
    rows = []
    if "workload" in c:
        rows.append(("workload", c["workload"].get("description", "")))
    if kind == "check":
        rows.append(("instrument", c.get("instrument_label", "")))
        rows.append(("status", d.get("status", "")))
        if "baseline" in d:
            rows.append(("baseline / iteration", fmt_time(d["baseline"]["per_iter_s"])))
            rows.append(("profiled / iteration", fmt_time(d["profiled"]["per_iter_s"])))
        if d.get("events_per_iter"):
            w = d["added_per_event_ns"]
            rows.append(("events / iteration", f"{d['events_per_iter']:.6g}"))
            rows.append(("added per event (W)", f"{fmt_ns(w['median'])} "
                         f"[{fmt_ns(w['ci95'][0])}, {fmt_ns(w['ci95'][1])}]"))
            v = d["verdict"]
            rows.append(("verdict", skew_words(v)))
            marks = (d.get("operators") or {}).get("marks")
            if marks:
                rows.append(("what to read", reconcile(v["skewed"], d.get("inflation"), marks, "iteration")))
    elif kind == "profile cycle":
        rows += profile_headline(d)
    elif kind == "summary":
        st = d["stats"]
        rows += [("trace", d["trace"]), ("status", d["status"]),
                 ("events", f"{st.get('complete_events', 0)} complete of {st.get('events', 0)}")]
    elif kind == "compare":
        rows += [("compared", f"{d.get('kind', '')} ({d.get('metric', '')})"),
                 *((i["label"], f"{i['path']} ({i['schema']}, {i['status']})") for i in d.get("inputs", [])),
                 ("significant", d.get("significance", ""))]
    elif kind == "correct":
        cal = d.get("calibration") or {}
        rows += [("trace", d.get("trace", "")),
                 ("calibration", f"W {fmt_ns(cal.get('w_ns'))} per operator event ({cal.get('source', '')})"),
                 ("instrument share", f"{100 * d.get('instrument_share', 0.0):.1f}% of the top-level time"),
                 *(("note", words(n)) for n in d.get("notes") or ())]
    elif kind == "advise" and d.get("recommended"):
        rows += [("status", d.get("status", "")), ("recommended", d["recommended"]["label"])]
    else:
        rows.append(("status", d.get("status", "")))
    if d.get("error"):
        rows.append(("error", d["error"] if isinstance(d["error"], str) else json.dumps(d["error"])))
    return rows


def profile_headline(d: dict) -> list:
    """(label, text) pairs of an opskew.profile cycle's report."""
    who = f" (rank {d['rank']} of {d.get('world_size')})" if d.get("rank") is not None else ""
    rows = [("cycle", f"{d.get('cycle')}{who}")]
    w = d.get("w_ns") or {}
    if w.get("median") is not None:
        ci = w.get("ci95")
        rows.append(("W per operator event", fmt_ns(w["median"]) + (f" [{fmt_ns(ci[0])}, {fmt_ns(ci[1])}]" if ci
                                                                      else " (no 95% CI)")
                     + f" ({d.get('w_source')}, {d.get('pairs') or 0} pairs)"))
    if d.get("inflation") is not None:
        rows.append(("in-window inflation", f"{100 * (d['inflation'] - 1):+.1f}%"))
    if d.get("corrected_step_ns") is not None:
        rows.append(("step", f"{fmt_ns(d.get('active_step_ns'))} profiled, {fmt_ns(d['corrected_step_ns'])} "
                             f"corrected, {fmt_ns(d.get('baseline_step_ns'))} in the wait steps (medians)"))
    if d.get("verdict"):
        rows.append(("verdict", skew_words(d["verdict"], d["verdict"].get("enough_pairs", True))))
    marks = (d.get("operators") or {}).get("marks")
    if marks:
        rows.append(("operators", marks_line(marks)))
        rows.append(("what to read", reconcile(bool((d.get("verdict") or {}).get("skewed")), d.get("inflation"),
                                               marks)))
    rows.append(("corrected trace", d.get("corrected_trace") or "none"))
    return rows


def table_rows(kind: str, d: dict, *, top: int = 30, rows=None):
    """(column titles, rows of <td> cells) of a result's table."""
    e = escape

    def td(x, style=""):
        return f"<td style='text-align:right;{style}'>{e(str(x))}</td>"

    def tname(x):
        return f"<td style='text-align:left'>{e(str(x))}</td>"

    def cols_of(names):
        return tuple(names)  # the titles of opskew.render.tables.COLUMNS, as the text tables print them

    if kind in ("check", "profile cycle"):
        v = d.get("operators") or {}
        ops = v.get("ops") or []
        if not ops:
            return [], []
        # check's own top; a profile cycle's, the notebook's
        ops = ops[: v["top"]] if v.get("top") else ops[:top] if kind != "check" and top else ops
        kinds = [column(c).kind for c in VERDICT_COLUMNS]  # the text table's columns and units
        body = []
        for r, row in zip(ops, verdict_rows(ops)):
            cells = [tname(row[0])] + [td(cell(x, k)) for x, k in zip(row[1:-1], kinds[1:-1])]
            body.append(cells + [f"<td style='text-align:left;color:{MARK_COLOURS[r['mark']]}'>"
                                 f"<b>{e(row[-1])}</b></td>"])
        return cols_of(VERDICT_COLUMNS), body
    if kind == "summary":
        ops = d["ops"] if not top else d["ops"][:top]
        kinds = [column(c).kind for c in SUMMARY_COLUMNS]
        srows = summary_rows(ops, SUMMARY_COLUMNS, sum(o["self_ns"] for o in d["ops"]))
        return cols_of(SUMMARY_COLUMNS), [[tname(r[0])] + [td(cell(x, k)) for x, k in zip(r[1:], kinds[1:])]
                                          for r in srows]

    def ci(x):
        # The interval as measured: a 95% one, or with its own coverage
        # when too few rounds reach 95% (the text tables say so in a note).
        if not x or x.get("median") is None:
            return "n/a"
        lo, hi = x.get("ci95") or (None, None)
        cov = x.get("ci_coverage")
        short = cov is not None and not x.get("ci_reaches_95", cov >= 0.95)
        return fmt_ns(x["median"]) + (f" [{fmt_ns(lo)}, {fmt_ns(hi)}]" if lo is not None else "") + (
            f" ({100 * cov:.0f}% interval: too few rounds for 95%)" if lo is not None and short else "")

    if kind == "matrix":
        cols = ("row", "instrument", "in-window per event [95% CI]", "marginal [95% CI]", "over")
        return cols, [[tname(r["row"]), tname(r.get("label", "")), td(ci(r.get("in_window_per_event_ns"))),
                       td(ci(r.get("marginal_in_window_ns"))), tname(r.get("marginal_over", ""))]
                      for r in d.get("rows", []) if r["row"] != "baseline"]
    if kind == "compare":
        cols, cells, _ = table_cells(d)
        return tuple(c.title for c in cols), [[tname(r[0])] + [td(x) for x in r[1:]] for r in cells]
    if kind == "advise":
        rec = (d.get("recommended") or {}).get("name")
        cols = ("candidate", "in-window per event [95% CI]", "events / iteration", "recommended")
        return cols, [[tname(c["label"]), td(ci(c["in_window_per_event_ns"])),
                       td(f"{c['events_per_iter']:.6g}"), tname("*" if k == rec else "")]
                      for k, c in d.get("candidates", {}).items()]
    if kind == "correct":  # correct's text table, its columns and units
        ops = d.get("ops") or []
        ops = ops[:top] if top else ops
        kinds = [column(c).kind for c in CORRECT_COLUMNS]
        return cols_of(CORRECT_COLUMNS), [[tname(r[0])] + [td(cell(x, k)) for x, k in zip(r[1:], kinds[1:])]
                                          for r in correct_rows(ops)]
    if kind != "sweep":
        return [], []  # (a kind with no table of its own: its headline, or its text)
    cols = ("op", "size", "instrument", "true / call", "added / call", "reported / call", "skew")
    body = []
    for r in rows or ():
        skew = r.get("reported_over_op")
        body.append([tname(r["op"]), td(r["size"]), tname(r["instrument_label"]),
                     td(fmt_time(r["true_per_call_s"])), td(fmt_time(r["added_per_call_s"])),
                     td(fmt_time(r["reported_per_call_s"])), td(f"x{skew:.2f}" if skew else "n/a")])
    return cols, body
