"""`opskew summary`'s command line: options from opskew.analyze.summary's
SPEC, the table from opskew.render.summary (a job's from opskew.render.job)."""

from __future__ import annotations

import argparse
import functools
import sys

from opskew.analyze import job
from opskew.analyze import summary as L
from opskew.cli.spec import add_spec
from opskew.errors import EXIT_OK, EXIT_TRUNCATED, UsageError
from opskew.output import check_output, write_json
from opskew.cli.commands.correct import measure_calibration
from opskew.render.job import render as render_job
from opskew.render.notes import words
from opskew.render.progress import reading
from opskew.render.summary import print_profile_run, print_table
from opskew.render.tables import SUMMARY_COLUMNS, summary_rows, write_csv
from opskew.results.averages import CorrectedAverages

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

--corrected: the table of torch's key_averages().table() (its columns and
format), its times corrected for the profiler's cost per event (W, from
--calibration, --w NS, or the stored calibration `opskew correct` would
take), with each row's interval at W's interval ends and its trust mark
(believable, inflated, unresolved, unknowable). Rows by name; ProfilerStep#N together
as ProfilerStep*, as torch's table has them. docs/profile.md.

A folder `opskew profile -o OUT` wrote (or its report.json): the run, from
report.json alone: its conditions and how it ended, its W with the 95%
interval and its corrected step, each cycle's step, W and raw and corrected
traces, and the latest cycle's operators, reported and corrected, with their
intervals and trust marks (--json: all of it, schema
opskew.profile_summary/1; --corrected: that cycle's corrected
key_averages() table). A torchrun job's folder is read as a job (below).

--from OUT (with --corrected on one trace): the W that the `opskew profile`
run in OUT measured for TRACE (that cycle's, as its corrected trace was
written, or else the run's final W), named in the table's last lines.

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
    add_spec(p, L.SPEC)


def run(args) -> int:
    if args.corrected:
        return _corrected(args)
    if L.profile_run(args) is not None:
        doc = L.compute(args)
        if args.json != "-":
            print_profile_run(doc, sys.stdout, top=args.top)
        if args.json:
            write_json(doc, args.json)
        return EXIT_OK
    if L.is_job(args):
        doc = L.compute(args)
        if args.json != "-":
            render_job(doc, sys.stdout, top=args.top, per_rank=args.per_rank)
        if args.json:
            write_json(doc, args.json)
        if args.corrected_dir:
            paths = job.write_corrected(doc, args.corrected_dir)
            print(f"opskew summary: {len(paths)} corrected trace(s) in {args.corrected_dir}", file=sys.stderr)
        for w in doc["warnings"]:
            print(f"opskew summary: warning: {w}", file=sys.stderr)
        return EXIT_TRUNCATED if doc["status"] == "truncated" else EXIT_OK
    L.one_trace(args)
    csv_path = getattr(args, "csv", None)
    if csv_path == "-" and args.json == "-":
        raise UsageError("--json - and --csv - cannot both go to standard output: give one a file")
    check_output(csv_path, inputs=[("the input trace", args.trace), ("the --json file", args.json)])
    args.progress = reading("opskew summary", "standard input" if args.trace == "-" else args.trace)
    try:
        doc = L.compute(args)
    finally:
        args.progress.end()
    if args.json != "-" and csv_path != "-":
        print_table(doc, doc["ops"], args.top, sys.stdout, doc["losses"])
    if args.json:
        write_json(doc, args.json)
    if csv_path:
        write_csv(csv_path, summary_rows(doc["ops"], SUMMARY_COLUMNS), SUMMARY_COLUMNS)
    for w in doc["warnings"]:
        print(f"opskew summary: warning: {w}", file=sys.stderr)
    return EXIT_TRUNCATED if doc["status"] == "truncated" else EXIT_OK


def _corrected(args) -> int:
    """--corrected: torch's key_averages() table, corrected (opskew.results.averages)."""
    args.measure_calibration = functools.partial(measure_calibration, label="opskew summary")
    doc = L.compute(args)
    if args.json != "-":
        sys.stdout.write(CorrectedAverages(doc).table(sort_by=doc["sort"], row_limit=args.top or None))
    if args.json:
        write_json(doc, args.json)
    for n in doc["notes"]:
        print(f"opskew summary: note: {words(n)}", file=sys.stderr)
    if doc["truncated"]:
        print("opskew summary: warning: the trace ended early (a profiler killed mid-write?); what was read is "
              "corrected", file=sys.stderr)
        return EXIT_TRUNCATED
    return EXIT_OK
