"""`opskew profile`: its options (SPEC), their checks, what its child is
told (boot_spec), and what a finished run's files say (finished): which
reports the run wrote, the job report and job summary of a multi-rank run,
each rank's picture. The computation; the text is
opskew.render.profile_run's, the command line (which starts the script,
opskew/_entry/profile_boot.py, and forwards signals to it)
opskew.cli.commands.profile's."""

from __future__ import annotations

import json
import os

from opskew.analyze.job import PROFILE_TRACES, rank_reports
from opskew.analyze.job import compute as summarize_job
from opskew.analyze.tracefile import CORRECTED_DIR
from opskew.errors import UsageError
from opskew.options import REMAINDER, Spec, declared, finite_float
from opskew.output import write_file
from opskew.results.profile import ProfileResult
from opskew.stats.pricing import ADVISED_SCHEDULE
from opskew.vocab import PROFILER_OPTIONS

JOB_SCHEMA = "opskew.profile.job/1"
SCHEDULE = ("wait", "warmup", "active", "repeat", "skip_first")
_OPTIONS = PROFILER_OPTIONS


def declare(p: Spec) -> None:
    p.add_argument("-o", "--output-dir", default="opskew-profile", metavar="OUT",
                   help="folder for the traces and report.json (default: %(default)s)")
    g = p.add_argument_group("schedule (torch.profiler.schedule)")
    g.add_argument("--wait", type=int, default=ADVISED_SCHEDULE["wait"], metavar="N",
                   help="unrecorded steps before each cycle: the baseline; each serves one pair, the first 2 "
                        "after a trace are cold, the next 5 run under opskew's tracer (each leaf's own delta, "
                        "from a wait of 21) and the last 6 are paired (default %(default)s; 14 is enough for W)")
    g.add_argument("--warmup", type=int, default=ADVISED_SCHEDULE["warmup"], metavar="N", help="default %(default)s")
    g.add_argument("--active", type=int, default=ADVISED_SCHEDULE["active"], metavar="N",
                   help="recorded steps per cycle (default %(default)s)")
    g.add_argument("--repeat", type=int, default=ADVISED_SCHEDULE["repeat"], metavar="N",
                   help="cycles (0: until the script ends; default %(default)s)")
    g.add_argument("--skip-first", type=int, default=ADVISED_SCHEDULE["skip_first"], metavar="N",
                   help="steps before the first cycle, unrecorded: the loop warms up (allocator, caches) and "
                        "the last of them join the first baseline (default %(default)s)")
    o = p.add_argument_group("profiler options (torch.profiler.profile's)")
    for name in _OPTIONS:
        o.add_argument("--" + name.replace("_", "-"), action="store_true", dest=name)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                   help="cuda: record CUDA activity too, and synchronize at each step boundary "
                        "(default: %(default)s)")
    p.add_argument("--step-marker", metavar="NAME",
                   help="steps end where each record_function(NAME) ends, instead of at optimizer steps")
    p.add_argument("--threshold", type=finite_float, default=0.05,
                   help="in-window slowdown that counts as skew (default: %(default)s)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="print each cycle's every figure (default: its answer, W, the verdict, each note once; "
                        "report.json keeps everything either way)")
    p.add_argument("cmd", nargs=REMAINDER, metavar="-- COMMAND",
                   help="python [options] (SCRIPT | -c CODE | -m MODULE) [ARGS], or torchrun [OPTIONS] SCRIPT [ARGS]")


SPEC, Options = declared("profile", declare)


def validate(opts) -> None:
    """The schedule's refusals (UsageError, exit 2), before anything runs."""
    for name in ("wait", "warmup", "skip_first", "repeat"):
        if getattr(opts, name) < 0:
            raise UsageError(f"--{name.replace('_', '-')} must be 0 or more")
    if opts.active < 1:
        raise UsageError("--active must be 1 or more")
    if opts.wait < 1:
        raise UsageError("--wait must be 1 or more: the wait steps are the baseline W is measured against")


def boot_spec(opts, out: str) -> dict:
    """What the script's opskew.profile is told (OPSKEW_PROFILE_SPEC, read
    by opskew/_entry/profile_boot.py)."""
    return {"out": out, "device": opts.device, "step_marker": opts.step_marker, "threshold": opts.threshold,
            "verbose": opts.verbose,
            "schedule": {k: getattr(opts, k) for k in SCHEDULE},
            "options": {k: getattr(opts, k) for k in _OPTIONS}}


def reports(out: str) -> list:
    """The names of opskew profile's reports in `out`: report.json and each
    rank's report.rankR.json (in the folder's order)."""
    try:
        names = os.listdir(out)
    except OSError:
        return []
    return [n for n in names if n == "report.json" or (n.startswith("report.rank") and n.endswith(".json"))]


def stamps(out: str) -> dict:
    """Each report's identity and time stamp: taken before the run, what
    fresh() compares against."""
    return {n: _stamp(os.path.join(out, n)) for n in reports(out)}


def fresh(out: str, before: dict) -> list:
    """The reports in `out` that the run wrote (not as `before`, stamps()'s)."""
    return [n for n in reports(out) if _stamp(os.path.join(out, n)) != before.get(n)]


def _stamp(path: str):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns)


def _rank_key(name: str):
    digits = name[len("report.rank"):-len(".json")]
    return int(digits) if digits.isdigit() else -1


def read_report(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def traces(doc: dict) -> int:
    """A run's traces: report.json keeps the latest cycles' reports and
    counts the earlier ones (earlier_reports)."""
    return len(doc.get("reports") or []) + (doc.get("earlier_reports") or 0)


def run_part(report: str, doc: dict | None) -> dict:
    """A single process's run, as its report.json (`doc`, None where it
    could not be read back) at `report` says it: with its trace count and
    where its traces lie."""
    where = os.path.join(os.path.dirname(report), PROFILE_TRACES)
    return {"report": report, "doc": doc, "traces": traces(doc) if doc is not None else None,
            "traces_dir": where, "corrected_dir": os.path.join(where, CORRECTED_DIR)}


def finished(out: str, fresh_names: list) -> dict:
    """What a finished `opskew profile` run left in `out`, `fresh_names` the
    reports it wrote (fresh()): one process's report.json (`run`, with its
    picture, report.png), or a torchrun job's per-rank reports, gathered
    here into the job report (report.json, schema opskew.profile.job/1:
    `job`) and the job summary of their raw traces (job-summary.json:
    `job_summary`), with each rank's picture (report.rankR.png). Writes
    those files; prints nothing. A picture or a job summary that fails is
    said in the document; the run's own outputs stand."""
    names = sorted(fresh_names, key=_rank_key)
    doc = {"out": out, "written": bool(names), "fresh": names, "run": None, "job": None, "job_report": None,
           "job_summary": None, "pictures": []}
    if not names:
        return doc
    if "report.json" in names:
        path = os.path.join(out, "report.json")
        doc["run"] = run_part(path, read_report(path))
        _picture(doc["pictures"], out, doc["run"]["doc"], "report.png")
        return doc
    doc["job_report"] = os.path.join(out, "report.json")
    doc["job"] = job_report(out, names)
    write_file(doc["job_report"], json.dumps(doc["job"], indent=1))
    doc["job_summary"] = job_summary(out, names)
    for n, rank_doc in rank_reports(out, names):
        _picture(doc["pictures"], out, rank_doc, n[: -len(".json")] + ".png")
    return doc


def job_report(out: str, names: list) -> dict:
    """The job's report (schema opskew.profile.job/1): each rank's W,
    interval, inflation and traces, from its report.rankR.json in `out`
    (`names`: those of this run)."""
    ranks = []
    for n, doc in rank_reports(out, names):
        last = doc.get("final") or doc.get("report") or {}
        ranks.append({"rank": doc.get("rank"), "report": n, "w_ns": last.get("w_ns"),
                      "w_source": last.get("w_source", "in-run"), "inflation": last.get("inflation"),
                      "pairs": last.get("pairs"), "verdict": (doc.get("report") or {}).get("verdict"),
                      "traces": traces(doc),
                      "ended_by": doc.get("ended_by"),
                      "step_source": doc.get("step_source")})
    return {"schema": JOB_SCHEMA, "world_size": len(ranks), "ranks": ranks,
            "note": "each rank's W is measured on that rank; under collectives a rank's active steps include "
                    "waiting for slower ranks, so a rank's W carries the instrument cost of the ranks it waits "
                    "for too (docs/profile.md)"}


def job_summary(out: str, names: list) -> dict:
    """`opskew summary` of this job's raw traces (those its ranks' reports
    name), written as job-summary.json in `out`: {"path", "doc" (schema
    opskew.job_summary/1), "error" (why there is none, else None),
    "earlier" (the most cycles a rank's report no longer lists)}. A
    failure to summarize is said, not raised: the job's traces and reports
    stand."""
    paths, earlier = [], 0
    for _, doc in rank_reports(out, names):
        paths += [r["raw_trace"] for r in doc.get("reports") or [] if r.get("raw_trace")
                  and os.path.isfile(r["raw_trace"])]
        earlier = max(earlier, doc.get("earlier_reports") or 0)
    path = os.path.join(out, "job-summary.json")  # a foreign one was refused before the run
    found = {"path": path, "doc": None, "error": None, "earlier": earlier}
    try:
        found["doc"] = summarize_job(paths)
    except Exception as exc:  # noqa: BLE001 - the job's own outputs stand
        found["error"] = str(exc)
        return found
    write_file(path, json.dumps(found["doc"], indent=1))
    return found


def _picture(pictures: list, out: str, doc: dict | None, name: str) -> None:
    """The latest cycle's picture (ProfileResult.plot: its operators,
    reported against corrected, and W per cycle) as OUT/NAME, appended to
    `pictures` as {"path", "missing" (matplotlib absent: why), "failed"
    (another failure: its type and text)}. Never fails the run."""
    if not doc or not doc.get("report"):
        return
    path = os.path.join(out, name)
    entry = {"path": path, "missing": None, "failed": None}
    try:
        ProfileResult(doc).plot(path)
    except ImportError as exc:
        entry["missing"] = str(exc)
    except Exception as exc:  # noqa: BLE001 - the run's traces and report stand
        entry["failed"] = f"{type(exc).__name__}: {exc}"
    pictures.append(entry)
