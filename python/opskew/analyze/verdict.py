"""Which numbers to believe: the per-operator verdict (docs/check.md).

For each operator of a trace, from the C correction (csrc/correct, the same
code that writes corrected traces) run at W's median and at both ends of its
confidence interval:

- what the trace reports, self and total;
- what the instrument added to it: `delta` inside each of its own events,
  `W` per operator event nested inside it, `W_py` per Python event inside it;
- the corrected self and total, with the interval W's CI gives them;
- a trust mark:
    believable  the most the instrument may have added (the reported time
                less the corrected interval's low end) is at most
                `threshold` of the corrected time: checked, and small;
    inflated    the reported time is significantly above the corrected one
                (the corrected interval lies below it by more than
                `threshold`): use the corrected value;
    unresolved  neither: W's interval is too wide to tell whether the
                instrument added more than `threshold` (a narrower W, from
                more pairs, decides it);
    unknowable  the correction is larger than what remains (more than half
                of the reported time is instrument, or the corrected
                interval reaches zero): neither number is a measurement of
                the operator.
  An operator's mark is its total's (how long the operator took); its self
  time's mark is given beside it, since between-event cost often dominates a
  parent's self time while its total stays measurable.

The loop here is over operator names (tens to thousands), never over events.
"""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor

from opskew.analyze.tracefile import correct
from opskew.host import usable_cpus
from opskew.stats.costmodel import fields

MARKS = ("believable", "inflated", "unresolved", "unknowable")


def runs_bytecode(row: dict) -> bool:
    """Whether a verdict row's self time runs its caller's Python code: a
    Python frame's, and a record_function range's (category user_annotation:
    the code inside the `with` block runs in the frame around it)."""
    return bool(row.get("python")) or row.get("category") == "user_annotation"


def trust_mark(reported: float, med: float, lo: float, hi: float, threshold: float) -> str:
    """One of MARKS for a figure reported as `reported` and corrected to
    `med` [lo, hi] (the module's docstring says each)."""
    removed = reported - med
    if reported <= 0:
        return "believable"
    if lo <= 0 or med <= 0 or removed > med:
        return "unknowable"
    if removed > threshold * med and hi * (1 + threshold) < reported:
        return "inflated"
    # Believable only where the evidence bounds what was added: at the
    # corrected interval's low end, the most the instrument may have added.
    if reported <= lo * (1 + threshold):
        return "believable"
    return "unresolved"


def mark_counts(ops: list) -> dict:
    """{mark: how many rows have it} over MARKS, each present."""
    return {m: sum(1 for o in ops if o["mark"] == m) for m in MARKS}


def _band(o: dict, lo: dict, hi: dict, fig: str) -> dict:
    """A corrected figure at W's median and its interval, from the passes
    at W's ends. The time line gives an event's self time back to its
    ancestors (docs/correct.md, "One time line"), so a self time need not
    move monotonically with W: the interval holds the median too."""
    m, a, b = o[fig], lo[fig], hi[fig]
    return {"median": m, "ci95": [min(a, b, m), max(a, b, m)]}


def per_operator(path: str, model, *, threshold: float = 0.05, out: str | None = None, metadata: dict | None = None,
                 waits: int = -1, spans: dict | None = None, bytecode: dict | None = None,
                 delta_range: list | None = None, op_deltas: dict | None = None) -> dict:
    """The verdict for every operator of the trace at `path` under the cost
    model `model` (opskew.stats.costmodel.CostModel: each class's W,
    {"median", "ci95": [lo, hi]} in ns per event, and delta, clamped into
    [0, W] at each end). Returns {"ops": [...], "summary":
    {...}, "marks": {mark: n}, "stats", "threshold", "truncated"}; ops are sorted by reported
    self time. With `out`, the trace corrected at W's median is written
    there (the run whose figures are the medians); `metadata` (a dict, as
    JSON) goes into that trace's "opskew" object as its "run" member.
    `waits`: the C correction's cross-thread rule (1 on, 0 off, -1 where the
    trace holds GPU activity; docs/correct.md, "Threads that wait").
    `spans`: {name: ns or (ns, w_scale)}, events of that name span ns of the
    code they annotate (opskew.profile's steps' bodies; ns < 0: none): their
    reported time beyond it and delta is taken out too (added_ns["span"]),
    and the events inside them cost w_scale x W (added_ns["scaled"]; at W's
    CI ends too, so the scaled part moves with W there).
    `bytecode`: opskew.bytecode.measure()'s result for the process that
    recorded the trace under with_stack; where it `applies`, the rows whose
    self time runs Python code (Python frames, record_function ranges:
    runs_bytecode) get the corrected self time over its
    factor as their intervals' low end (row["bytecode_factor"]): the part
    of the interpreter's slowdown under the profile function that W and
    W_py, costs per event, leave in them.
    `delta_range`: [lo, hi], the spread of delta over operators (opskew
    calibrate's leaf panel, calibration.delta_range): the intervals take
    delta at hi with W's upper end and at lo with W's lower end, so they
    carry what one delta for every operator cannot know (each clamped into
    [0, W] at its end, lo at most delta, hi at least delta; the operators'
    class's delta). None: delta is the same at all three.
    `op_deltas`: {name: {"median", "ci95": [lo, hi]}}, a name's own delta
    (opskew.profile's leaf operators against opskew's tracer in the same
    run): its events take it instead of delta, at its median with W's
    median, its high end with W's upper end and its low end with W's lower
    end, and its row says so (row["delta_ns"]). It may exceed W, the mean
    over all events: that name's W is then raised to it, so every event
    around its events loses it too (their added_ns["scaled"]) and none gains
    self time (opskew_correct.h, span_delta_ns). The other names keep
    delta and delta_range. A row with its own delta is not widened for the
    interpreter's slowdown (`bytecode`): its own delta measured it. An
    entry may carry `below_ns` ({"median", "ci95": [lo, hi]}, > 0): the
    name ran that much faster per call in the trace than in the reference,
    beyond doubt (its own delta is then 0); its intervals' high ends reach
    the reference's time (calls x hi above the median), which makes its
    mark "unknowable", and its row says so (row["below_tracer_ns"])."""
    op_cls = model.operator
    delta_ns = op_cls.delta_ns

    def run(end, dest=None, d=delta_ns, **kw):
        return correct(path, model, dest, end=end, deltas={op_cls.name: d}, waits=waits, **kw)

    d_lo = d_hi = delta_ns
    if delta_range is not None:
        if (not isinstance(delta_range, (list, tuple)) or len(delta_range) != 2
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                           for x in delta_range) or delta_range[0] > delta_range[1]):
            raise ValueError(f"delta_range: [lo, hi], finite, lo <= hi, or None; not {delta_range!r}")
        d_lo, d_hi = min(delta_range[0], delta_ns), max(delta_range[1], delta_ns)
    own = own_deltas(op_deltas)
    extra = {"run_json": json.dumps(metadata, allow_nan=False, default=str)} if metadata and out else {}
    # The three corrections read the trace apart; the C releases the GIL, so
    # they run side by side where the process may use more than one CPU
    # (bench/bench_verdict.py; docs/profile.md, "The verdict").
    med, low, high = _side_by_side(
        lambda: run(0, out, spans=with_deltas(spans, own, 0), **extra),
        # Larger W (and delta) removes more: its upper end gives the lower corrected bound.
        lambda: run(2, d=d_hi, spans=with_deltas(spans, own, 2)),
        lambda: run(1, d=d_lo, spans=with_deltas(spans, own, 1)))
    lo_of = {o["name"]: o for o in low["ops"]}
    hi_of = {o["name"]: o for o in high["ops"]}
    at = model.for_c(0)  # each class as the median's pass took it
    python = [c["python"] for c in at]
    if bytecode is not None and not isinstance(bytecode, dict):
        raise TypeError(f"bytecode must be opskew.bytecode.measure()'s dict or None, not {type(bytecode).__name__}")
    factor = ((bytecode or {}).get("factor") or {}).get("median") if (bytecode or {}).get("applies") else None
    if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 1):
        factor = None
    ops = []
    for o in med["ops"]:
        lo, hi = lo_of[o["name"]], hi_of[o["name"]]
        calls = o["calls"]
        mine = own.get(o["name"])
        k = o.get("cost_class", 0)
        inside = at[k]["delta_ns"] if mine is None else mine[0]
        per = o.get("class_descendants") or [o["descendants"], o["py_descendants"]]
        row = {
            "name": o["name"], "calls": calls, "python": bool(o["python"]), "category": o.get("category", ""),
            "reported_self_ns": o["reported_self_ns"], "reported_total_ns": o["reported_total_ns"],
            "added_ns": {"inside": calls * inside,
                         "operators_below": sum(c["w_ns"] * n for c, n, py in zip(at, per, python) if not py),
                         "python_below": sum(c["w_ns"] * n for c, n, py in zip(at, per, python) if py),
                         # Other threads' events it waited for (the C
                         # correction's cross-thread rule, docs/correct.md).
                         "other_threads": o.get("waited_ns", 0.0),
                         # Beyond a span the caller gave (opskew.profile's steps),
                         # and what a W scale took out beyond W (its cold first step).
                         "span": o.get("trimmed_ns", 0.0), "scaled": o.get("scaled_ns", 0.0)},
            "descendants_per_call": o["descendants"] / calls if calls else 0.0,
            "corrected_self_ns": _band(o, lo, hi, "corrected_self_ns"),
            "corrected_total_ns": _band(o, lo, hi, "corrected_total_ns"),
            "clamped": o["clamped"],
            # How much longer the corrected trace writes these events than
            # the corrected total above, summed over calls (stretched: their
            # children's corrected durations outlast their own; docs/correct.md).
            "stretched_ns": o["stretched_ns"],
        }
        row["moved_ns"] = moved(row, o.get("residual_ns", 0.0))
        if mine is not None:
            # Its own delta, which may exceed W (the mean over all events;
            # its W is then raised to it).
            row["delta_ns"] = {"median": inside, "ci95": [mine[1], mine[2]],
                               "source": op_deltas[o["name"]].get("source", "given")}
            below = _below(o["name"], op_deltas[o["name"]])
            if below is not None:
                # Faster in the trace than in the reference: its own time
                # may be up to the reference's, so its intervals reach it.
                row["below_tracer_ns"] = below
                up = calls * below["ci95"][1]
                for fig in ("total", "self"):
                    c = row[f"corrected_{fig}_ns"]
                    c["ci95"][1] = max(c["ci95"][1], c["median"] + up)
        if factor and runs_bytecode(row) and mine is None:  # an own delta measured the slowdown
            # All of the self time could be bytecode run `factor` times slower:
            # the low end. Its total moves down by as much.
            cs, ct = row["corrected_self_ns"], row["corrected_total_ns"]
            lo_self = cs["ci95"][0]
            if lo_self > 0:
                cut = lo_self * (1 - 1 / factor)
                cs["ci95"][0] = lo_self - cut
                ct["ci95"][0] = max(ct["ci95"][0] - cut, 0.0)
            row["bytecode_factor"] = factor
        marks = {}
        for fig in ("self", "total"):
            c = row[f"corrected_{fig}_ns"]
            marks[fig] = trust_mark(row[f"reported_{fig}_ns"], c["median"], c["ci95"][0], c["ci95"][1], threshold)
            if "below_tracer_ns" in row and c["ci95"][1] > row[f"reported_{fig}_ns"] * (1 + threshold):
                marks[fig] = "unknowable"  # its own time may lie well above the trace's
        row["marks"] = marks
        row["mark"] = marks["total"]
        ops.append(row)
    ops.sort(key=lambda r: -r["reported_self_ns"])
    w, py_w = op_cls.w, model.python.w if model.python is not None else {"median": 0.0, "ci95": [0.0, 0.0]}
    dm = at[model.classes.index(op_cls)]["delta_ns"]
    dpm = at[model.classes.index(model.python)]["delta_ns"] if model.python is not None else 0.0
    extra_model = {} if model.default_shape() else {"cost_model": model.to_dict()}
    return {"ops": ops, "marks": mark_counts(ops), "summary": where_it_lands(med, ops, dm, model),
            "stats": med["stats"],
            "bytecode": bytecode, "bytecode_rows": sum(1 for r in ops if "bytecode_factor" in r),
            "threshold": threshold, "ci_coverage": w.get("ci_coverage", 0.95),
            **fields({"operator": (w, dm), "python": (py_w, dpm)}),
            "delta_range_ns": [d_lo, d_hi] if delta_range is not None else None,
            "truncated": bool(med["truncated"]), **extra_model}


def moved(row: dict, clamped_ns: float) -> dict:
    """What moved a row's corrected total (median) off its reported total
    less what the instrument added (added_ns), summed over calls: `clamp`,
    what the clamp of durations that fell below 0 gave back, and `fit`, the
    rest, what the time line's fit did (written longer where children
    outlast their parent, shorter where a parent's shortfall was relaid into
    it, a few ns of the float64 rule; docs/correct.md). `shown`: whether
    the table marks the row (more than 2 ns a call and 0.5% of its total)."""
    total = row["corrected_total_ns"]["median"] - (row["reported_total_ns"] - sum(row["added_ns"].values()))
    shown = abs(total) > max(2.0 * row["calls"], 0.005 * row["reported_total_ns"])
    return {"total": total, "clamp": clamped_ns, "fit": total - clamped_ns, "shown": shown}


def _side_by_side(*calls):
    """Each call's result, in order: in threads of their own where the
    process may use more than one CPU (as many as it may, up to one per
    call), else one after another. The first exception, in call order, is
    raised once every call has ended."""
    n = min(len(calls), usable_cpus())
    if n <= 1:
        return [f() for f in calls]
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="opskew-verdict") as ex:
        futures = [ex.submit(f) for f in calls]
    return [f.result() for f in futures]


def own_deltas(op_deltas: dict | None) -> dict:
    """{name: (median, lo, hi)} from per_operator's `op_deltas`, checked:
    each finite and >= 0, lo <= median <= hi."""
    if op_deltas is None:
        return {}
    if not isinstance(op_deltas, dict):
        raise TypeError(f"op_deltas must be a dict of name to {{'median', 'ci95'}} or None, "
                        f"not {type(op_deltas).__name__}")
    out = {}
    for name, d in op_deltas.items():
        try:
            m, (lo, hi) = d["median"], d["ci95"]
        except (TypeError, KeyError, ValueError):
            raise ValueError(f"op_deltas[{name!r}]: {{'median': ns, 'ci95': [lo, hi]}}, not {d!r}") from None
        vals = (m, lo, hi)
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
                   for x in vals) or not lo <= m <= hi:
            raise ValueError(f"op_deltas[{name!r}]: finite, >= 0, lo <= median <= hi; not {d!r}")
        out[name] = (float(m), float(lo), float(hi))
    return out


def _below(name: str, d: dict) -> dict | None:
    """An op_deltas entry's `below_ns` ({"median", "ci95": [lo, hi]}, how
    much less per call the trace gave the name than the reference did, each
    finite and > 0, lo <= median <= hi), checked; None without one."""
    b = d.get("below_ns")
    if b is None:
        return None
    try:
        m, (lo, hi) = b["median"], b["ci95"]
    except (TypeError, KeyError, ValueError):
        raise ValueError(f"op_deltas[{name!r}]['below_ns']: {{'median': ns, 'ci95': [lo, hi]}}, not {b!r}") from None
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0
               for x in (m, lo, hi)) or not lo <= m <= hi:
        raise ValueError(f"op_deltas[{name!r}]['below_ns']: finite, > 0, lo <= median <= hi; not {b!r}")
    return {**b, "median": float(m), "ci95": [float(lo), float(hi)]}


def with_deltas(spans: dict | None, own: dict, k: int) -> dict | None:
    """`spans` (per_operator's) with each name of `own` given its own delta,
    own[name][k] (0 the median, 1 the low end, 2 the high end), as the C
    correction takes it: {name: (ns, w_scale, delta)}."""
    if not own:
        return spans
    out = dict(spans or {})
    for name, d in own.items():
        v = out.get(name, -1.0)
        ns, scale = (v[0], v[1]) if isinstance(v, tuple) else (v, 1.0)
        out[name] = (ns, scale, d[k])
    return out


def where_it_lands(med: dict, ops: list, delta_ns: float, model=None) -> dict:
    """Where the instrument's time went, in the trace's terms. Of W per
    operator event (and W_py per Python event) over the window:
    - inside the leaves' own intervals: delta per leaf call, the only part
      that inflates a leaf's own duration;
    - inside top-level events but between their children: it inflates
      parents' inclusive and self times;
    - between top-level events: it is in no event at all, only in the
      step's wall time (a trace of bare leaves shows none of it)."""
    s = med["stats"]
    # With spans (opskew.profile's steps), the ranges' own time beyond them
    # too, and what a W scale (a cold first step) priced beyond W.
    added = (max(model.added(s["class_events"]) if model is not None else 0.0, 0.0) + s.get("trimmed_ns", 0.0)
             + s.get("scaled_ns", 0.0))
    in_events = max(s["reported_top_ns"] - s["corrected_top_ns"], 0.0)
    leaves = [r for r in ops if not r["python"] and r["descendants_per_call"] == 0]
    in_leaves = sum(r["added_ns"]["inside"] if "added_ns" in r else r["calls"] * delta_ns for r in leaves)
    leaf_rep = sum(r["reported_total_ns"] for r in leaves)
    leaf_corr = sum(r["corrected_total_ns"]["median"] for r in leaves)
    parents = [r for r in ops if r["descendants_per_call"] > 0]
    worst = max(parents, key=lambda r: r["reported_total_ns"] / max(r["corrected_total_ns"]["median"], 1.0),
                default=None)
    out = {"added_ns": added, "reported_top_ns": s["reported_top_ns"], "corrected_top_ns": s["corrected_top_ns"],
           "in_leaves_ns": in_leaves, "in_parents_ns": max(in_events - in_leaves, 0.0),
           "between_top_level_ns": max(added - in_events, 0.0),
           "leaf_inflation": (leaf_rep / leaf_corr - 1) if leaf_corr > 0 else 0.0}
    if worst is not None:
        c = worst["corrected_total_ns"]["median"]
        # A corrected total clamped at 0 in every call has no finite
        # inflation: None (JSON null; math.inf was written as Infinity, which
        # no JSON reader takes). The corrected trace writes such an event as
        # long as its children need (docs/correct.md), which is no measure.
        clamped = worst["clamped"] >= worst["calls"]
        out["most_inflated_parent"] = {"name": worst["name"],
                                       "inflation": worst["reported_total_ns"] / c - 1 if c > 0 and not clamped
                                       else None}
    return out
