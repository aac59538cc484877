"""`opskew sweep` on the command line: its help, options and run."""

from __future__ import annotations

import argparse

from opskew.cli.commands._common import finish
from opskew.cli.spec import add_spec
from opskew.errors import EXIT_OK
from opskew.experiments import sweep as experiment
from opskew.output import write_json
from opskew.render.sweep import print_human


HELP = "reported vs true operator time over operator size, and the crossover size"
DESCRIPTION = """\
For each operator (--op, repeatable: add, mul, matmul, or file.py:function) and
each size from one element up to where one call takes --max-ms, measures in
interleaved rounds: the true time per call (no instrument), the in-window time
per call under each instrument, the operator time the instrument's trace
reports, and the instrument's added cost per call (W x events per call, with
the sign-test CI of W, whose exact coverage is printed: 6 rounds or more give at
least 95%). The crossover size is where the instrument's added cost equals the
operator's own duration (taken from opskew's tracer, whose in-interval cost is
about 10 ns, when it is available; otherwise from the profiler's trace): below
it, the instrument costs more than the operator.

Sizes are elements per input tensor (matmul: n x n matrices, so n*n elements).
A user operator `file.py:function` is called as function(size) and must return
a zero-argument callable that runs one call of the operator at that size.

Each window's calls run inside one torch.profiler.record_function annotation,
as a training step's are, so each point reports two skews: the leaf
operator's own (its time in the trace / its true time) and the enclosing
annotation's (its time in the trace / the true time of the same calls without
an instrument), which also carries the instrument's cost between events.

A point whose W CI includes 0 (or whose rounds are too few for a 95% CI) is
marked "noisy": the call's own variation hides the instrument there.

A user --op that raises exits 4 after reporting the sizes measured before it,
with the user's own frames; a function that cannot take one argument is bad
input (exit 2), found before anything runs.

Writes PREFIX.png and PREFIX.svg (log-log, one colour per instrument, the
same in every plot: added cost with its CI band, the operator time in its
trace, the crossover; below, the leaf and enclosing skews) and, with --json,
the table.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_spec(p, experiment.SPEC)


def run(args) -> int:
    rc = finish(experiment.compute(args), print_human, args.json, write_json)
    return EXIT_OK if rc is None else rc
