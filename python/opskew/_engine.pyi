"""Type stub for opskew._engine (csrc/ext/engine.c): the thin binding over the
C engine (include/opskew.h). Private; use the opskew package.

Engine failures (an OSK_E* code) are raised as ValueError, or MemoryError
for OSK_ENOMEM, with "what: message (OSK_ENAME)" as text."""

from collections.abc import Iterable
from typing import Any, Final, SupportsFloat, SupportsIndex

from _typeshed import ReadableBuffer, StrOrBytesPath

_Number = SupportsFloat | SupportsIndex

# The engine's version string (meson.build's project() version).
version: Final[str]

# The OSK_E* codes, from the engine's one table (OSK_ERRNO_MAP).
EINVAL: Final[int]  # -1, invalid argument
ENOMEM: Final[int]  # -2, out of memory
ERANGE: Final[int]  # -3, value out of range
ETOOFEW: Final[int]  # -4, too few samples for the requested statistic
EIO: Final[int]  # -5, input/output error
EFORMAT: Final[int]  # -6, malformed input
ETRUNCATED: Final[int]  # -7, input ended early
EUNSUPPORTED: Final[int]  # -8, not supported on this machine

def paired(
    baseline: Iterable[_Number],
    treated: Iterable[_Number],
    scale: float = 1.0,
    level: float = 0.95,
) -> dict[str, Any]:
    """Median of (treated - baseline) * scale with the sign-test confidence
    interval for the median, and exact sign and Wilcoxon signed-rank p-values.

    Keys: n (int), median, mean, stdev (float), ci (tuple[float, float]),
    ci_coverage (float), n_positive, n_negative (int), sign_p, wilcoxon_p
    (float), ci_reaches_level (bool: False when too few pairs reach `level`;
    OSK_ETOOFEW is not raised).

    Raises TypeError when an argument is not a sequence of numbers;
    ValueError when the lengths differ, `level` is outside (0, 1), `scale`
    or a sample is not finite (OSK_EINVAL); MemoryError."""

def quantile(x: Iterable[_Number], q: float, /) -> float:
    """Quantile q in [0, 1] of x, linear interpolation (type 7).

    Raises TypeError when x is not a sequence of numbers; ValueError for an
    empty x, q outside [0, 1] or a non-finite sample (OSK_EINVAL);
    MemoryError."""

def clock_info() -> dict[str, Any]:
    """The engine's clock. Keys: kind ("tsc" or "monotonic_raw"), ns_per_tick
    (float), rel_uncertainty (float)."""

def spin_ns(ns: int, /) -> int:
    """Busy-waits ns nanoseconds with the GIL released; returns the ns
    actually spent. Raises TypeError for a non-int, OverflowError for a
    negative one or one over 2**64 - 1."""

def inject_start(ns: int, /) -> None:
    """Starts the busy-wait instrument on this thread (a profile hook that
    spins ns/2 on entry and ns/2 on exit of every builtin whose module starts
    with "torch"). Raises RuntimeError when it is already active; TypeError,
    OverflowError as spin_ns does."""

def inject_stop() -> tuple[int, int]:
    """Stops the instrument: (events, spun_ns), the torch calls it saw and the
    busy-wait it actually spent in ns. Raises RuntimeError when it is not
    active."""

def strerror(code: int, /) -> str:
    """The engine's message for an OSK_E* code ("unknown error" for any other
    int). Raises TypeError for a non-int."""

def err_name(code: int, /) -> str:
    """The code's symbolic name ("OSK_EFORMAT"). Raises TypeError for a
    non-int."""

def write_file(path: StrOrBytesPath, data: ReadableBuffer, /) -> None:
    """The one file writer (docs/outputs.md): a temporary file next to path,
    fsynced and renamed into place; "-" is standard output; a character
    device is written through; anything else that is not a regular file is
    refused (a .gz name is gzipped).

    Raises OSError(errno, reason, path) on failure (reason: what a refused
    target is, else strerror(errno)); MemoryError; TypeError."""

def out_target(path: StrOrBytesPath, /) -> dict[str, Any]:
    """What write_file would do with path. Keys: kind ("new", "file",
    "device", "stdout" or "refused"), errno (int), reason (str | None), link
    (bool), dev (int), ino (int). Raises MemoryError; TypeError."""

def out_tmp_name(path: StrOrBytesPath, n: int, /) -> str:
    """The n-th temporary name the writer tries for path in this process (for
    tests that plant files there). Raises ValueError when the engine refuses
    (OSK_E* code); MemoryError; TypeError."""
