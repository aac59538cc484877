"""What `opskew.profile` adds to a step, side by side with torch.profiler.profile.

An empty loop body (and a tiny one) under each, same schedule, same process,
interleaved rounds: the median duration of the `ProfilerStep#N` ranges of the
active steps (what a trace shows as the step), and the wall time of one
`step()` call (opskew's bookkeeping, the profiler's transitions), per
configuration. Ratios opskew / torch are printed with the conditions.

    .venv/bin/python bench/bench_profile_step.py [--rounds 5] [--steps 40]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("KINETO_LOG_LEVEL", "6")

import torch  # noqa: E402

import opskew  # noqa: E402

CONFIGS = {"minimal": {}, "record_shapes+with_stack": {"record_shapes": True, "with_stack": True}}


def one(cls, opts, steps, body, folder, extra):
    path = os.path.join(folder, "t.json")
    sched = torch.profiler.schedule(wait=8, warmup=1, active=7, repeat=max(1, steps // 16))
    calls = []
    with cls(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched,
             on_trace_ready=lambda p: p.export_chrome_trace(path), **opts, **extra) as p:
        for _ in range(steps):
            body()
            t0 = time.perf_counter_ns()
            p.step()
            calls.append(time.perf_counter_ns() - t0)
    with open(path) as f:
        ev = json.load(f)["traceEvents"]
    dur = [e["dur"] for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")]
    # step() calls that ran no trace transition (the common case).
    quiet = sorted(calls)[: len(calls) * 3 // 4]
    return statistics.median(dur), statistics.median(quiet) / 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    a = torch.ones(4)
    bodies = {"empty": lambda: None, "10 x add": lambda: [a + 1 for _ in range(10)]}
    print(f"torch {torch.__version__}, CPU, 1 thread, {os.cpu_count()} cores; {args.rounds} interleaved rounds "
          f"of {args.steps} steps; medians over rounds (range)")
    print(f"{'body':9s} {'config':26s} {'ProfilerStep#N us: torch':>25s} {'opskew':>8s} {'ratio':>6s}   "
          f"{'step() us: torch':>17s} {'opskew':>8s}")
    with tempfile.TemporaryDirectory(prefix="opskew-bench-") as d:
        for bname, body in bodies.items():
            for cname, opts in CONFIGS.items():
                res = {"torch": [], "opskew": []}
                for r in range(args.rounds):
                    order = [("torch", torch.profiler.profile, {}),
                             ("opskew", opskew.profile, {"report_file": None, "measure_w_py": False})]
                    for name, cls, extra in (order if r % 2 == 0 else order[::-1]):
                        res[name].append(one(cls, opts, args.steps, body, d, extra))
                    print(".", end="", file=sys.stderr, flush=True)
                t = [x[0] for x in res["torch"]]
                o = [x[0] for x in res["opskew"]]
                tc = [x[1] for x in res["torch"]]
                oc = [x[1] for x in res["opskew"]]
                mt, mo = statistics.median(t), statistics.median(o)
                print(f"\r{bname:9s} {cname:26s} {mt:14.1f} ({min(t):.1f}-{max(t):.1f}) {mo:8.1f} {mo / mt:6.2f}   "
                      f"{statistics.median(tc):17.1f} {statistics.median(oc):8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
