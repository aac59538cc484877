"""`opskew sweep`: the skew curve over operator size, and the crossover size."""

from __future__ import annotations

import argparse
import math
import sys
import time

from opskew.errors import EXIT_OK, UsageError
from opskew.output import check_output, write_file, write_json
from opskew.render.units import columns, count_of, fmt_time
from opskew.render.plots import figure_bytes
from opskew.commands._common import finish, finite_float, workload_files

SCHEMA = "opskew.sweep/1"
BUILTIN_OPS = ("add", "mul", "matmul")

HELP = "reported vs true operator time over operator size, and the crossover size"
DESCRIPTION = """\
For each operator (--op, repeatable: add, mul, matmul, or file.py:function) and
each size from one element up to where one call takes --max-ms, measures in
interleaved rounds: the true time per call (no instrument), the in-window time
per call under each instrument, the operator time the instrument's trace
reports, and the instrument's added cost per call (W x events per call, with
the sign-test CI of W, whose exact coverage is printed: 6 rounds or more give at
least 95%). The crossover size is where the instrument's added cost equals the
operator's own duration (taken from opskew's tracer, whose in-interval cost is
about 10 ns, when it is available; otherwise from the profiler's trace): below
it, the instrument costs more than the operator.

Sizes are elements per input tensor (matmul: n x n matrices, so n*n elements).
A user operator `file.py:function` is called as function(size) and must return
a zero-argument callable that runs one call of the operator at that size.

Each window's calls run inside one torch.profiler.record_function annotation,
as a training step's are, so each point reports two skews: the leaf
operator's own (its time in the trace / its true time) and the enclosing
annotation's (its time in the trace / the true time of the same calls without
an instrument), which also carries the instrument's cost between events.

A point whose W CI includes 0 (or whose rounds are too few for a 95% CI) is
marked "noisy": the call's own variation hides the instrument there.

A user --op that raises exits 4 after reporting the sizes measured before it,
with the user's own frames; a function that cannot take one argument is bad
input (exit 2), found before anything runs.

Writes PREFIX.png and PREFIX.svg (log-log, one colour per instrument, the
same in every plot: added cost with its CI band, the operator time in its
trace, the crossover; below, the leaf and enclosing skews) and, with --json,
the table.
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
        from opskew.measure.workload import _load_module

        modspec, _, fn = spec.rpartition(":")
        mod = _load_module(modspec)
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
    import inspect

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
    from opskew.measure.instruments import PROFILER_OPTIONS, IttFloor, OpskewTracer, TorchProfiler

    out = {}
    for spec in specs:
        if spec == "opskew":
            import torch

            if not torch.profiler.itt.is_available():
                raise UsageError("--instrument opskew needs a torch build with ITT (x86-64)")
            out["opskew"] = OpskewTracer(export=False)
        elif spec == "opskew-native":
            import torch

            from opskew.tracer import native

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
    from opskew.measure.rounds import make_window

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


# The annotation each window's calls run inside (record_function), as a
# training step's operators run inside the step's annotation.
ANNOTATION = "opskew.sweep.calls"


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
    from opskew import _engine
    from opskew.stats.estimators import estimate, per_event_diff

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
    from opskew.errors import WorkloadError
    from opskew.measure.rounds import run_rounds, user_traceback

    for inst in instruments.values():
        inst.annotations = (ANNOTATION,)
    sizes, auto = _sizes(args)
    results = []
    interrupted = False
    error = None
    t_start = time.perf_counter()
    try:
        for name, make in ops:
            curve = {"op": name, "points": []}
            results.append(curve)
            for size in sizes:
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
                    rounds = run_rounds(_loop(call, calls), {"baseline": None, **instruments},
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
                if progress and sys.stderr.isatty():
                    sys.stderr.write(f"\ropskew sweep: {name} size {size}: {fmt_time(pt['true_per_call_s'])}/call, "
                                     f"{time.perf_counter() - t_start:.0f}s elapsed   ")
                    sys.stderr.flush()
                if auto and pt["true_per_call_s"] >= args.max_ms * 1e-3:
                    break
    except KeyboardInterrupt:
        interrupted = True
    finally:
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


# One colour per instrument, the same in every plot of every run.
INSTRUMENT_COLORS = {"torch": "#1f77b4", "torch:record_shapes,with_stack": "#d62728",
                     "opskew": "#2ca02c", "opskew-native": "#9467bd"}
_OTHER_COLORS = ("#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")


def instrument_color(spec: str) -> str:
    """The fixed colour of an instrument spec: the known ones by name, any
    other (torch:OPT...) by a stable hash of its spec, never by its position."""
    import zlib

    return INSTRUMENT_COLORS.get(spec) or _OTHER_COLORS[zlib.crc32(spec.encode()) % len(_OTHER_COLORS)]


def dropped_note(curve, labels: dict) -> str | None:
    d = curve.get("dropped_from_plot") or {}
    if not d:
        return None
    return ("not drawn on the log axis (added cost <= 0, not resolved): "
            + "; ".join(f"{labels.get(k, k)} at size(s) {', '.join(str(x) for x in v)}" for k, v in d.items()))


def plot(result, prefix) -> list:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = result["curves"]
    fig, axes = plt.subplots(2, len(curves), figsize=(8 * len(curves), 11), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 2]})
    c = result["conditions"]
    for k, curve in enumerate(curves):
        ax, sk = axes[0][k], axes[1][k]
        pts = curve["points"]
        if not pts:
            continue
        xs = [p["size"] for p in pts]
        ax.plot(xs, [p["true_per_call_s"] * 1e6 for p in pts], "k-o", lw=2, ms=4,
                label="true time per call, no instrument (Python + dispatch + op)")
        floor = min([p["true_per_call_s"] for p in pts] + [d["added_per_call_s"] for p in pts
                    for d in p["by"].values() if d["added_per_call_s"] > 0]) * 1e6 / 10
        for iname in pts[0]["by"]:
            col = instrument_color(iname)
            label = result["instruments"][iname]
            rep = [(x, p["by"][iname]["reported_per_call_s"]) for x, p in zip(xs, pts)
                   if p["by"][iname]["reported_per_call_s"]]
            if rep:
                ax.plot([r[0] for r in rep], [r[1] * 1e6 for r in rep], "--", color=col,
                        label=f"{label}: operator time in its trace")
            add = [(x, p["by"][iname]) for x, p in zip(xs, pts) if p["by"][iname]["added_per_call_s"] > 0]
            if add:
                ax.plot([a[0] for a in add], [a[1]["added_per_call_s"] * 1e6 for a in add], "-", color=col,
                        lw=1.5, marker=".", label=f"{label}: cost it adds per call")
                noisy = [a for a in add if a[1].get("noisy")]
                if noisy:
                    ax.plot([a[0] for a in noisy], [a[1]["added_per_call_s"] * 1e6 for a in noisy], "o",
                            mfc="none", color=col, ms=8, label=f"{label}: noisy point (CI includes 0, or under 95%)")
            # The CI band of the added cost; an end at or below 0 is drawn at the axis floor.
            band = [(x, p["by"][iname]["added_per_call_ci95_s"]) for x, p in zip(xs, pts)]
            ax.fill_between([b[0] for b in band], [max(b[1][0] * 1e6, floor) for b in band],
                            [max(b[1][1] * 1e6, floor) for b in band], color=col, alpha=0.15, lw=0,
                            label=f"{label}: CI of the added cost")
            x = curve["crossover"][iname]["vs_op_duration"]
            if x:
                ax.axvline(x, color=col, ls="-.", lw=1.2, label=f"{label}: crossover at {x:.3g} elements")
            leaf = [(x, p["by"][iname].get("reported_over_op")) for x, p in zip(xs, pts)]
            leaf = [q for q in leaf if q[1]]
            if leaf:
                sk.plot([q[0] for q in leaf], [q[1] for q in leaf], "-", color=col, marker=".",
                        label=f"{label}: leaf skew (operator's trace time / its true time)")
            enc = [(x, p["by"][iname].get("enclosing")) for x, p in zip(xs, pts)]
            enc = [q for q in enc if q[1]]
            if enc:
                sk.plot([q[0] for q in enc], [q[1]["skew"] for q in enc], ":", color=col, marker="s", ms=3,
                        label=f"{label}: enclosing skew (annotation's trace time / the calls' true time)")
        ax.set_ylim(bottom=floor)
        note = dropped_note(curve, result["instruments"])
        if note:
            ax.text(0.01, 0.01, note, transform=ax.transAxes, fontsize=7, va="bottom", wrap=True)
        for a in (ax, sk):
            a.set_xscale("log")
            a.grid(True, which="both", alpha=0.3)
            a.set_xlabel("operator size: elements per input tensor"
                         + (" (n x n matrices)" if curve["op"] == "matmul" else ""))
        ax.set_yscale("log")
        sk.set_yscale("log")
        sk.axhline(1.0, color="k", lw=0.8)
        ax.set_ylabel("time per call (microseconds)")
        sk.set_ylabel("skew: trace time / true time (1 = exact)")
        ax.set_title(f"torch.{curve['op']}: instrument cost vs operator time"
                     if curve["op"] in BUILTIN_OPS else curve["op"])
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=1, frameon=False)
        sk.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=1, frameon=False)
    fig.suptitle(f"opskew sweep: torch {c['torch']}, {c['device']} ({c.get('gpu') or c['cpu']}), "
                 f"{count_of(c['threads'], 'thread')}; medians of {c['trials']} rounds per size. Left of a "
                 "crossover the instrument costs more than the operator.", fontsize=9)
    fig.tight_layout()
    paths = []
    for ext in ("png", "svg"):
        path = f"{prefix}.{ext}"
        write_file(path, figure_bytes(fig, ext, dpi=110, bbox_inches="tight"))
        paths.append(path)
    plt.close(fig)
    return paths


def _skew(x, ci=None) -> str:
    if not x:
        return "n/a"
    return f"x{x:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def print_human(result, out=None):
    out = out or sys.stdout  # looked up per call: a redirected or captured stdout is honoured
    c = result["conditions"]
    cov = next((d["added_per_event_ns"].get("ci_coverage") for cv in result["curves"] for p in cv["points"]
                for d in p["by"].values()), None)
    cov_txt = f"{100 * cov:.1f}% CI" if cov else "CI"
    op_source = "opskew's trace" if "opskew" in result["instruments"] else "the profiler's trace"
    out.write(f"opskew sweep: torch {c['torch']}, {c['device']} ({c.get('gpu') or c['cpu']}), "
              f"{count_of(c['threads'], 'thread')}; medians of {c['trials']} rounds per size\n"
              "  true: the call without instrument (Python and dispatch included); op: the operator's\n"
              f"  own duration (from {op_source}); "
              f"added: W x events per call [{cov_txt} of W, sign test];\n"
              "  reported: the op time in the instrument's trace; leaf skew: reported / op;\n"
              "  enclosing skew: the time the trace shows for the annotation around the calls\n"
              f"  ({ANNOTATION}) / the true time of the same calls; skews are medians of the\n"
              "  rounds' ratios [sign-test CI]\n")
    for curve in result["curves"]:
        for n, label in result["instruments"].items():
            out.write(f"\n{curve['op']} under {label}\n")
            rows = []
            for p in curve["points"]:
                d = p["by"][n]
                ci = d["added_per_event_ns"]["ci95"]
                rows.append([str(p["size"]), fmt_time(p["true_per_call_s"]), fmt_time(p["op_duration_s"]),
                             fmt_time(d["added_per_call_s"]),
                             "[%s, %s]" % (fmt_time(ci[0] * 1e-9), fmt_time(ci[1] * 1e-9)),
                             fmt_time(d["reported_per_call_s"]),
                             _skew(d.get("reported_over_op"), d.get("reported_over_op_ci95")),
                             _skew((d.get("enclosing") or {}).get("skew"), (d.get("enclosing") or {}).get("skew_ci95")),
                             "noisy" if d.get("noisy") else ""])
            for line in columns(["size", "true/call", "op", "added/call", "W CI per event", "reported",
                                 "leaf skew", "enclosing skew", "note"], rows, right={0}):
                out.write(line + "\n")
            noisy = sorted({d["noisy"] for p in curve["points"] for d in [p["by"][n]] if d.get("noisy")})
            for why in noisy:
                out.write(f"  noisy: {why}; its W, added cost and skews are not to be read\n")
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
            if result.get("plots") and (curve.get("dropped_from_plot") or {}).get(n):
                out.write(f"  plot: sizes {', '.join(str(s) for s in curve['dropped_from_plot'][n])} not drawn "
                          "(added cost <= 0 on a log axis)\n")
    if result.get("plots"):
        out.write(f"\nplot: {', '.join(result['plots'])}\n")
    if result.get("error"):
        out.write(f"\nerror: {result['error']}\n")


def compute(args):
    """Measures and analyses (and draws the plot unless --no-plot); prints
    nothing. `run` prints and writes the JSON; opskew.api.sweep returns it."""
    from opskew.commands._common import Computed

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
    src = workload_files(args)
    if not args.no_plot:
        for ext in ("png", "svg"):
            check_output(f"{args.out}.{ext}", stdout=False, what="plot",
                         inputs=src + [("the --json file", args.json)])
    check_output(args.json, inputs=src)
    specs = args.instrument or ["torch", "torch:record_shapes,with_stack", "opskew"]
    if "opskew" in specs:
        # The collector must be configured before torch loads (docs/tracer.md).
        from opskew.tracer.session import arrange

        arrange()
    from opskew.commands._common import prepare

    args.warmup = 0.0
    device = prepare(args)
    from opskew.measure.rounds import conditions

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
    if not args.no_plot and any(c["points"] for c in curves):
        result["plots"] = plot(result, args.out)
    return Computed(result, error=error, interrupted=interrupted)


def run(args) -> int:
    rc = finish(compute(args), print_human, args.json, write_json)
    return EXIT_OK if rc is None else rc
