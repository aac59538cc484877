"""`opskew sweep`: the skew curve over operator size, and the crossover size."""

from __future__ import annotations

import argparse
import math
import sys
import time

from ..errors import EXIT_INTERRUPTED, EXIT_OK, UsageError
from ..report import check_output, figure_bytes, fmt_time, write_file, write_json

SCHEMA = "opskew.sweep/1"
BUILTIN_OPS = ("add", "mul", "matmul")

HELP = "reported vs true operator time over operator size, and the crossover size"
DESCRIPTION = """\
For each operator (--op, repeatable: add, mul, matmul, or file.py:function) and
each size from one element up to where one call takes --max-ms, measures in
interleaved rounds: the true time per call (no instrument), the in-window time
per call under each instrument, the operator time the instrument's trace
reports, and the instrument's added cost per call (W x events per call, with a
95% CI). The crossover size is where the instrument's added cost equals the
operator's own duration (taken from opskew's tracer, whose in-interval cost is
about 10 ns, when it is available; otherwise from the profiler's trace): below
it, the instrument costs more than the operator.

Sizes are elements per input tensor (matmul: n x n matrices, so n*n elements).
A user operator `file.py:function` is called as function(size) and must return
a zero-argument callable that runs one call of the operator at that size.

Writes PREFIX.png and PREFIX.svg (log-log, one line per instrument, the
crossover marked) and, with --json, the table.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
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
    p.add_argument("--max-ms", type=float, default=1.0,
                   help="stop growing the size once one call takes this long (default: 1)")
    p.add_argument("--trials", type=int, default=5, metavar="N", help="rounds per size (default: 5)")
    p.add_argument("--window-ms", type=float, default=5.0,
                   help="target length of one timed window (default: 5)")
    p.add_argument("--out", default="opskew-sweep", metavar="PREFIX",
                   help="plot files PREFIX.png and PREFIX.svg (default: opskew-sweep)")
    p.add_argument("--no-plot", action="store_true", help="do not draw the plot")
    p.add_argument("--json", metavar="PATH", help="write the table as JSON (schema opskew.sweep/1), - for stdout")


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
        from ..workload import _load_module

        modspec, _, fn = spec.rpartition(":")
        mod = _load_module(modspec)
        f = getattr(mod, fn, None)
        if not callable(f):
            raise UsageError(f"{modspec} has no callable named {fn!r}")

        def make(n):
            call = f(n)
            if not callable(call):
                raise UsageError(f"{spec}({n}) must return a zero-argument callable")
            return call
        return spec, make
    raise UsageError(f"unknown --op {spec!r}: expected add, mul, matmul or file.py:function")


def _instruments(specs, device):
    from ..instruments import PROFILER_OPTIONS, IttFloor, OpskewTracer, TorchProfiler

    out = {}
    for spec in specs:
        if spec == "opskew":
            import torch

            if not torch.profiler.itt.is_available():
                raise UsageError("--instrument opskew needs a torch build with ITT (x86-64)")
            out["opskew"] = OpskewTracer(export=False)
        elif spec == "opskew-native":
            import torch

            from .. import native

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
    del IttFloor
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
    from ..measure import make_window

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


def measure(args, device, ops, instruments, progress=True):
    from .. import _engine
    from ..analysis import per_event_diff
    from ..measure import run_rounds

    sizes, auto = _sizes(args)
    results = []
    interrupted = False
    t_start = time.perf_counter()
    try:
        for name, make in ops:
            curve = {"op": name, "points": []}
            results.append(curve)
            for size in sizes:
                call = make(size)
                per_call = _probe(call, device)
                calls = int(min(2000, max(3, args.window_ms * 1e-3 / per_call)))
                # The first size of a curve also warms up the process.
                rounds = run_rounds(call, {"baseline": None, **instruments}, trials=args.trials,
                                    iters=calls, device=device,
                                    warmup_s=0.5 if not curve["points"] else 0.05)
                if rounds.error or rounds.interrupted:
                    if rounds.interrupted:
                        raise KeyboardInterrupt
                    raise rounds.error
                base = [w.wall_s for w in rounds.windows("baseline")]
                true = _engine.quantile(base, 0.5) / calls
                pt = {"size": size, "calls_per_trial": calls, "true_per_call_s": true, "by": {}}
                for iname in instruments:
                    trials = rounds.trials[iname]
                    ev = [t.op_events for t in trials]
                    walls = [t.window.wall_s for t in trials]
                    w = per_event_diff(base, walls, ev)
                    epc = _engine.quantile(ev, 0.5) / calls
                    rep = [t.reported_op_self_s for t in trials if t.reported_op_self_s is not None]
                    d = {
                        "events_per_call": epc,
                        "profiled_per_call_s": _engine.quantile(walls, 0.5) / calls,
                        "reported_per_call_s": (_engine.quantile(rep, 0.5) / calls) if rep else None,
                        "added_per_event_ns": {k: w[k] for k in ("median", "ci95", "ci_coverage")},
                        "added_per_call_s": w["median"] * 1e-9 * epc,
                    }
                    d["inflation"] = d["profiled_per_call_s"] / true
                    if d["reported_per_call_s"]:
                        d["reported_over_true"] = d["reported_per_call_s"] / true
                    pt["by"][iname] = d
                # The operator's own duration: opskew's trace when present (its
                # in-interval cost is ~10 ns), else the first instrument's trace.
                src = next((n for n in ("opskew", "opskew-native") if n in pt["by"]), next(iter(pt["by"])))
                pt["op_duration_s"] = pt["by"][src]["reported_per_call_s"]
                pt["op_duration_from"] = src
                for d in pt["by"].values():
                    if d["reported_per_call_s"] and pt["op_duration_s"]:
                        # How much longer the trace shows the operator than it is.
                        d["reported_over_op"] = d["reported_per_call_s"] / pt["op_duration_s"]
                curve["points"].append(pt)
                if progress and sys.stderr.isatty():
                    sys.stderr.write(f"\ropskew sweep: {name} size {size}: {fmt_time(true)}/call, "
                                     f"{time.perf_counter() - t_start:.0f}s elapsed   ")
                    sys.stderr.flush()
                if auto and true >= args.max_ms * 1e-3:
                    break
    except KeyboardInterrupt:
        interrupted = True
    if progress and sys.stderr.isatty():
        sys.stderr.write("\n")
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
    return results, interrupted


def plot(result, prefix) -> list:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = result["curves"]
    fig, axes = plt.subplots(1, len(curves), figsize=(8 * len(curves), 6.5), squeeze=False)
    c = result["conditions"]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, curve in zip(axes[0], curves):
        pts = curve["points"]
        if not pts:
            continue
        xs = [p["size"] for p in pts]
        ax.plot(xs, [p["true_per_call_s"] * 1e6 for p in pts], "k-o", lw=2, ms=4,
                label="true time per call, no instrument (Python + dispatch + op)")
        for i, iname in enumerate(pts[0]["by"]):
            col = colors[i % len(colors)]
            label = result["instruments"][iname]
            rep = [(x, p["by"][iname]["reported_per_call_s"]) for x, p in zip(xs, pts)
                   if p["by"][iname]["reported_per_call_s"]]
            if rep:
                ax.plot([r[0] for r in rep], [r[1] * 1e6 for r in rep], "--", color=col,
                        label=f"{label}: operator time in its trace")
            add = [(x, p["by"][iname]["added_per_call_s"]) for x, p in zip(xs, pts)
                   if p["by"][iname]["added_per_call_s"] > 0]
            if add:
                ax.plot([a[0] for a in add], [a[1] * 1e6 for a in add], "-", color=col, lw=1.5,
                        marker=".", label=f"{label}: cost it adds per call")
            x = curve["crossover"][iname]["vs_op_duration"]
            if x:
                ax.axvline(x, color=col, ls="-.", lw=1.2, label=f"{label}: crossover at {x:.3g} elements")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("operator size: elements per input tensor"
                      + (" (n x n matrices)" if curve["op"] == "matmul" else ""))
        ax.set_ylabel("time per call (microseconds)")
        ax.set_title(f"torch.{curve['op']}: instrument cost vs operator time"
                     if curve["op"] in BUILTIN_OPS else curve["op"])
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=1, frameon=False)
    fig.suptitle(f"opskew sweep: torch {c['torch']}, {c['device']} ({c.get('gpu') or c['cpu']}), "
                 f"{c['threads']} thread(s); medians of {c['trials']} rounds per size. Left of a "
                 "crossover the instrument costs more than the operator.", fontsize=9)
    fig.tight_layout()
    paths = []
    for ext in ("png", "svg"):
        path = f"{prefix}.{ext}"
        write_file(path, figure_bytes(fig, ext, dpi=110, bbox_inches="tight"))
        paths.append(path)
    plt.close(fig)
    return paths


def print_human(result, out=None):
    out = out or sys.stdout  # looked up per call: a redirected or captured stdout is honoured
    c = result["conditions"]
    out.write(f"opskew sweep: torch {c['torch']}, {c['device']} ({c.get('gpu') or c['cpu']}), "
              f"{c['threads']} thread(s); medians of {c['trials']} rounds per size\n"
              "  true: the call without instrument (Python and dispatch included); op: the operator's\n"
              f"  own duration (from {'opskew' if 'opskew' in result['instruments'] else 'the trace'}'s trace); "
              "added: W x events per call [95% CI of W];\n"
              "  reported: the op time in the instrument's trace; skew: reported / op\n")
    for curve in result["curves"]:
        for n, label in result["instruments"].items():
            out.write(f"\n{curve['op']} under {label}\n")
            hdr = (f"{'size':>10s} {'true/call':>10s} {'op':>9s} {'added/call':>10s} {'W CI per event':>20s} "
                   f"{'reported':>9s} {'skew':>6s}")
            out.write(hdr + "\n" + "-" * len(hdr) + "\n")
            for p in curve["points"]:
                d = p["by"][n]
                ci = d["added_per_event_ns"]["ci95"]
                skew = d.get("reported_over_op")
                out.write(f"{p['size']:>10d} {fmt_time(p['true_per_call_s']):>10s} "
                          f"{fmt_time(p['op_duration_s']):>9s} {fmt_time(d['added_per_call_s']):>10s} "
                          f"{('[%s, %s]' % (fmt_time(ci[0] * 1e-9), fmt_time(ci[1] * 1e-9))):>20s} "
                          f"{fmt_time(d['reported_per_call_s']):>9s} "
                          + (f"x{skew:5.2f}" if skew else "   n/a") + "\n")
            x = curve["crossover"][n]
            a, b = x["vs_op_duration"], x["vs_whole_call"]
            if a:
                out.write(f"  crossover: {a:.3g} elements; below it {label} adds more per call "
                          "than the operator's own duration\n")
            else:
                first = curve["points"][0] if curve["points"] else None
                above = first and first["op_duration_s"] and first["by"][n]["added_per_call_s"] >= first["op_duration_s"]
                out.write("  crossover: none in the measured range; the added cost per call stays "
                          + ("above" if above else "below") + " the operator's own duration\n")
            if b:
                out.write(f"  vs the whole call (Python and dispatch included): crossover at {b:.3g} elements\n")
    if result.get("plots"):
        out.write(f"\nplot: {', '.join(result['plots'])}\n")


def compute(args):
    """Measures and analyses (and draws the plot unless --no-plot); prints
    nothing. `run` prints and writes the JSON; opskew.api.sweep returns it."""
    from ._common import Computed

    if args.trials < 2:
        raise UsageError("--trials must be at least 2")
    if args.max_ms <= 0 or args.window_ms <= 0:
        raise UsageError("--max-ms and --window-ms must be > 0")
    if args.threads < 1:
        raise UsageError("--threads must be at least 1")
    import os

    d = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(d):
        raise UsageError(f"--out: directory does not exist: {d}")
    if not args.no_plot:
        for ext in ("png", "svg"):
            check_output(f"{args.out}.{ext}", stdout=False, what="plot", inputs=[("the --json file", args.json)])
    check_output(args.json)
    specs = args.instrument or ["torch", "torch:record_shapes,with_stack", "opskew"]
    if "opskew" in specs:
        # The collector must be configured before torch loads (docs/tracer.md).
        from ..tracing import arrange

        arrange()
    from ._common import prepare

    args.warmup = 0.0
    device = prepare(args)
    from ..measure import conditions

    ops = [_op_factory(s, device) for s in (args.op or ["add"])]
    instruments = _instruments(specs, device)
    curves, interrupted = measure(args, device, ops, instruments)
    first = next(iter(instruments.values()))
    result = {"schema": SCHEMA,
              "conditions": conditions(device, args.threads, first, {
                  "trials": args.trials, "window_ms": args.window_ms, "max_ms": args.max_ms}),
              "instruments": {k: v.label() for k, v in instruments.items()},
              "curves": curves,
              "status": "interrupted" if interrupted else "complete"}
    result["conditions"].pop("instrument_label", None)
    result["conditions"].pop("instrument", None)
    if not args.no_plot and any(c["points"] for c in curves):
        result["plots"] = plot(result, args.out)
    return Computed(result, interrupted=interrupted)


def run(args) -> int:
    done = compute(args)
    result = done.result
    if args.json != "-":
        print_human(result)
    if args.json:
        write_json(result, args.json)
    return EXIT_INTERRUPTED if done.interrupted else EXIT_OK
