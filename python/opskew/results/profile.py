"""The typed reports of opskew.profile (docs/profile.md): a cycle's report
(`prof.report`, one of `prof.reports`), the run's final W (`prof.final`,
set at stop()), and the report.json `opskew profile` writes, which holds
both. Each reads the plain dict the profiler keeps (`to_dict()` gives it
back), with typed properties for the figures people read first."""

from __future__ import annotations

from opskew.render.profile import render
from opskew.results.base import Result, field, register


class _WFigures(Result):
    """What a cycle's report and the run's report share: W with its
    interval, the pairs it comes from, the corrected step."""

    w_ns = field("w_ns", """W per operator event: {"median": ns, "ci95": [low, high] or None, ...}.""")
    w_median_ns = field("median", of="w_ns")
    w_ci95 = field("ci95", "W's 95% interval [low, high] in ns; None where the pairs were too few.", of="w_ns")
    pairs = field("pairs", "The (active step, wait step) pairs W comes from.")
    corrected_step_ns = field("corrected_step_ns", "The step's time less the instrument's (median over the pairs).")
    inflation = field("inflation", "Active step over its wait step (median): 1.10 is 10% slower under the profiler.")

    @property
    def notes(self) -> list:
        return list(self._data.get("notes") or [])


class CycleReport(_WFigures):
    """One traced cycle's report (`prof.report`): its W, verdict and
    corrected trace, or the `error` that stopped its analysis."""
    KIND = "profile cycle"

    cycle = field("cycle", required=True)
    rank = field("rank")
    w_source = field("w_source", """Where W came from: "in-run", a stored calibration, ...""")
    skewed = field("skewed", of="verdict")
    active_step_ns = field("active_step_ns")
    baseline_step_ns = field("baseline_step_ns")
    raw_trace = field("raw_trace")
    corrected_trace = field("corrected_trace")
    error = field("error")

    def render_text(self, out) -> None:
        """The report as the profiler prints it after the cycle."""
        out.write(render(self._data))


class RunReport(_WFigures):
    """The run's W from all its kept steps (`prof.final`), which every
    corrected trace of the run's latest cycles carries."""
    KIND = "profile run"

    cycles = field("cycles", "The cycles its pairs come from (the last KEEP_CYCLES).", required=True)
    run_cycles = field("run_cycles", required=True)
    delta_ns = field("delta_ns")
    corrected_step_w_ci_ns = field("corrected_step_w_ci_ns", "The corrected step at the ends of W's 95% interval.")


@register
class ProfileResult(Result):
    """The report.json `opskew profile` writes: the conditions, the latest
    cycles' reports and the run's final W."""
    KIND = "profile"
    SCHEMAS = ("opskew.profile/1",)

    @property
    def report(self) -> CycleReport | None:
        """The latest cycle's report."""
        r = self._data.get("report")
        return CycleReport(r) if r is not None else None

    @property
    def reports(self) -> list:
        return [CycleReport(r) for r in self._data.get("reports") or []]

    @property
    def final(self) -> RunReport | None:
        f = self._data.get("final")
        return RunReport(f) if f is not None else None

    def rows(self) -> list:
        return [{"cycle": r.get("cycle"), "w_ns": (r.get("w_ns") or {}).get("median"),
                 "w_source": r.get("w_source"), "pairs": r.get("pairs"),
                 "corrected_step_ns": r.get("corrected_step_ns"), "error": r.get("error")}
                for r in self._data.get("reports") or []]
