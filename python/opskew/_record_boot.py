"""Bootstrap that `opskew record` runs in the child Python, by path:

    python [interpreter options] .../opskew/_record_boot.py (-c CODE | -m MODULE | SCRIPT) [ARGS]

It imports nothing from the opskew package (the child may be another
interpreter), turns on the instrument that `opskew record` chose in this
thread and in every thread started later, starts opskew's recording session,
and runs the user's code as ``__main__``. The trace is written by the C side
(``osk_itt_finish``, ``osk_nvtx_finish`` or ``_pyhook.finish``) from an atexit
handler, so it is written when the code returns, raises, calls sys.exit, or
gets SIGINT/SIGTERM (both become exceptions that unwind). A SIGKILL or
os._exit() writes nothing.

Environment (set by `opskew record`):
  OPSKEW_INSTRUMENT   itt, nvtx, pyhook, or auto (ITT if torch has it, else pyhook)
  INTEL_LIBITTNOTIFY64 / NVTX_INJECTION64_PATH   the collector, set before torch loads
  OPSKEW_PYHOOK_PATH  the opskew._pyhook extension (loaded by path)
  OPSKEW_TRACE_OUT    the trace path
  OPSKEW_BOOT_ERROR   where a setup failure is described (one line), for the parent
"""

import atexit
import ctypes
import os
import runpy
import signal
import sys

EXIT_SETUP = 86  # `opskew record` reads this as "the tracer could not start"


def _fail(msg):
    # The parent prints the message as its one-line error; without a parent
    # (run by hand) it goes to stderr.
    path = os.environ.get("OPSKEW_BOOT_ERROR")
    try:
        if not path:
            raise OSError
        with open(path, "w") as f:
            f.write(msg)
    except OSError:
        sys.stderr.write("opskew record: %s\n" % msg)
        sys.stderr.flush()
    os._exit(EXIT_SETUP)


def _parse(argv):
    """Returns (kind, target, argv for the user's code)."""
    if not argv:
        _fail("no script, -c or -m given to the Python command")
    if argv[0] == "-c":
        if len(argv) < 2:
            _fail("-c needs an argument")
        return "code", argv[1], ["-c"] + argv[2:]
    if argv[0] == "-m":
        if len(argv) < 2:
            _fail("-m needs an argument")
        return "module", argv[1], [argv[1]] + argv[2:]
    return "path", argv[0], list(argv)


def _load_collector(path, prefix):
    # RTLD_NOLOAD: the library PyTorch's ittnotify or NVTX loaded, or nothing.
    try:
        lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return None
    for name in ("bound", "record_begin", "finish"):
        getattr(lib, "%s_%s" % (prefix, name)).restype = ctypes.c_int
    return lib


def _load_pyhook(path):
    import importlib.util

    try:
        spec = importlib.util.spec_from_file_location("opskew._pyhook", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except Exception as exc:  # noqa: BLE001 - e.g. another Python version
        _fail("cannot load opskew's profile hook (%s) in this interpreter: %s; run `opskew record` "
              "with the Python that opskew is installed in" % (path, exc))
    return mod


def _has_itt(torch):
    itt = getattr(getattr(torch, "profiler", None), "itt", None)
    try:
        return bool(itt is not None and itt.is_available())
    except Exception:  # noqa: BLE001
        return False


def _hook_threads(on_start):
    """Runs on_start() at the start of every new threading.Thread: the hooks
    are per thread. on_start returns a context to exit at the end, or None."""
    import threading

    original = threading.Thread._bootstrap_inner

    def _bootstrap_inner(self):
        try:
            ctx = on_start()
        except Exception:  # noqa: BLE001 - never break the user's thread
            ctx = None
        try:
            original(self)
        finally:
            if ctx is not None:
                try:
                    ctx.__exit__(None, None, None)
                except Exception:  # noqa: BLE001
                    pass

    threading.Thread._bootstrap_inner = _bootstrap_inner


def _profiler_ctx(factory):
    def start():
        ctx = factory()
        ctx.__enter__()
        return ctx

    return start


def _start_collector(torch, factory, env, prefix, what):
    """Starts an injected collector (ITT or NVTX); returns its finish()."""
    collector = os.environ.get(env, "")
    main_ctx = factory()
    main_ctx.__enter__()
    _hook_threads(_profiler_ctx(factory))
    # The first operator makes ittnotify / NVTX load the collector.
    torch.empty(0)
    lib = _load_collector(collector, prefix)
    if lib is None or getattr(lib, prefix + "_bound")() <= 0:
        _fail("PyTorch did not load opskew's %s collector (%s); is %s overridden, or %s "
              "disabled in this build?" % (what, collector, env, what))
    rc = getattr(lib, prefix + "_record_begin")()
    if rc != 0:
        _fail("the tracer could not start (error %d)" % rc)

    def finish():
        rc = getattr(lib, prefix + "_finish")()
        try:
            main_ctx.__exit__(None, None, None)
        except Exception:  # noqa: BLE001
            pass
        return rc

    return finish


def _start_pyhook(torch):
    path = os.environ.get("OPSKEW_PYHOOK_PATH", "")
    if not path:
        _fail("run this through `opskew record`, which sets OPSKEW_PYHOOK_PATH")
    hook = _load_pyhook(path)
    hook.calibrate(torch.empty)
    hook.start()
    hook.install_all()
    _hook_threads(lambda: hook.install())

    def finish():
        rc = hook.finish()
        hook.uninstall_all()
        return rc

    return finish


def main():
    kind, target, user_argv = _parse(sys.argv[1:])
    inst = os.environ.get("OPSKEW_INSTRUMENT") or "auto"
    if not os.environ.get("OPSKEW_TRACE_OUT") or inst not in ("auto", "itt", "pyhook", "nvtx"):
        _fail("run this through `opskew record`, which sets OPSKEW_INSTRUMENT and OPSKEW_TRACE_OUT")
    # Only this process writes the trace; children inheriting the
    # environment (multiprocessing, subprocess) must not overwrite it.
    os.environ["OPSKEW_TRACE_PID"] = str(os.getpid())
    # We start the session ourselves below, after a probe operator.
    os.environ["OPSKEW_TRACE_AUTOSTART"] = "0"

    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - any import failure ends here
        _fail("cannot import torch in the traced interpreter: %s" % exc)

    if inst == "nvtx":
        if getattr(torch.version, "cuda", None) is None:
            _fail("--device cuda: torch %s is a CPU-only build (no CUDA)" % torch.__version__)
        if not torch.cuda.is_available():
            _fail("--device cuda: torch %s (CUDA %s) sees no CUDA device" % (torch.__version__, torch.version.cuda))
        finish = _start_collector(torch, torch.autograd.profiler.emit_nvtx, "NVTX_INJECTION64_PATH",
                                  "osk_nvtx", "NVTX")
    elif inst == "itt" or (inst == "auto" and _has_itt(torch)):
        if not _has_itt(torch):
            _fail(
                "this torch build has no ITT support (x86-64 builds have it; this one, torch %s "
                "on %s, does not); use --instrument pyhook, or leave --instrument unset to fall "
                "back to it" % (torch.__version__, os.uname().machine)
            )
        if not os.environ.get("INTEL_LIBITTNOTIFY64"):
            _fail("run this through `opskew record`, which sets INTEL_LIBITTNOTIFY64")
        finish = _start_collector(torch, torch.autograd.profiler.emit_itt, "INTEL_LIBITTNOTIFY64",
                                  "osk_itt", "ITT")
    else:
        finish = _start_pyhook(torch)

    def _finish():
        # A second Ctrl-C must not interrupt the write.
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                signal.signal(sig, signal.SIG_IGN)
            except (ValueError, OSError):
                pass
        rc = finish()
        if rc != 0:
            sys.stderr.write("opskew record: writing the trace failed (error %d)\n" % rc)

    atexit.register(_finish)

    def _on_sigterm(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _on_sigterm)

    sys.argv = user_argv
    if kind == "code":
        sys.path[0] = ""
        import builtins

        globs = {"__name__": "__main__", "__builtins__": builtins, "__doc__": None, "__spec__": None}
        exec(compile(target, "<string>", "exec"), globs)  # noqa: S102 - the user's own -c code
    elif kind == "module":
        sys.path[0] = os.getcwd()
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        sys.path[0] = os.path.dirname(os.path.abspath(target))
        runpy.run_path(target, run_name="__main__")


if __name__ == "__main__":
    main()
