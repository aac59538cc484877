"""Bootstrap that `opskew record` runs in the child Python, by path:

    python [interpreter options] .../opskew/_record_boot.py (-c CODE | -m MODULE | SCRIPT) [ARGS]

It imports nothing from opskew (the child may be another interpreter), turns on
PyTorch's ITT hooks (`emit_itt`) in this thread and in every thread started
later, starts opskew's recording session, and runs the user's code as
``__main__``. The trace is written by the collector (``osk_itt_finish``) from an
atexit handler, so it is written when the code returns, raises, calls
sys.exit, or gets SIGINT/SIGTERM (both become exceptions that unwind). A
SIGKILL or os._exit() writes nothing.

Environment (set by `opskew record`): INTEL_LIBITTNOTIFY64 (the collector,
already set when torch is imported here), OPSKEW_TRACE_OUT (the trace path).
"""

import atexit
import ctypes
import os
import runpy
import signal
import sys

EXIT_SETUP = 86  # `opskew record` reads this as "the tracer could not start"


def _fail(msg):
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


def _load_collector(path):
    # RTLD_NOLOAD: the library PyTorch's ittnotify loaded, or nothing.
    try:
        lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return None
    lib.osk_itt_bound.restype = ctypes.c_int
    lib.osk_itt_record_begin.restype = ctypes.c_int
    lib.osk_itt_finish.restype = ctypes.c_int
    return lib


def main():
    kind, target, user_argv = _parse(sys.argv[1:])
    collector = os.environ.get("INTEL_LIBITTNOTIFY64", "")
    if not collector or not os.environ.get("OPSKEW_TRACE_OUT"):
        _fail("run this through `opskew record`, which sets INTEL_LIBITTNOTIFY64 and OPSKEW_TRACE_OUT")
    # Only this process writes the trace; children inheriting the
    # environment (multiprocessing, subprocess) must not overwrite it.
    os.environ["OPSKEW_TRACE_PID"] = str(os.getpid())
    # We start the session ourselves below, after a probe operator.
    os.environ["OPSKEW_TRACE_AUTOSTART"] = "0"

    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - any import failure ends here
        _fail("cannot import torch in the traced interpreter: %s" % exc)
    itt = getattr(getattr(torch, "profiler", None), "itt", None)
    if itt is None or not itt.is_available():
        _fail(
            "this torch build has no ITT support (x86-64 builds have it; this one, "
            "torch %s on %s, does not), and opskew's Python-level fallback instrument "
            "is not available yet" % (torch.__version__, os.uname().machine)
        )

    emit_itt = torch.autograd.profiler.emit_itt
    main_ctx = emit_itt()
    main_ctx.__enter__()

    # PyTorch's ITT callback is thread-local: turn it on in each new thread.
    import threading

    original = threading.Thread._bootstrap_inner

    def _bootstrap_inner(self):
        try:
            ctx = emit_itt()
            ctx.__enter__()
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

    # The first ITT task makes ittnotify load the collector.
    torch.empty(0)
    lib = _load_collector(collector)
    if lib is None or lib.osk_itt_bound() <= 0:
        _fail(
            "PyTorch did not load opskew's ITT collector (%s); is INTEL_LIBITTNOTIFY64 "
            "overridden, or ITT disabled in this build?" % collector
        )
    rc = lib.osk_itt_record_begin()
    if rc != 0:
        _fail("the tracer could not start (error %d)" % rc)

    def _finish():
        # A second Ctrl-C must not interrupt the write.
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                signal.signal(sig, signal.SIG_IGN)
            except (ValueError, OSError):
                pass
        rc = lib.osk_itt_finish()
        try:
            main_ctx.__exit__(None, None, None)
        except Exception:  # noqa: BLE001
            pass
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
