"""`opskew summary TRACE`: the key_averages()-style table of any Chrome trace."""

from __future__ import annotations

import argparse
import sys

from ..errors import EXIT_OK, UsageError
from ..report import check_output, count_of, fmt_ns, write_json
from ..tracefile import DEFAULT_EXCLUDED, EXIT_TRUNCATED, losses_line, losses_of, summarize, warnings_of

SCHEMA = "opskew.summary/1"

SORT_KEYS = {
    "total": lambda o: -o["total_ns"],
    "self": lambda o: -o["self_ns"],
    "calls": lambda o: -o["calls"],
    "mean": lambda o: -o["mean_ns"],
    "p99": lambda o: -o["p99_ns"],
    "name": lambda o: o["name"],
}

HELP = "per-operator table (like key_averages()) of a torch.profiler or opskew trace"
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
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", metavar="TRACE", help="trace file (.json or .json.gz); '-' for standard input")
    p.add_argument("--json", metavar="PATH", help="also write the summary as JSON to PATH ('-': stdout only)")
    p.add_argument("--sort", default="total", choices=tuple(SORT_KEYS),
                   help="order of the rows (default: total)")
    p.add_argument("--top", type=int, default=30, metavar="N",
                   help="rows to print, 0 for all (default: 30; --json always has all)")
    p.add_argument("--cat", metavar="CAT[,CAT...]",
                   help="only analyze events of these categories (e.g. cpu_op,user_annotation); "
                   "nesting and self time are then among those events only (default: all but "
                   "Kineto's 'Trace' span)")


def _row(o, self_sum):
    pct = (lambda v: f"{100.0 * v / self_sum:.2f}%") if self_sum > 0 else (lambda v: "n/a")
    return (o["name"], pct(o["self_ns"]), fmt_ns(o["self_ns"]), pct(o["total_ns"]),
            fmt_ns(o["total_ns"]), fmt_ns(o["mean_ns"]), fmt_ns(o["p50_ns"]), fmt_ns(o["p99_ns"]),
            str(o["calls"]))


def _print_table(result, ops, top, out, losses):
    header = ("Name", "Self %", "Self", "Total %", "Total", "Mean", "p50", "p99", "Calls")
    self_sum = sum(o["self_ns"] for o in result["ops"])
    shown = ops if top == 0 else ops[:top]
    rows = [_row(o, self_sum) for o in shown]
    name_w = min(max([len(header[0])] + [len(r[0]) for r in rows]), 60)
    widths = [name_w] + [max(len(header[i]), *(len(r[i]) for r in rows)) if rows else len(header[i])
                         for i in range(1, len(header))]

    def line(cells):
        name = cells[0] if len(cells[0]) <= name_w else cells[0][: name_w - 3] + "..."
        return "  ".join([name.ljust(name_w)] + [c.rjust(w) for c, w in zip(cells[1:], widths[1:])])

    rule = "-" * len(line(header))
    out.write(rule + "\n" + line(header) + "\n" + rule + "\n")
    for r in rows:
        out.write(line(r) + "\n")
    out.write(rule + "\n")
    st = result["stats"]
    threads = [t for t in result["threads"] if t["complete_events"]]
    out.write(f"Self time total: {fmt_ns(self_sum)}")
    if st.get("complete_events"):
        out.write(f"; span {fmt_ns(st['last_end_ns'] - st['first_ts_ns'])}")
    out.write("\n")
    more = f" (showing {len(shown)} of {len(ops)} names)" if len(shown) < len(ops) else ""
    out.write(f"{st.get('complete_events', 0)} complete events of {st.get('events', 0)} read, "
              f"{len(ops)} names, {count_of(len(threads), 'thread')}{more}\n")
    if losses:
        out.write(losses_line(losses)[0].upper() + losses_line(losses)[1:] + "\n")


def compute(args) -> dict:
    """The summary document (the --json, schema opskew.summary/1); prints
    nothing. `run` prints and writes it; opskew.api.summary returns it."""
    if args.top < 0:
        raise UsageError("--top must be >= 0")
    cats = [c for c in args.cat.split(",") if c] if args.cat else None
    if args.cat is not None and not cats:
        raise UsageError("--cat needs at least one category")
    # An explicit --cat list is taken as is; by default Kineto's "Trace" span
    # (profiler bookkeeping, as long as the whole window) is left out.
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
        "warnings": warnings_of(result),
    }


def run(args) -> int:
    doc = compute(args)
    if args.json != "-":
        _print_table(doc, doc["ops"], args.top, sys.stdout, doc["losses"])
    if args.json:
        write_json(doc, args.json)
    for w in doc["warnings"]:
        print(f"opskew summary: warning: {w}", file=sys.stderr)
    return EXIT_TRUNCATED if doc["status"] == "truncated" else EXIT_OK
