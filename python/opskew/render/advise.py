"""The text of `opskew advise` for people."""

from __future__ import annotations

import sys

from opskew.render.units import count_of, fmt_ns, fmt_time


def schedule_args(sch: dict) -> str:
    """A recommended schedule's arguments, as the text and the snippet write
    them: "wait=2, warmup=1, active=5, repeat=1"."""
    return ", ".join(f"{k}={sch[k]}" for k in ("wait", "warmup", "active", "repeat"))


def print_human(result, out=None):
    out = out or sys.stdout  # looked up per call: a redirected or captured stdout is honoured
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
    out.write(f"  candidates (added cost per event, in the window [{ci_name}]; outside it):\n")
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
        sc = rec.get("self_correcting")
        if sc:
            out.write(f"  corrected traces: the same options under {sc['python']}, or no code change: "
                      f"{sc['command']}; {sc['why']}\n")
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
