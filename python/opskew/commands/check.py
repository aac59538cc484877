"""`opskew check`: is this workload's profiler trace skewed, and by how much?"""

from __future__ import annotations

import argparse
import sys

from ..errors import EXIT_OK, EXIT_SKEW, UsageError
from ..instruments import PROFILER_OPTIONS, parse_instrument
from ..analysis import analyze_check
from ._common import add_workload_arguments, finish, load_workload, prepare
from ..report import fmt_ci, fmt_ns, fmt_time, table, write_json

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
    p.add_argument("--threshold", type=float, default=0.05, metavar="FRACTION",
                   help="smallest in-window slowdown called skew (default: 0.05 = 5%%)")
    p.add_argument("--json", metavar="PATH",
                   help="write the result as JSON (schema opskew.check/1) to PATH, or - for stdout")
    p.add_argument("--fail-on-skew", action="store_true", help="exit 3 when the skew is significant")


def _print_human(result: dict, out=sys.stdout) -> None:
    c = result["conditions"]
    title = f"opskew check: {c['workload']['description']}"
    rows = [
        ("conditions", f"torch {c['torch']}, {c['device']}"
         + (f" ({c['gpu']})" if c.get("gpu") else f" ({c['cpu']})")
         + f", {c['threads']} thread(s), Python {c['python']}"),
        ("instrument", c["instrument_label"] + ("" if c["baseline_instrument"] == "none"
                                                else f", over {c['baseline_instrument']}")),
        ("method", f"{result.get('pairs', 0)} interleaved pairs x {c['iters']} iterations, "
         f"warm-up {c.get('warmup_s', 0):.1f}s"),
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
        ("profiled / iteration", f"{fmt_time(p['per_iter_s'])}  (in-window, as the seed's snippet times it)"),
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
        ev = f"{result['events_per_iter']:.6g} operator events"
        if result.get("python_events_per_iter"):
            ev += f" + {result['python_events_per_iter']:.6g} Python-function events"
        if lo != hi:
            ev += f" (trials recorded {lo}..{hi})"
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
        v = result["verdict"]
        rows.append(("", ""))
        rows.append(("verdict", "SKEWED: operator times in this trace are inflated by the instrument"
                     if v["skewed"] else ("significant but below threshold" if v["significant"]
                                          else "no significant skew detected")))
        rows.append(("test", v["test"]))
    elif result.get("note"):
        rows.append(("note", result["note"]))
    if result.get("error"):
        rows.append(("error", result["error"]))
    table(rows, title, out)


def run(args) -> int:
    if args.threshold < 0:
        raise UsageError("--threshold must be >= 0")
    device = prepare(args)
    from ..measure import conditions, progress_printer, run_rounds

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
    rc = finish(rounds, result, _print_human, args.json, write_json)
    if rc is not None:
        return rc
    if args.fail_on_skew and result.get("verdict", {}).get("skewed"):
        return EXIT_SKEW
    return EXIT_OK
