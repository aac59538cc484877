"""Why a profiled process's unprofiled steps run slow (issue 36; docs/cuda.md,
"Wait steps after the profiler"): the same workload's steps, timed in fresh
processes that differ only in what the profiler did before them.

Arms, each in a child process of its own, their order rotated every round:

  bare            no profiler: the workload warmed up, then --steps steps timed.
  started         torch.profiler started and stopped once (a --trace-steps
                  trace, exported to a temporary file), then --settle steps
                  left out and --steps timed: what a trace leaves behind.
  no-export       the same trace, not exported: export's own share.
  cpu-activity    the same trace with activities=[CPU] only: CUPTI never
                  subscribed (CUDA only; on CPU it is `started`).
  empty-cache     `started`, then torch.cuda.synchronize() and
                  torch.cuda.empty_cache() before the timed steps: the caching
                  allocator's share (CUDA only).
  between-cycles  torch.profiler with schedule(wait=--wait, warmup=1,
                  active=--trace-steps, repeat=3) and an exporting
                  on_trace_ready: the wait steps of the 2nd and 3rd cycles past
                  --settle, the steps opskew.profile pairs with.

Each arm's figure is its median step over the bare arm's median step of the
same round; the table gives the median over rounds with the rounds' range.
--device cuda runs bench/validate_profile.py's cuda_train (a small MLP
training step, synchronized per step); --device cpu its mlp_train, so the
script runs and is tested without a GPU.

    .venv/bin/python bench/bench_cuda_wait.py --device cpu --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ARMS = ("bare", "started", "no-export", "cpu-activity", "empty-cache", "between-cycles")
CUDA_ONLY = {"cpu-activity", "empty-cache"}
WORKLOAD = {"cuda": "cuda_train", "cpu": "mlp_train"}


def _activities(torch, device: str, cuda_activity: bool = True):
    acts = [torch.profiler.ProfilerActivity.CPU]
    if device == "cuda" and cuda_activity:
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    return acts


def _timed(step, n: int) -> list:
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        step()
        out.append(time.perf_counter_ns() - t0)
    return out


def child(arm: str, device: str, steps: int, settle: int, trace_steps: int, wait: int) -> list:
    """The timed steps (ns) of one arm, in this process; its traces go to a
    temporary folder removed at the end."""
    with tempfile.TemporaryDirectory(prefix="opskew-cuda-wait-") as tmp:
        return _arm(arm, device, steps, settle, trace_steps, wait, tmp)


def _arm(arm: str, device: str, steps: int, settle: int, trace_steps: int, wait: int, tmp: str) -> list:
    sys.path.insert(0, HERE)
    import validate_profile as vp

    torch, step = vp._setup(WORKLOAD[device])
    vp._warm(step, 0.4)
    if arm == "bare":
        return _timed(step, steps)
    if arm == "between-cycles":
        times, phase = [], {}
        sch = torch.profiler.schedule(wait=wait, warmup=1, active=trace_steps, repeat=3)
        n = 0

        def ready(p):
            p.export_chrome_trace(os.path.join(tmp, f"t{n}.json"))

        with torch.profiler.profile(activities=_activities(torch, device), schedule=sch, on_trace_ready=ready) as p:
            for i in range(3 * (wait + 1 + trace_steps)):
                t0 = time.perf_counter_ns()
                step()
                times.append(time.perf_counter_ns() - t0)
                phase[i] = (i // (wait + 1 + trace_steps), i % (wait + 1 + trace_steps))
                n = i
                p.step()
        # The wait steps of cycles 2 and 3 past the settle: after a trace.
        return [t for i, t in enumerate(times) if phase[i][0] >= 1 and settle <= phase[i][1] < wait]
    acts = _activities(torch, device, cuda_activity=arm != "cpu-activity")
    with torch.profiler.profile(activities=acts) as p:
        for _ in range(trace_steps):
            step()
    if arm != "no-export":
        p.export_chrome_trace(os.path.join(tmp, "t.json"))
    if arm == "empty-cache":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    _timed(step, settle)
    return _timed(step, steps)


def run(args) -> dict:
    arms = [a for a in ARMS if args.device == "cuda" or a not in CUDA_ONLY]
    rounds = []
    for r in range(args.rounds):
        order = arms[r % len(arms):] + arms[:r % len(arms)]
        got = {}
        for arm in order:
            cmd = [sys.executable, os.path.abspath(__file__), "--child", arm, "--device", args.device,
                   "--steps", str(args.steps), "--settle", str(args.settle),
                   "--trace-steps", str(args.trace_steps), "--wait", str(args.wait)]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
            if p.returncode != 0:
                raise SystemExit(f"bench_cuda_wait: arm {arm} failed (exit {p.returncode}):\n{p.stderr[-2000:]}")
            got[arm] = statistics.median(json.loads(p.stdout.strip().splitlines()[-1]))
        rounds.append(got)
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{a} {got[a] / 1e3:.1f} us" for a in arms),
              file=sys.stderr)
    table = {}
    for arm in arms:
        ratios = [rd[arm] / rd["bare"] for rd in rounds]
        table[arm] = {"median_step_ns": statistics.median(rd[arm] for rd in rounds),
                      "over_bare": statistics.median(ratios), "range": [min(ratios), max(ratios)]}
    return {"schema": "opskew.bench_cuda_wait/1", "device": args.device, "workload": WORKLOAD[args.device],
            "rounds": args.rounds, "steps": args.steps, "settle": args.settle, "arms": table}


def render(doc: dict) -> str:
    lines = [f"wait steps after the profiler: {doc['workload']} on {doc['device']}, "
             f"{doc['rounds']} rounds x {doc['steps']} steps, medians over rounds (range)",
             f"{'arm':<16} {'median step':>12} {'over bare':>10}  range"]
    for arm, r in doc["arms"].items():
        lo, hi = r["range"]
        lines.append(f"{arm:<16} {r['median_step_ns'] / 1e3:>9.1f} us {r['over_bare']:>9.3f}x  "
                     f"[{lo:.3f}, {hi:.3f}]")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=60, help="steps timed per arm (default 60)")
    ap.add_argument("--settle", type=int, default=8, help="steps left out after a trace (default 8)")
    ap.add_argument("--trace-steps", type=int, default=5, help="steps in each trace (default 5)")
    ap.add_argument("--wait", type=int, default=21, help="between-cycles: the schedule's wait (default 21)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per arm's process (default 300)")
    ap.add_argument("--json", metavar="PATH", help="also write the table as JSON")
    ap.add_argument("--child", choices=ARMS, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.steps < 5 or args.trace_steps < 1 or not 0 <= args.settle < args.wait:
        ap.error("--rounds must be at least 1, --steps at least 5, --trace-steps at least 1 and "
                 "--settle at least 0 and below --wait")
    if args.child:
        print(json.dumps(child(args.child, args.device, args.steps, args.settle, args.trace_steps, args.wait)))
        return 0
    if args.device == "cuda":
        import torch
        if not torch.cuda.is_available():
            print("bench_cuda_wait: no CUDA device: nothing measured (--device cpu runs the CPU twin)",
                  file=sys.stderr)
            return 0
    doc = run(args)
    print(render(doc))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
