"""The Python API: each command as a function returning a typed result
(opskew.results; docs/api.md).

    import opskew
    r = opskew.check(step, setup=make_model, trials=9, iters=5)
    r.verdict["skewed"], r.to_dict(), r.to_pandas(), r.plot("verdict.png")

Keyword arguments are the command-line options with `_` for `-`
(`record_shapes=True`, `trials=9`), checked and converted against the
command's one declaration of its options (`SPEC`, opskew.options), so every
default is the command line's; `json` and `fail_on_skew` belong to the
command line only (use `to_dict()`; the result says whether the trace is
skewed). Each function then calls the command's `compute`: the figures are
the ones `opskew CMD --json` writes, by the same code. This module imports
torch only when a function that runs a workload is called.
"""

from __future__ import annotations

import os
import warnings

from opskew.analyze import averages as averages_cmd
from opskew.analyze import compare as compare_cmd
from opskew.analyze.averages import refuse_grouping
from opskew.analyze import summary as summary_cmd
from opskew.experiments import advise as advise_cmd
from opskew.experiments import check as check_cmd
from opskew.experiments import matrix as matrix_cmd
from opskew.experiments import sweep as sweep_cmd
from opskew.measure.workload import NO_SETUP, callable_target
from opskew.options import convert
from opskew.results.averages import CorrectedAverages
from opskew.results import (AdviseResult, CheckResult, CompareResult, MatrixResult, Result, SummaryResult,
                            SweepResult)

__all__ = ["Result", "check", "matrix", "sweep", "advise", "summary", "compare", "corrected_averages"]

# Options of the command line that the API does not take, and why.
_CLI_ONLY = {"json": "use .to_dict() (or opskew.output.write_json) for the JSON",
             "fail_on_skew": "read .verdict['skewed']",
             "csv": "use .rows() or .to_pandas()",
             "target": "pass fn", "setup": "pass setup",
             "corrected_dir": "use opskew.analyze.job.write_corrected(result.to_dict(), DIR)",
             "per_rank": "each rank's table is in .to_dict()['ranks']",
             "no_calibrate": "the API never measures a calibration: with none stored it refuses, as with this flag"}

_COMMANDS = {"check": (check_cmd, CheckResult), "matrix": (matrix_cmd, MatrixResult),
             "advise": (advise_cmd, AdviseResult), "sweep": (sweep_cmd, SweepResult)}


def _path(p) -> str:
    """A path argument as the command line would have it (str or os.PathLike)."""
    if not isinstance(p, (str, os.PathLike)):
        raise TypeError(f"expected a path (str or os.PathLike), got {type(p).__name__}: {p!r}")
    return os.fspath(p)


def _options(command: str, mod, options: dict, fixed: dict):
    """The command's options object: its declared defaults, `options` (the
    keyword arguments) checked and converted as the command line takes its
    text, and `fixed` (what the API sets itself)."""
    return convert(mod.SPEC, command, options, refused=_CLI_ONLY, fixed=fixed)


def _workload_fields(fn, setup) -> dict:
    """`fn` a callable (setup: a callable run once, or a value; None: none),
    or a TARGET string as on the command line (setup: a name or None)."""
    if fn is None or isinstance(fn, str):
        if setup is not None and not isinstance(setup, str):
            raise TypeError("with a TARGET string (or the built-in workload), setup must be the name "
                            "of a callable in TARGET's module")
        return {"target": fn, "setup": setup, "fn": None, "fn_setup": NO_SETUP}
    if not callable(fn):
        raise TypeError(f"fn must be a callable or a TARGET string, not {type(fn).__name__}")
    # The name the JSON, advise's snippet and matrix's second process use.
    target = callable_target(fn) or f"{getattr(fn, '__module__', None) or '?'}:" \
                                    f"{getattr(fn, '__qualname__', type(fn).__name__)}"
    setup_name = getattr(setup, "__name__", None) if callable(setup) else None
    return {"target": target, "setup": setup_name, "fn": fn,
            "fn_setup": NO_SETUP if setup is None else setup}


def _run_workload(command: str, fn, setup, options: dict, fixed: dict | None = None) -> Result:
    fields = dict(fixed or {})
    if command != "sweep":
        fields.update(_workload_fields(fn, setup))
    mod, kind = _COMMANDS[command]
    args = _options(command, mod, options, fields)
    import torch  # the command imports it anyway; its thread count is the caller's again after

    threads = torch.get_num_threads()
    try:
        done = mod.compute(args)
    finally:
        torch.set_num_threads(threads)
    result = kind(done.result, args)
    if done.error is not None:
        done.error.partial = result  # what was measured before the workload raised
        raise done.error from done.error.cause
    if done.result.get("correction_error"):
        warnings.warn(f"opskew.check: no per-operator verdict: {done.result['correction_error']}",
                      RuntimeWarning, stacklevel=3)
    return result


def check(fn=None, *, setup=None, **options) -> Result:
    """`opskew check`: W (the instrument's cost per event) with its CI, the
    verdict, and the per-operator verdict. `fn` runs one iteration (None: the
    built-in torch.add loop; a string: a TARGET as on the command line);
    `setup` is a callable run once, whose result is passed to `fn`, or that
    value itself. Raises opskew.errors.WorkloadError (its `.partial` is the
    Result of the trials completed) when the workload raises."""
    return _run_workload("check", fn, setup, options)


def matrix(fn=None, *, setup=None, **options) -> Result:
    """`opskew matrix`: every instrument and profiler option priced per event."""
    return _run_workload("matrix", fn, setup, options)


def advise(fn=None, *, setup=None, **options) -> Result:
    """`opskew advise`: the cheapest configuration, its schedule and snippet."""
    return _run_workload("advise", fn, setup, options)


def sweep(**options) -> Result:
    """`opskew sweep`: the skew curve over operator size (`op="add"` or a
    list). Draws no plot unless `out=PREFIX` is given (the command line's
    default prefix is a file in the current directory); `Result.plot(prefix)`
    draws it afterwards."""
    if "out" not in options and "no_plot" not in options:
        options["no_plot"] = True
    return _run_workload("sweep", None, None, options)


def summary(path, **options) -> Result:
    """`opskew summary PATH`: the per-operator table of any Chrome trace
    (`sort=`, `top=`, `cat=` a list or a comma-separated string). A trace that
    ends early is summarized up to there: `status` is "truncated" and each of
    `warnings` is also issued as a RuntimeWarning. A directory or a list of
    traces is a multi-rank job (docs/multirank.md; `w=`, `align=`): its rows()
    are the table of all ranks merged. A folder `opskew profile` wrote (or its
    report.json) is its run: its rows() are the latest cycle's operators,
    corrected (docs/profile.md, "After the run")."""
    trace = [_path(p) for p in path] if isinstance(path, (list, tuple)) else [_path(path)]
    args = _options("summary", summary_cmd, options, {"trace": trace})
    doc = summary_cmd.compute(args)
    if args.corrected:  # summary(path, corrected=True): corrected_averages(path)'s table
        return _averages(doc)
    result = SummaryResult(doc, args)
    if result.to_dict().get("warnings"):
        for w in result["warnings"]:
            warnings.warn(f"opskew.summary: {w}", RuntimeWarning, stacklevel=2)
    return result


def corrected_averages(path, *, calibration=None, w_ns=None, delta_ns=None, w_py_ns=None, threshold=0.05,
                       waits="auto", force=False, group_by_input_shape=False, group_by_stack_n=0,
                       group_by_overload_name=False) -> CorrectedAverages:
    """`opskew summary TRACE --corrected`: key_averages() of any trace with
    the profiler's cost taken out, as opskew.profile's corrected_averages()
    gives it (the same rows, `.table(sort_by=..., row_limit=...)`, trust
    marks and intervals). W given (`w_ns`: ns, or {"median", "ci95"};
    `delta_ns`, `w_py_ns`: 0 where not given), else from `calibration` (a
    file) or the stored calibration `opskew correct` would take. Grouping
    by shapes, stacks or overload names is not supported yet
    (NotImplementedError): the correction's table is by name."""
    refuse_grouping(group_by_input_shape, group_by_stack_n, group_by_overload_name)
    if waits not in ("auto", "on", "off"):
        raise ValueError(f"waits: 'auto', 'on' or 'off', not {waits!r}")
    doc = averages_cmd.from_trace(_path(path), calibration=None if calibration is None else _path(calibration),
                                  w_ns=w_ns, delta_ns=delta_ns, w_py_ns=w_py_ns, threshold=threshold,
                                  waits=waits, force=force)
    return _averages(doc)


def _averages(doc: dict) -> CorrectedAverages:
    """The document's rows, with torch's DeviceType values where torch is installed."""
    try:
        from torch.autograd import DeviceType
    except ImportError:
        return CorrectedAverages(doc)
    return CorrectedAverages(doc, (DeviceType.CPU, DeviceType.CUDA))


def compare(*paths, **options) -> Result:
    """`opskew compare A B ...`: the inputs (opskew JSON results or traces)
    side by side, with each later one's ratio, change and significance
    against the first (`metric=`, `top=`). Its rows() are the JSON's rows."""
    if len(paths) == 1 and isinstance(paths[0], (list, tuple)):
        paths = tuple(paths[0])  # compare([a, b]) as compare(a, b)
    args = _options("compare", compare_cmd, options, {"inputs": [_path(p) for p in paths]})
    result = CompareResult(compare_cmd.compute(args), args)
    if result["warnings"]:
        for w in result["warnings"]:
            warnings.warn(f"opskew.compare: {w}", RuntimeWarning, stacklevel=2)
    return result
