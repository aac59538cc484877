"""Which W a cycle's trace is corrected with (docs/profile.md, "Which W a
trace gets"): one rule, in this order. The run's own pairs where their CI
reaches 95%; else this capture's steps against the bare steps between
captures (profiler.traffic) where its interval is no wider than the
in-process model's; else the model (profiler.model); else a stored
calibration's; else none. The report names the source (w_source), says why
in fallback, and keeps the others beside the one used (w_model_ns,
w_bare_steps_ns, w_stored_ns). Loops here are over steps, never over
events."""

from __future__ import annotations

from opskew.calibration.store import for_trace
from opskew.stats.pricing import ADVICE


def choose_w(rep: dict, w, detail: dict, figures, traffic, stop_ns: int, training: bool = True):
    """The W of the cycle `rep` reports (a dict with median, ci95,
    ci_coverage, ci_method), or None: `w` the run's pairs' estimate,
    `figures` the profiler's (profiler.figures: the model, W_py, the stored
    calibration), `traffic` its optimizer steps or None, `stop_ns` the
    capture's stop and export (the model's check's budget), `training`
    whether the capture has backward events (which step the model times)."""
    if w is not None and w["ci_reaches_95"]:
        if figures.cost_model == "always":
            rep["w_model_ns"] = figures.model(stop_ns, training)
        rep["w_source"] = "in-run"
        return {"median": w["median"], "ci95": w["ci95"], "ci_coverage": w["ci_coverage"],
                "ci_method": w["ci_method"]}
    w_py = figures.w_py()
    ev = (rep["cycle"], rep["events"]["op_events"], rep["events"]["py_events"],
          max(w_py["median"], 0.0) if w_py else 0.0)
    t = traffic.w(*ev) if traffic is not None else None
    m = figures.model(stop_ns, training) if figures.cost_model != "off" else None
    rep["w_model_ns"] = m
    if t is not None:
        # The run's own bare steps between captures, against this capture's
        # (two samples): before the model, unless its interval is the wider
        # (a few bare steps, taken at other times than the capture's, on a
        # machine whose speed moves). Both are in the report.
        if m is None or t["ci95"][1] - t["ci95"][0] <= m["ci95"][1] - m["ci95"][0]:
            rep["two_sample"] = t.pop("two_sample")
            rep["w_source"] = "in-run, bare steps between captures"
            _traffic_step(rep, traffic, ev, t)
            return t
        rep["w_bare_steps_ns"] = {k: t[k] for k in ("median", "ci95", "ci_coverage", "ci_method")}
    wv, rep["w_source"], rep["fallback"] = _fallback(rep, w, detail, figures, traffic, m, training)
    if wv is not None and traffic is not None:
        _traffic_step(rep, traffic, ev, wv)
    return wv


def _fallback(rep: dict, w, detail: dict, figures, traffic, m, training: bool) -> tuple:
    """(W, its source, the fallback's sentence) where the run's own steps
    give none: the model `m`, else a stored calibration (its built-in
    step's W that matches the capture, `training`), else none."""
    cal = figures.stored()
    if cal is not None:
        try:
            cal = for_trace(cal, training)
        except ValueError:
            pass  # its step's W unusable: the calibration's own W
    few = "" if w is None else f" ({detail['pairs']} pair(s), too few for a 95% CI)"
    unusable = f"; {figures.model_error}" if m is None and figures.model_error else ""
    if rep.get("w_bare_steps_ns"):
        b = rep["w_bare_steps_ns"]
        unusable += (f"; the bare steps between captures gave W {b['median']:.0f} ns [{b['ci95'][0]:.0f}, "
                     f"{b['ci95'][1]:.0f}], a wider interval than the model's (w_bare_steps_ns)")
    if traffic is not None and traffic.refused:
        unusable += f"; {traffic.refused}"
    if m is not None:
        if cal is not None:
            rep["w_stored_ns"] = dict(cal["w_ns"], source=f"stored calibration {cal.get('_path', '')}")
        return ({"median": m["median"], "ci95": list(m["ci95"]), "ci_coverage": m["ci_coverage"],
                 "ci_method": "the model's rounds, widened by its miss"}, "in-process model",
                f"no step of this run was paired with an unprofiled one{few}: W is the in-process model's, "
                f"{m['rounds']} rounds of a small {m['step']} step bare and under this configuration in this "
                "process; its interval is widened to how far the model misses a workload's own W "
                f"(x{m['miss'][0]:g} to x{m['miss'][1]:g}, docs/profile.md), and the verdict is not made{unusable}")
    if cal is not None:
        source = f"stored calibration {cal.get('_path', '')}"
        c = cal["w_ns"]
        return ({"median": c["median"], "ci95": list(c.get("ci95") or [c["median"], c["median"]]),
                 "ci_coverage": c.get("ci_coverage", 0.95)}, source,
                f"W from a {source}: its CI is that of its own calibration run, not of this workload; a stored W "
                f"can be off by a factor of 0.5 to 2 on a drifting machine (docs/correct-validation.md){unusable}")
    if w is not None:
        return (None, "in-run, too few pairs",
                "no stored calibration: W is this run's median with too few pairs for a 95% CI; the verdict is "
                f"not made and the trace is not corrected; {ADVICE} (or store a W with `opskew calibrate`){unusable}")
    return (None, "in-run",
            "no stored calibration and no active step paired with a wait step: W is unknown, the verdict is not "
            f"made and the trace is not corrected; {ADVICE} (or store a W with `opskew calibrate`){unusable}")


def _traffic_step(rep: dict, traffic, ev: tuple, wv: dict):
    """The capture's true step by the optimizer's steps or the root
    module's forward calls (Traffic.true_step) where no step() marked one
    (the trace's, where one did: trace_steps); step_marked_by says which."""
    taken = False
    for k, v in (traffic.true_step(*ev, wv) or {}).items():
        if rep.get(k) is None:
            rep[k] = v
            taken = True
    if taken:
        rep["step_marked_by"] = traffic.marked_by()
