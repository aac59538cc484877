"""`opskew advise`: the cheapest profiler configuration for what you need, a
schedule sized to the measured event rate, and a snippet to paste.

The measurement and its analysis; the text is render.advise's, the command
line cli.commands.advise's."""

from __future__ import annotations

import math
import os
import time

from opskew import _engine
from opskew.errors import UsageError
from opskew.experiments.common import Computed, add_workload_arguments, conclude, load_workload, prepare, workload_files
from opskew.measure import budget
from opskew.measure import rounds as measure_rounds
from opskew.measure.instruments import TorchProfiler
from opskew.measure.rounds import conditions, make_window, progress_printer
from opskew.options import Spec, declared
from opskew.output import check_output, write_file
from opskew.profiler.schedule import ADVISED_SCHEDULE, schedule_call
from opskew.stats.estimators import estimate, per_event_diff
from opskew.stats.pricing import ADVISED_WHY
from opskew.vocab import schedule_args


SCHEMA = "opskew.advise/1"
NEEDS = {"shapes": "record_shapes", "stacks": "with_stack", "memory": "profile_memory",
         "flops": "with_flops", "modules": "with_modules"}

def declare(p: Spec) -> None:
    """The options of `opskew advise` (the command line's and the API's)."""
    add_workload_arguments(p, trials=7, iters=10)
    p.add_argument("--need", action="append", choices=sorted(NEEDS), default=[],
                   help="what the trace must contain besides operator timings (repeatable)")
    p.add_argument("--scope", metavar="PATH", help="a submodule to profile alone, e.g. model.encoder")
    p.add_argument("--max-events", type=int, default=50_000, metavar="N",
                   help="events per active window the schedule aims to stay under (default: 50000)")
    p.add_argument("--active", type=int, metavar="N",
                   help="active iterations per cycle to schedule and budget (default: as --max-events allows, "
                        "at most 5)")
    p.add_argument("--probe-iters", type=int, metavar="N",
                   help="iterations of the budget's smaller probe, the larger being 4 x N (default: a quarter of "
                        "--active, within about 1 s of iterations)")
    p.add_argument("--no-budget", action="store_true",
                   help="skip the capture budget (trace size, stop and export time, peak memory)")
    p.add_argument("--cold-iters", type=int, default=30, metavar="N",
                   help="iterations timed one by one from a cold start to find where time stabilizes "
                        "(default: 30, at least 4)")
    p.add_argument("--trace-file", default="opskew-advised-trace.json", metavar="PATH",
                   help="trace path the snippet writes (default: opskew-advised-trace.json)")
    p.add_argument("--snippet-out", metavar="PATH", help="also write the snippet to PATH")
    p.add_argument("--json", metavar="PATH", help="write the result as JSON (schema opskew.advise/1), - for stdout")


SPEC, Options = declared("advise", declare)


def stabilization(times: list) -> dict:
    """The first iteration from which the running median of three stays within
    20% of the steady-state time (the median of the last third). A median of
    three ignores a single preempted iteration on a busy machine."""
    n = len(times)
    steady = _engine.quantile(times[-max(3, n // 3):], 0.5)
    limit = 1.2 * steady
    idx = n
    for i in range(n - 1, -1, -1):
        if _engine.quantile(times[i:i + 3], 0.5) > limit:
            break
        idx = i
    return {"steady_per_iter_s": steady, "stable_from_iter": min(idx, n - 1), "first_iter_s": times[0],
            "cold_iters_timed": n, "rule": "running median of 3 within 20% of the last third's median"}


def candidates(needs: list, device: str) -> dict:
    """Configurations that give what is needed, cheapest in principle first."""
    base = {NEEDS[n]: True for n in needs}
    out = {"+".join(sorted(base)) or "minimal": TorchProfiler(device, export=True, **base)}
    if "shapes" in needs and "flops" not in needs:
        # with_flops records shapes too; measured, in case it is ever cheaper.
        alt = dict(base, with_flops=True)
        alt.pop("record_shapes", None)
        out["+".join(sorted(alt))] = TorchProfiler(device, export=True, **alt)
    return out


class ScopedProfiler:
    """torch.profiler with collection toggled on only inside one submodule's
    forward (forward pre-hook and hook). Backward of that submodule is not
    included: autograd runs it outside the forward call."""

    counts_events = True
    name = "scoped"

    def __init__(self, inner, module, path):
        self.inner, self.module, self.path = inner, module, path

    def label(self):
        return self.inner.label() + f" scoped to {self.path}.forward"

    def describe(self):
        return dict(self.inner.describe(), scope=self.path)

    def trial(self, window):
        acts = self.inner._activities()
        holder = {}

        def on(mod, inp):
            holder["prof"].toggle_collection_dynamic(True, acts)

        def off(mod, inp, out):
            holder["prof"].toggle_collection_dynamic(False, acts)

        def opened(prof):
            holder["prof"] = prof
            prof.toggle_collection_dynamic(False, acts)

        h1 = self.module.register_forward_pre_hook(on)
        h2 = self.module.register_forward_hook(off)
        try:
            return self.inner.trial(window, on_open=opened)
        finally:
            h1.remove()
            h2.remove()


def resolve_scope(path: str, workload):
    import torch

    root_name, _, rest = path.partition(".")
    roots = workload.namespace
    if root_name not in roots:
        raise UsageError(f"--scope {path}: {root_name!r} is not a global of TARGET's module "
                         "nor an attribute of its setup result")
    obj = roots[root_name]
    for part in rest.split(".") if rest else []:
        if not hasattr(obj, part):
            raise UsageError(f"--scope {path}: no attribute {part!r}")
        obj = getattr(obj, part)
    if not isinstance(obj, torch.nn.Module):
        raise UsageError(f"--scope {path} is a {type(obj).__name__}, not a torch.nn.Module")
    if not hasattr(torch.profiler.profile, "toggle_collection_dynamic"):
        raise UsageError(f"--scope needs torch.profiler's toggle_collection_dynamic (torch >= 2.3); "
                         f"this is torch {torch.__version__}")
    return obj


def schedule_for(events_per_iter: float, stable_from: int, max_events: int, active: int | None = None) -> dict:
    if active is None:
        active = max(1, min(5, math.floor(max_events / max(events_per_iter, 1))))
    return {"wait": max(1, stable_from), "warmup": 1, "active": active, "repeat": 1}


# The probes of the budget: at most about this long each (iterations at the
# steady time), so that a slow step still gets a short measurement.
BUDGET_PROBE_S = 1.0


def capture_budget(workload, inst, device: str, steady_s: float, active: int, profile_active: int,
                   small: int | None = None) -> dict:
    """The capture budget of configuration `inst` (measure.budget): per
    cycle of `active` iterations, and per cycle of `opskew profile`'s
    schedule (`profile_active`)."""
    import torch

    if small is None:
        small = max(2, min(math.ceil(active / budget.SPREAD), math.floor(BUDGET_PROBE_S / max(steady_s, 1e-9))))
    sync = torch.cuda.synchronize if device == "cuda" else None
    m = budget.measure(workload.iteration, inst.options, inst._activities(), small, sync)
    peak_ok = m["model"]["peak_added_bytes"] is not None
    largest = budget.SPREAD * small
    return {"cycle": budget.at(m["model"], active), "profile_cycle": budget.at(m["model"], profile_active),
            "model": m["model"], "probes": m["probes"], "method": m["method"],
            "extrapolated": active / largest if active > largest else None,
            "weak": budget.weak_points(inst.options, device, peak_ok)}


def wait_reason(sch: dict, stabilization: dict) -> str:
    """Why the schedule waits `sch["wait"]` iterations, in words that agree
    with the stabilization the cold start measured: `wait` is at least 1, so
    a time stable from the first iteration gets a margin, not a claim that
    some iteration before it was unstable."""
    stable_from = stabilization["stable_from_iter"]
    if stable_from == 0:
        return (f"the time is stable from the first iteration (iteration 0), so wait={sch['wait']} "
                "is only a margin")
    return (f"wait={sch['wait']} skips the {stable_from} iteration(s) before the time stabilizes "
            f"(stable from iteration {stable_from})")


def self_correcting(options: dict, device: str) -> dict:
    """The same configuration under opskew.profile, whose traces are
    corrected from the run's own wait steps (docs/profile.md): the schedule
    it needs (wait >= REF_WAIT, for the pairs and opskew's leaf reference),
    as a drop-in and as `opskew profile`'s command line."""
    sch = dict(ADVISED_SCHEDULE)  # `opskew profile`'s defaults too: its command line needs no schedule flags
    flags = "".join(f" --{k.replace('_', '-')}" for k, v in sorted(options.items()) if v)
    kwargs = "".join(f", {k}=True" for k, v in sorted(options.items()) if v)
    acts = "CPU, ProfilerActivity.CUDA" if device == "cuda" else "CPU"
    return {"schedule": sch,
            "python": (f"opskew.profile(activities=[ProfilerActivity.{acts}]{kwargs}, "
                       f"schedule={schedule_call(sch)})"),
            "command": (f"opskew profile -o OUT{flags}" + (" --device cuda" if device == "cuda" else "")
                        + " -- python train.py"),
            "why": ("each trace corrected from this run's own wait steps: W per event measured on your "
                    f"workload; opskew's advised schedule: {ADVISED_WHY} (docs/profile.md)"),
            # What each capture shape gets (docs/profile.md, "Which W a trace gets").
            "captures": ("this schedule: W from the run's own pairs (in-run, the narrowest interval); a schedule "
                         "with few wait steps and bare steps after it, or start()/stop() with unprofiled steps "
                         "between captures (marked by the optimizer's step, or the outermost module's forward): W "
                         "from two samples of the run's own steps, where its interval is no wider than the model's; "
                         "a single `with` window, a first capture or a short schedule (Lightning's default): W from "
                         "the in-process model (about 150 ms once per process, an interval widened by how far it "
                         "misses workloads' own W); every one gets a corrected trace")}


def snippet(result: dict, args) -> str:
    cfg = result["recommended"]["options"]
    sch = result["recommended"]["schedule"]
    device = result["conditions"]["device"]
    acts = "ProfilerActivity.CPU" + (", ProfilerActivity.CUDA" if device == "cuda" else "")
    opts = "".join(f"    {k}={v},\n" for k, v in cfg.items())
    target = getattr(args, "target", None)
    lines = ["# Generated by `opskew advise`: " + result["recommended"]["why"],
             "import torch",
             "from torch.profiler import ProfilerActivity, profile, schedule", ""]
    if not target or target == "builtin:add":
        n, calls = args.numel, args.calls
        lines += [f"torch.set_num_threads({args.threads})",
                  f"a = torch.ones({n}, device={device!r})",
                  f"b = torch.ones({n}, device={device!r})", "",
                  "def step():",
                  f"    for _ in range({calls}):",
                  "        torch.add(a, b)", ""]
        call = "step()"
    else:
        modspec, _, fn = target.rpartition(":")
        if modspec.endswith(".py") or "/" in modspec:
            path = os.path.abspath(modspec)
            lines += ["import importlib.util", "",
                      f"_spec = importlib.util.spec_from_file_location('workload', {path!r})",
                      "workload = importlib.util.module_from_spec(_spec)",
                      "_spec.loader.exec_module(workload)"]
        else:
            lines += ["import importlib", "", f"workload = importlib.import_module({modspec!r})"]
        lines += [f"torch.set_num_threads({args.threads})"]
        if args.setup:
            lines += [f"state = workload.{args.setup}()", ""]
            star = {"positional": "*", "keywords": "**"}.get(result["conditions"]["workload"].get("setup_passes"), "")
            call = f"workload.{fn}({star}state)"
        else:
            lines += [""]
            call = f"workload.{fn}()"
    total = sch["wait"] + sch["warmup"] + sch["active"]
    lines += [
        "with profile(",
        f"    activities=[{acts}],",
        opts.rstrip("\n") + ("\n" if opts else "") +
        f"    schedule=schedule({schedule_args(sch)}),",
        f"    on_trace_ready=lambda p: p.export_chrome_trace({args.trace_file!r}),",
        ") as prof:",
        f"    for _ in range({total}):",
        f"        {call}",
        "        prof.step()",
        "",
    ]
    return "\n".join(line for line in lines if line is not None)


def compute(args) -> Computed:
    """Measures and analyses; prints nothing and writes only what the options
    name besides --json. `run` prints and writes; opskew.api returns it."""
    if args.max_events < 1:
        raise UsageError("--max-events must be at least 1")
    if args.cold_iters < 4:
        raise UsageError("--cold-iters must be at least 4")
    for name in ("active", "probe_iters"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("snippet_out",):
        path = getattr(args, name)
        if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise UsageError(f"--snippet-out: directory does not exist: {os.path.dirname(os.path.abspath(path))}")
    src = workload_files(args)
    check_output(args.snippet_out, what="snippet", inputs=src + [("the --json file", args.json)])
    check_output(args.json, inputs=src)
    if args.scope:
        # torch warns on every collection toggle (a C++ log line); quiet it
        # unless the user asked for a log level.
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    device = prepare(args)
    workload = load_workload(args, device)
    scope_mod = resolve_scope(args.scope, workload) if args.scope else None
    # Cold start, before anything else warms the workload: one iteration at a time.
    one = make_window(workload.iteration, 1, device)
    cold = []
    progress = progress_printer("opskew advise")
    if progress:
        progress.start("cold start", f"up to {args.cold_iters} single iterations, 10 s at most")
    t0 = time.perf_counter()
    try:
        for k in range(args.cold_iters):
            cold.append(one().wall_s)
            if progress:
                progress.update(k + 1, args.cold_iters, unit="iteration")
            if time.perf_counter() - t0 > 10 and len(cold) >= 4:
                break
    except Exception as exc:
        if progress:
            progress.end()
        raise UsageError(f"the workload raised on its first iterations: {type(exc).__name__}: {exc}") from exc
    cands = candidates(args.need, device)
    arms = {"baseline": None, **cands}
    if scope_mod is not None:
        first = next(iter(cands.values()))
        arms["scoped"] = ScopedProfiler(first, scope_mod, args.scope)
    rounds = measure_rounds.run_rounds(workload.iteration, arms, trials=args.trials, iters=args.iters,
                                       device=device, warmup_s=args.warmup, progress=progress)
    first = next(iter(cands.values()))
    result = {"schema": SCHEMA, "needs": args.need}
    result["conditions"] = conditions(device, args.threads, first, {
        "workload": {"target": workload.name, "description": workload.description,
                     "setup_passes": workload.params.get("setup_passes")},
        "trials": args.trials, "iters": args.iters})
    result["stabilization"] = stabilization(cold)
    if rounds.n:
        base = [w.wall_s for w in rounds.windows("baseline")]
        result["baseline_per_iter_s"] = _engine.quantile(base, 0.5) / args.iters
        result["candidates"] = {}
        for name, inst in cands.items():
            trials = rounds.trials[name]
            ev = [t.op_events for t in trials]
            walls = [t.window.wall_s for t in trials]
            per_ev = lambda xs: [x * 1e9 / e for x, e in zip(xs, ev)]  # noqa: E731
            result["candidates"][name] = {
                "label": inst.label(), "options": {k: v for k, v in inst.options.items() if v},
                "events_per_iter": _engine.quantile(ev, 0.5) / args.iters,
                "in_window_per_event_ns": per_event_diff(base, walls, ev),
                "stop_post_per_event_ns": estimate(per_ev([t.stop_s + t.post_s for t in trials]))["median"],
                # What the advised snippet pays: stop and export. Its
                # on_trace_ready never runs key_averages() (post_s).
                "stop_per_event_ns": estimate(per_ev([t.stop_s for t in trials]))["median"],
                "post_per_event_ns": estimate(per_ev([t.post_s for t in trials]))["median"],
                "export_per_event_ns": estimate(per_ev([t.export_s for t in trials]))["median"],
                "export_bytes_per_event": _engine.quantile([t.export_bytes / e for t, e in zip(trials, ev)], 0.5),
            }
        best_name = min(result["candidates"],
                        key=lambda k: result["candidates"][k]["in_window_per_event_ns"]["median"])
        best = result["candidates"][best_name]
        epi = best["events_per_iter"]
        result["events_per_iter"] = epi
        sch = schedule_for(epi, result["stabilization"]["stable_from_iter"], args.max_events, args.active)
        events = epi * sch["active"] * sch["repeat"]
        need_txt = ", ".join(args.need) or "operator timings only"
        others = [k for k in result["candidates"] if k != best_name]
        why = (f"cheapest configuration that records {need_txt}"
               + (f" (measured against {', '.join(others)})" if others else "")
               + f"; no stacks or shapes unless needed; {wait_reason(sch, result['stabilization'])}; "
               f"active={sch['active']} keeps the trace near {events:.3g} events (<= {args.max_events})")
        result["recommended"] = {
            "name": best_name, "label": best["label"], "options": best["options"],
            "schedule": sch, "why": why, "self_correcting": self_correcting(best["options"], result["conditions"]["device"]),
            "estimate": {
                "events": events,
                "trace_mb": events * best["export_bytes_per_event"] / 1e6,
                "active_slowdown": best["in_window_per_event_ns"]["median"] * 1e-9 * epi
                / result["baseline_per_iter_s"],
                "stop_export_s": events * (best["stop_per_event_ns"] + best["export_per_event_ns"]) * 1e-9,
            },
        }
        if not args.no_budget:
            result["recommended"]["budget"] = capture_budget(
                workload, cands[best_name], device, result["stabilization"]["steady_per_iter_s"], sch["active"],
                ADVISED_SCHEDULE["active"], args.probe_iters)
        if scope_mod is not None:
            s_trials = rounds.trials["scoped"]
            whole = [t.window.wall_s for t in rounds.trials[next(iter(cands))]]
            scoped = [t.window.wall_s for t in s_trials]
            ones = [args.iters] * len(base)
            d = per_event_diff(scoped, whole, ones)  # whole - scoped, per iteration
            result["scope"] = {
                "path": args.scope,
                "whole_added_per_iter_s": (_engine.quantile(whole, 0.5) - _engine.quantile(base, 0.5)) / args.iters,
                "scoped_added_per_iter_s": (_engine.quantile(scoped, 0.5) - _engine.quantile(base, 0.5)) / args.iters,
                "whole_events_per_iter": _engine.quantile([t.op_events for t in rounds.trials[next(iter(cands))]], 0.5) / args.iters,
                "scoped_events_per_iter": _engine.quantile([t.op_events for t in s_trials], 0.5) / args.iters,
                "difference_per_iter_s": d["median"] * 1e-9,
                "difference_ci95_s": [x * 1e-9 for x in d["ci95"]],
                "note": "scoped collection covers the submodule's forward only; RecordFunction still "
                        "runs for every operator while the profiler is open",
            }
        result["snippet"] = snippet(result, args)
        if args.snippet_out:
            write_file(args.snippet_out, result["snippet"])
    return conclude(rounds, result)
