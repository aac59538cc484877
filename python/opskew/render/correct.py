"""`opskew correct`'s text for people, and its CSV rows."""

from __future__ import annotations

import sys

from opskew.render import answers
from opskew.render.notes import words
from opskew.render.tables import op_table
from opskew.render.trace_notes import warnings_of
from opskew.render.units import count_of, fmt_time

CORRECT_COLUMNS = ("name", "calls", "total", "corrected total", "self", "corrected self", "mean",
                   "corrected mean", "clamped")


def correct_rows(ops: list) -> list:
    """Rows of CORRECT_COLUMNS (times in ns) from the per-operator dicts."""
    return [[o["name"], o["calls"], o["reported_total_ns"], o["corrected_total_ns"], o["reported_self_ns"],
             o["corrected_self_ns"], o["reported_total_ns"] / o["calls"] if o["calls"] else None,
             o["corrected_total_ns"] / o["calls"] if o["calls"] else None, o["clamped"]] for o in ops]



def print_human(res: dict, out=None) -> None:
    out = out or sys.stdout  # looked up per call: a redirected or captured stdout is honoured
    cal = res["calibration"]
    s = res["stats"]
    out.write(answers.lead(answers.correct(res)))
    out.write(f"opskew correct: {res['trace']}\n")
    py = (f", W_py {cal['w_py_ns']:.1f} ns, delta_py {cal['delta_py_ns']:.1f} ns" if cal["w_py_ns"] else "")
    out.write(f"  instrument: {res['detected']['instrument']} ({res['detected']['config']}); calibration "
              f"W {cal['w_ns']:.1f} ns, delta {cal['delta_ns']:.1f} ns{py} ({cal['source']})\n")
    for note in res["notes"]:
        out.write(f"  note: {words(note)}\n")
    if s.get("passes", 1) > 1 and s.get("held_threads"):
        out.write(f"  note: {s['held_threads']} thread(s) were out of time order (with_stack's Python events, "
                  f"or children written before parents): the trace was read twice and their events held in "
                  f"memory ({s['held_peak']} at most, 32 bytes each; docs/correct.md)\n")
    if res["truncated"]:
        out.write(f"  WARNING: {res['warning']} (at byte {res['truncated_at']})\n")
    share = res["instrument_share"]
    out.write(f"  {s['corrected_events'] - s['py_events']} operator and {s['py_events']} Python-function "
              f"events on {count_of(s['threads'], 'thread')} corrected; {s['other_events']} complete events of "
              f"other categories not corrected")
    if "retimed_events" in s:
        out.write(f"; the corrected trace holds every record of the trace: {s['retimed_events']} re-timed with "
                  f"their thread's operators (flows, instants, runtime calls), {s['passed_events']} as read "
                  f"(metadata, the GPU's rows)")
    out.write("\n")
    if s.get("unusable_events"):
        for w in warnings_of({"status": "ok", "stats": {"unusable_events": s["unusable_events"]}}):
            out.write(f"  WARNING: {w}\n")
    if s.get("begin_end_events"):
        out.write(f"  WARNING: {s['begin_end_events']} \"B\"/\"E\" events of operator categories were not "
                  f"corrected (written as they were read): opskew correct reads complete (\"X\") events "
                  f"only (opskew summary analyses both)\n")
    out.write(f"  top-level time: reported {fmt_time(s['reported_top_ns'] * 1e-9)}, corrected "
              f"{fmt_time(s['corrected_top_ns'] * 1e-9)}: {100 * share:.1f}% of the trace is instrument\n")
    if s["clamped"]:
        out.write(f"  {s['clamped']} event(s) fell below zero and were clamped; residual "
                  f"{fmt_time(s['residual_ns'] * 1e-9)} (the calibration over-compensates these)\n")
    if s.get("stretched"):
        out.write(f"  {s['stretched']} event(s) are longer in the corrected trace than their corrected duration "
                  f"({fmt_time(s['stretched_ns'] * 1e-9)} in all): their children's corrected durations outlast "
                  f"their own (W over-compensates there: a clamped child), so they are written as long as their "
                  f"children need; the table reads them as written (docs/correct.md)\n")
    if s.get("shortened"):
        out.write(f"  {s['shortened']} event(s) are shorter in the corrected trace than their corrected duration "
                  f"({fmt_time(s['shortened_ns'] * 1e-9)} in all): they have no time of their own to give (events "
                  f"that outlived them hold all of it); the table reads them as written (docs/correct.md)\n")
    out.write("\n")
    op_table(correct_rows(res["ops"]), CORRECT_COLUMNS, omitted=res.get("omitted", 0), out=out)
    if res.get("out"):
        out.write(f"\ncorrected trace: {res['out']}\n")

