"""Turning an instrument on: what opskew.trace() and `opskew record`'s child share.

Standard library only, and nothing from the opskew package: `opskew record`
runs its bootstrap (_entry/record_boot.py) in the user's interpreter, where opskew
itself may not be importable, and that bootstrap loads this file by path.
opskew.tracer.session imports it (as _boot).

It holds the thread hook (the operator hooks are per thread), the ITT check,
the collectors' ctypes surface (the same osk_collector_* / osk_trace_*
functions in every collector; docs/design.md, "Layers"), with the
struct mirrors checked against the C library's own layout when it loads,
and the start of a session for each instrument.
"""

import ctypes
import importlib.machinery
import os
import sys
import threading

# Per instrument that torch loads: the variable torch reads at import, the
# library's file next to this one, and the variable that overrides it.
# The opskew package's folder, where meson installs the collector libraries
# and the extension modules (this file is in its tracer/ folder).
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ENV = {"itt": "INTEL_LIBITTNOTIFY64", "nvtx": "NVTX_INJECTION64_PATH"}
FILE = {"itt": "libopskew_itt.so", "nvtx": "libopskew_nvtx.so", "native": "libopskew_native.so"}
OVERRIDE = {"itt": "OPSKEW_ITT_COLLECTOR", "nvtx": "OPSKEW_NVTX_COLLECTOR", "native": "OPSKEW_NATIVE_COLLECTOR"}
WHAT = {"itt": "ITT", "nvtx": "NVTX", "native": "native"}
# How the native shim reaches threads: "thread" (a thread-local callback in
# this thread and every thread started later, as emit_itt does) or "global"
# (one callback for every thread). docs/tracer.md says which is the default and why.
NATIVE_SCOPE_ENV = "OPSKEW_NATIVE_SCOPE"

ALREADY_ACTIVE = ("an opskew tracing session is already active in this process "
                  "(a trace() block, or `opskew record`); sessions do not nest")


class SetupError(Exception):
    """The instrument cannot be turned on; the message says why and what to do."""


def default_path(instrument):
    """Where the collector library for `instrument` ("itt", "nvtx", "native") is, unless overridden."""
    return os.environ.get(OVERRIDE[instrument]) or os.path.join(PACKAGE_DIR, FILE[instrument])


def has_itt(torch):
    """Whether this torch build has ITT (x86-64 builds do)."""
    itt = getattr(getattr(torch, "profiler", None), "itt", None)
    try:
        return bool(itt is not None and itt.is_available())
    except Exception:  # noqa: BLE001 - a broken ITT module counts as absent
        return False


def no_itt_message(torch, pyhook_option):
    """Why ITT cannot be used with this torch, and what to do instead;
    `pyhook_option` is how the caller spells the fallback instrument."""
    return ("this torch build has no ITT support (x86-64 builds have it; this one, torch %s on %s, "
            "does not); use %s (torch builtin calls only), or leave the instrument unset to fall "
            "back to it automatically" % (torch.__version__, os.uname().machine, pyhook_option))


def cuda_missing_reason(torch):
    """Why CUDA cannot be traced with this torch, or None if it can."""
    if getattr(torch.version, "cuda", None) is None:
        return "torch %s is a CPU-only build (no CUDA); install a CUDA build of torch" % torch.__version__
    if not torch.cuda.is_available():
        return "torch %s (CUDA %s) sees no CUDA device" % (torch.__version__, torch.version.cuda)
    return None


def profiler_ctx(factory):
    """on_start for hook_new_threads: enters factory() in the new thread."""
    def start():
        ctx = factory()
        ctx.__enter__()
        return ctx

    return start


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


# ------------------------------------------------------------------ ctypes


def _fields(*runs) -> list:
    """A mirror's _fields_ from its C struct's members in order, written as
    C declares them: runs of (C type, "name name ...")."""
    return [(name, ctype) for ctype, names in runs for name in names.split()]


class Calib(ctypes.Structure):
    """osk_trace_calib_t, checked against the library when it loads."""
    _c_name_ = "osk_trace_calib_t"
    _fields_ = _fields((ctypes.c_double, "w_ns delta_ns w_spread_ns"),
                       (ctypes.c_uint32, "pairs rounds"),
                       (ctypes.c_int, "valid"))


class Op(ctypes.Structure):
    """osk_trace_op_t (a summary row), checked against the library when it loads."""
    _c_name_ = "osk_trace_op_t"
    _fields_ = _fields((ctypes.c_uint32, "name"),
                       (ctypes.c_uint64, "calls"),
                       (ctypes.c_int64, "total_ns self_ns total_corrected_ns self_corrected_ns"),
                       (ctypes.c_double, "mean_ns p50_ns p99_ns"),
                       (ctypes.c_int64, "max_ns"),
                       (ctypes.c_uint64, "children descendants"))


MIRRORS = (Calib, Op)


def check_layouts(lib, mirrors=MIRRORS):
    """Raises SetupError unless each mirror matches the C struct it reads:
    every field at C's offset with C's size, and the same total size."""
    off, size = ctypes.c_size_t(), ctypes.c_size_t()
    for m in mirrors:
        c_name = m._c_name_.encode()
        rows = [(f, getattr(m, f).offset, getattr(m, f).size) for f, _ in m._fields_] + [(None, 0, ctypes.sizeof(m))]
        for f, o, s in rows:
            off.value = 0
            rc = lib.osk_trace_abi_field(c_name, f and f.encode(), ctypes.byref(off), ctypes.byref(size))
            theirs = (off.value, size.value) if rc == 0 else None
            if theirs != (o, s):
                where = "absent" if theirs is None else "offset %d, size %d" % theirs
                raise SetupError(
                    f"opskew's Python and C disagree on {m._c_name_}{'.' + f if f else ''} (offset {o}, "
                    f"size {s} here; {where} in C): the package and its C library come from "
                    "different builds; reinstall opskew")


def declare(lib):
    """Declares the surface every collector exports (osk_collector_*, osk_trace_*,
    osk_strerror) on `lib` and checks the struct mirrors; returns lib."""
    P, I, U32, U64, SZ = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_size_t
    PSZ, PP = ctypes.POINTER(SZ), ctypes.POINTER(P)
    sig = {
        "osk_collector_instrument": (ctypes.c_char_p, []),
        "osk_collector_bound": (I, []),
        "osk_collector_start": (I, []),
        "osk_collector_stop": (I, [PP]),
        "osk_collector_record_begin": (I, []),
        "osk_collector_finish": (I, []),
        "osk_strerror": (ctypes.c_char_p, [I]),
        "osk_trace_abi_field": (I, [ctypes.c_char_p, ctypes.c_char_p, PSZ, PSZ]),
        "osk_trace_active": (I, []),
        "osk_trace_loss_count": (I, []),
        "osk_trace_loss_key": (ctypes.c_char_p, [I]),
        "osk_trace_loss_message": (ctypes.c_char_p, [I]),
        "osk_trace_snapshot_free": (None, [P]),
        "osk_trace_snapshot_events": (SZ, [P]),
        "osk_trace_snapshot_threads": (SZ, [P]),
        "osk_trace_snapshot_lost": (U64, [P, I]),
        "osk_trace_snapshot_lost_total": (U64, [P]),
        "osk_trace_snapshot_unmatched_ends": (U64, [P]),
        "osk_trace_snapshot_open_at_stop": (U64, [P]),
        "osk_trace_snapshot_calib": (ctypes.POINTER(Calib), [P]),
        "osk_trace_snapshot_w_source": (ctypes.c_char_p, [P]),
        "osk_trace_set_cost": (I, [ctypes.c_double, ctypes.c_char_p]),
        "osk_trace_snapshot_names": (U32, [P]),
        "osk_trace_snapshot_name": (ctypes.c_char_p, [P, U32]),
        "osk_trace_snapshot_columns": (SZ, [P, P, P, P, P, P]),
        "osk_trace_write_chrome": (I, [P, ctypes.c_char_p]),
        "osk_trace_summarize": (I, [P, P, PP]),
        "osk_trace_summarize_window": (I, [P, P, ctypes.c_int64, ctypes.c_int64, PP]),
        "osk_trace_now_ns": (ctypes.c_int64, []),
        "osk_trace_summary_free": (None, [P]),
        "osk_trace_summary_rows": (SZ, [P]),
        "osk_trace_summary_residual_ns": (ctypes.c_int64, [P]),
        "osk_trace_summary_row": (ctypes.POINTER(Op), [P, SZ]),
        "osk_trace_summary_table": (P, [P, SZ]),
        "osk_trace_free": (None, [P]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    check_layouts(lib)
    return lib


_libs = {}


def load(path, must_be_loaded=True):
    """The collector at `path`, declared: with must_be_loaded, only the one its
    host (ITT, NVTX, Python's import) already loaded (RTLD_NOLOAD; dlopen of
    the same path returns that library), else None."""
    if path in _libs:
        return _libs[path]
    mode = os.RTLD_LAZY | (os.RTLD_NOLOAD if must_be_loaded else 0)
    try:
        # use_errno: a failed trace write leaves errno set (chrome_out.c),
        # which `opskew record`'s child reports (ctypes.get_errno).
        lib = ctypes.CDLL(path, mode=mode, use_errno=True)
    except OSError:
        return None
    _libs[path] = declare(lib)
    return lib


def strerror(lib, rc):
    return lib.osk_strerror(rc).decode("utf-8", "replace")


# ------------------------------------------------------------------ sessions


class Session:
    """An instrument turned on and a session of its collector started. stop()
    ends a session started by start (the snapshot's address, or None with
    the error code), finish() ends and writes `opskew record`'s session;
    both stop recording before they turn the instrument off."""

    def __init__(self, lib, instrument, off, original_bootstrap):
        self.lib = lib
        self.instrument = instrument
        self._off = off
        self._original = original_bootstrap

    def stop(self):
        snap = ctypes.c_void_p()
        try:
            rc = self.lib.osk_collector_stop(ctypes.byref(snap))
        finally:
            self._turn_off()
        return snap.value, rc

    def finish(self):
        try:
            return self.lib.osk_collector_finish()
        finally:
            self._turn_off()

    def _turn_off(self):
        if self._original is not None:
            threading.Thread._bootstrap_inner = self._original
            self._original = None
        off, self._off = self._off, None
        if off is not None:
            off()


def active_anywhere():
    """Whether a session of any opskew collector loaded in this process
    records. Each instrument's library (ITT, NVTX, native, the profile hook)
    carries its own copy of the runtime, so asking one of them saw only its
    own sessions: a trace(instrument="itt") inside a native one started."""
    paths = [default_path(i) for i in FILE]
    paths += [os.path.join(PACKAGE_DIR, "_pyhook" + s) for s in importlib.machinery.EXTENSION_SUFFIXES]
    for p in paths:
        lib = load(p) if os.path.isfile(p) else None
        if lib is not None and lib.osk_trace_active():
            return True
    return False


def _begin(lib, record):
    rc = lib.osk_collector_record_begin() if record else lib.osk_collector_start()
    if rc != 0:
        raise SetupError(ALREADY_ACTIVE if lib.osk_trace_active() else
                         f"the tracer could not start: {strerror(lib, rc)}")


def start_collector(torch, instrument, path, not_bound, record=False):
    """Turns on emit_itt() or emit_nvtx() (`instrument` "itt" or "nvtx") in
    this thread and in every thread started later, makes torch load the
    collector at `path` with a probe operator, and starts a session (record:
    `opskew record`'s, written at exit). not_bound(bound) words the error for
    a collector torch did not bind (bound 0, or -1: an ABI it refused)."""
    factory = {"itt": torch.autograd.profiler.emit_itt, "nvtx": torch.autograd.profiler.emit_nvtx}[instrument]
    if active_anywhere():
        raise SetupError(ALREADY_ACTIVE)
    ctx = factory()
    ctx.__enter__()
    try:
        torch.empty(0)  # the first ITT task / NVTX range makes torch load the collector
        lib = load(path)
        bound = lib.osk_collector_bound() if lib is not None else 0
        if bound <= 0:
            raise SetupError(not_bound(bound))
        _begin(lib, record)
    except BaseException:
        ctx.__exit__(None, None, None)
        raise
    original = hook_new_threads(profiler_ctx(factory))
    return Session(lib, instrument, lambda: ctx.__exit__(None, None, None), original)


def start_pyhook(hook, torch, record=False):
    """Starts the pyhook instrument: `hook` is the opskew._pyhook module
    (imported, or loaded by path), reached through ctypes on its own file."""
    lib = load(hook.__file__)
    if lib is None:  # pragma: no cover - the module is imported, so it is loaded
        raise SetupError(f"cannot reach opskew's profile hook ({hook.__file__}) through ctypes")
    if active_anywhere():
        raise SetupError(ALREADY_ACTIVE)
    hook.calibrate(torch.empty)
    _begin(lib, record)
    hook.set_profile(True, True)

    def on_thread_start():
        hook.set_profile(True, False)

    original = hook_new_threads(on_thread_start)
    return Session(lib, "pyhook", lambda: hook.set_profile(False, True), original)


class _Detach:
    """What hook_new_threads exits when a thread ends: the thread's callback."""

    def __init__(self, shim):
        self._shim = shim

    def __exit__(self, *exc):
        self._shim.osk_shim_detach_thread()


def start_native_or_why(native_mod, torch, path, record=False):
    """The native instrument's session, built and started: (session, None);
    or (None, why) when it is unavailable here (no compiler, a failed build,
    a refused callback). A session already active is not a reason to fall
    back: SetupError(ALREADY_ACTIVE) is raised. `native_mod` is opskew's
    native.py (the record child loads it by path)."""
    try:
        shim, why = native_mod.shim(torch)
    except Exception as exc:  # noqa: BLE001 - never break the run for it
        shim, why = None, "its builder failed: %s" % exc
    if shim is None:
        return None, why
    try:
        return start_native(shim, path, record=record), None
    except SetupError as exc:
        if str(exc) == ALREADY_ACTIVE:
            raise
        return None, str(exc)


def native_fallback(torch, itt_arranged, why, who):
    """The instrument to record with when native is unavailable: ITT where
    opskew's ITT collector was arranged before torch loaded and torch has ITT,
    else pyhook. Says so in one line on stderr, `who` naming the caller."""
    fallback = "itt" if itt_arranged and has_itt(torch) else "pyhook"
    sys.stderr.write("%s: the native collector is unavailable (%s); recording with %s instead\n"
                     % (who, why, fallback))
    sys.stderr.flush()
    return fallback


def start_native(shim, path, record=False, scope=None):
    """Starts the native instrument: `shim` is the compiled RecordFunction
    shim (ctypes, opskew/native.py), `path` libopskew_native.so. The shim
    gets the collector's entry points, then a session starts, then the
    callback is attached: thread-local in this thread and every thread
    started later (scope "thread"), or one global callback ("global")."""
    scope = scope or os.environ.get(NATIVE_SCOPE_ENV) or "thread"
    if scope not in ("thread", "global"):
        raise SetupError(f"{NATIVE_SCOPE_ENV} must be 'thread' or 'global', not {scope!r}")
    lib = load(path, must_be_loaded=False)
    if lib is None:
        raise SetupError(f"cannot load opskew's native collector ({path}); reinstall opskew")
    if active_anywhere():
        raise SetupError(ALREADY_ACTIVE)
    shim.osk_shim_set(ctypes.cast(lib.osk_native_begin, ctypes.c_void_p),
                      ctypes.cast(lib.osk_native_end, ctypes.c_void_p))
    _begin(lib, record)
    attach = shim.osk_shim_attach_global if scope == "global" else shim.osk_shim_attach_thread
    if attach(0) < 0:
        snap = ctypes.c_void_p()
        lib.osk_collector_stop(ctypes.byref(snap))
        lib.osk_trace_snapshot_free(snap)
        raise SetupError("torch refused opskew's RecordFunction callback")
    lib.osk_native_attached.restype, lib.osk_native_attached.argtypes = None, []
    lib.osk_native_attached()
    if scope == "global":
        return Session(lib, "native", shim.osk_shim_detach_global, None)

    def on_thread_start():
        return _Detach(shim) if shim.osk_shim_attach_thread(2) == 0 else None

    original = hook_new_threads(on_thread_start)
    return Session(lib, "native", shim.osk_shim_detach_thread, original)


# `opskew record` hands its child the stored in-window W per instrument:
# OPSKEW_TRACE_COST_<INSTRUMENT> = "<torch version>\t<W ns>\t<source>"
# (the child may be another interpreter, where opskew is not importable).
COST_ENV = "OPSKEW_TRACE_COST_"


def set_cost(lib, found) -> None:
    """Gives the session the tracer's in-window W: `found` is (W ns, source)
    or None (the self-calibration stays); osk_trace_set_cost."""
    setter = getattr(lib, "osk_trace_set_cost", None)
    if setter is None:
        return
    if found is None:
        setter(-1.0, None)
    else:
        setter(float(found[0]), found[1].encode("utf-8", "replace"))


def cost_env(instrument: str, torch_version: str, found) -> dict:
    """The environment entry that hands `found` (W, source) to a record child."""
    if found is None:
        return {}
    return {COST_ENV + instrument.upper(): "%s\t%r\t%s" % (torch_version, float(found[0]), found[1])}


def apply_env_cost(lib, instrument: str, torch_version: str) -> None:
    """The record child's side of cost_env: the W its parent found for the
    instrument in use, if it was found for this very torch."""
    raw = os.environ.get(COST_ENV + instrument.upper(), "")
    found = None
    parts = raw.split("\t", 2)
    if len(parts) == 3 and parts[0] == torch_version:
        try:
            found = (float(parts[1]), parts[2])
        except ValueError:
            found = None
    set_cost(lib, found)
