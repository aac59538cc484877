"""Why a profiled process's wait steps run slower than a process without a
profiler (docs/profile-validation.md, "The wait-step baseline"): the step body right
after the profiler's step() against the body right after another body.

    .venv/bin/python bench/bench_wait_steps.py [--workloads mlp_train,tiny_loop]
        [--configs minimal,record_shapes+with_stack] [--rounds 3] [--callgrind]

Per workload and configuration, one child process runs `--rounds` blocks of
each kind, interleaved:
  bare   no profiler: pairs of bodies, timed one by one (36 pairs);
  torch  torch.profiler.profile(schedule=schedule(wait=8, warmup=1, active=7,
         repeat=6)): in each cycle's wait steps 2 to 7 (the first 2 after a
         trace are cold, and opskew.profile never uses them), a pair of
         bodies between two step() calls;
  opskew opskew.profile with the same schedule, the same pairs.
"first" is the body right after step() (what opskew.profile times as a wait
step), "second" the body right after it, with nothing between. Their ratio
is taken per pair; its median over all pairs is printed, with the median
time of step() itself in those wait steps.

--callgrind runs each child under valgrind (callgrind, with its cache
simulation) and counts the "first" bodies only: instructions (Ir) and
simulated cache misses (D1 and last level) per body, for bare bodies and
wait-step bodies. Equal counts mean the wait steps do the same work; a
slower wall time then comes from the state step() leaves in the real
caches and predictors, which the simulation does not model in full. Needs
valgrind's headers and a C compiler (bench/callgrind_marks.c is built into a
temporary folder); about a minute per child.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = ("bare", "torch", "opskew")
WAIT, WARMUP, ACTIVE, REPEAT, COLD_WAIT = 8, 1, 7, 6, 2


def child(a):
    sys.path.insert(0, HERE)
    import validate_profile as vp

    torch, step = vp._setup(a.workload)
    for _ in range(50):
        step()
    import opskew
    from torch.profiler import ProfilerActivity, profile, schedule

    kw = vp.CONFIGS[a.config]
    cg = None
    if os.environ.get("OPSKEW_BENCH_MARKS"):
        import ctypes

        cg = ctypes.CDLL(os.environ["OPSKEW_BENCH_MARKS"])
        cg.osk_bench_dump.argtypes = [ctypes.c_char_p]
        cg.osk_bench_start()
    pc = time.perf_counter_ns
    tmp = tempfile.mkdtemp(prefix="opskew-waitsteps-")
    res = {k: {"pairs": [], "step_ns": []} for k in KINDS}

    def pair(kind):
        if cg:
            cg.osk_bench_toggle()
            step()
            cg.osk_bench_toggle()
            cg.osk_bench_dump(kind.encode())
            step()
            return
        t0 = pc()
        step()
        t1 = pc()
        step()
        res[kind]["pairs"].append((t1 - t0, pc() - t1))

    def block(kind):
        if kind == "bare":
            for _ in range(REPEAT * (WAIT - COLD_WAIT)):
                pair(kind)
            return
        sched = schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=REPEAT)
        if kind == "torch":
            p = profile(activities=[ProfilerActivity.CPU], schedule=sched,
                        on_trace_ready=lambda pr: pr.export_chrome_trace(os.path.join(tmp, "t.json")), **kw)
        else:
            p = opskew.profile(activities=[ProfilerActivity.CPU], schedule=sched, corrected_dir=tmp,
                               report_file=None, **kw)
        cycle = WAIT + WARMUP + ACTIVE
        with p:
            for i in range(REPEAT * cycle):
                ph = i % cycle
                warm_wait = COLD_WAIT <= ph < WAIT
                if warm_wait:
                    pair(kind)
                else:
                    step()
                t = pc()
                p.step()
                if warm_wait and ph < WAIT - 1:  # a step() that stays in the wait phase
                    res[kind]["step_ns"].append(pc() - t)

    for _ in range(a.rounds):
        for kind in KINDS:
            block(kind)
    shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(res))


def callgrind_counts(out_dir):
    """label -> (bodies, {event: total})."""
    agg = {}
    for f in glob.glob(os.path.join(out_dir, "cg.out.*")):
        with open(f, encoding="utf-8", errors="replace") as fh:
            txt = fh.read()
        m = re.search(r"^desc: Trigger: Client Request: (\S+)", txt, re.M)
        ev = re.search(r"^events: (.*)$", txt, re.M)
        t = re.search(r"^(?:totals|summary): ([\d ]+)$", txt, re.M)
        if not (m and ev and t):
            continue
        names = ev.group(1).split()
        vals = [int(x) for x in t.group(1).split()] + [0] * len(names)
        n, tot = agg.get(m.group(1), (0, {}))
        for k, v in zip(names, vals):
            tot[k] = tot.get(k, 0) + v
        agg[m.group(1)] = (n + 1, tot)
    return agg


def run_child(workload, config, rounds, marks=None, tmp=None):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--workload", workload, "--config", config,
           "--rounds", str(rounds)]
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    out_dir = None
    if marks:
        env["OPSKEW_BENCH_MARKS"] = marks
        out_dir = tempfile.mkdtemp(prefix=f"cg-{workload}-", dir=tmp)
        cmd = ["valgrind", "--tool=callgrind", "--cache-sim=yes", "--instr-atstart=no", "--collect-atstart=no",
               f"--callgrind-out-file={out_dir}/cg.out"] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if p.returncode != 0:
        sys.exit(f"child {workload} {config} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    if marks:
        return callgrind_counts(out_dir)
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="mlp_train,tiny_loop",
                    help="of bench/validate_profile.py's workloads (default mlp_train,tiny_loop)")
    ap.add_argument("--configs", default="minimal,record_shapes+with_stack")
    ap.add_argument("--rounds", type=int, default=3, help="blocks of each kind per child (default 3)")
    ap.add_argument("--callgrind", action="store_true", help="count instructions and simulated cache misses")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--workload", help=argparse.SUPPRESS)
    ap.add_argument("--config", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a)
    sys.path.insert(0, HERE)
    import validate_profile as vp

    workloads, configs = a.workloads.split(","), a.configs.split(",")
    bad = [w for w in workloads if w not in vp.WORKLOADS] + [c for c in configs if c not in vp.CONFIGS]
    if bad:
        ap.error(f"unknown: {', '.join(bad)} (workloads: {', '.join(vp.WORKLOADS)}; configs: "
                 f"{', '.join(vp.CONFIGS)})")
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    if a.callgrind and not shutil.which("valgrind"):
        sys.exit("bench_wait_steps: valgrind is not on PATH")
    import torch

    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}, CPU, threads as each workload sets; "
          f"schedule(wait={WAIT}, warmup={WARMUP}, active={ACTIVE}, repeat={REPEAT}), {a.rounds} round(s)")
    with tempfile.TemporaryDirectory(prefix="opskew-waitsteps-") as tmp:
        if a.callgrind:
            from bench_tracer_ir import build_marks  # bench/callgrind_marks.c, built in tmp
        marks = build_marks(tmp) if a.callgrind else None
        for w in workloads:
            for c in configs:
                r = run_child(w, c, a.rounds, marks, tmp)
                if marks:
                    for kind in KINDS:
                        n, tot = r.get(kind, (0, {}))
                        if not n:
                            continue
                        per = {k: v / n for k, v in tot.items()}
                        dmiss = per.get("D1mr", 0) + per.get("D1mw", 0)
                        llmiss = per.get("DLmr", 0) + per.get("DLmw", 0)
                        print(f"{w:<14} {c:<25} {kind:<6} bodies {n:4d}  Ir/body {per.get('Ir', 0):11.0f}  "
                              f"D1 misses {dmiss:8.0f}  LL misses {llmiss:6.0f}  I1 misses {per.get('I1mr', 0):7.0f}")
                    continue
                for kind in KINDS:
                    pairs, steps = r[kind]["pairs"], r[kind]["step_ns"]
                    first = statistics.median(x for x, _ in pairs)
                    second = statistics.median(y for _, y in pairs)
                    ratio = statistics.median(x / y for x, y in pairs)
                    slower = sum(1 for x, y in pairs if x > y)
                    st = f"{statistics.median(steps) / 1e3:6.1f} us" if steps else "     -"
                    print(f"{w:<14} {c:<25} {kind:<6} first {first / 1e3:8.1f} us  second {second / 1e3:8.1f} us"
                          f"  first/second {ratio:.3f} (first slower in {slower}/{len(pairs)})  step() {st}")


if __name__ == "__main__":
    main()
