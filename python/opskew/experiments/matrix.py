"""`opskew matrix`: the price of every profiler option, per event, in one run.

The measurement and its analysis; the text is render.matrix's, the command
line cli.commands.matrix's."""

from __future__ import annotations

import json
import subprocess
import sys

from opskew import _engine
from opskew.errors import UsageError
from opskew.experiments.common import (Computed, add_workload_arguments, conclude, load_workload, prepare,
                                       run_conditions, workload_files)
from opskew.measure import rounds as measure_rounds
from opskew.measure.instruments import BusyWait, EmptyObserver, IttFloor, NativeFloor, OpskewTracer, TorchProfiler
from opskew.vocab import PROFILER_OPTIONS
from opskew.measure.rounds import conditions, progress_printer
from opskew.options import Spec, declared
from opskew.output import check_output
from opskew.stats.estimators import estimate, gpu_side, marginal_state, per_event_diff


SCHEMA = "opskew.matrix/1"

def declare(p: Spec) -> None:
    """The options of `opskew matrix` (the command line's and the API's)."""
    add_workload_arguments(p, trials=15, iters=10)
    p.add_argument("--no-export", action="store_true", help="skip timing export_chrome_trace")
    p.add_argument("--no-tracer", action="store_true",
                   help="skip opskew's tracer rows (ITT: measured in a second process; native: "
                        "its floor and collector)")
    p.add_argument("--inject", type=int, metavar="NS",
                   help="add two test rows, busy-wait:0 and busy-wait:NS (a C hook that busy-waits "
                   "NS ns around each torch call): the method must attribute NS to the second")
    p.add_argument("--json", metavar="PATH",
                   help="write the result as JSON (schema opskew.matrix/1) to PATH, or - for stdout")


SPEC, Options = declared("matrix", declare)


def build_arms(device: str, export: bool, inject: int | None, no_tracer: bool = False):
    """The rows of the matrix: name -> (instrument or None, reference row for
    the marginal cost or None). Rows that cannot run here are returned apart
    with the reason."""
    arms: dict = {"baseline": (None, None)}
    skipped: dict = {}
    why = IttFloor.available()
    if why is None:
        arms["itt-floor"] = (IttFloor(), None)
    else:
        skipped["itt-floor"] = why
    arms["empty-observer"] = (EmptyObserver(), None)
    arms["minimal"] = (TorchProfiler(device, export=export), "itt-floor" if why is None else None)
    for opt in PROFILER_OPTIONS:
        arms[f"+{opt}"] = (TorchProfiler(device, export=export, **{opt: True}), "minimal")
    arms["all"] = (TorchProfiler(device, export=export, **{o: True for o in PROFILER_OPTIONS}), "minimal")
    if device == "cuda":
        arms["minimal-cpu-only"] = (TorchProfiler(device, export=export, cuda_activity=False), None)
        arms["minimal"] = (arms["minimal"][0], "minimal-cpu-only")
    if not no_tracer:
        why_native = NativeFloor.available()
        if why_native is None:
            arms["native-floor"] = (NativeFloor(), None)
            arms["opskew-native"] = (OpskewTracer(export=export, instrument="native"), "native-floor")
        else:
            skipped["native-floor"] = skipped["opskew-native"] = "native collector unavailable: " + why_native
    if inject is not None:
        arms["busy-wait:0"] = (BusyWait(0), None)
        arms[f"busy-wait:{inject}"] = (BusyWait(inject), "busy-wait:0")
    return arms, skipped


def analyze(rounds, arms: dict, iters: int) -> dict:
    n = rounds.n
    res: dict = {"rounds": n, "rows": []}
    if n == 0:
        return res
    base = [w.wall_s for w in rounds.windows("baseline")]
    ref_events = [t.op_events for t in rounds.trials["minimal"]]
    res["baseline_per_iter_s"] = _engine.quantile(base, 0.5) / iters
    res["events_per_iter"] = _engine.quantile(ref_events, 0.5) / iters
    walls = {name: [t.window.wall_s for t in rounds.trials[name]] for name in arms}
    for name, (inst, ref) in arms.items():
        trials = rounds.trials[name]
        row: dict = {"row": name, "label": "no instrument" if inst is None else inst.label()}
        if inst is None:
            row["per_iter_s"] = res["baseline_per_iter_s"]
            res["rows"].append(row)
            continue
        events = [t.op_events for t in trials] if inst.counts_events else ref_events
        if any(not e for e in events):
            row["note"] = "recorded no events"
            res["rows"].append(row)
            continue
        row["per_iter_s"] = _engine.quantile(walls[name], 0.5) / iters
        row["events_per_iter"] = _engine.quantile(events, 0.5) / iters
        row["events_from"] = "own records" if inst.counts_events else "the minimal profiler's records"
        row["in_window_per_event_ns"] = per_event_diff(base, walls[name], events)
        base_windows = rounds.windows("baseline")
        if base_windows[0].gpu_s is not None:
            for t, e in zip(trials, events):
                t.op_events = t.op_events or e  # gpu_side normalizes launch cost per event
            row["gpu"] = gpu_side(base_windows, trials, iters)
        per_ev = lambda xs: [x * 1e9 / e for x, e in zip(xs, events)]  # noqa: E731
        row["enter_s"] = estimate([t.enter_s for t in trials])["median"]
        row["stop_per_event_ns"] = estimate(per_ev([t.stop_s for t in trials]))
        if any(t.post_s for t in trials):
            row["postprocess_per_event_ns"] = estimate(per_ev([t.post_s for t in trials]))
        if all(t.export_s is not None for t in trials):
            row["export_per_event_ns"] = estimate(per_ev([t.export_s for t in trials]))
            row["export_bytes_per_event"] = _engine.quantile(
                [t.export_bytes / e for t, e in zip(trials, events)], 0.5)
        if ref and ref in walls:
            row["marginal_over"] = ref
            row["marginal_in_window_ns"] = per_event_diff(walls[ref], walls[name], events)
            row["marginal_state"] = marginal_state(row["marginal_in_window_ns"])
            out_ref = [t.stop_s + t.post_s for t in rounds.trials[ref]]
            out_row = [t.stop_s + t.post_s for t in trials]
            if any(out_ref) or any(out_row):
                row["marginal_stop_post_ns"] = per_event_diff(out_ref, out_row, events)
        res["rows"].append(row)
    return res


def tracer_row(args, device: str, export: bool, events_per_iter: float | None) -> dict:
    """The opskew tracer's row, measured by opskew._arm_worker in a process
    of its own (its collector must load before torch; the ITT floor needs a
    process without it), against that process's own baseline."""
    row = {"row": "opskew", "label": OpskewTracer().label(),
           "note": "measured in a separate process (the collector must be configured before torch "
                   "loads), against that process's own baseline"}
    cfg = {"target": getattr(args, "target", None), "setup": getattr(args, "setup", None),
           "device": device, "threads": args.threads, "calls": args.calls, "numel": args.numel,
           "trials": args.trials, "iters": args.iters, "warmup": args.warmup, "export": export}
    p = subprocess.run([sys.executable, "-m", "opskew._entry.arm_worker", json.dumps(cfg)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
        row["note"] = f"not measured: the worker failed ({tail})"
        return row
    data = json.loads(p.stdout)
    trials = data["opskew"]
    if data["error"] or not trials:
        row["note"] = f"not measured: {data['error'] or 'no complete round'}"
        return row
    events = [t["events"] for t in trials]
    base = data["baseline"][: len(trials)]
    walls = [t["wall_s"] for t in trials]
    per_ev = lambda xs: [x * 1e9 / e for x, e in zip(xs, events)]  # noqa: E731
    row.update({
        "per_iter_s": _engine.quantile(walls, 0.5) / args.iters,
        "baseline_per_iter_s": _engine.quantile(base, 0.5) / args.iters,
        "events_per_iter": _engine.quantile(events, 0.5) / args.iters,
        "events_from": "own records",
        "lost_events": sum(t["lost"] for t in trials),
        "in_window_per_event_ns": per_event_diff(base, walls, events),
        "enter_s": estimate([t["enter_s"] for t in trials])["median"],
        "stop_per_event_ns": estimate(per_ev([t["stop_s"] for t in trials])),
        "postprocess_per_event_ns": estimate(per_ev([t["post_s"] for t in trials])),
    })
    if export:
        row["export_per_event_ns"] = estimate(per_ev([t["export_s"] for t in trials]))
        row["export_bytes_per_event"] = _engine.quantile(
            [t["export_bytes"] / e for t, e in zip(trials, events)], 0.5)
    return row


def _row(res, name):
    return next((r for r in res["rows"] if r["row"] == name), None)


def sources(res: dict, device: str) -> list:
    """Maps measured rows to the sources of profiler latency."""
    out = []

    def add(source, row, key, how):
        r = _row(res, row)
        v = r.get(key) if r else None
        out.append({"source": source, "row": row, "measure": how,
                    "per_event_ns": v.get("median") if isinstance(v, dict) else v,
                    "ci95": v.get("ci95") if isinstance(v, dict) else None,
                    "ci_reaches_95": v.get("ci_reaches_95", True) if isinstance(v, dict) else None,
                    "ci_coverage": v.get("ci_coverage") if isinstance(v, dict) else None})

    add("operator interception (RecordFunction + ITT stubs)", "itt-floor", "in_window_per_event_ns",
        "emit_itt with no collector, over baseline")
    tr, fl = _row(res, "opskew"), _row(res, "itt-floor")
    if tr and fl and "in_window_per_event_ns" in tr and "in_window_per_event_ns" in fl:
        out.append({"source": "opskew's collector (tracer over the ITT floor)", "row": "opskew",
                    "measure": "difference of medians across two processes (no paired CI)",
                    "per_event_ns": tr["in_window_per_event_ns"]["median"]
                    - fl["in_window_per_event_ns"]["median"], "ci95": None})
    add("operator interception (RecordFunction, native callback)", "native-floor", "in_window_per_event_ns",
        "opskew's counting-only callback over baseline")
    add("opskew's native collector (over the native floor)", "opskew-native", "marginal_in_window_ns",
        "opskew-native over native-floor, paired")
    add("argument boxing (RecordFunction needsInputs)", "empty-observer", "in_window_per_event_ns",
        "empty observer over baseline")
    add("event logging (Kineto records)", "minimal", "marginal_in_window_ns",
        "minimal profiler over " + (_row(res, "minimal") or {}).get("marginal_over", "?"))
    add("stack walking (with_stack)", "+with_stack", "marginal_in_window_ns", "over minimal")
    add("metadata: shapes (record_shapes)", "+record_shapes", "marginal_in_window_ns", "over minimal")
    add("metadata: flops (with_flops, implies shapes)", "+with_flops", "marginal_in_window_ns", "over minimal")
    add("memory events (profile_memory)", "+profile_memory", "marginal_in_window_ns", "over minimal")
    if device == "cuda":
        add("synchronization and CUPTI (CUDA activity)", "minimal", "marginal_in_window_ns",
            "CPU+CUDA over CPU-only activities")
    else:
        out.append({"source": "synchronization (CPU/GPU)", "row": None, "measure":
                    "not applicable on CPU: no device to synchronize (use --device cuda)",
                    "per_event_ns": None, "ci95": None})
    add("post-processing (stop + key_averages)", "minimal", "postprocess_per_event_ns",
        "key_averages() after stop, outside the window")
    out[-1]["stop_per_event_ns"] = ((_row(res, "minimal") or {}).get("stop_per_event_ns") or {}).get("median")
    add("export (export_chrome_trace)", "minimal", "export_per_event_ns", "outside the window")
    for s in out:
        clamp_below(s)
    return out


def clamp_below(s: dict) -> dict:
    """A source whose cost came out below 0 (its median, and its whole
    interval where it has one): a row that ran faster than what it is
    measured over, which costs no less than nothing. Its cost is clamped
    to 0 and marked: `below_reference` keeps what was measured
    ({"median", "ci95"}). One whose interval holds 0 is left as measured
    (it is "not distinguishable from 0")."""
    v, ci = s.get("per_event_ns"), s.get("ci95")
    if v is None or v >= 0 or (ci and None not in ci and ci[1] >= 0):
        return s
    s["below_reference"] = {"median": v, "ci95": list(ci) if ci else None}
    s["per_event_ns"] = 0.0
    s["ci95"] = [0.0, 0.0] if ci else None
    return s


def compute(args) -> Computed:
    """Measures and analyses; prints nothing and writes only what the options
    name besides --json. `run` prints and writes; opskew.api returns it."""
    if args.inject is not None and args.inject < 0:
        raise UsageError("--inject must be >= 0 ns")
    check_output(args.json, inputs=workload_files(args))
    device = prepare(args)
    workload = load_workload(args, device)
    arms, skipped = build_arms(device, not args.no_export, args.inject, args.no_tracer)
    progress = progress_printer("opskew matrix")
    rounds = measure_rounds.run_rounds(workload.iteration, {k: v[0] for k, v in arms.items()}, trials=args.trials,
                        iters=args.iters, device=device, warmup_s=args.warmup, progress=progress)
    minimal = arms["minimal"][0]
    result = {"schema": SCHEMA}
    result["conditions"] = conditions(device, args.threads, minimal, {
        **run_conditions(workload, args, rounds),
        "round_order": "rotating",
    })
    result.update(analyze(rounds, arms, args.iters))
    result["skipped"] = skipped
    if result.get("rounds") and not args.no_tracer and not rounds.interrupted and rounds.error is None:
        import torch

        if torch.profiler.itt.is_available():
            if progress:
                progress.start("opskew's tracer row", f"in a process of its own, {args.trials} rounds again")
            result["rows"].append(tracer_row(args, device, not args.no_export,
                                             result.get("events_per_iter")))
        else:
            skipped["opskew"] = "this torch build has no ITT, which the tracer needs"
    if result.get("rounds"):
        result["sources"] = sources(result, device)
    return conclude(rounds, result)
