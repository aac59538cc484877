"""`opskew summary TRACE`: the key_averages()-style table of any Chrome trace;
`opskew summary DIR` (or several traces): a multi-rank job's (opskew.job).
The computation; the table is opskew.render.summary's, the command line
opskew.cli.commands.summary's."""

from __future__ import annotations

import os

from opskew.analyze import averages, job, profile_out
from opskew.analyze.tracefile import DEFAULT_EXCLUDED, losses_of, summarize
from opskew.errors import UsageError
from opskew.options import Spec, declared
from opskew.output import check_output
from opskew.results.views import lazy
from opskew.stats.costmodel import fields

warnings_of = lazy("trace_notes.warnings_of")

SCHEMA = "opskew.summary/1"

SORT_KEYS = {
    "total": lambda o: -o["total_ns"],
    "self": lambda o: -o["self_ns"],
    "calls": lambda o: -o["calls"],
    "mean": lambda o: -o["mean_ns"],
    "p99": lambda o: -o["p99_ns"],
    "name": lambda o: o["name"],
}


def declare(p: Spec) -> None:
    p.add_argument("trace", metavar="TRACE", nargs="+",
                   help="trace file (.json or .json.gz); '-' for standard input; a directory or several traces: "
                   "a multi-rank job")
    p.add_argument("--json", metavar="PATH", help="also write the summary as JSON to PATH ('-': stdout only)")
    p.add_argument("--sort", default="total", choices=tuple(SORT_KEYS),
                   help="order of the rows (default: total)")
    p.add_argument("--top", type=int, default=30, metavar="N",
                   help="rows to print, 0 for all (default: 30; --json always has all)")
    p.add_argument("--cat", metavar="CAT[,CAT...]",
                   help="only analyze events of these categories (e.g. cpu_op,user_annotation); "
                   "nesting and self time are then among those events only (default: all but "
                   "Kineto's 'Trace' span)")
    p.add_argument("--csv", metavar="PATH",
                   help="also write every operator as CSV to PATH ('-': stdout): a header line, then "
                   "plain numbers (times in ns, shares as fractions)")
    fix = p.add_argument_group("corrected (one trace): key_averages()'s table with the profiler's cost taken out")
    fix.add_argument("--corrected", action="store_true",
                     help="print the corrected table in torch's key_averages().table() layout, with each row's "
                     "interval and trust mark (docs/profile.md, \"A corrected key_averages()\"); W from "
                     "--calibration, --w, or the stored calibration `opskew correct` would take")
    fix.add_argument("--calibration", metavar="FILE",
                     help="with --corrected: a calibration file (default: the cache's for the trace's configuration)")
    fix.add_argument("--no-calibrate", action="store_true",
                     help="with --corrected and nothing stored for a torch.profiler trace's configuration: refuse "
                     "(by default one is measured now, on opskew's built-in steps, said in one line and stored)")
    fix.add_argument("--from", dest="from_out", metavar="OUT",
                     help="with --corrected: the W (its interval, delta, W_py) that an `opskew profile -o OUT` run "
                     "measured for TRACE (OUT or OUT/report.json): the W that wrote that cycle's corrected trace "
                     "when TRACE is one of the run's raw traces, else the run's final W; the table says which")
    job = p.add_argument_group("multi-rank jobs (a directory or several traces)")
    job.add_argument("--w", action="append", metavar="[RANK=]NS[,PY_NS]",
                     help="instrument cost per operator event (and per Python event) for the cross-rank "
                     "correction: for every rank, or RANK=NS for one; repeatable (default: the W_own that "
                     "opskew profile measured on each rank, its own cost by CPU time, from "
                     "report.rankR.json beside the traces). With --corrected on one trace: NS[,PY_NS], a W "
                     "given without an interval (delta 0)")
    job.add_argument("--align", choices=("auto", "on", "off"), default="auto",
                     help="apply the clock offsets estimated from the collectives (default auto: when the "
                     "traces come from more than one host)")
    job.add_argument("--per-rank", action="store_true", help="also print each rank's own table")
    job.add_argument("--corrected-dir", metavar="DIR",
                     help="write each rank's traces corrected for its own cost into DIR (NAME.corrected.json), "
                     "on rank 0's clock when the offsets are applied, with the rank's clock fit and "
                     "cross-rank figures in their metadata")


SPEC, Options = declared("summary", declare)


def is_job(args) -> bool:
    traces = args.trace if isinstance(args.trace, list) else [args.trace]
    return len(traces) > 1 or os.path.isdir(traces[0])


def profile_run(args):
    """The folder (or report.json) of one process's `opskew profile` run
    that args.trace names, else None (a trace, or a torchrun job's folder,
    read as a job)."""
    traces = args.trace if isinstance(args.trace, list) else [args.trace]
    found = profile_out.locate(traces[0]) if len(traces) == 1 else None
    return traces[0] if found and found[0] == profile_out.PROFILE_SCHEMA else None


def _profile(args, path: str, cats) -> dict:
    """`opskew summary OUT`: the run (profile_out.summary); with --corrected,
    its latest cycle's corrected key_averages() (averages.from_report)."""
    for flag, given in (("--cat", cats), ("--csv", getattr(args, "csv", None)), ("--w", getattr(args, "w", None)),
                        ("--calibration", getattr(args, "calibration", None)),
                        ("--from", getattr(args, "from_out", None)),
                        ("--corrected-dir", getattr(args, "corrected_dir", None)),
                        ("--per-rank", getattr(args, "per_rank", False))):
        if given:
            raise UsageError(f"{flag} is not taken with an opskew profile folder, whose run measured its own W "
                             "(--json has every figure; a trace of it: opskew summary TRACE --corrected --from "
                             f"{path})")
    check_output(args.json, inputs=[("the report", profile_out.locate(path)[1])])
    if not getattr(args, "corrected", False):
        return profile_out.summary(path, args.sort)
    if args.sort not in CORRECTED_SORT:
        raise UsageError(f"--sort {args.sort} with --corrected: one of {', '.join(CORRECTED_SORT)}")
    doc, _ = profile_out.load_run(path)
    try:
        out = averages.from_report(doc.get("report") or {})
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out["sort"] = CORRECTED_SORT[args.sort]
    out.setdefault("truncated", False)
    return out


def one_trace(args) -> None:
    """One trace (not a job): args.trace becomes the path itself."""
    if isinstance(args.trace, list) and not is_job(args):
        args.trace = args.trace[0]


def compute(args) -> dict:
    """The summary document (the --json, schema opskew.summary/1, or
    opskew.job_summary/1 for a job); prints nothing. The command line prints
    and writes it; opskew.api.summary returns it."""
    one_trace(args)
    if args.top < 0:
        raise UsageError("--top must be >= 0")
    if args.cat is not None and not isinstance(args.cat, str):
        raise UsageError(f"cat: a category or a list of them (e.g. cpu_op,user_annotation), not {args.cat!r}")
    cats = [c.strip() for c in args.cat.split(",") if c.strip()] if args.cat else None
    if args.cat is not None and not cats:
        raise UsageError("--cat needs at least one category")
    # An explicit --cat list is taken as is; by default Kineto's "Trace" span
    # (profiler bookkeeping, as long as the whole window) is left out.
    run = profile_run(args)
    if run is not None:
        return _profile(args, run, cats)
    if getattr(args, "corrected", False):
        return corrected(args, cats)
    for flag in ("calibration", "from_out", "no_calibrate"):
        if getattr(args, flag, None):
            raise UsageError(f"--{flag.replace('_out', '').replace('_', '-')} is for --corrected")
    if is_job(args):
        if getattr(args, "csv", None):
            raise UsageError("--csv is for one trace; a job's tables are in --json")
        check_output(args.json, inputs=[("an input trace", t) for t in args.trace])
        return job.compute(args.trace, costs=getattr(args, "w", None), align=getattr(args, "align", "auto"),
                           categories=cats)
    if getattr(args, "w", None) or getattr(args, "corrected_dir", None):
        raise UsageError("--w and --corrected-dir are for a job (a directory or several traces)")
    check_output(args.json, inputs=[("the input trace", args.trace)])  # before reading (docs/outputs.md)
    result = summarize(args.trace, categories=cats, exclude_categories=() if cats else DEFAULT_EXCLUDED,
                       progress=getattr(args, "progress", None))
    return {
        "schema": SCHEMA,
        "trace": args.trace,
        "status": result["status"],
        "error": result["error"],
        "categories": cats,
        "sort": args.sort,
        "metadata": result["metadata"],
        "losses": losses_of(result),
        "stats": result["stats"],
        "threads": result["threads"],
        "processes": result["processes"],
        "ops": sorted(result["ops"], key=SORT_KEYS[args.sort]),
        "warnings": warnings_of(result) + _unmatched(cats, result),
    }


# --sort's keys as the corrected table's attributes (torch's names).
CORRECTED_SORT = {"total": "cpu_time_total", "self": "self_cpu_time_total", "calls": "count", "mean": "cpu_time",
                  "name": None}


def corrected(args, cats) -> dict:
    """`--corrected`: the opskew.averages/1 document of one trace."""
    if is_job(args):
        raise UsageError("--corrected is for one trace; a job's cross-rank correction: --w and --corrected-dir")
    for flag, given in (("--cat", cats), ("--csv", getattr(args, "csv", None)),
                        ("--corrected-dir", getattr(args, "corrected_dir", None))):
        if given:
            raise UsageError(f"{flag} is not taken with --corrected (the corrected rows are in --json)")
    if args.sort not in CORRECTED_SORT:
        raise UsageError(f"--sort {args.sort} with --corrected: one of {', '.join(CORRECTED_SORT)}")
    w, py_w = averages.cli_w(getattr(args, "w", None))
    given = [f for f, v in (("--w", w), ("--calibration", args.calibration),
                            ("--from", getattr(args, "from_out", None))) if v is not None]
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)}: give one")
    check_output(args.json, inputs=[("the input trace", args.trace), ("the calibration", args.calibration)])
    if getattr(args, "from_out", None):
        m = profile_out.w_for_trace(args.from_out, args.trace)
        doc = averages.from_trace(args.trace, **fields(m["prices"]))
        doc["source"] = m["source"]
        doc["notes"] += profile_out.own_delta_notes(m)
    else:
        doc = averages.from_trace(args.trace, calibration=args.calibration, **fields({"operator": (w, None),
                                                                                       "python": (py_w, None)}),
                                  measure_calibration=None if getattr(args, "no_calibrate", False)
                                  else getattr(args, "measure_calibration", None))
    doc["sort"] = CORRECTED_SORT[args.sort]
    if args.sort == "name":
        doc["rows"].sort(key=lambda r: r["key"])
    return doc


def _unmatched(cats, result) -> list:
    """--cat categories no complete event has (a typo gave an empty table
    and exit 0, saying nothing)."""
    seen = {o["cat"] for o in result["ops"]}
    missing = [c for c in (cats or []) if c not in seen]
    if not missing:
        return []
    return [f"--cat: no complete event of categor{'y' if len(missing) == 1 else 'ies'} "
            f"{', '.join(repr(c) for c in missing)} in the trace ({result['stats'].get('filtered_events', 0)} "
            "complete event(s) of other categories left out)"]
