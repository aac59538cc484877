"""Validation of the captures people make without opskew's schedule
(docs/profile.md, "W with no pairs: the in-process model"), with nothing
stored (an empty OPSKEW_CACHE_DIR), so each gets W from the in-process model
or from its own bare steps:

  window      torch's recipe: `with opskew.profile(...)` around 12 steps,
              no schedule, no step();
  startstop   one profiler, start() ... stop() three times around 6 steps,
              8 unprofiled steps between (the serving and training shape);
  documented  torch's documented schedule(wait=1, warmup=1, active=3,
              repeat=2) with prof.step(), nothing after it;
  lightning   Lightning's default schedule(wait=1, warmup=1, active=3),
              repeating, 20 steps with prof.step().

Every step of every shape runs inside record_function("vc::step#N"); the
corrected step is the median duration of those ranges in the corrected
traces opskew wrote (the C reader), the raw step the same in the raw
traces. The bare step is the same process's own: the median of
--bare-steps bare steps before the capture and of as many after it (10
steps after, a capture's stop and export leave the next ones slow), their
mean; the 2-core VM drifts between processes by 10 to 25%, within one
process by a few %. Per round, a bare process, one process per shape, and
a bare process again: the error against the two bare processes' mean is
kept too (corrected_err_vs_bare_processes). The row gives medians over
--rounds rounds.

    .venv/bin/python bench/validate_capture.py --json <tmp>/vcap.json

Workloads: bench/validate_profile.py's (training steps, and forward-only
inference steps of torch.nn models: tfm_infer, mha_infer)."""

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
sys.path.insert(0, HERE)

import validate_profile as vp  # noqa: E402

SHAPES = ("window", "startstop", "documented", "lightning")
CONFIGS = {"minimal": {}, "record_shapes+with_stack": {"record_shapes": True, "with_stack": True}}
DEFAULT_WORKLOADS = "mlp_train,dispatch_heavy,tfm_encoder,lstm_lm,mha_block,tfm_infer"
STEP = "vc::step"
SETTLE = 10  # steps after a capture before its own bare steps are timed


def describe(name):
    return vp.WORKLOADS[name][2]


def make(name):
    import torch
    maker, threads, _ = vp.WORKLOADS[name]
    torch.set_num_threads(threads)
    return torch, maker()


# ------------------------------------------------------------------ children
def child_bare(a):
    torch, step = make(a.workload)
    vp._warm(step, a.warmup_s)
    ts = []
    for _ in range(a.bare_steps):
        t0 = time.perf_counter_ns()
        with torch.profiler.record_function(STEP):  # as in the profiled shapes (bare, it records nothing)
            step()
        ts.append(time.perf_counter_ns() - t0)
    return {"bare_step_ns": statistics.median(ts)}


def _steps_in(path):
    """Each vc::step#N range's duration (ns) in the trace at `path` (the C
    reader: one row per name, so each step its own)."""
    from opskew.analyze.tracefile import summarize
    s = summarize(path, categories=["user_annotation"])
    return [o["total_ns"] for o in s["ops"] if o["name"].startswith(STEP + "#") and o["calls"] == 1]


def _bare(torch, step, n):
    """The median of `n` bare steps (each in its record_function, as profiled)."""
    ts = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        with torch.profiler.record_function(STEP):
            step()
        ts.append(time.perf_counter_ns() - t0)
    return statistics.median(ts)


def child_shape(a):
    torch, step = make(a.workload)
    import opskew
    vp._warm(step, a.warmup_s)
    bare_before = _bare(torch, step, a.bare_steps)
    out = tempfile.mkdtemp(prefix="vcap-", dir=a.tmp)
    kw = dict(activities=[torch.profiler.ProfilerActivity.CPU], corrected_dir=out, report_file=None,
              **CONFIGS[a.config])

    n = [0]

    def one(prof=None):
        n[0] += 1
        with torch.profiler.record_function(f"{STEP}#{n[0]}"):
            step()
        if prof is not None:
            prof.step()

    t0 = time.perf_counter()
    if a.shape == "window":
        with opskew.profile(**kw) as prof:
            for _ in range(12):
                one()
    elif a.shape == "startstop":
        prof = opskew.profile(**kw)
        for _ in range(3):
            prof.start()
            for _ in range(6):
                one()
            prof.stop()
            for _ in range(8):
                one()
    elif a.shape == "documented":
        with opskew.profile(schedule=torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=2), **kw) as prof:
            for _ in range(10):
                one(prof)
    else:  # lightning's default
        with opskew.profile(schedule=torch.profiler.schedule(wait=1, warmup=1, active=3), **kw) as prof:
            for _ in range(20):
                one(prof)
    took = time.perf_counter() - t0
    for _ in range(SETTLE):
        step()  # a capture's stop and export leave the next steps slow
    bare_after = _bare(torch, step, a.bare_steps)
    raw, cor, reps = [], [], []
    for r in prof.reports:
        if r.get("raw_trace"):
            raw += _steps_in(r["raw_trace"])
        if r.get("corrected_trace"):
            cor += _steps_in(r["corrected_trace"])
        m = r.get("w_model_ns") or {}
        reps.append({"w_source": r.get("w_source"), "w_ns": (r.get("w_ns") or {}).get("median"),
                     "ci95": (r.get("w_ns") or {}).get("ci95"), "model_ns": r.get("model_ns"),
                     "stop_ns": r.get("stop_ns"), "export_ns": r.get("on_trace_ready_ns"),
                     "model_budget": m.get("budget"), "model_rounds": m.get("rounds"),
                     "check": m.get("check"), "fallback": r.get("fallback")})
    return {"own_bare_step_ns": (bare_before + bare_after) / 2, "own_bare_before_after_ns": [bare_before, bare_after],
            "raw_step_ns": statistics.median(raw) if raw else None,
            "corrected_step_ns": statistics.median(cor) if cor else None,
            "corrected_traces": sum(1 for r in prof.reports if r.get("corrected_trace")),
            "traces": len(prof.reports), "reports": reps, "loop_s": took}


def run_child(kind, a, workload, config=None, shape=None):
    fd, out = tempfile.mkstemp(prefix="vcap-child-", suffix=".json", dir=a.tmp)
    os.close(fd)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, "--workload", workload, "--child-out", out,
           "--tmp", a.tmp, "--warmup-s", str(a.warmup_s), "--bare-steps", str(a.bare_steps)]
    if config:
        cmd += ["--config", config]
    if shape:
        cmd += ["--shape", shape]
    env = dict(os.environ, OPSKEW_CACHE_DIR=os.path.join(a.tmp, "empty-cache"))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=a.child_timeout)
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"}
    with open(out) as f:
        return json.load(f)


def err(x, bare):
    return None if x is None or not bare else x / bare - 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default=DEFAULT_WORKLOADS, help=f"comma-separated (default {DEFAULT_WORKLOADS})")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated (default: both)")
    ap.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated (default: all four)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per row (default 3)")
    ap.add_argument("--bare-steps", type=int, default=40, help="timed steps per bare process (default 40)")
    ap.add_argument("--warmup-s", type=float, default=0.4, help="warm-up of each process (default 0.4 s)")
    ap.add_argument("--json", help="write every row (with its rounds) here")
    ap.add_argument("--child-timeout", type=float, default=300)
    ap.add_argument("--child", choices=("bare", "shape"), help=argparse.SUPPRESS)
    ap.add_argument("--workload", help=argparse.SUPPRESS)
    ap.add_argument("--config", help=argparse.SUPPRESS)
    ap.add_argument("--shape", help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        res = child_bare(a) if a.child == "bare" else child_shape(a)
        with open(a.child_out, "w") as f:
            json.dump(res, f)
        return 0
    workloads, configs, shapes = a.workloads.split(","), a.configs.split(","), a.shapes.split(",")
    for w in workloads:
        if w not in vp.WORKLOADS or w in vp.CUDA_WORKLOADS:
            ap.error(f"unknown workload {w!r}")
    for c in configs:
        if c not in CONFIGS:
            ap.error(f"unknown configuration {c!r}")
    for s in shapes:
        if s not in SHAPES:
            ap.error(f"unknown shape {s!r}")
    import torch
    a.tmp = tempfile.mkdtemp(prefix="vcap-")
    rows = []
    total = len(workloads) * len(configs) * a.rounds
    done = 0
    t_start = time.time()
    for w in workloads:
        for c in configs:
            per = {s: [] for s in shapes}
            for k in range(a.rounds):
                before = run_child("bare", a, w)
                got = {s: run_child("shape", a, w, c, s) for s in shapes}
                after = run_child("bare", a, w)
                bares = [x["bare_step_ns"] for x in (before, after) if "bare_step_ns" in x]
                bare = sum(bares) / len(bares) if bares else None
                for s in shapes:
                    per[s].append({**got[s], "bare_step_ns": got[s].get("own_bare_step_ns"),
                                   "bare_processes_step_ns": bare})
                done += 1
                print(f"[{done}/{total}] {w} {c} round {k + 1}: "
                      + ", ".join(f"{s} {100 * (err(got[s].get('corrected_step_ns'), got[s].get('own_bare_step_ns')) or float('nan')):+.1f}%"
                                  for s in shapes), file=sys.stderr, flush=True)
            for s in shapes:
                ok = [r for r in per[s] if r.get("corrected_step_ns") and r.get("bare_step_ns")]
                rows.append({"workload": w, "what": describe(w), "config": c, "shape": s, "rounds": per[s],
                             "raw_err": statistics.median([err(r["raw_step_ns"], r["bare_step_ns"]) for r in ok])
                             if ok else None,
                             "corrected_err": statistics.median([err(r["corrected_step_ns"], r["bare_step_ns"])
                                                                 for r in ok]) if ok else None,
                             "bare_step_ns": statistics.median([r["bare_step_ns"] for r in ok]) if ok else None,
                             "corrected_err_vs_bare_processes": statistics.median(
                                 [err(r["corrected_step_ns"], r["bare_processes_step_ns"]) for r in ok
                                  if r.get("bare_processes_step_ns")]) if ok else None,
                             "sources": sorted({rep["w_source"] or "none" for r in per[s] for rep in r.get("reports", [])}),
                             "corrected_rounds": len(ok)})
    cond = {"torch": torch.__version__, "python": sys.version.split()[0], "threads": 1, "device": "cpu",
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_start)), "took_s": time.time() - t_start,
            "rounds": a.rounds}
    print(f"\nbench/validate_capture.py: torch {cond['torch']}, CPU, 1 thread, {a.rounds} rounds, empty cache; "
          "corrected and raw step against the same process's bare steps (medians over rounds)\n")
    print("| workload | config | shape | bare us | raw (err) | corrected (err) | W from |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        b = r["bare_step_ns"]
        fmt = (lambda e: f"{100 * e:+.1f}%" if e is not None else "n/a")
        print(f"| {r['workload']} | {r['config']} | {r['shape']} | {b / 1e3:.1f} | {fmt(r['raw_err'])} | "
              f"{fmt(r['corrected_err'])} | {', '.join(r['sources'])} |" if b else
              f"| {r['workload']} | {r['config']} | {r['shape']} | n/a | n/a | n/a | {', '.join(r['sources'])} |")
    errs = [abs(r["corrected_err"]) for r in rows if r["corrected_err"] is not None]
    if errs:
        print(f"\nwithin 10%: {sum(e <= 0.10 for e in errs)}/{len(rows)} rows; within 15%: "
              f"{sum(e <= 0.15 for e in errs)}/{len(rows)}; farther from bare than raw: "
              f"{sum(1 for r in rows if r['corrected_err'] is not None and abs(r['corrected_err']) > abs(r['raw_err']))}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"conditions": cond, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
