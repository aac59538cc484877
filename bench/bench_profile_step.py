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


class _OpskewRecordFunction(opskew.profile):
    """opskew.profile with its ProfilerStep#N ranges opened through torch's
    record_function, as when its native shim is unavailable."""

    def _step_ranges(self):
        self.step_ranges = {"route": "record_function", "why": "bench"}


ROWS = (("torch", torch.profiler.profile, {}),
        ("opskew", opskew.profile, {"report_file": None, "measure_w_py": False}),
        ("opskew-rf", _OpskewRecordFunction, {"report_file": None, "measure_w_py": False}))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    a = torch.ones(4)
    bodies = {"empty": lambda: None, "10 x add": lambda: [a + 1 for _ in range(10)],
              "200 x add": lambda: [a + 1 for _ in range(200)]}
    print(f"torch {torch.__version__}, CPU, 1 thread, {os.cpu_count()} cores; {args.rounds} interleaved rounds "
          f"of {args.steps} steps; medians over rounds (range). opskew-rf: opskew.profile with its ranges "
          f"opened through record_function (no native shim)")
    print(f"{'body':9s} {'config':26s} {'ProfilerStep#N us: torch':>25s} {'opskew':>8s} {'ratio':>6s} "
          f"{'opskew-rf':>10s} {'ratio':>6s}   {'step() us: torch':>17s} {'opskew':>8s} {'opskew-rf':>10s}")
    with tempfile.TemporaryDirectory(prefix="opskew-bench-") as d:
        for bname, body in bodies.items():
            for cname, opts in CONFIGS.items():
                res = {name: [] for name, _, _ in ROWS}
                for r in range(args.rounds):
                    for name, cls, extra in (ROWS if r % 2 == 0 else ROWS[::-1]):
                        res[name].append(one(cls, opts, args.steps, body, d, extra))
                    print(".", end="", file=sys.stderr, flush=True)
                rng = {k: [x[0] for x in v] for k, v in res.items()}
                med = {k: statistics.median(v) for k, v in rng.items()}
                call = {k: statistics.median(x[1] for x in v) for k, v in res.items()}
                t = rng["torch"]
                print(f"\r{bname:9s} {cname:26s} {med['torch']:14.1f} ({min(t):.1f}-{max(t):.1f}) "
                      f"{med['opskew']:8.1f} {med['opskew'] / med['torch']:6.2f} "
                      f"{med['opskew-rf']:10.1f} {med['opskew-rf'] / med['torch']:6.2f}   "
                      f"{call['torch']:17.1f} {call['opskew']:8.1f} {call['opskew-rf']:10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
