"""`opskew sweep`: the skew curve over operator size, and the crossover size.

The measurement and its analysis; the text and plots are render.sweep's, the
command line cli.commands.sweep's."""

from __future__ import annotations

import inspect
import math
import os

from opskew import _engine
from opskew.errors import UsageError, WorkloadError
from opskew.experiments.common import Computed, prepare, workload_files
from opskew.measure import rounds as measure_rounds
from opskew.measure.instruments import OpskewTracer, TorchProfiler
from opskew.vocab import PROFILER_OPTIONS, SWEEP_ANNOTATION as ANNOTATION
from opskew.measure.rounds import conditions, make_window, progress_printer, user_traceback
from opskew.measure.workload import load_module
from opskew.options import Spec, declared, finite_float
from opskew.output import check_output
from opskew.results.views import lazy
from opskew.stats.estimators import estimate, per_event_diff
from opskew.tracer import native
from opskew.tracer.session import arrange

plot_unavailable = lazy("plots.plot_unavailable")
plot = lazy("sweep.plot")


SCHEMA = "opskew.sweep/1"
def declare(p: Spec) -> None:
    """The options of `opskew sweep` (the command line's and the API's)."""
    p.add_argument("--op", action="append", metavar="OP",
                   help="add, mul, matmul or file.py:function (repeatable; default: add)")
    p.add_argument("--instrument", action="append", metavar="SPEC",
                   help="torch (minimal torch.profiler), torch:OPT[,OPT] (with options, e.g. "
                   "torch:record_shapes,with_stack), opskew (the C tracer through ITT) or opskew-native "
                   "(through opskew's native callback); repeatable "
                   "(default: torch, torch:record_shapes,with_stack, and opskew)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"))
    p.add_argument("--threads", type=int, default=1, metavar="N")
    p.add_argument("--sizes", metavar="N[,N...]", help="explicit sizes (elements per tensor)")
    p.add_argument("--max-ms", type=finite_float, default=1.0,
                   help="stop growing the size once one call takes this long (default: 1)")
    p.add_argument("--trials", type=int, default=6, metavar="N",
                   help="rounds per size (default: 6, the fewest whose sign-test CI reaches 95%%)")
    p.add_argument("--window-ms", type=finite_float, default=5.0,
                   help="target length of one timed window (default: 5)")
    p.add_argument("--out", default="opskew-sweep", metavar="PREFIX",
                   help="plot files PREFIX.png and PREFIX.svg (default: opskew-sweep)")
    p.add_argument("--no-plot", action="store_true", help="do not draw the plot")
    p.add_argument("--json", metavar="PATH", help="write the table as JSON (schema opskew.sweep/1), - for stdout")


SPEC, Options = declared("sweep", declare)


def _op_factory(spec: str, device: str):
    """Returns (name, factory(size) -> zero-arg callable, size_label)."""
    import torch

    if spec == "add":
        def make(n):
            a, b = torch.ones(n, device=device), torch.ones(n, device=device)
            return lambda: torch.add(a, b)
        return "add", make
    if spec == "mul":
        def make(n):
            a, b = torch.ones(n, device=device), torch.ones(n, device=device)
            return lambda: torch.mul(a, b)
        return "mul", make
    if spec == "matmul":
        def make(n):
            k = max(1, int(round(math.sqrt(n))))
            a, b = torch.ones(k, k, device=device), torch.ones(k, k, device=device)
            return lambda: torch.matmul(a, b)
        return "matmul", make
    if ":" in spec:
        modspec, _, fn = spec.rpartition(":")
        mod = load_module(modspec)
        f = getattr(mod, fn, None)
        if not callable(f):
            raise UsageError(f"{modspec} has no callable named {fn!r}")
        _check_signature(spec, f)

        def make(n):
            call = f(n)
            if not callable(call):
                raise UsageError(f"{spec}({n}) returned {type(call).__name__}, not a zero-argument callable")
            _check_signature(spec, call, inner=True)
            return call
        return spec, make
    raise UsageError(f"unknown --op {spec!r}: expected add, mul, matmul or file.py:function")


def _check_signature(spec: str, f, inner: bool = False) -> None:
    """A user op is called as f(size), and what it returns as call(): one
    that cannot be called so is bad input (exit 2), refused before it runs
    rather than found as a TypeError inside opskew's timing loop."""
    try:
        sig = inspect.signature(f)
    except (TypeError, ValueError):  # a builtin without a signature: try it
        return
    try:
        sig.bind() if inner else sig.bind(1)
    except TypeError as exc:
        fn = spec.rpartition(":")[2]
        what = (f"{fn}(size) returned a callable that is called with no argument"
                if inner else f"the function is called as {fn}(size)")
        raise UsageError(f"--op {spec}: {what}, but its signature {sig} cannot take that ({exc})") from None


def _instruments(specs, device):
    out = {}
    for spec in specs:
        if spec == "opskew":
            import torch

            if not torch.profiler.itt.is_available():
                raise UsageError("--instrument opskew needs a torch build with ITT (x86-64)")
            out["opskew"] = OpskewTracer(export=False)
        elif spec == "opskew-native":
            import torch

            why = native.shim(torch)[1]
            if why:
                raise UsageError(f"--instrument opskew-native: the native collector is unavailable ({why})")
            out[spec] = OpskewTracer(export=False, instrument="native")
        elif spec == "torch" or spec.startswith("torch:"):
            opts = [o for o in spec.partition(":")[2].split(",") if o]
            bad = [o for o in opts if o not in PROFILER_OPTIONS]
            if bad:
                raise UsageError(f"unknown profiler option(s) {', '.join(bad)} in {spec!r}")
            out[spec] = TorchProfiler(device, **{o: True for o in opts})
        else:
            raise UsageError(f"unknown instrument {spec!r}: expected torch, torch:OPT[,OPT], opskew or opskew-native")
    return out


def _sizes(args):
    if args.sizes:
        try:
            sizes = [int(x) for x in args.sizes.split(",")]
        except ValueError:
            raise UsageError(f"bad --sizes {args.sizes!r}: expected whole numbers separated by commas") from None
        if not sizes or min(sizes) < 1:
            raise UsageError("--sizes must be positive")
        return sorted(set(sizes)), False
    return [4 ** k for k in range(0, 14)], True  # 1 .. 67M elements, cut by --max-ms


def _probe(call, device) -> float:
    """Rough seconds per call, to size the timed window."""
    n = 1
    while True:
        w = make_window(call, n, device)
        w()
        t = min(w().wall_s for _ in range(3))
        if t > 2e-3 or n >= 4096:
            return t / n
        n *= 4


def _crossover(points, key):
    """The size below which the instrument's added cost per call exceeds the
    operator's duration: the last measured size where it does, followed by one
    where it does not, log-interpolated between them. Taking the last crossing
    keeps one noisy small size from hiding it. None when it never happens in
    the measured range (or the added cost exceeds the operator throughout)."""
    ratios = [(p["size"], p["added_per_call_s"] / p[key]) for p in points
              if p.get("added_per_call_s") is not None and p.get(key)]
    for i in range(len(ratios) - 2, -1, -1):
        (s0, r0), (s1, r1) = ratios[i], ratios[i + 1]
        if r0 >= 1.0 > r1:
            if r1 <= 0:
                return float(s1)
            f = math.log(r0) / (math.log(r0) - math.log(r1))
            return math.exp(math.log(s0) + f * (math.log(s1) - math.log(s0)))
    return None


def _loop(call, calls: int):
    """One window's calls inside one record_function annotation. Without an
    instrument the annotation costs one inactive RecordFunction per window."""
    import torch

    rf = torch.profiler.record_function

    def loop():
        with rf(ANNOTATION):
            for _ in range(calls):
                call()
    return loop


def noisy_why(w: dict) -> str | None:
    """Why a point's W cannot be read (None when it can): its sign-test CI
    includes 0, or the rounds are too few for a 95% CI. At large sizes the
    call's own variation (page faults of large outputs, a neighbour on the
    machine) is microseconds to milliseconds per call, against an instrument
    cost of a few hundred ns; the CI of a median over N rounds is then two
    of the N differences themselves, and one disturbed round can be an end."""
    ci = w.get("ci95")
    if not w.get("ci_reaches_95", True):
        return f"{w.get('n', '?')} rounds cannot give a 95% CI"
    if ci and ci[0] <= 0 <= ci[1]:
        return "W's CI includes 0: the call's own variation hides the instrument at this size"
    return None


def point_figures(rounds, instruments, calls: int) -> dict:
    """One size's figures from its rounds: per instrument the added cost, the
    leaf's reported time and the enclosing annotation's."""
    base = [w.wall_s for w in rounds.windows("baseline")]
    true_loop = _engine.quantile(base, 0.5)
    pt = {"calls_per_trial": calls, "true_per_call_s": true_loop / calls, "by": {}}
    for iname in instruments:
        trials = rounds.trials[iname]
        ann = [t.extra.get("annotations", {}).get(ANNOTATION) for t in trials]
        ann_calls = [a["calls"] if a else 0 for a in ann]
        ev = [t.op_events for t in trials]
        walls = [t.window.wall_s for t in trials]
        # W per event over every event the instrument recorded, the annotation's included.
        w = per_event_diff(base, walls, [e + a for e, a in zip(ev, ann_calls)])
        epc = _engine.quantile(ev, 0.5) / calls
        rep = [t.reported_op_self_s for t in trials if t.reported_op_self_s is not None]
        d = {
            "events_per_call": epc,
            "profiled_per_call_s": _engine.quantile(walls, 0.5) / calls,
            "reported_per_call_s": (_engine.quantile(rep, 0.5) / calls) if rep else None,
            "added_per_event_ns": {k: w[k] for k in ("median", "ci95", "ci_coverage", "ci_reaches_95", "n")},
            "added_per_call_s": w["median"] * 1e-9 * epc,
            "added_per_call_ci95_s": [x * 1e-9 * epc for x in w["ci95"]],
        }
        d["noisy"] = noisy_why(d["added_per_event_ns"])
        d["inflation"] = d["profiled_per_call_s"] / pt["true_per_call_s"]
        if d["reported_per_call_s"]:
            d["reported_over_true"] = d["reported_per_call_s"] / pt["true_per_call_s"]
        if all(ann):
            # The enclosing annotation's skew: what the trace shows for the
            # calls' annotation over the true time of the same calls, round
            # by round (the median of the rounds' ratios, with its CI).
            r = estimate([a["total_s"] / b for a, b in zip(ann, base)])
            d["enclosing"] = {"name": ANNOTATION, "reported_s": _engine.quantile([a["total_s"] for a in ann], 0.5),
                              "true_s": true_loop, "skew": r["median"], "skew_ci95": r.get("ci95")}
        pt["by"][iname] = d
    # The operator's own duration: opskew's trace when present (its
    # in-interval cost is ~10 ns), else the first instrument's trace.
    src = next((n for n in ("opskew", "opskew-native") if n in pt["by"]), next(iter(pt["by"])))
    pt["op_duration_s"] = pt["by"][src]["reported_per_call_s"]
    pt["op_duration_from"] = src
    ref = [t.reported_op_self_s for t in rounds.trials[src]]
    for iname, d in pt["by"].items():
        if iname == src and src not in ("opskew", "opskew-native"):
            # The reference is this very trace: its ratio to itself is 1 by
            # construction, not a measurement (no opskew tracer among the
            # instruments to compare with).
            continue
        mine = [t.reported_op_self_s for t in rounds.trials[iname]]
        if d["reported_per_call_s"] and pt["op_duration_s"] and all(mine) and all(ref):
            # The leaf's own skew: how much longer the trace shows the operator
            # than it is, round by round against the reference's trace of the
            # same round (the median of the ratios, with its CI).
            r = estimate([m / o for m, o in zip(mine, ref)])
            d["reported_over_op"] = r["median"]
            d["reported_over_op_ci95"] = r.get("ci95")
    return pt


def measure(args, device, ops, instruments, progress=True):
    """The curves measured; stops at Ctrl-C (`interrupted`) or at the user's
    op raising (`error`, a WorkloadError whose partial result is what was
    measured before it). Returns (curves, interrupted, error)."""
    for inst in instruments.values():
        inst.annotations = (ANNOTATION,)
    sizes, auto = _sizes(args)
    results = []
    interrupted = False
    error = None
    show = progress_printer("opskew sweep") if progress else None
    try:
        for name, make in ops:
            curve = {"op": name, "points": []}
            results.append(curve)
            if show:
                show.start(f"--op {name}", f"{len(sizes)} size(s)" + (", up to --max-ms per call" if auto else ""))
            for k, size in enumerate(sizes):
                try:
                    call = make(size)
                    per_call = _probe(call, device)
                except (UsageError, KeyboardInterrupt):
                    raise
                except Exception as exc:  # the user's op raised at this size
                    rounds_error = exc
                    rounds = None
                else:
                    calls = int(min(2000, max(3, args.window_ms * 1e-3 / per_call)))
                    # The first size of a curve also warms up the process.
                    rounds = measure_rounds.run_rounds(_loop(call, calls), {"baseline": None, **instruments},
                                                       trials=args.trials, iters=1, device=device,
                                                       warmup_s=0.5 if not curve["points"] else 0.05)
                    if rounds.interrupted:
                        raise KeyboardInterrupt
                    rounds_error = rounds.error
                if rounds_error is not None:
                    exc = rounds_error
                    error = WorkloadError(f"--op {name} raised {type(exc).__name__}: {exc} at size {size}"
                                          f" (after {sum(len(c['points']) for c in results)} measured "
                                          "point(s), reported above)", cause=exc)
                    error.user_traceback = user_traceback(exc)
                    return results, interrupted, error
                pt = {"size": size, **point_figures(rounds, instruments, calls)}
                curve["points"].append(pt)
                if show:
                    show.update(k + 1, len(sizes), str(size), unit="size", per_call_s=pt["true_per_call_s"])
                if auto and pt["true_per_call_s"] >= args.max_ms * 1e-3:
                    break
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if show:
            show.end()
        for curve in results:
            curve["crossover"] = {}
            for iname in instruments:
                pts = [{"size": p["size"], "op_duration_s": p["op_duration_s"],
                        "true_per_call_s": p["true_per_call_s"],
                        "added_per_call_s": p["by"][iname]["added_per_call_s"]} for p in curve["points"]]
                curve["crossover"][iname] = {
                    "vs_op_duration": _crossover(pts, "op_duration_s"),
                    "vs_whole_call": _crossover(pts, "true_per_call_s"),
                }
            curve["dropped_from_plot"] = dropped(curve)
    return results, interrupted, error


def dropped(curve) -> dict:
    """Per instrument, the sizes whose added cost per call is not drawn on the
    log axis (zero or negative: the instrument's cost is not resolved there)."""
    out = {}
    for p in curve["points"]:
        for iname, d in p["by"].items():
            if not d["added_per_call_s"] > 0:
                out.setdefault(iname, []).append(p["size"])
    return out


def compute(args):
    """Measures and analyses (and draws the plot unless --no-plot); prints
    nothing. `run` prints and writes the JSON; opskew.api.sweep returns it."""
    if args.trials < 2:
        raise UsageError("--trials must be at least 2")
    if args.max_ms <= 0 or args.window_ms <= 0:
        raise UsageError("--max-ms and --window-ms must be > 0")
    if args.threads < 1:
        raise UsageError("--threads must be at least 1")
    d = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(d):
        raise UsageError(f"--out: directory does not exist: {d}")
    src = workload_files(args)
    skipped = None if args.no_plot else plot_unavailable()
    if not args.no_plot and not skipped:
        for ext in ("png", "svg"):
            check_output(f"{args.out}.{ext}", stdout=False, what="plot",
                         inputs=src + [("the --json file", args.json)])
    check_output(args.json, inputs=src)
    specs = args.instrument or ["torch", "torch:record_shapes,with_stack", "opskew"]
    if "opskew" in specs:
        # The collector must be configured before torch loads (docs/tracer.md).
        arrange()
    args.warmup = 0.0
    device = prepare(args)
    ops = [_op_factory(s, device) for s in (args.op or ["add"])]
    instruments = _instruments(specs, device)
    curves, interrupted, error = measure(args, device, ops, instruments)
    first = next(iter(instruments.values()))
    result = {"schema": SCHEMA,
              "conditions": conditions(device, args.threads, first, {
                  "trials": args.trials, "window_ms": args.window_ms, "max_ms": args.max_ms}),
              "instruments": {k: v.label() for k, v in instruments.items()},
              "curves": curves,
              "status": "workload-error" if error else "interrupted" if interrupted else "complete"}
    if error:
        result["error"] = str(error)
        error.partial = result
        if error.user_traceback:
            result["traceback"] = error.user_traceback
    result["conditions"].pop("instrument_label", None)
    result["conditions"].pop("instrument", None)
    if skipped:
        result["plot_skipped"] = skipped
    elif not args.no_plot and any(c["points"] for c in curves):
        result["plots"] = plot(result, args.out)
    return Computed(result, error=error, interrupted=interrupted)
