"""`opskew calibrate` on the command line: its help, options and run (and
--show, --clear)."""

from __future__ import annotations

import argparse

from opskew.calibration.store import clear as clear_cache
from opskew.calibration.store import stored
from opskew.cli.spec import add_spec
from opskew.errors import EXIT_OK, UsageError
from opskew.experiments import calibrate as experiment
from opskew.host import cache_dir
from opskew.output import write_json
from opskew.render.calibrate import print_cleared, print_human, print_stored


HELP = "measure W and delta per instrument on this machine and store them for `opskew correct`"
DESCRIPTION = """\
Measures, for each instrument configuration, the constants of the overhead
model (docs/design.md):

  W         the wall time the instrument adds per operator event (in-window,
            paired against the bare micro-workload, with a 95% CI);
  delta     the part of it inside the event's own recorded interval: a leaf
            operator's duration in the instrument's trace minus its duration
            in opskew's tracer, plus opskew's own self-calibrated delta; the
            mean over a panel of 8 leaf operators with different inputs
            (under record_shapes it depends on them), in rounds of its own;
  W_py      with with_stack only: the cost per Python-function event (the
            Python tracer records every Python call), from a second
            micro-workload of empty Python calls; W is then the operator's
            cost with the Python event around each torch.add taken out;
  delta_py  the part of W_py inside the Python event's own interval (its
            reported duration minus the bare call's, an upper-bound estimate).

The micro-workloads are torch.add on 1-element tensors, 1000 calls per
iteration, and an empty Python function, 1000 calls per iteration; 1 thread
unless --threads says otherwise. W differs between operators (record_shapes
costs more for more inputs, autograd and nested operators differ): with
TARGET, W is measured on your workload itself, with windows of at least
--window-ms each, and the calibration is stored under that workload's name;
pass its file to `opskew correct --calibration`. The same run injects a known
cost (busy-wait:NS against busy-wait:0, default 1000 ns) and stores whether
the method recovered it within 20%: a calibration is only as good as the
method that made it.

Calibrations are stored in $OPSKEW_CACHE_DIR, else $XDG_CACHE_HOME/opskew, else
~/.cache/opskew, keyed by machine, torch version, instrument, configuration,
device and threads. --show lists them; --clear removes them. A stored file
that is not a valid calibration (wrong types, W or delta out of range) is
skipped by every command with a one-line warning naming it.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_spec(p, experiment.SPEC)


def show(out=None) -> int:
    cals = stored()
    print_stored(cache_dir(), cals, out)
    return EXIT_OK


def clear(out=None) -> int:
    removed, left = clear_cache()
    print_cleared(cache_dir(), removed, left, out)
    return EXIT_OK


def run(args) -> int:
    if args.show and args.clear:
        raise UsageError("--show and --clear do not go together")
    if args.show:
        return show()
    if args.clear:
        return clear()
    done = experiment.compute(args)
    print_human(done)
    if args.json:
        write_json({"schema": "opskew.calibrate/1", "calibrations": done["calibrations"]}, args.json)
    return EXIT_OK
