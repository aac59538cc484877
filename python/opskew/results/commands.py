"""The typed results of the commands the Python API runs (docs/api.md): one
class per command, each reading its documented JSON (`to_dict()` gives it
back unchanged), with typed properties for its headline figures, its rows
and its text (the command line's, from opskew.render)."""

from __future__ import annotations

from opskew.results.views import lazy
from opskew.results.base import Result, field, flat, register

print_calibrations = lazy("calibrate.print_calibrations")
check_text = lazy("check.print_human")
correct_text = lazy("correct.print_human")
csv_rows = lazy("compare.csv_rows")
compare_text = lazy("compare.print_human")
advise_text = lazy("advise.print_human")
job_text = lazy("job.render")
matrix_text = lazy("matrix.print_human")
print_profile_run = lazy("summary.print_profile_run")
print_table = lazy("summary.print_table")
sweep_plot = lazy("sweep.plot")
sweep_text = lazy("sweep.print_human")
verdict_plot = lazy("verdict.plot")
sentence = lazy("verdict.sentence")


@register
class CheckResult(Result):
    """`opskew check`: W with its CI, the verdict, the per-operator verdict."""
    KIND = "check"
    SCHEMAS = ("opskew.check/1",)

    w_ns = field("median", "W per event, ns: the median (its interval: w_ci95_ns; all of it, with its coverage "
                 "and method, in added_per_event_ns, the JSON's own field).", of="added_per_event_ns")
    w_ci95_ns = field("ci95", "W's interval [low, high] in ns (its coverage: added_per_event_ns's ci_coverage).",
                      of="added_per_event_ns")
    skewed = field("skewed", of="verdict")

    def render_text(self, out) -> None:
        check_text(self._data, out)

    def rows(self) -> list:
        return [flat(o) for o in (self._data.get("operators") or {}).get("ops", [])]

    def plot(self, path: str):
        """The per-operator verdict drawn to `path` (.png or .svg), as
        `--plot` draws it, through opskew's one writer (docs/outputs.md)."""
        if "operators" not in self._data:
            raise ValueError("this check has no per-operator verdict to plot"
                             + (f" ({self._data['correction_error']})"
                                if self._data.get("correction_error") else ""))
        if not str(path).lower().endswith((".png", ".svg")):
            raise ValueError("plot path must end in .png or .svg")
        verdict_plot(self._data["operators"], str(path), title=self._data["conditions"]["workload"]["description"])
        return str(path)

    def where_skew_lands(self) -> str:
        """In plain words, where the instrument's time lies in the verdict
        window's trace (inside leaf operators or between events)."""
        if "operators" not in self._data:
            raise ValueError("only a check with a per-operator verdict says where the skew lands")
        return sentence(self._data["operators"]["summary"])


@register
class MatrixResult(Result):
    """`opskew matrix`: every instrument and profiler option priced per event."""
    KIND = "matrix"
    SCHEMAS = ("opskew.matrix/1",)

    def render_text(self, out) -> None:
        matrix_text(self._data, out)

    def rows(self) -> list:
        return [flat(r) for r in self._data.get("rows", [])]


@register
class AdviseResult(Result):
    """`opskew advise`: the cheapest configuration, its schedule and snippet."""
    KIND = "advise"
    SCHEMAS = ("opskew.advise/1",)

    recommended = field("recommended")

    def render_text(self, out) -> None:
        advise_text(self._data, out)

    def rows(self) -> list:
        return [{"candidate": k, **flat(v)} for k, v in self._data.get("candidates", {}).items()]


@register
class SweepResult(Result):
    """`opskew sweep`: reported against true time over operator size."""
    KIND = "sweep"
    SCHEMAS = ("opskew.sweep/1",)

    def render_text(self, out) -> None:
        sweep_text(self._data, out)

    def rows(self) -> list:
        d, rows = self._data, []
        for curve in d.get("curves", []):
            for p in curve["points"]:
                base = {k: v for k, v in p.items() if k != "by"}
                for iname, by in p["by"].items():
                    rows.append({"op": curve["op"], **base, "instrument": iname,
                                 "instrument_label": d["instruments"][iname], **flat(by)})
        return rows

    def plot(self, path: str):
        """The curves to PATH.png and PATH.svg; returns both paths."""
        return sweep_plot(self._data, str(path))


@register
class SummaryResult(Result):
    """`opskew summary`: the per-operator table of a trace, of a job's
    traces merged (schema opskew.job_summary/1), or of an `opskew profile`
    run's latest cycle, corrected (opskew.profile_summary/1: its cycles too)."""
    KIND = "summary"
    SCHEMAS = ("opskew.summary/1", "opskew.job_summary/1", "opskew.profile_summary/1")

    @property
    def ops(self) -> list:
        d = self._data
        return d["merged"]["ops"] if "merged" in d else d["ops"]

    def render_text(self, out) -> None:
        top = self.option("top", 30)
        if "merged" in self._data:
            job_text(self._data, out, top=top)
        elif "cycles" in self._data:
            print_profile_run(self._data, out, top=top)
        else:
            print_table(self._data, self._data["ops"], top, out, self._data.get("losses"))

    def rows(self) -> list:
        return [flat(o) for o in self.ops]


def _compare_csv_header(d: dict) -> list:
    """compare's per-input fields after name and unit, as its CSV names them."""
    labels = [i["label"] for i in d["inputs"]]
    return ([f"{x}{s}" for x in labels for s in ("", "_low", "_high")]
            + [f"{x}_{s}" for x in labels[1:] for s in ("ratio", "change", "significant")])


@register
class CompareResult(Result):
    """`opskew compare`: inputs side by side, each against the first."""
    KIND = "compare"
    SCHEMAS = ("opskew.compare/1",)

    def render_text(self, out) -> None:
        compare_text(self._data, out)

    def rows(self) -> list:
        d = self._data
        out, n = [], len(d["inputs"])
        for r in csv_rows(d):
            cells = list(r[:2])
            for v in r[2:2 + n]:
                cells += list(v)
            out.append(dict(zip(("name", "unit", *_compare_csv_header(d)), cells + list(r[2 + n:]))))
        return out


@register
class CorrectResult(Result):
    """`opskew correct --json`: the corrected table and the correction's figures."""
    KIND = "correct"
    SCHEMAS = ("opskew.correct/1",)

    def render_text(self, out) -> None:
        """What `opskew correct` prints (its --top rows, 20 when loaded)."""
        top, ops = self.option("top", 20), self._data.get("ops", [])
        correct_text(dict(self._data, ops=ops if top == 0 else ops[:top],
                          omitted=0 if top == 0 else max(0, len(ops) - top)), out)

    def rows(self) -> list:
        return [flat(o) for o in self._data.get("ops", [])]


@register
class CalibrationsResult(Result):
    """`opskew calibrate --json`: the calibrations measured and stored."""
    KIND = "calibrate"
    SCHEMAS = ("opskew.calibrate/1",)

    def render_text(self, out) -> None:
        """Each calibration as `opskew calibrate` prints it."""
        out.write(f"opskew calibrate: {len(self._data.get('calibrations', []))} calibration(s)\n")
        print_calibrations(self._data.get("calibrations", []), out)

    def rows(self) -> list:
        return [flat(c) for c in self._data.get("calibrations", [])]


BY_KIND = {c.KIND: c for c in (CheckResult, MatrixResult, AdviseResult, SweepResult, SummaryResult,
                               CompareResult, CorrectResult, CalibrationsResult)}
