"""What opskew.profile gives besides torch's own: each cycle's report as a
typed result (opskew.results.profile.CycleReport, still the dict it was),
and the corrected key_averages() of a cycle (opskew.analyze.averages, from
that report's per-operator rows, so the two agree to the nanosecond)."""

from __future__ import annotations

import functools

from opskew.analyze.averages import from_report, refuse_grouping
from opskew.host import cpu_model
from opskew.results.averages import CorrectedAverages
from opskew.results.profile import CycleReport


@functools.lru_cache(maxsize=1)
def _cpu() -> str:
    return cpu_model()


def conditions(prof) -> dict:
    """What the run runs on, for the report's picture (CycleReport.plot)."""
    torch = prof._torch
    return {"torch": torch.__version__, "device": "cuda" if prof._cuda else "cpu", "cpu": _cpu(),
            "threads": torch.get_num_threads(), "options": dict(prof._analysis.options)}


def typed(rep: dict, prof) -> CycleReport:
    """`rep` as the typed report the profiler keeps, which knows the run's
    other reports (W per cycle in its picture) and its conditions."""
    return CycleReport(rep, history=prof.reports, conditions=conditions(prof))


def corrected_averages(prof, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False,
                       cycle=None) -> CorrectedAverages:
    """The latest cycle's (or cycle `cycle`'s) corrected averages;
    ValueError where there is no such report or it has no corrected table,
    NotImplementedError for a grouping the corrected table cannot make."""
    refuse_grouping(group_by_input_shape, group_by_stack_n, group_by_overload_name)
    reports = prof.reports
    if cycle is None:
        rep = reports[-1] if reports else None
    else:
        rep = next((r for r in reversed(reports) if r.get("cycle") == cycle), None)
    if rep is None:
        raise ValueError("corrected_averages(): no trace yet (it reads a cycle's report, made when its trace is "
                         "ready)" if cycle is None else f"corrected_averages(): no report of cycle {cycle}; cycles: "
                         + ", ".join(str(r.get("cycle")) for r in reports))
    kinds = getattr(prof._torch.autograd, "DeviceType", None)
    return CorrectedAverages(from_report(rep), (kinds.CPU, kinds.CUDA) if kinds is not None else ("CPU", "CUDA"))
