"""How long a burst of memory work slows the steps after it: the profiler's
after-effect that no cost per event holds (docs/profile-validation.md,
"The leaf outside in every run"; docs/profile.md, "Not yet").

    .venv/bin/python bench/bench_after_effect.py [--workload conv_train]
        [--rounds 6] [--steps 20]

One process, the workload warmed up. Each round runs, for each kind of burst
in turn, 30 plain steps, the burst, then --steps plain steps; after every
step's body, a probe: one call of aten::max_pool2d_with_indices on an input of
the conv net's first pooled shape (8 x 8 x 16 x 16 floats), timed alone with
time.perf_counter_ns. The bursts:
  none          nothing (the reference);
  py-objects    200,000 small Python dicts made and dropped;
  c-heap        100,000 malloc(200) then free, through ctypes;
  big-block     one 64 MiB malloc, written, freed;
  profiler      torch.profiler.profile over 7 steps of the workload, nothing
                exported (the steps inside it are not counted);
  opskew-trace  opskew's own tracer (native collector) over 5 steps.
For each kind, the probe's median over rounds at steps 1, 2, 3, 5, 9, 13, 17
and the last after the burst, in microseconds, and each as a ratio to `none`
at the same step. The step bodies' medians are printed likewise. Timing only:
a side by side in one run, on a machine whose speed moves from minute to
minute; the figures carry the torch version, the threads and the date.
"""

from __future__ import annotations

import ctypes
import datetime
import statistics
import sys
import time

import _common

AT = (1, 2, 3, 5, 9, 13, 17)


def bursts(torch, step):
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]

    def py_objects():
        x = [{"a": i, "b": str(i)} for i in range(200_000)]
        del x

    def c_heap():
        ps = [libc.malloc(200) for _ in range(100_000)]
        if not all(ps):
            raise MemoryError("malloc(200) failed")
        for p in ps:
            libc.free(p)

    def big_block():
        n = 64 << 20
        p = libc.malloc(n)
        if not p:
            raise MemoryError("malloc(64 MiB) failed")
        ctypes.memset(p, 1, n)
        libc.free(p)

    def profiler():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            for _ in range(7):
                step()

    def opskew_trace():
        from opskew.tracer.session import trace

        ctx = trace(instrument="native")
        ctx.enter_native_only()
        try:
            for _ in range(5):
                step()
        finally:
            ctx.__exit__(None, None, None)

    return {"none": lambda: None, "py-objects": py_objects, "c-heap": c_heap, "big-block": big_block,
            "profiler": profiler, "opskew-trace": opskew_trace}


def main(argv=None):
    ap = _common.parser(__doc__, "conv_train")
    ap.add_argument("--rounds", type=int, default=6, help="rounds of every burst (6)")
    ap.add_argument("--steps", type=int, default=20, help="steps timed after each burst (20; at least 18)")
    a, torch, step = _common.start(ap, argv, {"--rounds": 1, "--steps": 18})
    x = torch.randn(8, 8, 16, 16)
    pool = torch.ops.aten.max_pool2d_with_indices

    def probe():
        t0 = time.perf_counter_ns()
        pool(x, [2, 2])
        return time.perf_counter_ns() - t0

    kinds = bursts(torch, step)
    probes = {k: [] for k in kinds}
    bodies = {k: [] for k in kinds}
    for r in range(a.rounds):
        for kind, burst in kinds.items():
            for _ in range(30):
                step()
                probe()
            burst()
            ps, bs = [], []
            for _ in range(a.steps):
                t0 = time.perf_counter_ns()
                step()
                bs.append(time.perf_counter_ns() - t0)
                ps.append(probe())
            probes[kind].append(ps)
            bodies[kind].append(bs)
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr, flush=True)
    at = AT + (a.steps,)
    print(f"# {datetime.date.today()}, torch {torch.__version__}, {torch.get_num_threads()} intra-op thread(s), "
          f"workload {a.workload}, {a.rounds} rounds, medians over rounds")
    for title, table in (("probe: aten::max_pool2d_with_indices, 8x8x16x16", probes), ("step body", bodies)):
        print(f"\n{title}, us at step N after the burst (ratio to none)")
        print(f"{'burst':<14}" + "".join(f"{n:>14}" for n in at))
        ref = [statistics.median(rows[n - 1] for rows in table["none"]) for n in at]
        for kind, runs in table.items():
            meds = [statistics.median(rows[n - 1] for rows in runs) for n in at]
            print(f"{kind:<14}" + "".join(f"{m / 1e3:>8.1f} {m / r0:>4.2f}x" for m, r0 in zip(meds, ref)))


if __name__ == "__main__":
    main()
