"""Bare steps between captures (docs/profile.md, "Bare traffic between
captures"): in a loop that calls start() and stop() around some of its steps
(a server's profiling endpoint, a training loop's periodic capture), the
steps outside the captures run with no profiler, and the optimizer's step
marks where each ends (torch.optim's global step post-hook, the first
optimizer that steps; the one `opskew profile` uses). The steps inside a
capture, against the bare ones before it, give W as two samples: the
Hodges-Lehmann shift of the profiled steps over the bare, per operator
event of a profiled step, with the Mann-Whitney interval (stats.shift).

Kept per profiler: the last MAX_BARE bare steps and MAX_PROFILED profiled
ones. A step is one optimizer step to the next; never the first of a
capture (it holds the profiler's start), nor the first SETTLE after a
capture's stop (its post-processing and export leave them slow). Loops
here are over steps, never over events."""

from __future__ import annotations

import importlib
import threading
import time
import weakref

from opskew.stats.pricing import median
from opskew.stats.shift import MAX_M, MAX_N, shift_estimate

SETTLE = 2  # bare steps after a capture's stop() left out
MIN_BARE = 6
MIN_PROFILED = 3
MAX_BARE = MAX_M
MAX_PROFILED = MAX_N
MAX_SPREAD = 1.0  # as the in-process model's (profiler.model.MAX_SPREAD)


class Traffic:
    """The optimizer's steps of this process, bare and profiled.

    `bare`: step times (ns) outside every capture; `profiled`: per capture
    number, its step times; `marks`: optimizer steps per capture (the
    trace's events are shared among them)."""

    def __init__(self):
        self.bare: list = []
        self.profiled: dict = {}
        self.marks: dict = {}
        self.capture = None  # the running capture's number, or None between captures
        self.last = None  # (ns, capture) of the last optimizer step
        self.since_stop = SETTLE  # bare steps since the last stop() (SETTLE: none yet)
        self.opt = None  # weakref to the first optimizer that stepped
        self.thread = threading.get_ident()
        self.handle = None
        self.refused = None  # why the last w() gave none though both samples were there

    @classmethod
    def installed(cls):
        """A Traffic with its hook registered, or None where torch has none
        (opskew.profile makes none under `opskew profile`, whose driver
        marks the steps itself)."""
        t = cls()
        return t if t.install() else None

    def install(self) -> bool:
        """Registers the optimizer post-hook, which removes itself once
        this Traffic is gone; False where torch has none (before 2.0)."""
        try:
            # torch.optim's __init__ deletes its submodules' names
            reg = importlib.import_module("torch.optim.optimizer").register_optimizer_step_post_hook
        except (ImportError, AttributeError):
            return False
        me = weakref.ref(self)
        box = {}

        def hook(opt, args, kwargs):
            t = me()
            if t is None:
                box["handle"].remove()
                return
            t.stepped(opt)

        box["handle"] = self.handle = reg(hook)
        weakref.finalize(self, box["handle"].remove)
        return True

    def stepped(self, opt) -> None:
        """One optimizer step ended (the hook): the step since the last is
        bare or profiled, or neither (a capture's first, a settling one)."""
        if threading.get_ident() != self.thread:
            return
        if self.opt is None:
            self.opt = weakref.ref(opt)
        elif self.opt() is not opt:
            return  # another optimizer of the same step
        now = time.perf_counter_ns()
        k = self.capture
        if k == -1:
            return  # a scheduled session: its steps are the schedule's
        if k is not None:
            self.marks[k] = self.marks.get(k, 0) + 1
        last = self.last
        self.last = (now, k)
        if last is None or last[1] != k:
            return  # the first step after a start() or a stop()
        if k is None:
            if self.since_stop < SETTLE:
                self.since_stop += 1
                return
            self.bare.append(now - last[0])
            if len(self.bare) > MAX_BARE:
                del self.bare[0]
        else:
            steps = self.profiled.setdefault(k, [])
            if len(steps) < MAX_PROFILED:
                steps.append(now - last[0])

    def started(self, capture: int) -> None:
        self.capture = capture
        self.last = None

    def stopped(self) -> None:
        self.capture = None
        self.last = None
        self.since_stop = 0

    def w(self, capture: int, op_events: float, py_events: float, w_py_ns: float) -> dict | None:
        """W from this capture's profiled steps against the bare steps so
        far, where each side has enough (MIN_PROFILED, MIN_BARE) and the
        interval reaches 95%: a dict as the in-run W's, with `two_sample`'s
        figures; else None."""
        prof = self.profiled.get(capture) or []
        marks = self.marks.get(capture) or 0
        if len(prof) < MIN_PROFILED or len(self.bare) < MIN_BARE or not marks or op_events <= 0:
            return None
        ops, py = op_events / marks, py_events / marks  # per optimizer step of the capture
        r = shift_estimate(self.bare, [t - w_py_ns * py for t in prof])
        self.refused = None
        if r is None or r["ci"] is None:
            return None
        lo, hi = r["ci"]
        if not (lo > 0 and hi - lo <= r["shift"] * MAX_SPREAD):
            # Two samples taken at different times: a machine whose speed
            # moved between them gives an interval that says nothing.
            self.refused = (f"{r['n']} profiled steps against {r['m']} bare steps between captures gave W "
                            f"{r['shift'] / ops:.0f} ns, 95% CI [{lo / ops:.0f}, {hi / ops:.0f}] ns: too noisy "
                            f"to use (it must lie above 0 and span at most {MAX_SPREAD:.0%} of its median)")
            return None
        return {"median": r["shift"] / ops, "ci95": [r["ci"][0] / ops, r["ci"][1] / ops],
                "ci_coverage": r["ci_coverage"],
                "ci_method": (f"two samples: {r['n']} profiled steps of this capture against {r['m']} bare steps "
                              "between captures (the optimizer's steps), the Hodges-Lehmann shift per operator "
                              "event with the Mann-Whitney interval"),
                "two_sample": {"profiled_steps": r["n"], "bare_steps": r["m"], "p": r["p"],
                               "events_per_step": ops}}

    def true_step(self, capture: int, op_events: float, py_events: float, w_py_ns: float, w: dict) -> dict | None:
        """The capture's true step by the optimizer's steps: its median
        profiled step less a step's events at W `w` (median, and at its
        interval's ends) and W_py; None without profiled steps."""
        prof = self.profiled.get(capture) or []
        marks = self.marks.get(capture) or 0
        if not prof or not marks:
            return None
        mid = median(prof)
        ops, py = op_events / marks, py_events / marks

        def at(x):
            return mid - max(x, 0.0) * ops - w_py_ns * py

        return {"active_step_ns": mid, "corrected_step_ns": at(w["median"]),
                "corrected_step_w_ci_ns": [at(w["ci95"][1]), at(w["ci95"][0])]}
