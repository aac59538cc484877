"""Instructions each instrument adds per operator, counted by callgrind: the
same workers as bench/bench_tracer.py, with the floors and torch.profiler
side by side, but a count that does not move with the machine's load.

    .venv/bin/python bench/bench_tracer_ir.py [--ops 2000] [--trials 3] [--rounds 2] [--rows A,B,...]

Why: on a shared 2-core VM, wall time per operator swings by 20 to 50 ns
between runs, as much as the differences to be measured (the native
collector against its floor, say). An instruction count repeats. It is not
time: a cache miss or the TSC read costs more than one instruction, so
read it beside bench_tracer.py's nanoseconds, not instead of them.

How: each worker runs under `valgrind --tool=callgrind` with counting off.
bench_tracer.py's worker, given OPSKEW_BENCH_MARKS (a library built here from
bench/callgrind_marks.c into a temporary folder), counts inside each loop of
`--ops` torch.add calls only and dumps one count per loop, labelled base (no
instrument) or inst. Within a worker, trials alternate base and inst; a
trial's added count is (inst - base) / ops, and a worker's is the median over
its trials. Each round is a fresh worker process per instrument; the rows
print every round, so the spread between processes (malloc's state,
mostly) shows. Each instrument first runs once natively with a few operators,
so that the native shim is built (cached under OPSKEW_CACHE_DIR) outside
callgrind.

Needs valgrind with its headers (valgrind/callgrind.h) and a C compiler.
About 40 s per worker here (valgrind runs the counted loops 50x slower,
torch's import uninstrumented).
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_tracer  # noqa: E402  (the workers and their instruments)

DEFAULT_ROWS = ["native-floor", "opskew-native", "itt-floor", "opskew", "torch.profiler"]


def build_marks(tmp):
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        sys.exit("bench_tracer_ir: no C compiler (cc or gcc, or set CC)")
    out = os.path.join(tmp, "libcallgrind_marks.so")
    p = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", out, os.path.join(HERE, "callgrind_marks.c")],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("bench_tracer_ir: could not build the callgrind marks (valgrind's headers missing?):\n"
                 + p.stderr.strip())
    return out


def worker_env():
    env = dict(os.environ)
    env.pop("INTEL_LIBITTNOTIFY64", None)  # only opskew's ITT worker arranges it
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def counts(out_dir):
    """label -> list of instruction counts, in dump order."""
    by = {}
    files = glob.glob(os.path.join(out_dir, "cg.out.*"))
    for f in sorted(files, key=lambda p: int(p.rsplit(".", 1)[1])):
        with open(f, encoding="utf-8", errors="replace") as fh:
            txt = fh.read()
        m = re.search(r"^desc: Trigger: Client Request: (\S+)", txt, re.M)
        t = re.search(r"^(?:totals|summary): (\d+)", txt, re.M)
        if m and t:
            by.setdefault(m.group(1), []).append(int(t.group(1)))
    return by


def run_one(inst, ops, trials, marks, tmp, r):
    out_dir = os.path.join(tmp, f"{inst}-{r}")
    os.makedirs(out_dir)
    env = worker_env()
    env["OPSKEW_BENCH_MARKS"] = marks
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
           f"--callgrind-out-file={out_dir}/cg.out", sys.executable, "-c", bench_tracer.WORKER,
           inst, str(ops), str(trials)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if p.returncode != 0:
        sys.exit(f"worker {inst} failed under callgrind ({p.returncode}):\n{p.stderr[-3000:]}")
    by = counts(out_dir)
    base, ins = by.get("base", []), by.get("inst", [])
    if len(base) != trials or len(ins) != trials:
        sys.exit(f"worker {inst}: {len(base)} base and {len(ins)} inst counts (expected {trials} each)")
    shutil.rmtree(out_dir, ignore_errors=True)
    added = statistics.median((i - b) / ops for b, i in zip(base, ins))
    return {"added": added, "base": statistics.median(base) / ops}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", type=int, default=2000, help="torch.add calls per loop (default 2000)")
    ap.add_argument("--trials", type=int, default=3, help="base/inst pairs per worker (default 3)")
    ap.add_argument("--rounds", type=int, default=2, help="worker processes per instrument (default 2)")
    ap.add_argument("--rows", default=",".join(DEFAULT_ROWS), metavar="A,B,...",
                    help="instruments, of bench_tracer.py's (torch.profiler is always measured)")
    args = ap.parse_args()
    rows = list(dict.fromkeys(args.rows.split(",") + ["torch.profiler"]))
    unknown = [r for r in rows if r not in bench_tracer.INSTRUMENTS]
    if unknown:
        ap.error(f"unknown rows: {', '.join(unknown)} (known: {', '.join(bench_tracer.INSTRUMENTS)})")
    for n in ("ops", "trials", "rounds"):
        if getattr(args, n) < 1:
            ap.error(f"--{n} must be at least 1")
    if not shutil.which("valgrind"):
        sys.exit("bench_tracer_ir: valgrind is not on PATH")

    res = {r: [] for r in rows}
    with tempfile.TemporaryDirectory(prefix="opskew-ir-") as tmp:
        marks = build_marks(tmp)
        for inst in rows:  # natively first: builds the shim, checks the instrument works
            bench_tracer.run_worker([inst], 10, 1)
        for r in range(args.rounds):
            for inst in rows[r % len(rows):] + rows[:r % len(rows)]:
                res[inst].append(run_one(inst, args.ops, args.trials, marks, tmp, r))
                print(f"  round {r + 1}/{args.rounds}: {inst} done", file=sys.stderr)

    import torch  # the version only, for the conditions line

    tp = statistics.median(x["added"] for x in res["torch.profiler"])
    print()
    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}, 1 thread, torch.add on a 1-element CPU "
          f"tensor; instructions (callgrind Ir) counted inside loops of {args.ops} ops, {args.trials} paired "
          f"trials per worker, {args.rounds} worker(s) per instrument")
    print()
    hdr = f"{'instrument':<22} {'added Ir/op':>12} {'x prof':>7} {'per worker':>24} {'base Ir/op':>11}"
    print(hdr)
    print("-" * len(hdr))
    med = {}
    for inst in rows:
        xs = [x["added"] for x in res[inst]]
        med[inst] = statistics.median(xs)
        each = ", ".join(f"{x:.0f}" for x in xs)
        base = statistics.median(x["base"] for x in res[inst])
        print(f"{inst:<22} {med[inst]:>12.0f} {med[inst] / tp:>7.2f} {each:>24} {base:>11.0f}")
    print()
    if "opskew-native" in med and "native-floor" in med:
        n, f = med["opskew-native"], med["native-floor"]
        print(f"native collector over its floor: {n - f:+.0f} Ir/op; opskew-native / torch.profiler: "
              f"{n / tp:.2f}x; the floor alone: {f / tp:.2f}x (the issue's target: <= 0.3x)")


if __name__ == "__main__":
    main()
