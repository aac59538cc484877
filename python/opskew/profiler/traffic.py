"""Bare steps between captures (docs/profile.md, "Bare traffic between
captures"): in a loop that calls start() and stop() around some of its steps
(a server's profiling endpoint, a training loop's periodic capture), the
steps outside the captures run with no profiler, and the optimizer's step
marks where each ends (torch.optim's global step post-hook, the first
optimizer that steps; the one `opskew profile` uses). The steps inside a
capture, against the bare ones before it, give W as two samples: the
Hodges-Lehmann shift of the profiled steps over the bare, per operator
event of a profiled step, with the Mann-Whitney interval (stats.shift).

A loop with no optimizer (inference, serving) marks its steps by the
outermost module's forward: until an optimizer steps, torch.nn's global
forward hooks watch the module calls of the making thread until one call at
depth 0 has module calls inside it; that module is the root, the global
hooks are removed (they take every module call off torch's fast path) and
a hook pair on the root alone times each of its forward calls. An
inference step is one such call, from its pre-hook to its post-hook (a
server's idle time between requests is no part of it), never the first of a
capture. The first optimizer
step ends this: its steps replace the forwards'.

Kept per profiler: the last MAX_BARE bare steps and MAX_PROFILED profiled
ones. An optimizer step is one optimizer step to the next; never the first
of a capture (it holds the profiler's start); no step is taken among the
first SETTLE after a capture's stop (its post-processing and export leave
them slow). Loops here are over steps, never over events."""

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
MAX_SEARCH = 10_000  # module calls watched for the root at most


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
        self.source = None  # what marks the steps: "optimizer", "forward" (the root module's calls) or None
        self.root = None  # weakref to the root module, once found
        self._fwd = []  # handles of the forward hooks (global while looking for the root, then the root's)
        self.search_over = False  # the root's search ended (the first stop(), or MAX_SEARCH calls)
        self.mixed = set()  # captures during which the optimizer replaced the forwards: no W of theirs

    @classmethod
    def installed(cls):
        """A Traffic with its hook registered, or None where torch has none
        (opskew.profile makes none under `opskew profile`, whose driver
        marks the steps itself)."""
        t = cls()
        return t if t.install() else None

    def install(self) -> bool:
        """Registers the optimizer post-hook and the forward hooks that look
        for the root module, which remove themselves once this Traffic is
        gone; False where torch has neither (before 2.0)."""
        forward = self._look_for_root()
        try:
            # torch.optim's __init__ deletes its submodules' names
            reg = importlib.import_module("torch.optim.optimizer").register_optimizer_step_post_hook
        except (ImportError, AttributeError):
            return forward
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

    def _look_for_root(self) -> bool:
        """torch.nn's global forward hooks, on the making thread: the first
        module call at depth 0 with a module call inside it, that returned,
        is the root (then timed by _time_root). Hooks are never removed
        inside a post-hook (on a forward that raised, torch walks its live
        hook dicts): the next pre-hook removes them. The search ends, its
        hooks removed, at the first stop() (search_ends) or after
        MAX_SEARCH module calls. False where torch has none."""
        try:
            mod = importlib.import_module("torch.nn.modules.module")
            pre_reg, post_reg = mod.register_module_forward_pre_hook, mod.register_module_forward_hook
        except (ImportError, AttributeError):
            return False
        me = weakref.ref(self)
        # top: weakref to the depth-0 module being called (never the model
        # itself: an interrupted call must not keep it alive).
        state = {"depth": 0, "top": None, "nested": False, "calls": 0, "found": None}
        compiling = _compiling()

        def pre(module, args):
            if compiling():
                return  # traced by torch.compile: nothing of it runs in the compiled code
            t = me()
            if t is None or threading.get_ident() != t.thread:
                return
            if state["found"] is not None or t.search_over:
                found, state["found"] = state["found"], None
                root = found() if found is not None else None
                if root is not None and not t.search_over and t.source != "optimizer":
                    t._time_root(root)  # removes these hooks: safe in a pre-hook (torch walks a copy)
                else:
                    _remove_all(t._fwd)
                return
            state["calls"] += 1
            if state["calls"] > MAX_SEARCH:
                t.search_over = True
                return
            d = state["depth"]
            state["depth"] = d + 1
            if d == 0:
                state["top"], state["nested"] = weakref.ref(module), False
            else:
                state["nested"] = True

        def post(module, args, out):
            if compiling():
                return
            t = me()
            if t is None or threading.get_ident() != t.thread or state["depth"] == 0:
                return
            state["depth"] -= 1
            top = state["top"]
            if state["depth"] == 0 and top is not None and top() is module:
                state["top"] = None
                if state["nested"] and t.source != "optimizer" and _returned(out):
                    state["found"] = top  # taken at the next pre-hook

        self._fwd = [pre_reg(pre), _post_hook(post_reg, post)]
        weakref.finalize(self, _remove_all, self._fwd)
        return True

    def _time_root(self, module) -> None:
        """The root found: the global hooks removed, and a pre/post pair on
        `module` alone times each of its forward calls that return
        (forward_step)."""
        _remove_all(self._fwd)
        self.root = weakref.ref(module)
        me = weakref.ref(self)
        local = threading.local()  # the start of the call in flight, per thread
        compiling = _compiling()

        def pre(m, args):
            if compiling():
                return
            t = me()
            if t is not None and threading.get_ident() == t.thread:
                local.t0 = (time.perf_counter_ns(), t.capture)

        def post(m, args, out):
            if compiling():
                return
            t = me()
            if t is None or threading.get_ident() != t.thread:
                return
            began, local.t0 = getattr(local, "t0", None), None
            if began is not None:
                t.forward_step(time.perf_counter_ns() - began[0], began[1])

        # No always_call: a forward that raised is no step, and its start
        # is overwritten by the next call's.
        self._fwd = [module.register_forward_pre_hook(pre), module.register_forward_hook(post)]
        weakref.finalize(self, _remove_all, self._fwd)

    def forward_step(self, ns: int, capture) -> None:
        """One call of the root module's forward took `ns`, begun in
        `capture` (None between captures): a bare or profiled inference
        step, or neither (begun in another capture than it ended in, a
        settling one, a scheduled session's, or an optimizer marks steps)."""
        if self.source == "optimizer":
            return  # its hooks went at the optimizer's first step
        self.source = "forward"
        k = self.capture
        if k == -1 or k != capture:
            return
        if k is not None:
            self.marks[k] = self.marks.get(k, 0) + 1
            steps = self.profiled.setdefault(k, [])
            # Not the first of a capture: the profiler's first events on
            # this thread pay its buffers' setup, as the optimizer's first
            # step after start() holds the start itself.
            if self.marks[k] > 1 and len(steps) < MAX_PROFILED:
                steps.append(ns)
            return
        if self.since_stop < SETTLE:
            self.since_stop += 1
            return
        self.bare.append(ns)
        if len(self.bare) > MAX_BARE:
            del self.bare[0]

    def stepped(self, opt) -> None:
        """One optimizer step ended (the hook): the step since the last is
        bare or profiled, or neither (a capture's first, a settling one)."""
        if threading.get_ident() != self.thread:
            return
        if self.opt is None:
            self.opt = weakref.ref(opt)
            if self.source == "forward":
                # The forwards were a training loop's: its optimizer's steps
                # replace them from here on. A capture running now holds
                # events of forwards its marks no longer count: no W of it.
                self.bare, self.profiled, self.marks = [], {}, {}
                if self.capture is not None:
                    self.mixed.add(self.capture)
            self.source = "optimizer"
            _remove_all(self._fwd)  # in the optimizer's hook, not a module's
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
        if self.root is None:
            # A whole capture without the root found (a compiled model, a
            # module called from another thread, no module at all): the
            # search ends, so the global hooks do not stay on every module
            # call of the process (removed at the next module call).
            self.search_over = True
        self.capture = None
        self.last = None
        self.since_stop = 0

    def w(self, capture: int, op_events: float, py_events: float, w_py_ns: float) -> dict | None:
        """W from this capture's profiled steps against the bare steps so
        far, where each side has enough (MIN_PROFILED, MIN_BARE) and the
        interval reaches 95%: a dict as the in-run W's, with `two_sample`'s
        figures; else None."""
        prof = [] if capture in self.mixed else self.profiled.get(capture) or []
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
                              f"between captures ({self.marked_by()}), the Hodges-Lehmann shift per operator "
                              "event with the Mann-Whitney interval"),
                "two_sample": {"profiled_steps": r["n"], "bare_steps": r["m"], "p": r["p"],
                               "events_per_step": ops, "steps": self.source}}

    def marked_by(self) -> str:
        """What marks the steps, in words."""
        if self.source == "forward":
            root = self.root() if self.root is not None else None
            return f"the calls of the outermost module's forward, {type(root).__name__ if root is not None else '?'}"
        return "the optimizer's steps"

    def true_step(self, capture: int, op_events: float, py_events: float, w_py_ns: float, w: dict) -> dict | None:
        """The capture's true step by the optimizer's steps: its median
        profiled step less a step's events at W `w` (median, and at its
        interval's ends) and W_py; None without profiled steps."""
        prof = [] if capture in self.mixed else self.profiled.get(capture) or []
        marks = self.marks.get(capture) or 0
        if not prof or not marks:
            return None
        mid = median(prof)
        ops, py = op_events / marks, py_events / marks

        def at(x):
            return mid - max(x, 0.0) * ops - w_py_ns * py

        return {"active_step_ns": mid, "corrected_step_ns": at(w["median"]),
                "corrected_step_w_ci_ns": [at(w["ci95"][1]), at(w["ci95"][0])]}


def _returned(out) -> bool:
    """Whether a forward post-hook runs after a return (always_call hooks
    also run after a raise; torch passes no output then, in the versions
    that have them)."""
    return out is not None


def _post_hook(register, hook):
    """A forward post-hook that runs even where forward raises (torch's
    always_call, 2.1 on), so the depth it keeps stays right; without it on
    older torch."""
    try:
        return register(hook, always_call=True)
    except TypeError:
        return register(hook)


def _compiling():
    """torch's "is torch.compile tracing this" (2.3 on; torch._dynamo's
    before), or a function that says no."""
    for name in ("torch.compiler", "torch._dynamo"):
        try:
            return importlib.import_module(name).is_compiling
        except (ImportError, AttributeError):
            continue
    return lambda: False


def _remove_all(handles: list) -> None:
    while handles:
        handles.pop().remove()
