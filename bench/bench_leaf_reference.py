"""How opskew's tracer sees a step's leaf operators by the step's place in a
tracer session (docs/tracer.md, "The operator tracer": `t.window`; docs/method.md, "Each leaf's own
delta"): why opskew.profile's leaf reference runs one session over several
wait steps and leaves its first step out.

    .venv/bin/python bench/bench_leaf_reference.py [--workload mlp_train]
        [--steps 5] [--rounds 6]

One process, after a warm-up. Each round runs, in turn:
  per-step   --steps sessions of one step each;
  one        one session of --steps steps, each step summarized apart
             (Trace.window);
  profiler   torch.profiler.profile over --steps steps (no schedule), its
             leaves' reported times, for scale.
It prints, per leaf operator (one call a step or more), the median over
rounds of its mean time per call (the tracer's corrected totals over calls)
at each step of the one-session run, and the per-step sessions' median, as
ratios to the one-session run's later steps (its 2nd to last). Timing only:
a side by side in one run.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile

import _common


def leaves(rows, min_calls):
    return {r["name"]: r["total_corrected_ns"] / r["calls"] for r in rows
            if r["descendants"] == 0 and r["calls"] >= min_calls}


def main(argv=None):
    from opskew.analyze.tracefile import correct
    from opskew.stats.costmodel import CostModel
    from opskew.tracer.session import now_ns, trace

    ap = _common.parser(__doc__, "mlp_train")
    ap.add_argument("--steps", type=int, default=5, help="steps per session (5: opskew.profile's 1 + 4)")
    ap.add_argument("--rounds", type=int, default=6, help="rounds (6)")
    a, torch, step = _common.start(ap, argv, {"--steps": 2, "--rounds": 1})
    per_step, one, prof = [], [[] for _ in range(a.steps)], []
    with tempfile.TemporaryDirectory(prefix="opskew-leaf-reference-") as tmp:
        for r in range(a.rounds):
            print(f"  round {r + 1}/{a.rounds}", file=sys.stderr, flush=True)
            for _ in range(a.steps):
                ctx = trace(instrument="native")
                t = ctx.enter_native_only()
                step()
                ctx.__exit__(None, None, None)
                per_step.append(leaves(t.summary.rows, 1))
            ctx = trace(instrument="native")
            t = ctx.enter_native_only()
            marks = []
            for _ in range(a.steps):
                t0 = now_ns()
                step()
                marks.append((t0, now_ns()))
            ctx.__exit__(None, None, None)
            for k, (b, e) in enumerate(marks):
                one[k].append(leaves(t.window(b, e).rows, 1))
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
                for _ in range(a.steps):
                    step()
            path = os.path.join(tmp, f"p{r}.json")
            p.export_chrome_trace(path)
            res = correct(path, CostModel.default(0.0, 0.0))
            prof.append({o["name"]: o["reported_total_ns"] / o["calls"] for o in res["ops"]
                         if o["descendants"] == 0 and o["calls"] >= a.steps})

    def med(runs, name):
        xs = [x[name] for x in runs if name in x]
        return statistics.median(xs) if xs else None

    later = [d for k in range(1, a.steps) for d in one[k]]
    names = sorted(set().union(*later) & set().union(*per_step))
    print(f"{a.workload}, torch {torch.__version__}, {torch.get_num_threads()} thread(s), native tracer, "
          f"{a.steps} steps a session, {a.rounds} rounds; ratios to the one session's steps 2..{a.steps}")
    head = " ".join(f"step{k + 1:>2}" for k in range(a.steps))
    print(f"{'leaf':32s} {'ns':>8s} {head} per-step profiler")
    firsts, singles = [], []
    for n in names:
        base = med(later, n)
        if not base:
            continue
        cells = [med(one[k], n) for k in range(a.steps)]
        ps, pr = med(per_step, n), med(prof, n)
        firsts.append(cells[0] / base)
        singles.append(ps / base)
        fmt = lambda v: f"{v / base:6.2f}" if v else "     -"  # noqa: E731
        print(f"{n[:32]:32s} {base:8.0f} {' '.join(fmt(c) for c in cells)} {fmt(ps):>8s} {fmt(pr):>8s}")
    if firsts:
        print(f"median over leaves: a session's first step {statistics.median(firsts):.2f}x its later steps; "
              f"one-step sessions {statistics.median(singles):.2f}x")


if __name__ == "__main__":
    main()
