"""The native instrument: opskew's C++ RecordFunction callback, built at first use.

The shim (_native_shim.cpp, next to this file) is compiled against the torch
that is imported, with torch.utils.cpp_extension, into
``<cache>/native/torch-<version>/`` (``<cache>``: $OPSKEW_CACHE_DIR, else
~/.cache/opskew), under a name carrying the hash of the shim's source, the
torch build and the compiler; later runs load the cached library without
asking cpp_extension anything. Nothing is compiled at install, so torch stays
out of the build requirements. One process builds at a time (a lock file of
opskew's own, taken over when its process is gone), in a folder of its own,
and renames the library into place.

It is never required: ``shim(torch)`` returns (library, None) or (None, why),
and the caller falls back (ITT or pyhook for the tracer, record_function for
opskew.profile's ranges) and prints one line saying why. ``OPSKEW_NATIVE=0``
turns it off. A failed build, or a library that still does not load after
one rebuild, leaves ``<name>.failed`` (the error) next to where the library
would be, and is not retried until that file is deleted.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
import time

NATIVE_ENV = "OPSKEW_NATIVE"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native_shim.cpp")

_cache = {}


def _load_host():
    """opskew/host.py, which keeps the one rule for every cache folder (this
    one, the calibrations'), loaded by path: record's child loads this module
    by path, where opskew may not be importable, so it imports nothing from
    the package; host.py is standard-library only too."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "host.py")
    spec = importlib.util.spec_from_file_location("_opskew_host", path)
    host = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(host)
    return host


# opskew's cache folder (host.cache_home): $OPSKEW_CACHE_DIR, else
# $XDG_CACHE_HOME/opskew, else ~/.cache/opskew.
cache_home = _load_host().cache_home


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
    name carries a hash of the shim's source and the torch build (version,
    git revision, C++ ABI), then one of the compiler (``cxx``: its path;
    default the one on PATH)."""
    with open(SOURCE, "rb") as f:
        src = f.read()
    if cxx is None:
        cxx = _compiler() or "none"
    build = "|".join(str(x) for x in (torch.__version__, getattr(getattr(torch, "version", None), "git_version", ""),
                                      getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", "")))
    h = hashlib.sha256(src + build.encode()).hexdigest()[:16]
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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process: alive
    return True


def _sweep(d: str):
    """Build folders (.build-PID-*) of processes that are gone (killed
    while building): opskew's own, removed."""
    try:
        names = os.listdir(d)
    except OSError:
        return
    for n in names:
        parts = n.split("-")
        path = os.path.join(d, n)
        if (n.startswith(".build-") and len(parts) >= 3 and parts[1].isdigit() and not _alive(int(parts[1]))
                and os.path.isdir(path) and not os.path.islink(path)):
            shutil.rmtree(path, ignore_errors=True)


def _write_failed(failed: str, text: str):
    """The error of a build (or a load) that failed, in `failed`; never
    through a link."""
    try:
        fd = os.open(failed, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    except OSError:
        return
    with os.fdopen(fd, "w") as f:
        f.write(text)


LOCK_WAIT_S = 600  # the longest a process waits for another's build of the shim


def _lock(d: str, name: str):
    """One build at a time per shim (the ranks of a torchrun job start
    together): a lock file holding the builder's pid, taken with O_EXCL.
    Returns the lock's path once held, or None when another live process
    kept it past LOCK_WAIT_S (then this one builds anyway). A lock whose
    process is gone is taken over."""
    lock = os.path.join(d, name + ".lock")
    deadline = time.monotonic() + LOCK_WAIT_S
    said = False
    while True:
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "w") as f:
                f.write(str(os.getpid()))
            return lock
        except FileExistsError:
            pass
        try:
            with open(lock) as f:
                pid = int(f.read().strip() or 0)
        except (OSError, ValueError):
            pid = 0
        if pid and not _alive(pid) and os.path.isfile(lock) and not os.path.islink(lock):
            try:
                os.unlink(lock)  # opskew's own lock, of a process that is gone
            except OSError:
                pass
            continue
        if time.monotonic() > deadline:
            return None
        if not said:
            print(f"opskew: waiting for process {pid or '?'} to finish building opskew's native shim in {d}",
                  file=sys.stderr, flush=True)
            said = True
        time.sleep(0.2)


def _build(torch, d: str, name: str, so: str, failed: str):
    """Compiles the shim into a folder of this process's own inside `d`
    and moves the library to `so` in one rename: a process killed while
    building leaves neither a lock that a later run waits on for ever nor a
    half-written library. Returns None or why it failed (also written to
    `failed`)."""
    print(f"opskew: building opskew's native collector for torch {torch.__version__} "
          f"(once for this torch, seconds to a minute) in {d}", file=sys.stderr, flush=True)
    work = None
    try:
        if os.path.lexists(so) and (os.path.islink(so) or not os.path.isfile(so)):
            raise RuntimeError(f"{so} is not a regular file; opskew does not replace it")
        work = tempfile.mkdtemp(prefix=f".build-{os.getpid()}-", dir=d)
        from torch.utils import cpp_extension

        cpp_extension.load(name=name, sources=[SOURCE], build_directory=work, is_python_module=False,
                           extra_cflags=["-O2"], with_cuda=False, verbose=False)
        built = os.path.join(work, name + ".so")
        if not os.path.isfile(built):
            raise RuntimeError(f"the build left no {name}.so")
        os.replace(built, so)
    except Exception as exc:  # noqa: BLE001 - any failure means: fall back
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        _write_failed(failed, str(exc))
        return f"compiling it failed ({first[:160]}; the compiler's error is in {failed})"
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
    return None


def _locked_build(torch, d: str, name: str, so: str, failed: str, again: bool):
    """_build under the lock. again=False: a library another process built
    while this one waited for the lock is taken as it is."""
    lock = _lock(d, name)
    try:
        if not again and os.path.isfile(so):
            return None
        _sweep(d)
        return _build(torch, d, name, so, failed)
    finally:
        if lock is not None:
            try:
                os.unlink(lock)
            except OSError:
                pass


def _load(so: str):
    return _declare(ctypes.CDLL(so, mode=os.RTLD_LAZY))


def shim(torch):
    """The compiled shim for `torch`, loaded: (ctypes library, None), or
    (None, why it is unavailable). Compiles it once per torch build; a
    failure is remembered in the process and, in `<name>.failed`, across
    processes."""
    if "lib" in _cache:
        return _cache["lib"], None
    if "why" in _cache:
        return None, _cache["why"]
    why = disabled()
    if why:
        return None, why
    lib, why = _shim(torch)
    if lib is not None:
        _cache["lib"] = lib
    else:
        _cache["why"] = why
    return lib, why


def _shim(torch):
    try:
        d, name = shim_target(torch)
    except OSError as exc:
        return None, f"its source is missing ({exc})"
    so = os.path.join(d, name + ".so")
    failed = os.path.join(d, name + ".failed")
    cxx = _compiler()
    if cxx is None and not os.path.isfile(so):
        so = _built_elsewhere(d, name) or so

    def earlier():
        return None, f"an earlier build or load failed (delete {failed} to retry)"

    if not os.path.isfile(so):
        if os.path.isfile(failed):
            # Not retried on every run: a failed build costs as much as a good one.
            return earlier()
        if cxx is None:
            return None, f"no C++ compiler ({os.environ.get('CXX') or 'c++'} is not on PATH)"
        try:
            os.makedirs(d, exist_ok=True)
        except OSError as exc:
            return None, f"its cache folder cannot be made ({exc})"
        why = _locked_build(torch, d, name, so, failed, again=False)
        if why:
            return None, why
    try:
        return _load(so), None
    except (OSError, AttributeError) as exc:
        first = f"loading {so} failed ({str(exc)[:160]})"
    # A library that does not load (cut short by a crash before builds were
    # renamed into place, say) is built again, once: a second failure is
    # written to .failed and not retried by later runs.
    if cxx is None or os.path.isfile(failed) or os.path.islink(so) or not so.endswith(name + ".so"):
        return (None, first + (f"; delete {failed} to retry" if os.path.isfile(failed) else ""))
    why = _locked_build(torch, d, name, so, failed, again=True)
    if why:
        return None, first + "; " + why
    try:
        return _load(so), None
    except (OSError, AttributeError) as exc:
        _write_failed(failed, f"loading {so} failed after a rebuild: {exc}")
        return None, f"loading {so} failed after a rebuild ({str(exc)[:160]}; delete {failed} to retry)"
