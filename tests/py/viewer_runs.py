"""Runs for the real viewers' tests (tests/py/test_tb_plugin.py): a program of
its own, because TensorBoard's profiler plugin loads each trace in a spawned
process and so must be driven from under a __main__ guard.

  python viewer_runs.py train OUT MODEL,... CONFIG,...
      trains each model of bench/validate_profile.py under opskew.profile
      with each configuration, tensorboard_trace_handler(OUT/raw) and the
      worker name MODEL-CONFIG, two cycles each: raw traces in OUT/raw,
      corrected ones in OUT/raw/corrected (opskew's layout).
  python viewer_runs.py load DIR...
      loads each DIR as one run with the plugin's RunLoader, and prints one
      JSON line per DIR: {"dir", "profiles": {WORKER|SPAN: {"steps",
      "operators"}}}, then a line "viewer_runs: loaded DIR" on stderr, so
      that what the plugin logged for DIR (on stderr, from its processes)
      comes before that line.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "bench")

# Two cycles of 13 steps: with no stored calibration, cycle 1 pairs too few
# steps for W and is corrected at stop() with the run's W, cycle 2 at once
# (test_profile_cli.SMALL).
STEPS = 28


def train(out, models, configs):
    import torch

    import opskew

    sys.path.insert(0, BENCH)
    from validate_profile import CONFIGS, WORKLOADS

    torch.set_num_threads(1)
    raw = os.path.join(out, "raw")
    for model in models:
        for config in configs:
            step = WORKLOADS[model][0]()
            sched = torch.profiler.schedule(skip_first=2, wait=8, warmup=1, active=4, repeat=2)
            worker = f"{model}-{config.replace('+', '_')}"
            with opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched, report_file=None,
                                on_trace_ready=torch.profiler.tensorboard_trace_handler(raw, worker_name=worker),
                                **CONFIGS[config]) as prof:
                for _ in range(STEPS):
                    step()
                    prof.step()
            corrected = [r.get("corrected_trace") for r in prof.reports]
            print(json.dumps({"worker": worker, "corrected": corrected}), flush=True)


def load(dirs):
    from torch_tb_profiler import io
    from torch_tb_profiler.profiler.loader import RunLoader

    for d in dirs:
        run = RunLoader(os.path.basename(d), d, io.Cache()).load()
        profiles = {}
        for (worker, span), prof in run.profiles.items():
            table = prof.operation_table_by_name or {}
            rows = table.get("data") if isinstance(table, dict) else None
            profiles[f"{worker}|{span}"] = {
                "steps": len(((prof.overview or {}).get("steps") or {}).get("rows") or []),
                "operators": sorted({r["name"] for r in rows or []}),
            }
        print(json.dumps({"dir": d, "profiles": profiles}), flush=True)
        sys.stderr.flush()
        sys.stderr.write(f"viewer_runs: loaded {d}\n")
        sys.stderr.flush()


if __name__ == "__main__":
    if sys.argv[1] == "train":
        train(sys.argv[2], sys.argv[3].split(","), sys.argv[4].split(","))
    elif sys.argv[1] == "load":
        load(sys.argv[2:])
    else:
        sys.exit(f"viewer_runs: unknown mode {sys.argv[1]!r}")
