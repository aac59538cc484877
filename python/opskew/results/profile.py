"""The typed reports of opskew.profile (docs/profile.md): a cycle's report
(`prof.report`, one of `prof.reports`), the run's final W (`prof.final`,
set at stop()), and the report.json `opskew profile` writes, which holds
both. Each reads the plain dict the profiler keeps (`to_dict()` gives it
back), with typed properties for the figures people read first."""

from __future__ import annotations

from opskew.render.profile import render
from opskew.results.base import Result, register


class _WFigures(Result):
    """What a cycle's report and the run's report share: W with its
    interval, the pairs it comes from, the corrected step."""

    @property
    def w_ns(self) -> dict | None:
        """W per operator event: {"median": ns, "ci95": [low, high] or None, ...}."""
        return self._data.get("w_ns")

    @property
    def w_median_ns(self) -> float | None:
        return (self._data.get("w_ns") or {}).get("median")

    @property
    def w_ci95(self) -> list | None:
        """W's 95% interval [low, high] in ns; None where the pairs were too few."""
        return (self._data.get("w_ns") or {}).get("ci95")

    @property
    def pairs(self) -> int | None:
        """The (active step, wait step) pairs W comes from."""
        return self._data.get("pairs")

    @property
    def corrected_step_ns(self) -> float | None:
        """The step's time less the instrument's (median over the pairs)."""
        return self._data.get("corrected_step_ns")

    @property
    def inflation(self) -> float | None:
        """Active step over its wait step (median): 1.10 is 10% slower under the profiler."""
        return self._data.get("inflation")

    @property
    def notes(self) -> list:
        return list(self._data.get("notes") or [])


class CycleReport(_WFigures):
    """One traced cycle's report (`prof.report`): its W, verdict and
    corrected trace, or the `error` that stopped its analysis."""
    KIND = "profile cycle"

    @property
    def cycle(self) -> int:
        return self._data["cycle"]

    @property
    def rank(self) -> int | None:
        return self._data.get("rank")

    @property
    def w_source(self) -> str | None:
        """Where W came from: "in-run", a stored calibration, ..."""
        return self._data.get("w_source")

    @property
    def skewed(self) -> bool | None:
        return (self._data.get("verdict") or {}).get("skewed")

    @property
    def active_step_ns(self) -> float | None:
        return self._data.get("active_step_ns")

    @property
    def baseline_step_ns(self) -> float | None:
        return self._data.get("baseline_step_ns")

    @property
    def raw_trace(self) -> str | None:
        return self._data.get("raw_trace")

    @property
    def corrected_trace(self) -> str | None:
        return self._data.get("corrected_trace")

    @property
    def error(self) -> str | None:
        return self._data.get("error")

    def render_text(self, out) -> None:
        """The report as the profiler prints it after the cycle."""
        out.write(render(self._data))


class RunReport(_WFigures):
    """The run's W from all its kept steps (`prof.final`), which every
    corrected trace of the run's latest cycles carries."""
    KIND = "profile run"

    @property
    def cycles(self) -> int:
        """The cycles its pairs come from (the last KEEP_CYCLES)."""
        return self._data["cycles"]

    @property
    def run_cycles(self) -> int:
        return self._data["run_cycles"]

    @property
    def delta_ns(self) -> float | None:
        return self._data.get("delta_ns")

    @property
    def corrected_step_w_ci_ns(self) -> list | None:
        """The corrected step at the ends of W's 95% interval."""
        return self._data.get("corrected_step_w_ci_ns")


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
