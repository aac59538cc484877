"""Validation of `opskew correct` on three workloads of different shapes.

For each workload and torch.profiler configuration, in one process:
  1. the uninstrumented wall time per iteration (one window per pair);
  2. a torch.profiler trace with each iteration wrapped in
     record_function("opskew::iteration"), exported and corrected with the
     calibration `opskew calibrate` stored (run first, into a temporary cache), alternating with (1) window by window;
  3. the same iterations under opskew's tracer, corrected with its own
     calibration, for the leaf operators' reference durations.
Prints, per workload: reported vs corrected iteration time against the
uninstrumented wall time, and the leaf operators' corrected means against
opskew's.

    .venv/bin/python bench/validate_correct.py [--configs minimal,record_shapes+with_stack]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

# The tracer's collector must be configured before torch loads.
from opskew.tracing import arrange, trace

arrange()
os.environ.setdefault("KINETO_LOG_LEVEL", "6")
import torch  # noqa: E402

from opskew import _correct  # noqa: E402
from opskew.calibration import find  # noqa: E402


def tiny_loop():  # noqa: D103
    a = torch.ones(1)
    b = torch.ones(1)

    def it():
        for _ in range(200):
            torch.add(a, b)
    return it


def mlp_train():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 32), torch.randn(16, 8)

    def it():
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return it


def dispatch_heavy():
    torch.manual_seed(0)
    layers = []
    for _ in range(12):
        layers += [torch.nn.Linear(4, 4), torch.nn.LayerNorm(4), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).eval()
    x = torch.randn(1, 4)

    def it():
        with torch.no_grad():
            model(x)
    return it


WORKLOADS = {"tiny-op loop (200 x add, 1 element)": tiny_loop,
             "MLP training step (fwd+bwd+SGD)": mlp_train,
             "dispatch-heavy: 12 x (Linear+LayerNorm+GELU), 1x4 input": dispatch_heavy}


def run_state(it):
    """TARGET for `opskew calibrate THIS_FILE:run_state --setup <maker>`."""
    it()


def wall_per_iter(it, n, windows=7):
    times = []
    for _ in range(windows):
        t0 = time.perf_counter()
        for _ in range(n):
            it()
        times.append((time.perf_counter() - t0) / n)
    times.sort()
    return times[len(times) // 2]


def wrapped(it):
    def step():
        with torch.profiler.record_function("opskew::iteration"):
            it()
    return step


def leaf_means(res):
    return {o["name"]: o["corrected_total_ns"] / o["calls"] for o in res["ops"]
            if o["descendants"] == 0 and o["calls"] >= 5}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="minimal,record_shapes+with_stack")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=7, help="bare/profiled window pairs per row")
    args = ap.parse_args()
    torch.set_num_threads(1)
    configs = args.configs.split(",")
    cache = tempfile.mkdtemp(prefix="opskew-validate-")
    os.environ["OPSKEW_CACHE_DIR"] = cache
    cmd = [sys.executable, "-m", "opskew", "calibrate", "--trials", "11"]
    for c in configs:
        cmd += ["--config", "minimal" if c == "minimal" else c.replace("+", ",")]
    print("$ " + " ".join(cmd[1:]), file=sys.stderr)
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    cals = {c: find("torch.profiler", c, torch.__version__) for c in configs}
    cal_tr = find("opskew", "itt", torch.__version__)
    # Workload-specific calibrations: W measured on each workload itself.
    wcals = {}
    for wname, make in WORKLOADS.items():
        out = os.path.join(cache, f"cal-{make.__name__}.json")
        cmd = [sys.executable, "-m", "opskew", "calibrate", f"{os.path.abspath(__file__)}:run_state",
               "--setup", make.__name__, "--trials", "11", "--inject", "0", "--no-tracer", "--json", out]
        for c in configs:
            cmd += ["--config", "minimal" if c == "minimal" else c.replace("+", ",")]
        subprocess.run(cmd, check=True, stdout=sys.stderr)
        with open(out) as f:
            wcals[wname] = {c["key"]["config"]: c for c in json.load(f)["calibrations"]}
    rows = []
    tmp = tempfile.mkdtemp(prefix="opskew-validate-traces-")
    for wname, make in WORKLOADS.items():
        it = make()
        for _ in range(30):
            it()
        step = wrapped(it)
        # opskew's tracer: the leaf reference.
        with trace() as t:
            for _ in range(args.iters):
                step()
        tpath = os.path.join(tmp, "opskew.json")
        t.write(tpath)
        ref = _correct.correct(tpath, cal_tr["w_ns"]["median"], min(cal_tr["delta_ns"]["median"], cal_tr["w_ns"]["median"]))
        ref_leaf = leaf_means(ref)
        for cname in configs:
            opts = {} if cname == "minimal" else {o: True for o in cname.split("+")}
            cal = cals[cname]
            w, d = cal["w_ns"]["median"], min(max(cal["delta_ns"]["median"], 0), cal["w_ns"]["median"])
            ww = wcals[wname][cname]["w_ns"]["median"]
            # Paired: a bare window, then a profiled one, `--pairs` times; the
            # machine's drift reaches both alike, and medians are compared.
            rep_r, cor_r, corw_r, walls = [], [], [], []
            for _ in range(args.pairs):
                wall = wall_per_iter(it, args.iters, windows=1)
                with torch.profiler.profile(**opts) as prof:
                    for _ in range(args.iters):
                        step()
                path = os.path.join(tmp, "torch.json")
                prof.export_chrome_trace(path)
                res = _correct.correct(path, w, d)
                itop = next(o for o in res["ops"] if o["name"] == "opskew::iteration")
                res_w = _correct.correct(path, ww, min(d, max(ww, 0)))
                itw = next(o for o in res_w["ops"] if o["name"] == "opskew::iteration")
                n = itop["calls"]
                walls.append(wall)
                rep_r.append(itop["reported_total_ns"] / n * 1e-9 / wall)
                cor_r.append(itop["corrected_total_ns"] / n * 1e-9 / wall)
                corw_r.append(itw["corrected_total_ns"] / n * 1e-9 / wall)
            med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
            wall = med(walls)
            leaf = leaf_means(res)
            common = sorted(set(leaf) & set(ref_leaf))
            agree = [n for n in common if abs(leaf[n] - ref_leaf[n]) <= max(0.15 * ref_leaf[n], 100)]
            worst = max(common, key=lambda n: abs(leaf[n] - ref_leaf[n]), default=None)
            rows.append({"workload": wname, "config": cname, "W_ns": w, "delta_ns": d, "wall_s": wall,
                         "pairs": args.pairs,
                         "reported_s": med(rep_r) * wall, "corrected_s": med(cor_r) * wall,
                         "reported_err": med(rep_r) - 1, "corrected_err": med(cor_r) - 1,
                         "W_workload_ns": ww, "corrected_workload_s": med(corw_r) * wall,
                         "corrected_workload_err": med(corw_r) - 1,
                         "leaf_ops": len(common), "leaf_agree": len(agree),
                         "worst_leaf": worst and {"name": worst, "corrected_ns": leaf[worst],
                                                   "opskew_ns": ref_leaf[worst]},
                         "clamped": res["stats"]["clamped"]})
            r = rows[-1]
            print(f"  {wname} / {cname}: wall {wall * 1e6:.1f} us, reported {100 * r['reported_err']:+.1f}%, "
                  f"corrected {100 * r['corrected_err']:+.1f}% (workload W: {100 * r['corrected_workload_err']:+.1f}%), "
                  f"leaf ops agreeing {len(agree)}/{len(common)}", file=sys.stderr)
    print(f"\ntorch {torch.__version__}, CPU, 1 thread; {args.iters} iterations per trace; "
          f"{args.pairs} bare/profiled window pairs per row, medians of per-pair ratios; "
          "wall = the bare windows' median\n")
    print("| workload | config | wall us/iter | reported (err) | W ns (micro) | corrected (err) | "
          "W ns (workload) | corrected (err) | leaf ops within 15% or 100 ns of opskew | worst leaf (corrected vs opskew) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        wl = r["worst_leaf"]
        print(f"| {r['workload']} | {r['config']} | {r['wall_s'] * 1e6:.1f} | "
              f"{r['reported_s'] * 1e6:.1f} ({100 * r['reported_err']:+.1f}%) | {r['W_ns']:.0f} | "
              f"{r['corrected_s'] * 1e6:.1f} ({100 * r['corrected_err']:+.1f}%) | {r['W_workload_ns']:.0f} | "
              f"{r['corrected_workload_s'] * 1e6:.1f} ({100 * r['corrected_workload_err']:+.1f}%) | "
              f"{r['leaf_agree']}/{r['leaf_ops']} | "
              + (f"{wl['name']}: {wl['corrected_ns']:.0f} vs {wl['opskew_ns']:.0f} ns" if wl else "-") + " |")
    with open(os.path.join(tmp, "validation.json"), "w") as f:
        json.dump(rows, f, indent=2)
    print(f"\n(raw: {os.path.join(tmp, 'validation.json')})")


if __name__ == "__main__":
    main()
