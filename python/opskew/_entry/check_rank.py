"""One rank of `opskew check --nproc N` (opskew.jobcheck starts it under
torchrun): the workload in interleaved baseline and profiled windows, in
lockstep with the other ranks, each window timed by the clock and by the
rank's CPU time. Each rank writes its windows after every trial (so a
workload that fails part way still reports what was measured); rank 0
gathers every rank's windows at the end and writes them out.

Every rank runs the same sequence of windows, so collectives inside the
workload meet: the warm-up's length is decided by rank 0 and broadcast
after each iteration, and a barrier starts each window.
"""

from __future__ import annotations

import json
import os
import sys
import time

from opskew.measure.workload import load_target
from opskew.output import write_file


class WorkloadFailed(Exception):
    """The user's TARGET raised (not opskew): exit 4, with what was measured."""


def main(spec_path: str) -> int:
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    import datetime

    import torch
    import torch.distributed as dist

    cuda = spec["device"] == "cuda"
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if cuda else "gloo", timeout=datetime.timedelta(seconds=spec["timeout"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(spec["threads"])

    try:
        wl = load_target(spec["target"], device=spec["device"], setup=spec["setup"], calls=spec["calls"],
                         numel=spec["numel"])
    except Exception as exc:
        raise WorkloadFailed(f"loading TARGET failed: {type(exc).__name__}: {exc}") from exc
    it = wl.iteration
    builtin = spec["target"] is None
    token = torch.ones(1, device=spec["device"])

    def step():
        try:
            it()
            if builtin:
                dist.all_reduce(token)  # the built-in loop meets the other ranks once per iteration
        except Exception as exc:
            raise WorkloadFailed(f"{type(exc).__name__}: {exc}") from exc

    def sync():
        if cuda:
            torch.cuda.synchronize()

    # Warm-up: rank 0's clock decides, every rank runs as many iterations.
    t0 = time.perf_counter()
    flag = torch.ones(1, dtype=torch.int32, device=spec["device"])
    while True:
        step()
        sync()
        flag.fill_(int(time.perf_counter() - t0 < spec["warmup"]) if rank == 0 else 0)
        dist.broadcast(flag, 0)
        if not int(flag.item()):
            break
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
    # The first profiler session of a process initializes Kineto (seconds):
    # one discarded session on one iteration, as check does (docs/check.md).
    with torch.profiler.profile(activities=acts):
        step()
        sync()
    rows = {"base_s": [], "prof_s": [], "base_cpu_s": [], "prof_cpu_s": [], "events": [], "order": []}

    def window():
        dist.barrier()
        sync()
        c0, w0 = time.thread_time(), time.perf_counter()
        for _ in range(spec["iters"]):
            step()
        sync()
        return time.perf_counter() - w0, time.thread_time() - c0

    for t in range(spec["trials"]):
        order = ("base", "prof") if t % 2 == 0 else ("prof", "base")
        rows["order"].append("".join(a[0] for a in order))
        for arm in order:
            if arm == "base":
                w, c = window()
                rows["base_s"].append(w)
                rows["base_cpu_s"].append(c)
            else:
                with torch.profiler.profile(activities=acts) as p:
                    w, c = window()
                rows["prof_s"].append(w)
                rows["prof_cpu_s"].append(c)
                # The instrument's own records, counted after the window.
                rows["events"].append(max(sum(e.count for e in p.key_averages()), 1))
        rows["rank"], rows["pid"] = rank, os.getpid()
        write_file(f"{spec_path}.rank{rank}.rows", json.dumps(rows))
    gathered = [None] * world
    dist.all_gather_object(gathered, rows)
    if rank == 0:
        doc = {"world_size": world, "backend": dist.get_backend(), "ranks": gathered,
               "torch": torch.__version__, "threads": torch.get_num_threads(), "workload": wl.description}
        write_file(spec["out"], json.dumps(doc))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    try:
        rc = main(sys.argv[1])
    except BaseException as exc:  # noqa: BLE001 - told to the launcher, which names it
        import traceback

        rank = os.environ.get("RANK", "0")
        cause = exc.__cause__ if isinstance(exc, WorkloadFailed) and exc.__cause__ else exc
        write_file(f"{sys.argv[1]}.rank{rank}.error", json.dumps({
            "workload": isinstance(exc, WorkloadFailed), "at": time.time(),
            "message": f"rank {rank}: {type(cause).__name__}: {cause}",
            "traceback": "".join(traceback.format_exception(cause)[-6:])}))
        rc = 1
    # Everything is written (through opskew's one writer). Leave
    # without the interpreter's teardown: torch 2.13's gloo and profiler
    # threads abort it now and then ("terminate called without an active
    # exception", 1 run in 3 here), which torchrun reports as the job failing.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
