"""`opskew compare A B ...`: runs side by side, with the change against the
first and whether it is significant (as torch.utils.benchmark.Compare)."""

from __future__ import annotations

import argparse
import json
import string
import sys

from opskew.errors import EXIT_OK, EXIT_TRUNCATED, UsageError
from opskew.output import check_output, write_json
from opskew.render.units import fmt_ns
from opskew.commands._common import Computed

SCHEMA = "opskew.compare/1"

HELP = "compare opskew results or traces side by side: the change against the first, and whether it is significant"
DESCRIPTION = """\
Reads two or more inputs of one kind and prints one row per operator (or per
figure) with each input's value, the ratio and the change against the first
input (A), and whether the change is significant. The ratio and change are
n/a where A's value is 0 or below (no calls in A; a matrix cost under its
baseline's, in noise): a ratio to it means nothing.

Inputs, by kind (mixing kinds is refused, exit 2):
  operators  Chrome traces (.json, .json.gz: torch.profiler's or opskew's,
             summarized by the C reader as `opskew summary` does), `opskew
             summary --json` results (opskew.summary/1) and `opskew record
             --json` summaries (opskew.trace.summary/1), in any mix
  correct    `opskew correct --json` results: the corrected figures
  check      `opskew check --json` results: baseline and profiled time per
             iteration, W per event, inflation, events per iteration, and
             the per-operator verdict's corrected self and total times
  matrix     `opskew matrix --json` results: in-window cost per event, per row

--metric (operators and correct): self (self time per call, the default),
total (inclusive time of all calls), mean (inclusive time per call), calls.
An operator absent from an input has 0 calls and 0 total time there; its
time per call (self, mean) is n/a.
Operators are the union of the inputs', ordered by A's self time; --top N
rows (0: all; the JSON and CSV have all).

Significance is claimed only where both figures carry a 95% interval of
their run-to-run spread: check's W, its per-iteration times and inflation
(the sign-test interval of the median over its trials), matrix's per-event
costs. A change is "yes" when the two intervals do not overlap, else "no".
An interval whose coverage is below 95% (too few trials: matrix's 2 rounds
give 50%; 6 give 96.9%) or not recorded is left out, and the change is
"n/a"; the significance line says whose intervals fell short.
The verdict's corrected times are printed with their interval but tested
"n/a": that interval is W's uncertainty over one profiled window, not the
spread between runs (two checks of one workload differ by more). This is conservative: two 95% intervals
can overlap while the difference is significant, never the other way round
at a stricter level. Per-operator figures of traces, summaries and correct
results carry no interval (one run; no per-call variance is kept, and calls
within one run are not independent samples of a run's mean): their
significance is "n/a". To test an operator's change, repeat the runs, or use
`opskew check` on each version.

--csv PATH writes every row: name, unit, each input's value (and _low,
_high where it has an interval), each later input's ratio, change and
significant (true, false, or empty for n/a); plain numbers, times in ns.

Exit 2 is bad input: fewer than two inputs, a missing or unreadable file, an
unknown schema, mixed kinds; 5, a trace that ended early (compared up to
there, with a warning). An input with nothing to compare (a trace with no
events, a result with no operators or figures) is compared, with a warning.
"""

METRICS = ("self", "total", "mean", "calls")
# What each metric is, as the table's title says it.
METRIC_TEXT = {"self": "self time per call", "total": "total (inclusive) time of all calls",
               "mean": "mean (inclusive time per call)", "calls": "calls"}
OPERATOR_SCHEMAS = ("opskew.summary/1", "opskew.trace.summary/1")
KIND_OF = {"opskew.summary/1": "operators", "opskew.trace.summary/1": "operators",
           "opskew.correct/1": "correct", "opskew.check/1": "check", "opskew.matrix/1": "matrix"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="opskew JSON results or Chrome traces (.json, .json.gz); the first is the reference")
    p.add_argument("--metric", default="self", choices=METRICS,
                   help="operators and correct: the figure compared (default: self, self time per call)")
    p.add_argument("--top", type=int, default=30, metavar="N",
                   help="operator rows to print, 0 for all (default: 30; --json and --csv have all)")
    p.add_argument("--json", metavar="PATH", help="write the comparison as JSON (schema opskew.compare/1), - for stdout")
    p.add_argument("--csv", metavar="PATH", help="write every row as CSV to PATH ('-': stdout)")


# -- reading the inputs -----------------------------------------------------------

def load(path: str, label: str) -> dict:
    """One input: {"label", "path", "schema", "kind", "doc", "warnings"}.
    The C reader opens it (so open errors are named as everywhere, and a
    pipe or "-" is copied once to a file of our own: tracefile.rereadable)
    and says from its header whether it is an opskew result ("schema") or a
    trace; a trace is then summarized in C, a result parsed as JSON."""
    from opskew.analyze.tracefile import DEFAULT_EXCLUDED, rereadable, scan, summarize, warnings_of

    with rereadable(path) as src:
        meta = scan(src, header_only=True).get("metadata") or {}
        schema = meta.get("schema") if isinstance(meta.get("schema"), str) else None
        if schema is None or not schema.startswith("opskew."):
            r = summarize(src, exclude_categories=DEFAULT_EXCLUDED)
            return {"label": label, "path": path, "schema": "chrome-trace", "kind": "operators",
                    "status": r["status"], "ops": r["ops"], "warnings": warnings_of(r),
                    "events": (r.get("stats") or {}).get("events")}
        if schema not in KIND_OF:
            raise UsageError(f"{path}: cannot compare schema {schema}; compare reads "
                             f"{', '.join(KIND_OF)} and Chrome traces")
        try:
            with open(src, encoding="utf-8") as f:
                doc = json.load(f)  # an opskew result (small), not a trace
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read {path}: {' '.join(str(exc).split())}") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: not an opskew result")
    # correct --json says truncation as "truncated" and "warning" (one),
    # the other results as "status" and "warnings".
    status = "truncated" if doc.get("truncated") is True else doc.get("status", "complete")
    warnings = list(doc.get("warnings") or []) + ([doc["warning"]] if doc.get("warning") else [])
    return {"label": label, "path": path, "schema": schema, "kind": KIND_OF[schema],
            "status": status, "doc": doc, "ops": doc.get("ops"), "warnings": warnings}


# -- rows --------------------------------------------------------------------------

def _value(o, metric: str, corrected: bool):
    """The metric of operator `o` in one input; `o` None where the input
    has no such operator: it was called 0 times there, for 0 ns in all, and
    has no time per call. (Every input kind lists all its operators: a
    summary's and correct's JSON keep every row whatever their --top.)"""
    if o is None:
        return {"calls": 0, "total": 0}.get(metric)
    calls = o["calls"]
    total = o["corrected_total_ns" if corrected else "total_ns"]
    self_ = o["corrected_self_ns" if corrected else "self_ns"]
    if metric == "calls":
        return calls
    if metric == "total":
        return total
    if not calls:
        return None
    return self_ / calls if metric == "self" else total / calls


def _order(maps: list, key) -> list:
    """The union of names: A's by `key` descending, then the others'."""
    first = sorted(maps[0], key=lambda n: -key(maps[0][n]))
    seen = set(first)
    rest = {}
    for m in maps[1:]:
        for n, o in m.items():
            if n not in seen:
                rest[n] = max(rest.get(n, float("-inf")), key(o))
    return first + sorted(rest, key=lambda n: -rest[n])


def operator_rows(inputs: list, metric: str) -> list:
    corrected = inputs[0]["kind"] == "correct"
    maps = [{o["name"]: o for o in i["ops"]} for i in inputs]
    unit = "count" if metric == "calls" else "ns"
    rows = []
    for name in _order(maps, lambda o: o["corrected_self_ns" if corrected else "self_ns"]):
        vals = [_value(m.get(name), metric, corrected) for m in maps]
        rows.append(_row(name, unit, [(v, None) for v in vals], operator=name))
    return rows


# The coverage an interval needs to be tested: what --help and the
# significance line promise ("the two 95% intervals").
LEVEL = 0.95


def _ci95(d: dict) -> tuple:
    """([low, high] or None, why not or None) for a figure {"median", "ci95",
    "ci_coverage", "ci_reaches_95"}. The sign-test interval is as wide as the
    trials allow, so "ci95" of a matrix or check with few trials is filled
    but covers less (2 rounds: 50%): only its coverage says whether it is
    95%. One below 95%, or of unknown coverage, is left out (n/a); the reason
    ("cover 50%") is returned for the significance line."""
    ci, cov = d.get("ci95"), d.get("ci_coverage")
    known = isinstance(cov, (int, float)) and not isinstance(cov, bool)
    if (known and cov < LEVEL) or d.get("ci_reaches_95") is False:
        return None, f"cover {100 * cov:.3g}%" if known else "cover less than 95%"
    if not ci or None in ci:
        return None, None  # no interval at all: n/a, for the reason the kind's line gives
    if known or d.get("ci_reaches_95") is True:
        return list(ci), None
    return None, "have no recorded coverage"


def _estimate(xs: list) -> tuple:
    """(95% interval or None, why not or None) of per-trial values: the
    sign-test interval of their median (analysis.estimate, in the C engine)."""
    from opskew.stats.estimators import estimate

    return _ci95(estimate(xs)) if len(xs) > 1 else (None, None)


def check_figures(doc: dict) -> dict:
    """name -> (unit, value, ci95 or None, why no 95% interval or None), the
    headline figures of a check."""
    out = {}
    iters = (doc.get("conditions") or {}).get("iters") or 1
    b, p = doc.get("baseline"), doc.get("profiled")
    if b and p:
        bt, pt = b.get("trials_s") or [], p.get("trials_s") or []
        for name, arm, trials in (("baseline / iteration", b, bt), ("profiled / iteration", p, pt)):
            out[name] = ("ns", arm["per_iter_s"] * 1e9, *_estimate([t / iters * 1e9 for t in trials]))
    w = doc.get("added_per_event_ns")
    if w and w.get("median") is not None:
        out["W per event"] = ("ns", w["median"], *_ci95(w))
    if doc.get("inflation") is not None:
        bt, pt = (b or {}).get("trials_s") or [], (p or {}).get("trials_s") or []
        out["inflation"] = ("ratio", doc["inflation"], *_estimate([x / y for x, y in zip(pt, bt) if y > 0]))
    if doc.get("events_per_iter"):
        out["events / iteration"] = ("count", doc["events_per_iter"], None, None)
    return out


def _note_short(short: dict, label: str, why) -> None:
    """Records that input `label` had an interval left out, and why."""
    if why:
        short.setdefault(label, set()).add(why)


# Why the verdict's corrected times are not tested though they carry an
# interval: that interval is W's uncertainty applied to one profiled window;
# the window itself is one run, whose operator times vary from run to run by
# more than W's interval says (two checks of one workload differ outside it).
NO_TEST_VERDICT = ("the verdict's corrected times: n/a (their interval is W's uncertainty over one profiled "
                   "window, not the run-to-run spread)")


def check_rows(inputs: list, short: dict) -> list:
    figs = [check_figures(i["doc"]) for i in inputs]
    rows = []
    for name in _order([{k: 0 for k in figs[0]}] + figs[1:], lambda _: 0):
        vals = [(f[name][1], f[name][2]) if name in f else (None, None) for f in figs]
        for i, f in zip(inputs, figs):
            _note_short(short, i["label"], f[name][3] if name in f else None)
        unit = next(f[name][0] for f in figs if name in f)
        rows.append(_row(name, unit, vals))
    ops = [{o["name"]: o for o in (i["doc"].get("operators") or {}).get("ops", [])} for i in inputs]
    for name in _order(ops, lambda o: o["reported_self_ns"]):
        for fig in ("self", "total"):
            vals = []
            for m in ops:
                c = m[name][f"corrected_{fig}_ns"] if name in m else None
                vals.append((c["median"], c.get("ci95")) if c else (None, None))
            # Shown with W's interval, never tested: see NO_TEST_VERDICT.
            rows.append(_row(f"corrected {fig}: {name}", "ns", vals, operator=name, test=False))
    return rows


def matrix_rows(inputs: list, short: dict) -> list:
    maps = [{r["row"]: r for r in i["doc"].get("rows", []) if r.get("in_window_per_event_ns")} for i in inputs]
    rows = []
    for name in _order([{k: 0 for k in maps[0]}] + maps[1:], lambda _: 0):
        vals = []
        for i, m in zip(inputs, maps):
            x = m[name]["in_window_per_event_ns"] if name in m else None
            ci, why = _ci95(x) if x else (None, None)
            _note_short(short, i["label"], why)
            vals.append((x.get("median"), ci) if x else (None, None))
        rows.append(_row(f"in-window per event: {name}", "ns", vals))
    return rows


def significant(a, b):
    """True/False when both 95% intervals are known (non-overlap), else None."""
    if not a or not b or None in a or None in b:
        return None
    return bool(a[1] < b[0] or b[1] < a[0])


def _row(name: str, unit: str, vals: list, operator=None, test: bool = True) -> dict:
    a, a_ci = vals[0]
    changes = []
    for v, ci in vals[1:]:
        # A ratio says "times A" only against a positive A: against 0 it is
        # undefined, against a negative one (a matrix cost below its
        # baseline's, in noise) its sign inverts the change. n/a there.
        ratio = v / a if (v is not None and a is not None and a > 0) else None
        changes.append({"ratio": ratio, "change": None if ratio is None else ratio - 1,
                        "significant": significant(a_ci, ci) if test else None})
    return {"name": name, "unit": unit, "values": [v for v, _ in vals],
            "ci95": [list(ci) if ci else None for _, ci in vals], "changes": changes, "operator": operator}


def short_text(short: dict) -> str:
    """The significance line's reason for the n/a of intervals below 95%."""
    if not short:
        return ""
    whose = ", ".join(f"{x}'s intervals {' or '.join(sorted(short[x]))}" for x in sorted(short))
    return (f"; n/a where an interval is not 95%, and such intervals are left out: {whose} "
            "(the sign-test interval reaches 95% from 6 trials)")


def empty_warning(i: dict) -> list:
    """[a warning] when input `i` has nothing to compare, else []: a trace
    with no events (an empty or failed profile) reads without error, and its
    column would otherwise be n/a (or 0 calls) everywhere without a word."""
    if i["kind"] in ("operators", "correct"):
        if i["ops"]:
            return []
        if i.get("events") == 0:
            return ["the trace has no events: it has nothing to compare"]
        return ["no operators: it has nothing to compare"]
    doc = i["doc"]
    figures = (check_figures(doc) or (doc.get("operators") or {}).get("ops") if i["kind"] == "check"
               else [r for r in doc.get("rows", []) if r.get("in_window_per_event_ns")])
    return [] if figures else [f"no {i['kind']} figures: it has nothing to compare"]


def shown(result: dict) -> tuple:
    """(the rows the table prints, how many it leaves out): every figure,
    and the rows of the first --top operators."""
    top, names, rows, left = result["top"], {}, [], 0
    for r in result["rows"]:
        op = r["operator"]
        if op is not None:
            names.setdefault(op, len(names))
            if top and names[op] >= top:
                left += 1
                continue
        rows.append(r)
    return rows, left


# -- compute, print, write -------------------------------------------------------

def compute(args) -> Computed:
    """The comparison (schema opskew.compare/1); prints nothing."""
    paths = list(args.inputs)
    if len(paths) < 2:
        raise UsageError("give at least two inputs to compare (the first is the reference)")
    if len(paths) > len(string.ascii_uppercase):
        raise UsageError(f"at most {len(string.ascii_uppercase)} inputs")
    if args.top < 0:
        raise UsageError("--top must be >= 0")
    if args.csv == "-" and args.json == "-":
        raise UsageError("--json - and --csv - cannot both go to standard output: give one a file")
    inputs_desc = [(f"input {p}", p) for p in paths]
    check_output(args.json, inputs=inputs_desc)
    check_output(args.csv, inputs=inputs_desc + [("the --json file", args.json)])
    inputs = [load(p, string.ascii_uppercase[i]) for i, p in enumerate(paths)]
    kinds = {i["kind"] for i in inputs}
    if len(kinds) > 1:
        desc = ", ".join(f"{i['label']} is {i['kind']} ({i['schema']})" for i in inputs)
        raise UsageError(f"cannot compare inputs of different kinds: {desc}; compare traces and "
                         "summaries with each other, and each other kind with its own")
    kind = inputs[0]["kind"]
    short = {}  # label -> why its intervals were left out (coverage below 95%)
    if kind in ("operators", "correct"):
        rows = operator_rows(inputs, args.metric)
        sig = ("n/a: per-operator figures of one run carry no interval (no per-call variance is kept); "
               "repeat the runs or use `opskew check` to test a change")
    elif kind == "check":
        rows = check_rows(inputs, short)
        sig = ("yes when the two 95% intervals do not overlap (conservative), n/a where a figure has none; "
               + NO_TEST_VERDICT)
    else:
        rows = matrix_rows(inputs, short)
        sig = "yes when the two 95% intervals do not overlap (conservative)"
    sig += short_text(short)
    warnings = [f"{i['label']} ({i['path']}): {w}" for i in inputs for w in i["warnings"] + empty_warning(i)]
    result = {
        "schema": SCHEMA, "kind": kind,
        "metric": args.metric if kind in ("operators", "correct") else None,
        "inputs": [{"label": i["label"], "path": i["path"], "schema": i["schema"], "status": i["status"]}
                   for i in inputs],
        "significance": sig, "top": args.top, "rows": rows, "warnings": warnings,
    }
    done = Computed(result)
    if any(i["status"] == "truncated" for i in inputs):
        done.rc = EXIT_TRUNCATED
    return done


def _fmt(v, unit: str) -> str:
    if v is None:
        return "n/a"
    if unit == "ns":
        return fmt_ns(v)
    if unit == "ratio":
        return f"x{v:.3g}"
    return f"{v:d}" if isinstance(v, int) else f"{v:.6g}"


def _columns(result: dict) -> tuple:
    from opskew.render.tables import Col

    labels = [i["label"] for i in result["inputs"]]
    a = labels[0]
    table = [Col("name", "name", "name")] + [Col(x, "rtext", x) for x in labels]
    for x in labels[1:]:
        table += [Col(f"{x}/{a}", "rtext", f"{x}_ratio"), Col(f"{x} change", "rtext", f"{x}_change"),
                  Col(f"{x} significant", "rtext", f"{x}_significant")]
    csv_cols = ([Col("name", "name", "name"), Col("unit", "text", "unit")]
                + [Col(x, "interval", x) for x in labels])
    for x in labels[1:]:
        csv_cols += [Col(x, "count", f"{x}_ratio"), Col(x, "count", f"{x}_change"),
                     Col(x, "count", f"{x}_significant")]
    return table, csv_cols


def print_human(result: dict, out=None) -> None:
    out = out or sys.stdout
    from opskew.render.tables import op_table

    what = {"operators": f"{METRIC_TEXT.get(result['metric'], '')}, per operator",
            "correct": f"corrected {METRIC_TEXT.get(result['metric'], '')}, per operator",
            "check": "check figures, and the per-operator verdict's corrected times",
            "matrix": "matrix: in-window cost per event"}[result["kind"]]
    out.write(f"opskew compare: {what}\n")
    for i in result["inputs"]:
        out.write(f"  {i['label']}: {i['path']} ({i['schema']}"
                  + (f", {i['status']}" if i["status"] not in ("ok", "complete") else "") + ")\n")
    out.write("\n")
    cols, rows, left = table_cells(result)
    op_table(rows, cols, omitted=left, out=out)
    out.write(f"significant: {result['significance']}\n")


def table_cells(result: dict) -> tuple:
    """(columns, rows of text cells, rows left out by --top): the table the
    command prints, and the notebook's HTML table (api.Result)."""
    cols, _ = _columns(result)
    rows = []
    show, left = shown(result)
    for r in show:
        cells = [r["name"]]
        for v, ci in zip(r["values"], r["ci95"]):
            cells.append(_fmt(v, r["unit"]) + (f" [{_fmt(ci[0], r['unit'])}, {_fmt(ci[1], r['unit'])}]"
                                               if ci and v is not None else ""))
        for c in r["changes"]:
            s = c["significant"]
            cells += ["n/a" if c["ratio"] is None else f"x{c['ratio']:.3f}",
                      "n/a" if c["change"] is None else f"{100 * c['change']:+.1f}%",
                      "n/a" if s is None else "yes" if s else "no"]
        rows.append(cells)
    return cols, rows, left


def csv_rows(result: dict) -> list:
    rows = []
    for r in result["rows"]:
        cells = [r["name"], r["unit"]]
        for v, ci in zip(r["values"], r["ci95"]):
            cells.append((v, ci[0], ci[1]) if ci else (v, None, None))
        for c in r["changes"]:
            cells += [c["ratio"], c["change"], c["significant"]]
        rows.append(cells)
    return rows


def run(args) -> int:
    done = compute(args)
    result = done.result
    if args.json != "-" and args.csv != "-":
        print_human(result)
    if args.json:
        write_json(result, args.json)
    if args.csv:
        from opskew.render.tables import write_csv

        write_csv(args.csv, csv_rows(result), _columns(result)[1])
    for w in result["warnings"]:
        print(f"opskew compare: warning: {w}", file=sys.stderr)
    return done.rc or EXIT_OK

