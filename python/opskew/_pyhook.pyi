"""Type stub for opskew._pyhook (csrc/ext/pyhook.c): opskew's fallback
instrument, a C profile hook that records torch builtins into the C tracer.
Private; use opskew.trace(instrument="pyhook"). Sessions are started and
stopped through ctypes on the same shared object (osk_collector_*)."""

from collections.abc import Callable
from typing import Any, Final

# 1 when set_profile(on, True) can reach every thread (Python 3.12+:
# PyEval_SetProfileAllThreads), else 0.
all_threads: Final[int]

def calibrate(torch_builtin: Callable[..., Any], /) -> None:
    """Measures the hook's own cost once per process, on a torch builtin such
    as torch.empty. Raises ValueError when it is not a torch builtin;
    MemoryError."""

def set_profile(on: bool, all_threads: bool, /) -> bool:
    """Installs (on) or removes the hook on every thread (all_threads, Python
    3.12+) or on the calling one; returns whether every thread was reached
    (False when all_threads was asked on an older Python)."""
