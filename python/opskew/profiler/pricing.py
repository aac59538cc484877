"""What the C correction takes per ProfilerStep#N of a profiled cycle
(docs/method.md, "The first active step", "W by position"): each active
step's body, and the scale on W its events are priced at, with the reason
the report gives, as a record (render.notes.priced says it in words). The
arithmetic is opskew.stats.pricing's."""

from __future__ import annotations

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


def _level(level: dict | None) -> dict | None:
    """A cycle's own level as a priced step's reason carries it (its factor
    and its pairs), or None where it is the run's."""
    f = cycle_level(level)
    return None if f == 1.0 else {"factor": f, "pairs": level["pairs"]}


def price_position(spans: dict, st: dict, fig: dict | None, model, level: dict | None = None):
    """step_spans for a paired active step at position k of its cycle: its
    operator events at w_k instead of W, w_k the median of the run's pairs
    at that position (docs/method.md, "W by position"), times its cycle's
    own level where that differs from the run's (`level`: cycle_factors),
    its Python events at W_py still (W_py is measured apart and taken out of
    the pairs first): one scale on both, (w_k x f x ops + W_py x py) /
    (W x ops + W_py x py). w_k from COLD_MIN_CYCLES pairs on and where > 0
    (else W); priced where W's 95% CI lies above 0 and the scale lies within
    [1 / COLD_MAX_SCALE, COLD_MAX_SCALE]; else at W, and `why` says so (a
    record: render.notes.priced says it)."""
    wm = max(model.operator.w["median"], 0.0)
    ci = model.operator.w.get("ci95") or [0.0, 0.0]
    n = (fig or {}).get("pairs") or 0
    wk = (fig or {}).get("w_ns")
    f = cycle_level(level)
    ops, py = st.get("op_events") or 0, st.get("py_events") or 0
    base = model.step_cost(ops, py)
    if n < COLD_MIN_CYCLES:
        at_w = {"code": "few_pairs", "pairs": n, "needs": COLD_MIN_CYCLES}
    elif not (isinstance(wk, (int, float)) and wk > 0):
        at_w = {"code": "w_nonpositive"}
    else:
        at_w = None
    w_at = wm if at_w else wk
    scale = model.step_cost(ops, py, f, w_at) / base if wm > 0 and base > 0 else None
    if not ci[0] > 0:
        why = {"code": "w_ci_reaches_0"}
    elif scale is None:
        why = {"code": "w_zero"}
    elif at_w and f == 1.0:
        why = at_w
    elif not 1 / COLD_MAX_SCALE <= scale <= COLD_MAX_SCALE:
        why = {"code": "past", "scale": scale, "max": COLD_MAX_SCALE}
    else:
        why = None
    priced(spans, st, scale, {"code": "position", "reason": why, "pairs": n, "at_w": at_w, "level": _level(level)},
           w_ns=wk, pairs=n, cycle_factor=f)


def priced(spans: dict, step: dict, scale, why: dict, **figures):
    """A priced step's answer: its scale (1.0 where `why`'s reason says why
    not) into `step` with `figures` and the reason (a record with the scale:
    render.notes.priced says it), and into `spans` beside its body when not
    1."""
    scale = scale if why["reason"] is None else 1.0
    step.update(figures, w_scale=scale, why={**why, "scale": scale})
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
        why = {"code": "few_cycles", "cycles": n, "needs": COLD_STEP_MIN_CYCLES}
    elif want == 1.0:
        why = {"code": "no_slower"}
    elif not ci[0] > 0:
        why = {"code": "cold_ci_reaches_0", "extra_ns": extra}
    elif want > COLD_MAX_SCALE:
        why = {"code": "lump", "extra_ns": extra, "times": want - 1, "max": COLD_MAX_SCALE}
    else:
        why = None
    extra_why = why
    # Its cycle's own level, whether or not the extra is priced (while W's
    # CI lies above 0).
    scale = cold_w_scale(extra if why is None else 0.0, cold, model, f) if ci[0] > 0 else 1.0
    if not 1 / COLD_MAX_SCALE <= scale <= COLD_MAX_SCALE:
        scale, why = 1.0, {"code": "level_past", "scale": scale, "max": COLD_MAX_SCALE}
    priced(spans, cold, scale, {"code": "cold", "reason": why if scale == 1.0 else None, "extra_reason": extra_why,
                                "extra_ns": extra, "cycles": n, "level": _level(level)},
           extra_ns=extra, cycles=n, cycle_factor=f, extra_priced=why is None and scale != 1.0)
