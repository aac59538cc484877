"""Bootstrap that `opskew record` runs in the child Python, by path:

    python [interpreter options] .../opskew/_record_boot.py (-c CODE | -m MODULE | SCRIPT) [ARGS]

It imports nothing from the opskew package (the child may be another
interpreter, where opskew is not importable): it loads opskew's stdlib-only
bootstrap, _boot.py, by path from its own folder, which turns on the
instrument that `opskew record` chose in this thread and in every thread
started later and starts opskew's recording session; then it runs the user's
code as ``__main__``. The trace is written by the collector's C side
(``osk_collector_finish``, the same in every collector) from an atexit
handler, so it is written when the code returns, raises, calls sys.exit, or
gets SIGINT/SIGTERM (both become exceptions that unwind). A SIGKILL or
os._exit() writes nothing, and neither does a forked child.

Environment (set by `opskew record`):
  OPSKEW_INSTRUMENT   native, itt, nvtx, pyhook, or auto (native, else ITT if torch has
                      it, else pyhook; native falls back the same way, with one line)
  INTEL_LIBITTNOTIFY64 / NVTX_INJECTION64_PATH   the collector, set before torch loads
  OPSKEW_PYHOOK_PATH  the opskew._pyhook extension (loaded by path)
  OPSKEW_TRACE_OUT    the trace path
  OPSKEW_BOOT_ERROR   where a setup failure is described (one line), for the parent
  OPSKEW_RECORD_STATUS  where the outcome is reported to the parent (JSON: the
                      writer's code and errno, what it printed, a profiler conflict)
  OPSKEW_RECORD_PARENT  the parent's pid: this process gets SIGTERM when the
                      parent dies (PR_SET_PDEATHSIG, Linux), writes its trace
                      and then removes OPSKEW_RECORD_TMPDIR, the parent's
                      temporary folder, which nobody else would remove
"""

import atexit
import importlib.util
import json
import os
import runpy
import shutil
import signal
import sys

# The opskew package's folder (this file is in its _entry/ folder).
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_by_path(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# The one exit-code table, by path like collectors.py (opskew may not be importable here).
EXIT_SETUP = _load_by_path("_opskew_exitcodes", os.path.join(_PACKAGE, "exitcodes.py")).EXIT_SETUP

# What the parent learns at the end (OPSKEW_RECORD_STATUS), filled as it happens.
_STATUS = {}
# The line the trace writer's C side prints on failure; the parent prints its own.
_C_WRITE_FAILED = "opskew: could not write the trace to "


def fail(msg):
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


# This bootstrap's process: a process the script forks inherits the atexit
# handlers below, and must neither report nor remove anything.
_BOOT_PID = os.getpid()
# The parent this process started under. Only when that was `opskew record`
# itself (not a wrapper script that forked this interpreter) does a change
# of parent mean that record died.
_BOOT_PPID = os.getppid()


def _ours():
    return os.getpid() == _BOOT_PID


def _orphaned():
    parent = os.environ.get("OPSKEW_RECORD_PARENT", "")
    return (_ours() and parent.isdigit() and int(parent) == _BOOT_PPID
            and os.getppid() != _BOOT_PPID)


def _remove_parents_tmpdir():
    """At exit, when the parent died (SIGKILL): its temporary folder, which
    it can no longer remove. Only a folder named as the parent names it,
    and not through a link."""
    tmpdir = os.environ.get("OPSKEW_RECORD_TMPDIR", "")
    if not tmpdir or not _orphaned():
        return
    if os.path.basename(tmpdir).startswith("opskew-record-") and os.path.isdir(tmpdir) \
            and not os.path.islink(tmpdir):
        shutil.rmtree(tmpdir, ignore_errors=True)


def die_with_parent():
    """SIGTERM when the parent dies, so a SIGKILLed `opskew record` leaves no
    orphan running: the script stops as on Ctrl-C, its trace is written, and
    the parent's temporary folder removed (_remove_parents_tmpdir)."""
    if not os.environ.get("OPSKEW_RECORD_PARENT", "").isdigit() or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - no prctl: the child only outlives a killed parent
        return
    if _orphaned():  # the parent died before prctl
        raise SystemExit(128 + signal.SIGTERM)


def _write_status():
    path = os.environ.get("OPSKEW_RECORD_STATUS")
    if not path or not _ours() or _orphaned():
        return
    try:
        # A new file in the parent's private folder (mode 0700), never one
        # already there.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(_STATUS, f)
    except OSError:
        pass


def _profiler_conflict(exc, inst):
    """The one line for a script whose own torch profiler cannot start
    because the instrument holds torch's profiler (ITT and NVTX are
    torch.autograd.profiler modes; torch allows one profiler per thread)."""
    if not (isinstance(exc, RuntimeError) and "already enabled" in str(exc) and inst in ("itt", "nvtx")):
        return None
    other = ("--instrument native (opskew's RecordFunction callback runs alongside a profiler)"
             if inst == "itt" else "--instrument native (CPU-side operators, without NVTX ranges)")
    return ("the script starts its own torch profiler, which cannot run while the %s instrument holds "
            "torch's profiler (torch: %s); record with %s, or run the script without its own profiler"
            % (inst, str(exc).strip(), other))


def _finish_capturing(session):
    """session.finish(), with what its C side prints on stderr captured when
    a parent reports the outcome; returns (rc, errno, text)."""
    import ctypes

    tmpdir = os.environ.get("OPSKEW_RECORD_TMPDIR", "")
    if not tmpdir or not os.environ.get("OPSKEW_RECORD_STATUS") or not _ours():
        rc = session.finish()
        return rc, ctypes.get_errno() if rc < 0 else 0, ""
    sys.stderr.flush()
    path = os.path.join(tmpdir, "finish-stderr.txt")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:
        rc = session.finish()
        return rc, ctypes.get_errno() if rc < 0 else 0, ""
    saved = os.dup(2)
    os.dup2(fd, 2)
    try:
        ctypes.set_errno(0)
        rc = session.finish()
        err = ctypes.get_errno() if rc < 0 else 0
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    os.lseek(fd, 0, os.SEEK_SET)
    with os.fdopen(fd, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    os.unlink(path)
    return rc, err, text


def parse(argv):
    """Returns (kind, target, argv for the user's code)."""
    if not argv:
        fail("no script, -c or -m given to the Python command")
    if argv[0] == "-c":
        if len(argv) < 2:
            fail("-c needs an argument")
        return "code", argv[1], ["-c"] + argv[2:]
    if argv[0] == "-m":
        if len(argv) < 2:
            fail("-m needs an argument")
        return "module", argv[1], [argv[1]] + argv[2:]
    return "path", argv[0], list(argv)


def _load_boot():
    # By path, not by name: sys.path[0] is this folder only when the
    # interpreter runs without -P / -I, and opskew may not be importable.
    return _load_by_path("_opskew_boot", os.path.join(_PACKAGE, "tracer", "collectors.py"))


def _load_pyhook(path):
    try:
        return _load_by_path("opskew._pyhook", path)
    except Exception as exc:  # noqa: BLE001 - e.g. another Python version
        fail("cannot load opskew's profile hook (%s) in this interpreter: %s; run `opskew record` "
              "with the Python that opskew is installed in" % (path, exc))


def _start(boot, torch, inst):
    """Turns the instrument on and starts the record session; returns the Session."""
    if inst == "pyhook":
        path = os.environ.get("OPSKEW_PYHOOK_PATH", "")
        if not path:
            fail("run this through `opskew record`, which sets OPSKEW_PYHOOK_PATH")
        return boot.start_pyhook(_load_pyhook(path), torch, record=True)
    env, what = boot.ENV[inst], boot.WHAT[inst]
    path = os.environ.get(env, "")
    if not path:
        fail("run this through `opskew record`, which sets %s" % env)
    return boot.start_collector(
        torch, inst, path, record=True,
        not_bound=lambda bound: "PyTorch did not load opskew's %s collector (%s); is %s overridden, or "
                                "%s disabled in this build?" % (what, path, env, what))


def _start_native(boot, torch):
    """The native instrument's record session, or, after one line saying why
    it is unavailable, the name of the instrument to fall back to: ITT if
    `opskew record` arranged opskew's collector and torch has ITT, else pyhook."""
    try:
        native = _load_by_path("_opskew_native", os.path.join(_PACKAGE, "tracer", "native.py"))
        session, why = boot.start_native_or_why(native, torch, boot.default_path("native"), record=True)
    except boot.SetupError as exc:  # a session already active
        fail(str(exc))
    except Exception as exc:  # noqa: BLE001 - loading native.py failed: never break the run for it
        session, why = None, "its builder failed: %s" % exc
    if session is not None:
        return session
    itt = os.environ.get(boot.ENV["itt"], "")
    ours = bool(itt) and os.path.realpath(itt) == os.path.realpath(boot.default_path("itt"))
    return boot.native_fallback(torch, ours, why, "opskew record")

def main():
    # First registered, so it runs last, after the trace is written.
    atexit.register(_remove_parents_tmpdir)

    signal.signal(signal.SIGTERM, on_sigterm)
    die_with_parent()
    kind, target, user_argv = parse(sys.argv[1:])
    inst = os.environ.get("OPSKEW_INSTRUMENT") or "auto"
    if not os.environ.get("OPSKEW_TRACE_OUT") or inst not in ("auto", "native", "itt", "pyhook", "nvtx"):
        fail("run this through `opskew record`, which sets OPSKEW_INSTRUMENT and OPSKEW_TRACE_OUT")
    # Only this process writes the trace; children inheriting the
    # environment (multiprocessing, subprocess) must not overwrite it.
    os.environ["OPSKEW_TRACE_PID"] = str(os.getpid())
    # We start the session ourselves below, after a probe operator.
    os.environ["OPSKEW_TRACE_AUTOSTART"] = "0"

    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - any import failure ends here
        fail("cannot import torch in the traced interpreter: %s" % exc)

    boot = _load_boot()
    session = None
    if inst in ("native", "auto"):
        started = _start_native(boot, torch)  # a Session, or the fallback's name
        session, inst = (None, started) if isinstance(started, str) else (started, "native")
    if session is None:
        if inst == "nvtx":
            why = boot.cuda_missing_reason(torch)
            if why:
                fail("--device cuda: " + why)
        elif inst == "itt" and not boot.has_itt(torch):
            fail(boot.no_itt_message(torch, "--instrument pyhook"))
        try:
            session = _start(boot, torch, inst)
        except boot.SetupError as exc:
            fail(str(exc))
    # One W for the tracer: the in-window W record found in the calibrations.
    boot.apply_env_cost(session.lib, session.instrument, torch.__version__)

    def _finish():
        # A second Ctrl-C must not interrupt the write.
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                signal.signal(sig, signal.SIG_IGN)
            except (ValueError, OSError):
                pass
        rc, err, text = _finish_capturing(session)
        reported = bool(os.environ.get("OPSKEW_RECORD_STATUS")) and _ours() and not _orphaned()
        # Pass on what the C side printed, but the parent words the write's
        # failure itself, in one line, from the status.
        keep = "".join(line for line in text.splitlines(True)
                       if not (reported and line.startswith(_C_WRITE_FAILED)))
        if keep:
            sys.stderr.write(keep)
        _STATUS.update(rc=rc, errno=err, error=boot.strerror(session.lib, rc) if rc < 0 else "")
        if rc < 0 and not reported:
            why = os.strerror(err) if err else boot.strerror(session.lib, rc)
            sys.stderr.write("opskew record: cannot write the trace to %s: %s\n"
                             % (os.environ.get("OPSKEW_TRACE_OUT"), why))
        _write_status()

    atexit.register(_finish)

    sys.argv = user_argv
    try:
        run_user(kind, target)
    except BaseException as exc:
        conflict = _profiler_conflict(exc, inst)
        if conflict:
            _STATUS["profiler_conflict"] = conflict
            if not os.environ.get("OPSKEW_RECORD_STATUS"):
                sys.stderr.write("opskew record: %s\n" % conflict)
        raise


def on_sigterm(signum, frame):
    """SIGTERM becomes SystemExit(143), so that the script unwinds and the
    trace is written. Once: a second SIGTERM while it unwinds (in threading's
    shutdown, say) would raise in the middle of that ("Exception ignored in:
    <module 'threading'>"), and the exit is under way."""
    global _exiting
    if _exiting:
        return  # not SIG_IGN: children started while unwinding would inherit it
    _exiting = True
    raise SystemExit(128 + signum)


_exiting = False


def user_frames(tb):
    """The traceback from the first frame of the user's code: without the
    frames of opskew's bootstraps (this folder) and of runpy, which ran the
    script, so that an error reads as it would without opskew."""
    here = _PACKAGE + os.sep

    def ours(f):
        return f.startswith("<frozen runpy") or f == runpy.__file__ or os.path.abspath(f).startswith(here)

    while tb is not None and ours(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return tb


def for_user(exc):
    """`exc` with the user's frames only (user_frames), to raise on from a
    bootstrap's top level; None for SystemExit (never printed) and when no
    frame is the user's (the bootstrap's own failure: raise it as it is)."""
    tb = user_frames(exc.__traceback__)
    return None if tb is None or isinstance(exc, SystemExit) else exc.with_traceback(tb)


def run_user(kind, target):
    """Runs the user's code as `python` would: sys.path[0] is the script's
    folder ("" for -c, the working folder for -m), except under -P or -I
    (sys.flags.safe_path), where Python puts none there and the entry is the
    interpreter's own; a script's __file__ is absolute, as Python >= 3.9
    makes it, and sys.argv[0] stays as it was typed."""
    safe = getattr(sys.flags, "safe_path", False)
    if kind == "code":
        if not safe:
            sys.path[0] = ""
        import builtins

        globs = {"__name__": "__main__", "__builtins__": builtins, "__doc__": None, "__spec__": None}
        exec(compile(target, "<string>", "exec"), globs)  # noqa: S102 - the user's own -c code
    elif kind == "module":
        if not safe:
            sys.path[0] = os.getcwd()
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        path = os.path.abspath(target)
        if not safe:
            sys.path[0] = os.path.dirname(path)
        import zipfile

        if not os.path.isfile(path) or zipfile.is_zipfile(path):
            runpy.run_path(target, run_name="__main__")  # a folder or zip with __main__.py
            return
        _run_script(path)


def _run_script(path):
    """A source file as the __main__ module, as `python path` runs it:
    runpy.run_path would set sys.argv[0] to the path it is given, which is
    also __file__'s (absolute here)."""
    import builtins
    import types

    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __builtins__=builtins, __cached__=None)
    with open(path, "rb") as f:
        code = compile(f.read(), path, "exec")
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)  # noqa: S102 - the user's own script
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


if __name__ == "__main__":
    try:
        main()
    except BaseException as _exc:  # raised on with the user's frames (this line's comes first)
        _user = for_user(_exc)
        if _user is None:
            raise
        raise _user
