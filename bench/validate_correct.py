"""Validation of `opskew correct` on three workloads of different shapes.

For each workload, right before it is measured (the machine's speed drifts
over minutes on a shared VM, and W with it), two `opskew calibrate` runs in
child processes, into a temporary cache: the default one (W on opskew's
built-in training and inference steps, delta on the leaf panel and, with
with_stack, W_py and delta_py on empty Python calls; each trace priced by the
step it matches, as `opskew correct` prices it) and on the workload itself
(TARGET: W on its own operator mix). Then, per torch.profiler configuration, in this process:
  1. the uninstrumented wall time per iteration (one window per pair), of
     the same annotated iterations as (2);
  2. a torch.profiler trace with each iteration wrapped in
     record_function("opskew::iteration"), exported and corrected with each
     calibration, alternating with (1) window by window;
  3. the same iterations under opskew's tracer, corrected with its own
     calibration, for the leaf operators' reference durations.
Besides the two stored calibrations, each trace is corrected with an in-run W
(the median W the other pairs of the same row paid, as `opskew check
--corrected-trace` measures it); and, as a diagnostic, with the W its own
window paid.
Prints, per workload: reported vs corrected iteration time against the
uninstrumented wall time, and the leaf operators' corrected means against
opskew's.

    .venv/bin/python bench/validate_correct.py [--configs minimal,record_shapes+with_stack]
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

# The tracer's collector must be configured before torch loads.
from opskew.tracer.session import arrange, trace

arrange()
os.environ.setdefault("KINETO_LOG_LEVEL", "6")
import torch  # noqa: E402

from opskew.analyze.tracefile import correct, scan  # noqa: E402  (failures raised as opskew errors)
from opskew.calibration.store import for_trace  # noqa: E402

from opskew.stats.costmodel import CostModel  # noqa: E402


# The three workloads, shared with bench/validate_profile.py (one definition;
# that module has no side effects at import). This file's folder is on
# sys.path when it runs as a script, and `opskew calibrate THIS_FILE:run_state
# --setup tiny_loop` finds the names here too.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from validate_profile import WORKLOADS as PROFILE_WORKLOADS  # noqa: E402
from validate_profile import (conv_train, dispatch_heavy, lstm_lm, mha_block, mlp_train, seq2seq,  # noqa: E402,F401
                              tfm_encoder, tiny_loop)

WORKLOADS = {"tiny-op loop (200 x add, 1 element)": tiny_loop,
             "MLP training step (fwd+bwd+SGD)": mlp_train,
             "dispatch-heavy: 12 x (Linear+LayerNorm+GELU), 1x4 input": dispatch_heavy}
# Held out (--workloads): models this project did not write, torch.nn's,
# which the calibrations' defaults were never looked at against.
HELD_OUT = ("tfm_encoder", "lstm_lm", "mha_block", "seq2seq", "conv_train")


def run_state(it):
    """TARGET for `opskew calibrate THIS_FILE:run_state --setup <maker>`: one
    iteration as the validation runs it, inside its annotation."""
    with torch.profiler.record_function("opskew::iteration"):
        it()


def loop_s(step, n):
    """Seconds per iteration of `n` calls of step(). Every timed loop (bare,
    under torch.profiler, under opskew's tracer) runs here, called from
    main(): step() then runs at the same depth of Python's frame stack in all
    of them (a frame layout alone moved a deep-Python step by 12 to 14%:
    docs/profile-validation.md, "Stack alignment")."""
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    return (time.perf_counter() - t0) / n


def wrapped(it):
    def step():
        with torch.profiler.record_function("opskew::iteration"):
            it()
    return step


def py_constants(cal):
    """W_py and delta_py of a calibration (0 without with_stack)."""
    wp = max((cal.get("w_py_ns") or {}).get("median", 0.0), 0.0)
    return wp, min(max((cal.get("delta_py_ns") or {}).get("median", 0.0), 0.0), wp)


def median_by_name(runs):
    """Per name, the median over runs of a name -> value mapping."""
    names = set().union(*runs) if runs else set()
    out = {}
    for n in names:
        vals = sorted(r[n] for r in runs if n in r)
        out[n] = vals[len(vals) // 2]
    return out


def leaf_means(res):
    return {o["name"]: o["corrected_total_ns"] / o["calls"] for o in res["ops"]
            if o["descendants"] == 0 and o["calls"] >= 5}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="minimal,record_shapes+with_stack")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=9, help="bare/profiled window pairs per row")
    ap.add_argument("--cal-trials", type=int, default=21, help="rounds of each `opskew calibrate` run")
    ap.add_argument("--json", help="write every row here (the temporary traces and cache are removed)")
    ap.add_argument("--workloads", help="validate_profile.py's workloads by name, comma-separated, in place of the "
                                        f"three (held-out torch.nn models: {', '.join(HELD_OUT)})")
    ap.add_argument("--cal-retries", type=int, default=2,
                    help="reruns of a calibration that came out noisy (CI wider than +-20%%)")
    args = ap.parse_args()
    if args.workloads:
        names = args.workloads.split(",")
        unknown = [n for n in names if n not in HELD_OUT and n not in ("tiny_loop", "mlp_train", "dispatch_heavy")]
        if unknown:
            ap.error(f"--workloads: {', '.join(unknown)}: one of tiny_loop, mlp_train, dispatch_heavy, "
                     + ", ".join(HELD_OUT))
        WORKLOADS.clear()
        WORKLOADS.update({f"{n}: {PROFILE_WORKLOADS[n][2]}": globals()[n] for n in names})
    torch.set_num_threads(1)
    configs = args.configs.split(",")
    cache = tempfile.mkdtemp(prefix="opskew-validate-")
    os.environ["OPSKEW_CACHE_DIR"] = cache
    cfg_args = []
    for c in configs:
        cfg_args += ["--config", "minimal" if c == "minimal" else c.replace("+", ",")]

    def calibrate(*extra, json_out):
        """Runs `opskew calibrate` in a child process (the tracer's collector
        must load before torch); returns its calibrations by config."""
        cmd = [sys.executable, "-m", "opskew", "calibrate", "--trials", str(args.cal_trials), *cfg_args,
               *extra, "--json", json_out]
        print("$ opskew " + " ".join(cmd[3:]), file=sys.stderr)
        # A calibration whose CI is too wide (calibrate's "noisy" flag: the
        # machine was busy) is measured again, up to --cal-retries times; the
        # retries are counted in the table.
        for attempt in range(args.cal_retries + 1):
            subprocess.run(cmd, check=True, stdout=sys.stderr)
            with open(json_out) as f:
                cals = {c["key"]["config"]: c for c in json.load(f)["calibrations"]}
            if not any(c.get("noisy") for k, c in cals.items() if k != "itt"):
                break
        for c in cals.values():
            c["attempts"] = attempt + 1
        return cals

    rows = []
    tmp = tempfile.mkdtemp(prefix="opskew-validate-traces-")
    try:
        run(args, configs, calibrate, rows, tmp, cache)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)


def run(args, configs, calibrate, rows, tmp, cache):
    """The rows, workload by workload, into `rows` (main's temporary folders)."""
    for wname, make in WORKLOADS.items():
        # Calibrated right before this workload is measured: the machine's
        # speed drifts over minutes on a shared VM, and W drifts with it.
        cals = calibrate(json_out=os.path.join(cache, f"micro-{make.__name__}.json"))
        cal_tr = cals["itt"]
        wcals = calibrate(f"{os.path.abspath(__file__)}:run_state", "--setup", make.__name__, "--inject", "0",
                          "--no-tracer", json_out=os.path.join(cache, f"cal-{make.__name__}.json"))
        it = make()
        for _ in range(30):
            it()
        step = wrapped(it)
        tpath = os.path.join(tmp, "opskew.json")

        def opskew_leaf(t):
            """Leaf operators' corrected means in opskew's tracer session `t`
            (its loop ran from main()): the reference."""
            t.write(tpath)
            ref = correct(tpath, CostModel.default(cal_tr["w_ns"]["median"], min(cal_tr["delta_ns"]["median"], cal_tr["w_ns"]["median"])))
            return leaf_means(ref)

        ref_runs = []
        for cname in configs:
            opts = {} if cname == "minimal" else {o: True for o in cname.split("+")}
            cal, wcal = cals[cname], wcals[cname]
            wp, dp = py_constants(cal)
            w = d = None  # the default calibration as `opskew correct` prices this trace, from its first export
            ww = wcal["w_ns"]["median"]
            # Paired: a bare window, a profiled one and one under opskew's
            # tracer, `--pairs` times; the machine's drift reaches all alike,
            # and medians are compared.
            rep_r, cor_r, corw_r, walls, leaf_runs, w_here_r, orc_r, it_rows = [], [], [], [], [], [], [], []
            for _ in range(args.pairs):
                # The bare window runs the same annotated iterations: the
                # annotation costs a few us of Python and dispatch even with
                # no profiler, and that is the workload's, not the profiler's.
                wall = loop_s(step, args.iters)
                with torch.profiler.profile(**opts) as prof:
                    prof_wall = loop_s(step, args.iters)
                path = os.path.join(tmp, "torch.json")
                prof.export_chrome_trace(path)
                if w is None:
                    # Training or inference step, by the trace's backward
                    # nodes (calibration.store.for_trace, as opskew correct).
                    priced = for_trace(cal, bool(scan(path)["marks"].get("backward")))
                    w, d = priced["w_ns"]["median"], min(max(priced["delta_ns"]["median"], 0), priced["w_ns"]["median"])
                    step_kind = priced.get("_step", "micro")
                res = correct(path, CostModel.default(w, d, wp, dp))
                itop = next(o for o in res["ops"] if o["name"] == "opskew::iteration")
                res_w = correct(path, CostModel.default(ww, min(d, max(ww, 0)), wp, dp))
                itw = next(o for o in res_w["ops"] if o["name"] == "opskew::iteration")
                n = itop["calls"]
                walls.append(wall)
                rep_r.append(itop["reported_total_ns"] / n * 1e-9 / wall)
                cor_r.append(itop["corrected_total_ns"] / n * 1e-9 / wall)
                corw_r.append(itw["corrected_total_ns"] / n * 1e-9 / wall)
                # Diagnostic, not a method: W as this very window paid it (its
                # wall against the bare window's), which tells a wrong model
                # from a calibration that does not carry over between processes.
                ops_it = itop["descendants"] / n + 1
                w_here = ((prof_wall - wall) * 1e9 - wp * itop["py_descendants"] / n) / ops_it
                oracle = (itop["reported_total_ns"] - n * d - w_here * itop["descendants"]
                          - wp * itop["py_descendants"]) / n
                w_here_r.append(w_here)
                orc_r.append(oracle * 1e-9 / wall)
                it_rows.append((itop["reported_total_ns"], n, itop["descendants"], itop["py_descendants"], wall))
                leaf_runs.append(leaf_means(res))
                with trace() as t:
                    loop_s(step, args.iters)
                ref_runs.append(opskew_leaf(t))
            med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
            # In-run calibration, as `opskew check --corrected-trace` does it:
            # each trace corrected with the median W the *other* pairs paid.
            inrun_r, inrun_w = [], []
            for i, (rep_ns, n, desc, py_desc, bw) in enumerate(it_rows):
                w_loo = med(w_here_r[:i] + w_here_r[i + 1:])
                inrun_w.append(w_loo)
                inrun_r.append((rep_ns - n * d - w_loo * desc - wp * py_desc) / n * 1e-9 / bw)
            wall = med(walls)
            leaf, ref_leaf = median_by_name(leaf_runs), median_by_name(ref_runs)
            common = sorted(set(leaf) & set(ref_leaf))
            agree = [n for n in common if abs(leaf[n] - ref_leaf[n]) <= max(0.15 * ref_leaf[n], 100)]
            worst = max(common, key=lambda n: abs(leaf[n] - ref_leaf[n]), default=None)
            rows.append({"workload": wname, "config": cname, "W_ns": w, "W_step": step_kind, "delta_ns": d, "W_py_ns": wp,
                         "delta_py_ns": dp, "wall_s": wall,
                         "pairs": args.pairs,
                         "reported_s": med(rep_r) * wall, "corrected_s": med(cor_r) * wall,
                         "reported_err": med(rep_r) - 1, "corrected_err": med(cor_r) - 1,
                         "cal_attempts": [cal["attempts"], wcal["attempts"]], "cal_noisy": [cal["noisy"], wcal["noisy"]],
                         "W_workload_ns": ww, "corrected_workload_s": med(corw_r) * wall,
                         "corrected_workload_err": med(corw_r) - 1,
                         "W_in_window_ns": med(w_here_r), "corrected_in_window_err": med(orc_r) - 1,
                         "W_in_run_ns": med(inrun_w), "corrected_in_run_err": med(inrun_r) - 1,
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
    print("| workload | config | wall us/iter | reported (err) | W / W_py ns (default calibration: step) | corrected (err) | "
          "W ns (workload) | corrected (err) | leaf ops within 15% or 100 ns of opskew | worst leaf (corrected vs opskew) "
          "| W ns (in-run) | corrected (err) | diagnostic: W ns paid in the window (err if corrected with it) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        wl = r["worst_leaf"]
        print(f"| {r['workload']} | {r['config']} | {r['wall_s'] * 1e6:.1f} | "
              f"{r['reported_s'] * 1e6:.1f} ({100 * r['reported_err']:+.1f}%) | {r['W_ns']:.0f}"
              + f" ({r['W_step']})"
              + (f" / {r['W_py_ns']:.0f}" if r["W_py_ns"] else "") + " | "
              f"{r['corrected_s'] * 1e6:.1f} ({100 * r['corrected_err']:+.1f}%) | {r['W_workload_ns']:.0f} | "
              f"{r['corrected_workload_s'] * 1e6:.1f} ({100 * r['corrected_workload_err']:+.1f}%) | "
              f"{r['leaf_agree']}/{r['leaf_ops']} | "
              + (f"{wl['name']}: {wl['corrected_ns']:.0f} vs {wl['opskew_ns']:.0f} ns" if wl else "-")
              + f" | {r['W_in_run_ns']:.0f} | {100 * r['corrected_in_run_err']:+.1f}%"
              + f" | {r['W_in_window_ns']:.0f} ({100 * r['corrected_in_window_err']:+.1f}%) |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
