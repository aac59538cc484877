"""What a torch.profiler capture will cost before it is made: the trace's size
on disk, the stop and export time, and the peak memory the profiler adds,
from a few short captures of the user's own workload (`opskew advise`;
docs/commands.md, "A budget before capture").

Each probe is one capture as the advised snippet makes it: the profiler
opened with the configuration, N iterations, stop (`__exit__`), and
`export_chrome_trace` into a temporary file; no `key_averages()`. Each cost
is fitted as fixed + per-iteration x N over probes of two sizes, and the
budget is that line at the schedule's active iterations. Peak memory is the
process's peak resident set (Linux VmHWM, reset through /proc/self/clear_refs
before each probe) less its resident set when the probe began, after the
garbage collector and malloc_trim have returned what they can."""

from __future__ import annotations

import ctypes
import gc
import os
import re
import tempfile
import time

from opskew import _engine
from opskew.measure.instruments import run_and_stop

# The probes' sizes: SMALL x n and 4 x SMALL x n iterations, each twice.
REPEATS = 2
SPREAD = 4


def _status_kb(key: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            m = re.search(key + r":\s+(\d+) kB", f.read())
    except OSError:
        return None
    return int(m.group(1)) if m else None


def _reset_peak() -> bool:
    """Resets the process's peak resident set (VmHWM) to its current one;
    False where the kernel does not let it (not Linux, no /proc)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _trim() -> None:
    """The freed heap back to the system where glibc can (malloc_trim)."""
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def probe(iteration, options: dict, activities, iters: int, sync=None) -> dict:
    """One capture of `iters` iterations: stop and export seconds, the
    trace's bytes, the peak resident memory it added (None where it cannot
    be measured)."""
    import torch

    _trim()
    rss0 = _status_kb("VmRSS")
    peak_ok = rss0 is not None and _reset_peak()
    prof = torch.profiler.profile(activities=activities, **options)
    prof.__enter__()

    def body():
        for _ in range(iters):
            iteration()
        if sync is not None:
            sync()

    _, t0, t1 = run_and_stop(prof, body)
    fd, path = tempfile.mkstemp(prefix="opskew-budget-", suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        t2 = time.perf_counter()
        peak = _status_kb("VmHWM") if peak_ok else None
        size = os.path.getsize(path)
    finally:
        os.unlink(path)
    del prof
    return {"iters": iters, "stop_s": t1 - t0, "export_s": t2 - t1, "trace_bytes": size,
            "peak_added_bytes": None if peak is None else max(peak - rss0, 0) * 1024}


def _line(points: list, key: str) -> dict | None:
    """fixed + per_iter x N through the medians at the two sizes (neither
    below zero)."""
    by = {}
    for p in points:
        if p[key] is not None:
            by.setdefault(p["iters"], []).append(float(p[key]))
    if len(by) < 2:
        return None
    (n1, a), (n2, b) = sorted(by.items())[:2]
    y1, y2 = _engine.quantile(a, 0.5), _engine.quantile(b, 0.5)
    per = max((y2 - y1) / (n2 - n1), 0.0)
    return {"fixed": max(y1 - per * n1, 0.0), "per_iter": per}


def measure(iteration, options: dict, activities, small: int, sync=None) -> dict:
    """The probes (SMALL and SPREAD x SMALL iterations, REPEATS each, the
    sizes alternating) and the line fitted to each cost."""
    points = []
    for _ in range(REPEATS):
        for n in (small, SPREAD * small):
            points.append(probe(iteration, options, activities, n, sync))
    model = {k: _line(points, k) for k in ("trace_bytes", "stop_s", "export_s", "peak_added_bytes")}
    return {"probes": points, "model": model, "small": small,
            "method": (f"{REPEATS} captures each of {small} and {SPREAD * small} iterations as the snippet makes "
                       "them (open, iterations, stop, export_chrome_trace; no key_averages), each cost fitted "
                       "as fixed + per iteration through the two sizes' medians; memory: the peak resident set "
                       "(VmHWM, reset before each capture) less the resident set when it began")}


def at(model: dict, iters: float) -> dict:
    """The costs of a capture of `iters` active iterations."""
    def ev(key):
        m = model.get(key)
        return None if m is None else m["fixed"] + m["per_iter"] * iters

    stop, export = ev("stop_s"), ev("export_s")
    return {"iters": iters, "trace_bytes": ev("trace_bytes"),
            "stop_export_s": None if stop is None or export is None else stop + export,
            "stop_s": stop, "export_s": export, "peak_added_bytes": ev("peak_added_bytes")}


def weak_points(options: dict, device: str, peak_measured: bool) -> list:
    """Where the estimate is weak, for this configuration."""
    out = ["it assumes every captured iteration is like the probed ones: a capture that reaches other code "
           "(evaluation, checkpointing, a data-dependent branch) records other events"]
    if options.get("with_stack"):
        out.append("with_stack: stop symbolizes each distinct Python stack, so its time grows with the distinct "
                   "stacks the capture reaches, not only with its length; the probes saw the stacks of the probed "
                   "iterations")
    if options.get("profile_memory"):
        out.append("profile_memory: its records grow with the allocations the iterations make")
    if device == "cuda":
        out.append("CUDA: CUPTI's buffers and the GPU events are in the probes, but device memory is not counted "
                   "(host memory only); not validated on a GPU")
    if not peak_measured:
        out.append("peak memory not measured: this system does not let a process reset its peak resident set "
                   "(/proc/self/clear_refs)")
    out.append("the process's first capture also loads and initializes the profiler (a few MB and tens of ms "
               "here); the probes ran after it")
    return out


def from_cycle(rep: dict, cycles: int) -> dict:
    """What `opskew profile`'s first cycle cost as it ran (its report `rep`),
    and the run's disk use at that rate for `cycles` cycles (0: as many as
    the script runs): the raw trace's bytes, its corrected trace's where
    there is one yet, and the time outside the steps (torch's stop, the
    export in on_trace_ready, opskew's own analysis and correction)."""
    def size(path):
        try:
            return os.path.getsize(path) if path else None
        except OSError:
            return None

    raw, cor = size(rep.get("raw_trace")), size(rep.get("corrected_trace"))
    per_cycle = None if raw is None else raw + (cor if cor is not None else raw)
    ns = {k: rep.get(k) for k in ("stop_ns", "on_trace_ready_ns", "opskew_ns")}
    return {"cycle": rep.get("cycle"), "raw_trace_bytes": raw, "corrected_trace_bytes": cor,
            "corrected_as_raw": cor is None, "stop_ns": ns["stop_ns"], "export_ns": ns["on_trace_ready_ns"],
            "opskew_ns": ns["opskew_ns"], "cycles": cycles or None,
            "run_bytes": per_cycle * cycles if per_cycle is not None and cycles else None,
            "peak_memory": "not measured in the run: `opskew advise TARGET` estimates it before a capture"}
