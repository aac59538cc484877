"""The table bench/gpu_check.sh leaves in its folder (issue 36; docs/cuda.md):
from bench/validate_profile.py's JSON (CUDA rows) and bench/bench_cuda_wait.py's,
one markdown file:

  - bare against the profiled process's wait steps, per suspect;
  - per workload and configuration: the bare step, the report's corrected
    step and the corrected trace's, each as a ratio to bare, with W;
  - the per-operator trust marks of the last report;
  - the clean-window audit's findings.

    python bench/gpu_table.py --validate OUT/validate-cuda.json --wait OUT/cuda-wait.json -o OUT/table.md
"""

from __future__ import annotations

import argparse
import json
import sys


def _pct(x, base):
    return "n/a" if not x or not base else f"{100 * (x / base - 1):+.1f}%"


def _us(ns):
    return "n/a" if ns is None else f"{ns / 1e3:.1f} us"


def wait_table(doc: dict) -> list:
    out = [f"### Wait steps: {doc['workload']} on {doc['device']}, {doc['rounds']} rounds (median, range)", "",
           "| arm | median step | over bare | range |", "|---|---|---|---|"]
    for arm, r in doc["arms"].items():
        lo, hi = r["range"]
        out.append(f"| {arm} | {_us(r['median_step_ns'])} | {r['over_bare']:.3f}x | [{lo:.3f}, {hi:.3f}] |")
    return out + [""]


def rows_table(doc: dict) -> list:
    cond = doc.get("conditions", {})
    out = [f"### Corrected against bare: torch {cond.get('torch', '?')}, {cond.get('machine', '?')}, "
           f"schedule {cond.get('schedule', '?')}", "",
           "| workload | config | bare step | report's corrected | corrected trace | W [CI] | marks | audit |",
           "|---|---|---|---|---|---|---|---|"]
    for r in doc.get("rows", []):
        if r.get("error"):
            out.append(f"| {r['workload']} | {r['config']} | error: {r['error']} | | | | | |")
            continue
        w = r.get("w_ns") or {}
        ci = w.get("ci95")
        w_text = f"{w.get('median', 0):.0f} ns" + (f" [{ci[0]:.0f}, {ci[1]:.0f}]" if ci else "") if w else "n/a"
        marks = ", ".join(f"{k} {v}" for k, v in sorted((r.get("marks") or {}).items())) or "n/a"
        audit = r.get("audit") or {}
        st = audit.get("stats") or {}
        found = [f"overhead {st.get('overhead_events', 0)} ({_us(st.get('overhead_ns'))})",
                 f"missing {st.get('missing', 0)}", f"orphans {st.get('orphans', 0)}",
                 f"bad time {st.get('bad_time', 0)}"] if st else ["n/a"]
        if audit.get("warmup_short"):
            found.append(f"warm-up short ({audit['first_step_ratio']:.2f}x)")
        bare = r.get("bare_step_ns")
        out.append(f"| {r['workload']} | {r['config']} | {_us(bare)} | "
                   f"{_us(r.get('report_corrected_step_ns'))} ({_pct(r.get('report_corrected_step_ns'), bare)}) | "
                   f"{_us(r.get('corrected_step_ns'))} ({_pct(r.get('corrected_step_ns'), bare)}) | {w_text} | "
                   f"{marks} | {'; '.join(found)} |")
    return out + [""]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--validate", help="bench/validate_profile.py --json output")
    ap.add_argument("--wait", help="bench/bench_cuda_wait.py --json output")
    ap.add_argument("-o", "--out", required=True, help="the markdown file to write")
    a = ap.parse_args(argv)
    lines = ["# opskew on a GPU (bench/gpu_check.sh)", ""]
    for path, make in ((a.wait, wait_table), (a.validate, rows_table)):
        if not path:
            continue
        try:
            with open(path) as f:
                lines += make(json.load(f))
        except (OSError, ValueError, KeyError) as exc:
            lines += [f"({path}: not readable: {exc})", ""]
    with open(a.out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
