"""The W estimator over step pairs and the arithmetic that prices steps
(docs/profile.md): pure, no torch. `estimate_w` pairs each active step with
a warm wait step of its own, the nearest in time, and estimates W per
operator event from those pairs; `cold_w_scale`, `cycle_factors` and
`level` give the scales the correction prices a cycle's steps at.

Loops here are over steps and cycles, never over events.
"""

from __future__ import annotations

from opskew import _engine
from opskew.stats.estimators import estimate, per_event_diff
from opskew.stats.notes import note
from opskew.stats.shift import shift_estimate

# The sign-test CI for a median reaches 95% from 6 values (docs/check.md).
MIN_PAIRS = 6

# Warm wait steps on each side of a cycle that may be paired with its active
# steps: the nearest in time (a run drifts; the steps after the last cycle
# can be thousands). With POST_TRACE cold ones, wait = POST_TRACE + NEAR
# pairs every active step of a 7-step cycle (its cold first is not paired).
NEAR = 6


# Wait steps right after a trace that are not baseline: the profiler's stop,
# post-processing and export leave caches and the allocator cold (the first
# such step took 10x a warm one, the second up to 5x, on the 2-core VM).
POST_TRACE = 2

# Wait steps after a trace whose bodies still run measurably slower than
# later ones: the trace's stop and post-processing leave an after-effect that
# fades over several steps. On the 2-core VM (a small MLP step of 92 us,
# 2026-12-04, bench/bench_wait_positions.py) positions 2, 3, 4-5 and 6-7
# after a trace ran +22%, +15%, +10% and +7 to 9% over a process without a
# profiler, positions 8 to 15 +6 to 7%, and 16 on +5% (what step() itself
# costs the next body), under torch.profiler alone about the same. Paired
# with steps inside it, W comes out low by that difference (docs/profile.md).
SETTLE = 8

# The leaf reference's tracer steps in each wait block (profiler.leafref,
# docs/method.md, "Each leaf's own delta"), after the POST_TRACE cold steps
# and the one cold step its session opens with.
REF_STEPS = 4
REF_WAIT = POST_TRACE + 1 + REF_STEPS + SETTLE + NEAR

# The one schedule opskew advises (every advice line names it and why; the
# report's advice, `opskew profile`'s defaults, `opskew advise`,
# profiler.schedule.ADVISED_SCHEDULE): the loop warms up for skip_first
# steps; each wait block holds the cold steps after a trace, the leaf
# reference, SETTLE steps for the trace's after-effect to fade and NEAR
# settled steps to pair with; active=7 gives 6 warm pairs a cycle.
ADVISED_SCHEDULE = {"skip_first": 10, "wait": REF_WAIT, "warmup": 1, "active": 7, "repeat": 3}


def schedule_call(sch: dict) -> str:
    """`torch.profiler.schedule(k=v, ...)` for a schedule's arguments."""
    return "torch.profiler.schedule(" + ", ".join(f"{k}={v}" for k, v in sch.items()) + ")"


ADVISED_WHY = (f"its wait={REF_WAIT} holds the {POST_TRACE + 1} cold steps after each trace, {REF_STEPS} for the "
               f"leaf reference, {SETTLE} for the trace's after-effect to fade and {NEAR} settled steps to pair "
               f"with the {ADVISED_SCHEDULE['active'] - 1} warm steps of active={ADVISED_SCHEDULE['active']} "
               "(the first runs cold)")
# The advice, the same words wherever a line advises a schedule.
ADVICE = f"use opskew's advised schedule, {schedule_call(ADVISED_SCHEDULE)}: {ADVISED_WHY}"

COLD_MIN_CYCLES = 3  # pairs at a position in the cycle before its own W prices it (price_position)
# Cycles whose cold first step was measured before its extra is priced
# (profiler.pricing.price): from the first. Fewer than 3 give a median one slow
# spell can carry, and the report says over how many; left unpriced, the cold
# step's extra stays in the corrected trace (+10% on the median step of torch's
# documented schedule, wait=1, warmup=1, active=3, repeat=2, where the report
# leaves it out).
COLD_STEP_MIN_CYCLES = 1
# The largest scale on W the cold first step is priced at (_spans): in 52 of
# the 54 rows of the validation's runs P, Q and R (docs/profile-validation.md)
# the scale came to at most 3.6 (4.1 and 7.3 in two `minimal` rows); an
# extra many times the instrument time W gives the step's events (39x seen
# under a machine's full load) is a lump (a slow spell, a burst of
# allocation), not a cost per event, and is left in the step.
COLD_MAX_SCALE = 4.0


def median(xs):
    return _engine.quantile(list(xs), 0.5) if xs else None


def phase_blocks(steps: list) -> list:
    """Contiguous runs of steps of one phase, in order: [(phase, [steps])]."""
    out = []
    for s in steps:
        if s.get("partial"):
            continue
        if out and out[-1][0] == s["phase"]:
            out[-1][1].append(s)
        else:
            out.append((s["phase"], [s]))
    return out


def wait_drift(records: list, forgot: bool) -> dict | None:
    """Whether the process's wait steps are bare: its settled wait steps
    after a trace (SETTLE on, not under opskew's tracer) against its wait
    steps before the first trace (the run's first POST_TRACE left out: the
    loop's own warm-up). Each median's interval is the sign test's at 97.5%,
    so the ratio's, from their ends, covers at least 95%. None where the run
    has fewer than MIN_PAIRS of either, or forgot its steps before the first
    trace (forget_old)."""
    if forgot:
        return None
    blocks = phase_blocks(records)
    before = []
    for phase, steps in blocks:
        if phase != "wait":
            break
        before += [s["ns"] for s in steps if not s.get("ref")]
    before = before[POST_TRACE:]
    after = [s["ns"] for k, (phase, steps) in enumerate(blocks)
             if phase == "wait" and k > 0 and blocks[k - 1][0] == "active"
             for s in steps[SETTLE:] if not s.get("ref")]
    if len(before) < MIN_PAIRS or len(after) < MIN_PAIRS:
        return None
    b = _engine.paired([0.0] * len(before), before, level=0.975)
    a = _engine.paired([0.0] * len(after), after, level=0.975)
    ci = None
    if a["ci_reaches_level"] and b["ci_reaches_level"] and b["ci"][0] > 0:
        ci = [a["ci"][0] / b["ci"][1], a["ci"][1] / b["ci"][0]]
    return {"ratio": a["median"] / b["median"], "ci95": ci, "before_steps": len(before),
            "after_steps": len(after), "before_ns": b["median"], "after_ns": a["median"],
            "not_bare": bool(ci is not None and ci[0] > 1.0)}


def estimate_w(records: list, events_of: dict, forgot: bool, wp: float, cuda: bool):
    """W per operator event from every active step whose trace was read
    (of the last KEEP_CYCLES cycles: the profiler's step clock keeps those),
    each paired with one warm wait step of its own, the nearest in time
    not yet taken (the wait block before its cycle first, then the one
    after it, when it has run). Each wait step serves one pair at most,
    so the pairs are independent and the sign test's interval for the
    median of their differences is exact, as in `check`. The first
    active step of a cycle is measured apart (cold) and left out when the
    cycle has others. `records`: the step records ({"step", "phase", "ns",
    ...}) in order; `events_of`: step number -> (operator events, Python
    events) of each counted active step; `forgot`: older steps were
    dropped, so the first block follows a trace; `wp`: W_py per Python
    event (0 without with_stack). Returns (W or None, notes (records:
    stats.notes), detail, the pairs as (active step, wait step) numbers)."""
    blocks = phase_blocks(records)
    base_s, act_s, raw_act, events, cold = [], [], [], [], []
    by_pos: dict = {}  # position in its cycle -> the pairs' W per event there
    by_cycle = []  # (the cycle's first active step, position, the pair's W per event)
    cpu_base, cpu_act = [], []
    warm_extra = []
    notes = []
    # Cold wait steps, never a baseline: the run's first step (first
    # calls, allocations), and the first POST_TRACE after each trace
    # (after the profiler's stop, post-processing and export: 10x a warm
    # step on the 2-core VM, docs/profile.md).
    cold_ids = set() if forgot else {id(s) for s in records[:1]}
    # Steps under opskew's tracer (the leaf reference) are no baseline.
    cold_ids.update(id(s) for s in records if s.get("ref"))
    post_trace = []
    unsettled = set()  # wait steps past the cold ones but within SETTLE of a trace
    for k, (phase, steps) in enumerate(blocks):
        if phase == "wait" and (blocks[k - 1][0] == "active" if k > 0 else forgot):
            skip = min(POST_TRACE, len(steps))
            cold_ids.update(id(s) for s in steps[:skip])
            unsettled.update(id(s) for s in steps[skip:SETTLE])
            warm = [s["ns"] for s in steps[skip:skip + NEAR] if not s.get("ref")]
            if warm:
                rest = median(warm)
                post_trace.append([s["ns"] - rest for s in steps[:skip]])
    used = set()
    pair_steps = []  # (active step, wait step), returned
    short = single = near_trace = 0
    for i, (phase, steps) in enumerate(blocks):
        if phase != "active" or not all(s["step"] in events_of for s in steps):
            continue
        # The first active step of a cycle runs cold (the profiler's first
        # recorded step): never paired, even when it is the only one.
        rest = steps[1:]
        if rest:
            cold.append(steps[0]["ns"] - median([s["ns"] for s in rest]))
        else:
            single += 1
        position = {id(s): k for k, s in enumerate(steps)}
        active = [s for s in rest if events_of[s["step"]][0] > 0]
        # Candidates by nearness in time: the block before (from its
        # end; usually blocks[i-2], with warmup between), then the block
        # after (from its start); NEAR of each at most (a run drifts).
        before = [s for k in (i - 1, i - 2) if 0 <= k < len(blocks) and blocks[k][0] == "wait"
                  for s in reversed(blocks[k][1])]
        after = blocks[i + 1][1] if i + 1 < len(blocks) and blocks[i + 1][0] == "wait" else []
        cand = [s for s in before if id(s) not in cold_ids][:NEAR] + \
               [s for s in after if id(s) not in cold_ids][:NEAR]
        free = [s for s in cand if id(s) not in used]
        pairs = list(zip(active, free))
        short += len(active) - len(pairs)
        for a, b in pairs:
            used.add(id(b))
            pair_steps.append((a["step"], b["step"]))
            near_trace += id(b) in unsettled
            ev, py = events_of[a["step"]]
            # The profiler's cost per event falls over a cycle's first
            # active steps (docs/method.md, "W by position"): each
            # position's pairs, apart.
            d = (a["ns"] - wp * py - b["ns"]) / ev
            by_pos.setdefault(position[id(a)], []).append(d)
            by_cycle.append((steps[0]["step"], position[id(a)], d))
            base_s.append(b["ns"] * 1e-9)
            raw_act.append(a["ns"] * 1e-9)
            act_s.append((a["ns"] - wp * py) * 1e-9)  # W_py per Python event out first
            events.append(ev)
            if "cpu_ns" in a and "cpu_ns" in b:
                cpu_base.append(b["cpu_ns"] * 1e-9)
                cpu_act.append((a["cpu_ns"] - wp * py) * 1e-9)
        if free:
            base = median([b["ns"] for b in free])
            for k in (i - 1,):
                if 0 <= k < len(blocks) and blocks[k][0] == "warmup":
                    warm_extra.extend(s["ns"] - base for s in blocks[k][1])
    # The notes are records (stats.notes), said by render.notes.
    if short:
        notes.append(note("unpaired", "advice", steps=short))
    if near_trace:
        notes.append(note("near_trace", "advice", pairs=near_trace, of=len(act_s)))
    if single and not act_s:
        notes.append(note("single_active", "advice", cycles=single))
    drift = wait_drift(records, forgot)
    if drift is not None and drift["not_bare"]:
        notes.append(note("wait_drift", ratio=drift["ratio"], ci95=drift["ci95"], after_steps=drift["after_steps"],
                          before_steps=drift["before_steps"]))
    detail = {"pairs": len(act_s), "unpaired_active_steps": short, "single_active_cycles": single,
              "wait_drift": drift,
              "pairs_near_trace": near_trace,
              "cold_first_active_extra_ns": median(cold), "cold_first_active_cycles": len(cold),
              "w_by_position": [{"position": k, "w_ns": median(v), "pairs": len(v)}
                                for k, v in sorted(by_pos.items())],
              "warmup_extra_per_step_ns": median(warm_extra),
              "post_trace_wait_extra_ns": [median([p[j] for p in post_trace if len(p) > j])
                                           for j in range(POST_TRACE)] if post_trace else None,
              "baseline_step_ns": median([b * 1e9 for b in base_s]) if base_s else None,
              "active_step_ns": median([a * 1e9 for a in raw_act]) if raw_act else None,
              "events_per_active_step": median(events) if events else None}
    if len(act_s) < MIN_PAIRS:
        two = two_sample_w(blocks, events_of, cold_ids | unsettled, wp, len(act_s))
        if two is not None:
            w, extra, said = two
            detail.update(extra)
            notes.append(said)
            return w, notes, detail, pair_steps
    if not act_s:
        return None, notes, detail, pair_steps
    w = per_event_diff(base_s, act_s, events)
    w["ci_method"] = ("sign test over independent pairs (each active step and a wait step of its own, "
                      "the nearest in time), as check pairs its rounds (docs/profile.md)")
    # The in-window slowdown the user sees: the whole step, Python
    # tracer's cost included.
    detail["inflation"] = median([a / b for a, b in zip(raw_act, base_s)])
    # The step's true time, by opskew's own clock: each paired active
    # step less W per operator event (W_py per Python event is already
    # out of act_s). It leaves out what the trace's ProfilerStep#N range
    # holds besides the step (the profiler's own step() work; see
    # docs/profile.md), and its CI follows from W's.
    def step_at(w_ns):
        return median([a * 1e9 - max(w_ns, 0.0) * e for a, e in zip(act_s, events)])

    detail["corrected_step_ns"] = step_at(w["median"])
    # The same at the ends of W's 95% CI: the uncertainty W carries into
    # the step, which grows with the step's share of instrument time (a
    # step that is 2/3 instrument moves 2% for each 1% of W).
    ci = w.get("ci95") if w.get("ci_reaches_95") else None
    detail["corrected_step_w_ci_ns"] = [step_at(ci[1]), step_at(ci[0])] if ci else None
    detail["w_own_ns"] = w_own(cpu_base, cpu_act, events, cuda)
    detail["w_by_cycle"] = cycle_factors(by_cycle, detail["w_by_position"], w["median"])
    return w, notes, detail, pair_steps


def two_sample_w(blocks: list, events_of: dict, not_bare: set, wp: float, pairs: int):
    """W where the schedule leaves too few wait steps to pair each active step
    with one of its own (fewer than MIN_PAIRS pairs; torch's documented
    wait=1, warmup=1, active=3, repeat=2): every warm active step against
    every settled bare step of the run (outside the cycles: before the first,
    between them, after the last; never a cold one, one within SETTLE of a
    trace or one under opskew's tracer), as two independent samples. W is
    their Hodges-Lehmann shift per operator event (stats.shift), its interval
    the Mann-Whitney test's with its exact coverage. Returns (W, the detail's
    figures, a note record), or None where the samples give no 95% interval."""
    act, evs, raw = [], [], []
    for phase, steps in blocks:
        if phase != "active" or len(steps) < 2 or not all(s["step"] in events_of for s in steps):
            continue
        for a in steps[1:]:  # the cycle's first step runs cold
            ev, py = events_of[a["step"]]
            if ev > 0:
                act.append(a["ns"] - wp * py)
                raw.append(a["ns"])
                evs.append(ev)
    bare = [s["ns"] for phase, steps in blocks if phase == "wait"
            for s in steps if id(s) not in not_bare and not s.get("ref")]
    if len(act) < 2 or len(bare) < MIN_PAIRS:
        return None
    r = shift_estimate(bare, act)
    if r is None or r["ci"] is None:
        return None
    ev = median(evs)
    base = median(bare)
    w = {"median": r["shift"] / ev, "ci95": [r["ci"][0] / ev, r["ci"][1] / ev], "ci_coverage": r["ci_coverage"],
         "ci_reaches_95": True, "mean": None, "stdev": None, "n": r["n"],
         "n_positive": sum(1 for a in act if a > base), "sign_p": r["p"], "wilcoxon_p": r["p"],
         "ci_method": (f"two samples: {r['n']} active steps against {r['m']} settled bare steps outside the "
                       "cycles, the Hodges-Lehmann shift per operator event with the Mann-Whitney interval "
                       "(too few wait steps to pair each active step with its own)"),
         "test": f"Mann-Whitney over {r['n']} active and {r['m']} bare steps: p = {r['p']:.3g}"}

    def step_at(w_ns):
        return median([a - max(w_ns, 0.0) * e for a, e in zip(act, evs)])

    extra = {"two_sample": {"active_steps": r["n"], "bare_steps": r["m"], "p": r["p"]},
             "inflation": median(raw) / base, "baseline_step_ns": base, "active_step_ns": median(raw),
             "events_per_active_step": ev, "corrected_step_ns": step_at(w["median"]),
             "corrected_step_w_ci_ns": [step_at(w["ci95"][1]), step_at(w["ci95"][0])],
             "w_own_ns": None, "w_by_cycle": []}
    return w, extra, note("two_sample", "advice", pairs=pairs, active_steps=r["n"], bare_steps=r["m"],
                          coverage=r["ci_coverage"])


def w_own(cpu_base, cpu_act, events, cuda: bool):
    """W_own: W from the same pairs by the calling thread's CPU time
    instead of the clock: the instrument's work per event. It leaves out
    the time the step slept, such as
    a rank's wait in a collective for slower ranks (whose own costs its
    W by the clock then carries): the rank's own cost per event, for the
    cross-rank correction (docs/multirank.md). With CUDA, the step
    boundaries' synchronize may spin on the CPU: None then. None outside
    a torchrun job too, where nothing uses it: it is not measured there
    (the profiler's CPU clock)."""
    if cuda or len(cpu_act) != len(events) or not cpu_act:
        return None
    w = per_event_diff(cpu_base, cpu_act, events)
    return {"median": w["median"], "ci95": w["ci95"] if w["ci_reaches_95"] else None,
            "ci_coverage": w["ci_coverage"], "measure": "the calling thread's CPU time (time.thread_time_ns)"}


def cold_w_scale(extra, cold: dict, model, factor: float = 1.0) -> float:
    """The W scale that prices a cycle's cold first step (its report's
    cold_step: op_events, py_events) at `extra` ns over the instrument time
    the cost model `model` gives its events (CostModel.step_cost), its
    operator events at `factor` x W (its cycle's own level, cycle_factors):
    (factor x W x ops + W_py x py + extra) / (W x ops + W_py x py); 1.0
    without that time. An extra of 0 or less adds nothing. The guards on
    using it are the callers'."""
    ops, py = cold.get("op_events") or 0, cold.get("py_events") or 0
    base = model.step_cost(ops, py)
    if not base > 0:
        return 1.0
    more = extra if isinstance(extra, (int, float)) and extra > 0 else 0.0
    return (model.step_cost(ops, py, factor) + more) / base


def cycle_factors(pairs: list, by_position: list, w_ns: float) -> list:
    """Each cycle's own level (docs/method.md, "W by cycle"): the ratio
    of each of its pairs' W per event to the W its position is priced at
    (w_by_position's, from COLD_MIN_CYCLES pairs on, else W), and the median
    of those ratios with the sign test's interval for it. `differs` where
    that interval reaches 95% and leaves out 1: every one of 6 pairs or
    more on the same side. `pairs` is [(the cycle's first active step,
    position, the pair's W per event)]."""
    if not (isinstance(w_ns, (int, float)) and w_ns > 0):
        return []
    ref = {p["position"]: p["w_ns"] for p in by_position or []
           if p["pairs"] >= COLD_MIN_CYCLES and isinstance(p["w_ns"], (int, float)) and p["w_ns"] > 0}
    ratios: dict = {}
    for first, k, d in pairs:
        ratios.setdefault(first, []).append(d / ref.get(k, w_ns))
    out = []
    for first, rs in sorted(ratios.items()):
        e = estimate(rs)
        ci = e.get("ci95")
        out.append({"first_step": first, "factor": e["median"], "ci95": ci, "pairs": len(rs),
                    "differs": bool(ci) and (ci[0] > 1.0 or ci[1] < 1.0)})
    return out


def level(level: dict | None) -> float:
    """The factor on W a cycle's own level gives (1.0 where it does not
    differ from the run's): cycle_factors."""
    f = (level or {}).get("factor")
    ok = (level or {}).get("differs") and isinstance(f, (int, float)) and 1 / COLD_MAX_SCALE <= f <= COLD_MAX_SCALE
    return float(f) if ok else 1.0

