"""What `opskew profile -o OUT` wrote, read back for the commands that come
after it: `opskew summary OUT` (the run, per cycle, raw and corrected),
`opskew compare OUT1 OUT2` (two runs side by side) and the W that `summary
--corrected` and `correct` take with `--from OUT`. Reads report.json only:
every figure here is one the run measured; the traces are pointed to, not
read again."""

from __future__ import annotations

import json
import os

from opskew.errors import UsageError
from opskew.results.profile import SORT_KEYS, run_summary
from opskew.stats.costmodel import prices
from opskew.stats.notes import note

PROFILE_SCHEMA = "opskew.profile/1"
JOB_SCHEMA = "opskew.profile.job/1"
REPORT = "report.json"

def _schema_of(path: str):
    """The "schema" of a small JSON file, None when it is not one (a trace:
    only its first bytes are looked at)."""
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.lstrip().startswith(b"{") or b'"schema"' not in head:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as exc:
        if b'"opskew.profile' in head:
            # An `opskew profile` report that does not read (cut short, edited):
            # say so, rather than take its folder for a folder of traces.
            raise UsageError(f"{path}: an `opskew profile` report that does not read as JSON "
                             f"({type(exc).__name__}: {exc})") from None
        return None
    return doc.get("schema") if isinstance(doc, dict) else None


def locate(path) -> tuple | None:
    """(schema, report.json's path) where `path` is a folder `opskew profile`
    wrote or its report.json (a run's, a job's, or a rank's report.rankR.json),
    else None."""
    if path is None or path == "-":
        return None
    path = os.fspath(path)
    report = os.path.join(path, REPORT) if os.path.isdir(path) else path
    if not os.path.isfile(report) or not report.endswith(".json"):
        return None
    schema = _schema_of(report)
    return (schema, report) if schema in (PROFILE_SCHEMA, JOB_SCHEMA) else None


def load_run(path) -> tuple:
    """(report.json's document, its path) of one process's run (schema
    opskew.profile/1). A job's report names its ranks' (report.rankR.json)."""
    found = locate(path)
    if found is None:
        raise UsageError(f"{path}: not a folder `opskew profile -o` wrote, nor its report.json (schema "
                         f"{PROFILE_SCHEMA})")
    schema, report = found
    if schema == JOB_SCHEMA:
        ranks = sorted(n for n in os.listdir(os.path.dirname(report) or ".") if n.startswith("report.rank"))
        raise UsageError(f"{report} is a torchrun job's report ({JOB_SCHEMA}); give one rank's report "
                         f"({', '.join(ranks) or 'report.rankR.json'} beside it)")
    with open(report, encoding="utf-8") as f:
        return json.load(f), report


def latest_ops(doc: dict) -> list:
    """The latest cycle's per-operator rows (report.json's report.operators.ops),
    [] where that cycle made none (W unknown, an error)."""
    return list(((doc.get("report") or {}).get("operators") or {}).get("ops") or [])


def summary(path, sort: str = "total") -> dict:
    """`opskew summary OUT`: the run (conditions, how it ended, its final W
    and corrected step), each cycle (step, W, where its raw and corrected
    traces are) and the latest cycle's operators, corrected (schema
    opskew.profile_summary/1). Reads report.json alone."""
    doc, report = load_run(path)
    if sort not in SORT_KEYS:
        raise UsageError(f"--sort {sort} for an opskew profile folder: one of {', '.join(SORT_KEYS)} (the "
                         "quantiles are a trace's: opskew summary TRACE)")
    return run_summary(doc, report, sort)


# -- the W a run measured for one of its traces (--from OUT) ----------------------

def _median(x):
    return x.get("median") if isinstance(x, dict) else x


def _same(a: str, b: str) -> bool:
    return bool(a and b) and os.path.realpath(a) == os.path.realpath(b)


def w_for_trace(out, trace) -> dict:
    """The prices (W with its interval and delta, per class) that the
    `opskew profile` run in `out` (its folder or report.json) measured for
    `trace`: the W that wrote that cycle's corrected trace (the run's final
    W where stop() corrected it again, else its cycle's own) where `trace`
    is one of the run's raw traces (by path, else by name), else the run's
    final W. {"prices": {"operator": ({median, ci95, ci_coverage}, delta),
    "python": ({median, ci95} or None, delta)}, "source": which, in words,
    "own_deltas", "w_below_zero_ns"}."""
    doc, report = load_run(out)
    reps = doc.get("reports") or []
    rep = next((r for r in reps if _same(r.get("raw_trace"), trace)), None)
    if rep is None and trace not in (None, "-"):
        rep = next((r for r in reps if r.get("raw_trace")
                    and os.path.basename(r["raw_trace"]) == os.path.basename(trace)), None)
    final = doc.get("final")
    if rep is not None and _median(rep.get("corrected_w_ns") or rep.get("w_ns")) is not None:
        w = rep.get("corrected_w_ns") or rep["w_ns"]
        which = (f"cycle {rep.get('cycle')}'s trace, " + (rep.get("corrected_with") or f"its cycle's W "
                                                          f"({rep.get('w_source')})"))
        src = rep
    elif final and _median(final.get("w_ns")) is not None:
        w, src = final["w_ns"], final
        which = ("the run's final W (" + (f"cycle {rep.get('cycle')} has no W of its own" if rep is not None
                                          else "no cycle of the run has this trace") + ")")
    else:
        raise UsageError(f"{report}: the run measured no W (no cycle completed with one, and no final W)")
    if not isinstance(w, dict):
        w = {"median": w, "ci95": None}
    if w.get("median") is None:
        raise UsageError(f"{report}: the run measured no W for this trace")
    # A median below 0 (the machine ran the paired wait steps slower than the
    # profiled ones): the run's own correction took it at 0, and so does
    # this one, which then writes the run's own corrected trace again.
    below = float(w["median"]) if w["median"] < 0 else None
    ci = w.get("ci95")
    if ci and None not in ci:  # a low end below 0 is taken at 0, as the run's own verdict takes it
        ci = [max(float(ci[0]), 0.0), max(float(ci[1]), 0.0)]
    wpy = next((p for p in (prices(d)["python"][0] for d in (src, rep or {}, final or {})) if p), None)
    if wpy is not None and not isinstance(wpy, dict):
        wpy = {"median": wpy}
    delta = prices(src)["operator"][1]
    delta = delta if delta is not None else prices(rep or {})["operator"][1]
    return {"prices": {
                "operator": ({"median": max(float(w["median"]), 0.0), "ci95": list(ci) if ci and None not in ci
                              else None, "ci_coverage": w.get("ci_coverage")}, float(delta or 0.0)),
                # (a report keeps the Python class's delta inside its W's dict)
                "python": (({"median": float(wpy["median"]),
                             "ci95": [max(float(x), 0.0) for x in wpy["ci95"]] if wpy.get("ci95") else None}
                            if wpy and wpy.get("median") is not None else None),
                           float(prices(wpy or {})["python"][1] or 0.0))},
            "own_deltas": len((rep or {}).get("op_deltas_ns") or {}), "w_below_zero_ns": below,
            "source": f"opskew profile {os.path.dirname(os.path.abspath(report))}: {which}"}


def own_delta_notes(m: dict) -> list:
    """What a correction with w_for_trace's `m` leaves out of the run's own."""
    n = m.get("own_deltas") or 0
    out = [note("own_deltas_not_taken", leaves=n)] if n else []
    if m.get("w_below_zero_ns") is not None:
        out.append(note("w_below_zero_taken_at_0", w_ns=m["w_below_zero_ns"]))
    return out
