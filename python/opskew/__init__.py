"""opskew: measure, minimize and correct profiler overhead on lightweight PyTorch operators.

The engine is C (``opskew._engine``); this package drives torch and parses the
command line. ``import opskew`` does not import torch.
"""

from ._engine import version as __version__  # noqa: E402  (meson.build is its one source)
from .tracing import trace  # noqa: E402,F401  (the C operator tracer; does not import torch)
