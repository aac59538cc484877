"""What measures a calibration's constants: paired rounds of empty Python
calls under the profiler (W_py, delta_py). It runs torch; the store
(calibration.store) does not."""

from __future__ import annotations

from opskew import _engine
from opskew.errors import UsageError
from opskew.measure import rounds as measure_rounds
from opskew.measure.instruments import TorchProfiler
from opskew.measure.workload import python_calls
from opskew.stats.estimators import python_event_cost


def python_event_constants(py_rounds, name: str, calls: int) -> tuple:
    """(W_py, delta_py) of arm `name` of `python_call_rounds`' rounds, whose
    windows made `calls` empty-function calls each: W_py per Python event
    with its CI, and delta_py, the empty function's reported duration less a
    bare call's cost (bare window / calls; that includes the loop, so
    delta_py errs low), clamped to [0, W_py]."""
    w = python_event_cost(py_rounds, name)
    bare_call = _engine.quantile([t.wall_s for t in py_rounds.windows("baseline")], 0.5) * 1e9 / calls
    reported = [t.extra["py_top"]["total_ns"] / t.extra["py_top"]["calls"] for t in py_rounds.trials[name]
                if "py_top" in t.extra]
    dp = _engine.quantile(reported, 0.5) - bare_call if reported else 0.0
    delta = {"median": min(max(dp, 0.0), max(w["median"], 0.0)), "bare_call_ns": bare_call,
             "method": "the empty Python function's reported duration - the bare call's cost "
                       "(bare window / calls), clamped to [0, W_py]"}
    return w, delta


def python_call_rounds(device: str, configs: dict, *, calls: int, trials: int, iters: int,
                       warmup_s: float, progress=None):
    """Paired rounds of an empty Python function called `calls` times per
    iteration: the bare arm "baseline" and one torch.profiler arm per entry of
    `configs` (name -> options). Under with_stack every call is one Python
    event and no operator, which prices the Python tracer alone. Returns the
    rounds and the workload's description; raises UsageError when the rounds
    did not complete."""
    wl = python_calls(calls)
    arms = {"baseline": None, **{n: TorchProfiler(device, count="trace", **o) for n, o in configs.items()}}
    r = measure_rounds.run_rounds(wl.iteration, arms, trials=trials, iters=iters, device=device, warmup_s=warmup_s,
                                  progress=progress)
    if r.interrupted:
        raise KeyboardInterrupt  # Ctrl-C is the user's, wherever it lands
    if r.error is not None or r.n < 2:
        raise UsageError(f"measuring W_py on empty Python calls did not complete "
                         f"({r.error or 'interrupted'})")
    return r, wl.description
