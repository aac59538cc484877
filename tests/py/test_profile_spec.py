"""`opskew profile` as the other commands are built (docs/design.md, "A
newcomer's test: where a change goes"): its options declared once
(opskew.analyze.profile_run.SPEC), its refusals there, and what a finished
run's files say computed by the library (profile_run.finished) without the
command line, its text by opskew.render.profile_run."""

import argparse
import json
import os
import re
import sys

import pytest
from conftest import help_entries, one_line_error, run_opskew

from opskew.analyze import profile_run as L
from opskew.cli.main import _subparser, build_parser
from opskew.errors import EXIT_USAGE, UsageError
from opskew.render import profile_run as text
from opskew.stats.pricing import ADVISED_SCHEDULE


def test_the_spec_declares_each_option_of_profile_help_once():
    flags = [f for o in L.SPEC.options for f in o.flags]
    assert len(flags) == len(set(flags)) and len(L.SPEC.by_dest()) == len(L.SPEC.options)
    sub = _subparser(build_parser(), "profile")
    acts = [a for a in sub._actions if not isinstance(a, argparse._HelpAction)]
    # The parser is the SPEC replayed: the same options, in order, with the
    # same flags, defaults and help.
    assert [a.dest for a in acts] == [o.dest for o in L.SPEC.options]
    for a, o in zip(acts, L.SPEC.options):
        assert tuple(a.option_strings) == (o.flags if a.option_strings else ()), o.flags
        assert a.default == o.default and a.help == o.kwargs.get("help") and a.choices == o.choices, o.flags
    # Every option `opskew profile --help` lists is declared there, once:
    # the flags that lead its option lines ("  -o OUT, --output-dir OUT  ...").
    helped, entries = help_entries("profile")
    listed = [f for ln in helped.splitlines() if re.match(r"  -", ln)
              for f in re.findall(r"(?:^|, )(--?[a-z][\w-]*)", ln.strip().split("  ")[0])]
    assert sorted(listed) == sorted([f for f in flags if f.startswith("-")] + ["-h", "--help"])
    assert "  -- COMMAND " in helped  # the positional: L.SPEC's "cmd"
    assert set(entries) <= set(listed) and "--threshold" in entries and "--record-shapes" in entries
    # The typed options' defaults are the command line's.
    opts = L.Options()
    assert {k: getattr(opts, k) for k in ADVISED_SCHEDULE} == ADVISED_SCHEDULE
    assert opts.output_dir == "opskew-profile" and opts.device == "cpu" and opts.threshold == 0.05
    parsed = vars(sub.parse_args(["--", "python", "x.py"]))
    assert {k: parsed[k] for k in L.SPEC.by_dest()} == dict(L.SPEC.defaults(), cmd=["--", "python", "x.py"])


REFUSALS = [
    (["--wait", "0"], "--wait must be 1 or more: the wait steps are the baseline W is measured against"),
    (["--active", "0"], "--active must be 1 or more"),
    (["--warmup", "-1"], "--warmup must be 0 or more"),
    (["--skip-first", "-1"], "--skip-first must be 0 or more"),
    (["--repeat", "-1"], "--repeat must be 0 or more"),
]


@pytest.mark.parametrize("args,message", REFUSALS)
def test_a_refusal_is_exit_2_with_its_message_from_the_library_and_the_command_line(tmp_path, args, message):
    parsed = _subparser(build_parser(), "profile").parse_args(args + ["--", "python", "x.py"])
    with pytest.raises(UsageError) as exc:
        L.validate(parsed)
    assert str(exc.value) == message and exc.value.exit_code == EXIT_USAGE == 2
    out = tmp_path / "out"
    p = run_opskew("profile", "-o", str(out), *args, "--", sys.executable, str(tmp_path / "none.py"))
    assert one_line_error(p, message) == f"opskew profile: {message}"
    assert not out.exists()
    # argparse's own refusal of the SPEC's type: the same line as before.
    p = run_opskew("profile", "--threshold", "nan", "--", sys.executable, "x.py")
    assert p.returncode == 2 and "argument --threshold: not a finite number: 'nan'" in p.stderr


def _x(name, cat, ts, dur, tid=1):
    return {"ph": "X", "name": name, "cat": cat, "pid": 10, "tid": tid, "ts": ts, "dur": dur}


def _rank_folder(out, ranks=2, earlier=0):
    """OUT as a 2-rank `opskew profile -- torchrun` leaves it: each rank's
    raw trace in OUT/traces and its report.rankR.json."""
    (out / "traces").mkdir(parents=True)
    for r in range(ranks):
        events = []
        for k in range(6):
            t = 1000.0 + 400.0 * k
            events += [_x(f"ProfilerStep#{k}", "user_annotation", t, 300.0),
                       _x("aten::add", "cpu_op", t + 10, 20.0 + 5 * r),
                       _x("gloo:all_reduce", "user_annotation", t + 200 - 30 * r, 40.0 + 30 * r)]
        trace = out / "traces" / f"opskew-profile-rank{r}-cycle1.pt.trace.json"
        trace.write_text(json.dumps({"distributedInfo": {"backend": "gloo", "rank": r, "world_size": ranks},
                                     "traceEvents": events}))
        w = {"median": 500.0 + 100 * r, "ci95": [400.0, 700.0 + 100 * r]}
        rep = {"cycle": 1, "raw_trace": str(trace), "w_ns": w, "pairs": 6, "inflation": 1.1,
               "verdict": {"skewed": False}}
        (out / f"report.rank{r}.json").write_text(json.dumps(
            {"schema": "opskew.profile/1", "rank": r, "world_size": ranks, "reports": [rep], "report": rep,
             "earlier_reports": earlier, "final": {"w_ns": w, "pairs": 6, "inflation": 1.1},
             "ended_by": "the script returned", "step_source": "the first optimizer that stepped (SGD)"}))


def test_finished_gives_the_job_document_without_the_command_line(tmp_path):
    out = tmp_path / "job"
    out.mkdir()
    before = L.stamps(str(out))
    _rank_folder(out, earlier=2)
    fresh = L.fresh(str(out), before)
    assert sorted(fresh) == ["report.rank0.json", "report.rank1.json"]
    doc = L.finished(str(out), fresh)
    assert doc["written"] and doc["run"] is None and doc["fresh"] == ["report.rank0.json", "report.rank1.json"]
    job = doc["job"]
    assert job["schema"] == "opskew.profile.job/1" and job["world_size"] == 2
    assert [(r["rank"], r["report"], r["w_ns"]["median"], r["traces"]) for r in job["ranks"]] == \
        [(0, "report.rank0.json", 500.0, 3), (1, "report.rank1.json", 600.0, 3)]
    # The job report on disk is the document's, the job summary too.
    assert json.loads((out / "report.json").read_text()) == job and doc["job_report"] == str(out / "report.json")
    js = doc["job_summary"]
    assert js["error"] is None and js["earlier"] == 2 and js["path"] == str(out / "job-summary.json")
    assert json.loads((out / "job-summary.json").read_text()) == js["doc"]
    assert js["doc"]["schema"] == "opskew.job_summary/1" and js["doc"]["family"] == "gloo"
    assert [p["path"] for p in doc["pictures"]] == [str(out / "report.rank0.png"), str(out / "report.rank1.png")]
    lines = text.lines(doc)
    assert lines[:3] == [f"opskew profile: 2 rank(s); job report {out / 'report.json'}",
                         "  rank 0: W 500 ns [400 ns, 700 ns], inflation +10.0%, 6 pairs, 3 trace(s); the script "
                         "returned",
                         "  rank 1: W 600 ns [400 ns, 800 ns], inflation +10.0%, 6 pairs, 3 trace(s); the script "
                         "returned"]
    assert lines[3].startswith(f"opskew profile: job summary {out / 'job-summary.json'} (opskew summary {out} "
                               "prints it): collectives gloo, ")
    assert lines[3].endswith("; from each rank's latest cycles, not its 2 earlier ones")
    # Nothing written since: nothing fresh, and the document says so.
    assert L.fresh(str(out), L.stamps(str(out))) == []
    none = L.finished(str(out), [])
    assert not none["written"] and text.lines(none) == [f"opskew profile: no report was written to {out}"]


def test_a_job_summary_that_fails_is_said_and_the_job_report_stands(tmp_path):
    out = tmp_path / "one"
    _rank_folder(out, ranks=1)
    doc = L.finished(str(out), ["report.rank0.json"])
    assert doc["job"]["world_size"] == 1 and (out / "report.json").is_file()
    assert doc["job_summary"]["doc"] is None and "2 ranks or more" in doc["job_summary"]["error"]
    assert not (out / "job-summary.json").exists()
    assert text.lines(doc)[2].startswith("opskew profile: no job summary (a job summary needs traces of 2 ranks")


def test_finished_reads_one_process_s_report(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    rep = {"schema": "opskew.profile/1", "reports": [], "step_boundaries": 3, "ended_by": "the script returned",
           "step_source": "the first optimizer that stepped (SGD)",
           "conditions": {"schedule": {"skip_first": 10, "wait": 21, "warmup": 1, "active": 7}}}
    (out / "report.json").write_text(json.dumps(rep))
    doc = L.finished(str(out), ["report.json"])
    run = doc["run"]
    assert doc["job"] is None and doc["pictures"] == [] and run["doc"] == rep and run["traces"] == 0
    assert run["traces_dir"] == os.path.join(str(out), "traces")
    assert text.lines(doc) == [
        "opskew profile: no cycle completed (3 step boundaries from the first optimizer that stepped (SGD); the "
        "first cycle needs 39: --skip-first 10 + --wait + --warmup + --active): run more steps, or lower "
        f"--skip-first or --wait; report: {out / 'report.json'}"]
    (out / "report.json").write_text("{not json")
    doc = L.finished(str(out), ["report.json"])
    assert doc["run"]["doc"] is None
    assert text.lines(doc) == [f"opskew profile: {out / 'report.json'} could not be read back"]
