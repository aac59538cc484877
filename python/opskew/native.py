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


def shim_target(torch):
    """(directory, module name) of the compiled shim for this torch."""
    with open(SOURCE, "rb") as f:
        src = f.read()
    cxx = _compiler() or "none"
    h = hashlib.sha256(src + torch.__version__.encode() + cxx.encode()).hexdigest()[:16]
    return os.path.join(cache_root(), "torch-" + torch.__version__.replace("/", "_")), "opskew_native_" + h


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
    if not os.path.isfile(so) and os.path.isfile(failed):
        # Not retried on every run: a failed build costs as much as a good one.
        return None, f"an earlier build failed (delete {failed} to retry)"
    if not os.path.isfile(so):
        if _compiler() is None:
            return None, f"no C++ compiler ({os.environ.get('CXX') or 'c++'} is not on PATH)"
        print(f"opskew: building opskew's native collector for torch {torch.__version__} "
              f"(once for this torch, seconds to a minute) in {d}", file=sys.stderr, flush=True)
        try:
            os.makedirs(d, exist_ok=True)
            from torch.utils import cpp_extension

            cpp_extension.load(name=name, sources=[SOURCE], build_directory=d, is_python_module=False,
                               extra_cflags=["-O2"], with_cuda=False, verbose=False)
        except Exception as exc:  # noqa: BLE001 - any failure means: fall back
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            try:
                with open(failed, "w") as f:
                    f.write(str(exc))
            except OSError:
                pass
            return None, f"compiling it failed ({first[:160]}; build folder {d})"
        if not os.path.isfile(so):
            return None, f"the build left no {so}"
    try:
        lib = _declare(ctypes.CDLL(so, mode=os.RTLD_LAZY))
    except (OSError, AttributeError) as exc:
        return None, f"loading {so} failed ({str(exc)[:160]})"
    _cache["lib"] = lib
    return lib, None
