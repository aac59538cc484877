"""opskew: measure, minimize and correct profiler overhead on lightweight PyTorch operators.

The engine is C (``opskew._engine``); this package drives torch and parses the
command line. ``import opskew`` does not import torch.
"""

from opskew._engine import version as __version__  # noqa: E402  (meson.build is its one source)
from opskew.tracer.session import trace  # noqa: E402,F401  (the C operator tracer; does not import torch)

# The Python API (docs/api.md), loaded on first use: `import opskew` stays
# free of torch.
_API = ("check", "matrix", "sweep", "advise", "summary", "compare", "Result")


def __getattr__(name):
    if name in ("profile", "step"):
        # opskew/profiler/core.py holds the class (the package is not named
        # opskew.profile: importing a submodule binds it on its package,
        # under its own name, and would replace the class here).
        import importlib

        mod = importlib.import_module(".profiler.core", __name__)
        globals()["profile"], globals()["step"] = mod.profile, mod.step
        return globals()[name]
    if name in _API:
        from opskew import api

        return getattr(api, name)
    raise AttributeError(f"module 'opskew' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_API) | {"profile", "step"})
