"""How much slower this interpreter runs Python bytecode while a profile
function is set (docs/method.md, "Python code under with_stack").

torch.profiler's `with_stack` records Python calls through a profile function
(PyEval_SetProfile). On CPython 3.11 and older, any profile function sends
every instruction through the interpreter's tracing path, in its generic
(unspecialized) form: code between calls runs slower by a factor, however few
events it records. `bench/bench_bytecode.py` measures it on a few loops (1.4x
to 2.4x on the 2-core VM with Python 3.11.7). That is no cost per event: the
in-run `W` and `W_py`, fitted on whole steps, take it in on average, so a
Python frame or a `record_function` range whose self time is mostly bytecode
keeps some of it after the correction, while one full of operators loses a
little too much. opskew cannot tell how much of a self time is bytecode, so it
says how far it may go: the corrected self time over this factor is the
interval's low end for those names (opskew.verdict.per_operator, `bytecode`).

The measurement: a loop of attribute and item loads and stores, arithmetic
and comparisons, no calls, timed with and without a no-op profile function in
alternating rounds, less the same timing of an empty function (the profile
function's own calls: entering and leaving the timed function, the clock's
call). Median ratio over rounds and its sign-test CI, as `check` does. About
10 ms, once per process. Nothing is measured while another profile function
is set (torch.profiler's with_stack, cProfile, a debugger): it would be
replaced for the time of the measurement.
"""

from __future__ import annotations

import platform
import sys
import time

from opskew.stats.estimators import estimate

# The factor's CI must lie above this for the widening to apply: below it the
# slowdown is within what the loop's own noise and cache effects give.
MIN_FACTOR = 1.05

_cached: dict | None = None


class _Obj:
    __slots__ = ("a", "b", "c", "d")

    def __init__(self, i: int):
        self.a = i
        self.b = i
        self.c = 0
        self.d = {}


def _kernel(objs):
    s = 0
    for o in objs:
        if o.a is not None:
            s += o.b * 3
        o.c = s
        d = o.d
        d["k"] = s & 7
        s = s - (s >> 1) if s > 1000 else s
    return s


def _empty(objs):
    return objs


def _noop(frame, event, arg):
    return None


def _timed(fn, objs, reps: int) -> int:
    clock = time.perf_counter_ns
    best = None
    for _ in range(reps):
        t0 = clock()
        fn(objs)
        t = clock() - t0
        best = t if best is None or t < best else best
    return best


def measure(rounds: int = 21, n: int = 200, reps: int = 5) -> dict | None:
    """{"factor": {"median", "ci95", "ci_coverage"}, "rounds", "applies",
    "why", "python", "measure"}; None when another profile function is set
    (it is not replaced). `applies`: the factor's CI lies above MIN_FACTOR."""
    if sys.getprofile() is not None:
        return None
    objs = [_Obj(i) for i in range(n)]
    for _ in range(20):  # let the interpreter specialize the loop first
        _kernel(objs)
    ratios = []
    try:
        for r in range(rounds):
            net = {}
            for hooked in ((False, True) if r % 2 == 0 else (True, False)):
                if hooked:
                    sys.setprofile(_noop)
                try:
                    net[hooked] = _timed(_kernel, objs, reps) - _timed(_empty, objs, reps)
                finally:
                    if hooked:
                        sys.setprofile(None)
            if net[False] > 0 and net[True] > 0:
                ratios.append(net[True] / net[False])
    finally:
        sys.setprofile(None)
    est = estimate(ratios)
    ci = est.get("ci95")
    applies = bool(ci) and ci[0] > MIN_FACTOR
    if not ratios:
        why = "not measured: no round timed the loop above the empty call"
    elif not ci:
        why = f"too few rounds for a 95% CI ({len(ratios)})"
    elif applies:
        why = None
    else:
        why = f"the factor's 95% CI [{ci[0]:.2f}, {ci[1]:.2f}] reaches {MIN_FACTOR}: no slowdown to widen for"
    return {"factor": {"median": est.get("median"), "ci95": ci, "ci_coverage": est.get("ci_coverage")},
            "rounds": len(ratios), "applies": applies, "why": why,
            "python": f"{platform.python_implementation()} {platform.python_version()}",
            "measure": (f"a loop of {n} attribute and item loads and stores, arithmetic and comparisons (no calls), "
                        "with and without a no-op profile function, less an empty call's timing; median ratio "
                        f"over {len(ratios)} alternating rounds")}


def measured() -> dict | None:
    """measure(), once per process (None is not kept: a later call, with no
    other profile function set, measures)."""
    global _cached
    if _cached is None:
        _cached = measure()
    return _cached


def runs_bytecode(row: dict) -> bool:
    """Whether a verdict row's self time runs its caller's Python code: a
    Python frame's, and a record_function range's (category user_annotation:
    the code inside the `with` block runs in the frame around it)."""
    return bool(row.get("python")) or row.get("category") == "user_annotation"
