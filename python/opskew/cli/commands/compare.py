"""`opskew compare`'s command line: options from opskew.analyze.compare's
SPEC, the table from opskew.render.compare."""

from __future__ import annotations

import argparse
import sys

from opskew.analyze import compare as L
from opskew.cli.spec import add_spec
from opskew.output import write_json
from opskew.render.compare import csv_columns, csv_rows, print_human
from opskew.render.tables import write_csv

HELP = "compare opskew results or traces side by side: the change against the first, and whether it is significant"
DESCRIPTION = """\
Reads two or more inputs of one kind and prints one row per operator (or per
figure) with each input's value, the ratio and the change against the first
input (A), and whether the change is significant. The ratio and change are
n/a where A's value is 0 or below (no calls in A; a matrix cost under its
baseline's, in noise): a ratio to it means nothing.

Inputs, by kind (mixing kinds is refused, exit 2):
  operators  Chrome traces (.json, .json.gz: torch.profiler's or opskew's,
             summarized by the C reader as `opskew summary` does), `opskew
             summary --json` results (opskew.summary/1) and `opskew record
             --json` summaries (opskew.trace.summary/1), in any mix
  correct    `opskew correct --json` results: the corrected figures
  check      `opskew check --json` results: baseline and profiled time per
             iteration, W per event, inflation, events per iteration, and
             the per-operator verdict's corrected self and total times
  matrix     `opskew matrix --json` results: in-window cost per event, per row

--metric (operators and correct): self (self time per call, the default),
total (inclusive time of all calls), mean (inclusive time per call), calls.
An operator absent from an input has 0 calls and 0 total time there; its
time per call (self, mean) is n/a.
Operators are the union of the inputs', ordered by A's self time; --top N
rows (0: all; the JSON and CSV have all).

Significance is claimed only where both figures carry a 95% interval of
their run-to-run spread: check's W, its per-iteration times and inflation
(the sign-test interval of the median over its trials), matrix's per-event
costs. A change is "yes" when the two intervals do not overlap, else "no".
An interval whose coverage is below 95% (too few trials: matrix's 2 rounds
give 50%; 6 give 96.9%) or not recorded is left out, and the change is
"n/a"; the significance line says whose intervals fell short.
The verdict's corrected times are printed with their interval but tested
"n/a": that interval is W's uncertainty over one profiled window, not the
spread between runs (two checks of one workload differ by more). This is conservative: two 95% intervals
can overlap while the difference is significant, never the other way round
at a stricter level. Per-operator figures of traces, summaries and correct
results carry no interval (one run; no per-call variance is kept, and calls
within one run are not independent samples of a run's mean): their
significance is "n/a". To test an operator's change, repeat the runs, or use
`opskew check` on each version.

--csv PATH writes every row: name, unit, each input's value (and _low,
_high where it has an interval), each later input's ratio, change and
significant (true, false, or empty for n/a); plain numbers, times in ns.

Exit 2 is bad input: fewer than two inputs, a missing or unreadable file, an
unknown schema, mixed kinds; 5, a trace that ended early (compared up to
there, with a warning). An input with nothing to compare (a trace with no
events, a result with no operators or figures) is compared, with a warning.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_spec(p, L.SPEC)


def run(args) -> int:
    result = L.compute(args)
    if args.json != "-" and args.csv != "-":
        print_human(result)
    if args.json:
        write_json(result, args.json)
    if args.csv:
        write_csv(args.csv, csv_rows(result), csv_columns(result))
    for w in result["warnings"]:
        print(f"opskew compare: warning: {w}", file=sys.stderr)
    return L.exit_code(result)
