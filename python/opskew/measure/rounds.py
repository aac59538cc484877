"""The paired measurement method shared by every command (docs/design.md).

Warm up; then interleave baseline and instrumented trials, alternating the
order within each pair (AB, BA, AB, ...) so that a slow drift of the machine
cancels; time inside the instrumented window where a user's loop timer sits, and
separately the instrument's enter, stop and post-processing; count events per
trial from the instrument's own records; hand the per-trial numbers to the C
engine for the statistics.
"""

from __future__ import annotations

import os
import platform
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Callable

from opskew import _engine
from opskew.errors import UsageError, WorkloadError
from opskew.host import cpu_model
from opskew.measure.instruments import Instrument, Trial
from opskew.results.views import lazy

Progress = lazy("progress.Progress")
say_warnings = lazy("progress.say_warnings")

# Kineto logs two lines per profiler start/stop on stderr; quiet unless asked.
os.environ.setdefault("KINETO_LOG_LEVEL", "6")


@dataclass
class Window:
    wall_s: float               # the whole window, synchronized on CUDA
    # CPU only: the window with each iteration longer than OUTLIER times the
    # median counted as the median (steady()): a time slice another process
    # takes lands in one iteration, not in the estimate
    # (stats.estimators.operator_event_cost)
    steady_s: float | None = None
    gpu_s: float | None = None  # CUDA only: GPU time between the window's CUDA events
    issue_s: float | None = None  # CUDA only: CPU time to issue the work (before the final sync)


@dataclass
class Rounds:
    """Everything measured so far, one list of trials per arm; valid at any
    point, so that an interrupted or failed run still reports what it measured.
    A bare arm (no instrument) has trials with only `window` set."""

    arms: list                                     # arm names, in definition order
    trials: dict = field(default_factory=dict)     # arm name -> list of Trial
    orders: list = field(default_factory=list)     # the arm order of each round
    warmup_s: float = 0.0                          # the warm-up loop's time (--warmup, up to one window more)
    first_session_s: float = 0.0                   # each instrument opened and closed once after it
    warnings: list = field(default_factory=list)   # what the workload warned, each once (warned)
    error: BaseException | None = None
    interrupted: bool = False

    @property
    def n(self) -> int:
        return min((len(v) for v in self.trials.values()), default=0)

    def windows(self, arm: str) -> list:
        return [t.window for t in self.trials[arm]]


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda was asked for, but torch sees no CUDA device "
                         f"(torch {torch.__version__}; cuda build: {torch.version.cuda or 'no'})")
    if device not in ("cpu", "cuda"):
        raise UsageError(f"unknown device {device!r}: expected cpu, cuda or auto")
    return device


OUTLIER = 3.0  # an iteration longer than this many times the window's median is another process's time slice


def steady(iters_s: list) -> float:
    """A window's time with each iteration longer than OUTLIER times its
    median counted as the median (Window.steady_s): another process's time
    slice (milliseconds) lands in one iteration, which this takes out,
    where the profiler's own occasional costs (a buffer block every
    thousand events, microseconds) stay in."""
    m = _engine.quantile(iters_s, 0.5)
    cap = OUTLIER * m
    return sum(m if t > cap else t for t in iters_s)


def make_window(iteration: Callable[[], object], iters: int, device: str) -> Callable[[], Window]:
    """A timed window of `iters` iterations. On CUDA it synchronizes before and
    after so that queued GPU work is inside the interval, and times the GPU side
    with CUDA events."""
    perf = time.perf_counter
    if device == "cuda":
        import torch

        sync = torch.cuda.synchronize

        def window():
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            sync()
            t0 = perf()
            start.record()
            for _ in range(iters):
                iteration()
            end.record()
            t_issue = perf()
            sync()
            t1 = perf()
            return Window(t1 - t0, gpu_s=start.elapsed_time(end) * 1e-3, issue_s=t_issue - t0)

        return window

    def window():
        ts = [perf()]
        stamp = ts.append
        for _ in range(iters):
            iteration()
            stamp(perf())
        return Window(ts[-1] - ts[0], steady_s=steady([b - a for a, b in zip(ts, ts[1:])]))

    return window


def sync_cost_s(repeats: int = 50) -> float:
    """Median time of torch.cuda.synchronize() with nothing queued: the cost
    every synchronized window pays once, reported rather than hidden."""
    import torch

    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def conditions(device: str, threads: int, instrument: Instrument, extra: dict) -> dict:
    import torch

    cond = {
        "opskew": _engine.version,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "device": device,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "instrument": instrument.describe(),
        "instrument_label": instrument.label(),
        "clock": _engine.clock_info(),
        "timer": "time.perf_counter",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if device == "cuda":
        cond["gpu"] = torch.cuda.get_device_name()
        cond["cuda"] = torch.version.cuda
        cond["sync_s"] = sync_cost_s()
    cond.update(extra)
    return cond


def run_rounds(iteration, arms: dict, *, trials: int, iters: int, device: str,
               warmup_s: float = 0.3, progress: Progress | None = None) -> Rounds:
    """Runs `trials` rounds; each round runs every arm once, in an order that
    rotates from round to round (two arms: AB, BA, AB, ...), so that a slow
    drift of the machine reaches every arm alike and any two arms can be
    compared pair by pair. `arms` maps a name to an Instrument, or to None for
    the bare workload. Never raises for the workload: an exception from it, or
    Ctrl-C, ends the run and is kept in the result with what was measured
    before it; an incomplete last round is dropped. `progress` is told the
    warm-up and each run (render.progress)."""
    names = list(arms)
    rounds = Rounds(arms=names, trials={k: [] for k in names})
    window = make_window(iteration, iters, device)
    opened = [n for n, inst in arms.items() if inst is not None]
    # The workload's warnings (torch's among them) are caught and said once,
    # attributed, after the progress line: not torch's text amid opskew's.
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("default")
        try:
            # Warm up the workload (caches, allocator, lazy init) for warmup_s,
            # then open and close each instrument once: the first torch.profiler
            # session initializes Kineto, which takes seconds and is not overhead
            # of the steady state.
            if progress:
                progress.start("warm-up", f"the workload for {warmup_s:g} s, then each of {len(opened)} "
                               "instrument(s) once")
            t0 = time.perf_counter()
            while True:
                window()
                if time.perf_counter() - t0 >= warmup_s:
                    break
            rounds.warmup_s = time.perf_counter() - t0
            t1 = time.perf_counter()
            short = make_window(iteration, max(1, iters // 4), device)
            for j, name in enumerate(opened):
                arms[name].trial(short)
                if progress:
                    progress.update(j + 1, len(opened), name, unit="instrument")
            rounds.first_session_s = time.perf_counter() - t1
            k = len(names)
            if progress:
                progress.start("measuring", f"{trials} rounds, each runs {k} configurations {iters} "
                               "iteration(s)")
            for i in range(trials):
                order = names[i % k:] + names[:i % k]
                for j, name in enumerate(order):
                    inst = arms[name]
                    rounds.trials[name].append(Trial(window=window()) if inst is None
                                               else inst.trial(window))
                    if progress:
                        progress.update(i * k + j + 1, trials * k, f"round {i + 1}, {name}", unit="run")
                rounds.orders.append(order)
        except KeyboardInterrupt:
            rounds.interrupted = True
        except Exception as exc:  # the workload's own failure, kept with the data
            rounds.error = exc
        finally:
            if progress:
                progress.end()
    rounds.warnings = warned(said)
    say_warnings(progress.label if progress else "opskew", rounds.warnings)
    n = rounds.n
    for v in rounds.trials.values():
        del v[n:]
    return rounds


def warned(caught: list) -> list:
    """The warnings the workload (torch, the user's code) raised while it
    was measured, each once: {"by", "category", "message", "where"}; "by"
    is "torch" where the warning came from torch's files."""
    out, seen = [], set()
    for w in caught:
        key = (w.category.__name__, str(w.message))
        if key in seen:
            continue
        seen.add(key)
        parts = os.path.normpath(w.filename).split(os.sep)
        out.append({"by": "torch" if "torch" in parts else "the workload", "category": key[0],
                    "message": key[1], "where": f"{w.filename}:{w.lineno}"})
    return out


def user_traceback(exc: BaseException) -> str:
    """The exception's traceback from the first frame outside opskew, as
    Python prints it: the user's own code, not opskew's loop around it.
    Empty when no frame is the user's."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # the opskew package
    tb = exc.__traceback__
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(here):
        tb = tb.tb_next
    if tb is None:
        return ""
    return "Traceback (most recent call last):\n" + "".join(traceback.format_tb(tb)) + \
        "".join(traceback.format_exception_only(type(exc), exc))


def workload_error(rounds: Rounds, partial) -> WorkloadError:
    exc = rounds.error
    where = ""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None:
        where = f" at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
    err = WorkloadError(f"the workload raised {type(exc).__name__}: {exc}{where} "
                        f"(after {rounds.n} complete round(s) of trials)", partial=partial, cause=exc)
    err.user_traceback = user_traceback(exc)
    return err


def progress_printer(label: str) -> Progress | None:
    """The progress of a command's rounds on stderr (render.progress), or
    None where OPSKEW_PROGRESS=0."""
    p = Progress(label)
    return p if p.mode != "off" else None
