"""The per-operator verdict's three corrections (W's median and both ends of
its CI; opskew.verdict.per_operator, what opskew.profile runs on every trace
and again at stop()) one after another against side by side in threads.

    .venv/bin/python bench/bench_verdict.py [--steps 7,50,200]
        [--configs minimal,record_shapes+with_stack] [--repeat 7]

For each number of steps and configuration, a trace of bench/validate_profile.py's
mlp_train under torch.profiler (made once, in a temporary folder), then
per_operator on it, alternately serial (as if the process could use one CPU)
and side by side (as many threads as the CPUs this process may use, up to 3),
--repeat times each; the medians, their ratio, and each arm's peak RSS in a
child process of its own (VmHWM: the trace's reading and the
corrections, over the interpreter with torch and opskew imported). Both arms
must give the same figures, or the bench fails. Timing only: a side by side in
one run, on a machine whose speed moves from minute to minute.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = {"minimal": {}, "record_shapes+with_stack": {"record_shapes": True, "with_stack": True}}
W = {"median": 300.0, "ci95": [250.0, 400.0]}
W_PY = {"median": 120.0, "ci95": [100.0, 150.0]}


def make_trace(path, steps, config):
    sys.path.insert(0, HERE)
    import validate_profile as vp

    torch, step = vp._setup("mlp_train")
    vp._warm(step, 0.3)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], **CONFIGS[config]) as p:
        for _ in range(steps):
            step()
    p.export_chrome_trace(path)


_CPUS = []


def verdict(path, serial):
    from opskew.analyze import verdict as v
    from opskew.stats.costmodel import CostModel

    if not _CPUS:
        _CPUS.append(v.usable_cpus)
    v.usable_cpus = (lambda: 1) if serial else _CPUS[0]
    try:
        return v.per_operator(path, CostModel.default(W, 50.0, W_PY, 20.0))
    finally:
        v.usable_cpus = _CPUS[0]


def child(path, serial):
    """One verdict in this process; prints its peak RSS in KiB (VmHWM: this
    process image's own; ru_maxrss keeps the parent's across fork and exec)."""
    import torch  # noqa: F401 - the interpreter as opskew.profile runs in it

    verdict(path, serial)
    with open("/proc/self/status") as f:
        print(next(ln.split()[1] for ln in f if ln.startswith("VmHWM:")))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", default="7,50,200", help="steps per trace, comma-separated (7,50,200)")
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"of {', '.join(CONFIGS)} (both)")
    ap.add_argument("--repeat", type=int, default=7, help="timed verdicts per arm (7)")
    ap.add_argument("--child", nargs=2, metavar=("TRACE", "SERIAL"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return child(a.child[0], a.child[1] == "1")
    try:
        steps = [int(x) for x in a.steps.split(",")]
    except ValueError:
        ap.error(f"--steps: whole numbers, comma-separated, not {a.steps!r}")
    configs = a.configs.split(",")
    if any(n < 1 for n in steps) or a.repeat < 1:
        ap.error("--steps and --repeat must be at least 1")
    bad = [c for c in configs if c not in CONFIGS]
    if bad:
        ap.error(f"--configs: unknown {', '.join(bad)}; one of {', '.join(CONFIGS)}")
    from opskew.host import usable_cpus

    import torch

    print(f"# {datetime.date.today()}, torch {torch.__version__}, {usable_cpus()} usable CPU(s), "
          f"mlp_train, {a.repeat} verdicts per arm, medians")
    print(f"{'config':<26}{'steps':>6}{'MB':>7}{'serial ms':>11}{'threads ms':>12}{'ratio':>7}"
          f"{'serial RSS MiB':>16}{'threads RSS MiB':>17}")
    tmp = tempfile.mkdtemp(prefix="opskew-bench-verdict-")
    try:
        for config in configs:
            for n in steps:
                path = os.path.join(tmp, f"{config}-{n}.json")
                make_trace(path, n, config)
                one, many = verdict(path, True), verdict(path, False)
                if one["ops"] != many["ops"]:
                    raise SystemExit(f"{config} {n} steps: the two arms' figures differ")
                times = {True: [], False: []}
                for _ in range(a.repeat):
                    for serial in (True, False):
                        t0 = time.perf_counter_ns()
                        verdict(path, serial)
                        times[serial].append(time.perf_counter_ns() - t0)
                s, t = statistics.median(times[True]), statistics.median(times[False])
                rss = {}
                for serial in (True, False):
                    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", path,
                                        "1" if serial else "0"], capture_output=True, text=True, check=True)
                    rss[serial] = int(p.stdout.split()[-1]) / 1024
                print(f"{config:<26}{n:>6}{os.path.getsize(path) / 1e6:>7.1f}{s / 1e6:>11.2f}{t / 1e6:>12.2f}"
                      f"{t / s:>6.2f}x{rss[True]:>16.1f}{rss[False]:>17.1f}", flush=True)
                os.unlink(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # this run's traces, in a folder of its own


if __name__ == "__main__":
    main()
