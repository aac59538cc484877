"""The Python API: each command as a function returning a result object
(docs/api.md).

    import opskew
    r = opskew.check(step, setup=make_model, trials=9, iters=5)
    r.verdict["skewed"], r.to_dict(), r.to_pandas(), r.plot("verdict.png")

Each function builds the command's argparse Namespace through the command's
own `add_arguments` (so every default is the command line's), then calls the
command's `compute(args)`: the figures are the ones `opskew CMD --json`
writes, by the same code. Keyword arguments are the command-line options
with `_` for `-` (`record_shapes=True`, `trials=9`); `json` and
`fail_on_skew` belong to the command line only (use `to_dict()`; the result
says whether the trace is skewed). This module imports torch only when a
function that runs a workload is called.
"""

from __future__ import annotations

import argparse
import html
import importlib
import io
import json
import os

__all__ = ["Result", "check", "matrix", "sweep", "advise", "summary", "compare"]

# Options of the command line that the API does not take, and why.
_CLI_ONLY = {"json": "use .to_dict() (or opskew.output.write_json) for the JSON",
             "fail_on_skew": "read .verdict['skewed']",
             "csv": "use .rows() or .to_pandas()",
             "target": "pass fn", "setup": "pass setup",
             "corrected_dir": "use opskew.job.write_corrected(result.to_dict(), DIR)",
             "per_rank": "each rank's table is in .to_dict()['ranks']"}


def _path(p) -> str:
    """A path argument as the command line would have it (str or os.PathLike)."""
    if not isinstance(p, (str, os.PathLike)):
        raise TypeError(f"expected a path (str or os.PathLike), got {type(p).__name__}: {p!r}")
    return os.fspath(p)


def _namespace(command: str, options: dict, fixed: dict) -> argparse.Namespace:
    """The Namespace the command line would give, defaults from the command's
    own add_arguments, with `options` (keyword arguments) applied."""
    mod = importlib.import_module(f"opskew.commands.{command}")
    parser = argparse.ArgumentParser(prog=f"opskew {command}", add_help=False)
    mod.add_arguments(parser)
    actions = {a.dest: a for a in parser._actions}
    ns = argparse.Namespace(**{d: (list(a.default) if isinstance(a.default, list) else a.default)
                               for d, a in actions.items()})
    valid = sorted(d for d in actions if d not in _CLI_ONLY and d not in fixed)
    for name, value in options.items():
        if name not in valid:
            why = f" ({_CLI_ONLY[name]})" if name in _CLI_ONLY and name not in fixed else ""
            raise TypeError(f"opskew.{command}() got an unexpected keyword argument {name!r}{why}; "
                            f"valid: {', '.join(valid)}")
        a = actions[name]
        try:
            if isinstance(a, argparse._AppendAction):  # --op, --instrument, --need: one or a list
                value = [value] if isinstance(value, str) else list(value)
                if a.type:
                    value = [a.type(v) if isinstance(v, str) else v for v in value]
            elif a.type and (isinstance(value, str) or (a.type is not int and isinstance(value, (int, float))
                                                          and not isinstance(value, bool))):
                value = a.type(str(value) if not isinstance(value, str) else value)  # finite_float checks nan, inf
            elif a.type is int and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"expected a whole number, got {type(value).__name__}")
            elif type(a) is argparse._StoreAction and a.type is None and value is not None:
                # A text option (a path, a comma-separated list, a name):
                # a path object or a list is taken as the command line's text.
                if isinstance(value, os.PathLike):
                    value = os.fspath(value)
                elif isinstance(value, (list, tuple)) and all(isinstance(v, (str, int)) for v in value):
                    value = ",".join(map(str, value))
                if not isinstance(value, str):
                    raise TypeError(f"expected text (a str, a path, or a list of names), got {type(value).__name__}")
        except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
            raise ValueError(f"opskew.{command}(): {name}={value!r}: {exc}") from None
        for v in value if isinstance(value, list) else [value]:
            if a.choices is not None and v not in a.choices:
                raise ValueError(f"opskew.{command}(): {name}={v!r}: choose from "
                                 f"{', '.join(map(repr, a.choices))}")
        setattr(ns, name, value)
    for name, value in fixed.items():
        setattr(ns, name, value)
    ns.json = None
    if hasattr(ns, "csv"):
        ns.csv = None
    if hasattr(ns, "fail_on_skew"):
        ns.fail_on_skew = False
    return ns


def _workload_fields(fn, setup) -> dict:
    """`fn` a callable (setup: a callable run once, or a value; None: none),
    or a TARGET string as on the command line (setup: a name or None)."""
    from opskew.measure.workload import NO_SETUP, callable_target

    if fn is None or isinstance(fn, str):
        if setup is not None and not isinstance(setup, str):
            raise TypeError("with a TARGET string (or the built-in workload), setup must be the name "
                            "of a callable in TARGET's module")
        return {"target": fn, "setup": setup, "fn": None, "fn_setup": NO_SETUP}
    if not callable(fn):
        raise TypeError(f"fn must be a callable or a TARGET string, not {type(fn).__name__}")
    # The name the JSON, advise's snippet and matrix's second process use.
    target = callable_target(fn) or f"{getattr(fn, '__module__', None) or '?'}:" \
                                    f"{getattr(fn, '__qualname__', type(fn).__name__)}"
    setup_name = getattr(setup, "__name__", None) if callable(setup) else None
    return {"target": target, "setup": setup_name, "fn": fn,
            "fn_setup": NO_SETUP if setup is None else setup}


def _run_workload(command: str, fn, setup, options: dict, fixed: dict | None = None) -> "Result":
    fields = dict(fixed or {})
    if command != "sweep":
        fields.update(_workload_fields(fn, setup))
    args = _namespace(command, options, fields)
    mod = importlib.import_module(f"opskew.commands.{command}")
    import torch  # the command imports it anyway; its thread count is the caller's again after

    threads = torch.get_num_threads()
    try:
        done = mod.compute(args)
    finally:
        torch.set_num_threads(threads)
    result = Result(command, done.result, args)
    if done.error is not None:
        done.error.partial = result  # what was measured before the workload raised
        raise done.error from done.error.cause
    if done.result.get("correction_error"):
        import warnings

        warnings.warn(f"opskew.check: no per-operator verdict: {done.result['correction_error']}",
                      RuntimeWarning, stacklevel=3)
    return result


def check(fn=None, *, setup=None, **options) -> "Result":
    """`opskew check`: W (the instrument's cost per event) with its CI, the
    verdict, and the per-operator verdict. `fn` runs one iteration (None: the
    built-in torch.add loop; a string: a TARGET as on the command line);
    `setup` is a callable run once, whose result is passed to `fn`, or that
    value itself. Raises opskew.errors.WorkloadError (its `.partial` is the
    Result of the trials completed) when the workload raises."""
    return _run_workload("check", fn, setup, options)


def matrix(fn=None, *, setup=None, **options) -> "Result":
    """`opskew matrix`: every instrument and profiler option priced per event."""
    return _run_workload("matrix", fn, setup, options)


def advise(fn=None, *, setup=None, **options) -> "Result":
    """`opskew advise`: the cheapest configuration, its schedule and snippet."""
    return _run_workload("advise", fn, setup, options)


def sweep(**options) -> "Result":
    """`opskew sweep`: the skew curve over operator size (`op="add"` or a
    list). Draws no plot unless `out=PREFIX` is given (the command line's
    default prefix is a file in the current directory); `Result.plot(prefix)`
    draws it afterwards."""
    if "out" not in options and "no_plot" not in options:
        options["no_plot"] = True
    return _run_workload("sweep", None, None, options)


def summary(path, **options) -> "Result":
    """`opskew summary PATH`: the per-operator table of any Chrome trace
    (`sort=`, `top=`, `cat=` a list or a comma-separated string). A trace that
    ends early is summarized up to there: `status` is "truncated" and each of
    `warnings` is also issued as a RuntimeWarning. A directory or a list of
    traces is a multi-rank job (docs/multirank.md; `w=`, `align=`): its rows()
    are the table of all ranks merged."""
    trace = [_path(p) for p in path] if isinstance(path, (list, tuple)) else [_path(path)]
    args = _namespace("summary", options, {"trace": trace})
    from opskew.commands import summary as cmd

    result = Result("summary", cmd.compute(args), args)
    if result._data.get("warnings"):
        import warnings

        for w in result._data["warnings"]:
            warnings.warn(f"opskew.summary: {w}", RuntimeWarning, stacklevel=2)
    return result


def compare(*paths, **options) -> "Result":
    """`opskew compare A B ...`: the inputs (opskew JSON results or traces)
    side by side, with each later one's ratio, change and significance
    against the first (`metric=`, `top=`). Its rows() are the JSON's rows."""
    if len(paths) == 1 and isinstance(paths[0], (list, tuple)):
        paths = tuple(paths[0])  # compare([a, b]) as compare(a, b)
    args = _namespace("compare", options, {"inputs": [_path(p) for p in paths]})
    from opskew.commands import compare as cmd

    done = cmd.compute(args)
    result = Result("compare", done.result, args)
    if result._data["warnings"]:
        import warnings

        for w in result._data["warnings"]:
            warnings.warn(f"opskew.compare: {w}", RuntimeWarning, stacklevel=2)
    return result


# -- the result object --------------------------------------------------------


def _flat(d: dict, prefix: str = "") -> dict:
    """One row: nested dicts joined with `_`, a `[low, high]` interval split."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flat(v, key + "_"))
        elif k == "ci95" and isinstance(v, (list, tuple)) and len(v) == 2:
            out[key + "_low"], out[key + "_high"] = v
        else:
            out[key] = v
    return out


class Result:
    """A command's result: the fields of its JSON as attributes (`r.verdict`,
    `r["schema"]`), `kind` the command. `to_dict()` is the JSON the command
    line writes; `repr()` the text it prints."""

    def __init__(self, kind: str, data: dict, args=None):
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "_data", data)
        object.__setattr__(self, "_args", args)

    def __getattr__(self, name):
        data = object.__getattribute__(self, "_data")
        if name in data:
            return data[name]
        raise AttributeError(f"{self.kind} result has no field {name!r}; fields: {', '.join(data)}")

    def __setattr__(self, name, value):
        raise AttributeError("a Result is read-only; to_dict() gives a copy to change")

    def __getitem__(self, key):
        return self._data[key]

    def __contains__(self, key):
        return key in self._data

    def keys(self):
        return self._data.keys()

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | set(self._data))

    def to_dict(self) -> dict:
        """A copy of exactly the JSON `opskew KIND --json` writes."""
        return json.loads(json.dumps(self._data, default=str))

    # -- text, as the command line prints it
    def __repr__(self) -> str:
        buf = io.StringIO()
        mod = importlib.import_module(f"opskew.commands.{self.kind}")
        if self.kind == "summary" and "merged" in self._data:
            from opskew.analyze import job

            job.render(self._data, buf, top=getattr(self._args, "top", 30))
        elif self.kind == "summary":
            top = getattr(self._args, "top", 30)
            mod._print_table(self._data, self._data["ops"], top, buf, self._data.get("losses"))
        elif self.kind == "check":
            mod._print_human(self._data, buf)
        else:
            mod.print_human(self._data, buf)
        return buf.getvalue().rstrip("\n")

    __str__ = __repr__

    # -- rows
    def rows(self) -> list:
        """The per-item rows `to_pandas()` tabulates, as flat dicts: per
        operator (check, summary), per row (matrix), per candidate (advise),
        per size and instrument (sweep)."""
        d = self._data
        if self.kind == "check":
            ops = (d.get("operators") or {}).get("ops", [])
            return [_flat(o) for o in ops]
        if self.kind == "summary":
            return [_flat(o) for o in (d["merged"]["ops"] if "merged" in d else d["ops"])]
        if self.kind == "matrix":
            return [_flat(r) for r in d.get("rows", [])]
        if self.kind == "advise":
            return [{"candidate": k, **_flat(v)} for k, v in d.get("candidates", {}).items()]
        if self.kind == "compare":
            return [dict(zip(("name", "unit", *_compare_csv_header(d)), r)) for r in _compare_rows(d)]
        rows = []  # sweep
        for curve in d.get("curves", []):
            for p in curve["points"]:
                base = {k: v for k, v in p.items() if k != "by"}
                for iname, by in p["by"].items():
                    rows.append({"op": curve["op"], **base, "instrument": iname,
                                 "instrument_label": d["instruments"][iname], **_flat(by)})
        return rows

    def to_pandas(self):
        """A pandas DataFrame of `rows()`. pandas is not a dependency of
        opskew: ImportError when it is not installed."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("Result.to_pandas() needs pandas, which opskew does not depend on: "
                              "pip install pandas (or use .rows(), a list of dicts)") from None
        return pd.DataFrame(self.rows())

    def plot(self, path: str):
        """check: the per-operator verdict drawn to `path` (.png or .svg), as
        `--plot` draws it. sweep: the curves to PATH.png and PATH.svg (returns
        both paths). Written through opskew's one writer (docs/outputs.md)."""
        if self.kind == "check":
            if "operators" not in self._data:
                raise ValueError("this check has no per-operator verdict to plot"
                                 + (f" ({self._data['correction_error']})"
                                    if self._data.get("correction_error") else ""))
            if not str(path).lower().endswith((".png", ".svg")):
                raise ValueError("plot path must end in .png or .svg")
            from opskew.analyze.verdict import plot

            plot(self._data["operators"], str(path), title=self._data["conditions"]["workload"]["description"])
            return str(path)
        if self.kind == "sweep":
            from opskew.commands.sweep import plot

            return plot(self._data, str(path))
        raise TypeError(f"a {self.kind} result has no plot")

    def where_skew_lands(self) -> str:
        """check: in plain words, where the instrument's time lies in the
        verdict window's trace (inside leaf operators or between events)."""
        if self.kind != "check" or "operators" not in self._data:
            raise ValueError("only a check with a per-operator verdict says where the skew lands")
        from opskew.analyze.verdict import sentence

        return sentence(self._data["operators"]["summary"])

    # -- notebooks
    def _repr_html_(self) -> str:
        e = html.escape
        parts = [f"<div class='opskew-{e(self.kind)}'><b>opskew {e(self.kind)}</b>"]
        head = self._headline()
        if head:
            parts.append("<table>" + "".join(f"<tr><th style='text-align:left'>{e(k)}</th>"
                                             f"<td style='text-align:left'>{e(v)}</td></tr>" for k, v in head)
                         + "</table>")
        cols, body = self._html_rows()
        if body:
            parts.append("<table><tr>" + "".join(f"<th>{e(c)}</th>" for c in cols) + "</tr>"
                         + "".join("<tr>" + "".join(cell for cell in r) + "</tr>" for r in body)
                         + "</table>")
        if self.kind == "check" and "operators" in self._data:
            from opskew.analyze.verdict import sentence

            parts.append(f"<p>where the skew lands: {e(sentence(self._data['operators']['summary']))}</p>")
        return "".join(parts) + "</div>"

    def _headline(self) -> list:
        from opskew.render.units import fmt_ns, fmt_time

        d = self._data
        c = d.get("conditions", {})
        rows = []
        if "workload" in c:
            rows.append(("workload", c["workload"].get("description", "")))
        if self.kind == "check":
            rows.append(("instrument", c.get("instrument_label", "")))
            rows.append(("status", d.get("status", "")))
            if "baseline" in d:
                rows.append(("baseline / iteration", fmt_time(d["baseline"]["per_iter_s"])))
                rows.append(("profiled / iteration", fmt_time(d["profiled"]["per_iter_s"])))
            if d.get("events_per_iter"):
                w = d["added_per_event_ns"]
                rows.append(("events / iteration", f"{d['events_per_iter']:.6g}"))
                rows.append(("added per event (W)", f"{fmt_ns(w['median'])} "
                             f"[{fmt_ns(w['ci95'][0])}, {fmt_ns(w['ci95'][1])}]"))
                v = d["verdict"]
                from opskew.analyze.verdict import skew_words

                rows.append(("verdict", skew_words(v)))
        elif self.kind == "summary":
            st = d["stats"]
            rows += [("trace", d["trace"]), ("status", d["status"]),
                     ("events", f"{st.get('complete_events', 0)} complete of {st.get('events', 0)}")]
        elif self.kind == "compare":
            rows += [("compared", f"{d.get('kind', '')} ({d.get('metric', '')})"),
                     *((i["label"], f"{i['path']} ({i['schema']}, {i['status']})") for i in d.get("inputs", [])),
                     ("significant", d.get("significance", ""))]
        elif self.kind == "advise" and d.get("recommended"):
            rows += [("status", d.get("status", "")), ("recommended", d["recommended"]["label"])]
        else:
            rows.append(("status", d.get("status", "")))
        if d.get("error"):
            rows.append(("error", d["error"] if isinstance(d["error"], str) else json.dumps(d["error"])))
        return rows

    def _html_rows(self):
        from opskew.render.units import fmt_ns, fmt_time

        e = html.escape
        d = self._data

        def td(x, style=""):
            return f"<td style='text-align:right;{style}'>{e(str(x))}</td>"

        def tname(x):
            return f"<td style='text-align:left'>{e(str(x))}</td>"

        def cols_of(names):
            return tuple(names)  # the titles of opskew.tables.COLUMNS, as the text tables print them

        if self.kind == "check":
            if "operators" not in d:
                return [], []
            from opskew.render.tables import cell, column
            from opskew.analyze.verdict import MARK_COLOURS, VERDICT_COLUMNS, verdict_rows

            v = d["operators"]
            ops = v["ops"] if not v.get("top") else v["ops"][: v["top"]]
            kinds = [column(c).kind for c in VERDICT_COLUMNS]  # the text table's columns and units
            body = []
            for r, row in zip(ops, verdict_rows(ops)):
                cells = [tname(row[0])] + [td(cell(x, k)) for x, k in zip(row[1:-1], kinds[1:-1])]
                body.append(cells + [f"<td style='text-align:left;color:{MARK_COLOURS[r['mark']]}'>"
                                     f"<b>{e(row[-1])}</b></td>"])
            return cols_of(VERDICT_COLUMNS), body
        if self.kind == "summary":
            from opskew.render.tables import SUMMARY_COLUMNS, cell, column, summary_rows

            top = getattr(self._args, "top", 30)
            ops = d["ops"] if not top else d["ops"][:top]
            kinds = [column(c).kind for c in SUMMARY_COLUMNS]
            rows = summary_rows(ops, SUMMARY_COLUMNS, sum(o["self_ns"] for o in d["ops"]))
            return cols_of(SUMMARY_COLUMNS), [[tname(r[0])] + [td(cell(x, k)) for x, k in zip(r[1:], kinds[1:])]
                                              for r in rows]

        def ci(x):
            # The interval as measured: a 95% one, or with its own coverage
            # when too few rounds reach 95% (the text tables say so in a note).
            if not x or x.get("median") is None:
                return "n/a"
            lo, hi = x.get("ci95") or (None, None)
            cov = x.get("ci_coverage")
            short = cov is not None and not x.get("ci_reaches_95", cov >= 0.95)
            return fmt_ns(x["median"]) + (f" [{fmt_ns(lo)}, {fmt_ns(hi)}]" if lo is not None else "") + (
                f" ({100 * cov:.0f}% interval: too few rounds for 95%)" if lo is not None and short else "")

        if self.kind == "matrix":
            cols = ("row", "instrument", "in-window per event [95% CI]", "marginal [95% CI]", "over")
            return cols, [[tname(r["row"]), tname(r.get("label", "")), td(ci(r.get("in_window_per_event_ns"))),
                           td(ci(r.get("marginal_in_window_ns"))), tname(r.get("marginal_over", ""))]
                          for r in d.get("rows", []) if r["row"] != "baseline"]
        if self.kind == "compare":
            from opskew.commands.compare import table_cells

            cols, cells, _ = table_cells(d)
            return tuple(c.title for c in cols), [[tname(r[0])] + [td(x) for x in r[1:]] for r in cells]
        if self.kind == "advise":
            rec = (d.get("recommended") or {}).get("name")
            cols = ("candidate", "in-window per event [95% CI]", "events / iteration", "recommended")
            return cols, [[tname(c["label"]), td(ci(c["in_window_per_event_ns"])),
                           td(f"{c['events_per_iter']:.6g}"), tname("*" if k == rec else "")]
                          for k, c in d.get("candidates", {}).items()]
        cols = ("op", "size", "instrument", "true / call", "added / call", "reported / call", "skew")
        body = []
        for r in self.rows():
            skew = r.get("reported_over_op")
            body.append([tname(r["op"]), td(r["size"]), tname(r["instrument_label"]),
                         td(fmt_time(r["true_per_call_s"])), td(fmt_time(r["added_per_call_s"])),
                         td(fmt_time(r["reported_per_call_s"])), td(f"x{skew:.2f}" if skew else "n/a")])
        return cols, body


def _compare_csv_header(d: dict) -> list:
    """compare's per-input fields after name and unit, as its CSV names them."""
    labels = [i["label"] for i in d["inputs"]]
    return ([f"{x}{s}" for x in labels for s in ("", "_low", "_high")]
            + [f"{x}_{s}" for x in labels[1:] for s in ("ratio", "change", "significant")])


def _compare_rows(d: dict) -> list:
    from opskew.commands.compare import csv_rows

    out = []
    for r in csv_rows(d):
        flat = list(r[:2])
        n = len(d["inputs"])
        for v in r[2:2 + n]:
            flat += list(v)
        out.append(flat + list(r[2 + n:]))
    return out
