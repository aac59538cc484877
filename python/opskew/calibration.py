"""Calibrations: W and delta per machine, torch version, instrument and
configuration, stored in the user's cache directory (docs/design.md: calibrations
are specific to those conditions and are stored with those keys)."""

from __future__ import annotations

import hashlib
import json
import os
import socket

from .errors import UsageError

SCHEMA = "opskew.calibration/1"


def cache_dir() -> str:
    """<cache home>/calibrations (native.cache_home: $OPSKEW_CACHE_DIR, else
    $XDG_CACHE_HOME/opskew, else ~/.cache/opskew)."""
    from .native import cache_home

    return os.path.join(cache_home(), "calibrations")


def machine() -> str:
    from .measure import cpu_model

    return f"{socket.gethostname()} ({cpu_model()})"


def config_name(options: dict) -> str:
    on = sorted(k for k, v in options.items() if v)
    return "+".join(on) or "minimal"


def make_key(instrument: str, config: str, torch_version: str, device: str, threads: int) -> dict:
    return {"machine": machine(), "torch": torch_version, "instrument": instrument, "config": config,
            "device": device, "threads": threads}


def key_id(key: dict) -> str:
    digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]
    safe = f"{key['instrument']}-{key['config']}-{key['device']}-t{key['threads']}-torch{key['torch']}"
    if key.get("workload", "builtin:add") != "builtin:add":
        safe += "-" + os.path.basename(key["workload"].replace(":", "-"))
    return "".join(ch if ch.isalnum() or ch in "-_.+" else "_" for ch in safe) + "-" + digest


def store(cal: dict) -> str:
    d = cache_dir()
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, key_id(cal["key"]) + ".json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(cal, f, indent=2)
    os.replace(tmp, path)
    return path


def load(path: str) -> dict:
    try:
        with open(path) as f:
            cal = json.load(f)
    except FileNotFoundError:
        raise UsageError(f"calibration file not found: {path}") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read calibration {path}: {exc}") from None
    if not isinstance(cal, dict) or cal.get("schema") != SCHEMA:
        raise UsageError(f"{path} is not an opskew calibration (schema {SCHEMA})")
    return cal


def stored() -> list:
    d = cache_dir()
    out = []
    if not os.path.isdir(d):
        return out
    for name in sorted(os.listdir(d)):
        if name.endswith(".json"):
            try:
                cal = load(os.path.join(d, name))
            except UsageError:
                continue
            cal["_path"] = os.path.join(d, name)
            out.append(cal)
    return out


def find(instrument: str, config: str, torch_version: str, device: str | None = None) -> dict | None:
    """The newest stored calibration for this machine and torch that matches."""
    me = machine()
    best = None
    for cal in stored():
        k = cal["key"]
        if (k["machine"], k["torch"], k["instrument"], k["config"]) != (me, torch_version, instrument, config):
            continue
        if k.get("workload", "builtin:add") != "builtin:add":
            continue  # workload-specific calibrations are used only when named
        if device and k["device"] != device:
            continue
        if best is None or cal.get("date", "") > best.get("date", ""):
            best = cal
    return best


def python_call_rounds(device: str, configs: dict, *, calls: int, trials: int, iters: int,
                       warmup_s: float, progress=None):
    """Paired rounds of an empty Python function called `calls` times per
    iteration: the bare arm "baseline" and one torch.profiler arm per entry of
    `configs` (name -> options). Under with_stack every call is one Python
    event and no operator, which prices the Python tracer alone. Returns the
    rounds and the workload's description; raises UsageError when the rounds
    did not complete."""
    from .instruments import TorchProfiler
    from .measure import run_rounds
    from .workload import python_calls

    wl = python_calls(calls)
    arms = {"baseline": None, **{n: TorchProfiler(device, count="trace", **o) for n, o in configs.items()}}
    r = run_rounds(wl.iteration, arms, trials=trials, iters=iters, device=device, warmup_s=warmup_s,
                   progress=progress)
    if r.error is not None or r.interrupted or r.n < 2:
        raise UsageError(f"measuring W_py on empty Python calls did not complete "
                         f"({r.error or 'interrupted'})")
    return r, wl.description
