"""A multi-rank job's traces together: `opskew summary DIR` (docs/multirank.md).

Finds each rank's traces (torch.profiler's, or those `opskew profile` wrote
under torchrun), says which rank each belongs to, gathers the ranks' own W
when `opskew profile` measured it, and hands everything to the C job
summary (include/opskew_job.h), which reads every trace once, streaming:
per-rank and merged tables, steps, collectives matched across ranks, clock
offsets, and TAU's cross-rank correction. Nothing here loops over events.
"""

from __future__ import annotations

import json
import os
import re
import statistics

from opskew import _reader
from opskew.analyze.tracefile import (DEFAULT_EXCLUDED, correct, corrected_candidates, corrected_path, is_corrected_name,
                                      raise_unless_read, scan)
from opskew.analyze.verdict import own_deltas, with_deltas
from opskew.errors import UsageError, from_c_error
from opskew.output import check_output
from opskew.results.views import lazy
from opskew.stats.costmodel import FIELDS, CostModel, prices
from opskew.stats.notes import note
from opskew.stats.pricing import COLD_MAX_SCALE, cold_w_scale

corrected_note = lazy("trace_notes.corrected_note")

SCHEMA = "opskew.job_summary/1"

_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
_CYCLE_IN_NAME = re.compile(r"cycle(\d+)")
_TRACE_SUFFIXES = (".json", ".json.gz")
# Where opskew profile puts its raw traces in OUT (their corrected ones in
# OUT/traces/corrected, tracefile.corrected_path), apart from its reports:
# a folder of traces alone is what HTA reads as one trace per rank.
PROFILE_TRACES = "traces"


def _natural(name: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def trace_files(paths: list) -> list:
    """The trace files among `paths`: files as given; a directory's *.json and
    *.json.gz, less opskew's own corrected traces and reports; a directory
    opskew profile wrote (its raw traces in OUT/traces) is read there."""
    out = []
    for p in paths:
        if p == "-":
            raise UsageError("a job summary reads each trace twice: give files or a directory, not '-'")
        if os.path.isdir(p):
            found = _traces_in(p)
            if not found and os.path.isdir(os.path.join(p, PROFILE_TRACES)):
                found = _traces_in(os.path.join(p, PROFILE_TRACES))
            if not found:
                raise UsageError(f"{p}: is a directory with no trace files (*.json, *.json.gz) in it; a "
                                 "directory is read as a multi-rank job's traces")
            out.extend(found)
        else:
            out.append(p)
    return out


def _traces_in(folder: str) -> list:
    names = sorted(os.listdir(folder), key=_natural)
    return [os.path.join(folder, n) for n in names
            if n.endswith(_TRACE_SUFFIXES) and not is_corrected_name(n) and not n.startswith("report")
            and n != "job-summary.json" and os.path.isfile(os.path.join(folder, n))]


def identify(path: str) -> dict:
    """Rank, host and cycle of one trace, from its header (Kineto's
    distributedInfo and host_name, read by the C reader up to traceEvents)
    or, failing that, from its name (rankN, cycleN)."""
    head = scan(path, header_only=True)
    info = (head.get("objects") or {}).get("distributedInfo")
    info = info if isinstance(info, dict) else {}  # top-level arrays are kept too: only an object has a rank
    rank = info.get("rank") if isinstance(info.get("rank"), int) else None
    name = os.path.basename(path)
    if rank is None:
        m = _RANK_IN_NAME.search(name)
        rank = int(m.group(1)) if m else None
    cycle = _CYCLE_IN_NAME.search(name)
    schema = (head.get("metadata") or {}).get("schema")
    not_trace = (isinstance(schema, str) and schema.startswith("opskew.")
                 and not head["stats"].get("header_only_stopped"))
    return {"path": path, "rank": rank, "host": (head.get("metadata") or {}).get("host_name"),
            "not_trace": not_trace,
            "world_size": info.get("world_size"), "cycle": int(cycle.group(1)) if cycle else None,
            "base_ns": (head.get("metadata") or {}).get("baseTimeNanoseconds")}


def rank_reports(folder: str, names=None) -> list:
    """[(name, document)] of opskew profile's per-rank reports in `folder`
    (report.rankR.json; `names`: only those), in rank order; unreadable ones
    are left out."""
    if names is None:
        try:
            names = [n for n in os.listdir(folder) if re.fullmatch(r"report\.rank\d+\.json", n)]
        except OSError:
            return []
    out = []
    for n in sorted(names, key=_natural):
        try:
            with open(os.path.join(folder, n), encoding="utf-8") as f:
                out.append((n, json.load(f)))
        except (OSError, ValueError):
            continue
    return out


def _reports_w(folders: set) -> dict:
    """rank -> (W, W_py, where) from opskew profile's report.rankR.json in
    the given folders: the run's final W (else the last cycle's)."""
    found = {}
    # opskew profile's reports lie in OUT, above its traces (OUT/traces).
    folders = set(folders) | {os.path.dirname(d) for d in folders if os.path.basename(d) == PROFILE_TRACES}
    for d in sorted(folders):
        for n, doc in rank_reports(d):
            m = re.fullmatch(r"report\.rank(\d+)\.json", n)
            last = doc.get("final") or doc.get("report") or {}
            # W_own (by the rank's CPU time: its own cost, without the time
            # it waited for others), else W by the clock (an upper bound).
            own = (last.get("w_own_ns") or {}).get("median")
            w = own if isinstance(own, (int, float)) else (last.get("w_ns") or {}).get("median")
            wpy = prices(doc.get("report") or {})["python"][0]
            wpy = wpy.get("median") if isinstance(wpy, dict) else wpy
            if isinstance(w, (int, float)):
                found[int(m.group(1))] = (max(float(w), 0.0), max(float(wpy or 0.0), 0.0), os.path.join(d, n),
                                          "W_own" if isinstance(own, (int, float)) else "W")
    return found


def parse_costs(specs: list) -> dict:
    """--w values: 'NS' (every rank), 'R=NS' or 'R=NS,PY_NS'."""
    costs = {}
    for s in specs or []:
        rank, _, val = s.rpartition("=")
        parts = val.split(",")
        try:
            w = float(parts[0])
            wpy = float(parts[1]) if len(parts) > 1 else 0.0
            key = int(rank) if rank else "*"
        except ValueError:
            raise UsageError(f"--w {s!r}: expected NS, RANK=NS or RANK=NS,PY_NS") from None
        if not (w >= 0 and wpy >= 0) or len(parts) > 2 or w == float("inf") or wpy == float("inf"):
            raise UsageError(f"--w {s!r}: costs are finite ns >= 0")
        costs[key] = (w, wpy)
    return costs


def compute(paths: list, *, costs=None, align: str = "auto", categories=None) -> dict:
    """The job summary document (schema opskew.job_summary/1)."""
    files = trace_files(paths)
    ids = [identify(p) for p in files]
    # opskew's own JSON results (a --json written beside the traces) are not traces.
    ids = [i for i in ids if not i["not_trace"]]
    files = [i["path"] for i in ids]
    if not ids:
        raise UsageError("no traces to summarize: " + ", ".join(paths))
    unknown = [i["path"] for i in ids if i["rank"] is None]
    if unknown:
        one = (f" (a single trace: opskew summary {unknown[0]})" if len(files) == 1 else
               " (one process's traces, a tensorboard_trace_handler folder of its cycles, say: summarize "
               "each file, opskew summary FILE, or compare two, opskew compare A B)")
        raise UsageError(f"cannot tell the rank of {unknown[0]}: it has no distributedInfo (torch.distributed "
                         "was not initialized when it was recorded) and no 'rankN' in its name; a directory or "
                         f"several traces are summarized as a multi-rank job{one}")
    by_rank: dict = {}
    for i in ids:
        by_rank.setdefault(i["rank"], []).append(i)
    if len(by_rank) < 2:
        raise UsageError(f"a job summary needs traces of 2 ranks or more; these are all rank "
                         f"{next(iter(by_rank))} (for one trace: opskew summary TRACE)")
    for r in by_rank.values():  # segments in order: cycle number, else the recording's base time, else name
        r.sort(key=lambda i: (i["cycle"] if i["cycle"] is not None else -1,
                              i["base_ns"] if isinstance(i["base_ns"], int) else 0, _natural(i["path"])))
    counts = {len(v) for v in by_rank.values()}
    hosts = {i["host"] for i in ids if i["host"]}
    apply = align == "on" or (align == "auto" and len(hosts) > 1)
    given = parse_costs(costs)
    from_reports = (_reports_w({os.path.dirname(os.path.abspath(i["path"])) for i in ids})
                    if "*" not in given else {})
    rank_costs, cost_source = {}, {}
    for r in by_rank:  # a rank's own --w, else --w for every rank, else its report
        if r in given or "*" in given:
            rank_costs[r] = given.get(r, given.get("*"))
            cost_source[r] = "--w"
        elif r in from_reports:
            rank_costs[r] = from_reports[r][:2]
            cost_source[r] = f"{from_reports[r][3]} of {from_reports[r][2]}"
    sources = [(r, i["path"]) for r in sorted(by_rank) for i in by_rank[r]]
    cats = list(categories) if categories else None
    result = _reader.job(sources, costs=rank_costs or None, align=apply, categories=cats,
                         exclude_categories=None if cats else list(DEFAULT_EXCLUDED))
    if "ranks" not in result:  # a trace could not be read at all: the C says which
        bad = by_rank.get(result.get("failed_rank")) or [{}]
        path = bad[min(result.get("failed_source", 0), len(bad) - 1)].get("path", "a trace")
        raise_unless_read(result, path, f"trace {path}")
        raise from_c_error(result["error"]["number"], "job summary", message=result["error"]["message"])
    for rk in result["ranks"]:  # invalid JSON part way: refused as for one trace
        for i, src in zip(by_rank[rk["rank"]], rk["sources"]):
            raise_unless_read(src, i["path"], f"trace {i['path']}")
    notes, warnings = [], []
    for rk in result["ranks"]:
        for i, src in zip(by_rank[rk["rank"]], rk["sources"]):
            if src["status"] == "truncated":
                warnings.append(f"rank {rk['rank']}: {i['path']} ended early ({src['error']['message']}): "
                                "what was read before is used")
    unknown_w = sorted(r for r in given if r != "*" and r not in by_rank)
    if unknown_w:
        notes.append(note("w_for_absent_ranks", ranks=unknown_w))
    if len(counts) > 1:
        notes.append(note("trace_counts_differ"))
    if len(hosts) > 1 and not apply:
        notes.append(note("hosts_unaligned", hosts=len(hosts)))
    if rank_costs and len(rank_costs) < len(by_rank):
        notes.append(note("no_cross_rank_correction", ranks=sorted(rank_costs)))
    if any(r in from_reports and from_reports[r][3] == "W" for r in rank_costs if cost_source[r] != "--w"):
        notes.append(note("w_by_clock_upper_bound"))
    if result["family"] == "none":
        notes.append(note("no_collective_family"))
    elif result["unmatched"]:
        notes.append(note("collectives_unmatched", collectives=result["unmatched"]))
    ranks = result["ranks"]
    for rk in ranks:
        rk["files"] = [i["path"] for i in by_rank[rk["rank"]]]
        rk["host"] = by_rank[rk["rank"]][0]["host"]
        rk["w_source"] = cost_source.get(rk["rank"])
        durs = [s["dur_ns"][ranks.index(rk)] for s in result["steps"]
                if s["dur_ns"][ranks.index(rk)] is not None]
        rk["step_median_ns"] = statistics.median(durs) if durs else None
        if result["corrected"]:
            cor = [s["corrected_ns"][ranks.index(rk)] for s in result["steps"]
                   if s["dur_ns"][ranks.index(rk)] is not None]
            rk["corrected_step_median_ns"] = statistics.median(cor) if cor else None
    return {
        "schema": SCHEMA,
        "traces": files,
        "status": result["status"],
        "error": result["error"],
        "world_size": len(ranks),
        "hosts": sorted(hosts),
        "family": result["family"],
        "matched": result["matched"],
        "unmatched": result["unmatched"],
        "aligned": result["aligned"],
        "corrected": result["corrected"],
        "ranks": ranks,
        "merged": result["merged"],
        "steps": result["steps"],
        "collectives": result["collectives"],
        "stragglers": stragglers(result),
        "notes": notes,
        "warnings": warnings,
    }


def _cycle_reports(files: list) -> dict:
    """realpath of a raw trace -> the opskew.profile report of its cycle,
    from the report.rankR.json files beside the traces (their latest
    cycles); a trace whose cycle is not there gets the report opskew.profile
    put in the corrected trace it wrote beside it, if any (_cycle_report)."""
    found = {}
    for d in sorted({os.path.dirname(os.path.abspath(f)) for f in files}):
        # report.rankR.json under torchrun, report.json for one process; in
        # the folder above OUT/traces where opskew profile wrote them.
        up = os.path.dirname(d) if os.path.basename(d) == PROFILE_TRACES else None
        docs = rank_reports(d) + rank_reports(d, ["report.json"])
        if up:
            docs += rank_reports(up) + rank_reports(up, ["report.json"])
        for _, doc in docs:
            for r in (doc.get("reports") or []) if isinstance(doc, dict) else []:
                raw = r.get("raw_trace") if isinstance(r, dict) else None
                if isinstance(raw, str):
                    # A relative path is the profiled script's; the trace lies in d.
                    path = raw if os.path.isabs(raw) else os.path.join(d, os.path.basename(raw))
                    found[os.path.realpath(path)] = r
    return found


def _cycle_report(src: str, found: dict) -> dict | None:
    rep = found.get(os.path.realpath(src))
    if rep is not None:
        return rep
    cor = next((c for c in corrected_candidates(src) if os.path.isfile(c)), None)
    if cor is None:
        return None
    try:
        run = (scan(cor, header_only=True).get("objects") or {}).get("opskew", {}).get("run")
    except Exception:  # noqa: BLE001 - an unreadable neighbour only loses the spans
        return None
    return run if isinstance(run, dict) and run.get("raw_trace") else None


def job_spans(rep: dict | None, model) -> dict | None:
    """The spans opskew.profile's own correction of a cycle's trace passed
    (docs/profile.md): each ProfilerStep#N held to the body opskew timed
    (the report's step_spans_ns) and, where the cycle's report priced its
    cold first step, that step's events at a scale on W (and the other
    active steps at their position's scale),
    recomputed for this cost model's W (the same extra over its instrument time,
    within the same COLD_MAX_SCALE); and each leaf's own delta where the
    report has them (op_deltas_ns). None without a report."""
    if not rep:
        return None
    spans = {k: float(v) for k, v in (rep.get("step_spans_ns") or {}).items() if isinstance(v, (int, float))}
    cold = rep.get("cold_step") or {}
    if cold.get("name") and (cold.get("w_scale") or 1.0) != 1.0:
        # The extra where the report priced it, and its cycle's own level.
        extra = cold.get("extra_ns") if cold.get("extra_priced", True) else 0.0
        f = cold.get("cycle_factor")
        scale = cold_w_scale(extra, cold, model, f if isinstance(f, (int, float)) and f > 0 else 1.0)
        if scale != 1.0 and 1 / COLD_MAX_SCALE <= scale <= COLD_MAX_SCALE:
            spans[cold["name"]] = (spans.get(cold["name"], -1.0), scale)
    for st in rep.get("position_steps") or []:  # priced by position: the same ratio to W
        sc = st.get("w_scale") if isinstance(st, dict) else None
        if st.get("name") and isinstance(sc, (int, float)) and sc > 0 and sc != 1.0:
            spans[st["name"]] = (spans.get(st["name"], -1.0), float(sc))
    own = rep.get("op_deltas_ns")
    if isinstance(own, dict) and own:
        try:  # each leaf's own delta, at its median (docs/method.md, "Each leaf's own delta")
            spans = with_deltas(spans, own_deltas(own), 0)
        except (TypeError, ValueError):
            pass  # a report edited by hand: every operator keeps the one delta
    return spans or None


def write_corrected(doc: dict, out_dir: str) -> list:
    """Each rank's traces corrected for its own instrument cost (its W, W_py)
    into out_dir, as NAME.corrected.json(.gz), with the times on rank 0's
    clock when the job's offsets were applied, and the rank's clock fit and
    cross-rank figures in the "opskew" metadata ("run": {"job": ...}). A
    trace opskew.profile wrote gets what its own correction got from the
    cycle's report: its `delta` (else 0), each ProfilerStep#N held to the
    body it timed, and the cold first step's price (job_spans). The
    recomputed waits stay in the job summary. Returns the paths."""
    if not doc["corrected"]:
        raise UsageError("--corrected-dir needs every rank's W (--w, or opskew profile's reports beside the "
                         "traces)")
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for rk in doc["ranks"]:
        clock = None
        if doc["aligned"] and rk is not doc["ranks"][0]:
            clock = (rk["clock_origin_ns"], rk["offset_ns"], rk["drift_ppm"] * 1e-6)
        meta = {"job": {"schema": SCHEMA, "rank": rk["rank"], "world_size": doc["world_size"],
                        **{FIELDS[c][0]: w for c, (w, _) in prices(rk).items()},  # each class's W
                        "w_source": rk["w_source"],
                        "clock": {"offset_ns": rk["offset_ns"], "drift_ppm": rk["drift_ppm"],
                                  "residual_ns": rk["residual_ns"], "points": rk["clock_points"],
                                  "applied": bool(clock), "reference_rank": doc["ranks"][0]["rank"]},
                        "own_ns": rk["own_ns"], "absorbed_ns": rk["absorbed_ns"],
                        "note": "corrected for this rank's own cost; the waits the others' costs caused are "
                                "in the job summary (docs/multirank.md)"}}
        found = _cycle_reports(rk["files"])
        for src in rk["files"]:
            # corrected_path's name (WORKER.corrected.TS.pt.trace.json for a
            # name TensorBoard's plugin lists), in out_dir.
            out = os.path.join(out_dir, os.path.basename(corrected_path(src)))
            check_output(out, inputs=[("an input trace", t) for t in doc["traces"]])
            rep = _cycle_report(src, found)
            d = rep.get("delta_ns") if rep else None
            delta = min(max(float(d), 0.0), rk["w_ns"]) if isinstance(d, (int, float)) else 0.0
            (w, _), (py_w, _) = prices(rk).values()
            model = CostModel.default(w, delta, py_w)
            spans = job_spans(rep, model)
            m = dict(meta["job"], delta_ns=delta, spans=spans,
                     cycle_report=(f"cycle {rep.get('cycle')} of opskew profile's report" if rep else None))
            about = corrected_note(model, source=src,
                                   by=f"rank {rk['rank']}'s own W in opskew summary of {doc['world_size']} "
                                      f"rank(s), from {rk['w_source']}")
            correct(src, model, out,
                    run_json=json.dumps({"about": about, "job": m}),
                    clock=clock, spans=spans)
            written.append(out)
    return written


def stragglers(result: dict) -> list:
    """Ranks that arrived last at collectives, by the lateness they caused
    (their arrival less the next latest one's), largest first. A straggler
    causes at least 1.5 times its fair share (1/ranks) of all the lateness:
    in a balanced job of 2 ranks each is last about half the time, by noise."""
    total = sum(r["lateness_ns"] for r in result["ranks"]) or 0.0
    n = result["matched"] or 0
    ranks = len(result["ranks"])
    rows = []
    for r in result["ranks"]:
        if not r["last_arrivals"]:
            continue
        share = r["lateness_ns"] / total if total else 0.0
        rows.append({"rank": r["rank"], "last_arrivals": r["last_arrivals"], "lateness_ns": r["lateness_ns"],
                     "share": share, "straggler": bool(n) and ranks > 1 and share >= 1.5 / ranks})
    return sorted(rows, key=lambda x: -x["lateness_ns"])
