"""Options and steps shared by the experiments that run a workload
(check, matrix, sweep, advise): the workload's option declarations (onto a
command's Spec), their checks, loading the workload, and how a run ended."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from opskew.errors import UsageError, WorkloadError
from opskew.measure.rounds import resolve_device, workload_error
from opskew.measure.workload import SETUP_RULE, from_callable, load_target, source_file
from opskew.options import Spec, finite_float


def workload_files(args) -> list:
    """(description, path) of the files a workload comes from: TARGET's
    file.py (or a module's source) and sweep's --op file.py. No output may
    overwrite them (report.check_output's `inputs`)."""
    out = []
    for desc, spec in [("TARGET's file", getattr(args, "target", None))] + \
            [("--op's file", s) for s in (getattr(args, "op", None) or [])]:
        path = source_file(spec)
        if path:
            out.append((f"{desc} ({path})", path))
    return out


def add_workload_arguments(p: Spec, *, trials: int, iters: int,
                           target: bool = True) -> None:
    if target:
        p.add_argument("target", nargs="?", metavar="TARGET",
                       help="file.py:function or package.module:function (default: built-in torch.add loop)")
        p.add_argument("--setup", metavar="NAME",
                       help="setup callable in TARGET's module, run once; its result is passed to TARGET: "
                       + SETUP_RULE.replace("%", "%%"))
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"),
                   help="device of the built-in workload and of profiling (default: cpu)")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="torch intra-op threads, pinned for the run (default: 1)")
    p.add_argument("--trials", type=int, default=trials, metavar="N",
                   help=f"rounds of interleaved trials (default: {trials}, at least 2; 6+ for a 95%% CI)")
    p.add_argument("--iters", type=int, default=iters, metavar="N",
                   help=f"workload iterations per trial (default: {iters})")
    if target:
        p.add_argument("--calls", type=int, default=1000, metavar="N",
                       help="built-in workload: torch.add calls per iteration (default: 1000)")
        p.add_argument("--numel", type=int, default=4, metavar="N",
                       help="built-in workload: elements per tensor (default: 4)")
    p.add_argument("--warmup", type=finite_float, default=0.3, metavar="SECONDS",
                   help="warm-up time before the trials (default: 0.3)")


def validate(args) -> None:
    if args.trials < 2:
        raise UsageError("--trials must be at least 2")
    for name in ("iters", "calls", "numel", "threads"):
        if getattr(args, name, 1) < 1:
            raise UsageError(f"--{name} must be at least 1")
    if args.warmup < 0:
        raise UsageError("--warmup must be >= 0")
    for name in ("json", "out"):
        path = getattr(args, name, None)
        if path and path != "-":
            d = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(d):
                raise UsageError(f"--{name}: directory does not exist: {d}")


def prepare(args) -> str:
    """Validates, imports torch, pins threads; returns the resolved device."""
    validate(args)
    import torch  # after argument checks: a typo should not wait for torch to load

    device = resolve_device(args.device)
    torch.set_num_threads(args.threads)
    return device


def load_workload(args, device: str):
    try:
        if getattr(args, "fn", None) is not None:  # the Python API's callable (opskew.api)
            return from_callable(args.fn, device=device, setup=args.fn_setup)
        return load_target(getattr(args, "target", None), device=device,
                           setup=getattr(args, "setup", None), calls=getattr(args, "calls", 1000),
                           numel=getattr(args, "numel", 4))
    except UsageError:
        raise
    except WorkloadError as err:  # --setup raised: its frames first, then the one line (cli.main)
        if getattr(err, "user_traceback", ""):
            sys.stderr.write(err.user_traceback)
        raise
    except Exception as exc:
        what = f"TARGET {args.target}" if getattr(args, "fn", None) is None else "the workload"
        raise UsageError(f"loading {what} failed: {type(exc).__name__}: {exc}") from exc


def run_conditions(workload, args, rounds) -> dict:
    """What a run of paired rounds records of itself in its conditions: the
    workload, the rounds asked for, the warm-up as asked (--warmup) and as
    it ran, and the instruments' first session, timed apart."""
    return {"workload": {"target": workload.name, "description": workload.description, **workload.params},
            "trials": args.trials, "iters": args.iters, "warmup_s": args.warmup,
            "warmup_ran_s": round(rounds.warmup_s, 3), "first_session_s": round(rounds.first_session_s, 3)}


def status_of(rounds) -> str:
    return "interrupted" if rounds.interrupted else "workload-error" if rounds.error else "complete"


@dataclass
class Computed:
    """What a command's `compute(args)` returns: `result`, the JSON document,
    and how the run ended besides it. The command line's `run(args)` prints
    and writes `result` (`finish`); the Python API (opskew.api) wraps it."""

    result: dict
    error: Exception | None = None  # the workload's WorkloadError (result["error"] says it)
    interrupted: bool = False       # Ctrl-C during the trials (result["status"] says it)
    rc: int | None = None           # a non-zero exit code the run ends with otherwise


def conclude(rounds, result: dict) -> Computed:
    """Sets `status` (and `error`) of what was measured in `rounds`."""
    result["status"] = status_of(rounds)
    err = None
    if rounds.error is not None:
        err = workload_error(rounds, result)
        result["error"] = str(err)
        if err.user_traceback:
            result["traceback"] = err.user_traceback
    return Computed(result, error=err, interrupted=bool(rounds.interrupted))
