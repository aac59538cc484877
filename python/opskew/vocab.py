"""torch.profiler's vocabulary as opskew reads it, each name once: the
profiler options, the step ranges' names and the event categories that the
correction prices (docs/design.md, "The overhead model")."""

from __future__ import annotations

import re

# torch.profiler.profile's options that change what a trace records (and so
# the instrument's cost): the command line's flags, the report's `options`,
# the calibration's configuration names (sorted, calibration.store).
PROFILER_OPTIONS = ("record_shapes", "with_stack", "profile_memory", "with_flops", "with_modules")

# The range torch opens around each step of a schedule: ProfilerStep#N.
STEP_NAME = re.compile(r"ProfilerStep#(\d+)$")

# Categories of torch.profiler's CPU-side events: RecordFunction events
# (operators and annotations), priced at W, and the Python tracer's
# (with_stack), priced at W_py.
OP_CATEGORIES = ("cpu_op", "user_annotation")
PY_CATEGORIES = ("python_function",)


# The range `opskew sweep` opens around each window's calls (record_function),
# as a training step's operators run inside the step's annotation, so that the
# trace's time of the same calls is read off one event.
SWEEP_ANNOTATION = "opskew.sweep.calls"

# Why a plot cannot be drawn: matplotlib is an optional extra (the words of
# the usage error a --plot gets and of the sweep's skipped plot).
NO_MATPLOTLIB = "needs matplotlib, an optional extra: pip install 'opskew[plot]'"


def is_step(name: str) -> bool:
    """Whether `name` is a ProfilerStep#N range."""
    return STEP_NAME.match(name) is not None


def schedule_args(sch: dict) -> str:
    """A recommended schedule's arguments, as the text and the snippet write
    them: "wait=2, warmup=1, active=5, repeat=1"."""
    return ", ".join(f"{k}={sch[k]}" for k in ("wait", "warmup", "active", "repeat"))
