"""`opskew record`: run a Python command under opskew's C operator tracer."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from ..errors import EXIT_INTERRUPTED, EXIT_WORKLOAD, OpskewError, UsageError

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
"""

BOOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_record_boot.py")
BOOT_EXIT_SETUP = 86  # _record_boot.EXIT_SETUP
_PY_RE = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?$")
# Interpreter options that take a value (`python -X dev -W error script.py`).
_PY_OPTS_WITH_VALUE = {"-X", "-W", "--check-hash-based-pycs"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", default="opskew-trace.json", metavar="TRACE",
                   help="Chrome trace to write (default: %(default)s)")
    p.add_argument("--summary", action="store_true",
                   help="print a per-operator table (calls, total, self, corrected self, p50, p99)")
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


def _split_python(cmd: list) -> tuple:
    """(interpreter argv, user part) where the user part starts at SCRIPT, -c or -m."""
    exe = cmd[0]
    name = os.path.basename(exe)
    if not (_PY_RE.match(name) or os.path.realpath(shutil.which(exe) or exe) == os.path.realpath(sys.executable)):
        raise UsageError(
            f"COMMAND must start with a Python interpreter (got {exe!r}): opskew injects "
            "its tracer through the interpreter, e.g. `opskew record -- python script.py`"
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

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
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


def _header(path: str) -> dict:
    """The trace's "opskew" object, as the C reader keeps it (tracefile.scan,
    stopping where the events begin);
    {} when the trace has none or cannot be read (the line printed then says
    "?")."""
    from ..tracefile import scan

    try:
        header = scan(path, header_only=True)["objects"].get("opskew")
    except OpskewError:
        return {}
    return header if isinstance(header, dict) else {}


def run(args) -> int:
    from ..tracing import COLLECTOR_ENV, NVTX_ENV, collector_path, resolve_instrument

    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UsageError("no command given: opskew record -o trace.json -- python script.py")
    if args.top < 0:
        raise UsageError("--top must be 0 (all) or more")
    interp, rest = _split_python(cmd)
    out = os.path.abspath(args.output)
    if not os.path.isdir(os.path.dirname(out)):
        raise UsageError(f"the directory of {out} does not exist")
    if rest[0] not in ("-c", "-m") and not os.path.isfile(rest[0]):
        raise UsageError(f"script not found: {rest[0]}")
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
        from .. import _pyhook

        env["OPSKEW_PYHOOK_PATH"] = os.path.abspath(_pyhook.__file__)

    # A stale file must never pass for this run's trace.
    if os.path.exists(out):
        os.unlink(out)
    tmpdir = tempfile.mkdtemp(prefix="opskew-record-")
    env["OPSKEW_TRACE_OUT"] = out
    env["OPSKEW_BOOT_ERROR"] = os.path.join(tmpdir, "boot-error.txt")
    want_summary = args.summary or args.json
    if want_summary:
        env["OPSKEW_SUMMARY_TXT"] = os.path.join(tmpdir, "summary.txt")
        env["OPSKEW_SUMMARY_JSON"] = os.path.join(tmpdir, "summary.json")
        env["OPSKEW_SUMMARY_ROWS"] = str(args.top)
    try:
        try:
            proc = subprocess.Popen(interp + [BOOT] + rest, env=env)
        except OSError as exc:
            raise UsageError(f"cannot run {cmd[0]!r}: {exc.strerror}") from None
        rc = _wait_forwarding(proc)
        if rc == BOOT_EXIT_SETUP:
            try:
                with open(env["OPSKEW_BOOT_ERROR"], encoding="utf-8") as f:
                    why = f.read().strip()
            except OSError:
                why = ""
            raise UsageError(why or "the tracer could not start in the command (see the message above)")
        if not os.path.exists(out):
            raise OpskewError(f"the command exited with status {rc} and no trace was written to {out}")
        meta = _header(out)
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
        if want_summary:
            key = "summary.json" if args.json else "summary.txt"
            try:
                with open(os.path.join(tmpdir, key), encoding="utf-8") as f:
                    sys.stdout.write(f.read())
                sys.stdout.flush()
            except OSError:
                print("opskew record: the summary was not written", file=sys.stderr)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)

    if rc in (-signal.SIGINT, -signal.SIGTERM, 128 + signal.SIGINT, 128 + signal.SIGTERM):
        print("opskew record: the command was interrupted; the trace holds what ran until then", file=sys.stderr)
        return EXIT_INTERRUPTED
    if rc != 0:
        print(f"opskew record: the command exited with status {rc}; the trace holds what ran until then",
              file=sys.stderr)
        return EXIT_WORKLOAD
    return 0
