"""What the C correction takes per ProfilerStep#N of a profiled cycle
(docs/method.md, "The first active step", "W by position"): each active
step's body, and the scale on W its events are priced at, with the reason
the report gives. The arithmetic is opskew.stats.pricing's."""

from __future__ import annotations

from opskew.render.units import fmt_ns
from opskew.stats.pricing import COLD_MAX_SCALE, COLD_MIN_CYCLES, COLD_STEP_MIN_CYCLES, cold_w_scale, level as cycle_level


def step_spans(rep: dict, model, est: dict) -> dict | None:
    """What the C correction takes per ProfilerStep#N (docs/method.md, "The
    first active step"): each active step's body (rep["step_spans_ns"]), and
    for the cycle's first active step, which runs cold, a scale on its
    events' cost under the cost model `model` (W and W_py): 1 + its extra (est's cold_first_active_extra_ns, the
    median over cycles of the first active step less the cycle's others) over
    the instrument time W and W_py give its events. Priced from
    COLD_STEP_MIN_CYCLES cycles on, when the extra is > 0, W's 95% CI lies above 0
    (else W x events is no base to price it on) and the scale comes to at
    most COLD_MAX_SCALE; what was used, and why not, goes into
    rep["cold_step"]. Each of the cycle's other active steps is priced at
    the W of the pairs at its position in the cycle (est's w_by_position,
    over W: the profiler's cost per event falls over a cycle's first steps),
    into rep["position_steps"]: price_position."""
    spans = dict(rep.get("step_spans_ns") or {})
    levels = {c["first_step"]: c for c in est.get("w_by_cycle") or []}
    cold = rep.get("cold_step")
    if cold is not None:
        price(spans, cold, est.get("cold_first_active_extra_ns"), est.get("cold_first_active_cycles") or 0, model,
              levels.get(cold.get("cycle_first_step")))
    figs = {p["position"]: p for p in (est.get("w_by_position") or [])}
    for st in rep.get("position_steps") or []:
        price_position(spans, st, figs.get(st["position"]), model, levels.get(st.get("cycle_first_step")))
    return spans or None


def level_said(level: dict | None) -> str:
    f = cycle_level(level)
    if f == 1.0:
        return ""
    return (f", and x {f:.2f} for its cycle's own level (all {level['pairs']} of the cycle's pairs "
            f"{'above' if f > 1 else 'below'} their position's W)")


def price_position(spans: dict, st: dict, fig: dict | None, model, level: dict | None = None):
    """step_spans for a paired active step at position k of its cycle: its
    operator events at w_k instead of W, w_k the median of the run's pairs
    at that position (docs/method.md, "W by position"), times its cycle's
    own level where that differs from the run's (`level`: cycle_factors),
    its Python events at W_py still (W_py is measured apart and taken out of
    the pairs first): one scale on both, (w_k x f x ops + W_py x py) /
    (W x ops + W_py x py). w_k from COLD_MIN_CYCLES pairs on and where > 0
    (else W); priced where W's 95% CI lies above 0 and the scale lies within
    [1 / COLD_MAX_SCALE, COLD_MAX_SCALE]; else at W, and `why` says so."""
    wm = max(model.operator.w["median"], 0.0)
    ci = model.operator.w.get("ci95") or [0.0, 0.0]
    n = (fig or {}).get("pairs") or 0
    wk = (fig or {}).get("w_ns")
    f = cycle_level(level)
    ops, py = st.get("op_events") or 0, st.get("py_events") or 0
    base = model.step_cost(ops, py)
    if n < COLD_MIN_CYCLES:
        at_w = f"{n} pair(s) at this position (it takes {COLD_MIN_CYCLES})"
    elif not (isinstance(wk, (int, float)) and wk > 0):
        at_w = "its position's pairs gave a W of 0 or less"
    else:
        at_w = None
    w_at = wm if at_w else wk
    scale = model.step_cost(ops, py, f, w_at) / base if wm > 0 and base > 0 else None
    if not ci[0] > 0:
        why = "priced at W: W's 95% CI reaches 0"
    elif scale is None:
        why = "priced at W: W is 0"
    elif at_w and f == 1.0:
        why = f"priced at W: {at_w}"
    elif not 1 / COLD_MAX_SCALE <= scale <= COLD_MAX_SCALE:
        why = f"priced at W: its pairs gave {scale:.2f} x W, past {COLD_MAX_SCALE:.0f}x either way"
    else:
        why = None
    where = (f"at W ({at_w})" if at_w else f"at the median of {n} pairs at its position") + level_said(level)
    priced(spans, st, scale, why, f"its events priced at {{:.2f}} x W (and W_py): its operator events {where}",
            w_ns=wk, pairs=n, cycle_factor=f)


def priced(spans: dict, step: dict, scale, why: str | None, said: str, **figures):
    """A priced step's answer: its scale (1.0 where `why` says why not)
    into `step` with `figures` and the reason (`said`, formatted with the
    scale, when priced), and into `spans` beside its body when not 1."""
    scale = scale if why is None else 1.0
    step.update(figures, w_scale=scale, why=why or said.format(scale))
    if scale != 1.0:
        spans[step["name"]] = (spans.get(step["name"], -1.0), scale)


def price(spans: dict, cold: dict, extra, n: int, model, level: dict | None = None):
    """step_spans for the cycle's cold first active step: its scale into
    `spans` and `cold`, or why not into `cold`. Where its cycle's own level
    differs from the run's (`level`), its operator events pay that too, on
    top of the extra: cold_w_scale."""
    ci = model.operator.w.get("ci95") or [0.0, 0.0]
    f = cycle_level(level)
    want = cold_w_scale(extra, cold, model)
    if n < COLD_STEP_MIN_CYCLES:
        why = f"priced at W: {n} cycle(s) measured it (it takes {COLD_STEP_MIN_CYCLES})"
    elif want == 1.0:
        why = "priced at W: it ran no slower than the others"
    elif not ci[0] > 0:
        why = (f"priced at W: it ran {fmt_ns(extra)} over the others, but W's 95% CI reaches 0, so W x its events "
               "is no base to spread that over")
    elif want > COLD_MAX_SCALE:
        why = (f"priced at W: it ran {fmt_ns(extra)} over the others, {want - 1:.1f} times the instrument time W "
               f"gives its events (past {COLD_MAX_SCALE - 1:.0f}: a lump, not a cost per event); it stays in the step")
    else:
        why = None
    if why is None:
        said = (f"its events priced at {{:.2f}} x W: the first active step of a cycle ran {fmt_ns(extra)} over the "
                f"cycle's others (median over {n} cycles)" + level_said(level))
    else:
        said = f"its events priced at {{:.2f}} x W{level_said(level)}; its extra {why}"
    # Its cycle's own level, whether or not the extra is priced (while W's
    # CI lies above 0).
    scale = cold_w_scale(extra if why is None else 0.0, cold, model, f) if ci[0] > 0 else 1.0
    if not 1 / COLD_MAX_SCALE <= scale <= COLD_MAX_SCALE:
        scale, why = 1.0, f"priced at W: with its cycle's own level it came to {scale:.2f} x W, past {COLD_MAX_SCALE:.0f}x"
    priced(spans, cold, scale, why if scale == 1.0 else None, said, extra_ns=extra, cycles=n, cycle_factor=f,
            extra_priced=why is None and scale != 1.0)

