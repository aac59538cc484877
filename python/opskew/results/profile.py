"""The typed reports of opskew.profile (docs/profile.md): a cycle's report
(`prof.report`, one of `prof.reports`: the dict the profiler keeps, typed),
the run's final W (`prof.final`, set at stop()), and the report.json
`opskew profile` writes, which holds both. `to_dict()` gives each back as
its JSON, with typed properties for the figures people read first; a
cycle's report also has its per-operator rows, notebook view and picture."""

from __future__ import annotations

import os

from opskew.results.views import lazy
from opskew.results.base import Result, field, flat, register

all_words = lazy("notes.all_words")
render = lazy("profile.render")
print_profile_run = lazy("summary.print_profile_run")
print_run_figures = lazy("summary.print_run_figures")
profile_plot = lazy("profile_plot.plot")


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
        """The notes in words (the report keeps them as records: stats.notes)."""
        return all_words(self._data.get("notes"))


# A cycle's report, field by field: what opskew.profile fills in (cycle.py,
# traces.py, core.py) and nothing else; docs/profile-reference.md, "The
# report", says each at length. A key not here is a defect (a test checks
# every report of real runs against it).
CYCLE_FIELDS = {
    # the cycle
    "cycle": "the trace's number", "rank": "torchrun's RANK, or None", "world_size": "torchrun's WORLD_SIZE",
    "steps": "steps per phase so far", "events": "operator and Python events of the trace, and how counted",
    "step_ranges": "how the ProfilerStep#N ranges were opened", "error": "why the cycle has no analysis",
    "raw_trace": "the raw trace's path", "corrected_trace": "the corrected trace's path",
    "overwritten_by_cycle": "the later cycle whose trace took this one's path",
    # the pairing and W
    "pairs": "active steps paired with a wait step", "unpaired_active_steps": "active steps with no pair",
    "single_active_cycles": "cycles with a single (cold) active step", "baseline_step_ns": "wait step, median",
    "active_step_ns": "profiled step, median", "events_per_active_step": "operator events per active step",
    "inflation": "active over wait step", "two_sample": "the unpaired estimate, where pairs are few",
    "pairs_near_trace": "pairs whose wait step ran soon after a trace", "wait_drift": "the wait steps' drift",
    "w_ns": "W per operator event: median, ci95, coverage, method", "w_own_ns": "W from this cycle's pairs alone",
    "w_source": "where W came from", "advice": "what to change for a W", "fallback": "what W fell back to",
    "w_model_ns": "the in-process model's W, its measurement, budget and check",
    "w_stored_ns": "a stored calibration's W, beside the model's",
    "w_bare_steps_ns": "the bare steps between captures' W, where the model's interval was the narrower",
    "step_marked_by": "what marked the steps of a capture no step() marked: the optimizer's or the root module's",
    "w_by_position": "W by position in the cycle", "w_by_cycle": "this cycle's own level",
    "cold_first_active_extra_ns": "the cold first step's extra", "cold_first_active_cycles": "cycles it is from",
    "warmup_extra_per_step_ns": "warmup steps' extra", "post_trace_wait_extra_ns": "wait steps' extra after a trace",
    "cold_step": "how the cold first step was priced", "position_steps": "how the other active steps were priced",
    "step_spans_ns": "each active step's body by opskew's clock",
    "w_py_ns": "W_py per Python event", "w_py_note": "where W_py came from", "cost_classes": "each class's price",
    "bytecode": "the interpreter's slowdown under with_stack",
    # the correction
    "delta_ns": "delta per operator event", "op_deltas_ns": "each leaf's own delta",
    "leaf_delta": "the leaf reference's summary", "corrected_with": "which W wrote the trace on disk",
    "corrected_w_ns": "that W, where it is the run's final one", "operators": "the per-operator verdict",
    "marks": "the operators' marks (report.json's entries, as earlier versions wrote them)",
    "moved_most": "[[name, reported, corrected]]: the self times the correction moved most",
    "corrected_step_ns": "the true step: the corrected trace's median ProfilerStep#N",
    "corrected_step_w_ci_ns": "the same at W's CI ends", "corrected_step_pairs_ns": "the pairs' own corrected step",
    "corrected_step_pairs_w_ci_ns": "the same at W's CI ends", "trace_step_stretch": "ranges written stretched",
    "verdict": "skewed or not, and the test", "audit": "the clean-window audit (CUDA)", "notes": "caveats",
    # costs outside the steps
    "stop_ns": "torch's stop and post-processing", "on_trace_ready_ns": "the user's handler",
    "opskew_ns": "opskew's own time in the step() call", "w_py_measure_ns": "of which measuring W_py",
    "model_ns": "of which measuring or checking the in-process model",
    "share_of_active_time": "those against the active steps' time",
    # after the cycle printed
    "as_printed": "the fields a revision changed, as the cycle printed them",
    "revised_by": "what revised the report: final_w, exported, overwritten, recorrect_failed",
    "recorrect_error": "why stop()'s correction failed",
}

# The run's report (prof.final, report.json's final).
RUN_FIELDS = {
    "w_ns": "W from every kept step", "w_own_ns": "W from the pairs alone", "delta_ns": "delta at that W",
    "pairs": "pairs", "cycles": "the cycles they come from", "run_cycles": "the run's cycles",
    "inflation": "active over wait step", "notes": "caveats", "sign_test": "the sign test",
    "corrected_step_ns": "the median of the corrected traces' steps", "corrected_step_w_ci_ns": "at W's CI ends",
    "corrected_step_pairs_ns": "the pairs' own", "corrected_step_pairs_w_ci_ns": "at W's CI ends",
    "cold_first_active_extra_ns": "the cold first step's extra", "cold_first_active_cycles": "cycles it is from",
    "w_by_position": "W by position", "w_by_cycle": "each cycle's level", "baseline_step_ns": "wait step",
    "active_step_ns": "profiled step", "not_recorrected": "traces that keep their own cycle's W",
}


def undeclared(rep: dict, fields: dict = CYCLE_FIELDS) -> list:
    """The keys of `rep` its table (CYCLE_FIELDS, RUN_FIELDS) does not declare."""
    return sorted(k for k in rep if k not in fields)


def as_printed(rep: dict) -> dict:
    """`rep` as it was when its cycle printed it: its fields with those a
    later revision changed (stop()'s final W, an export, a later cycle's
    trace at the same path) put back as they were (`as_printed`); a report
    of an earlier version keeps them as `at_cycle` (its corrected step, W,
    W's source, trace and marks)."""
    out = dict(rep)
    was = rep.get("as_printed")
    if was is None and rep.get("at_cycle"):
        was = {k: v for k, v in rep["at_cycle"].items() if k != "marks"}
        if rep["at_cycle"].get("marks") is not None:
            was["operators"] = {**(rep.get("operators") or {}), "marks": rep["at_cycle"]["marks"]}
    out.update(was or {})
    out.pop("as_printed", None)
    out.pop("revised_by", None)
    return out


def _as_was(key: str, value):
    # What as_printed keeps of a field: a report's per-operator part without
    # its table of every operator (what the printed report reads of it).
    if key == "operators" and isinstance(value, dict):
        return {k: v for k, v in value.items() if k != "ops"}
    return value


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

    def revised(self, updates: dict, why: str) -> "CycleReport":
        """A new report: this one with `updates`, `why` added to its
        `revised_by` ("final_w": stop() corrected its trace again with the
        run's final W; "exported": export_chrome_trace after the cycle;
        "overwritten": a later cycle's trace took its path), and the values
        it printed of each field that changed kept in `as_printed`, so what
        was printed and what is stored can always be reconciled."""
        was = dict(self.get("as_printed") or {})
        for k, v in updates.items():
            if k not in was and self.get(k) != v:
                was[k] = _as_was(k, self.get(k))
        data = {**self, **updates, "revised_by": [*(self.get("revised_by") or ()), why]}
        if was:
            data["as_printed"] = was
        return CycleReport(data, self._options, self.kind, history=self._history, conditions=self._conditions)

    def as_printed(self) -> dict:
        """The report as its cycle printed it (module function as_printed)."""
        return as_printed(self)

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


class RunReport(dict, _WFigures):
    """The run's W from all its kept steps (`prof.final`), which every
    corrected trace of the run's latest cycles carries: the dict it was
    (`json.dumps`, `f["w_ns"]`), with typed figures and its text."""
    KIND = "profile run"

    def __init__(self, data=(), options=None, kind=None):
        dict.__init__(self, data)
        object.__setattr__(self, "kind", kind or self.KIND)
        object.__setattr__(self, "_options", options)

    _data = property(lambda self: self)
    kind, _options = KIND, None

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
