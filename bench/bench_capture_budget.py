"""The capture budget of `opskew advise` (measure/budget.py) against the capture
itself: per workload and configuration, `opskew advise TARGET --active N`
estimates a cycle of N active iterations (the trace's size on disk, stop +
export time, the peak memory the profiler adds) from its short probes; then
the capture the advised snippet makes (torch.profiler with the advised options
and schedule(wait=1, warmup=1, active=N, repeat=1), exporting in
on_trace_ready) runs in fresh processes, and each figure is measured there:

- trace size: the exported file's bytes;
- stop + export: the prof.step() call that ends the active window (torch
  stops the trace there and runs on_trace_ready);
- peak memory added: the peak resident set (VmHWM, reset when the warmup step
  begins) less the resident set then, read after that step.

    .venv/bin/python bench/bench_capture_budget.py [--workloads tiny_loop,mlp_train,conv_train]
        [--configs minimal,shapes+stack] [--active 100] [--probe-iters N] [--runs 3] [--json OUT]

Workloads are bench/validate_profile.py's; configs: minimal (operator timings
only) and shapes+stack (advise --need shapes --need stacks: record_shapes, or
with_flops where advise measured it cheaper, with with_stack). The measured
figure is the median of --runs fresh processes, the first capture of each
(so it carries the profiler's start-up, which the probes, run after advise's
trials, do not). The target: every estimate within 30% of the measured figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

TARGET = """\
import os, sys
sys.path.insert(0, {here!r})
import validate_profile as vp

def setup():
    torch, step = vp._setup(os.environ["OPSKEW_BUDGET_WORKLOAD"])
    return step

def step(s):
    s()
"""

CAPTURE = r"""
import ctypes, gc, json, os, re, sys, tempfile, time
sys.path.insert(0, {here!r})
import validate_profile as vp
torch, step = vp._setup({workload!r})
vp._warm(step, 0.4)

def kb(key):
    return int(re.search(key + r":\s+(\d+) kB", open("/proc/self/status").read()).group(1))

fd, path = tempfile.mkstemp(prefix="opskew-bench-budget-", suffix=".json")
os.close(fd)
out = {{}}
def ready(p):
    p.export_chrome_trace(path)

n = {active}
prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                              schedule=torch.profiler.schedule(wait=1, warmup=1, active=n, repeat=1),
                              on_trace_ready=ready, **{options!r})
prof.start()
try:
    for i in range(2 + n):
        if i == 1:  # the warmup step: the profiler is opened here
            gc.collect()
            ctypes.CDLL(None).malloc_trim(0)
            rss0 = kb("VmRSS")
            open("/proc/self/clear_refs", "w").write("5")
        step()
        if i == 1 + n:
            t0 = time.perf_counter()
            prof.step()  # the last active step ends: stop, then on_trace_ready's export
            out["stop_export_s"] = time.perf_counter() - t0
            out["peak_added_bytes"] = (kb("VmHWM") - rss0) * 1024
        else:
            prof.step()
    prof.stop()
    out["trace_bytes"] = os.path.getsize(path)
finally:
    os.unlink(path)
print(json.dumps(out))
"""

CONFIGS = {"minimal": [], "shapes+stack": ["--need", "shapes", "--need", "stacks"]}
FIGURES = (("trace_bytes", "trace size", 1e-6, "MB"), ("stop_export_s", "stop + export", 1e3, "ms"),
           ("peak_added_bytes", "peak memory added", 1e-6, "MB"))


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def advise(target: str, workload: str, config: str, active: int, tmp: str, probe: int | None) -> dict:
    js = os.path.join(tmp, f"advise-{workload}-{config}.json")
    cmd = [sys.executable, "-m", "opskew", "advise", f"{target}:step", "--setup", "setup", *CONFIGS[config],
           "--active", str(active), "--trials", "3", "--iters", "5", "--warmup", "0.2", "--json", js]
    if probe:
        cmd += ["--probe-iters", str(probe)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OPSKEW_BUDGET_WORKLOAD=workload))
    if p.returncode != 0:
        raise SystemExit(f"opskew advise failed ({workload}, {config}):\n{p.stderr[-2000:]}")
    with open(js, encoding="utf-8") as f:
        return json.load(f)


def capture(workload: str, options: dict, active: int) -> dict:
    code = CAPTURE.format(here=HERE, workload=workload, active=active, options=options)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise SystemExit(f"capture failed ({workload}, {options}):\n{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="tiny_loop,mlp_train,conv_train")
    ap.add_argument("--configs", default="minimal,shapes+stack")
    ap.add_argument("--active", type=int, default=100, help="active iterations of the capture (default: 100)")
    ap.add_argument("--runs", type=int, default=3, help="fresh capture processes per row (default: 3)")
    ap.add_argument("--probe-iters", type=int, help="advise's smaller probe (default: advise's own choice, "
                    "a quarter of --active here); smaller extrapolates further")
    ap.add_argument("--json", metavar="OUT")
    a = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="opskew-bench-budget-") as tmp:
        target = os.path.join(tmp, "budget_target.py")
        with open(target, "w", encoding="utf-8") as f:
            f.write(TARGET.format(here=HERE))
        for wl in a.workloads.split(","):
            for cfg in a.configs.split(","):
                adv = advise(target, wl, cfg, a.active, tmp, a.probe_iters)
                rec = adv["recommended"]
                b = rec["budget"]
                runs = [capture(wl, rec["options"], a.active) for _ in range(a.runs)]
                measured = {k: median([r[k] for r in runs]) for k, *_ in FIGURES}
                est = b["cycle"]
                row = {"workload": wl, "config": cfg, "options": rec["options"], "active": a.active,
                       "probes": f"{b['probes'][0]['iters']} and {b['probes'][1]['iters']} iterations",
                       "estimate": {k: est[k] for k, *_ in FIGURES}, "measured": measured,
                       "runs": runs, "ratio": {k: (est[k] / measured[k] if est[k] is not None and measured[k]
                                                   else None) for k, *_ in FIGURES}}
                rows.append(row)
                print(f"{wl:11s} {cfg:13s} " + "  ".join(
                    f"{name} {est[k] * s:.3g} / {measured[k] * s:.3g} {u} (x{row['ratio'][k]:.2f})"
                    if row["ratio"][k] is not None else f"{name} n/a" for k, name, s, u in FIGURES), flush=True)
        cond = adv["conditions"]
    within = [abs(r["ratio"][k] - 1) <= 0.3 for r in rows for k, *_ in FIGURES if r["ratio"][k] is not None]
    print(f"\n{sum(within)} of {len(within)} estimates within 30% of the measured figure "
          f"(torch {cond['torch']}, {cond['device']}, {cond.get('cpu')}, {cond['threads']} thread(s); "
          f"capture of {a.active} active iterations, probes of {rows[0]['probes']}, median of {a.runs} fresh "
          "processes)")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"conditions": cond, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
