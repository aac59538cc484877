"""`opskew.profile`: a drop-in for `torch.profiler.profile` that measures its
own overhead in the user's loop and corrects the traces it produces
(docs/profile.md).

It wraps a real `torch.profiler.profile` and delegates everything to it. In
addition it times each step's body (from the end of one `step()` call to the
start of the next, so the profiler's stop, post-processing and
`on_trace_ready`, which run inside `step()`, are excluded and reported on
their own), knows each step's phase from the schedule, counts operator (and
Python) events per active step from the trace in C (the `ProfilerStep#N`
annotations' descendants, through the C correction's pass), and estimates
`W` from independent pairs: each active step and a warm wait step of its own,
the nearest in time. Under `with_stack`, `W_py` is measured once in the
process on empty Python calls. At `stop()` the run's W is estimated from all
its steps and every trace is corrected with it.

Loops here are over steps and cycles, never over events.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import weakref

from opskew import _engine
from opskew.stats.estimators import estimate, per_event_diff

# The phases of a step, by the schedule's ProfilerAction name.
_PHASE = {"NONE": "wait", "WARMUP": "warmup", "RECORD": "active", "RECORD_AND_SAVE": "active"}

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

# The wait the advice gives: the last NEAR wait steps before a cycle lie past
# SETTLE, so that every active step of a 7-step cycle pairs with a settled one.
WAIT_ADVICE = SETTLE + NEAR

# Traces corrected again with the run's final W at stop(), the latest first.
MAX_RECORRECT = 50

# Traced cycles whose steps W is estimated from, the latest: with repeat=0 a
# run goes on for thousands of cycles, and estimating from every step made
# each trace's analysis grow with the run (70 ms of opskew's time a cycle
# after 400 cycles, 8 ms at the start). Older steps are counted
# (step_counts), not kept. 50 cycles give 300 pairs with the advised
# schedule, and they are the cycles whose traces stop() corrects again.
KEEP_CYCLES = MAX_RECORRECT

# The leaf reference (docs/profile.md, "Each leaf's own delta"): opskew's
# own tracer, whose cost is near the hardware floor, records REF_STEPS wait
# steps of each wait block after a trace. One session holds them and the
# step before them, which runs cold under a new session (its operators took
# a median 1.74x: bench/bench_leaf_reference.py) and is not used; each step is
# summarized apart (osk_trace_summarize_window). Stopping a session leaves
# an after-effect on the steps after it, as the profiler's stop does (the
# next MLP step +22%, then +8%, +4%, +3%, and about +1.5% ten steps on:
# bench/bench_wait_positions.py, opskew against opskew-noref), so the
# session runs right after the cold steps of a trace (its first step is
# the 1-based REF_FIRST of the block), and only in a run whose wait blocks
# hold SETTLE more steps before the NEAR that pairing takes: REF_WAIT. Each
# leaf's own delta is its mean reported time in the trace less its time
# under the tracer, from REF_MIN_STEPS tracer steps on (the interval: the
# sign test's over the tracer steps, 87.5% from 4, 99% from 8). The latest
# REF_KEEP tracer steps are kept.
REF_STEPS = 4
REF_FIRST = POST_TRACE + 1
REF_WAIT = POST_TRACE + 1 + REF_STEPS + SETTLE + NEAR
REF_MIN_STEPS = 4
REF_MIN_CALLS = 5
REF_KEEP = 64

# The schedule opskew advises for a run that corrects itself (the report's
# advice, `opskew profile`'s defaults, `opskew advise`): the loop warms up
# for skip_first steps, every wait block holds REF_WAIT steps (pairs and the
# leaf reference), active=7 gives 6 warm pairs a cycle.
ADVISED_SCHEDULE = {"skip_first": 10, "wait": REF_WAIT, "warmup": 1, "active": 7, "repeat": 3}


def schedule_call(sch: dict) -> str:
    """`torch.profiler.schedule(k=v, ...)` for a schedule's arguments."""
    return "torch.profiler.schedule(" + ", ".join(f"{k}={v}" for k, v in sch.items()) + ")"


_STEP_NAME = re.compile(r"ProfilerStep#(\d+)$")

_UNSET = object()


def _plain_wait_steps(torch, prof) -> bool:
    """Whether this torch's profile.step() from a wait step (NONE) to a wait
    step does no more than set step_num, current_action (and
    _prev_schedule_action): no transition actions for (NONE, NONE), and no
    Kineto step counter to move (torch moves it only under KINETO_USE_DAEMON
    or KINETO_FORCE_STEP_HOOK since the guard appeared in step(); before it,
    on every step). Read from the installed torch once; False when unsure."""
    global _PLAIN_STEP
    if os.environ.get("KINETO_USE_DAEMON") or os.environ.get("KINETO_FORCE_STEP_HOOK"):
        return False
    none = torch.profiler.ProfilerAction.NONE
    try:
        if prof.action_map.get((none, none)) or not hasattr(prof, "schedule") or not hasattr(prof, "step_num"):
            return False
    except AttributeError:
        return False
    if _PLAIN_STEP is None:
        import inspect

        try:
            src = inspect.getsource(type(prof).step)
        except (OSError, TypeError):
            src = ""
        # The Kineto step counter moves inside that guard only.
        _PLAIN_STEP = "KINETO_USE_DAEMON" in src and "increment_step" in src
    return _PLAIN_STEP and type(prof).step is torch.profiler.profile.step


_PLAIN_STEP = None


class _Answer:
    """A schedule that gives, once, the action already asked of the user's
    schedule for the next step, and otherwise asks it (profile._transit)."""

    __slots__ = ("schedule", "action")

    def __init__(self, schedule, action):
        self.schedule, self.action = schedule, action

    def __call__(self, step):
        action, self.action = self.action, _UNSET
        return self.schedule(step) if action is _UNSET else action


# The `opskew profile` command's step driver in this process (set by its
# bootstrap, _profile_boot.py); None everywhere else.
_driver = None


class _NativeRange:
    """A ProfilerStep#N range opened through opskew's native shim; ends with
    __exit__, as the record_function it stands in for (torch's stop() and
    step() call prof.step_rec_fn.__exit__ when they close a range)."""

    __slots__ = ("_end", "_h", "_mon")

    def __init__(self, lib, name: str, monitor=None):
        self._end = lib.osk_shim_range_end
        self._h = lib.osk_shim_range_begin(name.encode())
        # torch's experimental CUPTI monitor (torch.profiler._cupti_monitor,
        # where it exists): record_function pushes its name there too, and
        # pops it before the range ends; so does this.
        self._mon = monitor if monitor is not None and monitor.push_user_annotation(name) is not None else None

    def opened(self) -> bool:
        return bool(self._h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        mon, self._mon = self._mon, None
        if mon is not None:
            mon.pop_user_annotation()
        h, self._h = self._h, None
        if h:
            self._end(h)
        return False

    def __del__(self):
        # Never exited (a profiler dropped without stop()): ended and freed
        # when collected, as torch's record_function handle is.
        if getattr(self, "_h", None):
            self.__exit__(None, None, None)


def step() -> None:
    """`opskew.step()`: marks the end of a training step for `opskew profile
    -- python SCRIPT` (docs/profile.md). The first call switches the command
    from the optimizer's steps to these marks. Outside that command it does
    nothing, so a script can keep the call."""
    if _driver is not None:
        _driver.manual_step()


def rank_of() -> tuple:
    """(rank, world size) of this process in a torch.distributed job started
    by torchrun (its RANK and WORLD_SIZE), or (None, 1) outside one."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ["RANK"]) if world > 1 else None
    except (KeyError, ValueError):
        return None, 1
    return rank, world


# The traces a profile writes to corrected_dir: STEM-cycleN.json and its
# corrected_path, STEM being opskew-profile, -rankR under torchrun, then -K
# for the K-th profiler of a process with that folder (profile.__init__).
TRACE_NAME = re.compile(r"opskew-profile(-rank\d+)?(-\d+)?-cycle\d+(\.corrected)?\.json(\.gz)?$")


def corrected_path(raw: str) -> str:
    """NAME.corrected.json (or .json.gz) next to the raw trace NAME.json(.gz)."""
    for suffix in (".json.gz", ".json", ".gz"):
        if raw.endswith(suffix):
            return raw[: -len(suffix)] + ".corrected" + (".json.gz" if suffix != ".json" else ".json")
    return raw + ".corrected.json"


class _Stderr:
    """report_file's default: sys.stderr as it is when a report is printed
    (contextlib.redirect_stderr, a test's capture), not as it was when
    opskew was imported."""

    def write(self, text):
        return sys.stderr.write(text)

    def flush(self):
        sys.stderr.flush()

    def __repr__(self):
        return "sys.stderr"


_STDERR = _Stderr()
_DIR_USERS: dict = {}  # corrected_dir (real path) -> profilers of this process that used it


def _median(xs):
    return _engine.quantile(list(xs), 0.5) if xs else None


class profile:
    """`opskew.profile(...)`: `torch.profiler.profile(...)` with the same
    arguments and methods, plus the skew report (`.report`, a dict; `.reports`,
    one per trace) and a corrected trace next to each raw one it exported.

    opskew's own keywords (all optional):
      report_file   where the per-cycle report is printed (default
                    sys.stderr; None prints nothing);
      corrected_dir where to put raw and corrected traces when the user's
                    on_trace_ready does not export one (default: none is
                    written; the report is still made);
      threshold     the in-window slowdown that counts as skew (0.05);
      measure_w_py  under with_stack, measure W_py in this process at the
                    first trace (about a second, once; default True), else
                    use a stored calibration's; and how much slower Python
                    bytecode runs under the profile function (opskew.bytecode,
                    about 10 ms, once), else widen nothing for it;
      leaf_reference
                    record REF_STEPS wait steps after each trace with opskew's
                    own tracer (about 0.2 ms of opskew's time each) and give
                    each leaf operator its own delta from them (default True;
                    CPU only, in a run whose wait is at least REF_WAIT, 21).
    """

    def __init__(self, *args, report_file=_STDERR, corrected_dir=None, threshold=0.05, measure_w_py=True,
                 leaf_reference=True, **kwargs):
        import torch

        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) \
                or not math.isfinite(threshold) or threshold < 0:
            raise ValueError(f"threshold: a finite number >= 0 (0.05 is 5%), not {threshold!r}")

        self._torch = torch
        self._user_ready = kwargs.pop("on_trace_ready", None)
        self._has_schedule = kwargs.get("schedule") is not None
        # torch's default activities include CUDA where it is available.
        acts = kwargs.get("activities")
        self._cuda = torch.cuda.is_available() and (
            acts is None or any(getattr(a, "name", str(a)).upper() == "CUDA" for a in acts))
        self._options = {k: bool(kwargs.get(k)) for k in ("record_shapes", "profile_memory", "with_stack",
                                                           "with_flops", "with_modules")}
        if report_file is not None and not callable(getattr(report_file, "write", None)):
            raise TypeError(f"report_file: a file object with write() or None, not {type(report_file).__name__}"
                            + (" (open the file first)" if isinstance(report_file, (str, os.PathLike)) else ""))
        self._report_file = report_file
        self._corrected_dir = corrected_dir
        self._threshold = threshold
        self.prof = torch.profiler.profile(*args, on_trace_ready=self._on_ready, **kwargs)
        # One record per step body: {"step", "phase", "ns"}; and per step() call.
        # A long wait block keeps only the steps pairing can use (_trim_wait).
        self.steps: list[dict] = []
        self.step_calls: list[dict] = []
        self._block_start = 0  # index in self.steps where the current block of one phase starts
        self._dropped_wait = 0  # wait steps counted, not kept (_trim_wait)
        self._dropped_old = {"wait": 0, "warmup": 0, "active": 0}  # steps of cycles past KEEP_CYCLES
        self._forgot = False  # steps were dropped: self.steps starts right after a trace
        self.reports: list[dict] = []
        self._events: dict[int, tuple[int, int]] = {}  # step number -> (op events, python events)
        self._t_end = None
        self._c_end = None
        self._phase = None
        self._exported: list[str] = []
        self._in_ready = False
        self._ready_ns = 0
        self._cycle = 0
        self._call_t0 = None
        self._ended = True  # no body running before start()
        self._running = False  # between start() and stop()
        self._stopped = False  # stop() ended a session: a later step() is a no-op
        self._lost = None  # why this cycle's session is gone (another profiler ended it), or None
        self._own_ranges = self._owns_ranges()
        self._none = torch.profiler.ProfilerAction.NONE
        # Wait steps take the short way through step() where torch's step()
        # from a wait step to a wait step does nothing but move the schedule
        # on (_plain_wait_steps); _prev_schedule_action exists in newer torch.
        self._quiet_waits = self._own_ranges and _plain_wait_steps(torch, self.prof)
        self._prev_action_attr = hasattr(self.prof, "_prev_schedule_action")
        self._range_lib = None  # opskew's native shim, once start() has loaded it (_step_ranges)
        self._monitor = None  # torch's CUPTI monitor module, where torch has one (_NativeRange)
        self.step_ranges = None  # how the ProfilerStep#N ranges are opened: {"route", "why"}
        self._thread = None  # the thread start() ran on: torch's session is that thread's
        self._tmpdir = None  # opskew's own exports, when the user's handler made none
        self._kept = None
        self._wv = None
        # Under torchrun (WORLD_SIZE > 1) each rank measures its own W and
        # names its files by rank, as tensorboard_trace_handler names workers.
        self.rank, self.world_size = rank_of()
        # The correction's cross-thread rule: asked for with CUDA activity (a
        # backward runs on the autograd engine's device thread; asked for, it
        # costs one read fewer than found), else where a trace holds GPU
        # activity.
        self._waits = 1 if self._cuda else -1
        # W_own's clock, the thread's CPU time, only where W_own is used: a
        # rank of a job, on the CPU (under CUDA it means nothing, see _w_own).
        # Each read is a system call, and two of them in every step() made the
        # next body slower (bench/bench_wait_steps.py; docs/profile.md).
        self._cpu_clock = time.thread_time_ns if self.rank is not None and not self._cuda else None
        self.name = "opskew-profile" + (f"-rank{self.rank}" if self.rank is not None else "")
        # The files' stem in corrected_dir: a second profiler of this process
        # with the same folder (train, then eval) gets "-2", so that neither
        # overwrites the other's traces.
        self._stem = self.name
        if corrected_dir is not None:
            key = os.path.realpath(os.fspath(corrected_dir))
            _DIR_USERS[key] = _DIR_USERS.get(key, 0) + 1
            if _DIR_USERS[key] > 1:
                self._stem = f"{self.name}-{_DIR_USERS[key]}"
        self._measure_py = measure_w_py
        self._w_py_value = None  # {} once looked for and not found
        self._bytecode_value = None  # (result,) once looked for
        self._stored_cal = None  # (the stored calibration or None,) once looked up: _stored
        self._stored_note = None  # what _stored found, where it is not this run's thread count
        self._w_py_error = None
        self._own_ns = 0  # opskew's own time inside step(): W_py, analysis, corrected trace
        self.final = None  # the run's W from all its steps, set at stop()
        # The leaf reference (REF_*): opskew's tracer on some wait steps.
        self._ref_on = bool(leaf_reference) and not self._cuda
        self._ref_why = (None if self._ref_on else
                         "leaf_reference=False" if not leaf_reference else
                         "with CUDA activity (opskew's tracer on wait steps has not been validated on a GPU)")
        self._ref_live = None  # (the tracer session, its Trace, [step windows]) while its steps run
        self._ref_open = None  # the running tracer step's begin (the tracer's clock, ns)
        self._ref_clock = None  # that clock: the collector's osk_trace_now_ns
        self._ref_pending: list = []  # (Trace, windows) of tracer sessions, summarized at the next analysis
        self._ref_steps: list[dict] = []  # per tracer step: {leaf name: ns per call}, the latest REF_KEEP
        self._wait_pos = 0  # wait steps begun in the current wait block
        self._last_wait_len = 0  # steps of the last wait block that ended
        self._leaf_raw: dict = {}  # cycle -> {leaf: (calls, reported total ns, Python events)}, for stop()
        self._pair_steps: list = []  # the last estimate's pairs: (active step, wait step) numbers
        self.print_error = None  # why report_file stopped being printed to, if it did
        self._shed_upto = 0  # reports before this index hold no per-operator table (_shed_old_operators)

    # ------------------------------------------------------------ delegation
    def __getattr__(self, name):
        return getattr(self.__dict__["prof"], name) if "prof" in self.__dict__ else super().__getattribute__(name)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        # The rest of torch's __exit__ (its stop() ran inside ours): the
        # step counter's entry, and the execution trace's cleanup, which
        # finishes its JSON file (without it the file ended mid-record).
        from torch.autograd import profiler as autograd_profiler

        tracker = getattr(autograd_profiler, "KinetoStepTracker", None)
        if tracker is not None:
            tracker.erase_step_count("ProfilerStep")
        eto = getattr(self.prof, "execution_trace_observer", None)
        if eto is not None:
            eto.cleanup()
        return False

    def _action(self) -> str:
        a = self.prof.current_action
        return _PHASE.get(getattr(a, "name", str(a)), "active")

    def _sync(self):
        """With CUDA activity, waits for the device at each step boundary, so
        a step's time includes its kernels (the CPU side alone runs ahead of
        the GPU by up to the launch queue's depth)."""
        if self._cuda and self._torch.cuda.is_initialized():
            self._torch.cuda.synchronize()

    def _close_body(self, now, partial=False, cpu_now=None):
        if self._t_end is not None:
            s = {"step": self._step, "phase": self._phase, "ns": now - self._t_end}
            if cpu_now is not None and self._c_end is not None:
                # The calling thread's CPU time in the body: the work the
                # step did, without the time it slept waiting (for other
                # ranks in a collective, say): W_own's measure.
                s["cpu_ns"] = cpu_now - self._c_end
            if partial:
                # From the last step() to stop(): the loop's end, or a step
                # cut short by an exception; not a whole step, never used.
                s["partial"] = True
            if self._ref_live is not None:
                s["ref"] = True  # under opskew's tracer: never a baseline
            if not self.steps or self.steps[-1]["phase"] != s["phase"] or self.steps[-1].get("partial"):
                self._block_start = len(self.steps)
            self.steps.append(s)
            self._t_end = None
            if s["phase"] == "wait" and not partial:
                self._trim_wait()

    def _trim_wait(self):
        """Bounds a long wait block (the steps after the last cycle run to the
        end of training; a wait of thousands) to what _estimate can use: its
        first POST_TRACE + NEAR steps (cold ones and the baseline of the cycle
        before it) and its last NEAR (the baseline of a cycle after it). The
        steps between are counted (step_counts) and dropped with their
        step_calls entries, so memory and report.json stay bounded however
        long the run."""
        head = POST_TRACE + NEAR
        if len(self.steps) - self._block_start <= head + NEAR:
            return
        gone = self.steps.pop(self._block_start + head)
        self._dropped_wait += 1
        for k in range(len(self.step_calls) - 1, max(len(self.step_calls) - 4 * NEAR, 0) - 1, -1):
            if self.step_calls[k]["after_step"] == gone["step"]:
                del self.step_calls[k]
                break

    def step_counts(self) -> dict:
        """Whole steps per phase so far, the dropped wait steps included."""
        n = dict(self._dropped_old)
        n["wait"] += self._dropped_wait
        for s in self.steps:
            if not s.get("partial"):
                n[s["phase"]] = n.get(s["phase"], 0) + 1
        return {ph: n.get(ph, 0) for ph in ("wait", "warmup", "active")}

    # ------------------------------------------- the ProfilerStep#N ranges
    # torch opens record_function("ProfilerStep#N") at the end of start()
    # and step(), and closes it at the start of the next step() or stop().
    # opskew takes both over: it closes the range as soon as a step ends and
    # opens the next one as the last thing before the next step's body, so
    # that its own bookkeeping and torch's transitions lie in no step's range
    # (they added 4 us to an empty step's range, 15 us under with_stack:
    # docs/profile.md). A torch without these attributes keeps its own.
    def _owns_ranges(self) -> bool:
        return bool(getattr(self.prof, "record_steps", False)) and hasattr(self.prof, "step_rec_fn")

    def _transit(self, call, action=_UNSET):
        """torch's start() or step() without its range handling. `action`:
        the schedule's answer for the next step, where step() has asked it
        already (the user's schedule is called once per step, as by torch)."""
        own = self._owns_ranges()
        if own:
            self.prof.record_steps = False
        if action is not _UNSET:
            self.prof.schedule = _Answer(self.prof.schedule, action)
        try:
            call()
        finally:
            if own:
                self.prof.record_steps = True
            if action is not _UNSET:
                self.prof.schedule = self.prof.schedule.schedule
        return own

    def _begin_body(self, own: bool):
        self._phase = self._action()
        self._step = self.prof.step_num
        self._ended = False
        if self._phase == "wait":
            self._wait_pos += 1
        else:
            if self._wait_pos:
                self._last_wait_len, self._wait_pos = self._wait_pos, 0
            if self._ref_live is not None:  # the wait block ended before the tracer's last step
                self._ref_end()
        # No range around a wait step: torch.profiler records none, and
        # opening and closing it (a dispatcher call each way) was the largest
        # part of opskew's own work in a wait step's step(), which runs
        # between two bodies (bench/bench_wait_steps.py). Only an instrument
        # outside torch.profiler (emit_nvtx, emit_itt, opskew.trace) sees
        # the difference (docs/profile.md).
        if own and self._phase != "wait":
            name = "ProfilerStep#" + str(self.prof.step_num)
            rf = _NativeRange(self._range_lib, name, self._monitor) if self._range_lib is not None else None
            if rf is not None and rf.opened():
                self.prof.step_rec_fn = rf
            else:
                if rf is not None:  # the shim could not open it: this step's range is record_function's
                    self.step_ranges["record_function_steps"] = self.step_ranges.get("record_function_steps", 0) + 1
                from torch.autograd import profiler as autograd_profiler

                self.prof.step_rec_fn = autograd_profiler.record_function(name)
                self.prof.step_rec_fn.__enter__()
        elif self._ref_on and REF_FIRST <= self._wait_pos <= REF_FIRST + REF_STEPS:
            self._ref_step_begins()
        self._c_end = self._cpu_clock() if self._cpu_clock else None
        self._t_end = time.perf_counter_ns()

    def _end_body(self, partial: bool = False, now=None, cpu_now=None):
        """Ends the running step's body (once): the device synchronized, the
        time taken, its range closed, with as little as possible before the
        close (it lies inside the range). step() and stop() call it first;
        `opskew profile`'s driver calls it before its own work."""
        if self._ended:
            return
        if self._cuda and now is None:
            self._sync()
        t0 = time.perf_counter_ns() if now is None else now
        c0 = cpu_now if now is not None else self._cpu_clock() if self._cpu_clock else None
        rf = self.prof.step_rec_fn if self._own_ranges else None
        if rf is not None:
            self.prof.step_rec_fn = None
            rf.__exit__(None, None, None)
        self._call_t0 = t0
        self._close_body(t0, partial=partial, cpu_now=c0)
        self._ready_ns = 0
        self._ended = True

    # ------------------------------------------------- the leaf reference
    def _ref_step_begins(self):
        """The wait step about to run is one of the tracer's (REF_*), in a
        run whose last wait block was at least REF_WAIT long: the first
        starts the session (a step that runs cold, not used), the others
        open their window. A tracer that cannot start turns the leaf
        reference off for the run, and the reports say why."""
        if self._ref_live is None:
            if self._wait_pos != REF_FIRST or self._last_wait_len < REF_WAIT:
                return
            from opskew.tracer.session import trace

            ctx = trace(instrument="native")
            try:
                self._ref_live = (ctx, ctx.enter_native_only(), [])
                self._ref_clock = ctx.clock()  # the events' own time line (Trace.window)
            except Exception as exc:  # noqa: BLE001 - the user's loop goes on, with the stored delta
                self._ref_on = False
                self._ref_why = f"opskew's tracer could not start ({type(exc).__name__}: {exc})"
            return
        self._ref_open = self._ref_clock()

    def _ref_step_ended(self):
        """A tracer step's body just ended: its window is kept, and after
        the last one the session stops."""
        if self._ref_open is not None:
            self._ref_live[2].append((self._ref_open, self._ref_clock()))
            self._ref_open = None
        if self._wait_pos >= REF_FIRST + REF_STEPS:
            self._ref_end()

    def _ref_end(self):
        """Stops the tracer; its summaries wait for the next analysis (not
        between two bodies)."""
        ctx, t, windows = self._ref_live
        self._ref_live = None
        self._ref_open = None
        try:
            ctx.__exit__(None, None, None)
            if windows:
                self._ref_pending.append((t, windows))
        except Exception as exc:  # noqa: BLE001 - as in _ref_step_begins
            self._ref_on = False
            self._ref_why = f"opskew's tracer could not stop ({type(exc).__name__}: {exc})"

    def _ref_collect(self):
        """Each pending tracer step's leaves, ns per call (the tracer's
        corrected totals over calls, in C: its summary of the step's
        window), kept."""
        pending, self._ref_pending = self._ref_pending, []
        for t, windows in pending:
            for a, b in windows:
                try:
                    rows = t.window(a, b).rows
                except Exception as exc:  # noqa: BLE001 - one step lost, said
                    self._ref_why = f"a tracer step's summary failed ({type(exc).__name__}: {exc})"
                    continue
                self._ref_steps.append({r["name"]: r["total_corrected_ns"] / r["calls"] for r in rows
                                        if r["descendants"] == 0 and r["calls"] > 0})
        del self._ref_steps[:-REF_KEEP]

    def _op_deltas(self, leaves: dict | None, w_median: float) -> tuple[dict | None, dict]:
        """Each leaf's own delta for a trace whose leaves are `leaves`
        ({name: (calls, reported total ns, Python events inside)}): its mean
        reported time, less W_py per Python event inside it (under
        with_stack), less its time per call under opskew's tracer; the
        median over the tracer steps with the sign test's interval, at 0 and
        above. Returns (op_deltas for verdict.per_operator or None, what the
        report says)."""
        n = len(self._ref_steps)
        info = {"tracer_steps": n, "leaves": len(leaves or {}), "names": 0}
        if not self._ref_on and self._ref_why:
            info["why"] = f"off: {self._ref_why}"
        elif n < REF_MIN_STEPS:
            info["why"] = (f"{n} tracer step(s) so far, {REF_MIN_STEPS} needed: opskew's tracer runs on "
                           f"{REF_STEPS} wait steps after each trace where the wait is at least {REF_WAIT}, so "
                           "that its after-effect has faded before the wait steps W is paired with")
        if n < REF_MIN_STEPS or not leaves:
            return None, info
        w_py = self._w_py()
        wp = max(w_py["median"], 0.0) if w_py else 0.0
        out = {}
        for name, (calls, total, py) in leaves.items():
            ts = [st[name] for st in self._ref_steps if name in st]
            if len(ts) < REF_MIN_STEPS:
                continue
            r = (total - wp * py) / calls
            p = _engine.paired([0.0] * len(ts), [r - t for t in ts])
            med = max(p["median"], 0.0)
            lo, hi = max(p["ci"][0], 0.0), max(p["ci"][1], 0.0)
            out[name] = {"median": med, "ci95": [min(lo, med), max(hi, med)], "ci_coverage": p["ci_coverage"],
                         "tracer_steps": len(ts), "reported_ns": r,
                         "source": f"in-run: opskew's tracer on {len(ts)} wait steps"}
            if p["ci_reaches_level"] and p["ci"][1] < 0:
                # Faster in the trace than under opskew's tracer, beyond
                # doubt: no instrument cost makes an event shorter, so the
                # profiled steps ran it faster, or the wait steps slower,
                # than it runs (docs/profile.md, "Faster in the trace"). Its
                # interval reaches the tracer's time.
                out[name]["below_ns"] = {"median": -p["median"], "ci95": [-p["ci"][1], -p["ci"][0]],
                                         "tracer_ns": _median(ts)}
        if not out:
            info["why"] = "no leaf of this trace was seen in enough tracer steps"
            return None, info
        meds = sorted(d["median"] for d in out.values())
        info.update({"names": len(out), "median_ns": _median(meds), "range_ns": [meds[0], meds[-1]],
                     "above_w": sorted(k for k, d in out.items() if d["median"] > max(w_median, 0.0)),
                     "below_tracer": sorted(k for k, d in out.items() if "below_ns" in d),
                     "coverage": min(d["ci_coverage"] for d in out.values())})
        return out, info

    def _session_gone(self) -> str | None:
        """Why the recording this profiler expects is not there, or None:
        torch runs one profiler at a time, and one started inside this one
        (another opskew.profile, a torch.profiler.profile) ended the session
        when it stopped. torch's stop then finds no session; exporting its
        trace crashed the process (segmentation fault)."""
        act = getattr(self.prof, "current_action", None)
        enabled = getattr(self._torch._C._autograd, "_profiler_enabled", None)
        if enabled is None or getattr(act, "name", "") not in ("RECORD", "RECORD_AND_SAVE") or enabled():
            return None
        if self._thread is not None and threading.get_ident() != self._thread:
            # The session is the starting thread's: torch sees none here, and
            # its own step() crashed the process (segmentation fault).
            return ("step() ran on another thread than start(): the profiler's session belongs to the thread "
                    "that started it; call step() (and stop()) there. This cycle has no trace")
        return ("another profiler started inside this one ended its session (torch runs one profiler at a "
                "time): this cycle has no trace")

    def _step_ranges(self):
        """Chooses how the ProfilerStep#N ranges are opened, once: through
        opskew's native shim (a C++ RecordFunction of user scope, which is
        what record_function opens, without torch.ops' Python dispatch
        around it), else torch's record_function. On the 2-core VM the
        record_function route left 18 to 73 us a step in each range besides
        the body, the shim 3 to 8 us (docs/profile.md). Built at first use
        like the native collector (native.py); never required."""
        if self.step_ranges is not None:
            return
        if not self._own_ranges:
            has = hasattr(self.prof, "record_steps") and hasattr(self.prof, "step_rec_fn")
            self.step_ranges = (
                {"route": "none", "why": "no schedule: torch.profiler opens no ProfilerStep#N ranges without one"}
                if has else
                {"route": "torch", "why": "this torch's profile has no record_steps/step_rec_fn: torch opens its "
                                          "own ranges"})
            return
        from opskew.tracer import native

        try:
            lib, why = native.shim(self._torch)
        except Exception as exc:  # noqa: BLE001 - never stops the user's loop: record_function still works
            lib, why = None, f"loading it failed ({type(exc).__name__}: {exc})"
        self._range_lib = lib
        try:
            from torch.autograd import profiler as autograd_profiler

            find = getattr(autograd_profiler, "_maybe_cupti_monitor", None)
            self._monitor = find() if find is not None else None
        except Exception:  # noqa: BLE001 - an optional torch module: without it, no monitor
            self._monitor = None
        self.step_ranges = ({"route": "native", "why": None} if lib is not None else
                            {"route": "record_function",
                             "why": f"opskew's native shim is unavailable ({why}): each range also holds "
                                    "torch.ops' dispatch of its enter and exit"})

    def start(self):
        if self._running:
            return  # as torch's start() on a running profiler: nothing new begins
        self._step_ranges()
        self._thread = threading.get_ident()
        own = self._transit(self.prof.start)
        self._running = True
        self._stopped = False
        self._sync()
        self._begin_body(own)

    def step(self):
        if not self._running:
            # Before start(): only the schedule's count moves, as with torch.
            # After stop(): nothing. torch's step() would start a session of
            # a stopped profiler again, and crashed the process (a
            # segmentation fault in torch 2.13 at the next transition).
            if not self._stopped:
                self.prof.step()
            return
        action = _UNSET
        if self._phase == "wait" and self._quiet_waits:
            # A wait step's step() runs between two bodies, and what it does
            # leaves the next body slower (its code and data in the caches
            # and predictors): torch's step() and opskew's bookkeeping around
            # it made a small MLP's next body 5.6% slower than a body after a
            # body, this path 2.9% (bench/bench_wait_steps.py; docs/profile.md,
            # "Wait steps under a live profiler").
            # Wait to wait, torch's step() only moves the schedule on:
            # the same, done here; any other transition goes through torch.
            # `opskew profile`'s driver ends the body itself first (_ended).
            ended = self._ended
            if ended:
                now, cpu = self._call_t0, None
            else:
                if self._cuda:
                    self._sync()
                now = time.perf_counter_ns()
                cpu = self._cpu_clock() if self._cpu_clock else None
            prof = self.prof
            nxt = prof.step_num + 1
            action = prof.schedule(nxt)  # before any state changes, as torch's step() calls it
            if action is self._none and prof.current_action is self._none:
                if not ended:
                    self._close_body(now, cpu_now=cpu)
                if self._ref_live is not None:
                    self._ref_step_ended()
                prof.step_num = nxt
                if self._prev_action_attr:
                    prof._prev_schedule_action = action
                self._lost = None
                self.step_calls.append({"after_step": self._step, "ns": time.perf_counter_ns() - now,
                                        "on_trace_ready_ns": 0})
                self._step = nxt
                self._ended = False
                self._wait_pos += 1
                if self._ref_on and REF_FIRST <= self._wait_pos <= REF_FIRST + REF_STEPS:
                    self._ref_step_begins()
                self._c_end = self._cpu_clock() if self._cpu_clock else None
                self._t_end = time.perf_counter_ns()
                return
            if not ended:
                self._end_body(now=now, cpu_now=cpu)
        else:
            self._end_body()
        if self._ref_live is not None:
            self._ref_step_ended()
        self._lost = self._session_gone()
        t0 = self._call_t0
        own = self._transit(self.prof.step, action)
        t1 = time.perf_counter_ns()
        self.step_calls.append({"after_step": self._step, "ns": t1 - t0, "on_trace_ready_ns": self._ready_ns})
        self._begin_body(own)

    def stop(self):
        if not self._running:
            return  # stopped already (an explicit stop() inside `with`, then __exit__'s)
        self._running = False
        self._stopped = True
        self._end_body(partial=True)
        if self._ref_live is not None:
            self._ref_open = None  # a partial step: not a whole one
            self._ref_end()
        self._lost = self._session_gone()
        t0 = self._call_t0
        self.prof.stop()
        self.step_calls.append({"after_step": self._step, "ns": time.perf_counter_ns() - t0,
                                "on_trace_ready_ns": self._ready_ns, "stop": True})
        try:
            self._recorrect()
        except Exception as exc:  # noqa: BLE001 - the run's own traces are already written
            if self.report is not None:
                self.report["recorrect_error"] = f"{type(exc).__name__}: {exc}"
            self._say(f"opskew.profile: correcting earlier traces with the final W failed "
                      f"({type(exc).__name__}: {exc}); each keeps its own cycle's W\n")

    def _recorrect(self):
        """At stop(): W estimated once more from every step kept (the last
        KEEP_CYCLES cycles'; the wait steps after the last cycle have run by
        now), and every trace of
        the run corrected with it, so that they agree (a cycle whose own W had
        too few pairs gets its corrected trace then). Each report keeps the W
        of its own cycle (`w_ns`) and says what its trace carries
        (`corrected_with`, `corrected_w_ns`); `self.final` holds the run's."""
        if not self.reports:
            return
        if self._ref_pending:
            self._ref_collect()
        w, notes, detail = self._estimate()
        if w is None or not w["ci_reaches_95"]:
            return
        wv = {"median": w["median"], "ci95": w["ci95"], "ci_coverage": w["ci_coverage"],
              "ci_method": w["ci_method"]}
        delta = self._delta(wv["median"], notes)
        self.final = {"w_ns": wv, "w_own_ns": detail.get("w_own_ns"), "delta_ns": delta, "pairs": detail["pairs"],
                      # The cycles its pairs come from: the last KEEP_CYCLES of the run's.
                      "cycles": min(self._cycle, KEEP_CYCLES), "run_cycles": self._cycle,
                      "inflation": detail.get("inflation"), "notes": sorted(set(notes)),
                      "corrected_step_ns": detail.get("corrected_step_ns"),
                      "corrected_step_w_ci_ns": detail.get("corrected_step_w_ci_ns"),
                      "cold_first_active_extra_ns": detail.get("cold_first_active_extra_ns"),
                      "w_by_position": detail.get("w_by_position"), "w_by_cycle": detail.get("w_by_cycle"),
                      "cold_first_active_cycles": detail.get("cold_first_active_cycles"),
                      "baseline_step_ns": detail.get("baseline_step_ns"), "active_step_ns": detail.get("active_step_ns"),
                      "sign_test": f"{w['n_positive']} of {w['n']} active steps slower than their wait step, "
                                   f"p = {w['sign_p']:.3g}"}
        self._wv = wv
        # The latest MAX_RECORRECT cycles' traces (those whose steps W comes
        # from); the older ones keep their own cycle's W.
        older = sum(1 for r in self.reports[:-MAX_RECORRECT] if r.get("raw_trace"))
        if older:
            self.final["not_recorrected"] = (f"the {older} oldest traces keep their own cycle's W (those of the "
                                             f"latest {MAX_RECORRECT} cycles are corrected again at stop)")
        redo = [r for r in self.reports[-MAX_RECORRECT:] if r.get("raw_trace") and os.path.isfile(r["raw_trace"])]
        for rep in redo:
            out = corrected_path(rep["raw_trace"])
            rep["corrected_trace"] = out
            rep["corrected_with"] = "the run's final W"
            rep["corrected_w_ns"] = wv
            spans = _spans(rep, wv, self._w_py(), self.final)
            # Each leaf's own delta from every tracer step of the run.
            rep["op_deltas_ns"], rep["leaf_delta"] = self._op_deltas(self._leaf_raw.get(rep["cycle"]), wv["median"])
            if rep["op_deltas_ns"]:
                self.final["notes"] = _leaves_own(self.final["notes"])
            v = _per_operator_to(rep["raw_trace"], wv, delta, self._threshold, out, _metadata(rep), self._w_py(),
                                 self._waits, spans, self._bytecode(), self._delta_range(), rep["op_deltas_ns"])
            rep["operators"] = _operators(v)
            _trace_steps(rep, v)

    def export_chrome_trace(self, path, *args, **kwargs):
        """As torch's; the corrected trace goes next to it. Inside
        on_trace_ready the path is remembered for that; after the cycle,
        when opskew itself took Kineto's one save of the trace, the trace is
        copied from opskew's copy (through the one writer) and corrected
        there."""
        path = os.fspath(path)
        if self._in_ready or self._kept is None:
            out = self.prof.export_chrome_trace(path, *args, **kwargs)
            if self._in_ready:
                self._exported.append(path)
            return out
        from opskew.output import write_file

        with open(self._kept, "rb") as f:
            data = f.read()
        write_file(path, data)  # a .gz name is written gzipped by the one writer
        rep = self.report
        if rep is not None and self._wv is not None:
            out = corrected_path(path)
            rep["raw_trace"], rep["corrected_trace"] = path, out
            self._claim(rep)
            spans = _spans(rep, self._wv, self._w_py(), rep)
            _per_operator_to(self._kept, self._wv, rep.get("delta_ns", 0.0), self._threshold, out,
                             _metadata(rep), self._w_py(), self._waits, spans, self._bytecode(), self._delta_range(),
                             rep.get("op_deltas_ns"))
        return None

    @property
    def report(self) -> dict | None:
        """The latest cycle's skew report (None before the first trace)."""
        return self.reports[-1] if self.reports else None

    def _say(self, text: str):
        """Prints to report_file. A stream that fails (closed, a broken pipe)
        must not stop the training: printing stops there, and the reports
        stay in `reports`."""
        f = self._report_file
        if f is None:
            return
        try:
            f.write(text)
            flush = getattr(f, "flush", None)
            if flush is not None:
                flush()
        except Exception as exc:  # noqa: BLE001 - the user's loop goes on
            self._report_file = None
            self.print_error = f"printing the report failed ({type(exc).__name__}: {exc}); later ones are not printed"

    # ------------------------------------------------------- on_trace_ready
    def _on_ready(self, _torch_prof):
        t0 = time.perf_counter_ns()
        self._wv = None  # this cycle's, set when its analysis succeeds
        if self._lost:
            # Nothing to export (torch crashes trying), so neither the user's
            # handler nor opskew's analysis runs; the report says why.
            self._cycle += 1
            self._take_active()
            self.reports.append(self._error_report(self._lost))
            self._shed_old_operators()
            self._say(f"opskew.profile cycle {self._cycle}: {self._lost}\n")
            self._lost = None
            return
        # From the start of this step()/stop() call to here: the profiler's
        # stop and post-processing, before on_trace_ready.
        stop_ns = t0 - self._call_t0 if self._call_t0 is not None else 0
        self._in_ready = True
        self._exported = []
        try:
            if self._user_ready is not None:
                self._user_ready(self)
        except BaseException as exc:
            # Raised on, as torch does; the cycle still ends here: its active
            # steps are its own (they must not go to the next trace), and
            # its report says what happened.
            self._cycle += 1
            self._take_active()
            self.reports.append(self._error_report(f"on_trace_ready raised {type(exc).__name__}: {exc}"))
            self._shed_old_operators()
            raise
        finally:
            self._in_ready = False
        user_ns = time.perf_counter_ns() - t0
        self._cycle += 1
        raw = next((p for p in self._exported if os.path.exists(p)), None)
        if self._kept is not None and os.path.isfile(self._kept):
            os.unlink(self._kept)  # opskew's own copy of the previous cycle, in its own folder
        self._kept = None
        own0 = self._own_ns
        this_cycle = self._take_active()
        if self._ref_pending:
            self._ref_collect()
        try:
            if raw is None and self._exported:
                raise RuntimeError(f"the trace on_trace_ready exported ({self._exported[0]}) is no longer there "
                                   "(moved or removed by the handler?), and torch saves a trace once: this cycle "
                                   "cannot be analysed")
            if raw is None:
                # Kineto saves a trace once: opskew's export into its own
                # temporary folder takes that save, so a later
                # export_chrome_trace(path) copies it from there.
                if self._tmpdir is None:
                    # Removed when the profiler goes (or at exit): a later
                    # export_chrome_trace copies from it. Not a
                    # TemporaryDirectory, whose implicit cleanup warns
                    # (ResourceWarning, an error under python -W error).
                    self._tmpdir = tempfile.mkdtemp(prefix="opskew-profile-")
                    weakref.finalize(self, shutil.rmtree, self._tmpdir, ignore_errors=True)
                self._kept = os.path.join(self._tmpdir, f"cycle{self._cycle}.json")
                self.prof.export_chrome_trace(self._kept)
            rep = self._analyse(raw or self._kept, raw, stop_ns, user_ns, this_cycle)
        except Exception as exc:  # noqa: BLE001 - opskew's failure must not stop the user's training
            rep = self._error_report(f"{type(exc).__name__}: {exc}", raw)
        # opskew's own time in this step() call: its export (when the user's
        # handler made none), the counting pass, W_py's measurement, the
        # per-operator verdict and the corrected trace. Not in any step.
        rep["opskew_ns"] = time.perf_counter_ns() - t0 - user_ns
        rep["w_py_measure_ns"] = self._own_ns - own0
        self.reports.append(rep)
        self._claim(rep)
        self._shed_old_operators()
        self._say(render(rep))
        self._ready_ns = time.perf_counter_ns() - t0

    def _error_report(self, error: str, raw: str | None = None) -> dict:
        """The report of a cycle that has no analysis: why, and what is known."""
        return {"cycle": self._cycle, "rank": self.rank, "world_size": self.world_size, "raw_trace": raw,
                "corrected_trace": None, "error": error, "steps": self.step_counts(),
                "step_ranges": dict(self.step_ranges or {}) or None}

    def _claim(self, rep: dict):
        """`rep`'s raw trace is now at its path: an earlier cycle's report
        naming the same file (a handler that exports to one name every
        cycle) no longer describes it, and stop() must not correct that file
        again as the earlier cycle's."""
        raw = rep.get("raw_trace")
        if not raw:
            return
        # The reports stop() may correct again, at most: O(1) a cycle.
        for r in self.reports[-MAX_RECORRECT - 1:]:
            if r is not rep and r.get("raw_trace") == raw:
                r["raw_trace"] = r["corrected_trace"] = None
                r["overwritten_by_cycle"] = rep["cycle"]

    def _shed_old_operators(self):
        """A report older than the last KEEP_CYCLES keeps its per-operator
        summary and marks, not its table of every operator (its corrected
        trace carries that): memory stays bounded however long the run."""
        upto = len(self.reports) - KEEP_CYCLES
        for r in self.reports[self._shed_upto:max(upto, 0)]:
            ops = r.get("operators")
            if isinstance(ops, dict) and "ops" in ops:
                ops.pop("ops")
                ops["ops_dropped"] = "older than the last %d cycles: see the cycle's corrected trace" % KEEP_CYCLES
        self._shed_upto = max(self._shed_upto, upto)

    def _count(self, trace: str) -> dict:
        """Operator and Python events inside each ProfilerStep#N of the trace,
        from the C correction's pass at W = 0 (its per-name descendants), with
        those of other threads it waited for (a CUDA backward runs on the
        autograd engine's device thread: the C correction's cross-thread rule,
        on where the trace holds GPU activity)."""
        from opskew.analyze.tracefile import correct

        res = correct(trace, 0.0, 0.0, waits=self._waits)
        per_step = {}
        for o in res["ops"]:
            m = _STEP_NAME.match(o["name"])
            if m and o["calls"] == 1:
                per_step[int(m.group(1))] = (o["descendants"] + o.get("waited_descendants", 0),
                                             o["py_descendants"] + o.get("waited_py_descendants", 0))
        st = res["stats"]
        # The leaves, for their own delta (_op_deltas): operators and
        # record_function ranges with no operator inside (under with_stack
        # a range may hold Python events, priced at W_py there).
        leaves = {o["name"]: (o["calls"], o["reported_total_ns"], o["py_descendants"]) for o in res["ops"]
                  if o["descendants"] == 0 and not o["python"] and o["calls"] >= REF_MIN_CALLS
                  and o.get("category") in ("cpu_op", "user_annotation") and not _STEP_NAME.match(o["name"])}
        return {"per_step": per_step, "op_events": st["corrected_events"] - st["py_events"],
                "py_events": st["py_events"], "leaves": leaves}

    def _take_active(self) -> list:
        """The active steps since the last trace, tagged as this cycle's: they
        belong to it even if its export or analysis fails or its session was
        lost, and must not leak into the next cycle."""
        this_cycle = [s for s in self.steps if s["phase"] == "active" and s["step"] not in self._events
                      and s.get("cycle") is None and not s.get("partial")]
        for s in this_cycle:
            s["cycle"] = self._cycle
        return this_cycle

    def _analyse(self, trace: str, raw: str | None, stop_ns: int, user_ns: int, this_cycle: list) -> dict:
        counts = self._count(trace)
        counted_per_step = True
        found = [s for s in this_cycle if s["step"] in counts["per_step"]]
        # Every range's events, the step an exception cut short included (its
        # operators are in the trace's total too).
        held = sum(v[0] for v in counts["per_step"].values())
        straddle = bool(found) and held < 0.5 * counts["op_events"]
        if straddle:
            # Ranges that hold less than half of the trace's operators: step()
            # was called inside another range (a record_function around each
            # iteration), so each ProfilerStep#N opens in one iteration and
            # closes in the next, and nesting puts the operators elsewhere
            # (the ranges keep only what runs after step() in its range).
            found = []
        if found:
            # Steps of an earlier cycle whose analysis failed are not in this trace.
            this_cycle = found
            for s in this_cycle:
                self._events[s["step"]] = counts["per_step"][s["step"]]
        elif this_cycle:
            # No ProfilerStep#N annotations for these steps: totals over steps.
            counted_per_step = False
            n = len(this_cycle)
            for s in this_cycle:
                self._events[s["step"]] = (counts["op_events"] / n, counts["py_events"] / n)
        self._forget_old()
        w, notes, detail = self._estimate()
        if straddle:
            notes.append(f"the ProfilerStep#N ranges hold {held} of the trace's {counts['op_events']} operator "
                         "events: step() was called inside another range (a record_function around each "
                         "iteration?), so the ranges straddle the iterations; events per step are the trace's "
                         "totals divided by its active steps")
        return self._report(trace, raw, stop_ns, user_ns, counts, this_cycle, counted_per_step, w, notes, detail)

    def _forget_old(self):
        """Keeps the steps of the last KEEP_CYCLES traced cycles and the wait
        and warmup steps before the oldest of them (its baseline); the steps
        before are counted, not kept, with their event counts and step()
        records. The first kept block then follows a trace, and its first
        POST_TRACE steps stay cold (_estimate)."""
        oldest = self._cycle - KEEP_CYCLES + 1
        cut = next((i for i, s in enumerate(self.steps)
                    if s["phase"] == "active" and (s.get("cycle") or 0) >= oldest), None)
        if oldest <= 1 or cut is None:
            return
        while cut > 0 and self.steps[cut - 1]["phase"] != "active":
            cut -= 1
        if cut == 0:
            return
        for s in self.steps[:cut]:
            if not s.get("partial"):
                self._dropped_old[s["phase"]] += 1
            self._events.pop(s["step"], None)
        del self.steps[:cut]
        self._block_start = max(self._block_start - cut, 0)
        first = self.steps[0]["step"]
        self.step_calls = [c for c in self.step_calls if c["after_step"] >= first]
        self._forgot = True

    # ------------------------------------------------------------ estimation
    def _blocks(self):
        """Contiguous runs of steps of one phase, in order: [(phase, [steps])]."""
        out = []
        for s in self.steps:
            if s.get("partial"):
                continue
            if out and out[-1][0] == s["phase"]:
                out[-1][1].append(s)
            else:
                out.append((s["phase"], [s]))
        return out

    def _estimate(self):
        """W per operator event from every active step whose trace was read
        (of the last KEEP_CYCLES cycles: _forget_old), each paired with one warm wait step of its own, the nearest in time
        not yet taken (the wait block before its cycle first, then the one
        after it, when it has run). Each wait step serves one pair at most,
        so the pairs are independent and the sign test's interval for the
        median of their differences is exact, as in `check`. The first
        active step of a cycle is measured apart (cold) and left out when the
        cycle has others. Returns (W or None, notes, detail)."""
        blocks = self._blocks()
        w_py = self._w_py()
        wp = max(w_py["median"], 0.0) if w_py else 0.0
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
        cold_ids = set() if self._forgot else {id(s) for s in self.steps[:1]}
        # Steps under opskew's tracer (the leaf reference) are no baseline.
        cold_ids.update(id(s) for s in self.steps if s.get("ref"))
        post_trace = []
        unsettled = set()  # wait steps past the cold ones but within SETTLE of a trace
        for k, (phase, steps) in enumerate(blocks):
            if phase == "wait" and (blocks[k - 1][0] == "active" if k > 0 else self._forgot):
                skip = min(POST_TRACE, len(steps))
                cold_ids.update(id(s) for s in steps[:skip])
                unsettled.update(id(s) for s in steps[skip:SETTLE])
                warm = [s["ns"] for s in steps[skip:skip + NEAR] if not s.get("ref")]
                if warm:
                    rest = _median(warm)
                    post_trace.append([s["ns"] - rest for s in steps[:skip]])
        used = set()
        pair_steps = []  # (active step, wait step), kept as self._pair_steps
        short = single = near_trace = 0
        for i, (phase, steps) in enumerate(blocks):
            if phase != "active" or not all(s["step"] in self._events for s in steps):
                continue
            # The first active step of a cycle runs cold (the profiler's first
            # recorded step): never paired, even when it is the only one.
            rest = steps[1:]
            if rest:
                cold.append(steps[0]["ns"] - _median([s["ns"] for s in rest]))
            else:
                single += 1
            position = {id(s): k for k, s in enumerate(steps)}
            active = [s for s in rest if self._events[s["step"]][0] > 0]
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
                ev, py = self._events[a["step"]]
                # The profiler's cost per event falls over a cycle's first
                # active steps (docs/profile.md, "W by position"): each
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
                base = _median([b["ns"] for b in free])
                for k in (i - 1,):
                    if 0 <= k < len(blocks) and blocks[k][0] == "warmup":
                        warm_extra.extend(s["ns"] - base for s in blocks[k][1])
        if short:
            notes.append(f"{short} active step(s) had no warm wait step left to pair with (each wait step "
                         f"serves one pair; the first {POST_TRACE} after a trace are cold): wait >= "
                         f"{POST_TRACE + NEAR} pairs every active step, wait >= {WAIT_ADVICE} each with a settled "
                         "wait step")
        if near_trace:
            notes.append(f"{near_trace} of {len(act_s)} pairs took a wait step within {SETTLE} steps of a trace, "
                         "whose after-effect makes those steps run slower (docs/profile.md, \"Wait steps under a "
                         f"live profiler\"): W may be low by that; wait >= {WAIT_ADVICE} pairs each active step with a "
                         "later one")
        if single and not act_s:
            notes.append(f"{single} cycle(s) had a single active step: the first active step of a cycle runs "
                         "cold (it paid 3x the warm steps' W per event on a small step, docs/profile.md) and is "
                         "not paired; use active >= 2 for an in-run W")
        detail = {"pairs": len(act_s), "unpaired_active_steps": short, "single_active_cycles": single,
                  "pairs_near_trace": near_trace,
                  "cold_first_active_extra_ns": _median(cold), "cold_first_active_cycles": len(cold),
                  "w_by_position": [{"position": k, "w_ns": _median(v), "pairs": len(v)}
                                    for k, v in sorted(by_pos.items())],
                  "warmup_extra_per_step_ns": _median(warm_extra),
                  "post_trace_wait_extra_ns": [_median([p[j] for p in post_trace if len(p) > j])
                                               for j in range(POST_TRACE)] if post_trace else None,
                  "baseline_step_ns": _median([b * 1e9 for b in base_s]) if base_s else None,
                  "active_step_ns": _median([a * 1e9 for a in raw_act]) if raw_act else None,
                  "events_per_active_step": _median(events) if events else None}
        self._pair_steps = pair_steps
        if not act_s:
            return None, notes, detail
        w = per_event_diff(base_s, act_s, events)
        w["ci_method"] = ("sign test over independent pairs (each active step and a wait step of its own, "
                          "the nearest in time), as check pairs its rounds (docs/profile.md)")
        # The in-window slowdown the user sees: the whole step, Python
        # tracer's cost included.
        detail["inflation"] = _median([a / b for a, b in zip(raw_act, base_s)])
        # The step's true time, by opskew's own clock: each paired active
        # step less W per operator event (W_py per Python event is already
        # out of act_s). It leaves out what the trace's ProfilerStep#N range
        # holds besides the step (the profiler's own step() work; see
        # docs/profile.md), and its CI follows from W's.
        def step_at(w_ns):
            return _median([a * 1e9 - max(w_ns, 0.0) * e for a, e in zip(act_s, events)])

        detail["corrected_step_ns"] = step_at(w["median"])
        # The same at the ends of W's 95% CI: the uncertainty W carries into
        # the step, which grows with the step's share of instrument time (a
        # step that is 2/3 instrument moves 2% for each 1% of W).
        ci = w.get("ci95") if w.get("ci_reaches_95") else None
        detail["corrected_step_w_ci_ns"] = [step_at(ci[1]), step_at(ci[0])] if ci else None
        detail["w_own_ns"] = self._w_own(cpu_base, cpu_act, events)
        detail["w_by_cycle"] = _cycle_factors(by_cycle, detail["w_by_position"], w["median"])
        return w, notes, detail

    def _w_own(self, cpu_base, cpu_act, events):
        """W_own: W from the same pairs by the calling thread's CPU time
        instead of the clock: the instrument's work per event. It leaves out
        the time the step slept, such as
        a rank's wait in a collective for slower ranks (whose own costs its
        W by the clock then carries): the rank's own cost per event, for the
        cross-rank correction (docs/multirank.md). With CUDA, the step
        boundaries' synchronize may spin on the CPU: None then. None outside
        a torchrun job too, where nothing uses it: it is not measured there
        (_cpu_clock)."""
        if self._cuda or len(cpu_act) != len(events) or not cpu_act:
            return None
        w = per_event_diff(cpu_base, cpu_act, events)
        return {"median": w["median"], "ci95": w["ci95"] if w["ci_reaches_95"] else None,
                "ci_coverage": w["ci_coverage"], "measure": "the calling thread's CPU time (time.thread_time_ns)"}

    def _w_py(self):
        """Under with_stack, W_py per Python event and delta_py: measured once
        in this process on empty Python calls at the first trace (the
        profiler's cycle is over then), else a stored calibration's, else
        None. A dict with median, ci95, delta_py_ns, source."""
        if not self._options["with_stack"]:
            return None
        if self._w_py_value is None:
            self._w_py_value = (self._measure_w_py() if self._measure_py else None) or self._stored_w_py() or {}
        return self._w_py_value or None

    def _bytecode(self):
        """Under with_stack, how much slower this process runs Python
        bytecode under a profile function (opskew.bytecode.measure): once, at
        the first trace, as W_py. None without with_stack, with
        measure_w_py=False, or where another profile function was set then."""
        if not self._options["with_stack"] or not self._measure_py:
            return None
        if self._bytecode_value is None:
            from opskew.measure.bytecode import measured

            t0 = time.perf_counter_ns()
            try:
                self._bytecode_value = (measured(),)
            finally:
                self._own_ns += time.perf_counter_ns() - t0
        return self._bytecode_value[0]

    def _stored_w_py(self):
        cal = self._stored()
        c = (cal or {}).get("w_py_ns")
        if not c:
            return None
        return {"median": c["median"], "ci95": list(c.get("ci95") or [c["median"], c["median"]]),
                "delta_py_ns": ((cal.get("delta_py_ns") or {}).get("median") or 0.0),
                "source": f"stored calibration {cal.get('_path', '')}"}

    def _measure_w_py(self):
        """W_py from paired rounds of an empty Python function, bare and under
        this profiler configuration (calibrate's method, calibration.
        python_call_rounds), in this process: about a second, once."""
        from opskew.calibration.store import python_call_rounds, python_event_constants
        from opskew.errors import OpskewError

        calls, iters = 200, 5
        opts = {k: v for k, v in self._options.items() if v}
        t0 = time.perf_counter_ns()
        try:
            rounds, _ = python_call_rounds("cuda" if self._cuda else "cpu", {"this": opts}, calls=calls,
                                           trials=MIN_PAIRS + 3, iters=iters, warmup_s=0.05)
            w, delta = python_event_constants(rounds, "this", calls * iters)
        except (OpskewError, RuntimeError) as exc:
            self._w_py_error = f"{type(exc).__name__}: {exc}"
            return None
        finally:
            self._own_ns += time.perf_counter_ns() - t0
        if not w["ci_reaches_95"] or w["median"] < 0:
            self._w_py_error = f"the measurement was too noisy (W_py {w['median']:.0f} ns, {w['n']} rounds)"
            return None
        return {"median": w["median"], "ci95": w["ci95"], "delta_py_ns": delta["median"],
                "source": f"measured in this process on {calls * iters} empty Python calls per round, "
                          f"{w['n']} paired rounds ({(time.perf_counter_ns() - t0) / 1e9:.1f} s)"}

    def _stored(self):
        """The stored calibration of this configuration, looked up once per
        profiler: the lookup reads every stored calibration and the CPU's
        model (about 0.2 ms with 3 stored), and ran 2 to 3 times a cycle
        between two bodies, where opskew's own time makes the next wait steps slower
        (docs/profile.md). One run keeps one calibration's delta, even if
        another is stored while it runs."""
        if self._stored_cal is None:
            from opskew.calibration.store import config_name, find_for_threads

            cal, self._stored_note = find_for_threads("torch.profiler", config_name(self._options),
                                                      self._torch.__version__, "cuda" if self._cuda else "cpu",
                                                      self._torch.get_num_threads())
            self._stored_cal = (cal,)
        return self._stored_cal[0]

    def _delta_range(self) -> list | None:
        """delta's spread over operators in the stored calibration (its leaf
        panel), which the verdict's intervals carry; None without one."""
        from opskew.calibration.store import delta_range

        return delta_range(self._stored())

    def _delta(self, w_median: float, notes: list) -> float:
        """delta (the instrument's time inside each operator's own event)
        from the stored calibration, clamped into [0, W]; with none stored,
        0, and `notes` says what that leaves in the leaves."""
        cal = self._stored()
        if self._stored_note:
            notes.append(self._stored_note)
        if cal is None:
            notes.append("no stored calibration of this configuration: delta, the instrument's time inside each "
                         "operator's own event, is taken as 0, so every operator's corrected time still holds it "
                         "(tens to hundreds of ns a call; docs/correct.md); `opskew calibrate --config "
                         f"{','.join(k for k, v in self._options.items() if v) or 'minimal'}` once on this machine "
                         "measures it")
            return 0.0
        return min(max(cal["delta_ns"]["median"], 0.0), max(w_median, 0.0))

    def _advice(self, pairs: int, has_wait: bool, single: int = 0) -> str:
        sched = "schedule=" + schedule_call(ADVISED_SCHEDULE)
        if not self._has_schedule:
            return ("no schedule: every step is active, so there is no uninstrumented step to pair with; "
                    f"pass {sched} or more")
        if not has_wait:
            return ("the schedule has no wait steps (wait=0 and no steps outside the cycles): "
                    f"set wait >= {WAIT_ADVICE} so each active step has an uninstrumented step to pair with")
        if single and not pairs:
            return ("each cycle so far has a single active step, the cold first one, which is never paired: "
                    f"use active >= 2, as in {sched}")
        need = MIN_PAIRS - pairs
        return (f"{pairs} active step(s) paired so far; a 95% CI needs {MIN_PAIRS}: raise `active` or `repeat` "
                f"by enough for {need} more, with wait >= {WAIT_ADVICE} (each wait step serves one pair, the "
                f"first {POST_TRACE} after a trace are cold, and the first active step of a cycle is not paired)")

    # ---------------------------------------------------------------- report
    def _cold_step(self, this_cycle: list) -> dict | None:
        """The cycle's first active step (cold: _estimate never pairs it),
        whose events the correction prices higher (_spans): its range's name
        and its events."""
        first = min(this_cycle, key=lambda s: s["step"], default=None)
        if first is None or first["step"] not in self._events:
            return None
        ev, py = self._events[first["step"]]
        return {"name": f"ProfilerStep#{first['step']}", "op_events": ev, "py_events": py,
                "cycle_first_step": first["step"]}

    def _position_steps(self, this_cycle: list) -> list:
        """The cycle's other active steps, each with its position in the
        cycle (1 on), which _spans prices by (w_by_position)."""
        out = []
        steps = sorted(this_cycle, key=lambda s: s["step"])
        for k, s in enumerate(steps[1:], 1):
            if s["step"] in self._events:
                ev, py = self._events[s["step"]]
                out.append({"name": f"ProfilerStep#{s['step']}", "position": k, "op_events": ev, "py_events": py,
                            "cycle_first_step": steps[0]["step"]})
        return out

    def _report(self, trace, raw, stop_ns, user_ns, counts, this_cycle, counted_per_step, w, notes, detail):
        has_wait = any(s["phase"] == "wait" for s in self.steps)
        rep = {"cycle": self._cycle, "rank": self.rank, "world_size": self.world_size,
               "raw_trace": raw, "corrected_trace": None,
               "steps": self.step_counts(),
               "events": {"op_events": counts["op_events"], "py_events": counts["py_events"],
                          "per_step": counted_per_step,
                          "how": ("operators inside each ProfilerStep#N annotation" if counted_per_step else
                                  "the trace's totals divided by its active steps (no ProfilerStep#N "
                                  "annotations for them)")},
               "step_ranges": dict(self.step_ranges or {}) or None,
               "trace_step_stretch": None,  # set with the corrected trace: _trace_steps
               # Each ProfilerStep#N's body as opskew timed it (from the end of one
               # step() to the start of the next): the C correction takes the
               # range's time beyond it (the parts of step() inside the range) out
               # as the range's own instrument time (docs/profile.md).
               "step_spans_ns": ({f"ProfilerStep#{s['step']}": s["ns"] for s in this_cycle}
                                 if counted_per_step else None),
               "cold_step": self._cold_step(this_cycle) if counted_per_step else None,
               "position_steps": self._position_steps(this_cycle) if counted_per_step else None,
               **detail}
        # This cycle's own level only (the run's are in prof.final).
        first = min((s["step"] for s in this_cycle), default=None)
        rep["w_by_cycle"] = [c for c in detail.get("w_by_cycle") or [] if c["first_step"] == first]
        source = "in-run"
        wv = None
        if w is not None and w["ci_reaches_95"]:
            wv = {"median": w["median"], "ci95": w["ci95"], "ci_coverage": w["ci_coverage"],
                  "ci_method": w["ci_method"]}
        else:
            rep["advice"] = self._advice(detail["pairs"], has_wait, detail.get("single_active_cycles", 0))
            cal = self._stored()
            if cal is not None:
                source = f"stored calibration {cal.get('_path', '')}"
                c = cal["w_ns"]
                wv = {"median": c["median"], "ci95": list(c.get("ci95") or [c["median"], c["median"]]),
                      "ci_coverage": c.get("ci_coverage", 0.95)}
                rep["fallback"] = (f"W from a {source}: its CI is that of its own calibration run, not of "
                                   "this workload; a stored W can be off by 10 to 50% on a drifting machine "
                                   "(docs/correct-validation.md)")
            elif w is not None:
                source = "in-run, too few pairs"
                rep["fallback"] = ("no stored calibration: W is this run's median with too few pairs for a "
                                   "95% CI; the verdict is not made and the trace is not corrected "
                                   "(`opskew calibrate` stores one)")
            else:
                rep["fallback"] = ("no stored calibration and no active step paired with a wait step: W is "
                                   "unknown, the verdict is not made and the trace is not corrected "
                                   "(`opskew calibrate` stores one)")
        rep["w_source"] = source
        if w is not None and w["ci_reaches_95"] and w["ci95"][1] < 0:
            # No instrument makes a step faster: the machine's speed changed
            # between the paired steps (a burst of slow wait steps, say).
            notes.append("W's 95% interval lies below 0: the active steps ran faster than the wait steps paired "
                         "with them, which no instrument does; the machine's speed changed during the run. The "
                         "trace is corrected with W = 0; rerun for a W that measures the profiler")
        if (self.step_ranges or {}).get("route") == "record_function":
            notes.append(f"ProfilerStep#N ranges opened with torch's record_function: {self.step_ranges['why']}, "
                         "tens of us a step that no W takes out of the corrected trace (corrected_step_ns "
                         "carries none of it)")
        rep["notes"] = sorted(set(notes))
        rep["w_ns"] = wv if wv is not None else (
            {"median": w["median"], "ci95": None, "ci_coverage": None} if w is not None else None)
        w_py = self._w_py()
        rep["w_py_ns"] = w_py
        rep["bytecode"] = self._bytecode()
        if self._options["with_stack"] and self._measure_py and rep["bytecode"] is None:
            rep["notes"] = sorted(set(rep["notes"]) | {
                "the interpreter's slowdown under with_stack's profile function was not measured (another "
                "profile function was set at the first trace: cProfile, a debugger): the intervals of names whose "
                "self time runs Python code are not widened for it (docs/profile.md)"})
        if self._options["with_stack"]:
            rep["w_py_note"] = (
                f"W_py {w_py['source']}; taken out of each active step before W and used in the correction"
                if w_py else "W_py could not be measured here ({}) and none is stored: W per operator event "
                "carries the Python events' cost too".format(self._w_py_error or "measure_w_py=False"))
        # Share of the active steps' time: instrument (W x events), and the
        # profiler's stop and export (the step() call that produced this trace).
        act = [s for s in this_cycle]
        act_ns = sum(s["ns"] for s in act)
        rep["stop_ns"] = stop_ns  # profiler stop and post-processing, inside step()/stop()
        rep["on_trace_ready_ns"] = user_ns  # the user's handler (its export), inside step()/stop()
        if wv is not None and act_ns > 0:
            wpm = max(w_py["median"], 0.0) if w_py else 0.0
            inst = sum(max(wv["median"], 0.0) * self._events[s["step"]][0] + wpm * self._events[s["step"]][1]
                       for s in act)  # operator events at W, Python events at W_py
            rep["share_of_active_time"] = {"instrument": inst / act_ns, "stop": stop_ns / act_ns,
                                           "on_trace_ready": user_ns / act_ns}
            if inst > act_ns:
                rep["notes"] = sorted(set(rep["notes"]) | {
                    "W x events is more than the active steps took: the wait steps paired with them ran "
                    "faster than the machine did during the active steps (its speed changed); rerun"})
        significant = bool(wv is not None and w is not None and w["ci_reaches_95"] and w["ci95"][0] > 0)
        infl = detail.get("inflation")
        rep["verdict"] = {
            "skewed": bool(significant and infl is not None and infl - 1 >= self._threshold),
            "significant": significant, "enough_pairs": bool(w is not None and w["ci_reaches_95"]),
            "threshold": self._threshold,
            "test": (f"sign test over {w['n']} active steps against their neighbouring wait steps: "
                     f"{w['n_positive']} slower, p = {w['sign_p']:.3g}" if w is not None else
                     "no active step could be paired with a wait step")}
        self._wv = None
        if raw is None and self._corrected_dir is not None:
            # The raw trace is kept whether or not W is known.
            os.makedirs(self._corrected_dir, exist_ok=True)
            keep = os.path.join(self._corrected_dir, f"{self._stem}-cycle{self._cycle}.json")
            from opskew.output import write_file

            with open(trace, "rb") as f:
                write_file(keep, f.read())
            rep["raw_trace"] = raw = keep
        self._leaf_raw[self._cycle] = counts.get("leaves") or {}
        self._leaf_raw.pop(self._cycle - MAX_RECORRECT, None)
        if wv is not None:
            delta = self._delta(wv["median"], rep["notes"])
            out = corrected_path(raw) if raw is not None else None
            rep["corrected_trace"] = out
            rep["delta_ns"] = delta
            rep["op_deltas_ns"], rep["leaf_delta"] = self._op_deltas(counts.get("leaves"), wv["median"])
            if rep["op_deltas_ns"]:
                rep["notes"] = _leaves_own(rep["notes"])
            self._wv = wv
            spans = _spans(rep, wv, w_py, rep)
            v = _per_operator_to(trace, wv, delta, self._threshold, out, _metadata(rep), w_py, self._waits, spans,
                                 rep.get("bytecode"), self._delta_range(), rep["op_deltas_ns"])
            rep["corrected_trace"] = out
            rep["delta_ns"] = delta
            rep["operators"] = _operators(v)
            _trace_steps(rep, v)
        return rep


STRETCH_NOTE = 0.02  # the share of a step past which the report says its range is written stretched
_STRETCH_PREFIX = "the corrected trace's ProfilerStep#N ranges are "


def _trace_steps(rep: dict, v: dict):
    """How much longer the corrected trace writes the ProfilerStep#N ranges
    than the model's figure (their events stretched: W - delta did not fit
    between a step's events; docs/correct.md), as the median over the
    trace's steps, into rep["trace_step_stretch"], with a note past
    STRETCH_NOTE of a step. Found in the pass that writes the trace, so that
    trace's own metadata lacks it; the report has it."""
    rows = [o for o in v["ops"] if _STEP_NAME.match(o["name"]) and o["calls"] == 1]
    notes = [n for n in rep.get("notes") or [] if not n.startswith(_STRETCH_PREFIX)]
    if not rows:
        rep["trace_step_stretch"] = None
        rep["notes"] = notes
        return
    ns = _median([o["stretched_ns"] for o in rows])
    share = _median([o["stretched_ns"] / o["corrected_total_ns"]["median"]
                     for o in rows if o["corrected_total_ns"]["median"] > 0])
    rep["trace_step_stretch"] = {"median_ns": ns, "share": share, "steps": len(rows)}
    if share is not None and share > STRETCH_NOTE:
        notes.append(f"{_STRETCH_PREFIX}{ns / 1e3:.1f} us ({share:.0%}) longer than the model's figure (median "
                     "over its steps): W - delta does not fit between the events of a step, which the trace "
                     "writes stretched (docs/correct.md); corrected_step_ns and the per-operator table are the "
                     "model's")
    rep["notes"] = sorted(set(notes))


def _operators(v: dict) -> dict:
    """The report's per-operator part, from opskew.analyze.verdict.per_operator."""
    return {"ops": v["ops"], "summary": v["summary"], "bytecode_rows": v.get("bytecode_rows", 0),
            "marks": {m: sum(1 for o in v["ops"] if o["mark"] == m) for m in ("believable", "inflated", "unknowable")}}


COLD_MIN_CYCLES = 3  # cycles whose cold first step was measured, before its extra is priced (_spans)
# The largest scale on W the cold first step is priced at (_spans): in 52 of
# the 54 rows of the validation's runs P, Q and R (docs/profile-validation.md)
# the scale came to at most 3.6 (4.1 and 7.3 in two `minimal` rows); an
# extra many times the instrument time W gives the step's events (39x seen
# under a machine's full load) is a lump (a slow spell, a burst of
# allocation), not a cost per event, and is left in the step.
COLD_MAX_SCALE = 4.0


def cold_w_scale(extra, cold: dict, w_ns: float, w_py_ns: float, factor: float = 1.0) -> float:
    """The W scale that prices a cycle's cold first step (its report's
    cold_step: op_events, py_events) at `extra` ns over the instrument time
    W and W_py give its events, its operator events at `factor` x W (its
    cycle's own level, _cycle_factors): (factor x W x ops + W_py x py +
    extra) / (W x ops + W_py x py); 1.0 without that time. An extra of 0 or
    less adds nothing. The guards on using it are the callers'."""
    ops, py = cold.get("op_events") or 0, cold.get("py_events") or 0
    base = w_ns * ops + w_py_ns * py
    if not base > 0:
        return 1.0
    more = extra if isinstance(extra, (int, float)) and extra > 0 else 0.0
    return (factor * w_ns * ops + w_py_ns * py + more) / base


def _spans(rep: dict, wv: dict, w_py: dict | None, est: dict) -> dict | None:
    """What the C correction takes per ProfilerStep#N (docs/profile.md, "The
    first active step"): each active step's body (rep["step_spans_ns"]), and
    for the cycle's first active step, which runs cold, a scale on W and W_py
    for its events: 1 + its extra (est's cold_first_active_extra_ns, the
    median over cycles of the first active step less the cycle's others) over
    the instrument time W and W_py give its events. Priced from
    COLD_MIN_CYCLES cycles on, when the extra is > 0, W's 95% CI lies above 0
    (else W x events is no base to price it on) and the scale comes to at
    most COLD_MAX_SCALE; what was used, and why not, goes into
    rep["cold_step"]. Each of the cycle's other active steps is priced at
    the W of the pairs at its position in the cycle (est's w_by_position,
    over W: the profiler's cost per event falls over a cycle's first steps),
    into rep["position_steps"]: _price_position."""
    spans = dict(rep.get("step_spans_ns") or {})
    levels = {c["first_step"]: c for c in est.get("w_by_cycle") or []}
    cold = rep.get("cold_step")
    if cold is not None:
        _price(spans, cold, est.get("cold_first_active_extra_ns"), est.get("cold_first_active_cycles") or 0, wv,
               w_py, levels.get(cold.get("cycle_first_step")))
    figs = {p["position"]: p for p in (est.get("w_by_position") or [])}
    for st in rep.get("position_steps") or []:
        _price_position(spans, st, figs.get(st["position"]), wv, w_py, levels.get(st.get("cycle_first_step")))
    return spans or None


def _cycle_factors(pairs: list, by_position: list, w_ns: float) -> list:
    """Each cycle's own level (docs/profile.md, "W by cycle"): the ratio
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


def _level(level: dict | None) -> float:
    """The factor on W a cycle's own level gives (1.0 where it does not
    differ from the run's): _cycle_factors."""
    f = (level or {}).get("factor")
    ok = (level or {}).get("differs") and isinstance(f, (int, float)) and 1 / COLD_MAX_SCALE <= f <= COLD_MAX_SCALE
    return float(f) if ok else 1.0


def _level_said(level: dict | None) -> str:
    f = _level(level)
    if f == 1.0:
        return ""
    return (f", and x {f:.2f} for its cycle's own level (all {level['pairs']} of the cycle's pairs "
            f"{'above' if f > 1 else 'below'} their position's W)")


def _price_position(spans: dict, st: dict, fig: dict | None, wv: dict, w_py: dict | None,
                    level: dict | None = None):
    """_spans for a paired active step at position k of its cycle: its
    operator events at w_k instead of W, w_k the median of the run's pairs
    at that position (docs/profile.md, "W by position"), times its cycle's
    own level where that differs from the run's (`level`: _cycle_factors),
    its Python events at W_py still (W_py is measured apart and taken out of
    the pairs first): one scale on both, (w_k x f x ops + W_py x py) /
    (W x ops + W_py x py). w_k from COLD_MIN_CYCLES pairs on and where > 0
    (else W); priced where W's 95% CI lies above 0 and the scale lies within
    [1 / COLD_MAX_SCALE, COLD_MAX_SCALE]; else at W, and `why` says so."""
    wm = max((wv or {}).get("median") or 0.0, 0.0)
    wpm = max((w_py or {}).get("median") or 0.0, 0.0)
    ci = (wv or {}).get("ci95") or [0.0, 0.0]
    n = (fig or {}).get("pairs") or 0
    wk = (fig or {}).get("w_ns")
    f = _level(level)
    ops, py = st.get("op_events") or 0, st.get("py_events") or 0
    base = wm * ops + wpm * py
    if n < COLD_MIN_CYCLES:
        at_w = f"{n} pair(s) at this position (it takes {COLD_MIN_CYCLES})"
    elif not (isinstance(wk, (int, float)) and wk > 0):
        at_w = "its position's pairs gave a W of 0 or less"
    else:
        at_w = None
    w_at = wm if at_w else wk
    scale = (w_at * f * ops + wpm * py) / base if wm > 0 and base > 0 else None
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
    where = (f"at W ({at_w})" if at_w else f"at the median of {n} pairs at its position") + _level_said(level)
    _priced(spans, st, scale, why, f"its events priced at {{:.2f}} x W (and W_py): its operator events {where}",
            w_ns=wk, pairs=n, cycle_factor=f)


def _priced(spans: dict, step: dict, scale, why: str | None, said: str, **figures):
    """A priced step's answer: its scale (1.0 where `why` says why not)
    into `step` with `figures` and the reason (`said`, formatted with the
    scale, when priced), and into `spans` beside its body when not 1."""
    scale = scale if why is None else 1.0
    step.update(figures, w_scale=scale, why=why or said.format(scale))
    if scale != 1.0:
        spans[step["name"]] = (spans.get(step["name"], -1.0), scale)


def _price(spans: dict, cold: dict, extra, n: int, wv: dict, w_py: dict | None, level: dict | None = None):
    """_spans for the cycle's cold first active step: its scale into
    `spans` and `cold`, or why not into `cold`. Where its cycle's own level
    differs from the run's (`level`), its operator events pay that too, on
    top of the extra: cold_w_scale."""
    wm = max((wv or {}).get("median") or 0.0, 0.0)
    wpm = max((w_py or {}).get("median") or 0.0, 0.0)
    ci = (wv or {}).get("ci95") or [0.0, 0.0]
    f = _level(level)
    want = cold_w_scale(extra, cold, wm, wpm)
    from opskew.render.units import fmt_ns

    if n < COLD_MIN_CYCLES:
        why = f"priced at W: {n} cycle(s) measured it (it takes {COLD_MIN_CYCLES})"
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
                f"cycle's others (median over {n} cycles)" + _level_said(level))
    else:
        said = f"its events priced at {{:.2f}} x W{_level_said(level)}; its extra {why}"
    # Its cycle's own level, whether or not the extra is priced (while W's
    # CI lies above 0).
    scale = cold_w_scale(extra if why is None else 0.0, cold, wm, wpm, f) if ci[0] > 0 else 1.0
    if not 1 / COLD_MAX_SCALE <= scale <= COLD_MAX_SCALE:
        scale, why = 1.0, f"priced at W: with its cycle's own level it came to {scale:.2f} x W, past {COLD_MAX_SCALE:.0f}x"
    _priced(spans, cold, scale, why if scale == 1.0 else None, said, extra_ns=extra, cycles=n, cycle_factor=f,
            extra_priced=why is None and scale != 1.0)


_NO_DELTA = "is taken as 0, so every operator's corrected time still holds it"


def _leaves_own(notes: list) -> list:
    """`notes` with the note on a missing delta (_delta's) narrowed where
    the leaves took their own (op_deltas): it holds for the others only."""
    return [n.replace(_NO_DELTA, "is taken as 0 for every operator but the leaves (they took their own from "
                      "opskew's tracer: leaf_delta), so the others' corrected times still hold it", 1)
            for n in notes]


def _per_operator_to(trace, w, delta, threshold, out, metadata, w_py=None, waits=-1, spans=None, bytecode=None,
                     delta_range=None, op_deltas=None):
    """opskew.verdict.per_operator writing the corrected trace to `out` (a
    `.gz` name is written gzipped by the C writer); `spans`: the steps'
    bodies by range name (the report's step_spans_ns); `bytecode`: the
    interpreter's slowdown under with_stack (opskew.bytecode.measure);
    `delta_range`: delta's spread over operators (calibration.delta_range);
    `op_deltas`: the leaves' own deltas (profile._op_deltas)."""
    from opskew.analyze.verdict import per_operator

    dp = w_py.get("delta_py_ns", 0.0) if w_py else 0.0
    v = per_operator(trace, w, delta, out=out, threshold=threshold, metadata=metadata, w_py=w_py,
                     delta_py_ns=dp, waits=waits, spans=spans, bytecode=bytecode, delta_range=delta_range,
                     op_deltas=op_deltas)
    return v


def _metadata(rep: dict) -> dict:
    """What goes into the corrected trace's "opskew" metadata: the report
    without the per-operator table (the trace itself carries those)."""
    return {k: v for k, v in rep.items() if k != "operators"}


def render(rep: dict) -> str:
    """The short per-cycle report."""
    from opskew.render.units import fmt_ns

    who = f" rank {rep['rank']}/{rep['world_size']}" if rep.get("rank") is not None else ""
    lines = [f"opskew.profile{who} cycle {rep['cycle']}: {rep['steps']['active']} active, "
             f"{rep['steps']['wait']} wait, {rep['steps']['warmup']} warmup step(s) so far"]
    if rep.get("inflation") is not None:
        lines.append(f"  in-window inflation {100 * (rep['inflation'] - 1):+.1f}% "
                     f"({rep['pairs']} active step(s) against their wait steps)")
    if rep.get("corrected_step_ns") is not None and rep.get("w_ns") and rep["w_ns"].get("ci95"):
        band = rep.get("corrected_step_w_ci_ns")
        band = f" [{fmt_ns(band[0])}, {fmt_ns(band[1])} at W's 95% CI]" if band else ""
        lines.append(f"  step: {fmt_ns(rep['active_step_ns'])} profiled, {fmt_ns(rep['corrected_step_ns'])}{band} "
                     f"corrected, {fmt_ns(rep['baseline_step_ns'])} in the wait steps (medians)")
    cold = rep.get("cold_step") or {}
    if (cold.get("extra_ns") or 0) > 0 and (cold.get("cycles") or 0) >= COLD_MIN_CYCLES:
        lines.append(f"  {cold['name']} (the cycle's first active step, cold): {cold['why']}")
    priced = [p for p in rep.get("position_steps") or [] if p.get("w_scale", 1.0) != 1.0]
    if priced:
        lines.append("  active steps priced by position in the cycle (W of their pairs there, over W): "
                     + ", ".join(f"{p['position'] + 1}: {p['w_scale']:.2f}" for p in priced))
    for c in rep.get("w_by_cycle") or []:
        if _level(c) != 1.0:
            lines.append(f"  this cycle's own level: its operator events at {c['factor']:.2f} x their position's W "
                         f"(all {c['pairs']} of its pairs {'above' if c['factor'] > 1 else 'below'} it)")
    w = rep.get("w_ns")
    if w is not None:
        ci = w.get("ci95")
        cis = f" [{fmt_ns(ci[0])}, {fmt_ns(ci[1])}]" if ci else " (no 95% CI)"
        lines.append(f"  W {fmt_ns(w['median'])}{cis} per operator event ({rep['w_source']})")
    wp = rep.get("w_py_ns")
    if wp:
        lines.append(f"  W_py {fmt_ns(wp['median'])} [{fmt_ns(wp['ci95'][0])}, {fmt_ns(wp['ci95'][1])}] per "
                     f"Python event ({wp['source']})")
    elif rep.get("w_py_note"):
        lines.append(f"  note: {rep['w_py_note']}")
    ld = rep.get("leaf_delta")
    if ld and ld.get("names"):
        lo, hi = ld["range_ns"]
        lines.append(f"  leaf delta: own for {ld['names']} of {ld['leaves']} leaf operators, from opskew's tracer on "
                     f"{ld['tracer_steps']} wait steps (median {fmt_ns(ld['median_ns'])}, {fmt_ns(lo)} to "
                     f"{fmt_ns(hi)}); other operators {fmt_ns(rep.get('delta_ns') or 0.0)}")
        below = ld.get("below_tracer") or []
        if below:
            lines.append(f"  faster in the trace than under opskew's tracer on the wait steps, beyond doubt (no "
                         f"instrument cost shortens an event: the profiled steps ran them faster, or the wait steps "
                         f"slower, than they run; their intervals reach the tracer's time): {', '.join(below[:5])}"
                         + (f" and {len(below) - 5} more" if len(below) > 5 else ""))
    elif ld and ld.get("why"):
        lines.append(f"  leaf delta: {fmt_ns(rep.get('delta_ns') or 0.0)} for every operator ({ld['why']})")
    if rep.get("opskew_ns") is not None:
        lines.append(f"  opskew's own time in this step() call: {fmt_ns(rep['opskew_ns'])}"
                     + (f", of which measuring W_py {fmt_ns(rep['w_py_measure_ns'])}" if rep.get("w_py_measure_ns")
                        else "") + " (not in any step)")
    sh = rep.get("share_of_active_time")
    if sh:
        lines.append(f"  against this cycle's active-step time: instrument {100 * sh['instrument']:.1f}% (in the "
                     f"steps); outside them, stop {100 * sh['stop']:.1f}%, on_trace_ready/export "
                     f"{100 * sh['on_trace_ready']:.1f}%")
    if rep.get("error"):
        lines.append(f"  opskew's analysis of this trace failed ({rep['error']}); the training goes on")
        return "\n".join(lines) + "\n"
    v = rep["verdict"]
    from opskew.analyze.verdict import skew_words

    lines.append(f"  verdict: {skew_words(v, v['enough_pairs'])} ({v['test']})")
    if rep.get("operators"):
        m = rep["operators"]["marks"]
        lines.append(f"  operators: {m['believable']} believable, {m['inflated']} inflated, "
                     f"{m['unknowable']} unknowable")
        from opskew.analyze.verdict import bytecode_sentence

        note = bytecode_sentence({"bytecode": rep.get("bytecode"),
                                  "bytecode_rows": rep["operators"].get("bytecode_rows")})
        if note:
            lines.append(f"  {note}")
    if rep.get("corrected_trace"):
        lines.append(f"  corrected trace: {rep['corrected_trace']}")
    for k in ("advice", "fallback"):
        if rep.get(k):
            lines.append(f"  {k}: {rep[k]}")
    for n in rep.get("notes", ()):
        lines.append(f"  note: {n}")
    return "\n".join(lines) + "\n"
