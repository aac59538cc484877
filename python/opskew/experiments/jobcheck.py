"""`opskew check --nproc N [TARGET]`: the verification workflow across ranks
(docs/multirank.md, section 5).

Starts N ranks under torchrun (opskew._check_rank), which run TARGET (or the
built-in loop with one allreduce per iteration) in lockstep, in interleaved
baseline and profiled windows. Per rank: W by the clock and W_own by the
rank's CPU time, each with the sign test's interval, as `check` gives W.
For the job: the window of the slowest rank, profiled against baseline. The
job's added time splits into each rank's own cost (W_own x its events) and
the time it waited for the others' (W - W_own, by the clock).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

from opskew import _engine
from opskew.errors import RuntimeFailure, UsageError, WorkloadError
from opskew.stats.estimators import per_event_diff
from opskew.vocab import PROFILER_OPTIONS

SCHEMA = "opskew.check_job/1"


def _analyze(raw: dict, iters: int) -> dict:
    ranks = []
    for r in sorted(raw["ranks"], key=lambda x: x["rank"]):
        w = per_event_diff(r["base_s"], r["prof_s"], r["events"])
        own = per_event_diff(r["base_cpu_s"], r["prof_cpu_s"], r["events"])
        ev = sorted(r["events"])[len(r["events"]) // 2] / iters
        wm, om = max(w["median"], 0.0), max(own["median"], 0.0)
        ranks.append({"rank": r["rank"], "events_per_iter": ev,
                      "w_ns": {k: w[k] for k in ("median", "ci95", "ci_coverage", "ci_reaches_95", "n_positive",
                                                 "n", "sign_p")},
                      "w_own_ns": {k: own[k] for k in ("median", "ci95", "ci_coverage", "ci_reaches_95")},
                      "own_per_iter_ns": om * ev,
                      "waited_per_iter_ns": max(wm - om, 0.0) * ev,
                      "base_per_iter_ns": sorted(r["base_s"])[len(r["base_s"]) // 2] * 1e9 / iters,
                      "prof_per_iter_ns": sorted(r["prof_s"])[len(r["prof_s"]) // 2] * 1e9 / iters})
    n = min(len(r["base_s"]) for r in raw["ranks"])
    job_base = [max(r["base_s"][i] for r in raw["ranks"]) for i in range(n)]
    job_prof = [max(r["prof_s"][i] for r in raw["ranks"]) for i in range(n)]
    paired = _engine.paired([b * 1e9 / iters for b in job_base], [p * 1e9 / iters for p in job_prof])
    added = paired["median"]
    # Who caused the job's added time: each rank's own cost per iteration;
    # the job waits for the costliest (the collectives meet every iteration).
    causer = max(ranks, key=lambda x: x["own_per_iter_ns"])
    return {"ranks": ranks,
            "job": {"base_per_iter_ns": sorted(job_base)[n // 2] * 1e9 / iters,
                    "prof_per_iter_ns": sorted(job_prof)[n // 2] * 1e9 / iters,
                    "added_per_iter_ns": added, "ci95": list(paired["ci"]), "ci_coverage": paired["ci_coverage"],
                    "sign_p": paired["sign_p"], "trials": n,
                    "costliest_rank": causer["rank"], "costliest_own_per_iter_ns": causer["own_per_iter_ns"]}}


def run(args) -> dict:
    """Runs the job and returns the document (schema opskew.check_job/1)."""
    if args.nproc < 2:
        raise UsageError("--nproc must be at least 2 (1 rank: plain opskew check)")
    unsupported = [o for o in ("corrected_trace", "trace", "plot", "against", "export") + PROFILER_OPTIONS
                   if getattr(args, o, None)]
    if args.instrument != "torch":
        unsupported.append("instrument")
    if unsupported:
        raise UsageError("--nproc measures torch.profiler (minimal) per rank; not with "
                         + ", ".join("--" + o.replace("_", "-") for o in unsupported))
    if args.trials < 2 or args.iters < 1:
        raise UsageError("--trials must be at least 2 and --iters at least 1")
    target = args.target
    if target and ":" in target:
        mod, _, fn = target.rpartition(":")
        if mod.endswith(".py") or "/" in mod:
            if not os.path.isfile(mod):
                raise UsageError(f"TARGET file not found: {mod}")
            target = os.path.abspath(mod) + ":" + fn  # the ranks start in the same folder, but be sure
    tmp = tempfile.mkdtemp(prefix="opskew-check-job-")
    try:
        spec = {"target": target, "setup": args.setup, "device": "cuda" if args.device == "cuda" else "cpu",
                "threads": args.threads, "trials": args.trials, "iters": args.iters, "calls": args.calls,
                "numel": args.numel, "warmup": args.warmup, "timeout": 600,
                "out": os.path.join(tmp, "result.json")}
        with open(os.path.join(tmp, "spec.json"), "w", encoding="utf-8") as f:
            json.dump(spec, f)
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(args.nproc), "--standalone",
               "-m", "opskew._entry.check_rank", os.path.join(tmp, "spec.json")]
        env = dict(os.environ, TMPDIR=tmp)  # torchrun's own log folder
        print(f"opskew check: {args.nproc} ranks under torchrun, {args.trials} trials x {args.iters} iterations "
              "each, baseline and profiled windows interleaved", file=sys.stderr)
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        failure = None
        if p.returncode != 0 or not os.path.exists(spec["out"]):
            failure = _failure(tmp, args.nproc, p)
            raw = _partial(tmp, spec, args.nproc)
        else:
            with open(spec["out"], encoding="utf-8") as f:
                raw = json.load(f)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failure is not None and raw is None:
        raise failure
    doc = {"schema": SCHEMA, "nproc": args.nproc, "backend": raw["backend"], "workload": raw["workload"],
           "conditions": {"torch": raw["torch"], "device": spec["device"], "threads": raw["threads"],
                          "instrument": "torch.profiler(minimal)", "iters": args.iters, "trials": args.trials,
                          "warmup_s": args.warmup},
           **_analyze(raw, args.iters), "raw": raw["ranks"]}
    if spec["device"] == "cuda":
        for r in doc["ranks"]:
            r["w_own_ns"] = None  # the windows' synchronize may spin on the CPU
            r["own_per_iter_ns"] = r["waited_per_iter_ns"] = None
        doc["job"]["costliest_rank"] = doc["job"]["costliest_own_per_iter_ns"] = None
    if failure is not None:
        # What was measured before the failure, reported as check does.
        doc["error"] = str(failure)
        doc["partial"] = True
        failure.partial = doc
        raise failure
    return doc


def _failure(tmp: str, nproc: int, p) -> Exception:
    """The exception for a failed job: a rank's own (the workload's: exit
    4), else torchrun's last lines (exit 6)."""
    found = []
    for n in os.listdir(tmp):
        if n.endswith(".error"):
            with open(os.path.join(tmp, n), encoding="utf-8") as f:
                found.append(json.load(f))
    if found:
        # The first to fail is the cause; the others failed because it left
        # (gloo: "Connection closed by peer").
        e = min(found, key=lambda x: x["at"])
        if e["workload"]:
            return WorkloadError(f"the workload raised on {e['message']}\n{e['traceback'].rstrip()}")
        return RuntimeFailure(f"the {nproc} ranks failed: {e['message']}\n{e['traceback'].rstrip()}")
    tail = "\n".join((p.stderr or "").splitlines()[-15:])
    return RuntimeFailure(f"the {nproc} ranks failed (torchrun exit {p.returncode}):\n{tail}")


def _partial(tmp: str, spec: dict, nproc: int):
    """The windows every rank wrote before a failure (each writes its own
    after every trial), cut to the trials all of them finished; None below
    2 trials."""
    rows = []
    for r in range(nproc):
        try:
            with open(f"{os.path.join(tmp, 'spec.json')}.rank{r}.rows", encoding="utf-8") as f:
                rows.append(json.load(f))
        except (OSError, ValueError):
            return None
    n = min(len(r["prof_s"]) for r in rows)
    if n < 2:
        return None
    import torch

    for r in rows:
        for k in ("base_s", "prof_s", "base_cpu_s", "prof_cpu_s", "events", "order"):
            r[k] = r[k][:n]
    return {"world_size": nproc, "backend": "gloo" if spec["device"] == "cpu" else "nccl", "ranks": rows,
            "torch": torch.__version__, "threads": spec["threads"],
            "workload": spec["target"] or "the built-in loop"}
