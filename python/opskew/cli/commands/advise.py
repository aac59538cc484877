"""`opskew advise` on the command line: its help, options and run."""

from __future__ import annotations

import argparse

from opskew.cli.commands._common import finish
from opskew.cli.spec import add_spec
from opskew.errors import EXIT_OK
from opskew.experiments import advise as experiment
from opskew.output import write_json
from opskew.render.advise import print_human


HELP = "recommend the cheapest profiler config and a schedule for your workload; print a snippet"
DESCRIPTION = """\
Measures TARGET (default: the built-in torch.add loop) and recommends how to
profile it with operator-level granularity at the least cost:

* the cheapest torch.profiler configuration that gives what you --need
  (shapes, stacks, memory, flops, modules; default: operator timings only),
  chosen among the candidates by their measured added cost per event;
* a torch.profiler.schedule: `wait` skips the iterations before the iteration
  time stabilizes (measured from a cold start), `warmup` absorbs the profiler's
  start, `active` keeps the trace to a bounded number of events (--max-events);
* the estimated trace size and the time the profiler will add;
* a ready-to-paste snippet (--snippet-out writes it to a file).

With --scope PATH (an nn.Module reached from TARGET's module globals or from
the setup result, e.g. `model.encoder`), it also measures profiling only that
submodule's forward (collection toggled on around it) against profiling the
whole step, and reports the difference.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_spec(p, experiment.SPEC)


def run(args) -> int:
    rc = finish(experiment.compute(args), print_human, args.json, write_json)
    return EXIT_OK if rc is None else rc
