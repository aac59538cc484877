"""`opskew correct`'s command line: options from opskew.analyze.correct's
SPEC, the text from opskew.render.correct."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from opskew.analyze import correct as L
from opskew.cli.spec import add_spec
from opskew.errors import EXIT_OK, EXIT_TRUNCATED, RuntimeFailure
from opskew.output import write_json
from opskew.render.progress import reading
from opskew.render.correct import CORRECT_COLUMNS, correct_rows, print_human
from opskew.render.tables import write_csv

HELP = "correct operator times in a trace: reported - delta - W x descendants - W_py x Python descendants"
DESCRIPTION = """\
Reads a Chrome trace (torch.profiler's export, .json or .json.gz, or opskew's
own), and compensates every operator event with the calibrated cost of the
instrument that recorded it (docs/design.md's overhead model, TAU's scheme):

    corrected = reported - delta - W x descendants - W_py x py_descendants

clamped at zero, with the residual reported. Python-function events (what
with_stack records for every Python call) are the second class: they cost
W_py each and are corrected too (delta_py inside their own interval). Prints corrected against reported
times per operator and the share of the trace that is instrument; with -o,
writes a corrected trace (time line compressed per thread so nesting stays
exact; original ts and dur kept in args) that Perfetto opens.

The calibration comes from --calibration FILE, or from the cache that
`opskew calibrate` fills, for this machine, this torch and the instrument and
configuration the trace shows (opskew's tracer, or torch.profiler with the
options whose traces it detects: shapes, stacks, memory, modules, flops). A
calibration whose instrument or configuration differs from the trace's is
refused unless --force. With none stored for a torch.profiler trace's
configuration, one is measured now (`opskew calibrate --config CONFIG`, about
20 s), said in one line, stored for the next trace and noted in the output;
--no-calibrate refuses instead. A default calibration prices W on opskew's
built-in model steps: a trace with backward nodes on the training step, any
other on the inference step (the note says which, and how far workloads'
own steps were from it).
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_spec(p, L.SPEC)


def measure_calibration(config: str, label: str = "opskew correct") -> dict:
    """Measures and stores the calibration of torch.profiler's `config` on
    this machine: `opskew calibrate --config CONFIG` in a child process (the
    tracer, which gives delta, must be set up before torch loads), said in
    one line, its errors on stderr, its table left out. Returns what the
    correction's note says of it: the seconds it took."""
    flag = config.replace("+", ",")
    print(f"{label}: no calibration of torch.profiler ({config}) is stored for this torch on this machine: "
          f"measuring one now (opskew calibrate --config {flag}: W on its built-in training and inference steps, "
          "about 20 s; --no-calibrate refuses instead)",
          file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="opskew-correct-") as d:
        out = os.path.join(d, "calibrate.json")
        # One line says what runs and how long it takes; the child's own
        # progress is off, its errors go to stderr.
        p = subprocess.run([sys.executable, "-m", "opskew", "calibrate", "--config", flag, "--json", out],
                           stdout=subprocess.DEVNULL, env=dict(os.environ, OPSKEW_PROGRESS="off"))
        if p.returncode != 0:
            raise RuntimeFailure(f"measuring the calibration of {config} failed (opskew calibrate exited "
                                 f"{p.returncode}, its message above); pass --w NS, --from OUT or --calibration FILE")
        with open(out) as f:
            cals = json.load(f)["calibrations"]
    cal = next((c for c in cals if c["key"]["instrument"] == "torch.profiler"), None)
    if cal is None or not cal.get("_path"):
        raise RuntimeFailure(f"the calibration of {config} measured now was not stored"
                             + (f" ({cal['rejected']})" if cal and cal.get("rejected") else ""))
    return {"seconds": time.perf_counter() - t0}


def run(args) -> int:
    args.measure_calibration = measure_calibration
    args.progress = reading("opskew correct", "standard input" if args.trace == "-" else args.trace)
    try:
        res = L.compute(args)
    finally:
        args.progress.end()
    ops = res["ops"]
    if args.json != "-" and args.csv != "-":
        print_human(dict(res, ops=ops if args.top == 0 else ops[: args.top]))
    if args.json:
        write_json(res, args.json)
    if args.csv:
        write_csv(args.csv, correct_rows(ops), CORRECT_COLUMNS)
    if res["truncated"]:
        print(f"opskew correct: warning: {res['warning']}", file=sys.stderr)
        return EXIT_TRUNCATED
    return EXIT_OK
