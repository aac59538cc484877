"""The first line of a command's text: the answer to its question, with its
interval, before the tables and notes that support it (docs/commands.md,
"Answer first"). Each takes the command's document and gives one line, or
"" where the run has no answer (nothing measured)."""

from __future__ import annotations

from opskew.render.units import count_of, fmt_ns, fmt_time
from opskew.stats.rows import moved_most

# matrix's rows that record every operator (a trace at operator granularity);
# the floors and the empty observer record nothing.
RECORDING = ("minimal", "+record_shapes", "+with_stack", "+profile_memory", "+with_flops", "+with_modules", "all",
             "minimal-cpu-only", "opskew", "opskew-native")


def lead(line: str) -> str:
    """The answer as the text's opening: its line and a blank one, or nothing."""
    return line + "\n\n" if line else ""


def _ci(d: dict) -> str:
    ci = d.get("ci95")
    return f"{fmt_ns(d['median'])}" + (f" [{fmt_ns(ci[0])}, {fmt_ns(ci[1])}]" if ci else "")


def check(result: dict) -> str:
    """Skewed or not, and by how much: the in-window inflation and W."""
    v, w = result.get("verdict"), result.get("added_per_event_ns")
    if not v or not w or result.get("inflation") is None:
        return ""
    word = ("SKEWED" if v.get("skewed") else
            "not enough trials to decide" if not v.get("significant") and not v.get("enough_trials", True)
            else "no significant skew" if not v.get("significant") else "significant, below the threshold")
    return (f"opskew check: {word}: the profiled loop runs x{result['inflation']:.2f} its bare time, "
            f"W {_ci(w)} per operator event")


def matrix(result: dict) -> str:
    """The cheapest configuration that records every operator, and its cost per event."""
    rows = [r for r in result.get("rows", []) if r.get("row") in RECORDING
            and (r.get("in_window_per_event_ns") or {}).get("median") is not None]
    if not rows:
        return ""
    best = min(rows, key=lambda r: r["in_window_per_event_ns"]["median"])
    mini = next((r for r in rows if r["row"] == "minimal"), None)
    vs = (f" (torch.profiler minimal: {_ci(mini['in_window_per_event_ns'])})"
          if mini is not None and mini is not best else "")
    return (f"opskew matrix: cheapest configuration keeping every operator: {best['row']}, "
            f"{_ci(best['in_window_per_event_ns'])} per event in the window{vs}")


def advise(result: dict) -> str:
    """The recommended configuration, its cost per event and its slowdown."""
    rec = result.get("recommended")
    if not rec:
        return ""
    cand = (result.get("candidates") or {}).get(rec.get("name")) or {}
    w = cand.get("in_window_per_event_ns")
    return (f"opskew advise: use {rec['label']}" + (f", {_ci(w)} per event" if w else "")
            + f"; each active iteration runs {100 * rec['estimate']['active_slowdown']:.0f}% slower")


def sweep(result: dict) -> str:
    """Per operator and instrument: the size below which the instrument adds
    more per call than the operator's own duration."""
    parts = []
    for curve in result.get("curves", []):
        for name, label in (result.get("instruments") or {}).items():
            x = (curve.get("crossover") or {}).get(name) or {}
            a = x.get("vs_op_duration")
            pts = curve.get("points") or []
            if a:
                parts.append(f"{curve['op']} under {label}: costs more than the operator below {a:.3g} elements")
            elif pts:
                first = pts[0]
                above = first["op_duration_s"] and first["by"][name]["added_per_call_s"] >= first["op_duration_s"]
                parts.append(f"{curve['op']} under {label}: {'more' if above else 'less'} than the operator at every "
                             f"size measured ({pts[0]['size']} to {pts[-1]['size']}; "
                             f"{fmt_time(first['by'][name]['added_per_call_s'])} a call at the smallest)")
    return "opskew sweep: " + "; ".join(parts) if parts else ""


def correct(res: dict) -> str:
    """How much of the trace is instrument, and the operator whose self
    time the correction moved most."""
    s = res.get("stats") or {}
    if not s.get("corrected_events"):
        return ""
    w = (res.get("calibration") or {}).get("w_ns")
    top = moved_most([(o["name"], o["reported_self_ns"], o["corrected_self_ns"]) for o in res.get("ops") or []
                      if o.get("calls")], 1)
    line = (f"opskew correct: {100 * res.get('instrument_share', 0.0):.1f}% of the trace's top-level time is "
            f"instrument ({fmt_ns(s['reported_top_ns'])} reported, {fmt_ns(s['corrected_top_ns'])} corrected, "
            f"at W {fmt_ns(w)} per operator event)")
    for name, r, c in top:
        line += f"; moved most: {name}, self {fmt_ns(r)} -> {fmt_ns(c)}"
    return line


def summary(doc: dict) -> str:
    """Where a trace's self time goes: the span and the operator with most of it."""
    ops = [o for o in doc.get("ops") or [] if o.get("self_ns")]
    if not ops:
        return ""
    total = sum(o["self_ns"] for o in ops)
    top = max(ops, key=lambda o: o["self_ns"])
    st = doc.get("stats") or {}
    span = (f" over a span of {fmt_ns(st['last_end_ns'] - st['first_ts_ns'])}"
            if st.get("complete_events") and st.get("last_end_ns") is not None else "")
    return (f"opskew summary: {fmt_ns(total)} of self time{span}; most in {top['name']}, "
            f"{fmt_ns(top['self_ns'])} ({100 * top['self_ns'] / total:.0f}%, as recorded: the instrument's "
            "time is in it; --corrected takes it out)")


def profile_run(doc: dict) -> str:
    """A profile run's true step against its profiled one."""
    run = doc.get("run") or {}
    if run.get("corrected_step_ns") is None or run.get("active_step_ns") is None:
        return ""
    band = run.get("corrected_step_w_ci_ns")
    true = fmt_ns(run["corrected_step_ns"]) + (f" [{fmt_ns(band[0])}, {fmt_ns(band[1])}]" if band else "")
    return (f"opskew profile run: true step {true} at W's 95% CI, profiled {fmt_ns(run['active_step_ns'])}"
            + (f", unprofiled wait steps {fmt_ns(run['baseline_step_ns'])}" if run.get("baseline_step_ns") else "")
            + " (medians)")


def compare(result: dict) -> str:
    """What changed beyond noise between the inputs: the corrected step where
    the inputs are profile runs, else the count and the largest change."""
    labels = [i["label"] for i in result.get("inputs") or []]
    rows = result.get("rows") or []
    if len(labels) < 2 or not rows:
        return ""
    against = f"{', '.join(labels[1:])} against {labels[0]}"
    step = next((r for r in rows if r["name"] == "corrected step" and r["changes"]
                 and r["changes"][0]["change"] is not None), None)
    if step is not None:
        c = step["changes"][0]
        return (f"opskew compare: {against}: corrected step {fmt_ns(step['values'][0])} -> "
                f"{fmt_ns(step['values'][1])} ({100 * c['change']:+.1f}%, "
                + ("significant" if c["significant"] else "within noise") + ")")
    sig = [(r, c) for r in rows if not r.get("drift") for c in r["changes"]
           if c.get("significant") and c.get("change") is not None]
    tested = sum(1 for r in rows if not r.get("drift") for c in r["changes"] if c.get("significant") is not None)
    if not sig:
        return f"opskew compare: {against}: no significant change in {count_of(tested, 'figure')}"
    r, c = max(sig, key=lambda rc: abs(rc[1]["change"]))
    return (f"opskew compare: {against}: {len(sig)} of {tested} figures changed significantly; "
            f"largest: {r['name']} {100 * c['change']:+.1f}%")


def calibrate(run: dict) -> str:
    """The W each configuration measured, and whether it was stored."""
    cals = [c for c in run.get("calibrations") or [] if (c.get("w_ns") or {}).get("median") is not None]
    if not cals:
        return ""
    parts = [f"{c['key']['config']} W {_ci(c['w_ns'])}" + ("" if c.get("_path") else " (not stored)")
             for c in cals]
    return f"opskew calibrate ({cals[0]['key']['instrument']}): " + "; ".join(parts) + " per operator event"
