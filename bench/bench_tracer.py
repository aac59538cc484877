"""What each instrument adds per operator: opskew's tracer against the floors
and against torch.profiler, in the window and at stop/export.

    .venv/bin/python bench/bench_tracer.py [--ops 20000] [--trials 7] [--rounds 3] [--rows A,B,...]
        [--separate]

Instruments, in worker processes interleaved over rounds. The ITT collector's
rows need their environment before `import torch`, so each runs in a worker
of its own; all the others run side by side in one worker per round (with
--separate, each in its own), taking turns in every trial, so that their
comparisons (opskew-native against its floor and against torch.profiler)
carry no spread between processes (malloc's state moves a row's added cost
from one process to the next: docs/tracer.md):
  itt-floor       emit_itt() with no collector loaded: RecordFunction active, ITT
                  calls return at once (the floor of the ITT route)
  empty-observer  torch._C._autograd._set_empty_test_observer(True, 1.0):
                  RecordFunction active with an empty callback that boxes inputs
  opskew          opskew.trace(instrument="itt"): emit_itt + opskew's ITT collector
  native-floor    opskew's native shim with its counting-only callback (thread-local,
                  no inputs/outputs/ids): the floor of the native route
  native-floor-global  the same callback registered globally
  opskew-native   opskew.trace(instrument="native"): the shim's thread-local callback
                  forwarding to opskew's native collector
  opskew-native-global  the same with one global callback (OPSKEW_NATIVE_SCOPE=global)
  opskew-native-spill   opskew-native with a memory budget of 1 MiB (OPSKEW_TRACE_BUDGET_MB=1):
                  past about 44,000 events per window (--ops 100000, say) full chunks go
                  to the spill file from the recording thread: the spill's cost in the window
  opskew-pyhook   opskew.trace(instrument="pyhook"): the fallback, a C profile
                  hook on torch builtins (one event per torch.add call here too)
  torch.profiler  torch.profiler.profile(activities=[CPU]), minimal config
  opskew-base     (with --baseline-python PY) opskew.trace() of the opskew installed
                  in PY's environment (an earlier commit, say): before/after in one run

Inside each worker, trials alternate baseline (no instrument) and instrumented
loops of `--ops` torch.add(a, a) calls on a 1-element tensor (ABAB, after a
warm-up), timed inside the window; the added cost per op is the paired
difference. Then stop (opskew: stop + flush into a snapshot; torch.profiler:
__exit__, which includes its post-processing) and export (opskew: write the
Chrome trace in C; torch.profiler: export_chrome_trace) are timed per event.
One thread (torch.set_num_threads(1)). Medians; 95% CI of the paired median.
For rows side by side, the ratio to torch.profiler is also taken per trial
(both windows in the same process and trial), with its 95% CI.
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

INSTRUMENTS = ["itt-floor", "empty-observer", "opskew", "opskew-pyhook", "torch.profiler",
               "native-floor", "native-floor-global", "opskew-native", "opskew-native-global",
               "opskew-native-spill"]

WORKER = r"""
import json, os, sys, time, tempfile
insts, ops, trials = sys.argv[1].split(","), int(sys.argv[2]), int(sys.argv[3])
if "opskew" in insts:
    if len(insts) > 1:
        raise SystemExit("the ITT collector's row needs a process of its own")
    import opskew
    opskew.tracer.arrange()          # before torch: the collector must be arranged
elif any(i.startswith("opskew-") or i.startswith("native-") for i in insts):
    import opskew
import torch
if any(i.startswith("native-floor") for i in insts):
    from opskew.tracer import native
    shim, why = native.shim(torch)
    if shim is None:
        raise SystemExit("native shim unavailable: " + why)
# Read at each session's start, so set for that row's windows only.
ROW_ENV = {"opskew-native-global": ("OPSKEW_NATIVE_SCOPE", "global"),
           "opskew-native-spill": ("OPSKEW_TRACE_BUDGET_MB", "1")}
torch.set_num_threads(1)
a = torch.ones(1)
add = torch.add
rng = range(ops)
tmp = tempfile.mkdtemp()

def loop():
    t0 = time.perf_counter_ns()
    for _ in rng:
        add(a, a)
    return time.perf_counter_ns() - t0

# Under callgrind (bench/bench_tracer_ir.py): count instructions inside each
# loop only, one dump per loop, labelled base, inst or warm.
marks = os.environ.get("OPSKEW_BENCH_MARKS")
label = ["warm"]
if marks:
    import ctypes
    cg = ctypes.CDLL(marks)
    cg.osk_bench_dump.argtypes = [ctypes.c_char_p]
    cg.osk_bench_start()
    _timed = loop

    def loop():
        cg.osk_bench_toggle()
        t = _timed()
        cg.osk_bench_toggle()
        cg.osk_bench_dump(label[0].encode())
        return t

def window(inst):
    # returns (in-window ns, stop ns, export ns, events)
    env = ROW_ENV.get(inst)
    if env:
        os.environ[env[0]] = env[1]
    try:
        return _window(inst)
    finally:
        if env:
            os.environ.pop(env[0], None)

def stop_and_export(session, export, path):
    # (stop ns, export ns): the session's __exit__, then export(path), each timed
    s0 = time.perf_counter_ns()
    session.__exit__(None, None, None)
    s1 = time.perf_counter_ns()
    export(path)
    s2 = time.perf_counter_ns()
    return s1 - s0, s2 - s1

def _window(inst):
    if inst == "itt-floor":
        with torch.autograd.profiler.emit_itt():
            t = loop()
        return t, None, None, ops
    if inst == "empty-observer":
        torch._C._autograd._set_empty_test_observer(True, 1.0)
        try:
            t = loop()
        finally:
            torch._C._autograd._clear_callbacks()
        return t, None, None, ops
    if inst.startswith("native-floor"):
        glob = inst.endswith("global")
        (shim.osk_shim_attach_global if glob else shim.osk_shim_attach_thread)(1)
        try:
            t = loop()
        finally:
            (shim.osk_shim_detach_global if glob else shim.osk_shim_detach_thread)()
        return t, None, None, ops
    if inst.startswith("opskew"):
        want = {"opskew": "itt", "opskew-pyhook": "pyhook"}.get(inst, "native")
        ctx = opskew.trace(instrument=want)
        tr = ctx.__enter__()
        t = loop()
        stop, export = stop_and_export(ctx, tr.write, os.path.join(tmp, "o.json"))
        if tr.instrument != want:
            raise SystemExit(f"{inst}: recorded with {tr.instrument}, not {want}")
        return t, stop, export, tr.n_events
    if inst == "torch.profiler":
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        prof.__enter__()
        t = loop()
        stop, export = stop_and_export(prof, prof.export_chrome_trace, os.path.join(tmp, "p.json"))
        n = sum(1 for e in prof.events() if e.name == "aten::add")
        return t, stop, export, n
    raise SystemExit("unknown instrument " + inst)

for _ in range(2):                     # warm up both paths
    for inst in insts:
        loop(); window(inst)
out = {inst: [] for inst in insts}
for i in range(trials):
    # Rows sharing the process take turns, in an order that rotates per trial.
    for inst in insts[i % len(insts):] + insts[:i % len(insts)]:
        label[0] = "base"
        b = loop()
        label[0] = "inst"
        w, stop, exp, n = window(inst)
        label[0] = "warm"
        out[inst].append({"base": b, "inst": w, "stop": stop, "export": exp, "events": n, "trial": i})
import shutil
shutil.rmtree(tmp, ignore_errors=True)
print(json.dumps({"instruments": insts, "torch": torch.__version__, "trials": out}))
"""


# Rows that can share one process: none needs anything set before torch is
# imported (the ITT collector's row does: INTEL_LIBITTNOTIFY64).
SHAREABLE = {"itt-floor", "empty-observer", "native-floor", "native-floor-global", "opskew-native",
             "opskew-native-global", "opskew-native-spill", "opskew-pyhook", "torch.profiler"}


def run_worker(insts, ops, trials, baseline_python=None):
    """One worker process for the rows `insts` (several only when all are
    SHAREABLE); opskew-base runs opskew's ITT row with the baseline Python
    (another opskew), every other row with this one. Returns
    {"torch": version, "trials": {row: [trial, ...]}}."""
    env = dict(os.environ)
    env.pop("INTEL_LIBITTNOTIFY64", None)  # only opskew's worker arranges it
    env.setdefault("OMP_NUM_THREADS", "1")
    python = sys.executable
    names = ["opskew" if i == "opskew-base" else i for i in insts]
    if "opskew-base" in insts:
        python = baseline_python
    p = subprocess.run([python, "-c", WORKER, ",".join(names), str(ops), str(trials)],
                       capture_output=True, text=True, env=env, timeout=1800)
    if p.returncode != 0:
        sys.exit(f"worker {','.join(insts)} failed ({p.returncode}):\n{p.stderr}")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    return {"torch": res["torch"], "trials": {i: res["trials"][n] for i, n in zip(insts, names)}}


def groups_of(instruments, separate):
    """The worker processes of one round: the shareable rows together (side by
    side in one process, as the issue's spike measured), each other row alone."""
    if separate:
        return [[i] for i in instruments]
    shared = [i for i in instruments if i in SHAREABLE]
    return ([shared] if shared else []) + [[i] for i in instruments if i not in SHAREABLE]


def ratio_ci(data, row, ref, engine):
    """Per trial, in one process: row's added cost over ref's (both paired
    with their own baseline loop in that trial); median and 95% CI."""
    rs = []
    for a, b in zip(data[row], data[ref]):
        da, db = a["inst"] - a["base"], b["inst"] - b["base"]
        if a.get("worker") == b.get("worker") and a.get("trial") == b.get("trial") and db > 0:
            rs.append(da / db)
    if len(rs) < 2 or engine is None:
        return None
    pr = engine.paired([0.0] * len(rs), rs)
    return pr["median"], pr["ci"], len(rs), pr["ci_coverage"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", type=int, default=20000)
    ap.add_argument("--trials", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline-python", default=None, metavar="PY",
                    help="a Python whose environment has another opskew installed, measured as opskew-base")
    ap.add_argument("--rows", default=None, metavar="A,B,...",
                    help="only these rows (torch.profiler is always measured: the ratios need it)")
    ap.add_argument("--separate", action="store_true",
                    help="every row in worker processes of its own (by default the rows that can share a "
                         "process run side by side in one per round, which removes the spread between "
                         "processes from their comparisons)")
    args = ap.parse_args()
    instruments = INSTRUMENTS + (["opskew-base"] if args.baseline_python else [])
    if args.rows:
        want = set(args.rows.split(",")) | {"torch.profiler"}
        unknown = want - set(instruments)
        if unknown:
            ap.error(f"unknown rows: {', '.join(sorted(unknown))}")
        instruments = [i for i in instruments if i in want]
    try:
        from opskew import _engine
    except ImportError:
        _engine = None

    data = {i: [] for i in instruments}
    torch_version = "?"
    for r in range(args.rounds):
        groups = groups_of(instruments, args.separate)
        for g in groups[r % len(groups):] + groups[:r % len(groups)]:
            res = run_worker(g, args.ops, args.trials, args.baseline_python)
            torch_version = res["torch"]
            for inst, trials in res["trials"].items():
                data[inst].extend(dict(t, worker=(r, tuple(g))) for t in trials)
            print(f"  round {r + 1}/{args.rounds}: {','.join(g)} done", file=sys.stderr)

    rows = {}
    base_all = []
    for inst, trials in data.items():
        ev = statistics.median(t["events"] for t in trials)
        base = [t["base"] / args.ops for t in trials]
        inst_ns = [t["inst"] / args.ops for t in trials]
        base_all += base
        if _engine is not None:
            pr = _engine.paired(base, inst_ns)
            added, ci = pr["median"], pr["ci"]
        else:
            d = sorted(i - b for i, b in zip(inst_ns, base))
            added, ci = statistics.median(d), (d[0], d[-1])
        stop = [t["stop"] / t["events"] for t in trials if t["stop"] is not None and t["events"]]
        exp = [t["export"] / t["events"] for t in trials if t["export"] is not None and t["events"]]
        rows[inst] = {
            "added": added, "ci": ci, "events_per_op": ev / args.ops,
            "stop": statistics.median(stop) if stop else None,
            "export": statistics.median(exp) if exp else None,
        }

    tp = rows["torch.profiler"]
    print()
    shared = [g for g in groups_of(instruments, args.separate) if len(g) > 1]
    print(f"torch {torch_version}, 1 thread, torch.add on a 1-element CPU tensor, {args.ops} ops per window, "
          f"{args.trials} trials x {args.rounds} rounds per instrument (paired, interleaved)")
    print("side by side in one process per round: " + (", ".join(shared[0]) if shared else "none (--separate)"))
    print(f"baseline loop (no instrument): {statistics.median(base_all):.1f} ns/op (median over all workers)")
    print()
    hdr = (f"{'instrument':<16} {'in-window ns/op':>16} {'95% CI':>17} {'x prof':>7} {'ev/op':>6} "
           f"{'stop ns/ev':>11} {'export ns/ev':>13} {'stop+exp ns/ev':>15} {'x prof':>8}")
    print(hdr)
    print("-" * len(hdr))
    tp_out = (tp["stop"] or 0) + (tp["export"] or 0)
    for inst in instruments:
        r = rows[inst]
        out = None if r["stop"] is None else r["stop"] + (r["export"] or 0)

        def f(v, w, p=1):
            return f"{v:>{w}.{p}f}" if v is not None else f"{'-':>{w}}"

        ci = "[%.1f, %.1f]" % tuple(r["ci"])
        print(f"{inst:<16} {r['added']:>16.1f} {ci:>17} "
              f"{r['added'] / tp['added']:>7.2f} {r['events_per_op']:>6.2f} {f(r['stop'], 11)} {f(r['export'], 13)} "
              f"{f(out, 15)} {f(out / tp_out if out is not None and tp_out else None, 8, 4)}")
    print()
    for row in ("native-floor", "opskew-native"):
        rc = ratio_ci(data, row, "torch.profiler", _engine) if row in data else None
        if rc:
            print(f"{row} / torch.profiler, per trial in one process: {rc[0]:.3f}x, CI "
                  f"[{rc[1][0]:.3f}, {rc[1][1]:.3f}] ({rc[3]:.0%} coverage) over {rc[2]} trials")
    if "opskew-native-spill" in rows and "opskew-native" in rows:
        sp, n = rows["opskew-native-spill"], rows["opskew-native"]
        print(f"spill: opskew-native with a 1 MiB budget - without: {sp['added'] - n['added']:+.1f} ns/op in the "
              f"window; stop+write per event {sp['stop'] + sp['export']:.1f} vs {n['stop'] + n['export']:.1f} ns")
    if "opskew-base" in rows and "opskew" in rows:
        b, o = rows["opskew-base"], rows["opskew"]
        print(f"before/after (ITT collector): {o['added']:.1f} vs opskew-base {b['added']:.1f} ns/op in the window "
              f"({o['added'] - b['added']:+.1f}); stop+write per event {o['stop'] + o['export']:.1f} vs "
              f"{b['stop'] + b['export']:.1f} ns")
    if not all(k in rows for k in ("opskew", "itt-floor", "opskew-native", "native-floor",
                                   "opskew-native-global", "native-floor-global")):
        return
    o, fl = rows["opskew"], rows["itt-floor"]
    gap = o["added"] - fl["added"]
    print(f"goal 1: opskew in-window within 40 ns/op of the ITT floor: {gap:+.1f} ns/op -> "
          f"{'met' if gap <= 40 else 'NOT met'}")
    ratio = o["added"] / tp["added"]
    print(f"goal 2: opskew in-window <= 0.5x torch.profiler minimal: {ratio:.2f}x -> "
          f"{'met' if ratio <= 0.5 else 'NOT met'}")
    o_out = o["stop"] + o["export"]
    n, nf = rows["opskew-native"], rows["native-floor"]
    ng, nfg = rows["opskew-native-global"], rows["native-floor-global"]
    print(f"native: opskew-native - native-floor: {n['added'] - nf['added']:+.1f} ns/op (target <= 30); "
          f"global: {ng['added'] - nfg['added']:+.1f} ns/op over its own floor")
    print(f"native: opskew-native / torch.profiler minimal, in-window: {n['added'] / tp['added']:.2f}x "
          f"(target <= 0.3x); opskew (ITT): {ratio:.2f}x; opskew-native-global: {ng['added'] / tp['added']:.2f}x")
    print(f"native: thread-local vs global callback, forwarding: {n['added']:.1f} vs {ng['added']:.1f} ns/op; "
          f"counting only: {nf['added']:.1f} vs {nfg['added']:.1f} ns/op")
    n_out = n["stop"] + n["export"]
    print(f"native: stop+write per event {n_out:.1f} ns vs ITT collector's {o_out:.1f} ns")
    print(f"goal 3: opskew flush+write per event <= 1/100 of torch.profiler stop+export: "
          f"{o_out:.1f} vs {tp_out:.1f} ns/event = 1/{tp_out / o_out:.0f} -> {'met' if o_out * 100 <= tp_out else 'NOT met'}")


if __name__ == "__main__":
    main()
