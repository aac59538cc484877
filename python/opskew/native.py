"""The native instrument: opskew's C++ RecordFunction callback, built at first use.

The shim (_native_shim.cpp, next to this file) is compiled against the torch
that is imported, with torch.utils.cpp_extension, into
``<cache>/native/torch-<version>/`` (``<cache>``: $OPSKEW_CACHE_DIR, else
~/.cache/opskew), under a name carrying the hash of the shim's source, the
torch version and the compiler; later runs load the cached library without
asking cpp_extension anything. Nothing is compiled at install, so torch stays
out of the build requirements.

It is never required: ``shim(torch)`` returns (library, None) or (None, why),
and the caller falls back to ITT or pyhook and prints one line saying why.
``OPSKEW_NATIVE=0`` turns it off. A failed build leaves ``<name>.failed`` (the
error) next to where the library would be, and is not retried until that file
is deleted.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import sys

NATIVE_ENV = "OPSKEW_NATIVE"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native_shim.cpp")

_cache = {}


def cache_home() -> str:
    """opskew's cache folder: $OPSKEW_CACHE_DIR, else $XDG_CACHE_HOME/opskew,
    else ~/.cache/opskew. The one rule for every cache (calibrations too); it
    lives here because this module must stay stdlib-only (record's child loads
    it by path)."""
    d = os.environ.get("OPSKEW_CACHE_DIR")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "opskew")
    return d


def cache_root() -> str:
    """Where built shims are kept: <cache home>/native."""
    return os.path.join(cache_home(), "native")


def _compiler():
    cxx = os.environ.get("CXX") or "c++"
    return shutil.which(cxx.split()[0])


def disabled() -> str | None:
    """Why the native instrument is off by configuration, or None."""
    if os.environ.get(NATIVE_ENV, "1").strip().lower() in ("0", "no", "off", "false"):
        return f"disabled by {NATIVE_ENV}=0"
    return None


def _declare(lib):
    P, I = ctypes.c_void_p, ctypes.c_int
    for name, res, args in (("osk_shim_set", None, [P, P]), ("osk_shim_attach_thread", I, [I]),
                            ("osk_shim_detach_thread", None, []), ("osk_shim_attach_global", I, [I]),
                            ("osk_shim_detach_global", None, []), ("osk_shim_count", ctypes.c_uint64, []),
                            ("osk_shim_range_begin", P, [ctypes.c_char_p]), ("osk_shim_range_end", None, [P])):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


def shim_target(torch, cxx=None):
    """(directory, module name) of the compiled shim for this torch: the
    name carries a hash of the shim's source and the torch version, then one
    of the compiler (``cxx``: its path; default the one on PATH)."""
    with open(SOURCE, "rb") as f:
        src = f.read()
    if cxx is None:
        cxx = _compiler() or "none"
    h = hashlib.sha256(src + torch.__version__.encode()).hexdigest()[:16]
    c = hashlib.sha256(cxx.encode()).hexdigest()[:8]
    return os.path.join(cache_root(), "torch-" + torch.__version__.replace("/", "_")), f"opskew_native_{h}_{c}"


def _built_elsewhere(d: str, name: str):
    """Without a compiler: a shim of this source and torch that another
    compiler built into the same cache (a cache shared with a machine that
    has one), or None."""
    stem = name.rsplit("_", 1)[0] + "_"
    try:
        found = sorted(f for f in os.listdir(d) if f.startswith(stem) and f.endswith(".so"))
    except OSError:
        return None
    return os.path.join(d, found[0]) if found else None


def _build(torch, d: str, name: str, so: str, failed: str):
    """Compiles the shim into a folder of this process's own inside `d`
    and moves the library to `so` in one rename: a process killed while
    building leaves no lock that a later run would wait on for ever, and
    another process never loads a half-written library. Returns None or
    why it failed (also written to `failed`)."""
    import tempfile

    print(f"opskew: building opskew's native collector for torch {torch.__version__} "
          f"(once for this torch, seconds to a minute) in {d}", file=sys.stderr, flush=True)
    work = None
    try:
        os.makedirs(d, exist_ok=True)
        work = tempfile.mkdtemp(prefix=".build-", dir=d)
        from torch.utils import cpp_extension

        cpp_extension.load(name=name, sources=[SOURCE], build_directory=work, is_python_module=False,
                           extra_cflags=["-O2"], with_cuda=False, verbose=False)
        built = os.path.join(work, name + ".so")
        if not os.path.isfile(built):
            raise RuntimeError(f"the build left no {name}.so")
        os.replace(built, so)
    except Exception as exc:  # noqa: BLE001 - any failure means: fall back
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        try:
            with open(failed, "w") as f:
                f.write(str(exc))
        except OSError:
            pass
        return f"compiling it failed ({first[:160]}; build folder {d})"
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
    return None


def _load(so: str):
    return _declare(ctypes.CDLL(so, mode=os.RTLD_LAZY))


def shim(torch):
    """The compiled shim for `torch`, loaded: (ctypes library, None), or
    (None, why it is unavailable). Compiles it once per torch version."""
    if "lib" in _cache:
        return _cache["lib"], None
    why = disabled()
    if why:
        return None, why
    try:
        d, name = shim_target(torch)
    except OSError as exc:
        return None, f"its source is missing ({exc})"
    so = os.path.join(d, name + ".so")
    failed = os.path.join(d, name + ".failed")
    cxx = _compiler()
    if cxx is None and not os.path.isfile(so):
        so = _built_elsewhere(d, name) or so
    if not os.path.isfile(so) and os.path.isfile(failed):
        # Not retried on every run: a failed build costs as much as a good one.
        return None, f"an earlier build failed (delete {failed} to retry)"
    if not os.path.isfile(so):
        if cxx is None:
            return None, f"no C++ compiler ({os.environ.get('CXX') or 'c++'} is not on PATH)"
        why = _build(torch, d, name, so, failed)
        if why:
            return None, why
        fresh = True
    else:
        fresh = False
    try:
        lib = _load(so)
    except (OSError, AttributeError) as exc:
        # A library that does not load (cut short by a crash before builds
        # were renamed into place, say) is built again once, over itself.
        if fresh or cxx is None or os.path.islink(so):
            return None, f"loading {so} failed ({str(exc)[:160]})"
        why = _build(torch, d, name, so, failed)
        if why:
            return None, why
        try:
            lib = _load(so)
        except (OSError, AttributeError) as exc2:
            return None, f"loading {so} failed ({str(exc2)[:160]})"
    _cache["lib"] = lib
    return lib, None
