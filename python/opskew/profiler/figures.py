"""The figures a profile's correction takes besides W: under with_stack,
W_py (measured once in this process, else a stored calibration's) and the
interpreter's slowdown under the profile function (opskew.bytecode); the
stored calibration of this configuration and its delta, the instrument's
time inside each operator's own event. Each is looked up or measured once
per profiler, and the time measuring takes is counted (`own_ns`)."""

from __future__ import annotations

import time

from opskew.calibration.runner import python_call_rounds, python_event_constants
from opskew.calibration.store import config_name, delta_range, find_for_threads
from opskew.errors import OpskewError
from opskew.measure import bytecode as bytecode_slowdown  # its measured(), looked up when called
from opskew.profiler.model import model_w
from opskew.stats.notes import note, text
from opskew.stats.pricing import MIN_PAIRS

class Figures:
    """W_py, the bytecode slowdown, the stored calibration and delta of one
    profiler's configuration (`options`: its record_shapes, ... flags)."""

    def __init__(self, torch, options: dict, cuda: bool, measure_py: bool, cost_model: str = "auto"):
        if cost_model not in ("auto", "always", "off"):
            raise ValueError(f"cost_model: 'auto', 'always' or 'off', not {cost_model!r}")
        self.torch = torch
        self.cost_model = cost_model  # "auto", "always" or "off": when the in-process model is measured
        self.model_ns = 0  # opskew's own time measuring and checking the model
        self.options = options
        self.cuda = cuda
        self.measure_py = measure_py
        self.w_py_value = None  # {} once looked for and not found
        self.bytecode_value = None  # (result,) once looked for
        self.stored_cal = None  # (the stored calibration or None,) once looked up: stored
        self.stored_note = None  # what stored() found, where it is not this run's thread count
        self.w_py_error = None
        self.model_error = None
        self.own_ns = 0  # opskew's own time measuring W_py and the bytecode slowdown

    def w_py(self):
        """Under with_stack, W_py per Python event and delta_py: measured once
        in this process on empty Python calls at the first trace (the
        profiler's cycle is over then), else a stored calibration's, else
        None. A dict with median, ci95, delta_py_ns, source."""
        if not self.options["with_stack"]:
            return None
        if self.w_py_value is None:
            self.w_py_value = (self.measure_w_py() if self.measure_py else None) or self.stored_w_py() or {}
        return self.w_py_value or None

    def bytecode(self):
        """Under with_stack, how much slower this process runs Python
        bytecode under a profile function (opskew.bytecode.measure): once, at
        the first trace, as W_py. None without with_stack, with
        measure_w_py=False, or where another profile function was set then."""
        if not self.options["with_stack"] or not self.measure_py:
            return None
        if self.bytecode_value is None:
            t0 = time.perf_counter_ns()
            try:
                self.bytecode_value = (bytecode_slowdown.measured(),)
            finally:
                self.own_ns += time.perf_counter_ns() - t0
        return self.bytecode_value[0]

    def model(self, stop_ns: int, training: bool = True):
        """The in-process model's W per operator event at this capture
        (profiler.model.model_w: measured once per process and
        configuration, checked at each capture; on its training step where
        the capture has backward events, else its inference one), or None where it could not
        be measured; its time counts in model_ns."""
        w_py = self.w_py()
        t0 = time.perf_counter_ns()
        self.model_error = None
        try:
            return model_w(self.torch, self.options, self.cuda, max(w_py["median"], 0.0) if w_py else 0.0, stop_ns,
                           training)
        except (OpskewError, RuntimeError) as exc:
            self.model_error = f"{type(exc).__name__}: {exc}"
            return None
        finally:
            self.model_ns += time.perf_counter_ns() - t0

    def stored_w_py(self):
        cal = self.stored()
        c = (cal or {}).get("w_py_ns")
        if not c:
            return None
        return {"median": c["median"], "ci95": list(c.get("ci95") or [c["median"], c["median"]]),
                "delta_py_ns": ((cal.get("delta_py_ns") or {}).get("median") or 0.0),
                "source": f"stored calibration {cal.get('_path', '')}"}

    def measure_w_py(self):
        """W_py from paired rounds of an empty Python function, bare and under
        this profiler configuration (calibrate's method, calibration.
        python_call_rounds), in this process: about a second, once."""
        calls, iters = 200, 5
        opts = {k: v for k, v in self.options.items() if v}
        t0 = time.perf_counter_ns()
        try:
            rounds, _ = python_call_rounds("cuda" if self.cuda else "cpu", {"this": opts}, calls=calls,
                                           trials=MIN_PAIRS + 3, iters=iters, warmup_s=0.05)
            w, delta = python_event_constants(rounds, "this", calls * iters)
        except (OpskewError, RuntimeError) as exc:
            self.w_py_error = f"{type(exc).__name__}: {exc}"
            return None
        finally:
            self.own_ns += time.perf_counter_ns() - t0
        if not w["ci_reaches_95"] or w["median"] < 0:
            self.w_py_error = f"the measurement was too noisy (W_py {w['median']:.0f} ns, {w['n']} rounds)"
            return None
        return {"median": w["median"], "ci95": w["ci95"], "delta_py_ns": delta["median"],
                "source": f"measured in this process on {calls * iters} empty Python calls per round, "
                          f"{w['n']} paired rounds ({(time.perf_counter_ns() - t0) / 1e9:.1f} s)"}

    def stored(self):
        """The stored calibration of this configuration, looked up once per
        profiler: the lookup reads every stored calibration and the CPU's
        model (about 0.2 ms with 3 stored), and ran 2 to 3 times a cycle
        between two bodies, where opskew's own time makes the next wait steps slower
        (docs/profile.md). One run keeps one calibration's delta, even if
        another is stored while it runs."""
        if self.stored_cal is None:
            cal, self.stored_note = find_for_threads("torch.profiler", config_name(self.options),
                                                     self.torch.__version__, "cuda" if self.cuda else "cpu",
                                                     self.torch.get_num_threads())
            self.stored_cal = (cal,)
        return self.stored_cal[0]

    def delta_range(self) -> list | None:
        """delta's spread over operators in the stored calibration (its leaf
        panel), which the verdict's intervals carry; None without one."""
        return delta_range(self.stored())

    def delta(self, w_median: float, notes: list, leaves_own: bool = False) -> float:
        """delta (the instrument's time inside each operator's own event)
        from the stored calibration, clamped into [0, W]; with none stored,
        0, and `notes` says what that leaves in the operators' corrected
        times (`leaves_own`: the leaves took their own from opskew's tracer,
        LeafReference.op_deltas, so it holds for the others only)."""
        cal = self.stored()
        if self.stored_note:
            notes.append(text(self.stored_note))  # the calibration store's sentence
        if cal is None:
            notes.append(note("no_calibration", "advice", leaves_own=leaves_own,
                              config=",".join(k for k, v in self.options.items() if v) or "minimal"))
            return 0.0
        return min(max(cal["delta_ns"]["median"], 0.0), max(w_median, 0.0))