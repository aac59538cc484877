"""How fast, and in how much memory, `opskew summary DIR` reads a job's traces,
beside HolisticTraceAnalysis loading the same directory.

Generates, in a temporary directory, one Kineto-style trace per rank of a
distributed job (torch.profiler's export format, as bench/bench_reader.py
writes it: pretty-printed cpu_op and user_annotation events with record_shapes
args, a forward and an autograd thread, fwdbwd flows, metadata events), named
`rank{r}.json`. torch's file names do not carry the rank, so each trace says
it the way Kineto does, as top-level members before "traceEvents":
`"distributedInfo": {"backend": "gloo", "rank": r, "world_size": N, ...}`,
`"host_name"`, `"baseTimeNanoseconds"`. Each rank is its own process (its own
pid and tids); its main thread records `ProfilerStep#N` annotations enclosing
the operator blocks, and a gloo worker thread records, per step, a few
`gloo:all_reduce` annotations (cat user_annotation): the last rank arrives
late at every collective (it starts later there, by 150 us), and all ranks
leave a collective together (its end is the same on every rank within a
microsecond). Each rank runs on its own host (`"host_name": "node{r}"`), and
rank r's clock reads r x --clock-skew-us (default 300 us) ahead of rank 0's.
(So the known answers, which the first round prints opskew's reading of:
rank N-1 the straggler, last at every collective; clock offsets r x 300 us.)

For each size (MB per rank), times as separate processes, interleaved over
--rounds rounds:

  opskew    `python -m opskew summary DIR --json OUT`: the job summary of the
            whole directory (with --mode per-file, or when this opskew's
            summary takes one trace only: one process summarizing each
            rank's file in turn through `opskew.summary(path)`, a stand-in
            that the table names)
  hta       HolisticTraceAnalysis's loader on the same directory,
            `TraceAnalysis(trace_dir=DIR)`, run by the interpreter given by
            --hta-python (skipped if absent); under an address-space cap
            (--hta-mem-gib, default 16 GiB) and a timeout (--hta-timeout,
            default 900 s): a run that fails or is killed is reported with
            its time and peak memory so far

and prints wall time (median), throughput (all ranks' input bytes / wall),
and peak memory side by side, with ratios to opskew. Peak memory is given
twice: the largest single process's peak RSS (GNU time, from wait4, as
bench_reader.py measures it; HTA parses ranks in a multiprocessing pool, so
this is its largest process, not the pool's sum) and the peak of the summed
PSS of the whole process tree, sampled every 0.1 s (it may miss a short peak,
and so can read below the first column: "-" for runs under ~0.5 s). "memory
vs opskew" compares the larger of the two peaks of each tool. Several sizes
in one run show whether opskew's memory grows with the traces. The traces are
deleted at the end, on Ctrl-C too.

    /work/main/.venv/bin/python bench/bench_job_summary.py --ranks 4 --sizes 30,300 \\
        --rounds 3 --hta-python /tmp/hta-venv/bin/python

(the HTA interpreter: `python3 -m venv /tmp/hta-venv &&
/tmp/hta-venv/bin/pip install holistictraceanalysis==0.5.0`.) Generation time
is printed, never measured. Speed is shown here, never asserted by tests
(docs/design.md).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_reader as br  # noqa: E402  (the event generator: torch's byte layout)

# ------------------------------------------------------------------ traces

# Kineto writes the job's facts as top-level members before "traceEvents".
HEADER = br.kineto_header(
    '  "distributedInfo": {"backend": "gloo", "rank": %(rank)d, "world_size": %(world)d, "pg_count": 1, '
    '"pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cpu:gloo,cuda:gloo", '
    '"pg_size": %(world)d, "ranks": [%(ranks)s]}]},\n'
    '  "host_name": "%(host)s",\n  "trace_id": "%(trace_id)s",\n  "record_shapes": 1,\n',
    "python3", [("fwd", "python3"), ("bwd", "pt_autograd_0"), ("gloo", "pt_gloo_runloop")])
FOOTER = br.kineto_footer("%s", "rank%d.json")

T0 = 1212076812000.0  # rank 0's clock at the first block, us (as bench_reader.py)
LATE_US = 150.0       # how late the straggler (the last rank) arrives at each collective
TRANSFER_US = 40.0    # from the last arrival to the end of the collective


def rank_ids(r: int) -> dict:
    """pid and tids of rank r's process: each rank is its own process."""
    pid = br.PID + 1000 * r
    return {"pid": pid, "fwd": pid, "bwd": pid + (br.TID_BWD - br.TID_FWD), "gloo": pid + 3}


def _relabel(text: str, ids: dict) -> str:
    """bench_reader's events carry its one pid and tids; give them rank r's."""
    return (text.replace(f'"pid": {br.PID},', f'"pid": {ids["pid"]},')
            .replace(f'"tid": {br.TID_FWD},', f'"tid": {ids["fwd"]},')
            .replace(f'"tid": {br.TID_BWD},', f'"tid": {ids["bwd"]},'))


def collective_times(r: int, world: int, step: int, k: int, at: float) -> tuple[float, float]:
    """(start, end) in rank r's own clock of collective k of a step, whose
    ranks start arriving at `at` (rank 0's clock): every rank but the last
    arrives within 30 us, the last LATE_US late; all leave together, at the
    last arrival + TRANSFER_US, within a microsecond (a jitter of -0.4 to
    +0.4 us per rank and collective, 0 on average: the clock offsets that
    the exits give are r x the skew, with a residual)."""
    def arrival(q):
        return LATE_US if q == world - 1 and world > 1 else float((step * 7 + k * 13 + q * 29) % 31)
    last = max(arrival(q) for q in range(world))
    start = at + arrival(r)
    end = at + last + TRANSFER_US + (((step * 7 + k * 3 + r * 11) % 9) - 4) * 0.1
    return start, end


def generate_rank(path: str, r: int, world: int, target_bytes: int, steps: int,
                  collectives: int, skew_us: float) -> dict:
    """Writes rank r's trace of about target_bytes; returns its counts."""
    ids = rank_ids(r)
    body, offs, block_us, per_block = br._step_template()
    body = _relabel(body, ids)
    skew = r * skew_us
    t0 = T0 + skew
    block_bytes = len(body % tuple(f"{t0 + o:.3f}" for o in offs)) + 2
    head = HEADER % {"rank": r, "world": world, "ranks": ", ".join(str(q) for q in range(world)),
                     "host": f"node{r}", "trace_id": f"{0xB0B0 + r:032X}", **ids}
    total_blocks = max(steps, -(-(target_bytes - len(head)) // block_bytes))
    per_step = -(-total_blocks // steps)
    blocks = n_steps = n_coll = 0
    ext = 10**6  # External ids of the annotations added here, apart from the blocks'
    with open(path, "w", buffering=1 << 22) as f:
        f.write(head)
        first = True
        while blocks < total_blocks:
            out = []
            for _ in range(min(16, total_blocks - blocks)):  # batches amortize the formatting
                base = t0 + blocks * block_us
                if blocks % per_step == 0:
                    n = min(per_step, total_blocks - blocks)
                    ext += 1
                    step, _ = br._event(f"ProfilerStep#{n_steps}", "user_annotation", ids["fwd"], 0,
                                        n * block_us - 5.0, ext, False)
                    out.append(_relabel(step, ids) % f"{base - 0.5:.3f}")
                    # The step's collectives on the gloo thread, spread over
                    # the step, each ending well before it does.
                    span = n * block_us
                    for k in range(collectives):
                        at = (base - skew) + (k + 1) * span / (collectives + 1) - 100.0
                        s, e = collective_times(r, world, n_steps, k, at)
                        ext += 1
                        text, _ = br._event("gloo:all_reduce", "user_annotation", ids["gloo"], 0,
                                            e - s, ext, False)
                        out.append(_relabel(text, ids) % f"{s + skew:.3f}")
                        n_coll += 1
                    n_steps += 1
                out.append(body % tuple([f"{base + o:.3f}" for o in offs]))
                blocks += 1
            f.write(("" if first else ",\n") + ",\n".join(out))
            first = False
        end = t0 + blocks * block_us
        f.write(FOOTER % (f"{t0 - 1.0:.3f}", f"{end - t0 + 1.0:.3f}", f"{end:.3f}", r))
    return {"bytes": os.path.getsize(path), "events": blocks * per_block + n_steps + n_coll + 6,
            "blocks": blocks, "steps": n_steps, "collectives": n_coll}


def generate_job(d: str, world: int, mb: float, steps: int, collectives: int, skew_us: float) -> dict:
    os.makedirs(d, exist_ok=True)
    infos = [generate_rank(os.path.join(d, f"rank{r}.json"), r, world, int(mb * 10**6), steps,
                           collectives, skew_us) for r in range(world)]
    return {k: sum(i[k] for i in infos) for k in infos[0]} | {"steps": infos[0]["steps"],
                                                             "files": [f"rank{r}.json" for r in range(world)]}


# ------------------------------------------------------------- competitors

PER_FILE = r'''
import json, sys
import opskew
out, paths = sys.argv[1], sys.argv[2:]
docs = [opskew.summary(p).to_dict() for p in paths]
with open(out, "w") as f:
    json.dump({"per_file": docs}, f)
'''

HTA_LOAD = r'''
import sys, logging
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=sys.argv[1])
ranks = ta.t.get_ranks()
print("ranks", ranks, "rows", sum(len(ta.t.get_trace(r)) for r in ranks),
      "iterations", ta.t.get_iterations(ranks[0]) if ranks else [])
'''

GNU_TIME = "/usr/bin/time"
PAGE = os.sysconf("SC_PAGE_SIZE")
MIN_SAMPLES = 5  # of the tree's PSS, every 0.1 s at first: runs shorter than ~0.5 s show none


def _tree(pid: int) -> list[int]:
    """pid and all its descendants (through /proc's children lists)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def _pss(pid: int) -> int:
    """Proportional set size in bytes (RSS where smaps_rollup is unreadable)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, IndexError):
        return 0


def run_measured(cmd, timeout, mem_cap=None, cwd=None):
    """Runs cmd in its own session; returns a dict: wall (s, or the time
    until it was killed), rss (the largest process's peak RSS, bytes: GNU
    time's %M when present, else wait4's ru_maxrss), tree (peak of the tree's
    summed PSS, sampled; None for a run too short to sample), rc (exit
    status, or "timeout"), out, err.

    GNU time forks the measured process from a ~2 MiB process: wait4 counts
    a child's memory from fork, so a child forked by this script would start
    at this script's RSS (bench_reader.py). mem_cap (bytes) is set as
    RLIMIT_AS before exec, inherited by every process of the tree. A thread
    waits for the child (blocking wait4: the end time is exact, and nothing
    polls); this thread samples the tree, every 0.1 s for the first 2 s,
    then every 0.5 s, so that the sampling costs the measured run little."""
    rss_file = None
    if os.path.exists(GNU_TIME):
        fd, rss_file = tempfile.mkstemp(prefix="opskew-rss-")
        os.close(fd)
        cmd = [GNU_TIME, "-q", "-f", "%M", "-o", rss_file] + list(cmd)

    def limit():
        if mem_cap:
            resource.setrlimit(resource.RLIMIT_AS, (mem_cap, mem_cap))

    out_f = tempfile.TemporaryFile()
    err_f = tempfile.TemporaryFile()
    done = threading.Event()
    res = {}

    def waiter():
        _, status, ru = os.wait4(p.pid, 0)
        res["end"] = time.perf_counter()
        res["status"], res["ru"] = status, ru
        done.set()

    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=out_f, stderr=err_f, cwd=cwd, start_new_session=True,
                         preexec_fn=limit if mem_cap else None)
    th = threading.Thread(target=waiter, daemon=True)
    th.start()
    tree_peak, samples, killed = 0, 0, False
    try:
        while not done.is_set():
            now = time.perf_counter() - t0
            if now > timeout:
                os.killpg(p.pid, signal.SIGKILL)
                killed = True
                break
            tree = sum(_pss(q) for q in _tree(p.pid))
            if not done.is_set():  # a sample after the end would see nothing
                tree_peak = max(tree_peak, tree)
                samples += 1
            done.wait(0.1 if now < 2 else 0.5)
        th.join()
    except BaseException:  # Ctrl-C: leave no HTA pool behind
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        th.join()
        if rss_file:
            os.unlink(rss_file)
        raise
    p.returncode = os.waitstatus_to_exitcode(res["status"])
    wall = res["end"] - t0
    rc = "timeout" if killed else p.returncode
    try:  # pool workers that a failed or killed tree left behind
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    rss = res["ru"].ru_maxrss * 1024
    if rss_file:
        try:
            with open(rss_file) as f:
                vals = [ln for ln in f.read().split() if ln.isdigit()]
            if vals and not killed:
                rss = int(vals[-1]) * 1024
        finally:
            os.unlink(rss_file)
    out_f.seek(0)
    err_f.seek(0)
    out = out_f.read().decode(errors="replace")
    err = err_f.read().decode(errors="replace")
    out_f.close()
    err_f.close()
    # Under MIN_SAMPLES samples the sampled peak says nothing (the first one
    # falls before exec): None.
    return {"wall": wall, "rss": rss, "tree": tree_peak if samples >= MIN_SAMPLES else None, "rc": rc,
            "out": out, "err": err}


# ------------------------------------------------------------------ report

def fmt_mib(b):
    return "-" if b is None else f"{b / 2**20:,.0f} MiB"


def peak(r):
    """A run's peak memory for the ratio: the larger of the largest
    process's RSS and the sampled PSS of all its processes."""
    return max(r["rss"], r["tree"] or 0)


def _child_info(py, code):
    try:
        r = subprocess.run([py, "-c", code], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    return (r.stdout.strip(), None) if r.returncode == 0 else (None, r.stderr.strip().splitlines()[-1:])


def install_stamp(py):
    """(path, newest mtime) of the opskew package that py imports: a
    reinstall during the run (a shared environment) would mix two builds in
    one table, so the run compares it at the end."""
    code = ("import os, opskew; d = os.path.dirname(opskew.__file__); "
            "print(d, max(os.path.getmtime(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs "
            "if not f.endswith('.pyc')))")
    out, _ = _child_info(py, code)
    if not out:
        return None
    d, t = out.rsplit(" ", 1)
    return d, float(t)


def conditions(args):
    lines = []
    try:
        import torch
        lines.append(f"torch {torch.__version__}")
    except Exception:  # noqa: BLE001 - torch is optional here
        lines.append("torch not importable")
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    lines.append(f"CPU {cpu}, {os.cpu_count()} CPUs")
    try:
        lines.append(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at start")
    except OSError:
        pass
    lines.append(f"Python {platform.python_version()} ({sys.executable})")
    lines.append(platform.platform())
    ver, err = _child_info(args.opskew_python, "import opskew; print(opskew.__version__, opskew.__file__)")
    lines.append(f"opskew {ver} via {args.opskew_python}" if ver else f"opskew not importable: {err}")
    return lines


def print_table(rows):
    head = ("per rank", "tool", "input", "wall (median)", "throughput", "peak RSS (largest proc)",
            "peak PSS (all procs)", "time vs opskew", "memory vs opskew")
    table = [head] + rows
    w = [max(len(str(r[i])) for r in table) for i in range(len(head))]
    for i, r in enumerate(table):
        print("  ".join(str(c).ljust(w[k]) if k < 2 else str(c).rjust(w[k]) for k, c in enumerate(r)))
        if i == 0:
            print("  ".join("-" * x for x in w))


def describe_opskew_json(path, mode):
    """One or two lines about what opskew's --json says it read."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        return [f"# opskew --json unreadable: {e}"]
    if mode == "per-file":
        docs = doc["per_file"]
        ev = sum(d["stats"]["events"] for d in docs)
        st = [d.get("status") for d in docs]
        return [f"# opskew (per-file stand-in) read {len(docs)} traces, {ev:,} events, status {st}"]
    if doc.get("schema", "").startswith("opskew.job_summary/"):
        return describe_job(doc)
    out = [f"# opskew --json: schema {doc.get('schema')!r}, status {doc.get('status')!r}, "
           f"top-level keys {sorted(doc)}"]
    st = doc.get("stats") or {}
    if st:
        out.append("# opskew stats: " + ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}"
                                                  for k, v in list(st.items())[:12]))
    for key in ("ranks", "traces", "files"):
        if isinstance(doc.get(key), list):
            out.append(f"# opskew {key}: {len(doc[key])}")
    if doc.get("warnings"):
        out.append(f"# opskew warnings ({len(doc['warnings'])}): {doc['warnings'][:5]}")
    return out


def describe_job(doc):
    """What `opskew summary DIR` found, against the generator's known answers."""
    ranks = doc.get("ranks") or []
    st = (doc.get("merged") or {}).get("stats") or {}
    out = [f"# opskew read the job: schema {doc['schema']}, status {doc.get('status')}, world size "
           f"{doc.get('world_size')}, {len(ranks)} ranks, hosts {doc.get('hosts')}, {doc.get('family')} "
           f"collectives {doc.get('matched')} matched / {doc.get('unmatched')} unmatched, "
           f"clocks aligned {doc.get('aligned')}; {st.get('events', 0):,} events, "
           f"{st.get('complete_events', 0):,} complete"]
    offs = ", ".join(f"r{r['rank']} {r['offset_ns'] / 1e3:.2f} us (residual {r.get('residual_ns', 0):.0f} ns)"
                     for r in ranks if r.get("offset_ns") is not None)
    out.append(f"# opskew's clock offsets to rank 0 (generated: r x the skew): {offs}")
    strag = [f"rank {s['rank']}: last at {s['last_arrivals']}, {s['share']:.0%} of the lateness"
             for s in doc.get("stragglers") or [] if s.get("straggler")]
    out.append(f"# opskew's stragglers (generated: rank {len(ranks) - 1}, last at every collective): "
               f"{strag or 'none'}; steps {len(doc.get('steps') or [])}")
    out += [f"# opskew {key}: {doc[key][:5]}" for key in ("notes", "warnings") if doc.get(key)]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=4, help="rank traces per job (default 4)")
    ap.add_argument("--sizes", default="30,300", help="MB per rank trace, comma-separated (default 30,300)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds, every tool each round (default 3)")
    ap.add_argument("--steps", type=int, default=8, help="ProfilerSteps per trace (default 8)")
    ap.add_argument("--collectives", type=int, default=3, help="gloo:all_reduce per step (default 3)")
    ap.add_argument("--clock-skew-us", type=float, default=300.0,
                    help="rank r's clock reads r x this ahead of rank 0's (default 300)")
    ap.add_argument("--mode", choices=("auto", "dir", "per-file"), default="auto",
                    help="opskew summary DIR (dir), each file in one process (per-file), or dir when this "
                    "opskew takes a directory (auto, the default)")
    ap.add_argument("--opskew-python", default=sys.executable,
                    help="the interpreter that runs `-m opskew` (default: this one)")
    ap.add_argument("--opskew-args", default="", metavar="ARGS",
                    help="more arguments for `opskew summary DIR`, one string (e.g. '--w 300' for the "
                    "cross-rank correction, which reads every trace twice)")
    ap.add_argument("--hta-python", default=None, help="a Python with HolisticTraceAnalysis installed")
    ap.add_argument("--hta-mem-gib", type=float, default=16.0, help="HTA's address-space cap (default 16 GiB)")
    ap.add_argument("--hta-timeout", type=float, default=900.0, help="HTA's timeout per run, s (default 900)")
    ap.add_argument("--timeout", type=float, default=900.0, help="opskew's timeout per run, s (default 900)")
    ap.add_argument("--dir", default=None, help="where to make the temporary directory (default: $TMPDIR)")
    args = ap.parse_args()
    sizes = [float(s) for s in args.sizes.split(",")]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally below

    print(f"# bench_job_summary: {args.ranks} ranks x {args.sizes} MB, {args.rounds} rounds, "
          f"{args.steps} ProfilerSteps x {args.collectives} gloo:all_reduce per rank, "
          f"clock skew {args.clock_skew_us:g} us per rank")
    for line in conditions(args):
        print(f"# {line}")
    stamp = install_stamp(args.opskew_python)
    if stamp:
        print(f"# opskew installed at {time.strftime('%H:%M:%S', time.gmtime(stamp[1]))} UTC (newest file)")
    hta = None
    if args.hta_python:
        ver, err = _child_info(args.hta_python, "import importlib.metadata as m, pandas; "
                               "print(m.version('HolisticTraceAnalysis'), 'pandas', pandas.__version__)")
        if ver:
            hta = args.hta_python
            print(f"# HolisticTraceAnalysis {ver} via {hta}; cap {args.hta_mem_gib:g} GiB address space, "
                  f"timeout {args.hta_timeout:g} s")
        else:
            print(f"# hta skipped: HolisticTraceAnalysis not importable from {args.hta_python}: {err}")
    else:
        print("# hta skipped: no --hta-python")

    tmp = tempfile.mkdtemp(prefix="opskew-jobbench-", dir=args.dir)
    out = os.path.join(tmp, "opskew-out.json")  # never inside a job directory: HTA reads every .json
    rows, rss_by_size, mode = [], {}, args.mode
    try:
        for mb in sizes:
            d = os.path.join(tmp, f"job-{mb:g}MB")
            t0 = time.perf_counter()
            info = generate_job(d, args.ranks, mb, args.steps, args.collectives, args.clock_skew_us)
            total = info["bytes"]
            print(f"# generated {d}: {args.ranks} x {total / args.ranks / 1e6:.0f} MB = {total / 1e6:,.0f} MB, "
                  f"{info['events']:,} events, {info['steps']} ProfilerSteps and {info['collectives']:,} "
                  f"gloo:all_reduce in all, in {time.perf_counter() - t0:.1f} s (not measured)")
            files = [os.path.join(d, f) for f in info["files"]]
            dir_cmd = [args.opskew_python, "-m", "opskew", "summary", d, "--json", out] + args.opskew_args.split()
            if mode == "auto":  # does this opskew read a directory? (once, on the first size)
                r = run_measured(dir_cmd, args.timeout, cwd=tmp)
                if r["rc"] == 0:
                    mode = "dir"
                else:
                    mode = "per-file"
                    print(f"# opskew summary DIR failed (exit {r['rc']}: {r['err'].strip()[-300:]!r}): this "
                          f"opskew takes one trace; measuring the STAND-IN instead: one process running "
                          f"opskew.summary(path) on each rank's file in turn")
            if mode == "dir":
                cmds = {"opskew summary DIR": (dir_cmd, args.timeout, None)}
            else:
                cmds = {"opskew per-file (stand-in)": ([args.opskew_python, "-c", PER_FILE, out] + files,
                                                       args.timeout, None)}
            if hta:
                cmds["hta TraceAnalysis"] = ([hta, "-c", HTA_LOAD, d], args.hta_timeout,
                                             int(args.hta_mem_gib * 2**30))
            runs = {name: [] for name in cmds}
            for rep in range(args.rounds):
                for name, (cmd, timeout, cap) in cmds.items():
                    if runs[name] and runs[name][-1]["rc"] == "timeout":
                        continue  # killed once at this size: a result; not again
                    r = run_measured(cmd, timeout, mem_cap=cap, cwd=tmp)
                    runs[name].append(r)
                    tag = f"# round {rep + 1} {name}:"
                    if r["rc"] == "timeout":
                        print(f"{tag} KILLED at the {timeout:g} s timeout; peak PSS so far {fmt_mib(r['tree'])}")
                    elif r["rc"] != 0:
                        why = "killed by signal %d" % -r["rc"] if r["rc"] < 0 else f"exit {r['rc']}"
                        print(f"{tag} FAILED ({why}) after {r['wall']:.1f} s, peak RSS {fmt_mib(r['rss'])}, "
                              f"peak PSS {fmt_mib(r['tree'])}: {r['err'].strip()[-400:]!r}")
                    else:
                        print(f"{tag} {r['wall']:.2f} s, peak RSS {fmt_mib(r['rss'])}, "
                              f"peak PSS {fmt_mib(r['tree'])}")
                        if rep == 0 and name.startswith("opskew"):
                            for line in describe_opskew_json(out, mode):
                                print(line)
                        if rep == 0 and name.startswith("hta"):
                            print(f"# hta loaded: {r['out'].strip()[-300:]}")
                    sys.stdout.flush()
            ok = {n: [r for r in rs if r["rc"] == 0] for n, rs in runs.items()}
            base = next(iter(ok.values()))
            base_wall = statistics.median(r["wall"] for r in base) if base else None
            base_rss = max(r["rss"] for r in base) if base else None
            base_peak = max(peak(r) for r in base) if base else None
            if base:
                rss_by_size[mb] = (base_rss, base_wall, total)
            for name, rs in ok.items():
                label = f"{mb:g} MB x {args.ranks}"
                if not rs:
                    bad = runs[name][-1]
                    what = "killed (timeout)" if bad["rc"] == "timeout" else f"failed ({bad['rc']})"
                    rows.append((label, name, f"{total / 1e6:,.0f} MB", f"{what} at {bad['wall']:.0f} s", "",
                                 fmt_mib(bad["rss"]) if bad["rc"] != "timeout" else "",
                                 fmt_mib(bad["tree"]), "", ""))
                    continue
                wall = statistics.median(r["wall"] for r in rs)
                rss = max(r["rss"] for r in rs)
                trees = [r["tree"] for r in rs if r["tree"] is not None]
                tree = max(trees) if trees else None
                note = "" if len(rs) == len(runs[name]) else f" ({len(rs)}/{len(runs[name])} ok)"
                rows.append((label, name, f"{total / 1e6:,.0f} MB", f"{wall:.2f} s{note}",
                             f"{total / 1e6 / wall:,.0f} MB/s", fmt_mib(rss), fmt_mib(tree),
                             f"{wall / base_wall:.1f}x" if base_wall else "",
                             f"{max(peak(r) for r in rs) / base_peak:.1f}x" if base_peak else ""))
            shutil.rmtree(d, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print()
    try:
        print(f"# load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")
    except OSError:
        pass
    print_table(rows)
    now = install_stamp(args.opskew_python)
    if stamp and now and now != stamp:
        print(f"WARNING: opskew's installation changed during the run (newest file now "
              f"{time.strftime('%H:%M:%S', time.gmtime(now[1]))} UTC): its rows may mix two builds")
    if rss_by_size:
        print()
        first = min(rss_by_size)
        for mb, (rss, wall, total) in sorted(rss_by_size.items()):
            print(f"opskew at {mb:g} MB per rank: {total / 1e6 / wall:,.0f} MB/s, peak RSS {fmt_mib(rss)} "
                  f"({rss / rss_by_size[first][0]:.2f}x that at {first:g} MB per rank, for "
                  f"{total / rss_by_size[first][2]:.1f}x the input)")
        if mode == "per-file":
            print("NOTE: opskew rows are the per-file stand-in (opskew.summary of each rank's file in one "
                  "process), not `opskew summary DIR`")


if __name__ == "__main__":
    main()
