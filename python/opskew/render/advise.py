"""The text of `opskew advise` for people."""

from __future__ import annotations

import sys

from opskew.render import answers
from opskew.render.units import count_of, fmt_ns, fmt_time
from opskew.vocab import schedule_args


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "not measured"
    for unit, f in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= f:
            return f"{n / f:.3g} {unit}"
    return f"{n:.0f} B"


def budget_cycle(c: dict) -> str:
    """One cycle's costs, as the budget line writes them."""
    return (f"trace {fmt_bytes(c['trace_bytes'])} on disk, stop + export {fmt_time(c['stop_export_s'])}, "
            f"peak memory +{fmt_bytes(c['peak_added_bytes'])}")


def budget_lines(b: dict, sch: dict, out) -> None:
    """The capture budget (experiments.advise.capture_budget) in words."""
    c = b["cycle"]
    out.write(f"  budget per cycle of {c['iters']} active iteration(s): {budget_cycle(c)}"
              + (f" (x{sch['repeat']} cycles)" if sch.get("repeat", 1) > 1 else "") + "\n")
    p = b["profile_cycle"]
    out.write(f"    under opskew profile's schedule ({p['iters']} active a cycle): {budget_cycle(p)}, and the "
              "corrected trace beside it, about as large\n")
    ex = f"; extrapolated x{b['extrapolated']:.3g} past the largest probe" if b.get("extrapolated") else ""
    out.write(f"    from {b['method']}{ex}\n")
    for w in b["weak"]:
        out.write(f"    weak where: {w}\n")


def cycle_budget_line(b: dict) -> str:
    """`opskew profile`'s line on what its first cycle cost (measure.budget.from_cycle)."""
    cor = (f" + {fmt_bytes(b['corrected_trace_bytes'])} corrected" if not b["corrected_as_raw"]
           else " (+ its corrected trace when written, about as large)")
    times = ", ".join(f"{what} {fmt_ns(b[k])}" for k, what in (
        ("stop_ns", "stop"), ("export_ns", "on_trace_ready"),
        ("opskew_ns", "opskew (its export where on_trace_ready made none, analysis, correction)"))
        if b.get(k) is not None)
    run = (f"; the run's {b['cycles']} cycles: about {fmt_bytes(b['run_bytes'])} on disk" if b.get("run_bytes")
           else "")
    return (f"capture budget, from cycle {b['cycle']} as it ran: {fmt_bytes(b['raw_trace_bytes'])} raw trace{cor} "
            f"on disk, {times} per cycle (outside the steps){run}; peak memory {b['peak_memory']}")


def print_human(result, out=None):
    out = out or sys.stdout  # looked up per call: a redirected or captured stdout is honoured
    out.write(answers.lead(answers.advise(result)))
    c = result["conditions"]
    out.write(f"opskew advise: {c['workload']['description']}\n")
    out.write(f"  torch {c['torch']}, {c['device']} ({c.get('gpu') or c['cpu']}), {count_of(c['threads'], 'thread')}\n")
    if result.get("status") != "complete":
        out.write(f"  PARTIAL ({result.get('status')})\n")
    st = result.get("stabilization")
    if st:
        out.write(f"\n  cold start: first iteration {fmt_time(st['first_iter_s'])}, steady "
                  f"{fmt_time(st['steady_per_iter_s'])}; stable from iteration "
                  f"{st['stable_from_iter']} of {st['cold_iters_timed']} ({st['rule']})\n")
    out.write(f"  baseline {fmt_time(result.get('baseline_per_iter_s'))}/iteration, "
              f"{result.get('events_per_iter', 0):.6g} events/iteration\n\n")
    cov = next((c["in_window_per_event_ns"].get("ci_coverage") for c in result.get("candidates", {}).values()), None)
    ci_name = f"{100 * cov:.1f}% CI" if cov else "CI"
    out.write(f"  candidates (in-window W of each configuration on this workload's probe [{ci_name}]; outside "
              "the window: docs/which-w.md):\n")
    for name, cand in result.get("candidates", {}).items():
        w = cand["in_window_per_event_ns"]
        mark = "*" if name == result.get("recommended", {}).get("name") else " "
        out.write(f"  {mark} {cand['label']:50s} {fmt_ns(w['median'])} [{fmt_ns(w['ci95'][0])}, "
                  f"{fmt_ns(w['ci95'][1])}]; stop {fmt_ns(cand['stop_per_event_ns'])}, post-processing "
                  f"{fmt_ns(cand['post_per_event_ns'])} (not in the snippet), "
                  f"export {fmt_ns(cand['export_per_event_ns'])}, {cand['export_bytes_per_event']:.0f} B/event\n")
    rec = result.get("recommended")
    if rec:
        est = rec["estimate"]
        out.write(f"\n  recommended: {rec['label']}\n    {rec['why']}\n")
        out.write(f"  schedule: {schedule_args(rec['schedule'])}\n")
        out.write(f"  estimate: {est['events']:.6g} events, trace {est['trace_mb']:.3g} MB; each active "
                  f"iteration runs {100 * est['active_slowdown']:.0f}% slower; stop+export "
                  f"{fmt_time(est['stop_export_s'])} (the snippet runs no key_averages())\n")
        if rec.get("budget"):
            budget_lines(rec["budget"], rec["schedule"], out)
        sc = rec.get("self_correcting")
        if sc:
            out.write(f"  corrected traces: the same options under {sc['python']}, or no code change: "
                      f"{sc['command']}; {sc['why']}\n")
            if sc.get("captures"):
                out.write(f"  what each capture gets: {sc['captures']}\n")
    sc = result.get("scope")
    if sc:
        out.write(f"\n  scope {sc['path']}: whole step adds {fmt_time(sc['whole_added_per_iter_s'])}/iteration "
                  f"({sc['whole_events_per_iter']:.6g} events); scoped adds "
                  f"{fmt_time(sc['scoped_added_per_iter_s'])}/iteration ({sc['scoped_events_per_iter']:.6g} events); "
                  f"difference {fmt_time(sc['difference_per_iter_s'])}/iteration [{ci_name} "
                  f"{fmt_time(sc['difference_ci95_s'][0])}, {fmt_time(sc['difference_ci95_s'][1])}]\n"
                  f"  note: {sc['note']}\n")
    if result.get("snippet"):
        out.write("\n# ---- snippet ----\n" + result["snippet"] + "# ---- end ----\n")
    if result.get("error"):
        out.write(f"\nerror: {result['error']}\n")
