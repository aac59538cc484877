"""The clean-window audit of a CUDA trace (docs/cuda.md, "The clean-window
audit"): what in a torch.profiler trace is the profiler's own cost or a
broken record rather than the workload, found by the C reader in one pass
(`_reader.audit`):

- CUPTI's overhead records (Kineto's cat "overhead": "Activity Buffer
  Request", "Lazy Function Loading", "Instrumentation", ...), each with its
  time and the operator it landed in. They are on a row of their own and are
  never an operator's time in opskew's tables or corrections; torch's own
  summary counted them as the surrounding operator's device time until
  pytorch PR #193924.
- launches with no kernel of their correlation (missing), kernels no launch
  has (orphans), kernels of zero length or that start before their launch,
  and External ids that disagree: the records repeated sessions drop or
  corrupt (pytorch #192021, #175790).
- a first ProfilerStep#N much longer than the others: warm-up too short for
  the first active step.
"""

from __future__ import annotations

from opskew import _reader
from opskew.analyze.tracefile import raise_unless_read
from opskew.stats.pricing import median

# The first ProfilerStep#N of a trace past this many times the median of
# the others: the warm-up did not bring the first active step to speed.
WARMUP_SHORT = 1.5
# Records of each kind the audit keeps (their counts are whole).
MAX_RECORDS = 100
# The finding counts that make a trace not clean.
BROKEN = ("missing", "orphans", "bad_time", "external_id_mismatch")


def audit(path: str, *, max_records: int = MAX_RECORDS) -> dict:
    """The audit of the trace at `path`: the binding's document with
    `first_step_ratio`, `warmup_short`, `cuda` (the trace has CUDA records)
    and `clean` added."""
    doc = raise_unless_read(_reader.audit(path, max_records=max_records), path, f"auditing {path}")
    st = doc["stats"]
    steps = [s["dur_ns"] for s in doc.get("steps") or []]
    rest = median(steps[1:]) if len(steps) >= 3 else None
    doc["first_step_ratio"] = steps[0] / rest if rest else None
    doc["warmup_short"] = bool(doc["first_step_ratio"] is not None and doc["first_step_ratio"] > WARMUP_SHORT)
    doc["cuda"] = bool(st["launches"] or st["device_events"] or st["overhead_events"])
    doc["clean"] = not (st["overhead_events"] or any(st[k] for k in BROKEN) or doc["warmup_short"])
    return doc


def summary(doc: dict, keep: int = 20) -> dict:
    """What a report and a corrected trace's metadata carry of an audit: the
    counts, the overhead by name, and the first `keep` records of each kind."""
    out = {k: doc[k] for k in ("stats", "overhead_by_name", "first_step_ratio", "warmup_short", "cuda", "clean")}
    for k in ("overhead", "missing", "orphans", "bad_time"):
        out[k] = (doc.get(k) or [])[:keep]
    return out
