"""`opskew.profile` (the class, in profiler.core) and what it is made of:
the schedule it follows (schedule), its ProfilerStep#N ranges (ranges),
the step clock (clock), the leaf reference (leafref), the figures besides
W (figures), each cycle's analysis and report (cycle), the steps' pricing
(pricing) and its files (traces). Importing it does not import torch."""

from opskew.profiler.core import profile, rank_of, step
from opskew.profiler.leafref import REF_FIRST, REF_STEPS, REF_WAIT
from opskew.profiler.schedule import ADVISED_SCHEDULE, schedule_call
from opskew.profiler.traces import TRACE_NAME, corrected_path
from opskew.results.views import lazy

render = lazy("profile.render")

__all__ = ["ADVISED_SCHEDULE", "REF_FIRST", "REF_STEPS", "REF_WAIT", "TRACE_NAME", "corrected_path", "profile",
           "rank_of", "render", "schedule_call", "step"]
