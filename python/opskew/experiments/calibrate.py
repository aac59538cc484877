"""`opskew calibrate`: measure W and delta for this machine, torch and instrument.

The measurement, which stores the calibrations it makes (calibration.store);
the text is render.calibrate's, the command line cli.commands.calibrate's."""

from __future__ import annotations

import time

from opskew import _engine
from opskew.calibration.runner import python_call_rounds, python_event_constants
from opskew.calibration.store import SCHEMA, for_trace, make_key, store, validate
from opskew.errors import UsageError
from opskew.experiments.common import load_workload, prepare, workload_files
from opskew.measure import rounds as measure_rounds
from opskew.measure.instruments import BusyWait, OpskewTracer, TorchProfiler
from opskew.vocab import PROFILER_OPTIONS
from opskew.measure.rounds import make_window, progress_printer
from opskew.measure.workload import BUILTIN, SETUP_RULE, STEPS, builtin_step, leaf_panel, load_target
from opskew.options import Spec, declared, finite_float
from opskew.output import check_output
from opskew.stats.estimators import operator_event_cost, per_event_diff
from opskew.stats.notes import note
from opskew.tracer import native
from opskew.tracer.session import arrange



def declare(p: Spec) -> None:
    """The options of `opskew calibrate` (the command line's and the API's)."""
    p.add_argument("target", nargs="?", metavar="TARGET",
                   help="calibrate W on this workload (file.py:function or package.module:function) "
                   "instead of the micro-workload; delta and the validation still use the micro-workload")
    p.add_argument("--setup", metavar="NAME", help="setup callable in TARGET's module, run once; its result is "
                   "passed to TARGET: " + SETUP_RULE)
    p.add_argument("--config", action="append", metavar="OPT[,OPT]",
                   help="a torch.profiler configuration to calibrate: minimal, or options joined by "
                   "commas (record_shapes,with_stack); repeatable (default: minimal)")
    p.add_argument("--no-tracer", action="store_true", help="do not calibrate opskew's tracer")
    p.add_argument("--show", action="store_true", help="list stored calibrations and exit")
    p.add_argument("--clear", action="store_true",
                   help="remove the stored calibrations (only the files calibrate wrote) and exit")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"))
    p.add_argument("--threads", type=int, default=1, metavar="N")
    p.add_argument("--trials", type=int, default=15, metavar="N",
                   help="paired rounds (default: 15; the 96.5%% CI of W then survives 3 disturbed rounds)")
    p.add_argument("--iters", type=int, default=10, metavar="N",
                   help="iterations per window of the micro-workloads (default: 10)")
    p.add_argument("--window-ms", type=finite_float, default=40.0, metavar="MS",
                   help="with TARGET: iterations per window are chosen so that a bare window lasts "
                   "at least this long (default: 40)")
    p.add_argument("--calls", type=int, default=1000, metavar="N")
    p.add_argument("--numel", type=int, default=1, metavar="N")
    p.add_argument("--warmup", type=finite_float, default=0.3, metavar="SECONDS")
    p.add_argument("--inject", type=int, default=1000, metavar="NS",
                   help="known cost injected to validate the method (default: 1000; 0 skips)")
    p.add_argument("--json", metavar="PATH", help="write the calibrations as JSON, - for stdout")


SPEC, Options = declared("calibrate", declare)


def _configs(specs):
    out = {}
    for spec in specs or ["minimal"]:
        opts = [] if spec == "minimal" else [o.strip() for o in spec.split(",") if o.strip()]
        if spec != "minimal" and not opts:
            raise UsageError(f"--config {spec!r} names no profiler option: give minimal or options such as "
                             "record_shapes,with_stack")
        bad = [o for o in opts if o not in PROFILER_OPTIONS]
        if bad:
            raise UsageError(f"unknown profiler option(s) in --config {spec!r}: {', '.join(bad)}")
        out["+".join(sorted(opts)) or "minimal"] = {o: True for o in opts}
    return out


# A constant whose 95% CI is wider than this share of it, each side, is too
# uncertain to correct with: the machine was busy while it was measured.
NOISY_HALF_WIDTH = 0.2


def _constant(w: dict) -> dict:
    return {k: w[k] for k in ("median", "ci95", "ci_coverage")}


# A window of the built-in steps lasts at least this long: about 500
# training steps, whose export the rounds count events in.
STEP_WINDOW_S = 0.02


def _noisy(cal: dict) -> dict | None:
    """Why the calibration is too uncertain to trust, as a note
    (stats.notes, code "calibration_noisy"; render.notes says it), or None:
    each constant whose interval is no 95% CI (too few rounds) or wider
    than NOISY_HALF_WIDTH of it each side, and whether the machine was busy
    (the interval too wide) rather than the rounds too few."""
    found, busy = [], False
    steps = cal.get("w_by_step") or {}
    for label, c in (("W", cal.get("w_ns")), ("W (inference step)", steps.get("inference")),
                     ("W_py", cal.get("w_py_ns"))):
        if not c:
            continue
        lo, hi = c["ci95"]
        m = c["median"]
        cov = c.get("ci_coverage")
        if cov is not None and cov < 0.95:
            # Too few rounds: the interval is no 95% CI, wide or not.
            found.append({"constant": label, "ci95": [lo, hi], "median": m, "coverage": cov})
        elif m <= 0 or (hi - lo) / 2 > NOISY_HALF_WIDTH * m:
            busy = True
            found.append({"constant": label, "ci95": [lo, hi], "median": m, "coverage": cov})
    if not found:
        return None
    return note("calibration_noisy", constants=found, busy=busy, half_width=NOISY_HALF_WIDTH)


def _iters_for(iteration, window_s: float, device: str) -> int:
    """Iterations whose bare run lasts at least `window_s` (after a warm-up)."""
    for _ in range(3):
        iteration()
    n = 1
    while True:
        t0 = time.perf_counter()
        make_window(iteration, n, device)()
        took = time.perf_counter() - t0
        if took >= window_s or n >= 1 << 20:
            return n
        n = max(n * 2, int(n * window_s / max(took, 1e-9) * 1.1) + 1)


def compute(args) -> dict:
    """Measures, and stores each calibration that passes validation; prints
    nothing. Returns the run: its conditions and "calibrations" (what
    --json writes)."""
    if args.trials < 2 or args.iters < 1 or args.calls < 1 or args.numel < 1 or args.threads < 1:
        raise UsageError("--trials must be >= 2 and --iters, --calls, --numel, --threads >= 1")
    if args.inject < 0:
        raise UsageError("--inject must be >= 0")
    if not args.window_ms > 0:
        raise UsageError("--window-ms must be > 0")
    check_output(args.json, inputs=workload_files(args))  # before the rounds, not after (docs/outputs.md)
    configs = _configs(args.config)
    if not args.no_tracer:
        arrange()  # before torch: the tracer's collector must be configured first
    device = prepare(args)
    import torch

    def profiler(opts):
        # Events counted by the C reader over the export: long windows stay cheap.
        return TorchProfiler(device, count="trace", **opts)

    def complete(r, what):
        if r.error is not None or r.interrupted or r.n < 2:
            raise UsageError(f"calibration on {what} did not complete "
                             f"({r.error or 'interrupted'}); nothing was stored")
        return r

    use_tracer = not args.no_tracer and torch.profiler.itt.is_available()
    arms = {"baseline": None}
    for name, opts in configs.items():
        arms[name] = profiler(opts)
    if use_tracer:
        arms["opskew"] = OpskewTracer(export=False)
    # The native collector, keyed ("opskew", "native"): W in-window like the
    # others, delta from its own self-calibration.
    use_native = False
    if not args.no_tracer:
        use_native = native.shim(torch)[0] is not None
    if use_native:
        arms["opskew-native"] = OpskewTracer(export=False, instrument="native")
    if args.inject:
        arms["busy-wait:0"] = BusyWait(0)
        arms[f"busy-wait:{args.inject}"] = BusyWait(args.inject)
    wl = load_target(None, device=device, calls=args.calls, numel=args.numel)
    rounds = complete(measure_rounds.run_rounds(wl.iteration, arms, trials=args.trials, iters=args.iters,
                                                device=device, warmup_s=args.warmup,
                                                progress=progress_printer("opskew calibrate")),
                      "the micro-workload")
    # delta: the leaves' duration against the tracer's on a panel of leaf
    # operators with different inputs (workload.leaf_panel), in rounds of
    # their own; torch.add's own figure is kept beside it.
    panel_rounds = panel_wl = None
    if configs and (use_tracer or use_native):
        panel_wl = leaf_panel(device, args.calls)
        p_arms = {n: arms[n] for n in configs}
        p_arms["opskew" if use_tracer else "opskew-native"] = arms["opskew" if use_tracer else "opskew-native"]
        panel_rounds = complete(measure_rounds.run_rounds(panel_wl.iteration, p_arms, trials=args.trials,
                                                          iters=args.iters, device=device, warmup_s=args.warmup,
                                                          progress=progress_printer("opskew calibrate (leaf panel)")),
                                "the leaf panel")
    # with_stack: the Python tracer's events, priced on empty Python calls.
    py_configs = [n for n, o in configs.items() if o.get("with_stack")]
    py_rounds = py_description = None
    if py_configs:
        py_rounds, py_description = python_call_rounds(
            device, {n: configs[n] for n in py_configs}, calls=args.calls, trials=args.trials,
            iters=args.iters, warmup_s=args.warmup, progress=progress_printer("opskew calibrate (Python calls)"))
    user = u_rounds = None
    u_iters = args.iters
    # No TARGET: W of each torch.profiler configuration on the built-in
    # steps (measure.workload.ModelStep, the one opskew.profile's model
    # prices), a training step and an inference one, in rounds of their own;
    # torch.add's W stays beside them (a calibration's "w_by_step").
    step_rounds = {}
    if not args.target and configs:
        for kind in STEPS:
            st = builtin_step(device, kind)
            s_iters = max(args.iters, _iters_for(st.iteration, STEP_WINDOW_S, device))
            s_arms = {"baseline": None, **{n: profiler(o) for n, o in configs.items()}}
            step_rounds[kind] = (st, s_iters, complete(measure_rounds.run_rounds(
                st.iteration, s_arms, trials=args.trials, iters=s_iters, device=device, warmup_s=args.warmup / 3,
                progress=progress_printer(f"opskew calibrate ({kind} step)")), st.description))
    if args.target:
        user = load_workload(args, device)
        u_iters = max(args.iters, _iters_for(user.iteration, args.window_ms / 1e3, device))
        u_arms = {"baseline": None, **{n: profiler(o) for n, o in configs.items()}}
        if use_tracer:
            u_arms["opskew"] = arms["opskew"]
        if use_native:
            u_arms["opskew-native"] = arms["opskew-native"]
        u_rounds = complete(measure_rounds.run_rounds(user.iteration, u_arms, trials=args.trials, iters=u_iters,
                                                      device=device, warmup_s=args.warmup,
                                                      progress=progress_printer("opskew calibrate (TARGET)")),
                            args.target)

    def walls(src, name):
        return [t.window.wall_s for t in src.trials[name]]

    def w_py_of(name):
        return python_event_constants(py_rounds, name, args.iters * args.calls)

    def leaf_per_call(name, src=None):
        vals = [t.reported_op_self_s / t.op_events for t in (src or rounds).trials[name]
                if t.reported_op_self_s and t.op_events]
        return _engine.quantile(vals, 0.5) * 1e9 if vals else None

    def per_operator(name, src):
        """Each operator's duration per call (ns) under arm `name`: the median
        over the trials that recorded it (at least half of them)."""
        vals = {}
        for t in src.trials[name]:
            for op, (calls, self_ns) in (t.extra.get("op_self_ns") or {}).items():
                if calls:
                    vals.setdefault(op, []).append(self_ns / calls)
        need = max(1, len(src.trials[name]) // 2)
        return {op: _engine.quantile(v, 0.5) for op, v in vals.items() if len(v) >= need}

    validation = None
    if args.inject:
        got = per_event_diff(walls(rounds, "busy-wait:0"), walls(rounds, f"busy-wait:{args.inject}"),
                             [t.op_events for t in rounds.trials[f"busy-wait:{args.inject}"]])
        validation = {"injected_ns": args.inject, "recovered_ns": got["median"], "ci95": got["ci95"],
                      "ok": abs(got["median"] - args.inject) <= 0.2 * args.inject,
                      "method": "busy-wait:NS against busy-wait:0 in the same rounds"}
    tracer_delta = tracer_leaf = None
    tracers = (["opskew"] if use_tracer else []) + (["opskew-native"] if use_native else [])
    # The tracer's self-calibration, taken at each session start; the median.
    own_delta = {n: _engine.quantile([t.extra.get("delta_ns", 10.0) for t in rounds.trials[n]], 0.5)
                 for n in tracers}
    panel_tracer = None
    if tracers:
        tracer_leaf = leaf_per_call(tracers[0])
        tracer_delta = own_delta[tracers[0]]
        if panel_rounds is not None:
            panel_tracer = leaf_per_call(tracers[0], panel_rounds)
    date = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    src = u_rounds or rounds
    common = {"schema": SCHEMA, "date": date, "workload": (user or wl).description,
              "rounds": src.n, "iters": u_iters if user else args.iters, "validation": validation}
    results = []
    for name in list(configs) + tracers:
        extra = {}
        w_py = 0.0
        if name in py_configs:
            wp, dp = w_py_of(name)
            w_py = max(wp["median"], 0.0)
            extra = {"w_py_ns": {k: wp[k] for k in ("median", "ci95", "ci_coverage")}, "delta_py_ns": dp,
                     "python_workload": py_description}
        w = operator_event_cost(src.windows("baseline"), src.trials[name], w_py)
        by_step = {}
        if name in configs and step_rounds:
            by_step["micro"] = dict(_constant(w), workload=wl.description)
            for kind, (st, s_iters, sr) in step_rounds.items():
                sw = operator_event_cost(sr.windows("baseline"), sr.trials[name], w_py)
                by_step[kind] = dict(_constant(sw), workload=st.description, iters=s_iters, rounds=sr.n,
                                     op_events_per_iter=_engine.quantile([t.op_events for t in sr.trials[name]],
                                                                         0.5) / s_iters)
            w = by_step["training"]
        if name in tracers:
            key = make_key("opskew", "itt" if name == "opskew" else "native", torch.__version__, device,
                           args.threads)
            delta = {"median": min(max(own_delta[name], 0.0), max(w["median"], 0.0)),
                     "self_calibrated_ns": own_delta[name],
                     "method": "the tracer's self-calibration (collector only), clamped to [0, W]"}
        else:
            key = make_key("torch.profiler", name, torch.__version__, device, args.threads)
            leaf = leaf_per_call(name)
            wm = max(w["median"], 0.0)
            add = None
            if tracer_leaf is not None and leaf is not None:
                add = {"median": min(max(leaf - tracer_leaf + tracer_delta, 0.0), wm), "leaf_reported_ns": leaf,
                       "leaf_in_opskew_ns": tracer_leaf}
            p_leaf = leaf_per_call(name, panel_rounds) if panel_rounds is not None else None
            if p_leaf is not None and panel_tracer is not None:
                # Each panel operator's own delta: what the instrument adds
                # inside an operator depends on the operator (docs/correct.md);
                # their range is the verdict's interval for delta.
                mine, ref = per_operator(name, panel_rounds), per_operator(tracers[0], panel_rounds)
                by_op = {op: min(max(mine[op] - ref[op] + tracer_delta, 0.0), wm)
                         for op in sorted(set(mine) & set(ref))}
                delta = {"median": min(max(p_leaf - panel_tracer + tracer_delta, 0.0), wm),
                         "leaf_reported_ns": p_leaf, "leaf_in_opskew_ns": panel_tracer,
                         "by_operator": by_op,
                         "range": [min(by_op.values()), max(by_op.values())] if by_op else None,
                         "workload": panel_wl.description, "torch_add": add,
                         "method": "the leaf panel's mean operator duration in this trace - in opskew's trace "
                                   "(medians over rounds) + opskew's delta, clamped to [0, W]"}
            elif add is not None:
                delta = dict(add, method="leaf duration in this trace - in opskew's trace + opskew's delta, "
                                         "clamped to [0, W]")
            else:
                delta = {"median": 0.0, "method": "no tracer to compare with: delta assumed 0"}
        key["workload"] = user.name if user else (STEPS["training"] if by_step else BUILTIN)
        events = [t.op_events for t in src.trials[name]]
        cal = dict(common, key=key, w_ns=_constant(w), delta_ns=delta,
                   op_events_per_iter=_engine.quantile(events, 0.5) / common["iters"], **extra)
        if by_step:
            # W per step kind: `opskew correct` takes the training step's for
            # a trace with backward nodes, the inference step's for one
            # without (calibration.store.for_trace).
            cal["w_by_step"] = by_step
            cal["op_events_per_iter"] = by_step["training"]["op_events_per_iter"]
            cal["workload"] = by_step["training"]["workload"]
        cal["noisy"] = _noisy(cal)
        if not cal["op_events_per_iter"]:
            # W per event of no event: the whole added time of the window
            # (milliseconds), which no rerun would make an event's cost.
            cal["noisy"] = None
            cal["_path"] = None
            cal["rejected"] = ("the instrument recorded no operator events on this workload, so W per event is "
                               "undefined; calibrate a workload that runs torch operators on this thread")
            cal["rerun_helps"] = False
            results.append(cal)
            continue
        for kind in ("inference",) if by_step else ():
            # The training step's W is w_ns, validated below; the inference
            # step's is checked as a trace would take it, and left out
            # (correct then takes w_ns) where it is no usable constant.
            try:
                for_trace(cal, backward=False)
            except ValueError as exc:
                cal["w_by_step_rejected"] = {kind: str(exc)}
                del by_step[kind]
        try:
            validate(cal)
        except ValueError as exc:
            # `correct` would skip it anyway: say why now, and keep the cache clean.
            cal["_path"] = None
            cal["rejected"] = str(exc)
        else:
            cal["_path"] = store(cal)
        results.append(cal)
    return {"workload": (user or wl).description, "torch": torch.__version__, "device": device,
            "threads": torch.get_num_threads(), "rounds": src.n, "iters": common["iters"], "inject": args.inject,
            "validation": validation, "calibrations": results}
