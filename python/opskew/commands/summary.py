"""`opskew summary TRACE`: the key_averages()-style table of any Chrome trace;
`opskew summary DIR` (or several traces): a multi-rank job's (opskew.job)."""

from __future__ import annotations

import argparse
import sys

from opskew.errors import EXIT_OK, UsageError
from opskew.output import check_output, write_json
from opskew.render.units import count_of, fmt_ns
from opskew.analyze.tracefile import DEFAULT_EXCLUDED, EXIT_TRUNCATED, losses_line, losses_of, summarize, warnings_of

SCHEMA = "opskew.summary/1"

SORT_KEYS = {
    "total": lambda o: -o["total_ns"],
    "self": lambda o: -o["self_ns"],
    "calls": lambda o: -o["calls"],
    "mean": lambda o: -o["mean_ns"],
    "p99": lambda o: -o["p99_ns"],
    "name": lambda o: o["name"],
}

HELP = "per-operator table (like key_averages()) of a trace, or of a multi-rank job's traces"
DESCRIPTION = """\
Reads TRACE, a Chrome trace as torch.profiler exports it (.json or .json.gz)
or as opskew writes it, in C and in bounded memory, and prints per operator
name: calls, self and total (inclusive) time with their shares of all self
time, and the mean, median (p50) and p99 of the inclusive duration.

Complete events ("X") nest per thread by time: an event's self time is its
duration minus its children's. p50/p99 are exact for names with at most 64
calls and otherwise within 0.8% (log-linear histogram); see docs/reader.md.

TRACE may be '-' (standard input), /dev/stdin or any other pipe, plain or
gzip: it is read once, and copied to an unlinked temporary file in $TMPDIR
in case a thread's events are out of order and need the second pass.

A trace that ends early (a profiler killed mid-write, or gzip data corrupt
part way) is summarized up to that point, with a warning, and the exit code
is 5. Events that opskew's tracer lost while recording (its "opskew" header
counts them) are reported on one line and in --json's "losses".

A job (torchrun): give a directory (its *.json and *.json.gz traces, less
opskew's .corrected ones) or several traces. Each trace's rank comes from
Kineto's distributedInfo header, else from 'rankN' in its name; a rank's
traces are its cycles, in order. Printed: per rank its events, steps,
collectives, time waited in them, how often it arrived last and the
lateness it caused, and its clock offset to rank 0 (estimated from the
collectives' exits; applied with --align on, or by default when the traces
come from several hosts); stragglers; each step's time on every rank; the
table of all ranks merged (--per-rank: each rank's too). With each rank's W
(--w, or opskew profile's report.rankR.json beside the traces), the
cross-rank correction: each rank's own instrument cost and what it absorbed
from the others in its waits (TAU's parallel model). Every trace is read
once in C, twice with W; memory does not grow with the traces' sizes. See
docs/multirank.md.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
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
    job = p.add_argument_group("multi-rank jobs (a directory or several traces)")
    job.add_argument("--w", action="append", metavar="[RANK=]NS[,PY_NS]",
                     help="instrument cost per operator event (and per Python event) for the cross-rank "
                     "correction: for every rank, or RANK=NS for one; repeatable (default: the W_own that "
                     "opskew profile measured on each rank, its own cost by CPU time, from "
                     "report.rankR.json beside the traces)")
    job.add_argument("--align", choices=("auto", "on", "off"), default="auto",
                     help="apply the clock offsets estimated from the collectives (default auto: when the "
                     "traces come from more than one host)")
    job.add_argument("--per-rank", action="store_true", help="also print each rank's own table")
    job.add_argument("--corrected-dir", metavar="DIR",
                     help="write each rank's traces corrected for its own cost into DIR (NAME.corrected.json), "
                     "on rank 0's clock when the offsets are applied, with the rank's clock fit and "
                     "cross-rank figures in their metadata")


def _print_table(result, ops, top, out, losses=None):
    """The table through the one renderer (opskew.tables), then the totals."""
    from opskew.render.tables import SUMMARY_COLUMNS, op_table, summary_rows

    self_sum = sum(o["self_ns"] for o in result["ops"])  # shares are of all self time
    op_table(summary_rows(ops, SUMMARY_COLUMNS, self_sum), SUMMARY_COLUMNS, top=top, out=out)
    st = result["stats"]
    threads = [t for t in result["threads"] if t["complete_events"]]
    out.write(f"self time total: {fmt_ns(self_sum)}")
    if st.get("complete_events"):
        out.write(f"; span {fmt_ns(st['last_end_ns'] - st['first_ts_ns'])}")
    out.write("\n")
    out.write(f"{st.get('complete_events', 0)} complete events of {st.get('events', 0)} read, "
              f"{len(ops)} names, {count_of(len(threads), 'thread')}\n")
    if losses:
        out.write(losses_line(losses)[0].upper() + losses_line(losses)[1:] + "\n")


def _is_job(args) -> bool:
    import os

    traces = args.trace if isinstance(args.trace, list) else [args.trace]
    return len(traces) > 1 or os.path.isdir(traces[0])


def _one_trace(args) -> None:
    """One trace (not a job): args.trace becomes the path itself."""
    if isinstance(args.trace, list) and not _is_job(args):
        args.trace = args.trace[0]


def compute(args) -> dict:
    """The summary document (the --json, schema opskew.summary/1, or
    opskew.job_summary/1 for a job); prints nothing. `run` prints and writes
    it; opskew.api.summary returns it."""
    _one_trace(args)
    if args.top < 0:
        raise UsageError("--top must be >= 0")
    if args.cat is not None and not isinstance(args.cat, str):
        raise UsageError(f"cat: a category or a list of them (e.g. cpu_op,user_annotation), not {args.cat!r}")
    cats = [c.strip() for c in args.cat.split(",") if c.strip()] if args.cat else None
    if args.cat is not None and not cats:
        raise UsageError("--cat needs at least one category")
    # An explicit --cat list is taken as is; by default Kineto's "Trace" span
    # (profiler bookkeeping, as long as the whole window) is left out.
    if _is_job(args):
        from opskew.analyze import job

        if getattr(args, "csv", None):
            raise UsageError("--csv is for one trace; a job's tables are in --json")
        check_output(args.json, inputs=[("an input trace", t) for t in args.trace])
        return job.compute(args.trace, costs=getattr(args, "w", None), align=getattr(args, "align", "auto"),
                           categories=cats)
    if getattr(args, "w", None) or getattr(args, "corrected_dir", None):
        raise UsageError("--w and --corrected-dir are for a job (a directory or several traces)")
    check_output(args.json, inputs=[("the input trace", args.trace)])  # before reading (docs/outputs.md)
    result = summarize(args.trace, categories=cats, exclude_categories=() if cats else DEFAULT_EXCLUDED)
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


def run(args) -> int:
    if _is_job(args):
        doc = compute(args)
        if args.json != "-":
            from opskew.analyze import job

            job.render(doc, sys.stdout, top=args.top, per_rank=args.per_rank)
        if args.json:
            write_json(doc, args.json)
        if args.corrected_dir:
            from opskew.analyze import job

            paths = job.write_corrected(doc, args.corrected_dir)
            print(f"opskew summary: {len(paths)} corrected trace(s) in {args.corrected_dir}", file=sys.stderr)
        for w in doc["warnings"]:
            print(f"opskew summary: warning: {w}", file=sys.stderr)
        return EXIT_TRUNCATED if doc["status"] == "truncated" else EXIT_OK
    _one_trace(args)
    csv_path = getattr(args, "csv", None)
    if csv_path == "-" and args.json == "-":
        raise UsageError("--json - and --csv - cannot both go to standard output: give one a file")
    check_output(csv_path, inputs=[("the input trace", args.trace), ("the --json file", args.json)])
    doc = compute(args)
    if args.json != "-" and csv_path != "-":
        _print_table(doc, doc["ops"], args.top, sys.stdout, doc["losses"])
    if args.json:
        write_json(doc, args.json)
    if csv_path:
        from opskew.render.tables import SUMMARY_COLUMNS, summary_rows, write_csv

        write_csv(csv_path, summary_rows(doc["ops"], SUMMARY_COLUMNS), SUMMARY_COLUMNS)
    for w in doc["warnings"]:
        print(f"opskew summary: warning: {w}", file=sys.stderr)
    return EXIT_TRUNCATED if doc["status"] == "truncated" else EXIT_OK
