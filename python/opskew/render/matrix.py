"""The text of `opskew matrix` for people, and how a marginal cost reads."""

from __future__ import annotations

import sys

from opskew.render import answers
from opskew.render.units import columns, count_of, fmt_ns
from opskew.stats.estimators import marginal_state


def _ci_text(d: dict | None) -> str:
    if not d or d.get("median") is None:
        return "n/a"
    ci = d.get("ci95")
    if not ci:
        return fmt_ns(d["median"])
    return f"{fmt_ns(d['median'])} [{fmt_ns(ci[0])}, {fmt_ns(ci[1])}]"


def _too_few(d: dict) -> str:
    """A value whose interval does not reach 95%: the interval it has, by
    its coverage, never as a 95% CI or as a verdict on 0."""
    ci, cov = d["ci95"], d.get("ci_coverage")
    level = f"{cov:.0%} interval" if cov is not None else "interval"
    return (f"{fmt_ns(d['median'])} ({level} [{fmt_ns(ci[0])}, {fmt_ns(ci[1])}]: too few rounds for a 95% CI, "
            "use --trials 6 or more)")


def marginal_text(r: dict) -> str:
    d = r.get("marginal_in_window_ns")
    state = marginal_state(d)
    if state is None:
        return ""
    if state == "too few rounds":
        return f"{_too_few(d)} ({r['marginal_over']})"
    if state == "not distinguishable":
        ci = d.get("ci95")
        span = f" [{fmt_ns(ci[0])}, {fmt_ns(ci[1])}]" if ci else ""
        return f"not distinguishable from {r['marginal_over']}{span}"
    return f"{_ci_text(d)} ({r['marginal_over']})"


def print_human(result: dict, out=None) -> None:
    out = out or sys.stdout  # looked up per call: a redirected or captured stdout is honoured
    out.write(answers.lead(answers.matrix(result)))
    c = result["conditions"]
    out.write(f"opskew matrix: {c['workload']['description']}\n")
    out.write(f"  torch {c['torch']}, {c['device']} ({c.get('gpu') or c['cpu']}), {count_of(c['threads'], 'thread')}; "
              f"{result.get('rounds', 0)} rounds x {c['iters']} iterations; "
              f"{result.get('events_per_iter', 0):.6g} operator events/iteration; "
              f"baseline {1e6 * result.get('baseline_per_iter_s', 0):.1f} us/iteration\n")
    if result.get("status") != "complete":
        out.write(f"  PARTIAL ({result.get('status')}): figures use the rounds completed\n")
    out.write("  medians per event; [CI]: the sign-test interval for the median, coverage >= 95% from 6\n"
              "  rounds on (the exact coverage is ci_coverage in --json)\n\n")
    rows = []
    for r in result.get("rows", []):
        if r["row"] == "baseline":
            continue
        g = lambda k: fmt_ns((r.get(k) or {}).get("median"))  # noqa: E731
        b = r.get("export_bytes_per_event")
        rows.append([r["row"], _ci_text(r.get("in_window_per_event_ns")), marginal_text(r),
                     g("stop_per_event_ns"), g("postprocess_per_event_ns"), g("export_per_event_ns"),
                     ("%.0f" % b) if b else ""])
    for line in columns(["row", "in-window W [CI]", "marginal [CI] (over)", "stop", "post", "export", "B/ev"],
                        rows):
        out.write(line + "\n")
    out.write("  in-window W: each row (a configuration) against the baseline (docs/which-w.md); compare two "
              "rows by the marginal column,\n"
              "  which pairs the row with its reference round by round (W medians of two rows can\n"
              "  order differently from it); a marginal whose CI includes 0 is not distinguishable\n")
    for name, why in result.get("skipped", {}).items():
        out.write(f"{name}  not measured: {why}\n")
    out.write("\nrows: " + "; ".join(f"{r['row']} = {r['label']}" for r in result.get("rows", [])
                                     if r["row"] != "baseline") + "\n")
    out.write("\nWhere the time goes (by source of profiler latency), per event:\n")
    src = []
    for s in result.get("sources", []):
        d = {"median": s["per_event_ns"], "ci95": s["ci95"], "ci_reaches_95": s.get("ci_reaches_95"),
             "ci_coverage": s.get("ci_coverage")}
        if s["per_event_ns"] is None:
            val = "n/a"
        elif s.get("below_reference"):
            b = s["below_reference"]
            faster = {"median": -b["median"], "ci95": b["ci95"] and [-b["ci95"][1], -b["ci95"][0]]}
            val = (f"0 (clamped: it ran {_ci_text(faster)} faster than what it is measured over, which is "
                   "no floor for it in this run)")
        elif s["ci95"] and marginal_state(d) == "too few rounds":
            val = _too_few(d)
        elif s["ci95"] and marginal_state(d) == "not distinguishable":
            val = f"not distinguishable from 0 [{fmt_ns(s['ci95'][0])}, {fmt_ns(s['ci95'][1])}]"
        else:
            val = _ci_text(d)
        if s.get("stop_per_event_ns") is not None:
            val += f" (+ stop {fmt_ns(s['stop_per_event_ns'])})"
        src.append([s["source"], val, s["measure"]])
    for line in columns(["source", "per event [CI]", "how it is measured"], src):
        out.write("  " + line + "\n")
    if result.get("error"):
        out.write(f"\nerror: {result['error']}\n")
