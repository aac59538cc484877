"""`opskew check` on the command line: its help, options and run."""

from __future__ import annotations

import argparse
import sys

from opskew.cli.commands._common import finish
from opskew.cli.spec import add_spec
from opskew.errors import EXIT_OK, EXIT_SKEW, OpskewError
from opskew.experiments import check as experiment
from opskew.experiments import jobcheck
from opskew.experiments.common import workload_files
from opskew.output import check_output, write_json
from opskew.render import jobcheck as jobcheck_text
from opskew.render.check import print_human


HELP = "time a workload with and without the profiler; report the added cost per event"
DESCRIPTION = """\
Runs TARGET (default: the built-in torch.add loop) in interleaved baseline and
profiled trials (AB, BA, ...), after a warm-up, and reports with statistics how
much the instrument adds per recorded event (W), what it costs outside the
timed window (stop, post-processing, export), how inflated the operator times in
the trace are, and whether the skew is significant.

TARGET is `file.py:function` or `package.module:function`: a callable that runs
one iteration of your workload. With --setup NAME, NAME() from the same module
runs once first and its result is passed to the callable: a tuple as its
positional arguments and a dict as its keyword arguments where it takes them
so, else whole, as its one argument (a callable of one parameter gets a tuple
of two or more whole); any other result as one argument.

The added cost per event is the median over trial pairs of
(profiled window - baseline window) / events, with a distribution-free 95%
confidence interval for the median (sign-test inversion; its exact coverage is
printed). The verdict is "skewed" when that interval excludes zero and the
in-window slowdown is at least --threshold.

After the trials, one more profiled window runs and its trace is read with
W measured by these very trials (an in-run calibration, in the same process
and minutes, which carries over better than a stored one where the machine's
speed drifts): the per-operator verdict. For the top operators by self time
it prints what the trace reports, what the instrument added (delta inside
the operator's own events, W per operator event below it, W_py per Python
event below it), the corrected self and total with the interval W's CI gives
them, and a trust mark: believable as reported, inflated (use the corrected
value), unresolved (W's interval too wide to tell), or unknowable (the
correction is larger than what remains). A line
says in plain words where the skew lands: inside the leaves' own intervals,
or between events, where it inflates the step's wall time and parents'
inclusive times. With --with-stack, W_py per Python event is measured first
on empty Python calls and taken out of W.

--corrected-trace PATH writes that window's trace corrected (as `opskew
correct` does); --trace PATH keeps it uncorrected; --plot PATH draws the
verdict (PNG, or SVG by the suffix). If that extra window or its correction
fails, the figures of the trials are still reported and the exit code is 6.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_spec(p, experiment.SPEC)


def run(args) -> int:
    if getattr(args, "nproc", None) is not None:
        check_output(args.json, inputs=workload_files(args))
        try:
            doc = jobcheck.run(args)
        except OpskewError as exc:
            if getattr(exc, "partial", None):  # what was measured before the failure
                if args.json != "-":
                    jobcheck_text.render(exc.partial, sys.stdout)
                if args.json:
                    write_json(exc.partial, args.json)
            raise
        if args.json != "-":
            jobcheck_text.render(doc, sys.stdout)
        if args.json:
            write_json(doc, args.json)
        skewed = doc["job"]["ci95"][0] > 0 and doc["job"]["added_per_iter_ns"] >= args.threshold * doc["job"][
            "base_per_iter_ns"]
        return EXIT_SKEW if args.fail_on_skew and skewed else EXIT_OK
    done = experiment.compute(args)
    result = done.result
    rc = finish(done, print_human, args.json, write_json)
    if rc is not None:
        return rc
    if result.get("correction_error"):
        print(f"opskew check: no per-operator verdict: {result['correction_error']}", file=sys.stderr)
        # The trials' figures stand. The exit code says the step after them
        # failed only when it was asked for an output (--corrected-trace,
        # --trace, --plot); the default verdict is a bonus, not the job.
        if args.corrected_trace or args.trace or args.plot:
            return done.rc
    if args.fail_on_skew and result.get("verdict", {}).get("skewed"):
        return EXIT_SKEW
    return EXIT_OK
