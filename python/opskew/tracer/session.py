"""opskew.trace(): the C operator tracer, in process.

    import torch, opskew               # any order for the default (native)
    with opskew.trace("trace.json") as t:
        model(x)
    print(t.summary)                   # key_averages()-like table, self-time corrected
    t.summary.rows                     # list of dicts (schema opskew.trace.summary/1)
    t.events                           # columns: ts_ns, dur_ns, name_id, tid, depth
    t.instrument                       # "native", "itt", "nvtx" or "pyhook"

Instruments (all feed the same C runtime and writer):

- ``native`` (CPU, the default): opskew's own RecordFunction callback, a C++
  shim compiled against the imported torch at first use and cached
  (opskew.native), forwarding to libopskew_native.so. No import order. When
  it cannot be built or OPSKEW_NATIVE=0, the session falls back to ITT (if it
  could still be arranged), else pyhook, with one line on stderr.
- ``itt`` (``instrument="itt"``; the first fallback): PyTorch's statically linked
  ittnotify loads the collector library named by INTEL_LIBITTNOTIFY64
  (libopskew_itt.so, next to this file) and `emit_itt()` sends every operator
  to it. ITT creates PyTorch's domain when libtorch loads, so the variable must
  be in the environment *before* `import torch`: trace() sets it if torch is not
  imported yet, and otherwise checks that it was, and says how to fix it if not.
- ``nvtx`` (``device="cuda"``): NVTX v3 in libtorch_cuda loads the injection
  library named by NVTX_INJECTION64_PATH (libopskew_nvtx.so) and `emit_nvtx()`
  pushes a range per operator. Same rule: set before `import torch`.
- ``pyhook`` (the fallback where ITT is missing, or on request): a C profile
  hook (opskew._pyhook) records calls of torch's *builtin functions*
  ("torch.add"), not aten operators: operators reached through syntax
  (``a + b``), inside other operators, or in backward are not seen.

Python talks to the collector through ctypes (dlopen of the same path returns
the library that ITT or NVTX loaded): every collector exports the same
osk_collector_* life cycle, declared once in opskew._boot, which also turns
the instruments on (the same code `opskew record`'s child runs).
``OPSKEW_INSTRUMENT`` (native, itt, pyhook, nvtx) forces an instrument when
``instrument=`` is not given.

This module never imports torch at import time.
"""

from __future__ import annotations

import array
import ctypes
import io
import os
import sys
from typing import Iterator, NamedTuple, Optional

from opskew import _engine
from opskew.calibration.store import tracer_cost
from opskew.errors import OpskewError, UsageError, from_c_error
from opskew.results.views import lazy
from opskew.tracer import collectors as _boot
from opskew.tracer import native
from opskew.tracer.collectors import hook_new_threads  # noqa: F401 - re-exported: part of this module's surface

trace_summary = lazy("tables.trace_summary")

COLLECTOR_ENV = _boot.ENV["itt"]
NVTX_ENV = _boot.ENV["nvtx"]
INSTRUMENT_ENV = "OPSKEW_INSTRUMENT"
INSTRUMENTS = ("auto", "native", "itt", "pyhook", "nvtx")

__all__ = ["trace", "arrange", "collector_path", "resolve_instrument", "Trace", "TracerSetupError"]


class TracerSetupError(UsageError):
    """The tracer cannot run in this process; the message says what to do."""


def collector_path(instrument: str = "itt") -> str:
    """Absolute path of the collector library for `instrument` ("itt", "nvtx"
    or "native"; OPSKEW_ITT_COLLECTOR / OPSKEW_NVTX_COLLECTOR /
    OPSKEW_NATIVE_COLLECTOR override)."""
    path = _boot.default_path(instrument)
    if not os.path.isfile(path):
        raise TracerSetupError(
            f"opskew's {_boot.WHAT[instrument]} collector is missing ({path}); reinstall opskew "
            "(pip install --no-build-isolation .) so that it is built"
        )
    return path


def resolve_instrument(instrument: Optional[str], device: str = "cpu") -> str:
    """The instrument asked for: `instrument`, else $OPSKEW_INSTRUMENT, else
    "auto"; "auto" is "nvtx" for device "cuda" and otherwise stays "auto"
    (native, else ITT, else pyhook, decided when the session starts)."""
    if device not in ("cpu", "cuda"):
        raise UsageError(f"device must be 'cpu' or 'cuda', not {device!r}")
    inst = instrument or os.environ.get(INSTRUMENT_ENV) or "auto"
    if inst not in INSTRUMENTS:
        raise UsageError(f"unknown instrument {inst!r} (choose from {', '.join(INSTRUMENTS)})")
    if inst == "auto" and device == "cuda":
        inst = "nvtx"
    return inst


_TORCH_FIRST = {
    "itt": (
        "torch was imported before opskew could arrange its ITT collector, and PyTorch "
        "creates its ITT domain when it is imported. Do one of: (1) call opskew.trace() "
        "or opskew.tracer.arrange() before `import torch`; (2) start Python with "
        "{env}={path} in the environment; (3) run the script under "
        "`opskew record -o trace.json -- python script.py`; (4) use the default instrument, "
        "native (opskew.trace() without instrument=\"itt\"), which needs no import order; or "
        "(5) use the fallback opskew.trace(instrument=\"pyhook\"), which records torch builtin "
        "calls only."
    ),
    "nvtx": (
        "torch was imported before opskew could arrange its NVTX collector, and NVTX "
        "reads {env} when torch first uses it. Call opskew.trace(device=\"cuda\") "
        "before `import torch`, start Python with {env}={path}, or run the script "
        "under `opskew record --device cuda -- python script.py`."
    ),
}
_OTHER_TOOL = {"itt": "another ITT collector, for example VTune's",
               "nvtx": "another NVTX tool, for example Nsight Systems"}


def arrange(instrument: str = "itt") -> str:
    """Makes the next `import torch` load opskew's collector for `instrument`
    ("itt" or "nvtx"); returns its path.

    Raises TracerSetupError if torch is already imported without it, or if
    another tool's collector (VTune's, Nsight's) is configured.
    """
    path, env = collector_path(instrument), _boot.ENV[instrument]
    current = os.environ.get(env)
    if current and os.path.realpath(current) != os.path.realpath(path):
        raise TracerSetupError(
            f"{env} is already set to {current} ({_OTHER_TOOL[instrument]}); unset it to trace with opskew"
        )
    if not current and "torch" in sys.modules:
        raise TracerSetupError(_TORCH_FIRST[instrument].format(env=env, path=path))
    os.environ[env] = path
    return path


def _not_bound(instrument: str, path: str):
    """The error for a collector torch did not bind (bound 0, or -1: refused)."""
    def message(bound: int) -> str:
        if instrument == "itt":
            if bound < 0:
                return ("PyTorch's ittnotify has a layout opskew does not know (ittapi major "
                        "version is not 3); please report it with your torch version")
            return _TORCH_FIRST["itt"].format(env=COLLECTOR_ENV, path=path)
        return (f"torch's NVTX did not load opskew's collector ({path}): torch was imported "
                f"before {NVTX_ENV} was set, or this build links a pre-v3 NVTX without "
                "injection support" + (" (a table it offered was refused)" if bound < 0 else ""))

    return message


class Event(NamedTuple):
    name: str
    ts_ns: int  # CLOCK_MONOTONIC_RAW
    dur_ns: int
    tid: int
    depth: int


class Events:
    """The session's events as columns (array.array), grouped by thread and,
    within a thread, in the order operators ended. Iterating yields Event."""

    def __init__(self, names, ts_ns, dur_ns, name_id, tid, depth):
        self.names = names  # name_id -> str
        self.ts_ns = ts_ns
        self.dur_ns = dur_ns
        self.name_id = name_id
        self.tid = tid
        self.depth = depth

    def __len__(self) -> int:
        return len(self.ts_ns)

    def __iter__(self) -> Iterator[Event]:
        names = self.names
        for i in range(len(self.ts_ns)):
            yield Event(names[self.name_id[i]], self.ts_ns[i], self.dur_ns[i], self.tid[i], self.depth[i])

    def __getitem__(self, i) -> Event:
        return Event(self.names[self.name_id[i]], self.ts_ns[i], self.dur_ns[i], self.tid[i], self.depth[i])

    def __repr__(self) -> str:
        return f"<opskew.tracing.Events: {len(self)} events>"


class Summary:
    """Per-operator statistics computed in C, read through ctypes. str() is
    the table (every row), rendered from .data by the renderer every opskew
    table uses (opskew.tables.trace_summary, as `record --summary`); .rows
    one dict per operator (the fields of osk_trace_op_t, with the name as a
    string), sorted by self time; .data the session's figures with .rows
    under "ops", the keys of the JSON summary (schema opskew.trace.summary/1)."""

    def __init__(self, data: dict):
        self.data = data
        self.rows = data.get("ops", [])

    @property
    def table(self) -> str:
        buf = io.StringIO()
        trace_summary(self.data, top=0, out=buf)
        return buf.getvalue()

    def __str__(self) -> str:
        return self.table

    def __repr__(self) -> str:
        return f"<opskew.tracing.Summary: {len(self.rows)} operators>"


def _summarize(trace: "Trace", window: Optional[tuple] = None) -> Summary:
    lib, snap, out = trace._lib, trace._snap, ctypes.c_void_p()
    if window is None:
        rc = lib.osk_trace_summarize(snap, None, ctypes.byref(out))
    else:
        rc = lib.osk_trace_summarize_window(snap, None, int(window[0]), int(window[1]), ctypes.byref(out))
    s = out.value
    if rc != 0 or not s:  # *out is NULL on failure
        raise from_c_error(rc or _engine.ENOMEM, "opskew tracer: building the summary")
    try:
        fields = [f for f, _ in _boot.Op._fields_]
        rows = []
        for i in range(lib.osk_trace_summary_rows(s)):
            r = lib.osk_trace_summary_row(s, i).contents
            row = {f: getattr(r, f) for f in fields}
            row["name"] = lib.osk_trace_snapshot_name(snap, r.name).decode("utf-8", "replace")
            rows.append(row)
        residual = int(lib.osk_trace_summary_residual_ns(s))
    finally:
        lib.osk_trace_summary_free(s)
    data = {"schema": "opskew.trace.summary/1", "instrument": trace.instrument,
            "events": trace.n_events if window is None else sum(r["calls"] for r in rows),
            "window_ns": list(window) if window is not None else None,
            "threads": int(lib.osk_trace_snapshot_threads(snap)), "lost": trace.lost,
            "unmatched_ends": int(lib.osk_trace_snapshot_unmatched_ends(snap)),
            "open_at_stop": int(lib.osk_trace_snapshot_open_at_stop(snap)),
            "calibration": trace.calibration, "residual_ns": residual, "ops": rows}
    return Summary(data)


class Trace:
    """What one opskew.trace() session recorded. Available after the block.
    `instrument` says what recorded it: "native", "itt", "nvtx" or "pyhook"."""

    def __init__(self, path: Optional[str], instrument: str = "itt"):
        self.path = path
        self.instrument = instrument
        self._lib = None
        self._snap = None
        self._summary = None
        self._events = None

    def _attach(self, lib, snap):
        self._lib, self._snap = lib, snap

    def _need(self):
        if not self._snap:
            raise RuntimeError("the trace is available after the `with opskew.trace()` block ends")

    @property
    def n_events(self) -> int:
        self._need()
        return int(self._lib.osk_trace_snapshot_events(self._snap))

    @property
    def lost(self) -> dict:
        """Events not recorded, by cause ("total" excludes "name": unnamed events are kept)."""
        self._need()
        lib = self._lib
        out = {"total": int(lib.osk_trace_snapshot_lost_total(self._snap))}
        for i in range(lib.osk_trace_loss_count()):
            out[lib.osk_trace_loss_key(i).decode()] = int(lib.osk_trace_snapshot_lost(self._snap, i))
        return out

    @property
    def calibration(self) -> Optional[dict]:
        self._need()
        c = self._lib.osk_trace_snapshot_calib(self._snap).contents
        if not c.valid:
            return None
        return {"w_ns": c.w_ns, "delta_ns": c.delta_ns, "w_spread_ns": c.w_spread_ns,
                "scope": "profile hook" if self.instrument == "pyhook" else "collector",
                "w_source": self._lib.osk_trace_snapshot_w_source(self._snap).decode("utf-8", "replace")}

    @property
    def summary(self) -> Summary:
        self._need()
        if self._summary is None:
            self._summary = _summarize(self)
        return self._summary

    def window(self, from_ns: int, to_ns: int) -> Summary:
        """The summary of the events that begin in [from_ns, to_ns), on the
        events' own time line (their ts_ns; take the bounds with now_ns()):
        one step of several in one session. An operator outside it is
        dropped with its children."""
        self._need()
        if not from_ns <= to_ns:
            raise ValueError(f"window: from_ns <= to_ns, not [{from_ns}, {to_ns})")
        return _summarize(self, (from_ns, to_ns))

    @property
    def events(self) -> Events:
        self._need()
        if self._events is None:
            lib, snap = self._lib, self._snap
            n = int(lib.osk_trace_snapshot_events(snap))
            cols = [array.array("q", bytes(8 * n)), array.array("q", bytes(8 * n)),
                    array.array("I", bytes(4 * n)), array.array("I", bytes(4 * n)),
                    array.array("H", bytes(2 * n))]
            if cols[2].itemsize != 4 or cols[4].itemsize != 2:  # pragma: no cover
                raise RuntimeError("unexpected array item sizes on this platform")
            ptrs = [c.buffer_info()[0] if n else None for c in cols]
            got = lib.osk_trace_snapshot_columns(snap, *ptrs)
            if got != n:  # pragma: no cover - the C side copies all or nothing
                raise RuntimeError(f"opskew tracer: copied {got} of {n} events")
            nn = int(lib.osk_trace_snapshot_names(snap))
            names = [lib.osk_trace_snapshot_name(snap, i).decode("utf-8", "replace") for i in range(nn)]
            self._events = Events(names, *cols)
        return self._events

    def write(self, path: str) -> str:
        """Writes the Chrome trace (Kineto conventions) to `path`."""
        self._need()
        path = os.path.abspath(path)
        rc = self._lib.osk_trace_write_chrome(self._snap, os.fsencode(path))
        if rc != 0:
            raise from_c_error(rc, f"could not write the trace to {path}", path=path)
        return path

    def __del__(self):
        if self._snap and self._lib is not None:
            self._lib.osk_trace_snapshot_free(self._snap)
            self._snap = None

    def __repr__(self) -> str:
        if not self._snap:
            return "<opskew.tracing.Trace: recording>"
        return (f"<opskew.tracing.Trace: {self.n_events} events ({self.instrument}), "
                f"lost {self.lost['total']}, path={self.path!r}>")


# ------------------------------------------------------------------ trace()


def now_ns() -> int:
    """Now on the tracer's time line, the events' ts_ns (CLOCK_MONOTONIC_RAW's
    nanoseconds through this process's clock calibration): the bounds for
    Trace.window. time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW) drifts from
    it in a long-lived process (by hundreds of us after a minute)."""
    return int(_boot.load(collector_path("native"), must_be_loaded=False).osk_trace_now_ns())


class trace:  # noqa: N801 - used like a function: `with opskew.trace():`
    """Records every PyTorch operator run inside the block with opskew's C tracer.

    path: where to write a Chrome trace when the block ends (None: don't write;
    call .write(path) on the result later).
    instrument: "auto" (default; $OPSKEW_INSTRUMENT overrides), "native",
    "itt", "nvtx" or "pyhook" (see the module documentation). "auto" is
    native on CPU (falling back to ITT, else pyhook, with one line on stderr),
    and NVTX for device="cuda".
    device: "cpu" or "cuda" (needs a CUDA build of torch and a device).

    Threads started inside the block are recorded too; threads that were
    already running are not (PyTorch's hooks are per thread; the pyhook
    instrument hooks them on Python 3.12+ only). Sessions do not nest.
    """

    def __init__(self, path: Optional[str] = None, instrument: Optional[str] = None, device: str = "cpu"):
        self.path = os.path.abspath(path) if path else None
        if self.path and not os.path.isdir(os.path.dirname(self.path)):
            raise UsageError(f"the directory of {self.path} does not exist")
        self.instrument = resolve_instrument(instrument, device)
        self.device = device
        self._result = None
        self._session = None

    def __enter__(self) -> Trace:
        inst = self.instrument
        if inst == "pyhook":
            import torch  # noqa: F401 - nothing to arrange for the fallback

            return self._start(inst, torch)
        if inst == "nvtx":
            path = arrange("nvtx")
            import torch

            why = _boot.cuda_missing_reason(torch)
            if why:
                raise TracerSetupError(f"device=\"cuda\" asked for, but {why}")
            return self._start(inst, torch, path)
        if inst in ("native", "auto"):
            return self._enter_native(inst)
        path = arrange("itt")
        import torch  # only now: the collector is arranged

        if not _boot.has_itt(torch):
            raise TracerSetupError(_boot.no_itt_message(torch, 'instrument="pyhook"'))
        return self._start("itt", torch, path)

    def _enter_native(self, inst: str) -> Trace:
        """native, or auto on CPU: the native collector, else ITT, else pyhook.
        ITT is arranged first while it still can be (before `import torch`),
        only so that the fallback stays possible."""
        itt_path = None
        try:
            itt_path = arrange("itt")
        except TracerSetupError:
            pass  # torch imported without it, or another ITT tool: no ITT fallback
        import torch

        try:
            session, why = _boot.start_native_or_why(native, torch, collector_path("native"))
        except _boot.SetupError as exc:
            raise TracerSetupError(str(exc)) from None
        if session is not None:
            return self._started(session, "native")
        fallback = _boot.native_fallback(torch, itt_path is not None, why, "opskew")
        return self._start(fallback, torch, itt_path if fallback == "itt" else None)

    def clock(self):
        """The running session's osk_trace_now_ns (a ctypes function): now on
        its events' time line, for Trace.window's bounds, at a ctypes call's
        cost."""
        return self._session.lib.osk_trace_now_ns

    def enter_native_only(self) -> Trace:
        """__enter__ for the native collector alone, without a fallback
        (opskew.profile's leaf reference, which needs aten operators as the
        profiler records them): TracerSetupError when it is unavailable."""
        import torch

        try:
            session, why = _boot.start_native_or_why(native, torch, collector_path("native"))
        except _boot.SetupError as exc:
            raise TracerSetupError(str(exc)) from None
        if session is None:
            raise TracerSetupError(f"opskew's native collector is unavailable ({why})")
        return self._started(session, "native")

    def _start(self, inst: str, torch, path: Optional[str] = None) -> Trace:
        try:
            if inst == "pyhook":
                # Deferred: loading the module loads its collector runtime
                # into the process (collectors.active_anywhere finds it).
                from opskew import _pyhook

                session = _boot.start_pyhook(_pyhook, torch)
            else:
                session = _boot.start_collector(torch, inst, path, _not_bound(inst, path))
        except _boot.SetupError as exc:
            raise TracerSetupError(str(exc)) from None
        return self._started(session, inst)

    def _started(self, session, inst: str) -> Trace:
        import torch

        # One W for the tracer (docs/tracer.md): the in-window W opskew
        # calibrate stored for this instrument, when there is one.
        try:
            found = tracer_cost(inst, torch.__version__, self.device)
        except Exception:  # noqa: BLE001 - a cache we cannot read: the self-calibration stands
            found = None
        _boot.set_cost(session.lib, found)
        self._session = session
        self.instrument = inst
        self._result = Trace(self.path, inst)
        return self._result

    def __exit__(self, exc_type, exc, tb) -> bool:
        session, self._session = self._session, None
        snap, err = session.stop()  # stops recording first, then turns the instrument off
        if not snap:
            if exc_type is None:
                raise from_c_error(err, "opskew tracer: stopping the session")
            return False
        self._result._attach(session.lib, snap)
        if self.path:
            try:
                self._result.write(self.path)
            except OpskewError:
                if exc_type is None:
                    raise
                print(f"opskew: could not write the trace to {self.path}", file=sys.stderr)
        return False
