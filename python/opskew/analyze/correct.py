"""`opskew correct`: subtract the instrument's calibrated cost from a trace.
The computation; the text is opskew.render.correct's, the command line
opskew.cli.commands.correct's."""

from __future__ import annotations

import json
import os

from opskew.analyze.profile_out import own_delta_notes, w_for_trace
from opskew.analyze.tracefile import correct, rereadable, scan
from opskew.calibration.store import SCHEMA as CALIBRATION_SCHEMA
from opskew.calibration.store import DEFAULT, CalibrationError, config_name, find, for_trace, load, make_key, validate
from opskew.errors import UsageError
from opskew.options import Spec, declared
from opskew.output import check_output, write_failure
from opskew.results.views import lazy
from opskew.stats.costmodel import CostModel, fields, prices
from opskew.stats.notes import note
from opskew.vocab import PROFILER_OPTIONS

corrected_note = lazy("trace_notes.corrected_note")

SCHEMA = "opskew.correct/1"

# The torch.profiler options whose traces can be told apart: the C reader
# counts the events that carry each one's mark (osk_reader_marks_t,
# docs/reader.md).
_OPTIONS = PROFILER_OPTIONS


def declare(p: Spec) -> None:
    p.add_argument("trace", metavar="TRACE", help="Chrome trace JSON (.json or .json.gz)")
    p.add_argument("--calibration", metavar="FILE", help="a calibration file (default: the cache)")
    p.add_argument("--from", dest="from_out", metavar="OUT",
                   help="the W (delta, W_py) that an `opskew profile -o OUT` run measured for TRACE (OUT or "
                   "OUT/report.json): the W that wrote that cycle's corrected trace when TRACE is one of the "
                   "run's raw traces, else the run's final W; the output says which")
    p.add_argument("--w", metavar="NS[,PY_NS]",
                   help="W per operator event in ns (and W_py per Python event), delta 0: a W you know")
    p.add_argument("-o", "--out", metavar="PATH", help="write the corrected trace to PATH")
    p.add_argument("--force", action="store_true", help="use a calibration whose conditions differ")
    p.add_argument("--no-calibrate", action="store_true",
                   help="with no calibration stored for a torch.profiler trace's configuration, refuse (by "
                        "default one is measured now, on opskew's built-in steps, said in one line and stored)")
    p.add_argument("--waits", choices=("auto", "on", "off"), default="auto",
                   help="the cross-thread rule: a thread's self time inside one of its events, while other "
                        "threads' events ran, was spent waiting for them (a CUDA backward runs on the autograd "
                        "engine's device thread while the caller waits), so it shrinks by their instrument time "
                        "too. auto (default): where the trace holds GPU activity; on; off: each thread by its "
                        "own events alone (threads that run alongside each other)"),
    p.add_argument("--sort", default="reported", choices=("reported", "corrected", "calls", "name", "removed"))
    p.add_argument("--top", type=int, default=20, metavar="N", help="rows to print (default: 20; 0: all)")
    p.add_argument("--json", metavar="PATH", help="write the result as JSON (schema opskew.correct/1), - for stdout")
    p.add_argument("--csv", metavar="PATH",
                   help="write every operator as CSV to PATH ('-': stdout): a header line, then plain "
                   "numbers (times in ns)")


SPEC, Options = declared("correct", declare)


def detect(path: str) -> dict:
    """Which instrument and options made the trace: opskew's tracer when it
    has an "opskew" header, else torch.profiler with the options whose marks
    its events carry. All of it comes from one pass of the C reader over the
    whole trace (tracefile.scan); a trace that `opskew correct` wrote is
    refused."""
    found = scan(path)
    header = found["objects"].get("opskew")
    if isinstance(header, dict):
        if "corrected" in header:
            raise UsageError(f"{path} was written by `opskew correct` already; correct the original trace")
        if "version" in header and isinstance(header.get("instrument"), str):
            c = header.get("calibration")
            return {"instrument": "opskew", "config": header["instrument"], "options": {},
                    "header_calibration": c if isinstance(c, dict) else None}
    meta = found["metadata"]
    if any(k in meta for k in _OPTIONS):
        # Kineto writes each option that was on as a top-level flag
        # ("with_flops": 1): exact, where the events' marks are not (torch
        # 2.13 writes no "flops" or "Module Hierarchy" in args, and
        # with_flops records shapes).
        opts = {k: bool(meta.get(k)) for k in _OPTIONS}
    else:
        opts = {k: found["marks"][k] > 0 for k in _OPTIONS}
        if opts["with_flops"]:
            opts["record_shapes"] = False  # with_flops implies shapes
    return {"instrument": "torch.profiler", "config": config_name(opts), "options": opts,
            "backward": found["marks"].get("backward", 0)}


def given_calibration(args, found: dict, trace: str):
    """The calibration that --from OUT or --w gives, as a stored one's
    document (with `_path` saying where it came from), else None."""
    w_text, out = getattr(args, "w", None), getattr(args, "from_out", None)
    given = [f for f, v in (("--w", w_text), ("--from", out), ("--calibration", args.calibration)) if v]
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)}: give one")
    key = {"instrument": found["instrument"], "config": found["config"]}
    if out:
        m = w_for_trace(out, trace)
        (w, delta), (py_w, py_delta) = m["prices"]["operator"], m["prices"]["python"]
        cal = {"key": key, **fields({"operator": (w, {"median": delta})}), "_path": m["source"],
               "_notes": own_delta_notes(m)}
        if py_w:
            cal.update(fields({"python": (py_w, {"median": py_delta})}))
        return cal
    if w_text:
        try:
            parts = [float(x) for x in str(w_text).split(",")]
        except ValueError:
            parts = []
        if len(parts) not in (1, 2) or any(x < 0 or x != x for x in parts):
            raise UsageError(f"--w: NS or NS,PY_NS (ns >= 0), not {w_text!r}")
        priced = {"operator": ({"median": parts[0]}, {"median": 0.0})}
        if len(parts) == 2:
            priced["python"] = ({"median": parts[1]}, None)
        return {"key": key, **fields(priced), "_path": "--w"}
    return None


def choose_calibration(args, found: dict) -> dict:
    """The calibration that prices the trace (chosen by _calibration), as it
    prices this trace: a default calibration's W from the built-in step
    that matches it, training where it ran backward nodes, else inference
    (calibration.store.for_trace)."""
    cal = _calibration(args, found)
    try:
        return for_trace(cal, bool(found.get("backward")))
    except ValueError as exc:
        raise CalibrationError(f"the calibration {cal.get('_path') or ''} cannot price this trace ({exc}); "
                               "run `opskew calibrate` again") from None


def _calibration(args, found: dict) -> dict:
    import torch  # deferred: opskew correct reads traces; torch only for its version's calibration

    if args.calibration:
        cal = load(args.calibration)
        k = cal["key"]
        if (k["instrument"], k["config"]) != (found["instrument"], found["config"]) and not args.force:
            raise UsageError(
                f"the calibration is for {k['instrument']} ({k['config']}) but the trace looks like "
                f"{found['instrument']} ({found['config']}); calibrate that configuration "
                f"(opskew calibrate --config {found['config'].replace('+', ',')}) or pass --force")
        return cal
    header = found.get("header_calibration")
    if header and str(header.get("w_source", "")).startswith("opskew calibrate"):
        # The trace was written with a stored in-window W: that very W, not
        # whichever calibration is newest now (one W: docs/tracer.md).
        return _from_header(header, found, torch.__version__)
    cal = find(found["instrument"], found["config"], torch.__version__)
    measure = getattr(args, "measure_calibration", None)
    if cal is None and not header and measure is not None and found["instrument"] == "torch.profiler" \
            and not getattr(args, "no_calibrate", False):
        # Nothing stored for this configuration: measured now (the command
        # line runs `opskew calibrate --config CONFIG` in a child process,
        # which stores it), then taken from the cache as any stored one.
        measured = measure(found["config"])
        cal = find(found["instrument"], found["config"], torch.__version__)
        if cal is not None:
            cal["_measured_now"] = measured
    if cal is None and header:
        # One W for the tracer (docs/tracer.md): the W the trace was written
        # with, the same its summary used.
        return _from_header(header, found, torch.__version__)
    if cal is None:
        hint = ("opskew calibrate (it measures opskew's ITT and native tracers)" if found["instrument"] == "opskew"
                else f"opskew calibrate --config {found['config'].replace('+', ',')}")
        raise UsageError(f"no stored calibration for {found['instrument']} ({found['config']}) with "
                         f"torch {torch.__version__} on this machine: pass --from OUT (the W an `opskew profile "
                         "-o OUT` run measured), --w NS (a W you know, per operator event) or --calibration "
                         f"FILE, or run `{hint}` once")
    return cal


def _from_header(header: dict, found: dict, torch_version: str) -> dict:
    """The tracer's own W and delta, from its trace's header, as a
    calibration (validated like a stored one)."""
    cal = {"schema": CALIBRATION_SCHEMA, "key": make_key("opskew", found["config"], torch_version, "cpu", 1),
           "w_ns": {"median": header.get("w_ns")}, "delta_ns": {"median": header.get("delta_ns")}}
    try:
        validate(cal)
    except ValueError as exc:
        raise CalibrationError(f"the trace's own calibration cannot be used ({exc}); run `opskew calibrate` "
                               "or pass --calibration FILE") from None
    cal["_path"] = "the trace's header: " + str(header.get("w_source") or "self-calibrated")
    return cal



def calibration_notes(cal: dict, found: dict) -> list:
    """What a calibration leaves in a trace it corrects (`found`: detect()'s):
    measured now, flagged noisy when measured, no W_py for a with_stack
    trace, a micro-workload's W."""
    notes = []
    if cal.get("_measured_now"):
        notes.append(note("calibration_measured_now", seconds=cal["_measured_now"]["seconds"], path=cal.get("_path"),
                          noisy=cal.get("noisy")))
    elif cal.get("noisy"):
        # A stored calibration its own measurement flagged (calibrate's
        # "noisy"): said where it is used, not only where it was made.
        notes.append(note("stored_calibration_noisy", path=cal.get("_path"), noisy=cal["noisy"]))
    if found["options"].get("with_stack") and not prices(cal)["python"][0]:
        notes.append(note("calibration_without_python_cost"))
    opts = found["options"]
    if found["instrument"] != "torch.profiler":
        pass
    elif cal.get("_step"):
        notes.append(note("step_workload_w", "advice", step=cal["_step"], w_ns=cal["w_ns"]["median"]))
    elif cal["key"].get("workload", DEFAULT) == DEFAULT:
        shapes = bool(opts.get("record_shapes") or opts.get("with_flops"))
        notes.append(note("micro_workload_w", "advice", shapes=shapes))
    return notes


def compute(args) -> dict:
    """The correction's document (the --json, schema opskew.correct/1, with
    every operator; "omitted" counts those past --top, which the table leaves
    out); with --out, the corrected trace is written. Prints nothing."""
    if args.top < 0:
        raise UsageError("--top must be >= 0")
    if args.csv == "-" and args.json == "-":
        raise UsageError("--json - and --csv - cannot both go to standard output: give one a file")
    for path in (args.out, args.json, args.csv):
        if path and path != "-" and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise UsageError(f"directory does not exist: {os.path.dirname(os.path.abspath(path))}")
    # Refused before anything is read: an output that is the input (also
    # through a link), or one the writer would refuse (docs/outputs.md).
    inputs = [("the input trace", args.trace), ("the calibration", args.calibration)]
    check_output(args.out, inputs=inputs + [("the --json file", args.json)], stdout=False,
                 what="corrected trace")
    check_output(args.json, inputs=inputs)
    check_output(args.csv, inputs=inputs + [("the --json file", args.json)])
    # Read twice (detection, then correction): a pipe or "-" is copied once,
    # in C, to a temporary file of our own (docs/reader.md).
    with rereadable(args.trace) as src:
        return _compute(args, src)


def _compute(args, src: str) -> dict:
    found = detect(src)
    cal = given_calibration(args, found, args.trace) or choose_calibration(args, found)
    (w, delta), (py_w, py_delta) = prices(cal).values()
    w, delta = float(w["median"]), float(delta["median"])
    if w < 0:
        raise UsageError(f"the calibration has a negative W ({w:.1f} ns): recalibrate on a quieter machine")
    delta = min(max(delta, 0.0), w)
    py_w = float((py_w or {}).get("median", 0.0))
    py_delta = min(max(float((py_delta or {}).get("median", 0.0)), 0.0), max(py_w, 0.0))
    if py_w < 0:
        raise UsageError(f"the calibration has a negative W_py ({py_w:.1f} ns): recalibrate on a quieter machine")
    notes = cal.get("_notes", []) if "_notes" in cal or cal.get("_path") == "--w" else calibration_notes(cal, found)
    try:
        source = cal.get("_path") or args.calibration or "the calibration cache"
        model = CostModel.default(w, delta, py_w, py_delta)
        about = corrected_note(model, source=None if args.trace == "-" else args.trace,
                               by=f"opskew correct with the calibration of {found['config']} from {source}, "
                                  "measured on a micro-workload unless calibrated on this one"
                               if "key" in cal and "schema" in cal else f"opskew correct with the W of {source}")
        r = correct(src, model, args.out,
                    waits={"auto": -1, "on": 1, "off": 0}[args.waits], progress=getattr(args, "progress", None),
                    run_json=json.dumps({"about": about}) if args.out else None)
    except UsageError as exc:
        # The C writer's failure (disk full, no permission): one line, exit 7.
        failure = write_failure(exc, args.out)
        if failure:
            raise failure from None
        raise
    ops = r["ops"]
    if model.default_shape():
        # Per class only where the model has more than the default's two (its W and W_py say it all).
        r["stats"].pop("class_events", None)
        for o in ops:
            o.pop("cost_class", None)
            o.pop("class_descendants", None)
    key = {"reported": lambda o: -o["reported_total_ns"], "corrected": lambda o: -o["corrected_total_ns"],
           "calls": lambda o: -o["calls"], "name": lambda o: o["name"],
           "removed": lambda o: o["corrected_total_ns"] - o["reported_total_ns"]}[args.sort]
    ops.sort(key=key)
    s = r["stats"]
    if s.get("waited_ns"):
        notes.append(note("cross_thread_waits", waited_ns=s["waited_ns"], threads=s["overlapping_threads"]))
    res = {
        "schema": SCHEMA, "trace": args.trace, "detected": found,
        "calibration": {**fields({"operator": (w, delta), "python": (py_w, py_delta)}),
                        "source": cal.get("_path") or args.calibration or "cache", "key": cal["key"]},
        "notes": notes,
        "stats": s, "truncated": r["truncated"], "warning": r["warning"], "truncated_at": r["truncated_at"],
        "instrument_share": (1 - s["corrected_top_ns"] / s["reported_top_ns"]) if s["reported_top_ns"] else 0.0,
        "ops": ops,
        "omitted": 0 if args.top == 0 else max(0, len(ops) - args.top),
        "out": os.path.abspath(args.out) if args.out else None,
    }
    return res
