"""What opskew.profile adds to the user's loop, against torch's own stop and
export: per traced cycle, torch's stop (report stop_ns), the export
(on_trace_ready_ns), opskew's own work in the step() that ends the cycle
(opskew_ns), and the median step() call of a wait step. Side by side with
another installation of opskew (--baseline-pythonpath, a `pip install
--target` folder), alternating processes, medians over --rounds.

  python bench/bench_cycle_pause.py --baseline-pythonpath /tmp/oldopskew --rounds 3
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, statistics, sys, tempfile, time, torch, opskew
sys.path.insert(0, sys.argv[1])
from validate_profile import CONFIGS, WORKLOADS
torch.set_num_threads(1)
step = WORKLOADS[sys.argv[2]][0]()
d = tempfile.mkdtemp()
sched = torch.profiler.schedule(skip_first=2, wait=14, warmup=1, active=6, repeat=3)
with opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched, report_file=None,
                    on_trace_ready=torch.profiler.tensorboard_trace_handler(d), **CONFIGS[sys.argv[3]]) as p:
    for _ in range(2 + 21 * 3 + 5):
        step()
        p.step()
reps = [r for r in p.reports if r.get("opskew_ns") is not None]
waits = [c["ns"] for c in p.step_calls if not c.get("on_trace_ready_ns") and not c.get("stop")]
print(json.dumps({"stop_ns": [r["stop_ns"] for r in reps], "export_ns": [r["on_trace_ready_ns"] for r in reps],
                  "opskew_ns": [r["opskew_ns"] for r in reps], "wait_step_call_ns": statistics.median(waits),
                  "version": opskew.__version__, "integrations": os.path.isdir(os.path.join(
                      os.path.dirname(opskew.__file__), "integrations"))}))
"""


def run(pythonpath, workload, config, cache):
    env = dict(os.environ, OPSKEW_CACHE_DIR=cache)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    bench = os.path.dirname(os.path.abspath(__file__))
    p = subprocess.run([sys.executable, "-c", CHILD, bench, workload, config], capture_output=True, text=True,
                       env=env, timeout=600)
    if p.returncode:
        sys.exit(p.stderr[-2000:])
    return json.loads(p.stdout.splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline-pythonpath", required=True, help="a folder holding another opskew (pip --target)")
    ap.add_argument("--workload", default="tfm_encoder")
    ap.add_argument("--config", default="record_shapes+with_stack")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    out = {"this": [], "baseline": []}
    with tempfile.TemporaryDirectory() as cache:
        for r in range(a.rounds):
            for arm in (("this", "baseline") if r % 2 == 0 else ("baseline", "this")):
                out[arm].append(run(None if arm == "this" else a.baseline_pythonpath, a.workload, a.config,
                                    os.path.join(cache, arm)))
    med = {arm: {k: statistics.median([v for x in rs for v in (x[k] if isinstance(x[k], list) else [x[k]])])
                 for k in ("stop_ns", "export_ns", "opskew_ns", "wait_step_call_ns")} for arm, rs in out.items()}
    print(f"{a.workload}, {a.config}, {a.rounds} rounds, medians over cycles (ms; wait step() in us)")
    for k in ("stop_ns", "export_ns", "opskew_ns", "wait_step_call_ns"):
        scale = 1e3 if k == "wait_step_call_ns" else 1e6
        t, b = med["this"][k] / scale, med["baseline"][k] / scale
        print(f"  {k:18} this {t:9.3f}  baseline {b:9.3f}  ratio {t / b if b else float('nan'):.2f}")


if __name__ == "__main__":
    main()
