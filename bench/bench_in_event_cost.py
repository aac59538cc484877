"""What each profiler configuration adds inside an operator's own interval,
operator by operator (docs/profile-validation.md, "The leaves"): the
reported duration of the same leaf operators under torch.profiler's
minimal, record_shapes and record_shapes+with_stack configurations and
under opskew's tracer (ITT), side by side in one process.

    .venv/bin/python bench/bench_in_event_cost.py [--rounds 6] [--json PATH]

The body calls a fixed panel of operators with different inputs (one
tensor, two, three and a scalar, a tensor list, a convolution's nine
arguments, views that take size lists) 20 times each; each round runs it
10 times under every instrument in turn. Per operator: the median reported
duration (ns) under each, and each torch configuration's excess over
opskew's tracer. The calibrated `delta` of a configuration is one number
(taken on torch.add); where the excesses differ by operator, no single
`delta` fits all leaves.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile

CONFIGS = {"minimal": {}, "record_shapes": {"record_shapes": True},
           "record_shapes+with_stack": {"record_shapes": True, "with_stack": True}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=6, help="rounds, each every instrument in turn (default 6)")
    ap.add_argument("--json", help="write the conditions and the table here")
    a = ap.parse_args(argv)
    if a.rounds < 1:
        ap.error("--rounds must be >= 1")

    from opskew.tracer.session import arrange, trace

    arrange("itt")  # before torch loads
    import torch

    from opskew.analyze.tracefile import summarize

    torch.set_num_threads(1)
    x, y, z = torch.randn(16), torch.randn(16), torch.randn(16)
    w, inp = torch.randn(16, 16), torch.randn(4, 16)
    img, k = torch.randn(1, 2, 8, 8), torch.randn(2, 2, 3, 3)
    parts = [torch.randn(4) for _ in range(8)]
    bias = y.view(1, 16).expand(4, 16)

    def body():
        for _ in range(20):
            torch.neg(x)
            torch.add(x, y)
            torch.addcmul(x, y, z, value=0.5)
            torch.addmm(bias, inp, w)
            torch.nn.functional.conv2d(img, k, None, 1, 1)
            torch.cat(parts)
            x.view(4, 4)
            x.clamp_min(0.0)

    tmp = tempfile.mkdtemp(prefix="opskew-bench-iec-")
    got: dict = {}
    for _ in range(50):
        body()
    for r in range(a.rounds):
        for cname, kw in CONFIGS.items():
            path = os.path.join(tmp, f"{cname}.json")
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], **kw) as p:
                for _ in range(10):
                    body()
            p.export_chrome_trace(path)
            _collect(got, cname, summarize(path))
        path = os.path.join(tmp, "opskew.json")
        with trace(instrument="itt") as t:
            for _ in range(10):
                body()
        t.write(path)
        _collect(got, "opskew", summarize(path))
        print(f"\rround {r + 1}/{a.rounds}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)
    names = sorted(n for n in got if "opskew" in got[n] and all(c in got[n] for c in CONFIGS))
    cond = (f"{platform.python_implementation()} {platform.python_version()}, torch {torch.__version__}, cpu, "
            f"1 thread, {a.rounds} rounds x 10 bodies (median over rounds of each round's mean per call; "
            "operators reported as leaves by every instrument)")
    print(f"conditions: {cond}")
    print(f"{'operator':<26} {'opskew':>8} " + " ".join(f"{c:>26}" for c in CONFIGS))
    rows = []
    for n in names:
        med = {c: statistics.median(v) for c, v in got[n].items()}
        cells = " ".join(f"{med[c]:>9.0f} ({med[c] - med['opskew']:+6.0f} ns)".rjust(26) for c in CONFIGS)
        print(f"{n:<26} {med['opskew']:>8.0f} {cells}")
        rows.append({"operator": n, "median_ns": med,
                     "excess_over_opskew_ns": {c: med[c] - med["opskew"] for c in CONFIGS}})
    for c in CONFIGS:
        ex = [r["excess_over_opskew_ns"][c] for r in rows]
        if ex:
            print(f"{c}: excess over opskew's tracer from {min(ex):+.0f} to {max(ex):+.0f} ns "
                  f"(median {statistics.median(ex):+.0f}) across {len(ex)} leaves")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump({"conditions": cond, "rows": rows}, fh, indent=1)
    return 0


def _collect(got, inst, summary):
    for o in summary["ops"]:
        if o["calls"] and o.get("descendants", 0) == 0:
            got.setdefault(o["name"], {}).setdefault(inst, []).append(o["total_ns"] / o["calls"])


if __name__ == "__main__":
    sys.exit(main())
