"""The typed reports of opskew.profile (docs/profile.md): a cycle's report
(`prof.report`, one of `prof.reports`: the dict the profiler keeps, typed),
the run's final W (`prof.final`, set at stop()), and the report.json
`opskew profile` writes, which holds both. `to_dict()` gives each back as
its JSON, with typed properties for the figures people read first; a
cycle's report also has its per-operator rows, notebook view and picture."""

from __future__ import annotations

import os

from opskew.render.profile import render
from opskew.render.summary import print_profile_run, print_run_figures
from opskew.render.profile_plot import plot as profile_plot
from opskew.results.base import Result, field, flat, register


SUMMARY_SCHEMA = "opskew.profile_summary/1"

# The latest cycle's operators, by summary's --sort: the corrected figures,
# as the run's report has them.
SORT_KEYS = {
    "total": lambda o: -o["corrected_total_ns"]["median"],
    "self": lambda o: -o["corrected_self_ns"]["median"],
    "calls": lambda o: -o["calls"],
    "mean": lambda o: -o["corrected_total_ns"]["median"] / max(o["calls"], 1),
    "name": lambda o: o["name"],
}


def _rel(path, root):
    """`path` relative to the run's folder where it lies inside it."""
    if not path or not root:
        return path
    rel = os.path.relpath(path, root)
    return path if rel.startswith("..") else rel


def _cycle(rep: dict, root) -> dict:
    keys = ("cycle", "w_ns", "w_source", "pairs", "inflation", "active_step_ns", "baseline_step_ns",
            "corrected_step_ns", "corrected_step_w_ci_ns", "corrected_with", "corrected_w_ns", "marks",
            "raw_trace", "corrected_trace", "error")
    return {**{k: rep.get(k) for k in keys}, "raw_trace_rel": _rel(rep.get("raw_trace"), root),
            "corrected_trace_rel": _rel(rep.get("corrected_trace"), root)}


def run_summary(doc: dict, report=None, sort: str = "total") -> dict:
    """What `opskew summary OUT` says of report.json's document `doc`
    (schema opskew.profile_summary/1): the run (conditions, how it ended,
    its final W and corrected step, from every pair where stop() made one,
    else the latest cycle's), each cycle (step, W, its raw and corrected
    traces) and the latest cycle's operators, corrected, sorted by `sort`."""
    root = os.path.dirname(os.path.abspath(report)) if report else None
    if root is None:
        raw = next((r.get("raw_trace") for r in doc.get("reports") or [] if r.get("raw_trace")), None)
        root = os.path.dirname(os.path.dirname(raw)) if raw else None  # OUT/traces/NAME
    latest = doc.get("report") or {}
    f = doc.get("final") or latest
    run = {k: f.get(k) for k in ("w_ns", "pairs", "inflation", "baseline_step_ns", "active_step_ns",
                                  "corrected_step_ns", "corrected_step_w_ci_ns", "delta_ns")}
    run["from"] = "the run's final W" if doc.get("final") else f"cycle {f.get('cycle')}'s report"
    return {
        "schema": SUMMARY_SCHEMA, "status": "complete", "out": root,
        "report": os.path.abspath(report) if report else None,
        "conditions": doc.get("conditions"), "step_source": doc.get("step_source"), "steps": doc.get("steps"),
        "ended_by": doc.get("ended_by"), "rank": doc.get("rank"), "notes": list(doc.get("notes") or []),
        "run": run, "cycles": [_cycle(r, root) for r in doc.get("reports") or []],
        "earlier_reports": doc.get("earlier_reports") or 0,
        "latest_cycle": latest.get("cycle"), "latest_corrected_with": latest.get("corrected_with"),
        "latest_error": latest.get("error"), "sort": sort,
        "ops": sorted(((latest.get("operators") or {}).get("ops") or []), key=SORT_KEYS[sort]),
        "warnings": [],
    }


class _WFigures(Result):
    """What a cycle's report and the run's report share: W with its
    interval, the pairs it comes from, the corrected step."""

    w_ns = field("median", "W per operator event, ns: the median (its interval: w_ci95_ns; all of it, with its "
                 "coverage and method: the dict's own rep[\"w_ns\"]).", of="w_ns")
    w_median_ns = w_ns
    w_ci95_ns = field("ci95", "W's 95% interval [low, high] in ns; None where the pairs were too few.", of="w_ns")
    w_ci95 = w_ci95_ns
    pairs = field("pairs", "The (active step, wait step) pairs W comes from.")
    corrected_step_ns = field("corrected_step_ns", "The step's time less the instrument's: the median ProfilerStep#N "
                                                   "of the corrected trace (corrected_step_pairs_ns: the pairs').")
    inflation = field("inflation", "Active step over its wait step (median): 1.10 is 10% slower under the profiler.")

    @property
    def notes(self) -> list:
        return list(self._data.get("notes") or [])


class CycleReport(dict, _WFigures):
    """One traced cycle's report (`prof.report`, each of `prof.reports`):
    its W, verdict and corrected trace, or the `error` that stopped its
    analysis. It is the dict the profiler keeps (`rep["w_ns"]`, `.get()`,
    `json.dumps(rep)` work as they did: opskew.profile fills it in as the
    cycle is analysed and again at stop()), with the typed figures, its text
    (`str()`, what the profiler prints), `to_dict()` (report.json's),
    `rows()` and `to_pandas()` (the per-operator table), `_repr_html_` and
    `plot(path)`. `history`: the run's reports, for W per cycle in the
    plot; `conditions`: what the run ran on, for the plot's title."""
    KIND = "profile cycle"

    def __init__(self, data=(), options=None, kind=None, *, history=None, conditions=None):
        dict.__init__(self, data)
        for k, v in (("kind", kind or self.KIND), ("_options", options), ("_history", history),
                     ("_conditions", conditions)):
            object.__setattr__(self, k, v)

    _data = property(lambda self: self)  # Result's fields read the dict itself
    # Until an instance has its own (copy and pickle make it empty first,
    # then look attributes up through Result.__getattr__, which reads kind).
    kind, _options, _history, _conditions = KIND, None, None, None

    def rows(self) -> list:
        """The per-operator verdict, one flat dict per operator (times in ns)."""
        return [flat(o) for o in (self.get("operators") or {}).get("ops") or []]

    def plot(self, path) -> str:
        """The picture (`opskew profile` writes it as report.png): per
        operator, the reported time against the corrected one with its
        interval, coloured by trust mark; W per cycle with its interval
        (the run's cycles so far). PNG or SVG by the suffix of `path`;
        ImportError in one line without matplotlib."""
        return profile_plot(self, list(self._history or [self]), str(path), conditions=self._conditions)

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

    def render_text(self, out) -> None:
        """The run's W and step, as `opskew summary OUT` prints them."""
        print_run_figures(dict(self._data, **{"from": "the run's final W"}), out)
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
        return CycleReport(r, history=self._data.get("reports"), conditions=self._data.get("conditions")) \
            if r is not None else None

    @property
    def reports(self) -> list:
        return [CycleReport(r, conditions=self._data.get("conditions")) for r in self._data.get("reports") or []]

    def plot(self, path) -> str:
        """The latest cycle's picture with W per cycle over the reports kept
        (CycleReport.plot); `opskew profile` writes it as report.png."""
        if self.report is None:
            raise ValueError("no cycle completed: nothing to plot")
        return self.report.plot(path)

    @property
    def final(self) -> RunReport | None:
        f = self._data.get("final")
        return RunReport(f) if f is not None else None

    def render_text(self, out) -> None:
        """What `opskew summary OUT` prints of this run."""
        print_profile_run(run_summary(self._data), out)

    def rows(self) -> list:
        return [{"cycle": r.get("cycle"), "w_ns": (r.get("w_ns") or {}).get("median"),
                 "w_source": r.get("w_source"), "pairs": r.get("pairs"),
                 "corrected_step_ns": r.get("corrected_step_ns"), "error": r.get("error")}
                for r in self._data.get("reports") or []]
