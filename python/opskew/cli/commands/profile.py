"""`opskew profile`: run an unmodified training script under `opskew.profile`.
Its options and what its finished run's files say come from
opskew.analyze.profile_run (SPEC, finished), the text from
opskew.render.profile_run; here, the command line: the checks of COMMAND and
OUT, starting the script and forwarding signals to it."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

from opskew.analyze import profile_run as L
from opskew.analyze.job import SCHEMA as JOB_SCHEMA
from opskew.analyze.job import PROFILE_TRACES
from opskew.analyze.tracefile import CORRECTED_DIR
from opskew.cli.commands.record import command_of, exit_code, run_child, split_python
from opskew.cli.spec import add_spec
from opskew.errors import UsageError
from opskew.profiler import TRACE_NAME
from opskew.render import profile_run as text

HELP = "profile a training script with no code change; traces corrected from its own wait steps"

DESCRIPTION = """\
Runs COMMAND (a Python interpreter with a script, -c CODE or -m MODULE, or torchrun) with
torch.profiler on a schedule (--wait, --warmup, --active, --repeat), through
opskew.profile (docs/profile.md): each step is timed, the steps the profiler
does not record (wait) are paired with the steps it records (active), and W,
the profiler's cost per operator event on this workload in this run, comes
with a 95% interval. Each cycle's trace is written to OUT with a corrected
trace beside it. Each cycle prints on stderr its true (corrected) step against
the profiled one, the operators the correction moved most, W and the verdict (per
operator: believable, inflated, unresolved, unknowable; --verbose: every figure; each note once per run); OUT/report.json keeps it
all. The last line is the run's true step with its interval.

Steps, with no code change, are the optimizer's steps (torch.optim's global
step hook; the first optimizer that steps, when there are several). A loop
without an optimizer marks its steps with --step-marker NAME (the end of each
`with torch.profiler.record_function(NAME):` is a step boundary) or calls
opskew.step() once per step. The profiler starts at the first step boundary:
the script's setup is never a step.

Files in OUT (a folder, created if absent; files of the same names that
opskew wrote there before are replaced, and a line counts an earlier run's
traces that stay beside the new ones):
  traces/opskew-profile-cycleN.pt.trace.json
                the raw trace of cycle N, as torch exports it
  traces/corrected/opskew-profile-cycleN.corrected.pt.trace.json
                corrected with the in-run W
  report.json   every cycle's report, the step times and conditions (schema
                opskew.profile/1), rewritten after each cycle
TensorBoard's profiler plugin lists both folders (tensorboard --logdir OUT),
each cycle as a worker; HolisticTraceAnalysis reads either folder as a set,
one trace per rank: TraceAnalysis(trace_dir="OUT/traces/corrected").
Beside report.json, report.png: the latest cycle's picture, its operators
reported against corrected with their intervals and trust marks, and W per
cycle (report.rankR.png under torchrun; it needs matplotlib, the opskew[plot]
extra: without it one line says so).
An exception, SIGINT or SIGTERM in the script finishes the cycle in progress
and keeps everything collected until then.

Under torchrun (`-- torchrun [OPTIONS] SCRIPT ARGS`, or `python -m
torch.distributed.run ...`) each worker runs SCRIPT under opskew.profile and
measures its own W; files carry the rank (opskew-profile-rankR-cycleN.pt.trace.json,
report.rankR.json) and report.json is the job's: every rank's W, interval and
inflation (schema opskew.profile.job/1).

The default schedule (skip_first 10, wait 21, warmup 1, active 7, repeat 3: 97
steps) pairs 18 active steps, each with a wait step of its own; 6 pairs give a
95% interval. The first active step of each cycle, the run's first step and
the first 2 steps after each trace are cold and are not used; the last 6 wait
steps, which lie past the trace's after-effect, are the baseline. Steps 3 to 7
after a trace run under opskew's own tracer, which gives each leaf operator
its own delta (a wait of 21 leaves 8 steps for its after-effect to fade
before the baseline; with less, every operator keeps one delta; 14 is enough
for W). docs/profile.md has it all. Fewer pairs: the report says what to raise.

examples:
  opskew profile -o prof -- python train.py --epochs 1
  opskew profile --record-shapes --with-stack --repeat 3 -- python train.py
  opskew profile --step-marker train_step -- python loop.py
  opskew profile -o prof -- torchrun --nproc-per-node 2 --standalone train.py

exit status: the command's own (a script's sys.exit(3) makes profile exit 3;
a command killed by signal N: 128+N; SIGINT or SIGTERM: 130), except:
  2    refused before running: bad arguments, OUT not a folder, no Python
       command, or opskew.profile could not start in it
  7    the command exited 0 but no report could be written (one line says why)
"""

# opskew/_entry/profile_boot.py, from opskew/cli/commands/profile.py.
BOOT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "_entry",
                    "profile_boot.py")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_spec(p, L.SPEC)


def _remove_if_empty(folder: str) -> None:
    """A refused run leaves nothing it created: `folder` (made by this run)
    and the folders below it, bottom-up, each only where it is empty; a file
    in them (anything someone wrote) keeps it and the folders above it."""
    for root, _dirs, _files in sorted(os.walk(folder), key=lambda t: -len(t[0])):
        try:
            os.rmdir(root)
        except OSError:
            pass


def _output_dir(path: str) -> tuple:
    """(OUT's absolute path, whether this run created it)."""
    out = os.path.abspath(path)
    if os.path.lexists(out) and not os.path.isdir(out):
        raise UsageError(f"-o {path}: not a folder")
    ours = {n: "opskew.profile" for n in L.reports(out)}
    if os.path.lexists(os.path.join(out, "job-summary.json")):
        ours["job-summary.json"] = JOB_SCHEMA
    for name, schema in ours.items():
        # report.json is a common name: replace only opskew's own.
        try:
            with open(os.path.join(out, name), encoding="utf-8") as f:
                found = json.load(f).get("schema", "")
        except (OSError, ValueError, AttributeError):
            found = ""
        if not str(found).startswith(schema):
            raise UsageError(f"-o {path}: {name} there is not opskew's ({schema}); opskew will not replace "
                             "it (give another folder)")
    if not os.path.isdir(out):
        parent = os.path.dirname(out)
        if not os.path.isdir(parent):
            raise UsageError(f"-o {path}: " + ("the folder above it does not exist" if not os.path.lexists(parent)
                                                else f"{os.path.dirname(path) or parent} is not a folder"))
        try:
            os.mkdir(out)
        except FileExistsError:
            return out, False
        except OSError as exc:
            raise UsageError(f"-o {path}: cannot create it: {exc.strerror}") from None
        return out, True
    else:
        # This version's folders (OUT/traces, OUT/traces/corrected) and OUT
        # itself, where earlier versions put them.
        old = [n for d in (out, os.path.join(out, PROFILE_TRACES), os.path.join(out, PROFILE_TRACES, CORRECTED_DIR))
               if os.path.isdir(d) for n in os.listdir(d) if TRACE_NAME.match(n)]
        if old:
            sys.stderr.write(f"opskew profile: {out} holds {len(old)} trace file(s) of an earlier run; this run "
                             "replaces those of the same names only, and its report.json lists its own (remove "
                             "them, or give another folder, to keep runs apart)\n")
    return out, False


def run(args) -> int:
    cmd = command_of(args, "opskew profile -o prof -- python train.py")
    L.validate(args)
    argv = job = _torchrun_argv(cmd)
    if job is None:
        interp, rest = split_python(cmd)
        if rest[0] not in ("-c", "-m") and not os.path.isfile(rest[0]):
            raise UsageError(f"script not found: {rest[0]}")
        argv = interp + [BOOT] + rest
    out, created = _output_dir(args.output_dir)
    try:
        return _run(args, argv, job, out)
    except UsageError:
        if created:  # refused (exit 2): the folder this run made goes, where nothing was written in it
            _remove_if_empty(out)
        raise


def _run(args, argv: list, job, out: str) -> int:
    tmpdir = tempfile.mkdtemp(prefix="opskew-profile-run-")
    env = dict(os.environ)
    env["OPSKEW_PROFILE_SPEC"] = json.dumps(L.boot_spec(args, out))
    # Kineto's per-cycle start/stop lines would drown the report (as in
    # measure.py); a level the user set is kept.
    env.setdefault("KINETO_LOG_LEVEL", "6")
    env["OPSKEW_BOOT_ERROR"] = os.path.join(tmpdir, "boot-error.txt")
    if job is None:  # under torchrun the workers' parent is torchrun's agent
        env["OPSKEW_RECORD_PARENT"] = str(os.getpid())
    before = L.stamps(out)
    try:
        rc = run_child(argv, env, "opskew.profile could not start in the command")
        # A worker that could not start (torchrun exits 1 for it) left its reason.
        why = _read(env["OPSKEW_BOOT_ERROR"])
        if why:
            raise UsageError(why)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    done = L.finished(out, L.fresh(out, before))
    text.render(done, sys.stderr)
    kept = "the traces and report hold what ran until then"
    if done["run"] is not None and done["run"]["doc"] is not None and not done["run"]["traces"]:
        kept = "report.json says how far it got (no trace was written)"
    return exit_code(rc, done["written"], who="opskew profile", kept=kept)


def _outcome(report: str, doc: dict | None = None, with_path: bool = True) -> str:
    """render.profile_run.outcome of the report.json at `report` (`doc`, when already read)."""
    return text.outcome(L.run_part(report, doc if doc is not None else L.read_report(report)), with_path)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return ""


def _torchrun_argv(cmd: list):
    """For `torchrun [OPTIONS] SCRIPT ARGS` (or `python -m torch.distributed.run
    ...`): the same command with the bootstrap put before SCRIPT, so that
    torchrun starts each worker as `python -u BOOT SCRIPT ARGS`; None for any
    other command. torchrun's own parser finds SCRIPT."""
    name = os.path.basename(cmd[0])
    if name == "torchrun":
        head, opts = cmd[:1], cmd[1:]
    elif "-m" in cmd[:-1] and cmd[cmd.index("-m") + 1] == "torch.distributed.run":
        i = cmd.index("-m") + 2
        head, opts = cmd[:i], cmd[i:]
    else:
        return None
    try:
        from torch.distributed.run import get_args_parser
    except ImportError as exc:
        raise UsageError(f"torchrun needs torch.distributed, which this torch lacks: {exc}") from None
    try:
        parsed = get_args_parser().parse_args(opts)
    except SystemExit:
        raise UsageError("torchrun's arguments were not understood (see its message above)") from None
    if parsed.no_python or parsed.run_path:
        raise UsageError("torchrun --no-python and --run-path are not supported: opskew profile starts each "
                         "worker's Python itself")
    i = len(opts) - len(parsed.training_script_args) - 1
    if i < 0 or opts[i] != parsed.training_script:
        raise UsageError("could not find the training script in torchrun's arguments")
    before = opts[:i]
    if parsed.module:
        before = [a for a in before if a not in ("-m", "--module")]
        target = ["-m", parsed.training_script]
    else:
        if not os.path.isfile(parsed.training_script):
            raise UsageError(f"script not found: {parsed.training_script}")
        target = [parsed.training_script]
    return head + before + [BOOT] + target + list(parsed.training_script_args)
