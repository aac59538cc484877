"""How long `opskew check` takes and how wide its confidence interval is.

Runs `opskew check` on the built-in workload under a few settings of
--trials/--iters, REPEATS times each, interleaved, and prints side by side the
wall time of the whole command and the width of W's CI (absolute and relative
to W), with ratios to the default setting.

    .venv/bin/python bench/bench_check.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SETTINGS = {
    "default (15 pairs x 10 iters)": [],
    "9 pairs x 20 iters": ["--trials", "9", "--iters", "20"],
    "7 pairs x 20 iters": ["--trials", "7", "--iters", "20"],
    "default + --with-stack --record-shapes": ["--with-stack", "--record-shapes"],
}


def run_once(extra):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "opskew", "check", "--json", out, *extra],
                           capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            sys.exit(f"opskew check {' '.join(extra)} failed ({p.returncode}):\n{p.stderr}")
        with open(out) as f:
            return wall, json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rows = {k: [] for k in SETTINGS}
    cond = None
    for rep in range(args.repeats):
        for name, extra in SETTINGS.items():
            wall, r = run_once(extra)
            cond = cond or r["conditions"]
            w = r["added_per_event_ns"]
            rows[name].append((wall, w["median"], w["ci95"][1] - w["ci95"][0], w["ci_coverage"],
                               r["verdict"]["skewed"]))
            print(f"  [{rep + 1}/{args.repeats}] {name}: {wall:.1f} s, W {w['median']:.0f} ns "
                  f"CI [{w['ci95'][0]:.0f}, {w['ci95'][1]:.0f}]", file=sys.stderr)
    print(f"opskew check on the built-in workload; torch {cond['torch']}, {cond['device']} "
          f"({cond['cpu']}), {cond['threads']} thread(s), {cond['cpu_count']} cores; "
          f"{args.repeats} runs per setting, medians (min-max)")
    hdr = f"{'setting':40s} {'wall s':>16s} {'W ns':>16s} {'CI width ns':>18s} {'width/W':>8s} {'cover':>6s} {'skewed':>7s} {'wall ratio':>10s}"
    print(hdr)
    print("-" * len(hdr))
    base_wall = statistics.median(x[0] for x in rows[next(iter(SETTINGS))])
    for name, xs in rows.items():
        walls = [x[0] for x in xs]
        ws = [x[1] for x in xs]
        widths = [x[2] for x in xs]
        rel = statistics.median(x[2] / x[1] for x in xs)
        mw = statistics.median(walls)
        print(f"{name:40s} {mw:6.1f} ({min(walls):.1f}-{max(walls):.1f}) "
              f"{statistics.median(ws):6.0f} ({min(ws):.0f}-{max(ws):.0f}) "
              f"{statistics.median(widths):7.0f} ({min(widths):.0f}-{max(widths):.0f}) "
              f"{rel:8.2f} {100 * xs[0][3]:5.1f}% {sum(x[4] for x in xs)}/{len(xs):<5d} {mw / base_wall:10.2f}")


if __name__ == "__main__":
    main()
