"""Bootstrap that `opskew profile` runs in the child Python, by path:

    python [interpreter options] .../opskew/_profile_boot.py (-c CODE | -m MODULE | SCRIPT) [ARGS]

It wraps the user's unmodified script in `opskew.profile` (docs/profile.md):
steps are the optimizer's steps (torch.optim's global step post-hook; the
first optimizer that steps, when there are several), or the ends of a
`record_function` named by --step-marker, or `opskew.step()` calls (the
first one switches to those). The profiler starts at the first step
boundary, so the script's setup and first step are never a step. At the end
(return, exception, sys.exit, SIGINT, SIGTERM) the profiler is stopped, which
finishes a cycle in progress; the report (OUT/report.json) is rewritten after
every cycle, so what was collected survives a kill.

Environment (set by `opskew profile`):
  OPSKEW_PROFILE_SPEC   JSON: out (folder), schedule, options, device,
                        step_marker, threshold
  OPSKEW_BOOT_ERROR     where a setup failure is described (one line)
  OPSKEW_RECORD_PARENT  the parent's pid (SIGTERM when it dies, as record)
"""

import functools
import json
import os
import signal
import sys
import threading
import time
import warnings

# Run by path, sys.path[0] is opskew's own folder, whose module names
# (tracing, report, ...) must not shadow anyone's. The folder above it (the
# site-packages opskew is installed in) must not be on the path either: the
# script's interpreter would import that folder's torch instead of its own.
# So `opskew` is loaded from this very folder by its spec, and sys.path[0]
# holds a name that imports nothing until the user's code gets its own
# (record_boot.run_user).
_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or ".") == _HERE:
    sys.path[0] = os.path.join(_HERE, "__no_imports_here__")
if "opskew" not in sys.modules:
    import importlib.util

    _PKG = os.path.dirname(_HERE)  # this file is in the package's _entry/ folder
    _spec = importlib.util.spec_from_file_location("opskew", os.path.join(_PKG, "__init__.py"),
                                                   submodule_search_locations=[_PKG])
    sys.modules["opskew"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["opskew"])

from opskew._entry import record_boot as rb  # noqa: E402  (after the package is loaded by its spec)
from opskew.analyze.job import PROFILE_TRACES  # noqa: E402
from opskew.exitcodes import EXIT_SETUP  # noqa: E402
from opskew.measure import budget  # noqa: E402
from opskew.output import write_file  # noqa: E402
from opskew.profiler import core as profiler_core  # noqa: E402  (does not import torch)
from opskew.profiler.cycle import KEEP_CYCLES  # noqa: E402
from opskew.profiler.traces import entry  # noqa: E402
from opskew.render.advise import cycle_budget_line  # noqa: E402
from opskew.render.progress import Progress  # noqa: E402


class Driver:
    """Turns the script's step boundaries into `opskew.profile` steps and
    keeps OUT/report.json current."""

    def __init__(self, spec, torch, profile_cls):
        self.spec = spec
        self.torch = torch
        # Set before the profiler is made: it then registers no optimizer
        # hook of its own (profiler.traffic), as this driver marks the steps.
        profiler_core.driver = self
        sch = spec["schedule"]
        acts = [torch.profiler.ProfilerActivity.CPU]
        if spec["device"] == "cuda":
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        # torch warns, at the second cycle, that key_averages() then holds one
        # cycle only (acc_events=False). The script never sees this profiler,
        # and each cycle's trace is written: the warning would only puzzle.
        warnings.filterwarnings("ignore", message="Warning: Profiler clears events at the end of each cycle",
                                category=UserWarning)
        self.prof = profile_cls(
            activities=acts,
            schedule=torch.profiler.schedule(wait=sch["wait"], warmup=sch["warmup"], active=sch["active"],
                                             repeat=sch["repeat"], skip_first=sch["skip_first"]),
            report_file=sys.stderr, corrected_dir=os.path.join(spec["out"], PROFILE_TRACES),
            threshold=spec["threshold"], verbose=bool(spec.get("verbose")),
            **spec["options"])
        self.mode = "marker" if spec.get("step_marker") else "optimizer"
        self.started = False
        self.boundaries = 0
        self.first_optimizer = None
        self.other_optimizer_steps = 0
        self.other_thread_steps = 0  # optimizer steps on threads other than the main one
        self.scaler_skipped_steps = 0  # GradScaler skipped opt.step(): still boundaries
        self.reports_written = 0
        self.budget = None  # measure.budget.from_cycle of the first cycle
        self.notes = []
        self.child_processes = 0  # started through multiprocessing by this process
        self.own = 0  # > 0 while opskew's own code drives the profiler (_hook_own_profilers)
        self.stood_aside = None  # why opskew stopped for the script's own profiler, if it did
        self.t0 = time.time()
        self.pid = os.getpid()
        self.progress = None  # render.progress: the steps to the next cycle's report
        self.next_report = 0  # the boundary after which the next cycle reports (0: none)
        self.phase_from = 0  # the boundary its phase began after
        self.phase_due = False  # the next boundary starts the next cycle's phase
        self.phase_t = 0.0
        self.cycle = 0

    # ------------------------------------------------------------ boundaries
    def boundary(self):
        self.boundaries += 1
        if self.started:
            # The step ends here: its time and its ProfilerStep#N range, before
            # any of opskew's own work.
            self.prof._end_body()
        else:
            # How the ranges are opened: the first use may build opskew's
            # native shim (seconds), which a Ctrl-C may interrupt, so not with
            # signals held below.
            self.prof._step_ranges()
        self._progress()
        with _signals_deferred():
            self.own += 1
            try:
                if not self.started:
                    self.started = True
                    self.prof.start()
                else:
                    self.prof.step()
            except Exception as exc:  # noqa: BLE001 - never stop the training for the profiler
                self.mode = "off"
                self._say("opskew stood aside after the profiler failed at step boundary %d: %s: %s"
                          % (self.boundaries, type(exc).__name__, exc))
                return
            finally:
                self.own -= 1
            self._write_if_new()

    def _progress(self):
        """Where the run stands on stderr (render.progress; OPSKEW_PROGRESS):
        a line as each cycle's steps begin, then the steps to its report
        once they have run for a few seconds, every half minute. Lines, not
        a live line: the script's output and the reports (printed some steps
        into the next cycle, once its settled wait steps are measured)
        share the terminal."""
        sch = self.spec["schedule"]
        cycle_len = sch["wait"] + sch["warmup"] + sch["active"]
        if self.progress is None:
            self.progress = Progress("opskew profile")
            if self.progress.mode == "live":
                self.progress.mode = "lines"
            self.phase_from, self.next_report, self.phase_due = 0, sch["skip_first"] + cycle_len, True
        if not self.next_report:
            return
        if self.phase_due:
            self.phase_due = False
            self.cycle += 1
            self.phase_t = time.perf_counter()
            self.progress.start(f"cycle {self.cycle}", f"its trace ends after {self.next_report - self.phase_from} steps: "
                                + (f"skip_first={sch['skip_first']}, " if self.cycle == 1 else "")
                                + f"wait={sch['wait']}, warmup={sch['warmup']}, active={sch['active']}"
                                + (f"; steps from {self.step_source()}" if self.cycle == 1 else ""))
        done, total = self.boundaries - self.phase_from, self.next_report - self.phase_from
        if time.perf_counter() - self.phase_t >= 2.0:  # an estimate from a few steps
            self.progress.update(done, total, unit="step")
        if self.boundaries >= self.next_report:
            if not sch["repeat"] or self.cycle < sch["repeat"]:
                self.phase_from, self.next_report, self.phase_due = self.next_report, self.next_report + cycle_len, True
            else:
                self.next_report = 0

    def _say(self, note):
        self.notes.append(note)
        sys.stderr.write("opskew profile: %s\n" % note)

    def stand_aside(self, what):
        """The script starts a torch profiler of its own. torch runs one at a
        time, and two at once mix their events without an error (seen: W at
        -2 us, and opskew's ProfilerStep ranges in the script's own table):
        opskew stops for good, before the script's starts, keeping the
        traces it has written."""
        if self.mode == "off":
            return
        self.mode = "off"
        if self.started:
            self.own += 1
            try:
                with _signals_deferred():
                    self.prof.stop()
            except Exception as exc:  # noqa: BLE001 - the script's profiler must still start
                self.notes.append(f"stopping the profiler failed: {type(exc).__name__}: {exc}")
            finally:
                self.own -= 1
        self.stood_aside = f"at step boundary {self.boundaries}, for the script's own {what}"
        self._say(f"opskew stood aside at step boundary {self.boundaries}: the script starts its own {what}, and "
                  f"torch runs one profiler at a time (two at once mix their events); run the script without "
                  f"its profiler, or let it use opskew.profile in its place")
        try:
            self.write_report(None)
        except Exception as exc:  # noqa: BLE001 - never stop the training for the report
            sys.stderr.write("opskew profile: report.json not written: %s\n" % exc)

    def _write_if_new(self):
        if len(self.prof.reports) != self.reports_written:
            if self.budget is None:
                # What the first cycle cost, once (it runs in the cold wait
                # step after a trace, which W never pairs).
                self.budget = budget.from_cycle(self.prof.reports[0], self.spec["schedule"]["repeat"])
                sys.stderr.write("opskew profile: %s\n" % cycle_budget_line(self.budget))
            try:
                self.write_report(None)
            except Exception as exc:  # noqa: BLE001 - never stop the training for the report
                self.reports_written = len(self.prof.reports)
                sys.stderr.write("opskew profile: report.json not written: %s\n" % exc)

    def optimizer_step(self, opt, args, kwargs):
        """torch.optim's global step post-hook. It runs inside the
        optimizer's record_function range ("Optimizer.step#..."), so a
        boundary here would split that range from its step: the first time,
        the optimizer's own `step` is wrapped so that later boundaries come
        after it returns, and this hook stands aside for it."""
        if self.mode != "optimizer" or not self.ours():
            return
        self._optimizer_boundary(opt, skipped=False)

    def scaler_skipped(self, opt):
        """GradScaler.step() returned without calling opt.step() (its
        gradients held inf or NaN: AMP's search for a scale, early in a run,
        or an overflow later). The iteration ends there all the same, or two
        iterations would make one step."""
        if self.mode != "optimizer" or not self.ours():
            return
        self._optimizer_boundary(opt, skipped=True)

    def _optimizer_boundary(self, opt, skipped):
        if threading.current_thread() is not threading.main_thread():
            # The loop opskew profiles is the script's, on the main thread
            # (torch's profiler is driven from there); an optimizer stepping
            # in a helper thread took the steps over, and Kineto refused it.
            self.other_thread_steps += 1
            return
        if self.first_optimizer is not None and self.first_optimizer[0]() is None:
            self.notes.append(f"the {self.first_optimizer[1]} whose steps were the step boundaries was "
                              f"deleted; the next optimizer to step took over")
            self.first_optimizer = None
        if self.first_optimizer is None:
            import weakref

            self.first_optimizer = (weakref.ref(opt), type(opt).__name__)
            self._wrap_step(opt)
            self.scaler_skipped_steps += skipped
            self.boundary()  # this step's: the wrapper takes the next ones
        elif self.first_optimizer[0]() is not opt:
            self.other_optimizer_steps += not skipped
        elif skipped:
            self.scaler_skipped_steps += 1
            self.boundary()  # the wrapper around opt.step never ran
        # else: the wrapper makes the boundary once opt.step returns

    def _wrap_step(self, opt):
        import types

        inner = opt.step  # bound; torch's profiling and hook wrappers included
        driver = self

        def step(self, *args, **kwargs):
            out = inner(*args, **kwargs)
            if driver.mode == "optimizer" and driver.ours() and driver.first_optimizer is not None \
                    and driver.first_optimizer[0]() is self and threading.current_thread() is threading.main_thread():
                driver.boundary()
            return out

        # A bound method, as torch's LR schedulers expect (they wrap
        # `opt.step.__func__`), carrying the wrapped function's attributes:
        # a scheduler's `_wrapped_by_lr_sched` mark, without which every
        # scheduler.step() warned that optimizer.step() had been overridden.
        functools.update_wrapper(step, getattr(inner, "__func__", inner))
        opt.step = types.MethodType(step, opt)

    def ours(self):
        """False in a process the script forked: its steps and its end are
        not this run's (report.json and the traces are the parent's)."""
        return os.getpid() == self.pid

    def manual_step(self):
        if not self.ours() or self.mode == "off":
            return
        if self.mode != "manual":
            if self.boundaries:
                self.notes.append(f"opskew.step() took over from the {self.mode} after "
                                  f"{self.boundaries} step boundaries")
            self.mode = "manual"
        self.boundary()

    def marker_ended(self, name):
        if self.mode == "marker" and name == self.spec["step_marker"] and self.ours():
            self.boundary()

    # ---------------------------------------------------------------- report
    def step_source(self):
        if self.mode == "manual":
            return "opskew.step() calls"
        if self.mode == "marker":
            return f"ends of record_function({self.spec['step_marker']!r})"
        if self.first_optimizer is None:
            return "an optimizer (none stepped)"
        return f"the first optimizer that stepped ({self.first_optimizer[1]})"

    def write_report(self, ended_by):
        steps = self.prof.steps
        doc = {
            "schema": "opskew.profile/1",
            "conditions": {"torch": self.torch.__version__, "device": self.spec["device"],
                           "threads": self.torch.get_num_threads(), "options": self.spec["options"],
                           "schedule": self.spec["schedule"]},
            "step_source": self.step_source(),
            "step_boundaries": self.boundaries,
            "steps": self.prof.step_counts(),
            "ended_by": ended_by,
            # Worker processes the script started through multiprocessing
            # (torch.multiprocessing.spawn, DataLoader workers): opskew does
            # not follow them; `opskew profile` says so when no step was seen.
            "child_processes": self.child_processes,
            # The script started a torch profiler of its own: opskew stopped there.
            "stood_aside": self.stood_aside,
            "notes": self.notes + ([f"{self.other_optimizer_steps} step() calls of other optimizers were not "
                                    "step boundaries"] if self.other_optimizer_steps else [])
                     + ([f"{self.other_thread_steps} optimizer step() calls on threads other than the main one "
                         "were not step boundaries: opskew profiles the main thread's loop"]
                        if self.other_thread_steps else [])
                     + ([f"{self.scaler_skipped_steps} step boundaries were GradScaler.step() calls that skipped "
                         "the optimizer's step (inf or NaN gradients)"] if self.scaler_skipped_steps else []),
            "scaler_skipped_steps": self.scaler_skipped_steps,
            # The latest KEEP_CYCLES cycles' reports (the cycles `final` and
            # the corrected traces come from); an earlier one is in its
            # corrected trace's metadata, where one was written. The file is
            # rewritten every cycle: it must stay bounded.
            "reports": [entry(r) for r in self.prof.reports[-KEEP_CYCLES:]],
            "earlier_reports": max(len(self.prof.reports) - KEEP_CYCLES, 0),
            "report": self.prof.report,
            # The run's W from all its steps (at the end), which every
            # corrected trace then carries; None before the end or without
            # enough pairs.
            "final": self.prof.final,
            "step_times_ns": steps,
            "capture_budget": self.budget,
        }
        self.reports_written = len(self.prof.reports)
        doc["rank"], doc["world_size"] = self.prof.rank, self.prof.world_size
        name = "report.json" if self.prof.rank is None else f"report.rank{self.prof.rank}.json"
        write_file(os.path.join(self.spec["out"], name), json.dumps(doc, indent=1, default=str))

    def finish(self, ended_by):
        if not self.ours():
            return
        if self.started and self.mode != "off":
            self.own += 1
            try:
                self.prof.stop()  # a cycle in progress is finished: its trace is written
            except Exception as exc:  # noqa: BLE001 - keep what was collected
                self.notes.append(f"stopping the profiler failed: {type(exc).__name__}: {exc}")
            finally:
                self.own -= 1
        try:
            self.write_report(ended_by)
        except Exception as exc:  # noqa: BLE001 - the script's own exit status must stand
            sys.stderr.write("opskew profile: report.json not written: %s\n" % exc)


class _signals_deferred:
    """SIGINT and SIGTERM held while opskew stops, exports and analyses a
    trace (inside the script's optimizer step), then delivered: an
    interrupted transition would lose that cycle (main thread only)."""

    def __enter__(self):
        self.pending, self.old = [], {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.old[sig] = signal.signal(sig, lambda n, f: self.pending.append(n))
        return self

    def __exit__(self, *exc):
        for sig, handler in self.old.items():
            signal.signal(sig, handler)
        if self.pending:
            sig = self.pending[0]
            handler = self.old[sig]
            if callable(handler):
                handler(sig, None)
            elif handler != signal.SIG_IGN:
                signal.raise_signal(sig)
        return False


def _count_children(driver):
    """Counts the processes the script starts through multiprocessing (every
    start method, torch.multiprocessing's included), so that a run whose
    training happened in them can say why it saw no step."""
    import multiprocessing.process as mpp

    orig = mpp.BaseProcess.start

    def start(self, *args, **kwargs):
        if driver.ours():
            driver.child_processes += 1
        return orig(self, *args, **kwargs)

    mpp.BaseProcess.start = start


def _hook_scaler(torch, driver):
    """GradScaler.step() skips the optimizer's step when the gradients hold
    inf or NaN, so the optimizer's hooks never see that iteration end: the
    scaler's step ends it then (Driver.scaler_skipped). torch.amp.GradScaler
    (torch >= 2.3; torch.cuda.amp's is a subclass there) or
    torch.cuda.amp.GradScaler (torch 2.1, 2.2), wherever `step` is defined."""
    classes = []
    for mod, name in (("torch.amp", "GradScaler"), ("torch.cuda.amp", "GradScaler")):
        try:
            cls = getattr(__import__(mod, fromlist=[name]), name)
        except (ImportError, AttributeError):
            continue
        if "step" in cls.__dict__ and cls not in classes:
            classes.append(cls)
    for cls in classes:
        orig = cls.__dict__["step"]

        def step(self, optimizer, *args, _orig=orig, **kwargs):
            before = driver.boundaries
            out = _orig(self, optimizer, *args, **kwargs)
            if driver.boundaries == before:  # opt.step() was not called: skipped
                driver.scaler_skipped(optimizer)
            return out

        cls.step = step


def _hook_marker(torch, driver):
    """The end of each record_function named --step-marker is a step boundary."""
    rf = torch.autograd.profiler.record_function
    orig = rf.__exit__

    def __exit__(self, *exc):
        out = orig(self, *exc)
        if not exc or exc[0] is None:  # a step cut short by an exception is not a step
            driver.marker_ended(getattr(self, "name", None))
        return out

    rf.__exit__ = __exit__


def _hook_own_profilers(torch, driver):
    """Calls driver.stand_aside() when the script, not opskew, starts a torch
    profiler: torch.profiler.profile (any _KinetoProfile) or the autograd
    profiler used directly (`with torch.autograd.profiler.profile():`)."""
    targets = [(getattr(getattr(torch.profiler, "profiler", None), "_KinetoProfile", None), "prepare_trace",
                "torch.profiler"),
               (getattr(getattr(torch.autograd, "profiler", None), "profile", None), "__enter__",
                "torch.autograd.profiler")]
    for cls, name, what in targets:
        orig = getattr(cls, name, None) if cls is not None else None
        if orig is None:  # another torch: nothing to watch there
            continue

        @functools.wraps(orig)
        def hooked(self, *args, _orig=orig, _what=what, **kwargs):
            if driver.own == 0 and driver.ours():
                driver.stand_aside(_what)
            return _orig(self, *args, **kwargs)

        setattr(cls, name, hooked)


def main():
    signal.signal(signal.SIGTERM, rb.on_sigterm)
    rb.die_with_parent()
    kind, target, user_argv = rb.parse(sys.argv[1:])
    try:
        spec = json.loads(os.environ["OPSKEW_PROFILE_SPEC"])
    except (KeyError, ValueError):
        rb.fail("run this through `opskew profile`, which sets OPSKEW_PROFILE_SPEC")
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - any import failure ends here
        rb.fail("cannot import torch in the profiled interpreter: %s" % exc)
    if spec["device"] == "cuda" and not torch.cuda.is_available():
        rb.fail("--device cuda: this torch sees no CUDA device (torch %s)" % torch.__version__)
    driver = Driver(spec, torch, profiler_core.profile)
    profiler_core.driver = driver
    _count_children(driver)
    _hook_own_profilers(torch, driver)
    handle = None
    if driver.mode == "marker":
        _hook_marker(torch, driver)
    else:
        try:
            from torch.optim.optimizer import register_optimizer_step_post_hook
        except ImportError:
            rb.fail("this torch (%s) has no global optimizer step hooks (torch >= 2.0): mark steps with "
                     "--step-marker NAME or opskew.step()" % torch.__version__)

        handle = register_optimizer_step_post_hook(driver.optimizer_step)
        _hook_scaler(torch, driver)
    sys.argv = user_argv
    ended_by = None
    try:
        rb.run_user(kind, target)
        ended_by = "the script returned"
    except SystemExit as exc:
        ended_by = "sys.exit(%r)" % (exc.code,) if exc.code not in (None, 0) else "the script returned"
        if isinstance(exc.code, int) and exc.code == 128 + signal.SIGTERM:
            ended_by = "SIGTERM"
        raise
    except KeyboardInterrupt:
        ended_by = "SIGINT (KeyboardInterrupt)"
        raise
    except BaseException as exc:
        ended_by = "the script raised %s: %s" % (type(exc).__name__, exc)
        raise
    finally:
        # A second Ctrl-C must not interrupt the last trace and report.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        if handle is not None:
            handle.remove()
        profiler_core.driver = None
        driver.finish(ended_by)


if __name__ == "__main__":
    try:
        main()
    except BaseException as _exc:  # raised on with the user's frames (record_boot.for_user)
        if rb.for_user(_exc) is None:
            raise
        raise _exc
