"""Facts about the machine opskew runs on: its processor, its name in a
calibration's key, the CPUs this process may use, and where opskew keeps its
cache. Standard library only (the base layer: any module may import it)."""

from __future__ import annotations

import os
import platform
import socket


def cpu_model() -> str:
    """The processor's model name (Linux), else what platform knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> str:
    """The machine as a calibration's key names it: host name and processor."""
    return f"{socket.gethostname()} ({cpu_model()})"


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the system
    has one, else the count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cache_home() -> str:
    """opskew's cache folder: $OPSKEW_CACHE_DIR, else $XDG_CACHE_HOME/opskew,
    else ~/.cache/opskew. The one rule for every cache: tracer.native (the
    shims') loads this file by path, as the record child loads native.py,
    before the package, so this module stays standard-library only."""
    d = os.environ.get("OPSKEW_CACHE_DIR")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "opskew")
    return d


def cache_dir() -> str:
    """<cache home>/calibrations: where calibrations are stored."""
    return os.path.join(cache_home(), "calibrations")
