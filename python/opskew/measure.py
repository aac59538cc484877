"""The paired measurement method shared by every command (DESIGN.md).

Warm up; then interleave baseline and instrumented trials, alternating the
order within each pair (AB, BA, AB, ...) so that a slow drift of the machine
cancels; time inside the instrumented window as the seed's snippet does, and
separately the instrument's enter, stop and post-processing; count events per
trial from the instrument's own records; hand the per-trial numbers to the C
engine for the statistics.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

from .errors import UsageError, WorkloadError
from .instruments import Instrument, Trial

# Kineto logs two lines per profiler start/stop on stderr; quiet unless asked.
os.environ.setdefault("KINETO_LOG_LEVEL", "6")


@dataclass
class Window:
    wall_s: float
    gpu_s: float | None = None


@dataclass
class Pairs:
    """Everything measured so far; valid at any point, so that an interrupted
    or failed run still reports what it measured."""

    baseline: list = field(default_factory=list)   # Window per baseline trial
    treated: list = field(default_factory=list)    # Trial per instrumented trial
    order: list = field(default_factory=list)      # "AB" or "BA" per pair
    warmup_s: float = 0.0
    error: BaseException | None = None
    interrupted: bool = False

    @property
    def n(self) -> int:
        return min(len(self.baseline), len(self.treated))


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
            sync()
            t1 = perf()
            return Window(t1 - t0, start.elapsed_time(end) * 1e-3)

        return window

    def window():
        t0 = perf()
        for _ in range(iters):
            iteration()
        return Window(perf() - t0)

    return window


def conditions(device: str, threads: int, instrument: Instrument, extra: dict) -> dict:
    import torch

    from . import __version__, _engine

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    cond = {
        "opskew": __version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "cpu": cpu,
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
    cond.update(extra)
    return cond


def run_pairs(iteration, instrument: Instrument, *, trials: int, iters: int, device: str,
              warmup_s: float = 0.3, progress: Callable[[int, int], None] | None = None,
              reference: Instrument | None = None) -> Pairs:
    """Runs the paired trials. Baseline trials run the workload bare, or under
    `reference` when given (then the difference is the instrument's cost over
    the reference's: an option's marginal cost). Never raises for the workload:
    an exception from it, or Ctrl-C, ends the run and is kept in the result
    with what was measured before it."""
    pairs = Pairs()
    window = make_window(iteration, iters, device)
    try:
        # Warm up the workload (caches, allocator, lazy init) for warmup_s,
        # then open and close the instrument once: the first torch.profiler
        # session initializes Kineto, which takes seconds and is not overhead
        # of the steady state.
        t0 = time.perf_counter()
        while True:
            window()
            if time.perf_counter() - t0 >= warmup_s:
                break
        short = make_window(iteration, max(1, iters // 4), device)
        instrument.trial(short)
        if reference is not None:
            reference.trial(short)
        pairs.warmup_s = time.perf_counter() - t0
        for i in range(trials):
            order = "AB" if i % 2 == 0 else "BA"
            for which in order:
                if which == "A":
                    pairs.baseline.append(reference.trial(window).window if reference else window())
                else:
                    pairs.treated.append(instrument.trial(window))
            pairs.order.append(order)
            if progress:
                progress(i + 1, trials)
    except KeyboardInterrupt:
        pairs.interrupted = True
    except Exception as exc:  # the workload's own failure, kept with the data
        pairs.error = exc
    # Drop an incomplete last pair.
    n = pairs.n
    del pairs.baseline[n:], pairs.treated[n:]
    return pairs


def workload_error(pairs: Pairs, partial) -> WorkloadError:
    exc = pairs.error
    where = ""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None:
        where = f" at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
    return WorkloadError(f"the workload raised {type(exc).__name__}: {exc}{where} "
                         f"(after {pairs.n} complete pair(s) of trials)", partial=partial, cause=exc)


def progress_printer(label: str):
    """A one-line progress indicator on stderr, only when stderr is a terminal."""
    if not sys.stderr.isatty():
        return None
    start = time.perf_counter()

    def show(done, total):
        el = time.perf_counter() - start
        eta = el / done * (total - done)
        end = "\n" if done == total else ""
        sys.stderr.write(f"\r{label}: pair {done}/{total}, {el:.0f}s elapsed, ~{eta:.0f}s left  {end}")
        sys.stderr.flush()

    return show
