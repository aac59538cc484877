"""`opskew matrix` on the command line: its help, options and run."""

from __future__ import annotations

import argparse

from opskew.cli.commands._common import finish
from opskew.cli.spec import add_spec
from opskew.errors import EXIT_OK
from opskew.experiments import matrix as experiment
from opskew.output import write_json
from opskew.render.matrix import print_human


HELP = "measure every instrument and profiler option on one workload, with marginal costs"
DESCRIPTION = """\
Runs TARGET (default: the built-in torch.add loop) under every instrument and
torch.profiler option in one run of interleaved rounds: each round runs the
bare workload and every row once, in a rotating order, so every row is compared
with the baseline, and each option with the minimal profiler, round by round.

Rows: baseline; emit_itt with no collector (the floor of the ITT route);
RecordFunction's empty observer (the floor of anything that records shapes);
opskew's own tracer through ITT (in a second process, since its collector
must load before torch); opskew's native callback counting only (the floor of
the native route) and opskew's tracer through it; torch.profiler minimal; minimal plus each of record_shapes, with_stack,
profile_memory, with_flops, with_modules; everything on; on CUDA, CPU-only vs
CPU+CUDA activities.

For each row: the in-window added cost per event with its CI (the sign test's,
at least 95% from 6 rounds on), stop and
post-processing (key_averages) per event, export time and bytes per event, and
the marginal cost over the minimal profiler with its CI ("not
distinguishable" when that CI includes 0). A second table maps
the results to the sources of profiler overhead.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_spec(p, experiment.SPEC)


def run(args) -> int:
    rc = finish(experiment.compute(args), print_human, args.json, write_json)
    return EXIT_OK if rc is None else rc
