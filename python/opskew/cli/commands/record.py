"""`opskew record`: run a Python command under opskew's C operator tracer."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from importlib import metadata

from opskew.analyze.tracefile import scan
from opskew.calibration.store import tracer_cost
from opskew.errors import EXIT_INTERRUPTED, EXIT_OUTPUT, OpskewError, UsageError
from opskew.exitcodes import EXIT_SETUP
from opskew.output import check_output
from opskew.render.tables import trace_summary
from opskew.tracer import collectors
from opskew.tracer.session import COLLECTOR_ENV, NVTX_ENV, collector_path, resolve_instrument

HELP = "run a Python command under opskew's operator tracer and write a Chrome trace"

DESCRIPTION = """\
Runs COMMAND (a Python interpreter with a script, -c CODE or -m MODULE) with
opskew's C tracer fed by PyTorch, records every operator of every thread
(begin, end, thread, nesting) and writes a Chrome trace that Perfetto,
chrome://tracing and HolisticTraceAnalysis open (Kineto's conventions).

Instruments (--instrument; the line printed at the end says which was used):
  native  CPU, the default: opskew's RecordFunction callback (a small C++ shim
          compiled against your torch at first use, ~5-60 s, then cached) and
          opskew's native collector; every aten operator, backward included.
          Unavailable (no C++ compiler, a failed build, OPSKEW_NATIVE=0): ITT,
          else pyhook, with one line saying why
  itt     emit_itt() and opskew's ITT collector (x86-64 builds of torch);
          every aten operator, backward included
  nvtx    the default for --device cuda (chosen over ITT there): emit_nvtx()
          and opskew's NVTX injection library; CPU-side operator ranges
  pyhook  the fallback where torch has no ITT: a C profile hook that records
          torch *builtin calls* ("torch.add"), not aten operators; `a + b`,
          ops inside other ops and backward ops are not seen
  auto    native if available, else itt, else pyhook (nvtx with --device cuda)
OPSKEW_INSTRUMENT sets the default.

The environment is set before the command imports torch (INTEL_LIBITTNOTIFY64
or NVTX_INJECTION64_PATH, which PyTorch reads at import), and the instrument is
turned on for the script, so the script needs no change. The trace is written
when the script ends, raises, or receives SIGINT/SIGTERM (SIGTERM sent to
opskew is forwarded). The trace's "opskew" object names the instrument and
holds the tracer's calibration (its own cost per event) and the count of
events lost, by cause.

examples:
  opskew record -o t.json -- python train.py --epochs 1
  opskew record --summary -- python -c "import torch; a=torch.ones(1); [a+a for _ in range(1000)]"
  opskew record --device cuda -o t.json -- python train.py
  opskew record --instrument pyhook -- python script.py

exit status: the command's own (a script's sys.exit(3) makes record exit 3;
a command killed by signal N: 128+N; SIGINT or SIGTERM: 130), except:
  2    refused before running: bad arguments, or TRACE is a directory, a FIFO,
       a socket, the script itself or the interpreter (docs/outputs.md)
  7    the command exited 0 but its trace could not be written (one line says
       why: disk full, no permission)
A file already at TRACE is replaced only when this run's trace is complete;
until then, and when the run writes nothing, it is left as it was.
"""

# opskew/_entry/record_boot.py, from opskew/cli/commands/record.py.
BOOT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "_entry",
                    "record_boot.py")
_PY_RE = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?$")
# Interpreter options that take a value (`python -X dev -W error script.py`).
_PY_OPTS_WITH_VALUE = {"-X", "-W", "--check-hash-based-pycs"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", default="opskew-trace.json", metavar="TRACE",
                   help="Chrome trace to write, replaced only by a complete trace; a character device "
                        "such as /dev/null is written through (default: %(default)s)")
    p.add_argument("--summary", action="store_true",
                   help="print a per-operator table (calls, total, self, corrected total and self, mean, p50, p99)")
    p.add_argument("--json", action="store_true",
                   help="print the summary as JSON (schema opskew.trace.summary/1) instead")
    p.add_argument("--top", type=int, default=30, metavar="N",
                   help="rows of the summary table (0: all; default %(default)s)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                   help="cuda: record CPU-side operator ranges of a CUDA run through NVTX "
                        "(needs a CUDA build of torch and a device; default: %(default)s)")
    p.add_argument("--instrument", default=None, choices=("auto", "native", "itt", "nvtx", "pyhook"),
                   help="what feeds the tracer (default: $OPSKEW_INSTRUMENT or auto: native, else "
                        "itt, else pyhook; nvtx with --device cuda)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                   help="python [options] (SCRIPT | -c CODE | -m MODULE) [ARGS]")


def command_of(args, example: str) -> list:
    """The command after the options (`-- COMMAND`, the `--` optional); a
    UsageError showing `example` where none is given."""
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UsageError(f"no command given: {example}")
    return cmd


def split_python(cmd: list) -> tuple:
    """(interpreter argv, user part) where the user part starts at SCRIPT, -c or -m."""
    exe = cmd[0]
    name = os.path.basename(exe)
    if not (_PY_RE.match(name) or os.path.realpath(shutil.which(exe) or exe) == os.path.realpath(sys.executable)):
        raise UsageError(
            f"COMMAND must start with a Python interpreter (got {exe!r}): opskew loads itself "
            "into the script through the interpreter, e.g. `-- python script.py ARGS`"
        )
    i = 1
    while i < len(cmd):
        a = cmd[i]
        if a in ("-c", "-m") or not a.startswith("-") or a == "-":
            break
        if a in _PY_OPTS_WITH_VALUE:
            i += 1
        i += 1
    rest = cmd[i:]
    if not rest or rest[0] == "-":
        raise UsageError("give the Python command a script, -c CODE or -m MODULE (stdin and the REPL are not supported)")
    return cmd[:i], rest


def _wait_forwarding(proc: subprocess.Popen) -> int:
    """Waits for the child, forwarding SIGTERM at once and SIGINT after a
    grace second (a terminal's Ctrl-C already reached the child, which is in
    our process group; a second SIGINT could interrupt its trace write)."""
    state = {"int_at": None, "int_sent": False, "sig": None}

    def on_signal(signum, frame):
        state["sig"] = signum
        if signum == signal.SIGINT:
            if state["int_at"] is None:
                state["int_at"] = time.monotonic()
        else:
            try:
                proc.send_signal(signum)
            except ProcessLookupError:
                pass

    # A signal this process was started ignoring (a script's background
    # job: `cmd &` in a shell without job control ignores SIGINT) stays
    # ignored, as the child inherits it: opskew is as deaf to it as the
    # script would be alone.
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)
           if signal.getsignal(s) is not signal.SIG_IGN}
    try:
        while True:
            try:
                return proc.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                if state["int_at"] is not None and not state["int_sent"] and time.monotonic() - state["int_at"] > 1.0:
                    state["int_sent"] = True
                    try:
                        proc.send_signal(signal.SIGINT)
                    except ProcessLookupError:
                        pass
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def run_child(argv: list, env: dict, setup_failed: str) -> int:
    """Runs a bootstrap child (record's or profile's), forwarding signals;
    its exit status. A setup failure the child described in
    env["OPSKEW_BOOT_ERROR"] (exit EXIT_SETUP) is raised as UsageError."""
    try:
        proc = subprocess.Popen(argv, env=env)
    except OSError as exc:
        raise UsageError(f"cannot run {argv[0]!r}: {exc.strerror}") from None
    rc = _wait_forwarding(proc)
    if rc == EXIT_SETUP:
        try:
            with open(env["OPSKEW_BOOT_ERROR"], encoding="utf-8") as f:
                why = f.read().strip()
        except OSError:
            why = ""
        raise UsageError(why or f"{setup_failed} (see the message above)")
    return rc


def _header(path: str) -> dict:
    """The trace's "opskew" object, as the C reader keeps it (tracefile.scan,
    stopping where the events begin);
    {} when the trace has none or cannot be read (the line printed then says
    "?")."""
    try:
        header = scan(path, header_only=True)["objects"].get("opskew")
    except OpskewError:
        return {}
    return header if isinstance(header, dict) else {}


def _stored_costs(device: str) -> dict:
    """The in-window W `opskew calibrate` stored for each tracer instrument on
    this machine and torch, for the child (docs/tracer.md: one W for the
    tracer); the child checks that its torch is the one they were found for."""
    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        return {}
    env = {}
    for inst in ("native", "itt", "pyhook", "nvtx"):
        env.update(collectors.cost_env(inst, version, tracer_cost(inst, version, device)))
    return env


def run(args) -> int:
    cmd = command_of(args, "opskew record -o trace.json -- python script.py")
    if args.top < 0:
        raise UsageError("--top must be 0 (all) or more")
    interp, rest = split_python(cmd)
    if args.output == "-":
        raise UsageError("-o -: the trace cannot go to standard output, which the command writes to; "
                         "give a file")
    out = os.path.abspath(args.output)
    if not os.path.isdir(os.path.dirname(out)):
        raise UsageError(f"the directory of {out} does not exist")
    if rest[0] not in ("-c", "-m") and not os.path.isfile(rest[0]):
        raise UsageError(f"script not found: {rest[0]}")
    # Refused before anything runs: a TRACE the writer would refuse, or the
    # script or interpreter itself (docs/outputs.md). Nothing is removed.
    script = rest[0] if rest[0] not in ("-c", "-m") else None
    check_output(out, stdout=False, what="trace", inputs=[
        ("the script to run", script), ("the Python interpreter", shutil.which(interp[0]) or interp[0])])
    inst = resolve_instrument(args.instrument, args.device)
    env = dict(os.environ)
    env["OPSKEW_INSTRUMENT"] = inst
    if inst == "nvtx":
        collector = collector_path("nvtx")
        if os.environ.get(NVTX_ENV) and os.path.realpath(os.environ[NVTX_ENV]) != os.path.realpath(collector):
            raise UsageError(f"{NVTX_ENV} is set to another NVTX tool ({os.environ[NVTX_ENV]}); unset it")
        env[NVTX_ENV] = collector
        # Only NVTX: on a CUDA build with ITT, loading both would record twice.
        env.pop(COLLECTOR_ENV, None)
    elif inst in ("itt", "auto", "native"):
        # native falls back to ITT, which must be arranged before torch loads.
        collector = collector_path()
        foreign = os.environ.get(COLLECTOR_ENV) and os.path.realpath(os.environ[COLLECTOR_ENV]) != os.path.realpath(collector)
        if foreign and inst == "itt":
            raise UsageError(f"{COLLECTOR_ENV} is set to another ITT collector ({os.environ[COLLECTOR_ENV]}); unset it")
        if not foreign:
            env[COLLECTOR_ENV] = collector
    if inst in ("pyhook", "auto", "native"):
        # Its file, for the child; not loaded here (a collector's runtime).
        env["OPSKEW_PYHOOK_PATH"] = os.path.abspath(importlib.util.find_spec("opskew._pyhook").origin)

    before = _identity(out)
    tmpdir = tempfile.mkdtemp(prefix="opskew-record-")
    env.update(_stored_costs(args.device))
    env["OPSKEW_TRACE_OUT"] = out
    env["OPSKEW_BOOT_ERROR"] = os.path.join(tmpdir, "boot-error.txt")
    # The child reports how its write went here, and if this process dies it
    # gets SIGTERM, writes its trace and removes tmpdir (_record_boot.py).
    env["OPSKEW_RECORD_STATUS"] = os.path.join(tmpdir, "status.json")
    env["OPSKEW_RECORD_PARENT"] = str(os.getpid())
    env["OPSKEW_RECORD_TMPDIR"] = tmpdir
    want_summary = args.summary or args.json
    if want_summary:
        # The child writes the JSON only; the table is rendered here from it
        # by the one renderer every command uses (opskew.tables).
        env.pop("OPSKEW_SUMMARY_TXT", None)
        env["OPSKEW_SUMMARY_JSON"] = os.path.join(tmpdir, "summary.json")
    try:
        rc = run_child(interp + [BOOT] + rest, env, "the tracer could not start in the command")
        status = _status(env["OPSKEW_RECORD_STATUS"])
        written = _written(status, before, out)
        if written:
            meta = _header(out) if os.path.isfile(out) else {}  # a device: nothing to read back
            lost = (meta.get("lost") or {}).get("total", "?")
            used = meta.get("instrument", "?")
            note = {
                "pyhook": ": torch builtin calls, not aten operators"
                          + (", because this torch has no ITT" if inst == "auto" else ""),
                "nvtx": ": CPU-side operator ranges via emit_nvtx" + (", chosen for --device cuda"
                                                                      if args.device == "cuda" else ""),
            }.get(used, "")
            print(f"opskew record: {meta.get('events', '?')} events (instrument {used}{note}; "
                  f"lost {lost}) written to {out}", file=sys.stderr)
        else:
            print(f"opskew record: {_not_written(status, before, out, rc)}", file=sys.stderr)
        if status.get("profiler_conflict"):
            print(f"opskew record: {status['profiler_conflict']}", file=sys.stderr)
        if want_summary and written:
            try:
                with open(env["OPSKEW_SUMMARY_JSON"], encoding="utf-8") as f:
                    text = f.read()
                if args.json:
                    sys.stdout.write(text)
                else:
                    trace_summary(json.loads(text), top=args.top, out=sys.stdout)
                sys.stdout.flush()
            except (OSError, ValueError):
                print("opskew record: the summary was not written", file=sys.stderr)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)

    return exit_code(rc, written)


def _identity(path: str):
    """What is at path now, to tell this run's trace from an older file
    without removing it: (device, inode, mtime, size), or None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None  # a device is written through: nothing to compare
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def _status(path: str) -> dict:
    """What the child reported at its end ({} when it ended without, killed or
    through os._exit)."""
    try:
        with open(path, encoding="utf-8") as f:
            status = json.load(f)
    except (OSError, ValueError):
        return {}
    return status if isinstance(status, dict) else {}


def _written(status: dict, before, out: str) -> bool:
    """Whether this run wrote the trace: the child says its write succeeded,
    and a regular file at the path is a new one (the writer renames a new
    file into place, so its inode differs from the old file's)."""
    if status.get("rc") != 0:
        return False
    now = _identity(out)
    try:
        device = stat.S_ISCHR(os.stat(out).st_mode)
    except OSError:
        return False
    return device or (now is not None and now != before)


def _not_written(status: dict, before, out: str, rc: int) -> str:
    """One line: why no trace was written by this run."""
    if status.get("rc") is not None and status.get("rc") != 0:
        err = status.get("errno") or 0
        why = os.strerror(err) if err else status.get("error") or "the write failed"
        why = why[:1].lower() + why[1:]
        text = f"cannot write the trace to {out}: {why}"
    else:
        how = (f"was killed by signal {-rc}" if rc < 0 else
               "ended without finishing the recording (os._exit, or killed)")
        text = f"no trace was written to {out}: the command {how}"
    if before is not None:
        text += "; the file there is from before this run, unchanged"
    return text


def exit_code(rc: int, written: bool, who: str = "opskew record",
               kept: str = "the trace holds what ran until then") -> int:
    """record's (and profile's) exit status: the command's own, 130 for
    SIGINT/SIGTERM, 128+N for another signal N, and EXIT_OUTPUT when the
    command succeeded but nothing was written (docs/outputs.md)."""
    if rc in (-signal.SIGINT, -signal.SIGTERM, 128 + signal.SIGINT, 128 + signal.SIGTERM):
        print(f"{who}: the command was interrupted" + (f"; {kept}" if written else ""), file=sys.stderr)
        return EXIT_INTERRUPTED
    if rc < 0:
        return 128 - rc
    if rc != 0:
        print(f"{who}: the command exited with status {rc}" + (f"; {kept}" if written else ""),
              file=sys.stderr)
        return rc
    return 0 if written else EXIT_OUTPUT
