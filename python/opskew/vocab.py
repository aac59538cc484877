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


def is_step(name: str) -> bool:
    """Whether `name` is a ProfilerStep#N range."""
    return STEP_NAME.match(name) is not None
