"""The tracer's memory with and without its budget: `opskew record` of a loop of
N torch.add (one aten::add each), side by side with budgets of 256 MiB (the
default) and 0 (never spill), and a short run of the same loop for the
process's footprint without events.

    .venv/bin/python bench/bench_record_budget.py [--ops 50000000] [--budgets 256,0]

Per run: the peak RSS of the record child (the largest ru_maxrss among the
processes `opskew record` waits for, measured from a wrapper process of its
own so that runs do not mix), the wall time, the events written, the events
spilled and lost (from the trace's "opskew" header, read without reading the
events). The trace and the spill file go to a temporary folder, removed at the
end. One thread (torch.set_num_threads(1)), the ITT instrument unless
--instrument says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

CHILD = """
import torch
torch.set_num_threads(1)
a = torch.ones(1)
for _ in range({ops}):
    torch.add(a, a)
"""

WRAPPER = r"""
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.perf_counter() - t0
print(json.dumps({"rc": p.returncode, "wall_s": wall, "stderr": p.stderr[-2000:],
                  "maxrss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def run(ops, budget_mb, folder, instrument):
    out = os.path.join(folder, "t.json")
    spill = os.path.join(folder, "spill")
    os.makedirs(spill, exist_ok=True)
    env = dict(os.environ, TMPDIR=spill)
    env.pop("OPSKEW_TRACE_BUDGET_MB", None)
    if budget_mb is not None:
        env["OPSKEW_TRACE_BUDGET_MB"] = str(budget_mb)
    cmd = [sys.executable, "-c", WRAPPER, sys.executable, "-m", "opskew", "record", "-o", out,
           "--instrument", instrument, "--", sys.executable, "-c", CHILD.format(ops=ops)]
    r = json.loads(subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout)
    if r["rc"] != 0:
        raise SystemExit(f"record failed ({r['rc']}): {r['stderr']}")
    from opskew.analyze import tracefile
    meta = tracefile.scan(out, header_only=True)["objects"]["opskew"]
    r.update(events=meta["events"], spilled=meta["spill"]["events"], lost=meta["lost"]["total"],
             budget_bytes=meta["spill"]["budget_bytes"], trace_bytes=os.path.getsize(out),
             left_behind=len(os.listdir(spill)))
    os.unlink(out)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", type=int, default=50_000_000)
    ap.add_argument("--budgets", default="256,0", help="MiB, comma-separated; 'env' leaves the default")
    ap.add_argument("--footprint-ops", type=int, default=10_000, help="ops of the short run (the footprint)")
    ap.add_argument("--instrument", default="itt")
    args = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="opskew-bench-budget-")
    try:
        base = run(args.footprint_ops, 0, folder, args.instrument)
        base_mib = base["maxrss_kib"] / 1024
        print(f"footprint: {args.footprint_ops} ops, peak RSS {base_mib:.0f} MiB, {base['wall_s']:.1f} s")
        print(f"{'budget':>10} {'ops':>11} {'events':>11} {'spilled':>11} {'lost':>5} {'peak RSS':>10} "
              f"{'over footprint':>15} {'wall s':>8} {'trace GB':>9}")
        rows = []
        for b in args.budgets.split(","):
            budget = None if b == "env" else int(b)
            t0 = time.perf_counter()
            r = run(args.ops, budget, folder, args.instrument)
            rss = r["maxrss_kib"] / 1024
            rows.append((budget, r))
            label = f"{r['budget_bytes'] >> 20} MiB" if r["budget_bytes"] else "none"
            print(f"{label:>10} {args.ops:>11} {r['events']:>11} {r['spilled']:>11} {r['lost']:>5} "
                  f"{rss:>7.0f} MiB {rss - base_mib:>11.0f} MiB {time.perf_counter() - t0:>8.1f} "
                  f"{r['trace_bytes'] / 1e9:>9.2f}", flush=True)
            if r["left_behind"]:
                print(f"  {r['left_behind']} file(s) left in the spill folder", flush=True)
        budgeted = [(b, r) for b, r in rows if r["budget_bytes"]]
        unbounded = [r for b, r in rows if not r["budget_bytes"]]
        for b, r in budgeted:
            over = r["maxrss_kib"] / 1024 - base_mib - r["budget_bytes"] / 2**20
            print(f"budget {r['budget_bytes'] >> 20} MiB: peak RSS is the footprint + budget "
                  f"{'+' if over >= 0 else '-'} {abs(over):.0f} MiB")
            if unbounded:
                u = unbounded[0]
                print(f"  against no budget: {r['maxrss_kib'] / u['maxrss_kib']:.2f}x the peak RSS, "
                      f"{r['wall_s'] / u['wall_s']:.2f}x the wall time")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
