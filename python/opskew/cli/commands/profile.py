"""`opskew profile`: run an unmodified training script under `opskew.profile`."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

from opskew.analyze.job import SCHEMA as JOB_SCHEMA
from opskew.analyze.job import compute as summarize_job
from opskew.analyze.job import PROFILE_TRACES, rank_reports
from opskew.analyze.tracefile import CORRECTED_DIR
from opskew.cli.commands.record import command_of, exit_code, run_child, split_python
from opskew.errors import UsageError
from opskew.options import OptionValueError, finite_float
from opskew.output import write_file
from opskew.profiler import ADVISED_SCHEDULE, TRACE_NAME
from opskew.render.profile import moved_line, run_answer
from opskew.render.units import fmt_ns
from opskew.results.profile import ProfileResult
from opskew.vocab import PROFILER_OPTIONS

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

_OPTIONS = PROFILER_OPTIONS


def _finite_float(text: str) -> float:
    """--threshold's type: options.finite_float, its refusal as argparse's."""
    try:
        return finite_float(text)
    except OptionValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output-dir", default="opskew-profile", metavar="OUT",
                   help="folder for the traces and report.json (default: %(default)s)")
    g = p.add_argument_group("schedule (torch.profiler.schedule)")
    g.add_argument("--wait", type=int, default=ADVISED_SCHEDULE["wait"], metavar="N",
                   help="unrecorded steps before each cycle: the baseline; each serves one pair, the first 2 "
                        "after a trace are cold, the next 5 run under opskew's tracer (each leaf's own delta, "
                        "from a wait of 21) and the last 6 are paired (default %(default)s; 14 is enough for W)")
    g.add_argument("--warmup", type=int, default=ADVISED_SCHEDULE["warmup"], metavar="N", help="default %(default)s")
    g.add_argument("--active", type=int, default=ADVISED_SCHEDULE["active"], metavar="N",
                   help="recorded steps per cycle (default %(default)s)")
    g.add_argument("--repeat", type=int, default=ADVISED_SCHEDULE["repeat"], metavar="N",
                   help="cycles (0: until the script ends; default %(default)s)")
    g.add_argument("--skip-first", type=int, default=ADVISED_SCHEDULE["skip_first"], metavar="N",
                   help="steps before the first cycle, unrecorded: the loop warms up (allocator, caches) and "
                        "the last of them join the first baseline (default %(default)s)")
    o = p.add_argument_group("profiler options (torch.profiler.profile's)")
    for name in _OPTIONS:
        o.add_argument("--" + name.replace("_", "-"), action="store_true", dest=name)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                   help="cuda: record CUDA activity too, and synchronize at each step boundary "
                        "(default: %(default)s)")
    p.add_argument("--step-marker", metavar="NAME",
                   help="steps end where each record_function(NAME) ends, instead of at optimizer steps")
    p.add_argument("--threshold", type=_finite_float, default=0.05,
                   help="in-window slowdown that counts as skew (default: %(default)s)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="print each cycle's every figure (default: its answer, W, the verdict, each note once; "
                        "report.json keeps everything either way)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                   help="python [options] (SCRIPT | -c CODE | -m MODULE) [ARGS], or torchrun [OPTIONS] SCRIPT [ARGS]")


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
    ours = {n: "opskew.profile" for n in _reports(out)}
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
    for name in ("wait", "warmup", "skip_first", "repeat"):
        if getattr(args, name) < 0:
            raise UsageError(f"--{name.replace('_', '-')} must be 0 or more")
    if args.active < 1:
        raise UsageError("--active must be 1 or more")
    if args.wait < 1:
        raise UsageError("--wait must be 1 or more: the wait steps are the baseline W is measured against")
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
    spec = {"out": out, "device": args.device, "step_marker": args.step_marker, "threshold": args.threshold,
            "verbose": args.verbose,
            "schedule": {k: getattr(args, k) for k in ("wait", "warmup", "active", "repeat", "skip_first")},
            "options": {k: getattr(args, k) for k in _OPTIONS}}
    tmpdir = tempfile.mkdtemp(prefix="opskew-profile-run-")
    env = dict(os.environ)
    env["OPSKEW_PROFILE_SPEC"] = json.dumps(spec)
    # Kineto's per-cycle start/stop lines would drown the report (as in
    # measure.py); a level the user set is kept.
    env.setdefault("KINETO_LOG_LEVEL", "6")
    env["OPSKEW_BOOT_ERROR"] = os.path.join(tmpdir, "boot-error.txt")
    if job is None:  # under torchrun the workers' parent is torchrun's agent
        env["OPSKEW_RECORD_PARENT"] = str(os.getpid())
    before = {n: _mtime(os.path.join(out, n)) for n in _reports(out)}
    try:
        rc = run_child(argv, env, "opskew.profile could not start in the command")
        # A worker that could not start (torchrun exits 1 for it) left its reason.
        why = _read(env["OPSKEW_BOOT_ERROR"])
        if why:
            raise UsageError(why)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    fresh = [n for n in _reports(out) if _mtime(os.path.join(out, n)) != before.get(n)]
    written = bool(fresh)
    doc = _read_report(os.path.join(out, "report.json")) if "report.json" in fresh else None
    if not written:
        print(f"opskew profile: no report was written to {out}", file=sys.stderr)
    elif "report.json" in fresh:
        path = os.path.join(out, "report.json")
        answer = run_answer(doc or {})
        print("opskew profile: " + _outcome(path, doc, with_path=not answer), file=sys.stderr)
        _picture(out, doc, "report.png")
        if answer:
            moved = moved_line(doc["report"], "opskew profile: moved most in the latest cycle") \
                if doc.get("report") else ""
            if moved:
                print(moved, file=sys.stderr)
            print(f"opskew profile: {answer}; report: {path}", file=sys.stderr)
    else:
        _job_report(out, sorted(fresh, key=_rank_key))
        _job_summary(out, sorted(fresh, key=_rank_key))
        for n, rank_doc in rank_reports(out, sorted(fresh, key=_rank_key)):
            _picture(out, rank_doc, n[: -len(".json")] + ".png")
    kept = "the traces and report hold what ran until then"
    if doc is not None and not _traces(doc):
        kept = "report.json says how far it got (no trace was written)"
    return exit_code(rc, written, who="opskew profile", kept=kept)


def _picture(out: str, doc: dict | None, name: str) -> None:
    """The latest cycle's picture (ProfileResult.plot: its operators, reported
    against corrected, and W per cycle) as OUT/NAME, and a line saying so, or
    why there is none (matplotlib is an optional extra). Never fails the run."""
    if not doc or not doc.get("report"):
        return
    path = os.path.join(out, name)
    try:
        ProfileResult(doc).plot(path)
    except ImportError as exc:
        print(f"opskew profile: no picture: {exc}", file=sys.stderr)
    except Exception as exc:  # noqa: BLE001 - the run's traces and report stand
        print(f"opskew profile: no picture ({type(exc).__name__}: {exc})", file=sys.stderr)
    else:
        print(f"opskew profile: picture {path}", file=sys.stderr)


def _read_report(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _traces(doc: dict) -> int:
    """A run's traces: report.json keeps the latest cycles' reports and
    counts the earlier ones (earlier_reports)."""
    return len(doc.get("reports") or []) + (doc.get("earlier_reports") or 0)


def _pairs_of(final: dict) -> str:
    """Where the run's final W comes from, in words."""
    n, run = final.get("cycles"), final.get("run_cycles")
    if n is not None and run is not None and n < run:
        return f"the {final['pairs']} pairs of the last {n} of {run} cycles"
    return f"all {final['pairs']} pairs of the run"


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


def _reports(out: str) -> list:
    try:
        names = os.listdir(out)
    except OSError:
        return []
    return [n for n in names if n == "report.json" or (n.startswith("report.rank") and n.endswith(".json"))]


def _rank_key(name: str):
    digits = name[len("report.rank"):-len(".json")]
    return int(digits) if digits.isdigit() else -1


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return ""


def _job_report(out: str, names: list) -> None:
    """The job's report (report.json, schema opskew.profile.job/1): each
    rank's W, interval, inflation and traces, from its report.rankN.json;
    and a table of them on stderr."""
    ranks = []
    for n, doc in rank_reports(out, names):
        last = doc.get("final") or doc.get("report") or {}
        ranks.append({"rank": doc.get("rank"), "report": n, "w_ns": last.get("w_ns"),
                      "w_source": last.get("w_source", "in-run"), "inflation": last.get("inflation"),
                      "pairs": last.get("pairs"), "verdict": (doc.get("report") or {}).get("verdict"),
                      "traces": _traces(doc),
                      "ended_by": doc.get("ended_by"),
                      "step_source": doc.get("step_source")})
    job = {"schema": "opskew.profile.job/1", "world_size": len(ranks), "ranks": ranks,
           "note": "each rank's W is measured on that rank; under collectives a rank's active steps include "
                   "waiting for slower ranks, so a rank's W carries the instrument cost of the ranks it waits "
                   "for too (docs/profile.md)"}
    write_file(os.path.join(out, "report.json"), json.dumps(job, indent=1))
    lines = [f"opskew profile: {len(ranks)} rank(s); job report {os.path.join(out, 'report.json')}"]
    for r in ranks:
        w = r["w_ns"] or {}
        ci = w.get("ci95")
        wt = (f"W {fmt_ns(w['median'])}" + (f" [{fmt_ns(ci[0])}, {fmt_ns(ci[1])}]" if ci else " (no 95% CI)")
              if w else "W unknown")
        infl = f", inflation {100 * (r['inflation'] - 1):+.1f}%" if r["inflation"] is not None else ""
        lines.append(f"  rank {r['rank']}: {wt}{infl}, {r['pairs'] or 0} pairs, {r['traces']} trace(s); "
                     f"{r['ended_by']}")
    print("\n".join(lines), file=sys.stderr)


def _job_summary(out: str, names: list) -> None:
    """`opskew summary` of this job's raw traces (those its ranks' reports
    name), written as job-summary.json beside them, with a few lines on
    stderr: each rank's own cost and what it absorbed, the stragglers. A
    failure here only says so: the job's traces and reports stand."""
    traces, earlier = [], 0
    for _, doc in rank_reports(out, names):
        traces += [r["raw_trace"] for r in doc.get("reports") or [] if r.get("raw_trace")
                   and os.path.isfile(r["raw_trace"])]
        earlier = max(earlier, doc.get("earlier_reports") or 0)
    path = os.path.join(out, "job-summary.json")  # a foreign one was refused before the run
    try:
        doc = summarize_job(traces)
    except Exception as exc:  # noqa: BLE001 - the job's own outputs stand
        print(f"opskew profile: no job summary ({exc})", file=sys.stderr)
        return
    write_file(path, json.dumps(doc, indent=1))
    lines = [f"opskew profile: job summary {path} (opskew summary {out} prints it): collectives {doc['family']}, "
             f"{doc['matched']} matched" + (f"; from each rank's latest cycles, not its {earlier} earlier ones"
                                            if earlier else "")]
    steps = max(len(doc["steps"]), 1)
    for r in doc["ranks"]:
        if doc["corrected"]:
            lines.append(f"  rank {r['rank']}: own cost {fmt_ns(r['own_ns'] / steps)} per step, absorbed "
                         f"{fmt_ns(r['absorbed_ns'] / steps)} per step from the others' (TAU's parallel model)")
    lines += [f"  straggler: rank {s['rank']} ({100 * s['share']:.0f}% of the lateness at collectives)"
              for s in doc["stragglers"] if s["straggler"]]
    print("\n".join(lines), file=sys.stderr)


def _mtime(path: str):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns)


def _outcome(report: str, doc: dict | None = None, with_path: bool = True) -> str:
    """One line: what was written, and W, from report.json (`doc`, when
    already read); `with_path`: it ends with the report's path (no line with
    the run's true step follows)."""
    doc = doc if doc is not None else _read_report(report)
    if doc is None:
        return f"{report} could not be read back"
    reps = doc.get("reports") or []
    aside = (f"opskew stood aside {doc['stood_aside']} (torch runs one profiler at a time); "
             if doc.get("stood_aside") else "")
    if not reps and aside:
        return f"{aside}it stopped before a cycle completed: no trace; report: {report}"
    if not reps:
        sch = doc["conditions"]["schedule"]
        need = sum(sch.get(k) or 0 for k in ("skip_first", "wait", "warmup", "active"))
        n = doc["step_boundaries"]
        why = (f"no cycle completed ({n} step boundaries from {doc['step_source']}; the first cycle needs "
               f"{need}: --skip-first {sch.get('skip_first') or 0} + --wait + --warmup + --active)")
        ended = doc.get("ended_by")
        if n == 0 and ended not in (None, "the script returned"):
            why = f"the script ended ({ended}) before its first step boundary: nothing was profiled"
        elif n == 0:
            why += (". Steps end at optimizer.step() calls on the main thread; without them, mark steps with "
                    "--step-marker NAME (the end of each record_function(NAME)) or opskew.step() in the script")
        else:
            why += ": run more steps, or lower --skip-first or --wait"
        kids = doc.get("child_processes") or 0
        if kids and not doc["step_boundaries"]:
            why += (f". The script started {kids} process(es) through multiprocessing (DataLoader workers count "
                    "too); opskew profile follows only the process it started (and torchrun's workers). If the "
                    "training ran in them (torch.multiprocessing.spawn, say): start the workers with torchrun "
                    "(`opskew profile -- torchrun ...`), or use opskew.profile inside the worker function "
                    "(docs/profile.md)")
        return f"{why}; report: {report}"
    last = reps[-1]
    final = doc.get("final") or {}
    w = final.get("w_ns") or last.get("w_ns") or {}
    ci = w.get("ci95")
    wtext = (f"W {fmt_ns(w['median'])}" + (f" [{fmt_ns(ci[0])}, {fmt_ns(ci[1])}]" if ci else " (no 95% CI)")
             + (f" per operator event (in-run, {_pairs_of(final)})" if final
                else f" per operator event ({last.get('w_source')})")) if w else "W unknown"
    # report.json holds the latest cycles' reports only (earlier_reports
    # counts the others): the counts cover the whole run.
    earlier = _traces(doc) - len(reps)
    corrected = sum(1 for r in reps if r.get("corrected_trace"))
    refit = sum(1 for r in reps if r.get("corrected_with") == "the run's final W")
    final = ("" if not corrected else " (each with the run's final W)" if refit == corrected and not earlier
             else f" (the latest {refit} with the run's final W, the others with their own cycle's)" if refit
             else "")
    counted = (f"{_traces(doc)} trace(s), {corrected} of the latest {len(reps)} corrected{final}" if earlier
               else f"{len(reps)} trace(s), {corrected} corrected{final}")
    where = os.path.join(os.path.dirname(report), PROFILE_TRACES)
    return (f"{aside}{counted}, in {where} (the corrected ones in {os.path.join(where, CORRECTED_DIR)}); {wtext}; "
            f"steps from {doc['step_source']}" + (f"; report: {report}" if with_path else ""))
