"""The in-process cost model of opskew.profile (docs/profile.md, "W with
no pairs: the in-process model"): where a capture has no in-run W (a
single `with` window, start()/stop(), a schedule with too few wait steps),
the profiler's cost per operator event measured in this process, in the
same minute, under the options the user passed, on a small training step of
its own (a linear layer, an activation, a reduction, their backward and an
in-place update: operator, autograd and backward events).

Each round times STEPS of that step bare, STEPS under a fresh profiler
session with the user's options, and STEPS bare again, each window by the
median of its steps (a busy machine's time slices land in single steps);
W is the Hodges-Lehmann shift of the profiled windows over the bare ones,
with its Mann-Whitney interval, less W_py per Python event, over a step's
operator events (counted once, from the first round's exported trace, by
the C reader). Measured once per
process and configuration (the first time within FIRST_BUDGET_NS), then
checked at each capture in rounds that fit in CHECK_SHARE of the capture's
own stop and export: where the check's median falls outside the model's
interval, the machine's speed moved and the model is measured again.

The interval a correction takes is the measurement's, widened by how far
the model misses the W a workload's own pairs pay (MISS, measured by
bench/validate_profile.py --cost-model always on runs that have both). Loops here are
over rounds, never over events."""

from __future__ import annotations

import os
import tempfile
import time

from opskew.analyze.tracefile import correct
from opskew.errors import OpskewError
from opskew.measure.workload import ModelStep
from opskew.stats.costmodel import CostModel
from opskew.stats.pricing import median
from opskew.stats.shift import shift_estimate

FIRST_BUDGET_NS = 150_000_000  # the first measurement in a process, at most
CHECK_SHARE = 0.05  # a check at a capture: at most this share of its stop and export
MIN_ROUNDS = 5  # 5 profiled windows against 10 bare ones give a 95% interval
MAX_ROUNDS = 15
STEPS = 8  # model steps per window
# How far the model misses the W a workload's own pairs pay, as factors on
# the model's interval, per step it times: the in-run W over the model's
# ranged 0.64 to 1.45 on 8 training workloads, 1.07 to 2.54 on 4 inference
# ones (bench/validate_profile.py --cost-model always; docs/profile.md, "How
# far the model misses").
MISS = {"training": (0.6, 1.5), "inference": (0.9, 2.6)}
# A measurement whose 95% interval spans more than this share of its median
# (a machine busy with something else) is not used.
MAX_SPREAD = 1.0

# Per process: (configuration, threads, CUDA activity, training) -> the model.
_MODELS: dict = {}


def _window(step, n: int) -> float:
    """The median of `n` steps' times (ns): a step another process's time
    slice lands in is an outlier, not a shift of the window."""
    clock = time.perf_counter_ns
    ts = [clock()]
    for _ in range(n):
        step()
        ts.append(clock())
    return median([b - a for a, b in zip(ts, ts[1:])])


def _events(path: str) -> tuple:
    """(operator events, Python events) of the trace at `path` (the C reader)."""
    st = correct(path, CostModel.default(0.0), waits=-1)["stats"]
    return st["corrected_events"] - st["py_events"], st["py_events"]


class _Rounds:
    """Rounds of the model's step, bare and profiled, in this process."""

    def __init__(self, torch, options: dict, cuda: bool, training: bool):
        self.torch = torch
        self.options = {k: v for k, v in options.items() if v}
        acts = [torch.profiler.ProfilerActivity.CPU]
        if cuda:
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        self.acts = acts
        self.step = ModelStep(torch, training)
        self.events = None  # (operator, Python) events per profiled window

    def one(self) -> tuple:
        """((bare ns before, bare ns after), profiled ns) of one round: a
        step's median in each window."""
        step = self.step
        b1 = _window(step, STEPS)
        prof = self.torch.profiler.profile(activities=self.acts, **self.options)
        prof.start()
        t = _window(step, STEPS)
        prof.stop()
        if self.events is None:
            fd, path = tempfile.mkstemp(prefix="opskew-model-", suffix=".json")
            os.close(fd)
            try:
                prof.export_chrome_trace(path)
                self.events = _events(path)
            finally:
                os.unlink(path)  # opskew's own temporary file
        b2 = _window(step, STEPS)
        return (b1, b2), t

    def run(self, budget_ns: float, min_rounds: int, max_rounds: int) -> tuple:
        """Rounds until `budget_ns` is spent (at least `min_rounds`, at most
        `max_rounds`): (the rounds, the time they took)."""
        t0 = time.perf_counter_ns()
        out = []
        while len(out) < max_rounds:
            out.append(self.one())
            spent = time.perf_counter_ns() - t0
            if len(out) >= min_rounds and spent + spent / len(out) > budget_ns:
                break
        return out, time.perf_counter_ns() - t0


def _w(rounds: list, events: tuple, w_py_ns: float) -> dict:
    """W per operator event from `rounds`: the Hodges-Lehmann shift of the
    profiled windows' steps over the bare windows' (each window its step's
    median), less W_py per Python event, over a step's operator events,
    with the Mann-Whitney interval (stats.shift): two samples, so a round
    the machine slowed moves one value of each, not the estimate."""
    ops, py = (e / STEPS for e in events)
    r = shift_estimate([b for bs, _ in rounds for b in bs], [t - w_py_ns * py for _, t in rounds])
    if r is None or r["ci"] is None:
        return {"median": r["shift"] / max(ops, 1) if r else float("nan"), "ci95": [float("nan")] * 2,
                "ci_reaches_95": False, "ci_coverage": None}
    ops = max(ops, 1)
    return {"median": r["shift"] / ops, "ci95": [r["ci"][0] / ops, r["ci"][1] / ops], "ci_reaches_95": True,
            "ci_coverage": r["ci_coverage"]}


def _widened(w: dict, miss: tuple) -> list:
    lo, hi = w["ci95"]
    return [min(lo * miss[0], lo), max(hi * miss[1], hi)]


def model_w(torch, options: dict, cuda: bool, w_py_ns: float, stop_ns: int, training: bool = True) -> dict:
    """This process's model of the profiler's cost per operator event under
    `options`, on the training step or (`training` False) the inference
    one: measured the first time (within FIRST_BUDGET_NS), checked at
    each later capture within CHECK_SHARE of `stop_ns` (the capture's stop
    and export) and measured again where the check falls outside its
    interval. A dict: median, ci95 (widened by MISS), the measurement's own
    interval, its rounds and events, how its time was budgeted, and
    `own_ns`, the time it took at this capture. Raises OpskewError where
    the measurement is too noisy to use (MAX_SPREAD)."""
    key = (tuple(sorted(k for k, v in options.items() if v)), torch.get_num_threads(), cuda, training)
    known = _MODELS.get(key)
    t0 = time.perf_counter_ns()
    check = None
    if known is not None:
        check = _check(known, torch, options, cuda, w_py_ns, stop_ns, training)
        if not check.get("moved"):
            return {**known, "check": check, "own_ns": time.perf_counter_ns() - t0}
        budget = CHECK_SHARE * max(stop_ns, 0) - check["took_ns"]
        if budget < MIN_ROUNDS * known["round_ns"]:
            # Measured again only where MIN_ROUNDS fit in what is left of
            # the budget; else the model stands, its interval stretched to
            # take in the check's median, and the report says it moved.
            lo, hi = known["ci95"]
            c = max(check["median"], 0.0)
            return {**known, "ci95": [min(lo, c * known["miss"][0]), max(hi, c * known["miss"][1])],
                    "check": dict(check, kept="its interval stretched to the check's median"),
                    "own_ns": time.perf_counter_ns() - t0}
    else:
        budget = FIRST_BUDGET_NS
    # The first time for this configuration: FIRST_BUDGET_NS; measured again
    # after a check found it moved, within what is left of CHECK_SHARE of
    # this capture's stop and export.
    r = _Rounds(torch, options, cuda, training)
    for _ in range(2):
        r.step()  # warm: the first calls build autograd's and the dispatcher's caches
    rounds, took = r.run(budget, MIN_ROUNDS, MAX_ROUNDS)
    w = _w(rounds, r.events, w_py_ns)
    lo, hi = w["ci95"]
    if not (w["ci_reaches_95"] and lo > 0 and hi - lo <= w["median"] * MAX_SPREAD):
        raise OpskewError(f"the in-process model was too noisy to use ({len(rounds)} rounds in "
                          f"{took / 1e6:.0f} ms: W {w['median']:.0f} ns, 95% CI [{lo:.0f}, {hi:.0f}] ns; it must "
                          f"lie above 0 and span at most {MAX_SPREAD:.0%} of its median)")
    miss = MISS["training" if training else "inference"]
    m = {"median": w["median"], "ci95": _widened(w, miss), "ci_coverage": w["ci_coverage"],
         "measured_ci95": w["ci95"], "miss": list(miss), "rounds": len(rounds),
         "op_events": r.events[0], "py_events": r.events[1], "steps": STEPS,
         "round_ns": took / len(rounds), "w_py_ns": w_py_ns, "step": "training" if training else "inference",
         "budget": "first" if known is None else "again", "budget_ns": budget, "measured_ns": took}
    _MODELS[key] = m
    return {**m, "check": check, "own_ns": time.perf_counter_ns() - t0}


def _check(known: dict, torch, options: dict, cuda: bool, w_py_ns: float, stop_ns: int, training: bool) -> dict:
    """The model checked at a capture: rounds that fit in CHECK_SHARE of
    the capture's stop and export (none where not even one does); `moved`
    where their median lies outside the model's measured interval widened
    by its own half-width (the check has fewer rounds)."""
    budget = CHECK_SHARE * max(stop_ns, 0)
    n = int(budget // max(known["round_ns"], 1))
    if n < 1:
        return {"rounds": 0, "budget_ns": budget, "round_ns": known["round_ns"]}
    r = _Rounds(torch, options, cuda, training)
    r.events = (known["op_events"], known["py_events"])
    r.step()
    rounds, took = r.run(budget, 1, min(n, MAX_ROUNDS))
    w = _w(rounds, r.events, w_py_ns)
    lo, hi = known["measured_ci95"]
    half = (hi - lo) / 2
    moved = not (lo - half <= w["median"] <= hi + half)
    return {"rounds": len(rounds), "median": w["median"], "budget_ns": budget, "took_ns": took, "moved": moved}
