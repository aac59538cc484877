"""Instruments: the things whose overhead opskew measures.

An instrument wraps a measurement window. `Instrument.trial(window)` opens the
instrument, runs `window()` (which times the workload's iterations and returns
what it measured), closes it, and times each phase separately:

* enter:  opening the instrument (profiler start);
* window: the timed iterations, timed inside the instrument's `with` block, where a user's loop timer sits;
* stop:   closing it (``__exit__``: profiler stop, trace collection);
* post:   post-processing the user would do next (``key_averages()``);
* export: writing the trace (only when asked).

It also counts the events the instrument recorded, from the instrument's own
records, so the added cost is per event and not per assumed operator.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from opskew import _engine
from opskew.analyze.tracefile import summarize
from opskew.errors import UsageError
from opskew.tracer import native
from opskew.tracer import session as tracer_session
from opskew.vocab import OP_CATEGORIES, PROFILER_OPTIONS, PY_CATEGORIES

# Names of the Python tracer's events (with_stack): "<built-in method add ...>",
# "file.py(123): function" and "nn.Module: Linear_0". key_averages() does not
# keep is_python_function.
_PY_FUNCTION = re.compile(r"^<built-in |\(\d+\): |^nn\.Module: ")


# key_averages() rows that are not RecordFunction events: profile_memory's
# allocation records and out-of-memory marks (torch.autograd.profiler_util's
# MEMORY_EVENT_NAME and OUT_OF_MEMORY_EVENT_NAME). Counted as operators they
# doubled the events of a loop of adds and halved W under profile_memory.
NON_OPERATOR_ROWS = ("[memory]", "[OutOfMemory]")


def run_and_stop(prof, body):
    """`body()` under the profiler `prof`, entered already, which is exited
    whether or not it raises: (its result, time.perf_counter() before and
    after the exit, which is the profiler's stop)."""
    try:
        result = body()
    except BaseException as exc:
        prof.__exit__(type(exc), exc, exc.__traceback__)
        raise
    t0 = time.perf_counter()
    prof.__exit__(None, None, None)
    return result, t0, time.perf_counter()


@dataclass
class Trial:
    """Timings of one instrumented trial, in seconds, and what it recorded."""

    window: Any
    enter_s: float = 0.0
    stop_s: float = 0.0
    post_s: float = 0.0
    export_s: float | None = None
    export_bytes: int | None = None
    op_events: int | None = None         # operator (RecordFunction) events
    python_events: int = 0               # Python-function events (with_stack)
    reported_op_self_s: float | None = None  # sum of self CPU time of operators
    reported_device_s: float | None = None   # CUDA: sum of self device (kernel) time
    extra: dict = field(default_factory=dict)


def timed_export(write, inspect=None) -> tuple:
    """Times `write(path)` into a temporary file; returns (seconds, bytes).
    `inspect(path)`, if given, reads the file before it is removed."""
    fd, path = tempfile.mkstemp(prefix="opskew-export-", suffix=".json")
    os.close(fd)
    try:
        t0 = time.perf_counter()
        write(path)
        took = time.perf_counter() - t0
        if inspect is not None:
            inspect(path)
        return took, os.path.getsize(path)
    finally:
        os.unlink(path)


def count_cupti_overhead(path: str, extra: dict) -> None:
    """CUPTI's own overhead activities, as Kineto exports them (cat
    "overhead"), counted by the C reader: how much the GPU-side instrument
    itself reports costing."""
    res = summarize(path, categories=["overhead"])
    extra["cupti_overhead_events"] = res["stats"]["complete_events"]
    extra["cupti_overhead_ns"] = sum(op["total_ns"] for op in res["ops"])




def keep_annotation(tr: "Trial", name: str, calls: int, total_s: float) -> None:
    """An annotation the caller wrapped around its window (`Instrument.
    annotations`): kept apart from the operators, with its reported duration."""
    tr.extra.setdefault("annotations", {})[name] = {"calls": calls, "total_s": total_s}


def count_from_trace(path: str, tr: "Trial", annotations=()) -> None:
    """Operator and Python-function events of an exported trace, counted by
    the C reader (the same split key_averages gives, at a fraction of the
    cost); also the operators' reported self time and the most-called Python
    function (the calibration's Python micro-workload reads its duration)."""
    t0 = time.perf_counter()
    res = summarize(path, categories=list(OP_CATEGORIES + PY_CATEGORIES))
    ops = [o for o in res["ops"] if o["cat"] in OP_CATEGORIES]
    for o in ops:
        if o["name"] in annotations:
            keep_annotation(tr, o["name"], o["calls"], o["total_ns"] * 1e-9)
    ops = [o for o in ops if o["name"] not in annotations]
    py = [o for o in res["ops"] if o["cat"] in PY_CATEGORIES]
    tr.op_events = sum(o["calls"] for o in ops)
    tr.python_events = sum(o["calls"] for o in py)
    tr.reported_op_self_s = sum(o["self_ns"] for o in ops) * 1e-9
    tr.extra["op_self_ns"] = {o["name"]: (o["calls"], o["self_ns"]) for o in ops}
    if py:
        top = max(py, key=lambda o: o["calls"])
        tr.extra["py_top"] = {"name": top["name"], "calls": top["calls"], "total_ns": top["total_ns"]}
    tr.extra["count_s"] = time.perf_counter() - t0


class Instrument:
    name = "instrument"
    counts_events = False  # whether trial() returns op_events
    # Names of annotations (record_function) the caller wraps around its
    # window: not operators, so not in op_events or reported_op_self_s; each
    # one's calls and reported duration go to Trial.extra["annotations"].
    annotations: tuple = ()

    def describe(self) -> dict:
        return {"instrument": self.name}

    def label(self) -> str:
        return self.name

    def trial(self, window: Callable[[], Any]) -> Trial:  # pragma: no cover
        raise NotImplementedError


class TorchProfiler(Instrument):
    """`torch.profiler.profile` with the chosen options."""

    name = "torch.profiler"
    counts_events = True

    def __init__(self, device: str = "cpu", export: bool = False, cuda_activity: bool | None = None,
                 count: str = "key_averages", **options):
        unknown = set(options) - set(PROFILER_OPTIONS)
        if unknown:
            raise UsageError(f"unknown profiler option(s): {', '.join(sorted(unknown))}")
        self.options = {k: bool(options.get(k, False)) for k in PROFILER_OPTIONS}
        self.device = device
        self.export = export
        # On CUDA both activities by default; CPU-only is a matrix row of its own.
        self.cuda_activity = (device == "cuda") if cuda_activity is None else cuda_activity
        # How events are counted: "key_averages" (what users call; 50-90 us
        # per event on torch 2.13) or "trace" (export, then the C reader: a
        # few us per event, for calibrations that need long windows).
        if count not in ("key_averages", "trace"):
            raise UsageError(f"unknown event count method: {count}")
        self.count = count

    def describe(self) -> dict:
        import torch

        acts = ["CPU"] + (["CUDA"] if self.cuda_activity else [])
        return {"instrument": self.name, "activities": acts, **self.options,
                "export": self.export, "torch": torch.__version__}

    def label(self) -> str:
        on = [k for k, v in self.options.items() if v]
        acts = "" if self.cuda_activity == (self.device == "cuda") else (
            ", CPU+CUDA" if self.cuda_activity else ", CPU only")
        return f"torch.profiler({', '.join(f'{k}=True' for k in on) or 'minimal'}{acts})"

    def _activities(self):
        import torch

        acts = [torch.profiler.ProfilerActivity.CPU]
        if self.cuda_activity:
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        return acts

    def trial(self, window, on_open=None):
        """`on_open(prof)`, if given, runs right after the profiler starts
        (scoped profiling toggles collection off there)."""
        import torch

        prof = torch.profiler.profile(activities=self._activities(), **self.options)
        t0 = time.perf_counter()
        prof.__enter__()
        if on_open is not None:
            on_open(prof)
        t1 = time.perf_counter()
        result, t2, t3 = run_and_stop(prof, window)
        if self.count == "trace":
            tr = Trial(window=result, enter_s=t1 - t0, stop_s=t3 - t2)
            def inspect_trace(p):
                count_from_trace(p, tr, self.annotations)
                if self.cuda_activity:
                    count_cupti_overhead(p, tr.extra)
            tr.export_s, tr.export_bytes = timed_export(prof.export_chrome_trace, inspect_trace)
            tr.post_s = tr.extra.pop("count_s")
            return tr
        averages = prof.key_averages()
        t4 = time.perf_counter()
        tr = Trial(window=result, enter_s=t1 - t0, stop_s=t3 - t2, post_s=t4 - t3)
        ops = py = 0
        self_us = dev_us = 0.0
        # One entry per distinct name: a short loop, not one over events.
        for avg in averages:
            if avg.key in self.annotations:
                keep_annotation(tr, avg.key, avg.count, avg.cpu_time_total * 1e-6)
                continue
            if _PY_FUNCTION.search(str(avg.key)):
                py += avg.count
                continue
            if avg.key in NON_OPERATOR_ROWS:
                tr.extra["memory_records"] = tr.extra.get("memory_records", 0) + avg.count
                continue
            ops += avg.count
            self_us += avg.self_cpu_time_total
            dev_us += getattr(avg, "self_device_time_total", 0.0) or 0.0
        tr.op_events, tr.python_events = ops, py
        tr.reported_op_self_s = self_us * 1e-6
        if self.cuda_activity:
            tr.reported_device_s = dev_us * 1e-6
        if self.export or self.cuda_activity:
            # On CUDA the trace is always exported once: CUPTI's overhead
            # events are counted from it.
            inspect = (lambda p: count_cupti_overhead(p, tr.extra)) if self.cuda_activity else None
            tr.export_s, tr.export_bytes = timed_export(prof.export_chrome_trace, inspect)
        return tr


class BusyWait(Instrument):
    """Test instrument of known cost: a C profile hook that busy-waits `ns`
    nanoseconds around each call of a torch builtin (half on entry, half on
    exit) and counts those calls as events. Used by the known-answer tests."""

    name = "busy-wait"
    counts_events = True

    def __init__(self, ns: int):
        if ns < 0:
            raise UsageError("busy-wait cost must be >= 0 ns")
        self.ns = int(ns)

    def describe(self):
        return {"instrument": self.name, "ns_per_event": self.ns}

    def label(self):
        return f"busy-wait({self.ns} ns/event)"

    def trial(self, window):
        t0 = time.perf_counter()
        _engine.inject_start(self.ns)
        t1 = time.perf_counter()
        try:
            result = window()
        finally:
            t2 = time.perf_counter()
            events, spun_ns = _engine.inject_stop()
            t3 = time.perf_counter()
        return Trial(window=result, enter_s=t1 - t0, stop_s=t3 - t2, op_events=events,
                     extra={"spun_ns": spun_ns})


class _Timed(Instrument):
    """An instrument opened and closed by two callables; it counts nothing,
    so per-event figures use the event count of a profiler arm of the same
    round (the same operators pass through RecordFunction either way)."""

    def _open(self):  # pragma: no cover
        raise NotImplementedError

    def _close(self):  # pragma: no cover
        raise NotImplementedError

    def trial(self, window):
        t0 = time.perf_counter()
        self._open()
        t1 = time.perf_counter()
        try:
            result = window()
        finally:
            t2 = time.perf_counter()
            self._close()
            t3 = time.perf_counter()
        return Trial(window=result, enter_s=t1 - t0, stop_s=t3 - t2)


class IttFloor(_Timed):
    """`torch.autograd.profiler.emit_itt()` with no ITT collector loaded:
    RecordFunction runs PyTorch's ITT callback, whose ITT calls return at once
    (the domain is NULL). The floor of any instrument fed through ITT."""

    name = "emit_itt"

    @staticmethod
    def available() -> str | None:
        """None when usable here, else why not."""
        import torch

        if not torch.profiler.itt.is_available():
            return "this torch build has no ITT (USE_ITT off, e.g. aarch64)"
        if os.environ.get("INTEL_LIBITTNOTIFY64"):
            return "INTEL_LIBITTNOTIFY64 is set: a collector is loaded, so this is no floor"
        return None

    def label(self):
        return "emit_itt, no collector (ITT floor)"

    def _open(self):
        import torch

        self._ctx = torch.autograd.profiler.emit_itt()
        self._ctx.__enter__()

    def _close(self):
        self._ctx.__exit__(None, None, None)


class EmptyObserver(_Timed):
    """RecordFunction with an empty global callback that asks for inputs, so
    every operator's arguments are boxed: the floor of any instrument that
    records shapes (`torch._C._autograd._set_empty_test_observer`)."""

    name = "empty-observer"

    def label(self):
        return "RecordFunction empty observer (+boxing)"

    def _open(self):
        import torch

        torch._C._autograd._set_empty_test_observer(True, 1.0)

    def _close(self):
        import torch

        # Removes every RecordFunction callback; none other is active here,
        # since arms run one at a time.
        torch._C._autograd._clear_callbacks()


class NativeFloor(_Timed):
    """opskew's native shim with its counting-only callback (thread-local, no
    inputs, outputs or ids): RecordFunction runs a callback that calls
    nothing. The floor of the native route."""

    name = "native-floor"

    @staticmethod
    def available() -> str | None:
        """None when usable here, else why not (and builds the shim once)."""
        import torch

        return native.shim(torch)[1]

    def label(self):
        return "native callback, counting only (native floor)"

    def _open(self):
        import torch

        self._shim = native.shim(torch)[0]
        self._shim.osk_shim_attach_thread(1)

    def _close(self):
        self._shim.osk_shim_detach_thread()


class OpskewTracer(Instrument):
    """opskew's own C tracer (`opskew.trace()`), fed by PyTorch's ITT hooks
    (instrument "itt", row "opskew") or by opskew's native RecordFunction
    callback ("native", row "opskew-native"). For ITT the process must have
    arranged the collector before importing torch (`opskew.tracing.arrange()`);
    `stop` is the snapshot, `export` the C Chrome writer."""

    counts_events = True

    def __init__(self, export: bool = True, instrument: str = "itt"):
        self.export = export
        self.instrument = instrument
        self.name = "opskew" if instrument == "itt" else "opskew-" + instrument

    def label(self):
        return f"opskew tracer ({'ITT' if self.instrument == 'itt' else self.instrument} collector)"

    def trial(self, window):
        session = tracer_session.trace(None, instrument=self.instrument)  # aten operators
        t0 = time.perf_counter()
        with session as rec:
            t1 = time.perf_counter()
            if rec.instrument != self.instrument:  # a fallback would price another instrument
                raise RuntimeError(f"opskew's {self.instrument} collector is unavailable here "
                                   f"(it fell back to {rec.instrument})")
            result = window()
            t2 = time.perf_counter()
        t3 = time.perf_counter()
        rows = rec.summary.rows  # computed in C
        t4 = time.perf_counter()
        tr = Trial(window=result, enter_s=t1 - t0, stop_s=t3 - t2, post_s=t4 - t3,
                   op_events=rec.n_events)
        if self.annotations and rows:
            for r in rows:
                if r["name"] in self.annotations:
                    keep_annotation(tr, r["name"], r["calls"], r["total_ns"] * 1e-9)
                    tr.op_events -= r["calls"]
            rows = [r for r in rows if r["name"] not in self.annotations]
        tr.reported_op_self_s = sum(r.get("self_ns", 0) for r in rows) * 1e-9 if rows else None
        if rows:
            tr.extra["op_self_ns"] = {r["name"]: (r["calls"], r.get("self_ns", 0)) for r in rows}
        tr.extra["lost"] = rec.lost["total"]
        cal = rec.calibration
        if cal:
            tr.extra["delta_ns"] = cal["delta_ns"]
            tr.extra["collector_w_ns"] = cal["w_ns"]
        if self.export:
            tr.export_s, tr.export_bytes = timed_export(rec.write)
        return tr


def parse_instrument(spec: str, *, device: str, export: bool = False,
                     options: dict | None = None) -> Instrument:
    """`torch` (default) or `busy-wait:NS` (the known-cost test instrument)."""
    options = options or {}
    if spec in ("torch", "torch.profiler"):
        return TorchProfiler(device=device, export=export, **options)
    if spec.startswith("busy-wait:"):
        if any(options.values()) or export:
            raise UsageError("profiler options apply to --instrument torch only")
        raw = spec.split(":", 1)[1]
        try:
            return BusyWait(int(raw))
        except ValueError:
            raise UsageError(f"bad busy-wait cost {raw!r}: expected whole nanoseconds") from None
    raise UsageError(f"unknown instrument {spec!r}: expected torch or busy-wait:NS")
