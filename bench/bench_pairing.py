"""How well two ways of pairing separate processes in time agree with
themselves (bench/validate_profile.py --pairing): an A/A test, two bare
processes of the same workload, neither profiled, so their true step is the
same and any difference between them is the comparison's own error.

    .venv/bin/python bench/bench_pairing.py [--workload tiny_loop] [--pairs 6]

  sequential  one bare process, then the other (as validate_profile's
              --pairing sequential runs its bare and profiled processes),
              each timing the same number of steps;
  lockstep    both started together, pinned to the same CPU(s), taking turns
              of --chunk steps through a pair of pipes (--pairing lockstep).

The two kinds alternate, --pairs of each. Per pair it prints the ratio of
the two processes' median steps (the second's over the first's), then per
kind the median and largest |ratio - 1|. Timing only: run it on the machine
you validate on, side by side in one run.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import _common  # noqa: E402
import validate_profile as vp  # noqa: E402


def _run(workload, args, tmp, lockstep):
    extra = ["--chunk", str(args.chunk), "--turns", str(args.turns)]
    if not lockstep:
        # Each alone, one after the other: the same steps and turns, its
        # token passed to itself (one pipe, no partner).
        res = []
        for _ in range(2):
            r, w = os.pipe()
            os.write(w, b"x")  # its first turn; it gives itself each next one
            cmd, out = vp._child_cmd("bare", workload, args, tmp, None,
                                     ["--token-in", str(r), "--token-out", str(w), *extra])
            t0 = time.monotonic()
            p = subprocess.run(cmd, capture_output=True, text=True, pass_fds=(r, w), timeout=args.child_timeout)
            os.close(r)
            os.close(w)
            res.append(vp._child_result("bare", workload, None, p.returncode, p.stderr, out, time.monotonic() - t0))
        return res
    a, b = os.pipe(), os.pipe()
    cpus = vp.lockstep_cpus(workload)
    pin = ["--cpus", ",".join(map(str, cpus))] if cpus else []
    procs = []
    for rfd, wfd in ((a[0], b[1]), (b[0], a[1])):
        cmd, out = vp._child_cmd("bare", workload, args, tmp, None,
                                 ["--token-in", str(rfd), "--token-out", str(wfd), *extra, *pin])
        procs.append((out, subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                            pass_fds=(rfd, wfd))))
    os.write(a[1], b"x")  # the first one starts
    for fd in (*a, *b):
        os.close(fd)
    t0 = time.monotonic()
    res = []
    for out, p in procs:
        _, err = p.communicate(timeout=args.child_timeout)
        res.append(vp._child_result("bare", workload, None, p.returncode, err, out, time.monotonic() - t0))
    return res


def main(argv=None):
    ap = _common.parser(__doc__, "tiny_loop")
    ap.add_argument("--pairs", type=int, default=6, help="pairs of processes of each kind (6)")
    ap.add_argument("--chunk", type=int, default=16, help="steps per turn (16, a validation cycle's)")
    ap.add_argument("--turns", type=int, default=60, help="turns per process (60)")
    a = _common.parse(ap, argv, {"--pairs": 1, "--chunk": 2, "--turns": 1})
    vp.check_cpu_workload(ap, a.workload)
    args = vp.parse(["--workloads", a.workload])
    args.chunk, args.turns = a.chunk, a.turns
    os.environ["KINETO_LOG_LEVEL"] = "6"
    ratios = {"sequential": [], "lockstep": []}
    with tempfile.TemporaryDirectory(prefix="opskew-bench-pairing-") as tmp:
        for i in range(a.pairs):
            for kind in (("sequential", "lockstep") if i % 2 == 0 else ("lockstep", "sequential")):
                first, second = _run(a.workload, args, tmp, kind == "lockstep")
                if "error" in first or "error" in second:
                    print(f"{kind}: a process failed: {first.get('error') or second.get('error')}", file=sys.stderr)
                    continue
                r = second["median_ns"] / first["median_ns"]
                ratios[kind].append(r)
                print(f"  pair {i + 1} {kind:10s} {first['median_ns'] / 1e3:8.1f} {second['median_ns'] / 1e3:8.1f} us"
                      f"  {100 * (r - 1):+.1f}%", file=sys.stderr, flush=True)
    import torch  # noqa: F401 - only for the conditions line; the children ran it

    print(f"{a.workload}: two bare processes, {a.turns} turns of {a.chunk} steps each (the first step of a turn "
          f"not counted); torch {torch.__version__}, {os.cpu_count()} CPUs, lockstep pinned to "
          f"{vp.lockstep_cpus(a.workload)}")
    for kind, rs in ratios.items():
        dev = [abs(r - 1) for r in rs]
        if dev:
            print(f"{kind:10s} |second/first - 1|: median {100 * statistics.median(dev):.1f}%, largest "
                  f"{100 * max(dev):.1f}% over {len(dev)} pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
