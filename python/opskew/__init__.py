"""opskew: measure, minimize and correct profiler overhead on lightweight PyTorch operators.

The engine is C (``opskew._engine``); this package drives torch and parses the
command line. ``import opskew`` does not import torch: the modules below
import it inside the functions that run a workload.

The public surface: ``opskew.profile`` and ``opskew.step`` (the drop-in for
torch.profiler.profile, docs/profile.md), ``opskew.trace`` (opskew's own
tracer, docs/tracer.md), and one function per command (docs/api.md). The
layout of the package is in docs/design.md ("The Python shell").
"""

from opskew._engine import version as __version__  # noqa: E402  (meson.build is its one source)
from opskew.api import Result, advise, check, compare, corrected_averages, matrix, summary, sweep  # noqa: F401
from opskew.profiler.core import profile, step  # noqa: F401  (the package is opskew.profiler, not .profile)
from opskew.tracer.session import trace  # noqa: F401  (the C operator tracer)
import opskew.render.views  # noqa: F401,E402  (registers the views results and computation call: render consumes them)

__all__ = ["Result", "advise", "check", "compare", "corrected_averages", "matrix", "profile", "step", "summary",
           "sweep", "trace"]
