"""`opskew check`: is this workload's profiler trace skewed, and by how much?

The measurement and its analysis; the text is render.check's, the command
line cli.commands.check's."""

from __future__ import annotations

import os
import tempfile

from opskew.analyze.verdict import per_operator
from opskew.calibration.runner import python_call_rounds
from opskew.calibration.store import config_name, delta_range, find_for_threads
from opskew.errors import EXIT_RUNTIME, OpskewError, RuntimeFailure, UsageError
from opskew.experiments.common import (Computed, add_workload_arguments, conclude, load_workload, prepare,
                                       run_conditions, workload_files)
from opskew.measure import rounds as measure_rounds
from opskew.measure.bytecode import measured as measured_bytecode
from opskew.measure.instruments import parse_instrument
from opskew.vocab import NO_MATPLOTLIB, PROFILER_OPTIONS
from opskew.measure.rounds import conditions, make_window, progress_printer
from opskew.options import Spec, declared, finite_float
from opskew.output import check_output, write_failure, write_file
from opskew.results.views import lazy
from opskew.stats.costmodel import CostModel, fields, prices
from opskew.stats.estimators import analyze_check, busy_wait_spun, operator_event_cost, python_event_cost

corrected_note = lazy("trace_notes.corrected_note")
plot = lazy("verdict.plot")


SCHEMA = "opskew.check/1"

def declare(p: Spec) -> None:
    """The options of `opskew check` (the command line's and the API's)."""
    add_workload_arguments(p, trials=15, iters=10)
    g = p.add_argument_group("profiler options (torch.profiler.profile arguments; default all off)")
    for opt in PROFILER_OPTIONS:
        g.add_argument("--" + opt.replace("_", "-"), dest=opt, action="store_true")
    g.add_argument("--export", action="store_true",
                   help="also time export_chrome_trace per trial and report bytes per event")
    p.add_argument("--instrument", default="torch", metavar="SPEC",
                   help="torch (default) or busy-wait:NS, a test instrument that busy-waits NS "
                   "ns around each torch call (used to validate the method)")
    p.add_argument("--against", metavar="SPEC",
                   help="run the baseline trials under this instrument instead of none, so W is "
                   "the marginal cost of --instrument over it (same SPEC forms as --instrument)")
    p.add_argument("--nproc", type=int, metavar="N",
                   help="run TARGET on N ranks under torchrun (gloo on cpu, nccl on cuda), in lockstep: per "
                   "rank W by the clock and W_own by its CPU time, the job's added time and who caused it "
                   "(the built-in loop adds one allreduce per iteration; docs/multirank.md)")
    p.add_argument("--threshold", type=finite_float, default=0.05, metavar="FRACTION",
                   help="smallest in-window slowdown called skew (default: 0.05 = 5%%)")
    p.add_argument("--json", metavar="PATH",
                   help="write the result as JSON (schema opskew.check/1) to PATH, or - for stdout")
    p.add_argument("--fail-on-skew", action="store_true", help="exit 3 when the skew is significant")
    p.add_argument("--corrected-trace", metavar="PATH",
                   help="write the verdict window's trace corrected with the W measured by the trials "
                   "(torch instrument only)")
    p.add_argument("--trace", metavar="PATH", help="keep the verdict window's uncorrected trace at PATH")
    p.add_argument("--plot", metavar="PATH",
                   help="draw the per-operator verdict: reported against corrected time with W's "
                   "uncertainty, coloured by trust mark (.png or .svg)")
    p.add_argument("--top", type=int, default=15, metavar="N",
                   help="operators in the verdict table, by reported self time (default: 15; 0: all)")
    p.add_argument("--no-verdict", action="store_true",
                   help="skip the per-operator verdict's extra profiled window")


SPEC, Options = declared("check", declare)


def _check_paths(args):
    if args.top < 0:
        raise UsageError("--top must be >= 0")
    window_outputs = [o for o in ("corrected_trace", "trace", "plot") if getattr(args, o)]
    for o in window_outputs:
        flag = "--" + o.replace("_", "-")
        if args.no_verdict:
            raise UsageError(f"{flag} needs the verdict window: drop --no-verdict")
        if args.instrument not in ("torch", "torch.profiler"):
            raise UsageError(f"{flag} needs the torch instrument")
        if args.against:
            raise UsageError(f"{flag} needs W against the bare workload: drop --against")
    if args.plot and not args.plot.lower().endswith((".png", ".svg")):
        raise UsageError("--plot PATH must end in .png or .svg")
    if args.plot:
        try:
            import matplotlib  # noqa: F401  (before the trials, not after them)
        except ImportError:
            raise UsageError(f"--plot {NO_MATPLOTLIB}") from None
    # Each output refused now, before the trials, if it cannot be written
    # or would overwrite another (docs/outputs.md).
    src = workload_files(args)
    check_output(args.corrected_trace, stdout=False, what="corrected trace",
                 inputs=src + [("the --trace file", args.trace), ("the --json file", args.json),
                               ("the --plot file", args.plot)])
    check_output(args.trace, stdout=False, what="--trace file",
                 inputs=src + [("the --json file", args.json), ("the --plot file", args.plot)])
    check_output(args.plot, stdout=False, what="plot", inputs=src + [("the --json file", args.json)])
    check_output(args.json, inputs=src)


def in_run_correction(args, rounds, instrument, window, device, progress) -> dict:
    """W from this run's pairs (W_py from empty Python calls under with_stack),
    then one more profiled window, exported, and read with them: the
    per-operator verdict (opskew.verdict), and the corrected trace when asked."""
    import torch

    py_w = {"median": 0.0, "ci95": [0.0, 0.0]}
    if instrument.options.get("with_stack"):
        r, _ = python_call_rounds(device, {"p": instrument.options}, calls=1000, trials=9, iters=10,
                                  warmup_s=0.1, progress=progress)
        py_w = python_event_cost(r, "p")
    wp = max(py_w["median"], 0.0)
    w = operator_event_cost(rounds.windows("baseline"), rounds.trials["instrument"], wp)
    if w["median"] < 0 and args.corrected_trace:
        raise RuntimeFailure(f"W came out negative ({w['median']:.0f} ns): the machine is too noisy for an "
                         "in-run correction; rerun with more --trials")
    # Without a corrected trace to write, a W whose median is below zero
    # (no overhead this run could measure) reads as 0: the verdict then
    # removes nothing, and W's upper end still bounds what it could be.
    config = config_name(instrument.options)
    cal, cal_note = find_for_threads("torch.profiler", config, torch.__version__, device, torch.get_num_threads())
    (_, cal_delta), (_, cal_py_delta) = prices(cal or {}).values()
    delta = min(max(cal_delta["median"], 0.0), w["median"]) if cal else 0.0
    py_delta = min(max((cal_py_delta or {}).get("median", 0.0), 0.0), wp) if cal else 0.0
    # with_stack: how much slower bytecode runs under the profile function
    # (opskew.bytecode), measured here before the profiler sets one.
    bytecode = None
    if instrument.options.get("with_stack"):
        bytecode = measured_bytecode()
    prof = torch.profiler.profile(activities=instrument._activities(), **instrument.options)
    with prof:
        window()
    # torch exports into opskew's own temporary file; --trace gets a copy
    # through the one writer (docs/outputs.md).
    fd, raw = tempfile.mkstemp(prefix="opskew-check-", suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(raw)
        try:
            model = CostModel.default({k: w[k] for k in ("median", "ci95", "ci_coverage")}, delta,
                                      {k: py_w[k] for k in ("median", "ci95")}, py_delta)
            v = per_operator(raw, model, threshold=args.threshold, out=args.corrected_trace, bytecode=bytecode,
                             delta_range=delta_range(cal), metadata={"about": corrected_note(
                                 model, by=f"opskew check's in-run W on {config}: {w.get('n', 'the')} interleaved "
                                    "pairs of baseline and profiled trials of this workload")})
        except UsageError as exc:  # the corrected trace could not be written: exit 7
            failure = write_failure(exc, args.corrected_trace)
            if failure:
                raise failure from None
            raise
        if args.trace is not None:
            with open(raw, "rb") as f:
                write_file(args.trace, f.read())
    finally:
        os.unlink(raw)
    v["top"] = args.top
    st = v["stats"]
    return {
        **fields({"operator": ({k: w[k] for k in ("median", "ci95", "ci_coverage")}, delta),
                  "python": ({k: py_w[k] for k in ("median", "ci95")}, py_delta)}),
        "delta_source": ((cal_note or cal["_path"]) if cal
                         else "none stored: 0 (leaf operators keep their delta, tens of ns)"),
        "trace": args.trace,
        "corrected_trace": os.path.abspath(args.corrected_trace) if args.corrected_trace else None,
        "events": st["corrected_events"], "python_events": st["py_events"],
        "reported_top_ns": st["reported_top_ns"], "corrected_top_ns": st["corrected_top_ns"],
        "instrument_share": (1 - st["corrected_top_ns"] / st["reported_top_ns"]) if st["reported_top_ns"] else 0.0,
        "clamped": st["clamped"],
    }, v


def compute(args) -> Computed:
    """Measures and analyses; prints and writes nothing but the outputs the
    options name (--corrected-trace, --trace, --plot). `run` prints and
    writes the JSON; the Python API (opskew.api.check) returns it."""
    if args.threshold < 0:
        raise UsageError("--threshold must be >= 0")
    _check_paths(args)
    device = prepare(args)
    options = {k: getattr(args, k) for k in PROFILER_OPTIONS}
    instrument = parse_instrument(args.instrument, device=device, export=args.export, options=options)
    reference = parse_instrument(args.against, device=device) if args.against else None
    workload = load_workload(args, device)
    rounds = measure_rounds.run_rounds(workload.iteration, {"baseline": reference, "instrument": instrument},
                        trials=args.trials, iters=args.iters, device=device, warmup_s=args.warmup,
                        progress=progress_printer("opskew check"))
    result = {"schema": SCHEMA}
    result["conditions"] = conditions(device, args.threads, instrument, {
        **run_conditions(workload, args, rounds),
        "pair_order": "alternating AB/BA",
        "baseline_instrument": reference.label() if reference else "none",
    })
    result.update(analyze_check(rounds.windows("baseline"), rounds.trials["instrument"],
                                iters=args.iters, threshold=args.threshold))
    spun0 = busy_wait_spun(rounds.trials["baseline"])
    if spun0 is not None:
        # --against busy-wait:0: what the reference arm spun (its clock reads),
        # so that the injected difference is known: spun - baseline spun.
        result["baseline_busy_wait_spun_per_event_ns"] = spun0
    correction_rc = EXIT_RUNTIME
    verdict_possible = (args.instrument in ("torch", "torch.profiler") and not args.against
                        and not args.no_verdict)
    if (verdict_possible and rounds.error is None and not rounds.interrupted
            and result.get("events_per_iter")):
        try:
            result["correction"], result["operators"] = in_run_correction(
                args, rounds, instrument, make_window(workload.iteration, args.iters, device), device,
                progress_printer("opskew check (W_py)"))
            if args.plot:
                plot(result["operators"], args.plot, title=result["conditions"]["workload"]["description"])
        except Exception as exc:  # the check's own figures are still reported
            result["correction_error"] = f"{type(exc).__name__}: {exc}"
            # An opskew error keeps its own code (an unwritable output is 7);
            # anything else failed inside opskew (6).
            correction_rc = exc.exit_code if isinstance(exc, OpskewError) else EXIT_RUNTIME
    done = conclude(rounds, result)
    if result.get("correction_error"):
        done.rc = correction_rc
    return done
