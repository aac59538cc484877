"""`opskew check`: is this workload's profiler trace skewed, and by how much?"""

from __future__ import annotations

import argparse
import sys

from opskew.errors import EXIT_OK, EXIT_RUNTIME, EXIT_SKEW, OpskewError, RuntimeFailure, UsageError
from opskew.measure.instruments import PROFILER_OPTIONS, parse_instrument
from opskew.stats.estimators import analyze_check, busy_wait_spun
from opskew.commands._common import (Computed, add_workload_arguments, conclude, finish, finite_float, load_workload, prepare,
                      workload_files)
from opskew.output import check_output, write_failure, write_file, write_json
from opskew.render.units import count_of, fmt_ci, fmt_ns, fmt_time, table

SCHEMA = "opskew.check/1"

HELP = "time a workload with and without the profiler; report the added cost per event"
DESCRIPTION = """\
Runs TARGET (default: the built-in torch.add loop) in interleaved baseline and
profiled trials (AB, BA, ...), after a warm-up, and reports with statistics how
much the instrument adds per recorded event (W), what it costs outside the
timed window (stop, post-processing, export), how inflated the operator times in
the trace are, and whether the skew is significant.

TARGET is `file.py:function` or `package.module:function`: a callable that runs
one iteration of your workload. With --setup NAME, NAME() from the same module
runs once first and its result is passed to the callable.

The added cost per event is the median over trial pairs of
(profiled window - baseline window) / events, with a distribution-free 95%
confidence interval for the median (sign-test inversion; its exact coverage is
printed). The verdict is "skewed" when that interval excludes zero and the
in-window slowdown is at least --threshold.

After the trials, one more profiled window runs and its trace is read with
W measured by these very trials (an in-run calibration, in the same process
and minutes, which carries over better than a stored one where the machine's
speed drifts): the per-operator verdict. For the top operators by self time
it prints what the trace reports, what the instrument added (delta inside
the operator's own events, W per operator event below it, W_py per Python
event below it), the corrected self and total with the interval W's CI gives
them, and a trust mark: believable as reported, inflated (use the corrected
value), or unknowable (the correction is larger than what remains). A line
says in plain words where the skew lands: inside the leaves' own intervals,
or between events, where it inflates the step's wall time and parents'
inclusive times. With --with-stack, W_py per Python event is measured first
on empty Python calls and taken out of W.

--corrected-trace PATH writes that window's trace corrected (as `opskew
correct` does); --trace PATH keeps it uncorrected; --plot PATH draws the
verdict (PNG, or SVG by the suffix). If that extra window or its correction
fails, the figures of the trials are still reported and the exit code is 6.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
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


def _count(x: float) -> str:
    """A count of events per iteration: whole when it is one, else "about N"
    (a median over trials of events per window, over the window's iterations,
    need not be whole: the profiler's own Python frames vary)."""
    n = round(x)
    return f"{n:d}" if abs(x - n) < 1e-9 else f"about {n:d}"


def _print_human(result: dict, out=None) -> None:
    out = out or sys.stdout  # looked up per call: a redirected or captured stdout is honoured
    c = result["conditions"]
    title = f"opskew check: {c['workload']['description']}"
    rows = [
        ("conditions", f"torch {c['torch']}, {c['device']}"
         + (f" ({c['gpu']})" if c.get("gpu") else f" ({c['cpu']})")
         + f", {count_of(c['threads'], 'thread')}, Python {c['python']}"),
        ("instrument", c["instrument_label"] + ("" if c["baseline_instrument"] == "none"
                                                else f", over {c['baseline_instrument']}")),
        ("method", f"{result.get('pairs', 0)} interleaved pairs x {c['iters']} iterations, "
         f"warm-up {c.get('warmup_s', 0):.1f}s (--warmup, then one instrument session)"),
    ]
    if result.get("status") != "complete":
        rows.append(("status", f"PARTIAL ({result.get('status')}): figures use the trials completed"))
    if "baseline" not in result:
        rows.append(("result", "no complete pair of trials: nothing to report"))
        table(rows, title, out)
        return
    b, p = result["baseline"], result["profiled"]
    rows += [
        ("", ""),
        ("baseline / iteration", fmt_time(b["per_iter_s"])),
        ("profiled / iteration", f"{fmt_time(p['per_iter_s'])}  (in-window: timed inside the profiler's with-block)"),
    ]
    if "gpu" in result:
        g = result["gpu"]
        rows.append(("GPU time / iteration", f"baseline {fmt_time(g['baseline_gpu_per_iter_s'])}, "
                     f"profiled {fmt_time(g['profiled_gpu_per_iter_s'])} (CUDA events)"))
        idle = g["gpu_idle_added_per_iter_ns"]
        rows.append(("GPU idle added", f"{fmt_ns(idle['median'])} / iteration  CI {fmt_ci(*idle['ci95'])}"))
        la = g["launch_added_per_event_ns"]
        rows.append(("launch (CPU issue)", f"{fmt_ns(g['launch_per_event_baseline_ns'])} / op baseline; "
                     f"+{fmt_ns(la['median'])} / op profiled  CI {fmt_ci(*la['ci95'])}"))
        if "trace_kernel_per_iter_s" in g:
            rows.append(("kernels in trace", f"{fmt_time(g['trace_kernel_per_iter_s'])} / iteration = "
                         f"{100 * g['trace_kernel_over_cuda_events']:.0f}% of the CUDA-event GPU time"))
        if "cupti_overhead_events_per_iter" in g:
            rows.append(("CUPTI overhead", f"{g['cupti_overhead_events_per_iter']:.3g} overhead events / iteration, "
                         f"{fmt_time(g['cupti_overhead_per_iter_s'])} / iteration, as Kineto reports them"))
        rows.append(("sync cost", f"{fmt_time(c['sync_s'])} per synchronize, paid once per window in both arms"))
    if result.get("events_per_iter"):
        lo, hi = result["events_per_trial_range"]
        ev = f"{_count(result['events_per_iter'])} operator events"
        if result.get("python_events_per_iter"):
            ev += f" + {_count(result['python_events_per_iter'])} Python-function events"
        if lo != hi:
            ev += f" (trials recorded {lo}..{hi} operator events in {c['iters']} iterations; the median)"
        rows.append(("events / iteration", ev))
        w = result["added_per_event_ns"]
        rows.append(("added per event (W)", f"{fmt_ns(w['median'])}  "
                     f"{100 * w['ci_coverage']:.1f}% CI {fmt_ci(*w['ci95'])}"))
        rows.append(("inflation", f"x{result['inflation']:.2f} in-window time per iteration"))
        if "reported_ops" in result:
            r = result["reported_ops"]
            rows.append(("trace op time", f"{fmt_time(r['self_per_event_s'])} per op (self, key_averages()); "
                         f"the uninstrumented loop takes {fmt_time(r['true_per_event_upper_s'])} per op, "
                         "Python and dispatch included"))
            rows.append(("W vs trace op time", f"the instrument adds {100 * w['median'] * 1e-9 / r['self_per_event_s']:.0f}% "
                         "of what the trace reports per op"))
        rows.append(("", ""))
        rows.append(("enter (start)", fmt_time(p["enter_s"]["median"])))
        rows.append(("stop / event", f"{fmt_ns(result['stop_per_event_ns'])}  (outside the window)"))
        if "postprocess_per_event_ns" in result:
            rows.append(("post-process / event", f"{fmt_ns(result['postprocess_per_event_ns'])}  (key_averages())"))
        if "export_per_event_ns" in result:
            rows.append(("export / event", f"{fmt_ns(result['export_per_event_ns'])}, "
                         f"{result['export_bytes_per_event']:.0f} bytes/event"))
        if result.get("correction_error"):
            rows.append(("per-operator verdict", f"not made: {result['correction_error']}"))
        if "correction" in result:
            cr = result["correction"]
            rows.append(("", ""))
            text = (f"W {fmt_ns(cr['w_ns']['median'])} {fmt_ci(*cr['w_ns']['ci95'])} per operator event")
            if cr["w_py_ns"]["median"]:
                text += (f", W_py {fmt_ns(cr['w_py_ns']['median'])} {fmt_ci(*cr['w_py_ns']['ci95'])} "
                         "per Python event")
            rows.append(("in-run calibration", text + f", delta {fmt_ns(cr['delta_ns'])}"))
            rows.append(("verdict window", f"{cr['events']} events in one more profiled window (the "
                         "per-operator verdict below reads it)"
                         + (f"; corrected trace {cr['corrected_trace']}" if cr["corrected_trace"] else "")
                         + (f"; raw trace {cr['trace']}" if cr["trace"] else "")))
        from opskew.analyze.verdict import skew_words

        v = result["verdict"]
        rows.append(("", ""))
        if v["skewed"]:
            text = "SKEWED: the instrument inflates this trace (where, per operator: below)"
        elif not v["significant"] and not v.get("enough_trials", True):
            text = (f"NOT ENOUGH TRIALS to decide: {result.get('pairs', 0)} pair(s); the sign test needs "
                    "at least 6 for a 95% CI (run more --trials)")
        else:
            text = skew_words(v)
        rows.append(("verdict", text))
        rows.append(("test", v["test"]))
    elif result.get("note"):
        rows.append(("note", result["note"]))
    if result.get("error"):
        rows.append(("error", result["error"]))
    table(rows, title, out)
    if "operators" in result:
        from opskew.analyze.verdict import render

        out.write("\nper-operator verdict (one profiled window, corrected with the in-run W):\n")
        render(result["operators"], out, top=result["operators"]["top"])


def _check_paths(args):
    import os

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
            raise UsageError("--plot needs matplotlib (pip install matplotlib)") from None
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
    import os
    import tempfile

    import torch

    from opskew.stats.estimators import operator_event_cost, python_event_cost
    from opskew.calibration.store import config_name, delta_range, find_for_threads, python_call_rounds
    from opskew.analyze.verdict import per_operator

    w_py = {"median": 0.0, "ci95": [0.0, 0.0]}
    if instrument.options.get("with_stack"):
        r, _ = python_call_rounds(device, {"p": instrument.options}, calls=1000, trials=9, iters=10,
                                  warmup_s=0.1, progress=progress)
        w_py = python_event_cost(r, "p")
    wp = max(w_py["median"], 0.0)
    w = operator_event_cost(rounds.windows("baseline"), rounds.trials["instrument"], wp)
    if w["median"] < 0 and args.corrected_trace:
        raise RuntimeFailure(f"W came out negative ({w['median']:.0f} ns): the machine is too noisy for an "
                         "in-run correction; rerun with more --trials")
    # Without a corrected trace to write, a W whose median is below zero
    # (no overhead this run could measure) reads as 0: the verdict then
    # removes nothing, and W's upper end still bounds what it could be.
    config = config_name(instrument.options)
    cal, cal_note = find_for_threads("torch.profiler", config, torch.__version__, device, torch.get_num_threads())
    delta = min(max(cal["delta_ns"]["median"], 0.0), w["median"]) if cal else 0.0
    delta_py = min(max((cal.get("delta_py_ns") or {}).get("median", 0.0), 0.0), wp) if cal else 0.0
    # with_stack: how much slower bytecode runs under the profile function
    # (opskew.bytecode), measured here before the profiler sets one.
    bytecode = None
    if instrument.options.get("with_stack"):
        from opskew.measure.bytecode import measured

        bytecode = measured()
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
            v = per_operator(raw, {k: w[k] for k in ("median", "ci95", "ci_coverage")}, delta,
                             w_py={k: w_py[k] for k in ("median", "ci95")}, delta_py_ns=delta_py,
                             threshold=args.threshold, out=args.corrected_trace, bytecode=bytecode,
                             delta_range=delta_range(cal))
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
        "w_ns": {k: w[k] for k in ("median", "ci95", "ci_coverage")},
        "w_py_ns": {k: w_py[k] for k in ("median", "ci95")},
        "delta_ns": delta, "delta_py_ns": delta_py,
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
    from opskew.measure.rounds import conditions, progress_printer, run_rounds

    options = {k: getattr(args, k) for k in PROFILER_OPTIONS}
    instrument = parse_instrument(args.instrument, device=device, export=args.export, options=options)
    reference = parse_instrument(args.against, device=device) if args.against else None
    workload = load_workload(args, device)
    rounds = run_rounds(workload.iteration, {"baseline": reference, "instrument": instrument},
                        trials=args.trials, iters=args.iters, device=device, warmup_s=args.warmup,
                        progress=progress_printer("opskew check"))
    result = {"schema": SCHEMA}
    result["conditions"] = conditions(device, args.threads, instrument, {
        "workload": {"target": workload.name, "description": workload.description, **workload.params},
        "trials": args.trials, "iters": args.iters, "warmup_s": round(rounds.warmup_s, 3),
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
        from opskew.measure.rounds import make_window

        try:
            result["correction"], result["operators"] = in_run_correction(
                args, rounds, instrument, make_window(workload.iteration, args.iters, device), device,
                progress_printer("opskew check (W_py)"))
            if args.plot:
                from opskew.analyze.verdict import plot

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


def run(args) -> int:
    if getattr(args, "nproc", None) is not None:
        from opskew.experiments import jobcheck

        check_output(args.json, inputs=workload_files(args))
        try:
            doc = jobcheck.run(args)
        except OpskewError as exc:
            if getattr(exc, "partial", None):  # what was measured before the failure
                if args.json != "-":
                    jobcheck.render(exc.partial, sys.stdout)
                if args.json:
                    write_json(exc.partial, args.json)
            raise
        if args.json != "-":
            jobcheck.render(doc, sys.stdout)
        if args.json:
            write_json(doc, args.json)
        skewed = doc["job"]["ci95"][0] > 0 and doc["job"]["added_per_iter_ns"] >= args.threshold * doc["job"][
            "base_per_iter_ns"]
        return EXIT_SKEW if args.fail_on_skew and skewed else EXIT_OK
    done = compute(args)
    result = done.result
    rc = finish(done, _print_human, args.json, write_json)
    if rc is not None:
        return rc
    if result.get("correction_error"):
        print(f"opskew check: no per-operator verdict: {result['correction_error']}", file=sys.stderr)
        # The trials' figures stand. The exit code says the step after them
        # failed only when it was asked for an output (--corrected-trace,
        # --trace, --plot); the default verdict is a bonus, not the job.
        if args.corrected_trace or args.trace or args.plot:
            return done.rc
    if args.fail_on_skew and result.get("verdict", {}).get("skewed"):
        return EXIT_SKEW
    return EXIT_OK
