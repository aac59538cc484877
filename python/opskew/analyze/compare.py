"""`opskew compare A B ...`: runs side by side, with the change against the
first and whether it is significant (as torch.utils.benchmark.Compare). The
computation; the table is opskew.render.compare's, the command line
opskew.cli.commands.compare's."""

from __future__ import annotations

import json
import re
import string

from opskew.analyze import profile_out
from opskew.analyze.tracefile import DEFAULT_EXCLUDED, rereadable, scan, summarize
from opskew.errors import EXIT_OK, EXIT_TRUNCATED, UsageError
from opskew.options import Spec, declared
from opskew.output import check_output
from opskew.results.views import lazy
from opskew.stats.estimators import estimate

warnings_of = lazy("trace_notes.warnings_of")

SCHEMA = "opskew.compare/1"

METRICS = ("self", "total", "mean", "calls")
OPERATOR_SCHEMAS = ("opskew.summary/1", "opskew.trace.summary/1")
KIND_OF = {"opskew.summary/1": "operators", "opskew.trace.summary/1": "operators",
           "opskew.correct/1": "correct", "opskew.check/1": "check", "opskew.matrix/1": "matrix",
           profile_out.PROFILE_SCHEMA: "profile"}


def declare(p: Spec) -> None:
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="opskew JSON results or Chrome traces (.json, .json.gz); the first is the reference")
    p.add_argument("--metric", default="self", choices=METRICS,
                   help="operators and correct: the figure compared (default: self, self time per call)")
    p.add_argument("--top", type=int, default=30, metavar="N",
                   help="operator rows to print, 0 for all (default: 30; --json and --csv have all)")
    p.add_argument("--json", metavar="PATH", help="write the comparison as JSON (schema opskew.compare/1), - for stdout")
    p.add_argument("--csv", metavar="PATH", help="write every row as CSV to PATH ('-': stdout)")


SPEC, Options = declared("compare", declare)


# -- reading the inputs -----------------------------------------------------------

def load(path: str, label: str) -> dict:
    """One input: {"label", "path", "schema", "kind", "doc", "warnings"}.
    The C reader opens it (so open errors are named as everywhere, and a
    pipe or "-" is copied once to a file of our own: tracefile.rereadable)
    and says from its header whether it is an opskew result ("schema") or a
    trace; a trace is then summarized in C, a result parsed as JSON. A
    folder `opskew profile` wrote is read as its report.json."""
    if profile_out.locate(path):
        doc, report = profile_out.load_run(path)
        return {"label": label, "path": path, "schema": profile_out.PROFILE_SCHEMA, "kind": "profile",
                "status": "complete", "doc": doc, "ops": profile_out.latest_ops(doc), "warnings": []}
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
    ops = [{o["name"]: o for o in (i["doc"].get("operators") or {}).get("ops", [])} for i in inputs]
    return figure_rows(inputs, [check_figures(i["doc"]) for i in inputs], short) + corrected_rows(ops)


def figure_rows(inputs: list, figs: list, short: dict) -> list:
    """One row per headline figure (figs: each input's name -> (unit, value,
    ci95, why none)), in A's order, then the others'."""
    rows = []
    for name in _order([{k: 0 for k in figs[0]}] + figs[1:], lambda _: 0):
        vals = [(f[name][1], f[name][2]) if name in f else (None, None) for f in figs]
        for i, f in zip(inputs, figs):
            _note_short(short, i["label"], f[name][3] if name in f else None)
        unit = next(f[name][0] for f in figs if name in f)
        rows.append(_row(name, unit, vals))
    return rows


def corrected_rows(ops: list) -> list:
    """Per operator (ops: each input's name -> verdict row), its corrected
    self and total with W's interval, shown and never tested: see
    NO_TEST_VERDICT."""
    rows = []
    for name in _order(ops, lambda o: o["reported_self_ns"]):
        for fig in ("self", "total"):
            vals = []
            for m in ops:
                c = m[name][f"corrected_{fig}_ns"] if name in m else None
                vals.append((c["median"], c.get("ci95")) if c else (None, None))
            rows.append(_row(f"corrected {fig}: {name}", "ns", vals, operator=name, test=False))
    return rows


def profile_figures(doc: dict) -> dict:
    """name -> (unit, value, ci95 or None, why none), the headline figures of
    an `opskew profile` run: its final W (every pair) where stop() made one,
    else the latest cycle's."""
    f = doc.get("final") or doc.get("report") or {}
    w = f.get("w_ns") if isinstance(f.get("w_ns"), dict) else {}
    out = {}
    if f.get("corrected_step_ns") is not None:
        band = {"ci95": f.get("corrected_step_w_ci_ns"), "ci_coverage": w.get("ci_coverage")}
        out["corrected step"] = ("ns", f["corrected_step_ns"], *_ci95(band))
    if w.get("median") is not None:
        out["W per event"] = ("ns", w["median"], *_ci95(w))
    for name, key, unit in (("profiled step", "active_step_ns", "ns"), ("wait step", "baseline_step_ns", "ns"),
                            ("inflation", "inflation", "ratio"), ("pairs", "pairs", "count")):
        if f.get(key) is not None:
            out[name] = (unit, f[key], None, None)
    return out


# What compare says of a profile run's figures: the corrected step's interval
# is W's, carried to the step, so "yes" says the difference lies beyond both.
PROFILE_SIGNIFICANCE = (
    "W per event: yes when the two 95% intervals do not overlap (conservative); corrected step: yes when "
    "the two runs' intervals do not overlap, i.e. the difference lies beyond both, each interval being the "
    "step corrected at its run's W 95% interval ends (W's uncertainty, not the spread of steps); n/a for the "
    "steps as profiled and in the wait steps (medians, no interval kept); "
    + NO_TEST_VERDICT.replace("the verdict's", "the latest cycle's"))


def profile_rows(inputs: list, short: dict) -> list:
    """The run's figures, then per operator the latest cycle's corrected
    self and total (report.json's report.operators.ops)."""
    # Each run's ProfilerStep#N are its steps, numbered by its schedule: the
    # corrected step compares them.
    ops = [{o["name"]: o for o in i["ops"] if not STEP_RANGE.match(o["name"])} for i in inputs]
    return figure_rows(inputs, [profile_figures(i["doc"]) for i in inputs], short) + corrected_rows(ops)


STEP_RANGE = re.compile(r"ProfilerStep#\d+$")


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


# The row of each kind that runs no profiler at all: its change is the
# machine's drift between the runs, not a finding.
DRIFT_ROW = {"check": "baseline / iteration", "profile": "wait step"}
DRIFT_TEXT = ("; {name}: the machine's drift (no profiler runs in it), not a finding: never called significant, "
              "and each other time shows its change over that drift too")


def apply_drift(rows: list, name: str) -> bool:
    """Marks the uninstrumented row `name` as the machine's drift (row
    "drift": true; its changes' "significant" null, "drift": the ratio) and
    gives every other time row (unit ns) each later input's change over it
    ("drift_scaled_change": ratio / drift - 1, null where either is
    unknown): what a machine that ran x% slower would have moved anyway.
    Counts and ratios (inflation: profiled over baseline already) are left
    as they are. False where no row is `name`."""
    base = next((r for r in rows if r["name"] == name), None)
    if base is None:
        return False
    base["drift"] = True
    drift = []
    for c in base["changes"]:
        c["significant"] = None
        c["drift"] = c["ratio"]
        drift.append(c["ratio"])
    for r in rows:
        if r is base or r["unit"] != "ns":
            continue
        for c, d in zip(r["changes"], drift):
            c["drift_scaled_change"] = c["ratio"] / d - 1 if c["ratio"] is not None and d else None
    return True


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
    if i["kind"] == "profile":
        return [] if profile_figures(doc) or i["ops"] else ["no step was profiled: it has nothing to compare"]
    figures = (check_figures(doc) or (doc.get("operators") or {}).get("ops") if i["kind"] == "check"
               else [r for r in doc.get("rows", []) if r.get("in_window_per_event_ns")])
    return [] if figures else [f"no {i['kind']} figures: it has nothing to compare"]


# -- compute -------------------------------------------------------------------------

def compute(args) -> dict:
    """The comparison (schema opskew.compare/1); prints nothing. An input
    that ended early has status "truncated" in its "inputs" entry (the
    command line then exits 5: exit_code)."""
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
    elif kind == "profile":
        rows = profile_rows(inputs, short)
        sig = PROFILE_SIGNIFICANCE
    elif kind == "check":
        rows = check_rows(inputs, short)
        sig = ("yes when the two 95% intervals do not overlap (conservative), n/a where a figure has none; "
               + NO_TEST_VERDICT)
    else:
        rows = matrix_rows(inputs, short)
        sig = "yes when the two 95% intervals do not overlap (conservative)"
    if kind in DRIFT_ROW and apply_drift(rows, DRIFT_ROW[kind]):
        sig += DRIFT_TEXT.format(name=DRIFT_ROW[kind])
    sig += short_text(short)
    warnings = [f"{i['label']} ({i['path']}): {w}" for i in inputs for w in i["warnings"] + empty_warning(i)]
    result = {
        "schema": SCHEMA, "kind": kind,
        "metric": args.metric if kind in ("operators", "correct") else None,
        "inputs": [{"label": i["label"], "path": i["path"], "schema": i["schema"], "status": i["status"]}
                   for i in inputs],
        "significance": sig, "top": args.top, "rows": rows, "warnings": warnings,
    }
    return result


def exit_code(result: dict) -> int:
    """EXIT_TRUNCATED where an input ended early, else EXIT_OK."""
    if any(i["status"] == "truncated" for i in result["inputs"]):
        return EXIT_TRUNCATED
    return EXIT_OK
