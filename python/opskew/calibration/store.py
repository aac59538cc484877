"""Calibrations: W and delta per machine, torch version, instrument and
configuration, stored in the user's cache directory (docs/design.md: calibrations
are specific to those conditions and are stored with those keys)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
import sys

from opskew.errors import UsageError
from opskew.host import cache_dir, machine
from opskew.output import write_file

SCHEMA = "opskew.calibration/1"
# The workloads of the default calibrations (key.workload), found without
# being named: torch.add's micro-workload (before W moved to the built-in
# steps) and the built-in steps' (measure.workload.STEPS). Any other is a
# TARGET's, used only when named (--calibration).
DEFAULT = "builtin:add"
DEFAULTS = (DEFAULT, "builtin:step")


def config_name(options: dict) -> str:
    on = sorted(k for k, v in options.items() if v)
    return "+".join(on) or "minimal"


# The revision of opskew's own tracer hot path (csrc/trace/runtime.c and the
# collectors), in the key of its calibrations: a W stored by an older tracer
# would correct a newer one's traces by the old cost. Raise it whenever that
# path's cost changes. 2: one thread-state lookup per begin, the TSC read
# inline (about 50 instructions per operator fewer on the native route).
TRACER_REVISION = 2


def make_key(instrument: str, config: str, torch_version: str, device: str, threads: int) -> dict:
    key = {"machine": machine(), "torch": torch_version, "instrument": instrument, "config": config,
           "device": device, "threads": threads}
    if instrument == "opskew":
        key["tracer_revision"] = TRACER_REVISION
    return key


def key_id(key: dict) -> str:
    digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]
    safe = f"{key['instrument']}-{key['config']}-{key['device']}-t{key['threads']}-torch{key['torch']}"
    if key.get("workload", DEFAULT) != DEFAULT:
        safe += "-" + os.path.basename(key["workload"].replace(":", "-"))
    # ASCII only: clear() recognises exactly these names (_OURS).
    return "".join(ch if (ch.isascii() and ch.isalnum()) or ch in "-_.+" else "_" for ch in safe) + "-" + digest


def for_trace(cal: dict, backward: bool) -> dict:
    """The calibration as it prices one trace: where it holds W per built-in
    step ("w_by_step", opskew calibrate's default), the training step's for
    a trace with backward nodes (`backward`), else the inference step's,
    delta held to [0, that W]; "_step" names it. Any other calibration as it
    is. ValueError where the step's W is no usable constant."""
    steps = cal.get("w_by_step")
    kind = "training" if backward else "inference"
    if not isinstance(steps, dict) or not isinstance(steps.get(kind), dict):
        return cal
    w = steps[kind]
    out = dict(cal, w_ns={k: w.get(k) for k in ("median", "ci95", "ci_coverage")}, _step=kind)
    m = w.get("median")
    d = cal.get("delta_ns")
    if isinstance(d, dict) and isinstance(m, (int, float)) and isinstance(d.get("median"), (int, float)):
        top = max(m, 0.0)
        held = dict(d, median=min(d["median"], top))
        # The leaf panel's spread (the verdict's interval for delta) held too.
        rng = d.get("range")
        if isinstance(rng, list) and len(rng) == 2 and all(isinstance(x, (int, float)) for x in rng):
            held["range"] = [min(rng[0], top), min(rng[1], top)]
        ops = d.get("by_operator")
        if isinstance(ops, dict):
            held["by_operator"] = {k: min(v, top) if isinstance(v, (int, float)) else v for k, v in ops.items()}
        out["delta_ns"] = held
    return validate(out)


def store(cal: dict) -> str:
    d = cache_dir()
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, key_id(cal["key"]) + ".json")
    # The one writer (docs/outputs.md): a temporary file made with O_EXCL,
    # never a predictable name a planted link could redirect.
    write_file(path, json.dumps({k: v for k, v in cal.items() if k != "_path"}, indent=2))
    return path


# What a stored calibration may hold. Every constant is in nanoseconds per
# event; none is plausible at a millisecond or more (a whole operator costs
# less), and none is negative (calibrate does not store one that is).
MAX_NS = 1e6
_KEY_STR = ("machine", "torch", "instrument", "config", "device")


class CalibrationError(UsageError):
    """A calibration file that cannot be used: unreadable, not one, or with a
    constant of the wrong type or out of range. The message names the file
    and the field."""


def _num(v) -> bool:
    # bool is an int in Python: true/false are not numbers here.
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _constant(cal: dict, field: str, *, required: bool, upper: float | None = None) -> float | None:
    c = cal.get(field)
    if c is None and not required:
        return None
    if not isinstance(c, dict):
        raise ValueError(f"{field} is {_kind(c)}, not an object with a median")
    m = c.get("median")
    if not _num(m):
        raise ValueError(f"{field}.median is {_kind(m)}, not a finite number")
    if m < 0:
        raise ValueError(f"{field}.median is negative ({m!r} ns)")
    bound = MAX_NS if upper is None else upper
    if m > bound:
        what = "1 ms" if upper is None else f"W ({upper!r} ns)"
        raise ValueError(f"{field}.median ({m!r} ns) is above {what}: not a plausible cost per event")
    ci = c.get("ci95")
    if ci is not None:
        if not (isinstance(ci, list) and len(ci) == 2 and all(_num(x) for x in ci) and ci[0] <= ci[1]):
            raise ValueError(f"{field}.ci95 is not a pair of finite numbers [low, high]")
    return float(m)


def _kind(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return repr(v)
    return {str: "a string", list: "a list", dict: "an object"}.get(type(v), type(v).__name__)


def validate(cal) -> dict:
    """`cal` as a usable calibration, or ValueError saying which field is
    wrong. Types, finiteness and ranges: W and W_py in [0, 1 ms], delta in
    [0, W], delta_py in [0, W_py]; the key's fields are strings, threads a
    positive integer."""
    if not isinstance(cal, dict):
        raise ValueError(f"the file holds {_kind(cal)}, not an object")
    if cal.get("schema") == "opskew.calibrate/1":
        # calibrate --json's report: it lists the calibrations, each stored as a file of its own.
        raise ValueError(f"this is `opskew calibrate --json`'s report, not a calibration (schema {SCHEMA}): "
                         "pass one of the files it stored (`opskew calibrate --show` lists them), or "
                         "leave --calibration out to use the stored one that matches the trace")
    if cal.get("schema") != SCHEMA:
        raise ValueError(f"not an opskew calibration (schema {SCHEMA})")
    key = cal.get("key")
    if not isinstance(key, dict):
        raise ValueError(f"key is {_kind(key)}, not an object")
    for k in _KEY_STR:
        if not isinstance(key.get(k), str) or not key[k]:
            raise ValueError(f"key.{k} is {_kind(key.get(k))}, not a non-empty string")
    t = key.get("threads")
    if not (isinstance(t, int) and not isinstance(t, bool) and t >= 1):
        raise ValueError(f"key.threads is {_kind(t)}, not a positive integer")
    if "workload" in key and not isinstance(key["workload"], str):
        raise ValueError(f"key.workload is {_kind(key['workload'])}, not a string")
    if "date" in cal and not isinstance(cal["date"], str):
        raise ValueError(f"date is {_kind(cal['date'])}, not a string")
    w = _constant(cal, "w_ns", required=True)
    _constant(cal, "delta_ns", required=True, upper=w)
    w_py = _constant(cal, "w_py_ns", required=False)
    if w_py is not None:
        _constant(cal, "delta_py_ns", required=False, upper=w_py)
    elif cal.get("delta_py_ns") is not None:
        raise ValueError("delta_py_ns is set without w_py_ns")
    return cal


def load(path: str) -> dict:
    """The calibration in `path`, validated; CalibrationError (exit 2) with
    one line naming the file and what is wrong with it."""
    try:
        # O_NONBLOCK: a FIFO planted in the cache must not hang the command.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise CalibrationError(f"calibration file not found: {path}") from None
    except OSError as exc:
        raise CalibrationError(f"cannot read calibration {path}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CalibrationError(f"calibration {path}: not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            raw = f.read((1 << 20) + 1)
    except OSError as exc:
        raise CalibrationError(f"cannot read calibration {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return loads(raw, path)


def loads(raw: bytes, path: str = "<bytes>") -> dict:
    """The calibration in `raw` (a file's bytes), validated, or
    CalibrationError naming `path` (the loader's fuzz target: fuzz/)."""
    if len(raw) > 1 << 20:
        raise CalibrationError(f"calibration {path}: larger than 1 MiB, not an opskew calibration")
    try:
        # NaN and Infinity are not JSON: refuse them while parsing.
        cal = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
        return validate(cal)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise CalibrationError(f"calibration {path}: {_one_line(exc)}") from None


def _no_constant(name):
    raise ValueError(f"{name} is not a number JSON allows")


def _one_line(exc) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


_warned: set = set()


def stored(warn=None) -> list:
    """Every usable calibration in the cache. A file that is not one is
    skipped with a one-line warning naming it (once per process): one bad
    file never breaks a command."""
    d = cache_dir()
    out = []
    try:
        names = sorted(os.listdir(d))
    except (FileNotFoundError, NotADirectoryError):
        return out
    except OSError as exc:
        _warn_once(warn, d, f"opskew: warning: cannot list calibrations in {d}: {exc.strerror or exc}")
        return out
    for name in names:
        if not name.endswith(".json"):
            continue
        path = os.path.join(d, name)
        try:
            cal = load(path)
        except CalibrationError as exc:
            _warn_once(warn, path, f"opskew: warning: skipped {exc}")
            continue
        cal["_path"] = path
        out.append(cal)
    return out


def _warn_once(warn, what, line) -> None:
    if what in _warned:
        return
    _warned.add(what)
    (warn or (lambda s: print(s, file=sys.stderr)))(line)


# A file calibrate wrote: key_id's characters, a 10-digit hash, .json.
_OURS = re.compile(r"[A-Za-z0-9_.+-]+-[0-9a-f]{10}\.json")


def clear() -> tuple[list, list]:
    """Removes the calibrations calibrate stored: regular files named as
    key_id names them, in the cache's calibrations directory, and nothing
    else (no symlink, no other file). Returns (removed, left)."""
    d = cache_dir()
    removed, left = [], []
    names = _unless_gone(os.listdir, d, "list calibrations in", gone=(FileNotFoundError, NotADirectoryError))
    if names is _GONE:
        return removed, left
    for name in sorted(names):
        path = os.path.join(d, name)
        st = _unless_gone(os.lstat, path, "examine")
        if st is _GONE:
            continue
        if _OURS.fullmatch(name) and stat.S_ISREG(st.st_mode):
            if _unless_gone(os.unlink, path, "remove") is _GONE:
                continue
            removed.append(path)
        else:
            left.append(path)
    return removed, left


_GONE = object()


def _unless_gone(call, path: str, doing: str, gone=(FileNotFoundError,)):
    """`call(path)`, or _GONE where the path is gone (`gone`: what says so),
    as another process may clear the cache at the same time; any other
    OSError is a UsageError: "cannot {doing} {path}: why"."""
    try:
        return call(path)
    except gone:
        return _GONE
    except OSError as exc:
        raise UsageError(f"cannot {doing} {path}: {exc.strerror or exc}") from None


def find(instrument: str, config: str, torch_version: str, device: str | None = None,
         threads: int | None = None) -> dict | None:
    """The newest stored calibration for this machine and torch that matches
    (and, when `threads` is given, made with that many intra-op threads)."""
    me = machine()
    best = None
    for cal in stored():
        k = cal["key"]
        if (k["machine"], k["torch"], k["instrument"], k["config"]) != (me, torch_version, instrument, config):
            continue
        if k.get("workload", DEFAULT) not in DEFAULTS:
            continue  # workload-specific calibrations are used only when named
        if device and k["device"] != device:
            continue
        if threads is not None and k.get("threads") != threads:
            continue
        if best is None or cal.get("date", "") > best.get("date", ""):
            best = cal
    return best


def find_for_threads(instrument: str, config: str, torch_version: str, device: str | None,
                     threads: int) -> tuple[dict | None, str | None]:
    """The stored calibration made with `threads` intra-op threads, else the
    newest of another thread count, with a line that says so (an
    instrument's costs are paid on the thread that dispatches each operator,
    whatever the intra-op pool); (None, None) when none is stored."""
    cal = find(instrument, config, torch_version, device, threads=threads)
    if cal is not None:
        return cal, None
    cal = find(instrument, config, torch_version, device)
    if cal is None:
        return None, None
    return cal, (f"the stored calibration was made with {cal['key'].get('threads')} intra-op thread(s), this run "
                 f"has {threads}: its constants stand in ({cal.get('_path', '')})")


def tracer_cost(instrument: str, torch_version: str, device: str | None = None) -> tuple[float, str] | None:
    """The in-window W of opskew's own tracer (instrument "native", "itt",
    ...) stored by `opskew calibrate` for this machine and torch, and a line
    saying where it came from; None when there is none. The tracer's
    sessions carry it (osk_trace_set_cost), so that its traces, summaries and
    `opskew correct` use one W (docs/tracer.md)."""
    cal = find("opskew", instrument, torch_version, device)
    if cal is None:
        return None
    w = cal["w_ns"]
    ci = w.get("ci95")
    interval = f" [{ci[0]:.0f}, {ci[1]:.0f}]" if ci else ""
    return float(w["median"]), (f"opskew calibrate, in-window, {cal.get('date', 'undated')}: "
                                f"W {w['median']:.0f}{interval} ns ({os.path.basename(cal['_path'])})")


def delta_range(cal: dict | None) -> list | None:
    """[lo, hi]: delta's spread over the leaf panel's operators, as `opskew
    calibrate` stored it (delta_ns.range; docs/correct.md), or None where the
    calibration has none (or one that is not two finite numbers >= 0 with
    lo <= hi). The verdict's intervals take delta at its ends."""
    rng = ((cal or {}).get("delta_ns") or {}).get("range")
    if (isinstance(rng, (list, tuple)) and len(rng) == 2 and all(_num(x) and x >= 0 for x in rng)
            and rng[0] <= rng[1]):
        return [float(rng[0]), float(rng[1])]
    return None
