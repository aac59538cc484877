"""How fast, and in how much memory, `opskew summary` reads a large trace.

Generates synthetic Kineto-style traces (torch.profiler's export format:
pretty-printed, cpu_op and user_annotation events with the args PyTorch adds
under record_shapes, a forward and a backward thread, fwdbwd flows, metadata
events) of the requested sizes in a temporary directory, then times on each,
as separate processes, interleaved:

  opskew      `python -m opskew summary TRACE --json OUT --top 0`
  json+py     json.load + a plain-Python per-thread nesting and per-name
              aggregation (calls, total, self, p50, p99): what a script does
  hta         HolisticTraceAnalysis's loader, TraceAnalysis(trace_dir=...),
              run from the interpreter given by --hta-python (skipped if absent)
  opskew-gz   (with --gzip) the same trace gzip-compressed
  opskew-base (with --baseline-python PY) `opskew summary` of another opskew,
              installed in PY's environment (an earlier commit, say), every
              round beside opskew: a before/after comparison in one run
  parse:*     (with --parsers) parsers alone, in C, counting events: opskew's
              reader (bench/parse_opskew.c) against yajl 2, the packaged
              streaming C parser (bench/parse_yajl.c; needs libyajl-dev):
              why opskew has its own scanner
  parse:baseline  (with --parsers-baseline FILE) parse_opskew.c built with
              another reader.c (`git show REV:csrc/reader/reader.c > FILE`),
              beside parse:opskew: a before/after of the reader alone

With --big-event MB it runs another comparison instead: `opskew summary` of a
trace whose one event is MB megabytes (a string in its args), against an
ordinary trace of the same size, as time per byte and their ratio (the reader
is linear in the input whatever the size of an event; it was quadratic).

and prints wall time and peak RSS (getrusage of each child, via wait4) side by
side with ratios to opskew. The traces are deleted at the end.

    .venv-reader/bin/python bench/bench_reader.py --sizes 100,600 \\
        --hta-python .venv-reader-hta/bin/python

Speed is shown here, never asserted by tests (docs/design.md).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# ------------------------------------------------------------------ traces

PID, TID_FWD, TID_BWD = 4242, 4242, 4251


def _event(name, cat, tid, ts, dur, ext, shapes):
    """One event in the byte layout of torch.profiler's export_chrome_trace."""
    args = f'"External id": {ext},"Record function id": 0, "Ev Idx": {ext}'
    if shapes:
        args = (f'"External id": {ext},"Record function id": 0, "Concrete Inputs": ["", "", "", "1"], '
                f'"Input type": ["float", "float", "float", "Scalar"], '
                f'"Input Strides": [[32, 1], [1, 16], [1], []], '
                f'"Input Dims": [[8, 32], [32, 16], [16], []], "Ev Idx": {ext}')
    return (f'  {{\n    "ph": "X",\n    "cat": "{cat}",\n    "name": "{name}",\n    "pid": {PID},\n'
            f'    "tid": {tid},\n    "ts": %s,\n    "dur": {dur:.3f}\n    ,\n'
            f'    "args": {{\n      {args}\n    }}\n  }}'), ts


def _step_template():
    """A block of a training step: forward on one thread, backward on
    another, tiny ops.

    Returns (format string with one %s per event timestamp, offsets in us,
    block length in us, events per block)."""
    parts, offs = [], []
    ext = [0]

    def add(name, cat, tid, ts, dur, shapes=False):
        ext[0] += 1
        text, t = _event(name, cat, tid, ts, dur, ext[0], shapes)
        parts.append(text)
        offs.append(t)

    t = 0.0
    add("train_block", "user_annotation", TID_FWD, t, 990.0)  # a record_function
    t += 1.0
    for layer in range(8):  # forward: linear -> t -> transpose -> as_strided, addmm, relu
        add("aten::linear", "cpu_op", TID_FWD, t, 30.0, True)
        add("aten::t", "cpu_op", TID_FWD, t + 1, 5.0)
        add("aten::transpose", "cpu_op", TID_FWD, t + 2, 3.0)
        add("aten::as_strided", "cpu_op", TID_FWD, t + 3, 1.25)
        add("aten::addmm", "cpu_op", TID_FWD, t + 7, 20.5, True)
        add("aten::relu", "cpu_op", TID_FWD, t + 31, 6.0)
        add("aten::clamp_min", "cpu_op", TID_FWD, t + 32, 4.5)
        t += 40
    for i in range(60):  # a dispatch-bound loop of tiny ops
        add("aten::add", "cpu_op", TID_FWD, t, 2.503 + (i % 7) * 0.111)
        t += 3.5
    add("aten::mse_loss", "cpu_op", TID_FWD, t, 12.0, True)
    add("aten::mean", "cpu_op", TID_FWD, t + 2, 4.0)
    t += 15
    b = t
    for layer in range(8):  # backward on the autograd thread
        add("autograd::engine::evaluate_function: AddmmBackward0", "cpu_op", TID_BWD, b, 40.0)
        add("AddmmBackward0", "cpu_op", TID_BWD, b + 1, 35.0)
        add("aten::mm", "cpu_op", TID_BWD, b + 2, 14.0, True)
        add("aten::mm", "cpu_op", TID_BWD, b + 17, 14.0, True)
        add("aten::sum", "cpu_op", TID_BWD, b + 32, 3.0)
        b += 45
    add("Optimizer.step#SGD.step", "user_annotation", TID_FWD, b + 5, 60.0)
    for i in range(16):
        add("aten::add_", "cpu_op", TID_FWD, b + 6 + i * 3.5, 3.0)
    flows = (f',\n  {{\n    "ph": "s", "id": 1, "pid": {PID}, "tid": {TID_FWD},\n    "ts": %s,\n'
             f'    "cat": "fwdbwd", "name": "fwdbwd"\n  }}'
             f',\n  {{\n    "ph": "f", "id": 1, "pid": {PID}, "tid": {TID_BWD},\n    "ts": %s,\n'
             f'    "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"\n  }}')
    offs += [1.0, b]
    return ",\n".join(parts) + flows, offs, 1000.0, len(parts) + 2


def _name_event(kind, tid, name):
    """A metadata ("M") event naming a process or a thread, in the export's
    layout; pid, tid and name may hold %(key)d placeholders."""
    return (f'  {{\n    "ph": "M", "name": "{kind}", "pid": %(pid)d, "tid": {tid},\n'
            f'    "args": {{\n      "name": "{name}"\n    }}\n  }},\n')


def kineto_header(members, process, threads):
    """The export's text up to its first event, as a %-template: the top-level
    `members` (whole lines) before "displayTimeUnit", then the metadata events
    naming the process (`process`, pid %(pid)d) and each of `threads`, (key,
    name): thread %(key)d, named "thread N (name)" as Kineto names them."""
    return ('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n  ],\n' + members
            + '  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": 1719853884000000000,\n'
            + '  "traceEvents": [\n' + _name_event("process_name", 0, process)
            + "".join(_name_event("thread_name", f"%({k})d", f"thread %({k})d ({n})") for k, n in threads))


def kineto_footer(ts, trace_name):
    """The export's text after its last event, as a %-template: the profiler's
    own span (from `ts`; its dur a %s), the window's end (a %s) and
    "traceName"."""
    return (',\n  {\n    "ph": "X", "cat": "Trace", "ts": ' + ts + ', "dur": %s,\n'
            '    "pid": "Spans", "tid": "PyTorch Profiler",\n    "name": "PyTorch Profiler (0)",\n'
            '    "args": {\n      "Op count": 0\n    }\n  },\n'
            '  {\n    "name": "Record Window End", "ph": "i", "s": "g",\n    "pid": "", "tid": "", "ts": %s\n  }\n'
            '],\n  "traceName": "' + trace_name + '"\n}\n')


HEADER = kineto_header('  "trace_id": "0123456789ABCDEF0123456789ABCDEF",\n', "python",
                       [("fwd", "python"), ("bwd", "pt_autograd_0")])
FOOTER = kineto_footer("1212076812000.000", "bench.pt.trace.json")


def generate(path: str, target_bytes: int, profiler_steps: int = 8) -> dict:
    """Writes a trace of about target_bytes; returns {bytes, events, blocks}.

    The blocks are grouped under `profiler_steps` ProfilerStep#N annotations,
    as a schedule's active window records a few large steps."""
    body, offs, block_us, per_block = _step_template()
    t0 = 1212076812000.0
    blocks = 0
    written = 0
    block_bytes = len(body % tuple(f"{t0 + o:.3f}" for o in offs)) + 2
    total_blocks = max(16, -(-(target_bytes - len(HEADER)) // block_bytes))
    per_step = -(-total_blocks // profiler_steps)
    steps = 0
    with open(path, "w", buffering=1 << 22) as f:
        f.write(HEADER % {"pid": PID, "fwd": TID_FWD, "bwd": TID_BWD})
        written += len(HEADER)
        # Blocks go out in batches of 16 to amortize Python's formatting.
        while written < target_bytes:
            out = []
            for _ in range(16):
                base = t0 + blocks * block_us
                if blocks % per_step == 0:
                    n = min(per_step, total_blocks - blocks) if blocks < total_blocks else 1
                    step, _ = _event(f"ProfilerStep#{steps}", "user_annotation", TID_FWD, 0,
                                     n * block_us - 5.0, 0, False)
                    out.append(step % f"{base - 0.5:.3f}")
                    steps += 1
                out.append(body % tuple([f"{base + o:.3f}" for o in offs]))
                blocks += 1
            chunk = (",\n" if written > len(HEADER) else "") + ",\n".join(out)
            f.write(chunk)
            written += len(chunk)
        end = t0 + blocks * block_us
        tail = FOOTER % (f"{end - t0:.3f}", f"{end:.3f}")
        f.write(tail)
    return {"bytes": os.path.getsize(path), "events": blocks * per_block + steps + 5,
            "blocks": blocks, "steps": steps}


# ------------------------------------------------------------- competitors

JSON_PY = r'''
import collections, gzip, json, statistics, sys
path, out = sys.argv[1], sys.argv[2]
with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
    doc = json.load(f)
events = doc["traceEvents"] if isinstance(doc, dict) else doc
threads = collections.defaultdict(list)
for e in events:
    if e.get("ph") == "X" and e.get("cat") != "Trace" and "dur" in e:
        threads[(e.get("pid"), e.get("tid"))].append((e["ts"], -e["dur"], e["name"]))
calls = collections.Counter()
total = collections.defaultdict(float)
self_t = collections.defaultdict(float)
durs = collections.defaultdict(list)
for evs in threads.values():
    evs.sort()
    stack = []  # [end, name, dur, children]
    def close():
        end, name, dur, child = stack.pop()
        self_t[name] += max(dur - child, 0.0)
        if stack:
            stack[-1][3] += dur
    for ts, ndur, name in evs:
        dur = -ndur
        while stack and stack[-1][0] <= ts:
            close()
        calls[name] += 1
        total[name] += dur
        durs[name].append(dur)
        stack.append([ts + dur, name, dur, 0.0])
    while stack:
        close()
def q(xs, p):
    xs.sort()
    h = (len(xs) - 1) * p
    k = int(h)
    return xs[k] + (h - k) * (xs[min(k + 1, len(xs) - 1)] - xs[k])
ops = [{"name": n, "calls": calls[n], "total_us": total[n], "self_us": self_t[n],
        "p50_us": q(durs[n], 0.5), "p99_us": q(durs[n], 0.99)} for n in calls]
with open(out, "w") as f:
    json.dump({"ops": ops, "events": len(events)}, f)
'''

HTA_LOAD = r'''
import sys, logging
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=sys.argv[1])
t = ta.t.get_trace(next(iter(ta.t.traces)))
print("rows", len(t))
'''


GNU_TIME = "/usr/bin/time"


def run_measured(cmd, timeout, env=None):
    """Runs cmd; returns (wall s, peak RSS bytes of that child, rc, stderr).

    The peak RSS comes from GNU time when present: Linux counts a child's
    memory from fork, before exec, so wait4's ru_maxrss is never below the
    RSS of the process that forked it (this benchmark: ~25 MiB), while GNU
    time forks from a ~2 MiB process."""
    rss_file = None
    if os.path.exists(GNU_TIME):
        fd, rss_file = tempfile.mkstemp(prefix="opskew-rss-")
        os.close(fd)
        cmd = [GNU_TIME, "-q", "-f", "%M", "-o", rss_file] + list(cmd)
    try:
        wall, rss, rc, err = _run(cmd, timeout, env)
        if rss_file and rc != "timeout":
            with open(rss_file) as f:
                lines = [ln for ln in f.read().split() if ln.isdigit()]
            if lines:
                rss = int(lines[-1]) * 1024
        return wall, rss, rc, err
    finally:
        if rss_file:
            os.unlink(rss_file)


def _run(cmd, timeout, env=None):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    deadline = t0 + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            p.kill()
            pid, status, ru = os.wait4(p.pid, 0)
            return None, ru.ru_maxrss * 1024, "timeout", ""
        time.sleep(0.005)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_maxrss * 1024, p.returncode, err


def build_parsers(tmp, baseline=None):
    """Compiles the two C parser drivers (and parse_opskew.c with the
    `baseline` reader.c); returns {name: argv prefix}."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cc = os.environ.get("CC", "cc")
    out = {}
    readers = {"parse:opskew": os.path.join(root, "csrc", "reader", "reader.c")}
    if baseline:
        readers["parse:baseline"] = os.path.abspath(baseline)
    for name, reader_c in readers.items():
        exe = os.path.join(tmp, name.replace(":", "_"))
        cmd = [cc, "-O2", "-std=c11", "-D_GNU_SOURCE", "-I", os.path.join(root, "include"),
               "-I", os.path.join(root, "csrc", "reader"),
               os.path.join(root, "bench", "parse_opskew.c"), reader_c, "-lz", "-lpthread", "-o", exe]
        if subprocess.run(cmd).returncode == 0:
            out[name] = [exe]
    exe = os.path.join(tmp, "parse_yajl")
    cmd = [cc, "-O2", os.path.join(root, "bench", "parse_yajl.c"), "-lyajl", "-o", exe]
    if subprocess.run(cmd, stderr=subprocess.DEVNULL).returncode == 0:
        out["parse:yajl"] = [exe]
    else:
        print("# yajl not installed (apt-get install libyajl-dev): parse:yajl skipped")
    return out


def fmt_mb(b):
    return f"{b / 2**20:,.0f} MiB"


def generate_big_event(path: str, event_bytes: int) -> dict:
    """A Kineto-like trace whose one event carries an args string of
    event_bytes, between two ordinary events."""
    head = ('{"traceEvents": [\n  {"ph": "X", "cat": "cpu_op", "name": "before", "pid": 1, "tid": 1, '
            '"ts": 1.000, "dur": 1.000},\n  {"ph": "X", "cat": "cpu_op", "name": "big", "pid": 1, "tid": 1, '
            '"ts": 3.000, "dur": 2.000, "args": {"blob": "')
    tail = ('"}},\n  {"ph": "X", "cat": "cpu_op", "name": "after", "pid": 1, "tid": 1, "ts": 9.000, '
            '"dur": 1.000}\n]}\n')
    piece = "0123456789abcdef" * 4096
    with open(path, "w", buffering=1 << 22) as f:
        f.write(head)
        left = event_bytes
        while left > 0:
            f.write(piece[:left])
            left -= len(piece)
        f.write(tail)
    return {"bytes": os.path.getsize(path), "events": 3}


def big_event(args, tmp):
    """--big-event: time per byte of one huge event against an ordinary trace."""
    mb = args.big_event
    big = os.path.join(tmp, "big.json")
    info = generate_big_event(big, mb * 10**6)
    normal = os.path.join(tmp, "ordinary.json")
    ninfo = generate(normal, info["bytes"])
    print(f"# big event: {info['bytes'] / 1e6:.0f} MB in one event; ordinary: {ninfo['bytes'] / 1e6:.0f} MB, "
          f"{ninfo['events']:,} events")
    out = os.path.join(tmp, "out.json")
    cmds = {name: [sys.executable, "-m", "opskew", "summary", p, "--json", out, "--top", "0"]
            for name, p in (("ordinary", normal), ("big-event", big))}
    sizes = {"ordinary": ninfo["bytes"], "big-event": info["bytes"]}
    runs = {name: [] for name in cmds}
    for rep in range(args.repeats):  # interleaved
        for name, cmd in cmds.items():
            wall, rss, rc, err = run_measured(cmd, args.timeout)
            if rc != 0:
                print(f"# {name} failed ({rc}): {err.strip()[-400:]}")
                continue
            runs[name].append((wall, rss))
            if rep == 0:
                with open(out) as f:
                    st = json.load(f)["stats"]
                print(f"# {name}: read {st['bytes'] / 1e6:.0f} MB, examined {st['bytes_scanned'] / 1e6:.0f} MB "
                      f"({st['bytes_scanned'] / st['bytes']:.2f}x), buffer {fmt_mb(st['peak_buffer_bytes'])}")
    ns_per_byte = {n: statistics.median(w for w, _ in rs) * 1e9 / sizes[n] for n, rs in runs.items() if rs}
    print()
    print("trace      wall (median)  ns/byte  peak RSS   ns/byte vs ordinary")
    for n, rs in runs.items():
        if not rs:
            print(f"{n:<10} failed")
            continue
        wall = statistics.median(w for w, _ in rs)
        ratio = ns_per_byte[n] / ns_per_byte["ordinary"] if "ordinary" in ns_per_byte else float("nan")
        print(f"{n:<10} {wall:>11.2f} s  {ns_per_byte[n]:>7.2f}  {fmt_mb(max(r for _, r in rs)):>8}  "
              f"{ratio:>18.2f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,600", help="trace sizes in MB (default: 100,600)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of opskew per size (default 3; others once)")
    ap.add_argument("--hta-python", default=None, help="a Python with HolisticTraceAnalysis installed")
    ap.add_argument("--skip-json", action="store_true", help="skip json.load + Python")
    ap.add_argument("--gzip", action="store_true", help="also time opskew on the gzip-compressed trace")
    ap.add_argument("--parsers", action="store_true", help="also compare the bare C parsers (opskew, yajl)")
    ap.add_argument("--parsers-baseline", default=None, metavar="READER_C",
                    help="with --parsers: another reader.c, built into parse:baseline beside parse:opskew")
    ap.add_argument("--big-event", type=int, default=0, metavar="MB",
                    help="instead: one event of MB megabytes against an ordinary trace of the same size")
    ap.add_argument("--baseline-python", default=None, metavar="PY",
                    help="a Python whose environment has another opskew installed, timed beside this one")
    ap.add_argument("--timeout", type=float, default=3600, help="per-run timeout in s")
    ap.add_argument("--dir", default=None, help="where to write the traces (default: a temp dir)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    import opskew

    print(f"# bench_reader: opskew {opskew.__version__}, Python {platform.python_version()}, "
          f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}")
    tmp = tempfile.mkdtemp(prefix="opskew-bench-", dir=args.dir)
    if args.big_event:
        try:
            big_event(args, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    rows = []
    try:
        parsers = build_parsers(tmp, args.parsers_baseline) if args.parsers else {}
        for mb in sizes:
            d = os.path.join(tmp, f"{mb}MB")
            os.makedirs(d)
            path = os.path.join(d, "rank-0.pt.trace.json")
            t0 = time.perf_counter()
            info = generate(path, mb * 10**6)
            gen_s = time.perf_counter() - t0
            print(f"# generated {path}: {info['bytes'] / 1e6:.0f} MB, {info['events']:,} events, "
                  f"{info['blocks']:,} blocks in {info['steps']} ProfilerSteps, in {gen_s:.1f} s")
            runs = {}
            out = os.path.join(tmp, "out.json")
            cmds = {"opskew": [sys.executable, "-m", "opskew", "summary", path, "--json", out, "--top", "0"]}
            if args.baseline_python:
                cmds["opskew-base"] = [args.baseline_python, "-m", "opskew", "summary", path, "--json", out,
                                       "--top", "0"]
            if not args.skip_json:
                cmds["json+py"] = [sys.executable, "-c", JSON_PY, path, out]
            if args.hta_python:
                cmds["hta"] = [args.hta_python, "-c", HTA_LOAD, d]
            for name, argv in parsers.items():
                cmds[name] = argv + [path]
            if args.gzip:
                gz = path + ".gz"
                with open(path, "rb") as src, gzip.open(gz, "wb", compresslevel=6) as dst:
                    shutil.copyfileobj(src, dst, 1 << 22)
                cmds["opskew-gz"] = [sys.executable, "-m", "opskew", "summary", gz, "--json", out, "--top", "0"]
            # Interleaved: every tool once per round; opskew, opskew-gz and
            # opskew-base every round, the slow ones only in the first.
            for rep in range(args.repeats):
                for name, cmd in cmds.items():
                    if rep and name not in ("opskew", "opskew-gz", "opskew-base") and not name.startswith("parse:"):
                        continue
                    wall, rss, rc, err = run_measured(cmd, args.timeout)
                    if rc != 0:
                        print(f"# {name} failed ({rc}): {err.strip()[-400:]}")
                        runs.setdefault(name, [])
                        continue
                    runs.setdefault(name, []).append((wall, rss))
                    if name == "opskew" and rep == 0:
                        with open(out) as f:
                            st = json.load(f)["stats"]
                        print(f"# opskew read {st['events']:,} events, {st['complete_events']:,} complete, "
                              f"{st['bytes'] / 1e6:.0f} MB, buffer {fmt_mb(st['peak_buffer_bytes'])}")
            base = statistics.median(w for w, _ in runs["opskew"])
            base_rss = max(r for _, r in runs["opskew"])
            for name, rs in runs.items():
                if not rs:
                    rows.append((mb, name, "failed", "", "", "", ""))
                    continue
                wall = statistics.median(w for w, _ in rs)
                rss = max(r for _, r in rs)
                rows.append((mb, name, f"{wall:.2f} s", f"{info['bytes'] / 1e6 / wall:,.0f} MB/s",
                             fmt_mb(rss), f"{wall / base:.1f}x", f"{rss / base_rss:.1f}x"))
            os.remove(path)
            if os.path.exists(path + ".gz"):
                os.remove(path + ".gz")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    head = ("trace", "tool", "wall (median)", "throughput", "peak RSS", "time vs opskew", "RSS vs opskew")
    table = [head] + [(f"{r[0]} MB",) + r[1:] for r in rows]
    w = [max(len(str(r[i])) for r in table) for i in range(len(head))]
    print()
    for i, r in enumerate(table):
        print("  ".join(str(c).ljust(w[k]) if k < 2 else str(c).rjust(w[k]) for k, c in enumerate(r)))
        if i == 0:
            print("  ".join("-" * x for x in w))


if __name__ == "__main__":
    main()
