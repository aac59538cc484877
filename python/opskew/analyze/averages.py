"""A corrected `key_averages()` (docs/profile.md, "A corrected
key_averages()"): the per-operator verdict's rows (opskew.analyze.verdict,
the C correction run at W's median and at its interval's ends) keyed as
torch's averaged table keys its rows, as a document (schema
opskew.averages/1) that opskew.results.averages reads.

From a cycle of opskew.profile (`from_report`: its report's rows, so the
two agree to the nanosecond) or from any trace (`from_trace`: W from a
calibration, as `opskew correct` finds it, or given).

Rows as torch keys them: one per name; the ProfilerStep#N ranges together
as "ProfilerStep*" (their times, interval ends and calls summed, their
mark made again by the verdict's rule); Python frames (with_stack) and the
names torch's table hides are left out (they are in the report). The C
correction's table is keyed by name alone, so no grouping by input shapes,
stack or overload name: those are refused, not approximated."""

from __future__ import annotations

import re
from types import SimpleNamespace

from opskew.analyze.correct import calibration_notes, choose_calibration, detect
from opskew.analyze.job import parse_costs
from opskew.analyze.tracefile import rereadable
from opskew.analyze.verdict import per_operator, trust_mark
from opskew.calibration.store import delta_range
from opskew.errors import UsageError
from opskew.results.averages import SCHEMA
from opskew.stats.costmodel import CostModel

STEP = re.compile(r"ProfilerStep#\d+$")

# The names torch's key_averages() leaves out (torch.autograd.profiler_util._filter_name).
HIDDEN = frozenset(("[memory]", "[OutOfMemory]", "profiler::_record_function_enter",
                    "profiler::_record_function_enter_new", "profiler::_record_function_exit", "aten::is_leaf",
                    "aten::output_nr", "aten::_version"))

# Events on a device's streams: torch's table gives them device time.
DEVICE_CATEGORIES = frozenset(("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"))


def refuse_grouping(group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False) -> None:
    """NotImplementedError for the groupings the corrected table cannot make."""
    why = []
    if group_by_input_shape:
        why.append("group_by_input_shape")
    if group_by_stack_n:
        why.append("group_by_stack_n")
    if group_by_overload_name:
        why.append("group_by_overload_name")
    if why:
        raise NotImplementedError(
            f"corrected_averages({'=..., '.join(why)}=...) is not supported yet: the C correction's "
            "per-operator table is keyed by name alone (no input shapes, stacks or overload names), and a "
            "per-name correction spread over shapes would be made up; key_averages() gives the reported rows "
            "grouped that way")


def mark_above(row: dict) -> None:
    """`row["above_reported"]` where it has figures above_reported
    (absent where none: a row that breaks nothing reads as before)."""
    above = above_reported(row)
    if above:
        row["above_reported"] = above


def above_reported(row: dict) -> list:
    """The figures ("self", "total") of a table's row whose corrected time
    (median) lies above the reported one by more than 2 ns a call and 0.5%:
    no instrument cost makes an event shorter, so the table marks them and
    says why (the time line's fit wrote them longer: their children's
    corrected times outlast them; docs/correct.md, "One time line")."""
    return [fig for fig in ("self", "total")
            if row[f"{fig}_ns"]["median"] - row[f"reported_{fig}_ns"]
            > max(2.0 * row["count"], 0.005 * row[f"reported_{fig}_ns"])]


def _one(o: dict) -> dict:
    row = {"key": o["name"], "names": [o["name"]], "count": o["calls"], "category": o.get("category", ""),
           "device": o.get("category") in DEVICE_CATEGORIES,
           "reported_self_ns": o["reported_self_ns"], "reported_total_ns": o["reported_total_ns"],
           "self_ns": o["corrected_self_ns"], "total_ns": o["corrected_total_ns"],
           "mark": o["mark"], "self_mark": o["marks"]["self"]}
    mark_above(row)
    return row


def _merged(key: str, ops: list, threshold: float) -> dict:
    """Rows of one key (the ProfilerStep#N ranges) as one: sums, the mark
    made again from them."""
    row = {"key": key, "names": [o["name"] for o in ops], "count": sum(o["calls"] for o in ops),
           "category": ops[0].get("category", ""), "device": ops[0].get("category") in DEVICE_CATEGORIES}
    for fig in ("self", "total"):
        c = [o[f"corrected_{fig}_ns"] for o in ops]
        row[f"reported_{fig}_ns"] = sum(o[f"reported_{fig}_ns"] for o in ops)
        row[f"{fig}_ns"] = {"median": sum(x["median"] for x in c),
                            "ci95": [sum(x["ci95"][0] for x in c), sum(x["ci95"][1] for x in c)]}
    marks = {fig: trust_mark(row[f"reported_{fig}_ns"], row[f"{fig}_ns"]["median"], *row[f"{fig}_ns"]["ci95"],
                             threshold) for fig in ("self", "total")}
    row["mark"], row["self_mark"] = marks["total"], marks["self"]
    mark_above(row)
    return row


def rows_of(ops: list, threshold: float) -> list:
    """The verdict's rows (per_operator's "ops") keyed as key_averages() keys them."""
    groups: dict = {}
    for o in ops:
        if o["python"] or o["name"] in HIDDEN:
            continue
        groups.setdefault("ProfilerStep*" if STEP.match(o["name"]) else o["name"], []).append(o)
    return [_one(g[0]) if len(g) == 1 and not STEP.match(g[0]["name"]) else _merged(k, g, threshold)
            for k, g in groups.items()]


def from_report(rep: dict) -> dict:
    """The document of a cycle's report (opskew.profile's): its per-operator
    rows, with the W they were corrected with (the run's final W where stop()
    corrected the trace again). ValueError where the report has none."""
    ops = (rep.get("operators") or {}).get("ops")
    if ops is None:
        why = (rep.get("error") or rep.get("fallback") or (rep.get("operators") or {}).get("ops_dropped")
               or "W is unknown")
        raise ValueError(f"cycle {rep.get('cycle')} has no corrected per-operator table: {why}")
    w = rep.get("corrected_w_ns") or rep["w_ns"]
    return {"schema": SCHEMA, "source": f"opskew.profile cycle {rep.get('cycle')}, W {rep.get('w_source')}"
            + (", the run's final W" if rep.get("corrected_w_ns") else ""),
            "trace": rep.get("raw_trace"), "w_ns": w, "delta_ns": rep.get("delta_ns"),
            "w_py_ns": rep.get("w_py_ns"), "own_deltas": len(rep.get("op_deltas_ns") or {}),
            "threshold": (rep.get("verdict") or {}).get("threshold", 0.05), "notes": [],
            "rows": rows_of(ops, (rep.get("verdict") or {}).get("threshold", 0.05))}


def given_w(w) -> dict:
    """W given as ns (no interval) or as {"median", "ci95": [lo, hi]}."""
    if isinstance(w, dict):
        m, ci = w.get("median"), w.get("ci95") or [w.get("median")] * 2
        out = {"median": m, "ci95": list(ci), "ci_coverage": w.get("ci_coverage")}
    else:
        out = {"median": w, "ci95": [w, w], "ci_coverage": None}
    vals = [out["median"], *out["ci95"]]
    if len(out["ci95"]) != 2 or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x < 1e6
                                        for x in vals) or not vals[1] <= vals[0] <= vals[2]:
        raise UsageError(f"W: ns >= 0 (below 1 ms), or {{'median': ns, 'ci95': [low, high]}} around it; not {w!r}")
    return {k: float(v) if k == "median" else v for k, v in out.items()}


def from_trace(path: str, *, calibration=None, w_ns=None, delta_ns=None, w_py_ns=None, threshold: float = 0.05,
               force: bool = False, waits: str = "auto", delta_py_ns=None, measure_calibration=None) -> dict:
    """The document of any trace: W given (`w_ns`, with `delta_ns` and
    `w_py_ns`, 0 where not given), else the calibration `opskew correct`
    would take (`calibration`: a file; else the cache's for this trace's
    configuration; with none stored, `measure_calibration(config)` measures
    and stores one where given: the command line's)."""
    with rereadable(path) as src:
        found = detect(src)
        if w_ns is not None:
            w, dr, notes = given_w(w_ns), None, []
            delta, wpy, dpy = float(delta_ns or 0.0), given_w(w_py_ns or 0.0), float(delta_py_ns or 0.0)
            source = "W given"
        else:
            cal = choose_calibration(SimpleNamespace(calibration=calibration, force=force,
                                                     measure_calibration=measure_calibration), found)
            c = cal["w_ns"]
            w = {"median": float(c["median"]), "ci95": list(c.get("ci95") or [c["median"]] * 2),
                 "ci_coverage": c.get("ci_coverage", 0.95 if c.get("ci95") else None)}
            if w["median"] < 0:
                raise UsageError(f"the calibration has a negative W ({w['median']:.1f} ns): recalibrate on a "
                                 "quieter machine")
            delta, dr = float(cal["delta_ns"]["median"]), delta_range(cal)
            p = cal.get("w_py_ns")
            wpy = {"median": p["median"], "ci95": list(p.get("ci95") or [p["median"]] * 2)} if p else None
            dpy = float((cal.get("delta_py_ns") or {}).get("median", 0.0))
            notes = calibration_notes(cal, found)
            source = f"calibration {cal.get('_path') or calibration or 'from the cache'}"
        v = per_operator(src, CostModel.default(w, delta, wpy, dpy), threshold=threshold,
                         waits={"auto": -1, "on": 1, "off": 0}[waits], delta_range=dr)
    return {"schema": SCHEMA, "source": source, "trace": path, "w_ns": w, "delta_ns": v["delta_ns"],
            "w_py_ns": wpy if wpy and wpy["median"] else None, "own_deltas": 0, "threshold": threshold,
            "detected": found, "notes": notes, "truncated": v["truncated"], "rows": rows_of(v["ops"], threshold)}


def cli_w(specs) -> tuple:
    """`opskew summary --corrected --w NS[,PY_NS]`: (W, W_py) in ns, or (None, None)."""
    costs = parse_costs(specs)
    if set(costs) - {"*"}:
        raise UsageError("--w with --corrected: NS or NS,PY_NS (RANK= is for a job)")
    return costs.get("*", (None, None))
