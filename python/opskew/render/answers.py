"""The first line of a command's text: the answer to its question, with its
interval, before the tables and notes that support it (docs/commands.md,
"Answer first"). Each takes the command's document and gives one line, or
"" where the run has no answer (nothing measured)."""

from __future__ import annotations

from opskew.render.units import fmt_ns, fmt_time

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
