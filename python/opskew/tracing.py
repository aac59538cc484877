"""opskew.trace(): the C operator tracer, in process.

    import opskew                      # before torch: opskew must arrange the collector
    with opskew.trace("trace.json") as t:
        model(x)
    print(t.summary)                   # key_averages()-like table, self-time corrected
    t.summary.rows                     # list of dicts (schema opskew.trace.summary/1)
    t.events                           # columns: ts_ns, dur_ns, name_id, tid, depth
    t.instrument                       # "itt", "nvtx" or "pyhook"

Instruments (all feed the same C runtime and writer):

- ``itt`` (CPU, the default where torch has ITT): PyTorch's statically linked
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
the library that ITT or NVTX loaded). ``OPSKEW_INSTRUMENT`` (itt, pyhook,
nvtx) forces an instrument when ``instrument=`` is not given.

This module never imports torch at import time.
"""

from __future__ import annotations

import array
import ctypes
import json
import os
import sys
import threading
from typing import Iterator, NamedTuple, Optional

from .errors import OpskewError, UsageError

COLLECTOR_ENV = "INTEL_LIBITTNOTIFY64"
COLLECTOR_NAME = "libopskew_itt.so"
NVTX_ENV = "NVTX_INJECTION64_PATH"
NVTX_NAME = "libopskew_nvtx.so"
INSTRUMENT_ENV = "OPSKEW_INSTRUMENT"
INSTRUMENTS = ("auto", "itt", "pyhook", "nvtx")

__all__ = ["trace", "arrange", "arrange_nvtx", "collector_path", "nvtx_collector_path",
           "resolve_instrument", "Trace", "TracerSetupError"]


class TracerSetupError(UsageError):
    """The tracer cannot run in this process; the message says what to do."""


def collector_path() -> str:
    """Absolute path of the ITT collector library (OPSKEW_ITT_COLLECTOR overrides)."""
    path = os.environ.get("OPSKEW_ITT_COLLECTOR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), COLLECTOR_NAME)
    if not os.path.isfile(path):
        raise TracerSetupError(
            f"opskew's ITT collector is missing ({path}); reinstall opskew "
            "(pip install --no-build-isolation .) so that it is built"
        )
    return path


def nvtx_collector_path() -> str:
    """Absolute path of the NVTX injection library (OPSKEW_NVTX_COLLECTOR overrides)."""
    path = os.environ.get("OPSKEW_NVTX_COLLECTOR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), NVTX_NAME)
    if not os.path.isfile(path):
        raise TracerSetupError(
            f"opskew's NVTX collector is missing ({path}); reinstall opskew "
            "(pip install --no-build-isolation .) so that it is built"
        )
    return path


def resolve_instrument(instrument: Optional[str], device: str = "cpu") -> str:
    """The instrument asked for: `instrument`, else $OPSKEW_INSTRUMENT, else
    "auto"; "auto" is "nvtx" for device "cuda" and otherwise stays "auto"
    (ITT where torch has it, else the pyhook fallback, decided at import)."""
    if device not in ("cpu", "cuda"):
        raise UsageError(f"device must be 'cpu' or 'cuda', not {device!r}")
    inst = instrument or os.environ.get(INSTRUMENT_ENV) or "auto"
    if inst not in INSTRUMENTS:
        raise UsageError(f"unknown instrument {inst!r} (choose from {', '.join(INSTRUMENTS)})")
    if inst == "auto" and device == "cuda":
        inst = "nvtx"
    return inst


def cuda_missing_reason(torch) -> Optional[str]:
    """Why CUDA cannot be traced with this torch, or None if it can."""
    if getattr(torch.version, "cuda", None) is None:
        return f"torch {torch.__version__} is a CPU-only build (no CUDA); install a CUDA build of torch"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device"
    return None


_TORCH_FIRST = (
    "torch was imported before opskew could arrange its ITT collector, and PyTorch "
    "creates its ITT domain when it is imported. Do one of: (1) call opskew.trace() "
    "or opskew.tracing.arrange() before `import torch`; (2) start Python with "
    "{env}={path} in the environment; (3) run the script under "
    "`opskew record -o trace.json -- python script.py`; or (4) use the fallback "
    "opskew.trace(instrument=\"pyhook\"), which records torch builtin calls only."
)


def arrange() -> str:
    """Makes the next `import torch` load opskew's collector; returns its path.

    Raises TracerSetupError if torch is already imported without it, or if
    another ITT collector (VTune's) is configured.
    """
    path = collector_path()
    current = os.environ.get(COLLECTOR_ENV)
    if current and os.path.realpath(current) != os.path.realpath(path):
        raise TracerSetupError(
            f"{COLLECTOR_ENV} is already set to {current} (another ITT collector, for "
            "example VTune's); unset it to trace with opskew"
        )
    if not current and "torch" in sys.modules:
        raise TracerSetupError(_TORCH_FIRST.format(env=COLLECTOR_ENV, path=path))
    os.environ[COLLECTOR_ENV] = path
    return path


def arrange_nvtx() -> str:
    """Makes the next `import torch` inject opskew's NVTX collector; returns its path."""
    path = nvtx_collector_path()
    current = os.environ.get(NVTX_ENV)
    if current and os.path.realpath(current) != os.path.realpath(path):
        raise TracerSetupError(
            f"{NVTX_ENV} is already set to {current} (another NVTX tool, for example Nsight "
            "Systems); unset it to trace with opskew"
        )
    if not current and "torch" in sys.modules:
        raise TracerSetupError(
            "torch was imported before opskew could arrange its NVTX collector, and NVTX "
            f"reads {NVTX_ENV} when torch first uses it. Call opskew.trace(device=\"cuda\") "
            f"before `import torch`, start Python with {NVTX_ENV}={path}, or run the script "
            "under `opskew record --device cuda -- python script.py`."
        )
    os.environ[NVTX_ENV] = path
    return path


# ------------------------------------------------------------------ ctypes


class _Event(ctypes.Structure):
    _fields_ = [
        ("ts_ns", ctypes.c_int64),
        ("dur_ns", ctypes.c_int64),
        ("name", ctypes.c_uint32),
        ("tid", ctypes.c_uint32),
        ("depth", ctypes.c_uint16),
        ("category", ctypes.c_uint16),
        ("reserved", ctypes.c_uint32),
    ]


class _Calib(ctypes.Structure):
    _fields_ = [
        ("w_ns", ctypes.c_double),
        ("delta_ns", ctypes.c_double),
        ("w_spread_ns", ctypes.c_double),
        ("pairs", ctypes.c_uint32),
        ("rounds", ctypes.c_uint32),
        ("valid", ctypes.c_int),
    ]


_LOSS_KEYS = ("nomem_chunk", "nomem_thread", "depth", "name")  # OSK_TRACE_LOSS_MAP order


def _declare(lib, prefix: Optional[str] = "osk_itt"):
    """Declares the tracer's C API on `lib`; `prefix` names the collector's
    own control functions (osk_itt_*, osk_nvtx_*; None for _pyhook)."""
    P, I, U32, SZ = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_size_t
    sig = {}
    if prefix:
        sig.update({
            f"{prefix}_bound": (I, []),
            f"{prefix}_start": (I, []),
            f"{prefix}_stop": (P, [ctypes.POINTER(I)]),
        })
    sig.update({
        "osk_trace_active": (I, []),
        "osk_trace_snapshot_free": (None, [P]),
        "osk_trace_snapshot_events": (SZ, [P]),
        "osk_trace_snapshot_lost": (ctypes.c_uint64, [P, I]),
        "osk_trace_snapshot_lost_total": (ctypes.c_uint64, [P]),
        "osk_trace_snapshot_unmatched_ends": (ctypes.c_uint64, [P]),
        "osk_trace_snapshot_open_at_stop": (ctypes.c_uint64, [P]),
        "osk_trace_snapshot_calib": (ctypes.POINTER(_Calib), [P]),
        "osk_trace_snapshot_names": (U32, [P]),
        "osk_trace_snapshot_name": (ctypes.c_char_p, [P, U32]),
        "osk_trace_snapshot_columns": (SZ, [P, P, P, P, P, P]),
        "osk_trace_write_chrome": (I, [P, ctypes.c_char_p]),
        "osk_trace_summarize": (P, [P, P, ctypes.POINTER(I)]),
        "osk_trace_summary_free": (None, [P]),
        "osk_trace_summary_table": (P, [P, SZ]),
        "osk_trace_summary_json": (P, [P]),
        "osk_trace_free": (None, [P]),
    })
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    return lib


_lib_cache: dict = {}


def _collector(path: str, must_be_loaded: bool = True, prefix: Optional[str] = "osk_itt"):
    """The collector ITT or NVTX loaded (RTLD_NOLOAD), or None if it is not loaded."""
    if path in _lib_cache:
        return _lib_cache[path]
    mode = os.RTLD_LAZY | (os.RTLD_NOLOAD if must_be_loaded else 0)
    try:
        lib = ctypes.CDLL(path, mode=mode)
    except OSError:
        return None
    _lib_cache[path] = _declare(lib, prefix)
    return _lib_cache[path]


def _take_string(lib, ptr) -> str:
    if not ptr:
        raise MemoryError("opskew tracer: out of memory")
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        lib.osk_trace_free(ptr)


# ------------------------------------------------------------------ results


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
    """Per-operator statistics computed in C. str() is the table; .data is the
    JSON document (schema opskew.trace.summary/1); .rows its "ops" list."""

    def __init__(self, table: str, data: dict):
        self.table = table
        self.data = data
        self.rows = data.get("ops", [])

    def __str__(self) -> str:
        return self.table

    def __repr__(self) -> str:
        return f"<opskew.tracing.Summary: {len(self.rows)} operators>"


class Trace:
    """What one opskew.trace() session recorded. Available after the block.
    `instrument` says what recorded it: "itt", "nvtx" or "pyhook"."""

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
        out = {"total": int(self._lib.osk_trace_snapshot_lost_total(self._snap))}
        for i, key in enumerate(_LOSS_KEYS):
            out[key] = int(self._lib.osk_trace_snapshot_lost(self._snap, i))
        return out

    @property
    def calibration(self) -> Optional[dict]:
        self._need()
        c = self._lib.osk_trace_snapshot_calib(self._snap).contents
        if not c.valid:
            return None
        return {"w_ns": c.w_ns, "delta_ns": c.delta_ns, "w_spread_ns": c.w_spread_ns,
                "scope": "profile hook" if self.instrument == "pyhook" else "collector"}

    @property
    def summary(self) -> Summary:
        self._need()
        if self._summary is None:
            lib, err = self._lib, ctypes.c_int(0)
            s = lib.osk_trace_summarize(self._snap, None, ctypes.byref(err))
            if not s:
                raise MemoryError("opskew tracer: out of memory building the summary")
            try:
                table = _take_string(lib, lib.osk_trace_summary_table(s, 0))
                data = json.loads(_take_string(lib, lib.osk_trace_summary_json(s)))
            finally:
                lib.osk_trace_summary_free(s)
            self._summary = Summary(table, data)
        return self._summary

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
            raise OpskewError(f"could not write the trace to {path} (error {rc}: "
                              f"{'input/output error' if rc == -5 else 'see opskew.h'})")
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


def hook_new_threads(on_start):
    """Runs on_start() at the start of every threading.Thread started from now
    on, since the operator hooks are per thread (as threading.setprofile
    does); on_start() returns an object to __exit__ when the thread ends, or
    None. Returns the original Thread._bootstrap_inner, to restore later, or
    None when it is missing: it is private but has been stable (3.7-3.13), and
    without it new threads are simply not recorded."""
    original = getattr(threading.Thread, "_bootstrap_inner", None)
    if original is None:  # pragma: no cover
        return None

    def _bootstrap_inner(thread_self):
        try:
            ctx = on_start()
        except Exception:  # noqa: BLE001 - never break the user's thread
            ctx = None
        try:
            original(thread_self)
        finally:
            if ctx is not None:
                try:
                    ctx.__exit__(None, None, None)
                except Exception:  # noqa: BLE001
                    pass

    threading.Thread._bootstrap_inner = _bootstrap_inner
    return original


class trace:  # noqa: N801 - used like a function: `with opskew.trace():`
    """Records every PyTorch operator run inside the block with opskew's C tracer.

    path: where to write a Chrome trace when the block ends (None: don't write;
    call .write(path) on the result later).
    instrument: "auto" (default; $OPSKEW_INSTRUMENT overrides), "itt",
    "nvtx" or "pyhook" (see the module documentation). "auto" is ITT on CPU
    where torch has it, else the pyhook fallback, and NVTX for device="cuda".
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
        self._ctx = None
        self._lib = None
        self._stop = None
        self._orig_bootstrap = None
        self._pyhook = None

    def __enter__(self) -> Trace:
        inst = self.instrument
        if inst == "nvtx":
            return self._enter_nvtx()
        if inst == "pyhook":
            import torch  # noqa: F401 - nothing to arrange for the fallback

            return self._enter_pyhook(torch)
        # itt, or auto: arrange ITT, and fall back where this torch has none.
        if inst == "auto" and "torch" in sys.modules and not os.environ.get(COLLECTOR_ENV):
            torch = sys.modules["torch"]
            if not _has_itt(torch):
                return self._enter_pyhook(torch)
        path = arrange()
        import torch  # only now: the collector is arranged

        if not _has_itt(torch):
            if inst == "auto":
                return self._enter_pyhook(torch)
            raise TracerSetupError(
                f"this torch build ({torch.__version__}) has no ITT support (x86-64 builds "
                "have it); use instrument=\"pyhook\" (torch builtin calls only) or leave "
                "instrument unset to fall back automatically"
            )
        loaded = _collector(path)
        if loaded is not None and loaded.osk_trace_active():
            raise TracerSetupError(
                "an opskew tracing session is already active in this process "
                "(a trace() block, or `opskew record`); sessions do not nest"
            )
        emit_itt = torch.autograd.profiler.emit_itt
        self._ctx = emit_itt()
        self._ctx.__enter__()
        try:
            torch.empty(0)  # the first ITT task makes ittnotify load the collector
            lib = _collector(path)
            bound = lib.osk_itt_bound() if lib is not None else 0
            if bound == 0:
                raise TracerSetupError(_TORCH_FIRST.format(env=COLLECTOR_ENV, path=path))
            if bound < 0:
                raise TracerSetupError(
                    "PyTorch's ittnotify has a layout opskew does not know (ittapi major "
                    "version is not 3); please report it with your torch version"
                )
            rc = lib.osk_itt_start()
            if rc != 0:
                raise TracerSetupError("an opskew tracing session is already active in this process")
        except BaseException:
            self._ctx.__exit__(None, None, None)
            self._ctx = None
            raise
        self._lib, self._stop = lib, lib.osk_itt_stop
        self.instrument = "itt"
        self._hook_threads(_profiler_ctx(emit_itt))
        self._result = Trace(self.path, "itt")
        return self._result

    def _enter_nvtx(self) -> Trace:
        path = arrange_nvtx()
        import torch

        why = cuda_missing_reason(torch)
        if why:
            raise TracerSetupError(f"device=\"cuda\" asked for, but {why}")
        loaded = _collector(path, prefix="osk_nvtx")
        if loaded is not None and loaded.osk_trace_active():
            raise TracerSetupError("an opskew tracing session is already active in this process")
        emit_nvtx = torch.autograd.profiler.emit_nvtx
        self._ctx = emit_nvtx()
        self._ctx.__enter__()
        try:
            torch.empty(0)  # the first NVTX range makes NVTX inject the collector
            lib = _collector(path, prefix="osk_nvtx")
            bound = lib.osk_nvtx_bound() if lib is not None else 0
            if bound <= 0:
                raise TracerSetupError(
                    f"torch's NVTX did not load opskew's collector ({path}): torch was imported "
                    f"before {NVTX_ENV} was set, or this build links a pre-v3 NVTX without "
                    "injection support" + (" (a table it offered was refused)" if bound < 0 else "")
                )
            if lib.osk_nvtx_start() != 0:
                raise TracerSetupError("an opskew tracing session is already active in this process")
        except BaseException:
            self._ctx.__exit__(None, None, None)
            self._ctx = None
            raise
        self._lib, self._stop = lib, lib.osk_nvtx_stop
        self._hook_threads(_profiler_ctx(emit_nvtx))
        self._result = Trace(self.path, "nvtx")
        return self._result

    def _enter_pyhook(self, torch) -> Trace:
        from . import _pyhook

        if _pyhook.active():
            raise TracerSetupError("an opskew tracing session is already active in this process")
        lib = _collector(_pyhook.__file__, must_be_loaded=True, prefix=None)
        if lib is None:  # pragma: no cover - the module is imported, so it is loaded
            raise TracerSetupError("cannot reach opskew._pyhook through ctypes")
        _pyhook.calibrate(torch.empty)
        _pyhook.start()
        _pyhook.install_all()
        self._pyhook = _pyhook
        self._lib = lib
        self.instrument = "pyhook"

        def hooked():
            _pyhook.install()
            return None

        self._hook_threads(hooked)
        self._result = Trace(self.path, "pyhook")
        return self._result

    def _hook_threads(self, on_start):
        self._orig_bootstrap = hook_new_threads(on_start)

    def __exit__(self, exc_type, exc, tb) -> bool:
        lib = self._lib
        err = ctypes.c_int(0)
        if self._pyhook is not None:
            try:
                snap = self._pyhook.stop()  # stop first, then unhook
            except RuntimeError:
                snap = None
            self._pyhook.uninstall_all()
        else:
            snap = self._stop(ctypes.byref(err))  # stop first: emit_*'s exit is not ours
        if self._orig_bootstrap is not None:
            threading.Thread._bootstrap_inner = self._orig_bootstrap
            self._orig_bootstrap = None
        if self._ctx is not None:
            try:
                self._ctx.__exit__(None, None, None)
            finally:
                self._ctx = None
        if not snap:
            if exc_type is None:
                raise OpskewError(f"opskew tracer: stopping the session failed (error {err.value})")
            return False
        self._result._attach(lib, snap)
        if self.path:
            try:
                self._result.write(self.path)
            except OpskewError:
                if exc_type is None:
                    raise
                print(f"opskew: could not write the trace to {self.path}", file=sys.stderr)
        return False


def _has_itt(torch) -> bool:
    itt = getattr(getattr(torch, "profiler", None), "itt", None)
    try:
        return bool(itt is not None and itt.is_available())
    except Exception:  # noqa: BLE001 - a broken ITT module counts as absent
        return False


def _profiler_ctx(factory):
    def start():
        ctx = factory()
        ctx.__enter__()
        return ctx

    return start
