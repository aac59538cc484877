"""`opskew calibrate`: measure W and delta for this machine, torch and instrument."""

from __future__ import annotations

import argparse
import sys
import time

from ..errors import EXIT_OK, UsageError
from ..report import fmt_ns, write_json

HELP = "measure W and delta per instrument on this machine and store them for `opskew correct`"
DESCRIPTION = """\
Measures, for each instrument configuration, the two constants of the overhead
model (DESIGN.md):

  W      the wall time the instrument adds per event (in-window, paired
         against the bare micro-workload, with a 95% CI);
  delta  the part of it inside the event's own recorded interval: the leaf
         operator's duration in the instrument's trace minus its duration in
         opskew's tracer, plus opskew's own self-calibrated delta (about 10 ns).

The micro-workload is torch.add on 1-element tensors, 1000 calls per
iteration, 1 thread unless --threads says otherwise. W differs between
operators and workloads (arguments to box, Python frames under with_stack,
cache effects): with TARGET, W is measured on your workload itself and the
calibration is stored under that workload's name; pass its file to
`opskew correct --calibration`. The same run injects a
known cost (busy-wait:NS against busy-wait:0, default 1000 ns) and stores
whether the method recovered it within 20%: a calibration is only as good as
the method that made it.

Calibrations are stored in $OPSKEW_CACHE_DIR, else $XDG_CACHE_HOME/opskew, else
~/.cache/opskew, keyed by machine, torch version, instrument, configuration,
device and threads. --show lists them.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", nargs="?", metavar="TARGET",
                   help="calibrate W on this workload (file.py:function or package.module:function) "
                   "instead of the micro-workload; delta and the validation still use the micro-workload")
    p.add_argument("--setup", metavar="NAME", help="setup callable in TARGET's module")
    p.add_argument("--config", action="append", metavar="OPT[,OPT]",
                   help="a torch.profiler configuration to calibrate: minimal, or options joined by "
                   "commas (record_shapes,with_stack); repeatable (default: minimal)")
    p.add_argument("--no-tracer", action="store_true", help="do not calibrate opskew's tracer")
    p.add_argument("--show", action="store_true", help="list stored calibrations and exit")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"))
    p.add_argument("--threads", type=int, default=1, metavar="N")
    p.add_argument("--trials", type=int, default=9, metavar="N")
    p.add_argument("--iters", type=int, default=10, metavar="N")
    p.add_argument("--calls", type=int, default=1000, metavar="N")
    p.add_argument("--numel", type=int, default=1, metavar="N")
    p.add_argument("--warmup", type=float, default=0.3, metavar="SECONDS")
    p.add_argument("--inject", type=int, default=1000, metavar="NS",
                   help="known cost injected to validate the method (default: 1000; 0 skips)")
    p.add_argument("--json", metavar="PATH", help="write the calibrations as JSON, - for stdout")


def _configs(specs):
    from ..instruments import PROFILER_OPTIONS

    out = {}
    for spec in specs or ["minimal"]:
        opts = [] if spec == "minimal" else [o for o in spec.split(",") if o]
        bad = [o for o in opts if o not in PROFILER_OPTIONS]
        if bad:
            raise UsageError(f"unknown profiler option(s) in --config {spec!r}: {', '.join(bad)}")
        out["+".join(sorted(opts)) or "minimal"] = {o: True for o in opts}
    return out


def show(out=sys.stdout) -> int:
    from ..calibration import cache_dir, stored

    cals = stored()
    out.write(f"calibrations in {cache_dir()}: {len(cals)}\n")
    for cal in cals:
        k = cal["key"]
        w, d = cal["w_ns"], cal["delta_ns"]
        v = cal.get("validation") or {}
        out.write(f"  {k['instrument']:15s} {k['config']:28s} W {fmt_ns(w['median'])} "
                  f"[{fmt_ns(w['ci95'][0])}, {fmt_ns(w['ci95'][1])}]  delta {fmt_ns(d['median'])}  "
                  f"torch {k['torch']}, {k['device']}, {k['threads']} thread(s), {cal['date']}"
                  + ("" if not v else f", validation {'ok' if v.get('ok') else 'FAILED'}") + "\n")
        out.write(f"      {cal['_path']}\n")
    return EXIT_OK


def run(args) -> int:
    if args.show:
        return show()
    if args.trials < 2 or args.iters < 1 or args.calls < 1 or args.numel < 1 or args.threads < 1:
        raise UsageError("--trials must be >= 2 and --iters, --calls, --numel, --threads >= 1")
    if args.inject < 0:
        raise UsageError("--inject must be >= 0")
    configs = _configs(args.config)
    if not args.no_tracer:
        from ..tracing import arrange

        arrange()  # before torch: the tracer's collector must be configured first
    from ._common import prepare

    device = prepare(args)
    import torch

    from .. import _engine
    from ..analysis import per_event_diff
    from ..calibration import SCHEMA, make_key, store
    from ..instruments import BusyWait, OpskewTracer, TorchProfiler
    from ..measure import progress_printer, run_rounds
    from ..workload import load_target

    use_tracer = not args.no_tracer and torch.profiler.itt.is_available()
    arms = {"baseline": None}
    for name, opts in configs.items():
        arms[name] = TorchProfiler(device, **opts)
    if use_tracer:
        arms["opskew"] = OpskewTracer(export=False)
    if args.inject:
        arms["busy-wait:0"] = BusyWait(0)
        arms[f"busy-wait:{args.inject}"] = BusyWait(args.inject)
    wl = load_target(None, device=device, calls=args.calls, numel=args.numel)
    rounds = run_rounds(wl.iteration, arms, trials=args.trials, iters=args.iters, device=device,
                        warmup_s=args.warmup, progress=progress_printer("opskew calibrate"))
    if rounds.error is not None or rounds.interrupted or rounds.n < 2:
        raise UsageError("calibration did not complete (interrupted or the micro-workload failed); "
                         "nothing was stored")
    user = None
    if args.target:
        from ._common import load_workload

        user = load_workload(args, device)
        u_arms = {k: v for k, v in arms.items() if not k.startswith("busy-wait")}
        u_rounds = run_rounds(user.iteration, u_arms, trials=args.trials, iters=args.iters,
                              device=device, warmup_s=args.warmup,
                              progress=progress_printer("opskew calibrate (TARGET)"))
        if u_rounds.error is not None or u_rounds.interrupted or u_rounds.n < 2:
            raise UsageError(f"calibration on {args.target} did not complete "
                             f"({u_rounds.error or 'interrupted'}); nothing was stored")

    def w_of(name, ref=None, src=None):
        src = src or rounds
        trials = src.trials[name]
        ev = [t.op_events for t in trials]
        ref_walls = [t.window.wall_s for t in src.trials[ref or "baseline"]]
        return per_event_diff(ref_walls, [t.window.wall_s for t in trials], ev)

    def leaf_per_call(name):
        vals = [t.reported_op_self_s / t.op_events for t in rounds.trials[name]
                if t.reported_op_self_s and t.op_events]
        return _engine.quantile(vals, 0.5) * 1e9 if vals else None

    validation = None
    if args.inject:
        got = w_of(f"busy-wait:{args.inject}", "busy-wait:0")
        validation = {"injected_ns": args.inject, "recovered_ns": got["median"], "ci95": got["ci95"],
                      "ok": abs(got["median"] - args.inject) <= 0.2 * args.inject,
                      "method": "busy-wait:NS against busy-wait:0 in the same rounds"}
    tracer_delta = tracer_leaf = None
    if use_tracer:
        tr = rounds.trials["opskew"]
        tracer_leaf = leaf_per_call("opskew")
        # The tracer's self-calibration, taken at each session start; the median.
        tracer_delta = _engine.quantile([t.extra.get("delta_ns", 10.0) for t in tr], 0.5)
    date = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    common = {"schema": SCHEMA, "date": date, "workload": (user or wl).description,
              "rounds": rounds.n, "iters": args.iters, "validation": validation}
    results = []
    for name in list(configs) + (["opskew"] if use_tracer else []):
        w = w_of(name, src=u_rounds if user else None)
        if name == "opskew":
            key = make_key("opskew", "itt", torch.__version__, device, args.threads)
            delta = {"median": tracer_delta, "method": "the tracer's self-calibration (collector only)"}
        else:
            key = make_key("torch.profiler", name, torch.__version__, device, args.threads)
            leaf = leaf_per_call(name)
            if tracer_leaf is not None and leaf is not None:
                dv = min(max(leaf - tracer_leaf + tracer_delta, 0.0), max(w["median"], 0.0))
                delta = {"median": dv, "leaf_reported_ns": leaf, "leaf_in_opskew_ns": tracer_leaf,
                         "method": "leaf duration in this trace - in opskew's trace + opskew's delta, "
                                   "clamped to [0, W]"}
            else:
                delta = {"median": 0.0, "method": "no tracer to compare with: delta assumed 0"}
        key["workload"] = user.name if user else "builtin:add"
        cal = dict(common, key=key, w_ns={k: w[k] for k in ("median", "ci95", "ci_coverage")},
                   delta_ns=delta)
        cal["_path"] = store(cal)
        results.append(cal)
    print(f"opskew calibrate: {(user or wl).description}; torch {torch.__version__}, {device}, "
          f"{torch.get_num_threads()} thread(s); {rounds.n} rounds x {args.iters} iterations")
    if validation:
        print(f"  validation: injected {args.inject} ns, recovered {fmt_ns(validation['recovered_ns'])} "
              f"[{fmt_ns(validation['ci95'][0])}, {fmt_ns(validation['ci95'][1])}]: "
              + ("ok (within 20%)" if validation["ok"] else "NOT within 20%: the machine is too noisy "
                 "for a trustworthy calibration; rerun with more --trials"))
    for cal in results:
        k, w, d = cal["key"], cal["w_ns"], cal["delta_ns"]
        print(f"  {k['instrument']:15s} {k['config']:28s} W {fmt_ns(w['median'])} "
              f"[{fmt_ns(w['ci95'][0])}, {fmt_ns(w['ci95'][1])}]  delta {fmt_ns(d['median'])}")
        print(f"      stored: {cal['_path']}")
    if args.json:
        write_json({"schema": "opskew.calibrate/1", "calibrations": results}, args.json)
    return EXIT_OK
