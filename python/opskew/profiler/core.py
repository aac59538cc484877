"""`opskew.profile`: a drop-in for `torch.profiler.profile` that measures its
own overhead in the user's loop and corrects the traces it produces
(docs/profile.md).

It wraps a real `torch.profiler.profile` (`prof.prof`) and is one to code
that inspects it (profiler.dropin): an instance of a subclass of torch's,
torch's signature, torch's attributes assigned through to the wrapped one,
torch's other methods run on it. In addition it times each step's body (from the end of one `step()` call to the
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
import sys
import threading
import time
from functools import partial
from operator import attrgetter

from opskew.profiler.clock import StepClock
from opskew.profiler.cycle import CycleAnalysis, claim, count, error_report, shed_old_operators
from opskew.profiler.dropin import DropIn, options_of, torch_signature
from opskew.profiler.figures import Figures
from opskew.profiler.leafref import REF_FIRST, REF_STEPS, LeafReference
from opskew.profiler.ranges import choose, open_range
from opskew.profiler.reports import corrected_averages, typed
from opskew.profiler.schedule import (UNSET, exit_rest, owns_ranges, phase_of, plain_wait_steps, scheduled, session_gone,
                                      transit)
from opskew.profiler.traces import TraceFiles
from opskew.profiler.traffic import Traffic
from opskew.results.views import lazy
from opskew.results.profile import RunReport, as_printed

render = lazy("profile.render")
render_recorrected = lazy("profile.render_recorrected")

# The `opskew profile` command's step driver in this process (set by its
# bootstrap, _entry/profile_boot.py); None everywhere else.
driver = None


def step() -> None:
    """`opskew.step()`: marks the end of a training step for `opskew profile
    -- python SCRIPT` (docs/profile.md). The first call switches the command
    from the optimizer's steps to these marks. Outside that command it does
    nothing, so a script can keep the call."""
    if driver is not None:
        driver.manual_step()


def rank_of() -> tuple:
    """(rank, world size) of this process in a torch.distributed job started
    by torchrun (its RANK and WORLD_SIZE), or (None, 1) outside one."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ["RANK"]) if world > 1 else None
    except (KeyError, ValueError):
        return None, 1
    return rank, world


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


class _Printer:
    """Where a run's per-cycle reports are printed (report_file), compact
    or `verbose`, each note once per run (`seen`). A stream that fails
    (closed, a broken pipe) must not stop the training: printing stops
    there (`error` says why), and the reports stay in `reports`."""

    def __init__(self, f, verbose: bool):
        self.f, self.verbose, self.seen, self.error = f, verbose, set(), None

    def report(self, rep: dict) -> None:
        self.say(render(rep, self.verbose, self.seen))

    def say(self, text: str) -> None:
        f = self.f
        if f is None:
            return
        try:
            f.write(text)
            flush = getattr(f, "flush", None)
            if flush is not None:
                flush()
        except Exception as exc:  # noqa: BLE001 - the user's loop goes on
            self.f = None
            self.error = f"printing the report failed ({type(exc).__name__}: {exc}); later ones are not printed"


class profile(DropIn):
    """`opskew.profile(...)`: `torch.profiler.profile(...)` with the same
    arguments and methods, plus the skew report (`.report`, a typed result that
    is still a dict; `.reports`, one per trace), `corrected_averages()` and a
    corrected trace next to each raw one it exported. Each instance is a
    `torch.profiler.profile` too (profiler.dropin).

    opskew's own keywords (all optional):
      report_file   where the per-cycle report is printed (default
                    sys.stderr; None prints nothing);
      verbose       print each cycle's every figure (default False: its
                    answer, W, the verdict, and each note once per run);
      corrected_dir where to put raw and corrected traces when the user's
                    on_trace_ready does not export one (default: none is
                    written; the report is still made);
      threshold     the in-window slowdown that counts as skew (0.05);
      measure_w_py  under with_stack, measure W_py in this process at the
                    first trace (about a second, once; default True), else
                    use a stored calibration's; and how much slower Python
                    bytecode runs under the profile function (opskew.bytecode,
                    about 10 ms, once), else widen nothing for it;
      cost_model    "auto" (default): the in-process model of W (about
                    150 ms once) where the run's pairs give none; "always":
                    beside the in-run W too; "off": never (profiler.model);
      leaf_reference
                    record REF_STEPS wait steps after each trace with opskew's
                    own tracer (about 0.2 ms of opskew's time each) and give
                    each leaf operator its own delta from them (default True;
                    CPU only, in a run whose wait is at least REF_WAIT, 21).
    """


    @torch_signature
    def __init__(self, *args, report_file=_STDERR, corrected_dir=None, threshold=0.05, measure_w_py=True,
                 leaf_reference=True, verbose=False, cost_model="auto", **kwargs):
        import torch

        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) \
                or not math.isfinite(threshold) or threshold < 0:
            raise ValueError(f"threshold: a finite number >= 0 (0.05 is 5%), not {threshold!r}")

        self._torch = torch
        self._user_ready = kwargs.pop("on_trace_ready", None)
        # torch's default activities include CUDA where it is available.
        acts = kwargs.get("activities")
        self._cuda = torch.cuda.is_available() and (
            acts is None or any(getattr(a, "name", str(a)).upper() == "CUDA" for a in acts))
        if report_file is not None and not callable(getattr(report_file, "write", None)):
            raise TypeError(f"report_file: a file object with write() or None, not {type(report_file).__name__}"
                            + (" (open the file first)" if isinstance(report_file, (str, os.PathLike)) else ""))
        self._out = _Printer(report_file, bool(verbose))
        self.prof = torch.profiler.profile(*args, on_trace_ready=self._on_ready, **kwargs)
        options = options_of(self.prof)
        self.reports: list = []  # CycleReport
        self._cycle = 0
        self._running = False  # between start() and stop()
        self._stopped = False  # stop() ended a session: a later step() is a no-op
        self._lost = None  # why this cycle's session is gone (another profiler ended it), or None
        self._own_ranges = owns_ranges(self.prof)
        self._none = torch.profiler.ProfilerAction.NONE
        # Wait steps take the short way through step() where torch's step()
        # from a wait step to a wait step does nothing but move the schedule
        # on (plain_wait_steps); _prev_schedule_action exists in newer torch.
        self._quiet_waits = self._own_ranges and plain_wait_steps(torch, self.prof)
        self._prev_action_attr = hasattr(self.prof, "_prev_schedule_action")
        self._range_lib = None  # opskew's native shim, once start() has loaded it (_step_ranges)
        self._monitor = None  # torch's CUPTI monitor module, where torch has one (ranges.NativeRange)
        self.step_ranges = None  # how the ProfilerStep#N ranges are opened: {"route", "why"}
        self._thread = None  # the thread start() ran on: torch's session is that thread's
        # Under torchrun (WORLD_SIZE > 1) each rank measures its own W and
        # names its files by rank, as tensorboard_trace_handler names workers.
        self.rank, self.world_size = rank_of()
        # W_own's clock, the thread's CPU time, only where W_own is used: a
        # rank of a job, on the CPU (under CUDA it means nothing, see
        # stats.pricing.w_own). Each read is a system call, and two of them
        # in every step() made the next body slower
        # (bench/bench_wait_steps.py; docs/profile.md).
        self._clock = StepClock(time.thread_time_ns if self.rank is not None and not self._cuda else None)
        self.name = "opskew-profile" + (f"-rank{self.rank}" if self.rank is not None else "")
        self._files = TraceFiles(self.name, corrected_dir)
        self._figures = Figures(torch, options, self._cuda, measure_w_py, cost_model)
        # The leaf reference (leafref.REF_*): opskew's tracer on some wait steps.
        self._ref = LeafReference(leaf_reference, self._cuda)
        # The correction's cross-thread rule: asked for with CUDA activity (a
        # backward runs on the autograd engine's device thread; asked for, it
        # costs one read fewer than found), else where a trace holds GPU
        # activity.
        self._waits = 1 if self._cuda else -1
        # The optimizer's steps (profiler.traffic): a start()/stop() loop's own W.
        self._traffic = Traffic.installed() if driver is None else None
        self._analysis = CycleAnalysis(self._clock, self._ref, self._figures, self._files, options=options,
                                       threshold=threshold, scheduled=partial(scheduled, self.prof, torch),
                                       waits=self._waits, rank=self.rank, world_size=self.world_size,
                                       traffic=self._traffic)
        self._shed_upto = 0  # reports before this index hold no per-operator table (shed_old_operators)
        self._forwarding = True  # torch's attributes assigned from here on go to self.prof (profiler.dropin)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        exit_rest(self.prof)
        return False

    # ------------------------------------------------------ what it measured
    # (read from the step clock and the cycles' analysis, which keep them)
    steps = property(attrgetter("_clock.steps"),
                     doc="""One record per step body kept: {"step", "phase", "ns"} (StepClock).""")
    step_calls = property(attrgetter("_clock.calls"),
                          doc="""One record per step() call kept: {"after_step", "ns", "on_trace_ready_ns"}.""")
    _events = property(attrgetter("_clock.events"))
    _pair_steps = property(attrgetter("_analysis.pair_steps"))
    @property
    def final(self):
        """The run's W from all its steps, set at stop(): a RunReport (a dict), or None."""
        f = self._analysis.final
        return RunReport(f) if f is not None else None

    print_error = property(attrgetter("_out.error"), doc="Why report_file stopped being printed to, if it did.")

    @property
    def report(self):
        """The latest cycle's skew report, a CycleReport (None before the first trace)."""
        return self.reports[-1] if self.reports else None

    def corrected_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False,
                           cycle=None):
        """key_averages() corrected (the latest cycle's, or `cycle`'s), with trust marks and intervals."""
        return corrected_averages(self, group_by_input_shape, group_by_stack_n, group_by_overload_name, cycle)

    def step_counts(self) -> dict:
        """Whole steps per phase so far, the dropped wait steps included."""
        return self._clock.counts()

    def _estimate(self):
        """W from the kept steps: (W or None, notes, detail)."""
        return self._analysis.estimate()

    def _count(self, trace: str) -> dict:
        """Events inside each ProfilerStep#N of `trace` (cycle.count)."""
        return count(trace, self._waits)

    # ----------------------------------------------------- the step bodies
    def _sync(self):
        """With CUDA, waits for the device at each step boundary: a step's time includes its kernels."""
        if self._cuda and self._torch.cuda.is_initialized():
            self._torch.cuda.synchronize()

    def _step_ranges(self):
        """Chooses how the ProfilerStep#N ranges are opened, once (ranges.choose)."""
        if self.step_ranges is not None:
            return
        self.step_ranges, self._range_lib, self._monitor = choose(self.prof, self._own_ranges, self._torch)

    def _begin_body(self, own: bool):
        c, ref = self._clock, self._ref
        c.phase = phase_of(self.prof)
        c.step = self.prof.step_num
        c.ended = False
        if c.phase == "wait":
            c.wait_pos += 1
        else:
            if c.wait_pos:
                c.last_wait_len, c.wait_pos = c.wait_pos, 0
            if ref.live is not None:  # the wait block ended before the tracer's last step
                ref.end()
        # No range around a wait step: torch.profiler records none, and
        # opening and closing it (a dispatcher call each way) was the largest
        # part of opskew's own work in a wait step's step(), which runs
        # between two bodies (bench/bench_wait_steps.py). Only an instrument
        # outside torch.profiler (emit_nvtx, emit_itt, opskew.trace) sees
        # the difference (docs/profile.md).
        if own and c.phase != "wait":
            open_range(self.prof, "ProfilerStep#" + str(self.prof.step_num), self._range_lib, self._monitor,
                       self.step_ranges)
        elif ref.on and REF_FIRST <= c.wait_pos <= REF_FIRST + REF_STEPS:
            ref.step_begins(c.wait_pos, c.last_wait_len)
        c.c_end = c.cpu() if c.cpu else None
        c.t_end = time.perf_counter_ns()

    def _end_body(self, partial: bool = False, now=None, cpu_now=None):
        """Ends the running step's body (once): the device synchronized, the
        time taken, its range closed, with as little as possible before the
        close (it lies inside the range). step() and stop() call it first;
        `opskew profile`'s driver calls it before its own work."""
        c = self._clock
        if c.ended:
            return
        if self._cuda and now is None:
            self._sync()
        t0 = time.perf_counter_ns() if now is None else now
        c0 = cpu_now if now is not None else c.cpu() if c.cpu else None
        rf = self.prof.step_rec_fn if self._own_ranges else None
        if rf is not None:
            self.prof.step_rec_fn = None
            rf.__exit__(None, None, None)
        c.call_t0 = t0
        c.close_body(t0, partial=partial, cpu_now=c0, ref=self._ref.live is not None)
        c.ready_ns = 0
        c.ended = True

    # ------------------------------------------------ torch's entry points
    def start(self):
        if self._running:
            return  # as torch's start() on a running profiler: nothing new begins
        self._step_ranges()
        self._thread = threading.get_ident()
        if self._traffic is not None:  # a capture of its own, unless a schedule runs (-1: neither)
            self._traffic.started(self._cycle + 1 if not scheduled(self.prof, self._torch) else -1)
        own = transit(self.prof, self.prof.start)
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
        c = self._clock
        action = UNSET
        if c.phase == "wait" and self._quiet_waits:
            # A wait step's step() runs between two bodies, and what it does
            # leaves the next body slower (its code and data in the caches
            # and predictors): torch's step() and opskew's bookkeeping around
            # it made a small MLP's next body 5.6% slower than a body after a
            # body, this path 2.9% (bench/bench_wait_steps.py; docs/method.md,
            # "Wait steps under a live profiler").
            # Wait to wait, torch's step() only moves the schedule on:
            # the same, done here; any other transition goes through torch.
            # `opskew profile`'s driver ends the body itself first (ended).
            ended = c.ended
            if ended:
                now, cpu = c.call_t0, None
            else:
                if self._cuda:
                    self._sync()
                now = time.perf_counter_ns()
                cpu = c.cpu() if c.cpu else None
            prof = self.prof
            nxt = prof.step_num + 1
            action = prof.schedule(nxt)  # before any state changes, as torch's step() calls it
            if action is self._none and prof.current_action is self._none:
                ref = self._ref
                if not ended:
                    c.close_body(now, cpu_now=cpu, ref=ref.live is not None)
                if ref.live is not None:
                    ref.step_ended(c.wait_pos)
                prof.step_num = nxt
                if self._prev_action_attr:
                    prof._prev_schedule_action = action
                if self._lost is not None:
                    self._lost = None
                c.calls.append({"after_step": c.step, "ns": time.perf_counter_ns() - now, "on_trace_ready_ns": 0})
                c.step = nxt
                c.ended = False
                c.wait_pos += 1
                if ref.on and REF_FIRST <= c.wait_pos <= REF_FIRST + REF_STEPS:
                    ref.step_begins(c.wait_pos, c.last_wait_len)
                c.c_end = c.cpu() if c.cpu else None
                c.t_end = time.perf_counter_ns()
                return
            if not ended:
                self._end_body(now=now, cpu_now=cpu)
        else:
            self._end_body()
        if self._ref.live is not None:
            self._ref.step_ended(c.wait_pos)
        self._lost = session_gone(self.prof, self._torch, self._thread)
        t0 = c.call_t0
        own = transit(self.prof, self.prof.step, action)
        t1 = time.perf_counter_ns()
        c.calls.append({"after_step": c.step, "ns": t1 - t0, "on_trace_ready_ns": c.ready_ns})
        self._begin_body(own)

    def stop(self):
        if not self._running:
            return  # stopped already (an explicit stop() inside `with`, then __exit__'s)
        self._running = False
        self._stopped = True
        self._end_body(partial=True)
        if self._ref.live is not None:
            self._ref.open = None  # a partial step: not a whole one
            self._ref.end()
        self._lost = session_gone(self.prof, self._torch, self._thread)
        c = self._clock
        t0 = c.call_t0
        self.prof.stop()
        if self._traffic is not None:
            self._traffic.stopped()
        c.calls.append({"after_step": c.step, "ns": time.perf_counter_ns() - t0,
                        "on_trace_ready_ns": c.ready_ns, "stop": True})
        try:
            self._analysis.recorrect(self.reports, self._cycle)
            self._out.say(render_recorrected(self.reports, self.final, as_printed))
        except Exception as exc:  # noqa: BLE001 - the run's own traces are already written
            if self.report is not None:
                self.reports[-1] = self.report.revised({"recorrect_error": f"{type(exc).__name__}: {exc}"},
                                                       "recorrect_failed")
            self._out.say(f"opskew.profile: correcting earlier traces with the final W failed "
                      f"({type(exc).__name__}: {exc}); each keeps its own cycle's W\n")

    def export_chrome_trace(self, path, *args, **kwargs):
        """As torch's; the corrected trace goes next to it. Inside
        on_trace_ready the path is remembered for that; after the cycle,
        when opskew itself took Kineto's one save of the trace, the trace is
        copied from opskew's copy (through the one writer) and corrected
        there."""
        path = os.fspath(path)
        files = self._files
        if files.in_ready or files.kept is None:
            out = self.prof.export_chrome_trace(path, *args, **kwargs)
            if files.in_ready:
                files.exported.append(path)
            return out
        files.copy_kept(path)
        self._analysis.correct_copy(self.reports, files.kept, path)
        return None

    # ------------------------------------------------------- on_trace_ready
    def _on_ready(self, _torch_prof):
        t0 = time.perf_counter_ns()
        c, files = self._clock, self._files
        self._analysis.wv = None  # this cycle's, set when its analysis succeeds
        if self._lost:
            # Nothing to export (torch crashes trying), so neither the user's
            # handler nor opskew's analysis runs; the report says why.
            self._cycle += 1
            c.take_active(self._cycle)
            self._add_report(self._error_report(self._lost))
            self._out.say(f"opskew.profile cycle {self._cycle}: {self._lost}\n")
            self._lost = None
            return
        # From the start of this step()/stop() call to here: the profiler's
        # stop and post-processing, before on_trace_ready.
        stop_ns = t0 - c.call_t0 if c.call_t0 is not None else 0
        files.in_ready = True
        files.exported = []
        try:
            if self._user_ready is not None:
                self._user_ready(self)
        except BaseException as exc:
            # Raised on, as torch does; the cycle still ends here: its active
            # steps are its own (they must not go to the next trace), and
            # its report says what happened.
            self._cycle += 1
            c.take_active(self._cycle)
            self._add_report(self._error_report(f"on_trace_ready raised {type(exc).__name__}: {exc}"))
            raise
        finally:
            files.in_ready = False
        user_ns = time.perf_counter_ns() - t0
        self._cycle += 1
        raw = files.raw()
        files.drop_kept()
        own0, model0 = self._figures.own_ns, self._figures.model_ns
        this_cycle = c.take_active(self._cycle)
        if self._ref.pending:
            self._ref.collect()
        try:
            if raw is None and files.exported:
                raise RuntimeError(f"the trace on_trace_ready exported ({files.exported[0]}) is no longer there "
                                   "(moved or removed by the handler?), and torch saves a trace once: this cycle "
                                   "cannot be analysed")
            trace = raw or files.keep(self.prof, self._cycle, self)
            rep = self._analysis.analyse(trace, raw, stop_ns, user_ns, this_cycle, self._cycle, self.step_ranges)
        except Exception as exc:  # noqa: BLE001 - opskew's failure must not stop the user's training
            rep = self._error_report(f"{type(exc).__name__}: {exc}", raw)
        # opskew's own time in this step() call: its export (when the user's
        # handler made none), the counting pass, W_py's measurement, the
        # per-operator verdict and the corrected trace. Not in any step.
        rep["opskew_ns"] = time.perf_counter_ns() - t0 - user_ns
        rep["w_py_measure_ns"] = self._figures.own_ns - own0
        rep["model_ns"] = self._figures.model_ns - model0  # the in-process model's, measured or checked
        rep = self._add_report(rep, own=True)
        self._out.report(rep)
        c.ready_ns = time.perf_counter_ns() - t0

    def _add_report(self, rep: dict, own: bool = False):
        """Keeps `rep` as a typed report (own: its raw trace is now this cycle's, claim)."""
        rep = typed(rep, self)
        self.reports.append(rep)
        if own:
            claim(self.reports, rep)
        self._shed_upto = shed_old_operators(self.reports, self._shed_upto)
        return rep

    def _error_report(self, error: str, raw: str | None = None) -> dict:
        """The report of a cycle that has no analysis: why, and what is known."""
        return error_report(self._cycle, self.rank, self.world_size, error, self._clock.counts(), self.step_ranges,
                            raw)
