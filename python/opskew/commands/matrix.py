"""`opskew matrix`: the price of every profiler option, per event, in one run."""

from __future__ import annotations

import argparse
import sys

from opskew import _engine
from opskew.stats.estimators import estimate, gpu_side, per_event_diff
from opskew.errors import EXIT_OK, UsageError
from opskew.measure.instruments import PROFILER_OPTIONS, BusyWait, EmptyObserver, IttFloor, NativeFloor, OpskewTracer, TorchProfiler
from opskew.output import check_output, write_json
from opskew.render.units import columns, count_of, fmt_ns
from opskew.commands._common import Computed, add_workload_arguments, conclude, finish, load_workload, prepare, workload_files

SCHEMA = "opskew.matrix/1"

HELP = "measure every instrument and profiler option on one workload, with marginal costs"
DESCRIPTION = """\
Runs TARGET (default: the built-in torch.add loop) under every instrument and
torch.profiler option in one run of interleaved rounds: each round runs the
bare workload and every row once, in a rotating order, so every row is compared
with the baseline, and each option with the minimal profiler, round by round.

Rows: baseline; emit_itt with no collector (the floor of the ITT route);
RecordFunction's empty observer (the floor of anything that records shapes);
opskew's own tracer through ITT (in a second process, since its collector
must load before torch); opskew's native callback counting only (the floor of
the native route) and opskew's tracer through it; torch.profiler minimal; minimal plus each of record_shapes, with_stack,
profile_memory, with_flops, with_modules; everything on; on CUDA, CPU-only vs
CPU+CUDA activities.

For each row: the in-window added cost per event with its CI (the sign test's,
at least 95% from 6 rounds on), stop and
post-processing (key_averages) per event, export time and bytes per event, and
the marginal cost over the minimal profiler with its CI ("not
distinguishable" when that CI includes 0). A second table maps
the results to the sources of profiler overhead.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
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
    import json
    import subprocess

    from opskew.measure.instruments import OpskewTracer

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
    return out


def _ci_text(d: dict | None) -> str:
    if not d or d.get("median") is None:
        return "n/a"
    ci = d.get("ci95")
    if not ci:
        return fmt_ns(d["median"])
    return f"{fmt_ns(d['median'])} [{fmt_ns(ci[0])}, {fmt_ns(ci[1])}]"


def marginal_state(d: dict | None) -> str | None:
    """"above" or "below" when the marginal's 95% CI excludes 0, "not
    distinguishable" when it includes 0 (or there is none), "too few rounds"
    when the rounds cannot give a 95% interval (fewer than 6): a sign the
    data do not support is not printed."""
    if not d or d.get("median") is None:
        return None
    ci = d.get("ci95")
    if ci and d.get("ci_reaches_95", True) is False:
        return "too few rounds"
    if not ci or ci[0] <= 0 <= ci[1]:
        return "not distinguishable"
    return "above" if ci[0] > 0 else "below"


def _too_few(d: dict) -> str:
    """A value whose interval does not reach 95%: the interval it has, by
    its coverage, never as a 95% CI or as a verdict on 0."""
    ci, cov = d["ci95"], d.get("ci_coverage")
    level = f"{cov:.0%} interval" if cov is not None else "interval"
    return (f"{fmt_ns(d['median'])} ({level} [{fmt_ns(ci[0])}, {fmt_ns(ci[1])}]: too few rounds for a 95% CI, "
            "use --trials 6 or more)")


def marginal_text(r: dict) -> str:
    d = r.get("marginal_in_window_ns")
    state = marginal_state(d)
    if state is None:
        return ""
    if state == "too few rounds":
        return f"{_too_few(d)} ({r['marginal_over']})"
    if state == "not distinguishable":
        ci = d.get("ci95")
        span = f" [{fmt_ns(ci[0])}, {fmt_ns(ci[1])}]" if ci else ""
        return f"not distinguishable from {r['marginal_over']}{span}"
    return f"{_ci_text(d)} ({r['marginal_over']})"


def print_human(result: dict, out=None) -> None:
    out = out or sys.stdout  # looked up per call: a redirected or captured stdout is honoured
    c = result["conditions"]
    out.write(f"opskew matrix: {c['workload']['description']}\n")
    out.write(f"  torch {c['torch']}, {c['device']} ({c.get('gpu') or c['cpu']}), {count_of(c['threads'], 'thread')}; "
              f"{result.get('rounds', 0)} rounds x {c['iters']} iterations; "
              f"{result.get('events_per_iter', 0):.6g} operator events/iteration; "
              f"baseline {1e6 * result.get('baseline_per_iter_s', 0):.1f} us/iteration\n")
    if result.get("status") != "complete":
        out.write(f"  PARTIAL ({result.get('status')}): figures use the rounds completed\n")
    out.write("  medians per event; [CI]: the sign-test interval for the median, coverage >= 95% from 6\n"
              "  rounds on (the exact coverage is ci_coverage in --json)\n\n")
    rows = []
    for r in result.get("rows", []):
        if r["row"] == "baseline":
            continue
        g = lambda k: fmt_ns((r.get(k) or {}).get("median"))  # noqa: E731
        b = r.get("export_bytes_per_event")
        rows.append([r["row"], _ci_text(r.get("in_window_per_event_ns")), marginal_text(r),
                     g("stop_per_event_ns"), g("postprocess_per_event_ns"), g("export_per_event_ns"),
                     ("%.0f" % b) if b else ""])
    for line in columns(["row", "in-window W [CI]", "marginal [CI] (over)", "stop", "post", "export", "B/ev"],
                        rows):
        out.write(line + "\n")
    out.write("  in-window W: each row against the baseline; compare two rows by the marginal column,\n"
              "  which pairs the row with its reference round by round (W medians of two rows can\n"
              "  order differently from it); a marginal whose CI includes 0 is not distinguishable\n")
    for name, why in result.get("skipped", {}).items():
        out.write(f"{name}  not measured: {why}\n")
    out.write("\nrows: " + "; ".join(f"{r['row']} = {r['label']}" for r in result.get("rows", [])
                                     if r["row"] != "baseline") + "\n")
    out.write("\nWhere the time goes (by source of profiler latency), per event:\n")
    src = []
    for s in result.get("sources", []):
        d = {"median": s["per_event_ns"], "ci95": s["ci95"], "ci_reaches_95": s.get("ci_reaches_95"),
             "ci_coverage": s.get("ci_coverage")}
        if s["per_event_ns"] is None:
            val = "n/a"
        elif s["ci95"] and marginal_state(d) == "too few rounds":
            val = _too_few(d)
        elif s["ci95"] and marginal_state(d) == "not distinguishable":
            val = f"not distinguishable from 0 [{fmt_ns(s['ci95'][0])}, {fmt_ns(s['ci95'][1])}]"
        else:
            val = _ci_text(d)
        if s.get("stop_per_event_ns") is not None:
            val += f" (+ stop {fmt_ns(s['stop_per_event_ns'])})"
        src.append([s["source"], val, s["measure"]])
    for line in columns(["source", "per event [CI]", "how it is measured"], src):
        out.write("  " + line + "\n")
    if result.get("error"):
        out.write(f"\nerror: {result['error']}\n")


def compute(args) -> Computed:
    """Measures and analyses; prints nothing and writes only what the options
    name besides --json. `run` prints and writes; opskew.api returns it."""
    if args.inject is not None and args.inject < 0:
        raise UsageError("--inject must be >= 0 ns")
    check_output(args.json, inputs=workload_files(args))
    device = prepare(args)
    from opskew.measure.rounds import conditions, progress_printer, run_rounds

    workload = load_workload(args, device)
    arms, skipped = build_arms(device, not args.no_export, args.inject, args.no_tracer)
    rounds = run_rounds(workload.iteration, {k: v[0] for k, v in arms.items()}, trials=args.trials,
                        iters=args.iters, device=device, warmup_s=args.warmup,
                        progress=progress_printer("opskew matrix"))
    minimal = arms["minimal"][0]
    result = {"schema": SCHEMA}
    result["conditions"] = conditions(device, args.threads, minimal, {
        "workload": {"target": workload.name, "description": workload.description, **workload.params},
        "trials": args.trials, "iters": args.iters, "warmup_s": round(rounds.warmup_s, 3),
        "round_order": "rotating",
    })
    result.update(analyze(rounds, arms, args.iters))
    result["skipped"] = skipped
    if result.get("rounds") and not args.no_tracer and not rounds.interrupted and rounds.error is None:
        import torch

        if torch.profiler.itt.is_available():
            result["rows"].append(tracer_row(args, device, not args.no_export,
                                             result.get("events_per_iter")))
        else:
            skipped["opskew"] = "this torch build has no ITT, which the tracer needs"
    if result.get("rounds"):
        result["sources"] = sources(result, device)
    return conclude(rounds, result)


def run(args) -> int:
    rc = finish(compute(args), print_human, args.json, write_json)
    return EXIT_OK if rc is None else rc
