"""How a profiled loop's wait steps recover after each trace, position by
position (docs/profile-validation.md, run I): what opskew.profile pairs its
active steps with, against bare steps of the same process.

    .venv/bin/python bench/bench_wait_positions.py [--workload mlp_train]
        [--config minimal] [--wait 8] [--rounds 8]

One process. Each round runs, in turn: 60 bare steps (no profiler), then a
session of each kind with schedule(wait=--wait, warmup=1, active=7, repeat=3):
  torch         torch.profiler.profile, nothing exported;
  torch+export  the same, on_trace_ready exporting the trace (as users run it);
  opskew        opskew.profile(corrected_dir=<tmp>), its analysis after each cycle
                (and its tracer on wait steps 3 to 7 after a trace, where wait >= 14);
  opskew-noref  the same with leaf_reference=False (no tracer steps).
Each step body is timed alone (opskew's own timing for opskew.profile). The
first cycle of each session is left out (no trace before it); for the others,
each position of the cycle is printed as the median over all rounds, in %
over the median bare step, then the median of the positions opskew pairs with
(the last 6 wait steps) and of positions 2 to 7. Timing only: for a side by
side in one run, on a machine whose speed moves from minute to minute.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time

import _common
import validate_profile as vp

ACTIVE, REPEAT = 7, 3


def main(argv=None):
    ap = _common.parser(__doc__, "mlp_train", cpu_only=False)
    ap.add_argument("--config", default="minimal", help="minimal or record_shapes+with_stack (minimal)")
    ap.add_argument("--wait", type=int, default=8, help="the schedule's wait steps (8; at least 6)")
    ap.add_argument("--rounds", type=int, default=8, help="rounds of bare steps and the three sessions (8)")
    a = _common.parse(ap, argv, {"--wait": 6, "--rounds": 1})
    if a.workload not in vp.WORKLOADS or a.config not in vp.CONFIGS:
        ap.error(f"--workload is one of {', '.join(vp.WORKLOADS)}; --config one of {', '.join(vp.CONFIGS)}")
    torch, step = vp._setup(a.workload)
    import opskew

    _common.warm(step)
    tmp = tempfile.mkdtemp(prefix="opskew-wait-positions-")
    try:
        run(a, vp, torch, step, opskew, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # this run's traces, in a folder of its own


def run(a, vp, torch, step, opskew, tmp):
    from torch.profiler import ProfilerActivity, profile, schedule

    cycle = a.wait + 1 + ACTIVE
    kw = vp.CONFIGS[a.config]

    def timed(n, between=None):
        out = []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            step()
            out.append(time.perf_counter_ns() - t0)
            if between is not None:
                between()
        return out

    bare, pos = [], {k: {} for k in ("torch", "torch+export", "opskew", "opskew-noref")}
    for r in range(a.rounds):
        print(f"  round {r + 1}/{a.rounds}", file=sys.stderr, flush=True)
        for kind in pos:
            bare += timed(60)
            sched = schedule(wait=a.wait, warmup=1, active=ACTIVE, repeat=REPEAT)
            if kind.startswith("opskew"):
                with opskew.profile(activities=[ProfilerActivity.CPU], schedule=sched, report_file=None,
                                    corrected_dir=tempfile.mkdtemp(dir=tmp), leaf_reference=kind == "opskew",
                                    **kw) as p:
                    for _ in range(REPEAT * cycle):
                        step()
                        p.step()
                got = [(s["step"], s["ns"]) for s in p.steps if not s.get("partial")]
            else:
                ready = None
                if kind == "torch+export":
                    folder = tempfile.mkdtemp(dir=tmp)

                    def ready(q, folder=folder):
                        q.export_chrome_trace(os.path.join(folder, f"t{q.step_num}.json"))
                with profile(activities=[ProfilerActivity.CPU], schedule=sched, on_trace_ready=ready, **kw) as p:
                    got = list(enumerate(timed(REPEAT * cycle, p.step)))
            for i, ns in got:
                if i >= cycle:  # the first cycle has no trace before it
                    pos[kind].setdefault(i % cycle, []).append(ns)
    b = statistics.median(bare)
    print(f"{a.workload} {a.config}, torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
          f"schedule(wait={a.wait}, warmup=1, active={ACTIVE}, repeat={REPEAT}), {a.rounds} rounds; "
          f"bare step {b / 1e3:.1f} us (median of {len(bare)})")
    print("% over the bare step by position in the cycle (wait 0.." f"{a.wait - 1}, warmup {a.wait}, "
          f"active {a.wait + 1}..{cycle - 1}); '.' = not kept (opskew keeps the ends of long wait blocks)")

    def pct(xs):
        return f"{100 * (statistics.median(xs) / b - 1):+.1f}%" if xs else "n/a"

    for kind, p in pos.items():
        cells = " ".join(f"{100 * (statistics.median(p[q]) / b - 1):+.0f}" if q in p else "." for q in range(cycle))
        paired = [x for q in range(a.wait - 6, a.wait) for x in p.get(q, [])]
        early = [x for q in range(2, 8) for x in p.get(q, [])]
        print(f"{kind:13s} {cells}   paired (last 6 wait) {pct(paired)}, positions 2-7 {pct(early)}")


if __name__ == "__main__":
    main()
