"""Python code under with_stack (docs/method.md, "Python code under
with_stack"): how much slower the interpreter runs code while a profile
function is set, and how much of that no cost per event explains.

    .venv/bin/python bench/bench_bytecode.py [--rounds 15] [--json PATH]

Side by side in one process, in alternating rounds, each body timed with
nothing set, with a no-op profile function in C (opskew's busy-wait
instrument at 0 ns: a C function, so the hook's own calls cost next to
nothing) and with a no-op profile function in Python (sys.setprofile):

  loop        opskew.bytecode's measuring loop: attribute and item loads
              and stores, arithmetic, comparisons; no calls;
  arith       a loop of integer arithmetic on locals; no calls;
  zero_grad   torch.optim.SGD.zero_grad() on a 4-layer MLP's 8 parameters
              whose grads are set (the validation's misses; a
              record_function range around a loop over the parameters);
  record_function
              an empty `with torch.profiler.record_function("x"): pass`.

Per body: the median time in each mode and the ratios to the bare one,
with the profile events one call fires (calls and returns, of Python and C
functions, the body's own included; a counting hook, once). The C
hook's ratio is the interpreter's own slowdown plus a few ns per event; the
Python hook's adds a Python call per event. Then opskew.bytecode.measure(),
the factor opskew.profile uses. CPython 3.11 runs every instruction through
its tracing path, unspecialized, while any profile function is set; 3.12's
PEP 669 instrumentation rewrites only calls and returns.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15, help="alternating rounds per body (default 15)")
    ap.add_argument("--reps", type=int, default=40, help="timed calls per body, mode and round (default 40)")
    ap.add_argument("--json", help="write the conditions and the table here")
    a = ap.parse_args(argv)
    if a.rounds < 1 or a.reps < 1:
        ap.error("--rounds and --reps must be >= 1")

    import torch

    from opskew import _engine
    from opskew.measure import bytecode

    torch.set_num_threads(1)
    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(4)])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    grads = [torch.zeros_like(p) for p in model.parameters()]
    objs = [bytecode._Obj(i) for i in range(200)]

    def arith(n=300):
        s = 0
        for i in range(n):
            s += (i * 7) ^ (s >> 3)
        return s

    def set_grads():
        for p, g in zip(model.parameters(), grads):
            p.grad = g

    bodies = {
        "loop": (lambda: bytecode._kernel(objs), None),
        "arith": (arith, None),
        "zero_grad": (opt.zero_grad, set_grads),
        "record_function": (lambda: _empty_range(torch), None),
    }

    def timed(fn, setup):
        clock = time.perf_counter_ns
        out = []
        for _ in range(a.reps):
            if setup:
                setup()
            t0 = clock()
            fn()
            out.append(clock() - t0)
        return statistics.median(out)

    def noop(frame, event, arg):
        return None

    modes = ("bare", "C hook", "Python hook")
    got = {b: {m: [] for m in modes} for b in bodies}
    for name, (fn, setup) in bodies.items():  # warm, and specialized
        for _ in range(20):
            if setup:
                setup()
            fn()
    events = {}
    for name, (fn, setup) in bodies.items():
        seen = [0]

        def count(frame, event, arg, seen=seen):
            seen[0] += 1

        if setup:
            setup()
        sys.setprofile(count)
        fn()
        sys.setprofile(None)
        events[name] = seen[0] - 1  # less the C call of sys.setprofile(None) itself
    for r in range(a.rounds):
        order = modes if r % 2 == 0 else tuple(reversed(modes))
        for name, (fn, setup) in bodies.items():
            for m in order:
                if m == "C hook":
                    _engine.inject_start(0)
                elif m == "Python hook":
                    sys.setprofile(noop)
                try:
                    got[name][m].append(timed(fn, setup))
                finally:
                    if m == "C hook":
                        _engine.inject_stop()
                    elif m == "Python hook":
                        sys.setprofile(None)
        print(f"\rround {r + 1}/{a.rounds}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    cond = (f"{platform.python_implementation()} {platform.python_version()}, torch {torch.__version__}, "
            f"1 thread, {os.cpu_count()} CPUs, {a.rounds} rounds x {a.reps} calls (median of per-round medians)")
    print(f"conditions: {cond}")
    print(f"{'body':<16} {'events':>6} {'bare ns':>10} {'C hook ns':>10} {'ratio':>6} {'Py hook ns':>11} {'ratio':>6}")
    rows = []
    for name in bodies:
        med = {m: statistics.median(got[name][m]) for m in modes}
        rc, rp = med["C hook"] / med["bare"], med["Python hook"] / med["bare"]
        print(f"{name:<16} {events[name]:>6} {med['bare']:>10.0f} {med['C hook']:>10.0f} {rc:>6.2f} "
              f"{med['Python hook']:>11.0f} {rp:>6.2f}")
        rows.append({"body": name, "profile_events": events[name], "median_ns": med, "ratio_c_hook": rc,
                     "ratio_python_hook": rp})
    m = bytecode.measure()
    f = m["factor"]
    ci = f["ci95"]
    print(f"opskew.bytecode.measure(): {f['median']:.2f}x"
          + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else " (no 95% CI)")
          + f" over {m['rounds']} rounds; applies: {m['applies']}" + (f" ({m['why']})" if m["why"] else ""))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump({"conditions": cond, "rows": rows, "measure": m}, fh, indent=1)
    return 0


def _empty_range(torch):
    with torch.profiler.record_function("x"):
        pass


if __name__ == "__main__":
    sys.exit(main())
