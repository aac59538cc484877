"""How fast, and in how much memory, `opskew correct -o` corrects a large trace.

Generates synthetic traces (nested operators on three threads, torch.profiler's
event layout, one top-level tree of 20 events per block) of the requested
sizes in a temporary directory, in time order (parents first, as Kineto writes
its operators) and, up to --ooo-max-mb, children first (each parent after its
descendants: the out-of-order case, held whole in a second read), and runs on
each, as separate processes, side by side:

  engine      the C correction alone: `python -c` calling opskew._correct.correct
              (no torch imported: the correction's own memory)
  waits       the engine with the cross-thread rule on (waits=1; the synthetic
              threads overlap in time, so every event's start is noted in a
              read of its own, 8 bytes each, before the read that writes; new
              installation only), with its ratio to `engine`
  cli         `python -m opskew correct TRACE --calibration CAL -o OUT --json J`,
              what a user runs (torch imported; the trace is read once more
              beforehand to detect the profiler's options)

for this opskew and, with --baseline-python (default: /work/main/.venv/bin/python
when it exists), another installation (an earlier commit: the one that held
every event). Each runs --repeat times, the two in alternating order, and the
fastest run is shown. It prints wall time, corrected events per second and the child's
peak RSS (ru_maxrss from wait4), with ratios new/old, and whether `opskew
summary` reads the corrected trace in one pass. The traces are deleted at the
end.

    .venv/bin/python bench/bench_correct.py --sizes 200,2000

With --w-ns 2000 --head-us 40 (a W over the blocks' gaps, and 40 us of each
train_block's own time before its first child: each block comes out of the
forward placement longer than its formula, with room early) every block is
relaid (docs/correct.md), and the `relaid` column counts them: the relayout's
cost.

Speed is shown here, never asserted by tests (docs/design.md).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

W_NS, DELTA_NS = 300.0, 20.0
PID = 4242
TIDS = (4242, 4251, 4263)

# ------------------------------------------------------------------ traces


def _block(head_us: float = 0.0):
    """One top-level tree: (name, cat, start us, dur us, depth) in pre-order;
    head_us more of the root's own time before its first child."""
    ev = [("train_block", "user_annotation", 0.0, 96.0 + head_us, 0)]
    t = 1.0 + head_us
    for _ in range(3):
        ev += [("aten::linear", "cpu_op", t, 20.0, 1), ("aten::t", "cpu_op", t + 1, 5.0, 2),
               ("aten::transpose", "cpu_op", t + 2, 3.0, 3), ("aten::as_strided", "cpu_op", t + 3, 1.25, 4),
               ("aten::addmm", "cpu_op", t + 7, 12.5, 2)]
        t += 22
    for i in range(4):
        ev.append(("aten::add", "cpu_op", t + i * 7.0, 2.503 + i * 0.111, 1))
    return ev


def _post_order(ev):
    """The same events children first: each after its descendants (by end,
    deeper first at equal ends)."""
    return sorted(ev, key=lambda e: (e[2] + e[3], -e[4]))


def _template(order: str, tid: int, head_us: float = 0.0):
    ev = _block(head_us)
    if order == "post":
        ev = _post_order(ev)
    parts, offs = [], []
    for k, (name, cat, start, dur, _) in enumerate(ev):
        parts.append('{"ph": "X", "cat": "%s", "name": "%s", "pid": %d, "tid": %d, "ts": %%s, "dur": %.3f, '
                     '"args": {"External id": %d, "Record function id": 0, "Ev Idx": %d}}'
                     % (cat, name, PID, tid, dur, k + 1, k + 1))
        offs.append(start)
    return ",\n".join(parts), offs, len(ev)


HEADER = ('{\n"schemaVersion": 1,\n"deviceProperties": [],\n"displayTimeUnit": "ms",\n'
          '"baseTimeNanoseconds": 1719853884000000000,\n"traceEvents": [\n')


def generate(path: str, target_bytes: int, order: str, head_us: float = 0.0) -> dict:
    """Writes a trace of about target_bytes, blocks of each thread in turn."""
    tpl = [_template(order, tid, head_us) for tid in TIDS]
    t0 = 1212076812000.0
    block_us = 100.0 + head_us
    blocks = events = 0
    written = 0
    with open(path, "w", buffering=1 << 22) as f:
        meta = ",\n".join('{"ph": "M", "name": "thread_name", "pid": %d, "tid": %d, "args": {"name": "t%d"}}'
                          % (PID, tid, tid) for tid in TIDS)
        f.write(HEADER + meta)
        written = len(HEADER) + len(meta)
        while written < target_bytes:
            out = []
            for _ in range(32):
                base = t0 + blocks * block_us
                for body, offs, n in tpl:
                    out.append(body % tuple(f"{base + o:.3f}" for o in offs))
                    events += n
                blocks += 1
            chunk = ",\n" + ",\n".join(out)
            f.write(chunk)
            written += len(chunk)
        f.write('\n],\n"traceName": "bench_correct"\n}\n')
    return {"bytes": os.path.getsize(path), "events": events, "blocks": blocks}


# ----------------------------------------------------------------- running

ENGINE = ("import json, sys; from opskew import _correct; "
          "r = _correct.correct(sys.argv[1], %r, %r, sys.argv[2]%s); "
          "print(json.dumps({'status': r['status'], 'stats': r.get('stats')}))")


def run_child(cmd, tmp):
    """Runs cmd; returns (wall s, peak RSS MiB, exit code, stdout)."""
    out_path, err_path = os.path.join(tmp, "child.out"), os.path.join(tmp, "child.err")
    # The previous run's output still being written back would slow this
    # run's writes (dirty-page throttling): flush it first, untimed.
    os.sync()
    with open(out_path, "w") as out, open(err_path, "w") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    with open(out_path) as f:
        text = f.read()
    if p.returncode != 0:
        with open(err_path) as f:
            sys.stderr.write(f.read()[-2000:])
    return wall, ru.ru_maxrss / 1024.0, p.returncode, text


def calibration(tmp: str, w_ns: float = W_NS) -> str:
    """A calibration file both installations accept for the synthetic
    traces (torch.profiler, no option marks: minimal). Made in a child: this
    process stays small, since a child's peak RSS counts the parent's memory
    it was forked with until it execs."""
    path = os.path.join(tmp, "cal.json")
    code = ("import json, sys, torch; from opskew.calibration.store import make_key; "
            "json.dump({'schema': 'opskew.calibration/1', "
            "'key': make_key('torch.profiler', 'minimal', torch.__version__, 'cpu', 1), "
            f"'w_ns': {{'median': {w_ns!r}}}, 'delta_ns': {{'median': {DELTA_NS!r}}}}}, open(sys.argv[1], 'w'))")
    subprocess.run([sys.executable, "-c", code, path], check=True)
    return path


def one_row(label, python, mode, trace, tmp, cal, w_ns=W_NS):
    out = os.path.join(tmp, "corrected.json")
    if mode in ("engine", "waits"):
        # The engine's default (-1: the rule where the trace holds GPU
        # activity, which these traces do not) for `engine`.
        cmd = [python, "-c", ENGINE % (w_ns, DELTA_NS, ", waits=1" if mode == "waits" else ""), trace, out]
    else:
        cmd = [python, "-m", "opskew", "correct", trace, "--calibration", cal, "-o", out,
               "--json", os.path.join(tmp, "r.json"), "--top", "1"]
    wall, rss, rc, text = run_child(cmd, tmp)
    info = {}
    if rc == 0 and mode in ("engine", "waits"):
        info = json.loads(text.strip().splitlines()[-1])["stats"]
    elif rc == 0:
        with open(os.path.join(tmp, "r.json")) as f:
            info = json.load(f)["stats"]
    return {"label": label, "mode": mode, "wall": wall, "rss": rss, "rc": rc, "stats": info}, out


def summary_passes(out, tmp):
    js = os.path.join(tmp, "s.json")
    p = subprocess.run([sys.executable, "-m", "opskew", "summary", out, "--top", "1", "--json", js],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None
    with open(js) as f:
        return json.load(f)["stats"]["passes"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="200,2000", help="trace sizes in MB (default 200,2000)")
    ap.add_argument("--ooo-max-mb", type=float, default=200,
                    help="largest size for the children-first variant (held whole: default 200)")
    default_base = "/work/main/.venv/bin/python"
    ap.add_argument("--baseline-python", default=default_base if os.path.exists(default_base) else None,
                    help="the Python of another opskew installation to compare with (default: %(default)s)")
    ap.add_argument("--modes", default="engine,waits,cli",
                    help="comma-separated, of engine, waits, cli (default: all three)")
    ap.add_argument("--dir", default=None, help="where to put the traces (default: a new temporary directory)")
    ap.add_argument("--head-us", type=float, default=0.0,
                    help="each block's own time before its first child, in us (default 0)")
    ap.add_argument("--w-ns", type=float, default=W_NS,
                    help=f"W per event (default {W_NS:g}; 2000 relays every block: the relayout's cost)")
    ap.add_argument("--repeat", type=int, default=2,
                    help="runs of each installation per mode, the order of the two alternating from one repeat "
                         "to the next; the fastest is shown (default 2: the first run after a trace is written "
                         "was 1.2 to 1.5x slower whichever installation it was)")
    args = ap.parse_args()
    if args.head_us < 0 or args.w_ns < 0:
        ap.error("--head-us and --w-ns must be 0 or more")
    sizes = [float(s) for s in args.sizes.split(",") if s]
    modes = [m for m in args.modes.split(",") if m]
    impls = [("new", sys.executable)]
    if args.baseline_python:
        impls.append(("old", args.baseline_python))
    tmp = tempfile.mkdtemp(prefix="opskew-bench-correct-", dir=args.dir)
    print(f"bench_correct: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"W {args.w_ns:g} ns, delta {DELTA_NS:g} ns; new = {sys.executable}"
          + (f", old = {args.baseline_python}" if args.baseline_python else ""))
    try:
        cal = calibration(tmp, args.w_ns)
        print(f"\n{'size':>7s} {'order':>6s} {'mode':>6s} {'impl':>4s} {'wall s':>8s} {'Mev/s':>7s} "
              f"{'peak RSS MiB':>12s} {'passes':>6s} {'held peak':>10s} {'summary':>7s} {'relaid':>8s}")
        for size in sizes:
            for order in ("pre", "post"):
                if order == "post" and size > args.ooo_max_mb:
                    continue
                trace = os.path.join(tmp, f"trace-{order}-{size:g}.json")
                g = generate(trace, int(size * 1e6), order, args.head_us)
                rows = []
                for mode in modes:
                    best = {}
                    for k in range(max(args.repeat, 1)):
                        for label, python in (impls if k % 2 == 0 else impls[::-1]):
                            if mode == "waits" and label != "new":
                                continue  # an earlier opskew has no cross-thread rule
                            row, out = one_row(label, python, mode, trace, tmp, cal, args.w_ns)
                            row["summary"] = ""
                            if label == "new" and mode == modes[0] and row["rc"] == 0 and k == 0:
                                row["summary"] = f"{summary_passes(out, tmp)} pass"
                            if os.path.exists(out):
                                os.unlink(out)
                            was = best.get(label)
                            if was is None or (row["rc"] == 0 and (was["rc"] != 0 or row["wall"] < was["wall"])):
                                row["summary"] = row["summary"] or (was or {}).get("summary", "")
                                row["rss"] = max(row["rss"], (was or {}).get("rss", 0.0))
                                best[label] = row
                            else:
                                was["rss"] = max(was["rss"], row["rss"])
                    for label, _ in impls:
                        if label not in best:
                            continue
                        row = best[label]
                        rows.append(row)
                        st = row["stats"]
                        print(f"{g['bytes'] / 1e6:6.0f}M {order:>6s} {mode:>6s} {label:>4s} {row['wall']:8.2f} "
                              f"{g['events'] / row['wall'] / 1e6:7.2f} {row['rss']:12.1f} "
                              f"{st.get('passes', '-')!s:>6s} {st.get('held_peak', '-')!s:>10s} "
                              f"{row['summary']:>7s} {st.get('relaid', '-')!s:>8s}"
                              + ("" if row["rc"] == 0 else f"  exit {row['rc']}"),
                              flush=True)
                for mode in modes:
                    new = next((r for r in rows if r["mode"] == mode and r["label"] == "new"), None)
                    old = next((r for r in rows if r["mode"] == mode and r["label"] == "old"), None)
                    if new and old and new["rc"] == 0 and old["rc"] == 0:
                        print(f"{'':>7s} {order:>6s} {mode:>6s} new/old: wall {new['wall'] / old['wall']:.2f}x, "
                              f"peak RSS {new['rss'] / old['rss']:.3f}x  ({g['events']} events, "
                              f"{g['bytes'] / 1e6:.0f} MB)")
                eng = next((r for r in rows if r["mode"] == "engine" and r["label"] == "new"), None)
                wts = next((r for r in rows if r["mode"] == "waits"), None)
                if eng and wts and eng["rc"] == 0 and wts["rc"] == 0:
                    print(f"{'':>7s} {order:>6s} {'waits':>6s} waits/engine: wall {wts['wall'] / eng['wall']:.2f}x, "
                          f"peak RSS {wts['rss'] / eng['rss']:.3f}x, waited "
                          f"{wts['stats'].get('waited_ns', 0) / 1e6:.1f} ms over "
                          f"{wts['stats'].get('overlapping_threads')} overlapping threads")
                os.unlink(trace)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
